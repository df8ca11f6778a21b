// The worker's model API, as the job sets it up: which credential the
// credential endpoint (net/credential_endpoint.hpp) writes upstream, where
// it comes from, and the sentinel the sandbox gets in its place.
#pragma once

#include <string>

#include "config/settings.hpp"
#include "executors/executor.hpp"
#include "net/credential_endpoint.hpp"

namespace mullet::jobs {

struct ResolvedApi {
  // Upstream, header, credential value, CA file and sentinel; the budget is
  // set per phase.
  net::CredentialEndpointOptions endpoint;
  executors::ApiAccess access;  // what the executor tells the worker
  std::string source;           // where the credential came from, for messages (never the value)
};

// The Claude executor's API: `[claude] credential` names a [[credential]]
// (its value from a host variable, or from a command run here without a
// shell), else the first of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN and
// CLAUDE_CODE_OAUTH_TOKEN in git-mullet's environment, sent to
// `[claude] base_url`. A fresh sentinel each call. Throws usage errors
// (exit 2) naming what is missing, never the value.
ResolvedApi resolve_claude_api(const config::Settings& settings);

// The base URL the Claude executor's credential endpoint will forward to,
// read from the settings alone (no credential is fetched): for plans and
// `doctor`.
std::string planned_claude_upstream(const config::Settings& settings);

}  // namespace mullet::jobs

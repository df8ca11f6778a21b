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

// The worker's API, from where `executor` says its credential comes
// (Executor::api_source): the [[credential]] its setting names (its value
// from a host variable, or from a command run here without a shell), else
// the first of its host variables set in git-mullet's environment, sent to
// its base URL. A fresh sentinel each call. Throws usage errors (exit 2)
// naming what is missing, never the value.
ResolvedApi resolve_worker_api(const config::Settings& settings, const executors::Executor& executor);

// The base URL the credential endpoint will forward to, read from the
// settings alone (no credential is fetched): for plans and `doctor`. Empty
// when nothing names one.
std::string planned_upstream(const config::Settings& settings, const executors::Executor& executor);

}  // namespace mullet::jobs

#include "jobs/api_access.hpp"

#include <algorithm>
#include <cstdlib>

#include "sandbox/plan.hpp"
#include "util/error.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

// A credential command that hangs (a pinentry nobody answers) must not hang
// the job's start.
constexpr int credential_command_deadline_seconds = 60;
// More than any API key or token; a command printing more is not printing one.
constexpr std::size_t max_credential_bytes = std::size_t{16} * 1024;

std::string host_variable(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value != nullptr ? value : "";
}

// What the command printed, without its final line break; a failure names
// the command and its exit, never its output (which may hold the secret).
std::string run_credential_command(const config::Credential& credential) {
  util::SpawnOptions options;
  options.argv = credential.command;
  options.argv[0] = util::find_in_path(options.argv[0], util::host_path());
  options.env = util::current_environment();
  const std::string shown = "[[credential]] " + credential.name + " (" + credential.origin + "): its command " +
                            util::terminal_safe(util::shell_join(credential.command));
  util::CapturedRun run;
  try {
    run = util::run_capture(options, {}, {credential_command_deadline_seconds, true});
  } catch (const Error& error) {
    throw usage_error(shown + " could not run: " + error.what(), "check the command in your user config");
  }
  if (!run.status.exited() || run.status.code != 0) {
    throw usage_error(shown + " failed (" + run.status.describe() + ")",
                      "run it yourself to see why; git-mullet runs it without a shell, once per job");
  }
  std::string value = run.out;
  while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  // pass(1) and the like print the secret on the first line, notes after it.
  if (const auto line_end = value.find('\n'); line_end != std::string::npos) value.erase(line_end);
  if (!value.empty() && value.back() == '\r') value.pop_back();
  if (value.empty() || value.size() > max_credential_bytes) {
    throw usage_error(shown + " printed " + (value.empty() ? "nothing" : "more than a credential") +
                      " on its first line");
  }
  return value;
}

ResolvedApi from_table(const config::Credential& credential, const std::vector<std::string>& sandbox_env) {
  ResolvedApi api;
  api.source = "[[credential]] " + credential.name;
  if (!credential.env.empty() &&
      std::find(sandbox_env.begin(), sandbox_env.end(), credential.env) != sandbox_env.end()) {
    throw usage_error("[sandbox] env lists " + credential.env + ", the variable of " + api.source +
                          ": the credential would be inside the sandbox",
                      "remove it from [sandbox] env; the credential endpoint uses it from git-mullet's environment");
  }
  api.endpoint.upstream = value_or_throw(net::parse_upstream_url(credential.base_url));
  api.endpoint.header = {credential.header, credential.format};
  api.endpoint.ca_file = credential.ca_file;
  if (!credential.env.empty()) {
    api.endpoint.credential = host_variable(credential.env);
    if (api.endpoint.credential.empty()) {
      throw usage_error(api.source + " (" + credential.origin + ") takes its value from $" + credential.env +
                            ", which is not set in git-mullet's environment",
                        "export " + credential.env + " before running git mullet");
    }
  } else {
    api.endpoint.credential = run_credential_command(credential);
  }
  api.access.auth = util::to_lower(credential.header) == "authorization" ? executors::ApiAuth::auth_token
                                                                         : executors::ApiAuth::api_key;
  return api;
}

ResolvedApi from_host_environment(const executors::ApiSource& source) {
  std::vector<std::string> names;
  for (const auto& candidate : source.host_variables) {
    names.push_back(candidate.variable);
    std::string value = host_variable(candidate.variable);
    if (value.empty()) continue;
    ResolvedApi api;
    api.source = candidate.variable + " from git-mullet's environment";
    api.endpoint.upstream = value_or_throw(net::parse_upstream_url(source.base_url));
    api.endpoint.header = {candidate.header, candidate.format};
    api.endpoint.credential = std::move(value);
    api.access.auth = candidate.auth;
    return api;
  }
  const std::string named_table =
      "add a [[credential]] to your user config and name it in " + source.setting + "; it never enters the sandbox";
  if (names.empty()) throw usage_error(source.worker + " needs an API credential, and there is none", named_table);
  std::string variables = names.front();
  if (names.size() > 1) variables += " (or " + util::join({names.begin() + 1, names.end()}, ", ") + ")";
  throw usage_error(source.worker + " needs an API credential, and there is none",
                    "export " + variables + " before running git mullet, or " + named_table);
}

}  // namespace

ResolvedApi resolve_worker_api(const config::Settings& settings, const executors::Executor& executor) {
  const executors::ApiSource source = executor.api_source(settings);
  ResolvedApi api;
  if (!source.credential_name.empty()) {
    const auto& all = settings.credentials;
    const auto found = std::find_if(all.begin(), all.end(), [&](const config::Credential& credential) {
      return credential.name == source.credential_name;
    });
    if (found == all.end()) {
      throw usage_error(source.setting + " names '" + util::terminal_safe(source.credential_name) +
                            "', and your user config has no [[credential]] of that name",
                        "add a [[credential]] table named so (name, base_url, header, env or command)");
    }
    api = from_table(*found, settings.sandbox.env);
  } else {
    api = from_host_environment(source);
  }
  api.endpoint.sentinel = net::make_sentinel();
  api.access.sentinel = api.endpoint.sentinel;
  api.access.base_url = "http://127.0.0.1:" + std::to_string(sandbox::inside::api_port);
  return api;
}

std::string planned_upstream(const config::Settings& settings, const executors::Executor& executor) {
  const executors::ApiSource source = executor.api_source(settings);
  if (source.credential_name.empty()) return source.base_url;
  for (const auto& credential : settings.credentials) {
    if (credential.name == source.credential_name) return credential.base_url;
  }
  return {};
}

}  // namespace mullet::jobs

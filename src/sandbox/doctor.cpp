#include "sandbox/doctor.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>

#include "sandbox/plan.hpp"
#include "sandbox/runner.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::sandbox {
namespace {

std::string read_sysctl(const std::string& path) {
  try {
    return util::trim(util::read_file_if_exists(path).value_or(""));
  } catch (const Error&) {
    return "";
  }
}

// The first line the program prints for `flag`; a program that does not
// answer in time is as good as missing.
Result<std::string> program_version(const std::string& program, const std::string& flag) {
  util::SpawnOptions options;
  options.argv = {program, flag};
  options.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  try {
    const auto run = util::run_capture(options, {}, {util::probe_deadline_seconds, true});
    return util::first_line(run.out.empty() ? run.err : run.out, 80);
  } catch (const Error& error) {
    return fail(error);
  }
}

Check check_program(const std::string& name, const std::string& program, const std::string& fix, bool required,
                    const std::string& version_flag = "--version") {
  const std::string found = util::find_in_path(program, util::host_path());
  Check check{name, !found.empty(), required, {}, fix};
  if (found.empty()) {
    check.detail = program + " not found on PATH";
  } else if (const auto version = program_version(found, version_flag)) {
    check.detail = *version + " (" + found + ")";
  } else {
    check.ok = false;
    check.detail = version.error().what();
  }
  return check;
}

// Starts a throwaway sandbox the way jobs do (same namespaces, a uid of
// theirs).
Check probe_sandbox(std::optional<uid_t> sandbox_uid) {
  Check check{"sandbox starts", false, true, {}, {}};
  std::string bwrap;
  try {
    bwrap = find_bwrap();
  } catch (const Error& error) {
    check.detail = error.what();
    check.fix = error.hint();
    return check;
  }
  util::SpawnOptions options;
  options.argv = {bwrap,
                  "--unshare-user",
                  "--unshare-ipc",
                  "--unshare-pid",
                  "--unshare-net",
                  "--unshare-uts",
                  "--unshare-cgroup",
                  "--die-with-parent",
                  "--new-session",
                  "--cap-drop",
                  "ALL",
                  "--ro-bind",
                  "/usr",
                  "/usr",
                  "--symlink",
                  "usr/bin",
                  "/bin",
                  "--symlink",
                  "usr/lib",
                  "/lib",
                  "--symlink",
                  "usr/lib64",
                  "/lib64",
                  "--proc",
                  "/proc",
                  "--dev",
                  "/dev",
                  "--",
                  "/usr/bin/true"};
  options.env = {{"PATH", inside::path}};
  if (sandbox_uid) {
    options.uid = *sandbox_uid;
    options.gid = static_cast<gid_t>(*sandbox_uid);
  }
  try {
    const auto run = util::run_capture(options, {}, {util::probe_deadline_seconds, true});
    check.ok = run.status.success();
    check.detail = check.ok ? "bubblewrap built a test sandbox" : util::trim(run.err + run.out);
    if (!check.ok) check.fix = diagnose_bwrap_failure(run.err + run.out);
  } catch (const Error& error) {
    check.detail = error.what();
  }
  return check;
}

}  // namespace

std::string diagnose_bwrap_failure(const std::string& output) {
  if (output.find("No permissions to create") != std::string::npos ||
      output.find("No permissions to creating") != std::string::npos ||
      output.find("setting up uid map") != std::string::npos ||
      output.find("Creating new namespace failed") != std::string::npos ||
      output.find("unshare") != std::string::npos) {
    return "unprivileged user namespaces are not available. On Ubuntu 23.10 and later AppArmor restricts them: "
           "add an AppArmor profile that allows userns for /usr/bin/bwrap (see the README), or check "
           "user.max_user_namespaces and kernel.unprivileged_userns_clone";
  }
  if (output.find("Can't find source path") != std::string::npos || output.find("Can't mount") != std::string::npos) {
    return "a path the sandbox binds is missing or unreadable; check the job directory and the repository paths";
  }
  return "run `git mullet doctor` to see which requirement is missing";
}

std::string limits_mechanism() {
  return "rlimits (processes, file size) plus git-mullet's own watch of the sandbox's memory, disk use, wall clock "
         "and inactivity; cgroups are not used";
}

std::vector<Check> run_doctor_checks(std::optional<uid_t> sandbox_uid) {
  std::vector<Check> checks;
  utsname host{};
  ::uname(&host);
  checks.push_back({"platform", std::string(host.sysname) == "Linux", true,
                    std::string(host.sysname) + " " + host.release, "git-mullet runs workers only on Linux"});
  checks.push_back(check_program("bubblewrap", "bwrap", "apt-get install bubblewrap", true));

  const std::string max_namespaces = read_sysctl("/proc/sys/user/max_user_namespaces");
  checks.push_back({"user namespaces", max_namespaces.empty() || max_namespaces != "0", true,
                    "user.max_user_namespaces = " + (max_namespaces.empty() ? std::string("?") : max_namespaces),
                    "sysctl -w user.max_user_namespaces=15000"});
  if (const auto clone = read_sysctl("/proc/sys/kernel/unprivileged_userns_clone"); !clone.empty()) {
    checks.push_back({"unprivileged user namespaces", clone == "1", true, "kernel.unprivileged_userns_clone = " + clone,
                      "sysctl -w kernel.unprivileged_userns_clone=1"});
  }
  if (const auto apparmor = read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); !apparmor.empty()) {
    checks.push_back({"AppArmor user namespace restriction", apparmor == "0", false,
                      "kernel.apparmor_restrict_unprivileged_userns = " + apparmor,
                      "give /usr/bin/bwrap an AppArmor profile with `userns,` (see the README)"});
  }
  checks.push_back(probe_sandbox(sandbox_uid));
  const std::string tmpdir = std::string("/tmp/mullet-XXXX");
  const std::string socket_example = tmpdir + "/claude-65534/claude-http-0123456789abcdef.sock";
  checks.push_back({"TMPDIR length", socket_example.size() < 108, true,
                    "TMPDIR inside is " + tmpdir + " (" + std::to_string(tmpdir.size()) +
                        " bytes; a bridge socket path is " + std::to_string(socket_example.size()) + " of 107)",
                    ""});
  checks.push_back({"limits", true, true, limits_mechanism(), ""});
  checks.push_back(check_program("git", "git", "apt-get install git", true));
  checks.push_back(
      check_program("socat (Claude Code's own sandbox needs it)", "socat", "apt-get install socat", false, "-V"));
  return checks;
}

nlohmann::json checks_to_json(const std::vector<Check>& checks) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& check : checks) {
    array.push_back({{"name", check.name},
                     {"ok", check.ok},
                     {"required", check.required},
                     {"detail", check.detail},
                     {"fix", check.ok ? nlohmann::json() : nlohmann::json(check.fix)}});
  }
  return array;
}

}  // namespace mullet::sandbox

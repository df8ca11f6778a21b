#include "sandbox/doctor.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>

#include "sandbox/cgroup.hpp"
#include "sandbox/host.hpp"
#include "sandbox/plan.hpp"
#include "sandbox/policy.hpp"
#include "sandbox/runner.hpp"
#include "util/clock.hpp"
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

// What a test sandbox is built from: the directories a job's plan binds,
// empty, in a private scratch directory of its own.
PolicyInputs probe_inputs(const std::string& scratch, std::optional<uid_t> sandbox_uid) {
  PolicyInputs in;
  in.phase = "doctor";
  in.work_tree = scratch + "/work";
  in.clone_git_dir = scratch + "/git";
  in.objects_dir = scratch + "/objects";
  in.home_dir = scratch + "/home";
  for (const auto* dir : {&in.work_tree, &in.clone_git_dir, &in.objects_dir, &in.home_dir}) util::make_dirs(*dir, 0700);
  in.empty_file = scratch + "/empty";
  util::write_file(in.empty_file, "", 0444);
  in.helper_binary = util::self_executable();
  in.tmp_name = "mullet-" + util::random_hex(4);
  in.root_entries = scan_host_root();
  in.host_env = util::current_environment();
  in.command = {"true"};
  in.limits.wall_seconds = util::probe_deadline_seconds;
  if (sandbox_uid) {
    in.host_uid = *sandbox_uid;
    in.host_gid = static_cast<gid_t>(*sandbox_uid);
    // As for a job: the sandbox's uid owns what it may write.
    util::chown_tree(in.work_tree, *sandbox_uid, static_cast<gid_t>(*sandbox_uid));
    util::chown_tree(in.home_dir, *sandbox_uid, static_cast<gid_t>(*sandbox_uid));
  }
  return in;
}

// Starts a throwaway sandbox the way jobs start theirs: a Plan from the same
// policy, the same bwrap translation and runner, a uid of theirs, and our
// wall check inside before `true`. So "ok" means the walls jobs get can be
// built here, not just that some bwrap command line works.
Check probe_sandbox(std::optional<uid_t> sandbox_uid) {
  Check check{"sandbox starts", false, true, {}, {}};
  try {
    const util::TempDir scratch("/tmp", "mullet-doctor-");
    const Plan plan = build_plan(probe_inputs(scratch.path(), sandbox_uid));
    const RunResult run = run_sandboxed(plan, {});
    check.ok = run.ended_by == StopReason::exit && run.status.success();
    if (check.ok) {
      check.detail = "bubblewrap built a test sandbox";
    } else if (run.ended_by == StopReason::timeout) {
      check.detail = "the test sandbox did not finish within " + std::to_string(util::probe_deadline_seconds) + " s";
    } else {
      check.detail =
          "the test sandbox's command failed (" + stop_name(run.ended_by) + ", " + run.status.describe() + ")";
    }
  } catch (const Error& error) {
    // No bwrap, a bubblewrap that cannot start, or a wall check that failed.
    check.detail = error.what();
    check.fix = error.hint();
    // Pointing at doctor from inside doctor helps nobody.
    if (check.fix == diagnose_bwrap_failure("")) {
      check.fix =
          "the bubblewrap found on PATH does not build every wall jobs need; use the distribution's "
          "(apt-get install bubblewrap) and check what else on PATH is called bwrap";
    }
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

std::string limits_mechanism(const std::string& cgroup_setting) {
  return describe_enforcement(detect_host_cgroups(cgroup_setting)) +
         "; rlimits for file size, and git-mullet's own watch of disk use, wall clock and inactivity";
}

std::vector<Check> run_doctor_checks(std::optional<uid_t> sandbox_uid, const std::string& cgroup_setting) {
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
  checks.push_back({"limits", true, true, limits_mechanism(cgroup_setting), ""});
  checks.push_back(check_program("git", "git", "apt-get install git", true));
  checks.push_back(
      check_program("socat (Claude Code's own sandbox needs it)", "socat", "apt-get install socat", false, "-V"));
  // Without it, opencode's glob and grep tools fail inside the sandbox (it
  // would download one, and has no network there).
  checks.push_back(check_program("ripgrep (opencode's glob and grep tools need it)", "rg", "apt-get install ripgrep",
                                 false, "--version"));
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

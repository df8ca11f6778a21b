#include <doctest/doctest.h>

#include <sys/time.h>
#include <unistd.h>

#include <regex>
#include <string>

#include "sandbox/cgroup.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"

using mullet::sandbox::CgroupHost;
using mullet::sandbox::CgroupProbe;
using mullet::sandbox::CgroupVersion;
using mullet::sandbox::CgroupWrite;
using mullet::sandbox::JobCgroup;

namespace {

// This machine's kind of mountinfo: v1 hierarchies plus a v2 one with only hugetlb.
const std::string hybrid_mountinfo =
    "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "33 25 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "34 33 0:29 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw\n"
    "36 33 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory\n"
    "37 33 0:32 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids\n"
    "38 33 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:16 - cgroup cgroup rw,cpu,cpuacct\n";

const std::string v2_mountinfo =
    "33 25 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";

const std::string user_cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope\n";

struct FakeTree {
  mullet::util::TempDir dir{"/tmp", "mullet-unit-cgroup-"};
  std::string root() const { return dir.path(); }
  void file(const std::string& path, const std::string& text) const {
    mullet::util::make_dirs(root() + path.substr(0, path.rfind('/')));
    mullet::util::write_file(root() + path, text);
  }
  std::string read(const std::string& path) const { return mullet::util::read_file(root() + path); }
};

CgroupProbe probe_of(const FakeTree& tree, const std::string& mountinfo, bool as_root) {
  CgroupProbe probe;
  probe.mountinfo = mountinfo;
  probe.self_cgroup = user_cgroup;
  probe.root = tree.root();
  probe.as_root = as_root;
  return probe;
}

void make_hybrid(const FakeTree& tree, bool memsw) {
  tree.file("/sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n");
  tree.file("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  if (memsw) tree.file("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes", "9223372036854771712\n");
  tree.file("/sys/fs/cgroup/pids/cgroup.procs", "1\n");
}

}  // namespace

TEST_CASE("cgroup detection: v1 as root on a hybrid host; the hugetlb-only v2 is passed over") {
  const FakeTree tree;
  make_hybrid(tree, true);
  const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, hybrid_mountinfo, true));
  CHECK(host.version == CgroupVersion::v1);
  CHECK(host.memory_parent == tree.root() + "/sys/fs/cgroup/memory/git-mullet");
  CHECK(host.pids_parent == tree.root() + "/sys/fs/cgroup/pids/git-mullet");
  CHECK(host.swap_accounted);
  CHECK(mullet::sandbox::describe_enforcement(host).find("memory: cgroup v1 (kernel, swap included)") == 0);

  const FakeTree no_memsw;
  make_hybrid(no_memsw, false);
  CHECK_FALSE(mullet::sandbox::detect_cgroups(probe_of(no_memsw, hybrid_mountinfo, true)).swap_accounted);
}

TEST_CASE("cgroup detection: v1 as an unprivileged user is none, and enforcement says polling") {
  const FakeTree tree;
  make_hybrid(tree, true);
  const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, hybrid_mountinfo, false));
  CHECK(host.version == CgroupVersion::none);
  CHECK(host.note.find("only by root") != std::string::npos);
  const std::string said = mullet::sandbox::describe_enforcement(host);
  CHECK(said.find("memory: polling") == 0);
  CHECK(said.find("processes: rlimit") != std::string::npos);
}

TEST_CASE("cgroup detection: v2 as root takes a subtree of its own") {
  const FakeTree tree;
  tree.file("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
  const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, v2_mountinfo, true));
  CHECK(host.version == CgroupVersion::v2);
  CHECK(host.memory_parent == tree.root() + "/sys/fs/cgroup/git-mullet");
  CHECK(host.pids_parent == host.memory_parent);
  CHECK(mullet::sandbox::describe_enforcement(host).find("memory: cgroup v2 (kernel") == 0);

  const FakeTree without;
  without.file("/sys/fs/cgroup/cgroup.controllers", "cpu io\n");
  CHECK(mullet::sandbox::detect_cgroups(probe_of(without, v2_mountinfo, true)).version == CgroupVersion::none);
}

TEST_CASE("cgroup detection: v2 delegated: the deepest cgroup above ours that hands memory and pids down") {
  const FakeTree tree;
  const std::string service = "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service";
  tree.file("/sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
  tree.file(service + "/cgroup.subtree_control", "cpu memory pids\n");
  tree.file(service + "/app.slice/cgroup.subtree_control", "memory pids\n");
  tree.file(service + "/app.slice/term.scope/cgroup.subtree_control", "\n");
  const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, v2_mountinfo, false));
  CHECK(host.version == CgroupVersion::v2);
  CHECK(host.memory_parent == tree.root() + service + "/app.slice/git-mullet");

  SUBCASE("an explicit [sandbox] cgroup directory wins") {
    tree.file("/sys/fs/cgroup/mine/cgroup.controllers", "memory pids\n");
    CgroupProbe probe = probe_of(tree, v2_mountinfo, false);
    probe.setting = "/sys/fs/cgroup/mine";
    CHECK(mullet::sandbox::detect_cgroups(probe).memory_parent == tree.root() + "/sys/fs/cgroup/mine/git-mullet");
    // One that is not usable is none, not the delegated one found otherwise.
    probe.setting = "/sys/fs/cgroup/absent";
    const CgroupHost absent = mullet::sandbox::detect_cgroups(probe);
    CHECK(absent.version == CgroupVersion::none);
    CHECK(absent.note.find("[sandbox] cgroup /sys/fs/cgroup/absent") == 0);
    // Nor a directory outside every v2 mount.
    tree.file("/tmp/fake/cgroup.controllers", "memory pids\n");
    probe.setting = "/tmp/fake";
    CHECK(mullet::sandbox::detect_cgroups(probe).version == CgroupVersion::none);
  }
  SUBCASE("off: none, whatever the host offers") {
    CgroupProbe probe = probe_of(tree, v2_mountinfo, false);
    probe.setting = "off";
    const CgroupHost off = mullet::sandbox::detect_cgroups(probe);
    CHECK(off.version == CgroupVersion::none);
    CHECK(mullet::sandbox::describe_enforcement(off).find("memory: polling") == 0);
    CHECK(mullet::sandbox::describe_enforcement(off).find("[sandbox] cgroup = \"off\"") != std::string::npos);
  }
}

TEST_CASE("cgroup detection: nothing delegated, nothing mounted: none") {
  const FakeTree tree;
  tree.file("/sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
  tree.file("/sys/fs/cgroup/user.slice/cgroup.subtree_control", "cpu\n");
  const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, v2_mountinfo, false));
  CHECK(host.version == CgroupVersion::none);
  CHECK(host.note.find("no delegated v2 subtree") != std::string::npos);
  CHECK(mullet::sandbox::detect_cgroups(probe_of(tree, "", true)).version == CgroupVersion::none);
}

TEST_CASE("cgroup limit files: memory with swap, processes; zero writes nothing") {
  CgroupHost v1;
  v1.version = CgroupVersion::v1;
  v1.swap_accounted = true;
  CHECK(mullet::sandbox::cgroup_limit_writes(v1, 64, 10) ==
        std::vector<CgroupWrite>{{"memory", "memory.limit_in_bytes", "67108864"},
                                 {"memory", "memory.memsw.limit_in_bytes", "67108864"},
                                 {"pids", "pids.max", "10"}});
  v1.swap_accounted = false;
  CHECK(mullet::sandbox::cgroup_limit_writes(v1, 1, 0) ==
        std::vector<CgroupWrite>{{"memory", "memory.limit_in_bytes", "1048576"}, {"memory", "memory.swappiness", "0"}});
  CgroupHost v2;
  v2.version = CgroupVersion::v2;
  CHECK(mullet::sandbox::cgroup_limit_writes(v2, 2, 5) == std::vector<CgroupWrite>{{"memory", "memory.max", "2097152"},
                                                                                   {"memory", "memory.swap.max", "0"},
                                                                                   {"memory", "memory.oom.group", "1"},
                                                                                   {"pids", "pids.max", "5"}});
  CHECK(mullet::sandbox::cgroup_limit_writes(v2, 0, 0).empty());
  CHECK(mullet::sandbox::cgroup_limit_writes(CgroupHost{}, 64, 10).empty());
}

TEST_CASE("OOM kill counters: v1 memory.oom_control, v2 memory.events") {
  CHECK(mullet::sandbox::parse_oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n") == 3);
  CHECK(mullet::sandbox::parse_oom_kills("low 0\nhigh 0\nmax 7\noom 1\noom_group_kill 4\noom_kill 2\n") == 2);
  CHECK(mullet::sandbox::parse_oom_kills("oom_kill_disable 0\nunder_oom 0\n") == 0);
  CHECK(mullet::sandbox::parse_oom_kills("") == 0);
  CHECK(mullet::sandbox::parse_oom_kills("oom_kill garbage\n") == 0);
}

TEST_CASE("JobCgroup on a fake v2 tree: controllers handed down, limits written, events read, names listed") {
  const FakeTree tree;
  tree.file("/sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
  tree.file("/sys/fs/cgroup/cgroup.subtree_control", "\n");
  const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, v2_mountinfo, true));
  REQUIRE(host.version == CgroupVersion::v2);
  // What an earlier run of another job left (empty: a real cgroup's files
  // are the kernel's, rmdir takes it).
  mullet::util::make_dirs(host.memory_parent + "/0123456789-2");

  const JobCgroup cgroup(host, "abcdef0123", 64, 10);
  REQUIRE(cgroup.directories().size() == 1);
  const std::string dir = cgroup.directories().front();
  CHECK(dir == host.memory_parent + "/abcdef0123");
  CHECK(mullet::sandbox::job_cgroup_names(host) == std::vector<std::string>{"0123456789-2", "abcdef0123"});
  CHECK(mullet::sandbox::remove_job_cgroup(host, "0123456789-2"));
  CHECK(mullet::sandbox::job_cgroup_names(host) == std::vector<std::string>{"abcdef0123"});
  CHECK(tree.read("/sys/fs/cgroup/cgroup.subtree_control") == "+memory +pids");
  CHECK(mullet::util::read_file(host.memory_parent + "/cgroup.subtree_control") == "+memory +pids");
  CHECK(mullet::util::read_file(dir + "/memory.max") == "67108864");
  CHECK(mullet::util::read_file(dir + "/memory.swap.max") == "0");
  CHECK(mullet::util::read_file(dir + "/pids.max") == "10");
  CHECK(cgroup.procs_fds().size() == 1);
  CHECK(cgroup.oom_kills() == 0);
  mullet::util::write_file(dir + "/memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n");
  CHECK(cgroup.oom_kills() == 1);
  mullet::util::write_file(dir + "/memory.peak", "67100000\n");
  CHECK(cgroup.peak_memory_bytes() == 67100000);
}

TEST_CASE("JobCgroup on a fake v1 tree: one cgroup per hierarchy, pids.max in the pids one") {
  const FakeTree tree;
  make_hybrid(tree, false);
  const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, hybrid_mountinfo, true));
  REQUIRE(host.version == CgroupVersion::v1);
  const JobCgroup cgroup(host, "abcdef0123-2", 32, 7);
  REQUIRE(cgroup.directories().size() == 2);
  CHECK(mullet::util::read_file(cgroup.directories()[0] + "/memory.limit_in_bytes") == "33554432");
  CHECK(mullet::util::read_file(cgroup.directories()[0] + "/memory.swappiness") == "0");
  CHECK(mullet::util::read_file(cgroup.directories()[1] + "/pids.max") == "7");
  CHECK_FALSE(mullet::util::exists(cgroup.directories()[0] + "/pids.max"));
  CHECK(cgroup.procs_fds().size() == 2);
  CHECK(cgroup.directories()[0] == host.memory_parent + "/abcdef0123-2");
  CHECK(cgroup.directories()[1] == host.pids_parent + "/abcdef0123-2");
  mullet::util::write_file(cgroup.directories()[0] + "/memory.oom_control",
                           "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  CHECK(cgroup.oom_kills() == 2);
}

TEST_CASE("JobCgroup refuses a name that is no single path component") {
  const FakeTree tree;
  tree.file("/sys/fs/cgroup/cgroup.controllers", "memory pids\n");
  const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, v2_mountinfo, true));
  for (const std::string name : {"", ".", "..", "a/b", "../escape"}) {
    INFO("name: " << name);
    CHECK_THROWS_AS(JobCgroup(host, name, 1, 1), mullet::Error);
  }
}

TEST_CASE("enforcement for a person: only a cgroup's line matches memory.*cgroup v[12] (bench/limits reads it)") {
  const std::regex kernel("memory.*cgroup v[12]");
  const FakeTree tree;
  make_hybrid(tree, true);
  for (const bool as_root : {true, false}) {
    const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, hybrid_mountinfo, as_root));
    CHECK(std::regex_search(mullet::sandbox::describe_enforcement(host), kernel) == as_root);
  }
  CgroupProbe none = probe_of(tree, v2_mountinfo, false);
  CHECK_FALSE(std::regex_search(mullet::sandbox::describe_enforcement(mullet::sandbox::detect_cgroups(none)), kernel));
  none.setting = "/sys/fs/cgroup/nowhere";
  CHECK_FALSE(std::regex_search(mullet::sandbox::describe_enforcement(mullet::sandbox::detect_cgroups(none)), kernel));
}

TEST_CASE("a cgroup is idle when it holds no process and was made over the given age ago") {
  const FakeTree tree;
  make_hybrid(tree, true);
  const CgroupHost host = mullet::sandbox::detect_cgroups(probe_of(tree, hybrid_mountinfo, true));
  REQUIRE(host.version == CgroupVersion::v1);
  const auto make = [&](const std::string& name, const std::string& procs, bool old) {
    for (const auto& parent : {host.memory_parent, host.pids_parent}) {
      mullet::util::make_dirs(parent + "/" + name);
      mullet::util::write_file(parent + "/" + name + "/cgroup.procs", procs);
      if (old) {
        const timeval long_ago[2] = {{1000, 0}, {1000, 0}};
        REQUIRE(::utimes((parent + "/" + name).c_str(), long_ago) == 0);
      }
    }
  };
  make("0123456789", "", true);
  make("0123456789-2", "4242\n", true);
  make("abcdef0123", "", false);
  CHECK(mullet::sandbox::job_cgroup_idle(host, "0123456789", 60));
  CHECK_FALSE(mullet::sandbox::job_cgroup_idle(host, "0123456789-2", 60));  // a process inside
  CHECK_FALSE(mullet::sandbox::job_cgroup_idle(host, "abcdef0123", 60));    // just made
  CHECK_FALSE(mullet::sandbox::job_cgroup_idle(host, "../memory", 60));
  CHECK_FALSE(mullet::sandbox::job_cgroup_idle(CgroupHost{}, "0123456789", 60));
}

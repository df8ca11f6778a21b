#include <doctest/doctest.h>

#include <unistd.h>

#include <string>

#include "jobs/stale_cgroups.hpp"

using mullet::jobs::cgroup_owner;
using mullet::jobs::CgroupOwner;

TEST_CASE("a cgroup's name says whose it is: a repository's job, a node of one, a shell's process") {
  CHECK(cgroup_owner("0badcafe.0123456789") == CgroupOwner{"0badcafe", "0123456789", 0});
  CHECK(cgroup_owner("0badcafe.abcdef0123-3") == CgroupOwner{"0badcafe", "abcdef0123", 0});
  CHECK(cgroup_owner("0badcafe.abcdef0123-shell-4242") == CgroupOwner{"0badcafe", "abcdef0123", 4242});
  CHECK(mullet::jobs::job_cgroup_name("0badcafe", "abcdef0123") == "0badcafe.abcdef0123");
  CHECK(mullet::jobs::node_cgroup_name("0badcafe", "abcdef0123", 3) == "0badcafe.abcdef0123-3");
  const std::string mine = mullet::jobs::shell_cgroup_name("0badcafe", "abcdef0123");
  CHECK(cgroup_owner(mine) == CgroupOwner{"0badcafe", "abcdef0123", static_cast<int>(::getpid())});
  // Names of no job of ours are left alone: without a repository key (as
  // older versions named them), or with a malformed one, or a malformed rest.
  for (const std::string rest : {"", "abcdef012", "ABCDEF0123", "abcdef0123x", "abcdef0123-", "abcdef0123-0",
                                 "abcdef0123-01", "abcdef0123--1", "abcdef0123-shell-", "abcdef0123-shell-0",
                                 "abcdef0123-shell-12x", "user.slice", "abcdef0123-99999999999999999999"}) {
    INFO("name: " << rest);
    CHECK_FALSE(cgroup_owner(rest).has_value());
    CHECK_FALSE(cgroup_owner("0badcafe." + rest).has_value());
  }
  for (const std::string key : {"", "0badcaf", "0BADCAFE", "0badcafe0", "0badcafx", "0badcafe-"}) {
    INFO("key: " << key);
    CHECK_FALSE(cgroup_owner(key + ".abcdef0123").has_value());
    CHECK_FALSE(cgroup_owner(key + "abcdef0123").has_value());
  }
  CHECK_FALSE(cgroup_owner("abcdef0123").has_value());
}

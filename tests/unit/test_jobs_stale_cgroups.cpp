#include <doctest/doctest.h>

#include <unistd.h>

#include <string>

#include "jobs/stale_cgroups.hpp"

using mullet::jobs::cgroup_owner;
using mullet::jobs::CgroupOwner;

TEST_CASE("a cgroup's name says whose it is: a job, a node of one, a shell's process") {
  CHECK(cgroup_owner("0123456789") == CgroupOwner{"0123456789", 0});
  CHECK(cgroup_owner("abcdef0123-3") == CgroupOwner{"abcdef0123", 0});
  CHECK(cgroup_owner("abcdef0123-shell-4242") == CgroupOwner{"abcdef0123", 4242});
  const std::string mine = mullet::jobs::shell_cgroup_name("abcdef0123");
  CHECK(cgroup_owner(mine) == CgroupOwner{"abcdef0123", static_cast<int>(::getpid())});
  // Names of no job of ours are left alone.
  for (const std::string other : {"", "abcdef012", "ABCDEF0123", "abcdef0123x", "abcdef0123-", "abcdef0123-0",
                                  "abcdef0123-01", "abcdef0123--1", "abcdef0123-shell-", "abcdef0123-shell-0",
                                  "abcdef0123-shell-12x", "user.slice", "abcdef0123-99999999999999999999"}) {
    INFO("name: " << other);
    CHECK_FALSE(cgroup_owner(other).has_value());
  }
}

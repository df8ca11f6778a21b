#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "sandbox/overlay.hpp"
#include "util/fs.hpp"

#include "support/support.hpp"

using mullet::test::ScratchDir;

// This machine class allows overlays in a user namespace (kernel 5.11 and
// later) and, as root, in a mount namespace: the probe must say so, also
// over paths with the characters overlayfs's option string treats specially
// (the layers are named by /proc/self/fd/N, never by path).
TEST_CASE("the overlay probe mounts and copies up, whatever the path holds") {
  ScratchDir scratch;
  const std::string odd = scratch / "a,b:c\\d=e";
  mullet::util::make_dirs(odd, 0700);
  CHECK(mullet::sandbox::probe_overlay(odd, /*user_namespace=*/true) == "");
  if (::geteuid() == 0) CHECK(mullet::sandbox::probe_overlay(odd, /*user_namespace=*/false) == "");
  // Nothing is left behind.
  CHECK(mullet::util::DirectoryReader(AT_FDCWD, odd).read_all().empty());
}

TEST_CASE("the overlay's options are prepared before fork") {
  const auto child = mullet::sandbox::prepare_overlay_child({"/l", "/u", "/w"}, "/m", true);
  CHECK(child.uid_map == std::to_string(::getuid()) + " " + std::to_string(::getuid()) + " 1\n");
  CHECK(child.gid_map == std::to_string(::getgid()) + " " + std::to_string(::getgid()) + " 1\n");
  CHECK(child.mount_point == "/m");
  CHECK(child.user_namespace);
}

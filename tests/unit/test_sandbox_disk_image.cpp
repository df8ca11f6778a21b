#include <doctest/doctest.h>

#include <string>

#include "sandbox/disk_image.hpp"

using mullet::sandbox::choose_disk_cap;
using mullet::sandbox::describe_disk_cap;
using mullet::sandbox::disk_full_slack;
using mullet::sandbox::DiskCapInputs;
using mullet::sandbox::DiskCapWorkTree;

namespace {

// Everything the image needs.
DiskCapInputs able() {
  DiskCapInputs in;
  in.enabled = true;
  in.disk_mb = 100;
  in.as_root = true;
  in.work_tree = DiskCapWorkTree::kernel_overlay;
  in.mkfs = "/usr/sbin/mkfs.ext4";
  in.loop_control = true;
  return in;
}

std::string why_not(const DiskCapInputs& in) {
  const auto choice = choose_disk_cap(in);
  CHECK_FALSE(choice.kernel);
  return describe_disk_cap(choice, in.disk_mb);
}

}  // namespace

TEST_CASE("disk cap: an ext4 image as root over a kernel overlay, with mkfs.ext4 and loop devices") {
  const auto choice = choose_disk_cap(able());
  CHECK(choice.kernel);
  CHECK(describe_disk_cap(choice, 100) == "ext4 image of 100 MiB (kernel)");
}

TEST_CASE("disk cap: else the watch, saying why") {
  auto in = able();
  in.as_root = false;
  CHECK(why_not(in) == "watched (polling): not root (a loop mount needs root)");
  in = able();
  in.work_tree = DiskCapWorkTree::fuse_overlay;
  CHECK(why_not(in) == "watched (polling): fuse-overlayfs work tree");
  in = able();
  in.work_tree = DiskCapWorkTree::checkout;
  CHECK(why_not(in) == "watched (polling): checkout work tree");
  in = able();
  in.enabled = false;
  CHECK(why_not(in) == "watched (polling): [sandbox] disk_cap = \"off\"");
  in = able();
  in.disk_mb = 0;
  CHECK(why_not(in) == "watched (polling): no disk_mb");
  in = able();
  in.mkfs.clear();
  CHECK(why_not(in) == "watched (polling): mkfs.ext4 missing (install e2fsprogs)");
  in = able();
  in.loop_control = false;
  CHECK(why_not(in) == "watched (polling): no /dev/loop-control");
}

TEST_CASE("disk cap: a full image leaves at most 1% (256 KiB at the least) free") {
  CHECK(disk_full_slack(100ULL << 20U) == (100ULL << 20U) / 100);
  CHECK(disk_full_slack(1ULL << 20U) == 256ULL * 1024ULL);
}

#!/usr/bin/env bash
# Filling the host's disk through the only writable host paths the worker
# has: its work tree and its home. [limits] disk_mb caps them (RLIMIT_FSIZE
# per file, and a watch over the writable binds). Every attack is capped by
# the worker itself at about 1 GiB (2 GiB for the plain fill), and its data
# is removed at the end of the test, pass or fail.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

# The job's bulky data goes when the test ends (the record stays).
cleanup_job_data() {
  [ -n "${JOB:-}" ] || return 0
  local dir
  dir="$(sec_job_dir)"
  case "$dir" in */mullet/jobs/?*) ;; *) return 0 ;; esac
  chmod -R u+rwX "$dir/work" "$dir/upper" "$dir/home" 2>/dev/null
  rm -rf "${dir:?}/work" "${dir:?}/upper" "${dir:?}/home"
}

# usage_mib: what the job left on the host's disk, in its work tree (its
# overlay's upper dir) and home.
usage_mib() {
  local dir
  dir="$(sec_job_dir)"
  # The worker may have made directories unreadable (the user's du could
  # not count them).
  chmod -R u+rwX "$dir/work" "$dir/upper" "$dir/home" 2>/dev/null
  du -sm "$dir/work" "$dir/upper" "$dir/home" 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

# assert_stopped_by_disk_limit LIMIT_MIB: the disk limit stopped the job
# (and it is recorded so). How far past the limit the worker got is printed;
# test_disk_limit_overshoot holds that to a bound.
assert_stopped_by_disk_limit() {
  local ended used
  ended="$(sec_jq 'd["phases"][0]["ended_by"]')"
  used="$(usage_mib)"
  echo "    # left on the host: $used MiB (disk_mb = $1); ended_by $ended" >&2
  if [ "$ended" != disk ]; then
    sec_show
    fail "the worker was not stopped by the disk limit (ended_by $ended); it left $used MiB with disk_mb = $1"
  fi
  sec_assert_state failed disk
}

test_fill_work_tree_stops_at_disk_limit() {
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60'
  # 20 files of 100 MiB (each at most the per-file limit): 2 GiB, then wait
  # for the watch.
  sec_run "finish
for i in \$(seq 1 20); do dd if=/dev/zero of=fill\$i bs=1M count=100 2>/dev/null; done
echo WROTE-ALL
sleep 20"
  sec_assert_worker_ran
  assert_stopped_by_disk_limit 100
}

test_fill_home_stops_at_disk_limit() {
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60'
  sec_run "finish
for i in \$(seq 1 10); do dd if=/dev/zero of=\"\$HOME/fill\$i\" bs=1M count=100 2>/dev/null; done
echo WROTE-ALL
sleep 20"
  sec_assert_worker_ran
  assert_stopped_by_disk_limit 100
}

test_one_huge_file_stops_at_file_size_limit() {
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60'
  sec_run "finish
dd if=/dev/zero of=huge bs=1M count=1024 2>&1 | tail -n 1
echo WROTE-HUGE
sleep 20"
  sec_assert_worker_ran
  # The file's size is read on the host: the watch may stop the worker
  # (the file and the rest of its tree are over disk_mb) before it could
  # report anything itself.
  local huge bytes
  huge="$(job_work "$(sec_job_dir)")/huge"
  bytes="$(stat -c %s "$huge")" || fail "the worker's file is not in its work tree ($huge)"
  [ "$bytes" -le $((100 << 20)) ] || fail "one file grew to $((bytes >> 20)) MiB with disk_mb = 100"
  assert_stopped_by_disk_limit 100
}

test_disk_limit_overshoot() {
  # The watch is polled (and the file system's free space lags behind the
  # page cache), so a worker writing as fast as it can gets somewhat past
  # disk_mb before it is stopped. The bound is loose on purpose, since the
  # machine may be loaded: well under the 3 GiB the attack tries to write.
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60'
  sec_run "finish
for i in \$(seq 1 30); do dd if=/dev/zero of=fill\$i bs=1M count=100 2>/dev/null; done
sleep 20"
  sec_assert_worker_ran
  assert_stopped_by_disk_limit 100
  local used
  used="$(usage_mib)"
  [ "$used" -le 1200 ] || fail "the worker got $used MiB onto the host's disk with disk_mb = 100 before it was stopped"
}

test_disk_limit_counts_data_nested_deep() {
  # Extra: 360 MiB (disk_mb = 100) more than 256 directories down (deeper
  # than any walk of ours: over the limit whatever it holds); the worker
  # then waits through four checks of the watch.
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60'
  sec_run "finish
d=deep; for i in \$(seq 1 260); do d=\$d/d; done
mkdir -p \$d && cd \$d && for i in \$(seq 1 4); do dd if=/dev/zero of=f\$i bs=1M count=90 2>/dev/null; done
echo WROTE-ALL
sleep 8"
  sec_assert_worker_ran
  assert_stopped_by_disk_limit 100
}

test_disk_limit_counts_unreadable_directories() {
  # Extra: 360 MiB in a directory the worker made write-only (mode 0300).
  # git-mullet's watch runs as the user, who cannot list it; as root it can.
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60'
  sec_run "finish
mkdir hide && chmod 300 hide
for i in \$(seq 1 4); do dd if=/dev/zero of=hide/f\$i bs=1M count=90 2>/dev/null; done
echo WROTE-ALL
sleep 8"
  sec_assert_worker_ran
  assert_stopped_by_disk_limit 100
}

test_disk_limit_counts_unlinked_open_files() {
  # Extra: 360 MiB in files kept open and unlinked: they use the disk but
  # have no name.
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60'
  sec_run "finish
python3 -c '
import os, time
fds = []
for i in range(4):
    fd = os.open(\"held%d\" % i, os.O_CREAT | os.O_WRONLY, 0o600)
    os.unlink(\"held%d\" % i)
    for _ in range(90):
        os.write(fd, bytes(1 << 20))
    fds.append(fd)
print(\"HOLDING 360 MiB\", flush=True)
time.sleep(8)
'"
  sec_assert_worker_ran
  local ended
  ended="$(sec_jq 'd["phases"][0]["ended_by"]')"
  if [ "$ended" != disk ]; then
    sec_show
    fail "360 MiB held in unlinked files with disk_mb = 100 was not stopped (ended_by $ended)"
  fi
  sec_assert_state failed disk
}

test_disk_limit_counts_entries_that_take_no_blocks() {
  # 40,000 short symlinks with distinct targets take no data blocks (their
  # target is in the inode), so a watch of st_blocks saw nothing, and the
  # snapshot then stored a loose object of a block each (about 160 MiB)
  # in the user's repository against disk_mb = 2. (Named to sort after
  # ran.marker, which the snapshot then keeps.)
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  local objects_before objects_after
  objects_before="$(du -sk .git/objects | cut -f1)"
  sec_config '[limits]' 'disk_mb = 2' 'timeout = 60'
  sec_run "finish
python3 -c '
import os
for i in range(40000):
    os.symlink(\"t%d\" % i, \"z%d\" % i)
print(\"LINKED\", flush=True)
'
sleep 20"
  sec_assert_worker_ran
  assert_stopped_by_disk_limit 2
  objects_after="$(du -sk .git/objects | cut -f1)"
  echo "    # the repository's objects grew by $(((objects_after - objects_before) / 1024)) MiB" >&2
  [ $((objects_after - objects_before)) -le $((6 * 1024)) ] ||
    fail "the snapshot grew the repository's objects by $(((objects_after - objects_before) / 1024)) MiB with disk_mb = 2"
}

run_tests

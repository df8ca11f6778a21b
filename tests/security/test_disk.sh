#!/usr/bin/env bash
# Filling the host's disk through the only writable host paths the worker
# has: its work tree and its home. [limits] disk_mb caps them (RLIMIT_FSIZE
# per file, and a watch over the writable binds; as root with a kernel
# overlay work tree, an ext4 image of disk_mb that setup and the worker
# write to, drained into the job's directories after each phase). Every attack is capped by
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
  chmod -R u+rwX "$dir/work" "$dir/upper" "$dir/home" 2>/dev/null || true
  rm -rf "${dir:?}/work" "${dir:?}/upper" "${dir:?}/home" "${dir:?}/disk.img"
}

# disk_held_by: how the current user config holds disk_mb here, from the
# plan (`run --dry-run`): "kernel" (an ext4 image) or "polling".
disk_held_by() {
  local plan
  plan="$(git mullet run --dry-run -m plan --command true 2>&1)" || fail "run --dry-run failed: $plan"
  if grep -q 'disk: *ext4 image of [0-9]* MiB (kernel)' <<<"$plan"; then
    echo kernel
  elif grep -q 'disk: *watched (polling): ' <<<"$plan"; then
    echo polling
  else
    fail "the plan does not say how disk_mb is held: $plan"
  fi
}

# expect_disk_held_by: the mechanism this uid must get: the kernel's as
# root (this host has mkfs.ext4, loop devices and a kernel overlay; the
# suite's root runs have them), the watch as a user. A test that needs the
# image asserts the path it got instead of skipping.
expected_disk_holder() {
  if [ "$(id -u)" -eq 0 ] && [ "${MULLET_TEST_WORK_TREE:-}" != fuse-overlayfs ] &&
    [ "${MULLET_TEST_WORK_TREE:-}" != checkout ]; then
    echo kernel
  else
    echo polling
  fi
}

# disk_test_repo: a repository to attack in (the current directory from
# now), its job data removed when the test ends, with disk_mb = 100; HELD
# is how this uid holds it, asserted to be what it must be.
disk_test_repo() {
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60'
  HELD="$(disk_held_by)"
  assert_eq "$HELD" "$(expected_disk_holder)" "how disk_mb is held"
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
  if [ "$(disk_held_by)" = kernel ]; then
    # The image refuses the write past it (ENOSPC); the worker then ends on
    # its own and its files go with it, so nothing shows the image full
    # afterwards (the watch sees it full only while they are held).
    assert_not_contains "$LOG" "HOLDING 360 MiB" "the worker's output"
    assert_contains "$LOG" "No space left on device" "the worker's output"
    return 0
  fi
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

test_parallel_writers_stop_at_the_cap() {
  # Eight dd writers at once, 100 MiB each, into the work tree and the home,
  # with disk_mb = 100: with the kernel's image nothing gets past the limit
  # (the image's own metadata is the only slack: at most 5%); with the watch
  # alone the writers get somewhat past it before the poll kills them.
  disk_test_repo
  local held="$HELD"
  sec_run "finish
for i in 1 2 3 4; do dd if=/dev/zero of=fill\$i bs=1M count=100 2>/dev/null & done
for i in 1 2 3 4; do dd if=/dev/zero of=\"\$HOME/fill\$i\" bs=1M count=100 2>/dev/null & done
wait
echo WROTE-ALL
sleep 20"
  sec_assert_worker_ran
  assert_stopped_by_disk_limit 100
  local used
  used="$(usage_mib)"
  if [ "$held" = kernel ]; then
    [ "$used" -le 105 ] || fail "eight writers left $used MiB with the kernel's cap of disk_mb = 100"
    [ "$(stat -c %s "$(sec_job_dir)/disk.img")" -eq 0 ] || fail "the drained image still holds its blocks"
  else
    [ "$used" -le 1200 ] || fail "eight writers got $used MiB onto the host's disk with disk_mb = 100 (polled)"
  fi
}

test_inode_exhaustion_is_stopped() {
  # Three million empty files take no data blocks: the image's inode table
  # (or, with the watch, min_entry_bytes an entry) bounds them.
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 20' 'timeout = 120'
  assert_eq "$(disk_held_by)" "$(expected_disk_holder)" "how disk_mb is held"
  SEC_BOUND=150 sec_run "finish
python3 -c '
import os
os.mkdir(\"many\")
made = 0
try:
    for i in range(3000000):
        os.close(os.open(\"many/%d\" % i, os.O_CREAT | os.O_WRONLY, 0o600))
        made += 1
except OSError as error:
    print(\"STOPPED\", made, error, flush=True)
print(\"MADE\", made, flush=True)
'
sleep 20"
  assert_contains "$LOG" "ATTACKS-END" "worker output"
  local ended files
  ended="$(sec_jq 'd["phases"][0]["ended_by"]')"
  files="$(find "$(job_work "$(sec_job_dir)")/many" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
  echo "    # $files empty files reached the host (disk_mb = 20); ended_by $ended" >&2
  [ "$ended" = disk ] || fail "three million empty files were not stopped by the disk limit (ended_by $ended)"
  assert_not_contains "$LOG" "MADE 3000000" "the worker's count"
  [ "$files" -le 200000 ] || fail "$files empty files reached the host with disk_mb = 20"
}

test_symlink_drain_attack_writes_nothing_outside() {
  # Setup leaves symlinks to a host file in the work tree and the home; the
  # worker replaces them by files of its own. Copying the image back into
  # the job's directories as they were (cp -a into the old upper dir and
  # home) would follow the old links and overwrite the host file: the drain
  # copies into fresh directories only.
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  local victim="$TEST_ROOT/victim"
  mkdir -p "$victim"
  echo original >"$victim/file"
  chmod 0777 "$victim" && chmod 0666 "$victim/file"
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60' \
    '[run]' "setup = 'ln -s $victim/file linked && ln -s $victim/file \"\$HOME/linked\" && ln -s $victim \"\$HOME/dir\"'"
  assert_eq "$(disk_held_by)" "$(expected_disk_holder)" "how disk_mb is held"
  sec_run "ls -la linked \"\$HOME/linked\"
rm linked \"\$HOME/linked\" \"\$HOME/dir\"
echo DRAINED-THROUGH >linked
echo DRAINED-THROUGH >\"\$HOME/linked\"
mkdir \"\$HOME/dir\" && echo DRAINED-THROUGH >\"\$HOME/dir/file\"
finish"
  assert_eq "$(cat "$victim/file")" original "the host file the setup's links named"
  assert_eq "$(ls -A "$victim")" file "the host directory the setup's link named"
  sec_assert_worker_ran
  local result
  result="$(sec_jq 'd["result"]')"
  assert_eq "$(git cat-file blob "$result:linked")" DRAINED-THROUGH "the worker's file in the result"
  assert_eq "$(cat "$(sec_job_dir)/home/linked")" DRAINED-THROUGH "the worker's file in its home"
}

test_paths_too_long_to_copy_are_dropped_and_the_rest_drained() {
  # cp copies by path name and the kernel refuses a path of PATH_MAX bytes
  # or more. Before, an image holding a longer path (a chain of long names
  # here; in CI, a chain of 2,000 directories the watch stopped too late)
  # could not be drained: the job was refused and the worker's work lost.
  # Now what lies past the limit is dropped, in the work tree and the home,
  # whatever bytes its names hold (a newline here), with a line in the log.
  disk_test_repo
  local held="$HELD"
  sec_run "python3 - <<'PY'
import os
def chain(base, name):
    os.mkdir(base)
    fd = os.open(base, os.O_RDONLY)
    for _ in range(20):
        os.mkdir(name, dir_fd=fd)
        below = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    out = os.open('f', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, b'deep\\n')
    os.close(out)
chain('long', 'n' * 250)
chain(os.environ['HOME'] + '/long', 'n' * 249 + '\\n')
PY
echo kept >kept
finish"
  sec_assert_worker_ran
  sec_assert_state succeeded
  local result
  result="$(sec_jq 'd["result"]')"
  assert_eq "$(git cat-file blob "$result:kept")" kept "the worker's short-named file in the result"
  if [ "$held" = kernel ]; then
    assert_contains "$LOG" "git-mullet: 2 entries under paths longer than the host can copy were dropped" "the log"
    assert_eq "$(git ls-tree -r --name-only "$result" -- long | wc -l)" 0 "files past the limit in the result"
    [ "$(find "$(sec_job_dir)/home/long" | wc -l)" -gt 5 ] || fail "the home's chain was not drained up to the limit"
  else
    assert_not_contains "$LOG" "were dropped" "the log (nothing is copied under the watch)"
    assert_eq "$(git ls-tree -r --name-only "$result" -- long | wc -l)" 1 "the long-named file in the result"
  fi
}

test_killed_runner_leaves_no_mount_and_resume_finishes() {
  # SIGKILL of the runner mid-phase: the sandbox goes with it (its death
  # signal), the image's loop device with the namespaces; resume makes the
  # image afresh from the last snapshot and finishes.
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  local m
  m="$(marker)"
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60' '[run]' 'executor = "command"' \
    "command = 'dd if=/dev/zero of=big bs=1M count=20 2>/dev/null; echo >\"\$HOME/started\"; sleep $m'"
  local held
  held="$(disk_held_by)"
  assert_eq "$held" "$(expected_disk_holder)" "how disk_mb is held"
  git mullet run --json -q -m "kill me" >/dev/null 2>&1 &
  local git_pid=$! common dir runner
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  wait_until 60 sh -c "ls -d '$common'/mullet/jobs/*/ >/dev/null 2>&1"
  dir="$(ls -d "$common"/mullet/jobs/*/ | head -n 1)"
  dir="${dir%/}"
  JOB="$(basename "$dir")"
  wait_until 60 job_home_has "$dir" started
  if [ "$held" = kernel ]; then
    [ -n "$(losetup -j "$dir/disk.img")" ] || fail "no loop device holds the running job's image"
  fi
  runner="$(pgrep -P "$git_pid" -x git-mullet)" || fail "no git-mullet child of git ($git_pid)"
  kill -KILL "$runner"
  wait "$git_pid" || true
  no_process_left "sleep $m"
  wait_until 30 sh -c "[ -z \"\$(losetup -j '$dir/disk.img' 2>/dev/null)\" ]"
  wait_until 30 sh -c "! grep -qs '$dir/disk' /proc/[0-9]*/mountinfo"
  assert_eq "$(json_field "$(git mullet show --json "$JOB")" state)" interrupted "state after the kill"
  # Resumed, the worker no longer hangs.
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 60' '[run]' 'executor = "command"' \
    "command = 'echo finished >finished'"
  expect_exit 0 timeout 60 git mullet resume --json -q "$JOB"
  JOB_JSON="$OUT"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "state after resume ($(json_field "$JOB_JSON" error))"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git cat-file blob "$result:finished")" finished "the resumed worker's file"
  [ -z "$(losetup -j "$dir/disk.img" 2>/dev/null)" ] || fail "a loop device still holds the image after resume"
  expect_exit 0 git mullet discard "$JOB"
  assert_absent "$dir/disk.img"
  assert_absent "$dir"
}

run_tests

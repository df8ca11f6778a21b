#!/usr/bin/env bash
# The kernel's hold on memory and processes (issue 17): as root on this
# host, one cgroup v1 per sandbox (memory with swap, pids) that the kernel
# enforces; as an unprivileged user no cgroup is writable, the fallback is
# reported and git-mullet's polling still stops the worker. Every attack is
# bounded by the test itself too.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

MEMORY_CGROUPS=/sys/fs/cgroup/memory/git-mullet
PIDS_CGROUPS=/sys/fs/cgroup/pids/git-mullet

as_root() { [ "$(id -u)" -eq 0 ]; }

# enforcement: the dry-run's line saying how a job's memory is held.
enforcement() {
  git mullet run --dry-run -m plan --command true 2>&1 | grep 'enforced:'
}

# assert_enforcement: the kernel's cgroup v1 as root, polling as a user.
assert_enforcement() {
  local line
  line="$(enforcement)"
  if as_root; then
    assert_matches "$line" 'memory: cgroup v1 \(kernel, swap included\)' "--dry-run's enforcement"
    assert_contains "$(git mullet doctor 2>&1)" "limits: memory: cgroup v1" "doctor"
  else
    assert_matches "$line" 'memory: polling \(.*no writable cgroup' "--dry-run's enforcement"
    assert_not_contains "$line" "cgroup v1" "--dry-run's enforcement"
    assert_contains "$(git mullet doctor 2>&1)" "limits: memory: polling" "doctor"
  fi
}

# cgroup_of JOB: the name of the current repository's job JOB's cgroup:
# "<key>.<id>", the key the first 8 hex digits of the hash git gives the
# repository's real common dir as a blob.
cgroup_of() {
  local common
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  echo "$(printf '%s' "$common" | git hash-object --stdin | cut -c1-8).$1"
}

# assert_no_cgroup_of JOB: nothing of the job's sandboxes is left in either
# hierarchy, whichever repository's.
assert_no_cgroup_of() {
  local left
  left="$(ls -d "$MEMORY_CGROUPS/"*".$1"* "$PIDS_CGROUPS/"*".$1"* 2>/dev/null || true)"
  [ -z "$left" ] || fail "the job's cgroups outlived it: $left"
}

test_memory_past_the_limit_is_held_by_the_kernel() {
  new_repo repo
  cd repo
  sec_config '[limits]' 'memory_mb = 128' 'timeout = 60'
  assert_enforcement
  # As fast as python can: 16 MiB at a time, every page touched; bounded at
  # 4 GiB by the worker itself in case no limit works.
  sec_run "finish
python3 -c '
held = []
while len(held) < 256:
    chunk = bytearray(16 << 20)
    for i in range(0, len(chunk), 4096):
        chunk[i] = 1
    held.append(chunk)
    print(\"HELD\", len(held) * 16, flush=True)
print(\"ALLOCATED-ALL\", flush=True)
'"
  sec_assert_state failed memory
  sec_assert_worker_ran
  assert_not_contains "$LOG" ALLOCATED-ALL "worker output"
  local peak
  peak="$(sec_jq 'd["phases"][0]["memory_peak_bytes"]')"
  if as_root; then
    # The kernel's own peak (memory.max_usage_in_bytes, read before the
    # cgroup went): never past the limit.
    [ "$peak" != null ] || fail "no memory peak recorded under a cgroup"
    [ "$peak" -le $((128 << 20)) ] || fail "memory reached $peak bytes, past the limit of $((128 << 20))"
    [ "$peak" -ge $((64 << 20)) ] || fail "memory peaked at only $peak bytes: did the worker allocate?"
    assert_no_cgroup_of "$JOB"
  else
    [ "$peak" = null ] || fail "a memory peak ($peak) recorded without a cgroup"
  fi
}

test_memory_ended_by_needs_the_kernels_count_not_a_sigkill() {
  # A worker that SIGKILLs itself is not the memory limit.
  new_repo repo
  cd repo
  sec_config '[limits]' 'memory_mb = 128' 'timeout = 60'
  sec_run "finish
sh -c 'kill -9 \$\$'
exit 137"
  sec_assert_worker_ran
  [ "$(sec_jq 'd["phases"][0]["ended_by"]')" != memory ] || fail "a plain SIGKILL was taken for the memory limit"
}

test_fork_bomb_is_held_at_the_process_limit() {
  new_repo repo
  cd repo
  sec_config '[limits]' 'processes = 40' 'timeout = 60'
  local n
  n=$((9100000 + RANDOM * 10))
  trap 'for p in $(pgrep -f "sleep $n\$"); do kill -9 "$p"; done 2>/dev/null' EXIT
  # Forks sleepers until fork fails (at most 400, a guard).
  sec_run "finish
python3 -c '
import os, sys
count = 0
while count < 400:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.execvp(\"sleep\", [\"sleep\", sys.argv[1]])
    count += 1
print(\"FORKED\", count, flush=True)
' $n"
  sec_assert_worker_ran
  local forked
  forked="$(printf '%s\n' "$LOG" | awk '$1 == "FORKED" { print $2 }')"
  [ -n "$forked" ] || fail "the worker did not report its forks"
  [ "$forked" -lt 40 ] || fail "the worker forked $forked processes past the limit of 40"
  [ "$forked" -ge 20 ] || fail "only $forked forks: the limit held far below 40, or fork failed otherwise"
  # Everything the bomb started died with the job.
  no_process_left "sleep $n\$"
  if as_root; then assert_no_cgroup_of "$JOB"; fi
}

test_double_forked_sleeper_is_gone_and_no_cgroup_remains() {
  new_repo repo
  cd repo
  sec_config '[limits]' 'memory_mb = 256' 'timeout = 60'
  local n
  n=$((9200000 + RANDOM * 10))
  trap 'for p in $(pgrep -f "sleep $n\$"); do kill -9 "$p"; done 2>/dev/null' EXIT
  sec_run "
python3 -c '
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in range(3): os.close(fd)
        os.execvp(\"sleep\", [\"sleep\", sys.argv[1]])
    os._exit(0)
' $n
i=0
while ! pgrep -f \"sleep $n\\\$\" >/dev/null && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
echo \"SLEEPER \$(pgrep -c -f \"sleep $n\\\$\")\"
finish"
  sec_assert_worker_ran
  assert_contains "$LOG" "SLEEPER 1" "worker output"
  no_process_left "sleep $n\$"
  if as_root; then
    assert_no_cgroup_of "$JOB"
    # Nothing of ours is left at all but the parents.
    assert_not_contains "$(ls "$MEMORY_CGROUPS")" "$JOB" "the memory hierarchy"
  fi
}

# runner_pid: the pid of the git-mullet that runs $JOB, from its record.
runner_pid() {
  git mullet show --json "$JOB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["runner"]["pid"])'
}

test_a_killed_runners_cgroup_is_removed_by_the_next_run() {
  new_repo repo
  cd repo
  sec_config '[limits]' 'memory_mb = 256' 'timeout = 120'
  # The sandbox died with its runner (bwrap's --die-with-parent, its pid
  # namespace); the emptied cgroup stays: nobody removed it.
  start_and_kill
  [ "$(git mullet show --json "$JOB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = interrupted ] ||
    fail "the killed job is not interrupted"
  local killed="$JOB"
  sec_run "finish"
  sec_assert_state succeeded exit
  assert_no_cgroup_of "$killed"
  assert_no_cgroup_of "$JOB"
}

# start_and_kill: starts a job whose worker sleeps, waits until it runs,
# SIGKILLs its git-mullet; sets JOB. As root, its emptied cgroup stays.
start_and_kill() {
  git mullet run -q -m "killed mid-run" --command "echo up > /mullet/work/up.marker; sleep 100" >/dev/null 2>&1 &
  local bg=$! dir
  wait_until 30 sh -c 'git for-each-ref refs/mullet/jobs/ | grep -q .'
  JOB="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs/)"
  dir="$(job_dir "$JOB")"
  wait_until 30 job_has "$dir" up.marker
  if as_root; then
    assert_exists "$MEMORY_CGROUPS/$(cgroup_of "$JOB")"
    assert_exists "$PIDS_CGROUPS/$(cgroup_of "$JOB")"
  fi
  kill -9 "$(runner_pid)"
  wait "$bg" 2>/dev/null || true
  if as_root; then
    wait_until 10 sh -c "[ -z \"\$(cat $PIDS_CGROUPS/$(cgroup_of "$JOB")/cgroup.procs)\" ]"
    assert_exists "$MEMORY_CGROUPS/$(cgroup_of "$JOB")"
  fi
}

# The fuse-overlayfs daemon does the worker's writes to its work tree: its
# memory and threads count in the job's cgroup, or a worker's load would sit
# outside its limits. (Only root may serve a work tree by fuse-overlayfs.)
test_the_fuse_overlayfs_daemon_counts_in_the_jobs_cgroup() {
  command -v fuse-overlayfs >/dev/null || fail "fuse-overlayfs is needed (scripts/install-deps installs it)"
  new_repo repo
  cd repo
  if ! as_root; then
    sec_config '[sandbox]' 'work_tree = "fuse-overlayfs"'
    expect_exit 3 git mullet run -q -m fuse --command true
    assert_contains "$ERR" "nothing was run" "a user's fuse-overlayfs work tree"
    assert_contains "$ERR" 'work_tree = "fuse-overlayfs"' "a user's fuse-overlayfs work tree"
    return
  fi
  sec_config '[limits]' 'memory_mb = 256' 'timeout = 120' '[sandbox]' 'work_tree = "fuse-overlayfs"'
  git mullet run -q -m "fuse" --command "echo up > /mullet/work/up.marker; sleep 100" >/dev/null 2>&1 &
  local bg=$! dir pid daemons=""
  wait_until 30 sh -c 'git for-each-ref refs/mullet/jobs/ | grep -q .'
  JOB="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs/)"
  dir="$(job_dir "$JOB")"
  wait_until 30 job_has "$dir" up.marker
  for pid in $(pgrep -x fuse-overlayfs); do
    daemons+="$(grep -E '^[0-9]+:(memory|pids):' "/proc/$pid/cgroup" 2>/dev/null)"$'\n'
  done
  expect_exit 0 git mullet stop "$JOB"
  wait "$bg" 2>/dev/null || true
  assert_contains "$daemons" ":memory:/git-mullet/$(cgroup_of "$JOB")" "the fuse-overlayfs daemons' memory cgroups"
  assert_contains "$daemons" ":pids:/git-mullet/$(cgroup_of "$JOB")" "the fuse-overlayfs daemons' pids cgroups"
}

test_a_killed_runners_cgroup_is_removed_by_discard() {
  new_repo repo
  cd repo
  sec_config '[limits]' 'memory_mb = 256' 'timeout = 120'
  start_and_kill
  git mullet discard --force "$JOB" >/dev/null
  assert_no_cgroup_of "$JOB"
}

test_the_sweep_leaves_cgroups_of_jobs_it_does_not_know() {
  new_repo repo
  cd repo
  sec_config '[limits]' 'memory_mb = 256' 'timeout = 60'
  if ! as_root; then
    # No cgroup to sweep or to make: the run still works, by polling.
    sec_run "finish"
    sec_assert_state succeeded exit
    [ "$(sec_jq 'd["phases"][0]["memory_peak_bytes"]')" = null ] || fail "a memory peak recorded without a cgroup"
    return
  fi
  # Another repository's job (another key, an id this store does not have,
  # just made, as a sandbox's is before its first process joins) and a name
  # of no job: neither is this run's to remove.
  OTHER="0badcafe.$(od -An -N5 -tx1 /dev/urandom | tr -d ' \n')"
  NOT_A_JOB="not-a-job-$(sec_random)"
  trap 'rmdir "$MEMORY_CGROUPS/$OTHER" "$MEMORY_CGROUPS/$NOT_A_JOB" 2>/dev/null || true' EXIT
  mkdir "$MEMORY_CGROUPS/$OTHER" "$MEMORY_CGROUPS/$NOT_A_JOB"
  sec_run "finish"
  sec_assert_state succeeded exit
  assert_exists "$MEMORY_CGROUPS/$OTHER"
  assert_exists "$MEMORY_CGROUPS/$NOT_A_JOB"
  assert_no_cgroup_of "$JOB"
  # Once it has been empty for over a minute it is a leftover (a deleted
  # repository's): the next run removes it. Its age is the directory's.
  touch -d '-2 minutes' "$MEMORY_CGROUPS/$OTHER"
  sec_run "finish"
  [ ! -e "$MEMORY_CGROUPS/$OTHER" ] || fail "an idle cgroup of an unknown job was left: $MEMORY_CGROUPS/$OTHER"
  assert_exists "$MEMORY_CGROUPS/$NOT_A_JOB"
}

# Attack: job ids are unique in one repository only. Another repository
# holding a record of the same id (copied from this one, and saying it
# ended) sweeps and discards: the job running here, its processes and its
# cgroups are untouched.
test_another_repositorys_record_of_a_running_job_never_touches_it() {
  new_repo a
  cd a
  sec_config '[limits]' 'memory_mb = 256' 'timeout = 120'
  local n
  n=$((9300000 + RANDOM * 10))
  git mullet run -q -m "runs on" --command "echo up > /mullet/work/up.marker; sleep $n" >/dev/null 2>&1 &
  local bg=$! dir
  wait_until 30 sh -c 'git for-each-ref refs/mullet/jobs/ | grep -q .'
  JOB="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs/)"
  dir="$(job_dir "$JOB")"
  wait_until 30 job_has "$dir" up.marker
  # sec_run sets JOB: the id is kept apart.
  local id="$JOB" mine
  mine="$(cgroup_of "$id")"
  cd ..
  new_repo b
  cd b
  git fetch -q ../a 'refs/mullet/*:refs/mullet/*' || fail "fetching a's records"
  rewrite_record "$id" '.state = "failed" | .finished_at = .created_at | .error = "copied"' \
    's/"state":"running"/"state":"failed"/'
  assert_eq "$(git mullet show --json "$id" | jq -r .state)" failed "b's record of the job"
  sec_run "finish"
  sec_assert_state succeeded exit
  git mullet discard --force "$id" >/dev/null || fail "b could not discard its record"
  cd ../a
  is_running "sleep $n" || fail "a's worker was killed by b's sweep or discard"
  JOB="$id"
  assert_eq "$(git mullet show --json "$JOB" | jq -r .state)" running "a's job"
  if as_root; then
    assert_exists "$MEMORY_CGROUPS/$mine"
    assert_exists "$PIDS_CGROUPS/$mine"
  fi
  kill -9 "$(runner_pid)"
  wait "$bg" 2>/dev/null || true
  git mullet discard --force "$JOB" >/dev/null
  assert_no_cgroup_of "$JOB"
  no_process_left "sleep $n"
}

run_tests

#!/usr/bin/env bash
# Flooding the host through the worker's output: everything it prints lands
# in the job's logs under .git/mullet/jobs/<id>/ and is read back for the
# record. The logs are capped (worker.log at 8 MiB, then one marker line and
# the phase's last 64 KiB), count against [limits] disk_mb, and are only
# ever read by their tail, so git-mullet's memory stays bounded whatever the
# worker prints.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

# The cap on worker.log (jobs/phases.hpp) and what may follow it: per phase,
# one marker line and a 64 KiB tail.
LOG_CAP=$((8 * 1024 * 1024))
LOG_BOUND=$((LOG_CAP + 3 * (64 * 1024 + 100)))
# git-mullet's peak resident size, against a flood of gigabytes.
RSS_BOUND_KIB=$((200 * 1024))

# Every git-mullet process of the test runs under GNU time, which appends
# its peak resident size (KiB) and command line to $RSS_LOG.
measure_memory() {
  RSS_LOG="$TEST_ROOT/rss.$(sec_random)"
  : >"$RSS_LOG"
  mkdir -p "$TEST_ROOT/measured"
  cat >"$TEST_ROOT/measured/git-mullet" <<EOF
#!/bin/sh
exec /usr/bin/time -a -o "$RSS_LOG" -f '%M %C' "$MULLET_BIN" "\$@"
EOF
  chmod 755 "$TEST_ROOT/measured/git-mullet"
  export PATH="$TEST_ROOT/measured:$PATH"
}

assert_memory_bounded() {
  local peak
  [ -s "$RSS_LOG" ] || fail "no memory measurement was taken"
  peak="$(awk '$1 ~ /^[0-9]+$/ && $1 > m {m = $1} END {print m + 0}' "$RSS_LOG")"
  echo "    # git-mullet's peak resident size: $((peak / 1024)) MiB" >&2
  [ "$peak" -gt 0 ] || fail "no peak resident size in $RSS_LOG: $(cat "$RSS_LOG")"
  [ "$peak" -lt "$RSS_BOUND_KIB" ] || fail "git-mullet grew to $((peak / 1024)) MiB: $(sort -n "$RSS_LOG" | tail -n 3)"
}

# assert_log_capped: worker.log on disk stays under the cap (plus the tails),
# and says how much it left out.
assert_log_capped() {
  local log size
  log="$(sec_job_dir)/worker.log"
  assert_exists "$log"
  size="$(stat -c %s "$log")"
  echo "    # worker.log on disk: $size bytes" >&2
  [ "$size" -le "$LOG_BOUND" ] || fail "worker.log grew to $size bytes (cap $LOG_CAP)"
  grep -aqE '^\[git-mullet: [0-9]+ bytes of output left out\]$' "$log" || fail "worker.log has no marker line"
}

cleanup_job_data() {
  [ -n "${JOB:-}" ] || return 0
  local dir
  dir="$(sec_job_dir)"
  case "$dir" in */mullet/jobs/?*) ;; *) return 0 ;; esac
  chmod -R u+rwX "$dir" 2>/dev/null
  rm -rf "${dir:?}/work" "${dir:?}/upper" "${dir:?}/home" "${dir:?}/worker.log"
}

test_flood_on_stdout_and_stderr_is_capped_and_keeps_its_end() {
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  measure_memory
  local end
  end="THE-REAL-END-$(sec_random)"
  sec_config '[limits]' 'timeout = 600'
  # 1.5 GiB of lines on stdout and, at the same time, 1.5 GiB without a single
  # newline on stderr; then the last words.
  SEC_BOUND=600 sec_run "finish
yes 'flooding the host with one line after another, forever and ever' | head -c 1536M &
head -c 1536M /dev/zero | tr '\\000' e >&2 &
wait
echo
echo $end"
  sec_assert_state succeeded
  sec_assert_worker_ran
  assert_log_capped
  # The end survives: in the file, in the record and in `log`.
  assert_eq "$(tail -n 1 "$(sec_job_dir)/worker.log")" "$end" "the last line of worker.log"
  assert_eq "$(printf '%s\n' "$LOG" | tail -n 1)" "$end" "the last line of git mullet log"
  local left_out
  left_out="$(grep -aoE '^\[git-mullet: [0-9]+ bytes' "$(sec_job_dir)/worker.log" | grep -oE '[0-9]+' | head -n 1)"
  [ "$left_out" -gt $((1024 * 1024 * 1024)) ] || fail "the marker says only $left_out bytes were left out"
  assert_memory_bounded
}

test_endless_flood_ends_by_its_limit_with_a_record() {
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  measure_memory
  sec_config '[limits]' 'timeout = 8'
  # Never ends by itself: the phase's wall clock ends it.
  sec_run "finish
yes 'an endless flood of output'"
  sec_assert_state failed timeout
  assert_log_capped
  # It was killed mid-line, maybe: the last whole line.
  assert_eq "$(printf '%s\n' "$LOG" | tail -n 2 | head -n 1)" "an endless flood of output" "the end of git mullet log"
  assert_memory_bounded
}

test_flood_of_one_endless_line_is_capped() {
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  measure_memory
  sec_config '[limits]' 'timeout = 8'
  sec_run "finish
tr '\\000' x </dev/zero"
  sec_assert_state failed timeout
  assert_log_capped
  assert_memory_bounded
}

test_logs_count_against_disk_limit() {
  new_repo repo
  cd repo
  trap cleanup_job_data EXIT
  sec_config '[limits]' 'disk_mb = 100' 'timeout = 120'
  # 95 MiB in the work tree is under the limit; with the 8 MiB the worker's
  # output keeps in worker.log, the job is over it. (In all, well under twice
  # the limit: the free-space glance alone would not end it.) Then the worker
  # stays a while, for the watch to see it.
  sec_run "finish
dd if=/dev/zero of=bulk bs=1M count=95 2>/dev/null
head -c 12M /dev/zero | tr '\\000' o
echo
echo PRINTED-ALL
sleep 10"
  sec_assert_state failed disk
  assert_contains "$(sec_jq 'd["error"]')" "limits.disk_mb" "the job's error"
}

run_tests

#!/usr/bin/env bash
# What a sandbox leaves on the host must be of no use to another local user:
# setuid/setgid copies of a shell lose their bits after every phase (nosuid
# holds only inside the sandbox), the scratch directories are 0700 and the
# invoking user's, and as root every running job's sandboxes have a uid of
# their own, so one job's uid cannot touch another job's files.
# As root the suite switches to a second unprivileged user (mullet-other) to
# try the files; run as an unprivileged user there is no second user to
# switch to, so it asserts the modes that keep one out instead.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

OTHER_USER=mullet-other

# other_user: true (and the user exists) when the suite runs as root.
other_user() {
  [ "$(id -u)" -eq 0 ] || return 1
  id "$OTHER_USER" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh "$OTHER_USER" 2>/dev/null ||
    id "$OTHER_USER" >/dev/null
}

# assert_other_user_fails WHAT COMMAND...: COMMAND, run as the other user,
# fails.
assert_other_user_fails() {
  local what="$1"
  shift
  if out="$(runuser -u "$OTHER_USER" -- "$@" 2>&1)"; then
    fail "another local user could $what: $* gave '$out'"
  fi
}

# assert_private DIR...: mode 0700, owned by whoever runs git-mullet.
assert_private() {
  local dir
  for dir in "$@"; do
    assert_eq "$(stat -c '%a %u' "$dir")" "700 $(id -u)" "mode and owner of $dir"
  done
}

# assert_no_unsafe_bits DIR: no regular file or directory below DIR (DIR
# included) is setuid, setgid or writable by others.
assert_no_unsafe_bits() {
  local found
  # As the user, directories the worker made unreadable are opened first
  # (root reads them anyway); that changes no setuid/setgid bit.
  [ "$(id -u)" -eq 0 ] || chmod -R u+rwX "$1"
  found="$(find "$1" \( -type f -o -type d \) -perm /6002 -printf '%m %p\n' 2>&1)"
  [ -z "$found" ] || fail "unsafe modes left on the host: $found"
}

# set_bits (worker side): copies /bin/sh to $1 with mode $2 and prints the
# mode it got, the positive control that the bits were really set inside.
SET_BITS='
set_bits() { cp /bin/sh "$1" && chmod "$2" "$1" && echo "MODE $(stat -c %a "$1") $1"; }
'

test_setuid_copies_lose_their_bits_and_job_dirs_are_private() {
  new_repo repo
  cd repo
  local common
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  # As an older version left them.
  mkdir -p "$common/mullet/jobs" "$common/mullet/slots"
  chmod 0755 "$common/mullet" "$common/mullet/jobs"
  chmod 0711 "$common/mullet/slots"
  sec_config '[run]' 'max_parallel = 2'
  SEC_BOUND=60 sec_run "$SET_BITS
set_bits suid-sh 4755
set_bits sgid-sh 2755
mkdir -p deep/er && set_bits deep/er/both-sh 6755
set_bits \"\$HOME/home-suid-sh\" 4755
mkdir -p \"\$HOME/d\" && set_bits \"\$HOME/d/sgid-sh\" 2755
mkdir sgid-dir && chmod 2777 sgid-dir && echo \"MODE \$(stat -c %a sgid-dir) sgid-dir\"
mkdir locked && set_bits locked/suid-sh 4755 && chmod 000 locked
finish"
  sec_assert_worker_ran
  local mode
  for mode in "4755 suid-sh" "2755 sgid-sh" "6755 deep/er/both-sh" "4755 /mullet/home/home-suid-sh" \
    "2755 /mullet/home/d/sgid-sh" "2777 sgid-dir" "4755 locked/suid-sh"; do
    assert_contains "$LOG" "MODE $mode" "the worker's output (the bit was set inside)"
  done
  local dir
  dir="$(sec_job_dir)"
  assert_exists "$(job_work "$dir")/suid-sh"
  assert_exists "$dir/home/home-suid-sh"
  if other_user; then
    assert_other_user_fails "run the worker's setuid shell" "$(job_work "$dir")/suid-sh" -p -c 'id -u'
    assert_other_user_fails "run the worker's setuid shell in its home" "$dir/home/home-suid-sh" -p -c 'id -u'
    assert_other_user_fails "read the job's work tree" cat "$(job_work "$dir")/ran.marker"
    if [ -d "$common/mullet/pristine" ]; then
      assert_other_user_fails "read the base's pristine checkout" cat "$common"/mullet/pristine/*/tree/README
    fi
    assert_other_user_fails "list the job's directory" ls "$dir"
    assert_other_user_fails "list the job's home" ls "$dir/home"
  fi
  assert_no_unsafe_bits "$dir"
  assert_private "$common/mullet" "$common/mullet/jobs" "$common/mullet/slots" "$dir"
  if [ -d "$common/mullet/pristine" ]; then
    assert_private "$common/mullet/pristine" "$common"/mullet/pristine/*-*
    assert_no_unsafe_bits "$common/mullet/pristine"
  fi
}

test_gate_checkout_is_private_while_the_gate_runs_and_keeps_no_bits() {
  new_repo repo
  cd repo
  # The gate makes its copies, then waits (bounded) for the test to look.
  expect_exit 0 git mullet run --detach -m "gate residue" --command 'echo w >w' --gate "$SET_BITS
set_bits g-suid 4755
mkdir -p sub && set_bits sub/g-sgid 2755
set_bits \"\$HOME/g-home\" 6755
mkdir g-dir && chmod 2777 g-dir
touch gate-ready
i=0; while [ ! -e gate-go ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done"
  JOB="$OUT"
  local dir
  dir="$(sec_job_dir)"
  wait_until 60 test -e "$dir/gate/work/gate-ready"
  assert_eq "$(stat -c %a "$dir/gate/work/g-suid")" 4755 "the gate's copy, while it runs (positive control)"
  if other_user; then
    assert_other_user_fails "run the gate's setuid shell" "$dir/gate/work/g-suid" -p -c 'id -u'
    assert_other_user_fails "run the gate's setuid shell in its home" "$dir/gate/home/g-home" -p -c 'id -u'
    assert_other_user_fails "read the gate's checkout" cat "$dir/gate/work/README"
  fi
  assert_private "$dir" "$dir/gate"
  touch "$dir/gate/work/gate-go"
  expect_exit 0 timeout 60 git mullet wait -q "$JOB"
  assert_contains "$(git mullet log "$JOB")" "MODE 4755 g-suid" "the gate's output"
  assert_no_unsafe_bits "$dir"
}

test_jobs_as_root_have_uids_of_their_own() {
  new_repo repo
  cd repo
  local jobs
  jobs="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)/mullet/jobs"
  # Job B holds its sandbox until the test releases it (bounded).
  expect_exit 0 git mullet run --detach -m "job B" --command 'id -u >b-uid; echo b >b-file; touch b-started
i=0; while [ ! -e "$HOME/release" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done'
  local job_b="$OUT" b_dir
  b_dir="$(sec_job_dir "$job_b")"
  wait_until 60 job_has "$b_dir" b-started
  local uid_b
  uid_b="$(json_field "$(git mullet show --json "$job_b")" sandbox_uid)"

  # Job A, while B runs, plants into B's work tree by every path it can guess.
  SEC_PROMPT="job A" sec_run "
J='$jobs'
B='$b_dir'
id -u >a-uid; echo a >a-file
try write-by-path sh -c 'echo a >\"\$0/work/planted-by-a\"' \"\$B\"
try write-upper-by-path sh -c 'echo a >\"\$0/upper/planted-by-a\"' \"\$B\"
try write-by-glob sh -c 'for d in \"\$0\"/*/work; do echo a >\"\$d/planted-by-a\" || exit 1; done; [ -d \"\$0\" ]' \"\$J\"
try write-by-proc-root sh -c 'for r in /proc/[0-9]*/root; do echo a >\"\$r\$0/work/planted-by-a\" 2>/dev/null && exit 0; done; exit 1' \"\$B\"
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  local uid_a a_dir
  uid_a="$(sec_jq 'd["sandbox_uid"]')"
  a_dir="$(sec_job_dir)"
  assert_absent "$b_dir/work/planted-by-a"
  assert_absent "$b_dir/upper/planted-by-a"

  if [ "$(id -u)" -ne 0 ]; then
    # Not root: sandboxes run as the invoking user, and say so.
    assert_eq "$uid_a" null "job A's sandbox_uid"
    assert_eq "$uid_b" null "job B's sandbox_uid"
    assert_eq "$(cat "$(job_work "$a_dir")/a-uid")" "$(id -u)" "job A's uid inside"
  else
    # A process of A's uid on the host (what a setuid copy would have
    # given; the uid that owns what A wrote): not even from inside B's work
    # tree can it write there.
    local owner_a
    owner_a="$(stat -c %u "$(job_work "$a_dir")/a-file")"
    if (cd "$(job_work "$b_dir")" && setpriv --reuid="$owner_a" --regid="$owner_a" --clear-groups \
      sh -c 'echo a >planted-on-host') 2>/dev/null; then
      fail "uid $owner_a (job A) wrote into job B's work tree"
    fi
    if setpriv --reuid="$owner_a" --regid="$owner_a" --clear-groups ls "$(job_work "$b_dir")" >/dev/null 2>&1; then
      fail "uid $owner_a (job A) listed job B's work tree by its path"
    fi
    assert_absent "$(job_work "$b_dir")/planted-on-host"
    assert_matches "$uid_a" '^[0-9]+$' "job A's sandbox_uid"
    assert_matches "$uid_b" '^[0-9]+$' "job B's sandbox_uid"
    [ "$uid_a" != "$uid_b" ] || fail "jobs A and B both ran as uid $uid_a"
    [ "$uid_a" -ne 0 ] && [ "$uid_b" -ne 0 ] || fail "a sandbox ran as root"
    assert_eq "$(cat "$(job_work "$a_dir")/a-uid")" "$uid_a" "job A's uid inside"
    # B still runs: what it wrote may be on its disk image.
    assert_eq "$(cat "$(job_upper "$b_dir")/b-uid")" "$uid_b" "job B's uid inside"
    assert_eq "$(stat -c '%u %g' "$(job_work "$a_dir")/a-file")" "$uid_a $uid_a" "owner of job A's file"
    assert_eq "$(stat -c '%u %g' "$(job_upper "$b_dir")/b-file")" "$uid_b $uid_b" "owner of job B's file"
  fi

  touch "$(job_home "$b_dir")/release"
  expect_exit 0 timeout 60 git mullet wait -q "$job_b"
  local result
  result="$(json_field "$(git mullet show --json "$job_b")" result)"
  assert_eq "$(git cat-file blob "$result:b-file")" b "b-file in job B's result"
  if git ls-tree -r --name-only "$result" | grep planted >/dev/null; then
    fail "job B's result holds a file planted by job A: $(git ls-tree -r --name-only "$result" | grep planted)"
  fi
  # The plan says which uid a job will run as before it has one.
  expect_exit 0 git mullet run --dry-run -m plan --command true
  if [ "$(id -u)" -eq 0 ]; then
    assert_contains "$OUT" "a host uid of its own" "run --dry-run as root"
  else
    assert_not_contains "$OUT" "runs as:" "run --dry-run as a user"
  fi
}

# A directory chain as deep as the worker likes (python, inside the sandbox:
# a shell's mkdir per level would take minutes), made after the marker.
DEEP_CHAIN='
python3 - <<PY
import os
os.mkdir("deep")
os.chdir("deep")
for _ in range(40000):
    os.mkdir("d")
    os.chdir("d")
print("DEEP-DONE", flush=True)
PY
'

# chain_depth DIR: how many "d" levels lie below DIR/deep.
chain_depth() {
  python3 - "$1" <<'PY'
import os, sys
fd = os.open(sys.argv[1] + "/deep", os.O_RDONLY)
depth = 0
while True:
    try:
        fd = os.open("d", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
    except OSError:
        break
    depth += 1
print(depth)
PY
}

test_a_tree_deeper_than_any_walk_is_stopped_closed_off_and_discarded() {
  # Before: the watch never counted a chain of empty directories, the worker
  # made all 40,000 levels, and clearing unsafe modes recursed until
  # git-mullet itself crashed (as root); removing the tree took a
  # descriptor per level (EMFILE: discard failed, and the base's pristine
  # checkout stayed claimed). Now the watch stops a tree deeper than any
  # walk of ours, however deep the worker got by then.
  new_repo repo
  cd repo
  local common
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  sec_config '[limits]' 'timeout = 60'
  SEC_BOUND=120 sec_run "finish
$DEEP_CHAIN
sleep 30"
  sec_assert_worker_ran
  sec_assert_state failed disk
  assert_not_contains "$LOG" "DEEP-DONE" "the worker's output (it was stopped before the end)"
  local dir work depth
  dir="$(sec_job_dir)"
  work="$(job_work "$dir")"
  # As the user, the watch reads the worker's directories as their owner;
  # the test reads the chain the same way.
  depth="$(chain_depth "$work")"
  echo "    # the worker got $depth levels deep" >&2
  [ "$depth" -gt 130 ] || fail "the worker got only $depth levels deep (the attack needs more than 128)"
  assert_contains "$(sec_jq 'd["snapshot_warnings"]')" "nested deeper than 128 directories" "the snapshot's warnings"
  # The directory 128 levels down is closed to all but its owner; nothing
  # below it was entered.
  assert_eq "$(python3 - "$work" <<'PY'
import os, stat, sys
fd = os.open(sys.argv[1], os.O_PATH)
for name in ["deep"] + ["d"] * 127:
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=fd)
print(oct(stat.S_IMODE(os.stat(fd).st_mode)))
PY
)" 0o700 "the mode of the directory 128 levels down"
  expect_exit 0 git mullet discard "$JOB"
  assert_absent "$dir"
  if [ -d "$common/mullet/pristine" ]; then
    assert_eq "$(find "$common/mullet/pristine" -mindepth 1 -maxdepth 1 | wc -l)" 0 "pristine checkouts left"
  fi
}

run_tests

#!/usr/bin/env bash
# A job's work tree is an overlay whose lower dir is the pristine checkout of
# its base, shared by every job on that base (git/pristine.hpp). A worker
# writes, chmods (setuid too), renames, hardlinks, truncates, touches, sets
# xattrs (overlayfs's own names among them: user.overlay.*, trusted.overlay.*)
# on files that come from it, deletes files and whole directories, and tries
# the host paths of another job's upper dir and of the pristine checkout.
# Afterwards the pristine checkout is byte for byte, mode for mode and xattr
# for xattr as before, the result is what the worker did (no xattr it set made
# the snapshot drop the base's files), and the next job on the base sees a
# clean tree.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

# manifest DIR: every entry with type, mode, owner, size, link target, its
# xattrs (every namespace this user can list), and every file's hash.
manifest() {
  sec_tree_state "$1"
  (cd "$1" && find . -printf '%p %U %G\n' | LC_ALL=C sort)
  /usr/bin/python3 - "$1" <<'EOF'
import os, sys
root = sys.argv[1]
for top, dirs, files in os.walk(root):
    for name in sorted(dirs + files) + ["."]:
        path = os.path.join(top, name)
        try:
            names = sorted(os.listxattr(path, follow_symlinks=False))
        except OSError as error:
            names = ["error %s" % error.errno]
        for attr in names:
            if attr.startswith("error"):
                print(path, attr)
                continue
            print(path, attr, os.getxattr(path, attr, follow_symlinks=False))
EOF
}

# As root, a job's pristine checkout belongs to its sandbox uid, the first
# free one of the machine's range, which jobs of other tests running at the
# same time may hold: this suite's jobs get a range of their own.
OWN_UID=$((1879048192 + 2097152 + RANDOM * 32 + RANDOM % 32))

base_repo() {
  # MULLET_TEST_WORK_TREE: "fuse-overlayfs" for the suite's second run as
  # root (tests/CMakeLists.txt).
  sec_config '[sandbox]' "uid = $OWN_UID" "uid_count = ${1:-1}" \
    ${MULLET_TEST_WORK_TREE:+"work_tree = \"$MULLET_TEST_WORK_TREE\""}
  new_repo repo
  cd repo
  mkdir -p deep/a/b keep docs
  printf 'deep\n' >deep/a/b/c
  printf 'big file\n' >keep/big
  printf 'old\n' >keep/old
  printf 'other\n' >other
  printf 'util\n' >src/util.c
  printf 'doc\n' >docs/x
  git add -A
  git commit -qm "more files"
}

pristine_tree() {
  local common
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  find "$common/mullet/pristine" -mindepth 2 -maxdepth 2 -name tree | head -n 1
}

test_a_worker_cannot_change_the_pristine_checkout_or_reach_other_layers() {
  base_repo
  local secret
  secret="$(sec_secret)"
  # A first job on the base: it builds the pristine checkout, and its upper
  # dir keeps a secret on the host (written there by the test: no worker's
  # script holds it).
  sec_run "echo placeholder >planted; finish"
  sec_assert_worker_ran
  local first="$JOB" pristine upper before
  pristine="$(pristine_tree)"
  [ -n "$pristine" ] || fail "no pristine checkout after the first job"
  upper="$(job_work "$(sec_job_dir "$first")")"
  assert_exists "$upper/planted"
  printf '%s\n' "$secret" >"$upper/planted"
  sec_open_up "$upper"
  before="$(manifest "$pristine")"

  SEC_BOUND=120 sec_run "
echo pwned >>README
chmod 4777 README
chmod 600 other
mv src/main.c renamed.c
ln renamed.c hardlink.c
ln keep/old keep/old-link
: >keep/big
touch -d 2000-01-01 keep/old
rm -rf deep
rm docs/x
xattr() { /usr/bin/python3 -c 'import os, sys; os.setxattr(sys.argv[1], sys.argv[2], sys.argv[3].encode())' \"\$@\"; }
xattr src user.overlay.opaque y || true
xattr src trusted.overlay.opaque y || true
xattr keep user.overlay.redirect /deep || true
xattr README trusted.overlay.metacopy '' || true
xattr keep/old user.mullet test || true
try read-other-upper cat '$upper/planted'
try list-other-upper ls '$upper'
try list-pristine ls '$pristine'
try write-pristine sh -c 'echo x >>$pristine/README'
try read-job-dir ls '$(sec_job_dir "$first")'
echo \"MOUNTINFO \$(grep ' /mullet/work ' /proc/self/mountinfo)\"
hunt SECRET-
finish"
  sec_assert_worker_ran
  sec_assert_all_denied 5
  assert_not_contains "$LOG" "$secret" "the second worker's output"
  sec_assert_same "the pristine checkout" "$before" "$(manifest "$pristine")"
  # The overlay's layers are named by descriptor: the worker's mount table
  # shows no host path of them (positive control: it does show the overlay).
  local mounted
  mounted="$(printf '%s\n' "$LOG" | grep '^MOUNTINFO ' || true)"
  if [ "${MULLET_TEST_WORK_TREE:-}" = fuse-overlayfs ]; then
    assert_contains "$mounted" " fuse.fuse-overlayfs " "the work tree's mount"
  else
    assert_contains "$mounted" " overlay " "the work tree's mount"
  fi
  assert_not_contains "$mounted" "/mullet/pristine/" "the work tree's mount"
  assert_not_contains "$mounted" "$(sec_job_dir)" "the work tree's mount"
  assert_not_contains "$mounted" "$(sec_job_dir "$first")" "the work tree's mount"

  local result
  result="$(sec_jq 'd["result"]')"
  assert_eq "$(git show "$result:README")" "$(printf 'hello\npwned')" "README in the result"
  assert_eq "$(git ls-tree "$result" -- README | cut -c1-6)" 100755 "README's mode in the result"
  assert_eq "$(git show "$result:renamed.c")" "int main() { return 0; }" "renamed.c"
  assert_eq "$(git show "$result:hardlink.c")" "int main() { return 0; }" "hardlink.c"
  assert_eq "$(git show "$result:keep/big")" "" "keep/big"
  assert_eq "$(git show "$result:keep/old-link")" old "keep/old-link"
  # The xattrs named like overlayfs's own changed nothing the snapshot read.
  assert_eq "$(git ls-tree -r --name-only "$result" -- src)" "src/util.c" "src in the result"
  assert_eq "$(git ls-tree -r --name-only "$result" -- deep docs)" "" "deleted directories in the result"
  assert_eq "$(git show "$result:other")" other "other (mode 600 inside)"

  # The next job on the base sees the base, clean.
  sec_run "
test -z \"\$(git status --porcelain)\" && echo STATUS-CLEAN
test \"\$(cat README)\" = hello && test -f src/main.c && test -f deep/a/b/c && test -f docs/x &&
  test \"\$(cat keep/big)\" = 'big file' && test ! -e renamed.c && test ! -e planted && echo TREE-CLEAN
finish"
  sec_assert_worker_ran
  assert_contains "$LOG" "STATUS-CLEAN" "the third worker's git status"
  assert_contains "$LOG" "TREE-CLEAN" "the third worker's tree"
  sec_assert_same "the pristine checkout" "$before" "$(manifest "$pristine")"
}

# fuse-overlayfs reads a `.wh.NAME` entry of its upper dir as NAME deleted.
# It refuses a worker `.wh.` names it creates as files, but not as
# directories, symlinks, hard links or rename targets: the worker then sees
# both the name and NAME, and the next daemon would hide NAME. No reading of
# that upper dir is what the worker saw: under fuse-overlayfs the job is
# refused, nothing recorded. Under kernel overlayfs they are plain names:
# the result holds exactly the files and symlinks the worker saw, with what
# it saw in them.
test_a_worker_sees_what_the_result_records_after_wh_names() {
  base_repo
  # In a subshell: sh leaves when a redirection of `:` (a special builtin) fails.
  sec_run "
(: >.wh.other) 2>/dev/null || true
mkdir .wh.README 2>/dev/null || true
ln -s x keep/.wh.big 2>/dev/null || true
ln keep/old keep/.wh.old 2>/dev/null || true
echo d >docs/y && mv docs/y docs/.wh.x 2>/dev/null || true
mkdir -p src/.wh..wh..opq 2>/dev/null || true
(: >src/.wh..wh..opq) 2>/dev/null || true
echo ran >ran.marker
find . -path ./.git -prune -o \\( -type f -o -type l \\) -print | sed 's|^\\./||' | sort | while read -r f; do
  if [ -L \"\$f\" ]; then echo \"SEEN \$f -> \$(readlink \"\$f\")\"; else echo \"SEEN \$f = \$(cat \"\$f\")\"; fi
done
finish"
  if [ "${MULLET_TEST_WORK_TREE:-}" = fuse-overlayfs ]; then
    assert_contains "$LOG" "SEEN docs/.wh.x = d" "what the worker saw (it did make a .wh. name)"
    assert_eq "$(sec_jq 'd["state"]')" refused "the job's state"
    assert_contains "$(sec_jq 'd["error"]')" "fuse-overlayfs reads differently" "the job's error"
    assert_eq "$(sec_jq 'd["result"]')" null "the job's result"
    return 0
  fi
  sec_assert_worker_ran
  local result seen recorded path
  result="$(sec_jq 'd["result"]')"
  seen="$(printf '%s\n' "$LOG" | sed -n 's/^SEEN //p')"
  seen="$(printf '%s\n' "$seen" | LC_ALL=C sort)"
  recorded="$(git ls-tree -r "$result" | while read -r mode _ _ path; do
    if [ "$mode" = 120000 ]; then
      echo "$path -> $(git cat-file blob "$result:$path")"
    else
      echo "$path = $(git cat-file blob "$result:$path")"
    fi
  done | LC_ALL=C sort)"
  # Positive control: the worker's listing has the base's untouched files.
  assert_contains "$seen" "src/main.c = int main() { return 0; }" "what the worker saw"
  assert_eq "$recorded" "$seen" "the result against what the worker saw"
}

# A worker that leaves its upper dir full of directories of mode 0000 (and
# read-only files in them) does not keep discard from removing the job's
# layers: upper/ or fuse-layers/, and its pristine checkout with it.
test_discard_removes_layers_the_worker_locked_up() {
  base_repo
  sec_run "
mkdir -p locked/a/b/c keep/locked
for d in locked/a/b/c locked/a/b locked/a keep/locked; do echo x >\$d/f; chmod 0444 \$d/f; done
chmod 0000 locked/a/b/c locked/a/b locked/a keep/locked
chmod 0000 locked
finish"
  sec_assert_worker_ran
  local dir layers
  dir="$(sec_job_dir)"
  layers="$(dirname "$(job_work "$dir")")"
  [ "$layers" = "$dir" ] && layers="$dir/upper"
  # Positive control: the locked directories are there (as root still mode
  # 0000; as a user the host made its own upper dir's directories usable).
  assert_eq "$(find "$layers" -name locked -type d | wc -l)" 2 "locked directories in $layers"
  if [ "$(id -u)" -eq 0 ]; then
    assert_eq "$(find "$layers" -name locked -type d -perm 0000 | wc -l)" 2 "mode 0000 directories in $layers"
  fi
  expect_exit 0 git mullet discard "$JOB"
  assert_absent "$dir"
  assert_eq "$(pristine_tree)" "" "the pristine checkout after the last job's discard"
}

# Nothing of a job outlives its runner killed with SIGKILL: no sandbox
# process, and under fuse-overlayfs no daemon (a host process serving the
# worker's files). Each is found by its mount namespace, which holds the
# job's directories.
test_nothing_of_a_job_outlives_its_killed_runner() {
  base_repo
  local common dir id runner holders comm
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  git mullet run --json -q -m "outlive" --command "echo >/mullet/home/started; sleep 600" >/dev/null 2>&1 &
  local git_pid=$!
  wait_until 60 sh -c "ls -d '$common'/mullet/jobs/*/ >/dev/null 2>&1"
  dir="$(ls -d "$common"/mullet/jobs/*/ | head -n 1)"
  dir="${dir%/}"
  wait_until 60 job_home_has "$dir" started
  id="$(basename "$dir")"
  runner="$(pgrep -P "$git_pid" -x git-mullet)" || fail "no git-mullet child of git ($git_pid)"
  # Positive control: processes holding the job's directories in their
  # mount namespace run now, the daemon among them under fuse-overlayfs.
  holders="$(grep -ls "$id" /proc/[0-9]*/mountinfo | cut -d/ -f3 || true)"
  [ -n "$holders" ] || fail "no process holds job $id's directories while it runs"
  comm="$(for pid in $holders; do cat "/proc/$pid/comm" 2>/dev/null; done)"
  if [ "${MULLET_TEST_WORK_TREE:-}" = fuse-overlayfs ]; then
    assert_contains "$comm" fuse-overlayfs "the processes of the running job"
  else
    assert_not_contains "$comm" fuse-overlayfs "the processes of the running job"
  fi
  kill -KILL "$runner"
  wait_until 30 sh -c "! grep -qs '$id' /proc/[0-9]*/mountinfo"
  wait "$git_pid" || true
}

test_another_jobs_upper_dir_is_out_of_reach_while_it_runs() {
  # Two jobs at once: two uids.
  base_repo 2
  local secret
  secret="$(sec_secret)"
  # A job that keeps running until told (through its home, a plain bind),
  # with a secret the test puts in its upper dir.
  (SEC_BOUND=120 sec_run "echo placeholder >planted
echo >/mullet/home/started
while [ ! -e /mullet/home/stop ]; do sleep 0.1; done
finish" >/dev/null 2>&1) &
  local runner=$!
  local common first_dir
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  wait_until 60 sh -c "ls -d '$common'/mullet/jobs/*/ >/dev/null 2>&1"
  first_dir="$(ls -d "$common"/mullet/jobs/*/ | head -n 1)"
  first_dir="${first_dir%/}"
  wait_until 60 job_home_has "$first_dir" started
  local first_upper
  first_upper="$(job_work "$first_dir")"
  printf '%s\n' "$secret" >"$first_upper/planted"
  sec_open_up "$first_upper"
  sec_run "
try read-running-upper cat '$first_upper/planted'
try list-running-job-dir ls '$first_dir'
hunt SECRET-
finish"
  sec_assert_worker_ran
  sec_assert_all_denied 2
  assert_not_contains "$LOG" "$secret" "the second worker's output"
  : >"$(job_home "$first_dir")/stop"
  wait "$runner" || true
}

run_tests

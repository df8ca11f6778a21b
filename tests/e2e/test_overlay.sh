#!/usr/bin/env bash
# The base checked out once: a job's work tree is an overlay of a pristine
# checkout of its base (git/pristine.hpp, sandbox/overlay.hpp) that later jobs
# on that base share; `[sandbox] work_tree = "checkout"` gives a job a
# checkout of its own; discarding the last job on a base removes its pristine
# checkout.
source "$(dirname "$0")/../lib/harness.sh"

# As root, a job's pristine checkout belongs to its sandbox uid, the first
# free one of the machine's range, which jobs of other tests running at the
# same time may hold: this suite's jobs get a range of their own (one uid:
# they run one at a time).
OWN_UID=$((1879048192 + 1048576 + RANDOM * 32 + RANDOM % 32))
# MULLET_TEST_WORK_TREE (tests/CMakeLists.txt: "fuse-overlayfs" for the
# suite's second run as root) is the work_tree of every job that names none.
overlay_config() {
  local wanted=()
  case "$*" in
    *work_tree*) ;;
    *) [ -z "${MULLET_TEST_WORK_TREE:-}" ] || wanted=("work_tree = \"$MULLET_TEST_WORK_TREE\"") ;;
  esac
  user_config '[sandbox]' "uid = $OWN_UID" 'uid_count = 1' "${wanted[@]}" "$@"
}

# pristine_entries: the pristine checkouts of the current repository.
# A worker command that writes the work tree's file system type (its mount's,
# from /proc/self/mountinfo) to ./fstype.
RECORD_FSTYPE='awk '"'"'$5 == "/mullet/work" { for (i = 7; i <= NF; i++) if ($i == "-") { type = $(i + 1) } }
END { print type }'"'"' /proc/self/mountinfo >fstype.tmp && mv fstype.tmp fstype'

pristine_entries() {
  local common
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  [ -d "$common/mullet/pristine" ] || return 0
  (cd "$common/mullet/pristine" && find . -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort)
}

pristine_dir() {
  local common
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  echo "$common/mullet/pristine/$(pristine_entries | head -n 1)"
}

test_a_job_works_in_an_overlay_of_the_pristine_checkout() {
  new_repo repo
  cd repo
  overlay_config
  local base
  base="$(git rev-parse HEAD)"
  run_job -m "edit" --command 'test -z "$(git status --porcelain)" || { git status --porcelain; exit 9; }
'"$RECORD_FSTYPE"'
echo more >>README; rm src/main.c; mkdir -p new/dir; echo n >new/dir/file; chmod +x README'
  assert_eq "$RUN_CODE" 0 "exit code of the job"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "state"
  local result dir
  result="$(json_field "$JOB_JSON" result)"
  # Kernel overlayfs, or fuse-overlayfs when the suite runs with it.
  assert_eq "$(git show "$result:fstype")" \
    "$([ "${MULLET_TEST_WORK_TREE:-}" = fuse-overlayfs ] && echo fuse.fuse-overlayfs || echo overlay)" \
    "the work tree's file system type"
  assert_eq "$(git show "$result:README")" "$(printf 'hello\nmore')" "README in the result"
  assert_eq "$(git ls-tree "$result" -- README | cut -c1-6)" 100755 "README's mode"
  assert_eq "$(git ls-tree -r --name-only "$result" -- src)" "" "src in the result"
  assert_eq "$(git show "$result:new/dir/file")" n "new/dir/file"
  dir="$(job_dir "$JOB")"
  # The job claimed the base's pristine checkout; its work tree on the host
  # is only the overlay's mount point, its changes are in the upper dir.
  assert_matches "$(cat "$dir/pristine")" "^$base-[0-9]+$" "the job's claim"
  assert_eq "$(find "$dir/work" -mindepth 1 | wc -l)" 0 "entries in the mount point on the host"
  assert_exists "$(job_work "$dir")/new/dir/file"
  assert_eq "$(cat "$(pristine_dir)/tree/README")" hello "the pristine README"
  assert_exists "$(pristine_dir)/tree/src/main.c"
}

test_the_second_job_on_a_base_reuses_the_pristine_checkout() {
  new_repo repo
  cd repo
  overlay_config
  run_job -m "first" --command 'echo one >one'
  assert_eq "$RUN_CODE" 0 "exit code of the first job"
  local first="$JOB" entry tree_inode index_inode
  entry="$(pristine_dir)"
  tree_inode="$(stat -c %i "$entry/tree")"
  index_inode="$(stat -c %i "$entry/index")"
  run_job -m "second" --command 'test -z "$(git status --porcelain)" && test ! -e one && echo two >two'
  assert_eq "$RUN_CODE" 0 "exit code of the second job"
  assert_eq "$(pristine_entries | wc -l)" 1 "pristine checkouts"
  # Not checked out again: the same entry, the same files.
  assert_eq "$(stat -c %i "$entry/tree")" "$tree_inode" "the pristine tree's inode"
  assert_eq "$(stat -c %i "$entry/index")" "$index_inode" "the pristine index's inode"
  assert_eq "$(cat "$(job_dir "$JOB")/pristine")" "$(cat "$(job_dir "$first")/pristine")" "both jobs' claims"
  assert_eq "$(git show "$(json_field "$JOB_JSON" result):two")" two "the second job's result"
}

test_discarding_the_last_job_on_a_base_removes_its_pristine_checkout() {
  new_repo repo
  cd repo
  overlay_config
  run_job -m "first" --command 'echo one >one'
  local first="$JOB"
  run_job -m "second" --command 'echo two >two'
  local second="$JOB"
  assert_eq "$(pristine_entries | wc -l)" 1 "pristine checkouts"
  expect_exit 0 git mullet discard "$first"
  assert_eq "$(pristine_entries | wc -l)" 1 "pristine checkouts while a job uses it"
  expect_exit 0 git mullet discard "$second"
  assert_eq "$(pristine_entries)" "" "pristine checkouts after the last discard"
}

test_a_build_left_by_a_crash_goes_with_the_last_discard_and_a_live_one_stays() {
  new_repo repo
  cd repo
  overlay_config
  run_job -m "first" --command 'echo one >one'
  local pristine build_fd
  pristine="$(dirname "$(pristine_dir)")"
  # What a build killed mid-checkout leaves, and a build still running
  # (it holds a flock on its directory: here this shell does).
  mkdir -p "$pristine/building-dead1/tree" "$pristine/building-live1/tree"
  exec {build_fd}<"$pristine/building-live1"
  flock -x "$build_fd"
  expect_exit 0 git mullet discard "$JOB"
  assert_eq "$(pristine_entries)" "building-live1" "what the last discard left"
  exec {build_fd}<&-
  run_job -m "second" --command 'echo two >two'
  expect_exit 0 git mullet discard "$JOB"
  assert_eq "$(pristine_entries)" "" "pristine checkouts once the build is gone"
}

test_work_tree_checkout_gives_a_checkout_of_its_own() {
  new_repo repo
  cd repo
  overlay_config
  overlay_config 'work_tree = "checkout"'
  run_job -m "edit" --command 'echo more >>README'
  assert_eq "$RUN_CODE" 0 "exit code of the job"
  local dir
  dir="$(job_dir "$JOB")"
  assert_absent "$dir/pristine"
  assert_absent "$dir/upper"
  assert_absent "$dir/fuse-layers"
  assert_eq "$(cat "$dir/work/README")" "$(printf 'hello\nmore')" "README in the job's own checkout"
  assert_eq "$(pristine_entries)" "" "pristine checkouts"
  assert_eq "$(git show "$(json_field "$JOB_JSON" result):README")" "$(printf 'hello\nmore')" "README in the result"
}

test_a_bad_work_tree_value_is_refused() {
  new_repo repo
  cd repo
  overlay_config
  overlay_config 'work_tree = "fast"'
  expect_exit 2 git mullet run -m x --command true
  assert_contains "$ERR" "work_tree"
}

test_dry_run_and_doctor_say_which_work_tree() {
  new_repo repo
  cd repo
  overlay_config 'work_tree = "auto"'
  # The kernel on the machines this runs on never refuses an overlay.
  expect_exit 0 git mullet run --dry-run -m x --command true
  assert_contains "$OUT" "work tree:   an overlay of the base's pristine checkout (kernel overlayfs"
  overlay_config 'work_tree = "overlay"'
  expect_exit 0 git mullet run --dry-run -m x --command true
  assert_contains "$OUT" "work tree:   an overlay of the base's pristine checkout (kernel overlayfs"
  overlay_config
  assert_contains "$OUT" "overlay:"
  expect_exit 0 git mullet doctor
  assert_contains "$OUT" "an overlay of the base's pristine checkout"
  overlay_config 'work_tree = "checkout"'
  expect_exit 0 git mullet run --dry-run -m x --command true
  assert_contains "$OUT" 'work tree:   a checkout of its own: [sandbox] work_tree = "checkout"'
  assert_not_contains "$OUT" "overlay:"
}

# work_tree = "fuse-overlayfs": as root, the job's work tree is served by
# fuse-overlayfs (its daemon gone when the job is); as a user (who cannot open
# /dev/fuse on the machines this runs on) the job, its dry run and doctor say
# it is refused, and nothing runs.
test_work_tree_fuse_overlayfs() {
  new_repo repo
  cd repo
  overlay_config 'work_tree = "fuse-overlayfs"'
  if [ "$(id -u)" != 0 ]; then
    expect_exit 3 git mullet run -m x --command 'echo ran >ran'
    assert_contains "$ERR" '[sandbox] work_tree = "fuse-overlayfs", but cannot open /dev/fuse'
    assert_contains "$ERR" 'work_tree = "auto"'
    expect_exit 3 git mullet run --dry-run -m x --command true
    assert_contains "$ERR" "cannot open /dev/fuse"
    git mullet doctor >doctor.out 2>&1 || true
    assert_contains "$(cat doctor.out)" "refused: cannot open /dev/fuse"
    return
  fi
  expect_exit 0 git mullet run --dry-run -m x --command true
  assert_contains "$OUT" "work tree:   an overlay of the base's pristine checkout (fuse-overlayfs"
  run_job -m "fuse" --command "$RECORD_FSTYPE"'
echo changed >README; rm src/main.c; mkdir d; echo n >d/f'
  assert_eq "$RUN_CODE" 0 "exit code of the job"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git show "$result:fstype")" fuse.fuse-overlayfs "the work tree's file system type"
  assert_eq "$(git show "$result:README")" changed "README in the result"
  assert_eq "$(git ls-tree -r --name-only "$result" -- src)" "" "src in the result"
  assert_eq "$(git show "$result:d/f")" n "d/f in the result"
  assert_eq "$(pgrep -u "$OWN_UID" -c fuse-overlayfs || true)" 0 "fuse-overlayfs daemons left"
}

# No path reaches a mount's option string (kernel overlayfs names its layers
# by descriptor, fuse-overlayfs by fixed staging paths): a repository whose
# path holds , : = and \ gets its overlay like any other.
test_a_repository_path_with_option_characters_gets_its_overlay() {
  local odd='odd,lowerdir=:x\y'
  new_repo "$odd"
  cd "$odd"
  overlay_config
  run_job -m "odd" --command "$RECORD_FSTYPE"'
echo changed >README'
  assert_eq "$RUN_CODE" 0 "exit code of the job"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git show "$result:fstype")" \
    "$([ "${MULLET_TEST_WORK_TREE:-}" = fuse-overlayfs ] && echo fuse.fuse-overlayfs || echo overlay)" \
    "the work tree's file system type"
  assert_eq "$(git show "$result:README")" changed "README in the result"
  assert_exists "$(job_work "$(job_dir "$JOB")")/README"
}

# A base that tracks a `.wh.` name: fuse-overlayfs would read it in its
# lower layer as a deletion and hide it and what it names from the worker,
# so under fuse-overlayfs the job is refused, nothing run; under kernel
# overlayfs it is a plain name the worker sees.
test_a_base_tracking_a_wh_name() {
  new_repo repo
  cd repo
  mkdir -p sub
  printf 'shown\n' >sub/foo
  printf 'marker\n' >sub/.wh.foo
  git add -A
  git commit -qm "a .wh. name"
  overlay_config
  if [ "${MULLET_TEST_WORK_TREE:-}" = fuse-overlayfs ]; then
    expect_exit 3 git mullet run -m x --command 'echo ran >ran'
    assert_contains "$ERR" "the base tracks sub/.wh.foo"
    assert_contains "$ERR" 'work_tree = "checkout"'
    return
  fi
  run_job -m "wh" --command 'cat sub/foo sub/.wh.foo >seen'
  assert_eq "$RUN_CODE" 0 "exit code of the job"
  assert_eq "$(git show "$(json_field "$JOB_JSON" result):seen")" "$(printf 'shown\nmarker')" "what the worker saw"
}

test_setup_dependency_dirs_are_bound_from_the_upper_dir() {
  new_repo repo
  cd repo
  overlay_config
  printf '[run]\nsetup = "mkdir node_modules && echo dep >node_modules/dep"\n' >.mullet.toml
  git add .mullet.toml
  git commit -qm "setup"
  run_job -m "use deps" --command 'cat node_modules/dep >copied; ! echo x >node_modules/dep'
  assert_eq "$RUN_CODE" 0 "exit code of the job: $JOB_JSON"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git show "$result:copied")" dep "what the worker read from node_modules"
  assert_eq "$(git ls-tree -r --name-only "$result" -- node_modules)" "" "node_modules in the result"
}

test_a_job_continued_beyond_its_base_gets_a_checkout_of_its_own() {
  new_repo repo
  cd repo
  overlay_config
  run_job -m "first" --command 'echo one >>README'
  assert_eq "$RUN_CODE" 0 "exit code of the first run"
  local dir
  dir="$(job_dir "$JOB")"
  assert_exists "$dir/pristine"
  # Its last snapshot is not the base: no pristine checkout of it exists.
  expect_exit 0 git mullet run --continue "$JOB" -m "more" --json -q
  assert_absent "$dir/pristine"
  assert_absent "$dir/upper"
  assert_absent "$dir/fuse-layers"
  # The same command again, from the first run's snapshot.
  assert_eq "$(cat "$dir/work/README")" "$(printf 'hello\none\none')" "README in the continued job's checkout"
  # No job claims the pristine checkout any more; the next discard takes it.
  expect_exit 0 git mullet discard "$JOB"
  assert_eq "$(pristine_entries)" "" "pristine checkouts"
}

run_tests

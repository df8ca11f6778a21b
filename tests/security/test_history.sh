#!/usr/bin/env bash
# What of the user's repository a sandbox can read ([sandbox] history).
# Secrets are planted where a base's history never reaches: on another
# branch, in a stash, in an unreachable blob, in a commit only a reflog
# entry remembers, and in an annotated tag (its message and the commit it
# tags). A probe run as the worker and as a gate hunts for them with
# everything git offers (cat-file --batch-all-objects, rev-list --all, fsck
# --lost-found / --unreachable, log --all, the stash) and without git: every
# file under /mullet read as text, every pack file unpacked into a scratch
# repository of its own, every loose object inflated. Under the default
# (base) and none it finds nothing, and sees exactly the objects the base
# reaches; under all (the positive control) it finds every secret.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

# The probe: $PROBE_OUT is where it keeps what it found (the worker keeps it
# in its work tree, so the result commit carries it). Its summary goes to
# stdout: PROBE-FOUND <secrets>, PROBE-GIT-FAILED <git commands that
# failed>, PROBE-HEAD, PROBE-COMMITS, PROBE-OBJECTS, PROBE-END.
PROBE='
out="${PROBE_OUT:-/mullet/work/probe}"
scratch="$TMPDIR/probe-scratch"
# /mullet itself cannot be listed (mode 0111): what is below it is walked by
# name, every object directory git is told of included.
roots="/mullet/work /mullet/git /mullet/objects /mullet/home /mullet/etc /mullet/bin"
for k in 1 2 3 4 5 6 7 8 9; do roots="$roots /mullet/objects-$k"; done
roots="$roots $(printf "%s" "${GIT_ALTERNATE_OBJECT_DIRECTORIES:-}" | tr ":" " ")"
roots="$(for r in $roots; do [ -e "$r" ] && echo "$r"; done | sort -u | tr "\n" " ")"
mkdir -p "$out" "$scratch"
: >"$out/git-failed.txt"
check() {
  "$@" >/dev/null 2>&1 || echo "$*" >>"$out/git-failed.txt"
}
# What the worker may reasonably run: all of it must work.
check git status
check git diff --stat HEAD
check git log -p
check git show HEAD
check git blame -- README
check git ls-files
check git cat-file -p "HEAD^{tree}"
{
  git cat-file --batch-all-objects --batch-check
  git cat-file --batch-all-objects --batch
  git rev-list --all --objects | cut -c1-40 | git cat-file --batch
  git fsck --lost-found 2>&1
  git fsck --unreachable --no-reflogs 2>&1 | awk "{print \$3}" | git cat-file --batch
  git log --all -p 2>&1
  git log -g -p 2>&1
  git stash list -p 2>&1
  git for-each-ref 2>&1
  ls -laR $roots 2>&1
  grep -ra "SECRET-" $roots 2>/dev/null
  # Pack files read without our alternates: unpacked into a repository of
  # their own, then every object printed.
  n=0
  for pack in $(find $roots -name "*.pack" 2>/dev/null | sort -u); do
    n=$((n + 1))
    git init -q "$scratch/unpacked-$n"
    env -u GIT_ALTERNATE_OBJECT_DIRECTORIES git -C "$scratch/unpacked-$n" unpack-objects -q <"$pack"
    env -u GIT_ALTERNATE_OBJECT_DIRECTORIES git -C "$scratch/unpacked-$n" cat-file --batch-all-objects --batch
  done
  echo "PACKS-READ $n"
  # Loose objects, inflated by hand.
  python3 -c "
import os, re, zlib
import sys
for top in sys.argv[1:]:
  for root, dirs, files in os.walk(top):
    for name in files:
        path = os.path.join(root, name)
        if re.search(r\"/[0-9a-f]{2}/[0-9a-f]{38}$\", path):
            try:
                print(zlib.decompress(open(path, \"rb\").read()).decode(\"latin-1\"))
            except Exception as error:
                print(\"cannot inflate\", path, error)
" $roots
} >"$scratch/everything.txt" 2>&1
grep -ao "SECRET-[0-9a-f]\{16\}" "$scratch/everything.txt" | sort -u >"$out/found.txt"
grep -a "^PACKS-READ" "$scratch/everything.txt" >"$out/packs.txt"
echo "PROBE-FOUND $(tr "\n" " " <"$out/found.txt")"
echo "PROBE-GIT-FAILED $(tr "\n" ";" <"$out/git-failed.txt")"
echo "PROBE-HEAD $(git rev-parse HEAD)"
echo "PROBE-COMMITS $(git log --format=%H | wc -l)"
echo "PROBE-OBJECTS $(git cat-file --batch-all-objects --batch-check | wc -l)"
echo "PROBE-$(cat "$out/packs.txt")"
echo "PROBE-END"
'

# plant_secrets [packed]: the current repository (new_repo) gets a second
# commit on main, which is the base (BASE; FIRST is its parent), and a secret
# in each place the base does not reach: S_BRANCH, S_STASH, S_LOOSE,
# S_REFLOG, S_TAGGED (the tagged commit's file), S_TAG_MESSAGE. With
# "packed", everything reachable from a ref or reflog is repacked first.
plant_secrets() {
  S_BRANCH="$(sec_secret)"
  S_STASH="$(sec_secret)"
  S_LOOSE="$(sec_secret)"
  S_REFLOG="$(sec_secret)"
  S_TAGGED="$(sec_secret)"
  S_TAG_MESSAGE="$(sec_secret)"
  ALL_SECRETS="$(printf '%s\n' "$S_BRANCH" "$S_STASH" "$S_LOOSE" "$S_REFLOG" "$S_TAGGED" "$S_TAG_MESSAGE" | sort)"
  FIRST="$(git rev-parse HEAD)"
  printf 'second\n' >>README
  git commit -qam "second"
  git checkout -q -b other
  echo "$S_BRANCH" >other.txt
  git add other.txt
  git commit -qm "other branch"
  git checkout -q main
  git checkout -q -b tagged
  echo "$S_TAGGED" >tagged.txt
  git add tagged.txt
  git commit -qm "tagged"
  git tag -a v-secret -m "$S_TAG_MESSAGE"
  git checkout -q main
  git branch -q -D tagged
  echo "$S_REFLOG" >reflog.txt
  git add reflog.txt
  git commit -qm "only in the reflog"
  git reset -q --hard HEAD~1
  echo "$S_STASH" >>README
  git stash -q
  local loose
  loose="$(echo "$S_LOOSE" | git hash-object -w --stdin)"
  if [ "${1:-}" = packed ]; then git repack -q -a -d; fi
  BASE="$(git rev-parse HEAD)"
  git cat-file -e "$loose" || fail "the planted loose blob is not in the store"
}

# default_config: the user config holds nothing (each test starts from it).
default_config() {
  sec_config '# defaults'
}

# The objects the base reaches (history base), or its commit and tree (none).
objects_reached() {
  git rev-list --objects "$@" | cut -c1-40 | sort -u | wc -l
}

# probe_line NAME [TEXT]: the value of the probe's NAME line in TEXT ($LOG).
probe_line() {
  printf '%s\n' "${2:-$LOG}" | sed -n "s/^PROBE-$1 *//p" | tail -n 1
}

# assert_probe_clean TEXT: the probe ran to its end, found nothing, and
# every git command it tried worked.
assert_probe_clean() {
  assert_contains "$1" "PROBE-END" "the probe's output"
  assert_eq "$(probe_line FOUND "$1")" "" "secrets the probe found"
  assert_eq "$(probe_line GIT-FAILED "$1")" "" "git commands that failed inside"
  # It did read pack files: the positive control of the direct reading.
  [ "$(probe_line PACKS-READ "$1")" -ge 1 ] || fail "the probe read no pack file: $1"
}

# result_file PATH: a file of the job's result commit.
result_file() {
  git cat-file blob "$(sec_jq 'd["result"]'):$1"
}

test_default_history_hides_every_other_object() {
  default_config
  new_repo repo
  cd repo
  plant_secrets
  SEC_BOUND=120 sec_run "$PROBE
finish"
  sec_assert_state succeeded
  sec_assert_worker_ran
  assert_probe_clean "$LOG"
  assert_eq "$(result_file probe/found.txt)" "" "found.txt in the result commit"
  assert_eq "$(probe_line HEAD)" "$BASE" "HEAD inside"
  assert_eq "$(probe_line COMMITS)" 2 "commits git log shows inside"
  # Exactly the base's objects, and each secret is nowhere the job reached.
  assert_eq "$(probe_line OBJECTS)" "$(objects_reached "$BASE")" "objects inside"
  local secret
  for secret in $ALL_SECRETS; do assert_not_contains "$LOG" "$secret" "the worker's output"; done
}

test_default_history_hides_packed_objects_too() {
  default_config
  new_repo repo
  cd repo
  plant_secrets packed
  SEC_BOUND=120 sec_run "$PROBE
finish"
  sec_assert_state succeeded
  sec_assert_worker_ran
  assert_probe_clean "$LOG"
  assert_eq "$(result_file probe/found.txt)" "" "found.txt in the result commit"
  assert_eq "$(probe_line OBJECTS)" "$(objects_reached "$BASE")" "objects inside"
}

test_history_all_shows_everything_positive_control() {
  default_config
  new_repo repo
  cd repo
  plant_secrets
  sec_config '[sandbox]' 'history = "all"'
  SEC_BOUND=120 sec_run "$PROBE
finish"
  sec_assert_state succeeded
  sec_assert_worker_ran
  assert_eq "$(result_file probe/found.txt)" "$ALL_SECRETS" "what the probe found under history = all"
  assert_eq "$(result_file probe/git-failed.txt)" "" "git commands that failed inside"
}

test_history_all_shows_packed_objects_positive_control() {
  default_config
  new_repo repo
  cd repo
  plant_secrets packed
  sec_config '[sandbox]' 'history = "all"'
  SEC_BOUND=120 sec_run "$PROBE
finish"
  sec_assert_state succeeded
  assert_eq "$(result_file probe/found.txt)" "$ALL_SECRETS" "what the probe found under history = all"
}

test_history_none_is_the_base_commit_and_all_its_files() {
  default_config
  new_repo repo
  cd repo
  plant_secrets
  sec_config '[sandbox]' 'history = "none"'
  SEC_BOUND=120 sec_run "$PROBE
git ls-files >probe/ls-files.txt
git log --format=%H >probe/log.txt
git diff --quiet HEAD && echo clean >probe/diff.txt
finish"
  sec_assert_state succeeded
  sec_assert_worker_ran
  assert_probe_clean "$LOG"
  assert_eq "$(result_file probe/log.txt)" "$BASE" "git log inside: one commit, the base"
  assert_eq "$(result_file probe/ls-files.txt)" "$(git ls-tree -r --name-only "$BASE")" "the base's files"
  assert_eq "$(result_file probe/diff.txt)" clean "the work tree against HEAD"
  assert_eq "$(probe_line OBJECTS)" "$(objects_reached --no-walk "$BASE")" "objects inside"
  # Every file of the base is there, byte for byte.
  local path
  for path in $(git ls-tree -r --name-only "$BASE"); do
    assert_eq "$(git cat-file blob "$(sec_jq 'd["result"]'):$path")" "$(git cat-file blob "$BASE:$path")" "$path"
  done
}

test_a_gate_sees_the_snapshot_and_nothing_else() {
  default_config
  new_repo repo
  cd repo
  plant_secrets
  local gate="PROBE_OUT=\$TMPDIR/gate-probe; $PROBE"
  SEC_BOUND=120 sec_run "echo attempt >attempt.txt
finish" --gate "$gate"
  sec_assert_state succeeded
  local tail result
  tail="$(sec_jq 'd["attempts"][0]["gates"][0]["output_tail"]')"
  result="$(sec_jq 'd["result"]')"
  assert_probe_clean "$tail"
  # The gate's clone is at the attempt's snapshot, whose history it has.
  assert_eq "$(probe_line HEAD "$tail")" "$result" "HEAD inside the gate"
  assert_eq "$(probe_line COMMITS "$tail")" 3 "commits git log shows inside the gate"
  assert_eq "$(probe_line OBJECTS "$tail")" "$(objects_reached "$result")" "objects inside the gate"

  # Positive control: under all, the same gate finds every secret.
  sec_config '[sandbox]' 'history = "all"'
  SEC_BOUND=120 sec_run "echo attempt >attempt.txt
finish" --gate "$gate"
  tail="$(sec_jq 'd["attempts"][0]["gates"][0]["output_tail"]')"
  assert_eq "$(probe_line FOUND "$tail")" "$(printf '%s ' $ALL_SECRETS)" "what the gate found under history = all"
}

test_a_second_attempt_runs_git_on_the_same_clone() {
  default_config
  new_repo repo
  cd repo
  plant_secrets
  # Attempt 1 fails its gate; attempt 2 probes (HEAD is still the base).
  SEC_BOUND=120 sec_run "if [ -e attempt1.txt ]; then $PROBE
fi
echo done >attempt1.txt
finish" --attempts 2 --gate 'test -e probe/found.txt'
  sec_assert_state succeeded
  assert_eq "$(sec_jq 'len(d["attempts"])')" 2 "attempts"
  assert_probe_clean "$LOG"
  assert_eq "$(probe_line HEAD)" "$BASE" "HEAD inside attempt 2"
}

test_a_resumed_job_works_with_history_base() {
  default_config
  new_repo repo
  cd repo
  plant_secrets
  # The first run snapshots its work and fails; the resumed run starts from
  # that snapshot and probes.
  SEC_BOUND=120 sec_run "if [ -e first-run.txt ]; then $PROBE
git log --format=%H >probe/log.txt
finish
exit 0
fi
echo done >first-run.txt
exit 3"
  sec_assert_state failed
  local first
  first="$(sec_jq 'd["result"]')"
  assert_eq "$(git rev-parse "$first^")" "$BASE" "the first snapshot's parent"
  expect_exit 0 timeout 120 git mullet resume --json -q "$JOB"
  JOB_JSON="$OUT"
  LOG="$(git mullet log "$JOB")"
  sec_assert_state succeeded
  assert_probe_clean "$LOG"
  assert_eq "$(probe_line HEAD)" "$first" "HEAD inside the resumed job"
  assert_eq "$(result_file probe/log.txt)" "$(printf '%s\n' "$first" "$BASE" "$FIRST")" "git log inside"
  assert_eq "$(probe_line OBJECTS)" "$(objects_reached "$first")" "objects inside"
}

test_the_repository_file_may_narrow_history_but_not_widen_it() {
  default_config
  new_repo repo
  cd repo
  plant_secrets
  printf '[sandbox]\nhistory = "all"\n' >.mullet.toml
  git add .mullet.toml
  git commit -qm "ask for everything"
  expect_exit 3 git mullet run --json -q -m probe --command "$PROBE"
  assert_contains "$ERR" "sandbox.history" "the refusal"
  assert_contains "$ERR" "may only narrow" "the refusal"
  assert_eq "$(git for-each-ref refs/mullet/jobs | wc -l)" 0 "jobs made"

  # A user who chose all: the repository may narrow it to none.
  sec_config '[sandbox]' 'history = "all"'
  printf '[sandbox]\nhistory = "none"\n' >.mullet.toml
  git commit -qam "no history"
  local base
  base="$(git rev-parse HEAD)"
  SEC_BOUND=120 sec_run "$PROBE
finish"
  sec_assert_state succeeded
  assert_probe_clean "$LOG"
  assert_eq "$(probe_line COMMITS)" 1 "commits inside"
  assert_eq "$(probe_line OBJECTS)" "$(objects_reached --no-walk "$base")" "objects inside"
}

test_the_plan_and_config_show_the_history() {
  default_config
  new_repo repo
  cd repo
  local base common
  base="$(git rev-parse HEAD)"
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  expect_exit 0 git mullet config
  assert_contains "$OUT" "history = 'base'  # built-in" "git mullet config"
  expect_exit 0 git mullet run --dry-run -m plan --command true
  assert_contains "$OUT" "history:     base (the objects the base commit reaches" "the plan"
  assert_contains "$OUT" "/mullet/objects <- $common/mullet/bases/$base-base/objects" "the plan"
  assert_not_contains "$OUT" "<- $common/objects" "the plan"
  # A plan builds nothing.
  assert_absent "$common/mullet/bases"
  expect_exit 0 git mullet run --dry-run --json -m plan --command true
  assert_eq "$(printf '%s' "$OUT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["phases"][0]["history"])')" base

  sec_config '[sandbox]' 'history = "all"'
  expect_exit 0 git mullet run --dry-run -m plan --command true
  assert_contains "$OUT" "history:     all (every object of the repository" "the plan"
  assert_contains "$OUT" "/mullet/objects <- $common/objects" "the plan"
  sec_config '[sandbox]' 'history = "none"'
  expect_exit 0 git mullet run --dry-run -m plan --command true
  assert_contains "$OUT" "/mullet/objects <- $common/mullet/bases/$base-none/objects" "the plan"
}

test_jobs_on_one_base_share_one_pack_and_race_safely() {
  default_config
  new_repo repo
  cd repo
  local base common
  base="$(git rev-parse HEAD)"
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  # Two jobs at once: each may build, one rename wins, both run.
  git mullet run -q -m one --command 'echo one >one.txt' >"$TEST_ROOT/one.out" 2>&1 &
  local one=$!
  git mullet run -q -m two --command 'echo two >two.txt' >"$TEST_ROOT/two.out" 2>&1 &
  local two=$!
  wait "$one" || fail "the first job failed: $(cat "$TEST_ROOT/one.out")"
  wait "$two" || fail "the second job failed: $(cat "$TEST_ROOT/two.out")"
  assert_eq "$(ls "$common/mullet/bases")" "$base-base" "the cache after two jobs"
  local pack_before
  pack_before="$(ls -i "$common/mullet/bases/$base-base/objects/pack")"
  # A third job reuses the entry as it is.
  SEC_BOUND=60 sec_run "finish"
  sec_assert_state succeeded
  assert_eq "$(ls -i "$common/mullet/bases/$base-base/objects/pack")" "$pack_before" "the pack after a third job"
}

test_a_cache_entry_that_is_not_ours_is_refused() {
  default_config
  new_repo repo
  cd repo
  plant_secrets
  local common decoy
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  # A symlink in the entry's place, to the user's whole store.
  decoy="$TEST_ROOT/decoy"
  mkdir -p "$decoy" "$common/mullet/bases"
  ln -s "$common" "$decoy/objects-link"
  ln -s "$decoy" "$common/mullet/bases/$BASE-base"
  mkdir -p "$decoy/objects/pack"
  cp "$common"/objects/pack/* "$decoy/objects/pack/" 2>/dev/null || true
  SEC_BOUND=60 sec_run "$PROBE
finish"
  assert_eq "$RUN_CODE" 3 "exit code"
  sec_assert_state refused
  assert_contains "$(sec_jq 'd["error"]')" "not a directory of the user running git-mullet" "the job's error"
  assert_not_contains "$LOG" "PROBE-END" "the worker's output"
}

run_tests

#!/usr/bin/env bash
# The worker controls its work tree, including the `.git` file that names the
# clone's git dir, and everything that ends up in the result. None of it may
# make git-mullet's own git (or libgit2) run anything on the host: not while
# the job is snapshotted, not in diff/merge/show/log/list, not when the user
# checks the result out with their ordinary git.
#
# The planted commands all append to $CANARY, a path under $TEST_ROOT: the
# sandbox cannot see it (its /tmp is private), so only a host process can
# create it. Each test ends with a positive control: plain host git, pointed
# at the worker's work tree, does fire the trap.
source "$(dirname "$0")/../lib/harness.sh"

# plant_script CANARY: the worker's attack, as a shell script. $1 is baked in.
plant_script() {
  local canary="$1"
  cat <<EOF
set -e
C='$canary'
ev() { printf "echo %s >>'%s'; cat >/dev/null 2>&1; true" "\$1" "\$C"; }
hook() { mkdir -p "\$(dirname "\$1")"; printf '#!/bin/sh\necho %s >>"%s"\n' "\$2" "\$C" >"\$1"; chmod +x "\$1"; }
evil_config() {
  cat <<CONFIG
[core]
	repositoryformatversion = 0
	bare = false
	fsmonitor = "\$(ev fsmonitor)"
	hooksPath = evil-hooks
	pager = "\$(ev pager)"
	editor = "\$(ev editor)"
	sshCommand = "\$(ev ssh)"
	askPass = "\$(ev askpass)"
	attributesFile = evil-attributes
	untrackedCache = true
[filter "evil"]
	clean = "\$(ev clean)"
	smudge = "\$(ev smudge)"
	process = "echo process >>'\$C'"
	required = true
[diff "evil"]
	command = "\$(ev diff-command)"
	textconv = "\$(ev textconv)"
[diff]
	external = "\$(ev diff-external)"
[merge "evil"]
	driver = "\$(ev merge-driver)"
[gpg]
	program = "\$(ev gpg)"
[commit]
	gpgSign = true
[credential]
	helper = "!\$(ev credential)"
[include]
	path = ../../evil-include
CONFIG
}
hooks_in() {
  for name in pre-commit post-commit pre-push post-checkout post-merge pre-auto-gc reference-transaction \\
              post-index-change fsmonitor-watchman prepare-commit-msg commit-msg post-rewrite; do
    hook "\$1/\$name" "hook-\$name"
  done
}

# 1. The .git file now names a git dir the worker built in its work tree.
mkdir -p hijack/.git/objects hijack/.git/refs/heads hijack/.git/hooks
echo 'ref: refs/heads/main' >hijack/.git/HEAD
evil_config >hijack/.git/config
hooks_in hijack/.git/hooks
printf 'gitdir: hijack/.git\n' >.git
# 2. Hooks, attributes and config-like files where tools look for them.
hooks_in evil-hooks
hooks_in .husky
hooks_in .githooks
hooks_in .
printf '* filter=evil diff=evil merge=evil\n' >.gitattributes
printf '* filter=evil diff=evil merge=evil\n' >evil-attributes
printf '[core]\n\tfsmonitor = "%s"\n' "\$(ev include)" >evil-include
evil_config >gitconfig
evil_config >.gitconfig
evil_config >.lfsconfig
printf '[submodule "sub"]\n\tpath = sub\n\turl = ext::sh -c %s\n\tupdate = !%s\n' "\$(ev ext)" "\$(ev update)" >.gitmodules
printf 'content\n' >changed.txt
echo planted
EOF
}

# the_trap_is_armed SCRIPT: the positive control. The same attack, planted by
# the host in a directory of its own, does fire for plain git - so the
# canary's absence elsewhere means something.
the_trap_is_armed() {
  local dir
  dir="$(mktemp -d "$TEST_ROOT/control.XXXXXX")"
  (
    cd "$dir"
    sh -c "$1" >/dev/null 2>&1
    git status >/dev/null 2>&1
    git add -A >/dev/null 2>&1
    git commit -qm "control" >/dev/null 2>&1
  ) || true
  [ -e "$CANARY" ] || fail "the planted trap did not fire even for plain git: the test proves nothing"
}

canary_absent_after() {
  [ ! -e "$CANARY" ] || fail "a planted command ran on the host after: $* (canary: $(cat "$CANARY"))"
}

test_planted_git_config_hooks_and_filters_never_run() {
  CANARY="$TEST_ROOT/canary-$RANDOM"
  new_repo repo
  cd repo
  run_job -m "plant traps" --command "$(plant_script "$CANARY")"
  canary_absent_after "git mullet run"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "the attacking job"
  expect_exit 0 git mullet log "$JOB"
  assert_contains "$OUT" planted
  local id="$JOB" work result
  work="$(job_work "$(job_dir "$id")")"
  result="$(json_field "$JOB_JSON" result)"
  # The attack was planted as described (the worker did run), and once the
  # worker ended, git-mullet put back a .git file of its own, naming the git
  # dir as the next attempt's sandbox sees it (no host path).
  assert_contains "$(cat "$work/hijack/.git/config")" fsmonitor
  assert_eq "$(head -n 1 "$work/.git")" "gitdir: /mullet/git" "the .git file after the job"
  # The snapshot: no .git, no nested git dir; the rest is there.
  assert_eq "$(git ls-tree -r --name-only "$result" | grep -E '(^|/)\.git(/|$)' || true)" "" ".git paths in the result"
  assert_eq "$(git cat-file blob "$result:changed.txt")" content
  git cat-file -e "$result:.gitattributes" || fail ".gitattributes is not in the result"
  git cat-file -e "$result:.husky/pre-commit" || fail ".husky/pre-commit is not in the result"

  local step
  for step in "list" "list --json" "show $id" "show --json $id" "log $id" "diff $id" "config"; do
    # shellcheck disable=SC2086
    expect_exit 0 git mullet $step
    canary_absent_after "git mullet $step"
  done
  expect_exit 0 git mullet diff "$id"
  assert_contains "$OUT" "+content"
  expect_exit 0 git mullet merge "$id"
  canary_absent_after "git mullet merge"

  # The user's ordinary git with the result checked out (their own
  # configuration, which defines none of the planted drivers).
  git status >/dev/null
  git checkout -q "mullet/$id"
  canary_absent_after "git checkout mullet/$id"
  assert_eq "$(cat changed.txt)" content "checked-out result"
  git status >/dev/null
  git diff main >/dev/null
  git log -p -1 >/dev/null
  printf 'user edit\n' >>changed.txt
  git commit -qam "user commit on the result"
  git checkout -q main
  git merge -q --no-edit "mullet/$id"
  canary_absent_after "the user's git on the merged result"

  # A new job based on the attacker's tree: the host-side checkout into the
  # clone must not honour its .gitattributes/.gitmodules either.
  run_job -m "second round" --command 'cat .gitattributes >seen; echo again >>changed.txt'
  canary_absent_after "a job based on the planted tree"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "job based on the planted tree"
  expect_exit 0 git mullet diff "$JOB"
  canary_absent_after "git mullet diff of the second job"

  expect_exit 0 git mullet discard "$JOB"
  canary_absent_after "git mullet discard"
  the_trap_is_armed "$(plant_script "$CANARY")"
}

test_a_real_git_dir_in_the_work_tree_is_ignored() {
  CANARY="$TEST_ROOT/canary-$RANDOM"
  new_repo repo
  cd repo
  # The .git file replaced by a whole git dir of the worker's.
  local script
  script="$(plant_script "$CANARY" | sed 's|^printf .gitdir: hijack/.git\\n. >.git$|rm -f .git; cp -r hijack/.git .git|')"
  assert_contains "$script" "cp -r hijack/.git .git"
  script="$script
[ -d .git/hooks ] && echo REPLACED-WITH-A-GIT-DIR"
  run_job -m "replace .git" --command "$script"
  canary_absent_after "git mullet run"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "the attacking job"
  local work
  work="$(job_work "$(job_dir "$JOB")")"
  expect_exit 0 git mullet log "$JOB"
  assert_contains "$OUT" REPLACED-WITH-A-GIT-DIR "the worker's output"
  [ -f "$work/.git" ] || fail "git-mullet did not put back its own .git file"
  local step
  for step in "list" "show $JOB" "log $JOB" "diff $JOB" "merge $JOB"; do
    # shellcheck disable=SC2086
    expect_exit 0 git mullet $step
    canary_absent_after "git mullet $step"
  done
  git checkout -q "mullet/$JOB"
  git status >/dev/null
  canary_absent_after "the user's git on the result"
  the_trap_is_armed "$script"
}

test_the_left_over_work_tree_is_no_trap_for_plain_git() {
  # The job's work tree stays in .git/mullet/jobs/<id>/work for review. A
  # user who cd's there gets `git status` run by their shell prompt (or
  # runs it themselves): the git dir it finds must not be the worker's.
  CANARY="$TEST_ROOT/canary-$RANDOM"
  new_repo repo
  cd repo
  run_job -m "plant traps" --command "$(plant_script "$CANARY")"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "the attacking job"
  local work
  work="$(job_work "$(job_dir "$JOB")")"
  [ -e "$work/changed.txt" ] || fail "no work tree left to look at"
  (cd "$work" && git status >/dev/null 2>&1; git diff >/dev/null 2>&1; git log -1 >/dev/null 2>&1) || true
  canary_absent_after "plain git status in the job's left-over work tree"
  (cd "$work/src" && git status >/dev/null 2>&1) || true
  canary_absent_after "plain git status in a subdirectory of the left-over work tree"
  # Nor do our own commands, run from in there.
  local step
  for step in "list" "show $JOB" "log $JOB" "diff $JOB" "merge $JOB" "config" "run -q -m again --command true"; do
    # shellcheck disable=SC2086
    (cd "$work" && git mullet $step >/dev/null 2>&1) || true
    canary_absent_after "git mullet $step inside the left-over work tree"
  done
  the_trap_is_armed "$(plant_script "$CANARY")"
}

test_snapshot_stores_bytes_exactly() {
  new_repo repo
  cd repo
  # A base whose attributes ask for CRLF conversion, with blobs stored
  # exactly as given (plumbing, no filters).
  printf '* text eol=crlf\n*.bin -text\n' >.gitattributes
  git add .gitattributes 2>/dev/null
  local lf crlf mixed
  lf="$(printf 'one\ntwo\n' | git hash-object -w --stdin --no-filters)"
  crlf="$(printf 'one\r\ntwo\r\n' | git hash-object -w --stdin --no-filters)"
  mixed="$(printf 'a\nb\r\nc\rd' | git hash-object -w --stdin --no-filters)"
  git update-index --add --cacheinfo "100644,$lf,base-lf.txt" --cacheinfo "100644,$crlf,base-crlf.txt" \
    --cacheinfo "100644,$mixed,base-mixed.txt"
  git commit -qm "attributes asking for conversion"
  # The worker checks what it was given, and writes new files both ways.
  run_job -m "line endings" --command 'sha256sum base-lf.txt base-crlf.txt base-mixed.txt >checkout-sums;
    printf "new\nlf\n" >new-lf.txt; printf "new\r\ncrlf\r\n" >new-crlf.txt; printf "x\r\ny\n" >new-mixed.txt;
    printf "one\ntwo\nthree\n" >base-lf.txt'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  local result
  result="$(json_field "$JOB_JSON" result)"
  # The checkout gave the worker the stored bytes...
  assert_eq "$(git cat-file blob "$result:checkout-sums" | awk '{print $1}' | tr '\n' ' ')" \
    "$(printf 'one\ntwo\n' | sha256sum | cut -d' ' -f1) $(printf 'one\r\ntwo\r\n' | sha256sum | cut -d' ' -f1) $(printf 'a\nb\r\nc\rd' | sha256sum | cut -d' ' -f1) " \
    "bytes the worker was given"
  # ... and the snapshot stored the bytes the worker wrote.
  assert_eq "$(blob_sha256 "$result:new-lf.txt")" "$(printf 'new\nlf\n' | sha256sum | cut -d' ' -f1)" "new LF file"
  assert_eq "$(blob_sha256 "$result:new-crlf.txt")" "$(printf 'new\r\ncrlf\r\n' | sha256sum | cut -d' ' -f1)" "new CRLF file"
  assert_eq "$(blob_sha256 "$result:new-mixed.txt")" "$(printf 'x\r\ny\n' | sha256sum | cut -d' ' -f1)" "new mixed file"
  assert_eq "$(blob_sha256 "$result:base-lf.txt")" "$(printf 'one\ntwo\nthree\n' | sha256sum | cut -d' ' -f1)" "rewritten LF file"
  assert_eq "$(git rev-parse "$result:base-crlf.txt")" "$crlf" "untouched CRLF blob"
  assert_eq "$(git rev-parse "$result:base-mixed.txt")" "$mixed" "untouched mixed blob"
  # The control: plain `git add` in the user's repository would have converted.
  printf 'new\r\ncrlf\r\n' >control.txt
  [ "$(git hash-object control.txt)" != "$(git cat-file blob "$result:new-crlf.txt" | git hash-object --stdin --no-filters)" ] ||
    fail "the attributes do not convert, so this test proves nothing"
}

test_ident_and_working_tree_encoding_are_not_applied() {
  new_repo repo
  cd repo
  printf '* ident\n*.utf16 working-tree-encoding=UTF-16\n' >.gitattributes
  git add .gitattributes 2>/dev/null
  git commit -qm "attributes that rewrite content"
  run_job -m "write" --command 'printf "\$Id\$\n" >ident.txt; printf "plain ascii\n" >text.utf16'
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git cat-file blob "$result:ident.txt")" '$Id$' "ident keyword"
  assert_eq "$(blob_sha256 "$result:text.utf16")" "$(printf 'plain ascii\n' | sha256sum | cut -d' ' -f1)" "encoding"
}

test_special_files_and_symlinks_do_not_trap_the_snapshot() {
  new_repo repo
  cd repo
  # FIFOs (one as a .gitignore), sockets' stand-ins, symlinks to host paths,
  # a .gitignore that is a symlink: the snapshot must neither block, nor
  # follow, nor read outside the work tree.
  expect_exit 0 timeout 60 git mullet run --json -q -m "special files" --command '
    mkfifo fifo; mkdir sub; mkfifo sub/.gitignore; echo kept >sub/file;
    mkdir other; ln -s /etc/shadow other/.gitignore; echo kept >other/file;
    ln -s /etc/shadow shadow-link; ln -s / root-link; ln -s /mullet/git git-link;
    ln -s ../../../../../../../../../../etc/passwd up-link; echo ok >ok.txt'
  local json="$OUT" result
  assert_eq "$(json_field "$json" state)" succeeded
  result="$(json_field "$json" result)"
  assert_eq "$(git cat-file blob "$result:ok.txt")" ok
  assert_eq "$(git cat-file blob "$result:sub/file")" kept
  assert_eq "$(git cat-file blob "$result:other/file")" kept
  if git cat-file -e "$result:fifo" 2>/dev/null; then fail "a FIFO was recorded"; fi
  if git cat-file -e "$result:sub/.gitignore" 2>/dev/null; then fail "a FIFO .gitignore was recorded"; fi
  assert_eq "$(git ls-tree "$result" shadow-link | cut -d' ' -f1)" 120000 "symlink mode"
  assert_eq "$(git cat-file blob "$result:shadow-link")" /etc/shadow "symlink target"
  assert_eq "$(git cat-file blob "$result:root-link")" / "symlink target"
  assert_eq "$(git cat-file blob "$result:other/.gitignore")" /etc/shadow "symlinked .gitignore"
  assert_contains "$(json_get "$json" '.snapshot_warnings')" fifo
}

run_tests

#!/usr/bin/env bash
# Planting things in the clone for git-mullet's snapshot (which runs on the
# host, outside the sandbox, after the worker) to follow out, hang on, or
# choke on: symlinks to the host, FIFOs, sockets, device nodes, a .gitignore
# that is a FIFO or a symlink to /dev/zero, sparse files.
# Every job must finish promptly (each `git mullet run` is bounded; the
# worker itself takes well under a second), symlinks must be recorded as
# symlinks (mode 120000, the target as text), and what cannot be recorded
# is left out with a warning in the record (snapshot_warnings).
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

# entry REV PATH: "mode type object" of PATH in REV's tree, or nothing.
entry() {
  git ls-tree "$1" -- "$2" | awk '{print $1, $2, $3}'
}

# assert_symlink REV PATH TARGET
assert_symlink() {
  local got
  got="$(entry "$1" "$2")"
  case "$got" in
    "120000 blob "*) ;;
    *) fail "$2 is recorded as '$got', not as a symlink (120000)" ;;
  esac
  assert_eq "$(git cat-file blob "$1:$2")" "$3" "the recorded target of $2"
}

warnings() {
  sec_jq '"\n".join(d["snapshot_warnings"])'
}

test_symlinks_out_of_the_clone_recorded_as_symlinks() {
  new_repo repo
  cd repo
  local repo_path="$PWD"
  # Relative links that, from the job's work tree on the host
  # (<repo>/.git/mullet/jobs/<id>/work), lead to the user's repository and
  # its .git.
  SEC_BOUND=60 sec_run "
ln -s /etc/passwd passwd-link
ln -s '$repo_path' repo-link
ln -s '$repo_path/.git/config' git-config-link
ln -s / root-link
ln -s ../../../../.. up-to-repo
ln -s ../../../.. up-to-git-dir
mkdir -p sub && ln -s ../../../../../.. sub/up-to-repo
ln -s '$HOME' home-link
ln -s /proc/self/root proc-root-link
finish"
  sec_assert_worker_ran
  local result
  result="$(sec_jq 'd["result"]')"
  assert_symlink "$result" passwd-link /etc/passwd
  assert_symlink "$result" repo-link "$repo_path"
  assert_symlink "$result" git-config-link "$repo_path/.git/config"
  assert_symlink "$result" root-link /
  assert_symlink "$result" up-to-repo ../../../../..
  assert_symlink "$result" up-to-git-dir ../../../..
  assert_symlink "$result" sub/up-to-repo ../../../../../..
  assert_symlink "$result" home-link "$HOME"
  assert_symlink "$result" proc-root-link /proc/self/root
  # Nothing was recorded through any of them.
  if git ls-tree -r --name-only "$result" | grep -E '^(passwd-link|repo-link|git-config-link|root-link|up-to-repo|up-to-git-dir|sub/up-to-repo|home-link|proc-root-link)/'; then
    fail "the snapshot followed a symlink into what it points to"
  fi
  if git grep -qE '^root:' "$result"; then fail "the result holds /etc/passwd's content"; fi
}

test_fifo_and_socket_left_out_with_a_warning() {
  new_repo repo
  cd repo
  SEC_BOUND=60 sec_run "
mkfifo fifo
mkdir -p sub && mkfifo sub/fifo
mkfifo src/main.c.fifo
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind(\"sock\")'
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind(\"sub/sock\")'
# A tracked file replaced by a FIFO.
rm README && mkfifo README
finish"
  sec_assert_worker_ran
  [ "$RUN_SECONDS" -le 30 ] || fail "the job took ${RUN_SECONDS}s"
  local result w path
  result="$(sec_jq 'd["result"]')"
  w="$(warnings)"
  for path in fifo sub/fifo src/main.c.fifo sock sub/sock README; do
    [ -z "$(entry "$result" "$path")" ] || fail "$path is in the result: $(entry "$result" "$path")"
    assert_contains "$w" "$path: is a special file" "snapshot_warnings"
  done
}

test_device_nodes_cannot_be_made() {
  new_repo repo
  cd repo
  SEC_BOUND=60 sec_run "
try mknod-char mknod null-dev c 1 3
try mknod-block mknod disk-dev b 8 0
try mknod-python python3 -c 'import os, stat; os.mknod(\"kmem-dev\", stat.S_IFCHR | 0o666, os.makedev(1, 2))'
try mknod-in-userns unshare -Ur mknod userns-dev c 1 3
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  local result
  result="$(sec_jq 'd["result"]')"
  local found
  # (An overlay's upper dir holds whiteouts, character devices 0/0, for what
  # the worker deleted; this worker deleted nothing.)
  found="$(find "$(sec_job_dir)/work" "$(sec_job_dir)/upper" \( -type c -o -type b \) 2>/dev/null)"
  [ -z "$found" ] || fail "device nodes in the job's work tree on the host: $found"
  git ls-tree -r --name-only "$result" | grep -- '-dev$' >/dev/null && fail "a device node name is in the result"
  true
}

test_gitignore_fifo_does_not_hang() {
  new_repo repo
  cd repo
  SEC_BOUND=60 sec_run "
mkfifo .gitignore
mkdir -p sub && mkfifo sub/.gitignore
echo kept >untracked.txt
echo kept >sub/untracked.txt
finish"
  sec_assert_worker_ran
  [ "$RUN_SECONDS" -le 30 ] || fail "the job took ${RUN_SECONDS}s"
  local result w
  result="$(sec_jq 'd["result"]')"
  w="$(warnings)"
  assert_contains "$w" ".gitignore: is not a regular file" "snapshot_warnings"
  [ -z "$(entry "$result" .gitignore)" ] || fail ".gitignore (a FIFO) is in the result"
  assert_eq "$(git cat-file blob "$result:untracked.txt")" kept "untracked.txt in the result"
  assert_eq "$(git cat-file blob "$result:sub/untracked.txt")" kept "sub/untracked.txt in the result"
}

test_gitignore_symlink_to_dev_zero_does_not_hang() {
  new_repo repo
  cd repo
  SEC_BOUND=60 sec_run "
ln -s /dev/zero .gitignore
mkdir -p sub && ln -s /dev/urandom sub/.gitignore
mkdir -p fifo-target && mkfifo fifo-target/pipe && ln -s pipe fifo-target/.gitignore
echo kept >untracked.txt
finish"
  sec_assert_worker_ran
  [ "$RUN_SECONDS" -le 30 ] || fail "the job took ${RUN_SECONDS}s"
  local result w
  result="$(sec_jq 'd["result"]')"
  w="$(warnings)"
  assert_contains "$w" ".gitignore: is not a regular file" "snapshot_warnings"
  assert_symlink "$result" .gitignore /dev/zero
  assert_symlink "$result" sub/.gitignore /dev/urandom
  assert_symlink "$result" fifo-target/.gitignore pipe
  assert_eq "$(git cat-file blob "$result:untracked.txt")" kept "untracked.txt in the result"
}

test_sparse_gitignore_does_not_exhaust_host_memory() {
  # Extra: a .gitignore that is a regular file, but a sparse one of 1 GiB
  # (it takes no disk, and is well under the default disk limit). The
  # snapshot runs in git-mullet itself, on the host, with no limit: its
  # peak memory must stay far below the file's apparent size.
  new_repo repo
  cd repo
  cat >"$PWD/../maxrss.py" <<'PY'
import resource, subprocess, sys
code = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w")).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
sys.exit(code)
PY
  local script peak
  script="$SEC_PRELUDE
truncate -s 1G .gitignore
echo kept >untracked.txt
finish"
  local started=$SECONDS
  peak="$(timeout -k 5 60 python3 "$PWD/../maxrss.py" "$PWD/../run.json" \
    git mullet run --json -q -m "sparse gitignore" --command "$script")"
  local code=$? took=$((SECONDS - started))
  echo "    # git-mullet peaked at ${peak:-?} MiB resident and took ${took}s" >&2
  [ "$code" != 124 ] && [ "$code" != 137 ] || fail "git mullet run did not finish within 60s"
  JOB_JSON="$(cat "$PWD/../run.json")"
  JOB="$(json_field "$JOB_JSON" id)" || fail "no job record"
  LOG="$(git mullet log "$JOB")"
  sec_assert_worker_ran
  [ "$peak" -le 256 ] || fail "git-mullet (on the host) peaked at $peak MiB resident for a 1 GiB sparse .gitignore"
  [ "$took" -le 30 ] || fail "the job took ${took}s for a worker that ran for well under a second"
}

test_sparse_files_do_not_stall_the_snapshot() {
  # Extra: four sparse files of 2 GiB each: no disk used, each well under
  # the default disk limit (10 GiB, which is also the largest file). The
  # snapshot reads and compresses every apparent byte, on the host, with no
  # time limit and deaf to SIGTERM. Bounded here at 30 seconds.
  new_repo repo
  cd repo
  SEC_BOUND=30 sec_run "
for i in 1 2 3 4; do truncate -s 2G sparse\$i.bin; done
du -sh . | sed 's/^/DISK-USED /'
finish"
  sec_assert_worker_ran
}

run_tests

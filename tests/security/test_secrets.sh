#!/usr/bin/env bash
# Reading what is not the worker's: the real home's keys, another job's
# clone, the host's /tmp/claude-<uid>, git-mullet's own environment, the
# user's uncommitted .env, and everything /proc could hand out (environ of
# every process, open-by-fd through /proc/*/fd, cwd and root links).
# A secret must appear nowhere in the worker's output, its record, any
# object of the repository, or the job's scratch directory.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

test_read_ssh_key_and_aws_credentials_fails() {
  new_repo repo
  cd repo
  local ssh_secret aws_secret
  ssh_secret="$(sec_secret)"
  aws_secret="$(sec_secret)"
  mkdir -p "$HOME/.ssh" "$HOME/.aws"
  printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n-----END OPENSSH PRIVATE KEY-----\n' "$ssh_secret" >"$HOME/.ssh/id_rsa"
  printf '[default]\naws_access_key_id = AKIA\naws_secret_access_key = %s\n' "$aws_secret" >"$HOME/.aws/credentials"
  sec_open_up "$HOME"
  sec_run "
H='$HOME'
try read-id-rsa cat \"\$H/.ssh/id_rsa\"
try read-aws cat \"\$H/.aws/credentials\"
try read-tilde-id-rsa cat ~/.ssh/id_rsa
try read-tilde-aws cat ~/.aws/credentials
try read-passwd-home sh -c 'cat \"\$(getent passwd \$(id -u) | cut -d: -f6)/.ssh/id_rsa\"'
try find-keys sh -c 'f=\$(find / -path /proc -prune -o -path /sys -prune -o -path /usr -prune -o \\( -name id_rsa -o -name credentials \\) -print 2>/dev/null); [ -n \"\$f\" ] && cat \$f'
echo HUNT-START; hunt SECRET-; echo HUNT-END
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  sec_assert_secret_nowhere "$ssh_secret"
  sec_assert_secret_nowhere "$aws_secret"
}

test_read_other_jobs_clone_fails() {
  # Job A holds a secret in its work tree (in a git-ignored file, so it
  # never reaches A's result) and keeps running while job B hunts for it,
  # by A's host path and by searching everything it can see.
  new_repo repo
  cd repo
  printf '*.secret\nstop\n' >.gitignore
  git add .gitignore
  git commit -qm "ignore secrets"
  local secret jobs a_out a_pid a_dir
  secret="$(sec_secret)"
  # Job A's work tree on the host while it runs: as root with the kernel's
  # disk cap it would be on a disk image no host path shows, so A keeps the
  # watch (B, the attacker, gets the default).
  sec_config '[sandbox]' 'env = ["JOB_A_SECRET"]' 'disk_cap = "off"'
  a_out="$PWD/../job-a.json"
  JOB_A_SECRET="$secret" timeout -k 5 60 git mullet run --json -q -m "job A" \
    --command 'printf "%s\n" "$JOB_A_SECRET" >a.secret; echo ready >ready.secret
               n=0; while [ ! -e "$HOME/stop" ] && [ $n -lt 400 ]; do sleep 0.1; n=$((n + 1)); done' >"$a_out" &
  a_pid=$!
  trap 'touch '"'$PWD'"'/.git/mullet/jobs/*/home/stop 2>/dev/null; kill '"$a_pid"' 2>/dev/null' EXIT
  jobs="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)/mullet/jobs"
  local deadline=$((SECONDS + 30))
  a_dir=""
  while [ -z "$a_dir" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "job A never wrote its secret"
    # Its work tree, or its overlay's upper dir (what the host sees of it).
    a_dir="$(dirname "$(ls "$jobs"/*/work/ready.secret "$jobs"/*/upper/ready.secret 2>/dev/null | head -n 1)" 2>/dev/null)"
    [ "$a_dir" = . ] && a_dir=""
    sleep 0.1
  done
  # As root, let uid 65534 through git-mullet's private job dirs: only
  # the mount walls may keep B out.
  sec_open_up_dir "$jobs" "$(dirname "$a_dir")"
  # Positive control: the secret really is in A's work tree on the host.
  assert_eq "$(cat "$a_dir/a.secret")" "$secret" "job A's secret file on the host"
  sec_config '# job B gets nothing extra'
  SEC_PROMPT="job B; job A's work tree is $a_dir" sec_run "
A='$a_dir'
J='$jobs'
try read-by-host-path cat \"\$A/a.secret\"
try list-jobs-dir ls \"\$J\"
try read-by-glob sh -c 'cat \"\$0\"/*/work/a.secret' \"\$J\"
try read-upper-by-glob sh -c 'cat \"\$0\"/*/upper/a.secret' \"\$J\"
try find-by-name sh -c 'f=\$(find / -path /proc -prune -o -path /sys -prune -o -path /usr -prune -o -name a.secret -print 2>/dev/null); [ -n \"\$f\" ] && cat \$f'
try proc-root sh -c 'cat /proc/[0-9]*/root\"\$0\"/a.secret' \"\$A\"
echo HUNT-START; hunt SECRET-; echo HUNT-END
finish"
  # B ran while A was still running.
  kill -0 "$a_pid" 2>/dev/null || fail "job A ended before job B did its search; the test proves nothing"
  touch "$(job_home "$(dirname "$a_dir")")/stop"
  wait "$a_pid" || true
  trap - EXIT
  sec_assert_all_denied
  sec_assert_worker_ran
  sec_assert_secret_nowhere "$secret"
  local a_job
  a_job="$(json_field "$(cat "$a_out")" id)"
  [ -n "$a_job" ] || fail "no id for job A"
  # A only wrote ignored files: it made no changes, and its record does not
  # hold its secret either.
  assert_eq "$(json_field "$(cat "$a_out")" state)" no_changes "job A's state"
  assert_not_contains "$(git mullet log "$a_job")" "$secret" "job A's output"
}

test_read_host_tmp_claude_dir_fails() {
  new_repo repo
  cd repo
  local secret dir created=""
  secret="$(sec_secret)"
  dir="/tmp/claude-$(id -u)"
  if [ ! -e "$dir" ]; then
    mkdir -m 755 "$dir" || fail "cannot create $dir"
    created=yes
  fi
  local file
  file="$dir/mullet-sec-$(sec_random).secret"
  printf '%s\n' "$secret" >"$file"
  chmod 644 "$file"
  trap 'rm -f '"'$file'"'; [ -n "'"$created"'" ] && rmdir '"'$dir'"' 2>/dev/null' EXIT
  sec_run "
try read-exact cat '$file'
try list-dir ls -A '$dir'
try read-glob sh -c 'cat /tmp/claude-*/*'
try read-sandbox-uid-dir sh -c 'cat /tmp/claude-\$(id -u)/*'
try find-claude-dirs sh -c 'f=\$(find / -path /proc -prune -o -path /sys -prune -o -path /usr -prune -o -name \"claude-*\" -print 2>/dev/null); [ -n \"\$f\" ] && ls -A \$f'
echo HUNT-START; hunt SECRET-; echo HUNT-END
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  sec_assert_secret_nowhere "$secret"
}

test_read_git_mullet_environment_fails() {
  new_repo repo
  cd repo
  local token api_key
  token="$(sec_secret)"
  api_key="$(sec_secret)"
  SECRET_TOKEN="$token" ANTHROPIC_API_KEY="$api_key" sec_run "
try env-secret-token sh -c 'env | grep -q SECRET_TOKEN && env | grep SECRET_TOKEN'
try env-api-key sh -c 'env | grep -q ANTHROPIC_API_KEY && env | grep ANTHROPIC_API_KEY'
try proc-environ sh -c 'cat /proc/[0-9]*/environ | tr \"\\000\" \"\\n\" | grep -E \"^(SECRET_TOKEN|ANTHROPIC_API_KEY)=\"'
try proc-cmdline sh -c 'cat /proc/[0-9]*/cmdline | tr \"\\000\" \"\\n\" | grep -E \"SECRET-[0-9a-f]{16}\"'
try parent-environ sh -c 'p=\$PPID; while [ \"\$p\" -gt 0 ]; do tr \"\\000\" \"\\n\" </proc/\$p/environ | grep -E \"^(SECRET_TOKEN|ANTHROPIC_API_KEY)=\" && exit 0; p=\$(awk \"/^PPid:/{print \\\$2}\" /proc/\$p/status); done; exit 1'
echo HUNT-START; hunt SECRET-; echo HUNT-END
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  sec_assert_secret_nowhere "$token"
  sec_assert_secret_nowhere "$api_key"
}

test_read_uncommitted_env_file_fails() {
  new_repo repo
  cd repo
  local secret
  secret="$(sec_secret)"
  printf 'DATABASE_PASSWORD=%s\n' "$secret" >.env
  # Untracked in the user's work tree: the clone is made from the base
  # commit, so it is not there.
  [ -n "$(git status --porcelain -- .env)" ] || fail ".env should be untracked"
  sec_run "
try read-in-clone cat .env
try read-in-clone-abs cat /mullet/work/.env
try read-user-work-tree cat '$PWD/.env'
try find-env-files sh -c 'f=\$(find / -path /proc -prune -o -path /sys -prune -o -path /usr -prune -o -name .env -print 2>/dev/null); [ -n \"\$f\" ] && cat \$f'
try git-stash-or-index sh -c 'git show :.env || git stash show -p'
echo HUNT-START; hunt SECRET-; echo HUNT-END
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  sec_assert_secret_nowhere "$secret"
  # And the user's .env is as it was.
  assert_eq "$(cat .env)" "DATABASE_PASSWORD=$secret" "the user's .env"
}

test_proc_environ_and_fd_escapes_fail() {
  # The worker walks every /proc/<pid>/environ, and every magic link
  # (/proc/*/fd/*, cwd, root, map_files) trying to read through it, list it
  # and create escaped-<marker> in it. A host directory reached that way (the
  # clone's git dir, the user's repository, the home) would get the file.
  new_repo repo
  cd repo
  local token m
  token="$(sec_secret)"
  m="escaped-$(sec_random)"
  SECRET_TOKEN="$token" sec_run "
cat >\"\$TMPDIR/walk.py\" <<'PY'
import ctypes, glob, os, sys
m = sys.argv[1]
found = 0
for path in sorted(glob.glob('/proc/[0-9]*/environ')):
    try:
        data = open(path, 'rb').read()
    except OSError:
        continue
    for entry in data.split(b'\0'):
        if entry.startswith((b'SECRET_TOKEN=', b'ANTHROPIC_API_KEY=')):
            print('ENVIRON-LEAK', path, entry.decode(errors='replace'))
links = (glob.glob('/proc/[0-9]*/fd/*') + glob.glob('/proc/[0-9]*/task/*/fd/*') + glob.glob('/proc/[0-9]*/cwd')
         + glob.glob('/proc/[0-9]*/root') + glob.glob('/proc/[0-9]*/map_files/*'))
for link in links:
    try:
        target = os.readlink(link)
    except OSError:
        continue
    found += 1
    print('LINK', link, '->', target)
    if os.path.isdir(link):
        try:
            names = os.listdir(link)
            print('  lists', len(names), 'entries:', ' '.join(sorted(names)[:12]))
        except OSError as e:
            print('  cannot list:', e)
        for sub in ('', 'objects', 'refs/heads', '..', '../..', '../../..'):
            try:
                with open(os.path.join(link, sub, m), 'w') as f:
                    f.write('x')
                print('  created', os.path.join(link, sub, m))
            except OSError:
                pass
    else:
        # Non-blocking: a pipe opened through /proc has writers and no data.
        try:
            fd = os.open(link, os.O_RDONLY | os.O_NONBLOCK)
            try:
                head = os.read(fd, 4096)
            finally:
                os.close(fd)
            if b'SECRET-' in head:
                print('FD-LEAK', link, head[:200])
        except OSError:
            pass
print('LINKS', found)
PY
python3 \"\$TMPDIR/walk.py\" '$m'
cat >\"\$TMPDIR/handle.py\" <<'PY'
import ctypes, os, sys
# open_by_handle_at needs CAP_DAC_READ_SEARCH in the host's namespace.
libc = ctypes.CDLL(None, use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [('bytes', ctypes.c_uint), ('type', ctypes.c_int), ('f', ctypes.c_ubyte * 128)]
h = Handle(); h.bytes = 128; mount_id = ctypes.c_int()
if libc.name_to_handle_at(-100, b'/mullet/work', ctypes.byref(h), ctypes.byref(mount_id), 0) == 0:
    fd = libc.open_by_handle_at(os.open('/mullet/work', os.O_RDONLY), ctypes.byref(h), os.O_RDONLY)
    print('OPEN-BY-HANDLE', 'worked' if fd >= 0 else 'failed', ctypes.get_errno())
    sys.exit(0 if fd >= 0 else 1)
sys.exit(1)
PY
try open-by-handle python3 \"\$TMPDIR/handle.py\"
try proc1-root-escape sh -c 'ls /proc/1/root/../../.. | grep -qx home && ls -A /proc/1/root/../../../home | grep -q .'
try proc-fd-dotdot sh -c 'for l in /proc/[0-9]*/fd/*; do [ -d \"\$l\" ] && touch \"\$l/../../$m\" 2>/dev/null && exit 0; done; exit 1'
echo HUNT-START; hunt SECRET-; echo HUNT-END
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_not_contains "$LOG" "ENVIRON-LEAK" "worker output"
  assert_not_contains "$LOG" "FD-LEAK" "worker output"
  # Positive control: the walk did see the sandbox's own processes' links.
  local links
  links="$(printf '%s\n' "$LOG" | sed -n 's/^LINKS //p' | tail -n 1)"
  [ -n "$links" ] && [ "$links" -ge 3 ] || fail "the worker saw too few /proc links ($links) for the walk to mean anything"
  sec_assert_secret_nowhere "$token"
  # Where the marker may be: the job's own work tree (or its overlay's
  # upper dir) and home (through its own cwd). Anywhere else on the host is an escape.
  local job escaped
  job="$(sec_job_dir)"
  escaped="$( (find "$TEST_ROOT" -name "$m"; find /tmp "${TMPDIR:-/tmp}" -maxdepth 2 -name "$m") 2>/dev/null | grep -v "^$job/work/" | grep -v "^$job/upper/" | grep -v "^$job/home/" || true)"
  [ -z "$escaped" ] || fail "the worker created files outside its clone through /proc: $escaped"
}

test_sandbox_env_value_not_on_host_command_lines() {
  # Extra (not in the spec's list): a variable the user lets in with
  # [sandbox] env is the worker's by design, but not every local user's.
  # While the job runs, no process's command line on the host (readable by
  # anyone through /proc/<pid>/cmdline) may hold its value.
  new_repo repo
  cd repo
  local token
  token="$(sec_secret)"
  sec_config '[sandbox]' 'env = ["PASSED_TOKEN"]'
  PASSED_TOKEN="$token" timeout -k 5 60 git mullet run --json -q -m "passed token" \
    --command '[ -n "$PASSED_TOKEN" ] && echo has-token; echo started >started.txt; sleep 4; echo ran >ran.marker' \
    >"$PWD/../job.json" &
  local pid=$! deadline=$((SECONDS + 20)) leaked=""
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
    for f in /proc/[0-9]*/cmdline; do
      if grep -qaF -- "$token" "$f" 2>/dev/null; then
        leaked="$f: $(tr '\0' ' ' <"$f" 2>/dev/null | cut -c1-100)..."
        break
      fi
    done
    [ -z "$leaked" ] || break
    sleep 0.2
  done
  wait "$pid" || true
  JOB_JSON="$(cat "$PWD/../job.json")"
  JOB="$(json_field "$JOB_JSON" id)"
  LOG="$(git mullet log "$JOB")"
  assert_contains "$LOG" has-token "worker output (the variable was let in)"
  [ -z "$leaked" ] || fail "the value of PASSED_TOKEN is on a host command line, readable by every local user: $leaked"
}

run_tests

#!/usr/bin/env bash
# Driving the user's terminal through what git-mullet prints: the worker's
# output (run, wait, log), and every string a worker, a repository or a
# record chose (titles, prompts, file names, warnings, gate names and output,
# errors) in show, list, merge and diff. The commands run on a pseudo-terminal
# (lib/pty_run.py), so their terminal code paths are the ones taken, and
# nothing that can drive a terminal may reach it: no ESC (but git's own
# colours in diff), BEL, bare CR, C1 control or bidi override. --json and
# log --raw still give the bytes as they were.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

PTY_RUN="$(cd "$(dirname "$0")" && pwd)/lib/pty_run.py"

# What the worker prints on stdout and on stderr: OSC 52 (clipboard), OSC 0
# (title), CSI 2J (clear), OSC 8 (hyperlink), BEL, a C1 CSI raw and in
# UTF-8, a bidi override, a bare CR. It also leaves a file whose content has
# escapes (for diff), a FIFO whose name has them (a snapshot warning) and a
# file whose name has them.
WORKER="$(
  cat <<'EOF'
finish
evil='osc52 \033]52;c;cHduZWQ=\007 title \033]0;PWNED-TITLE\007 clear \033[2J link \033]8;;http://evil.invalid/\033\\click\033]8;;\033\\ bell \007 c1 \233''2J utf8-c1 \302\233 bidi \342\200\256 safe\rEVIL-OVERWRITE\n'
printf "$evil"
printf "$evil" >&2
printf 'content \033]52;c;ZGlmZg==\007 \033[2J \033[8mhidden\033[m\n' >evil.txt
mkfifo "$(printf 'fifo\033]0;FIFO-TITLE\007')"
touch "$(printf 'name\033[2J')"
EOF
)"
# The task (its first line is the title) and a gate (its name is its
# command's first line) with escapes; the gate prints some and fails.
PROMPT="$(printf 'task \033]0;PROMPT-TITLE\007 \033[2J\nsecond line \033]52;c;cHJvbXB0\007')"
GATE="$(printf 'echo gate\033]0;GATE-TITLE\007 >/dev/null; printf "gate \\033]52;c;Z2F0ZQ==\\007 out\\n"; exit 1')"

# on_pty NAME EXPECTED_CODE COMMAND...: runs COMMAND on a pseudo-terminal,
# bounded; what reached the terminal is in $PTY_DIR/NAME.
on_pty() {
  local name="$1" expected="$2" code=0
  shift 2
  PTY_DIR="${PTY_DIR:-$PWD/../pty}"
  mkdir -p "$PTY_DIR"
  python3 "$PTY_RUN" "$PTY_DIR/$name" timeout -k 5 120 "$@" || code=$?
  [ "$code" = "$expected" ] || fail "$name: exit code $code, expected $expected: $(head -c 2000 "$PTY_DIR/$name")"
}

# assert_terminal_safe NAME [colours] [MUST_CONTAIN...]: nothing in what
# reached the terminal can drive it; a command that fails this is added to
# $UNSAFE (so one run names every one), and assert_none_unsafe ends the test. With `colours`, SGR sequences that
# only set bold or a foreground colour are allowed. MUST_CONTAIN: texts that
# must be there (the positive control: the worker's text did reach it).
assert_terminal_safe() {
  local name="$1" colours="$2"
  shift 2
  python3 - "$PTY_DIR/$name" "$colours" "$@" <<'PY' || UNSAFE="${UNSAFE:-}$name "
import re, sys
path, colours, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
data = open(path, "rb").read()
text = data.replace(b"\r\n", b"\n")  # the terminal's own line ends (onlcr)
# git-mullet's own status line is redrawn in place: carriage return, erase
# the line. Nothing a worker writes can make it (its ESC is escaped), and the
# text after it is checked as everything else.
text = text.replace(b"\r\x1b[K", b"")
if colours == "colours":
    text = re.sub(rb"\x1b\[(?:(?:0|1|22|3[1-6]|39)?(?:;(?:0|1|22|3[1-6]|39))*)m", b"", text)
bad = {b"\x1b": "ESC", b"\x07": "BEL", b"\r": "bare CR", b"\x9b": "C1 CSI", b"\xc2\x9b": "C1 CSI (UTF-8)",
       b"\xe2\x80\xae": "bidi override", b"\x00": "NUL"}
problems = [what for raw, what in bad.items() if raw in text]
missing = [w for w in wanted if w.encode() not in data]
if problems or missing:
    print("    %s: raw %s; missing %s; output: %r" % (path, problems, missing, data[:3000]), file=sys.stderr)
    sys.exit(1)
PY
}

assert_none_unsafe() {
  [ -z "${UNSAFE:-}" ] || fail "control sequences reached the terminal in: $UNSAFE"
}

job_id_from_list() {
  git mullet list --json | jq -r '.[0].id'
}

test_worker_strings_cannot_drive_the_terminal() {
  new_repo repo
  cd repo
  sec_config '[limits]' 'timeout = 60'
  # run: the worker's output echoed live, then the outcome (its error, the
  # snapshot warning about the FIFO).
  on_pty run 1 git mullet run -m "$PROMPT" --command "$SEC_PRELUDE
$WORKER" --gate "$GATE"
  assert_terminal_safe run plain 'osc52 \x1b]52;c;cHduZWQ=\x07' 'c1 \x9b2J' 'utf8-c1 \u009b' 'bidi \u202e' \
    'safe\x0dEVIL-OVERWRITE' 'warning:'
  JOB="$(job_id_from_list)"
  [ -n "$JOB" ] && [ "$JOB" != null ] || fail "no job was recorded"

  on_pty log 0 git mullet log "$JOB"
  assert_terminal_safe log plain 'title \x1b]0;PWNED-TITLE\x07' 'ATTACKS-END'
  on_pty show 0 git mullet show "$JOB"
  assert_terminal_safe show plain 'PROMPT-TITLE' 'second line \x1b]52' 'gate \x1b]52;c;Z2F0ZQ==\x07 out' \
    'GATE-TITLE' 'FIFO-TITLE'
  on_pty list 0 git mullet list
  assert_terminal_safe list plain "$JOB" 'task \x1b]0;PROMPT-TITLE'
  on_pty wait 1 git mullet wait "$JOB"
  assert_terminal_safe wait plain 'osc52 \x1b]52' 'FIFO-TITLE'
  # An error that quotes the record (the failed gate's name).
  on_pty merge 2 git mullet merge "$JOB"
  assert_terminal_safe merge plain 'GATE-TITLE'
  # diff: git's colours stay, the worker's sequences in the file do not.
  on_pty diff 0 git mullet diff "$JOB"
  assert_terminal_safe diff colours 'content \x1b]52;c;ZGlmZg==\x07 \x1b[2J \x1b[8mhidden' $'\x1b[32m'

  # Asked for, the bytes are as the worker wrote them.
  git mullet log --raw "$JOB" >raw.out
  grep -aqF $'osc52 \e]52;c;cHduZWQ=\a' raw.out || fail "log --raw lost the worker's bytes"
  [ "$(git mullet show --json "$JOB" | jq -r .title)" = "$(printf 'task \033]0;PROMPT-TITLE\007 \033[2J')" ] ||
    fail "show --json changed the title"
  # Into a pipe, diff is the patch as it is.
  git mullet diff "$JOB" >diff.out
  grep -aqF $'content \e]52;c;ZGlmZg==\a' diff.out || fail "diff into a pipe changed the patch"
  assert_none_unsafe
}

test_followed_job_cannot_drive_the_terminal() {
  new_repo repo
  cd repo
  sec_config '[limits]' 'timeout = 60'
  # A detached job, followed live by `wait` on the terminal.
  JOB="$(timeout -k 5 60 git mullet run --detach -m "$PROMPT" --command "$SEC_PRELUDE
$WORKER")" || fail "run --detach failed: $JOB"
  on_pty wait 0 git mullet wait "$JOB"
  assert_terminal_safe wait plain 'osc52 \x1b]52;c;cHduZWQ=\x07' 'bidi \u202e' 'warning:'
  assert_none_unsafe
}

# A repository's .mullet.toml is as untrusted as the worker (a worker's
# commit can carry one): its setup and gate commands reach run --dry-run and
# config, and a malformed value reaches the error message.
test_repository_config_cannot_drive_the_terminal() {
  new_repo repo
  cd repo
  sec_config '[limits]' 'timeout = 60'
  cat >.mullet.toml <<'EOF'
[run]
setup = "echo setup \u001b]0;SETUP-TITLE\u0007 \u001b[2J"
[[gate]]
command = "echo gate \u001b]52;c;Z2F0ZQ==\u0007"
EOF
  git add .mullet.toml
  git commit -qm "repository config with escapes"
  on_pty dry-run 0 git mullet run --dry-run -m task --command true
  assert_terminal_safe dry-run plain 'SETUP-TITLE' 'phase setup'
  on_pty config 0 git mullet config
  assert_terminal_safe config plain 'SETUP-TITLE' 'gate \u001B'
  cat >.mullet.toml <<'EOF'
[network]
worker = ["\u001b]0;GRANT-TITLE\u0007.example:443"]
EOF
  git commit -qam "repository config with a malformed grant"
  on_pty bad-grant 2 git mullet run -m task --command true
  assert_terminal_safe bad-grant plain 'GRANT-TITLE'
  assert_none_unsafe
}

run_tests

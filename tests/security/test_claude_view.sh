#!/usr/bin/env bash
# What the Claude Code worker sees and runs (issue 13, items 2 and 3), with
# the real binary ($MULLET_TEST_CLAUDE) and the scripted model:
# - Grep and Glob pointed at / or /mullet name nothing of the job's home
#   (/mullet is execute-only: reached by name, never listed), while the same
#   search of the work tree finds what is there;
# - with allow_bash = [] there is no Bash tool, so not one command runs;
# - with allow_bash naming a command, that command runs and none of Claude
#   Code's built-in read-only commands does, in any form tried, nor any
#   program on PATH: a pinned version that auto-allows more fails here;
# - the control: without our deny rules, Claude Code itself runs every
#   command of that list (so the list is what it allows, and the rules are
#   what stops them).
source "$(dirname "$0")/../lib/harness.sh"
source "$HARNESS_DIR/claude_api.sh"

grep_call() {
  jq -cn --arg id "$1" --arg path "$2" --arg pattern "$3" --arg mode "${4:-content}" \
    '{tool: "Grep", id: $id, input: {pattern: $pattern, path: $path, output_mode: $mode}}'
}
glob_call() {
  jq -cn --arg id "$1" --arg path "$2" --arg pattern "$3" '{tool: "Glob", id: $id, input: {pattern: $pattern, path: $path}}'
}

# turn CALL...: one model turn making all these tool calls at once.
turn() { printf '%s\n' "$@" | jq -cs .; }

# bash_turn_of FILE: one turn with a Bash call for each line of FILE (ids c0, c1, ...).
bash_turn_of() {
  jq -cR --slurp 'split("\n") | map(select(length > 0)) | to_entries
    | map({tool: "Bash", id: ("c" + (.key | tostring)), input: {command: .value, description: "probe"}})' "$1"
}

# ran_commands FILE: the lines of FILE whose Bash call was not refused (it
# ran, or tried to: "command not found" counts), from the request log.
ran_commands() {
  tool_results >"$S/results.jsonl"
  python3 - "$1" "$S/results.jsonl" <<'PY'
import json, sys
forms = [l.rstrip("\n") for l in open(sys.argv[1]) if l.strip()]
results = {}
for line in open(sys.argv[2]):
    entry = json.loads(line)
    results[entry["id"]] = entry
for i, form in enumerate(forms):
    entry = results.get("toolu_c%d" % i)
    if entry is None:
        print("NO RESULT: " + form)
    elif not entry["is_error"] or "Permission to use Bash" not in entry["text"] and "No such tool available" not in entry["text"]:
        print(form)
PY
}

# One form, at least, in which Claude Code 2.1.197 runs each command of
# auto_allowed_commands() (src/executors/claude_args.cpp) with no Bash rule.
read_only_forms() {
  cat <<'EOF'
[ -f m.txt ]
[[ -f m.txt ]]
arch
base64 m.txt
basename a/b
cal
cat m.txt
cd .
claude -h
cmp m.txt m.txt
column m.txt
comm m.txt m.txt
cut -c1 m.txt
date
df
diff m.txt m.txt
dirname a/b
docker ps
du m.txt
echo hi
egrep TOKEN m.txt
expand m.txt
expr 1 + 1
false
fd m
fdfind m
fgrep TOKEN m.txt
file m.txt
find .
fmt m.txt
fold m.txt
free
git status
grep TOKEN m.txt
groups
head m.txt
help cd
hexdump m.txt
history
hostname
id
if
ifconfig lo
ip addr
jq . m.txt
locale
ls
lsof m.txt
man m.txt
md5sum m.txt
netstat -a
nl m.txt
node -v
nproc
numfmt 1
od m.txt
paste m.txt
pgrep sh
pr m.txt
printf hi
ps aux
pwd
pyright --version
python --version
python3 --version
readlink -f m.txt
realpath m.txt
rev m.txt
rg TOKEN m.txt
sed -n 1p m.txt
seq 3
sha1sum m.txt
sha256sum m.txt
sleep 0
sort m.txt
ss -a
stat m.txt
strings m.txt
tac m.txt
tail m.txt
test -f m.txt
tput cols
tr a b
tree
true
tsort m.txt
type ls
uname -a
unexpand m.txt
uniq
until
uptime
wc m.txt
which ls
while
whoami
xargs
EOF
}

# The same commands in the forms people use to slip past a rule.
tricky_forms() {
  cat <<'EOF'
cat m.txt | wc -l
echo x | cat
cat m.txt; echo x
cd /mullet/work && cat m.txt
LANG=C cat m.txt
command cat m.txt
builtin echo hi
'cat' m.txt
c\at m.txt
  cat m.txt
cat m.txt 2>&1
cat -- m.txt
grep -r TOKEN .
find . -name m.txt
ps aux | grep sh
git log
git diff
id -u
EOF
}

# Every program on the sandbox's PATH (the host's /usr) and every shell
# builtin and keyword, given a file.
everything_on_path() {
  {
    compgen -b
    compgen -k
    local dir
    for dir in /usr/local/bin /usr/bin /usr/local/sbin /usr/sbin; do
      [ -d "$dir" ] && find "$dir" -maxdepth 1 \( -type f -o -type l \) -perm -u+x -printf '%f\n'
    done
  } | grep -E '^[A-Za-z0-9_.+[-]+$' | LC_ALL=C sort -u | sed 's/$/ m.txt/'
}

# A repository whose m.txt holds TOKEN.
token_repo() {
  new_repo repo
  cd repo
  printf '%s-in-work\n' "$TOKEN" >m.txt
  git add m.txt
  git commit -qm "m.txt"
}

test_grep_and_glob_from_a_parent_name_nothing_of_the_home() {
  scratch
  TOKEN="tok$RANDOM$RANDOM"
  token_repo
  printf '%s-in-work\n' "$TOKEN" >"work-$TOKEN.txt"
  git add -A
  git commit -qm "a file named after the token"
  # Setup shares the worker's home: it plants a file there, next to what
  # Claude Code writes itself (.claude/.claude.json, with firstStartTime).
  start_api "$(script \
    "$(turn \
      "$(grep_call root / "$TOKEN")" \
      "$(grep_call mullet /mullet "$TOKEN")" \
      "$(grep_call root_files / "$TOKEN" files_with_matches)" \
      "$(grep_call claude_root / firstStartTime files_with_matches)" \
      "$(grep_call claude_mullet /mullet firstStartTime)" \
      "$(grep_call proc_root /proc/self/root/mullet "$TOKEN")" \
      "$(grep_call dotdot /mullet/work/.. "$TOKEN")" \
      "$(glob_call glob_root / "**/*$TOKEN*")" \
      "$(glob_call glob_mullet /mullet '**/*')" \
      "$(glob_call glob_claude_root / '**/.claude.json')" \
      "$(glob_call glob_claude_mullet /mullet '**/.claude*/**')" \
      "$(glob_call glob_children /mullet '*/*')" \
      "$(glob_call glob_absolute /mullet/work '/mullet/*/*')" \
      "$(grep_call home /mullet/home "$TOKEN")" \
      "$(grep_call work /mullet/work "$TOKEN")" \
      "$(glob_call glob_work /mullet/work "**/*$TOKEN*")")" \
    "$(done_turn "searched")")"
  claude_config ""
  run_job --setup "printf '%s-in-home\n' $TOKEN >\"\$HOME/home-$TOKEN.txt\"" -m "search everywhere"
  expect_job 0
  # The controls: the home held both files while the worker searched, and
  # the searches of the work tree found the token there.
  local home
  home="$(job_dir "$JOB")/home"
  assert_eq "$(cat "$home/home-$TOKEN.txt")" "$TOKEN-in-home" "the planted file"
  assert_contains "$(cat "$home/.claude/.claude.json")" firstStartTime "Claude Code's own file"
  assert_contains "$(tool_result work)" "m.txt" "Grep of the work tree"
  assert_contains "$(tool_result glob_work)" "work-$TOKEN.txt" "Glob of the work tree"
  # The direct path is refused by our deny rule.
  assert_eq "$(tool_is_error home)" true "Grep of /mullet/home is_error"
  assert_contains "$(tool_result home)" "denied" "Grep of /mullet/home"
  # From a parent: nothing of the home, and no error that names it either.
  local id text
  for id in root mullet root_files claude_root claude_mullet proc_root dotdot glob_root glob_mullet glob_claude_root \
    glob_claude_mullet glob_children glob_absolute; do
    text="$(tool_result "$id")"
    assert_not_contains "$text" "$TOKEN-in-home" "the result of $id"
    assert_not_contains "$text" "home-$TOKEN" "the result of $id"
    assert_not_contains "$text" "/mullet/home" "the result of $id"
    assert_not_contains "$text" ".claude" "the result of $id"
    assert_not_contains "$text" "firstStartTime" "the result of $id"
  done
  # Nothing of it reached the model by any way.
  if grep -q "$TOKEN-in-home" "$API_LOG"; then fail "the home's marker reached the model"; fi
  if grep -q "home-$TOKEN" "$API_LOG"; then fail "the home's file name reached the model"; fi
}

test_with_no_allow_bash_there_is_no_bash_and_nothing_runs() {
  scratch
  TOKEN="tok$RANDOM$RANDOM"
  token_repo
  { read_only_forms; tricky_forms; echo "touch ran-$TOKEN"; } | sed "s/TOKEN/$TOKEN/g" >"$S/forms.txt"
  start_api "$(script "$(bash_turn_of "$S/forms.txt")" "$(done_turn "tried")")"
  claude_config ""
  run_job -m "run things"
  expect_job 0
  # Claude Code was given no Bash tool, and refused every call for that.
  assert_eq "$(json_get "$(init_event)" '.tools | sort')" '["Edit","Glob","Grep","Read","StructuredOutput","Write"]' \
    "init tools"
  assert_eq "$(ran_commands "$S/forms.txt")" "" "commands that ran"
  assert_eq "$(tool_results | jq -r 'select(.id | startswith("toolu_c")) | .text' | sort -u | wc -l)" 1 \
    "distinct Bash results"
  assert_contains "$(tool_result c0)" "No such tool available: Bash" "every Bash result"
  assert_eq "$(tool_results | jq -r 'select(.id | startswith("toolu_c")) | .id' | wc -l)" "$(wc -l <"$S/forms.txt")" \
    "results"
  assert_absent "$(job_work "$(job_dir "$JOB")")/ran-$TOKEN"
  result_lacks "ran-$TOKEN"
}

test_allow_bash_runs_what_it_names_and_no_read_only_command() {
  scratch
  TOKEN="tok$RANDOM$RANDOM"
  token_repo
  { read_only_forms; tricky_forms; echo "touch ran-$TOKEN"; } | sed "s/TOKEN/$TOKEN/g" >"$S/forms.txt"
  start_api "$(script "$(bash_turn_of "$S/forms.txt")" "$(done_turn "tried")")"
  claude_config '"touch:*"'
  run_job -m "run things"
  expect_job 0
  assert_eq "$(json_get "$(init_event)" '.tools | sort')" \
    '["Bash","Edit","Glob","Grep","Read","StructuredOutput","Write"]' "init tools"
  # Exactly the allowed command ran.
  assert_eq "$(ran_commands "$S/forms.txt")" "touch ran-$TOKEN" "commands that ran"
  assert_exists "$(job_work "$(job_dir "$JOB")")/ran-$TOKEN"
  result_has "ran-$TOKEN"
  # Not one read-only command printed the token.
  assert_not_contains "$(tool_results | jq -r .text)" "$TOKEN-in-work" "the tool results"
  # Every other program and builtin, a few hundred a job (Claude Code cuts
  # a final result line past 128 KiB, and each refusal is listed there).
  everything_on_path | grep -v '^touch ' >"$S/path.txt"
  [ "$(wc -l <"$S/path.txt")" -gt 500 ] || fail "only $(wc -l <"$S/path.txt") programs on PATH"
  split -l 500 "$S/path.txt" "$S/path-part."
  local part
  for part in "$S"/path-part.*; do
    start_api "$(script "$(bash_turn_of "$part")" "$(done_turn "tried")")"
    claude_config '"touch:*"'
    # Claude Code counts each of a message's tool uses as a turn.
    printf 'turns = 5000\n' >>"$S/config.toml"
    run_job -m "run everything"
    expect_job 0
    assert_eq "$(ran_commands "$part")" "" "commands of $(head -n 1 "$part") .. $(tail -n 1 "$part") that ran"
  done
}

# The control, and the pin of the list: Claude Code itself, outside
# git-mullet, with our settings but no Bash deny rules, runs every form of
# read_only_forms (and so each command the list names). A pinned version
# that stops auto-allowing one fails here; one that allows more fails the
# test above.
test_without_our_deny_rules_claude_code_runs_every_listed_command() {
  scratch
  TOKEN="tok$RANDOM$RANDOM"
  mkdir -p control/work control/home control/tmp
  printf '%s-in-work\n' "$TOKEN" >control/work/m.txt
  read_only_forms | sed "s/TOKEN/$TOKEN/g" >"$S/forms.txt"
  printf 'touch ran-%s\n' "$TOKEN" >>"$S/forms.txt"
  start_api "$(script "$(bash_turn_of "$S/forms.txt")" "$(done_turn "tried")")"
  jq -n --arg home "$S/control/home" '{permissions: {defaultMode: "dontAsk", disableBypassPermissionsMode: "disable",
      allow: ["Read", "Edit", "Write", "Glob", "Grep"], deny: ["Read(/" + $home + "/**)"], ask: []},
    sandbox: {enabled: true, failIfUnavailable: true, allowUnsandboxedCommands: false, autoAllowBashIfSandboxed: false,
      excludedCommands: [], network: {allowedDomains: [], allowLocalBinding: false, allowAllUnixSockets: false},
      filesystem: {denyRead: [$home], denyWrite: []}}, disableAllHooks: true, autoMemoryEnabled: false}' \
    >"$S/settings.json"
  (cd control/work && printf 'run things\n' | env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
    HOME="$S/control/home" CLAUDE_CONFIG_DIR="$S/control/home/.claude" TMPDIR="$S/control/tmp" \
    ANTHROPIC_BASE_URL="http://127.0.0.1:$API_PORT" ANTHROPIC_API_KEY="$ANTHROPIC_API_KEY" \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
    timeout 120 "$MULLET_TEST_CLAUDE" -p --output-format stream-json --verbose --permission-mode dontAsk \
    --tools Read,Edit,Write,Glob,Grep,Bash --settings "$S/settings.json" --setting-sources '' --strict-mcp-config \
    --no-session-persistence >"$S/control.jsonl" 2>"$S/control.err") ||
    fail "the control session failed: $(cat "$S/control.err")"
  assert_eq "$(jq -r 'select(.type == "system" and .subtype == "init") | .permissionMode' "$S/control.jsonl")" dontAsk \
    "the control's permission mode"
  # Every read-only form ran; touch, which nothing allows, did not.
  assert_eq "$(ran_commands "$S/forms.txt")" "$(read_only_forms | sed "s/TOKEN/$TOKEN/g")" "commands that ran"
  assert_absent control/work/ran-"$TOKEN"
}

run_tests

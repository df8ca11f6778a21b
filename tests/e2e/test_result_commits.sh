#!/usr/bin/env bash
# Result commits say who wrote them: the user's git identity (else
# git-mullet's), and trailers naming the job, the attempt, the executor, the
# model and the executor's version, which the worker's binary cannot forge.
source "$(dirname "$0")/../lib/harness.sh"

source "$HARNESS_DIR/opencode_api.sh"

# trailer COMMIT KEY: the values of KEY among COMMIT's trailers, one a line.
trailer() {
  git log -1 --format="%(trailers:key=$2,valueonly)" "$1" | sed '/^$/d'
}

# A repository whose identity is in no variable: only what a test configures.
repo_without_identity() {
  new_repo repo
  cd repo
  unset GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL EMAIL
}

test_result_commits_carry_the_users_identity_from_git_config() {
  repo_without_identity
  git config user.name "Ada Lovelace"
  git config user.email ada@example.org
  run_job --command 'echo made >made.txt' -m "make"
  [ "$RUN_CODE" = 0 ] || fail "run: $JOB_JSON"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git log -1 --format='%an <%ae>|%cn <%ce>' "$result")" \
    "Ada Lovelace <ada@example.org>|Ada Lovelace <ada@example.org>" "author and committer"
  assert_eq "$(trailer "$result" Mullet-Job)" "$JOB" "Mullet-Job"
  assert_eq "$(trailer "$result" Mullet-Attempt)" 1 "Mullet-Attempt"
  assert_eq "$(trailer "$result" Mullet-Executor)" command "Mullet-Executor"
  assert_eq "$(trailer "$result" Mullet-Model)" "" "Mullet-Model (not known)"
  assert_eq "$(trailer "$result" Mullet-Executor-Version)" "" "Mullet-Executor-Version (not known)"
  # The record commits are git-mullet's bookkeeping, signed as such.
  assert_eq "$(git log -1 --format='%an <%ae>|%cn <%ce>' "refs/mullet/jobs/$JOB")" \
    "git-mullet <git-mullet@localhost>|git-mullet <git-mullet@localhost>" "the record commit"
  # `git -c` reaches git mullet as git passes it on, and wins.
  git -c user.name="Dash Config" -c user.email=dash@example.org mullet run --json -q \
    --command 'echo again >>made.txt' -m "again" >../out.json
  assert_eq "$(git log -1 --format='%an <%ae>' "$(json_field "$(cat ../out.json)" result)")" \
    "Dash Config <dash@example.org>" "git -c user.*"
}

test_result_commits_carry_the_identity_variables() {
  repo_without_identity
  git config user.name "Config Name"
  git config user.email config@example.org
  export GIT_AUTHOR_NAME="Env Author" GIT_AUTHOR_EMAIL=author@example.org
  export GIT_COMMITTER_NAME="Env Committer" GIT_COMMITTER_EMAIL=committer@example.org
  run_job --command 'echo made >made.txt' -m "make"
  [ "$RUN_CODE" = 0 ] || fail "run: $JOB_JSON"
  assert_eq "$(git log -1 --format='%an <%ae>|%cn <%ce>' "$(json_field "$JOB_JSON" result)")" \
    "Env Author <author@example.org>|Env Committer <committer@example.org>" "author and committer"
}

test_without_an_identity_result_commits_are_git_mullets() {
  repo_without_identity
  # No user.name anywhere: git would guess one from the host; we do not.
  git config --get user.name && fail "the test has a user.name"
  git config --get user.email && fail "the test has a user.email"
  run_job --command 'echo made >made.txt' -m "make"
  [ "$RUN_CODE" = 0 ] || fail "run: $JOB_JSON"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git log -1 --format='%an <%ae>|%cn <%ce>' "$result")" \
    "git-mullet <git-mullet@localhost>|git-mullet <git-mullet@localhost>" "author and committer"
  assert_eq "$(trailer "$result" Mullet-Job)" "$JOB" "Mullet-Job"
}

test_a_worker_binarys_version_cannot_forge_a_trailer() {
  scratch
  start_openai_api "$(oc_script "$(oc_done_turn "never")")"
  new_repo repo
  cd repo
  # An opencode whose --version ends its line with a carriage return, a tab
  # and a trailer of its own, then a line more; its session writes a file.
  OPENCODE_BINARY="$S/opencode-forger"
  cat >"$OPENCODE_BINARY" <<EOF2
#!/bin/sh
case "\$1 \$2" in
  "--version "*) printf '%s\rMullet-Job:\tforged\nMullet-Job: forged-too\n' "$PINNED_OPENCODE_VERSION" ;;
  "run --help") printf '  --format  format\n  --model  model\n' ;;
  "debug config") exec python3 -c '
import json, os
c = json.loads(os.environ["OPENCODE_CONFIG_CONTENT"])
for p in c.get("provider", {}).values():
    p.get("options", {})["apiKey"] = "***"
for k in ("agent", "mode", "command"):
    c.setdefault(k, {})
c["username"] = "worker"
print(json.dumps(c, indent=2))' ;;
  "run "*) cat >/dev/null
    echo made >/mullet/work/made.txt
    echo '{"type":"step_start","part":{}}'
    echo '{"type":"text","part":{"text":"MULLET-RESULT {\"status\":\"done\",\"summary\":\"fake\"}"}}'
    echo '{"type":"step_finish","part":{"reason":"stop","tokens":{"input":1,"output":1},"cost":0}}' ;;
esac
EOF2
  chmod 755 "$OPENCODE_BINARY"
  opencode_config "" "" "local/forge-model"
  run_job -m "make"
  [ "$RUN_CODE" = 0 ] || fail "run: $JOB_JSON"
  local result
  result="$(json_field "$JOB_JSON" result)"
  [ "$result" != null ] || fail "no result: $JOB_JSON"
  assert_eq "$(trailer "$result" Mullet-Job)" "$JOB" "Mullet-Job, once"
  assert_eq "$(trailer "$result" Mullet-Executor)" opencode "Mullet-Executor"
  assert_eq "$(trailer "$result" Mullet-Model)" "local/forge-model" "Mullet-Model"
  assert_eq "$(trailer "$result" Mullet-Executor-Version)" "$PINNED_OPENCODE_VERSION Mullet-Job: forged" \
    "Mullet-Executor-Version, on one line"
  git cat-file commit "$result" | LC_ALL=C grep $'[\r\t]' >/dev/null && fail "the commit message holds a control character"
  # git itself reads the trailer block the same way.
  assert_eq "$(git cat-file commit "$result" | git interpret-trailers --parse | grep -c '^Mullet-Job:')" 1 \
    "Mullet-Job trailers per git interpret-trailers"
  true
}

run_tests

#!/usr/bin/env bash
# `git mullet config` prints valid TOML: every key, with where its value came
# from as a comment, the [[gate]] and [[credential]] tables (a credential's
# variable name, never its value); it says which files do not exist; a
# rejected repository file is left out of what it prints, and its error
# follows, with its exit code.
source "$(dirname "$0")/../lib/harness.sh"

# toml_get JSON-PATH: the value at a jq path of the TOML in $OUT, parsed back
# by Python's tomllib (which fails on anything that is not TOML).
toml_get() {
  printf '%s' "$OUT" | python3 -c 'import json, sys, tomllib; print(json.dumps(tomllib.loads(sys.stdin.read())))' |
    jq -c "$1" || fail "config output is not TOML: $OUT"
}

commit_file() {
  printf '%s' "$2" >"$1"
  git add "$1"
  git commit -qm "add $1"
}

test_defaults_are_valid_toml_with_every_key() {
  new_repo repo
  cd repo
  expect_exit 0 git mullet config
  assert_contains "$OUT" "# user file: $XDG_CONFIG_HOME/git-mullet/config.toml (does not exist)"
  assert_contains "$OUT" "# repository file: .mullet.toml at $(git rev-parse HEAD) (does not exist)"
  assert_eq "$(toml_get '.limits.timeout')" 3600
  assert_eq "$(toml_get '.limits.cost_usd')" 20
  assert_contains "$OUT" "cost_usd = 20.0  # built-in"
  assert_eq "$(toml_get '.run.executor')" '"claude"'
  assert_eq "$(toml_get '.run.attempts')" 1
  assert_eq "$(toml_get '.sandbox.env')" '[]'
  # Every key of every table carries its origin.
  local keys comments
  keys="$(printf '%s\n' "$OUT" | grep -c ' = ')"
  comments="$(printf '%s\n' "$OUT" | grep -c ' = .*  # built-in$')"
  assert_eq "$comments" "$keys" "keys with an origin"
  # Each table once (TOML allows no other).
  assert_eq "$(printf '%s\n' "$OUT" | grep -c '^\[run\]$')" 1
  # Outside a repository: the user's configuration alone.
  mkdir ../outside
  cd ../outside
  GIT_CEILING_DIRECTORIES="$TEST_ROOT" expect_exit 0 git mullet config
  assert_contains "$OUT" "# repository file: none"
  assert_eq "$(toml_get '.limits.memory_mb')" 8192
}

test_files_gates_and_credentials_with_their_origins() {
  new_repo repo
  cd repo
  local config="$XDG_CONFIG_HOME/git-mullet/config.toml"
  mkdir -p "$(dirname "$config")"
  cat >"$config" <<'TOML'
[limits]
timeout = 600
cost_usd = 2.5

[sandbox]
env = ["MULLET_T_FOO", "MULLET_T_BAR"]

[[gate]]
name = "tests"
command = "make check"
timeout = 60

[[credential]]
name = "work"
base_url = "https://api.example.com"
env = "MULLET_T_SECRET_KEY"
format = "Bearer {}"
header = "authorization"
TOML
  commit_file .mullet.toml $'[limits]\ntimeout = 30\n\n[[gate]]\ncommand = "echo it\'s \\"quoted\\""\n'
  local short
  short="$(git rev-parse --short=12 HEAD)"
  export MULLET_T_SECRET_KEY=sk-do-not-print-me
  expect_exit 0 git mullet config
  assert_not_contains "$OUT" "(does not exist)"
  assert_not_contains "$OUT" "sk-do-not-print-me"
  assert_eq "$(toml_get '.limits.timeout')" 30
  assert_contains "$OUT" "timeout = 30  # .mullet.toml@$short:2"
  assert_eq "$(toml_get '.limits.cost_usd')" 2.5
  assert_contains "$OUT" "cost_usd = 2.5  # $config:3"
  assert_contains "$OUT" "memory_mb = 8192  # built-in"
  assert_eq "$(toml_get '.sandbox.env')" '["MULLET_T_FOO","MULLET_T_BAR"]'
  assert_eq "$(toml_get '.gate | length')" 2
  assert_eq "$(toml_get '.gate[0]')" '{"name":"tests","command":"make check","timeout":60}'
  assert_eq "$(toml_get '.gate[1].command')" "\"echo it's \\\"quoted\\\"\""
  assert_contains "$OUT" "[[gate]]  # $config:8"
  assert_contains "$OUT" "[[gate]]  # .mullet.toml@$short:4"
  assert_eq "$(toml_get '.credential[0].name')" '"work"'
  assert_eq "$(toml_get '.credential[0].env')" '"MULLET_T_SECRET_KEY"'
  assert_eq "$(toml_get '.credential[0].format')" '"Bearer {}"'
  assert_contains "$OUT" "[[credential]]  # $config:13"
  # GIT_MULLET_CONFIG=/dev/null: no user file.
  GIT_MULLET_CONFIG=/dev/null expect_exit 0 git mullet config
  assert_contains "$OUT" "# user file: /dev/null (none)"
  assert_eq "$(toml_get '.limits.cost_usd')" 20
  assert_contains "$OUT" "cost_usd = 20.0  # built-in"
}

test_a_rejected_repository_file_is_left_out_and_its_error_follows() {
  new_repo repo
  cd repo
  user_config $'[limits]\ntimeout = 600\n'
  # Widening a wall: refused (3), the effective configuration without it.
  commit_file .mullet.toml $'[limits]\ntimeout = 30\nmemory_mb = 999999\n'
  expect_exit 3 git mullet config
  assert_contains "$OUT" "(rejected, left out: see the error)"
  assert_eq "$(toml_get '.limits.timeout')" 600
  assert_eq "$(toml_get '.limits.memory_mb')" 8192
  assert_not_contains "$OUT" ".mullet.toml@"
  assert_contains "$ERR" "git mullet: "
  assert_contains "$ERR" "limits.memory_mb"
  # Malformed: bad input (2), likewise.
  commit_file .mullet.toml $'[limits]\ntimeout = "soon"\n'
  expect_exit 2 git mullet config
  assert_eq "$(toml_get '.limits.timeout')" 600
  assert_contains "$ERR" "limits.timeout"
  # The control: the same file, fixed, is applied.
  commit_file .mullet.toml $'[limits]\ntimeout = 30\n'
  expect_exit 0 git mullet config
  assert_eq "$(toml_get '.limits.timeout')" 30
  # A broken user file prints nothing: nothing of it could be trusted.
  user_config $'[limits\n'
  expect_exit 2 git mullet config
  assert_eq "$OUT" ""
}

run_tests

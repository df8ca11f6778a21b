#!/usr/bin/env bash
# Fail closed: whenever the walls cannot be built, or a bubblewrap silently
# drops one of them, the job is refused (exit 3) and the worker never runs.
source "$(dirname "$0")/../lib/harness.sh"

CANARY_CMD='touch "$MULLET_PROMPT"'

# fake_bwrap NAME BODY: a stand-in `bwrap` first on PATH.
fake_bwrap() {
  mkdir -p "$PWD/fake-bin"
  printf '#!/bin/bash\n%s\n' "$1" >"$PWD/fake-bin/bwrap"
  chmod +x "$PWD/fake-bin/bwrap"
  export PATH="$PWD/fake-bin:$PATH"
}

refs_count() { git for-each-ref refs/mullet/jobs | wc -l; }

test_a_working_sandbox_runs_the_worker() {
  # The positive control for every refusal below.
  new_repo repo
  cd repo
  expect_exit 0 git mullet run -q -m "$PWD/../canary" --command "$CANARY_CMD; echo ran > marker"
  [ ! -e ../canary ] || fail "the worker wrote outside its clone"
  assert_contains "$(git mullet list)" succeeded
}

test_missing_bwrap_is_refused_before_any_job_exists() {
  new_repo repo
  mkdir nobwrap
  for tool in /usr/bin/* /usr/local/bin/*; do
    [ "$(basename "$tool")" = bwrap ] || ln -sf "$tool" nobwrap/
  done
  ln -sf "$MULLET_BIN" nobwrap/git-mullet
  cd repo
  expect_exit 3 env PATH="$PWD/../nobwrap" git mullet run -m "$PWD/../canary" --command "$CANARY_CMD"
  assert_contains "$ERR" "bubblewrap"
  assert_contains "$ERR" "apt-get install bubblewrap"
  assert_absent ../canary
  assert_eq "$(refs_count)" 0 "jobs created"
}

test_no_user_namespaces_is_refused_with_a_diagnosis() {
  new_repo repo
  fake_bwrap 'echo "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2; exit 1'
  cd repo
  expect_exit 3 git mullet run -m "$PWD/../canary" --command "$CANARY_CMD"
  assert_contains "$ERR" "could not be set up"
  assert_contains "$ERR" "user namespaces"
  assert_absent ../canary
  run_job -m "$PWD/../canary" --command "$CANARY_CMD"
  assert_eq "$(json_field "$JOB_JSON" state)" refused
  assert_eq "$(json_field "$JOB_JSON" result)" null
}

test_a_bwrap_that_ignores_every_option_is_caught_by_the_wall_check() {
  new_repo repo
  # Runs whatever follows `--` directly on the host, with our helper's real path.
  fake_bwrap 'while [ "$1" != "--" ]; do shift; done; shift; first="$1"; shift
[ "$first" = /mullet/bin/git-mullet ] && first="'"$MULLET_BIN"'"
exec "$first" "$@"'
  cd repo
  expect_exit 3 git mullet run -m "$PWD/../canary" --command "$CANARY_CMD"
  assert_contains "$ERR" "wall check"
  assert_absent ../canary
}

# drop_option_bwrap OPTION [ARGS]: a bwrap that silently leaves out one option
# and the ARGS arguments that follow it.
drop_option_bwrap() {
  fake_bwrap 'args=(); skip=0; for a in "$@"; do
  if [ "$skip" -gt 0 ]; then skip=$((skip - 1)); continue; fi
  if [ "$a" = "'"$1"'" ]; then skip='"${2:-0}"'; continue; fi
  args+=("$a"); done; exec /usr/bin/bwrap "${args[@]}"'
}

test_a_bwrap_without_a_network_namespace_is_caught() {
  [ -n "$(ls /sys/class/net | grep -v '^lo$')" ] || fail "this host has no interface but lo; the test cannot tell"
  new_repo repo
  drop_option_bwrap --unshare-net
  cd repo
  expect_exit 3 git mullet run -m "$PWD/../canary" --command "$CANARY_CMD"
  assert_contains "$ERR" "network interface"
  assert_absent ../canary
}

test_a_bwrap_that_leaves_the_root_writable_is_caught() {
  new_repo repo
  drop_option_bwrap --remount-ro 1
  cd repo
  expect_exit 3 git mullet run -m "$PWD/../canary" --command "$CANARY_CMD"
  assert_contains "$ERR" "writable"
  assert_absent ../canary
}

test_a_bwrap_that_adds_to_the_environment_is_caught() {
  new_repo repo
  fake_bwrap 'export LEAKY_SECRET=1; exec /usr/bin/bwrap "$@"'
  cd repo
  expect_exit 3 git mullet run -m "$PWD/../canary" --command "$CANARY_CMD"
  assert_contains "$ERR" "environment variable"
  assert_absent ../canary
}

test_a_bind_source_behind_a_symlink_is_refused() {
  new_repo repo
  mkdir -p elsewhere
  ln -s "$PWD/elsewhere" repo/.git/mullet
  cd repo
  expect_exit 3 git mullet run -m "$PWD/../canary" --command "$CANARY_CMD"
  assert_contains "$ERR" "symlink"
  assert_absent ../canary
}

test_doctor_reports_a_broken_sandbox() {
  expect_exit 0 git mullet doctor
  assert_contains "$OUT" "sandbox starts"
  fake_bwrap 'echo "bwrap: setting up uid map: Permission denied" >&2; exit 1'
  expect_exit 3 git mullet doctor
  assert_contains "$OUT" "FAIL  sandbox starts"
  assert_contains "$OUT" "fix:"
  expect_exit 3 git mullet doctor --json
  assert_eq "$(json_field "$OUT" ok)" False
  # The test sandbox is a job's, wall check included: a bwrap that starts
  # but leaves out a wall jobs rely on fails too.
  drop_option_bwrap --remount-ro 1
  expect_exit 3 git mullet doctor
  assert_contains "$OUT" "FAIL  sandbox starts"
  assert_contains "$OUT" "wall check: the root file system is writable"
  assert_contains "$OUT" "fix: the bubblewrap found on PATH"
}

# A Claude Code that never answers --version must not hang `run` before any
# job exists, nor `doctor`: each probe has a deadline (15 s), after which the
# binary's whole process group is killed and the error names it.
test_a_hung_claude_fails_run_and_doctor_at_the_probe_deadline() {
  new_repo repo
  # A credential, so the binary is what the run stops at.
  export ANTHROPIC_API_KEY=sk-test-not-a-real-key
  local nap
  nap="$(marker)"
  mkdir -p "$PWD/fake-bin"
  # Not exec: the sleep is the script's child and keeps the output pipes open.
  printf '#!/bin/sh
sleep %s
echo "2.0.0 (Claude Code)"
' "$nap" >"$PWD/fake-bin/claude"
  chmod +x "$PWD/fake-bin/claude"
  local fake
  fake="$(cd "$PWD/fake-bin" && pwd -P)/claude"
  export PATH="$PWD/fake-bin:$PATH"
  cd repo
  expect_exit 2 timeout -k 5 60 git mullet run -m "$PWD/../canary" --executor claude
  assert_clear_error
  assert_contains "$ERR" "$fake"
  assert_contains "$ERR" "timed out after 15 s"
  assert_absent ../canary
  assert_eq "$(refs_count)" 0 "jobs created"
  no_process_left "sleep $nap"

  # As for a missing binary: a warning (claude jobs fail with exit 2).
  expect_exit 0 timeout -k 5 60 git mullet doctor
  assert_contains "$OUT" "warn  Claude Code (the claude executor): the Claude Code binary $fake does not answer"
  assert_contains "$OUT" "timed out after 15 s"
  no_process_left "sleep $nap"
}

test_doctor_shows_each_phases_grants() {
  mkdir -p "$XDG_CONFIG_HOME/git-mullet"
  # The default worker, Claude Code, has no grant: it reaches its model API
  # only through the credential endpoint.
  printf '[network]\nsetup = ["registry.example:443"]\n' >"$XDG_CONFIG_HOME/git-mullet/config.toml"
  expect_exit 0 git mullet doctor
  assert_contains "$OUT" "setup: through the egress proxy to registry.example:443"
  assert_contains "$OUT" "worker: no network"
  assert_not_contains "$OUT" "egress proxy to api.anthropic.com"
  assert_contains "$OUT" "api   worker: the model API through the credential endpoint to https://api.anthropic.com"
  assert_contains "$OUT" "gates: no network"
  expect_exit 0 git mullet doctor --json
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["grants"]["worker"]==[] and d["api"]=="https://api.anthropic.com", d' "$OUT" ||
    fail "doctor --json does not show the model API apart from the grants"
  printf '[run]\nexecutor = "command"\n[network]\nsetup = ["registry.example:443"]\n' \
    >"$XDG_CONFIG_HOME/git-mullet/config.toml"
  expect_exit 0 git mullet doctor
  assert_contains "$OUT" "worker: no network"
  assert_not_contains "$OUT" "credential endpoint"
  expect_exit 0 git mullet doctor --json
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); g=d["grants"]; assert g["setup"]==["registry.example:443"] and g["worker"]==[] and g["gates"]==[] and d["api"] is None, d' "$OUT" ||
    fail "doctor --json lacks the grants"
  rm -f "$XDG_CONFIG_HOME/git-mullet/config.toml"
}

test_dry_run_prints_the_plan_and_runs_nothing() {
  new_repo repo
  cd repo
  expect_exit 0 git mullet run --dry-run -m "$PWD/../canary" --command "$CANARY_CMD"
  assert_contains "$OUT" "phase worker"
  assert_contains "$OUT" "network:     none"
  assert_contains "$OUT" "/mullet/work"
  assert_contains "$OUT" "tmpfs   /home"
  assert_not_contains "$OUT" "MULLET_PROMPT=" "environment values"
  expect_exit 0 git mullet run --dry-run --json -m x --command true
  python3 -c 'import json,sys; p=json.loads(sys.argv[1])["phases"][0]; assert p["network"]["grants"]==[]; assert "PATH" in p["env"]' "$OUT" ||
    fail "dry-run JSON lacks the plan"
  assert_absent ../canary
  assert_absent .git/mullet
  assert_eq "$(git for-each-ref refs/mullet | wc -l)" 0 "refs created"
}

run_tests

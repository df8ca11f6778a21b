#!/usr/bin/env bash
# Runs one suite as an unprivileged user (created here when missing), so every
# suite is proved both as root and as an ordinary user (a suite of host-side
# logic may name the tests that differ as a user in AS_USER_TESTS; see
# run_tests in harness.sh).
set -euo pipefail
suite="$1"
user="${MULLET_TEST_USER:-mullet-test}"
if [ "$(id -u)" -ne 0 ]; then
  exec bash "$suite"
fi
if ! id "$user" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash "$user" 2>/dev/null || id "$user" >/dev/null
fi
scratch="$(mktemp -d /tmp/mullet-as-user.XXXXXX)"
chown "$user:" "$scratch"
chmod 700 "$scratch"
trap 'rm -rf "$scratch"' EXIT
# The suite file and the binary must be readable by that user; they live in
# the source and build trees, which are world-readable.
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
  TMPDIR="$scratch" MULLET_AS_USER_RUN=1 MULLET_BIN="$MULLET_BIN" MULLET_TEST_CLAUDE="${MULLET_TEST_CLAUDE:-}" \
  MULLET_TEST_OPENCODE="${MULLET_TEST_OPENCODE:-}" ${ONLY:+ONLY="$ONLY"} \
  ${SLURM_CONF:+SLURM_CONF="$SLURM_CONF"} ${MULLET_SLURM_CLUSTER:+MULLET_SLURM_CLUSTER="$MULLET_SLURM_CLUSTER"} \
  bash "$suite"

#!/usr/bin/env bash
# The system call filter (src/sandbox/syscall_filter.cpp): a worker makes
# every call it denies, each in a form that works, or fails otherwise than
# with EPERM, without the filter (the same probe run on the host is the
# baseline that shows it), and each fails inside with EPERM while the
# worker goes on; what a coding worker needs still works; a system call
# through the 32-bit entry point, or with x32 numbers, kills the process
# instead of slipping past rules written for x86_64 numbers.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

PROBE="$(cd "$(dirname "$0")" && pwd)/lib/syscall_probe.py"

# probe_lines TEXT: the probe's result lines (NAME RESULT) from TEXT.
probe_lines() {
  grep -E '^[A-Za-z0-9_-]+ [A-Z0-9_-]+$' <<<"$1" | grep -v '^PROBE-END' || true
}

test_every_denied_call_fails_with_eperm_inside_and_not_outside() {
  new_repo repo
  cd repo
  cp "$PROBE" probe.py
  git add probe.py
  git commit -qm probe
  local host sandbox name result outside denied_outside=0 informative=0
  # The baseline, as the user the suite runs as, in a directory of its own.
  host="$(cd "$TEST_ROOT" && /usr/bin/python3 "$OLDPWD/probe.py" </dev/null)"
  assert_contains "$host" "PROBE-END" "the probe on the host"
  run_job -m probe --command '/usr/bin/python3 probe.py </dev/null > probe.out 2>&1; echo done'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "state (the worker went on after every denied call)"
  sandbox="$(git show "$(json_field "$JOB_JSON" result)":probe.out)"
  assert_contains "$sandbox" "PROBE-END" "the probe inside (no denied call crashed it)"
  while read -r name result; do
    outside="$(probe_lines "$host" | awk -v n="$name" '$1 == n {print $2}')"
    [ -n "$outside" ] || fail "the host run has no line for $name"
    case "$name" in
      allowed-ioctl-*) [ "$result" != EPERM ] || fail "$name was refused by the filter: it must reach the kernel" ;;
      allowed-*) assert_eq "$result" OK "$name (a coding worker needs it)" ;;
      *)
        assert_eq "$result" EPERM "$name inside the sandbox (outside: $outside)"
        if [ "$outside" = EPERM ]; then denied_outside=$((denied_outside + 1)); else informative=$((informative + 1)); fi
        ;;
    esac
  done < <(probe_lines "$sandbox")
  # The probe tells the filter from its absence: most calls do not fail
  # with EPERM without it (those that do fail so for lack of privilege).
  [ "$informative" -ge 30 ] ||
    fail "only $informative of the denied calls work or fail otherwise on the host ($denied_outside fail with EPERM there too): the probe proves too little"
  [ "$(probe_lines "$sandbox" | wc -l)" -ge 50 ] || fail "the probe printed too few lines inside: $sandbox"
}

# build_probe NAME: compiles NAME.c (from stdin) into the repository's
# NAME and commits it.
build_probe() {
  cat >"$1.c"
  gcc -O1 -o "$1" "$1.c"
  rm "$1.c"
  git add "$1"
  git commit -qm "$1"
}

# probe_fate_inside NAME: runs ./NAME as the worker; prints "status N".
probe_fate_inside() {
  run_job -m "$1" --command "./$1; echo \"status \$?\" > $1.out"
  git show "$(json_field "$JOB_JSON" result)":"$1.out"
}

test_a_32_bit_system_call_kills_the_process() {
  command -v gcc >/dev/null || fail "gcc is needed (scripts/install-deps installs build-essential)"
  new_repo repo
  cd repo
  # getpid through int 0x80 (i386 number 20): it must not reach the kernel
  # under the x86_64 rules.
  build_probe int80 <<'C'
#include <stdio.h>
int main(void) {
  long result;
  __asm__ volatile("int $0x80" : "=a"(result) : "a"(20L) : "memory");
  printf("int80 returned %ld\n", result);
  return 0;
}
C
  local outside=0 inside
  ./int80 >/dev/null 2>&1 || outside=$?
  inside="$(probe_fate_inside int80)"
  if [ "$outside" = 0 ]; then
    # 128 + SIGSYS (31)
    assert_eq "$inside" "status 159" "the 32-bit call's fate inside (on the host it returned)"
  else
    # A kernel built or booted without the 32-bit entry (ia32_emulation=0)
    # faults the instruction before any filter sees it: the call cannot
    # reach the kernel here either way, and the x32 test below is the one
    # that shows the filter's rule on foreign numbers.
    echo "    # this kernel has no 32-bit entry point: int 0x80 dies with status $outside on the host" >&2
    assert_eq "$inside" "status $outside" "the 32-bit call's fate inside, as on the host"
  fi
}

test_an_x32_system_call_kills_the_process() {
  command -v gcc >/dev/null || fail "gcc is needed (scripts/install-deps installs build-essential)"
  new_repo repo
  cd repo
  # getpid (39) with the x32 bit: the x86_64 entry point, another ABI's
  # numbers. Without the filter it returns (a pid, or -ENOSYS where the
  # kernel has no x32 ABI); with it, the process is killed.
  build_probe x32 <<'C'
#include <stdio.h>
int main(void) {
  long result;
  __asm__ volatile("syscall" : "=a"(result) : "a"(0x40000000L | 39L) : "rcx", "r11", "memory");
  printf("x32 returned %ld\n", result);
  return 0;
}
C
  local outside
  outside="$(./x32 2>&1)" || fail "the probe fails on the host too, so it proves nothing: $outside"
  assert_contains "$outside" "x32 returned" "the x32 call on the host"
  assert_eq "$(probe_fate_inside x32)" "status 159" "the x32 call's fate inside"
}

run_tests

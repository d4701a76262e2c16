#!/usr/bin/env bash
# Shows that a suite whose process dies is named and counted while the suites after it still
# run: the runner's self-test (SCENED_TEST_CRASH) aborts in its one test. With it and f32fmt
# selected, the runner must name crash_selftest as dead of SIGABRT, report f32fmt passed, end
# with "N passed, 1 failed" and exit 1. Usage: check_crash.sh RUNNER (the unit-tests program).
set -u
runner=${1:?usage: check_crash.sh RUNNER}
out=$(SCENED_TEST_CRASH=1 "$runner" crash_selftest,f32fmt 2>&1)
rc=$?

fail() {
  echo "crash check: $*" >&2
  sed 's/^/  | /' <<<"$out" >&2
  exit 1
}

[ "$rc" -eq 1 ] || fail "the runner exited $rc, not 1"
grep -q '^crash_selftest: 0 passed, 1 failed (.*died of signal 6 .* in "aborts"' <<<"$out" ||
  fail "no line naming the suite that died"
grep -qE '^f32fmt: [1-9][0-9]* passed \(' <<<"$out" || fail "the suite after it did not pass"
grep -qx '1 suite failed: crash_selftest (died of signal 6)' <<<"$out" ||
  fail "the closing lines do not name the suite that died"
[[ $(tail -n 1 <<<"$out") =~ ^[1-9][0-9]*\ passed,\ 1\ failed$ ]] ||
  fail "the last line is not the count with 1 failed"
echo "crash check: the suite that died was named and counted, the next one ran (exit $rc)"

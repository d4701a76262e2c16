#!/usr/bin/env bash
# Shows that a hung test names itself and takes its daemon with it: the integration program's
# self-test (SCENED_TEST_HANG) starts a daemon and hangs; under a 1 s limit the runner must exit
# non-zero with "TIMEOUT: timeout_selftest/hangs past the limit after 1 s" on stderr, and the
# daemon must be gone. Usage: check_timeout.sh RUNNER (the integration-tests program; SCENED_BIN
# names the daemon, as for the tests).
set -u
runner=${1:?usage: check_timeout.sh RUNNER}
err=$(mktemp)
trap 'rm -f "$err"' EXIT

fail() {
  echo "timeout check: $*" >&2
  sed 's/^/  | /' "$err" >&2
  exit 1
}

start=$(date +%s)
SCENED_TEST_TIMEOUT=1 SCENED_TEST_HANG=1 "$runner" timeout_selftest >/dev/null 2>"$err"
rc=$?
took=$(($(date +%s) - start))
[ "$rc" -ne 0 ] || fail "the runner exited 0"
grep -qx 'TIMEOUT: timeout_selftest/hangs past the limit after 1 s' "$err" ||
  fail "no TIMEOUT line naming the test (exit $rc)"
[ "$took" -lt 30 ] || fail "the runner took ${took} s to give up"
pid=$(sed -n 's/^timeout self-test: daemon pid \([0-9][0-9]*\)$/\1/p' "$err")
[ -n "$pid" ] || fail "the self-test did not say which daemon it started"
# Gone, or a zombie waiting for whoever adopted it.
for _ in $(seq 50); do
  state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
  if [ -z "$state" ] || [ "$state" = Z ]; then
    echo "timeout check: the hung test was named and its daemon (pid $pid) killed (exit $rc)"
    exit 0
  fi
  sleep 0.1
done
fail "the daemon (pid $pid) outlived the runner"

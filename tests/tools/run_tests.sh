#!/usr/bin/env bash
# Runs the test programs one after the other, each with FILTER (comma-separated words: the
# suites whose names contain one; empty: every suite), and ends with one line that counts the
# tests of them all. A program with no suite FILTER selects is skipped; a word that selects no
# suite of any program is an error (exit 2). Every program runs even when one before it failed;
# the exit status is 1 when any failed.
# Usage: run_tests.sh FILTER PROGRAM... (SCENED_BIN and SCENECTL_BIN as the suites need them).
set -u
filter=${1?usage: run_tests.sh FILTER PROGRAM...}
shift
IFS=, read -ra words <<<"$filter"

# True when the program has a suite the filter selects.
selects() {
  local suite word
  [ -z "$filter" ] && return 0
  while read -r suite; do
    for word in "${words[@]}"; do
      [ -n "$word" ] && [[ $suite == *"$word"* ]] && return 0
    done
  done < <("$1" --list)
  return 1
}

if [ -n "$filter" ]; then
  suites=$(for program in "$@"; do "$program" --list; done) || exit 2
  for word in "${words[@]}"; do
    if [ -n "$word" ] && ! grep -qF -- "$word" <<<"$suites"; then
      echo "no test suite matches \"$word\"; the suites are:" >&2
      sed 's/^/  /' <<<"$suites" >&2
      exit 2
    fi
  done
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
passed=0 failed=0 status=0 ran=()
for program in "$@"; do
  selects "$program" || continue
  name=$(basename "$program")
  ran+=("$name")
  echo "== $name${filter:+ $filter}"
  "$program" ${filter:+"$filter"} | tee "$out"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || status=1
  if [[ $(tail -n 1 "$out") =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
  else
    echo "$name ended without its count (exit $rc)"
    status=1
  fi
  echo
done
echo "== ${ran[*]}"
echo "$passed passed, $failed failed"
exit "$status"

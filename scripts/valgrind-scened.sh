#!/usr/bin/env bash
# Runs the daemon under valgrind for the integration tests (make valgrind): any memory error
# or leak makes the daemon exit 99 instead of 0, which the tests check at every shutdown.
exec valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect \
  --errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
  --log-file="${VALGRIND_LOG_DIR:-/tmp}/scened-valgrind.%p.log" "$SCENED_REAL" "$@"

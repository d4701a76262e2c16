/* integration-tests: the suites that start the daemon (suites.h), run by the shared runner.
 * With SCENED_TEST_HANG set, a suite "timeout_selftest" whose one test starts a daemon and
 * hangs comes first, to show that an overrun is named and its daemon killed (make
 * test-timeout-check). */
#include "harness.h"
#include "suites.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void test_hang(void) {
  t_daemon d;
  CU_ASSERT_FATAL(t_daemon_start(&d, NULL) == 0);
  fprintf(stderr, "timeout self-test: daemon pid %d\n", (int)d.pid);
  for (;;)
    pause();
}

static int add_timeout_selftest(void) {
  static const t_test tests[] = {{"hangs past the limit", test_hang}};
  return T_ADD_SUITE("timeout_selftest", NULL, NULL, tests);
}

int main(int argc, char **argv) {
  static const t_suite suites[] = {{"timeout_selftest", add_timeout_selftest},
                                   T_SUITES(T_SUITE_ENTRY)};
  size_t skip = getenv("SCENED_TEST_HANG") ? 0 : 1;
  return t_run(argc, argv, suites + skip, sizeof suites / sizeof suites[0] - skip);
}

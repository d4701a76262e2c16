/* The test runner: registers every suite from suites.h and runs them with CUnit's basic
 * interface; the exit code is non-zero when any test failed. An optional argument runs only
 * the suites whose name contains one of its comma-separated words.
 *
 * Every test runs under a time limit (SCENED_TEST_TIMEOUT seconds, default
 * DEFAULT_TIMEOUT_S): a test that overruns it prints "TIMEOUT: suite/test after N s" on stderr,
 * its daemons and other children are killed, and the runner exits 124. With SCENED_TEST_HANG
 * set, a suite "timeout_selftest" whose one test starts a daemon and hangs is added, to show
 * that this works (make test-timeout-check). */
#include "harness.h"
#include "suites.h"

#include <CUnit/Basic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Measured on the 2-core machine, idle: the torture test takes 10 s, 17 s under the sanitizers
 * (its own deadlines let it run for over a minute before it gives up); under valgrind the
 * core's random-operations test takes 54 s and the command-line test 22 s. A loaded machine
 * is slower by a factor of 2 or more. */
#define DEFAULT_TIMEOUT_S 300

static bool selected(const char *suite, const char *filter) {
  if (!filter)
    return true;
  char words[256];
  snprintf(words, sizeof words, "%s", filter);
  for (char *save, *w = strtok_r(words, ",", &save); w; w = strtok_r(NULL, ",", &save))
    if (strstr(suite, w))
      return true;
  return false;
}

int scn_add_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean,
                  const scn_test *tests, size_t count) {
  CU_pSuite s = CU_add_suite(name, init, clean);
  if (!s)
    return -1;
  for (size_t i = 0; i < count; i++)
    if (!CU_add_test(s, tests[i].name, tests[i].fn))
      return -1;
  return 0;
}

/* ---- the per-test time limit ----------------------------------------------------------------- */

static unsigned timeout_s = DEFAULT_TIMEOUT_S;
/* The line printed when the running test overruns, written before the test starts, since
 * the signal handler may only write it. */
static char timeout_line[512];
static size_t timeout_len;

static void on_timeout(int sig) {
  (void)sig;
  ssize_t n = write(STDERR_FILENO, timeout_line, timeout_len);
  (void)n;
  scn_kill_children();
  _exit(124);
}

/* Every suite's setup and teardown: the limit runs from just before each test to just after. */
static void test_setup(void) {
  CU_pSuite suite = CU_get_current_suite();
  CU_pTest test = CU_get_current_test();
  int n = snprintf(timeout_line, sizeof timeout_line, "\nTIMEOUT: %s/%s after %u s\n",
                   suite ? suite->pName : "?", test ? test->pName : "?", timeout_s);
  timeout_len = n < 0 ? 0 : (size_t)n < sizeof timeout_line ? (size_t)n : sizeof timeout_line - 1;
  alarm(timeout_s);
}

static void test_teardown(void) { alarm(0); }

/* SCENED_TEST_TIMEOUT: whole seconds, at least 1. */
static bool read_timeout(void) {
  const char *s = getenv("SCENED_TEST_TIMEOUT");
  if (!s || !*s)
    return true;
  char *end;
  unsigned long v = strtoul(s, &end, 10);
  if (*end || v < 1 || v > 86400 || *s == '-') {
    fprintf(stderr, "SCENED_TEST_TIMEOUT must be whole seconds from 1 to 86400, not \"%s\"\n", s);
    return false;
  }
  timeout_s = (unsigned)v;
  return true;
}

static int install_timeouts(void) {
  struct sigaction sa = {.sa_handler = on_timeout};
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGALRM, &sa, NULL) != 0)
    return -1;
  for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext) {
    if (s->pSetUpFunc || s->pTearDownFunc) {
      fprintf(stderr, "suite %s has its own setup or teardown; the runner needs both\n", s->pName);
      return -1;
    }
    s->pSetUpFunc = test_setup;
    s->pTearDownFunc = test_teardown;
  }
  return 0;
}

/* The self-test: a daemon started, then a hang past any limit. */
static void test_hang(void) {
  scn_daemon d;
  CU_ASSERT_FATAL(scn_daemon_start(&d, NULL) == 0);
  fprintf(stderr, "\ntimeout self-test: daemon pid %d\n", (int)d.pid);
  for (;;)
    pause();
}

static int register_timeout_selftest(void) {
  static const scn_test tests[] = {{"hangs past the limit", test_hang}};
  return SCN_ADD_SUITE("timeout_selftest", NULL, NULL, tests);
}

int main(int argc, char **argv) {
  if (!read_timeout())
    return 2;
  if (CU_initialize_registry() != CUE_SUCCESS)
    return 2;
#define SCN_TEST_REGISTER(name)                                                                    \
  if (selected(#name, argc > 1 ? argv[1] : NULL)) {                                                \
    if (scn_test_register_##name() != 0) {                                                         \
      fprintf(stderr, "could not register suite %s\n", #name);                                     \
      CU_cleanup_registry();                                                                       \
      return 2;                                                                                    \
    }                                                                                              \
  }
  SCN_TEST_SUITES(SCN_TEST_REGISTER)
#undef SCN_TEST_REGISTER
  bool hang = getenv("SCENED_TEST_HANG") && selected("timeout_selftest", argc > 1 ? argv[1] : NULL);
  if ((hang && register_timeout_selftest() != 0) || install_timeouts() != 0) {
    CU_cleanup_registry();
    return 2;
  }
  CU_basic_set_mode(CU_BRM_NORMAL);
  CU_basic_run_tests();
  alarm(0);
  scn_kill_children(); /* daemons of tests that stopped half-way */
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
  unsigned run = CU_get_number_of_tests_run();
  printf("\n%u passed, %u failed\n", run - CU_get_number_of_tests_failed(),
         CU_get_number_of_tests_failed());
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

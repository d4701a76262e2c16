/* The runner: one process per suite, a time limit per test, one line per suite and a closing
 * count (runner.h). */
#include "runner.h"

#include "children.h"
#include "clock.h"

#include <CUnit/TestRun.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Measured on the 2-core machine, idle: the torture test takes 10 s, 17 s under the sanitizers
 * (its own deadlines let it run for over a minute before it gives up); under valgrind the
 * core's random-operations test takes 54 s and the command-line test 22 s. A loaded machine
 * is slower by a factor of 2 or more. */
#define DEFAULT_TIMEOUT_S 300

int t_add_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean, const t_test *tests,
                size_t count) {
  CU_pSuite s = CU_add_suite(name, init, clean);
  if (!s)
    return -1;
  for (size_t i = 0; i < count; i++)
    if (!CU_add_test(s, tests[i].name, tests[i].fn))
      return -1;
  return 0;
}

static bool selected(const char *suite, const char *filter) {
  if (!filter || !*filter)
    return true;
  size_t n = strlen(filter);
  char *words = malloc(n + 1);
  if (!words)
    abort();
  memcpy(words, filter, n + 1);
  bool found = false;
  for (char *save, *w = strtok_r(words, ",", &save); w && !found; w = strtok_r(NULL, ",", &save))
    found = strstr(suite, w) != NULL;
  free(words);
  return found;
}

/* ---- in a suite's process ------------------------------------------------------------------ */

/* What a suite's process tells the runner, in memory the two share: it outlives a crash. */
typedef struct suite_report {
  unsigned tests;  /* registered */
  unsigned passed; /* finished without a failure */
  unsigned failed; /* finished with one */
  bool in_test;    /* a test started and has not finished */
  bool setup_failed, cleanup_failed;
  char test[256]; /* the test that started last */
} suite_report;

static suite_report *report;
static unsigned timeout_s = DEFAULT_TIMEOUT_S;
/* The line printed when the running test overruns, written before the test starts, since
 * the signal handler may only write it. */
static char timeout_line[512];
static size_t timeout_len;

static void on_timeout(int sig) {
  (void)sig;
  ssize_t n = write(STDERR_FILENO, timeout_line, timeout_len);
  (void)n;
  t_kill_children();
  _exit(124);
}

static void on_test_start(const CU_pTest test, const CU_pSuite suite) {
  snprintf(report->test, sizeof report->test, "%s", test->pName);
  report->in_test = true;
  int n = snprintf(timeout_line, sizeof timeout_line, "\nTIMEOUT: %s/%s after %u s\n", suite->pName,
                   test->pName, timeout_s);
  timeout_len = n < 0 ? 0 : (size_t)n < sizeof timeout_line ? (size_t)n : sizeof timeout_line - 1;
  alarm(timeout_s);
}

/* failures: this test's, the first of a list that runs to the end. */
static void on_test_complete(const CU_pTest test, const CU_pSuite suite,
                             const CU_pFailureRecord failures) {
  alarm(0);
  report->in_test = false;
  if (!failures) {
    report->passed++;
    return;
  }
  report->failed++;
  printf("FAILED %s/%s\n", suite->pName, test->pName);
  for (CU_pFailureRecord f = failures; f; f = f->pNext)
    printf("  %s:%u: %s\n", f->strFileName ? f->strFileName : "?", f->uiLineNumber,
           f->strCondition ? f->strCondition : "?");
  fflush(stdout);
}

static void on_setup_failure(const CU_pSuite suite) {
  report->setup_failed = true;
  printf("suite %s: its setup failed, so none of its tests ran\n", suite->pName);
}

static void on_cleanup_failure(const CU_pSuite suite) {
  report->cleanup_failed = true;
  printf("suite %s: its cleanup failed\n", suite->pName);
}

/* Runs one suite in this process: 0 when every test passed, 1 when not, 2 when it could not
 * be added. */
static int run_here(const t_suite *suite) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* what was printed survives a crash */
  if (CU_initialize_registry() != CUE_SUCCESS)
    return 2;
  if (suite->add() != 0) {
    fprintf(stderr, "could not register suite %s\n", suite->name);
    CU_cleanup_registry();
    return 2;
  }
  for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
    report->tests += s->uiNumberOfTests;
  struct sigaction sa = {.sa_handler = on_timeout};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  CU_set_test_start_handler(on_test_start);
  CU_set_test_complete_handler(on_test_complete);
  CU_set_suite_init_failure_handler(on_setup_failure);
  CU_set_suite_cleanup_failure_handler(on_cleanup_failure);
  CU_run_all_tests();
  alarm(0);
  t_kill_children(); /* daemons of tests that stopped half-way */
  bool ok = CU_get_number_of_failures() == 0 && CU_get_number_of_suites_failed() == 0;
  CU_cleanup_registry();
  return ok ? 0 : 1;
}

/* ---- in the runner ------------------------------------------------------------------------- */

typedef struct totals {
  unsigned passed, failed;
  unsigned bad_suites;
  char bad[4096]; /* "name (why), ..." for the closing lines */
} totals;

static void note_bad(totals *t, const char *suite, const char *why) {
  size_t len = strlen(t->bad);
  snprintf(t->bad + len, sizeof t->bad - len, "%s%s (%s)", len ? ", " : "", suite, why);
  t->bad_suites++;
}

/* Forks the suite's process, waits for it and reports what became of it. */
static void run_apart(const t_suite *suite, totals *t) {
  memset(report, 0, sizeof *report);
  fflush(stdout);
  fflush(stderr);
  long start = t_now_ms();
  pid_t runner = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != runner)
      _exit(127);
    exit(run_here(suite)); /* exit, not _exit: the sanitizers' and valgrind's checks run */
  }
  int status = 0;
  if (pid < 0) {
    perror("fork");
    status = 2 << 8;
  } else {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
  }
  double seconds = (double)(t_now_ms() - start) / 1000;
  const suite_report *r = report;
  unsigned failed = r->tests > r->passed ? r->tests - r->passed : 0;
  unsigned unfinished = r->tests - r->passed - r->failed;
  unsigned never_ran = unfinished - (r->in_test ? 1 : 0);
  t->passed += r->passed;
  t->failed += failed;

  char why[512] = "", end[512] = "";
  bool exited = WIFEXITED(status);
  int code = exited ? WEXITSTATUS(status) : 0;
  if (exited && code == 124 && r->in_test) {
    snprintf(why, sizeof why, "timeout");
    snprintf(end, sizeof end, ": \"%s\" ran past the time limit (%u s)", r->test, timeout_s);
  } else if (!exited) {
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    snprintf(why, sizeof why, "died of signal %d", sig);
    snprintf(end, sizeof end, ": the suite's process died of signal %d (%s) %s%s%s", sig,
             strsignal(sig), r->in_test ? "in \"" : "outside its tests", r->in_test ? r->test : "",
             r->in_test ? "\"" : "");
  } else if (r->setup_failed || r->cleanup_failed) {
    snprintf(why, sizeof why, "%s failed", r->setup_failed ? "setup" : "cleanup");
    snprintf(end, sizeof end, ": its %s failed", r->setup_failed ? "setup" : "cleanup");
  } else if (code == 1 && r->failed > 0 && unfinished == 0) {
    snprintf(why, sizeof why, "failed tests");
  } else if (code != 0) {
    snprintf(why, sizeof why, "exited %d", code);
    snprintf(end, sizeof end, ": the suite's process exited %d%s%s%s", code,
             r->in_test ? " in \"" : "", r->in_test ? r->test : "", r->in_test ? "\"" : "");
  }
  printf("%s: %u passed", suite->name, r->passed);
  if (failed || why[0])
    printf(", %u failed", failed);
  printf(" (%.1f s)%s", seconds, end);
  if (never_ran && !r->setup_failed)
    printf("; %u test%s did not run", never_ran, never_ran == 1 ? "" : "s");
  printf("\n");
  fflush(stdout);
  if (why[0])
    note_bad(t, suite->name, why);
}

/* The self-test of the runner: a test that aborts (its suite's process dies of SIGABRT). */
static void test_abort(void) {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none); /* no core file */
  abort();
}

static int add_crash_selftest(void) {
  static const t_test tests[] = {{"aborts", test_abort}};
  return T_ADD_SUITE("crash_selftest", NULL, NULL, tests);
}

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

static int list_tests(const t_suite *suites, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (CU_initialize_registry() != CUE_SUCCESS)
      return 2;
    if (suites[i].add() != 0) {
      fprintf(stderr, "could not register suite %s\n", suites[i].name);
      CU_cleanup_registry();
      return 2;
    }
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
      for (CU_pTest test = s->pTest; test; test = test->pNext)
        printf("%s\t%s\n", suites[i].name, test->pName);
    CU_cleanup_registry();
  }
  return 0;
}

int t_run(int argc, char **argv, const t_suite *suites, size_t count) {
  const char *arg = argc > 1 ? argv[1] : NULL;
  if (argc > 2 ||
      (arg && arg[0] == '-' && strcmp(arg, "--list") != 0 && strcmp(arg, "--list-tests") != 0)) {
    fprintf(stderr, "usage: %s [--list | --list-tests | SUITE[,SUITE...]]\n", argv[0]);
    return 2;
  }
  if (arg && strcmp(arg, "--list") == 0) {
    for (size_t i = 0; i < count; i++)
      printf("%s\n", suites[i].name);
    return 0;
  }
  if (arg && strcmp(arg, "--list-tests") == 0)
    return list_tests(suites, count);
  if (!read_timeout())
    return 2;
  report = mmap(NULL, sizeof *report, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (report == MAP_FAILED) {
    perror("mmap");
    return 2;
  }
  totals t = {0};
  unsigned ran = 0;
  const t_suite crash_selftest = {"crash_selftest", add_crash_selftest};
  if (getenv("SCENED_TEST_CRASH") && selected(crash_selftest.name, arg)) {
    run_apart(&crash_selftest, &t);
    ran++;
  }
  for (size_t i = 0; i < count; i++)
    if (selected(suites[i].name, arg)) {
      run_apart(&suites[i], &t);
      ran++;
    }
  munmap(report, sizeof *report);
  if (!ran)
    printf("no suite of %s matches \"%s\"\n", argv[0], arg ? arg : "");
  if (t.bad_suites)
    printf("%u suite%s failed: %s\n", t.bad_suites, t.bad_suites == 1 ? "" : "s", t.bad);
  printf("%u passed, %u failed\n", t.passed, t.failed);
  return t.bad_suites || t.failed ? 1 : 0;
}

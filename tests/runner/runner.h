/* The runner every test program shares (unit-tests, integration-tests, journal-tests):
 *
 *   PROGRAM [FILTER]      runs the suites whose name contains one of FILTER's comma-separated
 *                         words (every suite without FILTER)
 *   PROGRAM --list        prints the suites' names, one a line
 *   PROGRAM --list-tests  prints "suite<TAB>test" for every test
 *
 * Each suite runs in a process of its own, so that a crash in one does not hide the others'
 * results: the runner prints one line per suite and ends with "N passed, N failed", counting
 * tests (a test that crashed or overran its limit, and those its suite's process never came
 * to, count as failed). The exit status is 0 when every selected suite passed, 1 when a test
 * failed or a suite's process ended badly (each such suite is named), 2 on a usage error.
 *
 * Every test runs under a time limit (SCENED_TEST_TIMEOUT seconds, default 300): a test that
 * overruns it prints "TIMEOUT: suite/test after N s" on stderr, the processes it started
 * (t_fork) are killed, and its suite's process exits 124. With SCENED_TEST_CRASH set, a suite
 * "crash_selftest" whose one test aborts runs first, to show that the next suites still run
 * (make test-runner-check). */
#ifndef T_RUNNER_H
#define T_RUNNER_H

#include <CUnit/CUnit.h>
#include <stddef.h>

/* A suite's test. */
typedef struct t_test {
  const char *name;
  CU_TestFunc fn;
} t_test;

/* Adds a suite (init and clean may be NULL) with its tests, in the order they run; 0, or -1. */
int t_add_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean, const t_test *tests,
                size_t count);
#define T_ADD_SUITE(name, init, clean, tests)                                                      \
  t_add_suite((name), (init), (clean), (tests), sizeof(tests) / sizeof((tests)[0]))

/* A suite a program offers: its name, and the function that adds it (with T_ADD_SUITE). */
typedef struct t_suite {
  const char *name;
  int (*add)(void);
} t_suite;

/* For a program's list of suites (suites.h): X(name) declares, or names in a t_suite table,
 * the function t_register_NAME that the suite's file defines. */
#define T_DECLARE_SUITE(name) int t_register_##name(void);
#define T_SUITE_ENTRY(name) {#name, t_register_##name},

/* Runs the selected suites of the table as above; the program's exit status. */
int t_run(int argc, char **argv, const t_suite *suites, size_t count);

#endif

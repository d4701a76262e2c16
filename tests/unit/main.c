/* The test runner: registers every suite from suites.h and runs them with CUnit's basic
 * interface; the exit code is non-zero when any test failed. An optional argument runs only
 * the suites whose name contains one of its comma-separated words. */
#include "suites.h"

#include <CUnit/Basic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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

int main(int argc, char **argv) {
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
  CU_basic_set_mode(CU_BRM_NORMAL);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
  unsigned run = CU_get_number_of_tests_run();
  printf("\n%u passed, %u failed\n", run - CU_get_number_of_tests_failed(),
         CU_get_number_of_tests_failed());
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

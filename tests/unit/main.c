/* unit-tests: the suites that need no daemon (suites.h), run by the shared runner. */
#include "suites.h"

int main(int argc, char **argv) {
  static const t_suite suites[] = {T_SUITES(T_SUITE_ENTRY)};
  return t_run(argc, argv, suites, sizeof suites / sizeof suites[0]);
}

/* Every test file registers one suite; this list is the whole registry. */
#ifndef SCN_TEST_SUITES_H
#define SCN_TEST_SUITES_H

#include <CUnit/CUnit.h>
#include <stddef.h>

#define SCN_TEST_SUITES(X)                                                                         \
  X(core_math)                                                                                     \
  X(core_trs)                                                                                      \
  X(core_entity)                                                                                   \
  X(core_transform)                                                                                \
  X(core_batch)                                                                                    \
  X(core_stream)                                                                                   \
  X(core_property)                                                                                 \
  X(core_history)                                                                                  \
  X(history_file)                                                                                  \
  X(cluster_owners)                                                                                \
  X(f32fmt)                                                                                        \
  X(proto)                                                                                         \
  X(base64)                                                                                        \
  X(daemon_commands)                                                                               \
  X(daemon_parts)                                                                                  \
  X(daemon_history)                                                                                \
  X(daemon_stream)                                                                                 \
  X(daemon_b64)                                                                                    \
  X(daemon_persist)                                                                                \
  X(clients)                                                                                       \
  X(daemon_ops)                                                                                    \
  X(daemon_torture)                                                                                \
  X(daemon_tls)                                                                                    \
  X(daemon_acl)                                                                                    \
  X(daemon_crash)                                                                                  \
  X(cluster)                                                                                       \
  X(cluster_crash)

/* A suite's tests, in the order they run. */
typedef struct scn_test {
  const char *name;
  CU_TestFunc fn;
} scn_test;

/* Adds the suite (init and clean may be NULL) with its tests; 0, or -1. */
int scn_add_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean,
                  const scn_test *tests, size_t count);
#define SCN_ADD_SUITE(name, init, clean, tests)                                                    \
  scn_add_suite((name), (init), (clean), (tests), sizeof(tests) / sizeof((tests)[0]))

#define SCN_TEST_DECLARE(name) int scn_test_register_##name(void);
SCN_TEST_SUITES(SCN_TEST_DECLARE)
#undef SCN_TEST_DECLARE

#endif

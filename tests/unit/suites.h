/* Every test file registers one suite; this list is the whole registry. */
#ifndef SCN_TEST_SUITES_H
#define SCN_TEST_SUITES_H

#define SCN_TEST_SUITES(X)                                                                     \
  X(core_math)                                                                                 \
  X(core_entity)                                                                               \
  X(core_transform)                                                                            \
  X(core_batch)                                                                                \
  X(core_stream)                                                                               \
  X(core_property)                                                                             \
  X(core_history)                                                                              \
  X(f32fmt)                                                                                    \
  X(proto)                                                                                     \
  X(daemon_commands)                                                                           \
  X(daemon_stream)                                                                             \
  X(daemon_persist)                                                                            \
  X(clients)                                                                                   \
  X(daemon_ops)                                                                                   \
  X(daemon_torture)

#define SCN_TEST_DECLARE(name) int scn_test_register_##name(void);
SCN_TEST_SUITES(SCN_TEST_DECLARE)
#undef SCN_TEST_DECLARE

#endif

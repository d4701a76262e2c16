/* The unit suites: they need no daemon (build/unit-tests). Every test file registers one
 * suite; this list is the whole registry. */
#ifndef T_UNIT_SUITES_H
#define T_UNIT_SUITES_H

#include "runner.h"

#define T_SUITES(X)                                                                                \
  X(core_math)                                                                                     \
  X(core_trs)                                                                                      \
  X(core_entity)                                                                                   \
  X(core_teardown)                                                                                 \
  X(core_transform)                                                                                \
  X(core_transform_forest)                                                                         \
  X(core_batch)                                                                                    \
  X(core_stream)                                                                                   \
  X(core_interest)                                                                                 \
  X(core_property)                                                                                 \
  X(core_property_flush)                                                                           \
  X(core_history)                                                                                  \
  X(history_file)                                                                                  \
  X(crc32c)                                                                                        \
  X(cluster_owners)                                                                                \
  X(replica_backlog)                                                                               \
  X(replica_ticks)                                                                                 \
  X(f32fmt)                                                                                        \
  X(proto_framing)                                                                                 \
  X(proto_request)                                                                                 \
  X(proto_output)                                                                                  \
  X(proto_wire)                                                                                    \
  X(proto_fields)                                                                                  \
  X(proto_packed)                                                                                  \
  X(base64)                                                                                        \
  X(ctl_complete)                                                                                  \
  X(ctl_suggest)

T_SUITES(T_DECLARE_SUITE)

#endif

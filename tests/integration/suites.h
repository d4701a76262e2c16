/* The integration suites: they start the real daemon (SCENED_BIN) on ephemeral ports, and the
 * cluster suites a real etcd (build/integration-tests). Every test file registers one suite;
 * this list is the whole registry. */
#ifndef T_INTEGRATION_SUITES_H
#define T_INTEGRATION_SUITES_H

#include "runner.h"

#define T_SUITES(X)                                                                                \
  X(daemon_commands)                                                                               \
  X(daemon_commands_transforms)                                                                    \
  X(daemon_commands_lines)                                                                         \
  X(daemon_commands_malformed)                                                                     \
  X(daemon_commands_config)                                                                        \
  X(daemon_commands_destroy)                                                                       \
  X(daemon_commands_fields)                                                                        \
  X(daemon_parts)                                                                                  \
  X(daemon_history)                                                                                \
  X(daemon_stream)                                                                                 \
  X(daemon_stream_subscriptions)                                                                   \
  X(daemon_stream_flow)                                                                            \
  X(daemon_b64)                                                                                    \
  X(daemon_interest)                                                                               \
  X(daemon_interest_bands)                                                                         \
  X(daemon_packed)                                                                                 \
  X(daemon_persist)                                                                                \
  X(daemon_persist_damage)                                                                         \
  X(daemon_persist_save)                                                                           \
  X(clients_library)                                                                               \
  X(clients_scenectl)                                                                              \
  X(clients_scenectl_prompt)                                                                       \
  X(clients_scripts)                                                                               \
  X(clients_packed)                                                                                \
  X(clients_packed_daemon)                                                                         \
  X(clients_hosts)                                                                                 \
  X(daemon_ops)                                                                                    \
  X(daemon_torture)                                                                                \
  X(daemon_tls)                                                                                    \
  X(daemon_acl)                                                                                    \
  X(daemon_crash)                                                                                  \
  X(cluster_routing)                                                                               \
  X(cluster_moves)                                                                                 \
  X(cluster_failover)                                                                              \
  X(cluster_setup)                                                                                 \
  X(cluster_replicas)                                                                              \
  X(cluster_replicas_move)                                                                         \
  X(cluster_replicas_sync)                                                                         \
  X(cluster_replicas_catchup)                                                                      \
  X(cluster_replicas_reads)                                                                        \
  X(cluster_replicas_promote)                                                                      \
  X(cluster_crash)                                                                                 \
  X(cluster_crash_replicas)                                                                        \
  X(cluster_script)                                                                                \
  X(cluster_tls)

T_SUITES(T_DECLARE_SUITE)

#endif

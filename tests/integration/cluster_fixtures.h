/* A cluster of three real daemons on a real etcd (tests/fixtures/etcd.h) for the cluster suites:
 * started and stopped node by node, waited for until every node knows the others, and requests
 * that follow MOVED to the owner or wait until some daemon answers ok. */
#ifndef T_CLUSTER_FIXTURES_H
#define T_CLUSTER_FIXTURES_H

#include "daemon_fixtures.h"
#include "etcd.h"

#include <stdbool.h>

#define NODES 3
#define TTL "2"
#define TTL_MS 2000

typedef struct cluster {
  etcd e;
  char data[64];
  t_daemon d[NODES];
  t_client c[NODES];
  bool up[NODES], connected[NODES];
  const char *fsync;
  char via[NODES][64];      /* an etcd URL a node is given instead of e.url (a proxy) */
  const char *const *extra; /* more flags for every daemon (NULL-terminated; NULL: none) */
  bool own_data;            /* each daemon on a directory of its own under data (replicas) */
  const char *token;        /* each client's hello names it once connected (--acl); NULL: none */
  const t_tls_files *tls;   /* the clients connect over TLS with these (--tls-cert); NULL: none */
} cluster;

const char *node_name(int i);
/* The index of the node named name, or -1 (name NULL or no node's). */
int node_index(const char *name);

bool node_start(cluster *k, int i);

/* Waits until every daemon in the list is registered and knows of want live nodes. */
bool wait_registered(cluster *k, int want);

bool cluster_start(cluster *k, const char *fsync);
/* cluster_start for a k whose etcd (k->e, e.g. with TLS), fsync and extra flags are set. */
bool cluster_start_prepared(cluster *k);

/* Declares cluster k and starts it (etcd, three daemons); the test ends here when that fails. */
#define START_CLUSTER(k, fsync)                                                                    \
  cluster k;                                                                                       \
  if (!cluster_start(&k, (fsync))) {                                                               \
    cluster_stop(&k);                                                                              \
    return;                                                                                        \
  }

void node_stop(cluster *k, int i, int sig);

void cluster_stop(cluster *k);

/* Waits until some live daemon answers line ok (following MOVED); the response, or NULL. */
cJSON *wait_ok_anywhere(cluster *k, const char *line, long timeout_ms, int *at);

const cJSON *error_of(const cJSON *r);

/* How many worlds world.list with cluster answers on c; with prefix, how many of them start
 * with it, and in *others how many do not. */
int listed(t_client *c, const char *prefix, int *others);

#endif

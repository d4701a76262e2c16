/* What the replicas' suites read of a cluster (cluster_fixtures.h) with --replicas: the
 * replicas keys in etcd, the in-sync and followers lists, world.list's entries and metrics. */
#ifndef T_REPLICA_FIXTURES_H
#define T_REPLICA_FIXTURES_H

#include "cluster_fixtures.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* The JSON value of key in k's etcd (the caller deletes it), or NULL when absent. */
cJSON *etcd_json(cluster *k, const char *key);

/* The JSON value of key once pred holds of it (15 s at most; *rev, when not NULL, its revision);
 * NULL when it never did. */
cJSON *wait_json(cluster *k, const char *key, bool (*pred)(const cJSON *), long long *rev);

/* Whether a replicas key's value says its group ended (its last world went). */
bool key_ended(const cJSON *v);

/* The size of v's array member, or -1 when it has none. */
int list_size(const cJSON *v, const char *member);
/* The first string of v's array member, or "". */
const char *first(const cJSON *v, const char *member);

/* World w's entry in world.list with cluster on daemon i (*resp: the whole answer, which the
 * caller deletes), or NULL. */
const cJSON *world_item(cluster *k, int i, const char *w, cJSON **resp);

/* The value of name on daemon i's /metrics page; -1 when the page or the sample is missing. */
double metric_of(cluster *k, int i, const char *name);
/* Waits until metric name on daemon i is want (15 s at most). */
bool wait_metric(cluster *k, int i, const char *name, double want);

/* Starts k, each daemon on a data directory of its own, with the extra flags; false (k
 * stopped) when it did not start. */
bool replicas_cluster(cluster *k, const char *const *extra);

/* Starts k (each daemon on a data directory of its own, with the extra flags; its clients
 * naming token in their hello when not NULL), creates world wherever it is accepted (*at: that
 * daemon, its owner) and waits (15 s at most) until the replicas key of world's group names
 * nfollowers followers: the index of the first, which is not the owner; -1 when the cluster did
 * not start or any of that did not come (a failure noted; k to be stopped all the same). */
int replicas_start(cluster *k, const char *const *extra, const char *token, const char *world,
                   int nfollowers, int *at);

#endif

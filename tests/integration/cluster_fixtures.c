#include "cluster_fixtures.h"

#include "daemon_fixtures.h"
#include "etcd.h"

#include <CUnit/CUnit.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *node_name(int i) {
  static const char *names[] = {"n0", "n1", "n2"};
  return names[i];
}

int node_index(const char *name) {
  for (int i = 0; name && i < NODES; i++)
    if (strcmp(name, node_name(i)) == 0)
      return i;
  return -1;
}

bool node_start(cluster *k, int i) {
  /* The last daemon is given a dead endpoint first (of the same scheme): its requests fail over
   * to the live one. */
  char urls[160];
  const char *scheme = strncmp(k->e.url, "https:", 6) == 0 ? "https" : "http";
  const char *live = k->via[i][0] ? k->via[i] : k->e.url;
  if (i == NODES - 1)
    snprintf(urls, sizeof urls, "%s://127.0.0.1:1,%s", scheme, live);
  else
    snprintf(urls, sizeof urls, "%s", live);
  char data[96];
  snprintf(data, sizeof data, "%s/%s", k->data, node_name(i));
  if (k->own_data && mkdir(data, 0700) != 0 && errno != EEXIST) {
    CU_FAIL("a node's data directory was made");
    return false;
  }
  const char *args[32] = {
      "--cluster",   urls, "--data",  k->own_data ? data : k->data,  "--node", node_name(i),
      "--lease-ttl", TTL,  "--fsync", k->fsync ? k->fsync : "always"};
  for (int n = 10, x = 0; k->extra && k->extra[x] && n < 31; x++)
    args[n++] = k->extra[x];
  k->up[i] = START(&k->d[i], args);
  k->connected[i] = k->up[i] && (k->tls ? CONNECT_TLS(&k->c[i], k->d[i].port, k->tls)
                                        : CONNECT(&k->c[i], k->d[i].port));
  if (k->connected[i] && k->token) {
    cJSON *r = t_client_call(&k->c[i], "{\"cmd\":\"hello\",\"token\":\"%s\"}", k->token);
    k->connected[i] = t_resp_ok(r);
    cJSON_Delete(r);
  }
  return k->connected[i];
}

/* The number of live nodes daemon i knows of (-1: no answer). */
static int nodes_seen(cluster *k, int i) {
  cJSON *r = t_client_call(&k->c[i], "{\"cmd\":\"cluster.nodes\"}");
  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(r, "nodes");
  int n = cJSON_IsArray(nodes) ? cJSON_GetArraySize(nodes) : -1;
  cJSON_Delete(r);
  return n;
}

bool wait_registered(cluster *k, int want) {
  long deadline = t_now_ms() + 15000;
  while (t_now_ms() < deadline) {
    bool all = true;
    for (int i = 0; i < NODES; i++)
      if (k->connected[i] && nodes_seen(k, i) != want)
        all = false;
    if (all)
      return true;
    t_sleep_ms(20);
  }
  return false;
}

bool cluster_start(cluster *k, const char *fsync) {
  memset(k, 0, sizeof *k);
  k->fsync = fsync;
  return cluster_start_prepared(k);
}

bool cluster_start_prepared(cluster *k) {
  if (!etcd_start(&k->e)) {
    CU_FAIL("etcd started");
    return false;
  }
  CU_ASSERT_FATAL(t_temp_dir(k->data, sizeof k->data, "data"));
  for (int i = 0; i < NODES; i++)
    if (!node_start(k, i))
      return false;
  bool ok = wait_registered(k, NODES);
  CU_ASSERT(ok);
  return ok;
}

void node_stop(cluster *k, int i, int sig) {
  if (k->connected[i])
    t_client_close(&k->c[i]);
  k->connected[i] = false;
  if (k->up[i])
    t_daemon_stop(&k->d[i], sig, 10000);
  k->up[i] = false;
}

void cluster_stop(cluster *k) {
  for (int i = 0; i < NODES; i++)
    node_stop(k, i, SIGTERM);
  etcd_stop(&k->e, SIGTERM);
  t_remove_temp_dir(k->e.dir);
  t_remove_temp_dir(k->data);
}

/* A request sent to daemon i, then to whichever daemon a MOVED names (at most 3 hops); the
 * last response (caller deletes). *at gets the daemon that answered. */
static cJSON *call_following(cluster *k, int i, int *at, const char *line) {
  cJSON *r = NULL;
  for (int hop = 0; hop < 4 && i >= 0 && k->connected[i]; hop++) {
    cJSON_Delete(r);
    r = t_client_call(&k->c[i], "%s", line);
    if (at)
      *at = i;
    if (strcmp(t_resp_code(r), "MOVED") != 0)
      break;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
    i = node_index(t_resp_str(e, "node"));
  }
  return r;
}

cJSON *wait_ok_anywhere(cluster *k, const char *line, long timeout_ms, int *at) {
  long deadline = t_now_ms() + timeout_ms;
  while (t_now_ms() < deadline) {
    for (int i = 0; i < NODES; i++) {
      if (!k->connected[i])
        continue;
      cJSON *r = call_following(k, i, at, line);
      if (t_resp_ok(r))
        return r;
      cJSON_Delete(r);
    }
    t_sleep_ms(10);
  }
  return NULL;
}

const cJSON *error_of(const cJSON *r) { return cJSON_GetObjectItemCaseSensitive(r, "error"); }

int listed(t_client *c, const char *prefix, int *others) {
  cJSON *r = OK(c, "{\"cmd\":\"world.list\",\"cluster\":true}");
  const cJSON *w, *worlds = cJSON_GetObjectItemCaseSensitive(r, "worlds");
  int n = 0;
  if (others)
    *others = 0;
  cJSON_ArrayForEach(w, worlds) {
    const char *name = t_resp_str(w, "name");
    if (!prefix || (name && strncmp(name, prefix, strlen(prefix)) == 0))
      n++;
    else if (others)
      (*others)++;
  }
  cJSON_Delete(r);
  return n;
}

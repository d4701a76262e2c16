/* The cluster (--cluster) against a real etcd: every test starts etcd on loopback with
 * ephemeral ports, a temporary data directory and fast elections, plus three real daemons,
 * and stops exactly what it started (the harness kills them when a test overruns). Waits have
 * deadlines; nothing sleeps a fixed time to let something happen. */
#include "daemon_fixtures.h"
#include "etcd.h"
#include "fake_gateway.h"
#include "loopback.h"
#include "suites.h"
#include "watch_delaying_proxy.h"

#include "scn_client.h"

#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NODES 3
#define TTL "2"
#define TTL_MS 2000

/* ---- a cluster of daemons ----------------------------------------------------------------- */

typedef struct cluster {
  etcd e;
  char data[64];
  t_daemon d[NODES];
  t_client c[NODES];
  bool up[NODES], connected[NODES];
  const char *fsync;
  char via[NODES][64]; /* an etcd URL a node is given instead of e.url (a proxy) */
} cluster;

static const char *node_name(int i) {
  static const char *names[] = {"n0", "n1", "n2"};
  return names[i];
}

static int node_index(const char *name) {
  for (int i = 0; i < NODES; i++)
    if (strcmp(name, node_name(i)) == 0)
      return i;
  return -1;
}

static bool node_start(cluster *k, int i) {
  /* The last daemon is given a dead endpoint first: its requests fail over to the live one. */
  char urls[160];
  snprintf(urls, sizeof urls, "%s%s", i == NODES - 1 ? "http://127.0.0.1:1," : "",
           k->via[i][0] ? k->via[i] : k->e.url);
  const char *args[] = {
      "--cluster",  urls,          "--data", k->data,   "--node",
      node_name(i), "--lease-ttl", TTL,      "--fsync", k->fsync ? k->fsync : "always",
      NULL};
  k->up[i] = START(&k->d[i], args);
  k->connected[i] = k->up[i] && CONNECT(&k->c[i], k->d[i].port);
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

/* Waits until every daemon in the list is registered and knows of want live nodes. */
static bool wait_registered(cluster *k, int want) {
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

static bool cluster_start(cluster *k, const char *fsync) {
  memset(k, 0, sizeof *k);
  k->fsync = fsync;
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

/* Declares cluster k and starts it (etcd, three daemons); the test ends here when that fails. */
#define START_CLUSTER(k, fsync)                                                                    \
  cluster k;                                                                                       \
  if (!cluster_start(&k, (fsync))) {                                                               \
    cluster_stop(&k);                                                                              \
    return;                                                                                        \
  }

static void node_stop(cluster *k, int i, int sig) {
  if (k->connected[i])
    t_client_close(&k->c[i]);
  k->connected[i] = false;
  if (k->up[i])
    t_daemon_stop(&k->d[i], sig, 10000);
  k->up[i] = false;
}

static void cluster_stop(cluster *k) {
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

/* Waits until some live daemon answers line ok (following MOVED); the response, or NULL. */
static cJSON *wait_ok_anywhere(cluster *k, const char *line, long timeout_ms, int *at) {
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

static const cJSON *error_of(const cJSON *r) {
  return cJSON_GetObjectItemCaseSensitive(r, "error");
}

/* ---- routing --------------------------------------------------------------------------------- */

/* Every command that names a world answers MOVED on a daemon that does not own its group,
 * naming the owner and its address; the owner runs them. */
static void test_routing_moved(void) {
  START_CLUSTER(k, NULL);
  cJSON *r = OK(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"g1.main\"}");
  CU_ASSERT(t_resp_str_is(r, "node", "n0"));
  cJSON_Delete(r);
  r = OK(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"g1.main\",\"name\":\"a\"}");
  unsigned long long e = t_resp_id(r, "entity");
  cJSON_Delete(r);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", k.d[0].port);
  const char *fmts[] = {
      "{\"cmd\":\"world.create\",\"world\":\"g1.other\"}",
      "{\"cmd\":\"world.destroy\",\"world\":\"g1.main\"}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.main\"}",
      "{\"cmd\":\"transform.destroy\",\"world\":\"g1.main\",\"entity\":%llu}",
      "{\"cmd\":\"transform.link\",\"world\":\"g1.main\",\"entity\":%llu,\"parent\":null}",
      "{\"cmd\":\"transform.unlink\",\"world\":\"g1.main\",\"entity\":%llu}",
      "{\"cmd\":\"transform.set_local\",\"world\":\"g1.main\",\"entity\":%llu,\"t\":[1,2,3]}",
      "{\"cmd\":\"transform.set_world\",\"world\":\"g1.main\",\"entity\":%llu,\"t\":[1,2,3]}",
      "{\"cmd\":\"transform.get\",\"world\":\"g1.main\",\"entity\":%llu}",
      "{\"cmd\":\"transform.children\",\"world\":\"g1.main\",\"entity\":%llu}",
      "{\"cmd\":\"transform.rename\",\"world\":\"g1.main\",\"entity\":%llu,\"name\":\"b\"}",
      "{\"cmd\":\"transform.find\",\"world\":\"g1.main\",\"path\":\"a\"}",
      "{\"cmd\":\"transform.relative\",\"world\":\"g1.main\",\"entity\":%llu,\"to\":%llu}",
      "{\"cmd\":\"batch\",\"world\":\"g1.main\",\"ops\":[]}",
      "{\"cmd\":\"subscribe\",\"world\":\"g1.main\"}",
      "{\"cmd\":\"entity.create\",\"world\":\"g1.main\"}",
      "{\"cmd\":\"world.move\",\"world\":\"g1.main\",\"to\":\"n1\"}",
  };
  for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
    for (int i = 1; i < NODES; i++) {
      char line[300];
      snprintf(line, sizeof line, fmts[f], e, e);
      r = CALL(&k.c[i], "%s", line);
      const cJSON *err = error_of(r);
      bool moved = t_resp_str_is(err, "code", "MOVED") && t_resp_str_is(err, "node", "n0") &&
                   t_resp_str_is(err, "addr", addr);
      if (!CHECK(moved, r))
        t_report_text("request", line);
      cJSON_Delete(r);
    }
  }
  /* The owner runs them. */
  OKD(&k.c[0], "{\"cmd\":\"transform.get\",\"world\":\"g1.main\",\"entity\":%llu}", e);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"g1.other\"}");
  r = OK(&k.c[0], "{\"cmd\":\"entity.create\",\"world\":\"g1.main\",\"count\":2}");
  cJSON_Delete(r);
  /* A new group is created where it is asked for; a world nobody has is NOT_FOUND everywhere
   * (each daemon asks etcd first); a group created an instant ago elsewhere is MOVED. */
  for (int i = 0; i < NODES; i++) {
    ERR(&k.c[i], "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"nope\",\"entity\":1}");
    char line[128];
    snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"fresh%d\"}", i);
    r = OK(&k.c[i], "%s", line);
    CU_ASSERT(t_resp_str_is(r, "node", node_name(i)));
    cJSON_Delete(r);
    int other = (i + 1) % NODES;
    r = CALL(&k.c[other], "{\"cmd\":\"transform.find\",\"world\":\"fresh%d\",\"path\":\"x\"}", i);
    CHECK(t_resp_str_is(error_of(r), "code", "MOVED") &&
              t_resp_str_is(error_of(r), "node", node_name(i)),
          r);
    cJSON_Delete(r);
  }
  /* world.list with cluster: every world with its node; info names the node. */
  long deadline = t_now_ms() + 5000;
  bool listed = false;
  while (!listed && t_now_ms() < deadline) {
    r = OK(&k.c[2], "{\"cmd\":\"world.list\",\"cluster\":true}");
    const cJSON *w, *worlds = cJSON_GetObjectItemCaseSensitive(r, "worlds");
    int found = 0;
    cJSON_ArrayForEach(w, worlds) {
      if (t_resp_str_is(w, "name", "g1.main") && t_resp_str_is(w, "node", "n0"))
        found++;
      if (t_resp_str_is(w, "name", "fresh2") && t_resp_str_is(w, "node", "n2") &&
          t_resp_has(w, "transforms"))
        found++;
    }
    listed = found == 2;
    cJSON_Delete(r);
    if (!listed)
      t_sleep_ms(50);
  }
  CU_ASSERT(listed);
  r = OK(&k.c[1], "{\"cmd\":\"info\"}");
  CU_ASSERT(t_resp_str_is(r, "node", "n1"));
  cJSON_Delete(r);
  /* The figures: MOVED answers counted (also by code), groups owned, the lease, etcd. */
  char *page = NULL;
  CU_ASSERT_EQUAL(t_http_get(k.d[1].http_port, "/metrics", &page), 200);
  CU_ASSERT(page_metric(page, "scened_cluster_moved_total") >= 17 * 1);
  CU_ASSERT(page_metric(page, "scened_cluster_groups_owned") == 1);
  CU_ASSERT(page_metric(page, "scened_cluster_registered") == 1);
  CU_ASSERT(page_metric(page, "scened_cluster_lease_renewals_total") >= 0);
  CU_ASSERT(page_metric(page, "scened_cluster_lease_remaining_seconds") > 0);
  CU_ASSERT(page_metric(page, "scened_etcd_request_seconds_count") > 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(page, "scened_command_errors_total{code=\"MOVED\"}"));
  free(page);
  page = NULL;
  CU_ASSERT_EQUAL(t_http_get(k.d[2].http_port, "/metrics", &page), 200);
  CU_ASSERT(page_metric(page, "scened_etcd_failovers_total") >= 1); /* its dead first endpoint */
  free(page);
  page = NULL;
  CU_ASSERT_EQUAL(t_http_get(k.d[0].http_port, "/readyz", &page), 200);
  free(page);
  cluster_stop(&k);
}

/* scenectl and the Python client follow MOVED: asked on a daemon that does not own the world,
 * they get the answer. */
static void test_scenectl_non_owner(void) {
  START_CLUSTER(k, NULL);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"ctl.main\"}");
  OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"ctl.main\",\"name\":\"car\"}");
  const char *bin = getenv("SCENECTL_BIN") ? getenv("SCENECTL_BIN") : "build/scenectl";
  char port[16];
  snprintf(port, sizeof port, "%d", k.d[1].port);
  const char *args[] = {"--port", port, "transform.find", "world=ctl.main", "path=car", NULL};
  t_proc p;
  CU_ASSERT_FATAL(t_proc_start(&p, bin, args, NULL, NULL, 0));
  int rc = t_proc_wait(&p, 10000);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.out), "\"entity\""));
  if (rc != 0)
    t_report_text("scenectl", text_str(&p.err));
  t_proc_free(&p);
  /* The Python client as well (next to the daemon's binary, or from the working directory). */
  char script[512];
  const char *bin_dir = t_daemon_bin(), *slash = strrchr(bin_dir, '/');
  snprintf(script, sizeof script, "%.*s/../scripts/scened_client.py",
           slash ? (int)(slash - bin_dir) : 1, slash ? bin_dir : ".");
  if (access(script, R_OK) != 0)
    snprintf(script, sizeof script, "scripts/scened_client.py");
  const char *py[] = {script, "--port", port, "transform.find", "world=ctl.main", "path=car", NULL};
  CU_ASSERT_FATAL(t_proc_start(&p, "/usr/bin/python3", py, NULL, NULL, 0));
  rc = t_proc_wait(&p, 10000);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.out), "\"entity\""));
  if (rc != 0)
    t_report_text("python client", text_str(&p.err));
  t_proc_free(&p);
  cluster_stop(&k);
}

/* Asks daemon i to create world with "node": place until the answer is what is wanted (the
 * nodes' published figures take a moment to reach every daemon): ok on node want, or (moved)
 * MOVED to want. */
static bool placed_at(cluster *k, int i, const char *world, const char *place, bool moved,
                      const char *want) {
  long deadline = t_now_ms() + 8000;
  while (t_now_ms() < deadline) {
    cJSON *r =
        CALL(&k->c[i], "{\"cmd\":\"world.create\",\"world\":\"%s\",\"node\":\"%s\"}", world, place);
    bool got = moved ? t_resp_str_is(error_of(r), "code", "MOVED") &&
                           t_resp_str_is(error_of(r), "node", want)
                     : t_resp_ok(r) && t_resp_str_is(r, "node", want);
    bool created = t_resp_ok(r);
    if (!got && created)
      CHECK(got, r); /* created elsewhere than wanted: there is no going back */
    cJSON_Delete(r);
    if (got || created)
      return got;
    t_sleep_ms(100);
  }
  return false;
}

/* world.create with "node": auto places a new group on the node with the fewest transforms,
 * then the fewest worlds, then the smallest name; a node's name sends it there. */
static void test_placement_auto(void) {
  START_CLUSTER(k, NULL);
  /* All empty: n0, the smallest name. */
  CU_ASSERT(placed_at(&k, 0, "p0", "auto", false, "n0"));
  OKD(&k.c[0], "{\"cmd\":\"entity.create\",\"count\":1}");
  for (int i = 0; i < 5; i++)
    OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"p0\"}");
  OKD(&k.c[1], "{\"cmd\":\"world.create\",\"world\":\"p1\"}");
  /* Once n2 has heard of both: n2 (no world) before n1 (one world, no transform). */
  CU_ASSERT(placed_at(&k, 2, "pa", "auto", false, "n2"));
  /* Now n1 and n2 tie (no transform, one world): n1 by name; n0 answers MOVED to it, and n1
   * places it on itself. */
  CU_ASSERT(placed_at(&k, 0, "pb", "auto", true, "n1"));
  CU_ASSERT(placed_at(&k, 1, "pb", "auto", false, "n1"));
  CU_ASSERT(placed_at(&k, 0, "pc", "n2", true, "n2"));
  ERR(&k.c[0], "NOT_FOUND", "{\"cmd\":\"world.create\",\"world\":\"pd\",\"node\":\"nobody\"}");
  CU_ASSERT(placed_at(&k, 2, "pc", "n2", false, "n2"));
  cluster_stop(&k);
}

static int cmp_ull(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
  return x < y ? -1 : x > y;
}

/* Entity ids are unique across the cluster: each daemon hands out ids from its own ranges. */
static void test_unique_entity_ids(void) {
  START_CLUSTER(k, NULL);
  enum { PER = 300, CREATES = 40 };
  unsigned long long *ids = calloc(NODES * (PER + CREATES), sizeof *ids);
  size_t n = 0;
  for (int i = 0; i < NODES; i++) {
    cJSON *r = OK(&k.c[i], "{\"cmd\":\"entity.create\",\"count\":%d}", PER);
    const cJSON *id, *list = cJSON_GetObjectItemCaseSensitive(r, "entities");
    cJSON_ArrayForEach(id, list) ids[n++] = (unsigned long long)id->valuedouble;
    cJSON_Delete(r);
    OKD(&k.c[i], "{\"cmd\":\"world.create\",\"world\":\"u%d\"}", i);
    for (int j = 0; j < CREATES; j++) {
      r = OK(&k.c[i], "{\"cmd\":\"transform.create\",\"world\":\"u%d\"}", i);
      ids[n++] = t_resp_id(r, "entity");
      cJSON_Delete(r);
    }
  }
  CU_ASSERT_EQUAL(n, NODES * (PER + CREATES));
  qsort(ids, n, sizeof *ids, cmp_ull);
  size_t dups = 0;
  for (size_t i = 1; i < n; i++)
    dups += ids[i] == ids[i - 1] || ids[i] == 0;
  CU_ASSERT_EQUAL(dups, 0);
  free(ids);
  cluster_stop(&k);
}

/* ---- moves --------------------------------------------------------------------------------- */

/* world.move with a subscriber and writes racing it: every write answered ok before the
 * hand-off is on the new owner (the oks are a prefix, the rest MOVED or UNAVAILABLE), the
 * subscriber gets moved, and the old owner answers MOVED from then on. */
static void test_move_with_subscribers_and_writes(void) {
  START_CLUSTER(k, NULL);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"m.a\"}");
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"m.b\"}");
  cJSON *r = OK(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"m.a\",\"name\":\"x\"}");
  unsigned long long e = t_resp_id(r, "entity");
  cJSON_Delete(r);
  t_client sub, writer, mover;
  CONNECT_FATAL(&sub, k.d[0].port);
  CONNECT_FATAL(&writer, k.d[0].port);
  CONNECT_FATAL(&mover, k.d[0].port);
  t_client_keep_events(&sub);
  r = OK(&sub, "{\"cmd\":\"subscribe\",\"world\":\"m.a\"}");
  double sid = t_resp_num(r, "sub");
  cJSON_Delete(r);
  /* Writes go in chunks while the move runs, so some land before the hand-off and some
   * after it. */
  enum { CHUNK = 20, MAX_WRITES = 4000 };
  int sent = 0, answered = 0, last_ok = 0, oks = 0, refused = 0;
  bool prefix = true, move_sent = false;
  cJSON *m = NULL;
  int after_move = 0;
  long deadline0 = t_now_ms() + 20000;
  while (sent < MAX_WRITES && after_move < 5 && t_now_ms() < deadline0) {
    text batch = {0};
    for (int i = 0; i < CHUNK; i++)
      text_addf(&batch,
                "{\"cmd\":\"transform.set_local\",\"world\":\"m.a\",\"entity\":%llu,\"t\":[%d,"
                "0,0]}\n",
                e, ++sent);
    t_client_send_raw(&writer, batch.s, batch.len);
    text_free(&batch);
    if (!move_sent && sent >= 200) {
      t_client_send(&mover, "{\"cmd\":\"world.move\",\"world\":\"m.a\",\"to\":\"n1\"}");
      move_sent = true;
    }
    if (move_sent && !m)
      m = t_recv_object(&mover, 1);
    if (m)
      after_move++;
    /* Read what has been answered so far. */
    while (answered < sent) {
      cJSON *w = t_recv_object(&writer, answered + 4 * CHUNK < sent ? T_RESPONSE_MS : 1);
      if (!w)
        break;
      answered++;
      if (t_resp_ok(w)) {
        prefix &= refused == 0;
        last_ok = answered;
        oks++;
      } else {
        const char *code = t_resp_code(w);
        CHECK(!strcmp(code, "MOVED") || !strcmp(code, "UNAVAILABLE"), w);
        refused++;
      }
      cJSON_Delete(w);
    }
  }
  while (answered < sent) {
    cJSON *w = t_recv_object(&writer, T_RESPONSE_MS);
    if (!w) {
      CU_FAIL("every write is answered");
      break;
    }
    answered++;
    if (t_resp_ok(w)) {
      prefix &= refused == 0;
      last_ok = answered;
      oks++;
    } else {
      refused++;
    }
    cJSON_Delete(w);
  }
  if (!m)
    m = t_recv_object(&mover, T_RESPONSE_MS);
  CHECK(t_resp_ok(m), m);
  cJSON_Delete(m);
  CU_ASSERT(oks > 0 && refused > 0);
  CU_ASSERT(prefix);
  fprintf(stderr, "  move: %d writes ok before the hand-off, %d refused\n", oks, refused);
  /* The subscriber's stream ends with moved, naming the new owner. */
  bool moved_event = false;
  long deadline = t_now_ms() + 5000;
  while (!moved_event && t_now_ms() < deadline) {
    cJSON *ev = t_next_event(&sub, 200);
    if (ev && t_resp_str_is(ev, "event", "moved")) {
      char addr[64];
      snprintf(addr, sizeof addr, "127.0.0.1:%d", k.d[1].port);
      CHECK(t_resp_num(ev, "sub") == sid && t_resp_str_is(ev, "world", "m.a") &&
                t_resp_str_is(ev, "node", "n1") && t_resp_str_is(ev, "addr", addr),
            ev);
      moved_event = true;
    }
    cJSON_Delete(ev);
  }
  CU_ASSERT(moved_event);
  ERR(&sub, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%g}", sid);
  /* The old owner sends both worlds of the group to n1; n1 has every acknowledged write. */
  for (int i = 0; i < 2; i++) {
    r = CALL(&k.c[0], "{\"cmd\":\"transform.get\",\"world\":\"m.%c\",\"entity\":%llu}", "ab"[i], e);
    CHECK(t_resp_str_is(error_of(r), "code", "MOVED") && t_resp_str_is(error_of(r), "node", "n1"),
          r);
    cJSON_Delete(r);
  }
  r = OK(&k.c[1], "{\"cmd\":\"transform.get\",\"world\":\"m.a\",\"entity\":%llu}", e);
  const cJSON *local = cJSON_GetObjectItemCaseSensitive(r, "local");
  double x = cJSON_GetArraySize(local) == 16 ? cJSON_GetArrayItem(local, 12)->valuedouble : -1;
  CU_ASSERT_EQUAL(x, last_ok);
  CU_ASSERT(t_resp_str_is(r, "name", "x"));
  cJSON_Delete(r);
  OKD(&k.c[1], "{\"cmd\":\"world.list\"}");
  ERR(&k.c[1], "NOT_FOUND", "{\"cmd\":\"transform.find\",\"world\":\"m.b\",\"path\":\"none\"}");
  /* Moves to nowhere, and to the owner itself. */
  ERR(&k.c[1], "NOT_FOUND", "{\"cmd\":\"world.move\",\"world\":\"m.a\",\"to\":\"nobody\"}");
  OKD(&k.c[1], "{\"cmd\":\"world.move\",\"world\":\"m.a\",\"to\":\"n1\"}");
  /* And back, through the client's own connection. */
  OKD(&k.c[1], "{\"cmd\":\"world.move\",\"world\":\"m.b\",\"to\":\"n2\"}");
  r = OK(&k.c[2], "{\"cmd\":\"transform.get\",\"world\":\"m.a\",\"entity\":%llu}", e);
  cJSON_Delete(r);
  t_client_close(&sub);
  t_client_close(&writer);
  t_client_close(&mover);
  cluster_stop(&k);
}

/* ---- history across a move ------------------------------------------------------------------ */

/* The answers to lines (count requests, each with "id": its index), sent a few dozen at a
 * time, each as compact JSON without its id (caller frees them and the array). */
static char **answers_to(t_client *c, const char *const *lines, int count) {
  char **out = calloc((size_t)count, sizeof *out);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  for (int from = 0; from < count; from += 40) {
    int to = from + 40 < count ? from + 40 : count;
    text b = {0};
    for (int i = from; i < to; i++)
      text_addf(&b, "%s\n", lines[i]);
    t_client_send_raw(c, b.s, b.len);
    text_free(&b);
    for (int i = from; i < to; i++) {
      cJSON *r = t_recv_object(c, T_RESPONSE_MS);
      CU_ASSERT_PTR_NOT_NULL_FATAL(r);
      CHECK(t_resp_num(r, "id") == i, r);
      cJSON_DeleteItemFromObjectCaseSensitive(r, "id");
      out[i] = cJSON_PrintUnformatted(r);
      cJSON_Delete(r);
    }
  }
  return out;
}

static void answers_free(char **a, int count) {
  for (int i = 0; i < count; i++)
    cJSON_free(a[i]);
  free(a);
}

/* The window a refused tick's message names: "ticks A to B". */
static bool window_named(t_client *c, const char *w, unsigned long long e, double tick,
                         long *oldest, long *newest) {
  char *msg = NULL;
  bool ok = ERR_MESSAGE(c, "NOT_FOUND", &msg,
                        "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%g}",
                        w, e, tick);
  const char *at = msg ? strstr(msg, "is outside the history of world") : NULL;
  const char *ticks = at ? strstr(at, ": ticks ") : NULL;
  ok = ok && ticks && sscanf(ticks, ": ticks %ld to %ld", oldest, newest) == 2;
  if (!ok)
    fprintf(stderr, "  the refusal names no window: %s\n", msg ? msg : "(none)");
  free(msg);
  return ok;
}

static unsigned long long new_transform(t_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static unsigned long long new_transform(t_client *c, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  cJSON *r = OK(c, "%s", line);
  unsigned long long e = r ? t_resp_id(r, "entity") : 0;
  cJSON_Delete(r);
  return e;
}

/* world.move carries each world's ticks and history: a world with history 600 moves over many
 * ticks on n0 (relinks, renames, creations and destructions among them, and changes in the
 * tick still open at the move), then moves to n1, which answers every read at every tick of
 * the window, whole and fractional, json and b64, exactly as n0 did; its ticks go on from
 * n0's, and world.list shows the window. Then n1 is killed: the daemon that takes the group
 * over starts its ticks at 1 with an empty history (the old ticks are outside the window). */
static void test_move_carries_history(void) {
  START_CLUSTER(k, "always");
  const char *W = "rw.main", *SIDE = "rw.side";
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"%s\",\"history\":600}", W);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"%s\"}", SIDE);
  t_client *c0 = &k.c[0];
  unsigned long long car = new_transform(
      c0, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"name\":\"car\",\"t\":[0,0,0]}", W);
  unsigned long long wheel = new_transform(c0,
                                           "{\"cmd\":\"transform.create\",\"world\":\"%s\","
                                           "\"parent\":%llu,\"name\":\"wheel\",\"t\":[1,0,0]}",
                                           W, car);
  unsigned long long prop = new_transform(c0,
                                          "{\"cmd\":\"transform.create\",\"world\":\"%s\","
                                          "\"name\":\"prop\",\"t\":[0,5,0],\"s\":2}",
                                          W);
  OKD(c0, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"entity\":%llu}", SIDE, car);
  unsigned long long box = 0, late = 0;
  long t = TICK_NOW(c0, W, car);
  enum { STEPS = 40 };
  for (int step = 1; step <= STEPS; step++) {
    t = TICK_PAST(c0, W, car, t + (step % 5 == 0 ? 3 : 0)); /* some ticks change nothing */
    double a = step * 0.3, b = step * 0.5;
    OKD(c0,
        "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[%d,0,%g],"
        "\"r\":[0,%.9g,0,%.9g]}",
        W, car, step, step * 0.25, sin(a), cos(a));
    if (step % 3 == 0) /* twice in one tick: the tick closes with the second */
      OKD(c0, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[%d,1,0]}",
          W, car, -step);
    OKD(c0,
        "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[1,0,0],"
        "\"r\":[%.9g,0,0,%.9g]}",
        W, wheel, sin(b), cos(b));
    if (step % 4 == 0)
      OKD(c0,
          "{\"cmd\":\"transform.set_world\",\"world\":\"%s\",\"entity\":%llu,\"t\":[%d,5,0],"
          "\"s\":[2,1,0.5]}",
          W, prop, step);
    switch (step) {
    case 6:
      box = new_transform(c0,
                          "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"parent\":%llu,"
                          "\"name\":\"box\",\"t\":[0,2,0]}",
                          W, car);
      break;
    case 10:
      OKD(c0, "{\"cmd\":\"transform.rename\",\"world\":\"%s\",\"entity\":%llu,\"name\":\"crate\"}",
          W, box);
      break;
    case 14:
      OKD(c0,
          "{\"cmd\":\"transform.link\",\"world\":\"%s\",\"entity\":%llu,\"parent\":%llu,"
          "\"keep\":\"world\"}",
          W, wheel, prop);
      break;
    case 18:
      OKD(c0, "{\"cmd\":\"transform.destroy\",\"world\":\"%s\",\"entity\":%llu}", W, box);
      break;
    case 22:
      late = new_transform(
          c0, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"name\":\"late\",\"t\":[7,7,7]}", W);
      break;
    case 26:
      OKD(c0, "{\"cmd\":\"transform.link\",\"world\":\"%s\",\"entity\":%llu,\"parent\":%llu}", W,
          wheel, car);
      break;
    case 30:
      OKD(c0, "{\"cmd\":\"transform.rename\",\"world\":\"%s\",\"entity\":%llu,\"name\":null}", W,
          prop);
      break;
    case 33:
      OKD(c0, "{\"cmd\":\"transform.destroy\",\"world\":\"%s\",\"entity\":%llu,\"recursive\":true}",
          W, late);
      break;
    default:
      break;
    }
  }
  long last = TICK_NOW(c0, W, car), side_before = TICK_NOW(c0, SIDE, car);
  /* changes in the tick still open at the move: no tick before the move shows them */
  OKD(c0, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[99,0,0]}", W,
      car);
  OKD(c0, "{\"cmd\":\"transform.rename\",\"world\":\"%s\",\"entity\":%llu,\"name\":\"moved\"}", W,
      wheel);

  /* Every tick of the window (and the ones around it), each entity, in both forms; relative;
   * fractional ticks. */
  unsigned long long ents[] = {car, wheel, prop, box, late};
  enum { NENTS = sizeof ents / sizeof *ents };
  int cap = (int)(last + 3) * (NENTS + 1) + 64, n = 0;
  char **lines = calloc((size_t)cap, sizeof *lines);
  CU_ASSERT_PTR_NOT_NULL_FATAL(lines);
  for (long tick = 1; tick <= last; tick++) {
    char line[300];
    for (int i = 0; i < NENTS && n < cap; i++) {
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld,"
               "\"id\":%d}",
               W, ents[i], tick, n);
      lines[n++] = strdup(line);
    }
    if (n < cap) {
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.relative\",\"world\":\"%s\",\"entity\":%llu,\"to\":%llu,"
               "\"tick\":%ld,\"id\":%d}",
               W, wheel, car, tick, n);
      lines[n++] = strdup(line);
    }
    if (tick % 5 == 0 && tick < last && n + 2 <= cap) {
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld.5,"
               "\"trs\":true,\"id\":%d}",
               W, car, tick, n);
      lines[n++] = strdup(line);
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.relative\",\"world\":\"%s\",\"entity\":%llu,\"to\":%llu,"
               "\"tick\":%ld.25,\"id\":%d}",
               W, wheel, prop, tick, n);
      lines[n++] = strdup(line);
    }
  }
  t_client b64;
  CONNECT_FATAL(&b64, k.d[0].port);
  OKD(&b64, "{\"cmd\":\"hello\",\"matrices\":\"b64\"}");
  char **json_before = answers_to(c0, (const char *const *)lines, n);
  char **b64_before = answers_to(&b64, (const char *const *)lines, n);
  t_client_close(&b64);
  int found = 0;
  for (int i = 0; i < n; i++)
    found += strstr(json_before[i], "\"ok\":true") != NULL;
  CU_ASSERT(found > n / 2);
  long old_oldest = -1, old_newest = -1;
  CU_ASSERT_TRUE(window_named(c0, W, car, 0, &old_oldest, &old_newest));
  CU_ASSERT_EQUAL(old_oldest, 1);

  /* The move. */
  OKD(c0, "{\"cmd\":\"world.move\",\"world\":\"%s\",\"to\":\"n1\"}", W);
  cJSON *r = CALL(c0, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", W, car);
  CHECK(t_resp_str_is(error_of(r), "code", "MOVED"), r);
  cJSON_Delete(r);
  t_client *c1 = &k.c[1];
  CONNECT_FATAL(&b64, k.d[1].port);
  OKD(&b64, "{\"cmd\":\"hello\",\"matrices\":\"b64\"}");
  char **json_after = answers_to(c1, (const char *const *)lines, n);
  char **b64_after = answers_to(&b64, (const char *const *)lines, n);
  int differ = 0;
  for (int i = 0; i < n; i++) {
    bool same =
        strcmp(json_before[i], json_after[i]) == 0 && strcmp(b64_before[i], b64_after[i]) == 0;
    if (!same && differ++ < 3)
      fprintf(stderr, "  %s\n  before the move: %s\n  after it:        %s\n", lines[i],
              json_before[i], json_after[i]);
  }
  CU_ASSERT_EQUAL(differ, 0);
  fprintf(stderr,
          "  move with history: %d reads over ticks 1 to %ld, %d of them found, %d differ\n", n,
          last, found, differ);
  /* The same window, still open at tick 1; ticks go on from n0's; the open tick's changes are
   * there and in no tick before. */
  long new_oldest = -1, new_newest = -1;
  CU_ASSERT_TRUE(window_named(c1, W, car, 0, &new_oldest, &new_newest));
  CU_ASSERT_EQUAL(new_oldest, old_oldest);
  CU_ASSERT(new_newest >= old_newest);
  long now1 = TICK_NOW(c1, W, car);
  CU_ASSERT(now1 >= last);
  CU_ASSERT(TICK_NOW(c1, SIDE, car) >= side_before);
  r = OK(c1, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", W, wheel);
  CU_ASSERT(t_resp_str_is(r, "name", "moved"));
  cJSON_Delete(r);
  r = OK(c1, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld}", W, wheel,
         last);
  CU_ASSERT(t_resp_str_is(r, "name", "wheel"));
  cJSON_Delete(r);
  /* now1 may be the tick n0 ran last, with the 99 still in the tick open at the move; t1 ran
   * on n1, after it and before the 500 */
  long t1 = TICK_PAST(c1, W, car, now1);
  OKD(c1, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[500,0,0]}", W,
      car);
  long t2 = TICK_PAST(c1, W, car, t1);
  r = OK(c1, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld}", W, car,
         t2);
  const cJSON *local = cJSON_GetObjectItemCaseSensitive(r, "local");
  CU_ASSERT(cJSON_GetArraySize(local) == 16 && cJSON_GetArrayItem(local, 12)->valuedouble == 500);
  cJSON_Delete(r);
  r = OK(c1, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld}", W, car,
         t1);
  local = cJSON_GetObjectItemCaseSensitive(r, "local");
  CU_ASSERT(cJSON_GetArraySize(local) == 16 && cJSON_GetArrayItem(local, 12)->valuedouble == 99);
  cJSON_Delete(r);
  char **again = answers_to(c1, (const char *const *)lines, n);
  int still = 0;
  for (int i = 0; i < n; i++)
    still += strcmp(json_before[i], again[i]) == 0;
  CU_ASSERT_EQUAL(still, n);
  answers_free(again, n);
  r = OK(c1, "{\"cmd\":\"world.list\"}");
  int listed = 0;
  for (const cJSON *w = cJSON_GetObjectItemCaseSensitive(r, "worlds")->child; w; w = w->next) {
    if (t_resp_str_is(w, "name", W))
      listed += CHECK(t_resp_num(w, "history") == 600, w);
    if (t_resp_str_is(w, "name", SIDE))
      listed += CHECK(t_resp_num(w, "history") == 0, w);
  }
  CU_ASSERT_EQUAL(listed, 2);
  cJSON_Delete(r);
  CU_ASSERT_TRUE(t_daemon_log_contains(&k.d[1], "histories=1 "));
  t_client_close(&b64);
  answers_free(json_before, n);
  answers_free(b64_before, n);
  answers_free(json_after, n);
  answers_free(b64_after, n);
  for (int i = 0; i < n; i++)
    free(lines[i]);
  free(lines);

  /* kill -9 of n1: the group is taken over with its worlds, its window (600) and no past. */
  long before_kill = TICK_NOW(c1, W, car);
  kill(k.d[1].pid, SIGKILL);
  t_daemon_wait(&k.d[1], 5000);
  k.up[1] = false;
  t_client_close(&k.c[1]);
  k.connected[1] = false;
  int at = -1;
  char line[200];
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", W,
           car);
  r = wait_ok_anywhere(&k, line, TTL_MS + 3000 + 2000, &at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  const cJSON *lw = cJSON_GetObjectItemCaseSensitive(r, "local");
  CU_ASSERT(cJSON_GetArraySize(lw) == 16 && cJSON_GetArrayItem(lw, 12)->valuedouble == 500);
  cJSON_Delete(r);
  long fresh = TICK_PAST(&k.c[at], W, car, 0);
  CU_ASSERT(fresh < before_kill);
  long o = -1, nw = -1;
  CU_ASSERT_TRUE(window_named(&k.c[at], W, car, (double)before_kill, &o, &nw));
  CU_ASSERT(o == 1 && nw < before_kill);
  r = OK(&k.c[at], "{\"cmd\":\"world.list\"}");
  for (const cJSON *w = cJSON_GetObjectItemCaseSensitive(r, "worlds")->child; w; w = w->next)
    if (t_resp_str_is(w, "name", W))
      CHECK(t_resp_num(w, "history") == 600, w);
  cJSON_Delete(r);
  fprintf(stderr, "  takeover by n%d: ticks start over (now %ld, %ld before the kill)\n", at, fresh,
          before_kill);
  cluster_stop(&k);
}

/* ---- failures ------------------------------------------------------------------------------ */

/* Sends count transform.create requests named prefix<i> pipelined; returns how many were
 * answered ok (their indices set in ok[]), reading until the connection ends or times out. */
static int write_names(t_client *c, const char *world, const char *prefix, int from, int count,
                       bool *ok, int timeout_ms) {
  text b = {0};
  for (int i = from; i < from + count; i++)
    text_addf(&b, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"name\":\"%s%d\",\"id\":%d}\n",
              world, prefix, i, i);
  t_client_send_raw(c, b.s, b.len);
  text_free(&b);
  int oks = 0;
  for (int i = 0; i < count; i++) {
    cJSON *r = t_client_recv_json(c, timeout_ms);
    if (!r)
      break;
    int id = (int)t_resp_num(r, "id");
    if (t_resp_ok(r) && id >= from && id < from + count) {
      ok[id] = true;
      oks++;
    }
    cJSON_Delete(r);
  }
  return oks;
}

/* kill -9 of an owner while a client writes under --fsync always: another daemon takes the
 * group over within the TTL plus 3 s, and every write answered ok is there. */
static void test_kill9_takeover(void) {
  START_CLUSTER(k, "always");
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"kill.main\"}");
  enum { ROUNDS = 20, PER = 50 };
  bool ok[ROUNDS * PER + PER] = {0};
  t_client w;
  CONNECT_FATAL(&w, k.d[0].port);
  int oks = 0;
  for (int round = 0; round < ROUNDS; round++)
    oks += write_names(&w, "kill.main", "w", round * PER, PER, ok, T_RESPONSE_MS);
  /* The last round is in flight when the owner dies. */
  text b = {0};
  for (int i = ROUNDS * PER; i < ROUNDS * PER + PER; i++)
    text_addf(&b,
              "{\"cmd\":\"transform.create\",\"world\":\"kill.main\",\"name\":\"w%d\",\"id\":%d}\n",
              i, i);
  t_client_send_raw(&w, b.s, b.len);
  text_free(&b);
  kill(k.d[0].pid, SIGKILL);
  long killed = t_now_ms();
  t_daemon_wait(&k.d[0], 5000);
  k.up[0] = false;
  for (int i = 0; i < PER; i++) {
    cJSON *r = t_client_recv_json(&w, 200);
    if (!r)
      break;
    int id = (int)t_resp_num(r, "id");
    if (t_resp_ok(r) && id >= ROUNDS * PER) {
      ok[id] = true;
      oks++;
    }
    cJSON_Delete(r);
  }
  t_client_close(&w);
  t_client_close(&k.c[0]);
  k.connected[0] = false;
  int at = -1;
  cJSON *r =
      wait_ok_anywhere(&k, "{\"cmd\":\"transform.find\",\"world\":\"kill.main\",\"path\":\"w0\"}",
                       TTL_MS + 3000 + 2000, &at);
  long took = t_now_ms() - killed;
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  fprintf(stderr,
          "  kill -9: %d writes acknowledged; served by n%d again after %ld ms (TTL %d ms)\n", oks,
          at, took, TTL_MS);
  CU_ASSERT(took <= TTL_MS + 3000);
  int missing = 0;
  for (int i = 0; i < ROUNDS * PER + PER; i++) {
    if (!ok[i])
      continue;
    cJSON *f = t_client_call(
        &k.c[at], "{\"cmd\":\"transform.find\",\"world\":\"kill.main\",\"path\":\"w%d\"}", i);
    if (!t_resp_ok(f) && missing++ < 3)
      t_report("an acknowledged write is missing", f);
    cJSON_Delete(f);
  }
  CU_ASSERT_EQUAL(missing, 0);
  cluster_stop(&k);
}

/* SIGSTOP of an owner past its TTL, then SIGCONT: once another daemon has the group, the old
 * owner answers no ok for it, and the new owner holds nothing the old one did not acknowledge. */
static void test_sigstop_fencing(void) {
  START_CLUSTER(k, "always");
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"stop.main\"}");
  OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"stop.main\",\"name\":\"before\"}");
  t_client w;
  CONNECT_FATAL(&w, k.d[0].port);
  kill(k.d[0].pid, SIGSTOP);
  int at = -1;
  cJSON *r = wait_ok_anywhere(
      &k, "{\"cmd\":\"transform.find\",\"world\":\"stop.main\",\"path\":\"before\"}", TTL_MS + 8000,
      &at);
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);
  if (at > 0) {
    OKD(&k.c[at], "{\"cmd\":\"transform.create\",\"world\":\"stop.main\",\"name\":\"after\"}");
  }
  /* Writes that reach the stopped daemon: read when it wakes, never acknowledged. */
  text b = {0};
  for (int i = 0; i < 20; i++)
    text_addf(&b, "{\"cmd\":\"transform.create\",\"world\":\"stop.main\",\"name\":\"stale%d\"}\n",
              i);
  t_client_send_raw(&w, b.s, b.len);
  text_free(&b);
  kill(k.d[0].pid, SIGCONT);
  int answered = 0, acked = 0;
  for (int i = 0; i < 20; i++) {
    cJSON *x = t_client_recv_json(&w, 5000);
    if (!x)
      break; /* closed: acknowledges nothing */
    answered++;
    if (t_resp_ok(x)) {
      acked++;
      t_report("a stale owner acknowledged", x);
    }
    cJSON_Delete(x);
  }
  CU_ASSERT_EQUAL(acked, 0);
  fprintf(stderr, "  SIGCONT: %d of 20 stale writes answered (none ok), the rest unanswered\n",
          answered);
  t_client_close(&w);
  /* Asked again, it does not serve the group either. */
  r = CALL(&k.c[0],
           "{\"cmd\":\"transform.create\",\"world\":\"stop.main\",\"name\":\"stale-late\"}");
  CHECK(!t_resp_ok(r), r);
  cJSON_Delete(r);
  if (at > 0) {
    for (int i = 0; i < 20; i++) {
      r = CALL(&k.c[at],
               "{\"cmd\":\"transform.find\",\"world\":\"stop.main\",\"path\":\"stale%d\"}", i);
      CHECK(t_resp_str_is(error_of(r), "code", "NOT_FOUND"), r);
      cJSON_Delete(r);
    }
    ERR(&k.c[at], "NOT_FOUND",
        "{\"cmd\":\"transform.find\",\"world\":\"stop.main\",\"path\":\"stale-late\"}");
    OKD(&k.c[at], "{\"cmd\":\"transform.find\",\"world\":\"stop.main\",\"path\":\"after\"}");
  }
  cluster_stop(&k);
}

/* etcd stopped for longer than the TTL: the owners fence themselves (UNAVAILABLE for their
 * worlds), and serve again once etcd is back. */
static void test_etcd_down_fences(void) {
  START_CLUSTER(k, NULL);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"down.main\"}");
  OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"down.main\",\"name\":\"kept\"}");
  etcd_stop(&k.e, SIGKILL);
  long stopped = t_now_ms();
  bool fenced = false;
  long fenced_at = 0;
  while (!fenced && t_now_ms() < stopped + TTL_MS + 2000) {
    cJSON *r =
        CALL(&k.c[0], "{\"cmd\":\"transform.find\",\"world\":\"down.main\",\"path\":\"kept\"}");
    fenced = t_resp_str_is(error_of(r), "code", "UNAVAILABLE");
    if (!fenced)
      CHECK(t_resp_ok(r), r);
    cJSON_Delete(r);
    if (!fenced)
      t_sleep_ms(20);
  }
  fenced_at = t_now_ms() - stopped;
  CU_ASSERT(fenced);
  CU_ASSERT(fenced_at < TTL_MS);
  /* Down past the TTL: still fenced. */
  while (t_now_ms() < stopped + TTL_MS + 500)
    ERR(&k.c[0], "UNAVAILABLE",
        "{\"cmd\":\"transform.find\",\"world\":\"down.main\",\"path\":\"kept\"}");
  CU_ASSERT_FATAL(etcd_start(&k.e));
  long back = t_now_ms();
  cJSON *r = wait_ok_anywhere(
      &k, "{\"cmd\":\"transform.find\",\"world\":\"down.main\",\"path\":\"kept\"}", 15000, NULL);
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);
  fprintf(stderr,
          "  etcd down: fenced after %ld ms (TTL %d); served again %ld ms after etcd returned\n",
          fenced_at, TTL_MS, t_now_ms() - back);
  CU_ASSERT(wait_registered(&k, NODES));
  cluster_stop(&k);
}

/* SIGTERM saves and releases each group at once: another daemon serves it within a second. */
static void test_sigterm_release(void) {
  START_CLUSTER(k, NULL);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"term.main\"}");
  OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"term.main\",\"name\":\"kept\"}");
  t_client_close(&k.c[0]);
  k.connected[0] = false;
  kill(k.d[0].pid, SIGTERM);
  long t0 = t_now_ms();
  int at = -1;
  cJSON *r = wait_ok_anywhere(
      &k, "{\"cmd\":\"transform.find\",\"world\":\"term.main\",\"path\":\"kept\"}", 5000, &at);
  long took = t_now_ms() - t0;
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);
  fprintf(stderr, "  SIGTERM: served by n%d %ld ms after the signal\n", at, took);
  CU_ASSERT(took < 1000);
  int status = t_daemon_wait(&k.d[0], 5000);
  k.up[0] = false;
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cluster_stop(&k);
}

/* The whole cluster stopped and started again: every group is claimed exactly once, from the
 * data directory, with everything in it. */
static void test_whole_cluster_restart(void) {
  START_CLUSTER(k, NULL);
  enum { GROUPS = 6 };
  for (int g = 0; g < GROUPS; g++) {
    OKD(&k.c[g % NODES], "{\"cmd\":\"world.create\",\"world\":\"r%d.main\"}", g);
    OKD(&k.c[g % NODES], "{\"cmd\":\"transform.create\",\"world\":\"r%d.main\",\"name\":\"t%d\"}",
        g, g);
  }
  for (int i = 0; i < NODES; i++)
    node_stop(&k, i, SIGTERM);
  for (int i = 0; i < NODES; i++)
    CU_ASSERT_FATAL(node_start(&k, i));
  CU_ASSERT(wait_registered(&k, NODES));
  for (int g = 0; g < GROUPS; g++) {
    char line[160];
    snprintf(line, sizeof line,
             "{\"cmd\":\"transform.find\",\"world\":\"r%d.main\",\"path\":\"t%d\"}", g, g);
    cJSON *r = wait_ok_anywhere(&k, line, 10000, NULL);
    CU_ASSERT_PTR_NOT_NULL(r);
    cJSON_Delete(r);
  }
  for (int g = 0; g < GROUPS; g++) {
    char needle[64];
    snprintf(needle, sizeof needle, "group=r%d old=", g);
    int claims = 0;
    for (int i = 0; i < NODES; i++) {
      char *log = t_read_file(k.d[i].log_path);
      for (const char *p = log ? strstr(log, needle) : NULL; p; p = strstr(p + 1, needle))
        claims += strstr(p, " new=n") && strncmp(strstr(p, " new=") + 5, "n", 1) == 0 &&
                  (!strchr(p, '\n') || strstr(p, " new=") < strchr(p, '\n'));
      free(log);
    }
    CU_ASSERT_EQUAL(claims, 1);
  }
  cluster_stop(&k);
}

/* ---- TLS and an access list in a cluster ------------------------------------------------- */

/* Writes "HASH RIGHTS PREFIXES" for each "token rights prefixes" rule into path. */
static bool write_acl_file(const char *path, const char *const *rules) {
  FILE *f = fopen(path, "w");
  if (!f)
    return false;
  for (int i = 0; rules[i]; i++) {
    const char *space = strchr(rules[i], ' ');
    unsigned char md[32];
    unsigned len = 0;
    EVP_Digest(rules[i], (size_t)(space - rules[i]), md, &len, EVP_sha256(), NULL);
    for (int b = 0; b < 32; b++)
      fprintf(f, "%02x", md[b]);
    fprintf(f, "%s\n", space);
  }
  return fclose(f) == 0;
}

/* How many worlds world.list with cluster answers on c; with prefix, how many of them start
 * with it, and in *others how many do not. */
static int listed(t_client *c, const char *prefix, int *others) {
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

/* Two daemons with TLS and one access list, each owning a group of each kind: world.list with
 * cluster shows a token only the worlds under its prefixes, also those of the other node; the
 * client library follows MOVED to the owner over TLS, with the same CA, and keeps its token and
 * matrix form there. */
static void test_tls_acl_cluster(void) {
  char certs[64], data[64], acl[128], ca[128], cert[128], key[128];
  CU_ASSERT_FATAL(t_make_certs(certs, sizeof certs));
  CU_ASSERT_FATAL(t_temp_dir(data, sizeof data, "cluster-tls"));
  snprintf(acl, sizeof acl, "%s/acl", certs);
  snprintf(ca, sizeof ca, "%s/ca.pem", certs);
  snprintf(cert, sizeof cert, "%s/server.pem", certs);
  snprintf(key, sizeof key, "%s/server.key", certs);
  static const char *const rules[] = {"op-token read,write,admin *", "game-token read,write game",
                                      NULL};
  CU_ASSERT_FATAL(write_acl_file(acl, rules));
  etcd e = {0};
  t_daemon d[2];
  t_client c[2];
  bool up[2] = {false, false}, connected[2] = {false, false};
  if (!etcd_start(&e)) {
    CU_FAIL("etcd started");
    goto out;
  }
  t_tls_files trust = {.ca = ca};
  for (int i = 0; i < 2; i++) {
    const char *args[] = {"--cluster",  e.url,         "--data", data,         "--node",
                          node_name(i), "--lease-ttl", TTL,      "--tls-cert", cert,
                          "--tls-key",  key,           "--acl",  acl,          NULL};
    up[i] = START(&d[i], args);
    connected[i] = up[i] && CONNECT_TLS(&c[i], d[i].port, &trust);
    if (!connected[i])
      goto out;
    OKD(&c[i], "{\"cmd\":\"hello\",\"token\":\"op-token\"}");
  }
  long deadline = t_now_ms() + 15000;
  bool both = false; /* each daemon registered, and knowing the other */
  while (!both && t_now_ms() < deadline) {
    both = true;
    for (int i = 0; i < 2; i++) {
      cJSON *r = t_client_call(&c[i], "{\"cmd\":\"cluster.nodes\"}");
      const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(r, "nodes");
      both &= cJSON_IsArray(nodes) && cJSON_GetArraySize(nodes) == 2;
      cJSON_Delete(r);
    }
    if (!both)
      t_sleep_ms(20);
  }
  CU_ASSERT_FATAL(both);
  OKD(&c[0], "{\"cmd\":\"world.create\",\"world\":\"game1.a\"}");
  OKD(&c[0], "{\"cmd\":\"world.create\",\"world\":\"ops1.a\"}");
  OKD(&c[1], "{\"cmd\":\"world.create\",\"world\":\"game2.b\"}");
  OKD(&c[1], "{\"cmd\":\"world.create\",\"world\":\"ops2.b\"}");
  cJSON *r = OK(&c[0], "{\"cmd\":\"transform.create\",\"world\":\"game1.a\",\"t\":[1,2,3]}");
  double ent = cJSON_GetObjectItemCaseSensitive(r, "entity")->valuedouble;
  cJSON_Delete(r);

  /* The game token on n1 sees game1.a (n0's) and game2.b, never ops*; the operator's token
   * sees all four, once n1 knows n0's worlds. */
  t_client g;
  if (!CONNECT_TLS(&g, d[1].port, &trust))
    goto out;
  OKD(&g, "{\"cmd\":\"hello\",\"token\":\"game-token\"}");
  int all = 0, game = 0, others = 0;
  deadline = t_now_ms() + 10000;
  while (all != 4 && t_now_ms() < deadline) {
    all = listed(&c[1], NULL, NULL);
    if (all != 4)
      t_sleep_ms(50);
  }
  CU_ASSERT_EQUAL(all, 4);
  game = listed(&g, "game", &others);
  CU_ASSERT_EQUAL(game, 2);
  CU_ASSERT_EQUAL(others, 0);
  /* A world outside the prefix is refused before any routing. */
  ERR(&g, "UNAUTHORIZED", "{\"cmd\":\"transform.find\",\"world\":\"ops1.a\",\"path\":\"x\"}");
  t_client_close(&g);

  /* The library, asked on n1 for n0's world, follows MOVED over TLS and says hello there with
   * the token and the b64 form. */
  scn_cli_options o = {.host = "127.0.0.1",
                       .port = d[1].port,
                       .token = "game-token",
                       .matrices = SCN_CLI_MATRICES_B64,
                       .tls_ca = ca};
  char err[256] = "";
  scn_cli *cli = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL(cli);
  if (cli) {
    char line[160];
    snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"game1.a\",\"entity\":%.0f}",
             ent);
    cJSON *resp = NULL;
    CU_ASSERT_EQUAL(scn_cli_call_line(cli, line, &resp), SCN_CLI_OK);
    float m[16];
    const cJSON *world = cJSON_GetObjectItemCaseSensitive(resp, "world");
    CU_ASSERT(cJSON_IsString(world)); /* b64 on the owner too */
    CU_ASSERT(scn_cli_matrix_get(world, m) == 0 && m[12] == 1 && m[13] == 2 && m[14] == 3);
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", d[0].port);
    CU_ASSERT_STRING_EQUAL(scn_cli_addr(cli), want);
    cJSON_Delete(resp);
    scn_cli_close(cli);
  } else {
    fprintf(stderr, "  connect: %s\n", err);
  }
  /* world.move over TLS, by the operator; the game token may not move. */
  ERR(&c[1], "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"nobody\"}");
  OKD(&c[1], "{\"cmd\":\"hello\",\"token\":\"game-token\"}");
  ERR(&c[1], "UNAUTHORIZED", "{\"cmd\":\"world.move\",\"world\":\"game2.b\",\"to\":\"n0\"}");
  OKD(&c[1], "{\"cmd\":\"hello\",\"token\":\"op-token\"}");
  OKD(&c[1], "{\"cmd\":\"world.move\",\"world\":\"game2.b\",\"to\":\"n0\"}");
  r = CALL(&c[1], "{\"cmd\":\"transform.find\",\"world\":\"game2.b\",\"path\":\"x\"}");
  CU_ASSERT(t_resp_str_is(error_of(r), "code", "MOVED") &&
            t_resp_str_is(error_of(r), "node", "n0"));
  cJSON_Delete(r);
out:
  for (int i = 0; i < 2; i++) {
    if (connected[i])
      t_client_close(&c[i]);
    if (up[i])
      t_daemon_stop(&d[i], SIGTERM, 10000);
  }
  etcd_stop(&e, SIGTERM);
  if (e.dir[0])
    t_remove_temp_dir(e.dir);
  t_remove_temp_dir(data);
  t_remove_temp_dir(certs);
}

/* A data directory written by a standalone daemon loads in a cluster: it is split into groups
 * once, with its ids and matrices. */
static void test_old_layout_migrates(void) {
  etcd e = {0};
  CU_ASSERT_FATAL(etcd_start(&e));
  char data[64];
  CU_ASSERT_FATAL(t_temp_dir(data, sizeof data, "data"));
  t_daemon d;
  t_client c;
  const char *plain[] = {"--data", data, "--fsync", "always", NULL};
  unsigned long long e1 = 0, e2 = 0, loose = 0;
  if (START_CONNECTED(&d, &c, plain)) {
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"old.a\"}");
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"other\"}");
    cJSON *r =
        OK(&c, "{\"cmd\":\"transform.create\",\"world\":\"old.a\",\"name\":\"p\",\"t\":[1,2,3]}");
    e1 = t_resp_id(r, "entity");
    cJSON_Delete(r);
    OKD(&c, "{\"cmd\":\"save\"}");
    /* After the snapshot, in the journal only. */
    r = OK(&c, "{\"cmd\":\"transform.create\",\"world\":\"other\",\"name\":\"q\",\"t\":[4,5,6]}");
    e2 = t_resp_id(r, "entity");
    cJSON_Delete(r);
    r = OK(&c, "{\"cmd\":\"entity.create\"}");
    loose =
        (unsigned long long)cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "entities"), 0)
            ->valuedouble;
    cJSON_Delete(r);
    t_client_close(&c);
    t_daemon_stop(&d, SIGKILL, 5000);
  }
  cluster k;
  memset(&k, 0, sizeof k);
  k.e = e;
  snprintf(k.data, sizeof k.data, "%s", data);
  for (int i = 0; i < NODES; i++)
    CU_ASSERT_FATAL(node_start(&k, i));
  CU_ASSERT(wait_registered(&k, NODES));
  char line[200];
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"old.a\",\"entity\":%llu}",
           e1);
  cJSON *r = wait_ok_anywhere(&k, line, 10000, NULL);
  CU_ASSERT(r && t_resp_str_is(r, "name", "p"));
  cJSON_Delete(r);
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"other\",\"entity\":%llu}",
           e2);
  r = wait_ok_anywhere(&k, line, 10000, NULL);
  const cJSON *local = cJSON_GetObjectItemCaseSensitive(r, "local");
  CU_ASSERT(r && cJSON_GetArraySize(local) == 16 &&
            cJSON_GetArrayItem(local, 14)->valuedouble == 6);
  cJSON_Delete(r);
  /* The loose entity lives on the node that migrated; new ids never collide with old ones. */
  int owners = 0;
  for (int i = 0; i < NODES; i++) {
    cJSON *x = CALL(&k.c[i], "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", loose);
    owners += t_resp_ok(x);
    cJSON_Delete(x);
    x = OK(&k.c[i], "{\"cmd\":\"entity.create\",\"count\":10}");
    const cJSON *id;
    cJSON_ArrayForEach(id, cJSON_GetObjectItemCaseSensitive(x, "entities")) {
      unsigned long long v = (unsigned long long)id->valuedouble;
      CU_ASSERT(v != e1 && v != e2 && v != loose);
    }
    cJSON_Delete(x);
  }
  CU_ASSERT_EQUAL(owners, 1);
  char path[128];
  snprintf(path, sizeof path, "%s/migrated/snapshot.scn", data);
  CU_ASSERT(access(path, F_OK) == 0);
  snprintf(path, sizeof path, "%s/snapshot.scn", data);
  CU_ASSERT(access(path, F_OK) != 0);
  cluster_stop(&k);
}

/* ---- bad input ----------------------------------------------------------------------------- */

static int run_scened(const char *const *args, text *err) {
  t_proc p;
  if (!t_proc_start(&p, t_daemon_bin(), args, NULL, NULL, 0))
    return -1;
  int rc = t_proc_wait(&p, 10000);
  text_add(err, text_str(&p.err), strlen(text_str(&p.err)));
  t_proc_free(&p);
  return rc;
}

/* --cluster without --data, or with a malformed URL: one line, exit 2. */
static void test_bad_flags(void) {
  const char *cases[][8] = {
      {"--cluster", "http://127.0.0.1:2379", "--listen", "127.0.0.1:0", "--http", "off", NULL},
      {"--cluster", "127.0.0.1:2379", "--data", "/tmp", "--http", "off", NULL},
      {"--cluster", "http://127.0.0.1:99999", "--data", "/tmp", "--http", "off", NULL},
      {"--cluster", "http://127.0.0.1:2379,", "--data", "/tmp", "--http", "off", NULL},
      {"--cluster", "http://127.0.0.1:2379", "--data", "/tmp", "--node", "a b", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    text err = {0};
    int rc = run_scened(cases[i], &err);
    CU_ASSERT_EQUAL(rc, 2);
    const char *s = text_str(&err);
    const char *nl = strchr(s, '\n');
    CU_ASSERT(nl && nl[1] == '\0');
    if (rc != 2)
      t_report_text("stderr", s);
    text_free(&err);
  }
}

/* etcd unreachable at start: the daemon keeps trying, /readyz is 503 and worlds answer
 * UNAVAILABLE; once etcd is there it registers and serves. */
static void test_etcd_late(void) {
  etcd e = {0};
  CU_ASSERT_FATAL(t_temp_dir(e.dir, sizeof e.dir, "etcd"));
  e.port = free_port();
  e.peer = free_port();
  snprintf(e.url, sizeof e.url, "http://127.0.0.1:%d", e.port);
  cluster k;
  memset(&k, 0, sizeof k);
  k.e = e;
  CU_ASSERT_FATAL(t_temp_dir(k.data, sizeof k.data, "data"));
  for (int i = 0; i < NODES; i++)
    CU_ASSERT_FATAL(node_start(&k, i));
  ERR(&k.c[0], "UNAVAILABLE", "{\"cmd\":\"world.create\",\"world\":\"late\"}");
  ERR(&k.c[1], "UNAVAILABLE", "{\"cmd\":\"transform.get\",\"world\":\"late\",\"entity\":1}");
  ERR(&k.c[2], "UNAVAILABLE", "{\"cmd\":\"entity.create\"}");
  OKD(&k.c[0], "{\"cmd\":\"ping\"}");
  char *resp = NULL;
  CU_ASSERT_EQUAL(t_http_get(k.d[0].http_port, "/readyz", &resp), 503);
  free(resp);
  CU_ASSERT(t_daemon_log_contains(&k.d[0], "cannot register yet"));
  CU_ASSERT_FATAL(etcd_start(&k.e));
  CU_ASSERT(wait_registered(&k, NODES));
  CU_ASSERT_EQUAL(t_http_get(k.d[0].http_port, "/readyz", &resp), 200);
  free(resp);
  cJSON *r = OK(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"late\"}");
  cJSON_Delete(r);
  cluster_stop(&k);
}

/* An owner's key and its deletion heard late: n0 owns a group and stops (SIGTERM revokes its
 * lease); n1, whose watch runs WATCH_DELAY_MS behind, claims the group by its sweep before it
 * hears of either. When they come, they are older than its claim and change nothing: it goes
 * on serving the group (it used to take the old delete for the loss of its own key, and then
 * could neither claim nor load the group again). */
static void test_late_delete(void) {
  cluster k;
  memset(&k, 0, sizeof k);
  CU_ASSERT_FATAL(etcd_start(&k.e));
  CU_ASSERT_FATAL(t_temp_dir(k.data, sizeof k.data, "data"));
  int port;
  pid_t proxy = serve_in_child(watch_delaying_proxy, k.e.port, &port);
  CU_ASSERT_FATAL(proxy > 0);
  snprintf(k.via[1], sizeof k.via[1], "http://127.0.0.1:%d", port);
  if (node_start(&k, 0) && node_start(&k, 1) && wait_registered(&k, 2)) {
    OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"late.main\"}");
    OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"late.main\",\"name\":\"kept\"}");
    long stopped = t_now_ms();
    node_stop(&k, 0, SIGTERM);
    const char *find = "{\"cmd\":\"transform.find\",\"world\":\"late.main\",\"path\":\"kept\"}";
    cJSON *r = wait_ok_anywhere(&k, find, 5000, NULL);
    CU_ASSERT_PTR_NOT_NULL(r);
    cJSON_Delete(r);
    /* Until the late events have surely come, and a sweep after them. */
    int refused = 0;
    while (t_now_ms() < stopped + WATCH_DELAY_MS + 1500) {
      r = CALL(&k.c[1], "%s", find);
      refused += !t_resp_ok(r);
      cJSON_Delete(r);
      t_sleep_ms(50);
    }
    CU_ASSERT_EQUAL(refused, 0);
    CU_ASSERT_FALSE(t_daemon_log_contains(&k.d[1], "group lost"));
  } else {
    CU_FAIL("two daemons registered, one behind the proxy");
  }
  kill(proxy, SIGKILL);
  t_child_wait(proxy, 5000);
  cluster_stop(&k);
}

/* A fake gateway that answers every request with something malformed, in turn: the daemons
 * never crash, never serve (so never acknowledge) a group, and stop cleanly. */
static void test_fake_gateway_malformed(void) {
  int port;
  pid_t fake = serve_in_child(fake_gateway, 0, &port);
  CU_ASSERT_FATAL(fake > 0);
  cluster k;
  memset(&k, 0, sizeof k);
  snprintf(k.e.url, sizeof k.e.url, "http://127.0.0.1:%d", port);
  CU_ASSERT_FATAL(t_temp_dir(k.data, sizeof k.data, "data"));
  for (int i = 0; i < NODES; i++)
    CU_ASSERT_FATAL(node_start(&k, i));
  long until = t_now_ms() + 2500;
  while (t_now_ms() < until) {
    for (int i = 0; i < NODES; i++) {
      cJSON *r = CALL(&k.c[i], "{\"cmd\":\"transform.create\",\"world\":\"a\"}");
      CHECK(t_resp_str_is(error_of(r), "code", "UNAVAILABLE"), r);
      cJSON_Delete(r);
    }
    t_sleep_ms(50);
  }
  for (int i = 0; i < NODES; i++) {
    CU_ASSERT(kill(k.d[i].pid, 0) == 0);
    t_client_close(&k.c[i]);
    k.connected[i] = false;
    STOP_OK(&k.d[i], 10000);
    k.up[i] = false;
  }
  kill(fake, SIGKILL);
  t_child_wait(fake, 5000);
  t_remove_temp_dir(k.data);
}

int t_register_cluster(void) {
  static const t_test tests[] = {
      {"bad flags: one line, exit 2", test_bad_flags},
      {"routing: MOVED from every command naming a world", test_routing_moved},
      {"scenectl and the Python client against a non-owner", test_scenectl_non_owner},
      {"placement with auto", test_placement_auto},
      {"entity ids unique across the cluster", test_unique_entity_ids},
      {"world.move with subscribers and racing writes", test_move_with_subscribers_and_writes},
      {"world.move carries ticks and history; a takeover starts them over",
       test_move_carries_history},
      {"kill -9 of an owner: takeover keeps every ok", test_kill9_takeover},
      {"SIGSTOP past the TTL: fenced, no stale ok", test_sigstop_fencing},
      {"etcd down: owners fence, then recover", test_etcd_down_fences},
      {"SIGTERM releases groups within a second", test_sigterm_release},
      {"an owner's delete heard after this daemon's claim changes nothing", test_late_delete},
      {"whole-cluster restart: each group claimed once", test_whole_cluster_restart},
      {"the standalone layout migrates", test_old_layout_migrates},
      {"etcd unreachable at start", test_etcd_late},
      {"a fake gateway's malformed replies", test_fake_gateway_malformed},
      {"TLS and an access list across nodes", test_tls_acl_cluster},
  };
  return T_ADD_SUITE("cluster", NULL, NULL, tests);
}

/* The cluster against a real etcd, failures: kill -9 of an owner and the takeover, SIGSTOP past
 * the lease (fenced, no stale ok), etcd down (owners fence, then recover), SIGTERM releasing
 * groups, an owner's delete heard late (through a proxy whose watch lags), a whole-cluster
 * restart, and a fake gateway's malformed replies. Every test stops exactly what it started. */
#include "cluster_fixtures.h"
#include "daemon_fixtures.h"
#include "etcd.h"
#include "fake_gateway.h"
#include "loopback.h"
#include "suites.h"
#include "watch_delaying_proxy.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* ---- failures -------------------------------------------------------------------------------- */

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

/* The ids of n0's entities, made without a world (they are the node's own), count of them. */
static void node_entities(cluster *k, unsigned long long *ids, int count) {
  cJSON *r = OK(&k->c[0], "{\"cmd\":\"entity.create\",\"count\":%d}", count);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "entities");
  for (int i = 0; i < count; i++)
    ids[i] = (unsigned long long)cJSON_GetArrayItem(e, i)->valuedouble;
  cJSON_Delete(r);
}

/* A match's end with its entities in a cluster, then kill -9 of the node: entities of the node
 * itself (made without a world, in its snapshot while they had no transform) that a world used
 * and that world.destroy with "entities" or entity.destroy with a list ended stay ended, though
 * the destruction ran on their group: the node's journal records it too. */
static void test_match_end_survives_kill9(void) {
  START_CLUSTER(k, "always");
  unsigned long long e[4];
  node_entities(&k, e, 4);
  OKD(&k.c[0], "{\"cmd\":\"save\"}"); /* the node's snapshot holds them, with no transform */
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"end.main\",\"node\":\"n0\"}");
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"end.lobby\"}");
  for (int i = 0; i < 2; i++)
    OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"end.main\",\"entity\":%llu}", e[i]);
  OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"end.lobby\",\"entity\":%llu}", e[2]);
  cJSON *r = OK(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"end.main\"}");
  unsigned long long own = t_resp_id(r, "entity"); /* the group's */
  cJSON_Delete(r);
  r = OK(&k.c[0], "{\"cmd\":\"world.destroy\",\"world\":\"end.main\",\"entities\":true}");
  CHECK(t_resp_num(r, "entities_destroyed") == 3, r);
  cJSON_Delete(r);
  OKD(&k.c[0], "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,%llu]}", e[2], e[3]);
  unsigned long long gone[] = {e[0], e[1], e[2], e[3], own};
  kill(k.d[0].pid, SIGKILL);
  t_daemon_wait(&k.d[0], 5000);
  k.up[0] = false;
  t_client_close(&k.c[0]);
  k.connected[0] = false;
  CU_ASSERT_FATAL(node_start(&k, 0));
  CU_ASSERT(wait_registered(&k, NODES));
  /* the group is served again (by a daemon that took it over, or by n0 once it is back) */
  cJSON *lobby =
      wait_ok_anywhere(&k, "{\"cmd\":\"transform.find\",\"world\":\"end.lobby\",\"path\":\"none\"}",
                       TTL_MS + 5000, NULL);
  cJSON_Delete(lobby);
  r = wait_ok_anywhere(&k, "{\"cmd\":\"world.list\",\"cluster\":true}", 5000, NULL);
  const cJSON *w;
  int lobbies = 0;
  cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(r, "worlds")) {
    CHECK(!t_resp_str_is(w, "name", "end.main"), r);
    lobbies += t_resp_str_is(w, "name", "end.lobby");
  }
  CU_ASSERT_EQUAL(lobbies, 1);
  cJSON_Delete(r);
  for (int i = 0; i < 5; i++)
    ERR(&k.c[0], "NOT_FOUND", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", gone[i]);
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

int t_register_cluster_failover(void) {
  static const t_test tests[] = {
      {"kill -9 of an owner: takeover keeps every ok", test_kill9_takeover},
      {"SIGSTOP past the TTL: fenced, no stale ok", test_sigstop_fencing},
      {"etcd down: owners fence, then recover", test_etcd_down_fences},
      {"SIGTERM releases groups within a second", test_sigterm_release},
      {"an owner's delete heard after this daemon's claim changes nothing", test_late_delete},
      {"whole-cluster restart: each group claimed once", test_whole_cluster_restart},
      {"a match's end with its entities survives kill -9 of its node",
       test_match_end_survives_kill9},
      {"a fake gateway's malformed replies", test_fake_gateway_malformed},
  };
  return T_ADD_SUITE("cluster_failover", NULL, NULL, tests);
}

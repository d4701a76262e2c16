/* Sync acknowledgements with replicas (--replicas N >= 1, each daemon on its own directory):
 * a held ok waits at its place in the connection's output while what came before it leaves,
 * and is released by the follower's ack; each group's own durability; the replica lag in
 * seconds; the cluster right under --acl. */
#include "harness.h"
#include "replica_fixtures.h"
#include "suites.h"
#include "ws_fixtures.h"

#include <CUnit/CUnit.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool list_has(const cJSON *v, const char *member, const char *name) {
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(v, member)) {
    if (cJSON_IsString(e) && strcmp(e->valuestring, name) == 0)
      return true;
  }
  return false;
}

/* The replicas key of group once it names want followers (15 s at most); NULL otherwise. */
static cJSON *wait_followers(cluster *k, const char *group, int want) {
  char key[96];
  snprintf(key, sizeof key, "/scened/replicas/%s", group);
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    cJSON *v = etcd_json(k, key);
    if (v && list_size(v, "followers") == want)
      return v;
    cJSON_Delete(v);
  }
  return NULL;
}

/* Whether daemon i lists w with n members in insync (and node among them, unless NULL). */
static bool lists_insync(cluster *k, int i, const char *w, int n, const char *node) {
  cJSON *resp;
  const cJSON *item = world_item(k, i, w, &resp);
  bool ok = item && list_size(item, "insync") == n && (!node || list_has(item, "insync", node));
  cJSON_Delete(resp);
  return ok;
}

static bool wait_insync(cluster *k, int i, const char *w, int n, const char *node) {
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20))
    if (lists_insync(k, i, w, n, node))
      return true;
  return false;
}

static bool write_one(t_client *c, const char *world, int n) {
  cJSON *r = t_client_call(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"name\":\"t%d\"}",
                           world, n);
  bool ok = t_resp_ok(r);
  if (!ok)
    t_report("transform.create failed", r);
  cJSON_Delete(r);
  return ok;
}

/* Starts the cluster with extra flags, creates b1.main, writes 5 transforms and waits until the
 * follower is in sync; the follower's index, -1 when the cluster did not start. */
static int start_b1(cluster *k, const char *const *extra, const char *token, int *at) {
  int fi = replicas_start(k, extra, token, "b1.main", 1, at);
  if (fi < 0)
    return -1;
  for (int i = 0; i < 5; i++)
    CU_ASSERT_FATAL(write_one(&k->c[*at], "b1.main", i));
  CU_ASSERT_FATAL(wait_insync(k, *at, "b1.main", 1, node_name(fi)));
  return fi;
}

/* ---- tests --------------------------------------------------------------------------------- */

/* The follower stopped, one connection pipelines a read, a sync write and another read: the
 * first read's reply comes at once, the write's ok and the second read's reply wait behind it
 * (in order) until the follower leaves insync; another connection's read is not held. */
static void test_read_before_held_write(void) {
  static const char *const extra[] = {"--replicas", "1", "--replica-timeout", "1000", NULL};
  cluster k;
  int at = -1, fi = start_b1(&k, extra, NULL, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  t_client other;
  CU_ASSERT_FATAL(t_client_connect(&other, k.d[at].port) == 0);
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  static const char lines[] =
      "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"t0\",\"id\":1}\n"
      "{\"cmd\":\"transform.create\",\"world\":\"b1.main\",\"name\":\"held\",\"id\":2}\n"
      "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"t1\",\"id\":3}\n";
  long t0 = t_now_ms();
  CU_ASSERT_FATAL(t_client_send_raw(&k.c[at], lines, sizeof lines - 1) == 0);
  cJSON *r1 = t_client_recv_json(&k.c[at], 5000);
  long first = t_now_ms() - t0;
  CU_ASSERT(t_resp_ok(r1) && t_resp_num(r1, "id") == 1);
  CU_ASSERT(first < 500);
  cJSON_Delete(r1);
  /* Another connection is not held by this one's write. */
  long t1 = t_now_ms();
  cJSON *ro = t_client_call(&other, "{\"cmd\":\"transform.find\",\"world\":\"b1.main\","
                                    "\"path\":\"t2\",\"id\":4}");
  long other_ms = t_now_ms() - t1;
  CU_ASSERT(t_resp_ok(ro) && other_ms < 500);
  cJSON_Delete(ro);
  cJSON *held = t_client_recv_json(&k.c[at], 300);
  CU_ASSERT_PTR_NULL(held); /* the write's ok waits, and the read after it */
  cJSON_Delete(held);
  cJSON *r2 = t_client_recv_json(&k.c[at], 15000);
  long second = t_now_ms() - t0;
  cJSON *r3 = t_client_recv_json(&k.c[at], 5000);
  printf("\n  owner %s, follower %s stopped: read before at %ld ms, other connection %ld ms, "
         "held ok at %ld ms\n",
         node_name(at), node_name(fi), first, other_ms, second);
  CU_ASSERT(t_resp_ok(r2) && t_resp_num(r2, "id") == 2);
  CU_ASSERT(t_resp_ok(r3) && t_resp_num(r3, "id") == 3);
  CU_ASSERT(second >= 900); /* --replica-timeout, then etcd recording the follower's leaving */
  cJSON_Delete(r2);
  cJSON_Delete(r3);
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  t_client_close(&other);
  cluster_stop(&k);
}

/* The next text message on w parsed (NULL: none within timeout_ms). */
static cJSON *ws_next(t_ws *w, long timeout_ms) {
  t_ws_msg m;
  if (!t_ws_recv(w, &m, timeout_ms))
    return NULL;
  cJSON *v = m.opcode == 1 ? cJSON_Parse((const char *)m.data) : NULL;
  free(m.data);
  return v;
}

/* The same over WebSocket (/ws): the read before the held write is answered at once, the write
 * and the read after it once the follower left insync, in order. */
static void test_ws_read_before_held_write(void) {
  static const char *const extra[] = {"--replicas", "1", "--replica-timeout", "1000", NULL};
  cluster k;
  int at = -1, fi = start_b1(&k, extra, NULL, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  t_ws w;
  CU_ASSERT_FATAL(t_ws_connect(&w, k.d[at].http_port));
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  long t0 = t_now_ms();
  CU_ASSERT(t_ws_send_text(
      &w, "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"t0\",\"id\":1}"));
  CU_ASSERT(t_ws_send_text(
      &w, "{\"cmd\":\"transform.create\",\"world\":\"b1.main\",\"name\":\"held\",\"id\":2}"));
  CU_ASSERT(t_ws_send_text(
      &w, "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"t1\",\"id\":3}"));
  cJSON *r1 = ws_next(&w, 5000);
  long first = t_now_ms() - t0;
  CU_ASSERT(t_resp_ok(r1) && t_resp_num(r1, "id") == 1 && first < 500);
  cJSON_Delete(r1);
  cJSON *none = ws_next(&w, 300);
  CU_ASSERT_PTR_NULL(none);
  cJSON_Delete(none);
  cJSON *r2 = ws_next(&w, 15000);
  long second = t_now_ms() - t0;
  cJSON *r3 = ws_next(&w, 5000);
  printf("\n  /ws: read before at %ld ms, held ok at %ld ms\n", first, second);
  CU_ASSERT(t_resp_ok(r2) && t_resp_num(r2, "id") == 2 && second >= 900);
  CU_ASSERT(t_resp_ok(r3) && t_resp_num(r3, "id") == 3);
  cJSON_Delete(r2);
  cJSON_Delete(r3);
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  t_ws_close(&w);
  cluster_stop(&k);
}

/* A subscriber's frames on a connection whose write is held: those made after the write wait
 * behind its ok (shared frame segments and own bytes alike) and then come whole and in order,
 * with ticks rising past those that came before it. */
static void test_frames_behind_held_ok(void) {
  static const char *const extra[] = {"--replicas", "1", "--replica-timeout", "1000", NULL};
  cluster k;
  int at = -1, fi = start_b1(&k, extra, NULL, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  t_client sub, other;
  CU_ASSERT_FATAL(t_client_connect(&sub, k.d[at].port) == 0);
  CU_ASSERT_FATAL(t_client_connect(&other, k.d[at].port) == 0);
  CU_ASSERT_FATAL(t_client_send(&sub, "{\"cmd\":\"subscribe\",\"world\":\"b1.main\",\"id\":1}") ==
                  0);
  double last_tick = -1;
  int frames_before = 0, frames_after = 0, bad = 0;
  bool subscribed = false, ok_seen = false, rising = true;
  for (long deadline = t_now_ms() + 5000; frames_before == 0 && t_now_ms() < deadline;) {
    cJSON *m = t_client_recv_json(&sub, 1000);
    if (m && t_resp_num(m, "id") == 1)
      subscribed = t_resp_ok(m);
    else if (m && strcmp(t_resp_str(m, "event"), "frame") == 0) {
      frames_before++;
      last_tick = t_resp_num(m, "tick");
    }
    cJSON_Delete(m);
  }
  CU_ASSERT_FATAL(subscribed && frames_before > 0);
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  CU_ASSERT_FATAL(t_client_send(&sub, "{\"cmd\":\"transform.create\",\"world\":\"b1.main\","
                                      "\"name\":\"held\",\"id\":2}") == 0);
  for (int i = 0; i < 5; i++) {
    char line[128];
    snprintf(line, sizeof line,
             "{\"cmd\":\"transform.create\",\"world\":\"b1.main\",\"name\":\"o%d\"}", i);
    CU_ASSERT(t_client_send(&other, line) == 0);
    t_sleep_ms(40); /* a few ticks apart: several frames */
  }
  long t0 = t_now_ms();
  for (long deadline = t0 + 15000; t_now_ms() < deadline;) {
    cJSON *m = t_client_recv_json(&sub, ok_seen ? 500 : 15000);
    if (!m)
      break;
    if (t_resp_num(m, "id") == 2) {
      ok_seen = t_resp_ok(m);
    } else if (strcmp(t_resp_str(m, "event"), "frame") == 0) {
      double tick = t_resp_num(m, "tick");
      rising = rising && tick > last_tick;
      last_tick = tick;
      ok_seen ? frames_after++ : frames_before++;
    } else {
      bad++;
      t_report("an unexpected line", m);
    }
    cJSON_Delete(m);
  }
  printf("\n  held ok after %ld ms: %d frames before it, %d after, ticks rising %d\n",
         t_now_ms() - t0, frames_before, frames_after, rising);
  CU_ASSERT(ok_seen);
  CU_ASSERT(frames_after >= 1); /* the changes made while it was held */
  CU_ASSERT(rising);
  CU_ASSERT(bad == 0);
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  t_client_close(&sub);
  t_client_close(&other);
  cluster_stop(&k);
}

/* With a long --replica-timeout, a write's ok held while the follower is stopped leaves as soon
 * as the follower, resumed, acknowledges it: long before the timeout, the follower still in
 * sync and nothing answered alone. */
static void test_released_by_ack(void) {
  static const char *const extra[] = {"--replicas", "1", "--replica-timeout", "8000", NULL};
  cluster k;
  int at = -1, fi = start_b1(&k, extra, NULL, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  double alone = metric_of(&k, at, "scened_replica_alone_total");
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  long t0 = t_now_ms();
  CU_ASSERT_FATAL(t_client_send(&k.c[at], "{\"cmd\":\"transform.create\",\"world\":\"b1.main\","
                                          "\"name\":\"held\",\"id\":9}") == 0);
  cJSON *r = t_client_recv_json(&k.c[at], 600);
  CU_ASSERT_PTR_NULL(r);
  cJSON_Delete(r);
  long resumed = t_now_ms();
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  r = t_client_recv_json(&k.c[at], 15000);
  long after = t_now_ms() - resumed;
  printf("\n  held %ld ms, answered %ld ms after the follower resumed\n", resumed - t0, after);
  CU_ASSERT(t_resp_ok(r) && t_resp_num(r, "id") == 9);
  CU_ASSERT(after < 3000);
  cJSON_Delete(r);
  CU_ASSERT(lists_insync(&k, at, "b1.main", 1, node_name(fi)));
  CU_ASSERT(metric_of(&k, at, "scened_replica_alone_total") == alone);
  cluster_stop(&k);
}

/* world.create's durability: a1 async, s1 sync, both owned by n0 and followed by n1 and n2
 * (--replicas 2). With n1 stopped a write to a1 is answered at once while one to s1 waits until
 * n1, resumed well within --replica-timeout (and its lease), acknowledges it; a bad value, or
 * another value for an existing group, is BAD_REQUEST; world.list and the replicas key show
 * each group's; after kill -9 of n0 the new owner keeps a1 async. */
static void test_group_durability(void) {
  static const char *const extra[] = {"--replicas", "2", "--replica-timeout", "1000", NULL};
  cluster k;
  if (!replicas_cluster(&k, extra))
    return;
  cJSON *r = OK(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"a1.main\",\"node\":\"n0\","
                         "\"durability\":\"async\"}");
  cJSON_Delete(r);
  r = OK(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"s1.main\",\"node\":\"n0\","
                  "\"durability\":\"sync\"}");
  cJSON_Delete(r);
  ERR(&k.c[0], "BAD_REQUEST",
      "{\"cmd\":\"world.create\",\"world\":\"z1.main\",\"durability\":\"strong\"}");
  ERR(&k.c[0], "BAD_REQUEST", "{\"cmd\":\"world.create\",\"world\":\"z1.main\",\"durability\":1}");
  ERR(&k.c[0], "BAD_REQUEST",
      "{\"cmd\":\"world.create\",\"world\":\"a1.other\",\"durability\":\"sync\"}");
  r = OK(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"a1.other\",\"durability\":\"async\"}");
  cJSON_Delete(r);
  cJSON *ka = wait_followers(&k, "a1", 2), *ks = wait_followers(&k, "s1", 2);
  CU_ASSERT_FATAL(ka && ks);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ka, "durability"), "async");
  CU_ASSERT_STRING_EQUAL(t_resp_str(ks, "durability"), "sync");
  long long epoch = (long long)t_resp_num(ka, "epoch");
  cJSON_Delete(ka);
  cJSON_Delete(ks);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_FATAL(write_one(&k.c[0], "a1.main", i));
    CU_ASSERT_FATAL(write_one(&k.c[0], "s1.main", i));
  }
  CU_ASSERT_FATAL(wait_insync(&k, 0, "a1.main", 2, NULL));
  CU_ASSERT_FATAL(wait_insync(&k, 0, "s1.main", 2, NULL));
  for (int i = 0; i < NODES; i++) {
    cJSON *resp;
    const cJSON *item = world_item(&k, i, "a1.main", &resp);
    CU_ASSERT(item && strcmp(t_resp_str(item, "durability"), "async") == 0);
    cJSON_Delete(resp);
    item = world_item(&k, i, "s1.main", &resp);
    CU_ASSERT(item && strcmp(t_resp_str(item, "durability"), "sync") == 0);
    cJSON_Delete(resp);
  }
  pid_t pid = k.d[1].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  long t0 = t_now_ms();
  CU_ASSERT_FATAL(t_client_send(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"a1.main\","
                                         "\"name\":\"quick\",\"id\":1}") == 0);
  r = t_client_recv_json(&k.c[0], 5000);
  long async_ms = t_now_ms() - t0;
  CU_ASSERT(t_resp_ok(r) && t_resp_num(r, "id") == 1 && async_ms < 500);
  cJSON_Delete(r);
  t0 = t_now_ms();
  CU_ASSERT_FATAL(t_client_send(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"s1.main\","
                                         "\"name\":\"slow\",\"id\":2}") == 0);
  r = t_client_recv_json(&k.c[0], 400);
  CU_ASSERT_PTR_NULL(r);
  cJSON_Delete(r);
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  r = t_client_recv_json(&k.c[0], 15000);
  long sync_ms = t_now_ms() - t0;
  printf("\n  n1 stopped: async group answered in %ld ms, sync group in %ld ms (n1 resumed at "
         "400 ms)\n",
         async_ms, sync_ms);
  CU_ASSERT(t_resp_ok(r) && t_resp_num(r, "id") == 2 && sync_ms >= 400);
  cJSON_Delete(r);
  /* Both followers in sync, then the owner killed: the new owner keeps a1's durability. */
  CU_ASSERT(write_one(&k.c[0], "a1.main", 10));
  CU_ASSERT_FATAL(wait_insync(&k, 0, "a1.main", 2, NULL));
  node_stop(&k, 0, SIGKILL);
  bool kept = false;
  for (long deadline = t_now_ms() + 15000; !kept && t_now_ms() < deadline; t_sleep_ms(50)) {
    cJSON *v = etcd_json(&k, "/scened/replicas/a1");
    if (v && t_resp_num(v, "epoch") > (double)epoch) {
      printf("  a1 taken over by %s: durability %s\n", t_resp_str(v, "owner"),
             t_resp_str(v, "durability"));
      CU_ASSERT_STRING_EQUAL(t_resp_str(v, "durability"), "async");
      kept = true;
    }
    cJSON_Delete(v);
  }
  CU_ASSERT(kept);
  cluster_stop(&k);
}

/* scened_replica_lag_seconds: 0 while the follower keeps up; with it stopped, the age of the
 * record it has not acknowledged, growing; 0 again once it resumed. */
static void test_lag_seconds(void) {
  static const char *const extra[] = {
      "--replicas", "1", "--durability", "async", "--replica-timeout", "30000", NULL};
  cluster k;
  int at = -1, fi = start_b1(&k, extra, NULL, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  char secs[160], changes[160];
  snprintf(secs, sizeof secs, "scened_replica_lag_seconds{group=\"b1\",node=\"%s\"}",
           node_name(fi));
  snprintf(changes, sizeof changes, "scened_replica_lag_changes{group=\"b1\",node=\"%s\"}",
           node_name(fi));
  CU_ASSERT(wait_metric(&k, at, secs, 0));
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  CU_ASSERT(write_one(&k.c[at], "b1.main", 100));
  CU_ASSERT(write_one(&k.c[at], "b1.main", 101));
  double a = 0;
  for (long deadline = t_now_ms() + 5000; a < 0.3 && t_now_ms() < deadline; t_sleep_ms(20))
    a = metric_of(&k, at, secs);
  long ta = t_now_ms();
  while (t_now_ms() - ta < 400)
    t_sleep_ms(20);
  double b = metric_of(&k, at, secs);
  printf("\n  follower %s stopped: lag %g s, then %g s, %g changes\n", node_name(fi), a, b,
         metric_of(&k, at, changes));
  CU_ASSERT(a >= 0.3 && a < 10);
  CU_ASSERT(b >= a + 0.3);
  CU_ASSERT(metric_of(&k, at, changes) == 2);
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  CU_ASSERT(wait_metric(&k, at, secs, 0));
  CU_ASSERT(wait_metric(&k, at, changes, 0));
  cluster_stop(&k);
}

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

/* Under --acl, followers stream with --cluster-token, whose rule has the cluster right (and
 * nothing else): the follower gets in sync; a token with read, write and admin but not cluster
 * is refused replicate. */
static void test_cluster_right(void) {
  char dir[64], acl[128];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "acl"));
  snprintf(acl, sizeof acl, "%s/acl", dir);
  static const char *const rules[] = {"op-tok read,write,admin *", "daemon-tok cluster *", NULL};
  CU_ASSERT_FATAL(write_acl_file(acl, rules));
  const char *extra[] = {"--replicas", "1", "--acl", acl, "--cluster-token", "daemon-tok", NULL};
  cluster k;
  int at = -1, fi = start_b1(&k, extra, "op-tok", &at);
  if (fi >= 0) {
    cJSON *r = t_client_call(&k.c[at], "{\"cmd\":\"replicate\",\"group\":\"b1\",\"epoch\":1,"
                                       "\"from\":1}");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
    CU_ASSERT(r && !t_resp_ok(r) && strcmp(t_resp_code(r), "UNAUTHORIZED") == 0 &&
              strstr(t_resp_str(e, "message"), "cluster right"));
    if (!r || t_resp_ok(r))
      t_report("replicate with an admin token", r);
    cJSON_Delete(r);
    CU_ASSERT(metric_of(&k, fi, "scened_replica_applied_total{group=\"b1\"}") >= 6);
  }
  cluster_stop(&k);
  t_remove_temp_dir(dir);
}

/* Daemons serving TLS (--tls-cert, --cluster-ca): the follower's link to the owner speaks TLS,
 * checks the owner's certificate, and gets in sync; a sync write is answered once it acked. */
static void test_tls_link(void) {
  char certs[64], ca[128], cert[128], key[128];
  CU_ASSERT_FATAL(t_make_certs(certs, sizeof certs));
  snprintf(ca, sizeof ca, "%s/ca.pem", certs);
  snprintf(cert, sizeof cert, "%s/server.pem", certs);
  snprintf(key, sizeof key, "%s/server.key", certs);
  const char *extra[] = {"--replicas",   "1", "--tls-cert", cert, "--tls-key", key,
                         "--cluster-ca", ca,  NULL};
  t_tls_files files = {.ca = ca};
  cluster k;
  memset(&k, 0, sizeof k);
  k.tls = &files;
  int at = -1;
  k.own_data = true;
  k.extra = extra;
  if (cluster_start_prepared(&k)) {
    cJSON *r = wait_ok_anywhere(&k, "{\"cmd\":\"world.create\",\"world\":\"b1.main\"}", 15000, &at);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    cJSON_Delete(r);
    cJSON *rep = wait_followers(&k, "b1", 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
    int fi = node_index(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rep, "followers"), 0)->valuestring);
    cJSON_Delete(rep);
    CU_ASSERT_FATAL(fi >= 0 && fi != at);
    for (int i = 0; i < 5; i++)
      CU_ASSERT(write_one(&k.c[at], "b1.main", i));
    bool insync = wait_insync(&k, at, "b1.main", 1, node_name(fi));
    printf("\n  owner %s, follower %s over TLS: in sync %d\n", node_name(at), node_name(fi),
           insync);
    CU_ASSERT(insync);
    CU_ASSERT(write_one(&k.c[at], "b1.main", 5)); /* waits for the follower's ack */
    CU_ASSERT(lists_insync(&k, at, "b1.main", 1, node_name(fi)));
  }
  cluster_stop(&k);
  t_remove_temp_dir(certs);
}

/* A --cluster-ca that did not sign the owner's certificate: the follower refuses the owner (its
 * log says why) and never gets in sync; the owner answers alone. */
static void test_tls_link_refused(void) {
  char certs[64], other[64], wrong_ca[128], ca[128], cert[128], key[128];
  CU_ASSERT_FATAL(t_make_certs(certs, sizeof certs));
  CU_ASSERT_FATAL(t_make_certs(other, sizeof other));
  snprintf(wrong_ca, sizeof wrong_ca, "%s/ca.pem", certs);
  snprintf(ca, sizeof ca, "%s/ca.pem", other);
  snprintf(cert, sizeof cert, "%s/server.pem", other); /* signed by the other CA */
  snprintf(key, sizeof key, "%s/server.key", other);
  const char *extra[] = {"--replicas",   "1",      "--tls-cert", cert, "--tls-key", key,
                         "--cluster-ca", wrong_ca, NULL};
  t_tls_files files = {.ca = ca}; /* the clients trust the daemons' own CA */
  cluster k;
  memset(&k, 0, sizeof k);
  k.tls = &files;
  k.own_data = true;
  k.extra = extra;
  int at = -1;
  if (cluster_start_prepared(&k)) {
    cJSON *r = wait_ok_anywhere(&k, "{\"cmd\":\"world.create\",\"world\":\"b1.main\"}", 15000, &at);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    cJSON_Delete(r);
    cJSON *rep = wait_followers(&k, "b1", 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
    int fi = node_index(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rep, "followers"), 0)->valuestring);
    cJSON_Delete(rep);
    CU_ASSERT_FATAL(fi >= 0 && fi != at);
    bool logged = false;
    int n = 0;
    for (long deadline = t_now_ms() + 15000; !logged && t_now_ms() < deadline; t_sleep_ms(50)) {
      CU_ASSERT(write_one(&k.c[at], "b1.main", n++)); /* alone: nobody in sync */
      logged = t_daemon_log_contains(&k.d[fi], "TLS with the owner");
    }
    printf("\n  follower %s with another CA: refusal logged %d\n", node_name(fi), logged);
    CU_ASSERT(logged);
    CU_ASSERT(lists_insync(&k, at, "b1.main", 0, NULL));
  }
  cluster_stop(&k);
  t_remove_temp_dir(certs);
  t_remove_temp_dir(other);
}

int t_register_cluster_replicas_sync(void) {
  static const t_test tests[] = {
      {"a read before a held write is answered at once", test_read_before_held_write},
      {"the same over WebSocket", test_ws_read_before_held_write},
      {"a held ok leaves once the follower acks", test_released_by_ack},
      {"frames made after a held write wait behind its ok", test_frames_behind_held_ok},
      {"each group's durability, fixed at its creation", test_group_durability},
      {"lag_seconds grows while a follower is stopped", test_lag_seconds},
      {"replicate takes the cluster right", test_cluster_right},
      {"the follower's link speaks TLS with the daemons", test_tls_link},
      {"a follower refuses an owner its --cluster-ca did not sign", test_tls_link_refused},
  };
  return T_ADD_SUITE("cluster_replicas_sync", NULL, NULL, tests);
}

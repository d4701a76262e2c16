/* Switchovers (--replicas 1, each daemon on a data directory of its own): world.move to the
 * group's follower freezes the group, waits for the follower to acknowledge every record, hands
 * the group over in one etcd transaction and the follower serves its copy. Every test starts
 * etcd and three daemons and stops exactly what it started. */
#include "daemon_fixtures.h"
#include "harness.h"
#include "replica_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The replicas key as JSON once pred holds of it (15 s at most); NULL when it never did. */
static cJSON *wait_replicas(cluster *k, bool (*pred)(const cJSON *, const void *),
                            const void *arg) {
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    cJSON *v = etcd_json(k, "/scened/replicas/s1");
    if (v && pred(v, arg))
      return v;
    cJSON_Delete(v);
  }
  return NULL;
}

static const char *sole(const cJSON *v, const char *member) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, member);
  return cJSON_IsArray(list) && cJSON_GetArraySize(list) == 1 && cJSON_IsString(list->child)
             ? list->child->valuestring
             : "";
}

/* The follower is in sync: the owner's record says so. */
static bool in_sync(const cJSON *v, const void *follower) {
  return strcmp(sole(v, "insync"), follower) == 0;
}

/* The new owner recorded its own epoch, naming the old owner its follower. */
typedef struct after_switch {
  const char *owner, *follower;
  long long old_epoch;
} after_switch;

static bool switched(const cJSON *v, const void *arg) {
  const after_switch *a = arg;
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(v, "epoch");
  return cJSON_IsNumber(e) && (long long)e->valuedouble > a->old_epoch &&
         t_resp_str_is(v, "owner", a->owner) && strcmp(sole(v, "followers"), a->follower) == 0;
}

/* Three daemons with --replicas 1 and --replica-timeout timeout; s1.main created with a few
 * transforms until its follower is in sync. The follower's index (-1: no start); *at the
 * owner's, *epoch the owner's epoch. */
static int start_switch(cluster *k, const char *timeout, const char *durability, int *at,
                        long long *epoch) {
  static const char *extra[] = {"--replicas", "1", "--replica-timeout", NULL, "--durability",
                                NULL,         NULL};
  extra[3] = timeout;
  extra[5] = durability;
  int fi = replicas_start(k, extra, NULL, "s1.main", 1, at);
  if (fi < 0)
    return -1;
  for (int i = 0; i < 5; i++)
    OKD(&k->c[*at], "{\"cmd\":\"transform.create\",\"world\":\"s1.main\",\"name\":\"p%d\"}", i);
  cJSON *rep = wait_replicas(k, in_sync, node_name(fi));
  CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
  *epoch = (long long)t_resp_num(rep, "epoch");
  cJSON_Delete(rep);
  return fi;
}

/* A write's fate, by its request id. */
enum { W_UNSENT, W_SENT, W_OK, W_REFUSED };

/* Reads the writer's answers (events skipped) until none comes within wait_ms or every sent
 * one is answered; each id must be answered once. The number read. */
static int read_answers(t_client *c, int *state, int sent, int *answered, long wait_ms,
                        int *twice) {
  int n = 0;
  while (*answered < sent) {
    cJSON *w = t_recv_object(c, wait_ms);
    if (!w)
      break;
    int id = (int)t_resp_num(w, "id");
    if (id < 1 || id > sent || state[id] != W_SENT) {
      (*twice)++;
      t_report("an answer to a request that was not waiting for one", w);
    } else if (t_resp_ok(w)) {
      state[id] = W_OK;
    } else {
      const char *code = t_resp_code(w);
      CHECK(!strcmp(code, "MOVED") || !strcmp(code, "UNAVAILABLE"), w);
      state[id] = W_REFUSED;
    }
    (*answered)++;
    n++;
    cJSON_Delete(w);
  }
  return n;
}

/* A tick of s1.main as daemon i's transform.get of p0 answers it. */
static double tick_on(cluster *k, int i) {
  cJSON *r = t_client_call(&k->c[i], "{\"cmd\":\"transform.find\",\"world\":\"s1.main\","
                                     "\"path\":\"p0\"}");
  double e = t_resp_ok(r) ? t_resp_num(r, "entity") : -1;
  cJSON_Delete(r);
  r = t_client_call(&k->c[i], "{\"cmd\":\"transform.get\",\"world\":\"s1.main\",\"entity\":%.0f}",
                    e);
  double tick = t_resp_ok(r) ? t_resp_num(r, "tick") : -1;
  cJSON_Delete(r);
  return tick;
}

/* world.move to the follower while a writer pipelines transform.create (each with its own name
 * and id) to the owner: every write is answered exactly once, ok or refused (UNAVAILABLE while
 * frozen, MOVED after); every ok is on the new owner and no refused one is; the refused ones
 * sent again to the new owner are applied once. The subscriber gets moved, the old owner
 * answers MOVED, the replicas key names the new owner in a newer epoch with the old owner as
 * its follower, the new owner served its copy (no load), and ticks go on. The old owner follows
 * from the copy it kept: it joins the in-sync set, and the group switches back to it whole. */
static void check_switchover(const char *durability) {
  enum { CHUNK = 16, MAX_WRITES = 3000 };
  cluster k;
  int at = -1;
  long long epoch = 0;
  int fi = start_switch(&k, "1000", durability, &at, &epoch);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  t_client sub, writer, mover;
  CONNECT_FATAL(&sub, k.d[at].port);
  CONNECT_FATAL(&writer, k.d[at].port);
  CONNECT_FATAL(&mover, k.d[at].port);
  t_client_keep_events(&sub);
  cJSON *r = OK(&sub, "{\"cmd\":\"subscribe\",\"world\":\"s1.main\"}");
  double sid = t_resp_num(r, "sub");
  cJSON_Delete(r);
  double tick_before = tick_on(&k, at);
  int *state = calloc(MAX_WRITES + 1, sizeof *state);
  CU_ASSERT_PTR_NOT_NULL_FATAL(state);
  int sent = 0, answered = 0, twice = 0, after = 0;
  int window = strcmp(durability, "async") == 0 ? 16 : 4;
  cJSON *m = NULL;
  long move_sent = 0, move_took = -1;
  for (long deadline = t_now_ms() + 30000;
       sent + CHUNK <= MAX_WRITES && after < 4 && t_now_ms() < deadline;) {
    text batch = {0};
    for (int i = 0; i < CHUNK; i++) {
      state[++sent] = W_SENT;
      text_addf(&batch,
                "{\"cmd\":\"transform.create\",\"world\":\"s1.main\",\"name\":\"w%d\",\"id\":%d}\n",
                sent, sent);
    }
    CU_ASSERT_FATAL(t_client_send_raw(&writer, batch.s, batch.len) == 0);
    text_free(&batch);
    if (!move_sent && sent >= 10 * CHUNK) {
      tick_before = tick_on(&k, at); /* the owner's clock goes on until the freeze */
      char line[128];
      snprintf(line, sizeof line, "{\"cmd\":\"world.move\",\"world\":\"s1.main\",\"to\":\"%s\"}",
               node_name(fi));
      t_client_send(&mover, line);
      move_sent = t_now_ms();
    }
    if (move_sent && !m && (m = t_recv_object(&mover, 1)))
      move_took = t_now_ms() - move_sent;
    /* Keep a few chunks in flight (more under async, so that the follower lags); after the
     * answer, a few more chunks meet MOVED. */
    read_answers(&writer, state, sent, &answered,
                 answered + window * CHUNK < sent ? T_RESPONSE_MS : 1, &twice);
    after += m != NULL;
  }
  read_answers(&writer, state, sent, &answered, T_RESPONSE_MS, &twice);
  CU_ASSERT_EQUAL(answered, sent);
  if (!m) {
    m = t_recv_object(&mover, T_RESPONSE_MS);
    move_took = t_now_ms() - move_sent;
  }
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", k.d[fi].port);
  CHECK(t_resp_ok(m) && t_resp_str_is(m, "node", node_name(fi)) && t_resp_str_is(m, "addr", addr),
        m);
  cJSON_Delete(m);
  /* Nothing more comes on the writer's connection: no request is answered twice. */
  read_answers(&writer, state, sent + 1, &answered, 300, &twice);
  CU_ASSERT_EQUAL(twice, 0);
  int oks = 0, refused = 0;
  for (int i = 1; i <= sent; i++)
    oks += state[i] == W_OK, refused += state[i] == W_REFUSED;
  printf("\n  %s: owner %s -> follower %s: %d writes, %d ok, %d refused; move answered in %ld ms\n",
         durability, node_name(at), node_name(fi), sent, oks, refused, move_took);
  CU_ASSERT(oks > 0 && refused > 0);
  printf("  the owner %s\n", t_daemon_log_contains(&k.d[at], "switching a group over")
                                 ? "waited for the follower to catch up"
                                 : "found the follower caught up");
  /* Every ok is on the new owner, nothing refused is; a refused write sent there again is
   * applied (once: its name would be taken otherwise). */
  int missing = 0, extra = 0, retried = 0;
  for (int i = 1; i <= sent; i++) {
    r = t_client_call(&k.c[fi],
                      "{\"cmd\":\"transform.find\",\"world\":\"s1.main\",\"path\":\"w%d\"}", i);
    bool found = t_resp_ok(r);
    if (state[i] == W_OK && !found && missing++ < 3)
      t_report("an acknowledged write is missing on the new owner", r);
    if (state[i] == W_REFUSED && found && extra++ < 3)
      t_report("a refused write is on the new owner", r);
    cJSON_Delete(r);
    if (state[i] == W_REFUSED) {
      r = t_client_call(&k.c[fi],
                        "{\"cmd\":\"transform.create\",\"world\":\"s1.main\",\"name\":\"w%d\"}", i);
      retried += t_resp_ok(r);
      cJSON_Delete(r);
    }
  }
  CU_ASSERT_EQUAL(missing, 0);
  CU_ASSERT_EQUAL(extra, 0);
  CU_ASSERT_EQUAL(retried, refused);
  /* The subscriber was told where the world went. */
  bool moved_event = false;
  for (long deadline = t_now_ms() + 5000; !moved_event && t_now_ms() < deadline;) {
    cJSON *ev = t_next_event(&sub, 200);
    if (ev && t_resp_str_is(ev, "event", "moved")) {
      CHECK(t_resp_num(ev, "sub") == sid && t_resp_str_is(ev, "node", node_name(fi)) &&
                t_resp_str_is(ev, "addr", addr),
            ev);
      moved_event = true;
    }
    cJSON_Delete(ev);
  }
  CU_ASSERT(moved_event);
  /* The old owner sends commands to the new one. */
  r = CALL(&k.c[at], "{\"cmd\":\"transform.find\",\"world\":\"s1.main\",\"path\":\"p0\"}");
  CHECK(t_resp_str_is(error_of(r), "code", "MOVED") &&
            t_resp_str_is(error_of(r), "node", node_name(fi)),
        r);
  cJSON_Delete(r);
  /* The follower's copy was served, not loaded; the old owner follows in the new epoch. */
  CU_ASSERT(t_daemon_log_contains(&k.d[fi], "group promoted from its copy"));
  after_switch want = {node_name(fi), node_name(at), epoch};
  cJSON *rep = wait_replicas(&k, switched, &want);
  CU_ASSERT_PTR_NOT_NULL(rep);
  cJSON_Delete(rep);
  double tick_after = tick_on(&k, fi);
  printf("  tick of s1.main: %.0f on %s before the move, %.0f on %s after (%s)\n", tick_before,
         node_name(at), tick_after, node_name(fi),
         t_daemon_log_contains(&k.d[fi], "ticks go on from its old owner") ? "its copy's raised"
                                                                           : "its copy's own");
  CU_ASSERT(tick_before > 0 && tick_after >= tick_before);
  /* The old owner follows from the copy it kept: it joins the in-sync set, and the group can
   * be switched back to it with everything there. */
  CU_ASSERT(t_daemon_log_contains(&k.d[at], "following a group from the copy kept"));
  OKD(&k.c[fi], "{\"cmd\":\"transform.create\",\"world\":\"s1.main\",\"name\":\"back\"}");
  rep = wait_replicas(&k, in_sync, node_name(at));
  CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
  cJSON_Delete(rep);
  r = OK(&k.c[fi], "{\"cmd\":\"world.move\",\"world\":\"s1.main\",\"to\":\"%s\"}", node_name(at));
  CHECK(t_resp_str_is(r, "node", node_name(at)), r);
  cJSON_Delete(r);
  missing = 0;
  for (int i = 1; i <= sent; i++) {
    r = t_client_call(&k.c[at],
                      "{\"cmd\":\"transform.find\",\"world\":\"s1.main\",\"path\":\"w%d\"}", i);
    if (!t_resp_ok(r) && missing++ < 3)
      t_report("a write is missing after the switch back", r);
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(missing, 0);
  OKD(&k.c[at], "{\"cmd\":\"transform.find\",\"world\":\"s1.main\",\"path\":\"back\"}");
  free(state);
  t_client_close(&sub);
  t_client_close(&writer);
  t_client_close(&mover);
  cluster_stop(&k);
}

static void test_switchover_sync(void) { check_switchover("sync"); }
/* async: oks go before the follower acknowledges, so the switchover waits for it to catch up
 * with what was answered. */
static void test_switchover_async(void) { check_switchover("async"); }

/* A node that does not follow the group is refused (BAD_REQUEST, naming the follower); a
 * follower that does not catch up (stopped) fails the move after --replica-timeout with
 * UNAVAILABLE, and the group is served by its owner again. */
static void test_refusals(void) {
  cluster k;
  int at = -1;
  long long epoch = 0;
  int fi = start_switch(&k, "500", "sync", &at, &epoch);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  int third = NODES - at - fi;
  char *msg = NULL;
  CU_ASSERT(ERR_MESSAGE(&k.c[at], "BAD_REQUEST", &msg,
                        "{\"cmd\":\"world.move\",\"world\":\"s1.main\",\"to\":\"%s\"}",
                        node_name(third)));
  CU_ASSERT(msg && strstr(msg, "does not follow") && strstr(msg, node_name(fi)));
  free(msg);
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  /* Sync: this write's ok waits until the stopped follower leaves insync; the move then
   * starts with the follower behind. */
  OKD(&k.c[at], "{\"cmd\":\"transform.create\",\"world\":\"s1.main\",\"name\":\"late\"}");
  long t0 = t_now_ms();
  msg = NULL;
  CU_ASSERT(ERR_MESSAGE(&k.c[at], "UNAVAILABLE", &msg,
                        "{\"cmd\":\"world.move\",\"world\":\"s1.main\",\"to\":\"%s\"}",
                        node_name(fi)));
  long took = t_now_ms() - t0;
  printf("\n  move to a stopped follower: refused after %ld ms: %s\n", took, msg ? msg : "");
  CU_ASSERT(msg && strstr(msg, "did not catch up"));
  CU_ASSERT(took >= 400);
  free(msg);
  OKD(&k.c[at], "{\"cmd\":\"transform.create\",\"world\":\"s1.main\",\"name\":\"again\"}");
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  cluster_stop(&k);
}

int t_register_cluster_replicas_move(void) {
  static const t_test tests[] = {
      {"switchover with a racing writer (sync)", test_switchover_sync},
      {"switchover with a racing writer (async)", test_switchover_async},
      {"refused: not a follower, or one that does not catch up", test_refusals},
  };
  return T_ADD_SUITE("cluster_replicas_move", NULL, NULL, tests);
}

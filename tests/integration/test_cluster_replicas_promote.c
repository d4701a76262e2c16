/* Replicas (--replicas 1, three daemons each on its own data directory): a follower's ticks are
 * its owner's (tick marks on the change stream), so rewind answers the same after a takeover;
 * and world.promote, which makes a follower the owner of a group that has none. */
#include "cluster_fixtures.h"
#include "harness.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HISTORY 600 /* ticks of history b1.main keeps: 10 s at 60 Hz */
#define PAST 60     /* ticks read back at the end of the writes */

static int list_size(const cJSON *v, const char *member) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, member);
  return cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
}

static const char *first(const cJSON *v, const char *member) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, member);
  return cJSON_IsArray(list) && cJSON_IsString(list->child) ? list->child->valuestring : "";
}

/* The replicas key of b1 once pred holds of it (15 s at most); NULL when it never did. */
static cJSON *wait_replicas(cluster *k, bool (*pred)(const cJSON *)) {
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    long long rev;
    char *text = etcd_get(&k->e, "/scened/replicas/b1", &rev);
    cJSON *v = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (v && pred(v))
      return v;
    cJSON_Delete(v);
  }
  return NULL;
}

static bool has_follower(const cJSON *v) { return list_size(v, "followers") == 1; }
static bool one_insync(const cJSON *v) { return list_size(v, "insync") == 1; }
static bool none_insync(const cJSON *v) { return list_size(v, "insync") == 0; }

static long long epoch_of(const cJSON *v) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(v, "epoch");
  return cJSON_IsNumber(e) ? (long long)e->valuedouble : -1;
}

static bool write_ok(cluster *k, int at, const char *fmt, double a, double b) {
  cJSON *r = t_client_call(&k->c[at], fmt, a, b);
  bool ok = t_resp_ok(r);
  if (!ok)
    t_report("a write failed", r);
  cJSON_Delete(r);
  return ok;
}

/* Three daemons with --replicas 1 and --replica-timeout timeout; b1.main (keeping HISTORY
 * ticks) with a transform "mover" (*entity) and five named ones, its follower in sync. Returns
 * the follower's index (-1: no start); *at is the owner's. */
static int start(cluster *k, const char *timeout, int *at, double *entity) {
  static const char *extra[] = {"--replicas", "1", "--replica-timeout", NULL, NULL};
  extra[3] = timeout;
  memset(k, 0, sizeof *k);
  k->own_data = true;
  k->extra = (const char *const *)extra;
  if (!cluster_start_prepared(k))
    return -1;
  char line[128];
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"b1.main\",\"history\":%d}",
           HISTORY);
  cJSON *r = wait_ok_anywhere(k, line, 15000, at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  cJSON *rep = wait_replicas(k, has_follower);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
  int fi = -1;
  for (int i = 0; i < NODES; i++)
    if (strcmp(node_name(i), first(rep, "followers")) == 0)
      fi = i;
  cJSON_Delete(rep);
  CU_ASSERT_FATAL(fi >= 0 && fi != *at);
  r = t_client_call(&k->c[*at], "{\"cmd\":\"transform.create\",\"world\":\"b1.main\","
                                "\"name\":\"mover\",\"t\":[0,0,0]}");
  CU_ASSERT_FATAL(t_resp_ok(r));
  *entity = t_resp_num(r, "entity");
  cJSON_Delete(r);
  for (int i = 0; i < 5; i++)
    CU_ASSERT_FATAL(
        write_ok(k, *at,
                 "{\"cmd\":\"transform.create\",\"world\":\"b1.main\",\"name\":\"t%.0f\","
                 "\"t\":[%.0f,1,1]}",
                 i, i));
  rep = wait_replicas(k, one_insync);
  CU_ASSERT_FATAL(rep && strcmp(first(rep, "insync"), node_name(fi)) == 0);
  cJSON_Delete(rep);
  return fi;
}

/* transform.get of entity on daemon i, at tick (< 0: now); its local and world matrices as
 * text in out (NULL on failure), and the tick answered. */
static long long get_at(cluster *k, int i, double entity, long long tick, char **out) {
  cJSON *r = tick < 0 ? t_client_call(&k->c[i],
                                      "{\"cmd\":\"transform.get\",\"world\":\"b1.main\","
                                      "\"entity\":%.0f}",
                                      entity)
                      : t_client_call(&k->c[i],
                                      "{\"cmd\":\"transform.get\",\"world\":\"b1.main\","
                                      "\"entity\":%.0f,\"tick\":%lld}",
                                      entity, tick);
  *out = NULL;
  long long answered = -1;
  if (t_resp_ok(r)) {
    cJSON *both = cJSON_CreateArray();
    cJSON_AddItemToArray(both, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(r, "local"), true));
    cJSON_AddItemToArray(both, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(r, "world"), true));
    *out = cJSON_PrintUnformatted(both);
    cJSON_Delete(both);
    answered = (long long)t_resp_num(r, "tick");
  } else if (tick >= 0) {
    t_report("a read at a past tick failed", r);
  }
  cJSON_Delete(r);
  return answered;
}

/* The mover goes through 20 positions over about a second, each write in a tick of its own. */
static void move_it(cluster *k, int at, double entity) {
  for (int i = 1; i <= 20; i++) {
    CU_ASSERT(write_ok(k, at,
                       "{\"cmd\":\"transform.set_local\",\"world\":\"b1.main\",\"entity\":%.0f,"
                       "\"t\":[%.0f,2,3]}",
                       entity, i));
    t_sleep_ms(50);
  }
}

/* The follower closes its ticks at the owner's numbers, so after kill -9 of the owner the
 * follower that takes over goes on from the owner's tick count (no start over, no step back)
 * and answers every read at a past tick of the last PAST exactly as the owner did. */
static void test_ticks_go_on(void) {
  cluster k;
  int at = -1;
  double entity = 0;
  int fi = start(&k, "5000", &at, &entity); /* in sync throughout, even on a busy machine */
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  move_it(&k, at, entity);
  char *now_text;
  long long now = get_at(&k, at, entity, -1, &now_text);
  free(now_text);
  CU_ASSERT_FATAL(now > PAST);
  static char *before[PAST + 1];
  for (int j = 0; j <= PAST; j++)
    get_at(&k, at, entity, now - PAST + j, &before[j]);
  long killed = t_now_ms();
  node_stop(&k, at, SIGKILL);
  char line[128];
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"b1.main\",\"entity\":%.0f}",
           entity);
  int now_at = -1;
  cJSON *r = wait_ok_anywhere(&k, line, TTL_MS + 15000, &now_at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  long long after = (long long)t_resp_num(r, "tick");
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(now_at, fi);
  int same = 0;
  for (int j = 0; j <= PAST; j++) {
    char *text;
    get_at(&k, now_at, entity, now - PAST + j, &text);
    if (before[j] && text && strcmp(before[j], text) == 0)
      same++;
    else if (same == j)
      printf("\n  tick %lld: %s on the owner, %s after the takeover\n", now - PAST + j,
             before[j] ? before[j] : "(none)", text ? text : "(none)");
    free(text);
    free(before[j]);
    before[j] = NULL;
  }
  printf("\n  owner %s at tick %lld killed; %s serves after %ld ms at tick %lld; %d of %d past "
         "ticks read the same\n",
         node_name(at), now, node_name(now_at), t_now_ms() - killed, after, same, PAST + 1);
  CU_ASSERT(after >= now);
  /* no jump either: the ticks the takeover took, at 60 Hz, and a margin */
  CU_ASSERT(after <= now + (t_now_ms() - killed) * 60 / 1000 + 60);
  CU_ASSERT_EQUAL(same, PAST + 1);
  /* and the clock runs on from there */
  long long later = -1;
  for (long deadline = t_now_ms() + 5000; t_now_ms() < deadline && later <= after; t_sleep_ms(50)) {
    char *text;
    later = get_at(&k, now_at, entity, -1, &text);
    free(text);
  }
  CU_ASSERT(later > after);
  cluster_stop(&k);
}

/* world.promote on daemon i; the response. */
static cJSON *promote(cluster *k, int i, const char *world, const char *node) {
  return t_client_call(&k->c[i], "{\"cmd\":\"world.promote\",\"world\":\"%s\",\"node\":\"%s\"}",
                       world, node);
}

static void expect_error(cJSON *r, const char *code) {
  CU_ASSERT(r && !t_resp_ok(r) && strcmp(t_resp_code(r), code) == 0);
  if (!r || t_resp_ok(r) || strcmp(t_resp_code(r), code) != 0) {
    printf("\n  expected %s\n", code);
    t_report("world.promote did not answer as expected", r);
  }
  cJSON_Delete(r);
}

/* How many of n reads of b1.main on daemon i, one each 100 ms, answered UNAVAILABLE. */
static int unavailable_reads(cluster *k, int i, int n) {
  int got = 0;
  for (int j = 0; j < n; j++, t_sleep_ms(100)) {
    cJSON *r = t_client_call(&k->c[i], "{\"cmd\":\"transform.find\",\"world\":\"b1.main\","
                                       "\"path\":\"t0\"}");
    if (r && strcmp(t_resp_code(r), "UNAVAILABLE") == 0)
      got++;
    else if (got == j)
      t_report("a read of a group without owner did not answer UNAVAILABLE", r);
    cJSON_Delete(r);
  }
  return got;
}

/* Refusals while the owner lives: a live owner (BAD_REQUEST, on every daemon); a group nobody
 * recorded (NOT_FOUND). */
static void check_refusals(cluster *k, int fi) {
  for (int i = 0; i < NODES; i++)
    expect_error(promote(k, i, "b1.main", node_name(fi)), "BAD_REQUEST");
  expect_error(promote(k, fi, "nothing.main", node_name(fi)), "NOT_FOUND");
}

/* The in-sync set recorded empty (the follower stopped past --replica-timeout), then kill -9 of
 * the owner: nobody claims, its world answers UNAVAILABLE, until world.promote (sent to the
 * third daemon) makes the follower the owner from its copy: it answers node, addr and
 * lag_ticks, the world is served again with what the follower had, its ticks going on from
 * the owner's, and the new owner records a follower of its own. */
static void test_promote(void) {
  cluster k;
  int at = -1;
  double entity = 0;
  /* a short timeout: the follower, stopped, leaves insync well within its lease */
  int fi = start(&k, "300", &at, &entity);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  int third = NODES - at - fi;
  check_refusals(&k, fi);
  expect_error(promote(&k, third, "b1.main", node_name(third)), "BAD_REQUEST"); /* owner live */
  move_it(&k, at, entity);
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  /* held until the follower leaves insync, then recorded so */
  CU_ASSERT(write_ok(&k, at,
                     "{\"cmd\":\"transform.set_local\",\"world\":\"b1.main\",\"entity\":%.0f,"
                     "\"t\":[%.0f,2,3]}",
                     entity, 21));
  cJSON *rep = wait_replicas(&k, none_insync);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
  long long old_epoch = epoch_of(rep);
  CU_ASSERT_STRING_EQUAL(t_resp_str(rep, "owner"), node_name(at));
  cJSON_Delete(rep);
  char *text;
  long long owner_tick = get_at(&k, at, entity, -1, &text);
  free(text);
  node_stop(&k, at, SIGKILL);
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  long long rev;
  char *key = NULL;
  for (long deadline = t_now_ms() + TTL_MS + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    free(key);
    if (!(key = etcd_get(&k.e, "/scened/groups/b1", &rev)))
      break;
  }
  CU_ASSERT_PTR_NULL_FATAL(key); /* the owner's lease expired */
  CU_ASSERT_EQUAL(unavailable_reads(&k, third, 10), 10);
  CU_ASSERT_EQUAL(unavailable_reads(&k, fi, 10), 10);
  expect_error(promote(&k, third, "b1.main", node_name(third)), "NOT_FOUND"); /* no follower */
  expect_error(promote(&k, third, "b1.main", "nobody"), "NOT_FOUND");

  long t0 = t_now_ms();
  cJSON *r = promote(&k, third, "b1.main", node_name(fi));
  long took = t_now_ms() - t0;
  CU_ASSERT(t_resp_ok(r));
  if (!t_resp_ok(r))
    t_report("world.promote failed", r);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", k.d[fi].port);
  const cJSON *lag = cJSON_GetObjectItemCaseSensitive(r, "lag_ticks");
  CU_ASSERT_STRING_EQUAL(t_resp_str(r, "node"), node_name(fi));
  CU_ASSERT_STRING_EQUAL(t_resp_str(r, "addr"), addr);
  CU_ASSERT(cJSON_IsNumber(lag) && lag->valuedouble >= 0 &&
            lag->valuedouble == (double)(long long)lag->valuedouble);
  printf("\n  owner %s killed with insync empty; world.promote to %s on %s answered in %ld ms, "
         "lag_ticks %.0f\n",
         node_name(at), node_name(fi), node_name(third), took,
         cJSON_IsNumber(lag) ? lag->valuedouble : -1);
  cJSON_Delete(r);

  /* Served by the follower from its copy: what it had before it stopped is there. */
  for (int i = 0; i < 5; i++) {
    cJSON *f = t_client_call(
        &k.c[fi], "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"t%d\"}", i);
    CU_ASSERT(t_resp_ok(f));
    cJSON_Delete(f);
  }
  long long tick = get_at(&k, fi, entity, -1, &text);
  CU_ASSERT_PTR_NOT_NULL(text);
  /* the last position it applied: 21 (read once it ran again), or 20 if its link had ended */
  if (text)
    CU_ASSERT(strstr(text, ",21,2,3,1]") || strstr(text, ",20,2,3,1]"));
  free(text);
  long since = t_now_ms() - t0;
  printf("  the owner was at tick %lld, the promoted follower is at %lld, %ld ms after "
         "world.promote\n",
         owner_tick, tick, since);
  /* its copy's clock stood still while the group had no owner, and runs from the promote on */
  CU_ASSERT(tick >= owner_tick);
  CU_ASSERT(tick <= owner_tick + since * 60 / 1000 + 30);
  CU_ASSERT(t_daemon_log_contains(&k.d[fi], "group promoted from its copy"));
  /* Followers again: the third daemon, in the new epoch written by the new owner. */
  rep = wait_replicas(&k, has_follower);
  for (long deadline = t_now_ms() + 15000;
       rep && epoch_of(rep) <= old_epoch && t_now_ms() < deadline; t_sleep_ms(20)) {
    cJSON_Delete(rep);
    rep = wait_replicas(&k, has_follower);
  }
  CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
  CU_ASSERT(epoch_of(rep) > old_epoch);
  CU_ASSERT_STRING_EQUAL(t_resp_str(rep, "owner"), node_name(fi));
  CU_ASSERT_STRING_EQUAL(first(rep, "followers"), node_name(third));
  cJSON_Delete(rep);
  CU_ASSERT(write_ok(&k, fi,
                     "{\"cmd\":\"transform.create\",\"world\":\"b1.main\",\"name\":\"after%.0f\","
                     "\"t\":[%.0f,0,0]}",
                     1, 1));
  /* It has a live owner now. */
  expect_error(promote(&k, third, "b1.main", node_name(fi)), "BAD_REQUEST");
  cluster_stop(&k);
}

int t_register_cluster_replicas_promote(void) {
  static const t_test tests[] = {
      {"ticks and history go on from the owner's after kill -9", test_ticks_go_on},
      {"an empty in-sync set, the owner killed: UNAVAILABLE, then world.promote", test_promote},
  };
  return T_ADD_SUITE("cluster_replicas_promote", NULL, NULL, tests);
}

/* Replicas (--replicas 1, three daemons each on its own data directory): a follower's ticks are
 * its owner's (tick marks on the change stream), so rewind answers the same after a takeover;
 * and world.promote, which makes a follower the owner of a group that has none. */
#include "harness.h"
#include "replica_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HISTORY 600 /* ticks of history b1.main keeps: 10 s at 60 Hz */
#define PAST 60     /* ticks read back at the end of the writes */
#define LONG_TTL "10"
#define LONG_TTL_MS 10000

/* The replicas key of b1 once pred holds of it (15 s at most); NULL when it never did. */
static cJSON *wait_replicas(cluster *k, bool (*pred)(const cJSON *)) {
  return wait_json(k, "/scened/replicas/b1", pred, NULL);
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

/* b1.main (keeping HISTORY ticks) with a transform "mover" (*entity) and five named ones, on
 * started daemons, its follower in sync: the follower's index; *at is the owner's. */
static int setup(cluster *k, int *at, double *entity) {
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

/* Three daemons with --replicas 1, --replica-timeout timeout, --max-line max_line,
 * --output-limit output_limit and, unless NULL, --lease-ttl lease_ttl (the fixtures' TTL
 * otherwise), then setup: the follower's index (-1: no start). */
static int start_limited(cluster *k, const char *timeout, const char *max_line,
                         const char *output_limit, const char *lease_ttl, int *at, double *entity) {
  static const char *extra[] = {
      "--replicas",     "1",  "--replica-timeout", NULL, "--max-line", NULL,
      "--output-limit", NULL, "--lease-ttl",       NULL, NULL};
  extra[3] = timeout;
  extra[5] = max_line;
  extra[7] = output_limit;
  extra[8] = lease_ttl ? "--lease-ttl" : NULL; /* the last one given counts */
  extra[9] = lease_ttl;
  memset(k, 0, sizeof *k);
  k->own_data = true;
  k->extra = (const char *const *)extra;
  if (!cluster_start_prepared(k))
    return -1;
  return setup(k, at, entity);
}

/* start_limited with the default --output-limit. */
static int start_with(cluster *k, const char *timeout, const char *max_line, int *at,
                      double *entity) {
  return start_limited(k, timeout, max_line, "67108864", NULL, at, entity);
}

/* start_with the default --max-line. */
static int start(cluster *k, const char *timeout, int *at, double *entity) {
  return start_with(k, timeout, "1048576", at, entity);
}

/* transform.get of entity on daemon i, at tick (< 0: now); its local and world matrices as
 * text in out (at a past tick, its error as text when refused; NULL without an answer), and
 * the tick answered (-1: refused). */
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
  } else if (tick >= 0 && r) {
    /* a refusal (a tick before the transform was made) is an answer to compare as well */
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
    *out = cJSON_PrintUnformatted(e);
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

/* How many of the PAST + 1 ticks up to now daemon i answers as before[] holds the owner's
 * answers (each freed); the first that differs is printed. */
static int same_past(cluster *k, int i, double entity, long long now, char **before) {
  int same = 0;
  for (int j = 0; j <= PAST; j++) {
    char *text;
    get_at(k, i, entity, now - PAST + j, &text);
    if (before[j] && text && strcmp(before[j], text) == 0)
      same++;
    else if (same == j)
      printf("\n  tick %lld: %s on the owner, %s after the takeover\n", now - PAST + j,
             before[j] ? before[j] : "(none)", text ? text : "(none)");
    free(text);
    free(before[j]);
    before[j] = NULL;
  }
  return same;
}

/* The owner's tick once PAST ticks have closed since the world began (the writes may have
 * taken less); -1 if that does not come within 10 s. */
static long long past_window(cluster *k, int at, double entity) {
  long long now = -1;
  for (long deadline = t_now_ms() + 10000; now <= PAST && t_now_ms() < deadline; t_sleep_ms(20)) {
    char *text;
    now = get_at(k, at, entity, -1, &text);
    free(text);
  }
  return now;
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
  long long now = past_window(&k, at, entity);
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
  int same = same_past(&k, now_at, entity, now, before);
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

/* A follower that starts after the owner's writes reads them from the owner's backlog, with no
 * tick marks between them: it closes each world's ticks up to each record's, so after kill -9
 * of the owner it answers reads at those past ticks as the owner did. */
static void test_ticks_from_backlog(void) {
  static const char *const extra[] = {"--replicas", "1", "--replica-timeout", "5000", NULL};
  cluster k;
  if (!replicas_cluster(&k, extra))
    return;
  node_stop(&k, 1, SIGTERM);
  node_stop(&k, 2, SIGTERM);
  char line[128];
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"b1.main\",\"history\":%d}",
           HISTORY);
  int at = -1;
  cJSON *r = wait_ok_anywhere(&k, line, 15000, &at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL_FATAL(at, 0);
  r = t_client_call(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"b1.main\","
                             "\"name\":\"mover\",\"t\":[0,0,0]}");
  CU_ASSERT_FATAL(t_resp_ok(r));
  double entity = t_resp_num(r, "entity");
  cJSON_Delete(r);
  move_it(&k, 0, entity);
  long long now = past_window(&k, 0, entity);
  CU_ASSERT_FATAL(now > PAST);
  static char *before[PAST + 1];
  for (int j = 0; j <= PAST; j++)
    get_at(&k, 0, entity, now - PAST + j, &before[j]);
  /* n1 comes: the owner's only candidate, it follows from the first record */
  CU_ASSERT_FATAL(node_start(&k, 1));
  cJSON *rep = wait_replicas(&k, one_insync);
  CU_ASSERT_FATAL(rep && strcmp(first(rep, "insync"), node_name(1)) == 0);
  cJSON_Delete(rep);
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"b1.main\",\"entity\":%.0f}",
           entity);
  /* The ticks the owner closed with no change in them reach the follower as tick marks: the
   * kill comes once the follower (read through follower_reads) has had them up to `now`. */
  t_client fr;
  CU_ASSERT_FATAL(t_client_connect(&fr, k.d[1].port) == 0);
  cJSON_Delete(t_client_call(&fr, "{\"cmd\":\"hello\",\"follower_reads\":true}"));
  long long told = 0;
  for (long deadline = t_now_ms() + 10000; told < now && t_now_ms() < deadline; t_sleep_ms(10)) {
    r = t_client_call(&fr, "%s", line);
    told = t_resp_ok(r) ? (long long)t_resp_num(r, "tick") : 0;
    cJSON_Delete(r);
  }
  t_client_close(&fr);
  CU_ASSERT_FATAL(told >= now);
  node_stop(&k, 0, SIGKILL);
  int now_at = -1;
  r = wait_ok_anywhere(&k, line, TTL_MS + 15000, &now_at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  long long after = (long long)t_resp_num(r, "tick");
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(now_at, 1);
  int same = same_past(&k, now_at, entity, now, before);
  printf("\n  writes up to tick %lld, then a follower from the backlog; after kill -9 it serves "
         "at tick %lld; %d of %d past ticks read the same\n",
         now, after, same, PAST + 1);
  CU_ASSERT(after >= now);
  CU_ASSERT_EQUAL(same, PAST + 1);
  cluster_stop(&k);
}

/* A record whose request line is near --max-line grows on the stream (JSON escaping makes a tab
 * six bytes): the follower reads it all the same, applies it and stays in sync. */
static void test_long_record(void) {
  cluster k;
  int at = -1;
  double entity = 0;
  int fi = start_with(&k, "5000", "4096", &at, &entity);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  static char line[4096];
  int n = snprintf(line, sizeof line,
                   "{\"cmd\":\"transform.create\",\"world\":\"b1.main\",\"name\":\"tabs\"");
  while (n < 4000)
    line[n++] = '\t';
  line[n++] = '}';
  line[n] = '\0';
  cJSON *r = t_client_call(&k.c[at], "%s", line);
  CU_ASSERT(t_resp_ok(r));
  cJSON_Delete(r);
  CU_ASSERT(write_ok(&k, at,
                     "{\"cmd\":\"transform.create\",\"world\":\"b1.main\",\"name\":\"after%.0f\","
                     "\"t\":[%.0f,0,0]}",
                     1, 1));
  /* world.create, mover, t0 to t4, the long one and the one after */
  const char *applied = "scened_replica_applied_total{group=\"b1\"}";
  double got = -1;
  for (long deadline = t_now_ms() + 15000; got != 9 && t_now_ms() < deadline; t_sleep_ms(50))
    got = metric_of(&k, fi, applied);
  printf("\n  a %d-byte request (--max-line 4096): the follower applied %g of 9 records\n", n, got);
  CU_ASSERT_EQUAL(got, 9);
  cJSON *rep = wait_replicas(&k, one_insync);
  CU_ASSERT(rep && strcmp(first(rep, "insync"), node_name(fi)) == 0);
  cJSON_Delete(rep);
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

/* Whether daemon i comes to answer UNAVAILABLE for b1.main (its watch saw the owner's key go):
 * within 15 s. */
static bool wait_unavailable(cluster *k, int i) {
  bool seen = false;
  for (long deadline = t_now_ms() + 15000; !seen && t_now_ms() < deadline; t_sleep_ms(20)) {
    cJSON *f = t_client_call(&k->c[i], "{\"cmd\":\"transform.find\",\"world\":\"b1.main\","
                                       "\"path\":\"t0\"}");
    seen = f && strcmp(t_resp_code(f), "UNAVAILABLE") == 0;
    cJSON_Delete(f);
  }
  return seen;
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
  CU_ASSERT(wait_unavailable(&k, third) && wait_unavailable(&k, fi));
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

/* The replicas key's tick (-1: none). */
static long long recorded_tick(cluster *k) {
  long long rev, tick = -1;
  char *text = etcd_get(&k->e, "/scened/replicas/b1", &rev);
  cJSON *v = text ? cJSON_Parse(text) : NULL;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "tick");
  if (cJSON_IsNumber(t))
    tick = (long long)t->valuedouble;
  cJSON_Delete(v);
  free(text);
  return tick;
}

/* Batches of 200 named transforms (about 25 kB a record on the stream) on daemon at until its
 * log says a follower's link was closed for not keeping up, at most 600 (the kernel's socket
 * buffers take a few MB first); how many were sent (-1: a batch failed, or the link stayed). */
static int write_until_link_closed(cluster *k, int at) {
  static char batch[32768];
  const char *closed = "the follower does not keep up";
  for (int i = 0; i < 600; i++) {
    if (i % 10 == 0 && t_daemon_log_contains(&k->d[at], closed))
      return i;
    size_t n =
        (size_t)snprintf(batch, sizeof batch, "{\"cmd\":\"batch\",\"world\":\"b1.main\",\"ops\":[");
    for (int j = 0; j < 200; j++)
      n += (size_t)snprintf(batch + n, sizeof batch - n,
                            "%s{\"cmd\":\"transform.create\",\"name\":\"filler-%03d-%03d-"
                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\",\"t\":[%d,0,0]}",
                            j ? "," : "", i, j, j);
    snprintf(batch + n, sizeof batch - n, "]}");
    cJSON *r = t_client_call(&k->c[at], "%s", batch);
    bool ok = t_resp_ok(r);
    if (!ok)
      t_report("a batch failed", r);
    cJSON_Delete(r);
    if (!ok)
      return -1;
  }
  return t_daemon_log_contains(&k->d[at], closed) ? 600 : -1;
}

/* A follower stopped past --replica-timeout, whose link the owner then closed for not keeping
 * up (--output-limit 4096), while the owner went on alone and recorded its tick: promoted after
 * the owner's kill -9, it says it may lack at least the ticks between its link's end and that
 * record, and serves what it has, its clock going on from its copy's. */
static void test_promote_lagging(void) {
  cluster k;
  int at = -1;
  double entity = 0;
  /* a lease long enough for the follower to stay a live node while it is stopped */
  int fi = start_limited(&k, "300", "1048576", "4096", LONG_TTL, &at, &entity);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  int third = NODES - at - fi;
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  CU_ASSERT(write_ok(&k, at,
                     "{\"cmd\":\"transform.set_local\",\"world\":\"b1.main\",\"entity\":%.0f,"
                     "\"t\":[%.0f,2,3]}",
                     entity, 1));
  cJSON *rep = wait_replicas(&k, none_insync);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
  cJSON_Delete(rep);
  int batches = write_until_link_closed(&k, at);
  CU_ASSERT_FATAL(batches >= 0);
  char *text;
  long long closed_at = get_at(&k, at, entity, -1, &text); /* the link ended before this */
  free(text);
  long long rec = -1;
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(50))
    if ((rec = recorded_tick(&k)) >= closed_at + 10)
      break;
  CU_ASSERT_FATAL(rec >= closed_at + 10); /* recorded again while alone */
  node_stop(&k, at, SIGKILL);
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  long long rev;
  char *key = NULL;
  for (long deadline = t_now_ms() + LONG_TTL_MS + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    free(key);
    if (!(key = etcd_get(&k.e, "/scened/groups/b1", &rev)))
      break;
  }
  CU_ASSERT_PTR_NULL_FATAL(key);
  CU_ASSERT(wait_unavailable(&k, third));
  cJSON *r = promote(&k, third, "b1.main", node_name(fi));
  CU_ASSERT(t_resp_ok(r));
  if (!t_resp_ok(r))
    t_report("world.promote failed", r);
  const cJSON *lag = cJSON_GetObjectItemCaseSensitive(r, "lag_ticks");
  double lag_ticks = cJSON_IsNumber(lag) ? lag->valuedouble : -1;
  cJSON_Delete(r);
  long long tick = get_at(&k, fi, entity, -1, &text);
  free(text);
  printf("\n  %d batches until the link closed, before tick %lld; the owner recorded tick %lld; "
         "promoted, the follower says lag_ticks %.0f and serves at tick %lld\n",
         batches, closed_at, rec, lag_ticks, tick);
  CU_ASSERT(lag_ticks >= (double)(rec - closed_at));
  CU_ASSERT(tick >= 0 && tick < rec); /* its own count, from what it has */
  cluster_stop(&k);
}

int t_register_cluster_replicas_promote(void) {
  static const t_test tests[] = {
      {"ticks and history go on from the owner's after kill -9", test_ticks_go_on},
      {"a follower from the backlog closes the ticks of its records", test_ticks_from_backlog},
      {"a record near --max-line reaches the follower", test_long_record},
      {"an empty in-sync set, the owner killed: UNAVAILABLE, then world.promote", test_promote},
      {"world.promote of a follower whose link ended says what it may lack", test_promote_lagging},
  };
  return T_ADD_SUITE("cluster_replicas_promote", NULL, NULL, tests);
}

/* Integration tests of rewind against the real daemon: world.create's "history" and its
 * limits, world.list showing it, transform.get answering "tick" (now), reads at a past tick
 * that equal what that tick's frame carried (1,000 random ticks against a subscriber's
 * mirror), fractional ticks, transforms created or destroyed inside the window, relative and
 * trs at a tick, and every refusal (outside the window, no history, bad ticks) changing
 * nothing. */
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static t_daemon dhist;

#define TICK_HZ "50"

/* ---- helpers ----------------------------------------------------------------------------- */

static bool matrix_of(const cJSON *a, float m[16]) {
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 16)
    return false;
  int i = 0;
  for (const cJSON *x = a->child; x; x = x->next)
    m[i++] = (float)x->valuedouble; /* printed exactly: the same float32 */
  return true;
}

static unsigned long long create(t_client *c, const char *w, const char *extra) {
  cJSON *r = OK(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s}", w, extra);
  unsigned long long e = r ? t_resp_id(r, "entity") : 0;
  cJSON_Delete(r);
  return e;
}

/* ---- creating and listing ---------------------------------------------------------------- */

static void test_history_field(void) {
  t_client c;
  CONNECT_FATAL(&c, dhist.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"hf.a\",\"history\":0}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"hf.b\",\"history\":3600}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"hf.c\"}");
  ERR(&c, "LIMIT", "{\"cmd\":\"world.create\",\"world\":\"hf.d\",\"history\":3601}");
  ERR(&c, "LIMIT", "{\"cmd\":\"world.create\",\"world\":\"hf.d\",\"history\":1e12}");
  static const char *bad[] = {"-1", "1.5", "\"60\"", "null", "true", "[60]", "-0.5"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.create\",\"world\":\"hf.d\",\"history\":%s}", bad[i]);
  /* the refusals created nothing; the list shows each world's history */
  cJSON *r = OK(&c, "{\"cmd\":\"world.list\"}");
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive(r, "worlds");
  int seen = 0;
  for (const cJSON *w = ws ? ws->child : NULL; w; w = w->next) {
    const char *name = t_resp_str(w, "name");
    double h = t_resp_num(w, "history");
    CHECK(strcmp(name, "hf.d") != 0, w);
    if (!strcmp(name, "hf.a") || !strcmp(name, "hf.c"))
      CHECK(h == 0, w), seen++;
    if (!strcmp(name, "hf.b"))
      CHECK(h == 3600, w), seen++;
  }
  CU_ASSERT_EQUAL(seen, 3);
  cJSON_Delete(r);
  t_client_close(&c);
}

static void test_refusals(void) {
  t_client c;
  CONNECT_FATAL(&c, dhist.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"rf.h\",\"history\":20}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"rf.n\"}");
  unsigned long long e = create(&c, "rf.h", ",\"t\":[1,2,3]");
  unsigned long long f = create(&c, "rf.n", "");
  long now = TICK_PAST(&c, "rf.h", e, 0);
  now = TICK_PAST(&c, "rf.h", e, now);
  /* now, as every get answers it */
  cJSON *r = OK(&c, "{\"cmd\":\"transform.get\",\"world\":\"rf.n\",\"entity\":%llu}", f);
  CHECK(t_resp_has(r, "tick") && t_resp_num(r, "tick") >= 1, r);
  cJSON_Delete(r);
  char *msg = NULL;
  /* a world without history */
  ERR_MESSAGE(&c, "NOT_FOUND", &msg,
              "{\"cmd\":\"transform.get\",\"world\":\"rf.n\",\"entity\":%llu,\"tick\":%ld}", f,
              now);
  CU_ASSERT_PTR_NOT_NULL(msg ? strstr(msg, "history") : NULL);
  free(msg);
  /* outside the window: the future, and before it; the message names the window */
  msg = NULL;
  ERR_MESSAGE(&c, "NOT_FOUND", &msg,
              "{\"cmd\":\"transform.get\",\"world\":\"rf.h\",\"entity\":%llu,\"tick\":%ld}", e,
              now + 1000);
  CU_ASSERT_PTR_NOT_NULL(msg ? strstr(msg, "ticks") : NULL);
  free(msg);
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.relative\",\"world\":\"rf.h\",\"entity\":%llu,\"to\":%llu,\"tick\":%"
      "ld}",
      e, e, now + 1000);
  /* the window holds 20 ticks: once more than 20 have run, the first is gone */
  TICK_PAST(&c, "rf.h", e, now + 25);
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.get\",\"world\":\"rf.h\",\"entity\":%llu,\"tick\":%ld}", e, now);
  /* bad ticks */
  static const char *bad[] = {"-1", "\"3\"", "null", "true", "[3]", "-0.5", "1e999", "-1e999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ERR(&c, "BAD_REQUEST",
        "{\"cmd\":\"transform.get\",\"world\":\"rf.h\",\"entity\":%llu,\"tick\":%s}", e, bad[i]);
    ERR(&c, "BAD_REQUEST",
        "{\"cmd\":\"transform.relative\",\"world\":\"rf.h\",\"entity\":%llu,\"to\":%llu,\"tick\":%"
        "s}",
        e, e, bad[i]);
  }
  t_client_close(&c);
}

/* ---- past ticks equal frames --------------------------------------------------------------- */

#define N_ENT 24
#define MAX_TICKS 400

/* The world as a whole-world subscriber saw it after each frame: its tick, and for each
 * entity whether it had a transform and its world matrix. */
typedef struct seen_tick {
  long tick;
  bool alive[N_ENT];
  float m[N_ENT][16];
} seen_tick;

static int slot_of(const unsigned long long *ids, unsigned long long e) {
  for (int i = 0; i < N_ENT; i++)
    if (ids[i] == e)
      return i;
  return -1;
}

static void test_past_equals_frames(void) {
  t_client c, sub;
  CONNECT_FATAL(&c, dhist.port);
  CONNECT_FATAL(&sub, dhist.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"pf\",\"history\":3000}");
  unsigned long long ids[N_ENT];
  for (int i = 0; i < N_ENT; i++) {
    char extra[96];
    /* a few small trees: every fourth is a root, the others hang under the one before */
    if (i % 4)
      snprintf(extra, sizeof extra, ",\"parent\":%llu,\"t\":[%d,0,0]", ids[i - 1], i);
    else
      snprintf(extra, sizeof extra, ",\"t\":[0,%d,0]", i);
    ids[i] = create(&c, "pf", extra);
  }
  cJSON *r = OK(&sub, "{\"cmd\":\"subscribe\",\"world\":\"pf\"}");
  cJSON_Delete(r);
  static seen_tick seen[MAX_TICKS];
  int nseen = 0;
  seen_tick cur = {0};
  uint64_t x = 0x9E3779B97F4A7C15ull;
  long deadline = t_now_ms() + 20000;
  int destroyed = -1;
  while (nseen < 150 && t_now_ms() < deadline) {
    /* move some, turn some; once, destroy a subtree root and later make a new transform */
    for (int k = 0; k < 4; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      int i = (int)(x % N_ENT);
      if (i == destroyed)
        continue;
      OKD(&c,
          "{\"cmd\":\"transform.set_local\",\"world\":\"pf\",\"entity\":%llu,\"t\":[%d,%d,%d],"
          "\"r\":[0,0,%d,10]}",
          ids[i], (int)(x >> 8) % 50, (int)(x >> 16) % 50, (int)(x >> 24) % 50, (int)(x >> 32) % 9);
    }
    if (nseen == 60 && destroyed < 0) {
      destroyed = 5;
      OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"pf\",\"entity\":%llu}", ids[5]);
    }
    cJSON *f = t_next_event(&sub, 5000);
    if (!f)
      break;
    if (t_resp_str_is(f, "event", "frame")) {
      const cJSON *set = cJSON_GetObjectItemCaseSensitive(f, "set");
      for (const cJSON *s = set ? set->child : NULL; s; s = s->next) {
        int i = slot_of(ids, t_resp_id(s, "e"));
        if (i >= 0 && matrix_of(cJSON_GetObjectItemCaseSensitive(s, "m"), cur.m[i]))
          cur.alive[i] = true;
      }
      const cJSON *removed = cJSON_GetObjectItemCaseSensitive(f, "removed");
      for (const cJSON *s = removed ? removed->child : NULL; s; s = s->next) {
        int i = slot_of(ids, (unsigned long long)s->valuedouble);
        if (i >= 0)
          cur.alive[i] = false;
      }
      cur.tick = (long)t_resp_num(f, "tick");
      if (nseen < MAX_TICKS)
        seen[nseen++] = cur;
    }
    cJSON_Delete(f);
  }
  CU_ASSERT_TRUE(nseen >= 100);
  /* 1,000 reads at random ticks the frames covered (a tick without a frame changed nothing:
   * it equals the frame before it) */
  int checked = 0, absent = 0, wrong = 0;
  long first = seen[0].tick, last = nseen ? seen[nseen - 1].tick : 0;
  for (int q = 0; q < 1000 && nseen; q++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    long t = first + (long)(x % (uint64_t)(last - first + 1));
    int k = nseen - 1;
    while (k > 0 && seen[k].tick > t)
      k--;
    int i = (int)((x >> 20) % N_ENT);
    cJSON *g = CALL(&c, "{\"cmd\":\"transform.get\",\"world\":\"pf\",\"entity\":%llu,\"tick\":%ld}",
                    ids[i], t);
    if (!seen[k].alive[i]) {
      wrong += !g || strcmp(t_resp_code(g), "NOT_FOUND") != 0;
      absent++;
    } else {
      float m[16];
      bool same = g && t_resp_ok(g) && matrix_of(cJSON_GetObjectItemCaseSensitive(g, "world"), m) &&
                  memcmp(m, seen[k].m[i], sizeof m) == 0 && t_resp_num(g, "tick") == (double)t;
      if (!same && wrong < 3)
        t_report("past get differs from the frame", g);
      wrong += !same;
    }
    checked++;
    cJSON_Delete(g);
  }
  CU_ASSERT_EQUAL(checked, 1000);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_TRUE(absent > 0); /* the destroyed subtree root was asked for after it went */
  t_client_close(&sub);
  t_client_close(&c);
}

/* ---- fractions, births and deaths, relative and trs ---------------------------------------- */

static void test_fraction_and_lifetimes(void) {
  t_client c;
  CONNECT_FATAL(&c, dhist.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"fr\",\"history\":600}");
  unsigned long long e = create(&c, "fr", ",\"t\":[0,0,0],\"r\":[0,0,0,1],\"s\":1");
  unsigned long long to = create(&c, "fr", ",\"t\":[0,5,0],\"s\":2");
  long a = TICK_PAST(&c, "fr", e, 0);
  /* at tick a: translation 0, no turn; then the next tick: translation 10, 90 degrees about z,
   * scale 3 */
  OKD(&c,
      "{\"cmd\":\"transform.set_local\",\"world\":\"fr\",\"entity\":%llu,\"t\":[10,0,0],"
      "\"r\":[0,0,0.70710678,0.70710678],\"s\":3}",
      e);
  long b = TICK_PAST(&c, "fr", e, a);
  /* b is the first tick that shows the set; b - 1 still the old values */
  cJSON *mid =
      OK(&c,
         "{\"cmd\":\"transform.get\",\"world\":\"fr\",\"entity\":%llu,\"tick\":%ld.5,\"trs\":true}",
         e, b - 1);
  const cJSON *trs = mid ? cJSON_GetObjectItemCaseSensitive(mid, "world_trs") : NULL;
  float t[3] = {0}, r[4] = {0}, s[3] = {0};
  const cJSON *tv = cJSON_GetObjectItemCaseSensitive(trs, "t"),
              *rv = cJSON_GetObjectItemCaseSensitive(trs, "r"),
              *sv = cJSON_GetObjectItemCaseSensitive(trs, "s");
  for (int i = 0; i < 3; i++) {
    t[i] = (float)cJSON_GetArrayItem(tv, i)->valuedouble;
    s[i] = (float)cJSON_GetArrayItem(sv, i)->valuedouble;
  }
  for (int i = 0; i < 4; i++)
    r[i] = (float)cJSON_GetArrayItem(rv, i)->valuedouble;
  /* halfway: translation 5, scale 2, 45 degrees about z (slerp) */
  CHECK(fabsf(t[0] - 5) < 1e-4f && fabsf(t[1]) < 1e-4f && fabsf(s[0] - 2) < 1e-4f &&
            fabsf(r[2] - 0.38268343f) < 1e-5f && fabsf(r[3] - 0.92387953f) < 1e-5f,
        mid);
  CHECK(t_resp_num(mid, "tick") == (double)(b - 1) + 0.5, mid);
  cJSON_Delete(mid);
  /* relative at a tick: inverse(world(to)) * world(e) with to scaled 2 at (0,5,0) */
  cJSON *rel = OK(
      &c,
      "{\"cmd\":\"transform.relative\",\"world\":\"fr\",\"entity\":%llu,\"to\":%llu,\"tick\":%ld}",
      e, to, b - 1);
  float m[16];
  CHECK(rel && matrix_of(cJSON_GetObjectItemCaseSensitive(rel, "matrix"), m) &&
            fabsf(m[0] - 0.5f) < 1e-6f && fabsf(m[13] + 2.5f) < 1e-6f,
        rel);
  cJSON_Delete(rel);
  /* created after the tick: not there then; destroyed after it: answers with its values */
  unsigned long long late = create(&c, "fr", ",\"t\":[7,7,7]");
  long c1 = TICK_PAST(&c, "fr", e, b);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"fr\",\"entity\":%llu,\"tick\":%ld}",
      late, b - 1);
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"fr\",\"entity\":%llu}", to);
  TICK_PAST(&c, "fr", e, c1);
  cJSON *old =
      OK(&c, "{\"cmd\":\"transform.get\",\"world\":\"fr\",\"entity\":%llu,\"tick\":%ld}", to, c1);
  CHECK(old && matrix_of(cJSON_GetObjectItemCaseSensitive(old, "world"), m) && m[13] == 5 &&
            m[0] == 2,
        old);
  cJSON_Delete(old);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"fr\",\"entity\":%llu}", to);
  /* reads at a tick inside a batch */
  cJSON *bt = OK(&c,
                 "{\"cmd\":\"batch\",\"world\":\"fr\",\"ops\":[{\"cmd\":\"transform.get\","
                 "\"entity\":%llu,\"tick\":%ld}]}",
                 to, c1);
  const cJSON *res = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(bt, "results"), 0);
  CHECK(res && t_resp_num(res, "tick") == (double)c1, bt);
  cJSON_Delete(bt);
  t_client_close(&c);
}

/* ---- persistence ------------------------------------------------------------------------- */

/* The history a world keeps, as world.list shows it (-1 when the world is not listed). */
static long history_of(t_client *c, const char *world) {
  cJSON *r = OK(c, "{\"cmd\":\"world.list\"}");
  long h = -1;
  const cJSON *ws = r ? cJSON_GetObjectItemCaseSensitive(r, "worlds") : NULL;
  for (const cJSON *w = ws ? ws->child : NULL; w; w = w->next)
    if (t_resp_str_is(w, "name", world))
      h = (long)t_resp_num(w, "history");
  cJSON_Delete(r);
  return h;
}

/* The window a world keeps survives a restart, from the journal (kill -9 under --fsync always)
 * and from a snapshot; the ticks it held do not. */
static void test_window_persisted(void) {
  char dir[64];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "history"));
  const char *args[] = {"--http", "off",       "--data", dir, "--fsync",
                        "always", "--tick-hz", TICK_HZ,  NULL};
  t_daemon d;
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    goto out;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"keep\",\"history\":77}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"none\"}");
  unsigned long long e = create(&c, "keep", ",\"t\":[1,2,3]");
  long t = TICK_PAST(&c, "keep", e, 3);
  t_client_close(&c);
  t_daemon_stop(&d, SIGKILL, 5000); /* the journal has it */
  if (!START_CONNECTED(&d, &c, args))
    goto out;
  CU_ASSERT_EQUAL(history_of(&c, "keep"), 77);
  CU_ASSERT_EQUAL(history_of(&c, "none"), 0);
  OKD(&c, "{\"cmd\":\"save\"}");
  t_client_close(&c);
  STOP_OK(&d, 15000); /* and now the snapshot */
  if (!START_CONNECTED(&d, &c, args))
    goto out;
  CU_ASSERT_EQUAL(history_of(&c, "keep"), 77);
  CU_ASSERT_EQUAL(history_of(&c, "none"), 0);
  /* the world's ticks start over: what was kept before the restart is gone, and the new
   * ticks are kept again */
  long now = TICK_PAST(&c, "keep", e, 1);
  CU_ASSERT_TRUE(now < t + 1000);
  cJSON *g =
      OK(&c, "{\"cmd\":\"transform.get\",\"world\":\"keep\",\"entity\":%llu,\"tick\":%ld}", e, now);
  float m[16];
  CHECK(g && matrix_of(cJSON_GetObjectItemCaseSensitive(g, "world"), m) && m[12] == 1 && m[14] == 3,
        g);
  cJSON_Delete(g);
  t_client_close(&c);
  STOP_OK(&d, 15000);
out:
  t_remove_tree(dir);
}

/* ---- registration ------------------------------------------------------------------------ */

static int suite_init(void) {
  const char *args[] = {"--http", "off", "--tick-hz", TICK_HZ, NULL};
  return t_daemon_start(&dhist, args) == 0 ? 0 : -1;
}

static int suite_clean(void) { return t_suite_daemon_stop(&dhist, 10000); }

int t_register_daemon_history(void) {
  static const t_test tests[] = {
      {"history: world.create's field, its limits, world.list", test_history_field},
      {"history: now, outside the window, no history, bad ticks", test_refusals},
      {"history: 1,000 past reads equal the frames of their ticks", test_past_equals_frames},
      {"history: fractions, births and deaths, relative, trs, batch", test_fraction_and_lifetimes},
      {"history: the window survives a restart, the kept ticks do not", test_window_persisted},
  };
  return T_ADD_SUITE("daemon_history", suite_init, suite_clean, tests);
}

/* Integration tests of streaming over TCP against the real daemon: the exact frames of the
 * contract's Streaming section (full first, then deltas of changed world matrices, removals,
 * subtree scope, root and world destruction, hz caps, ordering against responses) and a slow
 * consumer that must neither grow the daemon's memory without bound nor miss the final state. */
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The daemon most tests share: 20 ticks per second, so a tick is 50 ms. */
#define TICK_HZ "20"
#define TICK_MS 50
/* How long "nothing is sent" is watched: several ticks. */
#define QUIET_MS (5 * TICK_MS)
/* How long a frame that must come is waited for. */
#define FRAME_WAIT_MS 2000

static t_daemon daemon20;

/* ---- subscriptions and frames ------------------------------------------------------------- */

typedef struct sub_state {
  int64_t id;
  char world[72];
  double last_tick;
  int frames;
} sub_state;

/* Subscribes on k; root 0 is the whole world, hz 0 leaves it out. */
static bool subscribe(t_client *k, sub_state *s, const char *world, int64_t root, double hz) {
  memset(s, 0, sizeof *s);
  snprintf(s->world, sizeof s->world, "%s", world);
  char extra[96] = "";
  int n = 0;
  if (root)
    n += snprintf(extra + n, sizeof extra - (size_t)n, ",\"root\":%lld", (long long)root);
  if (hz > 0)
    snprintf(extra + n, sizeof extra - (size_t)n, ",\"hz\":%g", hz);
  cJSON *r = CALL(k, "{\"cmd\":\"subscribe\",\"world\":\"%s\"%s}", world, extra);
  bool good = t_resp_ok(r) && t_resp_num(r, "sub") >= 1 && cJSON_GetArraySize(r) == 2;
  CU_ASSERT_TRUE(good);
  if (!good)
    t_report("subscribe", r);
  s->id = (int64_t)t_resp_num(r, "sub");
  cJSON_Delete(r);
  return good;
}

static bool is_matrix(const cJSON *m) {
  if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 16)
    return false;
  const cJSON *v;
  cJSON_ArrayForEach(v, m) if (!cJSON_IsNumber(v)) return false;
  return true;
}

/* Checks that f is exactly a frame of s (the contract's seven fields, nothing else), that its
 * tick is above the previous one, and full when full is 0 or 1 (-1: either). */
static bool check_frame(sub_state *s, const cJSON *f, int full) {
  bool good = cJSON_IsObject(f) && strcmp(t_resp_str(f, "event"), "frame") == 0 &&
              cJSON_GetArraySize(f) == 7 && t_resp_num(f, "sub") == (double)s->id &&
              strcmp(t_resp_str(f, "world"), s->world) == 0 &&
              cJSON_IsNumber(cJSON_GetObjectItem(f, "tick")) &&
              cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(f, "full")) &&
              cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(f, "set")) &&
              cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(f, "removed"));
  CU_ASSERT_TRUE(good);
  if (!good) {
    t_report("not a frame of this subscription", f);
    return false;
  }
  double tick = t_resp_num(f, "tick");
  CU_ASSERT_TRUE(tick > s->last_tick);
  if (!(tick > s->last_tick))
    fprintf(stderr, "  tick %.0f after %.0f\n", tick, s->last_tick);
  s->last_tick = tick;
  s->frames++;
  bool is_full = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "full"));
  if (full >= 0) {
    CU_ASSERT_EQUAL(is_full, full == 1);
    if (is_full != (full == 1))
      t_report(full ? "expected a full frame" : "expected a delta", f);
  }
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(f, "set")) {
    bool entry = cJSON_IsObject(e) && cJSON_GetArraySize(e) == 2 && t_resp_num(e, "e") >= 1 &&
                 is_matrix(cJSON_GetObjectItemCaseSensitive(e, "m"));
    CU_ASSERT_TRUE(entry);
  }
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(f, "removed"))
      CU_ASSERT_TRUE(cJSON_IsNumber(e) && e->valuedouble >= 1);
  if (is_full)
    CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "removed")), 0);
  return true;
}

/* The next event on k, which must be a frame of s. */
static cJSON *expect_frame(t_client *k, sub_state *s, int full) {
  cJSON *f = t_next_event(k, FRAME_WAIT_MS);
  CU_ASSERT_PTR_NOT_NULL(f);
  if (!f) {
    fprintf(stderr, "  no frame for sub %lld\n", (long long)s->id);
    return NULL;
  }
  check_frame(s, f, full);
  return f;
}

typedef struct want {
  int64_t e;
  float x, y, z;
} want;

static void mat_t(float m[16], float x, float y, float z) {
  static const float id[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  memcpy(m, id, sizeof id);
  m[12] = x, m[13] = y, m[14] = z;
}

static bool matrix_equals(const cJSON *m, const float want_m[16]) {
  if (!is_matrix(m))
    return false;
  for (int i = 0; i < 16; i++)
    if ((float)cJSON_GetArrayItem(m, i)->valuedouble != want_m[i])
      return false;
  return true;
}

/* The matrix of e in the frame's set (NULL when absent); counts its occurrences. */
static const cJSON *set_matrix(const cJSON *f, int64_t e, int *count) {
  const cJSON *found = NULL, *it;
  *count = 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(f, "set")) if (t_resp_num(it, "e") ==
                                                                         (double)e) {
    ++*count;
    found = cJSON_GetObjectItemCaseSensitive(it, "m");
  }
  return found;
}

/* The frame's set is exactly these entities, each once, each a pure translation. */
static void check_set(const cJSON *f, const want *w, int n) {
  if (!f)
    return;
  int size = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "set"));
  bool good = size == n;
  for (int i = 0; i < n; i++) {
    int count;
    const cJSON *m = set_matrix(f, w[i].e, &count);
    float expect[16];
    mat_t(expect, w[i].x, w[i].y, w[i].z);
    if (count != 1 || !matrix_equals(m, expect)) {
      good = false;
      fprintf(stderr, "  entity %lld: %d entries, expected translation (%g,%g,%g)\n",
              (long long)w[i].e, count, w[i].x, w[i].y, w[i].z);
    }
  }
  CU_ASSERT_TRUE(good);
  if (!good)
    t_report("set differs", f);
}

/* The frame's removed list is exactly these ids (in any order, each once). */
static void check_removed(const cJSON *f, const int64_t *ids, int n) {
  if (!f)
    return;
  const cJSON *removed = cJSON_GetObjectItemCaseSensitive(f, "removed");
  bool good = cJSON_GetArraySize(removed) == n;
  for (int i = 0; i < n; i++) {
    int count = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, removed) count += it->valuedouble == (double)ids[i];
    good &= count == 1;
  }
  CU_ASSERT_TRUE(good);
  if (!good)
    t_report("removed differs", f);
}

static void check_no_removed(const cJSON *f) { check_removed(f, NULL, 0); }

static int64_t mk(t_client *k, const char *world, int64_t parent, double x, double y, double z) {
  char par[48] = "";
  if (parent)
    snprintf(par, sizeof par, ",\"parent\":%lld", (long long)parent);
  cJSON *r = CALL(k, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s,\"t\":[%g,%g,%g]}", world,
                  par, x, y, z);
  int64_t e = t_resp_ok(r) ? (int64_t)t_resp_num(r, "entity") : 0;
  CU_ASSERT_TRUE(e > 0);
  if (e <= 0)
    t_report("transform.create", r);
  cJSON_Delete(r);
  return e;
}

static void set_t(t_client *k, const char *world, int64_t e, double x, double y, double z) {
  OKD(k, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%lld,\"t\":[%g,%g,%g]}",
      world, (long long)e, x, y, z);
}

static double info_subscriptions(t_client *k) {
  cJSON *r = CALL(k, "{\"cmd\":\"info\"}");
  double n = t_resp_num(r, "subscriptions");
  CU_ASSERT_TRUE(n >= 0);
  cJSON_Delete(r);
  return n;
}

/* The suite's connections keep the events that arrive while a call waits for its response. */
#define OPEN(k, port) (CONNECT_FATAL(&(k), (port)), t_client_keep_events(&(k)))

/* ---- tests -------------------------------------------------------------------------------- */

/* The first frame is full (every transform, removed empty); then deltas of what changed,
 * including every descendant of a moved parent; nothing when nothing changes. */
static void test_full_then_delta(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "fd";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"fd\"}");
  int64_t a = mk(&ctl, W, 0, 1, 2, 3);
  int64_t b = mk(&ctl, W, a, 0, 1, 0);
  int64_t c = mk(&ctl, W, 0, 7, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON *f = expect_frame(&sc, &s, 1);
  check_set(f, (want[]){{a, 1, 2, 3}, {b, 1, 3, 3}, {c, 7, 0, 0}}, 3);
  check_no_removed(f);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);

  set_t(&ctl, W, a, 5, 0, 0);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 5, 0, 0}, {b, 5, 1, 0}}, 2);
  check_no_removed(f);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"transform.set_world\",\"world\":\"fd\",\"entity\":%lld,\"t\":[0,0,9]}",
      (long long)b);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{b, 0, 0, 9}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);

  int64_t d = mk(&ctl, W, c, 1, 0, 0);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{d, 8, 0, 0}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);

  /* A grandparent's move reaches the grandchild. */
  int64_t g = mk(&ctl, W, d, 0, 0, 1);
  cJSON_Delete(expect_frame(&sc, &s, 0));
  set_t(&ctl, W, c, 0, 0, 0);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{c, 0, 0, 0}, {d, 1, 0, 0}, {g, 1, 0, 1}}, 3);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  CU_ASSERT_EQUAL(s.frames, 6);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"fd\"}");
  cJSON_Delete(t_next_event(&sc, FRAME_WAIT_MS)); /* world_destroyed */

  /* An empty world: the full frame is still sent, with nothing in it. */
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"fd-empty\"}");
  sub_state e;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &e, "fd-empty", 0, 0));
  f = expect_frame(&sc, &e, 1);
  check_set(f, NULL, 0);
  check_no_removed(f);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  int64_t first = mk(&ctl, "fd-empty", 0, 0, 0, 2);
  f = expect_frame(&sc, &e, 0);
  check_set(f, (want[]){{first, 0, 0, 2}}, 1);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"fd-empty\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* Many sets between two ticks reach the subscriber once each, with the latest value. */
static void test_coalescing(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "co";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"co\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  int64_t b = mk(&ctl, W, a, 1, 0, 0);
  int64_t c = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));

  char lines[8192];
  int n = 0;
  for (int x = 1; x <= 3; x++)
    n += snprintf(
        lines + n, sizeof lines - (size_t)n,
        "{\"cmd\":\"transform.set_local\",\"world\":\"co\",\"entity\":%lld,\"t\":[%d,0,0]}\n",
        (long long)a, x);
  n +=
      snprintf(lines + n, sizeof lines - (size_t)n,
               "{\"cmd\":\"transform.set_local\",\"world\":\"co\",\"entity\":%lld,\"t\":[7,0,0]}\n"
               "{\"cmd\":\"transform.set_local\",\"world\":\"co\",\"entity\":%lld,\"t\":[0,2,0]}\n",
               (long long)c, (long long)b);
  PIPELINE_OK(&ctl, lines, 5);
  cJSON *f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 3, 0, 0}, {b, 3, 2, 0}, {c, 7, 0, 0}}, 3);
  check_no_removed(f);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);

  /* Many more sets in one write: still one entry each. */
  n = 0;
  for (int x = 1; x <= 40; x++)
    n += snprintf(
        lines + n, sizeof lines - (size_t)n,
        "{\"cmd\":\"transform.set_local\",\"world\":\"co\",\"entity\":%lld,\"t\":[0,%d,0]}\n",
        (long long)(x % 2 ? c : a), x);
  PIPELINE_OK(&ctl, lines, 40);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 0, 40, 0}, {b, 0, 42, 0}, {c, 0, 39, 0}}, 3);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"co\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* Commands that leave every world matrix as it was send nothing. */
static void test_noop_sends_nothing(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "noop";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"noop\"}");
  int64_t a = mk(&ctl, W, 0, 1, 2, 3);
  int64_t b = mk(&ctl, W, a, 0, 1, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));
  set_t(&ctl, W, a, 1, 2, 3);
  OKD(&ctl,
      "{\"cmd\":\"transform.set_local\",\"world\":\"noop\",\"entity\":%lld,"
      "\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,1,0,1]}",
      (long long)b);
  OKD(&ctl, "{\"cmd\":\"transform.set_world\",\"world\":\"noop\",\"entity\":%lld,\"t\":[1,3,3]}",
      (long long)b);
  OKD(&ctl, "{\"cmd\":\"transform.link\",\"world\":\"noop\",\"entity\":%lld,\"parent\":%lld}",
      (long long)b, (long long)a);
  OKD(&ctl, "{\"cmd\":\"transform.unlink\",\"world\":\"noop\",\"entity\":%lld}", (long long)a);
  OKD(&ctl, "{\"cmd\":\"transform.rename\",\"world\":\"noop\",\"entity\":%lld,\"name\":\"x\"}",
      (long long)a);
  OKD(&ctl, "{\"cmd\":\"transform.get\",\"world\":\"noop\",\"entity\":%lld}", (long long)b);
  /* A failed command changes nothing, so sends nothing. */
  ERR(&ctl, "NOT_FOUND",
      "{\"cmd\":\"transform.set_local\",\"world\":\"noop\",\"entity\":987654321,\"t\":[1,1,1]}");
  ERR(&ctl, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_local\",\"world\":\"noop\",\"entity\":%lld,\"t\":[1,1]}",
      (long long)a);
  QUIET(&sc, QUIET_MS);
  /* Still alive. */
  set_t(&ctl, W, b, 0, 1, 1);
  cJSON *f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{b, 1, 3, 4}}, 1);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"noop\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* A matrix changed and changed back inside one tick, with a read between (which propagates),
 * did not change: nothing is sent. Nor for a failed batch whose read saw its change. */
static void test_revert_sends_nothing(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "revert";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"revert\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  int64_t b = mk(&ctl, W, a, 0, 1, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));
  char lines[1024];
  /* one write: the three run in one loop turn, so inside one tick */
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"revert\",\"entity\":%lld,\"t\":[1,0,0]}\n"
           "{\"cmd\":\"transform.get\",\"world\":\"revert\",\"entity\":%lld}\n"
           "{\"cmd\":\"transform.set_local\",\"world\":\"revert\",\"entity\":%lld,\"t\":[0,0,0]}\n",
           (long long)a, (long long)b, (long long)a);
  PIPELINE_OK(&ctl, lines, 3);
  QUIET(&sc, QUIET_MS);
  ERR(&ctl, "NOT_FOUND",
      "{\"cmd\":\"batch\",\"world\":\"revert\",\"ops\":["
      "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[5,0,0]},"
      "{\"cmd\":\"transform.get\",\"entity\":%lld},"
      "{\"cmd\":\"transform.get\",\"entity\":987654321}]}",
      (long long)a, (long long)b);
  QUIET(&sc, QUIET_MS);
  /* a real change still arrives, once, with its latest value */
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"revert\",\"entity\":%lld,\"t\":[2,0,0]}\n"
           "{\"cmd\":\"transform.get\",\"world\":\"revert\",\"entity\":%lld}\n"
           "{\"cmd\":\"transform.set_local\",\"world\":\"revert\",\"entity\":%lld,\"t\":[3,0,0]}\n",
           (long long)a, (long long)b, (long long)a);
  PIPELINE_OK(&ctl, lines, 3);
  cJSON *f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 3, 0, 0}, {b, 3, 1, 0}}, 2);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"revert\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* A batch's effects arrive in one frame; a failed batch sends nothing. */
static void test_batch_one_frame(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "ba";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"ba\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  int64_t b = mk(&ctl, W, 0, 0, 0, 0);
  int64_t c = mk(&ctl, W, 0, 0, 0, 0);
  int64_t gone = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));

  cJSON *r =
      CALL(&ctl,
           "{\"cmd\":\"batch\",\"world\":\"ba\",\"ops\":["
           "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[1,0,0]},"
           "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[2,0,0]},"
           "{\"cmd\":\"transform.create\",\"parent\":%lld,\"t\":[0,5,0]},"
           "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[3,0,0]},"
           "{\"cmd\":\"transform.destroy\",\"entity\":%lld},"
           "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[4,0,0]}]}",
           (long long)a, (long long)b, (long long)c, (long long)c, (long long)gone, (long long)a);
  CU_ASSERT_TRUE(t_resp_ok(r));
  const cJSON *results = cJSON_GetObjectItemCaseSensitive(r, "results");
  int64_t created = (int64_t)t_resp_num(cJSON_GetArrayItem(results, 2), "entity");
  CU_ASSERT_TRUE(created > 0);
  cJSON_Delete(r);
  cJSON *f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 4, 0, 0}, {b, 2, 0, 0}, {c, 3, 0, 0}, {created, 3, 5, 0}}, 4);
  check_removed(f, (int64_t[]){gone}, 1);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);

  /* Atomic: the failing op undoes the first, nothing is streamed. */
  ERR(&ctl, "NOT_FOUND",
      "{\"cmd\":\"batch\",\"world\":\"ba\",\"ops\":["
      "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[9,9,9]},"
      "{\"cmd\":\"transform.create\",\"parent\":%lld},"
      "{\"cmd\":\"transform.set_local\",\"entity\":987654321,\"t\":[1,0,0]}]}",
      (long long)a, (long long)a);
  QUIET(&sc, QUIET_MS);

  /* A big batch: one frame, latest values. */
  size_t cap = 64 * 1024, len = 0;
  char *line = malloc(cap);
  CU_ASSERT_PTR_NOT_NULL_FATAL(line);
  len += (size_t)snprintf(line, cap, "{\"cmd\":\"batch\",\"world\":\"ba\",\"ops\":[");
  for (int i = 1; i <= 300; i++)
    len += (size_t)snprintf(line + len, cap - len,
                            "%s{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[%d,0,0]}",
                            i > 1 ? "," : "",
                            (long long)(i % 3 == 0   ? a
                                        : i % 3 == 1 ? b
                                                     : c),
                            i);
  snprintf(line + len, cap - len, "]}");
  OKD(&ctl, "%s", line);
  free(line);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 300, 0, 0}, {b, 298, 0, 0}, {c, 299, 0, 0}, {created, 299, 5, 0}}, 4);
  check_no_removed(f);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"ba\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* Whole-world scope: destroyed transforms (and destroyed entities) are in removed. */
static void test_removed_whole_world(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "rm";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rm\"}");
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rm2\"}");
  int64_t p = mk(&ctl, W, 0, 1, 2, 3);
  int64_t q = mk(&ctl, W, p, 1, 0, 0);
  int64_t r = mk(&ctl, W, 0, 0, 0, 0);
  int64_t r1 = mk(&ctl, W, r, 0, 1, 0);
  int64_t r2 = mk(&ctl, W, r1, 0, 1, 0);
  int64_t e = mk(&ctl, W, 0, 4, 0, 0);
  OKD(&ctl, "{\"cmd\":\"transform.create\",\"world\":\"rm2\",\"entity\":%lld}", (long long)e);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON *f = expect_frame(&sc, &s, 1);
  check_set(
      f,
      (want[]){
          {p, 1, 2, 3}, {q, 2, 2, 3}, {r, 0, 0, 0}, {r1, 0, 1, 0}, {r2, 0, 2, 0}, {e, 4, 0, 0}},
      6);
  cJSON_Delete(f);

  /* Non-recursive: the child becomes a root and keeps its world matrix (so is not in set). */
  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"rm\",\"entity\":%lld}", (long long)p);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){p}, 1);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"rm\",\"entity\":%lld,\"recursive\":true}",
      (long long)r);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r, r1, r2}, 3);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (long long)e);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){e}, 1);
  cJSON_Delete(f);

  /* Changes in another world are not this subscription's. */
  int64_t other = mk(&ctl, "rm2", 0, 1, 1, 1);
  CU_ASSERT_TRUE(other > 0);
  QUIET(&sc, QUIET_MS);

  /* A removal and a move in one tick share a frame. */
  char lines[512];
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"rm\",\"entity\":%lld,\"t\":[0,0,1]}\n"
           "{\"cmd\":\"entity.destroy\",\"entity\":%lld}\n",
           (long long)q, (long long)other);
  PIPELINE_OK(&ctl, lines, 2);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{q, 0, 0, 1}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);
  int64_t last = mk(&ctl, W, 0, 0, 0, 0);
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"rm\",\"entity\":%lld,\"t\":[5,0,0]}\n"
           "{\"cmd\":\"transform.destroy\",\"world\":\"rm\",\"entity\":%lld}\n",
           (long long)q, (long long)last);
  cJSON_Delete(expect_frame(&sc, &s, 0)); /* last's creation */
  PIPELINE_OK(&ctl, lines, 2);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{q, 5, 0, 0}}, 1);
  check_removed(f, (int64_t[]){last}, 1);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rm\"}");
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rm2\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* Subtree scope: only the subtree; entering (either keep) appears in set even unchanged;
 * leaving or destruction appears in removed; the root's destruction ends the subscription. */
static void test_subtree_scope(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "st";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"st\"}");
  int64_t r = mk(&ctl, W, 0, 10, 0, 0);
  int64_t c1 = mk(&ctl, W, r, 1, 0, 0);
  int64_t g1 = mk(&ctl, W, c1, 0, 1, 0);
  int64_t o = mk(&ctl, W, 0, 0, 0, 5);
  int64_t o1 = mk(&ctl, W, o, 1, 0, 0);
  int64_t x = mk(&ctl, W, 0, 2, 2, 2);
  int64_t y = mk(&ctl, W, 0, 3, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, r, 0));
  cJSON *f = expect_frame(&sc, &s, 1);
  check_set(f, (want[]){{r, 10, 0, 0}, {c1, 11, 0, 0}, {g1, 11, 1, 0}}, 3);
  check_no_removed(f);
  cJSON_Delete(f);

  /* Outside the scope: nothing. */
  set_t(&ctl, W, o, 0, 0, 6);
  set_t(&ctl, W, y, 3, 0, 1);
  QUIET(&sc, QUIET_MS);

  /* Linked in keeping its world matrix: in set although unchanged. */
  OKD(&ctl,
      "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld,\"keep\":"
      "\"world\"}",
      (long long)x, (long long)r);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{x, 2, 2, 2}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);

  /* Linked in keeping its local matrix (o1 at (1,0,6) becomes (12,0,0)). */
  OKD(&ctl, "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld}",
      (long long)o1, (long long)c1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{o1, 12, 0, 0}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);

  /* Unlinked out of the scope (keeping its world matrix): removed. */
  OKD(&ctl, "{\"cmd\":\"transform.unlink\",\"world\":\"st\",\"entity\":%lld,\"keep\":\"world\"}",
      (long long)g1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){g1}, 1);
  cJSON_Delete(f);

  /* Linked out to another tree with a subtree of its own. */
  OKD(&ctl, "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld}",
      (long long)y, (long long)x);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{y, 5, 2, 3}}, 1);
  cJSON_Delete(f);
  OKD(&ctl,
      "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld,\"keep\":"
      "\"world\"}",
      (long long)x, (long long)o);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){x, y}, 2);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld}",
      (long long)x, (long long)c1);
  f = expect_frame(&sc, &s, 0);
  /* x kept local (2,2,-4) under o at (0,0,6); now under c1 at (11,0,0); y under x. */
  check_set(f, (want[]){{x, 13, 2, -4}, {y, 16, 2, -3}}, 2);
  check_no_removed(f);
  cJSON_Delete(f);

  /* Destroying c1 without recursion: c1 goes, its children become roots and leave. */
  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"st\",\"entity\":%lld}", (long long)c1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){c1, o1, x, y}, 4);
  cJSON_Delete(f);

  /* Back in, moved with the root in the same tick. */
  char lines[512];
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"st\",\"entity\":%lld,\"t\":[20,0,0]}\n"
           "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld}\n"
           "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld,\"keep\":"
           "\"world\"}\n",
           (long long)r, (long long)g1, (long long)r, (long long)o1, (long long)r);
  PIPELINE_OK(&ctl, lines, 3);
  f = expect_frame(&sc, &s, 0);
  /* g1's local after unlink keep world is (11,1,0); o1 is at (12,0,0) in the world. */
  check_set(f, (want[]){{r, 20, 0, 0}, {g1, 31, 1, 0}, {o1, 12, 0, 0}}, 3);
  check_no_removed(f);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (long long)o1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){o1}, 1);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);

  /* The root is destroyed: the whole scope removed, then unsubscribed. */
  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"st\",\"entity\":%lld}", (long long)r);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r, g1}, 2);
  cJSON_Delete(f);
  cJSON *ev = t_next_event(&sc, FRAME_WAIT_MS);
  char want_ev[128];
  snprintf(want_ev, sizeof want_ev,
           "{\"event\":\"unsubscribed\",\"sub\":%lld,\"reason\":\"root_destroyed\"}",
           (long long)s.id);
  cJSON *expect_ev = cJSON_Parse(want_ev);
  CU_ASSERT_TRUE(cJSON_Compare(ev, expect_ev, true));
  if (!cJSON_Compare(ev, expect_ev, true))
    t_report("expected unsubscribed", ev);
  cJSON_Delete(expect_ev);
  cJSON_Delete(ev);
  set_t(&ctl, W, g1, 1, 1, 1);
  QUIET(&sc, QUIET_MS);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s.id);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"st\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* A root destroyed by entity.destroy or a recursive destroy also ends the subscription. */
static void test_root_destroyed_other_ways(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "rd";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rd\"}");
  int64_t top = mk(&ctl, W, 0, 0, 0, 0);
  int64_t r = mk(&ctl, W, top, 1, 0, 0);
  int64_t k1 = mk(&ctl, W, r, 1, 0, 0);
  int64_t k2 = mk(&ctl, W, k1, 1, 0, 0);
  int64_t r2 = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s1, s2;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s1, W, r, 0));
  cJSON *f = expect_frame(&sc, &s1, 1);
  check_set(f, (want[]){{r, 1, 0, 0}, {k1, 2, 0, 0}, {k2, 3, 0, 0}}, 3);
  cJSON_Delete(f);
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s2, W, r2, 0));
  f = expect_frame(&sc, &s2, 1);
  check_set(f, (want[]){{r2, 0, 0, 0}}, 1);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"rd\",\"entity\":%lld,\"recursive\":true}",
      (long long)top);
  f = expect_frame(&sc, &s1, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r, k1, k2}, 3);
  cJSON_Delete(f);
  cJSON *ev = t_next_event(&sc, FRAME_WAIT_MS);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "event"), "unsubscribed");
  CU_ASSERT_EQUAL(t_resp_num(ev, "sub"), (double)s1.id);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "reason"), "root_destroyed");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(ev), 3);
  cJSON_Delete(ev);

  OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (long long)r2);
  f = expect_frame(&sc, &s2, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r2}, 1);
  cJSON_Delete(f);
  ev = t_next_event(&sc, FRAME_WAIT_MS);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "event"), "unsubscribed");
  CU_ASSERT_EQUAL(t_resp_num(ev, "sub"), (double)s2.id);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "reason"), "root_destroyed");
  cJSON_Delete(ev);
  QUIET(&sc, QUIET_MS);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s1.id);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s2.id);

  /* Destroyed and given a new transform in the same tick: still destroyed. */
  int64_t r3 = mk(&ctl, W, 0, 0, 0, 0);
  int64_t k3 = mk(&ctl, W, r3, 0, 1, 0);
  sub_state s3;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s3, W, r3, 0));
  f = expect_frame(&sc, &s3, 1);
  check_set(f, (want[]){{r3, 0, 0, 0}, {k3, 0, 1, 0}}, 2);
  cJSON_Delete(f);
  OKD(&ctl,
      "{\"cmd\":\"batch\",\"world\":\"rd\",\"ops\":[{\"cmd\":\"transform.destroy\",\"entity\":%lld}"
      ","
      "{\"cmd\":\"transform.create\",\"entity\":%lld,\"t\":[5,0,0]}]}",
      (long long)r3, (long long)r3);
  f = expect_frame(&sc, &s3, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r3, k3}, 2);
  cJSON_Delete(f);
  ev = t_next_event(&sc, FRAME_WAIT_MS);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "event"), "unsubscribed");
  CU_ASSERT_EQUAL(t_resp_num(ev, "sub"), (double)s3.id);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "reason"), "root_destroyed");
  cJSON_Delete(ev);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s3.id);
  /* A batch that fails destroys nothing: the subscription goes on. */
  int64_t r4 = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s4;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s4, W, r4, 0));
  cJSON_Delete(expect_frame(&sc, &s4, 1));
  ERR(&ctl, "NOT_FOUND",
      "{\"cmd\":\"batch\",\"world\":\"rd\",\"ops\":[{\"cmd\":\"transform.destroy\",\"entity\":%"
      "lld},"
      "{\"cmd\":\"transform.set_local\",\"entity\":987654321,\"t\":[1,0,0]}]}",
      (long long)r4);
  QUIET(&sc, QUIET_MS);
  set_t(&ctl, W, r4, 0, 0, 2);
  f = expect_frame(&sc, &s4, 0);
  check_set(f, (want[]){{r4, 0, 0, 2}}, 1);
  cJSON_Delete(f);
  OKD(&sc, "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s4.id);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rd\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* Reads n frames on k, each for one of subs[0..nsubs), into out[] by subscription. */
static void frames_by_sub(t_client *k, sub_state *subs, cJSON **out, int nsubs) {
  for (int i = 0; i < nsubs; i++)
    out[i] = NULL;
  for (int got = 0; got < nsubs; got++) {
    cJSON *f = t_next_event(k, FRAME_WAIT_MS);
    CU_ASSERT_PTR_NOT_NULL(f);
    if (!f)
      return;
    int which = -1;
    for (int i = 0; i < nsubs; i++)
      if (t_resp_num(f, "sub") == (double)subs[i].id && !out[i])
        which = i;
    CU_ASSERT_TRUE(which >= 0);
    if (which < 0) {
      t_report("unexpected event", f);
      cJSON_Delete(f);
      continue;
    }
    check_frame(&subs[which], f, -1);
    out[which] = f;
  }
}

/* Equal as JSON once "sub" is left out of both. */
static bool same_but_sub(const cJSON *a, const cJSON *b) {
  if (!a || !b)
    return false;
  cJSON *x = cJSON_Duplicate(a, true), *y = cJSON_Duplicate(b, true);
  cJSON_DeleteItemFromObjectCaseSensitive(x, "sub");
  cJSON_DeleteItemFromObjectCaseSensitive(y, "sub");
  bool same = cJSON_Compare(x, y, true);
  if (!same) {
    t_report("first", a);
    t_report("second", b);
  }
  cJSON_Delete(x);
  cJSON_Delete(y);
  return same;
}

/* Two subscribers of one scope on two connections get the same frames but for "sub". */
static void test_two_subscribers(void) {
  t_client ctl, k1, k2;
  OPEN(ctl, daemon20.port);
  OPEN(k1, daemon20.port);
  OPEN(k2, daemon20.port);
  const char *W = "two";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"two\"}");
  int64_t a = mk(&ctl, W, 0, 1, 0, 0);
  int64_t b = mk(&ctl, W, a, 0, 1, 0);
  int64_t c = mk(&ctl, W, 0, 0, 0, 1);
  sub_state s1[2], s2[2];
  cJSON *f1[2], *f2[2];
  /* A whole-world and a subtree subscription on each connection. */
  CU_ASSERT_TRUE_FATAL(subscribe(&k1, &s1[0], W, 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k1, &s1[1], W, a, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k2, &s2[0], W, 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k2, &s2[1], W, a, 0));
  frames_by_sub(&k1, s1, f1, 2);
  frames_by_sub(&k2, s2, f2, 2);
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_TRUE(f1[i] && cJSON_IsTrue(cJSON_GetObjectItem(f1[i], "full")));
    CU_ASSERT_TRUE(f2[i] && cJSON_IsTrue(cJSON_GetObjectItem(f2[i], "full")));
    /* Full frames of the same tick are identical; of different ticks, the same content. */
    if (f1[i] && f2[i] && t_resp_num(f1[i], "tick") == t_resp_num(f2[i], "tick"))
      CU_ASSERT_TRUE(same_but_sub(f1[i], f2[i]));
  }
  check_set(f1[0], (want[]){{a, 1, 0, 0}, {b, 1, 1, 0}, {c, 0, 0, 1}}, 3);
  check_set(f2[0], (want[]){{a, 1, 0, 0}, {b, 1, 1, 0}, {c, 0, 0, 1}}, 3);
  check_set(f1[1], (want[]){{a, 1, 0, 0}, {b, 1, 1, 0}}, 2);
  check_set(f2[1], (want[]){{a, 1, 0, 0}, {b, 1, 1, 0}}, 2);
  for (int i = 0; i < 2; i++) {
    cJSON_Delete(f1[i]);
    cJSON_Delete(f2[i]);
  }

  /* Each step changes both scopes. */
  const char *steps[] = {
      "{\"cmd\":\"transform.set_local\",\"world\":\"two\",\"entity\":%lld,\"t\":[2,0,0]}",
      "{\"cmd\":\"transform.create\",\"world\":\"two\",\"parent\":%lld,\"t\":[0,0,3]}",
      "{\"cmd\":\"transform.link\",\"world\":\"two\",\"entity\":%lld,\"parent\":%lld}",
      "{\"cmd\":\"transform.destroy\",\"world\":\"two\",\"entity\":%lld}",
  };
  for (int step = 0; step < 4; step++) {
    switch (step) {
    case 0:
      OKD(&ctl, steps[0], (long long)a);
      break;
    case 1:
      OKD(&ctl, steps[1], (long long)b);
      break;
    case 2:
      OKD(&ctl, steps[2], (long long)c, (long long)b);
      break;
    case 3:
      OKD(&ctl, steps[3], (long long)b);
      break;
    }
    frames_by_sub(&k1, s1, f1, 2);
    frames_by_sub(&k2, s2, f2, 2);
    for (int i = 0; i < 2; i++) {
      CU_ASSERT_TRUE(same_but_sub(f1[i], f2[i]));
      CU_ASSERT_TRUE(f1[i] && cJSON_IsFalse(cJSON_GetObjectItem(f1[i], "full")));
      cJSON_Delete(f1[i]);
      cJSON_Delete(f2[i]);
    }
  }
  QUIET(&k1, QUIET_MS);
  QUIET(&k2, 0);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"two\"}");
  t_client_close(&k1);
  t_client_close(&k2);
  t_client_close(&ctl);
}

/* unsubscribe stops frames; a second one is NOT_FOUND, as is another connection's sub. */
static void test_unsubscribe(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "un";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"un\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s, keep;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &keep, W, a, 0));
  cJSON *f[2];
  sub_state both[2] = {s, keep};
  frames_by_sub(&sc, both, f, 2);
  cJSON_Delete(f[0]);
  cJSON_Delete(f[1]);
  keep = both[1];
  double before = info_subscriptions(&ctl);

  cJSON *r = CALL(&sc, "{\"id\":\"u1\",\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s.id);
  CU_ASSERT_TRUE(t_resp_ok(r));
  CU_ASSERT_EQUAL(cJSON_GetArraySize(r), 2); /* id and ok */
  CU_ASSERT_STRING_EQUAL(t_resp_str(r, "id"), "u1");
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(info_subscriptions(&ctl), before - 1);
  set_t(&ctl, W, a, 1, 0, 0);
  /* Only the remaining subscription reports it. */
  cJSON *g = expect_frame(&sc, &keep, 0);
  check_set(g, (want[]){{a, 1, 0, 0}}, 1);
  cJSON_Delete(g);
  QUIET(&sc, QUIET_MS);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s.id);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":987654321}");
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"unsubscribe\",\"sub\":\"x\"}");
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"unsubscribe\"}");
  OKD(&sc, "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)keep.id);
  set_t(&ctl, W, a, 2, 0, 0);
  QUIET(&sc, QUIET_MS);
  CU_ASSERT_EQUAL(info_subscriptions(&ctl), before - 2);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"un\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* subscribe to an unknown world, or a root without a transform there, is NOT_FOUND. */
static void test_subscribe_errors(void) {
  t_client ctl;
  OPEN(ctl, daemon20.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"se\"}");
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"se2\"}");
  int64_t elsewhere = mk(&ctl, "se2", 0, 0, 0, 0);
  int64_t here = mk(&ctl, "se", 0, 0, 0, 0);
  int64_t dead = mk(&ctl, "se", 0, 0, 0, 0);
  OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (long long)dead);
  cJSON *r = CALL(&ctl, "{\"cmd\":\"entity.create\"}");
  const cJSON *ents = cJSON_GetObjectItem(r, "entities");
  int64_t bare = cJSON_IsNumber(cJSON_GetArrayItem(ents, 0))
                     ? (int64_t)cJSON_GetArrayItem(ents, 0)->valuedouble
                     : 0;
  CU_ASSERT_TRUE(bare > 0);
  cJSON_Delete(r);
  double before = info_subscriptions(&ctl);

  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"no-such-world\"}");
  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":%lld}",
      (long long)elsewhere);
  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":%lld}", (long long)dead);
  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":%lld}", (long long)bare);
  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":987654321}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\"}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"hz\":0}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"hz\":-5}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"hz\":\"fast\"}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":\"x\"}");
  CU_ASSERT_EQUAL(info_subscriptions(&ctl), before);
  /* Nothing was subscribed: no frames come. */
  set_t(&ctl, "se", here, 1, 1, 1);
  QUIET(&ctl, QUIET_MS);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"se\"}");
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"se2\"}");
  t_client_close(&ctl);
}

/* world.destroy: world_destroyed to each subscription (the destroying connection's too, as
 * whole lines around its response), and they end. */
static void test_world_destroyed(void) {
  t_client k1, k2;
  OPEN(k1, daemon20.port);
  OPEN(k2, daemon20.port);
  const char *W = "wd";
  OKD(&k1, "{\"cmd\":\"world.create\",\"world\":\"wd\"}");
  int64_t a = mk(&k1, W, 0, 0, 0, 0);
  sub_state s[2], t;
  CU_ASSERT_TRUE_FATAL(subscribe(&k1, &s[0], W, 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k1, &s[1], W, a, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k2, &t, W, 0, 0));
  cJSON *f[2];
  frames_by_sub(&k1, s, f, 2);
  cJSON_Delete(f[0]);
  cJSON_Delete(f[1]);
  cJSON_Delete(expect_frame(&k2, &t, 1));
  double before = info_subscriptions(&k2);

  CU_ASSERT_EQUAL_FATAL(t_client_send(&k1, "{\"id\":7,\"cmd\":\"world.destroy\",\"world\":\"wd\"}"),
                        0);
  int responses = 0, events = 0;
  bool seen[2] = {false, false};
  long deadline = t_now_ms() + 3000;
  while ((responses < 1 || events < 2) && t_now_ms() < deadline) {
    cJSON *j = t_recv_object(&k1, deadline - t_now_ms());
    if (!j)
      break;
    if (t_resp_has(j, "event")) {
      events++;
      CU_ASSERT_STRING_EQUAL(t_resp_str(j, "event"), "world_destroyed");
      CU_ASSERT_STRING_EQUAL(t_resp_str(j, "world"), "wd");
      CU_ASSERT_EQUAL(cJSON_GetArraySize(j), 3);
      for (int i = 0; i < 2; i++)
        if (t_resp_num(j, "sub") == (double)s[i].id) {
          CU_ASSERT_FALSE(seen[i]);
          seen[i] = true;
        }
    } else {
      responses++;
      CU_ASSERT_TRUE(t_resp_ok(j));
      CU_ASSERT_EQUAL(t_resp_num(j, "id"), 7);
      CU_ASSERT_EQUAL(cJSON_GetArraySize(j), 2);
    }
    cJSON_Delete(j);
  }
  CU_ASSERT_EQUAL(responses, 1);
  CU_ASSERT_EQUAL(events, 2);
  CU_ASSERT_TRUE(seen[0] && seen[1]);
  cJSON *ev = t_next_event(&k2, FRAME_WAIT_MS);
  char want_ev[128];
  snprintf(want_ev, sizeof want_ev, "{\"event\":\"world_destroyed\",\"sub\":%lld,\"world\":\"wd\"}",
           (long long)t.id);
  cJSON *expect_ev = cJSON_Parse(want_ev);
  CU_ASSERT_TRUE(cJSON_Compare(ev, expect_ev, true));
  if (!cJSON_Compare(ev, expect_ev, true))
    t_report("expected world_destroyed", ev);
  cJSON_Delete(expect_ev);
  cJSON_Delete(ev);
  CU_ASSERT_EQUAL(info_subscriptions(&k2), before - 3);

  /* A new world of the same name is not the old subscriptions'. */
  OKD(&k2, "{\"cmd\":\"world.create\",\"world\":\"wd\"}");
  mk(&k2, W, 0, 1, 1, 1);
  QUIET(&k1, QUIET_MS);
  QUIET(&k2, 0);
  ERR(&k1, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s[0].id);
  ERR(&k1, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s[1].id);
  ERR(&k2, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)t.id);
  OKD(&k2, "{\"cmd\":\"world.destroy\",\"world\":\"wd\"}");
  QUIET(&k1, 0);
  t_client_close(&k1);
  t_client_close(&k2);
}

/* Closing a connection ends its subscriptions. */
static void test_close_ends_subscriptions(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"cl\"}");
  int64_t a = mk(&ctl, "cl", 0, 0, 0, 0);
  double before = info_subscriptions(&ctl);
  sub_state s1, s2;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s1, "cl", 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s2, "cl", a, 5));
  CU_ASSERT_EQUAL(info_subscriptions(&ctl), before + 2);
  t_client_close(&sc);
  double n = -1;
  long deadline = t_now_ms() + 3000;
  while (t_now_ms() < deadline) {
    n = info_subscriptions(&ctl);
    if (n == before)
      break;
    t_sleep_ms(10);
  }
  CU_ASSERT_EQUAL(n, before);
  /* The daemon goes on streaming to others. */
  set_t(&ctl, "cl", a, 1, 0, 0);
  OKD(&ctl, "{\"cmd\":\"ping\"}");
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"cl\"}");
  t_client_close(&ctl);
}

/* On the subscriber's own connection: after a set's ok, the next frame carries the new value
 * (frames before the ok carry older ones), and every line is whole. */
static void test_frames_follow_responses(void) {
  t_client k;
  OPEN(k, daemon20.port);
  const char *W = "or";
  OKD(&k, "{\"cmd\":\"world.create\",\"world\":\"or\"}");
  int64_t a = mk(&k, W, 0, 0, 0, 0);
  int64_t b = mk(&k, W, a, 0, 1, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&k, &s, W, 0, 0));
  double last_x = -1;
  for (int i = 1; i <= 12; i++) {
    t_sleep_ms((i * 17) % TICK_MS); /* land at different points of a tick */
    set_t(&k, W, a, i, 0, 0);
    /* Frames that came before the ok were made before the set. */
    while (cJSON_GetArraySize(k.events) > 0) {
      cJSON *f = cJSON_DetachItemFromArray(k.events, 0);
      check_frame(&s, f, s.frames == 0);
      int count;
      const cJSON *m = set_matrix(f, a, &count);
      if (m) {
        double x = cJSON_GetArrayItem(m, 12)->valuedouble;
        CU_ASSERT_TRUE(x < i && x > last_x);
        last_x = x;
      }
      cJSON_Delete(f);
    }
    cJSON *f = expect_frame(&k, &s, s.frames == 0);
    check_set(f, (want[]){{a, (float)i, 0, 0}, {b, (float)i, 1, 0}}, 2);
    last_x = i;
    cJSON_Delete(f);
  }

  /* Many requests in one write with frames in between: responses in order, lines whole. */
  size_t cap = 200 * 160, len = 0;
  char *lines = malloc(cap);
  CU_ASSERT_PTR_NOT_NULL_FATAL(lines);
  for (int i = 0; i < 200; i++)
    len += (size_t)snprintf(lines + len, cap - len,
                            "{\"id\":%d,\"cmd\":\"transform.set_local\",\"world\":\"or\","
                            "\"entity\":%lld,\"t\":[%d,0,0]}\n",
                            i, (long long)(i % 2 ? b : a), i);
  long deadline = t_now_ms() + 5000;
  int next_id = 0, frames = 0;
  /* Sent in pieces over a few ticks so frames fall between responses. */
  for (size_t at = 0; at < len;) {
    size_t piece = len - at < 1000 ? len - at : 1000;
    CU_ASSERT_EQUAL_FATAL(t_client_send_raw(&k, lines + at, piece), 0);
    at += piece;
    t_sleep_ms(TICK_MS / 3);
  }
  free(lines);
  while (next_id < 200 && t_now_ms() < deadline) {
    cJSON *j = t_recv_object(&k, deadline - t_now_ms());
    if (!j)
      break;
    if (t_resp_has(j, "event")) {
      /* Exactly the state after the last request answered before it. */
      check_frame(&s, j, 0);
      frames++;
      int last = next_id - 1;
      float ax = last < 0 ? 12 : (float)(last - last % 2);
      float bx = last < 1 ? 0 : (float)(last % 2 ? last : last - 1), by = last < 1 ? 1 : 0;
      float ma[16], mb[16];
      mat_t(ma, ax, 0, 0);
      mat_t(mb, ax + bx, by, 0);
      int count;
      const cJSON *m = set_matrix(j, a, &count);
      CU_ASSERT_TRUE(count <= 1 && (!m || matrix_equals(m, ma)));
      m = set_matrix(j, b, &count);
      CU_ASSERT_TRUE(count == 1 && matrix_equals(m, mb)); /* b moves with every request */
      if (!matrix_equals(m, mb)) {
        fprintf(stderr, "  after response %d:\n", last);
        t_report("frame", j);
      }
    } else {
      CU_ASSERT_TRUE(t_resp_ok(j));
      CU_ASSERT_EQUAL(t_resp_num(j, "id"), next_id);
      next_id++;
    }
    cJSON_Delete(j);
  }
  CU_ASSERT_EQUAL(next_id, 200);
  /* The last frame holds the final values. */
  cJSON *f = NULL, *g;
  while ((g = t_next_event(&k, QUIET_MS))) {
    check_frame(&s, g, 0);
    frames++;
    cJSON_Delete(f);
    f = g;
  }
  CU_ASSERT_TRUE(frames >= 1);
  /* b (x 199) under a (x 198). */
  float expect_b[16];
  mat_t(expect_b, 198 + 199, 0, 0);
  if (f) {
    int count;
    const cJSON *mb = set_matrix(f, b, &count);
    CU_ASSERT_TRUE(count == 1 && matrix_equals(mb, expect_b));
  }
  cJSON_Delete(f);
  cJSON *r = CALL(&k, "{\"cmd\":\"transform.get\",\"world\":\"or\",\"entity\":%lld}", (long long)b);
  CU_ASSERT_TRUE(matrix_equals(cJSON_GetObjectItem(r, "world"), expect_b));
  cJSON_Delete(r);
  OKD(&k, "{\"cmd\":\"world.destroy\",\"world\":\"or\"}");
  t_client_close(&k);
}

/* Across connections: values set one after another reach a subscriber in order, never an
 * older after a newer, ending with the last. */
static void test_frames_never_go_back(void) {
  t_client ctl, sc;
  OPEN(ctl, daemon20.port);
  OPEN(sc, daemon20.port);
  const char *W = "oc";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"oc\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));
  double last = 0;
  int frames = 0;
  for (int i = 1; i <= 30; i++) {
    set_t(&ctl, W, a, i, 0, 0);
    t_sleep_ms((i * 13) % 23);
    cJSON *f;
    while ((f = t_next_event(&sc, 0))) {
      check_frame(&s, f, 0);
      int count;
      const cJSON *m = set_matrix(f, a, &count);
      CU_ASSERT_EQUAL(count, 1);
      double x = m ? cJSON_GetArrayItem(m, 12)->valuedouble : -1;
      CU_ASSERT_TRUE(x > last && x <= i);
      last = x;
      frames++;
      cJSON_Delete(f);
    }
  }
  cJSON *f;
  while ((f = t_next_event(&sc, QUIET_MS))) {
    check_frame(&s, f, 0);
    int count;
    const cJSON *m = set_matrix(f, a, &count);
    double x = m ? cJSON_GetArrayItem(m, 12)->valuedouble : -1;
    CU_ASSERT_TRUE(x > last);
    last = x;
    frames++;
    cJSON_Delete(f);
  }
  CU_ASSERT_EQUAL(last, 30);
  CU_ASSERT_TRUE(frames >= 2);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"oc\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* hz caps a subscription's frames per second; each frame carries everything since the last. */
static void test_hz_cap(void) {
  t_daemon d;
  const char *args[] = {"--tick-hz", "50", NULL};
  if (!START(&d, args))
    return;
  t_client ctl, sc, fast;
  OPEN(ctl, d.port);
  OPEN(sc, d.port);
  OPEN(fast, d.port);
  const char *W = "hz";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"hz\"}");
  int64_t m = mk(&ctl, W, 0, 0, 0, 0);
  int64_t y[4];
  for (int i = 0; i < 4; i++)
    y[i] = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s, sf;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 5));
  CU_ASSERT_TRUE_FATAL(subscribe(&fast, &sf, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));
  cJSON_Delete(expect_frame(&fast, &sf, 1));

  /* Move m every 10 ms for a second; set each y once along the way. */
  float mx = 0, yv[4] = {0, 0, 0, 0};
  int seen_y[4] = {0, 0, 0, 0};
  int frames = 0, fast_frames = 0;
  double prev_tick = s.last_tick;
  long start = t_now_ms(), end = start + 1000;
  int i = 0;
  while (t_now_ms() < end) {
    i++;
    set_t(&ctl, W, m, i, 0, 0);
    mx = (float)i;
    if (i % 20 == 10 && i / 20 < 4) {
      yv[i / 20] = (float)(100 + i);
      set_t(&ctl, W, y[i / 20], yv[i / 20], 0, 0);
    }
    t_sleep_ms(10);
    cJSON *f;
    while ((f = t_next_event(&fast, 0))) {
      fast_frames++;
      cJSON_Delete(f);
    }
    while ((f = t_next_event(&sc, 0))) {
      check_frame(&s, f, 0);
      long at = t_now_ms();
      if (at <= end)
        frames++;
      /* At most one frame per 10 ticks of the world (5 of 50 per second). */
      CU_ASSERT_TRUE(t_resp_num(f, "tick") - prev_tick >= 9);
      prev_tick = t_resp_num(f, "tick");
      for (int j = 0; j < 4; j++) {
        int count;
        const cJSON *mm = set_matrix(f, y[j], &count);
        if (mm) {
          seen_y[j]++;
          float want_m[16];
          mat_t(want_m, yv[j], 0, 0);
          CU_ASSERT_TRUE(matrix_equals(mm, want_m));
        }
      }
      cJSON_Delete(f);
    }
  }
  /* The frames after the motion stops. */
  cJSON *f, *last = NULL;
  while ((f = t_next_event(&sc, 600))) {
    check_frame(&s, f, 0);
    CU_ASSERT_TRUE(t_resp_num(f, "tick") - prev_tick >= 9);
    prev_tick = t_resp_num(f, "tick");
    for (int j = 0; j < 4; j++) {
      int count;
      if (set_matrix(f, y[j], &count))
        seen_y[j]++;
    }
    cJSON_Delete(last);
    last = f;
  }
  CU_ASSERT_TRUE(frames >= 3 && frames <= 6);
  if (!(frames >= 3 && frames <= 6))
    fprintf(stderr, "  %d frames in a second at hz 5\n", frames);
  /* The uncapped subscriber got many more. */
  CU_ASSERT_TRUE(fast_frames >= 20);
  for (int j = 0; j < 4; j++)
    CU_ASSERT_EQUAL(seen_y[j], 1);
  /* The final value arrives. */
  if (last) {
    int count;
    float want_m[16];
    mat_t(want_m, mx, 0, 0);
    const cJSON *mm = set_matrix(last, m, &count);
    CU_ASSERT_TRUE(count == 1 && matrix_equals(mm, want_m));
  } else {
    /* The last frame inside the window already had it: nothing changed after it. */
    CU_ASSERT_TRUE(frames >= 1);
  }
  cJSON_Delete(last);
  t_client_close(&sc);
  t_client_close(&fast);
  t_client_close(&ctl);
  STOP_OK(&d, 5000);
}

/* ---- a slow consumer ---------------------------------------------------------------------- */

#define BIG 20000

typedef struct id_index {
  int64_t id;
  int index;
} id_index;

static int cmp_id_index(const void *a, const void *b) {
  int64_t x = ((const id_index *)a)->id, y = ((const id_index *)b)->id;
  return (x > y) - (x < y);
}

static int index_of(const id_index *map, int n, int64_t id) {
  id_index key = {id, 0};
  const id_index *hit = bsearch(&key, map, (size_t)n, sizeof *map, cmp_id_index);
  return hit ? hit->index : -1;
}

/* Transform i (0 is the root) at root x: the root at (x,0,0), child i at (x + i%100, i/100, 0). */
static void big_expected(float m[16], int i, float x) {
  if (i == 0)
    mat_t(m, x, 0, 0);
  else
    mat_t(m, x + (float)(i % 100), (float)(i / 100), 0);
}

static void test_slow_consumer(void) {
  t_daemon d;
  const char *args[] = {"--tick-hz", "20", "--output-limit", "262144", NULL};
  if (!START(&d, args))
    return;
  t_client ctl, sc;
  OPEN(ctl, d.port);
  OPEN(sc, d.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"big\"}");
  int64_t *ids = calloc(BIG, sizeof *ids);
  id_index *map = calloc(BIG, sizeof *map);
  float(*state)[16] = calloc(BIG, sizeof *state);
  bool *known = calloc(BIG, sizeof *known);
  char *line = malloc(256 * 1024);
  CU_ASSERT_FATAL(ids && map && state && known && line);
  ids[0] = mk(&ctl, "big", 0, 0, 0, 0);
  for (int from = 1; from < BIG; from += 2000) {
    int to = from + 2000 < BIG ? from + 2000 : BIG;
    size_t len = (size_t)sprintf(line, "{\"cmd\":\"batch\",\"world\":\"big\",\"ops\":[");
    for (int i = from; i < to; i++)
      len += (size_t)sprintf(line + len,
                             "%s{\"cmd\":\"transform.create\",\"parent\":%lld,\"t\":[%d,%d,0]}",
                             i > from ? "," : "", (long long)ids[0], i % 100, i / 100);
    sprintf(line + len, "]}");
    cJSON *r = CALL(&ctl, "%s", line);
    CU_ASSERT_TRUE_FATAL(t_resp_ok(r));
    const cJSON *results = cJSON_GetObjectItemCaseSensitive(r, "results");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(results), to - from);
    for (int i = from; i < to; i++)
      ids[i] = (int64_t)t_resp_num(cJSON_GetArrayItem(results, i - from), "entity");
    cJSON_Delete(r);
  }
  for (int i = 0; i < BIG; i++)
    map[i] = (id_index){ids[i], i};
  qsort(map, BIG, sizeof *map, cmp_id_index);
  for (int i = 1; i < BIG; i++)
    CU_ASSERT_TRUE_FATAL(map[i].id > map[i - 1].id && map[i - 1].id > 0);

  sub_state s, leaf;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, "big", 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &leaf, "big", ids[7], 0));
  t_sleep_ms(200);
  long base = t_rss_kib(d.pid), peak = base;
  CU_ASSERT_TRUE_FATAL(base > 0);

  /* The root moves every tick for ~3 s while the subscriber reads nothing. */
  int x = 0;
  long end = t_now_ms() + 3000;
  while (t_now_ms() < end) {
    x++;
    set_t(&ctl, "big", ids[0], x, 0, 0);
    long rss = t_rss_kib(d.pid);
    if (rss > peak)
      peak = rss;
    t_sleep_ms(TICK_MS);
  }
  long grown = peak - base;
  CU_ASSERT_TRUE(grown < 64 * 1024);
  if (grown >= 64 * 1024)
    fprintf(stderr, "  resident memory grew by %ld KiB while a subscriber stalled\n", grown);
  /* Motion stopped: the state the subscriber must converge to. */
  for (int i = 0; i < BIG; i += 997) {
    cJSON *r = CALL(&ctl, "{\"cmd\":\"transform.get\",\"world\":\"big\",\"entity\":%lld}",
                    (long long)ids[i]);
    float want_m[16];
    big_expected(want_m, i, (float)x);
    CU_ASSERT_TRUE(matrix_equals(cJSON_GetObjectItemCaseSensitive(r, "world"), want_m));
    cJSON_Delete(r);
  }

  /* Now it reads: frames it had, then (having lagged) a full frame of the final state. */
  int frames = 0, fulls = 0, last_full_count = -1;
  bool last_was_full = false, last_full_matches = false;
  long deadline = t_now_ms() + 20000;
  cJSON *f;
  int leaf_fulls = 0;
  bool leaf_last_full = false, leaf_matches = false;
  /* Until both subscriptions have converged (a full frame of the final state last). */
  while (!(last_was_full && last_full_matches && last_full_count == BIG && leaf_last_full &&
           leaf_matches && leaf_fulls >= 2) &&
         t_now_ms() < deadline && (f = t_next_event(&sc, 3000))) {
    if (t_resp_num(f, "sub") == (double)leaf.id) {
      /* The one-transform subtree subscription lags and resyncs too. */
      check_frame(&leaf, f, -1);
      leaf_last_full = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "full"));
      leaf_fulls += leaf_last_full;
      int count;
      float want_m[16];
      big_expected(want_m, 7, (float)x);
      leaf_matches = matrix_equals(set_matrix(f, ids[7], &count), want_m) && count == 1 &&
                     cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "set")) == 1;
      cJSON_Delete(f);
      continue;
    }
    check_frame(&s, f, -1);
    frames++;
    bool full = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "full"));
    if (full) {
      fulls++;
      memset(known, 0, BIG * sizeof *known);
    }
    const cJSON *it;
    int count = 0;
    bool matches = true;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(f, "set")) {
      int i = index_of(map, BIG, (int64_t)t_resp_num(it, "e"));
      CU_ASSERT_TRUE(i >= 0);
      if (i < 0)
        continue;
      const cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "m");
      for (int j = 0; j < 16; j++)
        state[i][j] = (float)cJSON_GetArrayItem(m, j)->valuedouble;
      known[i] = true;
      float want_m[16];
      big_expected(want_m, i, (float)x);
      matches &= memcmp(want_m, state[i], sizeof want_m) == 0;
      count++;
    }
    CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "removed")), 0);
    last_was_full = full;
    if (full) {
      last_full_count = count;
      last_full_matches = matches;
    }
    cJSON_Delete(f);
  }
  /* Then nothing more: nothing changes. */
  QUIET(&sc, QUIET_MS);
  CU_ASSERT_TRUE(fulls >= 2); /* the first, and the one after lagging */
  CU_ASSERT_TRUE(last_was_full);
  CU_ASSERT_EQUAL(last_full_count, BIG);
  CU_ASSERT_TRUE(last_full_matches);
  if (!(fulls >= 2 && last_was_full && last_full_matches))
    fprintf(stderr, "  %d frames, %d full, last full: %d entries, matches %d\n", frames, fulls,
            last_full_count, (int)last_full_matches);
  CU_ASSERT_TRUE(leaf_fulls >= 2);
  CU_ASSERT_TRUE(leaf_last_full);
  CU_ASSERT_TRUE(leaf_matches);
  /* The subscriber's view equals the daemon's state. */
  int wrong = 0;
  for (int i = 0; i < BIG; i++) {
    float want_m[16];
    big_expected(want_m, i, (float)x);
    wrong += !known[i] || memcmp(want_m, state[i], sizeof want_m) != 0;
  }
  CU_ASSERT_EQUAL(wrong, 0);
  /* Caught up: it now gets ordinary deltas. */
  set_t(&ctl, "big", ids[5], 0, 0, 1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{ids[5], (float)x, 0, 1}}, 1);
  cJSON_Delete(f);
  set_t(&ctl, "big", ids[7], 0, 0, 1);
  cJSON *fs[2];
  sub_state both[2] = {s, leaf};
  frames_by_sub(&sc, both, fs, 2);
  check_set(fs[0], (want[]){{ids[7], (float)x, 0, 1}}, 1);
  CU_ASSERT_TRUE(same_but_sub(fs[0], fs[1]));
  cJSON_Delete(fs[0]);
  cJSON_Delete(fs[1]);

  free(ids);
  free(map);
  free(state);
  free(known);
  free(line);
  t_client_close(&sc);
  t_client_close(&ctl);
  STOP_OK(&d, 10000);
}

/* ---- registration ------------------------------------------------------------------------- */

static int suite_init(void) {
  const char *args[] = {"--tick-hz", TICK_HZ, NULL};
  return t_daemon_start(&daemon20, args) == 0 ? 0 : -1;
}

static int suite_clean(void) {
  int status = t_daemon_stop(&daemon20, 0, 5000);
  return status == 0 ? 0 : -1;
}

int t_register_daemon_stream(void) {
  static const t_test tests[] = {
      {"full frame first, then deltas", test_full_then_delta},
      {"sets between ticks coalesce", test_coalescing},
      {"no-op commands send nothing", test_noop_sends_nothing},
      {"a change undone inside a tick sends nothing", test_revert_sends_nothing},
      {"a batch is one frame", test_batch_one_frame},
      {"removed in whole-world scope", test_removed_whole_world},
      {"subtree scope", test_subtree_scope},
      {"root destroyed other ways", test_root_destroyed_other_ways},
      {"two subscribers, identical frames", test_two_subscribers},
      {"unsubscribe", test_unsubscribe},
      {"subscribe errors", test_subscribe_errors},
      {"world.destroy ends subscriptions", test_world_destroyed},
      {"closing a connection ends its subscriptions", test_close_ends_subscriptions},
      {"frames follow responses", test_frames_follow_responses},
      {"frames never go back", test_frames_never_go_back},
      {"hz caps frames", test_hz_cap},
      {"slow consumer", test_slow_consumer},
  };
  return T_ADD_SUITE("daemon_stream", suite_init, suite_clean, tests);
}

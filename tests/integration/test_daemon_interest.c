/* Interest (subscriptions by distance) against the real daemon: random worlds and motions
 * against a brute-force oracle (json and b64 frames, the grid and --interest naive); entering
 * and leaving as the center or the entity moves, with hysteresis; a center that moves with its
 * parent (two subscribers of one region getting the same frames); a center destroyed every
 * way; near with root; subscribe.update growing, shrinking, removing and adding a region; every
 * refusal of the contract, with nothing changed, and the interest figures; rights under --acl;
 * and a near subscription over TLS. */
#include "clock.h"
#include "daemon_fixtures.h"
#include "interest_fixtures.h"
#include "interest_oracle.h"
#include "stream_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef long long ll;

/* A subscription on k with the request's extra fields (printf-style, after "world"). */
static bool sub_with(t_client *k, sub_state *s, const char *world, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool sub_with(t_client *k, sub_state *s, const char *world, const char *fmt, ...) {
  memset(s, 0, sizeof *s);
  snprintf(s->world, sizeof s->world, "%s", world);
  text extra = {0};
  va_list ap;
  va_start(ap, fmt);
  text_vaddf(&extra, fmt, ap);
  va_end(ap);
  cJSON *r = CALL(k, "{\"cmd\":\"subscribe\",\"world\":\"%s\",%s}", world, text_str(&extra));
  bool good = t_resp_ok(r) && t_resp_id(r, "sub") > 0 && cJSON_GetArraySize(r) == 2;
  CU_ASSERT_TRUE(good);
  if (!good) {
    t_report_text("subscribe with", text_str(&extra));
    t_report("answer", r);
  }
  s->id = good ? (int64_t)t_resp_id(r, "sub") : 0;
  cJSON_Delete(r);
  text_free(&extra);
  return good;
}

/* subscribe.update of s with near (JSON text), answered {"ok":true} and nothing else. */
static void update(t_client *k, const sub_state *s, const char *near) {
  cJSON *r = CALL(k, "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"near\":%s}", (ll)s->id, near);
  CHECK(t_resp_ok(r) && cJSON_GetArraySize(r) == 1, r);
  cJSON_Delete(r);
}

/* The frame's set is exactly these entities, each with the translation given (whatever the
 * rest of its matrix), and its removed list exactly these ids. */
static void check_t(const cJSON *f, const want *w, int n, const int64_t *removed, int nremoved) {
  if (!f)
    return;
  bool good = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "set")) == n;
  for (int i = 0; i < n; i++) {
    int count;
    const cJSON *m = set_matrix(f, w[i].e, &count);
    bool at = count == 1 && cJSON_GetArraySize(m) == 16 &&
              (float)cJSON_GetArrayItem(m, 12)->valuedouble == w[i].x &&
              (float)cJSON_GetArrayItem(m, 13)->valuedouble == w[i].y &&
              (float)cJSON_GetArrayItem(m, 14)->valuedouble == w[i].z;
    if (!at)
      fprintf(stderr, "  entity %lld: %d entries, expected one at (%g,%g,%g)\n", (ll)w[i].e, count,
              w[i].x, w[i].y, w[i].z);
    good &= at;
  }
  CU_ASSERT_TRUE(good);
  if (!good)
    t_report("set differs", f);
  check_removed(f, removed, nremoved);
}

static void expect_unsubscribed(t_client *k, const sub_state *s, const char *reason) {
  cJSON *ev = t_next_event(k, FRAME_WAIT_MS);
  char want_text[160];
  snprintf(want_text, sizeof want_text,
           "{\"event\":\"unsubscribed\",\"sub\":%lld,\"reason\":\"%s\"}", (ll)s->id, reason);
  cJSON *expect = cJSON_Parse(want_text);
  bool same = cJSON_Compare(ev, expect, true);
  CU_ASSERT_TRUE(same);
  if (!same) {
    t_report_text("expected", want_text);
    t_report("got", ev);
  }
  cJSON_Delete(expect);
  cJSON_Delete(ev);
}

static void set_matrix_of(t_client *k, const char *world, int64_t e, const char *matrix) {
  OKD(k, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%lld,\"matrix\":%s}", world,
      (ll)e, matrix);
}

static void destroy(t_client *k, const char *world, int64_t e, bool recursive) {
  OKD(k, "{\"cmd\":\"transform.destroy\",\"world\":\"%s\",\"entity\":%lld%s}", world, (ll)e,
      recursive ? ",\"recursive\":true" : "");
}

static void link_to(t_client *k, const char *world, int64_t e, int64_t parent, const char *keep) {
  OKD(k,
      "{\"cmd\":\"transform.link\",\"world\":\"%s\",\"entity\":%lld,\"parent\":%lld,\"keep\":\"%"
      "s\"}",
      world, (ll)e, (ll)parent, keep);
}

static void unlink_keep(t_client *k, const char *world, int64_t e, const char *keep) {
  OKD(k, "{\"cmd\":\"transform.unlink\",\"world\":\"%s\",\"entity\":%lld,\"keep\":\"%s\"}", world,
      (ll)e, keep);
}

#define FRAME(k, s, full) expect_frame((k), (s), (full))
#define W(...) ((want[]){__VA_ARGS__})
#define IDS(...) ((int64_t[]){__VA_ARGS__})

/* ---- the oracle --------------------------------------------------------------------------- */

/* Each seed on a daemon of its own, so that SCENED_SEED replays it exactly (entity ids, and
 * so the choices made among them, depend on what the daemon made before). */
static void run_oracle(const char *const *args, int seeds_wanted, int steps, const char *tag) {
  uint64_t seeds[8];
  int n = oracle_seeds(seeds, 8, seeds_wanted);
  for (int i = 0; i < n; i++) {
    t_daemon d;
    if (!START(&d, args))
      return;
    oracle_run run = {.seed = seeds[i], .steps = steps, .transforms = 300, .tag = tag};
    bool good = oracle_run_seed(d.port, &run);
    STOP_OK(&d, 5000);
    if (!good)
      return;
  }
}

static void test_oracle(void) {
  const char *args[] = {"--tick-hz", "100", NULL};
  run_oracle(args, 2, oracle_steps(400), "(grid)");
}

static void test_oracle_naive(void) {
  const char *args[] = {"--tick-hz", "100", "--interest", "naive", NULL};
  run_oracle(args, 1, oracle_steps(400) / 2, "(--interest naive)");
}

/* ---- entering and leaving ----------------------------------------------------------------- */

/* The center moves toward an entity that stands still: the entity comes in on that tick,
 * stays while within R + M, leaves beyond it; the same as entities move, are made and go. */
static void test_enter_leave(void) {
  t_client ctl, sc, pc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  OPEN(pc, stream_daemon.port);
  const char *w = "ie";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"ie\"}");
  int64_t c = mk(&ctl, w, 0, 0, 0, 0);
  int64_t b = mk(&ctl, w, 0, 5, 0, 0);
  int64_t a = mk(&ctl, w, 0, 15, 0, 0);
  int64_t far = mk(&ctl, w, 0, 50, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(
      sub_with(&sc, &s, w, "\"near\":{\"entity\":%lld,\"radius\":10,\"margin\":2}", (ll)c));
  cJSON *f = FRAME(&sc, &s, 1);
  check_t(f, W({c, 0, 0, 0}, {b, 5, 0, 0}), 2, NULL, 0);
  cJSON_Delete(f);

  /* a at distance 9 now: in set although its matrix did not change */
  set_t(&ctl, w, c, 6, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({c, 6, 0, 0}, {a, 15, 0, 0}), 2, NULL, 0);
  cJSON_Delete(f);
  /* b at 11 stays (within R + M = 12); a at 21 leaves */
  set_t(&ctl, w, c, -6, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({c, -6, 0, 0}), 1, IDS(a), 1);
  cJSON_Delete(f);
  /* b at 13 leaves */
  set_t(&ctl, w, c, -8, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({c, -8, 0, 0}), 1, IDS(b), 1);
  cJSON_Delete(f);
  /* b at 9 comes back */
  set_t(&ctl, w, c, -4, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({c, -4, 0, 0}, {b, 5, 0, 0}), 2, NULL, 0);
  cJSON_Delete(f);

  /* out of scope, moving: nothing; to 11 from outside (between R and R + M): still nothing */
  set_t(&ctl, w, far, 60, 0, 0);
  set_t(&ctl, w, a, 7, 0, 0);
  QUIET(&sc, QUIET_MS);
  /* a at 9.06: in */
  set_t(&ctl, w, a, 5, 1, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({a, 5, 1, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  /* made inside: in; made outside: nothing; destroyed inside: removed; outside: nothing */
  int64_t g = mk(&ctl, w, 0, -4, 3, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({g, -4, 3, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  int64_t h = mk(&ctl, w, 0, 40, 0, 0);
  QUIET(&sc, QUIET_MS);
  destroy(&ctl, w, g, false);
  f = FRAME(&sc, &s, 0);
  check_t(f, NULL, 0, IDS(g), 1);
  cJSON_Delete(f);
  destroy(&ctl, w, h, false);
  QUIET(&sc, QUIET_MS);
  /* b moves to 11.4 from the center: it changed in scope, and stays */
  OKD(&ctl, "{\"cmd\":\"transform.set_world\",\"world\":\"ie\",\"entity\":%lld,\"t\":[5,0,7]}",
      (ll)b);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({b, 5, 0, 7}), 1, NULL, 0);
  cJSON_Delete(f);

  /* a fixed point, no margin: an empty full frame first, then in and out as m moves */
  sub_state p;
  CU_ASSERT_TRUE_FATAL(sub_with(&pc, &p, w, "\"near\":{\"point\":[100,0,0],\"radius\":3}"));
  f = FRAME(&pc, &p, 1);
  check_t(f, NULL, 0, NULL, 0);
  cJSON_Delete(f);
  int64_t m = mk(&ctl, w, 0, 110, 0, 0);
  QUIET(&pc, QUIET_MS);
  set_t(&ctl, w, m, 102, 0, 0);
  f = FRAME(&pc, &p, 0);
  check_t(f, W({m, 102, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  set_t(&ctl, w, m, 103.5, 0, 0);
  f = FRAME(&pc, &p, 0);
  check_t(f, NULL, 0, IDS(m), 1);
  cJSON_Delete(f);
  QUIET(&sc, 0);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"ie\"}");
  t_client_close(&pc);
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* ---- a center that moves with its parent -------------------------------------------------- */

/* The frame the twin subscriber (the same region on another connection) gets next must be
 * f but for "sub": subscribers with the same region share their frames. */
static void check_twin(t_client *k, sub_state *s, const cJSON *f, int full) {
  cJSON *twin = FRAME(k, s, full);
  CU_ASSERT_TRUE(same_but_sub(f, twin));
  cJSON_Delete(twin);
}

static void test_center_moves_with_parent(void) {
  t_client ctl, sc, tc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  OPEN(tc, stream_daemon.port);
  const char *w = "cp";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"cp\"}");
  int64_t p = mk(&ctl, w, 0, 0, 0, 0);
  int64_t c = mk(&ctl, w, p, 1, 0, 0);
  int64_t x = mk(&ctl, w, 0, 10, 0, 0);
  int64_t y = mk(&ctl, w, 0, -3, 0, 0);
  int64_t q = mk(&ctl, w, 0, 30, 0, 0);
  int64_t z = mk(&ctl, w, 0, 30, 5, 0);
  sub_state s, t;
  CU_ASSERT_TRUE_FATAL(
      sub_with(&sc, &s, w, "\"near\":{\"entity\":%lld,\"radius\":5,\"margin\":1}", (ll)c));
  CU_ASSERT_TRUE_FATAL(
      sub_with(&tc, &t, w, "\"near\":{\"entity\":%lld,\"radius\":5,\"margin\":1}", (ll)c));
  cJSON *f = FRAME(&sc, &s, 1);
  check_t(f, W({p, 0, 0, 0}, {c, 1, 0, 0}, {y, -3, 0, 0}), 3, NULL, 0);
  check_twin(&tc, &t, f, 1);
  cJSON_Delete(f);

  /* the parent moves: the center with it; x comes in unchanged, y leaves */
  set_t(&ctl, w, p, 8, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({p, 8, 0, 0}, {c, 9, 0, 0}, {x, 10, 0, 0}), 3, IDS(y), 1);
  check_twin(&tc, &t, f, 0);
  cJSON_Delete(f);
  /* linked under q keeping its local: at (31,0,0); q comes in, z at 5.1 does not */
  link_to(&ctl, w, c, q, "local");
  f = FRAME(&sc, &s, 0);
  check_t(f, W({c, 31, 0, 0}, {q, 30, 0, 0}), 2, IDS(x, p), 2);
  check_twin(&tc, &t, f, 0);
  cJSON_Delete(f);
  /* q turns a quarter about z: the center goes to (30,1,0), and z at 4 comes in */
  set_matrix_of(&ctl, w, q, "[0,1,0,0,-1,0,0,0,0,0,1,0,30,0,0,1]");
  f = FRAME(&sc, &s, 0);
  check_t(f, W({q, 30, 0, 0}, {c, 30, 1, 0}, {z, 30, 5, 0}), 3, NULL, 0);
  check_twin(&tc, &t, f, 0);
  cJSON_Delete(f);
  /* the grandparent of the center moves it too */
  link_to(&ctl, w, q, p, "world");
  QUIET(&sc, QUIET_MS); /* nothing moved: q kept its world matrix */
  QUIET(&tc, 0);
  set_t(&ctl, w, p, 108, 0, 0); /* p itself ends 22 away */
  f = FRAME(&sc, &s, 0);
  check_t(f, W({q, 130, 0, 0}, {c, 130, 1, 0}), 2, IDS(z), 1);
  check_twin(&tc, &t, f, 0);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"cp\"}");
  t_client_close(&tc);
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* ---- a center destroyed ------------------------------------------------------------------- */

/* way 0: transform.destroy of the center; 1: a recursive destroy of its parent; 2:
 * entity.destroy of the center. Each: a frame removing the whole scope, then unsubscribed. */
static void center_destroyed(int way) {
  t_client ctl, sc, wc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  OPEN(wc, stream_daemon.port);
  const char *w = "cd";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"cd\"}");
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"cd2\"}");
  int64_t top = mk(&ctl, w, 0, 0, 0, -1);
  int64_t p = mk(&ctl, w, top, 0, 0, 1); /* at (0,0,0) */
  int64_t c = mk(&ctl, w, p, 1, 0, 0);
  int64_t a = mk(&ctl, w, 0, 3, 0, 0);
  int64_t b = mk(&ctl, w, 0, 50, 0, 0);
  OKD(&ctl, "{\"cmd\":\"transform.create\",\"world\":\"cd2\",\"entity\":%lld}", (ll)c);
  sub_state s, all;
  CU_ASSERT_TRUE_FATAL(sub_with(&sc, &s, w, "\"near\":{\"entity\":%lld,\"radius\":5}", (ll)c));
  CU_ASSERT_TRUE_FATAL(subscribe(&wc, &all, w, 0, 0));
  cJSON *f = FRAME(&sc, &s, 1);
  check_t(f, W({top, 0, 0, -1}, {p, 0, 0, 0}, {c, 1, 0, 0}, {a, 3, 0, 0}), 4, NULL, 0);
  cJSON_Delete(f);
  cJSON_Delete(FRAME(&wc, &all, 1));

  /* the center's transform in another world goes: nothing here */
  destroy(&ctl, "cd2", c, false);
  QUIET(&sc, QUIET_MS);
  /* top goes without recursion: p becomes a root where it was, and the subscription goes on */
  destroy(&ctl, w, top, false);
  f = FRAME(&sc, &s, 0);
  check_t(f, NULL, 0, IDS(top), 1);
  cJSON_Delete(f);
  cJSON_Delete(FRAME(&wc, &all, 0));

  if (way == 0)
    destroy(&ctl, w, c, false);
  else if (way == 1)
    destroy(&ctl, w, p, true);
  else
    OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (ll)c);
  f = FRAME(&sc, &s, 0);
  check_t(f, NULL, 0, IDS(p, c, a), 3);
  cJSON_Delete(f);
  expect_unsubscribed(&sc, &s, "center_destroyed");
  /* the whole-world subscriber sees only what was destroyed */
  f = FRAME(&wc, &all, 0);
  if (way == 1)
    check_t(f, NULL, 0, IDS(p, c), 2);
  else
    check_t(f, NULL, 0, IDS(c), 1);
  cJSON_Delete(f);
  set_t(&ctl, w, a, 2, 0, 0);
  set_t(&ctl, w, b, 1, 0, 0);
  QUIET(&sc, QUIET_MS);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (ll)s.id);
  ERR(&sc, "NOT_FOUND",
      "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"near\":{\"point\":[0,0,0],\"radius\":5}}",
      (ll)s.id);
  QUIET(&sc, 0);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"cd\"}");
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"cd2\"}");
  t_client_close(&wc);
  t_client_close(&sc);
  t_client_close(&ctl);
}

static void test_center_destroyed(void) { center_destroyed(0); }
static void test_center_destroyed_with_parent(void) { center_destroyed(1); }
static void test_center_entity_destroyed(void) { center_destroyed(2); }

/* ---- near with root ----------------------------------------------------------------------- */

/* A figure of the suite's daemon's /metrics page. */
static double figure(const char *sample) {
  char *page = NULL;
  int status = t_http_get(stream_daemon.http_port, "/metrics", &page);
  double v = status == 200 ? page_metric(page, sample) : -1;
  CU_ASSERT_EQUAL(status, 200);
  free(page);
  return v;
}

/* Two subscriptions made in one tick with the same region share it: one region, one frame
 * encoded for both, the same frames. */
static void test_shared_region(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *w = "sr";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"sr\"}");
  mk(&ctl, w, 0, 0, 0, 0);
  int64_t b = mk(&ctl, w, 0, 3, 0, 0);
  mk(&ctl, w, 0, 50, 0, 0);
  double regions = figure("scened_interest_regions");
  const char *req = "{\"cmd\":\"subscribe\",\"world\":\"sr\",\"near\":{\"point\":[0,0,0],"
                    "\"radius\":5}}\n";
  char two[256];
  snprintf(two, sizeof two, "%s%s", req, req); /* one read, one tick */
  CU_ASSERT_EQUAL_FATAL(t_client_send_raw(&sc, two, strlen(two)), 0);
  int64_t subs[2];
  for (int i = 0; i < 2; i++) {
    cJSON *r = t_client_recv_json(&sc, 5000);
    CU_ASSERT_TRUE_FATAL(t_resp_ok(r));
    subs[i] = (int64_t)t_resp_id(r, "sub");
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(figure("scened_interest_regions"), regions + 1);
  for (int i = 0; i < 2; i++) { /* the full frames, in either order */
    cJSON *f = t_client_recv_json(&sc, 5000);
    CU_ASSERT_TRUE_FATAL(f != NULL);
    CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "full")));
    CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "set")), 2);
    cJSON_Delete(f);
  }
  double encodes = figure("scened_frame_encodes_total");
  set_t(&ctl, w, b, 4, 0, 0);
  cJSON *f1 = t_client_recv_json(&sc, 5000), *f2 = t_client_recv_json(&sc, 5000);
  CU_ASSERT_TRUE_FATAL(f1 && f2);
  int64_t s1 = (int64_t)t_resp_id(f1, "sub"), s2 = (int64_t)t_resp_id(f2, "sub");
  CU_ASSERT_TRUE((s1 == subs[0] && s2 == subs[1]) || (s1 == subs[1] && s2 == subs[0]));
  cJSON_DeleteItemFromObjectCaseSensitive(f1, "sub");
  cJSON_DeleteItemFromObjectCaseSensitive(f2, "sub");
  CU_ASSERT_TRUE(cJSON_Compare(f1, f2, true)); /* the same frame */
  const cJSON *set = cJSON_GetObjectItemCaseSensitive(f1, "set");
  CU_ASSERT_TRUE(cJSON_GetArraySize(set) == 1 &&
                 (int64_t)t_resp_id(cJSON_GetArrayItem(set, 0), "e") == b);
  cJSON_Delete(f1);
  cJSON_Delete(f2);
  CU_ASSERT_EQUAL(figure("scened_frame_encodes_total"), encodes + 1); /* encoded once */
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"sr\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* A near subscription with hz: frames at least ceil(tick_hz / hz) ticks apart while its center
 * walks, and the last position arrives once it stops. */
static void test_near_with_hz(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *w = "hz";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"hz\"}");
  int64_t p = mk(&ctl, w, 0, 0, 0, 0);
  mk(&ctl, w, 0, 2, 0, 0);
  cJSON *r = CALL(&sc,
                  "{\"cmd\":\"subscribe\",\"world\":\"hz\",\"hz\":5,\"near\":{\"entity\":%lld,"
                  "\"radius\":5,\"margin\":1}}",
                  (ll)p);
  int64_t sub = (int64_t)t_resp_id(r, "sub");
  CU_ASSERT_TRUE_FATAL(sub > 0);
  cJSON_Delete(r);
  cJSON *full = t_client_recv_json(&sc, 5000);
  CU_ASSERT_TRUE_FATAL(full != NULL);
  CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(full, "full")) &&
                 cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(full, "set")) == 2);
  cJSON_Delete(full);
  const int every = 4; /* TICK_HZ 20 / hz 5 */
  double x = 0;
  for (long end = t_now_ms() + 1500; t_now_ms() < end;) { /* it walks for 30 ticks */
    x += 0.01;
    set_t(&ctl, w, p, x, 0, 0);
  }
  int64_t last_tick = -1;
  float held = -1;
  for (int frames = 0; frames < 40 && held != (float)x; frames++) {
    cJSON *f = t_client_recv_json(&sc, 3000);
    CU_ASSERT_TRUE_FATAL(f != NULL);
    int64_t tick = (int64_t)t_resp_num(f, "tick");
    if (last_tick >= 0)
      CU_ASSERT_TRUE(tick - last_tick >= every);
    last_tick = tick;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(f, "set")) {
      if ((int64_t)t_resp_id(e, "e") == p)
        held = (float)cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "m"), 12)->valuedouble;
    }
    cJSON_Delete(f);
  }
  CU_ASSERT_EQUAL(held, (float)x); /* the final value */
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"hz\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

static void test_near_with_root(void) {
  t_client ctl, sc, ec;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  OPEN(ec, stream_daemon.port);
  const char *w = "nr";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"nr\"}");
  int64_t r = mk(&ctl, w, 0, 0, 0, 0);
  int64_t a = mk(&ctl, w, r, 2, 0, 0);
  int64_t b = mk(&ctl, w, r, 20, 0, 0);
  int64_t o = mk(&ctl, w, 0, 1, 0, 0);
  int64_t o2 = mk(&ctl, w, 0, 19, 0, 0);
  sub_state s, e;
  CU_ASSERT_TRUE_FATAL(sub_with(&sc, &s, w,
                                "\"root\":%lld,\"near\":{\"point\":[0,0,0],\"radius\":5,"
                                "\"margin\":1}",
                                (ll)r));
  /* followed entity outside the subtree: the region follows it, it is not in scope itself */
  CU_ASSERT_TRUE_FATAL(
      sub_with(&ec, &e, w, "\"near\":{\"entity\":%lld,\"radius\":3},\"root\":%lld", (ll)o2, (ll)r));
  cJSON *f = FRAME(&sc, &s, 1);
  check_t(f, W({r, 0, 0, 0}, {a, 2, 0, 0}), 2, NULL, 0); /* o is near but outside the subtree */
  cJSON_Delete(f);
  f = FRAME(&ec, &e, 1);
  check_t(f, W({b, 20, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);

  /* o linked in (unchanged): in; a unlinked (unchanged): out */
  link_to(&ctl, w, o, r, "world");
  f = FRAME(&sc, &s, 0);
  check_t(f, W({o, 1, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  QUIET(&ec, 0);
  unlink_keep(&ctl, w, a, "world");
  f = FRAME(&sc, &s, 0);
  check_t(f, NULL, 0, IDS(a), 1);
  cJSON_Delete(f);
  /* a moves closer outside the subtree: nothing */
  set_t(&ctl, w, a, 1, 1, 0);
  QUIET(&sc, QUIET_MS);
  /* b comes near inside the subtree: in; then to 5.5 (within R + M): stays */
  set_t(&ctl, w, b, 3, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({b, 3, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  f = FRAME(&ec, &e, 0);
  check_t(f, NULL, 0, IDS(b), 1);
  cJSON_Delete(f);
  set_t(&ctl, w, b, 5.5, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({b, 5.5, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  /* o2 (the followed entity, outside the subtree) comes to b and r: b at 0.5 and r at 6 */
  OKD(&ctl, "{\"cmd\":\"transform.set_world\",\"world\":\"nr\",\"entity\":%lld,\"t\":[6,0,0]}",
      (ll)o2);
  f = FRAME(&ec, &e, 0);
  check_t(f, W({b, 5.5, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  /* the subtree moves away: everything leaves both */
  set_t(&ctl, w, r, 100, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, NULL, 0, IDS(r, o, b), 3);
  cJSON_Delete(f);
  f = FRAME(&ec, &e, 0);
  check_t(f, NULL, 0, IDS(b), 1);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"nr\"}");
  t_client_close(&ec);
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* ---- subscribe.update --------------------------------------------------------------------- */

static void test_update(void) {
  t_client ctl, sc, other;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  OPEN(other, stream_daemon.port);
  const char *w = "up";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"up\"}");
  int64_t e[21];
  for (int i = 1; i <= 20; i++)
    e[i] = mk(&ctl, w, 0, i, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(sub_with(&sc, &s, w, "\"near\":{\"point\":[0,0,0],\"radius\":5.5}"));
  cJSON *f = FRAME(&sc, &s, 1);
  check_t(f, W({e[1], 1, 0, 0}, {e[2], 2, 0, 0}, {e[3], 3, 0, 0}, {e[4], 4, 0, 0}, {e[5], 5, 0, 0}),
          5, NULL, 0);
  cJSON_Delete(f);

  /* grown: not a full frame; what came in, unchanged */
  update(&sc, &s, "{\"point\":[0,0,0],\"radius\":10.5,\"margin\":2}");
  f = FRAME(&sc, &s, 0);
  check_t(f,
          W({e[6], 6, 0, 0}, {e[7], 7, 0, 0}, {e[8], 8, 0, 0}, {e[9], 9, 0, 0}, {e[10], 10, 0, 0}),
          5, NULL, 0);
  cJSON_Delete(f);
  /* shrunk to R 3.5, M 4: those in scope stay within 7.5 */
  update(&sc, &s, "{\"point\":[0,0,0],\"radius\":3.5,\"margin\":4}");
  f = FRAME(&sc, &s, 0);
  check_t(f, NULL, 0, IDS(e[8], e[9], e[10]), 3);
  cJSON_Delete(f);
  /* the same region again changes nothing */
  update(&sc, &s, "{\"point\":[0,0,0],\"radius\":3.5,\"margin\":4}");
  QUIET(&sc, QUIET_MS);
  /* e[7] to 7.4 stays; to 7.6 leaves */
  set_t(&ctl, w, e[7], 7.4, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({e[7], 7.4, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  set_t(&ctl, w, e[7], 7.6, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, NULL, 0, IDS(e[7]), 1);
  cJSON_Delete(f);
  /* no region: everything the subscriber lacks */
  update(&sc, &s, "null");
  f = FRAME(&sc, &s, 0);
  check_t(f,
          W({e[7], 7.6, 0, 0}, {e[8], 8, 0, 0}, {e[9], 9, 0, 0}, {e[10], 10, 0, 0},
            {e[11], 11, 0, 0}, {e[12], 12, 0, 0}, {e[13], 13, 0, 0}, {e[14], 14, 0, 0},
            {e[15], 15, 0, 0}, {e[16], 16, 0, 0}, {e[17], 17, 0, 0}, {e[18], 18, 0, 0},
            {e[19], 19, 0, 0}, {e[20], 20, 0, 0}),
          14, NULL, 0);
  cJSON_Delete(f);
  /* far moves now reach it */
  set_t(&ctl, w, e[20], 21, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({e[20], 21, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  /* a region again, following e[10]: what is in scope stays within R + M = 2.5 of it (e[7]
   * at 2.4 too) */
  char near[128];
  snprintf(near, sizeof near, "{\"entity\":%lld,\"radius\":1.5,\"margin\":1}", (ll)e[10]);
  update(&sc, &s, near);
  f = FRAME(&sc, &s, 0);
  check_t(f, NULL, 0,
          IDS(e[1], e[2], e[3], e[4], e[5], e[6], e[13], e[14], e[15], e[16], e[17], e[18], e[19],
              e[20]),
          14);
  cJSON_Delete(f);
  /* the center moves onto e[14]: its region with it */
  set_t(&ctl, w, e[10], 14, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({e[10], 14, 0, 0}, {e[13], 13, 0, 0}, {e[14], 14, 0, 0}, {e[15], 15, 0, 0}), 4,
          IDS(e[7], e[8], e[9], e[11]), 4);
  cJSON_Delete(f);

  /* a whole-world subscription gains a region */
  sub_state all;
  CU_ASSERT_TRUE_FATAL(subscribe(&other, &all, w, 0, 0));
  cJSON_Delete(FRAME(&other, &all, 1));
  update(&other, &all, "{\"point\":[20,0,0],\"radius\":2.5}");
  f = FRAME(&other, &all, 0);
  check_t(f, NULL, 0,
          IDS(e[1], e[2], e[3], e[4], e[5], e[6], e[7], e[8], e[9], e[10], e[11], e[12], e[13],
              e[14], e[15], e[16], e[17]),
          17);
  cJSON_Delete(f);

  /* another connection's subscription, an unknown one, an ended one: NOT_FOUND, unchanged */
  ERR(&other, "NOT_FOUND", "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"near\":null}", (ll)s.id);
  ERR(&sc, "NOT_FOUND",
      "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"near\":{\"point\":[0,0,0],\"radius\":1}}",
      (ll)all.id);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"subscribe.update\",\"sub\":987654321,\"near\":null}");
  sub_state gone;
  CU_ASSERT_TRUE_FATAL(sub_with(&sc, &gone, w, "\"root\":%lld", (ll)e[1]));
  cJSON_Delete(FRAME(&sc, &gone, 1));
  OKD(&sc, "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (ll)gone.id);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"near\":null}", (ll)gone.id);
  QUIET(&sc, QUIET_MS);
  QUIET(&other, 0);
  /* both regions as they were: e[14] moves inside both */
  set_t(&ctl, w, e[14], 14, 0.5, 0);
  set_t(&ctl, w, e[19], 19.5, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({e[14], 14, 0.5, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  f = FRAME(&other, &all, 0);
  check_t(f, W({e[19], 19.5, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"up\"}");
  t_client_close(&other);
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* A region whose box misses every occupied cell (nothing near it, nothing near the origin
 * either), removed: everything comes; a far one again: everything leaves. */
static void test_update_far_region(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *w = "uf";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"uf\"}");
  int64_t a = mk(&ctl, w, 0, 500, 0, 0);
  int64_t b = mk(&ctl, w, 0, 520, -40, 3);
  int64_t c = mk(&ctl, w, a, 0, 0, 7); /* at (500,0,7) */
  sub_state s;
  CU_ASSERT_TRUE_FATAL(sub_with(&sc, &s, w, "\"near\":{\"point\":[-1000,1000,0],\"radius\":1}"));
  cJSON *f = FRAME(&sc, &s, 1);
  check_t(f, NULL, 0, NULL, 0);
  cJSON_Delete(f);
  update(&sc, &s, "null");
  f = FRAME(&sc, &s, 0);
  check_t(f, W({a, 500, 0, 0}, {b, 520, -40, 3}, {c, 500, 0, 7}), 3, NULL, 0);
  cJSON_Delete(f);
  /* followed from far away again: everything leaves, then a comes to the region */
  update(&sc, &s, "{\"point\":[1000,-1000,50],\"radius\":2,\"margin\":1}");
  f = FRAME(&sc, &s, 0);
  check_t(f, NULL, 0, IDS(a, b, c), 3);
  cJSON_Delete(f);
  set_t(&ctl, w, a, 1000, -1000, 48.5);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({a, 1000, -1000, 48.5}), 1, NULL, 0);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"uf\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* ---- refusals ----------------------------------------------------------------------------- */

static double interest_gauge(void) {
  char *page = NULL;
  int status = t_http_get(stream_daemon.http_port, "/metrics", &page);
  double v = status == 200 ? page_metric(page, "scened_interest_subscriptions") : -1;
  CU_ASSERT_EQUAL(status, 200);
  free(page);
  return v;
}

/* text with OTHER, DEAD and HERE replaced by the ids ids[0], ids[1] and ids[2], in out. */
static void with_entities(char *out, size_t cap, const char *text_in, const int64_t ids[3]) {
  static const char *const names[] = {"OTHER", "DEAD", "HERE"};
  text t = {0};
  for (const char *p = text_in; *p;) {
    int which = -1;
    for (int i = 0; i < 3; i++)
      if (strncmp(p, names[i], strlen(names[i])) == 0)
        which = i;
    if (which >= 0) {
      text_addf(&t, "%lld", (ll)ids[which]);
      p += strlen(names[which]);
    } else {
      text_add(&t, p++, 1);
    }
  }
  snprintf(out, cap, "%s", text_str(&t));
  text_free(&t);
}

/* The interest figures on /metrics: regions evaluated, on ticks, over candidates, in memory. */
static void check_interest_figures(void) {
  static const char *const positive[] = {
      "scened_interest_evaluations_total", "scened_interest_ticks_total",
      "scened_interest_candidates_total", "scened_interest_memory_bytes"};
  char *page = NULL;
  CU_ASSERT_EQUAL(t_http_get(stream_daemon.http_port, "/metrics", &page), 200);
  for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++) {
    double v = page ? page_metric(page, positive[i]) : -1;
    CU_ASSERT_TRUE(v > 0);
    if (!(v > 0))
      fprintf(stderr, "  /metrics: %s is %g\n", positive[i], v);
  }
  CU_ASSERT_TRUE(page && page_metric(page, "scened_interest_seconds_total") >= 0);
  free(page);
}

static void test_refusals(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *w = "rf";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rf\"}");
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rf2\"}");
  int64_t a = mk(&ctl, w, 0, 1, 0, 0);
  int64_t b = mk(&ctl, w, 0, 8, 0, 0);
  int64_t elsewhere = mk(&ctl, "rf2", 0, 0, 0, 0);
  int64_t dead = mk(&ctl, w, 0, 0, 0, 0);
  OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (ll)dead);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(sub_with(&sc, &s, w, "\"near\":{\"point\":[0,0,0],\"radius\":5}"));
  cJSON *f = FRAME(&sc, &s, 1);
  check_t(f, W({a, 1, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  /* the earlier tests' connections are closed: once the daemon has seen that, this
   * subscription is the only one */
  double subs = -1;
  for (long deadline = t_now_ms() + 5000; t_now_ms() < deadline; t_sleep_ms(10))
    if ((subs = info_subscriptions_of(&ctl)) == 1)
      break;
  CU_ASSERT_EQUAL(subs, 1);
  double gauge = interest_gauge();
  CU_ASSERT_EQUAL(gauge, 1);
  check_interest_figures();

  /* Each bad near, as subscribe's and as subscribe.update's. Each is about (8,0,0), so that
   * one taken by mistake would bring b in and send a out. OTHER: an entity of another world,
   * DEAD: a destroyed one, HERE: one of this world. */
  static const struct {
    const char *code, *near, *names; /* names: what the message must name (NULL: anything) */
  } bad[] = {
      {"BAD_REQUEST", "5", NULL},
      {"BAD_REQUEST", "\"near\"", NULL},
      {"BAD_REQUEST", "[8,0,0]", NULL},
      {"BAD_REQUEST", "true", NULL},
      {"BAD_REQUEST", "{\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"entity\":HERE,\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0],\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0,0],\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,\"0\",0],\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,1e999,0],\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"point\":\"origin\",\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"point\":null,\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"entity\":0,\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"entity\":-3,\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"entity\":1.5,\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"entity\":\"1\",\"radius\":5}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0]}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":0}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":-5}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":1e999}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":\"5\"}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":null}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"margin\":-1}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"margin\":1e999}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"margin\":\"1\"}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"bands\":{\"radius\":1,\"hz\":5}}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"bands\":[5]}", NULL},
      {"BAD_REQUEST",
       "{\"point\":[8,0,0],\"radius\":5,\"bands\":[{\"radius\":3,\"hz\":5},{\"radius\":3,"
       "\"hz\":2}]}",
       NULL},
      {"BAD_REQUEST",
       "{\"point\":[8,0,0],\"radius\":5,\"bands\":[{\"radius\":4,\"hz\":5},{\"radius\":3,"
       "\"hz\":2}]}",
       NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"bands\":[{\"radius\":3,\"hz\":0}]}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"bands\":[{\"radius\":3,\"hz\":-2}]}",
       NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"bands\":[{\"radius\":3,\"hz\":1e999}]}",
       NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"bands\":[{\"radius\":3}]}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"bands\":[{\"hz\":3}]}", NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"bands\":[{\"radius\":\"3\",\"hz\":3}]}",
       NULL},
      {"BAD_REQUEST", "{\"point\":[8,0,0],\"radius\":5,\"centre\":[0,0,0]}", "centre"},
      {"BAD_REQUEST",
       "{\"point\":[8,0,0],\"radius\":5,\"bands\":[{\"radius\":3,\"hz\":5,\"every\":2}]}", "every"},
      {"NOT_FOUND", "{\"entity\":OTHER,\"radius\":5}", NULL},
      {"NOT_FOUND", "{\"entity\":DEAD,\"radius\":5}", NULL},
      {"NOT_FOUND", "{\"entity\":987654321,\"radius\":5}", NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char near[400], *msg = NULL;
    with_entities(near, sizeof near, bad[i].near, (int64_t[]){elsewhere, dead, b});
    if (ERR_MESSAGE(&sc, bad[i].code, &msg, "{\"cmd\":\"subscribe\",\"world\":\"rf\",\"near\":%s}",
                    near) &&
        bad[i].names && !strstr(msg, bad[i].names)) {
      CU_FAIL("the message names the unknown member");
      fprintf(stderr, "  near %s: message \"%s\" does not name %s\n", near, msg, bad[i].names);
    }
    free(msg);
    msg = NULL;
    if (ERR_MESSAGE(&sc, bad[i].code, &msg,
                    "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"near\":%s}", (ll)s.id, near) &&
        bad[i].names && !strstr(msg, bad[i].names)) {
      CU_FAIL("the message names the unknown member");
      fprintf(stderr, "  update near %s: message \"%s\" does not name %s\n", near, msg,
              bad[i].names);
    }
    free(msg);
  }
  /* subscribe's own: near null, near with a root of nothing, an unknown world */
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"rf\",\"near\":null}");
  ERR(&sc, "NOT_FOUND",
      "{\"cmd\":\"subscribe\",\"world\":\"rf\",\"root\":%lld,\"near\":{\"point\":[0,0,0],"
      "\"radius\":5}}",
      (ll)elsewhere);
  ERR(&sc, "NOT_FOUND",
      "{\"cmd\":\"subscribe\",\"world\":\"nowhere\",\"near\":{\"point\":[0,0,0],\"radius\":5}}");
  /* update's own: neither near nor packed, packed on a subscription that is not packed, a sub
   * that is not one */
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"subscribe.update\",\"sub\":%lld}", (ll)s.id);
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"packed\":{\"step\":0.001}}",
      (ll)s.id);
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"subscribe.update\",\"near\":null}");
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"subscribe.update\",\"sub\":\"1\",\"near\":null}");
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"subscribe.update\",\"sub\":0,\"near\":null}");

  /* nothing subscribed, nothing sent, and the region as it was: b (at 8) moves to 5.5 and
   * stays out (R 5, no margin); a moves and is sent alone */
  CU_ASSERT_EQUAL(info_subscriptions_of(&ctl), subs);
  CU_ASSERT_EQUAL(interest_gauge(), gauge);
  QUIET(&sc, QUIET_MS);
  set_t(&ctl, w, b, 5.5, 0, 0);
  QUIET(&sc, QUIET_MS);
  set_t(&ctl, w, a, 2, 0, 0);
  f = FRAME(&sc, &s, 0);
  check_t(f, W({a, 2, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  /* and a good one counts */
  sub_state more;
  CU_ASSERT_TRUE(sub_with(&sc, &more, w, "\"near\":{\"entity\":%lld,\"radius\":1}", (ll)a));
  cJSON_Delete(FRAME(&sc, &more, 1));
  CU_ASSERT_EQUAL(interest_gauge(), gauge + 1);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rf\"}");
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rf2\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* ---- rights ------------------------------------------------------------------------------- */

static const char *sha256_hex(const char *token) {
  static char hex[65];
  unsigned char md[32];
  unsigned len = 0;
  EVP_Digest(token, strlen(token), md, &len, EVP_sha256(), NULL);
  for (int i = 0; i < 32; i++)
    sprintf(hex + 2 * i, "%02x", md[i]);
  return hex;
}

static void test_acl(void) {
  char dir[64], path[128];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "interest-acl"));
  snprintf(path, sizeof path, "%s/acl", dir);
  FILE *file = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(file);
  fprintf(file, "%s read,write,admin *\n", sha256_hex("op"));
  fprintf(file, "%s read w.\n", sha256_hex("reader"));
  fprintf(file, "%s write,admin *\n", sha256_hex("no-read"));
  fclose(file);
  const char *args[] = {"--acl", path, "--tick-hz", TICK_HZ, NULL};
  t_daemon d;
  t_client op, rd, nr;
  if (!START_CONNECTED(&d, &op, args)) {
    t_remove_temp_dir(dir);
    return;
  }
  CONNECT_FATAL(&rd, d.port);
  CONNECT_FATAL(&nr, d.port);
  t_client_keep_events(&rd);
  t_client_keep_events(&nr);
  OKD(&op, "{\"cmd\":\"hello\",\"token\":\"op\"}");
  OKD(&rd, "{\"cmd\":\"hello\",\"token\":\"reader\"}");
  OKD(&nr, "{\"cmd\":\"hello\",\"token\":\"no-read\"}");
  OKD(&op, "{\"cmd\":\"world.create\",\"world\":\"w.a\"}");
  int64_t a = mk(&op, "w.a", 0, 1, 0, 0);
  int64_t b = mk(&op, "w.a", 0, 9, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(sub_with(&rd, &s, "w.a", "\"near\":{\"point\":[0,0,0],\"radius\":5}"));
  cJSON *f = FRAME(&rd, &s, 1);
  check_t(f, W({a, 1, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  /* without read: UNAUTHORIZED, whatever the sub, and nothing changes */
  ERR(&nr, "UNAUTHORIZED", "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"near\":null}", (ll)s.id);
  ERR(&nr, "UNAUTHORIZED",
      "{\"cmd\":\"subscribe.update\",\"sub\":987654321,\"near\":{\"point\":[0,0,0],"
      "\"radius\":50}}");
  ERR(&nr, "UNAUTHORIZED",
      "{\"cmd\":\"subscribe\",\"world\":\"w.a\",\"near\":{\"point\":[0,0,0],\"radius\":5}}");
  QUIET(&rd, QUIET_MS);
  QUIET(&nr, 0);
  /* with read: the reader's own update works */
  update(&rd, &s, "{\"point\":[0,0,0],\"radius\":10}");
  f = FRAME(&rd, &s, 0);
  check_t(f, W({b, 9, 0, 0}), 1, NULL, 0);
  cJSON_Delete(f);
  STOP_OK(&d, 5000);
  t_client_close(&nr);
  t_client_close(&rd);
  t_client_close(&op);
  t_remove_temp_dir(dir);
}

/* ---- TLS ---------------------------------------------------------------------------------- */

static void test_tls(void) {
  char certs[64], cert[128], key[128], ca[128];
  CU_ASSERT_FATAL(t_make_certs(certs, sizeof certs));
  snprintf(cert, sizeof cert, "%s/server.pem", certs);
  snprintf(key, sizeof key, "%s/server.key", certs);
  snprintf(ca, sizeof ca, "%s/ca.pem", certs);
  const char *args[] = {"--tls-cert", cert, "--tls-key", key, "--tick-hz", TICK_HZ, NULL};
  t_daemon d;
  if (!START(&d, args)) {
    t_remove_tree(certs);
    return;
  }
  t_tls_files tls = {.ca = ca};
  t_client ctl, sc;
  if (CONNECT_TLS(&ctl, d.port, &tls) && CONNECT_TLS(&sc, d.port, &tls)) {
    t_client_keep_events(&sc);
    OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"tls\"}");
    int64_t c = mk(&ctl, "tls", 0, 0, 0, 0);
    int64_t a = mk(&ctl, "tls", 0, 3, 0, 0);
    int64_t b = mk(&ctl, "tls", 0, 30, 0, 0);
    sub_state s;
    CU_ASSERT_TRUE_FATAL(
        sub_with(&sc, &s, "tls", "\"near\":{\"entity\":%lld,\"radius\":5,\"margin\":1}", (ll)c));
    cJSON *f = FRAME(&sc, &s, 1);
    check_t(f, W({c, 0, 0, 0}, {a, 3, 0, 0}), 2, NULL, 0);
    cJSON_Delete(f);
    set_t(&ctl, "tls", c, 27, 0, 0);
    f = FRAME(&sc, &s, 0);
    check_t(f, W({c, 27, 0, 0}, {b, 30, 0, 0}), 2, IDS(a), 1);
    cJSON_Delete(f);
    update(&sc, &s, "null");
    f = FRAME(&sc, &s, 0);
    check_t(f, W({a, 3, 0, 0}), 1, NULL, 0);
    cJSON_Delete(f);
    t_client_close(&sc);
    t_client_close(&ctl);
  }
  STOP_OK(&d, 5000);
  t_remove_tree(certs);
}

/* ---- registration ------------------------------------------------------------------------- */

int t_register_daemon_interest(void) {
  static const t_test tests[] = {
      {"random worlds against a brute-force oracle (json and b64)", test_oracle},
      {"the same with --interest naive", test_oracle_naive},
      {"entering and leaving as the center and the entities move", test_enter_leave},
      {"a center that moves with its parent", test_center_moves_with_parent},
      {"a center destroyed: whole scope removed, then unsubscribed", test_center_destroyed},
      {"a center destroyed with its parent", test_center_destroyed_with_parent},
      {"a center's entity destroyed", test_center_entity_destroyed},
      {"near with root: both must hold", test_near_with_root},
      {"two subscriptions of one region made in one tick share its frame", test_shared_region},
      {"near with hz: frames spaced by the rate, the last value arrives", test_near_with_hz},
      {"subscribe.update: grow, shrink, none, follow; other connections' subs", test_update},
      {"subscribe.update: a region far from everything, removed", test_update_far_region},
      {"every refusal answers its code and changes nothing", test_refusals},
      {"--acl: subscribe.update needs read", test_acl},
      {"a near subscription over TLS", test_tls},
  };
  return T_ADD_SUITE("daemon_interest", stream_suite_init, stream_suite_clean, tests);
}

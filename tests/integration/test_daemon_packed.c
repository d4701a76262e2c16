/* Packed frames against the real daemon: a random hierarchy (non-uniform scales, mirrors,
 * near-identity rotations about each axis, sheared matrices) moving for many ticks, seen by a
 * b64 subscriber and by packed ones (whole world, and a region) that must get the same ticks,
 * the same entities and matrices within the contract's tolerance; a new step or origin; coming
 * into scope; a subscriber that lags and resyncs; subscribers in step sharing one payload; a
 * destroyed center; packed frames as WebSocket binary messages; and every refusal. */
#include "clock.h"
#include "daemon_fixtures.h"
#include "interest_fixtures.h"
#include "interest_oracle.h"
#include "packed_fixtures.h"
#include "rng.h"
#include "stream_fixtures.h"
#include "suites.h"
#include "ws_fixtures.h"

#include "scn_core.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef long long ll;

static double range(rng *g, double lo, double hi) { return lo + (hi - lo) * rng_unit(g); }

static t_daemon pd;

/* A subscription of k with extra fields (JSON text after "world"); its id. */
static int64_t subscribe_with(t_client *k, const char *world, const char *extra) {
  cJSON *r = CALL(k, "{\"cmd\":\"subscribe\",\"world\":\"%s\"%s}", world, extra);
  bool good = t_resp_ok(r) && t_resp_id(r, "sub") > 0;
  CHECK(good, r);
  int64_t id = good ? (int64_t)t_resp_id(r, "sub") : 0;
  cJSON_Delete(r);
  return id;
}

static int64_t create(t_client *k, const char *world, const char *fields) {
  cJSON *r = OK(k, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s}", world, fields);
  int64_t e = (int64_t)t_resp_id(r, "entity");
  cJSON_Delete(r);
  return e;
}

/* The next event on k, which must be a packed frame of sub: decoded into v (against b), its
 * entries' flags in w. */
static bool next_packed(t_client *k, int64_t sub, scn_packed_baseline *b, frame_view *v,
                        packed_walk *w) {
  cJSON *f = t_next_event(k, FRAME_WAIT_MS);
  bool ok = f && t_resp_num(f, "sub") == (double)sub && packed_frame_read(f, b, v, w);
  CU_ASSERT_TRUE(ok);
  if (!ok)
    t_report("expected a packed frame", f);
  cJSON_Delete(f);
  return ok;
}

static uint8_t flags_of(const packed_walk *w, uint64_t id) {
  for (int i = 0; i < w->n; i++)
    if (w->ids[i] == id)
      return w->flags[i];
  return 0xff; /* absent */
}

static void free_frame(frame_view *v, packed_walk *w) {
  frame_view_free(v);
  packed_walk_free(w);
}

/* ---- the property: packed and b64 subscribers see the same ------------------------------ */

enum { ENTITIES = 48, ROUNDS = 60 };

/* A random local transform as request fields: a translation, a rotation (near identity about
 * one axis, so that each component is the largest of its quaternion, or anything), a scale
 * (uniform, non-uniform, a mirror, or none), or now and then a sheared matrix. */
static void random_local(rng *g, char *out, size_t cap) {
  double t[3];
  for (int k = 0; k < 3; k++)
    t[k] = range(g, -300, 300);
  int kind = (int)rng_below(g, 10);
  if (kind == 0) { /* shear: goes raw */
    snprintf(out, cap, ",\"matrix\":[1,0,0,0, %.4f,1,0,0, 0,0,1,0, %.4f,%.4f,%.4f,1]",
             range(g, 0.2, 0.9), t[0], t[1], t[2]);
    return;
  }
  double q[4];
  int axis = (int)rng_below(g, 4);
  if (kind < 6) { /* near the identity, or half a turn about one axis */
    for (int k = 0; k < 4; k++)
      q[k] = range(g, -0.002, 0.002);
    q[axis] = 1;
  } else {
    for (int k = 0; k < 4; k++)
      q[k] = range(g, -1, 1);
  }
  double s[3] = {1, 1, 1};
  int sk = 1 + (int)rng_below(g, 5); /* 4, 5: none */
  if (sk == 1)
    s[0] = s[1] = s[2] = range(g, 0.5, 3);
  else if (sk == 2)
    for (int k = 0; k < 3; k++)
      s[k] = range(g, 0.25, 4);
  else if (sk == 3)
    s[0] = -range(g, 0.5, 2); /* a mirror */
  snprintf(out, cap, ",\"t\":[%.5f,%.5f,%.5f],\"r\":[%.6f,%.6f,%.6f,%.6f],\"s\":[%.5f,%.5f,%.5f]",
           t[0], t[1], t[2], q[0], q[1], q[2], q[3], s[0], s[1], s[2]);
}

/* What one subscriber got, by tick. */
typedef struct seen {
  int n;
  frame_view v[ROUNDS * 4];
  packed_walk w[ROUNDS * 4]; /* packed: each entry's flags */
} seen;

static void seen_free(seen *s) {
  for (int i = 0; i < s->n; i++)
    free_frame(&s->v[i], &s->w[i]);
}

/* Frames of sub on k up to tick last (packed when b is not NULL), into s. */
static void collect(t_client *k, int64_t sub, scn_packed_baseline *b, bool b64, long last,
                    seen *s) {
  long deadline = t_now_ms() + 20000;
  while (t_now_ms() < deadline && s->n < ROUNDS * 4 && (!s->n || s->v[s->n - 1].tick < last)) {
    cJSON *f = t_next_event(k, FRAME_WAIT_MS);
    if (!f)
      break;
    frame_view *v = &s->v[s->n];
    bool ok = t_resp_num(f, "sub") == (double)sub &&
              (b ? packed_frame_read(f, b, v, &s->w[s->n]) : frame_read(f, b64, v));
    CU_ASSERT_TRUE(ok);
    if (!ok)
      t_report("frame", f);
    cJSON_Delete(f);
    if (!ok)
      break;
    s->n++;
  }
  CU_ASSERT_TRUE(s->n > 0 && s->v[s->n - 1].tick == last);
}

/* The packed subscriber's frames are the b64 one's, tick for tick, entity for entity. */
static void compare(const seen *exact, const seen *packed, double step, const char *what) {
  CU_ASSERT_EQUAL(exact->n, packed->n);
  int bad = 0, matrices = 0, raw = 0;
  for (int i = 0; i < exact->n && i < packed->n && bad < 5; i++) {
    const frame_view *a = &exact->v[i], *b = &packed->v[i];
    bool same =
        a->tick == b->tick && a->full == b->full && a->n == b->n && a->nremoved == b->nremoved;
    for (int r = 0; same && r < a->nremoved; r++)
      same = frame_removes(b, a->removed[r]);
    for (int e = 0; same && e < a->n; e++) {
      const float *m = frame_matrix(b, a->ids[e]);
      char why[160] = "absent";
      /* raw for a matrix that is not T x R x S, and only for one */
      bool trs = scn_decompose_trs(a->ms[e], NULL, NULL, NULL) == SCN_OK;
      matrices++;
      raw += !trs;
      if (m && trs == !!(flags_of(&packed->w[i], a->ids[e]) & SCN_PACKED_RAW))
        snprintf(why, sizeof why, "%s", trs ? "sent raw" : "not sent raw");
      else if (m && packed_close_enough(a->ms[e], m, step, why, sizeof why))
        continue;
      fprintf(stderr, "  %s, tick %ld, entity %llu: %s\n", what, a->tick,
              (unsigned long long)a->ids[e], why);
      same = false;
    }
    if (!same) {
      fprintf(stderr, "  %s: frame %d (tick %ld/%ld, %d/%d set, %d/%d removed) differs\n", what, i,
              a->tick, b->tick, a->n, b->n, a->nremoved, b->nremoved);
      bad++;
    }
  }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_TRUE(raw > 0 && matrices - raw > 20); /* the workload makes both */
  fprintf(stderr, "  %s: %d frames, %d matrices (%d not T x R x S)\n", what, exact->n, matrices,
          raw);
}

static void test_same_as_b64(void) {
  uint64_t seed;
  oracle_seeds(&seed, 1, 1);
  fprintf(stderr, "  packed against b64: seed %llu (SCENED_SEED replays it)\n",
          (unsigned long long)seed);
  rng g = {seed};
  t_client ctl, kb, kp, kn, kj;
  OPEN(ctl, pd.port);
  OPEN(kb, pd.port);
  OPEN(kp, pd.port);
  OPEN(kn, pd.port);
  OPEN(kj, pd.port);
  OKD(&kb, "{\"cmd\":\"hello\",\"matrices\":\"b64\"}");
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"pw\"}");
  int64_t e[ENTITIES];
  char fields[320];
  for (int i = 0; i < ENTITIES; i++) {
    random_local(&g, fields, sizeof fields);
    char with_parent[400];
    snprintf(with_parent, sizeof with_parent, "%s%s", fields, "");
    if (i > 4 && rng_below(&g, 2))
      snprintf(with_parent, sizeof with_parent, "%s,\"parent\":%lld", fields,
               (ll)e[rng_below(&g, (uint64_t)i)]);
    e[i] = create(&ctl, "pw", with_parent);
  }
  double step = 0.001, origin[3] = {round(range(&g, -100, 100) * 1000) / 1000, 7, -3};
  char packed[160], near[200];
  snprintf(packed, sizeof packed, ",\"packed\":{\"step\":%g,\"origin\":[%.3f,%.3f,%.3f]}", step,
           origin[0], origin[1], origin[2]);
  snprintf(near, sizeof near, ",\"near\":{\"point\":[0,0,0],\"radius\":250,\"margin\":20}");
  int64_t sb = subscribe_with(&kb, "pw", "");
  int64_t sp = subscribe_with(&kp, "pw", packed);
  char both[400];
  snprintf(both, sizeof both, "%s%s", near, packed);
  int64_t sn = subscribe_with(&kn, "pw", both);
  int64_t sj = subscribe_with(&kj, "pw", near); /* json, the region's reference */
  /* subscribed within one tick or not, each starts with a full frame; wait for them so that
   * all four start from the same tick */
  long t0 = TICK_NOW(&ctl, "pw", (unsigned long long)e[0]);
  TICK_PAST(&ctl, "pw", (unsigned long long)e[0], t0 + 2);
  for (int round = 0; round < ROUNDS; round++) {
    int ops = 1 + (int)rng_below(&g, 6);
    for (int o = 0; o < ops; o++) {
      int64_t x = e[rng_below(&g, ENTITIES)];
      int what = (int)rng_below(&g, 12);
      if (what == 0 && x != e[0]) { /* destroyed, and made again under another id */
        OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"pw\",\"entity\":%lld}", (ll)x);
        random_local(&g, fields, sizeof fields);
        for (int i = 0; i < ENTITIES; i++)
          if (e[i] == x)
            e[i] = create(&ctl, "pw", fields);
      } else if (what == 1) { /* a small move: a delta of a few steps */
        OKD(&ctl,
            "{\"cmd\":\"transform.set_local\",\"world\":\"pw\",\"entity\":%lld,"
            "\"t\":[%.4f,%.4f,%.4f]}",
            (ll)x, range(&g, -2, 2), range(&g, -2, 2), range(&g, -2, 2));
      } else {
        random_local(&g, fields, sizeof fields);
        OKD(&ctl, "{\"cmd\":\"transform.set_local\",\"world\":\"pw\",\"entity\":%lld%s}", (ll)x,
            fields);
      }
    }
    long now = TICK_NOW(&ctl, "pw", (unsigned long long)e[0]);
    TICK_PAST(&ctl, "pw", (unsigned long long)e[0], now);
  }
  long last = TICK_NOW(&ctl, "pw", (unsigned long long)e[0]);
  /* one last change, so that every subscriber's last frame is at a known tick */
  OKD(&ctl, "{\"cmd\":\"transform.set_local\",\"world\":\"pw\",\"entity\":%lld,\"t\":[1,2,3]}",
      (ll)e[0]);
  last = TICK_PAST(&ctl, "pw", (unsigned long long)e[0], last);
  seen *s = calloc(4, sizeof *s);
  CU_ASSERT_FATAL(s != NULL);
  scn_packed_baseline bp = {0}, bn = {0};
  scn_packed_baseline_set_grid(&bp, step, origin);
  scn_packed_baseline_set_grid(&bn, step, origin);
  collect(&kb, sb, NULL, true, last, &s[0]);
  collect(&kp, sp, &bp, false, last, &s[1]);
  collect(&kn, sn, &bn, false, last, &s[2]);
  collect(&kj, sj, NULL, false, last, &s[3]);
  compare(&s[0], &s[1], step, "whole world");
  compare(&s[3], &s[2], step, "region");
  for (int i = 0; i < 4; i++)
    seen_free(&s[i]);
  free(s);
  scn_packed_baseline_free(&bp);
  scn_packed_baseline_free(&bn);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"pw\"}");
  t_client_close(&kb);
  t_client_close(&kp);
  t_client_close(&kn);
  t_client_close(&kj);
  t_client_close(&ctl);
}

/* ---- the rules of the payload ------------------------------------------------------------- */

#define ABSOLUTE(f) (((f) & (SCN_PACKED_T | SCN_PACKED_DELTA)) == SCN_PACKED_T)
#define DELTA(f) (((f) & (SCN_PACKED_T | SCN_PACKED_DELTA)) == (SCN_PACKED_T | SCN_PACKED_DELTA))

static void move_to(t_client *k, const char *w, int64_t e, double x, double y, double z) {
  OKD(k,
      "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%lld,\"t\":[%g,%g,%g],"
      "\"partial\":true}",
      w, (ll)e, x, y, z);
}

/* A new step or origin: the next frame's translations are absolute, and so is that of an
 * entity not in it, the next time it appears; then deltas again. */
static void test_new_grid(void) {
  t_client ctl, k;
  OPEN(ctl, pd.port);
  OPEN(k, pd.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"grid\"}");
  int64_t a = create(&ctl, "grid", ",\"t\":[1,2,3],\"r\":[0,0.6,0,0.8]");
  int64_t b = create(&ctl, "grid", ",\"t\":[-4,5,6],\"s\":[2,2,2]");
  int64_t sub = subscribe_with(&k, "grid", ",\"packed\":{\"step\":0.01}");
  scn_packed_baseline base = {0};
  scn_packed_baseline_set_grid(&base, 0.01, (double[3]){0, 0, 0});
  frame_view v;
  packed_walk w;
  /* the full frame: absolute, a rotation, a scale only where there is one */
  if (next_packed(&k, sub, &base, &v, &w)) {
    CU_ASSERT_TRUE(v.full && v.n == 2);
    CU_ASSERT_EQUAL(flags_of(&w, (uint64_t)a), SCN_PACKED_T | SCN_PACKED_R);
    CU_ASSERT_EQUAL(flags_of(&w, (uint64_t)b), SCN_PACKED_T | SCN_PACKED_R | SCN_PACKED_S_UNI);
  }
  free_frame(&v, &w);
  move_to(&ctl, "grid", a, 1.5, 2, 3);
  if (next_packed(&k, sub, &base, &v, &w)) {
    CU_ASSERT_EQUAL(flags_of(&w, (uint64_t)a), SCN_PACKED_T | SCN_PACKED_DELTA);
    CU_ASSERT_EQUAL(flags_of(&w, (uint64_t)b), 0xff);
    CU_ASSERT_DOUBLE_EQUAL(frame_matrix(&v, (uint64_t)a)[12], 1.5, 0.005);
  }
  free_frame(&v, &w);
  OKD(&k,
      "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"packed\":{\"step\":0.001,"
      "\"origin\":[100,0,0]}}",
      (ll)sub);
  scn_packed_baseline_set_grid(&base, 0.001, (double[3]){100, 0, 0});
  move_to(&ctl, "grid", a, 1.25, 2, 3);
  if (next_packed(&k, sub, &base, &v, &w)) {
    CU_ASSERT_TRUE(!v.full && ABSOLUTE(flags_of(&w, (uint64_t)a)));
    CU_ASSERT_DOUBLE_EQUAL(frame_matrix(&v, (uint64_t)a)[12], 1.25, 0.0005 + 1e-5);
  }
  free_frame(&v, &w);
  move_to(&ctl, "grid", b, -4.5, 5, 6); /* not in the frame after the update: absolute now */
  if (next_packed(&k, sub, &base, &v, &w)) {
    CU_ASSERT_TRUE(ABSOLUTE(flags_of(&w, (uint64_t)b)));
    CU_ASSERT_FALSE(flags_of(&w, (uint64_t)b) & (SCN_PACKED_R | SCN_PACKED_S_UNI));
    CU_ASSERT_DOUBLE_EQUAL(frame_matrix(&v, (uint64_t)b)[12], -4.5, 0.0005 + 1e-5);
    /* the scale it had (under a rotation 0.14 degrees off, as smallest three sends none) */
    CU_ASSERT_DOUBLE_EQUAL(frame_matrix(&v, (uint64_t)b)[0], 2, 1e-4);
  }
  free_frame(&v, &w);
  move_to(&ctl, "grid", a, 1, 2, 3);
  if (next_packed(&k, sub, &base, &v, &w))
    CU_ASSERT_EQUAL(flags_of(&w, (uint64_t)a), SCN_PACKED_T | SCN_PACKED_DELTA);
  free_frame(&v, &w);
  /* the same grid again changes nothing: deltas go on */
  OKD(&k,
      "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"packed\":{\"step\":0.001,"
      "\"origin\":[100,0,0]}}",
      (ll)sub);
  move_to(&ctl, "grid", a, 2, 2, 3);
  if (next_packed(&k, sub, &base, &v, &w))
    CU_ASSERT_EQUAL(flags_of(&w, (uint64_t)a), SCN_PACKED_T | SCN_PACKED_DELTA);
  free_frame(&v, &w);
  scn_packed_baseline_free(&base);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"grid\"}");
  t_client_close(&k);
  t_client_close(&ctl);
}

/* Coming into a region is absolute, rotation and all; leaving is in the payload's removed;
 * a center destroyed removes the whole scope in a packed frame, then ends the subscription. */
static void test_scope(void) {
  t_client ctl, k;
  OPEN(ctl, pd.port);
  OPEN(k, pd.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"scope\"}");
  int64_t c = create(&ctl, "scope", ",\"t\":[0,0,0]");
  int64_t x = create(&ctl, "scope", ",\"t\":[3,0,0],\"r\":[0,0,0.6,0.8]");
  create(&ctl, "scope", ",\"t\":[50,0,0]");
  char extra[160];
  snprintf(extra, sizeof extra,
           ",\"near\":{\"entity\":%lld,\"radius\":10},\"packed\":{\"step\":0.001}", (ll)c);
  int64_t sub = subscribe_with(&k, "scope", extra);
  scn_packed_baseline base = {0};
  scn_packed_baseline_set_grid(&base, 0.001, (double[3]){0, 0, 0});
  frame_view v;
  packed_walk w;
  if (next_packed(&k, sub, &base, &v, &w))
    CU_ASSERT_TRUE(v.full && v.n == 2 && frame_matrix(&v, (uint64_t)x));
  free_frame(&v, &w);
  move_to(&ctl, "scope", x, 30, 0, 0);
  if (next_packed(&k, sub, &base, &v, &w))
    CU_ASSERT_TRUE(v.n == 0 && v.nremoved == 1 && frame_removes(&v, (uint64_t)x));
  free_frame(&v, &w);
  move_to(&ctl, "scope", x, 4, 0, 0);
  if (next_packed(&k, sub, &base, &v, &w)) {
    CU_ASSERT_EQUAL(flags_of(&w, (uint64_t)x), SCN_PACKED_T | SCN_PACKED_R);
    const float *m = frame_matrix(&v, (uint64_t)x);
    CU_ASSERT_TRUE(m && fabsf(m[12] - 4) < 0.0006f && fabsf(m[1] - 0.96f) < 0.01f);
  }
  free_frame(&v, &w);
  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"scope\",\"entity\":%lld}", (ll)c);
  if (next_packed(&k, sub, &base, &v, &w))
    CU_ASSERT_TRUE(v.n == 0 && v.nremoved == 2 && frame_removes(&v, (uint64_t)x) &&
                   frame_removes(&v, (uint64_t)c));
  free_frame(&v, &w);
  cJSON *ev = t_next_event(&k, FRAME_WAIT_MS);
  CHECK(t_resp_str_is(ev, "event", "unsubscribed") &&
            t_resp_str_is(ev, "reason", "center_destroyed") && t_resp_num(ev, "sub") == sub,
        ev);
  cJSON_Delete(ev);
  scn_packed_baseline_free(&base);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"scope\"}");
  t_client_close(&k);
  t_client_close(&ctl);
}

/* Subscribers in step share one payload: three on one grid (subscribed at different ticks)
 * and one on another cost two payloads a tick; the three get the same bytes. */
static void test_shared_payloads(void) {
  t_client ctl, k[4];
  OPEN(ctl, pd.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"share\"}");
  int64_t e = create(&ctl, "share", ",\"t\":[1,1,1]");
  int64_t sub[4];
  for (int i = 0; i < 4; i++) {
    OPEN(k[i], pd.port);
    sub[i] = subscribe_with(&k[i], "share",
                            i == 3 ? ",\"packed\":{\"step\":0.5}" : ",\"packed\":{\"step\":0.001}");
    long t = TICK_NOW(&ctl, "share", (unsigned long long)e);
    TICK_PAST(&ctl, "share", (unsigned long long)e, t); /* a tick apart */
    cJSON *full = t_next_event(&k[i], FRAME_WAIT_MS);
    CHECK(full && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(full, "full")), full);
    cJSON_Delete(full);
  }
  /* one frame for all first: the three merge there */
  move_to(&ctl, "share", e, 2, 1, 1);
  for (int i = 0; i < 4; i++)
    cJSON_Delete(t_next_event(&k[i], FRAME_WAIT_MS));
  char *page = NULL;
  CU_ASSERT_TRUE_FATAL(t_http_get(pd.http_port, "/metrics", &page) > 0);
  double before = page_metric(page, "scened_packed_payloads_total");
  free(page);
  enum { MOVES = 8 };
  for (int m = 0; m < MOVES; m++) {
    move_to(&ctl, "share", e, 3 + m, 1, 1);
    cJSON *f[4];
    for (int i = 0; i < 4; i++)
      f[i] = t_next_event(&k[i], FRAME_WAIT_MS);
    CU_ASSERT_TRUE(f[0] && f[1] && f[2] && f[3]);
    if (f[0] && f[1] && f[2]) {
      const char *p0 = t_resp_str(f[0], "packed"), *p1 = t_resp_str(f[1], "packed"),
                 *p2 = t_resp_str(f[2], "packed");
      CU_ASSERT_TRUE(p0 && p1 && p2 && !strcmp(p0, p1) && !strcmp(p0, p2));
      CU_ASSERT_EQUAL(t_resp_num(f[0], "tick"), t_resp_num(f[2], "tick"));
    }
    for (int i = 0; i < 4; i++)
      cJSON_Delete(f[i]);
  }
  CU_ASSERT_TRUE_FATAL(t_http_get(pd.http_port, "/metrics", &page) > 0);
  double after = page_metric(page, "scened_packed_payloads_total");
  CU_ASSERT_EQUAL(after - before, 2 * MOVES);
  if (after - before != 2 * MOVES)
    fprintf(stderr, "  %g payloads for %d frames of 4 subscribers on two grids\n", after - before,
            MOVES);
  free(page);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"share\"}");
  for (int i = 0; i < 4; i++)
    t_client_close(&k[i]);
  t_client_close(&ctl);
  (void)sub;
}

/* Over WebSocket a packed frame is one binary message (sub u32, tick u64, flags, payload);
 * replies and other events stay text. */
static void test_websocket(void) {
  t_client ctl;
  OPEN(ctl, pd.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"wsp\"}");
  int64_t a = create(&ctl, "wsp", ",\"t\":[1,2,3]");
  /* enough entities for a payload over 64 KiB: the 64-bit length form */
  text many = {0};
  for (int i = 0; i < 9000; i++)
    text_addf(&many,
              "{\"cmd\":\"transform.create\",\"world\":\"wsp\",\"t\":[%d,%d,0],"
              "\"r\":[0,0,0.6,0.8]}\n",
              i % 97, i / 97);
  CU_ASSERT_EQUAL_FATAL(t_client_send_raw(&ctl, many.s, many.len), 0);
  for (int i = 0; i < 9000; i++)
    cJSON_Delete(t_recv_object(&ctl, T_RESPONSE_MS));
  text_free(&many);
  t_ws ws;
  CU_ASSERT_TRUE_FATAL(t_ws_connect(&ws, pd.http_port));
  cJSON *r = t_ws_call(&ws, "{\"cmd\":\"subscribe\",\"world\":\"wsp\","
                            "\"packed\":{\"step\":0.001,\"origin\":[1,1,1]}}");
  CHECK(t_resp_ok(r) && t_resp_id(r, "sub") > 0, r);
  uint64_t sub = t_resp_id(r, "sub");
  cJSON_Delete(r);
  scn_packed_baseline base = {0};
  scn_packed_baseline_set_grid(&base, 0.001, (double[3]){1, 1, 1});
  t_ws_msg m;
  frame_view v;
  packed_walk w;
  CU_ASSERT_TRUE_FATAL(t_ws_recv(&ws, &m, FRAME_WAIT_MS));
  CU_ASSERT_EQUAL(m.opcode, 2);
  CU_ASSERT_TRUE(m.len > 65536);
  if (packed_message_read(m.data, m.len, &base, &v, &w)) {
    CU_ASSERT_TRUE(v.full && v.sub == sub && v.n == 9001);
    const float *am = frame_matrix(&v, (uint64_t)a);
    CU_ASSERT_TRUE(am && fabsf(am[13] - 2) < 0.0006f);
  }
  long full_tick = v.tick;
  free_frame(&v, &w);
  free(m.data);
  move_to(&ctl, "wsp", a, 7, 8, 9);
  CU_ASSERT_TRUE_FATAL(t_ws_recv(&ws, &m, FRAME_WAIT_MS));
  CU_ASSERT_EQUAL(m.opcode, 2);
  if (packed_message_read(m.data, m.len, &base, &v, &w)) {
    CU_ASSERT_TRUE(!v.full && v.n == 1 && v.tick > full_tick);
    CU_ASSERT_EQUAL(flags_of(&w, (uint64_t)a), SCN_PACKED_T | SCN_PACKED_DELTA);
    CU_ASSERT_TRUE(fabsf(frame_matrix(&v, (uint64_t)a)[14] - 9) < 0.0006f);
  }
  free_frame(&v, &w);
  free(m.data);
  /* a bad update over WebSocket is answered as text, and changes nothing */
  char req[160];
  snprintf(req, sizeof req, "{\"cmd\":\"subscribe.update\",\"sub\":%llu,\"packed\":{\"step\":0}}",
           (unsigned long long)sub);
  r = t_ws_call(&ws, req);
  CHECK(!t_resp_ok(r) && t_resp_code(r) && !strcmp(t_resp_code(r), "BAD_REQUEST"), r);
  cJSON_Delete(r);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"wsp\"}");
  CU_ASSERT_TRUE_FATAL(t_ws_recv(&ws, &m, FRAME_WAIT_MS));
  CU_ASSERT_EQUAL(m.opcode, 1);
  cJSON *ev = cJSON_Parse((const char *)m.data);
  CHECK(t_resp_str_is(ev, "event", "world_destroyed") && t_resp_id(ev, "sub") == sub, ev);
  cJSON_Delete(ev);
  free(m.data);
  scn_packed_baseline_free(&base);
  t_ws_close(&ws);
  t_client_close(&ctl);
}

/* Every refusal of the contract, with nothing subscribed or changed. */
static void test_refusals(void) {
  t_client ctl, k, other;
  OPEN(ctl, pd.port);
  OPEN(k, pd.port);
  OPEN(other, pd.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"bad\"}");
  int64_t e = create(&ctl, "bad", ",\"t\":[1,1,1]");
  static const char *const bad[] = {
      "1",
      "null",
      "[0.1]",
      "\"0.001\"",
      "{}",
      "{\"origin\":[0,0,0]}",
      "{\"step\":0}",
      "{\"step\":-1}",
      "{\"step\":\"0.1\"}",
      "{\"step\":null}",
      "{\"step\":0.1,\"origin\":[0,0]}",
      "{\"step\":0.1,\"origin\":[0,0,0,0]}",
      "{\"step\":0.1,\"origin\":[0,\"0\",0]}",
      "{\"step\":0.1,\"origin\":{\"x\":0}}",
      "{\"step\":0.1,\"origin\":null}",
      "{\"step\":0.1,\"steps\":2}",
      "{\"step\":1e400}",
  };
  size_t nbad = sizeof bad / sizeof bad[0];
  for (size_t i = 0; i < nbad; i++)
    CU_ASSERT_TRUE(
        ERR(&k, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"bad\",\"packed\":%s}", bad[i]));
  /* with a good packed, the other fields' refusals still stand */
  ERR(&k, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"nope\",\"packed\":{\"step\":1}}");
  ERR(&k, "NOT_FOUND",
      "{\"cmd\":\"subscribe\",\"world\":\"bad\",\"root\":999999,\"packed\":{\"step\":1}}");
  ERR(&k, "BAD_REQUEST",
      "{\"cmd\":\"subscribe\",\"world\":\"bad\",\"near\":{\"radius\":1},\"packed\":{\"step\":1}}");
  move_to(&ctl, "bad", e, 2, 2, 2);
  QUIET(&k, QUIET_MS); /* nothing was subscribed */
  int64_t plain = subscribe_with(&k, "bad", "");
  int64_t packed = subscribe_with(&k, "bad", ",\"packed\":{\"step\":0.01}");
  scn_packed_baseline base = {0};
  scn_packed_baseline_set_grid(&base, 0.01, (double[3]){0, 0, 0});
  /* the two full frames, in either order */
  for (int i = 0; i < 2; i++) {
    cJSON *f = t_next_event(&k, FRAME_WAIT_MS);
    if (f && t_resp_num(f, "sub") == packed) {
      CU_ASSERT_TRUE(packed_frame_read(f, &base, NULL, NULL));
    } else {
      CHECK(f && t_resp_num(f, "sub") == plain && t_resp_has(f, "set"), f);
    }
    cJSON_Delete(f);
  }
  ERR(&k, "BAD_REQUEST", "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"packed\":{\"step\":0.5}}",
      (ll)plain);
  for (size_t i = 0; i < nbad; i++)
    CU_ASSERT_TRUE(ERR(&k, "BAD_REQUEST",
                       "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"packed\":%s}", (ll)packed,
                       bad[i]));
  ERR(&k, "BAD_REQUEST", "{\"cmd\":\"subscribe.update\",\"sub\":%lld}", (ll)packed);
  ERR(&k, "NOT_FOUND", "{\"cmd\":\"subscribe.update\",\"sub\":999999,\"packed\":{\"step\":1}}");
  ERR(&other, "NOT_FOUND", "{\"cmd\":\"subscribe.update\",\"sub\":%lld,\"packed\":{\"step\":1}}",
      (ll)packed);
  /* the grid is as it was: a delta on step 0.01 */
  move_to(&ctl, "bad", e, 3, 2, 2);
  for (int i = 0; i < 2; i++) {
    cJSON *f = t_next_event(&k, FRAME_WAIT_MS);
    if (f && t_resp_num(f, "sub") == packed) {
      frame_view v;
      packed_walk w;
      if (packed_frame_read(f, &base, &v, &w)) {
        CU_ASSERT_EQUAL(flags_of(&w, (uint64_t)e), SCN_PACKED_T | SCN_PACKED_DELTA);
        CU_ASSERT_DOUBLE_EQUAL(frame_matrix(&v, (uint64_t)e)[12], 3, 0.005);
      }
      free_frame(&v, &w);
    }
    cJSON_Delete(f);
  }
  scn_packed_baseline_free(&base);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"bad\"}");
  t_client_close(&other);
  t_client_close(&k);
  t_client_close(&ctl);
}

/* ---- a subscriber that lags ------------------------------------------------------------- */

/* With a small output budget, a packed subscriber of 3,000 moving transforms stops reading:
 * it lags, and once it reads again it gets a full frame in which every entry is absolute,
 * and the frames after it decode on top of it. */
static void test_lag_resync(void) {
  t_daemon d;
  t_client ctl, k;
  const char *args[] = {"--tick-hz", "30", "--output-limit", "65536", NULL};
  if (!START_CONNECTED(&d, &ctl, args))
    return;
  CU_ASSERT_EQUAL_FATAL(t_client_connect(&k, d.port), 0);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"lag\"}");
  int64_t root = create(&ctl, "lag", "");
  text many = {0};
  for (int i = 0; i < 3000; i++)
    text_addf(&many,
              "{\"cmd\":\"transform.create\",\"world\":\"lag\",\"parent\":%lld,"
              "\"t\":[%d,0,%d],\"r\":[0,0.6,0,0.8]}\n",
              (ll)root, i % 50, i / 50);
  /* in slices the output budget takes */
  int made = 0;
  for (size_t at = 0, per = many.len / 3000 * 100; at < many.len; at += per) {
    size_t len = many.len - at < per ? many.len - at : per;
    while (len && many.s[at + len - 1] != '\n')
      len--; /* whole lines */
    CU_ASSERT_EQUAL_FATAL(t_client_send_raw(&ctl, many.s + at, len), 0);
    for (size_t i = 0; i < len; i++)
      if (many.s[at + i] == '\n') {
        cJSON *r = t_recv_object(&ctl, T_RESPONSE_MS);
        made += t_resp_ok(r);
        cJSON_Delete(r);
      }
    per = len;
  }
  CU_ASSERT_EQUAL_FATAL(made, 3000);
  text_free(&many);
  int64_t sub = subscribe_with(&k, "lag", ",\"packed\":{\"step\":0.001}");
  /* the root turns and moves every tick while k reads nothing, until the daemon counts a lag */
  long deadline = t_now_ms() + 20000;
  double lags = 0;
  for (int n = 1; t_now_ms() < deadline && lags < 1; n++) {
    OKD(&ctl,
        "{\"cmd\":\"transform.set_local\",\"world\":\"lag\",\"entity\":%lld,"
        "\"t\":[%d,0,0],\"r\":[0,%.6f,0,%.6f]}",
        (ll)root, n, sin(n * 0.01), cos(n * 0.01));
    char *page = NULL;
    if (n % 10 == 0 && t_http_get(d.http_port, "/metrics", &page) > 0)
      lags = page_metric(page, "scened_stream_lags_total");
    free(page);
    t_sleep_ms(10);
  }
  CU_ASSERT_TRUE_FATAL(lags >= 1);
  OKD(&ctl,
      "{\"cmd\":\"transform.set_local\",\"world\":\"lag\",\"entity\":%lld,\"t\":[-5,0,0],"
      "\"r\":[0,0,0,1]}",
      (ll)root);
  /* now it reads: frames until a full one after the first, all of whose entries are absolute;
   * then the last state */
  scn_packed_baseline base = {0};
  scn_packed_baseline_set_grid(&base, 0.001, (double[3]){0, 0, 0});
  int fulls = 0, frames = 0;
  bool resynced = false, at_rest = false;
  deadline = t_now_ms() + 30000;
  while (t_now_ms() < deadline && !at_rest) {
    cJSON *f = t_next_event(&k, 2000);
    if (!f)
      break;
    frame_view v;
    packed_walk w;
    bool ok = t_resp_num(f, "sub") == sub && packed_frame_read(f, &base, &v, &w);
    cJSON_Delete(f);
    if (!ok)
      break;
    frames++;
    if (v.full && ++fulls > 1) {
      resynced = v.n == 3001;
      for (int i = 0; i < w.n; i++)
        resynced &= w.flags[i] == (SCN_PACKED_T | SCN_PACKED_R);
      if (!resynced)
        fprintf(stderr, "  full frame of %d: flags of the first %#x\n", v.n, w.n ? w.flags[0] : 0);
    }
    const float *m = frame_matrix(&v, (uint64_t)root);
    at_rest = resynced && m && fabsf(m[12] + 5) < 0.0006f && fabsf(m[0] - 1) < 1e-3f;
    free_frame(&v, &w);
  }
  CU_ASSERT_TRUE(resynced);
  CU_ASSERT_TRUE(at_rest);
  if (!resynced || !at_rest)
    fprintf(stderr, "  %d frames, %d full\n", frames, fulls);
  scn_packed_baseline_free(&base);
  t_client_close(&k);
  t_client_close(&ctl);
  STOP_OK(&d, 5000);
}

/* ---- registration ------------------------------------------------------------------------- */

static int suite_init(void) {
  const char *args[] = {"--tick-hz", TICK_HZ, NULL};
  return t_daemon_start(&pd, args) == 0 ? 0 : -1;
}

static int suite_clean(void) { return t_suite_daemon_stop(&pd, 5000); }

int t_register_daemon_packed(void) {
  static const t_test tests[] = {
      {"random hierarchies: packed frames are the b64 ones within tolerance", test_same_as_b64},
      {"a new step or origin makes translations absolute", test_new_grid},
      {"coming into scope is absolute; a destroyed center empties the scope", test_scope},
      {"subscribers in step share one payload", test_shared_payloads},
      {"binary messages over WebSocket", test_websocket},
      {"every refusal, with nothing changed", test_refusals},
      {"a subscriber that lags resyncs with a full absolute frame", test_lag_resync},
  };
  return T_ADD_SUITE("daemon_packed", suite_init, suite_clean, tests);
}

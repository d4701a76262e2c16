/* Bands of a near subscription against the real daemon (60 ticks per second): entities that
 * move at every tick, counted over seconds in an inner band of 30 Hz, an outer one of 5 Hz and
 * beyond the last band (the subscription's rate): never above a band's cap by more than one
 * frame in any second, sent within 2 / h seconds of every change, each time with the latest
 * value, and the final value always arrives once they stop. Coming into scope and leaving it
 * are never delayed by a band. Time is counted in the daemon's ticks, read from the frames;
 * waits have generous deadlines, never fixed sleeps. */
#include "daemon_fixtures.h"
#include "interest_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HZ 60
#define MOVE_MS 3000 /* how long the entities move */
#define WAIT_MS 5000 /* how long a frame or a final value that must come is waited for */

static t_daemon bd;

typedef long long ll;

/* ---- what came, tick by tick -------------------------------------------------------------- */

typedef struct sample {
  long tick;
  float m[16];
} sample;

typedef struct series {
  sample *v;
  int n, cap;
} series;

static void series_add(series *s, long tick, const float m[16]) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 256;
    s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s->v);
  }
  s->v[s->n].tick = tick;
  memcpy(s->v[s->n++].m, m, 16 * sizeof(float));
}

typedef struct mover {
  int64_t id;
  double r, angle; /* on a circle of radius r about the center */
  double hz;       /* its band's cap; 0: beyond the last band (the subscription's rate) */
  const char *band;
  series changes, sends; /* from the whole-world subscription, and from the banded one */
} mover;

static mover *find(mover *m, int n, uint64_t id) {
  for (int i = 0; i < n; i++)
    if ((uint64_t)m[i].id == id)
      return &m[i];
  return NULL;
}

/* Takes the frames waiting on k (those of subscription sub) into each mover's series; false
 * when something else came. */
static bool drain(t_client *k, uint64_t sub, mover *m, int n, bool sends, long wait_ms) {
  bool good = true;
  cJSON *ev;
  while ((ev = t_next_event(k, wait_ms))) {
    wait_ms = 0;
    frame_view v;
    if (!frame_read(ev, false, &v)) {
      good = false;
    } else {
      bool mine = v.sub == sub && !v.nremoved;
      for (int i = 0; i < v.n && mine; i++) {
        mover *e = find(m, n, v.ids[i]);
        if (e)
          series_add(sends ? &e->sends : &e->changes, v.tick, v.ms[i]);
        else
          mine = false;
      }
      if (!mine) {
        t_report("a frame that removes, or sends what is not moving", ev);
        CU_FAIL("a frame of only the movers");
        good = false;
      }
      frame_view_free(&v);
    }
    cJSON_Delete(ev);
  }
  return good;
}

/* ---- band rates --------------------------------------------------------------------------- */

/* The value that changes.v held at tick t (the last change at or before it), NULL if none. */
static const float *value_at(const series *changes, long t) {
  const float *m = NULL;
  for (int i = 0; i < changes->n && changes->v[i].tick <= t; i++)
    m = changes->v[i].m;
  return m;
}

/* Checks one mover's sends against its changes over the moving phase (ticks after first). */
static void check_mover(const mover *e, long first, long last) {
  const series *s = &e->sends, *c = &e->changes;
  int bad = 0;
  /* each send carries the latest value at its tick, and a new one */
  for (int i = 0; i < s->n; i++) {
    const float *want = value_at(c, s->v[i].tick);
    if (!want || !mat_same(want, s->v[i].m)) {
      if (bad++ < 5)
        fprintf(stderr, "  %s entity %lld: the send at tick %ld is not the latest value\n", e->band,
                (ll)e->id, s->v[i].tick);
    }
    if (i && mat_same(s->v[i - 1].m, s->v[i].m) && bad++ < 5)
      fprintf(stderr, "  %s entity %lld: sent again at tick %ld unchanged\n", e->band, (ll)e->id,
              s->v[i].tick);
  }
  /* never above the cap by more than one frame in any second */
  int most = 0;
  for (int i = 0; e->hz > 0 && i < s->n; i++) {
    int in_second = 0;
    for (int j = i; j < s->n && s->v[j].tick < s->v[i].tick + HZ; j++)
      in_second++;
    most = in_second > most ? in_second : most;
  }
  if (e->hz > 0 && most > (int)ceil(e->hz) + 1) {
    bad++;
    fprintf(stderr, "  %s entity %lld: %d sends in one second, cap %g\n", e->band, (ll)e->id, most,
            e->hz);
  }
  /* every change sent within 2 / h seconds (beyond the bands: on its own tick) */
  long slack = e->hz > 0 ? (long)ceil(2.0 * HZ / e->hz) : 0;
  int j = 0;
  for (int i = 0; i < c->n; i++) {
    long t = c->v[i].tick;
    if (t <= first || t > last)
      continue;
    while (j < s->n && s->v[j].tick < t)
      j++;
    if ((j == s->n || s->v[j].tick > t + slack) && bad++ < 5)
      fprintf(stderr,
              "  %s entity %lld: changed at tick %ld, next sent at %ld (at most %ld later)\n",
              e->band, (ll)e->id, t, j < s->n ? s->v[j].tick : -1, slack);
  }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_band_rates(void) {
  t_client ctl, kb, kw;
  CONNECT_FATAL(&ctl, bd.port);
  CONNECT_FATAL(&kb, bd.port);
  CONNECT_FATAL(&kw, bd.port);
  t_client_keep_events(&kb);
  t_client_keep_events(&kw);
  const char *w = "rates";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rates\"}");
  /* four in the inner band (up to 10, 30 Hz), four in the outer (up to 25, 5 Hz), two beyond
   * the bands (R 40) */
  enum { N = 10 };
  mover m[N];
  memset(m, 0, sizeof m);
  for (int i = 0; i < N; i++) {
    m[i].r = i < 4 ? 5 : i < 8 ? 18 : 32;
    m[i].hz = i < 4 ? 30 : i < 8 ? 5 : 0;
    m[i].band = i < 4 ? "inner" : i < 8 ? "outer" : "beyond";
    m[i].angle = i * 0.6;
    cJSON *r = OK(&ctl, "{\"cmd\":\"transform.create\",\"world\":\"rates\",\"t\":[%.9g,%.9g,0]}",
                  m[i].r * cos(m[i].angle), m[i].r * sin(m[i].angle));
    m[i].id = (int64_t)t_resp_id(r, "entity");
    cJSON_Delete(r);
  }
  uint64_t all = subscribe_near(&kw, w, NULL, 0, 0);
  near_spec near = {.on = true,
                    .radius = 40,
                    .margin = 5,
                    .nbands = 2,
                    .band_radius = {10, 25},
                    .band_hz = {30, 5}};
  uint64_t sub = subscribe_near(&kb, w, &near, 0, 0);
  CU_ASSERT_FATAL(all && sub);

  /* the full frames first: every mover in both */
  long deadline = t_now_ms() + WAIT_MS;
  bool full = false;
  while (!full && t_now_ms() < deadline) {
    drain(&kb, sub, m, N, true, 10);
    drain(&kw, all, m, N, false, 10);
    full = true;
    for (int i = 0; i < N; i++)
      full &= m[i].sends.n == 1 && m[i].changes.n == 1;
  }
  CU_ASSERT_TRUE_FATAL(full);
  long first = m[0].changes.v[0].tick;

  /* move every mover a little in each batch, many batches a tick, for MOVE_MS */
  long start = t_now_ms();
  int batches = 0;
  bool good = true;
  while (good && t_now_ms() - start < MOVE_MS) {
    text ops = {0};
    for (int i = 0; i < N; i++) {
      m[i].angle += 0.002;
      text_addf(&ops, "%s{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[%.9g,%.9g,0]}",
                i ? "," : "", (ll)m[i].id, m[i].r * cos(m[i].angle), m[i].r * sin(m[i].angle));
    }
    OKD(&ctl, "{\"cmd\":\"batch\",\"world\":\"rates\",\"ops\":[%s]}", text_str(&ops));
    text_free(&ops);
    batches++;
    good = drain(&kb, sub, m, N, true, 2) && drain(&kw, all, m, N, false, 0);
  }
  long last = TICK_NOW(&ctl, w, (uint64_t)m[0].id);

  /* stopped: the final values arrive, within 2 / h seconds of the last change, then nothing */
  float final[N][16];
  for (int i = 0; i < N; i++) {
    cJSON *r =
        OK(&ctl, "{\"cmd\":\"transform.get\",\"world\":\"rates\",\"entity\":%lld}", (ll)m[i].id);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(r, "world");
    for (int k = 0; k < 16; k++)
      final[i][k] = (float)cJSON_GetArrayItem(wm, k)->valuedouble;
    cJSON_Delete(r);
  }
  deadline = t_now_ms() + WAIT_MS;
  bool arrived = false;
  while (good && !arrived && t_now_ms() < deadline) {
    good = drain(&kb, sub, m, N, true, 20) && drain(&kw, all, m, N, false, 0);
    arrived = true;
    for (int i = 0; i < N; i++)
      arrived &= mat_same(m[i].sends.v[m[i].sends.n - 1].m, final[i]);
  }
  CU_ASSERT_TRUE(arrived);
  for (int i = 0; i < N; i++) {
    const sample *final_send = &m[i].sends.v[m[i].sends.n - 1];
    const sample *final_change = &m[i].changes.v[m[i].changes.n - 1];
    long slack = m[i].hz > 0 ? (long)ceil(2.0 * HZ / m[i].hz) : 0;
    if (!mat_same(final_send->m, final[i]) || final_send->tick > final_change->tick + slack) {
      CU_FAIL("the final value arrives within 2 / h seconds");
      fprintf(stderr,
              "  %s entity %lld: last change at tick %ld, last send at %ld, %s the final value\n",
              m[i].band, (ll)m[i].id, final_change->tick, final_send->tick,
              mat_same(final_send->m, final[i]) ? "with" : "without");
    }
  }
  QUIET(&kb, 300);

  /* the figures, over the ticks the movers moved */
  double seconds = (double)(last - first) / HZ;
  int changed_ticks = m[0].changes.n - 1;
  fprintf(stderr,
          "  %d batches over %.2f s of ticks (%ld ticks, %d of them with changes); sends per "
          "second:",
          batches, seconds, last - first, changed_ticks);
  for (int i = 0; i < N; i++) {
    fprintf(stderr, " %s %.1f", m[i].band, (m[i].sends.n - 1) / seconds);
    check_mover(&m[i], first, last);
  }
  fprintf(stderr, "\n");
  /* a change at most ticks, or the bounds say little */
  CU_ASSERT_TRUE(changed_ticks >= (last - first) / 2);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rates\"}");
  for (int i = 0; i < N; i++) {
    free(m[i].sends.v);
    free(m[i].changes.v);
  }
  t_client_close(&kw);
  t_client_close(&kb);
  t_client_close(&ctl);
}

/* ---- coming in and leaving are never delayed ---------------------------------------------- */

/* Reads frames of sub on k into held until done(held) holds; the tick of the frame that made
 * it so, -1 (asserted) when none came within WAIT_MS. */
typedef bool (*held_pred)(const id_map *held, const void *arg);

static long until(t_client *k, uint64_t sub, id_map *held, held_pred done, const void *arg) {
  long deadline = t_now_ms() + WAIT_MS;
  while (t_now_ms() < deadline) {
    cJSON *ev = t_next_event(k, deadline - t_now_ms());
    if (!ev)
      break;
    frame_view v;
    long tick = -1;
    if (frame_read(ev, false, &v)) {
      CU_ASSERT_EQUAL(v.sub, sub);
      frame_apply(&v, held, NULL);
      tick = v.tick;
      frame_view_free(&v);
    }
    cJSON_Delete(ev);
    if (tick >= 0 && done(held, arg))
      return tick;
  }
  CU_FAIL("the frame came");
  return -1;
}

typedef struct at_pos {
  uint64_t id;
  bool in; /* held (at x, y, z), or not held */
  double x, y, z;
} at_pos;

static bool holds(const id_map *held, const void *arg) {
  for (const at_pos *p = arg; p->id; p++) {
    const id_slot *s = idm_get(held, p->id);
    if (p->in ? !s || s->m[12] != (float)p->x || s->m[13] != (float)p->y || s->m[14] != (float)p->z
              : s != NULL)
      return false;
  }
  return true;
}

/* Runs a command on ctl (printf-style) and returns the ticks around it: the frame that reflects
 * it has a tick in (before, after + 1]. */
static void around(t_client *ctl, const char *w, uint64_t probe, long *before, long *after,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void around(t_client *ctl, const char *w, uint64_t probe, long *before, long *after,
                   const char *fmt, ...) {
  *before = TICK_NOW(ctl, w, probe);
  text req = {0};
  va_list ap;
  va_start(ap, fmt);
  text_vaddf(&req, fmt, ap);
  va_end(ap);
  OKD(ctl, "%s", text_str(&req));
  text_free(&req);
  *after = TICK_NOW(ctl, w, probe);
}

#define NOT_DELAYED(tick, before, after, what)                                                     \
  do {                                                                                             \
    bool on_time = (tick) > (before) && (tick) <= (after) + 1;                                     \
    CU_ASSERT_TRUE(on_time);                                                                       \
    if (!on_time)                                                                                  \
      fprintf(stderr, "  %s: at tick %ld, the command ran between ticks %ld and %ld\n", what,      \
              (long)(tick), (long)(before), (long)(after) + 1);                                    \
  } while (0)

static void test_enter_leave_not_delayed(void) {
  t_client ctl, kb;
  CONNECT_FATAL(&ctl, bd.port);
  CONNECT_FATAL(&kb, bd.port);
  t_client_keep_events(&kb);
  const char *w = "edge";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"edge\"}");
  uint64_t ids[4];
  static const double start[4][3] = {{0, 0, 0}, {10, 0, 0}, {25, 0, 0}, {5, 0, 0}};
  for (int i = 0; i < 4; i++) {
    cJSON *r = OK(&ctl, "{\"cmd\":\"transform.create\",\"world\":\"edge\",\"t\":[%g,%g,%g]}",
                  start[i][0], start[i][1], start[i][2]);
    ids[i] = t_resp_id(r, "entity");
    cJSON_Delete(r);
  }
  uint64_t c = ids[0], e = ids[1], x = ids[2], d = ids[3];
  /* the whole scope in one band of 1 Hz: any change in scope waits up to a second */
  near_spec near = {
      .on = true, .entity = c, .radius = 20, .nbands = 1, .band_radius = {20}, .band_hz = {1}};
  uint64_t sub = subscribe_near(&kb, w, &near, 0, 0);
  CU_ASSERT_FATAL(sub != 0);
  id_map held = {0};
  long tick = until(
      &kb, sub, &held, holds,
      (at_pos[]){
          {c, true, 0, 0, 0}, {e, true, 10, 0, 0}, {d, true, 5, 0, 0}, {x, false, 0, 0, 0}, {0}});
  long before, after;

  /* e moves (its band may hold that back), then at once out of scope: removed at once */
  OKD(&ctl, "{\"cmd\":\"transform.set_local\",\"world\":\"edge\",\"entity\":%llu,\"t\":[11,0,0]}",
      (unsigned long long)e);
  around(&ctl, w, c, &before, &after,
         "{\"cmd\":\"transform.set_local\",\"world\":\"edge\",\"entity\":%llu,\"t\":[30,0,0]}",
         (unsigned long long)e);
  tick = until(&kb, sub, &held, holds, (at_pos[]){{e, false, 0, 0, 0}, {0}});
  NOT_DELAYED(tick, before, after, "leaving");
  /* back in at once: in set at once */
  around(&ctl, w, c, &before, &after,
         "{\"cmd\":\"transform.set_local\",\"world\":\"edge\",\"entity\":%llu,\"t\":[10,0,0]}",
         (unsigned long long)e);
  tick = until(&kb, sub, &held, holds, (at_pos[]){{e, true, 10, 0, 0}, {0}});
  NOT_DELAYED(tick, before, after, "coming back");
  /* the center moves: x comes in at once (the center's own move may wait) */
  around(&ctl, w, c, &before, &after,
         "{\"cmd\":\"transform.set_local\",\"world\":\"edge\",\"entity\":%llu,\"t\":[10,0,0]}",
         (unsigned long long)c);
  tick = until(&kb, sub, &held, holds, (at_pos[]){{x, true, 25, 0, 0}, {0}});
  NOT_DELAYED(tick, before, after, "coming in as the center moves");
  /* and away: x, e and d leave at once */
  around(&ctl, w, c, &before, &after,
         "{\"cmd\":\"transform.set_local\",\"world\":\"edge\",\"entity\":%llu,\"t\":[-20,0,0]}",
         (unsigned long long)c);
  tick = until(&kb, sub, &held, holds,
               (at_pos[]){{x, false, 0, 0, 0}, {e, false, 0, 0, 0}, {d, false, 0, 0, 0}, {0}});
  NOT_DELAYED(tick, before, after, "leaving as the center moves");
  /* made in scope: at once; destroyed in scope: at once */
  long t0 = TICK_NOW(&ctl, w, c);
  cJSON *r = OK(&ctl, "{\"cmd\":\"transform.create\",\"world\":\"edge\",\"t\":[-20,1,0]}");
  uint64_t y = t_resp_id(r, "entity");
  cJSON_Delete(r);
  long t1 = TICK_NOW(&ctl, w, c);
  tick = until(&kb, sub, &held, holds, (at_pos[]){{y, true, -20, 1, 0}, {0}});
  NOT_DELAYED(tick, t0, t1, "made in scope");
  around(&ctl, w, c, &before, &after,
         "{\"cmd\":\"transform.destroy\",\"world\":\"edge\",\"entity\":%llu}",
         (unsigned long long)y);
  tick = until(&kb, sub, &held, holds, (at_pos[]){{y, false, 0, 0, 0}, {0}});
  NOT_DELAYED(tick, before, after, "destroyed in scope");
  /* the center's final position arrives, band or not */
  tick = until(&kb, sub, &held, holds, (at_pos[]){{c, true, -20, 0, 0}, {0}});
  CU_ASSERT_TRUE(tick > 0);
  QUIET(&kb, 300);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"edge\"}");
  idm_free(&held);
  t_client_close(&kb);
  t_client_close(&ctl);
}

/* ---- registration ------------------------------------------------------------------------- */

static int suite_init(void) {
  const char *args[] = {"--tick-hz", "60", NULL};
  return t_daemon_start(&bd, args) == 0 ? 0 : -1;
}

static int suite_clean(void) { return t_suite_daemon_stop(&bd, 5000); }

int t_register_daemon_interest_bands(void) {
  static const t_test tests[] = {
      {"band rates over seconds; the final value arrives", test_band_rates},
      {"coming into scope and leaving are never delayed by a band", test_enter_leave_not_delayed},
  };
  return T_ADD_SUITE("daemon_interest_bands", suite_init, suite_clean, tests);
}

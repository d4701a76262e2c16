/* Unit tests of interest (scn_interest.h): the id map under churn, and scopes evaluated
 * against the spatial index compared after every tick with a brute-force oracle (a direct
 * distance computation over every transform, with hysteresis), in grid and naive modes, with
 * cell sizes that force rebuilds; bands counted tick by tick.
 * Seeds: a fixed list, plus SCN_SEED from the environment; a failure prints the seed. */
#include "core_fixtures.h"
#include "scn_interest.h"
#include "suites.h"
#include "xorshift.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXE 512

/* What a subscriber holds, rebuilt only from what eval sends and removes. */
typedef struct client {
  bool held[MAXE + 1];
  float m[MAXE + 1][16];
  int sends[MAXE + 1];
  int removes;
  bool dup; /* an entity sent twice in one evaluation */
  bool seen_now[MAXE + 1];
} client;

static void on_set(void *ud, scn_entity e, const float m[16]) {
  client *c = ud;
  CU_ASSERT_FATAL(e <= MAXE);
  c->dup |= c->seen_now[e];
  c->seen_now[e] = true;
  c->held[e] = true;
  memcpy(c->m[e], m, 64);
  c->sends[e]++;
}

static void on_removed(void *ud, scn_entity e) {
  client *c = ud;
  CU_ASSERT_FATAL(e <= MAXE);
  CU_ASSERT(c->held[e]);
  c->held[e] = false;
  c->removes++;
}

static double dist(const float m[16], const double c[3]) {
  double dx = m[12] - c[0], dy = m[13] - c[1], dz = m[14] - c[2];
  return sqrt(dx * dx + dy * dy + dz * dz);
}

typedef struct sub {
  scn_scope *scope;
  scn_region r;
  scn_entity follow; /* 0: a fixed point */
  bool oracle[MAXE + 1];
  client c;
} sub;

static float coord(void) { return (float)rnd(2001) / 10.0f - 100.0f; }

static scn_entity ents[MAXE];
static size_t nents;

static scn_entity random_transform(void) { return nents ? ents[rnd((uint32_t)nents)] : 0; }

static void random_change(scn_scene *s, scn_world *w) {
  float m[16];
  scn_entity e = random_transform(), p = random_transform();
  switch (rnd(10)) {
  case 0: /* a new transform, maybe under another */
    if (nents < MAXE - 1) {
      mat_t(m, coord(), coord(), rnd(3) ? 0 : coord());
      scn_entity n = ent(s);
      if (n <= MAXE && scn_transform_create(w, n, rnd(3) ? SCN_ENTITY_NONE : p, NULL, m) == SCN_OK)
        ents[nents++] = n;
    }
    break;
  case 1: /* destroyed: its children become roots */
    if (e && scn_transform_destroy(w, e, false) == SCN_OK)
      for (size_t i = 0; i < nents; i++)
        if (ents[i] == e)
          ents[i] = ents[--nents];
    break;
  case 2:
    if (e && p)
      scn_transform_link(w, e, p, rnd(2) ? SCN_KEEP_WORLD : SCN_KEEP_LOCAL);
    break;
  case 3:
    if (e)
      scn_transform_link(w, e, SCN_ENTITY_NONE, SCN_KEEP_LOCAL);
    break;
  default: /* a small step or a jump */
    if (e) {
      scn_transform_info info = get(w, e);
      memcpy(m, info.local, sizeof m);
      float step = rnd(4) ? 3.0f : 60.0f;
      m[12] += ((float)rnd(201) / 100.0f - 1) * step;
      m[13] += ((float)rnd(201) / 100.0f - 1) * step;
      scn_transform_set_local(w, e, m);
    }
  }
}

/* One tick of the oracle: who is in scope now, given who was. */
static void oracle_step(scn_world *w, sub *sb) {
  for (scn_entity e = 1; e <= MAXE; e++) {
    scn_transform_info info;
    bool in = false;
    if (scn_transform_get(w, e, &info) == SCN_OK &&
        (sb->r.root == SCN_ENTITY_NONE || scn_transform_in_subtree(w, e, sb->r.root))) {
      double d = dist(info.world, sb->r.center);
      in = d <= sb->r.radius || (sb->oracle[e] && d <= sb->r.radius + sb->r.margin);
    }
    sb->oracle[e] = in;
  }
}

/* The run's verdict, with the seed and tick that reproduce a failure. */
static bool check(scn_world *w, sub *sb, unsigned seed, int tick, int k, bool current) {
  for (scn_entity e = 1; e <= MAXE; e++) {
    if (sb->c.held[e] != sb->oracle[e]) {
      fprintf(stderr, "core_interest: seed %u tick %d sub %d: entity %llu held %d, oracle %d\n",
              seed, tick, k, (unsigned long long)e, sb->c.held[e], sb->oracle[e]);
      return false;
    }
    scn_transform_info info;
    /* without bands every change is sent (with them, the last one): it holds the world matrix */
    if (current && sb->c.held[e] && scn_transform_get(w, e, &info) == SCN_OK &&
        memcmp(info.world, sb->c.m[e], 64) != 0) {
      fprintf(stderr, "core_interest: seed %u tick %d sub %d: entity %llu holds a stale matrix\n",
              seed, tick, k, (unsigned long long)e);
      return false;
    }
  }
  if (sb->c.dup)
    fprintf(stderr, "core_interest: seed %u tick %d sub %d: an entity sent twice\n", seed, tick, k);
  return !sb->c.dup;
}

/* Subscriptions 0-5 are evaluated at every tick (5 with a root); 6 skips ticks at random (as
 * with a lower hz); 7 has bands, so its matrices may lag until the quiet ticks at the end. */
#define NSUBS 8
#define BANDED 7
#define SKIPPING 6

static bool run_seed(unsigned seed, bool naive) {
  rng_state = seed * 2654435761u + 1;
  nents = 0;
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_world_keep_events(w, true);
  float m[16];
  for (int i = 0; i < 150; i++) {
    mat_t(m, coord(), coord(), rnd(3) ? 0 : coord());
    scn_entity n = ent(s);
    OK(scn_transform_create(w, n, i && rnd(4) == 0 ? random_transform() : SCN_ENTITY_NONE, NULL,
                            m));
    ents[nents++] = n;
  }
  for (int i = 0; i < 100; i++)
    random_change(s, w);
  scn_world_close_tick(w);
  scn_space *sp = scn_space_new(w);
  static sub subs[NSUBS];
  memset(subs, 0, sizeof subs);
  for (int k = 0; k < NSUBS; k++) {
    sub *sb = &subs[k];
    sb->scope = scn_scope_new();
    sb->r.radius = 5 + rnd(60);
    sb->r.margin = rnd(3) ? rnd(10) : 0;
    sb->r.naive = naive;
    sb->follow = k % 2 ? random_transform() : 0;
    if (!sb->follow) {
      sb->r.center[0] = coord(), sb->r.center[1] = coord();
    }
    if (k == 5 && nents)
      sb->r.root = random_transform();
    if (k == BANDED) {
      sb->r.nbands = 2;
      sb->r.bands[0] = (scn_band){sb->r.radius / 3, 2};
      sb->r.bands[1] = (scn_band){sb->r.radius * 2 / 3, 3};
    }
  }
  bool ok = true;
  for (int tick = 1; ok && tick <= 70; tick++) {
    bool quiet = tick > 60; /* the last ticks change nothing: every value has arrived */
    int changes = quiet ? 0 : (int)rnd(30);
    for (int i = 0; i < changes; i++)
      random_change(s, w);
    for (int k = 0; !quiet && k < NSUBS; k++) /* the players walk: centers move at every tick */
      if (subs[k].follow && scn_transform_exists(w, subs[k].follow)) {
        scn_transform_info info = get(w, subs[k].follow);
        info.local[12] += (float)rnd(9) - 4, info.local[13] += (float)rnd(9) - 4;
        scn_transform_set_local(w, subs[k].follow, info.local);
      }
    uint64_t now = scn_world_close_tick(w);
    double cell = tick % 20 == 0 ? 1 + rnd(100) : 20; /* now and then a rebuild */
    if (quiet)
      cell = 20;
    OK(scn_space_sync(sp, cell));
    CU_ASSERT_EQUAL(scn_space_count(sp), scn_world_transform_count(w));
    for (int k = 0; ok && k < NSUBS; k++) {
      sub *sb = &subs[k];
      if (k == SKIPPING && tick > 1 && !quiet && rnd(3))
        continue;
      if (sb->follow && !scn_space_position(sp, sb->follow, sb->r.center))
        sb->follow = 0; /* the center is gone: it stays where it was */
      if (sb->r.root && !scn_transform_exists(w, sb->r.root))
        sb->r.root = SCN_ENTITY_NONE;
      memset(sb->c.seen_now, 0, sizeof sb->c.seen_now);
      bool full = tick == 1;
      if (full)
        memset(sb->c.held, 0, sizeof sb->c.held);
      CU_ASSERT(scn_scope_eval(sb->scope, sp, &sb->r, now, full, on_set, on_removed, &sb->c) >= 0);
      oracle_step(w, sb);
      ok = check(w, sb, seed, tick, k, k != BANDED || tick == 70);
    }
  }
  for (int k = 0; k < NSUBS; k++)
    scn_scope_free(subs[k].scope);
  scn_space_free(sp);
  scn_scene_free(s);
  return ok;
}

static void run_seeds(bool naive) {
  unsigned seeds[] = {1, 2, 3, 7, 42, 1234, 99991, 31337};
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
    CU_ASSERT(run_seed(seeds[i], naive));
  const char *env = getenv("SCN_SEED");
  if (env)
    CU_ASSERT(run_seed((unsigned)strtoul(env, NULL, 10), naive));
}

static void test_grid_matches_oracle(void) { run_seeds(false); }
static void test_naive_matches_oracle(void) { run_seeds(true); }

/* Bands: an entity moving every tick is sent at most once every `every` ticks of its band,
 * at least that often, and its final value arrives once it stops. */
static void test_bands(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_world_keep_events(w, true);
  float m[16];
  mat_t(m, 1, 0, 0);
  scn_entity inner = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  mat_t(m, 8, 0, 0);
  scn_entity outer = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  mat_t(m, 15, 0, 0);
  scn_entity beyond = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  scn_space *sp = scn_space_new(w);
  scn_scope *sc = scn_scope_new();
  scn_region r = {.radius = 20, .nbands = 2};
  r.bands[0] = (scn_band){5, 2};
  r.bands[1] = (scn_band){10, 6};
  static client c;
  memset(&c, 0, sizeof c);
  int last_sent[3] = {0, 0, 0};
  scn_entity es[3] = {inner, outer, beyond};
  int every[3] = {2, 6, 1};
  for (int tick = 1; tick <= 61; tick++) {
    if (tick > 1 && tick <= 48)
      for (int i = 0; i < 3; i++) {
        mat_t(m, (float)(i == 0 ? 1 : i == 1 ? 8 : 15), (float)tick * 0.01f, 0);
        OK(scn_transform_set_local(w, es[i], m));
      }
    uint64_t now = scn_world_close_tick(w);
    OK(scn_space_sync(sp, 10));
    int before[3];
    for (int i = 0; i < 3; i++)
      before[i] = c.sends[es[i]];
    memset(c.seen_now, 0, sizeof c.seen_now);
    CU_ASSERT(scn_scope_eval(sc, sp, &r, now, tick == 1, on_set, on_removed, &c) >= 0);
    for (int i = 0; i < 3; i++)
      if (c.sends[es[i]] > before[i]) {
        if (tick > 1) /* never more often than its band allows */
          CU_ASSERT(tick - last_sent[i] >= every[i]);
        last_sent[i] = tick;
      } else if (tick > 1 && tick <= 48) {
        CU_ASSERT(tick - last_sent[i] < every[i]); /* held back only by its band */
      }
  }
  for (int i = 0; i < 3; i++) {
    CU_ASSERT(c.held[es[i]]);
    CU_ASSERT_EQUAL(memcmp(c.m[es[i]], get(w, es[i]).world, 64), 0); /* the final value */
  }
  scn_scope_free(sc);
  scn_space_free(sp);
  scn_scene_free(s);
}

/* A region removed (unbounded): everything comes in, whatever the last region's box was. */
static void test_unbounded(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_world_keep_events(w, true);
  float m[16];
  mat_t(m, 0, 0, 0);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  mat_t(m, 18, 0, 0);
  scn_entity b = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  scn_space *sp = scn_space_new(w);
  scn_scope *sc = scn_scope_new();
  static client c;
  memset(&c, 0, sizeof c);
  scn_region r = {.center = {100, 100, 0}, .radius = 1}; /* its box misses every cell */
  for (int tick = 1; tick <= 3; tick++) {
    uint64_t now = scn_world_close_tick(w);
    OK(scn_space_sync(sp, 1));
    memset(c.seen_now, 0, sizeof c.seen_now);
    if (tick == 2) {
      r.center[0] = 0, r.center[1] = 0; /* now near a: a comes in */
    } else if (tick == 3) {
      r.unbounded = true; /* its center is meaningless, and far from everything */
      r.center[0] = 100, r.center[1] = 100;
    }
    CU_ASSERT(scn_scope_eval(sc, sp, &r, now, tick == 1, on_set, on_removed, &c) >= 0);
    CU_ASSERT_EQUAL(c.held[a], tick >= 2);
    CU_ASSERT_EQUAL(c.held[b], tick == 3);
  }
  CU_ASSERT_EQUAL(c.removes, 0);
  CU_ASSERT_EQUAL(scn_scope_count(sc), 2);
  scn_scope_free(sc);
  scn_space_free(sp);
  scn_scene_free(s);
}

/* A scope that gains members by hold, and clones, keep what they were given. */
static void test_hold_and_clone(void) {
  scn_scope *sc = scn_scope_new();
  for (scn_entity e = 1; e <= 300; e++)
    OK(scn_scope_hold(sc, e, 7));
  CU_ASSERT_EQUAL(scn_scope_count(sc), 300);
  scn_scope *c = scn_scope_clone(sc);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_EQUAL(scn_scope_count(c), 300);
  scn_scope_clear(sc);
  CU_ASSERT_EQUAL(scn_scope_count(sc), 0);
  CU_ASSERT_EQUAL(scn_scope_count(c), 300);
  scn_scope_free(sc);
  scn_scope_free(c);
}

int t_register_core_interest(void) {
  static const t_test tests[] = {
      {"scopes on the grid equal a brute-force oracle with hysteresis", test_grid_matches_oracle},
      {"scopes in naive mode equal the oracle", test_naive_matches_oracle},
      {"bands cap and keep the send rate, and the final value arrives", test_bands},
      {"a removed region brings in everything", test_unbounded},
      {"hold and clone", test_hold_and_clone},
  };
  return T_ADD_SUITE("core_interest", NULL, NULL, tests);
}

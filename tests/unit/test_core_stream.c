/* Unit tests of what streaming is built on: ticks, change listing (whole world and subtree),
 * subtree membership, the structural event log, and propagation statistics. */
#include "core_fixtures.h"
#include "scn_core.h"
#include "suites.h"
#include "xorshift.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- visiting ----------------------------------------------------------------------------- */

#define VCAP 1024

typedef struct visited {
  size_t n;
  scn_entity e[VCAP];
  float world[VCAP][16];
} visited;

static void on_visit(void *ud, scn_entity e, const float world[16]) {
  visited *v = ud;
  if (v->n < VCAP) {
    v->e[v->n] = e;
    memcpy(v->world[v->n], world, 64);
  }
  v->n++;
}

static visited V;

/* Visits and returns how many; V holds them. */
static size_t visit(scn_world *w, scn_entity root, uint64_t since) {
  memset(&V, 0, sizeof V);
  CU_ASSERT_EQUAL_FATAL(scn_world_visit_changed(w, root, since, on_visit, &V), SCN_OK);
  return V.n;
}

/* V holds exactly want[0..n) in this order. */
static bool visited_is(const scn_entity *want, size_t n) {
  if (V.n != n)
    return false;
  for (size_t k = 0; k < n; k++)
    if (V.e[k] != want[k])
      return false;
  return true;
}

/* The matrices handed to the visitor are the current world matrices. */
static bool visited_worlds_current(scn_world *w) {
  for (size_t k = 0; k < V.n && k < VCAP; k++)
    if (memcmp(V.world[k], get(w, V.e[k]).world, 64) != 0)
      return false;
  return true;
}

/* Every visited transform's parent, when in scope, was visited before it. */
static bool visited_parents_first(scn_world *w, scn_entity root) {
  for (size_t k = 0; k < V.n && k < VCAP; k++) {
    if (V.e[k] == root)
      continue;
    scn_entity p = get(w, V.e[k]).parent;
    if (p == SCN_ENTITY_NONE)
      continue;
    bool seen = false;
    for (size_t j = 0; j < k; j++)
      seen |= V.e[j] == p;
    if (!seen)
      return false;
  }
  return true;
}

static void test_ticks(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w, *w2;
  OK(scn_world_create(s, "w", &w));
  OK(scn_world_create(s, "w2", &w2));
  CU_ASSERT_EQUAL(scn_world_tick(w), 1);
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 1);
  CU_ASSERT_EQUAL(scn_world_tick(w), 2);
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 2);
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 3);
  CU_ASSERT_EQUAL(scn_world_tick(w), 4);
  CU_ASSERT_EQUAL(scn_world_tick(w2), 1); /* per world */
  /* closing a tick flushes */
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  float m[16];
  mat_t(m, 1, 2, 3);
  OK(scn_transform_set_local(w, a, m));
  scn_world_stats st0, st1;
  scn_world_get_stats(w, &st0);
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 4);
  scn_world_get_stats(w, &st1);
  CU_ASSERT_EQUAL(st1.flushes, st0.flushes + 1);
  CU_ASSERT_EQUAL(st1.recomputed, st0.recomputed + 1);
  /* the change was stamped with tick 4, the one it was made in */
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 3), 1);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 4), 0);
  for (int k = 0; k < 1000; k++)
    scn_world_close_tick(w);
  CU_ASSERT_EQUAL(scn_world_tick(w), 1005);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 3), 1);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 4), 0);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 1004), 0);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 5000), 0);
  scn_scene_free(s);
}

static void test_visit_whole_world(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16];
  mat_t(m, 1, 0, 0);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", m);
  scn_entity b = mk(w, s, a, "b", m);
  scn_entity c = mk(w, s, b, "c", m);
  scn_entity d = mk(w, s, SCN_ENTITY_NONE, "d", m);
  scn_entity e = mk(w, s, a, "e", m);
  /* since 0: everything, parents before children, with the current world matrices */
  const scn_entity all[5] = {a, b, c, e, d};
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 0), 5);
  CU_ASSERT_TRUE(visited_is(all, 5));
  CU_ASSERT_TRUE(visited_worlds_current(w));
  CU_ASSERT_EQUAL(V.world[2][12], 3); /* c = a * b * c */

  uint64_t t1 = scn_world_close_tick(w);
  CU_ASSERT_EQUAL(t1, 1);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t1), 0);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 0), 5);

  /* one leaf changes: only it */
  mat_t(m, 0, 7, 0);
  OK(scn_transform_set_local(w, c, m));
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t1), 1);
  CU_ASSERT_EQUAL(V.e[0], c);
  CU_ASSERT_EQUAL(V.world[0][12], 2);
  CU_ASSERT_EQUAL(V.world[0][13], 7);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t1), 1); /* visiting does not consume */
  uint64_t t2 = scn_world_close_tick(w);
  CU_ASSERT_EQUAL(t2, 2);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t2), 0);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t1), 1);

  /* a parent's change reports its descendants, not the others */
  mat_t(m, 5, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  const scn_entity sub_a[4] = {a, b, c, e};
  visit(w, SCN_ENTITY_NONE, t2);
  CU_ASSERT_TRUE(visited_is(sub_a, 4));
  CU_ASSERT_TRUE(visited_worlds_current(w));
  uint64_t t3 = scn_world_close_tick(w);

  /* setting the identical matrix is no change */
  OK(scn_transform_set_local(w, d, get(w, d).local));
  OK(scn_transform_set_world(w, c, get(w, c).world)); /* same bits come back */
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t3), 0);
  /* nor is a change undone before the next flush */
  float old[16];
  memcpy(old, get(w, d).local, 64);
  mat_t(m, 9, 9, 9);
  OK(scn_transform_set_local(w, d, m));
  OK(scn_transform_set_local(w, d, old));
  scn_world_stats st0, st1;
  scn_world_get_stats(w, &st0);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t3), 0);
  scn_world_get_stats(w, &st1);
  CU_ASSERT_EQUAL(st1.recomputed, st0.recomputed + 1); /* recomputed, but the bits held */
  CU_ASSERT_EQUAL(st1.changed, st0.changed);

  /* a different local that gives the same world bits: under a zero-scale parent only the
   * parent's translation survives */
  float zs[16];
  mat_t(zs, 4, 5, 6);
  zs[0] = zs[5] = zs[10] = 0;
  scn_entity z = mk(w, s, SCN_ENTITY_NONE, "z", zs);
  mat_t(m, 1, 2, 3);
  scn_entity k = mk(w, s, z, NULL, m);
  CU_ASSERT_EQUAL(get(w, k).world[12], 4);
  uint64_t t4 = scn_world_close_tick(w);
  mat_t(m, 10, 20, 30);
  OK(scn_transform_set_local(w, k, m));
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t4), 0);
  CU_ASSERT_TRUE(memcmp(get(w, k).local, m, 64) == 0);
  /* and since t3 the new ones are there, created after it */
  const scn_entity fresh[2] = {z, k};
  visit(w, SCN_ENTITY_NONE, t3);
  CU_ASSERT_TRUE(visited_is(fresh, 2));

  /* a transform whose world is all zero is still reported from its creation tick */
  float zero[16];
  memset(zero, 0, sizeof zero);
  scn_entity nul = mk(w, s, SCN_ENTITY_NONE, NULL, zero);
  uint64_t t5 = scn_world_close_tick(w);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t4), 1);
  CU_ASSERT_EQUAL(V.e[0], nul);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t5), 0);

  /* relinking moves a subtree: its world matrices change and are reported (walk order) */
  OK(scn_transform_link(w, b, d, SCN_KEEP_LOCAL));
  const scn_entity moved[2] = {b, c};
  visit(w, SCN_ENTITY_NONE, t5);
  CU_ASSERT_TRUE(visited_is(moved, 2));
  CU_ASSERT_TRUE(visited_worlds_current(w));
  const scn_entity order[8] = {a, e, d, b, c, z, k, nul};
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 0), 8);
  CU_ASSERT_TRUE(visited_is(order, 8));
  CU_ASSERT_TRUE(visited_parents_first(w, SCN_ENTITY_NONE));
  uint64_t t6 = scn_world_close_tick(w);
  OK(scn_transform_destroy(w, e, false));
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t6), 0); /* destroyed: gone, nothing changed */
  scn_scene_free(s);
}

static void test_visit_subtree(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16];
  mat_t(m, 0, 1, 0);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  scn_entity b = mk(w, s, a, NULL, m);
  scn_entity c = mk(w, s, b, NULL, m);
  scn_entity c2 = mk(w, s, b, NULL, m);
  scn_entity d = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  scn_entity d1 = mk(w, s, d, NULL, m);
  const scn_entity sub_b[3] = {b, c, c2};
  visit(w, b, 0);
  CU_ASSERT_TRUE(visited_is(sub_b, 3));
  CU_ASSERT_TRUE(visited_worlds_current(w));
  visit(w, c, 0);
  CU_ASSERT_TRUE(visited_is(&c, 1));
  const scn_entity sub_d[2] = {d, d1};
  visit(w, d, 0);
  CU_ASSERT_TRUE(visited_is(sub_d, 2));
  uint64_t t1 = scn_world_close_tick(w);
  OK(scn_transform_set_local(w, c2, IDENTITY));
  OK(scn_transform_set_local(w, d1, IDENTITY));
  CU_ASSERT_EQUAL(visit(w, a, t1), 1);
  CU_ASSERT_EQUAL(V.e[0], c2);
  CU_ASSERT_EQUAL(visit(w, c, t1), 0);
  CU_ASSERT_EQUAL(visit(w, d, t1), 1);
  CU_ASSERT_EQUAL(V.e[0], d1);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t1), 2);
  /* unknown roots */
  CU_ASSERT_EQUAL(scn_world_visit_changed(w, ent(s), 0, on_visit, &V), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_world_visit_changed(w, UINT64_MAX, 0, on_visit, &V), SCN_NOT_FOUND);
  OK(scn_transform_destroy(w, d1, false));
  CU_ASSERT_EQUAL(scn_world_visit_changed(w, d1, 0, on_visit, &V), SCN_NOT_FOUND);
  /* after a relink (arrays out of order) the subtree is still right */
  uint64_t t2 = scn_world_close_tick(w);
  OK(scn_transform_link(w, d, c, SCN_KEEP_LOCAL));
  const scn_entity sub_b2[4] = {b, c, d, c2};
  visit(w, b, 0);
  CU_ASSERT_TRUE(visited_is(sub_b2, 4));
  visit(w, b, t2);
  CU_ASSERT_TRUE(visited_is(&d, 1));
  scn_world_relayout(w);
  visit(w, b, 0);
  CU_ASSERT_TRUE(visited_is(sub_b2, 4));
  visit(w, a, t2);
  CU_ASSERT_TRUE(visited_is(&d, 1));
  scn_scene_free(s);
}

/* A flush that re-sorts the arrays must not make the subtree visit use a stale root. */
static void test_visit_subtree_across_relayout(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", NULL);
  scn_entity b = mk(w, s, SCN_ENTITY_NONE, "b", NULL);
  scn_entity c = mk(w, s, SCN_ENTITY_NONE, "c", NULL);
  scn_entity b1 = mk(w, s, b, "b1", NULL); /* out of depth-first order */
  scn_entity a1 = mk(w, s, a, "a1", NULL);
  scn_entity q = mk(w, s, SCN_ENTITY_NONE, "q", NULL);
  get(w, a); /* flushed, but not re-sorted */
  /* enough structural change that the next flush re-sorts */
  for (int k = 0; k < 100; k++) {
    OK(scn_transform_link(w, q, c, SCN_KEEP_LOCAL));
    OK(scn_transform_link(w, q, SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
  }
  scn_world_stats st0, st1;
  scn_world_get_stats(w, &st0);
  const scn_entity sub_b[2] = {b, b1};
  visit(w, b, 0);
  scn_world_get_stats(w, &st1);
  CU_ASSERT_EQUAL(st1.relayouts, st0.relayouts + 1);
  CU_ASSERT_TRUE(visited_is(sub_b, 2));
  const scn_entity sub_a[2] = {a, a1};
  visit(w, a, 0);
  CU_ASSERT_TRUE(visited_is(sub_a, 2));
  scn_scene_free(s);
}

typedef struct scoped {
  size_t n;
  scn_entity e[VCAP];
  bool changed[VCAP];
  bool worlds_ok;
  scn_world *w;
} scoped;

static void on_scope(void *ud, scn_entity e, const float world[16], bool changed) {
  scoped *v = ud;
  if (v->n < VCAP) {
    v->e[v->n] = e;
    v->changed[v->n] = changed;
  }
  v->n++;
  scn_transform_info info;
  if (scn_transform_get(v->w, e, &info) != SCN_OK || memcmp(info.world, world, 64) != 0)
    v->worlds_ok = false;
}

/* visit_scope sees every transform in scope in visit order; its changed flags pick out exactly
 * what visit_changed reports. */
static void check_scope(scn_world *w, scn_entity root, uint64_t since) {
  static scoped sc;
  memset(&sc, 0, sizeof sc);
  sc.w = w;
  sc.worlds_ok = true;
  OK(scn_world_visit_scope(w, root, since, on_scope, &sc));
  CU_ASSERT_TRUE(sc.worlds_ok);
  visit(w, root, 0);
  CU_ASSERT_EQUAL(sc.n, V.n);
  CU_ASSERT_TRUE(sc.n == V.n && memcmp(sc.e, V.e, sizeof(scn_entity) * V.n) == 0);
  visit(w, root, since);
  size_t k = 0;
  bool same = true;
  for (size_t i = 0; i < sc.n && i < VCAP; i++)
    if (sc.changed[i])
      same &= k < V.n && V.e[k++] == sc.e[i];
  CU_ASSERT_TRUE(same && k == V.n);
}

static void test_visit_scope(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16];
  mat_t(m, 2, 0, 0);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  scn_entity b = mk(w, s, a, NULL, m);
  scn_entity c = mk(w, s, b, NULL, m);
  scn_entity d = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  scn_entity d1 = mk(w, s, d, NULL, m);
  check_scope(w, SCN_ENTITY_NONE, 0);
  uint64_t t1 = scn_world_close_tick(w);
  check_scope(w, SCN_ENTITY_NONE, t1);
  mat_t(m, 0, 3, 0);
  OK(scn_transform_set_local(w, b, m));
  check_scope(w, SCN_ENTITY_NONE, t1);
  check_scope(w, a, t1);
  check_scope(w, c, t1);
  check_scope(w, d, t1);
  OK(scn_transform_link(w, d, c, SCN_KEEP_LOCAL)); /* unsorted: the walk */
  check_scope(w, SCN_ENTITY_NONE, t1);
  check_scope(w, b, t1);
  check_scope(w, d1, t1);
  check_scope(w, b, scn_world_tick(w));
  CU_ASSERT_EQUAL(visit(w, b, t1), 4);
  /* unknown root */
  static scoped sc;
  CU_ASSERT_EQUAL(scn_world_visit_scope(w, ent(s), 0, on_scope, &sc), SCN_NOT_FOUND);
  scn_scene_free(s);
}

/* ---- randomised: visit order and subtree membership --------------------------------------- */

static bool is_ancestor_via_get(scn_world *w, scn_entity anc, scn_entity e) {
  for (scn_entity x = e; x != SCN_ENTITY_NONE; x = get(w, x).parent)
    if (x == anc)
      return true;
  return false;
}

static void test_subtree_random(void) {
  enum { N = 120 };
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_entity e[N];
  rng_state = 77;
  for (int k = 0; k < N; k++) {
    float m[16];
    mat_t(m, (float)rnd(5), (float)rnd(5), 1);
    e[k] = mk(w, s, k == 0 || rnd(5) == 0 ? SCN_ENTITY_NONE : e[rnd((uint32_t)k)], NULL, m);
  }
  static scn_entity full[N];
  static scn_entity expect[N];
  for (int round = 0; round < 4; round++) {
    /* restructure a little (unsorted arrays in odd rounds, re-sorted in even ones) */
    for (int k = 0; k < 15; k++) {
      scn_entity x = e[rnd(N)], p = rnd(4) ? e[rnd(N)] : SCN_ENTITY_NONE;
      int rc = scn_transform_link(w, x, p, rnd(2) ? SCN_KEEP_WORLD : SCN_KEEP_LOCAL);
      CU_ASSERT(rc == SCN_OK || rc == SCN_CYCLE);
    }
    if (round % 2 == 0)
      scn_world_relayout(w);
    CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, 0), N);
    CU_ASSERT_TRUE(visited_parents_first(w, SCN_ENTITY_NONE));
    memcpy(full, V.e, sizeof full);
    bool membership = true, subtree_order = true;
    for (int r = 0; r < N; r++) {
      size_t n = 0;
      for (int k = 0; k < N; k++) {
        bool in = scn_transform_in_subtree(w, full[k], e[r]);
        membership &= in == is_ancestor_via_get(w, e[r], full[k]);
        if (in)
          expect[n++] = full[k];
      }
      visit(w, e[r], 0);
      subtree_order &= visited_is(expect, n);
    }
    CU_ASSERT_TRUE(membership);
    CU_ASSERT_TRUE(subtree_order);
  }
  scn_scene_free(s);
}

static void test_in_subtree(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w, *w2;
  OK(scn_world_create(s, "w", &w));
  OK(scn_world_create(s, "w2", &w2));
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  scn_entity b = mk(w, s, a, NULL, NULL);
  scn_entity c = mk(w, s, b, NULL, NULL);
  scn_entity d = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  scn_entity loose = ent(s);
  CU_ASSERT_TRUE(scn_transform_in_subtree(w, c, a));
  CU_ASSERT_TRUE(scn_transform_in_subtree(w, c, b));
  CU_ASSERT_TRUE(scn_transform_in_subtree(w, c, c));
  CU_ASSERT_TRUE(scn_transform_in_subtree(w, a, a));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, a, c));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, b, c));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, d, a));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, a, d));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, loose, a));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, a, loose));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, loose, loose));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, a, SCN_ENTITY_NONE));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, SCN_ENTITY_NONE, a));
  /* per world */
  OK(scn_transform_create(w2, c, SCN_ENTITY_NONE, NULL, NULL));
  OK(scn_transform_create(w2, a, c, NULL, NULL));
  CU_ASSERT_TRUE(scn_transform_in_subtree(w2, a, c));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w2, c, a));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w2, b, a));
  /* follows links and destroys */
  OK(scn_transform_link(w, d, c, SCN_KEEP_WORLD));
  CU_ASSERT_TRUE(scn_transform_in_subtree(w, d, a));
  OK(scn_transform_destroy(w, b, false));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, c, a));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, d, a));
  CU_ASSERT_TRUE(scn_transform_in_subtree(w, d, c));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, b, a));
  OK(scn_transform_destroy(w, c, true));
  CU_ASSERT_FALSE(scn_transform_in_subtree(w, d, d));
  scn_scene_free(s);
}

/* ---- events ------------------------------------------------------------------------------- */

#define ECAP 4096

typedef struct events {
  size_t n;
  scn_entity e[ECAP];
  int kind[ECAP];
} events;

static void on_event(void *ud, scn_entity e, scn_event_kind kind) {
  events *ev = ud;
  if (ev->n < ECAP) {
    ev->e[ev->n] = e;
    ev->kind[ev->n] = (int)kind;
  }
  ev->n++;
}

static events EV;

static size_t events_since(scn_world *w, uint64_t since) {
  memset(&EV, 0, sizeof EV);
  scn_world_visit_events(w, since, on_event, &EV);
  return EV.n;
}

static bool events_are(const scn_entity *e, const int *kind, size_t n) {
  if (EV.n != n)
    return false;
  for (size_t k = 0; k < n; k++)
    if (EV.e[k] != e[k] || EV.kind[k] != kind[k])
      return false;
  return true;
}

enum { DES = SCN_EVENT_DESTROYED, REL = SCN_EVENT_RELINKED, CRE = SCN_EVENT_CREATED };

static void test_events(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w, *w2;
  OK(scn_world_create(s, "w", &w));
  scn_world_keep_events(w, true); /* the log is off by default */
  OK(scn_world_create(s, "w2", &w2));
  scn_world_keep_events(w2, true); /* the log is off by default */
  CU_ASSERT_EQUAL(scn_world_events_since(w), 0);
  CU_ASSERT_EQUAL(events_since(w, 0), 0);
  /* tick 1: creations */
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", NULL);
  scn_entity b = mk(w, s, SCN_ENTITY_NONE, "b", NULL);
  scn_entity c = mk(w, s, SCN_ENTITY_NONE, "c", NULL);
  uint64_t t1 = scn_world_close_tick(w);
  /* tick 2: one relink; no-ops, failures and non-structural changes log nothing */
  OK(scn_transform_link(w, b, a, SCN_KEEP_LOCAL));
  OK(scn_transform_link(w, b, a, SCN_KEEP_WORLD));
  OK(scn_transform_link(w, c, SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
  CU_ASSERT_EQUAL(scn_transform_link(w, a, b, SCN_KEEP_LOCAL), SCN_CYCLE);
  CU_ASSERT_EQUAL(scn_transform_create(w, ent(s), SCN_ENTITY_NONE, "c", NULL), SCN_EXISTS);
  CU_ASSERT_EQUAL(scn_transform_destroy(w, ent(s), false), SCN_NOT_FOUND);
  OK(scn_transform_set_local(w, c, IDENTITY));
  float m[16];
  mat_t(m, 1, 1, 1);
  OK(scn_transform_set_world(w, b, m));
  OK(scn_transform_rename(w, c, "cc"));
  uint64_t t2 = scn_world_close_tick(w);
  /* tick 3: a non-recursive destroy (children relinked), a recursive one, entity.destroy */
  scn_entity d = mk(w, s, b, NULL, NULL);
  scn_entity d2 = mk(w, s, d, NULL, NULL);
  OK(scn_transform_destroy(w, a, false));
  OK(scn_transform_destroy(w, b, true));
  OK(scn_entity_destroy(s, c));
  uint64_t t3 = scn_world_close_tick(w);
  CU_ASSERT_EQUAL(t1, 1);
  CU_ASSERT_EQUAL(t2, 2);
  CU_ASSERT_EQUAL(t3, 3);

  const scn_entity e_all[] = {a, b, c, b, d, d2, b, a, d2, d, b, c};
  const int k_all[] = {CRE, CRE, CRE, REL, CRE, CRE, REL, DES, DES, DES, DES, DES};
  CU_ASSERT_EQUAL(events_since(w, 0), 12);
  CU_ASSERT_TRUE(events_are(e_all, k_all, 12));
  CU_ASSERT_EQUAL(events_since(w, t1), 9);
  CU_ASSERT_TRUE(events_are(e_all + 3, k_all + 3, 9));
  CU_ASSERT_EQUAL(events_since(w, t2), 8);
  CU_ASSERT_TRUE(events_are(e_all + 4, k_all + 4, 8));
  CU_ASSERT_EQUAL(events_since(w, t3), 0);
  CU_ASSERT_EQUAL(events_since(w2, 0), 0); /* per world */

  /* trimming drops events at or before the tick and moves the horizon */
  scn_world_trim_events(w, t1);
  CU_ASSERT_EQUAL(scn_world_events_since(w), t1);
  CU_ASSERT_EQUAL(events_since(w, 0), 9);
  CU_ASSERT_TRUE(events_are(e_all + 3, k_all + 3, 9));
  scn_world_trim_events(w, 0); /* never moves back */
  CU_ASSERT_EQUAL(scn_world_events_since(w), t1);
  CU_ASSERT_EQUAL(events_since(w, 0), 9);
  scn_world_trim_events(w, t2);
  CU_ASSERT_EQUAL(scn_world_events_since(w), t2);
  CU_ASSERT_EQUAL(events_since(w, 0), 8);
  CU_ASSERT_TRUE(events_are(e_all + 4, k_all + 4, 8));
  scn_world_trim_events(w, 100);
  CU_ASSERT_EQUAL(scn_world_events_since(w), 100);
  CU_ASSERT_EQUAL(events_since(w, 0), 0);
  /* the log keeps working after a full trim */
  scn_entity f = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  CU_ASSERT_EQUAL(events_since(w, t3), 1);
  CU_ASSERT_EQUAL(EV.e[0], f);
  CU_ASSERT_EQUAL(EV.kind[0], CRE);
  scn_scene_free(s);
}

static void test_events_long_log(void) {
  /* enough events that trimming compacts the log; order and content survive it */
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_world_keep_events(w, true); /* the log is off by default */
  scn_entity p = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  scn_entity x[100];
  for (int k = 0; k < 100; k++)
    x[k] = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  uint64_t first = scn_world_close_tick(w);
  uint64_t ticks[30];
  for (int t = 0; t < 30; t++) {
    for (int k = 0; k < 100; k++)
      OK(scn_transform_link(w, x[k], t % 2 ? SCN_ENTITY_NONE : p, SCN_KEEP_LOCAL));
    ticks[t] = scn_world_close_tick(w);
  }
  CU_ASSERT_EQUAL(events_since(w, first), 3000);
  CU_ASSERT_EQUAL(events_since(w, 0), 3101);
  scn_world_trim_events(w, ticks[19]);
  CU_ASSERT_EQUAL(events_since(w, 0), 1000);
  bool ok = EV.n == 1000;
  for (size_t k = 0; ok && k < 1000; k++)
    ok = EV.e[k] == x[k % 100] && EV.kind[k] == REL;
  CU_ASSERT_TRUE(ok);
  CU_ASSERT_EQUAL(events_since(w, ticks[24]), 500);
  CU_ASSERT_EQUAL(EV.e[0], x[0]);
  /* more events after the compaction land after the old ones */
  OK(scn_transform_destroy(w, x[5], false));
  CU_ASSERT_EQUAL(events_since(w, ticks[29]), 1);
  CU_ASSERT_EQUAL(EV.e[0], x[5]);
  CU_ASSERT_EQUAL(EV.kind[0], DES);
  CU_ASSERT_EQUAL(events_since(w, 0), 1001);
  CU_ASSERT_EQUAL(scn_world_events_since(w), ticks[19]);
  scn_scene_free(s);
}

/* ---- stats -------------------------------------------------------------------------------- */

static void test_stats(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_world_stats st;
  memset(&st, 0x5a, sizeof st);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.flushes, 0);
  CU_ASSERT_EQUAL(st.recomputed, 0);
  CU_ASSERT_EQUAL(st.changed, 0);
  CU_ASSERT_EQUAL(st.relayouts, 0);
  scn_world_flush(w);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.flushes, 0); /* nothing to do is not a flush */

  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  scn_entity b = mk(w, s, a, NULL, NULL);
  mk(w, s, b, NULL, NULL);
  mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.flushes, 0); /* creation does not flush */
  scn_world_flush(w);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.flushes, 1);
  CU_ASSERT_EQUAL(st.recomputed, 4);
  CU_ASSERT_EQUAL(st.changed, 4);
  scn_world_flush(w);
  get(w, b);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.flushes, 1);

  /* a root change recomputes its subtree once */
  float m[16];
  mat_t(m, 1, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  OK(scn_transform_set_local(w, b, m));
  get(w, a);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.flushes, 2);
  CU_ASSERT_EQUAL(st.recomputed, 4 + 3);
  CU_ASSERT_EQUAL(st.changed, 4 + 3);
  /* the identical matrix does nothing at all */
  OK(scn_transform_set_local(w, a, m));
  get(w, a);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.flushes, 2);
  /* a structural change, then relayout */
  CU_ASSERT_EQUAL(st.relayouts, 0);
  scn_world_relayout(w); /* sorted already */
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.relayouts, 0);
  OK(scn_transform_link(w, b, SCN_ENTITY_NONE, SCN_KEEP_WORLD));
  scn_world_relayout(w);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.relayouts, 1);
  /* keep world: recomputed, same bits here (translations are exact) */
  scn_world_flush(w);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.flushes, 3);
  CU_ASSERT_EQUAL(st.recomputed, 7 + 2);
  CU_ASSERT_EQUAL(st.changed, 7);
  /* close_tick counts as a flush only when something was dirty */
  scn_world_close_tick(w);
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.flushes, 3);
  /* stats are per world */
  scn_world *w2;
  OK(scn_world_create(s, "w2", &w2));
  scn_world_get_stats(w2, &st);
  CU_ASSERT_EQUAL(st.flushes, 0);
  CU_ASSERT_EQUAL(st.recomputed, 0);
  scn_scene_free(s);
}

/* A matrix a read recomputed inside a tick and that is back at its old value when the tick
 * closes did not change: with revert tracking its stamp is the old one again. */
static void test_reverts(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16];
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  scn_entity b = mk(w, s, a, NULL, NULL);
  uint64_t t0 = scn_world_close_tick(w);
  scn_world_track_reverts(w, true);

  /* set, read (flushes), set back: nothing changed since t0 */
  mat_t(m, 1, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  CU_ASSERT_EQUAL(get(w, b).world[12], 1);
  OK(scn_transform_set_local(w, a, IDENTITY));
  uint64_t t1 = scn_world_close_tick(w);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t0), 0);

  /* a failed batch whose read recomputed the matrices changes nothing either */
  OK(scn_batch_begin(s));
  mat_t(m, 5, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  CU_ASSERT_EQUAL(get(w, b).world[12], 5);
  scn_batch_rollback(s);
  uint64_t t2 = scn_world_close_tick(w);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t1), 0);

  /* changed and changed again within the tick, to a new value: listed once */
  mat_t(m, 2, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  CU_ASSERT_EQUAL(get(w, b).world[12], 2);
  mat_t(m, 3, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  uint64_t t3 = scn_world_close_tick(w);
  scn_entity both[] = {a, b};
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t2), 2);
  CU_ASSERT_TRUE(visited_is(both, 2));
  CU_ASSERT_EQUAL(V.world[1][12], 3);

  /* a removal in the tick keeps the new stamps (an entity's transform may be a new one) */
  scn_entity c = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  uint64_t t4 = scn_world_close_tick(w);
  (void)t3;
  OK(scn_transform_set_local(w, a, IDENTITY));
  CU_ASSERT_EQUAL(get(w, b).world[12], 0);
  OK(scn_transform_destroy(w, c, false));
  mat_t(m, 3, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  scn_world_close_tick(w);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t4), 2);

  /* without tracking, a set-back after a read is listed again (the old behaviour) */
  scn_world_track_reverts(w, false);
  uint64_t t5 = scn_world_tick(w) - 1;
  mat_t(m, 9, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  CU_ASSERT_EQUAL(get(w, b).world[12], 9);
  mat_t(m, 3, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  scn_world_close_tick(w);
  CU_ASSERT_EQUAL(visit(w, SCN_ENTITY_NONE, t5), 2);
  scn_scene_free(s);
}

int t_register_core_stream(void) {
  static const t_test tests[] = {
      {"ticks start at 1 and close_tick advances", test_ticks},
      {"visit_changed over the whole world", test_visit_whole_world},
      {"visit_changed for a subtree", test_visit_subtree},
      {"visit_changed for a subtree across a relayout", test_visit_subtree_across_relayout},
      {"visit_scope", test_visit_scope},
      {"visit order and in_subtree in a random forest", test_subtree_random},
      {"in_subtree", test_in_subtree},
      {"events since a tick and trim_events", test_events},
      {"events: a long log trimmed and compacted", test_events_long_log},
      {"stats", test_stats},
      {"reverts inside a tick keep the old stamps", test_reverts},
  };
  return T_ADD_SUITE("core_stream", NULL, NULL, tests);
}

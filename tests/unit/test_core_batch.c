/* Unit tests of atomic batches: each kind of mutation inside a batch, rolled back, leaves the
 * scene exactly as an untouched twin built the same way; commit keeps the changes. */
#include "core_fixtures.h"
#include "scn_core.h"
#include "suites.h"
#include "xorshift.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void trs(float m[16], float tx, float ty, float tz, float qx, float qy, float qz, float qw,
                float s) {
  const float t[3] = {tx, ty, tz}, q[4] = {qx, qy, qz, qw}, sc[3] = {s, s * 1.25f, s};
  CU_ASSERT_EQUAL_FATAL(scn_compose_trs(t, q, sc, m), SCN_OK);
}

/* ---- fixture: a scene with two worlds, built the same way every time ---------------------- */

#define NE 40

typedef struct fixture {
  scn_scene *s;
  scn_world *w1, *w2;
  scn_entity e[NE];
} fixture;

static void build(fixture *f) {
  memset(f, 0, sizeof *f);
  f->s = scn_scene_new(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f->s);
  OK(scn_world_create(f->s, "one", &f->w1));
  OK(scn_world_create(f->s, "two", &f->w2));
  /* keep the event logs, so rollback is checked to restore them too */
  scn_world_keep_events(f->w1, true);
  scn_world_keep_events(f->w2, true);
  OK(scn_entity_create(f->s, NE, f->e));
  /* free slots in the registry, so creation reuses them */
  OK(scn_entity_destroy(f->s, f->e[35]));
  OK(scn_entity_destroy(f->s, f->e[31]));
  OK(scn_entity_destroy(f->s, f->e[38]));
  scn_entity *e = f->e;
  scn_world *w1 = f->w1, *w2 = f->w2;
  float m[16];
  /* world one:
   *   e0 "root0" -> e1 "a" -> e3 "c" -> e4
   *              -> e2 "b"
   *   e6 "root6" -> e7 "x", e8 -> e9 "y"
   *   e10 -> e11 "n11" .. e15 "n15";  e11 -> e16, e17 "k"
   *   e18 "s" (a zero-scale root) -> e19 */
  struct {
    int x, parent;
    const char *name;
  } spec[] = {
      {0, -1, "root0"}, {1, 0, "a"},     {2, 0, "b"},     {3, 1, "c"},     {4, 3, NULL},
      {6, -1, "root6"}, {7, 6, "x"},     {8, 6, NULL},    {9, 8, "y"},     {10, -1, NULL},
      {11, 10, "n11"},  {12, 10, "n12"}, {13, 10, "n13"}, {14, 10, "n14"}, {15, 10, "n15"},
      {16, 11, NULL},   {17, 11, "k"},   {18, -1, "s"},   {19, 18, NULL},
  };
  for (size_t k = 0; k < sizeof spec / sizeof spec[0]; k++) {
    int x = spec[k].x;
    trs(m, (float)x, 0.5f * (float)k, -1.0f / (float)(x + 1), 0.1f * (float)x, 0.3f, -0.2f, 0.9f,
        1 + 0.05f * (float)k);
    if (x == 18)
      memset(m, 0, 48); /* singular parent: keep-world ops below it fail */
    OK(scn_transform_create(w1, e[x], spec[k].parent < 0 ? SCN_ENTITY_NONE : e[spec[k].parent],
                            spec[k].name, m));
  }
  /* world two: e0 -> e1 -> e2, e20 "r20" -> e21 "q" */
  trs(m, 1, 2, 3, 0, 0, 0.4f, 0.9f, 2);
  OK(scn_transform_create(w2, e[0], SCN_ENTITY_NONE, "root0", m));
  OK(scn_transform_create(w2, e[1], e[0], "a", m));
  OK(scn_transform_create(w2, e[2], e[1], NULL, m));
  OK(scn_transform_create(w2, e[20], SCN_ENTITY_NONE, "r20", m));
  OK(scn_transform_create(w2, e[21], e[20], "q", m));
  /* some history: a closed tick, an event, and a change still waiting for a flush */
  scn_world_close_tick(w1);
  OK(scn_transform_link(w1, e[2], e[1], SCN_KEEP_LOCAL));
  trs(m, -5, 4, 3, 0.7f, 0.1f, 0.1f, 0.2f, 0.5f);
  OK(scn_transform_set_local(w1, e[3], m));
}

static void destroy_fixture(fixture *f) { scn_scene_free(f->s); }

/* ---- whole-scene snapshot ----------------------------------------------------------------- */

typedef struct node_snap {
  scn_entity e, parent;
  bool named;
  char name[SCN_NAME_MAX + 1];
  float local[16], world[16];
  size_t nkids;
  scn_entity kids[32];
} node_snap;

typedef struct world_snap {
  char name[SCN_NAME_MAX + 1];
  size_t count;
  uint64_t tick;
  size_t n;
  node_snap nodes[160];
  size_t nev;
  scn_entity ev_e[512];
  int ev_k[512];
} world_snap;

typedef struct scene_snap {
  size_t nworlds, entities, transforms;
  world_snap worlds[2];
  uint32_t slots;
  scn_entity slot_id[256];
  bool slot_alive[256];
} scene_snap;

typedef struct order_list {
  scn_entity e[160];
  size_t n;
} order_list;

static void collect(void *ud, scn_entity e, const float world[16]) {
  (void)world;
  order_list *l = ud;
  if (l->n < 160)
    l->e[l->n] = e;
  l->n++;
}

static void collect_event(void *ud, scn_entity e, scn_event_kind kind) {
  world_snap *ws = ud;
  if (ws->nev < 512) {
    ws->ev_e[ws->nev] = e;
    ws->ev_k[ws->nev] = (int)kind;
  }
  ws->nev++;
}

static void count_event(void *ud, scn_entity e, scn_event_kind kind) {
  (void)e, (void)kind;
  ++*(int *)ud;
}

static void snapshot(scn_scene *s, scene_snap *out) {
  memset(out, 0, sizeof *out);
  out->nworlds = scn_world_count(s);
  out->entities = scn_entity_count(s);
  out->transforms = scn_scene_transform_count(s);
  CU_ASSERT_FATAL(out->nworlds <= 2);
  for (size_t k = 0; k < out->nworlds; k++) {
    scn_world *w = scn_world_at(s, k);
    world_snap *ws = &out->worlds[k];
    strcpy(ws->name, scn_world_name(w));
    ws->count = scn_world_transform_count(w);
    ws->tick = scn_world_tick(w);
    static order_list order;
    order.n = 0;
    OK(scn_world_visit_changed(w, SCN_ENTITY_NONE, 0, collect, &order));
    CU_ASSERT_FATAL(order.n <= 160);
    ws->n = order.n;
    for (size_t i = 0; i < order.n; i++) {
      node_snap *n = &ws->nodes[i];
      scn_transform_info info = get(w, order.e[i]);
      n->e = info.entity;
      n->parent = info.parent;
      n->named = info.name != NULL;
      if (info.name)
        strcpy(n->name, info.name);
      memcpy(n->local, info.local, 64);
      memcpy(n->world, info.world, 64);
      OK(scn_transform_children(w, n->e, n->kids, 32, &n->nkids));
      CU_ASSERT_FATAL(n->nkids <= 32);
    }
    scn_world_visit_events(w, 0, collect_event, ws);
  }
  out->slots = scn_entity_slot_count(s);
  CU_ASSERT_FATAL(out->slots < 256);
  for (uint32_t slot = 1; slot <= out->slots; slot++)
    out->slot_id[slot] = scn_entity_slot_id(s, slot, &out->slot_alive[slot]);
}

/* Field by field, so a failure says what differs. */
static bool snap_equal(const scene_snap *a, const scene_snap *b) {
  bool eq = true;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    bool ok_ = (cond);                                                                             \
    CU_ASSERT(ok_);                                                                                \
    eq &= ok_;                                                                                     \
  } while (0)
  CHECK(a->nworlds == b->nworlds);
  CHECK(a->entities == b->entities);
  CHECK(a->transforms == b->transforms);
  CHECK(a->slots == b->slots);
  CHECK(memcmp(a->slot_id, b->slot_id, sizeof a->slot_id) == 0);
  CHECK(memcmp(a->slot_alive, b->slot_alive, sizeof a->slot_alive) == 0);
  for (size_t k = 0; k < a->nworlds && k < b->nworlds; k++) {
    const world_snap *x = &a->worlds[k], *y = &b->worlds[k];
    CHECK(strcmp(x->name, y->name) == 0);
    CHECK(x->count == y->count);
    CHECK(x->tick == y->tick);
    CHECK(x->n == y->n);
    bool order = true, parents = true, names = true, locals = true, worlds = true, kids = true;
    for (size_t i = 0; i < x->n && i < y->n; i++) {
      const node_snap *p = &x->nodes[i], *q = &y->nodes[i];
      order &= p->e == q->e;
      parents &= p->parent == q->parent;
      names &= p->named == q->named && strcmp(p->name, q->name) == 0;
      locals &= memcmp(p->local, q->local, 64) == 0;
      worlds &= memcmp(p->world, q->world, 64) == 0;
      kids &= p->nkids == q->nkids && memcmp(p->kids, q->kids, sizeof p->kids) == 0;
    }
    CHECK(order);
    CHECK(parents);
    CHECK(names);
    CHECK(locals);
    CHECK(worlds);
    CHECK(kids);
    CHECK(x->nev == y->nev);
    CHECK(memcmp(x->ev_e, y->ev_e, sizeof x->ev_e) == 0);
    CHECK(memcmp(x->ev_k, y->ev_k, sizeof x->ev_k) == 0);
  }
#undef CHECK
  return eq;
}

static scene_snap SA, SB;

static void post_ops(fixture *f, scn_entity fresh, int rc[6]) {
  float m[16];
  trs(m, 1, 1, 1, 0, 1, 0, 1, 3);
  rc[0] = scn_transform_create(f->w1, fresh, f->e[1], "fresh", m);
  rc[1] = scn_transform_set_local(f->w1, f->e[1], m);
  rc[2] = scn_transform_link(f->w1, f->e[7], f->e[10], SCN_KEEP_WORLD);
  rc[3] = scn_transform_destroy(f->w1, f->e[0], false);
  rc[4] = scn_transform_rename(f->w2, f->e[21], "q2");
  rc[5] = scn_transform_destroy(f->w1, f->e[11], true);
}

/* A after rollback equals twin B, and both hand out the same next ids. */
static void expect_same(fixture *a, fixture *b) {
  snapshot(a->s, &SA);
  snapshot(b->s, &SB);
  CU_ASSERT_TRUE(snap_equal(&SA, &SB));
  scn_entity na[4], nb[4];
  OK(scn_entity_create(a->s, 4, na));
  OK(scn_entity_create(b->s, 4, nb));
  CU_ASSERT_TRUE(memcmp(na, nb, sizeof na) == 0);
  /* and the rolled-back scene still works: the same ops give the same results */
  int ra[6], rb[6];
  post_ops(a, na[0], ra);
  post_ops(b, nb[0], rb);
  CU_ASSERT_TRUE(memcmp(ra, rb, sizeof ra) == 0);
  snapshot(a->s, &SA);
  snapshot(b->s, &SB);
  CU_ASSERT_TRUE(snap_equal(&SA, &SB));
}

/* ---- one kind of mutation at a time ------------------------------------------------------- */

static void test_rollback_entity_create(void) {
  fixture a, b;
  build(&a);
  build(&b);
  OK(scn_batch_begin(a.s));
  scn_entity made[5], one;
  OK(scn_entity_create(a.s, 5, made)); /* three reused slots and two fresh ones */
  OK(scn_entity_create(a.s, 1, &one));
  CU_ASSERT_EQUAL(scn_entity_count(a.s), NE - 3 + 6);
  for (int k = 0; k < 5; k++)
    CU_ASSERT_TRUE(scn_entity_alive(a.s, made[k]));
  CU_ASSERT_EQUAL(scn_entity_slot_count(a.s), NE + 3);
  /* and a transform for one of them */
  OK(scn_transform_create(a.w1, made[4], a.e[0], "new", NULL));
  OK(scn_transform_create(a.w2, made[0], SCN_ENTITY_NONE, NULL, NULL));
  scn_batch_rollback(a.s);
  for (int k = 0; k < 5; k++)
    CU_ASSERT_FALSE(scn_entity_alive(a.s, made[k]));
  CU_ASSERT_FALSE(scn_entity_alive(a.s, one));
  CU_ASSERT_FALSE(scn_transform_exists(a.w1, made[4]));
  CU_ASSERT_EQUAL(scn_entity_count(a.s), NE - 3);
  CU_ASSERT_EQUAL(scn_entity_slot_count(a.s), NE);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

static void test_rollback_transform_create(void) {
  fixture a, b;
  build(&a);
  build(&b);
  OK(scn_batch_begin(a.s));
  float m[16];
  trs(m, 3, 2, 1, 0.5f, 0, 0, 1, 1);
  OK(scn_transform_create(a.w1, a.e[22], SCN_ENTITY_NONE, "r22", m));
  OK(scn_transform_create(a.w1, a.e[23], a.e[22], "c", m));
  OK(scn_transform_create(a.w1, a.e[24], a.e[1], NULL, m)); /* under an existing node */
  OK(scn_transform_create(a.w1, a.e[25], a.e[24], "deep", NULL));
  OK(scn_transform_create(a.w2, a.e[22], a.e[2], NULL, m));
  CU_ASSERT_EQUAL(scn_world_transform_count(a.w1), 19 + 4);
  get(a.w1, a.e[25]); /* a flush in the middle */
  OK(scn_transform_create(a.w1, a.e[26], a.e[25], NULL, m));
  scn_batch_rollback(a.s);
  CU_ASSERT_EQUAL(scn_world_transform_count(a.w1), 19);
  CU_ASSERT_EQUAL(scn_world_transform_count(a.w2), 5);
  scn_entity found;
  CU_ASSERT_EQUAL(scn_transform_find(a.w1, "r22", 3, &found), SCN_NOT_FOUND);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

static void test_rollback_set_local_world(void) {
  fixture a, b;
  build(&a);
  build(&b);
  float m[16], m2[16];
  trs(m, 9, 8, 7, 0.2f, 0.2f, 0.9f, 0.1f, 0.7f);
  trs(m2, -1, -2, -3, 0.9f, 0.2f, 0.1f, 0.1f, 1.5f);
  OK(scn_batch_begin(a.s));
  OK(scn_transform_set_local(a.w1, a.e[0], m));
  OK(scn_transform_set_local(a.w1, a.e[3], m)); /* was pending before the batch */
  OK(scn_transform_set_local(a.w1, a.e[3], m2));
  CU_ASSERT_TRUE(memcmp(get(a.w1, a.e[3]).local, m2, 64) == 0);
  OK(scn_transform_set_world(a.w1, a.e[9], m));
  OK(scn_transform_set_world(a.w1, a.e[6], m2));
  OK(scn_transform_set_world(a.w1, a.e[4], m2));
  OK(scn_transform_set_local(a.w2, a.e[1], IDENTITY));
  OK(scn_transform_set_local(a.w1, a.e[0], m2));
  CU_ASSERT_EQUAL(scn_transform_set_world(a.w1, a.e[19], m), SCN_SINGULAR);
  scn_batch_rollback(a.s);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

static void test_rollback_link(void) {
  fixture a, b;
  build(&a);
  build(&b);
  OK(scn_batch_begin(a.s));
  /* keep local, keep world, unlink either way, moves inside one parent's child list */
  OK(scn_transform_link(a.w1, a.e[12], a.e[6], SCN_KEEP_LOCAL)); /* from the middle of 5 */
  OK(scn_transform_link(a.w1, a.e[1], a.e[7], SCN_KEEP_WORLD));
  OK(scn_transform_link(a.w1, a.e[3], SCN_ENTITY_NONE, SCN_KEEP_WORLD));
  OK(scn_transform_link(a.w1, a.e[9], SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
  OK(scn_transform_link(a.w1, a.e[11], a.e[10], SCN_KEEP_LOCAL)); /* no-op */
  OK(scn_transform_link(a.w1, a.e[13], a.e[19], SCN_KEEP_LOCAL));
  get(a.w1, a.e[13]);
  OK(scn_transform_link(a.w1, a.e[13], a.e[10], SCN_KEEP_WORLD)); /* back, now last */
  OK(scn_transform_link(a.w1, a.e[10], a.e[4], SCN_KEEP_WORLD));  /* a root into a subtree */
  OK(scn_transform_link(a.w2, a.e[21], a.e[2], SCN_KEEP_WORLD));
  OK(scn_transform_link(a.w2, a.e[1], SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
  CU_ASSERT_EQUAL(get(a.w1, a.e[1]).parent, a.e[7]);
  CU_ASSERT_EQUAL(get(a.w1, a.e[10]).parent, a.e[4]);
  /* failures inside the batch record nothing */
  CU_ASSERT_EQUAL(scn_transform_link(a.w1, a.e[7], a.e[1], SCN_KEEP_LOCAL), SCN_CYCLE);
  CU_ASSERT_EQUAL(scn_transform_link(a.w1, a.e[2], a.e[18], SCN_KEEP_WORLD), SCN_SINGULAR);
  CU_ASSERT_EQUAL(scn_transform_link(a.w1, a.e[7], SCN_ENTITY_NONE, SCN_KEEP_LOCAL),
                  SCN_OK); /* "x" is free among roots */
  CU_ASSERT_EQUAL(scn_transform_link(a.w1, a.e[17], SCN_ENTITY_NONE, SCN_KEEP_LOCAL), SCN_OK);
  scn_entity dup = a.e[16];
  OK(scn_transform_rename(a.w1, dup, "k"));
  CU_ASSERT_EQUAL(scn_transform_link(a.w1, dup, SCN_ENTITY_NONE, SCN_KEEP_LOCAL), SCN_EXISTS);
  scn_batch_rollback(a.s);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

static void test_rollback_rename(void) {
  fixture a, b;
  build(&a);
  build(&b);
  OK(scn_batch_begin(a.s));
  OK(scn_transform_rename(a.w1, a.e[1], "renamed"));
  OK(scn_transform_rename(a.w1, a.e[1], "again"));
  OK(scn_transform_rename(a.w1, a.e[4], "was_unnamed"));
  OK(scn_transform_rename(a.w1, a.e[7], NULL));
  OK(scn_transform_rename(a.w1, a.e[8], "x"));     /* the name e7 just gave up */
  OK(scn_transform_rename(a.w1, a.e[0], "root0")); /* same name: no-op */
  OK(scn_transform_rename(a.w2, a.e[20], "root2"));
  CU_ASSERT_EQUAL(scn_transform_rename(a.w1, a.e[3], "b"), SCN_EXISTS); /* sibling e2 */
  CU_ASSERT_EQUAL(scn_transform_rename(a.w1, a.e[6], "root0"), SCN_EXISTS);
  scn_entity found;
  OK(scn_transform_find(a.w1, "root6/x/y", 9, &found));
  CU_ASSERT_EQUAL(found, a.e[9]);
  scn_batch_rollback(a.s);
  OK(scn_transform_find(a.w1, "root0/a/c", 9, &found));
  CU_ASSERT_EQUAL(found, a.e[3]);
  OK(scn_transform_find(a.w1, "root6/x", 7, &found));
  CU_ASSERT_EQUAL(found, a.e[7]);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

static void test_rollback_destroy(void) {
  fixture a, b;
  build(&a);
  build(&b);
  OK(scn_batch_begin(a.s));
  OK(scn_transform_destroy(a.w1, a.e[10], false));      /* five named children become roots */
  OK(scn_transform_destroy(a.w1, a.e[1], false));       /* a child with children, pending change */
  OK(scn_transform_destroy(a.w1, a.e[12], false));      /* a former child, now a root */
  OK(scn_transform_set_local(a.w1, a.e[11], IDENTITY)); /* change a former child */
  OK(scn_transform_link(a.w1, a.e[13], a.e[14], SCN_KEEP_WORLD));
  OK(scn_transform_destroy(a.w1, a.e[18], false)); /* singular parent */
  OK(scn_transform_destroy(a.w2, a.e[0], false));
  CU_ASSERT_EQUAL(scn_world_transform_count(a.w1), 15);
  CU_ASSERT_EQUAL(get(a.w1, a.e[3]).parent, SCN_ENTITY_NONE);
  /* destroy then create the same entity again in the batch */
  OK(scn_transform_create(a.w1, a.e[10], a.e[11], "back", NULL));
  OK(scn_transform_destroy(a.w1, a.e[10], false));
  OK(scn_transform_create(a.w1, a.e[10], SCN_ENTITY_NONE, NULL, NULL));
  /* a refused destroy records nothing */
  OK(scn_transform_create(a.w1, a.e[27], a.e[6], "root0", NULL));
  CU_ASSERT_EQUAL(scn_transform_destroy(a.w1, a.e[6], false), SCN_EXISTS);
  scn_batch_rollback(a.s);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

static void test_rollback_destroy_recursive(void) {
  fixture a, b;
  build(&a);
  build(&b);
  OK(scn_batch_begin(a.s));
  OK(scn_transform_destroy(a.w1, a.e[1], true)); /* a subtree with a pending change */
  OK(scn_transform_destroy(a.w1, a.e[10], true));
  OK(scn_transform_destroy(a.w2, a.e[0], true));
  CU_ASSERT_EQUAL(scn_world_transform_count(a.w1), 19 - 4 - 8);
  CU_ASSERT_EQUAL(scn_world_transform_count(a.w2), 2);
  /* names are free again in the batch */
  OK(scn_transform_create(a.w1, a.e[11], a.e[0], "a", NULL));
  OK(scn_transform_create(a.w1, a.e[12], a.e[11], NULL, NULL));
  OK(scn_transform_destroy(a.w1, a.e[6], true));
  OK(scn_transform_destroy(a.w1, a.e[0], true));
  scn_batch_rollback(a.s);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

/* ---- everything at once, randomised ------------------------------------------------------- */

/* One random operation; failures are fine (they must record nothing). */
static void random_op(fixture *f, scn_entity *pool, size_t *npool, int *ok_ops) {
  scn_world *w = rnd(4) ? f->w1 : f->w2;
  scn_entity x = pool[rnd((uint32_t)*npool)], y = pool[rnd((uint32_t)*npool)];
  float m[16];
  trs(m, (float)rnd(7), -(float)rnd(5), 0.25f * (float)rnd(9), 0.1f * (float)rnd(10), 0.4f, -0.3f,
      0.5f, 0.5f + 0.25f * (float)rnd(4));
  char name[16];
  snprintf(name, sizeof name, "m%u", rnd(12));
  int rc = SCN_OK;
  switch (rnd(12)) {
  case 0:
    if (*npool < 200 && rnd(3) == 0) {
      scn_entity made[2];
      rc = scn_entity_create(f->s, 2, made);
      if (rc == SCN_OK) {
        pool[(*npool)++] = made[0];
        pool[(*npool)++] = made[1];
      }
    } else {
      rc = scn_transform_create(w, x, rnd(3) ? y : SCN_ENTITY_NONE, rnd(2) ? name : NULL,
                                rnd(2) ? m : NULL);
    }
    break;
  case 1:
  case 2:
    rc = scn_transform_set_local(w, x, m);
    break;
  case 3:
    rc = scn_transform_set_world(w, x, m);
    break;
  case 4:
  case 5:
    rc = scn_transform_link(w, x, y, rnd(2) ? SCN_KEEP_WORLD : SCN_KEEP_LOCAL);
    break;
  case 6:
    rc = scn_transform_link(w, x, SCN_ENTITY_NONE, rnd(2) ? SCN_KEEP_WORLD : SCN_KEEP_LOCAL);
    break;
  case 7:
    rc = scn_transform_rename(w, x, rnd(4) ? name : NULL);
    break;
  case 8:
    rc = scn_transform_destroy(w, x, false);
    break;
  case 9:
    rc = scn_transform_destroy(w, x, rnd(2) == 0);
    break;
  case 10: {
    scn_transform_info info;
    rc = scn_transform_get(w, x, &info);
    break;
  }
  case 11:
    if (rnd(4) == 0)
      scn_world_flush(w);
    break;
  }
  if (rc == SCN_OK)
    ++*ok_ops;
}

static void test_rollback_random(void) {
  static scn_entity pool[256];
  for (uint64_t seed = 1; seed <= 25; seed++) {
    fixture a, b;
    build(&a);
    build(&b);
    size_t npool = 0;
    for (int k = 0; k < NE; k++)
      pool[npool++] = a.e[k];
    rng_state = seed * 0x9E3779B97F4A7C15u;
    OK(scn_batch_begin(a.s));
    int ok_ops = 0;
    for (int step = 0; step < 400; step++)
      random_op(&a, pool, &npool, &ok_ops);
    CU_ASSERT_TRUE(ok_ops > 60);
    scn_batch_rollback(a.s);
    expect_same(&a, &b);
    destroy_fixture(&a);
    destroy_fixture(&b);
  }
}

static void test_rollback_many_relinks(void) {
  /* enough structural change inside the batch that a flush re-sorts the arrays */
  fixture a, b;
  build(&a);
  build(&b);
  scn_world_stats st0, st1;
  scn_world_get_stats(a.w1, &st0);
  OK(scn_batch_begin(a.s));
  for (int k = 0; k < 120; k++) {
    OK(scn_transform_link(a.w1, a.e[11 + k % 5], a.e[k % 2 ? 4 : 9], SCN_KEEP_WORLD));
    OK(scn_transform_link(a.w1, a.e[11 + k % 5], a.e[10], SCN_KEEP_LOCAL));
  }
  OK(scn_transform_destroy(a.w1, a.e[10], false));
  scn_world_flush(a.w1);
  scn_world_get_stats(a.w1, &st1);
  CU_ASSERT_TRUE(st1.relayouts > st0.relayouts);
  OK(scn_transform_destroy(a.w1, a.e[11], true));
  scn_batch_rollback(a.s);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

/* ---- commit and state errors -------------------------------------------------------------- */

static void test_commit(void) {
  fixture a, b;
  build(&a);
  build(&b);
  float m[16];
  trs(m, 4, 4, 4, 0, 0, 1, 1, 2);
  fixture *fs[2] = {&a, &b};
  for (int k = 0; k < 2; k++) {
    fixture *f = fs[k];
    if (f == &a)
      OK(scn_batch_begin(f->s));
    scn_entity made;
    OK(scn_entity_create(f->s, 1, &made));
    OK(scn_transform_create(f->w1, made, f->e[0], "made", m));
    OK(scn_transform_set_local(f->w1, f->e[1], m));
    OK(scn_transform_set_world(f->w1, f->e[8], m));
    OK(scn_transform_link(f->w1, f->e[12], f->e[7], SCN_KEEP_WORLD));
    OK(scn_transform_link(f->w1, f->e[2], SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
    OK(scn_transform_rename(f->w1, f->e[2], "free"));
    OK(scn_transform_destroy(f->w1, f->e[10], false));
    OK(scn_transform_destroy(f->w1, f->e[6], true));
    OK(scn_transform_destroy(f->w2, f->e[1], false));
    if (f == &a)
      scn_batch_commit(f->s);
  }
  CU_ASSERT_EQUAL(get(a.w1, a.e[2]).parent, SCN_ENTITY_NONE);
  CU_ASSERT_STRING_EQUAL(get(a.w1, a.e[2]).name, "free");
  CU_ASSERT_FALSE(scn_transform_exists(a.w1, a.e[6]));
  /* a rollback after the commit has nothing to undo */
  scn_batch_rollback(a.s);
  CU_ASSERT_FALSE(scn_transform_exists(a.w1, a.e[6]));
  /* outside a batch, world and entity operations work again */
  OK(scn_world_create(a.s, "later", NULL));
  OK(scn_world_destroy(a.s, "later"));
  /* a second batch after the commit rolls back only its own changes */
  OK(scn_batch_begin(a.s));
  OK(scn_transform_destroy(a.w1, a.e[0], true));
  OK(scn_transform_rename(a.w1, a.e[2], "other"));
  scn_batch_rollback(a.s);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

static void test_state_errors(void) {
  fixture a, b;
  build(&a);
  build(&b);
  CU_ASSERT_FALSE(scn_batch_active(a.s));
  OK(scn_batch_begin(a.s));
  CU_ASSERT_TRUE(scn_batch_active(a.s));
  CU_ASSERT_EQUAL(scn_batch_begin(a.s), SCN_STATE);
  CU_ASSERT_TRUE(scn_batch_active(a.s));
  OK(scn_transform_set_local(a.w1, a.e[0], IDENTITY));
  CU_ASSERT_EQUAL(scn_batch_begin(a.s), SCN_STATE); /* does not reset the undo log */
  CU_ASSERT_EQUAL(scn_world_create(a.s, "new", NULL), SCN_STATE);
  CU_ASSERT_EQUAL(scn_world_destroy(a.s, "two"), SCN_STATE);
  CU_ASSERT_EQUAL(scn_world_destroy(a.s, "missing"), SCN_STATE);
  CU_ASSERT_EQUAL(scn_entity_destroy(a.s, a.e[0]), SCN_STATE);
  CU_ASSERT_EQUAL(scn_entity_destroy(a.s, a.e[39]), SCN_STATE);
  uint32_t gen[1] = {0};
  uint8_t alive[1] = {1};
  CU_ASSERT_EQUAL(scn_entity_restore(a.s, 1, gen, alive), SCN_STATE);
  CU_ASSERT_EQUAL(scn_world_count(a.s), 2);
  CU_ASSERT_PTR_NULL(scn_world_find(a.s, "new"));
  CU_ASSERT_TRUE(scn_entity_alive(a.s, a.e[0]));
  CU_ASSERT_TRUE(scn_transform_exists(a.w2, a.e[20]));
  scn_batch_rollback(a.s);
  CU_ASSERT_FALSE(scn_batch_active(a.s));
  expect_same(&a, &b);
  OK(scn_batch_begin(a.s));
  scn_batch_commit(a.s);
  CU_ASSERT_FALSE(scn_batch_active(a.s));
  /* after the batch they work */
  OK(scn_world_create(a.s, "new", NULL));
  OK(scn_entity_destroy(a.s, a.e[39]));
  destroy_fixture(&a);
  destroy_fixture(&b);
}

static void test_events_rolled_back(void) {
  fixture a, b;
  build(&a);
  build(&b);
  int n0 = 0, n = 0;
  scn_world_visit_events(a.w1, 0, count_event, &n0);
  CU_ASSERT_TRUE(n0 >= 1);
  OK(scn_batch_begin(a.s));
  OK(scn_transform_link(a.w1, a.e[7], a.e[0], SCN_KEEP_LOCAL));
  OK(scn_transform_destroy(a.w1, a.e[10], false));
  OK(scn_transform_destroy(a.w1, a.e[6], true));
  OK(scn_transform_create(a.w1, a.e[6], SCN_ENTITY_NONE, NULL, NULL));
  /* 1 relink; 5 relinks and a destroy; 3 destroys; and the creation */
  scn_world_visit_events(a.w1, 0, count_event, &n);
  CU_ASSERT_EQUAL(n, n0 + 1 + 6 + 3 + 1);
  scn_batch_rollback(a.s);
  n = 0;
  scn_world_visit_events(a.w1, 0, count_event, &n);
  CU_ASSERT_EQUAL(n, n0);
  expect_same(&a, &b);
  destroy_fixture(&a);
  destroy_fixture(&b);
}

int t_register_core_batch(void) {
  static const t_test tests[] = {
      {"rollback of entity creation", test_rollback_entity_create},
      {"rollback of transform creation", test_rollback_transform_create},
      {"rollback of set_local and set_world", test_rollback_set_local_world},
      {"rollback of link and unlink", test_rollback_link},
      {"rollback of rename", test_rollback_rename},
      {"rollback of non-recursive destroy", test_rollback_destroy},
      {"rollback of recursive destroy", test_rollback_destroy_recursive},
      {"rollback of random mixed batches", test_rollback_random},
      {"rollback across a relayout", test_rollback_many_relinks},
      {"commit keeps the changes", test_commit},
      {"state errors inside a batch", test_state_errors},
      {"rollback drops the batch's events", test_events_rolled_back},
  };
  return T_ADD_SUITE("core_batch", NULL, NULL, tests);
}

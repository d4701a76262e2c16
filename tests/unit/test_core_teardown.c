/* Unit tests of ending many things in one step: scn_entity_destroy_many (one after another, all
 * or nothing) and a world destroyed with the entities only it used (scn_world_orphans,
 * scn_world_destroy_with). */
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OK(x) CU_ASSERT_EQUAL_FATAL((x), SCN_OK)

static scn_entity new_entity(scn_scene *s) {
  scn_entity e = SCN_ENTITY_NONE;
  OK(scn_entity_create(s, 1, &e));
  return e;
}

static void translation(float m[16], float x, float y, float z) {
  static const float id[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  memcpy(m, id, sizeof id);
  m[12] = x, m[13] = y, m[14] = z;
}

typedef struct dump {
  scn_world *w;
  char text[8192];
  size_t len;
} dump;

static void dump_one(void *ud, scn_entity e, scn_entity parent, const char *name,
                     const float *local) {
  dump *d = ud;
  scn_transform_info info;
  scn_transform_get(d->w, e, &info);
  int n = snprintf(d->text + d->len, sizeof d->text - d->len, "%llu<%llu %s", (unsigned long long)e,
                   (unsigned long long)parent, name ? name : "-");
  for (int k = 0; n > 0 && k < 16; k++)
    n += snprintf(d->text + d->len + n, sizeof d->text - d->len - n, " %a/%a", (double)local[k],
                  (double)info.world[k]);
  if (n > 0 && d->len + (size_t)n + 1 < sizeof d->text) {
    d->len += (size_t)n;
    d->text[d->len++] = '\n';
    d->text[d->len] = '\0';
  }
}

/* Everything observable of the scene: its worlds' transforms in order, with names, parents and
 * both matrices bit for bit, which of ids are alive, and the events logged. */
static char *scene_text(scn_scene *s, const scn_entity *ids, size_t n) {
  char *out = calloc(1, 65536);
  size_t len = 0;
  for (size_t i = 0; i < scn_world_count(s); i++) {
    dump d = {.w = scn_world_at(s, i)};
    scn_world_visit_transforms(d.w, dump_one, &d);
    len += (size_t)snprintf(out + len, 65536 - len, "[%s]\n%s", scn_world_name(d.w), d.text);
  }
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(out + len, 65536 - len, "%llu:%d ", (unsigned long long)ids[i],
                            scn_entity_alive(s, ids[i]));
  snprintf(out + len, 65536 - len, "\nentities %zu", scn_entity_count(s));
  return out;
}

static void count_event(void *ud, scn_entity e, scn_event_kind kind) {
  (void)e, (void)kind;
  ++*(int *)ud;
}

static int events_of(scn_scene *s) {
  int n = 0;
  for (size_t i = 0; i < scn_world_count(s); i++)
    scn_world_visit_events(scn_world_at(s, i), 0, count_event, &n);
  return n;
}

/* A car with two named wheels in world "one", the car also in world "two", and a loose
 * entity; each world keeps its events. */
typedef struct garage {
  scn_scene *s;
  scn_world *one, *two;
  scn_entity car, fl, fr, loose, all[4];
} garage;

static void garage_build(garage *g) {
  g->s = scn_scene_new(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g->s);
  OK(scn_world_create(g->s, "one", &g->one));
  OK(scn_world_create(g->s, "two", &g->two));
  scn_world_keep_events(g->one, true);
  scn_world_keep_events(g->two, true);
  g->car = new_entity(g->s), g->fl = new_entity(g->s), g->fr = new_entity(g->s);
  g->loose = new_entity(g->s);
  float m[16];
  translation(m, 10, 0, 0);
  OK(scn_transform_create(g->one, g->car, SCN_ENTITY_NONE, "car", m));
  translation(m, 1, 0, -1);
  OK(scn_transform_create(g->one, g->fl, g->car, "fl", m));
  translation(m, 1, 0, 1);
  OK(scn_transform_create(g->one, g->fr, g->car, "fr", m));
  OK(scn_transform_create(g->two, g->car, SCN_ENTITY_NONE, NULL, NULL));
  scn_entity all[4] = {g->car, g->fl, g->fr, g->loose};
  memcpy(g->all, all, sizeof all);
}

static void test_destroy_many(void) {
  garage g;
  garage_build(&g);
  scn_transform_info before, after;
  OK(scn_transform_get(g.one, g.fl, &before));
  scn_entity ids[] = {g.car, g.fr, g.loose};
  size_t failed = 99;
  OK(scn_entity_destroy_many(g.s, ids, 3, &failed));
  for (int i = 0; i < 3; i++)
    CU_ASSERT_FALSE(scn_entity_alive(g.s, ids[i]));
  CU_ASSERT_TRUE(scn_entity_alive(g.s, g.fl));
  CU_ASSERT_EQUAL(scn_entity_count(g.s), 1);
  CU_ASSERT_EQUAL(scn_world_transform_count(g.one), 1);
  CU_ASSERT_EQUAL(scn_world_transform_count(g.two), 0);
  /* the wheel left became a root and kept its world matrix, as with one destroy */
  OK(scn_transform_get(g.one, g.fl, &after));
  CU_ASSERT_EQUAL(after.parent, SCN_ENTITY_NONE);
  CU_ASSERT_EQUAL(memcmp(after.world, before.world, sizeof after.world), 0);
  CU_ASSERT_EQUAL(memcmp(after.local, before.world, sizeof after.local), 0);
  /* the ids are stale: a new entity reuses a slot under a new generation */
  scn_entity fresh[3];
  OK(scn_entity_create(g.s, 3, fresh));
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++)
      CU_ASSERT_NOT_EQUAL(fresh[i], ids[k]);
  CU_ASSERT_EQUAL(scn_entity_destroy_many(g.s, ids, 1, &failed), SCN_NOT_FOUND);
  /* an empty list destroys nothing */
  OK(scn_entity_destroy_many(g.s, NULL, 0, &failed));
  CU_ASSERT_EQUAL(scn_entity_count(g.s), 4);
  scn_scene_free(g.s);
}

/* An unknown id, an id listed twice, or a clash of root names at any point of the sequence:
 * the whole call fails, naming the entity, and nothing changed (no event either). */
static void test_destroy_many_atomic(void) {
  garage g;
  garage_build(&g);
  scn_entity stale = new_entity(g.s);
  OK(scn_entity_destroy(g.s, stale));
  char *before = scene_text(g.s, g.all, 4);
  int events = events_of(g.s);
  size_t failed = 99;
  scn_entity unknown[] = {g.fl, g.loose, stale, g.car};
  CU_ASSERT_EQUAL(scn_entity_destroy_many(g.s, unknown, 4, &failed), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(failed, 2);
  scn_entity twice[] = {g.fr, g.car, g.fr};
  CU_ASSERT_EQUAL(scn_entity_destroy_many(g.s, twice, 3, &failed), SCN_INVALID);
  CU_ASSERT_EQUAL(failed, 2);
  scn_entity none[] = {SCN_ENTITY_NONE};
  CU_ASSERT_EQUAL(scn_entity_destroy_many(g.s, none, 1, &failed), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(failed, 0);
  /* A root named "fl" in world one: destroying the car first would make its wheel "fl" a root
   * beside it. The wheel first, then the car, goes through. */
  scn_entity root_fl = new_entity(g.s);
  OK(scn_transform_create(g.one, root_fl, SCN_ENTITY_NONE, "fl", NULL));
  free(before);
  before = scene_text(g.s, g.all, 4);
  events = events_of(g.s);
  scn_entity clash[] = {g.loose, g.fr, g.car, g.fl};
  CU_ASSERT_EQUAL(scn_entity_destroy_many(g.s, clash, 4, &failed), SCN_EXISTS);
  CU_ASSERT_EQUAL(failed, 2);
  char *after = scene_text(g.s, g.all, 4);
  CU_ASSERT_STRING_EQUAL(after, before);
  CU_ASSERT_EQUAL(events_of(g.s), events);
  free(after);
  scn_entity in_order[] = {g.loose, g.fr, g.fl, g.car};
  OK(scn_entity_destroy_many(g.s, in_order, 4, &failed));
  CU_ASSERT_EQUAL(scn_entity_count(g.s), 1);
  CU_ASSERT_EQUAL(scn_world_transform_count(g.one), 1);
  /* refused inside a batch */
  OK(scn_batch_begin(g.s));
  CU_ASSERT_EQUAL(scn_entity_destroy_many(g.s, &root_fl, 1, &failed), SCN_STATE);
  scn_batch_rollback(g.s);
  CU_ASSERT_TRUE(scn_entity_alive(g.s, root_fl));
  free(before);
  scn_scene_free(g.s);
}

/* In a ranged scene (a cluster's) the ids are retired, as by one destroy. */
static void test_destroy_many_ranged(void) {
  scn_scene *s = scn_scene_new(NULL);
  OK(scn_entity_use_ranges(s));
  OK(scn_entity_add_slots(s, 100, 4));
  scn_entity ids[4];
  OK(scn_entity_create(s, 2, ids));
  size_t failed;
  OK(scn_entity_destroy_many(s, ids, 2, &failed));
  CU_ASSERT_EQUAL(scn_entity_slots_left(s), 2);
  OK(scn_entity_create(s, 2, ids + 2));
  CU_ASSERT_EQUAL(ids[2], 102);
  CU_ASSERT_EQUAL(ids[3], 103);
  scn_scene_free(s);
}

static void test_world_orphans(void) {
  garage g;
  garage_build(&g);
  scn_entity out[8];
  /* the wheels are only in world one; the car is in two as well; the loose one is nowhere */
  CU_ASSERT_EQUAL(scn_world_orphans(g.one, out), 2);
  scn_entity lo = g.fl < g.fr ? g.fl : g.fr, hi = g.fl < g.fr ? g.fr : g.fl;
  CU_ASSERT_EQUAL(out[0], lo);
  CU_ASSERT_EQUAL(out[1], hi);
  CU_ASSERT_EQUAL(scn_world_orphans(g.two, out), 0);
  /* one that is not an orphan is refused, and so is an unknown world; nothing changes */
  char *before = scene_text(g.s, g.all, 4);
  size_t failed = 99;
  scn_entity with_car[] = {g.fl, g.car};
  CU_ASSERT_EQUAL(scn_world_destroy_with(g.s, "one", with_car, 2, &failed), SCN_STATE);
  CU_ASSERT_EQUAL(failed, 1);
  CU_ASSERT_EQUAL(scn_world_destroy_with(g.s, "three", out, 0, &failed), SCN_NOT_FOUND);
  scn_entity twice[] = {g.fl, g.fl};
  CU_ASSERT_EQUAL(scn_world_destroy_with(g.s, "one", twice, 2, &failed), SCN_INVALID);
  char *after = scene_text(g.s, g.all, 4);
  CU_ASSERT_STRING_EQUAL(after, before);
  free(before);
  free(after);

  CU_ASSERT_EQUAL(scn_world_orphans(g.one, out), 2);
  OK(scn_world_destroy_with(g.s, "one", out, 2, &failed));
  CU_ASSERT_PTR_NULL(scn_world_find(g.s, "one"));
  CU_ASSERT_FALSE(scn_entity_alive(g.s, g.fl));
  CU_ASSERT_FALSE(scn_entity_alive(g.s, g.fr));
  CU_ASSERT_TRUE(scn_entity_alive(g.s, g.car));
  CU_ASSERT_TRUE(scn_entity_alive(g.s, g.loose));
  CU_ASSERT_EQUAL(scn_world_count(g.s), 1);
  CU_ASSERT_EQUAL(scn_entity_count(g.s), 2);
  /* the car is an orphan of world two now */
  CU_ASSERT_EQUAL(scn_world_orphans(g.two, out), 1);
  CU_ASSERT_EQUAL(out[0], g.car);
  OK(scn_world_destroy_with(g.s, "two", out, 1, &failed));
  CU_ASSERT_EQUAL(scn_entity_count(g.s), 1);
  CU_ASSERT_EQUAL(scn_world_count(g.s), 0);
  scn_scene_free(g.s);
}

int t_register_core_teardown(void) {
  static const t_test tests[] = {
      {"destroy many: every world, children become roots, stale ids", test_destroy_many},
      {"destroy many: all or nothing, in order", test_destroy_many_atomic},
      {"destroy many in a ranged scene retires the ids", test_destroy_many_ranged},
      {"a world destroyed with the entities only it used", test_world_orphans},
  };
  return T_ADD_SUITE("core_teardown", NULL, NULL, tests);
}

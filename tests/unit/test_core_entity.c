/* Unit tests of the global entity registry: creation, stale ids, limits, destroy across worlds
 * and the persistence accessors. */
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#define OK(x) CU_ASSERT_EQUAL_FATAL((x), SCN_OK)

static const float IDENTITY[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

static void translation(float m[16], float x, float y, float z) {
  memcpy(m, IDENTITY, sizeof IDENTITY);
  m[12] = x, m[13] = y, m[14] = z;
}

static bool mat_bits_eq(const float a[16], const float b[16]) { return memcmp(a, b, 64) == 0; }

static scn_entity new_entity(scn_scene *s) {
  scn_entity e = SCN_ENTITY_NONE;
  CU_ASSERT_EQUAL_FATAL(scn_entity_create(s, 1, &e), SCN_OK);
  return e;
}

static void count_event(void *ud, scn_entity e, scn_event_kind kind) {
  (void)e, (void)kind;
  ++*(int *)ud;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void test_create_many(void) {
  scn_scene *s = scn_scene_new(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(scn_entity_count(s), 0);
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), 0);
  enum { N = 20000 };
  scn_entity *ids = malloc(sizeof *ids * N);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
  OK(scn_entity_create(s, N, ids));
  CU_ASSERT_EQUAL(scn_entity_count(s), N);
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), N);
  bool all_ok = true;
  for (size_t i = 0; i < N; i++)
    if (ids[i] == SCN_ENTITY_NONE || ids[i] > SCN_ENTITY_MAX || !scn_entity_alive(s, ids[i]))
      all_ok = false;
  CU_ASSERT_TRUE(all_ok);
  qsort(ids, N, sizeof *ids, cmp_u64);
  bool unique = true;
  for (size_t i = 1; i < N; i++)
    if (ids[i] == ids[i - 1])
      unique = false;
  CU_ASSERT_TRUE(unique);

  /* count 0 creates nothing and succeeds */
  OK(scn_entity_create(s, 0, NULL));
  CU_ASSERT_EQUAL(scn_entity_count(s), N);

  /* a second batch continues, still unique */
  scn_entity more[3];
  OK(scn_entity_create(s, 3, more));
  CU_ASSERT_EQUAL(scn_entity_count(s), N + 3);
  for (int k = 0; k < 3; k++)
    CU_ASSERT_PTR_NULL(bsearch(&more[k], ids, N, sizeof *ids, cmp_u64));
  CU_ASSERT_NOT_EQUAL(more[0], more[1]);
  CU_ASSERT_NOT_EQUAL(more[1], more[2]);

  /* ids that were never handed out, or out of range, are not alive */
  CU_ASSERT_FALSE(scn_entity_alive(s, SCN_ENTITY_NONE));
  CU_ASSERT_FALSE(scn_entity_alive(s, SCN_ENTITY_MAX));
  CU_ASSERT_FALSE(scn_entity_alive(s, SCN_ENTITY_MAX + 1));
  CU_ASSERT_FALSE(scn_entity_alive(s, UINT64_MAX));
  CU_ASSERT_FALSE(scn_entity_alive(s, (scn_entity)N + 100));
  CU_ASSERT_FALSE(scn_entity_alive(s, ids[0] | (UINT64_C(1) << 32))); /* wrong generation */
  free(ids);
  scn_scene_free(s);
}

static void test_stale_ids(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_entity a = new_entity(s), b = new_entity(s), c = new_entity(s);
  CU_ASSERT_EQUAL(scn_entity_count(s), 3);
  OK(scn_entity_destroy(s, b));
  CU_ASSERT_FALSE(scn_entity_alive(s, b));
  CU_ASSERT_TRUE(scn_entity_alive(s, a));
  CU_ASSERT_TRUE(scn_entity_alive(s, c));
  CU_ASSERT_EQUAL(scn_entity_count(s), 2);
  CU_ASSERT_EQUAL(scn_entity_destroy(s, b), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_entity_count(s), 2);

  /* the slot is reused with a new id; the old one stays dead */
  scn_entity d = new_entity(s);
  CU_ASSERT_NOT_EQUAL(d, b);
  CU_ASSERT_EQUAL((uint32_t)d, (uint32_t)b); /* same slot, new generation */
  CU_ASSERT_TRUE(d <= SCN_ENTITY_MAX);
  CU_ASSERT_TRUE(scn_entity_alive(s, d));
  CU_ASSERT_FALSE(scn_entity_alive(s, b));
  CU_ASSERT_EQUAL(scn_entity_destroy(s, b), SCN_NOT_FOUND);
  CU_ASSERT_TRUE(scn_entity_alive(s, d));
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), 3);

  /* many cycles through one slot: every id differs from every earlier one */
  scn_entity seen[200];
  seen[0] = d;
  for (int k = 1; k < 200; k++) {
    OK(scn_entity_destroy(s, seen[k - 1]));
    seen[k] = new_entity(s);
    CU_ASSERT_EQUAL((uint32_t)seen[k], (uint32_t)b);
    for (int j = 0; j < k; j++) {
      CU_ASSERT_NOT_EQUAL(seen[k], seen[j]);
      CU_ASSERT_FALSE(scn_entity_alive(s, seen[j]));
    }
    CU_ASSERT_FALSE(scn_entity_alive(s, b));
  }
  CU_ASSERT_EQUAL(scn_entity_count(s), 3);

  /* a stale id is NOT_FOUND for transforms too */
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  CU_ASSERT_EQUAL(scn_transform_create(w, b, SCN_ENTITY_NONE, NULL, NULL), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_create(w, seen[100], SCN_ENTITY_NONE, NULL, NULL), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 0);

  CU_ASSERT_EQUAL(scn_entity_destroy(s, SCN_ENTITY_NONE), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_entity_destroy(s, UINT64_MAX), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_entity_destroy(s, a + 1000), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_entity_count(s), 3);
  scn_scene_free(s);
}

static void test_max_entities(void) {
  scn_limits lim = {0, 0, 10};
  scn_scene *s = scn_scene_new(&lim);
  CU_ASSERT_EQUAL(scn_scene_limits(s)->max_entities, 10);
  CU_ASSERT_EQUAL(scn_scene_limits(s)->max_worlds, 1024);
  CU_ASSERT_EQUAL(scn_scene_limits(s)->max_transforms, 10000000);
  scn_entity ids[16], probe[16];
  OK(scn_entity_create(s, 7, ids));
  memset(probe, 0, sizeof probe);
  CU_ASSERT_EQUAL(scn_entity_create(s, 4, probe), SCN_LIMIT);
  CU_ASSERT_EQUAL(scn_entity_count(s), 7);
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), 7);
  for (int k = 0; k < 4; k++)
    CU_ASSERT_EQUAL(probe[k], SCN_ENTITY_NONE);

  /* nothing was created: the next id is the one that would have come anyway */
  scn_scene *twin = scn_scene_new(&lim);
  scn_entity tids[16];
  OK(scn_entity_create(twin, 7, tids));
  OK(scn_entity_create(s, 3, ids + 7));
  OK(scn_entity_create(twin, 3, tids + 7));
  CU_ASSERT_TRUE(memcmp(ids, tids, sizeof(scn_entity) * 10) == 0);
  CU_ASSERT_EQUAL(scn_entity_count(s), 10);
  CU_ASSERT_EQUAL(scn_entity_create(s, 1, probe), SCN_LIMIT);
  CU_ASSERT_EQUAL(scn_entity_count(s), 10);

  /* the limit counts entities alive at once */
  OK(scn_entity_destroy(s, ids[0]));
  OK(scn_entity_destroy(s, ids[1]));
  CU_ASSERT_EQUAL(scn_entity_create(s, 3, probe), SCN_LIMIT);
  CU_ASSERT_EQUAL(scn_entity_count(s), 8);
  OK(scn_entity_create(s, 2, probe));
  CU_ASSERT_EQUAL(scn_entity_count(s), 10);
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), 10);
  CU_ASSERT_FALSE(scn_entity_alive(s, ids[0]));
  CU_ASSERT_FALSE(scn_entity_alive(s, ids[1]));
  CU_ASSERT_TRUE(scn_entity_alive(s, probe[0]));
  CU_ASSERT_TRUE(scn_entity_alive(s, probe[1]));
  scn_scene_free(twin);
  scn_scene_free(s);
}

static void test_destroy_across_worlds(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w1, *w2;
  OK(scn_world_create(s, "one", &w1));
  OK(scn_world_create(s, "two", &w2));
  scn_entity r = new_entity(s), p = new_entity(s), c1 = new_entity(s), c2 = new_entity(s),
             g = new_entity(s);
  float m[16];
  /* world one: r -> p -> {c1 -> g, c2} */
  translation(m, 1, 0, 0);
  OK(scn_transform_create(w1, r, SCN_ENTITY_NONE, "r", m));
  translation(m, 0, 2, 0);
  OK(scn_transform_create(w1, p, r, "p", m));
  translation(m, 0, 0, 3);
  OK(scn_transform_create(w1, c1, p, "c1", m));
  OK(scn_transform_create(w1, c2, p, NULL, m));
  translation(m, 5, 5, 5);
  OK(scn_transform_create(w1, g, c1, "g", m));
  /* world two: p is a root with c2 under it */
  translation(m, 7, 0, 0);
  OK(scn_transform_create(w2, p, SCN_ENTITY_NONE, "p", m));
  OK(scn_transform_create(w2, c2, p, "c2", m));
  CU_ASSERT_EQUAL(scn_scene_transform_count(s), 7);

  scn_transform_info before_c1, before_c2, before_g, before_c2b, after;
  OK(scn_transform_get(w1, c1, &before_c1));
  OK(scn_transform_get(w1, c2, &before_c2));
  OK(scn_transform_get(w1, g, &before_g));
  OK(scn_transform_get(w2, c2, &before_c2b));
  CU_ASSERT_EQUAL(before_c1.world[12], 1);
  CU_ASSERT_EQUAL(before_c1.world[13], 2);
  CU_ASSERT_EQUAL(before_c1.world[14], 3);

  OK(scn_entity_destroy(s, p));
  CU_ASSERT_FALSE(scn_entity_alive(s, p));
  CU_ASSERT_EQUAL(scn_entity_count(s), 4);
  CU_ASSERT_FALSE(scn_transform_exists(w1, p));
  CU_ASSERT_FALSE(scn_transform_exists(w2, p));
  CU_ASSERT_EQUAL(scn_world_transform_count(w1), 4);
  CU_ASSERT_EQUAL(scn_world_transform_count(w2), 1);
  CU_ASSERT_EQUAL(scn_scene_transform_count(s), 5);

  /* children became roots keeping their world matrices (their local is that world) */
  OK(scn_transform_get(w1, c1, &after));
  CU_ASSERT_EQUAL(after.parent, SCN_ENTITY_NONE);
  CU_ASSERT_STRING_EQUAL(after.name, "c1");
  CU_ASSERT_TRUE(mat_bits_eq(after.world, before_c1.world));
  CU_ASSERT_TRUE(mat_bits_eq(after.local, before_c1.world));
  OK(scn_transform_get(w1, c2, &after));
  CU_ASSERT_EQUAL(after.parent, SCN_ENTITY_NONE);
  CU_ASSERT_PTR_NULL(after.name);
  CU_ASSERT_TRUE(mat_bits_eq(after.world, before_c2.world));
  OK(scn_transform_get(w1, g, &after));
  CU_ASSERT_EQUAL(after.parent, c1);
  CU_ASSERT_TRUE(mat_bits_eq(after.world, before_g.world));
  OK(scn_transform_get(w2, c2, &after));
  CU_ASSERT_EQUAL(after.parent, SCN_ENTITY_NONE);
  CU_ASSERT_STRING_EQUAL(after.name, "c2");
  CU_ASSERT_TRUE(mat_bits_eq(after.world, before_c2b.world));
  size_t n = 99;
  scn_entity kids[4];
  OK(scn_transform_children(w1, r, kids, 4, &n));
  CU_ASSERT_EQUAL(n, 0);

  /* the new roots are findable by name, the old path is gone */
  scn_entity found;
  OK(scn_transform_find(w1, "c1/g", 4, &found));
  CU_ASSERT_EQUAL(found, g);
  CU_ASSERT_EQUAL(scn_transform_find(w1, "r/p", 3, &found), SCN_NOT_FOUND);

  /* an entity without any transform is destroyed just the same */
  scn_entity lone = new_entity(s);
  OK(scn_entity_destroy(s, lone));
  CU_ASSERT_FALSE(scn_entity_alive(s, lone));

  /* a destroyed entity's transform cannot come back */
  CU_ASSERT_EQUAL(scn_transform_create(w1, p, SCN_ENTITY_NONE, NULL, NULL), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_link(w1, c1, p, SCN_KEEP_LOCAL), SCN_NOT_FOUND);
  scn_scene_free(s);
}

static void test_destroy_name_clash(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w1, *w2;
  OK(scn_world_create(s, "one", &w1));
  OK(scn_world_create(s, "two", &w2));
  scn_entity p = new_entity(s), kid = new_entity(s), other = new_entity(s), root_x = new_entity(s);
  float m[16];
  translation(m, 1, 2, 3);
  /* world one is fine: p -> kid("x"), no root named "x" */
  OK(scn_transform_create(w1, p, SCN_ENTITY_NONE, "p", m));
  OK(scn_transform_create(w1, kid, p, "x", m));
  /* world two would clash: p -> other("x") and a root named "x" */
  OK(scn_transform_create(w2, p, SCN_ENTITY_NONE, NULL, m));
  OK(scn_transform_create(w2, other, p, "x", m));
  OK(scn_transform_create(w2, root_x, SCN_ENTITY_NONE, "x", NULL));

  scn_transform_info i1, i2, i3, after;
  OK(scn_transform_get(w1, kid, &i1));
  OK(scn_transform_get(w2, other, &i2));
  OK(scn_transform_get(w1, p, &i3));
  int events_before = 0;
  scn_world_visit_events(w1, 0, count_event, &events_before);
  scn_world_visit_events(w2, 0, count_event, &events_before);
  CU_ASSERT_EQUAL(scn_entity_destroy(s, p), SCN_EXISTS);
  /* nothing changed anywhere */
  CU_ASSERT_TRUE(scn_entity_alive(s, p));
  CU_ASSERT_EQUAL(scn_entity_count(s), 4);
  CU_ASSERT_EQUAL(scn_world_transform_count(w1), 2);
  CU_ASSERT_EQUAL(scn_world_transform_count(w2), 3);
  OK(scn_transform_get(w1, kid, &after));
  CU_ASSERT_EQUAL(after.parent, p);
  CU_ASSERT_TRUE(mat_bits_eq(after.local, i1.local));
  CU_ASSERT_TRUE(mat_bits_eq(after.world, i1.world));
  OK(scn_transform_get(w2, other, &after));
  CU_ASSERT_EQUAL(after.parent, p);
  CU_ASSERT_TRUE(mat_bits_eq(after.local, i2.local));
  OK(scn_transform_get(w1, p, &after));
  CU_ASSERT_STRING_EQUAL(after.name, "p");
  CU_ASSERT_TRUE(mat_bits_eq(after.local, i3.local));
  scn_entity found;
  OK(scn_transform_find(w1, "p/x", 3, &found));
  CU_ASSERT_EQUAL(found, kid);
  /* the check of world one left no partial effects: no new events in either world */
  int events = 0;
  scn_world_visit_events(w1, 0, count_event, &events);
  scn_world_visit_events(w2, 0, count_event, &events);
  CU_ASSERT_EQUAL(events, events_before);

  /* with the clash gone, the destroy goes through in both worlds */
  OK(scn_transform_rename(w2, root_x, "y"));
  OK(scn_entity_destroy(s, p));
  CU_ASSERT_FALSE(scn_entity_alive(s, p));
  OK(scn_transform_get(w2, other, &after));
  CU_ASSERT_EQUAL(after.parent, SCN_ENTITY_NONE);
  CU_ASSERT_TRUE(mat_bits_eq(after.world, i2.world));
  OK(scn_transform_find(w2, "x", 1, &found));
  CU_ASSERT_EQUAL(found, other);
  OK(scn_transform_find(w1, "x", 1, &found));
  CU_ASSERT_EQUAL(found, kid);

  /* a child may take its destroyed parent's own root name */
  scn_entity q = new_entity(s), qk = new_entity(s);
  OK(scn_transform_create(w1, q, SCN_ENTITY_NONE, "q", NULL));
  OK(scn_transform_create(w1, qk, q, "q", NULL));
  OK(scn_entity_destroy(s, q));
  OK(scn_transform_find(w1, "q", 1, &found));
  CU_ASSERT_EQUAL(found, qk);
  scn_scene_free(s);
}

static void test_slot_registry(void) {
  scn_scene *s = scn_scene_new(NULL);
  bool alive = true;
  CU_ASSERT_EQUAL(scn_entity_slot_id(s, 0, &alive), SCN_ENTITY_NONE);
  CU_ASSERT_FALSE(alive);
  alive = true;
  CU_ASSERT_EQUAL(scn_entity_slot_id(s, 1, &alive), SCN_ENTITY_NONE);
  CU_ASSERT_FALSE(alive);

  scn_entity e[4];
  OK(scn_entity_create(s, 4, e));
  OK(scn_entity_destroy(s, e[1]));
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), 4);
  for (uint32_t slot = 1; slot <= 4; slot++) {
    scn_entity id = scn_entity_slot_id(s, slot, &alive);
    CU_ASSERT_EQUAL((uint32_t)id, slot);
    if (slot == 2) {
      CU_ASSERT_FALSE(alive);
      CU_ASSERT_NOT_EQUAL(id, e[1]); /* the slot's generation moved on */
      CU_ASSERT_FALSE(scn_entity_alive(s, id));
    } else {
      CU_ASSERT_TRUE(alive);
      CU_ASSERT_EQUAL(id, e[slot - 1]);
    }
  }
  alive = true;
  CU_ASSERT_EQUAL(scn_entity_slot_id(s, 5, &alive), SCN_ENTITY_NONE);
  CU_ASSERT_FALSE(alive);
  /* the next entity reuses slot 2 with exactly the generation slot_id reported */
  scn_entity expect = scn_entity_slot_id(s, 2, &alive);
  scn_entity again = new_entity(s);
  CU_ASSERT_EQUAL(again, expect);
  scn_scene_free(s);
}

static void test_restore(void) {
  /* Round trip: save the registry of one scene, restore it into a fresh one. */
  scn_scene *a = scn_scene_new(NULL);
  scn_entity e[6];
  OK(scn_entity_create(a, 6, e));
  OK(scn_entity_destroy(a, e[4]));
  OK(scn_entity_destroy(a, e[1]));
  scn_entity e1b = new_entity(a); /* slot of e[1] with a new generation */
  OK(scn_entity_destroy(a, e1b));
  uint32_t n = scn_entity_slot_count(a);
  CU_ASSERT_EQUAL(n, 6);
  uint32_t gens[6];
  uint8_t alive_flags[6];
  for (uint32_t slot = 1; slot <= n; slot++) {
    bool alive;
    scn_entity id = scn_entity_slot_id(a, slot, &alive);
    gens[slot - 1] = (uint32_t)(id >> 32);
    alive_flags[slot - 1] = alive;
  }
  scn_scene *b = scn_scene_new(NULL);
  OK(scn_entity_restore(b, n, gens, alive_flags));
  CU_ASSERT_EQUAL(scn_entity_slot_count(b), 6);
  CU_ASSERT_EQUAL(scn_entity_count(b), scn_entity_count(a));
  CU_ASSERT_EQUAL(scn_entity_count(b), 4);
  for (uint32_t slot = 1; slot <= n; slot++) {
    bool al_a, al_b;
    CU_ASSERT_EQUAL(scn_entity_slot_id(a, slot, &al_a), scn_entity_slot_id(b, slot, &al_b));
    CU_ASSERT_EQUAL(al_a, al_b);
  }
  for (int k = 0; k < 6; k++)
    CU_ASSERT_EQUAL(scn_entity_alive(b, e[k]), scn_entity_alive(a, e[k]));
  CU_ASSERT_FALSE(scn_entity_alive(b, e1b));
  /* both hand out the same ids from here on, lowest free slot first */
  scn_entity na[3], nb[3];
  OK(scn_entity_create(a, 3, na));
  OK(scn_entity_create(b, 3, nb));
  CU_ASSERT_TRUE(memcmp(na, nb, sizeof na) == 0);
  CU_ASSERT_EQUAL((uint32_t)nb[0], 2);
  CU_ASSERT_EQUAL((uint32_t)nb[1], 5);
  CU_ASSERT_EQUAL((uint32_t)nb[2], 7);
  CU_ASSERT_EQUAL(nb[0], (UINT64_C(2) << 32) | 2);
  CU_ASSERT_EQUAL(nb[1], (UINT64_C(1) << 32) | 5);
  CU_ASSERT_EQUAL(nb[2], 7);

  /* only on a scene without entities */
  CU_ASSERT_EQUAL(scn_entity_restore(b, n, gens, alive_flags), SCN_STATE);
  scn_scene *c = scn_scene_new(NULL);
  scn_entity tmp = new_entity(c);
  OK(scn_entity_destroy(c, tmp));
  CU_ASSERT_EQUAL(scn_entity_restore(c, n, gens, alive_flags), SCN_STATE);
  scn_scene_free(c);

  /* not inside a batch */
  scn_scene *d = scn_scene_new(NULL);
  OK(scn_batch_begin(d));
  CU_ASSERT_EQUAL(scn_entity_restore(d, n, gens, alive_flags), SCN_STATE);
  scn_batch_rollback(d);
  CU_ASSERT_EQUAL(scn_entity_slot_count(d), 0);
  OK(scn_entity_restore(d, 0, gens, alive_flags)); /* an empty registry */
  CU_ASSERT_EQUAL(scn_entity_slot_count(d), 0);
  CU_ASSERT_EQUAL(new_entity(d), 1);
  scn_scene_free(d);

  scn_scene_free(a);
  scn_scene_free(b);
}

static void test_restore_retired(void) {
  const uint32_t top = (UINT32_C(1) << 21) - 1; /* the last generation a slot can have */
  scn_scene *s = scn_scene_new(NULL);
  uint32_t gens[3] = {top, UINT32_C(1) << 21, 4};
  uint8_t alive[3] = {1, 0, 0};
  OK(scn_entity_restore(s, 3, gens, alive));
  CU_ASSERT_EQUAL(scn_entity_count(s), 1);
  scn_entity old = ((uint64_t)top << 32) | 1;
  CU_ASSERT_TRUE(old <= SCN_ENTITY_MAX);
  CU_ASSERT_TRUE(scn_entity_alive(s, old));
  bool al = true;
  scn_entity_slot_id(s, 2, &al);
  CU_ASSERT_FALSE(al);

  /* destroying the last generation retires the slot for good */
  OK(scn_entity_destroy(s, old));
  CU_ASSERT_FALSE(scn_entity_alive(s, old));
  scn_entity_slot_id(s, 1, &al);
  CU_ASSERT_FALSE(al);
  scn_entity fresh[3];
  OK(scn_entity_create(s, 3, fresh));
  CU_ASSERT_EQUAL(fresh[0], (UINT64_C(4) << 32) | 3); /* the only free slot */
  CU_ASSERT_EQUAL(fresh[1], 4);                       /* then new slots: 1 and 2 are retired */
  CU_ASSERT_EQUAL(fresh[2], 5);
  for (int k = 0; k < 3; k++)
    CU_ASSERT_TRUE(fresh[k] <= SCN_ENTITY_MAX);
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), 5);
  scn_scene_free(s);

  /* an alive slot beyond the last generation is invalid input */
  scn_scene *t = scn_scene_new(NULL);
  uint32_t bad_gens[2] = {0, UINT32_C(1) << 21};
  uint8_t bad_alive[2] = {1, 1};
  CU_ASSERT_EQUAL(scn_entity_restore(t, 2, bad_gens, bad_alive), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_entity_slot_count(t), 0);
  CU_ASSERT_EQUAL(scn_entity_count(t), 0);
  scn_scene_free(t);
}

/* Ranged mode (a cluster): ids only from the ranges given, a destroyed id retired for good,
 * ids made elsewhere adopted, expected ids made again on replay, created ids recorded, and an
 * entity let go when its group moves away. */
static void test_ranged(void) {
  scn_scene *s = scn_scene_new(NULL);
  CU_ASSERT_FATAL(s != NULL);
  CU_ASSERT_EQUAL(scn_entity_use_ranges(s), SCN_OK);
  scn_entity ids[8];
  CU_ASSERT_EQUAL(scn_entity_create(s, 1, ids), SCN_LIMIT); /* no range yet */
  CU_ASSERT_EQUAL(scn_entity_add_slots(s, 0, 4), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_entity_add_slots(s, 1000, 3), SCN_OK);
  CU_ASSERT_EQUAL(scn_entity_slots_left(s), 3);
  scn_entity_record(s, true);
  CU_ASSERT_EQUAL(scn_entity_create(s, 2, ids), SCN_OK);
  CU_ASSERT_EQUAL(ids[0], 1000);
  CU_ASSERT_EQUAL(ids[1], 1001);
  const scn_entity *rec;
  CU_ASSERT_EQUAL(scn_entity_recorded(s, &rec), 2);
  CU_ASSERT_EQUAL(rec[1], 1001);
  scn_entity_recorded_clear(s);
  CU_ASSERT_EQUAL(scn_entity_recorded(s, &rec), 0);
  /* All or nothing: two asked, one left. */
  CU_ASSERT_EQUAL(scn_entity_create(s, 2, ids + 2), SCN_LIMIT);
  CU_ASSERT_EQUAL(scn_entity_count(s), 2);
  /* Destroyed: retired, never valid again, not handed out again. */
  CU_ASSERT_EQUAL(scn_entity_destroy(s, 1000), SCN_OK);
  CU_ASSERT_FALSE(scn_entity_alive(s, 1000));
  CU_ASSERT_EQUAL(scn_entity_adopt(s, (UINT64_C(1) << 32) | 1000), SCN_EXISTS);
  /* (only the id retired here comes back, and is listed as revived) */
  const scn_entity *revived;
  CU_ASSERT_EQUAL(scn_entity_revived(s, &revived), 0);
  CU_ASSERT_EQUAL(scn_entity_adopt(s, 1000), SCN_OK);
  CU_ASSERT_EQUAL(scn_entity_revived(s, &revived), 1);
  CU_ASSERT_EQUAL(revived[0], 1000);
  scn_entity_revived_clear(s);
  CU_ASSERT_EQUAL(scn_entity_destroy(s, 1000), SCN_OK);
  CU_ASSERT_EQUAL(scn_entity_add_slots(s, 5000, 10), SCN_OK);
  CU_ASSERT_EQUAL(scn_entity_create(s, 2, ids), SCN_OK);
  CU_ASSERT_EQUAL(ids[0], 1002);
  CU_ASSERT_EQUAL(ids[1], 5000);
  /* Adopted with its generation; twice is fine; another generation of a live slot is not. */
  scn_entity far = ((scn_entity)7 << 32) | 70000;
  CU_ASSERT_EQUAL(scn_entity_adopt(s, far), SCN_OK);
  CU_ASSERT_EQUAL(scn_entity_adopt(s, far), SCN_OK);
  CU_ASSERT(scn_entity_alive(s, far));
  CU_ASSERT_EQUAL(scn_entity_adopt(s, ((scn_entity)8 << 32) | 70000), SCN_EXISTS);
  CU_ASSERT_EQUAL(scn_entity_adopt(s, 0), SCN_INVALID);
  /* Expected ids come first, then the ranges; an expected id in use refuses the whole call. */
  scn_entity want[2] = {90001, ((scn_entity)3 << 32) | 90002};
  CU_ASSERT_EQUAL(scn_entity_expect(s, want, 2), SCN_OK);
  CU_ASSERT_EQUAL(scn_entity_create(s, 3, ids), SCN_OK);
  CU_ASSERT_EQUAL(ids[0], 90001);
  CU_ASSERT_EQUAL(ids[1], want[1]);
  CU_ASSERT_EQUAL(ids[2], 5001);
  scn_entity taken = far;
  CU_ASSERT_EQUAL(scn_entity_expect(s, &taken, 1), SCN_OK);
  size_t before = scn_entity_count(s);
  CU_ASSERT_EQUAL(scn_entity_create(s, 1, ids), SCN_EXISTS);
  CU_ASSERT_EQUAL(scn_entity_count(s), before);
  CU_ASSERT_EQUAL(scn_entity_expect(s, NULL, 0), SCN_OK);
  /* A batch rollback gives the slot back to its range. */
  CU_ASSERT_EQUAL(scn_batch_begin(s), SCN_OK);
  CU_ASSERT_EQUAL(scn_entity_create(s, 1, ids), SCN_OK);
  CU_ASSERT_EQUAL(ids[0], 5002);
  scn_batch_rollback(s);
  CU_ASSERT_EQUAL(scn_entity_create(s, 1, ids), SCN_OK);
  CU_ASSERT_EQUAL(ids[0], 5002);
  /* Let go: not alive here, refused while a world uses it, adoptable again. */
  scn_world *w;
  CU_ASSERT_EQUAL(scn_world_create(s, "g.a", &w), SCN_OK);
  CU_ASSERT_EQUAL(scn_transform_create(w, 5002, SCN_ENTITY_NONE, NULL, NULL), SCN_OK);
  CU_ASSERT_EQUAL(scn_entity_forget(s, 5002), SCN_STATE);
  CU_ASSERT_EQUAL(scn_world_destroy(s, "g.a"), SCN_OK);
  CU_ASSERT_EQUAL(scn_entity_forget(s, 5002), SCN_OK);
  CU_ASSERT_FALSE(scn_entity_alive(s, 5002));
  CU_ASSERT_EQUAL(scn_entity_adopt(s, 5002), SCN_OK);
  /* Only on an empty scene, and not on a standalone one. */
  CU_ASSERT_EQUAL(scn_entity_use_ranges(s), SCN_STATE);
  scn_scene *plain = scn_scene_new(NULL);
  CU_ASSERT_EQUAL(scn_entity_adopt(plain, 5), SCN_STATE);
  CU_ASSERT_EQUAL(scn_entity_add_slots(plain, 1, 5), SCN_STATE);
  scn_scene_free(plain);
  scn_scene_free(s);
}

/* A rolled-back creation that reused the highest slot gives it back to the free list: the
 * slot count stays, so the slot's generation is kept (in a snapshot too), and the next
 * creation reuses it as if the rollback never happened. */
static void test_rollback_keeps_highest_free_slot(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_entity ids[3], again;
  OK(scn_entity_create(s, 3, ids));
  OK(scn_entity_destroy(s, ids[2])); /* the highest slot is free now, one generation on */
  OK(scn_batch_begin(s));
  OK(scn_entity_create(s, 1, &again));
  CU_ASSERT_EQUAL(again, (UINT64_C(1) << 32) | 3);
  scn_batch_rollback(s);
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), 3);
  const uint32_t *order;
  CU_ASSERT_EQUAL_FATAL(scn_entity_free_order(s, &order), 1);
  CU_ASSERT_EQUAL(order[0], 3);
  CU_ASSERT_EQUAL(new_entity(s), (UINT64_C(1) << 32) | 3);
  /* A fresh slot rolled back shrinks the count again. */
  OK(scn_batch_begin(s));
  OK(scn_entity_create(s, 2, ids));
  CU_ASSERT_EQUAL(ids[0], 4);
  scn_batch_rollback(s);
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), 3);
  CU_ASSERT_EQUAL(scn_entity_free_order(s, &order), 0);
  CU_ASSERT_EQUAL(new_entity(s), 4);
  scn_scene_free(s);
}

/* Expected ids without ranges (a standalone replay): made exactly, whatever the free list
 * would have given, all or nothing. */
static void test_expect_plain(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_entity ids[5], got[3];
  OK(scn_entity_create(s, 5, ids));
  OK(scn_entity_destroy(s, ids[1]));
  OK(scn_entity_destroy(s, ids[3])); /* free: 2 then 4 (4 reused first) */
  scn_entity want[3] = {(UINT64_C(1) << 32) | 2, 7, (UINT64_C(1) << 32) | 4};
  OK(scn_entity_expect(s, want, 3));
  OK(scn_entity_create(s, 3, got));
  CU_ASSERT_EQUAL(memcmp(got, want, sizeof want), 0);
  CU_ASSERT_EQUAL(scn_entity_slot_count(s), 7);
  CU_ASSERT(scn_entity_alive(s, want[0]) && scn_entity_alive(s, want[1]));
  CU_ASSERT(!scn_entity_alive(s, ids[1]));
  CU_ASSERT_EQUAL(new_entity(s), 6); /* the slot passed over is free */
  /* Refused, with nothing made: a live slot, an id older than its slot, a slot twice. */
  size_t alive = scn_entity_count(s);
  scn_entity busy[2] = {8, 3};
  OK(scn_entity_expect(s, busy, 2));
  CU_ASSERT_EQUAL(scn_entity_create(s, 2, got), SCN_EXISTS);
  OK(scn_entity_destroy(s, want[1])); /* slot 7 is at generation 1 now */
  scn_entity stale = 7;
  OK(scn_entity_expect(s, &stale, 1));
  CU_ASSERT_EQUAL(scn_entity_create(s, 1, got), SCN_INVALID);
  scn_entity twice[2] = {9, 9};
  OK(scn_entity_expect(s, twice, 2));
  CU_ASSERT_EQUAL(scn_entity_create(s, 2, got), SCN_EXISTS);
  CU_ASSERT_EQUAL(scn_entity_count(s), alive - 1);
  CU_ASSERT(!scn_entity_alive(s, 8) && !scn_entity_alive(s, 9));
  OK(scn_entity_expect(s, NULL, 0));
  scn_scene_free(s);
}

int t_register_core_entity(void) {
  static const t_test tests[] = {
      {"create many at once, ids positive and below 2^53", test_create_many},
      {"stale ids stay invalid after slot reuse", test_stale_ids},
      {"max_entities gives LIMIT and creates nothing", test_max_entities},
      {"destroy removes the transform from every world", test_destroy_across_worlds},
      {"destroy refused on a root name clash in any world", test_destroy_name_clash},
      {"slot registry accessors", test_slot_registry},
      {"entity_restore round trip and refusals", test_restore},
      {"entity_restore and retired slots", test_restore_retired},
      {"ranged ids: ranges, retire, adopt, expect, record, forget", test_ranged},
      {"a rollback keeps the highest free slot", test_rollback_keeps_highest_free_slot},
      {"expected ids without ranges", test_expect_plain},
  };
  return T_ADD_SUITE("core_entity", NULL, NULL, tests);
}

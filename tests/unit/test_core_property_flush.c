/* Properties of the core's dirty tracking and flush: along deep chains edited at random, world
 * matrices are never stale (depth-first and scattered layouts); over a wide forest with many dirty
 * nodes, each flush recomputes exactly the dirty subtrees, once. */
#include "core_chain.h"
#include "rng.h"
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void test_deep_chain_depth_first(void) {
  CU_ASSERT(run_chain(7, false));
  CU_ASSERT(run_chain(8, false));
}

static void test_deep_chain_scattered(void) {
  CU_ASSERT(run_chain(9, true));
  CU_ASSERT(run_chain(10, true));
}

/* Many dirty nodes in random order over a wide forest in depth-first layout, ancestors and
 * descendants mixed: each flush recomputes exactly the union of the dirty subtrees, once, and
 * leaves every world matrix equal to its parent's times its local (bit for bit). */
#define FOREST_LEN 6000
static void test_wide_forest_flush(void) {
  rng r = {11};
  static int parent[FOREST_LEN];
  static scn_entity id[FOREST_LEN];
  static unsigned char mark[FOREST_LEN];
  scn_scene *scene = scn_scene_new(NULL);
  scn_world *w = NULL;
  CU_ASSERT_FATAL(scene && scn_world_create(scene, "forest", &w) == SCN_OK);
  CU_ASSERT_FATAL(scn_entity_create(scene, FOREST_LEN, id) == SCN_OK);
  for (int i = 0; i < FOREST_LEN; i++) {
    parent[i] = i < 20 || rng_chance(&r, 0.01) ? -1 : (int)rng_below(&r, (uint32_t)i);
    float m[16];
    small_rigid(&r, m, 2);
    CU_ASSERT_FATAL(scn_transform_create(w, id[i], parent[i] < 0 ? SCN_ENTITY_NONE : id[parent[i]],
                                         NULL, m) == SCN_OK);
  }
  scn_world_relayout(w);
  scn_world_flush(w); /* creation left everything dirty */
  for (int round = 0; round < 40; round++) {
    uint32_t k = 1 + rng_below(&r, round % 2 ? 3000 : 50);
    memset(mark, 0, sizeof mark);
    for (uint32_t x = 0; x < k; x++) {
      int i = (int)rng_below(&r, FOREST_LEN);
      float m[16];
      small_rigid(&r, m, 2);
      CU_ASSERT_FATAL(scn_transform_set_local(w, id[i], m) == SCN_OK);
      mark[i] = 1;
    }
    /* parents were created before their children, so one pass in creation order closes it */
    uint64_t want = 0;
    for (int i = 0; i < FOREST_LEN; i++) {
      if (parent[i] >= 0 && mark[parent[i]])
        mark[i] = 1;
      want += mark[i];
    }
    scn_world_stats before, after;
    scn_world_get_stats(w, &before);
    scn_world_flush(w);
    scn_world_get_stats(w, &after);
    if (after.recomputed - before.recomputed != want)
      fprintf(stderr,
              "core_property wide forest round %d: recomputed %llu, dirty subtrees "
              "hold %llu\n",
              round, (unsigned long long)(after.recomputed - before.recomputed),
              (unsigned long long)want);
    CU_ASSERT_EQUAL(after.recomputed - before.recomputed, want);
    CU_ASSERT_EQUAL(after.relayouts, before.relayouts);
    char err[256];
    int rc = scn_world_check(w, err, sizeof err);
    if (rc != SCN_OK)
      fprintf(stderr, "core_property wide forest round %d: %s\n", round, err);
    CU_ASSERT_EQUAL(rc, SCN_OK);
  }
  scn_scene_free(scene);
}

int t_register_core_property_flush(void) {
  static const t_test tests[] = {
      {"deep chain: world matrices never stale (depth-first layout)", test_deep_chain_depth_first},
      {"deep chain: world matrices never stale (scattered layout)", test_deep_chain_scattered},
      {"wide forest: each flush recomputes the dirty subtrees once", test_wide_forest_flush},
  };
  return T_ADD_SUITE("core_property_flush", NULL, NULL, tests);
}

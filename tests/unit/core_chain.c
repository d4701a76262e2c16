#include "core_chain.h"
#include "rng.h"
#include "scn_core.h"

#include "core_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN_LEN 300
#define CHAIN_ROUNDS 1200

typedef struct chain {
  scn_entity id[CHAIN_LEN];
  int parent[CHAIN_LEN]; /* always below the node's own index: no cycles, depth stays large */
  float local[CHAIN_LEN][16];
} chain;

/* From scratch every time: walk up to the top, multiply back down in double. */
static void chain_world(const chain *c, int i, double out[16]) {
  int path[CHAIN_LEN], n = 0;
  for (int t = i; t >= 0; t = c->parent[t])
    path[n++] = t;
  double l[16];
  mat_of_float(c->local[path[n - 1]], out);
  for (int k = n - 1; k-- > 0;) {
    mat_of_float(c->local[path[k]], l);
    mat_mul(out, l, out);
  }
}

void small_rigid(rng *r, float out[16], double reach) {
  float t[3], axis[3], q[4];
  for (int k = 0; k < 3; k++)
    t[k] = rng_float(r, -reach, reach);
  double len;
  do {
    for (int k = 0; k < 3; k++)
      axis[k] = rng_float(r, -1, 1);
    len = sqrt((double)axis[0] * axis[0] + (double)axis[1] * axis[1] + (double)axis[2] * axis[2]);
  } while (len < 0.1);
  double half = rng_float(r, -0.15, 0.15);
  for (int k = 0; k < 3; k++)
    q[k] = (float)(axis[k] / len * sin(half));
  q[3] = (float)cos(half);
  scn_compose_trs(t, q, NULL, out);
}

/* Per column: translations grow along the chain while the rotation part stays unit-sized. */
static bool chain_close(const float got[16], const double want[16]) {
  for (int c = 0; c < 4; c++) {
    double scale = 0;
    for (int r = 0; r < 4; r++)
      scale = fmax(scale, fabs(want[c * 4 + r]));
    for (int r = 0; r < 4; r++)
      if (!(fabs(got[c * 4 + r] - want[c * 4 + r]) <= 1e-4 * (1 + scale)))
        return false;
  }
  return true;
}

static bool chain_fail(unsigned seed, const char *layout, int round, const char *what, int i) {
  fprintf(stderr, "core_property deep chain (%s layout): seed %u, round %d: %s of node %d\n",
          layout, seed, round, what, i);
  return false;
}

static bool chain_check_node(scn_world *w, const chain *c, int i, unsigned seed, const char *layout,
                             int round) {
  scn_transform_info info;
  double want[16];
  if (scn_transform_get(w, c->id[i], &info) != SCN_OK)
    return chain_fail(seed, layout, round, "get failed", i);
  if (memcmp(info.local, c->local[i], sizeof info.local) != 0)
    return chain_fail(seed, layout, round, "local matrix differs", i);
  if (info.parent != (c->parent[i] < 0 ? SCN_ENTITY_NONE : c->id[c->parent[i]]))
    return chain_fail(seed, layout, round, "parent differs", i);
  chain_world(c, i, want);
  if (!chain_close(info.world, want))
    return chain_fail(seed, layout, round, "stale or wrong world matrix", i);
  return true;
}

/* Builds the chain in depth-first order, or scattered: created as roots in random order and
 * linked afterwards, so the arrays start far from depth-first order. */
static bool chain_build(scn_world *w, chain *c, rng *r, bool scattered) {
  int perm[CHAIN_LEN];
  for (int i = 0; i < CHAIN_LEN; i++) {
    c->parent[i] = i - 1;
    small_rigid(r, c->local[i], 1);
    perm[i] = i;
  }
  if (!scattered) {
    for (int i = 0; i < CHAIN_LEN; i++)
      if (scn_transform_create(w, c->id[i], i ? c->id[i - 1] : SCN_ENTITY_NONE, NULL,
                               c->local[i]) != SCN_OK)
        return false;
    return true;
  }
  for (int i = CHAIN_LEN; i-- > 1;) {
    int j = (int)rng_below(r, (uint32_t)i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int k = 0; k < CHAIN_LEN; k++)
    if (scn_transform_create(w, c->id[perm[k]], SCN_ENTITY_NONE, NULL, c->local[perm[k]]) != SCN_OK)
      return false;
  for (int k = 0; k < CHAIN_LEN; k++)
    if (perm[k] > 0 &&
        scn_transform_link(w, c->id[perm[k]], c->id[perm[k] - 1], SCN_KEEP_LOCAL) != SCN_OK)
      return false;
  return true;
}

/* One round of edits with no reads between them: set_local mostly, some relinks (keep local,
 * to one of the three nodes above, so the tree stays deep), some set_world, whose inverse needs
 * the parent's fresh world matrix while its ancestors are dirty. */
static bool chain_edit(scn_world *w, chain *c, rng *r, unsigned seed, const char *layout,
                       int round) {
  int i = (int)rng_below(r, CHAIN_LEN);
  unsigned u = rng_below(r, 100);
  if (u < 80 || i < 3) {
    small_rigid(r, c->local[i], 1);
    if (scn_transform_set_local(w, c->id[i], c->local[i]) != SCN_OK)
      return chain_fail(seed, layout, round, "set_local failed", i);
  } else if (u < 92) {
    int np = i - 1 - (int)rng_below(r, 3);
    if (scn_transform_link(w, c->id[i], c->id[np], SCN_KEEP_LOCAL) != SCN_OK)
      return chain_fail(seed, layout, round, "link failed", i);
    c->parent[i] = np;
  } else {
    float g[16];
    double gd[16];
    small_rigid(r, g, 20);
    if (scn_transform_set_world(w, c->id[i], g) != SCN_OK)
      return chain_fail(seed, layout, round, "set_world failed", i);
    scn_transform_info info;
    if (scn_transform_get(w, c->id[i], &info) != SCN_OK)
      return chain_fail(seed, layout, round, "get failed", i);
    mat_of_float(g, gd);
    if (!chain_close(info.world, gd))
      return chain_fail(seed, layout, round, "world matrix after set_world", i);
    memcpy(c->local[i], info.local, sizeof info.local);
  }
  return true;
}

static bool chain_relative(scn_world *w, const chain *c, rng *r, unsigned seed, const char *layout,
                           int round) {
  int i = (int)rng_below(r, CHAIN_LEN), j = (int)rng_below(r, CHAIN_LEN);
  float rel[16];
  double wi[16], wj[16], rd[16], back[16];
  if (scn_transform_relative(w, c->id[i], c->id[j], rel) != SCN_OK)
    return chain_fail(seed, layout, round, "relative failed", i);
  chain_world(c, i, wi);
  chain_world(c, j, wj);
  mat_of_float(rel, rd);
  mat_mul(wj, rd, back);
  float backf[16];
  for (int k = 0; k < 16; k++)
    backf[k] = (float)back[k];
  return chain_close(backf, wi) || chain_fail(seed, layout, round, "relative matrix", i);
}

bool run_chain(unsigned seed, bool scattered) {
  const char *layout = scattered ? "scattered" : "depth-first";
  rng r = {seed};
  chain *c = calloc(1, sizeof *c);
  scn_scene *scene = scn_scene_new(NULL);
  scn_world *w = NULL;
  bool ok = c && scene && scn_world_create(scene, "chain", &w) == SCN_OK &&
            scn_entity_create(scene, CHAIN_LEN, c->id) == SCN_OK &&
            chain_build(w, c, &r, scattered);
  if (!ok)
    fprintf(stderr, "core_property deep chain (%s layout): setup failed\n", layout);
  for (int round = 0; ok && round < CHAIN_ROUNDS; round++) {
    int edits = 1 + (int)rng_below(&r, 4), reads = 1 + (int)rng_below(&r, 3);
    for (int k = 0; ok && k < edits; k++)
      ok = chain_edit(w, c, &r, seed, layout, round);
    for (int k = 0; ok && k < reads; k++)
      ok = chain_check_node(w, c, (int)rng_below(&r, CHAIN_LEN), seed, layout, round);
    if (ok && rng_below(&r, 8) == 0)
      ok = chain_relative(w, c, &r, seed, layout, round);
  }
  for (int i = 0; ok && i < CHAIN_LEN; i++)
    ok = chain_check_node(w, c, i, seed, layout, CHAIN_ROUNDS);
  scn_scene_free(scene);
  free(c);
  return ok;
}

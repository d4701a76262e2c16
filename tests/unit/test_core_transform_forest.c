/* Unit tests of propagation and the layout over large and random forests: swap-erase integrity
 * and propagation after many changes against a model of the forest, a long chain recomputed in
 * O(n), relayout keeping everything identical, and a big world keeping every value through
 * growth. */
#include "core_fixtures.h"
#include "scn_core.h"
#include "suites.h"
#include "transform_fixtures.h"
#include "xorshift.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inverse of a rigid matrix (orthonormal 3x3 plus translation): [R^T, -R^T t]. */
static void mat_rigid_inverse(const float m[16], float out[16]) {
  float r[16];
  for (int c = 0; c < 3; c++)
    for (int row = 0; row < 3; row++)
      r[c * 4 + row] = m[row * 4 + c];
  r[3] = r[7] = r[11] = 0;
  r[15] = 1;
  for (int row = 0; row < 3; row++)
    r[12 + row] = -(r[row] * m[12] + r[4 + row] * m[13] + r[8 + row] * m[14]) + 0.0f;
  memcpy(out, r, sizeof r);
}

/* Exact "rigid" matrices: a quarter turn about Z, a half turn about X, integer translation. */
static void random_rigid(float m[16]) {
  memcpy(m, IDENTITY, sizeof IDENTITY);
  switch (rnd(4)) {
  case 0:
    break;
  case 1: /* 90 degrees about Z */
    m[0] = 0, m[1] = 1, m[4] = -1, m[5] = 0;
    break;
  case 2: /* 180 degrees about X */
    m[5] = -1, m[10] = -1;
    break;
  case 3: /* -90 degrees about Z */
    m[0] = 0, m[1] = -1, m[4] = 1, m[5] = 0;
    break;
  }
  m[12] = (float)((int)rnd(9) - 4);
  m[13] = (float)((int)rnd(9) - 4);
  m[14] = (float)((int)rnd(9) - 4);
}

/* ---- a model of one world's forest, for the randomised tests --------------------------------- */

#define NF 300

typedef struct model {
  int n;
  scn_entity e[NF];
  int parent[NF]; /* -1: root */
  bool alive[NF];
  bool named[NF];
  char name[NF][16];
  float local[NF][16];
  int kids[NF][NF], nkids[NF];
  int roots[NF], nroots;
} model;

static model M;

static int *list_of(model *m, int parent, int **count) {
  if (parent < 0) {
    *count = &m->nroots;
    return m->roots;
  }
  *count = &m->nkids[parent];
  return m->kids[parent];
}

static void list_remove(model *m, int parent, int x) {
  int *cnt, *l = list_of(m, parent, &cnt);
  for (int k = 0; k < *cnt; k++)
    if (l[k] == x) {
      memmove(&l[k], &l[k + 1], sizeof(int) * (size_t)(*cnt - k - 1));
      (*cnt)--;
      return;
    }
  CU_FAIL("model: not in list");
}

static void list_append(model *m, int parent, int x) {
  int *cnt, *l = list_of(m, parent, &cnt);
  l[(*cnt)++] = x;
  m->parent[x] = parent;
}

static void model_world(const model *m, int x, float out[16]) {
  if (m->parent[x] < 0) {
    memcpy(out, m->local[x], 64);
    return;
  }
  float pw[16];
  model_world(m, m->parent[x], pw);
  mat_mul(pw, m->local[x], out);
}

static bool model_is_ancestor(const model *m, int a, int x) {
  for (int p = x; p >= 0; p = m->parent[p])
    if (p == a)
      return true;
  return false;
}

static void model_preorder_from(const model *m, int x, scn_entity *out, size_t *n) {
  out[(*n)++] = m->e[x];
  for (int k = 0; k < m->nkids[x]; k++)
    model_preorder_from(m, m->kids[x][k], out, n);
}

/* Builds a random forest of n nodes in w (and the model); about half are named "n<i>". */
static void model_build(model *m, scn_world *w, scn_scene *s, int n) {
  memset(m, 0, sizeof *m);
  for (int x = 0; x < n; x++) {
    int parent = (x == 0 || rnd(4) == 0) ? -1 : (int)rnd((uint32_t)x);
    m->named[x] = rnd(2) == 0;
    snprintf(m->name[x], sizeof m->name[x], "n%d", x);
    random_rigid(m->local[x]);
    m->e[x] = mk(w, s, parent < 0 ? SCN_ENTITY_NONE : m->e[parent], m->named[x] ? m->name[x] : NULL,
                 m->local[x]);
    m->alive[x] = true;
    list_append(m, parent, x);
  }
  m->n = n;
}

/* Checks everything observable through the API against the model. */
static void model_verify(const model *m, scn_world *w) {
  size_t alive = 0;
  bool parents_ok = true, names_ok = true, locals_ok = true, worlds_ok = true, kids_ok = true,
       dead_ok = true, paths_ok = true;
  for (int x = 0; x < m->n; x++) {
    if (!m->alive[x]) {
      scn_transform_info info;
      if (scn_transform_exists(w, m->e[x]) || scn_transform_get(w, m->e[x], &info) != SCN_NOT_FOUND)
        dead_ok = false;
      continue;
    }
    alive++;
    scn_transform_info info = get(w, m->e[x]);
    scn_entity want_parent = m->parent[x] < 0 ? SCN_ENTITY_NONE : m->e[m->parent[x]];
    if (info.parent != want_parent)
      parents_ok = false;
    if (m->named[x] ? (!info.name || strcmp(info.name, m->name[x]) != 0) : info.name != NULL)
      names_ok = false;
    if (!mat_eq(info.local, m->local[x]))
      locals_ok = false;
    float want[16];
    model_world(m, x, want);
    if (!mat_eq(info.world, want))
      worlds_ok = false;
    scn_entity kids[NF];
    size_t nk = children(w, m->e[x], kids, NF);
    if ((int)nk != m->nkids[x])
      kids_ok = false;
    else
      for (int k = 0; k < m->nkids[x]; k++)
        if (kids[k] != m->e[m->kids[x][k]])
          kids_ok = false;
    /* a fully named path finds the node */
    char path[NF * 8];
    int chain[NF], depth = 0;
    bool all_named = true;
    for (int p = x; p >= 0; p = m->parent[p]) {
      chain[depth++] = p;
      all_named &= m->named[p];
    }
    if (all_named) {
      size_t len = 0;
      for (int k = depth - 1; k >= 0; k--)
        len += (size_t)snprintf(path + len, sizeof path - len, "%s%s", m->name[chain[k]],
                                k ? "/" : "");
      scn_entity found = SCN_ENTITY_NONE;
      if (scn_transform_find(w, path, len, &found) != SCN_OK || found != m->e[x])
        paths_ok = false;
    }
  }
  CU_ASSERT_TRUE(dead_ok);
  CU_ASSERT_TRUE(parents_ok);
  CU_ASSERT_TRUE(names_ok);
  CU_ASSERT_TRUE(locals_ok);
  CU_ASSERT_TRUE(worlds_ok);
  CU_ASSERT_TRUE(kids_ok);
  CU_ASSERT_TRUE(paths_ok);
  CU_ASSERT_EQUAL(scn_world_transform_count(w), alive);
  /* root order and sibling order, through the pre-order walk */
  static elist got;
  static scn_entity want[NF];
  size_t nwant = 0;
  for (int k = 0; k < m->nroots; k++)
    model_preorder_from(m, m->roots[k], want, &nwant);
  preorder(w, &got);
  CU_ASSERT_EQUAL(got.n, nwant);
  CU_ASSERT_TRUE(got.n == nwant && memcmp(got.e, want, sizeof(scn_entity) * nwant) == 0);
}

static void model_destroy(model *m, int x, bool recursive) {
  if (recursive) {
    while (m->nkids[x] > 0)
      model_destroy(m, m->kids[x][m->nkids[x] - 1], true);
  } else {
    while (m->nkids[x] > 0) {
      int c = m->kids[x][0];
      float wc[16];
      model_world(m, c, wc);
      memcpy(m->local[c], wc, 64);
      list_remove(m, x, c);
      list_append(m, -1, c);
    }
  }
  list_remove(m, m->parent[x], x);
  m->alive[x] = false;
}

/* ---- randomised integrity -------------------------------------------------------------------- */

static void test_swap_erase_forest(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  rng_state = 0x9E3779B97F4A7C15u;
  model_build(&M, w, s, 200);
  model_verify(&M, w);
  int order[200];
  for (int x = 0; x < 200; x++)
    order[x] = x;
  for (int x = 199; x > 0; x--) {
    int y = (int)rnd((uint32_t)x + 1), t = order[x];
    order[x] = order[y];
    order[y] = t;
  }
  int destroyed = 0;
  for (int k = 0; k < 200 && destroyed < 150; k++) {
    int x = order[k];
    if (!M.alive[x])
      continue;
    bool recursive = rnd(3) == 0;
    OK(scn_transform_destroy(w, M.e[x], recursive));
    model_destroy(&M, x, recursive);
    destroyed++;
    /* interleave other mutations so the arrays are never in a tidy state */
    if (k % 3 == 0) {
      int y = (int)rnd(200);
      if (M.alive[y]) {
        random_rigid(M.local[y]);
        OK(scn_transform_set_local(w, M.e[y], M.local[y]));
      }
    }
    if (k % 10 == 0)
      model_verify(&M, w);
  }
  model_verify(&M, w);
  scn_world_relayout(w);
  model_verify(&M, w);
  /* the survivors are still fully usable: destroy them all */
  for (int x = 0; x < 200; x++)
    if (M.alive[x]) {
      OK(scn_transform_destroy(w, M.e[x], false));
      model_destroy(&M, x, false);
    }
  model_verify(&M, w);
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 0);
  scn_scene_free(s);
}

static void test_propagation_many(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  rng_state = 0x1234567887654321u;
  model_build(&M, w, s, NF);
  model_verify(&M, w);
  int relinked = 0, cycles = 0;
  for (int step = 0; step < 3000; step++) {
    int x = (int)rnd(NF);
    switch (rnd(5)) {
    case 0:
    case 1:
      random_rigid(M.local[x]);
      OK(scn_transform_set_local(w, M.e[x], M.local[x]));
      break;
    case 2: { /* set_world: exact for rigid integer matrices */
      float want[16], pw[16], inv[16];
      random_rigid(want);
      OK(scn_transform_set_world(w, M.e[x], want));
      if (M.parent[x] < 0) {
        memcpy(M.local[x], want, 64);
      } else {
        model_world(&M, M.parent[x], pw);
        mat_rigid_inverse(pw, inv);
        mat_mul(inv, want, M.local[x]);
      }
      break;
    }
    case 3: { /* link or unlink, either keep */
      int p = rnd(4) == 0 ? -1 : (int)rnd(NF);
      scn_keep keep = rnd(2) ? SCN_KEEP_WORLD : SCN_KEEP_LOCAL;
      int rc = scn_transform_link(w, M.e[x], p < 0 ? SCN_ENTITY_NONE : M.e[p], keep);
      if (p >= 0 && model_is_ancestor(&M, x, p)) {
        CU_ASSERT_EQUAL(rc, SCN_CYCLE);
        cycles++;
      } else if (M.parent[x] == p) {
        CU_ASSERT_EQUAL(rc, SCN_OK);
      } else {
        CU_ASSERT_EQUAL_FATAL(rc, SCN_OK); /* names are unique across the forest */
        relinked++;
        if (keep == SCN_KEEP_WORLD) {
          float wx[16], pw[16], inv[16];
          model_world(&M, x, wx);
          if (p < 0) {
            memcpy(M.local[x], wx, 64);
          } else {
            model_world(&M, p, pw);
            mat_rigid_inverse(pw, inv);
            mat_mul(inv, wx, M.local[x]);
          }
        }
        list_remove(&M, M.parent[x], x);
        list_append(&M, p, x);
      }
      break;
    }
    case 4: /* a read in between: flushes part way */
      if (rnd(8) == 0) {
        float want[16];
        model_world(&M, x, want);
        CU_ASSERT_TRUE(mat_eq(get(w, M.e[x]).world, want));
      }
      break;
    }
    if (step % 500 == 499)
      model_verify(&M, w);
  }
  model_verify(&M, w);
  CU_ASSERT_TRUE(relinked > 300);
  CU_ASSERT_TRUE(cycles > 0);
  scn_scene_free(s);
}

/* KiB of this process's mappings whose VmFlags carry flag ("hg": advised huge pages, "nh":
 * advised small ones), from /proc/self/smaps; -1 where that cannot be read. */
static long smaps_flag_kib(const char *flag) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f)
    return -1;
  char line[512];
  long size = 0, total = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "Size:", 5) == 0) {
      size = strtol(line + 5, NULL, 10);
    } else if (strncmp(line, "VmFlags:", 8) == 0) {
      for (char *t = strtok(line + 8, " \n"); t; t = strtok(NULL, " \n"))
        if (strcmp(t, flag) == 0)
          total += size;
    }
  }
  fclose(f);
  return total;
}

/* A world big enough that its arrays lie far apart in their block keeps every value through
 * each growth step; flushes of long and short dirty lists in scrambled order (the two digit
 * widths of the sort) recompute each moved chain once. */
static void test_big_world(void) {
  enum { N = 300000, CHAIN = 50, CHAINS = N / CHAIN, STRIDE = 4099 /* prime: a permutation */ };
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "big", &w));
  scn_entity *e = malloc(sizeof *e * N);
  float *z = calloc(CHAINS, sizeof *z);
  CU_ASSERT_FATAL(e != NULL && z != NULL);
  OK(scn_entity_create(s, N, e));
  float m[16];
  for (int i = 0; i < N; i++) {
    bool root = i % CHAIN == 0;
    if (root)
      mat_t(m, 0, (float)(i / CHAIN), 0);
    else
      mat_t(m, 1, 0, 0);
    OK(scn_transform_create(w, e[i], root ? SCN_ENTITY_NONE : e[i - 1], NULL, m));
  }
  /* Node k of chain c sits at (k, c, z[c]); pass 1 moves every chain, pass 2 every other one. */
  for (int pass = 0; pass < 3; pass++) {
    int moved = 0;
    for (int j = 0; pass > 0 && j < CHAINS; j++) {
      int c = (int)((long)j * STRIDE % CHAINS);
      if (pass == 2 && c % 2)
        continue;
      z[c] = (float)pass;
      mat_t(m, 0, (float)c, z[c]);
      OK(scn_transform_set_local(w, e[c * CHAIN], m));
      moved++;
    }
    scn_world_stats before, after;
    scn_world_get_stats(w, &before);
    scn_world_flush(w);
    scn_world_get_stats(w, &after);
    if (pass > 0)
      CU_ASSERT_EQUAL(after.recomputed - before.recomputed, (uint64_t)moved * CHAIN);
    int wrong = 0;
    for (int i = 0; i < N; i++) {
      mat_t(m, (float)(i % CHAIN), (float)(i / CHAIN), z[i / CHAIN]);
      wrong += !mat_eq(get(w, e[i]).world, m);
    }
    CU_ASSERT_EQUAL(wrong, 0);
    char err[160] = "";
    CU_ASSERT_EQUAL(scn_world_check(w, err, sizeof err), SCN_OK);
    if (err[0])
      fprintf(stderr, "  %s\n", err);
  }
  /* The two 32 MiB matrix arrays ask for huge pages (all but their part pages at the ends);
   * the rest of the block, gaps included, for small ones. */
  long hg = smaps_flag_kib("hg"), nh = smaps_flag_kib("nh");
  if (hg >= 0) {
    CU_ASSERT(hg >= 2 * (32 - 4) * 1024);
    CU_ASSERT(nh > 0);
  }
  free(e);
  free(z);
  scn_scene_free(s);
}

static void test_long_chain(void) {
  enum { N = 2000 };
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  static scn_entity chain[N];
  scn_entity parent = SCN_ENTITY_NONE;
  for (int k = 0; k < N; k++)
    parent = chain[k] = mk(w, s, parent, NULL, NULL);
  CU_ASSERT_TRUE(bits_eq(get(w, chain[N - 1]).world, IDENTITY));
  scn_world_stats st0, st1;
  scn_world_get_stats(w, &st0);
  float m[16];
  for (int k = 0; k < N; k++) {
    mat_t(m, 1, (float)(k % 3), 0);
    OK(scn_transform_set_local(w, chain[k], m));
  }
  scn_transform_info leaf = get(w, chain[N - 1]);
  CU_ASSERT_EQUAL(leaf.world[12], N);
  CU_ASSERT_EQUAL(leaf.world[13], (N / 3) * 3 + 1); /* 0+1+2 per three, plus 0+1 */
  CU_ASSERT_EQUAL(leaf.world[14], 0);
  scn_world_get_stats(w, &st1);
  CU_ASSERT_EQUAL(st1.flushes - st0.flushes, 1);
  CU_ASSERT_TRUE(st1.recomputed - st0.recomputed >= N);
  CU_ASSERT_TRUE(st1.recomputed - st0.recomputed <= 2 * N);
  CU_ASSERT_EQUAL(st1.changed - st0.changed, N);
  CU_ASSERT_EQUAL(get(w, chain[999]).world[12], 1000);
  scn_world_get_stats(w, &st0);
  CU_ASSERT_EQUAL(st0.flushes, st1.flushes); /* nothing was dirty */

  /* the same, set bottom-up, with the chain unsorted by a relink at the top */
  scn_entity top = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  OK(scn_transform_link(w, chain[0], top, SCN_KEEP_LOCAL));
  get(w, chain[0]);
  scn_world_get_stats(w, &st0);
  for (int k = N; k-- > 0;) {
    mat_t(m, 2, 0, 0);
    OK(scn_transform_set_local(w, chain[k], m));
  }
  CU_ASSERT_EQUAL(get(w, chain[N - 1]).world[12], 2 * N);
  scn_world_get_stats(w, &st1);
  CU_ASSERT_EQUAL(st1.flushes - st0.flushes, 1);
  CU_ASSERT_TRUE(st1.recomputed - st0.recomputed <= 2 * N);
  CU_ASSERT_EQUAL(st1.changed - st0.changed, N);

  /* one change at the top recomputes the chain once */
  scn_world_get_stats(w, &st0);
  mat_t(m, 0, 0, 5);
  OK(scn_transform_set_local(w, top, m));
  CU_ASSERT_EQUAL(get(w, chain[N - 1]).world[14], 5);
  scn_world_get_stats(w, &st1);
  CU_ASSERT_EQUAL(st1.recomputed - st0.recomputed, N + 1);
  CU_ASSERT_EQUAL(st1.changed - st0.changed, N + 1);
  /* a change at the bottom recomputes only the bottom */
  scn_world_get_stats(w, &st0);
  OK(scn_transform_set_local(w, chain[N - 1], IDENTITY));
  CU_ASSERT_EQUAL(get(w, chain[N - 1]).world[12], 2 * N - 2);
  scn_world_get_stats(w, &st1);
  CU_ASSERT_EQUAL(st1.recomputed - st0.recomputed, 1);
  scn_scene_free(s);
}

typedef struct snap_node {
  scn_entity e, parent;
  char name[SCN_NAME_MAX + 1];
  bool named;
  float local[16], world[16];
  size_t nkids;
  scn_entity kids[16];
} snap_node;

static size_t snapshot(scn_world *w, snap_node *out, size_t cap) {
  static elist order;
  preorder(w, &order);
  CU_ASSERT_FATAL(order.n <= cap);
  for (size_t k = 0; k < order.n; k++) {
    snap_node *n = &out[k];
    memset(n, 0, sizeof *n);
    scn_transform_info info = get(w, order.e[k]);
    n->e = info.entity;
    n->parent = info.parent;
    n->named = info.name != NULL;
    if (info.name)
      strcpy(n->name, info.name);
    memcpy(n->local, info.local, 64);
    memcpy(n->world, info.world, 64);
    n->nkids = children(w, n->e, n->kids, 16);
  }
  return order.n;
}

static void test_relayout(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w1, *w2;
  OK(scn_world_create(s, "a", &w1));
  OK(scn_world_create(s, "b", &w2));
  enum { N = 60 };
  scn_entity e[N];
  OK(scn_entity_create(s, N, e));
  rng_state = 42;
  /* the same forest in both worlds, then a few relinks so the arrays are out of order */
  for (int k = 0; k < N; k++) {
    float m[16];
    random_rigid(m);
    scn_entity p = k < 3 ? SCN_ENTITY_NONE : e[rnd((uint32_t)k)];
    char name[16];
    snprintf(name, sizeof name, "n%d", k);
    OK(scn_transform_create(w1, e[k], p, k % 2 ? name : NULL, m));
    OK(scn_transform_create(w2, e[k], p, k % 2 ? name : NULL, m));
  }
  const int relinks[][2] = {{5, 0}, {10, 7}, {3, -1}, {20, 2}, {40, 11}};
  for (size_t k = 0; k < sizeof relinks / sizeof relinks[0]; k++) {
    scn_entity p = relinks[k][1] < 0 ? SCN_ENTITY_NONE : e[relinks[k][1]];
    OK(scn_transform_link(w1, e[relinks[k][0]], p, SCN_KEEP_LOCAL));
    OK(scn_transform_link(w2, e[relinks[k][0]], p, SCN_KEEP_LOCAL));
  }
  /* a pending change goes through the relayout too */
  float m[16];
  mat_t(m, 9, 9, 9);
  OK(scn_transform_set_local(w1, e[0], m));
  OK(scn_transform_set_local(w2, e[0], m));
  scn_world_stats st0, st1;
  scn_world_get_stats(w1, &st0);
  scn_world_relayout(w1);
  scn_world_get_stats(w1, &st1);
  CU_ASSERT_EQUAL(st1.relayouts, st0.relayouts + 1);
  static snap_node a[N], b[N];
  size_t na = snapshot(w1, a, N), nb = snapshot(w2, b, N);
  CU_ASSERT_EQUAL(na, N);
  CU_ASSERT_EQUAL(na, nb);
  CU_ASSERT_TRUE(memcmp(a, b, sizeof a) == 0);
  /* once sorted, another relayout does nothing */
  scn_world_relayout(w1);
  scn_world_get_stats(w1, &st0);
  CU_ASSERT_EQUAL(st0.relayouts, st1.relayouts);
  na = snapshot(w1, a, N);
  CU_ASSERT_TRUE(memcmp(a, b, sizeof a) == 0);
  /* and everything keeps working afterwards, in the same way in both worlds */
  for (int k = 0; k < 30; k++) {
    int x = (int)rnd(N);
    random_rigid(m);
    OK(scn_transform_set_local(w1, e[x], m));
    OK(scn_transform_set_local(w2, e[x], m));
    if (k % 5 == 0) {
      OK(scn_transform_destroy(w1, e[x], false));
      OK(scn_transform_destroy(w2, e[x], false));
      OK(scn_transform_create(w1, e[x], SCN_ENTITY_NONE, NULL, m));
      OK(scn_transform_create(w2, e[x], SCN_ENTITY_NONE, NULL, m));
    }
  }
  scn_world_relayout(w2);
  na = snapshot(w1, a, N);
  nb = snapshot(w2, b, N);
  CU_ASSERT_EQUAL(na, nb);
  CU_ASSERT_TRUE(memcmp(a, b, sizeof a) == 0);
  /* many relinks: flush relayouts on its own */
  scn_world_get_stats(w1, &st0);
  for (int k = 0; k < 100; k++) {
    OK(scn_transform_link(w1, e[1], e[2], SCN_KEEP_LOCAL));
    OK(scn_transform_link(w1, e[1], SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
    OK(scn_transform_link(w2, e[1], e[2], SCN_KEEP_LOCAL));
    OK(scn_transform_link(w2, e[1], SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
  }
  scn_world_flush(w1);
  scn_world_get_stats(w1, &st1);
  CU_ASSERT_EQUAL(st1.relayouts, st0.relayouts + 1);
  na = snapshot(w1, a, N);
  nb = snapshot(w2, b, N);
  CU_ASSERT_EQUAL(na, nb);
  CU_ASSERT_TRUE(memcmp(a, b, sizeof a) == 0);
  scn_scene_free(s);
}

int t_register_core_transform_forest(void) {
  static const t_test tests[] = {
      {"swap-erase integrity in a random forest", test_swap_erase_forest},
      {"propagation after many changes", test_propagation_many},
      {"long chain and O(n) recomputation", test_long_chain},
      {"relayout keeps everything identical", test_relayout},
      {"a big world keeps every value through growth", test_big_world},
  };
  return T_ADD_SUITE("core_transform_forest", NULL, NULL, tests);
}

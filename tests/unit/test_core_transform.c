/* Unit tests of worlds and the transform manager: every operation and error path, swap-erase
 * integrity against a model, propagation, long chains and relayout. */
#include "core_fixtures.h"
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- utilities ---------------------------------------------------------------------------- */

/* translation * uniform scale */
static void mat_ts(float m[16], float x, float y, float z, float s) {
  mat_t(m, x, y, z);
  m[0] = m[5] = m[10] = s;
}

static void mat_trs(float m[16], float tx, float ty, float tz, const float q[4], float s) {
  const float t[3] = {tx, ty, tz}, sc[3] = {s, s, s};
  CU_ASSERT_EQUAL_FATAL(scn_compose_trs(t, q, sc, m), SCN_OK);
}

/* Column-major a * b accumulated in double. Exact for the small integer matrices used here. */
static void mat_mul(const float a[16], const float b[16], float out[16]) {
  float r[16];
  for (int c = 0; c < 4; c++)
    for (int row = 0; row < 4; row++) {
      double s = 0;
      for (int k = 0; k < 4; k++)
        s += (double)a[k * 4 + row] * b[c * 4 + k];
      r[c * 4 + row] = (float)s;
    }
  memcpy(out, r, sizeof r);
}

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

static bool bits_eq(const float a[16], const float b[16]) { return memcmp(a, b, 64) == 0; }

/* Exact values (0 == -0). */
static bool mat_eq(const float a[16], const float b[16]) {
  for (int i = 0; i < 16; i++)
    if (a[i] != b[i])
      return false;
  return true;
}

static bool mat_near(const float a[16], const float b[16], float tol) {
  for (int i = 0; i < 16; i++) {
    float mag = fabsf(a[i]) > fabsf(b[i]) ? fabsf(a[i]) : fabsf(b[i]);
    if (!(fabsf(a[i] - b[i]) <= tol * (1 + mag)))
      return false;
  }
  return true;
}

typedef struct elist {
  scn_entity e[4096];
  size_t n;
} elist;

static void collect(void *ud, scn_entity e, const float world[16]) {
  (void)world;
  elist *l = ud;
  if (l->n < sizeof l->e / sizeof l->e[0])
    l->e[l->n] = e;
  l->n++;
}

/* The whole world in pre-order, roots in root order: visit_changed since 0 visits all. */
static void preorder(scn_world *w, elist *out) {
  out->n = 0;
  CU_ASSERT_EQUAL_FATAL(scn_world_visit_changed(w, SCN_ENTITY_NONE, 0, collect, out), SCN_OK);
}

static void count_event(void *ud, scn_entity e, scn_event_kind kind) {
  (void)e, (void)kind;
  ++*(int *)ud;
}

static size_t children(scn_world *w, scn_entity e, scn_entity *out, size_t cap) {
  size_t n = 0;
  CU_ASSERT_EQUAL_FATAL(scn_transform_children(w, e, out, cap, &n), SCN_OK);
  return n;
}

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)((rng_state >> 11) % n);
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

/* ---- a model of one world's forest, for the randomised tests ------------------------------ */

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

/* ---- worlds ------------------------------------------------------------------------------- */

static void test_world_basics(void) {
  scn_scene *s = scn_scene_new(NULL);
  CU_ASSERT_EQUAL(scn_world_count(s), 0);
  CU_ASSERT_PTR_NULL(scn_world_at(s, 0));
  CU_ASSERT_PTR_NULL(scn_world_find(s, "alpha"));
  scn_world *a = NULL, *b = NULL, *c = NULL, *dup = NULL;
  OK(scn_world_create(s, "alpha", &a));
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  CU_ASSERT_PTR_EQUAL(scn_world_find(s, "alpha"), a);
  CU_ASSERT_STRING_EQUAL(scn_world_name(a), "alpha");
  CU_ASSERT_EQUAL(scn_world_transform_count(a), 0);
  CU_ASSERT_EQUAL(scn_world_create(s, "alpha", &dup), SCN_EXISTS);
  CU_ASSERT_PTR_NULL(dup);
  CU_ASSERT_EQUAL(scn_world_count(s), 1);

  const char *bad[] = {"", "has space", "a/b", "caf\xc3\xa9", "x!"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    CU_ASSERT_EQUAL(scn_world_create(s, bad[k], NULL), SCN_INVALID);
  char longname[70];
  memset(longname, 'L', 65);
  longname[65] = 0;
  CU_ASSERT_EQUAL(scn_world_create(s, longname, NULL), SCN_INVALID);
  longname[64] = 0;
  OK(scn_world_create(s, longname, NULL));
  CU_ASSERT_PTR_NOT_NULL(scn_world_find(s, longname));
  OK(scn_world_destroy(s, longname));
  CU_ASSERT_EQUAL(scn_world_count(s), 1);

  OK(scn_world_create(s, "beta", &b));
  OK(scn_world_create(s, "gamma", &c));
  OK(scn_world_create(s, "Alpha", NULL)); /* names are case-sensitive */
  CU_ASSERT_EQUAL(scn_world_count(s), 4);
  CU_ASSERT_PTR_EQUAL(scn_world_at(s, 0), a);
  CU_ASSERT_PTR_EQUAL(scn_world_at(s, 1), b);
  CU_ASSERT_PTR_EQUAL(scn_world_at(s, 2), c);
  CU_ASSERT_STRING_EQUAL(scn_world_name(scn_world_at(s, 3)), "Alpha");
  CU_ASSERT_PTR_NULL(scn_world_at(s, 4));

  /* a value the embedder keeps with each world */
  CU_ASSERT_EQUAL(scn_world_userdata(a), 0);
  scn_world_set_userdata(a, UINT64_C(0xfeedface12345678));
  scn_world_set_userdata(b, 7);
  CU_ASSERT_EQUAL(scn_world_userdata(a), UINT64_C(0xfeedface12345678));
  CU_ASSERT_EQUAL(scn_world_userdata(b), 7);
  CU_ASSERT_EQUAL(scn_world_userdata(c), 0);

  /* transforms per world and in the scene */
  scn_entity e1 = mk(a, s, SCN_ENTITY_NONE, NULL, NULL);
  mk(a, s, e1, NULL, NULL);
  OK(scn_transform_create(c, e1, SCN_ENTITY_NONE, NULL, NULL));
  CU_ASSERT_EQUAL(scn_world_transform_count(a), 2);
  CU_ASSERT_EQUAL(scn_world_transform_count(b), 0);
  CU_ASSERT_EQUAL(scn_world_transform_count(c), 1);
  CU_ASSERT_EQUAL(scn_scene_transform_count(s), 3);

  /* destroy keeps the order of the rest; entities stay alive */
  OK(scn_world_destroy(s, "alpha"));
  CU_ASSERT_EQUAL(scn_world_destroy(s, "alpha"), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_world_destroy(s, "nope"), SCN_NOT_FOUND);
  CU_ASSERT_PTR_NULL(scn_world_find(s, "alpha"));
  CU_ASSERT_EQUAL(scn_world_count(s), 3);
  CU_ASSERT_PTR_EQUAL(scn_world_at(s, 0), b);
  CU_ASSERT_PTR_EQUAL(scn_world_at(s, 1), c);
  CU_ASSERT_EQUAL(scn_world_userdata(b), 7);
  CU_ASSERT_STRING_EQUAL(scn_world_name(scn_world_at(s, 2)), "Alpha");
  CU_ASSERT_EQUAL(scn_scene_transform_count(s), 1);
  CU_ASSERT_TRUE(scn_entity_alive(s, e1));
  CU_ASSERT_EQUAL(scn_entity_count(s), 2);
  /* a re-created world is empty and goes last */
  scn_world *a2;
  OK(scn_world_create(s, "alpha", &a2));
  CU_ASSERT_EQUAL(scn_world_transform_count(a2), 0);
  CU_ASSERT_FALSE(scn_transform_exists(a2, e1));
  CU_ASSERT_PTR_EQUAL(scn_world_at(s, 3), a2);
  CU_ASSERT_EQUAL(scn_world_userdata(a2), 0);
  scn_scene_free(s);
}

static void test_world_limit(void) {
  scn_limits lim = {2, 0, 0};
  scn_scene *s = scn_scene_new(&lim);
  OK(scn_world_create(s, "a", NULL));
  OK(scn_world_create(s, "b", NULL));
  CU_ASSERT_EQUAL(scn_world_create(s, "c", NULL), SCN_LIMIT);
  CU_ASSERT_EQUAL(scn_world_create(s, "a", NULL), SCN_EXISTS);
  CU_ASSERT_EQUAL(scn_world_count(s), 2);
  CU_ASSERT_PTR_NULL(scn_world_find(s, "c"));
  OK(scn_world_destroy(s, "a"));
  OK(scn_world_create(s, "c", NULL));
  CU_ASSERT_EQUAL(scn_world_count(s), 2);
  CU_ASSERT_STRING_EQUAL(scn_world_name(scn_world_at(s, 0)), "b");
  CU_ASSERT_STRING_EQUAL(scn_world_name(scn_world_at(s, 1)), "c");
  scn_scene_free(s);
}

/* ---- create and get ----------------------------------------------------------------------- */

static void test_create_and_get(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_entity a = ent(s);
  CU_ASSERT_FALSE(scn_transform_exists(w, a));
  OK(scn_transform_create(w, a, SCN_ENTITY_NONE, NULL, NULL));
  CU_ASSERT_TRUE(scn_transform_exists(w, a));
  scn_transform_info ia = get(w, a);
  CU_ASSERT_EQUAL(ia.entity, a);
  CU_ASSERT_EQUAL(ia.parent, SCN_ENTITY_NONE);
  CU_ASSERT_PTR_NULL(ia.name);
  CU_ASSERT_TRUE(bits_eq(ia.local, IDENTITY));
  CU_ASSERT_TRUE(bits_eq(ia.world, IDENTITY));

  /* with a parent, a name and a local matrix: world = parent world * local */
  float pl[16], cl[16], want[16];
  const float half_z[4] = {0, 0, 1, 0};
  mat_trs(pl, 1, 2, 3, half_z, 2); /* exact: 180 degrees about Z, scale 2 */
  OK(scn_transform_set_local(w, a, pl));
  mat_t(cl, 1, 0.5f, -4);
  scn_entity b = ent(s);
  OK(scn_transform_create(w, b, a, "child", cl));
  scn_transform_info ib = get(w, b);
  CU_ASSERT_EQUAL(ib.entity, b);
  CU_ASSERT_EQUAL(ib.parent, a);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ib.name);
  CU_ASSERT_STRING_EQUAL(ib.name, "child");
  CU_ASSERT_TRUE(bits_eq(ib.local, cl));
  mat_mul(pl, cl, want);
  CU_ASSERT_TRUE(mat_eq(ib.world, want));
  CU_ASSERT_EQUAL(ib.world[12], 1 - 2);
  CU_ASSERT_EQUAL(ib.world[13], 2 - 1);
  CU_ASSERT_EQUAL(ib.world[14], 3 - 8);
  /* a grandchild multiplies the whole chain */
  float gl[16], want2[16];
  mat_ts(gl, 0, 0, 1, 0.5f);
  scn_entity g = mk(w, s, b, "g", gl);
  mat_mul(want, gl, want2);
  scn_transform_info ig = get(w, g);
  CU_ASSERT_TRUE(mat_eq(ig.world, want2));
  CU_ASSERT_EQUAL(ig.world[0], -1);
  CU_ASSERT_EQUAL(ig.world[14], -5 + 2);
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 3);

  /* get of something without a transform */
  scn_transform_info none;
  scn_entity loose = ent(s);
  CU_ASSERT_EQUAL(scn_transform_get(w, loose, &none), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_get(w, SCN_ENTITY_NONE, &none), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_get(w, UINT64_MAX, &none), SCN_NOT_FOUND);
  scn_scene_free(s);
}

static void test_create_errors(void) {
  scn_limits lim = {0, 4, 0};
  scn_scene *s = scn_scene_new(&lim);
  scn_world *w, *w2;
  OK(scn_world_create(s, "w", &w));
  OK(scn_world_create(s, "w2", &w2));
  scn_entity r = mk(w, s, SCN_ENTITY_NONE, "root", NULL);
  scn_entity k1 = mk(w, s, r, "kid", NULL);
  scn_entity e = ent(s);

  /* unknown entity */
  CU_ASSERT_EQUAL(scn_transform_create(w, SCN_ENTITY_NONE, SCN_ENTITY_NONE, NULL, NULL),
                  SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_create(w, e + 1000, SCN_ENTITY_NONE, NULL, NULL), SCN_NOT_FOUND);
  scn_entity dead = ent(s);
  OK(scn_entity_destroy(s, dead));
  CU_ASSERT_EQUAL(scn_transform_create(w, dead, SCN_ENTITY_NONE, NULL, NULL), SCN_NOT_FOUND);
  /* missing parent: alive entity without a transform here, one only in another world */
  scn_entity other = ent(s);
  CU_ASSERT_EQUAL(scn_transform_create(w, e, other, NULL, NULL), SCN_NOT_FOUND);
  OK(scn_transform_create(w2, other, SCN_ENTITY_NONE, NULL, NULL));
  CU_ASSERT_EQUAL(scn_transform_create(w, e, other, NULL, NULL), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_create(w, e, dead, NULL, NULL), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_create(w, e, e, NULL, NULL), SCN_NOT_FOUND);
  /* duplicate */
  CU_ASSERT_EQUAL(scn_transform_create(w, k1, SCN_ENTITY_NONE, NULL, NULL), SCN_EXISTS);
  CU_ASSERT_EQUAL(scn_transform_create(w, r, k1, "other", NULL), SCN_EXISTS);
  /* name clashes: sibling and root */
  CU_ASSERT_EQUAL(scn_transform_create(w, e, r, "kid", NULL), SCN_EXISTS);
  CU_ASSERT_EQUAL(scn_transform_create(w, e, SCN_ENTITY_NONE, "root", NULL), SCN_EXISTS);
  /* invalid names and matrices */
  CU_ASSERT_EQUAL(scn_transform_create(w, e, SCN_ENTITY_NONE, "", NULL), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_create(w, e, SCN_ENTITY_NONE, "a/b", NULL), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_create(w, e, SCN_ENTITY_NONE, "bad\x01", NULL), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_create(w, e, SCN_ENTITY_NONE, "\xc0\xaf", NULL), SCN_INVALID);
  char longname[70];
  memset(longname, 'n', 65);
  longname[65] = 0;
  CU_ASSERT_EQUAL(scn_transform_create(w, e, SCN_ENTITY_NONE, longname, NULL), SCN_INVALID);
  float m[16];
  for (int i = 0; i < 16; i += 5) {
    memcpy(m, IDENTITY, sizeof m);
    m[i] = NAN;
    CU_ASSERT_EQUAL(scn_transform_create(w, e, SCN_ENTITY_NONE, NULL, m), SCN_INVALID);
    m[i] = -INFINITY;
    CU_ASSERT_EQUAL(scn_transform_create(w, e, r, NULL, m), SCN_INVALID);
  }
  /* none of that created anything */
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 2);
  CU_ASSERT_FALSE(scn_transform_exists(w, e));
  size_t n = children(w, r, NULL, 0);
  CU_ASSERT_EQUAL(n, 1);

  /* same name under different parents, and in another world, is fine */
  OK(scn_transform_create(w, e, k1, "kid", NULL));
  scn_entity found;
  OK(scn_transform_find(w, "root/kid/kid", 12, &found));
  CU_ASSERT_EQUAL(found, e);
  OK(scn_transform_create(w2, r, SCN_ENTITY_NONE, "root", NULL));
  /* a 64-byte name is fine */
  longname[64] = 0;
  scn_entity f = ent(s);
  OK(scn_transform_create(w, f, SCN_ENTITY_NONE, longname, NULL));
  CU_ASSERT_STRING_EQUAL(get(w, f).name, longname);

  /* max_transforms is per world */
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 4);
  scn_entity extra = ent(s);
  CU_ASSERT_EQUAL(scn_transform_create(w, extra, SCN_ENTITY_NONE, NULL, NULL), SCN_LIMIT);
  CU_ASSERT_EQUAL(scn_transform_create(w, extra, r, "x", NULL), SCN_LIMIT);
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 4);
  CU_ASSERT_FALSE(scn_transform_exists(w, extra));
  OK(scn_transform_create(w2, extra, SCN_ENTITY_NONE, NULL, NULL));
  OK(scn_transform_destroy(w, f, false));
  OK(scn_transform_create(w, extra, SCN_ENTITY_NONE, NULL, NULL));
  scn_scene_free(s);
}

/* ---- children ----------------------------------------------------------------------------- */

static void test_children_order(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_entity p = mk(w, s, SCN_ENTITY_NONE, "p", NULL), c[6];
  for (int k = 0; k < 6; k++)
    c[k] = mk(w, s, p, NULL, NULL);
  scn_entity out[8];
  size_t n = children(w, p, out, 8);
  CU_ASSERT_EQUAL(n, 6);
  CU_ASSERT_TRUE(memcmp(out, c, sizeof c) == 0);
  /* a short buffer gets the first cap, the count is still the total */
  scn_entity shortbuf[3] = {0, 0, 0};
  n = children(w, p, shortbuf, 2);
  CU_ASSERT_EQUAL(n, 6);
  CU_ASSERT_EQUAL(shortbuf[0], c[0]);
  CU_ASSERT_EQUAL(shortbuf[1], c[1]);
  CU_ASSERT_EQUAL(shortbuf[2], 0);
  CU_ASSERT_EQUAL(children(w, p, NULL, 0), 6);
  CU_ASSERT_EQUAL(children(w, c[0], out, 8), 0);
  size_t cnt;
  CU_ASSERT_EQUAL(scn_transform_children(w, ent(s), out, 8, &cnt), SCN_NOT_FOUND);

  /* unlink the middle one, relink it: it goes last */
  OK(scn_transform_link(w, c[2], SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
  n = children(w, p, out, 8);
  CU_ASSERT_EQUAL(n, 5);
  scn_entity want1[5] = {c[0], c[1], c[3], c[4], c[5]};
  CU_ASSERT_TRUE(memcmp(out, want1, sizeof want1) == 0);
  OK(scn_transform_link(w, c[2], p, SCN_KEEP_LOCAL));
  scn_entity want2[6] = {c[0], c[1], c[3], c[4], c[5], c[2]};
  n = children(w, p, out, 8);
  CU_ASSERT_EQUAL(n, 6);
  CU_ASSERT_TRUE(memcmp(out, want2, sizeof want2) == 0);
  /* destroying the first and last keeps the rest in order */
  OK(scn_transform_destroy(w, c[0], false));
  OK(scn_transform_destroy(w, c[2], true));
  scn_entity want3[4] = {c[1], c[3], c[4], c[5]};
  n = children(w, p, out, 8);
  CU_ASSERT_EQUAL(n, 4);
  CU_ASSERT_TRUE(memcmp(out, want3, sizeof want3) == 0);
  scn_scene_free(s);
}

/* ---- link --------------------------------------------------------------------------------- */

static void test_link_keep_local(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float la[16], lb[16], want[16];
  const float qz[4] = {0, 0, 1, 0};
  mat_trs(la, 10, 0, 0, qz, 2);
  mat_t(lb, 0, 5, 1);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", la);
  scn_entity b = mk(w, s, SCN_ENTITY_NONE, "b", lb);
  scn_entity bc = mk(w, s, b, "bc", lb);
  OK(scn_transform_link(w, b, a, SCN_KEEP_LOCAL));
  scn_transform_info ib = get(w, b);
  CU_ASSERT_EQUAL(ib.parent, a);
  CU_ASSERT_TRUE(bits_eq(ib.local, lb));
  mat_mul(la, lb, want);
  CU_ASSERT_TRUE(mat_eq(ib.world, want));
  CU_ASSERT_EQUAL(ib.world[12], 10);
  CU_ASSERT_EQUAL(ib.world[13], -10);
  CU_ASSERT_EQUAL(ib.world[14], 2);
  /* the subtree follows */
  float want_c[16];
  mat_mul(want, lb, want_c);
  CU_ASSERT_TRUE(mat_eq(get(w, bc).world, want_c));
  scn_entity out[4];
  CU_ASSERT_EQUAL(children(w, a, out, 4), 1);
  CU_ASSERT_EQUAL(out[0], b);
  scn_entity found;
  OK(scn_transform_find(w, "a/b/bc", 6, &found));
  CU_ASSERT_EQUAL(found, bc);
  CU_ASSERT_EQUAL(scn_transform_find(w, "b", 1, &found), SCN_NOT_FOUND);
  /* unlink keeping local: world = local */
  OK(scn_transform_link(w, b, SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
  ib = get(w, b);
  CU_ASSERT_EQUAL(ib.parent, SCN_ENTITY_NONE);
  CU_ASSERT_TRUE(bits_eq(ib.local, lb));
  CU_ASSERT_TRUE(bits_eq(ib.world, lb));
  CU_ASSERT_EQUAL(children(w, a, out, 4), 0);
  scn_scene_free(s);
}

static void test_link_keep_world(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float la[16], lb[16], lc[16];
  mat_ts(la, 10, 0, 0, 2);
  mat_t(lb, 4, 6, 8);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, la);
  scn_entity b = mk(w, s, SCN_ENTITY_NONE, NULL, lb);
  scn_entity bc = mk(w, s, b, NULL, lb);
  scn_transform_info before_c = get(w, bc);
  OK(scn_transform_link(w, b, a, SCN_KEEP_WORLD));
  scn_transform_info ib = get(w, b);
  CU_ASSERT_EQUAL(ib.parent, a);
  /* exact here: local = inverse(T(10) S(2)) * T(4,6,8) = S(1/2) T(-6,6,8) */
  float want_local[16];
  mat_ts(want_local, -3, 3, 4, 0.5f);
  CU_ASSERT_TRUE(mat_eq(ib.local, want_local));
  CU_ASSERT_TRUE(mat_eq(ib.world, lb));
  CU_ASSERT_TRUE(mat_eq(get(w, bc).world, before_c.world));

  /* with rotations the world is kept up to float rounding */
  const float q1[4] = {0.2f, -0.4f, 0.1f, 0.9f}, q2[4] = {-0.3f, 0.5f, 0.7f, 0.1f};
  mat_trs(la, 1.5f, -2.25f, 3, q1, 1.7f);
  mat_trs(lc, -7, 0.125f, 9.5f, q2, 0.6f);
  scn_entity p = mk(w, s, SCN_ENTITY_NONE, NULL, la);
  scn_entity q = mk(w, s, p, NULL, la);
  scn_entity x = mk(w, s, SCN_ENTITY_NONE, NULL, lc);
  scn_entity xc = mk(w, s, x, NULL, lc);
  scn_transform_info bx = get(w, x), bxc = get(w, xc);
  OK(scn_transform_link(w, x, q, SCN_KEEP_WORLD));
  scn_transform_info ax = get(w, x), axc = get(w, xc);
  CU_ASSERT_EQUAL(ax.parent, q);
  CU_ASSERT_TRUE(mat_near(ax.world, bx.world, 1e-5f));
  CU_ASSERT_TRUE(mat_near(axc.world, bxc.world, 1e-5f));
  CU_ASSERT_FALSE(mat_near(ax.local, bx.local, 1e-3f));
  /* unlink keeping world: local becomes that world */
  OK(scn_transform_link(w, x, SCN_ENTITY_NONE, SCN_KEEP_WORLD));
  scn_transform_info ux = get(w, x);
  CU_ASSERT_EQUAL(ux.parent, SCN_ENTITY_NONE);
  CU_ASSERT_TRUE(bits_eq(ux.local, ax.world));
  CU_ASSERT_TRUE(bits_eq(ux.world, ax.world));
  /* move under a dirty parent: the fresh parent world is used */
  float moved[16];
  mat_trs(moved, 3, 3, 3, q2, 2);
  OK(scn_transform_set_local(w, p, moved));
  OK(scn_transform_link(w, x, q, SCN_KEEP_WORLD));
  CU_ASSERT_TRUE(mat_near(get(w, x).world, ux.world, 1e-5f));
  scn_scene_free(s);
}

static void test_link_errors(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16];
  mat_t(m, 1, 1, 1);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", m);
  scn_entity b = mk(w, s, a, "b", m);
  scn_entity c = mk(w, s, b, "c", m);
  scn_entity b2 = mk(w, s, a, "b2", m);
  scn_entity r = mk(w, s, SCN_ENTITY_NONE, "c", m);
  scn_entity loose = ent(s);
  elist before, after;
  preorder(w, &before);

  CU_ASSERT_EQUAL(scn_transform_link(w, a, a, SCN_KEEP_LOCAL), SCN_CYCLE);
  CU_ASSERT_EQUAL(scn_transform_link(w, a, b, SCN_KEEP_LOCAL), SCN_CYCLE);
  CU_ASSERT_EQUAL(scn_transform_link(w, a, c, SCN_KEEP_WORLD), SCN_CYCLE);
  CU_ASSERT_EQUAL(scn_transform_link(w, b, c, SCN_KEEP_LOCAL), SCN_CYCLE);
  CU_ASSERT_EQUAL(scn_transform_link(w, loose, a, SCN_KEEP_LOCAL), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_link(w, a, loose, SCN_KEEP_LOCAL), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_link(w, SCN_ENTITY_NONE, a, SCN_KEEP_LOCAL), SCN_NOT_FOUND);
  /* name clash under the new parent and among the roots */
  CU_ASSERT_EQUAL(scn_transform_link(w, r, b, SCN_KEEP_LOCAL), SCN_EXISTS);
  CU_ASSERT_EQUAL(scn_transform_link(w, c, SCN_ENTITY_NONE, SCN_KEEP_LOCAL), SCN_EXISTS);
  CU_ASSERT_EQUAL(scn_transform_link(w, c, SCN_ENTITY_NONE, SCN_KEEP_WORLD), SCN_EXISTS);
  /* to the current parent and unlinking a root: successful no-ops, order unchanged */
  OK(scn_transform_link(w, b, a, SCN_KEEP_LOCAL));
  OK(scn_transform_link(w, b, a, SCN_KEEP_WORLD));
  OK(scn_transform_link(w, a, SCN_ENTITY_NONE, SCN_KEEP_LOCAL));
  OK(scn_transform_link(w, r, SCN_ENTITY_NONE, SCN_KEEP_WORLD));
  preorder(w, &after);
  CU_ASSERT_EQUAL(after.n, before.n);
  CU_ASSERT_TRUE(memcmp(after.e, before.e, sizeof(scn_entity) * before.n) == 0);
  scn_entity kids[4];
  CU_ASSERT_EQUAL(children(w, a, kids, 4), 2);
  CU_ASSERT_EQUAL(kids[0], b);
  CU_ASSERT_EQUAL(kids[1], b2);
  CU_ASSERT_EQUAL(get(w, c).parent, b);
  CU_ASSERT_EQUAL(get(w, r).parent, SCN_ENTITY_NONE);
  CU_ASSERT_TRUE(bits_eq(get(w, b).local, m));

  /* keep world under a singular parent is SINGULAR and changes nothing; keep local works */
  float zero_scale[16];
  mat_ts(zero_scale, 5, 5, 5, 0);
  scn_entity sing = mk(w, s, SCN_ENTITY_NONE, "sing", zero_scale);
  CU_ASSERT_EQUAL(scn_transform_link(w, b2, sing, SCN_KEEP_WORLD), SCN_SINGULAR);
  scn_transform_info ib2 = get(w, b2);
  CU_ASSERT_EQUAL(ib2.parent, a);
  CU_ASSERT_TRUE(bits_eq(ib2.local, m));
  CU_ASSERT_EQUAL(children(w, sing, kids, 4), 0);
  OK(scn_transform_link(w, b2, sing, SCN_KEEP_LOCAL));
  ib2 = get(w, b2);
  CU_ASSERT_EQUAL(ib2.parent, sing);
  CU_ASSERT_TRUE(bits_eq(ib2.local, m));
  float want[16];
  mat_mul(zero_scale, m, want);
  CU_ASSERT_TRUE(mat_eq(ib2.world, want));
  /* a result that would not be finite is SINGULAR too */
  float tiny[16], far[16];
  mat_ts(tiny, 0, 0, 0, 1e-30f);
  mat_t(far, 1e20f, 0, 0);
  scn_entity tn = mk(w, s, SCN_ENTITY_NONE, NULL, tiny);
  scn_entity fr = mk(w, s, SCN_ENTITY_NONE, NULL, far);
  CU_ASSERT_EQUAL(scn_transform_link(w, fr, tn, SCN_KEEP_WORLD), SCN_SINGULAR);
  CU_ASSERT_EQUAL(get(w, fr).parent, SCN_ENTITY_NONE);
  CU_ASSERT_TRUE(bits_eq(get(w, fr).local, far));
  scn_scene_free(s);
}

/* ---- set_local and set_world -------------------------------------------------------------- */

static void test_set_local(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m1[16], m2[16], want[16];
  mat_t(m1, 1, 2, 3);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  scn_entity b = mk(w, s, a, NULL, m1);
  const float qx[4] = {1, 0, 0, 0};
  mat_trs(m2, 0, 0, 10, qx, 4);
  OK(scn_transform_set_local(w, a, m2));
  scn_transform_info ia = get(w, a), ib = get(w, b);
  CU_ASSERT_TRUE(bits_eq(ia.local, m2));
  CU_ASSERT_TRUE(bits_eq(ia.world, m2));
  mat_mul(m2, m1, want);
  CU_ASSERT_TRUE(mat_eq(ib.world, want));
  CU_ASSERT_EQUAL(ib.world[12], 4);
  CU_ASSERT_EQUAL(ib.world[13], -8);
  CU_ASSERT_EQUAL(ib.world[14], -2);
  /* errors change nothing */
  float bad[16];
  memcpy(bad, m1, sizeof bad);
  bad[7] = NAN;
  CU_ASSERT_EQUAL(scn_transform_set_local(w, a, bad), SCN_INVALID);
  bad[7] = INFINITY;
  CU_ASSERT_EQUAL(scn_transform_set_local(w, b, bad), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_set_local(w, ent(s), m1), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_set_local(w, SCN_ENTITY_NONE, m1), SCN_NOT_FOUND);
  CU_ASSERT_TRUE(bits_eq(get(w, a).local, m2));
  CU_ASSERT_TRUE(mat_eq(get(w, b).world, want));
  /* a singular local is allowed */
  float zero[16];
  memset(zero, 0, sizeof zero);
  OK(scn_transform_set_local(w, a, zero));
  CU_ASSERT_TRUE(bits_eq(get(w, a).world, zero));
  CU_ASSERT_EQUAL(get(w, b).world[0], 0);
  scn_scene_free(s);
}

static void test_set_world(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float pl[16], given[16], want_local[16];
  mat_ts(pl, 10, 0, 0, 2);
  scn_entity p = mk(w, s, SCN_ENTITY_NONE, NULL, pl);
  scn_entity c = mk(w, s, p, NULL, NULL);
  scn_entity g = mk(w, s, c, NULL, pl);
  mat_t(given, 4, 6, 8);
  OK(scn_transform_set_world(w, c, given));
  scn_transform_info ic = get(w, c);
  mat_ts(want_local, -3, 3, 4, 0.5f); /* inverse(parent world) * given, exact here */
  CU_ASSERT_TRUE(mat_eq(ic.local, want_local));
  CU_ASSERT_TRUE(mat_eq(ic.world, given));
  float want_g[16];
  mat_mul(given, pl, want_g);
  CU_ASSERT_TRUE(mat_eq(get(w, g).world, want_g));
  /* a root: local = given */
  OK(scn_transform_set_world(w, p, given));
  CU_ASSERT_TRUE(bits_eq(get(w, p).local, given));
  CU_ASSERT_TRUE(bits_eq(get(w, p).world, given));
  /* general matrices: world equals the given one up to rounding */
  const float q1[4] = {0.3f, 0.1f, -0.5f, 0.8f}, q2[4] = {-0.6f, 0.2f, 0.2f, 0.4f};
  float pg[16], gg[16];
  mat_trs(pg, 1, 2, 3, q1, 3);
  mat_trs(gg, -4, 5, 0.5f, q2, 0.25f);
  OK(scn_transform_set_local(w, p, pg));
  OK(scn_transform_set_world(w, c, gg));
  CU_ASSERT_TRUE(mat_near(get(w, c).world, gg, 1e-5f));
  /* under a dirty grandparent chain: the fresh world of the parent is used */
  OK(scn_transform_set_local(w, p, pl));
  OK(scn_transform_set_world(w, g, gg));
  CU_ASSERT_TRUE(mat_near(get(w, g).world, gg, 1e-5f));

  /* singular parent: SINGULAR, nothing changes */
  float zero_scale[16];
  mat_ts(zero_scale, 1, 2, 3, 0);
  scn_transform_info before = get(w, c);
  OK(scn_transform_set_local(w, p, zero_scale));
  before = get(w, c);
  CU_ASSERT_EQUAL(scn_transform_set_world(w, c, given), SCN_SINGULAR);
  CU_ASSERT_TRUE(bits_eq(get(w, c).local, before.local));
  /* result not finite: SINGULAR */
  float tiny[16], far[16];
  mat_ts(tiny, 0, 0, 0, 1e-30f);
  mat_t(far, 1e20f, 0, 0);
  OK(scn_transform_set_local(w, p, tiny));
  CU_ASSERT_EQUAL(scn_transform_set_world(w, c, far), SCN_SINGULAR);
  CU_ASSERT_TRUE(bits_eq(get(w, c).local, before.local));
  /* bad input */
  float bad[16];
  memcpy(bad, given, sizeof bad);
  bad[12] = NAN;
  CU_ASSERT_EQUAL(scn_transform_set_world(w, c, bad), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_set_world(w, ent(s), given), SCN_NOT_FOUND);
  scn_scene_free(s);
}

/* ---- rename and find ---------------------------------------------------------------------- */

static void test_rename(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_entity p = mk(w, s, SCN_ENTITY_NONE, "p", NULL);
  scn_entity a = mk(w, s, p, "a", NULL);
  scn_entity b = mk(w, s, p, "b", NULL);
  scn_entity r = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  scn_entity found;
  OK(scn_transform_rename(w, a, "alpha"));
  CU_ASSERT_STRING_EQUAL(get(w, a).name, "alpha");
  OK(scn_transform_find(w, "p/alpha", 7, &found));
  CU_ASSERT_EQUAL(found, a);
  CU_ASSERT_EQUAL(scn_transform_find(w, "p/a", 3, &found), SCN_NOT_FOUND);
  /* clash with a sibling */
  CU_ASSERT_EQUAL(scn_transform_rename(w, b, "alpha"), SCN_EXISTS);
  CU_ASSERT_STRING_EQUAL(get(w, b).name, "b");
  /* clash among roots */
  CU_ASSERT_EQUAL(scn_transform_rename(w, r, "p"), SCN_EXISTS);
  CU_ASSERT_PTR_NULL(get(w, r).name);
  /* a name used elsewhere in the tree is fine */
  OK(scn_transform_rename(w, r, "alpha"));
  OK(scn_transform_find(w, "alpha", 5, &found));
  CU_ASSERT_EQUAL(found, r);
  /* renaming to the same name is fine */
  OK(scn_transform_rename(w, a, "alpha"));
  CU_ASSERT_STRING_EQUAL(get(w, a).name, "alpha");
  /* NULL clears; clearing an unnamed one is fine */
  OK(scn_transform_rename(w, a, NULL));
  CU_ASSERT_PTR_NULL(get(w, a).name);
  CU_ASSERT_EQUAL(scn_transform_find(w, "p/alpha", 7, &found), SCN_NOT_FOUND);
  OK(scn_transform_rename(w, a, NULL));
  /* the freed name can be taken by a sibling */
  OK(scn_transform_rename(w, b, "alpha"));
  OK(scn_transform_find(w, "p/alpha", 7, &found));
  CU_ASSERT_EQUAL(found, b);
  /* errors */
  CU_ASSERT_EQUAL(scn_transform_rename(w, a, ""), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_rename(w, a, "x/y"), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_rename(w, a, "\x7f"), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_rename(w, ent(s), "z"), SCN_NOT_FOUND);
  CU_ASSERT_PTR_NULL(get(w, a).name);
  /* many renames reuse storage and keep lookups right */
  char name[16];
  for (int k = 0; k < 500; k++) {
    snprintf(name, sizeof name, "v%d", k);
    OK(scn_transform_rename(w, a, name));
  }
  OK(scn_transform_find(w, "p/v499", 6, &found));
  CU_ASSERT_EQUAL(found, a);
  CU_ASSERT_EQUAL(scn_transform_find(w, "p/v498", 6, &found), SCN_NOT_FOUND);
  OK(scn_transform_find(w, "p/alpha", 7, &found));
  CU_ASSERT_EQUAL(found, b);
  scn_scene_free(s);
}

static void test_find(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", NULL);
  scn_entity b = mk(w, s, a, "b", NULL);
  scn_entity c = mk(w, s, b, "c", NULL);
  scn_entity car = mk(w, s, SCN_ENTITY_NONE, "car", NULL);
  scn_entity wheel = mk(w, s, car, "wheel_fl", NULL);
  scn_entity u = mk(w, s, car,
                    "r\xc3\xa4"
                    "d",
                    NULL);
  mk(w, s, car, NULL, NULL);
  scn_entity found = 12345;
  OK(scn_transform_find(w, "a/b/c", 5, &found));
  CU_ASSERT_EQUAL(found, c);
  OK(scn_transform_find(w, "a/b", 3, &found));
  CU_ASSERT_EQUAL(found, b);
  OK(scn_transform_find(w, "a/b/c", 3, &found)); /* only path_len bytes count */
  CU_ASSERT_EQUAL(found, b);
  OK(scn_transform_find(w, "a", 1, &found));
  CU_ASSERT_EQUAL(found, a);
  OK(scn_transform_find(w, "car/wheel_fl", 12, &found));
  CU_ASSERT_EQUAL(found, wheel);
  OK(scn_transform_find(w,
                        "car/r\xc3\xa4"
                        "d",
                        8, &found));
  CU_ASSERT_EQUAL(found, u);
  found = 777;
  CU_ASSERT_EQUAL(scn_transform_find(w, "a/x", 3, &found), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(found, 777);
  CU_ASSERT_EQUAL(scn_transform_find(w, "b", 1, &found), SCN_NOT_FOUND); /* not a root */
  CU_ASSERT_EQUAL(scn_transform_find(w, "a/b/c/d", 7, &found), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_find(w, "car/wheel", 9, &found), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_find(w, "A", 1, &found), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_find(w, "a//b", 4, &found), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_find(w, "a/", 2, &found), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_find(w, "/a", 2, &found), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_find(w, "/", 1, &found), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_find(w, "", 0, &found), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_find(w, "a/b\x01", 4, &found), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_find(w, "a/\xff", 3, &found), SCN_INVALID);
  char longseg[80];
  memset(longseg, 'q', sizeof longseg);
  CU_ASSERT_EQUAL(scn_transform_find(w, longseg, 65, &found), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_find(w, longseg, 64, &found), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(found, 777);
  scn_scene_free(s);
}

/* ---- relative ----------------------------------------------------------------------------- */

static void test_relative(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16], out[16], want[16];
  mat_t(m, 2, 0, 0);
  scn_entity to = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  mat_t(m, 3, 1, 0);
  scn_entity e = mk(w, s, to, NULL, m);
  scn_entity f = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  OK(scn_transform_relative(w, e, to, out));
  CU_ASSERT_TRUE(mat_eq(out, m)); /* relative to the parent is the local */
  OK(scn_transform_relative(w, e, e, out));
  CU_ASSERT_TRUE(mat_eq(out, IDENTITY));
  OK(scn_transform_relative(w, to, e, out));
  mat_t(want, -3, -1, 0);
  CU_ASSERT_TRUE(mat_eq(out, want));
  OK(scn_transform_relative(w, e, f, out));
  mat_t(want, 2, 0, 0);
  CU_ASSERT_TRUE(mat_eq(out, want));
  /* scale and rotation: world(to) * relative = world(e) */
  const float q1[4] = {0.1f, 0.7f, -0.2f, 0.4f}, q2[4] = {0.5f, -0.5f, 0.5f, 0.5f};
  float a[16], b[16], back[16];
  mat_trs(a, 1, 2, 3, q1, 2.5f);
  mat_trs(b, -9, 0.5f, 4, q2, 0.75f);
  OK(scn_transform_set_local(w, to, a));
  OK(scn_transform_set_local(w, f, b));
  OK(scn_transform_relative(w, e, f, out));
  mat_mul(b, out, back);
  CU_ASSERT_TRUE(mat_near(back, get(w, e).world, 1e-5f));
  /* singular target; a result that is not finite */
  float zero_scale[16], tiny[16], far[16];
  mat_ts(zero_scale, 1, 1, 1, 0);
  OK(scn_transform_set_local(w, f, zero_scale));
  memset(out, 0x11, sizeof out);
  memcpy(back, out, sizeof out);
  CU_ASSERT_EQUAL(scn_transform_relative(w, e, f, out), SCN_SINGULAR);
  CU_ASSERT_TRUE(memcmp(out, back, sizeof out) == 0);
  OK(scn_transform_relative(w, f, e, out)); /* only the target is inverted */
  mat_ts(tiny, 0, 0, 0, 1e-30f);
  mat_t(far, 1e20f, 0, 0);
  OK(scn_transform_set_local(w, f, tiny));
  OK(scn_transform_set_local(w, to, far));
  CU_ASSERT_EQUAL(scn_transform_relative(w, to, f, out), SCN_SINGULAR);
  /* unknown */
  scn_entity loose = ent(s);
  CU_ASSERT_EQUAL(scn_transform_relative(w, loose, e, out), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_relative(w, e, loose, out), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_relative(w, e, SCN_ENTITY_NONE, out), SCN_NOT_FOUND);
  scn_scene_free(s);
}

/* ---- destroy ------------------------------------------------------------------------------ */

static void test_destroy_nonrecursive(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16], mx[16];
  const float q[4] = {0.3f, 0.3f, 0.1f, 0.9f};
  mat_trs(mx, 1, 2, 3, q, 1.5f);
  mat_t(m, 1, 0, 0);
  scn_entity r0 = mk(w, s, SCN_ENTITY_NONE, "r0", m);
  scn_entity x = mk(w, s, SCN_ENTITY_NONE, "x", mx);
  scn_entity r2 = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  scn_entity c1 = mk(w, s, x, "c1", mx);
  scn_entity c2 = mk(w, s, x, NULL, m);
  scn_entity g = mk(w, s, c1, "g", mx);
  scn_transform_info bc1 = get(w, c1), bc2 = get(w, c2), bg = get(w, g);
  OK(scn_transform_destroy(w, x, false));
  CU_ASSERT_FALSE(scn_transform_exists(w, x));
  CU_ASSERT_TRUE(scn_entity_alive(s, x));
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 5);
  scn_transform_info info;
  CU_ASSERT_EQUAL(scn_transform_get(w, x, &info), SCN_NOT_FOUND);
  /* children are roots at the end of the root order, with their world matrices */
  elist order;
  preorder(w, &order);
  scn_entity want[5] = {r0, r2, c1, g, c2};
  CU_ASSERT_EQUAL(order.n, 5);
  CU_ASSERT_TRUE(memcmp(order.e, want, sizeof want) == 0);
  scn_transform_info ac1 = get(w, c1), ac2 = get(w, c2), ag = get(w, g);
  CU_ASSERT_EQUAL(ac1.parent, SCN_ENTITY_NONE);
  CU_ASSERT_EQUAL(ac2.parent, SCN_ENTITY_NONE);
  CU_ASSERT_TRUE(bits_eq(ac1.world, bc1.world));
  CU_ASSERT_TRUE(bits_eq(ac1.local, bc1.world));
  CU_ASSERT_TRUE(bits_eq(ac2.world, bc2.world));
  CU_ASSERT_TRUE(bits_eq(ac2.local, bc2.world));
  CU_ASSERT_EQUAL(ag.parent, c1);
  CU_ASSERT_TRUE(bits_eq(ag.local, bg.local));
  CU_ASSERT_TRUE(bits_eq(ag.world, bg.world));
  scn_entity found;
  OK(scn_transform_find(w, "c1/g", 4, &found));
  CU_ASSERT_EQUAL(found, g);
  CU_ASSERT_EQUAL(scn_transform_find(w, "x", 1, &found), SCN_NOT_FOUND);
  /* its name is free again; the entity can get a new transform */
  OK(scn_transform_create(w, x, SCN_ENTITY_NONE, "x", NULL));
  CU_ASSERT_EQUAL(scn_transform_destroy(w, ent(s), false), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_destroy(w, SCN_ENTITY_NONE, true), SCN_NOT_FOUND);

  /* a child may take its parent's root name */
  scn_entity n = mk(w, s, SCN_ENTITY_NONE, "n", NULL);
  scn_entity nk = mk(w, s, n, "n", NULL);
  OK(scn_transform_destroy(w, n, false));
  OK(scn_transform_find(w, "n", 1, &found));
  CU_ASSERT_EQUAL(found, nk);
  scn_scene_free(s);
}

static void test_destroy_name_clash(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16];
  mat_t(m, 1, 2, 3);
  scn_entity taken = mk(w, s, SCN_ENTITY_NONE, "r", m);
  scn_entity p = mk(w, s, SCN_ENTITY_NONE, "p", m);
  scn_entity q = mk(w, s, p, "q", m);
  scn_entity k1 = mk(w, s, q, "k1", m);
  scn_entity k2 = mk(w, s, q, "r", m);
  scn_entity k3 = mk(w, s, q, NULL, m);
  elist before, after;
  preorder(w, &before);
  scn_transform_info bk1 = get(w, k1), bk2 = get(w, k2);
  int events_before = 0;
  scn_world_visit_events(w, 0, count_event, &events_before);
  CU_ASSERT_EQUAL(scn_transform_destroy(w, q, false), SCN_EXISTS);
  preorder(w, &after);
  CU_ASSERT_EQUAL(after.n, before.n);
  CU_ASSERT_TRUE(memcmp(after.e, before.e, sizeof(scn_entity) * before.n) == 0);
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 6);
  CU_ASSERT_TRUE(scn_transform_exists(w, q));
  scn_entity kids[4];
  CU_ASSERT_EQUAL(children(w, q, kids, 4), 3);
  CU_ASSERT_EQUAL(kids[0], k1);
  CU_ASSERT_EQUAL(kids[1], k2);
  CU_ASSERT_EQUAL(kids[2], k3);
  CU_ASSERT_TRUE(bits_eq(get(w, k1).local, bk1.local));
  CU_ASSERT_TRUE(bits_eq(get(w, k2).local, bk2.local));
  scn_entity found;
  OK(scn_transform_find(w, "p/q/r", 5, &found));
  CU_ASSERT_EQUAL(found, k2);
  /* the refused destroy logged no events */
  int events = 0;
  scn_world_visit_events(w, 0, count_event, &events);
  CU_ASSERT_EQUAL(events, events_before);
  /* q's own name is free among the roots, so q can become one */
  OK(scn_transform_destroy(w, p, false));
  CU_ASSERT_EQUAL(get(w, q).parent, SCN_ENTITY_NONE);
  /* recursive destroy has no clash to fear */
  OK(scn_transform_destroy(w, q, true));
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 1);
  CU_ASSERT_TRUE(scn_transform_exists(w, taken));
  scn_scene_free(s);
}

static void test_destroy_recursive(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16];
  mat_t(m, 0, 1, 0);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", m);
  scn_entity b = mk(w, s, a, "b", m);
  scn_entity b1 = mk(w, s, b, "b1", m);
  scn_entity b2 = mk(w, s, b, "b2", m);
  scn_entity b11 = mk(w, s, b1, "b11", m);
  scn_entity c = mk(w, s, a, "c", m);
  scn_entity z = mk(w, s, SCN_ENTITY_NONE, "z", m);
  OK(scn_transform_destroy(w, b, true));
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 3);
  scn_entity gone[4] = {b, b1, b2, b11};
  for (int k = 0; k < 4; k++) {
    CU_ASSERT_FALSE(scn_transform_exists(w, gone[k]));
    CU_ASSERT_TRUE(scn_entity_alive(s, gone[k]));
  }
  scn_entity kids[4];
  CU_ASSERT_EQUAL(children(w, a, kids, 4), 1);
  CU_ASSERT_EQUAL(kids[0], c);
  CU_ASSERT_EQUAL(get(w, c).world[13], 2);
  CU_ASSERT_EQUAL(get(w, z).world[13], 1);
  elist order;
  preorder(w, &order);
  scn_entity want[3] = {a, c, z};
  CU_ASSERT_EQUAL(order.n, 3);
  CU_ASSERT_TRUE(memcmp(order.e, want, sizeof want) == 0);
  scn_entity found;
  CU_ASSERT_EQUAL(scn_transform_find(w, "a/b/b1", 6, &found), SCN_NOT_FOUND);
  /* names and entities are free to use again */
  OK(scn_transform_create(w, b1, a, "b", NULL));
  OK(scn_transform_find(w, "a/b", 3, &found));
  CU_ASSERT_EQUAL(found, b1);
  /* a root subtree, then everything */
  OK(scn_transform_destroy(w, a, true));
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 1);
  OK(scn_transform_destroy(w, z, true));
  CU_ASSERT_EQUAL(scn_world_transform_count(w), 0);
  preorder(w, &order);
  CU_ASSERT_EQUAL(order.n, 0);
  CU_ASSERT_EQUAL(scn_transform_destroy(w, z, true), SCN_NOT_FOUND);
  scn_scene_free(s);
}

/* Removing the most recently created leaf keeps the arrays in depth-first order; the subtree
 * ranges propagation relies on must shrink with it. */
static void test_destroy_last_keeps_ranges(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  float m[16], want[16];
  mat_t(m, 1, 0, 0);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  scn_entity b = mk(w, s, a, NULL, m);
  scn_entity c = mk(w, s, b, NULL, m);
  get(w, c);
  OK(scn_transform_destroy(w, c, false));
  mat_t(m, 0, 0, 3);
  scn_entity d = mk(w, s, SCN_ENTITY_NONE, NULL, m); /* takes the freed last place */
  get(w, d);
  scn_world_stats st0, st1;
  scn_world_get_stats(w, &st0);
  float ma[16];
  mat_t(ma, 0, 5, 0);
  OK(scn_transform_set_local(w, a, ma));
  scn_transform_info id = get(w, d), ib = get(w, b);
  scn_world_get_stats(w, &st1);
  CU_ASSERT_EQUAL(st1.recomputed - st0.recomputed, 2); /* a and b, not d */
  CU_ASSERT_TRUE(bits_eq(id.world, m));
  CU_ASSERT_EQUAL(id.parent, SCN_ENTITY_NONE);
  mat_t(want, 1, 5, 0);
  CU_ASSERT_TRUE(mat_eq(ib.world, want));
  elist sub;
  sub.n = 0;
  OK(scn_world_visit_changed(w, a, 0, collect, &sub));
  CU_ASSERT_EQUAL(sub.n, 2);
  CU_ASSERT_EQUAL(sub.e[0], a);
  CU_ASSERT_EQUAL(sub.e[1], b);
  /* the same through a recursive destroy of the last subtree, then a child appended */
  scn_entity e2 = mk(w, s, d, NULL, m);
  mk(w, s, e2, NULL, m);
  OK(scn_transform_destroy(w, e2, true));
  scn_entity f = mk(w, s, d, NULL, m);
  scn_entity g = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  OK(scn_transform_set_local(w, d, ma));
  mat_t(want, 0, 5, 3);
  CU_ASSERT_TRUE(mat_eq(get(w, f).world, want));
  CU_ASSERT_TRUE(bits_eq(get(w, g).world, m));
  sub.n = 0;
  OK(scn_world_visit_changed(w, d, 0, collect, &sub));
  CU_ASSERT_EQUAL(sub.n, 2);
  CU_ASSERT_EQUAL(sub.e[1], f);
  scn_scene_free(s);
}

/* ---- randomised integrity ----------------------------------------------------------------- */

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

/* ---- two worlds, chains, stats, relayout -------------------------------------------------- */

static void test_two_worlds(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w1, *w2;
  OK(scn_world_create(s, "one", &w1));
  OK(scn_world_create(s, "two", &w2));
  float m1[16], m2[16], want[16];
  mat_t(m1, 1, 0, 0);
  mat_t(m2, 0, 0, 7);
  scn_entity p = ent(s), e = ent(s);
  OK(scn_transform_create(w1, p, SCN_ENTITY_NONE, "p", m1));
  OK(scn_transform_create(w1, e, p, "e", m1));
  OK(scn_transform_create(w2, e, SCN_ENTITY_NONE, "e", m2));
  CU_ASSERT_EQUAL(get(w1, e).parent, p);
  CU_ASSERT_EQUAL(get(w2, e).parent, SCN_ENTITY_NONE);
  CU_ASSERT_EQUAL(get(w1, e).world[12], 2);
  CU_ASSERT_TRUE(bits_eq(get(w2, e).world, m2));
  /* changes in one world leave the other alone */
  OK(scn_transform_set_local(w1, e, m2));
  mat_mul(m1, m2, want);
  CU_ASSERT_TRUE(mat_eq(get(w1, e).world, want));
  CU_ASSERT_TRUE(bits_eq(get(w2, e).local, m2));
  OK(scn_transform_rename(w2, e, "renamed"));
  CU_ASSERT_STRING_EQUAL(get(w1, e).name, "e");
  CU_ASSERT_EQUAL(scn_transform_link(w2, e, p, SCN_KEEP_LOCAL), SCN_NOT_FOUND);
  OK(scn_transform_destroy(w1, e, false));
  CU_ASSERT_FALSE(scn_transform_exists(w1, e));
  CU_ASSERT_TRUE(scn_transform_exists(w2, e));
  CU_ASSERT_STRING_EQUAL(get(w2, e).name, "renamed");
  OK(scn_transform_create(w1, e, SCN_ENTITY_NONE, NULL, NULL));
  CU_ASSERT_EQUAL(scn_scene_transform_count(s), 3);
  /* destroying the entity removes both */
  OK(scn_entity_destroy(s, e));
  CU_ASSERT_FALSE(scn_transform_exists(w1, e));
  CU_ASSERT_FALSE(scn_transform_exists(w2, e));
  CU_ASSERT_EQUAL(scn_scene_transform_count(s), 1);
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

int t_register_core_transform(void) {
  static const t_test tests[] = {
      {"worlds: create, find, order, destroy, counts", test_world_basics},
      {"worlds: max_worlds gives LIMIT", test_world_limit},
      {"create and get: identity, parent, name, world", test_create_and_get},
      {"create errors and limits", test_create_errors},
      {"children in order", test_children_order},
      {"link keeping local", test_link_keep_local},
      {"link keeping world", test_link_keep_world},
      {"link errors and no-ops", test_link_errors},
      {"set_local", test_set_local},
      {"set_world", test_set_world},
      {"rename", test_rename},
      {"find by path", test_find},
      {"relative", test_relative},
      {"destroy non-recursive", test_destroy_nonrecursive},
      {"destroy refused on a root name clash", test_destroy_name_clash},
      {"destroy recursive", test_destroy_recursive},
      {"destroying the last leaf keeps subtree ranges", test_destroy_last_keeps_ranges},
      {"swap-erase integrity in a random forest", test_swap_erase_forest},
      {"propagation after many changes", test_propagation_many},
      {"an entity in two worlds", test_two_worlds},
      {"long chain and O(n) recomputation", test_long_chain},
      {"relayout keeps everything identical", test_relayout},
      {"a big world keeps every value through growth", test_big_world},
  };
  return T_ADD_SUITE("core_transform", NULL, NULL, tests);
}

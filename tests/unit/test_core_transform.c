/* Unit tests of worlds and the transform manager's operations: every operation and error path
 * (create, get, children, link, set_local and set_world, rename, find, relative, destroy), and
 * an entity in two worlds. Propagation and the layout over large and random forests have a
 * suite of their own (core_transform_forest). */
#include "core_fixtures.h"
#include "scn_core.h"
#include "suites.h"
#include "transform_fixtures.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- utilities ------------------------------------------------------------------------------- */

/* translation * uniform scale */
static void mat_ts(float m[16], float x, float y, float z, float s) {
  mat_t(m, x, y, z);
  m[0] = m[5] = m[10] = s;
}

static void mat_trs(float m[16], float tx, float ty, float tz, const float q[4], float s) {
  const float t[3] = {tx, ty, tz}, sc[3] = {s, s, s};
  CU_ASSERT_EQUAL_FATAL(scn_compose_trs(t, q, sc, m), SCN_OK);
}

static bool mat_near(const float a[16], const float b[16], float tol) {
  for (int i = 0; i < 16; i++) {
    float mag = fabsf(a[i]) > fabsf(b[i]) ? fabsf(a[i]) : fabsf(b[i]);
    if (!(fabsf(a[i] - b[i]) <= tol * (1 + mag)))
      return false;
  }
  return true;
}

static void count_event(void *ud, scn_entity e, scn_event_kind kind) {
  (void)e, (void)kind;
  ++*(int *)ud;
}

/* ---- worlds ---------------------------------------------------------------------------------- */

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

/* ---- create and get -------------------------------------------------------------------------- */

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

/* ---- children -------------------------------------------------------------------------------- */

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

/* ---- link ------------------------------------------------------------------------------------ */

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

/* ---- set_local and set_world ----------------------------------------------------------------- */

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

/* ---- rename and find ------------------------------------------------------------------------- */

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

/* ---- relative -------------------------------------------------------------------------------- */

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

/* ---- destroy --------------------------------------------------------------------------------- */

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

/* ---- two worlds, chains, stats, relayout ----------------------------------------------------- */

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
      {"an entity in two worlds", test_two_worlds},
  };
  return T_ADD_SUITE("core_transform", NULL, NULL, tests);
}

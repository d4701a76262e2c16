/* Unit tests of the parts of a transform: scn_decompose_trs against scn_compose_trs over
 * seeded random cases (mirrors and non-uniform scales included), its conventions (w >= 0, the
 * mirror on sx), what it refuses (shear, zero scale, non-finite values, a bad last row); and
 * scn_transform_set_parts in both spaces, its refusals, and in batches. */
#include "core_fixtures.h"
#include "mat_mul.h"
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Tolerances of a round trip through compose and decompose, in float32 epsilons (2^-23),
 * about twice the worst seen over a million random cases (0.98, 1.27 and 2.56): the scale
 * relative to itself, each quaternion component, and each element of the recomposed matrix
 * relative to the length of its column. */
#define TOL_S (2 * FLT_EPSILON)
#define TOL_Q (4 * FLT_EPSILON)
#define TOL_M (6 * FLT_EPSILON)

/* ---- seeded random numbers ------------------------------------------------------------- */

static uint64_t rng_state;

static void rng_seed(uint64_t seed) { rng_state = seed | 1; }

static uint64_t rng_next(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * UINT64_C(0x2545F4914F6CDD1D);
}

static double uniform(double lo, double hi) {
  return lo + (hi - lo) * (double)(rng_next() >> 11) / 9007199254740992.0;
}

/* A non-zero quaternion of any length from 1e-10 to 1e10 (compose normalises it). */
static void random_quat(float q[4]) {
  double len;
  do {
    double x = uniform(-1, 1), y = uniform(-1, 1), z = uniform(-1, 1), w = uniform(-1, 1);
    len = sqrt(x * x + y * y + z * z + w * w);
    double k = pow(10, uniform(-10, 10)) / len;
    q[0] = (float)(x * k), q[1] = (float)(y * k), q[2] = (float)(z * k), q[3] = (float)(w * k);
  } while (!(len > 1e-3));
}

/* A scale whose components each lie between 10^-decades and 10^decades, each negative with
 * probability 1/3; every fourth one uniform in magnitude. */
static void random_scale(float s[3], double decades) {
  bool same = rng_next() % 4 == 0;
  double m = pow(10, uniform(-decades, decades));
  for (int k = 0; k < 3; k++) {
    double v = same ? m : pow(10, uniform(-decades, decades));
    s[k] = (float)(rng_next() % 3 == 0 ? -v : v);
  }
}

/* ---- quaternions in double ------------------------------------------------------------- */

static void quat_unit(const float q[4], double out[4]) {
  double len =
      sqrt((double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2] + (double)q[3] * q[3]);
  for (int k = 0; k < 4; k++)
    out[k] = q[k] / len;
}

/* a * b, (x, y, z, w) */
static void quat_mul(const double a[4], const double b[4], double out[4]) {
  out[0] = a[3] * b[0] + a[0] * b[3] + a[1] * b[2] - a[2] * b[1];
  out[1] = a[3] * b[1] - a[0] * b[2] + a[1] * b[3] + a[2] * b[0];
  out[2] = a[3] * b[2] + a[0] * b[1] - a[1] * b[0] + a[2] * b[3];
  out[3] = a[3] * b[3] - a[0] * b[0] - a[1] * b[1] - a[2] * b[2];
}

/* Largest component difference between q and want, or q and -want (the same rotation). */
static double quat_dist(const float q[4], const double want[4]) {
  double plus = 0, minus = 0;
  for (int k = 0; k < 4; k++) {
    plus = fmax(plus, fabs(q[k] - want[k]));
    minus = fmax(minus, fabs(q[k] + want[k]));
  }
  return fmin(plus, minus);
}

/* What decomposing T * R * S must give for the rotation: R * S = R' * S' with S' the absolute
 * scales and the sign of the determinant on sx, so R' = R * diag(sy*sz, sy, sz) in signs,
 * which is a half turn about x, y or z (or nothing). */
static void expected_rotation(const float r[4], const float s[3], double out[4]) {
  bool ny = s[1] < 0, nz = s[2] < 0;
  double flip[4] = {0, 0, 0, 1};
  if (ny && nz)
    flip[0] = 1, flip[3] = 0; /* diag(1, -1, -1) */
  else if (ny)
    flip[2] = 1, flip[3] = 0; /* diag(-1, -1, 1) */
  else if (nz)
    flip[1] = 1, flip[3] = 0; /* diag(-1, 1, -1) */
  double q[4];
  quat_unit(r, q);
  quat_mul(q, flip, out);
}

/* Every element of b within tol * |s[column]| of a, the translation exactly. */
static bool recomposes(const float a[16], const float b[16], const float s[3], double tol) {
  for (int c = 0; c < 3; c++)
    for (int k = 0; k < 4; k++)
      if (!(fabs((double)a[4 * c + k] - b[4 * c + k]) <= tol * fabs((double)s[c])))
        return false;
  return memcmp(a + 12, b + 12, 4 * sizeof(float)) == 0;
}

/* ---- round trips ------------------------------------------------------------------------ */

/* Composes random parts, decomposes, and checks every convention and tolerance; returns the
 * number of failed cases (each failure also asserts once). */
static int round_trips(uint64_t seed, int cases, double decades, double tmax) {
  rng_seed(seed);
  int bad = 0;
  for (int n = 0; n < cases; n++) {
    float t[3], r[4], s[3], m[16];
    for (int k = 0; k < 3; k++)
      t[k] = (float)uniform(-tmax, tmax);
    random_quat(r);
    random_scale(s, decades);
    CU_ASSERT_EQUAL_FATAL(scn_compose_trs(t, r, s, m), SCN_OK);

    float t2[3], r2[4], s2[3], m2[16];
    bool ok = scn_decompose_trs(m, t2, r2, s2) == SCN_OK;
    if (ok) {
      /* the translation is copied */
      ok = memcmp(t, t2, sizeof t) == 0;
      /* w >= 0, and a unit quaternion */
      double len = sqrt((double)r2[0] * r2[0] + (double)r2[1] * r2[1] + (double)r2[2] * r2[2] +
                        (double)r2[3] * r2[3]);
      ok = ok && r2[3] >= 0 && !signbit(r2[3]) && fabs(len - 1) <= TOL_Q;
      /* column lengths; the mirror on sx exactly when the determinant is negative */
      bool mirror = ((s[0] < 0) != (s[1] < 0)) != (s[2] < 0);
      ok = ok && (s2[0] < 0) == mirror && s2[1] > 0 && s2[2] > 0;
      for (int k = 0; k < 3; k++)
        ok = ok && fabs(fabs((double)s2[k]) - fabs((double)s[k])) <= TOL_S * fabs((double)s[k]);
      /* the rotation R * S leaves once the signs are moved */
      double want[4];
      expected_rotation(r, s, want);
      ok = ok && quat_dist(r2, want) <= TOL_Q;
      /* and the parts give the matrix back */
      ok = ok && scn_compose_trs(t2, r2, s2, m2) == SCN_OK && recomposes(m, m2, s, TOL_M);
    }
    if (!ok) {
      if (bad++ == 0)
        CU_FAIL("a composed matrix does not decompose back to its parts");
    }
  }
  return bad;
}

static void test_round_trip(void) {
  /* scales from 1e-3 to 1e3, translations up to 1e4 */
  CU_ASSERT_EQUAL(round_trips(1, 20000, 3, 1e4), 0);
}

static void test_round_trip_wide(void) {
  /* scales from 1e-30 to 1e30, each on its own (very non-uniform), translations up to 1e30 */
  CU_ASSERT_EQUAL(round_trips(2, 20000, 30, 1e30), 0);
}

static void test_round_trip_extremes(void) {
  const float big = FLT_MAX;
  const float t[3] = {-FLT_MAX, FLT_MAX, 0};
  const float r[4] = {0.3f, -0.1f, 0.7f, 0.2f};
  const float scales[][3] = {
      {big, big, big}, {-big, 1, 1e-30f},   {1e-35f, 1e-35f, 1e-35f}, {1e-20f, 1e20f, 1},
      {1, 1, -1e-37f}, {FLT_MIN * 4, 1, 1}, {-1e30f, -1e30f, -1e30f}, {1, -big, 1},
  };
  for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
    float m[16], t2[3], r2[4], s2[3], m2[16];
    OK(scn_compose_trs(t, r, scales[k], m));
    CU_ASSERT_EQUAL_FATAL(scn_decompose_trs(m, t2, r2, s2), SCN_OK);
    CU_ASSERT_TRUE(scn_matrix_finite(m));
    for (int c = 0; c < 3; c++)
      CU_ASSERT_TRUE(fabs(fabs((double)s2[c]) - fabs((double)scales[k][c])) <=
                     TOL_S * fabs((double)scales[k][c]));
    CU_ASSERT_TRUE(r2[3] >= 0);
    OK(scn_compose_trs(t2, r2, s2, m2));
    CU_ASSERT_TRUE(recomposes(m, m2, scales[k], TOL_M));
  }
}

/* ---- conventions ------------------------------------------------------------------------ */

static void test_exact_cases(void) {
  float t[3], r[4], s[3];
  OK(scn_decompose_trs(IDENTITY, t, r, s));
  const float t0[3] = {0, 0, 0}, r0[4] = {0, 0, 0, 1}, s1[3] = {1, 1, 1};
  CU_ASSERT_TRUE(memcmp(t, t0, sizeof t) == 0);
  CU_ASSERT_TRUE(memcmp(r, r0, sizeof r) == 0);
  CU_ASSERT_TRUE(memcmp(s, s1, sizeof s) == 0);

  /* half turns have w = 0, and it is +0 */
  const float half[3][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}};
  for (int k = 0; k < 3; k++) {
    float m[16];
    OK(scn_compose_trs(NULL, half[k], NULL, m));
    OK(scn_decompose_trs(m, NULL, r, NULL));
    CU_ASSERT_EQUAL(r[3], 0);
    CU_ASSERT_FALSE(signbit(r[3]));
    CU_ASSERT_TRUE(quat_dist(r, (const double[4]){half[k][0], half[k][1], half[k][2], 0}) == 0);
  }

  /* a negative zero in the matrix does not make one in w */
  const float half_x[16] = {1, 0, 0, 0, 0, -1, -0.0f, 0, 0, 0, -1, 0, 0, 0, 0, 1};
  OK(scn_decompose_trs(half_x, NULL, r, NULL));
  CU_ASSERT_EQUAL(r[3], 0);
  CU_ASSERT_FALSE(signbit(r[3]));

  /* nor in x, y or z: a plain mirror's rotation is the identity, every zero of it +0 */
  const float mirror_x[16] = {-1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  OK(scn_decompose_trs(mirror_x, NULL, r, s));
  CU_ASSERT_EQUAL(s[0], -1);
  for (int k = 0; k < 3; k++)
    CU_ASSERT_FALSE(r[k] != 0 || signbit(r[k]));

  /* a quaternion with w < 0 comes back negated (the same rotation), whichever branch of the
   * extraction it takes: trace >= 0, and the largest diagonal element on x, y or z */
  const float neg[][4] = {
      {0.5f, 0.5f, 0.5f, -0.5f},
      {0.96f, 0, 0, -0.28f},
      {0, 0.96f, 0, -0.28f},
      {0, 0, 0.96f, -0.28f},
  };
  float m[16];
  for (int n = 0; n < 4; n++) {
    OK(scn_compose_trs(NULL, neg[n], NULL, m));
    OK(scn_decompose_trs(m, NULL, r, NULL));
    for (int k = 0; k < 4; k++)
      CU_ASSERT_DOUBLE_EQUAL(r[k], -neg[n][k], TOL_Q);
  }

  /* translation and scale are read off exactly */
  const float tt[3] = {1.5f, -2.25f, 1e30f}, ss[3] = {2, 3, 0.25f};
  OK(scn_compose_trs(tt, NULL, ss, m));
  OK(scn_decompose_trs(m, t, r, s));
  CU_ASSERT_TRUE(memcmp(t, tt, sizeof t) == 0);
  CU_ASSERT_TRUE(memcmp(s, ss, sizeof s) == 0);
  CU_ASSERT_TRUE(memcmp(r, r0, sizeof r) == 0);

  /* NULL outputs are skipped */
  OK(scn_decompose_trs(m, NULL, NULL, NULL));
}

static void test_mirrors(void) {
  /* Each mirror diag(a, b, c) comes back as sx negative times a rotation. */
  static const struct {
    float s[3];
    float s_want[3];
    float r_want[4];
  } cases[] = {
      {{-1, 1, 1}, {-1, 1, 1}, {0, 0, 0, 1}},
      {{1, -1, 1}, {-1, 1, 1}, {0, 0, 1, 0}},   /* diag(-1,-1,1) is a half turn about z */
      {{1, 1, -1}, {-1, 1, 1}, {0, 1, 0, 0}},   /* diag(-1,1,-1) about y */
      {{-1, -1, -1}, {-1, 1, 1}, {1, 0, 0, 0}}, /* diag(1,-1,-1) about x */
      {{-2, -3, 4}, {2, 3, 4}, {0, 0, 1, 0}},   /* determinant positive: no mirror */
      {{2, -3, -4}, {2, 3, 4}, {1, 0, 0, 0}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    float m[16], r[4], s[3];
    OK(scn_compose_trs(NULL, NULL, cases[k].s, m));
    OK(scn_decompose_trs(m, NULL, r, s));
    CU_ASSERT_TRUE(memcmp(s, cases[k].s_want, sizeof s) == 0);
    const double want[4] = {cases[k].r_want[0], cases[k].r_want[1], cases[k].r_want[2],
                            cases[k].r_want[3]};
    CU_ASSERT_TRUE(quat_dist(r, want) == 0);
    CU_ASSERT_TRUE(r[3] >= 0);
  }
}

/* ---- what is not T * R * S -------------------------------------------------------------- */

/* Largest |cosine| between two columns of S * R1 (R2 on the left changes no angle), in
 * double from the same float parts. */
static double shear_cosine(const float r1[4], const float s[3]) {
  double q[4], c[3][3];
  quat_unit(r1, q);
  double x = q[0], y = q[1], z = q[2], w = q[3];
  double rm[3][3] = {
      {1 - 2 * (y * y + z * z), 2 * (x * y + z * w), 2 * (x * z - y * w)},
      {2 * (x * y - z * w), 1 - 2 * (x * x + z * z), 2 * (y * z + x * w)},
      {2 * (x * z + y * w), 2 * (y * z - x * w), 1 - 2 * (x * x + y * y)},
  };
  for (int j = 0; j < 3; j++)
    for (int k = 0; k < 3; k++)
      c[j][k] = s[k] * rm[j][k];
  double worst = 0;
  for (int a = 0; a < 3; a++)
    for (int b = a + 1; b < 3; b++) {
      double d = 0, la = 0, lb = 0;
      for (int k = 0; k < 3; k++)
        d += c[a][k] * c[b][k], la += c[a][k] * c[a][k], lb += c[b][k] * c[b][k];
      worst = fmax(worst, fabs(d) / sqrt(la * lb));
    }
  return worst;
}

static void test_shear_property(void) {
  /* R2 * S * R1 with S non-uniform and R1 random: shear unless R1 happens to keep the scale
   * axes; the angle the columns make decides, computed apart in double. */
  rng_seed(3);
  int refused = 0, wrong = 0, cases = 5000;
  for (int n = 0; n < cases; n++) {
    float r1[4], r2[4], s[3], one[3] = {1, 1, 1}, a[16], b[16], m[16];
    random_quat(r1);
    random_quat(r2);
    for (int k = 0; k < 3; k++)
      s[k] = (float)(uniform(0.5, 2) * (rng_next() % 3 == 0 ? -1 : 1));
    s[rng_next() % 3] *= (float)uniform(1.05, 3); /* at least 5% apart from the others */
    OK(scn_compose_trs(NULL, r1, one, a));
    OK(scn_compose_trs(NULL, r2, s, b));
    mat_mul(b, a, m);
    double cosine = shear_cosine(r1, s);
    int rc = scn_decompose_trs(m, NULL, NULL, NULL);
    if (rc != SCN_OK)
      refused++;
    if ((cosine > 2 * SCN_TRS_SHEAR_TOL && rc != SCN_INVALID) ||
        (cosine < SCN_TRS_SHEAR_TOL / 2 && rc != SCN_OK))
      wrong++;
  }
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_TRUE(refused > cases * 95 / 100);
}

static void test_shear_cases(void) {
  float m[16];
  /* y's column leaning on x */
  memcpy(m, IDENTITY, sizeof m);
  m[4] = 0.5f;
  CU_ASSERT_EQUAL(scn_decompose_trs(m, NULL, NULL, NULL), SCN_INVALID);
  /* non-uniform scale under a 45-degree turn: a ratio of 1 + d gives a cosine near d */
  const float r45[4] = {0, 0, (float)sin(M_PI / 8), (float)cos(M_PI / 8)}, unit[3] = {1, 1, 1};
  const float ratio[][3] = {{1, 2, 1}, {1, 1.0001f, 1}, {1, 1.000001f, 1}};
  const int want[] = {SCN_INVALID, SCN_INVALID, SCN_OK};
  for (int k = 0; k < 3; k++) {
    float a[16], b[16];
    OK(scn_compose_trs(NULL, r45, unit, a));
    OK(scn_compose_trs(NULL, NULL, ratio[k], b));
    mat_mul(b, a, m);
    CU_ASSERT_EQUAL(scn_decompose_trs(m, NULL, NULL, NULL), want[k]);
  }
  /* the same scale after the rotation (R * S) is fine */
  OK(scn_compose_trs(NULL, r45, ratio[0], m));
  OK(scn_decompose_trs(m, NULL, NULL, NULL));
}

static void test_refused(void) {
  float m[16], t[3] = {7, 7, 7}, r[4] = {7, 7, 7, 7}, s[3] = {7, 7, 7};
  const float keep_t[3] = {7, 7, 7}, keep_r[4] = {7, 7, 7, 7};
  const float base_t[3] = {1, 2, 3}, base_r[4] = {0.1f, 0.2f, 0.3f, 0.9f}, base_s[3] = {1, 2, 3};
  float base[16];
  OK(scn_compose_trs(base_t, base_r, base_s, base));
  OK(scn_decompose_trs(base, NULL, NULL, NULL));

  /* a zero scale on any axis, or all */
  for (int k = 0; k < 4; k++) {
    float z[3] = {1, 2, 3};
    if (k < 3)
      z[k] = 0;
    else
      z[0] = z[1] = z[2] = 0;
    OK(scn_compose_trs(base_t, base_r, z, m));
    CU_ASSERT_EQUAL(scn_decompose_trs(m, t, r, s), SCN_INVALID);
  }
  /* a non-finite element anywhere */
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 16; i++)
    for (int k = 0; k < 3; k++) {
      memcpy(m, base, sizeof m);
      m[i] = bad[k];
      CU_ASSERT_EQUAL(scn_decompose_trs(m, t, r, s), SCN_INVALID);
    }
  /* a last row other than 0 0 0 1 (projective), however small the difference */
  const int row[4] = {3, 7, 11, 15};
  for (int k = 0; k < 4; k++) {
    memcpy(m, base, sizeof m);
    m[row[k]] += k == 3 ? 1e-7f : 1e-30f;
    CU_ASSERT_EQUAL(scn_decompose_trs(m, t, r, s), SCN_INVALID);
  }
  memcpy(m, base, sizeof m);
  m[15] = -0.0f;
  CU_ASSERT_EQUAL(scn_decompose_trs(m, t, r, s), SCN_INVALID);
  /* a column longer than any float scale */
  memcpy(m, IDENTITY, sizeof m);
  m[0] = m[1] = FLT_MAX;
  m[4] = -FLT_MAX, m[5] = FLT_MAX;
  CU_ASSERT_EQUAL(scn_decompose_trs(m, t, r, s), SCN_INVALID);
  /* two parallel columns (singular, no zero column) */
  memcpy(m, IDENTITY, sizeof m);
  m[4] = 1, m[5] = 0;
  CU_ASSERT_EQUAL(scn_decompose_trs(m, t, r, s), SCN_INVALID);
  /* outputs are untouched on refusal */
  CU_ASSERT_TRUE(memcmp(t, keep_t, sizeof t) == 0);
  CU_ASSERT_TRUE(memcmp(r, keep_r, sizeof r) == 0);
  CU_ASSERT_TRUE(memcmp(s, keep_t, sizeof s) == 0);
}

/* World matrices of a deep uniformly scaled chain, as propagation multiplies them in float,
 * still decompose: the tolerance leaves room for the rounding of a hierarchy. */
static void test_deep_chain(void) {
  scn_scene *sc = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(sc, "chain", &w));
  rng_seed(4);
  scn_entity parent = SCN_ENTITY_NONE, ids[64];
  for (int d = 0; d < 64; d++) {
    float t[3], r[4], s[3], m[16];
    for (int k = 0; k < 3; k++)
      t[k] = (float)uniform(-10, 10);
    random_quat(r);
    s[0] = s[1] = s[2] = (float)uniform(0.8, 1.25) * (d % 5 == 0 ? -1 : 1);
    OK(scn_compose_trs(t, r, s, m));
    ids[d] = mk(w, sc, parent, NULL, m);
    parent = ids[d];
  }
  for (int d = 0; d < 64; d++) {
    scn_transform_info info = get(w, ids[d]);
    float s[3];
    CU_ASSERT_EQUAL(scn_decompose_trs(info.world, NULL, NULL, s), SCN_OK);
  }
  scn_scene_free(sc);
}

/* ---- partial sets ------------------------------------------------------------------------ */

typedef struct parts {
  float t[3], r[4], s[3];
} parts;

static parts parts_of(const float m[16]) {
  parts p;
  CU_ASSERT_EQUAL_FATAL(scn_decompose_trs(m, p.t, p.r, p.s), SCN_OK);
  return p;
}

/* Each of a and b within tol * max(1, |b|). */
static bool near_vec(const float *a, const float *b, int n, double tol) {
  for (int k = 0; k < n; k++)
    if (!(fabs((double)a[k] - b[k]) <= tol * fmax(1, fabs((double)b[k]))))
      return false;
  return true;
}

/* a within tol of b as the same rotation (b need not be unit). */
static bool near_rot(const float a[4], const float b[4], double tol) {
  double want[4];
  quat_unit(b, want);
  return quat_dist(a, want) <= tol;
}

static bool world_ok(scn_world *w) {
  char err[256];
  return scn_world_check(w, err, sizeof err) == SCN_OK;
}

#define HAS_T 1
#define HAS_R 2
#define HAS_S 4

static const float NEW_T[3] = {-4, 0.5f, 12}, NEW_R[4] = {-0.2f, 0.9f, 0.4f, -0.3f},
                   NEW_S[3] = {0.5f, 3, 1.25f};

/* Sets the parts in mask from NEW_T, NEW_R, NEW_S and checks the others kept their values
 * (before: the parts of the matrix before) and the given ones took theirs. tol applies to
 * every comparison; the translation kept in local space is exact. */
static void check_partial(scn_world *w, scn_entity e, bool world_space, int mask, double tol) {
  scn_transform_info info = get(w, e);
  const float *cur = world_space ? info.world : info.local;
  parts before = parts_of(cur);
  float before_m[16];
  memcpy(before_m, cur, sizeof before_m);
  OK(scn_transform_set_parts(w, e, world_space, mask & HAS_T ? NEW_T : NULL,
                             mask & HAS_R ? NEW_R : NULL, mask & HAS_S ? NEW_S : NULL));
  info = get(w, e);
  const float *now = world_space ? info.world : info.local;
  parts after = parts_of(now);
  CU_ASSERT_TRUE(near_vec(after.t, mask & HAS_T ? NEW_T : before.t, 3, tol));
  CU_ASSERT_TRUE(near_rot(after.r, mask & HAS_R ? NEW_R : before.r, tol));
  CU_ASSERT_TRUE(near_vec(after.s, mask & HAS_S ? NEW_S : before.s, 3, tol));
  if (!world_space) {
    CU_ASSERT_TRUE(memcmp(after.t, mask & HAS_T ? NEW_T : before.t, sizeof after.t) == 0);
    /* the translation alone leaves the rest of the matrix as it was, bit for bit */
    if (mask == HAS_T)
      CU_ASSERT_TRUE(memcmp(now, before_m, 12 * sizeof(float)) == 0);
  }
  CU_ASSERT_TRUE(world_ok(w));
}

static void test_parts_each_subset(void) {
  scn_scene *sc = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(sc, "parts", &w));
  /* a mirrored, non-uniformly scaled root with a child (which must follow it) */
  const float t0[3] = {1, 2, 3}, r0[4] = {0.1f, 0.2f, 0.3f, 0.9f}, s0[3] = {-1.5f, 2, 0.5f};
  float base[16], child_local[16];
  OK(scn_compose_trs(t0, r0, s0, base));
  mat_t(child_local, 0, 1, 0);
  scn_entity e = mk(w, sc, SCN_ENTITY_NONE, "e", base);
  scn_entity c = mk(w, sc, e, "c", child_local);
  for (int mask = 1; mask < 8; mask++) {
    OK(scn_transform_set_local(w, e, base));
    check_partial(w, e, false, mask, TOL_Q);
    /* the child's world moved with its parent's new local */
    scn_transform_info pe = get(w, e), ce = get(w, c);
    float want[16];
    mat_mul(pe.world, child_local, want);
    for (int k = 0; k < 16; k++)
      CU_ASSERT_DOUBLE_EQUAL(ce.world[k], want[k], 1e-5 * fmax(1, fabs(want[k])));
  }
  /* the same again and again keeps it where it is */
  OK(scn_transform_set_local(w, e, base));
  for (int n = 0; n < 100; n++)
    OK(scn_transform_set_parts(w, e, false, NEW_T, NULL, NULL));
  scn_transform_info info = get(w, e);
  CU_ASSERT_TRUE(memcmp(info.local, base, 12 * sizeof(float)) == 0);
  scn_scene_free(sc);
}

static void test_parts_world_space(void) {
  scn_scene *sc = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(sc, "parts", &w));
  /* a rotated, uniformly scaled, moved parent: the child's world matrix is T * R * S */
  const float pt[3] = {5, -3, 2}, pr[4] = {0.3f, -0.5f, 0.2f, 0.8f}, ps[3] = {2.5f, 2.5f, 2.5f};
  const float ct[3] = {1, 2, 3}, cr[4] = {-0.4f, 0.1f, 0.7f, 0.5f}, cs[3] = {1, 2, -0.5f};
  float pm[16], cm[16];
  OK(scn_compose_trs(pt, pr, ps, pm));
  OK(scn_compose_trs(ct, cr, cs, cm));
  scn_entity p = mk(w, sc, SCN_ENTITY_NONE, "p", pm);
  scn_entity e = mk(w, sc, p, "e", cm);
  for (int mask = 1; mask < 8; mask++) {
    OK(scn_transform_set_local(w, e, cm));
    /* through the parent's inverse and back in float: a few epsilons of the parent's scale */
    check_partial(w, e, true, mask, 1e-5);
    scn_transform_info pi = get(w, p);
    CU_ASSERT_TRUE(memcmp(pi.local, pm, sizeof pm) == 0);
    CU_ASSERT_EQUAL(get(w, e).parent, p);
  }
  /* A non-uniformly scaled parent: a child turned in its local space has shear in its world
   * matrix (refused there, fine locally); turned in world space instead, its world matrix is
   * T * R * S and its local has the shear. */
  const float ns[3] = {1, 2, 1}, r45[4] = {0, 0, (float)sin(M_PI / 8), (float)cos(M_PI / 8)};
  float q[16];
  OK(scn_compose_trs(pt, NULL, ns, q));
  OK(scn_transform_set_local(w, p, q));
  OK(scn_compose_trs(NULL, r45, NULL, q));
  OK(scn_transform_set_local(w, e, q));
  CU_ASSERT_EQUAL(scn_transform_set_parts(w, e, true, NEW_T, NULL, NULL), SCN_INVALID);
  OK(scn_transform_set_parts(w, e, false, NULL, NULL, NEW_S));
  OK(scn_transform_set_local(w, e, IDENTITY));
  OK(scn_transform_set_parts(w, e, true, NULL, r45, NULL));
  CU_ASSERT_EQUAL(scn_transform_set_parts(w, e, false, NEW_T, NULL, NULL), SCN_INVALID);
  OK(scn_transform_set_parts(w, e, true, NEW_T, NULL, NULL));
  parts got = parts_of(get(w, e).world);
  CU_ASSERT_TRUE(near_rot(got.r, r45, 1e-5));
  CU_ASSERT_TRUE(near_vec(got.s, ns, 3, 1e-5));
  CU_ASSERT_TRUE(world_ok(w));
  scn_scene_free(sc);
}

/* A refused set changes nothing: same local, and nothing to recompute at the next flush. */
static void expect_refused(scn_world *w, scn_entity e, bool world_space, const float *t,
                           const float *r, const float *s, int want) {
  scn_world_flush(w);
  scn_transform_info before = get(w, e);
  scn_world_stats st0, st1;
  scn_world_get_stats(w, &st0);
  CU_ASSERT_EQUAL(scn_transform_set_parts(w, e, world_space, t, r, s), want);
  scn_world_flush(w);
  scn_world_get_stats(w, &st1);
  CU_ASSERT_EQUAL(st1.recomputed, st0.recomputed);
  scn_transform_info after = get(w, e);
  CU_ASSERT_TRUE(memcmp(before.local, after.local, sizeof before.local) == 0);
  CU_ASSERT_TRUE(memcmp(before.world, after.world, sizeof before.world) == 0);
}

static void test_parts_refused(void) {
  scn_scene *sc = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(sc, "parts", &w));
  const float t[3] = {1, 2, 3}, r[4] = {0, 0, 1, 1}, s[3] = {2, 2, 2};
  float m[16];

  /* a sheared local: every part and both spaces */
  memcpy(m, IDENTITY, sizeof m);
  m[4] = 0.5f;
  scn_entity sheared = mk(w, sc, SCN_ENTITY_NONE, "sheared", m);
  for (int mask = 1; mask < 8; mask++)
    for (int ws = 0; ws < 2; ws++)
      expect_refused(w, sheared, ws, mask & HAS_T ? t : NULL, mask & HAS_R ? r : NULL,
                     mask & HAS_S ? s : NULL, SCN_INVALID);
  /* a zero scale, a bad last row */
  const float zero_s[3] = {1, 0, 1};
  OK(scn_compose_trs(t, r, zero_s, m));
  scn_entity flat = mk(w, sc, SCN_ENTITY_NONE, "flat", m);
  expect_refused(w, flat, false, NULL, r, NULL, SCN_INVALID);
  expect_refused(w, flat, false, t, NULL, NULL, SCN_INVALID);
  mat_t(m, 1, 2, 3);
  m[3] = 0.25f;
  scn_entity proj = mk(w, sc, SCN_ENTITY_NONE, "proj", m);
  expect_refused(w, proj, false, NULL, NULL, s, SCN_INVALID);
  /* a child under a zero-scale parent: its world matrix is singular, so not T * R * S */
  scn_entity under = mk(w, sc, flat, "under", NULL);
  expect_refused(w, under, true, t, NULL, NULL, SCN_INVALID);

  /* bad parts, checked before the entity is looked up */
  scn_entity e = mk(w, sc, SCN_ENTITY_NONE, "e", NULL);
  const float zero_r[4] = {0, -0.0f, 0, 0}, nan_r[4] = {0, NAN, 0, 1};
  const float inf_t[3] = {0, INFINITY, 0}, nan_s[3] = {1, 1, NAN};
  expect_refused(w, e, false, NULL, NULL, NULL, SCN_INVALID);
  expect_refused(w, e, false, NULL, zero_r, NULL, SCN_INVALID);
  expect_refused(w, e, true, NULL, nan_r, NULL, SCN_INVALID);
  expect_refused(w, e, false, inf_t, r, s, SCN_INVALID);
  expect_refused(w, e, false, t, r, nan_s, SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_set_parts(w, e + 1000, false, NULL, zero_r, NULL), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_transform_set_parts(w, e + 1000, false, t, NULL, NULL), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_transform_set_parts(w, SCN_ENTITY_NONE, true, t, NULL, NULL), SCN_NOT_FOUND);

  /* a world that needs a local beyond float under a tiny parent: SINGULAR */
  const float tiny[3] = {1e-30f, 1e-30f, 1e-30f}, huge[3] = {1e10f, 1e10f, 1e10f};
  OK(scn_compose_trs(NULL, r, tiny, m));
  scn_entity small = mk(w, sc, SCN_ENTITY_NONE, "small", m);
  scn_entity kid = mk(w, sc, small, "kid", NULL);
  expect_refused(w, kid, true, NULL, NULL, huge, SCN_SINGULAR);
  OK(scn_transform_set_parts(w, kid, true, NULL, NULL, tiny)); /* a local of scale 1 */

  /* a zero scale may be given (as in a full set); the result then has no parts */
  OK(scn_transform_set_parts(w, e, false, NULL, NULL, zero_s));
  expect_refused(w, e, false, t, NULL, NULL, SCN_INVALID);
  CU_ASSERT_TRUE(world_ok(w));
  scn_scene_free(sc);
}

static void test_parts_batch(void) {
  scn_scene *sc = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(sc, "parts", &w));
  const float pt[3] = {1, 0, 0}, pr[4] = {0, 0.6f, 0, 0.8f}, ps[3] = {2, 2, 2};
  float pm[16], cm[16], m[16];
  OK(scn_compose_trs(pt, pr, ps, pm));
  mat_t(cm, 0, 1, 0);
  scn_entity p = mk(w, sc, SCN_ENTITY_NONE, "p", pm);
  scn_entity c = mk(w, sc, p, "c", cm);
  scn_transform_info p0 = get(w, p), c0 = get(w, c);

  OK(scn_batch_begin(sc));
  /* the child's first change in the batch is a partial one */
  OK(scn_transform_set_parts(w, c, false, NULL, NULL, NEW_S));
  /* a full set, then parts of it: each sees the one before */
  const float t1[3] = {7, 8, 9}, s1[3] = {1, 3, 1};
  OK(scn_compose_trs(t1, NULL, s1, m));
  OK(scn_transform_set_local(w, p, m));
  OK(scn_transform_set_parts(w, p, false, NULL, NEW_R, NULL));
  parts got = parts_of(get(w, p).local);
  CU_ASSERT_TRUE(memcmp(got.t, t1, sizeof got.t) == 0);
  CU_ASSERT_TRUE(near_vec(got.s, s1, 3, TOL_S));
  CU_ASSERT_TRUE(near_rot(got.r, NEW_R, TOL_Q));
  OK(scn_transform_set_parts(w, p, false, NULL, NULL, ps));
  got = parts_of(get(w, p).local);
  CU_ASSERT_TRUE(memcmp(got.t, t1, sizeof got.t) == 0);
  CU_ASSERT_TRUE(near_rot(got.r, NEW_R, TOL_Q));
  /* the child's world, in the parent's new place */
  OK(scn_transform_set_parts(w, c, true, NEW_T, NULL, NULL));
  got = parts_of(get(w, c).world);
  CU_ASSERT_TRUE(near_vec(got.t, NEW_T, 3, 1e-5));
  CU_ASSERT_TRUE(near_rot(got.r, NEW_R, 1e-5));
  /* a refusal inside the batch leaves the rest of it */
  CU_ASSERT_EQUAL(scn_transform_set_parts(w, c, false, NULL, (const float[4]){0, 0, 0, 0}, NULL),
                  SCN_INVALID);
  CU_ASSERT_TRUE(near_vec(parts_of(get(w, c).world).t, NEW_T, 3, 1e-5));
  scn_batch_rollback(sc);

  scn_transform_info p1 = get(w, p), c1 = get(w, c);
  CU_ASSERT_TRUE(memcmp(p0.local, p1.local, sizeof p0.local) == 0);
  CU_ASSERT_TRUE(memcmp(p0.world, p1.world, sizeof p0.world) == 0);
  CU_ASSERT_TRUE(memcmp(c0.local, c1.local, sizeof c0.local) == 0);
  CU_ASSERT_TRUE(memcmp(c0.world, c1.world, sizeof c0.world) == 0);
  CU_ASSERT_TRUE(world_ok(w));

  /* committed, the parts stay */
  OK(scn_batch_begin(sc));
  OK(scn_transform_set_parts(w, p, false, NEW_T, NULL, NULL));
  OK(scn_transform_set_parts(w, c, true, NULL, NEW_R, NULL));
  scn_batch_commit(sc);
  CU_ASSERT_TRUE(memcmp(parts_of(get(w, p).local).t, NEW_T, sizeof NEW_T) == 0);
  CU_ASSERT_TRUE(near_rot(parts_of(get(w, c).world).r, NEW_R, 1e-5));
  CU_ASSERT_TRUE(world_ok(w));
  scn_scene_free(sc);
}

int t_register_core_trs(void) {
  static const t_test tests[] = {
      {"decompose_trs round trip of random T, R, S with mirrors", test_round_trip},
      {"decompose_trs round trip with scales from 1e-30 to 1e30", test_round_trip_wide},
      {"decompose_trs round trip at FLT_MAX and tiny scales", test_round_trip_extremes},
      {"decompose_trs exact cases, w >= 0 and +0", test_exact_cases},
      {"decompose_trs puts a mirror on sx", test_mirrors},
      {"decompose_trs reports non-uniform scale under rotation as shear", test_shear_property},
      {"decompose_trs shear cases around the tolerance", test_shear_cases},
      {"decompose_trs refuses zero scale, non-finite, bad last row", test_refused},
      {"decompose_trs accepts world matrices of a 64-deep chain", test_deep_chain},
      {"set_parts: each part and each pair keeps the rest", test_parts_each_subset},
      {"set_parts in world space under a rotated, scaled parent", test_parts_world_space},
      {"set_parts refusals change nothing", test_parts_refused},
      {"set_parts in a batch: sees the sets before, rolls back", test_parts_batch},
  };
  return T_ADD_SUITE("core_trs", NULL, NULL, tests);
}

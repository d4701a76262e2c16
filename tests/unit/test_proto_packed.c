/* Unit tests of packed frames (proto/packed.h): the primitives (varints, zigzag, smallest
 * three), the per-subscription table, payloads written out by hand from the contract's rules,
 * every refusal of the decoder, and properties over random T x R x S matrices (non-uniform
 * scales, mirrors, near-identity rotations, each smallest-three index): the round trip stays
 * within the contract's tolerance, what is not T x R x S goes raw and nothing else does, a
 * chain of 10,000 deltas never drifts, and a new step or origin makes every translation
 * absolute. No daemon, no sockets.
 *
 * The random cases draw from one seed, printed; SCN_SEED replays a failing one. */
#include "packed.h"
#include "rng.h"
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define PI 3.14159265358979323846

static uint64_t seed_of(const char *what) {
  const char *env = getenv("SCN_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : UINT64_C(0x5eedc0de);
  printf("\n  proto_packed %s: seed %" PRIu64 " (SCN_SEED=%" PRIu64 " replays it)\n", what, seed,
         seed);
  return seed;
}

static double uniform(rng *r, double lo, double hi) { return lo + (hi - lo) * rng_unit(r); }

/* ---- random matrices --------------------------------------------------------------------- */

/* A unit quaternion: uniform, near identity (a few thousandths of a degree to a degree), or
 * with a chosen component the largest (so every smallest-three index comes up). */
static void random_quat(rng *r, float q[4]) {
  double c[4], len = 0;
  uint32_t kind = rng_below(r, 4);
  for (int i = 0; i < 4; i++)
    c[i] = uniform(r, -1, 1);
  if (kind == 1) { /* near identity */
    double scale = pow(10, uniform(r, -5, -1.8));
    c[0] *= scale, c[1] *= scale, c[2] *= scale, c[3] = 1;
  } else if (kind == 2) { /* component i the largest, others small and of any sign */
    int big = (int)rng_below(r, 4);
    for (int i = 0; i < 4; i++)
      c[i] = i == big ? (rng_below(r, 2) ? 1 : -1) : c[i] * 0.3;
  }
  for (int i = 0; i < 4; i++)
    len += c[i] * c[i];
  for (int i = 0; i < 4; i++)
    q[i] = (float)(c[i] / sqrt(len));
}

/* A scale: uniform, non-uniform, 1, or any of those with one axis mirrored. */
static void random_scale(rng *r, float s[3]) {
  uint32_t kind = rng_below(r, 4);
  for (int k = 0; k < 3; k++)
    s[k] = (float)pow(10, uniform(r, -2, 2));
  if (kind == 0)
    s[1] = s[2] = s[0];
  else if (kind == 1)
    s[0] = s[1] = s[2] = 1;
  if (rng_below(r, 3) == 0)
    s[rng_below(r, 3)] *= -1;
}

static void random_translation(rng *r, float t[3]) {
  double range = pow(10, uniform(r, -1, 5));
  for (int k = 0; k < 3; k++)
    t[k] = (float)uniform(r, -range, range);
}

static void random_trs(rng *r, float m[16]) {
  float t[3], q[4], s[3];
  random_translation(r, t);
  random_quat(r, q);
  random_scale(r, s);
  CU_ASSERT_EQUAL_FATAL(scn_compose_trs(t, q, s, m), SCN_OK);
}

/* A matrix that is not T x R x S: shear (some barely past the tolerance), a zero scale, a last
 * row other than 0 0 0 1, or a non-finite element. */
static void random_non_trs(rng *r, float m[16]) {
  random_trs(r, m);
  int a = (int)rng_below(r, 3), b = (a + 1 + (int)rng_below(r, 2)) % 3;
  switch (rng_below(r, 4)) {
  case 0: { /* column b leans towards column a by a cosine well past SCN_TRS_SHEAR_TOL */
    double la = 0, lb = 0;
    for (int i = 0; i < 3; i++)
      la += (double)m[4 * a + i] * m[4 * a + i], lb += (double)m[4 * b + i] * m[4 * b + i];
    double k = uniform(r, 1e-3, 0.5) * (rng_below(r, 2) ? 1 : -1) * sqrt(lb / la);
    for (int i = 0; i < 3; i++)
      m[4 * b + i] += (float)(k * m[4 * a + i]);
    break;
  }
  case 1:
    m[4 * a] = m[4 * a + 1] = m[4 * a + 2] = 0;
    break;
  case 2:
    m[4 * a + 3] = 0.25f;
    break;
  default:
    m[rng_below(r, 16)] = rng_below(r, 2) ? INFINITY : NAN;
    break;
  }
}

/* ---- helpers ------------------------------------------------------------------------------- */

static void set_grid(scn_packed_baseline *b, double step, double x, double y, double z) {
  const double origin[3] = {x, y, z};
  CU_ASSERT_FATAL(scn_packed_baseline_set_grid(b, step, origin));
}

/* Encodes n entities (and removed ones) into out, emptied first. */
static void encode(scn_packed_baseline *b, const uint64_t *ids, const float (*m)[16], size_t n,
                   const uint64_t *removed, size_t removed_n, scn_buf *out) {
  out->len = 0;
  scn_packed_changes c = {ids, m, NULL, n, removed, removed_n};
  CU_ASSERT_EQUAL_FATAL(scn_packed_encode(b, &c, out), SCN_PACKED_OK);
  CU_ASSERT_FATAL(!out->failed);
}

/* The flags of each entry of a payload, read here without the decoder; the number of entries. */
static size_t entry_flags(const scn_buf *payload, uint8_t *flags, size_t max) {
  const uint8_t *p = (const uint8_t *)payload->data;
  size_t pos = 0, used;
  uint64_t count, gap, v;
  CU_ASSERT_EQUAL_FATAL(scn_packed_get_varint(p, payload->len, &count, &used), SCN_PACKED_OK);
  pos += used;
  for (size_t i = 0; i < count; i++) {
    CU_ASSERT_EQUAL_FATAL(scn_packed_get_varint(p + pos, payload->len - pos, &gap, &used), 0);
    pos += used;
    uint8_t f = p[pos++];
    if (i < max)
      flags[i] = f;
    if (f & SCN_PACKED_RAW) {
      pos += 64;
      continue;
    }
    for (int k = 0; f & SCN_PACKED_T && k < 3; k++) {
      CU_ASSERT_EQUAL_FATAL(scn_packed_get_varint(p + pos, payload->len - pos, &v, &used), 0);
      pos += used;
    }
    pos +=
        (f & SCN_PACKED_R ? 4 : 0) + (f & SCN_PACKED_S_UNI ? 4 : 0) + (f & SCN_PACKED_S ? 12 : 0);
  }
  return (size_t)count;
}

static double quat_angle_deg(const float a[4], const float b[4]) {
  double dot = 0;
  for (int i = 0; i < 4; i++)
    dot += (double)a[i] * b[i];
  return 2 * acos(fmin(1, fabs(dot))) * 180 / PI;
}

/* got is want (a T x R x S matrix) within the contract's tolerance on grid g: translation within
 * step / 2 per axis plus float32 rounding, rotation within 0.5 degrees, scale as taken apart
 * (within the snapping and the rounding of T * R * S). The rotation's error in *deg. */
static bool within_tolerance(const scn_packed_baseline *g, const float want[16],
                             const float got[16], double *deg) {
  float tw[3], rw[4], sw[3], tg[3], rg[4], sg[3];
  if (scn_decompose_trs(want, tw, rw, sw) != SCN_OK || scn_decompose_trs(got, tg, rg, sg))
    return false;
  bool ok = true;
  for (int k = 0; k < 3; k++) {
    double tol = g->step / 2 * (1 + 1e-9) + fabs((double)tw[k]) * 0x1p-23 + 1e-30;
    ok &= fabs((double)tg[k] - tw[k]) <= tol;
    ok &= fabs((double)sg[k] - sw[k]) <= 1e-5 * fabs((double)sw[k]);
  }
  *deg = quat_angle_deg(rw, rg);
  return ok && *deg <= 0.5;
}

/* The client's table holds what the daemon's does. */
static bool baselines_agree(const scn_packed_baseline *daemon, const scn_packed_baseline *client) {
  if (daemon->count != client->count)
    return false;
  for (size_t i = 0; i <= daemon->mask && daemon->ids; i++) {
    if (!daemon->ids[i])
      continue;
    const scn_packed_value *d = &daemon->values[i];
    const scn_packed_value *c = scn_packed_baseline_find(client, daemon->ids[i]);
    if (!c || c->has_q != d->has_q || c->rotation != d->rotation ||
        memcmp(c->scale, d->scale, sizeof c->scale) ||
        (d->has_q && memcmp(c->q, d->q, sizeof c->q)))
      return false;
  }
  return true;
}

/* ---- primitives ----------------------------------------------------------------------------- */

static void test_varint_zigzag(void) {
  static const struct {
    uint64_t v;
    size_t n;
    uint8_t bytes[10];
  } known[] = {
      {0, 1, {0}},
      {1, 1, {1}},
      {127, 1, {0x7f}},
      {128, 2, {0x80, 0x01}},
      {300, 2, {0xac, 0x02}},
      {16384, 3, {0x80, 0x80, 0x01}},
      {UINT64_MAX, 10, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
  };
  for (size_t i = 0; i < COUNT(known); i++) {
    uint8_t out[SCN_PACKED_VARINT_MAX];
    CU_ASSERT_EQUAL(scn_packed_put_varint(out, known[i].v), known[i].n);
    CU_ASSERT_EQUAL(memcmp(out, known[i].bytes, known[i].n), 0);
    uint64_t v;
    size_t used;
    CU_ASSERT_EQUAL(scn_packed_get_varint(out, known[i].n, &v, &used), SCN_PACKED_OK);
    CU_ASSERT_EQUAL(v, known[i].v);
    CU_ASSERT_EQUAL(used, known[i].n);
    if (known[i].n > 1) /* cut short */
      CU_ASSERT_EQUAL(scn_packed_get_varint(out, known[i].n - 1, &v, &used), SCN_PACKED_TRUNCATED);
  }
  uint64_t v;
  size_t used;
  const uint8_t past64[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
  const uint8_t eleven[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0};
  const uint8_t overlong[3] = {0x85, 0x80, 0x00}; /* 5 in three bytes: LEB128 allows it */
  CU_ASSERT_EQUAL(scn_packed_get_varint(past64, 10, &v, &used), SCN_PACKED_VARINT);
  CU_ASSERT_EQUAL(scn_packed_get_varint(eleven, 11, &v, &used), SCN_PACKED_VARINT);
  CU_ASSERT_EQUAL(scn_packed_get_varint(overlong, 3, &v, &used), SCN_PACKED_OK);
  CU_ASSERT(v == 5 && used == 3);
  CU_ASSERT_EQUAL(scn_packed_get_varint(overlong, 0, &v, &used), SCN_PACKED_TRUNCATED);

  static const int64_t signed_v[] = {0, -1, 1, -2, 2, INT64_MAX, INT64_MIN};
  static const uint64_t zz[] = {0, 1, 2, 3, 4, UINT64_MAX - 1, UINT64_MAX};
  for (size_t i = 0; i < COUNT(signed_v); i++) {
    CU_ASSERT_EQUAL(scn_packed_zigzag(signed_v[i]), zz[i]);
    CU_ASSERT_EQUAL(scn_packed_unzigzag(zz[i]), signed_v[i]);
  }
  rng r = {seed_of("varints")};
  for (int i = 0; i < 100000; i++) {
    uint64_t x = rng_next(&r) >> rng_below(&r, 64);
    uint8_t out[SCN_PACKED_VARINT_MAX];
    size_t n = scn_packed_put_varint(out, x);
    CU_ASSERT_EQUAL(scn_packed_get_varint(out, n, &v, &used), SCN_PACKED_OK);
    CU_ASSERT(v == x && used == n);
    CU_ASSERT_EQUAL(scn_packed_zigzag(scn_packed_unzigzag(x)), x);
  }
  uint8_t f[4];
  scn_packed_put_f32(f, -1.5f); /* 0xbfc00000 */
  CU_ASSERT(f[0] == 0 && f[1] == 0 && f[2] == 0xc0 && f[3] == 0xbf);
  CU_ASSERT_EQUAL(scn_packed_get_f32(f), -1.5f);
}

static void test_smallest_three(void) {
  /* identity: w the largest, x, y, z each round(511.5) = 512 */
  const float identity[4] = {0, 0, 0, 1}, half_x[4] = {1, 0, 0, 0};
  CU_ASSERT_EQUAL(scn_packed_quat_encode(identity), 0xE0080200u);
  CU_ASSERT_EQUAL(scn_packed_quat_encode(half_x), 0x20080200u);
  /* negated so the largest is positive: -q is the same rotation and the same u32 */
  const float q[4] = {0.1f, -0.7f, 0.2f, 0.6782330f}, neg[4] = {-0.1f, 0.7f, -0.2f, -0.6782330f};
  uint32_t u = scn_packed_quat_encode(q);
  CU_ASSERT_EQUAL(u >> 30, 1);
  CU_ASSERT_EQUAL(u, scn_packed_quat_encode(neg));
  float back[4];
  scn_packed_quat_decode(u, back);
  CU_ASSERT(back[1] > 0 && quat_angle_deg(q, back) < 0.2);
  /* the extremes of k decode to finite components, the omitted one clamped to 0 */
  scn_packed_quat_decode(0x3fffffffu, back);
  CU_ASSERT(back[0] == 0 && isfinite(back[1]) && isfinite(back[2]) && isfinite(back[3]));

  rng r = {seed_of("smallest three")};
  int seen[4] = {0};
  double worst = 0;
  for (int i = 0; i < 200000; i++) {
    float a[4], b[4];
    random_quat(&r, a);
    u = scn_packed_quat_encode(a);
    seen[u >> 30]++;
    scn_packed_quat_decode(u, b);
    worst = fmax(worst, quat_angle_deg(a, b));
    uint32_t any = (uint32_t)rng_next(&r);
    scn_packed_quat_decode(any, b);
    double len = 0;
    for (int k = 0; k < 4; k++)
      len += (double)b[k] * b[k];
    CU_ASSERT(isfinite(len) && len > 0 && b[any >> 30] >= 0);
  }
  printf("  worst rotation error of 200000 quaternions: %.4f degrees\n", worst);
  CU_ASSERT(worst <= 0.5);
  for (int k = 0; k < 4; k++)
    CU_ASSERT(seen[k] > 0);
}

/* ---- the table ------------------------------------------------------------------------------ */

static void test_baseline_table(void) {
  enum { IDS = 3000 };
  static bool in[IDS + 1];
  static int64_t mark[IDS + 1];
  memset(in, 0, sizeof in);
  scn_packed_baseline b = {0};
  set_grid(&b, 1, 0, 0, 0);
  rng r = {seed_of("table")};
  size_t count = 0;
  for (int op = 0; op < 300000; op++) {
    /* ids spread like the core's (slot low, generation high) and clustered, to make runs */
    uint64_t id = 1 + rng_below(&r, IDS);
    uint64_t key = id | (uint64_t)(id % 7) << 32;
    if (rng_below(&r, 3)) {
      scn_packed_value *v = scn_packed_baseline_put(&b, key);
      CU_ASSERT_PTR_NOT_NULL_FATAL(v);
      count += !in[id];
      if (!in[id])
        CU_ASSERT(!v->has_q && v->scale[0] == 1 && v->scale[2] == 1);
      in[id] = true;
      v->q[0] = mark[id] = op;
    } else {
      scn_packed_baseline_remove(&b, key);
      count -= in[id];
      in[id] = false;
    }
    if (op % 1000 == 0) {
      for (uint64_t k = 1; k <= IDS; k++) {
        scn_packed_value *v = scn_packed_baseline_find(&b, k | (k % 7) << 32);
        CU_ASSERT_EQUAL(v != NULL, in[k]);
        if (v && v->q[0] != mark[k])
          CU_FAIL("a value moved to another id");
      }
    }
    CU_ASSERT_EQUAL(b.count, count);
  }
  CU_ASSERT_PTR_NULL(scn_packed_baseline_find(&b, 0));
  CU_ASSERT_PTR_NULL(scn_packed_baseline_put(&b, 0));
  scn_packed_baseline_remove(&b, 0);
  scn_packed_baseline_remove(&b, UINT64_C(1) << 52); /* absent: nothing happens */
  CU_ASSERT_EQUAL(b.count, count);
  /* forgetting translations keeps the entities; clearing forgets them */
  scn_packed_value *v = scn_packed_baseline_put(&b, 42);
  v->has_q = true;
  set_grid(&b, 1, 0, 0, 0); /* the same grid: nothing forgotten */
  CU_ASSERT(scn_packed_baseline_find(&b, 42)->has_q);
  set_grid(&b, 1, 0, 0, 0.5);
  CU_ASSERT(!scn_packed_baseline_find(&b, 42)->has_q);
  scn_packed_baseline_clear(&b);
  CU_ASSERT(b.count == 0 && !scn_packed_baseline_find(&b, 42));
  const double bad[3] = {0, NAN, 0}, good[3] = {0, 0, 0};
  CU_ASSERT(!scn_packed_baseline_set_grid(&b, 0, good));
  CU_ASSERT(!scn_packed_baseline_set_grid(&b, -1, good));
  CU_ASSERT(!scn_packed_baseline_set_grid(&b, INFINITY, good));
  CU_ASSERT(!scn_packed_baseline_set_grid(&b, 1, bad));
  CU_ASSERT(b.step == 1 && b.origin[2] == 0.5);
  scn_packed_baseline_free(&b);
  scn_packed_baseline_free(&b);
}

/* ---- payloads by hand ------------------------------------------------------------------------ */

static const float SHEARED[16] = {1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 4, 5, 6, 1};

/* Frame A, on step 0.5 and origin 0: entity 5 at (1, -2, 3), no rotation or scale; 7 sheared;
 * 300 turned half about x, scaled 2, at (-0.5, 0, 100); 301 mirrored in x; 9, 200 and 1000
 * removed. */
static const uint8_t FRAME_A[] = {
    0x04,                         /* four entries */
    0x05, 0x05, 0x04, 0x07, 0x0c, /* 5: T|R, q (2, -4, 6) zigzagged */
    0x00, 0x02, 0x08, 0xe0,       /*    identity: 3 << 30 | 512 << 20 | 512 << 10 | 512 */
    0x02, 0x20,                   /* 7 (gap 2): raw */
    0x00, 0x00, 0x80, 0x3f, 0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0,    0, /* column 0: 1 0 0 0 */
    0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x80, 0x3f, 0,    0,    0,    0,
    0,    0,    0,    0, /* 1 1 0 0 */
    0,    0,    0,    0,    0,    0,    0,    0,    0x00, 0x00, 0x80, 0x3f,
    0,    0,    0,    0,                                                    /* 0 0 1 0 */
    0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0xa0, 0x40, 0x00, 0x00, 0xc0, 0x40, /* 4 5 6 */
    0x00, 0x00, 0x80, 0x3f,                                                 /*    1 */
    0xa5, 0x02, 0x0d,             /* 300 (gap 293): T|R|uniform scale */
    0x01, 0x00, 0x90, 0x03,       /*    q (-1, 0, 200) */
    0x00, 0x02, 0x08, 0x20,       /*    x the largest: 0 << 30 | 512 << 20 | ... */
    0x00, 0x00, 0x00, 0x40,       /*    2.0 */
    0x01, 0x15, 0x00, 0x00, 0x00, /* 301: T|R|scale, q 0 */
    0x00, 0x02, 0x08, 0xe0,       /*    identity (the mirror is in sx) */
    0x00, 0x00, 0x80, 0xbf, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x80, 0x3f, /* -1 1 1 */
    0x03, 0x09, 0xbf, 0x01, 0xa0, 0x06, /* removed: 9, 200 (gap 191), 1000 (gap 800) */
};
/* Frame B: 5 moved by +0.5 in x (a delta of q), 7 now T x R x S (absolute again), 300 sent
 * unchanged (flags 0), nothing removed. */
static const uint8_t FRAME_B[] = {
    0x03, 0x05, 0x03, 0x02, 0x00, 0x00,                   /* 5: T|delta, (1, 0, 0) */
    0x02, 0x05, 0x10, 0x14, 0x18, 0x00, 0x02, 0x08, 0xe0, /* 7: T|R, q (8, 10, 12) */
    0xa5, 0x02, 0x00,                                     /* 300: nothing changed */
    0x00,
};
/* Frame C, after the origin moved to (1, 1, 1): 5, unmoved, is absolute again. */
static const uint8_t FRAME_C[] = {0x01, 0x05, 0x01, 0x02, 0x0b, 0x08, 0x00};

static void hand_matrices(float m[4][16]) {
  static const float t5[3] = {1, -2, 3}, q0[4] = {0, 0, 0, 1}, half_x[4] = {1, 0, 0, 0};
  static const float t300[3] = {-0.5f, 0, 100}, s300[3] = {2, 2, 2}, mirror[3] = {-1, 1, 1};
  CU_ASSERT_EQUAL(scn_compose_trs(t5, q0, NULL, m[0]), SCN_OK);
  memcpy(m[1], SHEARED, sizeof SHEARED);
  CU_ASSERT_EQUAL(scn_compose_trs(t300, half_x, s300, m[2]), SCN_OK);
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, q0, mirror, m[3]), SCN_OK);
}

static void expect_bytes(const scn_buf *got, const uint8_t *want, size_t n, const char *which) {
  bool same = got->len == n && memcmp(got->data, want, n) == 0;
  if (!same) {
    printf("\n  %s: got %zu bytes:", which, got->len);
    for (size_t i = 0; i < got->len; i++)
      printf(" %02x", (uint8_t)got->data[i]);
    printf("\n");
  }
  CU_ASSERT(same);
}

static void test_hand_payloads(void) {
  float m[4][16];
  hand_matrices(m);
  const uint64_t ids_a[] = {5, 7, 300, 301}, removed_a[] = {9, 200, 1000};
  scn_packed_baseline daemon = {0}, client = {0};
  scn_packed_frame f = {0};
  scn_buf out = {0};
  set_grid(&daemon, 0.5, 0, 0, 0);
  set_grid(&client, 0.5, 0, 0, 0);
  encode(&daemon, ids_a, (const float(*)[16])m, 4, removed_a, 3, &out);
  expect_bytes(&out, FRAME_A, sizeof FRAME_A, "frame A");
  CU_ASSERT_EQUAL(daemon.count, 3); /* the raw one holds nothing */
  CU_ASSERT_EQUAL(scn_packed_decode(&client, FRAME_A, sizeof FRAME_A, &f, NULL), SCN_PACKED_OK);
  CU_ASSERT(f.n == 4 && f.removed_n == 3 && f.ids[2] == 300 && f.removed[2] == 1000);
  CU_ASSERT(f.next_raw[1] && memcmp(f.m[1], SHEARED, sizeof SHEARED) == 0);
  for (int i = 0; i < 4; i++) {
    double deg;
    if (i != 1)
      CU_ASSERT(within_tolerance(&client, m[i], f.m[i], &deg));
  }
  CU_ASSERT(f.m[0][12] == 1 && f.m[0][13] == -2 && f.m[0][14] == 3); /* q * step is exact */
  CU_ASSERT(f.m[3][0] < 0 && f.m[2][5] < 0 && fabsf(f.m[2][0] - 2) < 1e-5f);
  CU_ASSERT(baselines_agree(&daemon, &client));

  float b[3][16];
  const uint64_t ids_b[] = {5, 7, 300};
  memcpy(b[0], m[0], sizeof b[0]);
  b[0][12] = 1.5f;
  const float q0[4] = {0, 0, 0, 1}, t7[3] = {4, 5, 6};
  CU_ASSERT_EQUAL(scn_compose_trs(t7, q0, NULL, b[1]), SCN_OK);
  memcpy(b[2], m[2], sizeof b[2]);
  encode(&daemon, ids_b, (const float(*)[16])b, 3, NULL, 0, &out);
  expect_bytes(&out, FRAME_B, sizeof FRAME_B, "frame B");
  CU_ASSERT_EQUAL(scn_packed_decode(&client, FRAME_B, sizeof FRAME_B, &f, NULL), SCN_PACKED_OK);
  CU_ASSERT(f.n == 3 && f.m[0][12] == 1.5f && f.m[1][13] == 5);
  CU_ASSERT(baselines_agree(&daemon, &client));

  set_grid(&daemon, 0.5, 1, 1, 1);
  set_grid(&client, 0.5, 1, 1, 1);
  encode(&daemon, ids_b, (const float(*)[16])b, 1, NULL, 0, &out);
  expect_bytes(&out, FRAME_C, sizeof FRAME_C, "frame C");
  CU_ASSERT_EQUAL(scn_packed_decode(&client, FRAME_C, sizeof FRAME_C, &f, NULL), SCN_PACKED_OK);
  CU_ASSERT(f.n == 1 && f.m[0][12] == 1.5f && f.m[0][13] == -2 && f.m[0][14] == 3);
  scn_packed_frame_free(&f);
  scn_buf_free(&out);
  scn_packed_baseline_free(&daemon);
  scn_packed_baseline_free(&client);
}

/* ---- refusals ------------------------------------------------------------------------------- */

typedef struct refusal {
  const char *what;
  uint8_t bytes[16];
  size_t len;
  scn_packed_status st;
  size_t at;
} refusal;

/* The client of each case holds 5 (q (1, 2, 3), or INT64_MAX in x for the overflow case) and
 * 6 (without a translation: its step changed and it has not appeared since). */
static const refusal REFUSALS[] = {
    {"empty", {0}, 0, SCN_PACKED_TRUNCATED, 0},
    {"a count with nothing after it", {1}, 1, SCN_PACKED_COUNT, 0},
    {"a count the bytes cannot hold", {2, 5, 0, 1}, 4, SCN_PACKED_COUNT, 0},
    {"a count of 11 bytes",
     {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0},
     11,
     SCN_PACKED_VARINT,
     0},
    {"a gap over 64 bits",
     {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0},
     13,
     SCN_PACKED_VARINT,
     1},
    {"a first gap of 0", {1, 0, 0, 0}, 4, SCN_PACKED_ORDER, 1},
    {"a repeated id", {2, 5, 0, 0, 0, 0}, 6, SCN_PACKED_ORDER, 3},
    {"an id of 2^53",
     {1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0},
     11,
     SCN_PACKED_ID_RANGE,
     1},
    {"ids that sum past 2^53 - 1",
     {2, 5, 0, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0},
     13,
     SCN_PACKED_ID_RANGE,
     3},
    {"flag 64", {1, 5, 0x40, 0}, 4, SCN_PACKED_FLAGS, 2},
    {"raw with a translation", {1, 5, 0x21, 0}, 4, SCN_PACKED_FLAGS, 2},
    {"a delta without 1", {1, 5, 0x02, 0}, 4, SCN_PACKED_FLAGS, 2},
    {"both scales", {1, 5, 0x18, 0}, 4, SCN_PACKED_FLAGS, 2},
    {"a new entity left out", {1, 7, 0x00, 0}, 4, SCN_PACKED_NO_BASELINE, 2},
    {"a new entity without rotation", {1, 7, 0x01, 0, 0, 0, 0}, 7, SCN_PACKED_NO_BASELINE, 2},
    {"a new entity without translation", {1, 7, 0x04, 0, 0, 0, 0, 0}, 8, SCN_PACKED_NO_BASELINE, 2},
    {"a delta for a new entity",
     {1, 7, 0x07, 0, 0, 0, 0, 2, 8, 0xe0, 0},
     11,
     SCN_PACKED_NO_BASELINE,
     2},
    {"a forgotten translation left out", {1, 6, 0x00, 0}, 4, SCN_PACKED_NO_BASELINE, 2},
    {"a delta of a forgotten translation", {1, 6, 0x03, 2, 0, 0, 0}, 7, SCN_PACKED_NO_BASELINE, 2},
    {"a delta past INT64_MAX", {1, 5, 0x03, 2, 0, 0, 0}, 7, SCN_PACKED_OVERFLOW, 3},
    {"translation cut short", {1, 5, 0x01, 2, 4}, 5, SCN_PACKED_TRUNCATED, 5},
    {"rotation cut short", {1, 5, 0x04, 0, 2, 8}, 6, SCN_PACKED_TRUNCATED, 3},
    {"scale cut short", {1, 5, 0x10, 0, 0, 0x80, 0x3f, 0, 0, 0x80}, 10, SCN_PACKED_TRUNCATED, 3},
    {"raw cut short", {1, 5, 0x20, 0, 0, 0, 0}, 7, SCN_PACKED_TRUNCATED, 3},
    {"no removed count", {1, 5, 0x00}, 3, SCN_PACKED_TRUNCATED, 3},
    {"a removed count the bytes cannot hold", {0, 3, 1, 2}, 4, SCN_PACKED_COUNT, 1},
    {"a removed gap of 0", {0, 2, 1, 0}, 4, SCN_PACKED_ORDER, 3},
    {"trailing bytes", {0, 0, 0}, 3, SCN_PACKED_TRAILING, 2},
};

static void client_for_refusals(scn_packed_baseline *b, bool at_limit) {
  set_grid(b, 1, 0, 0, 0);
  scn_packed_value *v = scn_packed_baseline_put(b, 5);
  *v = (scn_packed_value){{at_limit ? INT64_MAX : 1, 2, 3}, {1, 1, 1}, 0xE0080200u, true};
  v = scn_packed_baseline_put(b, 6);
  *v = (scn_packed_value){{4, 5, 6}, {2, 2, 2}, 0x20080200u, false};
}

static bool client_untouched(const scn_packed_baseline *b, bool at_limit) {
  const scn_packed_value *v5 = scn_packed_baseline_find(b, 5), *v6 = scn_packed_baseline_find(b, 6);
  return b->count == 2 && v5 && v6 && v5->q[0] == (at_limit ? INT64_MAX : 1) && v5->has_q &&
         v5->rotation == 0xE0080200u && !v6->has_q && v6->scale[0] == 2;
}

static void test_refusals(void) {
  scn_packed_frame f = {0};
  for (size_t i = 0; i < COUNT(REFUSALS); i++) {
    const refusal *c = &REFUSALS[i];
    bool at_limit = c->st == SCN_PACKED_OVERFLOW;
    scn_packed_baseline b = {0};
    client_for_refusals(&b, at_limit);
    size_t at = SIZE_MAX;
    scn_packed_status st = scn_packed_decode(&b, c->bytes, c->len, &f, &at);
    if (st != c->st || at != c->at)
      printf("\n  %s: status %d at %zu (want %d at %zu: %s)\n", c->what, st, at, c->st, c->at,
             scn_packed_status_text(c->st));
    CU_ASSERT_EQUAL(st, c->st);
    CU_ASSERT_EQUAL(at, c->at);
    CU_ASSERT(f.n == 0 && f.removed_n == 0);
    CU_ASSERT(client_untouched(&b, at_limit));
    scn_packed_baseline_free(&b);
  }
  /* every strict prefix of a good payload is refused, and changes nothing */
  scn_packed_baseline b = {0};
  for (size_t n = 0; n < sizeof FRAME_A; n++) {
    client_for_refusals(&b, false);
    scn_packed_status st = scn_packed_decode(&b, FRAME_A, n, &f, NULL);
    CU_ASSERT(st == SCN_PACKED_TRUNCATED || st == SCN_PACKED_COUNT);
    CU_ASSERT(client_untouched(&b, false));
  }
  /* every byte of it changed to every value: decoded or refused (ASan watches the reads) */
  uint8_t copy[sizeof FRAME_A];
  size_t decoded = 0;
  for (size_t i = 0; i < sizeof FRAME_A; i++)
    for (int v = 0; v < 256; v++) {
      memcpy(copy, FRAME_A, sizeof copy);
      copy[i] = (uint8_t)v;
      scn_packed_baseline_clear(&b);
      decoded += scn_packed_decode(&b, copy, sizeof copy, &f, NULL) == SCN_PACKED_OK;
    }
  CU_ASSERT(decoded > 0);
  for (int s = SCN_PACKED_OK; s <= SCN_PACKED_NOMEM; s++)
    CU_ASSERT(strcmp(scn_packed_status_text((scn_packed_status)s), "unknown status") != 0);
  scn_packed_baseline_free(&b);
  scn_packed_frame_free(&f);
}

/* ---- the encoder's own rules ----------------------------------------------------------------- */

static void test_encoder_rules(void) {
  scn_packed_baseline b = {0};
  scn_buf out = {0};
  set_grid(&b, 0.001, 0, 0, 0);
  float m[2][16];
  const float t[3] = {1, 2, 3}, q[4] = {0.5f, 0.5f, 0.5f, 0.5f}, one[3] = {1, 1, 1};
  CU_ASSERT_EQUAL(scn_compose_trs(t, q, one, m[0]), SCN_OK);
  memcpy(m[1], m[0], sizeof m[0]);
  /* ids 0, past 2^53 - 1, repeated or decreasing: refused, nothing written or changed */
  const uint64_t bad[][2] = {{0, 1}, {1, SCN_ENTITY_MAX + 1}, {3, 3}, {4, 2}};
  for (size_t i = 0; i < COUNT(bad); i++) {
    scn_packed_changes c = {bad[i], (const float(*)[16])m, NULL, 2, NULL, 0};
    CU_ASSERT_EQUAL(scn_packed_encode(&b, &c, &out), SCN_PACKED_BAD_INPUT);
    scn_packed_changes r = {NULL, NULL, NULL, 0, bad[i], 2};
    CU_ASSERT_EQUAL(scn_packed_encode(&b, &r, &out), SCN_PACKED_BAD_INPUT);
  }
  CU_ASSERT(out.len == 0 && b.count == 0);

  /* a scale of 1 under a rotation is not sent, even when taking the matrix apart gives
   * 1 - 2^-24 (snapped); nor is it when the matrix comes again unchanged (flags 0) */
  const uint64_t ids[] = {1, SCN_ENTITY_MAX};
  uint8_t flags[2];
  encode(&b, ids, (const float(*)[16])m, 2, NULL, 0, &out);
  CU_ASSERT_EQUAL(entry_flags(&out, flags, 2), 2);
  CU_ASSERT(flags[0] == (SCN_PACKED_T | SCN_PACKED_R) && flags[1] == flags[0]);
  encode(&b, ids, (const float(*)[16])m, 2, NULL, 0, &out);
  CU_ASSERT(entry_flags(&out, flags, 2) == 2 && flags[0] == 0 && flags[1] == 0);
  rng r = {seed_of("scale snapping")};
  for (int i = 0; i < 2000; i++) {
    float tq[4], mm[16];
    random_quat(&r, tq);
    CU_ASSERT_EQUAL(scn_compose_trs(t, tq, one, mm), SCN_OK);
    scn_packed_parts p;
    scn_packed_parts_of(mm, &p);
    CU_ASSERT(!p.raw && p.scale[0] == 1 && p.scale[1] == 1 && p.scale[2] == 1);
  }
  /* a translation 2^62 steps or more from the origin cannot be a delta: raw */
  set_grid(&b, 1e-20, 0, 0, 0);
  encode(&b, ids, (const float(*)[16])m, 1, NULL, 0, &out);
  CU_ASSERT(entry_flags(&out, flags, 1) == 1 && flags[0] == SCN_PACKED_RAW);
  CU_ASSERT_PTR_NULL(scn_packed_baseline_find(&b, 1));
  /* parts given by the caller are used as given */
  set_grid(&b, 0.001, 0, 0, 0);
  scn_packed_parts parts[2];
  scn_packed_parts_of(m[0], &parts[0]);
  scn_packed_parts_of(m[1], &parts[1]);
  parts[1].scale[0] = 3;
  scn_packed_changes c = {ids, (const float(*)[16])m, parts, 2, NULL, 0};
  out.len = 0;
  CU_ASSERT_EQUAL(scn_packed_encode(&b, &c, &out), SCN_PACKED_OK);
  CU_ASSERT(entry_flags(&out, flags, 2) == 2 && flags[0] == (SCN_PACKED_T | SCN_PACKED_R));
  CU_ASSERT_EQUAL(flags[1], SCN_PACKED_T | SCN_PACKED_S); /* its q was forgotten too */
  scn_buf_free(&out);
  scn_packed_baseline_free(&b);
}

/* ---- properties ------------------------------------------------------------------------------ */

enum { POOL = 200, BATCH = 48 };

/* One frame of the round trip: a random subset of the pool changes (T x R x S, or now and then
 * not), some entities are removed, and the client must get each within tolerance. */
static bool round_trip_frame(rng *r, scn_packed_baseline *daemon, scn_packed_baseline *client,
                             scn_packed_frame *f, scn_buf *out, int seen[4], double *worst) {
  uint64_t ids[BATCH], removed[8];
  static float m[BATCH][16];
  size_t n = 0, nr = 0;
  uint64_t next = 1 + rng_below(r, 5);
  for (; n < BATCH && next <= POOL; next += 1 + rng_below(r, 8), n++) {
    ids[n] = next * 1000003;
    bool trs = rng_below(r, 10) != 0;
    if (trs)
      random_trs(r, m[n]);
    else
      random_non_trs(r, m[n]);
    scn_packed_parts p;
    scn_packed_parts_of(m[n], &p);
    CU_ASSERT_EQUAL(p.raw, !trs); /* raw for what is not T x R x S, and only that */
    if (!p.raw)
      seen[p.rotation >> 30]++;
  }
  for (uint64_t id = next + rng_below(r, 8); nr < 8 && id <= POOL + 50; id += 1 + rng_below(r, 40))
    removed[nr++] = id * 1000003;
  encode(daemon, ids, (const float(*)[16])m, n, removed, nr, out);
  size_t at;
  if (scn_packed_decode(client, (const uint8_t *)out->data, out->len, f, &at) != SCN_PACKED_OK ||
      f->n != n || f->removed_n != nr)
    return false;
  bool ok = true;
  for (size_t i = 0; i < n; i++) {
    ok &= f->ids[i] == ids[i];
    float t[3];
    if (scn_decompose_trs(m[i], t, NULL, NULL) != SCN_OK) {
      float sent[16]; /* as base64 writes a non-finite element */
      for (int k = 0; k < 16; k++)
        sent[k] = isnan(m[i][k]) ? 0 : isinf(m[i][k]) ? copysignf(FLT_MAX, m[i][k]) : m[i][k];
      ok &= f->next_raw[i] && memcmp(f->m[i], sent, sizeof sent) == 0;
      continue;
    }
    double deg;
    ok &= !f->next_raw[i] && within_tolerance(client, m[i], f->m[i], &deg);
    *worst = fmax(*worst, deg);
  }
  return ok && baselines_agree(daemon, client);
}

static void test_round_trip(void) {
  rng r = {seed_of("round trip")};
  static const double steps[] = {0.001, 0.01, 1.0 / 3, 0.5, 7, 1e-6};
  scn_packed_baseline daemon = {0}, client = {0};
  scn_packed_frame f = {0};
  scn_buf out = {0};
  int seen[4] = {0};
  double worst = 0;
  bool ok = true;
  for (int frame = 0; ok && frame < 3000; frame++) {
    if (frame % 50 == 0) { /* now and then a new grid, or a full frame */
      double step = steps[rng_below(&r, COUNT(steps))];
      double o[3] = {uniform(&r, -1e3, 1e3), uniform(&r, -1e3, 1e3), uniform(&r, -1e3, 1e3)};
      set_grid(&daemon, step, o[0], o[1], o[2]);
      set_grid(&client, step, o[0], o[1], o[2]);
      if (rng_below(&r, 2)) {
        scn_packed_baseline_clear(&daemon);
        scn_packed_baseline_clear(&client);
      }
    }
    ok = round_trip_frame(&r, &daemon, &client, &f, &out, seen, &worst);
    if (!ok)
      printf("  frame %d failed\n", frame);
  }
  CU_ASSERT(ok);
  printf("  worst rotation error: %.4f degrees; smallest-three indices %d %d %d %d\n", worst,
         seen[0], seen[1], seen[2], seen[3]);
  for (int k = 0; k < 4; k++)
    CU_ASSERT(seen[k] > 0);
  scn_packed_frame_free(&f);
  scn_buf_free(&out);
  scn_packed_baseline_free(&daemon);
  scn_packed_baseline_free(&client);
}

/* 10,000 ticks of random walks on step 0.001: after every frame, the decoded translation is
 * within step / 2 of the true one, and every translation sent is a delta. */
static void test_delta_chain(void) {
  enum { N = 16, TICKS = 10000 };
  rng r = {seed_of("delta chain")};
  scn_packed_baseline daemon = {0}, client = {0};
  scn_packed_frame f = {0};
  scn_buf out = {0};
  const double step = 0.001, origin[3] = {123.4, -56.7, 0.25};
  set_grid(&daemon, step, origin[0], origin[1], origin[2]);
  set_grid(&client, step, origin[0], origin[1], origin[2]);
  uint64_t ids[N];
  double pos[N][3];
  float q[N][4], s[N][3], m[N][16];
  for (int i = 0; i < N; i++) {
    ids[i] = (uint64_t)(i + 1) * 77;
    for (int k = 0; k < 3; k++)
      pos[i][k] = uniform(&r, -500, 500), s[i][k] = 1;
    random_quat(&r, q[i]);
  }
  double worst = 0;
  size_t absolute = 0, bytes = 0;
  bool ok = true;
  for (int tick = 0; ok && tick < TICKS; tick++) {
    for (int i = 0; i < N; i++) {
      float t[3];
      for (int k = 0; k < 3; k++)
        t[k] = (float)(pos[i][k] += uniform(&r, -0.05, 0.05));
      if (rng_below(&r, 4) == 0) /* now and then it turns a little */
        q[i][rng_below(&r, 3)] += (float)uniform(&r, -0.01, 0.01);
      CU_ASSERT_EQUAL_FATAL(scn_compose_trs(t, q[i], s[i], m[i]), SCN_OK);
    }
    encode(&daemon, ids, (const float(*)[16])m, N, NULL, 0, &out);
    bytes += out.len;
    uint8_t flags[N];
    entry_flags(&out, flags, N);
    for (int i = 0; tick && i < N; i++)
      absolute += (flags[i] & (SCN_PACKED_T | SCN_PACKED_DELTA)) == SCN_PACKED_T;
    ok = scn_packed_decode(&client, (const uint8_t *)out.data, out.len, &f, NULL) == SCN_PACKED_OK;
    for (int i = 0; ok && i < N; i++)
      for (int k = 0; k < 3; k++) {
        double err = fabs((double)f.m[i][12 + k] - m[i][12 + k]);
        worst = fmax(worst, err);
        ok &= err <= step / 2 + fabs((double)m[i][12 + k]) * 0x1p-23;
      }
  }
  CU_ASSERT(ok);
  CU_ASSERT(baselines_agree(&daemon, &client));
  CU_ASSERT_EQUAL(absolute, 0); /* after the first frame, every translation is a delta */
  printf("  after %d ticks: worst translation error %.6f (step %.3f), %.2f bytes an entry\n", TICKS,
         worst, step, (double)bytes / (N * TICKS));
  scn_packed_frame_free(&f);
  scn_buf_free(&out);
  scn_packed_baseline_free(&daemon);
  scn_packed_baseline_free(&client);
}

/* A new step or origin: every translation of the next frame is absolute, and so is that of an
 * entity left out of it the next time it comes; the rotations stay deltas. Clearing (a full
 * frame) makes everything absolute. */
static void test_new_grid(void) {
  enum { N = 40 };
  rng r = {seed_of("new grid")};
  scn_packed_baseline daemon = {0}, client = {0};
  scn_packed_frame f = {0};
  scn_buf out = {0};
  set_grid(&daemon, 0.01, 0, 0, 0);
  set_grid(&client, 0.01, 0, 0, 0);
  uint64_t ids[N];
  float m[N][16];
  for (int i = 0; i < N; i++) {
    ids[i] = (uint64_t)i + 1;
    random_trs(&r, m[i]);
  }
  uint8_t flags[N];
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < N; i++)
      m[i][12] += 1;                      /* each moves in x */
    size_t half = round == 2 ? N / 2 : N; /* round 2 sends only the first half */
    encode(&daemon, ids, (const float(*)[16])m, half, NULL, 0, &out);
    CU_ASSERT_EQUAL(entry_flags(&out, flags, N), half);
    CU_ASSERT_EQUAL(scn_packed_decode(&client, (const uint8_t *)out.data, out.len, &f, NULL),
                    SCN_PACKED_OK);
    for (size_t i = 0; i < half; i++) {
      uint8_t want = SCN_PACKED_T, got = flags[i]; /* after the new grid: absolute alone */
      if (round == 0) { /* the first time: absolute, a rotation, a scale unless 1 */
        want = SCN_PACKED_T | SCN_PACKED_R;
        got &= ~(SCN_PACKED_S | SCN_PACKED_S_UNI);
      } else if (round == 1 || (round == 3 && i < N / 2)) { /* deltas */
        want = SCN_PACKED_T | SCN_PACKED_DELTA;
      }
      CU_ASSERT_EQUAL(got, want);
      double deg;
      CU_ASSERT(within_tolerance(&client, m[i], f.m[i], &deg));
    }
    if (round == 1) {
      set_grid(&daemon, 0.02, 5, 0, 0);
      set_grid(&client, 0.02, 5, 0, 0);
    }
  }
  scn_packed_baseline_clear(&daemon);
  scn_packed_baseline_clear(&client);
  encode(&daemon, ids, (const float(*)[16])m, N, NULL, 0, &out);
  entry_flags(&out, flags, N);
  for (int i = 0; i < N; i++)
    CU_ASSERT((flags[i] & (SCN_PACKED_T | SCN_PACKED_DELTA | SCN_PACKED_R)) ==
              (SCN_PACKED_T | SCN_PACKED_R));
  CU_ASSERT_EQUAL(scn_packed_decode(&client, (const uint8_t *)out.data, out.len, &f, NULL),
                  SCN_PACKED_OK);
  CU_ASSERT(baselines_agree(&daemon, &client));
  scn_packed_frame_free(&f);
  scn_buf_free(&out);
  scn_packed_baseline_free(&daemon);
  scn_packed_baseline_free(&client);
}

int t_register_proto_packed(void) {
  static const t_test tests[] = {
      {"varints, zigzag and float32", test_varint_zigzag},
      {"smallest three", test_smallest_three},
      {"the per-subscription table", test_baseline_table},
      {"payloads written by hand", test_hand_payloads},
      {"every refusal of the decoder", test_refusals},
      {"the encoder's rules", test_encoder_rules},
      {"random round trips within tolerance", test_round_trip},
      {"10,000 deltas never drift", test_delta_chain},
      {"a new step or origin makes translations absolute", test_new_grid},
  };
  return T_ADD_SUITE("proto_packed", NULL, NULL, tests);
}

/* Unit tests of the core's math and validation functions: TRS composition, finiteness, name
 * validation and the error tables. */
#include "mat_mul.h"
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const float IDENTITY[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

/* Element-wise equality (0 == -0): exact values, not bit patterns. */
static bool mat_eq(const float a[16], const float b[16]) {
  for (int i = 0; i < 16; i++)
    if (a[i] != b[i])
      return false;
  return true;
}

static bool mat_near(const float a[16], const float b[16], float tol) {
  for (int i = 0; i < 16; i++)
    if (!(fabsf(a[i] - b[i]) <= tol))
      return false;
  return true;
}

/* out = m * (x, y, z, w) */
static void mat_apply(const float m[16], const float v[4], float out[4]) {
  for (int row = 0; row < 4; row++)
    out[row] = m[row] * v[0] + m[4 + row] * v[1] + m[8 + row] * v[2] + m[12 + row] * v[3];
}

static size_t slen(const char *s) { return strlen(s); }

/* ---- scn_compose_trs ---------------------------------------------------------------------- */

static void test_trs_identity_parts(void) {
  float out[16];
  memset(out, 0x55, sizeof out);
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, NULL, NULL, out), SCN_OK);
  CU_ASSERT_TRUE(mat_eq(out, IDENTITY));

  const float t0[3] = {0, 0, 0}, r0[4] = {0, 0, 0, 1}, s1[3] = {1, 1, 1};
  CU_ASSERT_EQUAL(scn_compose_trs(t0, r0, s1, out), SCN_OK);
  CU_ASSERT_TRUE(mat_eq(out, IDENTITY));

  /* translation only: column-major, translation in 12..14 */
  const float t[3] = {1.5f, -2.25f, 3};
  CU_ASSERT_EQUAL(scn_compose_trs(t, NULL, NULL, out), SCN_OK);
  const float want_t[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1.5f, -2.25f, 3, 1};
  CU_ASSERT_TRUE(mat_eq(out, want_t));

  /* scale only */
  const float s[3] = {2, 3, 4};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, NULL, s, out), SCN_OK);
  const float want_s[16] = {2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0, 0, 0, 0, 1};
  CU_ASSERT_TRUE(mat_eq(out, want_s));

  /* rotation only: 180 degrees about Z is exact */
  const float rz[4] = {0, 0, 1, 0};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, rz, NULL, out), SCN_OK);
  const float want_r[16] = {-1, 0, 0, 0, 0, -1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  CU_ASSERT_TRUE(mat_eq(out, want_r));
}

static void test_trs_order_and_layout(void) {
  /* T * R * S with R = 180 degrees about X (exact): a point p maps to t + R(S p). */
  const float t[3] = {10, 20, 30}, r[4] = {1, 0, 0, 0}, s[3] = {2, 3, 4};
  float out[16];
  CU_ASSERT_EQUAL(scn_compose_trs(t, r, s, out), SCN_OK);
  const float want[16] = {2, 0, 0, 0, 0, -3, 0, 0, 0, 0, -4, 0, 10, 20, 30, 1};
  CU_ASSERT_TRUE(mat_eq(out, want));

  /* The same as composing the three parts by hand, in that order. */
  float mt[16], mr[16], ms[16], tr[16], trs[16], rt[16], rts[16];
  CU_ASSERT_EQUAL(scn_compose_trs(t, NULL, NULL, mt), SCN_OK);
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, r, NULL, mr), SCN_OK);
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, NULL, s, ms), SCN_OK);
  mat_mul(mt, mr, tr);
  mat_mul(tr, ms, trs);
  CU_ASSERT_TRUE(mat_eq(out, trs));
  /* and not R * T * S */
  mat_mul(mr, mt, rt);
  mat_mul(rt, ms, rts);
  CU_ASSERT_FALSE(mat_eq(out, rts));

  /* 90 degrees about Z: x axis to y axis; (1,0,0) scaled by 2 then rotated then moved. */
  const float h = (float)(M_SQRT1_2);
  const float rz[4] = {0, 0, h, h};
  const float t2[3] = {1, 2, 3}, s2[3] = {2, 3, 4};
  CU_ASSERT_EQUAL(scn_compose_trs(t2, rz, s2, out), SCN_OK);
  const float p[4] = {1, 0, 0, 1};
  float q[4];
  mat_apply(out, p, q);
  CU_ASSERT_DOUBLE_EQUAL(q[0], 1, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(q[1], 4, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(q[2], 3, 1e-6);
  CU_ASSERT_EQUAL(q[3], 1);
  const float py[4] = {0, 1, 0, 0};
  mat_apply(out, py, q);
  CU_ASSERT_DOUBLE_EQUAL(q[0], -3, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(q[1], 0, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(q[2], 0, 1e-6);
  CU_ASSERT_EQUAL(q[3], 0);
  /* bottom row stays 0 0 0 1 and the translation is exact */
  CU_ASSERT_EQUAL(out[3], 0);
  CU_ASSERT_EQUAL(out[7], 0);
  CU_ASSERT_EQUAL(out[11], 0);
  CU_ASSERT_EQUAL(out[15], 1);
  CU_ASSERT_EQUAL(out[12], 1);
  CU_ASSERT_EQUAL(out[13], 2);
  CU_ASSERT_EQUAL(out[14], 3);
}

static void test_trs_quat_normalised(void) {
  float a[16], b[16];
  /* A scaled quaternion gives the same matrix as the unit one. */
  const float unit[4] = {0, 0, 1, 0}, scaled[4] = {0, 0, 7.5f, 0};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, unit, NULL, a), SCN_OK);
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, scaled, NULL, b), SCN_OK);
  CU_ASSERT_TRUE(mat_eq(a, b));

  const float w5[4] = {0, 0, 0, 5};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, w5, NULL, a), SCN_OK);
  CU_ASSERT_TRUE(mat_eq(a, IDENTITY));
  const float neg[4] = {0, 0, 0, -1}; /* -q is the same rotation */
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, neg, NULL, a), SCN_OK);
  CU_ASSERT_TRUE(mat_eq(a, IDENTITY));

  /* Tiny but non-zero (its square underflows in float) still normalises. */
  const float tiny[4] = {0, 0, 0, 1e-30f};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, tiny, NULL, a), SCN_OK);
  CU_ASSERT_TRUE(mat_eq(a, IDENTITY));
  const float denorm[4] = {0, 0, 1e-45f, 0};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, denorm, NULL, a), SCN_OK);
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, unit, NULL, b), SCN_OK);
  CU_ASSERT_TRUE(mat_eq(a, b));
  /* Huge (its square overflows in float) too. */
  const float huge[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX};
  const float half[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, huge, NULL, a), SCN_OK);
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, half, NULL, b), SCN_OK);
  CU_ASSERT_TRUE(mat_eq(a, b));
  /* (0.5,0.5,0.5,0.5) is 120 degrees about (1,1,1): x -> y -> z -> x, exactly */
  const float perm[16] = {0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1};
  CU_ASSERT_TRUE(mat_eq(b, perm));

  /* An arbitrary quaternion gives an orthonormal rotation. */
  const float arb[4] = {1, -2, 3, 4};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, arb, NULL, a), SCN_OK);
  float at[16];
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 4; r++)
      at[c * 4 + r] = a[r * 4 + c];
  mat_mul(at, a, b);
  CU_ASSERT_TRUE(mat_near(b, IDENTITY, 1e-6f));
}

static void test_trs_invalid(void) {
  float out[16], keep[16];
  memset(out, 0x42, sizeof out);
  memcpy(keep, out, sizeof out);
  const float zero[4] = {0, 0, 0, 0};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, zero, NULL, out), SCN_INVALID);
  const float negzero[4] = {-0.0f, 0, -0.0f, 0};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, negzero, NULL, out), SCN_INVALID);

  for (int k = 0; k < 4; k++) {
    float r[4] = {0, 0, 0, 1};
    r[k] = NAN;
    CU_ASSERT_EQUAL(scn_compose_trs(NULL, r, NULL, out), SCN_INVALID);
    r[k] = INFINITY;
    CU_ASSERT_EQUAL(scn_compose_trs(NULL, r, NULL, out), SCN_INVALID);
    r[k] = -INFINITY;
    CU_ASSERT_EQUAL(scn_compose_trs(NULL, r, NULL, out), SCN_INVALID);
  }
  for (int k = 0; k < 3; k++) {
    float t[3] = {0, 0, 0}, s[3] = {1, 1, 1};
    t[k] = NAN;
    CU_ASSERT_EQUAL(scn_compose_trs(t, NULL, NULL, out), SCN_INVALID);
    t[k] = INFINITY;
    CU_ASSERT_EQUAL(scn_compose_trs(t, NULL, NULL, out), SCN_INVALID);
    s[k] = NAN;
    CU_ASSERT_EQUAL(scn_compose_trs(NULL, NULL, s, out), SCN_INVALID);
    s[k] = -INFINITY;
    CU_ASSERT_EQUAL(scn_compose_trs(NULL, NULL, s, out), SCN_INVALID);
  }
  /* a bad part is rejected even when the others are fine */
  const float t[3] = {1, 2, 3}, s[3] = {1, 1, 1}, bad_s[3] = {1, NAN, 1};
  const float r[4] = {0, 0, 0, 1};
  CU_ASSERT_EQUAL(scn_compose_trs(t, r, bad_s, out), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_compose_trs(t, zero, s, out), SCN_INVALID);
  /* out is untouched on failure */
  CU_ASSERT_TRUE(memcmp(out, keep, sizeof out) == 0);
}

static void test_trs_nonuniform_scale(void) {
  const float s[3] = {2, -0.5f, 8};
  const float r[4] = {0, 1, 0, 0}; /* 180 degrees about Y: x -> -x, z -> -z */
  float out[16];
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, r, s, out), SCN_OK);
  const float want[16] = {-2, 0, 0, 0, 0, -0.5f, 0, 0, 0, 0, -8, 0, 0, 0, 0, 1};
  CU_ASSERT_TRUE(mat_eq(out, want));

  /* Non-uniform scale is applied before the rotation (columns scale, not rows). */
  const float h = (float)M_SQRT1_2;
  const float rz[4] = {0, 0, h, h};
  const float s2[3] = {2, 1, 1};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, rz, s2, out), SCN_OK);
  /* column 0 = R * (2,0,0) = (0,2,0); column 1 = R * (0,1,0) = (-1,0,0) */
  CU_ASSERT_DOUBLE_EQUAL(out[0], 0, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(out[1], 2, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(out[4], -1, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(out[5], 0, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(out[10], 1, 1e-6);

  /* zero scale is allowed (a singular but finite matrix) */
  const float s0[3] = {0, 0, 0};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, NULL, s0, out), SCN_OK);
  CU_ASSERT_EQUAL(out[0], 0);
  CU_ASSERT_EQUAL(out[5], 0);
  CU_ASSERT_EQUAL(out[10], 0);
  CU_ASSERT_EQUAL(out[15], 1);
}

static void test_trs_overflow(void) {
  /* The largest finite inputs stay finite: a rotation never grows a column. */
  const float big[3] = {FLT_MAX, -FLT_MAX, FLT_MAX};
  const float r[4] = {0, 0, 1, 0};
  float out[16];
  CU_ASSERT_EQUAL(scn_compose_trs(big, r, big, out), SCN_OK);
  CU_ASSERT_TRUE(scn_matrix_finite(out));
  CU_ASSERT_EQUAL(out[0], -FLT_MAX);
  CU_ASSERT_EQUAL(out[5], FLT_MAX);
  CU_ASSERT_EQUAL(out[10], FLT_MAX);
  CU_ASSERT_EQUAL(out[12], FLT_MAX);
  CU_ASSERT_EQUAL(out[13], -FLT_MAX);
  /* With a general rotation every column still has length |s| and stays finite. */
  const float arb[4] = {0.3f, -0.1f, 0.7f, 0.2f};
  CU_ASSERT_EQUAL(scn_compose_trs(big, arb, big, out), SCN_OK);
  CU_ASSERT_TRUE(scn_matrix_finite(out));
  /* Values beyond float (as a parser would produce for 1e39) are not finite: INVALID. */
  const float over[3] = {strtof("1e39", NULL), 0, 0};
  CU_ASSERT_FALSE(isfinite(over[0]));
  CU_ASSERT_EQUAL(scn_compose_trs(over, NULL, NULL, out), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, NULL, over, out), SCN_INVALID);
  const float rover[4] = {strtof("-1e39", NULL), 0, 0, 1};
  CU_ASSERT_EQUAL(scn_compose_trs(NULL, rover, NULL, out), SCN_INVALID);
}

/* ---- scn_matrix_finite -------------------------------------------------------------------- */

static void test_matrix_finite(void) {
  CU_ASSERT_TRUE(scn_matrix_finite(IDENTITY));
  float m[16];
  for (int i = 0; i < 16; i++)
    m[i] = (i & 1) ? FLT_MAX : -FLT_MIN / 4; /* extremes and subnormals are finite */
  CU_ASSERT_TRUE(scn_matrix_finite(m));
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 16; i++)
    for (int k = 0; k < 3; k++) {
      memcpy(m, IDENTITY, sizeof m);
      m[i] = bad[k];
      CU_ASSERT_FALSE(scn_matrix_finite(m));
    }
}

/* ---- names -------------------------------------------------------------------------------- */

static void test_name_valid_basic(void) {
  CU_ASSERT_TRUE(scn_name_valid("a", 1));
  CU_ASSERT_TRUE(scn_name_valid("wheel_fl", slen("wheel_fl")));
  CU_ASSERT_TRUE(scn_name_valid("with space.and-punct!~", slen("with space.and-punct!~")));
  CU_ASSERT_FALSE(scn_name_valid("", 0));
  CU_ASSERT_FALSE(scn_name_valid("abc", 0));
  CU_ASSERT_FALSE(scn_name_valid(NULL, 0));
  CU_ASSERT_FALSE(scn_name_valid(NULL, 3));
  /* only len bytes count */
  CU_ASSERT_TRUE(scn_name_valid("ab/cd", 2));
  CU_ASSERT_FALSE(scn_name_valid("ab/cd", 3));

  char buf[80];
  memset(buf, 'x', sizeof buf);
  CU_ASSERT_TRUE(scn_name_valid(buf, 64));
  CU_ASSERT_FALSE(scn_name_valid(buf, 65));
  CU_ASSERT_FALSE(scn_name_valid(buf, 80));
}

static void test_name_valid_utf8(void) {
  CU_ASSERT_TRUE(scn_name_valid("caf\xc3\xa9", 5));              /* U+00E9 */
  CU_ASSERT_TRUE(scn_name_valid("\xc2\xa0", 2));                 /* U+00A0, first after C1 */
  CU_ASSERT_TRUE(scn_name_valid("\xe2\x82\xac", 3));             /* U+20AC */
  CU_ASSERT_TRUE(scn_name_valid("\xe6\x97\xa5\xe6\x9c\xac", 6)); /* two CJK */
  CU_ASSERT_TRUE(scn_name_valid("\xf0\x9f\x98\x80", 4));         /* U+1F600 */
  CU_ASSERT_TRUE(scn_name_valid("\xf4\x8f\xbf\xbf", 4));         /* U+10FFFF */
  CU_ASSERT_TRUE(scn_name_valid("\xed\x9f\xbf", 3));             /* U+D7FF */
  CU_ASSERT_TRUE(scn_name_valid("\xee\x80\x80", 3));             /* U+E000 */
  CU_ASSERT_TRUE(scn_name_valid("\xdf\xbf", 2));                 /* U+07FF */
  CU_ASSERT_TRUE(scn_name_valid("\xe0\xa0\x80", 3));             /* U+0800 */
  CU_ASSERT_TRUE(scn_name_valid("\xf0\x90\x80\x80", 4));         /* U+10000 */

  /* 64 bytes of multibyte characters are fine, 65 are not */
  char buf[80];
  for (int i = 0; i < 32; i++)
    buf[2 * i] = (char)0xc3, buf[2 * i + 1] = (char)0xa9;
  CU_ASSERT_TRUE(scn_name_valid(buf, 64));
  buf[64] = 'a';
  CU_ASSERT_FALSE(scn_name_valid(buf, 65));
  for (int i = 0; i < 16; i++)
    memcpy(buf + 4 * i, "\xf0\x9f\x98\x80", 4);
  CU_ASSERT_TRUE(scn_name_valid(buf, 64));
  /* a character cut by the length is invalid */
  CU_ASSERT_FALSE(scn_name_valid(buf, 63));
  CU_ASSERT_FALSE(scn_name_valid("\xe2\x82\xac", 2));
  CU_ASSERT_FALSE(scn_name_valid("\xc3\xa9", 1));
}

static void test_name_invalid_utf8(void) {
  static const struct {
    const char *s;
    size_t len;
  } bad[] = {
      {"\x80", 1},                     /* lone continuation */
      {"a\xbf", 2},                    /* lone continuation after ASCII */
      {"\xc3", 1},                     /* truncated */
      {"\xc3\x28", 2},                 /* bad continuation */
      {"\xe2\x82", 2},                 /* truncated */
      {"\xe2\x28\xa1", 3},             /* bad continuation */
      {"\xf0\x9f\x98", 3},             /* truncated */
      {"\xc0\xaf", 2},                 /* overlong '/' */
      {"\xc1\xbf", 2},                 /* overlong */
      {"\xc0\x80", 2},                 /* overlong NUL */
      {"\xe0\x80\xaf", 3},             /* overlong '/' */
      {"\xe0\x9f\xbf", 3},             /* overlong U+07FF */
      {"\xf0\x80\x80\xaf", 4},         /* overlong '/' */
      {"\xf0\x8f\xbf\xbf", 4},         /* overlong U+FFFF */
      {"\xed\xa0\x80", 3},             /* U+D800 high surrogate */
      {"\xed\xbf\xbf", 3},             /* U+DFFF low surrogate */
      {"\xed\xa0\xbd\xed\xb8\x80", 6}, /* CESU-8 surrogate pair */
      {"\xf4\x90\x80\x80", 4},         /* U+110000 */
      {"\xf5\x80\x80\x80", 4},         /* lead byte above F4 */
      {"\xf8\x88\x80\x80\x80", 5},     /* 5-byte form */
      {"\xfc\x84\x80\x80\x80\x80", 6},
      {"\xfe", 1},
      {"\xff", 1},
      {"ok\xff", 3},
      {"\xc2\x80", 2}, /* U+0080, a C1 control */
      {"\xc2\x85", 2}, /* U+0085 NEL */
      {"\xc2\x9f", 2}, /* U+009F */
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    bool ok = scn_name_valid(bad[k].s, bad[k].len);
    CU_ASSERT_FALSE(ok);
  }
}

static void test_name_invalid_chars(void) {
  CU_ASSERT_FALSE(scn_name_valid("/", 1));
  CU_ASSERT_FALSE(scn_name_valid("a/b", 3));
  CU_ASSERT_FALSE(scn_name_valid("ab/", 3));
  char s[3] = {'a', 0, 'b'};
  for (int c = 0; c < 0x20; c++) {
    s[1] = (char)c;
    CU_ASSERT_FALSE(scn_name_valid(s, 3));
    CU_ASSERT_FALSE(scn_name_valid(s + 1, 1));
  }
  s[1] = 0x7f; /* DEL */
  CU_ASSERT_FALSE(scn_name_valid(s, 3));
  CU_ASSERT_FALSE(scn_name_valid("\x7f", 1));
  /* every other printable ASCII byte is allowed */
  for (int c = 0x20; c < 0x7f; c++) {
    s[1] = (char)c;
    bool ok = scn_name_valid(s, 3);
    CU_ASSERT_EQUAL(ok, c != '/');
  }
  CU_ASSERT_FALSE(scn_name_valid("tab\tname", 8));
  CU_ASSERT_FALSE(scn_name_valid("line\n", 5));
}

static void test_world_name_valid(void) {
  const char *good[] = {"a", "Z", "0", "_", ".", "-", "main", "World_1.v-2", "..", "A-Za-z0-9_.-"};
  for (size_t k = 0; k < sizeof good / sizeof good[0]; k++)
    CU_ASSERT_TRUE(scn_world_name_valid(good[k], slen(good[k])));
  const char *bad[] = {"has space", "a/b", "caf\xc3\xa9", "x!", "a:b", "tab\t", "a+b", "~", "@"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    CU_ASSERT_FALSE(scn_world_name_valid(bad[k], slen(bad[k])));
  CU_ASSERT_FALSE(scn_world_name_valid("", 0));
  CU_ASSERT_FALSE(scn_world_name_valid(NULL, 0));
  CU_ASSERT_FALSE(scn_world_name_valid("a\0b", 3));
  CU_ASSERT_FALSE(scn_world_name_valid("a\x7f", 2));
  /* every byte outside the set is rejected */
  for (int c = 1; c < 256; c++) {
    char s[1] = {(char)c};
    bool want = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '-';
    CU_ASSERT_EQUAL(scn_world_name_valid(s, 1), want);
  }
  char buf[80];
  memset(buf, 'w', sizeof buf);
  CU_ASSERT_TRUE(scn_world_name_valid(buf, 64));
  CU_ASSERT_FALSE(scn_world_name_valid(buf, 65));
}

/* ---- errors ------------------------------------------------------------------------------- */

static void test_err_tables(void) {
  static const struct {
    int code;
    const char *name, *msg;
  } want[] = {
      {SCN_OK, "OK", "ok"},
      {SCN_NOT_FOUND, "NOT_FOUND", "not found"},
      {SCN_EXISTS, "EXISTS", "already exists"},
      {SCN_CYCLE, "CYCLE", "would make an entity its own ancestor"},
      {SCN_INVALID, "INVALID", "invalid value"},
      {SCN_SINGULAR, "SINGULAR", "matrix is singular or the result is not finite"},
      {SCN_LIMIT, "LIMIT", "limit exceeded"},
      {SCN_NOMEM, "NOMEM", "out of memory"},
      {SCN_STATE, "STATE", "operation not allowed in this state"},
  };
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    CU_ASSERT_STRING_EQUAL(scn_err_name(want[k].code), want[k].name);
    CU_ASSERT_STRING_EQUAL(scn_err_message(want[k].code), want[k].msg);
  }
  CU_ASSERT_EQUAL(SCN_OK, 0);
  CU_ASSERT_EQUAL(SCN_NOT_FOUND, -1);
  CU_ASSERT_EQUAL(SCN_STATE, -8);
  const int unknown[] = {1, -9, 100, -1000};
  for (size_t k = 0; k < sizeof unknown / sizeof unknown[0]; k++) {
    CU_ASSERT_STRING_EQUAL(scn_err_name(unknown[k]), "UNKNOWN");
    CU_ASSERT_STRING_EQUAL(scn_err_message(unknown[k]), "unknown error");
  }
}

int t_register_core_math(void) {
  static const t_test tests[] = {
      {"compose_trs identity parts", test_trs_identity_parts},
      {"compose_trs T*R*S order and column-major layout", test_trs_order_and_layout},
      {"compose_trs normalises the quaternion", test_trs_quat_normalised},
      {"compose_trs zero or non-finite input is INVALID", test_trs_invalid},
      {"compose_trs non-uniform scale", test_trs_nonuniform_scale},
      {"compose_trs extremes and overflow", test_trs_overflow},
      {"matrix_finite", test_matrix_finite},
      {"name_valid lengths", test_name_valid_basic},
      {"name_valid multibyte UTF-8", test_name_valid_utf8},
      {"name_valid rejects bad UTF-8", test_name_invalid_utf8},
      {"name_valid rejects '/' and control characters", test_name_invalid_chars},
      {"world_name_valid", test_world_name_valid},
      {"err_name and err_message", test_err_tables},
  };
  return T_ADD_SUITE("core_math", NULL, NULL, tests);
}

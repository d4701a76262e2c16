/* Matrix helpers the manager needs beyond cglm: TRS composition, checked inverses, hashing,
 * name validation. */
#include "core_internal.h"

#include <math.h>
#include <string.h>

/* Every setter checks its matrix: an exponent of all ones (inf, NaN) in any element, tested
 * without a branch per element so the compiler can do the 16 at once. */
bool scn_matrix_finite(const float m[16]) {
  uint32_t bits[16], bad = 0;
  memcpy(bits, m, sizeof bits);
  for (int i = 0; i < 16; i++)
    bad |= (uint32_t)((bits[i] & 0x7f800000u) == 0x7f800000u);
  return bad == 0;
}

static bool all_finite(const float *v, int n) {
  for (int i = 0; i < n; i++)
    if (!isfinite(v[i]))
      return false;
  return true;
}

int scn_compose_trs(const float t[3], const float r[4], const float s[3], float out[16]) {
  if ((t && !all_finite(t, 3)) || (r && !all_finite(r, 4)) || (s && !all_finite(s, 3)))
    return SCN_INVALID;
  /* Normalise in double: a tiny but non-zero quaternion must not underflow to zero. */
  double x = 0, y = 0, z = 0, w = 1;
  if (r) {
    double len =
        sqrt((double)r[0] * r[0] + (double)r[1] * r[1] + (double)r[2] * r[2] + (double)r[3] * r[3]);
    if (!(len > 0) || !isfinite(len))
      return SCN_INVALID;
    x = r[0] / len, y = r[1] / len, z = r[2] / len, w = r[3] / len;
  }
  double sx = s ? s[0] : 1, sy = s ? s[1] : 1, sz = s ? s[2] : 1;
  double m[16] = {
      (1 - 2 * (y * y + z * z)) * sx,
      (2 * (x * y + z * w)) * sx,
      (2 * (x * z - y * w)) * sx,
      0,
      (2 * (x * y - z * w)) * sy,
      (1 - 2 * (x * x + z * z)) * sy,
      (2 * (y * z + x * w)) * sy,
      0,
      (2 * (x * z + y * w)) * sz,
      (2 * (y * z - x * w)) * sz,
      (1 - 2 * (x * x + y * y)) * sz,
      0,
      t ? t[0] : 0,
      t ? t[1] : 0,
      t ? t[2] : 0,
      1,
  };
  float f[16];
  for (int i = 0; i < 16; i++)
    f[i] = (float)m[i];
  if (!scn_matrix_finite(f))
    return SCN_INVALID;
  memcpy(out, f, sizeof f);
  return SCN_OK;
}

/* Inverse by cofactors in double; returns the determinant (0 when singular). */
static double inverse_d(const double a[16], double inv[16]) {
  inv[0] = a[5] * a[10] * a[15] - a[5] * a[11] * a[14] - a[9] * a[6] * a[15] + a[9] * a[7] * a[14] +
           a[13] * a[6] * a[11] - a[13] * a[7] * a[10];
  inv[4] = -a[4] * a[10] * a[15] + a[4] * a[11] * a[14] + a[8] * a[6] * a[15] -
           a[8] * a[7] * a[14] - a[12] * a[6] * a[11] + a[12] * a[7] * a[10];
  inv[8] = a[4] * a[9] * a[15] - a[4] * a[11] * a[13] - a[8] * a[5] * a[15] + a[8] * a[7] * a[13] +
           a[12] * a[5] * a[11] - a[12] * a[7] * a[9];
  inv[12] = -a[4] * a[9] * a[14] + a[4] * a[10] * a[13] + a[8] * a[5] * a[14] -
            a[8] * a[6] * a[13] - a[12] * a[5] * a[10] + a[12] * a[6] * a[9];
  inv[1] = -a[1] * a[10] * a[15] + a[1] * a[11] * a[14] + a[9] * a[2] * a[15] -
           a[9] * a[3] * a[14] - a[13] * a[2] * a[11] + a[13] * a[3] * a[10];
  inv[5] = a[0] * a[10] * a[15] - a[0] * a[11] * a[14] - a[8] * a[2] * a[15] + a[8] * a[3] * a[14] +
           a[12] * a[2] * a[11] - a[12] * a[3] * a[10];
  inv[9] = -a[0] * a[9] * a[15] + a[0] * a[11] * a[13] + a[8] * a[1] * a[15] - a[8] * a[3] * a[13] -
           a[12] * a[1] * a[11] + a[12] * a[3] * a[9];
  inv[13] = a[0] * a[9] * a[14] - a[0] * a[10] * a[13] - a[8] * a[1] * a[14] + a[8] * a[2] * a[13] +
            a[12] * a[1] * a[10] - a[12] * a[2] * a[9];
  inv[2] = a[1] * a[6] * a[15] - a[1] * a[7] * a[14] - a[5] * a[2] * a[15] + a[5] * a[3] * a[14] +
           a[13] * a[2] * a[7] - a[13] * a[3] * a[6];
  inv[6] = -a[0] * a[6] * a[15] + a[0] * a[7] * a[14] + a[4] * a[2] * a[15] - a[4] * a[3] * a[14] -
           a[12] * a[2] * a[7] + a[12] * a[3] * a[6];
  inv[10] = a[0] * a[5] * a[15] - a[0] * a[7] * a[13] - a[4] * a[1] * a[15] + a[4] * a[3] * a[13] +
            a[12] * a[1] * a[7] - a[12] * a[3] * a[5];
  inv[14] = -a[0] * a[5] * a[14] + a[0] * a[6] * a[13] + a[4] * a[1] * a[14] - a[4] * a[2] * a[13] -
            a[12] * a[1] * a[6] + a[12] * a[2] * a[5];
  inv[3] = -a[1] * a[6] * a[11] + a[1] * a[7] * a[10] + a[5] * a[2] * a[11] - a[5] * a[3] * a[10] -
           a[9] * a[2] * a[7] + a[9] * a[3] * a[6];
  inv[7] = a[0] * a[6] * a[11] - a[0] * a[7] * a[10] - a[4] * a[2] * a[11] + a[4] * a[3] * a[10] +
           a[8] * a[2] * a[7] - a[8] * a[3] * a[6];
  inv[11] = -a[0] * a[5] * a[11] + a[0] * a[7] * a[9] + a[4] * a[1] * a[11] - a[4] * a[3] * a[9] -
            a[8] * a[1] * a[7] + a[8] * a[3] * a[5];
  inv[15] = a[0] * a[5] * a[10] - a[0] * a[6] * a[9] - a[4] * a[1] * a[10] + a[4] * a[2] * a[9] +
            a[8] * a[1] * a[6] - a[8] * a[2] * a[5];
  double det = a[0] * inv[0] + a[1] * inv[4] + a[2] * inv[8] + a[3] * inv[12];
  if (det == 0 || !isfinite(det))
    return 0;
  for (int i = 0; i < 16; i++)
    inv[i] /= det;
  return det;
}

int scn__mul_inverse(mat4 a, mat4 b, mat4 out) {
  double ad[16], inv[16], res[16];
  const float *af = a[0];
  for (int i = 0; i < 16; i++)
    ad[i] = af[i];
  if (inverse_d(ad, inv) == 0)
    return SCN_SINGULAR;
  if (b) {
    const float *bf = b[0];
    for (int c = 0; c < 4; c++)
      for (int r = 0; r < 4; r++) {
        double sum = 0;
        for (int k = 0; k < 4; k++)
          sum += inv[k * 4 + r] * bf[c * 4 + k];
        res[c * 4 + r] = sum;
      }
  } else {
    memcpy(res, inv, sizeof res);
  }
  float f[16];
  for (int i = 0; i < 16; i++)
    f[i] = (float)res[i];
  if (!scn_matrix_finite(f))
    return SCN_SINGULAR;
  memcpy(out[0], f, sizeof f);
  return SCN_OK;
}

uint64_t scn__hash64(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  x ^= x >> 33;
  x *= UINT64_C(0xc4ceb9fe1a85ec53);
  x ^= x >> 33;
  return x;
}

uint64_t scn__hash_bytes(const char *s, size_t len, uint64_t seed) {
  uint64_t h = UINT64_C(0xcbf29ce484222325) ^ seed;
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)s[i];
    h *= UINT64_C(0x100000001b3);
  }
  return scn__hash64(h);
}

bool scn_name_valid(const char *name, size_t len) {
  if (!name || len < 1 || len > SCN_NAME_MAX)
    return false;
  const unsigned char *s = (const unsigned char *)name;
  for (size_t i = 0; i < len;) {
    if (s[i] < 0x20 || s[i] == 0x7F || s[i] == '/')
      return false;
    uint32_t cp;
    size_t n = scn_utf8_char((const char *)s + i, len - i, &cp);
    if (n == 0 || (cp >= 0x80 && cp <= 0x9F)) /* C1 controls are control characters too */
      return false;
    i += n;
  }
  return true;
}

bool scn_world_name_valid(const char *name, size_t len) {
  if (!name || len < 1 || len > SCN_NAME_MAX)
    return false;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

/* Taking a matrix apart into translation, rotation and scale: the inverse of scn_compose_trs. */
#include "core_internal.h"

#include <float.h>
#include <math.h>

/* A column a little longer than FLT_MAX is FLT_MAX scaled and rounded up (compose rounds each
 * element to nearest); longer than this it cannot have come from a float scale. */
#define SCALE_ROUNDING 0x1p-20

int scn_decompose_trs(const float m[16], float t[3], float r[4], float s[3]) {
  /* A NaN fails these comparisons too; a non-finite element of the first three columns
   * makes its length non-finite, which the loop below refuses, so only the translation needs
   * its own check (scn_matrix_finite over all 16 would cost a quarter of the whole). */
  if (m[3] != 0 || m[7] != 0 || m[11] != 0 || m[15] != 1 || !isfinite(m[12]) || !isfinite(m[13]) ||
      !isfinite(m[14]))
    return SCN_INVALID;
  /* Lengths and directions in double: in float the squared length of a column overflows
   * beyond about 1.8e19 and loses everything below about 1e-19, while any finite float scale
   * must come back. glm_decompose_rs works in float and has neither a zero nor a shear check,
   * so it is not used here. */
  double u[3][3], len[3];
  float sc[3];
  for (int j = 0; j < 3; j++) {
    const float *c = m + 4 * j;
    len[j] = sqrt((double)c[0] * c[0] + (double)c[1] * c[1] + (double)c[2] * c[2]);
    if (!(len[j] > 0 && len[j] <= FLT_MAX * (1 + SCALE_ROUNDING)))
      return SCN_INVALID;
    sc[j] = len[j] > FLT_MAX ? FLT_MAX : (float)len[j];
    double inv = 1 / len[j];
    for (int k = 0; k < 3; k++)
      u[j][k] = c[k] * inv;
  }
  /* Shear: the cosine of the angle between two columns, so the test does not depend on the
   * scale (see SCN_TRS_SHEAR_TOL). */
  for (int a = 0; a < 3; a++)
    for (int b = a + 1; b < 3; b++) {
      double cosine = u[a][0] * u[b][0] + u[a][1] * u[b][1] + u[a][2] * u[b][2];
      if (!(fabs(cosine) <= SCN_TRS_SHEAR_TOL))
        return SCN_INVALID;
    }
  /* A mirror: the contract puts the sign on sx, so the first direction flips and what is left
   * is a proper rotation (determinant +1), which is all a quaternion can hold. */
  double det = u[0][0] * (u[1][1] * u[2][2] - u[1][2] * u[2][1]) -
               u[1][0] * (u[0][1] * u[2][2] - u[0][2] * u[2][1]) +
               u[2][0] * (u[0][1] * u[1][2] - u[0][2] * u[1][1]);
  if (t) {
    t[0] = m[12], t[1] = m[13], t[2] = m[14];
  }
  if (s) {
    s[0] = det < 0 ? -sc[0] : sc[0], s[1] = sc[1], s[2] = sc[2];
  }
  if (!r) /* a partial set that replaces the rotation skips its third of the work */
    return SCN_OK;
  double flip = det < 0 ? -1 : 1;
  mat3 rot;
  for (int j = 0; j < 3; j++)
    for (int k = 0; k < 3; k++)
      rot[j][k] = (float)((j == 0 ? flip : 1) * u[j][k]);
  /* The directions are unit and (within the tolerance) orthogonal, so float is enough from
   * here: glm_mat3_quat picks the branch with the largest divisor (Shepperd's method). It
   * leaves the sign of the quaternion to the branch taken; the contract wants w >= 0, and
   * each -0 becomes +0 so neither a half turn nor a mirror prints a "-0". */
  versor q;
  glm_mat3_quat(rot, q);
  glm_quat_normalize(q);
  if (q[3] < 0)
    glm_vec4_negate(q);
  r[0] = q[0] + 0.0f, r[1] = q[1] + 0.0f, r[2] = q[2] + 0.0f, r[3] = q[3] + 0.0f;
  return SCN_OK;
}

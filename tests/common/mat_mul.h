/* The matrix product the core, daemon and transform suites check world matrices against. */
#ifndef T_MAT_MUL_H
#define T_MAT_MUL_H

#include <string.h>

/* Column-major out = a * b, each element summed in double and rounded to float once (exact for
 * small integer matrices); out may be a or b. */
static inline void mat_mul(const float a[16], const float b[16], float out[16]) {
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

#endif

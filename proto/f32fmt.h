#ifndef SCN_F32FMT_H
#define SCN_F32FMT_H

#include <stddef.h>

/*
 * Shortest round-trip formatting of IEEE-754 binary32 values as JSON numbers.
 *
 * The output is the decimal with the fewest significant digits that strtof()
 * reads back to the same bit pattern; among those, the one closest to the
 * exact value (ties to an even last digit).  Plain notation is used when the
 * decimal exponent is in [-6, 20] (1e-6 <= |v| < 1e21), exponent notation
 * otherwise, following JavaScript's Number.prototype.toString:
 *
 *   0  -0  1  0.1  -2.5  100  0.000001  1e-7  1e+21  3.4028235e+38
 *
 * NaN and infinities have no JSON number form; they are written as "null".
 */

/*
 * Longest output is 22 chars ("-123456790000000000000") plus the NUL.  The
 * formatter uses the whole buffer as scratch (fixed-size stores are faster
 * than exact-length copies), so it must really be this large.
 */
#define SCN_F32_FMT_MAX 24

/* '[' + 16 numbers + 15 commas + ']' + NUL, plus the last number's scratch. */
#define SCN_F32_MATRIX_FMT_MAX (16 * SCN_F32_FMT_MAX + 2)

/*
 * Writes v into buf (at least SCN_F32_FMT_MAX bytes), NUL-terminated.
 * Bytes after the NUL, up to SCN_F32_FMT_MAX, may be clobbered.
 * Returns the length excluding the NUL.
 */
size_t scn_f32_format(float v, char *buf);

/*
 * Writes m as "[a,b,...,p]" into buf (at least SCN_F32_MATRIX_FMT_MAX bytes),
 * NUL-terminated.  Returns the length excluding the NUL.
 */
size_t scn_f32_format_matrix(const float m[16], char *buf);

/* Room scn_f32_format_array needs for n values. */
#define SCN_F32_ARRAY_FMT_MAX(n) ((n)*SCN_F32_FMT_MAX + 2)

/*
 * Writes the n values of v as "[a,b,...]" into buf (at least SCN_F32_ARRAY_FMT_MAX(n)
 * bytes), NUL-terminated.  Returns the length excluding the NUL.
 */
size_t scn_f32_format_array(const float *v, int n, char *buf);

#endif /* SCN_F32FMT_H */

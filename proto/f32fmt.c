/*
 * Shortest round-trip printing of binary32 floats (Schubfach-style).
 *
 * A finite nonzero float is v = c * 2^q with integer c.  Every real in the
 * rounding interval R around v (half-way to each neighbour; endpoints
 * included iff c is even, as strtof rounds ties to even) reads back as v.
 * With k = floor(log10(width of R)), R scaled by 10^-k has width in [1, 10),
 * so it contains at least one integer and at most one multiple of 10.  The
 * answer is that multiple of 10 if present (one digit shorter), otherwise
 * the integer in R closest to v * 10^-k.
 *
 * The scaled bounds are computed in fixed point with a 64-bit approximation
 * of 10^-k and rounded to odd: the low bit is set when the value is not an
 * integer.  That keeps "x < n", "x <= n" and "x == n" exact against any even
 * n, which is all the interval tests need.  64 bits of 10^-k are enough for
 * binary32; tests/tools/f32_exhaustive.c checks every float.
 */
#include "f32fmt.h"

#include <stdint.h>
#include <string.h>

#define F32_K_MIN (-45)
#define F32_K_MAX 31

/*
 * f32_pow10_inv[k - F32_K_MIN] = floor(10^-k / 2^b) + 1, where b is chosen
 * so that the entry lies in [2^63, 2^64), i.e. b = floor(log2(10^-k)) - 63.
 * Rounding up (the "+ 1") makes the product never smaller than the exact
 * value; the excess is far below the fraction bits that are kept.
 */
static const uint64_t f32_pow10_inv[F32_K_MAX - F32_K_MIN + 1] = {
    UINT64_C(0xb35dbf821ae4f38c), /* k = -45 */
    UINT64_C(0x8f7e32ce7bea5c70), /* k = -44 */
    UINT64_C(0xe596b7b0c643c71a), /* k = -43 */
    UINT64_C(0xb7abc627050305ae), /* k = -42 */
    UINT64_C(0x92efd1b8d0cf37bf), /* k = -41 */
    UINT64_C(0xeb194f8e1ae525fe), /* k = -40 */
    UINT64_C(0xbc143fa4e250eb32), /* k = -39 */
    UINT64_C(0x96769950b50d88f5), /* k = -38 */
    UINT64_C(0xf0bdc21abb48db21), /* k = -37 */
    UINT64_C(0xc097ce7bc90715b4), /* k = -36 */
    UINT64_C(0x9a130b963a6c115d), /* k = -35 */
    UINT64_C(0xf684df56c3e01bc7), /* k = -34 */
    UINT64_C(0xc5371912364ce306), /* k = -33 */
    UINT64_C(0x9dc5ada82b70b59e), /* k = -32 */
    UINT64_C(0xfc6f7c4045812297), /* k = -31 */
    UINT64_C(0xc9f2c9cd04674edf), /* k = -30 */
    UINT64_C(0xa18f07d736b90be6), /* k = -29 */
    UINT64_C(0x813f3978f8940985), /* k = -28 */
    UINT64_C(0xcecb8f27f4200f3b), /* k = -27 */
    UINT64_C(0xa56fa5b99019a5c9), /* k = -26 */
    UINT64_C(0x84595161401484a1), /* k = -25 */
    UINT64_C(0xd3c21bcecceda101), /* k = -24 */
    UINT64_C(0xa968163f0a57b401), /* k = -23 */
    UINT64_C(0x878678326eac9001), /* k = -22 */
    UINT64_C(0xd8d726b7177a8001), /* k = -21 */
    UINT64_C(0xad78ebc5ac620001), /* k = -20 */
    UINT64_C(0x8ac7230489e80001), /* k = -19 */
    UINT64_C(0xde0b6b3a76400001), /* k = -18 */
    UINT64_C(0xb1a2bc2ec5000001), /* k = -17 */
    UINT64_C(0x8e1bc9bf04000001), /* k = -16 */
    UINT64_C(0xe35fa931a0000001), /* k = -15 */
    UINT64_C(0xb5e620f480000001), /* k = -14 */
    UINT64_C(0x9184e72a00000001), /* k = -13 */
    UINT64_C(0xe8d4a51000000001), /* k = -12 */
    UINT64_C(0xba43b74000000001), /* k = -11 */
    UINT64_C(0x9502f90000000001), /* k = -10 */
    UINT64_C(0xee6b280000000001), /* k = -9 */
    UINT64_C(0xbebc200000000001), /* k = -8 */
    UINT64_C(0x9896800000000001), /* k = -7 */
    UINT64_C(0xf424000000000001), /* k = -6 */
    UINT64_C(0xc350000000000001), /* k = -5 */
    UINT64_C(0x9c40000000000001), /* k = -4 */
    UINT64_C(0xfa00000000000001), /* k = -3 */
    UINT64_C(0xc800000000000001), /* k = -2 */
    UINT64_C(0xa000000000000001), /* k = -1 */
    UINT64_C(0x8000000000000001), /* k = 0 */
    UINT64_C(0xcccccccccccccccd), /* k = 1 */
    UINT64_C(0xa3d70a3d70a3d70b), /* k = 2 */
    UINT64_C(0x83126e978d4fdf3c), /* k = 3 */
    UINT64_C(0xd1b71758e219652c), /* k = 4 */
    UINT64_C(0xa7c5ac471b478424), /* k = 5 */
    UINT64_C(0x8637bd05af6c69b6), /* k = 6 */
    UINT64_C(0xd6bf94d5e57a42bd), /* k = 7 */
    UINT64_C(0xabcc77118461cefd), /* k = 8 */
    UINT64_C(0x89705f4136b4a598), /* k = 9 */
    UINT64_C(0xdbe6fecebdedd5bf), /* k = 10 */
    UINT64_C(0xafebff0bcb24aaff), /* k = 11 */
    UINT64_C(0x8cbccc096f5088cc), /* k = 12 */
    UINT64_C(0xe12e13424bb40e14), /* k = 13 */
    UINT64_C(0xb424dc35095cd810), /* k = 14 */
    UINT64_C(0x901d7cf73ab0acda), /* k = 15 */
    UINT64_C(0xe69594bec44de15c), /* k = 16 */
    UINT64_C(0xb877aa3236a4b44a), /* k = 17 */
    UINT64_C(0x9392ee8e921d5d08), /* k = 18 */
    UINT64_C(0xec1e4a7db69561a6), /* k = 19 */
    UINT64_C(0xbce5086492111aeb), /* k = 20 */
    UINT64_C(0x971da05074da7bef), /* k = 21 */
    UINT64_C(0xf1c90080baf72cb2), /* k = 22 */
    UINT64_C(0xc16d9a0095928a28), /* k = 23 */
    UINT64_C(0x9abe14cd44753b53), /* k = 24 */
    UINT64_C(0xf79687aed3eec552), /* k = 25 */
    UINT64_C(0xc612062576589ddb), /* k = 26 */
    UINT64_C(0x9e74d1b791e07e49), /* k = 27 */
    UINT64_C(0xfd87b5f28300ca0e), /* k = 28 */
    UINT64_C(0xcad2f7f5359a3b3f), /* k = 29 */
    UINT64_C(0xa2425ff75e14fc32), /* k = 30 */
    UINT64_C(0x81ceb32c4b43fcf5), /* k = 31 */
};

static const char f32_digit_pairs[201] = "00010203040506070809"
                                         "10111213141516171819"
                                         "20212223242526272829"
                                         "30313233343536373839"
                                         "40414243444546474849"
                                         "50515253545556575859"
                                         "60616263646566676869"
                                         "70717273747576777879"
                                         "80818283848586878889"
                                         "90919293949596979899";

struct f32_decimal {
  uint32_t digits; /* value is digits * 10^exp10 */
  int exp10;
};

/*
 * The shifts below are arithmetic on negative values (implementation-defined
 * in C, arithmetic on every compiler we build with).  The constants give
 * exact floors for all arguments used here, q in [-149, 104] and j in
 * [-31, 45] (verified against exact rational arithmetic).
 */

/* floor(q * log10(2)) */
static inline int f32_floor_log10_pow2(int q) { return (q * 78913) >> 18; }

/* floor(log10(3/4 * 2^q)) */
static inline int f32_floor_log10_three_quarters_pow2(int q) {
  return (q * 1262611 - 524031) >> 22;
}

/* floor(j * log2(10)) */
static inline int f32_floor_log2_pow10(int j) { return (j * 1741647) >> 19; }

/*
 * Returns x = cp * g / 2^(r + 31) rounded to odd: floor(x), with the low
 * bit forced on when x has a nonzero fraction (in its top 31 bits; the rest
 * is approximation noise).  cp < 2^26 and 29 <= r <= 32, so splitting g in
 * two 32-bit halves keeps every product within 64 bits, and the split is
 * exact because 2^r divides the high half's 2^32.
 */
static inline uint32_t f32_round_to_odd(uint64_t g, uint32_t cp, int r) {
  uint64_t hi = (g >> 32) * cp;
  uint64_t lo = (g & UINT32_MAX) * cp;
  uint64_t x = (hi << (32 - r)) + (lo >> r);

  return (uint32_t)(x >> 31) | ((x & 0x7fffffffu) != 0);
}

/* Shortest decimal for c * 2^q, c in [1, 2^24). */
static struct f32_decimal f32_to_decimal(uint32_t c, int q) {
  /* Scaled by 4 so the half-way points are integers. */
  uint32_t odd = c & 1; /* odd c: interval endpoints excluded */
  uint32_t cb = c << 2;
  uint32_t cbr = cb + 2;
  uint32_t cbl;
  int k;

  /*
   * At a power of two the gap below is half the gap above, so the
   * interval is 3/4 as wide and k must be chosen accordingly.
   */
  if (c == (UINT32_C(1) << 23) && q > -149) {
    cbl = cb - 1;
    k = f32_floor_log10_three_quarters_pow2(q);
  } else {
    cbl = cb - 2;
    k = f32_floor_log10_pow2(q);
  }

  uint64_t g = f32_pow10_inv[k - F32_K_MIN];
  int r = 32 - q - f32_floor_log2_pow10(-k);
  uint32_t vb = f32_round_to_odd(g, cb, r);
  uint32_t vbl = f32_round_to_odd(g, cbl, r);
  uint32_t vbr = f32_round_to_odd(g, cbr, r);

  /* One digit shorter: the only candidates are the multiples of 10 around. */
  uint32_t s = vb >> 2;
  uint32_t s10 = s / 10;
  uint32_t lo10 = s10 * 10;
  uint32_t hi10 = lo10 + 10;
  int lo10_in = vbl + odd <= lo10 << 2;
  int hi10_in = (hi10 << 2) + odd <= vbr;
  if (lo10_in != hi10_in)
    return (struct f32_decimal){lo10_in ? s10 : s10 + 1, k + 1};

  /* Otherwise s or s + 1; at least one lies in the interval. */
  uint32_t t = s + 1;
  int s_in = vbl + odd <= s << 2;
  int t_in = (t << 2) + odd <= vbr;
  if (s_in != t_in)
    return (struct f32_decimal){s_in ? s : t, k};

  /* Both fit: take the closer one, ties to even (vb vs 4 * (s + 1/2)). */
  uint32_t mid = (s << 2) + 2;
  int take_s = vb < mid || (vb == mid && (s & 1) == 0);
  return (struct f32_decimal){take_s ? s : t, k};
}

static const uint32_t f32_pow10_u32[10] = {
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000,
};

static inline int f32_digit_count(uint32_t d) {
  return 1 + (d >= 10) + (d >= 100) + (d >= 1000) + (d >= 10000) + (d >= 100000) + (d >= 1000000) +
         (d >= 10000000) + (d >= 100000000);
}

/* Writes d < 10^9 as exactly 9 digits, zero-padded on the left. */
static inline void f32_put_9_digits(char *out, uint32_t d) {
  uint32_t hi = d / 10000; /* 5 digits */
  uint32_t lo = d % 10000; /* 4 digits */

  out[0] = (char)('0' + hi / 10000);
  memcpy(out + 1, f32_digit_pairs + 2 * (hi % 10000 / 100), 2);
  memcpy(out + 3, f32_digit_pairs + 2 * (hi % 100), 2);
  memcpy(out + 5, f32_digit_pairs + 2 * (lo / 100), 2);
  memcpy(out + 7, f32_digit_pairs + 2 * (lo % 100), 2);
}

/*
 * Lays out digits * 10^exp10 (digits > 0) in plain or exponent notation.
 *
 * Copies are fixed-size (a couple of moves each, no data-dependent branches);
 * bytes they write past the final length stay inside SCN_F32_FMT_MAX and are
 * overwritten later or ignored.  The furthest write is buf[23].
 */
static size_t f32_write(char *buf, int negative, uint32_t digits, int exp10) {
  char dig[16]; /* the digits, then '0' padding */
  char *p = buf;

  while (digits % 10 == 0) {
    digits /= 10;
    exp10++;
  }
  int n = f32_digit_count(digits); /* at most 9 */
  int x = exp10 + n - 1;           /* exponent of the leading digit */
  /* Left-align the digits so the padding after them is all '0'. */
  f32_put_9_digits(dig, digits * f32_pow10_u32[9 - n]);
  memset(dig + 9, '0', sizeof dig - 9);

  *p = '-';
  p += negative;

  if (x < -6 || x > 20) {
    /* d.ddde+x; the '.' is dropped for a single digit */
    p[0] = dig[0];
    p[1] = '.';
    memcpy(p + 2, dig + 1, 8);
    p += n == 1 ? 1 : n + 1;
    p[0] = 'e';
    p[1] = x < 0 ? '-' : '+';
    int ax = x < 0 ? -x : x;
    memcpy(p + 2, f32_digit_pairs + 2 * ax, 2);
    if (ax < 10) {
      p[2] = p[3];
      p += 3;
    } else {
      p += 4;
    }
  } else if (x >= n - 1) {
    /* ddd000: x + 1 <= 21 digits */
    memset(p, '0', 21);
    memcpy(p, dig, 9);
    p += x + 1;
  } else if (x >= 0) {
    /* dd.ddd: x <= 7 */
    memcpy(p, dig, 8);
    p[x + 1] = '.';
    memcpy(p + x + 2, dig + x + 1, 8);
    p += n + 1;
  } else {
    /* 0.000ddd: at most 5 zeros after the point */
    memcpy(p, "0.000000", 8);
    memcpy(p + 1 - x, dig, 16);
    p += 1 - x + n;
  }
  *p = '\0';
  return (size_t)(p - buf);
}

size_t scn_f32_format(float v, char *buf) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);

  int negative = (int)(bits >> 31);
  uint32_t biased_exp = (bits >> 23) & 0xff;
  uint32_t fraction = bits & 0x7fffff;

  if (biased_exp == 0xff) {
    memcpy(buf, "null", 5);
    return 4;
  }
  if (biased_exp == 0) {
    if (fraction == 0) {
      char *p = buf;
      if (negative)
        *p++ = '-';
      *p++ = '0';
      *p = '\0';
      return (size_t)(p - buf);
    }
    struct f32_decimal d = f32_to_decimal(fraction, -149);
    return f32_write(buf, negative, d.digits, d.exp10);
  }

  uint32_t c = fraction | (UINT32_C(1) << 23);
  int q = (int)biased_exp - 150;

  /*
   * Small integers print as themselves: with q < 0 the gaps to the
   * neighbours are below 1, so no other decimal of as few digits fits.
   */
  if (q < 0 && q > -24) {
    uint32_t whole = c >> -q;
    if (whole << -q == c)
      return f32_write(buf, negative, whole, 0);
  }

  struct f32_decimal d = f32_to_decimal(c, q);
  return f32_write(buf, negative, d.digits, d.exp10);
}

size_t scn_f32_format_array(const float *v, int n, char *buf) {
  char *p = buf;

  *p++ = '[';
  for (int i = 0; i < n; i++) {
    if (i > 0)
      *p++ = ',';
    p += scn_f32_format(v[i], p);
  }
  *p++ = ']';
  *p = '\0';
  return (size_t)(p - buf);
}

size_t scn_f32_format_matrix(const float m[16], char *buf) {
  return scn_f32_format_array(m, 16, buf);
}

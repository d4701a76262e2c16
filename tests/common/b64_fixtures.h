/* Random float32 bit patterns for the base64 tests: finite, often special (zeros of both signs,
 * subnormals, the extremes). */
#ifndef T_B64_FIXTURES_H
#define T_B64_FIXTURES_H

#include <stdint.h>
#include <string.h>

static inline uint32_t b64_next32(uint64_t *rng) {
  *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
  return (uint32_t)(*rng >> 16);
}

static inline float b64_random_float(uint64_t *rng) {
  static const uint32_t special[] = {0x00000000, 0x80000000, 0x00000001, 0x80000001,
                                     0x007fffff, 0x807fffff, 0x00800000, 0x7f7fffff,
                                     0xff7fffff, 0x3f800000, 0xbf800000, 0x34000000};
  uint32_t u = b64_next32(rng);
  if (u % 4 == 0)
    u = special[b64_next32(rng) % (sizeof special / sizeof special[0])];
  else if ((u & 0x7f800000u) == 0x7f800000u)
    u &= 0xbfffffffu; /* not an infinity or a NaN */
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline void b64_random_matrix(uint64_t *rng, float m[16]) {
  for (int i = 0; i < 16; i++)
    m[i] = b64_random_float(rng);
}

#endif

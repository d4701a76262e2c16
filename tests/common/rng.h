/* A small seeded random source for the randomized core tests: splitmix64, so a seed printed by a
 * failing run replays the same steps on any platform. */
#ifndef T_RNG_H
#define T_RNG_H

#include <stdbool.h>
#include <stdint.h>

typedef struct rng {
  uint64_t state;
} rng;

static inline uint64_t rng_next(rng *r) { /* splitmix64 */
  uint64_t z = (r->state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Uniform in [0, n); 0 when n is 0. */
static inline uint32_t rng_below(rng *r, uint32_t n) {
  return n ? (uint32_t)((rng_next(r) >> 32) % n) : 0;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) * 0x1p-53; }

static inline float rng_float(rng *r, double lo, double hi) {
  return (float)(lo + (hi - lo) * rng_unit(r));
}

static inline bool rng_chance(rng *r, double p) { return rng_unit(r) < p; }

/* A quaternion of length 0.1 to 2, not normalised (scn_compose_trs normalises it); kept away
 * from zero, which has no direction. */
static inline void rng_quat(rng *r, float q[4]) {
  double len2;
  do {
    for (int k = 0; k < 4; k++)
      q[k] = rng_float(r, -1, 1);
    len2 = (double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2] + (double)q[3] * q[3];
  } while (len2 < 0.01);
}

#endif

/* The xorshift source the randomised core_batch, core_stream and core_transform_forest cases
 * draw from: a test seeds it by setting rng_state (never 0), and the same seed replays the same
 * case. One state per file that includes this header. */
#ifndef T_XORSHIFT_H
#define T_XORSHIFT_H

#include <stdint.h>

static uint64_t rng_state;

/* A number in [0, n); n must not be 0. */
static inline uint32_t rnd(uint32_t n) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)((rng_state >> 11) % n);
}

#endif

/* Deep chains of random rigid transforms edited at random (locals, world matrices, links), every
 * read compared with the world matrix recomputed in double: the core's world matrices are never
 * stale, in depth-first or in scattered layout. */
#ifndef T_CORE_CHAIN_H
#define T_CORE_CHAIN_H

#include "rng.h"
#include "scn_core.h"

#include <stdbool.h>

/* A rigid motion with a small rotation: hundreds of them stay well inside float range. */
void small_rigid(rng *r, float out[16], double reach);

/* Builds a chain from seed (in scattered layout, or depth-first) and edits and reads it for many
 * rounds; false, with the seed, the round and the node on stderr, at the first stale or wrong
 * matrix. */
bool run_chain(unsigned seed, bool scattered);

#endif

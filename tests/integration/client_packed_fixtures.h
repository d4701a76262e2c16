/* What the packed clients suites share: transforms as a game moves them (translation x rotation
 * x scale, now and then a sheared one), the contract's tolerance of a decoded matrix, and the
 * frame line a daemon writes for a payload. */
#ifndef T_CLIENT_PACKED_FIXTURES_H
#define T_CLIENT_PACKED_FIXTURES_H

#include "packed.h"
#include "rng.h"

#include <stdbool.h>
#include <stdint.h>

/* The run's seed: SCENED_SEED when set, else from the clock; printed with what it is for. */
uint64_t packed_seed(const char *what);

/* T * R * S of a random translation within +-500, rotation and scale (1, uniform, or one per
 * axis, a mirror now and then); sheared, so that it goes raw, when shear is set. */
void packed_random_matrix(rng *r, float m[16], bool shear);

/* got is want within the contract's tolerance on a grid of step: each translation within
 * step / 2 plus float32 rounding, the rotation within 0.5 degrees, the scale as taken apart;
 * a matrix that is not T x R x S exactly. The rotation's error, in degrees, in *deg (may be
 * NULL). */
bool packed_within(double step, const float want[16], const float got[16], double *deg);

/* {"event":"frame","sub":S,"world":"W","tick":T,"full":B,"packed":"<base64 of payload>"}, as
 * the daemon writes it over TCP; the caller frees it. */
char *packed_frame_line(double sub, const char *world, double tick, bool full,
                        const uint8_t *payload, size_t len);

#endif

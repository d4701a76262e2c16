#include "client_packed_fixtures.h"

#include "b64.h"
#include "scn_core.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t packed_seed(const char *what) {
  const char *env = getenv("SCENED_SEED");
  uint64_t seed = env && *env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
  printf("\n  %s: seed %" PRIu64 " (SCENED_SEED=%" PRIu64 " replays it)\n", what, seed, seed);
  return seed;
}

void packed_random_matrix(rng *r, float m[16], bool shear) {
  float t[3], q[4], s[3];
  for (int k = 0; k < 3; k++)
    t[k] = rng_float(r, -500, 500);
  rng_quat(r, q);
  uint32_t kind = rng_below(r, 4);
  float u = rng_float(r, 0.25, 4);
  for (int k = 0; k < 3; k++)
    s[k] = kind < 2 ? 1 : kind == 2 ? u : rng_float(r, 0.25, 4);
  if (kind == 3 && rng_chance(r, 0.3))
    s[0] = -s[0];
  scn_compose_trs(t, q, s, m);
  if (shear)
    m[4] += 0.5f * m[0]; /* the second column leans towards the first */
}

static double quat_angle_deg(const float a[4], const float b[4]) {
  double dot = 0;
  for (int i = 0; i < 4; i++)
    dot += (double)a[i] * b[i];
  return 2 * acos(fmin(1, fabs(dot))) * 180 / 3.14159265358979323846;
}

bool packed_within(double step, const float want[16], const float got[16], double *deg) {
  float tw[3], rw[4], sw[3], tg[3], rg[4], sg[3];
  if (deg)
    *deg = 0;
  if (scn_decompose_trs(want, tw, rw, sw) != SCN_OK)
    return memcmp(want, got, 64) == 0;
  if (scn_decompose_trs(got, tg, rg, sg) != SCN_OK)
    return false;
  bool ok = true;
  for (int k = 0; k < 3; k++) {
    double tol = step / 2 * (1 + 1e-9) + fabs((double)tw[k]) * 0x1p-23 + 1e-30;
    ok &= fabs((double)tg[k] - tw[k]) <= tol;
    ok &= fabs((double)sg[k] - sw[k]) <= 1e-5 * fabs((double)sw[k]);
  }
  double d = quat_angle_deg(rw, rg);
  if (deg)
    *deg = d;
  return ok && d <= 0.5;
}

char *packed_frame_line(double sub, const char *world, double tick, bool full,
                        const uint8_t *payload, size_t len) {
  size_t text = SCN_B64_LEN(len), cap = text + strlen(world) + 160;
  char *line = malloc(cap);
  if (!line)
    abort();
  int n = snprintf(line, cap,
                   "{\"event\":\"frame\",\"sub\":%.0f,\"world\":\"%s\",\"tick\":%.0f,\"full\":%s,"
                   "\"packed\":\"",
                   sub, world, tick, full ? "true" : "false");
  scn_b64_encode(line + n, payload, len);
  memcpy(line + n + text, "\"}", 3);
  return line;
}

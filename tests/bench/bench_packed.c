/* bench-packed: the packed-frame codec in process, no sockets: for a world of N transforms that
 * all move and turn every tick (the stream benchmark's workload), the cost per transform of
 * taking a matrix apart (once per frame, shared by every payload), of encoding a delta payload
 * against a baseline (once per set of subscribers in step), and of a client decoding it, with
 * the payload's bytes per transform. Medians over the ticks.
 *
 * Usage: bench-packed [N] [TICKS]   (default 100000 60)
 */
#include "bench_util.h"
#include "../common/mat_mul.h"
#include "buf.h"
#include "packed.h"
#include "scn_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_TICKS 1000

/* The root at x = tick, turning 0.01 rad a tick about one axis; descendant i on a 316-wide grid
 * under it, turned about y by its own angle: world = root * local. */
static void world_of(int tick, size_t i, float out[16]) {
  float t[3] = {(float)tick, 0, 0}, s[3] = {1, 1, 1};
  double a = tick * 0.01;
  float q[4] = {(float)(0.26726124 * sin(a)), (float)(0.53452248 * sin(a)),
                (float)(0.80178373 * sin(a)), (float)cos(a)};
  float root[16], local[16];
  scn_compose_trs(t, q, s, root);
  double b = (double)(i % 360) * 0.0174532925;
  float lt[3] = {(float)(i % 316), 0, (float)(i / 316)};
  float lq[4] = {0, (float)sin(b / 2), 0, (float)cos(b / 2)};
  scn_compose_trs(lt, lq, s, local);
  mat_mul(root, local, out);
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
  int ticks = argc > 2 ? atoi(argv[2]) : 60;
  if (n == 0 || ticks < 2 || ticks > MAX_TICKS) {
    fprintf(stderr, "usage: bench-packed [N] [TICKS (2..%d)]\n", MAX_TICKS);
    return 2;
  }
  uint64_t *ids = malloc(n * sizeof *ids);
  float(*m)[16] = malloc(n * sizeof *m);
  scn_packed_parts *parts = malloc(n * sizeof *parts);
  if (!ids || !m || !parts)
    return 1;
  for (size_t i = 0; i < n; i++)
    ids[i] = i + 1;
  const double origin[3] = {0, 0, 0};
  scn_packed_baseline daemon = {0}, client = {0};
  scn_packed_baseline_set_grid(&daemon, 0.001, origin);
  scn_packed_baseline_set_grid(&client, 0.001, origin);
  scn_packed_frame f = {0};
  scn_buf out = {0};
  static double take[MAX_TICKS], enc[MAX_TICKS], dec[MAX_TICKS], bytes[MAX_TICKS];
  int measured = 0;
  for (int tick = 1; tick <= ticks; tick++) {
    for (size_t i = 0; i < n; i++)
      world_of(tick, i, m[i]);
    double t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++)
      scn_packed_parts_of(m[i], &parts[i]);
    double t1 = bench_now_ns();
    scn_packed_changes c = {ids, (const float(*)[16])m, parts, n, NULL, 0};
    out.len = 0;
    if (scn_packed_encode(&daemon, &c, &out) != SCN_PACKED_OK || out.failed)
      return 1;
    double t2 = bench_now_ns();
    if (scn_packed_decode(&client, (const uint8_t *)out.data, out.len, &f, NULL) != SCN_PACKED_OK)
      return 1;
    double t3 = bench_now_ns();
    if (tick == 1)
      continue; /* the first frame is absolute */
    take[measured] = (t1 - t0) / (double)n;
    enc[measured] = (t2 - t1) / (double)n;
    dec[measured] = (t3 - t2) / (double)n;
    bytes[measured++] = (double)out.len / (double)n;
  }
  printf("packed codec, %zu transforms moving and turning, %d delta frames (medians): take apart "
         "%.1f ns, encode %.1f ns, decode %.1f ns per transform; %.2f payload bytes per "
         "transform\n",
         n, measured, bench_median(take, measured), bench_median(enc, measured),
         bench_median(dec, measured), bench_median(bytes, measured));
  scn_packed_frame_free(&f);
  scn_buf_free(&out);
  scn_packed_baseline_free(&daemon);
  scn_packed_baseline_free(&client);
  free(ids);
  free(m);
  free(parts);
  return 0;
}

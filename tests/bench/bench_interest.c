/* Interest work per tick, in process: a world of N transforms spread over a square (z = 0), a
 * tenth of them moving each tick, and S regions, each following a moving transform with a
 * radius covering 1% of the square and a margin of a tenth of it. Times the index upkeep and
 * every region's evaluation per tick, with the grid and with the naive filter (every region
 * tests every transform), and prints medians and their ratio.
 * Usage: bench-interest [TRANSFORMS [REGIONS [TICKS [grid]]]]   (default 100000 1000 30; grid:
 * without the naive reference) */
#include "bench_util.h"
#include "scn_interest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint64_t rng = 88172645463325252u;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

typedef struct sink {
  uint64_t sent, removed;
} sink;

static void on_set(void *ud, scn_entity e, const float m[16]) {
  (void)e, (void)m;
  ((sink *)ud)->sent++;
}

static void on_removed(void *ud, scn_entity e) {
  (void)e;
  ((sink *)ud)->removed++;
}

typedef struct result {
  double ms, sent_per_tick, tested_per_tick, bytes;
} result;

static result run(size_t n, size_t regions, int ticks, bool naive) {
  const double side = 1000, radius = side * sqrt(0.01 / M_PI), margin = radius / 10;
  rng = 88172645463325252u;
  scn_limits limits = {0};
  scn_scene *s = scn_scene_new(&limits);
  scn_world *w;
  scn_world_create(s, "w", &w);
  scn_world_keep_events(w, true);
  scn_entity *ids = malloc(sizeof *ids * n);
  float(*pos)[2] = malloc(sizeof *pos * n);
  scn_entity_create(s, n, ids);
  for (size_t i = 0; i < n; i++) {
    float m[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    pos[i][0] = m[12] = (float)(uniform() * side);
    pos[i][1] = m[13] = (float)(uniform() * side);
    scn_transform_create(w, ids[i], SCN_ENTITY_NONE, NULL, m);
  }
  size_t moving = n / 10;
  scn_space *sp = scn_space_new(w);
  scn_scope **scopes = malloc(sizeof *scopes * regions);
  scn_entity *centers = malloc(sizeof *centers * regions);
  for (size_t r = 0; r < regions; r++) {
    scopes[r] = scn_scope_new();
    centers[r] = ids[(r * 7919) % moving]; /* the first tenth move */
  }
  double *ms = malloc(sizeof *ms * (size_t)ticks);
  sink k = {0, 0};
  uint64_t tested = 0;
  for (int t = 0; t <= ticks; t++) {
    for (size_t i = 0; i < moving; i++) {
      float m[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
      pos[i][0] = (float)fmod(pos[i][0] + 1.5 + side, side);
      pos[i][1] = (float)fmod(pos[i][1] + 0.5 + side, side);
      m[12] = pos[i][0], m[13] = pos[i][1];
      scn_transform_set_local(w, ids[i], m);
    }
    uint64_t now = scn_world_close_tick(w);
    double start = bench_now_ns();
    scn_space_sync(sp, (radius + margin) / SCN_SPACE_CELLS_PER_REACH);
    for (size_t r = 0; r < regions; r++) {
      scn_region reg = {.radius = radius, .margin = margin, .naive = naive};
      scn_space_position(sp, centers[r], reg.center);
      int64_t got = scn_scope_eval(scopes[r], sp, &reg, now, t == 0, on_set, on_removed, &k);
      tested += t ? (uint64_t)got : 0;
    }
    if (t == 0) { /* the first tick builds the index and fills every scope */
      k.sent = 0;
      continue;
    }
    ms[t - 1] = (bench_now_ns() - start) / 1e6;
  }
  result res = {bench_median(ms, ticks), (double)k.sent / ticks, (double)tested / ticks,
                (double)scn_space_bytes(sp)};
  double scope_bytes = 0;
  for (size_t r = 0; r < regions; r++)
    scope_bytes += (double)scn_scope_bytes(scopes[r]);
  res.bytes = scope_bytes / (double)regions;
  for (size_t r = 0; r < regions; r++)
    scn_scope_free(scopes[r]);
  free(scopes);
  free(centers);
  free(ms);
  free(ids);
  free(pos);
  scn_space_free(sp);
  scn_scene_free(s);
  return res;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
  size_t regions = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000;
  int ticks = argc > 3 ? atoi(argv[3]) : 30;
  if (n < 10 || regions < 1 || ticks < 1) {
    fprintf(stderr, "usage: bench-interest [TRANSFORMS [REGIONS [TICKS]]]\n");
    return 2;
  }
  printf("interest, in process: %zu transforms over a square, %zu moving per tick, %zu regions "
         "following moving transforms (radius: 1%% of the area, margin radius/10), %d ticks\n",
         n, n / 10, regions, ticks);
  result grid = run(n, regions, ticks, false);
  printf("  grid:  %8.3f ms per tick (median)  %9.0f tested  %8.0f sent per tick  "
         "%6.0f bytes held per region\n",
         grid.ms, grid.tested_per_tick, grid.sent_per_tick, grid.bytes);
  if (argc > 4 && strcmp(argv[4], "grid") == 0)
    return 0;
  if (argc > 4 && strcmp(argv[4], "grid") == 0)
    return 0;
  int naive_ticks = ticks < 5 ? ticks : 5; /* it is slow: a few ticks give its median */
  result naive = run(n, regions, naive_ticks, true);
  printf("  naive: %8.3f ms per tick (median)  %9.0f tested  %8.0f sent per tick\n", naive.ms,
         naive.tested_per_tick, naive.sent_per_tick);
  printf("  grid is %.1fx faster than the naive filter\n", naive.ms / grid.ms);
  return 0;
}

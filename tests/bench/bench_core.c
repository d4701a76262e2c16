/* bench-core: propagation cost of the transform core against the limit, a flat
 * parents-before-children loop over the same data, measured in the same run.
 *
 *   W1 forest: roots each with a breadth-first tree of 99 descendants (branching 3); every
 *      root's local changes; propagate everything.
 *   W2 sparse: the same world; each tick 1% of transforms (fixed seed) get a new local.
 *   W3 chain: one chain of 1,000 transforms, every local set, then propagate.
 *   TRS: one decomposition, and partial sets against whole-matrix sets (bench_trs).
 *   History: W2 tick by tick (the sets, then close_tick, which propagates) on two copies of the
 *      forest, one keeping the last 600 ticks and one none; then the history's memory over its
 *      full window, and reads at past ticks against current reads. The target for the cost of
 *      keeping history is on the whole tick (the sets and close_tick): at most 1.2 times the
 *      tick without history; for its memory, at most 80 bytes per changed world matrix kept
 *      (all the history's memory, local matrices and structure included).
 *
 * Each line gives medians over the repetitions (the ratio: median of per-repetition ratios). Usage:
 * bench-core [--n N] [--reps R] [--only history]  (--only history: the history lines alone)
 */
#include "bench_util.h"
#include "scn_core.h"

#include <cglm/cglm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TREE 100
#define BRANCH 3

static long rss_bytes(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
    resident = 0;
  fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 16);
}

static void random_local(float out[16], float phase) {
  float t[3] = {(float)(rng() % 100) * 0.1f, phase, 1.0f};
  float r[4] = {0.1f * phase, 0.2f, 0.3f, 1.0f};
  float s[3] = {1.0f, 1.0f, 1.0f};
  scn_compose_trs(t, r, s, out);
}

/* The limit: flat arrays in breadth-first order per tree, parents before children. */
typedef struct flat {
  uint32_t n;
  mat4 *local, *world;
  uint32_t *parent; /* UINT32_MAX for roots */
} flat;

static void flat_update(flat *f, const uint32_t *idx, uint32_t count) {
  for (uint32_t k = 0; k < count; k++) {
    uint32_t i = idx ? idx[k] : k;
    uint32_t p = f->parent[i];
    if (p == UINT32_MAX)
      glm_mat4_copy(f->local[i], f->world[i]);
    else
      glm_mat4_mul(f->world[p], f->local[i], f->world[i]);
  }
}

static double time_flat(flat *f, const uint32_t *idx, uint32_t count) {
  double t0 = bench_now_ns();
  flat_update(f, idx, count);
  return bench_now_ns() - t0;
}

/* Core and limit run back to back on the same data, in alternating order so neither always
 * meets the caches the other left; the ratio is the median of the per-repetition ratios, so a
 * noisy moment on the host disturbs one pair instead of skewing one side of the quotient. */
static int limit_first(int rep) { return rep % 2; }

static void report(const char *name, uint32_t n, double *core, double *limit, double *ratio,
                   int reps) {
  printf("%s n=%u core_ns=%.2f limit_ns=%.2f ratio=%.2f\n", name, n, bench_median(core, reps),
         bench_median(limit, reps), bench_median(ratio, reps));
}

typedef struct forest {
  scn_scene *scene;
  scn_world *world;
  scn_entity *ids; /* by flat index */
  flat flat;
} forest;

static void forest_begin(forest *fo, uint32_t n) {
  fo->scene = scn_scene_new(&(scn_limits){.max_transforms = n + 1, .max_entities = n + 16});
  scn_world_create(fo->scene, "bench", &fo->world);
  fo->ids = malloc(sizeof *fo->ids * n);
  scn_entity_create(fo->scene, n, fo->ids);
  fo->flat.n = n;
  fo->flat.local = aligned_alloc(64, sizeof(mat4) * n);
  fo->flat.world = aligned_alloc(64, sizeof(mat4) * n);
  fo->flat.parent = malloc(sizeof(uint32_t) * n);
}

static void forest_add(forest *fo, uint32_t i) {
  uint32_t tree = i / TREE, k = i % TREE;
  /* breadth-first numbering inside a tree: node k's parent is (k - 1) / BRANCH */
  uint32_t parent = k == 0 ? UINT32_MAX : tree * TREE + (k - 1) / BRANCH;
  float m[16];
  random_local(m, (float)k);
  memcpy(fo->flat.local[i], m, sizeof m);
  fo->flat.parent[i] = parent;
  scn_transform_create(fo->world, fo->ids[i],
                       parent == UINT32_MAX ? SCN_ENTITY_NONE : fo->ids[parent], NULL, m);
}

static void forest_end(forest *fo) {
  scn_world_flush(fo->world);
  flat_update(&fo->flat, NULL, fo->flat.n);
}

static void build_forest(forest *fo, uint32_t n) {
  forest_begin(fo, n);
  for (uint32_t i = 0; i < n; i++)
    forest_add(fo, i);
  forest_end(fo);
}

/* Two copies built side by side, a transform of each in turn, so that neither gets memory the
 * other left: built one after the other, the first one ran about 3% slower than the second on
 * the same ticks, neither keeping history. */
static void build_forests(forest *a, forest *b, uint32_t n) {
  forest_begin(a, n);
  forest_begin(b, n);
  for (uint32_t i = 0; i < n; i++) {
    forest_add(a, i);
    forest_add(b, i);
  }
  forest_end(a);
  forest_end(b);
}

static void free_forest(forest *fo) {
  scn_scene_free(fo->scene);
  free(fo->ids), free(fo->flat.local), free(fo->flat.world), free(fo->flat.parent);
}

static void bench_w1(forest *fo, int reps) {
  uint32_t n = fo->flat.n, roots = n / TREE;
  double core[reps], limit[reps], ratio[reps], set[reps];
  for (int r = 0; r < reps; r++) {
    /* the same new root locals for both sides */
    for (uint32_t t = 0; t < roots; t++) {
      float m[16];
      random_local(m, (float)(r + 1));
      memcpy(fo->flat.local[t * TREE], m, sizeof m);
    }
    double ts = bench_now_ns();
    for (uint32_t t = 0; t < roots; t++)
      scn_transform_set_local(fo->world, fo->ids[t * TREE], fo->flat.local[t * TREE][0]);
    double t0 = bench_now_ns();
    double tl = limit_first(r) ? time_flat(&fo->flat, NULL, n) : 0;
    double t1 = bench_now_ns();
    scn_world_flush(fo->world);
    double t2 = bench_now_ns();
    if (!limit_first(r))
      tl = time_flat(&fo->flat, NULL, n);
    core[r] = (t2 - t1) / n;
    limit[r] = tl / n;
    ratio[r] = core[r] / limit[r];
    set[r] = (t0 - ts) / roots;
  }
  report("W1", n, core, limit, ratio, reps);
  printf("W1 set_local_ns=%.1f (per call, before the propagation above)\n",
         bench_median(set, reps));
}

static void bench_w2(forest *fo, int reps) {
  uint32_t n = fo->flat.n, pick = n / 100;
  uint32_t *chosen = malloc(sizeof *chosen * pick);
  uint8_t *mark = malloc(n);
  uint32_t *idx = malloc(sizeof *idx * n);
  double core[reps], limit[reps], ratio[reps], set[reps];
  scn_world_stats before, after;
  for (int r = 0; r < reps; r++) {
    memset(mark, 0, n);
    for (uint32_t k = 0; k < pick; k++) {
      chosen[k] = rng() % n;
      mark[chosen[k]] = 1;
      float m[16];
      random_local(m, (float)(r + 2) + k * 1e-3f);
      memcpy(fo->flat.local[chosen[k]], m, sizeof m);
    }
    /* the limit walks exactly the dirty subtrees: a node is dirty if it or an ancestor was
     * chosen, and in breadth-first order the parent's mark is already final */
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t p = fo->flat.parent[i];
      if (p != UINT32_MAX && mark[p])
        mark[i] = 1;
      if (mark[i])
        idx[count++] = i;
    }
    scn_world_get_stats(fo->world, &before);
    double ts = bench_now_ns();
    for (uint32_t k = 0; k < pick; k++)
      scn_transform_set_local(fo->world, fo->ids[chosen[k]], fo->flat.local[chosen[k]][0]);
    double t0 = bench_now_ns();
    double tl = limit_first(r) ? time_flat(&fo->flat, idx, count) : 0;
    double t1 = bench_now_ns();
    scn_world_flush(fo->world);
    double t2 = bench_now_ns();
    if (!limit_first(r))
      tl = time_flat(&fo->flat, idx, count);
    scn_world_get_stats(fo->world, &after);
    uint64_t recomputed = after.recomputed - before.recomputed;
    if (recomputed != count)
      fprintf(stderr, "W2: core recomputed %llu, dirty subtrees hold %u\n",
              (unsigned long long)recomputed, count);
    core[r] = (t2 - t1) / (double)recomputed;
    limit[r] = tl / count;
    ratio[r] = core[r] / limit[r];
    set[r] = (t0 - ts) / pick;
  }
  report("W2", n, core, limit, ratio, reps);
  printf("W2 set_local_ns=%.1f (per call, before the propagation above)\n",
         bench_median(set, reps));
  free(chosen), free(mark), free(idx);
}

/* ---- history ------------------------------------------------------------------------------ */

#define HISTORY 600
#define TICKS_PER_REP 8
#define QUERIES 200000
#define RECENT 10 /* lag compensation asks a few ticks back */

/* One W2 tick's sets: the same for both copies. */
typedef struct w2_sets {
  uint32_t pick;
  uint32_t *chosen;
  float (*m)[16];
} w2_sets;

static void w2_next(w2_sets *st, uint32_t n, int tick) {
  for (uint32_t k = 0; k < st->pick; k++) {
    st->chosen[k] = rng() % n;
    random_local(st->m[k], (float)(tick % 1000) * 0.01f + k * 1e-3f);
  }
}

/* This thread's CPU time: ticks last milliseconds, and on a shared host a wall clock would
 * count the time other processes held the core. */
static double cpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Sets, then close_tick; returns the tick's time and writes the sets' time to *set_ns. */
static double w2_tick(forest *fo, const w2_sets *st, double *set_ns) {
  double t0 = cpu_now_ns();
  for (uint32_t k = 0; k < st->pick; k++)
    scn_transform_set_local(fo->world, fo->ids[st->chosen[k]], st->m[k]);
  double t1 = cpu_now_ns();
  scn_world_close_tick(fo->world);
  double t2 = cpu_now_ns();
  *set_ns = t1 - t0;
  return t2 - t0;
}

static double percentile(double *v, int n, double p) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return v[(int)(p * (n - 1))];
}

static double sink;

static double time_get(scn_world *w, scn_entity e) {
  scn_transform_info info;
  double t0 = bench_now_ns();
  scn_transform_get(w, e, &info);
  double t1 = bench_now_ns();
  sink += info.world[12];
  return t1 - t0;
}

static double time_past(scn_world *w, scn_entity e, uint64_t tick) {
  scn_transform_info info;
  double t0 = bench_now_ns();
  int rc = scn_world_history_get(w, e, tick, &info);
  double t1 = bench_now_ns();
  if (rc != SCN_OK)
    fprintf(stderr, "history: get at tick %llu failed: %s\n", (unsigned long long)tick,
            scn_err_name(rc));
  sink += info.world[12];
  return t1 - t0;
}

/* Ticks of both copies in pairs, in alternating order (the same sets for both); the tick's
 * ratio in each pair, and how the sets and close_tick compare, into out unless NULL; the world
 * matrices that changed in each tick into changed unless NULL. */
typedef struct w2_pairs {
  double *tick_ratio, *close_ratio, *set_ratio;       /* with / without */
  double *close_with, *close_without, *set_with, *set_without; /* per matrix, per set */
} w2_pairs;

static int run_pairs(forest *with, forest *without, w2_sets *st, uint32_t n, int tick, int pairs,
                     w2_pairs *out, uint64_t *changed) {
  for (int r = 0; r < pairs; r++, tick++) {
    scn_world_stats s0, s1;
    double tw, to = 0, sw, so = 0;
    w2_next(st, n, tick);
    scn_world_get_stats(with->world, &s0);
    if (r % 2)
      to = w2_tick(without, st, &so);
    tw = w2_tick(with, st, &sw);
    if (!(r % 2))
      to = w2_tick(without, st, &so);
    scn_world_get_stats(with->world, &s1);
    uint64_t recomputed = s1.recomputed - s0.recomputed;
    if (changed)
      changed[tick % HISTORY] = s1.changed - s0.changed;
    if (!out)
      continue;
    out->tick_ratio[r] = tw / to;
    out->close_ratio[r] = (tw - sw) / (to - so);
    out->set_ratio[r] = sw / so;
    out->close_with[r] = (tw - sw) / (double)recomputed;
    out->close_without[r] = (to - so) / (double)recomputed;
    out->set_with[r] = sw / st->pick;
    out->set_without[r] = so / st->pick;
  }
  return tick;
}

static void bench_history(uint32_t n, int reps) {
  forest with, without;
  build_forests(&with, &without, n);
  w2_sets st = {.pick = n / 100};
  st.chosen = malloc(sizeof *st.chosen * st.pick);
  st.m = aligned_alloc(64, sizeof *st.m * st.pick + 64);
  const int pairs = reps * TICKS_PER_REP;
  double *buf = malloc(sizeof(double) * 7 * pairs);
  w2_pairs p = {buf, buf + pairs, buf + 2 * pairs, buf + 3 * pairs, buf + 4 * pairs,
                buf + 5 * pairs, buf + 6 * pairs};
  /* first neither keeps history: what the comparison itself is worth */
  int tick = run_pairs(&with, &without, &st, n, 0, 20, NULL, NULL);
  tick = run_pairs(&with, &without, &st, n, tick, pairs, &p, NULL);
  printf("history W2 control tick ratio=%.2f (neither copy keeping history yet)\n",
         bench_median(p.tick_ratio, pairs));
  if (scn_world_set_history(with.world, HISTORY) != SCN_OK) {
    fprintf(stderr, "history: set_history failed\n");
    return;
  }
  /* world matrices changed per tick, to count those the window holds */
  uint64_t *changed = calloc(HISTORY, sizeof *changed);
  tick = run_pairs(&with, &without, &st, n, tick, HISTORY + 20, NULL, changed); /* fills it */
  tick = run_pairs(&with, &without, &st, n, tick, pairs, &p, changed);
  printf("history W2 n=%u ticks=%d none_ns=%.2f history_ns=%.2f ratio=%.2f (close_tick, per "
         "recomputed matrix)\n",
         n, HISTORY, bench_median(p.close_without, pairs), bench_median(p.close_with, pairs),
         bench_median(p.close_ratio, pairs));
  printf("history W2 set_local_ns none=%.1f history=%.1f ratio=%.2f\n",
         bench_median(p.set_without, pairs), bench_median(p.set_with, pairs),
         bench_median(p.set_ratio, pairs));
  printf("history W2 tick ratio=%.2f (the sets and close_tick; target <= 1.2)\n",
         bench_median(p.tick_ratio, pairs));
  free(buf);

  /* the window holds the records of its last HISTORY - 1 ticks (the oldest one's are the live
   * values of the ticks after it): count their world matrices */
  scn_world_stats s1;
  scn_world_get_stats(with.world, &s1);
  uint64_t worlds = 0;
  for (int k = 1; k < HISTORY; k++)
    worlds += changed[(tick - k) % HISTORY];
  printf("history memory bytes=%llu matrices=%llu (world %llu, local %llu) "
         "bytes_per_matrix=%.1f bytes_per_changed_world=%.1f (target <= 80)\n",
         (unsigned long long)s1.history_bytes, (unsigned long long)s1.history_matrices,
         (unsigned long long)worlds, (unsigned long long)(s1.history_matrices - worlds),
         (double)s1.history_bytes / (double)s1.history_matrices,
         (double)s1.history_bytes / (double)worlds);

  uint64_t oldest = 0, newest = 0;
  scn_world_history_window(with.world, &oldest, &newest);
  double *cur = malloc(sizeof *cur * QUERIES), *past = malloc(sizeof *past * QUERIES);
  double *recent = malloc(sizeof *recent * QUERIES);
  /* each read its own random entity: one read would otherwise bring the next one's lines */
  for (int q = 0; q < QUERIES; q++) {
    scn_entity a = with.ids[rng() % n], b = with.ids[rng() % n], c = with.ids[rng() % n];
    uint64_t any = oldest + rng() % (newest - oldest + 1), late = newest - rng() % RECENT;
    if (q % 2) {
      cur[q] = time_get(with.world, a);
      past[q] = time_past(with.world, b, any);
      recent[q] = time_past(with.world, c, late);
    } else {
      recent[q] = time_past(with.world, c, late);
      past[q] = time_past(with.world, b, any);
      cur[q] = time_get(with.world, a);
    }
  }
  double c50 = percentile(cur, QUERIES, 0.5), c99 = percentile(cur, QUERIES, 0.99);
  double p50 = percentile(past, QUERIES, 0.5), p99 = percentile(past, QUERIES, 0.99);
  double r50 = percentile(recent, QUERIES, 0.5), r99 = percentile(recent, QUERIES, 0.99);
  printf("history get_ns current p50=%.0f p99=%.0f\n", c50, c99);
  printf("history get_ns past (any tick of %llu..%llu) p50=%.0f p99=%.0f p50_ratio=%.2f\n",
         (unsigned long long)oldest, (unsigned long long)newest, p50, p99, p50 / c50);
  printf("history get_ns past (last %d ticks) p50=%.0f p99=%.0f p50_ratio=%.2f\n", RECENT, r50, r99,
         r50 / c50);
  free(cur), free(past), free(recent), free(changed), free(st.chosen), free(st.m);
  free_forest(&with);
  free_forest(&without);
}

static void bench_w3(int reps) {
  enum { CHAIN = 1000, INNER = 50 };
  scn_scene *scene = scn_scene_new(NULL);
  scn_world *w;
  scn_world_create(scene, "chain", &w);
  scn_entity ids[CHAIN];
  scn_entity_create(scene, CHAIN, ids);
  flat f = {.n = CHAIN};
  f.local = aligned_alloc(64, sizeof(mat4) * CHAIN);
  f.world = aligned_alloc(64, sizeof(mat4) * CHAIN);
  f.parent = malloc(sizeof(uint32_t) * CHAIN);
  for (uint32_t i = 0; i < CHAIN; i++) {
    f.parent[i] = i == 0 ? UINT32_MAX : i - 1;
    glm_mat4_identity(f.local[i]);
    scn_transform_create(w, ids[i], i ? ids[i - 1] : SCN_ENTITY_NONE, NULL, NULL);
  }
  scn_world_flush(w);
  double core[reps], limit[reps], ratio[reps], set[reps];
  for (int r = 0; r < reps; r++) {
    double c = 0, l = 0, st = 0;
    for (int inner = 0; inner < INNER; inner++) {
      for (uint32_t i = 0; i < CHAIN; i++) {
        float m[16];
        random_local(m, (float)(r * INNER + inner) * 0.01f);
        memcpy(f.local[i], m, sizeof m);
      }
      double ts = bench_now_ns();
      for (uint32_t i = 0; i < CHAIN; i++)
        scn_transform_set_local(w, ids[i], f.local[i][0]);
      double t0 = bench_now_ns();
      double tl = limit_first(inner) ? time_flat(&f, NULL, CHAIN) : 0;
      double t1 = bench_now_ns();
      scn_world_flush(w);
      double t2 = bench_now_ns();
      if (!limit_first(inner))
        tl = time_flat(&f, NULL, CHAIN);
      c += t2 - t1;
      l += tl;
      st += t0 - ts;
    }
    core[r] = c / (CHAIN * INNER);
    limit[r] = l / (CHAIN * INNER);
    ratio[r] = core[r] / limit[r];
    set[r] = st / (CHAIN * INNER);
  }
  report("W3", CHAIN, core, limit, ratio, reps);
  printf("W3 set_local_ns=%.1f (per call, before the propagation above)\n",
         bench_median(set, reps));
  free(f.local), free(f.world), free(f.parent);
  scn_scene_free(scene);
}

/* Parts of a transform: what taking one matrix apart costs, and a partial set (decompose,
 * compose, set) against a plain set_local / set_world of a whole matrix, on the same
 * transforms in the same run: 1,000 roots for local space, 1,000 children of a rotated, scaled
 * parent for world space, each set once per round, then a flush (not timed). */
static void bench_trs(int reps) {
  enum { N = 1000, INNER = 50 };
  scn_scene *scene = scn_scene_new(NULL);
  scn_world *w;
  scn_world_create(scene, "trs", &w);
  scn_entity roots[N], kids[N], parent;
  scn_entity_create(scene, N, roots);
  scn_entity_create(scene, N, kids);
  scn_entity_create(scene, 1, &parent);
  float pm[16];
  const float pt[3] = {1, 2, 3}, pr[4] = {0.2f, 0.3f, 0.1f, 0.9f}, ps[3] = {2, 2, 2};
  scn_compose_trs(pt, pr, ps, pm);
  scn_transform_create(w, parent, SCN_ENTITY_NONE, NULL, pm);
  /* matrices to set (and to decompose): T * R * S with a non-uniform scale */
  float(*mats)[16] = malloc(sizeof(float[16]) * N * 2);
  for (uint32_t i = 0; i < 2 * N; i++) {
    float t[3] = {(float)(rng() % 100), 1, 2}, r[4] = {0.1f * (i % 7), 0.2f, 0.3f, 1};
    float sc[3] = {1 + (i % 3), 1, 0.5f};
    scn_compose_trs(t, r, sc, mats[i]);
  }
  for (uint32_t i = 0; i < N; i++) {
    scn_transform_create(w, roots[i], SCN_ENTITY_NONE, NULL, mats[i]);
    scn_transform_create(w, kids[i], parent, NULL, mats[i]);
  }
  scn_world_flush(w);
  enum { DEC, SET_LOCAL, SET_TRS, PARTS_R, PARTS_T, SET_WORLD, PARTS_WORLD_R, KINDS };
  double ns[KINDS][reps];
  float sink = 0;
  for (int r = 0; r < reps; r++) {
    double sum[KINDS] = {0};
    for (int inner = 0; inner < INNER; inner++) {
      int flip = (r * INNER + inner) % 2; /* a different value every round */
      float q[4] = {0.1f, 0.2f * flip, 0.3f, 1}, t[3] = {(float)inner, 1, (float)flip};
      double t0 = bench_now_ns();
      for (uint32_t i = 0; i < N; i++) {
        float pt3[3], pr4[4], ps3[3];
        scn_decompose_trs(mats[i + flip * N], pt3, pr4, ps3);
        sink += pr4[3];
      }
      double t1 = bench_now_ns();
      for (uint32_t i = 0; i < N; i++)
        scn_transform_set_local(w, roots[i], mats[i + flip * N]);
      double t2 = bench_now_ns();
      scn_world_flush(w);
      double t3 = bench_now_ns();
      for (uint32_t i = 0; i < N; i++)
        scn_transform_set_parts(w, roots[i], false, NULL, q, NULL);
      double t4 = bench_now_ns();
      scn_world_flush(w);
      double t5 = bench_now_ns();
      for (uint32_t i = 0; i < N; i++)
        scn_transform_set_parts(w, roots[i], false, t, NULL, NULL);
      double t6 = bench_now_ns();
      scn_world_flush(w);
      double t7 = bench_now_ns();
      for (uint32_t i = 0; i < N; i++)
        scn_transform_set_world(w, kids[i], mats[i + flip * N]);
      double t8 = bench_now_ns();
      scn_world_flush(w);
      double t9 = bench_now_ns();
      for (uint32_t i = 0; i < N; i++)
        scn_transform_set_parts(w, kids[i], true, NULL, q, NULL);
      double t10 = bench_now_ns();
      scn_world_flush(w);
      /* what a whole t/r/s set costs: compose, then set_local */
      double t11 = bench_now_ns();
      for (uint32_t i = 0; i < N; i++) {
        float m[16];
        scn_compose_trs(t, q, mats[i] + 12, m);
        scn_transform_set_local(w, roots[i], m);
      }
      double t12 = bench_now_ns();
      scn_world_flush(w);
      sum[DEC] += t1 - t0;
      sum[SET_LOCAL] += t2 - t1;
      sum[SET_TRS] += t12 - t11;
      sum[PARTS_R] += t4 - t3;
      sum[PARTS_T] += t6 - t5;
      sum[SET_WORLD] += t8 - t7;
      sum[PARTS_WORLD_R] += t10 - t9;
    }
    for (int k = 0; k < KINDS; k++)
      ns[k][r] = sum[k] / (N * INNER);
  }
  printf("TRS decompose_ns=%.1f set_local_ns=%.1f set_local_trs_ns=%.1f (compose + set_local)\n",
         bench_median(ns[DEC], reps), bench_median(ns[SET_LOCAL], reps),
         bench_median(ns[SET_TRS], reps));
  printf("TRS set_parts_r_ns=%.1f set_parts_t_ns=%.1f\n", bench_median(ns[PARTS_R], reps),
         bench_median(ns[PARTS_T], reps));
  printf("TRS set_world_ns=%.1f set_parts_world_r_ns=%.1f (children of a rotated, scaled parent)\n",
         bench_median(ns[SET_WORLD], reps), bench_median(ns[PARTS_WORLD_R], reps));
  if (sink == 12345.0f) /* keeps the decompositions */
    puts("");
  free(mats);
  scn_scene_free(scene);
}

int main(int argc, char **argv) {
  uint32_t n = 1000000;
  int reps = 9;
  bool history_only = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--n") && i + 1 < argc)
      n = (uint32_t)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc && !strcmp(argv[i + 1], "history"))
      history_only = true, i++;
    else {
      fprintf(stderr, "usage: bench-core [--n N] [--reps R] [--only history]\n");
      return 2;
    }
  }
  n = n / TREE * TREE;
  if (n == 0 || reps < 1) {
    fprintf(stderr, "bench-core: --n must be at least %d and --reps at least 1\n", TREE);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (history_only) {
    bench_history(n, reps);
    return 0;
  }
  forest fo;
  long rss0 = rss_bytes();
  build_forest(&fo, n);
  /* the benchmark's own copies (ids and the flat arrays) are not the core's */
  long own = (long)n * (sizeof(scn_entity) + 2 * sizeof(mat4) + sizeof(uint32_t));
  long rss1 = rss_bytes();
  bench_w1(&fo, reps);
  bench_w2(&fo, reps);
  bench_w3(reps);
  bench_trs(reps);
  printf("memory bytes_per_transform=%.1f\n", (double)(rss1 - rss0 - own) / n);
  free_forest(&fo);
  bench_history(n, reps);
  return 0;
}

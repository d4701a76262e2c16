/* Propagation of world matrices: dirty subtrees are recomputed once per flush, parents before
 * children; when the arrays are in depth-first order a subtree is one contiguous range. */
#include "core_internal.h"

#include <stdlib.h>
#include <string.h>

/* Before world[i] changes for the first time in the open tick: the revert log and the history
 * keep its old value. */
static void first_change(scn__tm *tm, uint32_t i) {
  if (scn__tm_logs_reverts(tm))
    scn__tm_note_revert(tm, i);
  if (tm->hist)
    scn__hist_world(tm, i);
}

/* Recompute one instance from its parent's (fresh) world; stamp it when the bits change. */
static inline uint64_t recompute(scn__tm *tm, uint32_t i, uint32_t parent) {
  if (tm->hist && tm->dirty[i]) /* its local matrix may have changed: see scn__hist_local */
    scn__hist_local(tm, i);
  mat4 w;
  if (parent == SCN_NIL)
    glm_mat4_copy(tm->local[i], w);
  else
    glm_mat4_mul(tm->world[parent], tm->local[i], w);
  if (memcmp(w, tm->world[i], sizeof w) == 0)
    return 0;
  if (tm->changed[i] != scn__tm_stamp(tm))
    first_change(tm, i);
  glm_mat4_copy(w, tm->world[i]);
  tm->changed[i] = scn__tm_stamp(tm);
  return 1;
}

static bool has_dirty_ancestor(const scn__tm *tm, uint32_t i) {
  for (uint32_t a = tm->parent[i]; a != SCN_NIL; a = tm->parent[a])
    if (tm->dirty[a])
      return true;
  return false;
}

#if (defined(__SSE__) || defined(__SSE2__)) && !defined(__AVX__)
#define SCN_RANGE_SSE 1
/* Column c of parent * local with cglm's own SSE steps in glm_mat4_mul's order, so the bits
 * equal those of every other path that computes a world matrix. */
static inline __m128 mul_col(__m128 p0, __m128 p1, __m128 p2, __m128 p3, __m128 l) {
  __m128 v = _mm_mul_ps(glmm_splat_x(l), p0);
  v = glmm_fmadd(glmm_splat_y(l), p1, v);
  v = glmm_fmadd(glmm_splat_z(l), p2, v);
  return glmm_fmadd(glmm_splat_w(l), p3, v);
}

static inline __m128i col_eq(__m128 v, const float *col) {
  return _mm_cmpeq_epi32(_mm_castps_si128(v), _mm_load_si128((const __m128i *)col));
}

/* The translation column first: when anything above moved it almost always differs, and the
 * rest need not be read. */
static inline bool same_bits(__m128 a, __m128 b, __m128 c, __m128 d, const float *m) {
  if (_mm_movemask_epi8(col_eq(d, m + 12)) != 0xffff)
    return false;
  __m128i eq = _mm_and_si128(_mm_and_si128(col_eq(a, m), col_eq(b, m + 4)), col_eq(c, m + 8));
  return _mm_movemask_epi8(eq) == 0xffff;
}

static inline __m128i reg_eq(__m128 a, __m128 b) {
  return _mm_cmpeq_epi32(_mm_castps_si128(a), _mm_castps_si128(b));
}
#endif

#ifdef SCN_RANGE_SSE
/* Where the propagation loop appends to a matrix ring of the history: the chunk of record seq
 * (NULL: none yet), and the ring's front (a chain head below it is none). */
typedef struct hist_end {
  scn__hist_mchunk *chunk;
  uint64_t seq, front;
} hist_end;

static inline hist_end hist_open(scn__tm *tm, int which) {
  const scn__hist *h = tm->hist;
  const scn__ring *r = &h->ring[which];
  hist_end e = {NULL, r->end, r->front};
  if (!h->broken && (r->end & ((1u << SCN_HIST_MSHIFT) - 1)))
    e.chunk = r->table[(r->end >> SCN_HIST_MSHIFT) & r->mask];
  return e;
}

/* Appends the matrix with columns c0..c3 at e in ring which and makes it the head *head of its
 * chain, linked back to the one before: its first three rows, and a last row other than
 * 0 0 0 1 aside. */
static inline __attribute__((always_inline)) void hist_put(scn__tm *tm, int which, hist_end *e,
                                                           uint64_t *head, __m128 c0, __m128 c1,
                                                           __m128 c2, __m128 c3) {
  const uint64_t s = e->seq;
  const uint32_t k = (uint32_t)s & ((1u << SCN_HIST_MSHIFT) - 1);
  if (__builtin_expect(k == 0 || !e->chunk, 0)) {
    e->chunk = scn__hist_chunk(tm, which, s);
    if (!e->chunk)
      return;
  }
  const uint64_t prev = *head, back = prev >= e->front ? s - prev : 0;
  uint32_t link = back <= SCN_HIST_LINK_MAX ? (uint32_t)back : scn__hist_too_far(tm->hist);
  *head = s;
  _MM_TRANSPOSE4_PS(c0, c1, c2, c3);
  if (__builtin_expect(_mm_movemask_epi8(reg_eq(c3, _mm_set_ps(1, 0, 0, 0))) != 0xffff, 0)) {
    float row3[4];
    _mm_storeu_ps(row3, c3);
    link |= scn__hist_aside(tm->hist, which, s, row3);
  }
  float *rows = e->chunk->rows[k];
  glmm_store(rows, c0), glmm_store(rows + 4, c1), glmm_store(rows + 8, c2);
  e->chunk->link[k] = link;
  e->seq = s + 1;
}
#endif

/* The hot loop: a span of whole subtrees laid out back to back in depth-first order, none of
 * them with a dirty ancestor outside the span, so parents come before children. A first child
 * directly follows its parent, so the parent's world is taken from the registers that just
 * computed it instead of being reloaded through memory (a chain runs at multiply latency).
 *
 * With history the loop is compiled a second time (hist true) and keeps the records itself,
 * making no call per matrix (a call would spill the registers and leave fewer iterations, and
 * their cache misses, in flight): a dirty instance's local matrix, loaded for the multiply, is
 * compared with its shadow, which becomes a record when they differ (see scn__hist_local); the
 * old world matrix becomes one the first time it changes in the tick. Each is linked to its
 * chain through the heads, which the loop meets in the order of the instances. */
#ifdef SCN_RANGE_SSE
static inline __attribute__((always_inline)) void span_sse(scn__tm *tm, uint32_t begin,
                                                           uint32_t end, const bool hist) {
  mat4 *restrict world = tm->world;
  const mat4 *restrict local = tm->local;
  const uint32_t *restrict parent = tm->parent;
  uint32_t *restrict stamp = tm->changed;
  const uint8_t *restrict dirty = tm->dirty;
  const uint32_t tick = scn__tm_stamp(tm);
  const bool reverts = scn__tm_logs_reverts(tm);
  /* keeping old values costs nothing per matrix when nothing is kept */
  const bool keep_old = reverts || tm->hist;
  uint64_t changed = 0;
  hist_end we = {0}, le = {0};
  scn__heads *restrict heads = NULL;
  mat4 *restrict shadow = NULL;
  uint64_t local_begin = 0;
  if (hist) {
    we = hist_open(tm, SCN_HIST_WORLD);
    le = hist_open(tm, SCN_HIST_LOCAL);
    heads = tm->hist->heads;
    shadow = tm->hist->shadow;
    local_begin = tm->hist->begin[SCN_HIST_LOCAL];
  }
  /* the node before the span: when it is the first node's parent its world is current */
  const float *before = world[begin ? begin - 1 : 0][0];
  __m128 w0 = glmm_load(before), w1 = glmm_load(before + 4);
  __m128 w2 = glmm_load(before + 8), w3 = glmm_load(before + 12);
  for (uint32_t j = begin; j < end; j++) {
    uint32_t p = parent[j];
    __m128 l0 = glmm_load(local[j][0]), l1 = glmm_load(local[j][1]);
    __m128 l2 = glmm_load(local[j][2]), l3 = glmm_load(local[j][3]);
    if (hist && dirty[j]) {
      __m128 s0 = glmm_load(shadow[j][0]), s1 = glmm_load(shadow[j][1]);
      __m128 s2 = glmm_load(shadow[j][2]), s3 = glmm_load(shadow[j][3]);
      __m128i eq = _mm_and_si128(_mm_and_si128(reg_eq(l0, s0), reg_eq(l1, s1)),
                                 _mm_and_si128(reg_eq(l2, s2), reg_eq(l3, s3)));
      if (_mm_movemask_epi8(eq) != 0xffff) {
        if (heads[j].local < local_begin)
          hist_put(tm, SCN_HIST_LOCAL, &le, &heads[j].local, s0, s1, s2, s3);
        glmm_store(shadow[j][0], l0), glmm_store(shadow[j][1], l1);
        glmm_store(shadow[j][2], l2), glmm_store(shadow[j][3], l3);
      }
    }
    if (p == SCN_NIL) {
      w0 = l0, w1 = l1, w2 = l2, w3 = l3;
    } else {
      __m128 p0 = w0, p1 = w1, p2 = w2, p3 = w3;
      if (p != j - 1) {
        p0 = glmm_load(world[p][0]), p1 = glmm_load(world[p][1]);
        p2 = glmm_load(world[p][2]), p3 = glmm_load(world[p][3]);
      }
      w0 = mul_col(p0, p1, p2, p3, l0);
      w1 = mul_col(p0, p1, p2, p3, l1);
      w2 = mul_col(p0, p1, p2, p3, l2);
      w3 = mul_col(p0, p1, p2, p3, l3);
    }
    if (same_bits(w0, w1, w2, w3, world[j][0]))
      continue;
    if (keep_old && stamp[j] != tick) {
      if (hist) {
        if (reverts)
          scn__tm_note_revert(tm, j);
        hist_put(tm, SCN_HIST_WORLD, &we, &heads[j].world, glmm_load(world[j][0]),
                 glmm_load(world[j][1]), glmm_load(world[j][2]), glmm_load(world[j][3]));
      } else {
        first_change(tm, j);
      }
    }
    glmm_store(world[j][0], w0), glmm_store(world[j][1], w1);
    glmm_store(world[j][2], w2), glmm_store(world[j][3], w3);
    stamp[j] = tick;
    changed++;
  }
  if (hist) { /* commits the records */
    tm->hist->ring[SCN_HIST_WORLD].end = we.seq;
    tm->hist->ring[SCN_HIST_LOCAL].end = le.seq;
  }
  tm->stats.recomputed += end - begin;
  tm->stats.changed += changed;
}
#endif

static void propagate_span(scn__tm *tm, uint32_t begin, uint32_t end) {
#ifdef SCN_RANGE_SSE
  if (tm->hist)
    span_sse(tm, begin, end, true);
  else
    span_sse(tm, begin, end, false);
#else
  mat4 *restrict world = tm->world;
  const mat4 *restrict local = tm->local;
  const uint32_t *restrict parent = tm->parent;
  uint32_t *restrict stamp = tm->changed;
  const uint32_t tick = scn__tm_stamp(tm);
  /* keeping old values (reverts, history) costs nothing per matrix when neither is on */
  const bool keep_old = scn__tm_logs_reverts(tm) || tm->hist;
  uint64_t changed = 0;
  for (uint32_t j = begin; j < end; j++) {
    if (tm->hist && tm->dirty[j]) /* its local matrix may have changed: see scn__hist_local */
      scn__hist_local(tm, j);
    mat4 w;
    if (parent[j] == SCN_NIL)
      glm_mat4_copy((vec4 *)local[j], w);
    else
      glm_mat4_mul(world[parent[j]], (vec4 *)local[j], w);
    if (memcmp(w, world[j], sizeof w) != 0) {
      if (keep_old && stamp[j] != tick)
        first_change(tm, j);
      glm_mat4_copy(w, world[j]);
      stamp[j] = tick;
      changed++;
    }
  }
  tm->stats.recomputed += end - begin;
  tm->stats.changed += changed;
#endif
}

/* The subtree when the arrays are not in depth-first order: follow the links instead. */
static void propagate_walk(scn__tm *tm, uint32_t root) {
  uint64_t count = 0, changed = 0;
  for (uint32_t i = root; i != SCN_NIL; i = scn__tm_next_preorder(tm, i, root)) {
    changed += recompute(tm, i, tm->parent[i]);
    count++;
  }
  tm->stats.recomputed += count;
  tm->stats.changed += changed;
}

/* Relayout pays for itself once enough structure changed since the last one. */
static bool relayout_due(const scn__tm *tm) {
  if (tm->sorted)
    return false;
  return tm->unsorted_changes >= 64 + tm->n / 16;
}

static void propagate_dirty(scn__tm *tm);

void scn__tm_flush(scn__tm *tm) {
  if (relayout_due(tm))
    scn__tm_relayout(tm);
  propagate_dirty(tm);
}

/* Sorts instance indices below n ascending: LSD radix on 11-bit digits, so a flush of many
 * dirty roots costs a few linear passes instead of a comparison sort. */
static bool sort_indices(uint32_t *a, size_t k, uint32_t n, scn__vec *scratch) {
  bool in_order = true;
  for (size_t x = 1; x < k && in_order; x++)
    in_order = a[x - 1] <= a[x];
  if (in_order)
    return true;
  if (scn__vec_reserve(scratch, sizeof(uint32_t), k) != SCN_OK)
    return false;
  /* Short lists take narrower digits: clearing and summing the counts is then the cost. */
  const unsigned bits = k < 4096 ? 8 : 11;
  const uint32_t mask = (1u << bits) - 1;
  uint32_t *src = a, *dst = scratch->data;
  for (unsigned shift = 0; shift < 32 && (n - 1) >> shift; shift += bits) {
    size_t count[1u << 11];
    memset(count, 0, sizeof *count * (mask + 1));
    for (size_t x = 0; x < k; x++)
      count[(src[x] >> shift) & mask]++;
    size_t sum = 0;
    for (size_t b = 0; b <= mask; b++) {
      size_t c = count[b];
      count[b] = sum;
      sum += c;
    }
    for (size_t x = 0; x < k; x++)
      dst[count[(src[x] >> shift) & mask]++] = src[x];
    uint32_t *t = src;
    src = dst, dst = t;
  }
  if (src != a)
    memcpy(a, src, sizeof *a * k);
  return true;
}

#define HIST_AHEAD 8

/* In depth-first order a subtree is the range [i, i + subtree[i]), so once the dirty nodes
 * are in ascending order one sweep finds the topmost ones (those past the range of the last
 * one taken) and recomputes them in memory order. When many are dirty the flags themselves
 * are scanned; otherwise the list is sorted. */
static bool propagate_sorted(scn__tm *tm, uint32_t *d, size_t k) {
  /* Subtrees that lie back to back (every root of a forest moved, say) run as one span. */
  uint32_t begin = 0, end = 0;
  if (k >= tm->n / 32) {
    for (uint32_t i = 0; i < tm->n;) {
      if (!tm->dirty[i]) {
        i++;
        continue;
      }
      if (i != end) {
        propagate_span(tm, begin, end);
        begin = i;
      }
      end = i += tm->subtree[i];
    }
  } else {
    if (!sort_indices(d, k, tm->n, &tm->scratch))
      return false;
    for (size_t x = 0; x < k; x++) {
      /* the lines the history reads for the subtrees a few ahead, while these are done */
      if (tm->hist && x + HIST_AHEAD < k) {
        uint32_t a = d[x + HIST_AHEAD];
        __builtin_prefetch(&tm->hist->heads[a], 1);
        __builtin_prefetch(tm->hist->shadow[a], 1);
        __builtin_prefetch(&tm->changed[a]);
      }
      if (d[x] < end)
        continue;
      if (d[x] != end) {
        propagate_span(tm, begin, end);
        begin = d[x];
      }
      end = d[x] + tm->subtree[d[x]];
    }
  }
  propagate_span(tm, begin, end);
  return true;
}

/* Without the order, the topmost dirty nodes are those with no dirty ancestor: moved to the
 * front while every dirty flag is still set; the rest are recomputed with them. */
static void propagate_linked(scn__tm *tm, uint32_t *d, size_t k) {
  size_t tops = 0;
  for (size_t x = 0; x < k; x++)
    if (!has_dirty_ancestor(tm, d[x])) {
      uint32_t t = d[tops];
      d[tops++] = d[x];
      d[x] = t;
    }
  for (size_t x = 0; x < tops; x++) {
    if (tm->sorted)
      propagate_span(tm, d[x], d[x] + tm->subtree[d[x]]);
    else
      propagate_walk(tm, d[x]);
  }
}

/* Recomputes what is dirty without re-sorting the arrays, so instance indices held by the
 * caller stay valid. Every dirty instance lies in a subtree recomputed here, so the loops see
 * the dirty flags of all of them (the history's local records). */
static void propagate_dirty(scn__tm *tm) {
  size_t k = tm->dirty_list.len;
  if (k == 0)
    return;
  uint32_t *d = tm->dirty_list.data;
  if (!tm->sorted || !propagate_sorted(tm, d, k))
    propagate_linked(tm, d, k);
  for (size_t x = 0; x < k; x++)
    tm->dirty[d[x]] = 0;
  tm->dirty_list.len = 0;
  tm->stats.flushes++;
}

void scn__tm_world_of(scn__tm *tm, uint32_t i, mat4 out) {
  /* Find the topmost dirty node on the path from i to its root. */
  uint32_t top = SCN_NIL;
  for (uint32_t a = i; a != SCN_NIL; a = tm->parent[a])
    if (tm->dirty[a])
      top = a;
  if (top == SCN_NIL) {
    glm_mat4_copy(tm->world[i], out);
    return;
  }
  /* Collect the path top..i, then multiply down it. */
  size_t depth = 0;
  for (uint32_t a = i; a != top; a = tm->parent[a])
    depth++;
  if (scn__vec_reserve(&tm->scratch, sizeof(uint32_t), depth + 1) != SCN_OK) {
    propagate_dirty(tm); /* no room for the path: a full pass gives the same answer */
    glm_mat4_copy(tm->world[i], out);
    return;
  }
  uint32_t *path = tm->scratch.data;
  size_t n = 0;
  for (uint32_t a = i; a != top; a = tm->parent[a])
    path[n++] = a;
  path[n++] = top;
  mat4 m;
  uint32_t p = tm->parent[top];
  if (p == SCN_NIL)
    glm_mat4_copy(tm->local[top], m);
  else
    glm_mat4_mul(tm->world[p], tm->local[top], m);
  for (size_t x = n - 1; x-- > 0;)
    glm_mat4_mul(m, tm->local[path[x]], m);
  glm_mat4_copy(m, out);
}

void scn_world_flush(scn_world *w) { scn__tm_flush(&w->tm); }

uint64_t scn_world_tick(const scn_world *w) { return w->tm.tick; }

/* Reverts are kept for at most this many matrices a tick: a read in the middle of a tick
 * that moves more (a whole big world) costs no more than that, at worst a resend. */
#define REVERTS_MAX 4096

void scn__tm_note_revert(scn__tm *tm, uint32_t i) {
  if (tm->reverts_full)
    return;
  if (tm->reverts.len == REVERTS_MAX ||
      scn__vec_reserve(&tm->reverts, sizeof(scn__revert), tm->reverts.len + 1) != SCN_OK) {
    tm->reverts_full = true;
    return;
  }
  scn__revert *r = &SCN_VEC_AT(tm->reverts, scn__revert, tm->reverts.len++);
  r->entity = tm->entity[i];
  r->instance = i;
  r->stamp = tm->changed[i];
  memcpy(r->world, tm->world[i], sizeof r->world);
}

/* Matrices a read recomputed inside the tick and that ended it where they began did not
 * change: their old stamps come back. Not when a transform was removed in the tick, since an
 * entity's transform may then be a new one (conservative: at worst a resend). */
static void settle_reverts(scn__tm *tm) {
  const uint32_t now = scn__tm_stamp(tm);
  for (size_t k = 0; k < tm->reverts.len && !tm->removed_in_tick && !tm->reverts_full; k++) {
    const scn__revert *r = &SCN_VEC_AT(tm->reverts, scn__revert, k);
    uint32_t i = r->instance;
    if (i >= tm->n || tm->entity[i] != r->entity)
      i = scn__tm_lookup(tm, r->entity); /* the arrays were re-sorted meanwhile */
    if (i != SCN_NIL && tm->changed[i] == now &&
        memcmp(tm->world[i], r->world, sizeof r->world) == 0)
      tm->changed[i] = r->stamp;
  }
  tm->reverts.len = 0;
  tm->removed_in_tick = tm->reverts_full = false;
}

void scn_world_track_reverts(scn_world *w, bool on) {
  w->tm.track_reverts = on;
  if (!on) {
    scn__vec_free(&w->tm.reverts);
    w->tm.reverts_full = false;
  }
}

uint64_t scn_world_close_tick(scn_world *w) {
  scn__tm *tm = &w->tm;
  if (tm->hold_ticks)
    return tm->tick - 1;
  tm->closing = true;
  scn__tm_flush(tm);
  tm->closing = false;
  settle_reverts(tm);
  uint64_t closed = tm->tick++;
  if (tm->hist)
    scn__hist_closed(tm, closed);
  if (tm->tick - tm->stamp_base >= UINT32_MAX) {
    /* Stamps would wrap: fold every one into the tick just closed, which can only make an
     * old subscriber see more than changed, never less. */
    tm->stamp_base = tm->tick - 2;
    for (uint32_t i = 0; i < tm->n; i++)
      tm->changed[i] = 1;
  }
  return closed;
}

void scn_world_hold_ticks(scn_world *w, bool on) { w->tm.hold_ticks = on; }

int scn_world_continue_ticks(scn_world *w, uint64_t now) {
  scn__tm *tm = &w->tm;
  if (w->scene->in_batch || tm->tick != 1)
    return SCN_STATE;
  if (now > (UINT64_C(1) << 62))
    return SCN_INVALID;
  if (now == 0)
    return SCN_OK;
  scn__tm_flush(tm); /* the world matrices of what the world holds, stamped in tick 1 */
  uint64_t shift = now;
  tm->tick = now + 1;
  /* Stamp 1 is tick now, 2 the open tick: everything changed in tick now, so the first change
   * of a world matrix in the open tick is a change (and a history record) again. */
  tm->stamp_base = now - 1;
  for (uint32_t i = 0; i < tm->n; i++)
    tm->changed[i] = 1;
  scn__event *ev = tm->events.data;
  for (size_t x = tm->events_head; x < tm->events.len; x++)
    ev[x].tick += shift;
  tm->events_since += shift;
  tm->reverts.len = 0;
  tm->removed_in_tick = tm->reverts_full = false;
  if (tm->hist)
    scn__hist_reset(tm);
  return SCN_OK;
}

void scn_world_get_stats(const scn_world *w, scn_world_stats *out) {
  *out = w->tm.stats;
  scn__hist_stats(&w->tm, out);
}

/* ---- relayout ----------------------------------------------------------------------------- */

#define PERMUTE(tm, order, field, tmp)                                                             \
  do {                                                                                             \
    for (uint32_t k_ = 0; k_ < (tm)->n; k_++)                                                      \
      memcpy(&(tmp)[k_], &(tm)->field[(order)[k_]], sizeof((tm)->field[0]));                       \
    memcpy((tm)->field, (tmp), sizeof((tm)->field[0]) * (tm)->n);                                  \
  } while (0)

static uint32_t remap(const uint32_t *new_index, uint32_t i) {
  return i == SCN_NIL ? SCN_NIL : new_index[i];
}

void scn_world_relayout(scn_world *w) { scn__tm_relayout(&w->tm); }

void scn__tm_relayout(scn__tm *tm) {
  uint32_t n = tm->n;
  if (tm->sorted)
    return;
  size_t index_bytes = sizeof(uint32_t) * (n ? n : 1), tmp_bytes = sizeof(mat4) * (n ? n : 1);
  uint32_t *order = scn__array_alloc(index_bytes);
  uint32_t *new_index = scn__array_alloc(index_bytes);
  void *tmp = scn__array_alloc(tmp_bytes);
  if (!order || !new_index || !tmp) {
    scn__array_free(order, index_bytes), scn__array_free(new_index, index_bytes);
    scn__array_free(tmp, tmp_bytes);
    return; /* stays unsorted: propagation walks the links instead */
  }
  /* Depth-first pre-order over the roots in list order. */
  uint32_t k = 0;
  for (uint32_t r = tm->first_root; r != SCN_NIL; r = tm->next[r]) {
    for (uint32_t i = r; i != SCN_NIL; i = scn__tm_next_preorder(tm, i, r))
      order[k++] = i;
  }
  for (uint32_t x = 0; x < n; x++)
    new_index[order[x]] = x;

  PERMUTE(tm, order, entity, (scn_entity *)tmp);
  PERMUTE(tm, order, local, (mat4 *)tmp);
  PERMUTE(tm, order, world, (mat4 *)tmp);
  PERMUTE(tm, order, changed, (uint32_t *)tmp);
  PERMUTE(tm, order, name, (uint32_t *)tmp);
  PERMUTE(tm, order, dirty, (uint8_t *)tmp);
  if (tm->hist) { /* the chain heads and shadows travel with their instances */
    PERMUTE(tm, order, hist->heads, (scn__heads *)tmp);
    PERMUTE(tm, order, hist->shadow, (mat4 *)tmp);
  }
  uint32_t **links[] = {&tm->parent, &tm->first_child, &tm->last_child, &tm->next, &tm->prev};
  for (size_t l = 0; l < sizeof links / sizeof links[0]; l++) {
    uint32_t *a = *links[l], *t = tmp;
    for (uint32_t x = 0; x < n; x++)
      t[x] = remap(new_index, a[order[x]]);
    memcpy(a, t, sizeof *a * n);
  }
  tm->first_root = remap(new_index, tm->first_root);
  tm->last_root = remap(new_index, tm->last_root);
  uint32_t *d = tm->dirty_list.data;
  for (size_t x = 0; x < tm->dirty_list.len; x++)
    d[x] = new_index[d[x]];
  /* Children follow their parent in pre-order, so sizes accumulate back to front. */
  for (uint32_t x = 0; x < n; x++)
    tm->subtree[x] = 1;
  for (uint32_t x = n; x-- > 0;)
    if (tm->parent[x] != SCN_NIL)
      tm->subtree[tm->parent[x]] += tm->subtree[x];
  scn__tm_rebuild_maps(tm);
  tm->sorted = true;
  tm->unsorted_changes = 0;
  tm->stats.relayouts++;
  scn__array_free(order, index_bytes), scn__array_free(new_index, index_bytes);
  scn__array_free(tmp, tmp_bytes);
}

/* ---- change listing ----------------------------------------------------------------------- */

/* One walk for both visitors: every transform in scope, parents before children, each with
 * whether its world matrix changed after since. */
typedef struct scope_walk {
  scn_visit_fn changed_fn; /* called for changed ones only, or */
  scn_scope_fn scope_fn;   /* called for every one */
  void *ud;
} scope_walk;

static inline void visit_one(const scope_walk *v, const scn__tm *tm, uint32_t i, uint32_t th) {
  bool changed = tm->changed[i] > th;
  if (v->scope_fn)
    v->scope_fn(v->ud, tm->entity[i], tm->world[i][0], changed);
  else if (changed)
    v->changed_fn(v->ud, tm->entity[i], tm->world[i][0]);
}

static int walk_scope(scn_world *w, scn_entity root, uint64_t since, const scope_walk *v) {
  scn__tm *tm = &w->tm;
  if (root != SCN_ENTITY_NONE && scn__tm_lookup(tm, root) == SCN_NIL)
    return SCN_NOT_FOUND;
  scn__tm_flush(tm); /* may re-sort: look the root up after it */
  uint32_t r = root == SCN_ENTITY_NONE ? SCN_NIL : scn__tm_lookup(tm, root);
  /* Stamps are at least 1, so a since at or before the base counts everything as changed. */
  uint32_t th = since <= tm->stamp_base ? 0
                : since >= tm->tick     ? UINT32_MAX
                                        : (uint32_t)(since - tm->stamp_base);
  if (tm->sorted) {
    uint32_t begin = r == SCN_NIL ? 0 : r, end = r == SCN_NIL ? tm->n : r + tm->subtree[r];
    for (uint32_t i = begin; i < end; i++)
      visit_one(v, tm, i, th);
    return SCN_OK;
  }
  uint32_t first = r == SCN_NIL ? tm->first_root : r;
  for (uint32_t top = first; top != SCN_NIL; top = r == SCN_NIL ? tm->next[top] : SCN_NIL) {
    for (uint32_t i = top; i != SCN_NIL; i = scn__tm_next_preorder(tm, i, top))
      visit_one(v, tm, i, th);
  }
  return SCN_OK;
}

int scn_world_visit_changed(scn_world *w, scn_entity root, uint64_t since, scn_visit_fn fn,
                            void *ud) {
  scope_walk v = {fn, NULL, ud};
  return walk_scope(w, root, since, &v);
}

int scn_world_visit_scope(scn_world *w, scn_entity root, uint64_t since, scn_scope_fn fn,
                          void *ud) {
  scope_walk v = {NULL, fn, ud};
  return walk_scope(w, root, since, &v);
}

void scn_world_visit_transforms(scn_world *w, scn_transform_fn fn, void *ud) {
  scn__tm *tm = &w->tm;
  for (uint32_t top = tm->first_root; top != SCN_NIL; top = tm->next[top]) {
    for (uint32_t i = top; i != SCN_NIL; i = scn__tm_next_preorder(tm, i, top)) {
      uint32_t p = tm->parent[i];
      fn(ud, tm->entity[i], p == SCN_NIL ? SCN_ENTITY_NONE : tm->entity[p], scn__tm_name(tm, i),
         tm->local[i][0]);
    }
  }
}

bool scn_transform_in_subtree(scn_world *w, scn_entity e, scn_entity root) {
  const scn__tm *tm = &w->tm;
  uint32_t i = scn__tm_lookup(tm, e), r = scn__tm_lookup(tm, root);
  if (i == SCN_NIL || r == SCN_NIL)
    return false;
  for (uint32_t a = i; a != SCN_NIL; a = tm->parent[a])
    if (a == r)
      return true;
  return false;
}

void scn_world_visit_events(const scn_world *w, uint64_t since, scn_event_fn fn, void *ud) {
  const scn__tm *tm = &w->tm;
  const scn__event *ev = tm->events.data;
  /* Events are logged in tick order: the first one after since is found by bisection, so a
   * subscription that asks for the last tick's events does not walk a log kept for another. */
  size_t lo = tm->events_head, hi = tm->events.len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ev[mid].tick > since)
      hi = mid;
    else
      lo = mid + 1;
  }
  for (size_t x = lo; x < tm->events.len; x++)
    fn(ud, ev[x].entity, (scn_event_kind)ev[x].kind);
}

void scn_world_trim_events(scn_world *w, uint64_t upto) {
  scn__tm *tm = &w->tm;
  scn__event *ev = tm->events.data;
  while (tm->events_head < tm->events.len && ev[tm->events_head].tick <= upto)
    tm->events_head++;
  if (upto > tm->events_since)
    tm->events_since = upto;
  /* Compact once the dead prefix dominates, so the log stays proportional to live events. */
  if (tm->events_head > 1024 && tm->events_head * 2 > tm->events.len) {
    memmove(ev, ev + tm->events_head, sizeof *ev * (tm->events.len - tm->events_head));
    tm->events.len -= tm->events_head;
    tm->events_head = 0;
  }
}

uint64_t scn_world_events_since(const scn_world *w) { return w->tm.events_since; }

void scn_world_keep_events(scn_world *w, bool on) {
  scn__tm *tm = &w->tm;
  if (on == tm->keep_events)
    return;
  tm->keep_events = on;
  tm->events.len = tm->events_head = 0;
  /* From now on every event is logged in the open tick: complete after the last closed one.
   * Off, the log vouches for nothing before the open tick. */
  tm->events_since = on ? tm->tick - 1 : tm->tick;
}

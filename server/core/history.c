/* History of a world: for each tick of the window, undo records of what changed in it.
 *
 * A record made while tick t is open holds a value as tick t-1 closed it: the first time in a
 * tick that a world matrix, a local matrix or the structure (existence, parent, name) of an
 * instance changes, its old value goes to the end of a ring and becomes the head of that
 * entity's chain of that kind. Reading tick T then takes, in each chain, the oldest record made
 * after T; with none, the value has not changed since T and the live arrays hold it (for a local
 * matrix, its shadow: the value as the last flush left it). So a read costs the records of one
 * entity made after T, a tick costs what changed in it, and the oldest records fall off the
 * front of the rings as ticks close.
 *
 * World records are made and linked by the propagation loop itself, in the order of the
 * instances; local records by the flush, from the shadows of the dirty instances whose local
 * matrix differs, so that a setter writes nothing for history. The heads and shadows live beside
 * the instances (moved with them by swap-erase and relayout) and, once a transform is destroyed,
 * the heads in a small map by entity until its last record leaves the window. */
#include "core_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MCHUNK (1u << SCN_HIST_MSHIFT)
#define SCHUNK (1u << SCN_HIST_SSHIFT)
#define ACHUNK (1u << SCN_HIST_ASHIFT)
#define DEAD_MIN 16

/* ---- rings ------------------------------------------------------------------------------- */

static uint64_t chunk_first(const scn__ring *r) { return r->front >> r->shift; }

/* One past the last chunk holding a record (or the one the end points into). */
static uint64_t chunk_limit(const scn__ring *r) {
  return (r->end + ((uint64_t)1 << r->shift) - 1) >> r->shift;
}

static int ring_init(scn__ring *r, uint32_t shift, size_t chunk_bytes) {
  memset(r, 0, sizeof *r);
  r->shift = shift;
  r->chunk_bytes = chunk_bytes;
  /* Records start at chunk 1, so that sequence number 0 is never a record. */
  r->front = r->end = (uint64_t)1 << shift;
  r->mask = 15;
  r->table = calloc(r->mask + 1, sizeof *r->table);
  return r->table ? SCN_OK : SCN_NOMEM;
}

static void ring_free(scn__ring *r) {
  if (r->table)
    for (uint64_t k = chunk_first(r); k < chunk_limit(r); k++)
      free(r->table[k & r->mask]);
  for (uint32_t k = 0; k < r->nspare; k++)
    free(r->spare[k]);
  free(r->table);
  free(r->spare);
  memset(r, 0, sizeof *r);
}

static inline void *ring_chunk(const scn__ring *r, uint64_t s) {
  return r->table[(s >> r->shift) & r->mask];
}

/* Makes room for the record at end: a chunk when end starts one (a spare one if any). */
static bool ring_room(scn__ring *r) {
  if (r->end & (((uint64_t)1 << r->shift) - 1))
    return true;
  uint64_t first = chunk_first(r), k = r->end >> r->shift;
  if (k - first + 1 > (uint64_t)r->mask + 1) {
    uint64_t cap = (uint64_t)r->mask + 1;
    while (cap < k - first + 1)
      cap *= 2;
    if (cap > UINT32_MAX)
      return false;
    void **table = calloc(cap, sizeof *table);
    if (!table)
      return false;
    for (uint64_t c = first; c < k; c++)
      table[c & (cap - 1)] = r->table[c & r->mask];
    free(r->table);
    r->table = table;
    r->mask = (uint32_t)(cap - 1);
  }
  void *chunk = r->nspare ? r->spare[--r->nspare] : aligned_alloc(64, r->chunk_bytes);
  if (!chunk)
    return false;
  r->table[k & r->mask] = chunk;
  return true;
}

/* Drops the records before front; their chunks go to the spares (a few), or back. */
static void ring_drop(scn__ring *r, uint64_t front) {
  uint64_t from = chunk_first(r), to = front >> r->shift;
  uint64_t keep = 8 + (chunk_limit(r) - from) / 8;
  for (uint64_t k = from; k < to; k++) {
    void *chunk = r->table[k & r->mask];
    r->table[k & r->mask] = NULL;
    if (r->nspare < keep && r->nspare == r->spare_cap) {
      uint32_t cap = r->spare_cap ? r->spare_cap * 2 : 16;
      void **spare = realloc(r->spare, sizeof *spare * cap);
      if (spare) {
        r->spare = spare;
        r->spare_cap = cap;
      }
    }
    if (r->nspare < keep && r->nspare < r->spare_cap)
      r->spare[r->nspare++] = chunk;
    else
      free(chunk);
  }
  r->front = front;
}

static size_t ring_bytes(const scn__ring *r) {
  return (size_t)(chunk_limit(r) - chunk_first(r) + r->nspare) * r->chunk_bytes +
         sizeof(void *) * ((size_t)r->mask + 1 + r->spare_cap);
}

static inline scn__hist_mchunk *mchunk(const scn__ring *r, uint64_t s) { return ring_chunk(r, s); }

static inline scn__hist_srec *srec(const scn__hist *h, uint64_t s) {
  return &((scn__hist_srec *)ring_chunk(&h->ring[SCN_HIST_STRUCT], s))[s & (SCHUNK - 1)];
}

static inline scn__hist_row *aside_at(const scn__ring *r, uint64_t x) {
  return &((scn__hist_row *)ring_chunk(r, x))[x & (ACHUNK - 1)];
}

uint32_t scn__hist_too_far(scn__hist *h) {
  h->broken = true;
  return 0;
}

/* The link from record s back to prev, the chain's head so far (none when already dropped). */
static uint32_t link_back(scn__hist *h, const scn__ring *r, uint64_t prev, uint64_t s) {
  if (prev < r->front)
    return 0;
  if (s - prev > SCN_HIST_LINK_MAX) /* more records in the window than a link spans */
    return scn__hist_too_far(h);
  return (uint32_t)(s - prev);
}

/* ---- matrix records ------------------------------------------------------------------------ */

uint32_t scn__hist_aside(scn__hist *h, int which, uint64_t seq, const float row[4]) {
  scn__ring *r = &h->aside[which];
  if (h->broken || !ring_room(r)) {
    h->broken = true;
    return 0;
  }
  scn__hist_row *a = aside_at(r, r->end);
  a->seq = seq;
  memcpy(a->row, row, sizeof a->row);
  r->end++;
  return SCN_HIST_ASIDE;
}

/* The last row kept aside for record seq: the rows lie in the order of their records. */
static void aside_row(const scn__hist *h, int which, uint64_t seq, float row[4]) {
  const scn__ring *r = &h->aside[which];
  uint64_t lo = r->front, hi = r->end;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (aside_at(r, mid)->seq < seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  memcpy(row, aside_at(r, lo)->row, sizeof(float) * 4);
}

/* After the matrix ring which dropped its records before its front. */
static void aside_drop(scn__hist *h, int which) {
  scn__ring *r = &h->aside[which];
  uint64_t front = r->front, keep = h->ring[which].front;
  while (front < r->end && aside_at(r, front)->seq < keep)
    front++;
  ring_drop(r, front);
}

/* Writes the first three rows of m (column-major) to rows and returns the link's flag:
 * SCN_HIST_ASIDE when the last row is not 0 0 0 1 bit for bit (row3 then holds it). */
static uint32_t put_rows(float *rows, const float *m, float row3[4]) {
  uint32_t bits[4];
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 4; c++)
      rows[r * 4 + c] = m[c * 4 + r];
  for (int c = 0; c < 4; c++)
    row3[c] = m[c * 4 + 3];
  memcpy(bits, row3, sizeof bits);
  return (bits[0] | bits[1] | bits[2]) || bits[3] != 0x3f800000u ? SCN_HIST_ASIDE : 0;
}

static inline uint32_t mlink(const scn__ring *r, uint64_t s) {
  return mchunk(r, s)->link[s & (MCHUNK - 1)];
}

/* The matrix of record s of ring which. */
static void record_matrix(const scn__hist *h, int which, uint64_t s, float out[16]) {
  const scn__hist_mchunk *c = mchunk(&h->ring[which], s);
  uint32_t k = (uint32_t)(s & (MCHUNK - 1));
  for (int r = 0; r < 3; r++)
    for (int col = 0; col < 4; col++)
      out[col * 4 + r] = c->rows[k][r * 4 + col];
  float row[4] = {0, 0, 0, 1};
  if (c->link[k] & SCN_HIST_ASIDE)
    aside_row(h, which, s, row);
  for (int col = 0; col < 4; col++)
    out[col * 4 + 3] = row[col];
}

/* Appends m to the matrix chain in ring which whose head is *head. */
static void push_matrix(scn__hist *h, int which, uint64_t *head, const float *m) {
  scn__ring *r = &h->ring[which];
  if (h->broken || !ring_room(r)) {
    h->broken = true;
    return;
  }
  uint64_t s = r->end;
  scn__hist_mchunk *c = mchunk(r, s);
  uint32_t k = (uint32_t)(s & (MCHUNK - 1));
  float row3[4];
  uint32_t aside = put_rows(c->rows[k], m, row3);
  if (aside)
    aside = scn__hist_aside(h, which, s, row3);
  c->link[k] = aside | link_back(h, r, *head, s);
  *head = s;
  r->end = s + 1;
}

/* Appends a structure record (existence, parent, name) to the chain whose head is *head. */
static void push_struct_rec(scn__hist *h, uint64_t *head, scn_entity e, bool exists,
                            scn_entity parent, const char *name) {
  scn__ring *r = &h->ring[SCN_HIST_STRUCT];
  if (h->broken || !ring_room(r)) {
    h->broken = true;
    return;
  }
  uint64_t s = r->end;
  scn__hist_srec *rec = srec(h, s);
  rec->entity = e;
  rec->parent = exists ? parent : SCN_ENTITY_NONE;
  rec->back = link_back(h, r, *head, s);
  rec->exists = exists;
  if (exists && name)
    memcpy(rec->name, name, strlen(name) + 1);
  else
    rec->name[0] = '\0';
  *head = s;
  r->end = s + 1;
}

/* Appends the structure of instance i (or its absence) to its chain. */
static void push_struct(scn__tm *tm, uint32_t i, bool exists) {
  uint32_t p = tm->parent[i];
  push_struct_rec(tm->hist, &tm->hist->heads[i].meta, tm->entity[i], exists,
                  p != SCN_NIL ? tm->entity[p] : SCN_ENTITY_NONE, scn__tm_name(tm, i));
}

/* ---- destroyed transforms: entity -> chain heads ------------------------------------------ */

static uint32_t dead_slot(const scn__hist *h, scn_entity e) {
  uint32_t x = (uint32_t)scn__hash64(e) & h->dead_mask;
  while (h->dead[x].entity != SCN_ENTITY_NONE && h->dead[x].entity != e)
    x = (x + 1) & h->dead_mask;
  return x;
}

static const scn__dead *dead_find(const scn__hist *h, scn_entity e) {
  if (!h->dead)
    return NULL;
  const scn__dead *d = &h->dead[dead_slot(h, e)];
  return d->entity == e ? d : NULL;
}

static bool dead_grow(scn__hist *h) {
  if (h->dead && (uint64_t)(h->ndead + 1) * 4 <= (uint64_t)(h->dead_mask + 1) * 3)
    return true;
  uint32_t cap = h->dead ? (h->dead_mask + 1) * 2 : DEAD_MIN;
  scn__dead *old = h->dead, *d = calloc(cap, sizeof *d);
  if (!d)
    return false;
  uint32_t old_cap = old ? h->dead_mask + 1 : 0;
  h->dead = d;
  h->dead_mask = cap - 1;
  for (uint32_t x = 0; x < old_cap; x++)
    if (old[x].entity != SCN_ENTITY_NONE)
      h->dead[dead_slot(h, old[x].entity)] = old[x];
  free(old);
  return true;
}

static void dead_put(scn__hist *h, scn_entity e, const scn__heads *heads) {
  if (!dead_grow(h)) {
    h->broken = true;
    return;
  }
  scn__dead *d = &h->dead[dead_slot(h, e)];
  if (d->entity == SCN_ENTITY_NONE)
    h->ndead++;
  d->entity = e;
  d->heads = *heads;
}

/* Deletion shifts later entries of the run back, so no tombstones accumulate. */
static void dead_delete(scn__hist *h, uint32_t slot) {
  uint32_t i = slot, j = slot, mask = h->dead_mask;
  for (;;) {
    j = (j + 1) & mask;
    if (h->dead[j].entity == SCN_ENTITY_NONE)
      break;
    uint32_t home = (uint32_t)scn__hash64(h->dead[j].entity) & mask;
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays)
      continue;
    h->dead[i] = h->dead[j];
    i = j;
  }
  h->dead[i].entity = SCN_ENTITY_NONE;
  h->ndead--;
}

/* ---- hooks from the manager --------------------------------------------------------------- */

void scn__hist_world(scn__tm *tm, uint32_t i) {
  scn__hist *h = tm->hist;
  push_matrix(h, SCN_HIST_WORLD, &h->heads[i].world, tm->world[i][0]);
}

scn__hist_mchunk *scn__hist_chunk(scn__tm *tm, int which, uint64_t s) {
  scn__hist *h = tm->hist;
  scn__ring *r = &h->ring[which];
  r->end = s;
  if (h->broken || !ring_room(r)) {
    h->broken = true;
    return NULL;
  }
  return mchunk(r, s);
}

/* The first time in the open tick that local[i] differs from its shadow, the shadow (the value
 * the last tick closed with) becomes the head of the local chain; the shadow follows. */
static void sync_local(scn__tm *tm, scn__hist *h, uint32_t i) {
  if (memcmp(tm->local[i], h->shadow[i], sizeof(mat4)) == 0)
    return;
  if (h->heads[i].local < h->begin[SCN_HIST_LOCAL])
    push_matrix(h, SCN_HIST_LOCAL, &h->heads[i].local, h->shadow[i][0]);
  glm_mat4_copy(tm->local[i], h->shadow[i]);
}

void scn__hist_local(scn__tm *tm, uint32_t i) { sync_local(tm, tm->hist, i); }

void scn__hist_struct(scn__tm *tm, uint32_t i) {
  if (tm->hist->heads[i].meta < tm->hist->begin[SCN_HIST_STRUCT])
    push_struct(tm, i, true);
}

void scn__hist_inserted(scn__tm *tm, uint32_t i) {
  scn__hist *h = tm->hist;
  scn__heads *heads = &h->heads[i];
  const scn__dead *d = dead_find(h, tm->entity[i]);
  if (d) { /* the same entity had a transform here before: its chains go on */
    *heads = d->heads;
    dead_delete(h, (uint32_t)(d - h->dead));
  } else {
    memset(heads, 0, sizeof *heads);
  }
  glm_mat4_copy(tm->local[i], h->shadow[i]);
  if (heads->meta < h->begin[SCN_HIST_STRUCT])
    push_struct(tm, i, false);
}

void scn__hist_removing(scn__tm *tm, uint32_t i) {
  scn__hist *h = tm->hist;
  scn__heads *heads = &h->heads[i];
  bool created_in_tick = false;
  if (heads->meta >= h->begin[SCN_HIST_STRUCT])
    created_in_tick = !srec(h, heads->meta)->exists;
  else
    push_struct(tm, i, true);
  /* Its matrices as the tick before closed, unless it did not exist then. The world matrix
   * is current here unless the instance is dirty, and then it has not been recomputed since
   * that close (or it would have a record already); without a record in the open tick, the
   * shadow is the local matrix of that close. */
  if (!created_in_tick) {
    if (heads->world < h->begin[SCN_HIST_WORLD])
      push_matrix(h, SCN_HIST_WORLD, &heads->world, tm->world[i][0]);
    if (heads->local < h->begin[SCN_HIST_LOCAL])
      push_matrix(h, SCN_HIST_LOCAL, &heads->local, h->shadow[i][0]);
  }
  dead_put(h, tm->entity[i], heads);
}

/* Big arrays ask for huge pages, as the instance arrays do (only their whole 2 MiB pages;
 * advice only): the heads are read at random by the flush. */
static void *hist_array(size_t bytes) {
  void *p = scn__array_alloc(bytes);
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = (uintptr_t)2 << 20;
  uintptr_t begin = ((uintptr_t)p + huge - 1) & ~(huge - 1);
  uintptr_t end = ((uintptr_t)p + bytes) & ~(huge - 1);
  if (p && end > begin)
    (void)madvise((void *)begin, end - begin, MADV_HUGEPAGE);
#endif
  return p;
}

int scn__hist_reserve(scn__tm *tm, uint32_t cap) {
  scn__hist *h = tm->hist;
  if (!h || cap <= h->cap)
    return SCN_OK;
  size_t heads_bytes = sizeof(scn__heads) * cap, shadow_bytes = sizeof(mat4) * cap;
  scn__heads *heads = hist_array(heads_bytes);
  mat4 *shadow = hist_array(shadow_bytes);
  if (!heads || !shadow) {
    scn__array_free(heads, heads_bytes);
    scn__array_free(shadow, shadow_bytes);
    return SCN_NOMEM;
  }
  if (h->heads) {
    memcpy(heads, h->heads, sizeof *heads * h->cap);
    memcpy(shadow, h->shadow, sizeof *shadow * h->cap);
  }
  memset(heads + h->cap, 0, sizeof *heads * (cap - h->cap));
  scn__array_free(h->heads, h->heads_bytes);
  scn__array_free(h->shadow, h->shadow_bytes);
  h->heads = heads;
  h->shadow = shadow;
  h->cap = cap;
  h->heads_bytes = heads_bytes;
  h->shadow_bytes = shadow_bytes;
  return SCN_OK;
}

/* ---- ticks -------------------------------------------------------------------------------- */

static uint64_t *bound_of(const scn__hist *h, uint64_t tick) {
  return h->bound[tick & h->bound_mask];
}

/* The oldest tick a query may name once tick now has closed (above now: none). */
static uint64_t oldest_tick(const scn__hist *h, uint64_t now) {
  uint64_t oldest = now + 1 > h->window ? now + 1 - h->window : 0;
  return oldest > h->start ? oldest : h->start;
}

/* Drops every record made before the tick whose records begin at b. */
static void drop_before(scn__hist *h, const uint64_t *b) {
  for (uint64_t s = h->ring[SCN_HIST_STRUCT].front; s < b[SCN_HIST_STRUCT]; s++) {
    const scn__hist_srec *rec = srec(h, s);
    const scn__dead *d = dead_find(h, rec->entity);
    if (d && d->heads.meta == s) /* a destroyed transform's last record */
      dead_delete(h, (uint32_t)(d - h->dead));
  }
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    ring_drop(&h->ring[k], b[k]);
  aside_drop(h, SCN_HIST_WORLD);
  aside_drop(h, SCN_HIST_LOCAL);
}

/* Forgets everything and starts again from tick from; the shadows take the live values. */
static void restart(scn__tm *tm, uint64_t from) {
  scn__hist *h = tm->hist;
  if (h->dead)
    memset(h->dead, 0, sizeof *h->dead * ((size_t)h->dead_mask + 1));
  h->ndead = 0;
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    ring_drop(&h->ring[k], h->ring[k].end);
  for (int k = 0; k < 2; k++)
    ring_drop(&h->aside[k], h->aside[k].end);
  if (tm->n)
    memcpy(h->shadow, tm->local, sizeof *h->shadow * tm->n);
  h->start = from;
  h->broken = false;
}

static void open_tick(scn__hist *h, uint64_t tick) {
  uint64_t *b = bound_of(h, tick);
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    b[k] = h->begin[k] = h->ring[k].end;
}

void scn__hist_reset(scn__tm *tm) {
  restart(tm, tm->tick); /* the open tick: answerable once it closes */
  open_tick(tm->hist, tm->tick);
}

/* After a record found no memory, everything is forgotten: from tick closed on. */
void scn__hist_closed(scn__tm *tm, uint64_t closed) {
  scn__hist *h = tm->hist;
  if (h->broken)
    restart(tm, closed);
  open_tick(h, closed + 1);
  drop_before(h, bound_of(h, oldest_tick(h, closed) + 1));
}

/* ---- setting the window ------------------------------------------------------------------- */

void scn__hist_free(scn__hist *h) {
  if (!h)
    return;
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    ring_free(&h->ring[k]);
  for (int k = 0; k < 2; k++)
    ring_free(&h->aside[k]);
  free(h->bound);
  scn__array_free(h->heads, h->heads_bytes);
  scn__array_free(h->shadow, h->shadow_bytes);
  free(h->dead);
  free(h);
}

static uint32_t bound_cap(uint32_t window) {
  uint32_t cap = 4;
  while (cap < window + 2)
    cap *= 2;
  return cap;
}

static int hist_new(scn__tm *tm, uint32_t window) {
  scn__hist *h = calloc(1, sizeof *h);
  if (!h)
    return SCN_NOMEM;
  uint32_t cap = bound_cap(window);
  h->bound = calloc(cap, sizeof *h->bound);
  h->bound_mask = cap - 1;
  h->window = window;
  h->start = tm->tick; /* the open tick: answerable once it closes */
  tm->hist = h;
  if (!h->bound ||
      ring_init(&h->ring[SCN_HIST_WORLD], SCN_HIST_MSHIFT, sizeof(scn__hist_mchunk)) != SCN_OK ||
      ring_init(&h->ring[SCN_HIST_LOCAL], SCN_HIST_MSHIFT, sizeof(scn__hist_mchunk)) != SCN_OK ||
      ring_init(&h->ring[SCN_HIST_STRUCT], SCN_HIST_SSHIFT, sizeof(scn__hist_srec) * SCHUNK) !=
          SCN_OK ||
      ring_init(&h->aside[SCN_HIST_WORLD], SCN_HIST_ASHIFT, sizeof(scn__hist_row) * ACHUNK) !=
          SCN_OK ||
      ring_init(&h->aside[SCN_HIST_LOCAL], SCN_HIST_ASHIFT, sizeof(scn__hist_row) * ACHUNK) !=
          SCN_OK ||
      scn__hist_reserve(tm, tm->cap) != SCN_OK) {
    scn__hist_free(h);
    tm->hist = NULL;
    return SCN_NOMEM;
  }
  if (tm->n)
    memcpy(h->shadow, tm->local, sizeof *h->shadow * tm->n);
  open_tick(h, tm->tick);
  return SCN_OK;
}

int scn_world_set_history(scn_world *w, int64_t ticks) {
  scn__tm *tm = &w->tm;
  if (ticks < 0)
    return SCN_INVALID;
  if (ticks > SCN_HISTORY_MAX)
    return SCN_LIMIT;
  uint32_t window = (uint32_t)ticks;
  scn__hist *h = tm->hist;
  if (window == 0) {
    scn__hist_free(h);
    tm->hist = NULL;
    return SCN_OK;
  }
  if (!h)
    return hist_new(tm, window);
  /* What stays answerable stays; a longer window fills from here on. */
  uint64_t now = tm->tick - 1, kept = oldest_tick(h, now);
  uint64_t oldest = now + 1 > window && now + 1 - window > kept ? now + 1 - window : kept;
  uint64_t from = oldest + 1 < now + 1 ? oldest + 1 : now + 1;
  uint32_t cap = bound_cap(window);
  if (cap != h->bound_mask + 1) {
    uint64_t(*bound)[SCN_HIST_RINGS] = calloc(cap, sizeof *bound);
    if (!bound)
      return SCN_NOMEM;
    for (uint64_t t = from; t <= now + 1; t++)
      memcpy(bound[t & (cap - 1)], bound_of(h, t), sizeof *bound);
    free(h->bound);
    h->bound = bound;
    h->bound_mask = cap - 1;
  }
  h->window = window;
  h->start = kept;
  drop_before(h, bound_of(h, from));
  return SCN_OK;
}

uint32_t scn_world_history(const scn_world *w) { return w->tm.hist ? w->tm.hist->window : 0; }

int scn_world_history_window(const scn_world *w, uint64_t *oldest, uint64_t *newest) {
  const scn__hist *h = w->tm.hist;
  /* A record that found no memory leaves the open tick incomplete: nothing answers. */
  if (!h || h->broken)
    return SCN_NOT_FOUND;
  uint64_t now = w->tm.tick - 1, first = oldest_tick(h, now);
  if (first > now)
    return SCN_NOT_FOUND;
  *oldest = first;
  *newest = now;
  return SCN_OK;
}

void scn__hist_stats(const scn__tm *tm, scn_world_stats *out) {
  const scn__hist *h = tm->hist;
  out->history_bytes = out->history_matrices = 0;
  if (!h)
    return;
  out->history_bytes = sizeof *h + sizeof *h->bound * ((size_t)h->bound_mask + 1) + h->heads_bytes +
                       h->shadow_bytes +
                       (h->dead ? sizeof *h->dead * ((size_t)h->dead_mask + 1) : 0);
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    out->history_bytes += ring_bytes(&h->ring[k]);
  for (int k = 0; k < 2; k++)
    out->history_bytes += ring_bytes(&h->aside[k]);
  out->history_matrices = 0;
  for (int k = SCN_HIST_WORLD; k <= SCN_HIST_LOCAL; k++)
    out->history_matrices += h->ring[k].end - h->ring[k].front;
}

/* ---- queries ------------------------------------------------------------------------------ */

/* The oldest record of the matrix chain from s made at or after begin; 0 when none. */
static uint64_t walk_matrix(const scn__ring *r, uint64_t s, uint64_t begin) {
  if (s < begin)
    return 0;
  for (;;) {
    uint32_t d = mlink(r, s) & ~SCN_HIST_ASIDE;
    if (!d || s - d < begin)
      return s;
    s -= d;
  }
}

static const scn__hist_srec *walk_struct(const scn__hist *h, uint64_t s, uint64_t begin) {
  const scn__hist_srec *found = NULL;
  while (s >= begin) {
    found = srec(h, s);
    if (!found->back)
      break;
    s -= found->back;
  }
  return found;
}

/* e's values at tick. */
typedef struct hist_view {
  scn_entity parent;
  const char *name;
  float local[16], world[16];
} hist_view;

/* The matrix of chain head in ring which at the tick whose successor's records begin at b:
 * from its record, else live (NULL: there is none, a destroyed transform). */
static bool matrix_at(const scn__hist *h, int which, uint64_t head, uint64_t b, const float *live,
                      float out[16]) {
  uint64_t s = walk_matrix(&h->ring[which], head, b);
  if (s)
    record_matrix(h, which, s, out);
  else if (live)
    memcpy(out, live, sizeof(float) * 16);
  return s || live;
}

static int view_at(scn_world *w, scn_entity e, uint64_t tick, hist_view *v) {
  scn__tm *tm = &w->tm;
  const scn__hist *h = tm->hist;
  uint64_t oldest, newest;
  if (scn_world_history_window(w, &oldest, &newest) != SCN_OK || tick < oldest || tick > newest)
    return SCN_NOT_FOUND;
  if (e == SCN_ENTITY_NONE || e > SCN_ENTITY_MAX)
    return SCN_NOT_FOUND;
  uint32_t i = scn__tm_lookup(tm, e);
  scn__heads heads;
  if (i != SCN_NIL) {
    /* the live values are read when nothing changed since tick: load them meanwhile */
    __builtin_prefetch(tm->world[i]);
    __builtin_prefetch(h->shadow[i]);
    __builtin_prefetch(&tm->parent[i]);
    __builtin_prefetch(&tm->name[i]);
    heads = h->heads[i];
  } else {
    const scn__dead *d = dead_find(h, e);
    if (!d)
      return SCN_NOT_FOUND;
    heads = d->heads;
  }
  const uint64_t *b = bound_of(h, tick + 1); /* records made after tick begin here */
  const scn__hist_srec *st = walk_struct(h, heads.meta, b[SCN_HIST_STRUCT]);
  if (st ? !st->exists : i == SCN_NIL)
    return SCN_NOT_FOUND;
  if (st) {
    v->parent = st->parent;
    v->name = st->name[0] ? st->name : NULL;
  } else {
    uint32_t p = tm->parent[i];
    v->parent = p == SCN_NIL ? SCN_ENTITY_NONE : tm->entity[p];
    v->name = scn__tm_name(tm, i);
  }
  /* A destroyed transform left both matrices behind when it was destroyed. */
  bool live = i != SCN_NIL;
  if (!matrix_at(h, SCN_HIST_WORLD, heads.world, b[SCN_HIST_WORLD], live ? tm->world[i][0] : NULL,
                 v->world) ||
      !matrix_at(h, SCN_HIST_LOCAL, heads.local, b[SCN_HIST_LOCAL], live ? h->shadow[i][0] : NULL,
                 v->local))
    return SCN_STATE;
  return SCN_OK;
}

static void fill_info(scn_entity e, const hist_view *v, scn_transform_info *out) {
  out->entity = e;
  out->parent = v->parent;
  out->name = v->name;
  memcpy(out->local, v->local, sizeof out->local);
  memcpy(out->world, v->world, sizeof out->world);
}

int scn_world_history_get(scn_world *w, scn_entity e, uint64_t tick, scn_transform_info *out) {
  hist_view v;
  int rc = view_at(w, e, tick, &v);
  if (rc == SCN_OK)
    fill_info(e, &v, out);
  return rc;
}

/* ---- fractional ticks --------------------------------------------------------------------- */

/* scn_compose_trs in double from double parts, rounded once; false when not finite. */
static bool compose_d(const double t[3], const double q[4], const double s[3], float out[16]) {
  double len = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (!(len > 0))
    return false;
  double x = q[0] / len, y = q[1] / len, z = q[2] / len, w = q[3] / len;
  const double m[16] = {
      (1 - 2 * (y * y + z * z)) * s[0],
      (2 * (x * y + z * w)) * s[0],
      (2 * (x * z - y * w)) * s[0],
      0,
      (2 * (x * y - z * w)) * s[1],
      (1 - 2 * (x * x + z * z)) * s[1],
      (2 * (y * z + x * w)) * s[1],
      0,
      (2 * (x * z + y * w)) * s[2],
      (2 * (y * z - x * w)) * s[2],
      (1 - 2 * (x * x + y * y)) * s[2],
      0,
      t[0],
      t[1],
      t[2],
      1,
  };
  for (int i = 0; i < 16; i++)
    out[i] = (float)m[i];
  return scn_matrix_finite(out);
}

/* The matrix a fraction f (0 < f < 1) of the way from a to b: translation and scale linearly,
 * rotation by spherical interpolation the shorter way round; a itself when the two are equal,
 * when either is not T * R * S, or when the result would not be finite. */
static void lerp_matrix(const float a[16], const float b[16], double f, float out[16]) {
  float ta[3], ra[4], sa[3], tb[3], rb[4], sb[3];
  if (memcmp(a, b, sizeof(float) * 16) == 0 || scn_decompose_trs(a, ta, ra, sa) != SCN_OK ||
      scn_decompose_trs(b, tb, rb, sb) != SCN_OK) {
    memcpy(out, a, sizeof(float) * 16);
    return;
  }
  double t[3], s[3], q[4], dot = 0, wa = 1 - f, wb = f;
  for (int k = 0; k < 3; k++) {
    t[k] = ta[k] + ((double)tb[k] - ta[k]) * f;
    s[k] = sa[k] + ((double)sb[k] - sa[k]) * f;
  }
  for (int k = 0; k < 4; k++)
    dot += (double)ra[k] * rb[k];
  double sign = dot < 0 ? -1 : 1;
  dot = fabs(dot);
  if (dot < 1 - 1e-12) { /* else the two are all but equal and the straight line will do */
    double angle = acos(dot > 1 ? 1 : dot), sine = sin(angle);
    wa = sin((1 - f) * angle) / sine;
    wb = sin(f * angle) / sine;
  }
  for (int k = 0; k < 4; k++)
    q[k] = wa * ra[k] + wb * sign * rb[k];
  if (!compose_d(t, q, s, out))
    memcpy(out, a, sizeof(float) * 16);
}

int scn_world_history_interpolate(scn_world *w, scn_entity e, double tick,
                                  scn_transform_info *out) {
  if (!isfinite(tick) || tick < 0)
    return SCN_INVALID;
  double whole = floor(tick), f = tick - whole;
  if (whole >= 0x1p63) /* far past any tick a world can reach */
    return SCN_NOT_FOUND;
  uint64_t a = (uint64_t)whole;
  if (f == 0)
    return scn_world_history_get(w, e, a, out);
  uint64_t oldest, newest;
  if (scn_world_history_window(w, &oldest, &newest) != SCN_OK || a < oldest || a >= newest)
    return SCN_NOT_FOUND;
  hist_view va, vb;
  int rc = view_at(w, e, a, &va);
  if (rc != SCN_OK)
    return rc;
  rc = view_at(w, e, a + 1, &vb);
  if (rc == SCN_NOT_FOUND) { /* destroyed in the next tick: as it was */
    fill_info(e, &va, out);
    return SCN_OK;
  }
  if (rc != SCN_OK)
    return rc;
  out->entity = e;
  out->parent = va.parent;
  out->name = va.name;
  lerp_matrix(va.local, vb.local, f, out->local);
  lerp_matrix(va.world, vb.world, f, out->world);
  return SCN_OK;
}

int scn_world_history_relative(scn_world *w, scn_entity e, scn_entity to, double tick,
                               float out[16]) {
  scn_transform_info ie, it;
  int rc = scn_world_history_interpolate(w, e, tick, &ie);
  if (rc == SCN_OK)
    rc = scn_world_history_interpolate(w, to, tick, &it);
  if (rc != SCN_OK)
    return rc;
  mat4 we, wt, r;
  memcpy(we, ie.world, sizeof we);
  memcpy(wt, it.world, sizeof wt);
  if (scn__mul_inverse(wt, we, r) != SCN_OK)
    return SCN_SINGULAR;
  memcpy(out, r, sizeof r);
  return SCN_OK;
}

/* ---- export and import -------------------------------------------------------------------- */

/* The tick in which record s of ring k was made: the last of ticks first..last whose records
 * begin at or before it. */
static uint64_t tick_of(const scn__hist *h, int k, uint64_t s, uint64_t first, uint64_t last) {
  while (first < last) {
    uint64_t mid = first + (last - first + 1) / 2;
    if (bound_of(h, mid)[k] <= s)
      first = mid;
    else
      last = mid - 1;
  }
  return first;
}

static uint32_t back_of(const scn__hist *h, int k, uint64_t s) {
  if (k == SCN_HIST_STRUCT)
    return srec(h, s)->back;
  return mlink(&h->ring[k], s) & ~SCN_HIST_ASIDE;
}

typedef struct export_walk {
  const scn__hist *h;
  uint64_t first, last;              /* the ticks whose records are exported */
  uint64_t lo[SCN_HIST_RINGS];       /* the first record of tick first */
  scn_entity *owner[SCN_HIST_RINGS]; /* per record from lo: its entity, 0 when not exported */
} export_walk;

/* Marks the records of one chain that a query can read: in each tick, the chain's oldest. */
static void mark_chain(export_walk *x, int k, uint64_t s, scn_entity e) {
  uint64_t prev = 0, prev_tick = 0;
  while (s >= x->lo[k]) {
    uint64_t t = tick_of(x->h, k, s, x->first, x->last);
    if (prev && t == prev_tick && x->owner[k][prev - x->lo[k]] == e)
      x->owner[k][prev - x->lo[k]] = SCN_ENTITY_NONE; /* a later one of the same tick */
    if (x->owner[k][s - x->lo[k]] == SCN_ENTITY_NONE)
      x->owner[k][s - x->lo[k]] = e;
    prev = s;
    prev_tick = t;
    uint32_t back = back_of(x->h, k, s);
    if (!back)
      break;
    s -= back;
  }
}

static void mark_heads(export_walk *x, const scn__heads *heads, scn_entity e) {
  mark_chain(x, SCN_HIST_WORLD, heads->world, e);
  mark_chain(x, SCN_HIST_LOCAL, heads->local, e);
  mark_chain(x, SCN_HIST_STRUCT, heads->meta, e);
}

int scn_world_history_export(scn_world *w, scn_history_span *span, scn_version_fn fn, void *ud) {
  scn__tm *tm = &w->tm;
  scn__hist *h = tm->hist;
  uint64_t now = tm->tick - 1;
  span->now = now;
  span->window = h ? h->window : 0;
  span->oldest = now + 1;
  if (!h)
    return SCN_OK;
  /* A world matrix about to change gets its record when the flush changes it: flushed, the
   * open tick's records are all there, and the live values are the open tick's. */
  scn__tm_flush(tm);
  uint64_t first = oldest_tick(h, now);
  if (h->broken || first > now)
    return SCN_OK; /* no tick can be named: nothing to give */
  span->oldest = first;
  export_walk x = {.h = h, .first = first + 1, .last = now + 1};
  int rc = SCN_OK;
  for (int k = 0; k < SCN_HIST_RINGS && rc == SCN_OK; k++) {
    x.lo[k] = bound_of(h, first + 1)[k];
    if (x.lo[k] < h->ring[k].front)
      x.lo[k] = h->ring[k].front;
    uint64_t n = h->ring[k].end - x.lo[k];
    x.owner[k] = calloc(n ? n : 1, sizeof(scn_entity));
    if (!x.owner[k])
      rc = SCN_NOMEM;
  }
  if (rc == SCN_OK) {
    for (uint32_t i = 0; i < tm->n; i++)
      mark_heads(&x, &h->heads[i], tm->entity[i]);
    for (uint32_t d = 0; h->dead && d <= h->dead_mask; d++)
      if (h->dead[d].entity != SCN_ENTITY_NONE)
        mark_heads(&x, &h->dead[d].heads, h->dead[d].entity);
  }
  scn_history_version v;
  memset(&v, 0, sizeof v);
  for (uint64_t t = first + 1; t <= now + 1 && rc == SCN_OK; t++) {
    v.tick = t;
    for (int k = 0; k < SCN_HIST_RINGS && rc == SCN_OK; k++) {
      uint64_t from = bound_of(h, t)[k], to = t <= now ? bound_of(h, t + 1)[k] : h->ring[k].end;
      if (from < x.lo[k])
        from = x.lo[k];
      for (uint64_t s = from; s < to && rc == SCN_OK; s++) {
        v.entity = x.owner[k][s - x.lo[k]];
        if (v.entity == SCN_ENTITY_NONE)
          continue;
        if (k == SCN_HIST_STRUCT) {
          const scn__hist_srec *rec = srec(h, s);
          v.kind = SCN_VERSION_STRUCT;
          v.exists = rec->exists;
          v.parent = rec->exists ? rec->parent : SCN_ENTITY_NONE;
          memcpy(v.name, rec->exists ? rec->name : "", rec->exists ? strlen(rec->name) + 1 : 1);
          memset(v.m, 0, sizeof v.m);
        } else {
          v.kind = k == SCN_HIST_WORLD ? SCN_VERSION_WORLD : SCN_VERSION_LOCAL;
          record_matrix(h, k, s, v.m);
          v.exists = false;
          v.parent = SCN_ENTITY_NONE;
          v.name[0] = '\0';
        }
        rc = fn(ud, &v);
      }
    }
  }
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    free(x.owner[k]);
  return rc;
}

/* The chain heads of e: its instance's, or those it keeps as a destroyed transform (made
 * when missing); NULL without memory. */
static scn__heads *import_heads(scn__tm *tm, scn_entity e) {
  scn__hist *h = tm->hist;
  uint32_t i = scn__tm_lookup(tm, e);
  if (i != SCN_NIL)
    return &h->heads[i];
  if (!dead_grow(h))
    return NULL;
  scn__dead *d = &h->dead[dead_slot(h, e)];
  if (d->entity == SCN_ENTITY_NONE) {
    memset(d, 0, sizeof *d);
    d->entity = e;
    h->ndead++;
  }
  return &d->heads;
}

static void import_bound(scn__hist *h, uint64_t tick) {
  uint64_t *b = bound_of(h, tick);
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    b[k] = h->ring[k].end;
}

static bool version_valid(const scn_history_version *v) {
  if (v->entity == SCN_ENTITY_NONE || v->entity > SCN_ENTITY_MAX)
    return false;
  if (v->kind == SCN_VERSION_WORLD || v->kind == SCN_VERSION_LOCAL)
    return true;
  if (v->kind != SCN_VERSION_STRUCT)
    return false;
  if (!v->exists)
    return true;
  size_t len = strnlen(v->name, sizeof v->name);
  return len < sizeof v->name && v->parent <= SCN_ENTITY_MAX &&
         (len == 0 || scn_name_valid(v->name, len));
}

/* Every destroyed transform can answer for the ticks before it went: it has a structure
 * record, and when that says it existed, a world and a local matrix too. */
static bool dead_complete(const scn__hist *h) {
  for (uint32_t d = 0; h->dead && d <= h->dead_mask; d++) {
    const scn__dead *x = &h->dead[d];
    if (x->entity == SCN_ENTITY_NONE)
      continue;
    if (x->heads.meta < h->ring[SCN_HIST_STRUCT].front)
      return false;
    if (srec(h, x->heads.meta)->exists && (x->heads.world < h->ring[SCN_HIST_WORLD].front ||
                                           x->heads.local < h->ring[SCN_HIST_LOCAL].front))
      return false;
  }
  return true;
}

/* The versions, tick by tick, into the empty history: each pushed onto its entity's chain. */
static int import_versions(scn__tm *tm, const scn_history_span *span, scn_version_next_fn next,
                           void *ud) {
  scn__hist *h = tm->hist;
  uint64_t open = span->now + 1, cur = span->oldest + 1;
  h->start = span->oldest;
  import_bound(h, cur);
  for (;;) {
    scn_history_version v;
    int got = next(ud, &v);
    if (got < 0)
      return got;
    if (got == 0)
      break;
    if (v.tick < cur || v.tick > open || !version_valid(&v))
      return SCN_INVALID;
    while (cur < v.tick)
      import_bound(h, ++cur);
    scn__heads *heads = import_heads(tm, v.entity);
    if (!heads)
      return SCN_NOMEM;
    const uint64_t *b = bound_of(h, cur);
    if (v.kind == SCN_VERSION_STRUCT) {
      if (heads->meta >= b[SCN_HIST_STRUCT])
        return SCN_INVALID;
      push_struct_rec(h, &heads->meta, v.entity, v.exists, v.parent, v.name[0] ? v.name : NULL);
    } else {
      int k = v.kind == SCN_VERSION_WORLD ? SCN_HIST_WORLD : SCN_HIST_LOCAL;
      uint64_t *head = k == SCN_HIST_WORLD ? &heads->world : &heads->local;
      if (*head >= b[k])
        return SCN_INVALID;
      push_matrix(h, k, head, v.m);
    }
    if (h->broken)
      return SCN_NOMEM;
  }
  while (cur < open)
    import_bound(h, ++cur);
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    h->begin[k] = bound_of(h, open)[k];
  if (!dead_complete(h))
    return SCN_INVALID;
  /* A world matrix gets a record the first time it changes in a tick (its stamp is older):
   * stamps say the open tick exactly where the versions have that record, or where the
   * transform was created in the open tick (no record, as there). Where a matrix counts as
   * changed in the open tick without one, its value now is its value as tick now closed
   * (the same transforms): that is the record. */
  const uint32_t stamp = scn__tm_stamp(tm);
  for (uint32_t i = 0; i < tm->n; i++) {
    scn__heads *heads = &h->heads[i];
    bool recorded = heads->world >= h->begin[SCN_HIST_WORLD];
    bool created = heads->meta >= h->begin[SCN_HIST_STRUCT] && !srec(h, heads->meta)->exists;
    if (recorded || created)
      tm->changed[i] = stamp;
    else if (tm->changed[i] == stamp)
      push_matrix(h, SCN_HIST_WORLD, &heads->world, tm->world[i][0]);
  }
  return h->broken ? SCN_NOMEM : SCN_OK;
}

int scn_world_history_import(scn_world *w, const scn_history_span *span, scn_version_next_fn next,
                             void *ud) {
  scn__tm *tm = &w->tm;
  if (w->scene->in_batch || span->now + 1 != tm->tick)
    return SCN_STATE;
  uint64_t open = span->now + 1;
  if (span->window > SCN_HISTORY_MAX || span->oldest > open ||
      (span->window && span->oldest + span->window < open) || (span->window && !span->oldest))
    return SCN_INVALID;
  int rc = scn_world_set_history(w, span->window);
  if (rc != SCN_OK)
    return rc;
  if (!tm->hist) { /* no window: no version either */
    scn_history_version v;
    rc = next(ud, &v);
    return rc < 0 ? rc : rc > 0 ? SCN_INVALID : SCN_OK;
  }
  scn__tm_flush(tm); /* the live world matrices are the values of the open tick */
  scn__hist_reset(tm);
  if (span->oldest == open) {
    scn_history_version v;
    rc = next(ud, &v);
    return rc < 0 ? rc : rc > 0 ? SCN_INVALID : SCN_OK;
  }
  rc = import_versions(tm, span, next, ud);
  if (rc != SCN_OK)
    scn__hist_reset(tm);
  return rc;
}

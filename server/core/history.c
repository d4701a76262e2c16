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
#include "history_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* The matrix of record s of ring which. */
void scn__hist_record_matrix(const scn__hist *h, int which, uint64_t s, float out[16]) {
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
void scn__hist_push_matrix(scn__hist *h, int which, uint64_t *head, const float *m) {
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
void scn__hist_push_struct_rec(scn__hist *h, uint64_t *head, scn_entity e, bool exists,
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
  scn__hist_push_struct_rec(tm->hist, &tm->hist->heads[i].meta, tm->entity[i], exists,
                            p != SCN_NIL ? tm->entity[p] : SCN_ENTITY_NONE, scn__tm_name(tm, i));
}

/* ---- destroyed transforms: entity -> chain heads ------------------------------------------ */

uint32_t scn__hist_dead_slot(const scn__hist *h, scn_entity e) {
  uint32_t x = (uint32_t)scn__hash64(e) & h->dead_mask;
  while (h->dead[x].entity != SCN_ENTITY_NONE && h->dead[x].entity != e)
    x = (x + 1) & h->dead_mask;
  return x;
}

const scn__dead *scn__hist_dead_find(const scn__hist *h, scn_entity e) {
  if (!h->dead)
    return NULL;
  const scn__dead *d = &h->dead[scn__hist_dead_slot(h, e)];
  return d->entity == e ? d : NULL;
}

bool scn__hist_dead_grow(scn__hist *h) {
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
      h->dead[scn__hist_dead_slot(h, old[x].entity)] = old[x];
  free(old);
  return true;
}

static void dead_put(scn__hist *h, scn_entity e, const scn__heads *heads) {
  if (!scn__hist_dead_grow(h)) {
    h->broken = true;
    return;
  }
  scn__dead *d = &h->dead[scn__hist_dead_slot(h, e)];
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
  scn__hist_push_matrix(h, SCN_HIST_WORLD, &h->heads[i].world, tm->world[i][0]);
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
    scn__hist_push_matrix(h, SCN_HIST_LOCAL, &h->heads[i].local, h->shadow[i][0]);
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
  const scn__dead *d = scn__hist_dead_find(h, tm->entity[i]);
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
      scn__hist_push_matrix(h, SCN_HIST_WORLD, &heads->world, tm->world[i][0]);
    if (heads->local < h->begin[SCN_HIST_LOCAL])
      scn__hist_push_matrix(h, SCN_HIST_LOCAL, &heads->local, h->shadow[i][0]);
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

/* Drops every record made before the tick whose records begin at b. */
static void drop_before(scn__hist *h, const uint64_t *b) {
  for (uint64_t s = h->ring[SCN_HIST_STRUCT].front; s < b[SCN_HIST_STRUCT]; s++) {
    const scn__hist_srec *rec = srec(h, s);
    const scn__dead *d = scn__hist_dead_find(h, rec->entity);
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

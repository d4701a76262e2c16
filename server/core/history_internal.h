/* What the history's files share (history.c: the rings, records and window; history_read.c:
 * reads at past and fractional ticks; history_io.c: export and import for a move). */
#ifndef SCN_HISTORY_INTERNAL_H
#define SCN_HISTORY_INTERNAL_H

#include "core_internal.h"

#define MCHUNK (1u << SCN_HIST_MSHIFT)
#define SCHUNK (1u << SCN_HIST_SSHIFT)
#define ACHUNK (1u << SCN_HIST_ASHIFT)

static inline void *ring_chunk(const scn__ring *r, uint64_t s) {
  return r->table[(s >> r->shift) & r->mask];
}

static inline scn__hist_mchunk *mchunk(const scn__ring *r, uint64_t s) { return ring_chunk(r, s); }

static inline scn__hist_srec *srec(const scn__hist *h, uint64_t s) {
  return &((scn__hist_srec *)ring_chunk(&h->ring[SCN_HIST_STRUCT], s))[s & (SCHUNK - 1)];
}

static inline scn__hist_row *aside_at(const scn__ring *r, uint64_t x) {
  return &((scn__hist_row *)ring_chunk(r, x))[x & (ACHUNK - 1)];
}

static inline uint32_t mlink(const scn__ring *r, uint64_t s) {
  return mchunk(r, s)->link[s & (MCHUNK - 1)];
}

static inline uint64_t *bound_of(const scn__hist *h, uint64_t tick) {
  return h->bound[tick & h->bound_mask];
}

/* The oldest tick a query may name once tick now has closed (above now: none). */
static inline uint64_t oldest_tick(const scn__hist *h, uint64_t now) {
  uint64_t oldest = now + 1 > h->window ? now + 1 - h->window : 0;
  return oldest > h->start ? oldest : h->start;
}

/* The matrix of record s of ring which. */
void scn__hist_record_matrix(const scn__hist *h, int which, uint64_t s, float out[16]);
/* Appends m to the matrix chain in ring which whose head is *head. */
void scn__hist_push_matrix(scn__hist *h, int which, uint64_t *head, const float *m);
/* Appends a structure record (existence, parent, name) to the chain whose head is *head. */
void scn__hist_push_struct_rec(scn__hist *h, uint64_t *head, scn_entity e, bool exists,
                               scn_entity parent, const char *name);
/* The destroyed transforms' map (entity -> chain heads): its slot for e, e's entry (NULL when
 * none), and room for one more (false when out of memory). */
uint32_t scn__hist_dead_slot(const scn__hist *h, scn_entity e);
const scn__dead *scn__hist_dead_find(const scn__hist *h, scn_entity e);
bool scn__hist_dead_grow(scn__hist *h);

#endif

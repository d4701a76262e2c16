/* The spatial index's layout, shared by space.c (upkeep) and scope.c (queries). */
#ifndef SCN_SPACE_H
#define SCN_SPACE_H

#include "core_internal.h"
#include "scn_interest.h"

/* A transform in a cell, with what a query reads, so it reads one array. */
typedef struct scn__space_entry {
  float p[3];         /* the translation as of the last sync */
  uint32_t item;      /* its item, for moving it */
  float q[3];         /* the translation as of the sync before (p unless it changed since) */
  uint32_t fresh : 1; /* it had no transform at the sync before */
  uint32_t inst : 31; /* its instance in the world when it last changed (checked before use) */
  scn_entity entity;  /* of the transform */
  uint64_t changed;   /* the tick its world matrix last changed (as far as the index knows) */
} scn__space_entry;

/* A transform that left a cell at the last sync (moved to another cell, or destroyed). */
typedef struct scn__space_left {
  scn_entity entity;
  float q[3]; /* where it was */
} scn__space_left;

typedef struct scn__space_cell {
  int32_t key[3];
  uint32_t n, cap;
  /* entries[0, moved) changed at the last sync (moved within the cell, came in, or are new):
   * a region that needs only what moved reads them alone */
  uint32_t moved;
  scn__space_entry *entries;
  uint32_t nleft, left_cap;
  scn__space_left *left;
  uint64_t touched; /* the last sync that changed, added or removed a transform in it */
} scn__space_cell;

typedef struct scn__space_item {
  uint32_t cell, slot; /* cell SCN_NIL: a free item */
} scn__space_item;

/* Cell coordinates are clamped to this magnitude: a tiny cell over a huge world still gives
 * keys that pack into 63 bits, and the same clamping on both sides keeps queries exact. */
#define SCN_SPACE_KEY_MAX ((1 << 20) - 1)

/* The widest box, in cells along an axis, whose distances a region's evaluation tabulates. */
#define SCN_SPACE_AXIS_MAX 64

struct scn_space {
  scn_world *w;
  double cell, inv; /* cell size and its inverse; 0 before the first build */
  uint64_t synced;  /* the closed tick the index reflects; 0: not built */
  uint64_t before;  /* the closed tick of the sync before (the q of entries); 0: none */
  uint64_t rebuilds;
  scn__space_item *items;
  uint32_t nitems, items_cap; /* items[0, nitems) used or free */
  uint32_t *free_items;
  uint32_t nfree, free_cap;
  scn__idmap by_entity; /* entity -> item */
  scn__space_cell *cells;
  uint32_t ncells, cells_cap;
  scn__idmap by_key;    /* packed cell key -> cell */
  int32_t lo[3], hi[3]; /* the keys of occupied cells lie within (grow-only until rebuilt) */
  size_t entries_bytes;
  scn__vec touched; /* uint32_t cells the last sync touched, set back at the next one */
  double axis[2][3][SCN_SPACE_AXIS_MAX][2]; /* scratch of a region's evaluation (scope.c) */
};

int32_t scn__space_key(const scn_space *sp, double x);
uint64_t scn__space_pack(const int32_t k[3]);
/* The world matrix of an entry's transform (NULL when it has none). */
const float *scn__space_matrix(scn_space *sp, const scn__space_entry *en);
/* The entry of e, or NULL. */
scn__space_entry *scn__space_find(const scn_space *sp, scn_entity e);

#endif

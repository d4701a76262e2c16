/* The spatial index's layout, shared by space.c (upkeep) and scope.c (queries). */
#ifndef SCN_SPACE_H
#define SCN_SPACE_H

#include "core_internal.h"
#include "scn_interest.h"

/* A transform in a cell: its position beside its item, so a query reads one array. */
typedef struct scn__space_entry {
  float p[3];
  uint32_t item;
} scn__space_entry;

typedef struct scn__space_cell {
  int32_t key[3];
  uint32_t n, cap;
  scn__space_entry *entries;
} scn__space_cell;

typedef struct scn__space_item {
  scn_entity entity; /* 0: a free item */
  uint64_t changed;  /* the tick its world matrix last changed (as far as the index knows) */
  uint32_t cell, slot;
} scn__space_item;

/* Cell coordinates are clamped to this magnitude: a tiny cell over a huge world still gives
 * keys that pack into 63 bits, and the same clamping on both sides keeps queries exact. */
#define SCN_SPACE_KEY_MAX ((1 << 20) - 1)

struct scn_space {
  scn_world *w;
  double cell, inv; /* cell size and its inverse; 0 before the first build */
  uint64_t synced;  /* the closed tick the index reflects; 0: not built */
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
};

int32_t scn__space_key(const scn_space *sp, double x);
uint64_t scn__space_pack(const int32_t k[3]);
/* The world matrix of an entity with a transform in the space's world (flushed). */
const float *scn__space_world_matrix(scn_space *sp, scn_entity e);

#endif

/* What a packed subscription last received per entity: an open-addressing table keyed by
 * entity id, probed linearly over the id array alone (the values lie apart), and emptied of
 * one entry by shifting the rest of its run back, so no tombstones pile up as entities come
 * and go. Kept at most three quarters full. */
#include "packed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline size_t slot_of(const scn_packed_baseline *b, uint64_t id) {
  return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & b->mask;
}

static size_t capacity(const scn_packed_baseline *b) { return b->ids ? b->mask + 1 : 0; }

static bool rehash(scn_packed_baseline *b, size_t cap) {
  uint64_t *ids = calloc(cap, sizeof *ids);
  scn_packed_value *values = malloc(cap * sizeof *values);
  if (!ids || !values) {
    free(ids);
    free(values);
    return false;
  }
  scn_packed_baseline old = *b;
  b->ids = ids;
  b->values = values;
  b->mask = cap - 1;
  for (size_t i = 0; i < capacity(&old); i++)
    if (old.ids[i]) {
      size_t h = slot_of(b, old.ids[i]);
      while (ids[h])
        h = (h + 1) & b->mask;
      ids[h] = old.ids[i];
      values[h] = old.values[i];
    }
  free(old.ids);
  free(old.values);
  return true;
}

bool scn_packed_baseline_reserve(scn_packed_baseline *b, size_t extra) {
  if (extra > SIZE_MAX / 8 - b->count)
    return false;
  size_t need = b->count + extra, cap = capacity(b);
  if (need <= cap / 4 * 3)
    return true;
  size_t grown = cap ? cap : 16;
  while (need > grown / 4 * 3)
    grown *= 2;
  return rehash(b, grown);
}

bool scn_packed_baseline_copy(scn_packed_baseline *dst, const scn_packed_baseline *src) {
  *dst = (scn_packed_baseline){.step = src->step};
  memcpy(dst->origin, src->origin, sizeof dst->origin);
  size_t cap = capacity(src);
  if (!cap)
    return true;
  dst->ids = malloc(cap * sizeof *dst->ids);
  dst->values = malloc(cap * sizeof *dst->values);
  if (!dst->ids || !dst->values) {
    free(dst->ids);
    free(dst->values);
    dst->ids = NULL, dst->values = NULL;
    return false;
  }
  memcpy(dst->ids, src->ids, cap * sizeof *dst->ids);
  memcpy(dst->values, src->values, cap * sizeof *dst->values);
  dst->mask = src->mask;
  dst->count = src->count;
  return true;
}

bool scn_packed_baseline_set_grid(scn_packed_baseline *b, double step, const double origin[3]) {
  if (!(step > 0 && isfinite(step) && isfinite(origin[0]) && isfinite(origin[1]) &&
        isfinite(origin[2])))
    return false;
  if (step != b->step || origin[0] != b->origin[0] || origin[1] != b->origin[1] ||
      origin[2] != b->origin[2])
    scn_packed_baseline_forget_translations(b);
  b->step = step;
  memcpy(b->origin, origin, sizeof b->origin);
  return true;
}

void scn_packed_baseline_free(scn_packed_baseline *b) {
  free(b->ids);
  free(b->values);
  b->ids = NULL;
  b->values = NULL;
  b->mask = b->count = 0;
}

void scn_packed_baseline_clear(scn_packed_baseline *b) {
  if (b->ids)
    memset(b->ids, 0, capacity(b) * sizeof *b->ids);
  b->count = 0;
}

void scn_packed_baseline_forget_translations(scn_packed_baseline *b) {
  for (size_t i = 0; i < capacity(b); i++)
    if (b->ids[i])
      b->values[i].has_q = false;
}

void scn_packed_baseline_prefetch(const scn_packed_baseline *b, uint64_t id) {
  if (b->ids) {
    size_t h = slot_of(b, id);
    __builtin_prefetch(&b->ids[h]);
    __builtin_prefetch(&b->values[h]);
  }
}

scn_packed_value *scn_packed_baseline_find(const scn_packed_baseline *b, uint64_t id) {
  if (!b->ids || !id)
    return NULL;
  for (size_t h = slot_of(b, id);; h = (h + 1) & b->mask) {
    if (b->ids[h] == id)
      return &b->values[h];
    if (!b->ids[h])
      return NULL;
  }
}

scn_packed_value *scn_packed_baseline_put(scn_packed_baseline *b, uint64_t id) {
  scn_packed_value *v = scn_packed_baseline_find(b, id);
  if (v)
    return v;
  if (!id || !scn_packed_baseline_reserve(b, 1))
    return NULL;
  size_t h = slot_of(b, id);
  while (b->ids[h])
    h = (h + 1) & b->mask;
  b->ids[h] = id;
  b->count++;
  v = &b->values[h];
  *v = (scn_packed_value){.scale = {1, 1, 1}};
  return v;
}

void scn_packed_baseline_remove(scn_packed_baseline *b, uint64_t id) {
  if (!b->ids || !id)
    return;
  size_t h = slot_of(b, id);
  while (b->ids[h] != id) {
    if (!b->ids[h])
      return;
    h = (h + 1) & b->mask;
  }
  /* Shift back each later member of the run that may sit in the hole: one whose home slot is
   * not cyclically within (hole, its slot]. */
  size_t hole = h;
  for (size_t j = (h + 1) & b->mask; b->ids[j]; j = (j + 1) & b->mask) {
    size_t home = slot_of(b, b->ids[j]);
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays)
      continue;
    b->ids[hole] = b->ids[j];
    b->values[hole] = b->values[j];
    hole = j;
  }
  b->ids[hole] = 0;
  b->count--;
}

/* A map from 64-bit ids to 32-bit values: open addressing, linear probing, and deletion by
 * shifting the run back (no tombstones, so a map that churns never slows down). */
#include "core_internal.h"

#include <stdlib.h>

#define EMPTY UINT64_MAX

static inline uint32_t slot_of(const scn__idmap *m, uint64_t key) {
  return (uint32_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & m->mask;
}

static int rehash(scn__idmap *m, uint32_t cap) {
  uint64_t *keys = malloc(sizeof *keys * cap);
  uint32_t *vals = malloc(sizeof *vals * cap);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return SCN_NOMEM;
  }
  for (uint32_t i = 0; i < cap; i++)
    keys[i] = EMPTY;
  scn__idmap old = *m;
  m->keys = keys;
  m->vals = vals;
  m->mask = cap - 1;
  for (uint32_t i = 0; old.keys && i <= old.mask; i++)
    if (old.keys[i] != EMPTY) {
      uint32_t h = slot_of(m, old.keys[i]);
      while (keys[h] != EMPTY)
        h = (h + 1) & m->mask;
      keys[h] = old.keys[i];
      vals[h] = old.vals[i];
    }
  free(old.keys);
  free(old.vals);
  return SCN_OK;
}

uint32_t scn__idmap_get(const scn__idmap *m, uint64_t key) {
  if (!m->keys)
    return SCN_NIL;
  for (uint32_t h = slot_of(m, key);; h = (h + 1) & m->mask) {
    if (m->keys[h] == key)
      return m->vals[h];
    if (m->keys[h] == EMPTY)
      return SCN_NIL;
  }
}

int scn__idmap_put(scn__idmap *m, uint64_t key, uint32_t val) {
  /* at most half full, so probes stay short */
  if ((!m->keys || (m->count + 1) * 2 > m->mask + 1) &&
      rehash(m, m->keys ? (m->mask + 1) * 2 : 64) != SCN_OK)
    return SCN_NOMEM;
  uint32_t h = slot_of(m, key);
  while (m->keys[h] != EMPTY && m->keys[h] != key)
    h = (h + 1) & m->mask;
  if (m->keys[h] == EMPTY)
    m->count++;
  m->keys[h] = key;
  m->vals[h] = val;
  return SCN_OK;
}

void scn__idmap_del(scn__idmap *m, uint64_t key) {
  if (!m->keys)
    return;
  uint32_t h = slot_of(m, key);
  while (m->keys[h] != key) {
    if (m->keys[h] == EMPTY)
      return;
    h = (h + 1) & m->mask;
  }
  m->count--;
  /* Shift later members of the run back into the hole when their home slot allows it. */
  for (uint32_t j = (h + 1) & m->mask; m->keys[j] != EMPTY; j = (j + 1) & m->mask) {
    uint32_t home = slot_of(m, m->keys[j]);
    if (((j - home) & m->mask) >= ((j - h) & m->mask)) {
      m->keys[h] = m->keys[j];
      m->vals[h] = m->vals[j];
      h = j;
    }
  }
  m->keys[h] = EMPTY;
}

void scn__idmap_clear(scn__idmap *m) {
  for (uint32_t i = 0; m->keys && i <= m->mask; i++)
    m->keys[i] = EMPTY;
  m->count = 0;
}

void scn__idmap_free(scn__idmap *m) {
  free(m->keys);
  free(m->vals);
  m->keys = NULL;
  m->vals = NULL;
  m->mask = m->count = 0;
}

size_t scn__idmap_bytes(const scn__idmap *m) {
  return m->keys ? (size_t)(m->mask + 1) * (sizeof *m->keys + sizeof *m->vals) : 0;
}

/* Small helpers the core_transform suites share (CUnit asserts): matrices multiplied and
 * compared, a world's transforms in pre-order, and children lists. */
#ifndef T_TRANSFORM_FIXTURES_H
#define T_TRANSFORM_FIXTURES_H

#include "mat_mul.h"
#include "scn_core.h"

#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static inline bool bits_eq(const float a[16], const float b[16]) { return memcmp(a, b, 64) == 0; }

/* Exact values (0 == -0). */
static inline bool mat_eq(const float a[16], const float b[16]) {
  for (int i = 0; i < 16; i++)
    if (a[i] != b[i])
      return false;
  return true;
}

typedef struct elist {
  scn_entity e[4096];
  size_t n;
} elist;

static inline void collect(void *ud, scn_entity e, const float world[16]) {
  (void)world;
  elist *l = ud;
  if (l->n < sizeof l->e / sizeof l->e[0])
    l->e[l->n] = e;
  l->n++;
}

/* The whole world in pre-order, roots in root order: visit_changed since 0 visits all. */
static inline void preorder(scn_world *w, elist *out) {
  out->n = 0;
  CU_ASSERT_EQUAL_FATAL(scn_world_visit_changed(w, SCN_ENTITY_NONE, 0, collect, out), SCN_OK);
}

static inline size_t children(scn_world *w, scn_entity e, scn_entity *out, size_t cap) {
  size_t n = 0;
  CU_ASSERT_EQUAL_FATAL(scn_transform_children(w, e, out, cap, &n), SCN_OK);
  return n;
}

#endif

/* Small helpers shared by the core's unit tests (CUnit asserts; the core only). */
#ifndef T_CORE_FIXTURES_H
#define T_CORE_FIXTURES_H

#include "scn_core.h"

#include <CUnit/CUnit.h>
#include <string.h>

#define OK(x) CU_ASSERT_EQUAL_FATAL((x), SCN_OK)

static const float IDENTITY[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

/* A translation. */
static inline void mat_t(float m[16], float x, float y, float z) {
  memcpy(m, IDENTITY, sizeof IDENTITY);
  m[12] = x, m[13] = y, m[14] = z;
}

/* A new entity. */
static inline scn_entity ent(scn_scene *s) {
  scn_entity e = SCN_ENTITY_NONE;
  CU_ASSERT_EQUAL_FATAL(scn_entity_create(s, 1, &e), SCN_OK);
  return e;
}

/* A new entity with a transform in w. */
static inline scn_entity mk(scn_world *w, scn_scene *s, scn_entity parent, const char *name,
                            const float *local) {
  scn_entity e = ent(s);
  CU_ASSERT_EQUAL_FATAL(scn_transform_create(w, e, parent, name, local), SCN_OK);
  return e;
}

/* Everything the core reports of e's transform in w. */
static inline scn_transform_info get(scn_world *w, scn_entity e) {
  scn_transform_info info;
  memset(&info, 0, sizeof info);
  CU_ASSERT_EQUAL_FATAL(scn_transform_get(w, e, &info), SCN_OK);
  return info;
}

#endif

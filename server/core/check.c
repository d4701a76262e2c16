/* A full consistency check of one transform manager, for tests and fuzzers: links agree
 * with each other, the maps find every instance, no cycles, the depth-first order holds when
 * it is claimed, and every world matrix equals parent world x local after a flush. */
#include "core_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      snprintf(err, errlen, __VA_ARGS__);                                                          \
      return SCN_STATE;                                                                            \
    }                                                                                              \
  } while (0)

static int check_links(const scn__tm *tm, char *err, size_t errlen) {
  uint32_t n = tm->n;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = tm->parent[i];
    CHECK(p == SCN_NIL || p < n, "instance %u: parent %u out of range", i, p);
    CHECK(scn__tm_lookup(tm, tm->entity[i]) == i, "instance %u: entity map disagrees", i);
    const char *name = scn__tm_name(tm, i);
    if (name) {
      scn_entity pe = p == SCN_NIL ? SCN_ENTITY_NONE : tm->entity[p];
      CHECK(scn__tm_lookup_name(tm, pe, name, strlen(name)) == i, "instance %u: name map disagrees",
            i);
    }
    /* Walking up must end within n steps: no cycles. */
    uint32_t steps = 0;
    for (uint32_t a = p; a != SCN_NIL; a = tm->parent[a])
      CHECK(++steps <= n, "instance %u: its ancestors form a cycle", i);
    uint32_t count = 0, prev = SCN_NIL;
    for (uint32_t c = tm->first_child[i]; c != SCN_NIL; c = tm->next[c]) {
      CHECK(c < n && tm->parent[c] == i, "instance %u: child %u does not point back", i, c);
      CHECK(tm->prev[c] == prev, "instance %u: child %u has a wrong prev link", i, c);
      CHECK(++count <= n, "instance %u: its child list loops", i);
      prev = c;
    }
    CHECK(tm->last_child[i] == prev, "instance %u: last child link is wrong", i);
  }
  uint32_t roots = 0, prev = SCN_NIL;
  for (uint32_t r = tm->first_root; r != SCN_NIL; r = tm->next[r]) {
    CHECK(r < n && tm->parent[r] == SCN_NIL, "root list holds a non-root %u", r);
    CHECK(tm->prev[r] == prev, "root %u has a wrong prev link", r);
    CHECK(++roots <= n, "the root list loops");
    prev = r;
  }
  CHECK(tm->last_root == prev, "last root link is wrong");
  return SCN_OK;
}

static int check_order(const scn__tm *tm, char *err, size_t errlen) {
  if (!tm->sorted)
    return SCN_OK;
  for (uint32_t i = 0; i < tm->n; i++) {
    uint32_t p = tm->parent[i];
    CHECK(p == SCN_NIL || p < i, "sorted, but instance %u comes before its parent %u", i, p);
    CHECK(i + tm->subtree[i] <= tm->n, "instance %u: subtree runs past the end", i);
    if (p != SCN_NIL)
      CHECK(i + tm->subtree[i] <= p + tm->subtree[p],
            "instance %u: subtree not inside its parent's", i);
  }
  return SCN_OK;
}

static int check_worlds(scn__tm *tm, char *err, size_t errlen) {
  scn__tm_flush(tm);
  for (uint32_t i = 0; i < tm->n; i++) {
    mat4 want;
    uint32_t p = tm->parent[i];
    if (p == SCN_NIL)
      glm_mat4_copy(tm->local[i], want);
    else
      glm_mat4_mul(tm->world[p], tm->local[i], want);
    CHECK(memcmp(want, tm->world[i], sizeof want) == 0,
          "entity %llu: world matrix is not parent world x local",
          (unsigned long long)tm->entity[i]);
  }
  return SCN_OK;
}

int scn_world_check(scn_world *w, char *err, size_t errlen) {
  scn__tm *tm = &w->tm;
  int rc = check_links(tm, err, errlen);
  if (rc == SCN_OK)
    rc = check_order(tm, err, errlen);
  if (rc == SCN_OK)
    rc = check_worlds(tm, err, errlen);
  return rc;
}

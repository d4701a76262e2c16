/* Comparing two scenes (scene_compare.h). */
#include "scene_compare.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char why[512]; /* what t_scene_difference returns */

static bool differ(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool differ(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return false;
}

static bool same_entities(scn_scene *a, scn_scene *b) {
  if (scn_entity_slot_count(a) != scn_entity_slot_count(b))
    return differ("slot count: %u first, %u second", scn_entity_slot_count(a),
                  scn_entity_slot_count(b));
  for (uint32_t s = 1; s <= scn_entity_slot_count(a); s++) {
    bool alive_a, alive_b;
    scn_entity ia = scn_entity_slot_id(a, s, &alive_a), ib = scn_entity_slot_id(b, s, &alive_b);
    if (ia != ib || alive_a != alive_b)
      return differ("slot %u: id %llu (alive %d) first, %llu (alive %d) second", s,
                    (unsigned long long)ia, alive_a, (unsigned long long)ib, alive_b);
  }
  const uint32_t *fa, *fb;
  size_t na = scn_entity_free_order(a, &fa), nb = scn_entity_free_order(b, &fb);
  if (na != nb || (na && memcmp(fa, fb, sizeof *fa * na) != 0))
    return differ("the order free slots are reused in differs (%zu first, %zu second)", na, nb);
  return true;
}

typedef struct node_list {
  scn_entity *ids;
  size_t n, cap;
} node_list;

static void collect(void *ud, scn_entity e, scn_entity parent, const char *name,
                    const float local[16]) {
  (void)parent, (void)name, (void)local;
  node_list *l = ud;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->ids = realloc(l->ids, sizeof *l->ids * l->cap);
  }
  l->ids[l->n++] = e;
}

static bool same_transform(scn_world *a, scn_world *b, scn_entity e) {
  scn_transform_info ia, ib;
  if (scn_transform_get(b, e, &ib) != SCN_OK)
    return differ("transform %llu is missing in the second", (unsigned long long)e);
  scn_transform_get(a, e, &ia);
  if (ia.parent != ib.parent || (ia.name == NULL) != (ib.name == NULL) ||
      (ia.name && strcmp(ia.name, ib.name) != 0))
    return differ("transform %llu: parent or name differs", (unsigned long long)e);
  if (memcmp(ia.local, ib.local, sizeof ia.local) != 0 ||
      memcmp(ia.world, ib.world, sizeof ia.world) != 0)
    return differ("transform %llu: a matrix differs in its bits", (unsigned long long)e);
  scn_entity ca[256], cb[256];
  size_t na, nb;
  scn_transform_children(a, e, ca, 256, &na);
  scn_transform_children(b, e, cb, 256, &nb);
  if (na != nb || memcmp(ca, cb, sizeof *ca * (na < 256 ? na : 256)) != 0)
    return differ("transform %llu: its children or their order differ", (unsigned long long)e);
  return true;
}

static bool same_worlds(scn_scene *a, scn_scene *b) {
  if (scn_world_count(a) != scn_world_count(b))
    return differ("world count: %zu first, %zu second", scn_world_count(a), scn_world_count(b));
  for (size_t i = 0; i < scn_world_count(a); i++) {
    scn_world *wa = scn_world_at(a, i), *wb = scn_world_find(b, scn_world_name(wa));
    if (!wb)
      return differ("world %s is missing in the second", scn_world_name(wa));
    if (scn_world_history(wa) != scn_world_history(wb) ||
        scn_world_transform_count(wa) != scn_world_transform_count(wb))
      return differ("world %s: history or transform count differs", scn_world_name(wa));
    node_list l = {0};
    scn_world_visit_transforms(wa, collect, &l);
    bool same = true;
    for (size_t k = 0; same && k < l.n; k++)
      same = same_transform(wa, wb, l.ids[k]);
    free(l.ids);
    if (!same)
      return false;
  }
  return true;
}

bool t_same_scene(scn_scene *a, scn_scene *b) {
  why[0] = '\0';
  return same_entities(a, b) && same_worlds(a, b);
}

const char *t_scene_difference(void) { return why; }

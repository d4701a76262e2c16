/* The global entity registry: ids are (generation << 32 | slot); a slot's generation moves on
 * when its entity is destroyed, so an old id never matches again. */
#include "core_internal.h"

#include <stdlib.h>
#include <string.h>

#define GEN_LIMIT (UINT32_C(1) << 21) /* keeps ids below 2^53 */
#define SLOT_LIMIT (UINT32_MAX - 1)

enum { SLOT_FREE = 0, SLOT_ALIVE = 1, SLOT_RETIRED = 2 };

static scn_entity make_id(uint32_t gen, uint32_t slot) { return ((uint64_t)gen << 32) | slot; }

static bool decode(const scn__entities *ents, scn_entity e, uint32_t *slot) {
  if (e == SCN_ENTITY_NONE || e > SCN_ENTITY_MAX)
    return false;
  uint32_t s = (uint32_t)e, gen = (uint32_t)(e >> 32);
  if (s == 0 || s > ents->slots || ents->state[s] != SLOT_ALIVE || ents->gen[s] != gen)
    return false;
  *slot = s;
  return true;
}

bool scn_entity_alive(const scn_scene *scene, scn_entity e) {
  uint32_t slot;
  return decode(&scene->ents, e, &slot);
}

size_t scn_entity_count(const scn_scene *scene) { return scene->ents.alive; }

static int reserve_slots(scn__entities *ents, uint64_t need) {
  if (need <= ents->cap)
    return SCN_OK;
  uint64_t cap = ents->cap ? ents->cap : 1024;
  while (cap < need)
    cap *= 2;
  if (cap > (uint64_t)SLOT_LIMIT + 1)
    cap = (uint64_t)SLOT_LIMIT + 1;
  uint32_t *gen = realloc(ents->gen, sizeof *gen * cap);
  if (!gen)
    return SCN_NOMEM;
  ents->gen = gen;
  uint8_t *state = realloc(ents->state, cap);
  if (!state)
    return SCN_NOMEM;
  ents->state = state;
  memset(ents->state + ents->cap, SLOT_FREE, cap - ents->cap);
  memset(ents->gen + ents->cap, 0, sizeof *gen * (cap - ents->cap));
  ents->cap = (uint32_t)cap;
  return SCN_OK;
}

int scn_entity_create(scn_scene *scene, size_t count, scn_entity *out) {
  scn__entities *ents = &scene->ents;
  if (count == 0)
    return SCN_OK;
  if (ents->alive + count > scene->limits.max_entities)
    return SCN_LIMIT;
  size_t reuse = ents->free_slots.len < count ? ents->free_slots.len : count;
  uint64_t fresh = count - reuse;
  if ((uint64_t)ents->slots + fresh > SLOT_LIMIT)
    return SCN_LIMIT;
  if (reserve_slots(ents, (uint64_t)ents->slots + fresh + 1) != SCN_OK)
    return SCN_NOMEM;
  if (scn__recording(scene) &&
      (scn__vec_reserve(&scene->undo, sizeof(scn__undo), scene->undo.len + count) != SCN_OK ||
       scn__vec_reserve(&ents->free_slots, sizeof(uint32_t), ents->free_slots.len + count) !=
           SCN_OK))
    return SCN_NOMEM;
  for (size_t k = 0; k < count; k++) {
    uint32_t slot = k < reuse ? SCN_VEC_AT(ents->free_slots, uint32_t, --ents->free_slots.len)
                              : ++ents->slots;
    ents->state[slot] = SLOT_ALIVE;
    out[k] = make_id(ents->gen[slot], slot);
    if (scn__recording(scene))
      scn__undo_push(scene, SCN_UNDO_ENTITY_CREATED, NULL, out[k]);
  }
  ents->alive += count;
  return SCN_OK;
}

/* Batch rollback: the id never escaped, so the slot goes back without a new generation. */
void scn__entity_uncreate(scn_scene *scene, scn_entity e) {
  scn__entities *ents = &scene->ents;
  uint32_t slot;
  if (!decode(ents, e, &slot))
    return;
  ents->state[slot] = SLOT_FREE;
  ents->alive--;
  if (slot == ents->slots)
    ents->slots--;
  else
    SCN_VEC_AT(ents->free_slots, uint32_t, ents->free_slots.len++) = slot;
}

int scn_entity_destroy(scn_scene *scene, scn_entity e) {
  scn__entities *ents = &scene->ents;
  uint32_t slot;
  if (scene->in_batch)
    return SCN_STATE;
  if (!decode(ents, e, &slot))
    return SCN_NOT_FOUND;
  if (scn__vec_reserve(&ents->free_slots, sizeof(uint32_t), ents->free_slots.len + 1) != SCN_OK)
    return SCN_NOMEM;
  for (size_t w = 0; w < scene->nworlds; w++) {
    int rc = scn__transform_destroy_check(scene->worlds[w], e);
    if (rc != SCN_OK && rc != SCN_NOT_FOUND)
      return rc;
  }
  for (size_t w = 0; w < scene->nworlds; w++)
    if (scn_transform_exists(scene->worlds[w], e))
      scn__transform_destroy(scene->worlds[w], e, false);
  ents->alive--;
  if (++ents->gen[slot] >= GEN_LIMIT) {
    ents->state[slot] = SLOT_RETIRED;
  } else {
    ents->state[slot] = SLOT_FREE;
    SCN_VEC_AT(ents->free_slots, uint32_t, ents->free_slots.len++) = slot;
  }
  return SCN_OK;
}

uint32_t scn_entity_slot_count(const scn_scene *scene) { return scene->ents.slots; }

scn_entity scn_entity_slot_id(const scn_scene *scene, uint32_t slot, bool *alive) {
  const scn__entities *ents = &scene->ents;
  if (slot == 0 || slot > ents->slots) {
    *alive = false;
    return SCN_ENTITY_NONE;
  }
  *alive = ents->state[slot] == SLOT_ALIVE;
  return make_id(ents->gen[slot], slot);
}

int scn_entity_restore(scn_scene *scene, uint32_t slot_count, const uint32_t *generations,
                       const uint8_t *alive) {
  scn__entities *ents = &scene->ents;
  if (ents->slots != 0 || scene->in_batch || slot_count > SLOT_LIMIT)
    return SCN_STATE;
  for (uint32_t s = 0; s < slot_count; s++)
    if (generations[s] >= GEN_LIMIT && alive[s])
      return SCN_INVALID;
  if (reserve_slots(ents, (uint64_t)slot_count + 1) != SCN_OK ||
      scn__vec_reserve(&ents->free_slots, sizeof(uint32_t), slot_count) != SCN_OK)
    return SCN_NOMEM;
  ents->slots = slot_count;
  ents->alive = 0;
  ents->free_slots.len = 0;
  /* Push free slots highest first so the lowest is reused first, as before the restart. */
  for (uint32_t s = slot_count; s >= 1; s--) {
    ents->gen[s] = generations[s - 1];
    if (alive[s - 1]) {
      ents->state[s] = SLOT_ALIVE;
      ents->alive++;
    } else if (generations[s - 1] >= GEN_LIMIT) {
      ents->state[s] = SLOT_RETIRED;
    } else {
      ents->state[s] = SLOT_FREE;
      SCN_VEC_AT(ents->free_slots, uint32_t, ents->free_slots.len++) = s;
    }
  }
  return SCN_OK;
}

size_t scn_entity_free_order(const scn_scene *scene, const uint32_t **slots) {
  *slots = scene->ents.free_slots.data;
  return scene->ents.free_slots.len;
}

int scn_entity_set_free_order(scn_scene *scene, const uint32_t *slots, size_t n) {
  scn__entities *ents = &scene->ents;
  if (n != ents->free_slots.len)
    return SCN_INVALID;
  for (size_t i = 0; i < n; i++)
    if (slots[i] == 0 || slots[i] > ents->slots || ents->state[slots[i]] != SLOT_FREE)
      return SCN_INVALID;
  memcpy(ents->free_slots.data, slots, sizeof *slots * n);
  return SCN_OK;
}

void scn__entities_free(scn__entities *ents) {
  free(ents->gen);
  free(ents->state);
  scn__vec_free(&ents->free_slots);
  memset(ents, 0, sizeof *ents);
}

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
  uint32_t *home = realloc(ents->home, sizeof *home * cap);
  if (!home)
    return SCN_NOMEM;
  ents->home = home;
  memset(ents->home + ents->cap, 0, sizeof *home * (cap - ents->cap));
  memset(ents->state + ents->cap, SLOT_FREE, cap - ents->cap);
  memset(ents->gen + ents->cap, 0, sizeof *gen * (cap - ents->cap));
  ents->cap = (uint32_t)cap;
  return SCN_OK;
}

static int record(scn__entities *ents, const scn_entity *ids, size_t n) {
  if (!ents->recording)
    return SCN_OK;
  if (scn__vec_reserve(&ents->recorded, sizeof(scn_entity), ents->recorded.len + n) != SCN_OK)
    return SCN_NOMEM;
  memcpy((scn_entity *)ents->recorded.data + ents->recorded.len, ids, sizeof *ids * n);
  ents->recorded.len += n;
  return SCN_OK;
}

static uint64_t ranged_left(const scn__entities *ents) {
  uint64_t n = 0;
  for (size_t i = 0; i < ents->ranges.len; i += 2)
    n += SCN_VEC_AT(ents->ranges, uint32_t, i + 1) - SCN_VEC_AT(ents->ranges, uint32_t, i);
  return n;
}

/* The next slot of the ranges (the oldest range first), or 0 when they are used up. Slots
 * that are not free (adopted from a replay) are passed over. */
static uint32_t next_ranged_slot(scn__entities *ents) {
  while (ents->ranges.len) {
    uint32_t *r = ents->ranges.data;
    while (r[0] < r[1]) {
      uint32_t slot = r[0]++;
      if (slot > ents->slots || ents->state[slot] == SLOT_FREE)
        return slot;
    }
    memmove(r, r + 2, sizeof *r * (ents->ranges.len - 2));
    ents->ranges.len -= 2;
  }
  return 0;
}

static bool id_valid(scn_entity id) {
  uint32_t slot = (uint32_t)id;
  return id != SCN_ENTITY_NONE && id <= SCN_ENTITY_MAX && slot != 0 && slot <= SLOT_LIMIT &&
         (id >> 32) < GEN_LIMIT;
}

/* Ranged mode: expected ids first (a replay), then the ranges; all or nothing. */
static int create_ranged(scn_scene *scene, size_t count, scn_entity *out) {
  scn__entities *ents = &scene->ents;
  size_t expected = ents->expect.len - ents->expect_head;
  if (expected > count)
    expected = count;
  if (count - expected > ranged_left(ents))
    return SCN_LIMIT;
  if (scn__recording(scene) &&
      scn__vec_reserve(&scene->undo, sizeof(scn__undo), scene->undo.len + count) != SCN_OK)
    return SCN_NOMEM;
  for (size_t k = 0; k < expected; k++) {
    scn_entity id = SCN_VEC_AT(ents->expect, scn_entity, ents->expect_head + k);
    uint32_t slot = (uint32_t)id;
    if (!id_valid(id))
      return SCN_INVALID;
    /* (a slot retired here comes back as the very id: see scn_entity_adopt) */
    if (slot <= ents->slots && ents->state[slot] != SLOT_FREE &&
        !(ents->state[slot] == SLOT_RETIRED && ents->gen[slot] == (uint32_t)(id >> 32)))
      return SCN_EXISTS;
  }
  if (expected &&
      scn__vec_reserve(&ents->revived, sizeof(scn_entity), ents->revived.len + expected) != SCN_OK)
    return SCN_NOMEM;
  size_t made = 0;
  for (; made < count; made++) {
    scn_entity id;
    uint32_t slot;
    if (made < expected) {
      id = SCN_VEC_AT(ents->expect, scn_entity, ents->expect_head + made);
      slot = (uint32_t)id;
    } else {
      slot = next_ranged_slot(ents);
      id = slot;
    }
    if (reserve_slots(ents, (uint64_t)slot + 1) != SCN_OK)
      break;
    if (slot > ents->slots)
      ents->slots = slot;
    bool retired = ents->state[slot] == SLOT_RETIRED;
    if (retired)
      SCN_VEC_AT(ents->revived, scn_entity, ents->revived.len++) = id;
    ents->gen[slot] = (uint32_t)(id >> 32);
    ents->state[slot] = SLOT_ALIVE;
    ents->home[slot] = ents->default_home;
    ents->alive++;
    out[made] = id;
    if (scn__recording(scene))
      scn__undo_push(scene, SCN_UNDO_ENTITY_CREATED, NULL, id)->was_retired = retired;
  }
  if (made < count) {
    while (made--)
      scn__entity_uncreate(scene, out[made], false, false);
    return SCN_NOMEM;
  }
  ents->expect_head += expected;
  if (ents->expect_head == ents->expect.len)
    ents->expect.len = ents->expect_head = 0;
  return record(ents, out, count);
}

/* Checks that every expected id can be made now, all of them together: its slot free (or
 * beyond the slots in use), its generation not older than the slot's, no slot twice. Slots
 * are marked while checked and unmarked before returning, so nothing changes. */
static int check_expected(scn__entities *ents, const scn_entity *ids, size_t n) {
  uint64_t top = ents->slots;
  for (size_t k = 0; k < n; k++) {
    if (!id_valid(ids[k]))
      return SCN_INVALID;
    if ((uint32_t)ids[k] > top)
      top = (uint32_t)ids[k];
  }
  if (reserve_slots(ents, top + 1) != SCN_OK)
    return SCN_NOMEM;
  int rc = SCN_OK;
  size_t k = 0;
  for (; k < n; k++) {
    uint32_t slot = (uint32_t)ids[k];
    if (ents->state[slot] != SLOT_FREE) {
      rc = SCN_EXISTS;
      break;
    }
    if (slot <= ents->slots && (uint32_t)(ids[k] >> 32) < ents->gen[slot]) {
      rc = SCN_INVALID; /* an id older than the slot: it was destroyed already */
      break;
    }
    ents->state[slot] = SLOT_ALIVE;
  }
  while (k--)
    ents->state[(uint32_t)ids[k]] = SLOT_FREE;
  if (rc == SCN_OK && scn__vec_reserve(&ents->free_slots, sizeof(uint32_t),
                                       ents->free_slots.len + (top - ents->slots) + n) != SCN_OK)
    rc = SCN_NOMEM;
  return rc;
}

/* Takes the slot of a checked expected id: out of the free list, or by growing the slots
 * (those passed over become free, reused after the ones already free). true when the slot
 * was the next fresh one, which an undo gives back by shrinking the count. */
static bool take_expected(scn__entities *ents, scn_entity id) {
  uint32_t slot = (uint32_t)id;
  bool fresh = slot == ents->slots + 1;
  if (slot > ents->slots) {
    uint32_t gap = slot - ents->slots - 1;
    uint32_t *fs = ents->free_slots.data;
    memmove(fs + gap, fs, sizeof *fs * ents->free_slots.len);
    for (uint32_t g = 0; g < gap; g++)
      fs[g] = slot - 1 - g; /* the lowest of them reused first */
    ents->free_slots.len += gap;
    ents->slots = slot;
  } else {
    uint32_t *fs = ents->free_slots.data;
    size_t i = ents->free_slots.len;
    while (i-- > 0 && fs[i] != slot) {
    }
    memmove(fs + i, fs + i + 1, sizeof *fs * (ents->free_slots.len - i - 1));
    ents->free_slots.len--;
  }
  ents->gen[slot] = (uint32_t)(id >> 32);
  ents->state[slot] = SLOT_ALIVE;
  ents->home[slot] = ents->default_home;
  return fresh;
}

int scn_entity_create(scn_scene *scene, size_t count, scn_entity *out) {
  scn__entities *ents = &scene->ents;
  if (count == 0)
    return SCN_OK;
  if (ents->alive + count > scene->limits.max_entities)
    return SCN_LIMIT;
  if (ents->ranged)
    return create_ranged(scene, count, out);
  size_t expected = ents->expect.len - ents->expect_head;
  if (expected > count)
    expected = count;
  /* (no pointer arithmetic on an empty log, whose data may be NULL) */
  const scn_entity *want =
      expected ? (const scn_entity *)ents->expect.data + ents->expect_head : NULL;
  int rc = expected ? check_expected(ents, want, expected) : SCN_OK;
  if (rc != SCN_OK)
    return rc;
  size_t rest = count - expected;
  size_t reuse = ents->free_slots.len < rest ? ents->free_slots.len : rest;
  uint64_t fresh = rest - reuse;
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
    bool fresh_slot;
    if (k < expected) {
      fresh_slot = take_expected(ents, want[k]);
      out[k] = want[k];
    } else {
      fresh_slot = ents->free_slots.len == 0;
      uint32_t slot = fresh_slot ? ++ents->slots
                                 : SCN_VEC_AT(ents->free_slots, uint32_t, --ents->free_slots.len);
      ents->state[slot] = SLOT_ALIVE;
      ents->home[slot] = ents->default_home;
      out[k] = make_id(ents->gen[slot], slot);
    }
    if (scn__recording(scene))
      scn__undo_push(scene, SCN_UNDO_ENTITY_CREATED, NULL, out[k])->fresh_slot = fresh_slot;
  }
  ents->alive += count;
  ents->expect_head += expected;
  if (ents->expect_head == ents->expect.len)
    ents->expect.len = ents->expect_head = 0;
  return record(ents, out, count);
}

/* Batch rollback: the id never escaped, so the slot goes back without a new generation. */
void scn__entity_uncreate(scn_scene *scene, scn_entity e, bool fresh_slot, bool was_retired) {
  scn__entities *ents = &scene->ents;
  uint32_t slot;
  if (!decode(ents, e, &slot))
    return;
  ents->state[slot] = was_retired ? SLOT_RETIRED : SLOT_FREE;
  ents->alive--;
  if (was_retired)
    return;
  if (ents->ranged) {
    /* The slot goes back to the front of its range when it was the range's last one. */
    if (ents->ranges.len && SCN_VEC_AT(ents->ranges, uint32_t, 0) == slot + 1)
      SCN_VEC_AT(ents->ranges, uint32_t, 0) = slot;
    return;
  }
  /* (A reused slot that is the highest one must go back to the free list, not shrink the
   * count: that would forget its generation, and a snapshot would bring its old id back.) */
  if (fresh_slot && slot == ents->slots)
    ents->slots--;
  else
    SCN_VEC_AT(ents->free_slots, uint32_t, ents->free_slots.len++) = slot;
}

/* The slot of an alive entity that has no transform left ends: retired, or free under a new
 * generation (room in free_slots reserved by the caller). */
static void retire(scn__entities *ents, uint32_t slot) {
  ents->alive--;
  if (ents->ranged) {
    ents->state[slot] = SLOT_RETIRED;
  } else if (++ents->gen[slot] >= GEN_LIMIT) {
    ents->state[slot] = SLOT_RETIRED;
  } else {
    ents->state[slot] = SLOT_FREE;
    SCN_VEC_AT(ents->free_slots, uint32_t, ents->free_slots.len++) = slot;
  }
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
  retire(ents, slot);
  return SCN_OK;
}

/* A slot no valid id has: marks the entities of a list while it is checked for repeats. */
#define SLOT_LISTED 3

int scn__entities_check(scn_scene *scene, const scn_entity *ids, size_t n, size_t *failed) {
  scn__entities *ents = &scene->ents;
  int rc = SCN_OK;
  size_t k = 0;
  uint32_t slot;
  for (; k < n; k++) {
    uint32_t s = (uint32_t)ids[k];
    if (ids[k] != SCN_ENTITY_NONE && ids[k] <= SCN_ENTITY_MAX && s >= 1 && s <= ents->slots &&
        ents->state[s] == SLOT_LISTED && ents->gen[s] == (uint32_t)(ids[k] >> 32)) {
      rc = SCN_INVALID; /* listed twice */
      break;
    }
    if (!decode(ents, ids[k], &slot)) {
      rc = SCN_NOT_FOUND;
      break;
    }
    ents->state[slot] = SLOT_LISTED;
  }
  *failed = k;
  for (size_t i = 0; i < k; i++)
    ents->state[(uint32_t)ids[i]] = SLOT_ALIVE;
  if (rc == SCN_OK &&
      scn__vec_reserve(&ents->free_slots, sizeof(uint32_t), ents->free_slots.len + n) != SCN_OK)
    rc = SCN_NOMEM;
  return rc;
}

void scn__entities_retire(scn_scene *scene, const scn_entity *ids, size_t n) {
  for (size_t i = 0; i < n; i++)
    retire(&scene->ents, (uint32_t)ids[i]);
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
  memset(ents->home, 0, sizeof *ents->home * ((size_t)slot_count + 1));
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

/* ---- ranged mode ------------------------------------------------------------------------ */

int scn_entity_use_ranges(scn_scene *scene) {
  scn__entities *ents = &scene->ents;
  if (ents->slots != 0 || scene->in_batch)
    return SCN_STATE;
  ents->ranged = true;
  return SCN_OK;
}

int scn_entity_add_slots(scn_scene *scene, uint32_t first, uint32_t count) {
  scn__entities *ents = &scene->ents;
  if (!ents->ranged)
    return SCN_STATE;
  if (first == 0 || count == 0 || (uint64_t)first + count - 1 > SLOT_LIMIT)
    return SCN_INVALID;
  if (scn__vec_reserve(&ents->ranges, sizeof(uint32_t), ents->ranges.len + 2) != SCN_OK)
    return SCN_NOMEM;
  SCN_VEC_AT(ents->ranges, uint32_t, ents->ranges.len++) = first;
  SCN_VEC_AT(ents->ranges, uint32_t, ents->ranges.len++) = first + count;
  return SCN_OK;
}

uint64_t scn_entity_slots_left(const scn_scene *scene) { return ranged_left(&scene->ents); }

int scn_entity_adopt(scn_scene *scene, scn_entity id) {
  scn__entities *ents = &scene->ents;
  uint32_t slot = (uint32_t)id, gen = (uint32_t)(id >> 32);
  if (!ents->ranged || scene->in_batch)
    return SCN_STATE;
  if (id == SCN_ENTITY_NONE || id > SCN_ENTITY_MAX || slot == 0 || slot > SLOT_LIMIT ||
      gen >= GEN_LIMIT)
    return SCN_INVALID;
  if (slot <= ents->slots && ents->state[slot] == SLOT_ALIVE)
    return ents->gen[slot] == gen ? SCN_OK : SCN_EXISTS;
  /* A slot retired here comes back only as the very id that was destroyed here: a group that
   * moved away and back lists it in an older snapshot, whose journal then destroys it again. */
  if (slot <= ents->slots && ents->state[slot] == SLOT_RETIRED && ents->gen[slot] != gen)
    return SCN_EXISTS;
  if (ents->alive + 1 > scene->limits.max_entities)
    return SCN_LIMIT;
  if (reserve_slots(ents, (uint64_t)slot + 1) != SCN_OK)
    return SCN_NOMEM;
  if (slot <= ents->slots && ents->state[slot] == SLOT_RETIRED) {
    if (scn__vec_reserve(&ents->revived, sizeof(scn_entity), ents->revived.len + 1) != SCN_OK)
      return SCN_NOMEM;
    SCN_VEC_AT(ents->revived, scn_entity, ents->revived.len++) = id;
  }
  if (slot > ents->slots)
    ents->slots = slot;
  ents->gen[slot] = gen;
  ents->state[slot] = SLOT_ALIVE;
  ents->home[slot] = ents->default_home;
  ents->alive++;
  return SCN_OK;
}

int scn_entity_forget(scn_scene *scene, scn_entity id) {
  scn__entities *ents = &scene->ents;
  uint32_t slot;
  if (!ents->ranged || scene->in_batch)
    return SCN_STATE;
  if (!decode(ents, id, &slot))
    return SCN_NOT_FOUND;
  for (size_t w = 0; w < scene->nworlds; w++)
    if (scn_transform_exists(scene->worlds[w], id))
      return SCN_STATE;
  ents->state[slot] = SLOT_FREE; /* not in any range: only an adoption brings it back */
  ents->alive--;
  return SCN_OK;
}

int scn_entity_expect(scn_scene *scene, const scn_entity *ids, size_t n) {
  scn__entities *ents = &scene->ents;
  ents->expect.len = ents->expect_head = 0;
  if (n == 0)
    return SCN_OK;
  if (scn__vec_reserve(&ents->expect, sizeof(scn_entity), n) != SCN_OK)
    return SCN_NOMEM;
  memcpy(ents->expect.data, ids, sizeof *ids * n);
  ents->expect.len = n;
  return SCN_OK;
}

void scn_entity_record(scn_scene *scene, bool on) { scene->ents.recording = on; }

size_t scn_entity_recorded(const scn_scene *scene, const scn_entity **ids) {
  *ids = scene->ents.recorded.data;
  return scene->ents.recorded.len;
}

void scn_entity_recorded_clear(scn_scene *scene) { scene->ents.recorded.len = 0; }

size_t scn_entity_revived(const scn_scene *scene, const scn_entity **ids) {
  *ids = scene->ents.revived.data;
  return scene->ents.revived.len;
}

void scn_entity_revived_clear(scn_scene *scene) { scene->ents.revived.len = 0; }

void scn_entity_home_default(scn_scene *scene, uint32_t home) { scene->ents.default_home = home; }

int scn_entity_set_home(scn_scene *scene, scn_entity e, uint32_t home) {
  uint32_t slot;
  if (!decode(&scene->ents, e, &slot))
    return SCN_NOT_FOUND;
  scene->ents.home[slot] = home;
  return SCN_OK;
}

uint32_t scn_entity_home(const scn_scene *scene, scn_entity e) {
  uint32_t slot;
  return decode(&scene->ents, e, &slot) ? scene->ents.home[slot] : 0;
}

void scn__entities_free(scn__entities *ents) {
  free(ents->home);
  free(ents->gen);
  free(ents->state);
  scn__vec_free(&ents->free_slots);
  scn__vec_free(&ents->ranges);
  scn__vec_free(&ents->expect);
  scn__vec_free(&ents->recorded);
  scn__vec_free(&ents->revived);
  memset(ents, 0, sizeof *ents);
}

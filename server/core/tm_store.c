/* Storage of one transform manager: the structure-of-arrays block, the entity and name hash
 * maps, sibling lists, and swap-erase that keeps every link intact. */
#include "core_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAP_MIN 64

/* The instance arrays, for growing and freeing them alike. */
#define TM_ARRAYS(X)                                                                               \
  X(entity)                                                                                        \
  X(local)                                                                                         \
  X(world)                                                                                         \
  X(parent) X(first_child) X(last_child) X(next) X(prev) X(subtree) X(name) X(changed) X(dirty)

/* Large arrays come straight from mmap: freed growth steps then go back to the system
 * instead of lingering in the heap, and page-aligned blocks suit aligned matrices. */
#define BIG_ARRAY (256u * 1024u)

void *scn__array_alloc(size_t bytes) {
  if (bytes < BIG_ARRAY)
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void scn__array_free(void *p, size_t bytes) {
  if (!p)
    return;
  if (bytes < BIG_ARRAY)
    free(p);
  else
    munmap(p, bytes);
}

/* ARRAY_entity, ARRAY_local, ...: each array's place in TM_ARRAYS, and their count. */
#define TM_INDEX(f) ARRAY_##f,
enum { TM_ARRAYS(TM_INDEX) ARRAY_COUNT };
#undef TM_INDEX

/* The instance arrays share one block, and in a big block each array starts a little past the
 * end of the one before. Arrays of equal power-of-two size would otherwise lie a power of two
 * apart, and the streams that propagation walks side by side (local[i], world[i], parent[i],
 * ...) would meet in the same cache sets and memory banks: on W1 of bench-core that cost
 * a tenth to a sixth of the propagation time. 17 cache lines part the page offsets; one huge
 * page more parts the higher address bits of the big arrays. The gaps are never touched, so
 * they cost address space only, not memory. */
#define HUGE_PAGE (2u << 20)
#define STAGGER_LINES (17u * 64u)

/* Fills offset[] and size[] (bytes) of each array in a block of cap instances; returns the
 * block size. */
static size_t block_layout(uint32_t cap, size_t offset[ARRAY_COUNT], size_t size[ARRAY_COUNT]) {
  const size_t item[] = {
#define TM_SIZE(f) sizeof(((scn__tm *)0)->f[0]),
      TM_ARRAYS(TM_SIZE)
#undef TM_SIZE
  };
  size_t at = 0, total = 0;
  for (size_t k = 0; k < ARRAY_COUNT; k++)
    total += size[k] = (size_t)cap * item[k];
  size_t stagger = 0;
  if (total >= BIG_ARRAY)
    stagger = STAGGER_LINES + (size[ARRAY_local] >= 8 * HUGE_PAGE ? HUGE_PAGE : 0);
  for (size_t k = 0; k < ARRAY_COUNT; k++) {
    at = k ? ((at + 63) & ~(size_t)63) + stagger : 0;
    offset[k] = at;
    at += size[k];
  }
  return at;
}

/* The arrays of a big world ask for huge pages: propagation streams through several side by
 * side, and with 4 KiB pages the matrices alone pay a TLB miss every 64 (W1 of bench-core:
 * about 7% faster). Only the whole 2 MiB pages inside each array are advised, and the rest of
 * the block is kept to small pages: under THP "always" a huge page at an array's end would
 * otherwise hold the untouched gap next to it (measured: 215 instead of 190 bytes per
 * transform). */
static void advise_huge_pages(char *block, size_t block_bytes, const size_t offset[ARRAY_COUNT],
                              const size_t size[ARRAY_COUNT]) {
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = HUGE_PAGE;
  /* advice only: a kernel without it runs the same, with small pages */
  (void)madvise(block, block_bytes, MADV_NOHUGEPAGE);
  for (size_t k = 0; k < ARRAY_COUNT; k++) {
    uintptr_t begin = ((uintptr_t)block + offset[k] + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)block + offset[k] + size[k]) & ~(huge - 1);
    if (end > begin)
      (void)madvise((void *)begin, end - begin, MADV_HUGEPAGE);
  }
#else
  (void)block, (void)block_bytes, (void)offset, (void)size;
#endif
}

static uint32_t *map_new(uint32_t cap) {
  uint32_t *m = scn__array_alloc(sizeof *m * cap);
  if (m)
    memset(m, 0xff, sizeof *m * cap);
  return m;
}

int scn__tm_init(scn__tm *tm) {
  memset(tm, 0, sizeof *tm);
  tm->first_root = tm->last_root = SCN_NIL;
  tm->emap = map_new(MAP_MIN);
  tm->nmap = map_new(MAP_MIN);
  if (!tm->emap || !tm->nmap) {
    scn__array_free(tm->emap, sizeof(uint32_t) * MAP_MIN);
    scn__array_free(tm->nmap, sizeof(uint32_t) * MAP_MIN);
    return SCN_NOMEM;
  }
  tm->emap_mask = tm->nmap_mask = MAP_MIN - 1;
  tm->sorted = true;
  tm->tick = 1;
  /* name slot 0 means "unnamed" */
  if (scn__vec_reserve(&tm->names, sizeof(scn__name), 16) != SCN_OK) {
    scn__tm_free(tm);
    return SCN_NOMEM;
  }
  tm->names.len = 1;
  return SCN_OK;
}

void scn__tm_free(scn__tm *tm) {
  scn__array_free(tm->block, tm->block_bytes);
  scn__array_free(tm->emap, sizeof(uint32_t) * (tm->emap_mask + 1));
  scn__array_free(tm->nmap, sizeof(uint32_t) * (tm->nmap_mask + 1));
  scn__vec_free(&tm->names);
  scn__vec_free(&tm->names_free);
  scn__vec_free(&tm->dirty_list);
  scn__vec_free(&tm->scratch);
  scn__vec_free(&tm->scratch_e);
  scn__vec_free(&tm->events);
  scn__vec_free(&tm->reverts);
  scn__hist_free(tm->hist);
  memset(tm, 0, sizeof *tm);
}

/* ---- hash maps ---------------------------------------------------------------------------- */

static scn_entity parent_entity(const scn__tm *tm, uint32_t i) {
  uint32_t p = tm->parent[i];
  return p == SCN_NIL ? SCN_ENTITY_NONE : tm->entity[p];
}

const char *scn__tm_name(const scn__tm *tm, uint32_t i) {
  uint32_t slot = tm->name[i];
  return slot ? SCN_VEC_AT(tm->names, scn__name, slot).text : NULL;
}

static uint64_t name_key(scn_entity parent, const char *name, size_t len) {
  return scn__hash_bytes(name, len, scn__hash64(parent));
}

static uint64_t name_key_of(const scn__tm *tm, uint32_t i) {
  const char *name = scn__tm_name(tm, i);
  return name_key(parent_entity(tm, i), name, strlen(name));
}

static uint64_t entity_key_of(const scn__tm *tm, uint32_t i) { return scn__hash64(tm->entity[i]); }

typedef uint64_t (*key_of_fn)(const scn__tm *tm, uint32_t i);

/* Linear probing; deletion shifts later entries back so no tombstones accumulate. */
static void map_insert(uint32_t *map, uint32_t mask, uint64_t key, uint32_t value) {
  uint32_t h = (uint32_t)key & mask;
  while (map[h] != SCN_NIL)
    h = (h + 1) & mask;
  map[h] = value;
}

static uint32_t map_slot_of(const scn__tm *tm, const uint32_t *map, uint32_t mask, uint64_t key,
                            uint32_t value) {
  uint32_t h = (uint32_t)key & mask;
  while (map[h] != value) {
    if (map[h] == SCN_NIL)
      abort(); /* the maps and the arrays disagree: a bug, never bad input */
    h = (h + 1) & mask;
  }
  (void)tm;
  return h;
}

static void map_delete(const scn__tm *tm, uint32_t *map, uint32_t mask, uint32_t slot,
                       key_of_fn key_of) {
  uint32_t i = slot, j = slot;
  for (;;) {
    j = (j + 1) & mask;
    if (map[j] == SCN_NIL)
      break;
    uint32_t home = (uint32_t)key_of(tm, map[j]) & mask;
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays)
      continue;
    map[i] = map[j];
    i = j;
  }
  map[i] = SCN_NIL;
}

static int map_grow(scn__tm *tm, uint32_t **map, uint32_t *mask, uint32_t count, key_of_fn key_of) {
  if ((uint64_t)(count + 1) * 4 <= (uint64_t)(*mask + 1) * 3)
    return SCN_OK;
  uint32_t cap = (*mask + 1) * 2;
  uint32_t *m = map_new(cap);
  if (!m)
    return SCN_NOMEM;
  for (uint32_t h = 0; h <= *mask; h++)
    if ((*map)[h] != SCN_NIL)
      map_insert(m, cap - 1, key_of(tm, (*map)[h]), (*map)[h]);
  scn__array_free(*map, sizeof(uint32_t) * (*mask + 1));
  *map = m;
  *mask = cap - 1;
  return SCN_OK;
}

uint32_t scn__tm_lookup(const scn__tm *tm, scn_entity e) {
  uint32_t h = (uint32_t)scn__hash64(e) & tm->emap_mask;
  for (;;) {
    uint32_t i = tm->emap[h];
    if (i == SCN_NIL || tm->entity[i] == e)
      return i;
    h = (h + 1) & tm->emap_mask;
  }
}

uint32_t scn__tm_lookup_name(const scn__tm *tm, scn_entity parent, const char *name, size_t len) {
  uint32_t h = (uint32_t)name_key(parent, name, len) & tm->nmap_mask;
  for (;;) {
    uint32_t i = tm->nmap[h];
    if (i == SCN_NIL)
      return SCN_NIL;
    const char *n = scn__tm_name(tm, i);
    if (parent_entity(tm, i) == parent && strncmp(n, name, len) == 0 && n[len] == '\0')
      return i;
    h = (h + 1) & tm->nmap_mask;
  }
}

static void nmap_remove(scn__tm *tm, uint32_t i) {
  if (!tm->name[i])
    return;
  uint32_t slot = map_slot_of(tm, tm->nmap, tm->nmap_mask, name_key_of(tm, i), i);
  map_delete(tm, tm->nmap, tm->nmap_mask, slot, name_key_of);
  tm->named--;
}

static void nmap_add(scn__tm *tm, uint32_t i) {
  if (!tm->name[i])
    return;
  map_insert(tm->nmap, tm->nmap_mask, name_key_of(tm, i), i);
  tm->named++;
}

void scn__tm_rebuild_maps(scn__tm *tm) {
  memset(tm->emap, 0xff, sizeof(uint32_t) * (tm->emap_mask + 1));
  memset(tm->nmap, 0xff, sizeof(uint32_t) * (tm->nmap_mask + 1));
  tm->named = 0;
  for (uint32_t i = 0; i < tm->n; i++) {
    map_insert(tm->emap, tm->emap_mask, entity_key_of(tm, i), i);
    nmap_add(tm, i);
  }
}

/* ---- arrays ------------------------------------------------------------------------------- */

int scn__tm_reserve(scn__tm *tm, uint32_t need) {
  if (need > tm->cap) {
    uint32_t cap = tm->cap ? tm->cap : 64;
    while (cap < need)
      cap *= 2;
    /* The new block is complete before the old one is touched, so failure changes nothing. */
    size_t offset[ARRAY_COUNT], size[ARRAY_COUNT];
    size_t bytes = block_layout(cap, offset, size);
    char *block = scn__array_alloc(bytes);
    if (!block)
      return SCN_NOMEM;
    if (bytes >= BIG_ARRAY) /* a block of its own, from mmap */
      advise_huge_pages(block, bytes, offset, size);
    size_t k = 0;
#define TM_MOVE(f)                                                                                 \
  if (tm->f)                                                                                       \
    memcpy(block + offset[k], tm->f, (size_t)tm->cap * sizeof *tm->f);                             \
  tm->f = (void *)(block + offset[k++]);
    TM_ARRAYS(TM_MOVE)
#undef TM_MOVE
    scn__array_free(tm->block, tm->block_bytes);
    tm->block = block;
    tm->block_bytes = bytes;
    tm->cap = cap;
  }
  if (scn__hist_reserve(tm, tm->cap) != SCN_OK)
    return SCN_NOMEM;
  if (map_grow(tm, &tm->emap, &tm->emap_mask, need, entity_key_of) != SCN_OK)
    return SCN_NOMEM;
  if (map_grow(tm, &tm->nmap, &tm->nmap_mask, tm->named + 1, name_key_of) != SCN_OK)
    return SCN_NOMEM;
  if (scn__vec_reserve(&tm->dirty_list, sizeof(uint32_t), need) != SCN_OK)
    return SCN_NOMEM;
  return SCN_OK;
}

/* ---- sibling lists ------------------------------------------------------------------------ */

static void list_insert(scn__tm *tm, uint32_t i, uint32_t parent, uint32_t before) {
  uint32_t *first = parent == SCN_NIL ? &tm->first_root : &tm->first_child[parent];
  uint32_t *last = parent == SCN_NIL ? &tm->last_root : &tm->last_child[parent];
  tm->parent[i] = parent;
  if (before == SCN_NIL) {
    tm->prev[i] = *last;
    tm->next[i] = SCN_NIL;
    if (*last != SCN_NIL)
      tm->next[*last] = i;
    else
      *first = i;
    *last = i;
  } else {
    tm->prev[i] = tm->prev[before];
    tm->next[i] = before;
    if (tm->prev[before] != SCN_NIL)
      tm->next[tm->prev[before]] = i;
    else
      *first = i;
    tm->prev[before] = i;
  }
}

static void list_remove(scn__tm *tm, uint32_t i) {
  uint32_t parent = tm->parent[i];
  uint32_t *first = parent == SCN_NIL ? &tm->first_root : &tm->first_child[parent];
  uint32_t *last = parent == SCN_NIL ? &tm->last_root : &tm->last_child[parent];
  if (tm->prev[i] != SCN_NIL)
    tm->next[tm->prev[i]] = tm->next[i];
  else
    *first = tm->next[i];
  if (tm->next[i] != SCN_NIL)
    tm->prev[tm->next[i]] = tm->prev[i];
  else
    *last = tm->prev[i];
  tm->prev[i] = tm->next[i] = SCN_NIL;
}

/* ---- names -------------------------------------------------------------------------------- */

static void name_free(scn__tm *tm, uint32_t i) {
  uint32_t slot = tm->name[i];
  if (!slot)
    return;
  SCN_VEC_AT(tm->names_free, uint32_t, tm->names_free.len++) = slot;
  tm->name[i] = 0;
}

/* Reserves room so assigning a name cannot fail half-way. */
static int name_reserve(scn__tm *tm) {
  if (scn__vec_reserve(&tm->names, sizeof(scn__name), tm->names.len + 1) != SCN_OK ||
      scn__vec_reserve(&tm->names_free, sizeof(uint32_t), tm->names.len + 1) != SCN_OK)
    return SCN_NOMEM;
  return map_grow(tm, &tm->nmap, &tm->nmap_mask, tm->named + 1, name_key_of);
}

static void name_assign(scn__tm *tm, uint32_t i, const char *name) {
  uint32_t slot = tm->names_free.len ? SCN_VEC_AT(tm->names_free, uint32_t, --tm->names_free.len)
                                     : (uint32_t)tm->names.len++;
  size_t len = strlen(name);
  memcpy(SCN_VEC_AT(tm->names, scn__name, slot).text, name, len + 1);
  tm->name[i] = slot;
}

int scn__tm_set_name(scn__tm *tm, uint32_t i, const char *name) {
  if (name && name_reserve(tm) != SCN_OK)
    return SCN_NOMEM;
  if (tm->hist)
    scn__hist_struct(tm, i);
  nmap_remove(tm, i);
  name_free(tm, i);
  if (name) {
    name_assign(tm, i, name);
    nmap_add(tm, i);
  }
  return SCN_OK;
}

/* ---- instances ---------------------------------------------------------------------------- */

void scn__tm_mark_dirty(scn__tm *tm, uint32_t i) {
  if (tm->dirty[i])
    return;
  tm->dirty[i] = 1;
  SCN_VEC_AT(tm->dirty_list, uint32_t, tm->dirty_list.len++) = i;
}

static void note_unsorted(scn__tm *tm) {
  tm->sorted = false;
  tm->unsorted_changes++;
}

int scn__tm_insert(scn__tm *tm, scn_entity e, uint32_t parent, uint32_t before, const char *name,
                   mat4 local, mat4 world, uint32_t changed, uint32_t *out) {
  if (scn__tm_reserve(tm, tm->n + 1) != SCN_OK || (name && name_reserve(tm) != SCN_OK))
    return SCN_NOMEM;
  uint32_t i = tm->n++;
  tm->entity[i] = e;
  glm_mat4_copy(local, tm->local[i]);
  if (world)
    glm_mat4_copy(world, tm->world[i]);
  else
    glm_mat4_zero(tm->world[i]);
  tm->first_child[i] = tm->last_child[i] = SCN_NIL;
  tm->subtree[i] = 1;
  tm->name[i] = 0;
  tm->changed[i] = world ? changed : scn__tm_stamp(tm);
  tm->dirty[i] = 0;
  list_insert(tm, i, parent, before);
  map_insert(tm->emap, tm->emap_mask, entity_key_of(tm, i), i);
  if (name) {
    name_assign(tm, i, name);
    nmap_add(tm, i);
  }
  /* Appending at the end of the last subtree keeps depth-first order. */
  bool keeps_order =
      tm->sorted && before == SCN_NIL && (parent == SCN_NIL || parent + tm->subtree[parent] == i);
  if (!keeps_order)
    note_unsorted(tm);
  else
    for (uint32_t a = parent; a != SCN_NIL; a = tm->parent[a])
      tm->subtree[a]++;
  if (!world)
    scn__tm_mark_dirty(tm, i);
  if (tm->hist)
    scn__hist_inserted(tm, i);
  *out = i;
  return SCN_OK;
}

static void replace_in_dirty_list(scn__tm *tm, uint32_t from, uint32_t to) {
  uint32_t *d = tm->dirty_list.data;
  for (size_t k = 0; k < tm->dirty_list.len; k++)
    if (d[k] == from) {
      d[k] = to;
      return;
    }
}

static void drop_from_dirty_list(scn__tm *tm, uint32_t i) {
  uint32_t *d = tm->dirty_list.data;
  for (size_t k = 0; k < tm->dirty_list.len; k++)
    if (d[k] == i) {
      d[k] = d[--tm->dirty_list.len];
      return;
    }
}

/* Moves instance src into slot dst (which is free), rewriting every reference to src. */
static void relocate(scn__tm *tm, uint32_t src, uint32_t dst) {
  uint32_t eslot = map_slot_of(tm, tm->emap, tm->emap_mask, entity_key_of(tm, src), src);
  tm->emap[eslot] = dst;
  if (tm->name[src]) {
    uint32_t nslot = map_slot_of(tm, tm->nmap, tm->nmap_mask, name_key_of(tm, src), src);
    tm->nmap[nslot] = dst;
  }
  uint32_t p = tm->parent[src];
  if (p != SCN_NIL) {
    if (tm->first_child[p] == src)
      tm->first_child[p] = dst;
    if (tm->last_child[p] == src)
      tm->last_child[p] = dst;
  } else {
    if (tm->first_root == src)
      tm->first_root = dst;
    if (tm->last_root == src)
      tm->last_root = dst;
  }
  if (tm->prev[src] != SCN_NIL)
    tm->next[tm->prev[src]] = dst;
  if (tm->next[src] != SCN_NIL)
    tm->prev[tm->next[src]] = dst;
  for (uint32_t c = tm->first_child[src]; c != SCN_NIL; c = tm->next[c])
    tm->parent[c] = dst;
  if (tm->dirty[src])
    replace_in_dirty_list(tm, src, dst);

  tm->entity[dst] = tm->entity[src];
  glm_mat4_copy(tm->local[src], tm->local[dst]);
  glm_mat4_copy(tm->world[src], tm->world[dst]);
  tm->parent[dst] = tm->parent[src];
  tm->first_child[dst] = tm->first_child[src];
  tm->last_child[dst] = tm->last_child[src];
  tm->next[dst] = tm->next[src];
  tm->prev[dst] = tm->prev[src];
  tm->subtree[dst] = tm->subtree[src];
  tm->name[dst] = tm->name[src];
  tm->changed[dst] = tm->changed[src];
  tm->dirty[dst] = tm->dirty[src];
  if (tm->hist) {
    tm->hist->heads[dst] = tm->hist->heads[src];
    glm_mat4_copy(tm->hist->shadow[src], tm->hist->shadow[dst]);
  }
}

void scn__tm_remove_leaf(scn__tm *tm, uint32_t i) {
  if (tm->hist)
    scn__hist_removing(tm, i);
  tm->removed_in_tick = true;
  uint32_t eslot = map_slot_of(tm, tm->emap, tm->emap_mask, entity_key_of(tm, i), i);
  map_delete(tm, tm->emap, tm->emap_mask, eslot, entity_key_of);
  nmap_remove(tm, i);
  name_free(tm, i);
  if (tm->dirty[i])
    drop_from_dirty_list(tm, i);
  uint32_t parent = tm->parent[i];
  list_remove(tm, i);
  uint32_t last = tm->n - 1;
  if (i != last) {
    relocate(tm, last, i);
    note_unsorted(tm);
  } else if (tm->sorted) {
    for (uint32_t a = parent; a != SCN_NIL; a = tm->parent[a])
      tm->subtree[a]--;
  }
  tm->n--;
}

void scn__tm_move(scn__tm *tm, uint32_t i, uint32_t parent, uint32_t before) {
  if (tm->hist)
    scn__hist_struct(tm, i);
  nmap_remove(tm, i);
  list_remove(tm, i);
  list_insert(tm, i, parent, before);
  nmap_add(tm, i);
  note_unsorted(tm);
}

void scn__tm_log_event(scn__tm *tm, scn_entity e, scn_event_kind kind) {
  if (!tm->keep_events)
    return;
  if (scn__vec_reserve(&tm->events, sizeof(scn__event), tm->events.len + 1) != SCN_OK) {
    /* Without room the log can no longer vouch for older ticks: subscribers resync. */
    tm->events_head = tm->events.len;
    tm->events_since = tm->tick;
    return;
  }
  scn__event *ev = &SCN_VEC_AT(tm->events, scn__event, tm->events.len++);
  ev->tick = tm->tick;
  ev->entity = e;
  ev->kind = kind;
}

/* The spatial index: a uniform grid of cells over the translations of a world's world
 * matrices, kept in step with the world once per tick from the change stamps and the event
 * log, so its upkeep costs what changed (plus one pass over the stamps). */
#include "space.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

scn_space *scn_space_new(scn_world *w) {
  scn_space *sp = calloc(1, sizeof *sp);
  if (sp)
    sp->w = w;
  return sp;
}

static void release(scn_space *sp) {
  for (uint32_t c = 0; c < sp->ncells; c++)
    free(sp->cells[c].entries);
  free(sp->cells);
  free(sp->items);
  free(sp->free_items);
  scn__idmap_free(&sp->by_entity);
  scn__idmap_free(&sp->by_key);
  scn_world *w = sp->w;
  uint64_t rebuilds = sp->rebuilds;
  memset(sp, 0, sizeof *sp);
  sp->w = w;
  sp->rebuilds = rebuilds;
}

void scn_space_free(scn_space *sp) {
  if (!sp)
    return;
  release(sp);
  free(sp);
}

int32_t scn__space_key(const scn_space *sp, double x) {
  double k = floor(x * sp->inv);
  if (!(k > -SCN_SPACE_KEY_MAX))
    return -SCN_SPACE_KEY_MAX;
  if (k > SCN_SPACE_KEY_MAX)
    return SCN_SPACE_KEY_MAX;
  return (int32_t)k;
}

uint64_t scn__space_pack(const int32_t k[3]) {
  const uint64_t bits = UINT64_C(0x1FFFFF); /* 21 bits each: keys are within +-(2^20 - 1) */
  return (((uint64_t)(uint32_t)k[0] & bits) << 42) | (((uint64_t)(uint32_t)k[1] & bits) << 21) |
         ((uint64_t)(uint32_t)k[2] & bits);
}

const float *scn__space_world_matrix(scn_space *sp, scn_entity e) {
  scn__tm *tm = &sp->w->tm;
  uint32_t i = scn__tm_lookup(tm, e);
  return i == SCN_NIL ? NULL : tm->world[i][0];
}

/* The cell at key k, made when missing; SCN_NIL when out of memory. */
static uint32_t cell_at(scn_space *sp, const int32_t k[3]) {
  uint64_t packed = scn__space_pack(k);
  uint32_t c = scn__idmap_get(&sp->by_key, packed);
  if (c != SCN_NIL)
    return c;
  size_t cap = sp->cells_cap;
  scn__space_cell *cells = scn_array_grow(sp->cells, &cap, sizeof *cells, sp->ncells + 1);
  if (!cells)
    return SCN_NIL;
  sp->cells = cells;
  sp->cells_cap = (uint32_t)cap;
  if (scn__idmap_put(&sp->by_key, packed, sp->ncells) != SCN_OK)
    return SCN_NIL;
  c = sp->ncells++;
  memset(&cells[c], 0, sizeof cells[c]);
  memcpy(cells[c].key, k, sizeof cells[c].key);
  for (int a = 0; a < 3; a++) {
    if (sp->ncells == 1 || k[a] < sp->lo[a])
      sp->lo[a] = k[a];
    if (sp->ncells == 1 || k[a] > sp->hi[a])
      sp->hi[a] = k[a];
  }
  return c;
}

static void cell_remove(scn_space *sp, uint32_t item) {
  scn__space_item *it = &sp->items[item];
  scn__space_cell *cell = &sp->cells[it->cell];
  uint32_t last = --cell->n;
  if (it->slot != last) {
    cell->entries[it->slot] = cell->entries[last];
    sp->items[cell->entries[it->slot].item].slot = it->slot;
  }
}

static int cell_add(scn_space *sp, uint32_t item, const float p[3]) {
  int32_t k[3] = {scn__space_key(sp, p[0]), scn__space_key(sp, p[1]), scn__space_key(sp, p[2])};
  uint32_t c = cell_at(sp, k);
  if (c == SCN_NIL)
    return SCN_NOMEM;
  scn__space_cell *cell = &sp->cells[c];
  if (cell->n == cell->cap) {
    size_t cap = cell->cap;
    scn__space_entry *e = scn_array_grow(cell->entries, &cap, sizeof *e, cell->n + 1);
    if (!e)
      return SCN_NOMEM;
    sp->entries_bytes += (cap - cell->cap) * sizeof *e;
    cell->entries = e;
    cell->cap = (uint32_t)cap;
  }
  scn__space_entry *en = &cell->entries[cell->n];
  memcpy(en->p, p, sizeof en->p);
  en->item = item;
  sp->items[item].cell = c;
  sp->items[item].slot = cell->n++;
  return SCN_OK;
}

/* e is at p since tick changed: a new item, or one moved (within its cell or to another). */
static int upsert(scn_space *sp, scn_entity e, const float p[3], uint64_t changed) {
  uint32_t item = scn__idmap_get(&sp->by_entity, e);
  if (item != SCN_NIL) {
    scn__space_item *it = &sp->items[item];
    it->changed = changed;
    scn__space_cell *cell = &sp->cells[it->cell];
    int32_t k[3] = {scn__space_key(sp, p[0]), scn__space_key(sp, p[1]), scn__space_key(sp, p[2])};
    if (memcmp(k, cell->key, sizeof k) == 0) {
      memcpy(cell->entries[it->slot].p, p, sizeof cell->entries[0].p);
      return SCN_OK;
    }
    cell_remove(sp, item);
    return cell_add(sp, item, p);
  }
  if (sp->nfree) {
    item = sp->free_items[--sp->nfree];
  } else {
    size_t cap = sp->items_cap;
    scn__space_item *items = scn_array_grow(sp->items, &cap, sizeof *items, sp->nitems + 1);
    if (!items)
      return SCN_NOMEM;
    sp->items = items;
    sp->items_cap = (uint32_t)cap;
    item = sp->nitems++;
  }
  if (scn__idmap_put(&sp->by_entity, e, item) != SCN_OK)
    return SCN_NOMEM;
  sp->items[item] = (scn__space_item){.entity = e, .changed = changed};
  return cell_add(sp, item, p);
}

static int remove_entity(scn_space *sp, scn_entity e) {
  uint32_t item = scn__idmap_get(&sp->by_entity, e);
  if (item == SCN_NIL)
    return SCN_OK;
  cell_remove(sp, item);
  scn__idmap_del(&sp->by_entity, e);
  sp->items[item].entity = 0;
  size_t cap = sp->free_cap;
  uint32_t *fr = scn_array_grow(sp->free_items, &cap, sizeof *fr, sp->nfree + 1);
  if (!fr)
    return SCN_NOMEM;
  sp->free_items = fr;
  sp->free_cap = (uint32_t)cap;
  sp->free_items[sp->nfree++] = item;
  return SCN_OK;
}

/* Every instance whose world matrix changed after tick since (0: all of them). */
static int add_changed(scn_space *sp, uint64_t since) {
  const scn__tm *tm = &sp->w->tm;
  for (uint32_t i = 0; i < tm->n; i++) {
    uint64_t tick = tm->stamp_base + tm->changed[i];
    if (tick > since && upsert(sp, tm->entity[i], tm->world[i][3], tick) != SCN_OK)
      return SCN_NOMEM;
  }
  return SCN_OK;
}

typedef struct removal {
  scn_space *sp;
  int rc;
} removal;

static void remove_destroyed(void *ud, scn_entity e, scn_event_kind kind) {
  removal *r = ud;
  if (kind == SCN_EVENT_DESTROYED && !scn_transform_exists(r->sp->w, e) && r->rc == SCN_OK)
    r->rc = remove_entity(r->sp, e);
}

static bool cell_size_off(const scn_space *sp, double cell) {
  return sp->cell == 0 || cell > sp->cell * 2 || cell < sp->cell / 2;
}

int scn_space_sync(scn_space *sp, double cell) {
  scn_world *w = sp->w;
  uint64_t closed = w->tm.tick - 1;
  if (!(cell > 0) || !isfinite(cell))
    cell = 1;
  /* Empty cells stay until a rebuild; that many of them is a world that wandered off. */
  bool litter = sp->ncells > 1024 && sp->ncells > 4 * (sp->nitems - sp->nfree);
  bool rebuild = sp->synced == 0 || cell_size_off(sp, cell) || litter ||
                 scn_world_events_since(w) > sp->synced;
  int rc;
  if (rebuild) {
    release(sp);
    sp->rebuilds++;
    sp->cell = cell;
    sp->inv = 1 / cell;
    rc = add_changed(sp, 0);
  } else {
    rc = add_changed(sp, sp->synced);
    removal r = {sp, rc};
    if (rc == SCN_OK)
      scn_world_visit_events(w, sp->synced, remove_destroyed, &r);
    rc = r.rc;
  }
  if (rc != SCN_OK) {
    release(sp); /* rebuilt at the next sync */
    return rc;
  }
  sp->synced = closed;
  return SCN_OK;
}

bool scn_space_position(const scn_space *sp, scn_entity e, double out[3]) {
  uint32_t item = scn__idmap_get(&sp->by_entity, e);
  if (item == SCN_NIL)
    return false;
  const scn__space_item *it = &sp->items[item];
  const float *p = sp->cells[it->cell].entries[it->slot].p;
  for (int a = 0; a < 3; a++)
    out[a] = p[a];
  return true;
}

size_t scn_space_count(const scn_space *sp) { return sp->by_entity.count; }

size_t scn_space_bytes(const scn_space *sp) {
  return sizeof *sp + (size_t)sp->items_cap * sizeof *sp->items +
         (size_t)sp->free_cap * sizeof *sp->free_items + (size_t)sp->cells_cap * sizeof *sp->cells +
         sp->entries_bytes + scn__idmap_bytes(&sp->by_entity) + scn__idmap_bytes(&sp->by_key);
}

uint64_t scn_space_rebuilds(const scn_space *sp) { return sp->rebuilds; }

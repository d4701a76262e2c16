/* The spatial index: a uniform grid of cells over the translations of a world's world
 * matrices, kept in step with the world once per tick from the change stamps and the event
 * log. Each entry also keeps where it was one sync before, and each cell what left it, so a
 * region evaluated at every tick can look at what moved and at its own edges only. */
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
  for (uint32_t c = 0; c < sp->ncells; c++) {
    free(sp->cells[c].entries);
    free(sp->cells[c].left);
  }
  free(sp->cells);
  free(sp->items);
  free(sp->free_items);
  scn__idmap_free(&sp->by_entity);
  scn__idmap_free(&sp->by_key);
  scn__vec_free(&sp->touched);
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

const float *scn__space_matrix(scn_space *sp, const scn__space_entry *en) {
  scn__tm *tm = &sp->w->tm;
  uint32_t i = en->inst;
  if (i >= tm->n || tm->entity[i] != en->entity)
    i = scn__tm_lookup(tm, en->entity); /* the arrays were re-sorted since */
  return i == SCN_NIL ? NULL : tm->world[i][0];
}

scn__space_entry *scn__space_find(const scn_space *sp, scn_entity e) {
  uint32_t item = scn__idmap_get(&sp->by_entity, e);
  if (item == SCN_NIL)
    return NULL;
  const scn__space_item *it = &sp->items[item];
  return &sp->cells[it->cell].entries[it->slot];
}

static int push_u32(scn__vec *v, uint32_t x) {
  if (scn__vec_reserve(v, sizeof x, v->len + 1) != SCN_OK)
    return SCN_NOMEM;
  SCN_VEC_AT(*v, uint32_t, v->len++) = x;
  return SCN_OK;
}

/* The cell at key k, made when missing; SCN_NIL when out of memory. */
static uint32_t cell_at(scn_space *sp, const int32_t k[3]) {
  uint64_t packed = scn__space_pack(k);
  uint32_t c = scn__idmap_get(&sp->by_key, packed);
  if (c != SCN_NIL)
    return c;
  void *grown = scn__grow32(sp->cells, &sp->cells_cap, sizeof *sp->cells, sp->ncells + 1);
  if (!grown)
    return SCN_NIL;
  sp->cells = grown;
  scn__space_cell *cells = sp->cells;
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

/* The cell changed at this sync: remembered, to be set back at the next. */
static int touch(scn_space *sp, uint32_t c) {
  scn__space_cell *cell = &sp->cells[c];
  if (cell->touched == sp->synced)
    return SCN_OK;
  cell->touched = sp->synced;
  return push_u32(&sp->touched, c);
}

/* A record that entity left cell c from q (for regions that held it). */
static int note_left(scn_space *sp, uint32_t c, scn_entity e, const float q[3]) {
  if (touch(sp, c) != SCN_OK)
    return SCN_NOMEM;
  scn__space_cell *cell = &sp->cells[c];
  void *grown = scn__grow32(cell->left, &cell->left_cap, sizeof *cell->left, cell->nleft + 1);
  if (!grown)
    return SCN_NOMEM;
  cell->left = grown;
  scn__space_left *l = &cell->left[cell->nleft++];
  l->entity = e;
  memcpy(l->q, q, sizeof l->q);
  return SCN_OK;
}

/* Moves the entry at slot a of cell to slot b, keeping its item in step. */
static void place(scn_space *sp, scn__space_cell *cell, uint32_t a, uint32_t b) {
  cell->entries[b] = cell->entries[a];
  sp->items[cell->entries[b].item].slot = b;
}

static void swap_slots(scn_space *sp, scn__space_cell *cell, uint32_t a, uint32_t b) {
  if (a == b)
    return;
  scn__space_entry t = cell->entries[a];
  place(sp, cell, b, a);
  cell->entries[b] = t;
  sp->items[t.item].slot = b;
}

/* Takes item's entry out of its cell into *out, keeping the moved entries first. */
static void cell_take(scn_space *sp, uint32_t item, scn__space_entry *out) {
  scn__space_item *it = &sp->items[item];
  scn__space_cell *cell = &sp->cells[it->cell];
  uint32_t slot = it->slot;
  *out = cell->entries[slot];
  if (slot < cell->moved) { /* the last moved entry fills the hole; the hole moves back */
    uint32_t last_moved = --cell->moved;
    if (slot != last_moved)
      place(sp, cell, last_moved, slot);
    slot = last_moved;
  }
  uint32_t last = --cell->n;
  if (slot != last)
    place(sp, cell, last, slot);
}

/* Puts en in the cell of its position, among the moved entries. */
static int cell_put(scn_space *sp, const scn__space_entry *en) {
  int32_t k[3] = {scn__space_key(sp, en->p[0]), scn__space_key(sp, en->p[1]),
                  scn__space_key(sp, en->p[2])};
  uint32_t c = cell_at(sp, k);
  if (c == SCN_NIL || touch(sp, c) != SCN_OK)
    return SCN_NOMEM;
  scn__space_cell *cell = &sp->cells[c];
  uint32_t had = cell->cap;
  void *grown = scn__grow32(cell->entries, &cell->cap, sizeof *cell->entries, cell->n + 1);
  if (!grown)
    return SCN_NOMEM;
  cell->entries = grown;
  sp->entries_bytes += (size_t)(cell->cap - had) * sizeof *cell->entries;
  cell->entries[cell->n] = *en;
  sp->items[en->item].cell = c;
  sp->items[en->item].slot = cell->n++;
  swap_slots(sp, cell, cell->n - 1, cell->moved++);
  return SCN_OK;
}

static uint32_t new_item(scn_space *sp) {
  if (sp->nfree)
    return sp->free_items[--sp->nfree];
  void *grown = scn__grow32(sp->items, &sp->items_cap, sizeof *sp->items, sp->nitems + 1);
  if (!grown)
    return SCN_NIL;
  sp->items = grown;
  return sp->nitems++;
}

/* Instance i of the world (entity e at p) changed at tick changed: a new item, or one moved
 * (within its cell or to another). */
static int upsert(scn_space *sp, uint32_t i, scn_entity e, const float p[3], uint64_t changed) {
  uint32_t item = scn__idmap_get(&sp->by_entity, e);
  if (item == SCN_NIL) {
    if ((item = new_item(sp)) == SCN_NIL || scn__idmap_put(&sp->by_entity, e, item) != SCN_OK)
      return SCN_NOMEM;
    scn__space_entry en = {.item = item, .fresh = 1, .inst = i, .entity = e, .changed = changed};
    memcpy(en.p, p, sizeof en.p);
    memcpy(en.q, p, sizeof en.q);
    return cell_put(sp, &en);
  }
  scn__space_item *it = &sp->items[item];
  scn__space_cell *cell = &sp->cells[it->cell];
  scn__space_entry *en = &cell->entries[it->slot];
  en->changed = changed;
  en->inst = i;
  int32_t k[3] = {scn__space_key(sp, p[0]), scn__space_key(sp, p[1]), scn__space_key(sp, p[2])};
  if (memcmp(k, cell->key, sizeof k) == 0) {
    memcpy(en->p, p, sizeof en->p);
    if (touch(sp, it->cell) != SCN_OK)
      return SCN_NOMEM;
    if (it->slot >= cell->moved)
      swap_slots(sp, cell, it->slot, cell->moved++);
    return SCN_OK;
  }
  if (note_left(sp, it->cell, e, en->q) != SCN_OK)
    return SCN_NOMEM;
  scn__space_entry moved;
  cell_take(sp, item, &moved);
  memcpy(moved.p, p, sizeof moved.p);
  return cell_put(sp, &moved);
}

static int remove_entity(scn_space *sp, scn_entity e) {
  uint32_t item = scn__idmap_get(&sp->by_entity, e);
  if (item == SCN_NIL)
    return SCN_OK;
  scn__space_entry gone;
  uint32_t c = sp->items[item].cell;
  cell_take(sp, item, &gone);
  sp->items[item].cell = SCN_NIL;
  scn__idmap_del(&sp->by_entity, e);
  void *grown = scn__grow32(sp->free_items, &sp->free_cap, sizeof *sp->free_items, sp->nfree + 1);
  if (!grown)
    return SCN_NOMEM;
  sp->free_items = grown;
  sp->free_items[sp->nfree++] = item;
  return note_left(sp, c, e, gone.q);
}

/* Every instance whose world matrix changed after tick since (0: all of them). */
static int add_changed(scn_space *sp, uint64_t since) {
  const scn__tm *tm = &sp->w->tm;
  for (uint32_t i = 0; i < tm->n; i++) {
    uint64_t tick = tm->stamp_base + tm->changed[i];
    if (tick > since && upsert(sp, i, tm->entity[i], tm->world[i][3], tick) != SCN_OK)
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

/* What the last sync noted (where entries were before it, what moved, what left) is
 * forgotten. */
static void forget_last_sync(scn_space *sp) {
  for (size_t k = 0; k < sp->touched.len; k++) {
    scn__space_cell *cell = &sp->cells[SCN_VEC_AT(sp->touched, uint32_t, k)];
    for (uint32_t j = 0; j < cell->moved; j++) {
      memcpy(cell->entries[j].q, cell->entries[j].p, sizeof cell->entries[j].q);
      cell->entries[j].fresh = 0;
    }
    cell->moved = cell->nleft = 0;
  }
  sp->touched.len = 0;
}

static bool cell_size_off(const scn_space *sp, double cell) {
  return sp->cell == 0 || cell > sp->cell * 2 || cell < sp->cell / 2;
}

int scn_space_sync(scn_space *sp, double cell) {
  scn_world *w = sp->w;
  uint64_t closed = w->tm.tick - 1;
  if (!(cell > 0) || !isfinite(cell))
    cell = 1;
  if (sp->synced && sp->synced == closed && !cell_size_off(sp, cell))
    return SCN_OK; /* the world's clock stood still */
  /* Empty cells stay until a rebuild; that many of them is a world that wandered off. */
  bool litter = sp->ncells > 1024 && sp->ncells > 4 * scn_space_count(sp);
  bool rebuild = sp->synced == 0 || cell_size_off(sp, cell) || litter ||
                 scn_world_events_since(w) > sp->synced;
  uint64_t since = sp->synced;
  int rc;
  if (rebuild) {
    release(sp);
    sp->rebuilds++;
    sp->cell = cell;
    sp->inv = 1 / cell;
    sp->synced = closed;
    rc = add_changed(sp, 0);
    if (rc == SCN_OK)
      forget_last_sync(sp); /* nothing is known of the sync before */
  } else {
    forget_last_sync(sp);
    sp->before = since;
    sp->synced = closed;
    rc = add_changed(sp, since);
    removal r = {sp, rc};
    if (rc == SCN_OK)
      scn_world_visit_events(w, since, remove_destroyed, &r);
    rc = r.rc;
  }
  if (rc != SCN_OK) {
    release(sp); /* rebuilt at the next sync */
    return rc;
  }
  return SCN_OK;
}

bool scn_space_position(const scn_space *sp, scn_entity e, double out[3]) {
  const scn__space_entry *en = scn__space_find(sp, e);
  if (!en)
    return false;
  for (int a = 0; a < 3; a++)
    out[a] = en->p[a];
  return true;
}

size_t scn_space_count(const scn_space *sp) { return sp->by_entity.count; }

size_t scn_space_bytes(const scn_space *sp) {
  size_t left = 0;
  for (uint32_t c = 0; c < sp->ncells; c++)
    left += sp->cells[c].left_cap * sizeof(scn__space_left);
  return sizeof *sp + (size_t)sp->items_cap * sizeof *sp->items +
         (size_t)sp->free_cap * sizeof *sp->free_items + (size_t)sp->cells_cap * sizeof *sp->cells +
         sp->entries_bytes + left + scn__idmap_bytes(&sp->by_entity) +
         scn__idmap_bytes(&sp->by_key) + sp->touched.cap * sizeof(uint32_t);
}

uint64_t scn_space_rebuilds(const scn_space *sp) { return sp->rebuilds; }

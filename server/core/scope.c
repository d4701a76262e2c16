/* What one subscriber holds of a world: the members of its region, each with the tick it was
 * last sent, and their evaluation against the spatial index with hysteresis and bands. */
#include "space.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct member {
  scn_entity entity;
  uint64_t sent; /* the tick it was last sent at */
  uint32_t seen; /* the evaluation that last found it in the region */
} member;

struct scn_scope {
  member *m;
  uint32_t n, cap;
  scn__idmap index; /* entity -> member */
  uint32_t epoch;   /* evaluations so far */
};

scn_scope *scn_scope_new(void) { return calloc(1, sizeof(scn_scope)); }

void scn_scope_free(scn_scope *sc) {
  if (!sc)
    return;
  free(sc->m);
  scn__idmap_free(&sc->index);
  free(sc);
}

void scn_scope_clear(scn_scope *sc) {
  sc->n = 0;
  scn__idmap_clear(&sc->index);
}

static int add_member(scn_scope *sc, scn_entity e, uint64_t sent, uint32_t seen) {
  if (sc->n == sc->cap) {
    size_t cap = sc->cap;
    member *m = scn_array_grow(sc->m, &cap, sizeof *m, sc->n + 1);
    if (!m)
      return SCN_NOMEM;
    sc->m = m;
    sc->cap = (uint32_t)cap;
  }
  if (scn__idmap_put(&sc->index, e, sc->n) != SCN_OK)
    return SCN_NOMEM;
  sc->m[sc->n++] = (member){e, sent, seen};
  return SCN_OK;
}

static void remove_member(scn_scope *sc, uint32_t i) {
  scn__idmap_del(&sc->index, sc->m[i].entity);
  if (i != --sc->n) {
    sc->m[i] = sc->m[sc->n];
    scn__idmap_put(&sc->index, sc->m[i].entity, i); /* replaces: needs no room */
  }
}

scn_scope *scn_scope_clone(const scn_scope *sc) {
  scn_scope *c = scn_scope_new();
  if (!c)
    return NULL;
  c->epoch = sc->epoch;
  for (uint32_t i = 0; i < sc->n; i++)
    if (add_member(c, sc->m[i].entity, sc->m[i].sent, sc->m[i].seen) != SCN_OK) {
      scn_scope_free(c);
      return NULL;
    }
  return c;
}

int scn_scope_hold(scn_scope *sc, scn_entity e, uint64_t sent) {
  uint32_t i = scn__idmap_get(&sc->index, e);
  if (i != SCN_NIL) {
    sc->m[i].sent = sent;
    return SCN_OK;
  }
  return add_member(sc, e, sent, sc->epoch);
}

size_t scn_scope_count(const scn_scope *sc) { return sc->n; }

size_t scn_scope_bytes(const scn_scope *sc) {
  return sizeof *sc + (size_t)sc->cap * sizeof *sc->m + scn__idmap_bytes(&sc->index);
}

void scn_scope_visit(const scn_scope *sc, void (*fn)(void *ud, scn_entity e), void *ud) {
  for (uint32_t i = 0; i < sc->n; i++)
    fn(ud, sc->m[i].entity);
}

/* ---- evaluation ------------------------------------------------------------------------- */

typedef struct eval {
  scn_scope *sc;
  scn_space *sp;
  const scn_region *r;
  uint64_t now;
  double in2, stay2; /* squared radius, and squared radius + margin */
  double band2[SCN_BANDS_MAX];
  scn_visit_fn set;
  void *ud;
  int64_t tested;
  int rc;
} eval;

static void send(eval *v, scn_entity e) {
  const float *m = scn__space_world_matrix(v->sp, e);
  if (m)
    v->set(v->ud, e, m);
}

/* Ticks between two sends of an entity at squared distance d2. */
static uint32_t every_at(const eval *v, double d2) {
  for (uint32_t b = 0; b < v->r->nbands; b++)
    if (d2 <= v->band2[b])
      return v->r->bands[b].every;
  return 1;
}

static void consider(eval *v, const scn__space_entry *en) {
  const scn_region *r = v->r;
  v->tested++;
  double d2 = 0;
  if (!r->unbounded) {
    double dx = en->p[0] - r->center[0], dy = en->p[1] - r->center[1], dz = en->p[2] - r->center[2];
    d2 = dx * dx + dy * dy + dz * dz;
    if (!(d2 <= v->stay2))
      return;
  }
  const scn__space_item *it = &v->sp->items[en->item];
  if (r->root != SCN_ENTITY_NONE && !scn_transform_in_subtree(v->sp->w, it->entity, r->root))
    return;
  scn_scope *sc = v->sc;
  uint32_t i = scn__idmap_get(&sc->index, it->entity);
  if (i != SCN_NIL) {
    member *m = &sc->m[i];
    m->seen = sc->epoch;
    if (it->changed > m->sent && v->now - m->sent >= every_at(v, d2)) {
      m->sent = v->now;
      send(v, it->entity);
    }
    return;
  }
  if (!r->unbounded && !(d2 <= v->in2))
    return;
  if (v->rc == SCN_OK)
    v->rc = add_member(sc, it->entity, v->now, sc->epoch);
  send(v, it->entity);
}

static void scan_cell(eval *v, const scn__space_cell *cell) {
  for (uint32_t k = 0; k < cell->n; k++)
    consider(v, &cell->entries[k]);
}

/* The cells the region's bounding box covers, or every cell when that is fewer. */
static void scan_region(eval *v) {
  scn_space *sp = v->sp;
  const scn_region *r = v->r;
  if (r->unbounded || r->naive) {
    for (uint32_t c = 0; c < sp->ncells; c++)
      scan_cell(v, &sp->cells[c]);
    return;
  }
  double reach = r->radius + r->margin;
  int32_t lo[3], hi[3];
  double boxes = 1;
  for (int a = 0; a < 3; a++) {
    lo[a] = scn__space_key(sp, r->center[a] - reach);
    hi[a] = scn__space_key(sp, r->center[a] + reach);
    if (lo[a] < sp->lo[a])
      lo[a] = sp->lo[a];
    if (hi[a] > sp->hi[a])
      hi[a] = sp->hi[a];
    if (lo[a] > hi[a])
      return; /* the box misses every occupied cell */
    boxes *= (double)hi[a] - lo[a] + 1;
  }
  if (boxes > sp->ncells) {
    for (uint32_t c = 0; c < sp->ncells; c++) {
      const scn__space_cell *cell = &sp->cells[c];
      bool inside = true;
      for (int a = 0; a < 3; a++)
        inside &= cell->key[a] >= lo[a] && cell->key[a] <= hi[a];
      if (inside)
        scan_cell(v, cell);
    }
    return;
  }
  int32_t k[3];
  for (k[0] = lo[0]; k[0] <= hi[0]; k[0]++)
    for (k[1] = lo[1]; k[1] <= hi[1]; k[1]++)
      for (k[2] = lo[2]; k[2] <= hi[2]; k[2]++) {
        uint32_t c = scn__idmap_get(&sp->by_key, scn__space_pack(k));
        if (c != SCN_NIL)
          scan_cell(v, &sp->cells[c]);
      }
}

int64_t scn_scope_eval(scn_scope *sc, scn_space *sp, const scn_region *r, uint64_t now, bool full,
                       scn_visit_fn set, scn_removed_fn removed, void *ud) {
  if (full)
    scn_scope_clear(sc);
  sc->epoch++;
  double stay = r->radius + r->margin;
  eval v = {.sc = sc,
            .sp = sp,
            .r = r,
            .now = now,
            .in2 = r->radius * r->radius,
            .stay2 = stay * stay,
            .set = set,
            .ud = ud};
  for (uint32_t b = 0; b < r->nbands && b < SCN_BANDS_MAX; b++)
    v.band2[b] = r->bands[b].radius * r->bands[b].radius;
  scan_region(&v);
  if (v.rc != SCN_OK) {
    scn_scope_clear(sc);
    return SCN_NOMEM;
  }
  /* Members the scan did not meet left the region, or their transform. */
  for (uint32_t i = 0; i < sc->n;) {
    if (sc->m[i].seen == sc->epoch) {
      i++;
      continue;
    }
    removed(ud, sc->m[i].entity);
    remove_member(sc, i); /* the last member moves to i */
  }
  return v.tested;
}

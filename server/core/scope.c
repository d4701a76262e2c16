/* What one subscriber holds of a world: the members of its region, each with the tick it was
 * last sent, and their evaluation against the spatial index with hysteresis and bands.
 *
 * A region evaluated at the sync before this one starts from that evaluation: a transform
 * that did not move can only come in or go out where its distance crosses the radius or the
 * radius plus margin as the center moves, which is decided from the two centers alone; so it
 * looks up what it holds only for what moved, what left a cell, and what crosses its edges.
 * Otherwise (the first frame, a skipped tick, a changed region, a root, naive) it looks at
 * every transform its box covers and at every member. */
#include "space.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct member {
  scn_entity entity; /* SCN_ENTITY_NONE: an empty slot */
  uint64_t sent;     /* the tick it was last sent at */
  uint32_t seen;     /* the evaluation that last met it */
  uint32_t pad;
} member;

/* The members live in an open-addressing table (linear probing, deletion by shifting the run
 * back), so looking one up reads one slot. */
struct scn_scope {
  member *slots;
  uint32_t mask, n;
  uint32_t epoch;   /* evaluations so far */
  scn__vec pending; /* scn_entity: members a band held back, to send when it lets them */
  /* Every change of a member up to this tick has been sent (bands aside): without bands a
   * member is due when it changed after this or after it was last sent, so an evaluation
   * that sends what moved need not look up each member. */
  uint64_t sent_all;
  /* The last evaluation, when the next may start from it. */
  bool valid;
  uint64_t tick;
  double center[3], radius, margin;
};

static inline uint32_t home_of(const scn_scope *sc, scn_entity e) {
  return (uint32_t)((e * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & sc->mask;
}

static member *find(const scn_scope *sc, scn_entity e) {
  if (!sc->slots)
    return NULL;
  for (uint32_t h = home_of(sc, e);; h = (h + 1) & sc->mask) {
    if (sc->slots[h].entity == e)
      return &sc->slots[h];
    if (sc->slots[h].entity == SCN_ENTITY_NONE)
      return NULL;
  }
}

static int grow(scn_scope *sc) {
  uint32_t cap = sc->slots ? (sc->mask + 1) * 2 : 64;
  member *slots = calloc(cap, sizeof *slots);
  if (!slots)
    return SCN_NOMEM;
  member *old = sc->slots;
  uint32_t old_cap = old ? sc->mask + 1 : 0;
  sc->slots = slots;
  sc->mask = cap - 1;
  for (uint32_t i = 0; i < old_cap; i++)
    if (old[i].entity != SCN_ENTITY_NONE) {
      uint32_t h = home_of(sc, old[i].entity);
      while (slots[h].entity != SCN_ENTITY_NONE)
        h = (h + 1) & sc->mask;
      slots[h] = old[i];
    }
  free(old);
  return SCN_OK;
}

/* A new member (e must not be one); NULL when out of memory. */
static member *add_member(scn_scope *sc, scn_entity e, uint64_t sent) {
  if ((!sc->slots || (sc->n + 1) * 4 > (sc->mask + 1) * 3) && grow(sc) != SCN_OK)
    return NULL;
  uint32_t h = home_of(sc, e);
  while (sc->slots[h].entity != SCN_ENTITY_NONE)
    h = (h + 1) & sc->mask;
  sc->n++;
  sc->slots[h] = (member){e, sent, sc->epoch, 0};
  return &sc->slots[h];
}

static void remove_member(scn_scope *sc, member *m) {
  uint32_t hole = (uint32_t)(m - sc->slots);
  sc->n--;
  for (uint32_t j = (hole + 1) & sc->mask; sc->slots[j].entity != SCN_ENTITY_NONE;
       j = (j + 1) & sc->mask) {
    uint32_t home = home_of(sc, sc->slots[j].entity);
    if (((j - home) & sc->mask) >= ((j - hole) & sc->mask)) {
      sc->slots[hole] = sc->slots[j];
      hole = j;
    }
  }
  sc->slots[hole].entity = SCN_ENTITY_NONE;
}

scn_scope *scn_scope_new(void) { return calloc(1, sizeof(scn_scope)); }

void scn_scope_free(scn_scope *sc) {
  if (!sc)
    return;
  free(sc->slots);
  scn__vec_free(&sc->pending);
  free(sc);
}

void scn_scope_clear(scn_scope *sc) {
  if (sc->slots)
    memset(sc->slots, 0, sizeof *sc->slots * (sc->mask + 1));
  sc->n = 0;
  sc->valid = false;
  sc->pending.len = 0;
}

scn_scope *scn_scope_clone(const scn_scope *sc) {
  scn_scope *c = scn_scope_new();
  if (!c)
    return NULL;
  c->epoch = sc->epoch;
  c->sent_all = sc->sent_all;
  for (uint32_t i = 0; sc->slots && i <= sc->mask; i++)
    if (sc->slots[i].entity != SCN_ENTITY_NONE &&
        !add_member(c, sc->slots[i].entity, sc->slots[i].sent)) {
      scn_scope_free(c);
      return NULL;
    }
  return c; /* its first evaluation looks at everything, held-back changes included */
}

int scn_scope_hold(scn_scope *sc, scn_entity e, uint64_t sent) {
  sc->valid = false;
  member *m = find(sc, e);
  if (m) {
    m->sent = sent;
    return SCN_OK;
  }
  return add_member(sc, e, sent) ? SCN_OK : SCN_NOMEM;
}

size_t scn_scope_count(const scn_scope *sc) { return sc->n; }

size_t scn_scope_bytes(const scn_scope *sc) {
  return sizeof *sc + (sc->slots ? (size_t)(sc->mask + 1) * sizeof *sc->slots : 0) +
         sc->pending.cap * sizeof(scn_entity);
}

void scn_scope_visit(const scn_scope *sc, void (*fn)(void *ud, scn_entity e), void *ud) {
  for (uint32_t i = 0; sc->slots && i <= sc->mask; i++)
    if (sc->slots[i].entity != SCN_ENTITY_NONE)
      fn(ud, sc->slots[i].entity);
}

/* ---- evaluation ------------------------------------------------------------------------- */

typedef struct eval {
  scn_scope *sc;
  scn_space *sp;
  const scn_region *r;
  uint64_t now;
  double in2, stay2; /* squared radius, and squared radius + margin */
  double band2[SCN_BANDS_MAX];
  const double *c0;     /* the center at the last evaluation (incremental) */
  double shift;         /* how far the center moved since (a little more, for rounding) */
  double radius, reach; /* radius, and radius + margin */
  /* Per axis and key of the box, the squared distances along that axis from each center (0:
   * the last one, 1: this one) to the nearest and farthest points of a cell, so that a
   * cell's range is three sums (in the space's scratch; NULL when the box is too wide). */
  double (*axis)[3][SCN_SPACE_AXIS_MAX][2];
  int32_t lo[3], hi[3]; /* the cells looked at */
  scn_visit_fn set;
  scn_removed_fn removed;
  void *ud;
  int64_t tested;
  int rc;
} eval;

static inline double dist2(const float p[3], const double c[3]) {
  double dx = p[0] - c[0], dy = p[1] - c[1], dz = p[2] - c[2];
  return dx * dx + dy * dy + dz * dz;
}

static void send(eval *v, member *m, const scn__space_entry *en) {
  m->sent = v->now;
  const float *mat = scn__space_matrix(v->sp, en);
  if (mat)
    v->set(v->ud, en->entity, mat);
}

/* Ticks between two sends of an entity at squared distance d2. */
static uint32_t every_at(const eval *v, double d2) {
  for (uint32_t b = 0; b < v->r->nbands; b++)
    if (d2 <= v->band2[b])
      return v->r->bands[b].every;
  return 1;
}

/* A member whose world matrix changed after it was sent: sent now, or when its band lets it. */
static void update(eval *v, member *m, const scn__space_entry *en, double d2) {
  m->seen = v->sc->epoch;
  if (en->changed <= m->sent || en->changed <= v->sc->sent_all)
    return;
  if (v->now - m->sent >= every_at(v, d2)) {
    send(v, m, en);
    return;
  }
  if (v->rc == SCN_OK)
    v->rc = scn__vec_reserve(&v->sc->pending, sizeof(scn_entity), v->sc->pending.len + 1);
  if (v->rc == SCN_OK)
    SCN_VEC_AT(v->sc->pending, scn_entity, v->sc->pending.len++) = m->entity;
}

static void enter(eval *v, const scn__space_entry *en) {
  member *m = add_member(v->sc, en->entity, v->now);
  if (!m) {
    v->rc = SCN_NOMEM;
    return;
  }
  send(v, m, en);
}

static void leave(eval *v, member *m) {
  v->removed(v->ud, m->entity);
  remove_member(v->sc, m);
}

/* ---- looking at everything ---- */

static void consider(eval *v, const scn__space_entry *en) {
  const scn_region *r = v->r;
  v->tested++;
  double d2 = 0;
  if (!r->unbounded) {
    d2 = dist2(en->p, r->center);
    if (!(d2 <= v->stay2))
      return;
  }
  if (r->root != SCN_ENTITY_NONE && !scn_transform_in_subtree(v->sp->w, en->entity, r->root))
    return;
  member *m = find(v->sc, en->entity);
  if (m)
    update(v, m, en, d2);
  else if (r->unbounded || d2 <= v->in2)
    enter(v, en);
}

/* Every cell whose key lies in [v->lo, v->hi], by key, or by going through every cell when
 * that is fewer. */
/* Narrows the box to the occupied cells; false when it misses them all. */
static bool clamp_box(eval *v) {
  const scn_space *sp = v->sp;
  for (int a = 0; a < 3; a++) {
    if (v->lo[a] < sp->lo[a])
      v->lo[a] = sp->lo[a];
    if (v->hi[a] > sp->hi[a])
      v->hi[a] = sp->hi[a];
    if (v->lo[a] > v->hi[a])
      return false;
  }
  return true;
}

static void for_cells(eval *v, bool all, void (*fn)(eval *v, const scn__space_cell *cell)) {
  scn_space *sp = v->sp;
  if (all) { /* no box: every cell (an unbounded region, or the naive filter) */
    for (uint32_t c = 0; c < sp->ncells; c++)
      fn(v, &sp->cells[c]);
    return;
  }
  if (!clamp_box(v))
    return; /* the box misses every occupied cell */
  double boxes = 1;
  for (int a = 0; a < 3; a++)
    boxes *= (double)v->hi[a] - v->lo[a] + 1;
  if (boxes > sp->ncells) {
    for (uint32_t c = 0; c < sp->ncells; c++) {
      const scn__space_cell *cell = &sp->cells[c];
      bool inside = true;
      for (int a = 0; a < 3; a++)
        inside &= cell->key[a] >= v->lo[a] && cell->key[a] <= v->hi[a];
      if (inside)
        fn(v, cell);
    }
    return;
  }
  int32_t k[3];
  for (k[0] = v->lo[0]; k[0] <= v->hi[0]; k[0]++)
    for (k[1] = v->lo[1]; k[1] <= v->hi[1]; k[1]++)
      for (k[2] = v->lo[2]; k[2] <= v->hi[2]; k[2]++) {
        uint32_t c = scn__idmap_get(&sp->by_key, scn__space_pack(k));
        if (c != SCN_NIL)
          fn(v, &sp->cells[c]);
      }
}

static void scan_all(eval *v, const scn__space_cell *cell) {
  for (uint32_t k = 0; k < cell->n; k++)
    consider(v, &cell->entries[k]);
}

static void set_box(eval *v, const double *a, const double *b, double reach) {
  for (int x = 0; x < 3; x++) {
    v->lo[x] = scn__space_key(v->sp, fmin(a[x], b[x]) - reach);
    v->hi[x] = scn__space_key(v->sp, fmax(a[x], b[x]) + reach);
  }
}

static void eval_all(eval *v) {
  const scn_region *r = v->r;
  set_box(v, r->center, r->center, r->radius + r->margin);
  for_cells(v, r->unbounded || r->naive, scan_all);
  /* Members the scan did not meet left the region, or their transform. */
  scn_scope *sc = v->sc;
  for (uint32_t i = 0; sc->slots && i <= sc->mask;) {
    member *m = &sc->slots[i];
    if (m->entity == SCN_ENTITY_NONE || m->seen == sc->epoch)
      i++;
    else
      leave(v, m); /* a later member of its run may move into slot i: looked at again */
  }
}

/* ---- starting from the last evaluation ---- */

enum { IN, BETWEEN, OUT };

static int where(const eval *v, double d2) {
  return d2 <= v->in2 ? IN : d2 <= v->stay2 ? BETWEEN : OUT;
}

/* The squared distances from c to the nearest and farthest points of a cell. */
/* Along one axis, the squared distances from x to the nearest and farthest points of the
 * cells of key k. */
static void axis_range(const scn_space *sp, int32_t k, double x, double out[2]) {
  if (k <= -SCN_SPACE_KEY_MAX || k >= SCN_SPACE_KEY_MAX) {
    out[0] = 0, out[1] = INFINITY; /* a clamped cell reaches to infinity */
    return;
  }
  double pad = sp->cell * 1e-6; /* rounding of the keys at a cell's edge */
  double lo = k * sp->cell - pad, hi = (k + 1) * sp->cell + pad;
  double dn = x < lo ? lo - x : x > hi ? x - hi : 0;
  double df = fmax(fabs(x - lo), fabs(x - hi));
  out[0] = dn * dn, out[1] = df * df;
}

static void fill_tables(eval *v) {
  for (int a = 0; a < 3; a++)
    if (v->hi[a] - v->lo[a] >= SCN_SPACE_AXIS_MAX)
      return;
  v->axis = v->sp->axis;
  for (int a = 0; a < 3; a++)
    for (int32_t k = v->lo[a]; k <= v->hi[a]; k++) {
      axis_range(v->sp, k, v->c0[a], v->axis[0][a][k - v->lo[a]]);
      axis_range(v->sp, k, v->r->center[a], v->axis[1][a][k - v->lo[a]]);
    }
}

/* The squared distances from a center (0: the last one, 1: this one) to the nearest and
 * farthest points of a cell. */
static void cell_range(const eval *v, const scn__space_cell *cell, int which, double *near2,
                       double *far2) {
  double n2 = 0, f2 = 0, r[2];
  const double *c = which ? v->r->center : v->c0;
  for (int a = 0; a < 3; a++) {
    const double *d = r;
    if (v->axis)
      d = v->axis[which][a][cell->key[a] - v->lo[a]];
    else
      axis_range(v->sp, cell->key[a], c[a], r);
    n2 += d[0];
    f2 += d[1];
  }
  *near2 = n2, *far2 = f2;
}

/* No transform that stayed put in the cell can come in or go out. The center moved by
 * v->shift, so a distance changed by at most that much: one can come in only from within
 * shift beyond the radius, and go out only from within shift inside the radius plus margin.
 * A cell that meets neither shell is quiet; so is one that lies wholly inside the radius and
 * within the margin after, wholly beyond the margin and outside the radius after, or wholly
 * between the two after (held or not, what is there stays so). */
static bool cell_quiet(const eval *v, const scn__space_cell *cell) {
  if (v->shift == 0)
    return true;
  double n0, f0, n1, f1;
  cell_range(v, cell, 0, &n0, &f0);
  double near = sqrt(n0), far = sqrt(f0);
  bool in_shell = near <= v->radius + v->shift && far > v->radius;
  bool out_shell = near <= v->reach && far > v->reach - v->shift;
  if (!in_shell && !out_shell)
    return true;
  cell_range(v, cell, 1, &n1, &f1);
  return (f0 <= v->in2 && f1 <= v->stay2) || (n0 > v->stay2 && n1 > v->in2) ||
         (n1 > v->in2 && f1 <= v->stay2);
}

static void moved_or_crossing(eval *v, const scn__space_entry *en, bool moved) {
  double d1 = dist2(en->p, v->r->center);
  int was = moved && en->fresh ? OUT : where(v, dist2(moved ? en->q : en->p, v->c0));
  int is = where(v, d1);
  if (!moved && (was == is || (was == IN && is == BETWEEN) || (was == OUT && is == BETWEEN)))
    return; /* held or not, it stays so */
  if (was == OUT && is != IN)
    return; /* it was not held, and does not come in */
  if (was == IN && is != OUT && v->r->nbands == 0) {
    /* held (it was inside the radius), it stays, and without bands it is due: it moved */
    const float *mat = scn__space_matrix(v->sp, en);
    if (mat)
      v->set(v->ud, en->entity, mat);
    return;
  }
  member *m = find(v->sc, en->entity);
  if (!m) {
    if (is == IN)
      enter(v, en);
    return;
  }
  if (is == OUT)
    leave(v, m);
  else
    update(v, m, en, d1);
}

static void scan_moves(eval *v, const scn__space_cell *cell) {
  bool touched = cell->touched == v->now, quiet = cell_quiet(v, cell);
  if (quiet && !touched)
    return;
  /* What moved comes first; what stayed put matters only where it can cross an edge. */
  uint32_t moved = touched ? cell->moved : 0, end = quiet ? moved : cell->n;
  v->tested += end;
  for (uint32_t k = 0; k < end; k++)
    moved_or_crossing(v, &cell->entries[k], k < moved);
  /* What left the cell for a cell not looked at, or its transform: held, it leaves. */
  for (uint32_t k = 0; k < cell->nleft; k++) {
    const scn__space_left *l = &cell->left[k];
    if (dist2(l->q, v->c0) > v->stay2)
      continue;
    const scn__space_entry *now = scn__space_find(v->sp, l->entity);
    if (now) {
      const int32_t *key = v->sp->cells[v->sp->items[now->item].cell].key;
      bool looked_at = true;
      for (int a = 0; a < 3; a++)
        looked_at &= key[a] >= v->lo[a] && key[a] <= v->hi[a];
      if (looked_at)
        continue; /* met where it is now */
    }
    member *m = find(v->sc, l->entity);
    if (m)
      leave(v, m);
  }
}

static void eval_moves(eval *v) {
  scn_scope *sc = v->sc;
  const scn_region *r = v->r;
  double dx = r->center[0] - v->c0[0], dy = r->center[1] - v->c0[1], dz = r->center[2] - v->c0[2];
  double shift = sqrt(dx * dx + dy * dy + dz * dz);
  v->shift = shift == 0 ? 0 : shift * (1 + 1e-9) + (r->radius + r->margin) * 1e-12;
  v->radius = r->radius;
  v->reach = r->radius + r->margin;
  /* The held-back list is rebuilt; what was on it is looked at again below. */
  scn__vec held = sc->pending;
  sc->pending = (scn__vec){0};
  set_box(v, v->c0, r->center, r->radius + r->margin);
  if (clamp_box(v))
    fill_tables(v);
  for_cells(v, false, scan_moves);
  for (size_t k = 0; k < held.len; k++) {
    scn_entity e = SCN_VEC_AT(held, scn_entity, k);
    member *m = find(sc, e);
    const scn__space_entry *en = scn__space_find(v->sp, e);
    if (!m || m->seen == sc->epoch || !en)
      continue; /* gone, or met above */
    update(v, m, en, dist2(en->p, r->center));
  }
  if (sc->pending.cap == 0) { /* keep the larger buffer */
    sc->pending = held;
    sc->pending.len = 0;
  } else {
    scn__vec_free(&held);
  }
}

int64_t scn_scope_eval(scn_scope *sc, scn_space *sp, const scn_region *r, uint64_t now, bool full,
                       scn_visit_fn set, scn_removed_fn removed, void *ud) {
  bool incremental = !full && sc->valid && sc->tick == sp->before && sp->before &&
                     sp->synced == now && !r->unbounded && !r->naive &&
                     r->root == SCN_ENTITY_NONE && sc->radius == r->radius &&
                     sc->margin == r->margin;
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
            .c0 = sc->center,
            .set = set,
            .removed = removed,
            .ud = ud};
  for (uint32_t b = 0; b < r->nbands && b < SCN_BANDS_MAX; b++)
    v.band2[b] = r->bands[b].radius * r->bands[b].radius;
  if (incremental) {
    eval_moves(&v);
  } else {
    sc->pending.len = 0;
    eval_all(&v);
  }
  if (v.rc != SCN_OK) {
    scn_scope_clear(sc);
    return SCN_NOMEM;
  }
  if (r->nbands == 0)
    sc->sent_all = now;
  sc->valid = !r->unbounded && r->root == SCN_ENTITY_NONE;
  sc->tick = now;
  memcpy(sc->center, r->center, sizeof sc->center);
  sc->radius = r->radius;
  sc->margin = r->margin;
  return v.tested;
}

/* A world's history exported and imported whole, version by version, for a move to another
 * daemon (see history.c for how the records are kept). */
#include "history_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- export and import -------------------------------------------------------------------- */

/* The tick in which record s of ring k was made: the last of ticks first..last whose records
 * begin at or before it. */
static uint64_t tick_of(const scn__hist *h, int k, uint64_t s, uint64_t first, uint64_t last) {
  while (first < last) {
    uint64_t mid = first + (last - first + 1) / 2;
    if (bound_of(h, mid)[k] <= s)
      first = mid;
    else
      last = mid - 1;
  }
  return first;
}

static uint32_t back_of(const scn__hist *h, int k, uint64_t s) {
  if (k == SCN_HIST_STRUCT)
    return srec(h, s)->back;
  return mlink(&h->ring[k], s) & ~SCN_HIST_ASIDE;
}

typedef struct export_walk {
  const scn__hist *h;
  uint64_t first, last;              /* the ticks whose records are exported */
  uint64_t lo[SCN_HIST_RINGS];       /* the first record of tick first */
  scn_entity *owner[SCN_HIST_RINGS]; /* per record from lo: its entity, 0 when not exported */
} export_walk;

/* Marks the records of one chain that a query can read: in each tick, the chain's oldest. */
static void mark_chain(export_walk *x, int k, uint64_t s, scn_entity e) {
  uint64_t prev = 0, prev_tick = 0;
  while (s >= x->lo[k]) {
    uint64_t t = tick_of(x->h, k, s, x->first, x->last);
    if (prev && t == prev_tick && x->owner[k][prev - x->lo[k]] == e)
      x->owner[k][prev - x->lo[k]] = SCN_ENTITY_NONE; /* a later one of the same tick */
    if (x->owner[k][s - x->lo[k]] == SCN_ENTITY_NONE)
      x->owner[k][s - x->lo[k]] = e;
    prev = s;
    prev_tick = t;
    uint32_t back = back_of(x->h, k, s);
    if (!back)
      break;
    s -= back;
  }
}

static void mark_heads(export_walk *x, const scn__heads *heads, scn_entity e) {
  mark_chain(x, SCN_HIST_WORLD, heads->world, e);
  mark_chain(x, SCN_HIST_LOCAL, heads->local, e);
  mark_chain(x, SCN_HIST_STRUCT, heads->meta, e);
}

int scn_world_history_export(scn_world *w, scn_history_span *span, scn_version_fn fn, void *ud) {
  scn__tm *tm = &w->tm;
  scn__hist *h = tm->hist;
  uint64_t now = tm->tick - 1;
  span->now = now;
  span->window = h ? h->window : 0;
  span->oldest = now + 1;
  if (!h)
    return SCN_OK;
  /* A world matrix about to change gets its record when the flush changes it: flushed, the
   * open tick's records are all there, and the live values are the open tick's. */
  scn__tm_flush(tm);
  uint64_t first = oldest_tick(h, now);
  if (h->broken || first > now)
    return SCN_OK; /* no tick can be named: nothing to give */
  span->oldest = first;
  export_walk x = {.h = h, .first = first + 1, .last = now + 1};
  int rc = SCN_OK;
  for (int k = 0; k < SCN_HIST_RINGS && rc == SCN_OK; k++) {
    x.lo[k] = bound_of(h, first + 1)[k];
    if (x.lo[k] < h->ring[k].front)
      x.lo[k] = h->ring[k].front;
    uint64_t n = h->ring[k].end - x.lo[k];
    x.owner[k] = calloc(n ? n : 1, sizeof(scn_entity));
    if (!x.owner[k])
      rc = SCN_NOMEM;
  }
  if (rc == SCN_OK) {
    for (uint32_t i = 0; i < tm->n; i++)
      mark_heads(&x, &h->heads[i], tm->entity[i]);
    for (uint32_t d = 0; h->dead && d <= h->dead_mask; d++)
      if (h->dead[d].entity != SCN_ENTITY_NONE)
        mark_heads(&x, &h->dead[d].heads, h->dead[d].entity);
  }
  scn_history_version v;
  memset(&v, 0, sizeof v);
  for (uint64_t t = first + 1; t <= now + 1 && rc == SCN_OK; t++) {
    v.tick = t;
    for (int k = 0; k < SCN_HIST_RINGS && rc == SCN_OK; k++) {
      uint64_t from = bound_of(h, t)[k], to = t <= now ? bound_of(h, t + 1)[k] : h->ring[k].end;
      if (from < x.lo[k])
        from = x.lo[k];
      for (uint64_t s = from; s < to && rc == SCN_OK; s++) {
        v.entity = x.owner[k][s - x.lo[k]];
        if (v.entity == SCN_ENTITY_NONE)
          continue;
        if (k == SCN_HIST_STRUCT) {
          const scn__hist_srec *rec = srec(h, s);
          v.kind = SCN_VERSION_STRUCT;
          v.exists = rec->exists;
          v.parent = rec->exists ? rec->parent : SCN_ENTITY_NONE;
          memcpy(v.name, rec->exists ? rec->name : "", rec->exists ? strlen(rec->name) + 1 : 1);
          memset(v.m, 0, sizeof v.m);
        } else {
          v.kind = k == SCN_HIST_WORLD ? SCN_VERSION_WORLD : SCN_VERSION_LOCAL;
          scn__hist_record_matrix(h, k, s, v.m);
          v.exists = false;
          v.parent = SCN_ENTITY_NONE;
          v.name[0] = '\0';
        }
        rc = fn(ud, &v);
      }
    }
  }
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    free(x.owner[k]);
  return rc;
}

/* The chain heads of e: its instance's, or those it keeps as a destroyed transform (made
 * when missing); NULL without memory. */
static scn__heads *import_heads(scn__tm *tm, scn_entity e) {
  scn__hist *h = tm->hist;
  uint32_t i = scn__tm_lookup(tm, e);
  if (i != SCN_NIL)
    return &h->heads[i];
  if (!scn__hist_dead_grow(h))
    return NULL;
  scn__dead *d = &h->dead[scn__hist_dead_slot(h, e)];
  if (d->entity == SCN_ENTITY_NONE) {
    memset(d, 0, sizeof *d);
    d->entity = e;
    h->ndead++;
  }
  return &d->heads;
}

static void import_bound(scn__hist *h, uint64_t tick) {
  uint64_t *b = bound_of(h, tick);
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    b[k] = h->ring[k].end;
}

static bool version_valid(const scn_history_version *v) {
  if (v->entity == SCN_ENTITY_NONE || v->entity > SCN_ENTITY_MAX)
    return false;
  if (v->kind == SCN_VERSION_WORLD || v->kind == SCN_VERSION_LOCAL)
    return true;
  if (v->kind != SCN_VERSION_STRUCT)
    return false;
  if (!v->exists)
    return true;
  size_t len = strnlen(v->name, sizeof v->name);
  return len < sizeof v->name && v->parent <= SCN_ENTITY_MAX &&
         (len == 0 || scn_name_valid(v->name, len));
}

/* Every destroyed transform can answer for the ticks before it went: it has a structure
 * record, and when that says it existed, a world and a local matrix too. */
static bool dead_complete(const scn__hist *h) {
  for (uint32_t d = 0; h->dead && d <= h->dead_mask; d++) {
    const scn__dead *x = &h->dead[d];
    if (x->entity == SCN_ENTITY_NONE)
      continue;
    if (x->heads.meta < h->ring[SCN_HIST_STRUCT].front)
      return false;
    if (srec(h, x->heads.meta)->exists && (x->heads.world < h->ring[SCN_HIST_WORLD].front ||
                                           x->heads.local < h->ring[SCN_HIST_LOCAL].front))
      return false;
  }
  return true;
}

/* The versions, tick by tick, into the empty history: each pushed onto its entity's chain. */
static int import_versions(scn__tm *tm, const scn_history_span *span, scn_version_next_fn next,
                           void *ud) {
  scn__hist *h = tm->hist;
  uint64_t open = span->now + 1, cur = span->oldest + 1;
  h->start = span->oldest;
  import_bound(h, cur);
  for (;;) {
    scn_history_version v;
    int got = next(ud, &v);
    if (got < 0)
      return got;
    if (got == 0)
      break;
    if (v.tick < cur || v.tick > open || !version_valid(&v))
      return SCN_INVALID;
    while (cur < v.tick)
      import_bound(h, ++cur);
    scn__heads *heads = import_heads(tm, v.entity);
    if (!heads)
      return SCN_NOMEM;
    const uint64_t *b = bound_of(h, cur);
    if (v.kind == SCN_VERSION_STRUCT) {
      if (heads->meta >= b[SCN_HIST_STRUCT])
        return SCN_INVALID;
      scn__hist_push_struct_rec(h, &heads->meta, v.entity, v.exists, v.parent,
                                v.name[0] ? v.name : NULL);
    } else {
      int k = v.kind == SCN_VERSION_WORLD ? SCN_HIST_WORLD : SCN_HIST_LOCAL;
      uint64_t *head = k == SCN_HIST_WORLD ? &heads->world : &heads->local;
      if (*head >= b[k])
        return SCN_INVALID;
      scn__hist_push_matrix(h, k, head, v.m);
    }
    if (h->broken)
      return SCN_NOMEM;
  }
  while (cur < open)
    import_bound(h, ++cur);
  for (int k = 0; k < SCN_HIST_RINGS; k++)
    h->begin[k] = bound_of(h, open)[k];
  if (!dead_complete(h))
    return SCN_INVALID;
  /* A world matrix gets a record the first time it changes in a tick (its stamp is older):
   * stamps say the open tick exactly where the versions have that record, or where the
   * transform was created in the open tick (no record, as there). Where a matrix counts as
   * changed in the open tick without one, its value now is its value as tick now closed
   * (the same transforms): that is the record. */
  const uint32_t stamp = scn__tm_stamp(tm);
  for (uint32_t i = 0; i < tm->n; i++) {
    scn__heads *heads = &h->heads[i];
    bool recorded = heads->world >= h->begin[SCN_HIST_WORLD];
    bool created = heads->meta >= h->begin[SCN_HIST_STRUCT] && !srec(h, heads->meta)->exists;
    if (recorded || created)
      tm->changed[i] = stamp;
    else if (tm->changed[i] == stamp)
      scn__hist_push_matrix(h, SCN_HIST_WORLD, &heads->world, tm->world[i][0]);
  }
  return h->broken ? SCN_NOMEM : SCN_OK;
}

int scn_world_history_import(scn_world *w, const scn_history_span *span, scn_version_next_fn next,
                             void *ud) {
  scn__tm *tm = &w->tm;
  if (w->scene->in_batch || span->now + 1 != tm->tick)
    return SCN_STATE;
  uint64_t open = span->now + 1;
  if (span->window > SCN_HISTORY_MAX || span->oldest > open ||
      (span->window && span->oldest + span->window < open) || (span->window && !span->oldest))
    return SCN_INVALID;
  int rc = scn_world_set_history(w, span->window);
  if (rc != SCN_OK)
    return rc;
  if (!tm->hist) { /* no window: no version either */
    scn_history_version v;
    rc = next(ud, &v);
    return rc < 0 ? rc : rc > 0 ? SCN_INVALID : SCN_OK;
  }
  scn__tm_flush(tm); /* the live world matrices are the values of the open tick */
  scn__hist_reset(tm);
  if (span->oldest == open) {
    scn_history_version v;
    rc = next(ud, &v);
    return rc < 0 ? rc : rc > 0 ? SCN_INVALID : SCN_OK;
  }
  rc = import_versions(tm, span, next, ud);
  if (rc != SCN_OK)
    scn__hist_reset(tm);
  return rc;
}

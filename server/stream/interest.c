#include "stream/interest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* The index of one world, with its regions. */
typedef struct world_space {
  scn_world *world;
  scn_space *space;
  scn_near *regions;
  uint32_t nregions;
  bool synced_ok; /* the last sync succeeded: regions may be evaluated */
  struct world_space *next;
} world_space;

struct scn_near {
  uint32_t refs;
  world_space *ws;
  scn_entity root;
  scn_near_spec spec;
  bool unbounded;
  uint32_t every;
  uint64_t created;   /* the tick count it was made at */
  uint64_t evaluated; /* the tick count of its last evaluation, 0: none */
  scn_scope *scope;
  scn_near *prev, *next; /* the world's regions */
};

typedef struct interest_counters {
  uint64_t nanos, evaluations, ticks, candidates, sync_failures;
} interest_counters;

/* A transform an evaluation sends: its matrix stays where it is until the frame copies it. */
typedef struct sent_entry {
  scn_entity entity;
  const float *m;
} sent_entry;

struct scn_interest {
  bool naive;
  sent_entry *sent; /* what the evaluation running sends, reused */
  size_t nsent, sent_cap;
  bool sent_failed;
  double tick_hz;
  uint64_t ticks; /* the stream's tick count at the last sync */
  world_space *spaces;
  uint64_t nregions;
  interest_counters counters;
};

scn_interest *scn_interest_new(bool naive, double tick_hz) {
  scn_interest *in = calloc(1, sizeof *in);
  if (in) {
    in->naive = naive;
    in->tick_hz = tick_hz;
  }
  return in;
}

static void space_free(world_space *ws) {
  scn_space_free(ws->space);
  free(ws);
}

void scn_interest_free(scn_interest *in) {
  if (!in)
    return;
  while (in->spaces) {
    world_space *ws = in->spaces;
    in->spaces = ws->next;
    space_free(ws);
  }
  free(in->sent);
  free(in);
}

/* ---- regions ----------------------------------------------------------------------------- */

static world_space *space_of(scn_interest *in, scn_world *w) {
  for (world_space *ws = in->spaces; ws; ws = ws->next)
    if (ws->world == w)
      return ws;
  world_space *ws = calloc(1, sizeof *ws);
  if (!ws || !(ws->space = scn_space_new(w))) {
    free(ws);
    return NULL;
  }
  /* Removals reach the index through the world's event log. */
  scn_world_keep_events(w, true);
  ws->world = w;
  ws->next = in->spaces;
  in->spaces = ws;
  return ws;
}

/* Nobody asks about this world any more: its index goes. */
static void drop_if_unused(scn_interest *in, world_space *ws) {
  if (ws->nregions)
    return;
  for (world_space **p = &in->spaces; *p; p = &(*p)->next)
    if (*p == ws) {
      *p = ws->next;
      break;
    }
  space_free(ws);
}

static void link_region(scn_interest *in, world_space *ws, scn_near *n) {
  n->ws = ws;
  n->next = ws->regions;
  if (ws->regions)
    ws->regions->prev = n;
  ws->regions = n;
  ws->nregions++;
  in->nregions++;
}

static bool same_spec(const scn_near_spec *a, const scn_near_spec *b) {
  if (a->follows != b->follows || a->radius != b->radius || a->margin != b->margin ||
      a->nbands != b->nbands)
    return false;
  if (a->follows ? a->entity != b->entity : memcmp(a->point, b->point, sizeof a->point) != 0)
    return false;
  for (uint32_t i = 0; i < a->nbands; i++)
    if (a->band_radius[i] != b->band_radius[i] || a->band_hz[i] != b->band_hz[i])
      return false;
  return true;
}

static scn_near *region_new(scn_interest *in, world_space *ws) {
  scn_near *n = calloc(1, sizeof *n);
  if (!n)
    return NULL;
  if (!(n->scope = scn_scope_new())) {
    free(n);
    return NULL;
  }
  n->refs = 1;
  n->created = in->ticks;
  link_region(in, ws, n);
  return n;
}

scn_near *scn_near_new(scn_interest *in, scn_world *w, scn_entity root, const scn_near_spec *spec,
                       uint32_t every, bool shared) {
  world_space *ws = space_of(in, w);
  if (!ws)
    return NULL;
  for (scn_near *n = shared ? ws->regions : NULL; n; n = n->next)
    if (!n->evaluated && !n->unbounded && n->created == in->ticks && n->root == root &&
        n->every == every && same_spec(&n->spec, spec)) {
      n->refs++;
      return n;
    }
  scn_near *n = region_new(in, ws);
  if (!n) {
    drop_if_unused(in, ws);
    return NULL;
  }
  n->root = root;
  n->spec = *spec;
  n->every = every;
  return n;
}

void scn_near_release(scn_interest *in, scn_near *n) {
  if (!n || --n->refs > 0)
    return;
  world_space *ws = n->ws;
  if (n->prev)
    n->prev->next = n->next;
  else
    ws->regions = n->next;
  if (n->next)
    n->next->prev = n->prev;
  ws->nregions--;
  in->nregions--;
  scn_scope_free(n->scope);
  free(n);
  drop_if_unused(in, ws);
}

scn_near *scn_near_detach(scn_interest *in, scn_near *n, bool keep) {
  if (n->refs == 1) {
    if (!keep)
      scn_scope_clear(n->scope);
    return n;
  }
  scn_scope *scope = keep ? scn_scope_clone(n->scope) : scn_scope_new();
  scn_near *d = scope ? calloc(1, sizeof *d) : NULL;
  if (!d) {
    scn_scope_free(scope);
    return NULL;
  }
  *d = *n;
  d->refs = 1;
  d->scope = scope;
  d->prev = d->next = NULL;
  link_region(in, n->ws, d);
  n->refs--;
  return d;
}

void scn_near_respec(scn_near *n, const scn_near_spec *spec) {
  n->unbounded = spec == NULL;
  if (spec)
    n->spec = *spec;
}

bool scn_near_unbounded(const scn_near *n) { return n->unbounded; }

scn_entity scn_near_center(const scn_near *n) {
  return !n->unbounded && n->spec.follows ? n->spec.entity : SCN_ENTITY_NONE;
}

scn_scope *scn_near_scope(scn_near *n) { return n->scope; }

uint64_t scn_near_evaluated(const scn_near *n) { return n->evaluated; }

/* ---- each tick ---------------------------------------------------------------------------- */

/* Cells sized for the reach of the regions in use (their geometric mean). */
static double cell_for(const world_space *ws) {
  double logs = 0;
  uint32_t n = 0;
  for (const scn_near *r = ws->regions; r; r = r->next)
    if (!r->unbounded) {
      logs += log(r->spec.radius + r->spec.margin);
      n++;
    }
  double cell = n ? exp(logs / n) / SCN_SPACE_CELLS_PER_REACH : 1;
  return isfinite(cell) && cell > 0 ? cell : 1;
}

void scn_interest_sync(scn_interest *in, uint64_t ticks) {
  in->ticks = ticks;
  if (!in->spaces)
    return;
  uint64_t start = uv_hrtime();
  for (world_space *ws = in->spaces; ws; ws = ws->next) {
    ws->synced_ok = scn_space_sync(ws->space, cell_for(ws)) == SCN_OK;
    in->counters.sync_failures += !ws->synced_ok;
  }
  in->counters.ticks++;
  in->counters.nanos += uv_hrtime() - start;
}

/* Ticks between two sends of an entity in a band of hz. */
static uint32_t band_every(const scn_interest *in, double hz) {
  double every = ceil(in->tick_hz / hz - 1e-9);
  return every < 1 ? 1 : every > 1e6 ? 1000000 : (uint32_t)every;
}

typedef struct eval_sink {
  scn_interest *in;
  scn_removed_fn removed;
  void *ud;
} eval_sink;

static void pass_removed(void *ud, scn_entity e) {
  eval_sink *k = ud;
  k->removed(k->ud, e);
}

static void note_sent(void *ud, scn_entity e, const float m[16]) {
  scn_interest *in = ((eval_sink *)ud)->in;
  if (in->nsent == in->sent_cap) {
    sent_entry *s = scn_array_grow(in->sent, &in->sent_cap, sizeof *s, in->nsent + 1);
    if (!s) {
      in->sent_failed = true;
      return;
    }
    in->sent = s;
  }
  in->sent[in->nsent++] = (sent_entry){e, m};
}

int64_t scn_near_eval(scn_interest *in, scn_near *n, uint64_t ticks, uint64_t now, bool full,
                      scn_visit_fn set, scn_removed_fn removed, void *ud) {
  world_space *ws = n->ws;
  if (!ws->synced_ok)
    return SCN_NOMEM;
  uint64_t start = uv_hrtime();
  const scn_near_spec *sp = &n->spec;
  scn_region r = {.radius = sp->radius,
                  .margin = sp->margin,
                  .unbounded = n->unbounded,
                  .root = n->root,
                  .naive = in->naive};
  if (!n->unbounded) {
    if (sp->follows) {
      if (!scn_space_position(ws->space, sp->entity, r.center))
        return SCN_NOT_FOUND; /* the center is gone: the stream ends the subscription */
    } else {
      memcpy(r.center, sp->point, sizeof r.center);
    }
    r.nbands = sp->nbands;
    for (uint32_t b = 0; b < sp->nbands; b++)
      r.bands[b] = (scn_band){sp->band_radius[b], band_every(in, sp->band_hz[b])};
  }
  /* What is sent is collected and written into the frame after the clock stops: the figure is
   * the interest work alone, not the frame's. */
  in->nsent = 0;
  in->sent_failed = false;
  eval_sink sink = {in, removed, ud};
  int64_t tested =
      scn_scope_eval(n->scope, ws->space, &r, now, full, note_sent, pass_removed, &sink);
  n->evaluated = ticks;
  in->counters.evaluations++;
  in->counters.candidates += tested > 0 ? (uint64_t)tested : 0;
  in->counters.nanos += uv_hrtime() - start;
  if (in->sent_failed) {
    scn_scope_clear(n->scope); /* what it sent is not all known: start again from nothing */
    return SCN_NOMEM;
  }
  for (size_t i = 0; i < in->nsent; i++)
    set(ud, in->sent[i].entity, in->sent[i].m);
  return tested;
}

uint64_t scn_interest_regions(const scn_interest *in) { return in->nregions; }

void scn_interest_stats(const scn_interest *in, scn_metrics_sink *k, uint64_t subscriptions) {
  size_t bytes = 0;
  for (const world_space *ws = in->spaces; ws; ws = ws->next) {
    bytes += sizeof *ws + scn_space_bytes(ws->space);
    for (const scn_near *n = ws->regions; n; n = n->next)
      bytes += sizeof *n + scn_scope_bytes(n->scope);
  }
  const interest_counters *c = &in->counters;
  scn_metric(k, "interest_subscriptions", "gauge", "Subscriptions with a region (near).",
             (double)subscriptions);
  scn_metric(k, "interest_regions", "gauge",
             "Regions evaluated (subscriptions that hold the same share one).",
             (double)in->nregions);
  scn_metric(k, "interest_seconds_total", "counter",
             "Seconds of interest work: spatial index upkeep and region evaluation.",
             (double)c->nanos / 1e9);
  scn_metric(k, "interest_ticks_total", "counter", "Ticks that did interest work.",
             (double)c->ticks);
  scn_metric(k, "interest_evaluations_total", "counter", "Region evaluations.",
             (double)c->evaluations);
  scn_metric(k, "interest_candidates_total", "counter",
             "Transforms tested against a region (the cells it covers).", (double)c->candidates);
  scn_metric(k, "interest_memory_bytes", "gauge",
             "Bytes held by the spatial indexes and what subscribers hold of their regions.",
             (double)bytes);
  scn_metric(k, "interest_index_failures_total", "counter",
             "Index updates that found no memory (their regions resync at the next tick).",
             (double)c->sync_failures);
}

/* Subscriptions by distance, on the stream's side: the regions subscribers ask for, shared by
 * the subscriptions that hold exactly the same, and each world's spatial index, brought up to
 * date once per tick for the worlds that have regions. What is near what is the core's
 * (scn_interest.h); this module knows which regions exist and what they cost. */
#ifndef SCN_STREAM_INTEREST_H
#define SCN_STREAM_INTEREST_H

#include "ops/metrics.h"
#include "scn_core.h"
#include "scn_interest.h"

#include <stdbool.h>
#include <stdint.h>

/* What a subscriber asked for in "near". */
typedef struct scn_near_spec {
  bool follows;      /* the center is the translation of entity's world matrix at each tick */
  scn_entity entity; /* with follows */
  double point[3];   /* without */
  double radius, margin;
  uint32_t nbands;
  double band_radius[SCN_BANDS_MAX], band_hz[SCN_BANDS_MAX];
} scn_near_spec;

typedef struct scn_interest scn_interest;
/* A region and what its subscribers hold of it. */
typedef struct scn_near scn_near;

/* naive: every region tests every transform (a reference for benchmarks). NULL: no memory. */
scn_interest *scn_interest_new(bool naive, double tick_hz);
/* Frees the module; every region must have been released. */
void scn_interest_free(scn_interest *in);

/* A region of w for a subscription that gets a frame every `every` ticks. A new subscription
 * (shared) shares one made this tick for the same spec, root and rate, not yet evaluated.
 * NULL: no memory. */
scn_near *scn_near_new(scn_interest *in, scn_world *w, scn_entity root, const scn_near_spec *spec,
                       uint32_t every, bool shared);
void scn_near_release(scn_interest *in, scn_near *n);
/* A region of its own for one subscriber of n (n itself when nobody else shares it): with the
 * same members (keep) or none. NULL: no memory (n is unchanged). */
scn_near *scn_near_detach(scn_interest *in, scn_near *n, bool keep);
/* Gives a region that only this subscriber has a new spec; NULL makes it unbounded: everything
 * in its root's subtree (or world) comes in at the next evaluation. */
void scn_near_respec(scn_near *n, const scn_near_spec *spec);
bool scn_near_unbounded(const scn_near *n);
/* The entity whose destruction ends the region (SCN_ENTITY_NONE for a fixed point). */
scn_entity scn_near_center(const scn_near *n);
scn_scope *scn_near_scope(scn_near *n);
/* The tick count at which the region was last evaluated (0: never). */
uint64_t scn_near_evaluated(const scn_near *n);

/* Brings the index of every world with regions up to its last closed tick (once per tick). */
void scn_interest_sync(scn_interest *in, uint64_t ticks);
/* Evaluates n at this tick (ticks: the stream's tick count; now: the world's last closed
 * tick); see scn_scope_eval. SCN_NOMEM: its members are forgotten, its subscribers need a full
 * frame. */
int64_t scn_near_eval(scn_interest *in, scn_near *n, uint64_t ticks, uint64_t now, bool full,
                      scn_visit_fn set, scn_removed_fn removed, void *ud);

uint64_t scn_interest_regions(const scn_interest *in);
void scn_interest_stats(const scn_interest *in, scn_metrics_sink *k, uint64_t subscriptions);

#endif

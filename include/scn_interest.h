/* Interest: which transforms of a world lie near a point, kept per subscriber with hysteresis
 * and send rates by distance. Part of the transform core: it knows nothing of sockets or JSON.
 *
 * A space indexes the translations of a world's world matrices (elements 12, 13, 14) in a
 * uniform grid of cells, brought up to date once per tick from what changed. A scope is what one
 * subscriber holds: the entities in its region, each with the tick it was last sent. Evaluating
 * a scope against a region at a tick visits only the cells the region covers, so a tick costs
 * what changed plus what the regions cover, never the world's size times the subscribers. */
#ifndef SCN_INTEREST_H
#define SCN_INTEREST_H

#include "scn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the spatial index of one world ------------------------------------------------------ */

typedef struct scn_space scn_space;

/* The cell size that suits regions of a given reach (radius + margin): a region then covers a
 * few cells a side, whatever the world's scale. */
#define SCN_SPACE_CELLS_PER_REACH 3

/* An index of w, empty until the first sync. NULL when out of memory. */
scn_space *scn_space_new(scn_world *w);
void scn_space_free(scn_space *sp);
/* Brings the index up to w's last closed tick. cell is the cell size wanted (world units,
 * positive): the index is rebuilt with it when the size in use is off by more than a factor
 * of two, and otherwise updated from the transforms whose world matrix changed and the
 * destroyed ones (w must keep its event log since the last sync: scn_world_keep_events; when
 * the log does not reach back, the index is rebuilt). SCN_OK or SCN_NOMEM (the index is then
 * empty and rebuilt at the next sync). */
int scn_space_sync(scn_space *sp, double cell);
/* The translation of e's world matrix as of the last sync; false when e had no transform. */
bool scn_space_position(const scn_space *sp, scn_entity e, double out[3]);
size_t scn_space_count(const scn_space *sp);
/* Bytes held (items, cells and maps). */
size_t scn_space_bytes(const scn_space *sp);
/* Times the index was rebuilt (a cell size change, or a log that did not reach back). */
uint64_t scn_space_rebuilds(const scn_space *sp);

/* ---- regions and scopes ------------------------------------------------------------------ */

#define SCN_BANDS_MAX 8

/* Entities at distance at most radius are sent at most once every `every` ticks. */
typedef struct scn_band {
  double radius;
  uint32_t every;
} scn_band;

typedef struct scn_region {
  double center[3];
  double radius, margin; /* in at distance <= radius; stays in while <= radius + margin */
  bool unbounded;        /* every transform is in (a region removed: see scn_scope_eval) */
  scn_entity root;       /* SCN_ENTITY_NONE, or a subtree an entity must also lie in */
  uint32_t nbands;       /* radii strictly increasing; beyond the last one, every tick */
  scn_band bands[SCN_BANDS_MAX];
  bool naive; /* test every transform of the world (a reference for benchmarks) */
} scn_region;

typedef struct scn_scope scn_scope;

scn_scope *scn_scope_new(void);
void scn_scope_free(scn_scope *sc);
/* A copy of sc, with the same members and their ticks; NULL when out of memory. */
scn_scope *scn_scope_clone(const scn_scope *sc);
/* Forgets every member. */
void scn_scope_clear(scn_scope *sc);
/* e is held as if it was last sent at tick sent (a subscription that gains a region starts
 * from what its subscriber holds). SCN_OK or SCN_NOMEM. */
int scn_scope_hold(scn_scope *sc, scn_entity e, uint64_t sent);
size_t scn_scope_count(const scn_scope *sc);
size_t scn_scope_bytes(const scn_scope *sc);
/* Every member, in no particular order. */
void scn_scope_visit(const scn_scope *sc, void (*fn)(void *ud, scn_entity e), void *ud);

typedef void (*scn_removed_fn)(void *ud, scn_entity e);

/* Evaluates sc against region r at tick now (the last closed tick, to which sp is synced),
 * with hysteresis: an entity comes in at distance <= radius (with root, when also in its
 * subtree), and a member stays while its distance is <= radius + margin and it still has a
 * transform in the scope. set is called with the world matrix of each entity the subscriber
 * is due: every one that came in, and every member whose world matrix changed after it was
 * last sent and whose band lets it be sent at now (a band sends the latest value; an entity
 * it holds back stays due). removed is called for each member that left. full starts from
 * nothing (every member is then one that came in). Returns the number of entities tested, or
 * SCN_NOMEM: the scope is then cleared and the subscriber needs a full frame. */
int64_t scn_scope_eval(scn_scope *sc, scn_space *sp, const scn_region *r, uint64_t now, bool full,
                       scn_visit_fn set, scn_removed_fn removed, void *ud);

#endif

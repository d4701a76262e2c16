/* What the daemon_interest suites share: a map of entity ids (to a matrix and a number), a
 * near region written as the request's JSON, frames read in either form (json "set" or b64
 * "ids"/"ms") and applied to the set a subscriber holds, near subscriptions made and updated,
 * and the wait after which every frame of the commands answered so far has arrived. */
#ifndef T_INTEREST_FIXTURES_H
#define T_INTEREST_FIXTURES_H

#include "daemon_fixtures.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- a map of entity ids ------------------------------------------------------------------ */

typedef struct id_slot {
  uint64_t id; /* 0: empty */
  uint64_t aux;
  float m[16];
} id_slot;

/* Entity id -> (aux, matrix), open addressing; ids are never 0. */
typedef struct id_map {
  id_slot *slots;
  size_t cap, n;
} id_map;

id_slot *idm_get(const id_map *m, uint64_t id);
/* The slot of id, added (aux 0, identity matrix) when absent. */
id_slot *idm_put(id_map *m, uint64_t id);
bool idm_del(id_map *m, uint64_t id);
void idm_clear(id_map *m);
void idm_free(id_map *m);
#define IDM_EACH(map, s)                                                                           \
  for (id_slot *s = (map)->slots; (map)->slots && s < (map)->slots + (map)->cap; s++)              \
    if (s->id)

/* ---- near regions ------------------------------------------------------------------------- */

#define NEAR_MAX_BANDS 4

typedef struct near_spec {
  bool on;         /* false: no region ("near": null on an update) */
  uint64_t entity; /* the center's entity, 0 for a fixed point */
  double point[3]; /* the fixed center */
  double radius;   /* R */
  double margin;   /* M (0: left out of the request) */
  int nbands;      /* bands: radius and hz each */
  double band_radius[NEAR_MAX_BANDS], band_hz[NEAR_MAX_BANDS];
} near_spec;

/* The near value as the request carries it ({"point":...,"radius":...} or null) in out. */
void near_json(const near_spec *n, char *out, size_t cap);

/* ---- frames ------------------------------------------------------------------------------- */

/* A frame of either form, read: its set as ids and matrices, its removed ids. */
typedef struct frame_view {
  uint64_t sub;
  long tick;
  bool full;
  int n;
  uint64_t *ids;
  float (*ms)[16];
  int nremoved;
  uint64_t *removed;
} frame_view;

/* Reads f as a frame of the given form, checking its shape exactly (json: the seven fields;
 * b64: "ids" and "ms" in place of "set"); false (asserted and reported) when it is not one. */
bool frame_read(const cJSON *f, bool b64, frame_view *v);
void frame_view_free(frame_view *v);
/* The matrix the frame's set holds for id, NULL when absent. */
const float *frame_matrix(const frame_view *v, uint64_t id);
bool frame_removes(const frame_view *v, uint64_t id);
/* Applies v to what a subscriber holds (full: replaces it); a removed id that was not held is
 * counted in *stray when stray is not NULL. */
void frame_apply(const frame_view *v, id_map *held, int *stray);

/* ---- subscriptions ------------------------------------------------------------------------ */

/* Subscribes k to world with near (may be NULL: none), root (0: none) and hz (0: none); the
 * subscription's id, 0 (asserted) when refused. */
uint64_t subscribe_near(t_client *k, const char *world, const near_spec *near, uint64_t root,
                        double hz);
/* subscribe.update of sub with near (near->on false: null); asserted ok. */
void update_near(t_client *k, uint64_t sub, const near_spec *near);
/* hello with "matrices": "b64" on k, asserted ok. */
void hello_b64(t_client *k);

/* Waits until every frame of the commands answered so far has reached each of conns (kept
 * there as events): the world has run a tick past those commands (asked on ctl with
 * transform.get of probe, an entity of world), then a ping on each connection. */
void interest_sync(t_client *ctl, const char *world, uint64_t probe, t_client **conns, int n);

/* Pure translation matrices, and translations compared. */
void mat_translation(float m[16], double x, double y, double z);
bool mat_same(const float a[16], const float b[16]);

/* The open subscriptions the daemon counts (info's "subscriptions"). */
double info_subscriptions_of(t_client *k);

#endif

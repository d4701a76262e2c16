/* Random workloads of every mutating command, run side by side on a subject (a daemon that is
 * killed, restarted, taken over or moved) and a reference (a daemon without --data that is
 * never disturbed). Every response of the subject must equal the reference's, and so must the
 * whole state read back after each disturbance: worlds, transforms, links, names and matrices
 * bit for bit, and which entity ids are alive.
 *
 * Entity ids: in a standalone subject they must be exactly the reference's (a replay makes the
 * ids it made live). A cluster hands out ids from ranges, so there the ids are paired by the
 * order in which they were made, and every later use of one is translated. */
#ifndef T_WORKLOAD_H
#define T_WORKLOAD_H

#include "rng.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* One request and the group whose owner must run it ("" when any daemon may). */
typedef struct wl_req {
  char *line;
  char group[16];
} wl_req;

/* Sends n requests and leaves their responses in out (NULL where none came): false when the
 * side cannot be reached any more. A cluster side follows MOVED and waits out UNAVAILABLE. */
typedef bool (*wl_send_fn)(void *ud, const wl_req *reqs, size_t n, cJSON **out);

typedef struct wl_side {
  wl_send_fn send;
  void *ud;
} wl_side;

typedef struct wl_ent {
  unsigned long long id[2]; /* on the subject, on the reference */
  int group;                /* the group it was made in (cluster: where it lives) */
  bool alive;
} wl_ent;

typedef struct wl_world {
  const char *name;
  int group;
  bool exists;
  int *members; /* entity indexes believed to hold a transform here */
  size_t n, cap;
} wl_world;

#define WL_WORLDS 7
#define WL_GROUPS 4
#define WL_KINDS 14

typedef struct workload {
  rng r;
  bool cluster;
  wl_side side[2]; /* [0] the subject, [1] the reference */
  wl_ent *ents;
  size_t nents, cap;
  wl_world worlds[WL_WORLDS];
  unsigned sent[WL_KINDS], answered_ok[WL_KINDS];
  unsigned steps;
  char last[4096]; /* the last request sent to the subject, for a failure's report */
} workload;

/* The commands the generator makes, by name: every mutating command of the table must be one.
 * Forms that journal differently have kinds of their own ("world.destroy (entities)"). */
extern const char *const wl_command_names[WL_KINDS];
/* The group names (cluster: the part of a world's name before the first '.'). */
extern const char *const wl_group_names[WL_GROUPS];

/* reference.send may be NULL: the subject alone, nothing compared (wl_step only). */
void wl_init(workload *w, uint64_t seed, bool cluster, wl_side subject, wl_side reference);
void wl_free(workload *w);
/* One random command (a batch counts as one) on both sides; false (reported) when the two
 * answers differ or a side is gone. */
bool wl_step(workload *w);
/* Reads the whole state of both sides and compares it (reported with when); the model of
 * which transforms exist is rebuilt from what was read. */
bool wl_compare_state(workload *w, const char *when);
/* Asks both sides which entity ids are alive (by giving each a transform in a probe world of
 * its group) and compares: changes the state, so it comes last. */
bool wl_compare_entities(workload *w);
/* The group of a world name (its index in wl_group_names), -1 when unknown. */
int wl_group_of(const char *world);

#endif

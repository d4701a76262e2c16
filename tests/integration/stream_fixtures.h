/* What the daemon_stream suites share: their daemon, its tick rate and the waits built on it, a
 * subscription's frames read and checked against the contract (full first, then deltas in
 * tick order), expected matrices and removals, and transforms made and moved. */
#ifndef T_STREAM_FIXTURES_H
#define T_STREAM_FIXTURES_H

#include "daemon_fixtures.h"

#include <stdbool.h>
#include <stdint.h>

/* Each daemon_stream suite's daemon runs 20 ticks per second, so a tick is 50 ms. */
#define TICK_HZ "20"
#define TICK_MS 50
/* How long "nothing is sent" is watched: several ticks. */
#define QUIET_MS (5 * TICK_MS)
/* How long a frame that must come is waited for. */
#define FRAME_WAIT_MS 2000

/* The daemon each daemon_stream suite's tests share (TICK_HZ ticks per second): the suite's
 * setup starts it, its cleanup stops it, and it must exit 0 then. */
extern t_daemon stream_daemon;
int stream_suite_init(void);
int stream_suite_clean(void);

typedef struct sub_state {
  int64_t id;
  char world[72];
  double last_tick;
  int frames;
} sub_state;

/* Subscribes on k; root 0 is the whole world, hz 0 leaves it out. */
bool subscribe(t_client *k, sub_state *s, const char *world, int64_t root, double hz);

/* Checks that f is exactly a frame of s (the contract's seven fields, nothing else), that its
 * tick is above the previous one, and full when full is 0 or 1 (-1: either). */
bool check_frame(sub_state *s, const cJSON *f, int full);

/* The next event on k, which must be a frame of s. */
cJSON *expect_frame(t_client *k, sub_state *s, int full);

typedef struct want {
  int64_t e;
  float x, y, z;
} want;

void mat_t(float m[16], float x, float y, float z);

bool matrix_equals(const cJSON *m, const float want_m[16]);

/* The matrix of e in the frame's set (NULL when absent); counts its occurrences. */
const cJSON *set_matrix(const cJSON *f, int64_t e, int *count);

/* The frame's set is exactly these entities, each once, each a pure translation. */
void check_set(const cJSON *f, const want *w, int n);

/* The frame's removed list is exactly these ids (in any order, each once). */
void check_removed(const cJSON *f, const int64_t *ids, int n);

void check_no_removed(const cJSON *f);

int64_t mk(t_client *k, const char *world, int64_t parent, double x, double y, double z);

void set_t(t_client *k, const char *world, int64_t e, double x, double y, double z);

/* The suite's connections keep the events that arrive while a call waits for its response. */
#define OPEN(k, port) (CONNECT_FATAL(&(k), (port)), t_client_keep_events(&(k)))

/* Reads n frames on k, each for one of subs[0..nsubs), into out[] by subscription. */
void frames_by_sub(t_client *k, sub_state *subs, cJSON **out, int nsubs);

/* Equal as JSON once "sub" is left out of both. */
bool same_but_sub(const cJSON *a, const cJSON *b);

#endif

/* What the randomized crash suites share: their seeds, pipelined requests to one daemon, and
 * the check that every kind of command was answered ok at least once. */
#ifndef T_CRASH_COMMON_H
#define T_CRASH_COMMON_H

#include "harness.h"
#include "workload.h"

#include <stdint.h>

#define CRASH_MAX_SEEDS 1000

typedef struct crash_seeds {
  uint64_t seed[CRASH_MAX_SEEDS];
  int count;
  int steps; /* commands per seed */
} crash_seeds;

/* SCENED_SEED=N: that seed alone; otherwise SCENED_SEEDS (default fallback) random seeds.
 * SCENED_STEPS: commands per seed (default 400). */
void crash_seeds_read(crash_seeds *s, int fallback);

/* A daemon as a side of the workload (a wl_send_fn; ud: the t_client connected to it): sends
 * the requests in pipelined chunks and reads their answers in order. */
bool crash_send_pipelined(void *ud, const wl_req *reqs, size_t n, cJSON **out);
/* Asks for matrices in base64 on c, so states compare bit for bit; true when answered ok. */
bool crash_hello_b64(t_client *c);

/* Reads on the side while the workload runs, for the sanitizers' sake: subscriptions (whole
 * worlds, subtrees, capped rates) come and go, and past ticks are read, on connection c of the
 * subject; whatever arrives is drained and not compared (a reference's ticks differ). */
void crash_watch(t_client *c, workload *w);

/* Adds a finished workload's counts to the process's totals, and asserts (once the suite's
 * seeds ran) that each kind of command was sent and answered ok at least once. */
void crash_count_kinds(const workload *w);
void crash_check_coverage(void);

#endif

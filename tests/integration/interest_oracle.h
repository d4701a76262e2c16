/* The brute-force oracle of the daemon_interest suites: random worlds and motions driven on a
 * real daemon while near subscriptions watch them, and after every step the set each
 * subscriber holds (built only from its frames) compared with a direct distance computation,
 * hysteresis included. Every world matrix is an integer matrix (translations and quarter
 * turns), so every squared distance is an integer while every squared radius is one half
 * away from one: no distance lies near a threshold, where float rounding would decide. */
#ifndef T_INTEREST_ORACLE_H
#define T_INTEREST_ORACLE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct oracle_run {
  uint64_t seed;
  int steps;       /* random steps after the world is built */
  int transforms;  /* transforms the world starts with */
  const char *tag; /* printed with the seed */
} oracle_run;

/* Runs one seed on the daemon listening on port; false (asserted and reported, the seed
 * printed) at the first difference. */
bool oracle_run_seed(int port, const oracle_run *run);

/* Seeds from the environment: SCENED_SEED=N runs that one alone, else count random ones
 * (printed when they run). Returns how many were written to seeds (at most max). */
int oracle_seeds(uint64_t *seeds, int max, int count);
/* SCENED_STEPS when set, else fallback. */
int oracle_steps(int fallback);

#endif

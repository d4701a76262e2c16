/* Monotonic milliseconds, and a sleep of that many, for the tests' deadlines. */
#ifndef T_CLOCK_H
#define T_CLOCK_H

#include <time.h>

static inline long t_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void t_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

#endif

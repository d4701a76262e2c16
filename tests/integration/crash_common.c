#include "crash_common.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long env_long(const char *name, long fallback) {
  const char *s = getenv(name);
  char *end;
  long v = s && *s ? strtol(s, &end, 10) : fallback;
  return s && *s && *end == '\0' && v > 0 ? v : fallback;
}

void crash_seeds_read(crash_seeds *s, int fallback) {
  memset(s, 0, sizeof *s);
  s->steps = (int)env_long("SCENED_STEPS", 400);
  const char *one = getenv("SCENED_SEED");
  if (one && *one) {
    s->seed[0] = strtoull(one, NULL, 10);
    s->count = 1;
    return;
  }
  long n = env_long("SCENED_SEEDS", fallback);
  s->count = n > CRASH_MAX_SEEDS ? CRASH_MAX_SEEDS : (int)n;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  rng r = {(uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()};
  for (int i = 0; i < s->count; i++)
    s->seed[i] = rng_next(&r) >> 16; /* short enough to type */
}

bool crash_hello_b64(t_client *c) {
  cJSON *r = t_client_call(c, "{\"cmd\":\"hello\",\"matrices\":\"b64\"}");
  bool ok = t_resp_ok(r);
  cJSON_Delete(r);
  return ok;
}

bool crash_send_pipelined(void *ud, const wl_req *reqs, size_t n, cJSON **out) {
  t_client *c = ud;
  enum { CHUNK = 200 };
  for (size_t at = 0; at < n; at += CHUNK) {
    size_t end = at + CHUNK < n ? at + CHUNK : n;
    text t = {0};
    for (size_t i = at; i < end; i++) {
      text_add(&t, reqs[i].line, strlen(reqs[i].line));
      text_add(&t, "\n", 1);
    }
    int rc = t_client_send_raw(c, t.s, t.len);
    text_free(&t);
    if (rc != 0)
      return false;
    for (size_t i = at; i < end; i++)
      if (!(out[i] = t_client_recv_json(c, 20000)))
        return false;
  }
  return true;
}

static unsigned sent[WL_KINDS], answered_ok[WL_KINDS];

void crash_count_kinds(const workload *w) {
  for (int k = 0; k < WL_KINDS; k++) {
    sent[k] += w->sent[k];
    answered_ok[k] += w->answered_ok[k];
  }
}

void crash_check_coverage(void) {
  unsigned total = 0;
  for (int k = 0; k < WL_KINDS; k++)
    total += sent[k];
  if (total < 300)
    return; /* (SCENED_STEPS set low, to look at something else) */
  for (int k = 0; k < WL_KINDS; k++) {
    if (answered_ok[k] == 0)
      fprintf(stderr, "  %s: sent %u times, never answered ok\n", wl_command_names[k], sent[k]);
    CU_ASSERT(answered_ok[k] > 0);
  }
}

void crash_watch(t_client *c, workload *w) {
  rng *r = &w->r;
  const wl_world *wd = &w->worlds[rng_below(r, WL_WORLDS)];
  uint32_t roll = rng_below(r, 100);
  char line[256];
  line[0] = '\0';
  unsigned long long e = w->nents ? w->ents[rng_below(r, (uint32_t)w->nents)].id[0] : 1;
  if (roll < 10)
    snprintf(line, sizeof line, "{\"cmd\":\"subscribe\",\"world\":\"%s\"%s}", wd->name,
             rng_chance(r, 0.3) ? ",\"hz\":7" : "");
  else if (roll < 20)
    snprintf(line, sizeof line, "{\"cmd\":\"subscribe\",\"world\":\"%s\",\"root\":%llu}", wd->name,
             e);
  else if (roll < 25)
    snprintf(line, sizeof line, "{\"cmd\":\"unsubscribe\",\"sub\":%u}", 1 + rng_below(r, 40));
  else if (roll < 45)
    snprintf(line, sizeof line,
             "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%u}", wd->name,
             e, 1 + rng_below(r, 400));
  if (line[0])
    t_client_send(c, line);
  char *got;
  while ((got = t_client_recv(c, 0)))
    free(got);
}

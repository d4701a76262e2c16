/* Durability under random workloads (the contract's "Durability"): a daemon with --data and
 * --fsync always runs the same random commands as a reference daemon without --data, answer
 * for answer; now and then it is killed with SIGKILL and restarted, stopped with SIGTERM and
 * restarted, or told to save (so that later state is part snapshot, part journal), and after
 * each restart its whole state must equal the reference's. Ids included: a restart after any
 * prefix of the workload makes the same ids as a daemon that never stopped.
 *
 * Seeds are printed; SCENED_SEED=N runs that one, SCENED_SEEDS=N runs N random ones (make soak
 * runs many), SCENED_STEPS=N sets the commands per seed. */
#include "crash_common.h"
#include "daemon_fixtures.h"
#include "suites.h"
#include "workload.h"

#include "wire.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A standalone daemon as a side of the workload. */
typedef struct solo {
  t_daemon d;
  t_client c;
  t_client watch; /* the subject's subscriber and reader of past ticks (crash_watch) */
  bool up, watched;
  const char *const *args;
} solo;

static bool solo_connect(solo *s) {
  if (!CONNECT(&s->c, s->d.port) || (s->watched && !CONNECT(&s->watch, s->d.port)))
    return false;
  return crash_hello_b64(&s->c);
}

static bool solo_start(solo *s) {
  s->up = START(&s->d, s->args);
  return s->up && solo_connect(s);
}

static void solo_stop(solo *s, int sig) {
  if (!s->up)
    return;
  t_client_close(&s->c);
  if (s->watched)
    t_client_close(&s->watch);
  int status = t_daemon_stop(&s->d, sig, 20000);
  if (sig == SIGTERM)
    CU_ASSERT_EQUAL(status, 0);
  s->up = false;
}

static bool restart(solo *s, int sig, workload *w, const char *when) {
  solo_stop(s, sig);
  if (!solo_start(s)) {
    CU_FAIL("the subject restarted");
    return false;
  }
  bool same = wl_compare_state(w, when);
  CU_ASSERT(same);
  return same;
}

/* One seed: the workload, with a disturbance every few dozen commands. */
static bool run_seed(uint64_t seed, int steps, bool autosave) {
  char dir[128];
  if (!t_temp_dir(dir, sizeof dir, "crash")) {
    CU_FAIL("a temporary directory");
    return false;
  }
  fprintf(stderr, "  crash: seed %llu%s (SCENED_SEED=%llu replays it)\n", (unsigned long long)seed,
          autosave ? ", autosave every 0.2 s" : "", (unsigned long long)seed);
  const char *sub_args[] = {
      "--data", dir, "--fsync", "always", "--save-interval", autosave ? "0.2" : "0", NULL};
  solo sub = {.args = sub_args, .watched = true}, ref = {.args = NULL};
  bool ok = solo_start(&sub) && solo_start(&ref);
  workload w;
  wl_init(&w, seed, false, (wl_side){crash_send_pipelined, &sub.c},
          (wl_side){crash_send_pipelined, &ref.c});
  rng r = {seed ^ UINT64_C(0x5eed)};
  int next = 20 + (int)rng_below(&r, 60);
  int kills = 0, stops = 0, saves = 0;
  for (int i = 0; ok && i < steps; i++) {
    ok = wl_step(&w);
    crash_watch(&sub.watch, &w);
    if (!ok || i < next)
      continue;
    next = i + 20 + (int)rng_below(&r, 60);
    switch (rng_below(&r, 4)) {
    case 0:
    case 1:
      kills++;
      ok = restart(&sub, SIGKILL, &w, "after kill -9 and a restart");
      break;
    case 2:
      stops++;
      ok = restart(&sub, SIGTERM, &w, "after SIGTERM and a restart");
      break;
    default: {
      saves++;
      cJSON *a = t_client_call(&sub.c, "{\"cmd\":\"save\"}");
      ok = t_resp_ok(a);
      CU_ASSERT(ok);
      cJSON_Delete(a);
    }
    }
  }
  if (ok)
    ok = restart(&sub, SIGKILL, &w, "after the last command, kill -9 and a restart") &&
         wl_compare_entities(&w);
  CU_ASSERT(ok);
  fprintf(stderr,
          "  crash: seed %llu: %u commands (%d kill -9, %d SIGTERM, %d saves), %zu entities: %s\n",
          (unsigned long long)seed, w.steps, kills, stops, saves, w.nents,
          ok ? "same" : "DIFFERENT");
  if (!ok)
    fprintf(stderr, "  the subject's log: %s; its data: %s\n", sub.d.log_path, dir);
  crash_count_kinds(&w);
  wl_free(&w);
  solo_stop(&sub, SIGTERM);
  solo_stop(&ref, SIGTERM);
  if (ok) {
    t_remove_tree(dir);
    unlink(sub.d.log_path);
  }
  return ok;
}

static void test_random_crashes(void) {
  crash_seeds seeds;
  crash_seeds_read(&seeds, 8);
  for (int i = 0; i < seeds.count; i++)
    if (!run_seed(seeds.seed[i], seeds.steps, i % 2 == 1))
      return; /* (what it covered says nothing then) */
  crash_check_coverage();
}

/* The generator makes every command of the table that the journal records. */
static void test_every_mutating_command_covered(void) {
  for (unsigned i = 0; i < scn_command_count; i++) {
    if (!(scn_commands[i].flags & SCN_CMD_MUTATES))
      continue;
    bool made = false;
    for (int k = 0; k < WL_KINDS; k++)
      made |= strcmp(wl_command_names[k], scn_commands[i].name) == 0;
    if (!made)
      fprintf(stderr, "  %s changes state, and the random workload never sends it\n",
              scn_commands[i].name);
    CU_ASSERT(made);
  }
}

/* The user's report: a world destroyed, then kill -9 under --fsync always: it stays destroyed. */
static void test_destroyed_world_stays_destroyed(void) {
  char dir[128];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "crash"));
  const char *args[] = {"--data", dir, "--fsync", "always", NULL};
  t_daemon d;
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"g1.a\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"g1.b\"}");
  OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"g1.a\"}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"g1.a\"}");
  t_client_close(&c);
  t_daemon_stop(&d, SIGKILL, 10000);
  if (!START_CONNECTED(&d, &c, args))
    return;
  cJSON *r = OK(&c, "{\"cmd\":\"world.list\"}");
  const cJSON *worlds = cJSON_GetObjectItemCaseSensitive(r, "worlds");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(worlds), 1);
  CU_ASSERT(t_resp_str_is(cJSON_GetArrayItem(worlds, 0), "name", "g1.b"));
  cJSON_Delete(r);
  t_client_close(&c);
  STOP_OK(&d, 10000);
  t_remove_tree(dir);
}

int t_register_daemon_crash(void) {
  static const t_test tests[] = {
      {"every mutating command is in the random workload", test_every_mutating_command_covered},
      {"a destroyed world stays destroyed after kill -9", test_destroyed_world_stays_destroyed},
      {"random workloads: kill -9, SIGTERM and save against a reference", test_random_crashes},
  };
  return T_ADD_SUITE("daemon_crash", NULL, NULL, tests);
}

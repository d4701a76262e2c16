/* Packed frames from the real daemon to the clients: the C library's frame handler gets, tick
 * for tick, what a b64 subscriber on another connection gets within the contract's tolerance
 * (and on a new grid after subscribe.update); scenectl subscribe packed=0.001 prints matrices
 * within the grid of the daemon's. (The Python client's, against the daemon: clients_scripts.) */
#include "client_fixtures.h"
#include "client_packed_fixtures.h"
#include "daemon_fixtures.h"
#include "scn_client.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_ENT = 24, MAX_TICKS = 400 };

/* One connection's view of the world, tick by tick: the state after each frame. */
typedef struct history {
  const double *ids; /* the world's entities, N_ENT of them */
  float now[N_ENT][16];
  bool held[N_ENT];
  int nticks, frames, packed_frames;
  double tick[MAX_TICKS];
  float at[MAX_TICKS][N_ENT][16];
  bool full_seen;
} history;

static int index_of(const history *h, uint64_t id) {
  for (int i = 0; i < N_ENT; i++)
    if ((uint64_t)h->ids[i] == id)
      return i;
  return -1;
}

static void record(void *ud, const scn_cli_frame *f) {
  history *h = ud;
  h->frames++;
  h->packed_frames += f->packed;
  h->full_seen |= f->full;
  for (size_t i = 0; i < f->n; i++) {
    int k = index_of(h, f->ids[i]);
    if (k >= 0) {
      memcpy(h->now[k], f->matrices[i], 64);
      h->held[k] = true;
    }
  }
  for (size_t i = 0; i < f->nremoved; i++) {
    int k = index_of(h, f->removed[i]);
    if (k >= 0)
      h->held[k] = false;
  }
  bool all = true;
  for (int k = 0; k < N_ENT; k++)
    all &= h->held[k];
  if (all && h->nticks < MAX_TICKS) {
    h->tick[h->nticks] = f->tick;
    memcpy(h->at[h->nticks++], h->now, sizeof h->now);
  }
}

/* Ticks both saw, each entity within the tolerance of step; how many were compared. from: the
 * first tick to compare. */
static int compare(const history *exact, const history *packed, double step, double from) {
  int compared = 0;
  double worst = 0;
  for (int i = 0, j = 0; i < exact->nticks && j < packed->nticks;) {
    if (exact->tick[i] < packed->tick[j]) {
      i++;
    } else if (exact->tick[i] > packed->tick[j]) {
      j++;
    } else {
      if (exact->tick[i] >= from) {
        for (int k = 0; k < N_ENT; k++) {
          double deg;
          bool ok = packed_within(step, exact->at[i][k], packed->at[j][k], &deg);
          worst = fmax(worst, deg);
          if (!ok) {
            char what[160];
            snprintf(what, sizeof what, "tick %.0f entity %.0f: [12..14] %g %g %g for %g %g %g",
                     exact->tick[i], exact->ids[k], packed->at[j][k][12], packed->at[j][k][13],
                     packed->at[j][k][14], exact->at[i][k][12], exact->at[i][k][13],
                     exact->at[i][k][14]);
            t_report_text("outside the packed tolerance", what);
            CU_FAIL("a packed matrix outside the tolerance");
            return compared;
          }
        }
        compared++;
      }
      i++, j++;
    }
  }
  printf("  %d ticks compared, step %g: worst rotation error %.3f degrees\n", compared, step,
         worst);
  return compared;
}

/* Sets the local matrix of e to m (exact, as base64). */
static bool set_matrix(scn_cli *c, const char *world, double e, const float m[16]) {
  char text[SCN_CLI_B64_MATRIX_LEN + 1];
  scn_cli_matrix_to_b64(m, text);
  return call_fine(
      c, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,\"matrix_b64\":\"%s\"}",
      world, e, text);
}

/* Polls both connections until each has seen a frame of a tick past after (or WAIT_MS). */
static void catch_up(scn_cli *a, history *ha, scn_cli *b, history *hb, double after) {
  long deadline = t_now_ms() + WAIT_MS;
  while (t_now_ms() < deadline && !(ha->nticks && ha->tick[ha->nticks - 1] > after && hb->nticks &&
                                    hb->tick[hb->nticks - 1] > after)) {
    scn_cli_poll_events(a, 5);
    scn_cli_poll_events(b, 5);
  }
}

/* Moves a few entities of the world at random: small steps, whole new matrices, a shear now and
 * then (a raw matrix). Returns the world's tick after (a transform.get of one of them). */
static double move_some(scn_cli *w, const char *world, const double *ids, rng *r) {
  float m[16];
  for (int k = 0, n = 1 + (int)rng_below(r, 5); k < n; k++) {
    double e = ids[rng_below(r, N_ENT)];
    packed_random_matrix(r, m, rng_chance(r, 0.1));
    CU_ASSERT(set_matrix(w, world, e, m));
  }
  cJSON *got =
      call_ok(w, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}", world, ids[0]);
  double tick = got ? t_resp_num(got, "tick") : 0;
  cJSON_Delete(got);
  return tick;
}

static void test_lib_packed_vs_b64(void) {
  uint64_t seed = packed_seed("clients_packed_daemon library");
  rng r = {seed};
  scn_cli_options bo = {
      .host = "127.0.0.1", .port = clients_daemon.port, .matrices = SCN_CLI_MATRICES_B64};
  scn_cli *w = open_cli(clients_daemon.port, NULL, 0), *b = scn_cli_connect(&bo, NULL, 0),
          *p = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  char world[64];
  world_name(world, sizeof world);
  CU_ASSERT_FATAL(call_fine(w, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world));
  static double ids[N_ENT];
  for (int k = 0; k < N_ENT; k++) {
    float m[16];
    char text[SCN_CLI_B64_MATRIX_LEN + 1];
    packed_random_matrix(&r, m, k % 7 == 3);
    scn_cli_matrix_to_b64(m, text);
    /* the last few under a parent: world matrices that compose */
    char parent[48] = "";
    if (k >= N_ENT - 4)
      snprintf(parent, sizeof parent, ",\"parent\":%.0f", ids[k - 6]);
    cJSON *got =
        call_ok(w, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s,\"matrix_b64\":\"%s\"}", world,
                parent, text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    ids[k] = t_resp_num(got, "entity");
    cJSON_Delete(got);
  }
  history *exact = calloc(1, sizeof *exact), *packed = calloc(1, sizeof *packed);
  CU_ASSERT_PTR_NOT_NULL_FATAL(exact);
  CU_ASSERT_PTR_NOT_NULL_FATAL(packed);
  exact->ids = packed->ids = ids;
  scn_cli_on_frame(b, record, exact);
  scn_cli_on_frame(p, record, packed);
  double sb, sp;
  CU_ASSERT_EQUAL_FATAL(scn_cli_subscribe(b, world, 0, 0, &sb), SCN_CLI_OK);
  CU_ASSERT_EQUAL_FATAL(
      scn_cli_subscribe_text(p, world, "{\"packed\":{\"step\":0.001,\"origin\":[3,-4,5]}}", &sp),
      SCN_CLI_OK);
  for (int round = 0; round < 60; round++)
    catch_up(b, exact, p, packed, move_some(w, world, ids, &r));
  CU_ASSERT_EQUAL(scn_cli_poll_events(p, 0), 0); /* no refusal waiting */
  CU_ASSERT(packed->full_seen && packed->packed_frames == packed->frames);
  CU_ASSERT_EQUAL(exact->packed_frames, 0);
  CU_ASSERT(compare(exact, packed, 0.001, 0) >= 30);

  /* a new grid: from the frame after the answer, every translation absolute on it */
  cJSON *grid = cJSON_Parse("{\"packed\":{\"step\":0.25}}");
  CU_ASSERT_EQUAL(scn_cli_subscribe_update_fields(p, sp, grid), SCN_CLI_OK);
  cJSON_Delete(grid);
  double from = packed->nticks ? packed->tick[packed->nticks - 1] + 1 : 0;
  int before = packed->nticks;
  for (int round = 0; round < 30; round++)
    catch_up(b, exact, p, packed, move_some(w, world, ids, &r));
  CU_ASSERT(compare(exact, packed, 0.25, from) >= 10);
  /* what moved since is on the new grid exactly (origin 0, so multiples of 0.25) */
  if (packed->nticks > before) {
    const float(*last)[16] = packed->at[packed->nticks - 1];
    int on_grid = 0;
    for (int k = 0; k < N_ENT; k++) {
      bool multiple = true;
      for (int j = 12; j < 15; j++)
        multiple &= fmod(fabs((double)last[k][j]), 0.25) == 0;
      on_grid += multiple;
    }
    CU_ASSERT(on_grid > 0);
  }

  /* the end: unsubscribe answered, no packed frame after it */
  char line[96];
  snprintf(line, sizeof line, "{\"cmd\":\"unsubscribe\",\"sub\":%.0f}", sp);
  CU_ASSERT_EQUAL(scn_cli_call_line(p, line, NULL), SCN_CLI_OK);
  int frames = packed->frames;
  move_some(w, world, ids, &r);
  CU_ASSERT(scn_cli_poll_events(p, 200) >= 0);
  CU_ASSERT_EQUAL(packed->frames, frames);
  CU_ASSERT(call_fine(w, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  free(exact);
  free(packed);
  scn_cli_close(w);
  scn_cli_close(b);
  scn_cli_close(p);
}

/* Every matrix of a printed frame (json form) within the tolerance of truth[k] for ids[k]. */
static int frame_within(const cJSON *ev, const double *ids, const float (*truth)[16], int n,
                        double step) {
  int matched = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, field(ev, "set")) {
    float m[16];
    double e = t_resp_num(item, "e");
    CU_ASSERT_EQUAL_FATAL(scn_cli_matrix_get(field(item, "m"), m), 0);
    for (int k = 0; k < n; k++)
      if (ids[k] == e) {
        CU_ASSERT(packed_within(step, truth[k], m, NULL));
        matched++;
      }
  }
  return matched;
}

/* scenectl subscribe W packed=0.001: its frames are printed as json frames are, "set" with
 * matrices within the grid of the daemon's (the full frame, then one after a move). */
static void test_ctl_packed_daemon(void) {
  uint64_t seed = packed_seed("clients_packed_daemon scenectl");
  rng r = {seed};
  scn_cli *w = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  char world[64];
  world_name(world, sizeof world);
  CU_ASSERT_FATAL(call_fine(w, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world));
  enum { N = 8 };
  double ids[N];
  float truth[N][16];
  for (int k = 0; k < N; k++) {
    char text[SCN_CLI_B64_MATRIX_LEN + 1];
    packed_random_matrix(&r, truth[k], false);
    scn_cli_matrix_to_b64(truth[k], text);
    cJSON *got = call_ok(w, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"matrix_b64\":\"%s\"}",
                         world, text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    ids[k] = t_resp_num(got, "entity");
    cJSON_Delete(got);
  }
  t_proc p;
  const char *set[] = {"SCENED_HOST=127.0.0.1", port_env, NULL};
  CU_ASSERT_FATAL(
      proc_start(&p, ctl_bin(),
                 (const char *const[]){"subscribe", world, "packed=0.001", "--frames", "2", NULL},
                 set, NULL, 0));
  long deadline = t_now_ms() + WAIT_MS;
  while (!strchr(text_str(&p.out), '\n') && t_now_ms() < deadline && !t_proc_pump(&p, 10)) {
  }
  CU_ASSERT_FATAL(strchr(text_str(&p.out), '\n') != NULL);
  float before[N][16];
  memcpy(before, truth, sizeof before);
  packed_random_matrix(&r, truth[2], false);
  CU_ASSERT(set_matrix(w, world, ids[2], truth[2]));
  CU_ASSERT_EQUAL(t_proc_wait(&p, WAIT_MS), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  int n = 0;
  bool terminated;
  cJSON *lines = json_lines(text_str(&p.out), &n, &terminated);
  CU_ASSERT_EQUAL(n, 2);
  if (n == 2) {
    const cJSON *a = cJSON_GetArrayItem(lines, 0), *b = cJSON_GetArrayItem(lines, 1);
    double sub = t_resp_num(a, "sub");
    CU_ASSERT(is_frame(a, sub, world, true) && is_frame(b, sub, world, false));
    CU_ASSERT_PTR_NULL(field(a, "packed"));
    CU_ASSERT_EQUAL(frame_within(a, ids, (const float(*)[16])before, N, 0.001), N);
    CU_ASSERT_EQUAL(frame_within(b, ids + 2, (const float(*)[16])truth[2], 1, 0.001), 1);
  } else {
    t_report_text("scenectl packed frames", text_str(&p.out));
  }
  cJSON_Delete(lines);
  t_proc_free(&p);
  CU_ASSERT(call_fine(w, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(w);
}

int t_register_clients_packed_daemon(void) {
  static const t_test tests[] = {
      {"library: packed frames within the grid of b64 ones, tick for tick", test_lib_packed_vs_b64},
      {"scenectl: subscribe packed=0.001 prints matrices within the grid", test_ctl_packed_daemon},
  };
  return T_ADD_SUITE("clients_packed_daemon", clients_suite_init, clients_suite_clean, tests);
}

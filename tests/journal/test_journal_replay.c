/* The journal's own property, without a daemon, sockets or a loop: random workloads of every
 * mutating command run through the real dispatcher as a client's requests, the journal records
 * they make are kept (encoded by the function the daemon's journals use), and at many points a
 * second scene is rebuilt from them (from nothing, or from a snapshot taken in the middle plus
 * the records after it) and compared with the live one: entity slots, generations and the
 * order free slots are reused in, worlds, transforms, parents, child order, names, and local
 * and world matrices bit for bit.
 *
 * Its own program (it links the daemon's objects, which the integration suites must not).
 * SCENED_SEED=N runs that seed; SCENED_SEEDS=N runs N random ones (default 20). The shared
 * runner runs it (runner.h). */
#include "cmd/dispatch.h"
#include "net/conn.h"
#include "runner.h"
#include "scene_compare.h"
#include "server.h"
#include "store/journal.h"
#include "store/snapshot.h"
#include "stream/stream.h"
#include "workload.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- a daemon's state in this process ------------------------------------------------------ */

typedef struct live {
  scn_server srv;
  scn_conn conn; /* a client: its replies land in conn.out.bytes */
  scn_hooks hooks;
  scn_buf journal; /* the records since the last snapshot */
  scn_buf scratch;
  size_t records;
} live;

static void record(void *ud, const scn_done *d) {
  live *l = ud;
  if (!(d->cmd->flags & SCN_CMD_MUTATES))
    return;
  scn_journal_encode_command(&l->journal, &l->scratch, d->line, d->len, d->created, d->ncreated);
  l->records++;
}

static scn_scene *new_scene(void) {
  scn_limits limits = {.max_worlds = 64, .max_transforms = 100000};
  scn_scene *s = scn_scene_new(&limits);
  scn_entity_record(s, true); /* as a daemon with --data */
  return s;
}

static void server_open(scn_server *srv) {
  memset(srv, 0, sizeof *srv);
  char *argv[] = {"journal-tests", NULL};
  char err[256];
  scn_config_load(&srv->cfg, 1, argv, err, sizeof err);
  srv->loop = uv_default_loop();
  srv->scene = new_scene();
  srv->stream = scn_stream_open(srv);
  srv->dispatch = scn_dispatch_open(srv);
}

static void server_close(scn_server *srv) {
  scn_dispatch_close(srv->dispatch);
  scn_stream_close(srv->stream);
  scn_scene_free(srv->scene);
  uv_run(srv->loop, UV_RUN_NOWAIT); /* the stream's timer is freed once closed */
}

static void live_open(live *l) {
  memset(l, 0, sizeof *l);
  server_open(&l->srv);
  l->conn.srv = &l->srv;
  l->conn.authed = true;
  l->conn.matrices = SCN_MATRICES_B64;
  l->hooks = (scn_hooks){.ud = l, .after_command = record};
  scn_server_add_hooks(&l->srv, &l->hooks);
}

static void live_close(live *l) {
  server_close(&l->srv);
  scn_buf_free(&l->conn.out.bytes);
  scn_buf_free(&l->journal);
  scn_buf_free(&l->scratch);
}

static bool live_send(void *ud, const wl_req *reqs, size_t n, cJSON **out) {
  live *l = ud;
  for (size_t i = 0; i < n; i++) {
    scn_buf *b = &l->conn.out.bytes;
    b->len = 0;
    scn_dispatch_line(&l->conn, reqs[i].line, strlen(reqs[i].line));
    out[i] = cJSON_ParseWithLength(b->data, b->len);
    if (!out[i])
      return false;
  }
  return true;
}

static char why[512];

/* ---- the property -------------------------------------------------------------------------- */

/* A scene rebuilt as a restart would: the snapshot in dir (if one was taken), then every
 * record since, each of which must replay. */
static bool rebuild_and_compare(live *l, const char *snapdir, bool have_snapshot, int step) {
  scn_server r;
  server_open(&r);
  char err[512];
  bool ok = true;
  if (have_snapshot) {
    scn_snapshot_info info;
    ok = scn_snapshot_load(r.scene, snapdir, false, &info, err, sizeof err) == 1;
    if (!ok)
      snprintf(why, sizeof why, "the snapshot does not load: %.400s", err);
  }
  size_t at = 0, n = 0;
  while (ok && at < l->journal.len) {
    uint32_t head[3];
    memcpy(head, l->journal.data + at, sizeof head);
    const char *line = l->journal.data + at + SCN_JOURNAL_HEADER;
    if (!scn_dispatch_replay(&r, line, head[1])) {
      snprintf(why, sizeof why, "record %zu does not replay: %.*s", n, (int)head[1], line);
      ok = false;
    }
    at += SCN_JOURNAL_HEADER + head[1];
    n++;
  }
  if (ok && !t_same_scene(l->srv.scene, r.scene)) {
    snprintf(why, sizeof why, "%s", t_scene_difference());
    ok = false;
  }
  if (!ok)
    fprintf(stderr, "  after step %d (%zu records%s): %s\n", step, n,
            have_snapshot ? " after a snapshot" : "", why);
  server_close(&r);
  return ok;
}

static bool run_seed(uint64_t seed, int steps) {
  live l;
  live_open(&l);
  workload w;
  wl_init(&w, seed, false, (wl_side){live_send, &l}, (wl_side){NULL, NULL});
  rng r = {seed ^ UINT64_C(0x10a5)};
  char dir[] = "/tmp/scened-journal-XXXXXX";
  bool ok = mkdtemp(dir) != NULL, have_snapshot = false;
  int checks = 0, snapshots = 0;
  for (int i = 0; ok && i < steps; i++) {
    ok = wl_step(&w);
    if (ok && rng_chance(&r, 0.25)) {
      ok = rebuild_and_compare(&l, dir, have_snapshot, i);
      checks++;
    }
    if (ok && rng_chance(&r, 0.02)) {
      /* a snapshot, and the journal starts over after it (as a daemon's save) */
      char err[512];
      uint64_t bytes;
      ok = scn_snapshot_write(l.srv.scene, 1, dir, &bytes, err, sizeof err) == 0;
      l.journal.len = 0;
      have_snapshot = true;
      snapshots++;
    }
  }
  ok = ok && rebuild_and_compare(&l, dir, have_snapshot, steps);
  fprintf(stderr,
          "  journal: seed %llu (SCENED_SEED=%llu replays it): %u commands, %zu records, "
          "%d replays compared, %d snapshots, %zu entities: %s\n",
          (unsigned long long)seed, (unsigned long long)seed, w.steps, l.records, checks + 1,
          snapshots, w.nents, ok ? "same" : "DIFFERENT");
  char path[64];
  snprintf(path, sizeof path, "%s/snapshot.scn", dir);
  unlink(path);
  rmdir(dir);
  wl_free(&w);
  live_close(&l);
  return ok;
}

static void test_replay_equals_live(void) {
  const char *one = getenv("SCENED_SEED"), *many = getenv("SCENED_SEEDS");
  const char *steps_s = getenv("SCENED_STEPS");
  int steps = steps_s && atoi(steps_s) > 0 ? atoi(steps_s) : 400;
  if (one && *one) {
    CU_ASSERT(run_seed(strtoull(one, NULL, 10), steps));
    return;
  }
  int n = many && atoi(many) > 0 ? atoi(many) : 20;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  rng r = {(uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()};
  bool ok = true;
  for (int i = 0; ok && i < n; i++) {
    ok = run_seed(rng_next(&r) >> 16, steps);
    CU_ASSERT(ok);
  }
}

/* A client's request with a member its command does not take is refused; a journal record
 * with one (written before requests were strict, when the member was passed over) still
 * replays, as does the "created" member the journal adds. */
static void test_replay_takes_records_as_written(void) {
  live l;
  live_open(&l);
  const char *stray = "{\"cmd\":\"world.create\",\"world\":\"old\",\"colour\":\"red\"}";
  l.conn.out.bytes.len = 0;
  scn_dispatch_line(&l.conn, stray, strlen(stray));
  char reply[256];
  snprintf(reply, sizeof reply, "%.*s", (int)l.conn.out.bytes.len, l.conn.out.bytes.data);
  CU_ASSERT_STRING_EQUAL(reply, "{\"ok\":false,\"error\":{\"code\":\"BAD_REQUEST\",\"message\":"
                                "\"unknown field \\\"colour\\\"\"}}\n");
  CU_ASSERT_EQUAL(l.records, 0);
  CU_ASSERT_PTR_NULL(scn_world_find(l.srv.scene, "old"));

  scn_server r;
  server_open(&r);
  const char *records[] = {
      stray,
      "{\"cmd\":\"transform.create\",\"world\":\"old\",\"t\":[1,2,3],\"partal\":true,"
      "\"created\":[1]}",
      "{\"cmd\":\"batch\",\"world\":\"old\",\"ops\":[{\"cmd\":\"transform.set_local\","
      "\"entity\":1,\"t\":[4,5,6],\"colour\":1}]}",
  };
  for (size_t i = 0; i < sizeof records / sizeof *records; i++)
    CU_ASSERT(scn_dispatch_replay(&r, records[i], strlen(records[i])));
  scn_world *w = scn_world_find(r.scene, "old");
  scn_transform_info info;
  CU_ASSERT_FATAL(w && scn_transform_get(w, 1, &info) == SCN_OK);
  CU_ASSERT(info.local[12] == 4 && info.local[13] == 5 && info.local[14] == 6);
  server_close(&r);
  live_close(&l);
}

static int add_journal_replay(void) {
  static const t_test tests[] = {
      {"random workloads: replaying the journal gives the live state", test_replay_equals_live},
      {"records replay as written, members a client may not send included",
       test_replay_takes_records_as_written},
  };
  return T_ADD_SUITE("journal_replay", NULL, NULL, tests);
}

/* test_journal_writer.c */
int t_register_journal_writer(void);
/* test_gstore_tap.c */
int t_register_gstore_tap(void);
/* test_gstore_apply.c */
int t_register_gstore_apply(void);
/* test_gstore_promote.c */
int t_register_gstore_promote(void);
/* test_gstore_copy.c */
int t_register_gstore_copy(void);

int main(int argc, char **argv) {
  static const t_suite suites[] = {{"journal_replay", add_journal_replay},
                                   {"journal_writer", t_register_journal_writer},
                                   {"gstore_tap", t_register_gstore_tap},
                                   {"gstore_apply", t_register_gstore_apply},
                                   {"gstore_promote", t_register_gstore_promote},
                                   {"gstore_copy", t_register_gstore_copy}};
  return t_run(argc, argv, suites, sizeof suites / sizeof suites[0]);
}

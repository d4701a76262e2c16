/* The store's tap (scn_gstore_set_tap) with the real dispatcher and the cluster's store in this
 * process, without a cluster: every record a held group's journal gets is handed on, in order,
 * with its group's epoch, a sequence number from 1 and its world's open tick, and its bytes are
 * exactly those the journal file holds after the commit. */
#include "cmd/dispatch.h"
#include "harness.h"
#include "net/conn.h"
#include "runner.h"
#include "server.h"
#include "store/groups.h"
#include "store/journal.h"
#include "stream/stream.h"

#include <CUnit/CUnit.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAPPED_MAX 16

typedef struct tapped {
  char group[SCN_NAME_MAX + 1];
  uint64_t epoch, seq, tick;
  scn_buf bytes;
} tapped;

typedef struct taps {
  tapped r[TAPPED_MAX];
  size_t n;
} taps;

static void on_record(void *ud, const scn_gstore_record *rec) {
  taps *t = ud;
  CU_ASSERT_FATAL(t->n < TAPPED_MAX);
  tapped *r = &t->r[t->n++];
  snprintf(r->group, sizeof r->group, "%s", rec->group);
  r->epoch = rec->epoch;
  r->seq = rec->seq;
  r->tick = rec->tick;
  scn_buf_add(&r->bytes, rec->bytes, rec->len);
}

static void run_ok(scn_conn *c, const char *line) {
  c->out.bytes.len = 0;
  scn_dispatch_line(c, line, strlen(line));
  CU_ASSERT(strstr(c->out.bytes.data ? c->out.bytes.data : "", "\"ok\":true") != NULL);
}

/* The newest journal generation of dir, whole, in out. */
static void read_newest_journal(const char *dir, scn_buf *out) {
  DIR *d = opendir(dir);
  CU_ASSERT_FATAL(d != NULL);
  unsigned long long gen = 0, g;
  bool found = false;
  for (struct dirent *de; (de = readdir(d));)
    if (sscanf(de->d_name, "journal.%llu.scn", &g) == 1 && (!found || g > gen)) {
      gen = g;
      found = true;
    }
  closedir(d);
  CU_ASSERT_FATAL(found);
  char path[4400];
  snprintf(path, sizeof path, "%s/journal.%llu.scn", dir, gen);
  FILE *f = fopen(path, "rb");
  CU_ASSERT_FATAL(f != NULL);
  char chunk[4096];
  for (size_t k; (k = fread(chunk, 1, sizeof chunk, f)) > 0;)
    scn_buf_add(out, chunk, k);
  fclose(f);
}

/* What the tap gave for group, in order, concatenated. */
static void tapped_bytes(const taps *t, const char *group, scn_buf *out) {
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->r[i].group, group) == 0)
      scn_buf_add(out, t->r[i].bytes.data, t->r[i].bytes.len);
}

static void test_records_in_order_with_ticks(void) {
  char dir[256];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "tap"));
  scn_server srv;
  memset(&srv, 0, sizeof srv);
  char *argv[] = {"journal-tests", NULL};
  char err[256];
  scn_config_load(&srv.cfg, 1, argv, err, sizeof err);
  snprintf(srv.cfg.data_dir, sizeof srv.cfg.data_dir, "%s", dir);
  srv.loop = uv_default_loop();
  scn_limits limits = {.max_worlds = 16, .max_transforms = 1000};
  srv.scene = scn_scene_new(&limits);
  scn_entity_record(srv.scene, true);
  srv.stream = scn_stream_open(&srv);
  srv.dispatch = scn_dispatch_open(&srv);
  int rc;
  scn_gstore *gs = scn_gstore_open(&srv, "n1", scn_dispatch_replay, &srv, &rc);
  CU_ASSERT_FATAL(gs != NULL);
  srv.gstore = gs;
  scn_gstore_start(gs);
  taps t = {0};
  scn_gstore_set_tap(gs, on_record, &t);
  CU_ASSERT_FATAL(scn_gstore_acquire(gs, "g1", 5, false, err, sizeof err) == 0);
  CU_ASSERT_FATAL(scn_gstore_acquire(gs, "g2", 7, false, err, sizeof err) == 0);

  scn_conn c = {.srv = &srv, .authed = true, .matrices = SCN_MATRICES_B64};
  run_ok(&c, "{\"cmd\":\"world.create\",\"world\":\"g1.a\"}");
  run_ok(&c, "{\"cmd\":\"world.create\",\"world\":\"g2.b\"}");
  scn_world *a = scn_world_find(srv.scene, "g1.a");
  CU_ASSERT_FATAL(a != NULL);
  scn_world_close_tick(a);
  scn_world_close_tick(a);
  run_ok(&c, "{\"cmd\":\"transform.create\",\"world\":\"g1.a\"}");
  run_ok(&c, "{\"cmd\":\"entity.create\"}"); /* the node's own: not a group's record */
  run_ok(&c, "{\"cmd\":\"transform.create\",\"world\":\"g2.b\"}");
  scn_world_close_tick(a);
  run_ok(&c, "{\"cmd\":\"world.destroy\",\"world\":\"g1.a\"}");

  const struct {
    const char *group;
    uint64_t epoch, seq, tick;
    const char *has;
  } want[] = {
      {"g1", 5, 1, 1, "world.create"},  {"g2", 7, 1, 1, "world.create"},
      {"g1", 5, 2, 3, "\"created\":["}, {"g2", 7, 2, 1, "\"created\":["},
      {"g1", 5, 3, 0, "world.destroy"},
  };
  size_t nwant = sizeof want / sizeof want[0];
  CU_ASSERT_EQUAL(t.n, nwant);
  for (size_t i = 0; i < nwant && i < t.n; i++) {
    CU_ASSERT_STRING_EQUAL(t.r[i].group, want[i].group);
    CU_ASSERT_EQUAL(t.r[i].epoch, want[i].epoch);
    CU_ASSERT_EQUAL(t.r[i].seq, want[i].seq);
    CU_ASSERT_EQUAL(t.r[i].tick, want[i].tick);
    scn_buf_addc(&t.r[i].bytes, '\0');
    CU_ASSERT(strstr(t.r[i].bytes.data + SCN_JOURNAL_HEADER, want[i].has) != NULL);
    t.r[i].bytes.len--;
  }

  /* After the commit, each group's journal holds exactly what was handed on. */
  scn_hooks_before_flush(&srv);
  const char *groups[] = {"g1", "g2"};
  const char *epochs[] = {"epoch.5", "epoch.7"};
  for (size_t i = 0; i < 2; i++) {
    char gdir[4300];
    snprintf(gdir, sizeof gdir, "%s/groups/%s/%s", dir, groups[i], epochs[i]);
    scn_buf file = {0}, tap = {0};
    read_newest_journal(gdir, &file);
    tapped_bytes(&t, groups[i], &tap);
    CU_ASSERT(tap.len > 0);
    CU_ASSERT_EQUAL(file.len, tap.len);
    CU_ASSERT(file.len == tap.len && memcmp(file.data, tap.data, tap.len) == 0);
    scn_buf_free(&file);
    scn_buf_free(&tap);
  }

  scn_gstore_set_tap(gs, NULL, NULL);
  run_ok(&c, "{\"cmd\":\"transform.create\",\"world\":\"g2.b\"}");
  CU_ASSERT_EQUAL(t.n, nwant); /* nobody to hand it to */

  for (size_t i = 0; i < t.n; i++)
    scn_buf_free(&t.r[i].bytes);
  scn_buf_free(&c.out.bytes);
  scn_gstore_close(gs);
  scn_dispatch_close(srv.dispatch);
  scn_stream_close(srv.stream);
  scn_scene_free(srv.scene);
  uv_run(srv.loop, UV_RUN_NOWAIT);
  t_remove_temp_dir(dir);
}

int t_register_gstore_tap(void) {
  static const t_test tests[] = {
      {"group records reach the tap in order, with epoch, seq and tick, as journalled",
       test_records_in_order_with_ticks},
  };
  return T_ADD_SUITE("gstore_tap", NULL, NULL, tests);
}

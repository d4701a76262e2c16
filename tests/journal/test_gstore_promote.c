/* A copy promoted to a new epoch (scn_gstore_promote, as a takeover or a switchover does) with
 * the real dispatcher and the cluster's store in this process: its new epoch's directory is the
 * old one's files, linked (no snapshot written), the older epoch's directory goes, and writes go
 * on in it; promoted again and again, a store that loads the directory gets the same scene. */
#include "cmd/dispatch.h"
#include "gstore_fixtures.h"
#include "harness.h"
#include "net/conn.h"
#include "runner.h"
#include "scene_compare.h"
#include "server.h"
#include "store/groups.h"
#include "stream/stream.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Runs line on c, then the loop turn's commit. */
static void run_ok(scn_conn *c, const char *line) {
  t_run_ok(c, line);
  scn_hooks_before_flush(c->srv);
}

/* The inode of the epoch's snapshot (0: none). */
static ino_t snapshot_inode(const char *dir, unsigned epoch) {
  char path[600];
  struct stat st;
  snprintf(path, sizeof path, "%s/groups/g1/epoch.%u/snapshot.scn", dir, epoch);
  return stat(path, &st) == 0 ? st.st_ino : 0;
}

static void test_promote_links(void) {
  char dir[256];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "promote"));
  char err[512];
  t_store a;
  t_store_open(&a, dir, "a");
  CU_ASSERT_FATAL(scn_gstore_acquire(a.gs, "g1", 5, false, err, sizeof err) == 0);
  ino_t first = snapshot_inode(dir, 5);
  CU_ASSERT_FATAL(first != 0);
  scn_conn c = {.srv = &a.srv, .authed = true, .matrices = SCN_MATRICES_B64};
  static const char *const made[] = {
      "{\"cmd\":\"world.create\",\"world\":\"g1.a\"}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"t\":[1,2,3],\"name\":\"p\"}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"parent\":1,\"name\":\"q\"}"};
  static const char *const moves[] = {
      "{\"cmd\":\"transform.set_local\",\"world\":\"g1.a\",\"entity\":2,\"t\":[4,0,0]}",
      "{\"cmd\":\"transform.set_local\",\"world\":\"g1.a\",\"entity\":1,\"t\":[5,0,0]}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"parent\":2,\"name\":\"r\"}"};
  for (size_t i = 0; i < sizeof made / sizeof *made; i++)
    run_ok(&c, made[i]);
  static const unsigned epochs[] = {5, 9, 12, 30};
  uint64_t epoch, seq;
  for (size_t i = 1; i < sizeof epochs / sizeof *epochs; i++) {
    CU_ASSERT_FATAL(scn_gstore_promote(a.gs, "g1", epochs[i], err, sizeof err) == 0);
    CU_ASSERT(scn_gstore_position(a.gs, "g1", &epoch, &seq) && epoch == epochs[i] && seq == 0);
    /* the same snapshot file, linked; the older epoch gone */
    CU_ASSERT_EQUAL(snapshot_inode(dir, epochs[i]), first);
    CU_ASSERT_EQUAL(snapshot_inode(dir, epochs[i - 1]), 0);
    run_ok(&c, moves[i - 1]);
    CU_ASSERT(scn_gstore_position(a.gs, "g1", &epoch, &seq) && seq == 1);
  }
  scn_buf_free(&c.out.bytes);
  t_store_close(&a);
  /* A store loading the directory (a restart, or a takeover there) has what a store that ran
   * the same commands without a promotion has. */
  char dir_e[256];
  CU_ASSERT_FATAL(t_temp_dir(dir_e, sizeof dir_e, "promote-e"));
  t_store d, e;
  t_store_open(&d, dir, "d");
  CU_ASSERT_FATAL(scn_gstore_acquire(d.gs, "g1", 40, false, err, sizeof err) == 0);
  t_store_open(&e, dir_e, "e");
  CU_ASSERT_FATAL(scn_gstore_acquire(e.gs, "g1", 5, false, err, sizeof err) == 0);
  scn_conn ce = {.srv = &e.srv, .authed = true, .matrices = SCN_MATRICES_B64};
  for (size_t i = 0; i < sizeof made / sizeof *made; i++)
    run_ok(&ce, made[i]);
  for (size_t i = 0; i < sizeof moves / sizeof *moves; i++)
    run_ok(&ce, moves[i]);
  bool same = t_same_scene(e.srv.scene, d.srv.scene);
  if (!same)
    fprintf(stderr, "  the scenes differ: %s\n", t_scene_difference());
  CU_ASSERT(same);
  scn_buf_free(&ce.out.bytes);
  t_store_close(&d);
  t_store_close(&e);
  t_remove_temp_dir(dir);
  t_remove_temp_dir(dir_e);
}

int t_register_gstore_promote(void) {
  static const t_test tests[] = {
      {"a promoted copy's epoch starts from its files, linked, and loads as it was",
       test_promote_links},
  };
  return T_ADD_SUITE("gstore_promote", NULL, NULL, tests);
}

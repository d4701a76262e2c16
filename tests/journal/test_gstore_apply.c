/* A follower's copy (scn_gstore_apply) with the real dispatcher and two of the cluster's stores
 * in this process, without a cluster: the records one store's tap hands on, applied in order to
 * a second store holding the group at the same epoch, give the same scene and the same journal
 * bytes; a store loading the second's directory gets that scene again; a record out of order,
 * of another epoch, damaged, or of a group not held is refused and changes nothing. */
#include "cmd/dispatch.h"
#include "gstore_fixtures.h"
#include "harness.h"
#include "net/conn.h"
#include "runner.h"
#include "scene_compare.h"
#include "server.h"
#include "store/groups.h"
#include "store/journal.h"
#include "stream/stream.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void read_file(const char *path, scn_buf *out) {
  FILE *f = fopen(path, "rb");
  CU_ASSERT_FATAL(f != NULL);
  char chunk[4096];
  for (size_t k; (k = fread(chunk, 1, sizeof chunk, f)) > 0;)
    scn_buf_add(out, chunk, k);
  fclose(f);
}

static void test_applied_records_give_the_owners_state(void) {
  char dir_a[256], dir_b[256];
  CU_ASSERT_FATAL(t_temp_dir(dir_a, sizeof dir_a, "apply-a"));
  CU_ASSERT_FATAL(t_temp_dir(dir_b, sizeof dir_b, "apply-b"));
  char err[512];
  t_store a, b;
  t_store_open(&a, dir_a, "a");
  t_store_open(&b, dir_b, "b");
  t_shipped s = {0};
  scn_gstore_set_tap(a.gs, t_on_record, &s);
  CU_ASSERT_FATAL(scn_gstore_acquire(a.gs, "g1", 5, false, err, sizeof err) == 0);
  CU_ASSERT_FATAL(scn_gstore_acquire(b.gs, "g1", 5, false, err, sizeof err) == 0);

  scn_conn c = {.srv = &a.srv, .authed = true, .matrices = SCN_MATRICES_B64};
  const char *lines[] = {
      "{\"cmd\":\"world.create\",\"world\":\"g1.a\"}",
      "{\"cmd\":\"world.create\",\"world\":\"g1.b\"}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"t\":[1,2,3]}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"parent\":1,\"name\":\"arm\"}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.b\",\"t\":[0,1,0]}",
      "{\"cmd\":\"transform.set_local\",\"world\":\"g1.a\",\"entity\":2,\"t\":[0.5,0.25,9]}",
      "{\"cmd\":\"batch\",\"world\":\"g1.a\",\"ops\":[{\"cmd\":\"transform.create\"},"
      "{\"cmd\":\"transform.set_local\",\"entity\":1,\"t\":[7,8,9]}]}",
      "{\"cmd\":\"entity.destroy\",\"entity\":3}",
      "{\"cmd\":\"world.destroy\",\"world\":\"g1.b\"}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"parent\":2}",
  };
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    t_run_ok(&c, lines[i]);
  CU_ASSERT_FATAL(s.n >= sizeof lines / sizeof *lines);

  for (size_t i = 0; i < s.n; i++) {
    CU_ASSERT_EQUAL(s.r[i].seq, i + 1);
    int rc = scn_gstore_apply(b.gs, &s.r[i], err, sizeof err);
    if (rc != 0)
      fprintf(stderr, "  record %zu: %s\n", i, err);
    CU_ASSERT(rc == 0);
  }
  CU_ASSERT(scn_world_find(b.srv.scene, "g1.a") != NULL);
  CU_ASSERT(t_check_same_scene(a.srv.scene, b.srv.scene));

  /* Refused, and nothing changes: a record again, one skipped ahead, another epoch, damaged
   * bytes, a group not held here. */
  scn_gstore_record again = s.r[s.n - 1];
  CU_ASSERT(scn_gstore_apply(b.gs, &again, err, sizeof err) == -1);
  CU_ASSERT(strstr(err, "does not follow") != NULL);
  scn_gstore_record ahead = again;
  ahead.seq = s.n + 2;
  CU_ASSERT(scn_gstore_apply(b.gs, &ahead, err, sizeof err) == -1);
  scn_gstore_record other = again;
  other.seq = s.n + 1;
  other.epoch = 6;
  CU_ASSERT(scn_gstore_apply(b.gs, &other, err, sizeof err) == -1);
  scn_buf bad = {0};
  scn_buf_add(&bad, again.bytes, again.len);
  bad.data[0] ^= 1; /* its magic: the checksum of bytes made in memory is not checked again */
  scn_gstore_record damaged = again;
  damaged.seq = s.n + 1;
  damaged.bytes = bad.data;
  CU_ASSERT(scn_gstore_apply(b.gs, &damaged, err, sizeof err) == -1);
  CU_ASSERT(strstr(err, "intact") != NULL);
  damaged.len = bad.len - 1; /* cut short */
  CU_ASSERT(scn_gstore_apply(b.gs, &damaged, err, sizeof err) == -1);
  scn_buf_free(&bad);
  scn_gstore_record elsewhere = damaged;
  elsewhere.group = "g9";
  elsewhere.bytes = again.bytes;
  elsewhere.len = again.len;
  CU_ASSERT(scn_gstore_apply(b.gs, &elsewhere, err, sizeof err) == -1);
  CU_ASSERT(t_check_same_scene(a.srv.scene, b.srv.scene));

  /* After each loop turn's commit the follower's journal is byte for byte the owner's. */
  scn_hooks_before_flush(&a.srv);
  scn_hooks_before_flush(&b.srv);
  char path_a[600], path_b[600];
  snprintf(path_a, sizeof path_a, "%s/groups/g1/epoch.5/journal.1.scn", dir_a);
  snprintf(path_b, sizeof path_b, "%s/groups/g1/epoch.5/journal.1.scn", dir_b);
  scn_buf file_a = {0}, file_b = {0};
  read_file(path_a, &file_a);
  read_file(path_b, &file_b);
  CU_ASSERT(file_a.len > 0);
  CU_ASSERT(file_a.len == file_b.len && memcmp(file_a.data, file_b.data, file_a.len) == 0);
  scn_buf_free(&file_a);
  scn_buf_free(&file_b);

  /* A store that loads the follower's directory (as a takeover or a restart there would) has
   * the owner's scene again. */
  t_store_close(&b);
  t_store d;
  t_store_open(&d, dir_b, "d");
  CU_ASSERT_FATAL(scn_gstore_acquire(d.gs, "g1", 6, false, err, sizeof err) == 0);
  CU_ASSERT(t_check_same_scene(a.srv.scene, d.srv.scene));
  t_store_close(&d);

  for (size_t i = 0; i < s.n; i++)
    scn_buf_free(&s.bytes[i]);
  scn_buf_free(&c.out.bytes);
  t_store_close(&a);
  t_remove_temp_dir(dir_a);
  t_remove_temp_dir(dir_b);
}

int t_register_gstore_apply(void) {
  static const t_test tests[] = {
      {"records tapped from an owner's store, applied to a follower's, give its state and "
       "journal",
       test_applied_records_give_the_owners_state},
  };
  return T_ADD_SUITE("gstore_apply", NULL, NULL, tests);
}

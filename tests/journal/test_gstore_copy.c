/* A follower's copy on disk (groups_copy.c) with the real dispatcher and the cluster's stores in
 * this process, without a cluster: the whole copy an owner writes, received by another store and
 * installed, gives the owner's scene at the owner's seq, and records applied after it keep it so;
 * a store restarted on that directory resumes the copy at its last seq (the snapshot's seq note
 * plus the records replayed after it); an install removes the older epoch the directory had; a
 * group forgotten leaves nothing on disk. */
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
#include <sys/stat.h>
#include <unistd.h>

static bool exists(const char *dir, const char *rel) {
  char path[700];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  return stat(path, &st) == 0;
}

/* Copies len bytes of from (from its start) to the end of to. */
static bool pipe_bytes(int from, int to, uint64_t len) {
  char chunk[4096];
  for (uint64_t at = 0; at < len;) {
    size_t n = len - at < sizeof chunk ? (size_t)(len - at) : sizeof chunk;
    if (pread(from, chunk, n, (off_t)at) != (ssize_t)n || write(to, chunk, n) != (ssize_t)n)
      return false;
    at += n;
  }
  return true;
}

/* The owner's copy of g1 received by dst's store (as the change stream's chunks would be). */
static bool receive(t_store *owner, t_store *dst, uint64_t *epoch, uint64_t *seq) {
  char err[512];
  scn_gstore_copy copy;
  if (scn_gstore_copy_out(owner->gs, "g1", &copy, err, sizeof err) != 0) {
    fprintf(stderr, "  copy_out: %s\n", err);
    return false;
  }
  int sfd, hfd;
  bool ok = scn_gstore_copy_in_open(dst->gs, "g1", &sfd, &hfd, err, sizeof err) == 0;
  ok = ok && pipe_bytes(copy.snap_fd, sfd, copy.snap_len) &&
       pipe_bytes(copy.hist_fd, hfd, copy.hist_len);
  if (ok) {
    close(sfd);
    close(hfd);
  }
  *epoch = copy.epoch;
  *seq = copy.seq;
  scn_gstore_copy_close(&copy);
  ok = ok && scn_gstore_install(dst->gs, "g1", copy.epoch, copy.seq, err, sizeof err) == 0;
  if (!ok)
    fprintf(stderr, "  receive: %s\n", err);
  return ok;
}

static void test_copy_install_resume(void) {
  char dir_a[256], dir_b[256];
  CU_ASSERT_FATAL(t_temp_dir(dir_a, sizeof dir_a, "copy-a"));
  CU_ASSERT_FATAL(t_temp_dir(dir_b, sizeof dir_b, "copy-b"));
  char err[512];
  t_store a, b;
  t_store_open_slots(&a, dir_a, "a", 1);
  t_store_open_slots(&b, dir_b, "b", 2001);
  /* b's directory has g1 from an older epoch (3), which the install replaces. */
  CU_ASSERT_FATAL(scn_gstore_acquire(b.gs, "g1", 3, false, err, sizeof err) == 0);
  scn_conn cb = {.srv = &b.srv, .authed = true, .matrices = SCN_MATRICES_B64};
  t_run_ok(&cb, "{\"cmd\":\"world.create\",\"world\":\"g1.old\"}");
  t_store_close(&b);
  t_store_open_slots(&b, dir_b, "b", 2001);
  CU_ASSERT(exists(dir_b, "groups/g1/epoch.3"));

  CU_ASSERT_FATAL(scn_gstore_acquire(a.gs, "g1", 5, false, err, sizeof err) == 0);
  scn_conn c = {.srv = &a.srv, .authed = true, .matrices = SCN_MATRICES_B64};
  const char *before[] = {
      "{\"cmd\":\"world.create\",\"world\":\"g1.a\"}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"t\":[1,2,3]}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"parent\":1,\"name\":\"arm\"}",
      "{\"cmd\":\"transform.set_local\",\"world\":\"g1.a\",\"entity\":2,\"t\":[0.5,0.25,9]}",
  };
  for (size_t i = 0; i < sizeof before / sizeof *before; i++)
    t_run_ok(&c, before[i]);
  uint64_t epoch = 0, seq = 0, here_epoch = 0, here_seq = 0;
  CU_ASSERT_FATAL(receive(&a, &b, &epoch, &seq));
  CU_ASSERT_EQUAL(epoch, 5);
  CU_ASSERT_EQUAL(seq, sizeof before / sizeof *before);
  CU_ASSERT(scn_gstore_position(b.gs, "g1", &here_epoch, &here_seq));
  CU_ASSERT(here_epoch == 5 && here_seq == seq);
  CU_ASSERT(t_check_same_scene(a.srv.scene, b.srv.scene));
  CU_ASSERT(exists(dir_b, "groups/g1/epoch.5/seq.1"));
  CU_ASSERT(!exists(dir_b, "groups/g1/epoch.3"));
  CU_ASSERT(!exists(dir_b, "groups/g1/incoming.tmp"));
  CU_ASSERT(!exists(dir_a, "groups/g1/outgoing.tmp"));

  /* Records after the copy apply on it; a snapshot in between notes its seq. */
  t_shipped s = {0};
  scn_gstore_set_tap(a.gs, t_on_record, &s);
  t_run_ok(&c, "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"name\":\"x\"}");
  t_run_ok(&c, "{\"cmd\":\"world.create\",\"world\":\"g1.b\"}");
  for (size_t i = 0; i < s.n; i++)
    CU_ASSERT(scn_gstore_apply(b.gs, &s.r[i], err, sizeof err) == 0);
  uint64_t bytes;
  CU_ASSERT(scn_gstore_save(b.gs, "g1", &bytes) == 0);
  size_t at = s.n;
  t_run_ok(&c, "{\"cmd\":\"transform.create\",\"world\":\"g1.b\",\"t\":[4,5,6]}");
  t_run_ok(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"g1.a\",\"entity\":1,\"t\":[7,8,9]}");
  for (size_t i = at; i < s.n; i++)
    CU_ASSERT(scn_gstore_apply(b.gs, &s.r[i], err, sizeof err) == 0);
  CU_ASSERT(t_check_same_scene(a.srv.scene, b.srv.scene));
  CU_ASSERT(scn_gstore_position(a.gs, "g1", &epoch, &seq));
  scn_hooks_before_flush(&b.srv);
  t_store_close(&b);

  /* Restarted on its directory: the copy resumes at its last seq, nothing else asked for. */
  t_store d;
  t_store_open_slots(&d, dir_b, "d", 3001);
  CU_ASSERT(scn_gstore_disk_epoch(d.gs, "g1", &here_epoch) && here_epoch == 5);
  CU_ASSERT(scn_gstore_resume(d.gs, "g1", 6, &here_seq, err, sizeof err) == -1);
  CU_ASSERT(scn_gstore_resume(d.gs, "g1", 5, &here_seq, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(here_seq, seq);
  CU_ASSERT(t_check_same_scene(a.srv.scene, d.srv.scene));
  /* and goes on applying from there */
  at = s.n;
  t_run_ok(&c, "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"name\":\"after\"}");
  for (size_t i = at; i < s.n; i++)
    CU_ASSERT(scn_gstore_apply(d.gs, &s.r[i], err, sizeof err) == 0);
  CU_ASSERT(t_check_same_scene(a.srv.scene, d.srv.scene));
  t_store_close(&d);

  /* A group no longer this daemon's: its directory goes. */
  t_store e;
  t_store_open_slots(&e, dir_b, "e", 4001);
  scn_gstore_forget(e.gs, "g1", "a newer epoch owns it");
  CU_ASSERT(!exists(dir_b, "groups/g1"));
  t_store_close(&e);

  for (size_t i = 0; i < s.n; i++)
    scn_buf_free(&s.bytes[i]);
  scn_buf_free(&c.out.bytes);
  scn_buf_free(&cb.out.bytes);
  t_store_close(&a);
  t_remove_temp_dir(dir_a);
  t_remove_temp_dir(dir_b);
}

int t_register_gstore_copy(void) {
  static const t_test tests[] = {
      {"a whole copy installed, then resumed after a restart at its last seq",
       test_copy_install_resume},
  };
  return T_ADD_SUITE("gstore_copy", NULL, NULL, tests);
}

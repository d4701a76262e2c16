/* A follower's copy on disk (groups_copy.c) with the real dispatcher and the cluster's stores in
 * this process, without a cluster: the whole copy an owner writes, received by another store and
 * installed, gives the owner's scene at the owner's seq, and records applied after it keep it so;
 * a store restarted on that directory resumes the copy at its last seq (the snapshot's seq note
 * plus the records replayed after it); an install removes the older epoch the directory had; a
 * group forgotten leaves nothing on disk. */
#include "cmd/dispatch.h"
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

#define RECORDS_MAX 64

typedef struct shipped {
  scn_gstore_record r[RECORDS_MAX];
  char group[RECORDS_MAX][SCN_NAME_MAX + 1];
  scn_buf bytes[RECORDS_MAX];
  size_t n;
} shipped;

static void on_record(void *ud, const scn_gstore_record *rec) {
  shipped *s = ud;
  CU_ASSERT_FATAL(s->n < RECORDS_MAX);
  size_t i = s->n++;
  snprintf(s->group[i], sizeof s->group[i], "%s", rec->group);
  s->bytes[i] = (scn_buf){0};
  scn_buf_add(&s->bytes[i], rec->bytes, rec->len);
  s->r[i] = *rec;
  s->r[i].group = s->group[i];
  s->r[i].bytes = s->bytes[i].data;
}

typedef struct store {
  scn_server srv;
  scn_gstore *gs;
} store;

/* Each store hands out ids from slots of its own, as each daemon of a cluster does. */
static void store_open(store *s, const char *dir, const char *node, uint32_t first_slot) {
  memset(s, 0, sizeof *s);
  char *argv[] = {"journal-tests", NULL};
  char err[256];
  scn_config_load(&s->srv.cfg, 1, argv, err, sizeof err);
  snprintf(s->srv.cfg.data_dir, sizeof s->srv.cfg.data_dir, "%s", dir);
  s->srv.loop = uv_default_loop();
  scn_limits limits = {.max_worlds = 16, .max_transforms = 1000};
  s->srv.scene = scn_scene_new(&limits);
  scn_entity_record(s->srv.scene, true);
  CU_ASSERT_FATAL(scn_entity_use_ranges(s->srv.scene) == SCN_OK);
  CU_ASSERT_FATAL(scn_entity_add_slots(s->srv.scene, first_slot, 1000) == SCN_OK);
  s->srv.stream = scn_stream_open(&s->srv);
  s->srv.dispatch = scn_dispatch_open(&s->srv);
  int rc;
  s->gs = scn_gstore_open(&s->srv, node, scn_dispatch_replay, &s->srv, &rc);
  CU_ASSERT_FATAL(s->gs != NULL);
  s->srv.gstore = s->gs;
  scn_gstore_start(s->gs);
}

static void store_close(store *s) {
  scn_gstore_close(s->gs);
  scn_dispatch_close(s->srv.dispatch);
  scn_stream_close(s->srv.stream);
  scn_scene_free(s->srv.scene);
  uv_run(s->srv.loop, UV_RUN_NOWAIT);
}

static void run_ok(scn_conn *c, const char *line) {
  c->out.bytes.len = 0;
  scn_dispatch_line(c, line, strlen(line));
  scn_buf_addc(&c->out.bytes, '\0');
  if (!strstr(c->out.bytes.data, "\"ok\":true"))
    fprintf(stderr, "  %s -> %s", line, c->out.bytes.data);
  CU_ASSERT(strstr(c->out.bytes.data, "\"ok\":true") != NULL);
}

static bool same_scene(scn_scene *a, scn_scene *b) {
  bool same = t_same_scene(a, b);
  if (!same)
    fprintf(stderr, "  the scenes differ: %s\n", t_scene_difference());
  return same;
}

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
static bool receive(store *owner, store *dst, uint64_t *epoch, uint64_t *seq) {
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
  store a, b;
  store_open(&a, dir_a, "a", 1);
  store_open(&b, dir_b, "b", 2001);
  /* b's directory has g1 from an older epoch (3), which the install replaces. */
  CU_ASSERT_FATAL(scn_gstore_acquire(b.gs, "g1", 3, false, err, sizeof err) == 0);
  scn_conn cb = {.srv = &b.srv, .authed = true, .matrices = SCN_MATRICES_B64};
  run_ok(&cb, "{\"cmd\":\"world.create\",\"world\":\"g1.old\"}");
  store_close(&b);
  store_open(&b, dir_b, "b", 2001);
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
    run_ok(&c, before[i]);
  uint64_t epoch = 0, seq = 0, here_epoch = 0, here_seq = 0;
  CU_ASSERT_FATAL(receive(&a, &b, &epoch, &seq));
  CU_ASSERT_EQUAL(epoch, 5);
  CU_ASSERT_EQUAL(seq, sizeof before / sizeof *before);
  CU_ASSERT(scn_gstore_position(b.gs, "g1", &here_epoch, &here_seq));
  CU_ASSERT(here_epoch == 5 && here_seq == seq);
  CU_ASSERT(same_scene(a.srv.scene, b.srv.scene));
  CU_ASSERT(exists(dir_b, "groups/g1/epoch.5/seq.1"));
  CU_ASSERT(!exists(dir_b, "groups/g1/epoch.3"));
  CU_ASSERT(!exists(dir_b, "groups/g1/incoming.tmp"));
  CU_ASSERT(!exists(dir_a, "groups/g1/outgoing.tmp"));

  /* Records after the copy apply on it; a snapshot in between notes its seq. */
  shipped s = {0};
  scn_gstore_set_tap(a.gs, on_record, &s);
  run_ok(&c, "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"name\":\"x\"}");
  run_ok(&c, "{\"cmd\":\"world.create\",\"world\":\"g1.b\"}");
  for (size_t i = 0; i < s.n; i++)
    CU_ASSERT(scn_gstore_apply(b.gs, &s.r[i], err, sizeof err) == 0);
  uint64_t bytes;
  CU_ASSERT(scn_gstore_save(b.gs, "g1", &bytes) == 0);
  size_t at = s.n;
  run_ok(&c, "{\"cmd\":\"transform.create\",\"world\":\"g1.b\",\"t\":[4,5,6]}");
  run_ok(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"g1.a\",\"entity\":1,\"t\":[7,8,9]}");
  for (size_t i = at; i < s.n; i++)
    CU_ASSERT(scn_gstore_apply(b.gs, &s.r[i], err, sizeof err) == 0);
  CU_ASSERT(same_scene(a.srv.scene, b.srv.scene));
  CU_ASSERT(scn_gstore_position(a.gs, "g1", &epoch, &seq));
  scn_hooks_before_flush(&b.srv);
  store_close(&b);

  /* Restarted on its directory: the copy resumes at its last seq, nothing else asked for. */
  store d;
  store_open(&d, dir_b, "d", 3001);
  CU_ASSERT(scn_gstore_disk_epoch(d.gs, "g1", &here_epoch) && here_epoch == 5);
  CU_ASSERT(scn_gstore_resume(d.gs, "g1", 6, &here_seq, err, sizeof err) == -1);
  CU_ASSERT(scn_gstore_resume(d.gs, "g1", 5, &here_seq, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(here_seq, seq);
  CU_ASSERT(same_scene(a.srv.scene, d.srv.scene));
  /* and goes on applying from there */
  at = s.n;
  run_ok(&c, "{\"cmd\":\"transform.create\",\"world\":\"g1.a\",\"name\":\"after\"}");
  for (size_t i = at; i < s.n; i++)
    CU_ASSERT(scn_gstore_apply(d.gs, &s.r[i], err, sizeof err) == 0);
  CU_ASSERT(same_scene(a.srv.scene, d.srv.scene));
  store_close(&d);

  /* A group no longer this daemon's: its directory goes. */
  store e;
  store_open(&e, dir_b, "e", 4001);
  scn_gstore_forget(e.gs, "g1");
  CU_ASSERT(!exists(dir_b, "groups/g1"));
  store_close(&e);

  for (size_t i = 0; i < s.n; i++)
    scn_buf_free(&s.bytes[i]);
  scn_buf_free(&c.out.bytes);
  scn_buf_free(&cb.out.bytes);
  store_close(&a);
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

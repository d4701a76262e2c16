/* The journal writer on a real loop, without a daemon: what each fsync policy does on the
 * loop and off it, and that a descriptor a thread-pool fsync still uses is closed only once
 * that fsync is done (a snapshot's new generation, a group let go), the writer's memory being
 * free to go at once. */
#include "harness.h"
#include "ops/config.h"
#include "runner.h"
#include "store/journal.h"
#include "store/journal_writer.h"
#include "store/path.h"

#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool fd_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

typedef struct lines {
  char text[8][128];
  int n;
} lines;

static bool keep_line(void *ud, const char *line, size_t len) {
  lines *l = ud;
  if (l->n < 8)
    snprintf(l->text[l->n++], sizeof l->text[0], "%.*s", (int)len, line);
  return true;
}

/* The records of generation gen in dir. */
static lines read_journal(const char *dir, uint64_t gen) {
  lines l = {0};
  scn_path path;
  scn_journal_scan scan;
  char err[SCN_PATH_MSG_MAX];
  CU_ASSERT_FATAL(scn_journal_path(&path, dir, gen));
  CU_ASSERT(scn_journal_replay(path.s, false, keep_line, &l, &scan, err, sizeof err) == 0);
  CU_ASSERT(!scan.torn);
  return l;
}

#define LINE(s) s, strlen(s)

static void test_always_syncs_in_the_commit(void) {
  char dir[256];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "jw-always"));
  uv_loop_t loop;
  uv_loop_init(&loop);
  scn_journal_stats stats = {0};
  scn_jwriter w;
  scn_jwriter_init(&w, &loop, SCN_FSYNC_ALWAYS, &stats);
  CU_ASSERT_FATAL(scn_jwriter_open(&w, dir, 1) == 0);
  uint64_t made[] = {7, 9};
  scn_jwriter_append(&w, LINE("{\"cmd\":\"entity.create\",\"count\":2}"), made, 2);
  scn_jwriter_append(&w, LINE("{\"cmd\":\"world.create\",\"world\":\"a\"}"), NULL, 0);
  CU_ASSERT(scn_jwriter_pending(&w));
  CU_ASSERT(scn_jwriter_commit(&w) == 0);
  CU_ASSERT(!scn_jwriter_pending(&w));
  CU_ASSERT(w.unsynced == 0 && w.inflight == NULL);
  CU_ASSERT(stats.records == 2 && stats.fsyncs == 1 && stats.bytes > 0);
  lines l = read_journal(dir, 1);
  CU_ASSERT(l.n == 2);
  CU_ASSERT_STRING_EQUAL(l.text[0], "{\"cmd\":\"entity.create\",\"count\":2,\"created\":[7,9]}");
  CU_ASSERT_STRING_EQUAL(l.text[1], "{\"cmd\":\"world.create\",\"world\":\"a\"}");
  scn_jwriter_close(&w);
  CU_ASSERT(uv_run(&loop, UV_RUN_DEFAULT) == 0);
  uv_loop_close(&loop);
  t_remove_temp_dir(dir);
}

/* everysec: the fsync runs on the thread pool; a new generation while it runs leaves the old
 * descriptor open until its callback, which syncs again what was written after it started. */
static void test_everysec_switch_waits_for_the_fsync(void) {
  char dir[256];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "jw-everysec"));
  uv_loop_t loop;
  uv_loop_init(&loop);
  scn_journal_stats stats = {0};
  scn_jwriter w;
  scn_jwriter_init(&w, &loop, SCN_FSYNC_EVERYSEC, &stats);
  CU_ASSERT_FATAL(scn_jwriter_open(&w, dir, 1) == 0);
  scn_jwriter_append(&w, LINE("{\"cmd\":\"world.create\",\"world\":\"a\"}"), NULL, 0);
  CU_ASSERT(scn_jwriter_commit(&w) == 0);
  CU_ASSERT(stats.fsyncs == 0 && w.unsynced > 0); /* nothing synced on the loop */
  scn_jwriter_fsync_later(&w);
  CU_ASSERT_FATAL(w.inflight != NULL);
  CU_ASSERT(w.unsynced == 0 && stats.fsyncs == 1);
  scn_jwriter_fsync_later(&w); /* one at a time */
  CU_ASSERT(stats.fsyncs == 1);
  /* written after the fsync started, then a snapshot's new generation */
  scn_jwriter_append(&w, LINE("{\"cmd\":\"world.create\",\"world\":\"b\"}"), NULL, 0);
  CU_ASSERT(scn_jwriter_commit(&w) == 0);
  int old_fd = w.fd;
  int next_fd = scn_journal_open(dir, 2);
  CU_ASSERT_FATAL(next_fd >= 0);
  scn_jwriter_switch(&w, next_fd, 2);
  CU_ASSERT(w.fd == next_fd && w.gen == 2 && w.inflight == NULL && w.unsynced == 0);
  CU_ASSERT(fd_open(old_fd));   /* the callback closes it */
  CU_ASSERT(stats.fsyncs == 2); /* the one more for the bytes after the first */
  CU_ASSERT(uv_run(&loop, UV_RUN_DEFAULT) == 0);
  CU_ASSERT(!fd_open(old_fd));
  CU_ASSERT(fd_open(next_fd));
  CU_ASSERT(read_journal(dir, 1).n == 2);
  /* a generation let go with unsynced bytes and no fsync running gets one off the loop */
  scn_jwriter_append(&w, LINE("{\"cmd\":\"world.create\",\"world\":\"c\"}"), NULL, 0);
  CU_ASSERT(scn_jwriter_commit(&w) == 0);
  CU_ASSERT_FATAL(scn_jwriter_open(&w, dir, 3) == 0);
  CU_ASSERT(fd_open(next_fd) && stats.fsyncs == 3);
  CU_ASSERT(uv_run(&loop, UV_RUN_DEFAULT) == 0);
  CU_ASSERT(!fd_open(next_fd));
  CU_ASSERT(read_journal(dir, 2).n == 1);
  scn_jwriter_close(&w);
  uv_loop_close(&loop);
  t_remove_temp_dir(dir);
}

/* A group let go while its fsync runs: the writer goes at once, the descriptor after. */
static void test_close_during_the_fsync(void) {
  char dir[256];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "jw-close"));
  uv_loop_t loop;
  uv_loop_init(&loop);
  scn_journal_stats stats = {0};
  scn_jwriter *w = malloc(sizeof *w);
  CU_ASSERT_FATAL(w != NULL);
  scn_jwriter_init(w, &loop, SCN_FSYNC_EVERYSEC, &stats);
  CU_ASSERT_FATAL(scn_jwriter_open(w, dir, 1) == 0);
  scn_jwriter_append(w, LINE("{\"cmd\":\"world.create\",\"world\":\"a\"}"), NULL, 0);
  scn_jwriter_commit(w);
  scn_jwriter_fsync_later(w);
  CU_ASSERT_FATAL(w->inflight != NULL);
  /* a hand-over syncs on the loop even though the thread-pool fsync took the unsynced bytes */
  CU_ASSERT(w->unsynced == 0);
  CU_ASSERT(scn_jwriter_fsync(w) == 0);
  CU_ASSERT(stats.fsyncs == 2);
  int fd = w->fd;
  scn_jwriter_append(w, LINE("{\"cmd\":\"world.create\",\"world\":\"b\"}"), NULL, 0);
  scn_jwriter_close(w); /* the pending record is dropped */
  free(w);
  CU_ASSERT(fd_open(fd));
  CU_ASSERT(uv_run(&loop, UV_RUN_DEFAULT) == 0);
  CU_ASSERT(!fd_open(fd));
  CU_ASSERT(read_journal(dir, 1).n == 1);
  uv_loop_close(&loop);
  t_remove_temp_dir(dir);
}

/* A write that fails keeps the records for the next commit. */
static void test_failed_write_keeps_the_records(void) {
  char dir[256];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "jw-fail"));
  uv_loop_t loop;
  uv_loop_init(&loop);
  scn_journal_stats stats = {0};
  scn_jwriter w;
  scn_jwriter_init(&w, &loop, SCN_FSYNC_NO, &stats);
  CU_ASSERT_FATAL(scn_jwriter_open(&w, dir, 1) == 0);
  scn_path path;
  CU_ASSERT_FATAL(scn_journal_path(&path, dir, 1));
  int read_only = open(path.s, O_RDONLY | O_CLOEXEC);
  CU_ASSERT_FATAL(read_only >= 0);
  scn_jwriter_switch(&w, read_only, 1); /* writes to it fail */
  scn_jwriter_append(&w, LINE("{\"cmd\":\"world.create\",\"world\":\"a\"}"), NULL, 0);
  CU_ASSERT(scn_jwriter_commit(&w) == -1);
  CU_ASSERT(scn_jwriter_pending(&w) && stats.bytes == 0);
  CU_ASSERT_FATAL(scn_jwriter_open(&w, dir, 2) == 0);
  CU_ASSERT(!fd_open(read_only));
  CU_ASSERT(scn_jwriter_commit(&w) == 0);
  CU_ASSERT(!scn_jwriter_pending(&w) && stats.bytes > 0 && stats.fsyncs == 0);
  CU_ASSERT(read_journal(dir, 2).n == 1);
  scn_jwriter_close(&w);
  CU_ASSERT(uv_run(&loop, UV_RUN_DEFAULT) == 0);
  uv_loop_close(&loop);
  t_remove_temp_dir(dir);
}

static void test_path_too_long(void) {
  scn_path p;
  char name[SCN_PATH_MAX];
  memset(name, 'x', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  errno = 0;
  CU_ASSERT(!scn_path_join(&p, "/tmp", name));
  CU_ASSERT(errno == ENAMETOOLONG && p.s[0] == '\0');
  name[SCN_PATH_MAX - 6] = '\0'; /* "/tmp/" + name + NUL: exactly PATH_MAX */
  CU_ASSERT(scn_path_join(&p, "/tmp", name));
  CU_ASSERT(strlen(p.s) == SCN_PATH_MAX - 1);
  CU_ASSERT(scn_journal_path(&p, "/d", 42) && strcmp(p.s, "/d/journal.42.scn") == 0);
}

int t_register_journal_writer(void) {
  static const t_test tests[] = {
      {"always: written and fdatasynced in the commit", test_always_syncs_in_the_commit},
      {"everysec: a new generation waits for the thread-pool fsync",
       test_everysec_switch_waits_for_the_fsync},
      {"let go during a thread-pool fsync", test_close_during_the_fsync},
      {"a failed write keeps the records", test_failed_write_keeps_the_records},
      {"paths too long are refused, not cut", test_path_too_long},
  };
  return T_ADD_SUITE("journal_writer", NULL, NULL, tests);
}

/* Integration tests of damaged or unusable data against the real daemon: a torn journal tail is
 * dropped with a warning, other damage to the snapshot or a journal refuses the start unless
 * --recover, and unusable or locked data directories exit 2. Every test has its own temporary
 * data directory. */
#include "daemon_fixtures.h"
#include "persist_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOURNAL_MAGIC 0x524A4353u /* "SCJR", as in server/journal.h */
#define SNAP_HEADER 32
#define SNAP_BLOCK 65536

static size_t count_lines(const char *s) {
  size_t n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

/* Runs scened --listen 127.0.0.1:0 --http off --data dir expecting it to exit by itself within
 * timeout_ms; returns its waitpid status (or -1 when it kept running and was killed) and what it
 * wrote to stderr in *text (caller frees). */
static int run_expect_exit(const char *dir, char **text, int timeout_ms) {
  const char *args[] = {"--listen", "127.0.0.1:0", "--http", "off", "--data", dir, NULL};
  t_proc p;
  if (t_proc_start(&p, t_daemon_bin(), args, NULL, NULL, 0))
    t_proc_wait(&p, timeout_ms);
  *text = strdup(text_str(&p.err));
  t_proc_free(&p);
  return p.status;
}

/* ---- talking --------------------------------------------------------------------------------- */

/* Runs scened --data dir expecting a refusal that names what (and what2, unless NULL): a
 * non-zero exit. */
static void expect_refused(const char *dir, const char *what, const char *what2) {
  char *text;
  int status = run_expect_exit(dir, &text, 5000);
  bool good = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) != 0 && strstr(text, what) &&
              (!what2 || strstr(text, what2));
  CU_ASSERT(good);
  if (!good)
    fprintf(stderr, "  expected a refusal naming %s: status %d, stderr:\n%.1000s\n", what, status,
            text);
  free(text);
}

/* The path of the newest journal, or false. */
static bool newest_journal(const char *dir, char *path, size_t len) {
  unsigned long long gens[64];
  size_t n = journals(dir, gens, 64);
  if (n == 0)
    return false;
  snprintf(path, len, "%s/journal.%llu.scn", dir, gens[n - 1]);
  return true;
}

static bool append_bytes(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_APPEND);
  if (fd < 0)
    return false;
  bool ok = write(fd, data, len) == (ssize_t)len;
  close(fd);
  return ok;
}

static bool flip_byte(const char *path, long offset) {
  int fd = open(path, O_RDWR);
  if (fd < 0)
    return false;
  unsigned char b;
  bool ok = pread(fd, &b, 1, offset) == 1;
  b ^= 0x20;
  ok = ok && pwrite(fd, &b, 1, offset) == 1;
  close(fd);
  return ok;
}

/* CRC-32C (Castagnoli), as the journal records carry. */
static uint32_t crc32c(const void *data, size_t len) {
  const unsigned char *p = data;
  uint32_t crc = 0xFFFFFFFFu;
  while (len--) {
    crc ^= *p++;
    for (int k = 0; k < 8; k++)
      crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

/* The offsets of the journal's records (at most cap); -1 when the file is not a sequence of
 * intact records. */
static long journal_records(const char *path, long *offsets, long cap) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  long n = 0, off = 0;
  for (;;) {
    uint32_t head[3];
    size_t got = fread(head, 1, sizeof head, f);
    if (got == 0)
      break;
    if (got != sizeof head || head[0] != JOURNAL_MAGIC) {
      n = -1;
      break;
    }
    char *line = malloc(head[1] ? head[1] : 1);
    bool ok = line && fread(line, 1, head[1], f) == head[1] && crc32c(line, head[1]) == head[2];
    free(line);
    if (!ok) {
      n = -1;
      break;
    }
    if (n < cap)
      offsets[n] = off;
    n++;
    off += 12 + (long)head[1];
  }
  fclose(f);
  return n;
}

/* A record cut short at the end of the newest journal is dropped with a warning; the journal
 * is trimmed so later records append cleanly. */
static void test_torn_journal_tail_dropped(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  const char *const always[] = {"--fsync", "always", NULL};
  uint64_t ids[20];
  const char *const w1[] = {"w"};
  char path[256], expect[64];
  if (!start_on(&d, dir, always))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  for (int i = 0; i < 20; i++)
    ids[i] = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"t\":[%d,0.5,0]}", i);
  for (int i = 1; i < 20; i++)
    OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"w\",\"entity\":%llu,\"parent\":%llu}",
        (unsigned long long)ids[i], (unsigned long long)ids[i / 2]);
  t_client_close(&c);
  char *before = capture(d.port, w1, 1, ids, 20);
  kill9(&d);

  /* Half of a valid-looking record. */
  CU_ASSERT_FATAL(newest_journal(dir, path, sizeof path));
  long size = file_size(path);
  CU_ASSERT(size > 0 && journal_records(path, NULL, 0) == 40);
  const char *line = "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":1,\"t\":[9,9,9]}";
  unsigned char rec[256];
  uint32_t head[3] = {JOURNAL_MAGIC, (uint32_t)strlen(line), crc32c(line, strlen(line))};
  memcpy(rec, head, 12);
  memcpy(rec + 12, line, strlen(line));
  CU_ASSERT_FATAL(append_bytes(path, rec, (12 + strlen(line)) / 2));
  if (!start_on(&d, dir, always))
    goto done;
  CU_ASSERT(t_daemon_log_contains(&d, "torn"));
  snprintf(expect, sizeof expect, "offset=%ld", size);
  CU_ASSERT(t_daemon_log_contains(&d, expect));
  char *after = capture(d.port, w1, 1, ids, 20);
  expect_same(before, after, "state after a torn tail");
  free(after);
  CU_ASSERT(file_size(path) == size); /* trimmed back to the last whole record */

  /* One more acknowledged change, kill -9, then a few garbage bytes. */
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[5,6,7]}",
      (unsigned long long)ids[3]);
  t_client_close(&c);
  free(before);
  before = capture(d.port, w1, 1, ids, 20);
  kill9(&d);
  CU_ASSERT_FATAL(newest_journal(dir, path, sizeof path));
  size = file_size(path);
  CU_ASSERT(journal_records(path, NULL, 0) == 41);
  CU_ASSERT_FATAL(append_bytes(path, "\x53\x43\x4a", 3));
  if (!start_on(&d, dir, always))
    goto done;
  CU_ASSERT(t_daemon_log_contains(&d, "torn"));
  snprintf(expect, sizeof expect, "offset=%ld", size);
  CU_ASSERT(t_daemon_log_contains(&d, expect));
  after = capture(d.port, w1, 1, ids, 20);
  expect_same(before, after, "state after garbage at the end of the journal");
  CU_ASSERT(after && strstr(after, "[1,0,0,0,0,1,0,0,0,0,1,0,5,6,7,1]"));
  free(after);
  STOP_OK(&d, 15000);
done:
  free(before);
out:
  end_test(dir);
}

/* A flipped byte in the middle of the snapshot: the start is refused naming the file and the
 * offset of the damaged block; --recover starts, logs the loss and keeps what was before it. */
static void test_corrupt_snapshot(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  enum { KEEP = 200, LOST = 1500 };
  t_daemon d;
  uint64_t *ids = calloc(KEEP + LOST, sizeof *ids);
  char *before = NULL;
  const char *const keepw[] = {"keep"};
  if (!ids || !start_on(&d, dir, NULL))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"keep\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"lost\"}");
  cJSON *made = OK(&c, "{\"cmd\":\"entity.create\",\"count\":%d}", KEEP + LOST);
  const cJSON *list = made ? cJSON_GetObjectItemCaseSensitive(made, "entities") : NULL;
  CU_ASSERT_FATAL(cJSON_GetArraySize(list) == KEEP + LOST);
  for (int i = 0; i < KEEP + LOST; i++)
    ids[i] = (uint64_t)cJSON_GetArrayItem(list, i)->valuedouble;
  cJSON_Delete(made);
  t_client_close(&c);
  strlist q = {0};
  for (int i = 0; i < KEEP; i++)
    sl_add(&q,
           "{\"cmd\":\"transform.create\",\"world\":\"keep\",\"entity\":%llu,\"name\":\"k%d\","
           "\"t\":[%g,1,2],\"r\":[0.3,0.2,0.1,%g]}",
           (unsigned long long)ids[i], i, i * 0.37, 1.0 + i);
  for (int i = KEEP; i < KEEP + LOST; i++)
    sl_add(&q,
           "{\"cmd\":\"transform.create\",\"world\":\"lost\",\"entity\":%llu,\"name\":\"l%d\","
           "\"t\":[%d,0,0]}",
           (unsigned long long)ids[i], i, i);
  run_all_ok(d.port, &q);
  sl_free(&q);
  before = capture(d.port, keepw, 1, ids, KEEP);
  STOP_OK(&d, 15000);

  char snap[256];
  snprintf(snap, sizeof snap, "%s/snapshot.scn", dir);
  long size = file_size(snap);
  CU_ASSERT_FATAL(size > 2 * (SNAP_BLOCK + 4) + SNAP_HEADER);
  long mid = size / 2;
  long block_at = SNAP_HEADER + (mid - SNAP_HEADER) / (SNAP_BLOCK + 4) * (SNAP_BLOCK + 4);
  CU_ASSERT_FATAL(flip_byte(snap, mid));

  char offset[64];
  snprintf(offset, sizeof offset, "offset %ld", block_at);
  expect_refused(dir, snap, offset);
  CU_ASSERT(file_size(snap) == size); /* a refused start changes nothing */

  const char *const recover[] = {"--recover", NULL};
  if (!start_on(&d, dir, recover))
    goto out;
  CU_ASSERT(t_daemon_log_contains(&d, "recover"));
  CU_ASSERT(t_daemon_log_contains(&d, "snapshot.scn"));
  CU_ASSERT(t_daemon_log_contains(&d, offset));
  char *after = capture(d.port, keepw, 1, ids, KEEP);
  expect_same(before, after, "the world before the damage after --recover");
  free(after);
  CONNECT_FATAL(&c, d.port);
  cJSON *wl = OK(&c, "{\"cmd\":\"world.list\"}");
  const cJSON *worlds = wl ? cJSON_GetObjectItemCaseSensitive(wl, "worlds") : NULL;
  double lost_count = -1;
  for (int i = 0; i < cJSON_GetArraySize(worlds); i++) {
    const cJSON *w = cJSON_GetArrayItem(worlds, i);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(w, "name");
    if (cJSON_IsString(name) && !strcmp(name->valuestring, "lost"))
      lost_count = t_resp_num(w, "transforms");
  }
  CU_ASSERT(lost_count < LOST); /* part of it was in the damaged block */
  cJSON_Delete(wl);
  t_client_close(&c);
  char *recovered = capture(d.port, keepw, 1, ids, KEEP + LOST);
  STOP_OK(&d, 15000);
  /* What was recovered is consistent again: a plain start takes it as it is. */
  if (start_on(&d, dir, NULL)) {
    after = capture(d.port, keepw, 1, ids, KEEP + LOST);
    expect_same(recovered, after, "a plain start after --recover");
    free(after);
    STOP_OK(&d, 15000);
  }
  free(recovered);
out:
  free(before);
  free(ids);
  end_test(dir);
}

/* A flipped byte in the snapshot's header (the journal generation it covers) is damage like any
 * other: the start is refused, not made from the snapshot without the journal after it. */
static void test_corrupt_snapshot_header(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  const char *const always[] = {"--fsync", "always", NULL};
  char snap[256];
  snprintf(snap, sizeof snap, "%s/snapshot.scn", dir);
  if (!start_on(&d, dir, always))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  uint64_t e = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"t\":[1,0,0]}");
  OKD(&c, "{\"cmd\":\"save\"}");
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[2,0,0]}",
      (unsigned long long)e);
  t_client_close(&c);
  kill9(&d);
  /* Bytes 16..23 hold the generation: its lowest and its highest byte. */
  static const long offsets[] = {16, 23};
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_FATAL(flip_byte(snap, offsets[i]));
    expect_refused(dir, snap, "offset 0");
    CU_ASSERT_FATAL(flip_byte(snap, offsets[i])); /* undone */
  }
  /* Undamaged again, it loads with the journal after it. */
  if (start_on(&d, dir, always)) {
    CONNECT_FATAL(&c, d.port);
    double m[16];
    CU_ASSERT(get_local(&c, "w", e, m) && mat_is_translation(m, 2, 0, 0));
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
out:
  end_test(dir);
}

/* A flipped byte inside an early journal record with many records after it: the start is
 * refused naming the file and the record's offset; --recover keeps the records after it. */
static void test_corrupt_journal_body(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  enum { SETS = 300 };
  t_daemon d;
  const char *const always[] = {"--fsync", "always", NULL};
  char path[256];
  if (!start_on(&d, dir, always))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");                         /* record 0 */
  uint64_t e1 = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\"}"); /* 1 */
  uint64_t e2 = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\"}"); /* 2 */
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[7,7,7]}",
      (unsigned long long)e2); /* 3: to be damaged */
  strlist q = {0};
  for (int k = 0; k < SETS; k++)
    sl_add(&q, "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[%d,1,2]}",
           (unsigned long long)e1, k);
  run_all_ok(d.port, &q);
  sl_free(&q);
  uint64_t e3 = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"last\"}");
  t_client_close(&c);
  kill9(&d);

  CU_ASSERT_FATAL(newest_journal(dir, path, sizeof path));
  long offs[8];
  CU_ASSERT_FATAL(journal_records(path, offs, 8) == 4 + SETS + 1);
  CU_ASSERT_FATAL(flip_byte(path, offs[3] + 12 + (offs[4] - offs[3] - 12) / 2));
  long size = file_size(path);

  char offset[64];
  snprintf(offset, sizeof offset, "offset %ld", offs[3]);
  expect_refused(dir, path, offset);
  CU_ASSERT(file_size(path) == size);

  const char *const recover[] = {"--recover", NULL};
  if (!start_on(&d, dir, recover))
    goto out;
  CU_ASSERT(t_daemon_log_contains(&d, "damaged"));
  CU_ASSERT(t_daemon_log_contains(&d, "journal.0.scn"));
  CONNECT_FATAL(&c, d.port);
  double m[16];
  CU_ASSERT(get_local(&c, "w", e1, m) && mat_is_translation(m, SETS - 1, 1, 2));
  CU_ASSERT(get_local(&c, "w", e2, m) && mat_is_translation(m, 0, 0, 0)); /* its set was lost */
  cJSON *r = OK(&c, "{\"cmd\":\"transform.find\",\"world\":\"w\",\"path\":\"last\"}");
  CU_ASSERT(t_resp_num(r, "entity") == (double)e3);
  cJSON_Delete(r);
  t_client_close(&c);
  STOP_OK(&d, 15000);
out:
  end_test(dir);
}

/* The last journal record is complete but fails its checksum: that is damage, not a write cut
 * short (under --fsync always it was acknowledged), so the start is refused; --recover starts
 * without it and says so. */
static void test_journal_last_record_damaged(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  const char *const always[] = {"--fsync", "always", NULL};
  char path[256], offset[64];
  if (!start_on(&d, dir, always))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  for (int i = 0; i < 5; i++)
    CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"n%d\"}", i);
  t_client_close(&c);
  kill9(&d);
  CU_ASSERT_FATAL(newest_journal(dir, path, sizeof path));
  long offs[8];
  CU_ASSERT_FATAL(journal_records(path, offs, 8) == 6);
  long size = file_size(path);
  CU_ASSERT_FATAL(flip_byte(path, offs[5] + 12 + (size - offs[5] - 12) / 2));
  snprintf(offset, sizeof offset, "offset %ld", offs[5]);
  expect_refused(dir, path, offset);
  CU_ASSERT(file_size(path) == size);
  const char *const recover[] = {"--recover", NULL};
  if (!start_on(&d, dir, recover))
    goto out;
  CU_ASSERT(t_daemon_log_contains(&d, "damaged"));
  CU_ASSERT(file_size(path) == offs[5]); /* cut, so new records follow intact ones */
  CONNECT_FATAL(&c, d.port);
  CU_ASSERT(first_world_transforms(&c) == 4);
  CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\"}");
  t_client_close(&c);
  kill9(&d);
  /* Zero bytes at the end (space allocated before a crash, never written) are a torn tail. */
  static const char zeros[100];
  CU_ASSERT_FATAL(append_bytes(path, zeros, sizeof zeros));
  if (!start_on(&d, dir, always))
    goto out;
  CU_ASSERT(t_daemon_log_contains(&d, "torn"));
  CONNECT_FATAL(&c, d.port);
  CU_ASSERT(first_world_transforms(&c) == 5);
  t_client_close(&c);
  STOP_OK(&d, 15000);
out:
  end_test(dir);
}

/* The journal a snapshot continues in is gone, or bytes follow the snapshot's end: refused,
 * never a start with partial state. */
static void test_missing_journal_or_snapshot_tail(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  char snap[256], path[256];
  snprintf(snap, sizeof snap, "%s/snapshot.scn", dir);
  if (!start_on(&d, dir, NULL))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\"}");
  OKD(&c, "{\"cmd\":\"save\"}");
  for (int i = 0; i < 3; i++)
    CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\"}");
  t_client_close(&c);
  STOP_OK(&d, 15000); /* the final snapshot continues in a new, empty journal */
  CU_ASSERT_FATAL(newest_journal(dir, path, sizeof path));
  CU_ASSERT(file_size(path) == 0);

  long size = file_size(snap);
  CU_ASSERT_FATAL(append_bytes(snap, "tail", 4));
  expect_refused(dir, snap, "after the end");
  CU_ASSERT_FATAL(truncate(snap, size) == 0);

  CU_ASSERT_FATAL(unlink(path) == 0);
  expect_refused(dir, path, "missing");
  const char *const recover[] = {"--recover", NULL};
  if (!start_on(&d, dir, recover))
    goto out;
  CU_ASSERT(t_daemon_log_contains(&d, "missing"));
  CONNECT_FATAL(&c, d.port);
  CU_ASSERT(first_world_transforms(&c) == 4); /* in the snapshot; the journal was empty */
  t_client_close(&c);
  STOP_OK(&d, 15000);

  /* A version 1 snapshot (whose final save did not create the next journal) starts without
   * it: nothing says a journal ever existed. */
  CU_ASSERT_FATAL(newest_journal(dir, path, sizeof path));
  CU_ASSERT_FATAL(unlink(path) == 0);
  unsigned char head[32], both[28];
  FILE *f = fopen(snap, "r+b");
  CU_ASSERT_FATAL(f && fread(head, 1, 32, f) == 32);
  uint32_t one = 1;
  memcpy(head + 8, &one, 4);
  memcpy(both, head, 12);
  memcpy(both + 12, head + 16, 16);
  uint32_t crc = crc32c(both, sizeof both);
  memcpy(head + 12, &crc, 4);
  CU_ASSERT_FATAL(fseek(f, 0, SEEK_SET) == 0 && fwrite(head, 1, 32, f) == 32);
  fclose(f);
  if (!start_on(&d, dir, NULL))
    goto out;
  CONNECT_FATAL(&c, d.port);
  CU_ASSERT(first_world_transforms(&c) == 4);
  t_client_close(&c);
  STOP_OK(&d, 15000);
out:
  end_test(dir);
}

/* An unusable --data: one line on stderr and exit 2. */
static void expect_exit2_one_line(const char *data, const char *what) {
  char *text;
  int status = run_expect_exit(data, &text, 5000);
  bool good = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 2;
  CU_ASSERT(good);
  CU_ASSERT(count_lines(text) == 1 && text[strlen(text) - 1] == '\n');
  CU_ASSERT(strstr(text, data) != NULL);
  if (!good || count_lines(text) != 1 || !strstr(text, data)) {
    fprintf(stderr, "  %s: status %d, stderr:\n%.1000s\n", what, status, text);
  }
  free(text);
}

static void test_unusable_data_dir(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  char file[128], under[160], ro[128];
  snprintf(file, sizeof file, "%s/plain-file", dir);
  FILE *f = fopen(file, "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs("not a directory\n", f);
  fclose(f);
  expect_exit2_one_line(file, "a regular file");
  snprintf(under, sizeof under, "%s/sub", file);
  expect_exit2_one_line(under, "a path under a regular file");
  if (geteuid() != 0) {
    snprintf(ro, sizeof ro, "%s/read-only", dir);
    CU_ASSERT_FATAL(mkdir(ro, 0500) == 0);
    expect_exit2_one_line(ro, "a directory without write permission");
    chmod(ro, 0700);
  }
  end_test(dir);
}

/* A second daemon on a data directory in use exits 2; the first keeps working. */
static void test_second_daemon_locked_out(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  if (!start_on(&d, dir, NULL))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  expect_exit2_one_line(dir, "a data directory in use");
  cJSON *r = OK(&c, "{\"cmd\":\"world.list\"}");
  const cJSON *worlds = r ? cJSON_GetObjectItemCaseSensitive(r, "worlds") : NULL;
  CU_ASSERT(cJSON_GetArraySize(worlds) == 1);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"save\"}");
  t_client_close(&c);
  STOP_OK(&d, 15000);
  /* Once the first is gone, the directory is free again. */
  if (start_on(&d, dir, NULL)) {
    CONNECT_FATAL(&c, d.port);
    r = OK(&c, "{\"cmd\":\"world.list\"}");
    worlds = r ? cJSON_GetObjectItemCaseSensitive(r, "worlds") : NULL;
    CU_ASSERT(cJSON_GetArraySize(worlds) == 1);
    cJSON_Delete(r);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
out:
  end_test(dir);
}

int t_register_daemon_persist_damage(void) {
  static const t_test tests[] = {
      {"torn journal tail is dropped", test_torn_journal_tail_dropped},
      {"corrupt snapshot", test_corrupt_snapshot},
      {"corrupt snapshot header", test_corrupt_snapshot_header},
      {"corrupt journal body", test_corrupt_journal_body},
      {"damaged last journal record is refused", test_journal_last_record_damaged},
      {"missing journal or snapshot tail is refused", test_missing_journal_or_snapshot_tail},
      {"unusable data dir", test_unusable_data_dir},
      {"second daemon locked out", test_second_daemon_locked_out},
  };
  return T_ADD_SUITE("daemon_persist_damage", NULL, NULL, tests);
}

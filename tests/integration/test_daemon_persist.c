/* Integration tests of durability against the real daemon (the contract's "Durability" section
 * and the --data part of "The daemon's command line"): clean restarts keep everything bit for
 * bit, acknowledged commands survive kill -9 under --fsync always, a torn journal tail is
 * dropped with a warning, other damage to the snapshot or a journal refuses the start unless
 * --recover, unusable or locked data directories exit 2, save and autosave. Every test has its
 * own temporary data directory. */
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
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

/* ---- per-test bookkeeping: the data directory and the daemon logs ------------------------- */

static char logs[32][256];
static int nlogs;
static unsigned failures_at_start;

static void remember_log(const char *path) {
  if (nlogs < 32)
    snprintf(logs[nlogs++], sizeof logs[0], "%s", path);
}

/* A fresh empty data directory under /tmp. */
static bool begin_test(char *dir, size_t len) {
  failures_at_start = CU_get_number_of_failures();
  nlogs = 0;
  if (!t_temp_dir(dir, len, "persist")) {
    CU_FAIL("mkdtemp failed");
    return false;
  }
  return true;
}

/* Removes the data directory, and the daemon logs unless the test failed (then they are named
 * for a look). */
static void end_test(const char *dir) {
  t_remove_tree(dir);
  bool failed = CU_get_number_of_failures() != failures_at_start;
  for (int i = 0; i < nlogs; i++) {
    if (failed)
      fprintf(stderr, "  daemon log: %s\n", logs[i]);
    else
      unlink(logs[i]);
  }
  nlogs = 0;
}

/* ---- strings -------------------------------------------------------------------------------- */

typedef struct strlist {
  char **v;
  size_t n, cap;
} strlist;

static void sl_add(strlist *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sl_add(strlist *l, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 256;
    char **p = realloc(l->v, sizeof *p * l->cap);
    if (!p)
      abort();
    l->v = p;
  }
  l->v[l->n] = strdup(tmp);
  if (!l->v[l->n])
    abort();
  l->n++;
}

static void sl_free(strlist *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

static size_t count_lines(const char *s) {
  size_t n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

/* ---- daemons -------------------------------------------------------------------------------- */

/* Starts scened on dir with extra args (NULL-terminated, may be NULL). */
static bool start_on(t_daemon *d, const char *dir, const char *const *extra) {
  const char *args[32] = {"--http", "off"};
  int n = 2;
  if (dir) {
    args[n++] = "--data";
    args[n++] = dir;
  }
  for (int i = 0; extra && extra[i] && n < 30; i++)
    args[n++] = extra[i];
  args[n] = NULL;
  bool up = START(d, args);
  remember_log(d->log_path);
  return up;
}

static void kill9(t_daemon *d) {
  int status = t_daemon_stop(d, SIGKILL, 5000);
  CU_ASSERT(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
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

/* ---- talking -------------------------------------------------------------------------------- */

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

/* transform.create (printf-style); the new entity's id, 0 after a failure. */
static uint64_t create_tf_at(const char *file, int line, t_client *c, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static uint64_t create_tf_at(const char *file, int line, t_client *c, const char *fmt, ...) {
  text req = {0};
  va_list ap;
  va_start(ap, fmt);
  text_vaddf(&req, fmt, ap);
  va_end(ap);
  cJSON *r = t_ok_at(file, line, c, "%s", text_str(&req));
  text_free(&req);
  double e = t_resp_num(r, "entity");
  cJSON_Delete(r);
  return e > 0 ? (uint64_t)e : 0;
}
#define CREATE_TF(c, ...) create_tf_at(__FILE__, __LINE__, (c), __VA_ARGS__)

/* transform.get answers the world's tick, which starts over at 1 in a restarted daemon: the
 * state compared is everything else. */
static void drop_tick(char *line) {
  char *at = strstr(line, "\"tick\":");
  if (!at)
    return;
  char *end = at + 7;
  while (*end && *end != ',' && *end != '}')
    end++;
  if (*end == ',')
    end++;
  memmove(at, end, strlen(end) + 1);
}

/* Sends every request of q (pipelined, in chunks so neither side's buffers fill) and returns
 * the response lines joined by '\n' (caller frees), or NULL when one did not come. When
 * all_ok, every response must be a success. */
static char *exchange(int port, const strlist *q, bool all_ok) {
  t_client c;
  if (!CONNECT(&c, port))
    return NULL;
  text out = {0};
  text_add(&out, "", 0);
  bool good = true;
  for (size_t i = 0; i < q->n && good;) {
    size_t end = i + 100 < q->n ? i + 100 : q->n;
    text chunk = {0};
    for (size_t k = i; k < end; k++) {
      text_add(&chunk, q->v[k], strlen(q->v[k]));
      text_add(&chunk, "\n", 1);
    }
    if (t_client_send_raw(&c, chunk.s, chunk.len) != 0)
      good = false;
    free(chunk.s);
    for (size_t k = i; k < end && good; k++) {
      char *line = t_client_recv(&c, 10000);
      if (!line) {
        CU_FAIL("a pipelined response did not come");
        t_report_text("request", q->v[k]);
        good = false;
        break;
      }
      if (all_ok && !strstr(line, "\"ok\":true")) {
        CU_FAIL("a pipelined request that must succeed failed");
        t_report_text("request", q->v[k]);
        t_report_text("response", line);
        good = false;
      }
      drop_tick(line);
      text_add(&out, line, strlen(line));
      text_add(&out, "\n", 1);
      free(line);
    }
    i = end;
  }
  t_client_close(&c);
  if (!good) {
    free(out.s);
    return NULL;
  }
  return out.s;
}

static void run_all_ok(int port, const strlist *q) { free(exchange(port, q, true)); }

/* The state as text: every query's exact response line. */
static void expect_same(const char *before, const char *after, const char *what) {
  if (before && after && strcmp(before, after) == 0) {
    CU_PASS(what);
    return;
  }
  CU_FAIL(what);
  if (!before || !after) {
    fprintf(stderr, "  %s: a capture is missing\n", what);
    return;
  }
  const char *a = before, *b = after;
  size_t line = 1;
  while (*a && *a == *b) {
    line += *a == '\n';
    a++, b++;
  }
  while (a > before && a[-1] != '\n')
    a--, b--;
  fprintf(stderr, "  %s: first difference at line %zu\n  before: %.400s\n  after:  %.400s\n", what,
          line, a, b);
}

/* world.list (with more than one world), then transform.get and transform.children of every
 * (world, entity) pair: the responses hold the parent, name, local and world matrices (float32
 * exact) and the child order, or the exact error for a pair that has no transform. */
static void add_state_queries(strlist *q, const char *const *worlds, size_t nworlds,
                              const uint64_t *ids, size_t nids) {
  if (nworlds > 1)
    sl_add(q, "{\"cmd\":\"world.list\"}");
  for (size_t w = 0; w < nworlds; w++)
    for (size_t i = 0; i < nids; i++) {
      sl_add(q, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", worlds[w],
             (unsigned long long)ids[i]);
      sl_add(q, "{\"cmd\":\"transform.children\",\"world\":\"%s\",\"entity\":%llu}", worlds[w],
             (unsigned long long)ids[i]);
    }
}

static char *capture(int port, const char *const *worlds, size_t nworlds, const uint64_t *ids,
                     size_t nids) {
  strlist q = {0};
  add_state_queries(&q, worlds, nworlds, ids, nids);
  char *s = exchange(port, &q, false);
  sl_free(&q);
  return s;
}

/* The local matrix of a transform, or false. */
static bool get_local(t_client *c, const char *world, uint64_t e, double m[16]) {
  cJSON *r = OK(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", world,
                (unsigned long long)e);
  const cJSON *local = r ? cJSON_GetObjectItemCaseSensitive(r, "local") : NULL;
  bool ok = cJSON_IsArray(local) && cJSON_GetArraySize(local) == 16;
  for (int i = 0; ok && i < 16; i++) {
    const cJSON *v = cJSON_GetArrayItem(local, i);
    ok = cJSON_IsNumber(v);
    if (ok)
      m[i] = v->valuedouble;
  }
  cJSON_Delete(r);
  return ok;
}

/* Whether m is T(x,y,z) exactly. */
static bool is_translation(const double m[16], double x, double y, double z) {
  static const double id[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  for (int i = 0; i < 12; i++)
    if (m[i] != id[i])
      return false;
  return m[12] == x && m[13] == y && m[14] == z && m[15] == 1;
}

/* ---- files in the data directory ------------------------------------------------------------ */

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Journal generations present, ascending (at most cap). */
static size_t journals(const char *dir, unsigned long long *gens, size_t cap) {
  DIR *d = opendir(dir);
  size_t n = 0;
  struct dirent *de;
  while (d && (de = readdir(d))) {
    unsigned long long g;
    char tail[8];
    if (sscanf(de->d_name, "journal.%llu.%7s", &g, tail) == 2 && !strcmp(tail, "scn") && n < cap)
      gens[n++] = g;
  }
  if (d)
    closedir(d);
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && gens[j - 1] > gens[j]; j--) {
      unsigned long long t = gens[j];
      gens[j] = gens[j - 1];
      gens[j - 1] = t;
    }
  return n;
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

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
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

/* ---- tests ---------------------------------------------------------------------------------- */

static const char *const WORLDS3[] = {"alpha", "beta", "gamma"};

/* A clean restart (SIGTERM, exit 0) keeps every world, entity id and generation, transform,
 * link, name, child order and matrix bit for bit; destroyed ids stay NOT_FOUND and new
 * entities never reuse an old id. */
static void test_clean_restart_keeps_everything(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  t_client c;
  uint64_t ids[1024];
  size_t nids = 0;
  if (!start_on(&d, dir, NULL))
    goto out;
  if (!CONNECT(&c, d.port)) {
    t_daemon_stop(&d, SIGKILL, 2000);
    goto out;
  }
  for (int w = 0; w < 3; w++)
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", WORLDS3[w]);

  /* alpha: 10 named roots, 10 children each, one grandchild under every child. */
  uint64_t roots[10], kids[10][10], grand[10][10];
  for (int r = 0; r < 10; r++) {
    roots[r] = ids[nids++] =
        CREATE_TF(&c,
                  "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"name\":\"root%d\","
                  "\"t\":[%d.1,%g,-0.3],\"r\":[0.1,%g,0.3,0.9],\"s\":%g}",
                  r, r, r * 0.7, 0.05 * r, 1.0 + r * 0.01);
    for (int k = 0; k < 10; k++) {
      kids[r][k] = ids[nids++] =
          CREATE_TF(&c,
                    "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"parent\":%llu,"
                    "\"name\":\"n%d\",\"t\":[%g,%g,%g],\"r\":[%g,0.2,-0.4,1],\"s\":[1,%g,0.5]}",
                    (unsigned long long)roots[r], k, k * 0.33, -k * 1.7, r * 0.01 + 0.123, 0.01 * k,
                    1.0 + k * 0.125);
      grand[r][k] = ids[nids++] =
          CREATE_TF(&c,
                    "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"parent\":%llu,"
                    "\"name\":\"g0\",\"t\":[0.7,%g,0.01],\"r\":[0,0,%g,1]}",
                    (unsigned long long)kids[r][k], r * 0.1 + k * 0.013, 0.3 + k * 0.02);
    }
  }
  /* beta: a 60-deep chain of new entities, and the alpha grandchildren of root 0..1 as
   * roots (one entity with transforms in two worlds). */
  uint64_t chain[60], parent = 0;
  for (int i = 0; i < 60; i++) {
    char par[48] = "";
    if (parent)
      snprintf(par, sizeof par, ",\"parent\":%llu", (unsigned long long)parent);
    chain[i] = parent = ids[nids++] =
        CREATE_TF(&c,
                  "{\"cmd\":\"transform.create\",\"world\":\"beta\"%s,\"name\":\"link%d\","
                  "\"t\":[0.1,%g,0],\"r\":[0,0.05,0,1]}",
                  par, i, 0.25 + i * 0.001);
  }
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 10; k++)
      OKD(&c,
          "{\"cmd\":\"transform.create\",\"world\":\"beta\",\"entity\":%llu,"
          "\"name\":\"shared%d_%d\",\"t\":[%d,%d,%g]}",
          (unsigned long long)grand[r][k], r, k, r, k, 1.0 / 3.0);
  /* Entities made apart from transforms, placed in beta and gamma. */
  cJSON *made = OK(&c, "{\"cmd\":\"entity.create\",\"count\":40}");
  const cJSON *list = made ? cJSON_GetObjectItemCaseSensitive(made, "entities") : NULL;
  uint64_t loose[40] = {0};
  for (int i = 0; i < 40 && cJSON_GetArraySize(list) == 40; i++)
    loose[i] = ids[nids++] = (uint64_t)cJSON_GetArrayItem(list, i)->valuedouble;
  cJSON_Delete(made);
  CU_ASSERT_FATAL(loose[39] != 0);
  for (int i = 0; i < 30; i++)
    OKD(&c,
        "{\"cmd\":\"transform.create\",\"world\":\"beta\",\"entity\":%llu,"
        "\"parent\":%llu,\"name\":\"loose%d\",\"s\":%g}",
        (unsigned long long)loose[i], (unsigned long long)chain[i % 60], i, 0.5 + i);
  for (int i = 0; i < 40; i++)
    OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"gamma\",\"entity\":%llu,\"t\":[%d,0,0]}",
        (unsigned long long)loose[i], i);
  OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"gamma\",\"entity\":%llu}",
      (unsigned long long)roots[0]);

  /* Changes of every kind. */
  OKD(&c,
      "{\"cmd\":\"transform.rename\",\"world\":\"alpha\",\"entity\":%llu,\"name\":\"renamed3\"}",
      (unsigned long long)roots[3]);
  OKD(&c, "{\"cmd\":\"transform.rename\",\"world\":\"beta\",\"entity\":%llu,\"name\":null}",
      (unsigned long long)chain[7]);
  /* Child order: move n2 of root 4 to the end, then root 9 (keep world) under root 4. */
  OKD(&c, "{\"cmd\":\"transform.unlink\",\"world\":\"alpha\",\"entity\":%llu,\"keep\":\"world\"}",
      (unsigned long long)kids[4][2]);
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"alpha\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)kids[4][2], (unsigned long long)roots[4]);
  OKD(&c,
      "{\"cmd\":\"transform.link\",\"world\":\"alpha\",\"entity\":%llu,\"parent\":%llu,"
      "\"keep\":\"world\"}",
      (unsigned long long)roots[9], (unsigned long long)roots[4]);
  OKD(&c,
      "{\"cmd\":\"transform.link\",\"world\":\"alpha\",\"entity\":%llu,\"parent\":%llu,"
      "\"keep\":\"local\"}",
      (unsigned long long)roots[8], (unsigned long long)grand[4][5]);
  OKD(&c,
      "{\"cmd\":\"transform.set_world\",\"world\":\"alpha\",\"entity\":%llu,"
      "\"t\":[3.25,-1.5,0.0625],\"r\":[0.3,0.1,0.2,0.8],\"s\":2.5}",
      (unsigned long long)grand[7][3]);
  OKD(&c,
      "{\"cmd\":\"transform.set_world\",\"world\":\"beta\",\"entity\":%llu,"
      "\"matrix\":[0,1,0,0,-1,0,0,0,0,0,1,0,5,6,7,1]}",
      (unsigned long long)chain[40]);
  OKD(&c,
      "{\"cmd\":\"transform.set_local\",\"world\":\"alpha\",\"entity\":%llu,"
      "\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0.1,0.2,0.3,1]}",
      (unsigned long long)kids[1][1]);
  /* Destroyed: an entity with transforms in alpha, beta and gamma ... */
  uint64_t gone_entity = grand[0][3];
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)gone_entity);
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)loose[35]);
  /* ... a subtree (recursive), and a node whose children become roots. */
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"alpha\",\"entity\":%llu,\"recursive\":true}",
      (unsigned long long)roots[5]);
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"alpha\",\"entity\":%llu}",
      (unsigned long long)roots[6]);
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"beta\",\"entity\":%llu}",
      (unsigned long long)chain[20]);
  /* A batch, and a failed batch that must change nothing. */
  cJSON *fresh = OK(&c, "{\"cmd\":\"entity.create\",\"count\":4}");
  const cJSON *fl = fresh ? cJSON_GetObjectItemCaseSensitive(fresh, "entities") : NULL;
  uint64_t b[4] = {0};
  for (int i = 0; i < 4 && cJSON_GetArraySize(fl) == 4; i++)
    b[i] = ids[nids++] = (uint64_t)cJSON_GetArrayItem(fl, i)->valuedouble;
  cJSON_Delete(fresh);
  CU_ASSERT_FATAL(b[3] != 0);
  OKD(&c,
      "{\"cmd\":\"batch\",\"world\":\"alpha\",\"ops\":["
      "{\"cmd\":\"transform.create\",\"entity\":%llu,\"name\":\"b0\",\"t\":[1,2,3]},"
      "{\"cmd\":\"transform.create\",\"entity\":%llu,\"parent\":%llu,\"name\":\"b1\"},"
      "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"r\":[0.2,0.3,0.4,0.5]},"
      "{\"cmd\":\"transform.create\",\"entity\":%llu,\"parent\":%llu,\"s\":[2,3,4]},"
      "{\"cmd\":\"transform.link\",\"entity\":%llu,\"parent\":%llu,\"keep\":\"world\"},"
      "{\"cmd\":\"transform.rename\",\"entity\":%llu,\"name\":\"batch0\"}]}",
      (unsigned long long)b[0], (unsigned long long)b[1], (unsigned long long)b[0],
      (unsigned long long)b[1], (unsigned long long)b[2], (unsigned long long)b[1],
      (unsigned long long)b[2], (unsigned long long)b[0], (unsigned long long)b[0]);
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"batch\",\"world\":\"alpha\",\"ops\":["
      "{\"cmd\":\"transform.create\",\"entity\":%llu,\"name\":\"b3\"},"
      "{\"cmd\":\"transform.link\",\"entity\":%llu,\"parent\":999999}]}",
      (unsigned long long)b[3], (unsigned long long)b[3]);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"gamma\"}");
  /* Checks before the restart: the destroyed id is stale everywhere. */
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"alpha\",\"entity\":%llu}",
      (unsigned long long)gone_entity);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"beta\",\"entity\":%llu}",
      (unsigned long long)gone_entity);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"alpha\",\"entity\":%llu}",
      (unsigned long long)b[3]);
  t_client_close(&c);

  char *before = capture(d.port, WORLDS3, 3, ids, nids);
  CU_ASSERT(before && strstr(before, "\"name\":\"batch0\"") && strstr(before, "renamed3"));
  STOP_OK(&d, 15000);

  /* Twice: from the shutdown snapshot, and from a snapshot written by a restarted daemon. */
  for (int round = 0; round < 2; round++) {
    if (!start_on(&d, dir, NULL))
      break;
    char *after = capture(d.port, WORLDS3, 3, ids, nids);
    expect_same(before, after, "state after a clean restart");
    free(after);
    t_client k;
    CONNECT_FATAL(&k, d.port);
    ERR(&k, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"entity\":%llu}",
        (unsigned long long)gone_entity);
    ERR(&k, "NOT_FOUND", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}",
        (unsigned long long)loose[35]);
    ERR(&k, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"gamma\",\"entity\":%llu}",
        (unsigned long long)loose[0]);
    cJSON *p = OK(&k, "{\"cmd\":\"transform.find\",\"world\":\"alpha\",\"path\":\"root4/root9\"}");
    CU_ASSERT(t_resp_num(p, "entity") == (double)roots[9]);
    cJSON_Delete(p);
    p = OK(&k, "{\"cmd\":\"transform.find\",\"world\":\"alpha\",\"path\":\"batch0/b1\"}");
    CU_ASSERT(t_resp_num(p, "entity") == (double)b[1]);
    cJSON_Delete(p);
    t_client_close(&k);
    if (round == 0) {
      STOP_OK(&d, 15000);
      continue;
    }
    /* New entities never take an old id (slots of destroyed ones come back with a new
     * generation). */
    CONNECT_FATAL(&k, d.port);
    cJSON *n = OK(&k, "{\"cmd\":\"entity.create\",\"count\":50}");
    const cJSON *nl = n ? cJSON_GetObjectItemCaseSensitive(n, "entities") : NULL;
    CU_ASSERT(cJSON_GetArraySize(nl) == 50);
    for (int i = 0; i < cJSON_GetArraySize(nl); i++) {
      uint64_t id = (uint64_t)cJSON_GetArrayItem(nl, i)->valuedouble;
      for (size_t j = 0; j < nids; j++)
        if (ids[j] == id) {
          CU_FAIL("a new entity took an old id");
          fprintf(stderr, "  reused id %llu\n", (unsigned long long)id);
        }
      CU_ASSERT(id != gone_entity && id != loose[35]);
    }
    cJSON_Delete(n);
    t_client_close(&k);
    STOP_OK(&d, 15000);
  }
  free(before);
out:
  end_test(dir);
}

/* Sends `total` set_locals (distinct values) through one connection with up to `window`
 * outstanding, and sends SIGKILL to the daemon once kill_at of them are acknowledged. For each
 * entity the last acknowledged k is kept in acked[]; k is the value written. Returns the
 * number sent. */
static int stream_and_kill(t_daemon *d, const uint64_t *ents, int nents, int total, int window,
                           int kill_at, int *acked, int *nacked) {
  t_client c;
  *nacked = 0;
  if (!CONNECT(&c, d->port))
    return 0;
  int sent = 0, got = 0;
  bool killed = false, dead = false;
  long deadline = t_now_ms() + 20000;
  while (!dead && (got < sent || sent < total) && t_now_ms() < deadline) {
    if (!killed && sent < total && sent - got < window) {
      text chunk = {0};
      while (sent < total && sent - got < window) {
        int k = sent++;
        text_addf(&chunk,
                  "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,"
                  "\"id\":%d,\"t\":[%d,%d.25,%d]}\n",
                  (unsigned long long)ents[k % nents], k, k, k, -k);
      }
      if (t_client_send_raw(&c, chunk.s, chunk.len) != 0)
        dead = true;
      free(chunk.s);
    }
    char *line = t_client_recv(&c, killed ? 2000 : 5000);
    if (!line) {
      if (!killed)
        CU_FAIL("a response did not come before the kill");
      break;
    }
    cJSON *r = cJSON_Parse(line);
    free(line);
    double id = t_resp_num(r, "id");
    bool ok = t_resp_ok(r);
    cJSON_Delete(r);
    if (!ok || id != (double)got) {
      CU_FAIL("a set_local was not answered ok in order");
      fprintf(stderr, "  expected id %d, got %g (ok=%d)\n", got, id, ok);
      break;
    }
    acked[got % nents] = got;
    got++;
    if (!killed && got >= kill_at) {
      kill(d->pid, SIGKILL);
      killed = true;
    }
  }
  CU_ASSERT(killed);
  t_client_close(&c);
  *nacked = got;
  return sent;
}

/* --fsync always: every set_local answered ok before kill -9 survives it. */
static void test_kill9_fsync_always_keeps_acknowledged(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  enum { NENTS = 40, TOTAL = 4000, KILL_AT = 2000 };
  t_daemon d;
  const char *const always[] = {"--fsync", "always", NULL};
  if (!start_on(&d, dir, always))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  uint64_t ents[NENTS];
  for (int i = 0; i < NENTS; i++)
    ents[i] = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"e%d\"}", i);
  t_client_close(&c);
  int acked[NENTS], nacked;
  for (int i = 0; i < NENTS; i++)
    acked[i] = -1;
  int sent = stream_and_kill(&d, ents, NENTS, TOTAL, 64, KILL_AT, acked, &nacked);
  kill9(&d);
  CU_ASSERT(nacked >= KILL_AT && nacked <= sent);
  for (int i = 0; i < NENTS; i++)
    CU_ASSERT(acked[i] >= KILL_AT - NENTS);
  if (!start_on(&d, dir, always))
    goto out;
  CONNECT_FATAL(&c, d.port);
  for (int i = 0; i < NENTS; i++) {
    double m[16];
    CU_ASSERT_FATAL(get_local(&c, "w", ents[i], m));
    int k = (int)m[12];
    bool fine = k >= acked[i] && k < sent && k % NENTS == i && is_translation(m, k, k + 0.25, -k);
    if (!fine) {
      CU_FAIL("an acknowledged set_local was lost by kill -9");
      fprintf(stderr, "  entity %d: last acknowledged %d, sent %d, found x=%g\n", i, acked[i], sent,
              m[12]);
    }
  }
  t_client_close(&c);
  STOP_OK(&d, 15000);
out:
  end_test(dir);
}

/* --fsync everysec: a clean SIGTERM right after the last answer loses nothing. */
static void test_everysec_sigterm_loses_nothing(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  const char *const everysec[] = {"--fsync", "everysec", NULL};
  uint64_t ids[200];
  size_t nids = 0;
  if (!start_on(&d, dir, everysec))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"alpha\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"beta\"}");
  for (int i = 0; i < 100; i++)
    ids[nids++] =
        CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"name\":\"x%d\"}", i);
  strlist q = {0};
  for (int i = 0; i < 1000; i++)
    sl_add(&q,
           "{\"cmd\":\"transform.set_local\",\"world\":\"alpha\",\"entity\":%llu,"
           "\"t\":[%g,%d,1],\"r\":[0.1,0.2,%g,1]}",
           (unsigned long long)ids[i % 100], i * 0.01, i, i * 0.001);
  for (int i = 1; i < 100; i++)
    sl_add(&q, "{\"cmd\":\"transform.link\",\"world\":\"alpha\",\"entity\":%llu,\"parent\":%llu}",
           (unsigned long long)ids[i], (unsigned long long)ids[(i - 1) / 3]);
  for (int i = 0; i < 100; i++)
    sl_add(&q, "{\"cmd\":\"transform.create\",\"world\":\"beta\",\"entity\":%llu,\"s\":%d}",
           (unsigned long long)ids[i], i + 1);
  run_all_ok(d.port, &q);
  sl_free(&q);
  t_client_close(&c);
  const char *const two[] = {"alpha", "beta"};
  char *before = capture(d.port, two, 2, ids, nids);
  STOP_OK(&d, 15000);
  if (start_on(&d, dir, everysec)) {
    char *after = capture(d.port, two, 2, ids, nids);
    expect_same(before, after, "state after SIGTERM under everysec");
    free(after);
    STOP_OK(&d, 15000);
  }
  free(before);
out:
  end_test(dir);
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
    CU_ASSERT(get_local(&c, "w", e, m) && is_translation(m, 2, 0, 0));
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
  CU_ASSERT(get_local(&c, "w", e1, m) && is_translation(m, SETS - 1, 1, 2));
  CU_ASSERT(get_local(&c, "w", e2, m) && is_translation(m, 0, 0, 0)); /* its set was lost */
  cJSON *r = OK(&c, "{\"cmd\":\"transform.find\",\"world\":\"w\",\"path\":\"last\"}");
  CU_ASSERT(t_resp_num(r, "entity") == (double)e3);
  cJSON_Delete(r);
  t_client_close(&c);
  STOP_OK(&d, 15000);
out:
  end_test(dir);
}

/* How many transforms the first world listed holds (-1 when there is none). */
static double first_world_transforms(t_client *c) {
  cJSON *r = OK(c, "{\"cmd\":\"world.list\"}");
  const cJSON *w0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "worlds"), 0);
  double n = w0 ? t_resp_num(w0, "transforms") : -1;
  cJSON_Delete(r);
  return n;
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

/* Whether the daemon has a child process (the snapshot writer). */
static bool has_child(pid_t pid) {
  char path[96], buf[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  bool any = fgets(buf, sizeof buf, f) != NULL && buf[0] >= '0' && buf[0] <= '9';
  fclose(f);
  return any;
}

/* SIGTERM while a save is being written: the save is answered, then the request held behind
 * it, then the daemon exits 0 with everything on disk. */
static void test_sigterm_during_save(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  enum { BATCHES = 100, OPS = 1000 };
  t_daemon d;
  if (!start_on(&d, dir, NULL))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  text b = {0};
  for (int k = 0; k < BATCHES; k++) {
    const char *head = "{\"cmd\":\"batch\",\"world\":\"w\",\"ops\":[";
    text_add(&b, head, strlen(head));
    for (int i = 0; i < OPS; i++) {
      const char *op = ",{\"cmd\":\"transform.create\"}" + (i == 0);
      text_add(&b, op, strlen(op));
    }
    text_add(&b, "]}\n", 3);
  }
  CU_ASSERT_FATAL(t_client_send_raw(&c, b.s, b.len) == 0);
  free(b.s);
  for (int k = 0; k < BATCHES; k++) {
    cJSON *r = t_client_recv_json(&c, 10000);
    CU_ASSERT(t_resp_ok(r));
    cJSON_Delete(r);
  }
  const char *req = "{\"cmd\":\"save\",\"id\":1}\n{\"cmd\":\"ping\",\"id\":2}\n";
  CU_ASSERT_FATAL(t_client_send_raw(&c, req, strlen(req)) == 0);
  long deadline = t_now_ms() + 3000;
  while (!has_child(d.pid) && t_now_ms() < deadline)
    ;
  kill(d.pid, SIGTERM);
  for (int i = 1; i <= 2; i++) {
    cJSON *r = t_client_recv_json(&c, 15000);
    CU_ASSERT(t_resp_ok(r) && t_resp_num(r, "id") == i);
    if (!t_resp_ok(r))
      fprintf(stderr, "  response %d after SIGTERM during a save: missing or failed\n", i);
    cJSON_Delete(r);
  }
  t_client_close(&c);
  int status = t_daemon_wait(&d, 15000);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (start_on(&d, dir, NULL)) {
    CONNECT_FATAL(&c, d.port);
    CU_ASSERT(first_world_transforms(&c) == BATCHES * OPS);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
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

/* save: path and bytes (the file's size); later requests on the connection are answered
 * after it, in order; the snapshot holds what was answered before it. Without --data it is
 * BAD_REQUEST. */
static void test_save(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  char snap[256];
  snprintf(snap, sizeof snap, "%s/snapshot.scn", dir);
  if (!start_on(&d, dir, NULL))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  uint64_t e = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"e\"}");
  for (int i = 0; i < 300; i++)
    OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"f%d\"}", i);
  char req[2048];
  snprintf(
      req, sizeof req,
      "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[1,2,3],\"id\":1}\n"
      "{\"cmd\":\"save\",\"id\":2}\n"
      "{\"cmd\":\"ping\",\"id\":3}\n"
      "{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":%llu,\"id\":4}\n"
      "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[4,5,6],\"id\":5}\n"
      "{\"cmd\":\"save\",\"id\":6}\n"
      "{\"cmd\":\"save\",\"id\":7}\n"
      "{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":%llu,\"id\":8}\n",
      (unsigned long long)e, (unsigned long long)e, (unsigned long long)e, (unsigned long long)e);
  CU_ASSERT_FATAL(t_client_send_raw(&c, req, strlen(req)) == 0);
  cJSON *r[9] = {0};
  for (int i = 1; i <= 8; i++) {
    r[i] = t_client_recv_json(&c, 10000);
    CU_ASSERT(t_resp_ok(r[i]) && t_resp_num(r[i], "id") == i);
    if (!t_resp_ok(r[i]) || t_resp_num(r[i], "id") != i) {
      char *s = r[i] ? cJSON_PrintUnformatted(r[i]) : NULL;
      fprintf(stderr, "  response %d: %s\n", i, s ? s : "(none)");
      free(s);
    }
  }
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(r[2], "path");
  CU_ASSERT(cJSON_IsString(p) && !strcmp(p->valuestring, snap));
  CU_ASSERT(t_resp_num(r[2], "bytes") > 32);
  const cJSON *loc = cJSON_GetObjectItemCaseSensitive(r[4], "local");
  CU_ASSERT(cJSON_GetArraySize(loc) == 16 && cJSON_GetArrayItem(loc, 12)->valuedouble == 1);
  loc = cJSON_GetObjectItemCaseSensitive(r[8], "local");
  CU_ASSERT(cJSON_GetArraySize(loc) == 16 && cJSON_GetArrayItem(loc, 12)->valuedouble == 4);
  /* The newest save's bytes are the file's size. */
  CU_ASSERT(t_resp_num(r[7], "bytes") == (double)file_size(snap));
  CU_ASSERT(t_resp_num(r[6], "bytes") == t_resp_num(r[7], "bytes"));
  for (int i = 1; i <= 8; i++)
    cJSON_Delete(r[i]);

  /* One more save alone: bytes equal the file. */
  cJSON *s = OK(&c, "{\"cmd\":\"save\"}");
  CU_ASSERT(s && !cJSON_GetObjectItemCaseSensitive(s, "id"));
  CU_ASSERT(t_resp_num(s, "bytes") == (double)file_size(snap));
  cJSON_Delete(s);
  /* A change after the last save lives only in the journal. */
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[8,8,8]}",
      (unsigned long long)e);
  t_client_close(&c);
  kill9(&d);
  /* Without its journals, the snapshot alone holds what was answered before the save (a
   * start without the journal is refused; --recover keeps the snapshot). */
  unsigned long long gens[64];
  size_t n = journals(dir, gens, 64);
  CU_ASSERT(n == 1);
  for (size_t i = 0; i < n; i++) {
    char jp[256];
    snprintf(jp, sizeof jp, "%s/journal.%llu.scn", dir, gens[i]);
    unlink(jp);
  }
  const char *const recover[] = {"--recover", NULL};
  if (start_on(&d, dir, recover)) {
    CONNECT_FATAL(&c, d.port);
    double m[16];
    CU_ASSERT(get_local(&c, "w", e, m) && is_translation(m, 4, 5, 6));
    cJSON *f = OK(&c, "{\"cmd\":\"transform.find\",\"world\":\"w\",\"path\":\"f299\"}");
    CU_ASSERT(t_resp_num(f, "entity") > 0);
    cJSON_Delete(f);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }

  /* Without --data. */
  if (start_on(&d, NULL, NULL)) {
    CONNECT_FATAL(&c, d.port);
    ERR(&c, "BAD_REQUEST", "{\"cmd\":\"save\",\"id\":\"x\"}");
    OKD(&c, "{\"cmd\":\"ping\"}");
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
out:
  end_test(dir);
}

/* --save-interval 1: after a change a snapshot appears within a few seconds and the journals
 * it covers are removed. */
static bool wait_for_snapshot(const char *snap, const struct stat *old, const char *dir,
                              unsigned long long *gen, long timeout_ms) {
  long deadline = t_now_ms() + timeout_ms;
  while (t_now_ms() < deadline) {
    struct stat st;
    unsigned long long gens[64];
    if (stat(snap, &st) == 0 &&
        (!old || st.st_size != old->st_size || st.st_mtim.tv_sec != old->st_mtim.tv_sec ||
         st.st_mtim.tv_nsec != old->st_mtim.tv_nsec) &&
        journals(dir, gens, 64) == 1) {
      *gen = gens[0];
      return true;
    }
    t_sleep_ms(20);
  }
  return false;
}

static void test_autosave(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  char snap[256];
  snprintf(snap, sizeof snap, "%s/snapshot.scn", dir);
  const char *const every1[] = {"--save-interval", "1", NULL};
  if (!start_on(&d, dir, every1))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  unsigned long long gens[64];
  CU_ASSERT(journals(dir, gens, 64) == 1 && gens[0] == 0);
  CU_ASSERT(!exists(snap));
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"one\"}");
  unsigned long long gen = 0;
  CU_ASSERT(wait_for_snapshot(snap, NULL, dir, &gen, 3000));
  CU_ASSERT(gen >= 1);
  CU_ASSERT(file_size(snap) > 32);
  char j0[256];
  snprintf(j0, sizeof j0, "%s/journal.0.scn", dir);
  CU_ASSERT(!exists(j0));
  struct stat old;
  CU_ASSERT_FATAL(stat(snap, &old) == 0);
  uint64_t two = CREATE_TF(
      &c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"two-with-a-longer-name\"}");
  unsigned long long gen2 = 0;
  CU_ASSERT(wait_for_snapshot(snap, &old, dir, &gen2, 3000));
  CU_ASSERT(gen2 > gen);
  t_client_close(&c);
  kill9(&d);
  /* The autosaved snapshot plus the current journal hold everything. */
  if (start_on(&d, dir, NULL)) {
    CONNECT_FATAL(&c, d.port);
    cJSON *r =
        OK(&c, "{\"cmd\":\"transform.find\",\"world\":\"w\",\"path\":\"two-with-a-longer-name\"}");
    CU_ASSERT(two > 0 && t_resp_num(r, "entity") == (double)two);
    cJSON_Delete(r);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
out:
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

/* save, change, save, change, kill -9: the restart replays the journal after the newest
 * snapshot on top of it. */
static void test_replay_after_several_snapshots(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  const char *const always[] = {"--fsync", "always", NULL};
  const char *const worlds[] = {"w1", "w2", "w3"};
  uint64_t ids[64];
  size_t nids = 0;
  if (!start_on(&d, dir, always))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w1\"}");
  for (int i = 0; i < 10; i++)
    ids[nids++] = CREATE_TF(
        &c, "{\"cmd\":\"transform.create\",\"world\":\"w1\",\"name\":\"a%d\",\"t\":[%d,0,0]}", i,
        i);
  OKD(&c, "{\"cmd\":\"save\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w2\"}");
  for (int i = 0; i < 10; i++)
    ids[nids++] = CREATE_TF(
        &c, "{\"cmd\":\"transform.create\",\"world\":\"w2\",\"parent\":null,\"r\":[0,%d,0,1]}", i);
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"w1\",\"entity\":%llu,\"s\":3}",
      (unsigned long long)ids[0]);
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)ids[1]);
  OKD(&c, "{\"cmd\":\"save\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w3\"}");
  for (int i = 0; i < 10; i++)
    ids[nids++] =
        CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w3\",\"name\":\"c%d\"}", i);
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"w1\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)ids[2], (unsigned long long)ids[3]);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"w2\"}");
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)ids[25]);
  t_client_close(&c);
  char *before = capture(d.port, worlds, 3, ids, nids);
  unsigned long long gens[64];
  CU_ASSERT(journals(dir, gens, 64) == 1 && gens[0] == 2);
  kill9(&d);
  if (start_on(&d, dir, always)) {
    char *after = capture(d.port, worlds, 3, ids, nids);
    expect_same(before, after, "state after two snapshots, changes and kill -9");
    free(after);
    CONNECT_FATAL(&c, d.port);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"w1\",\"entity\":%llu}",
        (unsigned long long)ids[1]);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
  free(before);
out:
  end_test(dir);
}

int t_register_daemon_persist(void) {
  static const t_test tests[] = {
      {"clean restart keeps everything", test_clean_restart_keeps_everything},
      {"kill -9 under fsync always keeps acknowledged", test_kill9_fsync_always_keeps_acknowledged},
      {"everysec SIGTERM loses nothing", test_everysec_sigterm_loses_nothing},
      {"torn journal tail is dropped", test_torn_journal_tail_dropped},
      {"corrupt snapshot", test_corrupt_snapshot},
      {"corrupt snapshot header", test_corrupt_snapshot_header},
      {"corrupt journal body", test_corrupt_journal_body},
      {"damaged last journal record is refused", test_journal_last_record_damaged},
      {"missing journal or snapshot tail is refused", test_missing_journal_or_snapshot_tail},
      {"SIGTERM during a save answers it", test_sigterm_during_save},
      {"unusable data dir", test_unusable_data_dir},
      {"save", test_save},
      {"autosave", test_autosave},
      {"second daemon locked out", test_second_daemon_locked_out},
      {"replay after several snapshots", test_replay_after_several_snapshots},
  };
  return T_ADD_SUITE("daemon_persist", NULL, NULL, tests);
}

#include "persist_fixtures.h"

#include "daemon_fixtures.h"

#include <CUnit/CUnit.h>
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char logs[32][256];
static int nlogs;
static unsigned failures_at_start;

static void remember_log(const char *path) {
  if (nlogs < 32)
    snprintf(logs[nlogs++], sizeof logs[0], "%s", path);
}

bool begin_test(char *dir, size_t len) {
  failures_at_start = CU_get_number_of_failures();
  nlogs = 0;
  if (!t_temp_dir(dir, len, "persist")) {
    CU_FAIL("mkdtemp failed");
    return false;
  }
  return true;
}

void end_test(const char *dir) {
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

void sl_add(strlist *l, const char *fmt, ...) {
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

void sl_free(strlist *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

bool start_on(t_daemon *d, const char *dir, const char *const *extra) {
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

void kill9(t_daemon *d) {
  int status = t_daemon_stop(d, SIGKILL, 5000);
  CU_ASSERT(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

uint64_t create_tf_at(const char *file, int line, t_client *c, const char *fmt, ...) {
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

void run_all_ok(int port, const strlist *q) { free(exchange(port, q, true)); }

void expect_same(const char *before, const char *after, const char *what) {
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

char *capture(int port, const char *const *worlds, size_t nworlds, const uint64_t *ids,
              size_t nids) {
  strlist q = {0};
  add_state_queries(&q, worlds, nworlds, ids, nids);
  char *s = exchange(port, &q, false);
  sl_free(&q);
  return s;
}

bool get_local(t_client *c, const char *world, uint64_t e, double m[16]) {
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

bool mat_is_translation(const double m[16], double x, double y, double z) {
  static const double id[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  for (int i = 0; i < 12; i++)
    if (m[i] != id[i])
      return false;
  return m[12] == x && m[13] == y && m[14] == z && m[15] == 1;
}

size_t journals(const char *dir, unsigned long long *gens, size_t cap) {
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

long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

double first_world_transforms(t_client *c) {
  cJSON *r = OK(c, "{\"cmd\":\"world.list\"}");
  const cJSON *w0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "worlds"), 0);
  double n = w0 ? t_resp_num(w0, "transforms") : -1;
  cJSON_Delete(r);
  return n;
}

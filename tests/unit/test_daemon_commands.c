/* Integration tests of the request/response protocol over TCP against the real daemon: every
 * command of the contract's table with its exact results and errors, id echo, atomicity of
 * failed commands and batches, pipelining, framing (line limit, blank lines, CRLF), hundreds of
 * malformed lines, clients that vanish, authentication, the configured limits, the command
 * line, and the HTTP operations port. */
#include "harness.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int scn_test_register_daemon_commands(void);

/* The daemon most tests share (default settings). */
static scn_daemon dmain;

#define WAIT_MS 5000
#define MAX_SAFE 9007199254740991.0

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static void report(const char *what, const cJSON *j) {
  char *s = j ? cJSON_PrintUnformatted(j) : NULL;
  fprintf(stderr, "\n  %s: %.600s\n", what, s ? s : "(nothing)");
  free(s);
}

/* An assertion that reports the caller's line and, when it fails, the response. */
static bool check_at(bool cond, int line, const char *what, const cJSON *r) {
  CU_assertImplementation(cond ? CU_TRUE : CU_FALSE, (unsigned)line, what, __FILE__, "",
                          CU_FALSE);
  if (!cond)
    report(what, r);
  return cond;
}
#define CHECK(cond, r) check_at((cond), __LINE__, #cond, (r))

/* ---- a growable string --------------------------------------------------------------------- */

typedef struct sb {
  char *s;
  size_t len, cap;
} sb;

static void sb_add(sb *b, const void *data, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p)
      abort();
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->len, data, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void sb_vaddf(sb *b, const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0)
    abort();
  char *tmp = malloc((size_t)n + 1);
  if (!tmp)
    abort();
  vsnprintf(tmp, (size_t)n + 1, fmt, ap);
  sb_add(b, tmp, (size_t)n);
  free(tmp);
}

static void sb_addf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_addf(sb *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vaddf(b, fmt, ap);
  va_end(ap);
}

static void sb_free(sb *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}

/* ---- requests -------------------------------------------------------------------------------- */

static cJSON *vcall(scn_client *c, char **line_out, const char *fmt, va_list ap) {
  sb line = {0};
  sb_vaddf(&line, fmt, ap);
  cJSON *r = scn_client_call(c, "%s", line.s);
  *line_out = line.s;
  return r;
}

/* A request that must succeed; returns the response (the caller deletes it). */
static cJSON *ok_at(int at, scn_client *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static cJSON *ok_at(int at, scn_client *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *line;
  cJSON *r = vcall(c, &line, fmt, ap);
  va_end(ap);
  bool good = scn_resp_ok(r);
  CU_assertImplementation(good ? CU_TRUE : CU_FALSE, (unsigned)at, "request answered ok",
                          __FILE__, "", CU_FALSE);
  if (!good) {
    fprintf(stderr, "\n  request: %.600s", line);
    report("response", r);
  }
  free(line);
  return r;
}
#define OK(c, ...) ok_at(__LINE__, (c), __VA_ARGS__)
#define OKD(c, ...) cJSON_Delete(ok_at(__LINE__, (c), __VA_ARGS__))

/* A request that must fail with code; returns the response's message check result. */
static bool err_at(int at, scn_client *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool err_at(int at, scn_client *c, const char *code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *line;
  cJSON *r = vcall(c, &line, fmt, ap);
  va_end(ap);
  const cJSON *okv = r ? cJSON_GetObjectItemCaseSensitive(r, "ok") : NULL;
  const cJSON *e = r ? cJSON_GetObjectItemCaseSensitive(r, "error") : NULL;
  const cJSON *msg = e ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;
  bool good = cJSON_IsFalse(okv) && strcmp(scn_resp_code(r), code) == 0 && cJSON_IsString(msg) &&
              msg->valuestring[0] != '\0';
  char what[96];
  snprintf(what, sizeof what, "request fails with %s", code);
  CU_assertImplementation(good ? CU_TRUE : CU_FALSE, (unsigned)at, what, __FILE__, "", CU_FALSE);
  if (!good) {
    fprintf(stderr, "\n  request: %.600s (expected %s)", line, code);
    report("response", r);
  }
  free(line);
  cJSON_Delete(r);
  return good;
}
#define ERR(c, code, ...) err_at(__LINE__, (c), (code), __VA_ARGS__)

static double num(const cJSON *r, const char *field) {
  const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static uint64_t u64(const cJSON *r, const char *field) {
  double d = num(r, field);
  return d >= 1 && d <= MAX_SAFE ? (uint64_t)d : 0;
}

static bool has(const cJSON *r, const char *field) {
  return r && cJSON_GetObjectItemCaseSensitive(r, field) != NULL;
}

/* An array field of ids as a C array (returns its length, up to cap). */
static int ids_of(const cJSON *r, const char *field, uint64_t *out, int cap) {
  const cJSON *a = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  if (!cJSON_IsArray(a))
    return -1;
  int n = 0;
  for (const cJSON *x = a->child; x; x = x->next, n++)
    if (n < cap)
      out[n] = cJSON_IsNumber(x) ? (uint64_t)x->valuedouble : 0;
  return n;
}

/* A matrix field: 16 numbers. */
static bool mat_of(const cJSON *r, const char *field, float m[16]) {
  const cJSON *a = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 16)
    return false;
  int i = 0;
  for (const cJSON *x = a->child; x; x = x->next) {
    if (!cJSON_IsNumber(x))
      return false;
    m[i++] = (float)x->valuedouble;
  }
  return true;
}

/* Column-major: out = a * b. */
static void mat_mul(const float a[16], const float b[16], float out[16]) {
  float t[16];
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 4; r++) {
      double s = 0;
      for (int k = 0; k < 4; k++)
        s += (double)a[k * 4 + r] * b[c * 4 + k];
      t[c * 4 + r] = (float)s;
    }
  memcpy(out, t, sizeof t);
}

static bool mat_near(const float a[16], const float b[16], float tol) {
  for (int i = 0; i < 16; i++)
    if (!(fabsf(a[i] - b[i]) <= tol * (1 + fabsf(b[i]))))
      return false;
  return true;
}

static void mat_print(const char *what, const float m[16]) {
  fprintf(stderr, "\n  %s:", what);
  for (int i = 0; i < 16; i++)
    fprintf(stderr, " %.9g", m[i]);
}

#define CHECK_MAT(a, b, tol)                                                                   \
  do {                                                                                         \
    bool near_ = mat_near((a), (b), (tol));                                                   \
    CU_assertImplementation(near_ ? CU_TRUE : CU_FALSE, __LINE__, "matrices equal", __FILE__, \
                            "", CU_FALSE);                                                     \
    if (!near_) {                                                                              \
      mat_print("got", (a));                                                                  \
      mat_print("want", (b));                                                                 \
    }                                                                                          \
  } while (0)

static const float IDENTITY[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

static void mat_trs(float tx, float ty, float tz, float s, float out[16]) {
  memcpy(out, IDENTITY, sizeof IDENTITY);
  out[0] = out[5] = out[10] = s;
  out[12] = tx, out[13] = ty, out[14] = tz;
}

/* ---- fixtures -------------------------------------------------------------------------------- */

static bool connect_to(scn_client *c, int port) {
  bool ok = scn_client_connect(c, port) == 0;
  CU_ASSERT_TRUE(ok);
  return ok;
}

static void new_world(scn_client *c, const char *name) {
  OKD(c, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", name);
}

/* transform.create with extra fields (printf-style, may be ""); returns the entity. */
static uint64_t tf_at(int at, scn_client *c, const char *world, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static uint64_t tf_at(int at, scn_client *c, const char *world, const char *fmt, ...) {
  sb extra = {0};
  va_list ap;
  va_start(ap, fmt);
  sb_vaddf(&extra, fmt, ap);
  va_end(ap);
  cJSON *r = ok_at(at, c, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s%s}", world,
                   extra.len ? "," : "", extra.len ? extra.s : "");
  sb_free(&extra);
  uint64_t e = u64(r, "entity");
  CU_assertImplementation(e ? CU_TRUE : CU_FALSE, (unsigned)at, "an entity id", __FILE__, "",
                          CU_FALSE);
  cJSON_Delete(r);
  return e;
}
#define TF(c, world, ...) tf_at(__LINE__, (c), (world), __VA_ARGS__)
#define TF0(c, world) tf_at(__LINE__, (c), (world), "%s", "")

static uint64_t new_entity(scn_client *c) {
  cJSON *r = OK(c, "{\"cmd\":\"entity.create\"}");
  uint64_t e = 0;
  CU_ASSERT_EQUAL(ids_of(r, "entities", &e, 1), 1);
  cJSON_Delete(r);
  return e;
}

static cJSON *get_tf(scn_client *c, const char *world, uint64_t e) {
  return scn_client_call(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", world,
                         (unsigned long long)e);
}

/* The world (or local) matrix of e. */
static bool matrix(scn_client *c, const char *world, uint64_t e, const char *which,
                   float m[16]) {
  cJSON *r = get_tf(c, world, e);
  bool ok = scn_resp_ok(r) && mat_of(r, which, m);
  if (!ok)
    report("transform.get", r);
  cJSON_Delete(r);
  return ok;
}

/* The parent of e (0 for a root, UINT64_MAX when the reply is wrong). */
static uint64_t parent_of(scn_client *c, const char *world, uint64_t e) {
  cJSON *r = get_tf(c, world, e);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "parent");
  uint64_t out = UINT64_MAX;
  if (scn_resp_ok(r) && cJSON_IsNull(p))
    out = 0;
  else if (scn_resp_ok(r) && cJSON_IsNumber(p))
    out = (uint64_t)p->valuedouble;
  cJSON_Delete(r);
  return out;
}

static int children(scn_client *c, const char *world, uint64_t e, uint64_t *out, int cap) {
  cJSON *r = scn_client_call(c, "{\"cmd\":\"transform.children\",\"world\":\"%s\",\"entity\":%llu}",
                             world, (unsigned long long)e);
  int n = scn_resp_ok(r) ? ids_of(r, "children", out, cap) : -1;
  cJSON_Delete(r);
  return n;
}

static double info_num(scn_client *c, const char *field) {
  cJSON *r = scn_client_call(c, "{\"cmd\":\"info\"}");
  double v = scn_resp_ok(r) ? num(r, field) : -1;
  cJSON_Delete(r);
  return v;
}

/* The transform count of a world in world.list, -1 when it is not listed. */
static int listed_transforms(scn_client *c, const char *world) {
  cJSON *r = scn_client_call(c, "{\"cmd\":\"world.list\"}");
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive(r, "worlds");
  int n = -1;
  for (const cJSON *w = ws ? ws->child : NULL; w; w = w->next) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(w, "name");
    if (cJSON_IsString(name) && strcmp(name->valuestring, world) == 0)
      n = (int)num(w, "transforms");
  }
  cJSON_Delete(r);
  return n;
}

/* Everything observable about a world and some entities, as text: world.list, the counts of
 * info, and get and children of each id (errors included). */
static char *snapshot(scn_client *c, const char *world, const uint64_t *ids, int n) {
  sb b = {0};
  cJSON *r = scn_client_call(c, "{\"cmd\":\"world.list\"}");
  char *s = r ? cJSON_PrintUnformatted(r) : NULL;
  sb_addf(&b, "%s\n", s ? s : "-");
  free(s);
  cJSON_Delete(r);
  r = scn_client_call(c, "{\"cmd\":\"info\"}");
  sb_addf(&b, "worlds %g entities %g transforms %g\n", num(r, "worlds"), num(r, "entities"),
          num(r, "transforms"));
  cJSON_Delete(r);
  for (int i = 0; i < n; i++) {
    r = get_tf(c, world, ids[i]);
    s = r ? cJSON_PrintUnformatted(r) : NULL;
    sb_addf(&b, "%s\n", s ? s : "-");
    free(s);
    cJSON_Delete(r);
    r = scn_client_call(c, "{\"cmd\":\"transform.children\",\"world\":\"%s\",\"entity\":%llu}",
                        world, (unsigned long long)ids[i]);
    s = r ? cJSON_PrintUnformatted(r) : NULL;
    sb_addf(&b, "%s\n", s ? s : "-");
    free(s);
    cJSON_Delete(r);
  }
  return b.s;
}

static void check_same_at(int at, const char *before, const char *after) {
  bool same = before && after && strcmp(before, after) == 0;
  CU_assertImplementation(same ? CU_TRUE : CU_FALSE, (unsigned)at, "state unchanged", __FILE__,
                          "", CU_FALSE);
  if (!same)
    fprintf(stderr, "\n  before:\n%.3000s\n  after:\n%.3000s\n", before ? before : "-",
            after ? after : "-");
}
#define CHECK_SAME(before, after) check_same_at(__LINE__, (before), (after))

/* True when the message holds the decimal number n on its own (not inside a longer number). */
static bool names_number(const char *msg, unsigned long n) {
  for (const char *p = msg; *p; p++) {
    if (*p < '0' || *p > '9' || (p > msg && p[-1] >= '0' && p[-1] <= '9'))
      continue;
    char *end;
    unsigned long v = strtoul(p, &end, 10);
    if (v == n && !(*end >= '0' && *end <= '9'))
      return true;
  }
  return false;
}

static void stop_ok(scn_daemon *d) {
  int status = scn_daemon_stop(d, 0, 10000);
  CU_ASSERT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- ping, hello, worlds --------------------------------------------------------------------- */

static void test_ping_hello(void) {
  scn_client c;
  if (!connect_to(&c, dmain.port))
    return;
  CU_ASSERT_EQUAL(scn_client_send(&c, "{\"cmd\":\"ping\"}"), 0);
  char *line = scn_client_recv(&c, WAIT_MS);
  CU_ASSERT_PTR_NOT_NULL(line);
  if (line)
    CU_ASSERT_STRING_EQUAL(line, "{\"ok\":true}");
  free(line);
  CU_ASSERT_EQUAL(scn_client_send(&c, "{\"cmd\":\"ping\",\"id\":7}"), 0);
  line = scn_client_recv(&c, WAIT_MS);
  CU_ASSERT_PTR_NOT_NULL(line);
  if (line)
    CU_ASSERT_STRING_EQUAL(line, "{\"id\":7,\"ok\":true}");
  free(line);

  cJSON *r = OK(&c, "{\"cmd\":\"hello\"}");
  const cJSON *server = cJSON_GetObjectItemCaseSensitive(r, "server");
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(r, "version");
  CHECK(cJSON_IsString(server) && strcmp(server->valuestring, "scened") == 0, r);
  CHECK(cJSON_IsString(version) && strcmp(version->valuestring, SCN_VERSION) == 0, r);
  CHECK(num(r, "protocol") == 1, r);
  cJSON_Delete(r);
  /* Without --auth-token, hello ignores a token, whatever it is. */
  OKD(&c, "{\"cmd\":\"hello\",\"token\":\"anything\"}");
  OKD(&c, "{\"cmd\":\"hello\",\"token\":5}");
  scn_client_close(&c);
}

static void test_worlds(void) {
  scn_client c;
  if (!connect_to(&c, dmain.port))
    return;
  new_world(&c, "wl_a");
  CU_ASSERT_EQUAL(listed_transforms(&c, "wl_a"), 0);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"world.create\",\"world\":\"wl_a\"}");
  /* Names: 1 to 64 of A-Z a-z 0-9 _ . - */
  char name64[65], name65[66];
  memset(name64, 'n', 64);
  name64[64] = '\0';
  memset(name65, 'n', 65);
  name65[65] = '\0';
  new_world(&c, name64);
  new_world(&c, "Az09_.-");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.create\",\"world\":\"%s\"}", name65);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.create\",\"world\":\"\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.create\",\"world\":\"a b\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.create\",\"world\":\"a/b\"}");
  CU_ASSERT_EQUAL(listed_transforms(&c, name65), -1);
  CU_ASSERT_EQUAL(listed_transforms(&c, name64), 0);
  CU_ASSERT_EQUAL(listed_transforms(&c, "Az09_.-"), 0);

  /* world.list: every world once, with its transform count. */
  uint64_t a = TF0(&c, "wl_a");
  uint64_t b = TF(&c, "wl_a", "\"parent\":%llu", (unsigned long long)a);
  (void)b;
  cJSON *r = OK(&c, "{\"cmd\":\"world.list\"}");
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive(r, "worlds");
  CHECK(cJSON_IsArray(ws), r);
  int seen = 0;
  for (const cJSON *w = ws ? ws->child : NULL; w; w = w->next) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(w, "name");
    CHECK(cJSON_IsString(name) && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(w, "transforms")),
          w);
    if (cJSON_IsString(name) && strcmp(name->valuestring, "wl_a") == 0) {
      seen++;
      CHECK(num(w, "transforms") == 2, w);
    }
  }
  CU_ASSERT_EQUAL(seen, 1);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(ws), (int)info_num(&c, "worlds"));
  cJSON_Delete(r);

  /* Destroying a world removes its transforms but not the entities. */
  double transforms = info_num(&c, "transforms"), entities = info_num(&c, "entities");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"wl_a\"}");
  CU_ASSERT_EQUAL(listed_transforms(&c, "wl_a"), -1);
  CU_ASSERT_EQUAL(info_num(&c, "transforms"), transforms - 2);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), entities);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"world.destroy\",\"world\":\"wl_a\"}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"wl_a\",\"entity\":%llu}",
      (unsigned long long)a);
  /* The same name can be created again, empty; the entity can get a transform again. */
  new_world(&c, "wl_a");
  CU_ASSERT_EQUAL(listed_transforms(&c, "wl_a"), 0);
  CU_ASSERT_EQUAL(TF(&c, "wl_a", "\"entity\":%llu", (unsigned long long)a), a);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"wl_a\"}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", name64);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"Az09_.-\"}");
  scn_client_close(&c);
}

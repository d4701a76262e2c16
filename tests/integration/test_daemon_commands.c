/* Integration tests of the request/response protocol over TCP against the real daemon: every
 * command of the contract's table with its exact results and errors, id echo, atomicity of
 * failed commands and batches, pipelining, framing (line limit, blank lines, CRLF), hundreds of
 * malformed lines, clients that vanish, authentication, the configured limits, the command
 * line, and the HTTP operations port. */
#include "daemon_fixtures.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The daemon most tests share (default settings). */
static t_daemon dmain;

#define WAIT_MS 5000
#define MAX_SAFE 9007199254740991.0

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
  fprintf(stderr, "  %s:", what);
  for (int i = 0; i < 16; i++)
    fprintf(stderr, " %.9g", m[i]);
  fprintf(stderr, "\n");
}

#define CHECK_MAT(a, b, tol)                                                                       \
  do {                                                                                             \
    bool near_ = mat_near((a), (b), (tol));                                                        \
    CU_assertImplementation(near_ ? CU_TRUE : CU_FALSE, __LINE__, "matrices equal", __FILE__, "",  \
                            CU_FALSE);                                                             \
    if (!near_) {                                                                                  \
      mat_print("got", (a));                                                                       \
      mat_print("want", (b));                                                                      \
    }                                                                                              \
  } while (0)

static const float IDENTITY[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

static void mat_trs(float tx, float ty, float tz, float s, float out[16]) {
  memcpy(out, IDENTITY, sizeof IDENTITY);
  out[0] = out[5] = out[10] = s;
  out[12] = tx, out[13] = ty, out[14] = tz;
}

/* ---- fixtures -------------------------------------------------------------------------------- */

static void new_world(t_client *c, const char *name) {
  OKD(c, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", name);
}

/* transform.create with extra fields (printf-style, may be ""); returns the entity. */
static uint64_t tf_at(const char *file, int at, t_client *c, const char *world, const char *fmt,
                      ...) __attribute__((format(printf, 5, 6)));
static uint64_t tf_at(const char *file, int at, t_client *c, const char *world, const char *fmt,
                      ...) {
  text extra = {0};
  va_list ap;
  va_start(ap, fmt);
  text_vaddf(&extra, fmt, ap);
  va_end(ap);
  cJSON *r = t_ok_at(file, at, c, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s%s}", world,
                     extra.len ? "," : "", extra.len ? extra.s : "");
  text_free(&extra);
  uint64_t e = t_resp_id(r, "entity");
  t_check_at(file, at, e != 0, "an entity id", r);
  cJSON_Delete(r);
  return e;
}
#define TF(c, world, ...) tf_at(__FILE__, __LINE__, (c), (world), __VA_ARGS__)
#define TF0(c, world) tf_at(__FILE__, __LINE__, (c), (world), "%s", "")

static uint64_t new_entity(t_client *c) {
  cJSON *r = OK(c, "{\"cmd\":\"entity.create\"}");
  uint64_t e = 0;
  CU_ASSERT_EQUAL(ids_of(r, "entities", &e, 1), 1);
  cJSON_Delete(r);
  return e;
}

static cJSON *get_tf(t_client *c, const char *world, uint64_t e) {
  return t_client_call(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", world,
                       (unsigned long long)e);
}

/* The world (or local) matrix of e. */
static bool matrix(t_client *c, const char *world, uint64_t e, const char *which, float m[16]) {
  cJSON *r = get_tf(c, world, e);
  bool ok = t_resp_ok(r) && mat_of(r, which, m);
  if (!ok)
    t_report("transform.get", r);
  cJSON_Delete(r);
  return ok;
}

/* The parent of e (0 for a root, UINT64_MAX when the reply is wrong). */
static uint64_t parent_of(t_client *c, const char *world, uint64_t e) {
  cJSON *r = get_tf(c, world, e);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "parent");
  uint64_t out = UINT64_MAX;
  if (t_resp_ok(r) && cJSON_IsNull(p))
    out = 0;
  else if (t_resp_ok(r) && cJSON_IsNumber(p))
    out = (uint64_t)p->valuedouble;
  cJSON_Delete(r);
  return out;
}

static int children(t_client *c, const char *world, uint64_t e, uint64_t *out, int cap) {
  cJSON *r = t_client_call(c, "{\"cmd\":\"transform.children\",\"world\":\"%s\",\"entity\":%llu}",
                           world, (unsigned long long)e);
  int n = t_resp_ok(r) ? ids_of(r, "children", out, cap) : -1;
  cJSON_Delete(r);
  return n;
}

static double info_num(t_client *c, const char *field) {
  cJSON *r = t_client_call(c, "{\"cmd\":\"info\"}");
  double v = t_resp_ok(r) ? t_resp_num(r, field) : -1;
  cJSON_Delete(r);
  return v;
}

/* The transform count of a world in world.list, -1 when it is not listed. */
static int listed_transforms(t_client *c, const char *world) {
  cJSON *r = t_client_call(c, "{\"cmd\":\"world.list\"}");
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive(r, "worlds");
  int n = -1;
  for (const cJSON *w = ws ? ws->child : NULL; w; w = w->next) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(w, "name");
    if (cJSON_IsString(name) && strcmp(name->valuestring, world) == 0)
      n = (int)t_resp_num(w, "transforms");
  }
  cJSON_Delete(r);
  return n;
}

/* Everything observable about a world and some entities, as text: world.list, the counts of
 * info, and get and children of each id (errors included). */
static char *snapshot(t_client *c, const char *world, const uint64_t *ids, int n) {
  text b = {0};
  cJSON *r = t_client_call(c, "{\"cmd\":\"world.list\"}");
  char *s = r ? cJSON_PrintUnformatted(r) : NULL;
  text_addf(&b, "%s\n", s ? s : "-");
  free(s);
  cJSON_Delete(r);
  r = t_client_call(c, "{\"cmd\":\"info\"}");
  text_addf(&b, "worlds %g entities %g transforms %g\n", t_resp_num(r, "worlds"),
            t_resp_num(r, "entities"), t_resp_num(r, "transforms"));
  cJSON_Delete(r);
  for (int i = 0; i < n; i++) {
    r = get_tf(c, world, ids[i]);
    /* the world's tick moves on by itself: the state is everything else */
    if (r)
      cJSON_DeleteItemFromObjectCaseSensitive(r, "tick");
    s = r ? cJSON_PrintUnformatted(r) : NULL;
    text_addf(&b, "%s\n", s ? s : "-");
    free(s);
    cJSON_Delete(r);
    r = t_client_call(c, "{\"cmd\":\"transform.children\",\"world\":\"%s\",\"entity\":%llu}", world,
                      (unsigned long long)ids[i]);
    s = r ? cJSON_PrintUnformatted(r) : NULL;
    text_addf(&b, "%s\n", s ? s : "-");
    free(s);
    cJSON_Delete(r);
  }
  return b.s;
}

static void check_same_at(int at, const char *before, const char *after) {
  bool same = before && after && strcmp(before, after) == 0;
  CU_assertImplementation(same ? CU_TRUE : CU_FALSE, (unsigned)at, "state unchanged", __FILE__, "",
                          CU_FALSE);
  if (!same)
    fprintf(stderr, "  before:\n%.3000s\n  after:\n%.3000s\n", before ? before : "-",
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

/* ---- ping, hello, worlds --------------------------------------------------------------------- */

static void test_ping_hello(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  CU_ASSERT_EQUAL(t_client_send(&c, "{\"cmd\":\"ping\"}"), 0);
  char *line = t_client_recv(&c, WAIT_MS);
  CU_ASSERT_PTR_NOT_NULL(line);
  if (line)
    CU_ASSERT_STRING_EQUAL(line, "{\"ok\":true}");
  free(line);
  CU_ASSERT_EQUAL(t_client_send(&c, "{\"cmd\":\"ping\",\"id\":7}"), 0);
  line = t_client_recv(&c, WAIT_MS);
  CU_ASSERT_PTR_NOT_NULL(line);
  if (line)
    CU_ASSERT_STRING_EQUAL(line, "{\"id\":7,\"ok\":true}");
  free(line);

  cJSON *r = OK(&c, "{\"cmd\":\"hello\"}");
  const cJSON *server = cJSON_GetObjectItemCaseSensitive(r, "server");
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(r, "version");
  CHECK(cJSON_IsString(server) && strcmp(server->valuestring, "scened") == 0, r);
  CHECK(cJSON_IsString(version) && strcmp(version->valuestring, SCN_VERSION) == 0, r);
  CHECK(t_resp_num(r, "protocol") == 1, r);
  cJSON_Delete(r);
  /* Without --auth-token, hello ignores a token, whatever it is. */
  OKD(&c, "{\"cmd\":\"hello\",\"token\":\"anything\"}");
  OKD(&c, "{\"cmd\":\"hello\",\"token\":5}");
  t_client_close(&c);
}

static void test_worlds(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
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
  TF(&c, "wl_a", "\"parent\":%llu", (unsigned long long)a);
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
      CHECK(t_resp_num(w, "transforms") == 2, w);
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
  t_client_close(&c);
}

/* ---- entities -------------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void test_entity_create(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  double base = info_num(&c, "entities");
  cJSON *r = OK(&c, "{\"cmd\":\"entity.create\"}");
  uint64_t one[4] = {0};
  CHECK(ids_of(r, "entities", one, 4) == 1 && one[0] >= 1 && one[0] <= MAX_SAFE, r);
  cJSON_Delete(r);
  r = OK(&c, "{\"cmd\":\"entity.create\",\"count\":5}");
  uint64_t five[8] = {0};
  CHECK(ids_of(r, "entities", five, 8) == 5, r);
  cJSON_Delete(r);
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_TRUE(five[i] >= 1 && five[i] <= MAX_SAFE && five[i] != one[0]);
    for (int k = 0; k < i; k++)
      CU_ASSERT_NOT_EQUAL(five[i], five[k]);
  }
  CU_ASSERT_EQUAL(info_num(&c, "entities"), base + 6);

  /* At most 100,000 at once: more is LIMIT; bad counts are BAD_REQUEST; neither creates. */
  ERR(&c, "LIMIT", "{\"cmd\":\"entity.create\",\"count\":100001}");
  ERR(&c, "LIMIT", "{\"cmd\":\"entity.create\",\"count\":1e20}");
  ERR(&c, "LIMIT", "{\"cmd\":\"entity.create\",\"count\":1e300}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.create\",\"count\":0}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.create\",\"count\":-1}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.create\",\"count\":2.5}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.create\",\"count\":\"3\"}");
  CU_ASSERT_EQUAL(info_num(&c, "entities"), base + 6);

  r = OK(&c, "{\"cmd\":\"entity.create\",\"count\":100000}");
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "entities");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(a), 100000);
  uint64_t *all = calloc(100000, sizeof *all);
  int n = 0, bad = 0;
  for (const cJSON *x = a ? a->child : NULL; x && n < 100000; x = x->next) {
    bad += !cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > MAX_SAFE;
    all[n++] = cJSON_IsNumber(x) ? (uint64_t)x->valuedouble : 0;
  }
  qsort(all, (size_t)n, sizeof *all, cmp_u64);
  for (int i = 1; i < n; i++)
    bad += all[i] == all[i - 1];
  CU_ASSERT_EQUAL(bad, 0);
  free(all);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), base + 100006);
  t_client_close(&c);
}

static void test_entity_destroy(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "ed_a");
  new_world(&c, "ed_b");
  uint64_t p = TF(&c, "ed_a", "\"t\":[10,0,0],\"s\":2");
  uint64_t kid =
      TF(&c, "ed_a", "\"parent\":%llu,\"t\":[1,0,0],\"name\":\"kid\"", (unsigned long long)p);
  CU_ASSERT_EQUAL(TF(&c, "ed_b", "\"entity\":%llu", (unsigned long long)p), p);
  uint64_t other = TF0(&c, "ed_b");
  float before[16], after[16], want[16];
  CU_ASSERT_TRUE(matrix(&c, "ed_a", kid, "world", before));
  mat_trs(12, 0, 0, 2, want);
  CHECK_MAT(before, want, 1e-6f);
  double ents = info_num(&c, "entities");

  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)p);
  CU_ASSERT_EQUAL(listed_transforms(&c, "ed_a"), 1);
  CU_ASSERT_EQUAL(listed_transforms(&c, "ed_b"), 1);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents - 1);
  /* Its child became a root keeping its world matrix. */
  CU_ASSERT_EQUAL(parent_of(&c, "ed_a", kid), 0);
  CU_ASSERT_TRUE(matrix(&c, "ed_a", kid, "world", after));
  CHECK_MAT(after, before, 1e-6f);
  CU_ASSERT_TRUE(matrix(&c, "ed_a", kid, "local", after));
  CHECK_MAT(after, before, 1e-6f);

  /* The stale id is NOT_FOUND everywhere. */
  unsigned long long s = (unsigned long long)p, k = (unsigned long long)kid;
  for (int round = 0; round < 2; round++) {
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"ed_a\",\"entity\":%llu}", s);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"ed_b\",\"entity\":%llu}", s);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", s);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"ed_a\",\"entity\":%llu}", s);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"ed_a\",\"parent\":%llu}", s);
    ERR(&c, "NOT_FOUND",
        "{\"cmd\":\"transform.set_local\",\"world\":\"ed_a\",\"entity\":%llu,\"t\":[1,2,3]}", s);
    ERR(&c, "NOT_FOUND",
        "{\"cmd\":\"transform.set_world\",\"world\":\"ed_a\",\"entity\":%llu,\"t\":[1,2,3]}", s);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.children\",\"world\":\"ed_a\",\"entity\":%llu}", s);
    ERR(&c, "NOT_FOUND",
        "{\"cmd\":\"transform.rename\",\"world\":\"ed_a\",\"entity\":%llu,\"name\":\"x\"}", s);
    ERR(&c, "NOT_FOUND",
        "{\"cmd\":\"transform.relative\",\"world\":\"ed_a\",\"entity\":%llu,\"to\":%llu}", s, k);
    ERR(&c, "NOT_FOUND",
        "{\"cmd\":\"transform.relative\",\"world\":\"ed_a\",\"entity\":%llu,\"to\":%llu}", k, s);
    ERR(&c, "NOT_FOUND",
        "{\"cmd\":\"transform.link\",\"world\":\"ed_a\",\"entity\":%llu,\"parent\":%llu}", s, k);
    ERR(&c, "NOT_FOUND",
        "{\"cmd\":\"transform.link\",\"world\":\"ed_a\",\"entity\":%llu,\"parent\":%llu}", k, s);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.unlink\",\"world\":\"ed_a\",\"entity\":%llu}", s);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.destroy\",\"world\":\"ed_a\",\"entity\":%llu}", s);
    ERR(&c, "NOT_FOUND",
        "{\"cmd\":\"batch\",\"world\":\"ed_a\",\"ops\":[{\"cmd\":\"transform.get\",\"entity\":%llu}"
        "]}",
        s);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"ed_a\",\"root\":%llu}", s);
    /* Reusing slots does not revive it. */
    cJSON *r = OK(&c, "{\"cmd\":\"entity.create\",\"count\":64}");
    uint64_t fresh[64];
    CU_ASSERT_EQUAL(ids_of(r, "entities", fresh, 64), 64);
    for (int i = 0; i < 64; i++)
      CU_ASSERT_NOT_EQUAL(fresh[i], p);
    cJSON_Delete(r);
  }
  /* Create, destroy, create: the freed slot comes back under a new id. */
  uint64_t q = new_entity(&c);
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)q);
  uint64_t q2 = new_entity(&c);
  CU_ASSERT_NOT_EQUAL(q, q2);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"ed_a\",\"entity\":%llu}",
      (unsigned long long)q);
  CU_ASSERT_EQUAL(TF(&c, "ed_a", "\"entity\":%llu", (unsigned long long)q2), q2);

  /* A destroy that would make two roots share a name fails and changes nothing. */
  uint64_t dup = TF(&c, "ed_a", "\"name\":\"dup\"");
  uint64_t x = TF0(&c, "ed_a");
  uint64_t xk = TF(&c, "ed_a", "\"parent\":%llu,\"name\":\"dup\"", (unsigned long long)x);
  CU_ASSERT_EQUAL(TF(&c, "ed_b", "\"entity\":%llu", (unsigned long long)x), x);
  uint64_t ids[] = {dup, x, xk, kid, other, q2};
  char *s1 = snapshot(&c, "ed_a", ids, 6);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)x);
  char *s2 = snapshot(&c, "ed_a", ids, 6);
  CHECK_SAME(s1, s2);
  free(s2);
  s2 = snapshot(&c, "ed_b", ids, 6);
  CU_ASSERT_EQUAL(parent_of(&c, "ed_b", x), 0);
  free(s1);
  free(s2);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"ed_a\"}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"ed_b\"}");
  t_client_close(&c);
}

/* ---- transforms ------------------------------------------------------------------------------ */

/* 90 degrees about z, as a quaternion. */
#define R90Z "[0,0,0.70710678118654752,0.70710678118654752]"
/* T(10,0,0) * R90Z * S(2), column-major. */
static const float P_WORLD[16] = {0, 2, 0, 0, -2, 0, 0, 0, 0, 0, 2, 0, 10, 0, 0, 1};

static void test_transform_create(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "tc");
  double ents = info_num(&c, "entities");
  /* A new entity with an identity root transform. */
  uint64_t e1 = TF0(&c, "tc");
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents + 1);
  cJSON *r = get_tf(&c, "tc", e1);
  float m[16], want[16];
  CHECK(t_resp_ok(r) && t_resp_id(r, "entity") == e1, r);
  CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "parent")), r);
  CHECK(!t_resp_has(r, "name"), r);
  CHECK(mat_of(r, "local", m) && memcmp(m, IDENTITY, sizeof m) == 0, r);
  CHECK(mat_of(r, "world", m) && memcmp(m, IDENTITY, sizeof m) == 0, r);
  cJSON_Delete(r);

  /* An existing entity keeps its id; a second transform in the same world is refused. */
  uint64_t e2 = new_entity(&c);
  CU_ASSERT_EQUAL(TF(&c, "tc", "\"entity\":%llu", (unsigned long long)e2), e2);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"entity\":%llu}",
      (unsigned long long)e2);
  ERR(&c, "ALREADY_EXISTS",
      "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)e2, (unsigned long long)e1);

  /* Parent, name and t. */
  uint64_t w =
      TF(&c, "tc", "\"parent\":%llu,\"name\":\"wheel\",\"t\":[1,2,3]", (unsigned long long)e1);
  r = get_tf(&c, "tc", w);
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(r, "name");
  CHECK(t_resp_id(r, "parent") == e1, r);
  CHECK(cJSON_IsString(name) && strcmp(name->valuestring, "wheel") == 0, r);
  mat_trs(1, 2, 3, 1, want);
  CHECK(mat_of(r, "local", m) && memcmp(m, want, sizeof m) == 0, r);
  cJSON_Delete(r);

  /* T * R * S, column-major; the quaternion is normalised; s as a number or 3 numbers. */
  uint64_t p = TF(&c, "tc", "\"t\":[10,0,0],\"r\":" R90Z ",\"s\":2");
  CU_ASSERT_TRUE(matrix(&c, "tc", p, "local", m));
  CHECK_MAT(m, P_WORLD, 1e-6f);
  uint64_t p2 = TF(&c, "tc", "\"t\":[10,0,0],\"r\":[0,0,3,3],\"s\":[2,2,2]");
  CU_ASSERT_TRUE(matrix(&c, "tc", p2, "world", m));
  CHECK_MAT(m, P_WORLD, 1e-6f);
  uint64_t sc = TF(&c, "tc", "\"s\":[2,3,4]");
  float diag[16] = {2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0, 0, 0, 0, 1};
  CU_ASSERT_TRUE(matrix(&c, "tc", sc, "world", m));
  CU_ASSERT_EQUAL(memcmp(m, diag, sizeof m), 0);
  /* A child's world matrix is its parent's times its local. */
  uint64_t ch = TF(&c, "tc", "\"parent\":%llu,\"t\":[1,0,0]", (unsigned long long)p);
  CU_ASSERT_TRUE(matrix(&c, "tc", ch, "world", m));
  mat_trs(10, 2, 0, 2, want);
  want[0] = 0, want[1] = 2, want[4] = -2, want[5] = 0;
  CHECK_MAT(m, want, 1e-6f);

  /* A matrix as given. */
  uint64_t mm = TF(&c, "tc", "\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0.5,-2.25,3e5,1]");
  float given[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0.5f, -2.25f, 3e5f, 1};
  CU_ASSERT_TRUE(matrix(&c, "tc", mm, "local", m));
  CU_ASSERT_EQUAL(memcmp(m, given, sizeof m), 0);
  /* parent null is a root. */
  uint64_t rn = TF(&c, "tc", "\"parent\":null");
  CU_ASSERT_EQUAL(parent_of(&c, "tc", rn), 0);

  /* Failures create nothing, not even the new entity. */
  ents = info_num(&c, "entities");
  int count = listed_transforms(&c, "tc");
  uint64_t lonely = new_entity(&c);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"parent\":%llu}",
      (unsigned long long)lonely);
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"parent\":9007199254740000}");
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"entity\":9007199254740000}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"tc_none\"}");
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],"
      "\"t\":[1,2,3]}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"r\":[0,0,0,0]}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"t\":[1e39,0,0]}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"s\":1e999}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"name\":\"a/b\"}");
  /* Names are unique among siblings (and among roots) only. */
  uint64_t top = TF(&c, "tc", "\"name\":\"top\"");
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"name\":\"top\"}");
  ERR(&c, "ALREADY_EXISTS",
      "{\"cmd\":\"transform.create\",\"world\":\"tc\",\"parent\":%llu,\"name\":\"wheel\"}",
      (unsigned long long)e1);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents + 2);
  CU_ASSERT_EQUAL(listed_transforms(&c, "tc"), count + 1);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"tc\",\"entity\":%llu}",
      (unsigned long long)lonely);
  uint64_t top2 = TF(&c, "tc", "\"parent\":%llu,\"name\":\"top\"", (unsigned long long)top);
  uint64_t wheel2 = TF(&c, "tc", "\"name\":\"wheel\"");
  CU_ASSERT_NOT_EQUAL(top2, wheel2);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"tc\"}");
  t_client_close(&c);
}

static void test_transform_destroy(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "td");
  uint64_t p = TF(&c, "td", "\"t\":[10,0,0],\"r\":" R90Z ",\"s\":2");
  uint64_t c1 =
      TF(&c, "td", "\"parent\":%llu,\"t\":[1,0,0],\"name\":\"one\"", (unsigned long long)p);
  uint64_t c2 = TF(&c, "td", "\"parent\":%llu,\"t\":[0,1,0]", (unsigned long long)p);
  uint64_t g = TF(&c, "td", "\"parent\":%llu,\"t\":[0,0,1]", (unsigned long long)c2);
  float w1[16], w2[16], wg[16], m[16];
  CU_ASSERT_TRUE(matrix(&c, "td", c1, "world", w1));
  CU_ASSERT_TRUE(matrix(&c, "td", c2, "world", w2));
  CU_ASSERT_TRUE(matrix(&c, "td", g, "world", wg));

  /* Not recursive: the children become roots and keep their world matrices. */
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"td\",\"entity\":%llu}",
      (unsigned long long)p);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"td\",\"entity\":%llu}",
      (unsigned long long)p);
  CU_ASSERT_EQUAL(listed_transforms(&c, "td"), 3);
  CU_ASSERT_EQUAL(parent_of(&c, "td", c1), 0);
  CU_ASSERT_EQUAL(parent_of(&c, "td", c2), 0);
  CU_ASSERT_EQUAL(parent_of(&c, "td", g), c2);
  CU_ASSERT_TRUE(matrix(&c, "td", c1, "world", m));
  CHECK_MAT(m, w1, 1e-6f);
  CU_ASSERT_TRUE(matrix(&c, "td", c1, "local", m));
  CHECK_MAT(m, w1, 1e-6f);
  CU_ASSERT_TRUE(matrix(&c, "td", c2, "world", m));
  CHECK_MAT(m, w2, 1e-6f);
  CU_ASSERT_TRUE(matrix(&c, "td", g, "world", m));
  CHECK_MAT(m, wg, 1e-6f);
  /* The found path reflects it. */
  cJSON *r = OK(&c, "{\"cmd\":\"transform.find\",\"world\":\"td\",\"path\":\"one\"}");
  CU_ASSERT_EQUAL(t_resp_id(r, "entity"), c1);
  cJSON_Delete(r);
  /* The entity lives on and may get a transform again. */
  CU_ASSERT_EQUAL(TF(&c, "td", "\"entity\":%llu", (unsigned long long)p), p);

  /* Recursive: the whole subtree goes; the entities stay. */
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"td\",\"entity\":%llu,\"recursive\":true}",
      (unsigned long long)c2);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"td\",\"entity\":%llu}",
      (unsigned long long)c2);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"td\",\"entity\":%llu}",
      (unsigned long long)g);
  CU_ASSERT_EQUAL(listed_transforms(&c, "td"), 2);
  CU_ASSERT_EQUAL(TF(&c, "td", "\"entity\":%llu", (unsigned long long)g), g);
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"td\",\"entity\":%llu,\"recursive\":false}",
      (unsigned long long)c1);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.destroy\",\"world\":\"td\",\"entity\":%llu}",
      (unsigned long long)c1);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.destroy\",\"world\":\"td\",\"entity\":%llu,\"recursive\":\"yes\"}",
      (unsigned long long)g);

  /* A child that would become a root named like another root: refused, nothing changes. */
  uint64_t x = TF(&c, "td", "\"name\":\"x\"");
  uint64_t q = TF0(&c, "td");
  uint64_t qx = TF(&c, "td", "\"parent\":%llu,\"name\":\"x\"", (unsigned long long)q);
  uint64_t qy = TF(&c, "td", "\"parent\":%llu,\"name\":\"y\"", (unsigned long long)q);
  uint64_t ids[] = {x, q, qx, qy, p, g};
  char *s1 = snapshot(&c, "td", ids, 6);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"transform.destroy\",\"world\":\"td\",\"entity\":%llu}",
      (unsigned long long)q);
  char *s2 = snapshot(&c, "td", ids, 6);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"td\",\"entity\":%llu,\"recursive\":true}",
      (unsigned long long)q);
  CU_ASSERT_EQUAL(listed_transforms(&c, "td"), 3);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"td\"}");
  t_client_close(&c);
}

static void test_link_unlink(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "ln");
  uint64_t p = TF(&c, "ln", "\"t\":[10,0,0],\"r\":" R90Z ",\"s\":2");
  uint64_t ch = TF(&c, "ln", "\"t\":[1,2,3]");
  float t123[16], m[16], w[16], pw[16];
  mat_trs(1, 2, 3, 1, t123);
  CU_ASSERT_TRUE(matrix(&c, "ln", p, "world", pw));

  /* keep local (the default): the local matrix stays, the world follows the parent. */
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)ch, (unsigned long long)p);
  CU_ASSERT_EQUAL(parent_of(&c, "ln", ch), p);
  CU_ASSERT_TRUE(matrix(&c, "ln", ch, "local", m));
  CU_ASSERT_EQUAL(memcmp(m, t123, sizeof m), 0);
  CU_ASSERT_TRUE(matrix(&c, "ln", ch, "world", w));
  float want[16] = {0, 2, 0, 0, -2, 0, 0, 0, 0, 0, 2, 0, 6, 2, 6, 1};
  CHECK_MAT(w, want, 1e-6f);
  /* Linking to the current parent is a no-op. */
  uint64_t ids[] = {p, ch};
  char *s1 = snapshot(&c, "ln", ids, 2);
  OKD(&c,
      "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu,\"keep\":"
      "\"world\"}",
      (unsigned long long)ch, (unsigned long long)p);
  char *s2 = snapshot(&c, "ln", ids, 2);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  /* unlink, keep local: the world becomes the local. */
  OKD(&c, "{\"cmd\":\"transform.unlink\",\"world\":\"ln\",\"entity\":%llu,\"keep\":\"local\"}",
      (unsigned long long)ch);
  CU_ASSERT_EQUAL(parent_of(&c, "ln", ch), 0);
  CU_ASSERT_TRUE(matrix(&c, "ln", ch, "world", m));
  CU_ASSERT_EQUAL(memcmp(m, t123, sizeof m), 0);
  /* Unlinking a root is a no-op. */
  s1 = snapshot(&c, "ln", ids, 2);
  OKD(&c, "{\"cmd\":\"transform.unlink\",\"world\":\"ln\",\"entity\":%llu}",
      (unsigned long long)ch);
  OKD(&c, "{\"cmd\":\"transform.unlink\",\"world\":\"ln\",\"entity\":%llu,\"keep\":\"world\"}",
      (unsigned long long)ch);
  s2 = snapshot(&c, "ln", ids, 2);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);

  /* keep world: the world matrix stays (to float rounding), the local is recomputed. */
  OKD(&c,
      "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu,\"keep\":"
      "\"world\"}",
      (unsigned long long)ch, (unsigned long long)p);
  CU_ASSERT_EQUAL(parent_of(&c, "ln", ch), p);
  CU_ASSERT_TRUE(matrix(&c, "ln", ch, "world", w));
  CHECK_MAT(w, t123, 1e-5f);
  CU_ASSERT_TRUE(matrix(&c, "ln", ch, "local", m));
  /* inverse(P) * T(1,2,3): rotate (-9,2,3) by -90 degrees about z, then halve. */
  float local_want[16] = {0, -0.5f, 0, 0, 0.5f, 0, 0, 0, 0, 0, 0.5f, 0, 1, 4.5f, 1.5f, 1};
  CHECK_MAT(m, local_want, 1e-5f);
  float prod[16];
  mat_mul(pw, m, prod);
  CHECK_MAT(prod, w, 1e-5f);
  /* unlink, keep world. */
  OKD(&c, "{\"cmd\":\"transform.unlink\",\"world\":\"ln\",\"entity\":%llu,\"keep\":\"world\"}",
      (unsigned long long)ch);
  CU_ASSERT_EQUAL(parent_of(&c, "ln", ch), 0);
  CU_ASSERT_TRUE(matrix(&c, "ln", ch, "world", w));
  CHECK_MAT(w, t123, 1e-5f);
  CU_ASSERT_TRUE(matrix(&c, "ln", ch, "local", m));
  CU_ASSERT_EQUAL(memcmp(m, w, sizeof m), 0);

  /* Cycles. */
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)ch, (unsigned long long)p);
  uint64_t g = TF(&c, "ln", "\"parent\":%llu", (unsigned long long)ch);
  uint64_t lonely = new_entity(&c);
  uint64_t ids3[] = {p, ch, g};
  s1 = snapshot(&c, "ln", ids3, 3);
  ERR(&c, "CYCLE", "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)p, (unsigned long long)g);
  ERR(&c, "CYCLE", "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)p, (unsigned long long)ch);
  ERR(&c, "CYCLE",
      "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu,\"keep\":"
      "\"world\"}",
      (unsigned long long)p, (unsigned long long)p);
  ERR(&c, "CYCLE", "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)g, (unsigned long long)g);
  /* Missing parent or entity, bad keep. */
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)g, (unsigned long long)lonely);
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)lonely, (unsigned long long)g);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu,\"keep\":"
      "\"both\"}",
      (unsigned long long)g, (unsigned long long)p);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu}",
      (unsigned long long)g);
  s2 = snapshot(&c, "ln", ids3, 3);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  /* parent null makes a root. */
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":null}",
      (unsigned long long)g);
  CU_ASSERT_EQUAL(parent_of(&c, "ln", g), 0);

  /* Names stay unique among siblings through link and unlink. */
  uint64_t q = TF0(&c, "ln");
  uint64_t qn = TF(&c, "ln", "\"parent\":%llu,\"name\":\"n\"", (unsigned long long)q);
  uint64_t rn = TF(&c, "ln", "\"name\":\"n\"");
  uint64_t ids4[] = {q, qn, rn, g};
  s1 = snapshot(&c, "ln", ids4, 4);
  ERR(&c, "ALREADY_EXISTS",
      "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)rn, (unsigned long long)q);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"transform.unlink\",\"world\":\"ln\",\"entity\":%llu}",
      (unsigned long long)qn);
  ERR(&c, "ALREADY_EXISTS",
      "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":null}",
      (unsigned long long)qn);
  s2 = snapshot(&c, "ln", ids4, 4);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);

  /* keep world under a singular parent needs an inverse that does not exist. */
  uint64_t z = TF(&c, "ln", "\"s\":0");
  uint64_t ids5[] = {z, g};
  s1 = snapshot(&c, "ln", ids5, 2);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu,\"keep\":"
      "\"world\"}",
      (unsigned long long)g, (unsigned long long)z);
  s2 = snapshot(&c, "ln", ids5, 2);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"ln\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)g, (unsigned long long)z);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"ln\"}");
  t_client_close(&c);
}

static void test_set_local_world(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "sw");
  uint64_t p = TF(&c, "sw", "\"t\":[10,0,0],\"r\":" R90Z ",\"s\":2");
  uint64_t ch = TF(&c, "sw", "\"parent\":%llu,\"t\":[1,0,0]", (unsigned long long)p);
  float m[16], want[16];
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"sw\",\"entity\":%llu,\"t\":[0,1,0]}",
      (unsigned long long)ch);
  CU_ASSERT_TRUE(matrix(&c, "sw", ch, "local", m));
  mat_trs(0, 1, 0, 1, want);
  CU_ASSERT_EQUAL(memcmp(m, want, sizeof m), 0);
  CU_ASSERT_TRUE(matrix(&c, "sw", ch, "world", m));
  float want_w[16] = {0, 2, 0, 0, -2, 0, 0, 0, 0, 0, 2, 0, 8, 0, 0, 1};
  CHECK_MAT(m, want_w, 1e-6f);
  /* A parent's change shows in the child's world matrix at once. */
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"sw\",\"entity\":%llu,\"s\":1}",
      (unsigned long long)p);
  CU_ASSERT_TRUE(matrix(&c, "sw", ch, "world", m));
  CU_ASSERT_EQUAL(memcmp(m, want, sizeof m), 0);
  OKD(&c,
      "{\"cmd\":\"transform.set_local\",\"world\":\"sw\",\"entity\":%llu,"
      "\"matrix\":[0,2,0,0,-2,0,0,0,0,0,2,0,10,0,0,1]}",
      (unsigned long long)p);
  CU_ASSERT_TRUE(matrix(&c, "sw", p, "world", m));
  CU_ASSERT_EQUAL(memcmp(m, P_WORLD, sizeof m), 0);

  /* set_world: the world is as given, the local is inverse(parent world) * given. */
  OKD(&c, "{\"cmd\":\"transform.set_world\",\"world\":\"sw\",\"entity\":%llu,\"t\":[0,0,5]}",
      (unsigned long long)ch);
  CU_ASSERT_TRUE(matrix(&c, "sw", ch, "world", m));
  mat_trs(0, 0, 5, 1, want);
  CHECK_MAT(m, want, 1e-6f);
  CU_ASSERT_TRUE(matrix(&c, "sw", ch, "local", m));
  float local_want[16] = {0, -0.5f, 0, 0, 0.5f, 0, 0, 0, 0, 0, 0.5f, 0, 0, 5, 2.5f, 1};
  CHECK_MAT(m, local_want, 1e-6f);
  /* On a root, local and world are the same. */
  OKD(&c,
      "{\"cmd\":\"transform.set_world\",\"world\":\"sw\",\"entity\":%llu,\"t\":[1,2,3],\"s\":[1,2,"
      "4]}",
      (unsigned long long)p);
  float trs[16] = {1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 4, 0, 1, 2, 3, 1};
  CU_ASSERT_TRUE(matrix(&c, "sw", p, "local", m));
  CU_ASSERT_EQUAL(memcmp(m, trs, sizeof m), 0);
  CU_ASSERT_TRUE(matrix(&c, "sw", p, "world", m));
  CU_ASSERT_EQUAL(memcmp(m, trs, sizeof m), 0);

  /* Errors change nothing. */
  uint64_t z = TF(&c, "sw", "\"s\":0");
  uint64_t zc = TF(&c, "sw", "\"parent\":%llu", (unsigned long long)z);
  uint64_t ids[] = {p, ch, z, zc};
  char *s1 = snapshot(&c, "sw", ids, 4);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.set_local\",\"world\":\"sw\",\"entity\":%llu}",
      (unsigned long long)ch);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.set_world\",\"world\":\"sw\",\"entity\":%llu}",
      (unsigned long long)ch);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_world\",\"world\":\"sw\",\"entity\":%llu,\"t\":[1,1,1]}",
      (unsigned long long)zc);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_local\",\"world\":\"sw\",\"entity\":%llu,\"t\":[1,1,1],"
      "\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]}",
      (unsigned long long)ch);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_local\",\"world\":\"sw\",\"entity\":%llu,\"r\":[0,0,0,0]}",
      (unsigned long long)ch);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_local\",\"world\":\"sw\",\"entity\":%llu,\"t\":[1e39,0,0]}",
      (unsigned long long)ch);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_world\",\"world\":\"sw\",\"entity\":%llu,\"s\":-1e39}",
      (unsigned long long)ch);
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.set_local\",\"world\":\"sw\",\"entity\":9007199254740991,\"t\":[1,1,1]"
      "}");
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.set_world\",\"world\":\"sw_none\",\"entity\":%llu,\"t\":[1,1,1]}",
      (unsigned long long)ch);
  char *s2 = snapshot(&c, "sw", ids, 4);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"sw\"}");
  t_client_close(&c);
}

static void test_get_roundtrip(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "gr");
  uint64_t e = TF0(&c, "gr");
  /* Values that only round-trip when printed as the shortest float32 text. */
  static const char *const vals[16] = {
      "0.1",   "0.2",        "0.3",      "-0.1",       "0.333333333333333",
      "1e-7",  "123456.789", "16777217", "3.4e38",     "-2.5",
      "1e-40", "0.7",        "1e-3",     "-1234.5678", "98765.4321",
      "1"};
  text req = {0};
  text_addf(&req, "{\"cmd\":\"transform.set_local\",\"world\":\"gr\",\"entity\":%llu,\"matrix\":[",
            (unsigned long long)e);
  for (int i = 0; i < 16; i++)
    text_addf(&req, "%s%s", i ? "," : "", vals[i]);
  text_addf(&req, "]}");
  cJSON *r = t_client_call(&c, "%s", req.s);
  CHECK(t_resp_ok(r), r);
  cJSON_Delete(r);
  text_free(&req);

  char getline_[128];
  snprintf(getline_, sizeof getline_,
           "{\"cmd\":\"transform.get\",\"world\":\"gr\",\"entity\":%llu}", (unsigned long long)e);
  CU_ASSERT_EQUAL(t_client_send(&c, getline_), 0);
  char *line = t_client_recv(&c, WAIT_MS);
  CU_ASSERT_PTR_NOT_NULL(line);
  CU_ASSERT_PTR_NOT_NULL(line ? strstr(line, "\"local\":[0.1,0.2,0.3,-0.1,") : NULL);
  r = line ? cJSON_Parse(line) : NULL;
  free(line);
  CHECK(t_resp_ok(r), r);
  CHECK(t_resp_id(r, "entity") == e, r);
  CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "parent")) && !t_resp_has(r, "name"), r);
  for (int which = 0; which < 2; which++) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, which ? "world" : "local");
    CHECK(cJSON_GetArraySize(a) == 16, r);
    int i = 0, bad = 0;
    for (const cJSON *x = a ? a->child : NULL; x && i < 16; x = x->next, i++) {
      float want = (float)strtod(vals[i], NULL);
      if (!cJSON_IsNumber(x) || (float)x->valuedouble != want) {
        bad++;
        fprintf(stderr, "  element %d: sent %s, got %.17g\n", i, vals[i],
                cJSON_IsNumber(x) ? x->valuedouble : NAN);
      }
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* 0.1 comes back as the text 0.1, not as 0.100000001. */
    CU_ASSERT_TRUE(a && a->child && a->child->valuedouble == 0.1);
  }
  cJSON_Delete(r);

  /* name only when set; UTF-8 names round-trip. */
  uint64_t n =
      TF(&c, "gr", "\"name\":\"w\xc3\xb6rld \xe2\x82\xac\",\"parent\":%llu", (unsigned long long)e);
  r = get_tf(&c, "gr", n);
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(r, "name");
  CHECK(cJSON_IsString(name) && strcmp(name->valuestring, "w\xc3\xb6rld \xe2\x82\xac") == 0, r);
  CHECK(t_resp_id(r, "parent") == e, r);
  cJSON_Delete(r);
  char n64[65], n65[66];
  memset(n64, 'q', 64);
  n64[64] = '\0';
  memset(n65, 'q', 65);
  n65[65] = '\0';
  TF(&c, "gr", "\"name\":\"%s\"", n64);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.create\",\"world\":\"gr\",\"name\":\"%s\"}", n65);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.get\",\"world\":\"gr\"}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"gr\",\"entity\":9007199254740991}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"gr\"}");
  t_client_close(&c);
}

static bool ids_equal(const uint64_t *got, int n, const uint64_t *want, int m) {
  if (n != m) {
    fprintf(stderr, "  got %d ids, want %d\n", n, m);
    return false;
  }
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) {
      fprintf(stderr, "  id %d: got %llu, want %llu\n", i, (unsigned long long)got[i],
              (unsigned long long)want[i]);
      return false;
    }
  return true;
}

static void test_children_order(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "co");
  uint64_t p = TF0(&c, "co");
  uint64_t k[5], got[8];
  for (int i = 0; i < 3; i++)
    k[i] = TF(&c, "co", "\"parent\":%llu", (unsigned long long)p);
  CU_ASSERT_TRUE(ids_equal(got, children(&c, "co", p, got, 8), k, 3));
  k[3] = TF0(&c, "co");
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"co\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)k[3], (unsigned long long)p);
  CU_ASSERT_TRUE(ids_equal(got, children(&c, "co", p, got, 8), k, 4));
  OKD(&c, "{\"cmd\":\"transform.unlink\",\"world\":\"co\",\"entity\":%llu}",
      (unsigned long long)k[1]);
  uint64_t w1[] = {k[0], k[2], k[3]};
  CU_ASSERT_TRUE(ids_equal(got, children(&c, "co", p, got, 8), w1, 3));
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"co\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)k[1], (unsigned long long)p);
  uint64_t w2[] = {k[0], k[2], k[3], k[1]};
  CU_ASSERT_TRUE(ids_equal(got, children(&c, "co", p, got, 8), w2, 4));
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"co\",\"entity\":%llu}",
      (unsigned long long)k[2]);
  uint64_t w3[] = {k[0], k[3], k[1]};
  CU_ASSERT_TRUE(ids_equal(got, children(&c, "co", p, got, 8), w3, 3));
  CU_ASSERT_EQUAL(children(&c, "co", k[0], got, 8), 0);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.children\",\"world\":\"co\",\"entity\":%llu}",
      (unsigned long long)k[2]);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"co\"}");
  t_client_close(&c);
}

static uint64_t find(t_client *c, const char *world, const char *path) {
  cJSON *r = t_client_call(c, "{\"cmd\":\"transform.find\",\"world\":\"%s\",\"path\":\"%s\"}",
                           world, path);
  uint64_t e = t_resp_ok(r) ? t_resp_id(r, "entity") : 0;
  cJSON_Delete(r);
  return e;
}

static void test_rename(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "rn");
  uint64_t a = TF(&c, "rn", "\"name\":\"a\"");
  uint64_t b = TF(&c, "rn", "\"name\":\"b\"");
  OKD(&c, "{\"cmd\":\"transform.rename\",\"world\":\"rn\",\"entity\":%llu,\"name\":\"c\"}",
      (unsigned long long)a);
  cJSON *r = get_tf(&c, "rn", a);
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(r, "name");
  CHECK(cJSON_IsString(name) && strcmp(name->valuestring, "c") == 0, r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(find(&c, "rn", "c"), a);
  CU_ASSERT_EQUAL(find(&c, "rn", "a"), 0);
  /* null clears the name. */
  OKD(&c, "{\"cmd\":\"transform.rename\",\"world\":\"rn\",\"entity\":%llu,\"name\":null}",
      (unsigned long long)a);
  r = get_tf(&c, "rn", a);
  CHECK(t_resp_ok(r) && !t_resp_has(r, "name"), r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(find(&c, "rn", "c"), 0);
  /* Two unnamed siblings are fine; renaming to the own name is a no-op. */
  TF0(&c, "rn");
  OKD(&c, "{\"cmd\":\"transform.rename\",\"world\":\"rn\",\"entity\":%llu,\"name\":\"b\"}",
      (unsigned long long)b);
  /* Sibling clashes. */
  uint64_t k1 = TF(&c, "rn", "\"parent\":%llu,\"name\":\"k\"", (unsigned long long)b);
  uint64_t k2 = TF(&c, "rn", "\"parent\":%llu", (unsigned long long)b);
  uint64_t ids[] = {a, b, k1, k2};
  char *s1 = snapshot(&c, "rn", ids, 4);
  ERR(&c, "ALREADY_EXISTS",
      "{\"cmd\":\"transform.rename\",\"world\":\"rn\",\"entity\":%llu,\"name\":\"b\"}",
      (unsigned long long)a);
  ERR(&c, "ALREADY_EXISTS",
      "{\"cmd\":\"transform.rename\",\"world\":\"rn\",\"entity\":%llu,\"name\":\"k\"}",
      (unsigned long long)k2);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.rename\",\"world\":\"rn\",\"entity\":%llu}",
      (unsigned long long)k2);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.rename\",\"world\":\"rn\",\"entity\":%llu,\"name\":\"x/y\"}",
      (unsigned long long)k2);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.rename\",\"world\":\"rn\",\"entity\":%llu,\"name\":\"\"}",
      (unsigned long long)k2);
  char *s2 = snapshot(&c, "rn", ids, 4);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  /* The same name under another parent is fine. */
  OKD(&c, "{\"cmd\":\"transform.rename\",\"world\":\"rn\",\"entity\":%llu,\"name\":\"b\"}",
      (unsigned long long)k2);
  CU_ASSERT_EQUAL(find(&c, "rn", "b/b"), k2);
  CU_ASSERT_EQUAL(find(&c, "rn", "b/k"), k1);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"rn\"}");
  t_client_close(&c);
}

static void test_find(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "fd");
  uint64_t car = TF(&c, "fd", "\"name\":\"car\"");
  uint64_t wheel = TF(&c, "fd", "\"parent\":%llu,\"name\":\"wheel_fl\"", (unsigned long long)car);
  uint64_t nut = TF(&c, "fd", "\"parent\":%llu,\"name\":\"nut\"", (unsigned long long)wheel);
  TF(&c, "fd", "\"parent\":%llu", (unsigned long long)car); /* unnamed */
  CU_ASSERT_EQUAL(find(&c, "fd", "car"), car);
  CU_ASSERT_EQUAL(find(&c, "fd", "car/wheel_fl"), wheel);
  CU_ASSERT_EQUAL(find(&c, "fd", "car/wheel_fl/nut"), nut);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.find\",\"world\":\"fd\",\"path\":\"wheel_fl\"}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.find\",\"world\":\"fd\",\"path\":\"car/nope\"}");
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.find\",\"world\":\"fd\",\"path\":\"car/wheel_fl/nut/x\"}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.find\",\"world\":\"fd\",\"path\":\"Car\"}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.find\",\"world\":\"fd_none\",\"path\":\"car\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.find\",\"world\":\"fd\",\"path\":\"\"}");
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.find\",\"world\":\"fd\",\"path\":\"car//wheel_fl\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.find\",\"world\":\"fd\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.find\",\"world\":\"fd\",\"path\":7}");
  /* Paths follow links. */
  OKD(&c, "{\"cmd\":\"transform.unlink\",\"world\":\"fd\",\"entity\":%llu}",
      (unsigned long long)wheel);
  CU_ASSERT_EQUAL(find(&c, "fd", "wheel_fl/nut"), nut);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.find\",\"world\":\"fd\",\"path\":\"car/wheel_fl\"}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"fd\"}");
  t_client_close(&c);
}

static bool relative(t_client *c, const char *world, uint64_t e, uint64_t to, float m[16]) {
  cJSON *r = t_client_call(
      c, "{\"cmd\":\"transform.relative\",\"world\":\"%s\",\"entity\":%llu,\"to\":%llu}", world,
      (unsigned long long)e, (unsigned long long)to);
  bool ok = t_resp_ok(r) && mat_of(r, "matrix", m);
  if (!ok)
    t_report("transform.relative", r);
  cJSON_Delete(r);
  return ok;
}

static void test_relative(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "rl");
  uint64_t to = TF(&c, "rl", "\"t\":[1,0,0],\"s\":2");
  uint64_t e = TF(&c, "rl", "\"t\":[5,4,0]");
  uint64_t kid = TF(&c, "rl", "\"parent\":%llu,\"t\":[1,1,1]", (unsigned long long)to);
  float m[16], want[16];
  /* inverse(world(to)) * world(e) */
  CU_ASSERT_TRUE(relative(&c, "rl", e, to, m));
  mat_trs(2, 2, 0, 0.5f, want);
  CHECK_MAT(m, want, 1e-6f);
  CU_ASSERT_TRUE(relative(&c, "rl", to, e, m));
  mat_trs(-4, -4, 0, 2, want);
  CHECK_MAT(m, want, 1e-6f);
  CU_ASSERT_TRUE(relative(&c, "rl", e, e, m));
  CHECK_MAT(m, IDENTITY, 1e-6f);
  /* Relative to the parent is the local matrix. */
  CU_ASSERT_TRUE(relative(&c, "rl", kid, to, m));
  mat_trs(1, 1, 1, 1, want);
  CHECK_MAT(m, want, 1e-6f);
  /* It follows later changes at once. */
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"rl\",\"entity\":%llu,\"t\":[0,0,0]}",
      (unsigned long long)to);
  CU_ASSERT_TRUE(relative(&c, "rl", e, to, m));
  mat_trs(5, 4, 0, 1, want);
  CHECK_MAT(m, want, 1e-6f);
  /* A singular "to" has no inverse. */
  uint64_t z = TF(&c, "rl", "\"s\":[1,0,1]");
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.relative\",\"world\":\"rl\",\"entity\":%llu,\"to\":%llu}",
      (unsigned long long)e, (unsigned long long)z);
  CU_ASSERT_TRUE(relative(&c, "rl", z, e, m));
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.relative\",\"world\":\"rl\",\"entity\":%llu,\"to\":%llu}",
      (unsigned long long)e, (unsigned long long)new_entity(&c));
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.relative\",\"world\":\"rl\",\"entity\":%llu}",
      (unsigned long long)e);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"rl\"}");
  t_client_close(&c);
}

/* ---- batch ----------------------------------------------------------------------------------- */

static bool json_equals(const cJSON *got, const char *want_text) {
  cJSON *want = cJSON_Parse(want_text);
  bool same = want && got && cJSON_Compare(got, want, true);
  if (!same) {
    fprintf(stderr, "  want %s\n", want_text);
    t_report("got", got);
  }
  cJSON_Delete(want);
  return same;
}

static void test_batch(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "bt");
  cJSON *r = OK(&c, "{\"cmd\":\"entity.create\",\"count\":3}");
  uint64_t e[3] = {0};
  CU_ASSERT_EQUAL(ids_of(r, "entities", e, 3), 3);
  cJSON_Delete(r);
  unsigned long long a = e[0], b = e[1], k = e[2];

  /* Ops apply in order, each seeing the ones before; results carry the ops' ids. */
  r = OK(&c,
         "{\"cmd\":\"batch\",\"world\":\"bt\",\"id\":\"B\",\"ops\":["
         "{\"cmd\":\"transform.create\",\"entity\":%llu,\"id\":\"first\",\"t\":[1,0,0]},"
         "{\"cmd\":\"transform.create\",\"entity\":%llu,\"parent\":%llu,\"name\":\"kid\"},"
         "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"t\":[0,5,0],\"id\":3},"
         "{\"cmd\":\"transform.rename\",\"entity\":%llu,\"name\":\"top\"},"
         "{\"cmd\":\"transform.get\",\"entity\":%llu,\"id\":{\"k\":[1]}},"
         "{\"cmd\":\"transform.children\",\"entity\":%llu,\"id\":null},"
         "{\"cmd\":\"transform.find\",\"path\":\"top/kid\",\"id\":6},"
         "{\"cmd\":\"transform.relative\",\"entity\":%llu,\"to\":%llu},"
         "{\"cmd\":\"transform.create\",\"parent\":%llu}"
         "]}",
         a, b, a, a, a, b, a, b, a, b);
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");
  CHECK(cJSON_IsString(id) && strcmp(id->valuestring, "B") == 0, r);
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "results");
  CHECK(cJSON_GetArraySize(res) == 9, r);
  char want[512];
  snprintf(want, sizeof want, "{\"id\":\"first\",\"entity\":%llu}", a);
  CU_ASSERT_TRUE(json_equals(cJSON_GetArrayItem(res, 0), want));
  snprintf(want, sizeof want, "{\"entity\":%llu}", b);
  CU_ASSERT_TRUE(json_equals(cJSON_GetArrayItem(res, 1), want));
  CU_ASSERT_TRUE(json_equals(cJSON_GetArrayItem(res, 2), "{\"id\":3}"));
  CU_ASSERT_TRUE(json_equals(cJSON_GetArrayItem(res, 3), "{}"));
  snprintf(
      want, sizeof want,
      "{\"id\":{\"k\":[1]},\"entity\":%llu,\"parent\":%llu,\"name\":\"kid\","
      "\"local\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],\"world\":[1,0,0,0,0,1,0,0,0,0,1,0,0,5,0,1]}",
      b, a);
  /* a get answers the world's tick (now); the rest exactly */
  cJSON *got = cJSON_GetArrayItem(res, 4);
  CU_ASSERT_TRUE(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(got, "tick")));
  cJSON_DeleteItemFromObjectCaseSensitive(got, "tick");
  CU_ASSERT_TRUE(json_equals(got, want));
  snprintf(want, sizeof want, "{\"id\":null,\"children\":[%llu]}", b);
  CU_ASSERT_TRUE(json_equals(cJSON_GetArrayItem(res, 5), want));
  snprintf(want, sizeof want, "{\"id\":6,\"entity\":%llu}", b);
  CU_ASSERT_TRUE(json_equals(cJSON_GetArrayItem(res, 6), want));
  /* b relative to its parent a: its local matrix. */
  CU_ASSERT_TRUE(
      json_equals(cJSON_GetArrayItem(res, 7), "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]}"));
  const cJSON *last = cJSON_GetArrayItem(res, 8);
  unsigned long long created = t_resp_id(last, "entity");
  CHECK(created != 0 && cJSON_GetArraySize(last) == 1, last);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(parent_of(&c, "bt", b), a);
  CU_ASSERT_EQUAL(parent_of(&c, "bt", created), b);
  CU_ASSERT_EQUAL(listed_transforms(&c, "bt"), 3);
  /* An empty batch. */
  r = OK(&c, "{\"cmd\":\"batch\",\"world\":\"bt\",\"ops\":[]}");
  CU_ASSERT_TRUE(json_equals(r, "{\"ok\":true,\"results\":[]}"));
  cJSON_Delete(r);

  /* A failing op: nothing is applied (not even new entities), the error is the op's, and the
   * message names the op's 0-based index. */
  uint64_t ids[] = {a, b, k, created};
  char *s1 = snapshot(&c, "bt", ids, 4);
  char *msg;
  ERR_MESSAGE(&c, "NOT_FOUND", &msg,
              "{\"cmd\":\"batch\",\"world\":\"bt\",\"ops\":["
              "{\"cmd\":\"transform.create\",\"entity\":%llu,\"parent\":%llu},"
              "{\"cmd\":\"transform.rename\",\"entity\":%llu,\"name\":\"renamed\"},"
              "{\"cmd\":\"transform.create\",\"name\":\"fresh\"},"
              "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"t\":[9,9,9]},"
              "{\"cmd\":\"transform.destroy\",\"entity\":%llu,\"recursive\":true},"
              "{\"cmd\":\"transform.link\",\"entity\":%llu,\"parent\":9007199254740000}"
              "]}",
              k, b, a, b, created, b);
  CU_ASSERT_TRUE(names_number(msg, 5));
  free(msg);
  ERR_MESSAGE(&c, "CYCLE", &msg,
              "{\"cmd\":\"batch\",\"world\":\"bt\",\"ops\":["
              "{\"cmd\":\"transform.get\",\"entity\":%llu},"
              "{\"cmd\":\"transform.unlink\",\"entity\":%llu,\"keep\":\"world\"},"
              "{\"cmd\":\"transform.link\",\"entity\":%llu,\"parent\":%llu},"
              "{\"cmd\":\"transform.link\",\"entity\":%llu,\"parent\":%llu}"
              "]}",
              a, created, created, a, a, created);
  CU_ASSERT_TRUE(names_number(msg, 3));
  free(msg);
  ERR_MESSAGE(&c, "ALREADY_EXISTS", &msg,
              "{\"cmd\":\"batch\",\"world\":\"bt\",\"ops\":["
              "{\"cmd\":\"transform.create\",\"entity\":%llu},"
              "{\"cmd\":\"transform.create\",\"entity\":%llu}]}",
              k, k);
  CU_ASSERT_TRUE(names_number(msg, 1));
  free(msg);
  ERR_MESSAGE(&c, "BAD_REQUEST", &msg,
              "{\"cmd\":\"batch\",\"world\":\"bt\",\"ops\":["
              "{\"cmd\":\"transform.create\",\"entity\":%llu},"
              "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"t\":[1e39,0,0]}]}",
              k, a);
  CU_ASSERT_TRUE(names_number(msg, 1));
  free(msg);
  /* Other commands in ops are BAD_REQUEST. */
  static const char *const others[] = {
      "{\"cmd\":\"ping\"}",
      "{\"cmd\":\"hello\"}",
      "{\"cmd\":\"world.create\",\"world\":\"bt_inner\"}",
      "{\"cmd\":\"world.destroy\",\"world\":\"bt\"}",
      "{\"cmd\":\"world.list\"}",
      "{\"cmd\":\"entity.create\"}",
      "{\"cmd\":\"entity.destroy\",\"entity\":1}",
      "{\"cmd\":\"batch\",\"ops\":[]}",
      "{\"cmd\":\"subscribe\"}",
      "{\"cmd\":\"unsubscribe\",\"sub\":1}",
      "{\"cmd\":\"info\"}",
      "{\"cmd\":\"save\"}",
      "{\"cmd\":\"nope\"}",
      "{\"id\":1}",
      "{\"cmd\":7}",
      "[]",
      "\"transform.get\"",
  };
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    ERR_MESSAGE(&c, "BAD_REQUEST", &msg,
                "{\"cmd\":\"batch\",\"world\":\"bt\",\"ops\":["
                "{\"cmd\":\"transform.create\",\"entity\":%llu},"
                "{\"cmd\":\"transform.rename\",\"entity\":%llu,\"name\":\"r\"},%s]}",
                k, a, others[i]);
    CU_ASSERT_TRUE(names_number(msg, 2));
    free(msg);
  }
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"batch\",\"world\":\"bt\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"batch\",\"world\":\"bt\",\"ops\":{}}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"batch\",\"ops\":[]}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"batch\",\"world\":\"bt_none\",\"ops\":[]}");
  char *s2 = snapshot(&c, "bt", ids, 4);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  CU_ASSERT_EQUAL(listed_transforms(&c, "bt_inner"), -1);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"bt\"}");
  t_client_close(&c);
}

/* ---- info, save, subscriptions -----------------------------------------------------------------
 */

static void test_info_save(void) {
  t_client c, c2;
  if (!CONNECT(&c, dmain.port))
    return;
  cJSON *r = OK(&c, "{\"cmd\":\"info\"}");
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(r, "version");
  CHECK(cJSON_IsString(version) && strcmp(version->valuestring, SCN_VERSION) == 0, r);
  static const char *const fields[] = {"uptime_s",   "worlds",      "entities",
                                       "transforms", "connections", "commands"};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    CHECK(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r, fields[i])) &&
              t_resp_num(r, fields[i]) >= 0,
          r);
  CHECK(t_resp_num(r, "connections") >= 1 && t_resp_num(r, "commands") >= 1, r);
  double commands = t_resp_num(r, "commands"), uptime = t_resp_num(r, "uptime_s");
  double worlds = t_resp_num(r, "worlds"), entities = t_resp_num(r, "entities"),
         transforms = t_resp_num(r, "transforms");
  cJSON_Delete(r);
  /* Every request counts, including this one. */
  r = OK(&c, "{\"cmd\":\"info\"}");
  CU_ASSERT_EQUAL(t_resp_num(r, "commands"), commands + 1);
  CU_ASSERT_TRUE(t_resp_num(r, "uptime_s") >= uptime);
  cJSON_Delete(r);
  ERR(&c, "UNKNOWN_COMMAND", "{\"cmd\":\"nope\"}");
  CU_ASSERT_EQUAL(info_num(&c, "commands"), commands + 3);

  new_world(&c, "inf");
  TF0(&c, "inf");
  TF0(&c, "inf");
  new_entity(&c);
  r = OK(&c, "{\"cmd\":\"info\"}");
  CU_ASSERT_EQUAL(t_resp_num(r, "worlds"), worlds + 1);
  CU_ASSERT_EQUAL(t_resp_num(r, "entities"), entities + 3);
  CU_ASSERT_EQUAL(t_resp_num(r, "transforms"), transforms + 2);
  cJSON_Delete(r);
  r = OK(&c, "{\"cmd\":\"world.list\"}");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "worlds")),
                  (int)worlds + 1);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"inf\"}");
  CU_ASSERT_EQUAL(info_num(&c, "transforms"), transforms);

  if (CONNECT(&c2, dmain.port)) {
    OKD(&c2, "{\"cmd\":\"ping\"}");
    CU_ASSERT_TRUE(info_num(&c, "connections") >= 2);
    t_client_close(&c2);
  }
  /* Without --data there is nothing to save to. */
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"save\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"save\",\"id\":1}");
  t_client_close(&c);
}

static void test_subscribe_commands(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "sb");
  uint64_t e = TF0(&c, "sb");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"sb_none\"}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"sb\",\"root\":%llu}",
      (unsigned long long)new_entity(&c));
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"sb\",\"hz\":0}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"sb\",\"hz\":\"fast\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"subscribe\"}");
  cJSON *r = OK(&c, "{\"cmd\":\"subscribe\",\"world\":\"sb\",\"root\":%llu,\"hz\":5}",
                (unsigned long long)e);
  uint64_t sub = t_resp_id(r, "sub");
  CHECK(sub != 0, r);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"unsubscribe\",\"sub\":%llu}", (unsigned long long)sub);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%llu}", (unsigned long long)sub);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%llu}", (unsigned long long)sub + 1000);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"unsubscribe\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"unsubscribe\",\"sub\":\"1\"}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"sb\"}");
  t_client_close(&c);
}

/* ---- error codes, ids, atomicity --------------------------------------------------------------
 */

static void test_error_codes(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "ec");
  uint64_t p = TF0(&c, "ec");
  uint64_t ch = TF(&c, "ec", "\"parent\":%llu", (unsigned long long)p);
  ERR(&c, "BAD_JSON", "{");
  ERR(&c, "BAD_JSON", "[1,2]");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.create\"}");
  ERR(&c, "BAD_REQUEST", "{\"world\":\"ec\"}");
  ERR(&c, "UNKNOWN_COMMAND", "{\"cmd\":\"world.rename\",\"world\":\"ec\"}");
  ERR(&c, "UNKNOWN_COMMAND", "{\"cmd\":\"\"}");
  ERR(&c, "UNKNOWN_COMMAND", "{\"cmd\":\"PING\"}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"world.destroy\",\"world\":\"ec_none\"}");
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"world.create\",\"world\":\"ec\"}");
  ERR(&c, "CYCLE", "{\"cmd\":\"transform.link\",\"world\":\"ec\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)p, (unsigned long long)ch);
  ERR(&c, "LIMIT", "{\"cmd\":\"entity.create\",\"count\":100001}");
  /* The error object holds exactly code and message. */
  cJSON *r = t_client_call(&c, "{\"cmd\":\"nope\",\"id\":1}");
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
  CHECK(cJSON_IsObject(e) && cJSON_GetArraySize(e) == 2 && cJSON_GetArraySize(r) == 3, r);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"ec\"}");
  t_client_close(&c);
}

static void test_id_echo(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  static const char *const ids[] = {
      "42",
      "-3",
      "1.5",
      "0",
      "1e300",
      "123456789012",
      "\"abc\"",
      "\"\"",
      "\"a\\\"b\\\\c\\u00e9\\n\\t/\"",
      "\"\xe2\x82\xac\"",
      "{\"a\":[1,{\"b\":null}],\"c\":\"d\"}",
      "[1,\"x\",null,true,[]]",
      "true",
      "false",
      "null",
      "{}",
      "[]",
      "-0.25",
      "123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890",
      "0.000000000000000000000000000000000000000000000000000000000000000000000000001"};
  static const char *const reqs[] = {
      "{\"cmd\":\"ping\",\"id\":%s}",
      "{\"id\":%s,\"cmd\":\"ping\"}",
      "{\"cmd\":\"nope\",\"id\":%s}",
      "{\"cmd\":\"transform.get\",\"world\":\"none\",\"entity\":1,\"id\":%s}",
      "{\"cmd\":\"world.create\",\"world\":\"\",\"id\":%s}",
      "{\"cmd\":5,\"id\":%s}",
      "{\"cmd\":\"hello\",\"id\":%s}",
  };
  for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
    cJSON *want = cJSON_Parse(ids[i]);
    CU_ASSERT_PTR_NOT_NULL(want);
    for (size_t k = 0; k < sizeof reqs / sizeof *reqs; k++) {
      char line[512];
      snprintf(line, sizeof line, reqs[k], ids[i]);
      cJSON *r = t_client_call(&c, "%s", line);
      const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");
      bool same = id && want && cJSON_Compare(id, want, true);
      CU_ASSERT_TRUE(same);
      if (!same) {
        fprintf(stderr, "  request %s\n", line);
        t_report("response", r);
      }
      CU_ASSERT_EQUAL(t_resp_ok(r), k == 0 || k == 1 || k == 6);
      cJSON_Delete(r);
    }
    cJSON_Delete(want);
  }
  /* Without an id, no "id" key, in successes and failures alike. */
  static const char *const no_id[] = {"{\"cmd\":\"ping\"}",          "{\"cmd\":\"nope\"}",
                                      "{\"cmd\":\"world.create\"}",  "{\"cmd\":\"info\"}",
                                      "{\"cmd\":\"ping\",\"ID\":1}", "{\"id\":1"};
  for (size_t i = 0; i < sizeof no_id / sizeof *no_id; i++) {
    cJSON *r = t_client_call(&c, "%s", no_id[i]);
    CHECK(r && cJSON_GetObjectItemCaseSensitive(r, "ok") && !t_resp_has(r, "id"), r);
    cJSON_Delete(r);
  }
  t_client_close(&c);
}

static void test_failed_changes_nothing(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "fc");
  new_world(&c, "fc2");
  unsigned long long p = TF(&c, "fc", "\"t\":[1,2,3],\"r\":" R90Z ",\"s\":[1,2,3],\"name\":\"p\"");
  unsigned long long ch = TF(&c, "fc", "\"parent\":%llu,\"name\":\"c\",\"t\":[0,1,0]", p);
  unsigned long long d = TF(&c, "fc", "\"name\":\"d\"");
  unsigned long long e = TF(&c, "fc", "\"name\":\"c\"");
  unsigned long long n = new_entity(&c);
  CU_ASSERT_EQUAL(TF(&c, "fc2", "\"entity\":%llu", p), p);
  uint64_t ids[] = {p, ch, d, e, n};
  char *s1 = snapshot(&c, "fc", ids, 5);
  char *t1 = snapshot(&c, "fc2", ids, 5);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"transform.create\",\"world\":\"fc\",\"entity\":%llu}", ch);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"transform.create\",\"world\":\"fc\",\"name\":\"d\"}");
  ERR(&c, "ALREADY_EXISTS",
      "{\"cmd\":\"transform.create\",\"world\":\"fc\",\"entity\":%llu,\"name\":\"d\"}", n);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"fc\",\"parent\":%llu}", n);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.create\",\"world\":\"fc\",\"t\":[1e39,0,0]}");
  ERR(&c, "CYCLE", "{\"cmd\":\"transform.link\",\"world\":\"fc\",\"entity\":%llu,\"parent\":%llu}",
      p, ch);
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.link\",\"world\":\"fc\",\"entity\":%llu,\"parent\":%llu}", ch, n);
  ERR(&c, "ALREADY_EXISTS",
      "{\"cmd\":\"transform.rename\",\"world\":\"fc\",\"entity\":%llu,\"name\":\"d\"}", e);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"transform.unlink\",\"world\":\"fc\",\"entity\":%llu}", ch);
  ERR(&c, "ALREADY_EXISTS",
      "{\"cmd\":\"transform.unlink\",\"world\":\"fc\",\"entity\":%llu,\"keep\":\"world\"}", ch);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"transform.destroy\",\"world\":\"fc\",\"entity\":%llu}", p);
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", p);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_local\",\"world\":\"fc\",\"entity\":%llu,\"matrix\":[1,2,3]}", ch);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_world\",\"world\":\"fc\",\"entity\":%llu,\"r\":[0,0,0,0]}", ch);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_world\",\"world\":\"fc\",\"entity\":%llu,\"t\":[1,2,3],"
      "\"s\":[1,1,1e999]}",
      ch);
  ERR(&c, "LIMIT", "{\"cmd\":\"entity.create\",\"count\":100001}");
  ERR(&c, "ALREADY_EXISTS", "{\"cmd\":\"world.create\",\"world\":\"fc\"}");
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"world.destroy\",\"world\":\"fc_none\"}");
  ERR(&c, "CYCLE",
      "{\"cmd\":\"batch\",\"world\":\"fc\",\"ops\":["
      "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"t\":[5,5,5]},"
      "{\"cmd\":\"transform.destroy\",\"entity\":%llu},"
      "{\"cmd\":\"transform.create\",\"name\":\"new\"},"
      "{\"cmd\":\"transform.create\",\"entity\":%llu},"
      "{\"cmd\":\"transform.rename\",\"entity\":%llu,\"name\":null},"
      "{\"cmd\":\"transform.link\",\"entity\":%llu,\"parent\":%llu}]}",
      p, d, n, e, p, ch);
  ERR(&c, "UNKNOWN_COMMAND", "{\"cmd\":\"world.clear\",\"world\":\"fc\"}");
  ERR(&c, "BAD_JSON", "{\"cmd\":\"world.destroy\",\"world\":\"fc\"");
  ERR(&c, "BAD_JSON", "{\"cmd\":\"world.destroy\",\"world\":\"fc\"} x");
  char *s2 = snapshot(&c, "fc", ids, 5);
  char *t2 = snapshot(&c, "fc2", ids, 5);
  CHECK_SAME(s1, s2);
  CHECK_SAME(t1, t2);
  free(s1);
  free(s2);
  free(t1);
  free(t2);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"fc\"}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"fc2\"}");
  t_client_close(&c);
}

/* ---- pipelining and concurrency ------------------------------------------------------------- */

#define PIPELINED 6000

static void test_pipelining(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "pl");
  unsigned long long e = TF0(&c, "pl");
  text all = {0};
  for (int i = 0; i < PIPELINED; i++) {
    switch (i % 4) {
    case 0:
      text_addf(&all, "{\"cmd\":\"ping\",\"id\":%d}\n", i);
      break;
    case 1:
      text_addf(&all,
                "{\"cmd\":\"transform.set_local\",\"world\":\"pl\",\"entity\":%llu,\"t\":[%d,0,0],"
                "\"id\":%d}\n",
                e, i, i);
      break;
    case 2:
      text_addf(&all, "{\"id\":%d,\"cmd\":\"transform.get\",\"world\":\"pl\",\"entity\":%llu}\n", i,
                e);
      break;
    default:
      text_addf(&all, "{\"cmd\":\"nope\",\"id\":%d}\n", i);
      break;
    }
  }
  long t0 = t_now_ms();
  CU_ASSERT_EQUAL(t_client_send_raw(&c, all.s, all.len), 0);
  text_free(&all);
  int got = 0, wrong = 0;
  for (int i = 0; i < PIPELINED; i++) {
    cJSON *r = t_client_recv_json(&c, WAIT_MS);
    if (!r)
      break;
    got++;
    bool good = t_resp_num(r, "id") == i && t_resp_ok(r) == (i % 4 != 3);
    if (i % 4 == 3)
      good = good && strcmp(t_resp_code(r), "UNKNOWN_COMMAND") == 0;
    float m[16];
    if (i % 4 == 2)
      good = good && mat_of(r, "world", m) && m[12] == (float)(i - 1);
    if (!good && wrong++ < 3)
      t_report("pipelined response out of order or wrong", r);
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(got, PIPELINED);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_TRUE(t_now_ms() - t0 < 10000);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"pl\"}");
  t_client_close(&c);
}

static void test_two_connections(void) {
  t_client a, b;
  if (!CONNECT(&a, dmain.port))
    return;
  if (!CONNECT(&b, dmain.port)) {
    t_client_close(&a);
    return;
  }
  new_world(&a, "two");
  unsigned long long e = TF0(&b, "two");
  CU_ASSERT_EQUAL(parent_of(&a, "two", e), 0);
  unsigned long long p = TF(&a, "two", "\"t\":[0,0,7]");
  OKD(&b, "{\"cmd\":\"transform.link\",\"world\":\"two\",\"entity\":%llu,\"parent\":%llu}", e, p);
  float m[16], want[16];
  mat_trs(0, 0, 7, 1, want);
  CU_ASSERT_TRUE(matrix(&a, "two", e, "world", m));
  CU_ASSERT_EQUAL(memcmp(m, want, sizeof m), 0);
  /* Alternating writers, each read right after the other's write. */
  for (int i = 0; i < 50; i++) {
    t_client *w = i % 2 ? &a : &b, *rd = i % 2 ? &b : &a;
    OKD(w, "{\"cmd\":\"transform.set_local\",\"world\":\"two\",\"entity\":%llu,\"t\":[%d,0,0]}", p,
        i);
    CU_ASSERT_TRUE(matrix(rd, "two", e, "world", m));
    mat_trs((float)i, 0, 0, 1, want);
    if (memcmp(m, want, sizeof m) != 0) {
      CU_FAIL("a write on one connection is not seen on the other");
      break;
    }
  }
  OKD(&b, "{\"cmd\":\"transform.destroy\",\"world\":\"two\",\"entity\":%llu,\"recursive\":true}",
      p);
  ERR(&a, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"two\",\"entity\":%llu}", e);
  OKD(&b, "{\"cmd\":\"world.destroy\",\"world\":\"two\"}");
  ERR(&a, "NOT_FOUND", "{\"cmd\":\"world.destroy\",\"world\":\"two\"}");
  t_client_close(&a);
  t_client_close(&b);
}

/* ---- framing ----------------------------------------------------------------------------------
 */

/* {"cmd":"ping","id":N,"pad":"xxx"} of exactly total bytes (no line end). */
static char *padded_ping(int id, size_t total) {
  char head[64];
  int n = snprintf(head, sizeof head, "{\"cmd\":\"ping\",\"id\":%d,\"pad\":\"", id);
  char *s = malloc(total + 1);
  if (!s)
    abort();
  memcpy(s, head, (size_t)n);
  memset(s + n, 'x', total - (size_t)n - 2);
  memcpy(s + total - 2, "\"}", 2);
  s[total] = '\0';
  return s;
}

/* The next response must be ok with this id. */
static void expect_ok_id_at(int at, t_client *c, int id) {
  cJSON *r = t_client_recv_json(c, WAIT_MS);
  bool good = t_resp_ok(r) && t_resp_num(r, "id") == id;
  if (!t_check_at(__FILE__, at, good, "ok with the id", r))
    fprintf(stderr, "  (expected ok with id %d)\n", id);
  cJSON_Delete(r);
}
#define EXPECT_OK_ID(c, id) expect_ok_id_at(__LINE__, (c), (id))

/* The next response must be a LIMIT error without an id. */
static void expect_limit_at(int at, t_client *c) {
  cJSON *r = t_client_recv_json(c, WAIT_MS);
  bool good = r && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ok")) &&
              strcmp(t_resp_code(r), "LIMIT") == 0 && !t_resp_has(r, "id");
  t_check_at(__FILE__, at, good, "LIMIT without an id", r);
  cJSON_Delete(r);
}
#define EXPECT_LIMIT(c) expect_limit_at(__LINE__, (c))

static void send_str(t_client *c, const char *s) {
  CU_ASSERT_EQUAL(t_client_send_raw(c, s, strlen(s)), 0);
}

static void test_line_limit(void) {
  t_daemon d;
  const char *args[] = {"--max-line", "1024", NULL};
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    return;
  char *at = padded_ping(1, 1024), *over = padded_ping(3, 1025);
  /* Exactly the limit passes, with \n or \r\n (the line end does not count). */
  send_str(&c, at);
  send_str(&c, "\n");
  EXPECT_OK_ID(&c, 1);
  at[19] = '2'; /* id 1 -> 2 */
  send_str(&c, at);
  send_str(&c, "\r\n");
  EXPECT_OK_ID(&c, 2);
  /* One byte more is LIMIT, without an id; the next line on the connection works. */
  send_str(&c, over);
  send_str(&c, "\n{\"cmd\":\"ping\",\"id\":3}\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 3);
  send_str(&c, over);
  send_str(&c, "\r\n{\"cmd\":\"ping\",\"id\":4}\r\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 4);
  /* The same across separate reads. */
  at[19] = '5';
  CU_ASSERT_EQUAL(t_client_send_raw(&c, at, 500), 0);
  t_sleep_ms(20);
  CU_ASSERT_EQUAL(t_client_send_raw(&c, at + 500, 524), 0);
  t_sleep_ms(20);
  send_str(&c, "\r");
  t_sleep_ms(20);
  send_str(&c, "\n");
  EXPECT_OK_ID(&c, 5);
  CU_ASSERT_EQUAL(t_client_send_raw(&c, over, 600), 0);
  t_sleep_ms(20);
  CU_ASSERT_EQUAL(t_client_send_raw(&c, over + 600, 425), 0);
  t_sleep_ms(20);
  send_str(&c, "\r");
  t_sleep_ms(20);
  send_str(&c, "\n{\"cmd\":\"ping\",\"id\":6}\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 6);
  QUIET(&c, 100);

  /* A huge line over many writes: one LIMIT, then the connection goes on. */
  char chunk[10000];
  memset(chunk, 'y', sizeof chunk);
  send_str(&c, "{\"cmd\":\"ping\",\"id\":7}\n{\"cmd\":\"ping\",\"id\":8,\"pad\":\"");
  for (int i = 0; i < 30; i++) {
    CU_ASSERT_EQUAL(t_client_send_raw(&c, chunk, sizeof chunk), 0);
    t_sleep_ms(1);
  }
  send_str(&c, "\"}\n{\"cmd\":\"ping\",\"id\":9}\n");
  EXPECT_OK_ID(&c, 7);
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 9);
  QUIET(&c, 150);
  /* Garbage far past the limit (no JSON at all) is the same. */
  for (int i = 0; i < 10; i++)
    CU_ASSERT_EQUAL(t_client_send_raw(&c, chunk, sizeof chunk), 0);
  send_str(&c, "\n\n{\"cmd\":\"ping\",\"id\":10}\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 10);
  QUIET(&c, 100);
  free(at);
  free(over);
  t_client_close(&c);
  STOP_OK(&d, 10000);
}

static void test_default_line_limit(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  /* The default limit is 1 MiB. */
  char *at = padded_ping(1, 1048576), *over = padded_ping(2, 1048577);
  send_str(&c, at);
  send_str(&c, "\n");
  EXPECT_OK_ID(&c, 1);
  send_str(&c, over);
  send_str(&c, "\n{\"cmd\":\"ping\",\"id\":3}\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 3);
  free(at);
  free(over);
  t_client_close(&c);
}

static void test_blank_lines_crlf(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  send_str(&c, "\n\n   \n\t\n\r\n \t \r\n{\"cmd\":\"ping\",\"id\":1}\r\n\n\n");
  EXPECT_OK_ID(&c, 1);
  QUIET(&c, 150);
  send_str(&c, "{\"cmd\":\"ping\",\"id\":2}  \r\n");
  EXPECT_OK_ID(&c, 2);
  send_str(&c, "  {\"cmd\":\"ping\",\"id\":3}\n\r\n{\"cmd\":\"ping\",\"id\":4}\r\n");
  EXPECT_OK_ID(&c, 3);
  EXPECT_OK_ID(&c, 4);
  /* A CRLF split between writes. */
  send_str(&c, "{\"cmd\":\"ping\",\"id\":5}\r");
  t_sleep_ms(20);
  send_str(&c, "\n");
  EXPECT_OK_ID(&c, 5);
  QUIET(&c, 100);
  t_client_close(&c);
}

/* ---- malformed lines ----------------------------------------------------------------------------
 */

typedef struct mcase {
  char *line;
  size_t len;
  const char *code; /* expected code; "A|B" accepts either */
  int id;           /* the id the response must echo, -1 for none */
} mcase;

typedef struct mlist {
  mcase *v;
  int n, cap;
} mlist;

static void m_add(mlist *l, const char *code, int id, const void *data, size_t len) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 256;
    mcase *p = realloc(l->v, sizeof *p * (size_t)l->cap);
    if (!p)
      abort();
    l->v = p;
  }
  mcase *m = &l->v[l->n++];
  m->line = malloc(len + 1);
  if (!m->line)
    abort();
  memcpy(m->line, data, len);
  m->line[len] = '\0';
  m->len = len;
  m->code = code;
  m->id = id;
}

static void m_str(mlist *l, const char *code, const char *s) { m_add(l, code, -1, s, strlen(s)); }

/* One request per bad value of key: {"cmd":cmd,"id":N, base fields but key, "key":bad}. */
typedef struct kv {
  const char *key;
  char val[64];
} kv;

static bool is_spec_key(const char *k) {
  return !strcmp(k, "matrix") || !strcmp(k, "t") || !strcmp(k, "r") || !strcmp(k, "s");
}

static void m_fields(mlist *l, const char *cmd, const kv *base, int nbase, const char *key,
                     const char *const *bad, int nbad) {
  for (int i = 0; i < nbad; i++) {
    text b = {0};
    int id = 100000 + l->n;
    text_addf(&b, "{\"cmd\":\"%s\",\"id\":%d", cmd, id);
    for (int k = 0; k < nbase; k++) {
      if (!strcmp(base[k].key, key) || (is_spec_key(key) && is_spec_key(base[k].key)))
        continue;
      text_addf(&b, ",\"%s\":%s", base[k].key, base[k].val);
    }
    text_addf(&b, ",\"%s\":%s}", key, bad[i]);
    m_add(l, "BAD_REQUEST", id, b.s, b.len);
    text_free(&b);
  }
}

#define NB(a) ((int)(sizeof(a) / sizeof *(a)))

static void build_malformed(mlist *l, uint64_t a, uint64_t b, uint64_t n) {
  static char w65[80], nm65[80];
  snprintf(w65, sizeof w65, "\"%s\"",
           "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww");
  snprintf(nm65, sizeof nm65, "\"%s\"",
           "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn");
  const char *W[] = {"1",
                     "true",
                     "null",
                     "[]",
                     "{}",
                     "\"\"",
                     "\"a b\"",
                     "\"a/b\"",
                     w65,
                     "\"w\\u00f6rld\"",
                     "\"w\xc3\xb6rld\"",
                     "\"\\u0000\"",
                     "\"tab\\t\"",
                     "[\"mal\"]"};
  const char *E[] = {
      "\"1\"",
      "true",
      "null",
      "[]",
      "{}",
      "0",
      "-1",
      "1.5",
      "9007199254740992",
      "1e999",
      "-0",
      "1e300",
      "\"abc\"",
      "-1e999",
      "[1]",
      "0.999999",
      "1000000000000000000000000000000000000000000000000000000000000000000000000000001",
      "9007199254740991.5",
      "1e-400"};
  const char *P[] = {"\"1\"", "true", "[]",    "{}",      "0",  "-1", "1.5", "9007199254740992",
                     "1e999", "-0",   "1e300", "\"abc\"", "[1]"};
  const char *NM[] = {"1",           "true",      "[]", "{}",          "\"\"",  "\"a/b\"",
                      "\"\\u0001\"", "\"a\\nb\"", nm65, "\"\\u007f\"", "\"/\"", "[\"a\"]"};
  const char *M[] = {"1",
                     "\"x\"",
                     "[]",
                     "{}",
                     "null",
                     "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0]",
                     "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1,0]",
                     "[1e39,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]",
                     "[1,0,0,0,0,1e999,0,0,0,0,1,0,0,0,0,1]",
                     "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,-1e999]",
                     "[1,0,0,0,0,1,0,0,0,0,1,0,\"1\",0,0,1]",
                     "[1,0,0,0,0,1,0,0,0,0,1,0,null,0,0,1]",
                     "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,-1e39,1]",
                     "[[1],0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]",
                     "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,true]"};
  const char *T[] = {"[1,2]",      "[1,2,3,4]",   "\"x\"",        "1",  "null", "[1,\"2\",3]",
                     "[1e39,0,0]", "[0,1e999,0]", "[0,0,-1e999]", "{}", "[]",   "[true,0,0]",
                     "[1,2,null]"};
  const char *R[] = {"[0,0,0,0]",    "[-0,0,0,-0]", "[0,0,1]",     "[0,0,0,\"1\"]", "1",
                     "[1e39,0,0,1]", "null",        "[0,0,0,1,0]", "[0,0,0,1e999]", "{}"};
  const char *S[] = {"\"2\"", "[1,2]",  "[1,2,3,4]", "1e39",        "[1,1,1e999]", "true",
                     "null",  "-1e999", "{}",        "[1,\"1\",1]", "[]",          "-3.5e38"};
  const char *K[] = {"1", "true", "null", "\"\"", "\"both\"", "\"LOCAL\"", "[]", "\"world \""};
  const char *REC[] = {"1", "\"true\"", "null", "0", "[]", "\"false\""};
  const char *CNT[] = {"\"1\"", "true", "null", "0", "-1", "1.5", "[]", "{}", "-1e999", "0.5"};
  const char *PATH[] = {"1", "null", "[]", "true", "{}", "\"\"", "\"a//b\""};
  const char *OPS[] = {"{}",
                       "\"x\"",
                       "1",
                       "null",
                       "true",
                       "[1]",
                       "[null]",
                       "[[]]",
                       "[{\"cmd\":\"ping\"}]",
                       "[{\"cmd\":\"world.create\",\"world\":\"q\"}]",
                       "[{\"cmd\":\"batch\",\"ops\":[]}]",
                       "[{\"cmd\":5}]",
                       "[{}]",
                       "[{\"cmd\":\"nope\"}]",
                       "[{\"cmd\":\"entity.create\"}]",
                       "[{\"cmd\":\"transform.get\"}]",
                       "[{\"cmd\":\"transform.create\",\"world\":\"other\"}]"};
  const char *SUB[] = {"\"x\"", "0", "-1", "1.5", "null", "[]", "9007199254740992", "true", "{}"};
  const char *HZ[] = {"0", "-1", "\"5\"", "true", "[]", "1e999", "null", "{}"};

  kv base_w[] = {{"world", "\"mal_new\""}};
  m_fields(l, "world.create", base_w, 1, "world", W, NB(W));
  m_fields(l, "world.destroy", base_w, 1, "world", W, NB(W));
  m_fields(l, "entity.create", NULL, 0, "count", CNT, NB(CNT));
  kv base_ed[] = {{"entity", ""}};
  snprintf(base_ed[0].val, sizeof base_ed[0].val, "%llu", (unsigned long long)n);
  m_fields(l, "entity.destroy", base_ed, 1, "entity", E, NB(E));

  kv base_create[] = {{"world", "\"mal\""}, {"entity", ""}};
  snprintf(base_create[1].val, sizeof base_create[1].val, "%llu", (unsigned long long)n);
  static const char *const create_keys[] = {"world",  "entity", "parent", "name",
                                            "matrix", "t",      "r",      "s"};
  const char *const *create_vals[] = {W, E, P, NM, M, T, R, S};
  int create_counts[] = {NB(W), NB(E), NB(P), NB(NM), NB(M), NB(T), NB(R), NB(S)};
  for (int i = 0; i < 8; i++)
    m_fields(l, "transform.create", base_create, 2, create_keys[i], create_vals[i],
             create_counts[i]);

  kv base_a[] = {{"world", "\"mal\""}, {"entity", ""}, {"t", "[1,2,3]"}};
  snprintf(base_a[1].val, sizeof base_a[1].val, "%llu", (unsigned long long)a);
  static const char *const set_cmds[] = {"transform.set_local", "transform.set_world"};
  for (int k = 0; k < 2; k++) {
    m_fields(l, set_cmds[k], base_a, 3, "world", W, NB(W));
    m_fields(l, set_cmds[k], base_a, 3, "entity", E, NB(E));
    m_fields(l, set_cmds[k], base_a, 3, "matrix", M, NB(M));
    m_fields(l, set_cmds[k], base_a, 3, "t", T, NB(T));
    m_fields(l, set_cmds[k], base_a, 3, "r", R, NB(R));
    m_fields(l, set_cmds[k], base_a, 3, "s", S, NB(S));
  }
  static const char *const read_cmds[] = {"transform.get", "transform.children",
                                          "transform.unlink"};
  for (int k = 0; k < 3; k++) {
    m_fields(l, read_cmds[k], base_a, 2, "world", W, NB(W));
    m_fields(l, read_cmds[k], base_a, 2, "entity", E, NB(E));
  }
  m_fields(l, "transform.unlink", base_a, 2, "keep", K, NB(K));

  kv base_b[] = {{"world", "\"mal\""}, {"entity", ""}, {"parent", ""}, {"to", ""}};
  snprintf(base_b[1].val, sizeof base_b[1].val, "%llu", (unsigned long long)b);
  snprintf(base_b[2].val, sizeof base_b[2].val, "%llu", (unsigned long long)a);
  snprintf(base_b[3].val, sizeof base_b[3].val, "%llu", (unsigned long long)a);
  kv link_base[] = {base_b[0], base_b[1], base_b[2]};
  m_fields(l, "transform.link", link_base, 3, "world", W, NB(W));
  m_fields(l, "transform.link", link_base, 3, "entity", E, NB(E));
  m_fields(l, "transform.link", link_base, 3, "parent", P, NB(P));
  m_fields(l, "transform.link", link_base, 3, "keep", K, NB(K));
  kv destroy_base[] = {base_b[0], base_b[1]};
  m_fields(l, "transform.destroy", destroy_base, 2, "world", W, NB(W));
  m_fields(l, "transform.destroy", destroy_base, 2, "entity", E, NB(E));
  m_fields(l, "transform.destroy", destroy_base, 2, "recursive", REC, NB(REC));
  kv rel_base[] = {base_b[0], base_b[1], base_b[3]};
  m_fields(l, "transform.relative", rel_base, 3, "world", W, NB(W));
  m_fields(l, "transform.relative", rel_base, 3, "entity", E, NB(E));
  m_fields(l, "transform.relative", rel_base, 3, "to", E, NB(E));

  kv rename_base[] = {{"world", "\"mal\""}, {"entity", ""}, {"name", "\"a\""}};
  snprintf(rename_base[1].val, sizeof rename_base[1].val, "%llu", (unsigned long long)a);
  m_fields(l, "transform.rename", rename_base, 3, "world", W, NB(W));
  m_fields(l, "transform.rename", rename_base, 3, "entity", E, NB(E));
  m_fields(l, "transform.rename", rename_base, 3, "name", NM, NB(NM));
  kv find_base[] = {{"world", "\"mal\""}, {"path", "\"a/b\""}};
  m_fields(l, "transform.find", find_base, 2, "world", W, NB(W));
  m_fields(l, "transform.find", find_base, 2, "path", PATH, NB(PATH));
  kv batch_base[] = {{"world", "\"mal\""}, {"ops", "[]"}};
  m_fields(l, "batch", batch_base, 2, "world", W, NB(W));
  m_fields(l, "batch", batch_base, 2, "ops", OPS, NB(OPS));
  kv sub_base[] = {{"world", "\"mal\""}};
  m_fields(l, "subscribe", sub_base, 1, "world", W, NB(W));
  m_fields(l, "subscribe", sub_base, 1, "root", P, NB(P));
  m_fields(l, "subscribe", sub_base, 1, "hz", HZ, NB(HZ));
  m_fields(l, "unsubscribe", NULL, 0, "sub", SUB, NB(SUB));

  /* Each required field missing in turn, for every command of the table. */
  for (unsigned i = 0; i < scn_command_count; i++) {
    char req[256];
    scn_fields_text(scn_commands[i].required, req, sizeof req);
    for (const char *p = req; *p;) {
      const char *comma = strchr(p, ',');
      size_t len = comma ? (size_t)(comma - p) : strlen(p);
      text line = {0};
      int id = 100000 + l->n;
      text_addf(&line, "{\"cmd\":\"%s\",\"id\":%d", scn_commands[i].name, id);
      for (const char *q = req; *q;) {
        const char *qc = strchr(q, ',');
        size_t qlen = qc ? (size_t)(qc - q) : strlen(q);
        if (q != p) {
          const char *v = "1";
          if (qlen == 5 && !strncmp(q, "world", 5))
            v = "\"mal\"";
          else if (qlen == 4 && !strncmp(q, "path", 4))
            v = "\"a\"";
          else if (qlen == 4 && !strncmp(q, "name", 4))
            v = "\"zz\"";
          else if (qlen == 3 && !strncmp(q, "ops", 3))
            v = "[]";
          text_addf(&line, ",\"%.*s\":%s", (int)qlen, q, v);
        }
        q += qlen + (qc ? 1 : 0);
      }
      text_addf(&line, "}");
      m_add(l, "BAD_REQUEST", id, line.s, line.len);
      text_free(&line);
      p += len + (comma ? 1 : 0);
    }
  }

  /* cmd missing, of the wrong type, or unknown. */
  static const char *const bad_cmd[] = {"5", "null", "true", "[]", "{}", "[\"ping\"]", "1.5"};
  for (int i = 0; i < NB(bad_cmd); i++) {
    char line[128];
    int id = 100000 + l->n;
    int len = snprintf(line, sizeof line, "{\"cmd\":%s,\"id\":%d}", bad_cmd[i], id);
    m_add(l, "BAD_REQUEST", id, line, (size_t)len);
  }
  {
    char line[64];
    int id = 100000 + l->n;
    int len = snprintf(line, sizeof line, "{\"id\":%d}", id);
    m_add(l, "BAD_REQUEST", id, line, (size_t)len);
    m_str(l, "BAD_REQUEST", "{}");
    m_str(l, "BAD_REQUEST", "{\"world\":\"mal\",\"entity\":1}");
  }
  static const char *const unknown[] = {
      "\"\"",        "\"PING\"",      "\"ping \"",          "\" ping\"",
      "\"nope\"",    "\"transform\"", "\"world.create.x\"", "\"transform.\"",
      "\"\\u00e9\"", "\"Ping\"",      "\"world_create\""};
  for (int i = 0; i < NB(unknown); i++) {
    char line[128];
    int id = 100000 + l->n;
    int len =
        snprintf(line, sizeof line, "{\"id\":%d,\"cmd\":%s,\"world\":\"mal\"}", id, unknown[i]);
    m_add(l, "UNKNOWN_COMMAND", id, line, (size_t)len);
  }

  /* Not JSON, or not one JSON object. */
  static const char *const not_json[] = {
      "{",
      "}",
      "{\"cmd\":\"ping\"",
      "{\"cmd\":\"ping\",}",
      "{cmd:\"ping\"}",
      "{'cmd':'ping'}",
      "{\"cmd\":\"ping\"}}",
      "{\"cmd\" \"ping\"}",
      "{\"cmd\":\"ping\"]",
      "[{\"cmd\":\"ping\"}]",
      "\"ping\"",
      "ping",
      "123",
      "-1.5",
      "null",
      "true",
      "false",
      "[]",
      "\"\"",
      "1e999",
      "{\"cmd\":NaN}",
      "{\"cmd\":\"ping\",\"id\":NaN}",
      "{\"cmd\":\"ping\",\"id\":nan}",
      "{\"cmd\":\"ping\",\"id\":Infinity}",
      "{\"cmd\":\"ping\",\"id\":-Infinity}",
      "{\"cmd\":\"ping\",\"id\":-}",
      "{\"cmd\":\"ping\",\"id\":1e}",
      "{\"cmd\":\"ping\",\"id\":0x10}",
      "{\"cmd\":\"ping\",\"id\":+1}",
      "{\"cmd\":\"ping\",\"id\":.5}",
      "{\"cmd\":\"ping\",\"id\":\"\\x\"}",
      "{\"cmd\":\"ping\",\"id\":\"\\u12\"}",
      "{\"cmd\":\"ping\",\"id\":\"\\ud800\"}",
      "{\"cmd\":\"ping\",\"id\":\"\\udc00\"}",
      "{\"cmd\":\"ping\",\"id\":\"abc}",
      "{\"cmd\":\"ping\",\"id\":tru}",
      "{\"cmd\":\"ping\",\"id\":True}",
      "{\"cmd\":\"ping\",\"id\":[1,2}",
      "{\"cmd\":\"ping\",\"id\":[1,,2]}",
      "{\"cmd\":\"ping\" \"id\":1}",
      "{\"cmd\":\"ping\",\"id\":1,}",
      "{\"cmd\":\"ping\"}{\"cmd\":\"ping\"}",
      "{\"cmd\":\"ping\"} x",
      "{\"cmd\":\"ping\"},",
      "{\"cmd\":\"pi\tng\"}",
      "{\"cmd\":\"pi\x01ng\"}",
      "{\"cmd\":\"ping\",\"id\":\"\x1f\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xff\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xc0\xaf\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xed\xa0\x80\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xe2\x82\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xf4\x90\x80\x80\"}",
      "{\"cmd\":\"ping\",\"id\":\"\x80\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xf8\x88\x80\x80\x80\"}",
      "{\"cmd\":\"ping\",\"id\":\"ab\xc3\"}",
      "{\"cmd\":\"ping\",\"\xff\":1}",
      "{\"cmd\":\"ping\"}\xff",
      "{\"cmd\":\"pin\xffg\"}",
      "{\"cmd\":\"world.create\",\"world\":\"\xfe\"}",
      "\xff\xfe",
      "{\"cmd\":\"ping\",\"id\":\"\xe0\x80\xaf\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xf0\x82\x82\xac\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xef\xbf\"}",
      /* numbers strtod reads but JSON forbids */
      "{\"cmd\":\"ping\",\"id\":01}",
      "{\"cmd\":\"ping\",\"id\":1.}",
      "{\"cmd\":\"ping\",\"id\":-.5}",
      "{\"cmd\":\"ping\",\"id\":[1.,02]}",
      "{\"cmd\":\"entity.destroy\",\"entity\":007}",
      "{\"cmd\":\"transform.set_local\",\"world\":\"mal\",\"entity\":1,\"t\":[1.,2,3]}",
  };
  for (int i = 0; i < NB(not_json); i++)
    m_str(l, "BAD_JSON", not_json[i]);
  /* Raw NUL bytes. */
  m_add(l, "BAD_JSON", -1, "{\"cmd\":\"ping\"}\0", 15);
  m_add(l, "BAD_JSON", -1, "{\"cmd\":\"pi\0ng\"}", 15);
  m_add(l, "BAD_JSON", -1, "\0{\"cmd\":\"ping\"}", 15);
  m_add(l, "BAD_JSON", -1, "\0", 1);
  /* Very deep nesting: unclosed, and closed inside a request. */
  {
    text deep = {0};
    for (int i = 0; i < 100000; i++)
      text_add(&deep, "[", 1);
    m_add(l, "BAD_JSON", -1, deep.s, deep.len);
    deep.len = 0;
    text_addf(&deep, "{\"cmd\":\"ping\",\"id\":");
    for (int i = 0; i < 5000; i++)
      text_add(&deep, "[", 1);
    for (int i = 0; i < 5000; i++)
      text_add(&deep, "]", 1);
    text_addf(&deep, "}");
    m_add(l, "BAD_JSON|LIMIT|BAD_REQUEST", -1, deep.s, deep.len);
    deep.len = 0;
    text_addf(&deep, "{\"cmd\":\"ping\",\"x\":");
    for (int i = 0; i < 5000; i++)
      text_addf(&deep, "{\"a\":");
    text_addf(&deep, "1");
    for (int i = 0; i < 5000; i++)
      text_add(&deep, "}", 1);
    text_addf(&deep, "}");
    m_add(l, "BAD_JSON|LIMIT|BAD_REQUEST", -1, deep.s, deep.len);
    text_free(&deep);
  }
}

static void test_malformed_lines(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "mal");
  uint64_t a = TF(&c, "mal", "\"name\":\"a\",\"t\":[1,2,3]");
  uint64_t b = TF(&c, "mal", "\"name\":\"b\",\"parent\":%llu,\"s\":2", (unsigned long long)a);
  uint64_t n = new_entity(&c);
  uint64_t ids[] = {a, b, n};
  char *s1 = snapshot(&c, "mal", ids, 3);

  mlist l = {0};
  build_malformed(&l, a, b, n);
  CU_ASSERT_TRUE(l.n >= 150);
  text all = {0};
  for (int i = 0; i < l.n; i++) {
    text_add(&all, l.v[i].line, l.v[i].len);
    text_add(&all, "\n", 1);
  }
  CU_ASSERT_EQUAL(t_client_send_raw(&c, all.s, all.len), 0);
  text_free(&all);
  int wrong = 0, got = 0;
  for (int i = 0; i < l.n; i++) {
    cJSON *r = t_client_recv_json(&c, WAIT_MS);
    while (r && t_resp_has(r, "event")) {
      cJSON_Delete(r);
      r = t_client_recv_json(&c, WAIT_MS);
    }
    if (!r) {
      fprintf(stderr, "  no response to malformed line %d: %.200s\n", i, l.v[i].line);
      break;
    }
    got++;
    const char *code = t_resp_code(r);
    bool good = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ok")) && code[0];
    const char *want = l.v[i].code;
    bool code_ok = false;
    for (const char *p = want; *p;) {
      const char *bar = strchr(p, '|');
      size_t len = bar ? (size_t)(bar - p) : strlen(p);
      code_ok |= strlen(code) == len && !strncmp(code, p, len);
      p += len + (bar ? 1 : 0);
    }
    good = good && code_ok;
    if (l.v[i].id >= 0)
      good = good && t_resp_num(r, "id") == l.v[i].id;
    else
      good = good && !t_resp_has(r, "id");
    if (!good) {
      wrong++;
      fprintf(stderr, "  malformed line %d (want %s): %.200s\n", i, want, l.v[i].line);
      t_report("response", r);
    }
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(got, l.n);
  CU_ASSERT_EQUAL(wrong, 0);
  for (int i = 0; i < l.n; i++)
    free(l.v[i].line);
  free(l.v);
  /* Still answering, on this connection and a new one, with nothing changed. */
  QUIET(&c, 50);
  OKD(&c, "{\"cmd\":\"ping\"}");
  t_client c2;
  if (CONNECT(&c2, dmain.port)) {
    OKD(&c2, "{\"cmd\":\"ping\"}");
    t_client_close(&c2);
  }
  char *s2 = snapshot(&c, "mal", ids, 3);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  CU_ASSERT_EQUAL(listed_transforms(&c, "mal_new"), -1);
  CU_ASSERT_EQUAL(listed_transforms(&c, "q"), -1);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"mal\"}");
  t_client_close(&c);
}

/* ---- clients that go away ------------------------------------------------------------------- */

static void test_vanishing_clients(void) {
  t_client c;
  if (!CONNECT(&c, dmain.port))
    return;
  new_world(&c, "van");
  unsigned long long e = TF(&c, "van", "\"t\":[1,2,3]");
  uint64_t ids[] = {e};
  char *s1 = snapshot(&c, "van", ids, 1);

  /* Gone in the middle of a line: the partial request is never run. */
  t_client v;
  if (CONNECT(&v, dmain.port)) {
    send_str(&v, "{\"cmd\":\"ping\",\"id\":1}\n{\"cmd\":\"world.create\",\"world\":\"vanished\"");
    t_client_close(&v);
  }
  /* Gone with many replies pending (never read). */
  if (CONNECT(&v, dmain.port)) {
    text many = {0};
    for (int i = 0; i < 20000; i++)
      text_addf(&many, "{\"cmd\":\"transform.get\",\"world\":\"van\",\"entity\":%llu,\"id\":%d}\n",
                e, i);
    text_addf(&many, "{\"cmd\":\"world.create\",\"world\":\"van");
    CU_ASSERT_EQUAL(t_client_send_raw(&v, many.s, many.len), 0);
    text_free(&many);
    t_client_close(&v);
  }
  /* Gone in the middle of an overlong line. */
  if (CONNECT(&v, dmain.port)) {
    char *big = padded_ping(1, 1200000);
    CU_ASSERT_EQUAL(t_client_send_raw(&v, big, 1100000), 0);
    free(big);
    t_client_close(&v);
  }
  /* Half-closed: what was sent in full is answered, then the daemon closes. */
  if (CONNECT(&v, dmain.port)) {
    send_str(&v,
             "{\"cmd\":\"ping\",\"id\":1}\n{\"cmd\":\"ping\",\"id\":2}\n{\"cmd\":\"world.create\","
             "\"world\":\"half\"");
    CU_ASSERT_EQUAL(shutdown(v.fd, SHUT_WR), 0);
    EXPECT_OK_ID(&v, 1);
    EXPECT_OK_ID(&v, 2);
    CU_ASSERT_TRUE(t_client_closed(&v, 3000));
    t_client_close(&v);
  }
  /* The others are undisturbed. */
  OKD(&c, "{\"cmd\":\"ping\"}");
  CU_ASSERT_EQUAL(t_wait_info(&c, "connections", 1, 5000), 1);
  char *s2 = snapshot(&c, "van", ids, 1);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  CU_ASSERT_EQUAL(listed_transforms(&c, "vanished"), -1);
  CU_ASSERT_EQUAL(listed_transforms(&c, "half"), -1);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"van\"}");
  t_client_close(&c);
}

/* ---- authentication -----------------------------------------------------------------------------
 */

static void check_locked(t_client *c) {
  for (unsigned i = 0; i < scn_command_count; i++) {
    const char *name = scn_commands[i].name;
    if (!strcmp(name, "ping") || !strcmp(name, "hello"))
      continue;
    cJSON *r = t_client_call(c, "{\"cmd\":\"%s\",\"id\":%u}", name, i);
    bool good =
        r && !t_resp_ok(r) && !strcmp(t_resp_code(r), "UNAUTHORIZED") && t_resp_num(r, "id") == i;
    CU_ASSERT_TRUE(good);
    if (!good) {
      fprintf(stderr, "  %s before hello:\n", name);
      t_report("response", r);
    }
    cJSON_Delete(r);
  }
  ERR(c, "UNAUTHORIZED", "{\"cmd\":\"world.create\",\"world\":\"locked\"}");
  ERR(c, "UNAUTHORIZED", "{\"cmd\":\"entity.create\",\"count\":3}");
  ERR(c, "UNAUTHORIZED", "{\"cmd\":\"batch\",\"world\":\"x\",\"ops\":[]}");
  OKD(c, "{\"cmd\":\"ping\"}");
}

static void check_hello_ok(t_client *c, const char *token) {
  cJSON *r = OK(c, "{\"cmd\":\"hello\",\"token\":\"%s\"}", token);
  const cJSON *server = cJSON_GetObjectItemCaseSensitive(r, "server");
  CHECK(cJSON_IsString(server) && !strcmp(server->valuestring, "scened") &&
            t_resp_num(r, "protocol") == 1,
        r);
  cJSON_Delete(r);
}

static void test_auth(void) {
  t_daemon d;
  const char *args[] = {"--auth-token", "secret", NULL};
  if (!START(&d, args))
    return;
  t_client c, c2;
  if (CONNECT(&c, d.port)) {
    check_locked(&c);
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"wrong\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"secre\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"secrets\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"Secret\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":5}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":null}");
    check_locked(&c);
    check_hello_ok(&c, "secret");
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"authed\"}");
    TF0(&c, "authed");
    CU_ASSERT_EQUAL(listed_transforms(&c, "authed"), 1);
    CU_ASSERT_EQUAL(listed_transforms(&c, "locked"), -1);
    CU_ASSERT_EQUAL(info_num(&c, "entities"), 1);
    /* Authentication is per connection. */
    if (CONNECT(&c2, d.port)) {
      ERR(&c2, "UNAUTHORIZED", "{\"cmd\":\"world.list\"}");
      ERR(&c2, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"secret \"}");
      ERR(&c2, "UNAUTHORIZED", "{\"cmd\":\"transform.get\",\"world\":\"authed\",\"entity\":1}");
      check_hello_ok(&c2, "secret");
      OKD(&c2, "{\"cmd\":\"world.destroy\",\"world\":\"authed\"}");
      t_client_close(&c2);
    }
    OKD(&c, "{\"cmd\":\"world.list\"}");
    t_client_close(&c);
  }
  STOP_OK(&d, 10000);
}

static void test_auth_env(void) {
  t_daemon d;
  setenv("SCENED_AUTH_TOKEN", "from-env", 1);
  bool up = START(&d, NULL);
  unsetenv("SCENED_AUTH_TOKEN");
  if (!up)
    return;
  t_client c;
  if (CONNECT(&c, d.port)) {
    check_locked(&c);
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"secret\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\"}");
    check_locked(&c);
    check_hello_ok(&c, "from-env");
    OKD(&c, "{\"cmd\":\"world.list\"}");
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"e\"}");
    t_client_close(&c);
  }
  STOP_OK(&d, 10000);
}

/* ---- configured limits ----------------------------------------------------------------------- */

static void test_max_clients(void) {
  t_daemon d;
  const char *args[] = {"--max-clients", "2", NULL};
  if (!START(&d, args))
    return;
  t_client c1, c2, c3;
  bool ok1 = CONNECT(&c1, d.port), ok2 = CONNECT(&c2, d.port);
  if (ok1)
    OKD(&c1, "{\"cmd\":\"ping\"}");
  if (ok2)
    OKD(&c2, "{\"cmd\":\"ping\"}");
  /* The third gets one LIMIT line, unasked, and is closed. */
  if (CONNECT(&c3, d.port)) {
    cJSON *r = t_client_recv_json(&c3, WAIT_MS);
    CHECK(r && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ok")) &&
              !strcmp(t_resp_code(r), "LIMIT") && !t_resp_has(r, "id"),
          r);
    cJSON_Delete(r);
    CU_ASSERT_TRUE(t_client_closed(&c3, 3000));
    t_client_close(&c3);
  }
  if (ok2)
    OKD(&c2, "{\"cmd\":\"ping\"}");
  /* Once one leaves, a new connection is served. */
  if (ok1)
    t_client_close(&c1);
  bool served = false;
  long deadline = t_now_ms() + 5000;
  while (!served && t_now_ms() < deadline) {
    if (t_client_connect(&c3, d.port) != 0)
      break;
    cJSON *r = t_client_call(&c3, "{\"cmd\":\"ping\",\"id\":1}");
    served = t_resp_ok(r) && t_resp_num(r, "id") == 1;
    cJSON_Delete(r);
    t_client_close(&c3);
    if (!served)
      t_sleep_ms(20);
  }
  CU_ASSERT_TRUE(served);
  if (ok2) {
    OKD(&c2, "{\"cmd\":\"ping\"}");
    t_client_close(&c2);
  }
  STOP_OK(&d, 10000);
}

static void test_max_worlds_transforms(void) {
  t_daemon d;
  const char *args[] = {"--max-worlds", "2", "--max-transforms", "3", NULL};
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    return;
  new_world(&c, "w1");
  new_world(&c, "w2");
  ERR(&c, "LIMIT", "{\"cmd\":\"world.create\",\"world\":\"w3\"}");
  CU_ASSERT_EQUAL(listed_transforms(&c, "w3"), -1);
  CU_ASSERT_EQUAL(info_num(&c, "worlds"), 2);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"w1\"}");
  new_world(&c, "w3");
  ERR(&c, "LIMIT", "{\"cmd\":\"world.create\",\"world\":\"w1\"}");

  /* Three transforms per world. */
  unsigned long long t1 = TF0(&c, "w2");
  TF0(&c, "w2");
  unsigned long long t3 = TF(&c, "w2", "\"parent\":%llu", t1);
  double ents = info_num(&c, "entities");
  unsigned long long spare = new_entity(&c);
  ERR(&c, "LIMIT", "{\"cmd\":\"transform.create\",\"world\":\"w2\"}");
  ERR(&c, "LIMIT", "{\"cmd\":\"transform.create\",\"world\":\"w2\",\"entity\":%llu}", spare);
  ERR(&c, "LIMIT",
      "{\"cmd\":\"batch\",\"world\":\"w2\",\"ops\":[{\"cmd\":\"transform.set_local\",\"entity\":%"
      "llu,"
      "\"t\":[1,1,1]},{\"cmd\":\"transform.create\",\"entity\":%llu}]}",
      t1, spare);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents + 1);
  CU_ASSERT_EQUAL(listed_transforms(&c, "w2"), 3);
  float m[16];
  CU_ASSERT_TRUE(matrix(&c, "w2", t1, "local", m));
  CU_ASSERT_EQUAL(memcmp(m, IDENTITY, sizeof m), 0);
  /* The limit is per world; a freed place can be used again. */
  CU_ASSERT_EQUAL(TF(&c, "w3", "\"entity\":%llu", spare), spare);
  TF0(&c, "w3");
  TF0(&c, "w3");
  ERR(&c, "LIMIT", "{\"cmd\":\"transform.create\",\"world\":\"w3\"}");
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"w2\",\"entity\":%llu}", t3);
  CU_ASSERT_EQUAL(TF(&c, "w2", "\"entity\":%llu", spare), spare);
  CU_ASSERT_EQUAL(listed_transforms(&c, "w2"), 3);
  t_client_close(&c);
  STOP_OK(&d, 10000);
}

/* A client whose responses wait unread beyond --output-limit gets LIMIT for each request
 * until it reads, in order, and a refused command changes nothing. */
static void test_output_limit(void) {
  t_daemon d;
  const char *args[] = {"--output-limit", "4096", NULL};
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    return;
  new_world(&c, "w");
  unsigned long long t = TF(&c, "w", "\"t\":[1,2,3]");
  enum { GETS = 400 };
  text all = {0};
  for (int i = 1; i <= GETS; i++)
    text_addf(&all, "{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":%llu,\"id\":%d}\n", t,
              i);
  text_addf(&all,
            "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,"
            "\"t\":[9,9,9],\"id\":%d}\n",
            t, GETS + 1);
  CU_ASSERT_EQUAL_FATAL(t_client_send_raw(&c, all.s, all.len), 0);
  text_free(&all);
  int ok = 0, limited = 0, other = 0;
  for (int i = 1; i <= GETS + 1; i++) {
    cJSON *r = t_client_recv_json(&c, WAIT_MS);
    if (!r) {
      CU_FAIL("a pipelined request got no response");
      break;
    }
    CU_ASSERT_EQUAL(t_resp_num(r, "id"), i);
    if (t_resp_ok(r))
      ok++;
    else if (strcmp(t_resp_code(r), "LIMIT") == 0)
      limited++;
    else
      other++;
    if (i == GETS + 1)
      CU_ASSERT_STRING_EQUAL(t_resp_code(r), "LIMIT"); /* still over when the set came */
    cJSON_Delete(r);
  }
  CU_ASSERT_TRUE(ok > 0);
  CU_ASSERT_TRUE(limited > 0);
  CU_ASSERT_EQUAL(other, 0);
  /* Read, the connection works again, and the refused set changed nothing. */
  float m[16];
  CU_ASSERT_TRUE(matrix(&c, "w", t, "local", m));
  CU_ASSERT_TRUE(m[12] == 1 && m[13] == 2 && m[14] == 3);
  /* One response bigger than the limit is refused as well, and changes nothing. */
  double ents = info_num(&c, "entities");
  ERR(&c, "LIMIT", "{\"cmd\":\"entity.create\",\"count\":1000}");
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents);
  text batch = {0};
  text_addf(&batch,
            "{\"cmd\":\"batch\",\"world\":\"w\",\"ops\":["
            "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"t\":[7,7,7]}",
            t);
  for (int i = 0; i < 40; i++)
    text_addf(&batch, ",{\"cmd\":\"transform.get\",\"entity\":%llu}", t);
  text_addf(&batch, "]}");
  ERR(&c, "LIMIT", "%s", batch.s);
  text_free(&batch);
  CU_ASSERT_TRUE(matrix(&c, "w", t, "local", m));
  CU_ASSERT_TRUE(m[12] == 1 && m[13] == 2 && m[14] == 3);
  for (int i = 0; i < 1500; i++) /* about 6 KB of ids */
    TF(&c, "w", "\"parent\":%llu", t);
  ERR(&c, "LIMIT", "{\"cmd\":\"transform.children\",\"world\":\"w\",\"entity\":%llu}", t);
  OKD(&c, "{\"cmd\":\"entity.create\",\"count\":10}");
  t_client_close(&c);
  STOP_OK(&d, 10000);
}

/* ---- the command line ------------------------------------------------------------------------ */

/* Runs the daemon binary with args to its end (killed after 6 s), stdout and stderr collected
 * in p (t_proc_free); its exit code as from t_proc_wait. */
static int run_bin(t_proc *p, const char *const *args) {
  if (!t_proc_start(p, t_daemon_bin(), args, NULL, NULL, 0))
    return -1;
  return t_proc_wait(p, 6000);
}

static void test_command_line(void) {
  t_proc p;
  const char *version[] = {"--version", NULL};
  CU_ASSERT_EQUAL(run_bin(&p, version), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.out), SCN_VERSION));
  t_proc_free(&p);
  const char *help[] = {"--help", NULL};
  CU_ASSERT_EQUAL(run_bin(&p, help), 0);
  t_proc_free(&p);
  /* --version and --help answer even when the environment holds a bad setting */
  setenv("SCENED_TICK_HZ", "0", 1);
  CU_ASSERT_TRUE(run_bin(&p, version) == 0 && strstr(text_str(&p.out), SCN_VERSION));
  t_proc_free(&p);
  CU_ASSERT_EQUAL(run_bin(&p, help), 0);
  unsetenv("SCENED_TICK_HZ");
  const char *out = text_str(&p.out);
  static const char *const flags[] = {
      "--listen",      "--http",       "--tick-hz",        "--auth-token",   "--max-line",
      "--max-clients", "--max-worlds", "--max-transforms", "--output-limit", "--version"};
  for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
    if (!strstr(out, flags[i])) {
      CU_FAIL("--help does not mention a flag");
      fprintf(stderr, "  missing %s\n", flags[i]);
    }
  t_proc_free(&p);

  /* Bad flags and values: one line on stderr, exit 2. Ports are ephemeral in case a bad
   * value were taken. */
  static const char *const bad[][3] = {
      {"--bogus", NULL, NULL},
      {"--max-line", "abc", NULL},
      {"--listen", "nope", NULL},
      {"--max-clients", "0", NULL},
      {"--tick-hz", "0", NULL},
      {"--max-worlds", "-1", NULL},
      {"--max-line", NULL, NULL},
      {"stray", NULL, NULL},
      {"--max-line=12x", NULL, NULL},
      {"--listen", "127.0.0.1:99999", NULL},
      {"--max-transforms", "1.5", NULL},
      {"--http", "nohost", NULL},
      {"-x", NULL, NULL},
      {"--output-limit", "lots", NULL},
      {"--listen", "localhost:0", NULL},
      {"--http", "localhost:0", NULL},
      {"--auth-token", "", NULL},
      {"--data", "/dev/null", NULL},
      {"--data", "/dev/null/sub", NULL},
      {"--auth-token", "-h", "--bogus"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const char *args[8] = {"--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"};
    int n = 4;
    for (int k = 0; k < 3 && bad[i][k]; k++)
      args[n++] = bad[i][k];
    args[n] = NULL;
    int code = run_bin(&p, args);
    const char *err = text_str(&p.err);
    size_t len = strlen(err);
    const char *nl = strchr(err, '\n');
    bool one_line = len > 1 && nl == err + len - 1;
    bool good = code == 2 && one_line && p.out.len == 0;
    CU_ASSERT_TRUE(good);
    if (!good)
      fprintf(stderr, "  scened %s %s: exit %d, stderr \"%s\", stdout \"%.100s\"\n", bad[i][0],
              bad[i][1] ? bad[i][1] : "", code, err, text_str(&p.out));
    t_proc_free(&p);
  }
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

static void test_http(void) {
  int port = dmain.http_port;
  CU_ASSERT_TRUE_FATAL(port > 0);
  char *resp;
  CU_ASSERT_EQUAL(t_http_get(port, "/healthz", &resp), 200);
  free(resp);
  CU_ASSERT_EQUAL(t_http_get(port, "/readyz", &resp), 200);
  free(resp);
  CU_ASSERT_EQUAL(t_http_get(port, "/metrics", &resp), 200);
  CU_ASSERT_PTR_NOT_NULL(strstr(resp, "\n# TYPE "));
  CU_ASSERT_PTR_NOT_NULL(strstr(resp, "# TYPE scened_commands_total counter\n"));
  double before = page_metric(resp, "scened_commands_total{command=\"ping\"}");
  CU_ASSERT_TRUE(before >= 0);
  free(resp);
  t_client c;
  if (CONNECT(&c, dmain.port)) {
    for (int i = 0; i < 3; i++)
      OKD(&c, "{\"cmd\":\"ping\"}");
    t_client_close(&c);
  }
  CU_ASSERT_EQUAL(t_http_get(port, "/metrics", &resp), 200);
  CU_ASSERT_EQUAL(page_metric(resp, "scened_commands_total{command=\"ping\"}"), before + 3);
  free(resp);
  CU_ASSERT_EQUAL(t_http_get(port, "/nope", &resp), 404);
  free(resp);
  CU_ASSERT_EQUAL(t_http_get(port, "/metrics/x", &resp), 404);
  free(resp);
  /* Two requests on one connection. */
  bool closed;
  int st = t_http_raw(port,
                      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                      &resp, &closed);
  CU_ASSERT_EQUAL(st, 200);
  const char *second = strstr(resp + 1, "HTTP/1.1 200");
  CU_ASSERT_PTR_NOT_NULL(second);
  CU_ASSERT_TRUE(closed);
  free(resp);
  /* Malformed requests: 400 and a close. */
  static const char *const bad[] = {"BLAH\r\n\r\n", "GET / HTTP/1.1\r\nHost x\r\n\r\n",
                                    "\x01\x02\x03 garbage\r\n\r\n", "GET /healthz HTTP/9\r\n\r\n"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    st = t_http_raw(port, bad[i], &resp, &closed);
    CU_ASSERT_EQUAL(st, 400);
    CU_ASSERT_TRUE(closed);
    if (st != 400 || !closed)
      fprintf(stderr, "  malformed http request %zu: %.200s\n", i, resp);
    free(resp);
  }
  /* The protocol port is unaffected. */
  if (CONNECT(&c, dmain.port)) {
    OKD(&c, "{\"cmd\":\"ping\"}");
    t_client_close(&c);
  }
}

/* ---- registration --------------------------------------------------------------------------- */

static int suite_init(void) { return t_daemon_start(&dmain, NULL) == 0 ? 0 : -1; }

static int suite_clean(void) {
  int status = t_daemon_stop(&dmain, 0, 10000);
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int t_register_daemon_commands(void) {
  static const t_test tests[] = {
      {"ping and hello", test_ping_hello},
      {"world.create, destroy, list", test_worlds},
      {"entity.create: count and its limit", test_entity_create},
      {"entity.destroy: stale ids everywhere", test_entity_destroy},
      {"transform.create", test_transform_create},
      {"transform.destroy: roots keep world, recursive", test_transform_destroy},
      {"transform.link and unlink: keep local and world, cycles", test_link_unlink},
      {"transform.set_local and set_world", test_set_local_world},
      {"transform.get: fields and float32 round trip", test_get_roundtrip},
      {"transform.children order", test_children_order},
      {"transform.rename", test_rename},
      {"transform.find", test_find},
      {"transform.relative", test_relative},
      {"batch: results, atomic failure, op index", test_batch},
      {"info and save", test_info_save},
      {"subscribe and unsubscribe errors", test_subscribe_commands},
      {"every error code", test_error_codes},
      {"id echo", test_id_echo},
      {"a failed command changes nothing", test_failed_changes_nothing},
      {"pipelining: thousands of requests in one write", test_pipelining},
      {"two connections see each other's writes", test_two_connections},
      {"line limit (--max-line 1024)", test_line_limit},
      {"default line limit (1 MiB)", test_default_line_limit},
      {"blank lines and CRLF", test_blank_lines_crlf},
      {"malformed lines", test_malformed_lines},
      {"clients that vanish", test_vanishing_clients},
      {"auth token", test_auth},
      {"auth token from the environment", test_auth_env},
      {"--max-clients", test_max_clients},
      {"--max-worlds and --max-transforms", test_max_worlds_transforms},
      {"--output-limit: LIMIT while responses wait unread", test_output_limit},
      {"command line", test_command_line},
      {"http: healthz, readyz, metrics, 404, 400", test_http},
  };
  return T_ADD_SUITE("daemon_commands", suite_init, suite_clean, tests);
}

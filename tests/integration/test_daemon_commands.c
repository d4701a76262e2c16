/* Integration tests of the request/response protocol over TCP against the real daemon: ping
 * and hello, worlds, entities, batches, info and save, the subscription commands' errors, every
 * error code, id echo, and the atomicity of failed commands. The transform commands, the line
 * protocol and the daemon's configuration have suites of their own (daemon_commands_*). */
#include "command_fixtures.h"
#include "daemon_fixtures.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SAFE 9007199254740991.0

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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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

/* ---- info, save, subscriptions --------------------------------------------------------------- */

static void test_info_save(void) {
  t_client c, c2;
  if (!CONNECT(&c, commands_daemon.port))
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

  if (CONNECT(&c2, commands_daemon.port)) {
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
  if (!CONNECT(&c, commands_daemon.port))
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

/* ---- error codes, ids, atomicity ------------------------------------------------------------- */

static void test_error_codes(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_daemon_commands(void) {
  static const t_test tests[] = {
      {"ping and hello", test_ping_hello},
      {"world.create, destroy, list", test_worlds},
      {"entity.create: count and its limit", test_entity_create},
      {"entity.destroy: stale ids everywhere", test_entity_destroy},
      {"batch: results, atomic failure, op index", test_batch},
      {"info and save", test_info_save},
      {"subscribe and unsubscribe errors", test_subscribe_commands},
      {"every error code", test_error_codes},
      {"id echo", test_id_echo},
      {"a failed command changes nothing", test_failed_changes_nothing},
  };
  return T_ADD_SUITE("daemon_commands", commands_suite_init, commands_suite_clean, tests);
}

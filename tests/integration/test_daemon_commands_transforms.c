/* Integration tests of the transform commands against the real daemon, with their exact
 * results and errors: create, destroy, link and unlink, set_local and set_world, get (float32
 * round trips), children order, rename, find and relative. */
#include "command_fixtures.h"
#include "daemon_fixtures.h"
#include "mat_mul.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int children(t_client *c, const char *world, uint64_t e, uint64_t *out, int cap) {
  cJSON *r = t_client_call(c, "{\"cmd\":\"transform.children\",\"world\":\"%s\",\"entity\":%llu}",
                           world, (unsigned long long)e);
  int n = t_resp_ok(r) ? ids_of(r, "children", out, cap) : -1;
  cJSON_Delete(r);
  return n;
}

/* T(10,0,0) * R90Z * S(2), column-major. */
static const float P_WORLD[16] = {0, 2, 0, 0, -2, 0, 0, 0, 0, 0, 2, 0, 10, 0, 0, 1};

static void test_transform_create(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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
  if (!CONNECT(&c, commands_daemon.port))
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

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_daemon_commands_transforms(void) {
  static const t_test tests[] = {
      {"transform.create", test_transform_create},
      {"transform.destroy: roots keep world, recursive", test_transform_destroy},
      {"transform.link and unlink: keep local and world, cycles", test_link_unlink},
      {"transform.set_local and set_world", test_set_local_world},
      {"transform.get: fields and float32 round trip", test_get_roundtrip},
      {"transform.children order", test_children_order},
      {"transform.rename", test_rename},
      {"transform.find", test_find},
      {"transform.relative", test_relative},
  };
  return T_ADD_SUITE("daemon_commands_transforms", commands_suite_init, commands_suite_clean,
                     tests);
}

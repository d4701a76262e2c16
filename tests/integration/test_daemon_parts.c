/* Integration tests of the parts of a transform against the real daemon: "partial" on
 * transform.set_local and set_world replaces the parts given and keeps the others, refuses a
 * current matrix that is not T * R * S and bad requests and then changes nothing, works inside
 * batches and survives a journal replay; transform.get with "trs" answers the parts of the
 * local and world matrices (w >= 0, a mirror on sx), or null. */
#include "daemon_fixtures.h"
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static t_daemon dparts;

typedef unsigned long long ull;

/* ---- parts ------------------------------------------------------------------------------- */

typedef struct parts {
  float t[3], r[4], s[3];
} parts;

/* The start of most tests: r is (1,2,3,4) normalised, as the daemon normalises it. */
static const parts START = {
    {1, 2, 3}, {0.18257419f, 0.36514837f, 0.54772256f, 0.73029674f}, {2, 3, 4}};
#define START_SPEC "\"t\":[1,2,3],\"r\":[1,2,3,4],\"s\":[2,3,4]"
/* What partial sets put in place of it (a unit quaternion with w > 0). */
static const parts NEW = {{-5, 6, 0.5f}, {0.5f, -0.5f, 0.5f, 0.5f}, {0.5f, 1.5f, 2.5f}};

static bool floats_of(const cJSON *a, float *out, int n) {
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
    return false;
  int i = 0;
  for (const cJSON *x = a->child; x; x = x->next) {
    if (!cJSON_IsNumber(x))
      return false;
    out[i++] = (float)x->valuedouble; /* printed exactly: the same float32 */
  }
  return true;
}

/* A {"t","r","s"} object into p: 1; null: 0; anything else: -1. */
static int parts_from(const cJSON *o, parts *p) {
  if (cJSON_IsNull(o))
    return 0;
  if (!cJSON_IsObject(o) || cJSON_GetArraySize(o) != 3)
    return -1;
  bool ok = floats_of(cJSON_GetObjectItemCaseSensitive(o, "t"), p->t, 3) &&
            floats_of(cJSON_GetObjectItemCaseSensitive(o, "r"), p->r, 4) &&
            floats_of(cJSON_GetObjectItemCaseSensitive(o, "s"), p->s, 3);
  return ok ? 1 : -1;
}

/* transform.get with "trs": the whole reply (caller deletes). */
static cJSON *get_trs_at(const char *file, int line, t_client *c, const char *world, uint64_t e) {
  return t_ok_at(file, line, c,
                 "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"trs\":true}", world,
                 (ull)e);
}
#define GET_TRS(c, world, e) get_trs_at(__FILE__, __LINE__, (c), (world), (e))

/* The parts of e's local (world_space: world) matrix: 1, 0 when the daemon answered null. A
 * reply without the field, or with a malformed one, fails. */
static int parts_at(const char *file, int line, t_client *c, const char *world, uint64_t e,
                    bool world_space, parts *p) {
  cJSON *r = get_trs_at(file, line, c, world, e);
  int got =
      parts_from(cJSON_GetObjectItemCaseSensitive(r, world_space ? "world_trs" : "local_trs"), p);
  t_check_at(file, line, got >= 0, "local_trs and world_trs are parts or null", r);
  cJSON_Delete(r);
  return got;
}
#define LOCAL_PARTS(c, world, e, p) parts_at(__FILE__, __LINE__, (c), (world), (e), false, (p))
#define WORLD_PARTS(c, world, e, p) parts_at(__FILE__, __LINE__, (c), (world), (e), true, (p))

static bool near3(const float a[3], const float b[3], double tol) {
  for (int i = 0; i < 3; i++)
    if (!(fabs((double)a[i] - b[i]) <= tol * (1 + fabs((double)b[i]))))
      return false;
  return true;
}

/* Quaternions are compared as given: the daemon's have w >= 0, and so have the wanted ones. */
static bool parts_near(const parts *a, const parts *b, double tol) {
  float ar[3] = {a->r[0], a->r[1], a->r[2]}, br[3] = {b->r[0], b->r[1], b->r[2]};
  return near3(a->t, b->t, tol) && near3(ar, br, tol) && fabs((double)a->r[3] - b->r[3]) <= tol &&
         near3(a->s, b->s, tol);
}

static void parts_print(const char *what, const parts *p) {
  fprintf(stderr, "  %s: t %.9g %.9g %.9g  r %.9g %.9g %.9g %.9g  s %.9g %.9g %.9g\n", what,
          p->t[0], p->t[1], p->t[2], p->r[0], p->r[1], p->r[2], p->r[3], p->s[0], p->s[1], p->s[2]);
}

static bool check_parts_at(const char *file, int line, const parts *got, const parts *want,
                           double tol) {
  bool near = parts_near(got, want, tol);
  CU_assertImplementation(near ? CU_TRUE : CU_FALSE, (unsigned)line, "parts as wanted", file, "",
                          CU_FALSE);
  if (!near) {
    parts_print("got ", got);
    parts_print("want", want);
  }
  return near;
}
#define CHECK_PARTS(got, want) check_parts_at(__FILE__, __LINE__, (got), (want), 2e-6)

/* A matrix field of a reply. */
static bool matrix_of(const cJSON *r, const char *field, float m[16]) {
  return floats_of(cJSON_GetObjectItemCaseSensitive(r, field), m, 16);
}

/* The matrix is T * R * S of p, within float32 rounding. */
static bool composes_to(const parts *p, const float m[16]) {
  float want[16];
  if (scn_compose_trs(p->t, p->r, p->s, want) != SCN_OK)
    return false;
  for (int i = 0; i < 16; i++)
    if (!(fabsf(m[i] - want[i]) <= 4e-6f * (1 + fabsf(want[i]))))
      return false;
  return true;
}

/* A spec of p's parts chosen by mask (1 t, 2 r, 4 s), as JSON members. */
static void spec_of(const parts *p, int mask, char *out, size_t cap) {
  text b = {0};
  if (mask & 1)
    text_addf(&b, ",\"t\":[%.9g,%.9g,%.9g]", p->t[0], p->t[1], p->t[2]);
  if (mask & 2)
    text_addf(&b, ",\"r\":[%.9g,%.9g,%.9g,%.9g]", p->r[0], p->r[1], p->r[2], p->r[3]);
  if (mask & 4)
    text_addf(&b, ",\"s\":[%.9g,%.9g,%.9g]", p->s[0], p->s[1], p->s[2]);
  snprintf(out, cap, "%s", b.s ? b.s : "");
  text_free(&b);
}

/* Everything transform.get with "trs" says of the entities, as text, to show that a refused
 * request changed nothing; but the tick it answers, which moves on by itself (and starts over
 * in a restarted daemon). */
static char *state(t_client *c, const char *world, const uint64_t *ids, int n) {
  text b = {0};
  for (int i = 0; i < n; i++) {
    cJSON *r = GET_TRS(c, world, ids[i]);
    cJSON_DeleteItemFromObjectCaseSensitive(r, "tick"); /* the world's clock, not its state */
    char *s = r ? cJSON_PrintUnformatted(r) : NULL;
    text_addf(&b, "%s\n", s ? s : "-");
    free(s);
    cJSON_Delete(r);
  }
  return b.s;
}

static void check_unchanged_at(const char *file, int line, t_client *c, const char *world,
                               const uint64_t *ids, int n, const char *before) {
  char *after = state(c, world, ids, n);
  bool same = after && strcmp(after, before) == 0;
  CU_assertImplementation(same ? CU_TRUE : CU_FALSE, (unsigned)line, "state unchanged", file, "",
                          CU_FALSE);
  if (!same) {
    t_report_text("before", before);
    t_report_text("after", after ? after : "-");
  }
  free(after);
}
#define CHECK_UNCHANGED(c, world, ids, n, before)                                                  \
  check_unchanged_at(__FILE__, __LINE__, (c), (world), (ids), (n), (before))

static uint64_t create_at(const char *file, int line, t_client *c, const char *world,
                          const char *members) {
  cJSON *r = t_ok_at(file, line, c, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s%s}", world,
                     *members ? "," : "", members);
  uint64_t e = t_resp_id(r, "entity");
  t_check_at(file, line, e != 0, "an entity id", r);
  cJSON_Delete(r);
  return e;
}
#define CREATE(c, world, members) create_at(__FILE__, __LINE__, (c), (world), (members))

/* ---- partial sets ------------------------------------------------------------------------ */

/* Each part alone, each pair and all three, on set_local and on set_world of a root: the parts
 * given are the new ones, the others those before, and the matrix their T * R * S. */
static void test_partial_keeps_the_rest(void) {
  t_client c;
  if (!CONNECT(&c, dparts.port))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"keep\"}");
  uint64_t e = CREATE(&c, "keep", START_SPEC);
  static const char *const cmds[] = {"transform.set_local", "transform.set_world"};
  for (int k = 0; k < 2; k++)
    for (int mask = 1; mask <= 7; mask++) {
      OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"keep\",\"entity\":%llu," START_SPEC "}",
          (ull)e);
      parts before, after;
      CU_ASSERT_EQUAL_FATAL(LOCAL_PARTS(&c, "keep", e, &before), 1);
      CHECK_PARTS(&before, &START);
      cJSON *r0 = GET_TRS(&c, "keep", e);
      float m0[16], m1[16];
      CU_ASSERT_TRUE(matrix_of(r0, "local", m0));
      cJSON_Delete(r0);

      char spec[256];
      spec_of(&NEW, mask, spec, sizeof spec);
      OKD(&c, "{\"cmd\":\"%s\",\"world\":\"keep\",\"entity\":%llu,\"partial\":true%s}", cmds[k],
          (ull)e, spec);
      parts want = before;
      if (mask & 1)
        memcpy(want.t, NEW.t, sizeof want.t);
      if (mask & 2)
        memcpy(want.r, NEW.r, sizeof want.r);
      if (mask & 4)
        memcpy(want.s, NEW.s, sizeof want.s);
      CU_ASSERT_EQUAL_FATAL(LOCAL_PARTS(&c, "keep", e, &after), 1);
      if (!CHECK_PARTS(&after, &want))
        fprintf(stderr, "  %s with the parts of mask %d\n", cmds[k], mask);
      CU_ASSERT_EQUAL_FATAL(WORLD_PARTS(&c, "keep", e, &after), 1);
      CHECK_PARTS(&after, &want);
      cJSON *r1 = GET_TRS(&c, "keep", e);
      CU_ASSERT_TRUE(matrix_of(r1, "local", m1));
      cJSON_Delete(r1);
      CU_ASSERT_TRUE(composes_to(&want, m1));
      /* The translation alone leaves the rest of the matrix bit for bit. */
      if (mask == 1)
        CU_ASSERT_EQUAL(memcmp(m0, m1, 12 * sizeof(float)), 0);
    }
  t_client_close(&c);
}

/* set_world with "partial" on a child under a rotated and scaled parent: the parts are those
 * of the world matrix, and the local follows. */
static void test_partial_set_world_child(void) {
  t_client c;
  if (!CONNECT(&c, dparts.port))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"child\"}");
  /* 90 degrees about z, scale 2, at x = 10 */
  uint64_t p = CREATE(&c, "child", "\"t\":[10,0,0],\"r\":[0,0,1,1],\"s\":2");
  char members[128];
  snprintf(members, sizeof members, "\"parent\":%llu,\"t\":[1,0,0],\"r\":[0,1,0,1]", (ull)p);
  uint64_t e = CREATE(&c, "child", members);
  parts w0, w, l;
  CU_ASSERT_EQUAL_FATAL(WORLD_PARTS(&c, "child", e, &w0), 1);
  /* the child's origin: 10 + 2 * rot90(1,0,0) */
  CHECK_PARTS(&w0, (&(parts){{10, 2, 0}, {w0.r[0], w0.r[1], w0.r[2], w0.r[3]}, {2, 2, 2}}));

  /* One part at a time, each keeping what the steps before left. */
  const float h = 0.70710677f;
  const struct {
    const char *cmd, *part;
    parts world, local;
  } steps[] = {
      /* the world rotation alone: the position and scale stay; the local undoes the parent's
       * turn, keeps its translation, and has scale 1 */
      {"set_world",
       "\"r\":[0,0,0,1]",
       {{10, 2, 0}, {0, 0, 0, 1}, {2, 2, 2}},
       {{1, 0, 0}, {0, 0, -h, h}, {1, 1, 1}}},
      /* the world translation alone: (0,5,0) is 10 + 2 * rot90(2.5,5,0) */
      {"set_world",
       "\"t\":[0,5,0]",
       {{0, 5, 0}, {0, 0, 0, 1}, {2, 2, 2}},
       {{2.5f, 5, 0}, {0, 0, -h, h}, {1, 1, 1}}},
      /* the world scale alone, as one number: the local scale is half of it */
      {"set_world",
       "\"s\":1",
       {{0, 5, 0}, {0, 0, 0, 1}, {1, 1, 1}},
       {{2.5f, 5, 0}, {0, 0, -h, h}, {0.5f, 0.5f, 0.5f}}},
      /* set_local on the same child is about its local matrix */
      {"set_local",
       "\"r\":[0,0,0,1]",
       {{0, 5, 0}, {0, 0, h, h}, {1, 1, 1}},
       {{2.5f, 5, 0}, {0, 0, 0, 1}, {0.5f, 0.5f, 0.5f}}},
  };
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
    OKD(&c, "{\"cmd\":\"transform.%s\",\"world\":\"child\",\"entity\":%llu,\"partial\":true,%s}",
        steps[i].cmd, (ull)e, steps[i].part);
    CU_ASSERT_EQUAL_FATAL(WORLD_PARTS(&c, "child", e, &w), 1);
    bool fine = CHECK_PARTS(&w, &steps[i].world);
    CU_ASSERT_EQUAL_FATAL(LOCAL_PARTS(&c, "child", e, &l), 1);
    if (!(CHECK_PARTS(&l, &steps[i].local) && fine))
      fprintf(stderr, "  after %s with %s\n", steps[i].cmd, steps[i].part);
    cJSON *r = GET_TRS(&c, "child", e);
    float m[16];
    CU_ASSERT_TRUE(matrix_of(r, "world", m) && composes_to(&w, m));
    CU_ASSERT_TRUE(matrix_of(r, "local", m) && composes_to(&l, m));
    cJSON_Delete(r);
  }
  t_client_close(&c);
}

/* A current matrix that is not T * R * S (shear, a zero scale, a last row other than 0 0 0 1)
 * is refused with BAD_REQUEST, and nothing changes; its parts read as null. */
static void test_partial_refuses_non_trs(void) {
  t_client c;
  if (!CONNECT(&c, dparts.port))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"shear\"}");
  /* A non-uniform scale over a rotated child: the child's world matrix is sheared, its local
   * is not. */
  uint64_t p = CREATE(&c, "shear", "\"s\":[1,2,1]");
  char members[128];
  snprintf(members, sizeof members, "\"parent\":%llu,\"r\":[0,0,0.38268343,0.92387953]", (ull)p);
  uint64_t e = CREATE(&c, "shear", members);
  uint64_t sheared = CREATE(&c, "shear", "\"matrix\":[1,0,0,0,0.5,1,0,0,0,0,1,0,7,8,9,1]");
  uint64_t flat = CREATE(&c, "shear", "\"t\":[1,2,3],\"s\":[0,1,1]");
  uint64_t proj = CREATE(&c, "shear", "\"matrix\":[1,0,0,0.5,0,1,0,0,0,0,1,0,0,0,0,1]");
  uint64_t ids[] = {p, e, sheared, flat, proj};
  parts q;
  CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "shear", e, &q), 1);
  CU_ASSERT_EQUAL(WORLD_PARTS(&c, "shear", e, &q), 0);
  CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "shear", sheared, &q), 0);
  CU_ASSERT_EQUAL(WORLD_PARTS(&c, "shear", sheared, &q), 0);
  CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "shear", flat, &q), 0);
  CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "shear", proj, &q), 0);

  char *before = state(&c, "shear", ids, 5);
  char *msg = NULL;
  ERR_MESSAGE(&c, "BAD_REQUEST", &msg,
              "{\"cmd\":\"transform.set_world\",\"world\":\"shear\",\"entity\":%llu,"
              "\"partial\":true,\"t\":[1,1,1]}",
              (ull)e);
  CU_ASSERT_PTR_NOT_NULL(msg ? strstr(msg, "world matrix") : NULL);
  CU_ASSERT_PTR_NOT_NULL(msg ? strstr(msg, "not translation x rotation x scale") : NULL);
  free(msg);
  const struct {
    uint64_t e;
    const char *parts;
  } refused[] = {{sheared, "\"t\":[0,0,0]"}, {sheared, "\"r\":[0,0,0,1]"},
                 {sheared, "\"s\":1"},       {flat, "\"r\":[0,1,0,1]"},
                 {flat, "\"t\":[0,0,0]"},    {proj, "\"t\":[1,1,1],\"s\":2"}};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
    for (int k = 0; k < 2; k++)
      ERR(&c, "BAD_REQUEST",
          "{\"cmd\":\"transform.%s\",\"world\":\"shear\",\"entity\":%llu,\"partial\":true,%s}",
          k ? "set_world" : "set_local", (ull)refused[i].e, refused[i].parts);
  CHECK_UNCHANGED(&c, "shear", ids, 5, before);
  free(before);

  /* The child's local matrix has its parts: a partial set_local works there. */
  OKD(&c,
      "{\"cmd\":\"transform.set_local\",\"world\":\"shear\",\"entity\":%llu,\"partial\":true,"
      "\"t\":[3,0,0]}",
      (ull)e);
  CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "shear", e, &q), 1);
  CHECK_PARTS(&q, (&(parts){{3, 0, 0}, {0, 0, 0.38268343f, 0.92387953f}, {1, 1, 1}}));
  t_client_close(&c);
}

/* Requests refused before the core is asked: "partial" with a matrix, with no part, not a
 * boolean, or with a zero quaternion. Nothing changes. */
static void test_partial_bad_requests(void) {
  t_client c;
  if (!CONNECT(&c, dparts.port))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"bad\"}");
  uint64_t e = CREATE(&c, "bad", START_SPEC);
  char *before = state(&c, "bad", &e, 1);
  static const char *const bad[] = {
      "\"partial\":true,\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]",
      "\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],\"partial\":true",
      "\"partial\":true,\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],\"t\":[1,2,3]",
      "\"partial\":true",
      "\"partial\":1,\"t\":[1,2,3]",
      "\"partial\":\"true\",\"t\":[1,2,3]",
      "\"partial\":null,\"t\":[1,2,3]",
      "\"partial\":[true],\"r\":[0,0,0,1]",
      "\"partial\":true,\"r\":[0,0,0,0]",
      "\"partial\":true,\"r\":[0,0,0,0],\"t\":[1,2,3]",
      "\"partial\":true,\"t\":[1e39,0,0]",
      "\"partial\":true,\"s\":[1,2]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    for (int k = 0; k < 2; k++)
      ERR(&c, "BAD_REQUEST", "{\"cmd\":\"transform.%s\",\"world\":\"bad\",\"entity\":%llu,%s}",
          k ? "set_world" : "set_local", (ull)e, bad[i]);
  char *msg = NULL;
  ERR_MESSAGE(&c, "BAD_REQUEST", &msg,
              "{\"cmd\":\"transform.set_local\",\"world\":\"bad\",\"entity\":%llu,"
              "\"partial\":true}",
              (ull)e);
  CU_ASSERT_PTR_NOT_NULL(msg ? strstr(msg, "partial") : NULL);
  free(msg);
  ERR_MESSAGE(&c, "BAD_REQUEST", &msg,
              "{\"cmd\":\"transform.set_local\",\"world\":\"bad\",\"entity\":%llu,"
              "\"partial\":true,\"r\":[0,0,0,0]}",
              (ull)e);
  CU_ASSERT_PTR_NOT_NULL(msg ? strstr(msg, "non-zero quaternion") : NULL);
  free(msg);
  /* An entity without a transform is NOT_FOUND, as without "partial". */
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"transform.set_local\",\"world\":\"bad\",\"entity\":%llu,\"partial\":true,"
      "\"t\":[1,2,3]}",
      (ull)e + 1000);
  CHECK_UNCHANGED(&c, "bad", &e, 1, before);
  free(before);
  /* "partial": false is the whole spec, missing parts identity. */
  OKD(&c,
      "{\"cmd\":\"transform.set_local\",\"world\":\"bad\",\"entity\":%llu,\"partial\":false,"
      "\"t\":[1,2,3]}",
      (ull)e);
  parts q;
  CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "bad", e, &q), 1);
  CHECK_PARTS(&q, (&(parts){{1, 2, 3}, {0, 0, 0, 1}, {1, 1, 1}}));
  t_client_close(&c);
}

/* In a batch, a partial set sees the ops before it; a failing batch changes nothing. */
static void test_partial_in_batch(void) {
  t_client c;
  if (!CONNECT(&c, dparts.port))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"batch\"}");
  uint64_t e = CREATE(&c, "batch", START_SPEC);
  cJSON *r =
      OK(&c,
         "{\"cmd\":\"batch\",\"world\":\"batch\",\"ops\":["
         "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"partial\":true,\"r\":[1,-1,1,1]},"
         "{\"cmd\":\"transform.set_world\",\"entity\":%llu,\"partial\":true,\"t\":[-5,6,0.5]},"
         "{\"cmd\":\"transform.get\",\"entity\":%llu,\"trs\":true,\"id\":\"g\"}]}",
         (ull)e, (ull)e, (ull)e);
  const cJSON *results = cJSON_GetObjectItemCaseSensitive(r, "results");
  const cJSON *g = cJSON_GetArrayItem(results, 2);
  parts q;
  CU_ASSERT_TRUE(t_resp_str_is(g, "id", "g"));
  CU_ASSERT_EQUAL(parts_from(cJSON_GetObjectItemCaseSensitive(g, "local_trs"), &q), 1);
  parts want = {{-5, 6, 0.5f}, {0.5f, -0.5f, 0.5f, 0.5f}, {2, 3, 4}};
  CHECK_PARTS(&q, &want);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "batch", e, &q), 1);
  CHECK_PARTS(&q, &want);

  /* A whole set before a partial one: the partial one starts from it. */
  OKD(&c,
      "{\"cmd\":\"batch\",\"world\":\"batch\",\"ops\":["
      "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"t\":[7,7,7],\"s\":3},"
      "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"partial\":true,\"r\":[0,0,1,1]}]}",
      (ull)e, (ull)e);
  CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "batch", e, &q), 1);
  CHECK_PARTS(&q, (&(parts){{7, 7, 7}, {0, 0, 0.70710677f, 0.70710677f}, {3, 3, 3}}));

  /* Failing batches: a partial set after an op that shears the matrix, and a zero quaternion
   * after two good partial sets. Neither leaves a trace. */
  char *before = state(&c, "batch", &e, 1);
  char *msg = NULL;
  ERR_MESSAGE(&c, "BAD_REQUEST", &msg,
              "{\"cmd\":\"batch\",\"world\":\"batch\",\"ops\":["
              "{\"cmd\":\"transform.set_local\",\"entity\":%llu,"
              "\"matrix\":[1,0,0,0,0.5,1,0,0,0,0,1,0,0,0,0,1]},"
              "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"partial\":true,\"t\":[1,2,3]}]}",
              (ull)e, (ull)e);
  CU_ASSERT_TRUE(msg && strncmp(msg, "op 1: ", 6) == 0);
  free(msg);
  ERR_MESSAGE(&c, "BAD_REQUEST", &msg,
              "{\"cmd\":\"batch\",\"world\":\"batch\",\"ops\":["
              "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"partial\":true,\"s\":[3,3,3]},"
              "{\"cmd\":\"transform.set_world\",\"entity\":%llu,\"partial\":true,\"t\":[9,9,9]},"
              "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"partial\":true,"
              "\"r\":[0,0,0,0]}]}",
              (ull)e, (ull)e, (ull)e);
  CU_ASSERT_TRUE(msg && strncmp(msg, "op 2: ", 6) == 0);
  free(msg);
  CHECK_UNCHANGED(&c, "batch", &e, 1, before);
  free(before);
  t_client_close(&c);
}

/* ---- reading the parts ------------------------------------------------------------------- */

/* "trs" must be a boolean; false or absent answers no parts; the conventions (w >= 0, a mirror
 * on sx) hold; the parts compose back to the matrix. */
static void test_trs_read(void) {
  t_client c;
  if (!CONNECT(&c, dparts.port))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"read\"}");
  uint64_t e = CREATE(&c, "read", START_SPEC);
  static const char *const bad[] = {"1", "0", "\"true\"", "null", "[]", "{}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    ERR(&c, "BAD_REQUEST",
        "{\"cmd\":\"transform.get\",\"world\":\"read\",\"entity\":%llu,\"trs\":%s}", (ull)e,
        bad[i]);
  ERR(&c, "BAD_REQUEST",
      "{\"cmd\":\"batch\",\"world\":\"read\",\"ops\":[{\"cmd\":\"transform.get\",\"entity\":%llu,"
      "\"trs\":\"yes\"}]}",
      (ull)e);
  cJSON *r = OK(&c, "{\"cmd\":\"transform.get\",\"world\":\"read\",\"entity\":%llu,\"trs\":false}",
                (ull)e);
  CU_ASSERT_FALSE(t_resp_has(r, "local_trs") || t_resp_has(r, "world_trs"));
  cJSON_Delete(r);
  r = OK(&c, "{\"cmd\":\"transform.get\",\"world\":\"read\",\"entity\":%llu}", (ull)e);
  CU_ASSERT_FALSE(t_resp_has(r, "local_trs") || t_resp_has(r, "world_trs"));
  cJSON_Delete(r);
  /* The parts come last, after the matrices. */
  r = GET_TRS(&c, "read", e);
  const cJSON *last = r ? r->child : NULL;
  while (last && last->next)
    last = last->next;
  CU_ASSERT_TRUE(last && last->string && strcmp(last->string, "world_trs") == 0);
  cJSON_Delete(r);

  /* A mirror shows as a negative sx: on x itself, and on y (a half turn about z with it). */
  static const struct {
    const char *spec;
    parts want;
  } mirrors[] = {
      {"\"s\":[-1,1,1]", {{0, 0, 0}, {0, 0, 0, 1}, {-1, 1, 1}}},
      {"\"s\":[1,-2,1]", {{0, 0, 0}, {0, 0, 1, 0}, {-1, 2, 1}}},
      {"\"t\":[4,5,6],\"s\":[2,2,-3]", {{4, 5, 6}, {0, 1, 0, 0}, {-2, 2, 3}}},
  };
  for (size_t i = 0; i < sizeof mirrors / sizeof *mirrors; i++) {
    OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"read\",\"entity\":%llu,%s}", (ull)e,
        mirrors[i].spec);
    parts q;
    CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "read", e, &q), 1);
    if (!CHECK_PARTS(&q, &mirrors[i].want))
      fprintf(stderr, "  mirror %s\n", mirrors[i].spec);
    CU_ASSERT_FALSE(signbit(q.r[0]) || signbit(q.r[1]) || signbit(q.r[2]) || signbit(q.r[3]));
  }

  /* A quaternion with w < 0 is answered negated: the same rotation with w >= 0. */
  OKD(&c,
      "{\"cmd\":\"transform.set_local\",\"world\":\"read\",\"entity\":%llu,"
      "\"r\":[0.5,-0.5,0.5,-0.5]}",
      (ull)e);
  parts q;
  CU_ASSERT_EQUAL(LOCAL_PARTS(&c, "read", e, &q), 1);
  CHECK_PARTS(&q, (&(parts){{0, 0, 0}, {-0.5f, 0.5f, -0.5f, 0.5f}, {1, 1, 1}}));

  /* Parts of assorted T * R * S compose back to the matrix: a parent with a uniform scale
   * (mirrored every other time) and a child with a non-uniform one, so the child's world
   * matrix is T * R * S too. */
  uint64_t ch = CREATE(&c, "read", "\"t\":[0.25,-8,3]");
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"read\",\"entity\":%llu,\"parent\":%llu}",
      (ull)ch, (ull)e);
  for (int i = 0; i < 20; i++) {
    double a = i * 0.7, b = i * 1.3;
    OKD(&c,
        "{\"cmd\":\"transform.set_local\",\"world\":\"read\",\"entity\":%llu,"
        "\"t\":[%g,%g,%g],\"r\":[%g,%g,%g,%g],\"s\":%g}",
        (ull)e, a * 10 - 50, b, -a, sin(a), cos(b), sin(b), cos(a),
        (i % 2 ? -1 : 1) * (0.5 + i % 3));
    OKD(&c,
        "{\"cmd\":\"transform.set_local\",\"world\":\"read\",\"entity\":%llu,"
        "\"t\":[%g,1,2],\"r\":[%g,%g,%g,%g],\"s\":[%g,%g,%g]}",
        (ull)ch, b, cos(b), sin(a), cos(a), sin(b), 0.5 + i % 4, (i % 3 ? 1 : -1) * 1.5, 2.0);
    const uint64_t who[] = {e, ch, ch};
    for (int k = 0; k < 3; k++) {
      r = GET_TRS(&c, "read", who[k]);
      float m[16];
      bool world_space = k == 2;
      CU_ASSERT_EQUAL(
          parts_from(cJSON_GetObjectItemCaseSensitive(r, world_space ? "world_trs" : "local_trs"),
                     &q),
          1);
      CU_ASSERT_TRUE(matrix_of(r, world_space ? "world" : "local", m));
      CU_ASSERT_TRUE(q.r[3] >= 0);
      CHECK(composes_to(&q, m), r);
      cJSON_Delete(r);
    }
  }
  t_client_close(&c);
}

/* ---- persistence ------------------------------------------------------------------------- */

/* A partial set is journaled as sent and replayed on the same state: after kill -9 under
 * --fsync always the restarted daemon has the same matrices, bit for bit. */
static void test_partial_replayed(void) {
  char dir[64];
  CU_ASSERT_FATAL(t_temp_dir(dir, sizeof dir, "parts"));
  const char *args[] = {"--http", "off", "--data", dir, "--fsync", "always", NULL};
  t_daemon d;
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    goto out;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"j\"}");
  uint64_t p = CREATE(&c, "j", "\"t\":[1,2,3],\"r\":[0,0,1,1],\"s\":2");
  char members[64];
  snprintf(members, sizeof members, "\"parent\":%llu,\"t\":[1,0,0]", (ull)p);
  uint64_t e = CREATE(&c, "j", members);
  for (int i = 0; i < 30; i++)
    OKD(&c,
        "{\"cmd\":\"transform.%s\",\"world\":\"j\",\"entity\":%llu,\"partial\":true,"
        "\"r\":[%d,1,%d,3]}",
        i % 2 ? "set_local" : "set_world", (ull)(i % 3 ? e : p), i, -i);
  OKD(&c,
      "{\"cmd\":\"batch\",\"world\":\"j\",\"ops\":[{\"cmd\":\"transform.set_local\",\"entity\":"
      "%llu,\"partial\":true,\"t\":[0.1,0.2,0.3]}]}",
      (ull)e);
  uint64_t ids[] = {p, e};
  char *before = state(&c, "j", ids, 2);
  t_client_close(&c);
  int status = t_daemon_stop(&d, SIGKILL, 5000);
  CU_ASSERT(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  if (START_CONNECTED(&d, &c, args)) {
    CHECK_UNCHANGED(&c, "j", ids, 2, before);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
  free(before);
out:
  t_remove_tree(dir);
}

/* ---- registration ------------------------------------------------------------------------ */

static int suite_init(void) {
  const char *args[] = {"--http", "off", NULL};
  return t_daemon_start(&dparts, args) == 0 ? 0 : -1;
}

static int suite_clean(void) { return t_suite_daemon_stop(&dparts, 10000); }

int t_register_daemon_parts(void) {
  static const t_test tests[] = {
      {"partial: each part and pair replaced, the rest kept", test_partial_keeps_the_rest},
      {"partial: set_world on a child of a rotated, scaled parent", test_partial_set_world_child},
      {"partial: a current matrix that is not T*R*S is refused", test_partial_refuses_non_trs},
      {"partial: with a matrix, nothing, a non-boolean, a zero quaternion",
       test_partial_bad_requests},
      {"partial: in batches, seeing the ops before", test_partial_in_batch},
      {"trs: a boolean; null, mirrors, w >= 0, composes back", test_trs_read},
      {"partial: replayed from the journal after kill -9", test_partial_replayed},
  };
  return T_ADD_SUITE("daemon_parts", suite_init, suite_clean, tests);
}

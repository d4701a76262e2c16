/* Integration tests of binary-exact matrices against the real daemon: random float32 bit
 * patterns set through matrix_b64 come back identical in b64 responses (get, relative, batch
 * results) and frames, and as the same values in json mode; every malformed matrix_b64 is
 * BAD_REQUEST and changes nothing (with "partial" too); reads at past ticks in b64; hello's
 * "matrices" (with and without a token); a connection
 * that switches form mid-stream gets every frame after the switch in the new form, none lost or
 * repeated, large frames written in slices included; two subscribers of one world, one in each
 * form, get the same values at the same ticks. */
#include "b64.h"
#include "b64_fixtures.h"
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The daemon the tests share: 20 ticks per second. */
static t_daemon d20;

#define FRAME_WAIT_MS 5000
#define OPEN(k) (CONNECT_FATAL(&(k), d20.port), t_client_keep_events(&(k)))

static uint64_t rng = 0x9E3779B97F4A7C15ull;

typedef unsigned long long ull;

static void b64_text(const float m[16], char out[SCN_B64_MATRIX_LEN + 1]) {
  scn_b64_encode_matrices(out, (const float(*)[16])m, 1);
  out[SCN_B64_MATRIX_LEN] = '\0';
}

/* A matrix field in either form into m; false when it is neither. */
static bool matrix_of(const cJSON *v, float m[16]) {
  if (cJSON_IsString(v))
    return scn_b64_decode_matrix(v->valuestring, strlen(v->valuestring), m, NULL) == SCN_B64_OK;
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 16)
    return false;
  int i = 0;
  for (const cJSON *x = v->child; x; x = x->next)
    m[i++] = cJSON_IsNumber(x) ? (float)x->valuedouble : -1;
  return true;
}

static bool same_bits(const float a[16], const float b[16]) { return memcmp(a, b, 64) == 0; }

static void hello(t_client *c, const char *form) {
  cJSON *r = OK(c, "{\"cmd\":\"hello\",\"matrices\":\"%s\"}", form);
  CHECK(t_resp_str_is(r, "matrices", form), r);
  cJSON_Delete(r);
}

static ull create_b64(t_client *c, const char *world, const float m[16]) {
  char t[SCN_B64_MATRIX_LEN + 1];
  b64_text(m, t);
  cJSON *r =
      OK(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"matrix_b64\":\"%s\"}", world, t);
  ull e = t_resp_id(r, "entity");
  cJSON_Delete(r);
  return e;
}

/* The local and world matrices of e as c receives them; false when the get failed. */
static bool get_both(t_client *c, const char *world, ull e, float local[16], float wm[16],
                     bool *b64) {
  cJSON *r = CALL(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", world, e);
  const cJSON *l = cJSON_GetObjectItemCaseSensitive(r, "local");
  bool good = t_resp_ok(r) && matrix_of(l, local) &&
              matrix_of(cJSON_GetObjectItemCaseSensitive(r, "world"), wm);
  if (b64)
    *b64 = cJSON_IsString(l);
  CHECK(good, r);
  cJSON_Delete(r);
  return good;
}

/* ---- frames ------------------------------------------------------------------------------- */

/* A frame's set, whatever its form: ids and matrices (caller frees both); -1 when it is not a
 * well-formed frame of that form (b64: "ids" and "ms", no "set"; json: "set"). */
static int frame_set(const cJSON *f, bool b64, ull **ids, float (**ms)[16]) {
  *ids = NULL;
  *ms = NULL;
  const cJSON *set = cJSON_GetObjectItemCaseSensitive(f, "set");
  const cJSON *jids = cJSON_GetObjectItemCaseSensitive(f, "ids");
  const cJSON *jms = cJSON_GetObjectItemCaseSensitive(f, "ms");
  bool shape = b64 ? !set && cJSON_IsArray(jids) && cJSON_IsString(jms)
                   : cJSON_IsArray(set) && !jids && !jms;
  shape &= cJSON_GetArraySize(f) == (b64 ? 8 : 7);
  if (!shape)
    return -1;
  int n = cJSON_GetArraySize(b64 ? jids : set);
  *ids = calloc((size_t)n + 1, sizeof **ids);
  *ms = calloc((size_t)n + 1, sizeof **ms);
  int i = 0;
  for (const cJSON *x = (b64 ? jids : set)->child; x; x = x->next, i++) {
    const cJSON *e = b64 ? x : cJSON_GetObjectItemCaseSensitive(x, "e");
    (*ids)[i] = cJSON_IsNumber(e) ? (ull)e->valuedouble : 0;
    if (!b64 && !matrix_of(cJSON_GetObjectItemCaseSensitive(x, "m"), (*ms)[i]))
      return -1;
  }
  if (b64 && scn_b64_decode_matrices(jms->valuestring, strlen(jms->valuestring), *ms, (size_t)n,
                                     NULL) != SCN_B64_OK)
    return -1;
  return n;
}

/* The next frame on k, in the form b64 or not; NULL (a failed assertion) when none comes or it
 * is of the other form. */
static cJSON *next_frame(t_client *k, bool b64) {
  cJSON *f = t_next_event(k, FRAME_WAIT_MS);
  bool good = f && t_resp_str_is(f, "event", "frame");
  CU_ASSERT_TRUE(good);
  if (!good) {
    t_report("not a frame", f);
    cJSON_Delete(f);
    return NULL;
  }
  ull *ids;
  float(*ms)[16];
  int n = frame_set(f, b64, &ids, &ms);
  free(ids);
  free(ms);
  if (!CHECK(n >= 0, f)) {
    t_report(b64 ? "expected a b64 frame" : "expected a json frame", f);
    cJSON_Delete(f);
    return NULL;
  }
  return f;
}

/* Every (id, matrix) of frame f agrees to the bit with want[i] for ids[i] (n of them); the
 * count of those found. */
static int frame_matches(const cJSON *f, bool b64, const ull *ids, const float (*want)[16], int n) {
  ull *fid;
  float(*fm)[16];
  int count = frame_set(f, b64, &fid, &fm), found = 0;
  for (int i = 0; i < count; i++)
    for (int j = 0; j < n; j++)
      if (fid[i] == ids[j]) {
        found++;
        if (!same_bits(fm[i], want[j])) {
          CU_FAIL("a frame's matrix differs from the one set");
          t_report("frame", f);
        }
      }
  free(fid);
  free(fm);
  return found;
}

/* ---- tests -------------------------------------------------------------------------------- */

/* Random bit patterns set through matrix_b64 (create, set_local, set_world, batch) come back
 * identical: as the same text in a b64 get, in relative and in batch results, in a b64 frame,
 * and as the same float32 values in json mode. */
static void test_round_trip(void) {
  enum { N = 60 };
  t_client ctl, bk, jk;
  OPEN(ctl);
  OPEN(bk);
  OPEN(jk);
  hello(&bk, "b64");
  const char *W = "rt";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rt\"}");
  ull ids[N];
  float want[N][16];
  for (int i = 0; i < N; i++) {
    b64_random_matrix(&rng, want[i]);
    ids[i] = create_b64(&ctl, W, want[i]);
  }
  for (int i = 0; i < N; i++) {
    float l[16], w[16];
    bool b64;
    if (get_both(&bk, W, ids[i], l, w, &b64)) {
      CU_ASSERT_TRUE(b64);
      CU_ASSERT_TRUE(same_bits(l, want[i]) && same_bits(w, want[i]));
    }
    if (get_both(&jk, W, ids[i], l, w, &b64)) {
      CU_ASSERT_FALSE(b64);
      CU_ASSERT_TRUE(same_bits(l, want[i]) && same_bits(w, want[i]));
    }
  }
  /* the text itself comes back: a b64 get answers what was sent */
  char t[SCN_B64_MATRIX_LEN + 1];
  b64_text(want[0], t);
  cJSON *r = OK(&bk, "{\"cmd\":\"transform.get\",\"world\":\"rt\",\"entity\":%llu}", ids[0]);
  CHECK(t_resp_str_is(r, "local", t) && t_resp_str_is(r, "world", t), r);
  cJSON_Delete(r);

  /* subscribers in both forms: full frames with every matrix to the bit */
  OKD(&bk, "{\"cmd\":\"subscribe\",\"world\":\"rt\"}");
  OKD(&jk, "{\"cmd\":\"subscribe\",\"world\":\"rt\"}");
  cJSON *fb = next_frame(&bk, true), *fj = next_frame(&jk, false);
  CU_ASSERT_EQUAL(fb ? frame_matches(fb, true, ids, (const float(*)[16])want, N) : 0, N);
  CU_ASSERT_EQUAL(fj ? frame_matches(fj, false, ids, (const float(*)[16])want, N) : 0, N);
  cJSON_Delete(fb);
  cJSON_Delete(fj);

  /* new values through set_local, set_world and a batch, then the deltas */
  text line = {0};
  text_addf(&line, "{\"cmd\":\"batch\",\"world\":\"rt\",\"ops\":[");
  for (int i = 0; i < N; i++) {
    b64_random_matrix(&rng, want[i]);
    b64_text(want[i], t);
    if (i < 10)
      OKD(&ctl, "{\"cmd\":\"transform.%s\",\"world\":\"rt\",\"entity\":%llu,\"matrix_b64\":\"%s\"}",
          i % 2 ? "set_world" : "set_local", ids[i], t);
    else
      text_addf(&line, "%s{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"matrix_b64\":\"%s\"}",
                i > 10 ? "," : "", ids[i], t);
  }
  text_addf(&line, "]}");
  OKD(&ctl, "%s", text_str(&line));
  text_free(&line);
  int found_b = 0, found_j = 0;
  for (long end = t_now_ms() + FRAME_WAIT_MS; (found_b < N || found_j < N) && t_now_ms() < end;) {
    if (found_b < N && (fb = next_frame(&bk, true))) {
      found_b += frame_matches(fb, true, ids, (const float(*)[16])want, N);
      cJSON_Delete(fb);
    }
    if (found_j < N && (fj = next_frame(&jk, false))) {
      found_j += frame_matches(fj, false, ids, (const float(*)[16])want, N);
      cJSON_Delete(fj);
    }
  }
  CU_ASSERT_EQUAL(found_b, N);
  CU_ASSERT_EQUAL(found_j, N);

  /* batch results and relative, in b64 */
  r = OK(&bk,
         "{\"cmd\":\"batch\",\"world\":\"rt\",\"ops\":[{\"cmd\":\"transform.get\",\"entity\":%llu,"
         "\"id\":\"g\"},{\"cmd\":\"transform.relative\",\"entity\":%llu,\"to\":%llu}]}",
         ids[12], ids[12], ids[12]);
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "results");
  float m[16];
  CHECK(matrix_of(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(res, 0), "local"), m) &&
            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(res, 0), "local")) &&
            same_bits(m, want[12]),
        r);
  CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(res, 1), "matrix")), r);
  cJSON_Delete(r);
  float ident[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  ull p = create_b64(&ctl, W, ident);
  r = OK(&bk, "{\"cmd\":\"transform.relative\",\"world\":\"rt\",\"entity\":%llu,\"to\":%llu}",
         ids[12], p);
  CHECK(matrix_of(cJSON_GetObjectItemCaseSensitive(r, "matrix"), m) && same_bits(m, want[12]), r);
  cJSON_Delete(r);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rt\"}");
  t_client_close(&ctl);
  t_client_close(&bk);
  t_client_close(&jk);
}

/* value as matrix_b64 is BAD_REQUEST naming the field in set_local, set_world, create and an op
 * of a batch (after an op that would have set good on e). */
static void refused_everywhere(t_client *c, ull e, const char *good, const char *value) {
  char *msg = NULL;
  if (ERR_MESSAGE(c, "BAD_REQUEST", &msg,
                  "{\"cmd\":\"transform.set_local\",\"world\":\"bad\",\"entity\":%llu,"
                  "\"matrix_b64\":%s}",
                  e, value))
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "matrix_b64"));
  free(msg);
  ERR(c, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_world\",\"world\":\"bad\",\"entity\":%llu,\"matrix_b64\":%s}", e,
      value);
  ERR(c, "BAD_REQUEST", "{\"cmd\":\"transform.create\",\"world\":\"bad\",\"matrix_b64\":%s}",
      value);
  ERR(c, "BAD_REQUEST",
      "{\"cmd\":\"batch\",\"world\":\"bad\",\"ops\":[{\"cmd\":\"transform.set_local\","
      "\"entity\":%llu,\"matrix_b64\":\"%s\"},{\"cmd\":\"transform.create\",\"matrix_b64\":%s}]}",
      e, good, value);
}

/* Every malformed matrix_b64, in each command that takes a spec and inside a batch, is
 * BAD_REQUEST naming the field, and nothing changes. */
static void test_malformed(void) {
  t_client c;
  OPEN(c);
  hello(&c, "b64");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"bad\"}");
  float m[16];
  b64_random_matrix(&rng, m);
  ull e = create_b64(&c, "bad", m);
  char good[SCN_B64_MATRIX_LEN + 1];
  b64_text(m, good);
  char shorter[88], longer[100], star[89], dash[89], under[89], space[89], nopad[89], wrongpad[89],
      early[89], three[89], bits[89], inf[89], nan[89];
  snprintf(shorter, sizeof shorter, "%.86s=", good);
  snprintf(longer, sizeof longer, "%sAAAA", good);
#define VARY(buf, at, ch) (memcpy((buf), good, 89), (buf)[at] = (ch))
  VARY(star, 10, '*');
  VARY(dash, 20, '-'); /* the URL-safe alphabet is not the standard one */
  VARY(under, 30, '_');
  VARY(space, 40, ' ');
  VARY(nopad, 87, 'A');
  nopad[86] = 'A';
  VARY(wrongpad, 87, 'A');
  VARY(early, 50, '=');
  VARY(three, 85, '=');
  static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  VARY(bits, 85, a[(strchr(a, good[85]) - a) | 1]);
#undef VARY
  /* the bytes of a matrix holding an infinity, then a NaN (the encoder of matrices would write
   * them as finite values) */
  uint8_t raw[64];
  memcpy(raw, m, sizeof raw);
  raw[20] = 0x00, raw[21] = 0x00, raw[22] = 0x80, raw[23] = 0x7f; /* +inf, little-endian */
  scn_b64_encode(inf, raw, sizeof raw);
  inf[88] = '\0';
  raw[22] = 0xc0; /* a quiet NaN */
  scn_b64_encode(nan, raw, sizeof raw);
  nan[88] = '\0';
  const char *texts[] = {shorter,  longer, star,  dash, under, space, nopad,
                         wrongpad, early,  three, bits, inf,   nan};
  const char *others[] = {"\"\"", "\"AAAA\"", "16", "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]",
                          "null", "true",     "{}", "\"\\u00e9AAA\""};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    char quoted[120];
    snprintf(quoted, sizeof quoted, "\"%s\"", texts[i]);
    refused_everywhere(&c, e, good, quoted);
  }
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
    refused_everywhere(&c, e, good, others[i]);
  /* both forms of a matrix, or a matrix with parts (set_local and set_world take "partial"
   * too, to set only parts) */
  const char *with[] = {"\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]", "\"t\":[1,2,3]",
                        "\"r\":[0,0,0,1]", "\"s\":2", "\"partial\":true"};
  for (int i = 0; i < 5; i++) {
    for (int world_space = 0; world_space < 2; world_space++)
      ERR(&c, "BAD_REQUEST",
          "{\"cmd\":\"transform.%s\",\"world\":\"bad\",\"entity\":%llu,\"matrix_b64\":\"%s\","
          "%s}",
          world_space ? "set_world" : "set_local", e, good, with[i]);
    if (i < 4)
      ERR(&c, "BAD_REQUEST",
          "{\"cmd\":\"transform.create\",\"world\":\"bad\",%s,\"matrix_b64\":\"%s\"}", with[i],
          good);
  }
  /* nothing changed: the one transform, its matrix to the bit, no new entity */
  float l[16], w[16];
  if (get_both(&c, "bad", e, l, w, NULL))
    CU_ASSERT_TRUE(same_bits(l, m) && same_bits(w, m));
  cJSON *r = OK(&c, "{\"cmd\":\"world.list\"}");
  for (const cJSON *x = cJSON_GetObjectItemCaseSensitive(r, "worlds")->child; x; x = x->next)
    if (t_resp_str_is(x, "name", "bad"))
      CHECK(t_resp_num(x, "transforms") == 1, r);
  cJSON_Delete(r);
  r = OK(&c, "{\"cmd\":\"entity.create\"}");
  CHECK(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "entities"), 0)->valuedouble ==
            (double)e + 1,
        r);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"bad\"}");
  t_client_close(&c);
}

/* A world that keeps history: a get and a relative at a past tick answer, in b64, the matrix
 * set then, to the bit. */
static void test_past_ticks(void) {
  t_client c;
  OPEN(c);
  hello(&c, "b64");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"past\",\"history\":100}");
  float a[16], b[16], ident[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  b64_random_matrix(&rng, a);
  b64_random_matrix(&rng, b);
  ull e = create_b64(&c, "past", a), o = create_b64(&c, "past", ident);
  char ta[SCN_B64_MATRIX_LEN + 1], tb[SCN_B64_MATRIX_LEN + 1];
  b64_text(a, ta);
  b64_text(b, tb);
  /* the tick that has a: a get answers the last tick run, once a tick has run since the set */
  t_sleep_ms(150);
  cJSON *r = OK(&c, "{\"cmd\":\"transform.get\",\"world\":\"past\",\"entity\":%llu}", e);
  double tick_a = t_resp_num(r, "tick");
  CHECK(tick_a >= 1 && t_resp_str_is(r, "local", ta), r);
  cJSON_Delete(r);
  OKD(&c,
      "{\"cmd\":\"transform.set_local\",\"world\":\"past\",\"entity\":%llu,\"matrix_b64\":\"%s\"}",
      e, tb);
  t_sleep_ms(150);
  r = OK(&c, "{\"cmd\":\"transform.get\",\"world\":\"past\",\"entity\":%llu,\"tick\":%.0f}", e,
         tick_a);
  CHECK(t_resp_str_is(r, "local", ta) && t_resp_str_is(r, "world", ta), r);
  cJSON_Delete(r);
  r = OK(&c,
         "{\"cmd\":\"transform.relative\",\"world\":\"past\",\"entity\":%llu,\"to\":%llu,"
         "\"tick\":%.0f}",
         e, o, tick_a);
  CHECK(t_resp_str_is(r, "matrix", ta), r);
  cJSON_Delete(r);
  r = OK(&c, "{\"cmd\":\"transform.get\",\"world\":\"past\",\"entity\":%llu}", e);
  CHECK(t_resp_str_is(r, "local", tb), r);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"past\"}");
  t_client_close(&c);
}

/* hello's "matrices": json or b64, anything else BAD_REQUEST (the form unchanged); without it
 * the form stays; with --auth-token the token must be right, and a refused hello neither
 * authenticates nor changes the form. */
static void test_hello(void) {
  t_client c;
  OPEN(c);
  const char *badv[] = {"\"xml\"", "\"B64\"", "\"base64\"", "1", "null", "true", "[\"b64\"]"};
  for (size_t i = 0; i < sizeof badv / sizeof badv[0]; i++)
    ERR(&c, "BAD_REQUEST", "{\"cmd\":\"hello\",\"matrices\":%s}", badv[i]);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"hl\"}");
  float m[16];
  b64_random_matrix(&rng, m);
  ull e = create_b64(&c, "hl", m);
  float l[16], w[16];
  bool b64 = true;
  get_both(&c, "hl", e, l, w, &b64);
  CU_ASSERT_FALSE(b64);
  hello(&c, "b64");
  cJSON *r = OK(&c, "{\"cmd\":\"hello\"}");
  CHECK(t_resp_str_is(r, "matrices", "b64"), r);
  cJSON_Delete(r);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"hello\",\"matrices\":\"yaml\"}");
  get_both(&c, "hl", e, l, w, &b64);
  CU_ASSERT_TRUE(b64);
  hello(&c, "json");
  get_both(&c, "hl", e, l, w, &b64);
  CU_ASSERT_FALSE(b64);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"hl\"}");
  t_client_close(&c);

  t_daemon d;
  t_client a;
  const char *args[] = {"--auth-token", "sesame", NULL};
  if (!START_CONNECTED(&d, &a, args))
    return;
  ERR(&a, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"matrices\":\"b64\"}");
  ERR(&a, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"wrong\",\"matrices\":\"b64\"}");
  ERR(&a, "BAD_REQUEST", "{\"cmd\":\"hello\",\"token\":\"sesame\",\"matrices\":\"b65\"}");
  ERR(&a, "UNAUTHORIZED", "{\"cmd\":\"world.list\"}"); /* the refused hello did not authenticate */
  r = OK(&a, "{\"cmd\":\"hello\",\"token\":\"sesame\"}");
  CHECK(t_resp_str_is(r, "matrices", "json"), r); /* nor change the form */
  cJSON_Delete(r);
  r = OK(&a, "{\"cmd\":\"hello\",\"token\":\"sesame\",\"matrices\":\"b64\"}");
  CHECK(t_resp_str_is(r, "matrices", "b64"), r);
  cJSON_Delete(r);
  OKD(&a, "{\"cmd\":\"world.create\",\"world\":\"t\"}");
  e = create_b64(&a, "t", m);
  get_both(&a, "t", e, l, w, &b64);
  CU_ASSERT_TRUE(b64 && same_bits(l, m));
  t_client_close(&a);
  STOP_OK(&d, 10000);
}

/* A subscriber switches form every few frames while one transform (of n, all under one root,
 * so a frame holds n + 1 matrices) moves step by step; each frame before a hello's answer is in
 * the old form and each after it in the new one, and every step arrives exactly once, in
 * order. With n past 4095 every frame is written in slices over several loop turns; the hellos
 * are sent at different delays after the move, so that some land while a frame is being
 * written. */
static void switching(int n) {
  t_client ctl, s;
  OPEN(ctl);
  OPEN(s);
  char world[16];
  snprintf(world, sizeof world, "sw%d", n);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  cJSON *r = OK(&ctl, "{\"cmd\":\"transform.create\",\"world\":\"%s\"}", world);
  ull root = t_resp_id(r, "entity");
  cJSON_Delete(r);
  text ops = {0};
  for (int done = 0; done < n;) {
    text_free(&ops);
    text_addf(&ops, "{\"cmd\":\"batch\",\"world\":\"%s\",\"ops\":[", world);
    for (int k = 0; k < 2000 && done < n; k++, done++)
      text_addf(&ops, "%s{\"cmd\":\"transform.create\",\"parent\":%llu,\"t\":[%d,1,2]}",
                k ? "," : "", root, done);
    text_addf(&ops, "]}");
    OKD(&ctl, "%s", text_str(&ops));
  }
  text_free(&ops);
  OKD(&s, "{\"cmd\":\"subscribe\",\"world\":\"%s\"}", world);
  bool b64 = false;
  cJSON *f = next_frame(&s, b64); /* full */
  cJSON_Delete(f);
  double last_tick = 0;
  int steps = n > 4095 ? 24 : 12, seen = 0;
  for (int step = 1; step <= steps; step++) {
    OKD(&ctl, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[%d,0,0]}",
        world, root, step);
    if (step % 2 == 0) {
      /* switch: the answer comes after every frame in the old form */
      t_sleep_ms((long)(b64_next32(&rng) % 60));
      t_client_send(&s, b64 ? "{\"cmd\":\"hello\",\"matrices\":\"json\"}"
                            : "{\"cmd\":\"hello\",\"matrices\":\"b64\"}");
    }
    bool answered = step % 2 != 0;
    bool got = false;
    for (long end = t_now_ms() + FRAME_WAIT_MS; (!got || !answered) && t_now_ms() < end;) {
      cJSON *j = t_recv_object(&s, end - t_now_ms());
      if (!j)
        break;
      if (!t_resp_has(j, "event")) {
        CHECK(t_resp_ok(j) && t_resp_has(j, "matrices"), j);
        b64 = t_resp_str_is(j, "matrices", "b64");
        answered = true;
        cJSON_Delete(j);
        continue;
      }
      ull *ids;
      float(*ms)[16];
      int count = frame_set(j, b64, &ids, &ms);
      CHECK(count == n + 1, j); /* in the form in effect, every transform moved */
      CHECK(t_resp_num(j, "tick") > last_tick, j);
      last_tick = t_resp_num(j, "tick");
      for (int i = 0; i < count; i++)
        if (ids[i] == root) {
          CHECK(ms[i][12] == (float)step, j); /* this step, not one before or after */
          got = true;
          seen++;
        }
      free(ids);
      free(ms);
      cJSON_Delete(j);
    }
    CU_ASSERT_TRUE(got && answered);
  }
  CU_ASSERT_EQUAL(seen, steps);
  QUIET(&s, 200);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world);
  t_client_close(&ctl);
  t_client_close(&s);
}

static void test_switch_small(void) { switching(20); }
static void test_switch_sliced(void) { switching(40000); }

/* Two subscribers of one world, one in each form: frames at the same ticks, with the same ids
 * and the same float32 values. */
static void test_two_forms_same_ticks(void) {
  enum { N = 40, ROUNDS = 8 };
  t_client ctl, bk, jk;
  OPEN(ctl);
  OPEN(bk);
  OPEN(jk);
  hello(&bk, "b64");
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"tw\"}");
  ull ids[N];
  float m[16];
  for (int i = 0; i < N; i++) {
    b64_random_matrix(&rng, m);
    ids[i] = create_b64(&ctl, "tw", m);
  }
  OKD(&bk, "{\"cmd\":\"subscribe\",\"world\":\"tw\"}");
  OKD(&jk, "{\"cmd\":\"subscribe\",\"world\":\"tw\"}");
  cJSON_Delete(next_frame(&bk, true));
  cJSON_Delete(next_frame(&jk, false));
  char t[SCN_B64_MATRIX_LEN + 1];
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = round % 3; i < N; i += 2) {
      if (round > 4 && i == 1)
        continue; /* destroyed */
      b64_random_matrix(&rng, m);
      b64_text(m, t);
      OKD(&ctl,
          "{\"cmd\":\"transform.set_local\",\"world\":\"tw\",\"entity\":%llu,"
          "\"matrix_b64\":\"%s\"}",
          ids[i], t);
    }
    if (round == 4)
      OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"tw\",\"entity\":%llu}", ids[1]);
    cJSON *fb = next_frame(&bk, true), *fj = next_frame(&jk, false);
    if (!fb || !fj) {
      cJSON_Delete(fb);
      cJSON_Delete(fj);
      break;
    }
    CHECK(t_resp_num(fb, "tick") == t_resp_num(fj, "tick"), fb);
    CHECK(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(fb, "removed"),
                        cJSON_GetObjectItemCaseSensitive(fj, "removed"), true),
          fb);
    ull *bi, *ji;
    float(*bm)[16], (*jm)[16];
    int nb = frame_set(fb, true, &bi, &bm), nj = frame_set(fj, false, &ji, &jm);
    CU_ASSERT_TRUE(nb == nj && nb > 0);
    for (int i = 0; i < nb && i < nj; i++)
      CU_ASSERT_TRUE(bi[i] == ji[i] && same_bits(bm[i], jm[i]));
    free(bi), free(ji), free(bm), free(jm);
    cJSON_Delete(fb);
    cJSON_Delete(fj);
  }
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"tw\"}");
  t_client_close(&ctl);
  t_client_close(&bk);
  t_client_close(&jk);
}

/* ---- registration ------------------------------------------------------------------------- */

static int suite_init(void) {
  const char *args[] = {"--tick-hz", "20", NULL};
  return t_daemon_start(&d20, args) == 0 ? 0 : -1;
}

static int suite_clean(void) { return t_suite_daemon_stop(&d20, 5000); }

int t_register_daemon_b64(void) {
  static const t_test tests[] = {
      {"round trip of random bits, both forms", test_round_trip},
      {"malformed matrix_b64 changes nothing", test_malformed},
      {"hello's matrices, with and without a token", test_hello},
      {"past ticks in b64", test_past_ticks},
      {"switching form mid-stream", test_switch_small},
      {"switching form while frames are written in slices", test_switch_sliced},
      {"two subscribers, one per form, same values at the same ticks", test_two_forms_same_ticks},
  };
  return T_ADD_SUITE("daemon_b64", suite_init, suite_clean, tests);
}

/* Unit tests of matrices in base64: the encoder against RFC 4648's vectors and a plain
 * reference, the strict decoder against every kind of malformed text (length, each byte outside
 * the alphabet at each place, padding, the bits before it), round trips of random float32 bit
 * patterns, non-finite elements, and the frame encoder writing the same frame in both forms and
 * in slices. No daemon, no sockets. */
#include "b64.h"
#include "b64_fixtures.h"
#include "core_fixtures.h"
#include "stream/frame.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint32_t next32(void) { return b64_next32(&rng); }
static void random_matrix(float m[16]) { b64_random_matrix(&rng, m); }

/* The textbook encoder, six bits at a time. */
static void reference_encode(char *out, const uint8_t *in, size_t n) {
  static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                 (i + 2 < n ? in[i + 2] : 0);
    out[o++] = a[v >> 18 & 63];
    out[o++] = a[v >> 12 & 63];
    out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? a[v & 63] : '=';
  }
}

static void test_rfc_vectors(void) {
  static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  static const char *const coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (int i = 0; i < 7; i++) {
    char out[16] = {0};
    size_t n = strlen(plain[i]);
    scn_b64_encode(out, plain[i], n);
    CU_ASSERT_EQUAL(SCN_B64_LEN(n), strlen(coded[i]));
    CU_ASSERT_STRING_EQUAL(out, coded[i]);
  }
  /* every length up to 300 against the reference, random bytes */
  uint8_t bytes[300];
  char got[404], want[404];
  for (size_t n = 0; n <= sizeof bytes; n++) {
    for (size_t i = 0; i < n; i++)
      bytes[i] = (uint8_t)next32();
    scn_b64_encode(got, bytes, n);
    reference_encode(want, bytes, n);
    CU_ASSERT_EQUAL(memcmp(got, want, SCN_B64_LEN(n)), 0);
  }
}

/* Text of any length (a packed frame's payload): every length round-trips; a length that is not
 * a multiple of 4, a character outside the alphabet (its index given), padding inside or too
 * long, and bits the last byte does not use are refused, writing no count. */
static void test_any_length(void) {
  static const char *const coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE="};
  for (int i = 0; i < 6; i++) {
    uint8_t out[8];
    size_t n = 99;
    CU_ASSERT_EQUAL(scn_b64_decode_bytes(coded[i], strlen(coded[i]), out, &n, NULL), SCN_B64_OK);
    CU_ASSERT_EQUAL(n, (size_t)i);
    CU_ASSERT_EQUAL(memcmp(out, "foobar", n), 0);
  }
  uint8_t bytes[300], back[300];
  char text[404];
  for (size_t n = 0; n <= sizeof bytes; n++) {
    for (size_t i = 0; i < n; i++)
      bytes[i] = (uint8_t)next32();
    scn_b64_encode(text, bytes, n);
    size_t got = 0;
    CU_ASSERT_EQUAL(scn_b64_decode_bytes(text, SCN_B64_LEN(n), back, &got, NULL), SCN_B64_OK);
    CU_ASSERT_TRUE(got == n && SCN_B64_DECODED_MAX(SCN_B64_LEN(n)) >= n &&
                   memcmp(back, bytes, n) == 0);
  }
  static const struct {
    const char *text;
    scn_b64_status st;
    size_t at;
  } bad[] = {{"Zg=", SCN_B64_LENGTH, 0},    {"Zm9vY", SCN_B64_LENGTH, 0},
             {"Zm9v*g==", SCN_B64_CHAR, 4}, {"====", SCN_B64_PADDING, 0},
             {"Z===", SCN_B64_PADDING, 0},  {"Zg==Zm9v", SCN_B64_PADDING, 0},
             {"Zh==", SCN_B64_PAD_BITS, 0}, {"Zm9=", SCN_B64_PAD_BITS, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint8_t out[8];
    size_t n = 99, at = 99;
    CU_ASSERT_EQUAL(scn_b64_decode_bytes(bad[i].text, strlen(bad[i].text), out, &n, &at),
                    bad[i].st);
    CU_ASSERT_EQUAL(n, 0);
    if (bad[i].st == SCN_B64_CHAR)
      CU_ASSERT_EQUAL(at, bad[i].at);
  }
}

/* A matrix's text is the base64 of its little-endian bytes, and decodes to the same bits. */
static void test_matrix_round_trip(void) {
  for (int k = 0; k < 20000; k++) {
    float m[16], back[16];
    random_matrix(m);
    uint8_t le[64];
    for (int i = 0; i < 16; i++) {
      uint32_t u;
      memcpy(&u, &m[i], 4);
      for (int b = 0; b < 4; b++)
        le[i * 4 + b] = (uint8_t)(u >> (8 * b));
    }
    char text[SCN_B64_MATRIX_LEN], want[SCN_B64_MATRIX_LEN];
    scn_b64_encode_matrices(text, (const float(*)[16])m, 1);
    reference_encode(want, le, 64);
    CU_ASSERT_EQUAL(memcmp(text, want, sizeof text), 0);
    CU_ASSERT_EQUAL(text[86], '=');
    CU_ASSERT_EQUAL(text[87], '=');
    CU_ASSERT_EQUAL(scn_b64_decode_matrix(text, sizeof text, back, NULL), SCN_B64_OK);
    CU_ASSERT_EQUAL(memcmp(m, back, 64), 0);
  }
}

/* Many matrices at once: the text of the whole equals that of its parts cut at multiples of
 * three matrices, and decodes back. */
static void test_many_matrices(void) {
  enum { N = 40 };
  float m[N][16], back[N][16];
  for (int i = 0; i < N; i++)
    random_matrix(m[i]);
  for (size_t n = 0; n <= N; n++) {
    size_t len = SCN_B64_LEN(64 * n);
    char *whole = malloc(len + 1), *parts = malloc(len + 1);
    scn_b64_encode_matrices(whole, (const float(*)[16])m, n);
    size_t at = 0;
    for (size_t from = 0; from < n; from += 9) {
      size_t k = n - from < 9 ? n - from : 9;
      scn_b64_encode_matrices(parts + at, (const float(*)[16])(m + from), k);
      at += SCN_B64_LEN(64 * k);
    }
    CU_ASSERT_EQUAL(at, len);
    CU_ASSERT_EQUAL(memcmp(whole, parts, len), 0);
    memset(back, 0xAB, sizeof back);
    CU_ASSERT_EQUAL(scn_b64_decode_matrices(whole, len, back, n, NULL), SCN_B64_OK);
    CU_ASSERT_EQUAL(memcmp(m, back, 64 * n), 0);
    if (n) {
      CU_ASSERT_EQUAL(scn_b64_decode_matrices(whole, len - 4, back, n, NULL), SCN_B64_LENGTH);
      CU_ASSERT_EQUAL(scn_b64_decode_matrices(whole, len, back, n - 1, NULL), SCN_B64_LENGTH);
    }
    free(whole);
    free(parts);
  }
}

static scn_b64_status decode_text(const char *s, size_t len, size_t *at) {
  float m[16];
  return scn_b64_decode_matrix(s, len, m, at);
}

/* Every malformed text is refused, for its first fault: length, a byte outside the alphabet
 * (each of them, at each place), padding, or bits before the padding. */
static void test_malformed(void) {
  float m[16];
  random_matrix(m);
  char good[SCN_B64_MATRIX_LEN + 2];
  scn_b64_encode_matrices(good, (const float(*)[16])m, 1);
  good[88] = good[89] = 'A';
  for (size_t len = 0; len <= 90; len++)
    if (len != 88)
      CU_ASSERT_EQUAL(decode_text(good, len, NULL), SCN_B64_LENGTH);
  char bad[SCN_B64_MATRIX_LEN];
  int refused = 0;
  for (int c = 0; c < 256; c++) {
    bool in_alphabet = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                       c == '+' || c == '/';
    if (in_alphabet || c == '=')
      continue;
    for (size_t i = 0; i < SCN_B64_MATRIX_LEN; i++) {
      memcpy(bad, good, sizeof bad);
      bad[i] = (char)c;
      size_t at = 99;
      scn_b64_status st = decode_text(bad, sizeof bad, &at);
      refused += st == SCN_B64_CHAR && at == i;
    }
  }
  CU_ASSERT_EQUAL(refused, (256 - 65) * 88);
  /* '=' anywhere before the padding, or missing, or one data character in its place */
  for (size_t i = 0; i < 86; i++) {
    memcpy(bad, good, sizeof bad);
    bad[i] = '=';
    CU_ASSERT_EQUAL(decode_text(bad, sizeof bad, NULL), SCN_B64_PADDING);
  }
  memcpy(bad, good, sizeof bad);
  bad[87] = 'A';
  CU_ASSERT_EQUAL(decode_text(bad, sizeof bad, NULL), SCN_B64_PADDING);
  bad[86] = 'A';
  CU_ASSERT_EQUAL(decode_text(bad, sizeof bad, NULL), SCN_B64_PADDING);
  memcpy(bad, good, sizeof bad);
  bad[86] = 'Q';
  CU_ASSERT_EQUAL(decode_text(bad, sizeof bad, NULL), SCN_B64_PADDING);
  /* the 4 bits after the last byte must be 0: 15 other characters decode to the same bytes */
  static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  int v85 = (int)(strchr(a, good[85]) - a);
  CU_ASSERT_EQUAL(v85 & 15, 0);
  for (int low = 1; low < 16; low++) {
    memcpy(bad, good, sizeof bad);
    bad[85] = a[(v85 & ~15) | low];
    CU_ASSERT_EQUAL(decode_text(bad, sizeof bad, NULL), SCN_B64_PAD_BITS);
  }
  /* a bad character is reported before the padding */
  memcpy(bad, good, sizeof bad);
  bad[87] = 'A';
  bad[3] = '*';
  size_t at = 0;
  CU_ASSERT_EQUAL(decode_text(bad, sizeof bad, &at), SCN_B64_CHAR);
  CU_ASSERT_EQUAL(at, 3);
  CU_ASSERT_EQUAL(decode_text(good, 88, NULL), SCN_B64_OK);
}

/* An infinity is written as the largest finite float32 of its sign and a NaN as 0, as json
 * mode writes them, so every matrix received can be sent back. */
static void test_non_finite(void) {
  float m[16], back[16];
  for (int i = 0; i < 16; i++)
    m[i] = (float)i;
  m[1] = INFINITY;
  m[2] = -INFINITY;
  m[3] = NAN;
  m[4] = -NAN;
  char text[SCN_B64_MATRIX_LEN];
  scn_b64_encode_matrices(text, (const float(*)[16])m, 1);
  CU_ASSERT_EQUAL(scn_b64_decode_matrix(text, sizeof text, back, NULL), SCN_B64_OK);
  CU_ASSERT_EQUAL(back[1], FLT_MAX);
  CU_ASSERT_EQUAL(back[2], -FLT_MAX);
  CU_ASSERT_EQUAL(back[3], 0.0f);
  CU_ASSERT_EQUAL(back[4], 0.0f);
  CU_ASSERT_EQUAL(back[15], 15.0f);
  /* the decoder takes what it is given: the core refuses a non-finite matrix */
  float inf[16] = {0};
  uint8_t bytes[64] = {0};
  bytes[2] = 0x80, bytes[3] = 0x7f; /* +inf in element 0 */
  scn_b64_encode(text, bytes, 64);
  CU_ASSERT_EQUAL(scn_b64_decode_matrix(text, sizeof text, inf, NULL), SCN_B64_OK);
  CU_ASSERT_TRUE(isinf(inf[0]));
}

/* ---- the frame encoder ------------------------------------------------------------------ */

/* The body of f in form, written in slices of budget (SIZE_MAX: at once), as one frame line. */
static cJSON *frame_line(const scn_frame *f, scn_matrix_form form, size_t budget, char **text) {
  scn_buf b = {0};
  scn_buf_adds(&b, "{\"event\":\"frame\",\"sub\":1");
  size_t at = 0;
  int slices = 0;
  while (!scn_frame_write(&b, f, form, &at, budget))
    slices++;
  scn_buf_addc(&b, '\0');
  cJSON *j = cJSON_Parse(b.data);
  if (text)
    *text = strdup(b.data);
  scn_buf_free(&b);
  return j;
}

/* One world, a full frame and a delta with a removal: both forms carry the same ids, the same
 * float32 values and every other field alike; written in slices (of three matrices and more)
 * the text is the same as at once. */
static void test_frame_forms(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  enum { N = 50 };
  scn_entity ids[N];
  float want[N][16];
  for (int i = 0; i < N; i++) {
    random_matrix(want[i]);
    want[i][3] = want[i][7] = want[i][11] = 0, want[i][15] = 1;
    ids[i] = mk(w, s, SCN_ENTITY_NONE, NULL, want[i]);
  }
  scn_world_keep_events(w, true);
  uint64_t t1 = scn_world_close_tick(w);
  scn_frame_encoder enc = {0};
  scn_frame f = {0};
  scn_frame_key full = {.world = w, .root = SCN_ENTITY_NONE, .since = 0, .full = true};
  scn_frame_encode(&enc, &full, NULL, &f);
  CU_ASSERT_TRUE(f.ok && !f.empty && f.n == N);
  char *whole = NULL;
  cJSON *js = frame_line(&f, SCN_MATRICES_JSON, SIZE_MAX, NULL);
  cJSON *bs = frame_line(&f, SCN_MATRICES_B64, SIZE_MAX, &whole);
  CU_ASSERT_PTR_NOT_NULL_FATAL(js);
  CU_ASSERT_PTR_NOT_NULL_FATAL(bs);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(js), 7);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(bs), 8);
  const char *same[] = {"event", "sub", "world", "tick", "full", "removed"};
  for (int k = 0; k < 6; k++)
    CU_ASSERT_TRUE(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(js, same[k]),
                                 cJSON_GetObjectItemCaseSensitive(bs, same[k]), true));
  CU_ASSERT_FALSE(cJSON_HasObjectItem(bs, "set"));
  const cJSON *set = cJSON_GetObjectItemCaseSensitive(js, "set");
  const cJSON *bid = cJSON_GetObjectItemCaseSensitive(bs, "ids");
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(bs, "ms");
  CU_ASSERT_FATAL(cJSON_IsString(ms) && cJSON_GetArraySize(bid) == N);
  float got[N][16];
  CU_ASSERT_EQUAL(strlen(ms->valuestring), SCN_B64_LEN(64 * N));
  CU_ASSERT_EQUAL(scn_b64_decode_matrices(ms->valuestring, strlen(ms->valuestring), got, N, NULL),
                  SCN_B64_OK);
  int i = 0, matched = 0;
  for (const cJSON *e = set->child, *id = bid->child; e && id; e = e->next, id = id->next, i++) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "m");
    double eid = cJSON_GetObjectItemCaseSensitive(e, "e")->valuedouble;
    CU_ASSERT_EQUAL(eid, id->valuedouble);
    float jm[16];
    int k = 0;
    for (const cJSON *x = m->child; x; x = x->next)
      jm[k++] = (float)x->valuedouble;
    CU_ASSERT_EQUAL(memcmp(jm, got[i], 64), 0);
    for (int j = 0; j < N; j++)
      if ((double)ids[j] == eid)
        matched += memcmp(want[j], got[i], 64) == 0;
  }
  CU_ASSERT_EQUAL(matched, N);
  /* in slices: the same text */
  for (size_t budget = 3; budget <= 60; budget += 7) {
    char *sliced = NULL;
    cJSON_Delete(frame_line(&f, SCN_MATRICES_B64, budget, &sliced));
    CU_ASSERT_STRING_EQUAL(sliced, whole);
    free(sliced);
  }
  cJSON_Delete(js);
  cJSON_Delete(bs);
  free(whole);

  /* a delta: one moved, one destroyed */
  float moved[16];
  mat_t(moved, 1, 2, 3);
  OK(scn_transform_set_local(w, ids[4], moved));
  OK(scn_transform_destroy(w, ids[9], false));
  scn_world_close_tick(w);
  scn_frame_key delta = {.world = w, .root = SCN_ENTITY_NONE, .since = t1, .full = false};
  scn_frame_encode(&enc, &delta, NULL, &f);
  CU_ASSERT_TRUE(f.ok && !f.empty && f.n == 1);
  js = frame_line(&f, SCN_MATRICES_JSON, SIZE_MAX, NULL);
  char *text = NULL;
  bs = frame_line(&f, SCN_MATRICES_B64, SIZE_MAX, &text);
  CU_ASSERT_TRUE(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(js, "removed"),
                               cJSON_GetObjectItemCaseSensitive(bs, "removed"), true));
  CU_ASSERT_EQUAL(
      cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(bs, "removed"), 0)->valuedouble,
      (double)ids[9]);
  ms = cJSON_GetObjectItemCaseSensitive(bs, "ms");
  CU_ASSERT_EQUAL(scn_b64_decode_matrices(ms->valuestring, strlen(ms->valuestring), got, 1, NULL),
                  SCN_B64_OK);
  CU_ASSERT_EQUAL(memcmp(got[0], moved, 64), 0);
  cJSON_Delete(js);
  cJSON_Delete(bs);
  free(text);

  /* only a removal: an empty set in each form */
  OK(scn_transform_destroy(w, ids[10], false));
  uint64_t t2 = scn_world_tick(w) - 1;
  scn_world_close_tick(w);
  delta.since = t2;
  scn_frame_encode(&enc, &delta, NULL, &f);
  CU_ASSERT_TRUE(f.ok && !f.empty && f.n == 0);
  bs = frame_line(&f, SCN_MATRICES_B64, SIZE_MAX, &text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, ",\"ids\":[],\"ms\":\"\",\"removed\":["));
  js = frame_line(&f, SCN_MATRICES_JSON, SIZE_MAX, NULL);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(js, "set")), 0);
  cJSON_Delete(js);
  cJSON_Delete(bs);
  free(text);
  scn_frame_free(&f);
  scn_frame_encoder_free(&enc);
  scn_scene_free(s);
}

int t_register_base64(void) {
  static const t_test tests[] = {
      {"RFC 4648 vectors and every length", test_rfc_vectors},
      {"text of any length decoded strictly", test_any_length},
      {"matrix round trip of random bits", test_matrix_round_trip},
      {"many matrices at once and in parts", test_many_matrices},
      {"malformed texts", test_malformed},
      {"non-finite elements", test_non_finite},
      {"frame in both forms and in slices", test_frame_forms},
  };
  return T_ADD_SUITE("base64", NULL, NULL, tests);
}

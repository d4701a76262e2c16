/* Unit tests of request decoding: the one validating pass over a request line (numbers
 * against JSON's grammar, deep nesting, the flat form against cJSON's tree), the typed fields
 * (entity ids, the other fields, transform specifications whole and partial), and the raw id
 * and ops a batch keeps. No daemon, no sockets. */
#include "codec.h"
#include "request.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- codec: parsing -------------------------------------------------------------------------- */

/* One request object reused by every parse, as the dispatcher does. */
static scn_request rq;

/* Parses a request line; the parsed root (or NULL when refused). */
static cJSON *parse_n(const char *s, size_t len, scn_wire_error *err) {
  return scn_request_parse(&rq, s, len, err) == 0 ? rq.root : NULL;
}

static cJSON *parse(const char *s, scn_wire_error *err) { return parse_n(s, strlen(s), err); }

static void expect_parse_fails(const char *s, size_t len, scn_wire_code code) {
  scn_wire_error err = {.code = SCN_W_INTERNAL};
  cJSON *r = parse_n(s, len, &err);
  CU_ASSERT_PTR_NULL(r);
  CU_ASSERT_EQUAL(err.code, code);
  CU_ASSERT(strlen(err.message) > 0);
  cJSON_Delete(r);
}

/* A string literal and its length (it may hold NUL bytes). */
#define LIT(s) s, sizeof(s) - 1

static void test_parse_request(void) {
  scn_wire_error err;
  cJSON *r = parse("{\"cmd\":\"ping\",\"id\":[1,{\"a\":null}]}", &err);
  CU_ASSERT_PTR_NOT_NULL(r);
  CU_ASSERT_TRUE(cJSON_IsObject(r));
  CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(r, "cmd")->valuestring, "ping");
  cJSON_Delete(r);
  /* Whitespace around the object is fine. */
  r = parse("  \t{ \"cmd\" : \"ping\" } \t \r", &err);
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);
  /* Only the given length is read. */
  const char *two = "{\"cmd\":\"ping\"}{\"cmd\":\"x\"}";
  r = parse_n(two, 14, &err);
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);
  /* Non-ASCII text in strings. */
  r = parse("{\"cmd\":\"ping\",\"n\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}", &err);
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);

  static const char *not_objects[] = {
      "[1,2]", "\"cmd\"", "42", "null", "true", "[]", "[{\"cmd\":\"ping\"}]", "-1.5"};
  for (size_t i = 0; i < sizeof not_objects / sizeof *not_objects; i++)
    expect_parse_fails(not_objects[i], strlen(not_objects[i]), SCN_W_BAD_JSON);
  static const char *broken[] = {"{",
                                 "{\"cmd\":",
                                 "{\"cmd\":\"ping\"",
                                 "{\"cmd\" \"ping\"}",
                                 "{cmd:\"ping\"}",
                                 "{'cmd':'ping'}",
                                 "{\"cmd\":\"ping\",}",
                                 "{\"a\":NaN}",
                                 "{\"a\":Infinity}",
                                 "{\"a\":+1}",
                                 "{\"a\":.5}",
                                 "{\"a\":0x10}",
                                 "{\"a\":tru}",
                                 "{\"a\":\"\\q\"}",
                                 "{\"a\":\"\\ud800\"}",
                                 "}"};
  for (size_t i = 0; i < sizeof broken / sizeof *broken; i++)
    expect_parse_fails(broken[i], strlen(broken[i]), SCN_W_BAD_JSON);
  /* strtod takes these, JSON does not (and an "id" is echoed as written). */
  static const char *bad_numbers[] = {
      "{\"cmd\":\"ping\",\"id\":01}",     "{\"cmd\":\"ping\",\"id\":1.}",
      "{\"cmd\":\"ping\",\"id\":-.5}",    "{\"cmd\":\"ping\",\"id\":-01}",
      "{\"cmd\":\"ping\",\"id\":00}",     "{\"cmd\":\"ping\",\"id\":1.e5}",
      "{\"cmd\":\"ping\",\"id\":[1,02]}", "{\"cmd\":\"ping\",\"a\":{\"b\":[0.5,1.]}}",
      "{\"a\":01.5,\"cmd\":\"ping\"}",    "{\"cmd\":\"ping\",\"id\":01,\"s\":\"\\u0000\"}"};
  for (size_t i = 0; i < sizeof bad_numbers / sizeof *bad_numbers; i++)
    expect_parse_fails(bad_numbers[i], strlen(bad_numbers[i]), SCN_W_BAD_JSON);
  /* Valid numbers of every shape, and number-like text inside strings, still parse. */
  static const char *good_numbers[] = {
      "{\"cmd\":\"ping\",\"id\":0}",
      "{\"cmd\":\"ping\",\"id\":-0}",
      "{\"cmd\":\"ping\",\"id\":[0.5,-0.25,10,1e5,1E+5,1e-05,2.5e-3,-0.0,100]}",
      "{\"cmd\":\"ping\",\"id\":\"01 1. -.5\"}",
      "{\"cmd\":\"ping\",\"id\":\"a\\\"01\"}",
      "{\"cmd\":\"ping\",\"01\":1}"};
  for (size_t i = 0; i < sizeof good_numbers / sizeof *good_numbers; i++) {
    r = parse(good_numbers[i], &err);
    if (!r)
      fprintf(stderr, "refused a valid request: %s (%s)\n", good_numbers[i], err.message);
    CU_ASSERT_PTR_NOT_NULL(r);
    cJSON_Delete(r);
  }
  /* Trailing garbage. */
  static const char *trailing[] = {"{\"cmd\":\"ping\"} x", "{\"cmd\":\"ping\"}{}",
                                   "{\"cmd\":\"ping\"},", "{\"cmd\":\"ping\"}]",
                                   "{\"cmd\":\"ping\"} {\"cmd\":\"ping\"}"};
  for (size_t i = 0; i < sizeof trailing / sizeof *trailing; i++)
    expect_parse_fails(trailing[i], strlen(trailing[i]), SCN_W_BAD_JSON);
  expect_parse_fails(LIT("{\"cmd\":\"ping\"}\0"), SCN_W_BAD_JSON);
  /* Invalid UTF-8, inside and outside strings. */
  static const char *bad_utf8[] = {
      "{\"cmd\":\"\xff\"}",             /* never valid */
      "{\"cmd\":\"\xc0\x80\"}",         /* overlong NUL */
      "{\"cmd\":\"\xe0\x80\xaf\"}",     /* overlong '/' */
      "{\"cmd\":\"\xed\xa0\x80\"}",     /* surrogate */
      "{\"cmd\":\"\xf4\x90\x80\x80\"}", /* above U+10FFFF */
      "{\"cmd\":\"\xc3\"}",             /* truncated sequence */
      "{\"cmd\":\"\x80\"}",             /* lone continuation */
      "{\"cmd\":\"ping\"}\xc3",         /* truncated at the very end */
      "\xfe{\"cmd\":\"ping\"}",
  };
  for (size_t i = 0; i < sizeof bad_utf8 / sizeof *bad_utf8; i++)
    expect_parse_fails(bad_utf8[i], strlen(bad_utf8[i]), SCN_W_BAD_JSON);
  static const char mixed[] = "abc\xc3\xa9\xf0\x9f\x98\x80 long ascii run here";
  CU_ASSERT_TRUE(scn_utf8_valid(mixed, sizeof mixed - 1));
  CU_ASSERT_FALSE(scn_utf8_valid("abcdefgh\xff", 9));
  CU_ASSERT_TRUE(scn_utf8_valid("", 0));
  /* Raw control characters inside a string are not JSON. */
  expect_parse_fails(LIT("{\"cmd\":\"pi\x01ng\"}"), SCN_W_BAD_JSON);
  expect_parse_fails(LIT("{\"cmd\":\"pi\tng\"}"), SCN_W_BAD_JSON);
  expect_parse_fails(LIT("{\"cmd\":\"ping\",\"id\":\"a\0b\"}"), SCN_W_BAD_JSON);
  /* A string holding U+0000 cannot be represented: refused rather than cut short. */
  expect_parse_fails(LIT("{\"cmd\":\"ping\",\"id\":\"a\\u0000b\"}"), SCN_W_BAD_REQUEST);
  /* A \u without four hex digits is not JSON (cJSON alone would read it as U+0000, and a key
   * "id\u00\u000" as "id"). */
  expect_parse_fails(LIT("{\"cmd\":\"ping\",\"id\\u00\\u000\":[1]}"), SCN_W_BAD_JSON);
  expect_parse_fails(LIT("{\"cmd\":\"ping\",\"s\":\"\\u12G4\"}"), SCN_W_BAD_JSON);
  expect_parse_fails(LIT("{\"cmd\":\"ping\",\"s\":\"\\u12\"}"), SCN_W_BAD_JSON);
  r = parse("{\"cmd\":\"ping\",\"id\":\"a\\\\u0000b\\u0001\"}", &err);
  CU_ASSERT_PTR_NOT_NULL(r);
  if (r)
    CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(r, "id")->valuestring, "a\\u0000b\x01");
  cJSON_Delete(r);
}

/* JSON's number grammar, character by character (the reference for the validating pass, which
 * checks only what cJSON lets through). */
static bool json_number(const char *s) {
  size_t i = 0;
  if (s[i] == '-')
    i++;
  if (s[i] == '0')
    i++;
  else if (s[i] >= '1' && s[i] <= '9')
    while (s[i] >= '0' && s[i] <= '9')
      i++;
  else
    return false;
  if (s[i] == '.') {
    if (!(s[++i] >= '0' && s[i] <= '9'))
      return false;
    while (s[i] >= '0' && s[i] <= '9')
      i++;
  }
  if (s[i] == 'e' || s[i] == 'E') {
    if (s[++i] == '+' || s[i] == '-')
      i++;
    if (!(s[i] >= '0' && s[i] <= '9'))
      return false;
    while (s[i] >= '0' && s[i] <= '9')
      i++;
  }
  return s[i] == '\0';
}

/* Random runs of number characters as the value of "id": the request is refused exactly when
 * cJSON refuses it or JSON's grammar does. */
static void test_parse_numbers_random(void) {
  static const char alphabet[] = "0123456789.eE+-00..";
  uint64_t x = 88172645463325252ull;
  int checked = 0, refused = 0;
  for (int n = 0; n < 20000; n++) {
    char num[12];
    size_t len = 1 + n % 8;
    for (size_t i = 0; i < len; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      num[i] = alphabet[x % (sizeof alphabet - 1)];
    }
    num[len] = '\0';
    char line[64];
    snprintf(line, sizeof line, "{\"cmd\":\"ping\",\"id\":[1,%s]}", num);
    cJSON *alone = cJSON_Parse(line);
    scn_wire_error err;
    cJSON *r = parse(line, &err);
    bool want = alone && json_number(num);
    if ((r != NULL) != want)
      fprintf(stderr, "number %s: %s\n", num, r ? "accepted" : err.message);
    CU_ASSERT_EQUAL(r != NULL, want);
    checked += alone != NULL;
    refused += alone && !want;
    cJSON_Delete(alone);
    cJSON_Delete(r);
  }
  /* The sample holds enough of both kinds to mean something. */
  CU_ASSERT_TRUE(checked > 1000 && refused > 300);
}

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

/* The tree scn_request_parse builds is cJSON's: types, keys, strings, numbers to the bit, and
 * the links (prev of a first child is the last). */
static bool same_tree(const cJSON *a, const cJSON *b) {
  if (!a || !b)
    return a == b;
  bool same = (a->type & 0xFF) == (b->type & 0xFF) && a->valueint == b->valueint &&
              memcmp(&a->valuedouble, &b->valuedouble, sizeof(double)) == 0 &&
              (a->string ? b->string && !strcmp(a->string, b->string) : !b->string) &&
              (a->valuestring ? b->valuestring && !strcmp(a->valuestring, b->valuestring)
                              : !b->valuestring);
  const cJSON *x = a->child, *y = b->child;
  if (x && y)
    same &= x->prev && y->prev && !x->prev->next && !y->prev->next;
  for (; same && x && y; x = x->next, y = y->next)
    same = same_tree(x, y);
  return same && !x && !y;
}

/* Flat lines (strings, numbers, literals, arrays of numbers) take the flat form's shortcut;
 * whatever they hold, the tree is cJSON's, numbers included: random digits, fractions and
 * exponents around the limits of the exact fast path (2^53, 10^22) and past them. */
static void test_flat_form_is_cjson(void) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
#define NEXT() xorshift(&x)
  char line[1024];
  int mismatches = 0;
  for (int n = 0; n < 30000; n++) {
    char num[96];
    int k = 0;
    if (NEXT() % 3 == 0)
      num[k++] = '-';
    int digits = 1 + (int)(NEXT() % 22);
    num[k++] = (char)('1' + NEXT() % 9);
    for (int d = 1; d < digits; d++)
      num[k++] = (char)('0' + NEXT() % 10);
    if (NEXT() % 2) {
      num[k++] = '.';
      for (int d = 0, f = 1 + (int)(NEXT() % 20); d < f; d++)
        num[k++] = (char)('0' + NEXT() % 10);
    }
    if (NEXT() % 3 == 0) {
      const char *sign = NEXT() % 2 ? "-" : "+";
      k += snprintf(num + k, sizeof num - (size_t)k, "e%s%d", sign, (int)(NEXT() % 340));
    }
    num[k] = '\0';
    snprintf(line, sizeof line,
             "{\"cmd\":\"transform.set_local\" , \"world\":\"w\",\"entity\":%s,\"matrix\":[%s,0,"
             "-0,0.1,1e22,1e23,9007199254740993,-2.5e-3,%s],\"flag\":true,\"no\":false,"
             "\"nothing\":null,\"s\":\"\",\"e\":[],\"id\":%s}",
             num, num, num, num);
    scn_wire_error err;
    cJSON *want = cJSON_Parse(line), *got = parse(line, &err);
    bool same = same_tree(want, got);
    if (!same && mismatches++ < 5)
      fprintf(stderr, "  not cJSON's tree: %s\n", line);
    CU_ASSERT_TRUE(same);
    cJSON_Delete(want);
    cJSON_Delete(got);
  }
#undef NEXT
}

static char *nested(int depth, const char *inner) {
  size_t il = strlen(inner);
  char *s = malloc((size_t)depth * 2 + il + 32);
  if (!s)
    return NULL;
  size_t n = 0;
  n += (size_t)sprintf(s, "{\"cmd\":\"ping\",\"id\":");
  for (int i = 0; i < depth; i++)
    s[n++] = '[';
  memcpy(s + n, inner, il);
  n += il;
  for (int i = 0; i < depth; i++)
    s[n++] = ']';
  s[n++] = '}';
  s[n] = '\0';
  return s;
}

static void test_parse_deep_nesting(void) {
  scn_wire_error err;
  char *ok = nested(100, "1");
  char *deep = nested(5000, "1");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ok);
  CU_ASSERT_PTR_NOT_NULL_FATAL(deep);
  cJSON *r = parse(ok, &err);
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);
  expect_parse_fails(deep, strlen(deep), SCN_W_BAD_JSON);
  /* Unclosed deep nesting. */
  deep[2600] = '\0';
  expect_parse_fails(deep, strlen(deep), SCN_W_BAD_JSON);
  free(ok);
  free(deep);
}

/* ---- codec: field decoders ------------------------------------------------------------------- */

static cJSON *obj(const char *text) {
  cJSON *o = cJSON_Parse(text);
  CU_ASSERT_PTR_NOT_NULL(o);
  return o;
}

/* Decodes value as an entity id: 1 with out set, or -1 with code. */
static int entity_of(const char *value, uint64_t *out, scn_wire_code *code) {
  cJSON *v = obj(value);
  if (!v)
    return -2;
  scn_wire_error err = {.code = SCN_W_INTERNAL};
  *out = 0;
  int rc = scn_decode_entity(v, "entity", out, &err) == 0 ? 1 : -1;
  *code = err.code;
  cJSON_Delete(v);
  return rc;
}

/* A field of an object, for the decoders. */
static const cJSON *member(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  CU_ASSERT_PTR_NOT_NULL(v);
  return v;
}

static void test_decode_entity(void) {
  uint64_t e;
  scn_wire_code code;
  CU_ASSERT_EQUAL(entity_of("1", &e, &code), 1);
  CU_ASSERT_EQUAL(e, 1);
  CU_ASSERT_EQUAL(entity_of("9007199254740991", &e, &code), 1);
  CU_ASSERT_EQUAL(e, UINT64_C(9007199254740991));
  CU_ASSERT_EQUAL(entity_of("4294967297", &e, &code), 1);
  CU_ASSERT_EQUAL(e, UINT64_C(4294967297));
  CU_ASSERT_EQUAL(entity_of("1e3", &e, &code), 1); /* the number 1000, however it is written */
  CU_ASSERT_EQUAL(e, 1000);
  static const char *bad[] = {"0",
                              "-1",
                              "1.5",
                              "9007199254740992",
                              "9007199254740993",
                              "1e20",
                              "1e999",
                              "-0",
                              "\"1\"",
                              "null",
                              "true",
                              "[1]",
                              "{}",
                              "0.999999",
                              "-9007199254740991"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    code = SCN_W_INTERNAL;
    CU_ASSERT_EQUAL(entity_of(bad[i], &e, &code), -1);
    CU_ASSERT_EQUAL(code, SCN_W_BAD_REQUEST);
  }
  /* Absent: BAD_REQUEST when required, and the message names the field. */
  cJSON *o = obj("{\"world\":\"w\"}");
  scn_wire_error err = {.code = SCN_W_INTERNAL};
  scn_fields f;
  scn_fields_index(&f, o);
  CU_ASSERT_EQUAL(scn_fields_require(&f, SCN_F(world), &err), 0);
  CU_ASSERT_EQUAL(scn_fields_require(&f, SCN_F(world) | SCN_F(entity) | SCN_F(to), &err), -1);
  CU_ASSERT_EQUAL(err.code, SCN_W_BAD_REQUEST);
  CU_ASSERT_STRING_EQUAL(err.message, "missing field \"entity\"");
  cJSON_Delete(o);
  /* Entity or null. */
  o = obj("{\"p\":null,\"q\":7,\"r\":0,\"s\":\"x\"}");
  e = 99;
  CU_ASSERT_EQUAL(scn_decode_entity_or_null(member(o, "p"), "p", &e, &err), 0);
  CU_ASSERT_EQUAL(e, 0);
  CU_ASSERT_EQUAL(scn_decode_entity_or_null(member(o, "q"), "q", &e, &err), 0);
  CU_ASSERT_EQUAL(e, 7);
  CU_ASSERT_EQUAL(scn_decode_entity_or_null(member(o, "r"), "r", &e, &err), -1);
  CU_ASSERT_EQUAL(scn_decode_entity_or_null(member(o, "s"), "s", &e, &err), -1);
  CU_ASSERT_EQUAL(err.code, SCN_W_BAD_REQUEST);
  cJSON_Delete(o);
}

static void test_decode_other_fields(void) {
  scn_wire_error err;
  cJSON *o = obj("{\"w\":\"world_1.a-b\",\"n\":5,\"b\":true,\"f\":false,\"x\":1.5,\"big\":1e999,"
                 "\"k1\":\"local\",\"k2\":\"world\",\"name\":\"wheel\",\"nul\":null,"
                 "\"slash\":\"a/b\",\"empty\":\"\",\"ctl\":\"a\\u0001\"}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  const char *s = NULL;
  CU_ASSERT_EQUAL(scn_decode_string(member(o, "w"), "w", &s, &err), 0);
  CU_ASSERT_STRING_EQUAL(s, "world_1.a-b");
  CU_ASSERT_EQUAL(scn_decode_string(member(o, "n"), "n", &s, &err), -1);
  CU_ASSERT_EQUAL(err.code, SCN_W_BAD_REQUEST);
  bool bv = false;
  CU_ASSERT_EQUAL(scn_decode_bool(member(o, "b"), "b", &bv, &err), 0);
  CU_ASSERT_TRUE(bv);
  CU_ASSERT_EQUAL(scn_decode_bool(member(o, "f"), "f", &bv, &err), 0);
  CU_ASSERT_FALSE(bv);
  CU_ASSERT_EQUAL(scn_decode_bool(member(o, "n"), "n", &bv, &err), -1);
  double d = 0;
  CU_ASSERT_EQUAL(scn_decode_number(member(o, "x"), "x", &d, &err), 0);
  CU_ASSERT_EQUAL(d, 1.5);
  CU_ASSERT_EQUAL(scn_decode_number(member(o, "big"), "big", &d, &err), -1);
  CU_ASSERT_EQUAL(scn_decode_number(member(o, "w"), "w", &d, &err), -1);
  uint64_t u = 0;
  CU_ASSERT_EQUAL(scn_decode_uint(member(o, "n"), "n", 1, 10, &u, &err), 0);
  CU_ASSERT_EQUAL(u, 5);
  CU_ASSERT_EQUAL(scn_decode_uint(member(o, "n"), "n", 6, 10, &u, &err), -1);
  CU_ASSERT_EQUAL(scn_decode_uint(member(o, "n"), "n", 1, 4, &u, &err), -1);
  CU_ASSERT_EQUAL(scn_decode_uint(member(o, "x"), "x", 1, 4, &u, &err), -1);
  CU_ASSERT_EQUAL(scn_decode_uint(member(o, "big"), "big", 1, UINT64_MAX / 2, &u, &err), -1);
  CU_ASSERT_EQUAL(scn_decode_uint(member(o, "w"), "w", 1, 4, &u, &err), -1);
  CU_ASSERT_EQUAL(err.code, SCN_W_BAD_REQUEST);
  /* keep */
  cJSON *k = obj("{\"keep\":\"world\"}");
  bool kw = false;
  CU_ASSERT_EQUAL(scn_decode_keep(member(k, "keep"), &kw, &err), 0);
  CU_ASSERT_TRUE(kw);
  cJSON_Delete(k);
  k = obj("{\"keep\":\"local\"}");
  CU_ASSERT_EQUAL(scn_decode_keep(member(k, "keep"), &kw, &err), 0);
  CU_ASSERT_FALSE(kw);
  cJSON_Delete(k);
  static const char *bad_keep[] = {"{\"keep\":\"both\"}", "{\"keep\":1}", "{\"keep\":null}",
                                   "{\"keep\":\"World\"}", "{\"keep\":\"\"}"};
  for (size_t i = 0; i < sizeof bad_keep / sizeof *bad_keep; i++) {
    k = obj(bad_keep[i]);
    err.code = SCN_W_INTERNAL;
    CU_ASSERT_EQUAL(scn_decode_keep(member(k, "keep"), &kw, &err), -1);
    CU_ASSERT_EQUAL(err.code, SCN_W_BAD_REQUEST);
    cJSON_Delete(k);
  }
  /* names */
  const char *name = "x";
  CU_ASSERT_EQUAL(scn_decode_name_or_null(member(o, "name"), "name", &name, &err), 0);
  CU_ASSERT_STRING_EQUAL(name, "wheel");
  CU_ASSERT_EQUAL(scn_decode_name_or_null(member(o, "nul"), "nul", &name, &err), 0);
  CU_ASSERT_PTR_NULL(name);
  CU_ASSERT_EQUAL(scn_decode_name_or_null(member(o, "slash"), "slash", &name, &err), -1);
  CU_ASSERT_EQUAL(scn_decode_name_or_null(member(o, "empty"), "empty", &name, &err), -1);
  CU_ASSERT_EQUAL(scn_decode_name_or_null(member(o, "ctl"), "ctl", &name, &err), -1);
  CU_ASSERT_EQUAL(scn_decode_name_or_null(member(o, "n"), "n", &name, &err), -1);
  CU_ASSERT_EQUAL(err.code, SCN_W_BAD_REQUEST);
  cJSON_Delete(o);
  /* world names */
  static const char *good_worlds[] = {
      "a", "A-z_0.9", "----", "0123456789012345678901234567890123456789012345678901234567890123"};
  static const char *bad_worlds[] = {
      "",         "a b", "a/b",
      "\xc3\xa9", "a:b", "01234567890123456789012345678901234567890123456789012345678901234"};
  for (size_t i = 0; i < 4; i++) {
    cJSON *w = cJSON_CreateObject();
    cJSON_AddStringToObject(w, "world", good_worlds[i]);
    CU_ASSERT_EQUAL(scn_decode_world_name(member(w, "world"), &s, &err), 0);
    cJSON_Delete(w);
  }
  for (size_t i = 0; i < sizeof bad_worlds / sizeof *bad_worlds; i++) {
    cJSON *w = cJSON_CreateObject();
    cJSON_AddStringToObject(w, "world", bad_worlds[i]);
    err.code = SCN_W_INTERNAL;
    CU_ASSERT_EQUAL(scn_decode_world_name(member(w, "world"), &s, &err), -1);
    CU_ASSERT_EQUAL(err.code, SCN_W_BAD_REQUEST);
    cJSON_Delete(w);
  }
}

/* ---- codec: transform specs ------------------------------------------------------------------ */

/* Decodes a spec from JSON text as a command does: 1 with the matrix in m, 0 when there is
 * none, -1 with code. A matrix's numbers are checked for finiteness by the core, as
 * scn_transform_set_local does, and scn_spec_error then gives the error. */
static int spec_of(const char *text, float m[16], scn_wire_code *code) {
  cJSON *o = cJSON_Parse(text);
  CU_ASSERT_PTR_NOT_NULL(o);
  if (!o)
    return -2;
  scn_wire_error err = {.code = SCN_W_INTERNAL};
  scn_fields f;
  scn_fields_index(&f, o);
  scn_args a;
  scn_args_init(&a, &f);
  int rc = scn_args_decode(&a, SCN_F_SPEC, &err);
  if (rc == 0 && a.has_spec && !scn_matrix_finite(a.m))
    rc = scn_spec_error(&f, &err);
  if (rc == 0 && a.has_spec)
    memcpy(m, a.m, sizeof a.m);
  else if (rc == 0)
    for (int i = 0; i < 16; i++)
      m[i] = -7;
  if (code)
    *code = err.code;
  cJSON_Delete(o);
  return rc < 0 ? -1 : a.has_spec ? 1 : 0;
}

static int spec_rc(const char *text, scn_wire_code *code) {
  float m[16];
  return spec_of(text, m, code);
}

/* Each text is refused by decode: -1 with BAD_REQUEST. */
static void expect_bad_request(const char *const *texts, size_t n,
                               int (*decode)(const char *, scn_wire_code *)) {
  for (size_t i = 0; i < n; i++) {
    scn_wire_code code = SCN_W_INTERNAL;
    int rc = decode(texts[i], &code);
    if (rc != -1 || code != SCN_W_BAD_REQUEST)
      fprintf(stderr, "accepted or wrong code: %s\n", texts[i]);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_EQUAL(code, SCN_W_BAD_REQUEST);
  }
}

static bool near(double a, double b, double tol) { return fabs(a - b) <= tol; }

/* Column-major product a * b. */
static void mul(const double a[16], const double b[16], double out[16]) {
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 4; r++) {
      double s = 0;
      for (int k = 0; k < 4; k++)
        s += a[k * 4 + r] * b[c * 4 + k];
      out[c * 4 + r] = s;
    }
}

static void test_spec(void) {
  float m[16];
  /* A full matrix, column-major, taken as given. */
  CU_ASSERT_EQUAL(spec_of("{\"matrix\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}", m, NULL), 1);
  for (int i = 0; i < 16; i++)
    CU_ASSERT_EQUAL(m[i], (float)(i + 1));
  CU_ASSERT_EQUAL(
      spec_of("{\"matrix\":[0.1,0,0,0,0,1,0,0,0,0,1,0,-0.5,1e-7,3.4028235e38,1]}", m, NULL), 1);
  CU_ASSERT_EQUAL(m[0], 0.1f);
  CU_ASSERT_EQUAL(m[12], -0.5f);
  CU_ASSERT_EQUAL(m[13], 1e-7f);
  CU_ASSERT_EQUAL(m[14], 3.4028235e38f);
  /* No spec: 0 and the output untouched. */
  CU_ASSERT_EQUAL(spec_of("{\"world\":\"w\"}", m, NULL), 0);
  CU_ASSERT_EQUAL(m[0], -7);
  static const char *const bad[] = {
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0]}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1,0]}",
      "{\"matrix\":[]}",
      "{\"matrix\":1}",
      "{\"matrix\":null}",
      "{\"matrix\":\"identity\"}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,\"1\"]}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,null]}",
      "{\"matrix\":[[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],\"t\":[0,0,0]}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],\"r\":[0,0,0,1]}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],\"s\":1}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,1e39,0,0,1]}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,1e999,0,0,1]}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,-1e999,0,0,1]}",
      "{\"t\":[1,2]}",
      "{\"t\":[1,2,3,4]}",
      "{\"t\":1}",
      "{\"t\":[1,2,\"3\"]}",
      "{\"t\":[1e39,0,0]}",
      "{\"t\":[0,-1e39,0]}",
      "{\"t\":[0,0,1e999]}",
      "{\"r\":[0,0,0,0]}",
      "{\"r\":[0,0,1]}",
      "{\"r\":[0,0,0,1,0]}",
      "{\"r\":[0,0,0,1e39]}",
      "{\"r\":[0,0,0,1e999]}",
      "{\"s\":\"2\"}",
      "{\"s\":[1,2]}",
      "{\"s\":[1,2,3,4]}",
      "{\"s\":1e39}",
      "{\"s\":1e999}",
      "{\"s\":[1,1e39,1]}",
      "{\"s\":null}",
      "{\"t\":[1,2,3],\"r\":[0,0,0,0]}",
  };
  expect_bad_request(bad, sizeof bad / sizeof *bad, spec_rc);
  /* Scale as a number and as an array. */
  CU_ASSERT_EQUAL(spec_of("{\"s\":2.5}", m, NULL), 1);
  for (int i = 0; i < 16; i++)
    CU_ASSERT_EQUAL(m[i], i == 15 ? 1.0f : (i % 5 == 0 ? 2.5f : 0.0f));
  CU_ASSERT_EQUAL(spec_of("{\"s\":[2,3,4]}", m, NULL), 1);
  CU_ASSERT_EQUAL(m[0], 2.0f);
  CU_ASSERT_EQUAL(m[5], 3.0f);
  CU_ASSERT_EQUAL(m[10], 4.0f);
  CU_ASSERT_EQUAL(m[15], 1.0f);
  CU_ASSERT_EQUAL(m[1], 0.0f);
  /* Translation alone. */
  CU_ASSERT_EQUAL(spec_of("{\"t\":[1,-2,3.5]}", m, NULL), 1);
  CU_ASSERT_EQUAL(m[12], 1.0f);
  CU_ASSERT_EQUAL(m[13], -2.0f);
  CU_ASSERT_EQUAL(m[14], 3.5f);
  CU_ASSERT_EQUAL(m[0], 1.0f);
  CU_ASSERT_EQUAL(m[5], 1.0f);
  CU_ASSERT_EQUAL(m[10], 1.0f);
  CU_ASSERT_EQUAL(m[15], 1.0f);
  /* T * R * S with a quaternion that is not normalised: (0,0,2,2) is 90 degrees about z. */
  CU_ASSERT_EQUAL(spec_of("{\"t\":[1,2,3],\"r\":[0,0,2,2],\"s\":[2,3,4]}", m, NULL), 1);
  static const double T[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 2, 3, 1};
  static const double R[16] = {0, 1, 0, 0, -1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  static const double S[16] = {2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0, 0, 0, 0, 1};
  double tr[16], trs[16];
  mul(T, R, tr);
  mul(tr, S, trs);
  for (int i = 0; i < 16; i++)
    CU_ASSERT_TRUE(near(m[i], trs[i], 1e-6));
  /* A general rotation: 120 degrees about (1,1,1) maps x to y, y to z, z to x. */
  CU_ASSERT_EQUAL(spec_of("{\"r\":[0.5,0.5,0.5,0.5],\"s\":2}", m, NULL), 1);
  static const double cyc[16] = {0, 2, 0, 0, 0, 0, 2, 0, 2, 0, 0, 0, 0, 0, 0, 1};
  for (int i = 0; i < 16; i++)
    CU_ASSERT_TRUE(near(m[i], cyc[i], 1e-6));
  /* Order matters: S then R then T, so the translation is not scaled. */
  CU_ASSERT_EQUAL(spec_of("{\"t\":[1,0,0],\"s\":10}", m, NULL), 1);
  CU_ASSERT_EQUAL(m[12], 1.0f);
  CU_ASSERT_EQUAL(m[0], 10.0f);
  /* The largest float32 is fine. */
  CU_ASSERT_EQUAL(spec_of("{\"t\":[3.4028235e38,-3.4028235e38,0]}", m, NULL), 1);
  CU_ASSERT_EQUAL(m[12], 3.4028235e38f);
}

/* Decodes the fields of set_local from JSON text: 0 with a filled, or -1 with code. */
static int set_local_args(const char *text, scn_args *a, scn_fields *f, scn_wire_code *code) {
  cJSON *o = cJSON_Parse(text);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  scn_wire_error err = {.code = SCN_W_INTERNAL};
  scn_fields_index(f, o);
  scn_args_init(a, f);
  const scn_command_info *c = scn_command_find("transform.set_local");
  int rc = scn_args_decode(a, c->required | c->optional, &err);
  *code = err.code;
  cJSON_Delete(o); /* a keeps no pointer into it that the checks below read */
  return rc;
}

static int partial_rc(const char *text, scn_wire_code *code) {
  scn_args a;
  scn_fields f;
  return set_local_args(text, &a, &f, code);
}

static void test_spec_partial(void) {
  scn_args a;
  scn_fields f;
  scn_wire_code code;
  /* The parts are kept as given (r not normalised), nothing is composed. */
  CU_ASSERT_EQUAL(set_local_args("{\"partial\":true,\"r\":[0,0,2,2]}", &a, &f, &code), 0);
  CU_ASSERT_TRUE(a.partial && a.has_spec);
  CU_ASSERT_EQUAL(a.parts, SCN_F(r));
  CU_ASSERT_TRUE(a.r[0] == 0 && a.r[1] == 0 && a.r[2] == 2 && a.r[3] == 2);
  CU_ASSERT_EQUAL(set_local_args("{\"t\":[1,2,3],\"s\":0.5,\"partial\":true}", &a, &f, &code), 0);
  CU_ASSERT_EQUAL(a.parts, SCN_F(t) | SCN_F(s));
  CU_ASSERT_TRUE(a.t[0] == 1 && a.t[1] == 2 && a.t[2] == 3);
  CU_ASSERT_TRUE(a.s[0] == 0.5f && a.s[1] == 0.5f && a.s[2] == 0.5f);
  /* "partial": false is a whole spec, composed as before. */
  CU_ASSERT_EQUAL(set_local_args("{\"partial\":false,\"t\":[1,2,3]}", &a, &f, &code), 0);
  CU_ASSERT_TRUE(!a.partial && a.has_spec && a.m[12] == 1 && a.m[0] == 1);
  /* Partial without parts decodes (the command refuses it: nothing to set). */
  CU_ASSERT_EQUAL(set_local_args("{\"partial\":true}", &a, &f, &code), 0);
  CU_ASSERT_TRUE(a.partial && !a.has_spec);
  static const char *const bad[] = {
      "{\"partial\":true,\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]}",
      "{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],\"partial\":true,\"t\":[0,0,0]}",
      "{\"partial\":true,\"r\":[0,0,0,0]}",
      "{\"partial\":true,\"t\":[1,2]}",
      "{\"partial\":true,\"s\":1e39}",
      "{\"partial\":1,\"t\":[1,2,3]}",
      "{\"partial\":\"true\",\"t\":[1,2,3]}",
      "{\"partial\":null,\"t\":[1,2,3]}",
  };
  expect_bad_request(bad, sizeof bad / sizeof *bad, partial_rc);
  /* trs is a boolean of transform.get only. */
  cJSON *o = cJSON_Parse("{\"trs\":true}");
  scn_fields_index(&f, o);
  scn_args_init(&a, &f);
  scn_wire_error err;
  CU_ASSERT_EQUAL(scn_args_decode(&a, scn_command_find("transform.get")->optional, &err), 0);
  CU_ASSERT_TRUE(a.trs);
  cJSON_Delete(o);
  o = cJSON_Parse("{\"trs\":\"yes\"}");
  scn_fields_index(&f, o);
  scn_args_init(&a, &f);
  CU_ASSERT_EQUAL(scn_args_decode(&a, scn_command_find("transform.get")->optional, &err), -1);
  CU_ASSERT_EQUAL(err.code, SCN_W_BAD_REQUEST);
  cJSON_Delete(o);
}

/* The raw text of the top-level "id", found by its key as cJSON reads it (escapes too). */
static void test_raw_id(void) {
  static const struct {
    const char *line, *want; /* want NULL: not found */
  } cases[] = {
      {"{\"cmd\":\"ping\",\"id\":1e400}", "1e400"},
      {"{\"cmd\":\"ping\",\"\\u0069d\":1e400}", "1e400"},
      {"{\"cmd\":\"ping\",\"\\u0069\\u0064\":[1, 2]}", "[1, 2]"},
      {"{\"i\\u0064x\":1,\"id\":\"b\"}", "\"b\""},
      {"{ \"a\" : {\"id\":1} , \"id\" : \"x,y\" }", "\"x,y\""},
      {"{\"id\":{\"a\":[1,{\"b\":\"}\"}]},\"cmd\":\"ping\"}", "{\"a\":[1,{\"b\":\"}\"}]}"},
      {"{\"id\":true ,\"id\":2}", "true"},
      {"{\"a\":\"\\\"id\\\":2\"}", NULL},
      {"{\"ID\":1}", NULL},
      {"{\"\\u0049d\":1}", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    scn_wire_error err;
    cJSON *r = parse(cases[i].line, &err);
    CU_ASSERT_PTR_NOT_NULL(r);
    scn_span id = rq.id;
    bool good = cases[i].want ? id.p && id.len == strlen(cases[i].want) &&
                                    memcmp(id.p, cases[i].want, id.len) == 0
                              : !id.p;
    if (!good)
      fprintf(stderr, "raw id in %s: got %.*s\n", cases[i].line, id.p ? (int)id.len : 6,
              id.p ? id.p : "(none)");
    CU_ASSERT_TRUE(good);
    cJSON_Delete(r);
  }
}

/* The raw text of each op of "ops" and of its "id", found by the same pass. */
static void test_raw_ops(void) {
  scn_wire_error err;
  const char *line = "{\"cmd\":\"batch\",\"ops\" : [ {\"cmd\":\"x\",\"id\":1.50} , "
                     "{\"id\":[\"a\",{\"id\":3}],\"q\":{\"id\":4}} ,{\"\\u0069d\":\"z\"},"
                     "{\"cmd\":1},7 ],\"id\":\"top\",\"ops\":[{\"id\":9}]}";
  cJSON *r = parse(line, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  static const char *items[] = {"{\"cmd\":\"x\",\"id\":1.50}",
                                "{\"id\":[\"a\",{\"id\":3}],\"q\":{\"id\":4}}",
                                "{\"\\u0069d\":\"z\"}", "{\"cmd\":1}", "7"};
  static const char *ids[] = {"1.50", "[\"a\",{\"id\":3}]", "\"z\"", NULL, NULL};
  CU_ASSERT_EQUAL_FATAL(rq.nops, 5);
  for (size_t i = 0; i < 5; i++) {
    const scn_op_span *op = &rq.ops[i];
    CU_ASSERT_TRUE(op->item.len == strlen(items[i]) &&
                   memcmp(op->item.p, items[i], op->item.len) == 0);
    if (ids[i]) {
      CU_ASSERT_TRUE(op->id.p && op->id.len == strlen(ids[i]) &&
                     memcmp(op->id.p, ids[i], op->id.len) == 0);
    } else {
      CU_ASSERT_PTR_NULL(op->id.p);
    }
  }
  CU_ASSERT_TRUE(rq.id.p && rq.id.len == 5 && memcmp(rq.id.p, "\"top\"", 5) == 0);
  cJSON_Delete(r);
  /* An empty list, and a list that is not the value of the first "ops". */
  r = parse("{\"ops\":[],\"x\":[{\"id\":1}]}", &err);
  CU_ASSERT_PTR_NOT_NULL(r);
  CU_ASSERT_EQUAL(rq.nops, 0);
  cJSON_Delete(r);
}

int t_register_proto_request(void) {
  static const t_test tests[] = {
      {"codec: parse request", test_parse_request},
      {"codec: deep nesting", test_parse_deep_nesting},
      {"request: random numbers against JSON's grammar", test_parse_numbers_random},
      {"request: the flat form builds cJSON's tree", test_flat_form_is_cjson},
      {"codec: entity ids", test_decode_entity},
      {"codec: other fields", test_decode_other_fields},
      {"codec: transform spec", test_spec},
      {"codec: partial spec and trs", test_spec_partial},
      {"request: raw id by key", test_raw_id},
      {"request: raw ops and their ids", test_raw_ops},
  };
  return T_ADD_SUITE("proto_request", NULL, NULL, tests);
}

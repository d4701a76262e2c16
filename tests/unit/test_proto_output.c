/* Unit tests of what the protocol writes: replies, and the output buffers' JSON strings,
 * numbers and values. No daemon, no sockets. */
#include "buf.h"
#include "codec.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- replies --------------------------------------------------------------------------------- */

static char *buf_text(scn_buf *b) {
  char *s = malloc(b->len + 1);
  if (!s)
    return NULL;
  memcpy(s, b->data, b->len);
  s[b->len] = '\0';
  return s;
}

static bool buf_equals(scn_buf *b, const char *text) {
  return b->len == strlen(text) && memcmp(b->data, text, b->len) == 0;
}

static void test_reply_encoding(void) {
  scn_buf b = {0};
  cJSON *id = cJSON_Parse("{\"x\":[1,\"a\"]}");
  scn_reply_begin(&b, id);
  scn_reply_key(&b, "entity");
  scn_buf_add_u64(&b, 42);
  scn_reply_end(&b);
  CU_ASSERT_TRUE(buf_equals(&b, "{\"id\":{\"x\":[1,\"a\"]},\"ok\":true,\"entity\":42}\n"));
  b.len = 0;
  scn_reply_begin(&b, NULL);
  scn_reply_end(&b);
  CU_ASSERT_TRUE(buf_equals(&b, "{\"ok\":true}\n"));
  b.len = 0;
  scn_wire_error err;
  CU_ASSERT_EQUAL(scn_fail(&err, SCN_W_NOT_FOUND, "world \"%s\" not found", "w"), -1);
  scn_reply_error(&b, id, &err);
  CU_ASSERT_TRUE(buf_equals(&b, "{\"id\":{\"x\":[1,\"a\"]},\"ok\":false,\"error\":{\"code\":"
                                "\"NOT_FOUND\",\"message\":\"world \\\"w\\\" not found\"}}\n"));
  b.len = 0;
  /* A message cut inside a multi-byte character is still valid UTF-8 on the wire. */
  char longname[400];
  memset(longname, 0, sizeof longname);
  for (int i = 0; i < 150; i++)
    memcpy(longname + 2 * i, "\xc3\xa9", 2);
  scn_fail(&err, SCN_W_BAD_REQUEST, "x%s", longname);
  scn_reply_error(&b, NULL, &err);
  CU_ASSERT_TRUE(scn_utf8_valid(b.data, b.len));
  char *text = buf_text(&b);
  cJSON *parsed = text ? cJSON_Parse(text) : NULL;
  CU_ASSERT_PTR_NOT_NULL(parsed);
  cJSON_Delete(parsed);
  free(text);
  cJSON_Delete(id);
  scn_buf_free(&b);
}

static void test_buf_strings(void) {
  scn_buf b = {0};
  const char *in = "a\"b\\c/\n\r\t\x01\x1f\x7f \xc3\xa9\xf0\x9f\x98\x80";
  scn_buf_add_json_string(&b, in, strlen(in));
  char *text = buf_text(&b);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_EQUAL(text[0], '"');
  CU_ASSERT_EQUAL(text[b.len - 1], '"');
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "a\\\"b\\\\c/"));
  for (size_t i = 0; i < b.len; i++)
    CU_ASSERT_TRUE((unsigned char)text[i] >= 0x20);
  cJSON *back = cJSON_Parse(text);
  CU_ASSERT_TRUE(cJSON_IsString(back));
  if (cJSON_IsString(back))
    CU_ASSERT_STRING_EQUAL(back->valuestring, in);
  cJSON_Delete(back);
  free(text);
  b.len = 0;
  scn_buf_add_json_string(&b, "", 0);
  CU_ASSERT_TRUE(buf_equals(&b, "\"\""));
  b.len = 0;
  scn_buf_add_json_string(&b, "\x01", 1);
  CU_ASSERT_TRUE(buf_equals(&b, "\"\\u0001\""));
  b.len = 0;
  /* Only len bytes are written. */
  scn_buf_add_json_string(&b, "abcdef", 3);
  CU_ASSERT_TRUE(buf_equals(&b, "\"abc\""));
  /* A long string grows the buffer. */
  b.len = 0;
  char *big = malloc(100000);
  CU_ASSERT_PTR_NOT_NULL_FATAL(big);
  memset(big, '"', 100000);
  scn_buf_add_json_string(&b, big, 100000);
  CU_ASSERT_EQUAL(b.len, 200002);
  CU_ASSERT_FALSE(b.failed);
  free(big);
  scn_buf_free(&b);
  CU_ASSERT_PTR_NULL(b.data);
  CU_ASSERT_EQUAL(b.len, 0);
}

static void test_buf_numbers(void) {
  scn_buf b = {0};
  static const struct {
    uint64_t v;
    const char *text;
  } u64s[] = {{0, "0"},
              {1, "1"},
              {10, "10"},
              {9007199254740991u, "9007199254740991"},
              {UINT64_MAX, "18446744073709551615"}};
  for (size_t i = 0; i < sizeof u64s / sizeof *u64s; i++) {
    b.len = 0;
    scn_buf_add_u64(&b, u64s[i].v);
    CU_ASSERT_TRUE(buf_equals(&b, u64s[i].text));
  }
  b.len = 0;
  scn_buf_add_i64(&b, INT64_MIN);
  CU_ASSERT_TRUE(buf_equals(&b, "-9223372036854775808"));
  b.len = 0;
  scn_buf_add_i64(&b, -42);
  CU_ASSERT_TRUE(buf_equals(&b, "-42"));
  static const struct {
    double v;
    const char *text;
  } dbls[] = {{0, "0"},
              {1, "1"},
              {-2.5, "-2.5"},
              {0.1, "0.1"},
              {1.5e300, "1.5e+300"},
              {9007199254740991.0, "9007199254740991"},
              {-1e15, "-1000000000000000"},
              {123456.789, "123456.789"}};
  for (size_t i = 0; i < sizeof dbls / sizeof *dbls; i++) {
    b.len = 0;
    scn_buf_add_double(&b, dbls[i].v);
    char *t = buf_text(&b);
    if (t && strcmp(t, dbls[i].text) != 0)
      fprintf(stderr, "double %.17g written as %s\n", dbls[i].v, t);
    CU_ASSERT_TRUE(buf_equals(&b, dbls[i].text));
    free(t);
  }
  /* Any finite double reads back exactly. */
  static const double samples[] = {1.0 / 3,
                                   2.0 / 3,
                                   1e-300,
                                   4.9e-324,
                                   1.7976931348623157e308,
                                   9007199254740993.0,
                                   0.30000000000000004,
                                   -123.456e-7,
                                   18446744073709551616.0,
                                   1e23};
  for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
    b.len = 0;
    scn_buf_add_double(&b, samples[i]);
    char *t = buf_text(&b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(strtod(t, NULL), samples[i]);
    cJSON *j = cJSON_Parse(t);
    CU_ASSERT_TRUE(cJSON_IsNumber(j));
    cJSON_Delete(j);
    free(t);
  }
  /* Matrices: float32 shortest form. */
  b.len = 0;
  const float m[16] = {0.1f, 0.2f, 0.3f, 0, 0.4f, 0.5f,   0.6f,  0,
                       0.7f, 0.8f, 0.9f, 0, 1.5f, -2.25f, 1e-7f, 1};
  scn_buf_add_matrix(&b, m);
  CU_ASSERT_TRUE(buf_equals(&b, "[0.1,0.2,0.3,0,0.4,0.5,0.6,0,0.7,0.8,0.9,0,1.5,-2.25,1e-7,1]"));
  /* Short arrays of floats alike (the parts of a matrix). */
  b.len = 0;
  const float q[4] = {0, 0.70710677f, -0.0f, 3.4028235e38f};
  scn_buf_add_floats(&b, q, 4);
  scn_buf_add_floats(&b, q, 1);
  CU_ASSERT_TRUE(buf_equals(&b, "[0,0.70710677,-0,3.4028235e+38][0]"));
  scn_buf_free(&b);
}

static void test_buf_json_value(void) {
  static const char *docs[] = {
      "{\"a\":[1,2,{\"b\":[9007199254740991,4294967297,\"x\\u00e9\",null,true,false,-0.5]}],"
      "\"c\":{},\"d\":[],\"e\":\"q\\\"\\\\\"}",
      "[[[[[[[[[[1]]]]]]]]]]",
      "\"plain\"",
      "12345",
      "null",
      "{\"ids\":[1,2,3,9007199254740991],\"nested\":{\"ids\":{\"deeper\":[{\"id\":7}]}}}",
  };
  for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
    cJSON *in = cJSON_Parse(docs[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    scn_buf b = {0};
    scn_buf_add_json_value(&b, in);
    char *text = buf_text(&b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    cJSON *back = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL(back);
    CU_ASSERT_TRUE(cJSON_Compare(in, back, true));
    /* Integers stay integers: no exponent or fraction for ids. */
    if (i == 5)
      CU_ASSERT_STRING_EQUAL(text, docs[i]);
    cJSON_Delete(back);
    cJSON_Delete(in);
    free(text);
    scn_buf_free(&b);
  }
}

static void test_buf_misc(void) {
  scn_buf b = {0};
  scn_buf_adds(&b, "hello world");
  scn_buf_addc(&b, '!');
  CU_ASSERT_TRUE(buf_equals(&b, "hello world!"));
  scn_buf_consume(&b, 6);
  CU_ASSERT_TRUE(buf_equals(&b, "world!"));
  scn_buf_truncate(&b, 5);
  CU_ASSERT_TRUE(buf_equals(&b, "world"));
  scn_buf_truncate(&b, 50);
  CU_ASSERT_EQUAL(b.len, 5);
  scn_buf_consume(&b, 99);
  CU_ASSERT_EQUAL(b.len, 0);
  CU_ASSERT_TRUE(scn_buf_reserve(&b, 5000));
  CU_ASSERT_TRUE(b.cap >= 5000);
  size_t cap = b.cap;
  for (int i = 0; i < 5000; i++)
    scn_buf_addc(&b, 'x');
  CU_ASSERT_EQUAL(b.cap, cap);
  CU_ASSERT_EQUAL(b.len, 5000);
  CU_ASSERT_FALSE(b.failed);
  scn_buf_free(&b);
}

int t_register_proto_output(void) {
  static const t_test tests[] = {
      {"codec: reply encoding", test_reply_encoding},
      {"buf: JSON strings", test_buf_strings},
      {"buf: numbers", test_buf_numbers},
      {"buf: JSON value round trip", test_buf_json_value},
      {"buf: misc", test_buf_misc},
  };
  return T_ADD_SUITE("proto_output", NULL, NULL, tests);
}

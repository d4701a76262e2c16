/*
 * Unit tests for proto/f32fmt.c (shortest round-trip float printing).
 *
 * The sampled round-trip test walks ~5.2 million bit patterns; the
 * exhaustive check over all 2^32 lives in tests/tools/f32_exhaustive.c.
 */
#include "f32fmt.h"
#include "suites.h"

#include <CUnit/CUnit.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32T_MAX_REPORTED 10

static float f32t_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t f32t_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static int f32t_is_digit(char c) { return c >= '0' && c <= '9'; }

/* JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int f32t_is_json_number(const char *s) {
  if (*s == '-')
    s++;
  if (*s == '0') {
    s++;
  } else if (*s >= '1' && *s <= '9') {
    while (f32t_is_digit(*s))
      s++;
  } else {
    return 0;
  }
  if (*s == '.') {
    s++;
    if (!f32t_is_digit(*s))
      return 0;
    while (f32t_is_digit(*s))
      s++;
  }
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-')
      s++;
    if (!f32t_is_digit(*s))
      return 0;
    while (f32t_is_digit(*s))
      s++;
  }
  return *s == '\0';
}

/* Significant digits in a formatted number ("0.0120" -> 2, "100" -> 1). */
static int f32t_significant_digits(const char *s) {
  int total = 0, trailing_zeros = 0, started = 0;

  for (; *s && *s != 'e' && *s != 'E'; s++) {
    if (!f32t_is_digit(*s))
      continue;
    if (*s == '0' && !started)
      continue;
    started = 1;
    total++;
    trailing_zeros = *s == '0' ? trailing_zeros + 1 : 0;
  }
  return total - trailing_zeros;
}

/* Does any %.{k}g with k < digits read back to v? */
static int f32t_has_shorter(float v, int digits) {
  char buf[320]; /* room for any %g of a double, keeps -Wformat-truncation quiet */

  for (int k = 1; k < digits; k++) {
    snprintf(buf, sizeof buf, "%.*g", k, (double)v);
    if (f32t_bits(strtof(buf, NULL)) == f32t_bits(v))
      return 1;
  }
  return 0;
}

/*
 * Formats the pattern and checks length, JSON syntax, sign and round trip
 * (and shortest-ness when asked).  Returns 1 if all is well; otherwise
 * prints the first few failures and returns 0.
 */
static int f32t_check_pattern(uint32_t u, int check_shortest, int *reported) {
  char out[SCN_F32_FMT_MAX];
  float v = f32t_from_bits(u);
  size_t len = scn_f32_format(v, out);
  const char *why = NULL;
  char *end;

  if (len >= SCN_F32_FMT_MAX || strlen(out) != len)
    why = "bad length";
  else if (!f32t_is_json_number(out))
    why = "not a JSON number";
  else if ((out[0] == '-') != (int)(u >> 31))
    why = "wrong sign";
  else if (f32t_bits(strtof(out, &end)) != u || *end != '\0')
    why = "does not round-trip";
  else if (check_shortest && f32t_has_shorter(v, f32t_significant_digits(out)))
    why = "not shortest";

  if (why && (*reported)++ < F32T_MAX_REPORTED)
    fprintf(stderr, "f32fmt: %08lx (%.9g) -> \"%s\": %s\n", (unsigned long)u, (double)v, out, why);
  return why == NULL;
}

static int f32t_is_finite_pattern(uint32_t u) { return (u & 0x7f800000u) != 0x7f800000u; }

struct f32t_known {
  float value;
  const char *text;
};

static const struct f32t_known f32t_known_values[] = {
    {0.0f, "0"},
    {-0.0f, "-0"},
    {1.0f, "1"},
    {-1.0f, "-1"},
    {0.1f, "0.1"},
    {0.2f, "0.2"},
    {0.3f, "0.3"},
    {0.7f, "0.7"},
    {1.1f, "1.1"},
    {0.5f, "0.5"},
    {-2.5f, "-2.5"},
    {100.0f, "100"},
    {200.0f, "200"},
    {65504.0f, "65504"},
    {1.0f / 3.0f, "0.33333334"},
    {2.0f / 3.0f, "0.6666667"},
    {3.14159265f, "3.1415927"},
    {1.2345678f, "1.2345678"},
    {123456.789f, "123456.79"},
    {4103.9003f, "4103.9004"},
    {0.0010310042f, "0.0010310042"},
    {0.007812537f, "0.007812537"},
    /* Exactly half-way between two shortest candidates: even digit wins. */
    {2.4414062e-4f, "0.00024414062"}, /* 0.000244140625 */
    {0.146484375f, "0.14648438"},
    {0.130859375f, "0.13085938"},
    {0.000123f, "0.000123"},
    {FLT_MAX, "3.4028235e+38"},
    {-FLT_MAX, "-3.4028235e+38"},
    {FLT_MIN, "1.1754944e-38"},
    {1.17549421e-38f, "1.1754942e-38"}, /* largest denormal */
    {1e-45f, "1e-45"},                  /* smallest denormal */
    {2.8e-45f, "3e-45"},
    {1e-44f, "1e-44"},
    {-2.47e-43f, "-2.47e-43"},
    {6.0898e-39f, "6.0898e-39"},
    {1.9310392e-38f, "1.9310392e-38"},
    {1.00014165e-36f, "1.00014165e-36"},
    {1.23456735e-36f, "1.23456735e-36"},
    {7.038531e-26f, "7.038531e-26"},
    {-1e-10f, "-1e-10"},
    {8388608.0f, "8388608"},
    {16777216.0f, "16777216"},
    {33554436.0f, "33554436"},
    {67108872.0f, "67108870"},
    {299792458.0f, "299792450"},
    {4294967296.0f, "4294967300"},
    {5.3399997e9f, "5339999700"},
    {1e10f, "10000000000"},
    {2.816025e14f, "281602500000000"},
    {2.8823261e17f, "288232600000000000"},
    {9.223372e18f, "9223372000000000000"},
    {1.18697724e20f, "118697725000000000000"},
    {-1.2345679e20f, "-123456790000000000000"}, /* longest form */
    {4.7223665e21f, "4.7223665e+21"},
    {6.02214076e23f, "6.0221406e+23"},
    {1.5846085e29f, "1.5846086e+29"},
    {1e30f, "1e+30"},
    {1e38f, "1e+38"},
    /* Notation boundaries: plain for 1e-6 <= |v| < 1e21. */
    {1e20f, "100000000000000000000"},
    {9.9999995e20f, "999999950000000000000"},
    {1e21f, "1e+21"},
    {1e-5f, "0.00001"},
    {1e-6f, "0.000001"},
    {9.999999e-7f, "9.999999e-7"},
    {1e-7f, "1e-7"},
    {1.5e-7f, "1.5e-7"},
};

/* The syntax check itself, so a lenient checker cannot hide bad output. */
static void test_json_checker(void) {
  const char *good[] = {"0",   "-0",   "1",     "0.1",    "-2.5",
                        "100", "1e30", "1E+30", "1.5e-7", "0.000001"};
  const char *bad[] = {"",    "-",    "+1",  ".5",  "1.",   "01", "-.5", "1e",
                       "1e+", "1.e5", "inf", "nan", "null", "1 ", "0x1"};

  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    CU_ASSERT(f32t_is_json_number(good[i]));
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CU_ASSERT(!f32t_is_json_number(bad[i]));
}

static void test_known_values(void) {
  size_t n = sizeof f32t_known_values / sizeof f32t_known_values[0];

  for (size_t i = 0; i < n; i++) {
    char out[SCN_F32_FMT_MAX];
    const struct f32t_known *k = &f32t_known_values[i];
    size_t len = scn_f32_format(k->value, out);

    CU_ASSERT_STRING_EQUAL(out, k->text);
    CU_ASSERT_EQUAL(len, strlen(k->text));
    if (strcmp(out, k->text) != 0)
      fprintf(stderr, "f32fmt: %.9g -> \"%s\", expected \"%s\"\n", (double)k->value, out, k->text);
  }
}

static void test_non_finite(void) {
  const float values[] = {NAN, -NAN, INFINITY, -INFINITY};

  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    char out[SCN_F32_FMT_MAX];
    CU_ASSERT_EQUAL(scn_f32_format(values[i], out), 4);
    CU_ASSERT_STRING_EQUAL(out, "null");
  }
}

/*
 * Shortest: for the known values, every power of two and a spread of other
 * patterns, no %.{k}g with fewer significant digits reads back.
 */
static void test_shortest(void) {
  size_t n = sizeof f32t_known_values / sizeof f32t_known_values[0];
  int reported = 0;
  long failures = 0;

  for (size_t i = 0; i < n; i++)
    failures += !f32t_check_pattern(f32t_bits(f32t_known_values[i].value), 1, &reported);
  for (uint32_t e = 0; e < 255; e++) {
    failures += !f32t_check_pattern(e << 23, 1, &reported);
    failures += !f32t_check_pattern((e << 23) | 1, 1, &reported);
    failures += !f32t_check_pattern((e << 23) | 0x7fffff, 1, &reported);
  }
  for (uint64_t x = 12345; x < 0x7f800000u; x += 87211)
    failures += !f32t_check_pattern((uint32_t)x, 1, &reported);
  CU_ASSERT_EQUAL(failures, 0);
}

static void f32t_check_range(uint64_t lo, uint64_t hi, uint64_t step, long *failures,
                             int *reported) {
  for (uint64_t x = lo; x <= hi && x <= UINT32_MAX; x += step) {
    uint32_t u = (uint32_t)x;
    if (f32t_is_finite_pattern(u))
      *failures += !f32t_check_pattern(u, 0, reported);
  }
}

/*
 * Round trip over a sample of the 2^32 patterns: a stride walk through all
 * exponents of both signs, the neighbourhood of every power of two and of
 * every power of ten, and the denormals.
 */
static void test_round_trip_sample(void) {
  long failures = 0;
  int reported = 0;

  /* Odd stride, so every exponent and varied low bits are hit. */
  f32t_check_range(0, UINT32_MAX, 853, &failures, &reported);

  for (uint64_t e = 0; e < 256; e++) {
    for (uint64_t sign = 0; sign < 2; sign++) {
      uint64_t base = (sign << 31) | (e << 23);
      uint64_t lo = e > 0 ? base - 64 : base;
      f32t_check_range(lo, base + 64, 1, &failures, &reported);
    }
  }

  for (int p = -45; p <= 38; p++) {
    char text[16];
    snprintf(text, sizeof text, "1e%d", p);
    uint32_t u = f32t_bits(strtof(text, NULL));
    f32t_check_range(u > 32 ? u - 32 : 0, u + 32, 1, &failures, &reported);
  }

  f32t_check_range(0, 4096, 1, &failures, &reported);
  f32t_check_range(0, 0x7fffff, 97, &failures, &reported);
  f32t_check_range(0x80000000u, 0x807fffffu, 89, &failures, &reported);

  CU_ASSERT_EQUAL(failures, 0);
}

/*
 * Nothing is written at or past SCN_F32_FMT_MAX, for the longest output of
 * each layout (the formatter may use the rest of the buffer as scratch).
 */
static void test_buffer_bounds(void) {
  const float longest[] = {-1.2345679e20f,    -9.9999995e20f,   -123456.79f, -1.23456735e-36f,
                           -0.0000012345678f, -1.17549421e-38f, -1e-45f,     -0.0f};

  for (size_t i = 0; i < sizeof longest / sizeof longest[0]; i++) {
    char out[SCN_F32_FMT_MAX + 8];
    memset(out, 0x5a, sizeof out);
    size_t len = scn_f32_format(longest[i], out);
    CU_ASSERT(len < SCN_F32_FMT_MAX);
    CU_ASSERT_EQUAL(len, strlen(out));
    for (size_t j = SCN_F32_FMT_MAX; j < sizeof out; j++)
      CU_ASSERT_EQUAL(out[j], 0x5a);
  }
}

static void test_matrix_identity(void) {
  const float m[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  char out[SCN_F32_MATRIX_FMT_MAX];
  size_t len = scn_f32_format_matrix(m, out);

  CU_ASSERT_STRING_EQUAL(out, "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]");
  CU_ASSERT_EQUAL(len, strlen(out));
}

static void test_matrix_values(void) {
  const float m[16] = {0.1f,        -2.5f,    1e-7f,       1e21f,  -0.0f,       100.0f,
                       1.0f / 3.0f, FLT_MAX,  FLT_MIN,     1e-45f, 16777216.0f, -1e-10f,
                       0.000123f,   65504.0f, 3.14159265f, NAN};
  char out[SCN_F32_MATRIX_FMT_MAX];
  size_t len = scn_f32_format_matrix(m, out);

  CU_ASSERT_STRING_EQUAL(out, "[0.1,-2.5,1e-7,1e+21,-0,100,0.33333334,3.4028235e+38,1.1754944e-38,"
                              "1e-45,16777216,-1e-10,0.000123,65504,3.1415927,null]");
  CU_ASSERT_EQUAL(len, strlen(out));
}

/* Longest possible numbers everywhere: fits the buffer and reads back. */
static void test_matrix_longest(void) {
  float m[16];
  char out[SCN_F32_MATRIX_FMT_MAX];

  for (int i = 0; i < 16; i++)
    m[i] = i % 2 ? -1.2345679e20f : -9.9999995e20f;
  size_t len = scn_f32_format_matrix(m, out);
  CU_ASSERT_EQUAL(len, 2 + 16 * 22 + 15);
  CU_ASSERT(len < SCN_F32_MATRIX_FMT_MAX);
  CU_ASSERT_EQUAL(len, strlen(out));
  CU_ASSERT_EQUAL(out[0], '[');
  CU_ASSERT_EQUAL(out[len - 1], ']');

  const char *p = out + 1;
  for (int i = 0; i < 16; i++) {
    char *end;
    float back = strtof(p, &end);
    CU_ASSERT_EQUAL(f32t_bits(back), f32t_bits(m[i]));
    CU_ASSERT_EQUAL(*end, i < 15 ? ',' : ']');
    p = end + 1;
  }
}

int t_register_f32fmt(void) {
  static const t_test tests[] = {
      {"json checker", test_json_checker},
      {"known values", test_known_values},
      {"non-finite", test_non_finite},
      {"shortest", test_shortest},
      {"round trip sample", test_round_trip_sample},
      {"buffer bounds", test_buffer_bounds},
      {"matrix identity", test_matrix_identity},
      {"matrix values", test_matrix_values},
      {"matrix longest", test_matrix_longest},
  };
  return T_ADD_SUITE("f32fmt", NULL, NULL, tests);
}

/* Unit tests of scenectl's "did you mean": the Damerau-Levenshtein distance against known pairs
 * and against a search over single edits on random short words (seed printed; SCN_SEED sets
 * it), and the suggestions and their text from the command table. */
#include "ctl_suggest.h"
#include "rng.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_distance_pairs(void) {
  static const struct {
    const char *a, *b;
    int d;
  } pairs[] = {
      {"", "", 0},
      {"", "abc", 3},
      {"abc", "abc", 0},
      {"transfrom.get", "transform.get", 1}, /* a transposition is one edit */
      {"wrold.lsit", "world.list", 2},
      {"world.craete", "world.create", 1},
      {"kitten", "sitting", 3},
      {"ca", "abc", 2}, /* 3 in the restricted (optimal string alignment) distance */
      {"TRANSFORM.GET", "transform.get", 0},
      {"helo", "hello", 1},
      {"helo", "help", 1},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
    int d = ctl_distance(pairs[i].a, pairs[i].b, 5), back = ctl_distance(pairs[i].b, pairs[i].a, 5);
    CU_ASSERT_EQUAL(d, pairs[i].d);
    CU_ASSERT_EQUAL(back, pairs[i].d);
    if (d != pairs[i].d)
      fprintf(stderr, "  distance(%s, %s) = %d, not %d\n", pairs[i].a, pairs[i].b, d, pairs[i].d);
  }
  /* Over the limit: limit + 1, also when only the lengths tell. */
  CU_ASSERT_EQUAL(ctl_distance("kitten", "sitting", 2), 3);
  CU_ASSERT_EQUAL(ctl_distance("a", "abcdefgh", 2), 3);
  CU_ASSERT_EQUAL(ctl_distance("transform.get", "ping", 2), 3);
}

/* Whether b is at most k single edits (insert, delete, substitute, swap two adjacent) from a,
 * over the alphabet "abc": the distance's definition, searched. */
static bool within(const char *a, const char *b, int k) {
  if (strcmp(a, b) == 0)
    return true;
  size_t n = strlen(a), m = strlen(b);
  if (k == 0 || (n > m ? n - m : m - n) > (size_t)k)
    return false;
  char t[16];
  for (size_t i = 0; i <= n; i++) {
    for (const char *c = "abc"; *c; c++) { /* insert before i */
      memcpy(t, a, i);
      t[i] = *c;
      memcpy(t + i + 1, a + i, n - i + 1);
      if (within(t, b, k - 1))
        return true;
    }
    if (i == n)
      break;
    memcpy(t, a, n + 1); /* delete i */
    memmove(t + i, t + i + 1, n - i);
    if (within(t, b, k - 1))
      return true;
    for (const char *c = "abc"; *c; c++) { /* substitute i */
      memcpy(t, a, n + 1);
      t[i] = *c;
      if (*c != a[i] && within(t, b, k - 1))
        return true;
    }
    if (i + 1 < n && a[i] != a[i + 1]) { /* swap i and i + 1 */
      memcpy(t, a, n + 1);
      t[i] = a[i + 1];
      t[i + 1] = a[i];
      if (within(t, b, k - 1))
        return true;
    }
  }
  return false;
}

static void random_word(rng *r, char *w) {
  uint32_t len = rng_below(r, 6);
  for (uint32_t i = 0; i < len; i++)
    w[i] = "abc"[rng_below(r, 3)];
  w[len] = '\0';
}

static void test_distance_random(void) {
  const char *env = getenv("SCN_SEED");
  uint64_t seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
  printf("  ctl_distance: seed %llu (SCN_SEED replays it)\n", (unsigned long long)seed);
  rng r = {seed};
  int bad = 0;
  for (int i = 0; i < 400; i++) {
    char a[8], b[8];
    random_word(&r, a);
    random_word(&r, b);
    int want = 0;
    while (want <= 3 && !within(a, b, want))
      want++;
    int got = ctl_distance(a, b, 3);
    if (got != want && bad++ < 5)
      fprintf(stderr, "  distance(\"%s\", \"%s\") = %d, searched %d (seed %llu)\n", a, b, got, want,
              (unsigned long long)seed);
  }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_suggest(void) {
  const char *out[CTL_SUGGEST_MAX];
  CU_ASSERT_EQUAL_FATAL(ctl_suggest("transfrom.get", NULL, out), 1);
  CU_ASSERT_STRING_EQUAL(out[0], "transform.get");
  CU_ASSERT_EQUAL_FATAL(ctl_suggest("Transform.Get", NULL, out), 1);
  CU_ASSERT_STRING_EQUAL(out[0], "transform.get");
  CU_ASSERT_EQUAL_FATAL(ctl_suggest("wrold.lsit", NULL, out), 1);
  CU_ASSERT_STRING_EQUAL(out[0], "world.list");
  /* Only the nearest: world.destory is 1 from world.destroy, 3 or more from the rest. */
  CU_ASSERT_EQUAL_FATAL(ctl_suggest("world.destory", NULL, out), 1);
  CU_ASSERT_STRING_EQUAL(out[0], "world.destroy");
  /* Ties: the table's first, then extra's. */
  const char *help[] = {"help", NULL};
  CU_ASSERT_EQUAL_FATAL(ctl_suggest("helo", help, out), 2);
  CU_ASSERT_STRING_EQUAL(out[0], "hello");
  CU_ASSERT_STRING_EQUAL(out[1], "help");
  CU_ASSERT_EQUAL(ctl_suggest("hlep", NULL, out), 0);
  CU_ASSERT_EQUAL_FATAL(ctl_suggest("hlep", help, out), 1);
  CU_ASSERT_STRING_EQUAL(out[0], "help");
  /* At most CTL_SUGGEST_MAX, and nothing beyond CTL_SUGGEST_DISTANCE. */
  const char *many[] = {"zz", "zy", "zx", "zw", NULL};
  CU_ASSERT_EQUAL_FATAL(ctl_suggest("z", many, out), CTL_SUGGEST_MAX);
  CU_ASSERT_STRING_EQUAL(out[0], "zz");
  CU_ASSERT_STRING_EQUAL(out[2], "zx");
  CU_ASSERT_EQUAL(ctl_suggest("xyz", NULL, out), 0);
  CU_ASSERT_EQUAL(ctl_suggest("transform.getttt", NULL, out), 0);
  /* Every name of the table is its own nearest. */
  for (unsigned i = 0; i < scn_command_count; i++) {
    int n = ctl_suggest(scn_commands[i].name, NULL, out);
    CU_ASSERT(n == 1 && strcmp(out[0], scn_commands[i].name) == 0);
  }
}

static void test_suggest_text(void) {
  char text[128];
  CU_ASSERT_EQUAL(ctl_suggest_text("transfrom.get", NULL, text, sizeof text), 1);
  CU_ASSERT_STRING_EQUAL(text, "; did you mean \"transform.get\"?");
  const char *help[] = {"help", NULL};
  CU_ASSERT_EQUAL(ctl_suggest_text("helo", help, text, sizeof text), 2);
  CU_ASSERT_STRING_EQUAL(text, "; did you mean \"hello\" or \"help\"?");
  const char *many[] = {"zz", "zy", "zx", NULL};
  CU_ASSERT_EQUAL(ctl_suggest_text("z", many, text, sizeof text), 3);
  CU_ASSERT_STRING_EQUAL(text, "; did you mean \"zz\", \"zy\" or \"zx\"?");
  CU_ASSERT_EQUAL(ctl_suggest_text("xyz", NULL, text, sizeof text), 0);
  CU_ASSERT_STRING_EQUAL(text, "");
  /* A short buffer: cut, still terminated. */
  char small[12];
  memset(small, 'x', sizeof small);
  CU_ASSERT_EQUAL(ctl_suggest_text("z", many, small, sizeof small), 3);
  CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
}

int t_register_ctl_suggest(void) {
  static const t_test tests[] = {
      {"distance of known pairs", test_distance_pairs},
      {"distance against a search of edits", test_distance_random},
      {"nearest command names", test_suggest},
      {"did you mean text", test_suggest_text},
  };
  return T_ADD_SUITE("ctl_suggest", NULL, NULL, tests);
}

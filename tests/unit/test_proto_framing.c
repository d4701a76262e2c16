/* Unit tests of the protocol's line framing: lines split across feeds or many in one, CRLF,
 * blank lines, the line limit, overlong lines discarded, and a callback that stops the feed.
 * No daemon, no sockets. */
#include "framing.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- framing --------------------------------------------------------------------------------- */

#define MAX_LINES 64

/* Lines handed out by the framer; NULL entries are overlong lines. */
typedef struct collected {
  char *lines[MAX_LINES];
  size_t lens[MAX_LINES];
  int n;
  int stop_after; /* return false after this many lines (0: never) */
} collected;

static bool collect(void *ud, const char *line, size_t len) {
  collected *c = ud;
  if (c->n < MAX_LINES) {
    c->lines[c->n] = NULL;
    c->lens[c->n] = len;
    if (line) {
      c->lines[c->n] = malloc(len + 1);
      if (c->lines[c->n]) {
        memcpy(c->lines[c->n], line, len);
        c->lines[c->n][len] = '\0';
      }
    }
  }
  c->n++;
  return !(c->stop_after && c->n >= c->stop_after);
}

static void collected_free(collected *c) {
  for (int i = 0; i < c->n && i < MAX_LINES; i++)
    free(c->lines[i]);
  memset(c, 0, sizeof *c);
}

static bool feed(scn_framer *f, const char *s, collected *c) {
  return scn_framer_feed(f, s, strlen(s), collect, c);
}

/* True when line i was reported with exactly this text. */
static bool line_is(const collected *c, int i, const char *text) {
  return i < c->n && i < MAX_LINES && c->lines[i] && c->lens[i] == strlen(text) &&
         strcmp(c->lines[i], text) == 0;
}

static bool line_overlong(const collected *c, int i) {
  return i < c->n && i < MAX_LINES && c->lines[i] == NULL;
}

static void test_framing_split_across_feeds(void) {
  scn_framer f;
  collected c = {0};
  scn_framer_init(&f, 1024);
  CU_ASSERT_TRUE(feed(&f, "{\"cmd\":", &c));
  CU_ASSERT_EQUAL(c.n, 0);
  CU_ASSERT_TRUE(scn_framer_pending(&f));
  CU_ASSERT_TRUE(feed(&f, "\"pi", &c));
  CU_ASSERT_EQUAL(c.n, 0);
  CU_ASSERT_TRUE(feed(&f, "ng\"}", &c));
  CU_ASSERT_EQUAL(c.n, 0);
  CU_ASSERT_TRUE(feed(&f, "\n{\"a\"", &c));
  CU_ASSERT_EQUAL(c.n, 1);
  CU_ASSERT_TRUE(line_is(&c, 0, "{\"cmd\":\"ping\"}"));
  CU_ASSERT_TRUE(scn_framer_pending(&f));
  CU_ASSERT_TRUE(feed(&f, ":1}\n", &c));
  CU_ASSERT_EQUAL(c.n, 2);
  CU_ASSERT_TRUE(line_is(&c, 1, "{\"a\":1}"));
  CU_ASSERT_FALSE(scn_framer_pending(&f));
  /* One byte at a time. */
  const char *bytes = "abc\ndef\n";
  for (size_t i = 0; i < strlen(bytes); i++)
    CU_ASSERT_TRUE(scn_framer_feed(&f, bytes + i, 1, collect, &c));
  CU_ASSERT_EQUAL(c.n, 4);
  CU_ASSERT_TRUE(line_is(&c, 2, "abc"));
  CU_ASSERT_TRUE(line_is(&c, 3, "def"));
  collected_free(&c);
  scn_framer_free(&f);
}

static void test_framing_many_lines_one_feed(void) {
  scn_framer f;
  collected c = {0};
  scn_framer_init(&f, 1024);
  char data[1024] = "";
  for (int i = 0; i < 40; i++) {
    char l[32];
    snprintf(l, sizeof l, "line%d\n", i);
    strcat(data, l);
  }
  strcat(data, "tail");
  CU_ASSERT_TRUE(feed(&f, data, &c));
  CU_ASSERT_EQUAL(c.n, 40);
  for (int i = 0; i < 40 && i < c.n; i++) {
    char l[32];
    snprintf(l, sizeof l, "line%d", i);
    CU_ASSERT_TRUE(line_is(&c, i, l));
  }
  CU_ASSERT_TRUE(scn_framer_pending(&f));
  CU_ASSERT_TRUE(feed(&f, "\n", &c));
  CU_ASSERT_EQUAL(c.n, 41);
  CU_ASSERT_TRUE(line_is(&c, 40, "tail"));
  collected_free(&c);
  scn_framer_free(&f);
}

static void test_framing_crlf(void) {
  scn_framer f;
  collected c = {0};
  scn_framer_init(&f, 1024);
  CU_ASSERT_TRUE(feed(&f, "one\r\ntwo\r\nthr", &c));
  CU_ASSERT_TRUE(feed(&f, "ee\r", &c));
  CU_ASSERT_EQUAL(c.n, 2);
  CU_ASSERT_TRUE(feed(&f, "\n", &c));
  CU_ASSERT_EQUAL(c.n, 3);
  CU_ASSERT_TRUE(line_is(&c, 0, "one"));
  CU_ASSERT_TRUE(line_is(&c, 1, "two"));
  CU_ASSERT_TRUE(line_is(&c, 2, "three"));
  /* A '\r' that is not at the end of the line stays. */
  CU_ASSERT_TRUE(feed(&f, "a\rb\n", &c));
  CU_ASSERT_EQUAL(c.n, 4);
  CU_ASSERT_TRUE(line_is(&c, 3, "a\rb"));
  collected_free(&c);
  scn_framer_free(&f);
}

static void test_framing_blank_lines(void) {
  scn_framer f;
  collected c = {0};
  scn_framer_init(&f, 1024);
  CU_ASSERT_TRUE(feed(&f, "\n\n   \n\t\t\n \t \r\n\r\nx\n", &c));
  CU_ASSERT_EQUAL(c.n, 1);
  CU_ASSERT_TRUE(line_is(&c, 0, "x"));
  /* Blank lines split across feeds. */
  CU_ASSERT_TRUE(feed(&f, "  ", &c));
  CU_ASSERT_TRUE(feed(&f, "\t \r", &c));
  CU_ASSERT_TRUE(feed(&f, "\n", &c));
  CU_ASSERT_EQUAL(c.n, 1);
  CU_ASSERT_FALSE(scn_framer_pending(&f));
  /* Leading and trailing spaces of a real line are kept. */
  CU_ASSERT_TRUE(feed(&f, "  y \n", &c));
  CU_ASSERT_EQUAL(c.n, 2);
  CU_ASSERT_TRUE(line_is(&c, 1, "  y "));
  collected_free(&c);
  scn_framer_free(&f);
}

static char *repeat(char ch, size_t n, const char *suffix) {
  size_t sl = strlen(suffix);
  char *s = malloc(n + sl + 1);
  if (!s)
    return NULL;
  memset(s, ch, n);
  memcpy(s + n, suffix, sl + 1);
  return s;
}

static void test_framing_limit_exact(void) {
  const size_t max = 100;
  scn_framer f;
  collected c = {0};
  scn_framer_init(&f, max);
  char *exact = repeat('a', max, "\n");
  char *exact_crlf = repeat('b', max, "\r\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(exact);
  CU_ASSERT_PTR_NOT_NULL_FATAL(exact_crlf);
  /* In one feed. */
  CU_ASSERT_TRUE(feed(&f, exact, &c));
  CU_ASSERT_TRUE(feed(&f, exact_crlf, &c));
  CU_ASSERT_EQUAL(c.n, 2);
  CU_ASSERT_TRUE(c.n >= 2 && c.lines[0] && c.lens[0] == max && c.lines[0][0] == 'a');
  CU_ASSERT_TRUE(c.n >= 2 && c.lines[1] && c.lens[1] == max && c.lines[1][max - 1] == 'b');
  /* Split over feeds, including just before the '\r' and the '\n'. */
  CU_ASSERT_TRUE(scn_framer_feed(&f, exact, 50, collect, &c));
  CU_ASSERT_TRUE(scn_framer_feed(&f, exact + 50, max - 50, collect, &c));
  CU_ASSERT_TRUE(feed(&f, "\n", &c));
  CU_ASSERT_TRUE(scn_framer_feed(&f, exact_crlf, max, collect, &c));
  CU_ASSERT_TRUE(feed(&f, "\r", &c));
  CU_ASSERT_TRUE(feed(&f, "\n", &c));
  CU_ASSERT_EQUAL(c.n, 4);
  CU_ASSERT_TRUE(c.n >= 4 && c.lines[2] && c.lens[2] == max);
  CU_ASSERT_TRUE(c.n >= 4 && c.lines[3] && c.lens[3] == max && c.lines[3][max - 1] == 'b');
  free(exact);
  free(exact_crlf);
  collected_free(&c);
  scn_framer_free(&f);
}

static void test_framing_limit_plus_one(void) {
  const size_t max = 100;
  scn_framer f;
  collected c = {0};
  scn_framer_init(&f, max);
  char *over = repeat('x', max + 1, "\nok1\n");
  char *over_crlf = repeat('y', max + 1, "\r\nok2\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(over);
  CU_ASSERT_PTR_NOT_NULL_FATAL(over_crlf);
  CU_ASSERT_TRUE(feed(&f, over, &c));
  CU_ASSERT_TRUE(feed(&f, over_crlf, &c));
  CU_ASSERT_EQUAL(c.n, 4);
  CU_ASSERT_TRUE(line_overlong(&c, 0));
  CU_ASSERT_TRUE(line_is(&c, 1, "ok1"));
  CU_ASSERT_TRUE(line_overlong(&c, 2));
  CU_ASSERT_TRUE(line_is(&c, 3, "ok2"));
  /* limit + 1 bytes split so that the framer only learns at the '\n'. */
  CU_ASSERT_TRUE(scn_framer_feed(&f, over, max + 1, collect, &c));
  CU_ASSERT_EQUAL(c.n, 4);
  CU_ASSERT_TRUE(feed(&f, "\nok3\n", &c));
  CU_ASSERT_EQUAL(c.n, 6);
  CU_ASSERT_TRUE(line_overlong(&c, 4));
  CU_ASSERT_TRUE(line_is(&c, 5, "ok3"));
  free(over);
  free(over_crlf);
  collected_free(&c);
  scn_framer_free(&f);
}

static void test_framing_overlong_discarded_across_feeds(void) {
  const size_t max = 64;
  scn_framer f;
  collected c = {0};
  scn_framer_init(&f, max);
  CU_ASSERT_TRUE(feed(&f, "first\n", &c));
  char *chunk = repeat('z', 200, "");
  CU_ASSERT_PTR_NOT_NULL_FATAL(chunk);
  /* An overlong line in five feeds: one NULL, as soon as it is known, then nothing. */
  CU_ASSERT_TRUE(feed(&f, "{\"cmd\":\"ping\",\"pad\":\"", &c));
  CU_ASSERT_EQUAL(c.n, 1);
  for (int i = 0; i < 4; i++) {
    CU_ASSERT_TRUE(feed(&f, chunk, &c));
    CU_ASSERT_EQUAL(c.n, 2);
    CU_ASSERT_TRUE(scn_framer_pending(&f));
  }
  CU_ASSERT_TRUE(line_overlong(&c, 1));
  /* The tail of the long line, which looks like a request, is dropped too. */
  CU_ASSERT_TRUE(feed(&f, "\"}\n{\"cmd\":\"after\"}\n", &c));
  CU_ASSERT_EQUAL(c.n, 3);
  CU_ASSERT_TRUE(line_is(&c, 0, "first"));
  CU_ASSERT_TRUE(line_is(&c, 2, "{\"cmd\":\"after\"}"));
  CU_ASSERT_FALSE(scn_framer_pending(&f));
  /* Overlong with the '\n' in the same feed as the start, then a usable line. */
  char *big = repeat('q', 5000, "\nnext\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(big);
  CU_ASSERT_TRUE(feed(&f, big, &c));
  CU_ASSERT_EQUAL(c.n, 5);
  CU_ASSERT_TRUE(line_overlong(&c, 3));
  CU_ASSERT_TRUE(line_is(&c, 4, "next"));
  /* A long line that starts after a complete line in the same feed. */
  char *mixed = repeat('m', 300, "");
  CU_ASSERT_PTR_NOT_NULL_FATAL(mixed);
  CU_ASSERT_TRUE(feed(&f, "a\n", &c));
  CU_ASSERT_TRUE(feed(&f, mixed, &c));
  CU_ASSERT_TRUE(feed(&f, mixed, &c));
  CU_ASSERT_TRUE(feed(&f, "\nb\n", &c));
  CU_ASSERT_EQUAL(c.n, 8);
  CU_ASSERT_TRUE(line_is(&c, 5, "a"));
  CU_ASSERT_TRUE(line_overlong(&c, 6));
  CU_ASSERT_TRUE(line_is(&c, 7, "b"));
  free(chunk);
  free(big);
  free(mixed);
  collected_free(&c);
  scn_framer_free(&f);
}

static void test_framing_stop_early(void) {
  scn_framer f;
  collected c = {.stop_after = 2};
  scn_framer_init(&f, 64);
  CU_ASSERT_FALSE(feed(&f, "a\nb\nc\n", &c));
  CU_ASSERT_EQUAL(c.n, 2);
  CU_ASSERT_TRUE(line_is(&c, 0, "a"));
  CU_ASSERT_TRUE(line_is(&c, 1, "b"));
  collected_free(&c);
  scn_framer_free(&f);
}

int t_register_proto_framing(void) {
  static const t_test tests[] = {
      {"framing: line split across feeds", test_framing_split_across_feeds},
      {"framing: many lines in one feed", test_framing_many_lines_one_feed},
      {"framing: CRLF", test_framing_crlf},
      {"framing: blank lines skipped", test_framing_blank_lines},
      {"framing: line at the limit", test_framing_limit_exact},
      {"framing: limit + 1 rejected", test_framing_limit_plus_one},
      {"framing: overlong line discarded across feeds",
       test_framing_overlong_discarded_across_feeds},
      {"framing: callback stops the feed", test_framing_stop_early},
  };
  return T_ADD_SUITE("proto_framing", NULL, NULL, tests);
}

/* Integration tests of the line protocol against the real daemon: pipelining, two connections,
 * framing (line limit, blank lines, CRLF), and clients that vanish. Malformed lines have a
 * suite of their own (daemon_commands_malformed). */
#include "command_fixtures.h"
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- pipelining and concurrency -------------------------------------------------------------- */

#define PIPELINED 6000

static void test_pipelining(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  new_world(&c, "pl");
  unsigned long long e = TF0(&c, "pl");
  text all = {0};
  for (int i = 0; i < PIPELINED; i++) {
    switch (i % 4) {
    case 0:
      text_addf(&all, "{\"cmd\":\"ping\",\"id\":%d}\n", i);
      break;
    case 1:
      text_addf(&all,
                "{\"cmd\":\"transform.set_local\",\"world\":\"pl\",\"entity\":%llu,\"t\":[%d,0,0],"
                "\"id\":%d}\n",
                e, i, i);
      break;
    case 2:
      text_addf(&all, "{\"id\":%d,\"cmd\":\"transform.get\",\"world\":\"pl\",\"entity\":%llu}\n", i,
                e);
      break;
    default:
      text_addf(&all, "{\"cmd\":\"nope\",\"id\":%d}\n", i);
      break;
    }
  }
  long t0 = t_now_ms();
  CU_ASSERT_EQUAL(t_client_send_raw(&c, all.s, all.len), 0);
  text_free(&all);
  int got = 0, wrong = 0;
  for (int i = 0; i < PIPELINED; i++) {
    cJSON *r = t_client_recv_json(&c, WAIT_MS);
    if (!r)
      break;
    got++;
    bool good = t_resp_num(r, "id") == i && t_resp_ok(r) == (i % 4 != 3);
    if (i % 4 == 3)
      good = good && strcmp(t_resp_code(r), "UNKNOWN_COMMAND") == 0;
    float m[16];
    if (i % 4 == 2)
      good = good && mat_of(r, "world", m) && m[12] == (float)(i - 1);
    if (!good && wrong++ < 3)
      t_report("pipelined response out of order or wrong", r);
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(got, PIPELINED);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_TRUE(t_now_ms() - t0 < 10000);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"pl\"}");
  t_client_close(&c);
}

static void test_two_connections(void) {
  t_client a, b;
  if (!CONNECT(&a, commands_daemon.port))
    return;
  if (!CONNECT(&b, commands_daemon.port)) {
    t_client_close(&a);
    return;
  }
  new_world(&a, "two");
  unsigned long long e = TF0(&b, "two");
  CU_ASSERT_EQUAL(parent_of(&a, "two", e), 0);
  unsigned long long p = TF(&a, "two", "\"t\":[0,0,7]");
  OKD(&b, "{\"cmd\":\"transform.link\",\"world\":\"two\",\"entity\":%llu,\"parent\":%llu}", e, p);
  float m[16], want[16];
  mat_trs(0, 0, 7, 1, want);
  CU_ASSERT_TRUE(matrix(&a, "two", e, "world", m));
  CU_ASSERT_EQUAL(memcmp(m, want, sizeof m), 0);
  /* Alternating writers, each read right after the other's write. */
  for (int i = 0; i < 50; i++) {
    t_client *w = i % 2 ? &a : &b, *rd = i % 2 ? &b : &a;
    OKD(w, "{\"cmd\":\"transform.set_local\",\"world\":\"two\",\"entity\":%llu,\"t\":[%d,0,0]}", p,
        i);
    CU_ASSERT_TRUE(matrix(rd, "two", e, "world", m));
    mat_trs((float)i, 0, 0, 1, want);
    if (memcmp(m, want, sizeof m) != 0) {
      CU_FAIL("a write on one connection is not seen on the other");
      break;
    }
  }
  OKD(&b, "{\"cmd\":\"transform.destroy\",\"world\":\"two\",\"entity\":%llu,\"recursive\":true}",
      p);
  ERR(&a, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"two\",\"entity\":%llu}", e);
  OKD(&b, "{\"cmd\":\"world.destroy\",\"world\":\"two\"}");
  ERR(&a, "NOT_FOUND", "{\"cmd\":\"world.destroy\",\"world\":\"two\"}");
  t_client_close(&a);
  t_client_close(&b);
}

/* ---- framing --------------------------------------------------------------------------------- */

/* {"cmd":"ping","id":N   ...   } of exactly total bytes (no line end): the padding is
 * whitespace before the closing brace, since ping takes no member that could hold it. */
static char *padded_ping(int id, size_t total) {
  char head[64];
  int n = snprintf(head, sizeof head, "{\"cmd\":\"ping\",\"id\":%d", id);
  char *s = malloc(total + 1);
  if (!s)
    abort();
  memcpy(s, head, (size_t)n);
  memset(s + n, ' ', total - (size_t)n - 1);
  s[total - 1] = '}';
  s[total] = '\0';
  return s;
}

/* The next response must be ok with this id. */
static void expect_ok_id_at(int at, t_client *c, int id) {
  cJSON *r = t_client_recv_json(c, WAIT_MS);
  bool good = t_resp_ok(r) && t_resp_num(r, "id") == id;
  if (!t_check_at(__FILE__, at, good, "ok with the id", r))
    fprintf(stderr, "  (expected ok with id %d)\n", id);
  cJSON_Delete(r);
}

#define EXPECT_OK_ID(c, id) expect_ok_id_at(__LINE__, (c), (id))

/* The next response must be a LIMIT error without an id. */
static void expect_limit_at(int at, t_client *c) {
  cJSON *r = t_client_recv_json(c, WAIT_MS);
  bool good = r && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ok")) &&
              strcmp(t_resp_code(r), "LIMIT") == 0 && !t_resp_has(r, "id");
  t_check_at(__FILE__, at, good, "LIMIT without an id", r);
  cJSON_Delete(r);
}

#define EXPECT_LIMIT(c) expect_limit_at(__LINE__, (c))

static void send_str(t_client *c, const char *s) {
  CU_ASSERT_EQUAL(t_client_send_raw(c, s, strlen(s)), 0);
}

static void test_line_limit(void) {
  t_daemon d;
  const char *args[] = {"--max-line", "1024", NULL};
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    return;
  char *at = padded_ping(1, 1024), *over = padded_ping(3, 1025);
  /* Exactly the limit passes, with \n or \r\n (the line end does not count). */
  send_str(&c, at);
  send_str(&c, "\n");
  EXPECT_OK_ID(&c, 1);
  at[19] = '2'; /* id 1 -> 2 */
  send_str(&c, at);
  send_str(&c, "\r\n");
  EXPECT_OK_ID(&c, 2);
  /* One byte more is LIMIT, without an id; the next line on the connection works. */
  send_str(&c, over);
  send_str(&c, "\n{\"cmd\":\"ping\",\"id\":3}\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 3);
  send_str(&c, over);
  send_str(&c, "\r\n{\"cmd\":\"ping\",\"id\":4}\r\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 4);
  /* The same across separate reads. */
  at[19] = '5';
  CU_ASSERT_EQUAL(t_client_send_raw(&c, at, 500), 0);
  t_sleep_ms(20);
  CU_ASSERT_EQUAL(t_client_send_raw(&c, at + 500, 524), 0);
  t_sleep_ms(20);
  send_str(&c, "\r");
  t_sleep_ms(20);
  send_str(&c, "\n");
  EXPECT_OK_ID(&c, 5);
  CU_ASSERT_EQUAL(t_client_send_raw(&c, over, 600), 0);
  t_sleep_ms(20);
  CU_ASSERT_EQUAL(t_client_send_raw(&c, over + 600, 425), 0);
  t_sleep_ms(20);
  send_str(&c, "\r");
  t_sleep_ms(20);
  send_str(&c, "\n{\"cmd\":\"ping\",\"id\":6}\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 6);
  QUIET(&c, 100);

  /* A huge line over many writes: one LIMIT, then the connection goes on. */
  char chunk[10000];
  memset(chunk, 'y', sizeof chunk);
  send_str(&c, "{\"cmd\":\"ping\",\"id\":7}\n{\"cmd\":\"ping\",\"id\":\"8");
  for (int i = 0; i < 30; i++) {
    CU_ASSERT_EQUAL(t_client_send_raw(&c, chunk, sizeof chunk), 0);
    t_sleep_ms(1);
  }
  send_str(&c, "\"}\n{\"cmd\":\"ping\",\"id\":9}\n");
  EXPECT_OK_ID(&c, 7);
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 9);
  QUIET(&c, 150);
  /* Garbage far past the limit (no JSON at all) is the same. */
  for (int i = 0; i < 10; i++)
    CU_ASSERT_EQUAL(t_client_send_raw(&c, chunk, sizeof chunk), 0);
  send_str(&c, "\n\n{\"cmd\":\"ping\",\"id\":10}\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 10);
  QUIET(&c, 100);
  free(at);
  free(over);
  t_client_close(&c);
  STOP_OK(&d, 10000);
}

static void test_default_line_limit(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  /* The default limit is 1 MiB. */
  char *at = padded_ping(1, 1048576), *over = padded_ping(2, 1048577);
  send_str(&c, at);
  send_str(&c, "\n");
  EXPECT_OK_ID(&c, 1);
  send_str(&c, over);
  send_str(&c, "\n{\"cmd\":\"ping\",\"id\":3}\n");
  EXPECT_LIMIT(&c);
  EXPECT_OK_ID(&c, 3);
  free(at);
  free(over);
  t_client_close(&c);
}

static void test_blank_lines_crlf(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  send_str(&c, "\n\n   \n\t\n\r\n \t \r\n{\"cmd\":\"ping\",\"id\":1}\r\n\n\n");
  EXPECT_OK_ID(&c, 1);
  QUIET(&c, 150);
  send_str(&c, "{\"cmd\":\"ping\",\"id\":2}  \r\n");
  EXPECT_OK_ID(&c, 2);
  send_str(&c, "  {\"cmd\":\"ping\",\"id\":3}\n\r\n{\"cmd\":\"ping\",\"id\":4}\r\n");
  EXPECT_OK_ID(&c, 3);
  EXPECT_OK_ID(&c, 4);
  /* A CRLF split between writes. */
  send_str(&c, "{\"cmd\":\"ping\",\"id\":5}\r");
  t_sleep_ms(20);
  send_str(&c, "\n");
  EXPECT_OK_ID(&c, 5);
  QUIET(&c, 100);
  t_client_close(&c);
}

/* ---- clients that go away -------------------------------------------------------------------- */

static void test_vanishing_clients(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  new_world(&c, "van");
  unsigned long long e = TF(&c, "van", "\"t\":[1,2,3]");
  uint64_t ids[] = {e};
  char *s1 = snapshot(&c, "van", ids, 1);

  /* Gone in the middle of a line: the partial request is never run. */
  t_client v;
  if (CONNECT(&v, commands_daemon.port)) {
    send_str(&v, "{\"cmd\":\"ping\",\"id\":1}\n{\"cmd\":\"world.create\",\"world\":\"vanished\"");
    t_client_close(&v);
  }
  /* Gone with many replies pending (never read). */
  if (CONNECT(&v, commands_daemon.port)) {
    text many = {0};
    for (int i = 0; i < 20000; i++)
      text_addf(&many, "{\"cmd\":\"transform.get\",\"world\":\"van\",\"entity\":%llu,\"id\":%d}\n",
                e, i);
    text_addf(&many, "{\"cmd\":\"world.create\",\"world\":\"van");
    CU_ASSERT_EQUAL(t_client_send_raw(&v, many.s, many.len), 0);
    text_free(&many);
    t_client_close(&v);
  }
  /* Gone in the middle of an overlong line. */
  if (CONNECT(&v, commands_daemon.port)) {
    char *big = padded_ping(1, 1200000);
    CU_ASSERT_EQUAL(t_client_send_raw(&v, big, 1100000), 0);
    free(big);
    t_client_close(&v);
  }
  /* Half-closed: what was sent in full is answered, then the daemon closes. */
  if (CONNECT(&v, commands_daemon.port)) {
    send_str(&v,
             "{\"cmd\":\"ping\",\"id\":1}\n{\"cmd\":\"ping\",\"id\":2}\n{\"cmd\":\"world.create\","
             "\"world\":\"half\"");
    CU_ASSERT_EQUAL(shutdown(v.fd, SHUT_WR), 0);
    EXPECT_OK_ID(&v, 1);
    EXPECT_OK_ID(&v, 2);
    CU_ASSERT_TRUE(t_client_closed(&v, 3000));
    t_client_close(&v);
  }
  /* The others are undisturbed. */
  OKD(&c, "{\"cmd\":\"ping\"}");
  CU_ASSERT_EQUAL(t_wait_info(&c, "connections", 1, 5000), 1);
  char *s2 = snapshot(&c, "van", ids, 1);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  CU_ASSERT_EQUAL(listed_transforms(&c, "vanished"), -1);
  CU_ASSERT_EQUAL(listed_transforms(&c, "half"), -1);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"van\"}");
  t_client_close(&c);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_daemon_commands_lines(void) {
  static const t_test tests[] = {
      {"pipelining: thousands of requests in one write", test_pipelining},
      {"two connections see each other's writes", test_two_connections},
      {"line limit (--max-line 1024)", test_line_limit},
      {"default line limit (1 MiB)", test_default_line_limit},
      {"blank lines and CRLF", test_blank_lines_crlf},
      {"clients that vanish", test_vanishing_clients},
  };
  return T_ADD_SUITE("daemon_commands_lines", commands_suite_init, commands_suite_clean, tests);
}

/* Integration tests of the C client library (scn_client.h) against the real daemon: calls,
 * error replies, pipelining, stream events, the parts of a transform, matrices at a past tick,
 * refused connections, timeouts, a closed connection, token auth (with scenectl), and b64
 * mode: matrices and frames to the bit. */
#include "b64_fixtures.h"
#include "client_fixtures.h"
#include "daemon_fixtures.h"
#include "scn_client.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* A socket listening on 127.0.0.1 that nobody accepts on (the kernel completes handshakes). */
static int silent_listener(int *port, int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  if (rcvbuf > 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

/* Stream events handed to a callback, kept as copies. */
typedef struct events {
  cJSON *list;
} events;

static void collect(void *ud, const cJSON *ev) {
  events *e = ud;
  cJSON_AddItemToArray(e->list, cJSON_Duplicate(ev, 1));
}

/* Polls until the list holds want events or timeout_ms passes; the count. */
static int wait_events(scn_cli *c, events *e, int want, int timeout_ms) {
  long deadline = t_now_ms() + timeout_ms;
  while (cJSON_GetArraySize(e->list) < want && t_now_ms() < deadline) {
    int rc = scn_cli_poll_events(c, 50);
    if (rc < 0) {
      t_report_text("poll_events", scn_cli_error(c));
      break;
    }
  }
  return cJSON_GetArraySize(e->list);
}

/* ---- C library ------------------------------------------------------------------------------- */

static void test_lib_calls(void) {
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT(scn_cli_fd(c) >= 0);

  cJSON *r = call_ok(c, "{\"cmd\":\"ping\"}");
  CU_ASSERT(cJSON_IsTrue(field(r, "ok")));
  CU_ASSERT_PTR_NULL(field(r, "id"));
  CU_ASSERT_EQUAL(cJSON_GetArraySize(r), 1);
  CU_ASSERT_PTR_NULL(scn_cli_reply_code(r));
  CU_ASSERT_PTR_NULL(scn_cli_reply_message(r));
  cJSON_Delete(r);

  /* A request built as cJSON, with an id. */
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "cmd", "ping");
  cJSON_AddStringToObject(req, "id", "p-1");
  r = NULL;
  CU_ASSERT_EQUAL(scn_cli_call(c, req, &r), SCN_CLI_OK);
  CU_ASSERT(t_resp_str_is(r, "id", "p-1"));
  CU_ASSERT(cJSON_IsTrue(field(r, "ok")));
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(scn_cli_call(c, req, NULL), SCN_CLI_OK);
  cJSON_Delete(req);

  char world[64];
  world_name(world, sizeof world);
  r = call_ok(c, "{\"cmd\":\"world.create\",\"world\":\"%s\",\"id\":7}", world);
  CU_ASSERT_EQUAL(t_resp_num(r, "id"), 7);
  CU_ASSERT(cJSON_IsTrue(field(r, "ok")));
  cJSON_Delete(r);

  r = call_ok(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"name\":\"car\",\"t\":[1,2,3]}",
              world);
  double car = t_resp_num(r, "entity");
  CU_ASSERT(car >= 1 && car == floor(car));
  cJSON_Delete(r);
  r = call_ok(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"parent\":%.0f,\"t\":[0,0,-1]}",
              world, car);
  double wheel = t_resp_num(r, "entity");
  CU_ASSERT(wheel >= 1 && wheel != car);
  cJSON_Delete(r);

  r = call_ok(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}", world, car);
  CU_ASSERT_EQUAL(t_resp_num(r, "entity"), car);
  CU_ASSERT(cJSON_IsNull(field(r, "parent")));
  CU_ASSERT(t_resp_str_is(r, "name", "car"));
  CU_ASSERT(is_translation(field(r, "local"), 1, 2, 3));
  CU_ASSERT(is_translation(field(r, "world"), 1, 2, 3));
  cJSON_Delete(r);
  r = call_ok(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}", world, wheel);
  CU_ASSERT_EQUAL(t_resp_num(r, "parent"), car);
  CU_ASSERT_PTR_NULL(field(r, "name"));
  CU_ASSERT(is_translation(field(r, "local"), 0, 0, -1));
  CU_ASSERT(is_translation(field(r, "world"), 1, 2, 2));
  cJSON_Delete(r);

  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
  scn_cli_close(NULL);
}

/* An error reply: SCN_CLI_EREPLY, the response with the contract's code and a message, and a
 * connection that stays usable. */
static void expect_reply_error(scn_cli *c, const char *line, const char *code) {
  cJSON *r = NULL;
  int rc = scn_cli_call_line(c, line, &r);
  CU_ASSERT_EQUAL(rc, SCN_CLI_EREPLY);
  CU_ASSERT_PTR_NOT_NULL(r);
  CU_ASSERT(cJSON_IsFalse(field(r, "ok")));
  const char *got = scn_cli_reply_code(r), *msg = scn_cli_reply_message(r);
  CU_ASSERT(got && strcmp(got, code) == 0);
  if (!got || strcmp(got, code) != 0)
    t_report_text(line, got);
  CU_ASSERT(msg && *msg);
  char want[512];
  snprintf(want, sizeof want, "%s: %s", code, msg ? msg : "");
  CU_ASSERT_STRING_EQUAL(scn_cli_error(c), want);
  cJSON_Delete(r);
  /* Without out: the same code, nothing to free. */
  CU_ASSERT_EQUAL(scn_cli_call_line(c, line, NULL), SCN_CLI_EREPLY);
  CU_ASSERT_STRING_EQUAL(scn_cli_error(c), want);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"ping\"}"));
}

static void test_lib_error_reply(void) {
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64], line[256];
  world_name(world, sizeof world);
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  CU_ASSERT(call_fine(c, "%s", line));
  expect_reply_error(c, line, "ALREADY_EXISTS");
  expect_reply_error(c, "{\"cmd\":\"transform.get\",\"world\":\"no-such-world\",\"entity\":1}",
                     "NOT_FOUND");
  expect_reply_error(c, "{\"cmd\":\"no.such.command\"}", "UNKNOWN_COMMAND");
  expect_reply_error(c, "{\"cmd\":\"world.create\"}", "BAD_REQUEST");
  expect_reply_error(c, "{not json", "BAD_JSON");
  expect_reply_error(c, "{\"cmd\":\"entity.create\",\"count\":100001}", "LIMIT");

  /* The id comes back on an error too. */
  cJSON *r = NULL;
  CU_ASSERT_EQUAL(scn_cli_call_line(c, "{\"cmd\":\"nope\",\"id\":[1,\"x\"]}", &r), SCN_CLI_EREPLY);
  const cJSON *id = field(r, "id");
  CU_ASSERT(cJSON_IsArray(id) && cJSON_GetArraySize(id) == 2);
  cJSON_Delete(r);

  /* subscribe reports an error reply the same way. */
  double sub = -1;
  CU_ASSERT_EQUAL(scn_cli_subscribe(c, "no-such-world", 0, 0, &sub), SCN_CLI_EREPLY);
  CU_ASSERT_EQUAL(sub, -1);
  CU_ASSERT(strncmp(scn_cli_error(c), "NOT_FOUND: ", 11) == 0);

  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

static void test_lib_pipeline(void) {
  enum { N = 2000 };
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64];
  double e = make_world(c, world, sizeof world, 4, 5, 6);
  CU_ASSERT_FATAL(e > 0);
  /* Pings, gets, and an error every 7th: all queued first, then read in order. */
  for (int i = 0; i < N; i++) {
    char line[256];
    int n;
    if (i % 7 == 3)
      n = snprintf(line, sizeof line,
                   "{\"id\":%d,\"cmd\":\"transform.get\",\"world\":\"%s\","
                   "\"entity\":999999999}",
                   i, world);
    else if (i % 3 == 0)
      n = snprintf(line, sizeof line,
                   "{\"id\":%d,\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}", i,
                   world, e);
    else
      n = snprintf(line, sizeof line, "{\"id\":%d,\"cmd\":\"ping\"}", i);
    CU_ASSERT_EQUAL_FATAL(scn_cli_send_line(c, line, (size_t)n), SCN_CLI_OK);
  }
  CU_ASSERT_EQUAL(scn_cli_flush(c), SCN_CLI_OK);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    cJSON *r = NULL;
    int rc = scn_cli_read_response(c, &r);
    if (rc != SCN_CLI_OK) {
      t_report_text("read_response", scn_cli_error(c));
      bad++;
      break;
    }
    bool ok = t_resp_num(r, "id") == i;
    if (i % 7 == 3)
      ok = ok && cJSON_IsFalse(field(r, "ok")) && strcmp(scn_cli_reply_code(r), "NOT_FOUND") == 0;
    else if (i % 3 == 0)
      ok = ok && cJSON_IsTrue(field(r, "ok")) && t_resp_num(r, "entity") == e &&
           is_translation(field(r, "world"), 4, 5, 6);
    else
      ok = ok && cJSON_IsTrue(field(r, "ok")) && cJSON_GetArraySize(r) == 2;
    if (!ok && bad++ < 3) {
      char *s = cJSON_PrintUnformatted(r);
      t_report_text("unexpected response", s);
      free(s);
    }
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(bad, 0);
  /* Nothing more is pending. */
  const char *line;
  size_t len;
  CU_ASSERT_EQUAL(scn_cli_read_line(c, &line, &len, 50), SCN_CLI_ETIMEOUT);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

/* The frame sets exactly one transform: e translated by (x, y, z), and removes nothing. */
static bool sets_one(const cJSON *ev, double e, double x, double y, double z) {
  const cJSON *set = field(ev, "set");
  if (cJSON_GetArraySize(set) != 1 || cJSON_GetArraySize(field(ev, "removed")) != 0)
    return false;
  const cJSON *item = cJSON_GetArrayItem(set, 0);
  return t_resp_num(item, "e") == e && is_translation(field(item, "m"), x, y, z);
}

static void test_lib_subscribe(void) {
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0), *s = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  char world[64];
  double e = make_world(c, world, sizeof world, 1, 2, 3);
  CU_ASSERT_FATAL(e > 0);
  events got = {cJSON_CreateArray()};
  scn_cli_on_event(s, collect, &got);
  double sub = -1;
  CU_ASSERT_EQUAL_FATAL(scn_cli_subscribe(s, world, 0, 0, &sub), SCN_CLI_OK);
  CU_ASSERT(sub >= 1);

  /* The full frame first. */
  CU_ASSERT_EQUAL_FATAL(wait_events(s, &got, 1, WAIT_MS), 1);
  const cJSON *full = cJSON_GetArrayItem(got.list, 0);
  CU_ASSERT(is_frame(full, sub, world, true));
  CU_ASSERT(sets_one(full, e, 1, 2, 3));
  double tick0 = t_resp_num(full, "tick");
  /* Nothing changed: nothing more comes. */
  CU_ASSERT_EQUAL(scn_cli_poll_events(s, 100), 0);
  CU_ASSERT_EQUAL(scn_cli_poll_events(s, 0), 0);

  /* A set_local on another connection: a delta. */
  CU_ASSERT(call_fine(c,
                      "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,"
                      "\"t\":[4,5,6]}",
                      world, e));
  CU_ASSERT_EQUAL_FATAL(wait_events(s, &got, 2, WAIT_MS), 2);
  const cJSON *delta = cJSON_GetArrayItem(got.list, 1);
  CU_ASSERT(is_frame(delta, sub, world, false));
  CU_ASSERT(sets_one(delta, e, 4, 5, 6));
  CU_ASSERT(t_resp_num(delta, "tick") > tick0);

  /* On the subscriber's own connection: the frame reaches the handler while a later call
   * waits for its response, without polling. */
  CU_ASSERT(call_fine(s,
                      "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,"
                      "\"t\":[7,8,9]}",
                      world, e));
  for (int i = 0; i < 100 && cJSON_GetArraySize(got.list) < 3; i++) {
    t_sleep_ms(20);
    CU_ASSERT(call_fine(s, "{\"cmd\":\"ping\"}"));
  }
  CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(got.list), 3);
  const cJSON *third = cJSON_GetArrayItem(got.list, 2);
  CU_ASSERT(is_frame(third, sub, world, false));
  CU_ASSERT(sets_one(third, e, 7, 8, 9));

  /* world.destroy ends the subscription with an event. */
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  CU_ASSERT_EQUAL(wait_events(s, &got, 4, WAIT_MS), 4);
  const cJSON *end = cJSON_GetArrayItem(got.list, 3);
  CU_ASSERT(t_resp_str_is(end, "event", "world_destroyed") && t_resp_num(end, "sub") == sub &&
            t_resp_str_is(end, "world", world));
  CU_ASSERT_EQUAL(scn_cli_poll_events(s, 100), 0);

  /* Without a handler events are dropped, and the connection goes on. */
  scn_cli_on_event(s, NULL, NULL);
  double e2 = make_world(c, world, sizeof world, 0, 0, 0);
  CU_ASSERT_FATAL(e2 > 0);
  CU_ASSERT_EQUAL(scn_cli_subscribe(s, world, e2, 30, &sub), SCN_CLI_OK);
  t_sleep_ms(100);
  CU_ASSERT(call_fine(s, "{\"cmd\":\"ping\"}"));
  CU_ASSERT_EQUAL(cJSON_GetArraySize(got.list), 4);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  cJSON_Delete(got.list);
  scn_cli_close(s);
  scn_cli_close(c);
}

static bool floats_near(const float *a, const float *b, int n) {
  for (int i = 0; i < n; i++)
    if (!(fabsf(a[i] - b[i]) <= 1e-6f * (1 + fabsf(b[i]))))
      return false;
  return true;
}

/* One part set, the others kept; the parts read back; a refusal on a sheared matrix. */
static void test_lib_parts(void) {
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64];
  double car = make_world(c, world, sizeof world, 10, 0, 0);
  CU_ASSERT_FATAL(car > 0);
  cJSON *r = call_ok(c,
                     "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"parent\":%.0f,"
                     "\"t\":[1,0.3,-0.5],\"s\":[1,2,1]}",
                     world, car);
  double wheel = t_resp_num(r, "entity");
  cJSON_Delete(r);
  CU_ASSERT_FATAL(wheel > 0);

  /* The rotation alone: 90 degrees about z (sent as (0,0,1,1), normalised by the daemon). */
  const float spin[4] = {0, 0, 1, 1};
  CU_ASSERT_EQUAL(scn_cli_set_parts(c, world, wheel, false, NULL, spin, NULL), SCN_CLI_OK);
  scn_cli_trs local = {0}, world_trs = {0};
  CU_ASSERT_EQUAL(scn_cli_get_trs(c, world, wheel, &local, &world_trs), SCN_CLI_OK);
  CU_ASSERT_TRUE(local.valid && world_trs.valid);
  CU_ASSERT_TRUE(floats_near(local.t, (const float[]){1, 0.3f, -0.5f}, 3));
  CU_ASSERT_TRUE(floats_near(local.r, (const float[]){0, 0, 0.70710677f, 0.70710677f}, 4));
  CU_ASSERT_TRUE(floats_near(local.s, (const float[]){1, 2, 1}, 3));
  CU_ASSERT_TRUE(floats_near(world_trs.t, (const float[]){11, 0.3f, -0.5f}, 3));

  /* The world translation alone; the rotation and scale stay. */
  const float to[3] = {0, 0, 7};
  CU_ASSERT_EQUAL(scn_cli_set_parts(c, world, wheel, true, to, NULL, NULL), SCN_CLI_OK);
  CU_ASSERT_EQUAL(scn_cli_get_trs(c, world, wheel, &local, NULL), SCN_CLI_OK);
  CU_ASSERT_TRUE(floats_near(local.t, (const float[]){-10, 0, 7}, 3));
  CU_ASSERT_TRUE(floats_near(local.r, (const float[]){0, 0, 0.70710677f, 0.70710677f}, 4));
  CU_ASSERT_TRUE(floats_near(local.s, (const float[]){1, 2, 1}, 3));

  /* A mirror reads as a negative sx; all three parts at once replace them all. */
  const float t3[3] = {1, 2, 3}, r3[4] = {0, 0, 0, 1}, mirror[3] = {-1, 1, 1};
  CU_ASSERT_EQUAL(scn_cli_set_parts(c, world, car, false, t3, r3, mirror), SCN_CLI_OK);
  CU_ASSERT_EQUAL(scn_cli_get_trs(c, world, car, &local, NULL), SCN_CLI_OK);
  CU_ASSERT_TRUE(local.valid && floats_near(local.s, mirror, 3) && floats_near(local.t, t3, 3));

  /* A non-uniform scale on the car and the wheel turned 45 degrees under it: the wheel's world
   * matrix is sheared (it has no parts, and a partial set_world is refused), its local is not. */
  CU_ASSERT(call_fine(c,
                      "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,"
                      "\"s\":[1,2,1]}",
                      world, car));
  const float eighth[4] = {0, 0, 0.38268343f, 0.92387953f};
  CU_ASSERT_EQUAL(scn_cli_set_parts(c, world, wheel, false, NULL, eighth, NULL), SCN_CLI_OK);
  CU_ASSERT_EQUAL(scn_cli_get_trs(c, world, wheel, &local, &world_trs), SCN_CLI_OK);
  CU_ASSERT_TRUE(local.valid);
  CU_ASSERT_FALSE(world_trs.valid);
  CU_ASSERT_EQUAL(scn_cli_set_parts(c, world, wheel, true, to, NULL, NULL), SCN_CLI_EREPLY);
  CU_ASSERT(strncmp(scn_cli_error(c), "BAD_REQUEST: ", 13) == 0);
  /* Nothing given: refused by the daemon too. */
  CU_ASSERT_EQUAL(scn_cli_set_parts(c, world, wheel, false, NULL, NULL, NULL), SCN_CLI_EREPLY);
  CU_ASSERT_EQUAL(scn_cli_get_trs(c, world, 123456789, &local, NULL), SCN_CLI_EREPLY);
  CU_ASSERT(strncmp(scn_cli_error(c), "NOT_FOUND: ", 11) == 0);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

/* A world that keeps history: the matrices now and at a past tick, and a tick outside it. */
static void test_lib_history(void) {
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64];
  snprintf(world, sizeof world, "lib-history-%d", (int)getpid());
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.create\",\"world\":\"%s\",\"history\":600}", world));
  cJSON *r = call_ok(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"t\":[1,0,0]}", world);
  double e = t_resp_num(r, "entity");
  cJSON_Delete(r);
  float local[16], world_m[16];
  double now = -1, then = -1;
  long deadline = t_now_ms() + 10000;
  CU_ASSERT_EQUAL(scn_cli_get_at(c, world, e, -1, local, world_m, &now), SCN_CLI_OK);
  do {
    CU_ASSERT_EQUAL(scn_cli_get_at(c, world, e, -1, NULL, NULL, &then), SCN_CLI_OK);
  } while (then <= now && t_now_ms() < deadline);
  CU_ASSERT(call_fine(
      c, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,\"t\":[4,0,0]}", world,
      e));
  do {
    CU_ASSERT_EQUAL(scn_cli_get_at(c, world, e, -1, local, world_m, &now), SCN_CLI_OK);
  } while (now <= then + 1 && t_now_ms() < deadline);
  CU_ASSERT_EQUAL(world_m[12], 4);
  double answered = -1;
  CU_ASSERT_EQUAL(scn_cli_get_at(c, world, e, then, local, world_m, &answered), SCN_CLI_OK);
  CU_ASSERT_EQUAL(world_m[12], 1);
  CU_ASSERT_EQUAL(answered, then);
  CU_ASSERT_EQUAL(scn_cli_get_at(c, world, e, then + 1e6, local, world_m, NULL), SCN_CLI_EREPLY);
  CU_ASSERT(strncmp(scn_cli_error(c), "NOT_FOUND: ", 11) == 0);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

static void test_lib_refused(void) {
  int port = dead_port();
  CU_ASSERT_FATAL(port > 0);
  scn_cli_options o = {.host = "127.0.0.1", .port = port, .timeout_ms = 1000};
  char err[256] = "", want[64];
  scn_cli *c = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_PTR_NULL(c);
  snprintf(want, sizeof want, "cannot connect to 127.0.0.1:%d", port);
  CU_ASSERT(strstr(err, want) != NULL);
  CU_ASSERT(strstr(err, "refused") != NULL);
  if (!strstr(err, "refused"))
    t_report_text("connect error", err);
  scn_cli_close(c);
  /* Without an error buffer, and with a token: still NULL. */
  o.token = "t";
  CU_ASSERT_PTR_NULL(scn_cli_connect(&o, NULL, 0));
}

static void test_lib_timeout(void) {
  int port = 0;
  int l = silent_listener(&port, 0);
  CU_ASSERT_FATAL(l >= 0);
  scn_cli *c = open_cli(port, NULL, 100);
  CU_ASSERT_PTR_NOT_NULL(c);
  if (c) {
    long t0 = t_now_ms();
    cJSON *r = (cJSON *)1;
    CU_ASSERT_EQUAL(scn_cli_call_line(c, "{\"cmd\":\"ping\"}", &r), SCN_CLI_ETIMEOUT);
    long took = t_now_ms() - t0;
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT(took >= 90 && took < 2000);
    CU_ASSERT(strstr(scn_cli_error(c), "timed out") != NULL);
    const char *line;
    size_t len;
    t0 = t_now_ms();
    CU_ASSERT_EQUAL(scn_cli_read_line(c, &line, &len, 30), SCN_CLI_ETIMEOUT);
    CU_ASSERT(t_now_ms() - t0 < 1000);
    CU_ASSERT_EQUAL(scn_cli_poll_events(c, 30), 0);
    scn_cli_close(c);
  }
  /* With a token, the hello times out and connect fails. */
  scn_cli_options o = {.host = "127.0.0.1", .port = port, .token = "x", .timeout_ms = 100};
  char err[256] = "";
  c = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_PTR_NULL(c);
  CU_ASSERT(strstr(err, "hello failed") != NULL && strstr(err, "timed out") != NULL);
  scn_cli_close(c);
  close(l);
}

/* A send that times out half-way: a later flush sends the rest, exactly once. */
static void test_lib_send_timeout(void) {
  int port = 0;
  int l = silent_listener(&port, 16384);
  CU_ASSERT_FATAL(l >= 0);
  scn_cli *c = open_cli(port, NULL, 50);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  int small = 16384;
  setsockopt(scn_cli_fd(c), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  text want = {0};
  for (int i = 0; i < 100000; i++) {
    char line[64];
    int n = snprintf(line, sizeof line, "{\"cmd\":\"ping\",\"id\":%d}", i);
    CU_ASSERT_EQUAL_FATAL(scn_cli_send_line(c, line, (size_t)n), SCN_CLI_OK);
    text_add(&want, line, (size_t)n);
    text_add(&want, "\n", 1);
  }
  CU_ASSERT_EQUAL(scn_cli_flush(c), SCN_CLI_ETIMEOUT);
  /* Now a reader takes everything the listener's connection receives and compares. */
  int s = accept(l, NULL, NULL);
  CU_ASSERT_FATAL(s >= 0);
  pid_t pid = t_fork();
  if (pid == 0) {
    close(scn_cli_fd(c));
    text got = {0};
    char buf[65536];
    ssize_t n;
    while (got.len <= want.len && (n = read(s, buf, sizeof buf)) != 0) {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        _exit(3);
      text_add(&got, buf, (size_t)n);
    }
    _exit(got.len == want.len && memcmp(got.s, want.s, want.len) == 0 ? 0 : 1);
  }
  close(s);
  CU_ASSERT_FATAL(pid > 0);
  int rc = SCN_CLI_ETIMEOUT;
  for (int i = 0; i < 100 && rc == SCN_CLI_ETIMEOUT; i++)
    rc = scn_cli_flush(c);
  CU_ASSERT_EQUAL(rc, SCN_CLI_OK);
  scn_cli_close(c);
  int status = t_child_wait(pid, WAIT_MS);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    fprintf(stderr, "  the bytes received differ from the bytes queued (status %d)\n", status);
  text_free(&want);
  close(l);
}

/* The daemon closing the connection: SCN_CLI_ECLOSED, from every later call too. */
static void test_lib_closed(void) {
  t_daemon d2;
  if (!START(&d2, NULL))
    return;
  scn_cli *c = open_cli(d2.port, NULL, 2000), *idle = open_cli(d2.port, NULL, 2000);
  CU_ASSERT_PTR_NOT_NULL(c);
  CU_ASSERT_PTR_NOT_NULL(idle);
  if (c)
    CU_ASSERT(call_fine(c, "{\"cmd\":\"ping\"}"));
  STOP_OK(&d2, WAIT_MS);
  if (c) {
    const char *line;
    size_t len;
    CU_ASSERT_EQUAL(scn_cli_read_line(c, &line, &len, 2000), SCN_CLI_ECLOSED);
    CU_ASSERT_STRING_EQUAL(scn_cli_error(c), "the daemon closed the connection");
    for (int i = 0; i < 3; i++) {
      cJSON *r = NULL;
      CU_ASSERT_EQUAL(scn_cli_call_line(c, "{\"cmd\":\"ping\"}", &r), SCN_CLI_ECLOSED);
      CU_ASSERT_PTR_NULL(r);
    }
    CU_ASSERT_EQUAL(scn_cli_poll_events(c, 100), SCN_CLI_ECLOSED);
    scn_cli_close(c);
  }
  if (idle) {
    /* The first thing this one does is a call. */
    CU_ASSERT_EQUAL(scn_cli_call_line(idle, "{\"cmd\":\"ping\"}", NULL), SCN_CLI_ECLOSED);
    CU_ASSERT_EQUAL(scn_cli_call_line(idle, "{\"cmd\":\"ping\"}", NULL), SCN_CLI_ECLOSED);
    scn_cli_close(idle);
  }
}

static void test_lib_auth(void) {
  t_daemon d2;
  const char *args[] = {"--auth-token", "secret", "--http", "off", NULL};
  if (!START(&d2, args))
    return;
  scn_cli *good = open_cli(d2.port, "secret", 2000);
  CU_ASSERT_PTR_NOT_NULL(good);
  if (good) {
    cJSON *r = call_ok(good, "{\"cmd\":\"world.list\"}");
    CU_ASSERT(cJSON_IsArray(field(r, "worlds")) && cJSON_GetArraySize(field(r, "worlds")) == 0);
    cJSON_Delete(r);
    CU_ASSERT(call_fine(good, "{\"cmd\":\"world.create\",\"world\":\"w\"}"));
  }

  scn_cli_options o = {.host = "127.0.0.1", .port = d2.port, .token = "wrong", .timeout_ms = 2000};
  char err[256] = "";
  scn_cli *bad = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_PTR_NULL(bad);
  CU_ASSERT(strncmp(err, "hello failed: UNAUTHORIZED: ", 28) == 0);
  if (strncmp(err, "hello failed: UNAUTHORIZED: ", 28) != 0)
    t_report_text("wrong token", err);
  scn_cli_close(bad);
  o.token = "";
  bad = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_PTR_NULL(bad);
  CU_ASSERT(strncmp(err, "hello failed: UNAUTHORIZED: ", 28) == 0);
  scn_cli_close(bad);

  /* Without a token: connected, ping works, the rest is UNAUTHORIZED. */
  scn_cli *anon = open_cli(d2.port, NULL, 2000);
  CU_ASSERT_PTR_NOT_NULL(anon);
  if (anon) {
    CU_ASSERT(call_fine(anon, "{\"cmd\":\"ping\"}"));
    cJSON *r = NULL;
    CU_ASSERT_EQUAL(scn_cli_call_line(anon, "{\"cmd\":\"world.list\"}", &r), SCN_CLI_EREPLY);
    CU_ASSERT(scn_cli_reply_code(r) && strcmp(scn_cli_reply_code(r), "UNAUTHORIZED") == 0);
    cJSON_Delete(r);
    scn_cli_close(anon);
  }

  /* scenectl: the token from SCENED_AUTH_TOKEN or --token. */
  char penv[32];
  snprintf(penv, sizeof penv, "SCENED_PORT=%d", d2.port);
  t_proc p;
  const char *env_good[] = {penv, "SCENED_AUTH_TOKEN=secret", NULL};
  CU_ASSERT_EQUAL(ctl_run(&p, env_good, NULL, 0, (const char *const[]){"world.list", NULL}), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out),
                         "{\"worlds\":[{\"name\":\"w\",\"transforms\":0,\"history\":0}]}\n");
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  t_proc_free(&p);
  const char *env_none[] = {penv, NULL};
  CU_ASSERT_EQUAL(
      ctl_run(&p, env_none, NULL, 0, (const char *const[]){"--token", "secret", "ping", NULL}), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(ctl_run(&p, env_none, NULL, 0, (const char *const[]){"world.list", NULL}), 1);
  CU_ASSERT(strncmp(text_str(&p.err), "UNAUTHORIZED: ", 14) == 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);
  const char *env_wrong[] = {penv, "SCENED_AUTH_TOKEN=wrong", NULL};
  CU_ASSERT_EQUAL(ctl_run(&p, env_wrong, NULL, 0, (const char *const[]){"ping", NULL}), 2);
  CU_ASSERT(strstr(text_str(&p.err), "UNAUTHORIZED") != NULL);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);

  scn_cli_close(good);
  STOP_OK(&d2, WAIT_MS);
}

/* ---- the Python client and the shell example ------------------------------------------------- */

/* ---- b64 mode -------------------------------------------------------------------------------- */

/* What the frame handler received: the last frame's set, copied. */
typedef struct frames_seen {
  int frames;
  double tick;
  size_t n;
  uint64_t ids[64];
  float ms[64][16];
} frames_seen;

static void on_frame(void *ud, const scn_cli_frame *f) {
  frames_seen *s = ud;
  s->frames++;
  s->tick = f->tick;
  s->n = f->n < 64 ? f->n : 64;
  if (s->n) { /* the arrays may be NULL when empty */
    memcpy(s->ids, f->ids, s->n * sizeof *f->ids);
    memcpy(s->ms, f->matrices, s->n * sizeof *f->matrices);
  }
}

/* The matrix of e in a frame seen; NULL when it is not there. */
static const float *seen_matrix(const frames_seen *s, double e) {
  for (size_t i = 0; i < s->n; i++)
    if ((double)s->ids[i] == e)
      return s->ms[i];
  return NULL;
}

/* The library in b64 mode: random float32 bits set through matrix_b64 (scn_cli_matrix_to_b64)
 * come back to the bit in a get (scn_cli_matrix_get, either form) and in the frame handler's
 * arrays; switching form mid-subscription keeps every frame. */
static void test_lib_b64(void) {
  uint64_t rng = 77;
  scn_cli_options o = {
      .host = "127.0.0.1", .port = clients_daemon.port, .matrices = SCN_CLI_MATRICES_B64};
  scn_cli *b = scn_cli_connect(&o, NULL, 0), *j = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  CU_ASSERT_PTR_NOT_NULL_FATAL(j);
  CU_ASSERT_EQUAL(scn_cli_matrices(b), SCN_CLI_MATRICES_B64);
  char world[64];
  world_name(world, sizeof world);
  CU_ASSERT_TRUE(call_fine(b, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world));
  enum { N = 12 };
  float want[N][16], got[16];
  double ids[N];
  char text[SCN_CLI_B64_MATRIX_LEN + 1];
  for (int i = 0; i < N; i++) {
    b64_random_matrix(&rng, want[i]);
    scn_cli_matrix_to_b64(want[i], text);
    CU_ASSERT_EQUAL(scn_cli_matrix_from_b64(text, strlen(text), got), 0);
    CU_ASSERT_EQUAL(memcmp(got, want[i], 64), 0);
    cJSON *r = call_ok(b, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"matrix_b64\":\"%s\"}",
                       world, text);
    ids[i] = t_resp_num(r, "entity");
    cJSON_Delete(r);
  }
  text[10] = '#';
  CU_ASSERT_EQUAL(scn_cli_matrix_from_b64(text, strlen(text), got), -1);
  for (int i = 0; i < N; i++) {
    cJSON *rb =
        call_ok(b, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}", world, ids[i]);
    cJSON *rj =
        call_ok(j, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}", world, ids[i]);
    CU_ASSERT_TRUE(cJSON_IsString(field(rb, "local")) && cJSON_IsArray(field(rj, "local")));
    CU_ASSERT_TRUE(scn_cli_matrix_get(field(rb, "world"), got) == 0 &&
                   memcmp(got, want[i], 64) == 0);
    CU_ASSERT_TRUE(scn_cli_matrix_get(field(rj, "world"), got) == 0 &&
                   memcmp(got, want[i], 64) == 0);
    cJSON_Delete(rb);
    cJSON_Delete(rj);
  }
  /* frames: the full one, then a delta after each switch of form */
  frames_seen seen = {0};
  scn_cli_on_frame(b, on_frame, &seen);
  double sub;
  CU_ASSERT_EQUAL_FATAL(scn_cli_subscribe(b, world, 0, 0, &sub), SCN_CLI_OK);
  for (long end = t_now_ms() + WAIT_MS; seen.frames < 1 && t_now_ms() < end;)
    scn_cli_poll_events(b, 100);
  CU_ASSERT_EQUAL(seen.n, N);
  for (int i = 0; i < N; i++) {
    const float *m = seen_matrix(&seen, ids[i]);
    CU_ASSERT_TRUE(m && memcmp(m, want[i], 64) == 0);
  }
  for (int round = 0; round < 4; round++) {
    CU_ASSERT_EQUAL(
        scn_cli_set_matrices(b, round % 2 ? SCN_CLI_MATRICES_B64 : SCN_CLI_MATRICES_JSON),
        SCN_CLI_OK);
    b64_random_matrix(&rng, want[round]);
    scn_cli_matrix_to_b64(want[round], text);
    CU_ASSERT_TRUE(call_fine(
        j,
        "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,\"matrix_b64\":\"%s\"}",
        world, ids[round], text));
    int before = seen.frames;
    for (long end = t_now_ms() + WAIT_MS; seen.frames == before && t_now_ms() < end;)
      scn_cli_poll_events(b, 100);
    CU_ASSERT_EQUAL(seen.frames, before + 1);
    const float *m = seen_matrix(&seen, ids[round]);
    CU_ASSERT_TRUE(m && memcmp(m, want[round], 64) == 0);
  }
  CU_ASSERT_TRUE(call_fine(b, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(b);
  scn_cli_close(j);
}

/* ---- near subscriptions ------------------------------------------------------------------ */

/* A caller's copy of one subscription's scope, kept as scn_client.h says: the frame handler adds
 * what is set and drops what is removed, the event handler empties it when the subscription
 * ends because its center was destroyed. */
typedef struct scope_copy {
  double sub;
  size_t n;
  uint64_t ids[16];
  int frames;
  bool removed_seen[16]; /* by position in watch: was it ever in a frame's "removed" */
  const double *watch;
  int nwatch;
  char reason[32];
  size_t held_at_end; /* what the copy held when the subscription ended */
} scope_copy;

static void scope_drop(scope_copy *sc, uint64_t id) {
  for (size_t i = 0; i < sc->n; i++)
    if (sc->ids[i] == id) {
      sc->ids[i] = sc->ids[--sc->n];
      return;
    }
}

static void scope_frame(void *ud, const scn_cli_frame *f) {
  scope_copy *sc = ud;
  if (f->sub != sc->sub)
    return;
  sc->frames++;
  if (f->full)
    sc->n = 0;
  for (size_t i = 0; i < f->n; i++) {
    scope_drop(sc, f->ids[i]);
    if (sc->n < 16)
      sc->ids[sc->n++] = f->ids[i];
  }
  for (size_t i = 0; i < f->nremoved; i++) {
    scope_drop(sc, f->removed[i]);
    for (int w = 0; w < sc->nwatch; w++)
      if ((double)f->removed[i] == sc->watch[w])
        sc->removed_seen[w] = true;
  }
}

static void scope_event(void *ud, const cJSON *ev) {
  scope_copy *sc = ud;
  const cJSON *reason = field(ev, "reason");
  if (!t_resp_str_is(ev, "event", "unsubscribed") || t_resp_num(ev, "sub") != sc->sub ||
      !cJSON_IsString(reason))
    return;
  snprintf(sc->reason, sizeof sc->reason, "%s", reason->valuestring);
  sc->held_at_end = sc->n;
  if (!strcmp(reason->valuestring, "center_destroyed"))
    sc->n = 0;
}

/* True when the copy holds exactly the n entities of want. */
static bool scope_is(const scope_copy *sc, const double *want, size_t n) {
  if (sc->n != n)
    return false;
  for (size_t i = 0; i < n; i++) {
    bool found = false;
    for (size_t k = 0; k < sc->n; k++)
      found = found || (double)sc->ids[k] == want[i];
    if (!found)
      return false;
  }
  return true;
}

/* Polls until the copy holds want (n entities); false (reported) after WAIT_MS. */
static bool scope_wait(scn_cli *s, scope_copy *sc, const double *want, size_t n, const char *what) {
  for (long end = t_now_ms() + WAIT_MS; !scope_is(sc, want, n) && t_now_ms() < end;)
    if (scn_cli_poll_events(s, 50) < 0)
      break;
  if (scope_is(sc, want, n))
    return true;
  char got[256] = "";
  for (size_t i = 0; i < sc->n; i++)
    snprintf(got + strlen(got), sizeof got - strlen(got), " %llu", (unsigned long long)sc->ids[i]);
  fprintf(stderr, "  %s: the copy holds%s (%zu entities, %zu wanted)\n", what, got, sc->n, n);
  return false;
}

static bool move_x(scn_cli *c, const char *world, double e, double x) {
  return call_fine(c,
                   "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,"
                   "\"t\":[%g,0,0]}",
                   world, e, x);
}

/* A near region over a world of three entities on the x axis, in either form: what moves out
 * of range shows in "removed" and leaves the caller's copy, what moves in enters it;
 * scn_cli_subscribe_update widens, narrows and removes the region; the refusals; and the end
 * with the whole scope removed when the center's transform is destroyed. */
static void near_scenario(int matrices) {
  scn_cli_options o = {.host = "127.0.0.1", .port = clients_daemon.port, .matrices = matrices};
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0), *s = scn_cli_connect(&o, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  char world[64], fields[256];
  double center = make_world(c, world, sizeof world, 0, 0, 0);
  cJSON *r = call_ok(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"t\":[5,0,0]}", world);
  double inside = t_resp_num(r, "entity");
  cJSON_Delete(r);
  r = call_ok(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"t\":[50,0,0]}", world);
  double outside = t_resp_num(r, "entity");
  cJSON_Delete(r);
  CU_ASSERT_FATAL(center > 0 && inside > 0 && outside > 0);
  const double all[] = {center, inside, outside};
  scope_copy sc = {.watch = all, .nwatch = 3};
  scn_cli_on_frame(s, scope_frame, &sc);
  scn_cli_on_event(s, scope_event, &sc);

  /* Refusals: fields that are not an object never leave; the daemon's answers. */
  double sub = -1;
  CU_ASSERT_EQUAL(scn_cli_subscribe_text(s, world, "[1]", &sub), SCN_CLI_EINVAL);
  snprintf(fields, sizeof fields, "{\"near\":{\"entity\":%.0f,\"radius\":0}}", center);
  CU_ASSERT_EQUAL(scn_cli_subscribe_text(s, world, fields, &sub), SCN_CLI_EREPLY);
  CU_ASSERT(strstr(scn_cli_error(s), "BAD_REQUEST") != NULL);
  snprintf(fields, sizeof fields, "{\"near\":{\"entity\":%.0f,\"radius\":1}}", outside + 1000);
  CU_ASSERT_EQUAL(scn_cli_subscribe_text(s, world, fields, &sub), SCN_CLI_EREPLY);
  CU_ASSERT(strstr(scn_cli_error(s), "NOT_FOUND") != NULL);
  CU_ASSERT_EQUAL(sub, -1);

  snprintf(fields, sizeof fields, "{\"near\":{\"entity\":%.0f,\"radius\":10,\"margin\":2}}",
           center);
  CU_ASSERT_EQUAL_FATAL(scn_cli_subscribe_text(s, world, fields, &sub), SCN_CLI_OK);
  sc.sub = sub;
  CU_ASSERT(scope_wait(s, &sc, (double[]){center, inside}, 2, "the first frame"));
  CU_ASSERT(move_x(c, world, inside, 11)); /* past the radius, within the margin: stays */
  CU_ASSERT(move_x(c, world, outside, 3)); /* comes in */
  CU_ASSERT(scope_wait(s, &sc, all, 3, "entering"));
  CU_ASSERT(move_x(c, world, inside, 13)); /* past radius + margin: leaves */
  CU_ASSERT(scope_wait(s, &sc, (double[]){center, outside}, 2, "leaving"));
  CU_ASSERT(sc.removed_seen[1] && !sc.removed_seen[0] && !sc.removed_seen[2]);

  /* Updates: wider, narrower (around a point), none; then refusals. */
  cJSON *near = cJSON_CreateObject();
  cJSON_AddNumberToObject(near, "entity", center);
  cJSON_AddNumberToObject(near, "radius", 100);
  CU_ASSERT_EQUAL(scn_cli_subscribe_update(s, sub, near), SCN_CLI_OK);
  CU_ASSERT(scope_wait(s, &sc, all, 3, "a wider radius"));
  cJSON_DeleteItemFromObject(near, "entity");
  cJSON_AddItemToObject(near, "point", cJSON_CreateDoubleArray((double[]){3, 0, 0}, 3));
  cJSON_ReplaceItemInObject(near, "radius", cJSON_CreateNumber(1));
  CU_ASSERT_EQUAL(scn_cli_subscribe_update(s, sub, near), SCN_CLI_OK);
  CU_ASSERT(scope_wait(s, &sc, (double[]){outside}, 1, "a narrower region around a point"));
  CU_ASSERT_EQUAL(scn_cli_subscribe_update(s, sub, NULL), SCN_CLI_OK); /* "near": null */
  CU_ASSERT(scope_wait(s, &sc, all, 3, "no region"));
  CU_ASSERT_EQUAL(scn_cli_subscribe_update(s, sub + 1000, NULL), SCN_CLI_EREPLY);
  CU_ASSERT(strstr(scn_cli_error(s), "NOT_FOUND") != NULL);
  cJSON *empty = cJSON_CreateObject();
  CU_ASSERT_EQUAL(scn_cli_subscribe_update_fields(s, sub, empty), SCN_CLI_EREPLY);
  CU_ASSERT(strstr(scn_cli_error(s), "BAD_REQUEST") != NULL);
  cJSON *not_object = cJSON_CreateTrue();
  CU_ASSERT_EQUAL(scn_cli_subscribe_update(s, sub, not_object), SCN_CLI_EINVAL);
  cJSON_Delete(not_object);
  CU_ASSERT(call_fine(s, "{\"cmd\":\"unsubscribe\",\"sub\":%.0f}", sub));

  /* The region follows its entity; destroying it ends the subscription, the copy emptied. */
  cJSON *opts = cJSON_CreateObject();
  cJSON *around = cJSON_AddObjectToObject(opts, "near");
  cJSON_AddNumberToObject(around, "entity", outside);
  cJSON_AddNumberToObject(around, "radius", 4);
  memset(&sc, 0, sizeof sc);
  sc.watch = all, sc.nwatch = 3, sc.sub = -1;
  CU_ASSERT_EQUAL_FATAL(scn_cli_subscribe_fields(s, world, opts, &sub), SCN_CLI_OK);
  sc.sub = sub;
  CU_ASSERT(scope_wait(s, &sc, (double[]){center, outside}, 2, "around a moving center"));
  CU_ASSERT(move_x(c, world, outside, 48));
  CU_ASSERT(scope_wait(s, &sc, (double[]){outside}, 1, "the center moved"));
  CU_ASSERT(call_fine(c, "{\"cmd\":\"transform.destroy\",\"world\":\"%s\",\"entity\":%.0f}", world,
                      outside));
  for (long end = t_now_ms() + WAIT_MS; !sc.reason[0] && t_now_ms() < end;)
    scn_cli_poll_events(s, 50);
  CU_ASSERT_STRING_EQUAL(sc.reason, "center_destroyed");
  CU_ASSERT(sc.removed_seen[2]);
  CU_ASSERT_EQUAL(sc.held_at_end, 0); /* the frame before the end removed the whole scope */
  CU_ASSERT_EQUAL(sc.n, 0);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  cJSON_Delete(opts);
  cJSON_Delete(empty);
  cJSON_Delete(near);
  scn_cli_close(s);
  scn_cli_close(c);
}

static void test_lib_near(void) {
  near_scenario(SCN_CLI_MATRICES_JSON);
  near_scenario(SCN_CLI_MATRICES_B64);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_clients_library(void) {
  static const t_test tests[] = {
      {"library: connect and call", test_lib_calls},
      {"library: error replies", test_lib_error_reply},
      {"library: 2,000 pipelined requests", test_lib_pipeline},
      {"library: subscribe, full frame then deltas", test_lib_subscribe},
      {"library: set one part, read the parts", test_lib_parts},
      {"library: matrices now and at a past tick", test_lib_history},
      {"library: connection refused", test_lib_refused},
      {"library: timeout", test_lib_timeout},
      {"library: a send timeout never resends", test_lib_send_timeout},
      {"library: the daemon closes the connection", test_lib_closed},
      {"library and scenectl: token auth", test_lib_auth},
      {"library: b64 mode, matrices and frames to the bit", test_lib_b64},
      {"library: near subscriptions, updates and the end of a center", test_lib_near},
  };
  return T_ADD_SUITE("clients_library", clients_suite_init, clients_suite_clean, tests);
}

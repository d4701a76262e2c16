/* Integration tests of the clients against the real daemon: the C library (t_client.h:
 * calls, error replies, pipelining, stream events, refused connections, timeouts, a closed
 * connection, token auth, b64 mode: matrices and frames to the bit), scenectl (result lines,
 * value parsing, exit codes, --pipe, subscribe, --help and help CMD, --matrices b64), the
 * parts of a transform through the library and scenectl, the Python client's self-test and
 * the shell example. */
#include "b64_fixtures.h"
#include "daemon_fixtures.h"
#include "scn_client.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The daemon the suite shares (default settings, 60 ticks per second). */
static t_daemon dmn;
static char port_env[32];
static void (*old_sigpipe)(int);

#define WAIT_MS 5000

/* Lines of s (each ended by '\n'), parsed as JSON, in an array (NULL items become JSON null). */
static cJSON *json_lines(const char *s, int *count, bool *all_terminated) {
  cJSON *arr = cJSON_CreateArray();
  int n = 0;
  *all_terminated = true;
  while (*s) {
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    if (!nl)
      *all_terminated = false;
    cJSON *j = cJSON_ParseWithLength(s, len);
    cJSON_AddItemToArray(arr, j ? j : cJSON_CreateNull());
    n++;
    s += len + (nl ? 1 : 0);
  }
  *count = n;
  return arr;
}

static int count_char(const char *s, char c) {
  int n = 0;
  for (; *s; s++)
    n += *s == c;
  return n;
}

/* ---- JSON helpers ----------------------------------------------------------------------- */

static const cJSON *field(const cJSON *j, const char *name) {
  return j ? cJSON_GetObjectItemCaseSensitive(j, name) : NULL;
}

/* Element i of an array of numbers, -1 when there is no such number. */
static double item_num(const cJSON *a, int i) {
  const cJSON *v = cJSON_GetArrayItem(a, i);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* True when m is the 16 numbers of a translation by (x, y, z), exactly. */
static bool is_translation(const cJSON *m, double x, double y, double z) {
  const double want[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, x, y, z, 1};
  if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 16)
    return false;
  for (int i = 0; i < 16; i++) {
    const cJSON *v = cJSON_GetArrayItem(m, i);
    if (!cJSON_IsNumber(v) || v->valuedouble != want[i])
      return false;
  }
  return true;
}

/* ---- library helpers -------------------------------------------------------------------- */

static scn_cli *open_cli(int port, const char *token, int timeout_ms) {
  scn_cli_options o = {.host = "127.0.0.1", .port = port, .token = token, .timeout_ms = timeout_ms};
  char err[256] = "";
  scn_cli *c = scn_cli_connect(&o, err, sizeof err);
  if (!c)
    t_report_text("connect failed", err);
  return c;
}

/* A request written printf-style; the response when it is ok, else NULL (reported). */
static cJSON *call_ok(scn_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cJSON *call_ok(scn_cli *c, const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  cJSON *r = NULL;
  int rc = scn_cli_call_line(c, line, &r);
  if (rc != SCN_CLI_OK) {
    t_report_text(line, scn_cli_error(c));
    cJSON_Delete(r);
    return NULL;
  }
  return r;
}

/* The same, for requests whose result is not needed; true when ok. */
static bool call_fine(scn_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool call_fine(scn_cli *c, const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  int rc = scn_cli_call_line(c, line, NULL);
  if (rc != SCN_CLI_OK)
    t_report_text(line, scn_cli_error(c));
  return rc == SCN_CLI_OK;
}

/* A fresh world name, unique in this run. */
static void world_name(char *out, size_t n) {
  static int serial;
  snprintf(out, n, "clients-%d-%d", (int)getpid(), ++serial);
}

/* Creates a world and one root transform in it at (x, y, z); returns the entity, or -1. */
static double make_world(scn_cli *c, char *world, size_t n, double x, double y, double z) {
  world_name(world, n);
  if (!call_fine(c, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world))
    return -1;
  cJSON *r = call_ok(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"t\":[%g,%g,%g]}", world,
                     x, y, z);
  double e = t_resp_num(r, "entity");
  cJSON_Delete(r);
  return e;
}

/* A port on 127.0.0.1 with nothing listening: bound, read, closed. */
static int dead_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  int port = -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

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

/* ---- child processes -------------------------------------------------------------------- */

static bool env_replaced(const char *e) {
  static const char *const names[] = {
      "SCENED_HOST=", "SCENED_PORT=", "SCENED_AUTH_TOKEN=", "SCENECTL="};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strncmp(e, names[i], strlen(names[i])) == 0)
      return true;
  return false;
}

/* Starts bin with args (t_proc_start) and this environment minus the SCENED_* client
 * variables plus set (NULL-terminated "K=V"). */
static bool proc_start(t_proc *p, const char *bin, const char *const *args, const char *const *set,
                       const char *in, size_t in_len) {
  size_t n = 0, m = 0;
  while (environ[n])
    n++;
  while (set && set[m])
    m++;
  char **env = calloc(n + m + 1, sizeof *env);
  if (!env)
    return false;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!env_replaced(environ[i]))
      env[k++] = environ[i];
  for (size_t i = 0; i < m; i++)
    env[k++] = (char *)set[i];
  bool started = t_proc_start(p, bin, args, env, in, in_len);
  free(env);
  return started;
}

static const char *ctl_bin(void) {
  const char *bin = getenv("SCENECTL_BIN");
  return bin && *bin ? bin : "build/scenectl";
}

/* Runs scenectl with args (NULL-terminated), the environment set (NULL: SCENED_HOST and
 * SCENED_PORT of the suite's daemon) and stdin in; its exit code. */
static int ctl_run(t_proc *p, const char *const *set, const char *in, size_t in_len,
                   const char *const *args) {
  const char *defaults[] = {"SCENED_HOST=127.0.0.1", port_env, NULL};
  if (!proc_start(p, ctl_bin(), args, set ? set : defaults, in, in_len)) {
    *p = (t_proc){.pid = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .status = -1};
    return -1;
  }
  return t_proc_wait(p, 20000);
}

#define CTL(p, ...) ctl_run((p), NULL, NULL, 0, (const char *const[]){__VA_ARGS__, NULL})

/* An executable named name on PATH, in out. */
static bool find_in_path(const char *name, char *out, size_t n) {
  const char *path = getenv("PATH");
  if (!path)
    return false;
  for (const char *p = path;;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len) {
      snprintf(out, n, "%.*s/%s", (int)len, p, name);
      if (access(out, X_OK) == 0)
        return true;
    }
    if (!colon)
      return false;
    p = colon + 1;
  }
}

/* ---- C library -------------------------------------------------------------------------- */

static void test_lib_calls(void) {
  scn_cli *c = open_cli(dmn.port, NULL, 0);
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
  scn_cli *c = open_cli(dmn.port, NULL, 0);
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
  scn_cli *c = open_cli(dmn.port, NULL, 0);
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

/* A frame event with its header checked; NULL when ev is not one. */
static bool is_frame(const cJSON *ev, double sub, const char *world, bool full) {
  return t_resp_str_is(ev, "event", "frame") && t_resp_num(ev, "sub") == sub &&
         t_resp_str_is(ev, "world", world) && cJSON_IsBool(field(ev, "full")) &&
         cJSON_IsTrue(field(ev, "full")) == full && cJSON_IsNumber(field(ev, "tick")) &&
         cJSON_IsArray(field(ev, "set")) && cJSON_IsArray(field(ev, "removed"));
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
  scn_cli *c = open_cli(dmn.port, NULL, 0), *s = open_cli(dmn.port, NULL, 0);
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
  scn_cli *c = open_cli(dmn.port, NULL, 0);
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
  scn_cli *c = open_cli(dmn.port, NULL, 0);
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

/* ---- scenectl ---------------------------------------------------------------------------- */

/* One JSON line on stdout (returned parsed), nothing on stderr, exit 0. */
static cJSON *ctl_ok(const char *const *args) {
  t_proc p;
  int code = ctl_run(&p, NULL, NULL, 0, args);
  const char *out = text_str(&p.out);
  bool one_line = count_char(out, '\n') == 1 && out[strlen(out) - 1] == '\n';
  cJSON *j = one_line ? cJSON_Parse(out) : NULL;
  if (code != 0 || !cJSON_IsObject(j) || p.err.len) {
    fprintf(stderr, "  scenectl %s: exit %d, stdout %s, stderr %s\n", args[0], code, out,
            text_str(&p.err));
    cJSON_Delete(j);
    j = NULL;
  }
  t_proc_free(&p);
  return j;
}

static void test_ctl_result_line(void) {
  t_proc p;
  CU_ASSERT_EQUAL(CTL(&p, "ping"), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  t_proc_free(&p);
  /* An id in the request is not printed either. */
  CU_ASSERT_EQUAL(CTL(&p, "ping", "id=5"), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  t_proc_free(&p);

  char world[64], warg[96];
  world_name(world, sizeof world);
  snprintf(warg, sizeof warg, "world=%s", world);
  CU_ASSERT_EQUAL(CTL(&p, "world.create", warg), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  t_proc_free(&p);

  /* t=[1,2,3] is an array, name=car a string. */
  cJSON *r = ctl_ok((const char *const[]){"transform.create", warg, "t=[1,2,3]", "name=car", NULL});
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(r), 1);
  double car = t_resp_num(r, "entity");
  CU_ASSERT(car >= 1 && car == floor(car));
  cJSON_Delete(r);

  scn_cli *c = open_cli(dmn.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  r = call_ok(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}", world, car);
  CU_ASSERT(t_resp_str_is(r, "name", "car"));
  CU_ASSERT(is_translation(field(r, "local"), 1, 2, 3));
  cJSON_Delete(r);

  /* transform.get through scenectl: the result fields, no "ok", no "id". */
  char earg[64];
  snprintf(earg, sizeof earg, "entity=%.0f", car);
  r = ctl_ok((const char *const[]){"transform.get", warg, earg, "id=\"x\"", NULL});
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_PTR_NULL(field(r, "ok"));
  CU_ASSERT_PTR_NULL(field(r, "id"));
  CU_ASSERT_EQUAL(t_resp_num(r, "entity"), car);
  CU_ASSERT(cJSON_IsNull(field(r, "parent")));
  CU_ASSERT(t_resp_str_is(r, "name", "car"));
  CU_ASSERT(is_translation(field(r, "local"), 1, 2, 3));
  CU_ASSERT(is_translation(field(r, "world"), 1, 2, 3));
  cJSON_Delete(r);

  /* count=3 is a number. */
  r = ctl_ok((const char *const[]){"entity.create", "count=3", NULL});
  const cJSON *ids = field(r, "entities");
  CU_ASSERT(cJSON_IsArray(ids) && cJSON_GetArraySize(ids) == 3);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(r), 1);
  cJSON_Delete(r);

  /* A quoted value is a JSON string ("7", not 7); s=2 a number; parent=<id> a number. */
  char parg[64];
  snprintf(parg, sizeof parg, "parent=%.0f", car);
  r = ctl_ok((const char *const[]){"transform.create", warg, parg, "name=\"7\"", "s=2", NULL});
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  double child = t_resp_num(r, "entity");
  cJSON_Delete(r);
  r = call_ok(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}", world, child);
  CU_ASSERT(t_resp_str_is(r, "name", "7"));
  CU_ASSERT_EQUAL(t_resp_num(r, "parent"), car);
  const cJSON *local = field(r, "local");
  CU_ASSERT(cJSON_GetArraySize(local) == 16 && cJSON_GetArrayItem(local, 0)->valuedouble == 2 &&
            cJSON_GetArrayItem(local, 5)->valuedouble == 2 &&
            cJSON_GetArrayItem(local, 10)->valuedouble == 2);
  cJSON_Delete(r);
  /* name=null is JSON null: the name is cleared. A bare word with spaces stays one string. */
  snprintf(earg, sizeof earg, "entity=%.0f", child);
  r = ctl_ok((const char *const[]){"transform.rename", warg, earg, "name=null", NULL});
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);
  r = ctl_ok((const char *const[]){"transform.rename", warg, earg, "name=left wheel", NULL});
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);
  r = call_ok(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}", world, child);
  CU_ASSERT(t_resp_str_is(r, "name", "left wheel"));
  cJSON_Delete(r);
  r = ctl_ok((const char *const[]){"transform.find", warg, "path=car/left wheel", NULL});
  CU_ASSERT_EQUAL(t_resp_num(r, "entity"), child);
  cJSON_Delete(r);

  /* partial=true and trs=true are booleans: the rotation alone changes, the parts read back. */
  r = ctl_ok((const char *const[]){"transform.set_local", warg, earg, "partial=true", "r=[0,0,1,1]",
                                   NULL});
  CU_ASSERT_PTR_NOT_NULL(r);
  cJSON_Delete(r);
  r = ctl_ok((const char *const[]){"transform.get", warg, earg, "trs=true", NULL});
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  const cJSON *lt = field(r, "local_trs");
  double t0 = item_num(field(lt, "t"), 0), s0 = item_num(field(lt, "s"), 0);
  double rz = item_num(field(lt, "r"), 2);
  CU_ASSERT(t0 == 0 && s0 == 2 && fabs(rz - 0.70710677) < 1e-7);
  CU_ASSERT(cJSON_IsObject(field(r, "world_trs")));
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(CTL(&p, "transform.set_local", warg, earg, "partial=yes", "t=[1,2,3]"), 1);
  CU_ASSERT(strncmp(text_str(&p.err), "BAD_REQUEST: ", 13) == 0);
  t_proc_free(&p);

  /* --port and --host override the environment. */
  char dead_env[32], port_arg[16];
  snprintf(dead_env, sizeof dead_env, "SCENED_PORT=%d", dead_port());
  snprintf(port_arg, sizeof port_arg, "%d", dmn.port);
  const char *env_dead[] = {"SCENED_HOST=nowhere.invalid", dead_env, NULL};
  CU_ASSERT_EQUAL(
      ctl_run(&p, env_dead, NULL, 0,
              (const char *const[]){"--host", "127.0.0.1", "--port", port_arg, "ping", NULL}),
      0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  t_proc_free(&p);

  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

static void test_ctl_error_exit(void) {
  scn_cli *c = open_cli(dmn.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64], warg[96];
  world_name(world, sizeof world);
  snprintf(warg, sizeof warg, "world=%s", world);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world));
  /* The exact message, from the same request through the library. */
  cJSON *r = NULL;
  char line[256], want[512];
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  CU_ASSERT_EQUAL(scn_cli_call_line(c, line, &r), SCN_CLI_EREPLY);
  snprintf(want, sizeof want, "ALREADY_EXISTS: %s\n", scn_cli_reply_message(r));
  cJSON_Delete(r);

  t_proc p;
  CU_ASSERT_EQUAL(CTL(&p, "world.create", warg), 1);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), want);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);

  CU_ASSERT_EQUAL(CTL(&p, "no.such.command"), 1);
  CU_ASSERT(strncmp(text_str(&p.err), "UNKNOWN_COMMAND: ", 17) == 0);
  CU_ASSERT_EQUAL(count_char(text_str(&p.err), '\n'), 1);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);

  /* name=123 is a number: BAD_REQUEST. */
  CU_ASSERT_EQUAL(CTL(&p, "transform.create", warg, "name=123"), 1);
  CU_ASSERT(strncmp(text_str(&p.err), "BAD_REQUEST: ", 13) == 0);
  t_proc_free(&p);
  r = call_ok(c, "{\"cmd\":\"world.list\"}");
  const cJSON *w;
  cJSON_ArrayForEach(w, field(r, "worlds")) {
    if (t_resp_str_is(w, "name", world))
      CU_ASSERT_EQUAL(t_resp_num(w, "transforms"), 0);
  }
  cJSON_Delete(r);

  /* Usage errors: 2. */
  CU_ASSERT_EQUAL(CTL(&p, "ping", "novalue"), 2);
  CU_ASSERT(strstr(text_str(&p.err), "key=value") != NULL);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(CTL(&p, "--bogus", "ping"), 2);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(CTL(&p, "--pipe", "ping"), 2);
  t_proc_free(&p);

  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

static void test_ctl_connect_errors(void) {
  char dead_env[32];
  snprintf(dead_env, sizeof dead_env, "SCENED_PORT=%d", dead_port());
  const char *env_dead[] = {"SCENED_HOST=127.0.0.1", dead_env, NULL};
  t_proc p;
  CU_ASSERT_EQUAL(ctl_run(&p, env_dead, NULL, 0, (const char *const[]){"ping", NULL}), 2);
  CU_ASSERT(strncmp(text_str(&p.err), "scenectl: cannot connect to 127.0.0.1:", 38) == 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(ctl_run(&p, env_dead, NULL, 0, (const char *const[]){"--pipe", NULL}), 2);
  t_proc_free(&p);
  CU_ASSERT_EQUAL(
      ctl_run(&p, env_dead, NULL, 0, (const char *const[]){"subscribe", "world=w", NULL}), 2);
  t_proc_free(&p);

  /* Bad ports, on the command line and in the environment. */
  const char *bad[] = {"0", "-1", "65536", "abc", "80x", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_EQUAL(CTL(&p, "--port", bad[i], "ping"), 2);
    CU_ASSERT(strstr(text_str(&p.err), "port") != NULL);
    CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
    t_proc_free(&p);
    char env[32];
    snprintf(env, sizeof env, "SCENED_PORT=%s", bad[i]);
    const char *env_bad[] = {env, NULL};
    int code = ctl_run(&p, env_bad, NULL, 0, (const char *const[]){"ping", NULL});
    /* An empty SCENED_PORT is unset: the default port, where nothing may listen. */
    if (*bad[i]) {
      CU_ASSERT_EQUAL(code, 2);
      CU_ASSERT(strstr(text_str(&p.err), "invalid port") != NULL);
      if (!strstr(text_str(&p.err), "invalid port"))
        fprintf(stderr, "  SCENED_PORT=%s: exit %d, stderr %s\n", bad[i], code, text_str(&p.err));
    }
    t_proc_free(&p);
  }
  /* --port wins over a bad SCENED_PORT. */
  char port_arg[16];
  snprintf(port_arg, sizeof port_arg, "%d", dmn.port);
  const char *env_bad[] = {"SCENED_PORT=abc", NULL};
  CU_ASSERT_EQUAL(
      ctl_run(&p, env_bad, NULL, 0, (const char *const[]){"--port", port_arg, "ping", NULL}), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  t_proc_free(&p);
}

static void test_ctl_pipe(void) {
  enum { N = 5000, BAD = 3333 };
  scn_cli *c = open_cli(dmn.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64];
  double e = make_world(c, world, sizeof world, 1, 1, 1);
  CU_ASSERT_FATAL(e > 0);

  text in = {0};
  for (int i = 0; i < N; i++) {
    if (i == 2500)
      text_add(&in, "\n \t \n", 5); /* an empty and a blank line */
    if (i == BAD)
      text_addf(&in, "{\"id\":%d,\"cmd\":\"no.such.command\"}\n", i);
    else if (i % 10 == 0)
      text_addf(&in, "{\"id\":%d,\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}%s", i,
                world, e, i == 4000 ? "\r\n" : "\n");
    else
      text_addf(&in, "{\"id\":%d,\"cmd\":\"ping\"}\n", i);
  }
  t_proc p;
  int code = ctl_run(&p, NULL, in.s, in.len, (const char *const[]){"--pipe", NULL});
  CU_ASSERT_EQUAL(code, 1);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  int n = 0;
  bool terminated;
  cJSON *lines = json_lines(text_str(&p.out), &n, &terminated);
  CU_ASSERT_EQUAL(n, N);
  CU_ASSERT(terminated);
  int bad = 0, i = 0;
  const cJSON *r;
  cJSON_ArrayForEach(r, lines) {
    bool ok = t_resp_num(r, "id") == i;
    if (i == BAD)
      ok = ok && cJSON_IsFalse(field(r, "ok")) && scn_cli_reply_code(r) &&
           strcmp(scn_cli_reply_code(r), "UNKNOWN_COMMAND") == 0;
    else if (i % 10 == 0)
      ok = ok && cJSON_IsTrue(field(r, "ok")) && t_resp_num(r, "entity") == e &&
           is_translation(field(r, "world"), 1, 1, 1);
    else
      ok = ok && cJSON_IsTrue(field(r, "ok")) && cJSON_GetArraySize(r) == 2;
    if (!ok && bad++ < 3) {
      char *s = cJSON_PrintUnformatted(r);
      fprintf(stderr, "  --pipe response %d: %s\n", i, s);
      free(s);
    }
    i++;
  }
  CU_ASSERT_EQUAL(bad, 0);
  cJSON_Delete(lines);
  t_proc_free(&p);
  text_free(&in);

  /* No failure: exit 0; the last line without a line end still counts. */
  for (int k = 0; k < 3000; k++)
    text_addf(&in, "{\"id\":%d,\"cmd\":\"ping\"}%s", k, k == 2999 ? "" : "\n");
  code = ctl_run(&p, NULL, in.s, in.len, (const char *const[]){"--pipe", NULL});
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  lines = json_lines(text_str(&p.out), &n, &terminated);
  CU_ASSERT_EQUAL(n, 3000);
  CU_ASSERT(terminated);
  bad = 0;
  i = 0;
  cJSON_ArrayForEach(r, lines) {
    if (!(t_resp_num(r, "id") == i && cJSON_IsTrue(field(r, "ok"))))
      bad++;
    i++;
  }
  CU_ASSERT_EQUAL(bad, 0);
  cJSON_Delete(lines);
  t_proc_free(&p);
  text_free(&in);

  /* Empty input: nothing out, exit 0. */
  code = ctl_run(&p, NULL, NULL, 0, (const char *const[]){"--pipe", NULL});
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);

  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

/* Starts "scenectl subscribe world=W ..." in the background. */
static bool ctl_start(t_proc *p, const char *const *args) {
  const char *set[] = {"SCENED_HOST=127.0.0.1", port_env, NULL};
  return proc_start(p, ctl_bin(), args, set, NULL, 0);
}

/* Checks stdout of a subscribe run: frames exactly, the first full; the second sets e. */
static void check_two_frames(const char *out, const char *world, double e) {
  int n = 0;
  bool terminated;
  cJSON *lines = json_lines(out, &n, &terminated);
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT(terminated);
  if (n != 2)
    t_report_text("frames", out);
  const cJSON *a = cJSON_GetArrayItem(lines, 0), *b = cJSON_GetArrayItem(lines, 1);
  double sub = t_resp_num(a, "sub");
  CU_ASSERT(sub >= 1);
  CU_ASSERT(is_frame(a, sub, world, true));
  CU_ASSERT(cJSON_GetArraySize(field(a, "set")) == 1 &&
            t_resp_num(cJSON_GetArrayItem(field(a, "set"), 0), "e") == e);
  CU_ASSERT(is_frame(b, sub, world, false));
  CU_ASSERT(cJSON_GetArraySize(field(b, "set")) == 1 &&
            t_resp_num(cJSON_GetArrayItem(field(b, "set"), 0), "e") == e);
  CU_ASSERT(t_resp_num(b, "tick") > t_resp_num(a, "tick"));
  CU_ASSERT_PTR_NULL(field(a, "ok"));
  cJSON_Delete(lines);
}

static void test_ctl_subscribe(void) {
  scn_cli *c = open_cli(dmn.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64], warg[96];
  double e = make_world(c, world, sizeof world, 0, 0, 0);
  CU_ASSERT_FATAL(e > 0);
  snprintf(warg, sizeof warg, "world=%s", world);

  /* Two frames while another connection moves the transform. */
  t_proc p;
  CU_ASSERT_FATAL(ctl_start(&p, (const char *const[]){"subscribe", warg, "--frames", "2", NULL}));
  long deadline = t_now_ms() + WAIT_MS;
  for (int k = 1; t_now_ms() < deadline && !t_proc_pump(&p, 20); k++)
    CU_ASSERT(call_fine(c,
                        "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,"
                        "\"t\":[%d,0,0]}",
                        world, e, k));
  CU_ASSERT_EQUAL(t_proc_wait(&p, WAIT_MS), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  check_two_frames(text_str(&p.out), world, e);
  t_proc_free(&p);

  /* Frames that arrive together: still exactly --frames of them. The subscriber is stopped
   * after the full frame while three moves make frames, then continued. */
  CU_ASSERT_FATAL(ctl_start(&p, (const char *const[]){"subscribe", warg, "--frames", "2", NULL}));
  deadline = t_now_ms() + WAIT_MS;
  while (!strchr(text_str(&p.out), '\n') && t_now_ms() < deadline && !t_proc_pump(&p, 10)) {
  }
  CU_ASSERT_FATAL(strchr(text_str(&p.out), '\n') != NULL);
  kill(p.pid, SIGSTOP);
  for (int k = 1; k <= 3; k++) {
    CU_ASSERT(call_fine(c,
                        "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,"
                        "\"t\":[%d,1,0]}",
                        world, e, k));
    t_sleep_ms(60);
  }
  kill(p.pid, SIGCONT);
  CU_ASSERT_EQUAL(t_proc_wait(&p, WAIT_MS), 0);
  check_two_frames(text_str(&p.out), world, e);
  t_proc_free(&p);

  /* A subtree subscription without --frames ends with the world. */
  char rarg[64];
  snprintf(rarg, sizeof rarg, "root=%.0f", e);
  CU_ASSERT_FATAL(ctl_start(&p, (const char *const[]){"subscribe", warg, rarg, "hz=30", NULL}));
  deadline = t_now_ms() + WAIT_MS;
  while (!strchr(text_str(&p.out), '\n') && t_now_ms() < deadline && !t_proc_pump(&p, 10)) {
  }
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  CU_ASSERT_EQUAL(t_proc_wait(&p, WAIT_MS), 0);
  int n = 0;
  bool terminated;
  cJSON *lines = json_lines(text_str(&p.out), &n, &terminated);
  CU_ASSERT(n >= 2);
  const cJSON *first = cJSON_GetArrayItem(lines, 0), *last = cJSON_GetArrayItem(lines, n - 1);
  CU_ASSERT(t_resp_str_is(first, "event", "frame") && cJSON_IsTrue(field(first, "full")));
  CU_ASSERT(t_resp_str_is(last, "event", "world_destroyed") && t_resp_str_is(last, "world", world));
  cJSON_Delete(lines);
  t_proc_free(&p);

  /* An unknown world: the error reply, exit 1. */
  t_proc q;
  CU_ASSERT_EQUAL(CTL(&q, "subscribe", warg, "--frames", "1"), 1);
  CU_ASSERT(strncmp(text_str(&q.err), "NOT_FOUND: ", 11) == 0);
  CU_ASSERT_STRING_EQUAL(text_str(&q.out), "");
  t_proc_free(&q);
  scn_cli_close(c);
}

static void test_ctl_help(void) {
  const char *flags[] = {"--help", "-h"};
  for (int f = 0; f < 2; f++) {
    t_proc p;
    CU_ASSERT_EQUAL(CTL(&p, flags[f]), 0);
    const char *out = text_str(&p.out);
    CU_ASSERT(strncmp(out, "usage: scenectl", 15) == 0);
    for (unsigned i = 0; i < scn_command_count; i++) {
      char want[96];
      snprintf(want, sizeof want, "\n  %s ", scn_commands[i].name);
      CU_ASSERT(strstr(out, want) != NULL);
      if (!strstr(out, want))
        fprintf(stderr, "  --help does not list %s\n", scn_commands[i].name);
    }
    CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
    t_proc_free(&p);
  }
  /* help CMD: the command's fields from the table, the new ones included. */
  static const struct {
    const char *cmd, *optional;
  } fields[] = {{"transform.set_local", "  optional: partial,matrix,matrix_b64,t,r,s\n"},
                {"transform.set_world", "  optional: partial,matrix,matrix_b64,t,r,s\n"},
                {"transform.get", "  optional: trs,tick\n"}};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
    t_proc p;
    CU_ASSERT_EQUAL(CTL(&p, "help", fields[i].cmd), 0);
    const char *out = text_str(&p.out);
    CU_ASSERT(strncmp(out, fields[i].cmd, strlen(fields[i].cmd)) == 0);
    CU_ASSERT(strstr(out, "  required: world,entity\n") != NULL);
    CU_ASSERT(strstr(out, fields[i].optional) != NULL);
    if (!strstr(out, fields[i].optional))
      t_report_text("scenectl help", out);
    t_proc_free(&p);
  }
  t_proc hp;
  CU_ASSERT_EQUAL(CTL(&hp, "help"), 0);
  CU_ASSERT(strncmp(text_str(&hp.out), "usage: scenectl", 15) == 0);
  t_proc_free(&hp);
  CU_ASSERT_EQUAL(CTL(&hp, "help", "no.such.command"), 2);
  CU_ASSERT(strstr(text_str(&hp.err), "no.such.command") != NULL);
  t_proc_free(&hp);

  /* No command, stdin a pipe (not a terminal): usage on stderr, exit 2. */
  t_proc p;
  int code = ctl_run(&p, NULL, "ping\n", 5, (const char *const[]){NULL});
  CU_ASSERT_EQUAL(code, 2);
  CU_ASSERT(strncmp(text_str(&p.err), "usage: scenectl", 15) == 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);
  code = ctl_run(&p, NULL, NULL, 0, (const char *const[]){NULL});
  CU_ASSERT_EQUAL(code, 2);
  t_proc_free(&p);
}

/* ---- the Python client and the shell example --------------------------------------------- */

/* ---- b64 mode ------------------------------------------------------------------------------ */

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
  memcpy(s->ids, f->ids, s->n * sizeof *f->ids);
  memcpy(s->ms, f->matrices, s->n * sizeof *f->matrices);
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
  scn_cli_options o = {.host = "127.0.0.1", .port = dmn.port, .matrices = SCN_CLI_MATRICES_B64};
  scn_cli *b = scn_cli_connect(&o, NULL, 0), *j = open_cli(dmn.port, NULL, 0);
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

/* scenectl shows matrices as JSON arrays; --matrices b64 passes the daemon's base64 through,
 * in results and in frames; any other --matrices is a usage error. */
static void test_ctl_b64(void) {
  uint64_t rng = 78;
  float m[16];
  b64_random_matrix(&rng, m);
  char text[SCN_CLI_B64_MATRIX_LEN + 1], arg[128], world[64], wa[96], ea[64];
  scn_cli_matrix_to_b64(m, text);
  world_name(world, sizeof world);
  snprintf(wa, sizeof wa, "world=%s", world);
  snprintf(arg, sizeof arg, "matrix_b64=%s", text);
  cJSON_Delete(ctl_ok((const char *const[]){"world.create", wa, NULL}));
  cJSON *r = ctl_ok((const char *const[]){"transform.create", wa, arg, NULL});
  snprintf(ea, sizeof ea, "entity=%.0f", t_resp_num(r, "entity"));
  cJSON_Delete(r);
  r = ctl_ok((const char *const[]){"--matrices", "b64", "transform.get", wa, ea, NULL});
  CHECK(t_resp_str_is(r, "local", text) && t_resp_str_is(r, "world", text), r);
  cJSON_Delete(r);
  r = ctl_ok((const char *const[]){"transform.get", wa, ea, NULL});
  float got[16];
  CHECK(cJSON_IsArray(field(r, "local")) && scn_cli_matrix_get(field(r, "local"), got) == 0, r);
  for (int i = 0; i < 16; i++)
    CU_ASSERT_TRUE(got[i] == m[i]); /* the same values (cJSON reprints -0 as 0) */
  cJSON_Delete(r);
  t_proc p;
  CU_ASSERT_EQUAL(CTL(&p, "--matrices", "base64", "ping"), 2);
  t_proc_free(&p);
  /* a frame in b64 form, as the daemon sent it */
  char fa[] = "--frames";
  if (ctl_start(&p, (const char *const[]){"--matrices", "b64", "subscribe", wa, fa, "1", NULL})) {
    CU_ASSERT_EQUAL(t_proc_wait(&p, WAIT_MS), 0);
    cJSON *f = cJSON_Parse(text_str(&p.out));
    CHECK(cJSON_IsString(field(f, "ms")) && strcmp(field(f, "ms")->valuestring, text) == 0 &&
              cJSON_GetArraySize(field(f, "ids")) == 1 && !field(f, "set"),
          f);
    cJSON_Delete(f);
    t_proc_free(&p);
  }
  cJSON_Delete(ctl_ok((const char *const[]){"world.destroy", wa, NULL}));
}

static void test_python_selftest(void) {
  char python[1024], script[1024];
  if (!find_in_path("python3", python, sizeof python)) {
    printf("  note: python3 is not on PATH; the Python client's self-test is skipped\n");
    return;
  }
  CU_ASSERT_FATAL(t_find_script("scened_client.py", script, sizeof script));
  char port[16];
  snprintf(port, sizeof port, "%d", dmn.port);
  const char *args[] = {script, "--host", "127.0.0.1", "--port", port, "--selftest", NULL};
  t_proc p;
  CU_ASSERT_FATAL(proc_start(&p, python, args, NULL, NULL, 0));
  int code = t_proc_wait(&p, 30000);
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT(strstr(text_str(&p.out), "selftest passed") != NULL);
  if (code != 0)
    fprintf(stderr, "  selftest: exit %d\n%s%s\n", code, text_str(&p.out), text_str(&p.err));
  t_proc_free(&p);
}

static void test_car_demo(void) {
  char jq[1024], bash[1024], script[1024];
  if (!find_in_path("jq", jq, sizeof jq)) {
    printf("  note: jq is not on PATH; the shell example is skipped\n");
    return;
  }
  if (!find_in_path("bash", bash, sizeof bash)) {
    printf("  note: bash is not on PATH; the shell example is skipped\n");
    return;
  }
  CU_ASSERT_FATAL(t_find_script("car_demo.sh", script, sizeof script));
  char ctl_env[1100];
  snprintf(ctl_env, sizeof ctl_env, "SCENECTL=%s", ctl_bin());
  const char *set[] = {"SCENED_HOST=127.0.0.1", port_env, ctl_env, NULL};
  const char *args[] = {script, "3", NULL};
  t_proc p;
  CU_ASSERT_FATAL(proc_start(&p, bash, args, set, NULL, 0));
  int code = t_proc_wait(&p, 30000);
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  int n = 0;
  bool terminated;
  cJSON *lines = json_lines(text_str(&p.out), &n, &terminated);
  CU_ASSERT_EQUAL(n, 3);
  CU_ASSERT(terminated);
  if (code != 0 || n != 3)
    fprintf(stderr, "  car_demo.sh: exit %d\n%s%s\n", code, text_str(&p.out), text_str(&p.err));
  for (int step = 1; step <= n; step++) {
    const cJSON *l = cJSON_GetArrayItem(lines, step - 1), *w = field(l, "wheel_fl");
    const cJSON *q = field(l, "wheel_fl_r");
    CU_ASSERT_EQUAL(t_resp_num(l, "step"), step);
    CU_ASSERT_FATAL(cJSON_IsArray(w) && cJSON_GetArraySize(w) == 3);
    CU_ASSERT_FATAL(cJSON_IsArray(q) && cJSON_GetArraySize(q) == 4);
    /* The car at (step, 0, 0) turned by step * 0.1 about y; the wheel at (1, 0.3, -0.5), where
     * the partial rotations that spin it left it. */
    double a = step * 0.1, x = 1.0, z = -0.5;
    double want[3] = {step + cos(a) * x + sin(a) * z, 0.3, -sin(a) * x + cos(a) * z};
    for (int k = 0; k < 3; k++) {
      const cJSON *v = cJSON_GetArrayItem(w, k);
      CU_ASSERT(cJSON_IsNumber(v) && fabs(v->valuedouble - want[k]) < 1e-4);
    }
    /* It faces the car's heading times its spin of step * 0.5 about z: the product of
     * (0, sin(a/2), 0, cos(a/2)) and (0, 0, sin(b/2), cos(b/2)), with w >= 0. */
    double b = step * 0.5, s1 = sin(a / 2), c1 = cos(a / 2), s2 = sin(b / 2), c2 = cos(b / 2);
    double want_r[4] = {s1 * s2, s1 * c2, c1 * s2, c1 * c2};
    double sign = want_r[3] < 0 ? -1 : 1;
    for (int k = 0; k < 4; k++) {
      const cJSON *v = cJSON_GetArrayItem(q, k);
      CU_ASSERT(cJSON_IsNumber(v) && fabs(v->valuedouble - sign * want_r[k]) < 1e-5);
    }
  }
  cJSON_Delete(lines);
  t_proc_free(&p);
}

/* ---- registration ----------------------------------------------------------------------- */

static int suite_init(void) {
  old_sigpipe = signal(SIGPIPE, SIG_IGN); /* a child that exits before reading its stdin */
  if (t_daemon_start(&dmn, NULL) != 0)
    return -1;
  snprintf(port_env, sizeof port_env, "SCENED_PORT=%d", dmn.port);
  return 0;
}

static int suite_clean(void) {
  int status = t_daemon_stop(&dmn, SIGTERM, WAIT_MS);
  signal(SIGPIPE, old_sigpipe);
  return status == 0 ? 0 : -1;
}

int t_register_clients(void) {
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
      {"scenectl: result line and values", test_ctl_result_line},
      {"scenectl: error reply exits 1", test_ctl_error_exit},
      {"scenectl: connection errors exit 2", test_ctl_connect_errors},
      {"scenectl: --pipe", test_ctl_pipe},
      {"scenectl: subscribe", test_ctl_subscribe},
      {"scenectl: --help, help CMD and no command", test_ctl_help},
      {"library: b64 mode, matrices and frames to the bit", test_lib_b64},
      {"scenectl: --matrices b64 passes base64 through", test_ctl_b64},
      {"python client self-test", test_python_selftest},
      {"shell example", test_car_demo},
  };
  return T_ADD_SUITE("clients", suite_init, suite_clean, tests);
}

/* Integration tests of scenectl against the real daemon: result lines and value parsing, exit
 * codes, --pipe, subscribe (near regions included), --help and help CMD, and --matrices b64.
 * The prompt's lines, and "did you mean", are clients_scenectl_prompt's. */
#include "b64_fixtures.h"
#include "client_fixtures.h"
#include "daemon_fixtures.h"
#include "scn_client.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_char(const char *s, char c) {
  int n = 0;
  for (; *s; s++)
    n += *s == c;
  return n;
}

/* Element i of an array of numbers, -1 when there is no such number. */
static double item_num(const cJSON *a, int i) {
  const cJSON *v = cJSON_GetArrayItem(a, i);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

#define CTL(p, ...) ctl_run((p), NULL, NULL, 0, (const char *const[]){__VA_ARGS__, NULL})

/* ---- scenectl -------------------------------------------------------------------------------- */

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

  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
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
  snprintf(port_arg, sizeof port_arg, "%d", clients_daemon.port);
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
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
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
  snprintf(port_arg, sizeof port_arg, "%d", clients_daemon.port);
  const char *env_bad[] = {"SCENED_PORT=abc", NULL};
  CU_ASSERT_EQUAL(
      ctl_run(&p, env_bad, NULL, 0, (const char *const[]){"--port", port_arg, "ping", NULL}), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  t_proc_free(&p);
}

static void test_ctl_pipe(void) {
  enum { N = 5000, BAD = 3333 };
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
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
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
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
  /* No command with stdin not a terminal: the prompt's lines from it (clients_scenectl_prompt). */
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

/* ---- near regions --------------------------------------------------------------------------- */

/* True when the frame's "set" holds exactly the n entities of want, in any order. */
static bool sets_exactly(const cJSON *frame, const double *want, int n) {
  const cJSON *set = field(frame, "set");
  if (!cJSON_IsArray(set) || cJSON_GetArraySize(set) != n)
    return false;
  for (int i = 0; i < n; i++) {
    bool found = false;
    const cJSON *item;
    cJSON_ArrayForEach(item, set) found = found || t_resp_num(item, "e") == want[i];
    if (!found)
      return false;
  }
  return true;
}

static bool removes(const cJSON *frame, double e) {
  const cJSON *id;
  cJSON_ArrayForEach(id, field(frame, "removed")) if (cJSON_IsNumber(id) &&
                                                      id->valuedouble == e) return true;
  return false;
}

/* The full frame of "scenectl subscribe ARGS --frames 1", which must exit 0 with nothing on
 * stderr; NULL (reported) otherwise. */
static cJSON *ctl_first_frame(const char *const *args) {
  const char *argv[16] = {"subscribe"};
  int n = 1;
  for (; args[n - 1] && n < 13; n++)
    argv[n] = args[n - 1];
  argv[n++] = "--frames";
  argv[n++] = "1";
  argv[n] = NULL;
  t_proc p;
  int code = ctl_run(&p, NULL, NULL, 0, argv);
  cJSON *f = cJSON_Parse(text_str(&p.out));
  if (code != 0 || p.err.len || !t_resp_str_is(f, "event", "frame") ||
      !cJSON_IsTrue(field(f, "full"))) {
    fprintf(stderr, "  scenectl subscribe %s: exit %d, stdout %s, stderr %s\n", args[0], code,
            text_str(&p.out), text_str(&p.err));
    cJSON_Delete(f);
    f = NULL;
  }
  t_proc_free(&p);
  return f;
}

/* Waits until the subscriber has printed n lines; false when it ended or WAIT_MS passed. */
static bool ctl_lines(t_proc *p, int n) {
  for (long end = t_now_ms() + WAIT_MS; t_now_ms() < end;) {
    if (count_char(text_str(&p->out), '\n') >= n)
      return true;
    if (t_proc_pump(p, 10))
      return count_char(text_str(&p->out), '\n') >= n;
  }
  return false;
}

/* scenectl subscribe with a near region, in each way of writing it: frames while entities move
 * out of and into range, the JSON object and the short forms merged, and malformed values as
 * usage errors (exit 2, nothing sent) beside the daemon's refusals (exit 1). */
static void test_ctl_near(void) {
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64], wa[96], ce[64], obj[128];
  double center = make_world(c, world, sizeof world, 0, 0, 0);
  cJSON *r = call_ok(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"t\":[5,0,0]}", world);
  double a = t_resp_num(r, "entity");
  cJSON_Delete(r);
  r = call_ok(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"t\":[50,0,0]}", world);
  double b = t_resp_num(r, "entity");
  cJSON_Delete(r);
  CU_ASSERT_FATAL(center > 0 && a > 0 && b > 0);
  snprintf(wa, sizeof wa, "world=%s", world);
  snprintf(ce, sizeof ce, "near.entity=%.0f", center);

  /* The world bare, the region in short forms: the full frame, a leaving, an entering. */
  t_proc p;
  CU_ASSERT_FATAL(ctl_start(&p, (const char *const[]){"subscribe", world, ce, "near.radius=10",
                                                      "near.margin=2", "--frames", "3", NULL}));
  CU_ASSERT(ctl_lines(&p, 1));
  CU_ASSERT(call_fine(c,
                      "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,"
                      "\"t\":[20,0,0]}",
                      world, a));
  CU_ASSERT(ctl_lines(&p, 2));
  CU_ASSERT(call_fine(c,
                      "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,"
                      "\"t\":[3,0,0]}",
                      world, b));
  CU_ASSERT_EQUAL(t_proc_wait(&p, WAIT_MS), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  int n = 0;
  bool terminated;
  cJSON *lines = json_lines(text_str(&p.out), &n, &terminated);
  CU_ASSERT(n == 3 && terminated);
  const cJSON *full = cJSON_GetArrayItem(lines, 0), *left = cJSON_GetArrayItem(lines, 1),
              *came = cJSON_GetArrayItem(lines, 2);
  double sub = t_resp_num(full, "sub");
  CU_ASSERT(is_frame(full, sub, world, true) && sets_exactly(full, (double[]){center, a}, 2));
  CU_ASSERT(is_frame(left, sub, world, false) && removes(left, a) && sets_exactly(left, NULL, 0));
  CU_ASSERT(is_frame(came, sub, world, false) && sets_exactly(came, (double[]){b}, 1) &&
            cJSON_GetArraySize(field(came, "removed")) == 0);
  if (n != 3 || !sets_exactly(came, (double[]){b}, 1))
    t_report_text("near frames", text_str(&p.out));
  cJSON_Delete(lines);
  t_proc_free(&p);

  /* Now center at 0, a at 20, b at 3. The protocol's object, alone and with short forms. */
  snprintf(obj, sizeof obj, "near={\"entity\":%.0f,\"radius\":10}", center);
  cJSON *f = ctl_first_frame((const char *const[]){wa, obj, NULL});
  CU_ASSERT(sets_exactly(f, (double[]){center, b}, 2));
  cJSON_Delete(f);
  snprintf(obj, sizeof obj, "near={\"entity\":%.0f,\"radius\":100}", center);
  f = ctl_first_frame((const char *const[]){wa, obj, "near.radius=4", NULL});
  CU_ASSERT(sets_exactly(f, (double[]){center, b}, 2));
  cJSON_Delete(f);
  f = ctl_first_frame((const char *const[]){world, "near.point=20,0.5,0", "near.radius=1", NULL});
  CU_ASSERT(sets_exactly(f, (double[]){a}, 1));
  cJSON_Delete(f);
  f = ctl_first_frame((const char *const[]){world, "near.point=0,0,0", "near.radius=100",
                                            "near.bands=10:60,50:10", NULL});
  CU_ASSERT(sets_exactly(f, (double[]){center, a, b}, 3));
  cJSON_Delete(f);

  /* Malformed values: usage errors naming the argument, nothing on stdout. */
  static const char *const bad[] = {
      "near.point=1,2",  "near.point=1,2,x",  "near.point=1,2,3,4", "near.point=",
      "near.radius=ten", "near.radius=nan",   "near.entity=-3",     "near.margin=",
      "near.bands=10",   "near.bands=10:60,", "near.bands=a:1",     "near.colour=1",
      "near=5",          "near={\"radius\"",  "near=[1,2]"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CU_ASSERT_EQUAL(CTL(&p, "subscribe", world, ce, bad[i], "--frames", "1"), 2);
    CU_ASSERT(strstr(text_str(&p.err), bad[i]) != NULL);
    CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
    if (!strstr(text_str(&p.err), bad[i]))
      fprintf(stderr, "  %s: stderr %s\n", bad[i], text_str(&p.err));
    t_proc_free(&p);
  }
  /* Well formed but refused by the daemon: its error, exit 1. */
  CU_ASSERT_EQUAL(CTL(&p, "subscribe", world, ce, "near.radius=-1", "--frames", "1"), 1);
  CU_ASSERT(strncmp(text_str(&p.err), "BAD_REQUEST: ", 13) == 0);
  t_proc_free(&p);
  CU_ASSERT_EQUAL(
      CTL(&p, "subscribe", world, "near.entity=99999", "near.radius=1", "--frames", "1"), 1);
  CU_ASSERT(strncmp(text_str(&p.err), "NOT_FOUND: ", 11) == 0);
  t_proc_free(&p);
  /* --help tells of the forms. */
  CU_ASSERT_EQUAL(CTL(&p, "--help"), 0);
  CU_ASSERT(strstr(text_str(&p.out), "near.point=X,Y,Z") &&
            strstr(text_str(&p.out), "near.bands="));
  t_proc_free(&p);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

/* The local_trs of a transform.get answer as compact JSON (caller frees). */
static char *trs_text(const cJSON *r) {
  const cJSON *trs = cJSON_GetObjectItemCaseSensitive(r, "local_trs");
  char *s = trs ? cJSON_PrintUnformatted(trs) : NULL;
  return s ? s : strdup("(none)");
}

/* A key the command does not take: scenectl warns before sending, with the field meant, and
 * sends all the same, so the daemon's refusal decides (exit 1) and nothing changes. This is
 * the report of a misspelt partial that made a full set, turning a rotation to identity. */
static void test_ctl_unknown_key(void) {
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64], warg[96], earg[64];
  world_name(world, sizeof world);
  snprintf(warg, sizeof warg, "world=%s", world);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world));
  cJSON *r = call_ok(
      c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"r\":[0,0.7071068,0,0.7071068]}", world);
  double e = t_resp_num(r, "entity");
  snprintf(earg, sizeof earg, "entity=%.0f", e);
  cJSON_Delete(r);
  char get_line[256];
  snprintf(get_line, sizeof get_line,
           "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f,\"trs\":true}", world, e);
  r = call_ok(c, "%s", get_line);
  char *before = trs_text(r);
  cJSON_Delete(r);

  t_proc p;
  CU_ASSERT_EQUAL(CTL(&p, "transform.set_local", warg, earg, "partal=true", "t=[1,0,0]"), 1);
  CU_ASSERT_STRING_EQUAL(
      text_str(&p.err),
      "scenectl: warning: transform.set_local: unknown field \"partal\" (did you mean "
      "\"partial\"?)\n"
      "BAD_REQUEST: unknown field \"partal\" (did you mean \"partial\"?)\n");
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);
  r = call_ok(c, "%s", get_line);
  char *after = trs_text(r);
  cJSON_Delete(r);
  CU_ASSERT_STRING_EQUAL(after, before); /* the rotation stays */
  free(after);

  /* Every such key is named, a far one without a guess; what the command takes is not. */
  CU_ASSERT_EQUAL(CTL(&p, "ping", "id=3", "colour=red", "tokn=x"), 1);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "scenectl: warning: ping: unknown field \"colour\"\n"
                                           "scenectl: warning: ping: unknown field \"tokn\"\n"
                                           "BAD_REQUEST: unknown field \"colour\"\n");
  t_proc_free(&p);
  /* The near and packed short forms of subscribe make its "near" and "packed": taken. Elsewhere
   * they are keys like any other. */
  CU_ASSERT_EQUAL(CTL(&p, "subscribe", world, "near.radius=1", "pakced=0.5"), 1);
  CU_ASSERT_STRING_EQUAL(
      text_str(&p.err),
      "scenectl: warning: subscribe: unknown field \"pakced\" (did you mean \"packed\"?)\n"
      "BAD_REQUEST: unknown field \"pakced\" (did you mean \"packed\"?)\n");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(CTL(&p, "transform.get", warg, earg, "near.radius=1"), 1);
  const char *near_warning = "scenectl: warning: transform.get: unknown field \"near.radius\"\n";
  CU_ASSERT(strncmp(text_str(&p.err), near_warning, strlen(near_warning)) == 0);
  t_proc_free(&p);
  /* An unknown command: no warning, the daemon names it. */
  CU_ASSERT_EQUAL(CTL(&p, "no.such.command", "x=1"), 1);
  CU_ASSERT(strncmp(text_str(&p.err), "UNKNOWN_COMMAND: ", 17) == 0);
  t_proc_free(&p);
  /* Spelt right: no warning, and only t changes. */
  cJSON_Delete(ctl_ok(
      (const char *const[]){"transform.set_local", warg, earg, "partial=true", "t=[1,0,0]", NULL}));
  r = call_ok(c, "%s", get_line);
  after = trs_text(r);
  cJSON_Delete(r);
  CU_ASSERT_STRING_EQUAL(after, "{\"t\":[1,0,0],\"r\":[0,0.7071068,0,0.7071068],\"s\":[1,1,1]}");
  free(after);
  free(before);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_clients_scenectl(void) {
  static const t_test tests[] = {
      {"scenectl: result line and values", test_ctl_result_line},
      {"scenectl: error reply exits 1", test_ctl_error_exit},
      {"scenectl: warns of a key its command does not take", test_ctl_unknown_key},
      {"scenectl: connection errors exit 2", test_ctl_connect_errors},
      {"scenectl: --pipe", test_ctl_pipe},
      {"scenectl: subscribe", test_ctl_subscribe},
      {"scenectl: subscribe near a point or an entity", test_ctl_near},
      {"scenectl: --help, help CMD and no command", test_ctl_help},
      {"scenectl: --matrices b64 passes base64 through", test_ctl_b64},
  };
  return T_ADD_SUITE("clients_scenectl", clients_suite_init, clients_suite_clean, tests);
}

/* Integration tests of the daemon's configuration: authentication, the configured limits
 * (clients, worlds and transforms, output), the command line, and the HTTP operations port. */
#include "command_fixtures.h"
#include "daemon_fixtures.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* ---- authentication -------------------------------------------------------------------------- */

static void check_locked(t_client *c) {
  for (unsigned i = 0; i < scn_command_count; i++) {
    const char *name = scn_commands[i].name;
    if (!strcmp(name, "ping") || !strcmp(name, "hello"))
      continue;
    cJSON *r = t_client_call(c, "{\"cmd\":\"%s\",\"id\":%u}", name, i);
    bool good =
        r && !t_resp_ok(r) && !strcmp(t_resp_code(r), "UNAUTHORIZED") && t_resp_num(r, "id") == i;
    CU_ASSERT_TRUE(good);
    if (!good) {
      fprintf(stderr, "  %s before hello:\n", name);
      t_report("response", r);
    }
    cJSON_Delete(r);
  }
  ERR(c, "UNAUTHORIZED", "{\"cmd\":\"world.create\",\"world\":\"locked\"}");
  ERR(c, "UNAUTHORIZED", "{\"cmd\":\"entity.create\",\"count\":3}");
  ERR(c, "UNAUTHORIZED", "{\"cmd\":\"batch\",\"world\":\"x\",\"ops\":[]}");
  OKD(c, "{\"cmd\":\"ping\"}");
}

static void check_hello_ok(t_client *c, const char *token) {
  cJSON *r = OK(c, "{\"cmd\":\"hello\",\"token\":\"%s\"}", token);
  const cJSON *server = cJSON_GetObjectItemCaseSensitive(r, "server");
  CHECK(cJSON_IsString(server) && !strcmp(server->valuestring, "scened") &&
            t_resp_num(r, "protocol") == 1,
        r);
  cJSON_Delete(r);
}

static void test_auth(void) {
  t_daemon d;
  const char *args[] = {"--auth-token", "secret", NULL};
  if (!START(&d, args))
    return;
  t_client c, c2;
  if (CONNECT(&c, d.port)) {
    check_locked(&c);
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"wrong\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"secre\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"secrets\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"Secret\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":5}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":null}");
    check_locked(&c);
    check_hello_ok(&c, "secret");
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"authed\"}");
    TF0(&c, "authed");
    CU_ASSERT_EQUAL(listed_transforms(&c, "authed"), 1);
    CU_ASSERT_EQUAL(listed_transforms(&c, "locked"), -1);
    CU_ASSERT_EQUAL(info_num(&c, "entities"), 1);
    /* Authentication is per connection. */
    if (CONNECT(&c2, d.port)) {
      ERR(&c2, "UNAUTHORIZED", "{\"cmd\":\"world.list\"}");
      ERR(&c2, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"secret \"}");
      ERR(&c2, "UNAUTHORIZED", "{\"cmd\":\"transform.get\",\"world\":\"authed\",\"entity\":1}");
      check_hello_ok(&c2, "secret");
      OKD(&c2, "{\"cmd\":\"world.destroy\",\"world\":\"authed\"}");
      t_client_close(&c2);
    }
    OKD(&c, "{\"cmd\":\"world.list\"}");
    t_client_close(&c);
  }
  STOP_OK(&d, 10000);
}

static void test_auth_env(void) {
  t_daemon d;
  setenv("SCENED_AUTH_TOKEN", "from-env", 1);
  bool up = START(&d, NULL);
  unsetenv("SCENED_AUTH_TOKEN");
  if (!up)
    return;
  t_client c;
  if (CONNECT(&c, d.port)) {
    check_locked(&c);
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"secret\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\"}");
    check_locked(&c);
    check_hello_ok(&c, "from-env");
    OKD(&c, "{\"cmd\":\"world.list\"}");
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"e\"}");
    t_client_close(&c);
  }
  STOP_OK(&d, 10000);
}

/* ---- configured limits ----------------------------------------------------------------------- */

static void test_max_clients(void) {
  t_daemon d;
  const char *args[] = {"--max-clients", "2", NULL};
  if (!START(&d, args))
    return;
  t_client c1, c2, c3;
  bool ok1 = CONNECT(&c1, d.port), ok2 = CONNECT(&c2, d.port);
  if (ok1)
    OKD(&c1, "{\"cmd\":\"ping\"}");
  if (ok2)
    OKD(&c2, "{\"cmd\":\"ping\"}");
  /* The third gets one LIMIT line, unasked, and is closed. */
  if (CONNECT(&c3, d.port)) {
    cJSON *r = t_client_recv_json(&c3, WAIT_MS);
    CHECK(r && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ok")) &&
              !strcmp(t_resp_code(r), "LIMIT") && !t_resp_has(r, "id"),
          r);
    cJSON_Delete(r);
    CU_ASSERT_TRUE(t_client_closed(&c3, 3000));
    t_client_close(&c3);
  }
  if (ok2)
    OKD(&c2, "{\"cmd\":\"ping\"}");
  /* Once one leaves, a new connection is served. */
  if (ok1)
    t_client_close(&c1);
  bool served = false;
  long deadline = t_now_ms() + 5000;
  while (!served && t_now_ms() < deadline) {
    if (t_client_connect(&c3, d.port) != 0)
      break;
    cJSON *r = t_client_call(&c3, "{\"cmd\":\"ping\",\"id\":1}");
    served = t_resp_ok(r) && t_resp_num(r, "id") == 1;
    cJSON_Delete(r);
    t_client_close(&c3);
    if (!served)
      t_sleep_ms(20);
  }
  CU_ASSERT_TRUE(served);
  if (ok2) {
    OKD(&c2, "{\"cmd\":\"ping\"}");
    t_client_close(&c2);
  }
  STOP_OK(&d, 10000);
}

static void test_max_worlds_transforms(void) {
  t_daemon d;
  const char *args[] = {"--max-worlds", "2", "--max-transforms", "3", NULL};
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    return;
  new_world(&c, "w1");
  new_world(&c, "w2");
  ERR(&c, "LIMIT", "{\"cmd\":\"world.create\",\"world\":\"w3\"}");
  CU_ASSERT_EQUAL(listed_transforms(&c, "w3"), -1);
  CU_ASSERT_EQUAL(info_num(&c, "worlds"), 2);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"w1\"}");
  new_world(&c, "w3");
  ERR(&c, "LIMIT", "{\"cmd\":\"world.create\",\"world\":\"w1\"}");

  /* Three transforms per world. */
  unsigned long long t1 = TF0(&c, "w2");
  TF0(&c, "w2");
  unsigned long long t3 = TF(&c, "w2", "\"parent\":%llu", t1);
  double ents = info_num(&c, "entities");
  unsigned long long spare = new_entity(&c);
  ERR(&c, "LIMIT", "{\"cmd\":\"transform.create\",\"world\":\"w2\"}");
  ERR(&c, "LIMIT", "{\"cmd\":\"transform.create\",\"world\":\"w2\",\"entity\":%llu}", spare);
  ERR(&c, "LIMIT",
      "{\"cmd\":\"batch\",\"world\":\"w2\",\"ops\":[{\"cmd\":\"transform.set_local\",\"entity\":%"
      "llu,"
      "\"t\":[1,1,1]},{\"cmd\":\"transform.create\",\"entity\":%llu}]}",
      t1, spare);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents + 1);
  CU_ASSERT_EQUAL(listed_transforms(&c, "w2"), 3);
  float m[16];
  CU_ASSERT_TRUE(matrix(&c, "w2", t1, "local", m));
  CU_ASSERT_EQUAL(memcmp(m, IDENTITY, sizeof m), 0);
  /* The limit is per world; a freed place can be used again. */
  CU_ASSERT_EQUAL(TF(&c, "w3", "\"entity\":%llu", spare), spare);
  TF0(&c, "w3");
  TF0(&c, "w3");
  ERR(&c, "LIMIT", "{\"cmd\":\"transform.create\",\"world\":\"w3\"}");
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"w2\",\"entity\":%llu}", t3);
  CU_ASSERT_EQUAL(TF(&c, "w2", "\"entity\":%llu", spare), spare);
  CU_ASSERT_EQUAL(listed_transforms(&c, "w2"), 3);
  t_client_close(&c);
  STOP_OK(&d, 10000);
}

/* A client whose responses wait unread beyond --output-limit gets LIMIT for each request
 * until it reads, in order, and a refused command changes nothing. */
static void test_output_limit(void) {
  t_daemon d;
  const char *args[] = {"--output-limit", "4096", NULL};
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    return;
  new_world(&c, "w");
  unsigned long long t = TF(&c, "w", "\"t\":[1,2,3]");
  enum { GETS = 400 };
  text all = {0};
  for (int i = 1; i <= GETS; i++)
    text_addf(&all, "{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":%llu,\"id\":%d}\n", t,
              i);
  text_addf(&all,
            "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,"
            "\"t\":[9,9,9],\"id\":%d}\n",
            t, GETS + 1);
  CU_ASSERT_EQUAL_FATAL(t_client_send_raw(&c, all.s, all.len), 0);
  text_free(&all);
  int ok = 0, limited = 0, other = 0;
  for (int i = 1; i <= GETS + 1; i++) {
    cJSON *r = t_client_recv_json(&c, WAIT_MS);
    if (!r) {
      CU_FAIL("a pipelined request got no response");
      break;
    }
    CU_ASSERT_EQUAL(t_resp_num(r, "id"), i);
    if (t_resp_ok(r))
      ok++;
    else if (strcmp(t_resp_code(r), "LIMIT") == 0)
      limited++;
    else
      other++;
    if (i == GETS + 1)
      CU_ASSERT_STRING_EQUAL(t_resp_code(r), "LIMIT"); /* still over when the set came */
    cJSON_Delete(r);
  }
  CU_ASSERT_TRUE(ok > 0);
  CU_ASSERT_TRUE(limited > 0);
  CU_ASSERT_EQUAL(other, 0);
  /* Read, the connection works again, and the refused set changed nothing. */
  float m[16];
  CU_ASSERT_TRUE(matrix(&c, "w", t, "local", m));
  CU_ASSERT_TRUE(m[12] == 1 && m[13] == 2 && m[14] == 3);
  /* One response bigger than the limit is refused as well, and changes nothing. */
  double ents = info_num(&c, "entities");
  ERR(&c, "LIMIT", "{\"cmd\":\"entity.create\",\"count\":1000}");
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents);
  text batch = {0};
  text_addf(&batch,
            "{\"cmd\":\"batch\",\"world\":\"w\",\"ops\":["
            "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"t\":[7,7,7]}",
            t);
  for (int i = 0; i < 40; i++)
    text_addf(&batch, ",{\"cmd\":\"transform.get\",\"entity\":%llu}", t);
  text_addf(&batch, "]}");
  ERR(&c, "LIMIT", "%s", batch.s);
  text_free(&batch);
  CU_ASSERT_TRUE(matrix(&c, "w", t, "local", m));
  CU_ASSERT_TRUE(m[12] == 1 && m[13] == 2 && m[14] == 3);
  for (int i = 0; i < 1500; i++) /* about 6 KB of ids */
    TF(&c, "w", "\"parent\":%llu", t);
  ERR(&c, "LIMIT", "{\"cmd\":\"transform.children\",\"world\":\"w\",\"entity\":%llu}", t);
  OKD(&c, "{\"cmd\":\"entity.create\",\"count\":10}");
  t_client_close(&c);
  STOP_OK(&d, 10000);
}

/* ---- the command line ------------------------------------------------------------------------ */

/* Runs the daemon binary with args to its end (killed after 6 s), stdout and stderr collected
 * in p (t_proc_free); its exit code as from t_proc_wait. */
static int run_bin(t_proc *p, const char *const *args) {
  if (!t_proc_start(p, t_daemon_bin(), args, NULL, NULL, 0))
    return -1;
  return t_proc_wait(p, 6000);
}

static void test_command_line(void) {
  t_proc p;
  const char *version[] = {"--version", NULL};
  CU_ASSERT_EQUAL(run_bin(&p, version), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.out), SCN_VERSION));
  t_proc_free(&p);
  const char *help[] = {"--help", NULL};
  CU_ASSERT_EQUAL(run_bin(&p, help), 0);
  t_proc_free(&p);
  /* --version and --help answer even when the environment holds a bad setting */
  setenv("SCENED_TICK_HZ", "0", 1);
  CU_ASSERT_TRUE(run_bin(&p, version) == 0 && strstr(text_str(&p.out), SCN_VERSION));
  t_proc_free(&p);
  CU_ASSERT_EQUAL(run_bin(&p, help), 0);
  unsetenv("SCENED_TICK_HZ");
  const char *out = text_str(&p.out);
  static const char *const flags[] = {
      "--listen",      "--http",       "--tick-hz",        "--auth-token",   "--max-line",
      "--max-clients", "--max-worlds", "--max-transforms", "--output-limit", "--version"};
  for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
    if (!strstr(out, flags[i])) {
      CU_FAIL("--help does not mention a flag");
      fprintf(stderr, "  missing %s\n", flags[i]);
    }
  t_proc_free(&p);

  /* Bad flags and values: one line on stderr, exit 2. Ports are ephemeral in case a bad
   * value were taken. */
  static const char *const bad[][3] = {
      {"--bogus", NULL, NULL},
      {"--max-line", "abc", NULL},
      {"--listen", "nope", NULL},
      {"--max-clients", "0", NULL},
      {"--tick-hz", "0", NULL},
      {"--max-worlds", "-1", NULL},
      {"--max-line", NULL, NULL},
      {"stray", NULL, NULL},
      {"--max-line=12x", NULL, NULL},
      {"--listen", "127.0.0.1:99999", NULL},
      {"--max-transforms", "1.5", NULL},
      {"--http", "nohost", NULL},
      {"-x", NULL, NULL},
      {"--output-limit", "lots", NULL},
      {"--listen", "nowhere.invalid:0", NULL},
      {"--http", "nowhere.invalid:0", NULL},
      {"--listen", ":0", NULL},
      {"--auth-token", "", NULL},
      {"--data", "/dev/null", NULL},
      {"--data", "/dev/null/sub", NULL},
      {"--auth-token", "-h", "--bogus"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const char *args[8] = {"--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"};
    int n = 4;
    for (int k = 0; k < 3 && bad[i][k]; k++)
      args[n++] = bad[i][k];
    args[n] = NULL;
    int code = run_bin(&p, args);
    const char *err = text_str(&p.err);
    size_t len = strlen(err);
    const char *nl = strchr(err, '\n');
    bool one_line = len > 1 && nl == err + len - 1;
    bool good = code == 2 && one_line && p.out.len == 0;
    CU_ASSERT_TRUE(good);
    if (!good)
      fprintf(stderr, "  scened %s %s: exit %d, stderr \"%s\", stdout \"%.100s\"\n", bad[i][0],
              bad[i][1] ? bad[i][1] : "", code, err, text_str(&p.out));
    t_proc_free(&p);
  }
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

static void test_http(void) {
  int port = commands_daemon.http_port;
  CU_ASSERT_TRUE_FATAL(port > 0);
  char *resp;
  CU_ASSERT_EQUAL(t_http_get(port, "/healthz", &resp), 200);
  free(resp);
  CU_ASSERT_EQUAL(t_http_get(port, "/readyz", &resp), 200);
  free(resp);
  CU_ASSERT_EQUAL(t_http_get(port, "/metrics", &resp), 200);
  CU_ASSERT_PTR_NOT_NULL(strstr(resp, "\n# TYPE "));
  CU_ASSERT_PTR_NOT_NULL(strstr(resp, "# TYPE scened_commands_total counter\n"));
  double before = page_metric(resp, "scened_commands_total{command=\"ping\"}");
  CU_ASSERT_TRUE(before >= 0);
  free(resp);
  t_client c;
  if (CONNECT(&c, commands_daemon.port)) {
    for (int i = 0; i < 3; i++)
      OKD(&c, "{\"cmd\":\"ping\"}");
    t_client_close(&c);
  }
  CU_ASSERT_EQUAL(t_http_get(port, "/metrics", &resp), 200);
  CU_ASSERT_EQUAL(page_metric(resp, "scened_commands_total{command=\"ping\"}"), before + 3);
  free(resp);
  CU_ASSERT_EQUAL(t_http_get(port, "/nope", &resp), 404);
  free(resp);
  CU_ASSERT_EQUAL(t_http_get(port, "/metrics/x", &resp), 404);
  free(resp);
  /* Two requests on one connection. */
  bool closed;
  int st = t_http_raw(port,
                      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                      &resp, &closed);
  CU_ASSERT_EQUAL(st, 200);
  const char *second = strstr(resp + 1, "HTTP/1.1 200");
  CU_ASSERT_PTR_NOT_NULL(second);
  CU_ASSERT_TRUE(closed);
  free(resp);
  /* Malformed requests: 400 and a close. */
  static const char *const bad[] = {"BLAH\r\n\r\n", "GET / HTTP/1.1\r\nHost x\r\n\r\n",
                                    "\x01\x02\x03 garbage\r\n\r\n", "GET /healthz HTTP/9\r\n\r\n"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    st = t_http_raw(port, bad[i], &resp, &closed);
    CU_ASSERT_EQUAL(st, 400);
    CU_ASSERT_TRUE(closed);
    if (st != 400 || !closed)
      fprintf(stderr, "  malformed http request %zu: %.200s\n", i, resp);
    free(resp);
  }
  /* The protocol port is unaffected. */
  if (CONNECT(&c, commands_daemon.port)) {
    OKD(&c, "{\"cmd\":\"ping\"}");
    t_client_close(&c);
  }
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_daemon_commands_config(void) {
  static const t_test tests[] = {
      {"auth token", test_auth},
      {"auth token from the environment", test_auth_env},
      {"--max-clients", test_max_clients},
      {"--max-worlds and --max-transforms", test_max_worlds_transforms},
      {"--output-limit: LIMIT while responses wait unread", test_output_limit},
      {"command line", test_command_line},
      {"http: healthz, readyz, metrics, 404, 400", test_http},
  };
  return T_ADD_SUITE("daemon_commands_config", commands_suite_init, commands_suite_clean, tests);
}

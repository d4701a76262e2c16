/* Operating the daemon: /metrics accepted by promtool, info carrying the same figures, the
 * per-world stream figures, configuration precedence (flag > environment > file > default),
 * logfmt logs that never show the token, and signals (SIGTERM drains and exits 0; a second
 * signal exits at once). */
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* GET path from the daemon's HTTP port; the body (caller frees) or NULL. */
static char *http_body(int port, const char *path, int *status) {
  char *resp;
  *status = t_http_get(port, path, &resp);
  const char *body = *status ? strstr(resp, "\r\n\r\n") : NULL;
  char *out = *status ? strdup(body ? body + 4 : "") : NULL;
  free(resp);
  return out;
}

static bool have(const char *tool) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
  return system(cmd) == 0;
}

static void test_metrics_promtool(void) {
  t_daemon d;
  t_client c;
  if (!START_CONNECTED(&d, &c, NULL))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"m\"}");
  ERR(&c, "UNKNOWN_COMMAND", "{\"cmd\":\"nope\"}");
  int status = 0;
  char *page = http_body(d.http_port, "/metrics", &status);
  CU_ASSERT_EQUAL(status, 200);
  CU_ASSERT_PTR_NOT_NULL_FATAL(page);
  CU_ASSERT_PTR_NOT_NULL(strstr(page, "scened_command_errors_total{code=\"UNKNOWN_COMMAND\"} 1"));
  CU_ASSERT_PTR_NOT_NULL(strstr(page, "scened_world_transforms{world=\"m\"} 0"));
  CU_ASSERT_PTR_NOT_NULL(strstr(page, "scened_command_duration_seconds_bucket{le=\"+Inf\"}"));
  if (have("promtool")) {
    char path[] = "/tmp/scened-metrics-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(write(fd, page, strlen(page)) == (ssize_t)strlen(page));
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s > %s.out 2>&1", path, path);
    int rc = system(cmd);
    CU_ASSERT_EQUAL(rc, 0); /* exit 0 and nothing printed: no warning either */
    snprintf(cmd, sizeof cmd, "test ! -s %s.out", path);
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s.out", path);
    unlink(cmd);
    unlink(path);
  } else {
    printf("  (promtool not installed: the exposition format was not checked by it)\n");
  }
  free(page);
  /* info has the same figures under "metrics", by the same names */
  cJSON *info = OK(&c, "{\"cmd\":\"info\"}");
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(info, "metrics");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  const cJSON *errors = cJSON_GetObjectItemCaseSensitive(m, "command_errors_total");
  CU_ASSERT_EQUAL(cJSON_GetObjectItemCaseSensitive(errors, "UNKNOWN_COMMAND")->valuedouble, 1);
  CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItemCaseSensitive(m, "tick_duration_seconds"));
  CU_ASSERT_EQUAL(t_resp_num(info, "worlds"), 1);
  cJSON_Delete(info);
  page = http_body(d.http_port, "/readyz", &status);
  CU_ASSERT_EQUAL(status, 200);
  free(page);
  t_client_close(&c);
  STOP_OK(&d, 5000);
}

/* A figure on the /metrics page now (-1 when it is not there). */
static double metric_now(const t_daemon *d, const char *name) {
  int status = 0;
  char *page = http_body(d->http_port, "/metrics", &status);
  double v = page ? page_metric(page, name) : -1;
  free(page);
  return v;
}

/* Frames read on c until nothing came for quiet_ms (events kept on c count too). */
static int frames_read(t_client *c, long quiet_ms) {
  int n = 0;
  for (cJSON *ev; (ev = t_next_event(c, quiet_ms));) {
    n += t_resp_str_is(ev, "event", "frame");
    cJSON_Delete(ev);
  }
  return n;
}

#define SUBS_BUSY "scened_world_subscribers{world=\"busy\"}"
#define FRAMES_BUSY "scened_world_frames_sent_total{world=\"busy\"}"

/* Per world: the subscriptions open on it (a gauge) and the frames queued to its subscribers
 * (a counter: rate() of it is the world's frames per second), equal to what they read; a
 * world without subscribers shows 0; a destroyed world's series go, and a new world of the
 * same name starts from 0; past 100 worlds there are none. */
static void test_metrics_per_world(void) {
  t_daemon d;
  t_client c, a, b;
  if (!START_CONNECTED(&d, &c, NULL))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"busy\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"quiet\"}");
  cJSON *r = OK(&c, "{\"cmd\":\"transform.create\",\"world\":\"busy\"}");
  unsigned long long e = t_resp_id(r, "entity");
  cJSON_Delete(r);
  CONNECT_FATAL(&a, d.port);
  CONNECT_FATAL(&b, d.port);
  t_client_keep_events(&a);
  t_client_keep_events(&b);
  OKD(&a, "{\"cmd\":\"subscribe\",\"world\":\"busy\"}");
  r = OK(&b, "{\"cmd\":\"subscribe\",\"world\":\"busy\"}");
  double sub_b = t_resp_num(r, "sub");
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(metric_now(&d, SUBS_BUSY), 2);
  CU_ASSERT_EQUAL(metric_now(&d, "scened_world_subscribers{world=\"quiet\"}"), 0);
  /* Moves, each read back (which flushes it into the next tick's frame), until both
   * subscribers have had a few dozen frames. */
  int got_a = 0, got_b = 0;
  long deadline = t_now_ms() + 10000;
  for (int i = 1; (got_a < 30 || got_b < 30) && t_now_ms() < deadline; i++) {
    OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"busy\",\"entity\":%llu,\"t\":[%d,0,0]}",
        e, i);
    got_a += frames_read(&a, 5);
    got_b += frames_read(&b, 5);
  }
  got_a += frames_read(&a, 300);
  got_b += frames_read(&b, 300);
  CU_ASSERT(got_a >= 30 && got_b >= 30);
  double frames = metric_now(&d, FRAMES_BUSY);
  CU_ASSERT_EQUAL(frames, got_a + got_b);
  CU_ASSERT_EQUAL(metric_now(&d, "scened_frames_sent_total"), frames);
  CU_ASSERT_EQUAL(metric_now(&d, "scened_world_frames_sent_total{world=\"quiet\"}"), 0);
  /* info names them too */
  r = OK(&c, "{\"cmd\":\"info\"}");
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "metrics");
  CHECK(t_resp_num(cJSON_GetObjectItemCaseSensitive(m, "world_frames_sent_total"), "busy") ==
                frames &&
            t_resp_num(cJSON_GetObjectItemCaseSensitive(m, "world_subscribers"), "busy") == 2,
        r);
  cJSON_Delete(r);
  /* An unsubscription lowers the gauge; the counter keeps what was sent. */
  OKD(&b, "{\"cmd\":\"unsubscribe\",\"sub\":%g}", sub_b);
  CU_ASSERT_EQUAL(metric_now(&d, SUBS_BUSY), 1);
  CU_ASSERT_EQUAL(metric_now(&d, FRAMES_BUSY), frames);
  /* The world ends: its series go; a new world by its name starts from nothing. */
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"busy\"}");
  CU_ASSERT_EQUAL(metric_now(&d, SUBS_BUSY), -1);
  CU_ASSERT_EQUAL(metric_now(&d, FRAMES_BUSY), -1);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"busy\"}");
  CU_ASSERT_EQUAL(metric_now(&d, SUBS_BUSY), 0);
  CU_ASSERT_EQUAL(metric_now(&d, FRAMES_BUSY), 0);
  /* Cardinality: past 100 worlds, no per-world series at all. */
  for (int i = 0; i < 99; i++)
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w%d\"}", i);
  int status = 0;
  char *page = http_body(d.http_port, "/metrics", &status);
  CU_ASSERT_PTR_NOT_NULL_FATAL(page);
  CU_ASSERT_PTR_NULL(strstr(page, "scened_world_subscribers{"));
  CU_ASSERT_PTR_NULL(strstr(page, "scened_world_frames_sent_total{"));
  free(page);
  t_client_close(&a);
  t_client_close(&b);
  t_client_close(&c);
  STOP_OK(&d, 5000);
}

/* The tick rate the daemon reports in info. */
static double tick_hz_of(const t_daemon *d) {
  t_client c;
  if (t_client_connect(&c, d->port) != 0)
    return -1;
  cJSON *info = t_client_call(&c, "{\"cmd\":\"info\"}");
  double hz = t_resp_num(info, "tick_hz");
  cJSON_Delete(info);
  t_client_close(&c);
  return hz;
}

static void test_config_precedence(void) {
  char path[] = "/tmp/scened-conf-XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  const char *text = "# settings\ntick_hz = 30\nlog-level = \"warn\"\n";
  CU_ASSERT(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
  t_daemon d;
  const char *file_only[] = {"--config", path, NULL};
  if (!START(&d, file_only))
    return;
  CU_ASSERT_EQUAL(tick_hz_of(&d), 30); /* file > default */
  t_daemon_stop(&d, SIGTERM, 5000);
  setenv("SCENED_TICK_HZ", "40", 1);
  bool up = START(&d, file_only);
  if (up) {
    CU_ASSERT_EQUAL(tick_hz_of(&d), 40); /* environment > file */
    t_daemon_stop(&d, SIGTERM, 5000);
  }
  const char *with_flag[] = {"--config", path, "--tick-hz", "50", NULL};
  up = up && START(&d, with_flag);
  if (up) {
    CU_ASSERT_EQUAL(tick_hz_of(&d), 50); /* flag > environment */
    t_daemon_stop(&d, SIGTERM, 5000);
  }
  unsetenv("SCENED_TICK_HZ");
  if (!up)
    return;
  /* an invalid value in the file names the file, the line and the setting; exit 2 */
  FILE *f = fopen(path, "w");
  fputs("tick_hz = 30\nmax-clients = lots\n", f);
  fclose(f);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "\"$SCENED_BIN\" --config %s 2>%s.err; echo $? > %s.rc", path, path,
           path);
  CU_ASSERT_EQUAL(system(cmd), 0);
  snprintf(cmd, sizeof cmd,
           "grep -q '^2$' %s.rc && grep -q '%s:2' %s.err && grep -q max-clients %s.err && test "
           "$(wc -l < %s.err) -eq 1",
           path, path, path, path, path);
  CU_ASSERT_EQUAL(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "rm -f %s %s.err %s.rc", path, path, path);
  CU_ASSERT_EQUAL(system(cmd), 0);
}

static void test_logs(void) {
  t_daemon d;
  const char *args[] = {"--auth-token", "s3cret-token", "--log-level", "debug", NULL};
  t_client c;
  if (!START_CONNECTED(&d, &c, args))
    return;
  ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"wrong\"}");
  OKD(&c, "{\"cmd\":\"hello\",\"token\":\"s3cret-token\"}");
  t_client_close(&c);
  usleep(100000);
  STOP_OK(&d, 5000);
  CU_ASSERT_TRUE(t_daemon_log_contains(&d, "level=info msg=\"started\""));
  CU_ASSERT_TRUE(t_daemon_log_contains(&d, "level=debug msg=\"connection opened\""));
  CU_ASSERT_TRUE(t_daemon_log_contains(&d, "level=warn msg=\"authentication failed\""));
  CU_ASSERT_TRUE(t_daemon_log_contains(&d, "level=info msg=\"stopped\""));
  CU_ASSERT_FALSE(t_daemon_log_contains(&d, "s3cret-token"));
  /* every line is logfmt: ts=... level=... msg="..." */
  char cmd[512];
  snprintf(
      cmd, sizeof cmd,
      "grep -v -E '^ts=[0-9T:.-]+Z level=(debug|info|warn|error) msg=\"[^\"]*\"' %s | grep -q .",
      d.log_path);
  CU_ASSERT_NOT_EQUAL(system(cmd), 0);
}

static void test_signals(void) {
  t_daemon d;
  t_client c;
  if (!START_CONNECTED(&d, &c, NULL))
    return;
  /* requests already sent are answered before the daemon exits */
  char batch[64 * 200];
  size_t len = 0;
  for (int i = 0; i < 200; i++)
    len += (size_t)snprintf(batch + len, sizeof batch - len, "{\"cmd\":\"ping\",\"id\":%d}\n", i);
  CU_ASSERT_EQUAL(t_client_send_raw(&c, batch, len), 0);
  usleep(50000);
  kill(d.pid, SIGINT);
  int answered = 0;
  cJSON *r;
  while ((r = t_client_recv_json(&c, 3000))) {
    answered += t_resp_ok(r);
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(answered, 200);
  t_client_close(&c);
  int st = t_daemon_wait(&d, 6000); /* no second signal: that one would exit at once */
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* a second signal while it drains a stuck client exits at once */
  if (!START_CONNECTED(&d, &c, NULL))
    return;
  for (int i = 0; i < 64; i++) /* many replies the client never reads */
    t_client_send_raw(&c, "{\"cmd\":\"info\"}\n", 15);
  usleep(100000);
  kill(d.pid, SIGTERM);
  usleep(100000);
  kill(d.pid, SIGTERM);
  st = t_daemon_wait(&d, 2000);
  CU_ASSERT(st != -1); /* it left at once, without needing a kill */
  t_client_close(&c);
}

int t_register_daemon_ops(void) {
  static const t_test tests[] = {
      {"metrics: promtool, info, readyz", test_metrics_promtool},
      {"metrics: subscriptions and frames per world", test_metrics_per_world},
      {"config precedence", test_config_precedence},
      {"logfmt logs", test_logs},
      {"signals", test_signals},
  };
  return T_ADD_SUITE("daemon_ops", NULL, NULL, tests);
}

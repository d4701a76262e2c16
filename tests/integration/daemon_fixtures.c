#include "daemon_fixtures.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static void assert_at(const char *file, int line, bool cond, const char *what, bool fatal) {
  CU_assertImplementation(cond ? CU_TRUE : CU_FALSE, (unsigned)line, what, file, "",
                          fatal ? CU_TRUE : CU_FALSE);
}

void t_report(const char *what, const cJSON *j) {
  char *s = j ? cJSON_PrintUnformatted(j) : NULL;
  t_report_text(what, s);
  free(s);
}

void t_report_text(const char *what, const char *text) {
  fprintf(stderr, "  %s: %.600s\n", what, text ? text : "(nothing)");
}

bool t_check_at(const char *file, int line, bool cond, const char *what, const cJSON *r) {
  assert_at(file, line, cond, what, false);
  if (!cond)
    t_report(what, r);
  return cond;
}

/* ---- requests and responses -------------------------------------------------------------- */

cJSON *t_recv_object(t_client *c, long timeout_ms) {
  char *line = t_client_recv(c, (int)(timeout_ms > 0 ? timeout_ms : 0));
  if (!line)
    return NULL;
  cJSON *j = cJSON_Parse(line);
  if (!cJSON_IsObject(j)) {
    CU_FAIL("a received line is not a JSON object");
    t_report_text("line", line);
    cJSON_Delete(j);
    j = NULL;
  }
  free(line);
  return j;
}

/* The response to request, read after the events before it (kept or dropped). */
static cJSON *response(const char *file, int line, t_client *c, const char *request) {
  long deadline = t_now_ms() + T_RESPONSE_MS;
  for (;;) {
    cJSON *j = t_recv_object(c, deadline - t_now_ms());
    if (!j) {
      assert_at(file, line, false, "a response came", false);
      t_report_text("no response to", request);
      return NULL;
    }
    if (!t_resp_has(j, "event")) {
      t_check_at(file, line, t_resp_has(j, "ok"), "a response carries \"ok\"", j);
      return j;
    }
    t_check_at(file, line, !t_resp_has(j, "ok"), "an event carries no \"ok\"", j);
    if (c->events)
      cJSON_AddItemToArray(c->events, j);
    else
      cJSON_Delete(j);
  }
}

/* Sends the request and reads its response; *request gets the line (caller frees). */
static cJSON *vcall(const char *file, int line, t_client *c, char **request, const char *fmt,
                    va_list ap) {
  text req = {0};
  text_vaddf(&req, fmt, ap);
  *request = req.s ? req.s : strdup("");
  if (t_client_send(c, *request) != 0) {
    assert_at(file, line, false, "the request was sent", false);
    t_report_text("not sent", *request);
    return NULL;
  }
  return response(file, line, c, *request);
}

cJSON *t_call_at(const char *file, int line, t_client *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *request;
  cJSON *r = vcall(file, line, c, &request, fmt, ap);
  va_end(ap);
  free(request);
  return r;
}

cJSON *t_ok_at(const char *file, int line, t_client *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *request;
  cJSON *r = vcall(file, line, c, &request, fmt, ap);
  va_end(ap);
  bool good = t_resp_ok(r);
  assert_at(file, line, good, "request answered ok", false);
  if (!good) {
    t_report_text("request", request);
    t_report("response", r);
  }
  free(request);
  return r;
}

bool t_err_at(const char *file, int line, t_client *c, const char *code, char **message,
              const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *request;
  cJSON *r = vcall(file, line, c, &request, fmt, ap);
  va_end(ap);
  const cJSON *e = r ? cJSON_GetObjectItemCaseSensitive(r, "error") : NULL;
  const char *msg = t_resp_str(e, "message");
  bool failed = r && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ok"));
  bool coded = strcmp(t_resp_code(r), code) == 0 && msg[0] != '\0';
  char what[96];
  snprintf(what, sizeof what, "request fails with %s and a message", code);
  assert_at(file, line, failed, "request fails", false);
  assert_at(file, line, coded, what, false);
  if (!failed || !coded) {
    fprintf(stderr, "  request: %.600s (expected %s)\n", request, code);
    t_report("response", r);
  }
  if (message)
    *message = strdup(msg);
  free(request);
  cJSON_Delete(r);
  return failed && coded;
}

void t_pipeline_ok_at(const char *file, int line, t_client *c, const char *lines, int count) {
  assert_at(file, line, t_client_send_raw(c, lines, strlen(lines)) == 0, "requests sent", true);
  for (int i = 0; i < count; i++) {
    cJSON *r = response(file, line, c, lines);
    t_check_at(file, line, t_resp_ok(r), "pipelined request answered ok", r);
    cJSON_Delete(r);
  }
}

/* ---- events --------------------------------------------------------------------------------- */

cJSON *t_next_event(t_client *c, long timeout_ms) {
  if (cJSON_GetArraySize(c->events) > 0)
    return cJSON_DetachItemFromArray(c->events, 0);
  cJSON *j = t_recv_object(c, timeout_ms);
  if (j && !t_resp_has(j, "event")) {
    CU_FAIL("a response arrived where only events were expected");
    t_report("unexpected", j);
  }
  if (j)
    CU_ASSERT_FALSE(t_resp_has(j, "ok"));
  return j;
}

void t_quiet_at(const char *file, int line, t_client *c, long ms) {
  cJSON *kept = cJSON_GetArraySize(c->events) > 0 ? cJSON_DetachItemFromArray(c->events, 0) : NULL;
  char *got = kept ? NULL : t_client_recv(c, (int)ms);
  assert_at(file, line, !kept && !got, "nothing more arrives", false);
  if (kept)
    t_report("an event was waiting", kept);
  if (got)
    t_report_text("unexpected line", got);
  cJSON_Delete(kept);
  free(got);
}

/* ---- daemons and connections ------------------------------------------------------------- */

long t_tick_now_at(const char *file, int line, t_client *c, const char *w, unsigned long long e) {
  cJSON *r =
      t_ok_at(file, line, c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", w, e);
  long t = r ? (long)t_resp_num(r, "tick") : -1;
  cJSON_Delete(r);
  return t;
}

long t_tick_past_at(const char *file, int line, t_client *c, const char *w, unsigned long long e,
                    long t) {
  long deadline = t_now_ms() + 10000, now;
  while ((now = t_tick_now_at(file, line, c, w, e)) <= t && now >= 0 && t_now_ms() < deadline)
    t_sleep_ms(2);
  assert_at(file, line, now > t, "the world ran past the tick", false);
  return now;
}

bool t_start_at(const char *file, int line, t_daemon *d, const char *const *args) {
  bool up = t_daemon_start(d, args) == 0;
  assert_at(file, line, up, "the daemon started", false);
  if (!up) {
    fprintf(stderr, "  scened");
    for (int i = 0; args && args[i]; i++)
      fprintf(stderr, " %s", args[i]);
    char *log = t_read_file(d->log_path);
    fprintf(stderr, " did not start; its log:\n%.2000s\n", log ? log : "(none)");
    free(log);
  }
  return up;
}

bool t_start_connected_at(const char *file, int line, t_daemon *d, t_client *c,
                          const char *const *args) {
  if (!t_start_at(file, line, d, args))
    return false;
  if (t_connect_at(file, line, c, d->port, false))
    return true;
  t_daemon_stop(d, SIGKILL, 2000);
  return false;
}

void t_stop_ok_at(const char *file, int line, t_daemon *d, int timeout_ms) {
  int status = t_daemon_stop(d, SIGTERM, timeout_ms);
  bool clean = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  assert_at(file, line, clean, "the daemon exited 0 on SIGTERM", false);
  if (!clean)
    fprintf(stderr, "  SIGTERM: status %d (-1: killed after %d ms); log %s\n", status, timeout_ms,
            d->log_path);
}

int t_suite_daemon_stop(t_daemon *d, int timeout_ms) {
  int status = t_daemon_stop(d, SIGTERM, timeout_ms);
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

bool t_connect_at(const char *file, int line, t_client *c, int port, bool fatal) {
  bool ok = t_client_connect(c, port) == 0;
  if (!ok) /* (before the assertion, which may end the test) */
    fprintf(stderr, "  connecting to 127.0.0.1:%d: %s\n", port, strerror(errno));
  assert_at(file, line, ok, "connected", fatal);
  return ok;
}

bool t_connect_tls_at(const char *file, int line, t_client *c, int port, const t_tls_files *tls) {
  char err[256];
  bool ok = t_client_connect_tls(c, port, tls, err, sizeof err) == 0;
  assert_at(file, line, ok, "connected over TLS", false);
  if (!ok)
    fprintf(stderr, "  TLS connection to port %d: %s\n", port, err);
  return ok;
}

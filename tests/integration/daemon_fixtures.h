/* What the integration suites share on top of the harness, as CUnit assertions: each is
 * counted at the caller's file and line (the macros pass them), and a failure prints the
 * request and the response. Requests that must be answered ok or fail with a code, events and
 * silence with deadlines, daemons started and stopped (a suite's shared one too), connections
 * opened. */
#ifndef T_DAEMON_FIXTURES_H
#define T_DAEMON_FIXTURES_H

#include "harness.h"

#include <CUnit/CUnit.h>
#include <stdbool.h>

/* How long a response that must come is waited for. */
#define T_RESPONSE_MS 10000

/* Prints what and j (compact JSON, the first 600 characters) on stderr. */
void t_report(const char *what, const cJSON *j);
/* Prints what and text (the first 600 characters) on stderr. */
void t_report_text(const char *what, const char *text);

/* An assertion of cond named what; when it fails, r is printed. Returns cond. */
bool t_check_at(const char *file, int line, bool cond, const char *what, const cJSON *r);
#define CHECK(cond, r) t_check_at(__FILE__, __LINE__, (cond), #cond, (r))

/* Sends a request (printf-style) and returns its response (caller deletes), NULL when none
 * came within T_RESPONSE_MS. Asserted: every line read is a JSON object, every event before
 * the response carries no "ok" (it is kept on c when c keeps events, else dropped), and the
 * response comes and carries "ok". */
cJSON *t_call_at(const char *file, int line, t_client *c, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define CALL(c, ...) t_call_at(__FILE__, __LINE__, (c), __VA_ARGS__)

/* A request that must be answered ok; returns the response (caller deletes). */
cJSON *t_ok_at(const char *file, int line, t_client *c, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define OK(c, ...) t_ok_at(__FILE__, __LINE__, (c), __VA_ARGS__)
#define OKD(c, ...) cJSON_Delete(t_ok_at(__FILE__, __LINE__, (c), __VA_ARGS__))

/* A request that must fail ("ok": false) with code and a message; true when it did. When
 * message is not NULL it gets the error message (caller frees; "" when there is none). */
bool t_err_at(const char *file, int line, t_client *c, const char *code, char **message,
              const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define ERR(c, code, ...) t_err_at(__FILE__, __LINE__, (c), (code), NULL, __VA_ARGS__)
#define ERR_MESSAGE(c, code, message, ...)                                                         \
  t_err_at(__FILE__, __LINE__, (c), (code), (message), __VA_ARGS__)

/* Sends count request lines in one write (so the daemon reads them together) and asserts
 * each response ok, in order. */
void t_pipeline_ok_at(const char *file, int line, t_client *c, const char *lines, int count);
#define PIPELINE_OK(c, lines, count) t_pipeline_ok_at(__FILE__, __LINE__, (c), (lines), (count))

/* The next line as a JSON object (caller deletes); a line that is not one fails. NULL on
 * timeout or end of stream. */
cJSON *t_recv_object(t_client *c, long timeout_ms);
/* The next event on c: the oldest kept one, or one read within timeout_ms (NULL when none
 * came). An event must carry no "ok"; a response in its place fails. */
cJSON *t_next_event(t_client *c, long timeout_ms);
/* Nothing arrives on c for ms, and no event is kept either. */
void t_quiet_at(const char *file, int line, t_client *c, long ms);
#define QUIET(c, ms) t_quiet_at(__FILE__, __LINE__, (c), (ms))

/* The last tick world w has run: what transform.get of entity e answers as "tick" (asserted
 * ok); -1 when there was no answer. */
long t_tick_now_at(const char *file, int line, t_client *c, const char *w, unsigned long long e);
#define TICK_NOW(c, w, e) t_tick_now_at(__FILE__, __LINE__, (c), (w), (e))
/* Waits (10 s at most, or until a read fails) until world w has run past tick t; the tick it
 * has run to, asserted past t. */
long t_tick_past_at(const char *file, int line, t_client *c, const char *w, unsigned long long e,
                    long t);
#define TICK_PAST(c, w, e, t) t_tick_past_at(__FILE__, __LINE__, (c), (w), (e), (t))

/* Starts a daemon (t_daemon_start); the assertion prints the args and the log on failure. */
bool t_start_at(const char *file, int line, t_daemon *d, const char *const *args);
#define START(d, args) t_start_at(__FILE__, __LINE__, (d), (args))
/* START, then CONNECT c to the daemon; when the connection fails, the daemon is killed. True
 * when both worked. */
bool t_start_connected_at(const char *file, int line, t_daemon *d, t_client *c,
                          const char *const *args);
#define START_CONNECTED(d, c, args) t_start_connected_at(__FILE__, __LINE__, (d), (c), (args))
/* SIGTERM: the daemon must exit 0 within timeout_ms. */
void t_stop_ok_at(const char *file, int line, t_daemon *d, int timeout_ms);
#define STOP_OK(d, timeout_ms) t_stop_ok_at(__FILE__, __LINE__, (d), (timeout_ms))
/* A suite's cleanup for the daemon its tests share, in CUnit's terms (0, else -1 and the
 * suite fails): SIGTERM, and the daemon must exit 0 within timeout_ms. */
int t_suite_daemon_stop(t_daemon *d, int timeout_ms);
/* Connects c to 127.0.0.1:port; a fatal assertion ends the test when it fails. */
bool t_connect_at(const char *file, int line, t_client *c, int port, bool fatal);
#define CONNECT(c, port) t_connect_at(__FILE__, __LINE__, (c), (port), false)
/* Connects c over TLS (t_client_connect_tls); the library's reason is printed on failure. */
bool t_connect_tls_at(const char *file, int line, t_client *c, int port, const t_tls_files *tls);
#define CONNECT_TLS(c, port, tls) t_connect_tls_at(__FILE__, __LINE__, (c), (port), (tls))
#define CONNECT_FATAL(c, port) t_connect_at(__FILE__, __LINE__, (c), (port), true)

#endif

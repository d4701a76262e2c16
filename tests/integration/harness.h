/* Test harness for integration suites: starts the real scened on an ephemeral port (the binary
 * named by SCENED_BIN) and talks to it over TCP on 127.0.0.1. */
#ifndef T_HARNESS_H
#define T_HARNESS_H

#include "children.h"
#include "clock.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A growable string for building requests and collecting output; s is NUL-terminated once
 * anything was added. Out of memory aborts the test run. */
typedef struct text {
  char *s;
  size_t len, cap;
} text;
void text_add(text *t, const void *data, size_t n);
void text_vaddf(text *t, const char *fmt, va_list ap);
void text_addf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The contents, "" while empty. */
const char *text_str(const text *t);
void text_free(text *t);

typedef struct t_daemon {
  pid_t pid;
  int port;
  int http_port;      /* 0 when started with --http off */
  char log_path[256]; /* the daemon's stderr */
} t_daemon;

/* The daemon's binary: SCENED_BIN, or build/scened. */
const char *t_daemon_bin(void);
/* Starts scened with --listen 127.0.0.1:0 --http 127.0.0.1:0 plus args (NULL-terminated, may be
 * NULL) and waits for its "listening on" line. Returns 0, or -1 (with a message on stderr). */
int t_daemon_start(t_daemon *d, const char *const *args);
/* Sends sig (0: SIGTERM) and waits up to timeout_ms; returns the exit status as from
 * waitpid, or -1 if it had to be killed. */
int t_daemon_stop(t_daemon *d, int sig, int timeout_ms);
/* Waits up to timeout_ms for the daemon to exit by itself; the status as from waitpid, or -1
 * if it had to be killed. */
int t_daemon_wait(t_daemon *d, int timeout_ms);
/* The resident memory of a process in KiB (VmRSS), -1 when it cannot be read. */
long t_rss_kib(pid_t pid);
/* True when the daemon's log contains text. */
bool t_daemon_log_contains(const t_daemon *d, const char *text);

typedef struct t_client {
  int fd;
  struct scn_cli *tls; /* a TLS connection (the client library's); NULL on plain TCP */
  char *buf;
  size_t len, cap;
  cJSON *events; /* with t_client_keep_events: events read while waiting for a response */
} t_client;

int t_client_connect(t_client *c, int port); /* 0 or -1 */

/* TLS for a test connection: the CA that must have signed the daemon's certificate, and this
 * client's certificate and key (NULL: none). */
typedef struct t_tls_files {
  const char *ca, *cert, *key;
} t_tls_files;
/* Connects over TLS, the handshake done (through the C client library); every call below then
 * speaks TLS. 0, or -1 with the library's reason in err. */
int t_client_connect_tls(t_client *c, int port, const t_tls_files *tls, char *err, size_t errlen);

/* A file of the repository's scripts/ directory (found next to the daemon's build directory,
 * or from the working directory), in out. */
bool t_find_script(const char *name, char *out, size_t n);
/* A new empty directory /tmp/scened-NAME-XXXXXX; its path in dir. */
bool t_temp_dir(char *dir, size_t cap, const char *name);
/* Removes a directory and everything in it (made writable first). */
void t_remove_tree(const char *dir);
/* The same for a directory t_temp_dir made; anything else (or an empty name: none was made) is
 * left alone. */
void t_remove_temp_dir(const char *dir);
/* A new temporary directory with a CA and a server and a client certificate signed by it
 * (scripts/tls-certs.sh: the openssl command line); its path in dir. The files are ca.pem,
 * server.pem, server.key, client.pem and client.key. */
bool t_make_certs(char *dir, size_t cap);
/* From now on, stream events that arrive while a call waits for its response are kept in
 * c->events (oldest first) instead of being dropped. */
void t_client_keep_events(t_client *c);
void t_client_close(t_client *c);
/* Sends bytes as they are. */
int t_client_send_raw(t_client *c, const void *data, size_t len);
/* Sends a line (a '\n' is added). */
int t_client_send(t_client *c, const char *line);
/* Next line without its '\n' (caller frees), or NULL on timeout or end of stream. */
char *t_client_recv(t_client *c, int timeout_ms);
/* Next line parsed as JSON (caller cJSON_Deletes), or NULL. */
cJSON *t_client_recv_json(t_client *c, int timeout_ms);
/* Sends a request (printf-style) and returns the parsed response line; stream events that
 * arrive first are skipped (or kept, see t_client_keep_events). */
cJSON *t_client_call(t_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Asks info every 20 ms until its number field equals want or timeout_ms passed; the last value
 * (-1 when it was missing). */
double t_wait_info(t_client *c, const char *field, double want, int timeout_ms);
/* True when the peer closed the connection within timeout_ms (pending lines are skipped). */
bool t_client_closed(t_client *c, int timeout_ms);

/* Fields of responses and events (r may be NULL). */
bool t_resp_ok(const cJSON *r);
/* The error code of a failed response, or "" when it is not one. */
const char *t_resp_code(const cJSON *r);
/* A number field, -1 when it is not one. */
double t_resp_num(const cJSON *r, const char *field);
/* A number field that is an id (1 to 2^53 - 1), 0 when it is not one. */
unsigned long long t_resp_id(const cJSON *r, const char *field);
/* A string field, "" when it is not one. */
const char *t_resp_str(const cJSON *r, const char *field);
/* True when the field is a string equal to want. */
bool t_resp_str_is(const cJSON *r, const char *field, const char *want);
bool t_resp_has(const cJSON *r, const char *field);

/* A whole file (caller frees), NULL when it cannot be read. */
char *t_read_file(const char *path);

/* HTTP on 127.0.0.1:port: sends req as it is and reads until the server closes (at most 5 s).
 * Returns the status code (0 when there is none); *resp gets the whole response (caller
 * frees), *closed whether the server closed the connection. */
int t_http_raw(int port, const char *req, char **resp, bool *closed);
/* GET path with Connection: close; as t_http_raw. */
int t_http_get(int port, const char *path, char **resp);
/* The same over TLS (HTTPS); 0 when the connection or its handshake failed. */
int t_https_raw(int port, const t_tls_files *tls, const char *req, char **resp, bool *closed);
int t_https_get(int port, const t_tls_files *tls, const char *path, char **resp);

/* The value of the sample "name value" on a Prometheus text page, -1 when there is none. */
double page_metric(const char *page, const char *name);

/* A child process with its stdin fed and its stdout and stderr collected. */
typedef struct t_proc {
  pid_t pid;
  int in_fd, out_fd, err_fd;
  const char *in;
  size_t in_len, in_off;
  text out, err;
  int status; /* once t_proc_wait returned: as from waitpid, -1 when it had to be killed */
} t_proc;
/* Starts bin (a path) with args (NULL-terminated, may be NULL; at most 62), the environment
 * envp (NULL: this process's) and stdin fed from in (in_len bytes; closed at once when there
 * are none). */
bool t_proc_start(t_proc *p, const char *bin, const char *const *args, char *const *envp,
                  const char *in, size_t in_len);
/* Moves bytes to and from the child for up to ms; true once its stdout and stderr closed. */
bool t_proc_pump(t_proc *p, int ms);
/* Runs the child to its end (killed after timeout_ms): its exit code, 128 + a signal, or -1
 * when it had to be killed. */
int t_proc_wait(t_proc *p, int timeout_ms);
void t_proc_free(t_proc *p);

#endif

/* Test harness for integration suites: starts the real scened on an ephemeral port (the binary
 * named by SCENED_BIN) and talks to it over TCP on 127.0.0.1. */
#ifndef SCN_TEST_HARNESS_H
#define SCN_TEST_HARNESS_H

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

typedef struct scn_daemon {
  pid_t pid;
  int port;
  int http_port;      /* 0 when started with --http off */
  char log_path[256]; /* the daemon's stderr */
} scn_daemon;

/* The daemon's binary: SCENED_BIN, or build/scened. */
const char *scn_daemon_bin(void);
/* Starts scened with --listen 127.0.0.1:0 --http 127.0.0.1:0 plus args (NULL-terminated, may be
 * NULL) and waits for its "listening on" line. Returns 0, or -1 (with a message on stderr). */
int scn_daemon_start(scn_daemon *d, const char *const *args);
/* Sends sig (0: SIGTERM) and waits up to timeout_ms; returns the exit status as from
 * waitpid, or -1 if it had to be killed. */
int scn_daemon_stop(scn_daemon *d, int sig, int timeout_ms);
/* Waits up to timeout_ms for the daemon to exit by itself; the status as from waitpid, or -1
 * if it had to be killed. */
int scn_daemon_wait(scn_daemon *d, int timeout_ms);
/* The resident memory of a process in KiB (VmRSS), -1 when it cannot be read. */
long scn_rss_kib(pid_t pid);
/* True when the daemon's log contains text. */
bool scn_daemon_log_contains(const scn_daemon *d, const char *text);

typedef struct scn_client {
  int fd;
  struct scn_cli *tls; /* a TLS connection (the client library's); NULL on plain TCP */
  char *buf;
  size_t len, cap;
  cJSON *events; /* with scn_client_keep_events: events read while waiting for a response */
} scn_client;

int scn_client_connect(scn_client *c, int port); /* 0 or -1 */

/* TLS for a test connection: the CA that must have signed the daemon's certificate, and this
 * client's certificate and key (NULL: none). */
typedef struct scn_tls_files {
  const char *ca, *cert, *key;
} scn_tls_files;
/* Connects over TLS, the handshake done (through the C client library); every call below then
 * speaks TLS. 0, or -1 with the library's reason in err. */
int scn_client_connect_tls(scn_client *c, int port, const scn_tls_files *tls, char *err,
                           size_t errlen);

/* A file of the repository's scripts/ directory (found next to the daemon's build directory,
 * or from the working directory), in out. */
bool scn_find_script(const char *name, char *out, size_t n);
/* A new empty directory /tmp/scened-NAME-XXXXXX; its path in dir. */
bool scn_temp_dir(char *dir, size_t cap, const char *name);
/* Removes a directory and everything in it (made writable first). */
void scn_remove_tree(const char *dir);
/* A new temporary directory with a CA and a server and a client certificate signed by it
 * (scripts/tls-certs.sh: the openssl command line); its path in dir. The files are ca.pem,
 * server.pem, server.key, client.pem and client.key. */
bool scn_make_certs(char *dir, size_t cap);
/* From now on, stream events that arrive while a call waits for its response are kept in
 * c->events (oldest first) instead of being dropped. */
void scn_client_keep_events(scn_client *c);
void scn_client_close(scn_client *c);
/* Sends bytes as they are. */
int scn_client_send_raw(scn_client *c, const void *data, size_t len);
/* Sends a line (a '\n' is added). */
int scn_client_send(scn_client *c, const char *line);
/* Next line without its '\n' (caller frees), or NULL on timeout or end of stream. */
char *scn_client_recv(scn_client *c, int timeout_ms);
/* Next line parsed as JSON (caller cJSON_Deletes), or NULL. */
cJSON *scn_client_recv_json(scn_client *c, int timeout_ms);
/* Sends a request (printf-style) and returns the parsed response line; stream events that
 * arrive first are skipped (or kept, see scn_client_keep_events). */
cJSON *scn_client_call(scn_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Asks info every 20 ms until its number field equals want or timeout_ms passed; the last value
 * (-1 when it was missing). */
double scn_wait_info(scn_client *c, const char *field, double want, int timeout_ms);
/* True when the peer closed the connection within timeout_ms (pending lines are skipped). */
bool scn_client_closed(scn_client *c, int timeout_ms);

/* Fields of responses and events (r may be NULL). */
bool scn_resp_ok(const cJSON *r);
/* The error code of a failed response, or "" when it is not one. */
const char *scn_resp_code(const cJSON *r);
/* A number field, -1 when it is not one. */
double scn_resp_num(const cJSON *r, const char *field);
/* A number field that is an id (1 to 2^53 - 1), 0 when it is not one. */
unsigned long long scn_resp_id(const cJSON *r, const char *field);
/* A string field, "" when it is not one. */
const char *scn_resp_str(const cJSON *r, const char *field);
/* True when the field is a string equal to want. */
bool scn_resp_str_is(const cJSON *r, const char *field, const char *want);
bool scn_resp_has(const cJSON *r, const char *field);

/* A whole file (caller frees), NULL when it cannot be read. */
char *scn_read_file(const char *path);

/* HTTP on 127.0.0.1:port: sends req as it is and reads until the server closes (at most 5 s).
 * Returns the status code (0 when there is none); *resp gets the whole response (caller
 * frees), *closed whether the server closed the connection. */
int scn_http_raw(int port, const char *req, char **resp, bool *closed);
/* GET path with Connection: close; as scn_http_raw. */
int scn_http_get(int port, const char *path, char **resp);
/* The same over TLS (HTTPS); 0 when the connection or its handshake failed. */
int scn_https_raw(int port, const scn_tls_files *tls, const char *req, char **resp, bool *closed);
int scn_https_get(int port, const scn_tls_files *tls, const char *path, char **resp);

/* The value of the sample "name value" on a Prometheus text page, -1 when there is none. */
double page_metric(const char *page, const char *name);

/* A child process with its stdin fed and its stdout and stderr collected. */
typedef struct scn_proc {
  pid_t pid;
  int in_fd, out_fd, err_fd;
  const char *in;
  size_t in_len, in_off;
  text out, err;
  int status; /* once scn_proc_wait returned: as from waitpid, -1 when it had to be killed */
} scn_proc;
/* Starts bin (a path) with args (NULL-terminated, may be NULL; at most 62), the environment
 * envp (NULL: this process's) and stdin fed from in (in_len bytes; closed at once when there
 * are none). */
bool scn_proc_start(scn_proc *p, const char *bin, const char *const *args, char *const *envp,
                    const char *in, size_t in_len);
/* Moves bytes to and from the child for up to ms; true once its stdout and stderr closed. */
bool scn_proc_pump(scn_proc *p, int ms);
/* Runs the child to its end (killed after timeout_ms): its exit code, 128 + a signal, or -1
 * when it had to be killed. */
int scn_proc_wait(scn_proc *p, int timeout_ms);
void scn_proc_free(scn_proc *p);

#endif

/* The C client library: blocking calls over non-blocking sockets with poll() timeouts (TLS
 * through OpenSSL on the socket), framing shared with the daemon through proto/. */
#include "scn_client.h"

#include "b64.h"
#include "buf.h"
#include "client_packed.h"
#include "framing.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Where a world was last found (a cluster's MOVED answers). */
typedef struct owner {
  char world[65];
  char addr[96];
} owner;

#define OWNERS 64
#define MAX_HOPS 3

struct scn_cli {
  int fd;
  SSL *ssl;          /* NULL on plain TCP */
  bool pipe_ignored; /* SIGPIPE was ignored when TLS started: no guard around its writes */
  bool tls_starved;  /* the last TLS read wanted more bytes than the socket had given */
  int timeout_ms;
  char addr[96]; /* HOST:PORT of the daemon connected to */
  char *token;   /* sent with every hello: a new connection after MOVED, a switch of matrices */
  bool no_follow;
  bool follower_reads; /* sent with every hello */
  /* TLS, kept for the connections a MOVED opens */
  bool tls;
  char *tls_ca, *tls_cert, *tls_key;
  owner owners[OWNERS];
  unsigned nowners, next_owner;
  scn_buf out;
  scn_buf in;      /* bytes read, not yet consumed */
  size_t consumed; /* start of unconsumed bytes in in */
  scn_cli_event_fn on_event;
  void *event_ud;
  char error[256];
  int matrices;
  scn_cli_frame_fn on_frame;
  void *frame_ud;
  /* the last frame, in arrays reused from frame to frame */
  uint64_t *ids, *removed;
  float (*ms)[16];
  size_t ids_cap, removed_cap, ms_cap;
  char world[80];
  cli_packed packed; /* the packed subscriptions, their grids and baselines */
  scn_buf event;     /* a packed frame written out as JSON, for the event handler */
  int held_rc;       /* a packed frame refused, not yet reported (SCN_CLI_OK: none) */
  char held[256];    /* its reason */
};

static int finish_call(scn_cli *c, cJSON **out);

static int fail(scn_cli *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
  return code;
}

const char *scn_cli_error(const scn_cli *c) { return c->error; }
int scn_cli_fd(const scn_cli *c) { return c->fd; }

void scn_cli_on_event(scn_cli *c, scn_cli_event_fn fn, void *ud) {
  c->on_event = fn;
  c->event_ud = ud;
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_to(const char *host, int port, char *err, size_t errlen) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
    return -1;
  }
  int fd = -1, last = 0;
  for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0)
      continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    snprintf(err, errlen, "cannot connect to %s:%d: %s", host, port, strerror(last));
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* ---- TLS ----------------------------------------------------------------------------------- */

/* The last context made, kept for the next connection with the same files: loading a CA file
 * costs more than a handshake. */
static struct {
  SSL_CTX *ctx;
  char *ca, *cert, *key;
} cached;

static bool same(const char *a, const char *b) { return a ? b && !strcmp(a, b) : !b; }

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* OpenSSL's reason for the last error, or what. */
static const char *tls_reason(const char *what) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  return r ? r : what;
}

static bool file_readable(const char *what, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (f) {
    fclose(f);
    return true;
  }
  snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
  return false;
}

static SSL_CTX *tls_context(const scn_cli_options *o, char *err, size_t errlen) {
  if (cached.ctx && same(cached.ca, o->tls_ca) && same(cached.cert, o->tls_cert) &&
      same(cached.key, o->tls_key))
    return cached.ctx;
  if ((o->tls_ca && !file_readable("TLS CA file", o->tls_ca, err, errlen)) ||
      (o->tls_cert && !file_readable("TLS certificate", o->tls_cert, err, errlen)) ||
      (o->tls_key && !file_readable("TLS key", o->tls_key, err, errlen)))
    return NULL;
  if (!o->tls_cert != !o->tls_key) {
    snprintf(err, errlen, "a TLS client certificate needs its key, and a key its certificate");
    return NULL;
  }
  ERR_clear_error();
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) {
    snprintf(err, errlen, "cannot set up TLS: %s", tls_reason("out of memory"));
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  /* A daemon that closes without close_notify (after a refusal) has simply closed. */
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  bool ok = o->tls_ca ? SSL_CTX_load_verify_locations(ctx, o->tls_ca, NULL) == 1
                      : SSL_CTX_set_default_verify_paths(ctx) == 1;
  if (!ok)
    snprintf(err, errlen, "TLS CA file %s: no usable PEM certificate in it",
             o->tls_ca ? o->tls_ca : "(system)");
  if (ok && o->tls_cert &&
      (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1 ||
       SSL_CTX_check_private_key(ctx) != 1)) {
    snprintf(err, errlen, "TLS certificate %s with key %s: %s", o->tls_cert, o->tls_key,
             tls_reason("not usable"));
    ok = false;
  }
  if (!ok) {
    SSL_CTX_free(ctx);
    return NULL;
  }
  SSL_CTX_free(cached.ctx); /* connections still using it keep it alive */
  free(cached.ca);
  free(cached.cert);
  free(cached.key);
  cached.ctx = ctx;
  cached.ca = dup_or_null(o->tls_ca);
  cached.cert = dup_or_null(o->tls_cert);
  cached.key = dup_or_null(o->tls_key);
  return ctx;
}

/* OpenSSL writes to the socket with write(): to a daemon that has closed, that raises SIGPIPE,
 * which a library must not let end its program. The signal is blocked around the calls that
 * write, and one they raised is taken back off the thread's pending signals. */
typedef struct sigpipe_guard {
  sigset_t old;
  bool was_pending, skipped;
} sigpipe_guard;

/* Whether the program ignores SIGPIPE (as servers and load generators do): then a write to a
 * closed socket cannot end it, and the four system calls of the guard are saved on every TLS
 * write. Read when a TLS connection starts. */
static bool sigpipe_ignored(void) {
  struct sigaction sa;
  return sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

static void sigpipe_block(sigpipe_guard *g, bool ignored) {
  g->skipped = ignored;
  if (ignored)
    return;
  sigset_t pipe_only, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigpending(&pending);
  g->was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_only, &g->old);
}

static void sigpipe_restore(sigpipe_guard *g) {
  if (g->skipped)
    return;
  int saved = errno;
  sigset_t pipe_only, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigpending(&pending);
  if (!g->was_pending && sigismember(&pending, SIGPIPE) == 1) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_only, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
  errno = saved;
}

/* SSL_get_error reads the thread's error queue, which must be empty before a TLS call; it
 * mostly is, and looking is cheaper than clearing it on every read and write. */
static void clear_errors(void) {
  if (ERR_peek_error())
    ERR_clear_error();
}

/* Waits up to timeout_ms (negative: forever) for what a TLS call asked for. */
static int wait_for(int fd, int ssl_error, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = ssl_error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
  return poll(&p, 1, timeout_ms);
}

/* The TLS handshake as the client: the daemon's certificate must be signed by a trusted CA
 * and name host (a DNS name or an IP address). */
static bool tls_start(scn_cli *c, const scn_cli_options *o, char *err, size_t errlen) {
  SSL_CTX *ctx = tls_context(o, err, errlen);
  if (!ctx)
    return false;
  c->pipe_ignored = sigpipe_ignored();
  c->ssl = SSL_new(ctx);
  if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
    snprintf(err, errlen, "cannot set up TLS: %s", tls_reason("out of memory"));
    return false;
  }
  /* Whatever the socket holds in one read, not a record's header and then its body in two:
   * what is read ahead counts in scn_cli_pending. */
  SSL_set_read_ahead(c->ssl, 1);
  unsigned char ip[16];
  bool numeric = inet_pton(AF_INET, o->host, ip) == 1 || inet_pton(AF_INET6, o->host, ip) == 1;
  if (numeric) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), o->host);
  } else {
    SSL_set_tlsext_host_name(c->ssl, o->host);
    SSL_set1_host(c->ssl, o->host);
  }
  long deadline = c->timeout_ms < 0 ? -1 : now_ms() + c->timeout_ms;
  for (;;) {
    ERR_clear_error();
    sigpipe_guard g;
    sigpipe_block(&g, c->pipe_ignored);
    int r = SSL_connect(c->ssl);
    sigpipe_restore(&g);
    if (r == 1)
      return true;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      int left = deadline < 0 ? -1 : (int)(deadline - now_ms());
      if ((deadline >= 0 && left <= 0) || wait_for(c->fd, e, left < 0 ? -1 : left) == 0) {
        snprintf(err, errlen, "TLS handshake with %s:%d timed out", o->host, o->port);
        return false;
      }
      continue;
    }
    long v = SSL_get_verify_result(c->ssl);
    if (v != X509_V_OK)
      snprintf(err, errlen, "TLS: the daemon at %s:%d is not trusted: %s", o->host, o->port,
               X509_verify_cert_error_string(v));
    else
      snprintf(err, errlen, "TLS handshake with %s:%d failed: %s", o->host, o->port,
               tls_reason(e == SSL_ERROR_SYSCALL ? "the daemon closed the connection"
                                                 : "protocol error"));
    return false;
  }
}

/* hello with the token (when there is one), the matrices form and follower_reads (when asked). */
static int say_hello(scn_cli *c, int matrices) {
  cJSON *req = cJSON_CreateObject(), *resp = NULL;
  if (!req)
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  cJSON_AddStringToObject(req, "cmd", "hello");
  if (c->token)
    cJSON_AddStringToObject(req, "token", c->token);
  cJSON_AddStringToObject(req, "matrices", matrices == SCN_CLI_MATRICES_B64 ? "b64" : "json");
  if (c->follower_reads)
    cJSON_AddTrueToObject(req, "follower_reads");
  /* sent here, not through scn_cli_call: a hello names no world, so there is no MOVED to follow,
   * and reconnect uses it while a call is being moved */
  int rc = scn_cli_send(c, req);
  if (rc == SCN_CLI_OK)
    rc = finish_call(c, &resp);
  cJSON_Delete(req);
  cJSON_Delete(resp);
  if (rc == SCN_CLI_OK)
    c->matrices = matrices;
  return rc;
}

int scn_cli_set_matrices(scn_cli *c, int matrices) {
  if (matrices != SCN_CLI_MATRICES_JSON && matrices != SCN_CLI_MATRICES_B64)
    return fail(c, SCN_CLI_EIO, "matrices must be SCN_CLI_MATRICES_JSON or SCN_CLI_MATRICES_B64");
  return say_hello(c, matrices);
}

int scn_cli_matrices(const scn_cli *c) { return c->matrices; }

/* Copies the TLS files' names, for the connections a MOVED opens; false when out of memory. */
static bool copy_tls_files(scn_cli *c, const scn_cli_options *o) {
  return (!o->tls_ca || (c->tls_ca = strdup(o->tls_ca))) &&
         (!o->tls_cert || (c->tls_cert = strdup(o->tls_cert))) &&
         (!o->tls_key || (c->tls_key = strdup(o->tls_key)));
}

/* Ends the connection (TLS, then the socket), keeping the client. */
static void drop_connection(scn_cli *c) {
  if (c->ssl) {
    sigpipe_guard g;
    sigpipe_block(&g, c->pipe_ignored);
    SSL_shutdown(c->ssl); /* close_notify, if the socket takes it at once */
    sigpipe_restore(&g);
    SSL_free(c->ssl);
    c->ssl = NULL;
  }
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

scn_cli *scn_cli_connect(const scn_cli_options *opt, char *err, size_t errlen) {
  char dummy[256];
  if (!err)
    err = dummy, errlen = sizeof dummy;
  scn_cli_options o = opt ? *opt : (scn_cli_options){0};
  if (!o.host)
    o.host = "127.0.0.1";
  if (!o.port)
    o.port = 7878;
  scn_cli *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  c->timeout_ms = o.timeout_ms ? o.timeout_ms : 10000;
  c->no_follow = o.no_follow;
  c->follower_reads = o.follower_reads;
  snprintf(c->addr, sizeof c->addr, strchr(o.host, ':') ? "[%s]:%d" : "%s:%d", o.host, o.port);
  c->fd = connect_to(o.host, o.port, err, errlen);
  if (c->fd < 0) {
    free(c);
    return NULL;
  }
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  c->tls = o.tls || o.tls_ca || o.tls_cert || o.tls_key;
  if (c->tls && !copy_tls_files(c, &o)) {
    snprintf(err, errlen, "out of memory");
    scn_cli_close(c);
    return NULL;
  }
  if (c->tls && !tls_start(c, &o, err, errlen)) {
    scn_cli_close(c);
    return NULL;
  }
  if (o.token && !(c->token = strdup(o.token))) {
    snprintf(err, errlen, "out of memory");
    scn_cli_close(c);
    return NULL;
  }
  if ((o.token || o.matrices || o.follower_reads) && say_hello(c, o.matrices) != SCN_CLI_OK) {
    snprintf(err, errlen, "hello failed: %s", c->error);
    scn_cli_close(c);
    return NULL;
  }
  return c;
}

void scn_cli_close(scn_cli *c) {
  if (!c)
    return;
  drop_connection(c);
  scn_buf_free(&c->out);
  scn_buf_free(&c->in);
  free(c->token);
  free(c->tls_ca);
  free(c->tls_cert);
  free(c->tls_key);
  free(c->ids);
  free(c->removed);
  free(c->ms);
  cli_packed_free(&c->packed);
  scn_buf_free(&c->event);
  free(c);
}

/* ---- bytes in and out ------------------------------------------------------------------- */

/* Writes what the socket takes now: the count, 0 when it is full (*want: what to wait for),
 * or a negative code. */
static ssize_t io_send(scn_cli *c, const char *p, size_t len, short *want) {
  *want = POLLOUT;
  if (!c->ssl) {
    ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0)
      return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      return 0;
    if (errno == EPIPE || errno == ECONNRESET)
      return fail(c, SCN_CLI_ECLOSED, "the daemon closed the connection");
    return fail(c, SCN_CLI_EIO, "send failed: %s", strerror(errno));
  }
  clear_errors();
  sigpipe_guard g;
  sigpipe_block(&g, c->pipe_ignored);
  int n = SSL_write(c->ssl, p, len > (1u << 30) ? 1 << 30 : (int)len);
  sigpipe_restore(&g);
  if (n > 0)
    return n;
  int e = SSL_get_error(c->ssl, n);
  if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
    *want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    return 0;
  }
  if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN)
    return fail(c, SCN_CLI_ECLOSED, "the daemon closed the connection");
  return fail(c, SCN_CLI_ETLS, "TLS: %s", tls_reason("write failed"));
}

/* Reads what is there now: the count, 0 when nothing is, or a negative code. */
static ssize_t io_recv(scn_cli *c, char *buf, size_t cap) {
  if (!c->ssl) {
    ssize_t n = recv(c->fd, buf, cap, MSG_DONTWAIT);
    if (n > 0)
      return n;
    if (n == 0 || errno == ECONNRESET)
      return fail(c, SCN_CLI_ECLOSED, "the daemon closed the connection");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      return 0;
    return fail(c, SCN_CLI_EIO, "recv: %s", strerror(errno));
  }
  clear_errors();
  int n = SSL_read(c->ssl, buf, cap > (1u << 30) ? 1 << 30 : (int)cap);
  c->tls_starved = n <= 0;
  if (n > 0)
    return n;
  int e = SSL_get_error(c->ssl, n);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return 0;
  if (e == SSL_ERROR_ZERO_RETURN || e == SSL_ERROR_SYSCALL)
    return fail(c, SCN_CLI_ECLOSED, "the daemon closed the connection");
  /* An alert: the daemon refused this client's certificate (or its absence), ... */
  return fail(c, SCN_CLI_ETLS, "TLS: %s", tls_reason("read failed"));
}

/* Bytes TLS has taken from the socket and not handed out yet, unless the last read found
 * them to be only part of a record (then the rest must be waited for). */
static bool tls_holds(const scn_cli *c) {
  return c->ssl && SSL_has_pending(c->ssl) && !c->tls_starved;
}

bool scn_cli_pending(const scn_cli *c) { return c->consumed < c->in.len || tls_holds(c); }

ssize_t scn_cli_send_raw(scn_cli *c, const void *data, size_t len) {
  short want;
  return io_send(c, data, len, &want);
}

ssize_t scn_cli_recv_raw(scn_cli *c, void *buf, size_t cap) {
  if (c->consumed < c->in.len) {
    size_t n = c->in.len - c->consumed < cap ? c->in.len - c->consumed : cap;
    memcpy(buf, c->in.data + c->consumed, n);
    c->consumed += n;
    return (ssize_t)n;
  }
  return io_recv(c, buf, cap);
}

/* ---- following a cluster's MOVED ----------------------------------------------------------- */

static const char *owner_of(const scn_cli *c, const char *world) {
  for (unsigned i = 0; i < c->nowners; i++)
    if (strcmp(c->owners[i].world, world) == 0)
      return c->owners[i].addr;
  return NULL;
}

static void remember_owner(scn_cli *c, const char *world, const char *addr) {
  owner *o = NULL;
  for (unsigned i = 0; i < c->nowners && !o; i++)
    if (strcmp(c->owners[i].world, world) == 0)
      o = &c->owners[i];
  if (!o) {
    o = &c->owners[c->nowners < OWNERS ? c->nowners++ : c->next_owner++ % OWNERS];
    snprintf(o->world, sizeof o->world, "%s", world);
  }
  snprintf(o->addr, sizeof o->addr, "%s", addr);
}

/* Moves this client to the daemon at addr (HOST:PORT): a new connection, hello with the token and
 * form, the old connection closed. Responses still due on the old one are lost, so only calls (one
 * request, its response) move. */
static int reconnect(scn_cli *c, const char *addr) {
  char host[96], err[256];
  snprintf(host, sizeof host, "%s", addr);
  char *colon = strrchr(host, ':');
  if (!colon)
    return fail(c, SCN_CLI_EPROTO, "MOVED to \"%s\", which is not HOST:PORT", addr);
  *colon = '\0';
  int port = atoi(colon + 1);
  char *h = host;
  if (h[0] == '[' && colon > h + 1 && colon[-1] == ']') {
    colon[-1] = '\0';
    h++;
  }
  int fd = connect_to(h, port, err, sizeof err);
  if (fd < 0)
    return fail(c, SCN_CLI_ECONNECT, "%s", err);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  drop_connection(c);
  cli_packed_reset(&c->packed);
  c->fd = fd;
  c->out.len = c->in.len = c->consumed = 0;
  snprintf(c->addr, sizeof c->addr, "%s", addr);
  if (c->tls) {
    scn_cli_options o = {.host = h,
                         .port = port,
                         .tls = true,
                         .tls_ca = c->tls_ca,
                         .tls_cert = c->tls_cert,
                         .tls_key = c->tls_key};
    err[0] = '\0';
    if (!tls_start(c, &o, err, sizeof err))
      return fail(c, SCN_CLI_ETLS, "%s", err);
  }
  return c->token || c->matrices || c->follower_reads ? say_hello(c, c->matrices) : SCN_CLI_OK;
}

/* The world a request names, NULL when none. */
static const char *request_world(const cJSON *req) {
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(req, "world");
  return cJSON_IsString(w) && strlen(w->valuestring) < 65 ? w->valuestring : NULL;
}

const char *scn_cli_addr(const scn_cli *c) { return c->addr; }

int scn_cli_send_line(scn_cli *c, const char *line, size_t len) {
  size_t before = c->out.len;
  scn_buf_add(&c->out, line, len);
  scn_buf_addc(&c->out, '\n');
  if (c->out.failed || !cli_packed_request(&c->packed, line, len)) {
    c->out.failed = false;
    scn_buf_truncate(&c->out, before);
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  }
  return SCN_CLI_OK;
}

int scn_cli_send(scn_cli *c, const cJSON *req) {
  char *text = cJSON_PrintUnformatted(req);
  if (!text)
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  int rc = scn_cli_send_line(c, text, strlen(text));
  cJSON_free(text);
  return rc;
}

/* Writes what is queued; while the socket is full it also reads, so a long pipeline cannot
 * deadlock against a daemon that is itself waiting for us to read. */
static int read_some(scn_cli *c, int timeout_ms);

int scn_cli_flush(scn_cli *c) {
  size_t off = 0;
  int rc = SCN_CLI_OK;
  while (off < c->out.len && rc == SCN_CLI_OK) {
    short want;
    ssize_t n = io_send(c, c->out.data + off, c->out.len - off, &want);
    if (n > 0) {
      off += (size_t)n;
      continue;
    }
    if (n < 0) {
      rc = (int)n;
      break;
    }
    struct pollfd p = {.fd = c->fd, .events = want | POLLIN};
    if (poll(&p, 1, c->timeout_ms) <= 0) {
      rc = fail(c, SCN_CLI_ETIMEOUT, "timed out sending");
    } else if ((p.revents & POLLIN) && want != POLLIN) {
      rc = read_some(c, 0);
      if (rc == SCN_CLI_ETIMEOUT)
        rc = SCN_CLI_OK;
    }
  }
  /* What was sent is gone from the queue even when the rest failed: a later flush sends only
   * the rest, never a request twice. */
  scn_buf_consume(&c->out, off);
  return rc;
}

static int read_some(scn_cli *c, int timeout_ms) {
  /* TLS may hold bytes already: they are read without waiting. */
  if (!tls_holds(c)) {
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    if (r == 0)
      return fail(c, SCN_CLI_ETIMEOUT, "timed out waiting for the daemon");
    if (r < 0)
      return errno == EINTR ? SCN_CLI_ETIMEOUT : fail(c, SCN_CLI_EIO, "poll: %s", strerror(errno));
  }
  if (c->consumed > 0 && c->consumed == c->in.len) {
    c->in.len = c->consumed = 0;
  } else if (c->consumed > 1 << 20) {
    scn_buf_consume(&c->in, c->consumed);
    c->consumed = 0;
  }
  if (!scn_buf_reserve(&c->in, 65536))
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  ssize_t n = io_recv(c, c->in.data + c->in.len, c->in.cap - c->in.len);
  if (n < 0)
    return (int)n;
  c->in.len += (size_t)n;
  return SCN_CLI_OK;
}

int scn_cli_read_line(scn_cli *c, const char **line, size_t *len, int timeout_ms) {
  int rc = scn_cli_flush(c);
  if (rc != SCN_CLI_OK)
    return rc;
  long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  for (;;) {
    char *start = c->in.data + c->consumed;
    char *nl = c->in.len > c->consumed ? memchr(start, '\n', c->in.len - c->consumed) : NULL;
    if (nl) {
      *line = start;
      *len = (size_t)(nl - start);
      if (*len && start[*len - 1] == '\r')
        (*len)--;
      c->consumed += (size_t)(nl - start) + 1;
      return SCN_CLI_OK;
    }
    int left = deadline < 0 ? -1 : (int)(deadline - now_ms());
    if (deadline >= 0 && left < 0)
      left = 0;
    rc = read_some(c, left);
    if (rc != SCN_CLI_OK)
      return rc;
  }
}

static bool is_event(const cJSON *j) { return cJSON_GetObjectItemCaseSensitive(j, "event"); }

/* ---- matrices and frames -------------------------------------------------------------------- */

void scn_cli_matrix_to_b64(const float m[16], char out[SCN_CLI_B64_MATRIX_LEN + 1]) {
  scn_b64_encode_matrices(out, (const float(*)[16])m, 1);
  out[SCN_B64_MATRIX_LEN] = '\0';
}

int scn_cli_matrix_from_b64(const char *s, size_t len, float m[16]) {
  return scn_b64_decode_matrix(s, len, m, NULL) == SCN_B64_OK ? 0 : -1;
}

/* An array of n numbers into out (as float32: the daemon prints them exactly); false when a is
 * not one. */
static bool floats_of(const cJSON *a, float *out, int n) {
  if (cJSON_GetArraySize(a) != n)
    return false;
  int i = 0;
  for (const cJSON *x = a->child; x; x = x->next) {
    if (!cJSON_IsNumber(x))
      return false;
    out[i++] = (float)x->valuedouble; /* the daemon prints float32 exactly */
  }
  return true;
}

int scn_cli_matrix_get(const cJSON *v, float m[16]) {
  if (cJSON_IsString(v))
    return scn_cli_matrix_from_b64(v->valuestring, strlen(v->valuestring), m);
  return floats_of(v, m, 16) ? 0 : -1;
}

void scn_cli_on_frame(scn_cli *c, scn_cli_frame_fn fn, void *ud) {
  c->on_frame = fn;
  c->frame_ud = ud;
}

/* Room for n items in *arr (of size each), grown by doubling. */
static bool room(void *arr, size_t *cap, size_t n, size_t size) {
  if (n <= *cap)
    return true;
  size_t want = *cap ? *cap : 256;
  while (want < n)
    want *= 2;
  void *p = realloc(*(void **)arr, want * size);
  if (!p)
    return false;
  *(void **)arr = p;
  *cap = want;
  return true;
}

/* A frame line in b64 form, read without cJSON: top-level members in any order, values of
 * other members skipped. */
typedef struct scan {
  const char *p, *end;
} scan;

static void skip_ws(scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r' || *s->p == '\n'))
    s->p++;
}

static bool eat(scan *s, char ch) {
  skip_ws(s);
  if (s->p < s->end && *s->p == ch) {
    s->p++;
    return true;
  }
  return false;
}

/* A string's content (escapes left as they are); *escaped tells whether it has any. */
static bool scan_string(scan *s, const char **at, size_t *len, bool *escaped) {
  if (!eat(s, '"'))
    return false;
  *at = s->p;
  *escaped = false;
  for (; s->p < s->end; s->p++) {
    if (*s->p == '\\') {
      *escaped = true;
      s->p++;
    } else if (*s->p == '"') {
      *len = (size_t)(s->p++ - *at);
      return true;
    }
  }
  return false;
}

/* Past one value of any kind: a string, a scalar, or a whole array or object. */
static bool skip_value(scan *s) {
  skip_ws(s);
  int depth = 0;
  while (s->p < s->end) {
    char ch = *s->p;
    const char *at;
    size_t len;
    bool esc;
    if (ch == '"') {
      if (!scan_string(s, &at, &len, &esc))
        return false;
      if (depth == 0)
        return true;
      continue;
    }
    if (ch == '[' || ch == '{') {
      depth++;
    } else if (ch == ']' || ch == '}') {
      if (depth == 0)
        return true; /* the end of what holds the scalar */
      if (--depth == 0) {
        s->p++;
        return true;
      }
    } else if (depth == 0 && (ch == ',' || ch == ' ' || ch == '\t' || ch == '\r')) {
      return true;
    }
    s->p++;
  }
  return depth == 0;
}

static bool scan_number(scan *s, double *d) {
  skip_ws(s);
  char tmp[64];
  size_t n = 0;
  while (s->p < s->end && n < sizeof tmp - 1 && strchr("0123456789+-.eE", *s->p) && *s->p)
    tmp[n++] = *s->p++;
  tmp[n] = '\0';
  char *end;
  *d = strtod(tmp, &end);
  return n > 0 && end == tmp + n;
}

static bool scan_ids(scan *s, uint64_t **ids, size_t *cap, size_t *n) {
  *n = 0;
  if (!eat(s, '['))
    return false;
  if (eat(s, ']'))
    return true;
  do {
    skip_ws(s);
    uint64_t v = 0;
    const char *start = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9' && s->p - start < 17)
      v = v * 10 + (uint64_t)(*s->p++ - '0');
    if (s->p == start || !room(ids, cap, *n + 1, sizeof **ids))
      return false;
    (*ids)[(*n)++] = v;
  } while (eat(s, ','));
  return eat(s, ']');
}

/* A packed frame refused: it is dropped and the connection stays in step; the refusal waits
 * for the next scn_cli_poll_events (a call under way completes), the first one when several
 * came. 1, as for a frame handled. */
static int held(scn_cli *c, int rc, const char *why) {
  if (!c->held_rc) {
    c->held_rc = rc;
    snprintf(c->held, sizeof c->held, "%s", why);
  }
  return 1;
}

/* A packed frame written out as a frame of this connection's form (json or b64), parsed as the
 * event handler gets frames; NULL when out of memory. */
static cJSON *packed_event(scn_cli *c, const scn_cli_frame *f) {
  scn_buf *b = &c->event;
  b->len = 0;
  b->failed = false;
  scn_buf_adds(b, "{\"event\":\"frame\",\"sub\":");
  scn_buf_add_double(b, f->sub);
  scn_buf_adds(b, ",\"world\":");
  scn_buf_add_json_string(b, f->world, strlen(f->world));
  scn_buf_adds(b, ",\"tick\":");
  scn_buf_add_double(b, f->tick);
  scn_buf_adds(b, f->full ? ",\"full\":true" : ",\"full\":false");
  if (c->matrices == SCN_CLI_MATRICES_B64) {
    scn_buf_adds(b, ",\"ids\":");
    scn_buf_add_id_list(b, f->ids, f->n);
    scn_buf_adds(b, ",\"ms\":\"");
    size_t text = SCN_B64_LEN(64 * f->n);
    if (scn_buf_reserve(b, text)) {
      scn_b64_encode_matrices(b->data + b->len, f->matrices, f->n);
      b->len += text;
    }
    scn_buf_addc(b, '"');
  } else {
    scn_buf_adds(b, ",\"set\":[");
    for (size_t i = 0; i < f->n; i++) {
      scn_buf_adds(b, i ? ",{\"e\":" : "{\"e\":");
      scn_buf_add_u64(b, f->ids[i]);
      scn_buf_adds(b, ",\"m\":");
      scn_buf_add_matrix(b, f->matrices[i]);
      scn_buf_addc(b, '}');
    }
    scn_buf_addc(b, ']');
  }
  scn_buf_adds(b, ",\"removed\":");
  scn_buf_add_id_list(b, f->removed, f->nremoved);
  scn_buf_addc(b, '}');
  return b->failed ? NULL : cJSON_ParseWithLength(b->data, b->len);
}

/* A packed frame (its header in f, its payload's base64 at b64): decoded against its
 * subscription's baseline, then handed to the frame handler, or to the event handler as a
 * frame of this connection's form. 1 (also when the frame was refused), or a negative code
 * (the reason in c->error). */
static int packed_frame(scn_cli *c, scn_cli_frame *f, const char *b64, size_t len) {
  char why[sizeof c->held];
  int rc = cli_packed_decode(&c->packed, f->sub, f->full, b64, len, why, sizeof why);
  if (rc != 0)
    return held(c, rc, why);
  const scn_packed_frame *pf = &c->packed.frame;
  f->n = pf->n;
  f->ids = pf->ids;
  f->matrices = (const float(*)[16])pf->m;
  f->nremoved = pf->removed_n;
  f->removed = pf->removed;
  f->packed = true;
  if (c->on_frame) {
    c->on_frame(c->frame_ud, f);
  } else if (c->on_event) {
    cJSON *ev = packed_event(c, f);
    if (!ev)
      return fail(c, SCN_CLI_ENOMEM, "out of memory");
    c->on_event(c->event_ud, ev);
    cJSON_Delete(ev);
  }
  return 1;
}

/* A frame line read without cJSON: 1 when it was a packed frame, or a b64 one for the frame
 * handler, and went to its handler; 0 when it is neither (a json frame, a b64 one without a
 * frame handler, or not a frame); a negative code when it does not decode. */
static int scan_frame(scn_cli *c, const char *line, size_t len) {
  scan s = {line, line + len};
  scn_cli_frame f = {.world = c->world};
  const char *ms = NULL, *packed = NULL, *at;
  size_t ms_len = 0, packed_len = 0, klen, vlen;
  bool esc, frame = false, has_ids = false;
  c->world[0] = '\0';
  if (!eat(&s, '{'))
    return 0;
  do {
    if (!scan_string(&s, &at, &klen, &esc) || esc || !eat(&s, ':'))
      return 0;
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(at, k, klen) == 0)
    bool ok = true;
    if (KEY("event")) {
      ok = scan_string(&s, &at, &vlen, &esc) && (frame = vlen == 5 && !memcmp(at, "frame", 5));
    } else if (KEY("sub")) {
      ok = scan_number(&s, &f.sub);
    } else if (KEY("tick")) {
      ok = scan_number(&s, &f.tick);
    } else if (KEY("world")) {
      ok = scan_string(&s, &at, &vlen, &esc) && !esc && vlen < sizeof c->world;
      if (ok)
        memcpy(c->world, at, vlen), c->world[vlen] = '\0';
    } else if (KEY("full")) {
      skip_ws(&s);
      f.full = s.end - s.p >= 4 && !memcmp(s.p, "true", 4);
      ok = skip_value(&s);
    } else if (KEY("packed")) {
      ok = scan_string(&s, &packed, &packed_len, &esc) && !esc;
    } else if (KEY("set") || (!c->on_frame && (KEY("ids") || KEY("ms") || KEY("removed")))) {
      return 0; /* the json form, or b64 for the event handler: cJSON reads it */
    } else if (KEY("ids")) {
      ok = has_ids = scan_ids(&s, &c->ids, &c->ids_cap, &f.n);
    } else if (KEY("removed")) {
      ok = scan_ids(&s, &c->removed, &c->removed_cap, &f.nremoved);
    } else if (KEY("ms")) {
      ok = scan_string(&s, &ms, &ms_len, &esc) && !esc;
    } else {
      ok = skip_value(&s);
    }
#undef KEY
    if (!ok)
      return 0;
  } while (eat(&s, ','));
  if (!eat(&s, '}') || !frame)
    return 0;
  if (packed)
    return packed_frame(c, &f, packed, packed_len);
  if (!has_ids || !ms)
    return 0;
  if (!room(&c->ms, &c->ms_cap, f.n ? f.n : 1, sizeof *c->ms))
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  if (scn_b64_decode_matrices(ms, ms_len, c->ms, f.n, NULL) != SCN_B64_OK)
    return fail(c, SCN_CLI_EPROTO, "a frame whose \"ms\" is not the base64 of its matrices");
  f.ids = c->ids;
  f.matrices = (const float(*)[16])c->ms;
  f.removed = c->removed;
  c->on_frame(c->frame_ud, &f);
  return 1;
}

/* A frame's header parsed by cJSON (the world into c->world). */
static scn_cli_frame frame_header(scn_cli *c, const cJSON *ev) {
  scn_cli_frame f = {.world = c->world};
  const cJSON *v;
  if ((v = cJSON_GetObjectItemCaseSensitive(ev, "sub")) && cJSON_IsNumber(v))
    f.sub = v->valuedouble;
  if ((v = cJSON_GetObjectItemCaseSensitive(ev, "tick")) && cJSON_IsNumber(v))
    f.tick = v->valuedouble;
  f.full = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "full"));
  v = cJSON_GetObjectItemCaseSensitive(ev, "world");
  snprintf(c->world, sizeof c->world, "%s", cJSON_IsString(v) ? v->valuestring : "");
  return f;
}

/* A frame parsed by cJSON (either form) to the frame handler; false when it is malformed. */
static bool json_frame(scn_cli *c, const cJSON *ev) {
  scn_cli_frame f = frame_header(c, ev);
  const cJSON *set = cJSON_GetObjectItemCaseSensitive(ev, "set");
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(ev, "ids");
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(ev, "ms");
  size_t n = (size_t)cJSON_GetArraySize(cJSON_IsArray(set) ? set : ids);
  if (!room(&c->ids, &c->ids_cap, n + 1, sizeof *c->ids) ||
      !room(&c->ms, &c->ms_cap, n + 1, sizeof *c->ms))
    return false;
  const cJSON *x = cJSON_IsArray(set) ? set->child : cJSON_IsArray(ids) ? ids->child : NULL;
  for (; x; x = x->next, f.n++) {
    const cJSON *e = cJSON_IsArray(set) ? cJSON_GetObjectItemCaseSensitive(x, "e") : x;
    if (!cJSON_IsNumber(e) ||
        (cJSON_IsArray(set) &&
         scn_cli_matrix_get(cJSON_GetObjectItemCaseSensitive(x, "m"), c->ms[f.n]) != 0))
      return false;
    c->ids[f.n] = (uint64_t)e->valuedouble;
  }
  if (!cJSON_IsArray(set) &&
      (!cJSON_IsString(ms) || scn_b64_decode_matrices(ms->valuestring, strlen(ms->valuestring),
                                                      c->ms, f.n, NULL) != SCN_B64_OK))
    return false;
  const cJSON *removed = cJSON_GetObjectItemCaseSensitive(ev, "removed");
  if (!room(&c->removed, &c->removed_cap, (size_t)cJSON_GetArraySize(removed) + 1,
            sizeof *c->removed))
    return false;
  cJSON_ArrayForEach(x, removed) c->removed[f.nremoved++] = (uint64_t)x->valuedouble;
  f.ids = c->ids;
  f.matrices = (const float(*)[16])c->ms;
  f.removed = c->removed;
  c->on_frame(c->frame_ud, &f);
  return true;
}

/* An event parsed by cJSON to its handler: 1, or a negative code. */
static int event(scn_cli *c, const cJSON *ev) {
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(ev, "event");
  bool frame = cJSON_IsString(kind) && strcmp(kind->valuestring, "frame") == 0;
  const cJSON *packed = frame ? cJSON_GetObjectItemCaseSensitive(ev, "packed") : NULL;
  if (packed) {
    scn_cli_frame f = frame_header(c, ev);
    if (!cJSON_IsString(packed)) {
      cli_packed_lost(&c->packed, f.sub);
      return held(c, SCN_CLI_EPROTO, "a packed frame whose \"packed\" is not a string");
    }
    return packed_frame(c, &f, packed->valuestring, strlen(packed->valuestring));
  }
  if (frame && c->on_frame)
    return json_frame(c, ev) ? 1 : fail(c, SCN_CLI_EPROTO, "a frame that is not one");
  if (!frame)
    cli_packed_event(&c->packed, ev);
  if (c->on_event)
    c->on_event(c->event_ud, ev);
  return 1;
}

/* The next line that is not an event: a response (*out, the caller deletes it). Events met on
 * the way go to the handlers; with events_only, SCN_CLI_OK and *out NULL after one event. */
static int next_message(scn_cli *c, int timeout_ms, bool events_only, cJSON **out) {
  static const char frame_start[] = "{\"event\":\"frame\"";
  *out = NULL;
  for (;;) {
    const char *line;
    size_t len;
    int rc = scn_cli_read_line(c, &line, &len, timeout_ms);
    if (rc != SCN_CLI_OK)
      return rc;
    int fr = 0;
    if (len > sizeof frame_start && memcmp(line, frame_start, sizeof frame_start - 1) == 0)
      fr = scan_frame(c, line, len);
    if (fr == 0) {
      cJSON *j = cJSON_ParseWithLength(line, len);
      if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return fail(c, SCN_CLI_EPROTO, "the daemon sent a line that is not a JSON object");
      }
      if (!is_event(j)) {
        cli_packed_answer(&c->packed, j);
        *out = j;
        return SCN_CLI_OK;
      }
      fr = event(c, j);
      cJSON_Delete(j);
    }
    if (fr < 0)
      return fr;
    if (events_only)
      return SCN_CLI_OK;
  }
}

int scn_cli_read_response(scn_cli *c, cJSON **out) {
  return next_message(c, c->timeout_ms, false, out);
}

const char *scn_cli_reply_code(const cJSON *r) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
  const cJSON *code = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
  return cJSON_IsString(code) ? code->valuestring : NULL;
}

const char *scn_cli_reply_message(const cJSON *r) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
  const cJSON *m = e ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;
  return cJSON_IsString(m) ? m->valuestring : NULL;
}

static int finish_call(scn_cli *c, cJSON **out) {
  cJSON *r;
  int rc = scn_cli_read_response(c, &r);
  if (rc != SCN_CLI_OK)
    return rc;
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"))) {
    const char *code = scn_cli_reply_code(r), *msg = scn_cli_reply_message(r);
    rc = fail(c, SCN_CLI_EREPLY, "%s: %s", code ? code : "ERROR", msg ? msg : "");
  }
  if (out)
    *out = r;
  else
    cJSON_Delete(r);
  return rc;
}

/* One request (line, parsed as req when it names a world), one response. In a cluster, a
 * request for a world goes to the daemon last known to own it, and a MOVED answer is followed
 * (a few hops at most), the owner remembered. */
static int call(scn_cli *c, const char *line, size_t len, const cJSON *req, cJSON **out) {
  const char *world = c->no_follow ? NULL : request_world(req);
  const char *known = world ? owner_of(c, world) : NULL;
  if (known && strcmp(known, c->addr) != 0 && c->out.len == 0)
    reconnect(c, known); /* on failure the request goes where it would have */
  for (int hops = 0;; hops++) {
    if (out)
      *out = NULL;
    cJSON *r = NULL;
    int rc = scn_cli_send_line(c, line, len);
    if (rc == SCN_CLI_OK)
      rc = finish_call(c, &r);
    const char *code = rc == SCN_CLI_EREPLY ? scn_cli_reply_code(r) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
    const cJSON *addr = cJSON_GetObjectItemCaseSensitive(e, "addr");
    if (!world || !code || strcmp(code, "MOVED") != 0 || !cJSON_IsString(addr) ||
        hops == MAX_HOPS) {
      if (out)
        *out = r;
      else
        cJSON_Delete(r);
      return rc;
    }
    remember_owner(c, world, addr->valuestring);
    int moved = reconnect(c, addr->valuestring);
    if (moved != SCN_CLI_OK) {
      if (out)
        *out = r;
      else
        cJSON_Delete(r);
      return moved;
    }
    cJSON_Delete(r);
  }
}

int scn_cli_call(scn_cli *c, const cJSON *req, cJSON **out) {
  char *text = cJSON_PrintUnformatted(req);
  if (!text)
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  int rc = call(c, text, strlen(text), req, out);
  cJSON_free(text);
  return rc;
}

int scn_cli_call_line(scn_cli *c, const char *line, cJSON **out) {
  cJSON *req = c->no_follow ? NULL : cJSON_Parse(line);
  int rc = call(c, line, strlen(line), req, out);
  cJSON_Delete(req);
  return rc;
}

/* The sub of a subscribe answer into *sub. */
static int subscribed(scn_cli *c, int rc, const cJSON *r, double *sub) {
  if (rc != SCN_CLI_OK)
    return rc;
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "sub");
  if (!cJSON_IsNumber(s))
    return fail(c, SCN_CLI_EPROTO, "subscribe answered without a sub id");
  *sub = s->valuedouble;
  return SCN_CLI_OK;
}

int scn_cli_subscribe(scn_cli *c, const char *world, double root, double hz, double *sub) {
  cJSON *fields = cJSON_CreateObject();
  if (!fields || (root > 0 && !cJSON_AddNumberToObject(fields, "root", root)) ||
      (hz > 0 && !cJSON_AddNumberToObject(fields, "hz", hz))) {
    cJSON_Delete(fields);
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  }
  int rc = scn_cli_subscribe_fields(c, world, fields, sub);
  cJSON_Delete(fields);
  return rc;
}

/* A request {"cmd":cmd, key:value (taken), and the members of fields but their own "cmd" and
 * key}; NULL when out of memory. */
static cJSON *request_with(const char *cmd, const char *key, cJSON *value, const cJSON *fields) {
  cJSON *req = cJSON_CreateObject();
  if (!req || !cJSON_AddStringToObject(req, "cmd", cmd) || !value ||
      !cJSON_AddItemToObject(req, key, value)) {
    cJSON_Delete(value);
    cJSON_Delete(req);
    return NULL;
  }
  const cJSON *m;
  cJSON_ArrayForEach(m, fields) {
    if (!m->string || !strcmp(m->string, "cmd") || !strcmp(m->string, key))
      continue;
    cJSON *copy = cJSON_Duplicate(m, true);
    if (!copy || !cJSON_AddItemToObject(req, m->string, copy)) {
      cJSON_Delete(copy);
      cJSON_Delete(req);
      return NULL;
    }
  }
  return req;
}

int scn_cli_subscribe_fields(scn_cli *c, const char *world, const cJSON *fields, double *sub) {
  if (fields && !cJSON_IsObject(fields))
    return fail(c, SCN_CLI_EINVAL, "subscribe fields must be a JSON object");
  cJSON *req = request_with("subscribe", "world", cJSON_CreateString(world), fields), *r = NULL;
  if (!req)
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  int rc = scn_cli_call(c, req, &r);
  cJSON_Delete(req);
  rc = subscribed(c, rc, r, sub);
  cJSON_Delete(r);
  return rc;
}

int scn_cli_subscribe_text(scn_cli *c, const char *world, const char *fields, double *sub) {
  cJSON *f = fields && *fields ? cJSON_Parse(fields) : NULL;
  if (fields && *fields && !cJSON_IsObject(f)) {
    cJSON_Delete(f);
    return fail(c, SCN_CLI_EINVAL, "subscribe fields are not a JSON object: %s", fields);
  }
  int rc = scn_cli_subscribe_fields(c, world, f, sub);
  cJSON_Delete(f);
  return rc;
}

int scn_cli_subscribe_update_fields(scn_cli *c, double sub, const cJSON *fields) {
  if (fields && !cJSON_IsObject(fields))
    return fail(c, SCN_CLI_EINVAL, "subscribe.update fields must be a JSON object");
  cJSON *req = request_with("subscribe.update", "sub", cJSON_CreateNumber(sub), fields);
  if (!req)
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  int rc = scn_cli_call(c, req, NULL);
  cJSON_Delete(req);
  return rc;
}

int scn_cli_subscribe_update(scn_cli *c, double sub, const cJSON *near) {
  if (near && !cJSON_IsObject(near))
    return fail(c, SCN_CLI_EINVAL, "near must be a JSON object (NULL sends null)");
  cJSON *fields = cJSON_CreateObject();
  cJSON *value = near ? cJSON_Duplicate(near, true) : cJSON_CreateNull();
  if (!fields || !value || !cJSON_AddItemToObject(fields, "near", value)) {
    cJSON_Delete(value);
    cJSON_Delete(fields);
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  }
  int rc = scn_cli_subscribe_update_fields(c, sub, fields);
  cJSON_Delete(fields);
  return rc;
}

/* The refusal of a packed frame, held until now (see held). */
static int held_error(scn_cli *c) {
  int rc = c->held_rc;
  c->held_rc = 0;
  memcpy(c->error, c->held, sizeof c->error);
  return rc;
}

int scn_cli_poll_events(scn_cli *c, int timeout_ms) {
  int count = 0;
  long deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
  for (;;) {
    cJSON *j;
    int left = (int)(deadline - now_ms());
    if (c->held_rc) /* a refused packed frame is not counted */
      return count ? count : held_error(c);
    int rc = next_message(c, count ? 0 : (left > 0 ? left : 0), true, &j);
    if (rc == SCN_CLI_ETIMEOUT)
      return count;
    if (rc != SCN_CLI_OK)
      return count ? count : rc;
    if (j) {
      cJSON_Delete(j);
      return fail(c, SCN_CLI_EPROTO, "a response arrived while only events were expected");
    }
    if (!c->held_rc)
      count++;
  }
}

/* ---- parts of a transform --------------------------------------------------------------- */

static bool add_floats(cJSON *req, const char *key, const float *v, int n) {
  cJSON *a = cJSON_AddArrayToObject(req, key);
  for (int i = 0; a && i < n; i++)
    if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i])))
      return false;
  return a != NULL;
}

/* A request {"cmd":cmd,"world":world,"entity":entity}, NULL when out of memory. */
static cJSON *entity_request(const char *cmd, const char *world, double entity) {
  cJSON *req = cJSON_CreateObject();
  if (req && cJSON_AddStringToObject(req, "cmd", cmd) &&
      cJSON_AddStringToObject(req, "world", world) &&
      cJSON_AddNumberToObject(req, "entity", entity))
    return req;
  cJSON_Delete(req);
  return NULL;
}

int scn_cli_set_parts(scn_cli *c, const char *world, double entity, bool world_space,
                      const float t[3], const float r[4], const float s[3]) {
  cJSON *req =
      entity_request(world_space ? "transform.set_world" : "transform.set_local", world, entity);
  bool built = req && cJSON_AddTrueToObject(req, "partial") && (!t || add_floats(req, "t", t, 3)) &&
               (!r || add_floats(req, "r", r, 4)) && (!s || add_floats(req, "s", s, 3));
  int rc = built ? scn_cli_call(c, req, NULL) : fail(c, SCN_CLI_ENOMEM, "out of memory");
  cJSON_Delete(req);
  return rc;
}

/* The parts of o ({"t","r","s"} or null) into out; false when o is neither. */
static bool trs_of(const cJSON *o, scn_cli_trs *out) {
  out->valid = false;
  if (cJSON_IsNull(o))
    return true;
  if (!cJSON_IsObject(o) || !floats_of(cJSON_GetObjectItemCaseSensitive(o, "t"), out->t, 3) ||
      !floats_of(cJSON_GetObjectItemCaseSensitive(o, "r"), out->r, 4) ||
      !floats_of(cJSON_GetObjectItemCaseSensitive(o, "s"), out->s, 3))
    return false;
  out->valid = true;
  return true;
}

int scn_cli_get_at(scn_cli *c, const char *world, double entity, double tick, float local[16],
                   float world_m[16], double *now_tick) {
  cJSON *req = entity_request("transform.get", world, entity), *r = NULL;
  if (!req || (tick >= 0 && !cJSON_AddNumberToObject(req, "tick", tick))) {
    cJSON_Delete(req);
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  }
  int rc = scn_cli_call(c, req, &r);
  cJSON_Delete(req);
  float ignored[16];
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "tick");
  if (rc == SCN_CLI_OK && !(cJSON_IsNumber(t) &&
                            scn_cli_matrix_get(cJSON_GetObjectItemCaseSensitive(r, "local"),
                                               local ? local : ignored) == 0 &&
                            scn_cli_matrix_get(cJSON_GetObjectItemCaseSensitive(r, "world"),
                                               world_m ? world_m : ignored) == 0))
    rc = fail(c, SCN_CLI_EPROTO, "transform.get answered without tick, local and world");
  if (rc == SCN_CLI_OK && now_tick)
    *now_tick = t->valuedouble;
  cJSON_Delete(r);
  return rc;
}

int scn_cli_get_trs(scn_cli *c, const char *world, double entity, scn_cli_trs *local,
                    scn_cli_trs *world_trs) {
  cJSON *req = entity_request("transform.get", world, entity), *r = NULL;
  if (!req || !cJSON_AddTrueToObject(req, "trs")) {
    cJSON_Delete(req);
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  }
  int rc = scn_cli_call(c, req, &r);
  cJSON_Delete(req);
  scn_cli_trs ignored;
  if (rc == SCN_CLI_OK &&
      !(trs_of(cJSON_GetObjectItemCaseSensitive(r, "local_trs"), local ? local : &ignored) &&
        trs_of(cJSON_GetObjectItemCaseSensitive(r, "world_trs"), world_trs ? world_trs : &ignored)))
    rc = fail(c, SCN_CLI_EPROTO, "transform.get answered without local_trs and world_trs");
  cJSON_Delete(r);
  return rc;
}

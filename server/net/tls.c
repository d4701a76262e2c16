/* TLS sessions over memory BIOs (see tls.h): the server context loaded from the flags, one
 * SSL per connection, the handshake deadlines, and the module's figures.
 *
 * The session's BIO is a memory BIO of our own, in both directions. OpenSSL reads ciphertext
 * straight from the bytes the socket read; only what it leaves unread when scn_tls_input
 * returns (its consumer stopped, a handshake waits) is copied, to be read first next time.
 * Records OpenSSL writes are appended straight to the buffer that will be written to the
 * socket: the records of a flush are made in place, with no copy into OpenSSL's memory BIO and
 * out again (and none of the zeroing its buffer does as it grows). What OpenSSL writes on its
 * own (the handshake, alerts, close_notify) collects in the session until its owner takes it. */
#include "net/tls.h"

#include "ops/log.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Why a handshake failed, as the figures count it. */
#define SCN_TLS_FAILURES(X)                                                                        \
  X(timeout)            /* not completed within --tls-handshake-timeout */                         \
  X(not_tls)            /* the first bytes were not a TLS handshake (plain text, HTTP) */          \
  X(client_certificate) /* with --tls-ca: no client certificate, or one not signed by the CA */    \
  X(peer_refused)       /* the client sent an alert (it does not trust our certificate, ...) */    \
  X(closed)             /* the client went away before completing it */                            \
  X(protocol)           /* anything else: versions, ciphers, malformed messages */

typedef enum failure {
#define SCN_TLS_FAILURE_ENUM(name) F_##name,
  SCN_TLS_FAILURES(SCN_TLS_FAILURE_ENUM)
#undef SCN_TLS_FAILURE_ENUM
      F_COUNT
} failure;

/* Text without pointers: the table is read-only data, with nothing to relocate. */
static const char failure_names[][24] = {
#define SCN_TLS_FAILURE_NAME(name) #name,
    SCN_TLS_FAILURES(SCN_TLS_FAILURE_NAME)
#undef SCN_TLS_FAILURE_NAME
};

struct scn_tls {
  SSL *ssl;
  const char *src; /* ciphertext from the peer: what scn_tls_input was given, not yet read */
  size_t src_len;
  scn_buf rest; /* ciphertext left unread by an earlier scn_tls_input, read before src */
  size_t rest_off;
  scn_buf pending;     /* ciphertext OpenSSL wrote on its own, not yet taken */
  scn_buf *sink;       /* where the output BIO appends: pending, or a seal's destination */
  scn_tls_context *cx; /* the module's state: the context it was made from */
  scn_tls_port port;
  bool established, ended;     /* ended: its handshake's outcome is counted */
  uint64_t deadline;           /* while the handshake runs (uv_now ms) */
  struct scn_tls *prev, *next; /* sessions in their handshake, oldest first */
  bool waiting;
  const char *why; /* OpenSSL's reason for a failure */
  scn_tls_expired_fn expired;
  void *owner;
};

struct scn_tls_context {
  scn_server *srv;
  SSL_CTX *ctx;
  SSL_CTX *client_ctx; /* --replicas: a follower's sessions to its owners (NULL: none) */
  BIO_METHOD *bio_method;
  double cert_not_after; /* the certificate's expiry, Unix seconds */
  uv_timer_t timer;      /* the oldest handshake's deadline */
  scn_tls *head, *tail;  /* handshakes in progress */
  uint64_t handshakes[2];
  uint64_t failures[F_COUNT];
  scn_hooks hooks;
};

bool scn_tls_on(const scn_server *srv) { return srv->tls != NULL; }

/* ---- figures ------------------------------------------------------------------------------ */

static void collect_stats(void *ud, scn_metrics_sink *k) {
  const scn_tls_context *cx = ud;
  scn_metric_family(k, "tls_handshakes_total", "counter", "TLS handshakes completed, by port.");
  scn_metric_sample(k, "port", "protocol", (double)cx->handshakes[SCN_TLS_PROTOCOL]);
  scn_metric_sample(k, "port", "http", (double)cx->handshakes[SCN_TLS_HTTP]);
  scn_metric_end(k);
  scn_metric_family(k, "tls_handshake_failures_total", "counter",
                    "TLS handshakes that failed or timed out, by reason.");
  for (int i = 0; i < F_COUNT; i++)
    scn_metric_sample(k, "reason", failure_names[i], (double)cx->failures[i]);
  scn_metric_end(k);
  scn_metric(k, "tls_certificate_expiry_timestamp_seconds", "gauge",
             "When the certificate of --tls-cert expires (Unix time).", cx->cert_not_after);
}

/* ---- the context -------------------------------------------------------------------------- */

/* An encrypted key would make OpenSSL ask on the terminal: there is no one to answer. */
static int no_password(char *buf, int size, int rwflag, void *ud) {
  (void)buf, (void)size, (void)rwflag, (void)ud;
  return 0;
}

/* The last OpenSSL error as text (a static string), or what. */
static const char *ssl_reason(const char *what) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  return r ? r : what;
}

static int refuse(const char *flag, const char *path, const char *why) {
  fprintf(stderr, "scened: %s %s: %s\n", flag, path, why);
  return -1;
}

/* The file can be opened for reading (so that its error names the file, not OpenSSL). */
static bool readable(const char *flag, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    refuse(flag, path, strerror(errno));
    return false;
  }
  fclose(f);
  return true;
}

static double not_after(const X509 *cert) {
  struct tm tm;
  const ASN1_TIME *t = X509_get0_notAfter(cert);
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
    return 0;
  return (double)timegm(&tm);
}

/* With --replicas, a follower dials its group's owner over TLS as a client: it checks the
 * owner's certificate against --cluster-ca (else --tls-ca, else the system's store) and the
 * address it dials, and presents its own --tls-cert (for an owner whose --tls-ca asks for one). */
static int load_client_context(scn_tls_context *cx, const scn_config *cfg) {
  const char *ca = cfg->cluster_ca[0] ? cfg->cluster_ca : cfg->tls_ca;
  const char *flag = cfg->cluster_ca[0] ? "--cluster-ca" : "--tls-ca";
  if (ca[0] && !readable(flag, ca))
    return -1;
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx)
    return refuse("--tls-cert", cfg->tls_cert, "cannot set up TLS (out of memory)");
  cx->client_ctx = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_default_passwd_cb(ctx, no_password);
  ERR_clear_error();
  if (ca[0] ? SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1
            : SSL_CTX_set_default_verify_paths(ctx) != 1)
    return refuse(flag, ca[0] ? ca : "(the system's store)", "no usable PEM CA certificate in it");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1)
    return refuse("--tls-cert", cfg->tls_cert, "cannot be presented to other daemons");
  return 0;
}

static int load_context(scn_tls_context *cx, const scn_config *cfg) {
  if (!readable("--tls-cert", cfg->tls_cert) || !readable("--tls-key", cfg->tls_key) ||
      (cfg->tls_ca[0] && !readable("--tls-ca", cfg->tls_ca)))
    return -1;
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx)
    return refuse("--tls-cert", cfg->tls_cert, "cannot set up TLS (out of memory)");
  cx->ctx = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  /* No renegotiation (a client could make us repeat the costly part at will), no compression
   * (CRIME); the server's cipher order. */
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
  /* Forward secrecy and AEAD only, AES-128-GCM first: as safe here, and cheaper per byte than
   * AES-256 (a stream's frames are sealed once for each subscriber). */
  SSL_CTX_set_ciphersuites(
      ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                               "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                               "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305");
  /* Every connection makes a full handshake: no session cache, no tickets to issue. */
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_default_passwd_cb(ctx, no_password);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1)
    return refuse("--tls-cert", cfg->tls_cert,
                  "no usable PEM certificate in it (expected -----BEGIN CERTIFICATE-----)");
  ERR_clear_error();
  if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1) {
    int reason = ERR_GET_REASON(ERR_peek_last_error());
    if (reason == X509_R_KEY_VALUES_MISMATCH)
      return refuse("--tls-key", cfg->tls_key, "does not match the certificate of --tls-cert");
    return refuse("--tls-key", cfg->tls_key,
                  "no usable PEM private key in it (an unencrypted key is expected)");
  }
  ERR_clear_error();
  if (SSL_CTX_check_private_key(ctx) != 1)
    return refuse("--tls-key", cfg->tls_key, "does not match the certificate of --tls-cert");
  if (cfg->tls_ca[0]) {
    ERR_clear_error();
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_ca);
    if (!names || sk_X509_NAME_num(names) == 0 ||
        SSL_CTX_load_verify_locations(ctx, cfg->tls_ca, NULL) != 1) {
      sk_X509_NAME_pop_free(names, X509_NAME_free);
      return refuse("--tls-ca", cfg->tls_ca, "no usable PEM CA certificate in it");
    }
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  }
  X509 *cert = SSL_CTX_get0_certificate(ctx);
  cx->cert_not_after = cert ? not_after(cert) : 0;
  if (cfg->replicas > 0 && load_client_context(cx, cfg) != 0)
    return -1;
  double now = (double)time(NULL);
  if (cx->cert_not_after && cx->cert_not_after < now)
    scn_log(SCN_LOG_WARN, "the TLS certificate has expired: clients will refuse it", "cert=%s",
            cfg->tls_cert);
  return 0;
}

/* ---- the BIO ------------------------------------------------------------------------------- */

static size_t unread(const scn_tls *t) { return t->rest.len - t->rest_off + t->src_len; }

static int bio_read(BIO *b, char *out, int cap) {
  scn_tls *t = BIO_get_data(b);
  BIO_clear_retry_flags(b);
  bool from_rest = t->rest.len > t->rest_off;
  const char *p = from_rest ? t->rest.data + t->rest_off : t->src;
  size_t n = from_rest ? t->rest.len - t->rest_off : t->src_len;
  if (n == 0 || cap <= 0) {
    BIO_set_retry_read(b); /* more to come, not the end */
    return -1;
  }
  if (n > (size_t)cap)
    n = (size_t)cap;
  memcpy(out, p, n);
  if (!from_rest) {
    t->src += n;
    t->src_len -= n;
  } else if ((t->rest_off += n) == t->rest.len) {
    t->rest.len = t->rest_off = 0;
  }
  return (int)n;
}

static int bio_write(BIO *b, const char *data, int len) {
  scn_tls *t = BIO_get_data(b);
  scn_buf_add(t->sink, data, (size_t)len);
  return t->sink->failed ? -1 : len;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
  (void)num, (void)ptr;
  scn_tls *t = BIO_get_data(b);
  switch (cmd) {
  case BIO_CTRL_FLUSH:
    return 1; /* nothing is held back: it is all in the buffer */
  case BIO_CTRL_WPENDING:
    return t ? (long)t->pending.len : 0;
  case BIO_CTRL_PENDING:
    return t ? (long)unread(t) : 0;
  default:
    return 0;
  }
}

static int bio_create(BIO *b) {
  BIO_set_init(b, 1);
  return 1;
}

static bool make_bio_method(scn_tls_context *cx) {
  cx->bio_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "scened");
  return cx->bio_method && BIO_meth_set_read(cx->bio_method, bio_read) &&
         BIO_meth_set_write(cx->bio_method, bio_write) &&
         BIO_meth_set_ctrl(cx->bio_method, bio_ctrl) &&
         BIO_meth_set_create(cx->bio_method, bio_create);
}

int scn_tls_open(scn_server *srv) {
  if (!srv->cfg.tls_cert[0])
    return 0;
  scn_tls_context *cx = calloc(1, sizeof *cx);
  if (!cx)
    return refuse("--tls-cert", srv->cfg.tls_cert, "cannot set up TLS (out of memory)");
  cx->srv = srv;
  srv->tls = cx;
  int rc = load_context(cx, &srv->cfg);
  if (rc == 0 && !make_bio_method(cx))
    rc = refuse("--tls-cert", srv->cfg.tls_cert, "cannot set up TLS (out of memory)");
  if (rc != 0) {
    scn_tls_close(srv);
    return -1;
  }
  uv_timer_init(srv->loop, &cx->timer);
  cx->timer.data = cx;
  cx->hooks = (scn_hooks){.ud = cx, .collect_stats = collect_stats};
  scn_server_add_hooks(srv, &cx->hooks);
  return 0;
}

void scn_tls_close(scn_server *srv) {
  scn_tls_context *cx = srv->tls;
  if (!cx)
    return;
  if (cx->hooks.collect_stats)
    scn_server_remove_hooks(srv, &cx->hooks);
  SSL_CTX_free(cx->ctx);
  SSL_CTX_free(cx->client_ctx);
  BIO_meth_free(cx->bio_method);
  free(cx);
  srv->tls = NULL;
}

/* ---- handshake deadlines ------------------------------------------------------------------ */

static void unwait(scn_tls *t) {
  if (!t->waiting)
    return;
  scn_tls_context *cx = t->cx;
  if (t->prev)
    t->prev->next = t->next;
  else
    cx->head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    cx->tail = t->prev;
  t->prev = t->next = NULL;
  t->waiting = false;
}

static void on_deadline(uv_timer_t *timer);

static void arm(scn_tls_context *cx) {
  if (!cx->head) {
    uv_timer_stop(&cx->timer);
    return;
  }
  uint64_t now = uv_now(cx->srv->loop);
  uint64_t due = cx->head->deadline > now ? cx->head->deadline - now : 0;
  uv_timer_start(&cx->timer, on_deadline, due, 0);
}

static void count_failure(scn_tls *t, failure why) {
  if (t->ended)
    return;
  t->ended = true;
  t->cx->failures[why]++;
}

/* Every handshake past its deadline is cut off; their owners close the connections. */
static void on_deadline(uv_timer_t *timer) {
  scn_tls_context *cx = timer->data;
  uint64_t now = uv_now(timer->loop);
  while (cx->head && cx->head->deadline <= now) {
    scn_tls *t = cx->head;
    unwait(t);
    count_failure(t, F_timeout);
    t->expired(t->owner);
  }
  arm(cx);
}

/* ---- sessions ----------------------------------------------------------------------------- */

static scn_tls *session_new(scn_server *srv, SSL_CTX *ctx, scn_tls_port port,
                            scn_tls_expired_fn expired, void *owner);

scn_tls *scn_tls_new(scn_server *srv, scn_tls_port port, scn_tls_expired_fn expired, void *owner) {
  scn_tls *t = session_new(srv, srv->tls->ctx, port, expired, owner);
  if (t)
    SSL_set_accept_state(t->ssl);
  return t;
}

scn_tls *scn_tls_client_new(scn_server *srv, const char *host, scn_tls_expired_fn expired,
                            void *owner) {
  if (!srv->tls || !srv->tls->client_ctx)
    return NULL;
  scn_tls *t = session_new(srv, srv->tls->client_ctx, SCN_TLS_PROTOCOL, expired, owner);
  if (!t)
    return NULL;
  SSL_set_connect_state(t->ssl);
  /* The owner's certificate must name the address dialled: an IP address, or a host name
   * (also sent as SNI). */
  X509_VERIFY_PARAM *param = SSL_get0_param(t->ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (X509_VERIFY_PARAM_set1_ip_asc(param, host) != 1 &&
      (X509_VERIFY_PARAM_set1_host(param, host, 0) != 1 ||
       SSL_set_tlsext_host_name(t->ssl, host) != 1)) {
    scn_tls_free(t);
    return NULL;
  }
  return t;
}

static scn_tls *session_new(scn_server *srv, SSL_CTX *ctx, scn_tls_port port,
                            scn_tls_expired_fn expired, void *owner) {
  scn_tls_context *cx = srv->tls;
  scn_tls *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->cx = cx;
  t->ssl = SSL_new(ctx);
  BIO *bio = BIO_new(cx->bio_method);
  if (!t->ssl || !bio) {
    SSL_free(t->ssl);
    BIO_free(bio);
    free(t);
    return NULL;
  }
  BIO_set_data(bio, t);
  t->sink = &t->pending;
  SSL_set_bio(t->ssl, bio, bio); /* one reference, both ways */
  /* All the ciphertext there is in one read, not each record's header and then its body. */
  SSL_set_read_ahead(t->ssl, 1);
  t->port = port;
  t->expired = expired;
  t->owner = owner;
  uint64_t ms = (uint64_t)(srv->cfg.tls_handshake_timeout * 1000 + 0.5);
  t->deadline = uv_now(srv->loop) + ms;
  /* One timeout for all: the newest deadline is the latest, so the list stays in order. */
  t->prev = cx->tail;
  if (cx->tail)
    cx->tail->next = t;
  else
    cx->head = t;
  cx->tail = t;
  t->waiting = true;
  if (cx->head == t)
    arm(cx);
  return t;
}

void scn_tls_free(scn_tls *t) {
  if (!t)
    return;
  bool was_head = t->cx->head == t;
  unwait(t);
  if (was_head)
    arm(t->cx);
  count_failure(t, F_closed); /* nothing when it completed or was counted already */
  SSL_free(t->ssl);           /* and its BIO */
  scn_buf_free(&t->pending);
  scn_buf_free(&t->rest);
  free(t);
}

void scn_tls_set_owner(scn_tls *t, scn_tls_expired_fn expired, void *owner) {
  t->expired = expired;
  t->owner = owner;
}

bool scn_tls_established(const scn_tls *t) { return t->established; }

/* What went wrong in a handshake, from OpenSSL's error and the verification. */
static failure classify(const scn_tls *t) {
  unsigned long e = ERR_peek_last_error();
  int reason = ERR_GET_REASON(e);
  if (SSL_get_verify_result(t->ssl) != X509_V_OK ||
      reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE ||
      reason == SSL_R_CERTIFICATE_VERIFY_FAILED)
    return F_client_certificate;
  if (reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST ||
      reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_UNKNOWN_PROTOCOL ||
      reason == SSL_R_PACKET_LENGTH_TOO_LONG || reason == SSL_R_RECORD_LENGTH_MISMATCH ||
      reason == SSL_R_UNEXPECTED_RECORD)
    return F_not_tls;
  if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
    return F_peer_refused;
  return F_protocol;
}

/* SSL_get_error reads the thread's error queue, which must be empty before a TLS call; it
 * mostly is, and looking is cheaper than clearing it before every record. */
static void clear_errors(void) {
  if (ERR_peek_error())
    ERR_clear_error();
}

/* The handshake, then every record's plaintext to fn, from what the BIO holds. */
static scn_tls_status decrypt(scn_tls *t, scn_tls_plain_fn fn, void *ud) {
  if (!t->established) {
    clear_errors();
    int r = SSL_do_handshake(t->ssl);
    if (r != 1) {
      int e = SSL_get_error(t->ssl, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return SCN_TLS_OK;
      unwait(t);
      arm(t->cx);
      t->why = ssl_reason("the peer broke the protocol");
      count_failure(t, classify(t));
      return SCN_TLS_FAILED;
    }
    t->established = t->ended = true;
    t->cx->handshakes[t->port]++;
    unwait(t);
    arm(t->cx);
  }
  /* One record's plaintext at most per read (16 KiB). */
  char plain[16384];
  /* Reading on after the last record would only be told "want more". */
  while (unread(t) || SSL_has_pending(t->ssl)) {
    clear_errors();
    int r = SSL_read(t->ssl, plain, sizeof plain);
    if (r > 0) {
      if (!fn(ud, plain, (size_t)r))
        return SCN_TLS_STOPPED;
      continue;
    }
    switch (SSL_get_error(t->ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return SCN_TLS_OK;
    case SSL_ERROR_ZERO_RETURN:
      return SCN_TLS_CLOSED;
    default:
      t->why = ssl_reason("a bad record");
      return SCN_TLS_FAILED;
    }
  }
  return SCN_TLS_OK;
}

scn_tls_status scn_tls_input(scn_tls *t, const char *data, size_t len, scn_tls_plain_fn fn,
                             void *ud) {
  if (t->rest.len > t->rest_off) { /* behind what is left from before */
    scn_buf_consume(&t->rest, t->rest_off);
    t->rest_off = 0;
    scn_buf_add(&t->rest, data, len);
    if (t->rest.failed)
      return SCN_TLS_FAILED;
  } else {
    t->src = data;
    t->src_len = len;
  }
  scn_tls_status st = decrypt(t, fn, ud);
  if (t->src_len) { /* kept for the next call (rest is empty): data is the caller's */
    scn_buf_add(&t->rest, t->src, t->src_len);
    if (t->rest.failed)
      st = SCN_TLS_FAILED;
  }
  t->src = NULL;
  t->src_len = 0;
  return st;
}

static bool write_all(scn_tls *t, const char *p, size_t len) {
  while (len) {
    int k = len > (1u << 30) ? 1 << 30 : (int)len;
    int r = SSL_write(t->ssl, p, k);
    if (r <= 0)
      return false;
    p += r;
    len -= (size_t)r;
  }
  return true;
}

bool scn_tls_seal(scn_tls *t, const uv_buf_t *bufs, size_t n, scn_buf *dst) {
  if (!scn_tls_take(t, dst))
    return false;
  /* A record costs its header, tag and a cipher call: small pieces (a reply, a frame's
   * header) are gathered into full records. */
  char chunk[16384];
  size_t used = 0;
  bool ok = true;
  t->sink = dst;
  for (size_t i = 0; ok && i < n; i++) {
    const char *p = bufs[i].base;
    size_t len = bufs[i].len;
    if (used + len <= sizeof chunk) {
      memcpy(chunk + used, p, len);
      used += len;
      continue;
    }
    ok = !used || write_all(t, chunk, used);
    used = 0;
    if (ok && len >= sizeof chunk) {
      ok = write_all(t, p, len);
    } else if (ok) {
      memcpy(chunk, p, len);
      used = len;
    }
  }
  ok = ok && (!used || write_all(t, chunk, used));
  t->sink = &t->pending;
  return ok && !dst->failed;
}

size_t scn_tls_pending(const scn_tls *t) { return t->pending.len; }

bool scn_tls_take(scn_tls *t, scn_buf *dst) {
  if (t->pending.len == 0)
    return true;
  scn_buf_add(dst, t->pending.data, t->pending.len);
  t->pending.len = 0;
  if (t->pending.cap > 65536)
    scn_buf_free(&t->pending); /* a flood of alerts is not kept */
  return !dst->failed;
}

void scn_tls_shutdown(scn_tls *t) {
  if (t->established && !(SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN)) {
    clear_errors();
    SSL_shutdown(t->ssl);
  }
}

const char *scn_tls_describe(const scn_tls *t, char *buf, size_t cap) {
  if (t->why || !t->established) {
    snprintf(buf, cap, "%s", t->why ? t->why : "handshake incomplete");
    return buf;
  }
  snprintf(buf, cap, "%s %s", SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl));
  return buf;
}

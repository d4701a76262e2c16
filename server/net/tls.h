/* TLS on the daemon's ports (--tls-cert, --tls-key, --tls-ca). OpenSSL runs over memory BIOs,
 * so it does no I/O of its own and the loop stays non-blocking: a session sits between a
 * socket and the consumer of its plaintext (the protocol's line framer, the HTTP parser, the
 * WebSocket framing). What the socket reads goes in as ciphertext and comes out as plaintext;
 * what the consumer writes is sealed into ciphertext in the buffer its owner then writes to
 * the socket. A handshake that has not completed within
 * --tls-handshake-timeout is cut off: the owner is told to close the connection. */
#ifndef SCN_TLS_H
#define SCN_TLS_H

#include "buf.h"
#include "server.h"

typedef struct scn_tls scn_tls;
/* The module's state, srv->tls: the server context, the handshakes in progress, the figures. */
typedef struct scn_tls_context scn_tls_context;

/* Which port a session is on (for the figures). */
typedef enum scn_tls_port { SCN_TLS_PROTOCOL, SCN_TLS_HTTP } scn_tls_port;

/* Loads --tls-cert, --tls-key and --tls-ca of srv->cfg into srv->tls (nothing to do without
 * --tls-cert: srv->tls stays NULL) and registers the module's figures. 0, or -1 with one line
 * on stderr (a file that cannot be read or holds no PEM certificate or key, a key that does
 * not match the certificate). */
int scn_tls_open(scn_server *srv);
/* Frees srv->tls (at exit, once every session is freed and the loop's handles are closed). */
void scn_tls_close(scn_server *srv);
/* True when the ports speak TLS. */
bool scn_tls_on(const scn_server *srv);

/* Called when a session's handshake ran out of time; the owner closes its connection. */
typedef void (*scn_tls_expired_fn)(void *owner);

/* A server session for a newly accepted connection (only when scn_tls_on), its handshake timed
 * from now. NULL when out of memory. */
scn_tls *scn_tls_new(scn_server *srv, scn_tls_port port, scn_tls_expired_fn expired, void *owner);
/* A client session to another daemon of the cluster (a follower dialling its group's owner,
 * --replicas with --tls-cert), its handshake timed from now: the owner's certificate is checked
 * against --cluster-ca (else --tls-ca, else the system's store) and must name host (an address
 * or a name). Its first scn_tls_input (len 0) makes the ClientHello (scn_tls_take). NULL when
 * out of memory or without TLS. */
scn_tls *scn_tls_client_new(scn_server *srv, const char *host, scn_tls_expired_fn expired,
                            void *owner);
/* Frees the session (a handshake still in progress counts as failed). */
void scn_tls_free(scn_tls *t);
/* The session changes hands (an HTTP connection upgraded to a WebSocket). */
void scn_tls_set_owner(scn_tls *t, scn_tls_expired_fn expired, void *owner);

/* Receives plaintext; returns false to stop (what is left stays in the session). */
typedef bool (*scn_tls_plain_fn)(void *ud, const char *data, size_t len);

typedef enum scn_tls_status {
  SCN_TLS_OK,      /* everything given was taken in; the plaintext went to fn */
  SCN_TLS_STOPPED, /* fn asked to stop */
  SCN_TLS_CLOSED,  /* the peer sent close_notify: no more plaintext will come */
  SCN_TLS_FAILED   /* the handshake failed or a record was bad: close the connection (an alert
                      for the peer may wait in scn_tls_take) */
} scn_tls_status;

/* Ciphertext read from the socket (len 0: only what the session holds already). Advances the
 * handshake, then hands every complete record's plaintext to fn. What the handshake has to
 * send waits in the session (scn_tls_pending). */
scn_tls_status scn_tls_input(scn_tls *t, const char *data, size_t len, scn_tls_plain_fn fn,
                             void *ud);
bool scn_tls_established(const scn_tls *t);
/* Appends to dst the session's waiting ciphertext, then the pieces of plaintext sealed in
 * order (small pieces share records). False when out of memory. Only once established. */
bool scn_tls_seal(scn_tls *t, const uv_buf_t *bufs, size_t n, scn_buf *dst);
/* Ciphertext the session wrote on its own (handshake, alerts) waiting to be written, in bytes. */
size_t scn_tls_pending(const scn_tls *t);
/* Appends the waiting ciphertext to dst. False when out of memory. */
bool scn_tls_take(scn_tls *t, scn_buf *dst);
/* Queues close_notify (once established; the owner writes it before closing). */
void scn_tls_shutdown(scn_tls *t);
/* What the session is, for a log line: "TLSv1.3 TLS_AES_256_GCM_SHA384", or why it failed. */
const char *scn_tls_describe(const scn_tls *t, char *buf, size_t cap);

#endif

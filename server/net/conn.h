/* A client connection, whatever carries its bytes: its output queue and budget, its reading
 * state, and its lifecycle (new, admit, schedule a flush, flush, send, written, resume,
 * close). The transports (tcp.c, ws.c) turn input into request lines and output into what
 * goes on the wire; everything else about a connection is here, so requests, replies, events
 * and budgets behave the same on every transport. With TLS a session (tls.c) sits under the
 * transport: its input is decrypted before the transport sees it, and what it sends is sealed
 * on the way to the socket; until the handshake is done, only the handshake is written. */
#ifndef SCN_CONN_H
#define SCN_CONN_H

#include "framing.h"
#include "net/outq.h"
#include "server.h"

/* How a connection's bytes reach the peer: raw TCP lines (tcp.c) or WebSocket text messages
 * (ws.c). Only these steps differ between them. */
typedef struct scn_transport {
  const char *name;
  /* Hands the queued output (c->out) to the socket (through c->inflight and scn_conn_send),
   * unless a write is in progress. */
  void (*flush)(scn_conn *c);
  /* Starts (on) or stops reading requests; 0 on success. */
  int (*set_reading)(scn_conn *c, bool on);
  /* A deferred reply was written: runs the input held back while blocked. */
  void (*resume)(scn_conn *c);
  /* The connection is closing: release what the transport holds (may be NULL). */
  void (*closing)(scn_conn *c);
} scn_transport;

/* A place in a connection's output (its own bytes and its shared segments before it) and how
 * many waits hold it shut. */
typedef struct scn_conn_gate {
  size_t bytes, segs;
  uint32_t holds;
} scn_conn_gate;

struct scn_conn {
  uv_tcp_t tcp;
  const scn_transport *tp;
  scn_server *srv;
  scn_conn *prev, *next;
  uint64_t id;
  scn_framer framer;
  scn_outq out;      /* replies and events not yet handed to the socket */
  scn_outq inflight; /* the write in progress */
  uv_buf_t *iov;
  size_t iov_cap;
  uv_write_t write_req;
  bool writing;
  bool reading;
  bool closing;             /* close once the output has drained */
  bool authed;              /* --auth-token given, or none needed (without --acl) */
  scn_identity who;         /* --acl: the token hello named */
  scn_matrix_form matrices; /* how its responses and frames carry matrices (hello) */
  bool follower_reads;      /* reads may be answered from a follower's copy (hello) */
  bool rejected;            /* over --max-clients: one LIMIT line, then close */
  bool blocked;             /* waiting for a deferred reply: lines are held, not run */
  bool acked_write;         /* with --cluster: out holds an ok for a write to a group */
  char *pending_tag;        /* the id of a deferred reply (world.move), as JSON text */
  scn_buf held;             /* bytes read but not yet run while blocked */
  scn_conn *flush_next;     /* in the server's list of connections to flush */
  bool flush_queued;
  char peer[64];
  struct scn_sub *subs; /* this connection's subscriptions (stream.c) */
  struct scn_ws *ws;    /* WebSocket state (ws.c); NULL for TCP */
  size_t tp_queued;     /* output the transport holds besides out and inflight */
  struct scn_tls *tls;  /* the TLS session (tls.c); NULL on a plain connection */
  scn_buf sealed;       /* TLS: the ciphertext of the next write, being made */
  void *repl;           /* --replicas: the follower link it streams (cluster/replicate.c) */
  /* Gates in the output (--durability sync, cluster/sync.c): what was queued from a gate's
   * place on waits until the gate and those before it are opened; what precedes the first
   * flushes as usual, so replies leave in order and only those from a held one on wait. */
  scn_conn_gate *gates;
  size_t ngates, gates_cap;
  uint64_t gates_base; /* the number of gates[0] */
  scn_outq gated;      /* while a flush runs: the output the first gate holds back */
  bool gating;         /* that flush is running */
};

/* A WebSocket connection's output is lines, each one text message, and binary messages, each
 * queued as byte 0 (which starts no line), its length (u32, little-endian), then its bytes
 * (ws.c takes them apart). */
#define SCN_CONN_BINARY_MARK 0
#define SCN_CONN_BINARY_PREFIX 5
static inline void scn_conn_add_binary_start(scn_buf *out, uint32_t len) {
  char p[SCN_CONN_BINARY_PREFIX] = {SCN_CONN_BINARY_MARK, (char)len, (char)(len >> 8),
                                    (char)(len >> 16), (char)(len >> 24)};
  scn_buf_add(out, p, sizeof p);
}

static inline size_t scn_conn_queued(const scn_conn *c) {
  return scn_outq_size(&c->out) + scn_outq_size(&c->inflight) + c->tp_queued;
}

static inline bool scn_conn_gone(const scn_conn *c) {
  return uv_is_closing((const uv_handle_t *)&c->tcp);
}

/* Sets up the per-turn flush (once per loop). */
void scn_conn_init_loop(scn_server *srv);
/* A new connection of transport tp, in the server's list, its handle initialised (not yet
 * connected to a socket). NULL when out of memory. */
scn_conn *scn_conn_new(scn_server *srv, const scn_transport *tp);
/* Admits a connected connection: id, peer, authentication state, the --max-clients check (a
 * refused one gets its LIMIT line and closes). True when it may send requests. */
bool scn_conn_admit(scn_conn *c);
/* Gives the connection a TLS session (a new one when tls is NULL, else one taken over from
 * the HTTP port); its handshake is timed from its start. False when out of memory. */
bool scn_conn_use_tls(scn_conn *c, struct scn_tls *tls);
/* Takes the plaintext of a transport. */
typedef bool (*scn_conn_input_fn)(scn_conn *c, const char *data, size_t len);
/* Bytes read from the socket of a TLS connection (len 0: what the session holds already):
 * they advance the handshake, and their plaintext goes to consume (never for a connection
 * refused by --max-clients). False when the connection is going away. */
bool scn_conn_tls_input(scn_conn *c, const char *data, size_t len, scn_conn_input_fn consume);
/* True while the connection's TLS handshake runs. */
bool scn_conn_handshaking(const scn_conn *c);
/* True when the TLS session has ciphertext of its own to write (handshake, alerts). */
bool scn_conn_tls_pending(const scn_conn *c);
/* Writes c->inflight (which the transport has filled) to the socket, sealed by TLS on a TLS
 * connection: what the socket takes at once, the rest through a write request;
 * scn_conn_written follows, at once when everything was taken. */
void scn_conn_send(scn_conn *c);
/* Hands queued output to the transport. What must precede replies (the journal records of
 * the commands already run) goes first, through the before_flush hooks, whatever path the
 * flush comes from. */
void scn_conn_flush(scn_conn *c);
/* Shuts a gate at the end of what is queued now: what is queued from here on (the reply of the
 * command running, what follows) is not handed to the transport until scn_conn_gate_open has
 * been called once for each scn_conn_gate_shut that returned the gate's number (the same number
 * while nothing was queued in between). 0 when out of memory. */
uint64_t scn_conn_gate_shut(scn_conn *c);
/* One hold of gate number n ends; a flush is scheduled when output may now go. Unknown numbers
 * (gates dropped) are ignored. */
void scn_conn_gate_open(scn_conn *c, uint64_t n);
/* Drops what the first gate holds back and every gate (the connection is closing, or what was
 * held can never be released); what preceded it stays queued. */
void scn_conn_drop_gated(scn_conn *c);
static inline bool scn_conn_gated(const scn_conn *c) { return c->ngates > 0; }
/* Queues the connection for the flush that ends this loop turn. */
void scn_conn_schedule_flush(scn_conn *c);
/* Starts or stops reading as the output budget, blocking and closing require. */
void scn_conn_update_reading(scn_conn *c);
/* A write of the connection's output finished (status as from libuv). */
void scn_conn_written(scn_conn *c, int status);
/* A deferred reply was written: run the held lines and read again. */
void scn_conn_resume(scn_conn *c);
void scn_conn_close(scn_conn *c);
/* Stops reading from every connection and flushes what they have (shutdown). */
void scn_conn_stop_all(scn_server *srv);
/* True while some connection still has output to write. */
bool scn_conn_any_pending(const scn_server *srv);

#endif

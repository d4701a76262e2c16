/* The daemon's state: one libuv loop, the scene, the connections. Single-threaded: commands
 * apply in arrival order, which is what makes the contract's ordering simple. */
#ifndef SCN_SERVER_H
#define SCN_SERVER_H

#include "buf.h"
#include "codec.h"
#include "ops/config.h"
#include "framing.h"
#include "ops/metrics.h"
#include "net/outq.h"
#include "scn_core.h"

#include <uv.h>

typedef struct scn_server scn_server;
typedef struct scn_conn scn_conn;

/* How a connection's bytes reach the peer: raw TCP lines (net.c) or WebSocket text messages
 * (ws.c). Requests, replies, events, budgets and subscriptions are the same for both; only
 * these steps differ. */
typedef struct scn_transport {
  const char *name;
  /* Hands the queued output (c->out) to the socket, unless a write is in progress. */
  void (*flush)(scn_conn *c);
  /* Starts (on) or stops reading requests; 0 on success. */
  int (*set_reading)(scn_conn *c, bool on);
  /* A deferred reply was written: runs the input held back while blocked. */
  void (*resume)(scn_conn *c);
  /* The connection is closing: release what the transport holds (may be NULL). */
  void (*closing)(scn_conn *c);
} scn_transport;

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
  bool closing;     /* close once the output has drained */
  bool authed;
  bool rejected;    /* over --max-clients: one LIMIT line, then close */
  bool blocked;     /* waiting for a deferred reply: lines are held, not run */
  scn_buf held;     /* bytes read but not yet run while blocked */
  scn_conn *flush_next; /* in the server's list of connections to flush */
  bool flush_queued;
  char peer[64];
  struct scn_sub *subs; /* this connection's subscriptions */
  struct scn_ws *ws;    /* WebSocket state (ws.c); NULL for TCP */
  size_t tp_queued;     /* output the transport holds besides out and inflight */
};

typedef struct scn_stream_counters {
  uint64_t frames, frame_bytes, matrices, lags, resyncs, encodes;
} scn_stream_counters;

typedef struct scn_counters {
  uint64_t commands;
  uint64_t by_command[64];
  uint64_t errors[16];
  uint64_t connections_total;
  uint64_t rejected_clients;
  uint64_t bytes_in, bytes_out;
  uint64_t limit_hits[SCN_LIMIT_KINDS];
  uint64_t http_requests;
  scn_hist command_time, tick_time;
  scn_world_stats gone_worlds; /* propagation figures of destroyed worlds */
  scn_stream_counters stream;
} scn_counters;

struct scn_server {
  uv_loop_t *loop;
  scn_config cfg;
  scn_scene *scene;
  uv_tcp_t listener;
  uv_timer_t tick_timer;
  uv_timer_t shutdown_timer;
  uv_signal_t sigterm, sigint;
  scn_conn *conns;
  uint64_t nconns;
  uint64_t next_conn_id;
  bool stopping;
  uint64_t start_ms;
  scn_counters counters;
  scn_buf scratch;        /* per-command scratch output (batch results) */
  scn_buf reply;          /* the reply being built */
  struct scn_sub *subs;   /* every subscription */
  uint64_t nsubs, next_sub_id;
  uint64_t ticks;         /* tick timer firings */
  uint64_t command_clock; /* when the current command started (uv_hrtime) */
  scn_world *last_world;  /* the world the last command named; cleared when it is destroyed */
  uv_check_t commit_check; /* after each turn's I/O: journal commit, then replies */
  scn_conn *flush_list;
  scn_entity *ids;        /* scratch id list (entity.create, children) */
  size_t ids_cap;
};

/* Shutdown waits at most this long for replies to drain. */
#define SCN_DRAIN_LIMIT_MS 5000

/* net.c */
void scn_net_init(scn_server *srv);
int scn_net_listen(scn_server *srv);
static inline size_t scn_conn_queued(const scn_conn *c) {
  return scn_outq_size(&c->out) + scn_outq_size(&c->inflight) + c->tp_queued;
}
/* Hands queued output to the transport. Journal records of commands already run are written
 * (and fsynced under "always") first, whatever path the flush comes from, so no reply ever
 * leaves before its record. */
void scn_persist_commit(struct scn_server *srv);
static inline void scn_conn_flush(scn_conn *c) {
  scn_persist_commit(c->srv);
  c->tp->flush(c);
}
/* A new connection of transport tp, in the server's list, its handle initialised (not yet
 * connected to a socket). NULL when out of memory. */
scn_conn *scn_conn_new(scn_server *srv, const scn_transport *tp);
/* Admits a connected connection: id, peer, authentication state, the --max-clients check (a
 * refused one gets its LIMIT line and closes). True when it may send requests. */
bool scn_conn_admit(scn_conn *c);
/* Starts or stops reading as the output budget, blocking and closing require. */
void scn_conn_update_reading(scn_conn *c);
/* A write of the connection's output finished (status as from libuv): reading, the next
 * flush, and the resync of lagging subscriptions. */
void scn_conn_written(scn_conn *c, int status);
/* Queues the connection for the flush that follows the journal commit of this loop turn. */
void scn_conn_schedule_flush(scn_conn *c);
/* A deferred reply was written: run the held lines and read again. */
void scn_conn_resume(scn_conn *c);
void scn_conn_close(scn_conn *c);
void scn_server_begin_shutdown(scn_server *srv);

/* dispatch.c: handles one request line (NULL: a line over the limit) into c->out. */
void scn_dispatch_line(scn_conn *c, const char *line, size_t len);
/* Runs a journaled request line at start-up; true when it succeeded. */
bool scn_dispatch_replay(scn_server *srv, const char *line, size_t len);

/* stream.c */
void scn_stream_tick(scn_server *srv);
/* Frees frames still being written (at exit). */
void scn_stream_shutdown(scn_server *srv);
void scn_stream_world_destroyed(scn_server *srv, scn_world *w);
void scn_stream_conn_closed(scn_server *srv, scn_conn *c);
/* The connection's output drained below its budget: lagging subscriptions resync. */
void scn_stream_conn_drained(scn_server *srv, scn_conn *c);
uint64_t scn_stream_count(const scn_server *srv);
uint64_t scn_stream_lagging(const scn_server *srv);

/* http.c: the operations port, the staging view's files, and the WebSocket upgrade. */
int scn_http_listen(scn_server *srv);
/* Stops listening and closes the HTTP connections: the idle ones (the others once their
 * response is written), or all. */
void scn_http_close(scn_server *srv, bool all);

/* ws.c: WebSocket connections (RFC 6455) on the HTTP port. */
typedef struct scn_ws_handshake {
  char key[64], version[16], upgrade[64], connection[256], origin[256], host[256];
  bool too_long; /* a header was longer than its field */
} scn_ws_handshake;
/* Checks an upgrade request's headers. Returns 0 and the 101 response in *resp, or the HTTP
 * status to refuse it with (400, 403) and a reason. */
int scn_ws_check(const scn_server *srv, const scn_ws_handshake *hs, scn_buf *resp,
                 const char **why);
/* Takes over a socket whose upgrade was accepted: fd (a descriptor the caller no longer
 * uses), preface (bytes to send first: the 101 response), input (bytes already read after the
 * request). 0, or -1 when the connection could not be set up (fd is then closed). */
int scn_ws_accept(scn_server *srv, int fd, const char *preface, size_t preface_len,
                  const char *input, size_t input_len);

/* log.c */
void scn_log(int level, const char *msg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void scn_log_set_level(int level);
/* SCN_LOG_NOTICE prints as info at every level: lines that scripts wait for (listening on). */
enum { SCN_LOG_DEBUG, SCN_LOG_INFO, SCN_LOG_WARN, SCN_LOG_ERROR, SCN_LOG_NOTICE };

#endif

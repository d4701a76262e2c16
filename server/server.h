/* The daemon's state: one libuv loop, the scene, the connections. Single-threaded: commands
 * apply in arrival order, which is what makes the contract's ordering simple. */
#ifndef SCN_SERVER_H
#define SCN_SERVER_H

#include "buf.h"
#include "codec.h"
#include "config.h"
#include "framing.h"
#include "metrics.h"
#include "outq.h"
#include "scn_core.h"

#include <uv.h>

typedef struct scn_server scn_server;
typedef struct scn_conn scn_conn;

struct scn_conn {
  uv_tcp_t tcp;
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
  bool ready; /* accepting commands (not loading data) */
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
  return scn_outq_size(&c->out) + scn_outq_size(&c->inflight);
}
void scn_conn_flush(scn_conn *c);
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

/* http.c: the operations port. */
int scn_http_listen(scn_server *srv);
void scn_http_close(scn_server *srv);

/* log.c */
void scn_log(int level, const char *msg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void scn_log_set_level(int level);
/* SCN_LOG_NOTICE prints as info at every level: lines that scripts wait for (listening on). */
enum { SCN_LOG_DEBUG, SCN_LOG_INFO, SCN_LOG_WARN, SCN_LOG_ERROR, SCN_LOG_NOTICE };

#endif

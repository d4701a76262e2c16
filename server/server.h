/* The daemon's shared state: one libuv loop, the scene, the connections, and the hooks through
 * which modules hear of what happens. Single-threaded: commands apply in arrival order, which
 * is what makes the contract's ordering simple.
 *
 * Layers, lowest first: ops (log, config, metrics, readiness), store (persistence), net
 * (connections and their transports), stream (subscriptions), cluster (etcd, ownership and
 * routing), cmd (dispatch and commands), then main, which wires them. A layer calls only into
 * itself and the layers below it; news travels up through the hooks here, which a higher module
 * registers (make layering checks the calls). A module keeps its state in a struct reached from
 * here (make layering checks server/net for writable variables); a field written by several
 * modules has one owner with functions (readiness, the scene's worlds). */
#ifndef SCN_SERVER_H
#define SCN_SERVER_H

#include "buf.h"
#include "ops/acl.h"
#include "ops/config.h"
#include "ops/metrics.h"
#include "ops/readiness.h"
#include "scn_core.h"
#include "wire.h"

#include <stdbool.h>
#include <uv.h>

typedef struct scn_server scn_server;
typedef struct scn_conn scn_conn;

/* A command from a connection that succeeded, for the journal. */
typedef struct scn_done {
  const scn_command_info *cmd;
  const char *line; /* its request, as sent */
  size_t len;
  const char *world;         /* cluster: the world it named (world.create's too), or NULL;
                                a copy, valid even after the command freed the world */
  const scn_entity *created; /* with --data or --cluster: the ids it created, in order */
  size_t ncreated;
  scn_world *const *touched; /* entity.destroy with --cluster: the worlds that had it */
  size_t ntouched;
  uint32_t home; /* entity.destroy with --cluster: the entity's home tag (scn_entity_home) */
  /* With --cluster, world.destroy or entity.destroy with "entities": the entities it destroyed,
   * in order, each with its home tag; touched[i] had a transform of destroyed[touched_of[i]]
   * (world.destroy: none, its world is gone). Each journal that holds one of them records its
   * end on its own. */
  bool several;
  const scn_entity *destroyed;
  const uint32_t *destroyed_home;
  size_t ndestroyed;
  const uint32_t *touched_of;
} scn_done;

/* What a module wants to hear of. Every function may be NULL; ud is passed back. */
typedef struct scn_hooks {
  void *ud;
  /* A command from a connection succeeded. */
  void (*after_command)(void *ud, const scn_done *d);
  /* Replies are about to be handed to the sockets: what must precede them goes now. */
  void (*before_flush)(void *ud);
  /* A tick ran: every world closed its tick. */
  void (*on_tick)(void *ud);
  /* A connection is closing; its memory is freed after this turn of the loop. */
  void (*conn_closed)(void *ud, scn_conn *c);
  /* A write completed and the connection's output is at most half its budget. */
  void (*conn_drained)(void *ud, scn_conn *c);
  /* /metrics or info: write this module's figures. */
  void (*collect_stats)(void *ud, scn_metrics_sink *k);
} scn_hooks;

#define SCN_MAX_HOOKS 8

/* How many error codes the wire has. */
enum {
#define SCN_WIRE_CODE_ONE(name) +1
  SCN_WIRE_CODE_COUNT = 0 SCN_WIRE_ERRORS(SCN_WIRE_CODE_ONE)
#undef SCN_WIRE_CODE_ONE
};

typedef struct scn_counters {
  uint64_t commands;
  uint64_t by_command[SCN_COMMAND_COUNT];
  uint64_t errors[SCN_WIRE_CODE_COUNT];
  uint64_t unauthorized[SCN_COMMAND_COUNT]; /* UNAUTHORIZED answers, by command */
  uint64_t connections_total;
  uint64_t rejected_clients;
  uint64_t bytes_in, bytes_out;
  uint64_t limit_hits[SCN_LIMIT_KINDS];
  uint64_t http_requests;
  scn_hist command_time, tick_time;
  scn_world_stats gone_worlds; /* propagation figures of destroyed worlds */
} scn_counters;

/* Runs one request line from a connection (NULL: a line over --max-line). */
typedef void (*scn_line_fn_t)(scn_conn *c, const char *line, size_t len);

struct scn_server {
  uv_loop_t *loop;
  scn_config cfg;
  scn_scene *scene;
  bool stopping;
  uint64_t start_ms;
  scn_counters counters;
  scn_line_fn_t run_line; /* set by main: the dispatcher */
  scn_acl *acl;           /* --acl: the rules in force (replaced on SIGHUP); NULL without */
  const scn_hooks *hooks[SCN_MAX_HOOKS];
  int nhooks;

  /* connections (net/conn.c) */
  scn_conn *conns;
  uint64_t nconns;
  uint64_t next_conn_id;
  scn_conn *flush_list;    /* to flush after this turn's before_flush hooks */
  uv_check_t commit_check; /* runs them once per loop turn */
  uint64_t command_clock;  /* when the current command started (uv_hrtime) */

  scn_readiness readiness; /* why /readyz says 503 besides stopping (ops/readiness.h) */
  /* Moves on whenever a world leaves the scene, so that what remembers a world (the
   * dispatcher's last one) looks it up again: written by scn_server_drop_world and
   * scn_server_swap_scene only. */
  uint64_t worlds_gen;

  /* the network's modules (net/), opened by main */
  struct scn_tls_context *tls; /* with --tls-cert; NULL without */
  struct scn_tcp_state *tcp;   /* the protocol port */
  struct scn_http_state *http; /* the HTTP port; NULL with --http off */
  struct scn_ws_state *ws;     /* WebSocket connections (on the HTTP port) */

  /* the modules above, opened by main */
  struct scn_stream *stream;
  struct scn_persist *persist; /* NULL without --data, and with --cluster */
  struct scn_gstore *gstore;   /* with --cluster: persistence per group */
  struct scn_cluster *cluster; /* with --cluster */
  struct scn_dispatch *dispatch;
};

/* Adds a module's hooks (kept by reference; at most SCN_MAX_HOOKS). */
static inline void scn_server_add_hooks(scn_server *srv, const scn_hooks *h) {
  if (srv->nhooks < SCN_MAX_HOOKS)
    srv->hooks[srv->nhooks++] = h;
}

/* Removes them again (a module that closes before the server). */
static inline void scn_server_remove_hooks(scn_server *srv, const scn_hooks *h) {
  for (int i = 0; i < srv->nhooks; i++)
    if (srv->hooks[i] == h) {
      for (int j = i + 1; j < srv->nhooks; j++)
        srv->hooks[j - 1] = srv->hooks[j];
      srv->nhooks--;
      return;
    }
}

/* Tell every module that registered for it. */
static inline void scn_hooks_after_command(scn_server *srv, const scn_done *d) {
  for (int i = 0; i < srv->nhooks; i++)
    if (srv->hooks[i]->after_command)
      srv->hooks[i]->after_command(srv->hooks[i]->ud, d);
}
static inline void scn_hooks_before_flush(scn_server *srv) {
  for (int i = 0; i < srv->nhooks; i++)
    if (srv->hooks[i]->before_flush)
      srv->hooks[i]->before_flush(srv->hooks[i]->ud);
}
static inline void scn_hooks_on_tick(scn_server *srv) {
  for (int i = 0; i < srv->nhooks; i++)
    if (srv->hooks[i]->on_tick)
      srv->hooks[i]->on_tick(srv->hooks[i]->ud);
}
static inline void scn_hooks_conn_closed(scn_server *srv, scn_conn *c) {
  for (int i = 0; i < srv->nhooks; i++)
    if (srv->hooks[i]->conn_closed)
      srv->hooks[i]->conn_closed(srv->hooks[i]->ud, c);
}
static inline void scn_hooks_conn_drained(scn_server *srv, scn_conn *c) {
  for (int i = 0; i < srv->nhooks; i++)
    if (srv->hooks[i]->conn_drained)
      srv->hooks[i]->conn_drained(srv->hooks[i]->ud, c);
}
static inline void scn_hooks_collect_stats(scn_server *srv, scn_metrics_sink *k) {
  for (int i = 0; i < srv->nhooks; i++)
    if (srv->hooks[i]->collect_stats)
      srv->hooks[i]->collect_stats(srv->hooks[i]->ud, k);
}

/* ---- the scene's worlds ------------------------------------------------------------------ */

/* Destroys a world of the scene (world.destroy; a cluster group's worlds unloaded). Every path
 * that drops worlds goes through here, scn_server_drop_world_with or scn_server_swap_scene. */
static inline int scn_server_drop_world(scn_server *srv, const char *name) {
  srv->worlds_gen++;
  return scn_world_destroy(srv->scene, name);
}

/* Destroys a world of the scene with the entities ids (scn_world_destroy_with). */
static inline int scn_server_drop_world_with(scn_server *srv, const char *name,
                                             const scn_entity *ids, size_t n, size_t *failed) {
  srv->worlds_gen++;
  return scn_world_destroy_with(srv->scene, name, ids, n, failed);
}

/* Puts scene in the place of the server's (a replay into a scene of its own); returns the one
 * it replaces. */
static inline scn_scene *scn_server_swap_scene(scn_server *srv, scn_scene *scene) {
  scn_scene *was = srv->scene;
  srv->scene = scene;
  srv->worlds_gen++;
  return was;
}

/* Shutdown waits at most this long for replies to drain. */
#define SCN_DRAIN_LIMIT_MS 5000

#endif

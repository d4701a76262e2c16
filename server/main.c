/* scened: flags, signals, the tick, the modules wired together, the loop, and shutdown. */
#include "cluster/cluster.h"
#include "cmd/dispatch.h"
#include "net/conn.h"
#include "net/http.h"
#include "net/tcp.h"
#include "net/tls.h"
#include "ops/json_arena.h"
#include "ops/log.h"
#include "server.h"
#include "store/groups.h"
#include "store/persist.h"
#include "stream/stream.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Ticks follow an ideal schedule (start + k * period), so millisecond timer granularity does
 * not make the rate drift. */
static uint64_t tick_start_ns, tick_count;
static uv_timer_t tick_timer;

static void on_tick(uv_timer_t *t);

static void schedule_tick(scn_server *srv) {
  double period_ns = 1e9 / srv->cfg.tick_hz;
  uint64_t due = tick_start_ns + (uint64_t)((double)(tick_count + 1) * period_ns);
  uint64_t now = uv_hrtime();
  /* Fell far behind (a stalled machine): restart the schedule instead of bursting. */
  if (now > due + (uint64_t)(period_ns * 4)) {
    tick_start_ns = now;
    tick_count = 0;
    due = now + (uint64_t)period_ns;
  }
  uint64_t delay_ms = due > now ? (due - now + 999999) / 1000000 : 0;
  uv_timer_start(&tick_timer, on_tick, delay_ms, 0);
}

/* Every world closes its tick (propagating what changed), then the modules act on it. */
static void on_tick(uv_timer_t *t) {
  scn_server *srv = t->data;
  tick_count++;
  uint64_t t0 = uv_hrtime();
  for (size_t i = 0; i < scn_world_count(srv->scene); i++)
    scn_world_close_tick(scn_world_at(srv->scene, i));
  scn_hooks_on_tick(srv);
  scn_hist_observe(&srv->counters.tick_time, (double)(uv_hrtime() - t0) * 1e-9);
  if (!srv->stopping)
    schedule_tick(srv);
}

/* ---- shutdown ---------------------------------------------------------------------------- */

static uv_timer_t shutdown_timer;
static uint64_t shutdown_began;
static bool cluster_released;

static void stop_when_drained(scn_server *srv) {
  /* A save in progress is answered first (and the requests held behind it run): the writer
   * finishes on its own, whatever the clients do. In a cluster, the groups are released once
   * the replies have drained, and the daemon stops when that is done. */
  if (scn_persist_busy(srv->persist) || scn_cluster_busy(srv->cluster))
    return;
  if (uv_now(srv->loop) - shutdown_began > SCN_DRAIN_LIMIT_MS) {
    scn_log(SCN_LOG_WARN, "shutdown: gave up waiting for slow clients", "limit_ms=%d",
            SCN_DRAIN_LIMIT_MS);
    uv_stop(srv->loop);
    return;
  }
  if (scn_conn_any_pending(srv))
    return;
  if (srv->cluster && !cluster_released) {
    cluster_released = true;
    scn_cluster_release_all(srv->cluster);
    if (scn_cluster_busy(srv->cluster))
      return;
  }
  uv_stop(srv->loop);
}

static void on_shutdown_poll(uv_timer_t *t) { stop_when_drained(t->data); }

/* Stop accepting, answer what was already read (lines are handled as they arrive), stop
 * reading, and give the replies a bounded time to drain. */
static void begin_shutdown(scn_server *srv) {
  if (srv->stopping)
    return;
  srv->stopping = true;
  shutdown_began = uv_now(srv->loop);
  uv_timer_stop(&tick_timer);
  scn_log(SCN_LOG_INFO, "shutting down", "connections=%llu", (unsigned long long)srv->nconns);
  scn_tcp_close();
  scn_http_close(false);
  scn_conn_stop_all(srv);
  shutdown_timer.data = srv;
  uv_timer_start(&shutdown_timer, on_shutdown_poll, 0, 10);
}

/* ---- the access list ------------------------------------------------------------------- */

/* A subscription stays while its connection may still read its world. */
static bool may_still_read(void *ud, scn_conn *c, const char *world) {
  scn_server *srv = ud;
  const scn_acl_rule *r = scn_acl_rule_of(srv->acl, &c->who);
  return r && (r->rights & SCN_RIGHT(read)) && scn_acl_allows_world(r, world);
}

/* SIGHUP: the access list is read again. A file that does not parse leaves the rules in force;
 * a new one applies to every connection from its next command (by the hash of the token its
 * hello gave), and ends the subscriptions it no longer allows. */
static void on_hangup(uv_signal_t *h, int signum) {
  (void)signum;
  scn_server *srv = h->data;
  if (!srv->acl) {
    scn_log(SCN_LOG_INFO, "SIGHUP: nothing to reload (no --acl)", NULL);
    return;
  }
  char err[512];
  scn_acl *fresh;
  if (scn_acl_load(srv->cfg.acl, &fresh, err, sizeof err) != 0) {
    scn_log(SCN_LOG_WARN, "access list not reloaded: the rules in force stay", "error=\"%s\"", err);
    return;
  }
  fresh->generation = srv->acl->generation + 1;
  scn_acl_free(srv->acl);
  srv->acl = fresh;
  scn_stream_revoke(srv->stream, may_still_read, srv);
  scn_log(SCN_LOG_INFO, "access list reloaded", "file=%s rules=%zu", srv->cfg.acl, fresh->n);
}

static void on_signal(uv_signal_t *h, int signum) {
  scn_server *srv = h->data;
  if (srv->stopping) {
    scn_log(SCN_LOG_WARN, "second signal: exiting now", "signal=%d", signum);
    _exit(1);
  }
  scn_log(SCN_LOG_INFO, "signal received", "signal=%d", signum);
  begin_shutdown(srv);
}

/* SIGTERM or SIGINT before the loop handles signals: remembered, acted on once loaded. */
static volatile sig_atomic_t stop_while_loading;

static void on_early_signal(int signum) {
  if (stop_while_loading)
    _exit(1); /* asked twice: as on the loop, stop now */
  stop_while_loading = signum;
}

static void catch_stop_while_loading(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_early_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
}

/* Enough descriptors for --max-clients connections plus the daemon's own. */
static void raise_fd_limit(uint64_t max_clients) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return;
  rlim_t want = (rlim_t)max_clients + 64;
  if (rl.rlim_cur >= want)
    return;
  rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < want)
    scn_log(SCN_LOG_WARN, "open-file limit below max-clients", "nofile=%llu max_clients=%llu",
            (unsigned long long)rl.rlim_cur, (unsigned long long)max_clients);
}

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

int main(int argc, char **argv) {
  static scn_server srv;
  char err[512];
  switch (scn_config_load(&srv.cfg, argc, argv, err, sizeof err)) {
  case SCN_CONFIG_EXIT_OK:
    return 0;
  case SCN_CONFIG_EXIT_BAD:
    fprintf(stderr, "scened: %s\n", err);
    return 2;
  case SCN_CONFIG_RUN:
    break;
  }
  scn_log_set_level(srv.cfg.log_level);
  signal(SIGPIPE, SIG_IGN);
  raise_fd_limit(srv.cfg.max_clients);
  scn_json_arena_install();

  bool cluster = srv.cfg.cluster[0] != '\0';
  if (cluster && !scn_cluster_config_valid(&srv.cfg, err, sizeof err)) {
    fprintf(stderr, "scened: %s\n", err);
    return 2;
  }
  scn_limits limits = {.max_worlds = (uint32_t)srv.cfg.max_worlds,
                       .max_transforms = (uint32_t)srv.cfg.max_transforms};
  srv.scene = scn_scene_new(&limits);
  /* In a cluster, entity ids come from ranges etcd hands out, and are never reused. */
  if (srv.scene && cluster)
    scn_entity_use_ranges(srv.scene);
  /* The journal keeps the ids each command made, so a replay makes exactly those again. */
  if (srv.scene && (cluster || srv.cfg.data_dir[0]))
    scn_entity_record(srv.scene, true);
  srv.loop = uv_default_loop();
  if (!srv.scene) {
    fprintf(stderr, "scened: out of memory\n");
    return 1;
  }
  srv.start_ms = uv_now(srv.loop);
  scn_conn_init_loop(&srv);
  srv.run_line = scn_dispatch_line;
  srv.stream = scn_stream_open(&srv);
  srv.dispatch = scn_dispatch_open(&srv);
  if (!srv.stream || !srv.dispatch) {
    fprintf(stderr, "scened: out of memory\n");
    return 1;
  }
  /* The data is loaded before any port is bound, so a bad --data is the only line printed,
   * and a stop asked for while loading ends the start cleanly once the load is done (the
   * state is then what is on disk: nothing to save). */
  catch_stop_while_loading();
  if (srv.cfg.data_dir[0] && !cluster) {
    int rc;
    srv.persist = scn_persist_open(&srv, scn_dispatch_replay, &srv, &rc);
    if (!srv.persist)
      return rc;
    if (stop_while_loading) {
      scn_log(SCN_LOG_INFO, "stopped while loading", "signal=%d", (int)stop_while_loading);
      return 0;
    }
    scn_persist_start(srv.persist);
  }
  if (srv.cfg.acl[0]) {
    if (scn_acl_load(srv.cfg.acl, &srv.acl, err, sizeof err) != 0) {
      fprintf(stderr, "scened: --acl %s\n", err);
      return 2;
    }
    srv.acl->generation = 1;
  }
  if (scn_tls_open(&srv) != 0)
    return 2;
  if (scn_http_listen(&srv) != 0)
    return 2;
  if (scn_tcp_listen(&srv) != 0)
    return 2;
  if (cluster) {
    /* The node's name may come from the real port, so the cluster's data is opened once it
     * is bound; nothing is served before it is loaded (the loop has not run). */
    char advertise[160], node[SCN_NAME_MAX + 1];
    if (srv.cfg.advertise[0])
      snprintf(advertise, sizeof advertise, "%s", srv.cfg.advertise);
    else
      snprintf(advertise, sizeof advertise, "%s:%d", srv.cfg.listen.host, scn_tcp_port());
    scn_cluster_node_name(&srv.cfg, advertise, node, sizeof node);
    int rc;
    srv.gstore = scn_gstore_open(&srv, node, scn_dispatch_replay, &srv, &rc);
    if (!srv.gstore)
      return rc;
    scn_gstore_start(srv.gstore);
    srv.cluster = scn_cluster_open(&srv, node, advertise);
    if (!srv.cluster) {
      fprintf(stderr, "scened: cannot start the etcd client\n");
      return 1;
    }
  }
  scn_log(SCN_LOG_INFO, "started",
          "version=%s tick_hz=%g max_clients=%llu max_line=%llu "
          "max_worlds=%llu max_transforms=%llu output_limit=%llu auth=%s tls=%s log_level=%s",
          SCN_VERSION, srv.cfg.tick_hz, (unsigned long long)srv.cfg.max_clients,
          (unsigned long long)srv.cfg.max_line, (unsigned long long)srv.cfg.max_worlds,
          (unsigned long long)srv.cfg.max_transforms, (unsigned long long)srv.cfg.output_limit,
          srv.acl                 ? "acl"
          : srv.cfg.auth_token[0] ? "token"
                                  : "off",
          scn_tls_on() ? (srv.cfg.tls_ca[0] ? "on+client-certificates" : "on") : "off",
          scn_log_level_name(srv.cfg.log_level));

  uv_timer_init(srv.loop, &tick_timer);
  tick_timer.data = &srv;
  tick_start_ns = uv_hrtime();
  schedule_tick(&srv);
  uv_timer_init(srv.loop, &shutdown_timer);
  static uv_signal_t sigterm, sigint, sighup;
  uv_signal_init(srv.loop, &sigterm);
  uv_signal_init(srv.loop, &sigint);
  uv_signal_init(srv.loop, &sighup);
  sigterm.data = sigint.data = sighup.data = &srv;
  uv_signal_start(&sigterm, on_signal, SIGTERM);
  uv_signal_start(&sigint, on_signal, SIGINT);
  uv_signal_start(&sighup, on_hangup, SIGHUP);
  if (stop_while_loading) /* asked before the loop took the signals over */
    begin_shutdown(&srv);

  uv_run(srv.loop, UV_RUN_DEFAULT);
  /* A failed final snapshot loses nothing (the journal still holds every change, and the next
   * start replays it); it is logged, and the exit stays 0 as for any clean stop. */
  scn_persist_close(srv.persist);
  srv.persist = NULL;
  /* The groups were released (or may have been lost): the store writes only what the fence
   * allows, then the cluster goes (its held requests are dropped). */
  scn_gstore_close(srv.gstore);
  srv.gstore = NULL;
  scn_cluster *cl = srv.cluster;
  srv.cluster = NULL;
  scn_cluster_close(cl);

  /* Stopped: close every handle so memory checkers see a clean exit. */
  scn_http_close(true);
  while (srv.conns) {
    scn_conn *c = srv.conns;
    scn_conn_close(c);
    uv_run(srv.loop, UV_RUN_NOWAIT);
    if (srv.conns == c)
      break;
  }
  scn_stream_close(srv.stream);
  scn_dispatch_close(srv.dispatch);
  uv_walk(srv.loop, close_walk, NULL);
  uv_run(srv.loop, UV_RUN_DEFAULT);
  uv_loop_close(srv.loop);
  scn_tls_close();
  scn_log(SCN_LOG_INFO, "stopped", "commands=%llu", (unsigned long long)srv.counters.commands);
  scn_acl_free(srv.acl);
  scn_scene_free(srv.scene);
  scn_json_arena_uninstall();
  return 0;
}

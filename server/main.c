/* scened: flags, signals, the tick, the modules wired together, the loop, and shutdown. */
#include "cluster/cluster.h"
#include "cmd/dispatch.h"
#include "net/conn.h"
#include "net/http.h"
#include "net/tcp.h"
#include "net/tls.h"
#include "net/ws.h"
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

/* The daemon: the server, and what main keeps of its own (the tick, shutdown, signals). Every
 * handle's data is the daemon. */
typedef struct scened {
  scn_server srv;
  /* Ticks follow an ideal schedule (start + k * period), so millisecond timer granularity does
   * not make the rate drift. */
  uv_timer_t tick_timer;
  uint64_t tick_start_ns, tick_count;
  uv_timer_t shutdown_timer; /* polls until the replies have drained */
  uint64_t shutdown_began;
  bool cluster_released;
  uv_signal_t sigterm, sigint, sighup;
} scened;

static void on_tick(uv_timer_t *t);

static void schedule_tick(scened *d) {
  double period_ns = 1e9 / d->srv.cfg.tick_hz;
  uint64_t due = d->tick_start_ns + (uint64_t)((double)(d->tick_count + 1) * period_ns);
  uint64_t now = uv_hrtime();
  /* Fell far behind (a stalled machine): restart the schedule instead of bursting. */
  if (now > due + (uint64_t)(period_ns * 4)) {
    d->tick_start_ns = now;
    d->tick_count = 0;
    due = now + (uint64_t)period_ns;
  }
  uint64_t delay_ms = due > now ? (due - now + 999999) / 1000000 : 0;
  uv_timer_start(&d->tick_timer, on_tick, delay_ms, 0);
}

/* Every world closes its tick (propagating what changed), then the modules act on it. */
static void on_tick(uv_timer_t *t) {
  scened *d = t->data;
  scn_server *srv = &d->srv;
  d->tick_count++;
  uint64_t t0 = uv_hrtime();
  for (size_t i = 0; i < scn_world_count(srv->scene); i++) {
    scn_world *w = scn_world_at(srv->scene, i);
    /* a copy of another daemon's world closes its ticks at its owner's marks */
    if (!srv->cluster || !scn_cluster_follows_world(srv->cluster, scn_world_name(w)))
      scn_world_close_tick(w);
  }
  scn_hooks_on_tick(srv);
  scn_hist_observe(&srv->counters.tick_time, (double)(uv_hrtime() - t0) * 1e-9);
  if (!srv->stopping)
    schedule_tick(d);
}

/* ---- shutdown ---------------------------------------------------------------------------- */

static void stop_when_drained(scened *d) {
  scn_server *srv = &d->srv;
  /* A save in progress is answered first (and the requests held behind it run): the writer
   * finishes on its own, whatever the clients do. In a cluster, the groups are released once
   * the replies have drained, and the daemon stops when that is done. */
  if (scn_persist_busy(srv->persist) || scn_cluster_busy(srv->cluster))
    return;
  if (uv_now(srv->loop) - d->shutdown_began > SCN_DRAIN_LIMIT_MS) {
    scn_log(SCN_LOG_WARN, "shutdown: gave up waiting for slow clients", "limit_ms=%d",
            SCN_DRAIN_LIMIT_MS);
    uv_stop(srv->loop);
    return;
  }
  if (scn_conn_any_pending(srv))
    return;
  if (srv->cluster && !d->cluster_released) {
    d->cluster_released = true;
    scn_cluster_release_all(srv->cluster);
    if (scn_cluster_busy(srv->cluster))
      return;
  }
  uv_stop(srv->loop);
}

static void on_shutdown_poll(uv_timer_t *t) { stop_when_drained(t->data); }

/* Stop accepting, answer what was already read (lines are handled as they arrive), stop
 * reading, and give the replies a bounded time to drain. */
static void begin_shutdown(scened *d) {
  scn_server *srv = &d->srv;
  if (srv->stopping)
    return;
  srv->stopping = true;
  d->shutdown_began = uv_now(srv->loop);
  uv_timer_stop(&d->tick_timer);
  scn_log(SCN_LOG_INFO, "shutting down", "connections=%llu", (unsigned long long)srv->nconns);
  scn_tcp_close(srv);
  scn_http_close(srv, false);
  scn_conn_stop_all(srv);
  uv_timer_start(&d->shutdown_timer, on_shutdown_poll, 0, 10);
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
  scened *d = h->data;
  scn_server *srv = &d->srv;
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
  scened *d = h->data;
  if (d->srv.stopping) {
    scn_log(SCN_LOG_WARN, "second signal: exiting now", "signal=%d", signum);
    _exit(1);
  }
  scn_log(SCN_LOG_INFO, "signal received", "signal=%d", signum);
  begin_shutdown(d);
}

/* SIGTERM or SIGINT before the loop handles signals: remembered, acted on once loaded. A
 * signal handler is given no argument to find the daemon by, so this flag is the one piece of
 * main's state outside struct scened. */
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

/* ---- start ------------------------------------------------------------------------------ */

/* The scene, the loop and the modules every daemon has. 0, or the exit status. */
static int open_scene(scn_server *srv) {
  bool cluster = srv->cfg.cluster[0] != '\0';
  scn_limits limits = {.max_worlds = (uint32_t)srv->cfg.max_worlds,
                       .max_transforms = (uint32_t)srv->cfg.max_transforms};
  srv->scene = scn_scene_new(&limits);
  /* In a cluster, entity ids come from ranges etcd hands out, and are never reused. */
  if (srv->scene && cluster)
    scn_entity_use_ranges(srv->scene);
  /* The journal keeps the ids each command made, so a replay makes exactly those again. */
  if (srv->scene && (cluster || srv->cfg.data_dir[0]))
    scn_entity_record(srv->scene, true);
  srv->loop = uv_default_loop();
  if (!srv->scene) {
    fprintf(stderr, "scened: out of memory\n");
    return 1;
  }
  srv->start_ms = uv_now(srv->loop);
  scn_conn_init_loop(srv);
  srv->run_line = scn_dispatch_line;
  srv->stream = scn_stream_open(srv);
  srv->dispatch = scn_dispatch_open(srv);
  if (!srv->stream || !srv->dispatch || scn_ws_open(srv) != 0) {
    fprintf(stderr, "scened: out of memory\n");
    return 1;
  }
  return 0;
}

/* The access list, then the ports (which speak TLS when asked to). 0, or the exit status. */
static int open_ports(scn_server *srv) {
  char err[512];
  if (srv->cfg.acl[0]) {
    if (scn_acl_load(srv->cfg.acl, &srv->acl, err, sizeof err) != 0) {
      fprintf(stderr, "scened: --acl %s\n", err);
      return 2;
    }
    srv->acl->generation = 1;
  }
  if (scn_tls_open(srv) != 0 || scn_http_listen(srv) != 0 || scn_tcp_listen(srv) != 0)
    return 2;
  return 0;
}

/* The node's name may come from the real port, so the cluster's data is opened once it is
 * bound; nothing is served before it is loaded (the loop has not run). 0, or the exit
 * status. */
static int join_cluster(scn_server *srv) {
  char advertise[160], node[SCN_NAME_MAX + 1];
  if (srv->cfg.advertise[0])
    snprintf(advertise, sizeof advertise, "%s", srv->cfg.advertise);
  else
    snprintf(advertise, sizeof advertise, "%s:%d", srv->cfg.listen.host, scn_tcp_port(srv));
  scn_cluster_node_name(&srv->cfg, advertise, node, sizeof node);
  int rc;
  srv->gstore = scn_gstore_open(srv, node, scn_dispatch_replay, srv, &rc);
  if (!srv->gstore)
    return rc;
  scn_gstore_start(srv->gstore);
  srv->cluster = scn_cluster_open(srv, node, advertise);
  if (!srv->cluster) {
    fprintf(stderr, "scened: cannot start the etcd client\n");
    return 1;
  }
  return 0;
}

static void log_started(const scn_server *srv) {
  const scn_config *cfg = &srv->cfg;
  scn_log(SCN_LOG_INFO, "started",
          "version=%s tick_hz=%g max_clients=%llu max_line=%llu "
          "max_worlds=%llu max_transforms=%llu output_limit=%llu auth=%s tls=%s log_level=%s",
          SCN_VERSION, cfg->tick_hz, (unsigned long long)cfg->max_clients,
          (unsigned long long)cfg->max_line, (unsigned long long)cfg->max_worlds,
          (unsigned long long)cfg->max_transforms, (unsigned long long)cfg->output_limit,
          srv->acl             ? "acl"
          : cfg->auth_token[0] ? "token"
                               : "off",
          scn_tls_on(srv) ? (cfg->tls_ca[0] ? "on+client-certificates" : "on") : "off",
          scn_log_level_name(cfg->log_level));
}

/* The tick, the signals, and the loop until shutdown stops it. */
static void run(scened *d) {
  scn_server *srv = &d->srv;
  uv_timer_init(srv->loop, &d->tick_timer);
  d->tick_timer.data = d;
  d->tick_start_ns = uv_hrtime();
  schedule_tick(d);
  uv_timer_init(srv->loop, &d->shutdown_timer);
  d->shutdown_timer.data = d;
  uv_signal_init(srv->loop, &d->sigterm);
  uv_signal_init(srv->loop, &d->sigint);
  uv_signal_init(srv->loop, &d->sighup);
  d->sigterm.data = d->sigint.data = d->sighup.data = d;
  uv_signal_start(&d->sigterm, on_signal, SIGTERM);
  uv_signal_start(&d->sigint, on_signal, SIGINT);
  uv_signal_start(&d->sighup, on_hangup, SIGHUP);
  if (stop_while_loading) /* asked before the loop took the signals over */
    begin_shutdown(d);
  uv_run(srv->loop, UV_RUN_DEFAULT);
}

/* ---- stop -------------------------------------------------------------------------------- */

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

/* Stopped: every module closes, and every handle, so memory checkers see a clean exit. */
static void close_all(scn_server *srv) {
  /* A failed final snapshot loses nothing (the journal still holds every change, and the next
   * start replays it); it is logged, and the exit stays 0 as for any clean stop. */
  scn_persist_close(srv->persist);
  srv->persist = NULL;
  /* The groups were released (or may have been lost): the store writes only what the fence
   * allows, then the cluster goes (its held requests are dropped). */
  scn_gstore_close(srv->gstore);
  srv->gstore = NULL;
  scn_cluster *cl = srv->cluster;
  srv->cluster = NULL;
  scn_cluster_close(cl);

  scn_http_close(srv, true);
  while (srv->conns) {
    scn_conn *c = srv->conns;
    scn_conn_close(c);
    uv_run(srv->loop, UV_RUN_NOWAIT);
    if (srv->conns == c)
      break;
  }
  scn_stream_close(srv->stream);
  scn_dispatch_close(srv->dispatch);
  uv_walk(srv->loop, close_walk, NULL);
  uv_run(srv->loop, UV_RUN_DEFAULT);
  uv_loop_close(srv->loop);
  /* The network modules' memory holds handles: it goes once the loop is closed. */
  scn_tcp_free(srv);
  scn_http_free(srv);
  scn_ws_free(srv);
  scn_tls_close(srv);
  scn_log(SCN_LOG_INFO, "stopped", "commands=%llu", (unsigned long long)srv->counters.commands);
  scn_acl_free(srv->acl);
  scn_scene_free(srv->scene);
}

int main(int argc, char **argv) {
  /* In static storage, not main's frame: what it holds stays reachable when a failed start
   * returns early, so leak checkers do not count it as lost. */
  static scened d;
  scn_server *srv = &d.srv;
  char err[512];
  switch (scn_config_load(&srv->cfg, argc, argv, err, sizeof err)) {
  case SCN_CONFIG_EXIT_OK:
    return 0;
  case SCN_CONFIG_EXIT_BAD:
    fprintf(stderr, "scened: %s\n", err);
    return 2;
  case SCN_CONFIG_RUN:
    break;
  }
  scn_log_set_level(srv->cfg.log_level);
  signal(SIGPIPE, SIG_IGN);
  raise_fd_limit(srv->cfg.max_clients);
  scn_json_arena_install();

  bool cluster = srv->cfg.cluster[0] != '\0';
  if (cluster && !scn_cluster_config_valid(&srv->cfg, err, sizeof err)) {
    fprintf(stderr, "scened: %s\n", err);
    return 2;
  }
  int rc = open_scene(srv);
  if (rc != 0)
    return rc;
  /* The data is loaded before any port is bound, so a bad --data is the only line printed,
   * and a stop asked for while loading ends the start cleanly once the load is done (the
   * state is then what is on disk: nothing to save). */
  catch_stop_while_loading();
  if (srv->cfg.data_dir[0] && !cluster) {
    srv->persist = scn_persist_open(srv, scn_dispatch_replay, srv, &rc);
    if (!srv->persist)
      return rc;
    if (stop_while_loading) {
      scn_log(SCN_LOG_INFO, "stopped while loading", "signal=%d", (int)stop_while_loading);
      return 0;
    }
    scn_persist_start(srv->persist);
  }
  if ((rc = open_ports(srv)) != 0 || (cluster && (rc = join_cluster(srv)) != 0))
    return rc;
  log_started(srv);
  run(&d);
  close_all(srv);
  scn_json_arena_uninstall();
  return 0;
}

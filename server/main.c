/* scened: flags, signals, the tick timer, and the loop. */
#include "cmd/json_arena.h"
#include "store/persist.h"
#include "server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Ticks follow an ideal schedule (start + k * period), so millisecond timer granularity does
 * not make the rate drift. */
static uint64_t tick_start_ns, tick_count;

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
  uv_timer_start(&srv->tick_timer, on_tick, delay_ms, 0);
}

static void on_tick(uv_timer_t *t) {
  scn_server *srv = t->data;
  tick_count++;
  uint64_t t0 = uv_hrtime();
  scn_stream_tick(srv);
  scn_hist_observe(&srv->counters.tick_time, (double)(uv_hrtime() - t0) * 1e-9);
  if (!srv->stopping)
    schedule_tick(srv);
}

static void on_signal(uv_signal_t *h, int signum) {
  scn_server *srv = h->data;
  if (srv->stopping) {
    scn_log(SCN_LOG_WARN, "second signal: exiting now", "signal=%d", signum);
    _exit(1);
  }
  scn_log(SCN_LOG_INFO, "signal received", "signal=%d", signum);
  scn_server_begin_shutdown(srv);
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

  scn_limits limits = {.max_worlds = (uint32_t)srv.cfg.max_worlds,
                       .max_transforms = (uint32_t)srv.cfg.max_transforms};
  srv.scene = scn_scene_new(&limits);
  srv.loop = uv_default_loop();
  if (!srv.scene) {
    fprintf(stderr, "scened: out of memory\n");
    return 1;
  }
  srv.start_ms = uv_now(srv.loop);
  scn_net_init(&srv);
  /* The data is loaded before any port is bound, so a bad --data is the only line printed,
   * and a stop asked for while loading ends the start cleanly once the load is done (the
   * state is then what is on disk: nothing to save). */
  catch_stop_while_loading();
  if (srv.cfg.data_dir[0]) {
    int rc = scn_persist_open(&srv);
    if (rc != 0)
      return rc;
    if (stop_while_loading) {
      scn_log(SCN_LOG_INFO, "stopped while loading", "signal=%d", (int)stop_while_loading);
      return 0;
    }
    scn_persist_start_timers(&srv);
  }
  if (scn_http_listen(&srv) != 0)
    return 2;
  if (scn_net_listen(&srv) != 0)
    return 2;
  scn_log(SCN_LOG_INFO, "started",
          "version=%s tick_hz=%g max_clients=%llu max_line=%llu "
          "max_worlds=%llu max_transforms=%llu output_limit=%llu auth=%s log_level=%s",
          SCN_VERSION, srv.cfg.tick_hz, (unsigned long long)srv.cfg.max_clients,
          (unsigned long long)srv.cfg.max_line, (unsigned long long)srv.cfg.max_worlds,
          (unsigned long long)srv.cfg.max_transforms, (unsigned long long)srv.cfg.output_limit,
          srv.cfg.auth_token[0] ? "on" : "off", scn_log_level_name(srv.cfg.log_level));

  uv_timer_init(srv.loop, &srv.tick_timer);
  srv.tick_timer.data = &srv;
  tick_start_ns = uv_hrtime();
  schedule_tick(&srv);
  uv_timer_init(srv.loop, &srv.shutdown_timer);
  uv_signal_init(srv.loop, &srv.sigterm);
  uv_signal_init(srv.loop, &srv.sigint);
  srv.sigterm.data = srv.sigint.data = &srv;
  uv_signal_start(&srv.sigterm, on_signal, SIGTERM);
  uv_signal_start(&srv.sigint, on_signal, SIGINT);
  if (stop_while_loading) /* asked before the loop took the signals over */
    scn_server_begin_shutdown(&srv);

  uv_run(srv.loop, UV_RUN_DEFAULT);
  /* A failed final snapshot loses nothing (the journal still holds every change, and the next
   * start replays it); it is logged, and the exit stays 0 as for any clean stop. */
  scn_persist_close(&srv);
  scn_stream_shutdown(&srv);

  /* Stopped: close every handle so memory checkers see a clean exit. */
  scn_http_close(&srv, true);
  while (srv.conns) {
    scn_conn *c = srv.conns;
    scn_conn_close(c);
    uv_run(srv.loop, UV_RUN_NOWAIT);
    if (srv.conns == c)
      break;
  }
  uv_walk(srv.loop, close_walk, NULL);
  uv_run(srv.loop, UV_RUN_DEFAULT);
  uv_loop_close(srv.loop);
  scn_log(SCN_LOG_INFO, "stopped", "commands=%llu", (unsigned long long)srv.counters.commands);
  scn_scene_free(srv.scene);
  scn_buf_free(&srv.scratch);
  free(srv.ids);
  scn_buf_free(&srv.reply);
  scn_json_arena_uninstall();
  return 0;
}

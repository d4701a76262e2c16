/* Fuzz target: the whole command path on a live in-memory daemon state. Each input line is
 * run as a request (as journal replay does, without a socket); after each one every world
 * must pass the core's consistency check (links, maps, order, world = parent world x local).
 * A line that starts with '>' runs instead on a connection without a socket (the rest of the
 * line is the request), so the commands replay refuses (subscribe with near or root,
 * subscribe.update, unsubscribe, hello) run too; then a tick runs, as the daemon's timer
 * would: every world closes its tick and the stream builds its frames (regions evaluated,
 * bands, centers destroyed), whose bytes the connection drops. */
#include "cmd/dispatch.h"
#include "net/conn.h"
#include "server.h"
#include "stream/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void drop_output(scn_conn *c) { scn_outq_clear(&c->out); }
static int reading(scn_conn *c, bool on) {
  (void)c;
  (void)on;
  return 0;
}
static void nothing(scn_conn *c) { (void)c; }
static const scn_transport socketless = {"fuzz", drop_output, reading, nothing, NULL};

/* The one connection, made once (a handle of the loop, never run nor closed). */
static scn_conn *the_conn(scn_server *srv) {
  static scn_conn c;
  static bool made;
  if (!made) {
    c.srv = srv;
    c.tp = &socketless;
    uv_tcp_init(srv->loop, &c.tcp);
    c.tcp.data = &c;
    made = true;
  }
  return &c;
}

static scn_server *fresh_server(void) {
  static scn_server srv;
  static bool configured;
  if (!configured) {
    char *argv[] = {"fuzz", NULL};
    char err[256];
    scn_config_load(&srv.cfg, 1, argv, err, sizeof err);
    srv.cfg.max_transforms = 2000;
    srv.cfg.max_worlds = 16;
    srv.loop = uv_default_loop();
    srv.stream = scn_stream_open(&srv);
    configured = true;
  }
  /* the last input's subscriptions end with their connection, before their worlds go */
  scn_conn *c = the_conn(&srv);
  scn_hooks_conn_closed(&srv, c);
  c->authed = true;
  c->matrices = SCN_MATRICES_JSON;
  c->blocked = false;
  /* a dispatcher per input: it caches the last world it found */
  scn_dispatch_close(srv.dispatch);
  srv.dispatch = scn_dispatch_open(&srv);
  scn_limits limits = {.max_worlds = 16, .max_transforms = 2000, .max_entities = 100000};
  scn_scene_free(srv.scene);
  srv.scene = scn_scene_new(&limits);
  return &srv;
}

static void check_all(scn_server *srv, const char *line, size_t len) {
  char err[256];
  for (size_t i = 0; i < scn_world_count(srv->scene); i++)
    if (scn_world_check(scn_world_at(srv->scene, i), err, sizeof err) != 0) {
      fprintf(stderr, "after %.*s: %s\n", (int)len, line, err);
      abort();
    }
}

/* A request on the connection, then a tick; what was written to it is dropped. */
static void run_on_conn(scn_server *srv, const char *line, size_t len) {
  scn_conn *c = the_conn(srv);
  scn_dispatch_line(c, line, len);
  c->blocked = false; /* nothing here answers later: no data directory, no cluster */
  for (size_t i = 0; i < scn_world_count(srv->scene); i++)
    scn_world_close_tick(scn_world_at(srv->scene, i));
  scn_hooks_on_tick(srv);
  while (srv->flush_list) {
    scn_conn *f = srv->flush_list;
    srv->flush_list = f->flush_next;
    f->flush_queued = false;
  }
  scn_outq_clear(&c->out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  scn_server *srv = fresh_server();
  const char *p = (const char *)data, *end = p + size;
  /* A world to start from, so short inputs reach the transform commands. */
  static const char seed[] = "{\"cmd\":\"world.create\",\"world\":\"w\"}";
  scn_dispatch_replay(srv, seed, sizeof seed - 1);
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (len && *p == '>')
      run_on_conn(srv, p + 1, len - 1);
    else
      scn_dispatch_replay(srv, p, len);
    check_all(srv, p, len);
    p += len + 1;
  }
  return 0;
}

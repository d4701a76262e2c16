/* Fuzz target: the whole command path on a live in-memory daemon state. Each input line is
 * run as a request (as journal replay does, without a socket); after each one every world
 * must pass the core's consistency check (links, maps, order, world = parent world x local). */
#include "cmd/dispatch.h"
#include "server.h"
#include "stream/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  scn_server *srv = fresh_server();
  const char *p = (const char *)data, *end = p + size;
  /* A world to start from, so short inputs reach the transform commands. */
  static const char seed[] = "{\"cmd\":\"world.create\",\"world\":\"w\"}";
  scn_dispatch_replay(srv, seed, sizeof seed - 1);
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    scn_dispatch_replay(srv, p, len);
    check_all(srv, p, len);
    p += len + 1;
  }
  return 0;
}

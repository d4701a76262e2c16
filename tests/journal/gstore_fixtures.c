#include "gstore_fixtures.h"

#include "cmd/dispatch.h"
#include "scene_compare.h"
#include "stream/stream.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

static void store_open(t_store *s, const char *dir, const char *node, bool slots,
                       uint32_t first_slot) {
  memset(s, 0, sizeof *s);
  char *argv[] = {"journal-tests", NULL};
  char err[256];
  scn_config_load(&s->srv.cfg, 1, argv, err, sizeof err);
  snprintf(s->srv.cfg.data_dir, sizeof s->srv.cfg.data_dir, "%s", dir);
  s->srv.loop = uv_default_loop();
  scn_limits limits = {.max_worlds = 16, .max_transforms = 1000};
  s->srv.scene = scn_scene_new(&limits);
  scn_entity_record(s->srv.scene, true);
  if (slots) {
    CU_ASSERT_FATAL(scn_entity_use_ranges(s->srv.scene) == SCN_OK);
    CU_ASSERT_FATAL(scn_entity_add_slots(s->srv.scene, first_slot, 1000) == SCN_OK);
  }
  s->srv.stream = scn_stream_open(&s->srv);
  s->srv.dispatch = scn_dispatch_open(&s->srv);
  int rc;
  s->gs = scn_gstore_open(&s->srv, node, scn_dispatch_replay, &s->srv, &rc);
  CU_ASSERT_FATAL(s->gs != NULL);
  s->srv.gstore = s->gs;
  scn_gstore_start(s->gs);
}

void t_store_open(t_store *s, const char *dir, const char *node) {
  store_open(s, dir, node, false, 0);
}

void t_store_open_slots(t_store *s, const char *dir, const char *node, uint32_t first_slot) {
  store_open(s, dir, node, true, first_slot);
}

void t_store_close(t_store *s) {
  scn_gstore_close(s->gs);
  scn_dispatch_close(s->srv.dispatch);
  scn_stream_close(s->srv.stream);
  scn_scene_free(s->srv.scene);
  uv_run(s->srv.loop, UV_RUN_NOWAIT);
}

void t_on_record(void *ud, const scn_gstore_record *rec) {
  t_shipped *s = ud;
  CU_ASSERT_FATAL(s->n < T_SHIPPED_MAX);
  size_t i = s->n++;
  snprintf(s->group[i], sizeof s->group[i], "%s", rec->group);
  s->bytes[i] = (scn_buf){0};
  scn_buf_add(&s->bytes[i], rec->bytes, rec->len);
  s->r[i] = *rec;
  s->r[i].group = s->group[i];
  s->r[i].bytes = s->bytes[i].data;
}

void t_run_ok(scn_conn *c, const char *line) {
  c->out.bytes.len = 0;
  scn_dispatch_line(c, line, strlen(line));
  scn_buf_addc(&c->out.bytes, '\0');
  if (!strstr(c->out.bytes.data, "\"ok\":true"))
    fprintf(stderr, "  %s -> %s", line, c->out.bytes.data);
  CU_ASSERT(strstr(c->out.bytes.data, "\"ok\":true") != NULL);
}

bool t_check_same_scene(scn_scene *a, scn_scene *b) {
  bool same = t_same_scene(a, b);
  if (!same)
    fprintf(stderr, "  the scenes differ: %s\n", t_scene_difference());
  return same;
}

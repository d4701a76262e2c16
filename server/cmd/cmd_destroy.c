/* The commands that end things: world.destroy and entity.destroy, with their "entities" forms
 * (a world with the entities only it used; a list of entities, all or none), so that a match
 * can end without leaving ids behind. */
#include "cmd/handlers.h"
#include "stream/stream.h"

#include <string.h>

typedef unsigned long long ull;

/* Room for what a cluster's journals need to know of n entities ending together. */
static int reserve_gone(scn_dispatch *d, size_t n, scn_wire_error *err) {
  uint32_t *h = scn_array_grow(d->gone_home, &d->gone_home_cap, sizeof *h, n + 1);
  if (!h)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  d->gone_home = h;
  return 0;
}

/* A world that had a transform of entity index i: its journal records the entity's end. */
static int note_touched(scn_dispatch *d, scn_world *w, size_t i, scn_wire_error *err) {
  size_t n = d->ntouched + 1;
  scn_world **t = scn_array_grow(d->touched, &d->touched_cap, sizeof *t, n);
  if (t)
    d->touched = t;
  uint32_t *of = t ? scn_array_grow(d->touched_of, &d->touched_of_cap, sizeof *of, n) : NULL;
  if (!of)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  d->touched_of = of;
  d->touched[d->ntouched] = w;
  d->touched_of[d->ntouched++] = (uint32_t)i;
  return 0;
}

/* With --cluster, what the journals need of entities about to end: each one's home tag (the
 * group, or the node, it belongs to) and, when with_worlds, the worlds that have it. */
static int note_gone(scn_ctx *ctx, const scn_entity *ids, size_t n, bool with_worlds,
                     scn_wire_error *err) {
  scn_dispatch *d = ctx->d;
  scn_scene *scene = ctx->srv->scene;
  if (reserve_gone(d, n, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    d->gone_home[i] = scn_entity_home(scene, ids[i]);
    for (size_t k = 0; with_worlds && k < scn_world_count(scene); k++) {
      scn_world *w = scn_world_at(scene, k);
      if (scn_transform_exists(w, ids[i]) && note_touched(d, w, i, err) < 0)
        return -1;
    }
  }
  d->several = true;
  d->gone = ids;
  d->ngone = n;
  return 0;
}

int scn_cmd_world_destroy(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_world *w = ctx->world;
  bool with_entities = false;
  if ((a->f->present & SCN_F(entities)) &&
      scn_decode_bool(a->f->v[SCN_F_entities], "entities", &with_entities, err) < 0)
    return -1;
  scn_entity *gone = NULL;
  size_t ngone = 0;
  if (with_entities) {
    if (!(gone = scn_ids_scratch(ctx->d, scn_world_transform_count(w) + 1)))
      return scn_fail(err, SCN_W_INTERNAL, "out of memory");
    ngone = scn_world_orphans(w, gone);
    if (ctx->srv->gstore && note_gone(ctx, gone, ngone, false, err) < 0)
      return -1;
  }
  /* The reply is built apart from the connection's output (see dispatch), so the
   * world_destroyed events land as whole lines before it. */
  scn_stream_world_destroyed(ctx->srv->stream, w);
  if (ctx->d->last_world == w)
    ctx->d->last_world = NULL;
  scn_world_stats s, *done = &ctx->srv->counters.gone_worlds;
  scn_world_get_stats(w, &s);
  done->flushes += s.flushes;
  done->recomputed += s.recomputed;
  done->changed += s.changed;
  done->relayouts += s.relayouts;
  size_t failed;
  int rc = with_entities ? scn_server_drop_world_with(ctx->srv, a->world, gone, ngone, &failed)
                         : scn_server_drop_world(ctx->srv, a->world);
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  if (with_entities) {
    scn_reply_key(out, "entities_destroyed");
    scn_buf_add_u64(out, ngone);
  }
  return 0;
}

/* "entities": an array of at most --max-entity-create ids, into the dispatcher's scratch. */
static int entity_list(scn_ctx *ctx, const cJSON *v, scn_entity **ids, size_t *n,
                       scn_wire_error *err) {
  uint64_t max = ctx->srv->cfg.max_entity_create;
  if (!cJSON_IsArray(v))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"entities\" must be an array of entity ids");
  size_t count = 0;
  for (const cJSON *e = v->child; e; e = e->next)
    count++;
  if (count > max)
    return scn_fail(err, SCN_W_LIMIT, "field \"entities\" holds at most %llu ids", (ull)max);
  if (!(*ids = scn_ids_scratch(ctx->d, count + 1)))
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  size_t i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++)
    if (scn_decode_entity(e, "entities", &(*ids)[i], err) < 0)
      return scn_fail(err, SCN_W_BAD_REQUEST,
                      "field \"entities\" must hold entity ids (integers from 1 to 2^53-1)");
  *n = count;
  return 0;
}

static int destroy_list(scn_ctx *ctx, const scn_args *a, scn_wire_error *err) {
  scn_entity *ids = NULL;
  size_t n = 0, failed = 0;
  if (entity_list(ctx, a->f->v[SCN_F_entities], &ids, &n, err) < 0)
    return -1;
  if (ctx->srv->gstore && note_gone(ctx, ids, n, true, err) < 0)
    return -1;
  int rc = scn_entity_destroy_many(ctx->srv->scene, ids, n, &failed);
  if (rc == SCN_INVALID)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"entities\" names entity %llu twice",
                    (ull)ids[failed]);
  if (rc != SCN_OK) {
    scn_args one = *a;
    one.entity = ids[failed];
    return scn_core_error(ctx, &one, rc, err);
  }
  return 0;
}

int scn_cmd_entity_destroy(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)out;
  scn_scene *scene = ctx->srv->scene;
  scn_fieldset given = a->f->present & (SCN_F(entity) | SCN_F(entities));
  if (given == (SCN_F(entity) | SCN_F(entities)))
    return scn_fail(err, SCN_W_BAD_REQUEST, "give either \"entity\" or \"entities\", not both");
  if (!given)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "missing field \"entity\" (or \"entities\": an array of ids)");
  if (given == SCN_F(entities))
    return destroy_list(ctx, a, err);
  if (ctx->srv->gstore) {
    /* Each group's journal that had the entity records its end, and the journal of the group
     * it belongs to. */
    scn_dispatch *d = ctx->d;
    d->touched_home = scn_entity_home(scene, a->entity);
    for (size_t i = 0; i < scn_world_count(scene); i++) {
      scn_world *w = scn_world_at(scene, i);
      if (!scn_transform_exists(w, a->entity))
        continue;
      scn_world **t = scn_array_grow(d->touched, &d->touched_cap, sizeof *t, d->ntouched + 1);
      if (!t)
        return scn_fail(err, SCN_W_INTERNAL, "out of memory");
      d->touched = t;
      d->touched[d->ntouched++] = w;
    }
  }
  int rc = scn_entity_destroy(scene, a->entity);
  return rc == SCN_OK ? 0 : scn_core_error(ctx, a, rc, err);
}

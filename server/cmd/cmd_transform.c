/* transform.* commands: each calls the core once with the decoded arguments; the core checks
 * everything atomically, and scn_core_error says which object an error is about. */
#include "cmd/handlers.h"

#include <math.h>
#include <string.h>

static void add_entity_or_null(scn_buf *out, scn_entity e) {
  if (e == SCN_ENTITY_NONE)
    scn_buf_adds(out, "null");
  else
    scn_buf_add_u64(out, e);
}

/* {"t":[x,y,z],"r":[x,y,z,w],"s":[sx,sy,sz]}, or null when m is not T * R * S. */
static void add_trs_or_null(scn_buf *out, const float m[16]) {
  float t[3], r[4], s[3];
  if (scn_decompose_trs(m, t, r, s) != SCN_OK) {
    scn_buf_adds(out, "null");
    return;
  }
  scn_buf_adds(out, "{\"t\":");
  scn_buf_add_floats(out, t, 3);
  scn_buf_adds(out, ",\"r\":");
  scn_buf_add_floats(out, r, 4);
  scn_buf_adds(out, ",\"s\":");
  scn_buf_add_floats(out, s, 3);
  scn_buf_addc(out, '}');
}

/* A new entity is created inside a batch unless one is open already, so a command that
 * creates one and then fails leaves no entity behind. */
int scn_cmd_transform_create(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_scene *scene = ctx->srv->scene;
  scn_entity e = a->entity;
  bool new_entity = !(a->f->present & SCN_F(entity));
  bool own_batch = new_entity && !scn_batch_active(scene);
  if (own_batch && scn_batch_begin(scene) != SCN_OK)
    return scn_fail(err, SCN_W_INTERNAL, "cannot start a batch");
  /* A replayed record of a group may name an entity made by another group or node: the id is
   * adopted as it was (cluster). */
  if (!new_entity && !ctx->conn && ctx->srv->gstore && !scn_entity_alive(scene, e) &&
      !scn_batch_active(scene))
    scn_entity_adopt(scene, e);
  int rc = new_entity ? scn_entity_create(scene, 1, &e) : SCN_OK;
  if (rc == SCN_OK)
    rc = scn_transform_create(ctx->world, e, a->parent, a->name, a->has_spec ? a->m : NULL);
  if (own_batch) {
    if (rc == SCN_OK)
      scn_batch_commit(scene);
    else
      scn_batch_rollback(scene);
  }
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  scn_reply_key(out, "entity");
  scn_buf_add_u64(out, e);
  return 0;
}

int scn_cmd_transform_destroy(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)out;
  int rc = scn_transform_destroy(ctx->world, a->entity, a->recursive);
  return rc == SCN_OK ? 0 : scn_core_error(ctx, a, rc, err);
}

int scn_cmd_transform_link(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)out;
  int rc = scn_transform_link(ctx->world, a->entity, a->parent,
                              a->keep_world ? SCN_KEEP_WORLD : SCN_KEEP_LOCAL);
  return rc == SCN_OK ? 0 : scn_core_error(ctx, a, rc, err);
}

int scn_cmd_transform_unlink(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  return scn_cmd_transform_link(ctx, a, out, err); /* parent is 0: unlink */
}

/* A whole matrix, or with "partial" the parts given in place of the current ones. */
static int set_matrix(scn_ctx *ctx, const scn_args *a, bool world_space, scn_wire_error *err) {
  if (!a->has_spec)
    return scn_fail(
        err, SCN_W_BAD_REQUEST,
        a->partial ? "\"partial\" needs at least one of \"t\", \"r\", \"s\""
                   : "missing transform: give \"matrix\", \"matrix_b64\" or \"t\"/\"r\"/\"s\"");
  int rc;
  if (a->partial)
    rc = scn_transform_set_parts(
        ctx->world, a->entity, world_space, a->parts & SCN_F(t) ? a->t : NULL,
        a->parts & SCN_F(r) ? a->r : NULL, a->parts & SCN_F(s) ? a->s : NULL);
  else
    rc = world_space ? scn_transform_set_world(ctx->world, a->entity, a->m)
                     : scn_transform_set_local(ctx->world, a->entity, a->m);
  return rc == SCN_OK ? 0 : scn_core_error(ctx, a, rc, err);
}

int scn_cmd_transform_set_local(scn_ctx *ctx, const scn_args *a, scn_buf *out,
                                scn_wire_error *err) {
  (void)out;
  return set_matrix(ctx, a, false, err);
}

int scn_cmd_transform_set_world(scn_ctx *ctx, const scn_args *a, scn_buf *out,
                                scn_wire_error *err) {
  (void)out;
  return set_matrix(ctx, a, true, err);
}

/* The transform as it is, or at a past tick (interpolated between two ticks for a fraction). */
static int get_at(scn_ctx *ctx, const scn_args *a, scn_transform_info *info) {
  if (!a->has_tick)
    return scn_transform_get(ctx->world, a->entity, info);
  if (a->tick == floor(a->tick))
    return scn_world_history_get(ctx->world, a->entity, (uint64_t)a->tick, info);
  return scn_world_history_interpolate(ctx->world, a->entity, a->tick, info);
}

int scn_cmd_transform_get(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_transform_info info;
  int rc = get_at(ctx, a, &info);
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  /* the tick answered: the one asked for, or now (the last that has run) */
  scn_reply_key(out, "tick");
  if (a->has_tick)
    scn_buf_add_double(out, a->tick);
  else
    scn_buf_add_u64(out, scn_world_tick(ctx->world) - 1);
  scn_reply_key(out, "entity");
  scn_buf_add_u64(out, a->entity);
  scn_reply_key(out, "parent");
  add_entity_or_null(out, info.parent);
  if (info.name) {
    scn_reply_key(out, "name");
    scn_buf_add_json_string(out, info.name, strlen(info.name));
  }
  scn_reply_key(out, "local");
  scn_ctx_add_matrix(ctx, out, info.local);
  scn_reply_key(out, "world");
  scn_ctx_add_matrix(ctx, out, info.world);
  if (a->trs) {
    scn_reply_key(out, "local_trs");
    add_trs_or_null(out, info.local);
    scn_reply_key(out, "world_trs");
    add_trs_or_null(out, info.world);
  }
  return 0;
}

int scn_cmd_transform_children(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  size_t count;
  int rc = scn_transform_children(ctx->world, a->entity, NULL, 0, &count);
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  scn_entity *ids = scn_ids_scratch(ctx->d, count);
  if (!ids)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  scn_transform_children(ctx->world, a->entity, ids, count, &count);
  scn_reply_key(out, "children");
  scn_buf_add_id_list(out, ids, count);
  return 0;
}

int scn_cmd_transform_rename(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)out;
  int rc = scn_transform_rename(ctx->world, a->entity, a->name);
  return rc == SCN_OK ? 0 : scn_core_error(ctx, a, rc, err);
}

int scn_cmd_transform_find(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_entity e;
  int rc = scn_transform_find(ctx->world, a->path, strlen(a->path), &e);
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  scn_reply_key(out, "entity");
  scn_buf_add_u64(out, e);
  return 0;
}

int scn_cmd_transform_relative(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  float m[16];
  int rc = a->has_tick ? scn_world_history_relative(ctx->world, a->entity, a->to, a->tick, m)
                       : scn_transform_relative(ctx->world, a->entity, a->to, m);
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  scn_reply_key(out, "matrix");
  scn_ctx_add_matrix(ctx, out, m);
  return 0;
}

/* transform.* commands: each calls the core once with the decoded arguments; the core checks
 * everything atomically, and scn_core_error says which object an error is about. */
#include "cmd/handlers.h"

#include <string.h>

static void add_entity_or_null(scn_buf *out, scn_entity e) {
  if (e == SCN_ENTITY_NONE)
    scn_buf_adds(out, "null");
  else
    scn_buf_add_u64(out, e);
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

static int set_matrix(scn_ctx *ctx, const scn_args *a, bool world_space, scn_wire_error *err) {
  if (!a->has_spec)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "missing transform: give \"matrix\" or \"t\"/\"r\"/\"s\"");
  int rc = world_space ? scn_transform_set_world(ctx->world, a->entity, a->m)
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

int scn_cmd_transform_get(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_transform_info info;
  int rc = scn_transform_get(ctx->world, a->entity, &info);
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  scn_reply_key(out, "entity");
  scn_buf_add_u64(out, a->entity);
  scn_reply_key(out, "parent");
  add_entity_or_null(out, info.parent);
  if (info.name) {
    scn_reply_key(out, "name");
    scn_buf_add_json_string(out, info.name, strlen(info.name));
  }
  scn_reply_key(out, "local");
  scn_buf_add_matrix(out, info.local);
  scn_reply_key(out, "world");
  scn_buf_add_matrix(out, info.world);
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
  int rc = scn_transform_relative(ctx->world, a->entity, a->to, m);
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  scn_reply_key(out, "matrix");
  scn_buf_add_matrix(out, m);
  return 0;
}

/* transform.* commands. Each checks what it can name precisely (the world, the entities) so
 * its error says which object was missing; the core then checks the rest atomically. */
#include "cmd/handlers.h"

#include <string.h>


static int need_transform(scn_world *w, uint64_t e, const char *role, scn_wire_error *err) {
  if (scn_transform_exists(w, e))
    return 0;
  return scn_fail(err, SCN_W_NOT_FOUND, "%s %llu has no transform in world \"%s\"", role,
                  (unsigned long long)e, scn_world_name(w));
}

static void add_entity_or_null(scn_buf *out, scn_entity e) {
  if (e == SCN_ENTITY_NONE)
    scn_buf_adds(out, "null");
  else
    scn_buf_add_u64(out, e);
}

/* Runs fn inside a batch unless one is open already, so a command that creates an entity
 * and then fails leaves no entity behind. */
static int create_in_world(scn_ctx *ctx, scn_world *w, const cJSON *req, uint64_t *out_entity,
                           scn_wire_error *err) {
  scn_scene *scene = ctx->srv->scene;
  uint64_t e = 0, parent = 0;
  const char *name = NULL;
  float m[16];
  int has_entity, spec;
  if ((has_entity = scn_get_entity(req, "entity", false, &e, err)) < 0 ||
      scn_get_entity_or_null(req, "parent", false, &parent, err) < 0 ||
      scn_get_name_or_null(req, "name", false, &name, err) < 0 ||
      (spec = scn_get_spec(req, m, err)) < 0)
    return -1;
  if (has_entity && !scn_entity_alive(scene, e))
    return scn_fail(err, SCN_W_NOT_FOUND, "entity %llu does not exist", (unsigned long long)e);
  if (parent && need_transform(w, parent, "parent", err) < 0)
    return -1;
  if (has_entity && scn_transform_exists(w, e))
    return scn_fail(err, SCN_W_ALREADY_EXISTS, "entity %llu already has a transform in world \"%s\"",
                    (unsigned long long)e, scn_world_name(w));
  if (scn_world_transform_count(w) >= ctx->srv->cfg.max_transforms)
    return scn_fail(err, SCN_W_LIMIT, "world \"%s\" is full (max-transforms %llu)",
                    scn_world_name(w), (unsigned long long)ctx->srv->cfg.max_transforms);
  bool own_batch = !scn_batch_active(scene);
  if (own_batch && scn_batch_begin(scene) != SCN_OK)
    return scn_fail(err, SCN_W_INTERNAL, "cannot start a batch");
  int rc = SCN_OK;
  if (!has_entity)
    rc = scn_entity_create(scene, 1, &e);
  if (rc == SCN_OK)
    rc = scn_transform_create(w, e, parent, name, spec ? m : NULL);
  if (own_batch) {
    if (rc == SCN_OK)
      scn_batch_commit(scene);
    else
      scn_batch_rollback(scene);
  }
  if (rc == SCN_EXISTS)
    return scn_fail(err, SCN_W_ALREADY_EXISTS, "a sibling is already named \"%s\"", name);
  if (rc != SCN_OK)
    return scn_core_fail(err, rc, "transform.create in world \"%s\"", scn_world_name(w));
  *out_entity = e;
  return 0;
}

int scn_cmd_transform_create(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t e = 0;
  if (!w || create_in_world(ctx, w, req, &e, err) < 0)
    return -1;
  scn_reply_key(out, "entity");
  scn_buf_add_u64(out, e);
  return 0;
}

int scn_cmd_transform_destroy(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  (void)out;
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t e;
  bool recursive = false;
  if (!w || scn_get_entity(req, "entity", true, &e, err) < 0 ||
      scn_get_bool(req, "recursive", false, &recursive, err) < 0 ||
      need_transform(w, e, "entity", err) < 0)
    return -1;
  int rc = scn_transform_destroy(w, e, recursive);
  if (rc == SCN_EXISTS)
    return scn_fail(err, SCN_W_ALREADY_EXISTS,
                    "a child of %llu would become a root with the name of another root",
                    (unsigned long long)e);
  return rc == SCN_OK ? 0 : scn_core_fail(err, rc, "entity %llu", (unsigned long long)e);
}

static int link_to(scn_world *w, uint64_t e, uint64_t parent, bool keep_world,
                   scn_wire_error *err) {
  int rc = scn_transform_link(w, e, parent, keep_world ? SCN_KEEP_WORLD : SCN_KEEP_LOCAL);
  switch (rc) {
  case SCN_OK:
    return 0;
  case SCN_CYCLE:
    return scn_fail(err, SCN_W_CYCLE, "linking %llu under %llu would make it its own ancestor",
                    (unsigned long long)e, (unsigned long long)parent);
  case SCN_EXISTS:
    return scn_fail(err, SCN_W_ALREADY_EXISTS, "%s already has a child with the name of %llu",
                    parent ? "the new parent" : "the world's roots", (unsigned long long)e);
  case SCN_SINGULAR:
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "keep \"world\" needs the inverse of the parent's world matrix, which is "
                    "singular or not finite");
  default:
    return scn_core_fail(err, rc, "entity %llu", (unsigned long long)e);
  }
}

int scn_cmd_transform_link(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  (void)out;
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t e, parent;
  bool keep_world;
  if (!w || scn_get_entity(req, "entity", true, &e, err) < 0 ||
      scn_get_entity_or_null(req, "parent", true, &parent, err) < 0 ||
      scn_get_keep(req, &keep_world, err) < 0 || need_transform(w, e, "entity", err) < 0 ||
      (parent && need_transform(w, parent, "parent", err) < 0))
    return -1;
  return link_to(w, e, parent, keep_world, err);
}

int scn_cmd_transform_unlink(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  (void)out;
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t e;
  bool keep_world;
  if (!w || scn_get_entity(req, "entity", true, &e, err) < 0 ||
      scn_get_keep(req, &keep_world, err) < 0 || need_transform(w, e, "entity", err) < 0)
    return -1;
  return link_to(w, e, SCN_ENTITY_NONE, keep_world, err);
}

static int set_matrix(scn_ctx *ctx, const cJSON *req, bool world_space, scn_wire_error *err) {
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t e;
  float m[16];
  int spec;
  if (!w || scn_get_entity(req, "entity", true, &e, err) < 0 ||
      (spec = scn_get_spec(req, m, err)) < 0)
    return -1;
  if (spec == 0)
    return scn_fail(err, SCN_W_BAD_REQUEST, "missing transform: give \"matrix\" or \"t\"/\"r\"/\"s\"");
  if (need_transform(w, e, "entity", err) < 0)
    return -1;
  int rc = world_space ? scn_transform_set_world(w, e, m) : scn_transform_set_local(w, e, m);
  if (rc == SCN_SINGULAR)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "the parent's world matrix is singular, or the local result is not finite");
  return rc == SCN_OK ? 0 : scn_core_fail(err, rc, "entity %llu", (unsigned long long)e);
}

int scn_cmd_transform_set_local(scn_ctx *ctx, const cJSON *req, scn_buf *out,
                                scn_wire_error *err) {
  (void)out;
  return set_matrix(ctx, req, false, err);
}

int scn_cmd_transform_set_world(scn_ctx *ctx, const cJSON *req, scn_buf *out,
                                scn_wire_error *err) {
  (void)out;
  return set_matrix(ctx, req, true, err);
}

int scn_cmd_transform_get(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t e;
  if (!w || scn_get_entity(req, "entity", true, &e, err) < 0 ||
      need_transform(w, e, "entity", err) < 0)
    return -1;
  scn_transform_info info;
  int rc = scn_transform_get(w, e, &info);
  if (rc != SCN_OK)
    return scn_core_fail(err, rc, "entity %llu", (unsigned long long)e);
  scn_reply_key(out, "entity");
  scn_buf_add_u64(out, e);
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

int scn_cmd_transform_children(scn_ctx *ctx, const cJSON *req, scn_buf *out,
                               scn_wire_error *err) {
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t e;
  size_t count;
  if (!w || scn_get_entity(req, "entity", true, &e, err) < 0 ||
      need_transform(w, e, "entity", err) < 0)
    return -1;
  scn_transform_children(w, e, NULL, 0, &count);
  scn_entity *ids = scn_ids_scratch(ctx->d, count);
  if (!ids)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  scn_transform_children(w, e, ids, count, &count);
  scn_reply_key(out, "children");
  scn_buf_add_id_list(out, ids, count);
  return 0;
}

int scn_cmd_transform_rename(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  (void)out;
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t e;
  const char *name;
  if (!w || scn_get_entity(req, "entity", true, &e, err) < 0 ||
      scn_get_name_or_null(req, "name", true, &name, err) < 0 ||
      need_transform(w, e, "entity", err) < 0)
    return -1;
  int rc = scn_transform_rename(w, e, name);
  if (rc == SCN_EXISTS)
    return scn_fail(err, SCN_W_ALREADY_EXISTS, "a sibling is already named \"%s\"", name);
  return rc == SCN_OK ? 0 : scn_core_fail(err, rc, "entity %llu", (unsigned long long)e);
}

int scn_cmd_transform_find(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  scn_world *w = scn_ctx_world(ctx, req, err);
  const char *path;
  if (!w || scn_get_string(req, "path", true, &path, err) < 0)
    return -1;
  scn_entity e;
  int rc = scn_transform_find(w, path, strlen(path), &e);
  if (rc == SCN_INVALID)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"path\" must be names (1 to 64 bytes, no control characters) joined by '/'");
  if (rc == SCN_NOT_FOUND)
    return scn_fail(err, SCN_W_NOT_FOUND, "no transform at path \"%.128s\" in world \"%s\"", path,
                    scn_world_name(w));
  if (rc != SCN_OK)
    return scn_core_fail(err, rc, "path");
  scn_reply_key(out, "entity");
  scn_buf_add_u64(out, e);
  return 0;
}

int scn_cmd_transform_relative(scn_ctx *ctx, const cJSON *req, scn_buf *out,
                               scn_wire_error *err) {
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t e, to;
  if (!w || scn_get_entity(req, "entity", true, &e, err) < 0 ||
      scn_get_entity(req, "to", true, &to, err) < 0 || need_transform(w, e, "entity", err) < 0 ||
      need_transform(w, to, "to", err) < 0)
    return -1;
  float m[16];
  int rc = scn_transform_relative(w, e, to, m);
  if (rc == SCN_SINGULAR)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "the world matrix of %llu is singular, or the result is not finite",
                    (unsigned long long)to);
  if (rc != SCN_OK)
    return scn_core_fail(err, rc, "entity %llu", (unsigned long long)e);
  scn_reply_key(out, "matrix");
  scn_buf_add_matrix(out, m);
  return 0;
}

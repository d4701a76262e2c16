/* Core errors become wire errors here, and only here. The core says what went wrong (not
 * found, exists, cycle, singular, ...); the command and its arguments say which object the
 * message must name. Working that out may look things up again, but only on the error path. */
#include "cmd/handlers.h"

#include <math.h>
#include <string.h>

typedef unsigned long long ull;

/* The entity a command names besides "entity", and its role. */
static const char *other_role(const scn_command_info *cmd, const scn_args *a, scn_entity *out) {
  scn_fieldset fields = cmd->required | cmd->optional;
  if (fields & SCN_F(parent)) {
    *out = a->parent;
    return "parent";
  }
  if (fields & SCN_F(to)) {
    *out = a->to;
    return "to";
  }
  if (fields & SCN_F(root)) {
    *out = a->root;
    return "root";
  }
  *out = SCN_ENTITY_NONE;
  return NULL;
}

/* A read at a past tick found nothing: no history, a tick outside the window, or the entity
 * (or "to") had no transform then. */
static int not_found_at(const scn_ctx *ctx, const scn_args *a, scn_wire_error *err) {
  scn_world *w = ctx->world;
  uint64_t oldest, newest;
  if (scn_world_history(w) == 0)
    return scn_fail(err, SCN_W_NOT_FOUND,
                    "world \"%s\" keeps no history (create it with \"history\": ticks to keep)",
                    scn_world_name(w));
  if (scn_world_history_window(w, &oldest, &newest) != SCN_OK)
    return scn_fail(err, SCN_W_NOT_FOUND, "world \"%s\" has no tick in its history yet",
                    scn_world_name(w));
  double upto = a->tick == floor(a->tick) ? (double)newest : (double)newest - 1;
  if (a->tick < (double)oldest || a->tick > upto)
    return scn_fail(err, SCN_W_NOT_FOUND,
                    "tick %.17g is outside the history of world \"%s\": ticks %llu to %llu%s",
                    a->tick, scn_world_name(w), (ull)oldest, (ull)newest,
                    a->tick == floor(a->tick) ? "" : " (a fraction needs the tick after it too)");
  scn_transform_info info;
  scn_entity who = a->entity;
  const char *role = "entity";
  if (scn_world_history_get(w, a->entity, (uint64_t)a->tick, &info) == SCN_OK && a->to)
    who = a->to, role = "to";
  return scn_fail(err, SCN_W_NOT_FOUND, "%s %llu had no transform in world \"%s\" at tick %.17g",
                  role, (ull)who, scn_world_name(w), a->tick);
}

static int not_found(const scn_ctx *ctx, const scn_args *a, scn_wire_error *err) {
  scn_world *w = ctx->world;
  const scn_command_info *cmd = ctx->cmd;
  if (a->has_tick)
    return not_found_at(ctx, a, err);
  switch (cmd->id) {
  case SCN_C_entity_destroy:
    return scn_fail(err, SCN_W_NOT_FOUND, "entity %llu does not exist", (ull)a->entity);
  case SCN_C_world_destroy:
    return scn_fail(err, SCN_W_NOT_FOUND, "world \"%s\" not found", a->world);
  case SCN_C_transform_find:
    return scn_fail(err, SCN_W_NOT_FOUND, "no transform at path \"%.128s\" in world \"%s\"",
                    a->path, scn_world_name(w));
  case SCN_C_transform_create:
    if ((a->f->present & SCN_F(entity)) && !scn_entity_alive(ctx->srv->scene, a->entity))
      return scn_fail(err, SCN_W_NOT_FOUND, "entity %llu does not exist", (ull)a->entity);
    break;
  default:
    if ((a->f->present & SCN_F(entity)) && !scn_transform_exists(w, a->entity))
      return scn_fail(err, SCN_W_NOT_FOUND, "entity %llu has no transform in world \"%s\"",
                      (ull)a->entity, scn_world_name(w));
    break;
  }
  scn_entity other;
  const char *role = other_role(cmd, a, &other);
  if (role && other)
    return scn_fail(err, SCN_W_NOT_FOUND, "%s %llu has no transform in world \"%s\"", role,
                    (ull)other, scn_world_name(w));
  return scn_fail(err, SCN_W_NOT_FOUND, "%s: not found", cmd->name);
}

static int exists(const scn_ctx *ctx, const scn_args *a, scn_wire_error *err) {
  scn_world *w = ctx->world;
  switch (ctx->cmd->id) {
  case SCN_C_world_create:
    return scn_fail(err, SCN_W_ALREADY_EXISTS, "world \"%s\": already exists", a->world);
  case SCN_C_transform_create:
  case SCN_C_transform_rename:
    if (ctx->cmd->id == SCN_C_transform_create && scn_transform_exists(w, a->entity))
      return scn_fail(err, SCN_W_ALREADY_EXISTS,
                      "entity %llu already has a transform in world \"%s\"", (ull)a->entity,
                      scn_world_name(w));
    return scn_fail(err, SCN_W_ALREADY_EXISTS, "a sibling is already named \"%s\"", a->name);
  case SCN_C_transform_destroy:
    return scn_fail(err, SCN_W_ALREADY_EXISTS,
                    "a child of %llu would become a root with the name of another root",
                    (ull)a->entity);
  case SCN_C_entity_destroy:
    return scn_fail(err, SCN_W_ALREADY_EXISTS,
                    "entity %llu: a child would become a root with the name of another root",
                    (ull)a->entity);
  case SCN_C_transform_link:
  case SCN_C_transform_unlink:
    return scn_fail(err, SCN_W_ALREADY_EXISTS, "%s already has a child with the name of %llu",
                    a->parent ? "the new parent" : "the world's roots", (ull)a->entity);
  default:
    return scn_fail(err, SCN_W_ALREADY_EXISTS, "%s: already exists", ctx->cmd->name);
  }
}

static int singular(const scn_ctx *ctx, const scn_args *a, scn_wire_error *err) {
  switch (ctx->cmd->id) {
  case SCN_C_transform_link:
  case SCN_C_transform_unlink:
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "keep \"world\" needs the inverse of the parent's world matrix, which is "
                    "singular or not finite");
  case SCN_C_transform_relative:
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "the world matrix of %llu is singular, or the result is not finite",
                    (ull)a->to);
  default:
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "the parent's world matrix is singular, or the local result is not finite");
  }
}

/* A partial set the core refused though its parts were valid: the current matrix is not
 * T * R * S (the usual reason), or the parts give a matrix that is not finite. */
static int partial_invalid(const scn_ctx *ctx, const scn_args *a, scn_wire_error *err) {
  bool world_space = ctx->cmd->id == SCN_C_transform_set_world;
  const char *space = world_space ? "world" : "local";
  scn_transform_info info;
  if (scn_transform_get(ctx->world, a->entity, &info) == SCN_OK &&
      scn_decompose_trs(world_space ? info.world : info.local, NULL, NULL, NULL) != SCN_OK)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "the %s matrix of %llu is not translation x rotation x scale (it has shear, "
                    "a zero scale or a last row other than 0 0 0 1): a partial set needs its parts",
                    space, (ull)a->entity);
  return scn_fail(err, SCN_W_BAD_REQUEST, "the parts give a %s matrix that is not finite", space);
}

static int limit(const scn_ctx *ctx, const scn_args *a, scn_wire_error *err) {
  const scn_config *cfg = &ctx->srv->cfg;
  scn_world *w = ctx->world;
  (void)a;
  if (ctx->cmd->id == SCN_C_world_create)
    return scn_fail(err, SCN_W_LIMIT, "too many worlds (max-worlds %llu)", (ull)cfg->max_worlds);
  if (w && scn_world_transform_count(w) >= cfg->max_transforms)
    return scn_fail(err, SCN_W_LIMIT, "world \"%s\" is full (max-transforms %llu)",
                    scn_world_name(w), (ull)cfg->max_transforms);
  return scn_fail(err, SCN_W_LIMIT, "%s: %s", ctx->cmd->name, scn_err_message(SCN_LIMIT));
}

int scn_core_error(const scn_ctx *ctx, const scn_args *a, int rc, scn_wire_error *err) {
  switch (rc) {
  case SCN_NOT_FOUND:
    return not_found(ctx, a, err);
  case SCN_EXISTS:
    return exists(ctx, a, err);
  case SCN_CYCLE:
    return scn_fail(err, SCN_W_CYCLE, "linking %llu under %llu would make it its own ancestor",
                    (ull)a->entity, (ull)a->parent);
  case SCN_SINGULAR:
    return singular(ctx, a, err);
  case SCN_INVALID:
    if (ctx->cmd->id == SCN_C_transform_find)
      return scn_fail(err, SCN_W_BAD_REQUEST,
                      "field \"path\" must be names (1 to 64 bytes, no control characters) "
                      "joined by '/'");
    if (a->partial)
      return partial_invalid(ctx, a, err);
    if (a->has_spec)
      return scn_spec_error(a->f, err);
    return scn_fail(err, SCN_W_BAD_REQUEST, "%s: %s", ctx->cmd->name, scn_err_message(rc));
  case SCN_LIMIT:
    return limit(ctx, a, err);
  default:
    return scn_fail(err, SCN_W_INTERNAL, "%s: %s", ctx->cmd->name, scn_err_message(rc));
  }
}

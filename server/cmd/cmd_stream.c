/* subscribe, subscribe.update and unsubscribe: the stream module keeps the subscriptions. */
#include "cmd/handlers.h"
#include "stream/stream.h"

#include <math.h>
#include <string.h>

/* A positive finite number (zero allowed with nonneg). */
static int decode_distance(const cJSON *v, const char *field, bool zero_ok, double *out,
                           scn_wire_error *err) {
  if (scn_decode_number(v, field, out, err) < 0)
    return -1;
  if (zero_ok ? *out >= 0 : *out > 0)
    return 0;
  return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be a %s finite number", field,
                  zero_ok ? "non-negative" : "positive");
}

/* Three finite numbers (near.point, packed.origin). */
static int decode_point(const cJSON *v, const char *field, double p[3], scn_wire_error *err) {
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be an array of 3 numbers", field);
  int i = 0;
  for (const cJSON *c = v->child; c; c = c->next, i++)
    if (scn_decode_number(c, field, &p[i], err) < 0)
      return -1;
  return 0;
}

static int decode_bands(const cJSON *v, scn_near_spec *spec, scn_wire_error *err) {
  if (!cJSON_IsArray(v))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"near.bands\" must be an array");
  if (cJSON_GetArraySize(v) > SCN_BANDS_MAX)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"near.bands\" holds at most %d bands",
                    SCN_BANDS_MAX);
  uint32_t n = 0;
  for (const cJSON *b = v->child; b; b = b->next, n++) {
    if (!cJSON_IsObject(b))
      return scn_fail(err, SCN_W_BAD_REQUEST,
                      "each band of \"near.bands\" must be an object {\"radius\":R,\"hz\":H}");
    bool has_radius = false, has_hz = false;
    for (const cJSON *m = b->child; m; m = m->next) {
      if (strcmp(m->string, "radius") == 0) {
        if (decode_distance(m, "near.bands.radius", false, &spec->band_radius[n], err) < 0)
          return -1;
        has_radius = true;
      } else if (strcmp(m->string, "hz") == 0) {
        if (decode_distance(m, "near.bands.hz", false, &spec->band_hz[n], err) < 0)
          return -1;
        has_hz = true;
      } else {
        return scn_fail(err, SCN_W_BAD_REQUEST, "unknown field \"near.bands.%s\"", m->string);
      }
    }
    if (!has_radius || !has_hz)
      return scn_fail(err, SCN_W_BAD_REQUEST, "band %u of \"near.bands\" needs radius and hz", n);
    if (n && !(spec->band_radius[n] > spec->band_radius[n - 1]))
      return scn_fail(err, SCN_W_BAD_REQUEST,
                      "the radii of \"near.bands\" must be strictly increasing");
  }
  spec->nbands = n;
  return 0;
}

/* "near": {"point":[x,y,z]} or {"entity":E}, "radius", "margin"?, "bands"?. */
static int decode_near(const cJSON *v, scn_near_spec *spec, scn_wire_error *err) {
  memset(spec, 0, sizeof *spec);
  if (!cJSON_IsObject(v))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"near\" must be an object");
  bool has_point = false, has_radius = false;
  for (const cJSON *m = v->child; m; m = m->next) {
    int rc = 0;
    if (strcmp(m->string, "point") == 0) {
      rc = decode_point(m, "near.point", spec->point, err);
      has_point = true;
    } else if (strcmp(m->string, "entity") == 0) {
      rc = scn_decode_entity(m, "near.entity", &spec->entity, err);
      spec->follows = true;
    } else if (strcmp(m->string, "radius") == 0) {
      rc = decode_distance(m, "near.radius", false, &spec->radius, err);
      has_radius = true;
    } else if (strcmp(m->string, "margin") == 0) {
      rc = decode_distance(m, "near.margin", true, &spec->margin, err);
    } else if (strcmp(m->string, "bands") == 0) {
      rc = decode_bands(m, spec, err);
    } else {
      rc = scn_fail(err, SCN_W_BAD_REQUEST, "unknown field \"near.%s\"", m->string);
    }
    if (rc < 0)
      return -1;
  }
  if (has_point == spec->follows)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"near\" needs exactly one center: \"point\" or \"entity\"");
  if (!has_radius)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"near\" needs \"radius\"");
  if (!isfinite(spec->radius + spec->margin))
    return scn_fail(err, SCN_W_BAD_REQUEST, "near.radius + near.margin must be finite");
  return 0;
}

/* "packed": {"step": s, "origin": [x, y, z]?}. */
static int decode_packed(const cJSON *v, scn_pack_grid *g, scn_wire_error *err) {
  memset(g, 0, sizeof *g);
  if (!cJSON_IsObject(v))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"packed\" must be an object {\"step\":S,\"origin\":[x,y,z]}");
  bool has_step = false;
  for (const cJSON *m = v->child; m; m = m->next) {
    if (strcmp(m->string, "step") == 0) {
      if (decode_distance(m, "packed.step", false, &g->step, err) < 0)
        return -1;
      has_step = true;
    } else if (strcmp(m->string, "origin") == 0) {
      if (decode_point(m, "packed.origin", g->origin, err) < 0)
        return -1;
    } else {
      return scn_fail(err, SCN_W_BAD_REQUEST, "unknown field \"packed.%s\"", m->string);
    }
  }
  if (!has_step)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"packed\" needs \"step\"");
  return 0;
}

/* The center entity must have a transform in w. */
static int check_center(const scn_near_spec *spec, scn_world *w, scn_wire_error *err) {
  if (!spec->follows || scn_transform_exists(w, spec->entity))
    return 0;
  return scn_fail(err, SCN_W_NOT_FOUND, "entity %llu has no transform in world \"%s\"",
                  (unsigned long long)spec->entity, scn_world_name(w));
}

int scn_cmd_subscribe(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_server *srv = ctx->srv;
  double hz = srv->cfg.tick_hz;
  if ((a->f->present & SCN_F(hz)) && scn_decode_number(a->f->v[SCN_F_hz], "hz", &hz, err) < 0)
    return -1;
  if (!(hz > 0))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"hz\" must be a positive number");
  scn_near_spec near;
  bool has_near = a->f->present & SCN_F(near);
  if (has_near && decode_near(a->f->v[SCN_F_near], &near, err) < 0)
    return -1;
  scn_pack_grid grid;
  bool packed = a->f->present & SCN_F(packed);
  if (packed && decode_packed(a->f->v[SCN_F_packed], &grid, err) < 0)
    return -1;
  if (a->root && !scn_transform_exists(ctx->world, a->root))
    return scn_core_error(ctx, a, SCN_NOT_FOUND, err);
  if (has_near && check_center(&near, ctx->world, err) < 0)
    return -1;
  uint64_t id;
  if (scn_stream_subscribe(srv->stream, ctx->conn, ctx->world, a->root, hz, has_near ? &near : NULL,
                           packed ? &grid : NULL, &id) != 0)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  scn_reply_key(out, "sub");
  scn_buf_add_u64(out, id);
  return 0;
}

static int decode_sub(const scn_args *a, uint64_t *id, scn_wire_error *err) {
  return scn_decode_uint(a->f->v[SCN_F_sub], "sub", 1, UINT64_C(9007199254740991), id, err);
}

static int no_such_sub(uint64_t id, scn_wire_error *err) {
  return scn_fail(err, SCN_W_NOT_FOUND, "no subscription %llu on this connection",
                  (unsigned long long)id);
}

int scn_cmd_subscribe_update(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)out;
  uint64_t id;
  if (decode_sub(a, &id, err) < 0)
    return -1;
  if (!(a->f->present & (SCN_F(near) | SCN_F(packed))))
    return scn_fail(err, SCN_W_BAD_REQUEST, "subscribe.update needs \"near\" or \"packed\"");
  scn_near_spec near;
  const cJSON *v = a->f->v[SCN_F_near];
  bool has_near = a->f->present & SCN_F(near), removes = has_near && cJSON_IsNull(v);
  if (has_near && !removes && decode_near(v, &near, err) < 0)
    return -1;
  scn_pack_grid grid;
  bool has_packed = a->f->present & SCN_F(packed), packed = false;
  if (has_packed && decode_packed(a->f->v[SCN_F_packed], &grid, err) < 0)
    return -1;
  scn_world *w = ctx->conn ? scn_stream_world_of(ctx->srv->stream, ctx->conn, id, &packed) : NULL;
  if (!w)
    return no_such_sub(id, err);
  if (has_packed && !packed)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "subscription %llu is not packed (\"packed\" is given to subscribe)",
                    (unsigned long long)id);
  if (has_near && !removes && check_center(&near, w, err) < 0)
    return -1;
  int rc = scn_stream_update(ctx->srv->stream, ctx->conn, id, has_near, removes ? NULL : &near,
                             has_packed ? &grid : NULL);
  if (rc == SCN_NOT_FOUND)
    return no_such_sub(id, err);
  if (rc != SCN_OK)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  return 0;
}

int scn_cmd_unsubscribe(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)out;
  uint64_t id;
  if (decode_sub(a, &id, err) < 0)
    return -1;
  if (ctx->conn && scn_stream_unsubscribe(ctx->srv->stream, ctx->conn, id))
    return 0;
  return no_such_sub(id, err);
}

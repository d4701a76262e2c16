/* subscribe and unsubscribe: the stream module keeps the subscriptions. */
#include "cmd/handlers.h"
#include "stream/stream.h"

int scn_cmd_subscribe(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  scn_server *srv = ctx->srv;
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t root = 0;
  double hz = srv->cfg.tick_hz;
  if (!w || scn_get_entity(req, "root", false, &root, err) < 0 ||
      scn_get_number(req, "hz", false, &hz, err) < 0)
    return -1;
  if (!(hz > 0))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"hz\" must be a positive number");
  if (root && !scn_transform_exists(w, root))
    return scn_fail(err, SCN_W_NOT_FOUND, "root %llu has no transform in world \"%s\"",
                    (unsigned long long)root, scn_world_name(w));
  uint64_t id;
  if (scn_stream_subscribe(srv->stream, ctx->conn, w, root, hz, &id) != 0)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  scn_reply_key(out, "sub");
  scn_buf_add_u64(out, id);
  return 0;
}

int scn_cmd_unsubscribe(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  (void)out;
  uint64_t id;
  if (scn_get_uint(req, "sub", true, 1, UINT64_C(9007199254740991), &id, err) < 0)
    return -1;
  if (scn_stream_unsubscribe(ctx->srv->stream, ctx->conn, id))
    return 0;
  return scn_fail(err, SCN_W_NOT_FOUND, "no subscription %llu on this connection",
                  (unsigned long long)id);
}

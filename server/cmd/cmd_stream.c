/* subscribe and unsubscribe: the stream module keeps the subscriptions. */
#include "cmd/handlers.h"
#include "stream/stream.h"

int scn_cmd_subscribe(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_server *srv = ctx->srv;
  double hz = srv->cfg.tick_hz;
  if ((a->f->present & SCN_F(hz)) && scn_decode_number(a->f->v[SCN_F_hz], "hz", &hz, err) < 0)
    return -1;
  if (!(hz > 0))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"hz\" must be a positive number");
  if (a->root && !scn_transform_exists(ctx->world, a->root))
    return scn_core_error(ctx, a, SCN_NOT_FOUND, err);
  uint64_t id;
  if (scn_stream_subscribe(srv->stream, ctx->conn, ctx->world, a->root, hz, &id) != 0)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  scn_reply_key(out, "sub");
  scn_buf_add_u64(out, id);
  return 0;
}

int scn_cmd_unsubscribe(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)out;
  uint64_t id;
  if (scn_decode_uint(a->f->v[SCN_F_sub], "sub", 1, UINT64_C(9007199254740991), &id, err) < 0)
    return -1;
  if (scn_stream_unsubscribe(ctx->srv->stream, ctx->conn, id))
    return 0;
  return scn_fail(err, SCN_W_NOT_FOUND, "no subscription %llu on this connection",
                  (unsigned long long)id);
}

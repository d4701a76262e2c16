/* batch: transform.* ops applied in order and atomically. Each op runs through the same
 * decoding and handlers as a lone command, inside a core batch that rolls back if any op
 * fails. */
#include "cmd/handlers.h"

#include <string.h>

static int op_fail(scn_wire_error *err, size_t index) {
  char inner[sizeof err->message];
  memcpy(inner, err->message, sizeof inner);
  return scn_fail(err, err->code, "op %zu: %s", index, inner);
}

/* raw: the op's text and its id's, as sent (p NULL when unknown), so its id is echoed
 * exactly. */
static int run_op(scn_ctx *ctx, const cJSON *op, const scn_op_span *raw, size_t index,
                  scn_buf *results, scn_wire_error *err) {
  if (!cJSON_IsObject(op))
    return scn_fail(err, SCN_W_BAD_REQUEST, "op %zu: must be a JSON object", index);
  scn_fields f;
  scn_fields_index(&f, op);
  const char *name;
  if (!(f.present & SCN_F(cmd)))
    return scn_fail(err, SCN_W_BAD_REQUEST, "op %zu: missing field \"cmd\"", index);
  if (scn_decode_string(f.v[SCN_F_cmd], "cmd", &name, err) < 0)
    return op_fail(err, index);
  const scn_command_info *cmd = scn_command_find(name);
  if (!cmd)
    return scn_fail(err, SCN_W_BAD_REQUEST, "op %zu: unknown command \"%.64s\"", index, name);
  if (!(cmd->flags & SCN_CMD_IN_BATCH))
    return scn_fail(err, SCN_W_BAD_REQUEST, "op %zu: %s is not allowed in a batch", index, name);
  bool has_id = f.present & SCN_F(id);
  if (index)
    scn_buf_addc(results, ',');
  scn_buf_addc(results, '{');
  if (has_id) {
    scn_buf_adds(results, "\"id\":");
    if (raw && raw->id.p)
      scn_buf_add(results, raw->id.p, raw->id.len);
    else
      scn_buf_add_json_value(results, f.v[SCN_F_id]);
  }
  size_t fields = results->len;
  if (scn_run_command(ctx, cmd, &f, results, err) < 0)
    return op_fail(err, index);
  /* Result fields come as ,"key":value; the first one needs no comma when there is no id. */
  if (!has_id && results->len > fields && results->data[fields] == ',')
    memmove(results->data + fields, results->data + fields + 1, results->len-- - fields - 1);
  scn_buf_addc(results, '}');
  return 0;
}

int scn_cmd_batch(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_server *srv = ctx->srv;
  const cJSON *ops = a->f->v[SCN_F_ops];
  if (!cJSON_IsArray(ops))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"ops\" must be an array of requests");
  if (scn_batch_begin(srv->scene) != SCN_OK)
    return scn_fail(err, SCN_W_INTERNAL, "a batch is already open");
  scn_ctx op_ctx = *ctx;
  op_ctx.in_batch = true;
  scn_buf *results = &ctx->d->scratch;
  results->len = 0;
  results->failed = false;
  /* The ops' raw text, found by the validating pass (none when the top-level "ops" key was
   * not the one cJSON took, which cannot happen for valid JSON). */
  const scn_request *rq = &ctx->d->rq;
  size_t index = 0;
  for (const cJSON *op = ops->child; op; op = op->next, index++) {
    const scn_op_span *raw = index < rq->nops ? &rq->ops[index] : NULL;
    if (run_op(&op_ctx, op, raw, index, results, err) < 0) {
      scn_batch_rollback(srv->scene);
      return -1;
    }
  }
  if (results->failed) {
    scn_batch_rollback(srv->scene);
    return scn_fail(err, SCN_W_INTERNAL, "out of memory building the results");
  }
  if (scn_ctx_output_room(ctx, out->len + results->len + 32, err) < 0) {
    scn_batch_rollback(srv->scene);
    return -1;
  }
  scn_batch_commit(srv->scene);
  scn_reply_key(out, "results");
  scn_buf_addc(out, '[');
  scn_buf_add(out, results->data, results->len);
  scn_buf_addc(out, ']');
  return 0;
}

/* batch: transform.* ops applied in order and atomically. Each op runs through the same
 * handlers as a lone command, inside a core batch that rolls back if any op fails. */
#include "cmd/handlers.h"

#include <string.h>

static int op_fail(scn_wire_error *err, size_t index) {
  char inner[sizeof err->message];
  memcpy(inner, err->message, sizeof inner);
  return scn_fail(err, err->code, "op %zu: %s", index, inner);
}

/* raw: the op's text as sent (NULL when unknown), so its id is echoed exactly. */
static int run_op(scn_ctx *ctx, const cJSON *op, const char *raw, size_t raw_len, size_t index,
                  scn_buf *results, scn_wire_error *err) {
  const char *name;
  if (!cJSON_IsObject(op))
    return scn_fail(err, SCN_W_BAD_REQUEST, "op %zu: must be a JSON object", index);
  if (scn_get_string(op, "cmd", true, &name, err) < 0)
    return op_fail(err, index);
  const scn_command_info *cmd = scn_command_find(name);
  if (!cmd)
    return scn_fail(err, SCN_W_BAD_REQUEST, "op %zu: unknown command \"%.64s\"", index, name);
  if (!(cmd->flags & SCN_CMD_IN_BATCH))
    return scn_fail(err, SCN_W_BAD_REQUEST, "op %zu: %s is not allowed in a batch", index, name);
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(op, "id");
  if (index)
    scn_buf_addc(results, ',');
  size_t open = results->len;
  scn_buf_addc(results, '{');
  const char *raw_id;
  size_t raw_id_len;
  if (id) {
    scn_buf_adds(results, "\"id\":");
    if (raw && scn_find_raw_member(raw, raw_len, "id", &raw_id, &raw_id_len))
      scn_buf_add(results, raw_id, raw_id_len);
    else
      scn_buf_add_json_value(results, id);
  }
  size_t fields = results->len;
  if (scn_run_command(ctx, cmd, op, results, err) < 0)
    return op_fail(err, index);
  /* Result fields come as ,"key":value; the first one needs no comma when there is no id. */
  if (!id && results->len > fields && results->data[fields] == ',')
    memmove(results->data + fields, results->data + fields + 1, results->len-- - fields - 1);
  (void)open;
  scn_buf_addc(results, '}');
  return 0;
}

int scn_cmd_batch(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  scn_server *srv = ctx->srv;
  scn_world *w = scn_ctx_world(ctx, req, err);
  if (!w)
    return -1;
  const cJSON *ops = cJSON_GetObjectItemCaseSensitive(req, "ops");
  if (!cJSON_IsArray(ops))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"ops\" must be an array of requests");
  if (scn_batch_begin(srv->scene) != SCN_OK)
    return scn_fail(err, SCN_W_INTERNAL, "a batch is already open");
  scn_ctx op_ctx = *ctx;
  op_ctx.batch_world = w;
  scn_buf *results = &ctx->d->scratch;
  results->len = 0;
  results->failed = false;
  /* The ops' raw text, walked alongside the parsed ops (NULL if the key was escaped). */
  const char *raw_ops = NULL, *raw_end = NULL, *item = NULL;
  size_t raw_len = 0, item_len = 0;
  if (ctx->line && scn_find_raw_member(ctx->line, ctx->line_len, "ops", &raw_ops, &raw_len))
    raw_end = raw_ops + raw_len;
  size_t index = 0;
  for (const cJSON *op = ops->child; op; op = op->next, index++) {
    bool have_raw = raw_ops && scn_next_raw_item(&raw_ops, raw_end, &item, &item_len);
    if (run_op(&op_ctx, op, have_raw ? item : NULL, item_len, index, results, err) < 0) {
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

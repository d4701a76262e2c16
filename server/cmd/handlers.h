/* Command handlers: one per row of the command table in proto/wire.h, all of one signature.
 * A handler validates everything first, then changes state; on success it writes its result
 * fields (each as ,"key":value) to out and returns 0; on failure it fills err and returns -1,
 * and whatever it wrote is discarded. */
#ifndef SCN_HANDLERS_H
#define SCN_HANDLERS_H

#include "cmd/dispatch.h"
#include "codec.h"
#include "net/conn.h"
#include "server.h"

/* The dispatcher's state: buffers reused from command to command. */
struct scn_dispatch {
  scn_server *srv;
  scn_hooks hooks;
  scn_buf reply;         /* the reply being built */
  scn_buf scratch;       /* per-command scratch output (batch results) */
  scn_world *last_world; /* the world the last command named; cleared when it is destroyed */
  scn_entity *ids;       /* scratch id list (entity.create, children) */
  size_t ids_cap;
};

typedef struct scn_ctx {
  scn_server *srv;
  scn_dispatch *d;
  scn_conn *conn;
  scn_world *batch_world; /* set while running the ops of a batch */
  const char *id;         /* the request's id as raw JSON text (NULL: see id_item) */
  size_t id_len;
  const cJSON *id_item; /* the id when it had to be read through cJSON */
  bool deferred;        /* the handler answers later (save); the connection waits */
  const char *line;     /* the request as sent, for raw field text (batch op ids) */
  size_t line_len;
  bool over_output; /* refused: the response would take the output over its limit */
} scn_ctx;

/* Refuses (LIMIT, counted against --output-limit) a response of about bytes that would take
 * the connection's queued output over --output-limit; 0 when it fits (or on replay). */
int scn_ctx_output_room(scn_ctx *ctx, size_t bytes, scn_wire_error *err);

typedef int (*scn_handler)(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err);

#define SCN_DECLARE_HANDLER(name_, ident, flags_, required_, optional_, help_)                     \
  int scn_cmd_##ident(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err);
SCN_COMMANDS(SCN_DECLARE_HANDLER)
#undef SCN_DECLARE_HANDLER

/* Runs one command of the table on a parsed request: auth, required fields, handler. */
int scn_run_command(scn_ctx *ctx, const scn_command_info *cmd, const cJSON *req, scn_buf *out,
                    scn_wire_error *err);

/* The one place a core error becomes a wire error; what names the object concerned. */
int scn_core_fail(scn_wire_error *err, int core_rc, const char *what, ...)
    __attribute__((format(printf, 3, 4)));

/* The world a transform command acts on: the batch's, or the request's "world". */
scn_world *scn_ctx_world(scn_ctx *ctx, const cJSON *req, scn_wire_error *err);

/* Scratch room for n entity ids, reused across commands. */
scn_entity *scn_ids_scratch(scn_dispatch *d, size_t n);

#endif

/* Command handlers: one per row of the command table in proto/wire.h, all of one signature.
 * Dispatch has checked access and the required fields, resolved the world, and decoded every
 * field the command takes into a; a handler calls the core and writes its result fields (each
 * as ,"key":value) to out and returns 0, or returns the error of scn_core_error (or its own
 * check's), and whatever it wrote is discarded. */
#ifndef SCN_HANDLERS_H
#define SCN_HANDLERS_H

#include "cmd/dispatch.h"
#include "codec.h"
#include "net/conn.h"
#include "request.h"
#include "server.h"

/* The dispatcher's state: buffers reused from command to command. */
struct scn_dispatch {
  scn_server *srv;
  scn_hooks hooks;
  scn_request rq;          /* the request being run */
  scn_buf reply;           /* the reply being built */
  scn_buf scratch;         /* per-command scratch output (batch results) */
  scn_world *last_world;   /* the world the last command named; cleared when it is destroyed */
  uint64_t last_world_gen; /* srv->worlds_gen when it was remembered */
  const char *line;        /* the request being run, as sent */
  size_t line_len;
  bool retrying;       /* re-running a request held while etcd was asked (cluster) */
  struct held *held;   /* those requests (cluster) */
  scn_world **touched; /* entity.destroy in a cluster: the worlds that had the entity */
  size_t ntouched, touched_cap;
  uint32_t touched_home; /* entity.destroy in a cluster: the entity's home tag */
  uint32_t *touched_of;  /* with "entities" in a cluster: the entity each of touched had */
  size_t touched_of_cap;
  bool several; /* world.destroy or entity.destroy with "entities" (cluster): gone, gone_home */
  const scn_entity *gone;
  uint32_t *gone_home;
  size_t ngone, gone_home_cap;
  const scn_command_info *last_cmd; /* the last command run: clients repeat themselves */
  scn_entity *ids;                  /* scratch id list (entity.create, children) */
  size_t ids_cap;
  char world_name[SCN_NAME_MAX + 1]; /* cluster: the world the command named, for the journal */
};

typedef struct scn_ctx {
  scn_server *srv;
  scn_dispatch *d;
  scn_conn *conn;           /* NULL on replay */
  const scn_acl_rule *rule; /* --acl: the connection's rule (NULL: no --acl, or anonymous) */
  const scn_command_info *cmd;
  scn_world *world;       /* the world named (SCN_CMD_WORLD), or the batch's */
  bool in_batch;          /* running an op of a batch */
  scn_span id;            /* the request's id as sent (p NULL: see id_item) */
  const cJSON *id_item;   /* the id when its text was not found */
  bool deferred;          /* the handler answers later (save); the connection waits */
  const char *world_name; /* cluster: d->world_name once the command named a world */
  bool over_output;       /* refused: the response would take the output over its limit */
} scn_ctx;

typedef int (*scn_handler)(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err);

#define SCN_DECLARE_HANDLER(name_, ident, flags_, right_, limit_, required_, optional_, help_)     \
  int scn_cmd_##ident(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err);
SCN_COMMANDS(SCN_DECLARE_HANDLER)
#undef SCN_DECLARE_HANDLER

/* Runs one command on the fields of a request (or of an op of a batch): the members it takes,
 * required fields, the world, the decoding of the fields, the handler. */
int scn_run_command(scn_ctx *ctx, const scn_command_info *cmd, const scn_fields *f, scn_buf *out,
                    scn_wire_error *err);

/* The one place a core error becomes a wire error: what the command was (ctx->cmd) and its
 * arguments (the entity, and the other entity in its role: parent, to or root) tell which
 * object the message names. */
int scn_core_error(const scn_ctx *ctx, const scn_args *a, int rc, scn_wire_error *err);

/* Refuses (LIMIT, counted against --output-limit) a response of about bytes that would take
 * the connection's queued output over --output-limit; 0 when it fits (or on replay). */
int scn_ctx_output_room(scn_ctx *ctx, size_t bytes, scn_wire_error *err);

/* A matrix of a result, in the form the connection asked for (json on replay). */
static inline void scn_ctx_add_matrix(const scn_ctx *ctx, scn_buf *out, const float m[16]) {
  if (ctx->conn && ctx->conn->matrices == SCN_MATRICES_B64)
    scn_buf_add_matrix_b64(out, m);
  else
    scn_buf_add_matrix(out, m);
}

/* Scratch room for n entity ids, reused across commands. */
scn_entity *scn_ids_scratch(scn_dispatch *d, size_t n);

#endif

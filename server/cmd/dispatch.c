#include "cmd/dispatch.h"

#include "cluster/cluster.h"
#include "cmd/handlers.h"
#include "ops/json_arena.h"
#include "ops/log.h"
#include "store/groups.h"
#include "store/persist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const scn_handler handlers[] = {
#define SCN_HANDLER_ROW(name_, ident, flags_, right_, limit_, required_, optional_, help_)         \
  scn_cmd_##ident,
    SCN_COMMANDS(SCN_HANDLER_ROW)
#undef SCN_HANDLER_ROW
};
_Static_assert(sizeof handlers / sizeof handlers[0] == SCN_COMMAND_COUNT,
               "a handler for every command, indexed by its id");

int scn_ctx_output_room(scn_ctx *ctx, size_t bytes, scn_wire_error *err) {
  scn_conn *c = ctx->conn;
  if (!c || scn_conn_queued(c) + bytes <= ctx->srv->cfg.output_limit)
    return 0;
  ctx->over_output = true;
  return scn_fail(err, SCN_W_LIMIT,
                  "the response (about %zu bytes) would take this connection's output over "
                  "output-limit (%llu bytes)",
                  bytes, (unsigned long long)ctx->srv->cfg.output_limit);
}

scn_entity *scn_ids_scratch(scn_dispatch *d, size_t n) {
  scn_entity *ids = scn_array_grow(d->ids, &d->ids_cap, sizeof *ids, n);
  if (ids)
    d->ids = ids;
  return ids;
}

/* Clients usually address one world many times in a row: whether v names the world the last
 * command found (its name is known to be valid, so the check and the lookup are skipped). */
static bool last_world_named(const scn_ctx *ctx, const cJSON *v) {
  const scn_dispatch *d = ctx->d;
  return d->last_world && d->last_world_gen == ctx->srv->worlds_gen && cJSON_IsString(v) &&
         strcmp(v->valuestring, scn_world_name(d->last_world)) == 0;
}

/* The world a command acts on. In a batch it is the batch's, and an op may only repeat its
 * name. */
static int resolve_world(scn_ctx *ctx, const scn_fields *f, scn_wire_error *err) {
  const cJSON *v = f->v[SCN_F_world];
  bool given = f->present & SCN_F(world);
  const char *name;
  if (ctx->in_batch) {
    if (!given)
      return 0;
    if (scn_decode_world_name(v, &name, err) < 0)
      return -1;
    if (strcmp(name, scn_world_name(ctx->world)) != 0)
      return scn_fail(err, SCN_W_BAD_REQUEST, "ops of a batch act on the batch's world only");
    return 0;
  }
  scn_dispatch *d = ctx->d;
  if (last_world_named(ctx, v)) {
    ctx->world = d->last_world;
    return 0;
  }
  if (scn_decode_world_name(v, &name, err) < 0)
    return -1;
  scn_world *w = scn_world_find(ctx->srv->scene, name);
  if (!w)
    return scn_fail(err, SCN_W_NOT_FOUND, "world \"%s\" not found", name);
  d->last_world = ctx->world = w;
  d->last_world_gen = ctx->srv->worlds_gen;
  return 0;
}

static const char *right_name(unsigned right) {
  for (unsigned r = 0; r < SCN_RIGHT_COUNT; r++)
    if (right == 1u << r)
      return scn_right_name((scn_right_bit)r);
  return "?";
}

/* --acl: the command's right, and for one that reaches into every world the prefix "*". */
static int check_right(const scn_ctx *ctx, const scn_command_info *cmd, const scn_fields *f,
                       scn_wire_error *err) {
  const scn_acl_rule *r = ctx->rule;
  if (cmd->id == SCN_C_hello && (f->present & SCN_F(token)))
    return 0; /* hello with a token authenticates: its handler decides */
  if (!(r->rights & cmd->right))
    return scn_fail(err, SCN_W_UNAUTHORIZED, "this token may not run %s (it needs the %s right)",
                    cmd->name, right_name(cmd->right));
  if ((cmd->flags & SCN_CMD_ALL_WORLDS) && !r->all_worlds)
    return scn_fail(err, SCN_W_UNAUTHORIZED,
                    "%s reaches into every world: it needs a token whose prefixes are *",
                    cmd->name);
  return 0;
}

/* --acl: a world a command names lies within the token's prefixes, whether it exists or not
 * (so that a refusal tells nothing of other worlds). */
static int check_world(const scn_ctx *ctx, const scn_fields *f, scn_wire_error *err) {
  const char *name;
  if (scn_decode_world_name(f->v[SCN_F_world], &name, err) < 0)
    return -1;
  if (!scn_acl_allows_world(ctx->rule, name))
    return scn_fail(err, SCN_W_UNAUTHORIZED, "world \"%s\" is outside this token's prefixes", name);
  return 0;
}

/* ---- the cluster's routing ----------------------------------------------------------------- */

/* A request held while etcd is asked about its world's group: run again once it answered. */
typedef struct held {
  struct held *next;
  scn_dispatch *d;
  scn_conn *conn; /* NULL once the connection went away */
  size_t len;
  char line[];
} held;

static int execute(scn_dispatch *d, scn_conn *c, const char *line, size_t len, bool *deferred);

/* The request being routed, kept to run again once etcd answered: made only when it must wait,
 * so that routing costs no allocation otherwise. NULL when out of memory. */
static void *hold_request(void *arg) {
  scn_ctx *ctx = arg;
  scn_dispatch *d = ctx->d;
  held *h = malloc(sizeof *h + d->line_len + 1);
  if (!h)
    return NULL;
  h->d = d;
  h->conn = ctx->conn;
  h->len = d->line_len;
  memcpy(h->line, d->line, d->line_len);
  h->line[d->line_len] = '\0';
  h->next = d->held;
  d->held = h;
  return h;
}

/* A held request whose wait could not start. */
static void drop_request(void *ud) {
  held *h = ud;
  for (held **p = &h->d->held; *p; p = &(*p)->next)
    if (*p == h) {
      *p = h->next;
      break;
    }
  free(h);
}

static void on_wake(void *ud) {
  held *h = ud;
  scn_dispatch *d = h->d;
  for (held **p = &d->held; *p; p = &(*p)->next)
    if (*p == h) {
      *p = h->next;
      break;
    }
  scn_conn *c = h->conn;
  if (c && d->srv->cluster) { /* NULL: the cluster is closing, and so is the daemon */
    bool deferred;
    d->retrying = true;
    execute(d, c, h->line, h->len, &deferred);
    d->retrying = false;
    if (!deferred)
      scn_buf_add(&c->out.bytes, d->reply.data, d->reply.len);
    if (!deferred)
      scn_conn_resume(c);
  }
  free(h);
}

/* Which daemon runs this command, for commands that name a world: 0 to run it here, -1 with
 * MOVED, UNAVAILABLE or NOT_FOUND, or 1 when it is held until etcd answers. */
static int route(scn_ctx *ctx, const scn_command_info *cmd, const scn_fields *f,
                 scn_wire_error *err) {
  scn_cluster *cl = ctx->srv->cluster;
  bool creating = cmd->id == SCN_C_world_create;
  const char *world = NULL, *place = NULL, *why;
  if ((cmd->flags & SCN_CMD_WORLD) || creating ||
      (cmd->id == SCN_C_entity_create && (f->present & SCN_F(world)))) {
    if (last_world_named(ctx, f->v[SCN_F_world]))
      world = f->v[SCN_F_world]->valuestring;
    else if (scn_decode_world_name(f->v[SCN_F_world], &world, err) < 0)
      return -1;
    if (creating && (f->present & SCN_F(node)) &&
        scn_decode_string(f->v[SCN_F_node], "node", &place, err) < 0)
      return -1;
  } else if (cmd->flags & SCN_CMD_MUTATES) {
    /* entity.create and .destroy: this node's entities, which need its id ranges */
    if (!scn_cluster_serving(cl, &why)) {
      scn_cluster_count_route(cl, SCN_ROUTE_UNAVAILABLE);
      return scn_fail(err, SCN_W_UNAVAILABLE, "%s; retry", why);
    }
    return 0;
  } else {
    return 0;
  }
  scn_route r;
  scn_dispatch *d = ctx->d;
  scn_route_request rq = {.world = world,
                          .creating = creating,
                          .place = place,
                          .follower_read =
                              ctx->conn->follower_reads && (cmd->flags & SCN_CMD_FOLLOWER),
                          .retry = d->retrying,
                          .wake = d->retrying ? NULL : on_wake,
                          .hold = hold_request,
                          .drop = drop_request,
                          .hold_arg = ctx};
  scn_route_kind kind = scn_cluster_route(cl, &rq, &r);
  if (kind == SCN_ROUTE_WAIT) {
    ctx->deferred = true;
    return 1;
  }
  scn_cluster_count_route(cl, kind);
  switch (kind) {
  case SCN_ROUTE_MOVED:
    scn_fail(err, SCN_W_MOVED, "world \"%s\" is served by node %s at %s", world, r.node, r.addr);
    snprintf(err->node, sizeof err->node, "%s", r.node);
    snprintf(err->addr, sizeof err->addr, "%s", r.addr);
    return -1;
  case SCN_ROUTE_UNAVAILABLE:
    return scn_fail(err, SCN_W_UNAVAILABLE, "world \"%s\": %s", world, r.why);
  case SCN_ROUTE_NO_NODE:
    return scn_fail(err, SCN_W_NOT_FOUND, "no live node named \"%.64s\"", place);
  default:
    return 0;
  }
}

int scn_run_command(scn_ctx *ctx, const scn_command_info *cmd, const scn_fields *f, scn_buf *out,
                    scn_wire_error *err) {
  scn_fieldset required = cmd->required, rest = cmd->required | cmd->optional;
  if (ctx->rule && check_right(ctx, cmd, f, err) < 0)
    return -1;
  /* A member the command does not take is refused, before it could be mistaken for a missing
   * one (a misspelt "partial" would turn a partial set into a full one). A journal's lines
   * were accepted by the daemon that wrote them, and carry "created": replay takes them as
   * they are. */
  if (ctx->conn && scn_fields_check_taken(f, scn_command_takes(cmd), err) < 0)
    return -1;
  if (ctx->in_batch)
    required &= ~SCN_F(world);
  if (scn_fields_require(f, required, err) < 0)
    return -1;
  /* (An op of a batch acts on the batch's world, checked with the batch; one that names
   * another world is refused for it as well.) */
  if (ctx->rule && (rest & SCN_F(world)) && (f->present & SCN_F(world)) &&
      check_world(ctx, f, err) < 0)
    return -1;
  ctx->cmd = cmd;
  if (ctx->srv->cluster && ctx->conn && !ctx->in_batch) {
    int routed = route(ctx, cmd, f, err);
    if (routed != 0)
      return routed < 0 ? -1 : 0;
  }
  if (cmd->flags & SCN_CMD_WORLD) {
    if (resolve_world(ctx, f, err) < 0)
      return -1;
    rest &= ~SCN_F(world);
  }
  if (cmd->id == SCN_C_world_move)
    rest &= ~SCN_F(to); /* a node's name, read by the handler */
  scn_args a;
  scn_args_init(&a, f);
  if (ctx->world)
    a.world = scn_world_name(ctx->world);
  if (scn_args_decode(&a, rest, err) < 0)
    return -1;
  if (ctx->srv->gstore && !ctx->in_batch && a.world) {
    /* A copy: the handler may free the world (world.destroy), and the journal needs its
     * group after that. */
    size_t n = strnlen(a.world, SCN_NAME_MAX); /* (per command: no formatting) */
    memcpy(ctx->d->world_name, a.world, n);
    ctx->d->world_name[n] = '\0';
    ctx->world_name = ctx->d->world_name;
    /* A change from a client is applied only where its group's journal is open: one that
     * named a world of a group this daemon does not hold (entity.create with a world nobody
     * has made) would be answered ok and written nowhere. A command on a world it found has
     * its group here; a replay runs while its group loads, before it is held. */
    if (ctx->conn && (cmd->flags & SCN_CMD_MUTATES) && !(cmd->flags & SCN_CMD_WORLD)) {
      char group[SCN_NAME_MAX + 1];
      scn_group_of(a.world, group);
      if (!scn_gstore_holds(ctx->srv->gstore, group))
        return scn_fail(err, SCN_W_NOT_FOUND, "world \"%s\" not found", a.world);
    }
  }
  return handlers[cmd->id](ctx, &a, out, err);
}

/* A LIMIT error is counted against the limit that refused it. */
static void count_error(scn_server *srv, const scn_command_info *cmd, scn_wire_code code,
                        bool over_output) {
  srv->counters.errors[code]++;
  if (code == SCN_W_UNAUTHORIZED && cmd)
    srv->counters.unauthorized[cmd->id]++;
  if (code != SCN_W_LIMIT)
    return;
  scn_limit_kind kind = over_output ? SCN_LIMIT_output_limit
                        : cmd       ? cmd->limit
                                    : SCN_LIMIT_max_line;
  if (kind < SCN_LIMIT_KINDS)
    srv->counters.limit_hits[kind]++;
}

/* ---- one request, step by step ------------------------------------------------------------ */

/* A request on its way through execute, and what its steps found out. */
typedef struct request_run {
  scn_dispatch *d;
  scn_conn *c; /* NULL on replay */
  const char *line;
  size_t len;
  const cJSON *id_item;        /* the id, when its text was not found (echoed from the tree) */
  const scn_command_info *cmd; /* once "cmd" named a known command */
  const char *world_name;      /* cluster: the world the command named, for the journal */
  bool over_output;            /* refused because of --output-limit */
  bool deferred;               /* its owner answers later */
} request_run;

/* "cmd": present, a string, a known command. */
static int find_command(request_run *r, scn_wire_error *err) {
  scn_dispatch *d = r->d;
  const scn_fields *f = &d->rq.f;
  const char *name;
  if (!(f->present & SCN_F(cmd)))
    return scn_fail(err, SCN_W_BAD_REQUEST, "missing field \"cmd\"");
  if (scn_decode_string(f->v[SCN_F_cmd], "cmd", &name, err) < 0)
    return -1;
  /* Clients repeat themselves: the last command is compared before the table is searched. */
  if (!d->last_cmd || strcmp(name, d->last_cmd->name) != 0)
    d->last_cmd = scn_command_find(name); /* NULL when unknown */
  r->cmd = d->last_cmd;
  if (!r->cmd)
    return scn_fail(err, SCN_W_UNKNOWN_COMMAND, "unknown command \"%.64s\"", name);
  return 0;
}

/* Replay runs journaled commands only; the others need a connection. */
static int check_journaled(const request_run *r, scn_wire_error *err) {
  if (r->c || (r->cmd->flags & SCN_CMD_MUTATES))
    return 0;
  return scn_fail(err, SCN_W_BAD_REQUEST, "%s is not a journaled command", r->cmd->name);
}

/* Before hello authenticates, only the open commands (ping, hello); with --acl, a connection
 * whose token the access list still holds. */
static int check_authenticated(const request_run *r, scn_wire_error *err) {
  scn_conn *c = r->c;
  const scn_server *srv = r->d->srv;
  if (!c || c->authed || (r->cmd->flags & SCN_CMD_OPEN) ||
      (srv->acl && scn_acl_rule_of(srv->acl, &c->who)))
    return 0;
  return scn_fail(err, SCN_W_UNAUTHORIZED,
                  c->who.known ? "this connection's token is no longer in the access list: send "
                                 "hello with a token"
                               : "authenticate first: send hello with the token");
}

/* A client that is not reading its responses gets no more work until it does. */
static int check_output_backlog(request_run *r, scn_wire_error *err) {
  const scn_conn *c = r->c;
  const scn_server *srv = r->d->srv;
  if (!c || scn_conn_queued(c) <= srv->cfg.output_limit)
    return 0;
  r->over_output = true;
  return scn_fail(err, SCN_W_LIMIT,
                  "%zu bytes of output wait for this connection, over output-limit (%llu): read "
                  "the responses, then retry",
                  scn_conn_queued(c), (unsigned long long)srv->cfg.output_limit);
}

/* Replay of a journal record that created entities: the same ids again. */
static int expect_created(const request_run *r, scn_wire_error *err) {
  scn_dispatch *d = r->d;
  const scn_fields *f = &d->rq.f;
  if (r->c || !(f->present & SCN_F(created)))
    return 0;
  const cJSON *v = f->v[SCN_F_created];
  int n = cJSON_GetArraySize(v);
  scn_entity *ids = cJSON_IsArray(v) ? scn_ids_scratch(d, (size_t)n + 1) : NULL;
  if (!ids)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"created\" must be an array of ids");
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++)
    if (scn_decode_entity(e, "created", &ids[i], err) < 0)
      return -1;
  if (scn_entity_expect(d->srv->scene, ids, (size_t)n) != SCN_OK)
    return scn_fail(err, SCN_W_INTERNAL, "cannot make the recorded ids again");
  return 0;
}

/* The checks between finding the command and running it, in the order of PROTOCOL.md section
 * 2.4: the first that fails answers. (The command's own checks follow in scn_run_command.) */
static int admit(request_run *r, scn_wire_error *err) {
  if (check_journaled(r, err) < 0 || check_authenticated(r, err) < 0 ||
      check_output_backlog(r, err) < 0 || expect_created(r, err) < 0)
    return -1;
  return 0;
}

/* Runs the command, its reply (from the id on) built in d->reply. */
static int run_command(request_run *r, scn_wire_error *err) {
  scn_dispatch *d = r->d;
  scn_server *srv = d->srv;
  scn_conn *c = r->c;
  scn_buf *reply = &d->reply;
  scn_ctx ctx = {.srv = srv,
                 .d = d,
                 .conn = c,
                 .rule = c && srv->acl ? scn_acl_rule_of(srv->acl, &c->who) : NULL,
                 .id = d->rq.id,
                 .id_item = r->id_item};
  scn_entity_recorded_clear(srv->scene);
  d->ntouched = 0;
  d->touched_home = 0;
  d->several = false;
  d->ngone = 0;
  if (r->id_item)
    scn_reply_begin(reply, r->id_item);
  else
    scn_reply_begin_raw(reply, d->rq.id.p, d->rq.id.len);
  int rc = scn_run_command(&ctx, r->cmd, &d->rq.f, reply, err);
  r->world_name = ctx.world_name;
  if (!c)
    scn_entity_expect(srv->scene, NULL, 0); /* a failed replay leaves none behind */
  if (rc == 0 && reply->failed)
    rc = scn_fail(err, SCN_W_INTERNAL, "out of memory building the reply");
  /* A read changed nothing, so a response too big for the output limit is simply
   * refused; commands with large responses that change state check before they do
   * (entity.create, batch); the others answer in a few bytes. */
  if (rc == 0 && (r->cmd->flags & SCN_CMD_READ))
    rc = scn_ctx_output_room(&ctx, reply->len, err);
  r->over_output |= ctx.over_output;
  r->deferred = rc == 0 && ctx.deferred;
  return rc;
}

/* The reply ends (unless its owner answers later), and the modules hear of a command from a
 * connection (the journal). */
static void finish_success(const request_run *r) {
  scn_dispatch *d = r->d;
  scn_server *srv = d->srv;
  if (r->deferred) {
    d->reply.len = 0; /* the handler's owner answers later */
    return;
  }
  scn_reply_end(&d->reply);
  if (!r->c)
    return;
  scn_done done = {.cmd = r->cmd, .line = r->line, .len = r->len, .world = r->world_name};
  done.ncreated = scn_entity_recorded(srv->scene, &done.created);
  if (srv->gstore) {
    done.touched = d->touched;
    done.ntouched = d->ntouched;
    done.home = d->touched_home;
    done.several = d->several;
    done.destroyed = d->gone;
    done.destroyed_home = d->gone_home;
    done.ndestroyed = d->ngone;
    done.touched_of = d->touched_of;
    /* (The store runs without the cluster in tests/journal.) */
    if (srv->cluster && r->world_name && (r->cmd->flags & SCN_CMD_MUTATES))
      scn_cluster_note_ack(srv->cluster, r->c);
  }
  if (srv->cluster)
    scn_cluster_command_from(srv->cluster, r->c);
  scn_hooks_after_command(srv, &done);
}

/* The reply is the error alone, with the request's id. */
static void finish_failure(const request_run *r, const scn_wire_error *err) {
  scn_dispatch *d = r->d;
  scn_buf *reply = &d->reply;
  reply->len = 0;
  reply->failed = false;
  if (r->id_item)
    scn_reply_error(reply, r->id_item, err);
  else
    scn_reply_error_raw(reply, d->rq.id.p, d->rq.id.len, err);
  count_error(d->srv, r->cmd, err->code, r->over_output);
}

/* Runs one request line and leaves its reply line (if any) in d->reply; c is NULL on replay.
 * The reply is built apart from the connection's output: a handler may queue stream events
 * for any connection, this one included, and those must land before the reply, never inside
 * it. Returns 0 when the command succeeded. */
static int execute(scn_dispatch *d, scn_conn *c, const char *line, size_t len, bool *deferred) {
  scn_request *rq = &d->rq;
  request_run r = {.d = d, .c = c, .line = line, .len = len};
  scn_wire_error err;
  d->line = line;
  d->line_len = len;
  d->reply.len = 0;
  d->reply.failed = false;
  int rc = scn_request_parse(rq, line, len, &err);
  /* The id is echoed as the exact text sent (cJSON would reprint numbers as doubles). */
  if (rq->root && (rq->f.present & SCN_F(id)) && !rq->id.p)
    r.id_item = rq->f.v[SCN_F_id];
  if (rc == 0)
    rc = find_command(&r, &err);
  if (rc == 0)
    rc = admit(&r, &err);
  if (rc == 0)
    rc = run_command(&r, &err);
  if (r.cmd)
    d->srv->counters.by_command[r.cmd->id]++;
  if (rc == 0)
    finish_success(&r);
  else
    finish_failure(&r, &err);
  *deferred = r.deferred;
  scn_json_release(rq->root);
  scn_json_arena_reset();
  return rc;
}

void scn_dispatch_line(scn_conn *c, const char *line, size_t len) {
  scn_server *srv = c->srv;
  /* A follower's stream (replicate): its lines are acks, not requests. */
  if (c->repl && srv->cluster) {
    scn_cluster_repl_line(srv->cluster, c, line, len);
    return;
  }
  /* One clock read per command: a command starts when the one before it in this read batch
   * ended (the read callback sets the clock first). */
  uint64_t started = srv->command_clock;
  srv->counters.commands++;
  if (!line) {
    scn_wire_error err;
    scn_fail(&err, SCN_W_LIMIT, "request line longer than max-line (%llu bytes)",
             (unsigned long long)srv->cfg.max_line);
    scn_reply_error_raw(&c->out.bytes, NULL, 0, &err);
    count_error(srv, NULL, err.code, false);
    scn_log(SCN_LOG_WARN, "line over the limit", "conn=%llu max_line=%llu",
            (unsigned long long)c->id, (unsigned long long)srv->cfg.max_line);
    return;
  }
  bool deferred;
  scn_dispatch *d = srv->dispatch;
  execute(d, c, line, len, &deferred);
  if (deferred)
    c->blocked = true; /* nothing more from this connection until the answer is written */
  else
    scn_buf_add(&c->out.bytes, d->reply.data, d->reply.len);
  srv->command_clock = uv_hrtime();
  scn_hist_observe(&srv->counters.command_time, (double)(srv->command_clock - started) * 1e-9);
}

bool scn_dispatch_replay(void *ud, const char *line, size_t len) {
  scn_server *srv = ud;
  bool deferred;
  return execute(srv->dispatch, NULL, line, len, &deferred) == 0;
}

/* A connection that waits for a save goes away: its answer is not wanted any more. */
static void on_conn_closed(void *ud, scn_conn *c) {
  scn_dispatch *d = ud;
  if (d->srv->persist)
    scn_persist_forget(d->srv->persist, c);
  for (held *h = d->held; h; h = h->next)
    if (h->conn == c)
      h->conn = NULL; /* freed when the cluster wakes it */
  if (d->srv->cluster) {
    scn_cluster_forget_move(d->srv->cluster, c);
    scn_cluster_forget_promote(d->srv->cluster, c);
  }
}

scn_dispatch *scn_dispatch_open(scn_server *srv) {
  scn_dispatch *d = calloc(1, sizeof *d);
  if (!d)
    return NULL;
  d->srv = srv;
  d->hooks = (scn_hooks){.ud = d, .conn_closed = on_conn_closed};
  scn_server_add_hooks(srv, &d->hooks);
  return d;
}

void scn_dispatch_close(scn_dispatch *d) {
  if (!d)
    return;
  scn_server_remove_hooks(d->srv, &d->hooks);
  scn_request_free(&d->rq);
  scn_buf_free(&d->reply);
  scn_buf_free(&d->scratch);
  free(d->ids);
  free(d->touched);
  free(d->touched_of);
  free(d->gone_home);
  free(d);
}

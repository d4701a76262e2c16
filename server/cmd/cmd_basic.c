/* Connection, world, entity and daemon commands. */
#include "cluster/cluster.h"
#include "cmd/handlers.h"
#include "ops/log.h"
#include "store/groups.h"
#include "store/persist.h"
#include "store/snapshot.h"
#include "stream/stream.h"

#include <math.h>
#include <stdlib.h>

#include <string.h>

int scn_cmd_ping(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)ctx, (void)a, (void)out, (void)err;
  return 0;
}

/* Tokens are compared in time independent of where they differ. */
static bool token_equal(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  unsigned char diff = (unsigned char)(la != lb);
  for (size_t i = 0; i < la; i++)
    diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
  return diff == 0;
}

/* hello with a token under --acl: the connection takes the identity of the token's rule. */
static int authenticate(scn_ctx *ctx, const char *token, scn_wire_error *err) {
  scn_server *srv = ctx->srv;
  scn_identity who = {.known = true, .generation = srv->acl->generation};
  scn_acl_hash(token, strlen(token), who.token_sha256);
  who.rule = scn_acl_match(srv->acl, who.token_sha256);
  if (!who.rule) {
    scn_log(SCN_LOG_WARN, "authentication failed", "conn=%llu peer=%s",
            (unsigned long long)ctx->conn->id, ctx->conn->peer);
    return scn_fail(err, SCN_W_UNAUTHORIZED, "unknown token");
  }
  ctx->conn->who = who;
  ctx->rule = who.rule;
  scn_log(SCN_LOG_DEBUG, "authenticated", "conn=%llu peer=%s acl_line=%u",
          (unsigned long long)ctx->conn->id, ctx->conn->peer, who.rule->line);
  return 0;
}

/* What the connection may do: its rule's rights and prefixes, or everything without --acl
 * (the cluster right named only where there is a change stream to follow: --replicas). */
static void add_access(const scn_ctx *ctx, scn_buf *out) {
  const scn_acl_rule *r = ctx->rule;
  unsigned all = ctx->srv->cfg.replicas >= 1 ? ~0u : ~SCN_RIGHT(cluster);
  scn_reply_key(out, "rights");
  scn_buf_addc(out, '[');
  for (unsigned i = 0, n = 0; i < SCN_RIGHT_COUNT; i++)
    if ((r ? r->rights : all) & (1u << i)) {
      if (n++)
        scn_buf_addc(out, ',');
      const char *name = scn_right_name((scn_right_bit)i);
      scn_buf_add_json_string(out, name, strlen(name));
    }
  scn_buf_addc(out, ']');
  scn_reply_key(out, "prefixes");
  if (!r || r->all_worlds) {
    scn_buf_adds(out, "[\"*\"]");
    return;
  }
  scn_buf_addc(out, '[');
  for (size_t i = 0; i < r->nprefixes; i++) {
    if (i)
      scn_buf_addc(out, ',');
    scn_buf_add_json_string(out, r->prefixes[i], strlen(r->prefixes[i]));
  }
  scn_buf_addc(out, ']');
}

int scn_cmd_hello(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_server *srv = ctx->srv;
  const char *expected = srv->cfg.auth_token, *token = NULL;
  if ((expected[0] || srv->acl) && (a->f->present & SCN_F(token)) &&
      scn_decode_string(a->f->v[SCN_F_token], "token", &token, err) < 0)
    return scn_fail(err, SCN_W_UNAUTHORIZED, "field \"token\" must be a string");
  if (srv->acl) {
    if (token && authenticate(ctx, token, err) < 0)
      return -1;
    if (!ctx->rule)
      return scn_fail(err, SCN_W_UNAUTHORIZED, "a token is required");
  } else if (expected[0]) {
    if (!token || !token_equal(token, expected)) {
      scn_log(SCN_LOG_WARN, "authentication failed", "conn=%llu peer=%s",
              (unsigned long long)ctx->conn->id, ctx->conn->peer);
      return scn_fail(err, SCN_W_UNAUTHORIZED, token ? "wrong token" : "a token is required");
    }
    ctx->conn->authed = true;
  }
  /* A hello without "matrices" keeps the connection's form. */
  if (a->f->present & SCN_F(matrices))
    ctx->conn->matrices = a->matrices;
  /* Nor one without "follower_reads" where its reads are answered. */
  if (a->f->present & SCN_F(follower_reads))
    ctx->conn->follower_reads = a->follower_reads;
  scn_reply_key(out, "server");
  scn_buf_adds(out, "\"scened\"");
  scn_reply_key(out, "version");
  scn_buf_add_json_string(out, SCN_VERSION, strlen(SCN_VERSION));
  scn_reply_key(out, "protocol");
  scn_buf_add_u64(out, SCN_PROTOCOL);
  scn_reply_key(out, "matrices");
  scn_buf_adds(out, ctx->conn->matrices == SCN_MATRICES_B64 ? "\"b64\"" : "\"json\"");
  if (ctx->conn->follower_reads) {
    scn_reply_key(out, "follower_reads");
    scn_buf_adds(out, "true");
  }
  add_access(ctx, out);
  return 0;
}

/* "history": how many ticks to keep, 0 to SCN_HISTORY_MAX (more is LIMIT). */
static int history_of(const scn_args *a, int64_t *ticks, scn_wire_error *err) {
  *ticks = 0;
  if (!(a->f->present & SCN_F(history)))
    return 0;
  const cJSON *v = a->f->v[SCN_F_history];
  if (cJSON_IsNumber(v) && v->valuedouble > SCN_HISTORY_MAX &&
      v->valuedouble == floor(v->valuedouble))
    return scn_fail(err, SCN_W_LIMIT, "field \"history\" is at most %d ticks", SCN_HISTORY_MAX);
  uint64_t n;
  if (scn_decode_uint(v, "history", 0, SCN_HISTORY_MAX, &n, err) < 0)
    return -1;
  *ticks = (int64_t)n;
  return 0;
}

/* Whether no world of world's group exists yet. */
static bool group_is_new(const scn_scene *scene, const char *world) {
  char group[SCN_NAME_MAX + 1];
  scn_group_of(world, group);
  for (size_t i = 0, n = scn_world_count(scene); i < n; i++)
    if (scn_world_in_group(scn_world_name(scn_world_at(scene, i)), group))
      return false;
  return true;
}

/* "durability": "sync" or "async", for a new group of the cluster (fixed at its creation);
 * checked without --cluster too, where it changes nothing. */
static int durability_of(scn_ctx *ctx, const scn_args *a, scn_wire_error *err) {
  if (!(a->f->present & SCN_F(durability)))
    return 0;
  const char *v;
  if (scn_decode_string(a->f->v[SCN_F_durability], "durability", &v, err) < 0)
    return -1;
  int durability;
  if (strcmp(v, "sync") == 0)
    durability = SCN_DURABILITY_SYNC;
  else if (strcmp(v, "async") == 0)
    durability = SCN_DURABILITY_ASYNC;
  else
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"durability\" must be \"sync\" or \"async\"");
  char msg[256];
  if (ctx->srv->cluster &&
      scn_cluster_create_durability(ctx->srv->cluster, a->world, durability,
                                    group_is_new(ctx->srv->scene, a->world), msg, sizeof msg) < 0)
    return scn_fail(err, SCN_W_BAD_REQUEST, "%s", msg);
  return 0;
}

int scn_cmd_world_create(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  int64_t history;
  if (history_of(a, &history, err) < 0)
    return -1;
  if (!scn_world_find(ctx->srv->scene, a->world) && durability_of(ctx, a, err) < 0)
    return -1;
  scn_world *w;
  int rc = scn_world_create(ctx->srv->scene, a->world, &w);
  if (rc == SCN_OK && history && (rc = scn_world_set_history(w, history)) != SCN_OK)
    scn_server_drop_world(ctx->srv, a->world); /* nothing changed */
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  if (ctx->srv->cluster) {
    const char *node = scn_cluster_node(ctx->srv->cluster);
    scn_reply_key(out, "node");
    scn_buf_add_json_string(out, node, strlen(node));
  }
  return 0;
}

/* With "cluster": true (and --cluster), every node's worlds, each with its node. */
int scn_cmd_world_list(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_scene *scene = ctx->srv->scene;
  scn_cluster *cl = ctx->srv->cluster;
  bool all = false;
  if ((a->f->present & SCN_F(cluster)) &&
      scn_decode_bool(a->f->v[SCN_F_cluster], "cluster", &all, err) < 0)
    return -1;
  const char *node = cl ? scn_cluster_node(cl) : NULL;
  scn_reply_key(out, "worlds");
  scn_buf_addc(out, '[');
  bool first = true;
  for (size_t i = 0; i < scn_world_count(scene); i++) {
    scn_world *w = scn_world_at(scene, i);
    if (ctx->rule && !scn_acl_allows_world(ctx->rule, scn_world_name(w)))
      continue; /* --acl: only the worlds the token may see */
    if (all && node && scn_cluster_follows_world(cl, scn_world_name(w)))
      continue; /* a follower's copy: its owner lists it, with its node */
    scn_buf_adds(out, first ? "{\"name\":" : ",{\"name\":");
    first = false;
    scn_buf_add_json_string(out, scn_world_name(w), strlen(scn_world_name(w)));
    scn_buf_adds(out, ",\"transforms\":");
    scn_buf_add_u64(out, scn_world_transform_count(w));
    scn_buf_adds(out, ",\"history\":");
    scn_buf_add_u64(out, scn_world_history(w));
    if (all && node) {
      scn_buf_adds(out, ",\"node\":");
      scn_buf_add_json_string(out, node, strlen(node));
      scn_cluster_world_replicas_json(cl, scn_world_name(w), out);
    }
    scn_buf_addc(out, '}');
  }
  if (all && cl)
    scn_cluster_worlds_json(cl, out, first, ctx->rule);
  scn_buf_addc(out, ']');
  return 0;
}

int scn_cmd_cluster_nodes(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)a;
  if (!ctx->srv->cluster)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "this daemon is not in a cluster (start it with --cluster)");
  scn_cluster_nodes_json(ctx->srv->cluster, out);
  return 0;
}

/* ,"node":N,"addr":A: where the world's group is served now. */
static void add_owner(scn_buf *out, const char *node, const char *addr) {
  scn_reply_key(out, "node");
  scn_buf_add_json_string(out, node, strlen(node));
  scn_reply_key(out, "addr");
  scn_buf_add_json_string(out, addr, strlen(addr));
}

/* A deferred answer (world.move's, world.promote's): its ok reply, begun with the node that
 * owns the world now (the caller adds its own fields and ends it), or NULL after writing the
 * error. */
static scn_buf *deferred_reply(scn_conn *c, bool ok, int code, const char *message,
                               const char *node, const char *addr) {
  scn_buf *out = &c->out.bytes;
  const char *tag = c->pending_tag;
  if (ok) {
    scn_reply_begin_raw(out, tag, tag ? strlen(tag) : 0);
    add_owner(out, node, addr);
    return out;
  }
  scn_wire_error err;
  scn_fail(&err, (scn_wire_code)code, "%s", message);
  scn_reply_error_raw(out, tag, tag ? strlen(tag) : 0, &err);
  return NULL;
}

/* After a deferred answer: the requests the connection held run. */
static void deferred_done(scn_conn *c) {
  free(c->pending_tag);
  c->pending_tag = NULL;
  scn_conn_resume(c);
}

/* world.move's answer: the reply the connection waited for, then the requests it held. */
static void move_done(void *ud, const scn_move_answer *a) {
  scn_conn *c = ud;
  scn_buf *out = deferred_reply(c, a->ok, a->code, a->message, a->node, a->addr);
  if (out)
    scn_reply_end(out);
  deferred_done(c);
}

/* The reply's id kept for a deferred answer (NUL-terminated JSON text, or NULL). */
static char *id_text(const scn_ctx *ctx) {
  if (!ctx->id_item && !ctx->id.p)
    return NULL;
  scn_buf id = {0};
  if (ctx->id_item)
    scn_buf_add_json_value(&id, ctx->id_item);
  else
    scn_buf_add(&id, ctx->id.p, ctx->id.len);
  scn_buf_addc(&id, '\0');
  return id.failed ? NULL : id.data;
}

/* The connection waits for a deferred answer, with the request's id kept for it. */
static void defer(scn_ctx *ctx) {
  ctx->conn->pending_tag = id_text(ctx);
  ctx->deferred = true;
}

int scn_cmd_world_move(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_cluster *cl = ctx->srv->cluster;
  const char *to;
  if (!cl)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "this daemon is not in a cluster (start it with --cluster)");
  if (scn_decode_string(a->f->v[SCN_F_to], "to", &to, err) < 0)
    return -1;
  if (!ctx->conn)
    return 0;
  int code;
  char msg[256];
  int rc = scn_cluster_move(cl, a->world, to, move_done, ctx->conn, &code, msg, sizeof msg);
  if (rc < 0)
    return scn_fail(err, (scn_wire_code)code, "%s", msg);
  if (rc == 0) {
    defer(ctx);
  } else {
    add_owner(out, scn_cluster_node(cl), scn_cluster_addr(cl)); /* it is here already */
  }
  return 0;
}

/* world.promote's answer, as world.move's (the connection waited for it). */
static void promote_done(void *ud, const scn_promote_answer *a) {
  scn_conn *c = ud;
  scn_buf *out = deferred_reply(c, a->ok, a->code, a->message, a->node, a->addr);
  if (out) {
    scn_reply_key(out, "lag_ticks");
    scn_buf_add_u64(out, a->lag_ticks);
    scn_reply_end(out);
  }
  deferred_done(c);
}

int scn_cmd_world_promote(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)out;
  scn_cluster *cl = ctx->srv->cluster;
  const char *node;
  if (!cl)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "this daemon is not in a cluster (start it with --cluster)");
  if (scn_decode_string(a->f->v[SCN_F_node], "node", &node, err) < 0)
    return -1;
  if (!scn_world_name_valid(node, strlen(node)))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"node\" must be a node's name");
  if (!ctx->conn)
    return 0;
  int code;
  char msg[300];
  if (scn_cluster_promote(cl, a->world, node, promote_done, ctx->conn, &code, msg, sizeof msg) < 0)
    return scn_fail(err, (scn_wire_code)code, "%s", msg);
  defer(ctx);
  return 0;
}

int scn_cmd_entity_create(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  const cJSON *v = a->f->present & SCN_F(count) ? a->f->v[SCN_F_count] : NULL;
  uint64_t count = 1, max = ctx->srv->cfg.max_entity_create;
  if (v && cJSON_IsNumber(v) && v->valuedouble > (double)max)
    return scn_fail(err, SCN_W_LIMIT, "field \"count\" is at most %llu", (unsigned long long)max);
  if (v && scn_decode_uint(v, "count", 1, max, &count, err) < 0)
    return -1;
  /* ids have at most 16 digits */
  if (scn_ctx_output_room(ctx, out->len + 32 + (size_t)count * 17, err) < 0)
    return -1;
  scn_entity *ids = scn_ids_scratch(ctx->d, count);
  if (!ids)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  if (a->world && !scn_world_find(ctx->srv->scene, a->world))
    return scn_fail(err, SCN_W_NOT_FOUND, "world \"%s\" not found", a->world);
  int rc = scn_entity_create(ctx->srv->scene, count, ids);
  if (rc != SCN_OK)
    return scn_core_error(ctx, a, rc, err);
  scn_reply_key(out, "entities");
  scn_buf_add_id_list(out, ids, count);
  return 0;
}

int scn_cmd_info(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)a, (void)err;
  scn_server *srv = ctx->srv;
  scn_reply_key(out, "version");
  scn_buf_add_json_string(out, SCN_VERSION, strlen(SCN_VERSION));
  if (srv->cluster) {
    const char *node = scn_cluster_node(srv->cluster);
    scn_reply_key(out, "node");
    scn_buf_add_json_string(out, node, strlen(node));
  }
  scn_reply_key(out, "uptime_s");
  scn_buf_add_double(out, (double)(uv_now(srv->loop) - srv->start_ms) / 1000.0);
  scn_reply_key(out, "worlds");
  scn_buf_add_u64(out, scn_world_count(srv->scene));
  scn_reply_key(out, "entities");
  scn_buf_add_u64(out, scn_entity_count(srv->scene));
  scn_reply_key(out, "transforms");
  scn_buf_add_u64(out, scn_scene_transform_count(srv->scene));
  scn_reply_key(out, "connections");
  scn_buf_add_u64(out, srv->nconns);
  scn_reply_key(out, "commands");
  scn_buf_add_u64(out, srv->counters.commands);
  scn_reply_key(out, "subscriptions");
  scn_buf_add_u64(out, scn_stream_count(srv->stream));
  scn_reply_key(out, "tick_hz");
  scn_buf_add_double(out, srv->cfg.tick_hz);
  /* everything /metrics shows, by the same names; with --acl, no world the token may not see */
  scn_reply_key(out, "metrics");
  scn_metrics_json(srv, out, ctx->rule);
  return 0;
}

/* The save's answer: the reply this connection waited for, then the requests it held. */
static void save_done(void *owner, const char *tag, bool ok, const char *path, uint64_t bytes,
                      const char *why) {
  scn_conn *c = owner;
  scn_buf *out = &c->out.bytes;
  if (ok) {
    scn_reply_begin_raw(out, tag, tag ? strlen(tag) : 0);
    scn_reply_key(out, "path");
    scn_buf_add_json_string(out, path, strlen(path));
    scn_reply_key(out, "bytes");
    scn_buf_add_u64(out, bytes);
    scn_reply_end(out);
  } else {
    scn_wire_error err;
    scn_fail(&err, SCN_W_INTERNAL, "%s", why);
    scn_reply_error_raw(out, tag, tag ? strlen(tag) : 0, &err);
  }
  scn_conn_resume(c);
}

/* The snapshot is written by a child process; the reply (path, bytes) follows when it is on
 * disk, and this connection's later requests wait for it so replies stay in order. */
int scn_cmd_save(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  (void)a;
  scn_persist *p = ctx->srv->persist;
  if (ctx->srv->gstore) {
    /* Every group this daemon serves and its own entities, written now. */
    uint64_t bytes;
    if (scn_gstore_save_all(ctx->srv->gstore, &bytes) != 0)
      return scn_fail(err, SCN_W_INTERNAL, "a snapshot failed (see the log)");
    const char *dir = scn_gstore_dir(ctx->srv->gstore);
    scn_reply_key(out, "path");
    scn_buf_add_json_string(out, dir, strlen(dir));
    scn_reply_key(out, "bytes");
    scn_buf_add_u64(out, bytes);
    return 0;
  }
  if (!p)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "nothing to save to: start scened with --data DIR to enable snapshots");
  if (!ctx->conn)
    return 0;
  char *id = id_text(ctx);
  int rc = scn_persist_save(p, save_done, ctx->conn, id);
  free(id);
  if (rc != 0)
    return scn_fail(err, SCN_W_INTERNAL, "cannot start a snapshot");
  ctx->deferred = true;
  return 0;
}

int scn_cmd_replicate(scn_ctx *ctx, const scn_args *a, scn_buf *out, scn_wire_error *err) {
  scn_cluster *cl = ctx->srv->cluster;
  const scn_fields *f = a->f;
  const char *group, *node = NULL;
  uint64_t epoch, from, last;
  if (!cl)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "this daemon is not in a cluster (start it with --cluster)");
  if (scn_decode_string(f->v[SCN_F_group], "group", &group, err) < 0 ||
      scn_decode_uint(f->v[SCN_F_epoch], "epoch", 0, UINT64_C(1) << 53, &epoch, err) < 0 ||
      scn_decode_uint(f->v[SCN_F_from], "from", 0, UINT64_C(1) << 53, &from, err) < 0 ||
      ((f->present & SCN_F(node)) && scn_decode_string(f->v[SCN_F_node], "node", &node, err) < 0))
    return -1;
  if (!scn_world_name_valid(group, strlen(group)) || strchr(group, '.'))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"group\" must be a group's name");
  if (!ctx->conn)
    return 0;
  int code;
  char msg[256];
  if (scn_cluster_replicate(cl, ctx->conn, group, node, epoch, from, &last, &code, msg,
                            sizeof msg) < 0)
    return scn_fail(err, (scn_wire_code)code, "%s", msg);
  scn_reply_key(out, "last");
  scn_buf_add_u64(out, last);
  return 0;
}

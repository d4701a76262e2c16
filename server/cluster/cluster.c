/* The cluster: membership, the fence, ownership of groups, the cache of who owns what, moves
 * and takeovers (see cluster.h). Every etcd request is asynchronous (etcd.c); a group is loaded
 * and saved synchronously by the store when this daemon gets or gives it. */
#include "cluster/cluster.h"

#include "cluster/etcd.h"
#include "net/conn.h"
#include "net/http.h"
#include "ops/json_arena.h"
#include "ops/log.h"
#include "store/groups.h"
#include "store/snapshot.h"
#include "stream/stream.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES_PREFIX "/scened/nodes/"
#define GROUPS_PREFIX "/scened/groups/"
#define IDS_KEY "/scened/ids/next"
#define MIGRATE_KEY "/scened/migrate"
#define ID_RANGE 65536u      /* entity slots per range handed out */
#define ID_LOW_WATER 131072u /* another range is asked for below this many free slots */
#define TICK_MS 100          /* the module's housekeeping timer */
#define PUBLISH_MS 2000      /* how often the node's load is published */
#define SWEEP_MS 1000        /* how often unowned groups on disk are looked for */
#define RETRY_MS 300         /* a failed step of registration is tried again after this */
#define MOVE_LIMIT_S 10.0    /* a move the target has not confirmed by then fails */
#define GROUP_BUCKETS 4096u

enum { G_NONE, G_CLAIMING, G_OWNED, G_FROZEN, G_BROKEN };

typedef struct waiter {
  struct waiter *next;
  scn_cluster_wake wake;
  void *ud;
} waiter;

typedef struct move {
  char to[SCN_NAME_MAX + 1];
  int64_t handoff_rev; /* 0 until the hand-off txn succeeded */
  uint64_t deadline;   /* uv_hrtime */
  scn_move_done done;
  void *ud;
} move;

typedef struct group {
  struct group *next; /* hash chain */
  char name[SCN_NAME_MAX + 1];
  /* what etcd says (the key) */
  bool key;
  char node[SCN_NAME_MAX + 1];
  char addr[96];
  int64_t lease, mod_rev;
  bool from;                   /* the key is a hand-off not yet confirmed by its target */
  char prev[SCN_NAME_MAX + 1]; /* the owner before the key went (for the log) */
  /* this daemon's side */
  int state;
  int64_t epoch;
  bool looking; /* a range of its key is in flight */
  waiter *waiters;
  move *mv;
} group;

typedef struct node_info {
  char name[SCN_NAME_MAX + 1];
  char addr[96];
  int64_t lease;
  uint64_t worlds, transforms, connections;
  char *world_names; /* "name\0name\0...\0", as published */
  char http[96];     /* HOST:PORT of its HTTP port (staging view, /ws), "" when off */
} node_info;

typedef enum reg_step { R_LEASE, R_NODE, R_MIGRATE, R_IDS, R_SYNC, R_DONE } reg_step;

typedef struct cl_stats {
  uint64_t renewals, renewal_failures, moves, moves_in, takeovers, claims, lost;
  uint64_t moved, unavailable;
} cl_stats;

struct scn_cluster {
  scn_server *srv;
  scn_hooks hooks;
  scn_etcd *etcd;
  char node[SCN_NAME_MAX + 1];
  char addr[96];
  double ttl;
  uint64_t ttl_ns, margin_ns;
  /* membership */
  reg_step step;
  bool step_busy;
  uint64_t step_after; /* uv_hrtime before which the step is not retried */
  const char *step_error;
  int64_t lease;
  uint64_t confirmed; /* when the last renewal etcd confirmed was sent (uv_hrtime) */
  bool registered;
  bool keepalive_busy;
  uint64_t next_keepalive, next_publish, next_sweep;
  bool releasing, released;
  scn_etcd_req *release_req;
  /* the cache */
  group *buckets[GROUP_BUCKETS];
  node_info *nodes;
  size_t nnodes, nodes_cap;
  int64_t revision; /* the store revision the cache reflects */
  scn_etcd_req *watch;
  bool syncing;
  bool sync_again;
  /* entity ids */
  bool ids_busy;
  uint32_t ids_floor; /* ranges below this hold migrated ids */
  bool migrate_lock;  /* held until the id counter is past the migrated ids */
  /* acknowledgements not yet sent */
  scn_conn **acks;
  size_t nacks, acks_cap;
  uv_timer_t timer;
  bool closing;
  cl_stats stats;
  scn_buf body; /* a request being built */
};

typedef struct call_ctx {
  scn_cluster *cl;
  char group[SCN_NAME_MAX + 1];
  uint64_t sent;
  int64_t value;
} call_ctx;

static void step_next(scn_cluster *cl);
static void sync_start(scn_cluster *cl);
static void claim(scn_cluster *cl, group *g);
static void ignore_reply(void *ud, const cJSON *reply, const char *why);
static void adopt_pending(scn_cluster *cl);
static void handed_off(scn_cluster *cl, group *g, int64_t rev);

/* ---- small helpers ----------------------------------------------------------------------- */

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static group *group_find(scn_cluster *cl, const char *name) {
  for (group *g = cl->buckets[hash(name) % GROUP_BUCKETS]; g; g = g->next)
    if (strcmp(g->name, name) == 0)
      return g;
  return NULL;
}

static group *group_get(scn_cluster *cl, const char *name) {
  group *g = group_find(cl, name);
  if (g)
    return g;
  g = calloc(1, sizeof *g);
  if (!g)
    return NULL;
  snprintf(g->name, sizeof g->name, "%s", name);
  size_t b = hash(name) % GROUP_BUCKETS;
  g->next = cl->buckets[b];
  cl->buckets[b] = g;
  return g;
}

static node_info *node_find(scn_cluster *cl, const char *name) {
  for (size_t i = 0; i < cl->nnodes; i++)
    if (strcmp(cl->nodes[i].name, name) == 0)
      return &cl->nodes[i];
  return NULL;
}

static call_ctx *ctx_new(scn_cluster *cl, const char *group) {
  call_ctx *c = calloc(1, sizeof *c);
  if (c) {
    c->cl = cl;
    c->sent = uv_hrtime();
    if (group)
      snprintf(c->group, sizeof c->group, "%s", group);
  }
  return c;
}

/* Sends the body built in cl->body; false (ctx freed) when the request could not start. ctx
 * is freed by the callback, or by the client if the request never completes. */
static bool request(scn_cluster *cl, const char *path, double timeout_s, scn_etcd_done done,
                    call_ctx *ctx) {
  scn_buf_addc(&cl->body, '\0');
  scn_etcd_req *r = !cl->body.failed && ctx
                        ? scn_etcd_call(cl->etcd, path, cl->body.data, timeout_s, done, ctx)
                        : NULL;
  cl->body.len = 0;
  cl->body.failed = false;
  if (r)
    scn_etcd_set_release(r, free);
  else
    free(ctx);
  return r != NULL;
}

static void body_begin(scn_cluster *cl) {
  cl->body.len = 0;
  cl->body.failed = false;
}

static void add_key(scn_buf *b, const char *prefix, const char *name) {
  char key[256];
  int n = snprintf(key, sizeof key, "%s%s", prefix, name);
  scn_etcd_add_b64(b, key, (size_t)n);
}

static void add_i64(scn_buf *b, int64_t v) {
  char s[32];
  snprintf(s, sizeof s, "\"%lld\"", (long long)v);
  scn_buf_adds(b, s);
}

/* A group key's value: the owner, where clients reach it, and for a hand-off the mover. */
static void add_group_value(scn_cluster *cl, scn_buf *b, const char *node, const char *addr,
                            bool from);

/* The start of a txn that puts the key prefix+name if it is still at revision mod (exists) or
 * was never created (!exists): everything up to the put's value, which the caller adds. */
static void txn_put_begin(scn_buf *b, const char *prefix, const char *name, bool exists,
                          int64_t mod) {
  scn_buf_adds(b, "{\"compare\":[{\"key\":");
  add_key(b, prefix, name);
  if (exists) {
    scn_buf_adds(b, ",\"target\":\"MOD\",\"mod_revision\":");
    add_i64(b, mod);
  } else {
    scn_buf_adds(b, ",\"target\":\"CREATE\",\"create_revision\":\"0\"");
  }
  scn_buf_adds(b, "}],\"success\":[{\"request_put\":{\"key\":");
  add_key(b, prefix, name);
  scn_buf_adds(b, ",\"value\":");
}

/* The txn that puts group g's key naming node (at addr, bound to lease; from: a hand-off by
 * this daemon), if the key is still at revision mod (0: if it does not exist; its failure
 * branch then reads it, to learn the winner). In cl->body. */
static void group_txn(scn_cluster *cl, const group *g, int64_t mod, const char *node,
                      const char *addr, int64_t lease, bool from) {
  body_begin(cl);
  scn_buf *b = &cl->body;
  txn_put_begin(b, GROUPS_PREFIX, g->name, mod != 0, mod);
  add_group_value(cl, b, node, addr, from);
  scn_buf_adds(b, ",\"lease\":");
  add_i64(b, lease);
  scn_buf_adds(b, "}}]");
  if (!mod) {
    scn_buf_adds(b, ",\"failure\":[{\"request_range\":{\"key\":");
    add_key(b, GROUPS_PREFIX, g->name);
    scn_buf_adds(b, "}}]");
  }
  scn_buf_addc(b, '}');
}

static void add_group_value(scn_cluster *cl, scn_buf *b, const char *node, const char *addr,
                            bool from) {
  char val[400];
  int n = snprintf(val, sizeof val, "{\"node\":\"%s\",\"addr\":\"%s\"%s%s%s}", node, addr,
                   from ? ",\"from\":\"" : "", from ? cl->node : "", from ? "\"" : "");
  scn_etcd_add_b64(b, val, (size_t)n);
}

static double request_timeout(const scn_cluster *cl) {
  double t = cl->ttl / 3;
  return t < 0.5 ? 0.5 : t > 2 ? 2 : t;
}

/* ---- the fence --------------------------------------------------------------------------- */

/* Whether the lease can be trusted now: the last renewal etcd confirmed was sent less than the
 * TTL less the margin ago. Read on the monotonic clock each time: after a pause (SIGSTOP) the
 * loop may run reads before any timer. */
static bool lease_fresh(const scn_cluster *cl) {
  return cl->lease && cl->confirmed && uv_hrtime() < cl->confirmed + cl->ttl_ns - cl->margin_ns;
}

static bool serving(const scn_cluster *cl) {
  return cl->registered && !cl->released && lease_fresh(cl);
}

bool scn_cluster_serving(scn_cluster *cl, const char **why) {
  if (serving(cl))
    return true;
  *why = !cl->registered ? "this daemon is not registered with etcd yet"
         : cl->released  ? "this daemon is shutting down"
                         : "this daemon could not renew its lease in etcd (fenced)";
  return false;
}

/* The store asks before every write of a group's files (group NULL: the node's own). */
static bool may_write(void *ud, const char *name) {
  scn_cluster *cl = ud;
  if (!name)
    return true; /* the node's directory is this daemon's alone (it holds its lock) */
  group *g = group_find(cl, name);
  return g && (g->state == G_OWNED || g->state == G_FROZEN || g->state == G_CLAIMING) &&
         !cl->released && lease_fresh(cl);
}

void scn_cluster_note_ack(scn_cluster *cl, scn_conn *c) {
  if (c->acked_write)
    return;
  scn_conn **a = scn_array_grow(cl->acks, &cl->acks_cap, sizeof *a, cl->nacks + 1);
  if (!a)
    return;
  cl->acks = a;
  cl->acks[cl->nacks++] = c;
  c->acked_write = true;
}

/* Before replies leave (after the journals were written): a connection holding an ok for a
 * group write is closed when the fence is down; the others' oks leave, and once their output
 * has gone they are forgotten. */
static void before_flush(void *ud) {
  scn_cluster *cl = ud;
  if (cl->nacks == 0)
    return;
  bool fresh = lease_fresh(cl) && !cl->released;
  size_t n = 0;
  for (size_t i = 0; i < cl->nacks; i++) {
    scn_conn *c = cl->acks[i];
    if (scn_outq_size(&c->out) == 0) {
      c->acked_write = false; /* its oks have left */
    } else if (!fresh) {
      c->acked_write = false;
      scn_log(SCN_LOG_WARN, "fenced: closing a connection instead of acknowledging its writes",
              "conn=%llu peer=%s", (unsigned long long)c->id, c->peer);
      scn_outq_clear(&c->out);
      scn_conn_close(c);
    } else {
      cl->acks[n++] = c;
    }
  }
  cl->nacks = n;
}

static void on_conn_closed(void *ud, scn_conn *c) {
  scn_cluster *cl = ud;
  if (!c->acked_write)
    return;
  for (size_t i = 0; i < cl->nacks; i++)
    if (cl->acks[i] == c) {
      cl->acks[i] = cl->acks[--cl->nacks];
      break;
    }
  c->acked_write = false;
}

/* ---- groups held here -------------------------------------------------------------------- */

static void wake_all(group *g) {
  while (g->waiters) {
    waiter *w = g->waiters;
    g->waiters = w->next;
    w->wake(w->ud);
    free(w);
  }
}

static void log_owner(const group *g, const char *old, const char *new_, int64_t epoch) {
  scn_log(SCN_LOG_INFO, "group owner changed", "group=%s old=%s new=%s epoch=%lld", g->name,
          old && old[0] ? old : "none", new_ && new_[0] ? new_ : "none", (long long)epoch);
}

/* Drops the group's worlds from the scene (subscribers told where it went) and stops
 * persisting it. Its entities that no other world here uses go with it: another daemon keeps
 * them now (its snapshot lists them), and they must not come back here as this node's own. */
static void unload(scn_cluster *cl, group *g, const char *to, const char *to_addr) {
  scn_server *srv = cl->srv;
  uint32_t home = scn_gstore_home(srv->gstore, g->name);
  scn_gstore_release(srv->gstore, g->name);
  size_t nused;
  scn_entity *used = scn_group_entities(srv->scene, g->name, home, &nused);
  for (size_t i = scn_world_count(srv->scene); i-- > 0;) {
    scn_world *w = scn_world_at(srv->scene, i);
    char name[SCN_NAME_MAX + 1];
    scn_group_of(scn_world_name(w), name);
    if (strcmp(name, g->name) != 0)
      continue;
    scn_stream_world_moved(srv->stream, w, to ? to : "", to_addr ? to_addr : "");
    snprintf(name, sizeof name, "%s", scn_world_name(w));
    scn_server_drop_world(srv, name);
  }
  for (size_t i = 0; i < nused; i++)
    scn_entity_forget(srv->scene, used[i]); /* refused while another world uses it */
  free(used);
  /* What the group made and another group here still uses stays, as this node's own. */
  for (uint32_t s = 1, n = scn_entity_slot_count(srv->scene); home != SCN_HOME_NONE && s <= n;
       s++) {
    bool alive;
    scn_entity id = scn_entity_slot_id(srv->scene, s, &alive);
    if (alive && scn_entity_home(srv->scene, id) == home)
      scn_entity_set_home(srv->scene, id, 0);
  }
  g->state = G_NONE;
  g->epoch = 0;
}

static void lose(scn_cluster *cl, group *g, const char *why) {
  if (g->state == G_NONE)
    return;
  scn_log(SCN_LOG_WARN, "group lost", "group=%s reason=\"%s\"", g->name, why);
  cl->stats.lost++;
  unload(cl, g, g->key ? g->node : "", g->key ? g->addr : "");
  log_owner(g, cl->node, g->key ? g->node : "", g->key ? g->mod_rev : 0);
  if (g->mv) {
    if (g->mv->done)
      g->mv->done(g->mv->ud, false, SCN_W_UNAVAILABLE, "the group was lost during the move");
    free(g->mv);
    g->mv = NULL;
  }
  wake_all(g);
}

/* Loads a group this daemon got at epoch; it serves it once the store has written the new
 * epoch's first snapshot. */
static void keepalive(scn_cluster *cl);

/* How long the fence stays up without another renewal (0 when it is down). */
static uint64_t fence_left(const scn_cluster *cl) {
  uint64_t now = uv_hrtime(), until = cl->confirmed + cl->ttl_ns - cl->margin_ns;
  return cl->lease && cl->confirmed && now < until ? until - now : 0;
}

static bool take(scn_cluster *cl, group *g, int64_t epoch, const char *old_owner, bool moved_in) {
  char err[4600];
  /* A load blocks the loop (no renewal meanwhile), and its first write needs the fence up:
   * with less than a second of it left, a renewal goes first, and the load is retried when it
   * is confirmed (the key names this daemon: adopt_pending). */
  uint64_t budget = (cl->ttl_ns - cl->margin_ns) / 2;
  if (fence_left(cl) < (budget < 1000000000u ? budget : 1000000000u)) {
    keepalive(cl);
    return false;
  }
  bool existed = scn_gstore_on_disk(cl->srv->gstore, g->name);
  g->state = G_CLAIMING; /* the store's writes are allowed while loading */
  if (scn_gstore_acquire(cl->srv->gstore, g->name, (uint64_t)epoch, moved_in, err, sizeof err) !=
      0) {
    bool outran = !lease_fresh(cl);
    scn_log(outran ? SCN_LOG_WARN : SCN_LOG_ERROR,
            outran ? "a load outran the lease; it is tried again after a renewal"
                   : "cannot load a group this daemon owns",
            "group=%s error=\"%s\"", g->name, err);
    unload(cl, g, NULL, NULL);
    g->state = outran ? G_NONE : G_BROKEN;
    return false;
  }
  g->state = G_OWNED;
  g->epoch = epoch;
  if (existed && old_owner)
    cl->stats.takeovers++;
  log_owner(g, old_owner, cl->node, epoch);
  cl->next_publish = 0; /* the load changed */
  return true;
}

/* ---- the cache --------------------------------------------------------------------------- */

/* The key names this daemon with its lease, and the group is not loaded: handed over by a
 * move (or claimed by a txn whose answer was lost). This daemon loads it, then says it serves
 * it (a put without "from"), which is what the mover waits for. */
static void adopt_key(scn_cluster *cl, group *g, const char *old) {
  if (g->state != G_NONE || g->lease != cl->lease || !serving(cl))
    return;
  if (!take(cl, g, g->mod_rev, old, g->from) || !g->from)
    return;
  cl->stats.moves_in++;
  group_txn(cl, g, g->mod_rev, cl->node, cl->addr, cl->lease, false);
  request(cl, "/v3/kv/txn", request_timeout(cl), ignore_reply, ctx_new(cl, NULL));
}

/* A group key's value: {"node","addr",["from"]}. */
static void group_put(scn_cluster *cl, group *g, const cJSON *kv) {
  char value[2048];
  size_t len;
  int64_t mod_rev = scn_etcd_int(kv, "mod_revision", 0);
  if (mod_rev && mod_rev < g->mod_rev)
    return; /* older than what the cache holds */
  cJSON *v = NULL;
  if (scn_etcd_b64(cJSON_GetObjectItemCaseSensitive(kv, "value"), value, sizeof value, &len))
    v = scn_json_heap_parse(value, len);
  const cJSON *node = cJSON_GetObjectItemCaseSensitive(v, "node");
  const cJSON *addr = cJSON_GetObjectItemCaseSensitive(v, "addr");
  if (!cJSON_IsString(node) ||
      !scn_world_name_valid(node->valuestring, strlen(node->valuestring))) {
    scn_log(SCN_LOG_WARN, "etcd: a group key with a malformed value", "group=%s", g->name);
    scn_json_heap_delete(v);
    return;
  }
  char old[SCN_NAME_MAX + 1];
  snprintf(old, sizeof old, "%s", g->key ? g->node : "");
  g->key = true;
  snprintf(g->node, sizeof g->node, "%s", node->valuestring);
  snprintf(g->addr, sizeof g->addr, "%s", cJSON_IsString(addr) ? addr->valuestring : "");
  g->lease = scn_etcd_int(kv, "lease", 0);
  g->mod_rev = mod_rev;
  g->from = cJSON_GetObjectItemCaseSensitive(v, "from") != NULL;
  scn_json_heap_delete(v);
  bool mine = strcmp(g->node, cl->node) == 0;
  if (mine) {
    adopt_key(cl, g, old[0] ? old : NULL);
  } else if (g->mv && strcmp(g->node, g->mv->to) == 0) {
    handed_off(cl, g, mod_rev); /* seen before the txn's own answer */
  } else if (g->state == G_OWNED || g->state == G_FROZEN) {
    lose(cl, g, "its key names another node");
  }
  if (g->mv && g->mv->handoff_rev && strcmp(g->node, g->mv->to) == 0 && !g->from &&
      g->mod_rev > g->mv->handoff_rev) {
    /* The target serves it: the move is done. */
    move *mv = g->mv;
    g->mv = NULL;
    cl->stats.moves++;
    if (mv->done)
      mv->done(mv->ud, true, 0, NULL);
    free(mv);
  }
  if (g->state != G_CLAIMING) /* a claim's waiters wait for its answer */
    wake_all(g);
}

/* rev: the revision of the delete, or of a read that did not find the key (0: unknown). */
static void group_deleted(scn_cluster *cl, group *g, int64_t rev) {
  if (rev && rev < g->mod_rev)
    return; /* older than what the cache holds: a claim's answer came before the watch's event */
  if (rev)
    g->mod_rev = rev; /* and a put older than the delete, read before it, is no longer taken */
  bool was = g->key;
  if (was)
    snprintf(g->prev, sizeof g->prev, "%s", g->node);
  g->key = false;
  g->node[0] = g->addr[0] = '\0';
  g->from = false;
  if (cl->released) {
    g->state = G_NONE; /* released at SIGTERM: nothing more happens here before the exit */
    return;
  }
  if (g->state == G_OWNED || g->state == G_FROZEN)
    lose(cl, g, "its key was deleted (the lease expired)");
  wake_all(g);
  /* An owner went away: the live daemons race to claim what it had. */
  if (was && serving(cl) && scn_gstore_on_disk(cl->srv->gstore, g->name))
    claim(cl, g);
}

static void node_put(scn_cluster *cl, const char *name, const cJSON *kv) {
  char value[65536];
  size_t len;
  cJSON *v = NULL;
  if (scn_etcd_b64(cJSON_GetObjectItemCaseSensitive(kv, "value"), value, sizeof value, &len))
    v = scn_json_heap_parse(value, len);
  const cJSON *addr = cJSON_GetObjectItemCaseSensitive(v, "addr");
  if (!cJSON_IsObject(v) || !cJSON_IsString(addr)) {
    scn_log(SCN_LOG_WARN, "etcd: a node key with a malformed value", "node=%s", name);
    scn_json_heap_delete(v);
    return;
  }
  node_info *n = node_find(cl, name);
  if (!n) {
    node_info *nodes = scn_array_grow(cl->nodes, &cl->nodes_cap, sizeof *nodes, cl->nnodes + 1);
    if (!nodes) {
      scn_json_heap_delete(v);
      return;
    }
    cl->nodes = nodes;
    n = &cl->nodes[cl->nnodes++];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
  }
  snprintf(n->addr, sizeof n->addr, "%s", addr->valuestring);
  const cJSON *http = cJSON_GetObjectItemCaseSensitive(v, "http");
  snprintf(n->http, sizeof n->http, "%s", cJSON_IsString(http) ? http->valuestring : "");
  n->lease = scn_etcd_int(kv, "lease", 0);
  const cJSON *f;
  n->worlds = cJSON_IsNumber(f = cJSON_GetObjectItemCaseSensitive(v, "worlds"))
                  ? (uint64_t)f->valuedouble
                  : 0;
  n->transforms = cJSON_IsNumber(f = cJSON_GetObjectItemCaseSensitive(v, "transforms"))
                      ? (uint64_t)f->valuedouble
                      : 0;
  n->connections = cJSON_IsNumber(f = cJSON_GetObjectItemCaseSensitive(v, "connections"))
                       ? (uint64_t)f->valuedouble
                       : 0;
  free(n->world_names);
  n->world_names = NULL;
  /* Kept as "name\0name\0...\0" for world.list. */
  const cJSON *names = cJSON_GetObjectItemCaseSensitive(v, "world_names"), *w;
  scn_buf list = {0};
  cJSON_ArrayForEach(w, names) {
    if (cJSON_IsString(w) && scn_world_name_valid(w->valuestring, strlen(w->valuestring)))
      scn_buf_add(&list, w->valuestring, strlen(w->valuestring) + 1);
  }
  scn_buf_addc(&list, '\0');
  n->world_names = list.failed ? NULL : list.data;
  if (list.failed)
    scn_buf_free(&list);
  scn_json_heap_delete(v);
}

static void node_deleted(scn_cluster *cl, const char *name) {
  node_info *n = node_find(cl, name);
  if (!n)
    return;
  free(n->world_names);
  *n = cl->nodes[--cl->nnodes];
}

static void lost_lease(scn_cluster *cl, const char *why);

/* One key of the cache changed (put) or went (deleted). */
static void apply_kv(scn_cluster *cl, const cJSON *kv, bool deleted) {
  char key[300];
  size_t len;
  if (!scn_etcd_b64(cJSON_GetObjectItemCaseSensitive(kv, "key"), key, sizeof key, &len))
    return;
  if (strncmp(key, GROUPS_PREFIX, strlen(GROUPS_PREFIX)) == 0) {
    const char *name = key + strlen(GROUPS_PREFIX);
    if (!scn_world_name_valid(name, strlen(name)) || strchr(name, '.'))
      return;
    group *g = deleted ? group_find(cl, name) : group_get(cl, name);
    if (!g)
      return;
    if (deleted)
      group_deleted(cl, g, scn_etcd_int(kv, "mod_revision", 0));
    else
      group_put(cl, g, kv);
  } else if (strncmp(key, NODES_PREFIX, strlen(NODES_PREFIX)) == 0) {
    const char *name = key + strlen(NODES_PREFIX);
    if (!scn_world_name_valid(name, strlen(name)))
      return;
    if (!deleted)
      node_put(cl, name, kv);
    else if (strcmp(name, cl->node) == 0 && cl->registered && !cl->released)
      lost_lease(cl, "this node's key was deleted");
    else
      node_deleted(cl, name);
  }
}

/* ---- the watch --------------------------------------------------------------------------- */

static void on_watch_msg(void *ud, const cJSON *msg) {
  scn_cluster *cl = ud;
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(msg, "result");
  if (!cJSON_IsObject(result)) {
    scn_log(SCN_LOG_WARN, "etcd: the watch sent an error", "node=%s", cl->node);
    cl->sync_again = true;
    return;
  }
  const cJSON *canceled = cJSON_GetObjectItemCaseSensitive(result, "canceled");
  if (cJSON_IsTrue(canceled) || scn_etcd_int(result, "compact_revision", 0) > 0) {
    cl->sync_again = true;
    return;
  }
  const cJSON *events = cJSON_GetObjectItemCaseSensitive(result, "events");
  const cJSON *ev;
  cJSON_ArrayForEach(ev, events) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(ev, "kv");
    if (!cJSON_IsObject(kv))
      continue;
    int64_t rev = scn_etcd_int(kv, "mod_revision", 0);
    if (rev > cl->revision)
      cl->revision = rev;
    apply_kv(cl, kv, cJSON_IsString(type) && strcmp(type->valuestring, "DELETE") == 0);
  }
}

static void on_watch_end(void *ud, const cJSON *reply, const char *why) {
  (void)reply;
  scn_cluster *cl = ud;
  cl->watch = NULL;
  if (!cl->closing)
    scn_log(SCN_LOG_WARN, "etcd: the watch ended; resynchronising", "reason=\"%s\"", why);
  cl->sync_again = true;
}

static void watch_start(scn_cluster *cl) {
  scn_etcd_cancel(cl->watch);
  char end[64];
  scn_etcd_prefix_end("/scened/", end, sizeof end);
  body_begin(cl);
  scn_buf *b = &cl->body;
  scn_buf_adds(b, "{\"create_request\":{\"key\":");
  scn_etcd_add_b64(b, "/scened/", 8);
  scn_buf_adds(b, ",\"range_end\":");
  scn_etcd_add_b64(b, end, strlen(end));
  scn_buf_adds(b, ",\"start_revision\":");
  add_i64(b, cl->revision + 1);
  scn_buf_adds(b, "}}");
  scn_buf_addc(b, '\0');
  cl->watch = b->failed ? NULL : scn_etcd_watch(cl->etcd, b->data, on_watch_msg, on_watch_end, cl);
  b->len = 0;
}

/* The whole of /scened/ read again: the cache is rebuilt and the watch restarted after it. */
static void on_sync(void *ud, const cJSON *reply, const char *why) {
  call_ctx *c = ud;
  scn_cluster *cl = c->cl;
  free(c);
  cl->syncing = false;
  const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(reply, "kvs");
  if (!reply || (kvs && !cJSON_IsArray(kvs))) {
    scn_log(SCN_LOG_WARN, "etcd: cannot read the cluster's keys", "reason=\"%s\"",
            why ? why : "malformed reply");
    cl->sync_again = true;
    return;
  }
  cl->revision = scn_etcd_int(cJSON_GetObjectItemCaseSensitive(reply, "header"), "revision", 0);
  /* Groups and nodes whose keys are gone count as deleted. */
  for (size_t b = 0; b < GROUP_BUCKETS; b++)
    for (group *g = cl->buckets[b]; g; g = g->next)
      g->looking = g->key; /* reused as "not seen yet" */
  bool me_seen = false;
  const cJSON *kv;
  cJSON_ArrayForEach(kv, kvs) {
    char key[300];
    if (!scn_etcd_b64(cJSON_GetObjectItemCaseSensitive(kv, "key"), key, sizeof key, NULL))
      continue;
    if (strncmp(key, GROUPS_PREFIX, strlen(GROUPS_PREFIX)) == 0) {
      group *g = group_find(cl, key + strlen(GROUPS_PREFIX));
      if (g)
        g->looking = false;
    }
    if (strncmp(key, NODES_PREFIX, strlen(NODES_PREFIX)) == 0 &&
        strcmp(key + strlen(NODES_PREFIX), cl->node) == 0)
      me_seen = true;
    apply_kv(cl, kv, false);
  }
  for (size_t b = 0; b < GROUP_BUCKETS; b++)
    for (group *g = cl->buckets[b]; g; g = g->next)
      if (g->looking) {
        g->looking = false;
        group_deleted(cl, g, cl->revision); /* gone as of the read's revision */
      }
  for (size_t i = 0; i < cl->nnodes;) {
    bool seen = false;
    char key[300];
    snprintf(key, sizeof key, "%s%s", NODES_PREFIX, cl->nodes[i].name);
    cJSON_ArrayForEach(kv, kvs) {
      char k[300];
      if (scn_etcd_b64(cJSON_GetObjectItemCaseSensitive(kv, "key"), k, sizeof k, NULL) &&
          strcmp(k, key) == 0)
        seen = true;
    }
    if (seen)
      i++;
    else
      node_deleted(cl, cl->nodes[i].name);
  }
  if (cl->registered && !me_seen && !cl->released) {
    lost_lease(cl, "this node's key is gone");
    return;
  }
  watch_start(cl);
  if (cl->step == R_SYNC) {
    cl->step = R_DONE;
    cl->registered = true;
    scn_readiness_clear(&cl->srv->readiness, SCN_UNREADY_UNREGISTERED);
    cl->next_sweep = 0;
    cl->next_publish = 0;
    scn_log(SCN_LOG_INFO, "registered in the cluster",
            "node=%s addr=%s lease=%lld ttl=%g fence_margin_s=%.2f etcd=%s nodes=%zu", cl->node,
            cl->addr, (long long)cl->lease, cl->ttl, (double)cl->margin_ns * 1e-9,
            scn_etcd_endpoint(cl->etcd), cl->nnodes);
  }
}

static void sync_start(scn_cluster *cl) {
  if (cl->syncing)
    return;
  char end[64];
  scn_etcd_prefix_end("/scened/", end, sizeof end);
  body_begin(cl);
  scn_buf_adds(&cl->body, "{\"key\":");
  scn_etcd_add_b64(&cl->body, "/scened/", 8);
  scn_buf_adds(&cl->body, ",\"range_end\":");
  scn_etcd_add_b64(&cl->body, end, strlen(end));
  scn_buf_adds(&cl->body, "}");
  cl->syncing = request(cl, "/v3/kv/range", request_timeout(cl) * 2, on_sync, ctx_new(cl, NULL));
  cl->sync_again = !cl->syncing;
}

/* ---- claims ------------------------------------------------------------------------------ */

/* The group an answer is about (NULL when it is gone meanwhile); the context is freed. */
static group *answer_group(void *ud, scn_cluster **cl) {
  call_ctx *c = ud;
  *cl = c->cl;
  group *g = group_find(c->cl, c->group);
  free(c);
  return g;
}

static void ignore_reply(void *ud, const cJSON *reply, const char *why) {
  (void)reply;
  if (why)
    scn_log(SCN_LOG_DEBUG, "etcd: request failed", "reason=\"%s\"", why);
  free(ud);
}

static void on_claimed(void *ud, const cJSON *reply, const char *why) {
  scn_cluster *cl;
  group *g = answer_group(ud, &cl);
  if (!g)
    return;
  if (g->state == G_CLAIMING)
    g->state = G_NONE;
  if (!reply) {
    scn_log(SCN_LOG_WARN, "etcd: a claim failed", "group=%s reason=\"%s\"", g->name, why);
    wake_all(g);
    return;
  }
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "succeeded"))) {
    int64_t epoch = scn_etcd_int(cJSON_GetObjectItemCaseSensitive(reply, "header"), "revision", 0);
    char old[SCN_NAME_MAX + 1];
    snprintf(old, sizeof old, "%s", g->key ? g->node : g->prev);
    g->key = true;
    snprintf(g->node, sizeof g->node, "%s", cl->node);
    snprintf(g->addr, sizeof g->addr, "%s", cl->addr);
    g->lease = cl->lease;
    g->mod_rev = epoch;
    g->from = false;
    cl->stats.claims++;
    if (epoch <= 0 || !serving(cl))
      scn_log(SCN_LOG_WARN, "a claim succeeded but cannot be served now", "group=%s", g->name);
    else
      take(cl, g, epoch, scn_gstore_on_disk(cl->srv->gstore, g->name) ? (old[0] ? old : "") : NULL,
           false);
  } else {
    /* Lost the race: the failure branch read the key, which names the winner. */
    const cJSON *resp = cJSON_GetObjectItemCaseSensitive(reply, "responses");
    const cJSON *r0 = cJSON_IsArray(resp) ? resp->child : NULL;
    const cJSON *range = cJSON_GetObjectItemCaseSensitive(r0, "response_range");
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(range, "kvs");
    if (cJSON_IsArray(kvs) && kvs->child)
      group_put(cl, g, kvs->child);
  }
  wake_all(g);
}

/* Races for the group: a txn that puts its key, bound to this daemon's lease, only if it does
 * not exist; the winner's revision is its epoch. */
static void claim(scn_cluster *cl, group *g) {
  if (g->state != G_NONE || g->key || !serving(cl))
    return;
  group_txn(cl, g, 0, cl->node, cl->addr, cl->lease, false);
  if (request(cl, "/v3/kv/txn", request_timeout(cl), on_claimed, ctx_new(cl, g->name)))
    g->state = G_CLAIMING;
}

typedef struct sweep_ctx {
  scn_cluster *cl;
} sweep_ctx;

/* Keys that name this daemon but whose group is not loaded (a load that had to wait). */
static void adopt_pending(scn_cluster *cl) {
  for (size_t b = 0; b < GROUP_BUCKETS; b++)
    for (group *g = cl->buckets[b]; g; g = g->next)
      if (g->key && g->state == G_NONE && strcmp(g->node, cl->node) == 0)
        adopt_key(cl, g, g->prev[0] ? g->prev : NULL);
}

static void sweep_one(void *ud, const char *name) {
  scn_cluster *cl = ((sweep_ctx *)ud)->cl;
  group *g = group_get(cl, name);
  if (g && !g->key && g->state == G_NONE)
    claim(cl, g);
}

/* Groups in the data directory without an owner are claimed (at start, after a takeover). */
static void sweep(scn_cluster *cl) {
  sweep_ctx s = {cl};
  scn_gstore_each_on_disk(cl->srv->gstore, sweep_one, &s);
  adopt_pending(cl);
}

/* ---- asking etcd about one group ----------------------------------------------------------- */

static void on_looked_up(void *ud, const cJSON *reply, const char *why) {
  scn_cluster *cl;
  group *g = answer_group(ud, &cl);
  if (!g)
    return;
  g->looking = false;
  const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(reply, "kvs");
  if (!reply)
    scn_log(SCN_LOG_WARN, "etcd: a lookup failed", "group=%s reason=\"%s\"", g->name, why);
  else if (cJSON_IsArray(kvs) && kvs->child)
    group_put(cl, g, kvs->child);
  wake_all(g);
}

static bool look_up(scn_cluster *cl, group *g) {
  if (g->looking)
    return true;
  body_begin(cl);
  scn_buf_adds(&cl->body, "{\"key\":");
  add_key(&cl->body, GROUPS_PREFIX, g->name);
  scn_buf_adds(&cl->body, "}");
  g->looking = request(cl, "/v3/kv/range", request_timeout(cl), on_looked_up, ctx_new(cl, g->name));
  return g->looking;
}

/* ---- routing ----------------------------------------------------------------------------- */

/* "auto": the live node with the fewest transforms, then the fewest worlds, then the smallest
 * name (this daemon's own figures are current, the others' as last published). */
static const node_info *place_auto(scn_cluster *cl) {
  node_info *me = node_find(cl, cl->node);
  if (me) {
    me->worlds = scn_world_count(cl->srv->scene);
    me->transforms = scn_scene_transform_count(cl->srv->scene);
  }
  const node_info *best = NULL;
  for (size_t i = 0; i < cl->nnodes; i++) {
    const node_info *n = &cl->nodes[i];
    if (!best || n->transforms < best->transforms ||
        (n->transforms == best->transforms &&
         (n->worlds < best->worlds ||
          (n->worlds == best->worlds && strcmp(n->name, best->name) < 0))))
      best = n;
  }
  return best;
}

static scn_route_kind unavailable(scn_route *out, const char *why) {
  snprintf(out->why, sizeof out->why, "%s", why);
  return SCN_ROUTE_UNAVAILABLE;
}

static scn_route_kind moved(scn_route *out, const char *node, const char *addr) {
  snprintf(out->node, sizeof out->node, "%s", node);
  snprintf(out->addr, sizeof out->addr, "%s", addr);
  return SCN_ROUTE_MOVED;
}

static scn_route_kind wait_on(group *g, scn_cluster_wake wake, void *ud, scn_route *out) {
  waiter *w = calloc(1, sizeof *w);
  if (!w)
    return unavailable(out, "out of memory");
  w->wake = wake;
  w->ud = ud;
  w->next = g->waiters;
  g->waiters = w;
  return SCN_ROUTE_WAIT;
}

scn_route_kind scn_cluster_route(scn_cluster *cl, const char *world, bool creating,
                                 const char *place, bool retried, scn_route *out,
                                 scn_cluster_wake wake, void *ud) {
  const char *why;
  if (!scn_cluster_serving(cl, &why))
    return unavailable(out, why);
  char name[SCN_NAME_MAX + 1];
  scn_group_of(world, name);
  group *g = group_find(cl, name);
  if (g) {
    switch (g->state) {
    case G_OWNED:
      return SCN_ROUTE_LOCAL;
    case G_CLAIMING:
      return retried || !wake ? unavailable(out, "the group is being claimed; retry")
                              : wait_on(g, wake, ud, out);
    case G_FROZEN:
      return unavailable(out, "the group is moving to another node; retry");
    case G_BROKEN:
      return unavailable(out, "the group's data could not be loaded (see the owner's log)");
    }
    if (g->key && strcmp(g->node, cl->node) != 0)
      return moved(out, g->node, g->addr);
    if (g->key)
      return unavailable(out, "the group is being loaded; retry");
  }
  if (scn_gstore_on_disk(cl->srv->gstore, name)) {
    /* It exists: its owner may be new (etcd is asked first), or gone (it is claimed). */
    g = group_get(cl, name);
    if (g && !retried && wake && look_up(cl, g))
      return wait_on(g, wake, ud, out);
    if (g)
      claim(cl, g);
    return unavailable(out, "the group has no live owner yet; retry");
  }
  if (!creating) {
    /* Not heard of: etcd is asked once before the answer is NOT_FOUND. */
    if (retried || !wake || !(g = group_get(cl, name)) || !look_up(cl, g))
      return SCN_ROUTE_LOCAL;
    return wait_on(g, wake, ud, out);
  }
  /* A new group: here, on the node named, or on the least loaded. */
  if (place && strcmp(place, cl->node) != 0) {
    const node_info *n = strcmp(place, "auto") == 0 ? place_auto(cl) : node_find(cl, place);
    if (!n)
      return SCN_ROUTE_NO_NODE;
    if (strcmp(n->name, cl->node) != 0)
      return moved(out, n->name, n->addr);
  }
  if (retried || !wake)
    return unavailable(out, "the group could not be claimed; retry");
  if (!(g = group_get(cl, name)))
    return unavailable(out, "out of memory");
  claim(cl, g);
  if (g->state != G_CLAIMING)
    return unavailable(out, "the group could not be claimed; retry");
  return wait_on(g, wake, ud, out);
}

void scn_cluster_count_route(scn_cluster *cl, scn_route_kind kind) {
  if (kind == SCN_ROUTE_MOVED)
    cl->stats.moved++;
  else if (kind == SCN_ROUTE_UNAVAILABLE)
    cl->stats.unavailable++;
}

/* ---- moves ------------------------------------------------------------------------------- */

/* A group being moved keeps its worlds' clocks still from its freeze on: the tick count the
 * target goes on with is the one the mover wrote, and no tick here comes after it. */
static void hold_ticks(scn_cluster *cl, const group *g, bool on) {
  scn_scene *scene = cl->srv->scene;
  for (size_t i = 0; i < scn_world_count(scene); i++) {
    scn_world *w = scn_world_at(scene, i);
    if (scn_world_in_group(scn_world_name(w), g->name))
      scn_world_hold_ticks(w, on);
  }
}

/* The move is off (before or at the hand-off): the group is served here again. */
static void move_undone(scn_cluster *cl, group *g) {
  g->state = G_OWNED;
  hold_ticks(cl, g, false);
  scn_gstore_drop_history(cl->srv->gstore, g->name);
}

/* The hand-off txn applied (seen in its answer or, first, in the watch): from now on the
 * target owns the group, nothing more is written here, and commands go there. The move is
 * answered when the target says it serves it (group_put). */
static void handed_off(scn_cluster *cl, group *g, int64_t rev) {
  move *mv = g->mv;
  if (!mv || mv->handoff_rev)
    return;
  mv->handoff_rev = rev;
  node_info *n = node_find(cl, mv->to);
  g->key = true;
  snprintf(g->node, sizeof g->node, "%s", mv->to);
  if (n)
    snprintf(g->addr, sizeof g->addr, "%s", n->addr);
  if (rev > g->mod_rev)
    g->mod_rev = rev;
  g->from = true;
  unload(cl, g, mv->to, g->addr);
  log_owner(g, cl->node, mv->to, rev);
  cl->next_publish = 0;
}

static void on_handed_off(void *ud, const cJSON *reply, const char *why) {
  scn_cluster *cl;
  group *g = answer_group(ud, &cl);
  if (!g || !g->mv)
    return;
  if (reply && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "succeeded"))) {
    handed_off(cl, g,
               scn_etcd_int(cJSON_GetObjectItemCaseSensitive(reply, "header"), "revision", 0));
    return;
  }
  if (g->mv->handoff_rev)
    return; /* the watch saw it apply: this answer was lost or late */
  move *mv = g->mv;
  move_undone(cl, g);
  g->mv = NULL;
  char msg[300];
  snprintf(msg, sizeof msg, "the hand-off to %s failed: %s", mv->to,
           why ? why : "the group's key changed meanwhile");
  if (mv->done)
    mv->done(mv->ud, false, SCN_W_UNAVAILABLE, msg);
  free(mv);
}

int scn_cluster_move(scn_cluster *cl, const char *world, const char *to, scn_move_done done,
                     void *ud, int *code, char *msg, size_t msglen) {
  char name[SCN_NAME_MAX + 1];
  scn_group_of(world, name);
  group *g = group_find(cl, name);
  if (!g || g->state != G_OWNED) {
    *code = SCN_W_UNAVAILABLE;
    snprintf(msg, msglen, "group %s is not served here right now", name);
    return -1;
  }
  if (strcmp(to, cl->node) == 0)
    return 1;
  node_info *n = node_find(cl, to);
  if (!n) {
    *code = SCN_W_NOT_FOUND;
    snprintf(msg, msglen, "no live node named \"%s\"", to);
    return -1;
  }
  /* Frozen: commands on it answer UNAVAILABLE until it is gone; everything answered before is
   * in the snapshot the target loads, and the worlds' ticks and histories in the file beside
   * it (their clocks stand still from here). */
  g->state = G_FROZEN;
  hold_ticks(cl, g, true);
  uint64_t bytes, hbytes = 0;
  if (scn_gstore_checkpoint(cl->srv->gstore, g->name, &bytes) != 0 ||
      scn_gstore_write_history(cl->srv->gstore, g->name, &hbytes) != 0) {
    move_undone(cl, g);
    *code = SCN_W_INTERNAL;
    snprintf(msg, msglen, "cannot save group %s before the move", name);
    return -1;
  }
  move *mv = calloc(1, sizeof *mv);
  if (!mv) {
    move_undone(cl, g);
    *code = SCN_W_INTERNAL;
    snprintf(msg, msglen, "out of memory");
    return -1;
  }
  snprintf(mv->to, sizeof mv->to, "%s", to);
  mv->done = done;
  mv->ud = ud;
  mv->deadline = uv_hrtime() + (uint64_t)(MOVE_LIMIT_S * 1e9);
  g->mv = mv;
  /* One txn: the key goes to the target's lease, if it is still this daemon's at its epoch. */
  group_txn(cl, g, g->mod_rev, n->name, n->addr, n->lease, true);
  if (!request(cl, "/v3/kv/txn", request_timeout(cl), on_handed_off, ctx_new(cl, g->name))) {
    move_undone(cl, g);
    g->mv = NULL;
    free(mv);
    *code = SCN_W_UNAVAILABLE;
    snprintf(msg, msglen, "cannot reach etcd");
    return -1;
  }
  scn_log(SCN_LOG_INFO, "moving a group", "group=%s to=%s snapshot_bytes=%llu history_bytes=%llu",
          name, to, (unsigned long long)bytes, (unsigned long long)hbytes);
  return 0;
}

void scn_cluster_forget_move(scn_cluster *cl, void *ud) {
  for (size_t b = 0; b < GROUP_BUCKETS; b++)
    for (group *g = cl->buckets[b]; g; g = g->next)
      if (g->mv && g->mv->ud == ud)
        g->mv->done = NULL; /* the move goes on, answered to nobody */
}

static void check_moves(scn_cluster *cl) {
  uint64_t now = uv_hrtime();
  for (size_t b = 0; b < GROUP_BUCKETS; b++)
    for (group *g = cl->buckets[b]; g; g = g->next)
      if (g->mv && g->mv->handoff_rev && now > g->mv->deadline) {
        move *mv = g->mv;
        g->mv = NULL;
        if (mv->done)
          mv->done(mv->ud, false, SCN_W_UNAVAILABLE,
                   "the group was handed over, but its new owner has not confirmed it yet");
        free(mv);
      }
}

/* ---- membership -------------------------------------------------------------------------- */

static void step_failed(scn_cluster *cl, const char *what, const char *why) {
  cl->step_busy = false;
  cl->step_after = uv_hrtime() + (uint64_t)RETRY_MS * 1000000;
  if (cl->step_error != what)
    scn_log(SCN_LOG_WARN, "cluster: cannot register yet; retrying", "step=\"%s\" reason=\"%s\"",
            what, why ? why : "malformed reply");
  cl->step_error = what;
}

static void lost_lease(scn_cluster *cl, const char *why) {
  scn_log(SCN_LOG_ERROR, "cluster: lost the lease; registering again", "reason=\"%s\"", why);
  for (size_t b = 0; b < GROUP_BUCKETS; b++)
    for (group *g = cl->buckets[b]; g; g = g->next)
      if (g->state != G_NONE) {
        g->key = false; /* bound to the lease that is gone */
        lose(cl, g, why);
        g->state = G_NONE;
      }
  cl->registered = false;
  cl->lease = 0;
  cl->confirmed = 0;
  scn_readiness_set(&cl->srv->readiness, SCN_UNREADY_UNREGISTERED);
  scn_etcd_cancel(cl->watch);
  cl->watch = NULL;
  cl->step = R_LEASE;
  cl->step_busy = false;
}

static void on_keepalive(void *ud, const cJSON *reply, const char *why) {
  call_ctx *c = ud;
  scn_cluster *cl = c->cl;
  uint64_t sent = c->sent;
  int64_t lease = c->value;
  free(c);
  cl->keepalive_busy = false;
  if (lease != cl->lease)
    return;
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(reply, "result");
  if (!cJSON_IsObject(result)) {
    cl->stats.renewal_failures++;
    scn_log(SCN_LOG_WARN, "cluster: lease renewal failed", "reason=\"%s\" fenced=%s",
            why ? why : "malformed reply", lease_fresh(cl) ? "no" : "yes");
    return;
  }
  int64_t ttl = scn_etcd_int(result, "TTL", 0);
  if (ttl <= 0) {
    cl->stats.renewal_failures++;
    lost_lease(cl, "etcd says the lease expired");
    return;
  }
  if (sent > cl->confirmed)
    cl->confirmed = sent;
  cl->stats.renewals++;
  if (cl->registered)
    adopt_pending(cl); /* loads that waited for a fresh lease */
}

/* The body that names this daemon's lease, for a keepalive or a revoke. */
static void lease_body(scn_cluster *cl) {
  body_begin(cl);
  scn_buf_adds(&cl->body, "{\"ID\":");
  add_i64(&cl->body, cl->lease);
  scn_buf_adds(&cl->body, "}");
}

static void keepalive(scn_cluster *cl) {
  if (cl->keepalive_busy || !cl->lease)
    return;
  lease_body(cl);
  call_ctx *c = ctx_new(cl, NULL);
  if (c)
    c->value = cl->lease;
  cl->keepalive_busy = request(cl, "/v3/lease/keepalive", request_timeout(cl), on_keepalive, c);
}

static void on_granted(void *ud, const cJSON *reply, const char *why) {
  call_ctx *c = ud;
  scn_cluster *cl = c->cl;
  uint64_t sent = c->sent;
  free(c);
  int64_t id = scn_etcd_int(reply, "ID", 0), ttl = scn_etcd_int(reply, "TTL", 0);
  if (id == 0 || ttl <= 0) {
    step_failed(cl, "lease grant", why);
    return;
  }
  cl->lease = id;
  cl->confirmed = sent;
  if ((double)ttl < cl->ttl) {
    cl->ttl = (double)ttl;
    cl->ttl_ns = (uint64_t)(cl->ttl * 1e9);
  }
  cl->step = R_NODE;
  cl->step_busy = false;
  cl->step_error = NULL;
  step_next(cl);
}

/* The node key: its address and its load, bound to the lease. */
static void add_node_value(scn_cluster *cl, scn_buf *b) {
  scn_buf v = {0};
  scn_server *srv = cl->srv;
  scn_buf_adds(&v, "{\"node\":");
  scn_buf_add_json_string(&v, cl->node, strlen(cl->node));
  scn_buf_adds(&v, ",\"addr\":");
  scn_buf_add_json_string(&v, cl->addr, strlen(cl->addr));
  scn_buf_adds(&v, ",\"worlds\":");
  scn_buf_add_u64(&v, scn_world_count(srv->scene));
  scn_buf_adds(&v, ",\"transforms\":");
  scn_buf_add_u64(&v, scn_scene_transform_count(srv->scene));
  scn_buf_adds(&v, ",\"connections\":");
  scn_buf_add_u64(&v, srv->nconns);
  char http[128] = "";
  int port = scn_http_port(srv);
  const char *colon = strrchr(cl->addr, ':');
  if (port && colon)
    snprintf(http, sizeof http, "%.*s:%d", (int)(colon - cl->addr), cl->addr, port);
  scn_buf_adds(&v, ",\"http\":");
  scn_buf_add_json_string(&v, http, strlen(http));
  scn_buf_adds(&v, ",\"world_names\":[");
  for (size_t i = 0; i < scn_world_count(srv->scene); i++) {
    const char *name = scn_world_name(scn_world_at(srv->scene, i));
    if (i)
      scn_buf_addc(&v, ',');
    scn_buf_add_json_string(&v, name, strlen(name));
  }
  scn_buf_adds(&v, "]}");
  scn_etcd_add_b64(b, v.data, v.len);
  scn_buf_free(&v);
}

static void on_node_put(void *ud, const cJSON *reply, const char *why) {
  call_ctx *c = ud;
  scn_cluster *cl = c->cl;
  bool registering = c->value;
  free(c);
  if (!registering)
    return;
  if (!reply) {
    step_failed(cl, "node key", why);
    return;
  }
  /* Every daemon passes the migration lock before it takes ids, even when it finds no old
   * layout: another may have just moved the old files without having moved the counter yet. */
  cl->step = R_MIGRATE;
  cl->step_busy = false;
  cl->step_error = NULL;
  step_next(cl);
}

static void put_node(scn_cluster *cl, bool registering) {
  body_begin(cl);
  scn_buf_adds(&cl->body, "{\"key\":");
  add_key(&cl->body, NODES_PREFIX, cl->node);
  scn_buf_adds(&cl->body, ",\"value\":");
  add_node_value(cl, &cl->body);
  scn_buf_adds(&cl->body, ",\"lease\":");
  add_i64(&cl->body, cl->lease);
  scn_buf_adds(&cl->body, "}");
  call_ctx *c = ctx_new(cl, NULL);
  if (c)
    c->value = registering;
  if (!request(cl, "/v3/kv/put", request_timeout(cl), on_node_put, c) && registering)
    step_failed(cl, "node key", "cannot send");
}

/* ---- migration of the standalone layout ---------------------------------------------------- */

static void release_migrate_lock(scn_cluster *cl) {
  cl->migrate_lock = false;
  body_begin(cl);
  scn_buf_adds(&cl->body, "{\"key\":");
  scn_etcd_add_b64(&cl->body, MIGRATE_KEY, strlen(MIGRATE_KEY));
  scn_buf_adds(&cl->body, "}");
  request(cl, "/v3/kv/deleterange", request_timeout(cl), ignore_reply, ctx_new(cl, NULL));
}

/* The lock is held: the old layout (if it is still there) is split into groups here, and the
 * lock stays until this daemon has moved the id counter past the old ids, so that no daemon
 * ever gets a range that holds one (they wait for the lock before their own ranges). */
static void on_migrate_lock(void *ud, const cJSON *reply, const char *why) {
  call_ctx *c = ud;
  scn_cluster *cl = c->cl;
  free(c);
  if (!reply) {
    step_failed(cl, "migration lock", why);
    return;
  }
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "succeeded"))) {
    step_failed(cl, "migration by another node", "waiting for it");
    cl->step_after = uv_hrtime() + 20 * 1000000ull; /* held for a moment only */
    return;
  }
  cl->migrate_lock = true;
  char err[4600];
  uint32_t max_slot = 0;
  if (scn_gstore_has_old_layout(cl->srv->gstore)) {
    if (scn_gstore_migrate(cl->srv->gstore, &max_slot, err, sizeof err) != 0)
      scn_log(SCN_LOG_ERROR, "cluster: migration failed", "error=\"%s\"", err);
    else
      cl->ids_floor = max_slot / ID_RANGE + 1;
  }
  cl->step = R_IDS;
  cl->step_busy = false;
  cl->step_error = NULL;
  step_next(cl);
}

static void migrate_lock(scn_cluster *cl) {
  body_begin(cl);
  scn_buf *b = &cl->body;
  scn_buf_adds(b, "{\"compare\":[{\"key\":");
  scn_etcd_add_b64(b, MIGRATE_KEY, strlen(MIGRATE_KEY));
  scn_buf_adds(b, ",\"target\":\"CREATE\",\"create_revision\":\"0\"}],\"success\":[{"
                  "\"request_put\":{\"key\":");
  scn_etcd_add_b64(b, MIGRATE_KEY, strlen(MIGRATE_KEY));
  scn_buf_adds(b, ",\"value\":");
  scn_etcd_add_b64(b, cl->node, strlen(cl->node));
  scn_buf_adds(b, ",\"lease\":");
  add_i64(b, cl->lease);
  scn_buf_adds(b, "}}]}");
  if (!request(cl, "/v3/kv/txn", request_timeout(cl), on_migrate_lock, ctx_new(cl, NULL)))
    step_failed(cl, "migration lock", "cannot send");
}

/* ---- entity id ranges -------------------------------------------------------------------- */

static void ids_fetch(scn_cluster *cl);

static void on_ids_txn(void *ud, const cJSON *reply, const char *why) {
  call_ctx *c = ud;
  scn_cluster *cl = c->cl;
  int64_t first_range = c->value;
  free(c);
  cl->ids_busy = false;
  if (!reply || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "succeeded"))) {
    if (!reply)
      scn_log(SCN_LOG_WARN, "etcd: cannot reserve entity ids", "reason=\"%s\"", why);
    if (cl->step == R_IDS)
      step_failed(cl, "entity ids", why ? why : "raced; again");
    return; /* another node took the range: the next tick asks again */
  }
  if (first_range < 0 || (uint64_t)first_range >= (UINT32_MAX - 1) / ID_RANGE) {
    scn_log(SCN_LOG_ERROR, "cluster: entity ids are used up", "range=%lld", (long long)first_range);
    return;
  }
  uint32_t first = (uint32_t)first_range * ID_RANGE + 1;
  scn_entity_add_slots(cl->srv->scene, first, ID_RANGE - (first_range == 0));
  if (cl->migrate_lock)
    release_migrate_lock(cl); /* the counter is past the migrated ids now */
  scn_log(SCN_LOG_DEBUG, "entity ids reserved", "first=%u count=%u", first, ID_RANGE);
  if (cl->step == R_IDS) {
    cl->step = R_SYNC;
    cl->step_busy = false;
    cl->step_error = NULL;
    step_next(cl);
  }
}

static void on_ids_read(void *ud, const cJSON *reply, const char *why) {
  call_ctx *c = ud;
  scn_cluster *cl = c->cl;
  free(c);
  const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(reply, "kvs");
  if (!reply || (kvs && !cJSON_IsArray(kvs))) {
    cl->ids_busy = false;
    if (cl->step == R_IDS)
      step_failed(cl, "entity ids", why);
    return;
  }
  const cJSON *kv = cJSON_IsArray(kvs) ? kvs->child : NULL;
  int64_t mod = kv ? scn_etcd_int(kv, "mod_revision", 0) : 0;
  char value[32] = "0";
  if (kv && !scn_etcd_b64(cJSON_GetObjectItemCaseSensitive(kv, "value"), value, sizeof value, NULL))
    snprintf(value, sizeof value, "x");
  char *end;
  long long next = strtoll(value, &end, 10);
  if (*end || next < 0) {
    cl->ids_busy = false;
    scn_log(SCN_LOG_ERROR, "etcd: the entity id counter holds no number", "key=%s", IDS_KEY);
    if (cl->step == R_IDS)
      step_failed(cl, "entity ids", "malformed counter");
    return;
  }
  if (next < cl->ids_floor)
    next = cl->ids_floor;
  body_begin(cl);
  scn_buf *b = &cl->body;
  txn_put_begin(b, IDS_KEY, "", kv != NULL, mod);
  char v[32];
  int n = snprintf(v, sizeof v, "%lld", next + 1);
  scn_etcd_add_b64(b, v, (size_t)n);
  scn_buf_adds(b, "}}]}");
  call_ctx *t = ctx_new(cl, NULL);
  if (t)
    t->value = next;
  if (!request(cl, "/v3/kv/txn", request_timeout(cl), on_ids_txn, t)) {
    cl->ids_busy = false;
    if (cl->step == R_IDS)
      step_failed(cl, "entity ids", "cannot send");
  }
}

/* Reserves the next range of entity slots: read the counter, advance it if nobody did. */
static void ids_fetch(scn_cluster *cl) {
  if (cl->ids_busy)
    return;
  body_begin(cl);
  scn_buf_adds(&cl->body, "{\"key\":");
  scn_etcd_add_b64(&cl->body, IDS_KEY, strlen(IDS_KEY));
  scn_buf_adds(&cl->body, "}");
  cl->ids_busy = request(cl, "/v3/kv/range", request_timeout(cl), on_ids_read, ctx_new(cl, NULL));
  if (!cl->ids_busy && cl->step == R_IDS)
    step_failed(cl, "entity ids", "cannot send");
}

/* ---- the steps of registration, and the housekeeping tick ---------------------------------- */

static void step_next(scn_cluster *cl) {
  if (cl->step_busy || cl->step == R_DONE || cl->closing || cl->releasing ||
      uv_hrtime() < cl->step_after)
    return;
  cl->step_busy = true;
  switch (cl->step) {
  case R_LEASE: {
    body_begin(cl);
    char ttl[32];
    snprintf(ttl, sizeof ttl, "{\"TTL\":%lld}", (long long)ceil(cl->ttl));
    scn_buf_adds(&cl->body, ttl);
    if (!request(cl, "/v3/lease/grant", request_timeout(cl), on_granted, ctx_new(cl, NULL)))
      step_failed(cl, "lease grant", "cannot send");
    break;
  }
  case R_NODE:
    put_node(cl, true);
    break;
  case R_MIGRATE:
    migrate_lock(cl);
    break;
  case R_IDS:
    ids_fetch(cl);
    break;
  case R_SYNC:
    sync_start(cl);
    if (!cl->syncing)
      step_failed(cl, "read the cluster", "cannot send");
    break;
  case R_DONE:
    break;
  }
}

static void on_tick(uv_timer_t *t) {
  scn_cluster *cl = t->data;
  uint64_t now = uv_hrtime();
  if (cl->releasing)
    return;
  if (cl->lease && now >= cl->next_keepalive) {
    keepalive(cl);
    cl->next_keepalive = now + (uint64_t)(cl->ttl_ns / 3);
  }
  if (!cl->registered) {
    scn_readiness_set(&cl->srv->readiness, SCN_UNREADY_UNREGISTERED);
    step_next(cl);
    return;
  }
  if (cl->sync_again && !cl->syncing) {
    cl->sync_again = false;
    sync_start(cl);
  }
  if (!lease_fresh(cl))
    return;
  if (scn_entity_slots_left(cl->srv->scene) < ID_LOW_WATER)
    ids_fetch(cl);
  if (now >= cl->next_publish) {
    put_node(cl, false);
    cl->next_publish = now + (uint64_t)PUBLISH_MS * 1000000;
  }
  if (now >= cl->next_sweep) {
    sweep(cl);
    cl->next_sweep = now + (uint64_t)SWEEP_MS * 1000000;
  }
  check_moves(cl);
}

/* ---- SIGTERM ----------------------------------------------------------------------------- */

static void on_revoked(void *ud, const cJSON *reply, const char *why) {
  call_ctx *c = ud;
  scn_cluster *cl = c->cl;
  free(c);
  cl->release_req = NULL;
  if (!reply)
    scn_log(SCN_LOG_WARN, "cluster: cannot revoke the lease; the groups go when it expires",
            "reason=\"%s\"", why);
  else
    scn_log(SCN_LOG_INFO, "cluster: groups released", "node=%s", cl->node);
  cl->releasing = false;
}

void scn_cluster_release_all(scn_cluster *cl) {
  if (cl->releasing || cl->released)
    return;
  /* Each group is frozen and saved; revoking the lease then deletes every key bound to it (the
   * node's and its groups'), which the others see at once. */
  uint64_t bytes;
  for (size_t b = 0; b < GROUP_BUCKETS; b++)
    for (group *g = cl->buckets[b]; g; g = g->next)
      if (g->state == G_OWNED) {
        g->state = G_FROZEN;
        if (scn_gstore_checkpoint(cl->srv->gstore, g->name, &bytes) != 0)
          scn_log(SCN_LOG_ERROR, "cannot save a group before releasing it", "group=%s", g->name);
      }
  cl->released = true;
  scn_readiness_set(&cl->srv->readiness, SCN_UNREADY_RELEASED);
  if (!cl->lease)
    return;
  lease_body(cl);
  call_ctx *c = ctx_new(cl, NULL);
  cl->releasing = request(cl, "/v3/lease/revoke", 2.0, on_revoked, c);
}

bool scn_cluster_busy(const scn_cluster *cl) { return cl && cl->releasing; }

/* ---- commands ---------------------------------------------------------------------------- */

const char *scn_cluster_node(const scn_cluster *cl) { return cl->node; }

void scn_cluster_nodes_json(scn_cluster *cl, scn_buf *out) {
  scn_buf_adds(out, ",\"nodes\":[");
  node_info *me = node_find(cl, cl->node);
  if (me) {
    me->worlds = scn_world_count(cl->srv->scene);
    me->transforms = scn_scene_transform_count(cl->srv->scene);
    me->connections = cl->srv->nconns;
  }
  for (size_t i = 0; i < cl->nnodes; i++) {
    const node_info *n = &cl->nodes[i];
    scn_buf_adds(out, i ? ",{\"node\":" : "{\"node\":");
    scn_buf_add_json_string(out, n->name, strlen(n->name));
    scn_buf_adds(out, ",\"addr\":");
    scn_buf_add_json_string(out, n->addr, strlen(n->addr));
    scn_buf_adds(out, ",\"worlds\":");
    scn_buf_add_u64(out, n->worlds);
    scn_buf_adds(out, ",\"transforms\":");
    scn_buf_add_u64(out, n->transforms);
    scn_buf_adds(out, ",\"connections\":");
    scn_buf_add_u64(out, n->connections);
    if (n->http[0]) {
      scn_buf_adds(out, ",\"http\":");
      scn_buf_add_json_string(out, n->http, strlen(n->http));
    }
    scn_buf_addc(out, '}');
  }
  scn_buf_addc(out, ']');
}

void scn_cluster_worlds_json(scn_cluster *cl, scn_buf *out, bool first, const scn_acl_rule *rule) {
  for (size_t i = 0; i < cl->nnodes; i++) {
    const node_info *n = &cl->nodes[i];
    if (strcmp(n->name, cl->node) == 0 || !n->world_names)
      continue;
    for (const char *w = n->world_names; *w; w += strlen(w) + 1) {
      if (rule && !scn_acl_allows_world(rule, w))
        continue;
      scn_buf_adds(out, first ? "{\"name\":" : ",{\"name\":");
      first = false;
      scn_buf_add_json_string(out, w, strlen(w));
      scn_buf_adds(out, ",\"node\":");
      scn_buf_add_json_string(out, n->name, strlen(n->name));
      scn_buf_addc(out, '}');
    }
  }
}

/* ---- figures ----------------------------------------------------------------------------- */

static void collect_stats(void *ud, scn_metrics_sink *k) {
  scn_cluster *cl = ud;
  const cl_stats *s = &cl->stats;
  size_t owned = 0;
  for (size_t b = 0; b < GROUP_BUCKETS; b++)
    for (group *g = cl->buckets[b]; g; g = g->next)
      owned += g->state == G_OWNED;
  double left = 0;
  uint64_t now = uv_hrtime();
  if (cl->confirmed && now < cl->confirmed + cl->ttl_ns)
    left = (double)(cl->confirmed + cl->ttl_ns - now) * 1e-9;
  scn_metric(k, "cluster_registered", "gauge", "1 while registered in etcd and not fenced.",
             serving(cl));
  scn_metric(k, "cluster_nodes", "gauge", "Live nodes this daemon knows of.", (double)cl->nnodes);
  scn_metric(k, "cluster_groups_owned", "gauge", "Groups this daemon serves.", (double)owned);
  scn_metric(k, "cluster_moves_total", "counter", "Groups this daemon moved to another node.",
             (double)s->moves);
  scn_metric(k, "cluster_moves_in_total", "counter", "Groups moved to this daemon.",
             (double)s->moves_in);
  scn_metric(k, "cluster_takeovers_total", "counter",
             "Groups this daemon took over from the data directory after their owner went.",
             (double)s->takeovers);
  scn_metric(k, "cluster_claims_total", "counter", "Claims of a group this daemon won.",
             (double)s->claims);
  scn_metric(k, "cluster_groups_lost_total", "counter",
             "Groups this daemon stopped serving without handing them over.", (double)s->lost);
  scn_metric(k, "cluster_lease_renewals_total", "counter", "Lease renewals etcd confirmed.",
             (double)s->renewals);
  scn_metric(k, "cluster_lease_renewal_failures_total", "counter", "Lease renewals that failed.",
             (double)s->renewal_failures);
  scn_metric(k, "cluster_lease_remaining_seconds", "gauge",
             "Time the lease is known to live (from the last confirmed renewal).", left);
  scn_metric(k, "cluster_fence_remaining_seconds", "gauge",
             "Time until this daemon fences itself without another renewal.",
             left > (double)cl->margin_ns * 1e-9 ? left - (double)cl->margin_ns * 1e-9 : 0);
  scn_metric(k, "cluster_moved_total", "counter", "Commands answered MOVED.", (double)s->moved);
  scn_metric(k, "cluster_unavailable_total", "counter", "Commands answered UNAVAILABLE.",
             (double)s->unavailable);
  const scn_etcd_stats *e = scn_etcd_get_stats(cl->etcd);
  scn_metric(k, "etcd_requests_total", "counter", "Requests sent to etcd.", (double)e->requests);
  scn_metric(k, "etcd_errors_total", "counter",
             "etcd requests that failed (transport, timeout, HTTP error, malformed reply).",
             (double)e->errors);
  scn_metric(k, "etcd_timeouts_total", "counter", "etcd requests that timed out.",
             (double)e->timeouts);
  scn_metric(k, "etcd_failovers_total", "counter", "Moves to the next etcd endpoint.",
             (double)e->failovers);
  scn_metric_hist(k, "etcd_request_seconds", "etcd request latency.", &e->latency);
}

/* ---- the module -------------------------------------------------------------------------- */

bool scn_cluster_config_valid(const scn_config *cfg, char *err, size_t errlen) {
  char why[256];
  if (!cfg->data_dir[0]) {
    snprintf(err, errlen, "--cluster needs --data DIR (the directory every daemon shares)");
    return false;
  }
  if (!scn_etcd_urls_valid(cfg->cluster, why, sizeof why)) {
    snprintf(err, errlen, "--cluster: %s", why);
    return false;
  }
  if (cfg->node[0] &&
      (!scn_world_name_valid(cfg->node, strlen(cfg->node)) || strcmp(cfg->node, "auto") == 0)) {
    snprintf(err, errlen, "--node: \"%s\" is not a node name (1 to 64 of A-Z a-z 0-9 _ . -)",
             cfg->node);
    return false;
  }
  const char *colon = strrchr(cfg->advertise, ':');
  if (cfg->advertise[0] && (!colon || colon == cfg->advertise || !colon[1] ||
                            strspn(colon + 1, "0123456789") != strlen(colon + 1))) {
    snprintf(err, errlen, "--advertise: \"%s\" is not HOST:PORT", cfg->advertise);
    return false;
  }
  return true;
}

void scn_cluster_node_name(const scn_config *cfg, const char *advertise, char *out, size_t cap) {
  if (cfg->node[0]) {
    snprintf(out, cap, "%s", cfg->node);
    return;
  }
  size_t n = 0;
  for (const char *p = advertise; *p && n + 1 < cap && n < SCN_NAME_MAX; p++)
    out[n++] =
        strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", *p) ? *p : '-';
  out[n] = '\0';
}

scn_cluster *scn_cluster_open(scn_server *srv, const char *node, const char *advertise) {
  scn_cluster *cl = calloc(1, sizeof *cl);
  if (!cl)
    return NULL;
  cl->srv = srv;
  cl->etcd = scn_etcd_open(srv->loop, srv->cfg.cluster);
  if (!cl->etcd) {
    free(cl);
    return NULL;
  }
  snprintf(cl->node, sizeof cl->node, "%s", node);
  snprintf(cl->addr, sizeof cl->addr, "%s", advertise);
  cl->ttl = srv->cfg.lease_ttl;
  cl->ttl_ns = (uint64_t)(cl->ttl * 1e9);
  double margin = cl->ttl / 5 > 0.5 ? cl->ttl / 5 : 0.5;
  cl->margin_ns = (uint64_t)(margin * 1e9);
  scn_readiness_set(&srv->readiness, SCN_UNREADY_UNREGISTERED);
  scn_gstore_set_fence(srv->gstore, may_write, cl);
  cl->hooks = (scn_hooks){.ud = cl,
                          .before_flush = before_flush,
                          .conn_closed = on_conn_closed,
                          .collect_stats = collect_stats};
  scn_server_add_hooks(srv, &cl->hooks);
  uv_timer_init(srv->loop, &cl->timer);
  cl->timer.data = cl;
  uv_timer_start(&cl->timer, on_tick, 0, TICK_MS);
  scn_log(SCN_LOG_INFO, "cluster: registering", "node=%s addr=%s etcd=%s lease_ttl=%g", cl->node,
          cl->addr, srv->cfg.cluster, cl->ttl);
  return cl;
}

static void on_timer_closed(uv_handle_t *h) { free(h->data); }

void scn_cluster_close(scn_cluster *cl) {
  if (!cl)
    return;
  cl->closing = true;
  scn_server_remove_hooks(cl->srv, &cl->hooks);
  for (size_t b = 0; b < GROUP_BUCKETS; b++)
    while (cl->buckets[b]) {
      group *g = cl->buckets[b];
      cl->buckets[b] = g->next;
      wake_all(g);
      if (g->mv && g->mv->done)
        g->mv->done(g->mv->ud, false, SCN_W_UNAVAILABLE, "the daemon is stopping");
      free(g->mv);
      free(g);
    }
  for (size_t i = 0; i < cl->nnodes; i++)
    free(cl->nodes[i].world_names);
  free(cl->nodes);
  free(cl->acks);
  scn_buf_free(&cl->body);
  scn_etcd_close(cl->etcd);
  uv_timer_stop(&cl->timer);
  uv_close((uv_handle_t *)&cl->timer, on_timer_closed);
}

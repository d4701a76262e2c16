/* The follower's side of the change stream (--replicas N >= 1): for each group whose replicas
 * key names this daemon as a follower (and that another daemon owns), the group is held in the
 * store at the owner's epoch, and a TCP client dials the owner's protocol port, sends hello
 * and replicate {group, epoch, from, node}, applies each streamed record
 * ({"r":SEQ,"t":TICK,"l":LINE}, the bytes rebuilt with scn_journal_encode) and acknowledges
 * the last one once the loop turn's commit has written it.
 *
 * Ticks: a followed world does not tick on this daemon's clock (main.c asks
 * scn_cluster_follows_world). Its ticks close at the owner's numbers: up to T on a tick mark
 * {"w":WORLD,"t":T}, and up to T - 1 before a record of tick T is applied (records read from
 * the owner's backlog come without marks). So its tick count, the ticks its changes are
 * stamped with, and its history are the owner's, and a stream on it gets a frame per tick the
 * owner closed (the next tick here sends it). A closed connection is dialled
 * again with a backoff. Following stops when the key no longer names this daemon, another
 * epoch begins, or this daemon comes to own the group (scn__load_group stops it first).
 *
 * A copy starts empty, from seq 1: a follower whose directory already has the group (from an
 * older epoch, or a restart) waits until the snapshot stream exists, and says so once. */
#include "cluster/cluster_internal.h"

#include "framing.h"
#include "ops/json_arena.h"
#include "ops/log.h"
#include "store/groups.h"
#include "store/journal.h"
#include "store/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

typedef enum link_state {
  LINK_NONE,
  LINK_DIALING,
  LINK_HELLO,
  LINK_REPLICATE,
  LINK_STREAM
} link_state;

/* One connection attempt; it outlives its follow while libuv closes its handle. */
typedef struct fconn {
  struct scn_follow *f; /* NULL once let go */
  uv_getaddrinfo_t gai;
  uv_connect_t connect;
  uv_tcp_t tcp;
  bool tcp_open;
  scn_framer framer;
} fconn;

struct scn_follow {
  scn_cluster *cl;
  char group[SCN_NAME_MAX + 1];
  uint64_t epoch;
  bool held;   /* the group is in the store at epoch */
  bool waits;  /* the directory has a copy already: waits for the snapshot stream */
  fconn *conn; /* NULL: not connected */
  link_state state;
  uint64_t acked, pending_ack; /* the last seq acknowledged, and the last to acknowledge */
  uint64_t applied;            /* records applied since following began */
  uint64_t announced;          /* the highest tick the owner said one of its worlds closed */
  uint64_t backoff_ms, retry_at;
  scn_buf rec; /* a record's bytes, rebuilt */
};

static bool names_self(const scn_cluster *cl, const scn_group_entry *g) {
  for (uint8_t i = 0; i < g->replicas.nfollowers; i++)
    if (strcmp(g->replicas.followers[i], cl->self.node) == 0)
      return true;
  return false;
}

/* Whether this daemon should follow g now, and at which epoch. */
static bool wanted(const scn_cluster *cl, const scn_group_entry *g) {
  return g->key && g->state == SCN_GROUP_NONE && strcmp(g->node, cl->self.node) != 0 &&
         g->replicas.known && g->replicas.epoch > 0 && names_self(cl, g);
}

/* Whether f's copy is kept though g has no owner: the replicas key of f's epoch still names
 * this daemon, so it may be the one to claim g and serve it from this copy: as a member of the
 * in-sync set its owner recorded (claims.c), or once world.promote names it. */
static bool kept_for_claim(const scn_cluster *cl, const scn_group_entry *g, const scn_follow *f) {
  return !g->key && (g->state == SCN_GROUP_NONE || g->state == SCN_GROUP_CLAIMING) && f->held &&
         g->replicas.known && (uint64_t)g->replicas.epoch == f->epoch && names_self(cl, g);
}

static size_t find(const scn_cluster *cl, const char *group) {
  for (size_t i = 0; i < cl->nfollows; i++)
    if (strcmp(cl->follows[i]->group, group) == 0)
      return i;
  return cl->nfollows;
}

bool scn__follows(const scn_cluster *cl, const char *group) {
  size_t i = find(cl, group);
  return i < cl->nfollows && cl->follows[i]->held;
}

bool scn_cluster_follows_world(const scn_cluster *cl, const char *world) {
  if (cl->nfollows == 0)
    return false;
  char group[SCN_NAME_MAX + 1];
  scn_group_of(world, group);
  return scn__follows(cl, group);
}

size_t scn__worlds_served(const scn_cluster *cl) {
  scn_scene *scene = cl->srv->scene;
  size_t n = scn_world_count(scene);
  for (size_t i = 0; cl->nfollows && i < scn_world_count(scene); i++)
    n -= scn_cluster_follows_world(cl, scn_world_name(scn_world_at(scene, i)));
  return n;
}

uint64_t scn__group_tick(const scn_cluster *cl, const char *group) {
  scn_scene *scene = cl->srv->scene;
  uint64_t top = 0;
  for (size_t i = 0; i < scn_world_count(scene); i++) {
    scn_world *w = scn_world_at(scene, i);
    if (scn_world_in_group(scn_world_name(w), group) && scn_world_tick(w) - 1 > top)
      top = scn_world_tick(w) - 1;
  }
  return top;
}

uint64_t scn__follow_lag(scn_cluster *cl, const char *group) {
  size_t i = find(cl, group);
  if (i >= cl->nfollows || !cl->follows[i]->held)
    return 0;
  const scn_follow *f = cl->follows[i];
  const scn_group_entry *g = scn_owners_find(&cl->owners, group);
  uint64_t known = f->announced, have = scn__group_tick(cl, group);
  if (g && g->replicas.known && (uint64_t)g->replicas.epoch == f->epoch && g->replicas.tick > known)
    known = g->replicas.tick;
  return known > have ? known - have : 0;
}

static void on_fconn_closed(uv_handle_t *h) {
  fconn *fc = h->data;
  scn_framer_free(&fc->framer);
  free(fc);
}

static void hang_up(scn_follow *f, const char *why) {
  fconn *fc = f->conn;
  if (!fc)
    return;
  if (why)
    scn_log(SCN_LOG_INFO, "replica: the link to the owner closed",
            "group=%s epoch=%llu acked=%llu reason=\"%s\"", f->group, (unsigned long long)f->epoch,
            (unsigned long long)f->acked, why);
  fc->f = NULL;
  f->conn = NULL;
  f->state = LINK_NONE;
  f->backoff_ms = f->backoff_ms ? f->backoff_ms * 2 : BACKOFF_MIN_MS;
  if (f->backoff_ms > BACKOFF_MAX_MS)
    f->backoff_ms = BACKOFF_MAX_MS;
  f->retry_at = uv_hrtime() + f->backoff_ms * 1000000u;
  if (fc->tcp_open)
    uv_close((uv_handle_t *)&fc->tcp, on_fconn_closed);
  /* else: the address lookup or the connect request still holds it; its callback frees it */
}

static void on_written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

static void send_line(scn_follow *f, const scn_buf *line) {
  uv_write_t *w = malloc(sizeof *w + line->len);
  if (!w) {
    hang_up(f, "out of memory");
    return;
  }
  memcpy(w + 1, line->data, line->len);
  uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)line->len);
  if (uv_write(w, (uv_stream_t *)&f->conn->tcp, &b, 1, on_written) != 0) {
    free(w);
    hang_up(f, "cannot write to the owner");
  }
}

static void send_replicate(scn_follow *f) {
  uint64_t epoch, seq = 0;
  scn_gstore_position(f->cl->srv->gstore, f->group, &epoch, &seq);
  scn_buf b = {0};
  scn_buf_adds(&b, "{\"cmd\":\"replicate\",\"group\":");
  scn_buf_add_json_string(&b, f->group, strlen(f->group));
  scn_buf_adds(&b, ",\"node\":");
  scn_buf_add_json_string(&b, f->cl->self.node, strlen(f->cl->self.node));
  scn_buf_adds(&b, ",\"epoch\":");
  scn_buf_add_u64(&b, f->epoch);
  scn_buf_adds(&b, ",\"from\":");
  scn_buf_add_u64(&b, seq + 1);
  scn_buf_adds(&b, "}\n");
  if (!b.failed)
    send_line(f, &b);
  else
    hang_up(f, "out of memory");
  scn_buf_free(&b);
}

/* A reply to hello or replicate: ok, or the link ends (logged with the owner's message). */
static bool reply_ok(scn_follow *f, const cJSON *root, const char *what) {
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "ok")))
    return true;
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
  char why[256];
  snprintf(why, sizeof why, "%s refused: %s", what,
           cJSON_IsString(m) ? m->valuestring : "(no message)");
  hang_up(f, why);
  return false;
}

/* Closes w's ticks until the last one closed is upto, the owner's number. A world whose clock
 * never ran (a copy that starts here) jumps there at once. */
static void close_ticks(scn_world *w, uint64_t upto) {
  uint64_t closed = scn_world_tick(w) - 1;
  if (upto <= closed)
    return;
  if (closed == 0 && upto > SCN_HISTORY_MAX && scn_world_continue_ticks(w, upto) == SCN_OK)
    return;
  while (closed < upto) {
    uint64_t now = scn_world_close_tick(w);
    if (now == closed)
      return; /* its clock is held (it is not moving from here, but never loop on it) */
    closed = now;
  }
}

/* The world of f's group that a mark or a record names, or NULL. */
static scn_world *group_world(const scn_follow *f, const char *name) {
  if (!name || !scn_world_in_group(name, f->group))
    return NULL;
  return scn_world_find(f->cl->srv->scene, name);
}

/* {"w":WORLD,"t":T}: WORLD closed tick T on the owner. */
static void apply_mark(scn_follow *f, const cJSON *root) {
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "w");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "t");
  if (!cJSON_IsString(w) || !cJSON_IsNumber(t) || t->valuedouble < 0 ||
      t->valuedouble > (double)(UINT64_C(1) << 62)) {
    hang_up(f, "a tick mark that is not one");
    return;
  }
  uint64_t tick = (uint64_t)t->valuedouble;
  if (tick > f->announced)
    f->announced = tick;
  scn_world *world = group_world(f, w->valuestring);
  if (world)
    close_ticks(world, tick);
}

/* Before a record of tick T: its world's ticks up to T - 1 are closed (T = 0: none named). */
static void close_before(scn_follow *f, const char *line, uint64_t tick) {
  if (tick < 2)
    return;
  if (tick - 1 > f->announced)
    f->announced = tick - 1;
  cJSON *cmd = scn_json_heap_parse(line, strlen(line));
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(cmd, "world");
  scn_world *world = cJSON_IsString(w) ? group_world(f, w->valuestring) : NULL;
  if (world)
    close_ticks(world, tick - 1);
  scn_json_heap_delete(cmd);
}

static void apply_record(scn_follow *f, const cJSON *root) {
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "r");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "t");
  const cJSON *l = cJSON_GetObjectItemCaseSensitive(root, "l");
  if (!cJSON_IsNumber(r) || !cJSON_IsString(l)) {
    hang_up(f, "a line of the stream that is not a record");
    return;
  }
  if (cJSON_IsNumber(t) && t->valuedouble >= 0 && t->valuedouble <= (double)(UINT64_C(1) << 62))
    close_before(f, l->valuestring, (uint64_t)t->valuedouble);
  f->rec.len = 0;
  scn_journal_encode(&f->rec, l->valuestring, strlen(l->valuestring));
  scn_gstore_record rec = {f->group,
                           f->epoch,
                           (uint64_t)r->valuedouble,
                           cJSON_IsNumber(t) ? (uint64_t)t->valuedouble : 0,
                           f->rec.data,
                           f->rec.len};
  char err[256];
  if (f->rec.failed || scn_gstore_apply(f->cl->srv->gstore, &rec, err, sizeof err) != 0) {
    hang_up(f, f->rec.failed ? "out of memory" : err);
    return;
  }
  f->applied++;
  f->pending_ack = rec.seq;
  f->backoff_ms = 0;
}

static bool on_line(void *ud, const char *line, size_t len) {
  scn_follow *f = ud;
  if (!line) {
    hang_up(f, "a line over --max-line");
    return false;
  }
  cJSON *root = scn_json_heap_parse(line, len);
  if (!root) {
    hang_up(f, "a line that is not JSON");
    return false;
  }
  switch (f->state) {
  case LINK_HELLO:
    if (reply_ok(f, root, "hello")) {
      f->state = LINK_REPLICATE;
      send_replicate(f);
    }
    break;
  case LINK_REPLICATE:
    if (reply_ok(f, root, "replicate")) {
      f->state = LINK_STREAM;
      scn_log(SCN_LOG_INFO, "replica: following a group", "group=%s epoch=%llu owner_last=%.0f",
              f->group, (unsigned long long)f->epoch,
              cJSON_GetObjectItemCaseSensitive(root, "last")
                  ? cJSON_GetObjectItemCaseSensitive(root, "last")->valuedouble
                  : -1.0);
    }
    break;
  default:
    if (cJSON_GetObjectItemCaseSensitive(root, "w"))
      apply_mark(f, root);
    else
      apply_record(f, root);
  }
  scn_json_heap_delete(root);
  return f->conn != NULL;
}

/* After the records of a read: the loop turn's commit writes them (the store's before_flush,
 * under this daemon's --fsync), then the last one is acknowledged. */
static void ack(scn_follow *f) {
  if (!f->conn || f->pending_ack <= f->acked)
    return;
  scn_hooks_before_flush(f->cl->srv);
  if (!f->conn || !scn__fence_up(f->cl))
    return; /* not written: acknowledged with a later commit */
  scn_buf b = {0};
  scn_buf_adds(&b, "{\"ack\":");
  scn_buf_add_u64(&b, f->pending_ack);
  scn_buf_adds(&b, "}\n");
  if (!b.failed) {
    f->acked = f->pending_ack;
    send_line(f, &b);
  }
  scn_buf_free(&b);
}

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(size);
  buf->len = buf->base ? size : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  fconn *fc = s->data;
  scn_follow *f = fc->f;
  if (f && n < 0)
    hang_up(f, n == UV_EOF ? "the owner closed it" : uv_strerror((int)n));
  else if (f && n > 0 && scn_framer_feed(&fc->framer, buf->base, (size_t)n, on_line, f))
    ack(f);
  free(buf->base);
}

static void send_hello(scn_follow *f) {
  const char *token = f->cl->srv->cfg.auth_token;
  scn_buf b = {0};
  scn_buf_adds(&b, "{\"cmd\":\"hello\"");
  if (token[0]) {
    scn_buf_adds(&b, ",\"token\":");
    scn_buf_add_json_string(&b, token, strlen(token));
  }
  scn_buf_adds(&b, "}\n");
  if (!b.failed)
    send_line(f, &b);
  else
    hang_up(f, "out of memory");
  scn_buf_free(&b);
}

static void on_connected(uv_connect_t *req, int status) {
  fconn *fc = req->data;
  scn_follow *f = fc->f;
  if (!f) {
    uv_close((uv_handle_t *)&fc->tcp, on_fconn_closed);
    return;
  }
  fc->tcp_open = true;
  if (status != 0) {
    hang_up(f, uv_strerror(status));
    return;
  }
  f->state = LINK_HELLO;
  if (uv_read_start((uv_stream_t *)&fc->tcp, on_alloc, on_read) != 0) {
    hang_up(f, "cannot read from the owner");
    return;
  }
  send_hello(f);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  fconn *fc = req->data;
  scn_follow *f = fc->f;
  if (!f || status != 0 || !res) {
    if (f)
      hang_up(f, status ? uv_strerror(status) : "no address");
    else
      on_fconn_closed((uv_handle_t *)&fc->tcp);
    uv_freeaddrinfo(res);
    return;
  }
  uv_tcp_init(f->cl->srv->loop, &fc->tcp);
  fc->tcp.data = fc;
  fc->connect.data = fc;
  if (uv_tcp_connect(&fc->connect, &fc->tcp, res->ai_addr, on_connected) != 0) {
    fc->tcp_open = true;
    hang_up(f, "cannot connect to the owner");
  }
  uv_freeaddrinfo(res);
}

/* Dials the owner (its address from the cluster's member records, else the group key's). */
static void dial(scn_follow *f, const scn_group_entry *g) {
  const scn_node_entry *n = scn_owners_node(&f->cl->owners, g->node);
  const char *addr = n && n->addr[0] ? n->addr : g->addr;
  const char *colon = strrchr(addr, ':');
  if (!colon || colon == addr)
    return;
  char host[SCN_ADDR_MAX];
  size_t hl = (size_t)(colon - addr);
  if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']')
    snprintf(host, sizeof host, "%.*s", (int)(hl - 2), addr + 1);
  else
    snprintf(host, sizeof host, "%.*s", (int)hl, addr);
  fconn *fc = calloc(1, sizeof *fc);
  if (!fc)
    return;
  fc->f = f;
  fc->gai.data = fc;
  fc->tcp.data = fc;
  scn_framer_init(&fc->framer, f->cl->srv->cfg.max_line);
  f->conn = fc;
  f->state = LINK_DIALING;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
  if (uv_getaddrinfo(f->cl->srv->loop, &fc->gai, on_resolved, host, colon + 1, &hints) != 0) {
    fc->f = NULL;
    f->conn = NULL;
    f->state = LINK_NONE;
    on_fconn_closed((uv_handle_t *)&fc->tcp);
  }
}

/* Holds the group in the store at the owner's epoch, from seq 1 (see the top of the file). */
static void hold(scn_follow *f) {
  scn_gstore *gs = f->cl->srv->gstore;
  if (scn_gstore_on_disk(gs, f->group)) {
    if (!f->waits)
      scn_log(SCN_LOG_WARN,
              "replica: this directory has a copy of the group already; it waits "
              "for the owner's snapshot stream",
              "group=%s epoch=%llu", f->group, (unsigned long long)f->epoch);
    f->waits = true;
    return;
  }
  char err[SCN_PATH_MSG_MAX];
  if (scn_gstore_acquire(gs, f->group, f->epoch, false, err, sizeof err) != 0) {
    scn_log(SCN_LOG_ERROR, "replica: cannot hold a followed group", "group=%s error=\"%s\"",
            f->group, err);
    f->retry_at = uv_hrtime() + (uint64_t)BACKOFF_MAX_MS * 1000000u;
    return;
  }
  f->held = true;
  f->cl->next_publish = 0;
}

static void free_at(scn_cluster *cl, size_t i) {
  scn_follow *f = cl->follows[i];
  hang_up(f, NULL);
  if (f->held) {
    scn_group_entry *g = scn_owners_find(&cl->owners, f->group);
    scn__drop_group(cl, f->group, g && g->key ? g->node : "", g && g->key ? g->addr : "");
    cl->next_publish = 0;
  }
  scn_buf_free(&f->rec);
  free(f);
  cl->follows[i] = cl->follows[--cl->nfollows];
}

void scn__follow_stop(scn_cluster *cl, const char *group) {
  size_t i = find(cl, group);
  if (i < cl->nfollows)
    free_at(cl, i);
}

bool scn__follow_take_copy(scn_cluster *cl, const char *group) {
  size_t i = find(cl, group);
  if (i >= cl->nfollows || !cl->follows[i]->held)
    return false;
  cl->follows[i]->held = false; /* the store and the scene keep it, as the owner's now */
  free_at(cl, i);
  return true;
}

static scn_follow *add(scn_cluster *cl, const scn_group_entry *g) {
  scn_follow **a = scn_array_grow(cl->follows, &cl->follows_cap, sizeof *a, cl->nfollows + 1);
  scn_follow *f = a ? calloc(1, sizeof *f) : NULL;
  if (!f)
    return NULL;
  cl->follows = a;
  f->cl = cl;
  snprintf(f->group, sizeof f->group, "%s", g->name);
  f->epoch = (uint64_t)g->replicas.epoch;
  cl->follows[cl->nfollows++] = f;
  return f;
}

void scn__follow_check(scn_cluster *cl) {
  if (cl->srv->cfg.replicas == 0)
    return;
  for (size_t i = cl->nfollows; i-- > 0;) {
    scn_group_entry *g = scn_owners_find(&cl->owners, cl->follows[i]->group);
    scn_follow *f = cl->follows[i];
    if (g && kept_for_claim(cl, g, f)) {
      hang_up(f, NULL);                 /* its owner is gone */
      scn_owners_claim(&cl->owners, g); /* only as the claim rule allows (claims.c) */
      continue;
    }
    if (!g || !wanted(cl, g) || (uint64_t)g->replicas.epoch != f->epoch)
      free_at(cl, i);
  }
  uint64_t now = uv_hrtime();
  for (scn_group_entry *g = scn_owners_first(&cl->owners); g; g = scn_owners_next(&cl->owners, g)) {
    if (!wanted(cl, g))
      continue;
    size_t i = find(cl, g->name);
    scn_follow *f = i < cl->nfollows ? cl->follows[i] : add(cl, g);
    if (!f || f->waits || now < f->retry_at)
      continue;
    if (!f->held)
      hold(f);
    if (f->held && !f->conn)
      dial(f, g);
  }
}

void scn__follow_free(scn_cluster *cl) {
  while (cl->nfollows) {
    scn_follow *f = cl->follows[cl->nfollows - 1];
    f->held = false; /* the store and the scene are closing on their own */
    free_at(cl, cl->nfollows - 1);
  }
  free(cl->follows);
  cl->follows = NULL;
  cl->follows_cap = 0;
}

uint64_t scn__follow_applied(const scn_follow *f, const char **group) {
  *group = f->group;
  return f->applied;
}

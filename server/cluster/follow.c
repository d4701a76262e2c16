/* The follower's side of the change stream (--replicas N >= 1): for each group whose replicas
 * key names this daemon as a follower (and that another daemon owns), the group is held in the
 * store at the owner's epoch, and a TCP client dials the owner's protocol port, sends hello
 * and replicate {group, epoch, from, node}, applies each streamed record
 * ({"r":SEQ,"t":TICK,"l":LINE}, the bytes rebuilt with scn_journal_encode) and acknowledges
 * the last one once the loop turn's commit has written it. A closed connection is dialled
 * again with a backoff. Following stops when the key no longer names this daemon, another
 * epoch begins, or this daemon comes to own the group (scn__load_group stops it first). While
 * the group has no owner, a copy the key (at its epoch) still names a follower of is kept, for
 * a claim (an in-sync member) or world.promote.
 *
 * Ticks: a followed world does not tick on this daemon's clock (main.c asks
 * scn_cluster_follows_world). Its ticks close at the owner's numbers: up to T on a tick mark
 * {"w":WORLD,"t":T}, and up to T - 1 before a record of tick T is applied (records read from
 * the owner's backlog come without marks). So its tick count, the ticks its changes are
 * stamped with, and its history are the owner's, and a stream on it gets a frame per tick the
 * owner closed (the next tick here sends it).
 *
 * A follower whose directory has the group at the owner's epoch (a restart, or a link that
 * broke) resumes from it (scn_gstore_resume) and asks for the records after its last seq; one
 * without a copy starts empty from seq 1; one whose copy cannot go on (another epoch, no
 * position) asks from 0: the owner then sends a whole copy of the group (copy.c), as it does
 * when its backlog no longer reaches back, and the follower installs it in place of its own.
 * A group on disk that a newer epoch owns elsewhere, or whose key says it ended (its last world
 * went) at the copy's epoch or later, and that this daemon does not follow is removed from the
 * directory (stale.c), never loaded again. A daemon that switched a group over to
 * its follower keeps its own copy instead (scn__follow_park): the same as the one the new owner
 * starts its epoch from, so it follows from seq 1 of that epoch.
 *
 * When the daemons' ports speak TLS (--tls-cert) the link does too: a client session (net/tls.h)
 * checks the owner's certificate against --cluster-ca and the address dialled; hello waits for
 * the handshake. */
#include "cluster/cluster_internal.h"

#include "framing.h"
#include "net/tls.h"
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
#define PARKED_MS 10000 /* a copy kept at a switchover waits this long for its new owner */

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
  char host[SCN_ADDR_MAX]; /* as dialled: what the owner's certificate must name */
  scn_tls *tls;            /* --tls-cert: the session over the socket (NULL: plain TCP) */
  scn_buf early;           /* TLS: lines sent before the handshake completed */
} fconn;

struct scn_follow {
  scn_cluster *cl;
  char group[SCN_NAME_MAX + 1];
  uint64_t epoch;
  bool held;         /* the group is in the store at epoch */
  bool whole;        /* it needs a whole copy from the owner (replicate from 0) */
  scn_copy_in *copy; /* a whole copy being received */
  fconn *conn;       /* NULL: not connected */
  link_state state;
  uint64_t acked, pending_ack; /* the last seq acknowledged, and the last to acknowledge */
  bool installed;   /* a whole copy installed: its seq is acknowledged, even 0 (the owner waits) */
  uint64_t applied; /* records applied since following began */
  uint64_t announced; /* the highest tick the owner said one of its worlds closed */
  bool marked; /* a tick mark came on this connection: the records after it need no closing */
  uint64_t backoff_ms, retry_at;
  scn_buf rec; /* a record's bytes, rebuilt */
  /* The copy this daemon kept when it switched the group over to its new owner: it follows
   * once the new owner records its epoch naming this daemon (epoch is 0 until then). */
  uint64_t parked_until; /* uv_hrtime; 0: not parked */
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

/* The follows are kept in order of their groups' names (each tick asks of every world): the
 * index of group's, or where it would go (*found false). */
static size_t lookup(const scn_cluster *cl, const char *group, bool *found) {
  size_t lo = 0, hi = cl->nfollows;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(cl->follows[mid]->group, group);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = false;
  return lo;
}

/* Whether f's copy is kept because g's key hands g to this daemon (a switchover), which has
 * not loaded it yet: it is the copy scn__load_group takes. */
static bool kept_for_move(const scn_cluster *cl, const scn_group_entry *g, const scn_follow *f) {
  return f->held && g->key && g->state == SCN_GROUP_NONE && strcmp(g->node, cl->self.node) == 0;
}

static size_t find(const scn_cluster *cl, const char *group) {
  bool found;
  size_t i = lookup(cl, group, &found);
  return found ? i : cl->nfollows;
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
  scn_tls_free(fc->tls);
  scn_buf_free(&fc->early);
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
  scn__copy_in_free(f->copy);
  f->copy = NULL;
  f->marked = false;
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

/* What the socket takes at once goes without a request (an ack, most often); the rest is
 * queued after whatever is queued already. */
static void write_bytes(scn_follow *f, const char *data, size_t len) {
  uv_buf_t now = uv_buf_init((char *)data, (unsigned)len);
  int n = uv_try_write((uv_stream_t *)&f->conn->tcp, &now, 1);
  if (n > 0) {
    data += n;
    len -= (size_t)n;
    if (len == 0)
      return;
  }
  uv_write_t *w = malloc(sizeof *w + len);
  if (!w) {
    hang_up(f, "out of memory");
    return;
  }
  memcpy(w + 1, data, len);
  uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)len);
  if (uv_write(w, (uv_stream_t *)&f->conn->tcp, &b, 1, on_written) != 0) {
    free(w);
    hang_up(f, "cannot write to the owner");
  }
}

/* Writes what the TLS session made on its own (the handshake, alerts). */
static void tls_flush(scn_follow *f) {
  fconn *fc = f->conn;
  if (!fc || !fc->tls || scn_tls_pending(fc->tls) == 0)
    return;
  scn_buf b = {0};
  if (scn_tls_take(fc->tls, &b))
    write_bytes(f, b.data, b.len);
  else
    hang_up(f, "out of memory");
  scn_buf_free(&b);
}

/* Sends len bytes of lines: sealed over TLS (kept until the handshake is done), as they are
 * otherwise. */
static void send_bytes(scn_follow *f, const char *data, size_t len) {
  fconn *fc = f->conn;
  if (!fc->tls) {
    write_bytes(f, data, len);
    return;
  }
  if (!scn_tls_established(fc->tls)) {
    scn_buf_add(&fc->early, data, len);
    if (fc->early.failed)
      hang_up(f, "out of memory");
    return;
  }
  scn_buf sealed = {0};
  uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
  if (scn_tls_seal(fc->tls, &b, 1, &sealed))
    write_bytes(f, sealed.data, sealed.len);
  else
    hang_up(f, "out of memory sealing a line for the owner");
  scn_buf_free(&sealed);
}

static void send_line(scn_follow *f, const scn_buf *line) { send_bytes(f, line->data, line->len); }

static void send_replicate(scn_follow *f) {
  uint64_t epoch, seq = 0;
  if (f->held)
    scn_gstore_position(f->cl->srv->gstore, f->group, &epoch, &seq);
  f->acked = f->pending_ack = seq; /* as the owner's link starts */
  f->installed = false;
  scn_buf b = {0};
  scn_buf_adds(&b, "{\"cmd\":\"replicate\",\"group\":");
  scn_buf_add_json_string(&b, f->group, strlen(f->group));
  scn_buf_adds(&b, ",\"node\":");
  scn_buf_add_json_string(&b, f->cl->self.node, strlen(f->cl->self.node));
  scn_buf_adds(&b, ",\"epoch\":");
  scn_buf_add_u64(&b, f->epoch);
  scn_buf_adds(&b, ",\"from\":");
  scn_buf_add_u64(&b, f->held ? seq + 1 : 0);
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
static void mark(scn_follow *f, const char *name, uint64_t tick) {
  if (tick > f->announced)
    f->announced = tick;
  f->marked = f->held && !f->copy;
  scn_world *world = group_world(f, name);
  if (world)
    close_ticks(world, tick);
}

static void apply_mark(scn_follow *f, const cJSON *root) {
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "w");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "t");
  if (!cJSON_IsString(w) || !cJSON_IsNumber(t) || t->valuedouble < 0 ||
      t->valuedouble > (double)(UINT64_C(1) << 62)) {
    hang_up(f, "a tick mark that is not one");
    return;
  }
  mark(f, w->valuestring, (uint64_t)t->valuedouble);
}

/* Before a record of tick T: its world's ticks up to T - 1 are closed (T = 0: none named). Once
 * marks come (the link caught up), each record of a world follows the mark of its tick before,
 * which closed it already: only the records read from the backlog before are looked into. */
static void close_before(scn_follow *f, const char *line, size_t len, uint64_t tick) {
  if (tick < 2 || f->marked)
    return;
  if (tick - 1 > f->announced)
    f->announced = tick - 1;
  cJSON *cmd = scn_json_heap_parse(line, len);
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(cmd, "world");
  scn_world *world = cJSON_IsString(w) ? group_world(f, w->valuestring) : NULL;
  if (world)
    close_ticks(world, tick - 1);
  scn_json_heap_delete(cmd);
}

/* Applies the record of seq and tick whose line is the len bytes at line. */
static void apply_line(scn_follow *f, uint64_t seq, uint64_t tick, const char *line, size_t len) {
  if (tick <= (UINT64_C(1) << 62))
    close_before(f, line, len, tick);
  f->rec.len = 0;
  scn_journal_encode(&f->rec, line, len);
  scn_gstore_record rec = {f->group, f->epoch, seq, tick, f->rec.data, f->rec.len};
  char err[256];
  if (f->rec.failed || scn_gstore_apply(f->cl->srv->gstore, &rec, err, sizeof err) != 0) {
    hang_up(f, f->rec.failed ? "out of memory" : err);
    return;
  }
  f->applied++;
  f->pending_ack = rec.seq;
  f->backoff_ms = 0;
}

/* Reads the digits at *p (before end) into *v; false when there are none. */
static bool take_u64(const char **p, const char *end, uint64_t *v) {
  const char *s = *p;
  uint64_t x = 0;
  while (s < end && *s >= '0' && *s <= '9' && s - *p < 19)
    x = x * 10 + (uint64_t)(*s++ - '0');
  if (s == *p)
    return false;
  *p = s;
  *v = x;
  return true;
}

static bool take(const char **p, const char *end, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0)
    return false;
  *p += n;
  return true;
}

/* The owner's record line {"r":SEQ,"t":TICK,"l":LINE} with LINE as it is (replicate.c): its
 * bytes are taken back without parsing them. False when line is not of that form (it is then
 * read as JSON). */
static bool apply_raw(scn_follow *f, const char *line, size_t len) {
  const char *p = line, *end = line + len;
  uint64_t seq, tick;
  if (!take(&p, end, "{\"r\":") || !take_u64(&p, end, &seq) || !take(&p, end, ",\"t\":") ||
      !take_u64(&p, end, &tick) || !take(&p, end, ",\"l\":") || p >= end - 1 || *p == '"' ||
      end[-1] != '}')
    return false;
  apply_line(f, seq, tick, p, (size_t)(end - 1 - p));
  return true;
}

/* A tick mark as the owner writes it ({"w":"WORLD","t":T}, a name with nothing escaped): one
 * comes per world a tick, so it is read without a parse. False when line is not of that form
 * (it is then read as JSON). */
static bool apply_mark_raw(scn_follow *f, const char *line, size_t len) {
  const char *p = line, *end = line + len;
  if (!take(&p, end, "{\"w\":\""))
    return false;
  char name[SCN_NAME_MAX + 1];
  size_t n = 0;
  while (p < end && *p != '"' && *p != '\\' && n < SCN_NAME_MAX)
    name[n++] = *p++;
  name[n] = '\0';
  uint64_t tick;
  if (!take(&p, end, "\",\"t\":") || !take_u64(&p, end, &tick) || p != end - 1 || *p != '}' ||
      tick > (UINT64_C(1) << 62))
    return false;
  mark(f, name, tick);
  return true;
}

/* Drops what this daemon holds of the group (the store's part and the worlds). */
static void drop_copy(scn_follow *f) {
  scn_group_entry *g = scn_owners_find(&f->cl->owners, f->group);
  scn__drop_group(f->cl, f->group, g && g->key ? g->node : "", g && g->key ? g->addr : "");
  f->held = false;
  f->cl->next_publish = 0;
}

/* A line of a whole copy: its first ({"copy":SEQ,...}) lets the copy held here go; once
 * received whole it is installed, and acknowledged as that seq. */
static void copy_line(scn_follow *f, const cJSON *root) {
  char err[SCN_PATH_MSG_MAX];
  uint64_t seq;
  if (!f->copy) {
    if (f->held)
      drop_copy(f);
    f->whole = true; /* until installed */
    f->copy = scn__copy_in_start(f->cl, f->group, f->epoch, root, err, sizeof err);
    if (!f->copy)
      hang_up(f, err);
    return;
  }
  int rc = scn__copy_in_chunk(f->copy, root, &seq, err, sizeof err);
  if (rc > 0)
    return;
  scn__copy_in_free(f->copy);
  f->copy = NULL;
  if (rc < 0) {
    drop_copy(f); /* what an install may have loaded */
    hang_up(f, err);
    return;
  }
  f->held = true;
  f->whole = false;
  f->acked = 0;
  f->pending_ack = seq;
  f->installed = true;
  f->backoff_ms = 0;
  f->cl->next_publish = 0;
}

static bool on_line(void *ud, const char *line, size_t len) {
  scn_follow *f = ud;
  if (!line) {
    hang_up(f, "a line over --max-line");
    return false;
  }
  if (f->state != LINK_HELLO && f->state != LINK_REPLICATE &&
      (apply_raw(f, line, len) || apply_mark_raw(f, line, len)))
    return f->conn != NULL;
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
    else if (f->copy || cJSON_GetObjectItemCaseSensitive(root, "copy"))
      copy_line(f, root);
    else /* records come as the owner writes them, taken by apply_raw before any parse */
      hang_up(f, f->held ? "a line of the stream that is not a record"
                         : "a record before the copy it follows");
  }
  scn_json_heap_delete(root);
  return f->conn != NULL;
}

/* After the records of a read: the loop turn's commit writes them (the store's before_flush,
 * under this daemon's --fsync), then the last one is acknowledged. */
static void ack(scn_follow *f) {
  if (!f->conn || (f->pending_ack <= f->acked && !f->installed))
    return;
  scn_hooks_before_flush(f->cl->srv);
  if (!f->conn || !scn__fence_up(f->cl))
    return; /* not written: acknowledged with a later commit */
  char line[48];
  int n = snprintf(line, sizeof line, "{\"ack\":%llu}\n", (unsigned long long)f->pending_ack);
  f->acked = f->pending_ack;
  f->installed = false;
  send_bytes(f, line, (size_t)n);
}

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(size);
  buf->len = buf->base ? size : 0;
}

static bool tls_plain(void *ud, const char *data, size_t len) {
  fconn *fc = ud;
  return fc->f && scn_framer_feed(&fc->framer, data, len, on_line, fc->f) && fc->f;
}

/* Ciphertext from the owner: the handshake goes on (hello, kept until it is done, then goes),
 * and the plaintext's lines are run. False when the link went away. */
static bool tls_read(fconn *fc, const char *data, size_t len) {
  scn_follow *f = fc->f;
  bool was = scn_tls_established(fc->tls);
  scn_tls_status st = scn_tls_input(fc->tls, data, len, tls_plain, fc);
  if (!fc->f)
    return false;
  if (st == SCN_TLS_FAILED || st == SCN_TLS_CLOSED) {
    char why[160], what[128];
    snprintf(why, sizeof why, "TLS with the owner: %s",
             st == SCN_TLS_CLOSED ? "it closed the session"
                                  : scn_tls_describe(fc->tls, what, sizeof what));
    tls_flush(f); /* an alert for the owner, as far as it goes */
    hang_up(f, why);
    return false;
  }
  tls_flush(f);
  if (!was && fc->f && scn_tls_established(fc->tls) && fc->early.len) {
    scn_buf early = fc->early;
    fc->early = (scn_buf){0};
    send_bytes(f, early.data, early.len);
    scn_buf_free(&early);
  }
  return fc->f != NULL && st == SCN_TLS_OK;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  fconn *fc = s->data;
  scn_follow *f = fc->f;
  if (f && n < 0)
    hang_up(f, n == UV_EOF ? "the owner closed it" : uv_strerror((int)n));
  else if (f && n > 0 &&
           (fc->tls ? tls_read(fc, buf->base, (size_t)n)
                    : scn_framer_feed(&fc->framer, buf->base, (size_t)n, on_line, f)))
    ack(f);
  free(buf->base);
}

static void tls_expired(void *owner) {
  fconn *fc = owner;
  if (fc->f)
    hang_up(fc->f, "the TLS handshake with the owner timed out");
}

static void send_hello(scn_follow *f) {
  const scn_config *cfg = &f->cl->srv->cfg;
  const char *token = cfg->cluster_token[0] ? cfg->cluster_token : cfg->auth_token;
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
  /* Acks are small and each one releases sync replies on the owner: none may wait for Nagle. */
  uv_tcp_nodelay(&fc->tcp, 1);
  if (uv_read_start((uv_stream_t *)&fc->tcp, on_alloc, on_read) != 0) {
    hang_up(f, "cannot read from the owner");
    return;
  }
  if (scn_tls_on(f->cl->srv)) {
    fc->tls = scn_tls_client_new(f->cl->srv, fc->host, tls_expired, fc);
    if (!fc->tls) {
      hang_up(f, "cannot start TLS with the owner");
      return;
    }
    scn_tls_input(fc->tls, NULL, 0, tls_plain, fc); /* the ClientHello */
    tls_flush(f);
    if (!f->conn)
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
  snprintf(fc->host, sizeof fc->host, "%s", host);
  fc->gai.data = fc;
  fc->tcp.data = fc;
  /* A record's line is a request of up to --max-line bytes with what its owner recorded of it
   * (the ids it created): the bound leaves that room and more. */
  scn_framer_init(&fc->framer, (size_t)(6 * f->cl->srv->cfg.max_line + 256));
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

/* Holds the group in the store at the owner's epoch: from its own copy, or empty from seq 1;
 * or marks it as needing a whole copy (see the top of the file). */
static void hold(scn_follow *f) {
  scn_gstore *gs = f->cl->srv->gstore;
  char err[SCN_PATH_MSG_MAX];
  uint64_t epoch, seq;
  if (scn_gstore_disk_epoch(gs, f->group, &epoch) && epoch == f->epoch &&
      scn_gstore_resume(gs, f->group, f->epoch, &seq, err, sizeof err) == 0) {
    f->held = true;
    f->cl->next_publish = 0;
    return;
  }
  if (scn_gstore_on_disk(gs, f->group)) {
    if (epoch == f->epoch) /* it may have loaded some of it */
      drop_copy(f);
    scn_log(SCN_LOG_INFO, "replica: the copy here cannot go on; a whole copy is asked for",
            "group=%s epoch=%llu here=%llu", f->group, (unsigned long long)f->epoch,
            (unsigned long long)epoch);
    f->whole = true;
    return;
  }
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
  scn__copy_in_free(f->copy);
  free(f);
  memmove(&cl->follows[i], &cl->follows[i + 1], (cl->nfollows - i - 1) * sizeof *cl->follows);
  cl->nfollows--;
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
  bool found;
  size_t at = lookup(cl, f->group, &found);
  memmove(&cl->follows[at + 1], &cl->follows[at], (cl->nfollows - at) * sizeof *cl->follows);
  cl->follows[at] = f;
  cl->nfollows++;
  return f;
}

bool scn__follow_park(scn_cluster *cl, const char *group) {
  size_t i = find(cl, group);
  if (i < cl->nfollows)
    free_at(cl, i);
  scn_group_entry probe = {0};
  snprintf(probe.name, sizeof probe.name, "%s", group);
  scn_follow *f = add(cl, &probe);
  if (!f)
    return false;
  f->held = true;
  f->epoch = 0;
  f->parked_until = uv_hrtime() + (uint64_t)PARKED_MS * 1000000u;
  cl->next_publish = 0;
  return true;
}

/* A parked copy follows g once its new owner recorded its epoch naming this daemon: the copy,
 * exactly what the new owner started its epoch from, becomes that epoch's from seq 0 (its
 * files linked, scn_gstore_promote). true: f is kept (parked still, or following now). */
static bool unpark(scn_cluster *cl, const scn_group_entry *g, scn_follow *f) {
  uint64_t epoch, seq;
  if (!g || !scn_gstore_position(cl->srv->gstore, f->group, &epoch, &seq))
    return false;
  if (!g->key || !g->replicas.known || g->replicas.epoch <= 0 ||
      strcmp(g->replicas.owner, g->node) != 0)
    return uv_hrtime() < f->parked_until; /* the new owner has not recorded its epoch yet */
  char err[SCN_PATH_MSG_MAX];
  if (!wanted(cl, g) || (uint64_t)g->replicas.epoch <= epoch ||
      scn_gstore_promote(cl->srv->gstore, f->group, (uint64_t)g->replicas.epoch, err, sizeof err) !=
          0)
    return false;
  f->epoch = (uint64_t)g->replicas.epoch;
  f->parked_until = 0;
  scn_log(SCN_LOG_INFO, "replica: following a group from the copy kept at its switchover",
          "group=%s epoch=%llu owner=%s", f->group, (unsigned long long)f->epoch, g->node);
  return true;
}

void scn__follow_check(scn_cluster *cl) {
  if (cl->srv->cfg.replicas == 0)
    return;
  for (size_t i = cl->nfollows; i-- > 0;) {
    scn_group_entry *g = scn_owners_find(&cl->owners, cl->follows[i]->group);
    scn_follow *f = cl->follows[i];
    if (f->parked_until) {
      if (!unpark(cl, g, f))
        free_at(cl, i);
      continue;
    }
    if (g && kept_for_claim(cl, g, f)) {
      hang_up(f, NULL);                 /* its owner is gone */
      scn_owners_claim(&cl->owners, g); /* only as the claim rule allows (claims.c) */
      continue;
    }
    if (g && kept_for_move(cl, g, f)) {
      hang_up(f, NULL); /* its key hands it to this daemon, which loads this copy */
      continue;
    }
    if (!g || !wanted(cl, g) || (uint64_t)g->replicas.epoch != f->epoch)
      free_at(cl, i);
    else
      ack(f); /* one the fence held back (a long install or load), with nothing read since */
  }
  uint64_t now = uv_hrtime();
  for (scn_group_entry *g = scn_owners_first(&cl->owners); g; g = scn_owners_next(&cl->owners, g)) {
    if (!wanted(cl, g))
      continue;
    size_t i = find(cl, g->name);
    scn_follow *f = i < cl->nfollows ? cl->follows[i] : add(cl, g);
    if (!f || f->parked_until || now < f->retry_at)
      continue;
    if (!f->held && !f->whole)
      hold(f);
    if ((f->held || f->whole) && !f->conn)
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

bool scn__follow_tracks(const scn_cluster *cl, const scn_group_entry *g) {
  return find(cl, g->name) < cl->nfollows || names_self(cl, g);
}

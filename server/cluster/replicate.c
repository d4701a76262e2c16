/* The owner's follower links (--replicas): a follower dials the owner's protocol port and,
 * after hello, sends replicate (group, epoch, from); the connection then carries the group's
 * records from that seq on, one line each,
 *
 *   {"r":SEQ,"t":TICK,"l":LINE}     LINE: the journal record's line as it is, a JSON object
 *                                   (its bytes are scn_journal_encode(LINE), exactly what the
 *                                   owner's journal got)
 *   {"w":WORLD,"t":TICK}            a tick mark: WORLD closed TICK (after its records)
 *
 * first from the backlog (as far as the connection's output allows per loop turn), then as the
 * store's tap hands them on, and its only lines are the follower's {"ack":SEQ}. A link whose
 * output passes --output-limit, or whose place fell out of the backlog while catching up, is
 * closed: the follower dials again. A follower whose from is no longer kept, or that asks
 * from 0 (it has no copy to go on from), gets a whole copy of the group first (copy.c). */
#include "cluster/cluster_internal.h"

#include "net/conn.h"
#include "ops/json_arena.h"
#include "ops/log.h"
#include "store/groups.h"
#include "store/journal.h"
#include "store/snapshot.h"

#include <stdio.h>
#include <string.h>

static size_t out_budget(const scn_cluster *cl) {
  uint64_t limit = cl->srv->cfg.output_limit;
  return limit ? (size_t)(limit / 2) : (size_t)1 << 20;
}

static void link_close(scn_ship_link *l, const char *why) {
  scn_conn *c = l->conn;
  if (!c)
    return;
  scn_log(SCN_LOG_INFO, "replica: closing a follower's link",
          "group=%s node=%s conn=%llu "
          "sent=%llu acked=%llu reason=\"%s\"",
          l->ship->group, l->node[0] ? l->node : "-", (unsigned long long)c->id,
          (unsigned long long)l->sent, (unsigned long long)l->acked, why);
  c->repl = NULL;
  l->conn = NULL;
  scn__copy_out_free(l);
  scn_conn_close(c);
}

/* The record's line goes as it is, a JSON object in the stream's line ("l":{...}), not as an
 * escaped string: the follower takes its bytes back verbatim (follow.c), and neither side
 * escapes nor parses it on the way. The bytes are the tap's, made here: their header is
 * checked, their checksum was computed when they were made. */
static void write_record(scn_ship_link *l, uint64_t seq, uint64_t tick, const char *bytes,
                         size_t len) {
  const char *line;
  size_t n;
  if (!scn_journal_line(bytes, len, &line, &n) || n == 0) {
    link_close(l, "a record kept here is damaged");
    return;
  }
  scn_buf *out = &l->conn->out.bytes;
  scn_buf_adds(out, "{\"r\":");
  scn_buf_add_u64(out, seq);
  scn_buf_adds(out, ",\"t\":");
  scn_buf_add_u64(out, tick);
  scn_buf_adds(out, ",\"l\":");
  scn_buf_add(out, line, n);
  scn_buf_adds(out, "}\n");
  if (l->sent == l->acked)
    l->unacked_since = uv_hrtime();
  l->sent = seq;
  scn_conn_schedule_flush(l->conn);
}

/* Records queued for a link beyond this go before the turn ends (scn__links_push): a turn that
 * runs many commands does not make the follower wait for all of them. */
#define PUSH_BYTES 32768

static void want_push(scn_cluster *cl, scn_conn *c) {
  for (size_t i = 0; i < cl->npush; i++)
    if (cl->push[i] == c)
      return;
  if (cl->npush < SCN_SHIP_LINKS)
    cl->push[cl->npush++] = c;
}

void scn__links_record(scn_cluster *cl, scn_ship *s, uint64_t seq, uint64_t tick, const char *bytes,
                       size_t len) {
  for (size_t i = 0; i < SCN_SHIP_LINKS; i++) {
    scn_ship_link *l = &s->links[i];
    if (!l->conn || l->next)
      continue; /* free, or catching up from the backlog (which has this record) */
    if (scn_conn_queued(l->conn) > 2 * out_budget(cl)) {
      link_close(l, "the follower does not keep up (output limit)");
      continue;
    }
    write_record(l, seq, tick, bytes, len);
    if (l->conn && scn_outq_size(&l->conn->out) >= PUSH_BYTES)
      want_push(cl, l->conn);
  }
}

void scn__links_push(scn_cluster *cl) {
  /* Between commands: the flush's before_flush hooks commit the journal first, as at the end of
   * a turn. */
  while (cl->npush) {
    scn_conn *c = cl->push[--cl->npush];
    if (!scn_conn_gone(c))
      scn_conn_flush(c);
  }
}

/* A tick mark for each link of s that has caught up (one still reading the backlog gets none:
 * the ticks of the records it is sent close the follower's ticks up to theirs). Marks, like
 * records, do not pile up for a follower that does not read them. */
static void write_mark(scn_cluster *cl, scn_ship *s, const char *world, uint64_t closed) {
  for (size_t i = 0; i < SCN_SHIP_LINKS; i++) {
    scn_ship_link *l = &s->links[i];
    if (!l->conn || l->next || l->copy || scn_conn_gone(l->conn))
      continue;
    if (scn_conn_queued(l->conn) > 2 * out_budget(cl)) {
      link_close(l, "the follower does not keep up (output limit)");
      continue;
    }
    scn_buf *out = &l->conn->out.bytes;
    scn_buf_adds(out, "{\"w\":");
    scn_buf_add_json_string(out, world, strlen(world));
    scn_buf_adds(out, ",\"t\":");
    scn_buf_add_u64(out, closed);
    scn_buf_adds(out, "}\n");
    scn_conn_schedule_flush(l->conn);
  }
}

void scn__links_tick(scn_cluster *cl) {
  if (cl->nships == 0)
    return;
  scn_scene *scene = cl->srv->scene;
  scn_ship *s = NULL;
  for (size_t i = 0; i < scn_world_count(scene); i++) {
    scn_world *w = scn_world_at(scene, i);
    const char *name = scn_world_name(w);
    if (!s || !scn_world_in_group(name, s->group)) {
      char group[SCN_NAME_MAX + 1];
      scn_group_of(name, group);
      if (!(s = scn__ship_find(cl, group)))
        continue;
    }
    write_mark(cl, s, name, scn_world_tick(w) - 1);
  }
}

void scn__links_close(scn_ship *s) {
  for (size_t i = 0; i < SCN_SHIP_LINKS; i++)
    link_close(&s->links[i], "the group's history here ended (dropped, or a new epoch)");
}

static void pump(scn_cluster *cl, scn_ship_link *l) {
  if (l->copy) {
    scn_copy_progress p = scn__copy_out_pump(cl, l, out_budget(cl));
    if (p == SCN_COPY_FAILED)
      link_close(l, "its copy of the group could not be sent");
    uint64_t epoch, seq;
    if (p == SCN_COPY_DONE && scn_gstore_position(cl->srv->gstore, l->ship->group, &epoch, &seq) &&
        seq + 1 == l->next)
      l->next = 0; /* nothing was written since the copy */
    if (p != SCN_COPY_DONE || !l->next)
      return;
  }
  size_t at;
  scn_backlog_from where = scn_backlog_find(&l->ship->backlog, l->next, &at);
  if (where != SCN_BACKLOG_OK) {
    link_close(l, "its place fell out of the backlog while catching up");
    return;
  }
  size_t budget = out_budget(cl);
  while (l->conn && at < l->ship->backlog.n && scn_conn_queued(l->conn) < budget) {
    const scn_backlog_rec *r = scn_backlog_at(&l->ship->backlog, at++);
    write_record(l, r->seq, r->tick, r->bytes, r->len);
    l->next = r->seq + 1;
  }
  if (l->conn && at == l->ship->backlog.n)
    l->next = 0; /* caught up: the tap's records go at once from now on */
}

void scn__links_pump(scn_cluster *cl) {
  for (size_t i = 0; i < cl->nships; i++)
    for (size_t k = 0; k < SCN_SHIP_LINKS; k++) {
      scn_ship_link *l = &cl->ships[i]->links[k];
      if (l->conn && l->next && !scn_conn_gone(l->conn))
        pump(cl, l);
    }
}

void scn__links_conn_closed(scn_cluster *cl, scn_conn *c) {
  for (size_t i = 0; i < cl->npush; i++)
    if (cl->push[i] == c)
      cl->push[i] = cl->push[--cl->npush];
  scn_ship_link *l = c->repl;
  if (!l)
    return;
  c->repl = NULL;
  l->conn = NULL;
  scn__copy_out_free(l);
}

int scn_cluster_replicate(scn_cluster *cl, scn_conn *c, const char *group, const char *node,
                          uint64_t epoch, uint64_t from, uint64_t *last, int *code, char *msg,
                          size_t msglen) {
  *code = SCN_W_BAD_REQUEST;
  if (cl->srv->cfg.replicas == 0) {
    snprintf(msg, msglen, "replicate needs --replicas (this daemon keeps no records to ship)");
    return -1;
  }
  if (c->repl) {
    snprintf(msg, msglen, "this connection streams a group already");
    return -1;
  }
  uint64_t here_epoch, seq;
  scn_group_entry *g = scn_owners_find(&cl->owners, group);
  if (!g || (g->state != SCN_GROUP_OWNED && g->state != SCN_GROUP_FROZEN) ||
      !scn_gstore_position(cl->srv->gstore, group, &here_epoch, &seq)) {
    *code = SCN_W_UNAVAILABLE;
    snprintf(msg, msglen, "group %s is not served here", group);
    return -1;
  }
  if (epoch != here_epoch) {
    snprintf(msg, msglen, "group %s is in epoch %llu here, not %llu (a snapshot is needed)", group,
             (unsigned long long)here_epoch, (unsigned long long)epoch);
    return -1;
  }
  if (from > seq + 1) {
    snprintf(msg, msglen, "group %s has records up to %llu here: from %llu is ahead", group,
             (unsigned long long)seq, (unsigned long long)from);
    return -1;
  }
  scn_ship *s = scn__ship_get(cl, group);
  if (!s) {
    *code = SCN_W_UNAVAILABLE;
    snprintf(msg, msglen, "group %s: no backlog can be kept here (out of memory)", group);
    return -1;
  }
  if (s->epoch != epoch) {
    scn__links_close(s);
    scn_backlog_clear(&s->backlog);
    s->epoch = epoch;
  }
  size_t at;
  /* From 1 in an epoch that began from a copy (a takeover's, a switchover's, a load): its
   * records alone rebuild nothing, so a follower starting empty gets the whole copy too. */
  bool copy = from == 0 || (from == 1 && !scn_gstore_began_empty(cl->srv->gstore, group)) ||
              (from <= seq && scn_backlog_find(&s->backlog, from, &at) != SCN_BACKLOG_OK);
  scn_ship_link *l = NULL;
  for (size_t i = 0; !l && i < SCN_SHIP_LINKS; i++)
    if (!s->links[i].conn)
      l = &s->links[i];
  if (!l) {
    *code = SCN_W_LIMIT;
    snprintf(msg, msglen, "group %s streams to %d links already", group, SCN_SHIP_LINKS);
    return -1;
  }
  *l = (scn_ship_link){
      .ship = s, .conn = c, .next = from <= seq ? from : 0, .sent = from - 1, .acked = from - 1};
  snprintf(l->node, sizeof l->node, "%s", node ? node : "");
  if (copy) {
    uint64_t at_seq;
    *l = (scn_ship_link){.ship = s, .conn = c};
    snprintf(l->node, sizeof l->node, "%s", node ? node : "");
    if (scn__copy_out_start(cl, l, &at_seq, msg, msglen) != 0) {
      *l = (scn_ship_link){0};
      *code = SCN_W_UNAVAILABLE;
      return -1;
    }
    l->next = at_seq + 1; /* the records written meanwhile come from the backlog */
    l->installing = true;
    l->install_seq = at_seq;
  }
  c->repl = l;
  *last = seq;
  scn_log(SCN_LOG_INFO, "replica: a follower's link",
          "group=%s node=%s conn=%llu epoch=%llu "
          "from=%llu last=%llu copy=%s",
          group, l->node[0] ? l->node : "-", (unsigned long long)c->id, (unsigned long long)epoch,
          (unsigned long long)from, (unsigned long long)seq, copy ? "yes" : "no");
  return 0;
}

/* The follower's ack as follow.c writes it, {"ack":SEQ} (digits alone, no spaces): read
 * without parsing JSON, as one comes for every read of the follower. false when the line has
 * another form (it is then read as JSON). */
static bool ack_of(const char *line, size_t len, double *v) {
  static const char head[] = "{\"ack\":";
  size_t n = sizeof head - 1;
  if (len < n + 2 || len > n + 16 || memcmp(line, head, n) != 0 || line[len - 1] != '}')
    return false;
  uint64_t x = 0;
  for (size_t i = n; i < len - 1; i++) {
    if (line[i] < '0' || line[i] > '9')
      return false;
    x = x * 10 + (uint64_t)(line[i] - '0');
  }
  *v = (double)x;
  return true;
}

void scn_cluster_repl_line(scn_cluster *cl, scn_conn *c, const char *line, size_t len) {
  scn_ship_link *l = c->repl;
  if (!line || !l) {
    if (l)
      link_close(l, "a line over --max-line");
    return;
  }
  double v;
  cJSON *root = NULL;
  if (!ack_of(line, len, &v)) {
    root = scn_json_heap_parse(line, len);
    const cJSON *ack = cJSON_GetObjectItemCaseSensitive(root, "ack");
    v = cJSON_IsNumber(ack) ? ack->valuedouble : -1;
  }
  if (v < (double)l->acked || v > (double)l->sent || v != (double)(uint64_t)v)
    link_close(l, "a line that is not an ack of a record sent");
  else if ((uint64_t)v > l->acked || (l->installing && (uint64_t)v >= l->install_seq)) {
    if ((uint64_t)v >= l->install_seq)
      l->installing = false; /* the whole copy is installed there */
    l->acked = (uint64_t)v;
    l->unacked_since = l->acked == l->sent ? 0 : uv_hrtime();
    scn__sync_check(cl);
    scn__switch_check(cl);
    scn__release_go_on(cl);
  }
  if (root)
    scn_json_heap_delete(root);
}

static bool late(const scn_cluster *cl, const scn_ship_link *l, uint64_t now) {
  return l->sent > l->acked && now - l->unacked_since > cl->srv->cfg.replica_timeout_ms * 1000000;
}

bool scn__link_caught_up(const scn_ship_link *l, uint64_t last) {
  return l->conn && !l->next && !l->installing && l->sent == last && l->acked == last;
}

bool scn__links_behind(scn_cluster *cl, const char *group, uint64_t last) {
  scn_ship *s = scn__ship_find(cl, group);
  for (size_t i = 0; s && i < SCN_SHIP_LINKS; i++)
    if (s->links[i].conn && !scn__link_caught_up(&s->links[i], last))
      return true;
  return false;
}

bool scn__links_insync(scn_cluster *cl, const char *group, const char *node, bool was,
                       uint64_t last) {
  scn_ship *s = scn__ship_find(cl, group);
  if (!s)
    return false;
  uint64_t now = uv_hrtime();
  for (size_t i = 0; i < SCN_SHIP_LINKS; i++) {
    scn_ship_link *l = &s->links[i];
    if (!l->conn || l->next || l->installing || strcmp(l->node, node) != 0)
      continue;
    if (was) {
      l->join_from = 0; /* a member: its acks are waited for as one */
      return !late(cl, l, now);
    }
    if (late(cl, l, now))
      l->join_from = 0;
    else if (!l->join_from)
      l->join_from = last + 1;
    return scn__link_caught_up(l, last) || (l->join_from && l->acked >= l->join_from);
  }
  return false;
}

bool scn__links_joining(scn_cluster *cl, scn_ship *s) {
  uint64_t now = uv_hrtime();
  bool joining = false;
  for (size_t i = 0; i < SCN_SHIP_LINKS; i++) {
    scn_ship_link *l = &s->links[i];
    if (l->conn && !l->next && l->join_from && late(cl, l, now))
      l->join_from = 0;
    joining = joining || (l->conn && !l->next && l->join_from);
  }
  return joining;
}

bool scn__links_joining_lacks(scn_cluster *cl, scn_ship *s, uint64_t seq) {
  uint64_t now = uv_hrtime();
  bool lacks = false;
  for (size_t i = 0; i < SCN_SHIP_LINKS; i++) {
    scn_ship_link *l = &s->links[i];
    if (!l->conn || l->next || !l->join_from || l->acked >= seq)
      continue;
    if (late(cl, l, now))
      l->join_from = 0; /* not recorded in sync: nothing relies on it yet */
    else
      lacks = true;
  }
  return lacks;
}

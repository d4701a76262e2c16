/* Sync replies (--replicas N >= 1 with --durability sync): a command that made a record of a
 * group with in-sync followers shuts a gate in its connection's output where its reply goes
 * (net/conn.h); the reply and whatever the connection queues after it wait until every member
 * of the group's recorded in-sync set has acknowledged that record, while what was queued
 * before it (earlier replies, events) leaves at once. The connection goes on reading and running
 * commands (its output budget bounds it), so many writes are in flight and their replies leave
 * in order as acks come. Each group's waits are kept in seq order, so a check pops only what
 * the acks released. The in-sync set is read from the cache, so a follower that left it releases
 * what waited on it only once etcd has recorded that. */
#include "cluster/cluster_internal.h"

#include "net/conn.h"
#include "ops/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The recorded in-sync set of g (the ship's group) in this ship's epoch (none for another
 * epoch). */
static const scn_replica_set *insync_in(const scn_group_entry *g, const scn_ship *s) {
  if (!g || !g->replicas.known || (uint64_t)g->replicas.epoch != s->epoch ||
      g->replicas.ninsync == 0)
    return NULL;
  return &g->replicas;
}

/* The highest seq node acknowledged for s (0: no link). */
static uint64_t acked_by(const scn_ship *s, const char *node) {
  uint64_t best = 0;
  for (size_t i = 0; i < SCN_SHIP_LINKS; i++) {
    const scn_ship_link *l = &s->links[i];
    if (l->conn && strcmp(l->node, node) == 0 && l->acked > best)
      best = l->acked;
  }
  return best;
}

static const scn_replica_set *insync_of(scn_cluster *cl, const scn_ship *s) {
  return insync_in(scn_owners_find(&cl->owners, s->group), s);
}

/* Whether g's replicas key still holds another epoch's in-sync set (a takeover's, until this
 * owner records its own) with a member other than this daemon: that member may claim the group
 * from a copy that lacks what this owner answers, so an ok waits until the key is this
 * epoch's. */
static bool stale_insync(const scn_cluster *cl, const scn_group_entry *g, const scn_ship *s) {
  bool stale = false;
  for (uint8_t i = 0;
       g && g->replicas.known && (uint64_t)g->replicas.epoch != s->epoch && i < g->replicas.ninsync;
       i++)
    stale |= strcmp(g->replicas.insync[i], cl->self.node) != 0;
  return stale;
}

void scn__sync_command(scn_cluster *cl, scn_conn *c) { cl->sync_conn = c; }

static scn_sync_queue *queue_of(scn_cluster *cl, const char *group) {
  for (size_t i = 0; i < cl->nsqueues; i++)
    if (strcmp(cl->squeues[i].group, group) == 0)
      return &cl->squeues[i];
  scn_sync_queue *grown =
      scn_array_grow(cl->squeues, &cl->squeues_cap, sizeof *grown, cl->nsqueues + 1);
  if (!grown)
    return NULL;
  cl->squeues = grown;
  scn_sync_queue *q = &cl->squeues[cl->nsqueues++];
  *q = (scn_sync_queue){0};
  snprintf(q->group, sizeof q->group, "%s", group);
  return q;
}

/* A connection whose oks can no longer be acknowledged by the followers: they are never sent. */
static void fail_conn(scn_conn *c) {
  if (scn_conn_gone(c))
    return;
  scn_log(SCN_LOG_WARN, "replica: closing a connection whose writes cannot be acknowledged",
          "conn=%llu peer=%s", (unsigned long long)c->id, c->peer);
  scn_conn_drop_gated(c);
  scn_outq_clear(&c->out);
  scn_conn_close(c);
}

static void fail_queue(scn_sync_queue *q) {
  /* Closing a connection takes its other waits out of the queues (scn__sync_conn_closed). */
  while (q->head < q->n)
    fail_conn(q->w[q->head++].conn);
  q->head = q->n = 0;
}

/* The gate shut where c's output ends now, if there is one (0: none). */
static uint64_t gate_here(const scn_conn *c) {
  if (c->ngates == 0)
    return 0;
  const scn_conn_gate *g = &c->gates[c->ngates - 1];
  return g->bytes == c->out.bytes.len && g->segs == c->out.nsegs ? c->gates_base + c->ngates - 1
                                                                 : 0;
}

void scn__sync_record(scn_cluster *cl, scn_ship *s, const scn_group_entry *g, uint64_t seq) {
  scn_conn *c = cl->sync_conn;
  if (!c || c->repl || scn_conn_gone(c))
    return;
  /* Under the group's own durability (the daemon's --durability unless it was created with
   * one); g is the group's cache entry. */
  if (scn__entry_durability(cl, g) != SCN_DURABILITY_SYNC)
    return;
  if (!insync_in(g, s) && !scn__links_joining(cl, s) && !stale_insync(cl, g, s)) {
    cl->stats.replica_alone++;
    return;
  }
  scn_sync_queue *q = queue_of(cl, s->group);
  if (q && q->n > q->head && q->epoch != s->epoch)
    fail_queue(q);
  if (q)
    q->epoch = s->epoch;
  uint64_t here = gate_here(c);
  if (q && here && q->n > q->head) {
    scn_sync_wait *last = &q->w[q->n - 1];
    if (last->conn == c && last->gate == here) {
      last->seq = seq; /* one command, several records: the last covers the others */
      return;
    }
  }
  if (q && q->head > 0 && q->n == q->cap) { /* reuse the room of what was released */
    memmove(q->w, q->w + q->head, (q->n - q->head) * sizeof *q->w);
    q->n -= q->head;
    q->head = 0;
  }
  scn_sync_wait *grown = q ? scn_array_grow(q->w, &q->cap, sizeof *grown, q->n + 1) : NULL;
  uint64_t gate = grown ? scn_conn_gate_shut(c) : 0;
  if (grown)
    q->w = grown;
  if (!gate) {
    /* Nothing to hold it by: the ok must not leave unacknowledged. */
    fail_conn(c);
    return;
  }
  q->w[q->n++] = (scn_sync_wait){.conn = c, .gate = gate, .seq = seq};
}

/* Opens the gates of q's waits that every in-sync member has acknowledged (all of them when
 * the set has none left); false when q's group history here ended (its waits failed). */
static bool release(scn_cluster *cl, scn_sync_queue *q) {
  scn_ship *s = scn__ship_find(cl, q->group);
  if (!s || s->epoch != q->epoch) {
    fail_queue(q);
    return false;
  }
  if (stale_insync(cl, scn_owners_find(&cl->owners, s->group), s))
    return true;
  const scn_replica_set *rs = insync_of(cl, s);
  uint64_t upto = UINT64_MAX;
  for (uint8_t i = 0; rs && i < rs->ninsync; i++) {
    uint64_t a = acked_by(s, rs->insync[i]);
    upto = a < upto ? a : upto;
  }
  /* A follower joining the in-sync set must hold every ok given from then on. */
  while (q->head < q->n && q->w[q->head].seq <= upto &&
         !scn__links_joining_lacks(cl, s, q->w[q->head].seq)) {
    scn_sync_wait *w = &q->w[q->head++];
    scn_conn_gate_open(w->conn, w->gate);
  }
  if (q->head == q->n)
    q->head = q->n = 0;
  return true;
}

void scn__sync_check_changed(scn_cluster *cl) {
  cl->sync_conn = NULL;
  /* Only acks (which check at once) and the cache's in-sync sets release waits: before each
   * flush there is something to do only when the cache moved since the last check. */
  if (cl->nsqueues && cl->owners.revision != cl->sync_checked_rev)
    scn__sync_check(cl);
}

void scn__sync_check(scn_cluster *cl) {
  cl->sync_conn = NULL;
  cl->sync_checked_rev = cl->owners.revision;
  size_t n = 0;
  for (size_t i = 0; i < cl->nsqueues; i++) {
    scn_sync_queue *q = &cl->squeues[i];
    if (q->n > q->head)
      release(cl, q);
    if (q->n > q->head || q->cap <= 64) {
      cl->squeues[n++] = *q; /* a group with little room kept stays, its memory reused */
      continue;
    }
    free(q->w);
  }
  cl->nsqueues = n;
}

void scn__sync_release(scn_cluster *cl, const char *group) {
  for (size_t i = 0; i < cl->nsqueues; i++) {
    scn_sync_queue *q = &cl->squeues[i];
    if (strcmp(q->group, group) != 0)
      continue;
    while (q->head < q->n) {
      scn_sync_wait *w = &q->w[q->head++];
      scn_conn_gate_open(w->conn, w->gate);
    }
    q->head = q->n = 0;
  }
}

void scn__sync_conn_closed(scn_cluster *cl, scn_conn *c) {
  if (cl->sync_conn == c)
    cl->sync_conn = NULL;
  for (size_t i = 0; i < cl->nsqueues; i++) {
    scn_sync_queue *q = &cl->squeues[i];
    size_t n = q->head;
    for (size_t k = q->head; k < q->n; k++)
      if (q->w[k].conn != c)
        q->w[n++] = q->w[k];
    q->n = n;
  }
}

void scn__sync_free(scn_cluster *cl) {
  for (size_t i = 0; i < cl->nsqueues; i++)
    free(cl->squeues[i].w);
  free(cl->squeues);
  cl->squeues = NULL;
  cl->nsqueues = cl->squeues_cap = 0;
}

/* Sync replies (--replicas N >= 1 with --durability sync): a connection whose command made a
 * record of a group with in-sync followers keeps its output until every member of the group's
 * recorded in-sync set has acknowledged that record. The connection goes on reading and running
 * commands (its output budget bounds it), so many writes are in flight and their replies leave
 * in order once acknowledged. The in-sync set is read from the cache, so a follower that left it
 * releases what waited on it only once etcd has recorded that. This version holds the whole of a
 * connection's output (events too) until all its waits are released, not each reply by a mark
 * at its offset. */
#include "cluster/cluster_internal.h"

#include "net/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The recorded in-sync set of group in this ship's epoch, NULL when it has no member. *stale:
 * the replicas key still holds another epoch's in-sync set (a takeover's, until this owner
 * records its own) with members other than this daemon: they may claim the group from copies
 * that lack what this owner answers, so an ok waits until the key is this epoch's. */
static const scn_replica_set *insync_of(scn_cluster *cl, const scn_ship *s, bool *stale) {
  scn_group_entry *g = scn_owners_find(&cl->owners, s->group);
  *stale = false;
  for (uint8_t i = 0;
       g && g->replicas.known && (uint64_t)g->replicas.epoch != s->epoch && i < g->replicas.ninsync;
       i++)
    *stale |= strcmp(g->replicas.insync[i], cl->self.node) != 0;
  if (!g || !g->replicas.known || (uint64_t)g->replicas.epoch != s->epoch ||
      g->replicas.ninsync == 0)
    return NULL;
  return &g->replicas;
}

static bool acked_by(const scn_ship *s, const char *node, uint64_t seq) {
  for (size_t i = 0; i < SCN_SHIP_LINKS; i++) {
    const scn_ship_link *l = &s->links[i];
    if (l->conn && strcmp(l->node, node) == 0 && l->acked >= seq)
      return true;
  }
  return false;
}

/* Whether a wait may end: every in-sync member acknowledged it, or none is left. */
static bool released(scn_cluster *cl, const scn_sync_wait *w) {
  scn_ship *s = scn__ship_find(cl, w->group);
  if (!s || s->epoch != w->epoch)
    return false; /* the group's history here ended: scn__sync_check closes the connection */
  bool stale;
  const scn_replica_set *rs = insync_of(cl, s, &stale);
  if (!rs)
    return !stale;
  for (uint8_t i = 0; i < rs->ninsync; i++)
    if (!acked_by(s, rs->insync[i], w->seq))
      return false;
  return true;
}

void scn__sync_command(scn_cluster *cl, scn_conn *c) { cl->sync_conn = c; }

void scn__sync_record(scn_cluster *cl, const scn_ship *s, uint64_t seq) {
  scn_conn *c = cl->sync_conn;
  if (!c || c->repl || cl->srv->cfg.durability != SCN_DURABILITY_SYNC)
    return;
  bool stale;
  if (!insync_of(cl, s, &stale) && !stale) {
    cl->stats.replica_alone++;
    return;
  }
  for (size_t i = 0; i < cl->nwaits; i++) {
    scn_sync_wait *w = &cl->waits[i];
    if (w->conn == c && w->epoch == s->epoch && strcmp(w->group, s->group) == 0) {
      w->seq = seq; /* seqs of a group rise: the last one covers the earlier */
      return;
    }
  }
  scn_sync_wait *grown = scn_array_grow(cl->waits, &cl->waits_cap, sizeof *grown, cl->nwaits + 1);
  if (!grown) {
    /* Nothing to hold it by: the ok must not leave unacknowledged. */
    scn_outq_clear(&c->out);
    scn_conn_close(c);
    return;
  }
  cl->waits = grown;
  scn_sync_wait *w = &cl->waits[cl->nwaits++];
  *w = (scn_sync_wait){.conn = c, .epoch = s->epoch, .seq = seq};
  snprintf(w->group, sizeof w->group, "%s", s->group);
  c->sync_held = true;
}

static bool waits_on(const scn_cluster *cl, const scn_conn *c) {
  for (size_t i = 0; i < cl->nwaits; i++)
    if (cl->waits[i].conn == c)
      return true;
  return false;
}

void scn__sync_check(scn_cluster *cl) {
  cl->sync_conn = NULL;
  if (cl->nwaits == 0)
    return;
  size_t n = 0;
  for (size_t i = 0; i < cl->nwaits; i++) {
    scn_sync_wait *w = &cl->waits[i];
    scn_ship *s = scn__ship_find(cl, w->group);
    if (scn_conn_gone(w->conn))
      continue;
    if (!s || s->epoch != w->epoch) {
      /* Its oks can no longer be acknowledged by the followers: never sent. */
      scn_outq_clear(&w->conn->out);
      scn_conn_close(w->conn);
      continue;
    }
    if (!released(cl, w))
      cl->waits[n++] = *w;
  }
  size_t was = cl->nwaits;
  cl->nwaits = n;
  if (n == was)
    return;
  for (scn_conn *c = cl->srv->conns; c; c = c->next)
    if (c->sync_held && !waits_on(cl, c)) {
      c->sync_held = false;
      scn_conn_schedule_flush(c);
    }
}

void scn__sync_conn_closed(scn_cluster *cl, scn_conn *c) {
  if (cl->sync_conn == c)
    cl->sync_conn = NULL;
  size_t n = 0;
  for (size_t i = 0; i < cl->nwaits; i++)
    if (cl->waits[i].conn != c)
      cl->waits[n++] = cl->waits[i];
  cl->nwaits = n;
  c->sync_held = false;
}

void scn__sync_free(scn_cluster *cl) {
  free(cl->waits);
  cl->waits = NULL;
  cl->nwaits = cl->waits_cap = 0;
}

/* The fence: this daemon serves its groups only while the last renewal etcd confirmed (timed
 * from when it was sent) is younger than the lease's TTL less a margin. It is checked at each
 * command, before each write of a group's files, and before oks for group writes leave. */
#include "cluster/cluster_internal.h"

#include "net/conn.h"
#include "ops/log.h"

uint64_t scn__lease_end(const scn_cluster *cl) {
  return cl->self.lease && cl->confirmed ? cl->confirmed + cl->ttl_ns : 0;
}

uint64_t scn__fence_deadline(const scn_cluster *cl) {
  uint64_t end = scn__lease_end(cl);
  return end ? end - cl->margin_ns : 0;
}

bool scn__fence_up(const scn_cluster *cl) { return uv_hrtime() < scn__fence_deadline(cl); }

uint64_t scn__fence_left(const scn_cluster *cl) {
  uint64_t now = uv_hrtime(), until = scn__fence_deadline(cl);
  return now < until ? until - now : 0;
}

/* Serving at time now (uv_hrtime): registered, not released, the fence up. */
static bool serving_at(const scn_cluster *cl, uint64_t now) {
  return cl->self.registered && !cl->self.released && now < scn__fence_deadline(cl);
}

bool scn__serving(const scn_cluster *cl) { return serving_at(cl, uv_hrtime()); }

/* At each command the clock the dispatcher read when the command started stands for now: it is
 * at most a command old, never later than now, and the fence is read on the clock itself again
 * before anything the command wrote is committed or acknowledged (scn__fence_may_write,
 * scn__fence_before_flush). That saves reading the clock once more for every command. */
bool scn_cluster_serving(scn_cluster *cl, const char **why) {
  if (serving_at(cl, cl->srv->command_clock ? cl->srv->command_clock : uv_hrtime()))
    return true;
  *why = !cl->self.registered ? "this daemon is not registered with etcd yet"
         : cl->self.released  ? "this daemon is shutting down"
                              : "this daemon could not renew its lease in etcd (fenced)";
  return false;
}

/* The store asks before every write of a group's files (group NULL: the node's own). */
bool scn__fence_may_write(void *ud, const char *group) {
  scn_cluster *cl = ud;
  if (!group)
    return true; /* the node's directory is this daemon's alone (it holds its lock) */
  scn_group_entry *g = scn_owners_find(&cl->owners, group);
  /* A follower's copy is written too: its journal is the owner's records, in the owner's
   * epoch directory of this daemon's own --data. */
  return g &&
         (g->state == SCN_GROUP_OWNED || g->state == SCN_GROUP_FROZEN ||
          g->state == SCN_GROUP_CLAIMING || scn__follows(cl, group)) &&
         !cl->self.released && scn__fence_up(cl);
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
void scn__fence_before_flush(void *ud) {
  scn_cluster *cl = ud;
  if (cl->nacks == 0)
    return;
  bool fresh = scn__fence_up(cl) && !cl->self.released;
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

void scn__fence_conn_closed(void *ud, scn_conn *c) {
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

/* The cache kept in step with etcd: every key under the cluster's prefix read at once, then a
 * watch from the revision of that read; when the watch ends or cannot be trusted, the tick
 * reads everything again (sync_again). */
#include "cluster/cluster_internal.h"

#include "ops/log.h"

static void on_watch(void *ud, const scn_kv_watch_msg *m) {
  scn_cluster *cl = ud;
  switch (m->kind) {
  case SCN_WATCH_EVENTS:
    for (size_t i = 0; i < m->nevents; i++)
      scn_owners_watched(&cl->owners, &m->events[i]);
    break;
  case SCN_WATCH_ERROR:
    scn_log(SCN_LOG_WARN, "etcd: the watch sent an error", "node=%s", cl->self.node);
    cl->sync_again = true;
    break;
  case SCN_WATCH_RESYNC:
    cl->sync_again = true;
    break;
  case SCN_WATCH_ENDED:
    cl->watch = NULL;
    if (!cl->closing)
      scn_log(SCN_LOG_WARN, "etcd: the watch ended; resynchronising", "reason=\"%s\"", m->why);
    cl->sync_again = true;
    break;
  }
}

static void watch_start(scn_cluster *cl) {
  scn_etcd_cancel(cl->watch);
  cl->watch =
      scn_etcd_watch_prefix(cl->etcd, SCN_KEYS_PREFIX, cl->owners.revision + 1, on_watch, cl);
}

/* Registration's last step: the cache is read, and this daemon serves from now on. */
static void registered(scn_cluster *cl) {
  cl->step = SCN_REG_DONE;
  cl->self.registered = true;
  scn_readiness_clear(&cl->srv->readiness, SCN_UNREADY_UNREGISTERED);
  cl->next_sweep = 0;
  cl->next_publish = 0;
  scn_log(SCN_LOG_INFO, "registered in the cluster",
          "node=%s addr=%s lease=%lld ttl=%g fence_margin_s=%.2f etcd=%s nodes=%zu", cl->self.node,
          cl->self.addr, (long long)cl->self.lease, cl->ttl, (double)cl->margin_ns * 1e-9,
          scn_etcd_endpoint(cl->etcd), cl->owners.nnodes);
}

typedef struct sync_ctx {
  scn_cluster *cl;
} sync_ctx;

static void on_sync(void *ctx, const scn_kv_answer *a) {
  scn_cluster *cl = ((const sync_ctx *)ctx)->cl;
  cl->syncing = false;
  if (a->why) {
    scn_log(SCN_LOG_WARN, "etcd: cannot read the cluster's keys", "reason=\"%s\"", a->why);
    cl->sync_again = true;
    return;
  }
  bool self_seen = scn_owners_reread(&cl->owners, a->revision, a->kvs, a->nkvs);
  if (cl->self.registered && !self_seen && !cl->self.released) {
    scn__lost_lease(cl, "this node's key is gone");
    return;
  }
  watch_start(cl);
  if (cl->step == SCN_REG_SYNC)
    registered(cl);
}

void scn__sync_start(scn_cluster *cl) {
  if (cl->syncing)
    return;
  sync_ctx c = {cl};
  scn_kv_reply r = {
      .timeout_s = scn__request_timeout(cl) * 2, .done = on_sync, .ctx = &c, .ctx_size = sizeof c};
  cl->syncing = scn_etcd_range_prefix(cl->etcd, SCN_KEYS_PREFIX, &r);
  cl->sync_again = !cl->syncing;
}

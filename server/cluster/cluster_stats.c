/* The cluster's figures for /metrics and info: membership, the fence, ownership, routing, and
 * the etcd client's. */
#include "cluster/cluster_internal.h"

#include <string.h>

/* Seconds from now until t (uv_hrtime), 0 when it has passed. */
static double seconds_until(uint64_t t, uint64_t now) {
  return now < t ? (double)(t - now) * 1e-9 : 0;
}

/* The backlogs of the groups served here with followers (--replicas only): the total always,
 * one sample per group while there are few enough of them, as the per-world figures. */
static void ship_stats(scn_cluster *cl, scn_metrics_sink *k) {
  size_t bytes = 0;
  for (size_t i = 0; i < cl->nships; i++)
    bytes += cl->ships[i]->backlog.bytes;
  scn_metric(k, "replica_groups_shipped", "gauge",
             "Groups served here with followers, each keeping a backlog of its records.",
             (double)cl->nships);
  scn_metric(k, "replica_backlog_bytes_all", "gauge",
             "Bytes of records kept in the backlogs of every group served here.", (double)bytes);
  scn_metric(k, "replica_alone_total", "counter",
             "Sync writes answered at once because their group had no in-sync follower.",
             (double)cl->stats.replica_alone);
  scn_metric(k, "replica_backlog_failures_total", "counter",
             "Records a group's backlog could not keep (out of memory): the backlog emptied.",
             (double)cl->stats.ship_failures);
  scn_metric(k, "replica_copies_sent_total", "counter",
             "Whole copies of a group sent to followers the backlog no longer reached.",
             (double)cl->stats.copies_sent);
  scn_metric(k, "replica_copies_received_total", "counter",
             "Whole copies of a group received from its owner and installed.",
             (double)cl->stats.copies_received);
  if (cl->nships > SCN_METRICS_PER_WORLD_MAX)
    return;
  static const char *const names[] = {"replica_backlog_bytes", "replica_backlog_records"};
  static const char *const helps[] = {"Bytes of records in a group's backlog.",
                                      "Records in a group's backlog."};
  for (int fam = 0; fam < 2; fam++) {
    scn_metric_family(k, names[fam], "gauge", helps[fam]);
    for (size_t i = 0; i < cl->nships; i++) {
      const scn_ship *s = cl->ships[i];
      if (scn_metric_shows_world(k, s->group))
        scn_metric_sample(k, "group", s->group,
                          fam == 0 ? (double)s->backlog.bytes : (double)s->backlog.n);
    }
    scn_metric_end(k);
  }
  scn_metric_family(k, "replica_lag_changes", "gauge",
                    "Records sent to a follower's link and not yet acknowledged.");
  for (size_t i = 0; i < cl->nships; i++) {
    const scn_ship *s = cl->ships[i];
    for (size_t j = 0; j < SCN_SHIP_LINKS; j++) {
      const scn_ship_link *l = &s->links[j];
      if (l->conn && scn_metric_shows_world(k, s->group))
        scn_metric_sample2(k, "group", s->group, "node", l->node[0] ? l->node : "-",
                           (double)(l->sent - l->acked));
    }
  }
  scn_metric_end(k);
  scn_metric_family(k, "replica_lag_seconds", "gauge",
                    "How long the oldest record a follower's link has not acknowledged has "
                    "existed (0 when it acknowledged all).");
  uint64_t now = uv_hrtime();
  for (size_t i = 0; i < cl->nships; i++) {
    const scn_ship *s = cl->ships[i];
    for (size_t j = 0; j < SCN_SHIP_LINKS; j++) {
      const scn_ship_link *l = &s->links[j];
      if (l->conn && scn_metric_shows_world(k, s->group))
        scn_metric_sample2(k, "group", s->group, "node", l->node[0] ? l->node : "-",
                           (double)scn__ship_lag_ns(l, now) * 1e-9);
    }
  }
  scn_metric_end(k);
}

static bool names(const char list[][SCN_NAME_MAX + 1], uint8_t n, const char *node) {
  for (uint8_t i = 0; i < n; i++)
    if (strcmp(list[i], node) == 0)
      return true;
  return false;
}

/* This daemon's role for g (--replicas only): owner while it serves g, follower while g's
 * replicas key names it; NULL for neither. */
static const char *role_of(scn_cluster *cl, const scn_group_entry *g) {
  if (g->state == SCN_GROUP_OWNED)
    return "owner";
  const scn_replica_set *r = &g->replicas;
  return r->known && names(r->followers, r->nfollowers, cl->self.node) ? "follower" : NULL;
}

/* scened_group_role{group,role} and, for the groups owned here, scened_group_insync{group}:
 * one sample per group while there are few enough of them, as the per-world figures. */
static void role_stats(scn_cluster *cl, scn_metrics_sink *k) {
  scn_owners *o = &cl->owners;
  size_t n = 0;
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g))
    n += role_of(cl, g) != NULL;
  if (n > SCN_METRICS_PER_WORLD_MAX)
    return;
  scn_metric_family(k, "group_role", "gauge",
                    "1 for each group this daemon owns or follows, labeled with its role.");
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g)) {
    const char *role = role_of(cl, g);
    if (role && scn_metric_shows_world(k, g->name))
      scn_metric_sample2(k, "group", g->name, "role", role, 1);
  }
  scn_metric_end(k);
  scn_metric_family(k, "group_insync", "gauge",
                    "Followers in the in-sync set of each group this daemon owns.");
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g))
    if (g->state == SCN_GROUP_OWNED && scn_metric_shows_world(k, g->name))
      scn_metric_sample(
          k, "group", g->name,
          g->replicas.known && g->replicas.epoch == g->epoch ? (double)g->replicas.ninsync : 0);
  scn_metric_end(k);
}

/* The follower's side: the groups followed here and the records applied to each copy. */
static void follow_stats(scn_cluster *cl, scn_metrics_sink *k) {
  scn_metric(k, "replica_groups_followed", "gauge",
             "Groups this daemon keeps a follower's copy of.", (double)cl->nfollows);
  if (cl->nfollows > SCN_METRICS_PER_WORLD_MAX)
    return;
  scn_metric_family(k, "replica_applied_total", "counter",
                    "Records of a followed group applied here since following began.");
  for (size_t i = 0; i < cl->nfollows; i++) {
    const char *group;
    uint64_t n = scn__follow_applied(cl->follows[i], &group);
    if (scn_metric_shows_world(k, group))
      scn_metric_sample(k, "group", group, (double)n);
  }
  scn_metric_end(k);
}

void scn__collect_stats(void *ud, scn_metrics_sink *k) {
  scn_cluster *cl = ud;
  const scn_cluster_stats *s = &cl->stats;
  const scn_owner_stats *o = &cl->owners.stats;
  uint64_t now = uv_hrtime();
  scn_metric(k, "cluster_registered", "gauge", "1 while registered in etcd and not fenced.",
             scn__serving(cl));
  scn_metric(k, "cluster_nodes", "gauge", "Live nodes this daemon knows of.",
             (double)cl->owners.nnodes);
  scn_metric(k, "cluster_groups_owned", "gauge", "Groups this daemon serves.",
             (double)scn_owners_count(&cl->owners, SCN_GROUP_OWNED));
  scn_metric(k, "cluster_moves_total", "counter", "Groups this daemon moved to another node.",
             (double)o->moves);
  scn_metric(k, "cluster_moves_in_total", "counter", "Groups moved to this daemon.",
             (double)o->moves_in);
  scn_metric(k, "cluster_takeovers_total", "counter",
             "Groups this daemon took over from the data directory after their owner went.",
             (double)o->takeovers);
  scn_metric(k, "cluster_claims_total", "counter", "Claims of a group this daemon won.",
             (double)o->claims);
  scn_metric(k, "cluster_groups_lost_total", "counter",
             "Groups this daemon stopped serving without handing them over.", (double)o->lost);
  scn_metric(k, "cluster_lease_renewals_total", "counter", "Lease renewals etcd confirmed.",
             (double)s->renewals);
  scn_metric(k, "cluster_lease_renewal_failures_total", "counter", "Lease renewals that failed.",
             (double)s->renewal_failures);
  scn_metric(k, "cluster_lease_remaining_seconds", "gauge",
             "Time the lease is known to live (from the last confirmed renewal).",
             seconds_until(scn__lease_end(cl), now));
  scn_metric(k, "cluster_fence_remaining_seconds", "gauge",
             "Time until this daemon fences itself without another renewal.",
             seconds_until(scn__fence_deadline(cl), now));
  scn_metric(k, "cluster_moved_total", "counter", "Commands answered MOVED.", (double)s->moved);
  scn_metric(k, "cluster_unavailable_total", "counter", "Commands answered UNAVAILABLE.",
             (double)s->unavailable);
  if (cl->srv->cfg.replicas >= 1) {
    ship_stats(cl, k);
    role_stats(cl, k);
    follow_stats(cl, k);
  }
  const scn_etcd_stats *e = scn_etcd_get_stats(cl->etcd);
  scn_metric(k, "etcd_requests_total", "counter", "Requests sent to etcd.", (double)e->requests);
  scn_metric(k, "etcd_errors_total", "counter",
             "etcd requests that failed (transport, timeout, HTTP error, malformed reply).",
             (double)e->errors);
  scn_metric(k, "etcd_timeouts_total", "counter", "etcd requests that timed out.",
             (double)e->timeouts);
  scn_metric(k, "etcd_failovers_total", "counter", "Moves to the next etcd endpoint.",
             (double)e->failovers);
  scn_metric(k, "etcd_connections_total", "counter",
             "Connections opened to etcd (a TLS handshake each over https); requests reuse them.",
             (double)e->connections);
  scn_metric_hist(k, "etcd_request_seconds", "etcd request latency.", &e->latency);
}

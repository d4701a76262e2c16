/* Where a command on a world goes: served here, MOVED to its owner, UNAVAILABLE while nobody
 * can serve it, or WAIT while etcd is asked (a claim or a read of the group's key). */
#include "cluster/cluster_internal.h"

#include "store/groups.h"
#include "store/snapshot.h"

#include <stdio.h>
#include <string.h>

/* "auto": the live node with the fewest transforms, then the fewest worlds, then the smallest
 * name (this daemon's own figures are current, the others' as last published). */
static const scn_node_entry *place_auto(scn_cluster *cl) {
  scn_owners *o = &cl->owners;
  scn_node_entry *me = scn_owners_node(o, cl->self.node);
  if (me) {
    me->worlds = scn_world_count(cl->srv->scene);
    me->transforms = scn_scene_transform_count(cl->srv->scene);
  }
  const scn_node_entry *best = NULL;
  for (size_t i = 0; i < o->nnodes; i++) {
    const scn_node_entry *n = &o->nodes[i];
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

static scn_route_kind wait_on(scn_group_entry *g, const scn_route_request *rq, scn_route *out) {
  void *ud = rq->hold(rq->hold_arg);
  if (ud && scn_owners_wait(g, rq->wake, ud))
    return SCN_ROUTE_WAIT;
  if (ud)
    rq->drop(ud);
  return unavailable(out, "out of memory");
}

/* A group this daemon knows of: its state here, else its key, settles where the command goes
 * (*kind); false when neither does. */
static bool route_known(scn_cluster *cl, scn_group_entry *g, const scn_route_request *rq,
                        scn_route *out, scn_route_kind *kind) {
  bool may_wait = rq->wake && !rq->retry;
  /* A read after hello's follower_reads, of a group followed here: its copy answers, as far
   * as it has caught up (also while the group waits for a new owner). */
  if (rq->follower_read && g->state == SCN_GROUP_NONE && scn__follows(cl, g->name)) {
    *kind = SCN_ROUTE_LOCAL;
    return true;
  }
  switch (g->state) {
  case SCN_GROUP_OWNED:
    *kind = SCN_ROUTE_LOCAL;
    return true;
  case SCN_GROUP_CLAIMING:
    *kind = may_wait ? wait_on(g, rq, out) : unavailable(out, "the group is being claimed; retry");
    return true;
  case SCN_GROUP_FROZEN:
    *kind = unavailable(out, "the group is moving to another node; retry");
    return true;
  case SCN_GROUP_BROKEN:
    *kind = unavailable(out, "the group's data could not be loaded (see the owner's log)");
    return true;
  case SCN_GROUP_NONE:
    break;
  }
  if (!g->key) {
    /* Its replicas key says it exists, but only another daemon may claim it: it waits. */
    if (!g->replicas.known || scn__owners_may_claim(&cl->owners, g))
      return false;
    *kind = unavailable(out, "the group has no live owner; it waits for its last owner or an "
                             "in-sync follower (or world.promote)");
    return true;
  }
  *kind = strcmp(g->node, cl->self.node) != 0
              ? moved(out, g->node, g->addr)
              : unavailable(out, "the group is being loaded; retry");
  return true;
}

/* A new group: here, on the node named, or on the least loaded. */
static scn_route_kind route_new(scn_cluster *cl, const char *name, const scn_route_request *rq,
                                scn_route *out) {
  if (rq->place && strcmp(rq->place, cl->self.node) != 0) {
    const scn_node_entry *n =
        strcmp(rq->place, "auto") == 0 ? place_auto(cl) : scn_owners_node(&cl->owners, rq->place);
    if (!n)
      return SCN_ROUTE_NO_NODE;
    if (strcmp(n->name, cl->self.node) != 0)
      return moved(out, n->name, n->addr);
  }
  if (!rq->wake || rq->retry)
    return unavailable(out, "the group could not be claimed; retry");
  scn_group_entry *g = scn_owners_get(&cl->owners, name);
  if (!g)
    return unavailable(out, "out of memory");
  scn_owners_claim(&cl->owners, g);
  if (g->state != SCN_GROUP_CLAIMING)
    return unavailable(out, "the group could not be claimed; retry");
  return wait_on(g, rq, out);
}

scn_route_kind scn_cluster_route(scn_cluster *cl, const scn_route_request *rq, scn_route *out) {
  const char *why;
  if (!scn_cluster_serving(cl, &why))
    return unavailable(out, why);
  bool may_wait = rq->wake && !rq->retry;
  char name[SCN_NAME_MAX + 1];
  scn_group_of(rq->world, name);
  scn_group_entry *g = scn_owners_find(&cl->owners, name);
  scn_route_kind kind;
  if (g && route_known(cl, g, rq, out, &kind))
    return kind;
  if (scn_gstore_on_disk(cl->srv->gstore, name)) {
    /* It exists: its owner may be new (etcd is asked first), or gone (it is claimed). */
    g = scn_owners_get(&cl->owners, name);
    if (g && may_wait && scn_owners_read(&cl->owners, g))
      return wait_on(g, rq, out);
    if (g)
      scn_owners_claim(&cl->owners, g);
    return unavailable(out, "the group has no live owner yet; retry");
  }
  if (!rq->creating) {
    /* Not heard of: etcd is asked once before the answer is NOT_FOUND. */
    if (!may_wait || !(g = scn_owners_get(&cl->owners, name)) || !scn_owners_read(&cl->owners, g))
      return SCN_ROUTE_LOCAL;
    return wait_on(g, rq, out);
  }
  return route_new(cl, name, rq, out);
}

void scn_cluster_count_route(scn_cluster *cl, scn_route_kind kind) {
  if (kind == SCN_ROUTE_MOVED)
    cl->stats.moved++;
  else if (kind == SCN_ROUTE_UNAVAILABLE)
    cl->stats.unavailable++;
}

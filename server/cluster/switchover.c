/* Switchovers (--replicas N >= 1): world.move to one of the group's followers. There is no
 * shared directory to hand the group over through, so the follower's copy is what it takes:
 *   1. the group is frozen here (commands on it answer UNAVAILABLE, its clocks stand still);
 *   2. the hand-off waits until the follower's link has acknowledged the group's last record
 *      (at most --replica-timeout: then the move fails and the group is served here again);
 *   3. one txn gives the group key to the follower and rewrites the replicas key (group_keys.c);
 *   4. the follower promotes its copy (holding.c, scn_gstore_promote), says it serves the group,
 *      and the move is answered, as any move (move.c).
 * A node that does not follow the group is refused: it holds no copy to take over. */
#include "cluster/cluster_internal.h"

#include "store/groups.h"

#include <stdio.h>
#include <string.h>

static bool follows(const scn_replica_set *r, const char *node) {
  for (uint8_t i = 0; r->known && i < r->nfollowers; i++)
    if (strcmp(r->followers[i], node) == 0)
      return true;
  return false;
}

/* Whether node's link for s has acknowledged everything up to last. */
static bool caught_up(const scn_ship *s, const char *node, uint64_t epoch, uint64_t last) {
  if (!s || s->epoch != epoch)
    return false;
  for (size_t i = 0; i < SCN_SHIP_LINKS; i++) {
    const scn_ship_link *l = &s->links[i];
    if (l->conn && strcmp(l->node, node) == 0 && scn__link_caught_up(l, last))
      return true;
  }
  return false;
}

int scn__switch_start(scn_cluster *cl, const scn_move_order *order, int *code, char *msg,
                      size_t msglen) {
  scn_group_entry *g = scn_owners_find(&cl->owners, order->group);
  if (g && g->state == SCN_GROUP_OWNED && strcmp(order->to, cl->self.node) != 0 &&
      scn_owners_node(&cl->owners, order->to) && !follows(&g->replicas, order->to)) {
    scn_buf list = {0};
    for (uint8_t i = 0; g->replicas.known && i < g->replicas.nfollowers; i++) {
      scn_buf_adds(&list, i ? ", " : "");
      scn_buf_adds(&list, g->replicas.followers[i]);
    }
    scn_buf_addc(&list, '\0');
    *code = SCN_W_BAD_REQUEST;
    snprintf(msg, msglen,
             "node %s does not follow group %s (its followers: %s); with --replicas a group "
             "moves only to one of its followers",
             order->to, order->group, !list.failed && list.len > 1 ? list.data : "none");
    scn_buf_free(&list);
    return -1;
  }
  /* Caught up already (nothing runs between this and the freeze): the hand-off goes at once,
   * and a failure to send it is this call's answer. */
  uint64_t epoch, last;
  bool ready = g && !g->recording &&
               scn_gstore_position(cl->srv->gstore, order->group, &epoch, &last) &&
               caught_up(scn__ship_find(cl, order->group), order->to, epoch, last);
  scn_move_order o = *order;
  o.catch_up_limit = ready ? 0 : cl->srv->cfg.replica_timeout_ms * 1000000u;
  int rc = scn_owners_move(&cl->owners, &o, code, msg, msglen);
  if (rc == 0 && !ready)
    cl->switching++;
  return rc;
}

void scn__switch_check(scn_cluster *cl) {
  if (cl->switching == 0)
    return;
  size_t waiting = 0;
  scn_owners *o = &cl->owners;
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g)) {
    if (!g->mv || !g->mv->catching_up)
      continue;
    uint64_t epoch, last;
    /* A record of its followers in flight would change the keys the hand-off compares. */
    if (!g->recording && scn_gstore_position(cl->srv->gstore, g->name, &epoch, &last) &&
        caught_up(scn__ship_find(cl, g->name), g->mv->to, epoch, last))
      scn_owners_move_hand_off(o, g);
    else
      waiting++;
  }
  cl->switching = waiting;
}

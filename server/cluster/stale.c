/* Stale copies (--replicas N >= 1): a group on this daemon's disk that it neither owns nor
 * follows, whose replicas key says another daemon owns it at a newer epoch, or that the group
 * ended (its last world went) at the copy's epoch or later. Such a copy is removed from the
 * directory, at the sweep or before a claim loads the group, so that it never comes back. */
#include "cluster/cluster_internal.h"

#include "store/groups.h"

#include <string.h>

/* Whether g's replicas key says another daemon saw the group end at epoch or a later one: a
 * copy of epoch here may hold what went after it stopped following. (The daemon that wrote it
 * keeps its own copy: what it holds of that epoch it answered, a world made after the end
 * included.) */
static bool ended_since(const scn_cluster *cl, const scn_group_entry *g, uint64_t epoch) {
  const scn_replica_set *r = &g->replicas;
  return r->ended && epoch <= (uint64_t)r->epoch && strcmp(r->owner, cl->self.node) != 0;
}

/* Why a copy of group at epoch on this disk is stale, or NULL: the group ended since, or
 * another daemon owns it at a newer epoch. */
static const char *stale_copy(const scn_cluster *cl, const scn_group_entry *g, uint64_t epoch) {
  const scn_replica_set *r = &g->replicas;
  if (ended_since(cl, g, epoch))
    return "the group ended since";
  if (r->known && r->owner[0] && strcmp(r->owner, cl->self.node) != 0 && epoch < (uint64_t)r->epoch)
    return "a newer epoch owns it";
  return NULL;
}

bool scn__stale_forget(scn_cluster *cl, const char *group) {
  scn_gstore *gs = cl->srv->gstore;
  const scn_group_entry *g = scn_owners_find(&cl->owners, group);
  uint64_t epoch;
  const char *why;
  if (cl->srv->cfg.replicas == 0 || !g || g->state != SCN_GROUP_NONE || scn__follow_tracks(cl, g) ||
      scn_gstore_holds(gs, group) || !scn_gstore_disk_epoch(gs, group, &epoch) ||
      !(why = stale_copy(cl, g, epoch)))
    return false;
  scn_gstore_forget(gs, group, why);
  return true;
}

void scn__stale_forget_ended(scn_cluster *cl, const char *group) {
  scn_gstore *gs = cl->srv->gstore;
  const scn_group_entry *g = scn_owners_find(&cl->owners, group);
  uint64_t epoch;
  if (cl->srv->cfg.replicas >= 1 && g && !scn_gstore_holds(gs, group) &&
      scn_gstore_disk_epoch(gs, group, &epoch) && ended_since(cl, g, epoch))
    scn_gstore_forget(gs, group, "the group ended since");
}

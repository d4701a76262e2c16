/* Each group's durability (--replicas): sync or async, given by world.create for a new group or
 * taken from --durability, and fixed from then on. It is kept in the group's replicas key in
 * etcd (bound to no lease, so it outlives its owner): a follower that takes the group over, and
 * the owner coming back, read it there. Until that key is written the value world.create gave
 * is kept on the group's cache entry. */
#include "cluster/cluster_internal.h"

#include "store/snapshot.h"

#include <stdio.h>

scn_durability scn__group_durability(scn_cluster *cl, const char *group) {
  return scn__entry_durability(cl, scn_owners_find(&cl->owners, group));
}

scn_durability scn__entry_durability(const scn_cluster *cl, const scn_group_entry *g) {
  if (g && g->created_durability)
    return (scn_durability)(g->created_durability - 1);
  if (g && g->replicas.known)
    return (scn_durability)g->replicas.durability;
  return (scn_durability)cl->srv->cfg.durability;
}

static const char *name_of(int durability) {
  return durability == SCN_DURABILITY_ASYNC ? "async" : "sync";
}

int scn_cluster_create_durability(scn_cluster *cl, const char *world, int durability,
                                  bool group_new, char *msg, size_t msglen) {
  char group[SCN_NAME_MAX + 1];
  scn_group_of(world, group);
  scn_group_entry *g = scn_owners_find(&cl->owners, group);
  if (!group_new) {
    int now = scn__group_durability(cl, group);
    if (now == durability)
      return 0;
    snprintf(msg, msglen,
             "group %s has durability \"%s\", fixed when it was created; \"durability\" may be "
             "given only for a new group (or as the group's own)",
             group, name_of(now));
    return -1;
  }
  if (!g) {
    snprintf(msg, msglen, "group %s is not held here", group);
    return -1;
  }
  g->created_durability = (int8_t)(1 + durability);
  return 0;
}

/* The ownership core's side of replicas: which nodes a group's followers should be, from the
 * cache alone (no etcd, store or loop), so tests drive it with made-up keys. */
#include "cluster/owners.h"

#include <string.h>

bool scn_owners_follows(const scn_group_entry *g, const char *node, bool in_sync) {
  size_t n = in_sync ? g->ninsync : g->nfollowers;
  for (size_t i = 0; i < n; i++)
    if (strcmp(in_sync ? g->insync[i] : g->followers[i], node) == 0)
      return true;
  return false;
}

/* Groups the node owns or follows, as the cache knows them. */
static size_t groups_of(scn_owners *o, const char *node) {
  size_t n = 0;
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g))
    n += (g->key && strcmp(g->node, node) == 0) || scn_owners_follows(g, node, false);
  return n;
}

typedef struct candidate {
  const scn_node_entry *node;
  size_t load;
} candidate;

static bool before(const candidate *a, const candidate *b) {
  return a->load != b->load ? a->load < b->load : strcmp(a->node->name, b->node->name) < 0;
}

size_t scn_owners_choose_followers(scn_owners *o, const scn_group_entry *g, size_t want,
                                   char out[][SCN_NAME_MAX + 1]) {
  if (want > SCN_REPLICAS_MAX)
    want = SCN_REPLICAS_MAX;
  /* The best want candidates so far, kept sorted: a few among the cluster's nodes. */
  candidate best[SCN_REPLICAS_MAX];
  size_t nbest = 0;
  for (size_t i = 0; i < o->nnodes && want > 0; i++) {
    const scn_node_entry *n = &o->nodes[i];
    if (strcmp(n->name, g->key ? g->node : o->self->node) == 0 ||
        scn_owners_follows(g, n->name, false))
      continue;
    candidate c = {n, groups_of(o, n->name)};
    size_t at = nbest;
    while (at > 0 && before(&c, &best[at - 1]))
      at--;
    if (at >= want)
      continue;
    size_t keep = nbest < want ? nbest : want - 1;
    memmove(&best[at + 1], &best[at], (keep - at) * sizeof best[0]);
    best[at] = c;
    nbest = keep + 1;
  }
  for (size_t i = 0; i < nbest; i++)
    memcpy(out[i], best[i].node->name, sizeof out[i]);
  return nbest;
}

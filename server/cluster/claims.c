/* Claims and takeovers: a group without an owner is raced for, a key that names this daemon
 * is loaded, a group whose key went elsewhere is lost (see owners.h). */
#include "cluster/owners.h"

#include "ops/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void scn__owners_unload(scn_owners *o, scn_group_entry *g, const char *to, const char *to_addr) {
  o->ops.drop(o->ops.ud, g->name, to ? to : "", to_addr ? to_addr : "");
  g->state = SCN_GROUP_NONE;
  g->epoch = 0;
}

/* Loads a group this daemon got at epoch; it serves it once the store has written the new
 * epoch's first snapshot. old_owner: who had it (NULL: nobody, "" unknown), for the log and
 * the takeover count. */
static bool take(scn_owners *o, scn_group_entry *g, int64_t epoch, const char *old_owner,
                 scn_arrival how) {
  bool existed = o->ops.on_disk(o->ops.ud, g->name);
  scn_group_state before = g->state;
  g->state = SCN_GROUP_CLAIMING; /* the store's writes are allowed while loading */
  scn_load_result loaded = o->ops.load(o->ops.ud, g->name, epoch, how);
  if (loaded == SCN_LOAD_NOT_NOW) {
    g->state = before; /* adopted once the fence is renewed (scn_owners_adopt_pending) */
    return false;
  }
  if (loaded != SCN_LOADED) {
    scn__owners_unload(o, g, NULL, NULL);
    g->state = loaded == SCN_LOAD_OUTRAN ? SCN_GROUP_NONE : SCN_GROUP_BROKEN;
    return false;
  }
  g->state = SCN_GROUP_OWNED;
  g->epoch = epoch;
  if (existed && old_owner)
    o->stats.takeovers++;
  scn__owners_log_owner(g, old_owner, o->self->node, epoch);
  o->ops.load_changed(o->ops.ud);
  return true;
}

void scn__owners_lose(scn_owners *o, scn_group_entry *g, const char *why) {
  if (g->state == SCN_GROUP_NONE)
    return;
  scn_log(SCN_LOG_WARN, "group lost", "group=%s reason=\"%s\"", g->name, why);
  o->stats.lost++;
  scn__owners_unload(o, g, g->key ? g->node : "", g->key ? g->addr : "");
  scn__owners_log_owner(g, o->self->node, g->key ? g->node : "", g->key ? g->mod_rev : 0);
  if (g->mv)
    scn__owners_move_failed(g, "the group was lost during the move");
  scn_owners_wake(g);
}

void scn_owners_lose_all(scn_owners *o, const char *why) {
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g))
    if (g->state != SCN_GROUP_NONE) {
      g->key = false; /* bound to the lease that is gone */
      scn__owners_lose(o, g, why);
      g->state = SCN_GROUP_NONE;
    }
}

/* The key names this daemon with its lease, and the group is not loaded: handed over by a
 * move (or claimed by a txn whose answer was lost). This daemon loads it, then says it serves
 * it (a put without "from"), which is what the mover waits for. */
void scn__owners_adopt(scn_owners *o, scn_group_entry *g, const char *old_owner) {
  if (g->state != SCN_GROUP_NONE || g->lease != o->self->lease || !o->ops.serving(o->ops.ud))
    return;
  bool handoff = g->handoff;
  if (!take(o, g, g->mod_rev, old_owner, handoff ? SCN_ARRIVED_BY_MOVE : SCN_ARRIVED_BY_CLAIM) ||
      !handoff)
    return;
  o->stats.moves_in++;
  o->ops.send_served(o->ops.ud, g->name, g->mod_rev);
}

void scn_owners_adopt_pending(scn_owners *o) {
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g))
    if (g->key && g->state == SCN_GROUP_NONE && strcmp(g->node, o->self->node) == 0)
      scn__owners_adopt(o, g, g->prev[0] ? g->prev : NULL);
}

static bool in_set(const char (*set)[SCN_NAME_MAX + 1], uint8_t n, const char *node) {
  for (uint8_t i = 0; i < n; i++)
    if (strcmp(set[i], node) == 0)
      return true;
  return false;
}

/* With replicas, a member of the group's in-sync set holds everything its owner answered, so
 * only a member claims the group, or wait for one (or world.promote) when none is live. With
 * the set empty only the last owner holds it all: it alone claims, returning with its data. A
 * key that does not name its owner (written before it did) leaves the claim open as before. */
bool scn__owners_may_claim(scn_owners *o, const scn_group_entry *g) {
  const scn_replica_set *r = &g->replicas;
  if (!r->known)
    return true;
  if (r->ninsync == 0)
    return !r->owner[0] || strcmp(r->owner, o->self->node) == 0;
  return in_set(r->insync, r->ninsync, o->self->node);
}

void scn_owners_claim(scn_owners *o, scn_group_entry *g) {
  if (g->state != SCN_GROUP_NONE || g->key || !o->ops.serving(o->ops.ud) ||
      !scn__owners_may_claim(o, g))
    return;
  if (o->ops.send_claim(o->ops.ud, g->name))
    g->state = SCN_GROUP_CLAIMING;
}

void scn_owners_claim_unowned(scn_owners *o, const char *group) {
  scn_group_entry *g = scn_owners_get(o, group);
  if (g && !g->key && g->state == SCN_GROUP_NONE)
    scn_owners_claim(o, g);
}

/* The claim won at epoch: the key names this daemon now. */
static void claim_won(scn_owners *o, scn_group_entry *g, int64_t epoch) {
  char old[SCN_NAME_MAX + 1];
  snprintf(old, sizeof old, "%s", g->key ? g->node : g->prev);
  g->key = true;
  snprintf(g->node, sizeof g->node, "%s", o->self->node);
  snprintf(g->addr, sizeof g->addr, "%s", o->self->addr);
  g->lease = o->self->lease;
  g->mod_rev = epoch;
  g->handoff = false;
  o->stats.claims++;
  if (epoch <= 0 || !o->ops.serving(o->ops.ud)) {
    scn_log(SCN_LOG_WARN, "a claim succeeded but cannot be served now", "group=%s", g->name);
    return;
  }
  bool existed = o->ops.on_disk(o->ops.ud, g->name);
  take(o, g, epoch, existed ? old : NULL, SCN_ARRIVED_BY_CLAIM);
}

void scn_owners_claim_answered(scn_owners *o, const char *group, const scn_kv_answer *a) {
  scn_group_entry *g = scn_owners_find(o, group);
  if (!g)
    return;
  if (g->state == SCN_GROUP_CLAIMING)
    g->state = SCN_GROUP_NONE;
  if (a->why)
    scn_log(SCN_LOG_WARN, "etcd: a claim failed", "group=%s reason=\"%s\"", g->name, a->why);
  else if (a->succeeded)
    claim_won(o, g, a->revision);
  else if (a->nkvs) /* lost the race: the failure branch read the key, which names the winner */
    scn__owners_group_put(o, g, &a->kvs[0]);
  scn_owners_wake(g);
}

bool scn_owners_read(scn_owners *o, scn_group_entry *g) {
  if (!g->reading)
    g->reading = o->ops.send_read(o->ops.ud, g->name);
  return g->reading;
}

void scn_owners_read_answered(scn_owners *o, const char *group, const scn_kv_answer *a) {
  scn_group_entry *g = scn_owners_find(o, group);
  if (!g)
    return;
  g->reading = false;
  if (a->why)
    scn_log(SCN_LOG_WARN, "etcd: a lookup failed", "group=%s reason=\"%s\"", g->name, a->why);
  else if (a->nkvs)
    scn__owners_group_put(o, g, &a->kvs[0]);
  scn_owners_wake(g);
}

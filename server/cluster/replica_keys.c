/* The owner's record of its groups' followers (--replicas N >= 1): the replicas key and the
 * followers in the group key, written together by one txn that holds only while the group key
 * is still bound to this daemon's lease and the replicas key is as the cache last saw it.
 * A group owned here with no world and no entity left (world.destroy of its last one) has
 * nothing to follow: its replicas key then says "ended" at this epoch and names no follower,
 * under the same compares. It stays (one small key a group name) so that a copy of the group
 * from this epoch or before, on a daemon that was down when the group ended, is known to be
 * stale when that daemon starts again.
 *
 * The key also says how far the owner's ticks went ("tick", the highest closed among the
 * group's worlds), written with every change and, while the owner goes on alone (followers
 * but none in sync), again at most every TICK_RECORD_MS: what a follower promoted from its copy
 * knows it may lack. An epoch that began from a copy says how many ticks that copy may have
 * lacked ("lag_ticks"), which world.promote answers. */
#include "cluster/cluster_internal.h"

#include "ops/log.h"
#include "store/groups.h"
#include "store/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MS 1000       /* after a txn that failed, before the next one */
#define TICK_RECORD_MS 1000 /* while alone, how often the owner's tick is written again */

typedef struct record_ctx {
  scn_cluster *cl;
  char group[SCN_NAME_MAX + 1];
  scn_replica_set set; /* what the txn writes */
} record_ctx;

static bool live(scn_cluster *cl, const char *node) {
  return strcmp(node, cl->self.node) != 0 && scn_owners_node(&cl->owners, node) != NULL;
}

/* Copies the names of from that are live nodes other than this daemon, up to max. */
static uint8_t keep_live(scn_cluster *cl, const char from[][SCN_NAME_MAX + 1], uint8_t n,
                         char to[][SCN_NAME_MAX + 1], uint8_t max) {
  uint8_t kept = 0;
  for (uint8_t i = 0; i < n && kept < max; i++)
    if (live(cl, from[i]))
      memcpy(to[kept++], from[i], SCN_NAME_MAX + 1);
  return kept;
}

static bool names(const char list[][SCN_NAME_MAX + 1], uint8_t n, const char *node) {
  for (uint8_t i = 0; i < n; i++)
    if (strcmp(list[i], node) == 0)
      return true;
  return false;
}

static bool same_names(const char a[][SCN_NAME_MAX + 1], uint8_t na,
                       const char b[][SCN_NAME_MAX + 1], uint8_t nb) {
  if (na != nb)
    return false;
  for (uint8_t i = 0; i < na; i++)
    if (strcmp(a[i], b[i]) != 0)
      return false;
  return true;
}

/* What g's record should be now: the live followers it has (from the replicas key, whatever
 * epoch wrote it), and new ones chosen by load up to --replicas. In-sync members stay only
 * within the epoch that found them in sync. */
static void plan(scn_cluster *cl, scn_group_entry *g, scn_replica_set *next) {
  uint8_t want = (uint8_t)cl->srv->cfg.replicas;
  const scn_replica_set *now = &g->replicas;
  *next = (scn_replica_set){.epoch = g->epoch, .durability = scn__group_durability(cl, g->name)};
  snprintf(next->owner, sizeof next->owner, "%s", cl->self.node);
  next->tick = scn__group_tick(cl, g->name);
  next->lag_ticks =
      now->known && now->epoch == g->epoch ? now->lag_ticks : scn__promoted_lag(cl, g);
  next->nfollowers = keep_live(cl, now->followers, now->nfollowers, next->followers, want);
  if (next->nfollowers < want) {
    scn_group_entry probe = *g; /* the choice excludes the followers kept */
    memcpy(probe.followers, next->followers, sizeof probe.followers);
    probe.nfollowers = next->nfollowers;
    char chosen[SCN_REPLICAS_MAX][SCN_NAME_MAX + 1];
    size_t n = scn_owners_choose_followers(&cl->owners, &probe, want - next->nfollowers, chosen);
    for (size_t i = 0; i < n; i++)
      memcpy(next->followers[next->nfollowers++], chosen[i], SCN_NAME_MAX + 1);
  }
  /* In sync, in the followers' order: members recorded in this epoch while their links keep
   * acking within --replica-timeout, others once they acknowledged the last record. */
  uint64_t epoch, last;
  if (!scn_gstore_position(cl->srv->gstore, g->name, &epoch, &last) || (int64_t)epoch != g->epoch)
    return;
  bool same_epoch = now->known && now->epoch == g->epoch;
  for (uint8_t i = 0; i < next->nfollowers; i++) {
    const char *node = next->followers[i];
    bool was = same_epoch && names(now->insync, now->ninsync, node);
    if (scn__links_insync(cl, g->name, node, was, last))
      memcpy(next->insync[next->ninsync++], node, SCN_NAME_MAX + 1);
  }
}

/* Whether the owner's tick is to be written again: it goes on alone, and the key's is older
 * than TICK_RECORD_MS. */
static bool tick_due(scn_cluster *cl, const scn_group_entry *g, const scn_replica_set *next) {
  if (next->ninsync > 0 || next->nfollowers == 0 || next->tick == g->replicas.tick)
    return false;
  const scn_ship *s = scn__ship_get(cl, g->name); /* made if need be: it keeps the time */
  return s && uv_hrtime() - s->tick_recorded_at >= (uint64_t)TICK_RECORD_MS * 1000000;
}

/* Whether both keys already say what next says. */
static bool recorded(const scn_group_entry *g, const scn_replica_set *next) {
  const scn_replica_set *now = &g->replicas;
  return now->known && now->epoch == next->epoch && now->durability == next->durability &&
         now->lag_ticks == next->lag_ticks && strcmp(now->owner, next->owner) == 0 &&
         same_names(now->followers, now->nfollowers, next->followers, next->nfollowers) &&
         same_names(now->insync, now->ninsync, next->insync, next->ninsync) &&
         same_names(g->followers, g->nfollowers, next->followers, next->nfollowers) &&
         same_names(g->insync, g->ninsync, next->insync, next->ninsync);
}

static void recorded_answer(record_ctx *c, const scn_kv_answer *a);

static void on_recorded(void *ctx, const scn_kv_answer *a) {
  record_ctx *c = ctx;
  recorded_answer(c, a);
  scn__release_go_on(c->cl); /* a SIGTERM's release may wait for this answer */
}

static void recorded_answer(record_ctx *c, const scn_kv_answer *a) {
  scn_cluster *cl = c->cl;
  scn_group_entry *g = scn_owners_find(&cl->owners, c->group);
  if (!g)
    return;
  g->recording = false;
  if (a->why || !a->succeeded) {
    /* Fenced, moved, or the cache was behind: the watch brings what is there now. */
    scn_log(a->why ? SCN_LOG_WARN : SCN_LOG_INFO, "cluster: recording a group's followers failed",
            "group=%s reason=\"%s\"", c->group, a->why ? a->why : "a compare failed");
    cl->next_record = uv_hrtime() + (uint64_t)RETRY_MS * 1000000;
    return;
  }
  /* The key holds world.create's durability from now on (it outlives this owner); a group
   * that ended gets its own again with its next world. */
  if (c->set.ended || g->created_durability == 1 + c->set.durability)
    g->created_durability = 0;
  /* Taken now, unless the watch brought newer keys first: the next plan must not write it
   * again. */
  scn_ship *s = scn__ship_find(cl, c->group);
  if (s)
    s->tick_recorded_at = uv_hrtime();
  if (g->replicas.mod_rev < a->revision) {
    g->replicas = c->set;
    g->replicas.mod_rev = a->revision;
    g->replicas.known = !c->set.ended;
  }
  if (g->mod_rev < a->revision && g->key && strcmp(g->node, cl->self.node) == 0) {
    memcpy(g->followers, c->set.followers, sizeof g->followers);
    memcpy(g->insync, c->set.insync, sizeof g->insync);
    g->nfollowers = c->set.nfollowers;
    g->ninsync = c->set.ninsync;
    g->mod_rev = a->revision;
  }
  if (c->set.ended)
    scn_log(SCN_LOG_INFO, "group ended: its replicas key says so", "group=%s epoch=%lld", c->group,
            (long long)c->set.epoch);
  else
    scn_log(SCN_LOG_INFO, "group followers recorded", "group=%s epoch=%lld followers=%u", c->group,
            (long long)c->set.epoch, (unsigned)c->set.nfollowers);
}

static bool send_record(scn_cluster *cl, scn_group_entry *g, const scn_replica_set *next) {
  char group_key[SCN_NAME_MAX + 64], replicas_key[SCN_NAME_MAX + 64];
  snprintf(group_key, sizeof group_key, "%s%s", SCN_GROUPS_PREFIX, g->name);
  snprintf(replicas_key, sizeof replicas_key, "%s%s", SCN_REPLICAS_PREFIX, g->name);
  scn_buf gv = {0}, rv = {0};
  scn_owners_group_value_with(&gv, cl->self.node, cl->self.addr, next);
  scn_owners_replicas_value(&rv, next);
  scn_kv_compare cmp[] = {
      {.key = group_key, .target = SCN_KV_LEASE, .value = cl->self.lease},
      {.key = replicas_key, .target = SCN_KV_MOD, .value = g->replicas.mod_rev}};
  scn_kv_write puts[] = {
      {.key = group_key, .value = gv.data, .value_len = gv.len, .lease = cl->self.lease},
      {.key = replicas_key, .value = rv.data, .value_len = rv.len}};
  record_ctx c = {.cl = cl, .set = *next};
  snprintf(c.group, sizeof c.group, "%s", g->name);
  scn_kv_reply r = {
      .timeout_s = scn__request_timeout(cl), .done = on_recorded, .ctx = &c, .ctx_size = sizeof c};
  bool sent = !gv.failed && !rv.failed && scn_etcd_txn(cl->etcd, cmp, 2, puts, 2, &r);
  scn_buf_free(&gv);
  scn_buf_free(&rv);
  return sent;
}

/* Whether a follower has anything of group to keep: a world, or an entity of its own (made in
 * one of its worlds and left when they went; a later command of the group may use it). */
static bool holds_anything(scn_cluster *cl, const char *group) {
  scn_scene *scene = cl->srv->scene;
  for (size_t i = 0; i < scn_world_count(scene); i++)
    if (scn_world_in_group(scn_world_name(scn_world_at(scene, i)), group))
      return true;
  size_t n;
  free(scn_group_entities(scene, group, scn_gstore_home(cl->srv->gstore, group), &n));
  return n > 0;
}

/* Records the followers (or the end) of each group this daemon owns in state, where they
 * changed; how many txns went. */
static size_t record_pass(scn_cluster *cl, scn_group_state state) {
  scn_owners *o = &cl->owners;
  size_t sent = 0;
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g)) {
    if (g->state != state || g->recording || g->mv || g->handoff || !g->key ||
        g->lease != cl->self.lease || strcmp(g->node, cl->self.node) != 0)
      continue;
    if (!holds_anything(cl, g->name)) {
      /* Its record says it ended instead (no follower named): a copy of it elsewhere, of this
       * epoch or an older one, is stale now, and must not come back with a daemon that was
       * down meanwhile (scn__stale_forget). */
      if (g->replicas.known) {
        scn_replica_set ended = {.epoch = g->epoch,
                                 .ended = true,
                                 .durability = g->replicas.durability,
                                 .tick = scn__group_tick(cl, g->name)};
        snprintf(ended.owner, sizeof ended.owner, "%s", cl->self.node);
        sent += g->recording = send_record(cl, g, &ended);
      }
      continue;
    }
    scn_replica_set next;
    plan(cl, g, &next);
    if (!recorded(g, &next) || tick_due(cl, g, &next))
      sent += g->recording = send_record(cl, g, &next);
  }
  return sent;
}

void scn__replicas_record(scn_cluster *cl) {
  if (cl->srv->cfg.replicas >= 1 && uv_hrtime() >= cl->next_record)
    record_pass(cl, SCN_GROUP_OWNED);
}

size_t scn__replicas_record_final(scn_cluster *cl) {
  return cl->srv->cfg.replicas >= 1 ? record_pass(cl, SCN_GROUP_FROZEN) : 0;
}

bool scn__replicas_catching_up(scn_cluster *cl) {
  uint64_t epoch, last;
  for (scn_group_entry *g = scn_owners_first(&cl->owners); g; g = scn_owners_next(&cl->owners, g))
    if (g->state == SCN_GROUP_FROZEN && !g->mv &&
        scn_gstore_position(cl->srv->gstore, g->name, &epoch, &last) &&
        (int64_t)epoch == g->epoch && scn__links_behind(cl, g->name, last))
      return true;
  return false;
}

bool scn__replicas_recording(scn_cluster *cl) {
  for (scn_group_entry *g = scn_owners_first(&cl->owners); g; g = scn_owners_next(&cl->owners, g))
    if (g->recording)
      return true;
  return false;
}

void scn__replicas_promoted(scn_cluster *cl, const char *group, int64_t epoch, uint64_t lag_ticks) {
  scn_promoted *p = &cl->promoted[cl->npromoted++ % SCN_PROMOTED_KEPT];
  snprintf(p->group, sizeof p->group, "%s", group);
  p->epoch = epoch;
  p->lag_ticks = lag_ticks;
}

uint64_t scn__promoted_lag(const scn_cluster *cl, const scn_group_entry *g) {
  for (size_t i = 0; i < SCN_PROMOTED_KEPT; i++)
    if (cl->promoted[i].epoch == g->epoch && strcmp(cl->promoted[i].group, g->name) == 0)
      return cl->promoted[i].lag_ticks;
  return 0;
}

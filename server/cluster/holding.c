/* What holding a group means on this daemon: its worlds loaded from the shared directory into
 * the store and the scene, dropped from them when it goes, their clocks stopped for a move.
 * The ownership core decides; these are its ops (owners.h). */
#include "cluster/cluster_internal.h"

#include "ops/json_arena.h"
#include "ops/log.h"
#include "store/groups.h"
#include "store/snapshot.h"
#include "stream/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool scn__on_disk(void *ud, const char *group) {
  scn_cluster *cl = ud;
  return scn_gstore_on_disk(cl->srv->gstore, group);
}

#define TICKS_CLOSED_MAX 1000000 /* a copy further behind than this many ticks stays behind */

/* A switchover's copy goes on from each world's tick on the old owner at least (the hand-off
 * names them, frozen there): a world whose own clock is behind closes ticks until its open
 * tick is the owner's (never back). */
static void continue_ticks(scn_cluster *cl, const char *group) {
  scn_group_entry *g = scn_owners_find(&cl->owners, group);
  cJSON *ticks = g && g->handoff_ticks
                     ? scn_json_heap_parse(g->handoff_ticks, strlen(g->handoff_ticks))
                     : NULL;
  const cJSON *t;
  cJSON_ArrayForEach(t, ticks) {
    scn_world *w = scn_world_find(cl->srv->scene, t->string);
    uint64_t want = (uint64_t)t->valuedouble, closed = 0;
    if (!w || !scn_world_in_group(t->string, group))
      continue;
    while (scn_world_tick(w) < want && closed++ < TICKS_CLOSED_MAX)
      scn_world_close_tick(w);
    if (closed)
      scn_log(SCN_LOG_INFO, "replica: a world's ticks go on from its old owner's",
              "world=%s tick=%llu closed=%llu", t->string, (unsigned long long)scn_world_tick(w),
              (unsigned long long)closed);
  }
  scn_json_heap_delete(ticks);
}

scn_load_result scn__load_group(void *ud, const char *group, int64_t epoch, scn_arrival how) {
  scn_cluster *cl = ud;
  /* A load blocks the loop (no renewal meanwhile), and its first write needs the fence up:
   * with less than a second of it left, a renewal goes first, and the load is tried again when
   * it is confirmed (the key names this daemon: scn_owners_adopt_pending). */
  uint64_t budget = (cl->ttl_ns - cl->margin_ns) / 2;
  if (scn__fence_left(cl) < (budget < 1000000000u ? budget : 1000000000u)) {
    scn__keepalive(cl);
    return SCN_LOAD_NOT_NOW;
  }
  char err[SCN_PATH_MSG_MAX];
  /* A follower's copy claimed after its owner went, or handed over by a switchover (whose
   * owner waited until this copy had every record), is served as it is, ticks and all: its
   * new epoch starts from what memory holds. Anything else is dropped and loaded from disk. */
  uint64_t lag = scn__follow_lag(cl, group);
  if ((how == SCN_ARRIVED_BY_CLAIM || cl->srv->cfg.replicas >= 1) &&
      scn__follow_take_copy(cl, group)) {
    if (scn_gstore_promote(cl->srv->gstore, group, (uint64_t)epoch, err, sizeof err) == 0) {
      if (how == SCN_ARRIVED_BY_MOVE)
        continue_ticks(cl, group);
      else
        scn__replicas_promoted(cl, group, epoch, lag);
      scn_log(SCN_LOG_INFO, "replica: serving the group from this daemon's copy",
              "group=%s epoch=%lld tick=%llu lag_ticks=%llu", group, (long long)epoch,
              (unsigned long long)scn__group_tick(cl, group),
              (unsigned long long)(how == SCN_ARRIVED_BY_MOVE ? 0 : lag));
      cl->next_publish = 0;
      return SCN_LOADED;
    }
    scn_log(SCN_LOG_WARN, "replica: a copy cannot be served; the group is loaded from disk",
            "group=%s error=\"%s\"", group, err);
    scn__drop_group(cl, group, "", "");
  }
  scn__follow_stop(cl, group);
  scn__stale_forget_ended(cl, group);
  if (scn_gstore_acquire(cl->srv->gstore, group, (uint64_t)epoch, how == SCN_ARRIVED_BY_MOVE, err,
                         sizeof err) == 0)
    return SCN_LOADED;
  bool outran = !scn__fence_up(cl);
  scn_log(outran ? SCN_LOG_WARN : SCN_LOG_ERROR,
          outran ? "a load outran the lease; it is tried again after a renewal"
                 : "cannot load a group this daemon owns",
          "group=%s error=\"%s\"", group, err);
  return outran ? SCN_LOAD_OUTRAN : SCN_LOAD_BROKEN;
}

typedef enum clocks { CLOCKS_RUN, CLOCKS_STOP } clocks;
static void set_clocks(scn_cluster *cl, const char *group, clocks how);

/* A group switched over to its follower: its subscribers are told where it went, and the
 * copy stays (clocks running again) for this daemon to follow it with. */
static bool keep_switched(scn_cluster *cl, const char *group, const char *to, const char *to_addr) {
  if (!scn__follow_park(cl, group))
    return false;
  scn__ship_drop(cl, group);
  scn_scene *scene = cl->srv->scene;
  for (size_t i = 0; i < scn_world_count(scene); i++) {
    scn_world *w = scn_world_at(scene, i);
    if (scn_world_in_group(scn_world_name(w), group))
      scn_stream_world_moved(cl->srv->stream, w, to, to_addr);
  }
  set_clocks(cl, group, CLOCKS_RUN);
  return true;
}

/* Drops the group's worlds from the scene (subscribers told where it went) and stops
 * persisting it. Its entities that no other world here uses go with it: another daemon keeps
 * them now (its snapshot lists them), and they must not come back here as this node's own. */
void scn__drop_group(void *ud, const char *group, const char *to, const char *to_addr) {
  scn_cluster *cl = ud;
  scn_server *srv = cl->srv;
  /* Handed over by a switchover: its target acknowledged every record, so the oks that
   * waited for followers leave (not dropped with the ship), and the copy here, the same as
   * the target's, is kept to follow it. */
  scn_group_entry *g = scn_owners_find(&cl->owners, group);
  if (g && g->mv && g->mv->handoff_rev) {
    scn__sync_release(cl, group);
    if (srv->cfg.replicas >= 1 && !scn__follows(cl, group) && keep_switched(cl, group, to, to_addr))
      return;
  }
  uint32_t home = scn_gstore_home(srv->gstore, group);
  scn_gstore_release(srv->gstore, group);
  scn__ship_drop(cl, group); /* its backlog may hold records the store just discarded */
  size_t nused;
  scn_entity *used = scn_group_entities(srv->scene, group, home, &nused);
  for (size_t i = scn_world_count(srv->scene); i-- > 0;) {
    scn_world *w = scn_world_at(srv->scene, i);
    char name[SCN_NAME_MAX + 1];
    scn_group_of(scn_world_name(w), name);
    if (strcmp(name, group) != 0)
      continue;
    scn_stream_world_moved(srv->stream, w, to, to_addr);
    snprintf(name, sizeof name, "%s", scn_world_name(w));
    scn_server_drop_world(srv, name);
  }
  for (size_t i = 0; i < nused; i++)
    scn_entity_forget(srv->scene, used[i]); /* refused while another world uses it */
  free(used);
  /* What the group made and another group here still uses stays, as this node's own. */
  for (uint32_t s = 1, n = scn_entity_slot_count(srv->scene); home != SCN_HOME_NONE && s <= n;
       s++) {
    bool alive;
    scn_entity id = scn_entity_slot_id(srv->scene, s, &alive);
    if (alive && scn_entity_home(srv->scene, id) == home)
      scn_entity_set_home(srv->scene, id, 0);
  }
}

/* A group being moved keeps its worlds' clocks still from its freeze on: the tick count the
 * target goes on with is the one the mover wrote, and no tick here comes after it. */
static void set_clocks(scn_cluster *cl, const char *group, clocks how) {
  scn_scene *scene = cl->srv->scene;
  for (size_t i = 0; i < scn_world_count(scene); i++) {
    scn_world *w = scn_world_at(scene, i);
    if (scn_world_in_group(scn_world_name(w), group))
      scn_world_hold_ticks(w, how == CLOCKS_STOP);
  }
}

bool scn__freeze_group(void *ud, const char *group, uint64_t *snapshot_bytes,
                       uint64_t *history_bytes) {
  scn_cluster *cl = ud;
  set_clocks(cl, group, CLOCKS_STOP);
  *snapshot_bytes = *history_bytes = 0;
  if (cl->srv->cfg.replicas >= 1)
    return true; /* a switchover: the target's copy is what goes, nothing through the disk */
  return scn_gstore_checkpoint(cl->srv->gstore, group, snapshot_bytes) == 0 &&
         scn_gstore_write_history(cl->srv->gstore, group, history_bytes) == 0;
}

void scn__unfreeze_group(void *ud, const char *group) {
  scn_cluster *cl = ud;
  set_clocks(cl, group, CLOCKS_RUN);
  scn_gstore_drop_history(cl->srv->gstore, group);
}

/* A group on disk: dropped when its copy is stale (a newer epoch owns it elsewhere, or it
 * ended since), claimed when unowned. */
static void claim_if_unowned(void *ud, const char *group) {
  scn_cluster *cl = ud;
  if (!scn__stale_forget(cl, group))
    scn_owners_claim_unowned(&cl->owners, group);
}

void scn__sweep(scn_cluster *cl) {
  scn_gstore_each_on_disk(cl->srv->gstore, claim_if_unowned, cl);
  scn_owners_adopt_pending(&cl->owners);
}

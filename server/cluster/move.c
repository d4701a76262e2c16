/* Moves (world.move): a group owned here is frozen and saved, its key handed to the target in
 * one txn, and the move is answered when the target says it serves it (see owners.h). A
 * switchover (--replicas) hands off only once the cluster says the target caught up
 * (scn_owners_move_hand_off, from switchover.c). */
#include "cluster/owners.h"

#include "ops/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The move ends: its asker (if it is still there) gets the answer, with the group's owner
 * when it succeeded. */
static void end_move(scn_group_entry *g, int code, const char *message) {
  scn_move *mv = g->mv;
  g->mv = NULL;
  scn_move_answer a = {.ok = code == 0, .code = code, .message = message};
  if (a.ok) {
    a.node = g->node;
    a.addr = g->addr;
  }
  if (mv->done)
    mv->done(mv->ud, &a);
  free(mv);
}

void scn__owners_move_failed(scn_group_entry *g, const char *message) {
  end_move(g, SCN_W_UNAVAILABLE, message);
}

/* The move is off (before or at the hand-off): the group is served here again. */
static void move_undone(scn_owners *o, scn_group_entry *g) {
  g->state = SCN_GROUP_OWNED;
  o->ops.unfreeze(o->ops.ud, g->name);
}

int scn_owners_move(scn_owners *o, const scn_move_order *order, int *code, char *msg,
                    size_t msglen) {
  scn_group_entry *g = scn_owners_find(o, order->group);
  if (!g || g->state != SCN_GROUP_OWNED) {
    *code = SCN_W_UNAVAILABLE;
    snprintf(msg, msglen, "group %s is not served here right now", order->group);
    return -1;
  }
  if (strcmp(order->to, o->self->node) == 0)
    return 1;
  const scn_node_entry *n = scn_owners_node(o, order->to);
  if (!n) {
    *code = SCN_W_NOT_FOUND;
    snprintf(msg, msglen, "no live node named \"%s\"", order->to);
    return -1;
  }
  /* Frozen: commands on it answer UNAVAILABLE until it is gone; everything answered before is
   * in the snapshot the target loads, and the worlds' ticks and histories in the file beside
   * it (their clocks stand still from here). */
  g->state = SCN_GROUP_FROZEN;
  uint64_t bytes = 0, hbytes = 0;
  if (!o->ops.freeze(o->ops.ud, g->name, &bytes, &hbytes)) {
    move_undone(o, g);
    *code = SCN_W_INTERNAL;
    snprintf(msg, msglen, "cannot save group %s before the move", order->group);
    return -1;
  }
  scn_move *mv = calloc(1, sizeof *mv);
  if (!mv) {
    move_undone(o, g);
    *code = SCN_W_INTERNAL;
    snprintf(msg, msglen, "out of memory");
    return -1;
  }
  snprintf(mv->to, sizeof mv->to, "%s", order->to);
  mv->done = order->done;
  mv->ud = order->ud;
  mv->limit = order->limit;
  mv->deadline = o->ops.now(o->ops.ud) + order->limit;
  g->mv = mv;
  if (order->catch_up_limit) {
    mv->catching_up = true;
    mv->catch_up_deadline = o->ops.now(o->ops.ud) + order->catch_up_limit;
    scn_log(SCN_LOG_INFO, "switching a group over", "group=%s to=%s", order->group, order->to);
    return 0;
  }
  /* One txn: the key goes to the target's lease, if it is still this daemon's at its epoch. */
  if (!o->ops.send_handoff(o->ops.ud, g->name, g->mod_rev, n)) {
    move_undone(o, g);
    g->mv = NULL;
    free(mv);
    *code = SCN_W_UNAVAILABLE;
    snprintf(msg, msglen, "cannot reach etcd");
    return -1;
  }
  scn_log(SCN_LOG_INFO, "moving a group", "group=%s to=%s snapshot_bytes=%llu history_bytes=%llu",
          order->group, order->to, (unsigned long long)bytes, (unsigned long long)hbytes);
  return 0;
}

void scn_owners_move_hand_off(scn_owners *o, scn_group_entry *g) {
  scn_move *mv = g->mv;
  if (!mv || !mv->catching_up || g->state != SCN_GROUP_FROZEN)
    return;
  mv->catching_up = false;
  mv->deadline = o->ops.now(o->ops.ud) + mv->limit;
  const scn_node_entry *n = scn_owners_node(o, mv->to);
  const char *why = !n ? "the target is no longer a live node"
                    : !o->ops.send_handoff(o->ops.ud, g->name, g->mod_rev, n) ? "cannot reach etcd"
                                                                              : NULL;
  if (why) {
    move_undone(o, g);
    scn__owners_move_failed(g, why);
  }
}

/* From now on the target owns the group, nothing more is written here, and commands go there.
 * The move is answered when the target says it serves it (scn__owners_move_check_confirmed). */
void scn__owners_handed_off(scn_owners *o, scn_group_entry *g, int64_t rev) {
  scn_move *mv = g->mv;
  if (!mv || mv->handoff_rev)
    return;
  mv->handoff_rev = rev;
  const scn_node_entry *n = scn_owners_node(o, mv->to);
  g->key = true;
  snprintf(g->node, sizeof g->node, "%s", mv->to);
  if (n)
    snprintf(g->addr, sizeof g->addr, "%s", n->addr);
  if (rev > g->mod_rev)
    g->mod_rev = rev;
  g->handoff = true;
  scn__owners_unload(o, g, mv->to, g->addr);
  scn__owners_log_owner(g, o->self->node, mv->to, rev);
  o->ops.load_changed(o->ops.ud);
}

void scn__owners_move_check_confirmed(scn_owners *o, scn_group_entry *g) {
  scn_move *mv = g->mv;
  if (mv && mv->handoff_rev && strcmp(g->node, mv->to) == 0 && !g->handoff &&
      g->mod_rev > mv->handoff_rev) {
    o->stats.moves++;
    end_move(g, 0, NULL);
  }
}

void scn_owners_handoff_answered(scn_owners *o, const char *group, const scn_kv_answer *a) {
  scn_group_entry *g = scn_owners_find(o, group);
  if (!g || !g->mv)
    return;
  if (!a->why && a->succeeded) {
    scn__owners_handed_off(o, g, a->revision);
    return;
  }
  if (g->mv->handoff_rev)
    return; /* the watch saw it apply: this answer was lost or late */
  move_undone(o, g);
  char msg[300];
  snprintf(msg, sizeof msg, "the hand-off to %s failed: %s", g->mv->to,
           a->why ? a->why : "the group's key changed meanwhile");
  scn__owners_move_failed(g, msg);
}

void scn_owners_expire_moves(scn_owners *o) {
  uint64_t now = o->ops.now(o->ops.ud);
  char msg[300];
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g)) {
    if (g->mv && g->mv->handoff_rev && now > g->mv->deadline)
      scn__owners_move_failed(
          g, "the group was handed over, but its new owner has not confirmed it yet");
    else if (g->mv && g->mv->catching_up && now > g->mv->catch_up_deadline) {
      snprintf(msg, sizeof msg,
               "node %s did not catch up with group %s within --replica-timeout; the group is "
               "served here again",
               g->mv->to, g->name);
      move_undone(o, g);
      scn__owners_move_failed(g, msg);
    }
  }
}

void scn_owners_forget_move(scn_owners *o, void *ud) {
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g))
    if (g->mv && g->mv->ud == ud)
      g->mv->done = NULL;
}

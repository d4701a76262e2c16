/* world.promote (--replicas): an admin makes a follower the owner of a group whose owner died
 * with nobody to take over (its in-sync set recorded empty, or none of its members live),
 * from the copy that follower has. Sent to any daemon, which checks its cache (the group has
 * no key, the node is one of the followers its replicas key names, and is live), then writes
 * the replicas key with that follower as the only in-sync member, in one txn that compares the
 * group key (still absent: no live owner) and the replicas key (as the cache saw it, so two
 * promotes, or a promote and an owner's record, cannot both win). The follower keeps its copy
 * while the group has no owner (follow.c) and, now a member of the in-sync set, claims the
 * group and serves it from that copy, its ticks going on from the copy's; its record of the
 * new epoch says how many ticks of changes the copy may have lacked (replica_keys.c). The
 * answer waits for that record, or PROMOTE_LIMIT_S. */
#include "cluster/cluster_internal.h"

#include "ops/log.h"
#include "store/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROMOTE_LIMIT_S 10.0 /* a promote the follower has not confirmed by then fails */

struct scn_promote_wait {
  uint64_t id;
  char group[SCN_NAME_MAX + 1];
  char node[SCN_NAME_MAX + 1];
  int64_t from_epoch; /* the epoch of the replicas key the txn rewrote */
  bool written;       /* the txn succeeded: waiting for the new owner's record */
  uint64_t deadline;  /* uv_hrtime */
  scn_promote_done done;
  void *ud;
};

typedef struct promote_ctx {
  scn_cluster *cl;
  uint64_t id;
} promote_ctx;

static size_t find(const scn_cluster *cl, uint64_t id) {
  for (size_t i = 0; i < cl->npromotes; i++)
    if (cl->promotes[i].id == id)
      return i;
  return cl->npromotes;
}

/* Answers the wait at i (if its asker is still there) and lets it go. */
static void end_at(scn_cluster *cl, size_t i, const scn_promote_answer *a) {
  scn_promote_wait w = cl->promotes[i];
  cl->promotes[i] = cl->promotes[--cl->npromotes];
  if (a->ok)
    scn_log(SCN_LOG_INFO, "world.promote: the follower serves the group", "group=%s node=%s",
            w.group, w.node);
  else
    scn_log(SCN_LOG_WARN, "world.promote failed", "group=%s node=%s reason=\"%s\"", w.group, w.node,
            a->message);
  if (w.done)
    w.done(w.ud, a);
}

static void fail_at(scn_cluster *cl, size_t i, int code, const char *message) {
  scn_promote_answer a = {.code = code, .message = message};
  end_at(cl, i, &a);
}

static void on_written(void *ctx, const scn_kv_answer *a) {
  const promote_ctx *c = ctx;
  scn_cluster *cl = c->cl;
  size_t i = find(cl, c->id);
  if (i == cl->npromotes)
    return;
  scn_promote_wait *w = &cl->promotes[i];
  char msg[300];
  if (a->why) {
    snprintf(msg, sizeof msg, "etcd: %s", a->why);
    fail_at(cl, i, SCN_W_UNAVAILABLE, msg);
    return;
  }
  if (!a->succeeded) {
    const scn_group_entry *g = scn_owners_find(&cl->owners, w->group);
    if (g && g->key) {
      snprintf(msg, sizeof msg, "group %s has a live owner now (%s)", w->group, g->node);
      fail_at(cl, i, SCN_W_BAD_REQUEST, msg);
    } else {
      snprintf(msg, sizeof msg,
               "group %s: its replicas record changed meanwhile (another world.promote, or its "
               "owner came back); look again and retry",
               w->group);
      fail_at(cl, i, SCN_W_UNAVAILABLE, msg);
    }
    return;
  }
  w->written = true;
  scn_log(SCN_LOG_INFO, "world.promote: the follower is the group's only in-sync member",
          "group=%s node=%s epoch=%lld", w->group, w->node, (long long)w->from_epoch);
  scn__promote_check(cl);
}

void scn__promote_check(scn_cluster *cl) {
  uint64_t now = uv_hrtime();
  for (size_t i = cl->npromotes; i-- > 0;) {
    scn_promote_wait *w = &cl->promotes[i];
    const scn_group_entry *g = scn_owners_find(&cl->owners, w->group);
    /* Its record of the new epoch, or none at all (a group with no world left has none). */
    bool recorded = !g || !g->replicas.known ||
                    (strcmp(g->replicas.owner, w->node) == 0 && g->replicas.epoch > w->from_epoch);
    if (w->written && g && g->key && strcmp(g->node, w->node) == 0 && recorded) {
      scn_promote_answer a = {
          .ok = true, .node = g->node, .addr = g->addr, .lag_ticks = g->replicas.lag_ticks};
      end_at(cl, i, &a);
    } else if (w->written && g && g->key && strcmp(g->node, w->node) != 0) {
      char msg[200];
      snprintf(msg, sizeof msg, "group %s was taken by %s instead", w->group, g->node);
      fail_at(cl, i, SCN_W_UNAVAILABLE, msg);
    } else if (now > w->deadline) {
      fail_at(cl, i, SCN_W_UNAVAILABLE,
              w->written ? "the follower is recorded as the group's only in-sync member but has "
                           "not taken the group yet; it claims it when it can"
                         : "etcd did not answer");
    }
  }
}

static bool listed(const char list[][SCN_NAME_MAX + 1], uint8_t n, const char *node) {
  for (uint8_t i = 0; i < n; i++)
    if (strcmp(list[i], node) == 0)
      return true;
  return false;
}

/* What may refuse the promote before etcd is asked: -1 with *code and msg, else 0. */
static int check(scn_cluster *cl, const scn_group_entry *g, const char *group, const char *node,
                 int *code, char *msg, size_t msglen) {
  const char *why;
  *code = SCN_W_UNAVAILABLE;
  if (!scn_cluster_serving(cl, &why)) {
    snprintf(msg, msglen, "%s; retry", why);
    return -1;
  }
  *code = SCN_W_NOT_FOUND;
  if (!g || !g->replicas.known) {
    snprintf(msg, msglen, "group %s has no replicas record in the cluster", group);
    return -1;
  }
  *code = SCN_W_BAD_REQUEST;
  if (g->key) {
    snprintf(msg, msglen,
             "group %s has a live owner (%s): world.promote is for a group without one", group,
             g->node);
    return -1;
  }
  *code = SCN_W_NOT_FOUND;
  if (!listed(g->replicas.followers, g->replicas.nfollowers, node)) {
    snprintf(msg, msglen, "node \"%s\" is not a follower of group %s", node, group);
    return -1;
  }
  *code = SCN_W_UNAVAILABLE;
  if (!scn_owners_node(&cl->owners, node)) {
    snprintf(msg, msglen, "node \"%s\" is not live", node);
    return -1;
  }
  if (g->state != SCN_GROUP_NONE) {
    snprintf(msg, msglen, "group %s is being claimed; retry", group);
    return -1;
  }
  return 0;
}

static bool send_promote(scn_cluster *cl, const scn_group_entry *g, const char *node, uint64_t id) {
  char group_key[SCN_NAME_MAX + 64], replicas_key[SCN_NAME_MAX + 64];
  snprintf(group_key, sizeof group_key, "%s%s", SCN_GROUPS_PREFIX, g->name);
  snprintf(replicas_key, sizeof replicas_key, "%s%s", SCN_REPLICAS_PREFIX, g->name);
  scn_replica_set next = g->replicas;
  next.ninsync = 1;
  snprintf(next.insync[0], sizeof next.insync[0], "%s", node);
  scn_buf rv = {0};
  scn_owners_replicas_value(&rv, &next);
  scn_kv_compare cmp[] = {
      {.key = group_key, .target = SCN_KV_CREATE, .value = 0},
      {.key = replicas_key, .target = SCN_KV_MOD, .value = g->replicas.mod_rev}};
  scn_kv_write put = {.key = replicas_key, .value = rv.data, .value_len = rv.len};
  promote_ctx c = {.cl = cl, .id = id};
  scn_kv_reply r = {
      .timeout_s = scn__request_timeout(cl), .done = on_written, .ctx = &c, .ctx_size = sizeof c};
  bool sent = !rv.failed && scn_etcd_txn(cl->etcd, cmp, 2, &put, 1, &r);
  scn_buf_free(&rv);
  return sent;
}

int scn_cluster_promote(scn_cluster *cl, const char *world, const char *node, scn_promote_done done,
                        void *ud, int *code, char *msg, size_t msglen) {
  if (cl->srv->cfg.replicas == 0) {
    *code = SCN_W_BAD_REQUEST;
    snprintf(msg, msglen, "world.promote needs --replicas (no follower keeps a copy)");
    return -1;
  }
  char group[SCN_NAME_MAX + 1];
  scn_group_of(world, group);
  const scn_group_entry *g = scn_owners_find(&cl->owners, group);
  if (check(cl, g, group, node, code, msg, msglen) < 0)
    return -1;
  scn_promote_wait *grown =
      scn_array_grow(cl->promotes, &cl->promotes_cap, sizeof *grown, cl->npromotes + 1);
  *code = SCN_W_INTERNAL;
  if (!grown) {
    snprintf(msg, msglen, "out of memory");
    return -1;
  }
  cl->promotes = grown;
  scn_promote_wait *w = &cl->promotes[cl->npromotes];
  *w = (scn_promote_wait){.id = ++cl->promote_ids,
                          .from_epoch = g->replicas.epoch,
                          .deadline = uv_hrtime() + (uint64_t)(PROMOTE_LIMIT_S * 1e9),
                          .done = done,
                          .ud = ud};
  snprintf(w->group, sizeof w->group, "%s", group);
  snprintf(w->node, sizeof w->node, "%s", node);
  if (!send_promote(cl, g, node, w->id)) {
    *code = SCN_W_UNAVAILABLE;
    snprintf(msg, msglen, "cannot reach etcd");
    return -1;
  }
  cl->npromotes++;
  scn_log(SCN_LOG_INFO, "world.promote", "group=%s node=%s epoch=%lld", group, node,
          (long long)g->replicas.epoch);
  return 0;
}

void scn_cluster_forget_promote(scn_cluster *cl, void *ud) {
  for (size_t i = 0; i < cl->npromotes; i++)
    if (cl->promotes[i].ud == ud)
      cl->promotes[i].done = NULL;
}

void scn__promote_free(scn_cluster *cl) {
  free(cl->promotes);
  cl->promotes = NULL;
  cl->npromotes = cl->promotes_cap = 0;
}

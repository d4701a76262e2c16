/* The group keys the ownership core writes and reads in etcd: a claim, a hand-off, the answer
 * to a hand-off, a read of one key. Answers go back to the core by the group's name (the
 * group may be gone by then). */
#include "cluster/cluster_internal.h"

#include "store/snapshot.h"

#include <stdio.h>
#include <string.h>

typedef struct group_ctx {
  scn_cluster *cl;
  char group[SCN_NAME_MAX + 1];
} group_ctx;

static void group_key(const char *group, char *out, size_t cap) {
  snprintf(out, cap, "%s%s", SCN_GROUPS_PREFIX, group);
}

static group_ctx context(scn_cluster *cl, const char *group) {
  group_ctx c = {.cl = cl};
  snprintf(c.group, sizeof c.group, "%s", group);
  return c;
}

static void on_claimed(void *ctx, const scn_kv_answer *a) {
  group_ctx *c = ctx;
  scn_owners_claim_answered(&c->cl->owners, c->group, a);
}

static void on_handed_off(void *ctx, const scn_kv_answer *a) {
  group_ctx *c = ctx;
  scn_owners_handoff_answered(&c->cl->owners, c->group, a);
}

static void on_read(void *ctx, const scn_kv_answer *a) {
  group_ctx *c = ctx;
  scn_owners_read_answered(&c->cl->owners, c->group, a);
}

/* Puts the group's key (value, bound to lease) if it is still at mod_rev (0: absent). */
static bool put_if_unchanged(scn_cluster *cl, const char *group, const scn_buf *value,
                             int64_t lease, int64_t mod_rev, scn_kv_done done) {
  char key[SCN_NAME_MAX + 64];
  group_key(group, key, sizeof key);
  group_ctx c = context(cl, group);
  scn_kv_reply r = {
      .timeout_s = scn__request_timeout(cl), .done = done, .ctx = &c, .ctx_size = sizeof c};
  scn_kv_write w = {.key = key, .value = value->data, .value_len = value->len, .lease = lease};
  return !value->failed && scn_etcd_put_if_unchanged(cl->etcd, &w, mod_rev, &r);
}

bool scn__send_claim(void *ud, const char *group) {
  scn_cluster *cl = ud;
  return put_if_unchanged(cl, group, &cl->self_value, cl->self.lease, 0, on_claimed);
}

bool scn__send_served(void *ud, const char *group, int64_t mod_rev) {
  scn_cluster *cl = ud;
  return put_if_unchanged(cl, group, &cl->self_value, cl->self.lease, mod_rev, NULL);
}

/* A switchover's hand-off (--replicas): in one txn, the group key to the target and the
 * replicas key naming it the owner, with this daemon a follower in its place. Its epoch is 0
 * and its in-sync set empty until the new owner records its own (a follower joins it once it
 * has caught up in the new epoch). Both only if neither changed since the cache saw them. */
static bool send_switch(scn_cluster *cl, const char *group, int64_t mod_rev,
                        const scn_node_entry *to, const scn_buf *value) {
  scn_group_entry *g = scn_owners_find(&cl->owners, group);
  if (!g)
    return false;
  const scn_replica_set *now = &g->replicas;
  scn_replica_set next = {.durability = now->known ? now->durability : cl->srv->cfg.durability};
  snprintf(next.owner, sizeof next.owner, "%s", to->name);
  snprintf(next.followers[next.nfollowers++], SCN_NAME_MAX + 1, "%s", cl->self.node);
  for (uint8_t i = 0; now->known && i < now->nfollowers; i++)
    if (next.nfollowers < cl->srv->cfg.replicas && next.nfollowers < SCN_REPLICAS_MAX &&
        strcmp(now->followers[i], to->name) != 0 && strcmp(now->followers[i], cl->self.node) != 0)
      memcpy(next.followers[next.nfollowers++], now->followers[i], SCN_NAME_MAX + 1);
  char gkey[SCN_NAME_MAX + 64], rkey[SCN_NAME_MAX + 64];
  group_key(group, gkey, sizeof gkey);
  snprintf(rkey, sizeof rkey, "%s%s", SCN_REPLICAS_PREFIX, group);
  scn_buf rv = {0};
  scn_owners_replicas_value(&rv, &next);
  scn_kv_compare cmp[] = {{.key = gkey, .target = SCN_KV_MOD, .value = mod_rev},
                          {.key = rkey, .target = SCN_KV_MOD, .value = now->mod_rev}};
  /* The replicas key first: a watcher has it when the group key's event comes. */
  scn_kv_write puts[] = {
      {.key = rkey, .value = rv.data, .value_len = rv.len},
      {.key = gkey, .value = value->data, .value_len = value->len, .lease = to->lease}};
  group_ctx c = context(cl, group);
  scn_kv_reply r = {.timeout_s = scn__request_timeout(cl),
                    .done = on_handed_off,
                    .ctx = &c,
                    .ctx_size = sizeof c};
  bool sent = !rv.failed && !value->failed && scn_etcd_txn(cl->etcd, cmp, 2, puts, 2, &r);
  scn_buf_free(&rv);
  return sent;
}

/* A switchover's hand-off value also gives each world's open tick, frozen here: the target's
 * copy goes on from there at least (holding.c). */
static void add_ticks(scn_cluster *cl, const char *group, scn_buf *value) {
  scn_scene *scene = cl->srv->scene;
  if (value->len == 0 || value->data[value->len - 1] != '}')
    return;
  value->len--;
  scn_buf_adds(value, ",\"ticks\":{");
  bool first = true;
  for (size_t i = 0; i < scn_world_count(scene); i++) {
    scn_world *w = scn_world_at(scene, i);
    const char *name = scn_world_name(w);
    if (!scn_world_in_group(name, group))
      continue;
    scn_buf_adds(value, first ? "" : ",");
    first = false;
    scn_buf_add_json_string(value, name, strlen(name));
    scn_buf_addc(value, ':');
    scn_buf_add_u64(value, scn_world_tick(w));
  }
  scn_buf_adds(value, "}}");
}

bool scn__send_handoff(void *ud, const char *group, int64_t mod_rev, const scn_node_entry *to) {
  scn_cluster *cl = ud;
  scn_buf value = {0};
  scn_owners_group_value(&value, to->name, to->addr, cl->self.node);
  if (cl->srv->cfg.replicas >= 1)
    add_ticks(cl, group, &value);
  bool sent = cl->srv->cfg.replicas >= 1
                  ? send_switch(cl, group, mod_rev, to, &value)
                  : put_if_unchanged(cl, group, &value, to->lease, mod_rev, on_handed_off);
  scn_buf_free(&value);
  return sent;
}

bool scn__send_read(void *ud, const char *group) {
  scn_cluster *cl = ud;
  char key[SCN_NAME_MAX + 64];
  group_key(group, key, sizeof key);
  group_ctx c = context(cl, group);
  scn_kv_reply r = {
      .timeout_s = scn__request_timeout(cl), .done = on_read, .ctx = &c, .ctx_size = sizeof c};
  return scn_etcd_range(cl->etcd, key, &r);
}

/* The cluster module (see cluster.h): its life, its housekeeping tick, and the answers of the
 * commands that ask about the cluster. The work is in the files cluster_internal.h lists. */
#include "cluster/cluster_internal.h"

#include "ops/log.h"
#include "store/groups.h"
#include "store/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 100          /* the module's housekeeping timer */
#define PUBLISH_MS 2000      /* how often the node's load is published */
#define SWEEP_MS 1000        /* how often unowned groups on disk are looked for */
#define MOVE_LIMIT_S 10.0    /* a move the target has not confirmed by then fails */
#define ID_LOW_WATER 131072u /* another range of entity ids is asked for below this many */

double scn__request_timeout(const scn_cluster *cl) {
  double t = cl->ttl / 3;
  return t < 0.5 ? 0.5 : t > 2 ? 2 : t;
}

/* ---- the tick ------------------------------------------------------------------------------ */

static void on_tick(uv_timer_t *t) {
  scn_cluster *cl = t->data;
  uint64_t now = uv_hrtime();
  if (cl->releasing)
    return;
  if (cl->self.lease && now >= cl->next_keepalive) {
    scn__keepalive(cl);
    cl->next_keepalive = now + (uint64_t)(cl->ttl_ns / 3);
  }
  if (!cl->self.registered) {
    scn_readiness_set(&cl->srv->readiness, SCN_UNREADY_UNREGISTERED);
    scn__step_next(cl);
    return;
  }
  if (cl->sync_again && !cl->syncing) {
    cl->sync_again = false;
    scn__sync_start(cl);
  }
  if (!scn__fence_up(cl))
    return;
  if (scn_entity_slots_left(cl->srv->scene) < ID_LOW_WATER)
    scn__ids_fetch(cl);
  if (now >= cl->next_publish) {
    scn__publish_node(cl, SCN_PUBLISH_LOAD);
    cl->next_publish = now + (uint64_t)PUBLISH_MS * 1000000;
  }
  if (now >= cl->next_sweep) {
    scn__sweep(cl);
    cl->next_sweep = now + (uint64_t)SWEEP_MS * 1000000;
  }
  scn__replicas_record(cl);
  scn__ship_check(cl);
  scn__sync_check(cl);
  scn__follow_check(cl);
  scn__promote_check(cl);
  scn_owners_expire_moves(&cl->owners);
  scn__switch_check(cl);
}

/* ---- commands ------------------------------------------------------------------------------ */

const char *scn_cluster_node(const scn_cluster *cl) { return cl->self.node; }

const char *scn_cluster_addr(const scn_cluster *cl) { return cl->self.addr; }

void scn_cluster_nodes_json(scn_cluster *cl, scn_buf *out) {
  scn_owners *o = &cl->owners;
  scn_buf_adds(out, ",\"nodes\":[");
  scn_node_entry *me = scn_owners_node(o, cl->self.node);
  if (me) {
    me->worlds = scn__worlds_served(cl);
    me->transforms = scn_scene_transform_count(cl->srv->scene);
    me->connections = cl->srv->nconns;
  }
  for (size_t i = 0; i < o->nnodes; i++) {
    const scn_node_entry *n = &o->nodes[i];
    scn_buf_adds(out, i ? ",{\"node\":" : "{\"node\":");
    scn_buf_add_json_string(out, n->name, strlen(n->name));
    scn_buf_adds(out, ",\"addr\":");
    scn_buf_add_json_string(out, n->addr, strlen(n->addr));
    scn_buf_adds(out, ",\"worlds\":");
    scn_buf_add_u64(out, n->worlds);
    scn_buf_adds(out, ",\"transforms\":");
    scn_buf_add_u64(out, n->transforms);
    scn_buf_adds(out, ",\"connections\":");
    scn_buf_add_u64(out, n->connections);
    if (n->http[0]) {
      scn_buf_adds(out, ",\"http\":");
      scn_buf_add_json_string(out, n->http, strlen(n->http));
    }
    scn_buf_addc(out, '}');
  }
  scn_buf_addc(out, ']');
}

static void add_names(scn_buf *out, const char *key, const char list[][SCN_NAME_MAX + 1],
                      uint8_t n) {
  scn_buf_adds(out, key);
  scn_buf_addc(out, '[');
  for (uint8_t i = 0; i < n; i++) {
    if (i)
      scn_buf_addc(out, ',');
    scn_buf_add_json_string(out, list[i], strlen(list[i]));
  }
  scn_buf_addc(out, ']');
}

void scn_cluster_world_replicas_json(scn_cluster *cl, const char *world, scn_buf *out) {
  if (cl->srv->cfg.replicas == 0)
    return;
  char group[SCN_NAME_MAX + 1];
  scn_group_of(world, group);
  const scn_group_entry *g = scn_owners_find(&cl->owners, group);
  const scn_replica_set *r = g && g->replicas.known ? &g->replicas : &(scn_replica_set){0};
  add_names(out, ",\"followers\":", r->followers, r->nfollowers);
  add_names(out, ",\"insync\":", r->insync, r->ninsync);
  scn_buf_adds(out, scn__group_durability(cl, group) == SCN_DURABILITY_ASYNC
                        ? ",\"durability\":\"async\""
                        : ",\"durability\":\"sync\"");
}

void scn_cluster_worlds_json(scn_cluster *cl, scn_buf *out, bool first, const scn_acl_rule *rule) {
  scn_owners *o = &cl->owners;
  for (size_t i = 0; i < o->nnodes; i++) {
    const scn_node_entry *n = &o->nodes[i];
    if (strcmp(n->name, cl->self.node) == 0 || !n->world_names)
      continue;
    for (const char *w = n->world_names; *w; w += strlen(w) + 1) {
      if (rule && !scn_acl_allows_world(rule, w))
        continue;
      scn_buf_adds(out, first ? "{\"name\":" : ",{\"name\":");
      first = false;
      scn_buf_add_json_string(out, w, strlen(w));
      scn_buf_adds(out, ",\"node\":");
      scn_buf_add_json_string(out, n->name, strlen(n->name));
      scn_cluster_world_replicas_json(cl, w, out);
      scn_buf_addc(out, '}');
    }
  }
}

int scn_cluster_move(scn_cluster *cl, const char *world, const char *to, scn_move_done done,
                     void *ud, int *code, char *msg, size_t msglen) {
  char group[SCN_NAME_MAX + 1];
  scn_group_of(world, group);
  scn_move_order order = {
      .group = group, .to = to, .done = done, .ud = ud, .limit = (uint64_t)(MOVE_LIMIT_S * 1e9)};
  if (cl->srv->cfg.replicas >= 1)
    return scn__switch_start(cl, &order, code, msg, msglen);
  return scn_owners_move(&cl->owners, &order, code, msg, msglen);
}

void scn_cluster_forget_move(scn_cluster *cl, void *ud) { scn_owners_forget_move(&cl->owners, ud); }

/* ---- the module ---------------------------------------------------------------------------- */

static scn_etcd_options etcd_options(const scn_config *cfg) {
  return (scn_etcd_options){
      .urls = cfg->cluster, .ca = cfg->etcd_ca, .cert = cfg->etcd_cert, .key = cfg->etcd_key};
}

/* The etcd TLS flags go with https:// endpoints, and their files must be usable. */
static bool etcd_tls_valid(const scn_config *cfg, char *err, size_t errlen) {
  const char *given = cfg->etcd_ca[0]     ? "--etcd-ca"
                      : cfg->etcd_cert[0] ? "--etcd-cert"
                      : cfg->etcd_key[0]  ? "--etcd-key"
                                          : NULL;
  if (!scn_etcd_urls_tls(cfg->cluster)) {
    if (given)
      snprintf(err, errlen, "%s needs https:// endpoints in --cluster (etcd over TLS)", given);
    return !given;
  }
  scn_etcd_options opt = etcd_options(cfg);
  char why[256];
  switch (scn_etcd_tls_files_check(&opt, why, sizeof why)) {
  case SCN_ETCD_FILES_OK:
    return true;
  case SCN_ETCD_CA_FILE:
    snprintf(err, errlen, "--etcd-ca %s: %s", cfg->etcd_ca, why);
    return false;
  case SCN_ETCD_CERT_FILE:
    snprintf(err, errlen, "--etcd-cert %s: %s", cfg->etcd_cert, why);
    return false;
  case SCN_ETCD_KEY_FILE:
    snprintf(err, errlen, "--etcd-key %s: %s", cfg->etcd_key, why);
    return false;
  }
  return false;
}

bool scn_cluster_config_valid(const scn_config *cfg, char *err, size_t errlen) {
  char why[256];
  if (!cfg->data_dir[0]) {
    snprintf(err, errlen, "--cluster needs --data DIR (the directory every daemon shares)");
    return false;
  }
  if (!scn_etcd_urls_valid(cfg->cluster, why, sizeof why)) {
    snprintf(err, errlen, "--cluster: %s", why);
    return false;
  }
  if (!etcd_tls_valid(cfg, err, errlen))
    return false;
  if (cfg->node[0] &&
      (!scn_world_name_valid(cfg->node, strlen(cfg->node)) || strcmp(cfg->node, "auto") == 0)) {
    snprintf(err, errlen, "--node: \"%s\" is not a node name (1 to 64 of A-Z a-z 0-9 _ . -)",
             cfg->node);
    return false;
  }
  const char *colon = strrchr(cfg->advertise, ':');
  if (cfg->advertise[0] && (!colon || colon == cfg->advertise || !colon[1] ||
                            strspn(colon + 1, "0123456789") != strlen(colon + 1))) {
    snprintf(err, errlen, "--advertise: \"%s\" is not HOST:PORT", cfg->advertise);
    return false;
  }
  return true;
}

void scn_cluster_node_name(const scn_config *cfg, const char *advertise, char *out, size_t cap) {
  if (cfg->node[0]) {
    snprintf(out, cap, "%s", cfg->node);
    return;
  }
  size_t n = 0;
  for (const char *p = advertise; *p && n + 1 < cap && n < SCN_NAME_MAX; p++)
    out[n++] =
        strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", *p) ? *p : '-';
  out[n] = '\0';
}

static uint64_t monotonic_ns(void *ud) {
  (void)ud;
  return uv_hrtime();
}

static bool serving(void *ud) { return scn__serving(ud); }

static void lease_lost(void *ud, const char *why) { scn__lost_lease(ud, why); }

static void load_changed(void *ud) {
  scn_cluster *cl = ud;
  cl->next_publish = 0;
  cl->next_record = 0;
}

static void before_flush(void *ud) {
  scn__fence_before_flush(ud);
  scn__links_pump(ud);
  scn__sync_check_changed(ud);
  scn__switch_check(ud);
}

/* Every world closed a tick: the followers of the groups served here hear which. */
static void on_world_tick(void *ud) { scn__links_tick(ud); }

/* Runs after the store's (registered first), whose append handed the records on. */
static void after_command(void *ud, const scn_done *d) {
  (void)d;
  scn_cluster *cl = ud;
  cl->sync_conn = NULL;
  if (cl->npush)
    scn__links_push(cl);
}

void scn_cluster_command_from(scn_cluster *cl, scn_conn *c) { scn__sync_command(cl, c); }

static void conn_closed(void *ud, scn_conn *c) {
  scn__fence_conn_closed(ud, c);
  scn__links_conn_closed(ud, c);
  scn__sync_conn_closed(ud, c);
}

scn_cluster *scn_cluster_open(scn_server *srv, const char *node, const char *advertise) {
  scn_cluster *cl = calloc(1, sizeof *cl);
  if (!cl)
    return NULL;
  cl->srv = srv;
  scn_etcd_options opt = etcd_options(&srv->cfg);
  cl->etcd = scn_etcd_open(srv->loop, &opt);
  if (!cl->etcd) {
    free(cl);
    return NULL;
  }
  snprintf(cl->self.node, sizeof cl->self.node, "%s", node);
  snprintf(cl->self.addr, sizeof cl->self.addr, "%s", advertise);
  scn_owners_group_value(&cl->self_value, cl->self.node, cl->self.addr, NULL);
  scn_owner_ops ops = {.ud = cl,
                       .now = monotonic_ns,
                       .serving = serving,
                       .on_disk = scn__on_disk,
                       .load = scn__load_group,
                       .drop = scn__drop_group,
                       .freeze = scn__freeze_group,
                       .unfreeze = scn__unfreeze_group,
                       .send_claim = scn__send_claim,
                       .send_served = scn__send_served,
                       .send_handoff = scn__send_handoff,
                       .send_read = scn__send_read,
                       .lease_lost = lease_lost,
                       .load_changed = load_changed};
  scn_owners_init(&cl->owners, &cl->self, &ops);
  cl->ttl = srv->cfg.lease_ttl;
  cl->ttl_ns = (uint64_t)(cl->ttl * 1e9);
  double margin = cl->ttl / 5 > 0.5 ? cl->ttl / 5 : 0.5;
  cl->margin_ns = (uint64_t)(margin * 1e9);
  scn_readiness_set(&srv->readiness, SCN_UNREADY_UNREGISTERED);
  scn_gstore_set_fence(srv->gstore, scn__fence_may_write, cl);
  if (srv->cfg.replicas >= 1)
    scn_gstore_set_tap(srv->gstore, scn__ship_tap, cl);
  cl->hooks = (scn_hooks){.ud = cl,
                          .after_command = after_command,
                          .before_flush = before_flush,
                          .on_tick = on_world_tick,
                          .conn_closed = conn_closed,
                          .collect_stats = scn__collect_stats};
  scn_server_add_hooks(srv, &cl->hooks);
  uv_timer_init(srv->loop, &cl->timer);
  cl->timer.data = cl;
  uv_timer_start(&cl->timer, on_tick, 0, TICK_MS);
  bool tls = scn_etcd_urls_tls(srv->cfg.cluster);
  scn_log(SCN_LOG_INFO, "cluster: registering", "node=%s addr=%s etcd=%s etcd_tls=%s lease_ttl=%g",
          cl->self.node, cl->self.addr, srv->cfg.cluster,
          !tls                    ? "off"
          : srv->cfg.etcd_cert[0] ? "on+client-certificate"
                                  : "on",
          cl->ttl);
  return cl;
}

static void on_timer_closed(uv_handle_t *h) { free(h->data); }

void scn_cluster_close(scn_cluster *cl) {
  if (!cl)
    return;
  cl->closing = true;
  scn_server_remove_hooks(cl->srv, &cl->hooks);
  if (cl->srv->gstore) /* NULL when the store closed first */
    scn_gstore_set_tap(cl->srv->gstore, NULL, NULL);
  scn_owners_free(&cl->owners, "the daemon is stopping");
  scn__ship_free(cl);
  scn__sync_free(cl);
  scn__follow_free(cl);
  scn__promote_free(cl);
  free(cl->acks);
  scn_buf_free(&cl->self_value);
  scn_etcd_close(cl->etcd);
  uv_timer_stop(&cl->timer);
  uv_close((uv_handle_t *)&cl->timer, on_timer_closed);
}

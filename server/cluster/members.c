/* Membership: the steps of registration (a lease, the node key, the migration lock, a range of
 * entity ids, the first full read), the lease's renewals, the node key republished with this
 * daemon's load, more entity ids when they run low, and the release at SIGTERM. */
#include "cluster/cluster_internal.h"

#include "net/http.h"
#include "ops/log.h"
#include "store/groups.h"
#include "store/snapshot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDS_KEY SCN_KEYS_PREFIX "ids/next"
#define MIGRATE_KEY SCN_KEYS_PREFIX "migrate"
#define RETRY_MS 300 /* a failed step of registration is tried again after this */

/* The context of answers that need only the module. */
typedef struct cluster_ctx {
  scn_cluster *cl;
} cluster_ctx;

static scn_kv_reply reply_to(const scn_cluster *cl, scn_kv_done done, const void *ctx,
                             size_t ctx_size) {
  return (scn_kv_reply){
      .timeout_s = scn__request_timeout(cl), .done = done, .ctx = ctx, .ctx_size = ctx_size};
}

/* ---- the steps ----------------------------------------------------------------------------- */

static void step_failed(scn_cluster *cl, const char *what, const char *why) {
  cl->step_busy = false;
  cl->step_after = uv_hrtime() + (uint64_t)RETRY_MS * 1000000;
  if (cl->step_error != what)
    scn_log(SCN_LOG_WARN, "cluster: cannot register yet; retrying", "step=\"%s\" reason=\"%s\"",
            what, why ? why : "malformed reply");
  cl->step_error = what;
}

/* A step is done: the next one starts. */
static void step_done(scn_cluster *cl, scn_reg_step next) {
  cl->step = next;
  cl->step_busy = false;
  cl->step_error = NULL;
  scn__step_next(cl);
}

void scn__lost_lease(scn_cluster *cl, const char *why) {
  scn_log(SCN_LOG_ERROR, "cluster: lost the lease; registering again", "reason=\"%s\"", why);
  scn_owners_lose_all(&cl->owners, why);
  cl->self.registered = false;
  cl->self.lease = 0;
  cl->confirmed = 0;
  scn_readiness_set(&cl->srv->readiness, SCN_UNREADY_UNREGISTERED);
  scn_etcd_cancel(cl->watch);
  cl->watch = NULL;
  cl->step = SCN_REG_LEASE;
  cl->step_busy = false;
}

/* ---- the lease ----------------------------------------------------------------------------- */

typedef struct renewal_ctx {
  scn_cluster *cl;
  uint64_t sent;
  int64_t lease; /* the lease renewed (a newer one makes the answer moot) */
} renewal_ctx;

static void on_keepalive(void *ctx, const scn_kv_answer *a) {
  const renewal_ctx *c = ctx;
  scn_cluster *cl = c->cl;
  cl->keepalive_busy = false;
  if (c->lease != cl->self.lease)
    return;
  if (a->why) {
    cl->stats.renewal_failures++;
    scn_log(SCN_LOG_WARN, "cluster: lease renewal failed", "reason=\"%s\" fenced=%s", a->why,
            scn__fence_up(cl) ? "no" : "yes");
    return;
  }
  if (a->ttl <= 0) {
    cl->stats.renewal_failures++;
    scn__lost_lease(cl, "etcd says the lease expired");
    return;
  }
  if (c->sent > cl->confirmed)
    cl->confirmed = c->sent;
  cl->stats.renewals++;
  if (cl->self.registered)
    scn_owners_adopt_pending(&cl->owners); /* loads that waited for a fresh lease */
}

void scn__keepalive(scn_cluster *cl) {
  if (cl->keepalive_busy || !cl->self.lease)
    return;
  renewal_ctx c = {.cl = cl, .sent = uv_hrtime(), .lease = cl->self.lease};
  scn_kv_reply r = reply_to(cl, on_keepalive, &c, sizeof c);
  cl->keepalive_busy = scn_etcd_lease_keepalive(cl->etcd, cl->self.lease, &r);
}

typedef struct grant_ctx {
  scn_cluster *cl;
  uint64_t sent;
} grant_ctx;

static void on_granted(void *ctx, const scn_kv_answer *a) {
  const grant_ctx *c = ctx;
  scn_cluster *cl = c->cl;
  if (a->lease == 0 || a->ttl <= 0) {
    step_failed(cl, "lease grant", a->why);
    return;
  }
  cl->self.lease = a->lease;
  cl->confirmed = c->sent;
  if ((double)a->ttl < cl->ttl) {
    cl->ttl = (double)a->ttl;
    cl->ttl_ns = (uint64_t)(cl->ttl * 1e9);
  }
  step_done(cl, SCN_REG_NODE);
}

static void grant(scn_cluster *cl) {
  grant_ctx c = {.cl = cl, .sent = uv_hrtime()};
  scn_kv_reply r = reply_to(cl, on_granted, &c, sizeof c);
  if (!scn_etcd_lease_grant(cl->etcd, (int64_t)ceil(cl->ttl), &r))
    step_failed(cl, "lease grant", "cannot send");
}

/* ---- the node key -------------------------------------------------------------------------- */

/* Its address and its load (what owners.c reads back). */
static void node_value(scn_cluster *cl, scn_buf *v) {
  scn_server *srv = cl->srv;
  const char *addr = cl->self.addr;
  scn_buf_adds(v, "{\"node\":");
  scn_buf_add_json_string(v, cl->self.node, strlen(cl->self.node));
  scn_buf_adds(v, ",\"addr\":");
  scn_buf_add_json_string(v, addr, strlen(addr));
  scn_buf_adds(v, ",\"worlds\":");
  scn_buf_add_u64(v, scn__worlds_served(cl));
  scn_buf_adds(v, ",\"transforms\":");
  scn_buf_add_u64(v, scn_scene_transform_count(srv->scene));
  scn_buf_adds(v, ",\"connections\":");
  scn_buf_add_u64(v, srv->nconns);
  char http[128] = "";
  int port = scn_http_port(srv);
  const char *colon = strrchr(addr, ':');
  if (port && colon)
    snprintf(http, sizeof http, "%.*s:%d", (int)(colon - addr), addr, port);
  scn_buf_adds(v, ",\"http\":");
  scn_buf_add_json_string(v, http, strlen(http));
  scn_buf_adds(v, ",\"world_names\":[");
  bool first = true;
  for (size_t i = 0; i < scn_world_count(srv->scene); i++) {
    const char *name = scn_world_name(scn_world_at(srv->scene, i));
    char group[SCN_NAME_MAX + 1];
    scn_group_of(name, group);
    if (cl->nfollows && scn__follows(cl, group))
      continue; /* its owner publishes it */
    if (!first)
      scn_buf_addc(v, ',');
    first = false;
    scn_buf_add_json_string(v, name, strlen(name));
  }
  scn_buf_adds(v, "]}");
}

static void on_registering_published(void *ctx, const scn_kv_answer *a) {
  scn_cluster *cl = ((const cluster_ctx *)ctx)->cl;
  if (a->why) {
    step_failed(cl, "node key", a->why);
    return;
  }
  /* Every daemon passes the migration lock before it takes ids, even when it finds no old
   * layout: another may have just moved the old files without having moved the counter yet. */
  step_done(cl, SCN_REG_MIGRATE);
}

void scn__publish_node(scn_cluster *cl, scn_publish why) {
  char key[SCN_NAME_MAX + 64];
  snprintf(key, sizeof key, "%s%s", SCN_NODES_PREFIX, cl->self.node);
  scn_buf v = {0};
  node_value(cl, &v);
  cluster_ctx c = {cl};
  scn_kv_reply r =
      reply_to(cl, why == SCN_PUBLISH_REGISTERING ? on_registering_published : NULL, &c, sizeof c);
  scn_kv_write w = {.key = key, .value = v.data, .value_len = v.len, .lease = cl->self.lease};
  bool sent = !v.failed && scn_etcd_put(cl->etcd, &w, &r);
  scn_buf_free(&v);
  if (!sent && why == SCN_PUBLISH_REGISTERING)
    step_failed(cl, "node key", "cannot send");
}

/* ---- migration of the standalone layout ---------------------------------------------------- */

static void release_migrate_lock(scn_cluster *cl) {
  cl->migrate_lock = false;
  scn_kv_reply r = reply_to(cl, NULL, NULL, 0);
  scn_etcd_delete(cl->etcd, MIGRATE_KEY, &r);
}

/* The lock is held: the old layout (if it is still there) is split into groups here, and the
 * lock stays until this daemon has moved the id counter past the old ids, so that no daemon
 * ever gets a range that holds one (they wait for the lock before their own ranges). */
static void on_migrate_lock(void *ctx, const scn_kv_answer *a) {
  scn_cluster *cl = ((const cluster_ctx *)ctx)->cl;
  if (a->why) {
    step_failed(cl, "migration lock", a->why);
    return;
  }
  if (!a->succeeded) {
    step_failed(cl, "migration by another node", "waiting for it");
    cl->step_after = uv_hrtime() + 20 * 1000000ull; /* held for a moment only */
    return;
  }
  cl->migrate_lock = true;
  char err[SCN_PATH_MSG_MAX];
  uint32_t max_slot = 0;
  if (scn_gstore_has_old_layout(cl->srv->gstore)) {
    if (scn_gstore_migrate(cl->srv->gstore, &max_slot, err, sizeof err) != 0)
      scn_log(SCN_LOG_ERROR, "cluster: migration failed", "error=\"%s\"", err);
    else
      cl->ids_floor = max_slot / SCN_ID_RANGE + 1;
  }
  step_done(cl, SCN_REG_IDS);
}

static void migrate_lock(scn_cluster *cl) {
  cluster_ctx c = {cl};
  scn_kv_reply r = reply_to(cl, on_migrate_lock, &c, sizeof c);
  scn_kv_write w = {.key = MIGRATE_KEY,
                    .value = cl->self.node,
                    .value_len = strlen(cl->self.node),
                    .lease = cl->self.lease};
  if (!scn_etcd_put_if_unchanged(cl->etcd, &w, 0, &r))
    step_failed(cl, "migration lock", "cannot send");
}

/* ---- entity id ranges ---------------------------------------------------------------------- */

/* Nobody else may take ids meanwhile: a failure of the step is retried by the tick. */
static void ids_failed(scn_cluster *cl, const char *why) {
  cl->ids_busy = false;
  if (cl->step == SCN_REG_IDS)
    step_failed(cl, "entity ids", why);
}

typedef struct ids_ctx {
  scn_cluster *cl;
  int64_t first_range; /* the range the txn reserves */
} ids_ctx;

static void on_ids_reserved(void *ctx, const scn_kv_answer *a) {
  const ids_ctx *c = ctx;
  scn_cluster *cl = c->cl;
  int64_t first_range = c->first_range;
  cl->ids_busy = false;
  if (a->why || !a->succeeded) {
    if (a->why)
      scn_log(SCN_LOG_WARN, "etcd: cannot reserve entity ids", "reason=\"%s\"", a->why);
    if (cl->step == SCN_REG_IDS)
      step_failed(cl, "entity ids", a->why ? a->why : "raced; again");
    return; /* another node took the range: the next tick asks again */
  }
  if (first_range < 0 || (uint64_t)first_range >= (UINT32_MAX - 1) / SCN_ID_RANGE) {
    scn_log(SCN_LOG_ERROR, "cluster: entity ids are used up", "range=%lld", (long long)first_range);
    return;
  }
  uint32_t first = (uint32_t)first_range * SCN_ID_RANGE + 1;
  scn_entity_add_slots(cl->srv->scene, first, SCN_ID_RANGE - (first_range == 0));
  if (cl->migrate_lock)
    release_migrate_lock(cl); /* the counter is past the migrated ids now */
  scn_log(SCN_LOG_DEBUG, "entity ids reserved", "first=%u count=%u", first, SCN_ID_RANGE);
  if (cl->step == SCN_REG_IDS)
    step_done(cl, SCN_REG_SYNC);
}

/* The counter's value: the next range nobody has; -1 when it holds no number. */
static long long counter_value(const scn_kv *kv) {
  if (!kv)
    return 0;
  if (!kv->value || kv->value_len >= 32)
    return -1;
  char *end;
  long long next = strtoll(kv->value, &end, 10);
  return *end ? -1 : next;
}

static void on_ids_read(void *ctx, const scn_kv_answer *a) {
  scn_cluster *cl = ((const cluster_ctx *)ctx)->cl;
  if (a->why) {
    ids_failed(cl, a->why);
    return;
  }
  const scn_kv *kv = a->nkvs ? &a->kvs[0] : NULL;
  long long next = counter_value(kv);
  if (next < 0) {
    scn_log(SCN_LOG_ERROR, "etcd: the entity id counter holds no number", "key=%s", IDS_KEY);
    ids_failed(cl, "malformed counter");
    return;
  }
  if (next < cl->ids_floor)
    next = cl->ids_floor;
  /* Advanced only if nobody did since the read. */
  char value[32];
  int n = snprintf(value, sizeof value, "%lld", next + 1);
  ids_ctx c = {.cl = cl, .first_range = next};
  scn_kv_reply r = reply_to(cl, on_ids_reserved, &c, sizeof c);
  scn_kv_write w = {.key = IDS_KEY, .value = value, .value_len = (size_t)n};
  if (!scn_etcd_put_if_unchanged(cl->etcd, &w, kv ? kv->mod_revision : 0, &r))
    ids_failed(cl, "cannot send");
}

void scn__ids_fetch(scn_cluster *cl) {
  if (cl->ids_busy)
    return;
  cluster_ctx c = {cl};
  scn_kv_reply r = reply_to(cl, on_ids_read, &c, sizeof c);
  cl->ids_busy = scn_etcd_range(cl->etcd, IDS_KEY, &r);
  if (!cl->ids_busy && cl->step == SCN_REG_IDS)
    step_failed(cl, "entity ids", "cannot send");
}

/* ---- registration -------------------------------------------------------------------------- */

void scn__step_next(scn_cluster *cl) {
  if (cl->step_busy || cl->step == SCN_REG_DONE || cl->closing || cl->releasing ||
      uv_hrtime() < cl->step_after)
    return;
  cl->step_busy = true;
  switch (cl->step) {
  case SCN_REG_LEASE:
    grant(cl);
    break;
  case SCN_REG_NODE:
    scn__publish_node(cl, SCN_PUBLISH_REGISTERING);
    break;
  case SCN_REG_MIGRATE:
    migrate_lock(cl);
    break;
  case SCN_REG_IDS:
    scn__ids_fetch(cl);
    break;
  case SCN_REG_SYNC:
    scn__sync_start(cl);
    if (!cl->syncing)
      step_failed(cl, "read the cluster", "cannot send");
    break;
  case SCN_REG_DONE:
    break;
  }
}

/* ---- SIGTERM ------------------------------------------------------------------------------- */

static void on_revoked(void *ctx, const scn_kv_answer *a) {
  scn_cluster *cl = ((const cluster_ctx *)ctx)->cl;
  if (a->why)
    scn_log(SCN_LOG_WARN, "cluster: cannot revoke the lease; the groups go when it expires",
            "reason=\"%s\"", a->why);
  else
    scn_log(SCN_LOG_INFO, "cluster: groups released", "node=%s", cl->self.node);
  cl->releasing = false;
}

void scn__release_go_on(scn_cluster *cl) {
  if (!cl->releasing || cl->revoking || scn__replicas_recording(cl))
    return;
  if (!cl->final_recorded) {
    if (uv_hrtime() < cl->release_wait_until && scn__replicas_catching_up(cl))
      return; /* a follower's ack, or the next poll, comes back here */
    cl->final_recorded = true;
    if (scn__replicas_record_final(cl) > 0)
      return;
  }
  /* Revoking the lease deletes every key bound to it (the node's and its groups'), which the
   * others see at once. */
  cl->revoking = true;
  cluster_ctx c = {cl};
  scn_kv_reply r = {.timeout_s = 2.0, .done = on_revoked, .ctx = &c, .ctx_size = sizeof c};
  cl->releasing = scn_etcd_lease_revoke(cl->etcd, cl->self.lease, &r);
}

void scn_cluster_release_all(scn_cluster *cl) {
  if (cl->releasing || cl->self.released)
    return;
  /* Each group is frozen and saved, its followers recorded once more (a follower with every
   * record joins the in-sync set, to take the group over at once), then the lease goes. */
  uint64_t bytes;
  for (scn_group_entry *g = scn_owners_first(&cl->owners); g; g = scn_owners_next(&cl->owners, g))
    if (g->state == SCN_GROUP_OWNED) {
      g->state = SCN_GROUP_FROZEN;
      if (scn_gstore_checkpoint(cl->srv->gstore, g->name, &bytes) != 0)
        scn_log(SCN_LOG_ERROR, "cannot save a group before releasing it", "group=%s", g->name);
    }
  cl->self.released = true;
  scn_readiness_set(&cl->srv->readiness, SCN_UNREADY_RELEASED);
  if (!cl->self.lease)
    return;
  cl->releasing = true;
  cl->release_wait_until = uv_hrtime() + cl->srv->cfg.replica_timeout_ms * 1000000u;
  scn__release_go_on(cl);
}

bool scn_cluster_busy(scn_cluster *cl) {
  if (!cl)
    return false;
  scn__release_go_on(cl); /* (the wait for followers may be over) */
  return cl->releasing;
}

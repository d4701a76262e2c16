/* The ownership cache: every group's key and every live node, as etcd's keys say (see
 * owners.h). */
#include "cluster/owners.h"

#include "ops/json_arena.h"
#include "ops/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

void scn_owners_init(scn_owners *o, const scn_self *self, const scn_owner_ops *ops) {
  memset(o, 0, sizeof *o);
  o->self = self;
  o->ops = *ops;
}

void scn_owners_free(scn_owners *o, const char *why) {
  for (size_t b = 0; b < SCN_OWNER_BUCKETS; b++)
    while (o->buckets[b]) {
      scn_group_entry *g = o->buckets[b];
      o->buckets[b] = g->next;
      scn_owners_wake(g);
      if (g->mv && g->mv->done)
        g->mv->done(g->mv->ud,
                    &(scn_move_answer){.ok = false, .code = SCN_W_UNAVAILABLE, .message = why});
      free(g->mv);
      free(g->handoff_ticks);
      free(g);
    }
  for (size_t i = 0; i < o->nnodes; i++)
    free(o->nodes[i].world_names);
  free(o->nodes);
  o->nodes = NULL;
  o->nnodes = o->nodes_cap = 0;
}

scn_group_entry *scn_owners_find(scn_owners *o, const char *group) {
  for (scn_group_entry *g = o->buckets[hash(group) % SCN_OWNER_BUCKETS]; g; g = g->next)
    if (strcmp(g->name, group) == 0)
      return g;
  return NULL;
}

scn_group_entry *scn_owners_get(scn_owners *o, const char *group) {
  scn_group_entry *g = scn_owners_find(o, group);
  if (g)
    return g;
  g = calloc(1, sizeof *g);
  if (!g)
    return NULL;
  snprintf(g->name, sizeof g->name, "%s", group);
  size_t b = hash(group) % SCN_OWNER_BUCKETS;
  g->next = o->buckets[b];
  o->buckets[b] = g;
  return g;
}

static scn_group_entry *first_from(scn_owners *o, size_t bucket) {
  for (size_t b = bucket; b < SCN_OWNER_BUCKETS; b++)
    if (o->buckets[b])
      return o->buckets[b];
  return NULL;
}

scn_group_entry *scn_owners_first(scn_owners *o) { return first_from(o, 0); }

scn_group_entry *scn_owners_next(scn_owners *o, scn_group_entry *g) {
  return g->next ? g->next : first_from(o, hash(g->name) % SCN_OWNER_BUCKETS + 1);
}

scn_node_entry *scn_owners_node(scn_owners *o, const char *node) {
  for (size_t i = 0; i < o->nnodes; i++)
    if (strcmp(o->nodes[i].name, node) == 0)
      return &o->nodes[i];
  return NULL;
}

size_t scn_owners_count(scn_owners *o, scn_group_state state) {
  size_t n = 0;
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g))
    n += g->state == state;
  return n;
}

bool scn_owners_wait(scn_group_entry *g, scn_cluster_wake wake, void *ud) {
  scn_waiter *w = calloc(1, sizeof *w);
  if (!w)
    return false;
  *w = (scn_waiter){.next = g->waiters, .wake = wake, .ud = ud};
  g->waiters = w;
  return true;
}

void scn_owners_wake(scn_group_entry *g) {
  while (g->waiters) {
    scn_waiter *w = g->waiters;
    g->waiters = w->next;
    w->wake(w->ud);
    free(w);
  }
}

void scn__owners_log_owner(const scn_group_entry *g, const char *old, const char *new_,
                           int64_t epoch) {
  scn_log(SCN_LOG_INFO, "group owner changed", "group=%s old=%s new=%s epoch=%lld", g->name,
          old && old[0] ? old : "none", new_ && new_[0] ? new_ : "none", (long long)epoch);
}

/* ---- a group's key ------------------------------------------------------------------------- */

void scn_owners_group_value(scn_buf *out, const char *node, const char *addr, const char *from) {
  scn_buf_adds(out, "{\"node\":");
  scn_buf_add_json_string(out, node, strlen(node));
  scn_buf_adds(out, ",\"addr\":");
  scn_buf_add_json_string(out, addr, strlen(addr));
  if (from) {
    scn_buf_adds(out, ",\"from\":");
    scn_buf_add_json_string(out, from, strlen(from));
  }
  scn_buf_addc(out, '}');
}

static cJSON *parse_value(const scn_kv *kv) {
  return kv->value ? scn_json_heap_parse(kv->value, kv->value_len) : NULL;
}

/* A switchover's "ticks" ({"world":T,...}) as JSON text on the heap; NULL when there are none. */
static char *ticks_of(const cJSON *v) {
  const cJSON *ticks = cJSON_GetObjectItemCaseSensitive(v, "ticks"), *t;
  if (!cJSON_IsObject(ticks))
    return NULL;
  scn_buf out = {0};
  scn_buf_addc(&out, '{');
  cJSON_ArrayForEach(t, ticks) {
    if (!cJSON_IsNumber(t) || t->valuedouble < 0 || !t->string)
      continue;
    if (out.len > 1)
      scn_buf_addc(&out, ',');
    scn_buf_add_json_string(&out, t->string, strlen(t->string));
    scn_buf_addc(&out, ':');
    scn_buf_add_u64(&out, (uint64_t)t->valuedouble);
  }
  scn_buf_adds(&out, "}");
  scn_buf_addc(&out, '\0');
  if (!out.failed)
    return out.data;
  scn_buf_free(&out);
  return NULL;
}

void scn__owners_group_put(scn_owners *o, scn_group_entry *g, const scn_kv *kv) {
  if (kv->mod_revision && kv->mod_revision < g->mod_rev)
    return; /* older than what the cache holds */
  cJSON *v = parse_value(kv);
  const cJSON *node = cJSON_GetObjectItemCaseSensitive(v, "node");
  const cJSON *addr = cJSON_GetObjectItemCaseSensitive(v, "addr");
  if (!cJSON_IsString(node) ||
      !scn_world_name_valid(node->valuestring, strlen(node->valuestring))) {
    scn_log(SCN_LOG_WARN, "etcd: a group key with a malformed value", "group=%s", g->name);
    scn_json_heap_delete(v);
    return;
  }
  char old[SCN_NAME_MAX + 1];
  snprintf(old, sizeof old, "%s", g->key ? g->node : "");
  g->key = true;
  snprintf(g->node, sizeof g->node, "%s", node->valuestring);
  snprintf(g->addr, sizeof g->addr, "%s", cJSON_IsString(addr) ? addr->valuestring : "");
  g->lease = kv->lease;
  g->mod_rev = kv->mod_revision;
  g->handoff = cJSON_GetObjectItemCaseSensitive(v, "from") != NULL;
  free(g->handoff_ticks);
  g->handoff_ticks = g->handoff ? ticks_of(v) : NULL;
  g->nfollowers = scn__owners_node_list(v, "followers", g->followers);
  g->ninsync = scn__owners_node_list(v, "insync", g->insync);
  scn_json_heap_delete(v);
  if (strcmp(g->node, o->self->node) == 0)
    scn__owners_adopt(o, g, old[0] ? old : NULL);
  else if (g->mv && strcmp(g->node, g->mv->to) == 0)
    scn__owners_handed_off(o, g, kv->mod_revision); /* seen before the txn's own answer */
  else if (g->state == SCN_GROUP_OWNED || g->state == SCN_GROUP_FROZEN)
    scn__owners_lose(o, g, "its key names another node");
  scn__owners_move_check_confirmed(o, g);
  if (g->state != SCN_GROUP_CLAIMING) /* a claim's waiters wait for its answer */
    scn_owners_wake(g);
}

/* rev: the revision of the delete, or of a read that did not find the key (0: unknown). */
static void group_deleted(scn_owners *o, scn_group_entry *g, int64_t rev) {
  if (rev && rev < g->mod_rev)
    return; /* older than what the cache holds: a claim's answer came before the watch's event */
  if (rev)
    g->mod_rev = rev; /* and a put older than the delete, read before it, is no longer taken */
  bool had_key = g->key;
  if (had_key)
    snprintf(g->prev, sizeof g->prev, "%s", g->node);
  g->key = false;
  g->node[0] = g->addr[0] = '\0';
  g->handoff = false;
  g->nfollowers = g->ninsync = 0;
  if (o->self->released) {
    g->state = SCN_GROUP_NONE; /* released at SIGTERM: nothing more happens here before the exit */
    return;
  }
  if (g->state == SCN_GROUP_OWNED || g->state == SCN_GROUP_FROZEN)
    scn__owners_lose(o, g, "its key was deleted (the lease expired)");
  scn_owners_wake(g);
  /* An owner went away: the live daemons race to claim what it had. */
  if (had_key && o->ops.serving(o->ops.ud) && o->ops.on_disk(o->ops.ud, g->name))
    scn_owners_claim(o, g);
}

/* ---- a node's key -------------------------------------------------------------------------- */

static uint64_t figure(const cJSON *v, const char *name) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(v, name);
  return cJSON_IsNumber(f) ? (uint64_t)f->valuedouble : 0;
}

/* Kept as "name\0name\0...\0" for world.list (NULL when out of memory). */
static char *world_names(const cJSON *v) {
  const cJSON *names = cJSON_GetObjectItemCaseSensitive(v, "world_names"), *w;
  scn_buf list = {0};
  cJSON_ArrayForEach(w, names) {
    if (cJSON_IsString(w) && scn_world_name_valid(w->valuestring, strlen(w->valuestring)))
      scn_buf_add(&list, w->valuestring, strlen(w->valuestring) + 1);
  }
  scn_buf_addc(&list, '\0');
  if (!list.failed)
    return list.data;
  scn_buf_free(&list);
  return NULL;
}

/* The node's key was written: its address and its load, as it published them. */
static void node_seen(scn_owners *o, const char *name, const scn_kv *kv) {
  cJSON *v = parse_value(kv);
  const cJSON *addr = cJSON_GetObjectItemCaseSensitive(v, "addr");
  if (!cJSON_IsObject(v) || !cJSON_IsString(addr)) {
    scn_log(SCN_LOG_WARN, "etcd: a node key with a malformed value", "node=%s", name);
    scn_json_heap_delete(v);
    return;
  }
  scn_node_entry *n = scn_owners_node(o, name);
  if (!n) {
    scn_node_entry *nodes = scn_array_grow(o->nodes, &o->nodes_cap, sizeof *nodes, o->nnodes + 1);
    if (!nodes) {
      scn_json_heap_delete(v);
      return;
    }
    o->nodes = nodes;
    n = &o->nodes[o->nnodes++];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
  }
  snprintf(n->addr, sizeof n->addr, "%s", addr->valuestring);
  const cJSON *http = cJSON_GetObjectItemCaseSensitive(v, "http");
  snprintf(n->http, sizeof n->http, "%s", cJSON_IsString(http) ? http->valuestring : "");
  n->lease = kv->lease;
  n->worlds = figure(v, "worlds");
  n->transforms = figure(v, "transforms");
  n->connections = figure(v, "connections");
  free(n->world_names);
  n->world_names = world_names(v);
  scn_json_heap_delete(v);
}

static void node_gone(scn_owners *o, const char *name) {
  scn_node_entry *n = scn_owners_node(o, name);
  if (!n)
    return;
  free(n->world_names);
  *n = o->nodes[--o->nnodes];
}

/* ---- events -------------------------------------------------------------------------------- */

/* The group a key names (NULL when it names none). */
static const char *group_of_key(const char *key) {
  if (strncmp(key, SCN_GROUPS_PREFIX, strlen(SCN_GROUPS_PREFIX)) != 0)
    return NULL;
  const char *name = key + strlen(SCN_GROUPS_PREFIX);
  return scn_world_name_valid(name, strlen(name)) && !strchr(name, '.') ? name : NULL;
}

static const char *replicas_of_key(const char *key) {
  if (strncmp(key, SCN_REPLICAS_PREFIX, strlen(SCN_REPLICAS_PREFIX)) != 0)
    return NULL;
  const char *name = key + strlen(SCN_REPLICAS_PREFIX);
  return scn_world_name_valid(name, strlen(name)) && !strchr(name, '.') ? name : NULL;
}

static const char *node_of_key(const char *key) {
  if (strncmp(key, SCN_NODES_PREFIX, strlen(SCN_NODES_PREFIX)) != 0)
    return NULL;
  const char *name = key + strlen(SCN_NODES_PREFIX);
  return scn_world_name_valid(name, strlen(name)) ? name : NULL;
}

static void apply(scn_owners *o, const scn_kv *kv, scn_kv_change change) {
  if (!kv->key)
    return;
  const char *name;
  if ((name = group_of_key(kv->key))) {
    scn_group_entry *g =
        change == SCN_KV_DELETE ? scn_owners_find(o, name) : scn_owners_get(o, name);
    if (!g)
      return;
    if (change == SCN_KV_DELETE)
      group_deleted(o, g, kv->mod_revision);
    else
      scn__owners_group_put(o, g, kv);
  } else if ((name = replicas_of_key(kv->key))) {
    scn_group_entry *g =
        change == SCN_KV_DELETE ? scn_owners_find(o, name) : scn_owners_get(o, name);
    if (g && change == SCN_KV_DELETE)
      scn__owners_replicas_deleted(g, kv->mod_revision);
    else if (g)
      scn__owners_replicas_put(o, g, kv);
  } else if ((name = node_of_key(kv->key))) {
    if (change == SCN_KV_PUT)
      node_seen(o, name, kv);
    else if (strcmp(name, o->self->node) == 0 && o->self->registered && !o->self->released)
      o->ops.lease_lost(o->ops.ud, "this node's key was deleted");
    else
      node_gone(o, name);
  }
}

void scn_owners_watched(scn_owners *o, const scn_kv_event *ev) {
  if (ev->kv.mod_revision > o->revision)
    o->revision = ev->kv.mod_revision;
  apply(o, &ev->kv, ev->change);
}

bool scn_owners_reread(scn_owners *o, int64_t revision, const scn_kv *kvs, size_t n) {
  o->revision = revision;
  uint64_t read = ++o->reads;
  bool self_seen = false;
  for (size_t i = 0; i < n; i++) {
    const scn_kv *kv = &kvs[i];
    if (!kv->key)
      continue;
    apply(o, kv, SCN_KV_PUT);
    const char *name;
    scn_group_entry *g;
    scn_node_entry *node;
    if ((name = group_of_key(kv->key)) && (g = scn_owners_find(o, name)))
      g->seen_in_read = read;
    if ((name = replicas_of_key(kv->key)) && (g = scn_owners_find(o, name)))
      g->replicas_seen_in_read = read;
    if ((name = node_of_key(kv->key))) {
      if ((node = scn_owners_node(o, name)))
        node->seen_in_read = read;
      self_seen |= strcmp(name, o->self->node) == 0;
    }
  }
  /* What the cache holds and the read did not find is gone, as of the read's revision. */
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g))
    if (g->key && g->seen_in_read != read)
      group_deleted(o, g, revision);
  for (scn_group_entry *g = scn_owners_first(o); g; g = scn_owners_next(o, g))
    if ((g->replicas.known || g->replicas.ended) && g->replicas_seen_in_read != read)
      scn__owners_replicas_deleted(g, revision);
  for (size_t i = 0; i < o->nnodes;) {
    if (o->nodes[i].seen_in_read == read)
      i++;
    else
      node_gone(o, o->nodes[i].name);
  }
  return self_seen;
}

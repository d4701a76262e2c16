/* The ownership core's side of replicas: which nodes a group's followers should be, from the
 * cache alone (no etcd, store or loop), so tests drive it with made-up keys. */
#include "cluster/owners.h"

#include "ops/json_arena.h"
#include "ops/log.h"

#include <stdio.h>
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

/* ---- the records: a group key's followers, and the replicas key ---------------------------- */

uint8_t scn__owners_node_list(const cJSON *v, const char *member, char out[][SCN_NAME_MAX + 1]) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, member), *item;
  uint8_t n = 0;
  if (!cJSON_IsArray(list))
    return 0;
  cJSON_ArrayForEach(item, list) {
    if (n < SCN_REPLICAS_MAX && cJSON_IsString(item) &&
        scn_world_name_valid(item->valuestring, strlen(item->valuestring)))
      memcpy(out[n++], item->valuestring, strlen(item->valuestring) + 1);
  }
  return n;
}

static void add_list(scn_buf *out, const char *member, const char names[][SCN_NAME_MAX + 1],
                     size_t n) {
  scn_buf_adds(out, ",\"");
  scn_buf_adds(out, member);
  scn_buf_adds(out, "\":[");
  for (size_t i = 0; i < n; i++) {
    if (i)
      scn_buf_addc(out, ',');
    scn_buf_add_json_string(out, names[i], strlen(names[i]));
  }
  scn_buf_addc(out, ']');
}

void scn_owners_replicas_value(scn_buf *out, const scn_replica_set *r) {
  char epoch[32];
  snprintf(epoch, sizeof epoch, "{\"epoch\":%lld", (long long)r->epoch);
  scn_buf_adds(out, epoch);
  if (r->owner[0]) {
    scn_buf_adds(out, ",\"owner\":");
    scn_buf_add_json_string(out, r->owner, strlen(r->owner));
  }
  if (r->ended)
    scn_buf_adds(out, ",\"ended\":true");
  add_list(out, "followers", r->followers, r->nfollowers);
  add_list(out, "insync", r->insync, r->ninsync);
  if (r->tick) {
    scn_buf_adds(out, ",\"tick\":");
    scn_buf_add_u64(out, r->tick);
  }
  if (r->lag_ticks) {
    scn_buf_adds(out, ",\"lag_ticks\":");
    scn_buf_add_u64(out, r->lag_ticks);
  }
  scn_buf_adds(out, r->durability == SCN_DURABILITY_ASYNC ? ",\"durability\":\"async\"}"
                                                          : ",\"durability\":\"sync\"}");
}

void scn_owners_group_value_with(scn_buf *out, const char *node, const char *addr,
                                 const scn_replica_set *r) {
  scn_buf_adds(out, "{\"node\":");
  scn_buf_add_json_string(out, node, strlen(node));
  scn_buf_adds(out, ",\"addr\":");
  scn_buf_add_json_string(out, addr, strlen(addr));
  add_list(out, "followers", r->followers, r->nfollowers);
  add_list(out, "insync", r->insync, r->ninsync);
  scn_buf_addc(out, '}');
}

/* A count member of v: 0 when absent or not one. */
static uint64_t count(const cJSON *v, const char *member) {
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(v, member);
  return cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble < 9007199254740992.0
             ? (uint64_t)n->valuedouble
             : 0;
}

bool scn_owners_replicas_parse(const char *value, size_t len, scn_replica_set *r) {
  cJSON *v = value ? scn_json_heap_parse(value, len) : NULL;
  const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(v, "epoch");
  const cJSON *durability = cJSON_GetObjectItemCaseSensitive(v, "durability");
  const cJSON *owner = cJSON_GetObjectItemCaseSensitive(v, "owner");
  bool ok = cJSON_IsNumber(epoch) && epoch->valuedouble >= 0 &&
            (!durability ||
             (cJSON_IsString(durability) && (strcmp(durability->valuestring, "sync") == 0 ||
                                             strcmp(durability->valuestring, "async") == 0)));
  if (ok) {
    r->epoch = (int64_t)epoch->valuedouble;
    r->durability = durability && strcmp(durability->valuestring, "async") == 0
                        ? SCN_DURABILITY_ASYNC
                        : SCN_DURABILITY_SYNC;
    r->nfollowers = scn__owners_node_list(v, "followers", r->followers);
    r->ninsync = scn__owners_node_list(v, "insync", r->insync);
    r->tick = count(v, "tick");
    r->lag_ticks = count(v, "lag_ticks");
    r->ended = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "ended"));
    r->owner[0] = '\0';
    if (cJSON_IsString(owner) &&
        scn_world_name_valid(owner->valuestring, strlen(owner->valuestring)))
      snprintf(r->owner, sizeof r->owner, "%s", owner->valuestring);
  }
  scn_json_heap_delete(v);
  return ok;
}

void scn__owners_replicas_put(scn_owners *o, scn_group_entry *g, const scn_kv *kv) {
  (void)o;
  if (kv->mod_revision && kv->mod_revision < g->replicas.mod_rev)
    return; /* older than what the cache holds */
  if (!scn_owners_replicas_parse(kv->value, kv->value_len, &g->replicas)) {
    scn_log(SCN_LOG_WARN, "etcd: a replicas key with a malformed value", "group=%s", g->name);
    return;
  }
  g->replicas.mod_rev = kv->mod_revision;
  g->replicas.known = !g->replicas.ended;
}

void scn__owners_replicas_deleted(scn_group_entry *g, int64_t rev) {
  if (rev && rev < g->replicas.mod_rev)
    return;
  g->replicas = (scn_replica_set){0};
}

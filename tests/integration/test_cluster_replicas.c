/* Replicas (--replicas N >= 1), each daemon on a data directory of its own: what the owner of
 * a group records in etcd about its followers. */
#include "cluster_fixtures.h"
#include "harness.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_node(const char *name) {
  for (int i = 0; i < NODES; i++)
    if (strcmp(name, node_name(i)) == 0)
      return true;
  return false;
}

/* The key's value as JSON once pred holds of it (15 s at most); NULL when it never did. */
static cJSON *wait_key(cluster *k, const char *key, bool (*pred)(const cJSON *), long long *rev) {
  long deadline = t_now_ms() + 15000;
  while (t_now_ms() < deadline) {
    char *text = etcd_get(&k->e, key, rev);
    cJSON *v = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (v && pred(v))
      return v;
    cJSON_Delete(v);
    t_sleep_ms(20);
  }
  return NULL;
}

static int list_size(const cJSON *v, const char *member) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, member);
  return cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
}

static bool has_one_follower(const cJSON *v) { return list_size(v, "followers") == 1; }

static const char *first(const cJSON *v, const char *member) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, member);
  return cJSON_IsArray(list) && cJSON_IsString(list->child) ? list->child->valuestring : "";
}

/* With --replicas 1 on three daemons, the owner of a new group names one live follower other
 * than itself, the same in the group key and in the replicas key, which carries the owner's
 * epoch (the group key's create revision) and no in-sync member yet. */
static void test_followers_recorded(void) {
  static const char *const extra[] = {"--replicas", "1", NULL};
  cluster k;
  memset(&k, 0, sizeof k);
  k.own_data = true;
  k.extra = extra;
  if (!cluster_start_prepared(&k)) {
    cluster_stop(&k);
    return;
  }
  int at = -1;
  cJSON *r = wait_ok_anywhere(&k, "{\"cmd\":\"world.create\",\"world\":\"r1.main\"}", 15000, &at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  const char *owner = node_name(at);

  long long created = 0, unused;
  cJSON *rep = wait_key(&k, "/scened/replicas/r1", has_one_follower, &unused);
  cJSON *grp = wait_key(&k, "/scened/groups/r1", has_one_follower, &created);
  CU_ASSERT_PTR_NOT_NULL(rep);
  CU_ASSERT_PTR_NOT_NULL(grp);
  if (rep && grp) {
    const char *follower = first(rep, "followers");
    printf("\n  owner %s, follower %s\n", owner, follower);
    CU_ASSERT_STRING_EQUAL(t_resp_str(grp, "node"), owner);
    CU_ASSERT_TRUE(is_node(follower));
    CU_ASSERT_STRING_NOT_EQUAL(follower, owner);
    CU_ASSERT_STRING_EQUAL(first(grp, "followers"), follower);
    CU_ASSERT_EQUAL(list_size(rep, "insync"), 0);
    CU_ASSERT_EQUAL(list_size(grp, "insync"), 0);
    const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(rep, "epoch");
    CU_ASSERT_TRUE(cJSON_IsNumber(epoch) && created > 0 &&
                   (long long)epoch->valuedouble == created);
    CU_ASSERT_STRING_EQUAL(t_resp_str(rep, "durability"), "sync");
  }
  cJSON_Delete(rep);
  cJSON_Delete(grp);
  cluster_stop(&k);
}

int t_register_cluster_replicas(void) {
  static const t_test tests[] = {
      {"the owner records its groups' followers", test_followers_recorded},
  };
  return T_ADD_SUITE("cluster_replicas", NULL, NULL, tests);
}

#include "replica_fixtures.h"

#include "harness.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *etcd_json(cluster *k, const char *key) {
  long long rev;
  char *text = etcd_get(&k->e, key, &rev);
  cJSON *v = text ? cJSON_Parse(text) : NULL;
  free(text);
  return v;
}

cJSON *wait_json(cluster *k, const char *key, bool (*pred)(const cJSON *), long long *rev) {
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    char *text = etcd_get(&k->e, key, rev);
    cJSON *v = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (v && pred(v))
      return v;
    cJSON_Delete(v);
  }
  return NULL;
}

bool key_ended(const cJSON *v) {
  return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "ended"));
}

int list_size(const cJSON *v, const char *member) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, member);
  return cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
}

const char *first(const cJSON *v, const char *member) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, member);
  return cJSON_IsArray(list) && cJSON_IsString(list->child) ? list->child->valuestring : "";
}

const cJSON *world_item(cluster *k, int i, const char *w, cJSON **resp) {
  *resp = t_client_call(&k->c[i], "{\"cmd\":\"world.list\",\"cluster\":true}");
  const cJSON *item;
  cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(*resp, "worlds")) {
    if (strcmp(t_resp_str(item, "name"), w) == 0)
      return item;
  }
  return NULL;
}

double metric_of(cluster *k, int i, const char *name) {
  char *page = NULL;
  double v = t_http_get(k->d[i].http_port, "/metrics", &page) == 200 ? page_metric(page, name) : -1;
  free(page);
  return v;
}

bool wait_metric(cluster *k, int i, const char *name, double want) {
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20))
    if (metric_of(k, i, name) == want)
      return true;
  return false;
}

static bool start_own_data(cluster *k, const char *const *extra, const char *token) {
  memset(k, 0, sizeof *k);
  k->own_data = true;
  k->extra = extra;
  k->token = token;
  return cluster_start_prepared(k);
}

bool replicas_cluster(cluster *k, const char *const *extra) {
  if (start_own_data(k, extra, NULL))
    return true;
  cluster_stop(k);
  return false;
}

int replicas_start(cluster *k, const char *const *extra, const char *token, const char *world,
                   int nfollowers, int *at) {
  if (!start_own_data(k, extra, token))
    return -1;
  char line[160], key[96];
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  cJSON *r = wait_ok_anywhere(k, line, 15000, at);
  if (!r) {
    CU_FAIL("no daemon created the world");
    return -1;
  }
  cJSON_Delete(r);
  snprintf(key, sizeof key, "/scened/replicas/%.*s", (int)strcspn(world, "."), world);
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    cJSON *v = etcd_json(k, key);
    int fi = v && list_size(v, "followers") == nfollowers ? node_index(first(v, "followers")) : -2;
    cJSON_Delete(v);
    if (fi == -2)
      continue;
    CU_ASSERT(fi >= 0 && fi != *at);
    return fi >= 0 && fi != *at ? fi : -1;
  }
  CU_FAIL("the owner did not record its followers");
  return -1;
}

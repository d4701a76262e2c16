#include "replica_fixtures.h"

#include "harness.h"

#include <stdlib.h>
#include <string.h>

cJSON *etcd_json(cluster *k, const char *key) {
  long long rev;
  char *text = etcd_get(&k->e, key, &rev);
  cJSON *v = text ? cJSON_Parse(text) : NULL;
  free(text);
  return v;
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

#include "command_fixtures.h"
#include "daemon_fixtures.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

t_daemon commands_daemon;

int commands_suite_init(void) { return t_daemon_start(&commands_daemon, NULL) == 0 ? 0 : -1; }

int commands_suite_clean(void) { return t_suite_daemon_stop(&commands_daemon, 10000); }

int ids_of(const cJSON *r, const char *field, uint64_t *out, int cap) {
  const cJSON *a = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  if (!cJSON_IsArray(a))
    return -1;
  int n = 0;
  for (const cJSON *x = a->child; x; x = x->next, n++)
    if (n < cap)
      out[n] = cJSON_IsNumber(x) ? (uint64_t)x->valuedouble : 0;
  return n;
}

bool mat_of(const cJSON *r, const char *field, float m[16]) {
  const cJSON *a = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 16)
    return false;
  int i = 0;
  for (const cJSON *x = a->child; x; x = x->next) {
    if (!cJSON_IsNumber(x))
      return false;
    m[i++] = (float)x->valuedouble;
  }
  return true;
}

bool mat_near(const float a[16], const float b[16], float tol) {
  for (int i = 0; i < 16; i++)
    if (!(fabsf(a[i] - b[i]) <= tol * (1 + fabsf(b[i]))))
      return false;
  return true;
}

void mat_print(const char *what, const float m[16]) {
  fprintf(stderr, "  %s:", what);
  for (int i = 0; i < 16; i++)
    fprintf(stderr, " %.9g", m[i]);
  fprintf(stderr, "\n");
}

const float IDENTITY[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

void mat_trs(float tx, float ty, float tz, float s, float out[16]) {
  memcpy(out, IDENTITY, sizeof IDENTITY);
  out[0] = out[5] = out[10] = s;
  out[12] = tx, out[13] = ty, out[14] = tz;
}

void new_world(t_client *c, const char *name) {
  OKD(c, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", name);
}

uint64_t tf_at(const char *file, int at, t_client *c, const char *world, const char *fmt, ...) {
  text extra = {0};
  va_list ap;
  va_start(ap, fmt);
  text_vaddf(&extra, fmt, ap);
  va_end(ap);
  cJSON *r = t_ok_at(file, at, c, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s%s}", world,
                     extra.len ? "," : "", extra.len ? extra.s : "");
  text_free(&extra);
  uint64_t e = t_resp_id(r, "entity");
  t_check_at(file, at, e != 0, "an entity id", r);
  cJSON_Delete(r);
  return e;
}

uint64_t new_entity(t_client *c) {
  cJSON *r = OK(c, "{\"cmd\":\"entity.create\"}");
  uint64_t e = 0;
  CU_ASSERT_EQUAL(ids_of(r, "entities", &e, 1), 1);
  cJSON_Delete(r);
  return e;
}

cJSON *get_tf(t_client *c, const char *world, uint64_t e) {
  return t_client_call(c, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", world,
                       (unsigned long long)e);
}

bool matrix(t_client *c, const char *world, uint64_t e, const char *which, float m[16]) {
  cJSON *r = get_tf(c, world, e);
  bool ok = t_resp_ok(r) && mat_of(r, which, m);
  if (!ok)
    t_report("transform.get", r);
  cJSON_Delete(r);
  return ok;
}

uint64_t parent_of(t_client *c, const char *world, uint64_t e) {
  cJSON *r = get_tf(c, world, e);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "parent");
  uint64_t out = UINT64_MAX;
  if (t_resp_ok(r) && cJSON_IsNull(p))
    out = 0;
  else if (t_resp_ok(r) && cJSON_IsNumber(p))
    out = (uint64_t)p->valuedouble;
  cJSON_Delete(r);
  return out;
}

double info_num(t_client *c, const char *field) {
  cJSON *r = t_client_call(c, "{\"cmd\":\"info\"}");
  double v = t_resp_ok(r) ? t_resp_num(r, field) : -1;
  cJSON_Delete(r);
  return v;
}

int listed_transforms(t_client *c, const char *world) {
  cJSON *r = t_client_call(c, "{\"cmd\":\"world.list\"}");
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive(r, "worlds");
  int n = -1;
  for (const cJSON *w = ws ? ws->child : NULL; w; w = w->next) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(w, "name");
    if (cJSON_IsString(name) && strcmp(name->valuestring, world) == 0)
      n = (int)t_resp_num(w, "transforms");
  }
  cJSON_Delete(r);
  return n;
}

char *snapshot(t_client *c, const char *world, const uint64_t *ids, int n) {
  text b = {0};
  cJSON *r = t_client_call(c, "{\"cmd\":\"world.list\"}");
  char *s = r ? cJSON_PrintUnformatted(r) : NULL;
  text_addf(&b, "%s\n", s ? s : "-");
  free(s);
  cJSON_Delete(r);
  r = t_client_call(c, "{\"cmd\":\"info\"}");
  text_addf(&b, "worlds %g entities %g transforms %g\n", t_resp_num(r, "worlds"),
            t_resp_num(r, "entities"), t_resp_num(r, "transforms"));
  cJSON_Delete(r);
  for (int i = 0; i < n; i++) {
    r = get_tf(c, world, ids[i]);
    /* the world's tick moves on by itself: the state is everything else */
    if (r)
      cJSON_DeleteItemFromObjectCaseSensitive(r, "tick");
    s = r ? cJSON_PrintUnformatted(r) : NULL;
    text_addf(&b, "%s\n", s ? s : "-");
    free(s);
    cJSON_Delete(r);
    r = t_client_call(c, "{\"cmd\":\"transform.children\",\"world\":\"%s\",\"entity\":%llu}", world,
                      (unsigned long long)ids[i]);
    s = r ? cJSON_PrintUnformatted(r) : NULL;
    text_addf(&b, "%s\n", s ? s : "-");
    free(s);
    cJSON_Delete(r);
  }
  return b.s;
}

void check_same_at(int at, const char *before, const char *after) {
  bool same = before && after && strcmp(before, after) == 0;
  CU_assertImplementation(same ? CU_TRUE : CU_FALSE, (unsigned)at, "state unchanged", __FILE__, "",
                          CU_FALSE);
  if (!same)
    fprintf(stderr, "  before:\n%.3000s\n  after:\n%.3000s\n", before ? before : "-",
            after ? after : "-");
}

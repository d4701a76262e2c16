#include "interest_fixtures.h"

#include "b64.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a map of entity ids ------------------------------------------------------------------ */

static size_t slot_of(const id_map *m, uint64_t id) {
  uint64_t h = id * UINT64_C(0x9e3779b97f4a7c15);
  return (size_t)(h >> 17) & (m->cap - 1);
}

id_slot *idm_get(const id_map *m, uint64_t id) {
  if (!m->cap || !id)
    return NULL;
  for (size_t i = slot_of(m, id);; i = (i + 1) & (m->cap - 1)) {
    if (m->slots[i].id == id)
      return &m->slots[i];
    if (!m->slots[i].id)
      return NULL;
  }
}

static void grow(id_map *m) {
  id_map bigger = {calloc(m->cap ? m->cap * 2 : 64, sizeof(id_slot)), m->cap ? m->cap * 2 : 64, 0};
  CU_ASSERT_PTR_NOT_NULL_FATAL(bigger.slots);
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].id)
      *idm_put(&bigger, m->slots[i].id) = m->slots[i];
  free(m->slots);
  *m = bigger;
}

id_slot *idm_put(id_map *m, uint64_t id) {
  id_slot *s = idm_get(m, id);
  if (s)
    return s;
  if ((m->n + 1) * 2 > m->cap)
    grow(m);
  size_t i = slot_of(m, id);
  while (m->slots[i].id)
    i = (i + 1) & (m->cap - 1);
  s = &m->slots[i];
  memset(s, 0, sizeof *s);
  s->id = id;
  mat_translation(s->m, 0, 0, 0);
  m->n++;
  return s;
}

bool idm_del(id_map *m, uint64_t id) {
  id_slot *s = idm_get(m, id);
  if (!s)
    return false;
  /* backward shift: the entries after it in its run move up, so lookups never need tombstones */
  size_t i = (size_t)(s - m->slots), j = i;
  for (;;) {
    m->slots[i].id = 0;
    for (;;) {
      j = (j + 1) & (m->cap - 1);
      if (!m->slots[j].id) {
        m->n--;
        return true;
      }
      size_t home = slot_of(m, m->slots[j].id);
      /* j's entry may fill the hole at i unless its home lies cyclically in (i, j] */
      bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!stays)
        break;
    }
    m->slots[i] = m->slots[j];
    i = j;
  }
}

void idm_clear(id_map *m) {
  if (m->slots)
    memset(m->slots, 0, m->cap * sizeof *m->slots);
  m->n = 0;
}

void idm_free(id_map *m) {
  free(m->slots);
  memset(m, 0, sizeof *m);
}

/* ---- near regions ------------------------------------------------------------------------- */

void near_json(const near_spec *n, char *out, size_t cap) {
  if (!n->on) {
    snprintf(out, cap, "null");
    return;
  }
  text t = {0};
  if (n->entity)
    text_addf(&t, "{\"entity\":%llu", (unsigned long long)n->entity);
  else
    text_addf(&t, "{\"point\":[%.17g,%.17g,%.17g]", n->point[0], n->point[1], n->point[2]);
  text_addf(&t, ",\"radius\":%.17g", n->radius);
  if (n->margin != 0)
    text_addf(&t, ",\"margin\":%.17g", n->margin);
  if (n->nbands) {
    text_addf(&t, ",\"bands\":[");
    for (int i = 0; i < n->nbands; i++)
      text_addf(&t, "%s{\"radius\":%.17g,\"hz\":%.17g}", i ? "," : "", n->band_radius[i],
                n->band_hz[i]);
    text_addf(&t, "]");
  }
  text_addf(&t, "}");
  snprintf(out, cap, "%s", text_str(&t));
  CU_ASSERT_TRUE(t.len < cap);
  text_free(&t);
}

/* ---- frames ------------------------------------------------------------------------------- */

static bool matrix_array(const cJSON *m, float out[16]) {
  if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 16)
    return false;
  int i = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, m) {
    if (!cJSON_IsNumber(x))
      return false;
    out[i++] = (float)x->valuedouble;
  }
  return true;
}

static bool entity_id(const cJSON *v, uint64_t *id) {
  if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 9007199254740991.0 ||
      v->valuedouble != (double)(uint64_t)v->valuedouble)
    return false;
  *id = (uint64_t)v->valuedouble;
  return true;
}

static bool read_view(const cJSON *f, bool b64, frame_view *v) {
  const cJSON *set = cJSON_GetObjectItemCaseSensitive(f, "set");
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(f, "ids");
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(f, "ms");
  const cJSON *removed = cJSON_GetObjectItemCaseSensitive(f, "removed");
  const cJSON *full = cJSON_GetObjectItemCaseSensitive(f, "full");
  const cJSON *tick = cJSON_GetObjectItemCaseSensitive(f, "tick");
  if (!cJSON_IsObject(f) || !t_resp_str_is(f, "event", "frame") || !cJSON_IsBool(full) ||
      !cJSON_IsNumber(tick) || !cJSON_IsArray(removed) ||
      !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(f, "world")) ||
      !entity_id(cJSON_GetObjectItemCaseSensitive(f, "sub"), &v->sub))
    return false;
  if (b64 ? set || !cJSON_IsArray(ids) || !cJSON_IsString(ms) : !cJSON_IsArray(set) || ids || ms)
    return false;
  if (cJSON_GetArraySize(f) != (b64 ? 8 : 7))
    return false;
  v->tick = (long)tick->valuedouble;
  v->full = cJSON_IsTrue(full);
  const cJSON *list = b64 ? ids : set;
  v->n = cJSON_GetArraySize(list);
  v->ids = calloc((size_t)v->n + 1, sizeof *v->ids);
  v->ms = calloc((size_t)v->n + 1, sizeof *v->ms);
  v->nremoved = cJSON_GetArraySize(removed);
  v->removed = calloc((size_t)v->nremoved + 1, sizeof *v->removed);
  CU_ASSERT_FATAL(v->ids && v->ms && v->removed);
  int i = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, list) {
    if (b64) {
      if (!entity_id(x, &v->ids[i]))
        return false;
    } else if (!cJSON_IsObject(x) || cJSON_GetArraySize(x) != 2 ||
               !entity_id(cJSON_GetObjectItemCaseSensitive(x, "e"), &v->ids[i]) ||
               !matrix_array(cJSON_GetObjectItemCaseSensitive(x, "m"), v->ms[i]))
      return false;
    i++;
  }
  if (b64 && scn_b64_decode_matrices(ms->valuestring, strlen(ms->valuestring), v->ms, (size_t)v->n,
                                     NULL) != SCN_B64_OK)
    return false;
  i = 0;
  cJSON_ArrayForEach(x, removed) if (!entity_id(x, &v->removed[i++])) return false;
  /* each entity at most once in a frame, and a full frame removes nothing */
  for (int a = 0; a < v->n; a++)
    for (int b = a + 1; b < v->n; b++)
      if (v->ids[a] == v->ids[b])
        return false;
  for (int a = 0; a < v->nremoved; a++) {
    for (int b = a + 1; b < v->nremoved; b++)
      if (v->removed[a] == v->removed[b])
        return false;
    for (int b = 0; b < v->n; b++)
      if (v->removed[a] == v->ids[b])
        return false;
  }
  return !(v->full && v->nremoved);
}

bool frame_read(const cJSON *f, bool b64, frame_view *v) {
  memset(v, 0, sizeof *v);
  bool good = read_view(f, b64, v);
  CU_ASSERT_TRUE(good);
  if (!good) {
    t_report(b64 ? "not a well-formed b64 frame" : "not a well-formed json frame", f);
    frame_view_free(v);
  }
  return good;
}

void frame_view_free(frame_view *v) {
  free(v->ids);
  free(v->ms);
  free(v->removed);
  memset(v, 0, sizeof *v);
}

const float *frame_matrix(const frame_view *v, uint64_t id) {
  for (int i = 0; i < v->n; i++)
    if (v->ids[i] == id)
      return v->ms[i];
  return NULL;
}

bool frame_removes(const frame_view *v, uint64_t id) {
  for (int i = 0; i < v->nremoved; i++)
    if (v->removed[i] == id)
      return true;
  return false;
}

void frame_apply(const frame_view *v, id_map *held, int *stray) {
  if (v->full)
    idm_clear(held);
  for (int i = 0; i < v->n; i++)
    memcpy(idm_put(held, v->ids[i])->m, v->ms[i], sizeof v->ms[i]);
  for (int i = 0; i < v->nremoved; i++)
    if (!idm_del(held, v->removed[i]) && stray)
      ++*stray;
}

/* ---- subscriptions ------------------------------------------------------------------------ */

uint64_t subscribe_near(t_client *k, const char *world, const near_spec *near, uint64_t root,
                        double hz) {
  char n[1024] = "", extra[96] = "";
  if (near) {
    char body[960];
    near_json(near, body, sizeof body);
    snprintf(n, sizeof n, ",\"near\":%s", body);
  }
  int len = 0;
  if (root)
    len += snprintf(extra, sizeof extra, ",\"root\":%llu", (unsigned long long)root);
  if (hz > 0)
    snprintf(extra + len, sizeof extra - (size_t)len, ",\"hz\":%.17g", hz);
  cJSON *r = CALL(k, "{\"cmd\":\"subscribe\",\"world\":\"%s\"%s%s}", world, n, extra);
  uint64_t sub = t_resp_ok(r) ? t_resp_id(r, "sub") : 0;
  bool good = sub > 0 && cJSON_GetArraySize(r) == 2;
  CU_ASSERT_TRUE(good);
  if (!good) {
    fprintf(stderr, "  subscribe to %s with near %s%s\n", world, n, extra);
    t_report("answer", r);
  }
  cJSON_Delete(r);
  return good ? sub : 0;
}

void update_near(t_client *k, uint64_t sub, const near_spec *near) {
  char body[960];
  near_json(near, body, sizeof body);
  cJSON *r = CALL(k, "{\"cmd\":\"subscribe.update\",\"sub\":%llu,\"near\":%s}",
                  (unsigned long long)sub, body);
  /* the answer is {"ok":true}: no result fields */
  bool good = t_resp_ok(r) && cJSON_GetArraySize(r) == 1;
  CU_ASSERT_TRUE(good);
  if (!good) {
    fprintf(stderr, "  subscribe.update of %llu to %s\n", (unsigned long long)sub, body);
    t_report("answer", r);
  }
  cJSON_Delete(r);
}

void hello_b64(t_client *k) { OKD(k, "{\"cmd\":\"hello\",\"matrices\":\"b64\"}"); }

void interest_sync(t_client *ctl, const char *world, uint64_t probe, t_client **conns, int n) {
  long now = TICK_NOW(ctl, world, probe);
  TICK_PAST(ctl, world, probe, now);
  for (int i = 0; i < n; i++)
    OKD(conns[i], "{\"cmd\":\"ping\"}");
}

void mat_translation(float m[16], double x, double y, double z) {
  static const float identity[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  memcpy(m, identity, sizeof identity);
  m[12] = (float)x, m[13] = (float)y, m[14] = (float)z;
}

/* By value: a zero may come back as -0 in one form and 0 in the other. */
bool mat_same(const float a[16], const float b[16]) {
  for (int i = 0; i < 16; i++)
    if (a[i] != b[i])
      return false;
  return true;
}

double info_subscriptions_of(t_client *k) {
  cJSON *r = CALL(k, "{\"cmd\":\"info\"}");
  double n = t_resp_num(r, "subscriptions");
  CU_ASSERT_TRUE(n >= 0);
  cJSON_Delete(r);
  return n;
}

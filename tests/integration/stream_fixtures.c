#include "stream_fixtures.h"

#include "daemon_fixtures.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

t_daemon stream_daemon;

int stream_suite_init(void) {
  const char *args[] = {"--tick-hz", TICK_HZ, NULL};
  return t_daemon_start(&stream_daemon, args) == 0 ? 0 : -1;
}

int stream_suite_clean(void) { return t_suite_daemon_stop(&stream_daemon, 5000); }

bool subscribe(t_client *k, sub_state *s, const char *world, int64_t root, double hz) {
  memset(s, 0, sizeof *s);
  snprintf(s->world, sizeof s->world, "%s", world);
  char extra[96] = "";
  int n = 0;
  if (root)
    n += snprintf(extra + n, sizeof extra - (size_t)n, ",\"root\":%lld", (long long)root);
  if (hz > 0)
    snprintf(extra + n, sizeof extra - (size_t)n, ",\"hz\":%g", hz);
  cJSON *r = CALL(k, "{\"cmd\":\"subscribe\",\"world\":\"%s\"%s}", world, extra);
  bool good = t_resp_ok(r) && t_resp_num(r, "sub") >= 1 && cJSON_GetArraySize(r) == 2;
  CU_ASSERT_TRUE(good);
  if (!good)
    t_report("subscribe", r);
  s->id = (int64_t)t_resp_num(r, "sub");
  cJSON_Delete(r);
  return good;
}

static bool is_matrix(const cJSON *m) {
  if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 16)
    return false;
  const cJSON *v;
  cJSON_ArrayForEach(v, m) if (!cJSON_IsNumber(v)) return false;
  return true;
}

bool check_frame(sub_state *s, const cJSON *f, int full) {
  bool good = cJSON_IsObject(f) && strcmp(t_resp_str(f, "event"), "frame") == 0 &&
              cJSON_GetArraySize(f) == 7 && t_resp_num(f, "sub") == (double)s->id &&
              strcmp(t_resp_str(f, "world"), s->world) == 0 &&
              cJSON_IsNumber(cJSON_GetObjectItem(f, "tick")) &&
              cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(f, "full")) &&
              cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(f, "set")) &&
              cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(f, "removed"));
  CU_ASSERT_TRUE(good);
  if (!good) {
    t_report("not a frame of this subscription", f);
    return false;
  }
  double tick = t_resp_num(f, "tick");
  CU_ASSERT_TRUE(tick > s->last_tick);
  if (!(tick > s->last_tick))
    fprintf(stderr, "  tick %.0f after %.0f\n", tick, s->last_tick);
  s->last_tick = tick;
  s->frames++;
  bool is_full = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "full"));
  if (full >= 0) {
    CU_ASSERT_EQUAL(is_full, full == 1);
    if (is_full != (full == 1))
      t_report(full ? "expected a full frame" : "expected a delta", f);
  }
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(f, "set")) {
    bool entry = cJSON_IsObject(e) && cJSON_GetArraySize(e) == 2 && t_resp_num(e, "e") >= 1 &&
                 is_matrix(cJSON_GetObjectItemCaseSensitive(e, "m"));
    CU_ASSERT_TRUE(entry);
  }
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(f, "removed"))
      CU_ASSERT_TRUE(cJSON_IsNumber(e) && e->valuedouble >= 1);
  if (is_full)
    CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "removed")), 0);
  return true;
}

cJSON *expect_frame(t_client *k, sub_state *s, int full) {
  cJSON *f = t_next_event(k, FRAME_WAIT_MS);
  CU_ASSERT_PTR_NOT_NULL(f);
  if (!f) {
    fprintf(stderr, "  no frame for sub %lld\n", (long long)s->id);
    return NULL;
  }
  check_frame(s, f, full);
  return f;
}

void mat_t(float m[16], float x, float y, float z) {
  static const float id[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  memcpy(m, id, sizeof id);
  m[12] = x, m[13] = y, m[14] = z;
}

bool matrix_equals(const cJSON *m, const float want_m[16]) {
  if (!is_matrix(m))
    return false;
  for (int i = 0; i < 16; i++)
    if ((float)cJSON_GetArrayItem(m, i)->valuedouble != want_m[i])
      return false;
  return true;
}

const cJSON *set_matrix(const cJSON *f, int64_t e, int *count) {
  const cJSON *found = NULL, *it;
  *count = 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(f, "set")) if (t_resp_num(it, "e") ==
                                                                         (double)e) {
    ++*count;
    found = cJSON_GetObjectItemCaseSensitive(it, "m");
  }
  return found;
}

void check_set(const cJSON *f, const want *w, int n) {
  if (!f)
    return;
  int size = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "set"));
  bool good = size == n;
  for (int i = 0; i < n; i++) {
    int count;
    const cJSON *m = set_matrix(f, w[i].e, &count);
    float expect[16];
    mat_t(expect, w[i].x, w[i].y, w[i].z);
    if (count != 1 || !matrix_equals(m, expect)) {
      good = false;
      fprintf(stderr, "  entity %lld: %d entries, expected translation (%g,%g,%g)\n",
              (long long)w[i].e, count, w[i].x, w[i].y, w[i].z);
    }
  }
  CU_ASSERT_TRUE(good);
  if (!good)
    t_report("set differs", f);
}

void check_removed(const cJSON *f, const int64_t *ids, int n) {
  if (!f)
    return;
  const cJSON *removed = cJSON_GetObjectItemCaseSensitive(f, "removed");
  bool good = cJSON_GetArraySize(removed) == n;
  for (int i = 0; i < n; i++) {
    int count = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, removed) count += it->valuedouble == (double)ids[i];
    good &= count == 1;
  }
  CU_ASSERT_TRUE(good);
  if (!good)
    t_report("removed differs", f);
}

void check_no_removed(const cJSON *f) { check_removed(f, NULL, 0); }

int64_t mk(t_client *k, const char *world, int64_t parent, double x, double y, double z) {
  char par[48] = "";
  if (parent)
    snprintf(par, sizeof par, ",\"parent\":%lld", (long long)parent);
  cJSON *r = CALL(k, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s,\"t\":[%g,%g,%g]}", world,
                  par, x, y, z);
  int64_t e = t_resp_ok(r) ? (int64_t)t_resp_num(r, "entity") : 0;
  CU_ASSERT_TRUE(e > 0);
  if (e <= 0)
    t_report("transform.create", r);
  cJSON_Delete(r);
  return e;
}

void set_t(t_client *k, const char *world, int64_t e, double x, double y, double z) {
  OKD(k, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%lld,\"t\":[%g,%g,%g]}",
      world, (long long)e, x, y, z);
}

void frames_by_sub(t_client *k, sub_state *subs, cJSON **out, int nsubs) {
  for (int i = 0; i < nsubs; i++)
    out[i] = NULL;
  for (int got = 0; got < nsubs; got++) {
    cJSON *f = t_next_event(k, FRAME_WAIT_MS);
    CU_ASSERT_PTR_NOT_NULL(f);
    if (!f)
      return;
    int which = -1;
    for (int i = 0; i < nsubs; i++)
      if (t_resp_num(f, "sub") == (double)subs[i].id && !out[i])
        which = i;
    CU_ASSERT_TRUE(which >= 0);
    if (which < 0) {
      t_report("unexpected event", f);
      cJSON_Delete(f);
      continue;
    }
    check_frame(&subs[which], f, -1);
    out[which] = f;
  }
}

bool same_but_sub(const cJSON *a, const cJSON *b) {
  if (!a || !b)
    return false;
  cJSON *x = cJSON_Duplicate(a, true), *y = cJSON_Duplicate(b, true);
  cJSON_DeleteItemFromObjectCaseSensitive(x, "sub");
  cJSON_DeleteItemFromObjectCaseSensitive(y, "sub");
  bool same = cJSON_Compare(x, y, true);
  if (!same) {
    t_report("first", a);
    t_report("second", b);
  }
  cJSON_Delete(x);
  cJSON_Delete(y);
  return same;
}

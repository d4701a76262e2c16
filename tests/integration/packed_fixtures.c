#include "packed_fixtures.h"

#include "scn_core.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void packed_walk_free(packed_walk *w) {
  free(w->ids);
  free(w->flags);
  memset(w, 0, sizeof *w);
}

static bool take_varint(const uint8_t *p, size_t len, size_t *at, uint64_t *v) {
  size_t used;
  if (scn_packed_get_varint(p + *at, len - *at, v, &used) != SCN_PACKED_OK)
    return false;
  *at += used;
  return true;
}

bool packed_walk_payload(const uint8_t *p, size_t len, packed_walk *w) {
  memset(w, 0, sizeof *w);
  size_t at = 0;
  uint64_t count, id = 0;
  if (!take_varint(p, len, &at, &count) || count > len)
    return false;
  w->ids = calloc(count + 1, sizeof *w->ids);
  w->flags = calloc(count + 1, 1);
  if (!w->ids || !w->flags)
    return false;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t gap, q;
    if (!take_varint(p, len, &at, &gap) || at >= len)
      return false;
    uint8_t f = p[at++];
    id += gap;
    w->ids[w->n] = id;
    w->flags[w->n++] = f;
    size_t fixed = f & SCN_PACKED_RAW ? 64 : 0;
    for (int k = 0; k < 3 && (f & SCN_PACKED_T); k++)
      if (!take_varint(p, len, &at, &q))
        return false;
    fixed += f & SCN_PACKED_R ? 4 : 0;
    fixed += f & SCN_PACKED_S_UNI ? 4 : 0;
    fixed += f & SCN_PACKED_S ? 12 : 0;
    if (len - at < fixed)
      return false;
    at += fixed;
  }
  uint64_t removed, gap;
  if (!take_varint(p, len, &at, &removed))
    return false;
  for (uint64_t i = 0; i < removed; i++)
    if (!take_varint(p, len, &at, &gap))
      return false;
  return at == len;
}

bool packed_decode_view(const uint8_t *p, size_t len, long tick, bool full, scn_packed_baseline *b,
                        frame_view *v, packed_walk *w) {
  if (w && !packed_walk_payload(p, len, w)) {
    CU_FAIL("a packed payload that does not walk");
    return false;
  }
  if (full)
    scn_packed_baseline_clear(b);
  scn_packed_frame f = {0};
  size_t at = 0;
  scn_packed_status st = scn_packed_decode(b, p, len, &f, &at);
  CU_ASSERT_EQUAL(st, SCN_PACKED_OK);
  if (st != SCN_PACKED_OK) {
    fprintf(stderr, "  packed payload of %zu bytes refused at byte %zu: %s\n", len, at,
            scn_packed_status_text(st));
    scn_packed_frame_free(&f);
    return false;
  }
  if (v) {
    memset(v, 0, sizeof *v);
    v->tick = tick;
    v->full = full;
    v->n = (int)f.n;
    v->ids = calloc(f.n + 1, sizeof *v->ids);
    v->ms = calloc(f.n + 1, sizeof *v->ms);
    v->nremoved = (int)f.removed_n;
    v->removed = calloc(f.removed_n + 1, sizeof *v->removed);
    CU_ASSERT_FATAL(v->ids && v->ms && v->removed);
    if (f.n) {
      memcpy(v->ids, f.ids, f.n * sizeof *v->ids);
      memcpy(v->ms, f.m, f.n * sizeof *v->ms);
    }
    if (f.removed_n)
      memcpy(v->removed, f.removed, f.removed_n * sizeof *v->removed);
  }
  scn_packed_frame_free(&f);
  return true;
}

/* RFC 4648 with padding, strictly: the length a multiple of 4 and the bytes it gives. */
static uint8_t *b64_decode(const char *s, size_t *len) {
  size_t n = strlen(s);
  if (n % 4)
    return NULL;
  uint8_t *out = malloc(n / 4 * 3 + 1);
  if (!out)
    return NULL;
  int got = n ? EVP_DecodeBlock(out, (const unsigned char *)s, (int)n) : 0;
  if (got < 0) {
    free(out);
    return NULL;
  }
  size_t pad = n && s[n - 1] == '=' ? (n > 1 && s[n - 2] == '=' ? 2 : 1) : 0;
  *len = (size_t)got - pad;
  return out;
}

bool packed_frame_read(const cJSON *f, scn_packed_baseline *b, frame_view *v, packed_walk *w) {
  const cJSON *full = cJSON_GetObjectItemCaseSensitive(f, "full");
  const cJSON *tick = cJSON_GetObjectItemCaseSensitive(f, "tick");
  const cJSON *sub = cJSON_GetObjectItemCaseSensitive(f, "sub");
  const cJSON *packed = cJSON_GetObjectItemCaseSensitive(f, "packed");
  bool shape = cJSON_IsObject(f) && cJSON_GetArraySize(f) == 6 &&
               t_resp_str_is(f, "event", "frame") && cJSON_IsBool(full) && cJSON_IsNumber(tick) &&
               cJSON_IsNumber(sub) && cJSON_IsString(packed) &&
               cJSON_IsString(cJSON_GetObjectItemCaseSensitive(f, "world"));
  CU_ASSERT_TRUE(shape);
  if (!shape) {
    t_report("not a packed frame", f);
    return false;
  }
  size_t len = 0;
  uint8_t *payload = b64_decode(packed->valuestring, &len);
  CU_ASSERT_PTR_NOT_NULL(payload);
  if (!payload) {
    t_report("packed is not base64 with padding", f);
    return false;
  }
  bool ok = packed_decode_view(payload, len, (long)tick->valuedouble, cJSON_IsTrue(full), b, v, w);
  if (v)
    v->sub = (uint64_t)sub->valuedouble;
  free(payload);
  return ok;
}

bool packed_message_read(const uint8_t *msg, size_t len, scn_packed_baseline *b, frame_view *v,
                         packed_walk *w) {
  CU_ASSERT_TRUE(len >= 13 && msg[12] <= 1);
  if (len < 13 || msg[12] > 1)
    return false;
  uint64_t sub = 0, tick = 0;
  for (int i = 3; i >= 0; i--)
    sub = sub << 8 | msg[i];
  for (int i = 7; i >= 0; i--)
    tick = tick << 8 | msg[4 + i];
  bool ok = packed_decode_view(msg + 13, len - 13, (long)tick, msg[12] == 1, b, v, w);
  if (v)
    v->sub = sub;
  return ok;
}

static double angle_deg(const float a[4], const float b[4]) {
  double d =
      fabs((double)a[0] * b[0] + (double)a[1] * b[1] + (double)a[2] * b[2] + (double)a[3] * b[3]);
  return 2 * acos(d > 1 ? 1 : d) * 180 / M_PI;
}

bool packed_close_enough(const float exact[16], const float got[16], double step, char *why,
                         size_t cap) {
  float t0[3], r0[4], s0[3], t1[3], r1[4], s1[3];
  if (scn_decompose_trs(exact, t0, r0, s0) != SCN_OK) {
    bool same = memcmp(exact, got, 64) == 0;
    if (!same)
      snprintf(why, cap, "a matrix that is not T x R x S differs from the daemon's");
    return same;
  }
  if (scn_decompose_trs(got, t1, r1, s1) != SCN_OK) {
    snprintf(why, cap, "decoded into a matrix that is not T x R x S");
    return false;
  }
  for (int k = 0; k < 3; k++) {
    double slack = step / 2 + 4 * (double)fabsf(t0[k]) * 0x1p-24 + 1e-9;
    if (fabs((double)t0[k] - t1[k]) > slack) {
      snprintf(why, cap, "translation axis %d: %.9g against %.9g (step %g)", k, (double)t1[k],
               (double)t0[k], step);
      return false;
    }
    if (fabs((double)s0[k] - s1[k]) > 1e-5 * fabs((double)s0[k])) {
      snprintf(why, cap, "scale axis %d: %.9g against %.9g", k, (double)s1[k], (double)s0[k]);
      return false;
    }
  }
  double a = angle_deg(r0, r1);
  if (a > 0.5) {
    snprintf(why, cap, "rotation %.4f degrees off", a);
    return false;
  }
  return true;
}

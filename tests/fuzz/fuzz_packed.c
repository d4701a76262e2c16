/* Fuzz target: packed payloads (proto/packed.h).
 *
 * Decoding: byte 0 picks a client baseline (how many entities among ids 1..64, drawn from that
 * byte, with or without a translation, some at the edges of the 64-bit range) and a grid; then
 * come payloads, each a varint length and that many bytes, decoded one after the other against
 * the same baseline. Each is decoded or refused; a refused one must leave the baseline as it
 * was, a decoded one must list increasing ids below 2^53.
 *
 * Encoding: the same bytes also describe frames of matrices (T x R x S from small integers, or
 * any float32 bits), encoded against a daemon baseline and decoded against a client one; each
 * must decode, the two baselines must agree, a raw matrix must come back bit for bit (non-finite
 * elements as base64 writes them) and only when it is not T x R x S, and the rest within the
 * contract's tolerance. */
#include "packed.h"
#include "scn_core.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c))                                                                                      \
      abort();                                                                                     \
  } while (0)

static uint64_t next_random(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static const double STEPS[] = {0.001, 0.5, 1, 1e-9, 1e6, 0.1, 3, 1e-30};

static void client_baseline(uint8_t pick, scn_packed_baseline *b) {
  uint64_t state = pick;
  const double origin[3] = {pick & 1 ? 0 : -100.5, 0, pick & 2 ? 1e9 : 0};
  CHECK(scn_packed_baseline_set_grid(b, STEPS[pick >> 5], origin));
  for (int i = 0; i < (pick & 31); i++) {
    scn_packed_value *v = scn_packed_baseline_put(b, 1 + next_random(&state) % 64);
    CHECK(v);
    uint64_t r = next_random(&state);
    for (int k = 0; k < 3; k++)
      v->q[k] = r & 1 ? (int64_t)(r >> (8 * k)) : (int64_t)(int8_t)(r >> (8 * k));
    v->rotation = (uint32_t)(r >> 32);
    v->has_q = r & 2;
    v->scale[0] = r & 4 ? -2.0f : 1.0f;
  }
}

/* A digest of everything a baseline holds, to see that a refusal changed nothing. */
static uint64_t digest(const scn_packed_baseline *b) {
  uint64_t d = b->count;
  for (size_t i = 0; b->ids && i <= b->mask; i++) {
    if (!b->ids[i])
      continue;
    const scn_packed_value *v = &b->values[i];
    uint32_t s[3];
    memcpy(s, v->scale, sizeof s);
    uint64_t h = b->ids[i] * 31 + (uint64_t)v->q[0] * 7 + (uint64_t)v->q[1] * 11 +
                 (uint64_t)v->q[2] * 13 + v->rotation * 17u + v->has_q + s[0] * 3u + s[1] * 5u +
                 s[2] * 9u;
    d += h * UINT64_C(0x9E3779B97F4A7C15); /* order-free: the slots may move */
  }
  return d;
}

static void decode_payloads(const uint8_t *data, size_t size) {
  scn_packed_baseline b = {0};
  scn_packed_frame f = {0};
  client_baseline(data[0], &b);
  size_t pos = 1;
  while (pos < size) {
    uint64_t len;
    size_t used;
    if (scn_packed_get_varint(data + pos, size - pos, &len, &used) != SCN_PACKED_OK)
      break;
    pos += used;
    if (len > size - pos)
      len = size - pos;
    uint64_t before = digest(&b);
    size_t at = SIZE_MAX;
    scn_packed_status st = scn_packed_decode(&b, data + pos, (size_t)len, &f, &at);
    if (st == SCN_PACKED_OK) {
      for (size_t i = 0; i < f.n; i++)
        CHECK(f.ids[i] >= 1 && f.ids[i] <= SCN_ENTITY_MAX && (i == 0 || f.ids[i] > f.ids[i - 1]));
      for (size_t i = 0; i < f.removed_n; i++)
        CHECK(f.removed[i] >= 1 && f.removed[i] <= SCN_ENTITY_MAX &&
              (i == 0 || f.removed[i] > f.removed[i - 1]));
    } else {
      CHECK(digest(&b) == before && at <= len && f.n == 0 && f.removed_n == 0);
      CHECK(strcmp(scn_packed_status_text(st), "unknown status") != 0);
    }
    pos += (size_t)len;
  }
  scn_packed_frame_free(&f);
  scn_packed_baseline_free(&b);
}

/* ---- round trips ----------------------------------------------------------------------------- */

typedef struct source {
  const uint8_t *p;
  size_t len, pos;
} source;

static uint8_t byte(source *s) { return s->pos < s->len ? s->p[s->pos++] : 0; }

/* A matrix from the bytes: T x R x S from small integers, or 16 float32 of any bits. */
static void matrix_from(source *s, float m[16]) {
  uint8_t kind = byte(s);
  if (kind & 1) {
    for (int i = 0; i < 16; i++) {
      uint8_t b[4] = {byte(s), byte(s), byte(s), byte(s)};
      m[i] = scn_packed_get_f32(b);
    }
    return;
  }
  float t[3], r[4], sc[3];
  for (int k = 0; k < 3; k++)
    t[k] = (float)(int8_t)byte(s) * (kind & 2 ? 1000.25f : 0.125f);
  for (int k = 0; k < 4; k++)
    r[k] = (float)(int8_t)byte(s);
  if (!r[0] && !r[1] && !r[2] && !r[3])
    r[3] = 1;
  for (int k = 0; k < 3; k++)
    sc[k] = kind & 4 ? (float)(1 + byte(s) % 64) / 8 : 1;
  if (kind & 8)
    sc[kind >> 6 & 1] *= -1;
  CHECK(scn_compose_trs(t, r, sc, m) == SCN_OK);
}

static bool baselines_agree(const scn_packed_baseline *daemon, const scn_packed_baseline *client) {
  if (daemon->count != client->count)
    return false;
  for (size_t i = 0; daemon->ids && i <= daemon->mask; i++) {
    if (!daemon->ids[i])
      continue;
    const scn_packed_value *d = &daemon->values[i];
    const scn_packed_value *c = scn_packed_baseline_find(client, daemon->ids[i]);
    if (!c || c->has_q != d->has_q || c->rotation != d->rotation ||
        memcmp(c->scale, d->scale, sizeof c->scale) || memcmp(c->q, d->q, sizeof c->q))
      return false;
  }
  return true;
}

static void check_entry(const scn_packed_baseline *g, const float want[16], const float got[16],
                        bool raw) {
  float tw[3], rw[4], sw[3], tg[3], rg[4], sg[3];
  if (scn_decompose_trs(want, tw, rw, sw) != SCN_OK) {
    CHECK(raw);
    for (int i = 0; i < 16; i++) {
      float e = isnan(want[i]) ? 0 : isinf(want[i]) ? copysignf(FLT_MAX, want[i]) : want[i];
      CHECK(memcmp(&e, &got[i], 4) == 0);
    }
    return;
  }
  if (raw) { /* T x R x S goes raw only with a translation 2^62 steps away */
    bool far = false;
    for (int k = 0; k < 3; k++)
      far |= fabs((double)tw[k] - g->origin[k]) / g->step >= 0x1p61;
    CHECK(far);
    return;
  }
  for (int k = 0; k < 3; k++)
    CHECK(fabs((double)got[12 + k] - tw[k]) <=
          g->step / 2 * (1 + 1e-9) + fabs((double)tw[k]) * 0x1p-23);
  /* rotation and scale: only where the scale keeps float32 precision through T * R * S */
  for (int k = 0; k < 3; k++)
    if (!(fabs(sw[k]) >= 0x1p-60 && fabs(sw[k]) <= 0x1p60))
      return;
  CHECK(scn_decompose_trs(got, tg, rg, sg) == SCN_OK);
  double dot = 0;
  for (int i = 0; i < 4; i++)
    dot += (double)rw[i] * rg[i];
  CHECK(2 * acos(fmin(1, fabs(dot))) * 180 / 3.14159265358979323846 <= 0.5);
  for (int k = 0; k < 3; k++)
    CHECK(fabs((double)sg[k] - sw[k]) <= 1e-5 * fabs((double)sw[k]));
}

static void round_trips(const uint8_t *data, size_t size) {
  enum { MAX = 24 };
  source s = {data, size, 0};
  scn_packed_baseline daemon = {0}, client = {0};
  scn_packed_frame f = {0};
  scn_buf out = {0};
  while (s.pos < s.len) {
    uint8_t head = byte(&s);
    if (head & 0x80) { /* a new grid, and sometimes a full frame */
      const double origin[3] = {(int8_t)byte(&s), 0, -0.5};
      double step = STEPS[head & 7];
      CHECK(scn_packed_baseline_set_grid(&daemon, step, origin));
      CHECK(scn_packed_baseline_set_grid(&client, step, origin));
      if (head & 0x40) {
        scn_packed_baseline_clear(&daemon);
        scn_packed_baseline_clear(&client);
      }
    } else if (!daemon.step) {
      const double zero[3] = {0, 0, 0};
      CHECK(scn_packed_baseline_set_grid(&daemon, 0.01, zero));
      CHECK(scn_packed_baseline_set_grid(&client, 0.01, zero));
    }
    uint64_t ids[MAX], removed[4], id = 0;
    float m[MAX][16];
    size_t n = byte(&s) % MAX, nr = byte(&s) % 4;
    for (size_t i = 0; i < n; i++) {
      ids[i] = id += 1 + byte(&s) % 4;
      matrix_from(&s, m[i]);
    }
    for (size_t i = 0; i < nr; i++)
      removed[i] = id += 1 + byte(&s) % 8;
    scn_packed_changes c = {ids, (const float(*)[16])m, NULL, n, removed, nr};
    out.len = 0;
    CHECK(scn_packed_encode(&daemon, &c, &out) == SCN_PACKED_OK && !out.failed);
    CHECK(scn_packed_decode(&client, (const uint8_t *)out.data, out.len, &f, NULL) ==
          SCN_PACKED_OK);
    CHECK(f.n == n && f.removed_n == nr && baselines_agree(&daemon, &client));
    for (size_t i = 0; i < n; i++) {
      CHECK(f.ids[i] == ids[i]);
      check_entry(&client, m[i], f.m[i], f.next_raw[i]);
    }
  }
  scn_buf_free(&out);
  scn_packed_frame_free(&f);
  scn_packed_baseline_free(&daemon);
  scn_packed_baseline_free(&client);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  decode_payloads(data, size);
  round_trips(data, size);
  return 0;
}

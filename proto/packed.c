/* Packed frames: the primitives (varints, smallest three) and the encoder. The decoder is in
 * packed_decode.c, the per-subscription table in packed_baseline.c. */
#include "packed.h"

#include "scn_core.h"

#include <float.h>
#include <math.h>

#define SQRT2 1.4142135623730951
/* Scales whose magnitudes lie this close (relative) to each other are sent as uniform, and
 * as 1 when that close to 1: taking a matrix apart leaves a scale of 1 under a rotation at
 * 1 - 2^-24 about one time in twenty, and uniform scales an epsilon apart, which would cost
 * 4 to 12 bytes each time the rotation changes. 2^-20 (8 float32 epsilons at 1) is far below
 * what the rotation's 10 bits already move (about 2^-10). */
#define SCALE_SNAP 0x1p-20
/* How many entries ahead the encoder asks for a baseline slot. */
#define PREFETCH_AHEAD 8
/* A q as large as this could not be sent as a delta within 64 bits. */
#define Q_LIMIT 0x1p62

const char *scn_packed_status_text(scn_packed_status st) {
  switch (st) {
  case SCN_PACKED_OK:
    return "ok";
  case SCN_PACKED_TRUNCATED:
    return "the payload ends inside a value";
  case SCN_PACKED_TRAILING:
    return "bytes after the removed ids";
  case SCN_PACKED_VARINT:
    return "a varint of more than 64 bits";
  case SCN_PACKED_COUNT:
    return "a count larger than the payload can hold";
  case SCN_PACKED_ORDER:
    return "entity ids not increasing";
  case SCN_PACKED_ID_RANGE:
    return "an entity id past 2^53 - 1";
  case SCN_PACKED_FLAGS:
    return "flags that name no valid entry";
  case SCN_PACKED_NO_BASELINE:
    return "a part left out or a delta for an entity without that part";
  case SCN_PACKED_OVERFLOW:
    return "a translation delta out of the 64-bit range";
  case SCN_PACKED_BAD_INPUT:
    return "entity ids not increasing, 0 or past 2^53 - 1";
  case SCN_PACKED_NOMEM:
    return "out of memory";
  }
  return "unknown status";
}

/* ---- primitives ------------------------------------------------------------------------------ */

size_t scn_packed_put_varint(uint8_t out[SCN_PACKED_VARINT_MAX], uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  out[n++] = (uint8_t)v;
  return n;
}

scn_packed_status scn_packed_get_varint(const uint8_t *p, size_t len, uint64_t *v, size_t *used) {
  uint64_t x = 0;
  for (size_t i = 0; i < SCN_PACKED_VARINT_MAX; i++) {
    if (i == len)
      return SCN_PACKED_TRUNCATED;
    uint64_t byte = p[i] & 0x7f;
    if (i == SCN_PACKED_VARINT_MAX - 1 && byte > 1) /* the tenth byte holds bit 63 alone */
      return SCN_PACKED_VARINT;
    x |= byte << (7 * i);
    if (!(p[i] & 0x80)) {
      *v = x;
      *used = i + 1;
      return SCN_PACKED_OK;
    }
  }
  return SCN_PACKED_VARINT;
}

uint32_t scn_packed_quat_encode(const float q[4]) {
  double c[4], len = 0;
  int big = 0;
  for (int i = 0; i < 4; i++) {
    c[i] = q[i];
    len += c[i] * c[i];
    if (fabs(c[i]) > fabs(c[big]))
      big = i;
  }
  /* normalised here too, so a quaternion a little off unit length still fits 10 bits */
  double scale = (c[big] < 0 ? -1 : 1) / (len > 0 ? sqrt(len) : 1);
  uint32_t u = (uint32_t)big << 30;
  int shift = 20;
  for (int i = 0; i < 4; i++) {
    if (i == big)
      continue;
    double k = round((c[i] * scale * SQRT2 + 1) * 511.5);
    k = k >= 0 ? (k <= 1023 ? k : 1023) : 0; /* a NaN becomes 0 too */
    u |= (uint32_t)k << shift;
    shift -= 10;
  }
  return u;
}

void scn_packed_quat_decode(uint32_t u, float q[4]) {
  int big = (int)(u >> 30), shift = 20;
  double sum = 0;
  for (int i = 0; i < 4; i++) {
    if (i == big)
      continue;
    double c = (((u >> shift) & 1023) / 511.5 - 1) / SQRT2;
    q[i] = (float)c;
    sum += c * c;
    shift -= 10;
  }
  q[big] = (float)sqrt(fmax(0, 1 - sum));
}

/* ---- taking a matrix apart ------------------------------------------------------------------- */

/* See SCALE_SNAP: nearly uniform becomes uniform (their mean), nearly 1 becomes 1; the sign of
 * sx (a mirror) stays. */
static void snap_scale(const float s[3], float out[3]) {
  double a[3] = {fabs(s[0]), fabs(s[1]), fabs(s[2])};
  double lo = fmin(a[0], fmin(a[1], a[2])), hi = fmax(a[0], fmax(a[1], a[2]));
  if (hi - lo > SCALE_SNAP * hi) {
    memcpy(out, s, 3 * sizeof *s);
    return;
  }
  double u = (a[0] + a[1] + a[2]) / 3;
  float f = fabs(u - 1) <= SCALE_SNAP ? 1.0f : (float)u;
  out[0] = s[0] < 0 ? -f : f;
  out[1] = out[2] = f;
}

void scn_packed_parts_of(const float m[16], scn_packed_parts *p) {
  float r[4], s[3];
  if (scn_decompose_trs(m, p->t, r, s) != SCN_OK) {
    *p = (scn_packed_parts){.raw = true};
    return;
  }
  p->raw = false;
  p->rotation = scn_packed_quat_encode(r);
  snap_scale(s, p->scale);
}

/* ---- encoding -------------------------------------------------------------------------------- */

/* The largest entry: a gap, the flags, and 16 float32. */
#define ENTRY_MAX (SCN_PACKED_VARINT_MAX + 1 + 64)

/* q of each axis, false when one is Q_LIMIT steps or more from the origin. */
static bool quantize(const scn_packed_baseline *b, const float t[3], int64_t q[3]) {
  for (int k = 0; k < 3; k++) {
    double v = ((double)t[k] - b->origin[k]) / b->step;
    if (!(fabs(v) < Q_LIMIT))
      return false;
    q[k] = (int64_t)round(v);
  }
  return true;
}

/* The 16 float32 of m, non-finite elements as base64 writes them (b64.h). */
static size_t put_raw(uint8_t *out, const float m[16]) {
  for (int i = 0; i < 16; i++) {
    float f = m[i];
    if (isnan(f))
      f = 0;
    else if (isinf(f))
      f = f < 0 ? -FLT_MAX : FLT_MAX;
    scn_packed_put_f32(out + 4 * i, f);
  }
  return 64;
}

static size_t put_scale(uint8_t *out, const float s[3], uint8_t *flags) {
  if (s[0] == s[1] && s[1] == s[2]) {
    *flags |= SCN_PACKED_S_UNI;
    scn_packed_put_f32(out, s[0]);
    return 4;
  }
  *flags |= SCN_PACKED_S;
  for (int k = 0; k < 3; k++)
    scn_packed_put_f32(out + 4 * k, s[k]);
  return 12;
}

/* Writes one entry after its gap (already at out) and brings b up to it; the bytes written. */
static size_t encode_entry(scn_packed_baseline *b, uint64_t id, const float m[16],
                           const scn_packed_parts *p, uint8_t *out) {
  int64_t q[3];
  if (p->raw || !quantize(b, p->t, q)) {
    out[0] = SCN_PACKED_RAW;
    scn_packed_baseline_remove(b, id);
    return 1 + put_raw(out + 1, m);
  }
  scn_packed_value *v = scn_packed_baseline_find(b, id);
  bool fresh = !v;
  if (fresh)
    v = scn_packed_baseline_put(b, id); /* reserved by the caller: cannot fail */
  uint8_t flags = 0;
  size_t n = 1;
  if (fresh || !v->has_q || memcmp(q, v->q, sizeof q)) {
    bool delta = !fresh && v->has_q;
    flags |= delta ? SCN_PACKED_T | SCN_PACKED_DELTA : SCN_PACKED_T;
    for (int k = 0; k < 3; k++)
      n += scn_packed_put_varint(out + n, scn_packed_zigzag(delta ? q[k] - v->q[k] : q[k]));
  }
  if (fresh || p->rotation != v->rotation) {
    flags |= SCN_PACKED_R;
    for (int k = 0; k < 4; k++)
      out[n++] = (uint8_t)(p->rotation >> (8 * k));
  }
  bool scale_changed = memcmp(p->scale, v->scale, sizeof p->scale) != 0;
  if (scale_changed) /* a fresh entry holds (1, 1, 1): "unless 1 on every axis" */
    n += put_scale(out + n, p->scale, &flags);
  out[0] = flags;
  memcpy(v->q, q, sizeof q);
  v->has_q = true;
  v->rotation = p->rotation;
  memcpy(v->scale, p->scale, sizeof v->scale);
  return n;
}

static bool ids_valid(const uint64_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (ids[i] == 0 || ids[i] > SCN_ENTITY_MAX || (i && ids[i] <= ids[i - 1]))
      return false;
  return true;
}

static void put_varint(scn_buf *out, uint64_t v) {
  uint8_t tmp[SCN_PACKED_VARINT_MAX];
  scn_buf_add(out, tmp, scn_packed_put_varint(tmp, v));
}

scn_packed_status scn_packed_encode(scn_packed_baseline *b, const scn_packed_changes *c,
                                    scn_buf *out) {
  if (!ids_valid(c->ids, c->n) || !ids_valid(c->removed, c->removed_n))
    return SCN_PACKED_BAD_INPUT;
  if (!scn_packed_baseline_reserve(b, c->n))
    return SCN_PACKED_NOMEM;
  put_varint(out, c->n);
  uint64_t prev = 0;
  for (size_t i = 0; i < c->n; i++) {
    if (i + PREFETCH_AHEAD < c->n)
      scn_packed_baseline_prefetch(b, c->ids[i + PREFETCH_AHEAD]);
    scn_packed_parts own;
    const scn_packed_parts *p = c->parts ? &c->parts[i] : &own;
    if (!c->parts)
      scn_packed_parts_of(c->m[i], &own);
    uint8_t entry[ENTRY_MAX];
    size_t n = scn_packed_put_varint(entry, c->ids[i] - prev);
    n += encode_entry(b, c->ids[i], c->m[i], p, entry + n);
    scn_buf_add(out, entry, n);
    prev = c->ids[i];
  }
  put_varint(out, c->removed_n);
  prev = 0;
  for (size_t i = 0; i < c->removed_n; i++) {
    put_varint(out, c->removed[i] - prev);
    prev = c->removed[i];
    scn_packed_baseline_remove(b, c->removed[i]);
  }
  return SCN_PACKED_OK;
}

/* Decoding a packed payload against what a client holds. The whole payload is read and checked
 * before anything is applied, so a refused one leaves the baseline as it was; every read is
 * bounded by what is left, and every count by the bytes that could hold it. */
#include "packed.h"

#include "scn_core.h"

#include <math.h>
#include <stdlib.h>

typedef struct reader {
  const uint8_t *p;
  size_t len, pos; /* on a refusal, pos is where the bad value starts */
} reader;

static scn_packed_status read_varint(reader *r, uint64_t *v) {
  size_t used;
  scn_packed_status st = scn_packed_get_varint(r->p + r->pos, r->len - r->pos, v, &used);
  if (st == SCN_PACKED_OK)
    r->pos += used;
  return st;
}

/* The next n bytes, NULL when fewer are left. */
static const uint8_t *read_bytes(reader *r, size_t n) {
  if (r->len - r->pos < n)
    return NULL;
  const uint8_t *at = r->p + r->pos;
  r->pos += n;
  return at;
}

/* The next id of an increasing list: a gap of at least 1 over *id, up to 2^53 - 1. */
static scn_packed_status read_id(reader *r, uint64_t *id) {
  size_t start = r->pos;
  uint64_t gap;
  scn_packed_status st = read_varint(r, &gap);
  if (st != SCN_PACKED_OK)
    return st;
  if (gap == 0 || gap > SCN_ENTITY_MAX - *id) {
    r->pos = start;
    return gap == 0 ? SCN_PACKED_ORDER : SCN_PACKED_ID_RANGE;
  }
  *id += gap;
  return SCN_PACKED_OK;
}

/* T * R * S of v on b's grid, column-major; the rotation's quaternion is normalised. */
static void rebuild(const scn_packed_baseline *b, const scn_packed_value *v, float m[16]) {
  float q[4];
  scn_packed_quat_decode(v->rotation, q);
  double x = q[0], y = q[1], z = q[2], w = q[3];
  double s = 2 / (x * x + y * y + z * z + w * w);
  double r[3][3] = {
      {1 - s * (y * y + z * z), s * (x * y + w * z), s * (x * z - w * y)},
      {s * (x * y - w * z), 1 - s * (x * x + z * z), s * (y * z + w * x)},
      {s * (x * z + w * y), s * (y * z - w * x), 1 - s * (x * x + y * y)},
  };
  for (int j = 0; j < 3; j++) {
    for (int k = 0; k < 3; k++)
      m[4 * j + k] = (float)(r[j][k] * v->scale[j]);
    m[4 * j + 3] = 0;
    m[12 + j] = (float)(b->origin[j] + (double)v->q[j] * b->step);
  }
  m[15] = 1;
}

/* The translation into next->q; a delta needs base->has_q (checked by the caller). */
static scn_packed_status read_translation(reader *r, uint8_t flags, const scn_packed_value *base,
                                          scn_packed_value *next) {
  for (int k = 0; k < 3; k++) {
    size_t start = r->pos;
    uint64_t u;
    scn_packed_status st = read_varint(r, &u);
    if (st != SCN_PACKED_OK)
      return st;
    int64_t d = scn_packed_unzigzag(u);
    if (!(flags & SCN_PACKED_DELTA)) {
      next->q[k] = d;
    } else if (__builtin_add_overflow(base->q[k], d, &next->q[k])) {
      r->pos = start;
      return SCN_PACKED_OVERFLOW;
    }
  }
  next->has_q = true;
  return SCN_PACKED_OK;
}

/* The rotation and scale the flags carry into next. */
static scn_packed_status read_rotation_scale(reader *r, uint8_t flags, scn_packed_value *next) {
  const uint8_t *in;
  if (flags & SCN_PACKED_R) {
    if (!(in = read_bytes(r, 4)))
      return SCN_PACKED_TRUNCATED;
    next->rotation =
        (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
  }
  if (flags & SCN_PACKED_S_UNI) {
    if (!(in = read_bytes(r, 4)))
      return SCN_PACKED_TRUNCATED;
    next->scale[0] = next->scale[1] = next->scale[2] = scn_packed_get_f32(in);
  } else if (flags & SCN_PACKED_S) {
    if (!(in = read_bytes(r, 12)))
      return SCN_PACKED_TRUNCATED;
    for (int k = 0; k < 3; k++)
      next->scale[k] = scn_packed_get_f32(in + 4 * k);
  }
  return SCN_PACKED_OK;
}

static bool flags_valid(uint8_t flags) {
  if (flags & SCN_PACKED_RAW)
    return flags == SCN_PACKED_RAW;
  return !(flags & ~63) && (flags & SCN_PACKED_T || !(flags & SCN_PACKED_DELTA)) &&
         !(flags & SCN_PACKED_S_UNI && flags & SCN_PACKED_S);
}

/* One entry after its id: its matrix, and what it leaves in the baseline (*raw: nothing). */
static scn_packed_status read_entry(const scn_packed_baseline *b, reader *r, uint64_t id,
                                    float m[16], scn_packed_value *next, bool *raw) {
  size_t start = r->pos;
  const uint8_t *in = read_bytes(r, 1);
  if (!in)
    return SCN_PACKED_TRUNCATED;
  uint8_t flags = *in;
  if (!flags_valid(flags)) {
    r->pos = start;
    return SCN_PACKED_FLAGS;
  }
  *raw = flags & SCN_PACKED_RAW;
  if (*raw) {
    if (!(in = read_bytes(r, 64)))
      return SCN_PACKED_TRUNCATED;
    for (int i = 0; i < 16; i++)
      m[i] = scn_packed_get_f32(in + 4 * i);
    return SCN_PACKED_OK;
  }
  const scn_packed_value *base = scn_packed_baseline_find(b, id);
  bool has_q = base && base->has_q;
  /* what the entry leaves out, or takes a delta of, the client must hold */
  bool needs_q = !(flags & SCN_PACKED_T) || flags & SCN_PACKED_DELTA;
  if ((needs_q && !has_q) || (!(flags & SCN_PACKED_R) && !base)) {
    r->pos = start;
    return SCN_PACKED_NO_BASELINE;
  }
  *next = base ? *base : (scn_packed_value){.scale = {1, 1, 1}};
  scn_packed_status st = SCN_PACKED_OK;
  if (flags & SCN_PACKED_T)
    st = read_translation(r, flags, base, next);
  if (st == SCN_PACKED_OK)
    st = read_rotation_scale(r, flags, next);
  if (st == SCN_PACKED_OK)
    rebuild(b, next, m);
  return st;
}

/* Room for n entries and removed ids in f. An array that grew is kept when another could not
 * (the capacity stays the smaller one). */
static bool frame_reserve(scn_packed_frame *f, size_t n, size_t removed) {
  if (n > f->cap) {
    void *ids = realloc(f->ids, n * sizeof *f->ids), *m = realloc(f->m, n * sizeof *f->m);
    f->ids = ids ? ids : f->ids;
    f->m = m ? m : f->m;
    void *next = realloc(f->next, n * sizeof *f->next);
    f->next = next ? next : f->next;
    void *raw = realloc(f->next_raw, n * sizeof *f->next_raw);
    f->next_raw = raw ? raw : f->next_raw;
    if (!ids || !m || !next || !raw)
      return false;
    f->cap = n;
  }
  if (removed > f->removed_cap) {
    void *ids = realloc(f->removed, removed * sizeof *f->removed);
    if (!ids)
      return false;
    f->removed = ids;
    f->removed_cap = removed;
  }
  return true;
}

void scn_packed_frame_free(scn_packed_frame *f) {
  free(f->ids);
  free(f->m);
  free(f->next);
  free(f->next_raw);
  free(f->removed);
  *f = (scn_packed_frame){0};
}

/* Reads a count, at most what the bytes left hold at min_bytes an item. */
static scn_packed_status read_count(reader *r, size_t min_bytes, size_t *count) {
  size_t start = r->pos;
  uint64_t n;
  scn_packed_status st = read_varint(r, &n);
  if (st == SCN_PACKED_OK && n > (r->len - r->pos) / min_bytes) {
    r->pos = start;
    st = SCN_PACKED_COUNT;
  }
  *count = (size_t)n;
  return st;
}

/* How many entries ahead the decoder asks for a baseline slot. */
#define PREFETCH_AHEAD 8

/* The ids of the first entries, as far as they read well, into ids (the decoding pass that
 * follows checks everything): with them it can ask for baseline slots ahead of need. */
static size_t scan_ids(reader r, size_t n, uint64_t *ids) {
  uint64_t id = 0, v;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *flags;
    if (read_id(&r, &id) != SCN_PACKED_OK || !(flags = read_bytes(&r, 1)))
      return i;
    ids[i] = id;
    size_t skip = *flags & SCN_PACKED_RAW ? 64 : 0;
    for (int k = 0; k < 3 && (*flags & SCN_PACKED_T); k++)
      if (read_varint(&r, &v) != SCN_PACKED_OK)
        return i + 1;
    skip += (*flags & SCN_PACKED_R ? 4 : 0) + (*flags & SCN_PACKED_S_UNI ? 4 : 0) +
            (*flags & SCN_PACKED_S ? 12 : 0);
    if (!read_bytes(&r, skip))
      return i + 1;
  }
  return n;
}

static scn_packed_status read_payload(const scn_packed_baseline *b, reader *r,
                                      scn_packed_frame *f) {
  size_t n, removed;
  scn_packed_status st = read_count(r, 2, &n); /* an entry is a gap and flags at least */
  if (st != SCN_PACKED_OK)
    return st;
  if (!frame_reserve(f, n, 0))
    return SCN_PACKED_NOMEM;
  size_t scanned = scan_ids(*r, n, f->ids);
  uint64_t id = 0;
  for (size_t i = 0; i < n; i++) {
    if (i + PREFETCH_AHEAD < scanned)
      scn_packed_baseline_prefetch(b, f->ids[i + PREFETCH_AHEAD]);
    if ((st = read_id(r, &id)) != SCN_PACKED_OK ||
        (st = read_entry(b, r, id, f->m[i], &f->next[i], &f->next_raw[i])) != SCN_PACKED_OK)
      return st;
    f->ids[i] = id;
  }
  f->n = n;
  if ((st = read_count(r, 1, &removed)) != SCN_PACKED_OK)
    return st;
  if (!frame_reserve(f, 0, removed))
    return SCN_PACKED_NOMEM;
  id = 0;
  for (size_t i = 0; i < removed; i++) {
    if ((st = read_id(r, &id)) != SCN_PACKED_OK)
      return st;
    f->removed[i] = id;
  }
  f->removed_n = removed;
  return r->pos == r->len ? SCN_PACKED_OK : SCN_PACKED_TRAILING;
}

scn_packed_status scn_packed_decode(scn_packed_baseline *b, const uint8_t *p, size_t len,
                                    scn_packed_frame *f, size_t *at) {
  reader r = {p, len, 0};
  f->n = f->removed_n = 0;
  scn_packed_status st = read_payload(b, &r, f);
  if (st == SCN_PACKED_OK && !scn_packed_baseline_reserve(b, f->n))
    st = SCN_PACKED_NOMEM;
  if (st != SCN_PACKED_OK) {
    f->n = f->removed_n = 0;
    if (at)
      *at = r.pos;
    return st;
  }
  for (size_t i = 0; i < f->n; i++) {
    if (i + PREFETCH_AHEAD < f->n)
      scn_packed_baseline_prefetch(b, f->ids[i + PREFETCH_AHEAD]);
    if (f->next_raw[i])
      scn_packed_baseline_remove(b, f->ids[i]);
    else
      *scn_packed_baseline_put(b, f->ids[i]) = f->next[i]; /* reserved: cannot fail */
  }
  for (size_t i = 0; i < f->removed_n; i++)
    scn_packed_baseline_remove(b, f->removed[i]);
  return SCN_PACKED_OK;
}

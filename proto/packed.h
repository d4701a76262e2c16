/* Packed frames: the payload of a packed subscription's frame (CONTRACT, "Packed frames"), a
 * translation quantized to the subscription's step, a rotation in four bytes and a scale only
 * when there is one, as deltas against what the subscription last received. A pure codec over
 * buffers: the daemon encodes with the baseline it keeps per subscription, a client decodes
 * with the one it keeps beside its mirror; sockets, base64 and the frame's header are the
 * callers'.
 *
 * The payload, little-endian: varint count; per entry, in increasing id, varint id gap, u8
 * flags, then the parts the flags name; varint removed count and the removed ids' gaps. */
#ifndef SCN_PACKED_H
#define SCN_PACKED_H

#include "buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* An entry's flags. */
#define SCN_PACKED_T 1           /* a translation: three zigzag varints */
#define SCN_PACKED_DELTA 2       /* ... each the difference from the last q received */
#define SCN_PACKED_R 4           /* a rotation: a u32 "smallest three" */
#define SCN_PACKED_S_UNI 8       /* a uniform scale: one float32 */
#define SCN_PACKED_S 16          /* a scale: three float32 (a mirror is a negative sx) */
#define SCN_PACKED_RAW 32        /* the world matrix as 16 float32, and nothing else */
#define SCN_PACKED_VARINT_MAX 10 /* bytes of a 64-bit varint */

typedef enum scn_packed_status {
  SCN_PACKED_OK = 0,
  SCN_PACKED_TRUNCATED,   /* the payload ends inside a value */
  SCN_PACKED_TRAILING,    /* bytes after the removed ids */
  SCN_PACKED_VARINT,      /* a varint of more than 64 bits */
  SCN_PACKED_COUNT,       /* a count larger than the bytes left could hold */
  SCN_PACKED_ORDER,       /* an id gap of 0: ids not increasing (or an id of 0) */
  SCN_PACKED_ID_RANGE,    /* an id past 2^53 - 1 */
  SCN_PACKED_FLAGS,       /* unknown bits, raw with others, a delta without 1, 8 with 16 */
  SCN_PACKED_NO_BASELINE, /* a delta, or a part left out, that the client holds no value of */
  SCN_PACKED_OVERFLOW,    /* a delta that takes q out of the 64-bit range */
  SCN_PACKED_BAD_INPUT,   /* encoder: an id of 0, past 2^53 - 1, or not increasing */
  SCN_PACKED_NOMEM,
} scn_packed_status;

/* What a status means, for error messages ("the payload ends inside a value", ...). */
const char *scn_packed_status_text(scn_packed_status st);

/* ---- primitives ------------------------------------------------------------------------------ */

/* Unsigned LEB128: writes v to out, returns the bytes written (1 to 10). */
size_t scn_packed_put_varint(uint8_t out[SCN_PACKED_VARINT_MAX], uint64_t v);
/* Reads a varint from the len bytes at p into *v and the bytes it took into *used: OK,
 * TRUNCATED (no last byte within len) or VARINT (more than 64 bits). A value may be written
 * in more bytes than it needs, as LEB128 allows. */
scn_packed_status scn_packed_get_varint(const uint8_t *p, size_t len, uint64_t *v, size_t *used);

static inline uint64_t scn_packed_zigzag(int64_t n) {
  return ((uint64_t)n << 1) ^ (uint64_t)(n >> 63); /* n >> 63: all ones when n < 0 */
}
static inline int64_t scn_packed_unzigzag(uint64_t u) {
  return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static inline void scn_packed_put_f32(uint8_t out[4], float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  out[0] = (uint8_t)u, out[1] = (uint8_t)(u >> 8), out[2] = (uint8_t)(u >> 16);
  out[3] = (uint8_t)(u >> 24);
}
static inline float scn_packed_get_f32(const uint8_t in[4]) {
  uint32_t u =
      (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* "Smallest three" of a unit quaternion (x, y, z, w): bits 30-31 the index of the component
 * largest in magnitude (the first such, on a tie), the quaternion negated when that component
 * is negative, and the other three in order at bits 20-29, 10-19, 0-9, each as
 * k = round((c * sqrt(2) + 1) * 511.5) (clamped to 0..1023). */
uint32_t scn_packed_quat_encode(const float q[4]);
/* The inverse: c = (k / 511.5 - 1) / sqrt(2), the omitted component sqrt(max(0, 1 - the sum
 * of the others' squares)); every u32 decodes to finite components (the clamp), and to a
 * quaternion that is not zero (no k gives c = 0), though one that no encoder writes may be
 * longer than 1 (rotation_matrix normalises it). */
void scn_packed_quat_decode(uint32_t u, float q[4]);

/* ---- what a subscription holds --------------------------------------------------------------- */

/* The last values a subscription received for one entity. */
typedef struct scn_packed_value {
  int64_t q[3];      /* the quantized translation; meaningful when has_q */
  float scale[3];    /* (1, 1, 1) when none was sent */
  uint32_t rotation; /* smallest three */
  bool has_q;        /* false after the step or origin changed: the next one is absolute */
} scn_packed_value;

/* Per subscription (the daemon's) or per mirror (a client's): the step and origin, and the
 * last values received per entity, in an open-addressing table keyed by entity id (linear
 * probing, deletion by shifting the run back, so churn never slows it down). An entity with
 * no entry (never sent, removed, or last sent raw) next travels absolute. Zero-initialised is
 * an empty table, but the grid must be set before encoding or decoding. */
typedef struct scn_packed_baseline {
  double step;      /* the translation quantum, positive and finite */
  double origin[3]; /* finite */
  uint64_t *ids;    /* 0: an empty slot */
  scn_packed_value *values;
  size_t mask; /* slots - 1 (a power of two); 0 with no slots */
  size_t count;
} scn_packed_baseline;

/* Sets the step and origin (false, changing nothing, when step is not positive and finite or
 * the origin not finite). A step or origin other than the current one forgets every
 * translation, so each is absolute next time (rotations and scales stay). */
bool scn_packed_baseline_set_grid(scn_packed_baseline *b, double step, const double origin[3]);
void scn_packed_baseline_free(scn_packed_baseline *b);
/* Makes *dst (empty, zero-initialised) a copy of src, grid and entries; false when out of
 * memory (dst stays empty). */
bool scn_packed_baseline_copy(scn_packed_baseline *dst, const scn_packed_baseline *src);
/* Forgets every entity (a full frame: everything travels absolute). Keeps the grid. */
void scn_packed_baseline_clear(scn_packed_baseline *b);
/* Forgets every translation; the rotations and scales stay. */
void scn_packed_baseline_forget_translations(scn_packed_baseline *b);
/* Asks the cache for where id's values are (the encoder does it a few entries ahead: the
 * table's slots are scattered, and a lookup would otherwise wait for memory). */
void scn_packed_baseline_prefetch(const scn_packed_baseline *b, uint64_t id);
/* The entity's values, NULL when it has none. */
scn_packed_value *scn_packed_baseline_find(const scn_packed_baseline *b, uint64_t id);
/* The entity's values, added (with has_q false, no scale, rotation 0) when it had none; NULL
 * when memory ran out. id must not be 0. */
scn_packed_value *scn_packed_baseline_put(scn_packed_baseline *b, uint64_t id);
/* Room for extra more entities, so that as many puts cannot fail. */
bool scn_packed_baseline_reserve(scn_packed_baseline *b, size_t extra);
void scn_packed_baseline_remove(scn_packed_baseline *b, uint64_t id);

/* ---- encoding -------------------------------------------------------------------------------- */

/* An entity's world matrix taken apart once, for every subscription that sends it. */
typedef struct scn_packed_parts {
  float t[3];        /* elements 12, 13, 14 */
  float scale[3];    /* sx negative for a mirror; snapped to 1 or to uniform (packed.c) */
  uint32_t rotation; /* smallest three */
  bool raw;          /* not T x R x S: sent as the 16 float32 of the matrix */
} scn_packed_parts;

/* Takes m apart with scn_decompose_trs; raw when that fails (shear, a zero scale, a last row
 * other than 0 0 0 1, a non-finite element). */
void scn_packed_parts_of(const float m[16], scn_packed_parts *p);

/* One frame's content: the changed entities in increasing id with their world matrices
 * (column-major), and the removed ones in increasing id. parts, when not NULL, holds
 * scn_packed_parts_of of each matrix (worked out once for all subscriptions); NULL works them
 * out here. */
typedef struct scn_packed_changes {
  const uint64_t *ids;
  const float (*m)[16];
  const scn_packed_parts *parts;
  size_t n;
  const uint64_t *removed;
  size_t removed_n;
} scn_packed_changes;

/* Appends the payload of c to out and brings b up to what it sent: an entity without an entry
 * gets an absolute translation, a rotation and a scale unless 1 on every axis; one with an
 * entry gets only the parts that differ from it (the translation as a delta of q when its q
 * is known), and flags 0 when none does (it is still listed, as the other forms list it); a
 * matrix that is not T x R x S, or whose translation is 2^62 steps or more from the origin,
 * goes raw (infinities written as the largest finite float32 of their sign and NaN as 0, as
 * in base64) and leaves b; removed ids leave b. BAD_INPUT, writing nothing and changing
 * nothing, when an id of either list is 0, past 2^53 - 1 or not above the one before; NOMEM
 * likewise when b cannot grow. When out->failed is set afterwards, b holds what was meant to
 * be sent and no longer what the client has: clear it before the next frame. */
scn_packed_status scn_packed_encode(scn_packed_baseline *b, const scn_packed_changes *c,
                                    scn_buf *out);

/* ---- decoding -------------------------------------------------------------------------------- */

/* A decoded payload, reused from frame to frame (its arrays grow as needed). */
typedef struct scn_packed_frame {
  uint64_t *ids;  /* the entries, in increasing id */
  float (*m)[16]; /* each one's world matrix, T * R * S, column-major (or as sent, raw) */
  size_t n;
  uint64_t *removed;
  size_t removed_n;
  scn_packed_value *next; /* internal: what each entry leaves in the baseline */
  bool *next_raw;         /* internal: the entry was raw (it leaves the baseline) */
  size_t cap, removed_cap;
} scn_packed_frame;

void scn_packed_frame_free(scn_packed_frame *f);

/* Decodes the len bytes at p against b into f and, when the whole payload is good, brings b
 * up to it (entries, then removals). Anything else is refused with why, b unchanged, and the
 * offset of the byte where it went wrong in *at (when at is not NULL). Refused: truncation,
 * trailing bytes, a varint over 64 bits, a count the bytes left cannot hold, an id gap of 0
 * or an id past 2^53 - 1, unknown flag bits or raw with any other, a delta without 1, 8
 * with 16, a delta or a left-out translation or rotation for an entity b holds no such value
 * of, and a delta that overflows 64 bits. */
scn_packed_status scn_packed_decode(scn_packed_baseline *b, const uint8_t *p, size_t len,
                                    scn_packed_frame *f, size_t *at);

#endif

/* Packed subscriptions' frames (CONTRACT, "Packed frames"): what each packed subscriber last
 * received (its baseline), and the payload of a frame against it, over TCP as the JSON line's
 * base64 and over WebSocket as the bytes of a binary message.
 *
 * Subscribers in step share: a baseline made by a full frame and changed by nothing but the
 * frames sent since is a function of the world as of the subscriber's last tick (its values
 * quantized on its grid), so two such ("pure") baselines with the same grid, due the same frame
 * (the same scope and "since"), hold the same and take one payload; they are merged into one
 * reference-counted state then. A new grid forgets translations and makes a baseline impure:
 * it shares with nothing it does not already share with, until its next full frame. */
#ifndef SCN_PACKED_FRAMES_H
#define SCN_PACKED_FRAMES_H

#include "net/outq.h"
#include "ops/metrics.h"
#include "packed.h"
#include "stream/frame.h"

typedef struct scn_pack_grid {
  double step, origin[3];
} scn_pack_grid;

/* A baseline, shared by the subscribers that last received the same. */
typedef struct scn_pack {
  uint32_t refs;
  bool pure; /* made by a full frame and the frames since, on one grid */
  scn_packed_baseline base;
} scn_pack;

void scn_pack_release(scn_pack *p);
/* Gives the subscriber whose baseline is *p (NULL: none yet) the grid g from its next frame
 * on: every translation is then absolute once. A shared baseline is copied first. False when
 * out of memory (nothing changed). */
bool scn_pack_regrid(scn_pack **p, const scn_pack_grid *g);

/* A packed subscriber due a frame. */
typedef struct scn_pack_due {
  scn_pack **pack;           /* its baseline (NULL: none), replaced by what it holds after */
  const scn_pack_grid *grid; /* its grid */
  bool binary;               /* WebSocket: the payload alone; else the line body */
  scn_shared *body;          /* out: a reference to release; NULL when out of memory */
  void *ud;                  /* the caller's */
  uint32_t entry;            /* internal */
} scn_pack_due;

typedef struct scn_pack_entry scn_pack_entry;

/* Reusable scratch, zero-initialised; freed with scn_pack_encoder_free. */
typedef struct scn_pack_encoder {
  struct scn_pack_order *order; /* the frame's entries by id */
  size_t order_cap;
  uint64_t *ids, *removed; /* the frame's entries sorted here, when they were not already */
  float (*ms)[16];
  const uint64_t *sorted_ids; /* the frame's own arrays, or the ones above */
  const float (*sorted_ms)[16];
  scn_packed_parts *parts;
  size_t ids_cap, parts_cap, removed_cap; /* ids_cap: of ids and ms alike */
  scn_pack_entry *entries;
  size_t entries_cap;
  scn_buf payload;
  uint64_t payload_bytes, payloads; /* figures: bytes and number of payloads encoded */
} scn_pack_encoder;

void scn_pack_encoder_free(scn_pack_encoder *pe);

/* Encodes frame f (not empty; full when it is a full frame) for the n subscribers in due, all
 * due exactly this frame: one payload per set of equal baselines. Each gets its body and its
 * baseline after the frame; one whose body is NULL (out of memory) has no baseline left and
 * needs a full frame. */
void scn_pack_frames(scn_pack_encoder *pe, const scn_frame *f, bool full, scn_pack_due *due,
                     size_t n);

/* The body of a packed frame of w at tick that only removes the n ids (sorted here, in
 * place), for a line or (binary) a WebSocket message; NULL when out of memory. */
scn_shared *scn_pack_removal_body(const scn_world *w, uint64_t tick, scn_entity *ids, size_t n,
                                  bool binary);

/* What comes before a packed frame's body of len bytes, for one subscriber: over TCP the line's
 * start ({"event":"frame","sub":S); over WebSocket (binary) the message's start and its
 * header, sub (u32), tick (u64) and flags (u8, bit 0: full), little-endian. */
void scn_pack_header(scn_buf *out, bool binary, uint64_t sub, uint64_t tick, bool full, size_t len);

/* The packed frames' figures. */
void scn_pack_stats(const scn_pack_encoder *pe, scn_metrics_sink *k, uint64_t subscriptions);

#endif

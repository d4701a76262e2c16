/* Frame encoding, apart from sockets and subscriptions: given a world and a scope (the whole
 * world, or a subtree), the tick a subscriber last saw and whether it needs everything, the
 * frame text that brings it to the tick just closed. Needs only the core and proto's buffers,
 * so it is tested on its own. */
#ifndef SCN_FRAME_H
#define SCN_FRAME_H

#include "buf.h"
#include "scn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The sorted entity ids of a subtree scope as of one tick, shared (reference-counted) by the
 * subscriptions that last saw that tick. */
typedef struct scn_members {
  uint32_t refs;
  size_t n;
  scn_entity ids[];
} scn_members;

static inline scn_members *scn_members_ref(scn_members *m) {
  if (m)
    m->refs++;
  return m;
}
void scn_members_release(scn_members *m);

/* Which frame: every subscription with the same key gets the same bytes. */
typedef struct scn_frame_key {
  scn_world *world;
  scn_entity root; /* SCN_ENTITY_NONE: the whole world */
  uint64_t since;  /* the tick the subscriber last saw (0 with full) */
  bool full;
} scn_frame_key;

/* A transform of the set, copied out of the world, so a large frame can be written in slices
 * while the world moves on. */
typedef struct scn_set_entry {
  scn_entity e;
  float m[16];
} scn_set_entry;

typedef struct scn_id_vec {
  scn_entity *ids;
  size_t n, cap;
} scn_id_vec;

/* Open-addressing set of entity ids, cleared between uses. */
typedef struct scn_id_set {
  scn_entity *slots;
  size_t mask;
} scn_id_set;

/* An encoded frame, in three pieces: head (from ,"world": to "set":[), the set's entries, and
 * tail (from the set's ] to the line end). The body of the frame line is head, the entries
 * written by scn_frame_write_entries, then tail; only the header naming the subscription,
 * {"event":"frame","sub":S, comes before it. */
typedef struct scn_frame {
  uint64_t tick;
  bool ok;              /* false: out of memory; the subscribers stay where they were */
  bool empty;           /* nothing changed: nothing is written, the subscribers move on */
  scn_members *members; /* subtree scope after this frame (a reference the caller releases) */
  scn_buf head, tail;
  scn_set_entry *entries;
  size_t n, cap;
} scn_frame;

/* The encoder's reusable scratch; zero-initialised, freed with scn_frame_encoder_free. */
typedef struct scn_frame_encoder {
  scn_id_vec current, entered, removed;
  scn_id_set first_seen;
} scn_frame_encoder;

void scn_frame_encoder_free(scn_frame_encoder *enc);
void scn_frame_free(scn_frame *f);

/* Encodes the frame for key into f, reusing f's buffers (old: the subtree scope the subscriber
 * last saw, NULL for a full frame or the whole world). A whole-world delta needs the world's
 * event log back to since (scn_world_keep_events). */
void scn_frame_encode(scn_frame_encoder *enc, const scn_frame_key *k, const scn_members *old,
                      scn_frame *f);
/* Text of entries [from, to) of a set. */
void scn_frame_write_entries(scn_buf *out, const scn_set_entry *items, size_t from, size_t to);

#endif

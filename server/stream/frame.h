/* Frame encoding, apart from sockets and subscriptions: given a world and a scope (the whole
 * world, or a subtree), the tick a subscriber last saw and whether it needs everything, the
 * frame text that brings it to the tick just closed. Needs only the core and proto's buffers,
 * so it is tested on its own. */
#ifndef SCN_FRAME_H
#define SCN_FRAME_H

#include "buf.h"
#include "scn_core.h"
#include "scn_interest.h"
#include "wire.h"

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

/* Which frame: every subscription with the same key gets the same transforms; those that also
 * take matrices in the same form (json or b64) get the same bytes. */
typedef struct scn_frame_key {
  scn_world *world;
  const void *region; /* a region's frame (scn_frame_encode_fill), NULL for a scope */
  scn_entity root;    /* SCN_ENTITY_NONE: the whole world */
  uint64_t since;     /* the tick the subscriber last saw (0 with full) */
  bool full;
} scn_frame_key;

typedef struct scn_id_vec {
  scn_entity *ids;
  size_t n, cap;
} scn_id_vec;

/* Open-addressing set of entity ids, cleared between uses. */
typedef struct scn_id_set {
  scn_entity *slots;
  size_t mask;
} scn_id_set;

/* A frame: its transforms and matrices copied out of the world (so a large frame can be
 * written in slices while the world moves on), and the text of what every form shares: head
 * (,"world":...,"full":B) and tail (,"removed":[...]} and the line end). The body of the frame
 * line, written by scn_frame_write, is head, the set in one form, then tail; only the header
 * naming the subscription, {"event":"frame","sub":S, comes before it. The set is
 * "set":[{"e":id,"m":[16 numbers]},...] in json form, "ids":[...],"ms":"<base64>" in b64. */
typedef struct scn_frame {
  uint64_t tick;
  bool ok;              /* false: out of memory; the subscribers stay where they were */
  bool empty;           /* nothing changed: nothing is written, the subscribers move on */
  scn_members *members; /* subtree scope after this frame (a reference the caller releases) */
  scn_buf head, tail;
  scn_entity *ids; /* the set: ids[i] has the world matrix ms[i] */
  float (*ms)[16];
  size_t n, cap;
  scn_entity *removed; /* what the tail lists as removed (packed frames carry them too) */
  size_t removed_n, removed_cap;
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
/* A frame of what fill gives: it calls set(sink, e, world matrix) for each transform sent and
 * removed(sink, e) for each one removed, and returns a count, or a negative scn_err when it
 * failed (f is then not ok, and that is returned). full: the frame holds everything. */
typedef int64_t (*scn_frame_fill_fn)(void *ud, scn_visit_fn set, scn_removed_fn removed,
                                     void *sink);
int64_t scn_frame_encode_fill(scn_frame_encoder *enc, scn_world *w, bool full,
                              scn_frame_fill_fn fill, void *ud, scn_frame *f);
/* What a whole-world subscriber that last saw tick since holds: every transform w has now
 * whose first event after since is not its creation, and every entity whose first event is a
 * destruction or a move (w must keep its log back to since). SCN_OK or SCN_NOMEM. */
int scn_frame_holdings(scn_frame_encoder *enc, scn_world *w, uint64_t since,
                       void (*fn)(void *ud, scn_entity e), void *ud);
/* A frame's head: ,"world":W,"tick":T,"full":B. */
void scn_frame_head(scn_buf *out, const scn_world *w, uint64_t tick, bool full);
/* Writes the body of f in form to out, a piece at a time: from *at (0 at first) on, at most
 * about budget transforms' worth (at least 3), then *at says where the next piece starts.
 * True once the body is complete. Slices of base64 join without padding: every piece but the
 * last holds a multiple of three matrices. */
bool scn_frame_write(scn_buf *out, const scn_frame *f, scn_matrix_form form, size_t *at,
                     size_t budget);

#endif

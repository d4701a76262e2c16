/* scene_bench_stream.h: what the stream test's files share: the exact world matrices of its
 * workload (a root that moves and turns every tick, with K descendants each at its own place
 * and turn), the check of the matrices received against them, and the decoding of a
 * subscription's frames (packed payloads, and b64 ones for the float32 control). */
#ifndef SCENE_BENCH_STREAM_H
#define SCENE_BENCH_STREAM_H

#include "packed.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The root's local (= world) transform at sequence number seq, as the mover sets it: the x
 * translation seq, a turn of seq * 0.01 rad about the axis (1, 2, 3). The descendant i's
 * local transform: the translation (i % 316, 0, i / 316), a turn of (i % 360) degrees about y. */
#define STREAM_ROW 316
void stream_root_quat(long seq, double q[4]);
void stream_descendant(int i, double t[3], double q[4]);

/* The workload's transforms by entity id. */
typedef struct stream_model {
  uint64_t root;
  size_t n;           /* descendants */
  uint64_t *ids;      /* increasing */
  double (*local)[4]; /* of each: x, z, and the cosine and sine of its turn about y */
} stream_model;

/* ids[i] is descendant i. False when out of memory. */
bool stream_model_init(stream_model *m, uint64_t root, const uint64_t *ids, size_t n);
void stream_model_free(stream_model *m);

/* The largest errors of the matrices received against the exact ones. */
typedef struct stream_check {
  double step;       /* the translation quantum (0: b64, exact float32 values) */
  double err[3];     /* translation, per axis, in world units */
  double beyond_ulp; /* the largest translation error beyond step / 2, in float32 ulps of the
                        largest value that went into it (|x of the root| + |descendant's t|) */
  double rot_d2;     /* the largest |D - X|^2 of a received rotation D and the exact X */
  long checked;      /* matrices */
  long unknown;      /* entries whose entity the workload does not have */
  double seconds;    /* spent decoding and checking (the reader's own cost) */
} stream_check;

/* Checks n world matrices of entities ids (increasing or not) against the workload at seq. */
void stream_check_matrices(const stream_model *m, long seq, const uint64_t *ids,
                           const float (*w)[16], size_t n, stream_check *c);
/* The largest rotation error, in degrees. */
double stream_check_rot_deg(const stream_check *c);

/* What a packed subscriber holds: its baseline. The daemon sends subscribers in step one
 * payload (their baselines are the same), so the bench's subscribers share a state as long as
 * they receive the same bytes: a payload is decoded once from a state, and a subscriber on that
 * state that receives the same bytes moves on to the state it led to without decoding them
 * again (one process reads every subscriber, and decoding each copy of a shared payload would
 * make its own work, not the daemon's, the limit). States are reference-counted. */
typedef struct packed_state {
  scn_packed_baseline base;
  int refs; /* subscribers on it, and the state before it when it is that one's next */
  /* the last payload decoded from this state, as it came (base64 or bytes), and its result */
  uint8_t *wire;
  size_t wire_len, wire_cap;
  bool full;
  struct packed_state *next; /* NULL: none */
  long next_n;               /* its matrices */
  long at_seq;               /* the sequence number of the last frame with the root that led here */
} packed_state;

/* What every packed subscriber of a run shares: the decoder's buffers and counts. */
typedef struct packed_run {
  scn_packed_frame frame;
  uint8_t *bytes; /* a payload out of base64 */
  size_t bytes_cap;
  long decoded, reused; /* payloads decoded, and payloads found decoded already */
} packed_run;

/* A state with the grid step (origin 0) for refs subscribers; NULL when out of memory or step
 * is no step. */
packed_state *packed_state_new(double step, int refs);
void packed_state_unref(packed_state *s);
void packed_run_free(packed_run *r);

/* A packed payload of the subscriber on *state, base64 text (TCP) or bytes (WebSocket):
 * decodes it (a full frame forgets what came before) and checks its matrices, or finds it
 * decoded already from the same state; moves *state on; returns its matrices, and the frame's
 * sequence number in *seq and the payload's bytes in *payload_len. A payload the decoder
 * refuses ends the bench with why (the daemon sent what the contract does not allow). */
long packed_take(packed_run *r, packed_state **state, const stream_model *m, bool full,
                 const uint8_t *wire, size_t len, bool base64, stream_check *c, long *seq,
                 size_t *payload_len);
/* A TCP frame line of a packed subscription ("packed": base64): the same; -1 when the line is
 * not a packed frame. */
long packed_take_line(packed_run *r, packed_state **state, const stream_model *m, const char *start,
                      const char *end, stream_check *c, long *seq, size_t *payload_len);

/* A b64 subscriber's buffers, reused from frame to frame. */
typedef struct b64_decoder {
  uint64_t *ids;
  float (*m)[16];
  size_t cap, m_cap;
  long seq; /* of the last frame with the root in it */
} b64_decoder;

void b64_decoder_free(b64_decoder *d);
/* A b64 frame line ("ids", "ms"): checks every matrix against the workload (the daemon's own
 * float32 error: the control for the packed figures). Its matrices, or -1 when it is not one. */
long b64_check_line(b64_decoder *d, const stream_model *m, const char *start, const char *end,
                    stream_check *c);

#endif

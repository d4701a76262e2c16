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

/* One subscription's decoding state, reused from frame to frame. */
typedef struct sub_decoder {
  scn_packed_baseline base; /* packed: what this subscription last received */
  scn_packed_frame frame;
  uint8_t *bytes; /* a TCP frame's payload out of base64 */
  size_t bytes_cap;
  uint64_t *ids; /* a b64 frame's entities and matrices */
  float (*m)[16];
  size_t cap, m_cap;
  long seq; /* the sequence number of the last frame with the root in it */
} sub_decoder;

/* A packed decoder with the grid step (origin 0). False when step is no step. */
bool sub_decoder_packed(sub_decoder *d, double step);
void sub_decoder_free(sub_decoder *d);

/* A packed payload: decodes it (a full frame forgets what came before), checks its matrices,
 * returns how many, and the frame's sequence number in *seq. A payload the decoder refuses
 * ends the bench with why (the daemon sent what the contract does not allow). */
long packed_take(sub_decoder *d, const stream_model *m, bool full, const uint8_t *p, size_t len,
                 stream_check *c, long *seq);
/* A TCP frame line of a packed subscription ("packed": base64): the same, with the payload's
 * bytes in *payload_len. -1 when the line is not a packed frame. */
long packed_take_line(sub_decoder *d, const stream_model *m, const char *start, const char *end,
                      stream_check *c, long *seq, size_t *payload_len);
/* A b64 frame line ("ids", "ms"): checks every matrix against the workload (the daemon's own
 * float32 error: the control for the packed figures). Its matrices, or -1 when it is not one. */
long b64_check_line(sub_decoder *d, const stream_model *m, const char *start, const char *end,
                    stream_check *c);

#endif

/* A connection's output: its own bytes (replies, event headers) interleaved with references to
 * shared, reference-counted frame bodies, so one encoded frame reaches every subscriber
 * without a copy per subscriber. */
#ifndef SCN_OUTQ_H
#define SCN_OUTQ_H

#include "buf.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct scn_shared {
  uint32_t refs;
  size_t len;
  char data[];
} scn_shared;

/* A new shared block of len bytes (content to be filled in) with one reference. */
scn_shared *scn_shared_new(size_t len);
static inline scn_shared *scn_shared_ref(scn_shared *s) {
  s->refs++;
  return s;
}
void scn_shared_release(scn_shared *s);
/* A new shared block holding a copy of text's bytes; NULL when out of memory (or text ran out of
 * it). */
scn_shared *scn_shared_copy(const scn_buf *text);
/* A shared block built in place: scn_shared_start leaves room for the block's header at the
 * start of an empty b, text is then appended to b, and scn_shared_finish turns b's memory into
 * the block, without copying it (b is left empty). NULL when b ran out of memory. */
void scn_shared_start(scn_buf *b);
scn_shared *scn_shared_finish(scn_buf *b);

typedef struct scn_seg {
  size_t owned_end; /* own bytes up to here come before ref */
  scn_shared *ref;
} scn_seg;

typedef struct scn_outq {
  scn_buf bytes;
  scn_seg *segs;
  size_t nsegs, segs_cap;
  size_t shared_bytes;
} scn_outq;

static inline size_t scn_outq_size(const scn_outq *q) { return q->bytes.len + q->shared_bytes; }
/* Appends a reference (taking one) after the bytes written so far. False when out of memory. */
bool scn_outq_push_shared(scn_outq *q, scn_shared *s);
/* The pieces to write, in order, into bufs (grown as needed; a piece over 1 GiB is split);
 * returns their number, 0 when the queue is empty or out of memory. */
size_t scn_outq_iov(const scn_outq *q, uv_buf_t **bufs, size_t *cap);
/* Moves what q holds from position (bytes, segs) on (its own bytes from offset bytes, its
 * references from index segs) to the empty queue tail, leaving q the part before. False when out
 * of memory (nothing moved). */
bool scn_outq_split(scn_outq *q, size_t bytes, size_t segs, scn_outq *tail);
/* Moves everything tail holds to the end of q (tail is left empty). False when out of memory
 * (tail is then cleared: its bytes are lost). */
bool scn_outq_append(scn_outq *q, scn_outq *tail);
/* Empties the queue, dropping its references; keeps the memory for reuse. */
void scn_outq_clear(scn_outq *q);
void scn_outq_free(scn_outq *q);

#endif

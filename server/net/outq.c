#include "net/outq.h"

#include "scn_core.h"

#include <stddef.h>
#include <stdlib.h>

scn_shared *scn_shared_new(size_t len) {
  scn_shared *s = malloc(sizeof *s + len);
  if (!s)
    return NULL;
  s->refs = 1;
  s->len = len;
  return s;
}

scn_shared *scn_shared_copy(const scn_buf *text) {
  scn_shared *s = text->failed ? NULL : scn_shared_new(text->len);
  if (s)
    memcpy(s->data, text->data, text->len);
  return s;
}

void scn_shared_release(scn_shared *s) {
  if (s && --s->refs == 0)
    free(s);
}

#define SHARED_HEADER offsetof(scn_shared, data)

void scn_shared_start(scn_buf *b) {
  b->len = 0;
  if (scn_buf_reserve(b, SHARED_HEADER))
    b->len = SHARED_HEADER;
}

scn_shared *scn_shared_finish(scn_buf *b) {
  if (b->failed || b->len < SHARED_HEADER) {
    scn_buf_free(b);
    return NULL;
  }
  scn_shared *s = (scn_shared *)(void *)b->data;
  s->refs = 1;
  s->len = b->len - SHARED_HEADER;
  *b = (scn_buf){0};
  return s;
}

bool scn_outq_push_shared(scn_outq *q, scn_shared *s) {
  scn_seg *segs = scn_array_grow(q->segs, &q->segs_cap, sizeof *segs, q->nsegs + 1);
  if (!segs)
    return false;
  q->segs = segs;
  q->segs[q->nsegs++] = (scn_seg){q->bytes.len, scn_shared_ref(s)};
  q->shared_bytes += s->len;
  return true;
}

/* A piece larger than a uv_buf_t can hold (its length is 32 bits) goes in several. */
#define IOV_MAX_PIECE ((size_t)1 << 30)

static size_t add_piece(uv_buf_t *bufs, size_t n, char *p, size_t len) {
  for (; len > IOV_MAX_PIECE; p += IOV_MAX_PIECE, len -= IOV_MAX_PIECE)
    bufs[n++] = uv_buf_init(p, (unsigned)IOV_MAX_PIECE);
  bufs[n++] = uv_buf_init(p, (unsigned)len);
  return n;
}

size_t scn_outq_iov(const scn_outq *q, uv_buf_t **bufs, size_t *cap) {
  size_t need = 2 * q->nsegs + 1 + (q->bytes.len + q->shared_bytes) / IOV_MAX_PIECE;
  uv_buf_t *grown = scn_array_grow(*bufs, cap, sizeof *grown, need);
  if (!grown)
    return 0;
  *bufs = grown;
  size_t n = 0, from = 0;
  for (size_t i = 0; i < q->nsegs; i++) {
    const scn_seg *s = &q->segs[i];
    if (s->owned_end > from)
      n = add_piece(*bufs, n, q->bytes.data + from, s->owned_end - from);
    from = s->owned_end;
    n = add_piece(*bufs, n, s->ref->data, s->ref->len);
  }
  if (q->bytes.len > from)
    n = add_piece(*bufs, n, q->bytes.data + from, q->bytes.len - from);
  return n;
}

bool scn_outq_split(scn_outq *q, size_t bytes, size_t segs, scn_outq *tail) {
  if (bytes > q->bytes.len || segs > q->nsegs)
    return false;
  size_t nsegs = q->nsegs - segs;
  scn_seg *grown = nsegs ? scn_array_grow(tail->segs, &tail->segs_cap, sizeof *grown, nsegs) : NULL;
  if (nsegs && !grown)
    return false;
  if (nsegs)
    tail->segs = grown;
  tail->bytes.len = 0;
  scn_buf_add(&tail->bytes, q->bytes.data + bytes, q->bytes.len - bytes);
  if (tail->bytes.failed) {
    tail->bytes.failed = false;
    tail->bytes.len = 0;
    return false;
  }
  tail->nsegs = nsegs;
  tail->shared_bytes = 0;
  for (size_t i = 0; i < nsegs; i++) {
    scn_seg s = q->segs[segs + i];
    s.owned_end -= bytes;
    tail->segs[i] = s;
    tail->shared_bytes += s.ref->len;
  }
  q->bytes.len = bytes;
  q->nsegs = segs;
  q->shared_bytes -= tail->shared_bytes;
  return true;
}

bool scn_outq_append(scn_outq *q, scn_outq *tail) {
  bool room = true;
  if (tail->nsegs) {
    scn_seg *grown = scn_array_grow(q->segs, &q->segs_cap, sizeof *grown, q->nsegs + tail->nsegs);
    room = grown != NULL;
    if (grown)
      q->segs = grown;
  }
  size_t base = q->bytes.len;
  if (room)
    scn_buf_add(&q->bytes, tail->bytes.data, tail->bytes.len);
  if (!room || q->bytes.failed) {
    q->bytes.failed = false;
    q->bytes.len = base;
    scn_outq_clear(tail);
    return false;
  }
  for (size_t i = 0; i < tail->nsegs; i++) {
    scn_seg s = tail->segs[i];
    s.owned_end += base;
    q->segs[q->nsegs++] = s; /* the reference moves with it */
  }
  q->shared_bytes += tail->shared_bytes;
  tail->nsegs = 0;
  tail->shared_bytes = 0;
  tail->bytes.len = 0;
  return true;
}

void scn_outq_clear(scn_outq *q) {
  for (size_t i = 0; i < q->nsegs; i++)
    scn_shared_release(q->segs[i].ref);
  q->nsegs = 0;
  q->shared_bytes = 0;
  q->bytes.len = 0;
}

void scn_outq_free(scn_outq *q) {
  scn_outq_clear(q);
  free(q->segs);
  q->segs = NULL;
  q->segs_cap = 0;
  scn_buf_free(&q->bytes);
}

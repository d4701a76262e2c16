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

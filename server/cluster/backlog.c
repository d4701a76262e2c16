/* The owner's backlog of a group's recent records (see backlog.h). */
#include "cluster/backlog.h"

#include <stdlib.h>
#include <string.h>

#define BUF_MIN ((size_t)64 << 10) /* the buffer's first size */

void scn_backlog_init(scn_backlog *b, size_t limit) {
  memset(b, 0, sizeof *b);
  b->limit = limit;
}

static void drop_oldest(scn_backlog *b) {
  scn_backlog_rec *r = &b->ring[b->head];
  b->bytes -= r->len;
  r->bytes = NULL;
  b->head = (b->head + 1) % b->cap;
  b->n--;
  b->evicted++;
}

void scn_backlog_clear(scn_backlog *b) {
  while (b->n)
    drop_oldest(b);
  b->head = 0;
  b->next_seq = 0;
}

void scn_backlog_free(scn_backlog *b) {
  scn_backlog_clear(b);
  free(b->ring);
  free(b->buf);
  b->ring = NULL;
  b->buf = NULL;
  b->cap = b->buf_cap = 0;
}

/* Room for one more entry in the ring, the oldest first in a new one. */
static bool grow(scn_backlog *b) {
  if (b->n < b->cap)
    return true;
  size_t cap = b->cap ? b->cap * 2 : 64;
  scn_backlog_rec *ring = malloc(cap * sizeof *ring);
  if (!ring)
    return false;
  for (size_t i = 0; i < b->n; i++)
    ring[i] = b->ring[(b->head + i) % b->cap];
  free(b->ring);
  b->ring = ring;
  b->cap = cap;
  b->head = 0;
  return true;
}

/* The room a record takes in the buffer: one byte at least, so that no two share a place. */
static size_t span(size_t len) { return len ? len : 1; }

/* Where a record of len bytes can go in the buffer after the newest one (the records' bytes
 * are in the order of their seqs, around the ring), or SIZE_MAX when it does not fit. */
static size_t place(const scn_backlog *b, size_t len) {
  size_t need = span(len);
  if (!b->buf)
    return SIZE_MAX;
  if (b->n == 0)
    return need <= b->buf_cap ? 0 : SIZE_MAX;
  const scn_backlog_rec *old = &b->ring[b->head];
  const scn_backlog_rec *new = &b->ring[(b->head + b->n - 1) % b->cap];
  size_t start = (size_t)(old->bytes - b->buf);
  size_t end = (size_t)(new->bytes - b->buf) + span(new->len);
  if (new->bytes >= old->bytes) { /* not wrapped: room after the newest, or at the start */
    if (b->buf_cap - end >= need)
      return end;
    return start >= need ? 0 : SIZE_MAX;
  }
  return start - end >= need ? end : SIZE_MAX;
}

/* A larger buffer, at most a quarter larger than the limit (records of up to a quarter of the
 * limit then always find room once the limit's evictions are done). Records that do not wrap around
 * its end lie one after the other from the oldest: the buffer is reallocated (its pages moved, not
 * copied, once it is large) and they stay where they are in it; otherwise they are copied to the
 * start of a new one in order. */
static bool grow_buf(scn_backlog *b, size_t len) {
  size_t max = b->limit + b->limit / 4 > BUF_MIN ? b->limit + b->limit / 4 : BUF_MIN;
  if (b->buf_cap >= max)
    return false;
  size_t cap = b->buf_cap ? b->buf_cap * 2 : BUF_MIN;
  while (cap < b->bytes + b->n + span(len))
    cap *= 2;
  if (cap > max)
    cap = max;
  const scn_backlog_rec *old = b->n ? &b->ring[b->head] : NULL;
  const scn_backlog_rec *new = b->n ? &b->ring[(b->head + b->n - 1) % b->cap] : NULL;
  if (!old || new->bytes >= old->bytes) {
    size_t off = old ? (size_t)(old->bytes - b->buf) : 0;
    char *buf = realloc(b->buf, cap);
    if (!buf)
      return false;
    for (size_t i = 0; i < b->n; i++) {
      scn_backlog_rec *r = &b->ring[(b->head + i) % b->cap];
      r->bytes = buf + off;
      off += span(r->len);
    }
    b->buf = buf;
    b->buf_cap = cap;
    return true;
  }
  char *buf = malloc(cap);
  if (!buf)
    return false;
  size_t off = 0;
  for (size_t i = 0; i < b->n; i++) {
    scn_backlog_rec *r = &b->ring[(b->head + i) % b->cap];
    memcpy(buf + off, r->bytes, r->len);
    r->bytes = buf + off;
    off += span(r->len);
  }
  free(b->buf);
  b->buf = buf;
  b->buf_cap = cap;
  return true;
}

bool scn_backlog_append(scn_backlog *b, uint64_t seq, uint64_t tick, const char *bytes,
                        size_t len) {
  if (b->next_seq && seq != b->next_seq)
    scn_backlog_clear(b);
  b->next_seq = seq + 1;
  b->appended++;
  if (len > b->limit) {
    b->too_big++;
    scn_backlog_clear(b);
    b->next_seq = seq + 1;
    return true;
  }
  while (b->n && b->bytes + len > b->limit)
    drop_oldest(b);
  /* Once the buffer is as large as it gets, the oldest records go until this one finds room:
   * more than the limit asks only for records larger than a quarter of it, or of no bytes
   * (which take one each), or when the buffer could not grow (out of memory). */
  size_t at = place(b, len);
  while (at == SIZE_MAX && (grow_buf(b, len) || b->n)) {
    if (place(b, len) == SIZE_MAX && b->n)
      drop_oldest(b);
    at = place(b, len);
  }
  if (at == SIZE_MAX || !grow(b)) {
    scn_backlog_clear(b);
    b->next_seq = seq + 1;
    return false;
  }
  memcpy(b->buf + at, bytes, len);
  b->ring[(b->head + b->n) % b->cap] = (scn_backlog_rec){seq, tick, b->buf + at, len};
  b->n++;
  b->bytes += len;
  return true;
}

scn_backlog_from scn_backlog_find(const scn_backlog *b, uint64_t seq, size_t *at) {
  uint64_t next = b->next_seq ? b->next_seq : 1;
  if (seq > next)
    return SCN_BACKLOG_AHEAD;
  if (seq == next) {
    *at = b->n;
    return SCN_BACKLOG_OK;
  }
  if (b->n == 0 || seq < b->ring[b->head].seq)
    return SCN_BACKLOG_TOO_OLD;
  *at = (size_t)(seq - b->ring[b->head].seq); /* seqs are consecutive */
  return SCN_BACKLOG_OK;
}

const scn_backlog_rec *scn_backlog_at(const scn_backlog *b, size_t i) {
  return &b->ring[(b->head + i) % b->cap];
}

/* The owner's backlog of a group's recent records (see backlog.h). */
#include "cluster/backlog.h"

#include <stdlib.h>
#include <string.h>

void scn_backlog_init(scn_backlog *b, size_t limit) {
  memset(b, 0, sizeof *b);
  b->limit = limit;
}

static void drop_oldest(scn_backlog *b) {
  scn_backlog_rec *r = &b->ring[b->head];
  b->bytes -= r->len;
  free(r->bytes);
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
  b->ring = NULL;
  b->cap = 0;
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
  char *copy = malloc(len ? len : 1);
  if (!copy || !grow(b)) {
    free(copy);
    scn_backlog_clear(b);
    b->next_seq = seq + 1;
    return false;
  }
  memcpy(copy, bytes, len);
  b->ring[(b->head + b->n) % b->cap] = (scn_backlog_rec){seq, tick, copy, len};
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

/* The owner's backlog of a group's recent records (--replicas): what a follower that dials
 * again with "from" S gets without a snapshot, when S is still kept. A ring of the newest
 * records, bounded in bytes; records come in with consecutive seqs (the store's tap). Their
 * bytes are kept in one buffer of the backlog's own, itself a ring (a record never straddles
 * its end), grown up to a quarter more than the limit: keeping a record allocates nothing once the
 * buffer is that large. Needs nothing but libc (the unit suites test it alone). */
#ifndef SCN_BACKLOG_H
#define SCN_BACKLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCN_REPLICA_BACKLOG ((size_t)8 << 20) /* bytes of records kept per group */

typedef struct scn_backlog_rec {
  uint64_t seq, tick;
  char *bytes; /* in the backlog's buffer */
  size_t len;
} scn_backlog_rec;

typedef struct scn_backlog {
  scn_backlog_rec *ring;
  size_t cap, head, n; /* the oldest at ring[head] */
  char *buf;           /* the records' bytes */
  size_t buf_cap;
  size_t bytes, limit;
  uint64_t next_seq;          /* the seq the next record must have; 0: none came yet */
  uint64_t appended, evicted; /* records, for the figures */
  uint64_t too_big;           /* records over the limit, kept by nobody */
} scn_backlog;

/* limit: bytes of records kept (SCN_REPLICA_BACKLOG in the daemon). */
void scn_backlog_init(scn_backlog *b, size_t limit);
void scn_backlog_free(scn_backlog *b);
/* Forgets every record (a new epoch starts its seqs over). */
void scn_backlog_clear(scn_backlog *b);
/* Keeps a copy of the record, dropping the oldest ones beyond the limit. A seq that does not
 * follow the last one clears the backlog first (a gap would be served as if complete). A record
 * larger than the limit leaves the backlog empty. false: out of memory (the backlog is then
 * empty, so no follower is served from it with a hole). */
bool scn_backlog_append(scn_backlog *b, uint64_t seq, uint64_t tick, const char *bytes, size_t len);

typedef enum scn_backlog_from {
  SCN_BACKLOG_OK,      /* the records from seq on are all kept (none, when seq is the next) */
  SCN_BACKLOG_TOO_OLD, /* seq fell out (or never came in): a snapshot is needed */
  SCN_BACKLOG_AHEAD    /* seq is past the next one: not this history */
} scn_backlog_from;
/* Where the records from seq (the first one the follower lacks) start: *at gets the index for
 * scn_backlog_at when OK. */
scn_backlog_from scn_backlog_find(const scn_backlog *b, uint64_t seq, size_t *at);
/* The i-th record kept, from the oldest (i < b->n). */
const scn_backlog_rec *scn_backlog_at(const scn_backlog *b, size_t i);

#endif

/* One journal being appended to. The records of a loop turn's commands gather in memory and
 * are written before any reply of the turn leaves (the before_flush hook commits them); the
 * fsync policy then makes them durable:
 *   always    fdatasync on the loop, in the same commit, before the replies;
 *   everysec  once a second (the owner's timer calls scn_jwriter_fsync_later) on libuv's
 *             thread pool, so that the loop never waits for the disk;
 *   no        left to the kernel.
 * Standalone persistence (persist.c) keeps one; cluster persistence (groups.c) one per group
 * held and one for the node's own entities. Every fsync of a journal is here. */
#ifndef SCN_JOURNAL_WRITER_H
#define SCN_JOURNAL_WRITER_H

#include "buf.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* The figures of an owner's journals, shared by its writers (/metrics and info). */
typedef struct scn_journal_stats {
  uint64_t records; /* appended */
  uint64_t bytes;   /* written */
  uint64_t fsyncs;  /* started, on the loop or the thread pool */
} scn_journal_stats;

typedef struct scn_journal_fsync scn_journal_fsync;

typedef struct scn_jwriter {
  uv_loop_t *loop;
  int policy;                  /* scn_fsync_policy */
  scn_journal_stats *stats;    /* the owner's */
  int fd;                      /* -1: none open */
  uint64_t gen;                /* the generation fd appends to */
  scn_buf pending;             /* records not written yet */
  scn_buf line;                /* a record's line with the ids its command created */
  uint64_t unsynced;           /* bytes written since the last fsync started */
  scn_journal_fsync *inflight; /* the thread-pool fsync running (one at a time) */
} scn_jwriter;

void scn_jwriter_init(scn_jwriter *w, uv_loop_t *loop, int policy, scn_journal_stats *stats);
/* Opens generation gen of dir's journal and continues in it (scn_jwriter_switch). 0, or -1
 * with the error logged. */
int scn_jwriter_open(scn_jwriter *w, const char *dir, uint64_t gen);
/* Creates generation gen of dir's journal holding records (encoded already: what a load
 * replayed, durable elsewhere, so not counted as written), fdatasynced before it is used, and
 * continues in it. 0, or -1 with the file removed. */
int scn_jwriter_start(scn_jwriter *w, const char *dir, uint64_t gen, const scn_buf *records);
/* Continues in fd, generation gen (opened by the caller, before the snapshot that continues in
 * it); the journal before it is let go (closed once no fsync uses it). */
void scn_jwriter_switch(scn_jwriter *w, int fd, uint64_t gen);

/* Appends a command's record (scn_journal_encode_command) to the pending ones. */
void scn_jwriter_append(scn_jwriter *w, const char *line, size_t len, const uint64_t *created,
                        size_t ncreated);
/* Appends records encoded already (a follower's copy of its owner's). */
void scn_jwriter_append_encoded(scn_jwriter *w, const char *bytes, size_t len);
static inline bool scn_jwriter_pending(const scn_jwriter *w) { return w->pending.len > 0; }
/* Drops the pending records (never answered: their group went). */
static inline void scn_jwriter_drop_pending(scn_jwriter *w) { w->pending.len = 0; }

/* Writes the pending records, and fdatasyncs them under "always". Records a write could not
 * take stay pending for the next commit. 0, or -1 (logged). */
int scn_jwriter_commit(scn_jwriter *w);
/* fdatasync, on the loop, of what was written (not of the pending records): before a group is
 * handed over, and at shutdown. 0, or -1 (logged). */
int scn_jwriter_fsync(scn_jwriter *w);
/* everysec, once a second: fdatasync of what was written, on the thread pool (unless the last
 * one is still running: its successor waits for the next second). */
void scn_jwriter_fsync_later(scn_jwriter *w);
/* Lets go of the journal: its descriptor is closed now, or by the thread-pool fsync running
 * on it once that is done; the pending records are dropped. w may be freed right after. */
void scn_jwriter_close(scn_jwriter *w);

#endif

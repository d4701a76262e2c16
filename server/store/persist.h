/* Durability with --data DIR: a snapshot (snapshot.scn) plus journals (journal.<gen>.scn) of
 * the mutating commands since. Startup loads the snapshot and replays every journal whose
 * generation the snapshot does not cover. A snapshot is written by a forked child from the
 * copy-on-write image of the parent, so the daemon keeps answering while it is written; each
 * snapshot starts a new journal generation, and older journals are deleted once it is safely
 * on disk. */
#ifndef SCN_PERSIST_H
#define SCN_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct scn_server;
struct scn_conn;

typedef enum scn_fsync_policy {
  SCN_FSYNC_ALWAYS,
  SCN_FSYNC_EVERYSEC,
  SCN_FSYNC_NO
} scn_fsync_policy;

typedef struct scn_persist_stats {
  uint64_t journal_records, journal_bytes, fsyncs, replayed;
  uint64_t snapshots, snapshot_failures, last_snapshot_bytes;
  double last_snapshot_seconds, last_snapshot_unix;
  bool snapshot_running;
  uint64_t journal_gen;
} scn_persist_stats;

/* Opens the data directory and loads it into srv->scene. Returns 0, 2 for an unusable
 * directory, 1 for damaged data (the message is printed). */
int scn_persist_open(struct scn_server *srv);
/* Appends a succeeded mutating command (its request line) to the journal buffer. */
void scn_persist_record(struct scn_server *srv, const char *line, size_t len);
/* Writes buffered records (and fsyncs under "always"); called before replies are sent. */
void scn_persist_commit(struct scn_server *srv);
/* Starts a snapshot in a child process; a conn waiting for its reply may be given (save). */
int scn_persist_save_async(struct scn_server *srv, struct scn_conn *waiter, const char *id_json);
void scn_persist_conn_closed(struct scn_server *srv, struct scn_conn *c);
/* At shutdown: waits for a running snapshot, then writes a final one in-process. */
int scn_persist_close(struct scn_server *srv);
/* A snapshot is being written, or a save waits for its answer. */
bool scn_persist_busy(void);
bool scn_persist_enabled(const struct scn_server *srv);
/* Starts the fsync (everysec) and autosave timers. */
void scn_persist_start_timers(struct scn_server *srv);
void scn_persist_get_stats(const struct scn_server *srv, scn_persist_stats *out);

#endif

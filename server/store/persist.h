/* Durability with --data DIR: a snapshot (snapshot.scn) plus journals (journal.<gen>.scn) of
 * the mutating commands since. Startup loads the snapshot and replays every journal whose
 * generation the snapshot does not cover (load.c). A snapshot is written by a forked child from
 * the copy-on-write image of the parent, so the daemon keeps answering while it is written;
 * each snapshot starts a new journal generation, and older journals are deleted once it is
 * safely on disk (save.c). persist.c hears of commands and flushes through the server's hooks
 * and hands each succeeded mutating command to the journal writer (journal_writer.h), which
 * writes it before replies leave and fsyncs it as --fsync says. */
#ifndef SCN_PERSIST_H
#define SCN_PERSIST_H

#include "server.h"
#include "store/journal.h"

typedef struct scn_persist scn_persist;

/* Opens the data directory and loads it into srv->scene (which a recovery may replace),
 * running each journaled request line through replay. Returns the module, or NULL with *rc 2
 * for an unusable directory or 1 for damaged data (the message is printed). */
scn_persist *scn_persist_open(scn_server *srv, scn_replay_fn replay, void *replay_ud, int *rc);
/* Registers the hooks (journal each command, commit before replies, figures) and starts the
 * fsync (everysec) and autosave timers. */
void scn_persist_start(scn_persist *p);
/* At shutdown: waits for a running snapshot, writes a final one in-process, and frees the
 * module once the loop has closed its timers. Returns 0, or -1 when the final snapshot failed
 * (the journal still holds every change). */
int scn_persist_close(scn_persist *p);

/* A save's answer: ok with the snapshot's path and size, or why it failed. */
typedef void (*scn_save_done)(void *owner, const char *tag, bool ok, const char *path,
                              uint64_t bytes, const char *why);
/* Asks for a snapshot that covers every command answered so far; done(owner, tag, ...) is
 * called once it is on disk (tag, a string kept for the owner, may be NULL). 0, or -1. */
int scn_persist_save(scn_persist *p, scn_save_done done, void *owner, const char *tag);
/* The owner went away: its pending answers are dropped. */
void scn_persist_forget(scn_persist *p, void *owner);
/* A snapshot is being written, or a save waits for its answer. */
bool scn_persist_busy(const scn_persist *p);

/* ---- what cluster persistence shares with it (load.c) ----------------------------------- */

#include "store/snapshot.h"

typedef struct scn_chain {
  uint64_t gen;      /* the journal generation to continue in (the newest replayed) */
  bool snapshot;     /* a snapshot was loaded */
  uint64_t replayed; /* journal records run */
  scn_snapshot_info info;
} scn_chain;

/* Loads dir's snapshot into *scene, then replays every journal it does not cover through
 * replay, checking that the chain has no gap; a torn last record is dropped with a warning.
 * 0, or 1 for damaged or missing data with the message in msg (with recover: what is valid
 * is kept and the rest logged; a lost snapshot then replaces *scene by an empty one when
 * may_reset, and is an error otherwise). */
int scn__load_chain(scn_scene **scene, const char *dir, bool recover, bool may_reset,
                    scn_replay_fn replay, void *replay_ud, scn_chain *out, char *msg,
                    size_t msglen);
/* Makes dir if missing and takes an exclusive flock on dir/lock_name (kept open in
 * *lock_fd); 0, or 2 with the message printed. */
int scn__usable_dir(const char *dir, int *lock_fd, const char *lock_name);

#endif

/* The persistence module's state, shared by its files: persist.c (journal policy), load.c
 * (loading and replay) and save.c (snapshots). */
#ifndef SCN_PERSIST_INTERNAL_H
#define SCN_PERSIST_INTERNAL_H

#include "store/persist.h"

#include <sys/types.h>

typedef struct save_waiter {
  struct save_waiter *next;
  scn_save_done done;
  void *owner;
  char *tag;
  uint64_t after_gen; /* satisfied by a snapshot covering journal generations up to this */
} save_waiter;

typedef struct persist_stats {
  uint64_t journal_records, journal_bytes, fsyncs, replayed;
  uint64_t snapshots, snapshot_failures, last_snapshot_bytes;
  double last_snapshot_seconds, last_snapshot_unix;
} persist_stats;

struct scn_persist {
  scn_server *srv;
  scn_hooks hooks;
  char dir[4096];
  int lock_fd;
  int journal_fd;
  uint64_t gen; /* generation of the journal being appended to */
  scn_buf pending;
  scn_buf line; /* a record's line with the ids its command created */
  uint64_t unsynced;
  uint64_t changes; /* mutations since the last snapshot started */
  pid_t child;
  uint64_t child_gen;
  uint64_t child_started_ns;
  bool again; /* a save arrived while a child ran */
  save_waiter *waiters;
  uv_timer_t fsync_timer, autosave_timer, child_timer;
  int open_timers;
  uv_fs_t fsync_req;
  bool fsync_inflight;
  persist_stats stats;
};

/* persist.c */
void scn__journal_path(const scn_persist *p, uint64_t gen, char *out, size_t n);
/* Opens (creating) journal generation gen for appending; -1 with the error logged. */
int scn__journal_open(const scn_persist *p, uint64_t gen);
/* Journal generations present, ascending. */
size_t scn__journal_list(const scn_persist *p, uint64_t *gens, size_t cap);
void scn__journal_remove_before(const scn_persist *p, uint64_t gen);
/* Writes the pending records (and fsyncs under "always"). */
void scn__journal_commit(scn_persist *p);

/* load.c: the directory and its data into the scene; 0, 1 or 2 as scn_persist_open. */
int scn__persist_load(scn_persist *p, scn_replay_fn replay, void *replay_ud);

/* save.c */
void scn__save_start_timers(scn_persist *p);
/* Waits for a running child and writes the final snapshot in-process. */
int scn__save_final(scn_persist *p);
void scn__save_stop(scn_persist *p);

#endif

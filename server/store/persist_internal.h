/* The persistence module's state, shared by its files: persist.c (the journal's hooks), load.c
 * (loading and replay) and save.c (snapshots). */
#ifndef SCN_PERSIST_INTERNAL_H
#define SCN_PERSIST_INTERNAL_H

#include "store/journal_writer.h"
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
  uint64_t replayed;
  uint64_t snapshots, snapshot_failures, last_snapshot_bytes;
  double last_snapshot_seconds, last_snapshot_unix;
} persist_stats;

struct scn_persist {
  scn_server *srv;
  scn_hooks hooks;
  scn_path dir;
  int lock_fd;
  scn_jwriter journal; /* appends to generation journal.gen */
  scn_journal_stats journal_stats;
  uint64_t changes; /* mutations since the last snapshot started */
  pid_t child;
  uint64_t child_gen;
  uint64_t child_started_ns;
  bool again; /* a save arrived while a child ran */
  save_waiter *waiters;
  uv_timer_t fsync_timer, autosave_timer, child_timer;
  int open_timers;
  persist_stats stats;
};

/* load.c: the directory and its data into the scene; 0, 1 or 2 as scn_persist_open. */
int scn__persist_load(scn_persist *p, scn_replay_fn replay, void *replay_ud);

/* save.c */
void scn__save_start_timers(scn_persist *p);
/* Waits for a running child and writes the final snapshot in-process. */
int scn__save_final(scn_persist *p);
void scn__save_stop(scn_persist *p);

#endif

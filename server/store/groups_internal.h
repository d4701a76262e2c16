/* The store's state per group (groups.c), kept apart so that groups.c holds only what it does. */
#ifndef SCN_STORE_GROUPS_INTERNAL_H
#define SCN_STORE_GROUPS_INTERNAL_H

#include "store/groups.h"
#include "store/journal_writer.h"
#include "store/path.h"

/* A group this daemon owns, or the node's own entities (name ""). */
typedef struct gs_part {
  char name[SCN_NAME_MAX + 1];
  scn_path dir; /* the epoch directory (a group) or the node's directory */
  uint64_t epoch;
  scn_jwriter journal;
  uint64_t changes; /* records since its last snapshot */
  uint64_t stamp;   /* the command that last wrote to it (gs->stamp) */
  uint32_t home;    /* the entity home tag of what it made (the node's part: 0) */
  uint64_t seq;     /* records appended in its epoch (scn_gstore_record.seq) */
  bool from_copy;   /* the epoch began from what was loaded or promoted, not from nothing */
} gs_part;

typedef struct gs_stats {
  uint64_t snapshots, snapshot_failures, loads;
  uint64_t held_back; /* commits the fence did not allow */
} gs_stats;

struct scn_gstore {
  scn_server *srv;
  scn_hooks hooks;
  scn_path data, groups_dir;
  int lock_fd;
  gs_part node;
  gs_part **parts; /* the groups held */
  size_t nparts, cap;
  size_t last; /* the part the last command wrote to */
  size_t npending;
  scn_replay_fn replay;
  void *replay_ud;
  scn_fence_fn may_write;
  void *fence_ud;
  scn_gstore_tap_fn tap;
  void *tap_ud;
  uint64_t stamp;     /* moves on with each command journaled to several parts */
  uint32_t next_home; /* the home tag the next group acquired gets */
  uv_timer_t fsync_timer, autosave_timer;
  int open_timers;
  bool started;
  scn_journal_stats journal_stats; /* of every part's journal */
  gs_stats stats;
};

/* groups.c's helpers that groups_copy.c uses too. */
gs_part *scn__gs_find(scn_gstore *gs, const char *group);
void scn__gs_part_init(scn_gstore *gs, gs_part *p);
/* Removes a directory of files (not recursive). */
void scn__gs_remove_dir(const char *path);
void scn__gs_each_epoch(const char *gdir, void (*fn)(void *ud, const char *dir, uint64_t epoch),
                        void *ud);
void scn__gs_retire_revived(scn_scene *scene);
/* groups_copy.c: after a group's snapshot that continues in journal generation gen, notes in
 * its directory that the records before gen number p->seq (seq.<gen>), so that a follower
 * restarted on it knows where it stands; the notes of older generations go. */
void scn__gs_note_seq(const gs_part *p, uint64_t gen);

#endif

/* Persistence with --cluster: every group on its own, so that one group can be saved, moved
 * or loaded alone by any daemon that shares the data directory.
 *
 *   DATA/groups/<group>/epoch.<E>/snapshot.scn, journal.<gen>.scn
 *   DATA/nodes/<node>/snapshot.scn, journal.<gen>.scn     entities without a transform
 *
 * E is the owner's fencing epoch (the etcd revision at which it got the group). An owner writes
 * only in its own epoch's directory; a new owner loads the newest epoch directory below its
 * own, and before it acknowledges anything starts its own from exactly what it loaded (the old
 * snapshot hard-linked, which never changes once in place, and the replayed records copied; a
 * fresh snapshot where a link cannot be made), then removes the older ones. A stale owner's
 * late appends thus land in a directory nobody will read again.
 * Before every write the cluster's fence is asked (scn_gstore_set_fence): a daemon that may
 * have lost a group writes nothing of it.
 *
 * A journal record of a command that created entities carries their ids ("created": [...]),
 * so a replay on another daemon makes the same ones. Snapshots here are written in-process. */
#ifndef SCN_GROUPS_H
#define SCN_GROUPS_H

#include "server.h"
#include "store/journal.h"
#include "store/path.h"

typedef struct scn_gstore scn_gstore;

/* Messages (err) name paths of the data directory: SCN_PATH_MSG_MAX bytes hold any of them. */

/* May the files of group (NULL: the node's own) be written now? */
typedef bool (*scn_fence_fn)(void *ud, const char *group);

/* Opens the data directory for node, loads the node's entities into srv->scene (ranged) and
 * migrates nothing yet. NULL with *rc 2 (unusable directory) or 1 (damaged data), the
 * message printed. */
scn_gstore *scn_gstore_open(scn_server *srv, const char *node, scn_replay_fn replay,
                            void *replay_ud, int *rc);
/* Hooks (journal, commit before replies, figures) and timers (fsync, autosave). */
void scn_gstore_start(scn_gstore *gs);
/* At shutdown: commits what the fence allows, writes the node's snapshot, frees the module. */
void scn_gstore_close(scn_gstore *gs);
void scn_gstore_set_fence(scn_gstore *gs, scn_fence_fn may_write, void *ud);

/* One journal record of a group held here, as it is appended (before the loop turn's commit):
 * bytes are exactly what the group's journal gets (scn_journal_encode_command's encoding, the
 * ids its command created included). seq counts the group's records in epoch, from 1; tick is
 * the open tick (scn_world_tick) of the world the command named, or 0 when it named none that
 * is still there (entity.create, entity.destroy, world.destroy). bytes are valid during the call
 * only. */
typedef struct scn_gstore_record {
  const char *group;
  uint64_t epoch, seq, tick;
  const char *bytes;
  size_t len;
} scn_gstore_record;
typedef void (*scn_gstore_tap_fn)(void *ud, const scn_gstore_record *r);
/* Hands every group record to fn from now on (NULL: to nobody). The node's own records are
 * not a group's and are not handed on. */
void scn_gstore_set_tap(scn_gstore *gs, scn_gstore_tap_fn fn, void *ud);

/* A follower's copy of group (acquired here with the owner's epoch): applies one record its
 * owner's tap handed on (r->bytes, one whole journal record) through the replay path a load
 * takes, then appends those exact bytes to the group's journal, written with the loop turn's
 * commit under this daemon's --fsync. r->epoch must be the part's and r->seq the one after the
 * last applied (from 1). A command that fails on replay is logged and journalled all the same,
 * as a load keeps going past one, so the journal stays the owner's. The tap is not called (a
 * follower ships nothing), and r->tick is not acted on: closing ticks is the stream's. 0, or -1
 * with err and nothing applied. */
int scn_gstore_apply(scn_gstore *gs, const scn_gstore_record *r, char *err, size_t errlen);

/* Where group's records stand here: the epoch it is held in and the seq of its last record
 * (appended or applied). false when the group is not held. */
bool scn_gstore_position(const scn_gstore *gs, const char *group, uint64_t *epoch, uint64_t *seq);
/* Whether group's epoch here began with nothing (a new group), so that its records from seq 1
 * rebuild it on their own; false for one that began from a load or a promoted copy, and for a
 * group not held. */
bool scn_gstore_began_empty(const scn_gstore *gs, const char *group);

/* A follower's copy (--replicas). Each snapshot of a group notes beside it how many of its
 * epoch's records it covers, so that a copy on disk knows its last seq (groups_copy.c).
 *
 * Holds group from its own epoch directory at epoch (the newest here, and the owner's), loaded
 * with its snapshot and journals, its last seq in *seq: a follower restarted, or one that was
 * behind, goes on from there. -1 with err when there is no such copy or it does not say where
 * it stands (the worlds it loaded, if any, are left to the caller to drop). */
int scn_gstore_resume(scn_gstore *gs, const char *group, uint64_t epoch, uint64_t *seq, char *err,
                      size_t errlen);
/* The newest epoch directory of group here; false when it has none. */
bool scn_gstore_disk_epoch(const scn_gstore *gs, const char *group, uint64_t *epoch);

/* A whole copy of a group held here, for a follower the backlog no longer reaches: its
 * snapshot (journal generation 1) and its worlds' ticks and histories (history_file.h), as
 * they stand after record seq of epoch. The files are open and already unlinked. */
typedef struct scn_gstore_copy {
  int snap_fd, hist_fd;
  uint64_t snap_len, hist_len;
  uint64_t epoch, seq;
} scn_gstore_copy;
/* Writes the copy now (the loop is one thread: a consistent cut, and the group goes on being
 * served). 0, or -1 with err. */
int scn_gstore_copy_out(scn_gstore *gs, const char *group, scn_gstore_copy *out, char *err,
                        size_t errlen);
void scn_gstore_copy_close(scn_gstore_copy *c);
/* The follower's side: the files a copy of group is received into (a directory of its own in
 * the group's). 0, or -1 with err. */
int scn_gstore_copy_in_open(scn_gstore *gs, const char *group, int *snap_fd, int *hist_fd,
                            char *err, size_t errlen);
/* A copy not received whole: its files go. */
void scn_gstore_copy_in_abort(scn_gstore *gs, const char *group);
/* Holds group (not held here) from the copy received, as the owner's record seq of epoch: its
 * worlds loaded with their ticks and histories, the copy becoming the epoch's directory (any
 * other copy of the group here removed once it is in place), the journal going on from it.
 * 0, or -1 with err (worlds it loaded are then left to the caller to drop). */
int scn_gstore_install(scn_gstore *gs, const char *group, uint64_t epoch, uint64_t seq, char *err,
                       size_t errlen);
/* Removes group's directory (a group not held here whose copy is stale: a newer epoch owns it
 * elsewhere, or it ended since); why goes to the log. */
void scn_gstore_forget(scn_gstore *gs, const char *group, const char *why);

/* Loads group (its newest epoch directory) into srv->scene and starts epoch: a fresh snapshot
 * in its own directory (the older ones removed). moved_in: the group was moved here, so its
 * worlds' tick counts and histories are taken from the mover's history file (history_file.h);
 * otherwise they start over. 0, or -1 with err (the group's worlds that were loaded are then
 * left to the caller to drop). */
int scn_gstore_acquire(scn_gstore *gs, const char *group, uint64_t epoch, bool moved_in, char *err,
                       size_t errlen);

/* A follower's copy of group, held here at an older epoch, becomes epoch's without a load:
 * the new epoch's directory starts from the old one's snapshot and journals, linked (what the
 * copy holds, so no snapshot is written now; one is written instead when they cannot be),
 * the older epochs removed, its worlds' ticks and histories kept, and seqs start again from 1.
 * 0, or -1 with err (the part is then left to the caller to release). */
int scn_gstore_promote(scn_gstore *gs, const char *group, uint64_t epoch, char *err, size_t errlen);
/* Writes group's journal and a snapshot now (a new journal generation); 0, or -1. */
int scn_gstore_save(scn_gstore *gs, const char *group, uint64_t *bytes);
/* Makes everything answered for group durable before it is handed to another daemon: the
 * journal written and fsynced, and a snapshot too when more than SCN_GSTORE_REPLAY_CHEAP
 * records would otherwise be replayed (a replay of fewer costs less than writing one). */
#define SCN_GSTORE_REPLAY_CHEAP 10000
int scn_gstore_checkpoint(scn_gstore *gs, const char *group, uint64_t *bytes);
/* Before a move hands group over (frozen, checkpointed): writes its worlds' ticks and
 * histories for the target, in the group's directory (the fence allowing). 0, or -1. */
int scn_gstore_write_history(scn_gstore *gs, const char *group, uint64_t *bytes);
/* The move did not happen: the file written for it goes. */
void scn_gstore_drop_history(scn_gstore *gs, const char *group);
/* Saves every group the fence allows and the node's entities; total bytes. 0, or -1. */
int scn_gstore_save_all(scn_gstore *gs, uint64_t *bytes);
/* Stops persisting group: records not yet written are dropped (they were never answered). */
void scn_gstore_release(scn_gstore *gs, const char *group);
bool scn_gstore_holds(const scn_gstore *gs, const char *group);
/* The entity home tag of a group held (scn_entity_home): what the group made, transform or
 * not, goes with it. SCN_HOME_NONE when the group is not held. */
uint32_t scn_gstore_home(const scn_gstore *gs, const char *group);
/* Whether the group has a directory in DATA/groups (it exists, owned or not). */
bool scn_gstore_on_disk(const scn_gstore *gs, const char *group);
/* Calls fn for every group with a directory in DATA/groups. */
void scn_gstore_each_on_disk(const scn_gstore *gs, void (*fn)(void *ud, const char *group),
                             void *ud);
/* A data directory of the standalone layout (snapshot.scn, journal.N.scn at its top)? */
bool scn_gstore_has_old_layout(const scn_gstore *gs);
/* Splits the standalone layout into groups (epoch 0) and this node's entities, then moves the
 * old files to DATA/migrated/. The caller holds the cluster's migration lock. *max_slot gets
 * the highest entity slot the old data used. 0, or -1 with err. */
int scn_gstore_migrate(scn_gstore *gs, uint32_t *max_slot, char *err, size_t errlen);
/* Where the data lives (for save's answer). */
const char *scn_gstore_dir(const scn_gstore *gs);

#endif

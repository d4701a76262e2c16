/* Shared by the cluster module's files (see cluster.h for what the module does):
 *   cluster.c       the module: its life, its housekeeping tick, the answers of commands
 *   fence.c         whether this daemon may serve: the fence and the acknowledgements it holds
 *   members.c       membership: registration, the lease and its renewals, the node key, the
 *                   entity id ranges, the release at SIGTERM
 *   watch.c         the cache kept in step with etcd: the full read and the watch
 *   holding.c       what holding a group means here: loaded into the store and the scene,
 *                   dropped from them, frozen for a move
 *   group_keys.c    the group keys the ownership core writes and reads in etcd
 *   replica_keys.c  the followers an owner records for its groups (--replicas)
 *   ship.c          the owner's side of the change stream: each group's backlog (--replicas)
 *   follow.c        the follower's side: a copy of each group followed here, fed by its owner
 *   switchover.c    world.move to a follower (--replicas): frozen until it caught up
 *   promote.c       world.promote: a follower made the owner of a group without one
 *   route.c         where a command goes
 *   cluster_stats.c the module's figures
 * owners.h is the ownership core they drive; etcd_kv.h the only way they reach etcd. */
#ifndef SCN_CLUSTER_INTERNAL_H
#define SCN_CLUSTER_INTERNAL_H

#include "cluster/backlog.h"
#include "cluster/cluster.h"
#include "cluster/etcd_kv.h"
#include "cluster/owners.h"

#define SCN_ID_RANGE 65536u /* entity slots per range handed out */

typedef enum scn_reg_step {
  SCN_REG_LEASE,
  SCN_REG_NODE,
  SCN_REG_MIGRATE,
  SCN_REG_IDS,
  SCN_REG_SYNC,
  SCN_REG_DONE
} scn_reg_step;

/* Why the node key is written. */
typedef enum scn_publish {
  SCN_PUBLISH_REGISTERING, /* a step of registration: its answer moves registration on */
  SCN_PUBLISH_LOAD         /* the load changed, or is published again: nobody waits */
} scn_publish;

/* A group served here with followers (ship.c): its records since the epoch began, as far as
 * the backlog's bound keeps them. */
/* A follower's connection streaming a group's records (replicate.c). */
#define SCN_SHIP_LINKS 8
typedef struct scn_ship_link {
  struct scn_ship *ship;
  scn_conn *conn; /* NULL: a free slot */
  char node[SCN_NAME_MAX + 1];
  uint64_t next;  /* the seq the backlog sends next; 0: caught up, records go as they come */
  uint64_t sent;  /* the last seq written to it */
  uint64_t acked; /* the last seq it acknowledged */
  uint64_t unacked_since;    /* uv_hrtime since records wait for an ack (0: none); reset as acks
                              * come, so it is the wait of the oldest unacked at most */
  struct scn_copy_out *copy; /* a whole copy of the group being sent first (copy.c) */
  bool installing;           /* a whole copy went (or goes): the link is not caught up until the
                              * follower acknowledges install_seq, the copy's, once installed */
  uint64_t install_seq;      /* (with no record in the epoch yet, 0: acked and sent say nothing) */
  uint64_t join_from; /* joining the in-sync set: sync writes from this seq on wait for its ack
                       * too, and once it acknowledged this seq it holds every ok given (0:
                       * not joining) */
} scn_ship_link;

#define SCN_SHIP_TIMES 512 /* records whose making time a ship remembers (for the lag) */
typedef struct scn_ship {
  char group[SCN_NAME_MAX + 1];
  uint64_t epoch;            /* of the records kept */
  uint64_t tick_recorded_at; /* uv_hrtime of the last write of the replicas key (its tick) */
  scn_backlog backlog;
  scn_ship_link links[SCN_SHIP_LINKS];
  uint64_t last_seq; /* of the last record the tap handed on in this epoch */
  uint64_t
      made_at[SCN_SHIP_TIMES]; /* when record seq was made (the loop's clock, ns), at seq % TIMES */
} scn_ship;

/* A reply that waits for the followers' acks of a group's record (sync.c): the gate shut in
 * its connection's output, opened once every in-sync member acknowledged seq. */
typedef struct scn_sync_wait {
  scn_conn *conn;
  uint64_t gate, seq;
} scn_sync_wait;

/* A group's waits in one epoch, in the order of their seqs (acks come in that order too). */
typedef struct scn_sync_queue {
  char group[SCN_NAME_MAX + 1];
  uint64_t epoch;
  scn_sync_wait *w;
  size_t head, n, cap; /* w[head..n) wait */
} scn_sync_queue;
typedef struct scn_promote_wait scn_promote_wait;

/* An epoch that began from a follower's copy, and the ticks that copy may have lacked (for the
 * replicas key's lag_ticks). */
#define SCN_PROMOTED_KEPT 16
typedef struct scn_promoted {
  char group[SCN_NAME_MAX + 1];
  int64_t epoch;
  uint64_t lag_ticks;
} scn_promoted;

typedef struct scn_cluster_stats {
  uint64_t renewals, renewal_failures;
  uint64_t moved, unavailable; /* commands answered MOVED or UNAVAILABLE */
  uint64_t ship_failures;      /* records a group's backlog could not keep (out of memory) */
  uint64_t replica_alone;      /* sync writes answered at once: no in-sync follower */
  uint64_t copies_sent, copies_received; /* whole copies of a group (copy.c) */
} scn_cluster_stats;

struct scn_cluster {
  scn_server *srv;
  scn_hooks hooks;
  scn_etcd *etcd;
  scn_self self;      /* the node, its address, its lease, registered, released */
  scn_owners owners;  /* the ownership core and its cache */
  scn_buf self_value; /* a group key's value naming this daemon, made once */
  double ttl;         /* the lease's, in seconds */
  uint64_t ttl_ns, margin_ns;
  uint64_t confirmed; /* when the last renewal etcd confirmed was sent (uv_hrtime) */
  /* registration */
  scn_reg_step step;
  bool step_busy;
  uint64_t step_after; /* uv_hrtime before which the step is not tried again */
  const char *step_error;
  bool keepalive_busy;
  uint64_t next_keepalive, next_publish, next_sweep;
  uint64_t next_record;        /* uv_hrtime before which followers are not recorded again */
  bool releasing;              /* SIGTERM: the final records or the revoke are in flight */
  bool final_recorded;         /* the release's final records went */
  uint64_t release_wait_until; /* uv_hrtime until which the release waits for followers */
  bool revoking;               /* the release's revoke went */
  /* the cache's reads */
  scn_etcd_req *watch;
  bool syncing, sync_again;
  /* entity ids */
  bool ids_busy;
  uint32_t ids_floor; /* ranges below this hold migrated ids */
  bool migrate_lock;  /* held until the id counter is past the migrated ids */
  /* acknowledgements not yet sent */
  scn_conn **acks;
  size_t nacks, acks_cap;
  /* groups served here with followers (--replicas) */
  scn_ship **ships;
  size_t nships, ships_cap;
  /* follower links with a batch of records worth sending before the turn ends (replicate.c) */
  scn_conn *push[SCN_SHIP_LINKS];
  size_t npush;
  /* groups followed here (--replicas) */
  struct scn_follow **follows;
  size_t nfollows, follows_cap;
  /* --durability sync: the command running (its records' replies wait) and what waits */
  scn_conn *sync_conn;
  scn_sync_queue *squeues;
  size_t nsqueues, squeues_cap;
  int64_t sync_checked_rev; /* the cache's revision at the last check */
  size_t switching;         /* switchovers that may still wait for their target (switchover.c) */
  /* epochs begun from a copy here (replica_keys.c), the last SCN_PROMOTED_KEPT */
  scn_promoted promoted[SCN_PROMOTED_KEPT];
  size_t npromoted;
  /* world.promote answers waiting for the follower to take the group (promote.c) */
  scn_promote_wait *promotes;
  size_t npromotes, promotes_cap;
  uint64_t promote_ids; /* the last one given to a wait */
  uv_timer_t timer;
  bool closing;
  scn_cluster_stats stats;
};

/* How long a request to etcd may take. */
double scn__request_timeout(const scn_cluster *cl);

/* ---- fence.c ------------------------------------------------------------------------------- */

/* When the fence comes down without another renewal (uv_hrtime); 0 when there is no lease. */
uint64_t scn__fence_deadline(const scn_cluster *cl);
/* When the lease ends without another renewal, as far as this daemon knows; 0: no lease. */
uint64_t scn__lease_end(const scn_cluster *cl);
/* Whether the lease can be trusted now (read on the monotonic clock each time: after a pause
 * the loop may run reads before any timer). */
bool scn__fence_up(const scn_cluster *cl);
/* How long the fence stays up without another renewal (0 when it is down). */
uint64_t scn__fence_left(const scn_cluster *cl);
/* Registered, not released, and the fence up. */
bool scn__serving(const scn_cluster *cl);
bool scn__fence_may_write(void *ud, const char *group);
void scn__fence_before_flush(void *ud);
void scn__fence_conn_closed(void *ud, scn_conn *c);

/* ---- members.c ----------------------------------------------------------------------------- */

/* The next step of registration, unless one is in flight or waits for its retry. */
void scn__step_next(scn_cluster *cl);
void scn__keepalive(scn_cluster *cl);
void scn__lost_lease(scn_cluster *cl, const char *why);
void scn__publish_node(scn_cluster *cl, scn_publish why);
/* Reserves the next range of entity ids. */
void scn__ids_fetch(scn_cluster *cl);
/* Why /readyz says 503 (NULL: ready). */

/* ---- watch.c ------------------------------------------------------------------------------- */

/* Reads every key again, then watches from there (once at a time). */
void scn__sync_start(scn_cluster *cl);

/* ---- holding.c and group_keys.c: the ownership core's ops ---------------------------------- */

bool scn__on_disk(void *ud, const char *group);
scn_load_result scn__load_group(void *ud, const char *group, int64_t epoch, scn_arrival how);
void scn__drop_group(void *ud, const char *group, const char *to, const char *to_addr);
bool scn__freeze_group(void *ud, const char *group, uint64_t *snapshot_bytes,
                       uint64_t *history_bytes);
void scn__unfreeze_group(void *ud, const char *group);
/* Groups on disk that nobody owns are claimed, and keys naming this daemon adopted. */
void scn__sweep(scn_cluster *cl);

bool scn__send_claim(void *ud, const char *group);
bool scn__send_served(void *ud, const char *group, int64_t mod_rev);
bool scn__send_handoff(void *ud, const char *group, int64_t mod_rev, const scn_node_entry *to);
bool scn__send_read(void *ud, const char *group);

/* ---- replica_keys.c ------------------------------------------------------------------------ */

/* Writes the followers of each group held here whose record is not what it should be. */
void scn__replicas_record(scn_cluster *cl);
/* At a SIGTERM's release (groups frozen, replies drained): each group's record once more, so
 * that a follower that has every record is in the in-sync set before the lease goes and takes
 * the group over at once; how many txns went (their answers call scn__release_go_on). */
size_t scn__replicas_record_final(scn_cluster *cl);
/* Whether a txn writing a group's record is in flight. */
bool scn__replicas_recording(scn_cluster *cl);
/* Whether a follower of a group frozen for the release, its link up, still lacks records (the
 * release waits for it up to --replica-timeout). */
bool scn__replicas_catching_up(scn_cluster *cl);
/* The release's next step, once no record is in flight: the final records, then the revoke. */
void scn__release_go_on(scn_cluster *cl);
/* group's epoch here began from a follower's copy that may have lacked lag_ticks ticks. */
void scn__replicas_promoted(scn_cluster *cl, const char *group, int64_t epoch, uint64_t lag_ticks);
/* What scn__replicas_promoted said of g's epoch (0: nothing). */
uint64_t scn__promoted_lag(const scn_cluster *cl, const scn_group_entry *g);

/* ---- ship.c -------------------------------------------------------------------------------- */

struct scn_gstore_record;
/* The store's tap (registered with --replicas >= 1): keeps the record in its group's backlog
 * when the group is served here with followers, and lets the ship go when it has none. */
void scn__ship_tap(void *ud, const struct scn_gstore_record *r);
/* The group goes from this daemon (with the records the store appended and never committed). */
void scn__ship_drop(scn_cluster *cl, const char *group);
/* Lets go of the ships of groups no longer served here with followers. */
void scn__ship_check(scn_cluster *cl);
void scn__ship_free(scn_cluster *cl);
/* The ship of group, made when it is served here with followers; NULL otherwise (or out of
 * memory). */
scn_ship *scn__ship_get(scn_cluster *cl, const char *group);
/* The group's ship, or NULL (none made). */
scn_ship *scn__ship_find(scn_cluster *cl, const char *group);
/* How long the oldest record l has not acknowledged has existed (ns, at now), 0 when it
 * acknowledged every record of its group (the age of one of the last SCN_SHIP_TIMES records at
 * most, for a link further behind). */
uint64_t scn__ship_lag_ns(const scn_ship_link *l, uint64_t now);

/* ---- copy.c: a whole copy of a group on the change stream ------------------------------------ */

typedef enum scn_copy_progress { SCN_COPY_MORE, SCN_COPY_DONE, SCN_COPY_FAILED } scn_copy_progress;
/* The owner's side: l gets a whole copy of its group, written now, as of record *seq. 0, or -1
 * with msg. */
int scn__copy_out_start(scn_cluster *cl, scn_ship_link *l, uint64_t *seq, char *msg, size_t msglen);
/* Writes the copy's lines to l's connection while its queued output is under budget; DONE once
 * all are written (l->copy freed, l->sent at the copy's seq). */
scn_copy_progress scn__copy_out_pump(scn_cluster *cl, scn_ship_link *l, size_t budget);
void scn__copy_out_free(scn_ship_link *l);
/* The follower's side: a copy of group announced by header ({"copy":SEQ,...}) at epoch is
 * received into the store's files; NULL with err. */
typedef struct scn_copy_in scn_copy_in;
scn_copy_in *scn__copy_in_start(scn_cluster *cl, const char *group, uint64_t epoch,
                                const cJSON *header, char *err, size_t errlen);
/* A line of the copy: 1 more to come, 0 received whole and installed (the group held at the
 * copy's *seq), -1 with err. */
int scn__copy_in_chunk(scn_copy_in *ci, const cJSON *root, uint64_t *seq, char *err, size_t errlen);
void scn__copy_in_free(scn_copy_in *ci);

/* ---- sync.c -------------------------------------------------------------------------------- */

/* The command about to be run comes from c (NULL after it: scn__sync_check). */
void scn__sync_command(scn_cluster *cl, scn_conn *c);
/* A record of s's group made by the command running: under sync with in-sync followers, its
 * connection's output waits for their acks of seq; with none, it counts as answered alone. */
void scn__sync_record(scn_cluster *cl, scn_ship *s, const scn_group_entry *g, uint64_t seq);
/* Ends the command's scope, releases what every in-sync member acknowledged (or what no member
 * is left for) and flushes those connections; closes those whose group's history here ended. */
void scn__sync_check(scn_cluster *cl);
/* scn__sync_check when the cache changed since the last one (before each flush). */
void scn__sync_check_changed(scn_cluster *cl);
void scn__sync_conn_closed(scn_cluster *cl, scn_conn *c);
/* group was handed to a node that holds every record made here: what waited for it leaves. */
void scn__sync_release(scn_cluster *cl, const char *group);
/* The durability of group: the one it was created with, else the daemon's --durability. */
scn_durability scn__group_durability(scn_cluster *cl, const char *group);
/* The same for a group's cache entry (NULL: none). */
scn_durability scn__entry_durability(const scn_cluster *cl, const scn_group_entry *g);
void scn__sync_free(scn_cluster *cl);

/* ---- replicate.c --------------------------------------------------------------------------- */

/* A record the tap kept in s: written at once to each link that has caught up. */
void scn__links_record(scn_cluster *cl, scn_ship *s, uint64_t seq, uint64_t tick, const char *bytes,
                       size_t len);
/* A tick ran: each caught-up link hears the tick each world of its group closed. */
void scn__links_tick(scn_cluster *cl);
/* Closes every link of s (its group goes, or its history starts over in a new epoch). */
void scn__links_close(scn_ship *s);
/* before_flush: links catching up get the backlog's records as far as their output allows. */
void scn__links_pump(scn_cluster *cl);
void scn__links_conn_closed(scn_cluster *cl, scn_conn *c);
/* After a command: the links holding a batch of records (PUSH_BYTES) send it now, so that the
 * followers apply it while the rest of the turn's commands run (sync replies wait for both). */
void scn__links_push(scn_cluster *cl);
/* Whether a link of s is joining the in-sync set and has not acknowledged seq (one that fell
 * behind past --replica-timeout stops joining instead). */
bool scn__links_joining_lacks(scn_cluster *cl, scn_ship *s, uint64_t seq);
/* Whether a link of s is joining the in-sync set (one that fell behind stops joining). */
bool scn__links_joining(scn_cluster *cl, scn_ship *s);
/* Whether node's link for group belongs in the in-sync set: a member (was) stays while every
 * record it was sent is acknowledged within --replica-timeout; another joins once its link has
 * acknowledged everything up to last, the group's last seq, or, under a steady stream of
 * writes, once it acknowledged the first record whose ok waited for it: a live link that keeps
 * up is made to join (join_from = last + 1), and one that falls behind past the timeout stops
 * joining. No link: not in sync. */
/* Whether link l is up and has everything up to record last: no longer fed from the backlog,
 * any whole copy it was sent installed, every record acknowledged (the one test of being
 * caught up: the in-sync set, a switchover's hand-off, a SIGTERM's wait). */
bool scn__link_caught_up(const scn_ship_link *l, uint64_t last);
/* Whether a follower's link of group that is up is not caught up to record last. */
bool scn__links_behind(scn_cluster *cl, const char *group, uint64_t last);
bool scn__links_insync(scn_cluster *cl, const char *group, const char *node, bool was,
                       uint64_t last);

/* ---- follow.c ------------------------------------------------------------------------------ */

typedef struct scn_follow scn_follow;
/* Starts following the groups whose replicas key names this daemon, stops following the others,
 * and dials the owners of those not connected (from the cluster's tick). */
void scn__follow_check(scn_cluster *cl);
/* Stops following group (its copy dropped from the store and the scene), if it is followed. */
void scn__follow_stop(scn_cluster *cl, const char *group);
/* Ends following group and leaves its copy in the store and the scene, for this daemon to
 * serve; false when no copy of it is held here. */
bool scn__follow_take_copy(scn_cluster *cl, const char *group);
/* group, switched over to another owner, stays in the store and the scene as a copy that
 * follows it once the new owner records its epoch naming this daemon (or is dropped); false
 * when out of memory. */
bool scn__follow_park(scn_cluster *cl, const char *group);
/* Whether group is held here as a follower's copy. */
bool scn__follows(const scn_cluster *cl, const char *group);
/* Whether this daemon follows g, or its key names this daemon a follower. */
bool scn__follow_tracks(const scn_cluster *cl, const scn_group_entry *g);

/* ---- stale.c ------------------------------------------------------------------------------- */

/* A group on disk here whose replicas key says another daemon owns it at a newer epoch than
 * any here, or that it ended at the copy's epoch or later, and that this daemon does not
 * follow: its directory is removed (true), so that it is never loaded again. */
bool scn__stale_forget(scn_cluster *cl, const char *group);
/* Before a group is loaded from disk on a claim: a copy its key says ended since is removed,
 * so the group starts empty, as it was left. */
void scn__stale_forget_ended(scn_cluster *cl, const char *group);
void scn__follow_free(scn_cluster *cl);
/* How many ticks of changes the copy of group followed here may lack, as far as this daemon
 * knows: the owner's highest tick it heard of (its marks, the replicas key's tick) minus the
 * highest its copy closed; 0 when no copy is held. */
uint64_t scn__follow_lag(scn_cluster *cl, const char *group);
/* The highest tick closed among group's worlds here (0: none). */
uint64_t scn__group_tick(const scn_cluster *cl, const char *group);
/* The worlds here that are not followed copies (what this daemon serves). */
size_t scn__worlds_served(const scn_cluster *cl);
/* The records f applied since following began, and its group. */
uint64_t scn__follow_applied(const scn_follow *f, const char **group);

/* ---- switchover.c -------------------------------------------------------------------------- */

/* world.move with --replicas: refused (BAD_REQUEST) when order->to does not follow the group;
 * otherwise scn_owners_move's answer, the hand-off waiting for the target to catch up. */
int scn__switch_start(scn_cluster *cl, const scn_move_order *order, int *code, char *msg,
                      size_t msglen);
/* Hands off the switchovers whose target has acknowledged the group's last record. */
void scn__switch_check(scn_cluster *cl);
/* ---- promote.c ----------------------------------------------------------------------------- */

/* Answers the world.promote requests whose follower now serves the group (or that failed, or
 * ran out of time). */
void scn__promote_check(scn_cluster *cl);
void scn__promote_free(scn_cluster *cl);

/* ---- cluster_stats.c ----------------------------------------------------------------------- */

void scn__collect_stats(void *ud, scn_metrics_sink *k);

#endif

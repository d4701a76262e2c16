/* The ownership core: the cache of who owns each group and which nodes are alive, and what
 * this daemon decides from it: claims and takeovers, keys that hand it a group, groups it
 * loses, moves.
 *
 * It takes plain events (kv.h): a watched key, a full read of the keys, the answer to one of
 * its writes. What it decides is done through scn_owner_ops: load a group here or drop it,
 * write a group's key. It runs without etcd, the store or the loop, so tests drive it with
 * made-up events (tests/unit/test_cluster_owners.c).
 *
 * The files of the core: owners.c (the cache), claims.c (claims, takeovers, losses), move.c
 * (moves). */
#ifndef SCN_OWNERS_H
#define SCN_OWNERS_H

#include "buf.h"
#include "cluster/cluster.h"
#include "cluster/kv.h"

#include <cjson/cJSON.h>

/* The keys the cluster keeps in etcd, all under one prefix (which the watch covers). */
#define SCN_KEYS_PREFIX "/scened/"
#define SCN_NODES_PREFIX SCN_KEYS_PREFIX "nodes/"   /* + node: its address and load */
#define SCN_GROUPS_PREFIX SCN_KEYS_PREFIX "groups/" /* + group: its owner */
/* + group: its followers and in-sync set, bound to no lease (it outlives the owner) */
#define SCN_REPLICAS_PREFIX SCN_KEYS_PREFIX "replicas/"
#define SCN_OWNER_BUCKETS 4096u
#define SCN_ADDR_MAX 96

/* This daemon, as the core compares keys with it. The cluster module owns and updates it. */
typedef struct scn_self {
  char node[SCN_NAME_MAX + 1];
  char addr[SCN_ADDR_MAX]; /* where clients reach it */
  int64_t lease;           /* 0 while it has none */
  bool registered;         /* its node key is written and the cache was read */
  bool released;           /* SIGTERM: it gave its groups up */
} scn_self;

/* This daemon's side of a group. */
typedef enum scn_group_state {
  SCN_GROUP_NONE,     /* not held here */
  SCN_GROUP_CLAIMING, /* its claim is in flight, or it is being loaded */
  SCN_GROUP_OWNED,    /* served here */
  SCN_GROUP_FROZEN,   /* saved for a move or a release: answers UNAVAILABLE */
  SCN_GROUP_BROKEN    /* owned, but its data could not be loaded */
} scn_group_state;

typedef struct scn_waiter {
  struct scn_waiter *next;
  scn_cluster_wake wake;
  void *ud;
} scn_waiter;

typedef struct scn_move {
  char to[SCN_NAME_MAX + 1];
  int64_t handoff_rev; /* 0 until the hand-off applied */
  uint64_t deadline;   /* the time (ops.now) after which an unconfirmed move fails */
  uint64_t limit;      /* ns from the hand-off's start for the target to confirm it */
  /* A switchover (--replicas): frozen, the hand-off waits until the target, a follower, holds
   * every record (scn_owners_move_hand_off), failing at catch_up_deadline. */
  bool catching_up;
  uint64_t catch_up_deadline;
  scn_move_done done; /* NULL: nobody waits for the answer any more */
  void *ud;
} scn_move;

/* What a group's replicas key says. */
typedef struct scn_replica_set {
  char followers[SCN_REPLICAS_MAX][SCN_NAME_MAX + 1];
  char insync[SCN_REPLICAS_MAX][SCN_NAME_MAX + 1];
  uint8_t nfollowers, ninsync;
  char owner[SCN_NAME_MAX + 1]; /* the node that wrote it ("": not said) */
  int64_t epoch;                /* of the owner that wrote it */
  int64_t mod_rev;              /* of the key: what the next txn on it compares (0: absent) */
  int durability;               /* scn_durability */
  uint64_t tick;      /* "tick": the owner's highest closed tick of the group's worlds when it
                       * wrote the key (0: not said) */
  uint64_t lag_ticks; /* "lag_ticks": an epoch that began from a follower's copy: the ticks of
                       * changes that copy may have lacked, as far as it knew (0: not said) */
  bool known;         /* the key exists and is a live record (not one that says "ended") */
  bool ended; /* "ended": the group's last world went at epoch; every copy of an epoch up to it
               * but the owner's own is stale (known is false then, and no follower is named) */
} scn_replica_set;

typedef struct scn_group_entry {
  struct scn_group_entry *next; /* hash chain */
  char name[SCN_NAME_MAX + 1];
  /* what etcd says: the group's key */
  bool key;
  char node[SCN_NAME_MAX + 1];
  char addr[SCN_ADDR_MAX];
  int64_t lease, mod_rev;
  bool handoff;        /* the key is a hand-off its target has not confirmed yet */
  char *handoff_ticks; /* a switchover's hand-off: its "ticks" ({"world":T}, JSON), or NULL */
  char prev[SCN_NAME_MAX + 1]; /* the owner before the key went (for the log) */
  /* this daemon's side */
  scn_group_state state;
  int64_t epoch;
  bool reading;          /* a read of its key is in flight */
  uint64_t seen_in_read; /* the last full read of the keys that found its key */
  scn_waiter *waiters;   /* commands waiting for a claim or a read */
  scn_move *mv;
  /* with --replicas, as the group's key names them: the daemons that keep a copy, and those
   * of them known to hold everything the owner answered (empty without replicas) */
  char followers[SCN_REPLICAS_MAX][SCN_NAME_MAX + 1];
  char insync[SCN_REPLICAS_MAX][SCN_NAME_MAX + 1];
  uint8_t nfollowers, ninsync;
  scn_replica_set replicas;
  uint64_t replicas_seen_in_read; /* the last full read that found its replicas key */
  bool recording;                 /* a txn writing its followers is in flight */
  int8_t created_durability;      /* world.create's "durability" for it as a new group here:
                                   * 1 + scn_durability (0: not given) */
} scn_group_entry;

typedef struct scn_node_entry {
  char name[SCN_NAME_MAX + 1];
  char addr[SCN_ADDR_MAX];
  int64_t lease;
  uint64_t worlds, transforms, connections;
  char *world_names;       /* "name\0name\0...\0", as published */
  char http[SCN_ADDR_MAX]; /* HOST:PORT of its HTTP port (staging view, /ws), "" when off */
  uint64_t seen_in_read;
} scn_node_entry;

typedef enum scn_arrival { SCN_ARRIVED_BY_CLAIM, SCN_ARRIVED_BY_MOVE } scn_arrival;

typedef enum scn_load_result {
  SCN_LOADED,
  SCN_LOAD_NOT_NOW, /* nothing was loaded: tried again later (when the fence is renewed) */
  SCN_LOAD_OUTRAN,  /* the load failed as the fence came down: tried again later */
  SCN_LOAD_BROKEN   /* the group's data cannot be loaded */
} scn_load_result;

/* What the core's decisions do. The writes return false when they could not start; their
 * answers come back through scn_owners_claim_answered, _read_answered, _handoff_answered. */
typedef struct scn_owner_ops {
  void *ud;
  /* The monotonic clock, in nanoseconds. */
  uint64_t (*now)(void *ud);
  /* Whether this daemon may serve groups now (registered, the fence up, not released). */
  bool (*serving)(void *ud);
  /* Whether the group has data in the shared directory. */
  bool (*on_disk)(void *ud, const char *group);
  /* Loads the group at epoch. On a failure other than NOT_NOW, drop is called next. */
  scn_load_result (*load)(void *ud, const char *group, int64_t epoch, scn_arrival how);
  /* Drops the group's worlds here; to and to_addr say where they went ("" when unknown). */
  void (*drop)(void *ud, const char *group, const char *to, const char *to_addr);
  /* A move: stops the group's clocks and saves it, with its histories; false when it could
   * not be saved (unfreeze follows). */
  bool (*freeze)(void *ud, const char *group, uint64_t *snapshot_bytes, uint64_t *history_bytes);
  /* The move is off: the clocks run again. */
  void (*unfreeze)(void *ud, const char *group);
  /* Puts the group's key naming this daemon, if the key does not exist. */
  bool (*send_claim)(void *ud, const char *group);
  /* Puts the group's key naming this daemon, if it is still at mod_rev (the answer to a
   * hand-off: the group is served here). Nobody waits for its answer. */
  bool (*send_served)(void *ud, const char *group, int64_t mod_rev);
  /* Puts the group's key naming to as a hand-off from this daemon, if it is still at mod_rev. */
  bool (*send_handoff)(void *ud, const char *group, int64_t mod_rev, const scn_node_entry *to);
  /* Reads the group's key. */
  bool (*send_read)(void *ud, const char *group);
  /* This daemon's own node key was deleted while it was registered: its lease is gone. */
  void (*lease_lost)(void *ud, const char *why);
  /* The groups held here changed (what the node key publishes is out of date). */
  void (*load_changed)(void *ud);
} scn_owner_ops;

typedef struct scn_owner_stats {
  uint64_t moves, moves_in, takeovers, claims, lost;
} scn_owner_stats;

typedef struct scn_owners {
  const scn_self *self;
  scn_owner_ops ops;
  scn_group_entry *buckets[SCN_OWNER_BUCKETS];
  scn_node_entry *nodes;
  size_t nnodes, nodes_cap;
  int64_t revision; /* the store revision the cache reflects */
  uint64_t reads;   /* full reads of the keys so far */
  scn_owner_stats stats;
} scn_owners;

/* ---- the cache (owners.c) ------------------------------------------------------------------ */

void scn_owners_init(scn_owners *o, const scn_self *self, const scn_owner_ops *ops);
/* Wakes every waiter, answers every move (why) and frees the cache. */
void scn_owners_free(scn_owners *o, const char *why);

scn_group_entry *scn_owners_find(scn_owners *o, const char *group);
/* The group's entry, made when there is none; NULL when out of memory. */
scn_group_entry *scn_owners_get(scn_owners *o, const char *group);
/* Every entry: for (g = scn_owners_first(o); g; g = scn_owners_next(o, g)). */
scn_group_entry *scn_owners_first(scn_owners *o);
scn_group_entry *scn_owners_next(scn_owners *o, scn_group_entry *g);
scn_node_entry *scn_owners_node(scn_owners *o, const char *node);
size_t scn_owners_count(scn_owners *o, scn_group_state state);

/* One event of the watch. */
void scn_owners_watched(scn_owners *o, const scn_kv_event *ev);
/* Every key, as read at revision: the cache takes them, and what it holds that is not among
 * them counts as deleted at revision. Whether this daemon's node key was among them. */
bool scn_owners_reread(scn_owners *o, int64_t revision, const scn_kv *kvs, size_t n);

/* A command waits for the group's claim or read to be answered; false when out of memory. */
bool scn_owners_wait(scn_group_entry *g, scn_cluster_wake wake, void *ud);
void scn_owners_wake(scn_group_entry *g);

/* A group key's value: {"node":..,"addr":..} and, for a hand-off, "from" (NULL: none). */
void scn_owners_group_value(scn_buf *out, const char *node, const char *addr, const char *from);

/* ---- followers (followers.c) --------------------------------------------------------------- */

/* Chooses up to want nodes to follow g besides those it has: live nodes that are neither its
 * owner nor one of its followers, fewest groups owned or followed first (as the cache knows
 * them), then by name. Writes their names to out; returns how many. */
size_t scn_owners_choose_followers(scn_owners *o, const scn_group_entry *g, size_t want,
                                   char out[][SCN_NAME_MAX + 1]);
/* Whether node is one of g's followers (in_sync: of its in-sync set). */
bool scn_owners_follows(const scn_group_entry *g, const char *node, bool in_sync);
/* A replicas key's value: {"epoch":..,"owner":..,"followers":[..],"insync":[..],"tick":..,
 * "lag_ticks":..,"durability":..} (owner, tick and lag_ticks only when said). */
void scn_owners_replicas_value(scn_buf *out, const scn_replica_set *r);
/* A group key's value naming node at addr, with r's followers and in-sync set. */
void scn_owners_group_value_with(scn_buf *out, const char *node, const char *addr,
                                 const scn_replica_set *r);
/* Decodes a replicas key's value into r (its mod_rev and known are left as they are); false
 * when it is not one (r is then unchanged). */
bool scn_owners_replicas_parse(const char *value, size_t len, scn_replica_set *r);
/* The replicas key kv was put (or, deleted, is gone) for the group it names. */
void scn__owners_replicas_put(scn_owners *o, scn_group_entry *g, const scn_kv *kv);
void scn__owners_replicas_deleted(scn_group_entry *g, int64_t rev);
/* Whether this daemon may claim g, which has no owner: with an in-sync set recorded, only a
 * member does while one is live. */
bool scn__owners_may_claim(scn_owners *o, const scn_group_entry *g);

/* ---- claims and takeovers (claims.c) ------------------------------------------------------- */

/* Races for the group when it has no key and is not held here: the winner's revision is its
 * epoch. */
void scn_owners_claim(scn_owners *o, scn_group_entry *g);
void scn_owners_claim_answered(scn_owners *o, const char *group, const scn_kv_answer *a);
/* A group found on disk: claimed when nobody owns it. */
void scn_owners_claim_unowned(scn_owners *o, const char *group);
/* Keys that name this daemon, whose groups are not loaded (a load that had to wait). */
void scn_owners_adopt_pending(scn_owners *o);
/* Asks etcd for the group's key (once at a time); false when the read could not start. */
bool scn_owners_read(scn_owners *o, scn_group_entry *g);
void scn_owners_read_answered(scn_owners *o, const char *group, const scn_kv_answer *a);
/* The lease is gone: every group held here is lost. */
void scn_owners_lose_all(scn_owners *o, const char *why);

/* ---- moves (move.c) ------------------------------------------------------------------------ */

typedef struct scn_move_order {
  const char *group;
  const char *to; /* a live node */
  scn_move_done done;
  void *ud;
  uint64_t limit; /* ns from the hand-off's start for the target to confirm it */
  /* 0: the hand-off is sent at once. Otherwise a switchover: it waits for
   * scn_owners_move_hand_off, and the move fails (unfrozen) if that does not come within
   * catch_up_limit ns. */
  uint64_t catch_up_limit;
} scn_move_order;

/* 1 when there is nothing to do (to is this daemon), 0 when the move started, -1 with *code
 * and msg. */
int scn_owners_move(scn_owners *o, const scn_move_order *order, int *code, char *msg,
                    size_t msglen);
/* A switchover's target holds every record of g: the hand-off goes (its failure ends the
 * move, unfrozen). */
void scn_owners_move_hand_off(scn_owners *o, scn_group_entry *g);
void scn_owners_handoff_answered(scn_owners *o, const char *group, const scn_kv_answer *a);
/* Moves handed off but not confirmed within their limit fail, and switchovers whose target
 * did not catch up within theirs (unfrozen). */
void scn_owners_expire_moves(scn_owners *o);
/* The move's asker went away: the move goes on, answered to nobody. */
void scn_owners_forget_move(scn_owners *o, void *ud);

/* ---- between the core's files -------------------------------------------------------------- */

void scn__owners_log_owner(const scn_group_entry *g, const char *old, const char *new_,
                           int64_t epoch);
/* The group key's value as a put (kv) shows it; older than what the cache holds: ignored. */
void scn__owners_group_put(scn_owners *o, scn_group_entry *g, const scn_kv *kv);
/* Drops the group here (ops->drop) and marks it not held. */
void scn__owners_unload(scn_owners *o, scn_group_entry *g, const char *to, const char *to_addr);
void scn__owners_lose(scn_owners *o, scn_group_entry *g, const char *why);
/* The key names this daemon with its lease and the group is not loaded: load it. */
void scn__owners_adopt(scn_owners *o, scn_group_entry *g, const char *old_owner);
/* The hand-off of g's move applied at rev (seen in its answer or, first, on the watch). */
void scn__owners_handed_off(scn_owners *o, scn_group_entry *g, int64_t rev);
/* g's key changed: a move whose target now serves the group is done. */
void scn__owners_move_check_confirmed(scn_owners *o, scn_group_entry *g);
/* A list of node names in a key's value (absent: none); items that are not node names are
 * left out, and those past SCN_REPLICAS_MAX. */
uint8_t scn__owners_node_list(const cJSON *v, const char *member, char out[][SCN_NAME_MAX + 1]);
/* Ends g's move as UNAVAILABLE. */
void scn__owners_move_failed(scn_group_entry *g, const char *message);

#endif

/* The cluster (--cluster): this daemon's membership in etcd, the groups it owns, where every
 * other group lives, and the one question the dispatcher asks before a command on a world:
 * "is this world's group mine, and if not, whose?".
 *
 * Membership: a lease of --lease-ttl seconds, renewed every third of it, and the node key
 * /scened/nodes/<node> bound to it, whose value also carries this daemon's load. Ownership:
 * /scened/groups/<group> bound to the owner's lease, claimed by a txn that requires the key to
 * be absent (create_revision 0). A watch on /scened/ keeps a cache of both prefixes, so
 * routing is a hash lookup. The fence: the daemon stops serving its groups once the last
 * renewal etcd confirmed (timed from when it was sent) is older than the TTL less a margin,
 * max(0.5 s, TTL / 5), checked on the monotonic clock at each command and before each write.
 *
 * Persistence per group is the store's (store/groups.h); this module decides when a group is
 * loaded (claimed, moved in) and dropped (moved out, lost). */
#ifndef SCN_CLUSTER_H
#define SCN_CLUSTER_H

#include "server.h"

typedef struct scn_cluster scn_cluster;

/* Checks the cluster's flags (--data, the URLs, --node); false with a one-line message. */
bool scn_cluster_config_valid(const scn_config *cfg, char *err, size_t errlen);
/* This daemon's node name: --node, or one derived from the advertised address. */
void scn_cluster_node_name(const scn_config *cfg, const char *advertise, char *out, size_t cap);

/* The module (srv->cluster), with the address clients reach this daemon at; registers its
 * hooks and starts registering in etcd (retried until etcd answers). NULL when out of memory. */
scn_cluster *scn_cluster_open(scn_server *srv, const char *node, const char *advertise);
/* At exit: cancels every request and frees the module once the loop has closed its handles. */
void scn_cluster_close(scn_cluster *cl);

/* ---- routing ----------------------------------------------------------------------------- */

typedef enum scn_route_kind {
  SCN_ROUTE_LOCAL,       /* this daemon owns the group (or it does not exist anywhere), or
                          * follows it and the request is a follower_read */
  SCN_ROUTE_MOVED,       /* another node owns it: node and addr */
  SCN_ROUTE_UNAVAILABLE, /* no owner can serve it right now: why */
  SCN_ROUTE_NO_NODE,     /* world.create's "node" names no live node */
  SCN_ROUTE_WAIT         /* etcd is being asked: wake(ud) is called once it answered */
} scn_route_kind;

typedef struct scn_route {
  char node[SCN_NAME_MAX + 1];
  char addr[96];
  char why[160];
} scn_route;

typedef void (*scn_cluster_wake)(void *ud);

/* A command on a world, as routing sees it. */
typedef struct scn_route_request {
  const char *world;
  bool creating;         /* world.create */
  const char *place;     /* world.create's "node" field: NULL, a node's name, or "auto" */
  bool follower_read;    /* a read that a follower may answer from its copy (follower_reads) */
  bool retry;            /* the second look after a WAIT, which never waits again */
  scn_cluster_wake wake; /* NULL: the command cannot wait */
  /* What wake is given: made by hold(hold_arg) only when the command must wait (so that one
   * that does not costs no allocation), NULL when out of memory; drop(ud) undoes it when the
   * wait cannot start. */
  void *(*hold)(void *hold_arg);
  void (*drop)(void *ud);
  void *hold_arg;
} scn_route_request;

/* Where the command goes. On WAIT, rq->wake(ud) is called exactly once, later (also when the
 * module closes), with the ud rq->hold made. */
scn_route_kind scn_cluster_route(scn_cluster *cl, const scn_route_request *rq, scn_route *out);
/* Whether commands that name no world may run (registered, not fenced); why when not. */
bool scn_cluster_serving(scn_cluster *cl, const char **why);
/* Connection c's output now holds an ok for a write to a group: if the fence comes down before
 * it leaves, c is closed instead (a closed connection acknowledges nothing). */
void scn_cluster_note_ack(scn_cluster *cl, scn_conn *c);
/* A command from c is about to be handed to the modules (after_command): the records it made
 * are c's, for --durability sync. */
void scn_cluster_command_from(scn_cluster *cl, scn_conn *c);
/* Counts an answer of MOVED or UNAVAILABLE (for the metrics). */
void scn_cluster_count_route(scn_cluster *cl, scn_route_kind kind);

/* ---- commands ---------------------------------------------------------------------------- */

const char *scn_cluster_node(const scn_cluster *cl);
/* Where clients reach this daemon (--advertise, or --listen). */
const char *scn_cluster_addr(const scn_cluster *cl);
/* ,"nodes":[{node, addr, worlds, transforms, connections}] for every live node. */
void scn_cluster_nodes_json(scn_cluster *cl, scn_buf *out);
/* With --replicas >= 1: ,"followers":[..],"insync":[..] of world's group, as its replicas key
 * in the cache says (empty lists when it has none); nothing with --replicas 0. */
void scn_cluster_world_replicas_json(scn_cluster *cl, const char *world, scn_buf *out);
/* world.create's "durability" (scn_durability) for world: recorded for its group when the group
 * is new (group_new: none of its worlds exists here), else accepted only when it is the group's
 * own (fixed at its creation). 0, or -1 with msg (BAD_REQUEST). */
int scn_cluster_create_durability(scn_cluster *cl, const char *world, int durability,
                                  bool group_new, char *msg, size_t msglen);
/* The worlds of the other nodes, as ,{"name":..,"node":..} items of world.list's array. */
/* Only those the asker's rule covers (NULL: no access list, every world). */
void scn_cluster_worlds_json(scn_cluster *cl, scn_buf *out, bool first, const scn_acl_rule *rule);

/* A move's answer: ok with the new owner's node and addr, or an error code (SCN_W_*) and
 * message. */
typedef struct scn_move_answer {
  bool ok;
  int code;
  const char *message;     /* when not ok */
  const char *node, *addr; /* when ok */
} scn_move_answer;
typedef void (*scn_move_done)(void *ud, const scn_move_answer *a);
/* Moves world's group to node to. Returns 1 when there is nothing to do (to is this daemon,
 * scn_cluster_addr), 0 when the move started (done is called once it ends), or -1 with *code
 * and msg. */
int scn_cluster_move(scn_cluster *cl, const char *world, const char *to, scn_move_done done,
                     void *ud, int *code, char *msg, size_t msglen);
/* A connection waiting for a move went away. */
void scn_cluster_forget_move(scn_cluster *cl, void *ud);

/* replicate (--replicas): c becomes the stream of group's records for follower node (may be
 * NULL), from seq from of epoch on: 0, and the records follow the ok the caller answers (with
 * *last, the seq of the group's last record here); or -1 with *code (SCN_W_*) and msg. */
int scn_cluster_replicate(scn_cluster *cl, scn_conn *c, const char *group, const char *node,
                          uint64_t epoch, uint64_t from, uint64_t *last, int *code, char *msg,
                          size_t msglen);
/* A line from a connection that streams records (c->repl): the follower's {"ack":SEQ}. */
void scn_cluster_repl_line(scn_cluster *cl, scn_conn *c, const char *line, size_t len);

/* world.promote's answer: ok with the new owner's node and addr and the ticks of changes its
 * copy may have lacked, or an error code (SCN_W_*) and message. */
typedef struct scn_promote_answer {
  bool ok;
  int code;
  const char *message;     /* when not ok */
  const char *node, *addr; /* when ok */
  uint64_t lag_ticks;      /* when ok */
} scn_promote_answer;
typedef void (*scn_promote_done)(void *ud, const scn_promote_answer *a);
/* world.promote (--replicas): makes follower node the owner of world's group, which has no
 * live owner, from the copy it has. 0 when it started (done is called once the follower serves
 * the group, or it failed), or -1 with *code and msg. */
int scn_cluster_promote(scn_cluster *cl, const char *world, const char *node, scn_promote_done done,
                        void *ud, int *code, char *msg, size_t msglen);
/* A connection waiting for world.promote went away. */
void scn_cluster_forget_promote(scn_cluster *cl, void *ud);

/* Whether world is a copy of another daemon's (--replicas): its ticks close at its owner's
 * tick marks, not on this daemon's clock. */
bool scn_cluster_follows_world(const scn_cluster *cl, const char *world);

/* SIGTERM: every owned group is saved and its key deleted (the lease revoked), so others claim
 * them at once. With --replicas, first each group's followers get every record (within
 * --replica-timeout) and are recorded in sync, so one takes it over at once. busy stays true
 * until that is done (at most a few seconds), and moves the release on when a wait is over. */
void scn_cluster_release_all(scn_cluster *cl);
bool scn_cluster_busy(scn_cluster *cl);

#endif

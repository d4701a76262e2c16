/* etcd's key-value and lease API as typed calls: the one file that knows the gateway's paths
 * and the JSON of its requests and replies (etcd.c carries them). Each call builds its request
 * in a buffer of its own and decodes the reply into a scn_kv_answer (kv.h).
 *
 * A call returns false when it could not start; its done is then never called. Otherwise done
 * gets the answer once, with a copy of the caller's context that the call made when it
 * started and frees when done returns (or when the client closes first). */
#ifndef SCN_ETCD_KV_H
#define SCN_ETCD_KV_H

#include "cluster/etcd.h"
#include "cluster/kv.h"

typedef void (*scn_kv_done)(void *ctx, const scn_kv_answer *a);

/* Where an answer goes. */
typedef struct scn_kv_reply {
  double timeout_s;
  scn_kv_done done; /* NULL: nobody waits for the answer (a failure is logged, at debug) */
  const void *ctx;  /* ctx_size bytes, copied when the call starts */
  size_t ctx_size;
} scn_kv_reply;

/* A key to write: its value, bound to a lease (0: none). */
typedef struct scn_kv_write {
  const char *key;
  const void *value;
  size_t value_len;
  int64_t lease;
  bool remove; /* in a txn: delete the key instead (value and lease unused) */
} scn_kv_write;

/* The key, if it exists: kvs holds it (or nothing). */
bool scn_etcd_range(scn_etcd *e, const char *key, const scn_kv_reply *r);
/* Every key that starts with prefix, and the revision they were read at. */
bool scn_etcd_range_prefix(scn_etcd *e, const char *prefix, const scn_kv_reply *r);
bool scn_etcd_put(scn_etcd *e, const scn_kv_write *w, const scn_kv_reply *r);
/* Writes w only if its key is still at mod_revision (0: only if it does not exist); succeeded
 * says whether it did, revision is the write's, and on failure kvs holds the key as it is
 * (nothing when it does not exist). */
bool scn_etcd_put_if_unchanged(scn_etcd *e, const scn_kv_write *w, int64_t mod_revision,
                               const scn_kv_reply *r);

/* What a txn compares a key's field with (the key absent: its revisions and lease are 0). */
typedef enum scn_kv_target { SCN_KV_CREATE, SCN_KV_MOD, SCN_KV_LEASE } scn_kv_target;

typedef struct scn_kv_compare {
  const char *key;
  scn_kv_target target;
  int64_t value; /* the revision (CREATE, MOD) or the lease (LEASE) the field must equal */
} scn_kv_compare;

/* Writes every put of puts (or deletes its key, with remove) if every compare holds, else nothing;
 * succeeded says which, and revision is the store's after it (the puts' revision when they were
 * written). */
bool scn_etcd_txn(scn_etcd *e, const scn_kv_compare *cmp, size_t ncmp, const scn_kv_write *puts,
                  size_t nputs, const scn_kv_reply *r);
bool scn_etcd_delete(scn_etcd *e, const char *key, const scn_kv_reply *r);
/* A lease of ttl_s seconds: lease and ttl (etcd may grant less). */
bool scn_etcd_lease_grant(scn_etcd *e, int64_t ttl_s, const scn_kv_reply *r);
/* One renewal: ttl is what is left of the lease, 0 when it had expired. */
bool scn_etcd_lease_keepalive(scn_etcd *e, int64_t lease, const scn_kv_reply *r);
/* Ends the lease: every key bound to it is deleted. */
bool scn_etcd_lease_revoke(scn_etcd *e, int64_t lease, const scn_kv_reply *r);

/* ---- the watch ------------------------------------------------------------------------------ */

typedef enum scn_kv_watch_kind {
  SCN_WATCH_EVENTS, /* keys changed */
  SCN_WATCH_ERROR,  /* etcd sent an error: what the watch says can no longer be trusted */
  SCN_WATCH_RESYNC, /* etcd cancelled the watch or compacted past it: read everything again */
  SCN_WATCH_ENDED   /* the stream ended (why): the last message */
} scn_kv_watch_kind;

typedef struct scn_kv_watch_msg {
  scn_kv_watch_kind kind;
  const scn_kv_event *events; /* EVENTS: in the order etcd applied them */
  size_t nevents;
  const char *why; /* ENDED */
} scn_kv_watch_msg;

typedef void (*scn_kv_watch_fn)(void *ud, const scn_kv_watch_msg *m);

/* Watches every key that starts with prefix, from start_revision on. The request (end it with
 * scn_etcd_cancel, after which fn hears nothing more), or NULL when it could not start. */
scn_etcd_req *scn_etcd_watch_prefix(scn_etcd *e, const char *prefix, int64_t start_revision,
                                    scn_kv_watch_fn fn, void *ud);

#endif

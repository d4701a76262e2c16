/* Keys as the cluster reads them from etcd, decoded into plain data: a key's value, what
 * changed on a watch, the answer to a request. etcd_kv.c makes them from the gateway's replies;
 * the ownership core (owners.h) takes them, so its tests can make them up. */
#ifndef SCN_KV_H
#define SCN_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct scn_kv {
  const char *key;      /* NULL when etcd sent one that is not base64 */
  const char *value;    /* NUL-terminated; NULL when absent or not base64 */
  size_t value_len;     /* bytes of value before its NUL */
  int64_t mod_revision; /* the revision that last wrote the key (0: not given) */
  int64_t lease;        /* the lease the key is bound to (0: none) */
} scn_kv;

typedef enum scn_kv_change { SCN_KV_PUT, SCN_KV_DELETE } scn_kv_change;

/* One event of a watch. A delete's kv holds the key, and the delete's revision in
 * mod_revision. */
typedef struct scn_kv_event {
  scn_kv_change change;
  scn_kv kv;
} scn_kv_event;

/* The answer to one request. What a field means depends on the request (etcd_kv.h); fields a
 * request does not fill are zero. */
typedef struct scn_kv_answer {
  const char *why;   /* NULL when etcd answered; why not otherwise */
  int64_t revision;  /* the store's revision when etcd answered (0: not given) */
  bool succeeded;    /* a put-if-unchanged: the key was unchanged, and is written */
  const scn_kv *kvs; /* a range's keys; a failed put-if-unchanged's key as it is */
  size_t nkvs;
  int64_t lease; /* a lease grant: the lease's ID */
  int64_t ttl;   /* a lease grant: its TTL; a keepalive: the seconds left (0: it expired) */
} scn_kv_answer;

#endif

/* etcd's key-value and lease API over the v3 JSON gateway (see etcd_kv.h): requests built,
 * replies decoded. */
#include "cluster/etcd_kv.h"

#include "ops/log.h"

#include <nettle/base64.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a reply holds besides its header. */
typedef enum reply_shape {
  SHAPE_PLAIN,     /* put, delete, revoke: nothing more */
  SHAPE_RANGE,     /* kvs */
  SHAPE_TXN,       /* succeeded, and what the failure branch read */
  SHAPE_GRANT,     /* ID and TTL */
  SHAPE_KEEPALIVE, /* result.TTL */
} reply_shape;

/* A request in flight: the caller's done and a copy of its context. */
typedef struct pending {
  reply_shape shape;
  scn_kv_done done;
  max_align_t ctx[];
} pending;

typedef struct watching {
  scn_kv_watch_fn fn;
  void *ud;
} watching;

/* ---- requests ------------------------------------------------------------------------------ */

static void add_b64_field(scn_buf *b, const char *name, const void *data, size_t len) {
  scn_buf_addc(b, '"');
  scn_buf_adds(b, name);
  scn_buf_adds(b, "\":");
  scn_etcd_add_b64(b, data, len);
}

static void add_key(scn_buf *b, const char *key) { add_b64_field(b, "key", key, strlen(key)); }

/* The gateway's 64-bit numbers are JSON strings. */
static void add_int_field(scn_buf *b, const char *name, int64_t v) {
  char s[64];
  snprintf(s, sizeof s, "\"%s\":\"%lld\"", name, (long long)v);
  scn_buf_adds(b, s);
}

static void add_range_end(scn_buf *b, const char *prefix) {
  char end[256];
  scn_etcd_prefix_end(prefix, end, sizeof end);
  scn_buf_addc(b, ',');
  add_b64_field(b, "range_end", end, strlen(end));
}

/* {"key":..,"value":..[,"lease":..]}: a put, alone or in a txn. */
static void add_put(scn_buf *b, const scn_kv_write *w) {
  scn_buf_addc(b, '{');
  add_key(b, w->key);
  scn_buf_addc(b, ',');
  add_b64_field(b, "value", w->value, w->value_len);
  if (w->lease) {
    scn_buf_addc(b, ',');
    add_int_field(b, "lease", w->lease);
  }
  scn_buf_addc(b, '}');
}

/* Sends body (freed here) to path; false when it could not start. */
static bool send_request(scn_etcd *e, const char *path, scn_buf *body, reply_shape shape,
                         const scn_kv_reply *r);

static bool send_body(scn_etcd *e, const char *path, const char *text, reply_shape shape,
                      const scn_kv_reply *r) {
  scn_buf b = {0};
  scn_buf_adds(&b, text);
  return send_request(e, path, &b, shape, r);
}

bool scn_etcd_range(scn_etcd *e, const char *key, const scn_kv_reply *r) {
  scn_buf b = {0};
  scn_buf_addc(&b, '{');
  add_key(&b, key);
  scn_buf_addc(&b, '}');
  return send_request(e, "/v3/kv/range", &b, SHAPE_RANGE, r);
}

bool scn_etcd_range_prefix(scn_etcd *e, const char *prefix, const scn_kv_reply *r) {
  scn_buf b = {0};
  scn_buf_addc(&b, '{');
  add_key(&b, prefix);
  add_range_end(&b, prefix);
  scn_buf_addc(&b, '}');
  return send_request(e, "/v3/kv/range", &b, SHAPE_RANGE, r);
}

bool scn_etcd_put(scn_etcd *e, const scn_kv_write *w, const scn_kv_reply *r) {
  scn_buf b = {0};
  add_put(&b, w);
  return send_request(e, "/v3/kv/put", &b, SHAPE_PLAIN, r);
}

bool scn_etcd_put_if_unchanged(scn_etcd *e, const scn_kv_write *w, int64_t mod_revision,
                               const scn_kv_reply *r) {
  scn_buf b = {0};
  scn_buf_adds(&b, "{\"compare\":[{");
  add_key(&b, w->key);
  if (mod_revision) {
    scn_buf_adds(&b, ",\"target\":\"MOD\",");
    add_int_field(&b, "mod_revision", mod_revision);
  } else {
    scn_buf_adds(&b, ",\"target\":\"CREATE\",\"create_revision\":\"0\"");
  }
  scn_buf_adds(&b, "}],\"success\":[{\"request_put\":");
  add_put(&b, w);
  scn_buf_adds(&b, "}],\"failure\":[{\"request_range\":{");
  add_key(&b, w->key);
  scn_buf_adds(&b, "}}]}");
  return send_request(e, "/v3/kv/txn", &b, SHAPE_TXN, r);
}

static void add_compare(scn_buf *b, const scn_kv_compare *c) {
  static const char *const targets[] = {"CREATE", "MOD", "LEASE"};
  static const char *const fields[] = {"create_revision", "mod_revision", "lease"};
  scn_buf_addc(b, '{');
  add_key(b, c->key);
  scn_buf_adds(b, ",\"result\":\"EQUAL\",\"target\":\"");
  scn_buf_adds(b, targets[c->target]);
  scn_buf_adds(b, "\",");
  add_int_field(b, fields[c->target], c->value);
  scn_buf_addc(b, '}');
}

bool scn_etcd_txn(scn_etcd *e, const scn_kv_compare *cmp, size_t ncmp, const scn_kv_write *puts,
                  size_t nputs, const scn_kv_reply *r) {
  scn_buf b = {0};
  scn_buf_adds(&b, "{\"compare\":[");
  for (size_t i = 0; i < ncmp; i++) {
    if (i)
      scn_buf_addc(&b, ',');
    add_compare(&b, &cmp[i]);
  }
  scn_buf_adds(&b, "],\"success\":[");
  for (size_t i = 0; i < nputs; i++) {
    if (i)
      scn_buf_addc(&b, ',');
    if (puts[i].remove) {
      scn_buf_adds(&b, "{\"request_delete_range\":{");
      add_key(&b, puts[i].key);
      scn_buf_adds(&b, "}}");
      continue;
    }
    scn_buf_adds(&b, "{\"request_put\":");
    add_put(&b, &puts[i]);
    scn_buf_addc(&b, '}');
  }
  scn_buf_adds(&b, "]}");
  return send_request(e, "/v3/kv/txn", &b, SHAPE_TXN, r);
}

bool scn_etcd_delete(scn_etcd *e, const char *key, const scn_kv_reply *r) {
  scn_buf b = {0};
  scn_buf_addc(&b, '{');
  add_key(&b, key);
  scn_buf_addc(&b, '}');
  return send_request(e, "/v3/kv/deleterange", &b, SHAPE_PLAIN, r);
}

bool scn_etcd_lease_grant(scn_etcd *e, int64_t ttl_s, const scn_kv_reply *r) {
  char body[64];
  snprintf(body, sizeof body, "{\"TTL\":%lld}", (long long)ttl_s);
  return send_body(e, "/v3/lease/grant", body, SHAPE_GRANT, r);
}

/* {"ID":..}: the body of a keepalive and of a revoke. */
static void lease_body(int64_t lease, char *out, size_t cap) {
  snprintf(out, cap, "{\"ID\":\"%lld\"}", (long long)lease);
}

bool scn_etcd_lease_keepalive(scn_etcd *e, int64_t lease, const scn_kv_reply *r) {
  char body[64];
  lease_body(lease, body, sizeof body);
  return send_body(e, "/v3/lease/keepalive", body, SHAPE_KEEPALIVE, r);
}

bool scn_etcd_lease_revoke(scn_etcd *e, int64_t lease, const scn_kv_reply *r) {
  char body[64];
  lease_body(lease, body, sizeof body);
  return send_body(e, "/v3/lease/revoke", body, SHAPE_PLAIN, r);
}

/* ---- replies ------------------------------------------------------------------------------- */

/* The decoded text of a base64 field, on the heap; NULL when absent or not base64. */
static char *b64_field(const cJSON *obj, const char *name, size_t *len) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!cJSON_IsString(item))
    return NULL;
  size_t cap = BASE64_DECODE_LENGTH(strlen(item->valuestring)) + 1;
  char *out = malloc(cap);
  if (out && !scn_etcd_b64(item, out, cap, len)) {
    free(out);
    out = NULL;
  }
  return out;
}

static void kv_decode(const cJSON *item, scn_kv *kv) {
  kv->key = b64_field(item, "key", NULL);
  kv->value = b64_field(item, "value", &kv->value_len);
  kv->mod_revision = scn_etcd_int(item, "mod_revision", 0);
  kv->lease = scn_etcd_int(item, "lease", 0);
}

static void kv_free(scn_kv *kv) {
  free((char *)kv->key);
  free((char *)kv->value);
}

/* Every item of a kvs array (NULL: none); false when out of memory. */
static bool kvs_decode(const cJSON *kvs, scn_kv **out, size_t *n) {
  *out = NULL;
  *n = 0;
  size_t count = (size_t)cJSON_GetArraySize(kvs);
  if (!cJSON_IsArray(kvs) || count == 0)
    return true;
  scn_kv *all = calloc(count, sizeof *all);
  if (!all)
    return false;
  const cJSON *item;
  cJSON_ArrayForEach(item, kvs) {
    if (*n < count)
      kv_decode(item, &all[(*n)++]);
  }
  *out = all;
  return true;
}

static void kvs_free(scn_kv *kvs, size_t n) {
  for (size_t i = 0; i < n; i++)
    kv_free(&kvs[i]);
  free(kvs);
}

/* The keys a failed txn's read found: responses[0].response_range.kvs. */
static const cJSON *txn_read(const cJSON *reply) {
  const cJSON *resp = cJSON_GetObjectItemCaseSensitive(reply, "responses");
  const cJSON *first = cJSON_IsArray(resp) ? resp->child : NULL;
  const cJSON *range = cJSON_GetObjectItemCaseSensitive(first, "response_range");
  return cJSON_GetObjectItemCaseSensitive(range, "kvs");
}

static void decode(reply_shape shape, const cJSON *reply, scn_kv_answer *a, scn_kv **kvs) {
  size_t n = 0;
  a->revision = scn_etcd_int(cJSON_GetObjectItemCaseSensitive(reply, "header"), "revision", 0);
  switch (shape) {
  case SHAPE_PLAIN:
    break;
  case SHAPE_RANGE: {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(reply, "kvs");
    if (items && !cJSON_IsArray(items))
      a->why = "malformed reply";
    else if (!kvs_decode(items, kvs, &n))
      a->why = "out of memory";
    break;
  }
  case SHAPE_TXN:
    a->succeeded = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "succeeded"));
    if (!a->succeeded && !kvs_decode(txn_read(reply), kvs, &n))
      a->why = "out of memory";
    break;
  case SHAPE_GRANT:
    a->lease = scn_etcd_int(reply, "ID", 0);
    a->ttl = scn_etcd_int(reply, "TTL", 0);
    break;
  case SHAPE_KEEPALIVE: {
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(reply, "result");
    if (!cJSON_IsObject(result))
      a->why = "malformed reply";
    else
      a->ttl = scn_etcd_int(result, "TTL", 0); /* absent when the lease had expired */
    break;
  }
  }
  a->kvs = *kvs;
  a->nkvs = n;
}

static void on_reply(void *ud, const cJSON *reply, const char *why) {
  pending *p = ud;
  scn_kv_answer a = {.why = why};
  scn_kv *kvs = NULL;
  if (reply)
    decode(p->shape, reply, &a, &kvs);
  if (p->done)
    p->done(p->ctx, &a);
  else if (a.why)
    scn_log(SCN_LOG_DEBUG, "etcd: request failed", "reason=\"%s\"", a.why);
  kvs_free(kvs, a.nkvs);
  free(p);
}

static bool send_request(scn_etcd *e, const char *path, scn_buf *body, reply_shape shape,
                         const scn_kv_reply *r) {
  scn_buf_addc(body, '\0');
  pending *p = body->failed ? NULL : malloc(sizeof *p + r->ctx_size);
  scn_etcd_req *req = NULL;
  if (p) {
    *p = (pending){.shape = shape, .done = r->done};
    if (r->ctx_size)
      memcpy(p->ctx, r->ctx, r->ctx_size);
    req = scn_etcd_call(e, path, body->data, r->timeout_s, on_reply, p);
  }
  scn_buf_free(body);
  if (!req) {
    free(p);
    return false;
  }
  scn_etcd_set_release(req, free);
  return true;
}

/* ---- the watch ----------------------------------------------------------------------------- */

static void on_watch_msg(void *ud, const cJSON *msg) {
  watching *w = ud;
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(msg, "result");
  if (!cJSON_IsObject(result)) {
    w->fn(w->ud, &(scn_kv_watch_msg){.kind = SCN_WATCH_ERROR});
    return;
  }
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(result, "canceled")) ||
      scn_etcd_int(result, "compact_revision", 0) > 0) {
    w->fn(w->ud, &(scn_kv_watch_msg){.kind = SCN_WATCH_RESYNC});
    return;
  }
  const cJSON *events = cJSON_GetObjectItemCaseSensitive(result, "events"), *ev;
  size_t cap = (size_t)cJSON_GetArraySize(events), n = 0;
  scn_kv_event *all = cap ? calloc(cap, sizeof *all) : NULL;
  if (cap && !all) {
    w->fn(w->ud, &(scn_kv_watch_msg){.kind = SCN_WATCH_ERROR});
    return;
  }
  cJSON_ArrayForEach(ev, events) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(ev, "kv");
    if (!cJSON_IsObject(kv) || n == cap)
      continue;
    bool deleted = cJSON_IsString(type) && strcmp(type->valuestring, "DELETE") == 0;
    all[n].change = deleted ? SCN_KV_DELETE : SCN_KV_PUT;
    kv_decode(kv, &all[n++].kv);
  }
  w->fn(w->ud, &(scn_kv_watch_msg){.kind = SCN_WATCH_EVENTS, .events = all, .nevents = n});
  for (size_t i = 0; i < n; i++)
    kv_free(&all[i].kv);
  free(all);
}

static void on_watch_end(void *ud, const cJSON *reply, const char *why) {
  (void)reply;
  watching *w = ud;
  w->fn(w->ud, &(scn_kv_watch_msg){.kind = SCN_WATCH_ENDED, .why = why});
  free(w);
}

scn_etcd_req *scn_etcd_watch_prefix(scn_etcd *e, const char *prefix, int64_t start_revision,
                                    scn_kv_watch_fn fn, void *ud) {
  scn_buf b = {0};
  scn_buf_adds(&b, "{\"create_request\":{");
  add_key(&b, prefix);
  add_range_end(&b, prefix);
  scn_buf_addc(&b, ',');
  add_int_field(&b, "start_revision", start_revision);
  scn_buf_adds(&b, "}}");
  scn_buf_addc(&b, '\0');
  watching *w = b.failed ? NULL : malloc(sizeof *w);
  scn_etcd_req *req = NULL;
  if (w) {
    *w = (watching){.fn = fn, .ud = ud};
    req = scn_etcd_watch(e, "/v3/watch", b.data, on_watch_msg, on_watch_end, w);
  }
  scn_buf_free(&b);
  if (!req) {
    free(w);
    return NULL;
  }
  scn_etcd_set_release(req, free);
  return req;
}

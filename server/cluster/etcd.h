/* An asynchronous client of etcd's v3 JSON gateway on the daemon's libuv loop: libcurl's multi
 * interface, driven by a uv_poll per socket and one uv_timer, so no request ever blocks the
 * loop. Every request has a deadline; with several endpoints a request that cannot reach one
 * is tried on the next, and later requests start where the last one succeeded. Replies are
 * parsed with cJSON on the heap (they outlive no callback). A watch is one long response: a
 * stream of JSON objects, handed over one by one as they complete. Over https, libcurl does
 * TLS with the peer and its host name verified; connections stay open in the multi handle for
 * the next request, and TLS sessions are shared between requests so a new connection resumes.
 *
 * The gateway's conventions, which the callers read through the helpers below: keys and
 * values are base64, 64-bit numbers are JSON strings, and fields with default values are left
 * out (a failed txn has no "succeeded", a keepalive on an expired lease has no "TTL"). */
#ifndef SCN_ETCD_H
#define SCN_ETCD_H

#include "buf.h"
#include "ops/metrics.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct scn_etcd scn_etcd;
typedef struct scn_etcd_req scn_etcd_req;

/* A reply: the parsed JSON object of an HTTP 200, or NULL with why (a transport error, a
 * timeout, an HTTP error with etcd's message, or a body that is not a JSON object). The
 * document is freed when the callback returns. */
typedef void (*scn_etcd_done)(void *ud, const cJSON *reply, const char *why);
/* One object of a watch stream. */
typedef void (*scn_etcd_msg)(void *ud, const cJSON *msg);

typedef struct scn_etcd_stats {
  uint64_t requests, errors, timeouts, failovers, watch_messages;
  uint64_t connections; /* opened (each a TLS handshake over https): the rest were reused */
  scn_hist latency;
} scn_etcd_stats;

/* How the client reaches etcd; a zero field is the default. The strings are copied. */
typedef struct scn_etcd_options {
  /* comma-separated endpoints, all http://HOST:PORT or all https://HOST:PORT (checked by
   * scn_etcd_urls_valid) */
  const char *urls;
  /* https only: PEM CA certificates one of which signed etcd's certificate (NULL or empty:
   * the system's store), and this client's PEM certificate and unencrypted PEM key for etcd's
   * --client-cert-auth (NULL or empty: none). Checked by scn_etcd_tls_files_check. */
  const char *ca, *cert, *key;
} scn_etcd_options;

scn_etcd *scn_etcd_open(uv_loop_t *loop, const scn_etcd_options *opt);
/* Cancels every request (their callbacks are not called) and frees the client once the loop
 * has closed its handles. */
void scn_etcd_close(scn_etcd *e);
/* Whether urls is a usable endpoint list (one scheme for all); why (at most 200 bytes) says
 * what is wrong. */
bool scn_etcd_urls_valid(const char *urls, char *why, size_t whylen);
/* Whether a valid endpoint list is https. */
bool scn_etcd_urls_tls(const char *urls);
/* Which TLS file of opt cannot be used, if any (etcd_tls.c), with why (at most 200 bytes): the
 * CA file must hold PEM certificates, the certificate file one, and the key file an
 * unencrypted PEM private key that matches it. */
typedef enum scn_etcd_file {
  SCN_ETCD_FILES_OK,
  SCN_ETCD_CA_FILE,
  SCN_ETCD_CERT_FILE,
  SCN_ETCD_KEY_FILE
} scn_etcd_file;
scn_etcd_file scn_etcd_tls_files_check(const scn_etcd_options *opt, char *why, size_t whylen);

/* POSTs body (JSON) to path with a deadline. The request, or NULL
 * when it could not start (done is then not called). */
scn_etcd_req *scn_etcd_call(scn_etcd *e, const char *path, const char *body, double timeout_s,
                            scn_etcd_done done, void *ud);
/* Opens a watch (POSTs body to path): each object of the stream goes to msg; when the stream
 * ends or fails, done(ud, NULL, why) once. */
scn_etcd_req *scn_etcd_watch(scn_etcd *e, const char *path, const char *body, scn_etcd_msg msg,
                             scn_etcd_done done, void *ud);
/* A request that ends without its callback (cancelled, or the client closed) hands its ud to
 * release. */
void scn_etcd_set_release(scn_etcd_req *r, void (*release)(void *ud));
/* Ends a request without calling its callbacks. */
void scn_etcd_cancel(scn_etcd_req *r);
const scn_etcd_stats *scn_etcd_get_stats(const scn_etcd *e);
/* The endpoint requests go to now. */
const char *scn_etcd_endpoint(const scn_etcd *e);

/* ---- the gateway's encodings ------------------------------------------------------------ */

/* Appends the base64 of len bytes, as a JSON string (quoted). */
void scn_etcd_add_b64(scn_buf *out, const void *data, size_t len);
/* Decodes the base64 string of item into out (NUL-terminated); false when it is not one or
 * does not fit in cap - 1 bytes. */
bool scn_etcd_b64(const cJSON *item, char *out, size_t cap, size_t *len);
/* A 64-bit number of the gateway: a string of digits, a JSON number, or absent (def). */
int64_t scn_etcd_int(const cJSON *obj, const char *key, int64_t def);
/* The smallest key after every key that starts with prefix (a range's range_end). */
void scn_etcd_prefix_end(const char *prefix, char *out, size_t cap);

#endif

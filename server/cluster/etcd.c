/* etcd's JSON gateway through libcurl's multi interface on the libuv loop (see etcd.h). */
#include "cluster/etcd.h"

#include "ops/json_arena.h"
#include "ops/log.h"

#include <curl/curl.h>
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENDPOINTS 16
#define MAX_BODY (16u << 20) /* a reply or an unfinished watch object larger than this is bad */

struct scn_etcd {
  uv_loop_t *loop;
  CURLM *multi;
  CURLSH *share; /* the TLS sessions, so that a new connection resumes one */
  uv_timer_t timer;
  char urls[MAX_ENDPOINTS][256];
  int nurls, current;
  bool tls;
  char *ca, *cert, *key; /* NULL: none */
  scn_etcd_req *reqs;
  int open_handles; /* the timer and the polls: e is freed once all are closed */
  bool closing;
  scn_etcd_stats stats;
};

struct scn_etcd_req {
  scn_etcd *e;
  scn_etcd_req *prev, *next;
  CURL *easy;
  char path[64];
  char *body; /* what is posted */
  double timeout_s;
  int endpoint, tries;
  scn_buf reply;
  scn_buf queued; /* watch: complete objects not yet handed over, each ended by a NUL */
  size_t scanned; /* watch: bytes of reply already scanned */
  int depth;
  bool in_string, escaped;
  bool watch, in_callback, cancelled;
  scn_etcd_done done;
  scn_etcd_msg msg;
  void *ud;
  void (*release)(void *ud); /* frees ud when the request ends without its callback */
  uint64_t started;
  bool counted; /* its connections are in the stats */
  char error[CURL_ERROR_SIZE];
};

typedef struct poll_ctx {
  uv_poll_t poll;
  curl_socket_t fd;
  scn_etcd *e;
} poll_ctx;

static void on_handle_closed(uv_handle_t *h) {
  scn_etcd *e = h->data;
  if (h->type == UV_POLL)
    free(h);
  if (--e->open_handles == 0 && e->closing) {
    curl_multi_cleanup(e->multi);
    if (e->share)
      curl_share_cleanup(e->share);
    free(e->ca);
    free(e->cert);
    free(e->key);
    free(e);
  }
}

/* ---- driving libcurl from the loop ------------------------------------------------------- */

static void finish(scn_etcd_req *r, CURLcode result);
static void deliver(scn_etcd *e);

static void check_done(scn_etcd *e) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(e->multi, &left))) {
    if (m->msg != CURLMSG_DONE)
      continue;
    scn_etcd_req *r = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
    finish(r, m->data.result);
  }
  deliver(e);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  poll_ctx *p = h->data;
  int flags = 0, running;
  if (status < 0)
    flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE)
    flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE)
    flags |= CURL_CSELECT_OUT;
  scn_etcd *e = p->e;
  curl_multi_socket_action(e->multi, p->fd, flags, &running);
  check_done(e);
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)easy;
  scn_etcd *e = userp;
  poll_ctx *p = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (p) {
      uv_poll_stop(&p->poll);
      p->poll.data = e;
      uv_close((uv_handle_t *)&p->poll, on_handle_closed);
      curl_multi_assign(e->multi, fd, NULL);
    }
    return 0;
  }
  if (!p) {
    p = calloc(1, sizeof *p);
    if (!p || uv_poll_init_socket(e->loop, &p->poll, fd) != 0) {
      free(p);
      return -1;
    }
    p->fd = fd;
    p->e = e;
    p->poll.data = p;
    e->open_handles++;
    curl_multi_assign(e->multi, fd, p);
  }
  int events = 0;
  if (what & CURL_POLL_IN)
    events |= UV_READABLE;
  if (what & CURL_POLL_OUT)
    events |= UV_WRITABLE;
  uv_poll_start(&p->poll, events, on_poll);
  return 0;
}

static void on_timeout(uv_timer_t *t) {
  scn_etcd *e = t->data;
  int running;
  curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_done(e);
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp) {
  (void)multi;
  scn_etcd *e = userp;
  if (timeout_ms < 0)
    uv_timer_stop(&e->timer);
  else
    uv_timer_start(&e->timer, on_timeout, (uint64_t)timeout_ms, 0);
  return 0;
}

/* ---- requests ---------------------------------------------------------------------------- */

static void req_free(scn_etcd_req *r) {
  scn_etcd *e = r->e;
  if (r->prev)
    r->prev->next = r->next;
  else if (e->reqs == r)
    e->reqs = r->next;
  if (r->next)
    r->next->prev = r->prev;
  if (r->easy) {
    curl_multi_remove_handle(e->multi, r->easy);
    curl_easy_cleanup(r->easy);
  }
  scn_buf_free(&r->reply);
  scn_buf_free(&r->queued);
  free(r->body);
  if (r->release)
    r->release(r->ud);
  free(r);
}

void scn_etcd_set_release(scn_etcd_req *r, void (*release)(void *ud)) { r->release = release; }

/* One complete object of a watch stream: queued, and handed over once libcurl has returned
 * (its callbacks may not start requests, which the watch's reader does). */
static void watch_object(scn_etcd_req *r, const char *text, size_t len) {
  scn_buf_add(&r->queued, text, len);
  scn_buf_addc(&r->queued, '\0');
}

/* Hands each watch's queued objects to its reader. A reader may start or cancel requests
 * (this one too), so the list is walked again after every request with something queued. */
static void deliver(scn_etcd *e) {
  for (;;) {
    scn_etcd_req *r = e->reqs;
    while (r && (r->cancelled || r->queued.len == 0 || r->in_callback))
      r = r->next;
    if (!r)
      return;
    scn_buf q = r->queued;
    r->queued = (scn_buf){0};
    r->in_callback = true;
    for (size_t off = 0; off < q.len && !r->cancelled;) {
      size_t len = strlen(q.data + off);
      cJSON *doc = scn_json_heap_parse(q.data + off, len);
      e->stats.watch_messages++;
      if (cJSON_IsObject(doc))
        r->msg(r->ud, doc);
      else
        scn_log(SCN_LOG_WARN, "etcd: a watch message is not a JSON object", "bytes=%zu", len);
      scn_json_heap_delete(doc);
      off += len + 1;
    }
    r->in_callback = false;
    scn_buf_free(&q);
    if (r->cancelled)
      req_free(r);
  }
}

/* Finds the objects a watch chunk completed: braces are counted outside strings, so objects
 * may arrive split anywhere, several per chunk, with or without newlines between them. */
static bool watch_scan(scn_etcd_req *r) {
  scn_buf *b = &r->reply;
  size_t start = 0;
  for (size_t i = r->scanned; i < b->len; i++) {
    char ch = b->data[i];
    if (r->in_string) {
      if (r->escaped)
        r->escaped = false;
      else if (ch == '\\')
        r->escaped = true;
      else if (ch == '"')
        r->in_string = false;
      continue;
    }
    if (r->depth == 0 && ch != '{') {
      start = i + 1; /* whitespace between objects (anything else is dropped too) */
      continue;
    }
    if (ch == '"') {
      r->in_string = true;
    } else if (ch == '{' || ch == '[') {
      r->depth++;
    } else if ((ch == '}' || ch == ']') && --r->depth == 0) {
      watch_object(r, b->data + start, i + 1 - start);
      if (r->cancelled)
        return false;
      start = i + 1;
    }
  }
  memmove(b->data, b->data + start, b->len - start);
  b->len -= start;
  r->scanned = b->len;
  return b->len <= MAX_BODY;
}

/* Adds the connections r opened to the stats, once (a watch's when its first bytes come, as it
 * may never end). */
static void count_connections(scn_etcd_req *r) {
  long connects = 0;
  if (!r->counted && curl_easy_getinfo(r->easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK &&
      connects > 0)
    r->e->stats.connections += (uint64_t)connects;
  r->counted = true;
}

static size_t on_write(char *data, size_t size, size_t n, void *ud) {
  scn_etcd_req *r = ud;
  size_t len = size * n;
  count_connections(r);
  if (r->cancelled || r->reply.len + len > MAX_BODY)
    return 0; /* ends the transfer */
  scn_buf_add(&r->reply, data, len);
  if (r->reply.failed)
    return 0;
  if (r->watch && !watch_scan(r))
    return 0;
  return len;
}

/* Every request sets the same TLS options: libcurl reuses an open connection only for a
 * request whose options match the ones it was made with. */
static void set_tls(const scn_etcd *e, CURL *c) {
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(c, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
  if (e->ca)
    curl_easy_setopt(c, CURLOPT_CAINFO, e->ca);
  if (e->cert) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, e->cert);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLKEY, e->key);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    /* An encrypted key fails instead of making OpenSSL ask for its password on the terminal
     * (the check at start refuses one; this holds if the file is replaced later). */
    curl_easy_setopt(c, CURLOPT_KEYPASSWD, "");
  }
  if (e->share)
    curl_easy_setopt(c, CURLOPT_SHARE, e->share);
}

static int start_easy(scn_etcd_req *r) {
  scn_etcd *e = r->e;
  char url[400];
  r->endpoint = e->current;
  snprintf(url, sizeof url, "%s%s", e->urls[r->endpoint], r->path);
  r->easy = curl_easy_init();
  if (!r->easy)
    return -1;
  CURL *c = r->easy;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(c, CURLOPT_PRIVATE, r);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->error);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
  long ms = (long)(r->timeout_s * 1000);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms > 0 && ms < 1000 ? ms : 1000L);
  if (!r->watch)
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
  if (e->tls)
    set_tls(e, c);
  r->error[0] = '\0';
  r->reply.len = 0;
  r->counted = false;
  r->started = uv_hrtime();
  if (curl_multi_add_handle(e->multi, c) != CURLM_OK) {
    curl_easy_cleanup(c);
    r->easy = NULL;
    return -1;
  }
  return 0;
}

static scn_etcd_req *req_new(scn_etcd *e, const char *path, const char *body, double timeout_s,
                             scn_etcd_done done, void *ud) {
  if (e->closing)
    return NULL;
  scn_etcd_req *r = calloc(1, sizeof *r);
  if (!r || !(r->body = strdup(body))) {
    free(r);
    return NULL;
  }
  r->e = e;
  snprintf(r->path, sizeof r->path, "%s", path);
  r->timeout_s = timeout_s;
  r->done = done;
  r->ud = ud;
  r->next = e->reqs;
  if (e->reqs)
    e->reqs->prev = r;
  e->reqs = r;
  return r;
}

static scn_etcd_req *req_start(scn_etcd_req *r) {
  if (start_easy(r) != 0) {
    req_free(r);
    return NULL;
  }
  r->e->stats.requests++;
  return r;
}

scn_etcd_req *scn_etcd_call(scn_etcd *e, const char *path, const char *body, double timeout_s,
                            scn_etcd_done done, void *ud) {
  scn_etcd_req *r = req_new(e, path, body, timeout_s, done, ud);
  return r ? req_start(r) : NULL;
}

scn_etcd_req *scn_etcd_watch(scn_etcd *e, const char *path, const char *body, scn_etcd_msg msg,
                             scn_etcd_done done, void *ud) {
  scn_etcd_req *r = req_new(e, path, body, 2.0, done, ud);
  if (!r)
    return NULL;
  r->watch = true;
  r->msg = msg;
  return req_start(r);
}

void scn_etcd_cancel(scn_etcd_req *r) {
  if (!r)
    return;
  r->cancelled = true;
  if (!r->in_callback)
    req_free(r);
}

/* etcd with --client-cert-auth ends the connection of a client without a certificate right
 * after the handshake, which libcurl reports as whatever it was doing then (a failed
 * handshake, send, read, or getpeername()): the reason then says what is likely. */
#define NO_CERT_HINT                                                                               \
  " (no client certificate was presented: etcd refuses such connections when it requires "         \
  "client certificates)"

static bool closed_without_cert(const scn_etcd *e, CURLcode result) {
  return e->tls && !e->cert &&
         (result == CURLE_SSL_CONNECT_ERROR || result == CURLE_SEND_ERROR ||
          result == CURLE_RECV_ERROR || result == CURLE_GOT_NOTHING);
}

/* Whether a request failed before anything was sent: refused, or its TLS handshake failed. */
static bool sent_nothing(CURLcode result) {
  return result == CURLE_COULDNT_CONNECT || result == CURLE_SSL_CONNECT_ERROR ||
         result == CURLE_PEER_FAILED_VERIFICATION;
}

/* A request ended: its callback gets the parsed reply or why it failed. A request no endpoint
 * received (refused, or its TLS handshake failed) is tried on the next (nothing reached etcd,
 * so nothing can apply twice); any failure moves later requests to the next endpoint. */
static void finish(scn_etcd_req *r, CURLcode result) {
  scn_etcd *e = r->e;
  if (r->watch && r->queued.len && !r->cancelled) {
    /* what the stream sent before it ended goes first */
    curl_multi_remove_handle(e->multi, r->easy);
    deliver(e);
  }
  if (r->cancelled) {
    req_free(r);
    return;
  }
  double secs = (double)(uv_hrtime() - r->started) * 1e-9;
  scn_hist_observe(&e->stats.latency, secs);
  long status = 0;
  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
  count_connections(r);
  char why[768] = "";
  cJSON *doc = NULL;
  if (result != CURLE_OK) {
    e->stats.errors++;
    if (result == CURLE_OPERATION_TIMEDOUT)
      e->stats.timeouts++;
    if (e->nurls > 1) {
      if (e->current == r->endpoint)
        e->current = (e->current + 1) % e->nurls;
      e->stats.failovers++;
    }
    if (!r->watch && sent_nothing(result) && ++r->tries < e->nurls) {
      curl_multi_remove_handle(e->multi, r->easy);
      curl_easy_cleanup(r->easy);
      r->easy = NULL;
      if (start_easy(r) == 0)
        return;
    }
    snprintf(why, sizeof why, "%s: %s%s", e->urls[r->endpoint],
             r->error[0] ? r->error : curl_easy_strerror(result),
             closed_without_cert(e, result) ? NO_CERT_HINT : "");
  } else if (r->watch) {
    snprintf(why, sizeof why, "the watch stream ended (HTTP %ld)", status);
  } else {
    doc = scn_json_heap_parse(r->reply.data ? r->reply.data : "", r->reply.len);
    if (status != 200) {
      e->stats.errors++;
      const cJSON *msg = cJSON_GetObjectItemCaseSensitive(doc, "error");
      snprintf(why, sizeof why, "etcd answered HTTP %ld: %.200s", status,
               cJSON_IsString(msg) ? msg->valuestring : "(no message)");
      scn_json_heap_delete(doc);
      doc = NULL;
    } else if (!cJSON_IsObject(doc)) {
      e->stats.errors++;
      snprintf(why, sizeof why, "etcd's reply is not a JSON object (%zu bytes)", r->reply.len);
      scn_json_heap_delete(doc);
      doc = NULL;
    }
  }
  r->in_callback = true;
  r->release = NULL; /* the callback has ud now */
  r->done(r->ud, doc, doc ? NULL : why);
  scn_json_heap_delete(doc);
  req_free(r);
}

/* ---- the client -------------------------------------------------------------------------- */

/* The part of url after its scheme (http:// or https://), NULL when it has neither; *tls says
 * which. */
static const char *after_scheme(const char *url, bool *tls) {
  *tls = strncmp(url, "https://", 8) == 0;
  if (*tls)
    return url + 8;
  return strncmp(url, "http://", 7) == 0 ? url + 7 : NULL;
}

bool scn_etcd_urls_tls(const char *urls) {
  bool tls;
  return after_scheme(urls, &tls) && tls;
}

bool scn_etcd_urls_valid(const char *urls, char *why, size_t whylen) {
  int n = 0;
  bool first_tls = false;
  const char *p = urls;
  while (*p) {
    size_t len = strcspn(p, ",");
    char url[300];
    if (len == 0 || len >= 256) {
      snprintf(why, whylen, "an endpoint of \"%.100s\" is empty or too long", urls);
      return false;
    }
    memcpy(url, p, len);
    url[len] = '\0';
    bool tls;
    const char *host = after_scheme(url, &tls);
    const char *colon = host ? strrchr(host, ':') : NULL;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    const char *slash = host ? strchr(host, '/') : NULL;
    if (!host || !colon || colon == host || !end || (*end && strcmp(end, "/") != 0) ||
        end == colon + 1 || port < 1 || port > 65535 || (slash && slash < colon)) {
      snprintf(why, whylen,
               "\"%.100s\" is not an endpoint of the form http://HOST:PORT or https://HOST:PORT",
               url);
      return false;
    }
    /* One set of TLS flags applies to every endpoint: a mixed list would send some requests
     * in the clear, unverified. */
    if (n == 0)
      first_tls = tls;
    else if (tls != first_tls) {
      snprintf(why, whylen, "\"%.100s\" mixes http:// and https:// endpoints (use one for all)",
               urls);
      return false;
    }
    if (++n > MAX_ENDPOINTS) {
      snprintf(why, whylen, "more than %d endpoints", MAX_ENDPOINTS);
      return false;
    }
    p += len;
    if (*p == ',')
      p++;
  }
  size_t len = strlen(urls);
  if (n > 0 && urls[len - 1] == ',') {
    snprintf(why, whylen, "\"%.100s\" ends with an empty endpoint", urls);
    return false;
  }
  if (n == 0)
    snprintf(why, whylen, "no endpoint given");
  return n > 0;
}

/* A copy of s, NULL when it is NULL or empty; *failed is set when memory ran out. */
static char *copy_or_null(const char *s, bool *failed) {
  if (!s || !*s)
    return NULL;
  char *c = strdup(s);
  if (!c)
    *failed = true;
  return c;
}

scn_etcd *scn_etcd_open(uv_loop_t *loop, const scn_etcd_options *opt) {
  const char *urls = opt->urls;
  /* libcurl counts these calls (it initialises once); its state lasts until the process ends,
   * as the daemon's OpenSSL does. */
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return NULL;
  scn_etcd *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->loop = loop;
  for (const char *p = urls; *p && e->nurls < MAX_ENDPOINTS;) {
    size_t len = strcspn(p, ",");
    if (len && len < sizeof e->urls[0]) {
      memcpy(e->urls[e->nurls], p, len);
      char *u = e->urls[e->nurls++];
      u[len] = '\0';
      if (u[len - 1] == '/')
        u[len - 1] = '\0';
    }
    p += len;
    if (*p == ',')
      p++;
  }
  bool failed = false;
  e->tls = scn_etcd_urls_tls(urls);
  if (e->tls) {
    e->ca = copy_or_null(opt->ca, &failed);
    e->cert = copy_or_null(opt->cert, &failed);
    e->key = copy_or_null(opt->key, &failed);
    e->share = curl_share_init();
    /* One loop thread uses it: no lock functions are needed. */
    failed |= !e->share || curl_share_setopt(e->share, CURLSHOPT_SHARE,
                                             CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK;
  }
  e->multi = curl_multi_init();
  if (!e->multi || e->nurls == 0 || failed) {
    if (e->multi)
      curl_multi_cleanup(e->multi);
    if (e->share)
      curl_share_cleanup(e->share);
    free(e->ca);
    free(e->cert);
    free(e->key);
    free(e);
    return NULL;
  }
  curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
  curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, on_timer);
  curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
  uv_timer_init(loop, &e->timer);
  e->timer.data = e;
  e->open_handles = 1;
  return e;
}

void scn_etcd_close(scn_etcd *e) {
  if (!e)
    return;
  e->closing = true;
  while (e->reqs)
    req_free(e->reqs);
  uv_timer_stop(&e->timer);
  uv_close((uv_handle_t *)&e->timer, on_handle_closed);
}

const scn_etcd_stats *scn_etcd_get_stats(const scn_etcd *e) { return &e->stats; }

const char *scn_etcd_endpoint(const scn_etcd *e) { return e->urls[e->current]; }

/* ---- encodings --------------------------------------------------------------------------- */

void scn_etcd_add_b64(scn_buf *out, const void *data, size_t len) {
  size_t n = BASE64_ENCODE_RAW_LENGTH(len);
  scn_buf_addc(out, '"');
  if (scn_buf_reserve(out, n + 1)) {
    base64_encode_raw((char *)out->data + out->len, len, data);
    out->len += n;
  }
  scn_buf_addc(out, '"');
}

bool scn_etcd_b64(const cJSON *item, char *out, size_t cap, size_t *len) {
  if (!cJSON_IsString(item) || cap == 0)
    return false;
  const char *s = item->valuestring;
  size_t slen = strlen(s);
  if (BASE64_DECODE_LENGTH(slen) > cap - 1)
    return false;
  struct base64_decode_ctx ctx;
  base64_decode_init(&ctx);
  size_t n = cap - 1;
  if (!base64_decode_update(&ctx, &n, (uint8_t *)out, slen, s) || !base64_decode_final(&ctx))
    return false;
  out[n] = '\0';
  if (len)
    *len = n;
  return true;
}

int64_t scn_etcd_int(const cJSON *obj, const char *key, int64_t def) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (cJSON_IsString(v)) {
    char *end;
    long long n = strtoll(v->valuestring, &end, 10);
    return *end || end == v->valuestring ? def : (int64_t)n;
  }
  if (cJSON_IsNumber(v))
    return (int64_t)v->valuedouble;
  return def;
}

void scn_etcd_prefix_end(const char *prefix, char *out, size_t cap) {
  snprintf(out, cap, "%s", prefix);
  size_t n = strlen(out);
  while (n > 0) {
    if ((unsigned char)out[n - 1] < 0xff) {
      out[n - 1]++;
      return;
    }
    out[--n] = '\0';
  }
}

/* The HTTP port: parsing (http-parser) and routing. GET /metrics, /healthz and /readyz for
 * operations; GET /ws, the WebSocket upgrade (ws_upgrade.c); anything else is a static file of
 * the staging view (http_files.c). HTTP/1.1 on the same loop as the protocol; a malformed
 * request gets 400 and a close. With --tls-cert it is HTTPS: a TLS session (tls.c) decrypts
 * what is read before the parser sees it and seals the responses. */
#include "net/http.h"

#include "net/http_internal.h"
#include "net/listen.h"
#include "net/tls.h"
#include "ops/log.h"
#include "ops/metrics.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_MAX_CONNS 64

struct scn_http_state {
  uv_tcp_t listener;
  bool listening;
  int conns;
  http_conn *list;
  scn_http_files files;
  http_parser_settings settings; /* the parser's callbacks, the same for every connection */
  /* One read buffer for every connection: reads are handled to completion before the next. */
  char read_buffer[16384];
};

static void on_http_closed(uv_handle_t *h) {
  http_conn *c = h->data;
  scn_http_state *http = c->srv->http;
  if (c->prev)
    c->prev->next = c->next;
  else
    http->list = c->next;
  if (c->next)
    c->next->prev = c->prev;
  scn_buf_free(&c->out);
  scn_buf_free(&c->upgrade_resp);
  scn_buf_free(&c->wire);
  scn_tls_free(c->tls);
  free(c);
  http->conns--;
}

/* What the TLS session has to send (an alert, close_notify), as far as the socket takes it. */
static void tls_send_last(http_conn *c) {
  if (!c->tls || c->writing)
    return;
  scn_buf last = {0};
  if (scn_tls_take(c->tls, &last) && last.len) {
    uv_buf_t b = uv_buf_init(last.data, (unsigned)last.len);
    uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
  }
  scn_buf_free(&last);
}

void scn_http_close_conn(http_conn *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  if (c->tls) {
    scn_tls_shutdown(c->tls);
    tls_send_last(c);
  }
  uv_close((uv_handle_t *)&c->tcp, on_http_closed);
}

static void on_http_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_http_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_http_written(uv_write_t *req, int status) {
  http_conn *c = req->data;
  c->writing = false;
  scn_buf *sent = c->tls ? &c->wire : &c->out;
  sent->len = 0;
  if (sent->cap > 1024 * 1024)
    scn_buf_free(sent); /* a large file went out: give the buffer back */
  if (status < 0 || c->close_after)
    scn_http_close_conn(c);
  else
    uv_read_start((uv_stream_t *)&c->tcp, on_http_alloc, on_http_read);
}

void scn_http_respond(http_conn *c, int status, const char *reason, const char *type,
                      const char *headers, const char *body, size_t len) {
  char head[512];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n", status,
                   reason, type, len, headers, c->close_after ? "Connection: close\r\n" : "");
  scn_buf_add(&c->out, head, (size_t)n < sizeof head ? (size_t)n : sizeof head - 1);
  if (c->parser.method != HTTP_HEAD)
    scn_buf_add(&c->out, body, len);
  c->srv->counters.http_requests++;
}

static void respond(http_conn *c, int status, const char *reason, const char *type,
                    const char *body, size_t len) {
  scn_http_respond(c, status, reason, type, "", body, len);
}

/* With TLS: the responses are sealed, and what goes out is the ciphertext (the handshake's
 * too). False when out of memory. */
static bool seal(http_conn *c) {
  if (c->out.len && scn_tls_established(c->tls)) {
    uv_buf_t piece = uv_buf_init(c->out.data, (unsigned)c->out.len);
    if (!scn_tls_seal(c->tls, &piece, 1, &c->wire))
      return false;
    c->out.len = 0;
  }
  return scn_tls_take(c->tls, &c->wire);
}

static void flush(http_conn *c) {
  if (c->writing || uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  if (c->out.failed || (c->tls && !seal(c))) {
    scn_http_close_conn(c);
    return;
  }
  scn_buf *send = c->tls ? &c->wire : &c->out;
  if (send->len == 0)
    return;
  uv_buf_t b = uv_buf_init(send->data, (unsigned)send->len);
  c->write_req.data = c;
  /* No reading while a response is in flight: a pipelined request must not grow out under
   * the write. */
  if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &b, 1, on_http_written) == 0) {
    c->writing = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
  } else {
    scn_http_close_conn(c);
  }
}

static int on_message_begin(http_parser *p) {
  http_conn *c = p->data;
  c->url_len = 0;
  c->url_too_long = false;
  memset(&c->hs, 0, sizeof c->hs);
  c->field_len = 0;
  c->field_done = false;
  c->value = NULL;
  c->upgrade_ok = false;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  http_conn *c = p->data;
  if (c->url_len + len >= HTTP_MAX_URL) {
    c->url_too_long = true;
    return 0;
  }
  memcpy(c->url + c->url_len, at, len);
  c->url_len += len;
  return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  http_conn *c = p->data;
  if (c->field_done) { /* a new header begins */
    c->field_len = 0;
    c->field_done = false;
  }
  for (size_t i = 0; i < len; i++)
    if (c->field_len < sizeof c->field - 1)
      c->field[c->field_len++] = (char)tolower((unsigned char)at[i]);
    else
      c->field_len = sizeof c->field; /* too long for any header we keep */
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  http_conn *c = p->data;
  if (!c->field_done) {
    c->field_done = true;
    c->value = NULL;
    if (c->field_len < sizeof c->field) {
      c->field[c->field_len] = '\0';
      scn_ws_handshake *hs = &c->hs;
      struct {
        const char *name;
        char *dst;
        size_t cap;
      } keep[] = {{"upgrade", hs->upgrade, sizeof hs->upgrade},
                  {"connection", hs->connection, sizeof hs->connection},
                  {"sec-websocket-key", hs->key, sizeof hs->key},
                  {"sec-websocket-version", hs->version, sizeof hs->version},
                  {"origin", hs->origin, sizeof hs->origin},
                  {"host", hs->host, sizeof hs->host}};
      for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (strcmp(c->field, keep[i].name) == 0) {
          c->value = keep[i].dst;
          c->value_cap = keep[i].cap;
          /* A repeated header adds to the list (Connection: a, then Connection: b). */
          size_t used = strlen(c->value);
          if (used && used + 2 < c->value_cap)
            strcat(c->value, ", ");
          else if (used)
            c->hs.too_long = true;
        }
    }
  }
  if (c->value) {
    size_t used = strlen(c->value);
    if (used + len >= c->value_cap) {
      c->hs.too_long = true;
    } else {
      memcpy(c->value + used, at, len);
      c->value[used + len] = '\0';
    }
  }
  return 0;
}

/* ---- routing ---------------------------------------------------------------------------- */

static void route(http_conn *c) {
  scn_server *srv = c->srv;
  c->url[c->url_len] = '\0';
  char *query = strchr(c->url, '?');
  if (query)
    *query = '\0';
  bool get = c->parser.method == HTTP_GET || c->parser.method == HTTP_HEAD;
  if (c->url_too_long) {
    respond(c, 414, "URI Too Long", "text/plain", "uri too long\n", 13);
  } else if (strcmp(c->url, "/ws") == 0) {
    scn_ws_upgrade_request(c);
  } else if (c->parser.upgrade) {
    c->close_after = true;
    respond(c, 400, "Bad Request", "text/plain", "upgrade only on /ws\n", 20);
  } else if (!get) {
    respond(c, 405, "Method Not Allowed", "text/plain", "only GET\n", 9);
  } else if (strcmp(c->url, "/metrics") == 0) {
    scn_buf page = {0};
    scn_metrics_render(srv, &page);
    if (page.failed)
      respond(c, 500, "Internal Server Error", "text/plain", "out of memory\n", 14);
    else
      respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", page.data, page.len);
    scn_buf_free(&page);
  } else if (strcmp(c->url, "/healthz") == 0) {
    respond(c, 200, "OK", "text/plain", "ok\n", 3);
  } else if (strcmp(c->url, "/readyz") == 0) {
    /* The port is bound only once the data is loaded, so "not ready" is "stopping". */
    const char *unready = srv->stopping ? "stopping" : scn_readiness_why(&srv->readiness);
    if (!unready) {
      respond(c, 200, "OK", "text/plain", "ready\n", 6);
    } else {
      char why[128];
      int n = snprintf(why, sizeof why, "%s\n", unready);
      respond(c, 503, "Service Unavailable", "text/plain", why, (size_t)n);
    }
  } else {
    scn_http_serve_file(&srv->http->files, c, c->url);
  }
}

static int on_message_complete(http_parser *p) {
  http_conn *c = p->data;
  if (!http_should_keep_alive(p) || c->srv->stopping)
    c->close_after = true;
  route(c);
  return 0;
}

static void on_http_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  http_conn *c = h->data;
  scn_http_state *http = c->srv->http;
  *buf = uv_buf_init(http->read_buffer, sizeof http->read_buffer);
}

/* Runs the parser over plaintext; false once nothing more is to be parsed on this connection
 * (a bad request answered, an upgrade handed over or refused). */
static bool http_input(http_conn *c, const char *data, size_t n) {
  size_t used = http_parser_execute(&c->parser, &c->srv->http->settings, data, n);
  if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || (used != n && !c->parser.upgrade)) {
    c->close_after = true;
    c->parser.method = HTTP_GET; /* send the 400 body */
    respond(c, 400, "Bad Request", "text/plain", "bad request\n", 12);
    uv_read_stop((uv_stream_t *)&c->tcp);
    return false;
  }
  if (c->parser.upgrade) {
    if (c->upgrade_ok) {
      scn_ws_hand_over(c, data + used, n - used);
      return false;
    }
    c->close_after = true; /* refused: the response is queued */
    uv_read_stop((uv_stream_t *)&c->tcp);
    return false;
  }
  return true;
}

static bool http_plain(void *ud, const char *data, size_t len) {
  http_conn *c = ud;
  return http_input(c, data, len) && !uv_is_closing((uv_handle_t *)&c->tcp);
}

static void on_http_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  http_conn *c = s->data;
  if (n == 0)
    return;
  if (n < 0) {
    scn_http_close_conn(c);
    return;
  }
  if (c->tls) {
    /* Everything read is parsed before the responses go, as on plain HTTP. */
    if (scn_tls_input(c->tls, buf->base, (size_t)n, http_plain, c) == SCN_TLS_FAILED) {
      char why[128];
      scn_log(SCN_LOG_DEBUG, "tls failed", "port=http error=\"%s\"",
              scn_tls_describe(c->tls, why, sizeof why));
      tls_send_last(c);
      scn_http_close_conn(c);
      return;
    }
  } else {
    http_input(c, buf->base, (size_t)n);
  }
  flush(c);
}

static void tls_expired(void *owner) {
  scn_log(SCN_LOG_DEBUG, "tls handshake timed out", "port=http");
  scn_http_close_conn(owner);
}

static void on_http_connection(uv_stream_t *listener, int status) {
  scn_server *srv = listener->data;
  scn_http_state *http = srv->http;
  if (status < 0)
    return;
  http_conn *c = calloc(1, sizeof *c);
  if (!c)
    return;
  c->srv = srv;
  uv_tcp_init(srv->loop, &c->tcp);
  c->tcp.data = c;
  http->conns++;
  c->next = http->list;
  if (http->list)
    http->list->prev = c;
  http->list = c;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 || http->conns > HTTP_MAX_CONNS) {
    scn_http_close_conn(c);
    return;
  }
  if (scn_tls_on(srv) && !(c->tls = scn_tls_new(srv, SCN_TLS_HTTP, tls_expired, c))) {
    scn_http_close_conn(c);
    return;
  }
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  uv_read_start((uv_stream_t *)&c->tcp, on_http_alloc, on_http_read);
}

int scn_http_listen(scn_server *srv) {
  if (srv->cfg.http.off)
    return 0;
  scn_http_state *http = calloc(1, sizeof *http);
  if (!http) {
    fprintf(stderr, "scened: out of memory\n");
    return -1;
  }
  srv->http = http;
  http->settings = (http_parser_settings){.on_message_begin = on_message_begin,
                                          .on_url = on_url,
                                          .on_header_field = on_header_field,
                                          .on_header_value = on_header_value,
                                          .on_message_complete = on_message_complete};
  scn_http_files_init(&http->files, &srv->cfg);
  char extra[4200];
  snprintf(extra, sizeof extra, "paths=\"/ /ws /metrics /healthz /readyz\" www=\"%s\" tls=%s",
           http->files.dir, scn_tls_on(srv) ? "on" : "off");
  http->listener.data = srv;
  if (scn_listen(srv->loop, &http->listener, &srv->cfg.http, 128, on_http_connection, "http",
                 "http", extra) != 0)
    return -1;
  http->listening = true;
  return 0;
}

int scn_http_port(const scn_server *srv) {
  return srv->http && srv->http->listening ? scn_listen_port(&srv->http->listener) : 0;
}

void scn_http_close(scn_server *srv, bool all) {
  scn_http_state *http = srv->http;
  if (!http)
    return;
  if (http->listening && !uv_is_closing((uv_handle_t *)&http->listener))
    uv_close((uv_handle_t *)&http->listener, NULL);
  http->listening = false;
  /* Idle keep-alive connections close now; one with a response in flight after it. */
  for (http_conn *c = http->list; c; c = c->next)
    if (all || !c->writing)
      scn_http_close_conn(c);
    else
      c->close_after = true;
}

void scn_http_free(scn_server *srv) {
  free(srv->http);
  srv->http = NULL;
}

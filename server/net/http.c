/* The HTTP port: parsing (http-parser) and routing. GET /metrics, /healthz and /readyz for
 * operations; GET /ws, the WebSocket upgrade (ws_upgrade.c); anything else is a static file of
 * the staging view (http_files.c). HTTP/1.1 on the same loop as the protocol; a malformed
 * request gets 400 and a close. */
#include "net/http.h"

#include "net/http_internal.h"
#include "net/listen.h"
#include "ops/log.h"
#include "ops/metrics.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_MAX_CONNS 64

static struct {
  uv_tcp_t listener;
  bool listening;
  int conns;
  http_conn *list;
} http;

static http_parser_settings settings;

static void on_http_closed(uv_handle_t *h) {
  http_conn *c = h->data;
  if (c->prev)
    c->prev->next = c->next;
  else
    http.list = c->next;
  if (c->next)
    c->next->prev = c->prev;
  scn_buf_free(&c->out);
  scn_buf_free(&c->upgrade_resp);
  free(c);
  http.conns--;
}

void scn_http_close_conn(http_conn *c) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, on_http_closed);
}

static void on_http_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_http_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_http_written(uv_write_t *req, int status) {
  http_conn *c = req->data;
  c->writing = false;
  c->out.len = 0;
  if (c->out.cap > 1024 * 1024)
    scn_buf_free(&c->out); /* a large file went out: give the buffer back */
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

static void flush(http_conn *c) {
  if (c->writing || c->out.len == 0 || uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  if (c->out.failed) {
    scn_http_close_conn(c);
    return;
  }
  uv_buf_t b = uv_buf_init(c->out.data, (unsigned)c->out.len);
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
    if (!srv->stopping && !srv->not_ready) {
      respond(c, 200, "OK", "text/plain", "ready\n", 6);
    } else {
      char why[128];
      int n = snprintf(why, sizeof why, "%s\n", srv->stopping ? "stopping" : srv->not_ready);
      respond(c, 503, "Service Unavailable", "text/plain", why, (size_t)n);
    }
  } else {
    scn_http_serve_file(c, c->url);
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
  (void)h, (void)suggested;
  static char chunk[16384];
  *buf = uv_buf_init(chunk, sizeof chunk);
}

static void on_http_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  http_conn *c = s->data;
  if (n == 0)
    return;
  if (n < 0) {
    scn_http_close_conn(c);
    return;
  }
  size_t used = http_parser_execute(&c->parser, &settings, buf->base, (size_t)n);
  if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || (used != (size_t)n && !c->parser.upgrade)) {
    c->close_after = true;
    c->parser.method = HTTP_GET; /* send the 400 body */
    respond(c, 400, "Bad Request", "text/plain", "bad request\n", 12);
    uv_read_stop(s);
  } else if (c->parser.upgrade) {
    if (c->upgrade_ok) {
      scn_ws_hand_over(c, buf->base + used, (size_t)n - used);
      return;
    }
    c->close_after = true; /* refused: the response is queued */
    uv_read_stop(s);
  }
  flush(c);
}

static void on_http_connection(uv_stream_t *listener, int status) {
  scn_server *srv = listener->data;
  if (status < 0)
    return;
  http_conn *c = calloc(1, sizeof *c);
  if (!c)
    return;
  c->srv = srv;
  uv_tcp_init(srv->loop, &c->tcp);
  c->tcp.data = c;
  http.conns++;
  c->next = http.list;
  if (http.list)
    http.list->prev = c;
  http.list = c;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 || http.conns > HTTP_MAX_CONNS) {
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
  settings.on_message_begin = on_message_begin;
  settings.on_url = on_url;
  settings.on_header_field = on_header_field;
  settings.on_header_value = on_header_value;
  settings.on_message_complete = on_message_complete;
  scn_http_files_init(&srv->cfg);
  char extra[4200];
  snprintf(extra, sizeof extra, "paths=\"/ /ws /metrics /healthz /readyz\" www=\"%s\"",
           scn_http_files_dir());
  http.listener.data = srv;
  if (scn_listen(srv->loop, &http.listener, &srv->cfg.http, 128, on_http_connection, "http", "http",
                 extra) != 0)
    return -1;
  http.listening = true;
  return 0;
}

int scn_http_port(void) { return http.listening ? scn_listen_port(&http.listener) : 0; }

void scn_http_close(bool all) {
  if (http.listening && !uv_is_closing((uv_handle_t *)&http.listener))
    uv_close((uv_handle_t *)&http.listener, NULL);
  http.listening = false;
  /* Idle keep-alive connections close now; one with a response in flight after it. */
  for (http_conn *c = http.list; c; c = c->next)
    if (all || !c->writing)
      scn_http_close_conn(c);
    else
      c->close_after = true;
}

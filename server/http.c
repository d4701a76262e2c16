/* The operations port: GET /metrics, /healthz and /readyz over HTTP/1.1, on the same loop as
 * the protocol. Requests are parsed by http-parser; a malformed request gets 400 and a close. */
#include "metrics.h"
#include "server.h"

#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_MAX_CONNS 64
#define HTTP_MAX_URL 2048

typedef struct http_conn {
  uv_tcp_t tcp;
  scn_server *srv;
  http_parser parser;
  char url[HTTP_MAX_URL];
  size_t url_len;
  bool url_too_long;
  bool method_ok;
  scn_buf out;
  uv_write_t write_req;
  bool writing, close_after;
  struct http_conn *next;
} http_conn;

static struct {
  uv_tcp_t listener;
  bool listening;
  int conns;
} http;

static http_parser_settings settings;

static void on_http_closed(uv_handle_t *h) {
  http_conn *c = h->data;
  scn_buf_free(&c->out);
  free(c);
  http.conns--;
}

static void http_close(http_conn *c) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, on_http_closed);
}

static void on_http_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_http_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_http_written(uv_write_t *req, int status) {
  http_conn *c = req->data;
  c->writing = false;
  c->out.len = 0;
  if (status < 0 || c->close_after)
    http_close(c);
  else
    uv_read_start((uv_stream_t *)&c->tcp, on_http_alloc, on_http_read);
}

static void respond(http_conn *c, int status, const char *reason, const char *type,
                    const char *body, size_t len) {
  char head[256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status,
                   reason, type, len, c->close_after ? "Connection: close\r\n" : "");
  scn_buf_add(&c->out, head, (size_t)n);
  if (c->parser.method != HTTP_HEAD)
    scn_buf_add(&c->out, body, len);
  c->srv->counters.http_requests++;
}

static void flush(http_conn *c) {
  if (c->writing || c->out.len == 0 || uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  if (c->out.failed) {
    http_close(c);
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
    http_close(c);
  }
}

static int on_message_begin(http_parser *p) {
  http_conn *c = p->data;
  c->url_len = 0;
  c->url_too_long = false;
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

static void route(http_conn *c) {
  scn_server *srv = c->srv;
  c->url[c->url_len] = '\0';
  char *query = strchr(c->url, '?');
  if (query)
    *query = '\0';
  bool get = c->parser.method == HTTP_GET || c->parser.method == HTTP_HEAD;
  if (c->url_too_long) {
    respond(c, 414, "URI Too Long", "text/plain", "uri too long\n", 13);
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
    if (srv->ready && !srv->stopping)
      respond(c, 200, "OK", "text/plain", "ready\n", 6);
    else
      respond(c, 503, "Service Unavailable", "text/plain",
              srv->stopping ? "stopping\n" : "loading\n", srv->stopping ? 9 : 8);
  } else {
    respond(c, 404, "Not Found", "text/plain", "not found\n", 10);
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
    http_close(c);
    return;
  }
  size_t used = http_parser_execute(&c->parser, &settings, buf->base, (size_t)n);
  if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || (used != (size_t)n && !c->parser.upgrade)) {
    c->close_after = true;
    c->parser.method = HTTP_GET; /* send the 400 body */
    respond(c, 400, "Bad Request", "text/plain", "bad request\n", 12);
    uv_read_stop(s);
  } else if (c->parser.upgrade) {
    c->close_after = true;
    respond(c, 400, "Bad Request", "text/plain", "upgrade not supported\n", 22);
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
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 || http.conns > HTTP_MAX_CONNS) {
    http_close(c);
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
  settings.on_message_complete = on_message_complete;
  struct sockaddr_storage addr;
  int rc = uv_ip4_addr(srv->cfg.http.host, srv->cfg.http.port, (struct sockaddr_in *)&addr);
  if (rc != 0)
    rc = uv_ip6_addr(srv->cfg.http.host, srv->cfg.http.port, (struct sockaddr_in6 *)&addr);
  if (rc != 0) {
    fprintf(stderr, "scened: invalid http address \"%s\"\n", srv->cfg.http.host);
    return -1;
  }
  uv_tcp_init(srv->loop, &http.listener);
  http.listener.data = srv;
  if ((rc = uv_tcp_bind(&http.listener, (struct sockaddr *)&addr, 0)) != 0 ||
      (rc = uv_listen((uv_stream_t *)&http.listener, 128, on_http_connection)) != 0) {
    fprintf(stderr, "scened: cannot listen for http on %s:%d: %s\n", srv->cfg.http.host,
            srv->cfg.http.port, uv_strerror(rc));
    return -1;
  }
  http.listening = true;
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&http.listener, (struct sockaddr *)&bound, &len);
  bool v6 = bound.ss_family == AF_INET6;
  int port = ntohs(v6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                      : ((struct sockaddr_in *)&bound)->sin_port);
  char where[128];
  snprintf(where, sizeof where, "http on %s%s%s:%d", v6 ? "[" : "", srv->cfg.http.host,
           v6 ? "]" : "", port);
  scn_log(SCN_LOG_NOTICE, where, "paths=\"/metrics /healthz /readyz\"");
  return 0;
}

void scn_http_close(scn_server *srv) {
  (void)srv;
  if (http.listening && !uv_is_closing((uv_handle_t *)&http.listener))
    uv_close((uv_handle_t *)&http.listener, NULL);
  http.listening = false;
}

/* The HTTP port: GET /metrics, /healthz and /readyz for operations, the staging view's static
 * files (from --www, by default the www directory next to the executable), and GET /ws, the
 * WebSocket upgrade (ws.c). HTTP/1.1 on the same loop as the protocol; requests are parsed
 * by http-parser; a malformed request gets 400 and a close. */
#include "ops/metrics.h"
#include "server.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define HTTP_MAX_CONNS 64
#define HTTP_MAX_URL 2048
#define HTTP_MAX_FILE (64 * 1024 * 1024)

typedef struct http_conn {
  uv_tcp_t tcp;
  scn_server *srv;
  http_parser parser;
  char url[HTTP_MAX_URL];
  size_t url_len;
  bool url_too_long;
  /* headers the WebSocket handshake needs */
  char field[32];
  size_t field_len;
  bool field_done; /* the current header's name is complete: value bytes follow */
  char *value;     /* where the current header's value goes (NULL: not kept) */
  size_t value_cap;
  scn_ws_handshake hs;
  bool upgrade_ok; /* GET /ws with an accepted handshake: hand the socket to ws.c */
  scn_buf upgrade_resp;
  scn_buf out;
  uv_write_t write_req;
  bool writing, close_after;
  struct http_conn *prev, *next; /* every open HTTP connection */
} http_conn;

static struct {
  uv_tcp_t listener;
  bool listening;
  int conns;
  http_conn *list;
  char www[PATH_MAX]; /* real path of the staging view's directory; empty: none */
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
  if (c->out.cap > 1024 * 1024)
    scn_buf_free(&c->out); /* a large file went out: give the buffer back */
  if (status < 0 || c->close_after)
    http_close(c);
  else
    uv_read_start((uv_stream_t *)&c->tcp, on_http_alloc, on_http_read);
}

static void respond_ex(http_conn *c, int status, const char *reason, const char *type,
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
  respond_ex(c, status, reason, type, "", body, len);
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

/* ---- the staging view's files ------------------------------------------------------------ */

static const char *content_type(const char *path) {
  static const struct {
    const char *ext, *type;
  } types[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
      {".wasm", "application/wasm"},
  };
  const char *dot = strrchr(path, '.');
  const char *slash = strrchr(path, '/');
  if (dot && (!slash || dot > slash))
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
      if (strcasecmp(dot, types[i].ext) == 0)
        return types[i].type;
  return "application/octet-stream";
}

/* The URL path, percent-decoded, as a path under the www directory; false when it is not
 * one (a NUL, a backslash, a "." or ".." segment). */
static bool url_to_relative(const char *url, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = url; *p; p++) {
    char ch = *p;
    if (ch == '%') {
      int hi = scn_hex_digit(p[1]), lo = hi < 0 ? -1 : scn_hex_digit(p[2]);
      if (lo < 0)
        return false;
      ch = (char)(hi * 16 + lo);
      p += 2;
    }
    if (ch == '\0' || ch == '\\' || n + 1 >= cap)
      return false;
    out[n++] = ch;
  }
  out[n] = '\0';
  if (out[0] != '/')
    return false;
  for (const char *seg = out; seg; seg = strchr(seg + 1, '/')) {
    const char *s = seg + 1, *e = strchr(s, '/');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
      return false;
  }
  return true;
}

static void not_found(http_conn *c) {
  respond(c, 404, "Not Found", "text/plain", "not found\n", 10);
}

/* Regular files inside the www directory only: the resolved path (symbolic links followed)
 * must still be under it. */
static void serve_file(http_conn *c, const char *url) {
  char rel[HTTP_MAX_URL + 16], full[PATH_MAX + HTTP_MAX_URL + 16], real[PATH_MAX];
  if (!http.www[0] || !url_to_relative(url, rel, sizeof rel - 16)) {
    not_found(c);
    return;
  }
  if (rel[strlen(rel) - 1] == '/')
    strcat(rel, "index.html");
  snprintf(full, sizeof full, "%s%s", http.www, rel);
  size_t root = strlen(http.www);
  if (!realpath(full, real) || strncmp(real, http.www, root) != 0 || real[root] != '/') {
    not_found(c);
    return;
  }
  int fd = open(real, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > HTTP_MAX_FILE) {
    if (fd >= 0)
      close(fd);
    not_found(c);
    return;
  }
  char *body = malloc(st.st_size ? (size_t)st.st_size : 1);
  size_t got = 0;
  while (body && got < (size_t)st.st_size) {
    ssize_t r = read(fd, body + got, (size_t)st.st_size - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  if (!body || got != (size_t)st.st_size)
    respond(c, 500, "Internal Server Error", "text/plain", "cannot read the file\n", 21);
  else
    respond_ex(c, 200, "OK", content_type(real),
               "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n", body, got);
  free(body);
}

/* ---- routing ------------------------------------------------------------------------------ */

static void websocket(http_conn *c) {
  const char *why = "expected a WebSocket handshake (GET with Upgrade: websocket)";
  int status = 400;
  c->close_after = true;
  bool get = c->parser.method == HTTP_GET;
  bool v11 = c->parser.http_major > 1 || (c->parser.http_major == 1 && c->parser.http_minor >= 1);
  if (get && v11 && c->parser.upgrade) {
    c->upgrade_resp.len = 0;
    status = scn_ws_check(c->srv, &c->hs, &c->upgrade_resp, &why);
    if (status == 0 && !c->upgrade_resp.failed) {
      c->upgrade_ok = true;
      c->srv->counters.http_requests++;
      return;
    }
    if (status == 0) {
      status = 500;
      why = "out of memory";
    }
  }
  char body[160];
  int n = snprintf(body, sizeof body, "bad websocket handshake: %s\n", why);
  respond_ex(c, status,
             status == 403   ? "Forbidden"
             : status == 500 ? "Internal Server Error"
                             : "Bad Request",
             "text/plain", "Sec-WebSocket-Version: 13\r\n", body, (size_t)n);
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
  } else if (strcmp(c->url, "/ws") == 0) {
    websocket(c);
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
    if (!srv->stopping)
      respond(c, 200, "OK", "text/plain", "ready\n", 6);
    else
      respond(c, 503, "Service Unavailable", "text/plain", "stopping\n", 9);
  } else {
    serve_file(c, c->url);
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

/* The upgrade was accepted: the socket becomes a WebSocket connection (ws.c), which takes a
 * duplicate of the descriptor and sends the 101 response after anything still unsent here;
 * this HTTP connection then closes its own descriptor. */
static void hand_over(http_conn *c, const char *rest, size_t rest_len) {
  uv_os_fd_t fd;
  int dup_fd = -1;
  uv_read_stop((uv_stream_t *)&c->tcp);
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
    dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  scn_buf_add(&c->out, c->upgrade_resp.data, c->upgrade_resp.len);
  if (dup_fd < 0 || c->out.failed ||
      scn_ws_accept(c->srv, dup_fd, c->out.data, c->out.len, rest, rest_len) != 0) {
    if (dup_fd >= 0 && c->out.failed)
      close(dup_fd);
    scn_log(SCN_LOG_WARN, "websocket upgrade failed", "error=%s",
            dup_fd < 0 ? strerror(errno) : "out of memory");
  }
  c->out.len = 0;
  http_close(c);
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
    if (c->upgrade_ok) {
      hand_over(c, buf->base + used, (size_t)n - used);
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
    http_close(c);
    return;
  }
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  uv_read_start((uv_stream_t *)&c->tcp, on_http_alloc, on_http_read);
}

/* --www, or the www directory next to the executable. */
static void find_www(const scn_server *srv) {
  char dir[PATH_MAX];
  http.www[0] = '\0';
  if (srv->cfg.www[0]) {
    snprintf(dir, sizeof dir, "%s", srv->cfg.www);
  } else {
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
      return;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash || (size_t)(slash - dir) + 5 >= sizeof dir)
      return;
    strcpy(slash + 1, "www");
  }
  struct stat st;
  if (!realpath(dir, http.www) || stat(http.www, &st) != 0 || !S_ISDIR(st.st_mode)) {
    http.www[0] = '\0';
    scn_log(SCN_LOG_INFO, "staging view not installed: its files are not there", "www=\"%s\"", dir);
  }
}

int scn_http_listen(scn_server *srv) {
  if (srv->cfg.http.off)
    return 0;
  settings.on_message_begin = on_message_begin;
  settings.on_url = on_url;
  settings.on_header_field = on_header_field;
  settings.on_header_value = on_header_value;
  settings.on_message_complete = on_message_complete;
  find_www(srv);
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
  scn_log(SCN_LOG_NOTICE, where, "paths=\"/ /ws /metrics /healthz /readyz\" www=\"%s\"", http.www);
  return 0;
}

void scn_http_close(scn_server *srv, bool all) {
  (void)srv;
  if (http.listening && !uv_is_closing((uv_handle_t *)&http.listener))
    uv_close((uv_handle_t *)&http.listener, NULL);
  http.listening = false;
  /* Idle keep-alive connections close now; one with a response in flight after it. */
  for (http_conn *c = http.list; c; c = c->next)
    if (all || !c->writing)
      http_close(c);
    else
      c->close_after = true;
}

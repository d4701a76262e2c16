/* GET /ws on the HTTP port: the WebSocket handshake (RFC 6455, section 4.2) and the hand-over
 * of the socket to a WebSocket connection (ws.c). */
#include "net/http_internal.h"
#include "net/ws.h"
#include "ops/log.h"

#include <errno.h>
#include <fcntl.h>
#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static void trim_copy(char *dst, size_t cap, const char *src) {
  while (*src == ' ' || *src == '\t')
    src++;
  size_t n = strnlen(src, cap - 1);
  while (n && (src[n - 1] == ' ' || src[n - 1] == '\t'))
    n--;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* True when the comma-separated list holds token (case-insensitive). */
static bool has_token(const char *list, const char *token) {
  size_t tl = strlen(token);
  const char *p = list;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == ',')
      p++;
    const char *s = p;
    while (*p && *p != ',')
      p++;
    const char *e = p;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
      e--;
    if ((size_t)(e - s) == tl && strncasecmp(s, token, tl) == 0)
      return true;
  }
  return false;
}

/* Browsers send Origin; a page from another site must not drive the daemon through the
 * browser of someone on this machine. Allowed: no Origin (not a browser), the daemon's own
 * page (same host and port), or an origin listed in --ws-origins ("*": any). */
static bool origin_allowed(const scn_server *srv, const char *origin, const char *host) {
  if (!origin[0])
    return true;
  const char *list = srv->cfg.ws_origins;
  if (has_token(list, "*") || has_token(list, origin))
    return true;
  const char *rest = NULL;
  if (strncasecmp(origin, "http://", 7) == 0)
    rest = origin + 7;
  else if (strncasecmp(origin, "https://", 8) == 0)
    rest = origin + 8;
  return rest && host[0] && strcasecmp(rest, host) == 0;
}

/* Checks an upgrade request's headers. Returns 0 and the 101 response in *resp, or the HTTP
 * status to refuse it with (400, 403) and a reason. */
static int check(const scn_server *srv, const scn_ws_handshake *hs, scn_buf *resp,
                 const char **why) {
  char key[64], version[16], host[256];
  trim_copy(key, sizeof key, hs->key);
  trim_copy(version, sizeof version, hs->version);
  trim_copy(host, sizeof host, hs->host);
  if (hs->too_long) {
    *why = "a handshake header is too long";
    return 400;
  }
  if (!has_token(hs->upgrade, "websocket")) {
    *why = "expected \"Upgrade: websocket\"";
    return 400;
  }
  if (!has_token(hs->connection, "upgrade")) {
    *why = "expected \"Connection: Upgrade\"";
    return 400;
  }
  if (strcmp(version, "13") != 0) {
    *why = "unsupported Sec-WebSocket-Version (this server speaks 13)";
    return 400;
  }
  if (!host[0]) {
    *why = "missing Host header";
    return 400;
  }
  /* The key is 16 random bytes in base64: 24 characters. */
  struct base64_decode_ctx b64;
  uint8_t raw[BASE64_DECODE_LENGTH(sizeof key)];
  size_t raw_len = sizeof raw;
  base64_decode_init(&b64);
  if (strlen(key) != 24 || !base64_decode_update(&b64, &raw_len, raw, strlen(key), key) ||
      !base64_decode_final(&b64) || raw_len != 16) {
    *why = "Sec-WebSocket-Key must be 16 bytes in base64";
    return 400;
  }
  if (!origin_allowed(srv, hs->origin, host)) {
    *why = "origin not allowed (see --ws-origins)";
    return 403;
  }
  struct sha1_ctx sha;
  uint8_t digest[SHA1_DIGEST_SIZE];
  sha1_init(&sha);
  sha1_update(&sha, strlen(key), (const uint8_t *)key);
  sha1_update(&sha, strlen(WS_GUID), (const uint8_t *)WS_GUID);
  sha1_digest(&sha, sizeof digest, digest);
  char accept[BASE64_ENCODE_RAW_LENGTH(SHA1_DIGEST_SIZE) + 1];
  base64_encode_raw(accept, sizeof digest, digest);
  accept[BASE64_ENCODE_RAW_LENGTH(SHA1_DIGEST_SIZE)] = '\0';
  scn_buf_adds(resp, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: ");
  scn_buf_adds(resp, accept);
  scn_buf_adds(resp, "\r\n\r\n");
  return 0;
}

void scn_ws_upgrade_request(http_conn *c) {
  const char *why = "expected a WebSocket handshake (GET with Upgrade: websocket)";
  int status = 400;
  c->close_after = true;
  bool get = c->parser.method == HTTP_GET;
  bool v11 = c->parser.http_major > 1 || (c->parser.http_major == 1 && c->parser.http_minor >= 1);
  if (get && v11 && c->parser.upgrade) {
    c->upgrade_resp.len = 0;
    status = check(c->srv, &c->hs, &c->upgrade_resp, &why);
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
  scn_http_respond(c, status,
                   status == 403   ? "Forbidden"
                   : status == 500 ? "Internal Server Error"
                                   : "Bad Request",
                   "text/plain", "Sec-WebSocket-Version: 13\r\n", body, (size_t)n);
}

/* The upgrade was accepted: the socket becomes a WebSocket connection (ws.c), which takes a
 * duplicate of the descriptor and sends the 101 response after anything still unsent here;
 * this HTTP connection then closes its own descriptor. */
void scn_ws_hand_over(http_conn *c, const char *rest, size_t rest_len) {
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
  scn_http_close_conn(c);
}

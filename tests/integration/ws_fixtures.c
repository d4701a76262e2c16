#define _GNU_SOURCE /* memmem */
#include "ws_fixtures.h"

#include "clock.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static bool read_more(t_ws *w, long deadline) {
  long left = deadline - t_now_ms();
  if (left <= 0)
    return false;
  struct pollfd p = {.fd = w->fd, .events = POLLIN};
  if (poll(&p, 1, (int)left) <= 0)
    return false;
  if (w->cap - w->len < 65536) {
    size_t cap = w->cap ? w->cap * 2 : 1 << 17;
    uint8_t *b = realloc(w->buf, cap);
    if (!b)
      return false;
    w->buf = b, w->cap = cap;
  }
  ssize_t n = recv(w->fd, w->buf + w->len, w->cap - w->len, 0);
  if (n <= 0)
    return false;
  w->len += (size_t)n;
  return true;
}

static bool send_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n <= 0)
      return false;
    p += n, len -= (size_t)n;
  }
  return true;
}

bool t_ws_connect(t_ws *w, int http_port) {
  memset(w, 0, sizeof *w);
  w->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (w->fd < 0 || connect(w->fd, (struct sockaddr *)&a, sizeof a) != 0)
    return false;
  char req[256];
  int n = snprintf(req, sizeof req,
                   "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n",
                   http_port);
  if (!send_all(w->fd, req, (size_t)n))
    return false;
  long deadline = t_now_ms() + 5000;
  uint8_t *end = NULL;
  while (!(end = w->len ? memmem(w->buf, w->len, "\r\n\r\n", 4) : NULL))
    if (!read_more(w, deadline))
      return false;
  if (w->len < 12 || memcmp(w->buf, "HTTP/1.1 101", 12) != 0)
    return false;
  size_t head = (size_t)(end + 4 - w->buf);
  memmove(w->buf, w->buf + head, w->len - head);
  w->len -= head;
  return true;
}

void t_ws_close(t_ws *w) {
  if (w->fd >= 0)
    close(w->fd);
  free(w->buf);
  memset(w, 0, sizeof *w);
  w->fd = -1;
}

bool t_ws_send_text(t_ws *w, const char *text) {
  static const uint8_t mask[4] = {0x12, 0x9a, 0x5c, 0xe1};
  size_t len = strlen(text), n = 0;
  uint8_t *f = malloc(len + 14);
  if (!f)
    return false;
  f[n++] = 0x81;
  if (len < 126) {
    f[n++] = (uint8_t)(0x80 | len);
  } else if (len < 65536) {
    f[n++] = 0x80 | 126, f[n++] = (uint8_t)(len >> 8), f[n++] = (uint8_t)len;
  } else {
    f[n++] = 0x80 | 127;
    for (int i = 7; i >= 0; i--)
      f[n++] = (uint8_t)((uint64_t)len >> (8 * i));
  }
  memcpy(f + n, mask, 4);
  n += 4;
  for (size_t i = 0; i < len; i++)
    f[n + i] = (uint8_t)text[i] ^ mask[i % 4];
  bool ok = send_all(w->fd, f, n + len);
  free(f);
  return ok;
}

bool t_ws_recv(t_ws *w, t_ws_msg *m, long timeout_ms) {
  long deadline = t_now_ms() + timeout_ms;
  memset(m, 0, sizeof *m);
  for (;;) {
    if (w->len >= 2) {
      uint8_t op = w->buf[0] & 0x0f;
      uint64_t len = w->buf[1] & 0x7f;
      size_t head = 2;
      if (w->buf[1] & 0x80)
        return false; /* a daemon never masks */
      if (len == 126 && w->len >= 4)
        len = (uint64_t)w->buf[2] << 8 | w->buf[3], head = 4;
      else if (len == 127 && w->len >= 10) {
        len = 0;
        for (int i = 0; i < 8; i++)
          len = len << 8 | w->buf[2 + i];
        head = 10;
      } else if (len >= 126)
        head = 0; /* the length is not all here yet */
      if (head && w->len >= head + len) {
        bool fin = w->buf[0] & 0x80;
        if (!fin || op == 0)
          return false; /* the daemon sends each message in one frame */
        if (op == 1 || op == 2) {
          m->opcode = op;
          m->len = (size_t)len;
          m->data = malloc(m->len + 1);
          if (!m->data)
            return false;
          memcpy(m->data, w->buf + head, m->len);
          m->data[m->len] = 0;
        }
        memmove(w->buf, w->buf + head + len, w->len - head - len);
        w->len -= head + len;
        if (op == 8)
          return false; /* closed */
        if (m->data)
          return true;
        continue;
      }
    }
    if (!read_more(w, deadline))
      return false;
  }
}

cJSON *t_ws_call(t_ws *w, const char *request) {
  if (!t_ws_send_text(w, request))
    return NULL;
  long deadline = t_now_ms() + 10000;
  t_ws_msg m;
  while (t_now_ms() < deadline && t_ws_recv(w, &m, deadline - t_now_ms())) {
    cJSON *j = m.opcode == 1 ? cJSON_Parse((const char *)m.data) : NULL;
    free(m.data);
    if (j && cJSON_GetObjectItemCaseSensitive(j, "ok"))
      return j;
    cJSON_Delete(j);
  }
  return NULL;
}

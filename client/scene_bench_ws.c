/* A minimal WebSocket client for scene-bench (see scene_bench_ws.h). */
#include "scene_bench_ws.h"
#include "b64.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define MAX_ANSWER 4096

static bool random_bytes(void *out, size_t n) { return getrandom(out, n, 0) == (ssize_t)n; }

static int tcp_connect(const char *host, int port, char *err, size_t errlen) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    snprintf(err, errlen, "cannot connect to %s:%d: %s", host, port, strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static bool send_all(int fd, const uint8_t *p, size_t len) {
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      if (poll(&pfd, 1, 10000) <= 0)
        return false;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    len -= (size_t)n;
  }
  return true;
}

/* The answer's header block, up to its empty line, read a byte at a time (10 s at most). */
static bool read_answer(int fd, char *out, size_t cap) {
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t got = recv(fd, out + n, 1, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    out[++n] = '\0';
    if (n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0) {
      tv.tv_sec = 0;
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      return true;
    }
  }
  return false;
}

/* The value of header name in the answer (copied to out), false when it has none. */
static bool header_value(const char *answer, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  for (const char *line = strstr(answer, "\r\n"); line; line = strstr(line, "\r\n")) {
    line += 2;
    if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
      const char *v = line + nl + 1;
      while (*v == ' ' || *v == '\t')
        v++;
      size_t len = strcspn(v, "\r");
      while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
      if (len >= cap)
        return false;
      memcpy(out, v, len);
      out[len] = '\0';
      return true;
    }
  }
  return false;
}

int ws_connect(const char *host, int port, const char *path, char *err, size_t errlen) {
  uint8_t raw[16];
  char key[SCN_B64_LEN(16) + 1], request[512];
  if (!random_bytes(raw, sizeof raw)) {
    snprintf(err, errlen, "no random bytes for Sec-WebSocket-Key");
    return -1;
  }
  scn_b64_encode(key, raw, sizeof raw);
  key[SCN_B64_LEN(16)] = '\0';
  int fd = tcp_connect(host, port, err, errlen);
  if (fd < 0)
    return -1;
  int n = snprintf(request, sizeof request,
                   "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n",
                   path, host, port, key);
  char answer[MAX_ANSWER], accept[64];
  if (n < 0 || (size_t)n >= sizeof request || !send_all(fd, (const uint8_t *)request, (size_t)n) ||
      !read_answer(fd, answer, sizeof answer)) {
    snprintf(err, errlen, "%s:%d%s: no answer to the WebSocket handshake", host, port, path);
    close(fd);
    return -1;
  }
  if (strncmp(answer, "HTTP/1.1 101", 12) != 0) {
    snprintf(err, errlen, "%s:%d%s refused the WebSocket handshake: %.*s", host, port, path,
             (int)strcspn(answer, "\r"), answer);
    close(fd);
    return -1;
  }
  /* Accept: base64 of the SHA-1 of the key and the GUID */
  char keyed[sizeof key + sizeof WS_GUID];
  snprintf(keyed, sizeof keyed, "%s%s", key, WS_GUID);
  uint8_t digest[EVP_MAX_MD_SIZE];
  unsigned int dlen = 0;
  char want[SCN_B64_LEN(EVP_MAX_MD_SIZE) + 1];
  if (!EVP_Digest(keyed, strlen(keyed), digest, &dlen, EVP_sha1(), NULL) || dlen != 20) {
    snprintf(err, errlen, "SHA-1 failed");
    close(fd);
    return -1;
  }
  scn_b64_encode(want, digest, dlen);
  want[SCN_B64_LEN(20)] = '\0';
  if (!header_value(answer, "Sec-WebSocket-Accept", accept, sizeof accept) ||
      strcmp(accept, want) != 0) {
    snprintf(err, errlen, "%s:%d%s: Sec-WebSocket-Accept missing or wrong", host, port, path);
    close(fd);
    return -1;
  }
  return fd;
}

bool ws_send(int fd, uint8_t opcode, const void *data, size_t len) {
  uint8_t *frame = malloc(len + 14);
  if (!frame)
    return false;
  size_t h = 0;
  frame[h++] = (uint8_t)(0x80 | opcode);
  if (len < 126) {
    frame[h++] = (uint8_t)(0x80 | len);
  } else if (len < 65536) {
    frame[h++] = 0x80 | 126;
    frame[h++] = (uint8_t)(len >> 8);
    frame[h++] = (uint8_t)len;
  } else {
    frame[h++] = 0x80 | 127;
    for (int i = 7; i >= 0; i--)
      frame[h++] = (uint8_t)((uint64_t)len >> (8 * i));
  }
  uint8_t *mask = frame + h;
  if (!random_bytes(mask, 4)) {
    free(frame);
    return false;
  }
  h += 4;
  const uint8_t *in = data;
  for (size_t i = 0; i < len; i++)
    frame[h + i] = in[i] ^ mask[i & 3];
  bool ok = send_all(fd, frame, h + len);
  free(frame);
  return ok;
}

long ws_parse(const uint8_t *p, size_t len, ws_frame *f) {
  if (len < 2)
    return 0;
  if (p[0] & 0x70 || p[1] & 0x80) /* reserved bits (no extension was agreed); masked */
    return -1;
  f->fin = p[0] & 0x80;
  f->opcode = p[0] & 0x0f;
  bool control = f->opcode & 0x08;
  if ((f->opcode > WS_BINARY && !control) || f->opcode > WS_PONG)
    return -1;
  uint64_t n = p[1] & 0x7f;
  size_t h = 2;
  if (n == 126) {
    if (len < 4)
      return 0;
    n = (uint64_t)p[2] << 8 | p[3];
    h = 4;
  } else if (n == 127) {
    if (len < 10)
      return 0;
    n = 0;
    for (int i = 0; i < 8; i++)
      n = n << 8 | p[2 + i];
    h = 10;
    if (n >> 63)
      return -1;
  }
  if (control && (n > 125 || !f->fin))
    return -1;
  if (n > len - h)
    return 0;
  f->payload = p + h;
  f->len = (size_t)n;
  return (long)(h + n);
}

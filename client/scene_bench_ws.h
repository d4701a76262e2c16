/* scene_bench_ws.h: the little of WebSocket (RFC 6455) that scene-bench needs to load the
 * daemon's GET /ws as a browser or a game client would: the upgrade handshake, masked client
 * frames for requests, and a parser of the server's frames over a buffer the caller fills. */
#ifndef SCENE_BENCH_WS_H
#define SCENE_BENCH_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { WS_CONT = 0, WS_TEXT = 1, WS_BINARY = 2, WS_CLOSE = 8, WS_PING = 9, WS_PONG = 10 };

typedef struct ws_frame {
  bool fin;
  uint8_t opcode;
  const uint8_t *payload; /* inside the buffer parsed */
  size_t len;
} ws_frame;

/* Connects to host:port (blocking), sends GET path with a fresh Sec-WebSocket-Key and checks
 * the 101 answer and its Sec-WebSocket-Accept. The socket, or -1 with why in err. Reads the
 * answer's bytes one at a time, so nothing after it is taken from the socket. */
int ws_connect(const char *host, int port, const char *path, char *err, size_t errlen);

/* Sends one frame with FIN, masked with a fresh key as a client must; waits while the socket
 * is full (a non-blocking one too). False when the socket failed. */
bool ws_send(int fd, uint8_t opcode, const void *data, size_t len);

/* The frame at the start of the len bytes at p: the bytes it takes (header and payload), 0
 * when it is not complete yet, -1 when it is not a frame a server may send (a masked one, a
 * reserved bit or opcode, a control frame over 125 bytes or fragmented, a length over 2^63). */
long ws_parse(const uint8_t *p, size_t len, ws_frame *f);

#endif

/* A WebSocket client for the suites that read the daemon's messages over /ws: the upgrade,
 * masked text messages out, and the daemon's text and binary messages in (unmasked, of any
 * length the 7-, 16- and 64-bit forms give). Plain TCP on 127.0.0.1. */
#ifndef T_WS_FIXTURES_H
#define T_WS_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct t_ws {
  int fd;
  uint8_t *buf; /* bytes read and not yet taken */
  size_t len, cap;
} t_ws;

typedef struct t_ws_msg {
  uint8_t opcode; /* 1 text, 2 binary */
  uint8_t *data;  /* caller frees (NUL-terminated for convenience) */
  size_t len;
} t_ws_msg;

/* Connects to the daemon's HTTP port and upgrades GET /ws; false on any failure. */
bool t_ws_connect(t_ws *w, int http_port);
void t_ws_close(t_ws *w);
/* Sends one text message. */
bool t_ws_send_text(t_ws *w, const char *text);
/* The next data message within timeout_ms (pings and the like skipped); false on timeout, a
 * closed connection or a malformed frame. */
bool t_ws_recv(t_ws *w, t_ws_msg *m, long timeout_ms);
/* Sends a request (a text message) and returns the next text message that carries "ok"
 * (caller deletes with cJSON_Delete; it is a cJSON *); binary messages and events read
 * meanwhile are dropped. NULL when none came. */
struct cJSON *t_ws_call(t_ws *w, const char *request);

#endif

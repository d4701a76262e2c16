/* WebSocket connections (RFC 6455) on the HTTP port: a transport for scn_conn. */
#ifndef SCN_WS_H
#define SCN_WS_H

#include "server.h"

struct scn_tls;

/* The module's state, srv->ws: the connections awaiting the peer's close frame, and the read
 * buffer. */
typedef struct scn_ws_state scn_ws_state;

/* Sets up srv->ws; 0, or -1 when out of memory. */
int scn_ws_open(scn_server *srv);
/* Frees srv->ws (at exit, once the loop's handles are closed). */
void scn_ws_free(scn_server *srv);

/* Takes over a socket whose upgrade was accepted: fd (a descriptor the caller no longer
 * uses), tls (its TLS session, NULL on plain HTTP), preface (plaintext to send first: the 101
 * response), input (plaintext already read after the request). 0, or -1 when the connection
 * could not be set up (fd is then closed and tls freed). */
int scn_ws_accept(scn_server *srv, int fd, struct scn_tls *tls, const char *preface,
                  size_t preface_len, const char *input, size_t input_len);

#endif

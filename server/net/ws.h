/* WebSocket connections (RFC 6455) on the HTTP port: a transport for scn_conn. */
#ifndef SCN_WS_H
#define SCN_WS_H

#include "server.h"

/* Takes over a socket whose upgrade was accepted: fd (a descriptor the caller no longer
 * uses), preface (bytes to send first: the 101 response), input (bytes already read after the
 * request). 0, or -1 when the connection could not be set up (fd is then closed). */
int scn_ws_accept(scn_server *srv, int fd, const char *preface, size_t preface_len,
                  const char *input, size_t input_len);

#endif

/* Listening sockets for the protocol and HTTP ports: one way to turn a configured address into
 * a bound, listening handle and the "<what> on HOST:PORT" line tests and scripts wait for. */
#ifndef SCN_LISTEN_H
#define SCN_LISTEN_H

#include "ops/config.h"

#include <uv.h>

/* Binds and listens on the first of addr's addresses that works (addr is the value of setting,
 * "listen" or "http"); logs "<announce> on HOST:PORT" with the address bound, numeric, the real
 * port and the extra logfmt fields. 0, or -1 with one line on stderr. */
int scn_listen(uv_loop_t *loop, uv_tcp_t *handle, const scn_addr *addr, int backlog,
               uv_connection_cb on_connection, const char *setting, const char *announce,
               const char *extra);

/* The port a listening handle is bound to (0 when it is not). */
int scn_listen_port(uv_tcp_t *handle);

#endif

/* The protocol port over plain TCP. */
#ifndef SCN_TCP_H
#define SCN_TCP_H

#include "server.h"

/* The module's state, srv->tcp: the listener and the read buffer. */
typedef struct scn_tcp_state scn_tcp_state;

/* Binds --listen and starts accepting; 0, or -1 with one line on stderr. */
int scn_tcp_listen(scn_server *srv);
/* The port it listens on (the real one when --listen gave 0), 0 when it does not. */
int scn_tcp_port(const scn_server *srv);
/* Stops accepting (shutdown). */
void scn_tcp_close(scn_server *srv);
/* Frees srv->tcp (at exit, once the loop's handles are closed). */
void scn_tcp_free(scn_server *srv);

#endif

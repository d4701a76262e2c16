/* The protocol port over plain TCP. */
#ifndef SCN_TCP_H
#define SCN_TCP_H

#include "server.h"

/* Binds --listen and starts accepting; 0, or -1 with one line on stderr. */
int scn_tcp_listen(scn_server *srv);
/* The port it listens on (the real one when --listen gave 0). */
int scn_tcp_port(void);
/* Stops accepting (shutdown). */
void scn_tcp_close(void);

#endif

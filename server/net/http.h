/* The HTTP port (--http): operations endpoints, the staging view and the WebSocket upgrade. */
#ifndef SCN_HTTP_H
#define SCN_HTTP_H

#include "server.h"

/* Binds --http (unless off) and starts accepting; 0, or -1 with one line on stderr. */
int scn_http_listen(scn_server *srv);
/* The port it listens on, 0 when it does not (--http off). */
int scn_http_port(void);
/* Stops listening and closes the HTTP connections: the idle ones (the others once their
 * response is written), or all. */
void scn_http_close(bool all);

#endif

/* The HTTP port (--http): operations endpoints, the staging view and the WebSocket upgrade. */
#ifndef SCN_HTTP_H
#define SCN_HTTP_H

#include "server.h"

/* The module's state, srv->http: the listener, the HTTP connections, the staging view's
 * directory. */
typedef struct scn_http_state scn_http_state;

/* Binds --http (unless off: srv->http stays NULL) and starts accepting; 0, or -1 with one line
 * on stderr. */
int scn_http_listen(scn_server *srv);
/* The port it listens on, 0 when it does not (--http off). */
int scn_http_port(const scn_server *srv);
/* Stops listening and closes the HTTP connections: the idle ones (the others once their
 * response is written), or all. */
void scn_http_close(scn_server *srv, bool all);
/* Frees srv->http (at exit, once the loop's handles are closed). */
void scn_http_free(scn_server *srv);

#endif

/* From a request line to its reply: the command table's entry, access, fields, the handler,
 * the reply or the error. The dispatcher is what main hands to the transports as the server's
 * line runner, and to persistence as the journal's replay. */
#ifndef SCN_DISPATCH_H
#define SCN_DISPATCH_H

#include "server.h"

typedef struct scn_dispatch scn_dispatch;

/* The dispatcher of srv (srv->dispatch); registers its hooks. NULL when out of memory. */
scn_dispatch *scn_dispatch_open(scn_server *srv);
void scn_dispatch_close(scn_dispatch *d);
/* Handles one request line of connection c (NULL: a line over the limit) into c->out. */
void scn_dispatch_line(scn_conn *c, const char *line, size_t len);
/* Runs a journaled request line at start-up (ud: the server); true when it succeeded. */
bool scn_dispatch_replay(void *ud, const char *line, size_t len);

#endif

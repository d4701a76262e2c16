/* Shared by the HTTP port's files: http.c (parsing, routing, responses), http_files.c (the
 * staging view's static files) and ws_upgrade.c (GET /ws). */
#ifndef SCN_HTTP_INTERNAL_H
#define SCN_HTTP_INTERNAL_H

#include "buf.h"
#include "server.h"

#include <http_parser.h>
#include <limits.h>

#define HTTP_MAX_URL 2048

/* The headers a WebSocket handshake needs, as received. */
typedef struct scn_ws_handshake {
  char key[64], version[16], upgrade[64], connection[256], origin[256], host[256];
  bool too_long; /* a header was longer than its field */
} scn_ws_handshake;

typedef struct http_conn {
  uv_tcp_t tcp;
  scn_server *srv;
  http_parser parser;
  char url[HTTP_MAX_URL];
  size_t url_len;
  bool url_too_long;
  /* headers the WebSocket handshake needs */
  char field[32];
  size_t field_len;
  bool field_done; /* the current header's name is complete: value bytes follow */
  char *value;     /* where the current header's value goes (NULL: not kept) */
  size_t value_cap;
  scn_ws_handshake hs;
  bool upgrade_ok; /* GET /ws with an accepted handshake: hand the socket to ws.c */
  scn_buf upgrade_resp;
  scn_buf out;         /* responses (plaintext) */
  struct scn_tls *tls; /* with --tls-cert: the session; NULL on plain HTTP */
  scn_buf wire;        /* with TLS: the ciphertext being written */
  uv_write_t write_req;
  bool writing, close_after;
  struct http_conn *prev, *next; /* every open HTTP connection */
} http_conn;

/* Queues a response (the body is left out for HEAD). */
void scn_http_respond(http_conn *c, int status, const char *reason, const char *type,
                      const char *headers, const char *body, size_t len);
/* Closes an HTTP connection (its memory goes with the handle). */
void scn_http_close_conn(http_conn *c);

/* http_files.c: the staging view's static files, under one directory found once at start. */
typedef struct scn_http_files {
  char dir[PATH_MAX]; /* its real path; empty: none */
} scn_http_files;
/* Finds the directory: --www, or www next to the executable. */
void scn_http_files_init(scn_http_files *f, const scn_config *cfg);
/* Answers GET url from that directory: 200 with the file, or 404. */
void scn_http_serve_file(const scn_http_files *f, http_conn *c, const char *url);

/* ws_upgrade.c: GET /ws. Checks the handshake; when it is accepted, c->upgrade_ok is set and
 * c->upgrade_resp holds the 101 response, else an error response is queued. */
void scn_ws_upgrade_request(http_conn *c);
/* The upgrade was accepted: the socket becomes a WebSocket connection; rest is what was read
 * after the request. The HTTP connection closes. */
void scn_ws_hand_over(http_conn *c, const char *rest, size_t rest_len);

#endif

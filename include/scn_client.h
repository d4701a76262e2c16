/*
 * scn_client.h: a small blocking client for scened (protocol 1).
 *
 * Connect (over TCP, or TLS with OpenSSL), send requests (one at a time or many pipelined),
 * read responses in order, and receive stream events through a callback. Errors: functions
 * return 0 or a negative SCN_CLI_E* code, and scn_cli_error() describes the last one.
 */
#ifndef SCN_CLIENT_H
#define SCN_CLIENT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct scn_cli scn_cli;

enum {
  SCN_CLI_OK = 0,
  SCN_CLI_ECONNECT = -1, /* could not connect (refused, unreachable, bad address) */
  SCN_CLI_ETIMEOUT = -2, /* no answer in time */
  SCN_CLI_ECLOSED = -3,  /* the daemon closed the connection */
  SCN_CLI_EPROTO = -4,   /* a line that is not the JSON the protocol promises */
  SCN_CLI_EREPLY = -5,   /* the daemon answered with an error (see scn_cli_reply_error) */
  SCN_CLI_ENOMEM = -6,
  SCN_CLI_EIO = -7,
  SCN_CLI_ETLS = -8,   /* TLS failed: the daemon's certificate is not trusted, the daemon refused
                          ours (or its absence), no TLS on the other side, ... */
  SCN_CLI_EINVAL = -9, /* an argument the call cannot send (fields that are not an object) */
};

/* How the daemon sends this connection matrices (hello's "matrices"): arrays of 16 numbers, or
 * base64 strings of their 64 bytes (16 little-endian float32), exact to the bit. */
enum { SCN_CLI_MATRICES_JSON = 0, SCN_CLI_MATRICES_B64 = 1 };

typedef struct scn_cli_options {
  const char *host;  /* a name or an address; default 127.0.0.1 */
  int port;          /* default 7878 */
  const char *token; /* sent with hello when set */
  int timeout_ms;    /* per call; 0 means 10 s; negative waits forever */
  int matrices;      /* SCN_CLI_MATRICES_JSON (default) or SCN_CLI_MATRICES_B64 */
  bool no_follow;    /* answer a cluster's MOVED as an error instead of following it */
  /* hello with "follower_reads": true (on this connection and those a MOVED opens): in a
   * cluster with replicas, a daemon that follows a world's group answers reads and
   * subscriptions from its copy (which may lag the owner) instead of MOVED */
  bool follower_reads;
  /* TLS: on when tls is set or any file is given. The daemon's certificate must be signed by
   * a CA of tls_ca (a PEM file; NULL: the system's CAs) and name host. tls_cert and tls_key
   * (PEM) are this client's certificate, for a daemon that requires one (--tls-ca). */
  bool tls;
  const char *tls_ca;
  const char *tls_cert;
  const char *tls_key;
} scn_cli_options;

/* Connects (and says hello with the token, the matrices form and follower_reads when one is
 * given). NULL on failure, with the reason in err (at least 256 bytes) when err is not NULL. */
scn_cli *scn_cli_connect(const scn_cli_options *opt, char *err, size_t errlen);
void scn_cli_close(scn_cli *c);
const char *scn_cli_error(const scn_cli *c);
int scn_cli_fd(const scn_cli *c);
/* HOST:PORT of the daemon this client is connected to now (a MOVED may have changed it). */
const char *scn_cli_addr(const scn_cli *c);

/* Events (lines with "event") that arrive while waiting for a response go here; without a
 * handler they are dropped. The event is freed after the call. */
typedef void (*scn_cli_event_fn)(void *ud, const cJSON *event);
void scn_cli_on_event(scn_cli *c, scn_cli_event_fn fn, void *ud);

/* Queues one request line (no '\n'); nothing is sent until scn_cli_flush or a read. */
int scn_cli_send_line(scn_cli *c, const char *line, size_t len);
int scn_cli_send(scn_cli *c, const cJSON *req);
int scn_cli_flush(scn_cli *c);

/* The next response (events are handed to the event handler on the way). The caller
 * cJSON_Deletes it. */
int scn_cli_read_response(scn_cli *c, cJSON **out);
/* The next line of any kind, raw (without '\n'), valid until the next call. */
int scn_cli_read_line(scn_cli *c, const char **line, size_t *len, int timeout_ms);

/* One request, one response. An error reply returns SCN_CLI_EREPLY with the response in
 * *out (when out is not NULL); scn_cli_reply_error then gives its code and message.
 * In a cluster, a request that names a world goes to the daemon last known to own it: a
 * MOVED answer moves this client to the daemon it names (a new connection, hello with the
 * token; the old connection and its subscriptions are closed) and the request is sent again,
 * at most 3 times; each world's owner is remembered. Pipelined requests (scn_cli_send and
 * scn_cli_read_response) are not redirected. */
int scn_cli_call(scn_cli *c, const cJSON *req, cJSON **out);
/* The same with a request written as JSON text. */
int scn_cli_call_line(scn_cli *c, const char *line, cJSON **out);
/* Code and message of an error response (NULL when r is not one). */
const char *scn_cli_reply_code(const cJSON *r);
const char *scn_cli_reply_message(const cJSON *r);

/* For programs that run their own loop (poll, epoll) on scn_cli_fd: the connection's bytes as
 * they are, without blocking, through TLS on a TLS connection. scn_cli_send_raw returns the
 * bytes taken (0 when the socket is full), scn_cli_recv_raw the bytes read (0 when nothing is
 * ready), both a negative code on errors and when the daemon closed. Bytes already read by
 * the calls above come first. Do not mix with queued lines (scn_cli_send_line). */
ssize_t scn_cli_send_raw(scn_cli *c, const void *data, size_t len);
ssize_t scn_cli_recv_raw(scn_cli *c, void *buf, size_t cap);
/* True when bytes wait inside the connection (decrypted by TLS) that a poll of the descriptor
 * would not announce: call scn_cli_recv_raw before waiting. */
bool scn_cli_pending(const scn_cli *c);

/* Switches how the daemon sends this connection matrices from now on (a hello with
 * "matrices", and the token when the connection has one); frames after the answer come in the
 * new form. */
int scn_cli_set_matrices(scn_cli *c, int matrices);
int scn_cli_matrices(const scn_cli *c);

/* A matrix (16 float32, column-major) as base64: 88 characters, then a NUL (out holds 89). */
#define SCN_CLI_B64_MATRIX_LEN 88
void scn_cli_matrix_to_b64(const float m[16], char out[SCN_CLI_B64_MATRIX_LEN + 1]);
/* The matrix of 88 base64 characters; 0, or -1 when s is not one (length, alphabet, padding). */
int scn_cli_matrix_from_b64(const char *s, size_t len, float m[16]);
/* A matrix of a response ("local", "world", "matrix"), whichever form it came in; 0 or -1. */
int scn_cli_matrix_get(const cJSON *v, float m[16]);

/* A frame as the frame handler gets it. Its arrays belong to the connection and are reused
 * from frame to frame (nothing is allocated per matrix): they are valid during the call. */
typedef struct scn_cli_frame {
  double sub, tick;
  const char *world;
  bool full;
  size_t n;                    /* transforms set */
  const uint64_t *ids;         /* ids[i] has the world matrix matrices[i] */
  const float (*matrices)[16]; /* column-major, the daemon's float32 values */
  size_t nremoved;
  const uint64_t *removed;
  bool packed; /* decoded from a packed frame: each translation within step / 2 of the
                  daemon's (plus float32 rounding), each rotation within 0.5 degrees */
} scn_cli_frame;
typedef void (*scn_cli_frame_fn)(void *ud, const scn_cli_frame *f);
/* Frames go to fn instead of the event handler, in any form: a b64 frame is read straight
 * from its line into the arrays, a json one through cJSON, a packed one decoded (below). Other
 * events still go to the event handler. fn NULL: frames go to the event handler again. */
void scn_cli_on_frame(scn_cli *c, scn_cli_frame_fn fn, void *ud);
/* Packed frames (CONTRACT "Packed frames": a subscribe or subscribe.update with "packed":
 * {"step": s, "origin": [x, y, z]}). The library learns each packed subscription's grid from
 * the requests it sends and their answers, in order (calls and pipelined requests alike; a
 * subscribe.update's grid applies from the frame after its answer), keeps what the
 * subscription last received, and forgets both when unsubscribe is answered or on the events
 * unsubscribed, world_destroyed and moved. Each packed frame is decoded (also when no handler
 * wants it, so that later deltas stay right) into the frame handler's arrays, with packed set;
 * without a frame handler, the event handler gets it written out as a frame of the
 * connection's form ("set" of "m" arrays in json mode, "ids" and "ms" in b64 mode, numbers as
 * the daemon writes float32), not the payload, so that code written for json or b64 frames
 * takes it as it is. A packed frame that cannot be decoded (of a sub whose grid is unknown,
 * "packed" not base64, a payload the decoder refuses) is dropped and reported as
 * SCN_CLI_EPROTO, the subscription, the reason and the byte offset in scn_cli_error ("a packed
 * frame of subscription 3 refused at byte 17 of 40: the payload ends inside a value"), by
 * scn_cli_poll_events: at once, or, when it came while a call waited for its answer, by the
 * next poll (the call completes; the connection stays in step). What the subscription held is
 * then emptied, so later deltas are refused rather than decoded against stale values, until a
 * full frame: unsubscribe and subscribe again. Lines read raw (scn_cli_read_line) are not
 * seen: mixing them with packed subscriptions loses their order. */
/* The parts of a matrix that is translation x rotation x scale, as transform.get with "trs"
 * answers them: r a unit quaternion (x, y, z, w) with w >= 0, a mirror as a negative s[0].
 * valid is false when the matrix is not T * R * S (the daemon answered null). */
typedef struct scn_cli_trs {
  bool valid;
  float t[3], r[4], s[3];
} scn_cli_trs;

/* Replaces some parts of an entity's local matrix (world_space: its world matrix) and keeps the
 * others: transform.set_local (set_world) with "partial". t, r, s may be NULL (kept), at least
 * one given. A current matrix that is not T * R * S is an error reply (BAD_REQUEST). */
int scn_cli_set_parts(scn_cli *c, const char *world, double entity, bool world_space,
                      const float t[3], const float r[4], const float s[3]);
/* Reads the parts of an entity's local and world matrices (either out may be NULL). */
int scn_cli_get_trs(scn_cli *c, const char *world, double entity, scn_cli_trs *local,
                    scn_cli_trs *world_trs);

/* Reads an entity's local and world matrices (either may be NULL) as they were at a past
 * tick of a world that keeps history (a fraction interpolates between two ticks), or as they
 * are now when tick is negative; *now_tick (may be NULL) gets the tick answered. A tick
 * outside the world's window is an error reply (NOT_FOUND). */
int scn_cli_get_at(scn_cli *c, const char *world, double entity, double tick, float local[16],
                   float world_m[16], double *now_tick);

/* Subscribes to a world (root 0: whole world; hz <= 0: the tick rate) and returns the
 * subscription id; frames then reach the event handler from any read. */
int scn_cli_subscribe(scn_cli *c, const char *world, double root, double hz, double *sub);
/* The same with any of the protocol's subscribe fields: fields (NULL for none) is an object
 * whose members are sent with "cmd" and "world", e.g. {"root":5,"hz":30,"near":{"entity":7,
 * "radius":50,"margin":5,"bands":[{"radius":10,"hz":60},{"radius":50,"hz":10}]}}. The _text
 * form takes the object as JSON text; text that is not a JSON object is SCN_CLI_EINVAL. */
int scn_cli_subscribe_fields(scn_cli *c, const char *world, const cJSON *fields, double *sub);
int scn_cli_subscribe_text(scn_cli *c, const char *world, const char *fields, double *sub);
/* subscribe.update: changes one of this connection's subscriptions without a new full frame.
 * near is the new region (an object, as subscribe's "near"), or NULL to send "near": null,
 * which removes it. The next frame carries what came into scope and, in "removed", what left.
 * The _fields form sends any of its fields ("near", "packed") as given. */
int scn_cli_subscribe_update(scn_cli *c, double sub, const cJSON *near);
int scn_cli_subscribe_update_fields(scn_cli *c, double sub, const cJSON *fields);
/* This library keeps no copy of a world. A caller that keeps one from frames drops each frame's
 * "removed" (entities that left the scope: a near region's edge, a destroyed transform) and,
 * when a subscription ends, everything of it. The ends reach the event handler, never the frame
 * handler: {"event":"unsubscribed","sub":S,"reason":R} follows a frame whose "removed" holds
 * the whole scope when R is "center_destroyed" (a near region's entity lost its transform) or
 * "root_destroyed"; the events "world_destroyed" and "moved", and the other reasons, remove
 * nothing first. */

/* Waits up to timeout_ms for events and hands them to the handler; returns how many
 * arrived, or a negative code. Responses must not be pending. */
int scn_cli_poll_events(scn_cli *c, int timeout_ms);

#endif

/* The client library's packed subscriptions (CONTRACT "Packed frames"), private to client/.
 * A connection learns which of its subscriptions are packed, and on what grid, from the
 * requests it sends and their answers: the daemon answers every request line once and in
 * order, so the n-th answer read is that of the n-th line sent. Each packed subscription keeps
 * the baseline its frames are decoded against, until it ends. */
#ifndef SCN_CLIENT_PACKED_H
#define SCN_CLIENT_PACKED_H

#include "packed.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cli_packed_sub {
  double sub;
  scn_packed_baseline base;
} cli_packed_sub;

/* A request whose answer changes what is known: a subscribe or subscribe.update with
 * "packed", or an unsubscribe. */
typedef struct cli_packed_req {
  uint64_t seq; /* which request line it was, counting from 1 */
  int kind;
  double sub; /* of an update or unsubscribe */
  double step, origin[3];
} cli_packed_req;

typedef struct cli_packed {
  cli_packed_sub *subs;
  size_t nsubs, subs_cap;
  cli_packed_req *reqs; /* waiting for their answers, oldest first from head */
  size_t head, nreqs, reqs_cap;
  uint64_t sent, answered;
  scn_packed_frame frame; /* the last decoded frame, its arrays reused */
  uint8_t *bytes;         /* the last payload, out of its base64 */
  size_t bytes_cap;
} cli_packed;

/* Text queued to the daemon as a request line: each line of it that is not blank (only spaces
 * and tabs, which the daemon does not answer) counts as a request. False when out of memory,
 * having counted nothing. */
bool cli_packed_request(cli_packed *p, const char *line, size_t len);
/* The next answer read (any answer, ok or not). */
void cli_packed_answer(cli_packed *p, const cJSON *answer);
/* An event other than a frame: "unsubscribed", "world_destroyed" and "moved" end their sub. */
void cli_packed_event(cli_packed *p, const cJSON *event);
/* A frame of sub was not taken (its "packed" not even text): what the subscription held is
 * emptied, as after a refused payload. */
void cli_packed_lost(cli_packed *p, double sub);
/* The connection was replaced (a cluster's MOVED): its subscriptions and answers are gone. */
void cli_packed_reset(cli_packed *p);
void cli_packed_free(cli_packed *p);

/* Decodes a packed frame of subscription sub (its payload in base64, len characters) into
 * p->frame; a full frame first clears the baseline. 0, or a negative SCN_CLI_* code with the
 * reason written to err: a sub this connection holds no grid of, text that is not base64, a
 * payload the decoder refuses (with why and the byte offset). A refused payload empties the
 * baseline, so that later frames decode right or are refused, never decode to wrong values. */
int cli_packed_decode(cli_packed *p, double sub, bool full, const char *b64, size_t len, char *err,
                      size_t errlen);

#endif

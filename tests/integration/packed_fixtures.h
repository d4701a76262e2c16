/* Packed frames as the suites read them: a TCP frame line ({"event":"frame",...,"packed":B64})
 * or a WebSocket binary message taken apart, its payload walked for each entry's flags and
 * decoded against the subscription's baseline (proto/packed.h) into a frame_view, and a
 * decoded matrix checked against the exact one within the contract's tolerance. */
#ifndef T_PACKED_FIXTURES_H
#define T_PACKED_FIXTURES_H

#include "interest_fixtures.h"
#include "packed.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

/* Each entry's id and flags, as the payload lists them. */
typedef struct packed_walk {
  int n;
  uint64_t *ids;
  uint8_t *flags;
} packed_walk;
void packed_walk_free(packed_walk *w);

/* Walks a payload's entries (false when it is not well formed). */
bool packed_walk_payload(const uint8_t *p, size_t len, packed_walk *w);

/* Decodes a payload (full: b is cleared first) into v and its flags into w (either may be
 * NULL); false (reported) when the decoder refuses it. */
bool packed_decode_view(const uint8_t *p, size_t len, long tick, bool full, scn_packed_baseline *b,
                        frame_view *v, packed_walk *w);

/* Reads f as a packed frame line: exactly event, sub, world, tick, full and packed (base64 with
 * padding), then decodes it as above. False (asserted and reported) when it is not one. */
bool packed_frame_read(const cJSON *f, scn_packed_baseline *b, frame_view *v, packed_walk *w);

/* A WebSocket binary message as a packed frame: its header and payload, decoded as above. */
bool packed_message_read(const uint8_t *msg, size_t len, scn_packed_baseline *b, frame_view *v,
                         packed_walk *w);

/* Within the contract's tolerance of exact: a matrix that is not T x R x S is bit for bit the
 * same; else translation within step / 2 per axis (plus float32 rounding), rotation within
 * 0.5 degrees, scale as the daemon's within float32 rounding. why gets the first difference. */
bool packed_close_enough(const float exact[16], const float got[16], double step, char *why,
                         size_t cap);

#endif

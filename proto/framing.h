/* Line framing: bytes in, complete lines out, with a line length limit. Lines are handed out
 * straight from the caller's read buffer; only a line split across reads is copied. */
#ifndef SCN_FRAMING_H
#define SCN_FRAMING_H

#include "buf.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct scn_framer {
  scn_buf partial; /* start of a line whose end has not arrived yet */
  size_t max_line; /* bytes, not counting the line end */
  bool discarding; /* inside an overlong line: drop bytes up to the next '\n' */
} scn_framer;

/* line is NULL for a line over the limit (reported once, as soon as it is known). Blank lines
 * (empty, or only spaces and tabs) are not reported. Returning false stops the feed early;
 * the rest of the data is then lost, so only do that when the connection is going away. */
typedef bool (*scn_line_fn)(void *ud, const char *line, size_t len);

void scn_framer_init(scn_framer *f, size_t max_line);
void scn_framer_free(scn_framer *f);
/* Feeds n bytes; returns false when a callback stopped it or memory ran out. */
bool scn_framer_feed(scn_framer *f, const char *data, size_t n, scn_line_fn fn, void *ud);
/* The same, telling how many bytes were used: when a callback stops the feed, the bytes after
 * its line are data[*used..n), for the caller to feed again later. */
bool scn_framer_feed_at(scn_framer *f, const char *data, size_t n, scn_line_fn fn, void *ud,
                        size_t *used);
/* True when a partial line is pending (a client that closes now vanished mid-line). */
static inline bool scn_framer_pending(const scn_framer *f) {
  return f->partial.len > 0 || f->discarding;
}

#endif

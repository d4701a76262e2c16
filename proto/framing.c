#include "framing.h"

#include <string.h>

/* A partial-line buffer that grew for one long line is given back once that line is done. */
#define KEEP_PARTIAL (64 * 1024)

void scn_framer_init(scn_framer *f, size_t max_line) {
  memset(f, 0, sizeof *f);
  f->max_line = max_line;
}

void scn_framer_free(scn_framer *f) { scn_buf_free(&f->partial); }

static bool is_blank(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (s[i] != ' ' && s[i] != '\t')
      return false;
  return true;
}

static bool emit(scn_framer *f, const char *line, size_t len, scn_line_fn fn, void *ud) {
  if (len > 0 && line[len - 1] == '\r')
    len--;
  if (len > f->max_line)
    return fn(ud, NULL, 0);
  if (is_blank(line, len))
    return true;
  return fn(ud, line, len);
}

static void reset_partial(scn_framer *f) {
  f->partial.len = 0;
  if (f->partial.cap > KEEP_PARTIAL)
    scn_buf_free(&f->partial);
}

bool scn_framer_feed(scn_framer *f, const char *data, size_t n, scn_line_fn fn, void *ud) {
  size_t used;
  return scn_framer_feed_at(f, data, n, fn, ud, &used);
}

bool scn_framer_feed_at(scn_framer *f, const char *data, size_t n, scn_line_fn fn, void *ud,
                        size_t *used) {
  size_t pos = 0;
  *used = 0;
  while (pos < n) {
    const char *nl = memchr(data + pos, '\n', n - pos);
    size_t end = nl ? (size_t)(nl - data) : n; /* end of this line's bytes in data */
    if (f->discarding) {
      pos = nl ? end + 1 : n;
      f->discarding = !nl;
      *used = pos;
      continue;
    }
    if (nl && f->partial.len == 0) {
      bool go = emit(f, data + pos, end - pos, fn, ud);
      pos = end + 1;
      *used = pos;
      if (!go)
        return false;
      continue;
    }
    /* The line continues from (or into) another read: gather it in partial. The +1 leaves
     * room for a '\r' that may precede the '\n'. */
    size_t take = end - pos;
    if (f->partial.len + take > f->max_line + 1) {
      reset_partial(f);
      f->discarding = !nl;
      pos = nl ? end + 1 : n;
      *used = pos;
      if (!fn(ud, NULL, 0))
        return false;
      continue;
    }
    scn_buf_add(&f->partial, data + pos, take);
    if (f->partial.failed) {
      f->partial.failed = false;
      reset_partial(f);
      return false;
    }
    pos = end;
    if (nl) {
      pos++;
      bool go = emit(f, f->partial.data, f->partial.len, fn, ud);
      reset_partial(f);
      *used = pos;
      if (!go)
        return false;
    }
    *used = pos;
  }
  *used = n;
  return true;
}

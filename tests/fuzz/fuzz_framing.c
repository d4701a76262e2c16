/* Fuzz target: line framing. The input is cut into reads at points the input itself picks;
 * every reported line must be within the limit, free of '\n', and not blank. */
#include "framing.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LIMIT 64

static bool on_line(void *ud, const char *line, size_t len) {
  size_t *lines = ud;
  if (line) {
    if (len > LIMIT || memchr(line, '\n', len))
      abort();
    size_t blank = 0;
    while (blank < len && (line[blank] == ' ' || line[blank] == '\t'))
      blank++;
    if (blank == len)
      abort();
  }
  ++*lines;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  scn_framer f;
  scn_framer_init(&f, LIMIT);
  size_t lines = 0, pos = 0;
  while (pos < size) {
    size_t chunk = 1 + data[pos] % 97; /* read sizes come from the data too */
    if (chunk > size - pos)
      chunk = size - pos;
    if (!scn_framer_feed(&f, (const char *)data + pos, chunk, on_line, &lines))
      abort();
    pos += chunk;
  }
  scn_framer_free(&f);
  return 0;
}

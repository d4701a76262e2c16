/* UTF-8: one character at a time, strictly (the protocol reader walks a request line with it,
 * and transform names are checked with it). */
#include "scn_core.h"

size_t scn_utf8_char(const char *str, size_t left, uint32_t *codepoint) {
  const unsigned char *s = (const unsigned char *)str;
  unsigned char c = s[0];
  if (c < 0x80) {
    *codepoint = c;
    return 1;
  }
  size_t n;
  uint32_t cp, min;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (n > left)
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  *codepoint = cp;
  return n;
}

#include "store/path.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

bool scn_path_fmt(scn_path *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out->s, sizeof out->s, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof out->s)
    return true;
  out->s[0] = '\0';
  errno = ENAMETOOLONG;
  return false;
}

bool scn_path_join(scn_path *out, const char *dir, const char *name) {
  return scn_path_fmt(out, "%s/%s", dir, name);
}

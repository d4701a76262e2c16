#include "store/files.h"

#include <errno.h>
#include <string.h>

FILE *scn_file_open(const char *path, bool *absent, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  *absent = !f && errno == ENOENT;
  if (!f && !*absent)
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
  return f;
}

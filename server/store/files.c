#include "store/files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

FILE *scn_file_open(const char *path, bool *absent, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  *absent = !f && errno == ENOENT;
  if (!f && !*absent)
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
  return f;
}

int scn_fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

#include "store/files.h"

#include "store/crc32c.h"

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

int scn_file_replace_open(const char *dir, const char *name, scn_path *tmp, scn_path *final,
                          char *err, size_t errlen) {
  int fd = -1;
  if (scn_path_fmt(tmp, "%s/%s.tmp-%d", dir, name, (int)getpid()) &&
      scn_path_join(final, dir, name))
    fd = open(tmp->s, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    snprintf(err, errlen, "cannot create %s in %s: %s", name, dir, strerror(errno));
  return fd;
}

int scn_file_replace_finish(int fd, bool failed, const void *header, size_t header_len,
                            const char *tmp, const char *final, const char *dir, char *err,
                            size_t errlen) {
  bool ok =
      !failed && pwrite(fd, header, header_len, 0) == (ssize_t)header_len && fdatasync(fd) == 0;
  int saved = errno;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, final) != 0 || scn_fsync_dir(dir) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", final, strerror(saved ? saved : errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

uint32_t scn_file_header_crc(const unsigned char *header, size_t len) {
  return scn_crc32c(scn_crc32c(0, header, 12), header + 16, len - 16);
}

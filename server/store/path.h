/* The paths of the data directory's files, built in one place. A path is at most PATH_MAX
 * bytes (what the kernel accepts); one that would not fit is an error, never a path cut short
 * that names another file. */
#ifndef SCN_PATH_H
#define SCN_PATH_H

#include <stdbool.h>

#define SCN_PATH_MAX 4096
/* Room for a message that names a path or two (an error to log or answer). */
#define SCN_PATH_MSG_MAX (2 * SCN_PATH_MAX + 256)

typedef struct scn_path {
  char s[SCN_PATH_MAX];
} scn_path;

/* out = the formatted path. false when it does not fit: out is then empty and errno
 * ENAMETOOLONG, so that a file call with it fails instead of reaching another file. */
bool scn_path_fmt(scn_path *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* out = dir/name; as scn_path_fmt. */
bool scn_path_join(scn_path *out, const char *dir, const char *name);

#endif

/* The data directory's files, read back at start. */
#ifndef SCN_FILES_H
#define SCN_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Opens path for reading. NULL when it cannot be: *absent tells that it does not exist (which
 * is not an error: nothing was written yet); otherwise err says why. */
FILE *scn_file_open(const char *path, bool *absent, char *err, size_t errlen);

/* fsync of a directory, so the names created or renamed in it are on disk; 0 or -1. */
int scn_fsync_dir(const char *dir);

#endif

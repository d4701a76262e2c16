/* The data directory's files: read back at start, written whole. */
#ifndef SCN_FILES_H
#define SCN_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "store/path.h"

/* Opens path for reading. NULL when it cannot be: *absent tells that it does not exist (which
 * is not an error: nothing was written yet); otherwise err says why. */
FILE *scn_file_open(const char *path, bool *absent, char *err, size_t errlen);

/* fsync of a directory, so the names created or renamed in it are on disk; 0 or -1. */
int scn_fsync_dir(const char *dir);

/* A file that replaces dir/name whole: it is written under a temporary name beside it and
 * renamed over it once complete and on disk, so a crash leaves the old file or the new one,
 * never part of one. Opens the temporary file for writing: its path goes to tmp and the final
 * one to final. The descriptor, or -1 (err says why). */
int scn_file_replace_open(const char *dir, const char *name, scn_path *tmp, scn_path *final,
                          char *err, size_t errlen);

/* Ends a file opened by scn_file_replace_open: writes header (its place at offset 0 was left
 * for it, as it is known last), syncs and closes fd, renames tmp over final and syncs dir.
 * failed tells that a write before went wrong. 0, or -1 with tmp removed (err says why). */
int scn_file_replace_finish(int fd, bool failed, const void *header, size_t header_len,
                            const char *tmp, const char *final, const char *dir, char *err,
                            size_t errlen);

/* The CRC-32C a file header keeps at bytes 12..15 (after its magic and version): of every
 * other byte of the header, so that a damaged field is not read as a good one. */
uint32_t scn_file_header_crc(const unsigned char *header, size_t len);

#endif

/* The ticks a move hands over: history.scn, written by the mover into its epoch directory of
 * the group, beside the snapshot and journal the target loads, and read only by a daemon that
 * loads the group because it was moved to it (a restart or a takeover starts every world's
 * tick count at 1 with an empty history, and never reads it).
 *
 * For each world of the group it holds the world's last closed tick, so its tick count goes on
 * where it stood, and its history (scn_world_history_export): every version a query at a
 * past tick can read. Layout (little-endian): a 32-byte header (magic "SCNHIST1", version,
 * the header's CRC-32C, the epoch of the directory, the number of worlds), then per world a
 * 128-byte section header with its own CRC-32C (name, window, now, oldest, a fingerprint of
 * the world's transforms, the number of versions, the payload's length and CRC-32C) followed
 * by the payload, the versions in order of tick. Damage costs history, never the group: a
 * world whose payload is damaged, or whose transforms are not those the history was written
 * with, starts with an empty history (its tick count still goes on); a damaged header stops
 * the reading there (the worlds not read yet start their count at 1). Each is logged. */
#ifndef SCN_HISTORY_FILE_H
#define SCN_HISTORY_FILE_H

#include "scn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCN_HISTORY_FILE "history.scn"
#define SCN_HISTORY_FILE_VERSION 1

/* Writes the ticks and history of every world of group to dir/history.scn: a temporary file,
 * fsynced, renamed, the directory fsynced. 0 with its size in *bytes, or -1 with err. */
int scn_history_file_write(scn_scene *scene, const char *group, uint64_t epoch, const char *dir,
                           uint64_t *bytes, char *err, size_t errlen);

/* The same into fd (open for reading and writing, empty) and nothing more: no rename and no
 * fsync, for a copy that is read back at once and never kept (a follower's copy). */
int scn_history_file_write_fd(scn_scene *scene, const char *group, uint64_t epoch, int fd,
                              uint64_t *bytes, char *err, size_t errlen);
typedef struct scn_history_load {
  uint32_t worlds;    /* whose tick count went on */
  uint32_t histories; /* whose history was given back */
  uint64_t versions;  /* in those */
  uint32_t dropped;   /* histories (or whole worlds' sections) dropped, each logged */
} scn_history_load;

/* Reads dir/history.scn into the worlds of group that scene has just loaded (none has closed a
 * tick yet), when the file is of that epoch: each world's tick count goes on, then its history
 * is imported. 0 when there is no such file, 1 when it was read (out says what it gave). */
int scn_history_file_load(scn_scene *scene, const char *group, uint64_t epoch, const char *dir,
                          scn_history_load *out);

/* Removes dir/history.scn (a move that did not happen). */
void scn_history_file_remove(const char *dir);

#endif

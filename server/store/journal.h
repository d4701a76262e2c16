/* The journal: every mutating command that succeeded, appended as the request line it was,
 * in records of [magic][length][CRC-32C][line] (little-endian), replayed after the snapshot. */
#ifndef SCN_JOURNAL_H
#define SCN_JOURNAL_H

#include "buf.h"
#include "store/path.h"

#include <stdbool.h>
#include <stdint.h>

#define SCN_JOURNAL_MAGIC 0x524A4353u /* "SCJR" */
#define SCN_JOURNAL_HEADER 12

/* Appends one record to buf. */
void scn_journal_encode(scn_buf *buf, const char *line, size_t len);

/* Appends a command's record: its request line, with "created":[ids] added as its last member
 * when it made entities, so that a replay makes exactly those ids again (whatever order the
 * free slots came back in). scratch is reused from call to call. */
void scn_journal_encode_command(scn_buf *buf, scn_buf *scratch, const char *line, size_t len,
                                const uint64_t *created, size_t ncreated);

/* The line of one whole record (rec holds exactly one, intact: magic, length and checksum);
 * false when it is not. */
bool scn_journal_decode(const char *rec, size_t size, const char **line, size_t *len);
/* The same for a record this process made itself and kept in memory (the replicas' stream):
 * its magic and length are checked, not its checksum, which was computed from these very
 * bytes. */
bool scn_journal_line(const char *rec, size_t size, const char **line, size_t *len);

typedef bool (*scn_replay_fn)(void *ud, const char *line, size_t len);

typedef struct scn_journal_scan {
  uint64_t records;   /* handed to the callback */
  uint64_t valid_end; /* offset after the last good record */
  bool torn;          /* the last record was incomplete: dropped */
  uint64_t torn_at;
  uint64_t skipped_bytes; /* with recover: damaged bytes passed over */
  uint64_t skipped_records;
  bool damaged_tail; /* with recover: the damage ran to the end (cut at valid_end) */
} scn_journal_scan;

/* Reads path and hands every record to fn in order. A torn last record is reported in scan
 * (not an error). Other damage: -1 with err naming the file and offset, unless recover, which
 * skips to the next intact record. A missing file is an empty journal. */
int scn_journal_replay(const char *path, bool recover, scn_replay_fn fn, void *ud,
                       scn_journal_scan *scan, char *err, size_t errlen);

/* The journal files of a data directory: journal.<gen>.scn (false: the path is too long). */
bool scn_journal_path(scn_path *out, const char *dir, uint64_t gen);
/* Opens (creating) generation gen for appending; -1 with the error logged. */
int scn_journal_open(const char *dir, uint64_t gen);
/* The generations present, ascending. */
size_t scn_journal_list(const char *dir, uint64_t *gens, size_t cap);
void scn_journal_remove_before(const char *dir, uint64_t gen);

#endif

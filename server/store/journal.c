#include "store/journal.h"

#include "store/crc32c.h"
#include "store/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The line is copied into the record and checksummed in the same pass. */
void scn_journal_encode(scn_buf *buf, const char *line, size_t len) {
  if (!scn_buf_reserve(buf, SCN_JOURNAL_HEADER + len))
    return;
  char *rec = buf->data + buf->len;
  uint32_t head[3] = {SCN_JOURNAL_MAGIC, (uint32_t)len,
                      scn_crc32c_copy(rec + SCN_JOURNAL_HEADER, line, len)};
  memcpy(rec, head, sizeof head);
  buf->len += SCN_JOURNAL_HEADER + len;
}

/* A record that starts at off and is intact; its length in *len. */
static bool intact(const unsigned char *data, size_t size, size_t off, uint32_t *len) {
  if (size - off < SCN_JOURNAL_HEADER)
    return false;
  uint32_t head[3];
  memcpy(head, data + off, sizeof head);
  if (head[0] != SCN_JOURNAL_MAGIC || head[1] > size - off - SCN_JOURNAL_HEADER)
    return false;
  if (scn_crc32c(0, data + off + SCN_JOURNAL_HEADER, head[1]) != head[2])
    return false;
  *len = head[1];
  return true;
}

/* A record at off that a crash cut short: less than a header left, a header whose length
 * runs past the end, or nothing but zero bytes to the end (space the file system allocated
 * before the data reached it). A complete record that fails its checksum is damage. */
static bool cut_short(const unsigned char *data, size_t size, size_t off) {
  if (size - off < SCN_JOURNAL_HEADER)
    return true;
  uint32_t head[3];
  memcpy(head, data + off, sizeof head);
  if (head[0] == SCN_JOURNAL_MAGIC && head[1] > size - off - SCN_JOURNAL_HEADER)
    return true;
  for (size_t i = off; i < size; i++)
    if (data[i])
      return false;
  return true;
}

/* Whether some intact record starts after off: damage followed by good data is not a torn
 * tail. */
static size_t next_intact(const unsigned char *data, size_t size, size_t off) {
  for (size_t p = off + 1; p + SCN_JOURNAL_HEADER <= size; p++) {
    uint32_t magic, len;
    memcpy(&magic, data + p, 4);
    if (magic == SCN_JOURNAL_MAGIC && intact(data, size, p, &len))
      return p;
  }
  return size;
}

int scn_journal_replay(const char *path, bool recover, scn_replay_fn fn, void *ud,
                       scn_journal_scan *scan, char *err, size_t errlen) {
  memset(scan, 0, sizeof *scan);
  bool absent;
  FILE *f = scn_file_open(path, &absent, err, errlen);
  if (!f)
    return absent ? 0 : -1;
  fseek(f, 0, SEEK_END);
  long fsize = ftell(f);
  fseek(f, 0, SEEK_SET);
  size_t size = fsize > 0 ? (size_t)fsize : 0;
  unsigned char *data = malloc(size ? size : 1);
  if (!data || fread(data, 1, size, f) != size) {
    snprintf(err, errlen, "%s: cannot read: %s", path, data ? strerror(errno) : "out of memory");
    free(data);
    fclose(f);
    return -1;
  }
  fclose(f);
  size_t off = 0;
  int rc = 0;
  while (off < size) {
    uint32_t len;
    if (intact(data, size, off, &len)) {
      scan->records++;
      if (!fn(ud, (const char *)data + off + SCN_JOURNAL_HEADER, len)) {
        snprintf(err, errlen, "%s: record at offset %zu could not be applied", path, off);
        rc = -1;
        break;
      }
      off += SCN_JOURNAL_HEADER + len;
      scan->valid_end = off;
      continue;
    }
    size_t next = next_intact(data, size, off);
    if (next == size && cut_short(data, size, off)) {
      /* The last record ends past the end of the file: a write cut short by a crash. */
      scan->torn = true;
      scan->torn_at = off;
      break;
    }
    if (!recover) {
      if (next == size)
        snprintf(err, errlen,
                 "%s: damaged record at offset %zu (complete, but its checksum "
                 "or header is wrong)",
                 path, off);
      else
        snprintf(err, errlen, "%s: damaged record at offset %zu (intact data follows at %zu)", path,
                 off, next);
      rc = -1;
      break;
    }
    scan->skipped_bytes += next - off;
    scan->skipped_records++;
    if (next == size)
      scan->damaged_tail = true;
    off = next;
  }
  free(data);
  return rc;
}

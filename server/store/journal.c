#include "store/journal.h"

#include "ops/log.h"
#include "store/crc32c.h"
#include "store/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void scn_journal_encode_command(scn_buf *buf, scn_buf *scratch, const char *line, size_t len,
                                const uint64_t *created, size_t ncreated) {
  size_t end = len;
  while (ncreated && end > 0 && line[end - 1] != '}')
    end--;
  if (!ncreated || end == 0) {
    scn_journal_encode(buf, line, len);
    return;
  }
  scratch->len = 0;
  scratch->failed = false;
  scn_buf_add(scratch, line, end - 1);
  scn_buf_adds(scratch, ",\"created\":");
  scn_buf_add_id_list(scratch, created, ncreated);
  scn_buf_addc(scratch, '}');
  if (!scratch->failed)
    scn_journal_encode(buf, scratch->data, scratch->len);
  else
    buf->failed = true;
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

bool scn_journal_decode(const char *rec, size_t size, const char **line, size_t *len) {
  uint32_t n;
  if (!intact((const unsigned char *)rec, size, 0, &n) || n != size - SCN_JOURNAL_HEADER)
    return false;
  *line = rec + SCN_JOURNAL_HEADER;
  *len = n;
  return true;
}

bool scn_journal_line(const char *rec, size_t size, const char **line, size_t *len) {
  uint32_t head[2];
  if (size < SCN_JOURNAL_HEADER)
    return false;
  memcpy(head, rec, sizeof head);
  if (head[0] != SCN_JOURNAL_MAGIC || head[1] != size - SCN_JOURNAL_HEADER)
    return false;
  *line = rec + SCN_JOURNAL_HEADER;
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

/* ---- the journal files of a directory ---------------------------------------------------- */

bool scn_journal_path(scn_path *out, const char *dir, uint64_t gen) {
  return scn_path_fmt(out, "%s/journal.%llu.scn", dir, (unsigned long long)gen);
}

int scn_journal_open(const char *dir, uint64_t gen) {
  scn_path path;
  int fd = scn_journal_path(&path, dir, gen)
               ? open(path.s, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)
               : -1;
  if (fd < 0)
    scn_log(SCN_LOG_ERROR, "cannot open the journal", "dir=%s gen=%llu error=\"%s\"", dir,
            (unsigned long long)gen, strerror(errno));
  return fd;
}

size_t scn_journal_list(const char *dir, uint64_t *gens, size_t cap) {
  DIR *d = opendir(dir);
  size_t n = 0;
  struct dirent *de;
  while (d && (de = readdir(d))) {
    unsigned long long g;
    char tail[8];
    if (sscanf(de->d_name, "journal.%llu.%7s", &g, tail) == 2 && strcmp(tail, "scn") == 0 &&
        n < cap)
      gens[n++] = g;
  }
  if (d)
    closedir(d);
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && gens[j - 1] > gens[j]; j--) {
      uint64_t t = gens[j];
      gens[j] = gens[j - 1];
      gens[j - 1] = t;
    }
  return n;
}

void scn_journal_remove_before(const char *dir, uint64_t gen) {
  uint64_t gens[4096];
  size_t n = scn_journal_list(dir, gens, 4096);
  for (size_t i = 0; i < n; i++)
    if (gens[i] < gen) {
      scn_path path;
      if (scn_journal_path(&path, dir, gens[i]))
        unlink(path.s);
    }
}

/* The ticks a move hands over (see history_file.h). */
#include "store/history_file.h"

#include "ops/log.h"
#include "store/crc32c.h"
#include "store/files.h"
#include "store/snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC "SCNHIST1"
#define HEADER_BYTES 32
#define SECTION_BYTES 128
#define BUF_BYTES 65536

/* ---- the fingerprint of a world's transforms --------------------------------------------- */

/* CRC-32C of every transform in pre-order as a snapshot writes it (entity, parent, name with
 * its length, local matrix): the history is given only to the same transforms. */
typedef struct fingerprint {
  uint32_t crc;
  uint64_t count;
} fingerprint;

static void add_transform(void *ud, scn_entity e, scn_entity parent, const char *name,
                          const float local[16]) {
  fingerprint *f = ud;
  unsigned char rec[8 + 8 + 1 + SCN_NAME_MAX + 64];
  size_t len = name ? strlen(name) : 0, n = 0;
  memcpy(rec + n, &e, 8), n += 8;
  memcpy(rec + n, &parent, 8), n += 8;
  rec[n++] = (unsigned char)len;
  memcpy(rec + n, name ? name : "", len), n += len;
  memcpy(rec + n, local, 64), n += 64;
  f->crc = scn_crc32c(f->crc, rec, n);
  f->count++;
}

static fingerprint fingerprint_of(scn_world *w) {
  fingerprint f = {0, 0};
  scn_world_visit_transforms(w, add_transform, &f);
  return f;
}

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct hwriter {
  int fd;
  unsigned char buf[BUF_BYTES];
  size_t used;
  uint64_t pos; /* file offset of buf[0] */
  bool failed;
  /* the section being written */
  uint32_t crc;
  uint64_t bytes, versions;
} hwriter;

static void flush_buf(hwriter *w) {
  size_t off = 0;
  while (off < w->used && !w->failed) {
    ssize_t n = write(w->fd, w->buf + off, w->used - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      w->failed = true;
    else
      off += (size_t)n;
  }
  w->pos += w->used;
  w->used = 0;
}

static void put(hwriter *w, const void *data, size_t len) {
  w->crc = scn_crc32c(w->crc, data, len);
  w->bytes += len;
  const unsigned char *p = data;
  while (len) {
    if (w->used == BUF_BYTES)
      flush_buf(w);
    size_t n = BUF_BYTES - w->used < len ? BUF_BYTES - w->used : len;
    memcpy(w->buf + w->used, p, n);
    w->used += n;
    p += n;
    len -= n;
  }
}

static int put_version(void *ud, const scn_history_version *v) {
  hwriter *w = ud;
  unsigned char rec[8 + 8 + 1 + 1 + 8 + 1 + SCN_NAME_MAX + 64];
  size_t n = 0;
  uint8_t kind = (uint8_t)v->kind;
  memcpy(rec + n, &v->tick, 8), n += 8;
  memcpy(rec + n, &v->entity, 8), n += 8;
  rec[n++] = kind;
  if (v->kind == SCN_VERSION_STRUCT) {
    rec[n++] = v->exists;
    if (v->exists) {
      size_t len = strlen(v->name);
      memcpy(rec + n, &v->parent, 8), n += 8;
      rec[n++] = (unsigned char)len;
      memcpy(rec + n, v->name, len), n += len;
    }
  } else {
    memcpy(rec + n, v->m, 64), n += 64;
  }
  put(w, rec, n);
  w->versions++;
  return w->failed ? SCN_NOMEM : 0;
}

static void u32_at(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void u64_at(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* One world: its section header (written last, at its place) and its versions. */
static bool put_world(hwriter *w, scn_world *world) {
  flush_buf(w);
  uint64_t at = w->pos;
  unsigned char sec[SECTION_BYTES] = {0};
  put(w, sec, sizeof sec);
  w->crc = 0;
  w->bytes = w->versions = 0;
  scn_history_span span;
  fingerprint f = fingerprint_of(world);
  if (scn_world_history_export(world, &span, put_version, w) != SCN_OK)
    return false;
  flush_buf(w);
  const char *name = scn_world_name(world);
  sec[0] = (unsigned char)strlen(name);
  memcpy(sec + 1, name, sec[0]);
  u32_at(sec + 68, span.window);
  u64_at(sec + 72, span.now);
  u64_at(sec + 80, span.oldest);
  u64_at(sec + 88, f.count);
  u32_at(sec + 96, f.crc);
  u64_at(sec + 104, w->versions);
  u64_at(sec + 112, w->bytes);
  u32_at(sec + 120, w->crc);
  u32_at(sec + 124, scn_crc32c(0, sec, SECTION_BYTES - 4));
  if (!w->failed && pwrite(w->fd, sec, sizeof sec, (off_t)at) != (ssize_t)sizeof sec)
    w->failed = true;
  return !w->failed;
}

/* The file into w->fd from its start; header gets what goes at offset 0 (written by the
 * caller, last). */
static void write_to(hwriter *w, scn_scene *scene, const char *group, uint64_t epoch,
                     unsigned char header[HEADER_BYTES]) {
  memset(header, 0, HEADER_BYTES);
  put(w, header, HEADER_BYTES);
  uint32_t worlds = 0;
  for (size_t i = 0; i < scn_world_count(scene) && !w->failed; i++) {
    scn_world *world = scn_world_at(scene, i);
    if (!scn_world_in_group(scn_world_name(world), group))
      continue;
    if (!put_world(w, world))
      w->failed = true;
    worlds++;
  }
  flush_buf(w);
  uint32_t version = SCN_HISTORY_FILE_VERSION;
  memcpy(header, MAGIC, 8);
  u32_at(header + 8, version);
  u64_at(header + 16, epoch);
  u32_at(header + 24, worlds);
  u32_at(header + 12, scn_file_header_crc(header, HEADER_BYTES));
}

int scn_history_file_write(scn_scene *scene, const char *group, uint64_t epoch, const char *dir,
                           uint64_t *bytes, char *err, size_t errlen) {
  scn_path tmp, final;
  hwriter *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(err, errlen, "out of memory writing %s/%s", dir, SCN_HISTORY_FILE);
    return -1;
  }
  w->fd = scn_file_replace_open(dir, SCN_HISTORY_FILE, &tmp, &final, err, errlen);
  if (w->fd < 0) {
    free(w);
    return -1;
  }
  unsigned char header[HEADER_BYTES];
  write_to(w, scene, group, epoch, header);
  uint64_t size = w->pos;
  int rc = scn_file_replace_finish(w->fd, w->failed, header, sizeof header, tmp.s, final.s, dir,
                                   err, errlen);
  free(w);
  if (rc != 0)
    return -1;
  *bytes = size;
  return 0;
}

int scn_history_file_write_fd(scn_scene *scene, const char *group, uint64_t epoch, int fd,
                              uint64_t *bytes, char *err, size_t errlen) {
  hwriter *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(err, errlen, "out of memory writing a history");
    return -1;
  }
  w->fd = fd;
  unsigned char header[HEADER_BYTES];
  write_to(w, scene, group, epoch, header);
  uint64_t size = w->pos;
  bool ok = !w->failed && pwrite(fd, header, HEADER_BYTES, 0) == (ssize_t)HEADER_BYTES;
  free(w);
  if (!ok) {
    snprintf(err, errlen, "cannot write a history: %s", strerror(errno));
    return -1;
  }
  *bytes = size;
  return 0;
}

void scn_history_file_remove(const char *dir) {
  scn_path path;
  if (scn_path_join(&path, dir, SCN_HISTORY_FILE) && unlink(path.s) == 0)
    scn_fsync_dir(dir);
}

/* ---- reading ------------------------------------------------------------------------------- */

static uint32_t u32_of(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static uint64_t u64_of(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* The versions of one section, read as the import asks for them. */
typedef struct hreader {
  FILE *f;
  uint64_t left;     /* payload bytes not read yet */
  uint64_t versions; /* versions not read yet */
} hreader;

static bool take(hreader *r, void *out, size_t len) {
  if (len > r->left || fread(out, 1, len, r->f) != len)
    return false;
  r->left -= len;
  return true;
}

static int next_version(void *ud, scn_history_version *v) {
  hreader *r = ud;
  if (r->versions == 0)
    return r->left == 0 ? 0 : SCN_INVALID; /* bytes after the last version */
  uint8_t kind;
  memset(v, 0, sizeof *v);
  if (!take(r, &v->tick, 8) || !take(r, &v->entity, 8) || !take(r, &kind, 1))
    return SCN_INVALID;
  v->kind = (scn_version_kind)kind;
  if (kind == SCN_VERSION_STRUCT) {
    uint8_t exists, len;
    if (!take(r, &exists, 1) || exists > 1)
      return SCN_INVALID;
    v->exists = exists;
    if (exists && (!take(r, &v->parent, 8) || !take(r, &len, 1) || len > SCN_NAME_MAX ||
                   !take(r, v->name, len)))
      return SCN_INVALID;
  } else if (kind == SCN_VERSION_WORLD || kind == SCN_VERSION_LOCAL) {
    if (!take(r, v->m, 64))
      return SCN_INVALID;
  } else {
    return SCN_INVALID;
  }
  r->versions--;
  return 1;
}

/* CRC-32C of the next len bytes of f (which it reads). */
static bool payload_crc(FILE *f, uint64_t len, uint32_t *crc) {
  unsigned char buf[16384];
  *crc = 0;
  while (len) {
    size_t n = len < sizeof buf ? (size_t)len : sizeof buf;
    if (fread(buf, 1, n, f) != n)
      return false;
    *crc = scn_crc32c(*crc, buf, n);
    len -= n;
  }
  return true;
}

static void dropped(scn_history_load *out, const char *path, const char *world, const char *why) {
  out->dropped++;
  scn_log(SCN_LOG_WARN, "move: a world's history was dropped; it starts empty",
          "path=%s world=%s reason=\"%s\"", path, world, why);
}

/* One section: the world's tick count goes on; its history is checked, then imported. false
 * when the section cannot be read past (its header is damaged or cut short). */
static bool load_section(FILE *f, const char *path, scn_scene *scene, const char *group,
                         scn_history_load *out) {
  unsigned char sec[SECTION_BYTES];
  long at = ftell(f);
  if (fread(sec, 1, sizeof sec, f) != sizeof sec) {
    scn_log(SCN_LOG_WARN, "move: the history file ends early; the worlds not read start over",
            "path=%s offset=%ld", path, at);
    return false;
  }
  if (u32_of(sec + 124) != scn_crc32c(0, sec, SECTION_BYTES - 4) || sec[0] > SCN_NAME_MAX) {
    scn_log(SCN_LOG_WARN,
            "move: a damaged section header in the history file; the worlds not read start over",
            "path=%s offset=%ld", path, at);
    return false;
  }
  char name[SCN_NAME_MAX + 1];
  memcpy(name, sec + 1, sec[0]);
  name[sec[0]] = '\0';
  scn_history_span span = {u32_of(sec + 68), u64_of(sec + 80), u64_of(sec + 72)};
  uint64_t count = u64_of(sec + 88), versions = u64_of(sec + 104), bytes = u64_of(sec + 112);
  uint32_t print = u32_of(sec + 96), crc = u32_of(sec + 120);
  long payload = ftell(f);
  bool next_ok = payload >= 0 && bytes <= (uint64_t)INT64_MAX - (uint64_t)payload;
  scn_world *w = scn_world_in_group(name, group) ? scn_world_find(scene, name) : NULL;
  if (!w) {
    dropped(out, path, name, "no such world in the group");
  } else if (scn_world_continue_ticks(w, span.now) != SCN_OK) {
    dropped(out, path, name, "the world's ticks cannot go on from the file's");
  } else {
    out->worlds++;
    fingerprint fp = fingerprint_of(w);
    uint32_t got;
    if (span.window == 0 && versions == 0 && bytes == 0) {
      /* no history: the tick count was all */
    } else if (span.window != scn_world_history(w)) {
      dropped(out, path, name, "the world keeps another window");
    } else if (fp.count != count || fp.crc != print) {
      dropped(out, path, name, "the world's transforms are not those the history was kept for");
    } else if (!payload_crc(f, bytes, &got) || got != crc) {
      dropped(out, path, name, "checksum mismatch in its versions");
    } else if (fseek(f, payload, SEEK_SET) != 0) {
      dropped(out, path, name, "cannot read its versions");
    } else {
      hreader r = {f, bytes, versions};
      int rc = scn_world_history_import(w, &span, next_version, &r);
      if (rc != SCN_OK) {
        dropped(out, path, name, scn_err_message(rc));
      } else {
        out->histories++;
        out->versions += versions;
      }
    }
  }
  return next_ok && fseek(f, payload + (long)bytes, SEEK_SET) == 0;
}

int scn_history_file_load(scn_scene *scene, const char *group, uint64_t epoch, const char *dir,
                          scn_history_load *out) {
  scn_path path;
  char err[SCN_PATH_MSG_MAX];
  scn_path_join(&path, dir, SCN_HISTORY_FILE);
  memset(out, 0, sizeof *out);
  bool absent;
  FILE *f = scn_file_open(path.s, &absent, err, sizeof err);
  if (!f) {
    if (!absent)
      scn_log(SCN_LOG_WARN, "move: cannot read the history file; every world starts over",
              "error=\"%s\"", err);
    return absent ? 0 : 1;
  }
  unsigned char h[HEADER_BYTES];
  const char *bad = NULL;
  if (fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, MAGIC, 8) != 0)
    bad = "not a history file (bad header)";
  else if (u32_of(h + 12) != scn_file_header_crc(h, HEADER_BYTES))
    bad = "checksum mismatch in the header";
  else if (u32_of(h + 8) != SCN_HISTORY_FILE_VERSION)
    bad = "unsupported version";
  else if (u64_of(h + 16) != epoch)
    bad = "written in another epoch";
  if (bad) {
    scn_log(SCN_LOG_WARN, "move: the history file is not usable; every world starts over",
            "path=%s reason=\"%s\"", path.s, bad);
  } else {
    uint32_t worlds = u32_of(h + 24);
    for (uint32_t i = 0; i < worlds && load_section(f, path.s, scene, group, out); i++)
      ;
  }
  fclose(f);
  return 1;
}

#include "store/snapshot.h"

#include "store/crc32c.h"
#include "store/files.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC "SCNSNAP1"
#define HEADER_BYTES 32
#define BLOCK 65536
#define FILE_NAME "snapshot.scn"

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct writer {
  int fd;
  unsigned char block[BLOCK];
  size_t used;
  uint64_t body;
  bool failed;
} writer;

static void write_all(writer *w, const void *data, size_t len) {
  const char *p = data;
  while (len && !w->failed) {
    ssize_t n = write(w->fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      w->failed = true;
      return;
    }
    p += n;
    len -= (size_t)n;
  }
}

static void end_block(writer *w) {
  if (w->used == 0)
    return;
  uint32_t crc = scn_crc32c(0, w->block, w->used);
  write_all(w, w->block, w->used);
  write_all(w, &crc, 4);
  w->used = 0;
}

static void put(writer *w, const void *data, size_t len) {
  const unsigned char *p = data;
  w->body += len;
  while (len) {
    size_t n = BLOCK - w->used < len ? BLOCK - w->used : len;
    memcpy(w->block + w->used, p, n);
    w->used += n;
    p += n;
    len -= n;
    if (w->used == BLOCK)
      end_block(w);
  }
}

static void put_u8(writer *w, uint8_t v) { put(w, &v, 1); }
static void put_u32(writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(writer *w, uint64_t v) { put(w, &v, 8); }

static void put_name(writer *w, const char *name) {
  size_t len = name ? strlen(name) : 0;
  put_u8(w, (uint8_t)len);
  put(w, name, len);
}

static void put_transform(void *ud, scn_entity e, scn_entity parent, const char *name,
                          const float local[16]) {
  writer *w = ud;
  put_u64(w, e);
  put_u64(w, parent);
  put_name(w, name);
  put(w, local, sizeof(float) * 16);
}

/* The oldest version that holds the scene: 3 only when some world keeps history, so a scene
 * without it can still be read by a release before version 3. */
static uint32_t version_for(const scn_scene *scene) {
  for (size_t i = 0; i < scn_world_count(scene); i++)
    if (scn_world_history(scn_world_at(scene, i)))
      return 3;
  return 2;
}

static void put_world(writer *w, scn_world *world, uint32_t version) {
  put_name(w, scn_world_name(world));
  if (version >= 3)
    put_u32(w, scn_world_history(world));
  put_u32(w, (uint32_t)scn_world_transform_count(world));
  scn_world_visit_transforms(world, put_transform, w);
}

static void put_scene(writer *w, scn_scene *scene, uint32_t version) {
  uint32_t slots = scn_entity_slot_count(scene);
  put_u32(w, slots);
  for (uint32_t s = 1; s <= slots; s++) {
    bool alive;
    scn_entity id = scn_entity_slot_id(scene, s, &alive);
    put_u32(w, (uint32_t)(id >> 32));
    put_u8(w, alive);
  }
  const uint32_t *free_order;
  size_t nfree = scn_entity_free_order(scene, &free_order);
  put_u32(w, (uint32_t)nfree);
  put(w, free_order, sizeof(uint32_t) * nfree);
  put_u32(w, (uint32_t)scn_world_count(scene));
  for (size_t i = 0; i < scn_world_count(scene); i++)
    put_world(w, scn_world_at(scene, i), version);
}

void scn_group_of(const char *world, char *out) {
  size_t n = 0;
  for (; n < SCN_NAME_MAX && world[n] && world[n] != '.'; n++)
    out[n] = world[n];
  out[n] = '\0';
}

bool scn_world_in_group(const char *name, const char *group) {
  size_t n = strlen(group);
  return strncmp(name, group, n) == 0 && (name[n] == '\0' || name[n] == '.');
}

typedef struct id_list {
  scn_entity *ids;
  size_t len, cap;
  bool failed;
} id_list;

static void collect_id(void *ud, scn_entity e, scn_entity parent, const char *name,
                       const float local[16]) {
  (void)parent, (void)name, (void)local;
  id_list *l = ud;
  scn_entity *ids = scn_array_grow(l->ids, &l->cap, sizeof *ids, l->len + 1);
  if (!ids) {
    l->failed = true;
    return;
  }
  l->ids = ids;
  l->ids[l->len++] = e;
}

static int cmp_id(const void *a, const void *b) {
  scn_entity x = *(const scn_entity *)a, y = *(const scn_entity *)b;
  return x < y ? -1 : x > y;
}

static void sort_unique(id_list *l);

/* The ids used by the worlds of group (every world when group is NULL), sorted, once each. */
static bool used_ids(scn_scene *scene, const char *group, id_list *l) {
  for (size_t i = 0; i < scn_world_count(scene); i++) {
    scn_world *w = scn_world_at(scene, i);
    if (!group || scn_world_in_group(scn_world_name(w), group))
      scn_world_visit_transforms(w, collect_id, l);
  }
  sort_unique(l);
  return !l->failed;
}

static void sort_unique(id_list *l) {
  if (l->len)
    qsort(l->ids, l->len, sizeof *l->ids, cmp_id);
  size_t n = 0;
  for (size_t i = 0; i < l->len; i++)
    if (n == 0 || l->ids[n - 1] != l->ids[i])
      l->ids[n++] = l->ids[i];
  l->len = n;
}

/* A part's entities, sorted, each once: those its group's worlds use (none for the node's
 * part, group NULL), and those alive with the part's home tag and no transform in any world
 * (made for the group, or the node's own, and not placed yet). */
static bool part_ids(scn_scene *scene, const char *group, uint32_t home, id_list *l) {
  id_list used = {0};
  bool ok = (!group || used_ids(scene, group, l)) && used_ids(scene, NULL, &used);
  uint32_t slots = scn_entity_slot_count(scene);
  size_t k = 0;
  for (uint32_t s = 1; ok && s <= slots; s++) {
    bool alive;
    scn_entity id = scn_entity_slot_id(scene, s, &alive);
    while (k < used.len && used.ids[k] < id)
      k++;
    if (!alive || (k < used.len && used.ids[k] == id) || scn_entity_home(scene, id) != home)
      continue;
    collect_id(l, id, SCN_ENTITY_NONE, NULL, NULL);
  }
  free(used.ids);
  sort_unique(l);
  return ok && !l->failed;
}

scn_entity *scn_group_entities(scn_scene *scene, const char *group, uint32_t home, size_t *n) {
  id_list l = {0};
  if (!part_ids(scene, group, home, &l)) {
    free(l.ids);
    l.ids = NULL;
    l.len = 0;
  }
  *n = l.len;
  return l.ids;
}

/* A part: the epoch, its entities (part_ids), then the group's worlds. */
static bool put_part(writer *w, scn_scene *scene, const scn_snapshot_part *part) {
  id_list ids = {0};
  if (!part_ids(scene, part->group, part->home, &ids)) {
    free(ids.ids);
    return false;
  }
  put_u64(w, part->epoch);
  put_u64(w, ids.len);
  put(w, ids.ids, sizeof *ids.ids * ids.len);
  free(ids.ids);
  uint32_t worlds = 0;
  for (size_t i = 0; part->group && i < scn_world_count(scene); i++)
    worlds += scn_world_in_group(scn_world_name(scn_world_at(scene, i)), part->group);
  put_u32(w, worlds);
  for (size_t i = 0; part->group && i < scn_world_count(scene); i++) {
    scn_world *world = scn_world_at(scene, i);
    if (scn_world_in_group(scn_world_name(world), part->group))
      put_world(w, world, SCN_SNAPSHOT_VERSION_PART);
  }
  return true;
}

static int write_file(scn_scene *scene, const scn_snapshot_part *part, uint64_t journal_gen,
                      const char *dir, uint64_t *bytes, char *err, size_t errlen);

int scn_snapshot_write(scn_scene *scene, uint64_t journal_gen, const char *dir, uint64_t *bytes,
                       char *err, size_t errlen) {
  return write_file(scene, NULL, journal_gen, dir, bytes, err, errlen);
}

int scn_snapshot_write_part(scn_scene *scene, const scn_snapshot_part *part, uint64_t journal_gen,
                            const char *dir, uint64_t *bytes, char *err, size_t errlen) {
  return write_file(scene, part, journal_gen, dir, bytes, err, errlen);
}

/* The snapshot into w->fd from its start; header gets what goes at offset 0 (written by the
 * caller, last), *size the file's size. */
static void write_to(writer *w, scn_scene *scene, const scn_snapshot_part *part,
                     uint64_t journal_gen, unsigned char header[HEADER_BYTES], uint64_t *size) {
  /* The header is written last, once the body length is known. */
  memset(header, 0, HEADER_BYTES);
  write_all(w, header, HEADER_BYTES);
  uint32_t version = part ? SCN_SNAPSHOT_VERSION_PART : version_for(scene);
  if (!part)
    put_scene(w, scene, version);
  else if (!put_part(w, scene, part))
    w->failed = true;
  end_block(w);
  memcpy(header, MAGIC, 8);
  memcpy(header + 8, &version, 4);
  memcpy(header + 16, &journal_gen, 8);
  memcpy(header + 24, &w->body, 8);
  /* checked on load: a damaged journal generation would otherwise skip or replay journals */
  uint32_t hcrc = scn_file_header_crc(header, HEADER_BYTES);
  memcpy(header + 12, &hcrc, 4);
  *size = HEADER_BYTES + w->body + 4 * ((w->body + BLOCK - 1) / BLOCK);
}

static int write_file(scn_scene *scene, const scn_snapshot_part *part, uint64_t journal_gen,
                      const char *dir, uint64_t *bytes, char *err, size_t errlen) {
  scn_path tmp, final;
  writer *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(err, errlen, "out of memory writing a snapshot");
    return -1;
  }
  w->fd = scn_file_replace_open(dir, FILE_NAME, &tmp, &final, err, errlen);
  if (w->fd < 0) {
    free(w);
    return -1;
  }
  unsigned char header[HEADER_BYTES];
  uint64_t size;
  write_to(w, scene, part, journal_gen, header, &size);
  int rc = scn_file_replace_finish(w->fd, w->failed, header, sizeof header, tmp.s, final.s, dir,
                                   err, errlen);
  free(w);
  if (rc != 0)
    return -1;
  *bytes = size;
  return 0;
}

int scn_snapshot_write_part_fd(scn_scene *scene, const scn_snapshot_part *part,
                               uint64_t journal_gen, int fd, uint64_t *bytes, char *err,
                               size_t errlen) {
  writer *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(err, errlen, "out of memory writing a snapshot");
    return -1;
  }
  w->fd = fd;
  unsigned char header[HEADER_BYTES];
  uint64_t size;
  write_to(w, scene, part, journal_gen, header, &size);
  bool ok = !w->failed && pwrite(fd, header, HEADER_BYTES, 0) == (ssize_t)HEADER_BYTES;
  free(w);
  if (!ok) {
    snprintf(err, errlen, "cannot write a snapshot: %s", strerror(errno));
    return -1;
  }
  *bytes = size;
  return 0;
}

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct reader {
  FILE *f;
  const char *path;
  unsigned char block[BLOCK];
  size_t len, pos;      /* current block */
  uint64_t block_start; /* file offset of the current block */
  uint64_t body_left;   /* body bytes not yet loaded into a block */
  uint64_t file_pos;
  uint32_t version;
  bool bad;
  char *err;
  size_t errlen;
} reader;

static bool fail_at(reader *r, uint64_t offset, const char *what) {
  if (!r->bad)
    snprintf(r->err, r->errlen, "%s: %s at offset %llu", r->path, what, (unsigned long long)offset);
  r->bad = true;
  return false;
}

static bool next_block(reader *r) {
  if (r->body_left == 0)
    return fail_at(r, r->file_pos, "unexpected end of snapshot data");
  size_t n = r->body_left < BLOCK ? (size_t)r->body_left : BLOCK;
  uint32_t crc;
  r->block_start = r->file_pos;
  if (fread(r->block, 1, n, r->f) != n || fread(&crc, 1, 4, r->f) != 4)
    return fail_at(r, r->file_pos, "file is shorter than its header says (truncated)");
  if (scn_crc32c(0, r->block, n) != crc)
    return fail_at(r, r->block_start, "checksum mismatch in the block");
  r->file_pos += n + 4;
  r->body_left -= n;
  r->len = n;
  r->pos = 0;
  return true;
}

static bool get(reader *r, void *out, size_t len) {
  unsigned char *p = out;
  while (len) {
    if (r->bad)
      return false;
    if (r->pos == r->len && !next_block(r))
      return false;
    size_t n = r->len - r->pos < len ? r->len - r->pos : len;
    memcpy(p, r->block + r->pos, n);
    r->pos += n;
    p += n;
    len -= n;
  }
  return true;
}

static uint64_t offset_of(const reader *r) { return r->block_start + r->pos; }

static bool get_name(reader *r, char *out) {
  uint8_t len;
  if (!get(r, &len, 1) || len > SCN_NAME_MAX || !get(r, out, len))
    return r->bad ? false : fail_at(r, offset_of(r), "invalid name length");
  out[len] = '\0';
  return true;
}

static bool load_registry(reader *r, scn_scene *scene) {
  uint32_t slots, nfree;
  if (!get(r, &slots, 4))
    return false;
  uint32_t *gens = malloc(sizeof *gens * (slots ? slots : 1));
  uint8_t *alive = malloc(slots ? slots : 1);
  uint32_t *free_order = NULL;
  bool ok = gens && alive;
  for (uint32_t s = 0; ok && s < slots; s++)
    ok = get(r, &gens[s], 4) && get(r, &alive[s], 1);
  ok = ok && get(r, &nfree, 4) && nfree <= slots;
  if (ok && (free_order = malloc(sizeof *free_order * (nfree ? nfree : 1))) == NULL)
    ok = false;
  ok = ok && get(r, free_order, sizeof *free_order * nfree);
  /* With no free slot there is no order to set (and an empty registry has no storage). */
  const uint32_t *restored;
  if (ok && (scn_entity_restore(scene, slots, gens, alive) != SCN_OK ||
             (nfree ? scn_entity_set_free_order(scene, free_order, nfree) != SCN_OK
                    : scn_entity_free_order(scene, &restored) != 0)))
    ok = fail_at(r, offset_of(r), "inconsistent entity registry");
  if (!ok && !r->bad)
    fail_at(r, offset_of(r), "invalid entity registry");
  free(gens);
  free(alive);
  free(free_order);
  return ok;
}

/* A part's epoch and entities, each adopted (one already alive with that id is shared). */
static bool load_part_entities(reader *r, scn_scene *scene, scn_snapshot_info *info) {
  uint64_t n;
  if (!get(r, &info->epoch, 8) || !get(r, &n, 8))
    return false;
  for (uint64_t i = 0; i < n; i++) {
    scn_entity id;
    if (!get(r, &id, 8))
      return false;
    if (scn_entity_adopt(scene, id) != SCN_OK)
      return fail_at(r, offset_of(r), "an entity id that cannot be adopted");
  }
  return true;
}

static bool load_world(reader *r, scn_scene *scene, scn_snapshot_info *info) {
  char name[SCN_NAME_MAX + 1], tname[SCN_NAME_MAX + 1];
  uint32_t count, history = 0;
  scn_world *w;
  if (!get_name(r, name) || (r->version >= 3 && !get(r, &history, 4)) || !get(r, &count, 4))
    return false;
  if (scn_world_create(scene, name, &w) != SCN_OK)
    return fail_at(r, offset_of(r), "invalid or duplicate world");
  if (history > SCN_HISTORY_MAX || scn_world_set_history(w, history) != SCN_OK)
    return fail_at(r, offset_of(r), "invalid history window");
  for (uint32_t i = 0; i < count; i++) {
    uint64_t e, parent;
    float local[16];
    if (!get(r, &e, 8) || !get(r, &parent, 8) || !get_name(r, tname) ||
        !get(r, local, sizeof local))
      return false;
    if (scn_transform_create(w, e, parent, tname[0] ? tname : NULL, local) != SCN_OK)
      return fail_at(r, offset_of(r), "invalid transform");
    info->transforms++;
  }
  info->worlds++;
  return true;
}

int scn_snapshot_load(scn_scene *scene, const char *dir, bool recover, scn_snapshot_info *info,
                      char *err, size_t errlen) {
  scn_path path;
  scn_path_join(&path, dir, FILE_NAME);
  memset(info, 0, sizeof *info);
  bool absent;
  FILE *f = scn_file_open(path.s, &absent, err, errlen);
  if (!f)
    return absent ? 0 : -1;
  reader *r = calloc(1, sizeof *r);
  if (!r) {
    fclose(f);
    snprintf(err, errlen, "out of memory loading %s", path.s);
    return -1;
  }
  r->f = f;
  r->path = path.s;
  r->err = err;
  r->errlen = errlen;
  unsigned char header[HEADER_BYTES];
  uint32_t version = 0, hcrc = 0;
  int result = 1;
  if (fread(header, 1, sizeof header, f) != sizeof header || memcmp(header, MAGIC, 8) != 0) {
    fail_at(r, 0, "not a scened snapshot (bad header)");
  } else if (memcpy(&version, header + 8, 4),
             version < SCN_SNAPSHOT_VERSION_OLDEST || version > SCN_SNAPSHOT_VERSION_PART) {
    fail_at(r, 8, "unsupported snapshot version");
  } else if (memcpy(&hcrc, header + 12, 4), hcrc != scn_file_header_crc(header, HEADER_BYTES)) {
    fail_at(r, 0, "checksum mismatch in the header");
  } else {
    memcpy(&info->journal_gen, header + 16, 8);
    info->journal_created = version >= 2;
    info->part = version == SCN_SNAPSHOT_VERSION_PART;
    r->version = version;
    memcpy(&r->body_left, header + 24, 8);
    r->file_pos = HEADER_BYTES;
    r->block_start = HEADER_BYTES;
    uint32_t worlds = 0;
    if ((info->part ? load_part_entities(r, scene, info) : load_registry(r, scene)) &&
        get(r, &worlds, 4))
      for (uint32_t i = 0; i < worlds && load_world(r, scene, info); i++)
        ;
    if (!r->bad && (r->pos != r->len || r->body_left != 0))
      fail_at(r, offset_of(r), "unexpected data after the last world");
    long end = ftell(f);
    if (!r->bad && fgetc(f) != EOF)
      fail_at(r, (uint64_t)end, "unexpected bytes after the end of the snapshot");
  }
  if (r->bad) {
    uint64_t at = r->block_start;
    result = -1;
    /* Recovery keeps what was read: whole worlds before the damage (and the registry). A
     * damaged header or registry leaves nothing to keep. */
    if (recover && scn_entity_slot_count(scene) > 0) {
      info->damaged = true;
      info->damaged_at = at;
      result = 1;
    }
  }
  info->bytes = (uint64_t)ftell(f);
  fclose(f);
  free(r);
  return result;
}

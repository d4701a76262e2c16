/* Snapshots: the whole scene (entity registry with generations and reuse order, every world
 * with every transform's parent, name, child order and local matrix) in one file.
 *
 * Layout (little-endian): a 32-byte header (magic "SCNSNAP1", version, the header's CRC-32C,
 * journal generation, body length), then the body in 64 KiB blocks, each followed by its
 * CRC-32C, so damage is found and located to a block. */
#ifndef SCN_SNAPSHOT_H
#define SCN_SNAPSHOT_H

#include "scn_core.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Version 2 has the layout of version 1 and promises that the journal of the generation it
 * names was created before it (version 1's final snapshot did not), so only a snapshot of
 * version 2 or later without that journal means lost data. Version 3 adds each world's history
 * window (the ticks it keeps; the kept ticks themselves are not persisted); it is written only
 * when some world keeps history, version 2 otherwise. All are read. */
#define SCN_SNAPSHOT_VERSION 3
#define SCN_SNAPSHOT_VERSION_OLDEST 1
/* Version 4 is a part of a cluster's scene: a group's worlds with the entities they use, or a
 * node's entities that have no transform. Its body starts with the owner's epoch and the ids
 * of those entities (each adopted by the scene that loads it), then the worlds as in version
 * 3 (with their history windows). */
#define SCN_SNAPSHOT_VERSION_PART 4

/* Which part of a scene a version 3 snapshot holds. */
/* A home tag no entity has. */
#define SCN_HOME_NONE UINT32_MAX

typedef struct scn_snapshot_part {
  const char *group; /* the worlds of this group (name up to the first '.'); NULL: no world,
                        and the entities alive without a transform in any world */
  uint64_t epoch;    /* the owner's fencing epoch, recorded in the file */
  uint32_t home;     /* the entity home tag of what belongs to the part (the node's: 0) */
} scn_snapshot_part;

/* Whether world name is in group (its name up to the first '.', or the whole name). */
bool scn_world_in_group(const char *name, const char *group);
/* The group of a world: its name up to the first '.' (out: SCN_NAME_MAX + 1 bytes). */
void scn_group_of(const char *world, char *out);
/* A part's entities, sorted, each once: those the group's worlds use (group NULL: none), and
 * those alive with the home tag and no transform in any world (caller frees; NULL with *n 0
 * when there are none or memory ran out). */
scn_entity *scn_group_entities(scn_scene *scene, const char *group, uint32_t home, size_t *n);

/* Writes scene to path via a temporary file: written, fsynced, renamed, directory fsynced.
 * Returns 0 and the file size, or -1 with a message in err. */
int scn_snapshot_write(scn_scene *scene, uint64_t journal_gen, const char *dir, uint64_t *bytes,
                       char *err, size_t errlen);
/* The same for a part of the scene (version 3). */
int scn_snapshot_write_part(scn_scene *scene, const scn_snapshot_part *part, uint64_t journal_gen,
                            const char *dir, uint64_t *bytes, char *err, size_t errlen);

/* The same, into fd (open for reading and writing, empty) and nothing more: no rename and no
 * fsync, for a copy that is read back at once and never kept (a follower's copy). */
int scn_snapshot_write_part_fd(scn_scene *scene, const scn_snapshot_part *part,
                               uint64_t journal_gen, int fd, uint64_t *bytes, char *err,
                               size_t errlen);

typedef struct scn_snapshot_info {
  uint64_t journal_gen;
  uint64_t bytes;
  uint64_t worlds, transforms;
  bool journal_created; /* the journal of journal_gen existed before the snapshot (version 2) */
  bool part;            /* version 3: a part, whose entities were adopted */
  uint64_t epoch;       /* version 3: the epoch of the owner that wrote it */
  bool damaged;         /* with recover: data past damaged_at was dropped */
  uint64_t damaged_at;
} scn_snapshot_info;

/* Loads path into an empty scene. Returns 1 loaded, 0 no snapshot, -1 damaged (err names the
 * file and offset). With recover, a damaged snapshot keeps every world read before the
 * damage and returns 1 with info->damaged set. */
int scn_snapshot_load(scn_scene *scene, const char *dir, bool recover, scn_snapshot_info *info,
                      char *err, size_t errlen);

#endif

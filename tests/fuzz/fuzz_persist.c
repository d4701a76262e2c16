/* Fuzz target: loading a snapshot and replaying a journal from damaged bytes. The first two
 * input bytes give the snapshot's length (little-endian); that many bytes are written as
 * snapshot.scn and the rest as journal.0.scn in a scratch directory. Loading must fail
 * cleanly or produce a consistent scene. */
#include "store/journal.h"
#include "store/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void write_file(const char *name, const uint8_t *data, size_t size) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f)
    abort();
  fwrite(data, 1, size, f);
  fclose(f);
}

static bool count_record(void *ud, const char *line, size_t len) {
  (void)line, (void)len;
  ++*(size_t *)ud;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/scened-fuzz-XXXXXX");
    if (!mkdtemp(dir))
      abort();
  }
  if (size < 2)
    return 0;
  size_t split = ((size_t)data[0] | (size_t)data[1] << 8) % (size - 1);
  write_file("snapshot.scn", data + 2, split);
  write_file("journal.0.scn", data + 2 + split, size - 2 - split);
  char err[512];
  for (int recover = 0; recover <= 1; recover++) {
    scn_scene *scene = scn_scene_new(NULL);
    scn_snapshot_info info;
    if (scn_snapshot_load(scene, dir, recover, &info, err, sizeof err) == 1)
      for (size_t i = 0; i < scn_world_count(scene); i++)
        if (scn_world_check(scn_world_at(scene, i), err, sizeof err) != 0)
          abort();
    scn_scene_free(scene);
    char path[128];
    snprintf(path, sizeof path, "%s/journal.0.scn", dir);
    scn_journal_scan scan;
    size_t records = 0;
    scn_journal_replay(path, recover, count_record, &records, &scan, err, sizeof err);
    if (records != scan.records)
      abort();
  }
  return 0;
}

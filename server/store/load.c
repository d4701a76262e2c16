/* Loading the data directory at start: the snapshot, then every journal it does not cover,
 * each record run through the replay callback (the dispatcher's). Anything missing or damaged
 * refuses the start unless --recover, which keeps what is valid and logs what was lost. */
#include "store/persist_internal.h"

#include "ops/log.h"
#include "store/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct replay_ctx {
  scn_persist *p;
  scn_replay_fn fn;
  void *ud;
} replay_ctx;

static bool replay_line(void *ud, const char *line, size_t len) {
  replay_ctx *r = ud;
  if (!r->fn(r->ud, line, len))
    scn_log(SCN_LOG_WARN, "journal: a recorded command failed on replay", "command=\"%.*s\"",
            (int)(len < 80 ? len : 80), line);
  r->p->stats.replayed++;
  return true;
}

static int usable_dir(scn_persist *p, const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (errno != ENOENT || mkdir(dir, 0755) != 0) {
      fprintf(stderr, "scened: data directory %s is unusable: %s\n", dir, strerror(errno));
      return 2;
    }
  } else if (!S_ISDIR(st.st_mode)) {
    fprintf(stderr, "scened: data directory %s is not a directory\n", dir);
    return 2;
  }
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/.scened-lock", dir);
  p->lock_fd = open(probe, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (p->lock_fd < 0) {
    fprintf(stderr, "scened: data directory %s is not writable: %s\n", dir, strerror(errno));
    return 2;
  }
  if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    fprintf(stderr, "scened: data directory %s is in use by another scened\n", dir);
    return 2;
  }
  return 0;
}

int scn__persist_load(scn_persist *p, scn_replay_fn replay, void *replay_ud) {
  scn_server *srv = p->srv;
  const scn_config *cfg = &srv->cfg;
  int rc = usable_dir(p, p->dir);
  if (rc)
    return rc;
  char err[4400];
  scn_snapshot_info info;
  uint64_t t0 = uv_hrtime();
  int loaded = scn_snapshot_load(srv->scene, p->dir, cfg->recover, &info, err, sizeof err);
  if (loaded < 0) {
    if (!cfg->recover) {
      fprintf(stderr, "scened: %s (start with --recover to keep what is valid)\n", err);
      return 1;
    }
    /* Nothing in the snapshot could be kept: start from an empty scene, then the journals. */
    scn_log(SCN_LOG_ERROR, "recover: the whole snapshot is lost", "reason=\"%s\"", err);
    scn_limits limits = *scn_scene_limits(srv->scene);
    scn_scene_free(srv->scene);
    srv->scene = scn_scene_new(&limits);
    if (!srv->scene) {
      fprintf(stderr, "scened: out of memory\n");
      return 1;
    }
    info.journal_gen = 0;
  }
  if (info.damaged)
    scn_log(SCN_LOG_ERROR, "recover: snapshot damaged; kept what was read before the damage",
            "reason=\"%s\" kept_worlds=%llu kept_transforms=%llu", err,
            (unsigned long long)info.worlds, (unsigned long long)info.transforms);
  p->gen = info.journal_gen;
  uint64_t gens[4096];
  size_t n = scn__journal_list(p, gens, 4096);
  replay_ctx rp = {p, replay, replay_ud};
  /* A snapshot is written only after the journal it continues in exists (even empty), so
   * without that journal the changes after the snapshot are gone. */
  if (loaded > 0 && !info.damaged && info.journal_created) {
    char path[4200];
    scn__journal_path(p, info.journal_gen, path, sizeof path);
    if (access(path, F_OK) != 0) {
      if (!cfg->recover) {
        fprintf(stderr,
                "scened: %s: missing (snapshot.scn continues in it; start with --recover to "
                "keep what is valid)\n",
                path);
        return 1;
      }
      scn_log(SCN_LOG_ERROR, "recover: the journal after the snapshot is missing", "path=%s", path);
    }
  }
  /* The journals to replay must start at the snapshot's generation and have no gap: a journal
   * of a later generation without the snapshot (or journal) before it is partial state. */
  uint64_t expect = info.journal_gen;
  for (size_t i = 0; i < n; i++) {
    if (gens[i] < info.journal_gen)
      continue;
    if (gens[i] != expect) {
      char what[4400];
      if (expect == 0 && loaded == 0)
        snprintf(what, sizeof what, "%s/snapshot.scn: missing, but journal.%llu.scn follows one",
                 p->dir, (unsigned long long)gens[i]);
      else
        snprintf(what, sizeof what, "%s/journal.%llu.scn: missing (journal.%llu.scn follows it)",
                 p->dir, (unsigned long long)expect, (unsigned long long)gens[i]);
      if (!cfg->recover) {
        fprintf(stderr, "scened: %s (start with --recover to keep what is valid)\n", what);
        return 1;
      }
      scn_log(SCN_LOG_ERROR, "recover: data is missing; replaying what is there", "reason=\"%s\"",
              what);
    }
    expect = gens[i] + 1;
  }
  for (size_t i = 0; i < n; i++) {
    if (gens[i] < info.journal_gen)
      continue; /* covered by the snapshot: left over from before it was completed */
    char path[4200];
    scn__journal_path(p, gens[i], path, sizeof path);
    scn_journal_scan scan;
    if (scn_journal_replay(path, cfg->recover, replay_line, &rp, &scan, err, sizeof err) != 0) {
      fprintf(stderr, "scened: %s (start with --recover to keep what is valid)\n", err);
      return 1;
    }
    if (scan.skipped_records)
      scn_log(SCN_LOG_ERROR, "recover: skipped damaged journal data", "path=%s bytes=%llu", path,
              (unsigned long long)scan.skipped_bytes);
    /* cut, so that new records do not follow the damage */
    if (scan.damaged_tail && truncate(path, (off_t)scan.valid_end) != 0)
      scn_log(SCN_LOG_WARN, "journal: cannot truncate", "path=%s", path);
    if (scan.torn) {
      if (i + 1 < n && !cfg->recover) {
        fprintf(stderr,
                "scened: %s: damaged record at offset %llu before a newer journal (start with "
                "--recover to keep what is valid)\n",
                path, (unsigned long long)scan.torn_at);
        return 1;
      }
      scn_log(SCN_LOG_WARN, "journal: dropped a torn last record (a write cut short)",
              "path=%s offset=%llu", path, (unsigned long long)scan.torn_at);
      if (truncate(path, (off_t)scan.valid_end) != 0)
        scn_log(SCN_LOG_WARN, "journal: cannot truncate", "path=%s", path);
    }
    if (gens[i] > p->gen)
      p->gen = gens[i];
  }
  p->journal_fd = scn__journal_open(p, p->gen);
  if (p->journal_fd < 0) {
    fprintf(stderr, "scened: cannot open the journal in %s\n", p->dir);
    return 2;
  }
  scn_log(SCN_LOG_INFO, "data loaded",
          "dir=%s snapshot=%s worlds=%zu transforms=%zu entities=%zu replayed=%llu ms=%.1f", p->dir,
          loaded ? "yes" : "none", scn_world_count(srv->scene),
          scn_scene_transform_count(srv->scene), scn_entity_count(srv->scene),
          (unsigned long long)p->stats.replayed, (double)(uv_hrtime() - t0) / 1e6);
  return 0;
}

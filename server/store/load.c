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
  scn_chain *chain;
  scn_replay_fn fn;
  void *ud;
} replay_ctx;

static bool replay_line(void *ud, const char *line, size_t len) {
  replay_ctx *r = ud;
  if (!r->fn(r->ud, line, len))
    scn_log(SCN_LOG_WARN, "journal: a recorded command failed on replay", "command=\"%.*s\"",
            (int)(len < 80 ? len : 80), line);
  r->chain->replayed++;
  return true;
}

int scn__usable_dir(const char *dir, int *lock_fd, const char *lock_name) {
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
  scn_path lock;
  *lock_fd =
      scn_path_join(&lock, dir, lock_name) ? open(lock.s, O_RDWR | O_CREAT | O_CLOEXEC, 0644) : -1;
  if (*lock_fd < 0) {
    fprintf(stderr, "scened: data directory %s is not writable: %s\n", dir, strerror(errno));
    return 2;
  }
  if (flock(*lock_fd, LOCK_EX | LOCK_NB) != 0) {
    fprintf(stderr, "scened: data directory %s is in use by another scened\n", dir);
    return 2;
  }
  return 0;
}

/* Loads dir's snapshot into *scene, then replays every journal it does not cover, checking
 * that the chain has no gap; see persist_internal.h. */
int scn__load_chain(scn_scene **scene, const char *dir, bool recover, bool may_reset,
                    scn_replay_fn replay, void *replay_ud, scn_chain *out, char *msg,
                    size_t msglen) {
  char err[SCN_PATH_MSG_MAX];
  scn_snapshot_info *info = &out->info;
  memset(out, 0, sizeof *out);
  int loaded = scn_snapshot_load(*scene, dir, recover, info, err, sizeof err);
  if (loaded < 0) {
    if (!recover || !may_reset) {
      snprintf(msg, msglen, "%s (start with --recover to keep what is valid)", err);
      return 1;
    }
    /* Nothing in the snapshot could be kept: start from an empty scene, then the journals. */
    scn_log(SCN_LOG_ERROR, "recover: the whole snapshot is lost", "reason=\"%s\"", err);
    scn_limits limits = *scn_scene_limits(*scene);
    scn_scene_free(*scene);
    *scene = scn_scene_new(&limits);
    if (!*scene) {
      snprintf(msg, msglen, "out of memory");
      return 1;
    }
    info->journal_gen = 0;
  }
  out->snapshot = loaded > 0;
  if (info->damaged)
    scn_log(SCN_LOG_ERROR, "recover: snapshot damaged; kept what was read before the damage",
            "reason=\"%s\" kept_worlds=%llu kept_transforms=%llu", err,
            (unsigned long long)info->worlds, (unsigned long long)info->transforms);
  out->gen = info->journal_gen;
  uint64_t gens[4096];
  size_t n = scn_journal_list(dir, gens, 4096);
  replay_ctx rp = {out, replay, replay_ud};
  /* A snapshot is written only after the journal it continues in exists (even empty), so
   * without that journal the changes after the snapshot are gone. */
  if (loaded > 0 && !info->damaged && info->journal_created) {
    scn_path path;
    scn_journal_path(&path, dir, info->journal_gen);
    if (access(path.s, F_OK) != 0) {
      if (!recover) {
        snprintf(msg, msglen,
                 "%s: missing (snapshot.scn continues in it; start with --recover to keep what "
                 "is valid)",
                 path.s);
        return 1;
      }
      scn_log(SCN_LOG_ERROR, "recover: the journal after the snapshot is missing", "path=%s",
              path.s);
    }
  }
  /* The journals to replay must start at the snapshot's generation and have no gap: a journal
   * of a later generation without the snapshot (or journal) before it is partial state. */
  uint64_t expect = info->journal_gen;
  for (size_t i = 0; i < n; i++) {
    if (gens[i] < info->journal_gen)
      continue;
    if (gens[i] != expect) {
      char what[SCN_PATH_MSG_MAX];
      if (expect == 0 && loaded == 0)
        snprintf(what, sizeof what, "%s/snapshot.scn: missing, but journal.%llu.scn follows one",
                 dir, (unsigned long long)gens[i]);
      else
        snprintf(what, sizeof what, "%s/journal.%llu.scn: missing (journal.%llu.scn follows it)",
                 dir, (unsigned long long)expect, (unsigned long long)gens[i]);
      if (!recover) {
        snprintf(msg, msglen, "%s (start with --recover to keep what is valid)", what);
        return 1;
      }
      scn_log(SCN_LOG_ERROR, "recover: data is missing; replaying what is there", "reason=\"%s\"",
              what);
    }
    expect = gens[i] + 1;
  }
  for (size_t i = 0; i < n; i++) {
    if (gens[i] < info->journal_gen)
      continue; /* covered by the snapshot: left over from before it was completed */
    scn_path journal;
    scn_journal_path(&journal, dir, gens[i]);
    const char *path = journal.s;
    scn_journal_scan scan;
    if (scn_journal_replay(path, recover, replay_line, &rp, &scan, err, sizeof err) != 0) {
      snprintf(msg, msglen, "%s (start with --recover to keep what is valid)", err);
      return 1;
    }
    if (scan.skipped_records)
      scn_log(SCN_LOG_ERROR, "recover: skipped damaged journal data", "path=%s bytes=%llu", path,
              (unsigned long long)scan.skipped_bytes);
    /* cut, so that new records do not follow the damage */
    if (scan.damaged_tail && truncate(path, (off_t)scan.valid_end) != 0)
      scn_log(SCN_LOG_WARN, "journal: cannot truncate", "path=%s", path);
    if (scan.torn) {
      if (i + 1 < n && !recover) {
        snprintf(msg, msglen,
                 "%s: damaged record at offset %llu before a newer journal (start with "
                 "--recover to keep what is valid)",
                 path, (unsigned long long)scan.torn_at);
        return 1;
      }
      scn_log(SCN_LOG_WARN, "journal: dropped a torn last record (a write cut short)",
              "path=%s offset=%llu", path, (unsigned long long)scan.torn_at);
      if (truncate(path, (off_t)scan.valid_end) != 0)
        scn_log(SCN_LOG_WARN, "journal: cannot truncate", "path=%s", path);
    }
    if (gens[i] > out->gen)
      out->gen = gens[i];
  }
  return 0;
}

int scn__persist_load(scn_persist *p, scn_replay_fn replay, void *replay_ud) {
  scn_server *srv = p->srv;
  int rc = scn__usable_dir(p->dir.s, &p->lock_fd, ".scened-lock");
  if (rc)
    return rc;
  uint64_t t0 = uv_hrtime();
  scn_chain chain;
  char msg[SCN_PATH_MSG_MAX];
  if (scn__load_chain(&srv->scene, p->dir.s, srv->cfg.recover, true, replay, replay_ud, &chain, msg,
                      sizeof msg) != 0) {
    fprintf(stderr, "scened: %s\n", msg);
    return 1;
  }
  p->stats.replayed = chain.replayed;
  if (scn_jwriter_open(&p->journal, p->dir.s, chain.gen) != 0) {
    fprintf(stderr, "scened: cannot open the journal in %s\n", p->dir.s);
    return 2;
  }
  scn_log(SCN_LOG_INFO, "data loaded",
          "dir=%s snapshot=%s worlds=%zu transforms=%zu entities=%zu replayed=%llu ms=%.1f",
          p->dir.s, chain.snapshot ? "yes" : "none", scn_world_count(srv->scene),
          scn_scene_transform_count(srv->scene), scn_entity_count(srv->scene),
          (unsigned long long)p->stats.replayed, (double)(uv_hrtime() - t0) / 1e6);
  return 0;
}

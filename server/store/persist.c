#include "store/persist.h"

#include "store/journal.h"
#include "server.h"
#include "store/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct waiter {
  struct waiter *next;
  scn_conn *conn;
  char *id_json;      /* the request's id as JSON, NULL when it had none */
  uint64_t after_gen; /* satisfied by a snapshot covering journal generations up to this */
} waiter;

static struct {
  bool enabled;
  char dir[4096];
  int lock_fd;
  int journal_fd;
  uint64_t gen; /* generation of the journal being appended to */
  scn_buf pending;
  uint64_t unsynced;
  uint64_t changes; /* mutations since the last snapshot started */
  pid_t child;
  uint64_t child_gen;
  uint64_t child_started_ns;
  bool again; /* a save arrived while a child ran */
  waiter *waiters;
  uv_timer_t fsync_timer, autosave_timer, child_timer;
  uv_fs_t fsync_req;
  bool fsync_inflight;
  scn_persist_stats stats;
} P = {.journal_fd = -1, .lock_fd = -1};

bool scn_persist_enabled(const scn_server *srv) {
  (void)srv;
  return P.enabled;
}

void scn_persist_get_stats(const scn_server *srv, scn_persist_stats *out) {
  (void)srv;
  *out = P.stats;
  out->snapshot_running = P.child > 0;
  out->journal_gen = P.gen;
}

static void journal_path(uint64_t gen, char *out, size_t n) {
  snprintf(out, n, "%s/journal.%llu.scn", P.dir, (unsigned long long)gen);
}

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the directory ------------------------------------------------------------------------ */

static int usable_dir(const char *dir) {
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
  P.lock_fd = open(probe, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (P.lock_fd < 0) {
    fprintf(stderr, "scened: data directory %s is not writable: %s\n", dir, strerror(errno));
    return 2;
  }
  if (flock(P.lock_fd, LOCK_EX | LOCK_NB) != 0) {
    fprintf(stderr, "scened: data directory %s is in use by another scened\n", dir);
    return 2;
  }
  return 0;
}

/* Journal generations present, ascending. */
static size_t list_journals(uint64_t *gens, size_t cap) {
  DIR *d = opendir(P.dir);
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

static void remove_journals_before(uint64_t gen) {
  uint64_t gens[4096];
  size_t n = list_journals(gens, 4096);
  for (size_t i = 0; i < n; i++)
    if (gens[i] < gen) {
      char path[4200];
      journal_path(gens[i], path, sizeof path);
      unlink(path);
    }
}

/* ---- loading ------------------------------------------------------------------------------ */

static bool replay_line(void *ud, const char *line, size_t len) {
  scn_server *srv = ud;
  if (!scn_dispatch_replay(srv, line, len))
    scn_log(SCN_LOG_WARN, "journal: a recorded command failed on replay", "command=\"%.80s\"",
            line);
  P.stats.replayed++;
  return true;
}

static int open_journal(uint64_t gen) {
  char path[4200];
  journal_path(gen, path, sizeof path);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    scn_log(SCN_LOG_ERROR, "cannot open the journal", "path=%s error=\"%s\"", path,
            strerror(errno));
  return fd;
}

int scn_persist_open(scn_server *srv) {
  const scn_config *cfg = &srv->cfg;
  snprintf(P.dir, sizeof P.dir, "%s", cfg->data_dir);
  int rc = usable_dir(P.dir);
  if (rc)
    return rc;
  char err[4400];
  scn_snapshot_info info;
  uint64_t t0 = uv_hrtime();
  int loaded = scn_snapshot_load(srv->scene, P.dir, cfg->recover, &info, err, sizeof err);
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
  P.gen = info.journal_gen;
  uint64_t gens[4096];
  size_t n = list_journals(gens, 4096);
  /* A snapshot is written only after the journal it continues in exists (even empty), so
   * without that journal the changes after the snapshot are gone. */
  if (loaded > 0 && !info.damaged && info.journal_created) {
    char path[4200];
    journal_path(info.journal_gen, path, sizeof path);
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
                 P.dir, (unsigned long long)gens[i]);
      else
        snprintf(what, sizeof what, "%s/journal.%llu.scn: missing (journal.%llu.scn follows it)",
                 P.dir, (unsigned long long)expect, (unsigned long long)gens[i]);
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
    journal_path(gens[i], path, sizeof path);
    scn_journal_scan scan;
    if (scn_journal_replay(path, cfg->recover, replay_line, srv, &scan, err, sizeof err) != 0) {
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
    if (gens[i] > P.gen)
      P.gen = gens[i];
  }
  P.journal_fd = open_journal(P.gen);
  if (P.journal_fd < 0) {
    fprintf(stderr, "scened: cannot open the journal in %s\n", P.dir);
    return 2;
  }
  P.enabled = true;
  scn_log(SCN_LOG_INFO, "data loaded",
          "dir=%s snapshot=%s worlds=%zu transforms=%zu entities=%zu replayed=%llu ms=%.1f", P.dir,
          loaded ? "yes" : "none", scn_world_count(srv->scene),
          scn_scene_transform_count(srv->scene), scn_entity_count(srv->scene),
          (unsigned long long)P.stats.replayed, (double)(uv_hrtime() - t0) / 1e6);
  return 0;
}

/* ---- the journal -------------------------------------------------------------------------- */

void scn_persist_record(scn_server *srv, const char *line, size_t len) {
  (void)srv;
  if (!P.enabled)
    return;
  scn_journal_encode(&P.pending, line, len);
  P.changes++;
  P.stats.journal_records++;
}

static bool write_pending(void) {
  size_t off = 0;
  while (off < P.pending.len) {
    ssize_t n = write(P.journal_fd, P.pending.data + off, P.pending.len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      scn_log(SCN_LOG_ERROR, "journal write failed", "error=\"%s\"", strerror(errno));
      return false;
    }
    off += (size_t)n;
  }
  P.stats.journal_bytes += P.pending.len;
  P.unsynced += P.pending.len;
  P.pending.len = 0;
  return true;
}

void scn_persist_commit(scn_server *srv) {
  if (!P.enabled || P.pending.len == 0)
    return;
  if (!write_pending())
    return;
  if (srv->cfg.fsync == SCN_FSYNC_ALWAYS && P.unsynced) {
    if (fdatasync(P.journal_fd) != 0)
      scn_log(SCN_LOG_ERROR, "journal fsync failed", "error=\"%s\"", strerror(errno));
    P.unsynced = 0;
    P.stats.fsyncs++;
  }
}

static void on_fsynced(uv_fs_t *req) {
  if (req->result < 0)
    scn_log(SCN_LOG_ERROR, "journal fsync failed", "error=\"%s\"", uv_strerror((int)req->result));
  uv_fs_req_cleanup(req);
  P.fsync_inflight = false;
  P.stats.fsyncs++;
}

/* everysec: the fsync runs on libuv's thread pool so the loop never waits for the disk. */
static void on_fsync_timer(uv_timer_t *t) {
  scn_server *srv = t->data;
  scn_persist_commit(srv);
  if (P.unsynced == 0 || P.fsync_inflight || P.journal_fd < 0)
    return;
  P.unsynced = 0;
  P.fsync_inflight = true;
  if (uv_fs_fdatasync(srv->loop, &P.fsync_req, P.journal_fd, on_fsynced) != 0)
    P.fsync_inflight = false;
}

/* ---- snapshots ---------------------------------------------------------------------------- */

/* Replies to the save commands this snapshot satisfies (or all of them, on failure). */
static void answer_waiters(scn_server *srv, uint64_t covered_gen, bool ok, uint64_t bytes,
                           const char *why) {
  (void)srv;
  char path[4200];
  snprintf(path, sizeof path, "%s/snapshot.scn", P.dir);
  /* The answered ones leave the list first: resuming a connection runs its held requests,
   * which may add a waiter (a pipelined save) while this walks the list. */
  waiter *ready = NULL, **tail = &ready;
  waiter **pw = &P.waiters;
  while (*pw) {
    waiter *w = *pw;
    if (ok && w->after_gen > covered_gen) {
      pw = &w->next;
      continue;
    }
    *pw = w->next;
    w->next = NULL;
    *tail = w;
    tail = &w->next;
  }
  while (ready) {
    waiter *w = ready;
    ready = w->next;
    scn_buf *out = &w->conn->out.bytes;
    scn_buf_addc(out, '{');
    if (w->id_json) {
      scn_buf_adds(out, "\"id\":");
      scn_buf_adds(out, w->id_json);
      scn_buf_addc(out, ',');
    }
    if (ok) {
      scn_buf_adds(out, "\"ok\":true,\"path\":");
      scn_buf_add_json_string(out, path, strlen(path));
      scn_buf_adds(out, ",\"bytes\":");
      scn_buf_add_u64(out, bytes);
    } else {
      scn_buf_adds(out, "\"ok\":false,\"error\":{\"code\":\"INTERNAL\",\"message\":");
      char msg[256];
      snprintf(msg, sizeof msg, "snapshot failed: %s", why);
      scn_buf_add_json_string(out, msg, strlen(msg));
      scn_buf_addc(out, '}');
    }
    scn_buf_adds(out, "}\n");
    scn_conn_resume(w->conn);
    free(w->id_json);
    free(w);
  }
}

static void start_child(scn_server *srv);

static void on_child_poll(uv_timer_t *t) {
  scn_server *srv = t->data;
  int status;
  pid_t r = waitpid(P.child, &status, WNOHANG);
  if (r == 0)
    return;
  uv_timer_stop(&P.child_timer);
  double secs = (double)(uv_hrtime() - P.child_started_ns) / 1e9;
  uint64_t gen = P.child_gen;
  P.child = 0;
  bool ok = r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  struct stat st;
  char path[4200];
  snprintf(path, sizeof path, "%s/snapshot.scn", P.dir);
  uint64_t bytes = ok && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
  if (ok) {
    remove_journals_before(gen);
    P.stats.snapshots++;
    P.stats.last_snapshot_bytes = bytes;
    P.stats.last_snapshot_seconds = secs;
    P.stats.last_snapshot_unix = wall_seconds();
    scn_log(SCN_LOG_INFO, "snapshot written", "path=%s bytes=%llu seconds=%.3f", path,
            (unsigned long long)bytes, secs);
  } else {
    P.stats.snapshot_failures++;
    scn_log(SCN_LOG_ERROR, "snapshot failed", "status=%d", status);
  }
  answer_waiters(srv, gen, ok, bytes, "the snapshot writer failed (see the log)");
  if (P.again) {
    P.again = false;
    if (!P.child) /* answering may already have started the next one */
      start_child(srv);
  }
}

/* The child holds a copy-on-write image of the scene as of the fork: every command answered
 * so far is in it, and later ones go to the new journal generation. */
static void start_child(scn_server *srv) {
  scn_persist_commit(srv);
  uint64_t gen = P.gen + 1;
  int fd = open_journal(gen);
  if (fd < 0) {
    answer_waiters(srv, UINT64_MAX, false, 0, "cannot open a new journal");
    return;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    char path[4200];
    journal_path(gen, path, sizeof path);
    unlink(path);
    P.stats.snapshot_failures++;
    answer_waiters(srv, UINT64_MAX, false, 0, "fork failed");
    return;
  }
  if (pid == 0) {
    char err[4400];
    uint64_t bytes;
    int rc = scn_snapshot_write(srv->scene, gen, P.dir, &bytes, err, sizeof err);
    if (rc != 0)
      fprintf(stderr, "scened: snapshot: %s\n", err);
    _exit(rc == 0 ? 0 : 1);
  }
  close(P.journal_fd);
  P.journal_fd = fd;
  P.gen = gen;
  P.child = pid;
  P.child_gen = gen;
  P.child_started_ns = uv_hrtime();
  P.changes = 0;
  uv_timer_start(&P.child_timer, on_child_poll, 5, 5);
}

bool scn_persist_busy(void) { return P.child != 0 || P.waiters != NULL; }

int scn_persist_save_async(scn_server *srv, scn_conn *conn, const char *id_json) {
  if (!P.enabled)
    return -1;
  if (conn) {
    waiter *w = calloc(1, sizeof *w);
    if (!w)
      return -1;
    w->conn = conn;
    w->id_json = id_json ? strdup(id_json) : NULL;
    /* It needs a snapshot that starts after this command: the next generation. */
    w->after_gen = P.gen + 1;
    w->next = P.waiters;
    P.waiters = w;
  }
  if (P.child)
    P.again = true;
  else
    start_child(srv);
  return 0;
}

void scn_persist_conn_closed(scn_server *srv, scn_conn *c) {
  (void)srv;
  for (waiter **pw = &P.waiters; *pw;) {
    waiter *w = *pw;
    if (w->conn == c) {
      *pw = w->next;
      free(w->id_json);
      free(w);
    } else {
      pw = &w->next;
    }
  }
}

static void on_autosave(uv_timer_t *t) {
  scn_server *srv = t->data;
  if (P.changes > 0 && !P.child)
    start_child(srv);
}

void scn_persist_start_timers(scn_server *srv) {
  if (!P.enabled)
    return;
  uv_timer_init(srv->loop, &P.fsync_timer);
  uv_timer_init(srv->loop, &P.autosave_timer);
  uv_timer_init(srv->loop, &P.child_timer);
  P.fsync_timer.data = P.autosave_timer.data = P.child_timer.data = srv;
  if (srv->cfg.fsync == SCN_FSYNC_EVERYSEC)
    uv_timer_start(&P.fsync_timer, on_fsync_timer, 1000, 1000);
  if (srv->cfg.save_interval > 0) {
    uint64_t ms = (uint64_t)(srv->cfg.save_interval * 1000);
    uv_timer_start(&P.autosave_timer, on_autosave, ms, ms);
  }
}

int scn_persist_close(scn_server *srv) {
  if (!P.enabled)
    return 0;
  uv_timer_stop(&P.fsync_timer);
  uv_timer_stop(&P.autosave_timer);
  uv_timer_stop(&P.child_timer);
  if (P.child) {
    int status;
    waitpid(P.child, &status, 0);
    P.child = 0;
  }
  scn_persist_commit(srv);
  fdatasync(P.journal_fd);
  uint64_t gen = P.gen + 1, bytes = 0;
  char err[4400];
  uint64_t t0 = uv_hrtime();
  /* As for every snapshot, the journal it continues in exists before it does. */
  int next_fd = open_journal(gen);
  int rc = -1;
  if (next_fd < 0)
    snprintf(err, sizeof err, "cannot create journal generation %llu", (unsigned long long)gen);
  else
    rc = scn_snapshot_write(srv->scene, gen, P.dir, &bytes, err, sizeof err);
  if (next_fd >= 0)
    close(next_fd);
  close(P.journal_fd);
  P.journal_fd = -1;
  if (rc == 0) {
    remove_journals_before(gen);
    scn_log(SCN_LOG_INFO, "final snapshot written", "dir=%s bytes=%llu seconds=%.3f", P.dir,
            (unsigned long long)bytes, (double)(uv_hrtime() - t0) / 1e9);
  } else {
    /* The journal still holds everything: nothing is lost, the next start replays it. */
    scn_log(SCN_LOG_ERROR, "final snapshot failed; the journal keeps every change", "error=\"%s\"",
            err);
  }
  while (P.waiters) {
    waiter *w = P.waiters;
    P.waiters = w->next;
    free(w->id_json);
    free(w);
  }
  scn_buf_free(&P.pending);
  if (P.lock_fd >= 0)
    close(P.lock_fd);
  P.enabled = false;
  return rc;
}

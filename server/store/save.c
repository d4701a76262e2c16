/* Snapshots: written by a forked child from the copy-on-write image of the scene (save, and
 * autosave when something changed), or in-process at shutdown. Each starts a new journal
 * generation; the older journals go once it is on disk, and the saves it covers are answered
 * through their owners' callbacks. */
#include "store/persist_internal.h"

#include "ops/log.h"
#include "store/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Answers the saves this snapshot satisfies (or all of them, on failure). */
static void answer_waiters(scn_persist *p, uint64_t covered_gen, bool ok, uint64_t bytes,
                           const char *why) {
  scn_path path;
  scn_path_join(&path, p->dir.s, "snapshot.scn");
  /* The answered ones leave the list first: an answer may resume a connection that runs its
   * held requests, which may add a waiter (a pipelined save) while this walks the list. */
  save_waiter *ready = NULL, **tail = &ready;
  save_waiter **pw = &p->waiters;
  while (*pw) {
    save_waiter *w = *pw;
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
    save_waiter *w = ready;
    ready = w->next;
    char msg[256];
    snprintf(msg, sizeof msg, "snapshot failed: %s", why);
    w->done(w->owner, w->tag, ok, path.s, bytes, msg);
    free(w->tag);
    free(w);
  }
}

static void start_child(scn_persist *p);

static void on_child_poll(uv_timer_t *t) {
  scn_persist *p = t->data;
  int status;
  pid_t r = waitpid(p->child, &status, WNOHANG);
  if (r == 0)
    return;
  uv_timer_stop(&p->child_timer);
  double secs = (double)(uv_hrtime() - p->child_started_ns) / 1e9;
  uint64_t gen = p->child_gen;
  p->child = 0;
  bool ok = r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  struct stat st;
  scn_path path;
  scn_path_join(&path, p->dir.s, "snapshot.scn");
  uint64_t bytes = ok && stat(path.s, &st) == 0 ? (uint64_t)st.st_size : 0;
  if (ok) {
    scn_journal_remove_before(p->dir.s, gen);
    p->stats.snapshots++;
    p->stats.last_snapshot_bytes = bytes;
    p->stats.last_snapshot_seconds = secs;
    p->stats.last_snapshot_unix = wall_seconds();
    scn_log(SCN_LOG_INFO, "snapshot written", "path=%s bytes=%llu seconds=%.3f", path.s,
            (unsigned long long)bytes, secs);
  } else {
    p->stats.snapshot_failures++;
    scn_log(SCN_LOG_ERROR, "snapshot failed", "status=%d", status);
  }
  answer_waiters(p, gen, ok, bytes, "the snapshot writer failed (see the log)");
  if (p->again) {
    p->again = false;
    if (!p->child) /* answering may already have started the next one */
      start_child(p);
  }
}

/* The child holds a copy-on-write image of the scene as of the fork: every command answered
 * so far is in it, and later ones go to the new journal generation. */
static void start_child(scn_persist *p) {
  scn_jwriter_commit(&p->journal);
  uint64_t gen = p->journal.gen + 1;
  int fd = scn_journal_open(p->dir.s, gen);
  if (fd < 0) {
    answer_waiters(p, UINT64_MAX, false, 0, "cannot open a new journal");
    return;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    scn_path path;
    if (scn_journal_path(&path, p->dir.s, gen))
      unlink(path.s);
    p->stats.snapshot_failures++;
    answer_waiters(p, UINT64_MAX, false, 0, "fork failed");
    return;
  }
  if (pid == 0) {
    char err[SCN_PATH_MSG_MAX];
    uint64_t bytes;
    int rc = scn_snapshot_write(p->srv->scene, gen, p->dir.s, &bytes, err, sizeof err);
    if (rc != 0)
      fprintf(stderr, "scened: snapshot: %s\n", err);
    _exit(rc == 0 ? 0 : 1);
  }
  /* the journal before is closed once its fsync (everysec: on the thread pool) is done */
  scn_jwriter_switch(&p->journal, fd, gen);
  p->child = pid;
  p->child_gen = gen;
  p->child_started_ns = uv_hrtime();
  p->changes = 0;
  uv_timer_start(&p->child_timer, on_child_poll, 5, 5);
}

bool scn_persist_busy(const scn_persist *p) { return p && (p->child != 0 || p->waiters); }

int scn_persist_save(scn_persist *p, scn_save_done done, void *owner, const char *tag) {
  save_waiter *w = calloc(1, sizeof *w);
  if (!w || (tag && !(w->tag = strdup(tag)))) {
    free(w);
    return -1;
  }
  w->done = done;
  w->owner = owner;
  /* It needs a snapshot that starts after this command: the next generation. */
  w->after_gen = p->journal.gen + 1;
  w->next = p->waiters;
  p->waiters = w;
  if (p->child)
    p->again = true;
  else
    start_child(p);
  return 0;
}

void scn_persist_forget(scn_persist *p, void *owner) {
  for (save_waiter **pw = &p->waiters; *pw;) {
    save_waiter *w = *pw;
    if (w->owner == owner) {
      *pw = w->next;
      free(w->tag);
      free(w);
    } else {
      pw = &w->next;
    }
  }
}

static void on_autosave(uv_timer_t *t) {
  scn_persist *p = t->data;
  if (p->changes > 0 && !p->child)
    start_child(p);
}

void scn__save_start_timers(scn_persist *p) {
  uv_loop_t *loop = p->srv->loop;
  uv_timer_init(loop, &p->autosave_timer);
  uv_timer_init(loop, &p->child_timer);
  p->autosave_timer.data = p->child_timer.data = p;
  p->open_timers += 2;
  double interval = p->srv->cfg.save_interval;
  if (interval > 0) {
    uint64_t ms = (uint64_t)(interval * 1000);
    uv_timer_start(&p->autosave_timer, on_autosave, ms, ms);
  }
}

void scn__save_stop(scn_persist *p) {
  if (p->open_timers) {
    uv_timer_stop(&p->autosave_timer);
    uv_timer_stop(&p->child_timer);
  }
  if (p->child) {
    int status;
    waitpid(p->child, &status, 0);
    p->child = 0;
  }
}

int scn__save_final(scn_persist *p) {
  uint64_t gen = p->journal.gen + 1, bytes = 0;
  char err[SCN_PATH_MSG_MAX];
  uint64_t t0 = uv_hrtime();
  /* As for every snapshot, the journal it continues in exists before it does. */
  int next_fd = scn_journal_open(p->dir.s, gen);
  int rc = -1;
  if (next_fd < 0)
    snprintf(err, sizeof err, "cannot create journal generation %llu", (unsigned long long)gen);
  else
    rc = scn_snapshot_write(p->srv->scene, gen, p->dir.s, &bytes, err, sizeof err);
  if (next_fd >= 0)
    close(next_fd);
  if (rc == 0) {
    scn_journal_remove_before(p->dir.s, gen);
    scn_log(SCN_LOG_INFO, "final snapshot written", "dir=%s bytes=%llu seconds=%.3f", p->dir.s,
            (unsigned long long)bytes, (double)(uv_hrtime() - t0) / 1e9);
  } else {
    /* The journal still holds everything: nothing is lost, the next start replays it. */
    scn_log(SCN_LOG_ERROR, "final snapshot failed; the journal keeps every change", "error=\"%s\"",
            err);
  }
  return rc;
}

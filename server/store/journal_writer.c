#include "store/journal_writer.h"

#include "ops/config.h"
#include "ops/log.h"
#include "store/journal.h"
#include "store/path.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A thread-pool fdatasync. It outlives the writer's hold on the descriptor when the writer
 * moves to a new generation or lets go: the descriptor is then closed here once the fsync is
 * done, so that its number is not reused (by another journal) while a thread still syncs it. */
struct scn_journal_fsync {
  uv_fs_t req;
  uv_loop_t *loop;
  scn_jwriter *w; /* NULL once the writer let go of fd */
  int fd;
  bool close_fd; /* the writer let go: close fd when done */
  bool again;    /* bytes were written after this fsync started: one more before the close */
};

void scn_jwriter_init(scn_jwriter *w, uv_loop_t *loop, int policy, scn_journal_stats *stats) {
  memset(w, 0, sizeof *w);
  w->loop = loop;
  w->policy = policy;
  w->stats = stats;
  w->fd = -1;
}

static void on_fsynced(uv_fs_t *req) {
  scn_journal_fsync *job = req->data;
  if (req->result < 0)
    scn_log(SCN_LOG_ERROR, "journal fsync failed", "error=\"%s\"", uv_strerror((int)req->result));
  uv_fs_req_cleanup(req);
  if (job->again) {
    job->again = false;
    if (uv_fs_fdatasync(job->loop, &job->req, job->fd, on_fsynced) == 0)
      return;
  }
  if (job->w)
    job->w->inflight = NULL;
  if (job->close_fd)
    close(job->fd);
  free(job);
}

/* Starts a thread-pool fdatasync of fd; false when it could not be queued. */
static bool fsync_on_pool(scn_jwriter *w, int fd, bool close_fd) {
  scn_journal_fsync *job = calloc(1, sizeof *job);
  if (!job)
    return false;
  job->loop = w->loop;
  job->fd = fd;
  job->close_fd = close_fd;
  job->w = close_fd ? NULL : w;
  job->req.data = job;
  if (uv_fs_fdatasync(w->loop, &job->req, fd, on_fsynced) != 0) {
    free(job);
    return false;
  }
  if (!close_fd)
    w->inflight = job;
  w->stats->fsyncs++;
  return true;
}

/* The writer lets go of its descriptor: closed now, or once the fsyncs that need it are done
 * (under everysec, what is unsynced is synced first, off the loop). */
static void let_go(scn_jwriter *w) {
  if (w->fd < 0)
    return;
  bool sync = w->policy == SCN_FSYNC_EVERYSEC && w->unsynced;
  if (w->inflight) {
    w->inflight->w = NULL;
    w->inflight->close_fd = true;
    w->inflight->again = sync;
    w->inflight = NULL;
    if (sync)
      w->stats->fsyncs++;
  } else if (!sync || !fsync_on_pool(w, w->fd, true)) {
    close(w->fd);
  }
  w->fd = -1;
  w->unsynced = 0;
}

void scn_jwriter_switch(scn_jwriter *w, int fd, uint64_t gen) {
  let_go(w);
  w->fd = fd;
  w->gen = gen;
}

int scn_jwriter_open(scn_jwriter *w, const char *dir, uint64_t gen) {
  int fd = scn_journal_open(dir, gen);
  if (fd < 0)
    return -1;
  scn_jwriter_switch(w, fd, gen);
  return 0;
}

/* Writes data to fd; the bytes written in *done. 0, or -1 with errno. */
static int write_out(int fd, const char *data, size_t len, size_t *done) {
  *done = 0;
  while (*done < len) {
    ssize_t n = write(fd, data + *done, len - *done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return -1;
    }
    *done += (size_t)n;
  }
  return 0;
}

int scn_jwriter_start(scn_jwriter *w, const char *dir, uint64_t gen, const scn_buf *records) {
  int fd = scn_journal_open(dir, gen);
  if (fd < 0)
    return -1;
  size_t done;
  if ((records->len && write_out(fd, records->data, records->len, &done) != 0) ||
      fdatasync(fd) != 0) {
    scn_log(SCN_LOG_ERROR, "cannot start a journal", "dir=%s error=\"%s\"", dir, strerror(errno));
    close(fd);
    scn_path path;
    if (scn_journal_path(&path, dir, gen))
      unlink(path.s);
    return -1;
  }
  scn_jwriter_switch(w, fd, gen);
  return 0;
}

void scn_jwriter_append(scn_jwriter *w, const char *line, size_t len, const uint64_t *created,
                        size_t ncreated) {
  scn_journal_encode_command(&w->pending, &w->line, line, len, created, ncreated);
  w->stats->records++;
}

void scn_jwriter_append_encoded(scn_jwriter *w, const char *bytes, size_t len) {
  scn_buf_add(&w->pending, bytes, len);
  w->stats->records++;
}

int scn_jwriter_fsync(scn_jwriter *w) {
  /* An fsync running on the thread pool may not have reached the disk yet: this one waits. */
  if (w->fd < 0 || (!w->unsynced && !w->inflight))
    return 0;
  int rc = fdatasync(w->fd);
  if (rc != 0)
    scn_log(SCN_LOG_ERROR, "journal fsync failed", "error=\"%s\"", strerror(errno));
  w->unsynced = 0;
  w->stats->fsyncs++;
  return rc;
}

int scn_jwriter_commit(scn_jwriter *w) {
  if (w->pending.len == 0 || w->fd < 0)
    return 0;
  size_t done;
  int rc = write_out(w->fd, w->pending.data, w->pending.len, &done);
  if (rc != 0)
    scn_log(SCN_LOG_ERROR, "journal write failed", "error=\"%s\"", strerror(errno));
  w->stats->bytes += done;
  w->unsynced += done;
  scn_buf_consume(&w->pending, done);
  if (w->policy == SCN_FSYNC_ALWAYS && w->unsynced && scn_jwriter_fsync(w) != 0)
    rc = -1;
  return rc;
}

void scn_jwriter_fsync_later(scn_jwriter *w) {
  if (w->unsynced && !w->inflight && w->fd >= 0 && fsync_on_pool(w, w->fd, false))
    w->unsynced = 0;
}

void scn_jwriter_close(scn_jwriter *w) {
  if (w->inflight) {
    w->inflight->w = NULL;
    w->inflight->close_fd = true;
    w->inflight = NULL;
    w->fd = -1;
  } else if (w->fd >= 0) {
    close(w->fd);
    w->fd = -1;
  }
  scn_buf_free(&w->pending);
  scn_buf_free(&w->line);
}

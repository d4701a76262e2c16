/* The journal's policy: every mutating command that succeeded is appended (after_command
 * hook), written before any reply leaves and fsynced then under "always" (before_flush hook),
 * every second on the thread pool under "everysec", or left to the kernel under "no". */
#include "store/persist_internal.h"

#include "ops/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void scn__journal_path(const scn_persist *p, uint64_t gen, char *out, size_t n) {
  scn_journal_path(p->dir, gen, out, n);
}

int scn__journal_open(const scn_persist *p, uint64_t gen) { return scn_journal_open(p->dir, gen); }

size_t scn__journal_list(const scn_persist *p, uint64_t *gens, size_t cap) {
  return scn_journal_list(p->dir, gens, cap);
}

void scn__journal_remove_before(const scn_persist *p, uint64_t gen) {
  scn_journal_remove_before(p->dir, gen);
}

/* ---- appending ---------------------------------------------------------------------------- */

static void after_command(void *ud, const scn_done *d) {
  scn_persist *p = ud;
  if (!(d->cmd->flags & SCN_CMD_MUTATES))
    return;
  scn_journal_encode_command(&p->pending, &p->line, d->line, d->len, d->created, d->ncreated);
  p->changes++;
  p->stats.journal_records++;
}

static bool write_pending(scn_persist *p) {
  if (scn_journal_write_all(p->journal_fd, p->pending.data, p->pending.len) != 0)
    return false;
  p->stats.journal_bytes += p->pending.len;
  p->unsynced += p->pending.len;
  p->pending.len = 0;
  return true;
}

void scn__journal_commit(scn_persist *p) {
  if (p->pending.len == 0 || !write_pending(p))
    return;
  if (p->srv->cfg.fsync == SCN_FSYNC_ALWAYS && p->unsynced) {
    if (fdatasync(p->journal_fd) != 0)
      scn_log(SCN_LOG_ERROR, "journal fsync failed", "error=\"%s\"", strerror(errno));
    p->unsynced = 0;
    p->stats.fsyncs++;
  }
}

static void before_flush(void *ud) { scn__journal_commit(ud); }

static void on_fsynced(uv_fs_t *req) {
  scn_persist *p = req->data;
  if (req->result < 0)
    scn_log(SCN_LOG_ERROR, "journal fsync failed", "error=\"%s\"", uv_strerror((int)req->result));
  uv_fs_req_cleanup(req);
  p->fsync_inflight = false;
  p->stats.fsyncs++;
}

/* everysec: the fsync runs on libuv's thread pool so the loop never waits for the disk. */
static void on_fsync_timer(uv_timer_t *t) {
  scn_persist *p = t->data;
  scn__journal_commit(p);
  if (p->unsynced == 0 || p->fsync_inflight || p->journal_fd < 0)
    return;
  p->unsynced = 0;
  p->fsync_inflight = true;
  p->fsync_req.data = p;
  if (uv_fs_fdatasync(p->srv->loop, &p->fsync_req, p->journal_fd, on_fsynced) != 0)
    p->fsync_inflight = false;
}

/* ---- figures ------------------------------------------------------------------------------ */

static void collect_stats(void *ud, scn_metrics_sink *k) {
  scn_persist *p = ud;
  const persist_stats *s = &p->stats;
  scn_metric(k, "journal_records_total", "counter", "Mutating commands written to the journal.",
             (double)s->journal_records);
  scn_metric(k, "journal_bytes_total", "counter", "Bytes written to the journal.",
             (double)s->journal_bytes);
  scn_metric(k, "journal_fsyncs_total", "counter", "fsyncs of the journal.", (double)s->fsyncs);
  scn_metric(k, "journal_generation", "gauge", "Generation of the journal being written.",
             (double)p->gen);
  scn_metric(k, "journal_replayed_total", "counter", "Journal records replayed at start.",
             (double)s->replayed);
  scn_metric(k, "snapshots_total", "counter", "Snapshots written.", (double)s->snapshots);
  scn_metric(k, "snapshot_failures_total", "counter", "Snapshots that failed.",
             (double)s->snapshot_failures);
  scn_metric(k, "snapshot_running", "gauge", "1 while a snapshot is being written.",
             p->child > 0 ? 1 : 0);
  scn_metric(k, "last_snapshot_bytes", "gauge", "Size of the last snapshot.",
             (double)s->last_snapshot_bytes);
  scn_metric(k, "last_snapshot_seconds", "gauge", "Time the last snapshot took.",
             s->last_snapshot_seconds);
  scn_metric(k, "last_snapshot_timestamp_seconds", "gauge",
             "When the last snapshot completed (Unix time).", s->last_snapshot_unix);
}

/* ---- the module --------------------------------------------------------------------------- */

scn_persist *scn_persist_open(scn_server *srv, scn_replay_fn replay, void *replay_ud, int *rc) {
  scn_persist *p = calloc(1, sizeof *p);
  if (!p) {
    fprintf(stderr, "scened: out of memory\n");
    *rc = 1;
    return NULL;
  }
  p->srv = srv;
  p->journal_fd = p->lock_fd = -1;
  snprintf(p->dir, sizeof p->dir, "%s", srv->cfg.data_dir);
  *rc = scn__persist_load(p, replay, replay_ud);
  if (*rc != 0) {
    if (p->journal_fd >= 0)
      close(p->journal_fd);
    if (p->lock_fd >= 0)
      close(p->lock_fd);
    scn_buf_free(&p->pending);
    scn_buf_free(&p->line);
    free(p);
    return NULL;
  }
  return p;
}

void scn_persist_start(scn_persist *p) {
  p->hooks = (scn_hooks){.ud = p,
                         .after_command = after_command,
                         .before_flush = before_flush,
                         .collect_stats = collect_stats};
  scn_server_add_hooks(p->srv, &p->hooks);
  uv_timer_init(p->srv->loop, &p->fsync_timer);
  p->fsync_timer.data = p;
  p->open_timers++;
  if (p->srv->cfg.fsync == SCN_FSYNC_EVERYSEC)
    uv_timer_start(&p->fsync_timer, on_fsync_timer, 1000, 1000);
  scn__save_start_timers(p);
}

static void on_timer_closed(uv_handle_t *h) {
  scn_persist *p = h->data;
  if (--p->open_timers == 0)
    free(p);
}

int scn_persist_close(scn_persist *p) {
  if (!p)
    return 0;
  scn_server_remove_hooks(p->srv, &p->hooks);
  uv_timer_stop(&p->fsync_timer);
  scn__save_stop(p);
  scn__journal_commit(p);
  fdatasync(p->journal_fd);
  int rc = scn__save_final(p);
  close(p->journal_fd);
  p->journal_fd = -1;
  while (p->waiters) {
    save_waiter *w = p->waiters;
    p->waiters = w->next;
    free(w->tag);
    free(w);
  }
  scn_buf_free(&p->pending);
  scn_buf_free(&p->line);
  if (p->lock_fd >= 0)
    close(p->lock_fd);
  /* the timers' memory is p's: it goes once the loop has closed them */
  if (p->open_timers == 0) {
    free(p);
    return rc;
  }
  uv_close((uv_handle_t *)&p->fsync_timer, on_timer_closed);
  uv_close((uv_handle_t *)&p->autosave_timer, on_timer_closed);
  uv_close((uv_handle_t *)&p->child_timer, on_timer_closed);
  return rc;
}

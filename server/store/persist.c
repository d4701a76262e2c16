/* The journal's hooks: every mutating command that succeeded is appended (after_command),
 * written before any reply leaves and fsynced then under "always" (before_flush), every second
 * off the loop under "everysec", or left to the kernel under "no" (journal_writer.h). */
#include "store/persist_internal.h"

#include "ops/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void after_command(void *ud, const scn_done *d) {
  scn_persist *p = ud;
  if (!(d->cmd->flags & SCN_CMD_MUTATES))
    return;
  scn_jwriter_append(&p->journal, d->line, d->len, d->created, d->ncreated);
  p->changes++;
}

static void before_flush(void *ud) {
  scn_persist *p = ud;
  scn_jwriter_commit(&p->journal);
}

static void on_fsync_timer(uv_timer_t *t) {
  scn_persist *p = t->data;
  scn_jwriter_commit(&p->journal);
  scn_jwriter_fsync_later(&p->journal);
}

/* ---- figures ------------------------------------------------------------------------------ */

static void collect_stats(void *ud, scn_metrics_sink *k) {
  scn_persist *p = ud;
  const persist_stats *s = &p->stats;
  const scn_journal_stats *j = &p->journal_stats;
  scn_metric(k, "journal_records_total", "counter", "Mutating commands written to the journal.",
             (double)j->records);
  scn_metric(k, "journal_bytes_total", "counter", "Bytes written to the journal.",
             (double)j->bytes);
  scn_metric(k, "journal_fsyncs_total", "counter", "fsyncs of the journal.", (double)j->fsyncs);
  scn_metric(k, "journal_generation", "gauge", "Generation of the journal being written.",
             (double)p->journal.gen);
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
  p->lock_fd = -1;
  scn_jwriter_init(&p->journal, srv->loop, srv->cfg.fsync, &p->journal_stats);
  scn_path_fmt(&p->dir, "%s", srv->cfg.data_dir);
  *rc = scn__persist_load(p, replay, replay_ud);
  if (*rc != 0) {
    scn_jwriter_close(&p->journal);
    if (p->lock_fd >= 0)
      close(p->lock_fd);
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
  scn_jwriter_commit(&p->journal);
  scn_jwriter_fsync(&p->journal);
  int rc = scn__save_final(p);
  scn_jwriter_close(&p->journal);
  while (p->waiters) {
    save_waiter *w = p->waiters;
    p->waiters = w->next;
    free(w->tag);
    free(w);
  }
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

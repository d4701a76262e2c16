/* Persistence per group with --cluster (see groups.h). */
#include "store/groups.h"
#include "store/groups_internal.h"

#include "ops/log.h"
#include "store/files.h"
#include "store/history_file.h"
#include "store/journal_writer.h"
#include "store/persist.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int mkdir_one(const char *path) {
  return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

static bool allowed(const scn_gstore *gs, const gs_part *p) {
  return !gs->may_write || gs->may_write(gs->fence_ud, p->name[0] ? p->name : NULL);
}

gs_part *scn__gs_find(scn_gstore *gs, const char *group) {
  if (gs->last < gs->nparts && strcmp(gs->parts[gs->last]->name, group) == 0)
    return gs->parts[gs->last];
  for (size_t i = 0; i < gs->nparts; i++)
    if (strcmp(gs->parts[i]->name, group) == 0) {
      gs->last = i;
      return gs->parts[i];
    }
  return NULL;
}

void scn__gs_part_init(scn_gstore *gs, gs_part *p) {
  scn_jwriter_init(&p->journal, gs->srv->loop, gs->srv->cfg.fsync, &gs->journal_stats);
}

/* ---- the journal ------------------------------------------------------------------------- */

static void commit_part(scn_gstore *gs, gs_part *p) {
  if (!scn_jwriter_pending(&p->journal) || p->journal.fd < 0)
    return;
  if (!allowed(gs, p)) {
    gs->stats.held_back++;
    return; /* kept: written once the fence allows, dropped if the group goes */
  }
  scn_jwriter_commit(&p->journal);
}

static void commit_all(scn_gstore *gs) {
  if (gs->npending == 0)
    return;
  size_t left = 0;
  commit_part(gs, &gs->node);
  left += scn_jwriter_pending(&gs->node.journal);
  for (size_t i = 0; i < gs->nparts; i++) {
    commit_part(gs, gs->parts[i]);
    left += scn_jwriter_pending(&gs->parts[i]->journal);
  }
  gs->npending = left;
}

/* The open tick of the world d named, for the tap; 0 when there is none. */
static uint64_t tick_of(const scn_gstore *gs, const scn_done *d) {
  scn_world *w = d->world ? scn_world_find(gs->srv->scene, d->world) : NULL;
  return w ? scn_world_tick(w) : 0;
}

static void append(scn_gstore *gs, gs_part *p, const scn_done *d) {
  if (!scn_jwriter_pending(&p->journal))
    gs->npending++;
  size_t from = p->journal.pending.len;
  scn_jwriter_append(&p->journal, d->line, d->len, d->created, d->ncreated);
  p->changes++;
  if (p == &gs->node)
    return;
  p->seq++;
  if (gs->tap && !p->journal.pending.failed) {
    scn_gstore_record r = {p->name,
                           p->epoch,
                           p->seq,
                           tick_of(gs, d),
                           p->journal.pending.data + from,
                           p->journal.pending.len - from};
    gs->tap(gs->tap_ud, &r);
  }
}

int scn_gstore_apply(scn_gstore *gs, const scn_gstore_record *r, char *err, size_t errlen) {
  gs_part *p = scn__gs_find(gs, r->group);
  const char *line;
  size_t len;
  if (!p) {
    snprintf(err, errlen, "group %s is not held here", r->group);
    return -1;
  }
  if (r->epoch != p->epoch || r->seq != p->seq + 1) {
    snprintf(err, errlen, "group %s: record %llu of epoch %llu does not follow %llu of epoch %llu",
             r->group, (unsigned long long)r->seq, (unsigned long long)r->epoch,
             (unsigned long long)p->seq, (unsigned long long)p->epoch);
    return -1;
  }
  if (!scn_journal_line(r->bytes, r->len, &line, &len)) { /* encoded by the follower itself */
    snprintf(err, errlen, "group %s: record %llu is not one intact journal record", r->group,
             (unsigned long long)r->seq);
    return -1;
  }
  /* What the record makes is the group's, as what a load of it makes. */
  scn_entity_home_default(gs->srv->scene, p->home);
  bool ok = gs->replay(gs->replay_ud, line, len);
  scn_entity_home_default(gs->srv->scene, 0);
  if (!ok)
    scn_log(SCN_LOG_WARN, "replica: a shipped command failed on apply",
            "group=%s seq=%llu "
            "command=\"%.*s\"",
            r->group, (unsigned long long)r->seq, (int)(len < 80 ? len : 80), line);
  if (!scn_jwriter_pending(&p->journal))
    gs->npending++;
  scn_jwriter_append_encoded(&p->journal, r->bytes, r->len);
  p->changes++;
  p->seq = r->seq;
  return 0;
}

/* The part an entity's home tag names: the node's (0), a group held, or NULL. */
static gs_part *home_part(scn_gstore *gs, uint32_t home) {
  if (home == 0)
    return &gs->node;
  for (size_t i = 0; i < gs->nparts; i++)
    if (gs->parts[i]->home == home)
      return gs->parts[i];
  return NULL;
}

static void append_once(scn_gstore *gs, gs_part *p, const scn_done *d) {
  if (p && p->stamp != gs->stamp) {
    p->stamp = gs->stamp;
    append(gs, p, d);
  }
}

/* A command that destroyed several entities: each one's end as an entity.destroy of its own,
 * in the journal of its home and of every group that had a transform of it (also, when not
 * NULL), as a single entity.destroy is recorded. A record per entity, because a group loaded
 * alone may lack some of the others, which would refuse a list of them as a whole. */
static void append_ends(scn_gstore *gs, const scn_done *d, gs_part *also) {
  char group[SCN_NAME_MAX + 1], line[64];
  for (size_t i = 0; i < d->ndestroyed; i++) {
    int len = snprintf(line, sizeof line, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}",
                       (unsigned long long)d->destroyed[i]);
    scn_done one = {.cmd = d->cmd, .line = line, .len = (size_t)len};
    gs->stamp++;
    append_once(gs, home_part(gs, d->destroyed_home[i]), &one);
    append_once(gs, also, &one);
    for (size_t k = 0; k < d->ntouched; k++)
      if (d->touched_of[k] == i) {
        scn_group_of(scn_world_name(d->touched[k]), group);
        append_once(gs, scn__gs_find(gs, group), &one);
      }
  }
}

/* world.destroy with "entities": the world's end alone, then each entity's (append_ends), so
 * that a replay destroys exactly what the command did, whatever else is loaded then. */
static void append_world_end(scn_gstore *gs, gs_part *p, const scn_done *d) {
  scn_buf line = {0};
  scn_buf_adds(&line, "{\"cmd\":\"world.destroy\",\"world\":");
  scn_buf_add_json_string(&line, d->world, strlen(d->world));
  scn_buf_addc(&line, '}');
  if (line.failed) {
    scn_log(SCN_LOG_ERROR, "journal: out of memory", "world=%s", d->world);
    scn_buf_free(&line);
    return;
  }
  scn_done world = {.cmd = d->cmd, .line = line.data, .len = line.len};
  append(gs, p, &world);
  scn_buf_free(&line);
  append_ends(gs, d, p);
}

static void after_command(void *ud, const scn_done *d) {
  scn_gstore *gs = ud;
  if (!(d->cmd->flags & SCN_CMD_MUTATES))
    return;
  char group[SCN_NAME_MAX + 1];
  if (d->world) {
    scn_group_of(d->world, group);
    gs_part *p = scn__gs_find(gs, group);
    /* What a command on a group made belongs to the group, transform or not: it goes where
     * the group goes. */
    for (size_t i = 0; p && i < d->ncreated; i++)
      scn_entity_set_home(gs->srv->scene, d->created[i], p->home);
    if (p && d->several)
      append_world_end(gs, p, d);
    else if (p)
      append(gs, p, d);
    else
      scn_log(SCN_LOG_ERROR, "journal: a command on a group this daemon does not hold", "group=%s",
              group);
    return;
  }
  if (d->several) {
    append_ends(gs, d, NULL);
    return;
  }
  /* entity.create and entity.destroy: the journal of the entity's home (the node's, or a
   * group's), and of every group that had a transform of it. */
  if (d->home == 0)
    append(gs, &gs->node, d);
  /* Each group once, however many of its worlds had the entity, and the group it belongs to
   * (which may have no transform of it). */
  gs->stamp++;
  gs->node.stamp = gs->stamp;
  for (size_t i = 0; d->home && i < gs->nparts; i++)
    if (gs->parts[i]->home == d->home) {
      gs->parts[i]->stamp = gs->stamp;
      append(gs, gs->parts[i], d);
    }
  for (size_t i = 0; i < d->ntouched; i++) {
    scn_group_of(scn_world_name(d->touched[i]), group);
    gs_part *p = scn__gs_find(gs, group);
    if (!p || p->stamp == gs->stamp)
      continue;
    p->stamp = gs->stamp;
    append(gs, p, d);
  }
}

static void before_flush(void *ud) { commit_all(ud); }

/* everysec: an fsync of every journal with unsynced records, on the thread pool. */
static void on_fsync_timer(uv_timer_t *t) {
  scn_gstore *gs = t->data;
  commit_all(gs);
  for (size_t i = 0; i <= gs->nparts; i++)
    scn_jwriter_fsync_later(i < gs->nparts ? &gs->parts[i]->journal : &gs->node.journal);
}

/* ---- snapshots --------------------------------------------------------------------------- */

/* A snapshot of the part in its directory, continuing in a new journal generation created
 * before it (as every snapshot's). */
static int write_snapshot(scn_gstore *gs, gs_part *p, uint64_t *bytes);

static int save_part(scn_gstore *gs, gs_part *p, uint64_t *bytes) {
  *bytes = 0;
  if (!allowed(gs, p))
    return -1;
  return write_snapshot(gs, p, bytes);
}

/* The snapshot itself (the caller asked the fence, or writes where nobody reads yet). It
 * covers every record written so far: the journal before it needs no fsync of its own (under
 * everysec it gets one anyway, off the loop, as it is let go). */
static int write_snapshot(scn_gstore *gs, gs_part *p, uint64_t *bytes) {
  commit_part(gs, p);
  uint64_t gen = p->journal.gen + 1;
  int fd = scn_journal_open(p->dir.s, gen);
  if (fd < 0)
    return -1;
  char err[SCN_PATH_MSG_MAX];
  scn_snapshot_part part = {p->name[0] ? p->name : NULL, p->epoch, p->home};
  if (scn_snapshot_write_part(gs->srv->scene, &part, gen, p->dir.s, bytes, err, sizeof err) != 0) {
    close(fd);
    scn_path path;
    if (scn_journal_path(&path, p->dir.s, gen))
      unlink(path.s);
    gs->stats.snapshot_failures++;
    scn_log(SCN_LOG_ERROR, "snapshot failed", "dir=%s error=\"%s\"", p->dir.s, err);
    return -1;
  }
  scn_jwriter_switch(&p->journal, fd, gen);
  scn__gs_note_seq(p, gen);
  p->changes = 0;
  scn_journal_remove_before(p->dir.s, gen);
  gs->stats.snapshots++;
  return 0;
}

int scn_gstore_save(scn_gstore *gs, const char *group, uint64_t *bytes) {
  gs_part *p = scn__gs_find(gs, group);
  *bytes = 0;
  return p ? save_part(gs, p, bytes) : -1;
}

int scn_gstore_checkpoint(scn_gstore *gs, const char *group, uint64_t *bytes) {
  gs_part *p = scn__gs_find(gs, group);
  *bytes = 0;
  if (!p || !allowed(gs, p))
    return -1;
  if (p->changes > SCN_GSTORE_REPLAY_CHEAP)
    return save_part(gs, p, bytes);
  commit_part(gs, p);
  if (scn_jwriter_fsync(&p->journal) != 0)
    return -1;
  return scn_jwriter_pending(&p->journal) ? -1 : 0;
}

int scn_gstore_write_history(scn_gstore *gs, const char *group, uint64_t *bytes) {
  gs_part *p = scn__gs_find(gs, group);
  *bytes = 0;
  if (!p || !allowed(gs, p))
    return -1;
  char err[SCN_PATH_MSG_MAX];
  if (scn_history_file_write(gs->srv->scene, group, p->epoch, p->dir.s, bytes, err, sizeof err) !=
      0) {
    scn_log(SCN_LOG_ERROR, "cannot write the history a move hands over", "group=%s error=\"%s\"",
            group, err);
    return -1;
  }
  return 0;
}

void scn_gstore_drop_history(scn_gstore *gs, const char *group) {
  gs_part *p = scn__gs_find(gs, group);
  if (p)
    scn_history_file_remove(p->dir.s);
}

int scn_gstore_save_all(scn_gstore *gs, uint64_t *bytes) {
  int rc = 0;
  uint64_t n;
  *bytes = 0;
  for (size_t i = 0; i <= gs->nparts; i++) {
    gs_part *p = i < gs->nparts ? gs->parts[i] : &gs->node;
    if (!allowed(gs, p))
      continue;
    if (save_part(gs, p, &n) != 0)
      rc = -1;
    *bytes += n;
  }
  return rc;
}

static void on_autosave(uv_timer_t *t) {
  scn_gstore *gs = t->data;
  uint64_t bytes;
  for (size_t i = 0; i <= gs->nparts; i++) {
    gs_part *p = i < gs->nparts ? gs->parts[i] : &gs->node;
    if (p->changes)
      save_part(gs, p, &bytes);
  }
}

/* ---- groups ------------------------------------------------------------------------------ */

void scn__gs_remove_dir(const char *path) {
  DIR *d = opendir(path);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    if (de->d_name[0] == '.')
      continue;
    scn_path file;
    if (scn_path_join(&file, path, de->d_name))
      unlink(file.s);
  }
  if (d)
    closedir(d);
  rmdir(path);
}

/* The epoch directories of a group, each to fn (with its epoch). */
void scn__gs_each_epoch(const char *gdir, void (*fn)(void *ud, const char *dir, uint64_t epoch),
                        void *ud) {
  DIR *d = opendir(gdir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    unsigned long long e;
    char tail;
    if (sscanf(de->d_name, "epoch.%llu%c", &e, &tail) != 1)
      continue;
    scn_path dir;
    if (scn_path_join(&dir, gdir, de->d_name))
      fn(ud, dir.s, e);
  }
  if (d)
    closedir(d);
}

typedef struct newest {
  scn_path dir;
  uint64_t epoch;
  bool found;
} newest;

static void find_newest(void *ud, const char *dir, uint64_t epoch) {
  newest *n = ud;
  if (!n->found || epoch > n->epoch) {
    scn_path_fmt(&n->dir, "%s", dir);
    n->epoch = epoch;
    n->found = true;
  }
}

typedef struct older {
  uint64_t below;
} older;

static void remove_older(void *ud, const char *dir, uint64_t epoch) {
  if (epoch < ((older *)ud)->below)
    scn__gs_remove_dir(dir);
}

/* A load that keeps every record it replays, for the new epoch's journal. */
typedef struct carry {
  scn_gstore *gs;
  scn_buf records;
} carry;

static bool carry_line(void *ud, const char *line, size_t len) {
  carry *c = ud;
  scn_journal_encode(&c->records, line, len);
  return c->gs->replay(c->gs->replay_ud, line, len);
}

/* The new epoch's directory starts from exactly what was loaded: the old snapshot, linked (a
 * snapshot never changes once renamed into place; a stale owner can only rename another over
 * its own directory's name), and the records replayed after it, copied into the journal the
 * snapshot continues in. true when that worked; otherwise the caller writes a snapshot. */
static bool carry_over(scn_gstore *gs, gs_part *p, const char *old_dir, const scn_chain *chain,
                       const scn_buf *records) {
  if (!chain->snapshot || chain->info.damaged)
    return false;
  uint64_t gen = chain->info.journal_gen;
  scn_path from, to, journal;
  if (!scn_path_join(&from, old_dir, "snapshot.scn") ||
      !scn_path_join(&to, p->dir.s, "snapshot.scn") || !scn_journal_path(&journal, p->dir.s, gen))
    return false;
  /* As for every snapshot, the journal it continues in exists (and is on disk) before it. */
  if (scn_jwriter_start(&p->journal, p->dir.s, gen, records) != 0)
    return false;
  if (link(from.s, to.s) != 0) {
    scn_jwriter_close(&p->journal);
    scn__gs_part_init(gs, p);
    unlink(journal.s);
    return false;
  }
  p->changes = records->len > 0; /* the next autosave folds them in */
  return true;
}

/* An entity destroyed here comes back while a group that moved away and back loads from a
 * snapshot older than the destruction; its journal destroys it again, unless the destruction
 * was recorded elsewhere (the group had let go of it before): then it is retired again here
 * once nothing loaded uses it, so that a destroyed id stays destroyed. */
void scn__gs_retire_revived(scn_scene *scene) {
  const scn_entity *ids;
  size_t n = scn_entity_revived(scene, &ids);
  for (size_t i = 0; i < n; i++) {
    bool used = false;
    for (size_t w = 0; !used && w < scn_world_count(scene); w++)
      used = scn_transform_exists(scn_world_at(scene, w), ids[i]);
    if (!used && scn_entity_alive(scene, ids[i]))
      scn_entity_destroy(scene, ids[i]);
  }
  scn_entity_revived_clear(scene);
}

int scn_gstore_acquire(scn_gstore *gs, const char *group, uint64_t epoch, bool moved_in, char *err,
                       size_t errlen) {
  scn_server *srv = gs->srv;
  if (scn__gs_find(gs, group)) {
    snprintf(err, errlen, "group %s is held already", group);
    return -1;
  }
  scn_path gdir;
  if (!scn_path_join(&gdir, gs->groups_dir.s, group)) {
    snprintf(err, errlen, "the data directory's path is too long");
    return -1;
  }
  newest n = {0};
  scn__gs_each_epoch(gdir.s, find_newest, &n);
  if (n.found && n.epoch >= epoch) {
    snprintf(err, errlen, "%s was written by a newer owner (epoch %llu >= %llu)", n.dir.s,
             (unsigned long long)n.epoch, (unsigned long long)epoch);
    return -1;
  }
  uint64_t t0 = uv_hrtime();
  scn_chain chain = {0};
  carry c = {gs, {0}};
  /* Every entity the load brings (its snapshot's, and those its records make) is the group's. */
  uint32_t home = gs->next_home++;
  scn_entity_home_default(srv->scene, home);
  scn_entity_revived_clear(srv->scene);
  int loaded = n.found ? scn__load_chain(&srv->scene, n.dir.s, srv->cfg.recover, false, carry_line,
                                         &c, &chain, err, errlen)
                       : 0;
  scn_entity_home_default(srv->scene, 0);
  scn__gs_retire_revived(srv->scene);
  if (loaded != 0) {
    scn_buf_free(&c.records);
    return -1;
  }
  /* Only a move hands over ticks and history: what was loaded is exactly what the mover
   * froze, which its file describes. A takeover or a restart starts them over. */
  scn_history_load hist = {0};
  bool hist_read =
      moved_in && n.found && scn_history_file_load(srv->scene, group, n.epoch, n.dir.s, &hist) > 0;
  gs_part *p = calloc(1, sizeof *p);
  gs_part **parts = p ? scn_array_grow(gs->parts, &gs->cap, sizeof *parts, gs->nparts + 1) : NULL;
  if (!parts || c.records.failed) {
    free(p);
    scn_buf_free(&c.records);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  gs->parts = parts;
  snprintf(p->name, sizeof p->name, "%s", group);
  scn__gs_part_init(gs, p);
  p->home = home;
  p->from_copy = n.found;
  /* The new epoch's directory is made under a temporary name and renamed once complete, so a
   * daemon that looks for the newest epoch never finds a half-written one. What goes in is a
   * copy of what is durable already, so it needs no fence; the fence guards what follows. */
  scn_path final;
  scn_path_fmt(&final, "%s/epoch.%llu", gdir.s, (unsigned long long)epoch);
  scn_path_fmt(&p->dir, "%s.tmp", final.s);
  p->epoch = epoch;
  scn__gs_remove_dir(p->dir.s);
  if (mkdir_one(gdir.s) != 0 || mkdir_one(p->dir.s) != 0) {
    snprintf(err, errlen, "cannot create %s: %s", p->dir.s, strerror(errno));
    free(p);
    scn_buf_free(&c.records);
    return -1;
  }
  gs->parts[gs->nparts++] = p;
  uint64_t bytes = 0;
  bool carried = n.found && carry_over(gs, p, n.dir.s, &chain, &c.records);
  scn_buf_free(&c.records);
  if ((!carried && write_snapshot(gs, p, &bytes) != 0) || scn_fsync_dir(p->dir.s) != 0 ||
      rename(p->dir.s, final.s) != 0) {
    snprintf(err, errlen, "cannot start epoch %llu in %s: %s", (unsigned long long)epoch, final.s,
             strerror(errno));
    scn__gs_remove_dir(p->dir.s);
    scn_gstore_release(gs, group);
    return -1;
  }
  p->dir = final;
  scn_fsync_dir(gdir.s);
  scn__gs_each_epoch(gdir.s, remove_older, &(older){epoch});
  gs->stats.loads++;
  scn_log(SCN_LOG_INFO, "group loaded",
          "group=%s epoch=%llu from=\"%s\" replayed=%llu start=%s snapshot_bytes=%llu ms=%.1f "
          "ticks=%s histories=%u history_versions=%llu histories_dropped=%u",
          group, (unsigned long long)epoch, n.found ? n.dir.s : "(new)",
          (unsigned long long)chain.replayed, carried ? "carried-over" : "snapshot",
          (unsigned long long)bytes, (double)(uv_hrtime() - t0) / 1e6,
          hist_read  ? "moved"
          : moved_in ? "moved-without-file"
                     : "from-1",
          hist.histories, (unsigned long long)hist.versions, hist.dropped);
  return 0;
}

/* A promoted part's new epoch directory starts as the old one's snapshot and journals, linked
 * (the old directory goes right after, so the last journal is appended to only here): a load
 * replays what the copy holds, no snapshot written. false: a file not linked (write one). */
static bool link_epoch(gs_part *p, const char *old_dir) {
  uint64_t gens[4096], last = 0;
  size_t n = scn_journal_list(old_dir, gens, 4096);
  scn_path from, to;
  if (n == 0 || n == 4096 || !scn_path_join(&from, old_dir, "snapshot.scn") ||
      !scn_path_join(&to, p->dir.s, "snapshot.scn") || link(from.s, to.s) != 0)
    return false;
  for (size_t i = 0; i < n; i++) {
    if (!scn_journal_path(&from, old_dir, gens[i]) || !scn_journal_path(&to, p->dir.s, gens[i]) ||
        link(from.s, to.s) != 0)
      return false;
    last = gens[i] > last ? gens[i] : last;
  }
  return scn_jwriter_open(&p->journal, p->dir.s, last) == 0;
}

int scn_gstore_promote(scn_gstore *gs, const char *group, uint64_t epoch, char *err,
                       size_t errlen) {
  gs_part *p = scn__gs_find(gs, group);
  scn_path gdir, final, old_dir;
  if (!p || p->epoch >= epoch || !scn_path_join(&gdir, gs->groups_dir.s, group)) {
    snprintf(err, errlen, "group %s is not held below epoch %llu", group,
             (unsigned long long)epoch);
    return -1;
  }
  uint64_t from_epoch = p->epoch, bytes = 0, changes = p->changes, t0 = uv_hrtime();
  old_dir = p->dir;
  commit_part(gs, p); /* what it keeps back anyway is in the scene, so in the new snapshot */
  /* Linked only when the old files hold all of it, on disk. */
  bool linkable = !scn_jwriter_pending(&p->journal) && p->journal.fd >= 0 &&
                  scn_jwriter_fsync(&p->journal) == 0;
  gs->npending -= scn_jwriter_pending(&p->journal) ? 1 : 0;
  scn_jwriter_close(&p->journal);
  scn__gs_part_init(gs, p);
  scn_path_fmt(&final, "%s/epoch.%llu", gdir.s, (unsigned long long)epoch);
  scn_path_fmt(&p->dir, "%s.tmp", final.s);
  p->epoch = epoch;
  p->seq = p->changes = 0;
  p->from_copy = true;
  scn__gs_remove_dir(p->dir.s); /* as a load, the directory gets its name only once complete */
  bool linked = false;
  if (mkdir_one(p->dir.s) == 0 && linkable && !(linked = link_epoch(p, old_dir.s))) {
    scn_jwriter_close(&p->journal);
    scn__gs_part_init(gs, p);
    scn__gs_remove_dir(p->dir.s);
    mkdir_one(p->dir.s);
  }
  p->changes = linked ? changes + 1 : 0; /* linked: the next autosave folds the journals in */
  if ((!linked && write_snapshot(gs, p, &bytes) != 0) || scn_fsync_dir(p->dir.s) != 0 ||
      rename(p->dir.s, final.s) != 0) {
    snprintf(err, errlen, "cannot start epoch %llu in %s: %s", (unsigned long long)epoch, final.s,
             strerror(errno));
    scn__gs_remove_dir(p->dir.s);
    return -1;
  }
  p->dir = final;
  scn_fsync_dir(gdir.s);
  scn__gs_each_epoch(gdir.s, remove_older, &(older){epoch});
  scn_log(SCN_LOG_INFO, "group promoted from its copy",
          "group=%s epoch=%llu from=%llu start=%s snapshot_bytes=%llu ms=%.1f", group,
          (unsigned long long)epoch, (unsigned long long)from_epoch, linked ? "linked" : "snapshot",
          (unsigned long long)bytes, (double)(uv_hrtime() - t0) / 1e6);
  return 0;
}

void scn_gstore_release(scn_gstore *gs, const char *group) {
  for (size_t i = 0; i < gs->nparts; i++) {
    gs_part *p = gs->parts[i];
    if (strcmp(p->name, group) != 0)
      continue;
    if (scn_jwriter_pending(&p->journal))
      gs->npending--;
    scn_jwriter_close(&p->journal);
    free(p);
    gs->parts[i] = gs->parts[--gs->nparts];
    gs->last = 0;
    return;
  }
}

uint32_t scn_gstore_home(const scn_gstore *gs, const char *group) {
  gs_part *p = scn__gs_find((scn_gstore *)gs, group);
  return p ? p->home : SCN_HOME_NONE;
}

bool scn_gstore_holds(const scn_gstore *gs, const char *group) {
  return scn__gs_find((scn_gstore *)gs, group) != NULL;
}

bool scn_gstore_on_disk(const scn_gstore *gs, const char *group) {
  scn_path gdir;
  struct stat st;
  return scn_path_join(&gdir, gs->groups_dir.s, group) && stat(gdir.s, &st) == 0 &&
         S_ISDIR(st.st_mode);
}

void scn_gstore_each_on_disk(const scn_gstore *gs, void (*fn)(void *ud, const char *group),
                             void *ud) {
  DIR *d = opendir(gs->groups_dir.s);
  struct dirent *de;
  while (d && (de = readdir(d)))
    if (de->d_name[0] != '.' && scn_world_name_valid(de->d_name, strlen(de->d_name)) &&
        !strchr(de->d_name, '.'))
      fn(ud, de->d_name);
  if (d)
    closedir(d);
}

const char *scn_gstore_dir(const scn_gstore *gs) { return gs->data.s; }

/* ---- the standalone layout, split into groups --------------------------------------------- */

bool scn_gstore_has_old_layout(const scn_gstore *gs) {
  scn_path path;
  uint64_t gens[1];
  return (scn_path_join(&path, gs->data.s, "snapshot.scn") && access(path.s, F_OK) == 0) ||
         scn_journal_list(gs->data.s, gens, 1) > 0;
}

int scn_gstore_migrate(scn_gstore *gs, uint32_t *max_slot, char *err, size_t errlen) {
  scn_server *srv = gs->srv;
  scn_scene *live = srv->scene;
  scn_scene *old = scn_scene_new(scn_scene_limits(live));
  if (!old) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  /* The old data is replayed into a scene of its own (the dispatcher runs on srv->scene). */
  scn_server_swap_scene(srv, old);
  scn_chain chain;
  int rc = scn__load_chain(&srv->scene, gs->data.s, srv->cfg.recover, false, gs->replay,
                           gs->replay_ud, &chain, err, errlen);
  old = scn_server_swap_scene(srv, live);
  *max_slot = scn_entity_slot_count(old);
  for (size_t i = 0; rc == 0 && i < scn_world_count(old); i++) {
    char group[SCN_NAME_MAX + 1];
    scn_group_of(scn_world_name(scn_world_at(old, i)), group);
    scn_path gdir, dir;
    scn_path_join(&gdir, gs->groups_dir.s, group);
    scn_path_join(&dir, gdir.s, "epoch.0");
    if (access(dir.s, F_OK) == 0)
      continue; /* written for an earlier world of the group */
    uint64_t bytes;
    int fd = -1;
    scn_snapshot_part part = {group, 0, SCN_HOME_NONE}; /* (the old layout had no homes) */
    if (mkdir_one(gdir.s) != 0 || mkdir_one(dir.s) != 0 || (fd = scn_journal_open(dir.s, 1)) < 0 ||
        scn_snapshot_write_part(old, &part, 1, dir.s, &bytes, err, errlen) != 0) {
      if (fd < 0)
        snprintf(err, errlen, "cannot create %s: %s", dir.s, strerror(errno));
      rc = -1;
    }
    if (fd >= 0)
      close(fd);
  }
  /* Entities without a transform become this node's. */
  if (rc == 0) {
    for (uint32_t s = 1; s <= *max_slot; s++) {
      bool alive;
      scn_entity id = scn_entity_slot_id(old, s, &alive);
      if (alive && scn_entity_adopt(live, id) != SCN_OK)
        scn_log(SCN_LOG_WARN, "migrate: an entity could not be adopted", "entity=%llu",
                (unsigned long long)id);
    }
    uint64_t bytes;
    rc = save_part(gs, &gs->node, &bytes);
    if (rc != 0)
      snprintf(err, errlen, "cannot write the node's snapshot");
  }
  if (rc == 0) {
    scn_path moved, from, to;
    scn_path_join(&moved, gs->data.s, "migrated");
    mkdir_one(moved.s);
    scn_path_join(&from, gs->data.s, "snapshot.scn");
    scn_path_join(&to, moved.s, "snapshot.scn");
    if (access(from.s, F_OK) == 0 && rename(from.s, to.s) != 0)
      rc = -1;
    uint64_t gens[4096];
    size_t n = scn_journal_list(gs->data.s, gens, 4096);
    for (size_t i = 0; rc == 0 && i < n; i++) {
      scn_journal_path(&from, gs->data.s, gens[i]);
      scn_journal_path(&to, moved.s, gens[i]);
      if (rename(from.s, to.s) != 0)
        rc = -1;
    }
    scn_fsync_dir(gs->data.s);
    if (rc != 0)
      snprintf(err, errlen, "cannot move the old files to %s: %s", moved.s, strerror(errno));
  }
  if (rc == 0)
    scn_log(SCN_LOG_INFO, "migrated the standalone layout into groups",
            "worlds=%zu entities=%zu moved_to=%s/migrated", scn_world_count(old),
            scn_entity_count(old), gs->data.s);
  scn_scene_free(old);
  return rc;
}

/* ---- the module -------------------------------------------------------------------------- */

static void collect_stats(void *ud, scn_metrics_sink *k) {
  scn_gstore *gs = ud;
  const gs_stats *s = &gs->stats;
  const scn_journal_stats *j = &gs->journal_stats;
  scn_metric(k, "journal_records_total", "counter", "Mutating commands written to the journals.",
             (double)j->records);
  scn_metric(k, "journal_bytes_total", "counter", "Bytes written to the journals.",
             (double)j->bytes);
  scn_metric(k, "journal_fsyncs_total", "counter", "fsyncs of the journals.", (double)j->fsyncs);
  scn_metric(k, "journal_held_back_total", "counter",
             "Journal commits held back because this daemon may have lost the group.",
             (double)s->held_back);
  scn_metric(k, "snapshots_total", "counter", "Snapshots written (groups and the node's).",
             (double)s->snapshots);
  scn_metric(k, "snapshot_failures_total", "counter", "Snapshots that failed.",
             (double)s->snapshot_failures);
  scn_metric(k, "group_loads_total", "counter", "Groups loaded from the data directory.",
             (double)s->loads);
}

void scn_gstore_set_tap(scn_gstore *gs, scn_gstore_tap_fn fn, void *ud) {
  gs->tap = fn;
  gs->tap_ud = ud;
}

void scn_gstore_set_fence(scn_gstore *gs, scn_fence_fn may_write, void *ud) {
  gs->may_write = may_write;
  gs->fence_ud = ud;
}

scn_gstore *scn_gstore_open(scn_server *srv, const char *node, scn_replay_fn replay,
                            void *replay_ud, int *rc) {
  scn_gstore *gs = calloc(1, sizeof *gs);
  if (!gs) {
    fprintf(stderr, "scened: out of memory\n");
    *rc = 1;
    return NULL;
  }
  gs->srv = srv;
  gs->replay = replay;
  gs->replay_ud = replay_ud;
  gs->lock_fd = -1;
  scn__gs_part_init(gs, &gs->node);
  gs->next_home = 1;
  scn_path nodes;
  bool fits = scn_path_fmt(&gs->data, "%s", srv->cfg.data_dir) &&
              scn_path_join(&gs->groups_dir, gs->data.s, "groups") &&
              scn_path_join(&nodes, gs->data.s, "nodes") &&
              scn_path_join(&gs->node.dir, nodes.s, node);
  *rc = 2;
  if (!fits || mkdir_one(gs->data.s) != 0 || mkdir_one(gs->groups_dir.s) != 0 ||
      mkdir_one(nodes.s) != 0) {
    fprintf(stderr, "scened: data directory %s is unusable: %s\n", srv->cfg.data_dir,
            strerror(errno));
  } else if ((*rc = scn__usable_dir(gs->node.dir.s, &gs->lock_fd, ".scened-lock")) == 0) {
    scn_chain chain;
    char msg[SCN_PATH_MSG_MAX];
    *rc = scn__load_chain(&srv->scene, gs->node.dir.s, srv->cfg.recover, false, replay, replay_ud,
                          &chain, msg, sizeof msg);
    if (*rc != 0) {
      fprintf(stderr, "scened: %s\n", msg);
    } else {
      *rc = scn_jwriter_open(&gs->node.journal, gs->node.dir.s, chain.gen) != 0 ? 2 : 0;
      scn_log(SCN_LOG_INFO, "node data loaded", "dir=%s entities=%zu replayed=%llu", gs->node.dir.s,
              scn_entity_count(srv->scene), (unsigned long long)chain.replayed);
    }
  }
  if (*rc != 0) {
    if (gs->lock_fd >= 0)
      close(gs->lock_fd);
    scn_jwriter_close(&gs->node.journal);
    free(gs);
    return NULL;
  }
  return gs;
}

void scn_gstore_start(scn_gstore *gs) {
  gs->hooks = (scn_hooks){.ud = gs,
                          .after_command = after_command,
                          .before_flush = before_flush,
                          .collect_stats = collect_stats};
  scn_server_add_hooks(gs->srv, &gs->hooks);
  uv_loop_t *loop = gs->srv->loop;
  uv_timer_init(loop, &gs->fsync_timer);
  uv_timer_init(loop, &gs->autosave_timer);
  gs->fsync_timer.data = gs->autosave_timer.data = gs;
  gs->open_timers = 2;
  gs->started = true;
  if (gs->srv->cfg.fsync == SCN_FSYNC_EVERYSEC)
    uv_timer_start(&gs->fsync_timer, on_fsync_timer, 1000, 1000);
  double interval = gs->srv->cfg.save_interval;
  if (interval > 0) {
    uint64_t ms = (uint64_t)(interval * 1000);
    uv_timer_start(&gs->autosave_timer, on_autosave, ms, ms);
  }
}

static void on_timer_closed(uv_handle_t *h) {
  scn_gstore *gs = h->data;
  if (--gs->open_timers == 0)
    free(gs);
}

void scn_gstore_close(scn_gstore *gs) {
  if (!gs)
    return;
  if (gs->started)
    scn_server_remove_hooks(gs->srv, &gs->hooks);
  commit_all(gs);
  uint64_t bytes;
  if (save_part(gs, &gs->node, &bytes) != 0)
    scn_log(SCN_LOG_ERROR, "the node's final snapshot failed; its journal keeps every change",
            "dir=%s", gs->node.dir.s);
  /* what was written is synced; what the fence held back goes */
  while (gs->nparts) {
    gs_part *p = gs->parts[0];
    scn_jwriter_fsync(&p->journal);
    scn_gstore_release(gs, p->name);
  }
  free(gs->parts);
  scn_jwriter_fsync(&gs->node.journal);
  scn_jwriter_close(&gs->node.journal);
  if (gs->lock_fd >= 0)
    close(gs->lock_fd);
  if (!gs->started) {
    free(gs);
    return;
  }
  uv_close((uv_handle_t *)&gs->fsync_timer, on_timer_closed);
  uv_close((uv_handle_t *)&gs->autosave_timer, on_timer_closed);
}

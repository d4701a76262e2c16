/* A follower's copy of a group on disk (--replicas): where it stands after a restart (seq
 * notes beside its snapshots), its resumption from its own epoch directory, the whole copy an
 * owner writes for a follower that its backlog no longer reaches, and that copy installed on
 * the follower's side (see groups.h).
 *
 *   DATA/groups/<g>/epoch.<E>/seq.<gen>    the records before journal generation gen, counted
 *                                          in epoch E (one decimal number)
 *   DATA/groups/<g>/outgoing.tmp/          a copy being written for a follower (gone at once:
 *                                          the owner keeps its files open, unlinked)
 *   DATA/groups/<g>/incoming.tmp/          a copy being received from the owner */
#include "store/groups.h"
#include "store/groups_internal.h"

#include "ops/log.h"
#include "store/files.h"
#include "store/history_file.h"
#include "store/persist.h"
#include "store/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUTGOING "outgoing.tmp"
#define INCOMING "incoming.tmp"
#define COPY_GEN 1 /* the journal generation a copy's snapshot names */

/* ---- seq notes ------------------------------------------------------------------------------ */

static bool write_note(const char *dir, uint64_t gen, uint64_t seq) {
  char name[40], text[32];
  snprintf(name, sizeof name, "seq.%" PRIu64, gen);
  int len = snprintf(text, sizeof text, "%" PRIu64 "\n", seq);
  scn_path path;
  if (!scn_path_join(&path, dir, name))
    return false;
  int fd = open(path.s, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return false;
  bool ok = write(fd, text, (size_t)len) == len;
  return close(fd) == 0 && ok;
}

static bool read_note(const char *dir, uint64_t gen, uint64_t *seq) {
  char name[40], text[32] = {0};
  snprintf(name, sizeof name, "seq.%" PRIu64, gen);
  scn_path path;
  if (!scn_path_join(&path, dir, name))
    return false;
  int fd = open(path.s, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  char *end;
  unsigned long long v = n > 0 ? strtoull(text, &end, 10) : 0;
  if (n <= 0 || end == text || *end != '\n')
    return false;
  *seq = v;
  return true;
}

/* Counts dir's notes in *found (when not NULL) and removes those of generations below
 * `below` (none when it is 0). */
static void each_note(const char *dir, uint64_t below, size_t *found) {
  DIR *d = opendir(dir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    unsigned long long g;
    char tail;
    if (sscanf(de->d_name, "seq.%llu%c", &g, &tail) != 1)
      continue;
    if (found)
      (*found)++;
    scn_path path;
    if (below && g < below && scn_path_join(&path, dir, de->d_name))
      unlink(path.s);
  }
  if (d)
    closedir(d);
}

void scn__gs_note_seq(const gs_part *p, uint64_t gen) {
  if (!p->name[0])
    return; /* the node's own part has no seqs */
  if (!write_note(p->dir.s, gen, p->seq))
    scn_log(SCN_LOG_WARN, "cannot note where a group's snapshot stands; a restart gets a copy",
            "dir=%s gen=%llu error=\"%s\"", p->dir.s, (unsigned long long)gen, strerror(errno));
  each_note(p->dir.s, gen, NULL);
}

/* ---- helpers -------------------------------------------------------------------------------- */

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

static void remove_other(void *ud, const char *dir, uint64_t epoch) {
  if (epoch != *(const uint64_t *)ud)
    scn__gs_remove_dir(dir);
}

static bool group_dir(const scn_gstore *gs, const char *group, scn_path *out) {
  return scn_path_join(out, gs->groups_dir.s, group);
}

bool scn_gstore_disk_epoch(const scn_gstore *gs, const char *group, uint64_t *epoch) {
  scn_path gdir;
  newest n = {0};
  if (group_dir(gs, group, &gdir))
    scn__gs_each_epoch(gdir.s, find_newest, &n);
  *epoch = n.epoch;
  return n.found;
}

/* Loads dir's chain into the scene as a group's (every entity it brings tagged home). */
static int load_as_group(scn_gstore *gs, const char *dir, uint32_t home, scn_chain *chain,
                         char *err, size_t errlen) {
  scn_server *srv = gs->srv;
  scn_entity_home_default(srv->scene, home);
  scn_entity_revived_clear(srv->scene);
  int rc = scn__load_chain(&srv->scene, dir, false, false, gs->replay, gs->replay_ud, chain, err,
                           errlen);
  scn_entity_home_default(srv->scene, 0);
  scn__gs_retire_revived(srv->scene);
  return rc;
}

/* A part for group at dir, its journal continuing in generation gen; NULL when out of memory
 * or the journal cannot be opened (err says which). */
static gs_part *add_part(scn_gstore *gs, const char *group, const char *dir, uint64_t gen,
                         uint32_t home, uint64_t epoch, uint64_t seq, char *err, size_t errlen) {
  gs_part *p = calloc(1, sizeof *p);
  gs_part **parts = p ? scn_array_grow(gs->parts, &gs->cap, sizeof *parts, gs->nparts + 1) : NULL;
  if (!parts) {
    free(p);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  gs->parts = parts;
  snprintf(p->name, sizeof p->name, "%s", group);
  scn_path_fmt(&p->dir, "%s", dir);
  scn__gs_part_init(gs, p);
  if (scn_jwriter_open(&p->journal, dir, gen) != 0) {
    snprintf(err, errlen, "cannot open the journal in %s", dir);
    free(p);
    return NULL;
  }
  p->home = home;
  p->epoch = epoch;
  p->seq = seq;
  gs->parts[gs->nparts++] = p;
  return p;
}

/* ---- a follower's own copy ------------------------------------------------------------------ */

int scn_gstore_resume(scn_gstore *gs, const char *group, uint64_t epoch, uint64_t *seq, char *err,
                      size_t errlen) {
  scn_path gdir;
  newest n = {0};
  if (scn__gs_find(gs, group)) {
    snprintf(err, errlen, "group %s is held already", group);
    return -1;
  }
  if (group_dir(gs, group, &gdir))
    scn__gs_each_epoch(gdir.s, find_newest, &n);
  size_t notes = 0;
  if (n.found)
    each_note(n.dir.s, 0, &notes);
  if (!n.found || n.epoch != epoch || notes == 0) {
    snprintf(err, errlen, "no copy of group %s at epoch %llu with its position here", group,
             (unsigned long long)epoch);
    return -1;
  }
  uint64_t t0 = uv_hrtime(), base = 0;
  uint32_t home = gs->next_home++;
  scn_chain chain = {0};
  if (load_as_group(gs, n.dir.s, home, &chain, err, errlen) != 0)
    return -1;
  if (!chain.snapshot || !read_note(n.dir.s, chain.info.journal_gen, &base)) {
    snprintf(err, errlen, "%s: no position noted for its snapshot (generation %llu)", n.dir.s,
             (unsigned long long)chain.info.journal_gen);
    return -1;
  }
  gs_part *p =
      add_part(gs, group, n.dir.s, chain.gen, home, epoch, base + chain.replayed, err, errlen);
  if (!p)
    return -1;
  p->changes = chain.replayed;
  *seq = p->seq;
  gs->stats.loads++;
  scn_log(SCN_LOG_INFO, "replica: a copy resumed from this directory",
          "group=%s epoch=%llu seq=%llu replayed=%llu ms=%.1f", group, (unsigned long long)epoch,
          (unsigned long long)p->seq, (unsigned long long)chain.replayed,
          (double)(uv_hrtime() - t0) / 1e6);
  return 0;
}

/* ---- a whole copy, on the owner's side ------------------------------------------------------ */

/* A file of dir that is unlinked at once: it lives while open. */
static int open_unlinked(const char *dir, const char *name) {
  scn_path path;
  if (!scn_path_join(&path, dir, name))
    return -1;
  int fd = open(path.s, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  unlink(path.s);
  return fd;
}

int scn_gstore_copy_out(scn_gstore *gs, const char *group, scn_gstore_copy *out, char *err,
                        size_t errlen) {
  gs_part *p = scn__gs_find(gs, group);
  scn_path gdir, dir;
  *out = (scn_gstore_copy){.snap_fd = -1, .hist_fd = -1};
  if (!p || !group_dir(gs, group, &gdir) || !scn_path_join(&dir, gdir.s, OUTGOING)) {
    snprintf(err, errlen, "group %s is not held here", group);
    return -1;
  }
  /* Read back at once and never kept: written without a rename or an fsync. */
  scn__gs_remove_dir(dir.s);
  if (mkdir(dir.s, 0755) != 0) {
    snprintf(err, errlen, "cannot create %s: %s", dir.s, strerror(errno));
    return -1;
  }
  out->snap_fd = open_unlinked(dir.s, "snapshot.scn");
  out->hist_fd = open_unlinked(dir.s, SCN_HISTORY_FILE);
  rmdir(dir.s);
  scn_snapshot_part part = {group, p->epoch, p->home};
  if (out->snap_fd < 0 || out->hist_fd < 0) {
    snprintf(err, errlen, "cannot create the copy's files in %s: %s", dir.s, strerror(errno));
  } else if (scn_snapshot_write_part_fd(gs->srv->scene, &part, COPY_GEN, out->snap_fd,
                                        &out->snap_len, err, errlen) == 0 &&
             scn_history_file_write_fd(gs->srv->scene, group, p->epoch, out->hist_fd,
                                       &out->hist_len, err, errlen) == 0) {
    out->epoch = p->epoch;
    out->seq = p->seq;
    return 0;
  }
  scn_gstore_copy_close(out);
  return -1;
}

void scn_gstore_copy_close(scn_gstore_copy *c) {
  if (c->snap_fd >= 0)
    close(c->snap_fd);
  if (c->hist_fd >= 0)
    close(c->hist_fd);
  c->snap_fd = c->hist_fd = -1;
}

/* ---- a whole copy, on the follower's side --------------------------------------------------- */

static int create_in(const char *dir, const char *name, char *err, size_t errlen) {
  scn_path path;
  int fd = scn_path_join(&path, dir, name)
               ? open(path.s, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
               : -1;
  if (fd < 0)
    snprintf(err, errlen, "cannot create %s/%s: %s", dir, name, strerror(errno));
  return fd;
}

int scn_gstore_copy_in_open(scn_gstore *gs, const char *group, int *snap_fd, int *hist_fd,
                            char *err, size_t errlen) {
  scn_path gdir, dir;
  *snap_fd = *hist_fd = -1;
  if (!group_dir(gs, group, &gdir) || !scn_path_join(&dir, gdir.s, INCOMING)) {
    snprintf(err, errlen, "the data directory's path is too long");
    return -1;
  }
  scn__gs_remove_dir(dir.s);
  if ((mkdir(gdir.s, 0755) != 0 && errno != EEXIST) || mkdir(dir.s, 0755) != 0) {
    snprintf(err, errlen, "cannot create %s: %s", dir.s, strerror(errno));
    return -1;
  }
  *snap_fd = create_in(dir.s, "snapshot.scn", err, errlen);
  *hist_fd = *snap_fd >= 0 ? create_in(dir.s, SCN_HISTORY_FILE, err, errlen) : -1;
  if (*hist_fd >= 0)
    return 0;
  if (*snap_fd >= 0)
    close(*snap_fd);
  *snap_fd = -1;
  scn__gs_remove_dir(dir.s);
  return -1;
}

void scn_gstore_copy_in_abort(scn_gstore *gs, const char *group) {
  scn_path gdir, dir;
  if (group_dir(gs, group, &gdir) && scn_path_join(&dir, gdir.s, INCOMING))
    scn__gs_remove_dir(dir.s);
}

/* Moves the received snapshot into dir (a fresh epoch directory), with the journal it names
 * and the note of its position. */
static int stage(const char *incoming, const char *dir, uint64_t seq, char *err, size_t errlen) {
  scn_path from, to;
  scn__gs_remove_dir(dir);
  int fd = -1;
  if (mkdir(dir, 0755) != 0 || !scn_path_join(&from, incoming, "snapshot.scn") ||
      !scn_path_join(&to, dir, "snapshot.scn") || rename(from.s, to.s) != 0 ||
      (fd = scn_journal_open(dir, COPY_GEN)) < 0 || !write_note(dir, COPY_GEN, seq)) {
    snprintf(err, errlen, "cannot stage the copy in %s: %s", dir, strerror(errno));
    if (fd >= 0)
      close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

int scn_gstore_install(scn_gstore *gs, const char *group, uint64_t epoch, uint64_t seq, char *err,
                       size_t errlen) {
  scn_path gdir, incoming, final, dir;
  if (scn__gs_find(gs, group)) {
    snprintf(err, errlen, "group %s is held already", group);
    return -1;
  }
  if (!group_dir(gs, group, &gdir) || !scn_path_join(&incoming, gdir.s, INCOMING) ||
      !scn_path_fmt(&final, "%s/epoch.%llu", gdir.s, (unsigned long long)epoch) ||
      !scn_path_fmt(&dir, "%s.tmp", final.s)) {
    snprintf(err, errlen, "the data directory's path is too long");
    return -1;
  }
  uint64_t t0 = uv_hrtime();
  if (stage(incoming.s, dir.s, seq, err, errlen) != 0) {
    scn__gs_remove_dir(dir.s);
    return -1;
  }
  uint32_t home = gs->next_home++;
  scn_chain chain = {0};
  scn_history_load hist = {0};
  gs_part *p = NULL;
  if (load_as_group(gs, dir.s, home, &chain, err, errlen) == 0) {
    scn_history_file_load(gs->srv->scene, group, epoch, incoming.s, &hist);
    p = add_part(gs, group, dir.s, chain.gen, home, epoch, seq, err, errlen);
  }
  /* The copy gets its epoch's name once complete; the older copy here (any epoch) goes. */
  if (p)
    scn__gs_remove_dir(final.s);
  if (p && (scn_fsync_dir(dir.s) != 0 || rename(dir.s, final.s) != 0)) {
    snprintf(err, errlen, "cannot rename %s: %s", dir.s, strerror(errno));
    scn_gstore_release(gs, group);
    p = NULL;
  }
  if (!p) {
    scn__gs_remove_dir(dir.s);
    return -1;
  }
  p->dir = final;
  scn_fsync_dir(gdir.s);
  scn__gs_each_epoch(gdir.s, remove_other, &epoch);
  scn__gs_remove_dir(incoming.s);
  gs->stats.loads++;
  scn_log(SCN_LOG_INFO, "replica: a whole copy of the group installed",
          "group=%s epoch=%llu seq=%llu worlds=%llu transforms=%llu histories=%u ms=%.1f", group,
          (unsigned long long)epoch, (unsigned long long)seq, (unsigned long long)chain.info.worlds,
          (unsigned long long)chain.info.transforms, hist.histories,
          (double)(uv_hrtime() - t0) / 1e6);
  return 0;
}

/* ---- a group that is no longer this daemon's ------------------------------------------------ */

void scn_gstore_forget(scn_gstore *gs, const char *group, const char *why) {
  scn_path gdir;
  if (scn__gs_find(gs, group) || !group_dir(gs, group, &gdir))
    return;
  DIR *d = opendir(gdir.s);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    scn_path path;
    struct stat st;
    if (de->d_name[0] == '.' || !scn_path_join(&path, gdir.s, de->d_name))
      continue;
    if (lstat(path.s, &st) == 0 && S_ISDIR(st.st_mode))
      scn__gs_remove_dir(path.s);
    else
      unlink(path.s);
  }
  if (d)
    closedir(d);
  if (rmdir(gdir.s) == 0)
    scn_fsync_dir(gs->groups_dir.s);
  scn_log(SCN_LOG_INFO, "replica: a stale copy of a group was removed from this directory",
          "group=%s dir=%s reason=\"%s\"", group, gdir.s, why);
}

bool scn_gstore_position(const scn_gstore *gs, const char *group, uint64_t *epoch, uint64_t *seq) {
  gs_part *p = scn__gs_find((scn_gstore *)gs, group);
  if (p) {
    *epoch = p->epoch;
    *seq = p->seq;
  }
  return p != NULL;
}

bool scn_gstore_began_empty(const scn_gstore *gs, const char *group) {
  gs_part *p = scn__gs_find((scn_gstore *)gs, group);
  return p && !p->from_copy;
}

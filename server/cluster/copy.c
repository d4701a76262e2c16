/* A whole copy of a group on the change stream (--replicas), for a follower that the owner's
 * backlog no longer reaches (or that has no copy of the owner's epoch to go on from):
 *
 *   owner -> follower   {"copy":SEQ,"epoch":E,"snapshot":BYTES,"history":BYTES}
 *                       {"c":"<base64>"} ...   the snapshot's bytes, then the history's
 *                       {"r":SEQ+1,...} ...    the records written meanwhile, from the backlog
 *   follower -> owner   {"ack":SEQ}            once the copy is installed
 *
 * The owner writes the copy at once (the loop is one thread, so it is the group as of record
 * SEQ) into files it keeps open, and sends them as its link's output budget drains, turn by
 * turn, while the group goes on being served: records after SEQ wait in the backlog. The
 * follower writes the chunks to its directory as they come and installs the copy once whole
 * (scn_gstore_install). */
#include "cluster/cluster_internal.h"

#include "cluster/etcd.h"
#include "net/conn.h"
#include "ops/log.h"
#include "store/groups.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK_MAX ((size_t)48 << 10) /* bytes of the copy per line (64 KiB of base64) */

/* Bytes per chunk: CHUNK_MAX, or less so that a line fits --max-line (the follower's is
 * taken to be this daemon's, as every flag of a cluster). */
static size_t chunk_bytes(const scn_cluster *cl) {
  uint64_t max_line = cl->srv->cfg.max_line;
  size_t fit = max_line > 64 ? (size_t)((max_line - 32) / 4 * 3) : 3;
  return fit < CHUNK_MAX ? fit : CHUNK_MAX;
}

/* ---- the owner's side ----------------------------------------------------------------------- */

typedef struct scn_copy_out {
  scn_gstore_copy files;
  uint64_t off; /* bytes of the copy written to the link */
  bool header;  /* its first line written */
  unsigned char chunk[CHUNK_MAX];
} scn_copy_out;

int scn__copy_out_start(scn_cluster *cl, scn_ship_link *l, uint64_t *seq, char *msg,
                        size_t msglen) {
  scn_copy_out *co = calloc(1, sizeof *co);
  if (!co) {
    snprintf(msg, msglen, "out of memory");
    return -1;
  }
  uint64_t t0 = uv_hrtime();
  if (scn_gstore_copy_out(cl->srv->gstore, l->ship->group, &co->files, msg, msglen) != 0) {
    free(co);
    return -1;
  }
  l->copy = co;
  *seq = co->files.seq;
  cl->stats.copies_sent++;
  scn_log(SCN_LOG_INFO, "replica: a whole copy for a follower",
          "group=%s node=%s epoch=%llu seq=%llu snapshot_bytes=%llu history_bytes=%llu ms=%.1f",
          l->ship->group, l->node[0] ? l->node : "-", (unsigned long long)co->files.epoch,
          (unsigned long long)co->files.seq, (unsigned long long)co->files.snap_len,
          (unsigned long long)co->files.hist_len, (double)(uv_hrtime() - t0) / 1e6);
  return 0;
}

void scn__copy_out_free(scn_ship_link *l) {
  if (!l->copy)
    return;
  scn_gstore_copy_close(&l->copy->files);
  free(l->copy);
  l->copy = NULL;
}

scn_copy_progress scn__copy_out_pump(scn_cluster *cl, scn_ship_link *l, size_t budget) {
  scn_copy_out *co = l->copy;
  unsigned char *chunk = co->chunk;
  scn_buf *out = &l->conn->out.bytes;
  const scn_gstore_copy *f = &co->files;
  size_t before = out->len;
  if (!co->header) {
    co->header = true;
    scn_buf_adds(out, "{\"copy\":");
    scn_buf_add_u64(out, f->seq);
    scn_buf_adds(out, ",\"epoch\":");
    scn_buf_add_u64(out, f->epoch);
    scn_buf_adds(out, ",\"snapshot\":");
    scn_buf_add_u64(out, f->snap_len);
    scn_buf_adds(out, ",\"history\":");
    scn_buf_add_u64(out, f->hist_len);
    scn_buf_adds(out, "}\n");
  }
  size_t size = chunk_bytes(cl);
  uint64_t total = f->snap_len + f->hist_len;
  while (co->off < total && scn_conn_queued(l->conn) < budget && !out->failed) {
    bool snap = co->off < f->snap_len;
    uint64_t at = snap ? co->off : co->off - f->snap_len;
    uint64_t left = (snap ? f->snap_len : f->hist_len) - at;
    size_t n = left < size ? (size_t)left : size;
    if (pread(snap ? f->snap_fd : f->hist_fd, chunk, n, (off_t)at) != (ssize_t)n)
      return SCN_COPY_FAILED;
    scn_buf_adds(out, "{\"c\":");
    scn_etcd_add_b64(out, chunk, n);
    scn_buf_adds(out, "}\n");
    co->off += n;
  }
  if (out->len != before)
    scn_conn_schedule_flush(l->conn); /* (written: this runs again once it drained) */
  if (out->failed)
    return SCN_COPY_FAILED;
  if (co->off < total)
    return SCN_COPY_MORE;
  /* Sent whole: the follower acknowledges its seq once installed. */
  if (f->seq > l->acked) {
    l->sent = f->seq;
    l->unacked_since = uv_hrtime();
  }
  scn__copy_out_free(l);
  return SCN_COPY_DONE;
}

/* ---- the follower's side -------------------------------------------------------------------- */

struct scn_copy_in {
  scn_cluster *cl;
  char group[SCN_NAME_MAX + 1];
  uint64_t epoch, seq;
  uint64_t snap_len, hist_len, got;
  int snap_fd, hist_fd;
  char *buf; /* a chunk decoded */
  size_t cap;
  uint64_t t0;
};

static uint64_t field(const cJSON *root, const char *name, bool *ok) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 ||
      v->valuedouble != (double)(uint64_t)v->valuedouble)
    *ok = false;
  return *ok ? (uint64_t)v->valuedouble : 0;
}

scn_copy_in *scn__copy_in_start(scn_cluster *cl, const char *group, uint64_t epoch,
                                const cJSON *header, char *err, size_t errlen) {
  bool ok = true;
  uint64_t seq = field(header, "copy", &ok), e = field(header, "epoch", &ok);
  uint64_t snap = field(header, "snapshot", &ok), hist = field(header, "history", &ok);
  if (!ok || e != epoch) {
    snprintf(err, errlen, "a copy's first line that is not one of epoch %llu",
             (unsigned long long)epoch);
    return NULL;
  }
  scn_copy_in *ci = calloc(1, sizeof *ci);
  size_t cap = CHUNK_MAX + 4;
  char *buf = malloc(cap);
  if (!ci || !buf) {
    free(ci);
    free(buf);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  *ci = (scn_copy_in){.cl = cl,
                      .epoch = epoch,
                      .seq = seq,
                      .snap_len = snap,
                      .hist_len = hist,
                      .buf = buf,
                      .cap = cap,
                      .t0 = uv_hrtime()};
  snprintf(ci->group, sizeof ci->group, "%s", group);
  if (scn_gstore_copy_in_open(cl->srv->gstore, group, &ci->snap_fd, &ci->hist_fd, err, errlen) !=
      0) {
    free(buf);
    free(ci);
    return NULL;
  }
  return ci;
}

static bool write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

int scn__copy_in_chunk(scn_copy_in *ci, const cJSON *root, uint64_t *seq, char *err,
                       size_t errlen) {
  size_t n = 0;
  uint64_t total = ci->snap_len + ci->hist_len;
  if (ci->got < total &&
      !scn_etcd_b64(cJSON_GetObjectItemCaseSensitive(root, "c"), ci->buf, ci->cap, &n)) {
    snprintf(err, errlen, "a line of a copy that is not a chunk of it");
    return -1;
  }
  if (ci->got + n > total) {
    snprintf(err, errlen, "a copy longer than it said (%llu bytes)", (unsigned long long)total);
    return -1;
  }
  /* A chunk may end the snapshot and start the history. */
  size_t to_snap = ci->got < ci->snap_len
                       ? (size_t)(ci->snap_len - ci->got < n ? ci->snap_len - ci->got : n)
                       : 0;
  if (!write_all(ci->snap_fd, ci->buf, to_snap) ||
      !write_all(ci->hist_fd, ci->buf + to_snap, n - to_snap)) {
    snprintf(err, errlen, "cannot write a copy received: %s", strerror(errno));
    return -1;
  }
  ci->got += n;
  if (ci->got < total)
    return 1;
  bool closed = close(ci->snap_fd) == 0;
  closed = close(ci->hist_fd) == 0 && closed;
  ci->snap_fd = ci->hist_fd = -1;
  if (!closed) {
    snprintf(err, errlen, "cannot write a copy received: %s", strerror(errno));
    return -1;
  }
  if (scn_gstore_install(ci->cl->srv->gstore, ci->group, ci->epoch, ci->seq, err, errlen) != 0)
    return -1;
  ci->cl->stats.copies_received++;
  scn_log(SCN_LOG_INFO, "replica: a whole copy received",
          "group=%s epoch=%llu seq=%llu bytes=%llu ms=%.1f", ci->group,
          (unsigned long long)ci->epoch, (unsigned long long)ci->seq, (unsigned long long)total,
          (double)(uv_hrtime() - ci->t0) / 1e6);
  *seq = ci->seq;
  return 0;
}

void scn__copy_in_free(scn_copy_in *ci) {
  if (!ci)
    return;
  if (ci->snap_fd >= 0)
    close(ci->snap_fd);
  if (ci->hist_fd >= 0)
    close(ci->hist_fd);
  scn_gstore_copy_in_abort(ci->cl->srv->gstore, ci->group); /* (installed: gone already) */
  free(ci->buf);
  free(ci);
}

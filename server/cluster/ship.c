/* The owner's side of the change stream (--replicas N >= 1): for each group served here, a ship
 * keeping the backlog of its
 * records as the store's tap hands them on, and its followers' links (replicate.c). A ship goes
 * with its group (scn__ship_drop, where the store lets the group go and its uncommitted records
 * with it) or when the group is no longer served here; a new epoch starts its backlog over (seqs
 * start over with it). */
#include "cluster/cluster_internal.h"

#include "store/groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the group is served here (with --replicas: the tap is registered only then). Every
 * group served keeps its backlog from its epoch's first record, before its followers are
 * chosen, so that a new follower can start from seq 1 without a snapshot. */
static bool served(const scn_group_entry *g) {
  return g && (g->state == SCN_GROUP_OWNED || g->state == SCN_GROUP_FROZEN);
}

/* The ships are kept in order of their groups' names (each tick looks up every world's): the
 * index of group's, or where it would go (*found false). */
static size_t lookup(const scn_cluster *cl, const char *group, bool *found) {
  size_t lo = 0, hi = cl->nships;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(cl->ships[mid]->group, group);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = false;
  return lo;
}

static bool ships_here(scn_cluster *cl, const char *group) {
  return served(scn_owners_find(&cl->owners, group));
}

static size_t find(const scn_cluster *cl, const char *group) {
  bool found;
  size_t i = lookup(cl, group, &found);
  return found ? i : cl->nships;
}

static void free_at(scn_cluster *cl, size_t i) {
  scn_ship *s = cl->ships[i];
  scn__links_close(s);
  scn_backlog_free(&s->backlog);
  free(s);
  memmove(&cl->ships[i], &cl->ships[i + 1], (cl->nships - i - 1) * sizeof *cl->ships);
  cl->nships--;
}

static scn_ship *add(scn_cluster *cl, const char *group) {
  if (cl->nships == cl->ships_cap) {
    size_t cap = cl->ships_cap ? cl->ships_cap * 2 : 8;
    scn_ship **grown = realloc(cl->ships, cap * sizeof *grown);
    if (!grown)
      return NULL;
    cl->ships = grown;
    cl->ships_cap = cap;
  }
  scn_ship *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  snprintf(s->group, sizeof s->group, "%s", group);
  uint64_t limit = cl->srv->cfg.replica_backlog;
  scn_backlog_init(&s->backlog, limit ? (size_t)limit : SCN_REPLICA_BACKLOG);
  bool found;
  size_t at = lookup(cl, s->group, &found);
  memmove(&cl->ships[at + 1], &cl->ships[at], (cl->nships - at) * sizeof *cl->ships);
  cl->ships[at] = s;
  cl->nships++;
  return s;
}

void scn__ship_tap(void *ud, const scn_gstore_record *r) {
  scn_cluster *cl = ud;
  size_t i = find(cl, r->group);
  const scn_group_entry *g = scn_owners_find(&cl->owners, r->group);
  if (!served(g)) {
    if (i < cl->nships)
      free_at(cl, i);
    return;
  }
  scn_ship *s = i < cl->nships ? cl->ships[i] : add(cl, r->group);
  if (!s) {
    cl->stats.ship_failures++;
    return;
  }
  if (s->epoch != r->epoch) {
    scn__links_close(s);
    scn_backlog_clear(&s->backlog);
    s->epoch = r->epoch;
  }
  s->last_seq = r->seq;
  /* The loop's time (the start of this turn, in ms): no clock read per record. */
  s->made_at[r->seq % SCN_SHIP_TIMES] = uv_now(cl->srv->loop) * 1000000;
  /* Out of memory leaves the backlog empty: a follower is then sent a snapshot, never a gap. */
  if (!scn_backlog_append(&s->backlog, r->seq, r->tick, r->bytes, r->len))
    cl->stats.ship_failures++;
  scn__links_record(cl, s, r->seq, r->tick, r->bytes, r->len);
  scn__sync_record(cl, s, g, r->seq);
}

scn_ship *scn__ship_get(scn_cluster *cl, const char *group) {
  if (!ships_here(cl, group))
    return NULL;
  size_t i = find(cl, group);
  return i < cl->nships ? cl->ships[i] : add(cl, group);
}

scn_ship *scn__ship_find(scn_cluster *cl, const char *group) {
  size_t i = find(cl, group);
  return i < cl->nships ? cl->ships[i] : NULL;
}

uint64_t scn__ship_lag_ns(const scn_ship_link *l, uint64_t now) {
  const scn_ship *s = l->ship;
  if (!s || l->acked >= s->last_seq)
    return 0;
  uint64_t oldest = l->acked + 1;
  if (s->last_seq - oldest >= SCN_SHIP_TIMES)
    oldest = s->last_seq - SCN_SHIP_TIMES + 1;
  uint64_t made = s->made_at[oldest % SCN_SHIP_TIMES];
  return made && now > made ? now - made : 0;
}

void scn__ship_drop(scn_cluster *cl, const char *group) {
  size_t i = find(cl, group);
  if (i < cl->nships)
    free_at(cl, i);
}

void scn__ship_check(scn_cluster *cl) {
  for (size_t i = cl->nships; i-- > 0;)
    if (!ships_here(cl, cl->ships[i]->group))
      free_at(cl, i);
}

void scn__ship_free(scn_cluster *cl) {
  while (cl->nships)
    free_at(cl, cl->nships - 1);
  free(cl->ships);
  cl->ships = NULL;
  cl->ships_cap = 0;
}

#include "stream/frame.h"

#include "b64.h"

#include <stdlib.h>
#include <string.h>

void scn_members_release(scn_members *m) {
  if (m && --m->refs == 0)
    free(m);
}

static bool id_push(scn_id_vec *v, scn_entity e) {
  scn_entity *ids = scn_array_grow(v->ids, &v->cap, sizeof *ids, v->n + 1);
  if (!ids)
    return false;
  v->ids = ids;
  v->ids[v->n++] = e;
  return true;
}

static bool set_prepare(scn_id_set *s, size_t n) {
  size_t cap = 64;
  while (cap < n * 2)
    cap *= 2;
  if (cap - 1 > s->mask || !s->slots) {
    free(s->slots);
    s->slots = calloc(cap, sizeof *s->slots);
    s->mask = s->slots ? cap - 1 : 0;
    return s->slots != NULL;
  }
  memset(s->slots, 0, sizeof *s->slots * (s->mask + 1));
  return true;
}

static size_t set_slot(const scn_id_set *s, scn_entity e) {
  return (size_t)((e * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & s->mask;
}

/* Inserts e; false when it was already there. */
static bool set_add(scn_id_set *s, scn_entity e) {
  size_t h = set_slot(s, e);
  while (s->slots[h]) {
    if (s->slots[h] == e)
      return false;
    h = (h + 1) & s->mask;
  }
  s->slots[h] = e;
  return true;
}

static bool set_has(const scn_id_set *s, scn_entity e) {
  size_t h = set_slot(s, e);
  while (s->slots[h]) {
    if (s->slots[h] == e)
      return true;
    h = (h + 1) & s->mask;
  }
  return false;
}

void scn_frame_encoder_free(scn_frame_encoder *enc) {
  free(enc->current.ids);
  free(enc->entered.ids);
  free(enc->removed.ids);
  free(enc->first_seen.slots);
  memset(enc, 0, sizeof *enc);
}

void scn_frame_free(scn_frame *f) {
  scn_buf_free(&f->head);
  scn_buf_free(&f->tail);
  free(f->ids);
  free(f->ms);
  free(f->removed);
  scn_members_release(f->members);
  memset(f, 0, sizeof *f);
}

/* ---- collecting the set ------------------------------------------------------------------ */

typedef struct set_writer {
  scn_frame *f;
  scn_frame_encoder *enc;
  bool all; /* a full frame: every transform in scope */
  bool check_entered;
  bool failed;
} set_writer;

static void add_entry(void *ud, scn_entity e, const float m[16]) {
  set_writer *w = ud;
  scn_frame *f = w->f;
  if (f->n == f->cap) { /* both arrays grow to the same capacity */
    size_t ids_cap = f->cap, ms_cap = f->cap;
    scn_entity *ids = scn_array_grow(f->ids, &ids_cap, sizeof *ids, f->n + 1);
    if (ids)
      f->ids = ids;
    float(*ms)[16] = ids ? scn_array_grow(f->ms, &ms_cap, sizeof *ms, f->n + 1) : NULL;
    if (!ms) {
      w->failed = true;
      return;
    }
    f->ms = ms;
    f->cap = ids_cap < ms_cap ? ids_cap : ms_cap;
  }
  f->ids[f->n] = e;
  memcpy(f->ms[f->n], m, sizeof f->ms[0]);
  f->n++;
}

/* Subtree scope: changed transforms, and those that entered the scope even if unchanged. */
static void add_scope_entry(void *ud, scn_entity e, const float m[16], bool changed) {
  set_writer *w = ud;
  if (w->all || changed || (w->check_entered && set_has(&w->enc->first_seen, e)))
    add_entry(w, e, m);
}

static void collect_member(void *ud, scn_entity e, const float m[16], bool changed) {
  (void)m, (void)changed;
  set_writer *w = ud;
  w->failed |= !id_push(&w->enc->current, e);
}

static int cmp_id(const void *a, const void *b) {
  scn_entity x = *(const scn_entity *)a, y = *(const scn_entity *)b;
  return (x > y) - (x < y);
}

/* The whole world's removals: what existed at since (its first event in the window is not a
 * creation) and has no transform now. */
typedef struct removal_scan {
  scn_frame_encoder *enc;
  scn_world *world;
  bool ok;
} removal_scan;

static void scan_event(void *ud, scn_entity e, scn_event_kind kind) {
  removal_scan *r = ud;
  if (!set_add(&r->enc->first_seen, e))
    return;
  if (kind != SCN_EVENT_CREATED && !scn_transform_exists(r->world, e))
    r->ok &= id_push(&r->enc->removed, e);
}

static void count_event(void *ud, scn_entity e, scn_event_kind kind) {
  (void)e, (void)kind;
  ++*(size_t *)ud;
}

/* Subtree scope: new members against the old sorted list; fills entered and removed. */
static scn_members *diff_members(scn_frame_encoder *enc, const scn_members *old) {
  scn_id_vec *cur = &enc->current;
  if (cur->n > 1)
    qsort(cur->ids, cur->n, sizeof(scn_entity), cmp_id);
  scn_members *m = malloc(sizeof *m + sizeof(scn_entity) * cur->n);
  if (!m)
    return NULL;
  m->refs = 1;
  m->n = cur->n;
  if (cur->n)
    memcpy(m->ids, cur->ids, sizeof(scn_entity) * m->n);
  size_t i = 0, j = 0, on = old ? old->n : 0;
  bool ok = true;
  while (i < on || j < m->n) {
    if (j == m->n || (i < on && old->ids[i] < m->ids[j]))
      ok &= id_push(&enc->removed, old->ids[i++]);
    else if (i == on || m->ids[j] < old->ids[i])
      ok &= id_push(&enc->entered, m->ids[j++]);
    else
      i++, j++;
  }
  if (!ok) {
    free(m);
    return NULL;
  }
  return m;
}

static void finish(scn_frame_encoder *enc, scn_world *w, bool full, scn_frame *f);
static void frame_reset(scn_frame_encoder *enc, scn_world *w, scn_frame *f);

/* ---- text ------------------------------------------------------------------------------- */

static void write_ids(scn_buf *out, const scn_entity *ids, size_t from, size_t to) {
  for (size_t i = from; i < to; i++) {
    if (i)
      scn_buf_addc(out, ',');
    scn_buf_add_u64(out, ids[i]);
  }
}

/* Base64 of matrices [from, to), straight into out. */
static void write_b64(scn_buf *out, const float (*ms)[16], size_t from, size_t to) {
  size_t chars = SCN_B64_LEN((to - from) * 64);
  if (to == from || !scn_buf_reserve(out, chars))
    return;
  scn_b64_encode_matrices(out->data + out->len, ms + from, to - from);
  out->len += chars;
}

/* Positions: json counts the n entries; b64 counts the n ids, then the n matrices. */
bool scn_frame_write(scn_buf *out, const scn_frame *f, scn_matrix_form form, size_t *at,
                     size_t budget) {
  size_t n = f->n, pos = *at;
  bool done = false;
  if (pos == 0) {
    scn_buf_add(out, f->head.data, f->head.len);
    scn_buf_adds(out, form == SCN_MATRICES_B64 ? ",\"ids\":[" : ",\"set\":[");
  }
  if (form == SCN_MATRICES_JSON) {
    size_t to = n - pos < budget ? n : pos + budget;
    for (size_t i = pos; i < to; i++) {
      scn_buf_adds(out, i ? ",{\"e\":" : "{\"e\":");
      scn_buf_add_u64(out, f->ids[i]);
      scn_buf_adds(out, ",\"m\":");
      scn_buf_add_matrix(out, f->ms[i]);
      scn_buf_addc(out, '}');
    }
    pos = to;
    if ((done = pos == n))
      scn_buf_addc(out, ']');
  } else {
    if (pos < n || n == 0) {
      size_t to = n - pos < budget ? n : pos + budget;
      write_ids(out, f->ids, pos, to);
      budget -= to - pos;
      if ((pos = to) == n)
        scn_buf_adds(out, "],\"ms\":\"");
    }
    if (pos >= n) {
      size_t from = pos - n, to = n - from < budget ? n : from + budget / 3 * 3;
      write_b64(out, f->ms, from, to);
      pos = n + to;
      if ((done = to == n))
        scn_buf_addc(out, '"');
    }
  }
  if (done)
    scn_buf_add(out, f->tail.data, f->tail.len);
  *at = pos;
  return done;
}

void scn_frame_encode(scn_frame_encoder *enc, const scn_frame_key *k, const scn_members *old,
                      scn_frame *f) {
  scn_world *w = k->world;
  frame_reset(enc, w, f);

  set_writer sw = {.f = f, .enc = enc};
  if (k->root == SCN_ENTITY_NONE) {
    scn_world_visit_changed(w, SCN_ENTITY_NONE, k->full ? 0 : k->since, add_entry, &sw);
    if (!k->full) {
      size_t events = 0;
      scn_world_visit_events(w, k->since, count_event, &events);
      removal_scan scan = {enc, w, true};
      if (events && set_prepare(&enc->first_seen, events))
        scn_world_visit_events(w, k->since, scan_event, &scan);
      sw.failed |= !scan.ok;
    }
  } else {
    scn_world_visit_scope(w, k->root, 0, collect_member, &sw);
    f->members = sw.failed ? NULL : diff_members(enc, k->full ? NULL : old);
    sw.failed |= f->members == NULL;
    if (k->full)
      enc->removed.n = 0;
    sw.all = k->full;
    sw.check_entered =
        !k->full && enc->entered.n > 0 && set_prepare(&enc->first_seen, enc->entered.n);
    for (size_t i = 0; sw.check_entered && i < enc->entered.n; i++)
      set_add(&enc->first_seen, enc->entered.ids[i]);
    scn_world_visit_scope(w, k->root, k->since, add_scope_entry, &sw);
  }
  if (sw.failed)
    return; /* out of memory: the subscribers stay where they were and try next tick */
  finish(enc, w, k->full, f);
}

static void frame_reset(scn_frame_encoder *enc, scn_world *w, scn_frame *f) {
  f->head.len = f->tail.len = 0;
  f->head.failed = f->tail.failed = false;
  f->n = f->removed_n = 0;
  f->ok = f->empty = false;
  scn_members_release(f->members);
  f->members = NULL;
  f->tick = scn_world_tick(w) - 1; /* the tick just closed */
  enc->current.n = enc->entered.n = enc->removed.n = 0;
}

static void push_removed(void *ud, scn_entity e) {
  set_writer *w = ud;
  w->failed |= !id_push(&w->enc->removed, e);
}

int64_t scn_frame_encode_fill(scn_frame_encoder *enc, scn_world *w, bool full,
                              scn_frame_fill_fn fill, void *ud, scn_frame *f) {
  frame_reset(enc, w, f);
  set_writer sw = {.f = f, .enc = enc};
  int64_t rc = fill(ud, add_entry, push_removed, &sw);
  if (rc < 0 || sw.failed)
    return rc < 0 ? rc : SCN_NOMEM;
  finish(enc, w, full, f);
  return rc;
}

typedef struct holdings {
  scn_frame_encoder *enc;
  scn_world *world;
  void (*fn)(void *ud, scn_entity e);
  void *ud;
} holdings;

/* The first event of an entity since the tick says whether it was there then. */
static void held_by_event(void *ud, scn_entity e, scn_event_kind kind) {
  holdings *h = ud;
  if (set_add(&h->enc->first_seen, e) && kind != SCN_EVENT_CREATED)
    h->fn(h->ud, e);
}

static void held_unless_seen(void *ud, scn_entity e, const float m[16]) {
  (void)m;
  holdings *h = ud;
  if (!set_has(&h->enc->first_seen, e))
    h->fn(h->ud, e);
}

int scn_frame_holdings(scn_frame_encoder *enc, scn_world *w, uint64_t since,
                       void (*fn)(void *ud, scn_entity e), void *ud) {
  size_t events = 0;
  scn_world_visit_events(w, since, count_event, &events);
  if (!set_prepare(&enc->first_seen, events))
    return SCN_NOMEM;
  holdings h = {enc, w, fn, ud};
  scn_world_visit_events(w, since, held_by_event, &h);
  return scn_world_visit_changed(w, SCN_ENTITY_NONE, 0, held_unless_seen, &h);
}

void scn_frame_head(scn_buf *out, const scn_world *w, uint64_t tick, bool full) {
  scn_buf_adds(out, ",\"world\":");
  scn_buf_add_json_string(out, scn_world_name(w), strlen(scn_world_name(w)));
  scn_buf_adds(out, ",\"tick\":");
  scn_buf_add_u64(out, tick);
  scn_buf_adds(out, full ? ",\"full\":true" : ",\"full\":false");
}

/* The head and tail of a frame whose set and removals are collected. */
static void finish(scn_frame_encoder *enc, scn_world *w, bool full, scn_frame *f) {
  if (!full && f->n == 0 && enc->removed.n == 0) {
    f->ok = f->empty = true;
    return;
  }
  scn_buf *head = &f->head;
  scn_frame_head(head, w, f->tick, full);
  scn_buf_adds(&f->tail, ",\"removed\":");
  scn_buf_add_id_list(&f->tail, enc->removed.ids, enc->removed.n);
  scn_buf_adds(&f->tail, "}\n");
  size_t n = enc->removed.n;
  scn_entity *removed = n ? scn_array_grow(f->removed, &f->removed_cap, sizeof *removed, n) : NULL;
  if (removed) {
    f->removed = removed;
    memcpy(removed, enc->removed.ids, sizeof *removed * n);
    f->removed_n = n;
  }
  f->ok = !head->failed && !f->tail.failed && (removed || !n);
}

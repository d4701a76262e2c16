/* Streaming world matrices: each tick, every due subscription gets the transforms in its scope
 * whose world matrix changed since the last frame it received (a full frame first). A frame
 * body is encoded once per (world, scope, since, full) and shared by reference among the
 * subscriptions that need exactly it; only the small header naming the subscription is
 * written per subscriber. */
#include "cmd/handlers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The sorted entity ids of a subtree scope as of one tick, shared by the subscriptions that
 * last saw that tick. */
typedef struct scn_members {
  uint32_t refs;
  size_t n;
  scn_entity ids[];
} scn_members;

typedef struct scn_sub {
  uint64_t id;
  scn_conn *conn;
  scn_world *world;
  scn_entity root;     /* SCN_ENTITY_NONE: the whole world */
  uint32_t every;      /* at most one frame every this many ticks */
  uint64_t last_tick;  /* world tick of the last frame received, 0 before the first */
  uint64_t last_frame; /* server tick count at that frame */
  bool need_full, lagging;
  scn_members *members;  /* subtree scope as of last_tick */
  struct frame_job *job; /* a large frame being encoded for it, in slices */
  size_t job_slot;
  struct scn_sub *prev, *next; /* all subscriptions */
  struct scn_sub *conn_next;   /* the connection's */
} scn_sub;

/* ---- scratch ------------------------------------------------------------------------------ */

typedef struct id_vec {
  scn_entity *ids;
  size_t n, cap;
} id_vec;

static bool id_push(id_vec *v, scn_entity e) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 1024;
    scn_entity *p = realloc(v->ids, sizeof *p * cap);
    if (!p)
      return false;
    v->ids = p;
    v->cap = cap;
  }
  v->ids[v->n++] = e;
  return true;
}

/* Open-addressing set of entity ids, cleared between uses (first occurrences in the log). */
typedef struct id_set {
  scn_entity *slots;
  size_t mask;
} id_set;

static bool set_prepare(id_set *s, size_t n) {
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

/* Inserts e; false when it was already there. */
static bool set_add(id_set *s, scn_entity e) {
  size_t h = (size_t)((e * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & s->mask;
  while (s->slots[h]) {
    if (s->slots[h] == e)
      return false;
    h = (h + 1) & s->mask;
  }
  s->slots[h] = e;
  return true;
}

/* A frame's set is first copied out of the world as (entity, matrix) entries, so that the
 * text of a large frame can be written in slices while the world moves on. */
typedef struct set_entry {
  scn_entity e;
  float m[16];
} set_entry;

typedef struct entry_vec {
  set_entry *items;
  size_t n, cap;
  bool failed;
} entry_vec;

/* Frames with more entries than this are written in slices of this size, one slice per loop
 * turn, so a full frame of 100,000 transforms never holds up other connections for long. */
#define SLICE 4096

typedef struct frame_job {
  struct frame_job *next;
  scn_buf text; /* written so far, from ,"world": on */
  scn_buf tail; /* ],"removed":[...]} and the newline */
  entry_vec entries;
  size_t done;
  uint64_t tick;
  scn_sub **subs; /* who gets it; NULL where a subscription ended meanwhile */
  size_t nsubs, cap;
} frame_job;

static struct {
  frame_job *head, *tail;
  uv_idle_t idle;
  bool idle_ready;
  scn_server *srv;
} jobs;

static struct {
  id_vec changed, current, entered, removed;
  id_set first_seen;
  scn_buf body;
  entry_vec entries;
} scratch;

/* ---- subscriptions ------------------------------------------------------------------------ */

static void members_release(scn_members *m) {
  if (m && --m->refs == 0)
    free(m);
}

static void sub_remove(scn_server *srv, scn_sub *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    srv->subs = s->next;
  if (s->next)
    s->next->prev = s->prev;
  for (scn_sub **p = &s->conn->subs; *p; p = &(*p)->conn_next)
    if (*p == s) {
      *p = s->conn_next;
      break;
    }
  if (s->job)
    s->job->subs[s->job_slot] = NULL; /* the frame in progress skips it */
  members_release(s->members);
  srv->nsubs--;
  free(s);
}

uint64_t scn_stream_count(const scn_server *srv) { return srv->nsubs; }

uint64_t scn_stream_lagging(const scn_server *srv) {
  uint64_t n = 0;
  for (const scn_sub *s = srv->subs; s; s = s->next)
    n += s->lagging;
  return n;
}

static void write_event(scn_sub *s, const char *event, const char *extra) {
  scn_buf *out = &s->conn->out.bytes;
  scn_buf_adds(out, "{\"event\":\"");
  scn_buf_adds(out, event);
  scn_buf_adds(out, "\",\"sub\":");
  scn_buf_add_u64(out, s->id);
  scn_buf_adds(out, extra);
  scn_buf_adds(out, "}\n");
}

void scn_stream_world_destroyed(scn_server *srv, scn_world *w) {
  scn_sub *s = srv->subs;
  while (s) {
    scn_sub *next = s->next;
    if (s->world == w) {
      scn_buf extra = {0};
      scn_buf_adds(&extra, ",\"world\":");
      scn_buf_add_json_string(&extra, scn_world_name(w), strlen(scn_world_name(w)));
      scn_buf_addc(&extra, '\0');
      write_event(s, "world_destroyed", extra.data ? extra.data : "");
      scn_buf_free(&extra);
      scn_conn *c = s->conn;
      sub_remove(srv, s);
      scn_conn_schedule_flush(c); /* after this turn's journal commit, with the replies */
    }
    s = next;
  }
}

void scn_stream_conn_closed(scn_server *srv, scn_conn *c) {
  while (c->subs)
    sub_remove(srv, c->subs);
}

void scn_stream_conn_drained(scn_server *srv, scn_conn *c) {
  for (scn_sub *s = c->subs; s; s = s->conn_next)
    if (s->lagging) {
      s->lagging = false;
      s->need_full = true;
      srv->counters.stream.resyncs++;
    }
}

/* ---- computing a frame -------------------------------------------------------------------- */

typedef struct frame_key {
  scn_world *world;
  scn_entity root;
  uint64_t since;
  bool full;
} frame_key;

typedef struct frame {
  scn_shared *body;      /* NULL when there is nothing to send (or it is a job) */
  struct frame_job *job; /* a large set, written in slices after the tick */
  scn_members *members;  /* subtree scope after this frame */
  uint64_t tick;
  size_t matrices;
} frame;

static void collect_member(void *ud, scn_entity e, const float m[16], bool changed) {
  (void)m, (void)changed;
  id_push(ud, e);
}

typedef struct set_writer {
  entry_vec *entries;
  size_t count;
  bool all; /* a full frame: every transform in scope */
  bool check_entered;
} set_writer;

static void write_set_entry(void *ud, scn_entity e, const float m[16]) {
  set_writer *w = ud;
  entry_vec *v = w->entries;
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 1024;
    set_entry *p = realloc(v->items, sizeof *p * cap);
    if (!p) {
      v->failed = true;
      return;
    }
    v->items = p;
    v->cap = cap;
  }
  v->items[v->n].e = e;
  memcpy(v->items[v->n].m, m, sizeof v->items[v->n].m);
  v->n++;
  w->count++;
}

/* Text of entries [from, to) of the set. */
static void encode_entries(scn_buf *out, const set_entry *items, size_t from, size_t to) {
  for (size_t i = from; i < to; i++) {
    scn_buf_adds(out, i ? ",{\"e\":" : "{\"e\":");
    scn_buf_add_u64(out, items[i].e);
    scn_buf_adds(out, ",\"m\":");
    scn_buf_add_matrix(out, items[i].m);
    scn_buf_addc(out, '}');
  }
}

static bool set_has(const id_set *s, scn_entity e) {
  size_t h = (size_t)((e * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & s->mask;
  while (s->slots[h]) {
    if (s->slots[h] == e)
      return true;
    h = (h + 1) & s->mask;
  }
  return false;
}

/* Subtree scope: changed transforms, and those that entered the scope even if unchanged. */
static void write_scope_entry(void *ud, scn_entity e, const float m[16], bool changed) {
  set_writer *w = ud;
  if (w->all || changed || (w->check_entered && set_has(&scratch.first_seen, e)))
    write_set_entry(w, e, m);
}

static int cmp_id(const void *a, const void *b) {
  scn_entity x = *(const scn_entity *)a, y = *(const scn_entity *)b;
  return (x > y) - (x < y);
}

/* The whole world's removals: what existed at since (its first event in the window is not a
 * creation) and has no transform now. */
typedef struct removal_scan {
  scn_world *world;
  bool ok;
} removal_scan;

static void scan_event(void *ud, scn_entity e, scn_event_kind kind) {
  removal_scan *r = ud;
  if (!set_add(&scratch.first_seen, e))
    return;
  if (kind != SCN_EVENT_CREATED && !scn_transform_exists(r->world, e))
    r->ok &= id_push(&scratch.removed, e);
}

static void count_event(void *ud, scn_entity e, scn_event_kind kind) {
  (void)e, (void)kind;
  ++*(size_t *)ud;
}

/* Subtree scope: new members against the old sorted list; fills entered and removed. */
static scn_members *diff_members(const scn_members *old) {
  qsort(scratch.current.ids, scratch.current.n, sizeof(scn_entity), cmp_id);
  scn_members *m = malloc(sizeof *m + sizeof(scn_entity) * scratch.current.n);
  if (!m)
    return NULL;
  m->refs = 1;
  m->n = scratch.current.n;
  memcpy(m->ids, scratch.current.ids, sizeof(scn_entity) * m->n);
  size_t i = 0, j = 0, on = old ? old->n : 0;
  while (i < on || j < m->n) {
    if (j == m->n || (i < on && old->ids[i] < m->ids[j]))
      id_push(&scratch.removed, old->ids[i++]);
    else if (i == on || m->ids[j] < old->ids[i])
      id_push(&scratch.entered, m->ids[j++]);
    else
      i++, j++;
  }
  return m;
}

static void encode_frame(const frame_key *k, const scn_members *old, frame *f) {
  scn_world *w = k->world;
  scn_buf *body = &scratch.body;
  body->len = 0;
  scratch.changed.n = scratch.current.n = scratch.entered.n = scratch.removed.n = 0;
  f->body = NULL;
  f->job = NULL;
  f->members = NULL;
  f->tick = scn_world_tick(w) - 1; /* the tick just closed */
  f->matrices = 0;

  scn_buf_adds(body, ",\"world\":");
  scn_buf_add_json_string(body, scn_world_name(w), strlen(scn_world_name(w)));
  scn_buf_adds(body, ",\"tick\":");
  scn_buf_add_u64(body, f->tick);
  scn_buf_adds(body, k->full ? ",\"full\":true,\"set\":[" : ",\"full\":false,\"set\":[");
  scratch.entries.n = 0;
  scratch.entries.failed = false;
  set_writer sw = {&scratch.entries, 0, false, false};
  if (k->root == SCN_ENTITY_NONE) {
    scn_world_visit_changed(w, SCN_ENTITY_NONE, k->full ? 0 : k->since, write_set_entry, &sw);
    if (!k->full) {
      size_t events = 0;
      scn_world_visit_events(w, k->since, count_event, &events);
      removal_scan scan = {w, true};
      if (events && set_prepare(&scratch.first_seen, events))
        scn_world_visit_events(w, k->since, scan_event, &scan);
    }
  } else {
    scn_world_visit_scope(w, k->root, 0, collect_member, &scratch.current);
    f->members = diff_members(k->full ? NULL : old);
    if (k->full)
      scratch.removed.n = 0;
    sw.all = k->full;
    sw.check_entered =
        !k->full && scratch.entered.n > 0 && set_prepare(&scratch.first_seen, scratch.entered.n);
    for (size_t i = 0; sw.check_entered && i < scratch.entered.n; i++)
      set_add(&scratch.first_seen, scratch.entered.ids[i]);
    scn_world_visit_scope(w, k->root, k->since, write_scope_entry, &sw);
  }
  f->matrices = sw.count;
  if (!k->full && sw.count == 0 && scratch.removed.n == 0)
    return; /* nothing changed: nothing is sent */
  scn_buf tail = {0};
  scn_buf_adds(&tail, "],\"removed\":[");
  for (size_t i = 0; i < scratch.removed.n; i++) {
    if (i)
      scn_buf_addc(&tail, ',');
    scn_buf_add_u64(&tail, scratch.removed.ids[i]);
  }
  scn_buf_adds(&tail, "]}\n");
  if (scratch.entries.failed || tail.failed) {
    scn_buf_free(&tail);
    return; /* out of memory: the subscribers stay where they were and try next tick */
  }
  if (scratch.entries.n > SLICE) {
    frame_job *job = calloc(1, sizeof *job);
    if (job) {
      job->text = *body; /* the job takes the buffers; the scratch ones start anew */
      *body = (scn_buf){0};
      job->entries = scratch.entries;
      scratch.entries = (entry_vec){0};
      job->tail = tail;
      job->tick = f->tick;
      f->job = job;
      return;
    }
  }
  encode_entries(body, scratch.entries.items, 0, scratch.entries.n);
  scn_buf_add(body, tail.data, tail.len);
  scn_buf_free(&tail);
  if (body->failed) {
    body->failed = false;
    return;
  }
  f->body = scn_shared_new(body->len);
  if (f->body)
    memcpy(f->body->data, body->data, body->len);
}

/* ---- delivering frames -------------------------------------------------------------------- */

/* Queues a frame body to one subscriber: its own small header, then the shared bytes. */
static void send_body(scn_server *srv, scn_sub *s, scn_shared *body, size_t matrices) {
  scn_conn *c = s->conn;
  scn_buf *out = &c->out.bytes;
  scn_buf_adds(out, "{\"event\":\"frame\",\"sub\":");
  scn_buf_add_u64(out, s->id);
  if (!out->failed && scn_outq_push_shared(&c->out, body)) {
    srv->counters.stream.frames++;
    srv->counters.stream.frame_bytes += body->len;
    srv->counters.stream.matrices += matrices;
    s->last_frame = srv->ticks;
  }
}

static bool job_attach(frame_job *job, scn_sub *s) {
  if (job->nsubs == job->cap) {
    size_t cap = job->cap ? job->cap * 2 : 8;
    scn_sub **p = realloc(job->subs, sizeof *p * cap);
    if (!p)
      return false;
    job->subs = p;
    job->cap = cap;
  }
  s->job = job;
  s->job_slot = job->nsubs;
  job->subs[job->nsubs++] = s;
  return true;
}

/* The subscriber's state moves to the frame's tick at once (the frame is the world as of
 * then); a job's bytes follow when written. */
static void deliver(scn_server *srv, scn_sub *s, const frame *f) {
  if (f->body)
    send_body(srv, s, f->body, f->matrices);
  else if (f->job && !job_attach(f->job, s))
    return; /* no room to remember it: it stays due and tries again next tick */
  s->last_tick = f->tick;
  s->need_full = false;
  if (f->members != s->members) {
    members_release(s->members);
    s->members = f->members;
    if (s->members)
      s->members->refs++;
  }
}

/* The root of a subtree subscription is gone: its whole scope is removed, then it ends. */
static void end_root_destroyed(scn_server *srv, scn_sub *s) {
  scn_buf *out = &s->conn->out.bytes;
  scn_world *w = s->world;
  scn_buf_adds(out, "{\"event\":\"frame\",\"sub\":");
  scn_buf_add_u64(out, s->id);
  scn_buf_adds(out, ",\"world\":");
  scn_buf_add_json_string(out, scn_world_name(w), strlen(scn_world_name(w)));
  scn_buf_adds(out, ",\"tick\":");
  scn_buf_add_u64(out, scn_world_tick(w) - 1);
  scn_buf_adds(out, ",\"full\":false,\"set\":[],\"removed\":");
  scn_add_id_list(out, s->members ? s->members->ids : NULL, s->members ? s->members->n : 0);
  scn_buf_adds(out, "}\n");
  write_event(s, "unsubscribed", ",\"reason\":\"root_destroyed\"");
  srv->counters.stream.frames++;
  sub_remove(srv, s);
}

typedef struct root_watch {
  scn_entity root;
  bool destroyed;
} root_watch;

static void watch_root(void *ud, scn_entity e, scn_event_kind kind) {
  root_watch *r = ud;
  if (e == r->root && kind == SCN_EVENT_DESTROYED)
    r->destroyed = true;
}

/* The root has no transform now, or lost it in the tick just closed (even if its entity got
 * a new transform since, which does not continue the subscription). */
static bool root_gone(scn_sub *s) {
  if (!scn_transform_exists(s->world, s->root))
    return true;
  root_watch r = {s->root, false};
  uint64_t closed = scn_world_tick(s->world) - 1;
  scn_world_visit_events(s->world, closed - 1, watch_root, &r);
  return r.destroyed;
}

static bool due(const scn_server *srv, const scn_sub *s) {
  if (s->lagging || s->job)
    return false;
  if (s->need_full || s->last_tick == 0)
    return true;
  return srv->ticks - s->last_frame >= s->every;
}

static frame_key key_of(const scn_sub *s) {
  bool full = s->need_full || s->last_tick == 0;
  return (frame_key){s->world, s->root, full ? 0 : s->last_tick, full};
}

static int cmp_key(const frame_key *a, const frame_key *b) {
  if (a->world != b->world)
    return (uintptr_t)a->world < (uintptr_t)b->world ? -1 : 1;
  if (a->root != b->root)
    return a->root < b->root ? -1 : 1;
  if (a->since != b->since)
    return a->since < b->since ? -1 : 1;
  return (int)a->full - (int)b->full;
}

static int cmp_sub(const void *x, const void *y) {
  frame_key a = key_of(*(scn_sub *const *)x), b = key_of(*(scn_sub *const *)y);
  return cmp_key(&a, &b);
}

static struct {
  scn_sub **subs;
  size_t cap;
} due_list;

static void job_free(frame_job *job) {
  scn_buf_free(&job->text);
  scn_buf_free(&job->tail);
  free(job->entries.items);
  free(job->subs);
  free(job);
}

/* One slice of the oldest job per loop turn; a finished job goes out to its subscribers. */
static void on_job_slice(uv_idle_t *h) {
  scn_server *srv = h->data;
  frame_job *job = jobs.head;
  if (!job) {
    uv_idle_stop(h);
    return;
  }
  size_t to = job->done + SLICE < job->entries.n ? job->done + SLICE : job->entries.n;
  encode_entries(&job->text, job->entries.items, job->done, to);
  job->done = to;
  if (job->done < job->entries.n && !job->text.failed)
    return;
  jobs.head = job->next;
  if (!jobs.head)
    jobs.tail = NULL;
  scn_buf_add(&job->text, job->tail.data, job->tail.len);
  scn_shared *body = job->text.failed ? NULL : scn_shared_new(job->text.len);
  if (body)
    memcpy(body->data, job->text.data, job->text.len);
  for (size_t i = 0; i < job->nsubs; i++) {
    scn_sub *s = job->subs[i];
    if (!s)
      continue;
    s->job = NULL;
    if (body) {
      send_body(srv, s, body, job->entries.n);
      scn_conn_schedule_flush(s->conn);
    } else {
      s->need_full = true; /* out of memory: resend the whole scope later */
    }
  }
  scn_shared_release(body);
  job_free(job);
  srv->counters.stream.encodes++;
}

static void job_enqueue(scn_server *srv, frame_job *job) {
  if (job->nsubs == 0) {
    job_free(job);
    return;
  }
  if (!jobs.idle_ready) {
    uv_idle_init(srv->loop, &jobs.idle);
    jobs.idle.data = srv;
    jobs.idle_ready = true;
  }
  if (jobs.tail)
    jobs.tail->next = job;
  else
    jobs.head = job;
  jobs.tail = job;
  uv_idle_start(&jobs.idle, on_job_slice);
}

void scn_stream_shutdown(scn_server *srv) {
  (void)srv;
  while (jobs.head) {
    frame_job *job = jobs.head;
    jobs.head = job->next;
    for (size_t i = 0; i < job->nsubs; i++)
      if (job->subs[i])
        job->subs[i]->job = NULL;
    job_free(job);
  }
  jobs.tail = NULL;
  if (jobs.idle_ready)
    uv_idle_stop(&jobs.idle);
  free(scratch.entries.items);
  scratch.entries = (entry_vec){0};
}

/* Events are logged only for worlds with whole-world subscriptions (whose deltas need the
 * removals), and kept back to the oldest tick such a subscription still needs; one that lags
 * or waits for a full frame needs none. */
static void trim_events(scn_server *srv) {
  scn_scene *scene = srv->scene;
  for (size_t i = 0; i < scn_world_count(scene); i++)
    scn_world_set_userdata(scn_world_at(scene, i), UINT64_MAX);
  for (scn_sub *s = srv->subs; s; s = s->next) {
    /* A subtree subscription needs the last tick's, to see its root destroyed (root_gone). */
    uint64_t needs = s->root != SCN_ENTITY_NONE || s->lagging || s->need_full || !s->last_tick
                         ? scn_world_tick(s->world) - 1
                         : s->last_tick;
    if (needs < scn_world_userdata(s->world))
      scn_world_set_userdata(s->world, needs);
  }
  for (size_t i = 0; i < scn_world_count(scene); i++) {
    scn_world *w = scn_world_at(scene, i);
    uint64_t keep_from = scn_world_userdata(w);
    scn_world_keep_events(w, keep_from != UINT64_MAX);
    /* a matrix set and set back inside a tick, with a read between, is then not resent */
    scn_world_track_reverts(w, keep_from != UINT64_MAX);
    if (keep_from != UINT64_MAX)
      scn_world_trim_events(w, keep_from);
  }
}

void scn_stream_tick(scn_server *srv) {
  srv->ticks++;
  scn_scene *scene = srv->scene;
  for (size_t i = 0; i < scn_world_count(scene); i++)
    scn_world_close_tick(scn_world_at(scene, i));

  size_t n = 0;
  if (srv->nsubs > due_list.cap) {
    size_t cap = due_list.cap ? due_list.cap : 64;
    while (cap < srv->nsubs)
      cap *= 2;
    scn_sub **p = realloc(due_list.subs, sizeof *p * cap);
    if (!p)
      return; /* try again next tick */
    due_list.subs = p;
    due_list.cap = cap;
  }
  for (scn_sub *s = srv->subs, *next; s; s = next) {
    next = s->next;
    if (s->root != SCN_ENTITY_NONE && root_gone(s)) {
      scn_conn *c = s->conn;
      end_root_destroyed(srv, s);
      scn_conn_schedule_flush(c);
      continue;
    }
    if (s->root == SCN_ENTITY_NONE && s->last_tick && !s->need_full &&
        s->last_tick < scn_world_events_since(s->world))
      s->need_full = true; /* the log lost what its delta needs: send everything */
    if (!due(srv, s))
      continue;
    due_list.subs[n++] = s;
  }
  if (n > 1) /* the list is NULL until a first subscription; qsort(NULL, 0) is undefined */
    qsort(due_list.subs, n, sizeof *due_list.subs, cmp_sub);
  for (size_t i = 0; i < n;) {
    frame_key k = key_of(due_list.subs[i]);
    frame f;
    encode_frame(&k, due_list.subs[i]->members, &f);
    srv->counters.stream.encodes++;
    size_t j = i;
    for (; j < n; j++) {
      frame_key kj = key_of(due_list.subs[j]);
      if (cmp_key(&k, &kj) != 0)
        break;
      /* Over its output budget it lags (and resyncs with a full frame once drained), but
       * only when there is something to drop: an unchanged tick costs it nothing. */
      if ((f.body || f.job) && scn_conn_queued(due_list.subs[j]->conn) > srv->cfg.output_limit) {
        due_list.subs[j]->lagging = true;
        srv->counters.stream.lags++;
        continue;
      }
      deliver(srv, due_list.subs[j], &f);
    }
    scn_shared_release(f.body);
    members_release(f.members);
    if (f.job)
      job_enqueue(srv, f.job);
    i = j;
  }
  for (size_t i = 0; i < n; i++)
    scn_conn_schedule_flush(due_list.subs[i]->conn); /* a flush may close a connection: not while
                                                        its subscriptions are in the list */
  trim_events(srv);
}

/* ---- commands ----------------------------------------------------------------------------- */

int scn_cmd_subscribe(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  scn_server *srv = ctx->srv;
  scn_world *w = scn_ctx_world(ctx, req, err);
  uint64_t root = 0;
  double hz = srv->cfg.tick_hz;
  if (!w || scn_get_entity(req, "root", false, &root, err) < 0 ||
      scn_get_number(req, "hz", false, &hz, err) < 0)
    return -1;
  if (!(hz > 0))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"hz\" must be a positive number");
  if (root && !scn_transform_exists(w, root))
    return scn_fail(err, SCN_W_NOT_FOUND, "root %llu has no transform in world \"%s\"",
                    (unsigned long long)root, scn_world_name(w));
  scn_sub *s = calloc(1, sizeof *s);
  if (!s)
    return scn_fail(err, SCN_W_INTERNAL, "out of memory");
  /* Whole-world deltas after the first frame need the removals; a subtree, its root's. */
  scn_world_keep_events(w, true);
  s->id = ++srv->next_sub_id;
  s->conn = ctx->conn;
  s->world = w;
  s->root = root;
  double every = ceil(srv->cfg.tick_hz / hz - 1e-9);
  s->every = every < 1 ? 1 : every > 1e6 ? 1000000 : (uint32_t)every;
  s->next = srv->subs;
  if (srv->subs)
    srv->subs->prev = s;
  srv->subs = s;
  s->conn_next = ctx->conn->subs;
  ctx->conn->subs = s;
  srv->nsubs++;
  scn_reply_key(out, "sub");
  scn_buf_add_u64(out, s->id);
  return 0;
}

int scn_cmd_unsubscribe(scn_ctx *ctx, const cJSON *req, scn_buf *out, scn_wire_error *err) {
  (void)out;
  uint64_t id;
  if (scn_get_uint(req, "sub", true, 1, UINT64_C(9007199254740991), &id, err) < 0)
    return -1;
  for (scn_sub *s = ctx->conn->subs; s; s = s->conn_next)
    if (s->id == id) {
      sub_remove(ctx->srv, s);
      return 0;
    }
  return scn_fail(err, SCN_W_NOT_FOUND, "no subscription %llu on this connection",
                  (unsigned long long)id);
}

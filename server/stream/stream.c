#include "stream/stream.h"

#include "net/conn.h"
#include "stream/frame.h"
#include "stream/interest.h"
#include "stream/packed_frames.h"
#include "stream/world_figures.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct scn_sub {
  uint64_t id;
  scn_conn *conn;
  scn_world *world;
  scn_entity root;     /* SCN_ENTITY_NONE: the whole world */
  uint32_t every;      /* at most one frame every this many ticks */
  uint64_t last_tick;  /* world tick of the last frame received, 0 before the first */
  uint64_t last_frame; /* server tick count at that frame */
  bool need_full, lagging;
  scn_members *members; /* subtree scope as of last_tick */
  scn_near *near;       /* its region (what it holds of it is there), or NULL */
  bool packed;          /* packed frames, on grid, against pack */
  scn_pack_grid grid;
  scn_pack *pack;        /* what it last received (NULL: nothing yet, its next frame is full) */
  struct frame_job *job; /* a large frame being written for it, in slices */
  size_t job_slot;
  scn_world_fig *fig;          /* its world's figures */
  struct scn_sub *prev, *next; /* all subscriptions */
  struct scn_sub *conn_next;   /* the connection's */
} scn_sub;

/* Frames with more entries than this are written in slices of this size, one slice per loop
 * turn, so a full frame of 100,000 transforms never holds up other connections for long (a
 * multiple of three, so that slices of base64 join without padding). */
#define SLICE 4095

/* A large frame being written: it owns the collected transforms until its text is complete,
 * in each form a subscriber needs (json, b64). */
typedef struct frame_job {
  struct frame_job *next;
  scn_frame frame;
  scn_buf text[2]; /* by form, written so far, from ,"world": on */
  size_t at[2];    /* where the next slice of each starts (scn_frame_write) */
  bool want[2], done[2];
  scn_sub **subs; /* who gets it; NULL where a subscription ended meanwhile */
  size_t nsubs, cap;
} frame_job;

typedef struct stream_counters {
  uint64_t frames, frame_bytes, matrices, lags, resyncs, encodes;
} stream_counters;

struct scn_stream {
  scn_server *srv;
  scn_hooks hooks;
  scn_sub *subs; /* every subscription */
  uint64_t nsubs, next_sub_id;
  uint64_t ticks; /* ticks run */
  frame_job *jobs_head, *jobs_tail;
  uv_idle_t idle; /* writes the oldest job's next slice */
  scn_frame_encoder enc;
  scn_frame frame;       /* the frame being encoded at a tick */
  scn_buf body;          /* a small frame's text, before it is copied into a shared block */
  scn_shared *bodies[2]; /* the small frame's shared text, by form, once a subscriber needs it */
  scn_sub **due;
  size_t due_cap;
  scn_interest *interest;
  uint64_t nnear; /* subscriptions with a region */
  uint64_t npacked;
  scn_pack_encoder pack_enc;
  scn_pack_due *pack_due;
  size_t pack_cap;
  stream_counters counters;
  scn_world_figs world_figs;
};

/* ---- subscriptions ------------------------------------------------------------------------ */

static void sub_remove(scn_stream *st, scn_sub *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    st->subs = s->next;
  if (s->next)
    s->next->prev = s->prev;
  for (scn_sub **p = &s->conn->subs; *p; p = &(*p)->conn_next)
    if (*p == s) {
      *p = s->conn_next;
      break;
    }
  if (s->job)
    s->job->subs[s->job_slot] = NULL; /* the frame in progress skips it */
  scn_members_release(s->members);
  scn_pack_release(s->pack);
  st->npacked -= s->packed;
  if (s->near) {
    scn_near_release(st->interest, s->near);
    st->nnear--;
  }
  s->fig->subs--;
  st->nsubs--;
  free(s);
}

uint64_t scn_stream_count(const scn_stream *st) { return st->nsubs; }

int scn_stream_subscribe(scn_stream *st, scn_conn *c, scn_world *w, scn_entity root, double hz,
                         const scn_near_spec *near, const scn_pack_grid *packed, uint64_t *id) {
  scn_sub *s = calloc(1, sizeof *s);
  if (!s)
    return -1;
  double every = ceil(st->srv->cfg.tick_hz / hz - 1e-9);
  s->every = every < 1 ? 1 : every > 1e6 ? 1000000 : (uint32_t)every;
  if ((near && !(s->near = scn_near_new(st->interest, w, root, near, s->every, true))) ||
      !(s->fig = scn_world_figs_join(&st->world_figs, w))) {
    scn_near_release(st->interest, s->near);
    free(s);
    return -1;
  }
  st->nnear += s->near != NULL;
  if (packed) {
    s->packed = true;
    s->grid = *packed;
    st->npacked++;
  }
  /* Whole-world deltas after the first frame need the removals; a subtree, its root's. */
  scn_world_keep_events(w, true);
  s->id = *id = ++st->next_sub_id;
  s->conn = c;
  s->world = w;
  s->root = root;
  s->next = st->subs;
  if (st->subs)
    st->subs->prev = s;
  st->subs = s;
  s->conn_next = c->subs;
  c->subs = s;
  st->nsubs++;
  return 0;
}

static scn_sub *find_sub(scn_conn *c, uint64_t id) {
  for (scn_sub *s = c->subs; s; s = s->conn_next)
    if (s->id == id)
      return s;
  return NULL;
}

scn_world *scn_stream_world_of(scn_stream *st, scn_conn *c, uint64_t id, bool *packed) {
  (void)st;
  scn_sub *s = find_sub(c, id);
  if (s && packed)
    *packed = s->packed;
  return s ? s->world : NULL;
}

bool scn_stream_unsubscribe(scn_stream *st, scn_conn *c, uint64_t id) {
  scn_sub *s = find_sub(c, id);
  if (s)
    sub_remove(st, s);
  return s != NULL;
}

typedef struct holding {
  scn_scope *scope;
  uint64_t sent;
  bool failed;
} holding;

static void hold(void *ud, scn_entity e) {
  holding *h = ud;
  h->failed |= scn_scope_hold(h->scope, e, h->sent) != SCN_OK;
}

/* A subscription without a region gains one: it starts from what its subscriber holds, so the
 * next frame carries only what comes in and what leaves. */
static scn_near *gain_region(scn_stream *st, scn_sub *s, const scn_near_spec *spec) {
  scn_near *n = scn_near_new(st->interest, s->world, s->root, spec, s->every, false);
  if (!n || s->need_full || s->lagging || !s->last_tick)
    return n; /* its next frame is full anyway */
  holding h = {scn_near_scope(n), s->last_tick, false};
  if (s->root != SCN_ENTITY_NONE) {
    for (size_t i = 0; s->members && i < s->members->n; i++)
      hold(&h, s->members->ids[i]);
  } else {
    h.failed |= scn_frame_holdings(&st->enc, s->world, s->last_tick, hold, &h) != SCN_OK;
  }
  if (h.failed) {
    scn_near_release(st->interest, n);
    return NULL;
  }
  return n;
}

int scn_stream_update(scn_stream *st, scn_conn *c, uint64_t id, bool set_near,
                      const scn_near_spec *near, const scn_pack_grid *grid) {
  scn_sub *s = find_sub(c, id);
  if (!s)
    return SCN_NOT_FOUND;
  if (grid && !s->packed)
    return SCN_INVALID;
  if (grid && !scn_pack_regrid(&s->pack, grid))
    return SCN_NOMEM;
  if (grid)
    s->grid = *grid;
  if (!set_near || (!near && !s->near))
    return SCN_OK; /* no region to remove */
  scn_near *n = s->near ? scn_near_detach(st->interest, s->near, true) : gain_region(st, s, near);
  if (!n)
    return SCN_NOMEM;
  if (s->pack)
    s->pack->pure = false; /* its scope changed on its own: it shares with no other */
  if (!s->near) {
    st->nnear++;
    scn_members_release(s->members); /* the region holds them now */
    s->members = NULL;
  }
  s->near = n;
  scn_near_respec(n, near);
  return SCN_OK;
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

/* Every subscription of w gets event (with ,"world":W and extra) and ends. */
static void world_ends(scn_stream *st, scn_world *w, const char *event, const char *extra_json) {
  scn_sub *s = st->subs;
  while (s) {
    scn_sub *next = s->next;
    if (s->world == w) {
      scn_buf extra = {0};
      scn_buf_adds(&extra, ",\"world\":");
      scn_buf_add_json_string(&extra, scn_world_name(w), strlen(scn_world_name(w)));
      scn_buf_adds(&extra, extra_json);
      scn_buf_addc(&extra, '\0');
      write_event(s, event, extra.data ? extra.data : "");
      scn_buf_free(&extra);
      scn_conn *c = s->conn;
      sub_remove(st, s);
      scn_conn_schedule_flush(c); /* after this turn's journal commit, with the replies */
    }
    s = next;
  }
  scn_world_figs_forget(&st->world_figs, w);
}

void scn_stream_revoke(scn_stream *st, bool (*keep)(void *ud, scn_conn *c, const char *world),
                       void *ud) {
  scn_sub *s = st->subs;
  while (s) {
    scn_sub *next = s->next;
    if (!keep(ud, s->conn, scn_world_name(s->world))) {
      scn_conn *c = s->conn;
      write_event(s, "unsubscribed", ",\"reason\":\"unauthorized\"");
      sub_remove(st, s);
      scn_conn_schedule_flush(c);
    }
    s = next;
  }
}

void scn_stream_world_destroyed(scn_stream *st, scn_world *w) {
  world_ends(st, w, "world_destroyed", "");
}

void scn_stream_world_moved(scn_stream *st, scn_world *w, const char *node, const char *addr) {
  scn_buf extra = {0};
  scn_buf_adds(&extra, ",\"node\":");
  scn_buf_add_json_string(&extra, node, strlen(node));
  scn_buf_adds(&extra, ",\"addr\":");
  scn_buf_add_json_string(&extra, addr, strlen(addr));
  scn_buf_addc(&extra, '\0');
  world_ends(st, w, "moved", extra.data ? extra.data : "");
  scn_buf_free(&extra);
}

static void on_conn_closed(void *ud, scn_conn *c) {
  scn_stream *st = ud;
  while (c->subs)
    sub_remove(st, c->subs);
}

/* The connection's output drained below its budget: lagging subscriptions resync. */
static void on_conn_drained(void *ud, scn_conn *c) {
  scn_stream *st = ud;
  for (scn_sub *s = c->subs; s; s = s->conn_next)
    if (s->lagging) {
      s->lagging = false;
      s->need_full = true;
      st->counters.resyncs++;
    }
}

/* ---- delivering frames -------------------------------------------------------------------- */

/* Queues a frame body to one subscriber: its own small header, then the shared bytes. */
static void send_body(scn_stream *st, scn_sub *s, scn_shared *body, size_t matrices) {
  scn_conn *c = s->conn;
  scn_buf *out = &c->out.bytes;
  scn_buf_adds(out, "{\"event\":\"frame\",\"sub\":");
  scn_buf_add_u64(out, s->id);
  if (!out->failed && scn_outq_push_shared(&c->out, body)) {
    st->counters.frames++;
    s->fig->frames++;
    st->counters.frame_bytes += body->len;
    st->counters.matrices += matrices;
    s->last_frame = st->ticks;
  }
}

/* A packed frame to one subscriber: over TCP its header then the shared line body; over
 * WebSocket a binary message of sub (u32), tick (u64), flags (u8, bit 0: full), then the shared
 * payload. */
static void send_packed(scn_stream *st, scn_sub *s, scn_shared *body, const scn_frame *f,
                        bool full) {
  scn_conn *c = s->conn;
  scn_buf *out = &c->out.bytes;
  size_t before = out->len;
  scn_pack_header(out, c->ws != NULL, s->id, f->tick, full, body->len);
  if (!out->failed && scn_outq_push_shared(&c->out, body)) {
    st->counters.frames++;
    s->fig->frames++;
    st->counters.frame_bytes += body->len + (out->len - before);
    st->counters.matrices += f->n;
    s->last_frame = st->ticks;
  }
}

static bool job_attach(frame_job *job, scn_sub *s) {
  scn_sub **subs = scn_array_grow(job->subs, &job->cap, sizeof *subs, job->nsubs + 1);
  if (!subs)
    return false;
  job->subs = subs;
  job->want[s->conn->matrices] = true;
  s->job = job;
  s->job_slot = job->nsubs;
  job->subs[job->nsubs++] = s;
  return true;
}

/* The subscriber's state moves to the frame's tick at once (the frame is the world as of
 * then); a job's bytes follow when written. */
static void deliver(scn_stream *st, scn_sub *s, const scn_frame *f, scn_shared *body,
                    frame_job *job) {
  if (body) {
    send_body(st, s, body, f->n);
  } else if (job && !job_attach(job, s)) {
    /* No room to remember it: it stays due and tries again next tick (with a region, whose
     * members moved on, from nothing). */
    s->need_full |= s->near != NULL;
    return;
  }
  s->last_tick = f->tick;
  s->need_full = false;
  if (f->members != s->members) {
    scn_members_release(s->members);
    s->members = scn_members_ref(f->members);
  }
}

static void add_removed_id(void *ud, scn_entity e) {
  scn_buf *out = ud;
  if (out->data[out->len - 1] != '[')
    scn_buf_addc(out, ',');
  scn_buf_add_u64(out, e);
}

static void add_removed_entity(void *ud, scn_entity e) {
  scn_id_vec *v = ud;
  scn_entity *ids = v->n < v->cap ? v->ids : scn_array_grow(v->ids, &v->cap, sizeof *ids, v->n + 1);
  if (ids)
    (v->ids = ids)[v->n++] = e;
}

/* end_scope_gone's frame for a packed subscription: its whole scope in the payload's removed. */
static void packed_scope_gone(scn_stream *st, scn_sub *s) {
  scn_id_vec ids = {0};
  if (s->near)
    scn_scope_visit(scn_near_scope(s->near), add_removed_entity, &ids);
  scn_members *m = s->near ? NULL : s->members; /* sorted already: sorting it changes nothing */
  scn_frame f = {.tick = scn_world_tick(s->world) - 1};
  scn_shared *body = scn_pack_removal_body(s->world, f.tick, m ? m->ids : ids.ids, m ? m->n : ids.n,
                                           s->conn->ws != NULL);
  free(ids.ids);
  if (body) {
    send_packed(st, s, body, &f, false);
    scn_shared_release(body);
  }
}

/* The root of a subtree subscription, or the center of a region, is gone: its whole scope is
 * removed, then it ends with reason. */
static void end_scope_gone(scn_stream *st, scn_sub *s, const char *reason) {
  scn_buf *out = &s->conn->out.bytes;
  scn_world *w = s->world;
  if (s->packed) {
    packed_scope_gone(st, s);
    write_event(s, "unsubscribed", reason);
    sub_remove(st, s);
    return;
  }
  scn_buf_adds(out, "{\"event\":\"frame\",\"sub\":");
  scn_buf_add_u64(out, s->id);
  scn_frame_head(out, w, scn_world_tick(w) - 1, false);
  scn_buf_adds(out,
               s->conn->matrices == SCN_MATRICES_B64 ? ",\"ids\":[],\"ms\":\"\"" : ",\"set\":[]");
  scn_buf_adds(out, ",\"removed\":");
  if (s->near) {
    scn_buf_addc(out, '[');
    if (!out->failed)
      scn_scope_visit(scn_near_scope(s->near), add_removed_id, out);
    scn_buf_addc(out, ']');
  } else {
    scn_buf_add_id_list(out, s->members ? s->members->ids : NULL, s->members ? s->members->n : 0);
  }
  scn_buf_adds(out, "}\n");
  write_event(s, "unsubscribed", reason);
  st->counters.frames++;
  s->fig->frames++;
  sub_remove(st, s);
}

typedef struct entity_watch {
  scn_entity entity;
  bool destroyed;
} entity_watch;

static void watch_entity(void *ud, scn_entity e, scn_event_kind kind) {
  entity_watch *r = ud;
  if (e == r->entity && kind == SCN_EVENT_DESTROYED)
    r->destroyed = true;
}

/* e (a subtree's root, a region's center) has no transform now, or lost it in the tick just
 * closed (even if its entity got a new transform since, which does not continue the
 * subscription). */
static bool entity_gone(scn_world *w, scn_entity e) {
  if (!scn_transform_exists(w, e))
    return true;
  entity_watch r = {e, false};
  uint64_t closed = scn_world_tick(w) - 1;
  scn_world_visit_events(w, closed - 1, watch_entity, &r);
  return r.destroyed;
}

static bool due(const scn_stream *st, const scn_sub *s) {
  if (s->lagging || s->job)
    return false;
  /* A frame is for a tick after the last one sent: none while the world's clock stands still
   * (its group is being moved away), not even a resync at the tick already sent. */
  if (s->last_tick && s->last_tick >= scn_world_tick(s->world) - 1)
    return false;
  if (s->need_full || s->last_tick == 0)
    return true;
  return st->ticks - s->last_frame >= s->every;
}

static scn_frame_key key_of(const scn_sub *s) {
  bool full = s->need_full || s->last_tick == 0;
  return (scn_frame_key){s->world, s->near, s->root, full ? 0 : s->last_tick, full};
}

static int cmp_key(const scn_frame_key *a, const scn_frame_key *b) {
  if (a->world != b->world)
    return (uintptr_t)a->world < (uintptr_t)b->world ? -1 : 1;
  if (a->region != b->region)
    return (uintptr_t)a->region < (uintptr_t)b->region ? -1 : 1;
  if (a->root != b->root)
    return a->root < b->root ? -1 : 1;
  if (a->since != b->since)
    return a->since < b->since ? -1 : 1;
  return (int)a->full - (int)b->full;
}

static int cmp_sub(const void *x, const void *y) {
  scn_frame_key a = key_of(*(scn_sub *const *)x), b = key_of(*(scn_sub *const *)y);
  return cmp_key(&a, &b);
}

static void job_free(frame_job *job) {
  scn_frame_free(&job->frame);
  scn_buf_free(&job->text[0]);
  scn_buf_free(&job->text[1]);
  free(job->subs);
  free(job);
}

/* One slice of the oldest job per loop turn, in the first form it still needs; a finished job
 * goes out to its subscribers, each in the form its connection takes now (one that switched
 * since the tick gets the other form, written at once). */
static void on_job_slice(uv_idle_t *h) {
  scn_stream *st = h->data;
  frame_job *job = st->jobs_head;
  if (!job) {
    uv_idle_stop(h);
    return;
  }
  const scn_frame *f = &job->frame;
  for (int form = 0; form < 2; form++)
    if (job->want[form] && !job->done[form]) {
      scn_buf *text = &job->text[form];
      if (text->len == 0)
        scn_shared_start(text);
      job->done[form] = scn_frame_write(text, f, (scn_matrix_form)form, &job->at[form], SLICE);
      if (!job->done[form] && !text->failed)
        return;
      job->done[form] = true;
      st->counters.encodes++;
    }
  st->jobs_head = job->next;
  if (!st->jobs_head)
    st->jobs_tail = NULL;
  scn_shared *body[2] = {NULL, NULL};
  for (size_t i = 0; i < job->nsubs; i++) {
    scn_sub *s = job->subs[i];
    if (!s)
      continue;
    s->job = NULL;
    scn_matrix_form form = s->conn->matrices;
    if (!job->done[form]) {
      if (job->text[form].len == 0)
        scn_shared_start(&job->text[form]);
      while (!scn_frame_write(&job->text[form], f, form, &job->at[form], SIZE_MAX))
        ;
      job->done[form] = true;
      st->counters.encodes++;
    }
    if (!body[form] && job->text[form].len)
      body[form] = scn_shared_finish(&job->text[form]); /* the text becomes the shared block */
    if (body[form]) {
      send_body(st, s, body[form], f->n);
      scn_conn_schedule_flush(s->conn);
    } else {
      s->need_full = true; /* out of memory: resend the whole scope later */
    }
  }
  scn_shared_release(body[0]);
  scn_shared_release(body[1]);
  job_free(job);
}

/* A large frame: the job takes the collected frame (the stream's frame starts anew). */
static frame_job *job_new(scn_stream *st) {
  frame_job *job = calloc(1, sizeof *job);
  if (!job)
    return NULL;
  job->frame = st->frame;
  memset(&st->frame, 0, sizeof st->frame);
  return job;
}

static void job_enqueue(scn_stream *st, frame_job *job) {
  if (job->nsubs == 0) {
    job_free(job);
    return;
  }
  if (st->jobs_tail)
    st->jobs_tail->next = job;
  else
    st->jobs_head = job;
  st->jobs_tail = job;
  uv_idle_start(&st->idle, on_job_slice);
}

/* A small frame's whole text in form, in one shared block, made once per tick and form for
 * every subscriber that needs it. NULL when out of memory. */
static scn_shared *small_body(scn_stream *st, const scn_frame *f, scn_matrix_form form) {
  if (st->bodies[form])
    return st->bodies[form];
  scn_buf *b = &st->body;
  b->len = 0;
  b->failed = false;
  size_t at = 0;
  scn_frame_write(b, f, form, &at, SIZE_MAX);
  st->bodies[form] = scn_shared_copy(b);
  st->counters.encodes += st->bodies[form] != NULL;
  return st->bodies[form];
}

/* Events are logged only for worlds with whole-world subscriptions (whose deltas need the
 * removals), and kept back to the oldest tick such a subscription still needs; one that lags
 * or waits for a full frame needs none. */
static void trim_events(scn_stream *st) {
  scn_scene *scene = st->srv->scene;
  for (size_t i = 0; i < scn_world_count(scene); i++)
    scn_world_set_userdata(scn_world_at(scene, i), UINT64_MAX);
  for (scn_sub *s = st->subs; s; s = s->next) {
    /* A subtree subscription needs the last tick's, to see its root destroyed (root_gone). */
    uint64_t needs =
        s->root != SCN_ENTITY_NONE || s->near || s->lagging || s->need_full || !s->last_tick
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

/* The subscriptions due at this tick, sorted so those that need the same frame are together;
 * subtree subscriptions whose root is gone end here. False when out of memory. */
static bool collect_due(scn_stream *st, size_t *count) {
  scn_sub **list = scn_array_grow(st->due, &st->due_cap, sizeof *list, st->nsubs);
  if (!list)
    return false;
  st->due = list;
  size_t n = 0;
  for (scn_sub *s = st->subs, *next; s; s = next) {
    next = s->next;
    const char *gone = NULL;
    scn_entity center = s->near ? scn_near_center(s->near) : SCN_ENTITY_NONE;
    if (center != SCN_ENTITY_NONE && entity_gone(s->world, center))
      gone = ",\"reason\":\"center_destroyed\"";
    else if (s->root != SCN_ENTITY_NONE && entity_gone(s->world, s->root))
      gone = ",\"reason\":\"root_destroyed\"";
    if (gone) {
      scn_conn *c = s->conn;
      end_scope_gone(st, s, gone);
      scn_conn_schedule_flush(c);
      continue;
    }
    if (s->root == SCN_ENTITY_NONE && !s->near && s->last_tick && !s->need_full &&
        s->last_tick < scn_world_events_since(s->world))
      s->need_full = true; /* the log lost what its delta needs: send everything */
    /* Starting again from nothing, it stops sharing what the others of its region hold. */
    if (s->near && (s->need_full || !s->last_tick) && scn_near_evaluated(s->near)) {
      scn_near *own = scn_near_detach(st->interest, s->near, false);
      if (!own)
        continue; /* no memory: it tries again next tick */
      s->near = own;
    }
    if (due(st, s))
      st->due[n++] = s;
  }
  if (n > 1)
    qsort(st->due, n, sizeof *st->due, cmp_sub);
  *count = n;
  return true;
}

typedef struct region_fill {
  scn_stream *st;
  scn_near *near;
  scn_world *world;
  bool full;
} region_fill;

static int64_t fill_region(void *ud, scn_visit_fn set, scn_removed_fn removed, void *sink) {
  region_fill *r = ud;
  uint64_t now = scn_world_tick(r->world) - 1;
  return scn_near_eval(r->st->interest, r->near, r->st->ticks, now, r->full, set, removed, sink);
}

static void collect_member(void *ud, scn_entity e) {
  scn_members *m = ud;
  m->ids[m->n++] = e;
}

static int cmp_entity(const void *a, const void *b) {
  scn_entity x = *(const scn_entity *)a, y = *(const scn_entity *)b;
  return (x > y) - (x < y);
}

/* The frame of the subscriptions with key k (the first of them is first). */
static void encode(scn_stream *st, const scn_frame_key *k, scn_sub *first, scn_frame *f) {
  if (!k->region) {
    scn_frame_encode(&st->enc, k, first->members, f);
    return;
  }
  region_fill r = {st, first->near, k->world, k->full};
  scn_frame_encode_fill(&st->enc, k->world, k->full, fill_region, &r, f);
}

/* A subscription whose region was removed got everything in its scope: it goes on without. */
static void drop_region(scn_stream *st, scn_sub *s) {
  if (s->root != SCN_ENTITY_NONE) {
    scn_scope *scope = scn_near_scope(s->near);
    size_t count = scn_scope_count(scope);
    scn_members *m = malloc(sizeof *m + sizeof(scn_entity) * count);
    if (!m) {
      s->need_full = true;
      return;
    }
    m->refs = 1;
    m->n = 0;
    scn_scope_visit(scope, collect_member, m);
    qsort(m->ids, m->n, sizeof m->ids[0], cmp_entity);
    scn_members_release(s->members);
    s->members = m;
  }
  scn_near_release(st->interest, s->near);
  s->near = NULL;
  st->nnear--;
}

/* Lists s among the packed subscribers of the frame being delivered (its slot: at); false
 * when out of memory (it stays due and tries again next tick). */
static bool pack_due(scn_stream *st, scn_sub *s, size_t at) {
  scn_pack_due *due = scn_array_grow(st->pack_due, &st->pack_cap, sizeof *due, at + 1);
  if (!due)
    return false;
  st->pack_due = due;
  due[at] = (scn_pack_due){&s->pack, &s->grid, s->conn->ws != NULL, NULL, s, 0};
  return true;
}

/* The packed subscribers of frame f get it, one payload per set of equal baselines. */
static void deliver_packed(scn_stream *st, const scn_frame *f, bool full, size_t n) {
  if (n == 0)
    return;
  scn_pack_frames(&st->pack_enc, f, full, st->pack_due, n);
  for (size_t i = 0; i < n; i++) {
    scn_sub *s = st->pack_due[i].ud;
    scn_shared *body = st->pack_due[i].body;
    if (!body) {
      s->need_full = true; /* out of memory: what it holds is unknown */
      continue;
    }
    send_packed(st, s, body, f, full);
    scn_shared_release(body);
    deliver(st, s, f, NULL, NULL);
  }
}

static void on_tick(void *ud) {
  scn_stream *st = ud;
  uint64_t limit = st->srv->cfg.output_limit;
  st->ticks++;
  scn_interest_sync(st->interest, st->ticks);
  size_t n;
  if (!collect_due(st, &n))
    return; /* try again next tick */
  scn_frame *f = &st->frame;
  size_t npack = 0;
  for (size_t i = 0; i < n;) {
    scn_frame_key k = key_of(st->due[i]);
    encode(st, &k, st->due[i], f);
    frame_job *job = f->ok && !f->empty && f->n > SLICE ? job_new(st) : NULL;
    const scn_frame *sent = job ? &job->frame : f;
    size_t j = i;
    for (; j < n; j++) {
      scn_sub *s = st->due[j];
      scn_frame_key kj = key_of(s);
      if (cmp_key(&k, &kj) != 0)
        break;
      if (!sent->ok) {
        /* out of memory: it stays due and tries again next tick (from nothing, with a
         * region, whose members moved on) */
        s->need_full |= s->near != NULL;
        continue;
      }
      /* Over its output budget it lags (and resyncs with a full frame once drained), but
       * only when there is something to drop: an unchanged tick costs it nothing. */
      if (!sent->empty && scn_conn_queued(s->conn) > limit) {
        s->lagging = true;
        st->counters.lags++;
        scn_pack_release(s->pack); /* it resyncs with a full frame */
        s->pack = NULL;
        continue;
      }
      if (s->packed && !sent->empty) {
        if (pack_due(st, s, npack))
          npack++;
        else
          s->need_full |= s->near != NULL; /* as below */
        continue;
      }
      scn_shared *body = NULL;
      if (!sent->empty && !job && !(body = small_body(st, f, s->conn->matrices))) {
        s->need_full |= s->near != NULL;
        continue;
      }
      deliver(st, s, sent, body, job);
    }
    deliver_packed(st, sent, k.full, npack);
    npack = 0;
    for (size_t d = i; k.region && sent->ok && d < j; d++) {
      scn_sub *s = st->due[d];
      if (s->near && scn_near_unbounded(s->near) && s->last_tick == sent->tick && !s->need_full)
        drop_region(st, s);
    }
    for (int form = 0; form < 2; form++) {
      scn_shared_release(st->bodies[form]);
      st->bodies[form] = NULL;
    }
    if (job)
      job_enqueue(st, job);
    i = j;
  }
  for (size_t i = 0; i < n; i++)
    scn_conn_schedule_flush(st->due[i]->conn); /* a flush may close a connection: not while
                                                  its subscriptions are in the list */
  trim_events(st);
}

/* ---- figures ------------------------------------------------------------------------------ */

static void collect_stats(void *ud, scn_metrics_sink *k) {
  scn_stream *st = ud;
  uint64_t lagging = 0;
  for (const scn_sub *s = st->subs; s; s = s->next)
    lagging += s->lagging;
  const stream_counters *c = &st->counters;
  scn_metric(k, "subscriptions", "gauge", "Stream subscriptions open.", (double)st->nsubs);
  scn_metric(k, "lagging_subscriptions", "gauge",
             "Subscriptions whose frames are dropped until their connection drains.",
             (double)lagging);
  scn_metric(k, "frames_sent_total", "counter", "Stream frames queued to subscribers.",
             (double)c->frames);
  scn_metric(k, "frame_bytes_total", "counter", "Bytes of stream frames queued.",
             (double)c->frame_bytes);
  scn_metric(k, "frame_matrices_total", "counter", "Matrices in stream frames queued.",
             (double)c->matrices);
  scn_metric(k, "frame_encodes_total", "counter",
             "Frame bodies encoded (each shared by every subscriber that needs it).",
             (double)c->encodes);
  scn_metric(k, "stream_lags_total", "counter", "Times a subscription started lagging.",
             (double)c->lags);
  scn_metric(k, "stream_resyncs_total", "counter",
             "Times a lagging subscription was resynchronised with a full frame.",
             (double)c->resyncs);
  scn_pack_stats(&st->pack_enc, k, st->npacked);
  scn_interest_stats(st->interest, k, st->nnear);
  scn_world_figs_collect(&st->world_figs, st->srv->scene, k);
}

/* ---- the module --------------------------------------------------------------------------- */

scn_stream *scn_stream_open(scn_server *srv) {
  scn_stream *st = calloc(1, sizeof *st);
  if (!st)
    return NULL;
  st->srv = srv;
  if (!(st->interest = scn_interest_new(srv->cfg.interest == 1, srv->cfg.tick_hz))) {
    free(st);
    return NULL;
  }
  uv_idle_init(srv->loop, &st->idle);
  st->idle.data = st;
  st->hooks = (scn_hooks){.ud = st,
                          .on_tick = on_tick,
                          .conn_closed = on_conn_closed,
                          .conn_drained = on_conn_drained,
                          .collect_stats = collect_stats};
  scn_server_add_hooks(srv, &st->hooks);
  return st;
}

static void on_idle_closed(uv_handle_t *h) { free(h->data); }

void scn_stream_close(scn_stream *st) {
  if (!st)
    return;
  scn_server_remove_hooks(st->srv, &st->hooks);
  while (st->jobs_head) {
    frame_job *job = st->jobs_head;
    st->jobs_head = job->next;
    for (size_t i = 0; i < job->nsubs; i++)
      if (job->subs[i])
        job->subs[i]->job = NULL;
    job_free(job);
  }
  st->jobs_tail = NULL;
  while (st->subs)
    sub_remove(st, st->subs);
  scn_world_figs_free(&st->world_figs);
  scn_interest_free(st->interest);
  scn_frame_encoder_free(&st->enc);
  scn_pack_encoder_free(&st->pack_enc);
  free(st->pack_due);
  scn_frame_free(&st->frame);
  scn_buf_free(&st->body);
  free(st->due);
  uv_close((uv_handle_t *)&st->idle, on_idle_closed); /* st goes with its handle */
}

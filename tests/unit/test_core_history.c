/* History (rewind) of the core: queries at past ticks against a naive oracle that copies the
 * whole world (every transform's parent, name, local and world) when each tick closes; window
 * edges, worlds without history, windows that change; interpolation at fractional ticks against
 * an independent decomposition (cglm) and slerp in double.
 *
 * The oracle reads the core itself right after scn_world_close_tick, which is what a stream
 * frame for that tick carries; history must give back exactly those bits at every tick of the
 * window, whatever happened since (sets and set-backs inside a tick, reads that flush in the
 * middle of a tick, batches that commit or roll back, relinks, renames, creations and
 * destructions, entity.destroy across worlds).
 *
 * Seeds: a fixed list, plus SCN_SEED from the environment when set. */
#include "core_fixtures.h"
#include "rng.h"
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <cglm/cglm.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID(e) ((unsigned long long)(e))
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- random numbers ------------------------------------------------------------------------ */

static void random_trs(rng *r, float out[16], double reach) {
  float t[3], q[4], s[3];
  for (int k = 0; k < 3; k++)
    t[k] = rng_float(r, -reach, reach);
  rng_quat(r, q);
  if (rng_chance(r, 0.5))
    s[0] = s[1] = s[2] = rng_float(r, 0.5, 2);
  else
    for (int k = 0; k < 3; k++)
      s[k] = rng_float(r, 0.5, 2);
  CU_ASSERT_EQUAL_FATAL(scn_compose_trs(t, q, s, out), SCN_OK);
}

/* Mostly T * R * S; sometimes raw affine, a zero scale (singular for children's set_world and
 * keep-world links), the zero matrix, a last row other than 0 0 0 1 (history keeps such rows
 * apart; -0 for a 0 or a 1 a bit off must come back as it was), or identity. */
static void random_matrix(rng *r, float out[16]) {
  unsigned u = rng_below(r, 100);
  random_trs(r, out, 4);
  if (u < 75)
    return;
  if (u < 85) {
    for (int c = 0; c < 3; c++)
      for (int row = 0; row < 3; row++)
        out[c * 4 + row] = rng_float(r, -1.5, 1.5);
  } else if (u < 92) {
    for (int row = 0; row < 3; row++)
      out[rng_below(r, 3) * 4 + row] = 0;
  } else if (u < 94) {
    memset(out, 0, sizeof(float) * 16);
  } else if (u < 96) {
    static const float odd[] = {-0.0f, 0.25f, -1.0f, 1.0000001f};
    out[rng_below(r, 4) * 4 + 3] = odd[rng_below(r, 4)];
  } else {
    memcpy(out, IDENTITY, sizeof IDENTITY);
  }
}

/* ---- the oracle ------------------------------------------------------------------------------ */

#define NWORLDS 2
#define MAX_ENTS 480
#define RING 64 /* snapshots kept per world: more than the longest window used */

typedef struct snapshot {
  uint64_t tick; /* 0: none */
  bool has[MAX_ENTS];
  scn_entity parent[MAX_ENTS];
  char name[MAX_ENTS][SCN_NAME_MAX + 1];
  float local[MAX_ENTS][16], world[MAX_ENTS][16];
} snapshot;

typedef struct hprop {
  unsigned seed;
  long tick_no; /* ticks run, for messages */
  char op[200];
  bool failed;

  rng r;
  scn_scene *scene;
  scn_world *w[NWORLDS];
  uint32_t window[NWORLDS];
  uint64_t start[NWORLDS]; /* oldest tick history can give, by the contract's rules */
  bool in_batch;

  scn_entity ent[MAX_ENTS]; /* every entity ever created here, destroyed ones included */
  size_t nent;
  snapshot *snap[NWORLDS][RING];

  long queries, found; /* queries compared, and of those, how many answered with values */
  unsigned moves;      /* worlds handed to a copy of themselves (export, import) */
} hprop;

static bool fail(hprop *p, const char *fmt, ...) {
  if (!p->failed) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "core_history: seed %u, tick %ld, after %s%s:\n  \n", p->seed, p->tick_no,
            p->op, p->in_batch ? " (inside a batch)" : "");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "  reproduce with SCN_SEED=%u\n", p->seed);
    va_end(ap);
  }
  p->failed = true;
  return false;
}

static void describe(hprop *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->op, sizeof p->op, fmt, ap);
  va_end(ap);
}

static uint64_t now_of(hprop *p, int w) { return scn_world_tick(p->w[w]) - 1; }

/* The window the contract promises: from now - N + 1 (and not before start) to now. */
static bool expected_window(hprop *p, int w, uint64_t *oldest, uint64_t *newest) {
  uint64_t now = now_of(p, w), n = p->window[w];
  if (n == 0)
    return false;
  uint64_t first = now + 1 > n ? now + 1 - n : 0;
  if (first < p->start[w])
    first = p->start[w];
  if (first > now)
    return false;
  *oldest = first;
  *newest = now;
  return true;
}

static snapshot *snap_of(hprop *p, int w, uint64_t tick) {
  snapshot *s = p->snap[w][tick % RING];
  return s->tick == tick ? s : NULL;
}

/* Copies everything the core says of world w; right after a close, that is the closed tick. */
static void take_snapshot(hprop *p, int w, uint64_t tick) {
  snapshot *s = p->snap[w][tick % RING];
  s->tick = tick;
  for (size_t k = 0; k < p->nent; k++) {
    scn_transform_info info;
    s->has[k] = scn_transform_get(p->w[w], p->ent[k], &info) == SCN_OK;
    if (!s->has[k])
      continue;
    s->parent[k] = info.parent;
    snprintf(s->name[k], sizeof s->name[k], "%s", info.name ? info.name : "");
    memcpy(s->local[k], info.local, sizeof s->local[k]);
    memcpy(s->world[k], info.world, sizeof s->world[k]);
  }
}

/* History at tick for entity k against the snapshot of that tick, bit for bit. */
static bool check_one(hprop *p, int w, uint64_t tick, size_t k) {
  const snapshot *s = snap_of(p, w, tick);
  if (!s)
    return fail(p, "test bug: no snapshot of tick %llu", ID(tick));
  scn_transform_info info;
  memset(&info, 0, sizeof info);
  int rc = scn_world_history_get(p->w[w], p->ent[k], tick, &info);
  p->queries++;
  if (!s->has[k])
    return rc == SCN_NOT_FOUND ||
           fail(p, "w%d tick %llu: entity %llu had no transform, history answers %s", w, ID(tick),
                ID(p->ent[k]), scn_err_name(rc));
  if (rc != SCN_OK)
    return fail(p, "w%d tick %llu: entity %llu had a transform, history answers %s", w, ID(tick),
                ID(p->ent[k]), scn_err_name(rc));
  p->found++;
  if (info.entity != p->ent[k] || info.parent != s->parent[k])
    return fail(p, "w%d tick %llu: entity %llu: parent %llu, the tick closed with %llu", w,
                ID(tick), ID(p->ent[k]), ID(info.parent), ID(s->parent[k]));
  if (strcmp(info.name ? info.name : "", s->name[k]) != 0 || (info.name && !info.name[0]))
    return fail(p, "w%d tick %llu: entity %llu: name \"%s\", the tick closed with \"%s\"", w,
                ID(tick), ID(p->ent[k]), info.name ? info.name : "(none)", s->name[k]);
  if (memcmp(info.local, s->local[k], sizeof info.local) != 0)
    return fail(p, "w%d tick %llu: entity %llu: local matrix differs from the closed tick's", w,
                ID(tick), ID(p->ent[k]));
  if (memcmp(info.world, s->world[k], sizeof info.world) != 0)
    return fail(p, "w%d tick %llu: entity %llu: world matrix differs from the closed tick's", w,
                ID(tick), ID(p->ent[k]));
  return true;
}

static bool check_outside(hprop *p, int w, uint64_t tick) {
  for (size_t k = 0; k < p->nent; k += 1 + rng_below(&p->r, 4)) {
    scn_transform_info info;
    int rc = scn_world_history_get(p->w[w], p->ent[k], tick, &info);
    if (rc != SCN_NOT_FOUND)
      return fail(p, "w%d tick %llu lies outside the window, history answers %s", w, ID(tick),
                  scn_err_name(rc));
  }
  return true;
}

/* The reported window is the contract's; every tick in it equals the oracle; the ticks just
 * outside it answer NOT_FOUND. */
static bool check_world(hprop *p, int w) {
  uint64_t oldest = 0, newest = 0, got_oldest = 0, got_newest = 0;
  bool want = expected_window(p, w, &oldest, &newest);
  int rc = scn_world_history_window(p->w[w], &got_oldest, &got_newest);
  if (!want) {
    if (rc != SCN_NOT_FOUND)
      return fail(p, "w%d: the window should be empty, history reports %llu..%llu", w,
                  ID(got_oldest), ID(got_newest));
    return check_outside(p, w, now_of(p, w));
  }
  if (rc != SCN_OK || got_oldest != oldest || got_newest != newest)
    return fail(p, "w%d: window %llu..%llu (%s), expected %llu..%llu", w, ID(got_oldest),
                ID(got_newest), scn_err_name(rc), ID(oldest), ID(newest));
  for (uint64_t t = oldest; t <= newest; t++)
    for (size_t k = 0; k < p->nent; k++)
      if (!check_one(p, w, t, k))
        return false;
  return check_outside(p, w, oldest - 1) && check_outside(p, w, newest + 1);
}

/* A few queries in the middle of a tick: what the open tick did so far must not show. */
static bool check_some(hprop *p, int w) {
  uint64_t oldest, newest;
  if (!expected_window(p, w, &oldest, &newest) || p->nent == 0)
    return true;
  for (int q = 0; q < 8; q++) {
    uint64_t t = oldest + rng_below(&p->r, (uint32_t)(newest - oldest + 1));
    if (!check_one(p, w, t, rng_below(&p->r, (uint32_t)p->nent)))
      return false;
  }
  return true;
}

/* ---- random operations ----------------------------------------------------------------------- */

static const char *const NAMES[] = {"a", "b", "c", "wheel", "\xc3\xa9t\xc3\xa9"};

static scn_entity any_entity(hprop *p) {
  return p->nent ? p->ent[rng_below(&p->r, (uint32_t)p->nent)] : SCN_ENTITY_NONE;
}

static scn_entity new_entity(hprop *p) {
  if (p->nent == MAX_ENTS)
    return any_entity(p);
  scn_entity e;
  if (scn_entity_create(p->scene, 1, &e) != SCN_OK) {
    fail(p, "entity_create failed");
    return SCN_ENTITY_NONE;
  }
  /* inside a batch that rolls back, the id is un-created and may come back: keep it once */
  for (size_t k = 0; k < p->nent; k++)
    if (p->ent[k] == e)
      return e;
  p->ent[p->nent++] = e;
  return e;
}

/* Mostly an entity with a transform in w; sometimes any (no transform, destroyed). */
static scn_entity target(hprop *p, int w) {
  for (int k = 0; k < 12 && rng_chance(&p->r, 0.92); k++) {
    scn_entity e = any_entity(p);
    if (scn_transform_exists(p->w[w], e))
      return e;
  }
  return any_entity(p);
}

/* An entity for a new transform in w: a new one, one alive without a transform here (often
 * one whose transform here was destroyed: its history goes on), or any (EXISTS, NOT_FOUND). */
static scn_entity creatable(hprop *p, int w) {
  if (rng_chance(&p->r, 0.5))
    return new_entity(p);
  for (int k = 0; k < 12 && rng_chance(&p->r, 0.9); k++) {
    scn_entity e = any_entity(p);
    if (scn_entity_alive(p->scene, e) && !scn_transform_exists(p->w[w], e))
      return e;
  }
  return any_entity(p);
}

static const char *any_name(hprop *p) {
  return rng_chance(&p->r, 0.3) ? NULL : NAMES[rng_below(&p->r, COUNT(NAMES))];
}

/* One random operation on world w; failures (EXISTS, CYCLE, SINGULAR, NOT_FOUND) are part of
 * the game: a failed operation must leave no trace either. */
static void random_op(hprop *p, int w) {
  scn_world *wd = p->w[w];
  float m[16];
  scn_entity e = target(p, w), q = target(p, w);
  scn_transform_info info;
  size_t n = scn_world_transform_count(wd);
  /* creations keep a world at about 30..90 transforms */
  unsigned kind = rng_below(&p->r, 15);
  if (kind >= 2 && rng_chance(&p->r, n < 30 ? 0.4 : n > 90 ? 0.02 : 0.1))
    kind = 0;
  switch (kind) {
  case 0:
  case 1: {
    scn_entity c = creatable(p, w);
    scn_entity parent = rng_chance(&p->r, 0.3) ? SCN_ENTITY_NONE : q;
    const char *name = any_name(p);
    random_matrix(&p->r, m);
    describe(p, "w%d create %llu under %llu", w, ID(c), ID(parent));
    scn_transform_create(wd, c, parent, name, rng_chance(&p->r, 0.8) ? m : NULL);
    break;
  }
  case 2:
    describe(p, "w%d destroy %llu", w, ID(e));
    scn_transform_destroy(wd, e, false);
    break;
  case 3:
    describe(p, "w%d destroy %llu recursively", w, ID(e));
    scn_transform_destroy(wd, e, true);
    break;
  case 4:
  case 5: {
    scn_keep keep = rng_chance(&p->r, 0.5) ? SCN_KEEP_WORLD : SCN_KEEP_LOCAL;
    scn_entity parent = rng_chance(&p->r, 0.2) ? SCN_ENTITY_NONE : q;
    describe(p, "w%d link %llu to %llu", w, ID(e), ID(parent));
    scn_transform_link(wd, e, parent, keep);
    break;
  }
  case 6:
  case 7:
    random_matrix(&p->r, m);
    describe(p, "w%d set_local %llu", w, ID(e));
    scn_transform_set_local(wd, e, m);
    break;
  case 8:
    random_matrix(&p->r, m);
    describe(p, "w%d set_world %llu", w, ID(e));
    scn_transform_set_world(wd, e, m);
    break;
  case 9:
    describe(p, "w%d rename %llu", w, ID(e));
    scn_transform_rename(wd, e, any_name(p));
    break;
  case 10:
    describe(p, "entity_destroy %llu", ID(e));
    if (!p->in_batch && rng_chance(&p->r, 0.5))
      scn_entity_destroy(p->scene, e);
    break;
  case 11: /* a read in the middle of the tick flushes it */
    describe(p, "w%d get %llu", w, ID(e));
    scn_transform_get(wd, e, &info);
    break;
  case 12: /* set, read (flushed), set back: the tick ends where it began */
    describe(p, "w%d set_local %llu, get, set it back", w, ID(e));
    if (scn_transform_get(wd, e, &info) == SCN_OK) {
      random_matrix(&p->r, m);
      scn_transform_set_local(wd, e, m);
      scn_transform_get(wd, q, &info);
      scn_transform_get(wd, e, &info);
      scn_transform_set_local(wd, e, info.local);
    }
    break;
  case 13:
    describe(p, "w%d relayout", w);
    if (rng_chance(&p->r, 0.5))
      scn_world_relayout(wd);
    else
      scn_world_flush(wd);
    break;
  default:
    describe(p, "w%d queries mid-tick", w);
    check_some(p, w);
    break;
  }
}

static void random_batch(hprop *p, int w) {
  describe(p, "batch_begin");
  if (scn_batch_begin(p->scene) != SCN_OK) {
    fail(p, "batch_begin failed");
    return;
  }
  p->in_batch = true;
  int ops = 1 + (int)rng_below(&p->r, 6);
  for (int k = 0; k < ops && !p->failed; k++)
    random_op(p, rng_chance(&p->r, 0.8) ? w : (int)rng_below(&p->r, NWORLDS));
  p->in_batch = false;
  if (rng_chance(&p->r, 0.5)) {
    describe(p, "batch_commit");
    scn_batch_commit(p->scene);
  } else {
    describe(p, "batch_rollback");
    scn_batch_rollback(p->scene);
  }
}

/* ---- handing a world's history to another world ------------------------------------------- */

typedef struct versions {
  scn_history_version *v;
  size_t len, cap, next;
  bool failed;
} versions;

static int keep_version(void *ud, const scn_history_version *v) {
  versions *x = ud;
  scn_history_version *a = scn_array_grow(x->v, &x->cap, sizeof *a, x->len + 1);
  if (!a) {
    x->failed = true;
    return SCN_NOMEM;
  }
  x->v = a;
  x->v[x->len++] = *v;
  return 0;
}

static int next_version(void *ud, scn_history_version *v) {
  versions *x = ud;
  if (x->next == x->len)
    return 0;
  *v = x->v[x->next++];
  return 1;
}

static void copy_transform(void *ud, scn_entity e, scn_entity parent, const char *name,
                           const float local[16]) {
  CU_ASSERT_EQUAL(scn_transform_create(ud, e, parent, name, local), SCN_OK);
}

static void first_transform(void *ud, scn_entity e, scn_entity parent, const char *name,
                            const float local[16]) {
  (void)parent, (void)name, (void)local;
  scn_entity *first = ud;
  if (!first[0])
    first[0] = e;
}

/* Two versions alike, bit for bit where they hold matrices. */
static bool same_version(const scn_history_version *a, const scn_history_version *b) {
  if (a->tick != b->tick || a->entity != b->entity || a->kind != b->kind)
    return false;
  if (a->kind != SCN_VERSION_STRUCT)
    return memcmp(a->m, b->m, sizeof a->m) == 0;
  return a->exists == b->exists && a->parent == b->parent && strcmp(a->name, b->name) == 0;
}

/* A new world of the same scene with w's transforms (as a snapshot makes them), continuing
 * its ticks, given its history; x holds the versions exported. NULL on failure. */
static scn_world *hand_over(scn_scene *scene, scn_world *w, const char *name, versions *x,
                            scn_history_span *span, rng *r, bool *moved) {
  scn_world *to;
  if (scn_world_history_export(w, span, keep_version, x) != SCN_OK ||
      scn_world_create(scene, name, &to) != SCN_OK)
    return NULL;
  scn_world_visit_transforms(w, copy_transform, to);
  if (scn_world_continue_ticks(to, span->now) != SCN_OK || scn_world_tick(to) != span->now + 1)
    return NULL;
  /* Sometimes a matrix moves in the copy's open tick and comes back before the import: the
   * same transforms, but a world matrix already stamped with the open tick. */
  size_t n = scn_world_transform_count(to);
  *moved = r && n && rng_chance(r, 0.5);
  if (*moved) {
    scn_entity some[1] = {0};
    scn_world_visit_transforms(to, first_transform, some);
    scn_transform_info before = get(to, some[0]);
    float m[16];
    random_matrix(r, m);
    m[12] += 1; /* not the matrix it has */
    scn_transform_set_local(to, some[0], m);
    get(to, some[0]);
    scn_transform_set_local(to, some[0], before.local);
  }
  x->next = 0;
  if (scn_world_history_import(to, span, next_version, x) != SCN_OK)
    return NULL;
  return to;
}

static bool same_info(const scn_transform_info *a, const scn_transform_info *b) {
  return a->entity == b->entity && a->parent == b->parent &&
         strcmp(a->name ? a->name : "", b->name ? b->name : "") == 0 &&
         (a->name == NULL) == (b->name == NULL) && memcmp(a->local, b->local, 64) == 0 &&
         memcmp(a->world, b->world, 64) == 0;
}

/* Every query the two worlds can answer, at every tick of the window and between them (and
 * one past each end), for every entity in ents: the same code, the same bits. */
static bool same_past(hprop *p, scn_world *a, scn_world *b, const scn_entity *ents, size_t n) {
  uint64_t ao = 0, an = 0, bo = 0, bn = 0;
  int ra = scn_world_history_window(a, &ao, &an), rb = scn_world_history_window(b, &bo, &bn);
  if (ra != rb || ao != bo || an != bn || scn_world_history(a) != scn_world_history(b))
    return fail(p, "window %llu..%llu (%s) after the hand-over, %llu..%llu (%s) before", ID(bo),
                ID(bn), scn_err_name(rb), ID(ao), ID(an), scn_err_name(ra));
  if (ra != SCN_OK)
    return true;
  static const double fractions[] = {0, 0.25, 0.5, 0.875};
  for (uint64_t t = ao ? ao - 1 : 0; t <= an + 1; t++)
    for (size_t f = 0; f < COUNT(fractions); f++)
      for (size_t k = 0; k < n; k++) {
        scn_transform_info ia, ib;
        memset(&ia, 0, sizeof ia);
        memset(&ib, 0, sizeof ib);
        double tick = (double)t + fractions[f];
        int ca = scn_world_history_interpolate(a, ents[k], tick, &ia);
        int cb = scn_world_history_interpolate(b, ents[k], tick, &ib);
        p->queries++;
        if (ca != cb || (ca == SCN_OK && !same_info(&ia, &ib)))
          return fail(p, "tick %g, entity %llu: %s after the hand-over, %s before", tick,
                      ID(ents[k]), scn_err_name(cb), scn_err_name(ca));
        float ma[16], mb[16];
        scn_entity to = ents[(k * 7 + t) % n];
        ca = scn_world_history_relative(a, ents[k], to, tick, ma);
        cb = scn_world_history_relative(b, ents[k], to, tick, mb);
        if (ca != cb || (ca == SCN_OK && memcmp(ma, mb, sizeof ma) != 0))
          return fail(p, "tick %g, relative %llu to %llu: %s after the hand-over, %s before", tick,
                      ID(ents[k]), ID(to), scn_err_name(cb), scn_err_name(ca));
      }
  return true;
}

/* World w moves to a copy of itself in the middle of a tick (as a move freezes a group
 * whenever it comes), and the tick goes on in the copy: the copy answers every query as w did,
 * exports the same versions, and then takes w's place, so the oracle goes on checking it tick
 * after tick against what w closed before the hand-over and what the copy closes after it. */
static void migrate(hprop *p, int w) {
  describe(p, "w%d handed over to a copy of itself", w);
  char name[32];
  snprintf(name, sizeof name, "copy%d.%u", w, ++p->moves);
  versions x = {0}, again = {0};
  scn_history_span span, span2;
  bool moved;
  scn_world *to = hand_over(p->scene, p->w[w], name, &x, &span, &p->r, &moved);
  if (!to) {
    fail(p, "the hand-over failed");
  } else if (same_past(p, p->w[w], to, p->ent, p->nent) && !moved) {
    /* (a matrix moved and back in the copy gives a record more, holding the same value) */
    int rc = scn_world_history_export(to, &span2, keep_version, &again);
    bool same = rc == SCN_OK && again.len == x.len && span2.now == span.now &&
                span2.oldest == span.oldest && span2.window == span.window;
    for (size_t k = 0; same && k < x.len; k++)
      same = same_version(&x.v[k], &again.v[k]);
    if (!same)
      fail(p, "the copy exports %zu versions, the world %zu (or they differ)", again.len, x.len);
  }
  free(x.v);
  free(again.v);
  if (!to)
    return;
  if (w == 0)
    scn_world_keep_events(to, true);
  else
    scn_world_track_reverts(to, true);
  char old[SCN_NAME_MAX + 1];
  snprintf(old, sizeof old, "%s", scn_world_name(p->w[w]));
  if (scn_world_destroy(p->scene, old) != SCN_OK)
    fail(p, "cannot destroy the world handed over");
  p->w[w] = to;
}

static const uint32_t WINDOWS[] = {0, 1, 2, 3, 7, 16, 40};

static void change_window(hprop *p, int w) {
  uint32_t n = WINDOWS[rng_below(&p->r, COUNT(WINDOWS))];
  uint64_t oldest, newest;
  describe(p, "w%d set_history %u", w, n);
  if (n && !p->window[w])
    p->start[w] = scn_world_tick(p->w[w]); /* from the open tick on */
  else if (n && expected_window(p, w, &oldest, &newest))
    p->start[w] = oldest; /* what is kept stays, a longer window fills from here */
  /* else (an empty window) start stays where it was */
  p->window[w] = n;
  if (scn_world_set_history(p->w[w], n) != SCN_OK)
    fail(p, "set_history(%u) failed", n);
  if (scn_world_history(p->w[w]) != n)
    fail(p, "history() is %u after set_history(%u)", scn_world_history(p->w[w]), n);
}

static void close_tick(hprop *p, int w) {
  describe(p, "w%d close_tick", w);
  uint64_t closed = scn_world_close_tick(p->w[w]);
  take_snapshot(p, w, closed);
  check_world(p, w);
}

/* Hundreds of ticks: random operations and batches, each world closed now and then (worlds
 * tick on their own), windows changed now and then; the whole window checked at each close. */
static bool run(unsigned seed, uint32_t w0, uint32_t w1, int ticks) {
  hprop *p = calloc(1, sizeof *p);
  if (!p)
    return false;
  p->seed = seed;
  p->r.state = seed;
  p->scene = scn_scene_new(NULL);
  bool ok = p->scene != NULL;
  for (int w = 0; ok && w < NWORLDS; w++) {
    char name[4] = {'w', (char)('0' + w), 0};
    ok = scn_world_create(p->scene, name, &p->w[w]) == SCN_OK;
    p->window[w] = w ? w1 : w0;
    p->start[w] = 1;
    ok = ok && scn_world_set_history(p->w[w], p->window[w]) == SCN_OK;
    for (int k = 0; ok && k < RING; k++)
      ok = (p->snap[w][k] = calloc(1, sizeof(snapshot))) != NULL;
  }
  if (ok) {
    scn_world_track_reverts(p->w[1], true); /* stamps come back on set-backs: no matter here */
    scn_world_keep_events(p->w[0], true);
  }
  for (p->tick_no = 0; ok && p->tick_no < ticks && !p->failed; p->tick_no++) {
    int ops = (int)rng_below(&p->r, 14);
    for (int k = 0; k < ops && !p->failed; k++) {
      int w = (int)rng_below(&p->r, NWORLDS);
      if (rng_chance(&p->r, 0.006))
        migrate(p, w);
      if (rng_chance(&p->r, 0.12))
        random_batch(p, w);
      else
        random_op(p, w);
    }
    for (int w = 0; w < NWORLDS && !p->failed; w++) {
      if (rng_chance(&p->r, 0.015))
        change_window(p, w);
      if (rng_chance(&p->r, 0.01))
        migrate(p, w);
      if (w == 0 || rng_chance(&p->r, 0.7))
        close_tick(p, w);
    }
  }
  ok = ok && !p->failed && p->found > 1000;
  if (!p->failed && p->found <= 1000)
    fprintf(stderr, "core_history: seed %u compared only %ld values\n", seed, p->found);
  if (getenv("SCN_VERBOSE"))
    printf("  seed %u: %ld queries, %ld with values, %zu entities, %u hand-overs\n", seed,
           p->queries, p->found, p->nent, p->moves);
  for (int w = 0; w < NWORLDS; w++)
    for (int k = 0; k < RING; k++)
      free(p->snap[w][k]);
  scn_scene_free(p->scene);
  free(p);
  return ok;
}

static void test_oracle_fixed_seeds(void) {
  CU_ASSERT(run(1, 1, 7, 400));
  CU_ASSERT(run(2, 16, 3, 400));
  CU_ASSERT(run(3, 40, 2, 400));
  CU_ASSERT(run(42, 7, 40, 400));
  CU_ASSERT(run(0xc0ffee, 3, 0, 600));
}

static void test_oracle_env_seed(void) {
  const char *s = getenv("SCN_SEED");
  if (!s || !*s)
    return;
  char *end;
  unsigned long seed = strtoul(s, &end, 0);
  if (*end || seed > UINT32_MAX) {
    CU_FAIL("SCN_SEED is not a 32-bit number");
    return;
  }
  CU_ASSERT(run((unsigned)seed, 1 + (unsigned)seed % 40, (unsigned)seed % 17, 800));
}

/* ---- window edges ---------------------------------------------------------------------------- */

static scn_transform_info at(scn_world *w, scn_entity e, uint64_t tick) {
  scn_transform_info info;
  memset(&info, 0, sizeof info);
  CU_ASSERT_EQUAL_FATAL(scn_world_history_get(w, e, tick, &info), SCN_OK);
  return info;
}

static bool window_is(scn_world *w, uint64_t oldest, uint64_t newest) {
  uint64_t o = 0, n = 0;
  return scn_world_history_window(w, &o, &n) == SCN_OK && o == oldest && n == newest;
}

static int at_rc(scn_world *w, scn_entity e, uint64_t tick) {
  scn_transform_info info;
  return scn_world_history_get(w, e, tick, &info);
}

/* One transform moved to x = tick in every tick: the window's edges, one tick past each, the
 * open tick not showing, and the bounds the setter takes. */
static void test_window_edges(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  CU_ASSERT_EQUAL(scn_world_history(w), 0);
  CU_ASSERT_EQUAL(scn_world_set_history(w, -1), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_world_set_history(w, SCN_HISTORY_MAX + 1), SCN_LIMIT);
  CU_ASSERT_EQUAL(scn_world_history(w), 0);
  OK(scn_world_set_history(w, 5));
  CU_ASSERT_EQUAL(scn_world_history(w), 5);
  uint64_t o, n;
  CU_ASSERT_EQUAL(scn_world_history_window(w, &o, &n), SCN_NOT_FOUND); /* nothing closed yet */
  float m[16];
  mat_t(m, 1, 0, 0);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", m);
  CU_ASSERT_EQUAL(at_rc(w, a, 0), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(at_rc(w, a, 1), SCN_NOT_FOUND); /* tick 1 is still open */
  for (int t = 1; t <= 8; t++) {
    CU_ASSERT_EQUAL(scn_world_close_tick(w), (uint64_t)t);
    mat_t(m, (float)t + 1, 0, 0);
    OK(scn_transform_set_local(w, a, m)); /* tick t + 1, still open */
  }
  CU_ASSERT_TRUE(window_is(w, 4, 8));
  CU_ASSERT_EQUAL(at(w, a, 4).world[12], 4);
  CU_ASSERT_EQUAL(at(w, a, 8).world[12], 8); /* not 9: the open tick does not show */
  CU_ASSERT_EQUAL(at(w, a, 6).local[12], 6);
  CU_ASSERT_EQUAL(at_rc(w, a, 3), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(at_rc(w, a, 9), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(get(w, a).world[12], 9); /* a read flushes the open tick: still not shown */
  CU_ASSERT_EQUAL(at(w, a, 8).world[12], 8);
  CU_ASSERT_STRING_EQUAL(at(w, a, 8).name, "a");
  CU_ASSERT_EQUAL(at(w, a, 8).parent, SCN_ENTITY_NONE);
  scn_world_close_tick(w);
  CU_ASSERT_TRUE(window_is(w, 5, 9));
  CU_ASSERT_EQUAL(at(w, a, 9).world[12], 9);
  CU_ASSERT_EQUAL(at_rc(w, a, 4), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(at_rc(w, SCN_ENTITY_NONE, 9), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(at_rc(w, UINT64_MAX, 9), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(at_rc(w, ent(s), 9), SCN_NOT_FOUND); /* no transform here */
  OK(scn_world_set_history(w, SCN_HISTORY_MAX));
  CU_ASSERT_TRUE(window_is(w, 5, 9)); /* a longer window fills from here */
  scn_scene_free(s);
}

/* A world without history answers NOT_FOUND to every tick, fractional ones included; turning
 * history off forgets it, turning it on again starts from the open tick. */
static void test_no_history(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, NULL);
  for (int t = 0; t < 3; t++)
    scn_world_close_tick(w);
  uint64_t o, n;
  scn_transform_info info;
  float r[16];
  CU_ASSERT_EQUAL(scn_world_history_window(w, &o, &n), SCN_NOT_FOUND);
  for (uint64_t t = 0; t <= 4; t++)
    CU_ASSERT_EQUAL(at_rc(w, a, t), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_world_history_interpolate(w, a, 2.5, &info), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_world_history_relative(w, a, a, 2, r), SCN_NOT_FOUND);
  scn_world_stats st;
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.history_bytes, 0);
  OK(scn_world_set_history(w, 4));
  CU_ASSERT_EQUAL(at_rc(w, a, 3), SCN_NOT_FOUND); /* nothing before the open tick */
  scn_world_close_tick(w);
  CU_ASSERT_TRUE(window_is(w, 4, 4));
  CU_ASSERT_EQUAL(at_rc(w, a, 4), SCN_OK);
  scn_world_get_stats(w, &st);
  CU_ASSERT(st.history_bytes > 0);
  OK(scn_world_set_history(w, 0));
  CU_ASSERT_EQUAL(scn_world_history_window(w, &o, &n), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(at_rc(w, a, 4), SCN_NOT_FOUND);
  OK(scn_world_set_history(w, 0)); /* off twice is off */
  scn_world_get_stats(w, &st);
  CU_ASSERT_EQUAL(st.history_bytes, 0);
  scn_scene_free(s);
}

/* Created and destroyed inside the window, by a transform destroy (with a child, which keeps
 * its world matrix) and by entity.destroy; re-created under the same entity. */
static void test_created_destroyed_in_window(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w, *w2;
  OK(scn_world_create(s, "w", &w));
  OK(scn_world_create(s, "w2", &w2));
  OK(scn_world_set_history(w, 10));
  float m[16];
  mat_t(m, 0, 5, 0);
  scn_entity root = mk(w, s, SCN_ENTITY_NONE, "root", m);
  scn_world_close_tick(w);               /* 1 */
  scn_entity b = mk(w, s, root, "b", m); /* tick 2 */
  scn_entity c = mk(w, s, b, "c", m);    /* tick 2 */
  OK(scn_transform_create(w2, c, SCN_ENTITY_NONE, NULL, NULL));
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 2);
  OK(scn_transform_destroy(w, b, false)); /* tick 3: c becomes a root, keeping its world */
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 3);
  OK(scn_entity_destroy(s, c)); /* tick 4, both worlds */
  scn_entity d = mk(w, s, SCN_ENTITY_NONE, "d", m);
  OK(scn_transform_destroy(w, d, true)); /* created and destroyed within tick 4 */
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 4);
  OK(scn_transform_create(w, b, root, "b2", NULL)); /* tick 5: b again, another transform */
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 5);

  CU_ASSERT_EQUAL(at_rc(w, b, 1), SCN_NOT_FOUND); /* created after 1 */
  CU_ASSERT_EQUAL(at(w, b, 2).parent, root);
  CU_ASSERT_STRING_EQUAL(at(w, b, 2).name, "b");
  CU_ASSERT_EQUAL(at(w, b, 2).world[13], 10);
  CU_ASSERT_EQUAL(at_rc(w, b, 3), SCN_NOT_FOUND); /* destroyed in 3 */
  CU_ASSERT_EQUAL(at_rc(w, b, 4), SCN_NOT_FOUND);
  CU_ASSERT_STRING_EQUAL(at(w, b, 5).name, "b2");
  CU_ASSERT_EQUAL(at(w, b, 5).world[13], 5);
  CU_ASSERT_EQUAL(at(w, c, 2).parent, b);
  CU_ASSERT_EQUAL(at(w, c, 2).local[13], 5);
  CU_ASSERT_EQUAL(at(w, c, 2).world[13], 15);
  CU_ASSERT_EQUAL(at(w, c, 3).parent, SCN_ENTITY_NONE); /* orphaned, same world matrix */
  CU_ASSERT_EQUAL(at(w, c, 3).local[13], 15);
  CU_ASSERT_EQUAL(at(w, c, 3).world[13], 15);
  CU_ASSERT_EQUAL(at_rc(w, c, 4), SCN_NOT_FOUND); /* the entity is gone: its past is not */
  CU_ASSERT_FALSE(scn_entity_alive(s, c));
  for (uint64_t t = 1; t <= 5; t++)
    CU_ASSERT_EQUAL(at_rc(w, d, t), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(at_rc(w2, c, 1), SCN_NOT_FOUND); /* w2 keeps no history */
  /* once every record of a destroyed transform has left the window it is simply unknown */
  for (int t = 0; t < 12; t++)
    scn_world_close_tick(w);
  CU_ASSERT_TRUE(window_is(w, 8, 17));
  CU_ASSERT_EQUAL(at_rc(w, c, 8), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(at(w, b, 8).world[13], 5);
  scn_scene_free(s);
}

/* A rolled-back batch leaves nothing: not in the values, and not as a creation. */
static void test_rollback_leaves_no_trace(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  OK(scn_world_set_history(w, 3));
  float m[16];
  mat_t(m, 1, 0, 0);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", m);
  scn_world_close_tick(w); /* 1 */
  OK(scn_batch_begin(s));
  mat_t(m, 2, 0, 0);
  OK(scn_transform_set_local(w, a, m));
  CU_ASSERT_EQUAL(get(w, a).world[12], 2); /* flushed inside the batch */
  OK(scn_transform_rename(w, a, "z"));
  scn_entity b = mk(w, s, a, "b", NULL);
  scn_batch_rollback(s);
  scn_world_close_tick(w); /* 2 */
  CU_ASSERT_EQUAL(at(w, a, 1).world[12], 1);
  CU_ASSERT_EQUAL(at(w, a, 2).world[12], 1);
  CU_ASSERT_STRING_EQUAL(at(w, a, 2).name, "a");
  CU_ASSERT_EQUAL(at_rc(w, b, 2), SCN_NOT_FOUND);
  scn_scene_free(s);
}

/* ---- interpolation -----------------------------------------------------------------------------
 */

/* The independent computation: cglm takes each end apart (in float), the quaternions are
 * interpolated in double (the shorter way), translation and scale linearly, and the matrix is
 * composed in double. The core decomposes in double and composes once, so the two differ by
 * float rounding of the parts: within LERP_TOL of the largest element (about 8 epsilons). */
#define LERP_TOL 1e-6

/* T * R * S by the contract's test: last row 0 0 0 1, no zero column, columns orthogonal
 * within SCN_TRS_SHEAR_TOL. */
static bool is_trs(const float m[16]) {
  if (m[3] != 0 || m[7] != 0 || m[11] != 0 || m[15] != 1)
    return false;
  double len[3];
  for (int c = 0; c < 3; c++) {
    len[c] = sqrt((double)m[4 * c] * m[4 * c] + (double)m[4 * c + 1] * m[4 * c + 1] +
                  (double)m[4 * c + 2] * m[4 * c + 2]);
    if (len[c] == 0)
      return false;
  }
  for (int a = 0; a < 3; a++)
    for (int b = a + 1; b < 3; b++) {
      double dot = 0;
      for (int k = 0; k < 3; k++)
        dot += (double)m[4 * a + k] * m[4 * b + k];
      if (fabs(dot / (len[a] * len[b])) > SCN_TRS_SHEAR_TOL)
        return false;
    }
  return true;
}

static void reference_lerp(const float a[16], const float b[16], double f, double out[16]) {
  mat4 ma, mb, ra, rb;
  vec4 ta, tb;
  vec3 sa, sb;
  versor qa, qb;
  memcpy(ma, a, sizeof ma);
  memcpy(mb, b, sizeof mb);
  glm_decompose(ma, ta, ra, sa);
  glm_decompose(mb, tb, rb, sb);
  glm_mat4_quat(ra, qa);
  glm_mat4_quat(rb, qb);
  double q0[4], q1[4], dot = 0;
  for (int k = 0; k < 4; k++)
    q0[k] = qa[k], q1[k] = qb[k];
  double n0 = sqrt(q0[0] * q0[0] + q0[1] * q0[1] + q0[2] * q0[2] + q0[3] * q0[3]);
  double n1 = sqrt(q1[0] * q1[0] + q1[1] * q1[1] + q1[2] * q1[2] + q1[3] * q1[3]);
  for (int k = 0; k < 4; k++)
    q0[k] /= n0, q1[k] /= n1, dot += q0[k] * q1[k];
  if (dot < 0)
    for (int k = 0; k < 4; k++)
      q1[k] = -q1[k];
  dot = fabs(dot) > 1 ? 1 : fabs(dot);
  double angle = acos(dot), w0 = 1 - f, w1 = f;
  if (angle > 1e-9)
    w0 = sin((1 - f) * angle) / sin(angle), w1 = sin(f * angle) / sin(angle);
  double q[4], len = 0;
  for (int k = 0; k < 4; k++)
    q[k] = w0 * q0[k] + w1 * q1[k], len += q[k] * q[k];
  len = sqrt(len);
  double x = q[0] / len, y = q[1] / len, z = q[2] / len, w = q[3] / len, t[3], sc[3];
  for (int k = 0; k < 3; k++)
    t[k] = ta[k] + ((double)tb[k] - ta[k]) * f, sc[k] = sa[k] + ((double)sb[k] - sa[k]) * f;
  const double r[9] = {1 - 2 * (y * y + z * z), 2 * (x * y + z * w),     2 * (x * z - y * w),
                       2 * (x * y - z * w),     1 - 2 * (x * x + z * z), 2 * (y * z + x * w),
                       2 * (x * z + y * w),     2 * (y * z - x * w),     1 - 2 * (x * x + y * y)};
  for (int c = 0; c < 3; c++) {
    for (int k = 0; k < 3; k++)
      out[4 * c + k] = r[3 * c + k] * sc[c];
    out[4 * c + 3] = 0;
  }
  out[12] = t[0], out[13] = t[1], out[14] = t[2], out[15] = 1;
}

static double largest_abs(const float *m) {
  double x = 0;
  for (int i = 0; i < 16; i++)
    x = fmax(x, fabs(m[i]));
  return x;
}

/* got against the interpolation of a and b: the reference within LERP_TOL when both ends are
 * T * R * S, else a bit for bit. Returns the error relative to the largest element. */
static double check_lerp(const float *got, const float *a, const float *b, double f, bool *ok) {
  if (!is_trs(a) || !is_trs(b)) {
    *ok &= memcmp(got, a, sizeof(float) * 16) == 0;
    return 0;
  }
  double want[16], scale = fmax(1, fmax(largest_abs(a), largest_abs(b))), err = 0;
  reference_lerp(a, b, f, want);
  for (int i = 0; i < 16; i++)
    err = fmax(err, fabs(got[i] - want[i]) / scale);
  *ok &= err <= LERP_TOL;
  return err;
}

/* Six transforms whose matrices change every tick: T * R * S roots (uniform and non-uniform
 * scale), a child whose world has shear under a non-uniformly scaled parent, a raw affine
 * matrix, a projective one, and a root whose rotation turns past a half turn (the shorter way
 * round flips the quaternion). Every fractional tick between every two ticks of the window. */
static void test_interpolation(void) {
  enum { TICKS = 12, KINDS = 6 };
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  OK(scn_world_set_history(w, TICKS));
  rng r = {99};
  scn_entity e[KINDS];
  for (int k = 0; k < KINDS; k++)
    e[k] = mk(w, s, k == 2 ? e[1] : SCN_ENTITY_NONE, NULL, NULL);
  for (int t = 1; t <= TICKS; t++) {
    float m[16], tr[3] = {rng_float(&r, -5, 5), rng_float(&r, -5, 5), rng_float(&r, -5, 5)};
    float q[4], sc[3] = {rng_float(&r, 0.5, 2), rng_float(&r, 0.5, 2), rng_float(&r, 0.5, 2)};
    float su[3] = {sc[0], sc[0], sc[0]};
    rng_quat(&r, q);
    OK(scn_compose_trs(tr, q, su, m));
    OK(scn_transform_set_local(w, e[0], m));
    OK(scn_compose_trs(tr, q, sc, m));
    OK(scn_transform_set_local(w, e[1], m));
    rng_quat(&r, q);
    OK(scn_compose_trs(NULL, q, NULL, m));
    OK(scn_transform_set_local(w, e[2], m)); /* a rotation under a non-uniform scale */
    random_trs(&r, m, 3);
    m[4] += 0.5f; /* shear */
    OK(scn_transform_set_local(w, e[3], m));
    random_trs(&r, m, 3);
    m[3] = 0.25f; /* projective */
    OK(scn_transform_set_local(w, e[4], m));
    float half[4] = {0, 0, sinf(0.8f * (float)t), cosf(0.8f * (float)t)}; /* turns on and on */
    OK(scn_compose_trs(tr, half, NULL, m));
    OK(scn_transform_set_local(w, e[5], m));
    scn_world_close_tick(w);
  }
  CU_ASSERT_TRUE_FATAL(window_is(w, 1, TICKS));
  static const double fractions[] = {1e-6, 0.125, 0.5, 0.75, 0.999};
  bool ok = true, both_trs = false, fallback = false;
  double worst = 0;
  for (uint64_t t = 1; t < TICKS; t++)
    for (int k = 0; k < KINDS; k++)
      for (size_t x = 0; x < COUNT(fractions); x++) {
        scn_transform_info got, a = at(w, e[k], t), b = at(w, e[k], t + 1);
        OK(scn_world_history_interpolate(w, e[k], (double)t + fractions[x], &got));
        ok &= got.entity == e[k] && got.parent == a.parent;
        worst = fmax(worst, check_lerp(got.world, a.world, b.world, fractions[x], &ok));
        worst = fmax(worst, check_lerp(got.local, a.local, b.local, fractions[x], &ok));
        both_trs |= is_trs(a.world) && is_trs(b.world);
        fallback |= !is_trs(a.world);
        float rel[16];
        OK(scn_world_history_relative(w, e[k], e[0], (double)t + fractions[x], rel));
      }
  if (!ok || getenv("SCN_VERBOSE"))
    printf("  interpolation: largest error %.3g of the largest element (tolerance %g)\n", worst,
           LERP_TOL);
  CU_ASSERT_TRUE(ok);
  CU_ASSERT_TRUE(both_trs && fallback); /* both paths were taken */
  /* the ends and the edges */
  scn_transform_info got;
  OK(scn_world_history_interpolate(w, e[0], 3, &got));
  CU_ASSERT_TRUE(memcmp(got.world, at(w, e[0], 3).world, 64) == 0);
  CU_ASSERT_EQUAL(scn_world_history_interpolate(w, e[0], TICKS + 0.5, &got), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_world_history_interpolate(w, e[0], 0.5, &got), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_world_history_interpolate(w, e[0], -0.5, &got), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_world_history_interpolate(w, e[0], NAN, &got), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_world_history_interpolate(w, e[0], INFINITY, &got), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_world_history_interpolate(w, e[0], 1e300, &got), SCN_NOT_FOUND);
  /* destroyed in the next tick: the values as they were; created in it: not yet there */
  scn_entity gone = e[0], late = ent(s);
  OK(scn_transform_destroy(w, gone, false));
  OK(scn_transform_create(w, late, SCN_ENTITY_NONE, NULL, NULL));
  scn_world_close_tick(w);
  OK(scn_world_history_interpolate(w, gone, TICKS + 0.5, &got));
  CU_ASSERT_TRUE(memcmp(got.world, at(w, gone, TICKS).world, 64) == 0);
  CU_ASSERT_EQUAL(scn_world_history_interpolate(w, late, TICKS + 0.5, &got), SCN_NOT_FOUND);
  scn_scene_free(s);
}

/* Relative at a tick is inverse(world(to)) * world(e) of that tick, checked in double. */
static void test_relative_at_tick(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w;
  OK(scn_world_create(s, "w", &w));
  OK(scn_world_set_history(w, 4));
  rng r = {7};
  float m[16];
  random_trs(&r, m, 3);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, NULL, m);
  random_trs(&r, m, 3);
  scn_entity b = mk(w, s, a, NULL, m);
  scn_world_close_tick(w);
  random_trs(&r, m, 3);
  OK(scn_transform_set_local(w, a, m));
  float zero[16] = {0};
  scn_entity z = mk(w, s, SCN_ENTITY_NONE, NULL, zero);
  scn_world_close_tick(w);
  for (uint64_t t = 1; t <= 2; t++) {
    float rel[16];
    OK(scn_world_history_relative(w, b, a, (double)t, rel));
    /* world(a) * rel gives world(b) back */
    scn_transform_info ia = at(w, a, t), ib = at(w, b, t);
    double worst = 0;
    for (int c = 0; c < 4; c++)
      for (int row = 0; row < 4; row++) {
        double sum = 0;
        for (int k = 0; k < 4; k++)
          sum += (double)ia.world[4 * k + row] * rel[4 * c + k];
        worst = fmax(worst, fabs(sum - ib.world[4 * c + row]));
      }
    CU_ASSERT(worst < 1e-4);
  }
  float rel[16];
  CU_ASSERT_EQUAL(scn_world_history_relative(w, a, z, 2, rel), SCN_SINGULAR);
  CU_ASSERT_EQUAL(scn_world_history_relative(w, a, z, 1, rel), SCN_NOT_FOUND); /* z was not yet */
  scn_scene_free(s);
}

/* ---- handing over: edges ------------------------------------------------------------------ */

static int failing_next(void *ud, scn_history_version *v) {
  (void)ud, (void)v;
  return SCN_NOMEM;
}

/* Versions given one by one from a list, for imports that must be refused. */
static int import_list(scn_world *w, const scn_history_span *span, const scn_history_version *v,
                       size_t n) {
  versions x = {(scn_history_version *)v, n, n, 0, false};
  return scn_world_history_import(w, span, next_version, &x);
}

/* The tick count carried over, a clock held still, and every refusal of an import. */
static void test_hand_over_edges(void) {
  scn_scene *s = scn_scene_new(NULL);
  scn_world *w, *c;
  OK(scn_world_create(s, "w", &w));
  OK(scn_world_set_history(w, 5));
  float m[16];
  mat_t(m, 1, 0, 0);
  scn_entity a = mk(w, s, SCN_ENTITY_NONE, "a", m);
  scn_entity b = mk(w, s, a, "b", m);
  for (int t = 1; t <= 8; t++) {
    scn_world_close_tick(w);
    mat_t(m, (float)t + 1, 0, 0);
    OK(scn_transform_set_local(w, a, m));
  }
  OK(scn_transform_rename(w, b, "bb")); /* tick 9, open */
  CU_ASSERT_TRUE(window_is(w, 4, 8));
  /* The clock held: nothing closes, reads still see everything. */
  scn_world_hold_ticks(w, true);
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 8);
  CU_ASSERT_EQUAL(scn_world_close_tick(w), 8);
  CU_ASSERT_EQUAL(scn_world_tick(w), 9);
  CU_ASSERT_EQUAL(get(w, a).world[12], 9);
  CU_ASSERT_TRUE(window_is(w, 4, 8));
  versions x = {0};
  scn_history_span span;
  OK(scn_world_history_export(w, &span, keep_version, &x));
  CU_ASSERT_TRUE(span.window == 5 && span.oldest == 4 && span.now == 8);
  CU_ASSERT(x.len > 0 && x.v[0].tick == 5 && x.v[x.len - 1].tick == 9);

  /* continue_ticks: only before the first close, outside batches, within range. */
  CU_ASSERT_EQUAL(scn_world_continue_ticks(w, 100), SCN_STATE);
  OK(scn_world_create(s, "c", &c));
  OK(scn_world_set_history(c, 5));
  scn_world_visit_transforms(w, copy_transform, c);
  OK(scn_batch_begin(s));
  CU_ASSERT_EQUAL(scn_world_continue_ticks(c, 8), SCN_STATE);
  scn_batch_rollback(s);
  CU_ASSERT_EQUAL(scn_world_continue_ticks(c, (UINT64_C(1) << 62) + 1), SCN_INVALID);
  OK(scn_world_continue_ticks(c, 0));
  CU_ASSERT_EQUAL(scn_world_tick(c), 1);
  /* an import needs the open tick to be now + 1 */
  x.next = 0;
  CU_ASSERT_EQUAL(scn_world_history_import(c, &span, next_version, &x), SCN_STATE);
  OK(scn_world_continue_ticks(c, 8));
  CU_ASSERT_EQUAL(scn_world_tick(c), 9);
  CU_ASSERT_EQUAL(scn_world_continue_ticks(c, 8), SCN_STATE); /* once */
  uint64_t o, n;
  CU_ASSERT_EQUAL(scn_world_history_window(c, &o, &n), SCN_NOT_FOUND); /* starts at the open */

  /* spans no world has: refused, changing nothing */
  scn_history_span bad = span;
  bad.window = SCN_HISTORY_MAX + 1;
  CU_ASSERT_EQUAL(import_list(c, &bad, NULL, 0), SCN_INVALID);
  bad = span;
  bad.oldest = 3; /* more than the window */
  CU_ASSERT_EQUAL(import_list(c, &bad, NULL, 0), SCN_INVALID);
  bad.oldest = 10; /* after now + 1 */
  CU_ASSERT_EQUAL(import_list(c, &bad, NULL, 0), SCN_INVALID);
  CU_ASSERT_EQUAL(scn_world_history(c), 5);

  /* versions no export gives: refused, the window kept with nothing in it */
  scn_history_version v[2];
  memset(v, 0, sizeof v);
  v[0] = x.v[0];
  v[1] = x.v[0];
  CU_ASSERT_EQUAL(import_list(c, &span, v, 2), SCN_INVALID); /* one value twice in a tick */
  v[1].tick = v[0].tick - 1;
  CU_ASSERT_EQUAL(import_list(c, &span, v, 2), SCN_INVALID); /* out of order */
  v[1] = v[0];
  v[1].tick = 10;
  CU_ASSERT_EQUAL(import_list(c, &span, v, 2), SCN_INVALID); /* after the open tick */
  v[1] = v[0];
  v[1].kind = (scn_version_kind)7;
  CU_ASSERT_EQUAL(import_list(c, &span, v, 2), SCN_INVALID);
  v[1] = v[0];
  v[1].entity = SCN_ENTITY_NONE;
  CU_ASSERT_EQUAL(import_list(c, &span, v, 2), SCN_INVALID);
  /* a transform destroyed (not in c) without the matrices it had */
  memset(v, 0, sizeof v);
  v[0].tick = 6;
  v[0].entity = ent(s);
  v[0].kind = SCN_VERSION_STRUCT;
  v[0].exists = true;
  snprintf(v[0].name, sizeof v[0].name, "x");
  CU_ASSERT_EQUAL(import_list(c, &span, v, 1), SCN_INVALID);
  snprintf(v[0].name, sizeof v[0].name, "a/b"); /* not a name */
  CU_ASSERT_EQUAL(import_list(c, &span, v, 1), SCN_INVALID);
  x.next = 0;
  CU_ASSERT_EQUAL(scn_world_history_import(c, &span, failing_next, NULL), SCN_NOMEM);
  CU_ASSERT_EQUAL(scn_world_history(c), 5);
  CU_ASSERT_EQUAL(scn_world_history_window(c, &o, &n), SCN_NOT_FOUND);
  CU_ASSERT_EQUAL(scn_world_close_tick(c), 9); /* then it fills from the open tick on */
  CU_ASSERT_TRUE(window_is(c, 9, 9));

  /* the real thing: a fresh copy answers as w, and both go on alike */
  scn_world *d;
  OK(scn_world_create(s, "d", &d));
  scn_world_visit_transforms(w, copy_transform, d);
  OK(scn_world_continue_ticks(d, span.now));
  x.next = 0;
  OK(scn_world_history_import(d, &span, next_version, &x));
  CU_ASSERT_TRUE(window_is(d, 4, 8));
  scn_world_hold_ticks(w, false);
  scn_entity ents[] = {a, b};
  hprop *p = calloc(1, sizeof *p);
  CU_ASSERT_TRUE(same_past(p, w, d, ents, 2));
  CU_ASSERT_EQUAL(at(d, a, 8).world[12], 8);
  CU_ASSERT_STRING_EQUAL(at(d, b, 8).name, "b");
  for (int t = 0; t < 3; t++) {
    mat_t(m, (float)t * 10, 0, 0);
    OK(scn_transform_set_local(w, b, m));
    OK(scn_transform_set_local(d, b, m));
    CU_ASSERT_EQUAL(scn_world_close_tick(w), scn_world_close_tick(d));
  }
  CU_ASSERT_TRUE(window_is(d, 7, 11));
  CU_ASSERT_TRUE(same_past(p, w, d, ents, 2));
  CU_ASSERT_STRING_EQUAL(at(d, b, 9).name, "bb");
  CU_ASSERT_FALSE(p->failed);
  free(p);

  /* a window without history, and one where no tick can be named yet */
  scn_world *e, *f;
  OK(scn_world_create(s, "e", &e));
  free(x.v);
  memset(&x, 0, sizeof x);
  OK(scn_world_history_export(e, &span, keep_version, &x));
  CU_ASSERT_TRUE(span.window == 0 && span.now == 0 && span.oldest == 1 && x.len == 0);
  OK(scn_world_set_history(e, 3));
  OK(scn_world_history_export(e, &span, keep_version, &x));
  CU_ASSERT_TRUE(span.window == 3 && span.now == 0 && span.oldest == 1 && x.len == 0);
  OK(scn_world_create(s, "f", &f));
  OK(import_list(f, &span, NULL, 0));
  CU_ASSERT_EQUAL(scn_world_history(f), 3);
  span.window = 0;
  OK(import_list(f, &span, NULL, 0));
  CU_ASSERT_EQUAL(scn_world_history(f), 0);
  CU_ASSERT_EQUAL(import_list(f, &span, v, 1), SCN_INVALID); /* no window, no versions */
  free(x.v);
  scn_scene_free(s);
}

int t_register_core_history(void) {
  static const t_test tests[] = {
      {"every tick in the window equals the closed tick (oracle, fixed seeds)",
       test_oracle_fixed_seeds},
      {"the same with the seed in SCN_SEED (when set)", test_oracle_env_seed},
      {"window edges: oldest, newest, one past each, the open tick", test_window_edges},
      {"a world without history, history turned off and on", test_no_history},
      {"created and destroyed inside the window", test_created_destroyed_in_window},
      {"a rolled-back batch leaves no trace", test_rollback_leaves_no_trace},
      {"fractional ticks against cglm and a slerp in double", test_interpolation},
      {"relative at a tick", test_relative_at_tick},
      {"handing over: the tick count, a held clock, refused imports", test_hand_over_edges},
  };
  return T_ADD_SUITE("core_history", NULL, NULL, tests);
}

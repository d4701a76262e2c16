#include "interest_oracle.h"

#include "daemon_fixtures.h"
#include "interest_fixtures.h"
#include "rng.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KINDS 6 /* kinds of region, each watched in both forms */
#define FORMS 2 /* [0] json frames (and the whole-world subscription), [1] b64 frames */
#define NSUBS (KINDS * FORMS) /* subs[i] and subs[i + KINDS] start as twins, one per form */
#define POOL 5
#define BOX_XY 30
#define BOX_Z 4
#define FAR_XY 45 /* moves are clamped to this */
/* The world's box lies away from the origin, so no region meets its cells by being centered
 * on (0,0,0) */
#define AT_X 300
#define AT_Y (-200)
#define MAX_DEPTH 4
#define MAX_OPS 8

/* A subscriber: one subscription on the observer of its form. */
typedef struct psub {
  int form;
  near_spec near;
  double r2, rm2; /* R^2 and (R + M)^2, each an integer and a half */
  uint64_t root;
  uint64_t id;
  id_map held; /* what it holds, from its frames alone */
  bool started;
  long last_tick;
  id_map scope; /* the oracle's: in scope after the last step */
} psub;

typedef struct step_frames {
  frame_view whole, sub[NSUBS];
  bool has_whole, has[NSUBS];
} step_frames;

typedef struct prop {
  const oracle_run *run;
  rng r;
  char world[32];
  t_client ctl, obs[FORMS];
  uint64_t whole; /* the whole-world subscription (json): the reference of positions */
  long whole_tick;
  id_map pos;          /* world matrix of every transform, as of the last tick */
  id_map tree;         /* the model of the hierarchy: aux is the parent (0: a root) */
  id_map changed;      /* the transforms whose world matrix changed in this step's tick */
  uint64_t pool[POOL]; /* never destroyed: the centers and the subscriptions' roots */
  psub subs[NSUBS];
  int step;
  text last; /* what this step did, for a failure's report */
  bool failed;
  /* what the run exercised: entities that came in, left, and stayed only by the margin */
  unsigned entered, left, kept_by_margin;
} prop;

/* ---- the model of the hierarchy ----------------------------------------------------------- */

static uint64_t parent_of(const prop *p, uint64_t e) {
  const id_slot *s = idm_get(&p->tree, e);
  return s ? s->aux : 0;
}

/* e is a or lies under a. */
static bool under(const prop *p, uint64_t e, uint64_t a) {
  for (int guard = 0; e && guard < 64; guard++, e = parent_of(p, e))
    if (e == a)
      return true;
  return false;
}

static int depth_of(const prop *p, uint64_t e) {
  int d = 0;
  while ((e = parent_of(p, e)) && d < 64)
    d++;
  return d;
}

/* How many levels lie below e. */
static int height_of(const prop *p, uint64_t e) {
  int h = 0, base = depth_of(p, e);
  IDM_EACH(&p->tree, s) if (under(p, s->id, e)) {
    int d = depth_of(p, s->id) - base;
    h = d > h ? d : h;
  }
  return h;
}

static bool holds_pool(const prop *p, uint64_t e) {
  for (int i = 0; i < POOL; i++)
    if (under(p, p->pool[i], e))
      return true;
  return false;
}

static bool in_pool(const prop *p, uint64_t e) {
  for (int i = 0; i < POOL; i++)
    if (p->pool[i] == e)
      return true;
  return false;
}

static uint64_t random_entity(prop *p) {
  if (!p->tree.n)
    return 0;
  for (;;) {
    const id_slot *s = &p->tree.slots[rng_below(&p->r, (uint32_t)p->tree.cap)];
    if (s->id)
      return s->id;
  }
}

/* Removes e from the model: its children become roots, or with recursive its subtree goes. */
static void model_destroy(prop *p, uint64_t e, bool recursive) {
  uint64_t *doomed = calloc(p->tree.n + 1, sizeof *doomed);
  size_t n = 0;
  IDM_EACH(&p->tree, s) {
    if (recursive ? under(p, s->id, e) : s->id == e)
      doomed[n++] = s->id;
    else if (s->aux == e)
      s->aux = 0;
  }
  for (size_t i = 0; i < n; i++)
    idm_del(&p->tree, doomed[i]);
  free(doomed);
}

/* ---- random requests ---------------------------------------------------------------------- */

static long coord(prop *p, long half) {
  return (long)rng_below(&p->r, (uint32_t)(2 * half + 1)) - half;
}

static long clamp(long v, long lim) { return v < -lim ? -lim : v > lim ? lim : v; }

/* A transform spec of integers: a translation, sometimes after a quarter turn about z. */
static void add_spec(prop *p, text *t, bool root) {
  long x = root ? AT_X + coord(p, BOX_XY) : coord(p, 6);
  long y = root ? AT_Y + coord(p, BOX_XY) : coord(p, 6);
  long z = root ? coord(p, BOX_Z) : coord(p, 2);
  if (rng_chance(&p->r, 0.7)) {
    text_addf(t, "\"t\":[%ld,%ld,%ld]", x, y, z);
    return;
  }
  static const int cs[4][2] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
  const int *q = cs[rng_below(&p->r, 4)];
  text_addf(t, "\"matrix\":[%d,%d,0,0,%d,%d,0,0,0,0,1,0,%ld,%ld,%ld,1]", q[0], q[1], -q[1], q[0], x,
            y, z);
}

typedef struct batch_plan {
  text ops;
  int count;
  int create_op[MAX_OPS]; /* op index of each create, its parent, and whether a later op of
                             the batch destroyed it (with an ancestor, recursively) */
  uint64_t create_parent[MAX_OPS];
  bool create_gone[MAX_OPS];
  int creates;
} batch_plan;

static void op_begin(batch_plan *b, const char *cmd) {
  text_addf(&b->ops, "%s{\"cmd\":\"%s\"", b->count ? "," : "", cmd);
  b->count++;
}

/* One random op appended to the batch, the model updated as the daemon will be. */
static void random_op(prop *p, batch_plan *b) {
  int target = p->run->transforms;
  double create = p->tree.n < (size_t)target * 85 / 100    ? 0.25
                  : p->tree.n > (size_t)target * 115 / 100 ? 0.01
                                                           : 0.07;
  double destroy = p->tree.n > (size_t)target * 115 / 100 ? 0.2 : 0.07;
  double u = rng_unit(&p->r);
  uint64_t e = random_entity(p);
  const id_slot *at = idm_get(&p->pos, e);
  if (u < create) {
    uint64_t parent = rng_chance(&p->r, 0.5) ? random_entity(p) : 0;
    if (parent && depth_of(p, parent) + 1 > MAX_DEPTH)
      parent = 0;
    op_begin(b, "transform.create");
    if (parent)
      text_addf(&b->ops, ",\"parent\":%llu", (unsigned long long)parent);
    text_addf(&b->ops, ",");
    add_spec(p, &b->ops, !parent);
    text_addf(&b->ops, "}");
    b->create_op[b->creates] = b->count - 1;
    b->create_parent[b->creates++] = parent;
    return;
  }
  u -= create;
  if (u < destroy) {
    bool recursive = rng_chance(&p->r, 0.3) && height_of(p, e) <= 1;
    if (recursive ? holds_pool(p, e) : in_pool(p, e))
      return;
    op_begin(b, "transform.destroy");
    text_addf(&b->ops, ",\"entity\":%llu%s}", (unsigned long long)e,
              recursive ? ",\"recursive\":true" : "");
    /* what this batch made under e goes with it, or becomes a root */
    for (int i = 0; i < b->creates; i++) {
      uint64_t parent = b->create_parent[i];
      if (recursive && parent && under(p, parent, e))
        b->create_gone[i] = true;
      else if (!recursive && parent == e)
        b->create_parent[i] = 0;
    }
    model_destroy(p, e, recursive);
    return;
  }
  u = rng_unit(&p->r);
  const char *keep = rng_chance(&p->r, 0.5) ? "world" : "local";
  if (u < 0.12) {
    /* under a subscription's root now and then, so subtrees gain and lose members */
    uint64_t q = rng_chance(&p->r, 0.3) ? p->pool[rng_below(&p->r, POOL)] : random_entity(p);
    if (q == e || under(p, q, e) || depth_of(p, q) + 1 + height_of(p, e) > MAX_DEPTH)
      return;
    if (!parent_of(p, e) && rng_chance(&p->r, 0.7))
      keep = "world"; /* a root's local is far from the origin: keep it where it is */
    op_begin(b, "transform.link");
    text_addf(&b->ops, ",\"entity\":%llu,\"parent\":%llu,\"keep\":\"%s\"}", (unsigned long long)e,
              (unsigned long long)q, keep);
    idm_get(&p->tree, e)->aux = q;
  } else if (u < 0.2) {
    if (!parent_of(p, e))
      return;
    op_begin(b, "transform.unlink");
    text_addf(&b->ops, ",\"entity\":%llu,\"keep\":\"%s\"}", (unsigned long long)e, keep);
    idm_get(&p->tree, e)->aux = 0;
  } else if (u < 0.4) {
    op_begin(b, "transform.set_local");
    text_addf(&b->ops, ",\"entity\":%llu,", (unsigned long long)e);
    add_spec(p, &b->ops, !parent_of(p, e));
    text_addf(&b->ops, "}");
  } else if (at) {
    /* a small step from where it is (a far jump now and then): edges are crossed often */
    bool jump = rng_chance(&p->r, 0.05);
    long x =
        AT_X + (jump ? coord(p, BOX_XY) : clamp(lroundf(at->m[12]) - AT_X + coord(p, 2), FAR_XY));
    long y =
        AT_Y + (jump ? coord(p, BOX_XY) : clamp(lroundf(at->m[13]) - AT_Y + coord(p, 2), FAR_XY));
    long z = jump ? coord(p, BOX_Z) : clamp(lroundf(at->m[14]) + coord(p, 1), BOX_Z + 2);
    op_begin(b, "transform.set_world");
    text_addf(&b->ops, ",\"entity\":%llu,\"t\":[%ld,%ld,%ld]}", (unsigned long long)e, x, y, z);
  }
}

/* A random region: its center a point of integers or one of the pool, R^2 an integer and a
 * half, (R + M)^2 too (or M = 0). */
static void random_near(prop *p, psub *s, int center) {
  near_spec *n = &s->near;
  memset(n, 0, sizeof *n);
  n->on = true;
  if (center < 0)
    center = rng_chance(&p->r, 0.5) ? 0 : 1 + (int)rng_below(&p->r, POOL);
  if (center == 0 && rng_chance(&p->r, 0.1)) {
    /* far from everything: its box meets no occupied cell */
    n->point[0] = AT_X + (rng_chance(&p->r, 0.5) ? 400 : -400);
    n->point[1] = AT_Y + (double)coord(p, 400);
    n->point[2] = 0;
  } else if (center == 0) {
    n->point[0] = AT_X + (double)coord(p, BOX_XY);
    n->point[1] = AT_Y + (double)coord(p, BOX_XY);
    n->point[2] = (double)coord(p, BOX_Z);
  } else {
    n->entity = p->pool[center - 1];
  }
  long r2 = 20 + (long)rng_below(&p->r, 280);
  s->r2 = (double)r2 + 0.5;
  s->rm2 = s->r2;
  n->radius = sqrt(s->r2);
  if (rng_chance(&p->r, 0.65)) {
    s->rm2 = (double)(r2 + 1 + (long)rng_below(&p->r, 150)) + 0.5;
    n->margin = sqrt(s->rm2) - n->radius;
  }
}

/* ---- frames and the oracle ---------------------------------------------------------------- */

static void fail(prop *p, const char *what) {
  if (!p->failed)
    fprintf(stderr,
            "  interest oracle%s%s: seed %llu (SCENED_SEED=%llu replays it), step %d: %s\n"
            "  the step: %.3000s\n",
            p->run->tag ? " " : "", p->run->tag ? p->run->tag : "",
            (unsigned long long)p->run->seed, (unsigned long long)p->run->seed, p->step, what,
            text_str(&p->last));
  else
    fprintf(stderr, "  also: %s\n", what);
  CU_FAIL(what);
  p->failed = true;
}

static void step_frames_free(step_frames *sf) {
  frame_view_free(&sf->whole);
  for (int i = 0; i < NSUBS; i++)
    frame_view_free(&sf->sub[i]);
}

/* Takes every event kept on the observers into sf. */
static void collect(prop *p, step_frames *sf) {
  memset(sf, 0, sizeof *sf);
  for (int k = 0; k < FORMS; k++) {
    t_client *c = &p->obs[k];
    while (cJSON_GetArraySize(c->events) > 0) {
      cJSON *ev = cJSON_DetachItemFromArray(c->events, 0);
      frame_view v;
      if (!t_resp_str_is(ev, "event", "frame")) {
        t_report("an event that is not a frame", ev);
        fail(p, "an event that is not a frame");
      } else if (frame_read(ev, k == 1, &v)) {
        frame_view *slot = NULL;
        bool *has = NULL;
        if (k == 0 && v.sub == p->whole)
          slot = &sf->whole, has = &sf->has_whole;
        for (int i = 0; i < NSUBS; i++)
          if (p->subs[i].form == k && v.sub == p->subs[i].id)
            slot = &sf->sub[i], has = &sf->has[i];
        if (!slot) {
          t_report("a frame of no subscription here", ev);
          fail(p, "a frame of no subscription here");
          frame_view_free(&v);
        } else if (*has) {
          t_report("a second frame in one step", ev);
          fail(p, "a second frame in one step (one tick of changes)");
          frame_view_free(&v);
        } else {
          *slot = v;
          *has = true;
        }
      } else {
        fail(p, "a malformed frame");
      }
      cJSON_Delete(ev);
    }
  }
}

/* The whole-world frame moves the positions; the model must agree with what exists. */
static void apply_whole(prop *p, step_frames *sf) {
  idm_clear(&p->changed);
  if (!sf->has_whole)
    return;
  frame_view *w = &sf->whole;
  if (w->tick <= p->whole_tick)
    fail(p, "the whole-world frame's tick did not increase");
  if (w->full && p->whole_tick)
    fail(p, "the whole-world subscription got a full frame mid-run (it lagged)");
  p->whole_tick = w->tick;
  int stray = 0;
  frame_apply(w, &p->pos, &stray);
  for (int i = 0; i < w->n; i++)
    idm_put(&p->changed, w->ids[i]);
  if (stray)
    fail(p, "the whole-world frame removed transforms it never sent");
}

static bool model_agrees(prop *p) {
  bool same = p->pos.n == p->tree.n;
  IDM_EACH(&p->pos, s) same &= idm_get(&p->tree, s->id) != NULL;
  if (!same) {
    char what[160];
    snprintf(what, sizeof what,
             "the test's model of the world (%zu transforms) is not the daemon's (%zu)", p->tree.n,
             p->pos.n);
    fail(p, what);
  }
  return same;
}

static double dist2(const float m[16], const double c[3]) {
  double dx = m[12] - c[0], dy = m[13] - c[1], dz = m[14] - c[2];
  return dx * dx + dy * dy + dz * dz;
}

/* Every distance is an integer's square root and every threshold one half away from one. */
static void check_clear_of(prop *p, double d2, double threshold) {
  if (fabs(d2 - threshold) < 0.25)
    fail(p, "a distance lies near a threshold: the world is not made of integers");
}

static void report_entity(prop *p, const psub *s, uint64_t e, const double c[3], const char *why) {
  const id_slot *at = idm_get(&p->pos, e);
  char where[160] = "no region";
  if (s->near.on)
    snprintf(where, sizeof where, "distance %.6g from (%g,%g,%g) (R %.6g, R+M %.6g)",
             at ? sqrt(dist2(at->m, c)) : -1, c[0], c[1], c[2], sqrt(s->r2), sqrt(s->rm2));
  fprintf(stderr, "    entity %llu %s: %s, position (%g,%g,%g), parent %llu, was in scope %d\n",
          (unsigned long long)e, why, where, at ? at->m[12] : 0, at ? at->m[13] : 0,
          at ? at->m[14] : 0, (unsigned long long)parent_of(p, e), idm_get(&s->scope, e) != NULL);
  if (s->root && at) {
    cJSON *r = CALL(&p->ctl, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}",
                    p->world, (unsigned long long)e);
    fprintf(stderr, "      under root %llu in the model: %d; the daemon's parent: %g\n",
            (unsigned long long)s->root, under(p, e, s->root), t_resp_num(r, "parent"));
    cJSON_Delete(r);
  }
}

/* Compares one form's frame (f, NULL when none came) with the oracle's next scope; want_tick
 * (0: any) is the tick of the step's changes. */
static void check_frame_of(prop *p, int i, const frame_view *f, const id_map *next,
                           const double c[3], long want_tick) {
  psub *s = &p->subs[i];
  id_map *held = &s->held;
  bool first = !s->started;
  int bad = 0;
  char what[200];
  snprintf(what, sizeof what, "subscriber %d (%s frames, sub %llu) differs from the oracle", i,
           s->form ? "b64" : "json", (unsigned long long)s->id);
  if (first && !f) {
    fprintf(stderr, "    no full frame came\n");
    bad++;
  }
  if (f && f->full != first) {
    fprintf(stderr, "    full is %d, expected %d\n", f->full, first);
    bad++;
  }
  if (f && f->tick <= s->last_tick) {
    fprintf(stderr, "    tick %ld after %ld\n", f->tick, s->last_tick);
    bad++;
  }
  if (f && !f->full && !f->n && !f->nremoved) {
    fprintf(stderr, "    an empty frame: a tick in which nothing changed sends nothing\n");
    bad++;
  }
  if (f && want_tick && f->tick != want_tick) {
    fprintf(stderr, "    tick %ld, but the world's changes were at tick %ld\n", f->tick, want_tick);
    bad++;
  }
  /* what left: exactly the held ones out of scope */
  if (!first) {
    IDM_EACH(held, h) {
      bool gone = !idm_get(next, h->id), said = f && frame_removes(f, h->id);
      if (gone != said) {
        report_entity(p, s, h->id, c,
                      gone ? "left the scope but is not in removed" : "is in scope but in removed");
        bad++;
      }
    }
    for (int j = 0; f && j < f->nremoved; j++)
      if (!idm_get(held, f->removed[j])) {
        report_entity(p, s, f->removed[j], c, "is in removed but was never held");
        bad++;
      }
  }
  /* what came in or changed: in set, with the matrix of this tick; nothing else */
  IDM_EACH(next, n) {
    bool due = first || !idm_get(held, n->id) || idm_get(&p->changed, n->id);
    const float *m = f ? frame_matrix(f, n->id) : NULL;
    if (due && !m) {
      report_entity(p, s, n->id, c,
                    idm_get(held, n->id) ? "changed in scope but is not in set"
                                         : "came into scope but is not in set");
      bad++;
    } else if (!due && m) {
      report_entity(p, s, n->id, c, "is in set though it neither came in nor changed");
      bad++;
    } else if (m && !mat_same(m, idm_get(&p->pos, n->id)->m)) {
      report_entity(p, s, n->id, c, "is in set with another matrix than the world's");
      bad++;
    }
  }
  for (int j = 0; f && j < f->n; j++)
    if (!idm_get(next, f->ids[j])) {
      report_entity(p, s, f->ids[j], c, "is in set but out of scope");
      bad++;
    }
  if (f) {
    s->last_tick = f->tick;
    s->started = true;
    frame_apply(f, held, NULL);
  }
  if (bad) {
    char near[1024];
    near_json(&s->near, near, sizeof near);
    fprintf(stderr, "    subscriber %d: near %s, root %llu; %d differences\n", i, near,
            (unsigned long long)s->root, bad);
    fail(p, what);
  }
}

static bool center_of(prop *p, const psub *s, double c[3]) {
  if (!s->near.entity) {
    memcpy(c, s->near.point, sizeof s->near.point);
    return true;
  }
  const id_slot *at = idm_get(&p->pos, s->near.entity);
  if (!at) {
    fail(p, "a center entity is missing from the world");
    return false;
  }
  c[0] = at->m[12], c[1] = at->m[13], c[2] = at->m[14];
  return true;
}

/* The oracle's scope of subscriber i now, from the last one (hysteresis), then each form's
 * frame checked against it. */
static void check_sub(prop *p, int i, step_frames *sf, long want_tick) {
  psub *s = &p->subs[i];
  double c[3] = {0, 0, 0};
  if (s->near.on && !center_of(p, s, c))
    return;
  id_map next = {0};
  IDM_EACH(&p->pos, e) {
    if (s->root && !under(p, e->id, s->root))
      continue;
    bool in = true, was = idm_get(&s->scope, e->id) != NULL;
    if (s->near.on) {
      double d2 = dist2(e->m, c);
      check_clear_of(p, d2, s->r2);
      check_clear_of(p, d2, s->rm2);
      in = d2 <= s->r2 || (was && d2 <= s->rm2);
      p->kept_by_margin += in && d2 > s->r2;
    }
    if (in)
      idm_put(&next, e->id);
    p->entered += in && !was;
  }
  IDM_EACH(&s->scope, out) p->left += !idm_get(&next, out->id);
  check_frame_of(p, i, sf->has[i] ? &sf->sub[i] : NULL, &next, c, want_tick);
  idm_free(&s->scope);
  s->scope = next;
}

/* After the step's commands were answered: waits for their frames, then checks them all. */
static void settle(prop *p, bool changes) {
  t_client *conns[FORMS] = {&p->obs[0], &p->obs[1]};
  interest_sync(&p->ctl, p->world, p->pool[1], conns, FORMS);
  step_frames sf;
  collect(p, &sf);
  if (!p->failed) {
    apply_whole(p, &sf);
    if (!changes && sf.has_whole)
      fail(p, "a whole-world frame for a step that changed no matrix");
  }
  if (!p->failed && model_agrees(p))
    for (int i = 0; i < NSUBS && !p->failed; i++)
      check_sub(p, i, &sf, changes && sf.has_whole ? sf.whole.tick : 0);
  step_frames_free(&sf);
}

/* ---- steps -------------------------------------------------------------------------------- */

static void step_batch(prop *p) {
  batch_plan b = {0};
  int want = 1 + (int)rng_below(&p->r, MAX_OPS);
  for (int tries = 0; b.count < want && tries < 4 * MAX_OPS; tries++)
    random_op(p, &b);
  if (!b.count) {
    text_free(&b.ops);
    return;
  }
  text_addf(&p->last, "{\"cmd\":\"batch\",\"world\":\"%s\",\"ops\":[%s]}", p->world,
            text_str(&b.ops));
  cJSON *r = CALL(&p->ctl, "%s", text_str(&p->last));
  const cJSON *results = cJSON_GetObjectItemCaseSensitive(r, "results");
  if (!t_resp_ok(r) || cJSON_GetArraySize(results) != b.count) {
    t_report("the batch's answer", r);
    fail(p, "a batch the model expected to work failed");
  } else {
    for (int i = 0; i < b.creates; i++) {
      uint64_t e = t_resp_id(cJSON_GetArrayItem(results, b.create_op[i]), "entity");
      if (!b.create_gone[i])
        idm_put(&p->tree, e)->aux = b.create_parent[i];
    }
  }
  cJSON_Delete(r);
  text_free(&b.ops);
  if (!p->failed)
    settle(p, true);
}

static void step_entity_destroy(prop *p) {
  uint64_t e = random_entity(p);
  if (in_pool(p, e))
    return;
  text_addf(&p->last, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)e);
  OKD(&p->ctl, "%s", text_str(&p->last));
  model_destroy(p, e, false);
  settle(p, true);
}

/* A new region for a pair of twins (the same for both, so they share it again), or for one
 * of them alone (a region shared until now is then split). */
static void step_update(prop *p) {
  int kind = (int)rng_below(&p->r, KINDS);
  psub *s = &p->subs[kind + (rng_chance(&p->r, 0.5) ? KINDS : 0)];
  psub *twin = &p->subs[(s - p->subs + KINDS) % NSUBS];
  bool both = rng_chance(&p->r, 0.7);
  /* removing a region whose box met no occupied cell is an edge of its own: often tried */
  bool far = s->near.on && !s->near.entity && fabs(s->near.point[0] - AT_X) >= 400;
  if (s->near.on && rng_chance(&p->r, far ? 0.5 : 0.15))
    s->near.on = false;
  else
    random_near(p, s, -1);
  if (both) {
    twin->near = s->near;
    twin->r2 = s->r2, twin->rm2 = s->rm2;
  }
  char near[1024];
  near_json(&s->near, near, sizeof near);
  text_addf(&p->last, "subscribe.update of subscriber%s %d%s to near %s", both ? "s" : "",
            (int)(s - p->subs), both ? " and its twin" : "", near);
  update_near(&p->obs[s->form], s->id, &s->near);
  if (both)
    update_near(&p->obs[twin->form], twin->id, &twin->near);
  settle(p, false);
}

/* ---- the world ---------------------------------------------------------------------------- */

/* Creates count transforms (parent: 0 roots, else under random ones of the first ones made, or
 * of pool[1] and pool[2], which get subtrees of their own). */
static void build(prop *p, int count, bool roots) {
  while (count > 0 && !p->failed) {
    int n = count < 50 ? count : 50;
    text ops = {0};
    uint64_t parents[50];
    for (int i = 0; i < n; i++) {
      uint64_t parent = 0;
      if (!roots) {
        double u = rng_unit(&p->r);
        parent = u < 0.15 ? p->pool[2] : u < 0.3 ? p->pool[3] : random_entity(p);
        if (depth_of(p, parent) + 1 > 3)
          parent = p->pool[2];
      }
      parents[i] = parent;
      text_addf(&ops, "%s{\"cmd\":\"transform.create\"", i ? "," : "");
      if (parent)
        text_addf(&ops, ",\"parent\":%llu", (unsigned long long)parent);
      text_addf(&ops, ",");
      add_spec(p, &ops, !parent);
      text_addf(&ops, "}");
    }
    cJSON *r =
        OK(&p->ctl, "{\"cmd\":\"batch\",\"world\":\"%s\",\"ops\":[%s]}", p->world, text_str(&ops));
    text_free(&ops);
    const cJSON *results = cJSON_GetObjectItemCaseSensitive(r, "results");
    if (cJSON_GetArraySize(results) != n)
      fail(p, "building the world failed");
    for (int i = 0; i < n && !p->failed; i++) {
      uint64_t e = t_resp_id(cJSON_GetArrayItem(results, i), "entity");
      idm_put(&p->tree, e)->aux = parents[i];
      if (roots && i < 4 && !p->pool[i + 1] && p->tree.n > 0)
        p->pool[i + 1] = e; /* pool[1..4]: roots; pool[0] is chosen among children */
    }
    cJSON_Delete(r);
    count -= n;
  }
}

static bool setup(prop *p) {
  snprintf(p->world, sizeof p->world, "oracle%llu", (unsigned long long)(p->run->seed % 100000));
  OKD(&p->ctl, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", p->world);
  int roots = p->run->transforms * 2 / 5;
  build(p, roots, true);
  build(p, p->run->transforms - roots, false);
  /* pool[0]: a child of a root, so its region moves with its parent */
  IDM_EACH(&p->tree, s)
  if (!p->pool[0] && s->aux && !parent_of(p, s->aux) && !in_pool(p, s->id))
    p->pool[0] = s->id;
  for (int i = 0; i < POOL; i++)
    if (!p->pool[i])
      fail(p, "the world has no entity for the pool");
  if (p->failed)
    return false;
  text_addf(&p->last, "subscribe to the whole world, and the near subscribers");
  p->whole = subscribe_near(&p->obs[0], p->world, NULL, 0, 0);
  /* the whole world first: its full frame gives every position */
  t_client *conns[FORMS] = {&p->obs[0], &p->obs[1]};
  interest_sync(&p->ctl, p->world, p->pool[1], conns, FORMS);
  step_frames sf;
  collect(p, &sf);
  if (!p->failed && (!sf.has_whole || !sf.whole.full))
    fail(p, "no full frame for the whole-world subscription");
  if (!p->failed)
    apply_whole(p, &sf);
  step_frames_free(&sf);
  if (p->failed || !model_agrees(p))
    return false;
  /* each kind of region: points and followed entities, with and without margin and root */
  static const struct {
    int center; /* 0: a point; else pool[center - 1] */
    bool margin;
    int root; /* -1: none; else pool[root] */
  } kinds[KINDS] = {{0, false, -1}, {0, true, -1}, {1, true, -1},
                    {2, true, 2},   {0, true, 3},  {5, false, -1}};
  for (int i = 0; i < KINDS; i++) {
    psub *s = &p->subs[i];
    random_near(p, s, kinds[i].center);
    if (!kinds[i].margin) {
      s->near.margin = 0;
      s->rm2 = s->r2;
    }
    s->root = kinds[i].root >= 0 ? p->pool[kinds[i].root] : 0;
    p->subs[i + KINDS] = *s;
    for (int k = 0; k < FORMS; k++) {
      psub *t = &p->subs[i + k * KINDS];
      t->form = k;
      t->id = subscribe_near(&p->obs[k], p->world, &t->near, t->root, 0);
      if (!t->id)
        fail(p, "a near subscription was refused");
    }
  }
  if (!p->failed)
    settle(p, false);
  return !p->failed;
}

bool oracle_run_seed(int port, const oracle_run *run) {
  prop *p = calloc(1, sizeof *p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  p->run = run;
  p->r.state = run->seed;
  fprintf(stderr, "  interest oracle%s%s: seed %llu (SCENED_SEED=%llu replays it), %d steps\n",
          run->tag ? " " : "", run->tag ? run->tag : "", (unsigned long long)run->seed,
          (unsigned long long)run->seed, run->steps);
  CONNECT_FATAL(&p->ctl, port);
  for (int k = 0; k < FORMS; k++) {
    CONNECT_FATAL(&p->obs[k], port);
    t_client_keep_events(&p->obs[k]);
  }
  hello_b64(&p->obs[1]);
  unsigned kinds[3] = {0};
  long started = t_now_ms();
  if (setup(p))
    for (p->step = 1; p->step <= run->steps && !p->failed; p->step++) {
      text_free(&p->last);
      double u = rng_unit(&p->r);
      int kind = u < 0.82 ? 0 : u < 0.88 ? 1 : 2;
      kinds[kind]++;
      if (kind == 0)
        step_batch(p);
      else if (kind == 1)
        step_entity_destroy(p);
      else
        step_update(p);
    }
  if (!p->failed) {
    size_t in_scope = 0;
    for (int i = 0; i < NSUBS; i++)
      in_scope += p->subs[i].scope.n;
    fprintf(stderr,
            "    %d steps (%u batches, %u entity.destroy, %u subscribe.update); %zu transforms, "
            "%zu in the subscribers' scopes at the end; %u came in, %u left, %u times kept by "
            "the margin alone; %.1f s\n",
            run->steps, kinds[0], kinds[1], kinds[2], p->pos.n, in_scope, p->entered, p->left,
            p->kept_by_margin, (t_now_ms() - started) / 1000.0);
    /* a long run that never crossed an edge, or never leaned on the margin, proved little */
    if (run->steps >= 200)
      CU_ASSERT_TRUE(p->entered > 0 && p->left > 0 && p->kept_by_margin > 0);
    OKD(&p->ctl, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", p->world);
  }
  bool good = !p->failed;
  for (int k = 0; k < FORMS; k++)
    t_client_close(&p->obs[k]);
  t_client_close(&p->ctl);
  for (int i = 0; i < NSUBS; i++) {
    idm_free(&p->subs[i].scope);
    idm_free(&p->subs[i].held);
  }
  idm_free(&p->pos);
  idm_free(&p->tree);
  idm_free(&p->changed);
  text_free(&p->last);
  free(p);
  return good;
}

/* ---- seeds -------------------------------------------------------------------------------- */

int oracle_seeds(uint64_t *seeds, int max, int count) {
  const char *one = getenv("SCENED_SEED");
  if (one && *one) {
    seeds[0] = strtoull(one, NULL, 10);
    return 1;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  rng r = {(uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()};
  int n = count < max ? count : max;
  for (int i = 0; i < n; i++)
    seeds[i] = rng_next(&r) >> 16; /* short enough to type */
  return n;
}

int oracle_steps(int fallback) {
  const char *s = getenv("SCENED_STEPS");
  char *end;
  long v = s && *s ? strtol(s, &end, 10) : 0;
  return s && *s && *end == '\0' && v > 0 && v < 1000000 ? (int)v : fallback;
}

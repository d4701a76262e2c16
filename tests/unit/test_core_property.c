/* Randomized property test of the transform core against a deliberately naive reference model.
 *
 * The reference keeps each world as plain arrays indexed by entity slot (parent slot, a sequence
 * number that orders siblings, name, local matrix) and recomputes world matrices from scratch in
 * double. Random operations go to both; after every step the whole core state is compared with
 * the reference: existence, parents, ordered children, root order (through the depth-first
 * visit), names, local matrices bit for bit, world matrices within a float rounding bound, and
 * every error code.
 *
 * Local matrices stay bit-exact in the reference: where the core computes a local through an
 * inverse (keep-world links, set_world, children of a destroyed parent), the test reads the
 * core's result, checks that it gives the intended world matrix, and takes its bits.
 *
 * Seeds: a fixed list, plus SCN_SEED from the environment when set; SCN_STEPS changes the number
 * of steps per seed. A failure prints the seed and the step.
 *
 * The reference model is core_model.c; the deep chains (core_chain.c), which the test with
 * SCN_SEED runs too, have their own suite (core_property_flush). */
#include "core_chain.h"
#include "core_model.h"
#include "rng.h"
#include "scn_core.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID(e) ((unsigned long long)(e))

/* Sibling lists of one world built in one pass: nodes sorted by seq, appended to their list. */
typedef struct tree_view {
  int first[MAX_SLOTS + 1], last[MAX_SLOTS + 1], next[MAX_SLOTS];
} tree_view;

typedef struct seq_slot {
  uint64_t seq;
  int slot;
} seq_slot;

static int by_seq(const void *a, const void *b) {
  uint64_t x = ((const seq_slot *)a)->seq, y = ((const seq_slot *)b)->seq;
  return (x > y) - (x < y);
}

static void build_view(const model *m, int w, tree_view *v) {
  seq_slot all[MAX_SLOTS];
  int n = 0;
  for (int s = 0; s < MAX_SLOTS; s++)
    if (m->node[w][s].has)
      all[n++] = (seq_slot){m->node[w][s].seq, s};
  qsort(all, (size_t)n, sizeof all[0], by_seq);
  for (int l = 0; l <= MAX_SLOTS; l++)
    v->first[l] = v->last[l] = NONE_SLOT;
  for (int k = 0; k < n; k++) {
    int s = all[k].slot, parent = m->node[w][s].parent;
    int list = parent == NONE_SLOT ? ROOT_LIST : parent;
    v->next[s] = NONE_SLOT;
    if (v->last[list] == NONE_SLOT)
      v->first[list] = s;
    else
      v->next[v->last[list]] = s;
    v->last[list] = s;
  }
}

static int preorder_from(const tree_view *v, int s, int *out, int n) {
  out[n++] = s;
  for (int c = v->first[s]; c != NONE_SLOT; c = v->next[c])
    n = preorder_from(v, c, out, n);
  return n;
}

/* Depth-first pre-order of top's subtree; NONE_SLOT: the whole world, roots in order. */
static int preorder(const tree_view *v, int top, int *out) {
  if (top != NONE_SLOT)
    return preorder_from(v, top, out, 0);
  int n = 0;
  for (int r = v->first[ROOT_LIST]; r != NONE_SLOT; r = v->next[r])
    n = preorder_from(v, r, out, n);
  return n;
}

/* ---- the test state -------------------------------------------------------------------------- */

/* Children of a transform about to be destroyed, with their world matrices before. */
typedef struct orphans {
  int n;
  int slot[MAX_SLOTS];
  world_ref before[MAX_SLOTS];
} orphans;

typedef struct visit_log {
  int n;
  bool overflow;
  scn_entity id[MAX_SLOTS];
  float world[MAX_SLOTS][16];
} visit_log;

typedef struct prop {
  unsigned seed;
  long step;
  char op[320]; /* the operation under way, for failure messages */
  bool failed;

  rng r;
  scn_scene *scene;
  scn_world *world[NWORLDS];
  bool in_batch;

  model m;
  model saved;      /* the reference before the current batch */
  scn_entity *dead; /* every destroyed id: none may ever be valid again */
  size_t ndead, dead_cap;

  /* scratch */
  int pick[MAX_SLOTS], order[MAX_SLOTS];
  tree_view view;
  world_ref ref[MAX_SLOTS];
  orphans orphans[NWORLDS];
  visit_log visits;
  float core_world[NWORLDS][MAX_SLOTS][16]; /* as read by the last check */
  float saved_world[NWORLDS][MAX_SLOTS][16];
  const char *matrix_kind;

  long skipped; /* operations the reference could not predict */
} prop;

static void describe(prop *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->op, sizeof p->op, fmt, ap);
  va_end(ap);
}

/* Records the first failure with the seed and step that reproduce it; always false. */
static bool fail(prop *p, const char *fmt, ...) {
  if (!p->failed) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "core_property: seed %u, step %ld, in %s%s:\n  \n", p->seed, p->step, p->op,
            p->in_batch ? " (inside a batch)" : "");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "  reproduce with SCN_SEED=%u\n", p->seed);
    va_end(ap);
  }
  p->failed = true;
  return false;
}

#define EXPECT(p, cond, ...) ((cond) ? true : fail((p), __VA_ARGS__))

static bool expect_rc(prop *p, int got, int want) {
  return EXPECT(p, got == want, "returned %s, the reference expects %s", scn_err_name(got),
                scn_err_name(want));
}

static bool local_exact(prop *p, scn_entity e, const float got[16], const float want[16]) {
  for (int i = 0; i < 16; i++)
    if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
      return fail(p, "local matrix of %llu, element %d: %.9g, expected bit-exact %.9g", ID(e), i,
                  got[i], want[i]);
  return true;
}

static bool world_matches(prop *p, scn_entity e, const float got[16], const world_ref *ref) {
  for (int i = 0; i < 16; i++)
    if (!(fabs(got[i] - ref->m[i]) <= world_tolerance(ref, i)))
      return fail(p,
                  "world matrix of %llu, element %d: %.9g, reference %.9g (tolerance %.3g, "
                  "depth %d)",
                  ID(e), i, got[i], ref->m[i], world_tolerance(ref, i), ref->depth);
  return true;
}

static bool name_matches(prop *p, scn_entity e, const char *got, const char *want) {
  return EXPECT(p, strcmp(got ? got : "", want) == 0 && (!got || got[0]),
                "name of %llu is \"%s\", expected \"%s\"", ID(e), got ? got : "(none)", want);
}

static void remember_dead(prop *p, scn_entity e) {
  if (p->ndead == p->dead_cap) {
    size_t cap = p->dead_cap ? p->dead_cap * 2 : 256;
    scn_entity *d = realloc(p->dead, cap * sizeof *d);
    if (!d) {
      fail(p, "out of memory");
      return;
    }
    p->dead = d;
    p->dead_cap = cap;
  }
  p->dead[p->ndead++] = e;
}

static bool was_destroyed(const prop *p, scn_entity e) {
  for (size_t k = 0; k < p->ndead; k++)
    if (p->dead[k] == e)
      return true;
  return false;
}

/* ---- picking arguments ----------------------------------------------------------------------- */

typedef bool (*slot_filter)(const model *m, int w, int s);

static bool is_node(const model *m, int w, int s) { return m->node[w][s].has; }
static bool is_child(const model *m, int w, int s) {
  return m->node[w][s].has && m->node[w][s].parent != NONE_SLOT;
}
static bool is_named(const model *m, int w, int s) {
  return m->node[w][s].has && m->node[w][s].name[0];
}
static bool lacks_node(const model *m, int w, int s) { return !m->node[w][s].has; }
static bool only_elsewhere(const model *m, int w, int s) {
  return !m->node[w][s].has && m->node[(w + 1) % NWORLDS][s].has;
}
static bool in_every_world(const model *m, int w, int s) {
  (void)w;
  for (int k = 0; k < NWORLDS; k++)
    if (!m->node[k][s].has)
      return false;
  return true;
}
static bool any_entity(const model *m, int w, int s) {
  (void)m, (void)w, (void)s;
  return true;
}
static bool without_transform(const model *m, int w, int s) {
  (void)w;
  for (int k = 0; k < NWORLDS; k++)
    if (m->node[k][s].has)
      return false;
  return true;
}
static bool shallow_node(const model *m, int w, int s) {
  return m->node[w][s].has && depth_of(m, w, s) < MAX_DEPTH;
}
/* A node under a parent whose world matrix has a zero column: set_world must be SINGULAR. */
static bool under_singular(const model *m, int w, int s) {
  if (!is_child(m, w, s))
    return false;
  world_ref ref;
  model_world(m, w, m->node[w][s].parent, &ref);
  return has_zero_column(ref.m);
}

/* Past this many alive entities, entity_destroy mostly picks those without transforms. */
static bool many_entities(const model *m) { return m->alive > 200; }

/* A random alive entity's slot accepted by keep; NONE_SLOT if none. */
static int random_slot(prop *p, int w, slot_filter keep) {
  int n = 0;
  for (int s = 0; s < MAX_SLOTS; s++)
    if (p->m.id[s] && keep(&p->m, w, s))
      p->pick[n++] = s;
  return n ? p->pick[rng_below(&p->r, (uint32_t)n)] : NONE_SLOT;
}

static int node_count(const model *m, int w) {
  int n = 0;
  for (int s = 0; s < MAX_SLOTS; s++)
    n += m->node[w][s].has;
  return n;
}

static int random_descendant(prop *p, int w, int s) {
  int n = 0;
  for (int t = 0; t < MAX_SLOTS; t++)
    if (t != s && p->m.node[w][t].has && is_ancestor_or_self(&p->m, w, s, t))
      p->pick[n++] = t;
  return n ? p->pick[rng_below(&p->r, (uint32_t)n)] : NONE_SLOT;
}

/* An id with no transform anywhere: mostly destroyed ones, some never issued or out of range.
 * The reference decides what it means (an id like gen 1 | slot 1 may well be alive). */
static scn_entity pick_stale(prop *p) {
  static const scn_entity bogus[] = {SCN_ENTITY_MAX, SCN_ENTITY_MAX + 1, UINT64_MAX,
                                     (UINT64_C(1) << 32) | 1, UINT64_C(0x7fffffff)};
  if (p->ndead && rng_chance(&p->r, 0.8))
    return p->dead[rng_below(&p->r, (uint32_t)p->ndead)];
  return bogus[rng_below(&p->r, sizeof bogus / sizeof bogus[0])];
}

/* Mostly an existing transform; sometimes an entity without one here, or a stale id. */
static scn_entity pick_target(prop *p, int w) {
  unsigned u = rng_below(&p->r, 100);
  int s = NONE_SLOT;
  if (u < 90)
    s = random_slot(p, w, is_node);
  else if (u < 95)
    s = random_slot(p, w, lacks_node);
  return s != NONE_SLOT ? p->m.id[s] : pick_stale(p);
}

#define LONGEST_NAME "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" /* 64 */
static const char *const NAME_POOL[] = {LONGEST_NAME,  "a",    "b",   "c", "d",
                                        "wheel",       "body", "x y", "-", "\xc3\xa9t\xc3\xa9",
                                        "\xe5\x90\x8d"};
static const char *const BAD_NAMES[] = {"", "a/b", "tab\tname", LONGEST_NAME "!"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *pick_name(prop *p, double none) {
  if (rng_chance(&p->r, none))
    return NULL;
  if (rng_chance(&p->r, 0.06))
    return BAD_NAMES[rng_below(&p->r, COUNT(BAD_NAMES))];
  return NAME_POOL[rng_below(&p->r, COUNT(NAME_POOL))];
}

static void compose(prop *p, const float t[3], const float q[4], const float s[3], float out[16]) {
  int rc = scn_compose_trs(t, q, s, out);
  if (rc != SCN_OK) {
    fail(p, "scn_compose_trs rejected a valid input: %s", scn_err_name(rc));
    memcpy(out, IDENTITY, sizeof IDENTITY);
  }
}

/* Mostly TRS, sometimes raw affine or projective matrices, singular ones (a zero scale, the
 * zero matrix) and, when allowed, a non-finite one. Sets p->matrix_kind. */
static void random_matrix(prop *p, float out[16], bool allow_non_finite) {
  rng *r = &p->r;
  unsigned u = rng_below(r, 100);
  float t[3], q[4], s[3];
  for (int k = 0; k < 3; k++)
    t[k] = rng_float(r, -5, 5);
  rng_quat(r, q);
  if (rng_chance(r, 0.5))
    s[0] = s[1] = s[2] = rng_float(r, 0.5, 2);
  else
    for (int k = 0; k < 3; k++)
      s[k] = rng_float(r, 0.5, 2);
  if (u < 76) {
    p->matrix_kind = "trs";
    compose(p, t, q, s, out);
  } else if (u < 84) {
    p->matrix_kind = "raw affine";
    for (int c = 0; c < 3; c++) {
      for (int row = 0; row < 3; row++)
        out[c * 4 + row] = rng_float(r, -1.5, 1.5);
      out[c * 4 + 3] = 0;
      out[12 + c] = t[c];
    }
    out[15] = 1;
  } else if (u < 90) {
    p->matrix_kind = "zero scale";
    s[rng_below(r, 3)] = 0;
    compose(p, t, q, s, out);
  } else if (u < 92) {
    p->matrix_kind = "zero";
    memset(out, 0, sizeof(float) * 16);
  } else if (u < 94) {
    p->matrix_kind = "projective";
    for (int i = 0; i < 16; i++)
      out[i] = rng_float(r, -1, 1);
    out[15] = rng_float(r, 1, 2);
  } else if (u < 98 || !allow_non_finite) {
    p->matrix_kind = "identity";
    memcpy(out, IDENTITY, sizeof IDENTITY);
  } else {
    p->matrix_kind = "non-finite";
    compose(p, t, q, s, out);
    out[rng_below(r, 16)] = rng_chance(r, 0.5) ? NAN : INFINITY;
  }
}

/* ---- operations: the core and the reference side by side ------------------------------------- */

static scn_world *core_world(prop *p, int w) { return p->world[w]; }

/* Creates count entities; the ids must be fresh: never alive before, never destroyed. */
static int op_entity_create(prop *p, size_t count, scn_entity *out) {
  describe(p, "entity_create(%zu)", count);
  if ((size_t)free_slots(&p->m) < count)
    return MODEL_UNSURE; /* the reference is full */
  int got = scn_entity_create(p->scene, count, out);
  if (!expect_rc(p, got, SCN_OK))
    return got;
  for (size_t k = 0; k < count; k++) {
    scn_entity e = out[k];
    if (!EXPECT(p, e != SCN_ENTITY_NONE && e <= SCN_ENTITY_MAX, "id %llu out of range", ID(e)) ||
        !EXPECT(p, slot_of(&p->m, e) == NONE_SLOT, "id %llu handed out twice", ID(e)) ||
        !EXPECT(p, !was_destroyed(p, e), "destroyed id %llu handed out again", ID(e)) ||
        !EXPECT(p, scn_entity_alive(p->scene, e), "new id %llu is not alive", ID(e)))
      return SCN_STATE;
    model_add_entity(&p->m, e);
  }
  return SCN_OK;
}

static int op_create(prop *p, int w, scn_entity e, scn_entity parent, const char *name,
                     const float *local) {
  describe(p, "transform_create(w%d, %llu, parent %llu, name \"%s\", %s)", w, ID(e), ID(parent),
           name ? name : "(none)", local ? p->matrix_kind : "identity");
  int want = model_create(&p->m, w, e, parent, name, local);
  int got = scn_transform_create(core_world(p, w), e, parent, name, local);
  expect_rc(p, got, want);
  return got;
}

static void note_orphans(prop *p, int w, int s) {
  orphans *o = &p->orphans[w];
  o->n = s == NONE_SLOT || !p->m.node[w][s].has ? 0 : children_of(&p->m, w, s, o->slot);
  for (int k = 0; k < o->n; k++)
    model_world(&p->m, w, o->slot[k], &o->before[k]);
}

/* The children of a destroyed transform are roots now, their local is their old world matrix:
 * check that against the reference, then take the core's bits. */
static bool adopt_orphans(prop *p, int w) {
  const orphans *o = &p->orphans[w];
  for (int k = 0; k < o->n; k++) {
    int s = o->slot[k];
    scn_entity e = p->m.id[s];
    scn_transform_info info;
    if (!expect_rc(p, scn_transform_get(core_world(p, w), e, &info), SCN_OK) ||
        !EXPECT(p, info.parent == SCN_ENTITY_NONE, "orphan %llu still has parent %llu", ID(e),
                ID(info.parent)) ||
        !EXPECT(p, memcmp(info.local, info.world, sizeof info.local) == 0,
                "orphan %llu: a root's world matrix differs from its local", ID(e)) ||
        !world_matches(p, e, info.local, &o->before[k]))
      return false;
    memcpy(p->m.node[w][s].local, info.local, sizeof info.local);
  }
  return true;
}

/* After a local computed through an inverse (keep world, set_world): take the core's local,
 * then check the world matrix is the intended one, up to the rounding of that inverse. */
static bool adopt_computed_local(prop *p, int w, int s, const world_ref *intended) {
  scn_entity e = p->m.id[s];
  scn_transform_info info;
  if (!expect_rc(p, scn_transform_get(core_world(p, w), e, &info), SCN_OK))
    return false;
  memcpy(p->m.node[w][s].local, info.local, sizeof info.local);
  world_ref now;
  model_world(&p->m, w, s, &now);
  double floor = INVERSE_FLOOR * (largest(now.bound) + largest(intended->bound));
  for (int i = 0; i < 16; i++) {
    double tol =
        KEEP_REL * ((now.depth + 1) * now.bound[i] + (intended->depth + 1) * intended->bound[i]) +
        floor + TINY;
    if (!(fabs(info.world[i] - intended->m[i]) <= tol))
      return fail(p, "world matrix of %llu, element %d: %.9g, intended %.9g (tolerance %.3g)",
                  ID(e), i, info.world[i], intended->m[i], tol);
  }
  return world_matches(p, e, info.world, &now);
}

static int op_destroy(prop *p, int w, scn_entity e, bool recursive) {
  describe(p, "transform_destroy(w%d, %llu, %s)", w, ID(e),
           recursive ? "recursive" : "non-recursive");
  note_orphans(p, w, recursive ? NONE_SLOT : node_of(&p->m, w, e));
  int want = model_destroy(&p->m, w, e, recursive);
  int got = scn_transform_destroy(core_world(p, w), e, recursive);
  if (expect_rc(p, got, want) && got == SCN_OK)
    adopt_orphans(p, w);
  return got;
}

static int op_link(prop *p, int w, scn_entity e, scn_entity parent, scn_keep keep) {
  describe(p, "transform_link(w%d, %llu, parent %llu, keep %s)", w, ID(e), ID(parent),
           keep == SCN_KEEP_WORLD ? "world" : "local");
  int s = node_of(&p->m, w, e);
  world_ref before;
  if (s != NONE_SLOT)
    model_world(&p->m, w, s, &before);
  bool moved;
  int want = model_link(&p->m, w, e, parent, keep, &moved);
  if (want == MODEL_UNSURE)
    return want;
  int got = scn_transform_link(core_world(p, w), e, parent, keep);
  if (expect_rc(p, got, want) && got == SCN_OK && moved && keep == SCN_KEEP_WORLD)
    adopt_computed_local(p, w, s, &before);
  return got;
}

static int op_set_local(prop *p, int w, scn_entity e, const float local[16]) {
  describe(p, "transform_set_local(w%d, %llu, %s)", w, ID(e), p->matrix_kind);
  int want = model_set_local(&p->m, w, e, local);
  int got = scn_transform_set_local(core_world(p, w), e, local);
  expect_rc(p, got, want);
  return got;
}

static int op_set_world(prop *p, int w, scn_entity e, const float world[16]) {
  describe(p, "transform_set_world(w%d, %llu, %s)", w, ID(e), p->matrix_kind);
  bool adopt;
  int want = model_set_world(&p->m, w, e, world, &adopt);
  if (want == MODEL_UNSURE)
    return want;
  int got = scn_transform_set_world(core_world(p, w), e, world);
  if (expect_rc(p, got, want) && got == SCN_OK && adopt) {
    world_ref intended;
    ref_extend(NULL, world, &intended);
    adopt_computed_local(p, w, node_of(&p->m, w, e), &intended);
  }
  return got;
}

static int op_rename(prop *p, int w, scn_entity e, const char *name) {
  describe(p, "transform_rename(w%d, %llu, \"%s\")", w, ID(e), name ? name : "(none)");
  int want = model_rename(&p->m, w, e, name);
  int got = scn_transform_rename(core_world(p, w), e, name);
  expect_rc(p, got, want);
  return got;
}

static int op_entity_destroy(prop *p, scn_entity e) {
  describe(p, "entity_destroy(%llu)", ID(e));
  if (p->in_batch) /* not allowed in a batch; changes nothing */
    return expect_rc(p, scn_entity_destroy(p->scene, e), SCN_STATE) ? SCN_STATE : SCN_OK;
  int s = slot_of(&p->m, e);
  for (int w = 0; w < NWORLDS; w++)
    note_orphans(p, w, s);
  int want = model_entity_destroy(&p->m, e);
  int got = scn_entity_destroy(p->scene, e);
  if (!expect_rc(p, got, want) || got != SCN_OK)
    return got;
  for (int w = 0; w < NWORLDS; w++)
    if (!adopt_orphans(p, w))
      return got;
  remember_dead(p, e);
  EXPECT(p, !scn_entity_alive(p->scene, e), "destroyed entity %llu is alive", ID(e));
  for (int w = 0; w < NWORLDS; w++)
    EXPECT(p, !scn_transform_exists(core_world(p, w), e), "destroyed %llu has a transform", ID(e));
  return got;
}

static int op_get(prop *p, int w, scn_entity e) {
  describe(p, "transform_get(w%d, %llu)", w, ID(e));
  int s = node_of(&p->m, w, e);
  scn_transform_info info;
  int got = scn_transform_get(core_world(p, w), e, &info);
  if (!expect_rc(p, got, s == NONE_SLOT ? SCN_NOT_FOUND : SCN_OK) || got != SCN_OK)
    return got;
  const model_node *n = &p->m.node[w][s];
  world_ref ref;
  model_world(&p->m, w, s, &ref);
  if (EXPECT(p, info.entity == e, "get returned entity %llu", ID(info.entity)) &&
      EXPECT(p, info.parent == entity_of(&p->m, n->parent), "parent %llu, expected %llu",
             ID(info.parent), ID(entity_of(&p->m, n->parent))) &&
      name_matches(p, e, info.name, n->name) && local_exact(p, e, info.local, n->local))
    world_matches(p, e, info.world, &ref);
  return got;
}

static int op_children(prop *p, int w, scn_entity e) {
  int s = node_of(&p->m, w, e), kids[MAX_SLOTS];
  int n = s == NONE_SLOT ? 0 : children_of(&p->m, w, s, kids);
  size_t cap = rng_below(&p->r, (uint32_t)n + 2), count = 0;
  describe(p, "transform_children(w%d, %llu, cap %zu)", w, ID(e), cap);
  scn_entity out[MAX_SLOTS + 2];
  for (size_t k = 0; k < MAX_SLOTS + 2; k++)
    out[k] = UINT64_MAX; /* guards: nothing may be written past cap */
  int got = scn_transform_children(core_world(p, w), e, out, cap, &count);
  if (!expect_rc(p, got, s == NONE_SLOT ? SCN_NOT_FOUND : SCN_OK) || got != SCN_OK)
    return got;
  if (!EXPECT(p, count == (size_t)n, "%zu children, expected %d", count, n))
    return got;
  for (size_t k = 0; k < (size_t)n + 2 && k < MAX_SLOTS + 2; k++) {
    scn_entity want = k < cap && k < (size_t)n ? p->m.id[kids[k]] : UINT64_MAX;
    if (!EXPECT(p, out[k] == want, "children[%zu] is %llu, expected %llu", k, ID(out[k]), ID(want)))
      break;
  }
  return got;
}

/* A path: the names of a random named node and its ancestors, else random names, sometimes
 * malformed (empty segments) or followed by bytes beyond the given length. */
static int op_find(prop *p, int w) {
  char path[1024];
  size_t len = 0;
  unsigned u = rng_below(&p->r, 100);
  int s = u < 60 ? random_slot(p, w, is_named) : NONE_SLOT;
  int chain[MAX_DEPTH + 2], depth = 0, t = s;
  for (; t != NONE_SLOT && depth < MAX_DEPTH + 2; t = p->m.node[w][t].parent)
    chain[depth++] = t;
  bool all_named = s != NONE_SLOT && t == NONE_SLOT; /* up to a root */
  for (int k = 0; k < depth; k++)
    all_named = all_named && p->m.node[w][chain[k]].name[0];
  if (all_named) {
    for (int k = depth; k-- > 0;)
      len += (size_t)snprintf(path + len, sizeof path - len, "%s%s", p->m.node[w][chain[k]].name,
                              k ? "/" : "");
  } else {
    /* Random names; malformed paths get an empty segment at a boundary, never inside a
     * multi-byte character: a leading or trailing '/', or "//" between names. */
    bool malformed = u >= 90;
    int segments = 1 + (int)rng_below(&p->r, 3);
    int empty_at = malformed ? (int)rng_below(&p->r, (uint32_t)segments + 1) : -1;
    for (int k = 0; k <= segments; k++) {
      if (k == empty_at)
        len += (size_t)snprintf(path + len, sizeof path - len, "/");
      if (k < segments)
        len += (size_t)snprintf(path + len, sizeof path - len, "%s%s",
                                NAME_POOL[rng_below(&p->r, COUNT(NAME_POOL))],
                                k + 1 < segments ? "/" : "");
    }
    if (malformed && rng_chance(&p->r, 0.2))
      len = 0;
  }
  size_t given = len;
  if (rng_chance(&p->r, 0.3)) /* bytes after the given length must be ignored */
    snprintf(path + len, sizeof path - len, "/junk");
  describe(p, "transform_find(w%d, \"%.*s\")", w, (int)given, path);
  int want_slot = NONE_SLOT;
  int want = model_find_path(&p->m, w, path, given, &want_slot);
  scn_entity found = SCN_ENTITY_NONE;
  int got = scn_transform_find(core_world(p, w), path, given, &found);
  if (expect_rc(p, got, want) && got == SCN_OK)
    EXPECT(p, found == p->m.id[want_slot], "found %llu, expected %llu", ID(found),
           ID(p->m.id[want_slot]));
  return got;
}

/* world(to) * relative must give world(e) back, up to rounding. */
static int op_relative(prop *p, int w, scn_entity e, scn_entity to) {
  describe(p, "transform_relative(w%d, %llu, to %llu)", w, ID(e), ID(to));
  int se = node_of(&p->m, w, e), st = node_of(&p->m, w, to);
  world_ref we, wt;
  int want = SCN_NOT_FOUND;
  if (se != NONE_SLOT && st != NONE_SLOT) {
    model_world(&p->m, w, se, &we);
    model_world(&p->m, w, st, &wt);
    inverse_class c = classify_inverse(wt.m);
    if (c == INVERSE_UNSURE)
      return MODEL_UNSURE;
    want = c == INVERSE_SINGULAR ? SCN_SINGULAR : SCN_OK;
  }
  float r[16];
  int got = scn_transform_relative(core_world(p, w), e, to, r);
  if (!expect_rc(p, got, want) || got != SCN_OK)
    return got;
  double rd[16], back[16], back_bound[16];
  mat_of_float(r, rd);
  mat_mul(wt.m, rd, back);
  mat_mul_abs(wt.bound, rd, back_bound);
  double floor = INVERSE_FLOOR * (largest(back_bound) + largest(we.bound));
  for (int i = 0; i < 16; i++) {
    double tol =
        KEEP_REL * ((wt.depth + 1) * back_bound[i] + (we.depth + 1) * we.bound[i]) + floor + TINY;
    if (!(fabs(back[i] - we.m[i]) <= tol)) {
      fail(p, "world(to) * relative, element %d: %.9g, world(e) %.9g (tolerance %.3g)", i, back[i],
           we.m[i], tol);
      break;
    }
  }
  return got;
}

/* Propagation and layout on demand, between other operations (and inside batches): none may
 * change what the reads return. */
static void op_flush(prop *p, int w) {
  switch (rng_below(&p->r, 3)) {
  case 0:
    describe(p, "world_flush(w%d)", w);
    scn_world_flush(core_world(p, w));
    break;
  case 1:
    describe(p, "world_relayout(w%d)", w);
    scn_world_relayout(core_world(p, w));
    break;
  default:
    describe(p, "world_close_tick(w%d)", w);
    scn_world_close_tick(core_world(p, w));
    break;
  }
}

/* Destroys world w and creates it again, empty; the entities stay alive. */
static void op_world_recreate(prop *p, int w) {
  char name[8];
  snprintf(name, sizeof name, "w%d", w);
  describe(p, "world_destroy(%s) and world_create(%s)", name, name);
  if (!expect_rc(p, scn_world_destroy(p->scene, name), SCN_OK) ||
      !expect_rc(p, scn_world_create(p->scene, name, &p->world[w]), SCN_OK))
    return;
  for (int s = 0; s < MAX_SLOTS; s++)
    p->m.node[w][s].has = false;
}

/* ---- random operations ----------------------------------------------------------------------- */

/* The entity of a new transform: a new one, one without a transform here (often one with a
 * transform in the other world, so entity_destroy spans worlds), one with (EXISTS) or stale. */
static scn_entity pick_entity_for_create(prop *p, int w) {
  unsigned u = rng_below(&p->r, 100);
  int s = NONE_SLOT;
  scn_entity e;
  if (u < (many_entities(&p->m) ? 10 : 45) && op_entity_create(p, 1, &e) == SCN_OK)
    return e;
  if (u < 65)
    s = random_slot(p, w, only_elsewhere);
  if (s == NONE_SLOT && u < 80)
    s = random_slot(p, w, lacks_node);
  if (s == NONE_SLOT && u < 92)
    s = random_slot(p, w, is_node);
  return s != NONE_SLOT ? p->m.id[s] : pick_stale(p);
}

static scn_entity pick_create_parent(prop *p, int w) {
  unsigned u = rng_below(&p->r, 100);
  if (u < 30)
    return SCN_ENTITY_NONE;
  if (u < 95)
    return entity_of(&p->m, random_slot(p, w, shallow_node));
  return pick_stale(p);
}

/* New parent for the transform in slot s: unlink, itself or a descendant (CYCLE), the current
 * parent (no-op), a stale id or a random node, kept within MAX_DEPTH. */
static scn_entity pick_link_parent(prop *p, int w, int s) {
  const model *m = &p->m;
  unsigned u = rng_below(&p->r, 100);
  if (u < 8)
    return SCN_ENTITY_NONE;
  if (u < 15)
    return m->id[s];
  if (u < 24) {
    int d = random_descendant(p, w, s);
    return m->id[d != NONE_SLOT ? d : s];
  }
  if (u < 29)
    return entity_of(m, m->node[w][s].parent);
  if (u < 33)
    return pick_stale(p);
  int t = random_slot(p, w, is_node);
  if (t == NONE_SLOT ||
      (!is_ancestor_or_self(m, w, s, t) && depth_of(m, w, t) + 1 + height_of(m, w, s) > MAX_DEPTH))
    return SCN_ENTITY_NONE;
  return m->id[t];
}

/* Rename targets: no name, the current name, a sibling's name (EXISTS), a bad one, the pool. */
static const char *pick_rename(prop *p, int w, int s) {
  unsigned u = rng_below(&p->r, 100);
  if (s == NONE_SLOT || u >= 35)
    return pick_name(p, 0.05);
  const model_node *n = &p->m.node[w][s];
  if (u < 12)
    return NULL;
  if (u < 20)
    return n->name[0] ? n->name : NULL;
  int k = 0;
  for (int t = 0; t < MAX_SLOTS; t++)
    if (t != s && is_named(&p->m, w, t) && p->m.node[w][t].parent == n->parent)
      p->pick[k++] = t;
  return k ? p->m.node[w][p->pick[rng_below(&p->r, (uint32_t)k)]].name : pick_name(p, 0);
}

typedef enum op_kind {
  OP_CREATE,
  OP_DESTROY,
  OP_DESTROY_TREE,
  OP_LINK,
  OP_UNLINK,
  OP_SET_LOCAL,
  OP_SET_WORLD,
  OP_RENAME,
  OP_ENTITY_CREATE,
  OP_ENTITY_DESTROY,
  OP_GET,
  OP_CHILDREN,
  OP_FIND,
  OP_RELATIVE,
  OP_FLUSH,
  OP_KINDS
} op_kind;

/* Weights steer the population of a world to about 40..110 transforms. */
static op_kind pick_kind(prop *p, int w) {
  int n = node_count(&p->m, w);
  bool crowded = n > 110, sparse = n < 40;
  unsigned create = crowded ? 5 : (sparse ? 40 : 22);
  unsigned entity_destroy = p->in_batch ? 0 : (many_entities(&p->m) ? 10 : 3);
  unsigned weight[OP_KINDS] = {
      [OP_CREATE] = create,
      [OP_DESTROY] = crowded ? 14 : 5,
      [OP_DESTROY_TREE] = crowded ? 6 : 2,
      [OP_LINK] = 14,
      [OP_UNLINK] = 4,
      [OP_SET_LOCAL] = 12,
      [OP_SET_WORLD] = 8,
      [OP_RENAME] = 9,
      [OP_ENTITY_CREATE] = many_entities(&p->m) ? 0 : 2,
      [OP_ENTITY_DESTROY] = entity_destroy, /* not allowed inside a batch */
      [OP_GET] = 5,
      [OP_CHILDREN] = 2,
      [OP_FIND] = 3,
      [OP_RELATIVE] = 3,
      [OP_FLUSH] = 2,
  };
  unsigned total = 0;
  for (int k = 0; k < OP_KINDS; k++)
    total += weight[k];
  unsigned x = rng_below(&p->r, total);
  int k = 0;
  while (x >= weight[k])
    x -= weight[k++];
  return (op_kind)k;
}

static scn_keep random_keep(prop *p) {
  return rng_chance(&p->r, 0.5) ? SCN_KEEP_WORLD : SCN_KEEP_LOCAL;
}

/* One random operation on world w, checked against the reference; returns its code. */
static int random_op(prop *p, int w) {
  model *m = &p->m;
  float mat[16];
  switch (pick_kind(p, w)) {
  case OP_CREATE: {
    scn_entity e = pick_entity_for_create(p, w);
    scn_entity parent = pick_create_parent(p, w);
    const char *name = pick_name(p, 0.4);
    bool with_local = rng_chance(&p->r, 0.8);
    if (with_local)
      random_matrix(p, mat, true);
    return op_create(p, w, e, parent, name, with_local ? mat : NULL);
  }
  case OP_DESTROY:
    return op_destroy(p, w, pick_target(p, w), false);
  case OP_DESTROY_TREE:
    return op_destroy(p, w, pick_target(p, w), true);
  case OP_LINK: {
    int s = random_slot(p, w, is_node);
    if (s == NONE_SLOT || rng_chance(&p->r, 0.04))
      return op_link(p, w, pick_stale(p), entity_of(m, random_slot(p, w, is_node)), random_keep(p));
    return op_link(p, w, m->id[s], pick_link_parent(p, w, s), random_keep(p));
  }
  case OP_UNLINK:
    return op_link(p, w, pick_target(p, w), SCN_ENTITY_NONE, random_keep(p));
  case OP_SET_LOCAL:
    random_matrix(p, mat, true);
    return op_set_local(p, w, pick_target(p, w), mat);
  case OP_SET_WORLD: {
    random_matrix(p, mat, true);
    int s = rng_chance(&p->r, 0.1) ? random_slot(p, w, under_singular) : NONE_SLOT;
    return op_set_world(p, w, s != NONE_SLOT ? m->id[s] : pick_target(p, w), mat);
  }
  case OP_RENAME: {
    int s = rng_chance(&p->r, 0.95) ? random_slot(p, w, is_node) : NONE_SLOT;
    return op_rename(p, w, s != NONE_SLOT ? m->id[s] : pick_stale(p), pick_rename(p, w, s));
  }
  case OP_ENTITY_CREATE: {
    scn_entity ids[3];
    return op_entity_create(p, 1 + rng_below(&p->r, 3), ids);
  }
  case OP_ENTITY_DESTROY: {
    unsigned u = rng_below(&p->r, 100);
    slot_filter which = u < 40 ? in_every_world : (u < 75 ? is_node : any_entity);
    if (many_entities(m) && u < 70)
      which = without_transform; /* keeps the worlds populated */
    int s = random_slot(p, w, which);
    return op_entity_destroy(p, s != NONE_SLOT && u < 95 ? m->id[s] : pick_stale(p));
  }
  case OP_GET:
    return op_get(p, w, pick_target(p, w));
  case OP_CHILDREN:
    return op_children(p, w, pick_target(p, w));
  case OP_FIND:
    return op_find(p, w);
  case OP_RELATIVE:
    return op_relative(p, w, pick_target(p, w), pick_target(p, w));
  case OP_FLUSH:
    op_flush(p, w);
    return SCN_OK;
  case OP_KINDS:
    break;
  }
  return SCN_OK;
}

/* An operation chosen to fail, to end a batch part-way. The reference still decides the code:
 * when the state offers no such failure, the op may succeed and the batch just goes on. */
static int deliberate_failure(prop *p, int w) {
  model *m = &p->m;
  int s = random_slot(p, w, is_node);
  float mat[16];
  switch (rng_below(&p->r, 7)) {
  case 0: /* link into its own subtree */
    if (s != NONE_SLOT) {
      int d = random_descendant(p, w, s);
      return op_link(p, w, m->id[s], m->id[d != NONE_SLOT ? d : s], random_keep(p));
    }
    break;
  case 1:
    random_matrix(p, mat, false);
    return op_set_local(p, w, pick_stale(p), mat);
  case 2: { /* rename to a sibling's name */
    int t = random_slot(p, w, is_node);
    const char *name = t != NONE_SLOT ? pick_rename(p, w, t) : NULL;
    if (t != NONE_SLOT && name)
      return op_rename(p, w, m->id[t], name);
    break;
  }
  case 3: { /* set_world under a singular parent */
    int t = random_slot(p, w, under_singular);
    if (t != NONE_SLOT) {
      random_matrix(p, mat, false);
      return op_set_world(p, w, m->id[t], mat);
    }
    break;
  }
  case 4: /* a second transform for one entity */
    if (s != NONE_SLOT)
      return op_create(p, w, m->id[s], SCN_ENTITY_NONE, NULL, NULL);
    break;
  case 5:
    return op_entity_destroy(p, s != NONE_SLOT ? m->id[s] : pick_stale(p));
  case 6:
    if (s != NONE_SLOT)
      return op_link(p, w, m->id[s], pick_stale(p), SCN_KEEP_LOCAL);
    break;
  }
  return op_link(p, w, pick_stale(p), SCN_ENTITY_NONE, SCN_KEEP_LOCAL);
}

/* ---- whole-state comparison ------------------------------------------------------------------ */

static void log_visit(void *ud, scn_entity e, const float world[16]) {
  visit_log *log = ud;
  if (log->n == MAX_SLOTS) {
    log->overflow = true;
    return;
  }
  log->id[log->n] = e;
  memcpy(log->world[log->n], world, sizeof log->world[0]);
  log->n++;
}

/* visit_changed since 0 walks the roots in order, depth-first: this is where the order of the
 * root list shows. It must also hand out the matrices get returned. */
static bool check_visit(prop *p, int w, int top) {
  int n = preorder(&p->view, top, p->pick);
  visit_log *log = &p->visits;
  log->n = 0;
  log->overflow = false;
  int rc = scn_world_visit_changed(core_world(p, w), entity_of(&p->m, top), 0, log_visit, log);
  if (!expect_rc(p, rc, SCN_OK) ||
      !EXPECT(p, !log->overflow && log->n == n, "visit from %llu saw %d transforms, expected %d",
              ID(entity_of(&p->m, top)), log->n, n))
    return false;
  for (int k = 0; k < n; k++) {
    int s = p->pick[k];
    if (!EXPECT(p, log->id[k] == p->m.id[s], "visit from %llu: #%d is %llu, expected %llu",
                ID(entity_of(&p->m, top)), k, ID(log->id[k]), ID(p->m.id[s])) ||
        !EXPECT(p, memcmp(log->world[k], p->core_world[w][s], sizeof log->world[k]) == 0,
                "visit hands out another world matrix for %llu than get", ID(p->m.id[s])))
      return false;
  }
  return true;
}

static bool check_node(prop *p, int w, int s) {
  const model_node *n = &p->m.node[w][s];
  scn_entity e = p->m.id[s];
  world_ref *ref = &p->ref[s]; /* parents come first in pre-order: theirs is ready */
  ref_extend(n->parent == NONE_SLOT ? NULL : &p->ref[n->parent], n->local, ref);
  scn_transform_info info;
  if (!expect_rc(p, scn_transform_get(core_world(p, w), e, &info), SCN_OK) ||
      !EXPECT(p, info.parent == entity_of(&p->m, n->parent),
              "parent of %llu is %llu, expected %llu", ID(e), ID(info.parent),
              ID(entity_of(&p->m, n->parent))) ||
      !name_matches(p, e, info.name, n->name) || !local_exact(p, e, info.local, n->local) ||
      !world_matches(p, e, info.world, ref))
    return false;
  memcpy(p->core_world[w][s], info.world, sizeof info.world);

  scn_entity kids[MAX_SLOTS];
  size_t count;
  if (!expect_rc(p, scn_transform_children(core_world(p, w), e, kids, MAX_SLOTS, &count), SCN_OK))
    return false;
  size_t k = 0;
  for (int c = p->view.first[s]; c != NONE_SLOT; c = p->view.next[c], k++)
    if (!EXPECT(p, k < count && kids[k] == p->m.id[c], "child #%zu of %llu is %llu, expected %llu",
                k, ID(e), ID(k < count ? kids[k] : 0), ID(p->m.id[c])))
      return false;
  return EXPECT(p, k == count, "%llu has %zu children, expected %zu", ID(e), count, k);
}

static bool check_world(prop *p, int w) {
  const model *m = &p->m;
  build_view(m, w, &p->view);
  int n = preorder(&p->view, NONE_SLOT, p->order);
  if (!EXPECT(p, scn_world_transform_count(core_world(p, w)) == (size_t)n,
              "world %d holds %zu transforms, expected %d", w,
              scn_world_transform_count(core_world(p, w)), n))
    return false;
  for (int s = 0; s < MAX_SLOTS; s++)
    if (m->id[s] &&
        !EXPECT(p, scn_transform_exists(core_world(p, w), m->id[s]) == m->node[w][s].has,
                "world %d: transform of %llu exists: %d, expected %d", w, ID(m->id[s]),
                !m->node[w][s].has, m->node[w][s].has))
      return false;
  for (int k = 0; k < n; k++)
    if (!check_node(p, w, p->order[k]))
      return false;
  return check_visit(p, w, NONE_SLOT) &&
         (n == 0 || check_visit(p, w, p->order[rng_below(&p->r, (uint32_t)n)]));
}

static bool check_all(prop *p) {
  describe(p, "the state check");
  if (!EXPECT(p, scn_entity_count(p->scene) == p->m.alive, "%zu entities alive, expected %zu",
              scn_entity_count(p->scene), p->m.alive))
    return false;
  for (int s = 0; s < MAX_SLOTS; s++)
    if (p->m.id[s] &&
        !EXPECT(p, scn_entity_alive(p->scene, p->m.id[s]), "%llu is not alive", ID(p->m.id[s])))
      return false;
  for (int k = 0; k < 4 && p->ndead; k++) {
    scn_entity e = p->dead[rng_below(&p->r, (uint32_t)p->ndead)];
    if (!EXPECT(p, !scn_entity_alive(p->scene, e), "destroyed %llu is alive again", ID(e)))
      return false;
  }
  for (int w = 0; w < NWORLDS; w++)
    if (!check_world(p, w))
      return false;
  return true;
}

/* ---- steps ----------------------------------------------------------------------------------- */

/* Every node's world matrix, bit for bit, as before the batch. */
static bool same_worlds_as_saved(prop *p) {
  for (int w = 0; w < NWORLDS; w++)
    for (int s = 0; s < MAX_SLOTS; s++)
      if (p->m.node[w][s].has &&
          !EXPECT(p, memcmp(p->core_world[w][s], p->saved_world[w][s], sizeof(float) * 16) == 0,
                  "world matrix of %llu changed across a rolled-back batch", ID(p->m.id[s])))
        return false;
  return true;
}

/* A batch of random ops, then one of three endings:
 * - commit: every op ran (a failed op inside a batch changes nothing and must leave nothing to
 *   undo, so the batch goes on past it);
 * - rollback after the ops succeeded or failed;
 * - abort as the server does: the first failure ends the batch (an op chosen to fail when none
 *   did), then rollback.
 * A rollback must restore exactly the state before, world matrices included. */
static void step_batch(prop *p) {
  enum { COMMIT, ROLLBACK, ABORT } plan = COMMIT;
  unsigned u = rng_below(&p->r, 100);
  if (u >= 45)
    plan = u < 65 ? ROLLBACK : ABORT;
  int w = (int)rng_below(&p->r, NWORLDS);
  p->saved = p->m;
  memcpy(p->saved_world, p->core_world, sizeof p->saved_world);
  describe(p, "batch_begin");
  if (!expect_rc(p, scn_batch_begin(p->scene), SCN_OK))
    return;
  p->in_batch = true;
  if (rng_chance(&p->r, 0.1)) {
    describe(p, "batch_begin inside a batch");
    expect_rc(p, scn_batch_begin(p->scene), SCN_STATE);
    describe(p, "world_create inside a batch");
    expect_rc(p, scn_world_create(p->scene, "w2", NULL), SCN_STATE);
  }
  int ops = 2 + (int)rng_below(&p->r, 7), rc = SCN_OK;
  for (int k = 0; k < ops && !p->failed && (plan != ABORT || rc == SCN_OK); k++) {
    rc = random_op(p, rng_chance(&p->r, 0.2) ? (int)rng_below(&p->r, NWORLDS) : w);
    if (rc == MODEL_UNSURE)
      rc = SCN_OK, p->skipped++;
  }
  if (plan == ABORT && rc == SCN_OK && !p->failed)
    deliberate_failure(p, w);
  p->in_batch = false;
  if (p->failed)
    return;
  if (plan == COMMIT) {
    describe(p, "batch_commit");
    scn_batch_commit(p->scene);
    return;
  }
  describe(p, "batch_rollback");
  scn_batch_rollback(p->scene);
  p->m = p->saved;
  if (check_all(p))
    same_worlds_as_saved(p);
}

static void step(prop *p) {
  unsigned u = rng_below(&p->r, 100);
  int w = (int)rng_below(&p->r, NWORLDS);
  if (u < 50) {
    if (random_op(p, w) == MODEL_UNSURE)
      p->skipped++;
  } else if (u < 70) { /* several ops with no check between: world matrices stay lazy */
    int ops = 2 + (int)rng_below(&p->r, 7);
    for (int k = 0; k < ops && !p->failed; k++)
      if (random_op(p, (int)rng_below(&p->r, NWORLDS)) == MODEL_UNSURE)
        p->skipped++;
  } else if (u < 92) {
    step_batch(p);
  } else if (u == 92 && rng_chance(&p->r, 0.05)) {
    op_world_recreate(p, w);
  } else { /* an entity with transforms in both worlds */
    int s = random_slot(p, w, in_every_world);
    if (s != NONE_SLOT)
      op_entity_destroy(p, p->m.id[s]);
  }
}

static bool run_seed(unsigned seed, long steps) {
  prop *p = calloc(1, sizeof *p);
  if (!p)
    return false;
  p->seed = seed;
  p->r.state = seed;
  p->scene = scn_scene_new(NULL);
  bool ok = p->scene && scn_world_create(p->scene, "w0", &p->world[0]) == SCN_OK &&
            scn_world_create(p->scene, "w1", &p->world[1]) == SCN_OK;
  for (p->step = 0; ok && p->step < steps && !p->failed; p->step++) {
    step(p);
    if (!p->failed)
      check_all(p);
  }
  ok = ok && !p->failed;
  if (getenv("SCN_VERBOSE"))
    printf("  seed %u: %ld steps, %ld ops skipped (inverse too close to singular to predict)\n",
           seed, steps, p->skipped);
  scn_scene_free(p->scene);
  free(p->dead);
  free(p);
  return ok;
}

static long steps_per_seed(void) {
  const char *s = getenv("SCN_STEPS");
  long n = s ? strtol(s, NULL, 10) : 0;
  return n > 0 ? n : 4000;
}

static void test_random_fixed_seeds(void) {
  static const unsigned seeds[] = {1, 2, 3, 42, 1234, 0xc0ffee};
  for (size_t k = 0; k < COUNT(seeds); k++)
    CU_ASSERT(run_seed(seeds[k], steps_per_seed()));
}

static void test_random_env_seed(void) {
  const char *s = getenv("SCN_SEED");
  if (!s || !*s)
    return; /* only when asked for */
  char *end;
  unsigned long seed = strtoul(s, &end, 0);
  if (*end || seed > UINT32_MAX) {
    CU_FAIL("SCN_SEED is not a 32-bit number");
    return;
  }
  CU_ASSERT(run_seed((unsigned)seed, steps_per_seed()));
  CU_ASSERT(run_chain((unsigned)seed, false));
  CU_ASSERT(run_chain((unsigned)seed, true));
}

int t_register_core_property(void) {
  static const t_test tests[] = {
      {"random operations match the reference (fixed seeds)", test_random_fixed_seeds},
      {"both, with the seed in SCN_SEED (when set)", test_random_env_seed},
  };
  return T_ADD_SUITE("core_property", NULL, NULL, tests);
}

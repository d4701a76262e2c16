/* Reads of a world's history: a transform as it was at a past tick, between two ticks, and
 * relative to another (see history.c for how the records are kept). */
#include "history_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- queries ------------------------------------------------------------------------------ */

/* The oldest record of the matrix chain from s made at or after begin; 0 when none. */
static uint64_t walk_matrix(const scn__ring *r, uint64_t s, uint64_t begin) {
  if (s < begin)
    return 0;
  for (;;) {
    uint32_t d = mlink(r, s) & ~SCN_HIST_ASIDE;
    if (!d || s - d < begin)
      return s;
    s -= d;
  }
}

static const scn__hist_srec *walk_struct(const scn__hist *h, uint64_t s, uint64_t begin) {
  const scn__hist_srec *found = NULL;
  while (s >= begin) {
    found = srec(h, s);
    if (!found->back)
      break;
    s -= found->back;
  }
  return found;
}

/* e's values at tick. */
typedef struct hist_view {
  scn_entity parent;
  const char *name;
  float local[16], world[16];
} hist_view;

/* The matrix of chain head in ring which at the tick whose successor's records begin at b:
 * from its record, else live (NULL: there is none, a destroyed transform). */
static bool matrix_at(const scn__hist *h, int which, uint64_t head, uint64_t b, const float *live,
                      float out[16]) {
  uint64_t s = walk_matrix(&h->ring[which], head, b);
  if (s)
    scn__hist_record_matrix(h, which, s, out);
  else if (live)
    memcpy(out, live, sizeof(float) * 16);
  return s || live;
}

static int view_at(scn_world *w, scn_entity e, uint64_t tick, hist_view *v) {
  scn__tm *tm = &w->tm;
  const scn__hist *h = tm->hist;
  uint64_t oldest, newest;
  if (scn_world_history_window(w, &oldest, &newest) != SCN_OK || tick < oldest || tick > newest)
    return SCN_NOT_FOUND;
  if (e == SCN_ENTITY_NONE || e > SCN_ENTITY_MAX)
    return SCN_NOT_FOUND;
  uint32_t i = scn__tm_lookup(tm, e);
  scn__heads heads;
  if (i != SCN_NIL) {
    /* the live values are read when nothing changed since tick: load them meanwhile */
    __builtin_prefetch(tm->world[i]);
    __builtin_prefetch(h->shadow[i]);
    __builtin_prefetch(&tm->parent[i]);
    __builtin_prefetch(&tm->name[i]);
    heads = h->heads[i];
  } else {
    const scn__dead *d = scn__hist_dead_find(h, e);
    if (!d)
      return SCN_NOT_FOUND;
    heads = d->heads;
  }
  const uint64_t *b = bound_of(h, tick + 1); /* records made after tick begin here */
  const scn__hist_srec *st = walk_struct(h, heads.meta, b[SCN_HIST_STRUCT]);
  if (st ? !st->exists : i == SCN_NIL)
    return SCN_NOT_FOUND;
  if (st) {
    v->parent = st->parent;
    v->name = st->name[0] ? st->name : NULL;
  } else {
    uint32_t p = tm->parent[i];
    v->parent = p == SCN_NIL ? SCN_ENTITY_NONE : tm->entity[p];
    v->name = scn__tm_name(tm, i);
  }
  /* A destroyed transform left both matrices behind when it was destroyed. */
  bool live = i != SCN_NIL;
  if (!matrix_at(h, SCN_HIST_WORLD, heads.world, b[SCN_HIST_WORLD], live ? tm->world[i][0] : NULL,
                 v->world) ||
      !matrix_at(h, SCN_HIST_LOCAL, heads.local, b[SCN_HIST_LOCAL], live ? h->shadow[i][0] : NULL,
                 v->local))
    return SCN_STATE;
  return SCN_OK;
}

static void fill_info(scn_entity e, const hist_view *v, scn_transform_info *out) {
  out->entity = e;
  out->parent = v->parent;
  out->name = v->name;
  memcpy(out->local, v->local, sizeof out->local);
  memcpy(out->world, v->world, sizeof out->world);
}

int scn_world_history_get(scn_world *w, scn_entity e, uint64_t tick, scn_transform_info *out) {
  hist_view v;
  int rc = view_at(w, e, tick, &v);
  if (rc == SCN_OK)
    fill_info(e, &v, out);
  return rc;
}

/* ---- fractional ticks --------------------------------------------------------------------- */

/* scn_compose_trs in double from double parts, rounded once; false when not finite. */
static bool compose_d(const double t[3], const double q[4], const double s[3], float out[16]) {
  double len = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (!(len > 0))
    return false;
  double x = q[0] / len, y = q[1] / len, z = q[2] / len, w = q[3] / len;
  const double m[16] = {
      (1 - 2 * (y * y + z * z)) * s[0],
      (2 * (x * y + z * w)) * s[0],
      (2 * (x * z - y * w)) * s[0],
      0,
      (2 * (x * y - z * w)) * s[1],
      (1 - 2 * (x * x + z * z)) * s[1],
      (2 * (y * z + x * w)) * s[1],
      0,
      (2 * (x * z + y * w)) * s[2],
      (2 * (y * z - x * w)) * s[2],
      (1 - 2 * (x * x + y * y)) * s[2],
      0,
      t[0],
      t[1],
      t[2],
      1,
  };
  for (int i = 0; i < 16; i++)
    out[i] = (float)m[i];
  return scn_matrix_finite(out);
}

/* The matrix a fraction f (0 < f < 1) of the way from a to b: translation and scale linearly,
 * rotation by spherical interpolation the shorter way round; a itself when the two are equal,
 * when either is not T * R * S, or when the result would not be finite. */
static void lerp_matrix(const float a[16], const float b[16], double f, float out[16]) {
  float ta[3], ra[4], sa[3], tb[3], rb[4], sb[3];
  if (memcmp(a, b, sizeof(float) * 16) == 0 || scn_decompose_trs(a, ta, ra, sa) != SCN_OK ||
      scn_decompose_trs(b, tb, rb, sb) != SCN_OK) {
    memcpy(out, a, sizeof(float) * 16);
    return;
  }
  double t[3], s[3], q[4], dot = 0, wa = 1 - f, wb = f;
  for (int k = 0; k < 3; k++) {
    t[k] = ta[k] + ((double)tb[k] - ta[k]) * f;
    s[k] = sa[k] + ((double)sb[k] - sa[k]) * f;
  }
  for (int k = 0; k < 4; k++)
    dot += (double)ra[k] * rb[k];
  double sign = dot < 0 ? -1 : 1;
  dot = fabs(dot);
  if (dot < 1 - 1e-12) { /* else the two are all but equal and the straight line will do */
    double angle = acos(dot > 1 ? 1 : dot), sine = sin(angle);
    wa = sin((1 - f) * angle) / sine;
    wb = sin(f * angle) / sine;
  }
  for (int k = 0; k < 4; k++)
    q[k] = wa * ra[k] + wb * sign * rb[k];
  if (!compose_d(t, q, s, out))
    memcpy(out, a, sizeof(float) * 16);
}

int scn_world_history_interpolate(scn_world *w, scn_entity e, double tick,
                                  scn_transform_info *out) {
  if (!isfinite(tick) || tick < 0)
    return SCN_INVALID;
  double whole = floor(tick), f = tick - whole;
  if (whole >= 0x1p63) /* far past any tick a world can reach */
    return SCN_NOT_FOUND;
  uint64_t a = (uint64_t)whole;
  if (f == 0)
    return scn_world_history_get(w, e, a, out);
  uint64_t oldest, newest;
  if (scn_world_history_window(w, &oldest, &newest) != SCN_OK || a < oldest || a >= newest)
    return SCN_NOT_FOUND;
  hist_view va, vb;
  int rc = view_at(w, e, a, &va);
  if (rc != SCN_OK)
    return rc;
  rc = view_at(w, e, a + 1, &vb);
  if (rc == SCN_NOT_FOUND) { /* destroyed in the next tick: as it was */
    fill_info(e, &va, out);
    return SCN_OK;
  }
  if (rc != SCN_OK)
    return rc;
  out->entity = e;
  out->parent = va.parent;
  out->name = va.name;
  lerp_matrix(va.local, vb.local, f, out->local);
  lerp_matrix(va.world, vb.world, f, out->world);
  return SCN_OK;
}

int scn_world_history_relative(scn_world *w, scn_entity e, scn_entity to, double tick,
                               float out[16]) {
  scn_transform_info ie, it;
  int rc = scn_world_history_interpolate(w, e, tick, &ie);
  if (rc == SCN_OK)
    rc = scn_world_history_interpolate(w, to, tick, &it);
  if (rc != SCN_OK)
    return rc;
  mat4 we, wt, r;
  memcpy(we, ie.world, sizeof we);
  memcpy(wt, it.world, sizeof wt);
  if (scn__mul_inverse(wt, we, r) != SCN_OK)
    return SCN_SINGULAR;
  memcpy(out, r, sizeof r);
  return SCN_OK;
}

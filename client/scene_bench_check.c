/* The stream test's workload in exact arithmetic, and the check of the matrices a subscriber
 * receives against it (see scene_bench_stream.h). Every decoded frame is checked, so the
 * check is written to cost about what decoding does: a walk over the increasing ids, the
 * root's rotation worked out once per frame, and no allocation per matrix. */
#include "scene_bench_stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEG (3.14159265358979323846 / 180)

void stream_root_quat(long seq, double q[4]) {
  double a = (double)seq * 0.01, s = sin(a);
  q[0] = 0.26726124 * s; /* (1, 2, 3) / sqrt(14) */
  q[1] = 0.53452248 * s;
  q[2] = 0.80178373 * s;
  q[3] = cos(a);
}

void stream_descendant(int i, double t[3], double q[4]) {
  double a = (double)(i % 360) * 0.0174532925;
  t[0] = i % STREAM_ROW, t[1] = 0, t[2] = i / STREAM_ROW;
  q[0] = 0, q[1] = sin(a / 2), q[2] = 0, q[3] = cos(a / 2);
}

typedef struct order {
  uint64_t id;
  size_t i;
} order;

static int cmp_order(const void *a, const void *b) {
  uint64_t x = ((const order *)a)->id, y = ((const order *)b)->id;
  return (x > y) - (x < y);
}

bool stream_model_init(stream_model *m, uint64_t root, const uint64_t *ids, size_t n) {
  *m = (stream_model){.root = root, .n = n};
  order *o = malloc(sizeof *o * (n ? n : 1));
  m->ids = malloc(sizeof *m->ids * (n ? n : 1));
  m->local = malloc(sizeof *m->local * (n ? n : 1));
  if (!o || !m->ids || !m->local) {
    free(o);
    stream_model_free(m);
    return false;
  }
  for (size_t i = 0; i < n; i++)
    o[i] = (order){ids[i], i};
  qsort(o, n, sizeof *o, cmp_order);
  for (size_t k = 0; k < n; k++) {
    double t[3], q[4];
    stream_descendant((int)o[k].i, t, q);
    m->ids[k] = o[k].id;
    m->local[k][0] = t[0], m->local[k][1] = t[2];
    m->local[k][2] = q[3] * q[3] - q[1] * q[1]; /* the cosine and sine of twice its half */
    m->local[k][3] = 2 * q[1] * q[3];
  }
  free(o);
  return true;
}

void stream_model_free(stream_model *m) {
  free(m->ids);
  free(m->local);
  *m = (stream_model){0};
}

/* The rotation of a unit quaternion (normalised here), column-major 3 x 3. */
static void quat_matrix(const double q[4], double r[9]) {
  double len = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  double x = q[0] / len, y = q[1] / len, z = q[2] / len, w = q[3] / len;
  r[0] = 1 - 2 * (y * y + z * z), r[1] = 2 * (x * y + z * w), r[2] = 2 * (x * z - y * w);
  r[3] = 2 * (x * y - z * w), r[4] = 1 - 2 * (x * x + z * z), r[5] = 2 * (y * z + x * w);
  r[6] = 2 * (x * z + y * w), r[7] = 2 * (y * z - x * w), r[8] = 1 - 2 * (x * x + y * y);
}

/* Entity id's place in the model: the one after hint when the ids come in increasing order,
 * else found by bisection; m->n when the model has no such entity. */
static size_t find(const stream_model *m, uint64_t id, size_t hint) {
  if (hint < m->n && m->ids[hint] == id)
    return hint;
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->ids[mid] < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < m->n && m->ids[lo] == id ? lo : m->n;
}

/* One received matrix w against the exact rotation x (column-major 3 x 3) and translation t;
 * mag bounds the values that went into the translation. The rotation error is the angle of
 * D^T X, D the received rotation (the workload has no scale): for two rotations |D - X| (Frobenius)
 * = 2 sqrt(2) sin(a / 2), so the largest |D - X|^2 gives the largest angle, worked out once at the
 * end. */
static void check_one(stream_check *c, const float w[16], const double x[9], const double t[3],
                      double mag) {
  for (int k = 0; k < 3; k++) {
    double err = fabs((double)w[12 + k] - t[k]), past = err - c->step / 2;
    if (err > c->err[k])
      c->err[k] = err;
    if (past > 0) {
      double ulp = ldexp(1.0, ilogb(mag > 1 ? mag : 1) - 23); /* float32's at mag */
      if (past / ulp > c->beyond_ulp)
        c->beyond_ulp = past / ulp;
    }
  }
  double d2 = 0;
  for (int col = 0; col < 3; col++)
    for (int row = 0; row < 3; row++) {
      double d = (double)w[col * 4 + row] - x[col * 3 + row];
      d2 += d * d;
    }
  if (d2 > c->rot_d2)
    c->rot_d2 = d2;
  c->checked++;
}

void stream_check_matrices(const stream_model *m, long seq, const uint64_t *ids,
                           const float (*w)[16], size_t n, stream_check *c) {
  double q[4], r[9], rt[3] = {(double)seq, 0, 0};
  stream_root_quat(seq, q);
  quat_matrix(q, r);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] == m->root) {
      check_one(c, w[i], r, rt, fabs((double)seq));
      continue;
    }
    at = find(m, ids[i], at);
    if (at == m->n) {
      c->unknown++;
      at = 0;
      continue;
    }
    /* world = root * local: the root's turn after the descendant's turn about y */
    double lx = m->local[at][0], lz = m->local[at][1], cy = m->local[at][2], sy = m->local[at][3];
    double x[9], t[3];
    for (int k = 0; k < 3; k++) {
      x[k] = cy * r[k] - sy * r[6 + k];
      x[3 + k] = r[3 + k];
      x[6 + k] = sy * r[k] + cy * r[6 + k];
      t[k] = rt[k] + r[k] * lx + r[6 + k] * lz;
    }
    check_one(c, w[i], x, t, fabs((double)seq) + fabs(lx) + fabs(lz));
    at++;
  }
}

double stream_check_rot_deg(const stream_check *c) {
  double half_sin = sqrt(c->rot_d2 / 8); /* sin(a / 2) */
  return 2 * asin(half_sin < 1 ? half_sin : 1) / DEG;
}

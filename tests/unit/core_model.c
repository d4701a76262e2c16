#include "core_model.h"
#include "scn_core.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void mat_of_float(const float f[16], double d[16]) {
  for (int i = 0; i < 16; i++)
    d[i] = f[i];
}

void mat_mul(const double a[16], const double b[16], double out[16]) {
  double t[16];
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 4; r++) {
      double sum = 0;
      for (int k = 0; k < 4; k++)
        sum += a[k * 4 + r] * b[c * 4 + k];
      t[c * 4 + r] = sum;
    }
  memcpy(out, t, sizeof t);
}

void mat_mul_abs(const double a[16], const double b[16], double out[16]) {
  double t[16];
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 4; r++) {
      double sum = 0;
      for (int k = 0; k < 4; k++)
        sum += fabs(a[k * 4 + r]) * fabs(b[c * 4 + k]);
      t[c * 4 + r] = sum;
    }
  memcpy(out, t, sizeof t);
}

bool has_zero_column(const double m[16]) {
  for (int c = 0; c < 4; c++)
    if (m[c * 4] == 0 && m[c * 4 + 1] == 0 && m[c * 4 + 2] == 0 && m[c * 4 + 3] == 0)
      return true;
  return false;
}

static double det3(const double m[16]) {
  return m[0] * (m[5] * m[10] - m[9] * m[6]) - m[4] * (m[1] * m[10] - m[9] * m[2]) +
         m[8] * (m[1] * m[6] - m[5] * m[2]);
}

/* Gaussian elimination with partial pivoting. */
static double det4(const double m[16]) {
  double a[4][4], det = 1;
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 4; r++)
      a[r][c] = m[c * 4 + r];
  for (int c = 0; c < 4; c++) {
    int pivot = c;
    for (int r = c + 1; r < 4; r++)
      if (fabs(a[r][c]) > fabs(a[pivot][c]))
        pivot = r;
    if (a[pivot][c] == 0)
      return 0;
    if (pivot != c) {
      for (int k = 0; k < 4; k++) {
        double t = a[c][k];
        a[c][k] = a[pivot][k];
        a[pivot][k] = t;
      }
      det = -det;
    }
    det *= a[c][c];
    for (int r = c + 1; r < 4; r++) {
      double f = a[r][c] / a[c][c];
      for (int k = c; k < 4; k++)
        a[r][k] -= f * a[c][k];
    }
  }
  return det;
}

static double column_length(const double m[16], int c, int rows) {
  double sum = 0;
  for (int r = 0; r < rows; r++)
    sum += m[c * 4 + r] * m[c * 4 + r];
  return sqrt(sum);
}

/* Scale-free distance from singular: |det| over the product of the column lengths (Hadamard's
 * ratio: 1 for orthogonal columns, 0 for a singular matrix). Affine matrices use their 3x3 part,
 * so a large translation does not make a well-conditioned matrix look singular. */
static double hadamard_ratio(const double m[16]) {
  bool affine = m[3] == 0 && m[7] == 0 && m[11] == 0 && m[15] == 1;
  int dim = affine ? 3 : 4;
  double lengths = 1;
  for (int c = 0; c < dim; c++)
    lengths *= column_length(m, c, dim);
  return lengths == 0 ? 0 : fabs(affine ? det3(m) : det4(m)) / lengths;
}

inverse_class classify_inverse(const double m[16]) {
  if (has_zero_column(m))
    return INVERSE_SINGULAR;
  return hadamard_ratio(m) >= 1e-2 ? INVERSE_EXISTS : INVERSE_UNSURE;
}

static bool matrix_finite(const float m[16]) {
  for (int i = 0; i < 16; i++)
    if (!isfinite(m[i]))
      return false;
  return true;
}

const float IDENTITY[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

double largest(const double m[16]) {
  double x = 0;
  for (int i = 0; i < 16; i++)
    x = fmax(x, fabs(m[i]));
  return x;
}

void ref_extend(const world_ref *parent, const float local[16], world_ref *out) {
  double l[16];
  mat_of_float(local, l);
  if (!parent) {
    memcpy(out->m, l, sizeof l);
    for (int i = 0; i < 16; i++)
      out->bound[i] = fabs(l[i]);
    out->depth = 0;
    return;
  }
  mat_mul(parent->m, l, out->m);
  mat_mul_abs(parent->bound, l, out->bound);
  out->depth = parent->depth + 1;
}

double world_tolerance(const world_ref *ref, int i) {
  return WORLD_REL * (ref->depth + 1) * ref->bound[i] + TINY;
}

int slot_of(const model *m, scn_entity e) {
  if (e == SCN_ENTITY_NONE)
    return NONE_SLOT;
  for (int s = 0; s < MAX_SLOTS; s++)
    if (m->id[s] == e)
      return s;
  return NONE_SLOT;
}

int node_of(const model *m, int w, scn_entity e) {
  int s = slot_of(m, e);
  return s != NONE_SLOT && m->node[w][s].has ? s : NONE_SLOT;
}

scn_entity entity_of(const model *m, int s) { return s == NONE_SLOT ? SCN_ENTITY_NONE : m->id[s]; }

static bool name_ok(const char *name, size_t len) {
  if (len == 0 || len > SCN_NAME_MAX)
    return false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 0x20 || c == 0x7f || c == '/')
      return false;
  }
  return true; /* the test only generates valid UTF-8 */
}

bool is_ancestor_or_self(const model *m, int w, int a, int s) {
  for (; s != NONE_SLOT; s = m->node[w][s].parent)
    if (s == a)
      return true;
  return false;
}

int depth_of(const model *m, int w, int s) {
  int d = 0;
  for (s = m->node[w][s].parent; s != NONE_SLOT; s = m->node[w][s].parent)
    d++;
  return d;
}

int height_of(const model *m, int w, int s) {
  int top = depth_of(m, w, s), h = 0;
  for (int t = 0; t < MAX_SLOTS; t++)
    if (m->node[w][t].has && is_ancestor_or_self(m, w, s, t) && depth_of(m, w, t) - top > h)
      h = depth_of(m, w, t) - top;
  return h;
}

/* The transform named name among parent's children (NONE_SLOT: among the roots), other than
 * self; NONE_SLOT if none. */
static int sibling_named(const model *m, int w, int parent, const char *name, size_t len,
                         int self) {
  for (int s = 0; s < MAX_SLOTS; s++) {
    const model_node *n = &m->node[w][s];
    if (n->has && s != self && n->parent == parent && strlen(n->name) == len &&
        memcmp(n->name, name, len) == 0)
      return s;
  }
  return NONE_SLOT;
}

int children_of(const model *m, int w, int s, int *out) {
  int n = 0;
  for (int t = 0; t < MAX_SLOTS; t++)
    if (m->node[w][t].has && m->node[w][t].parent == s) {
      int k = n++;
      for (; k > 0 && m->node[w][out[k - 1]].seq > m->node[w][t].seq; k--)
        out[k] = out[k - 1];
      out[k] = t;
    }
  return n;
}

static void append_under(model *m, int w, int s, int parent) {
  m->node[w][s].parent = parent;
  m->node[w][s].seq = ++m->next_seq;
}

void model_world(const model *m, int w, int s, world_ref *out) {
  int path[MAX_SLOTS], n = 0;
  for (int t = s; t != NONE_SLOT; t = m->node[w][t].parent)
    path[n++] = t;
  world_ref acc, next;
  ref_extend(NULL, m->node[w][path[n - 1]].local, &acc);
  for (int k = n - 1; k-- > 0;) {
    ref_extend(&acc, m->node[w][path[k]].local, &next);
    acc = next;
  }
  *out = acc;
}

static inverse_class inverse_class_of(const model *m, int w, int s) {
  world_ref ref;
  model_world(m, w, s, &ref);
  return classify_inverse(ref.m);
}

int model_add_entity(model *m, scn_entity e) {
  for (int s = 0; s < MAX_SLOTS; s++)
    if (!m->id[s]) {
      m->id[s] = e;
      for (int w = 0; w < NWORLDS; w++)
        memset(&m->node[w][s], 0, sizeof m->node[w][s]);
      m->alive++;
      return s;
    }
  return NONE_SLOT;
}

int free_slots(const model *m) {
  int n = 0;
  for (int s = 0; s < MAX_SLOTS; s++)
    n += !m->id[s];
  return n;
}

int model_create(model *m, int w, scn_entity e, scn_entity parent, const char *name,
                 const float *local) {
  if (local && !matrix_finite(local))
    return SCN_INVALID;
  if (name && !name_ok(name, strlen(name)))
    return SCN_INVALID;
  int s = slot_of(m, e), ps = NONE_SLOT;
  if (s == NONE_SLOT)
    return SCN_NOT_FOUND;
  if (parent != SCN_ENTITY_NONE && (ps = node_of(m, w, parent)) == NONE_SLOT)
    return SCN_NOT_FOUND;
  if (m->node[w][s].has)
    return SCN_EXISTS;
  if (name && sibling_named(m, w, ps, name, strlen(name), NONE_SLOT) != NONE_SLOT)
    return SCN_EXISTS;
  model_node *n = &m->node[w][s];
  n->has = true;
  append_under(m, w, s, ps);
  snprintf(n->name, sizeof n->name, "%s", name ? name : "");
  memcpy(n->local, local ? local : IDENTITY, sizeof n->local);
  return SCN_OK;
}

/* Children of a non-recursive destroy become roots: a name already among the roots clashes. */
static bool orphan_name_clash(const model *m, int w, int s) {
  for (int c = 0; c < MAX_SLOTS; c++) {
    const model_node *n = &m->node[w][c];
    if (n->has && n->parent == s && n->name[0] &&
        sibling_named(m, w, NONE_SLOT, n->name, strlen(n->name), s) != NONE_SLOT)
      return true;
  }
  return false;
}

int model_destroy(model *m, int w, scn_entity e, bool recursive) {
  int s = node_of(m, w, e);
  if (s == NONE_SLOT)
    return SCN_NOT_FOUND;
  if (!recursive && orphan_name_clash(m, w, s))
    return SCN_EXISTS;
  if (recursive) {
    bool doomed[MAX_SLOTS] = {false};
    for (int t = 0; t < MAX_SLOTS; t++)
      doomed[t] = m->node[w][t].has && is_ancestor_or_self(m, w, s, t);
    for (int t = 0; t < MAX_SLOTS; t++)
      if (doomed[t])
        m->node[w][t].has = false;
    return SCN_OK;
  }
  int kids[MAX_SLOTS], n = children_of(m, w, s, kids);
  for (int k = 0; k < n; k++)
    append_under(m, w, kids[k], NONE_SLOT);
  m->node[w][s].has = false;
  return SCN_OK;
}

int model_link(model *m, int w, scn_entity e, scn_entity parent, scn_keep keep, bool *moved) {
  *moved = false;
  int s = node_of(m, w, e), ps = NONE_SLOT;
  if (s == NONE_SLOT)
    return SCN_NOT_FOUND;
  if (parent != SCN_ENTITY_NONE && (ps = node_of(m, w, parent)) == NONE_SLOT)
    return SCN_NOT_FOUND;
  if (m->node[w][s].parent == ps)
    return SCN_OK;
  if (ps != NONE_SLOT && is_ancestor_or_self(m, w, s, ps))
    return SCN_CYCLE;
  const char *name = m->node[w][s].name;
  if (name[0] && sibling_named(m, w, ps, name, strlen(name), s) != NONE_SLOT)
    return SCN_EXISTS;
  if (keep == SCN_KEEP_WORLD && ps != NONE_SLOT) {
    inverse_class c = inverse_class_of(m, w, ps);
    if (c != INVERSE_EXISTS)
      return c == INVERSE_SINGULAR ? SCN_SINGULAR : MODEL_UNSURE;
  }
  append_under(m, w, s, ps);
  *moved = true;
  return SCN_OK;
}

int model_set_local(model *m, int w, scn_entity e, const float local[16]) {
  if (!matrix_finite(local))
    return SCN_INVALID;
  int s = node_of(m, w, e);
  if (s == NONE_SLOT)
    return SCN_NOT_FOUND;
  memcpy(m->node[w][s].local, local, sizeof m->node[w][s].local);
  return SCN_OK;
}

int model_set_world(model *m, int w, scn_entity e, const float world[16], bool *adopt) {
  *adopt = false;
  if (!matrix_finite(world))
    return SCN_INVALID;
  int s = node_of(m, w, e);
  if (s == NONE_SLOT)
    return SCN_NOT_FOUND;
  int ps = m->node[w][s].parent;
  if (ps == NONE_SLOT) {
    memcpy(m->node[w][s].local, world, sizeof m->node[w][s].local);
    return SCN_OK;
  }
  inverse_class c = inverse_class_of(m, w, ps);
  if (c != INVERSE_EXISTS)
    return c == INVERSE_SINGULAR ? SCN_SINGULAR : MODEL_UNSURE;
  *adopt = true;
  return SCN_OK;
}

int model_rename(model *m, int w, scn_entity e, const char *name) {
  if (name && !name_ok(name, strlen(name)))
    return SCN_INVALID;
  int s = node_of(m, w, e);
  if (s == NONE_SLOT)
    return SCN_NOT_FOUND;
  model_node *n = &m->node[w][s];
  if (strcmp(n->name, name ? name : "") == 0)
    return SCN_OK;
  if (name && sibling_named(m, w, n->parent, name, strlen(name), s) != NONE_SLOT)
    return SCN_EXISTS;
  snprintf(n->name, sizeof n->name, "%s", name ? name : "");
  return SCN_OK;
}

int model_entity_destroy(model *m, scn_entity e) {
  int s = slot_of(m, e);
  if (s == NONE_SLOT)
    return SCN_NOT_FOUND;
  for (int w = 0; w < NWORLDS; w++)
    if (m->node[w][s].has && orphan_name_clash(m, w, s))
      return SCN_EXISTS;
  for (int w = 0; w < NWORLDS; w++)
    if (m->node[w][s].has)
      model_destroy(m, w, e, false);
  m->id[s] = SCN_ENTITY_NONE;
  m->alive--;
  return SCN_OK;
}

int model_find_path(const model *m, int w, const char *path, size_t len, int *out) {
  for (size_t start = 0, end = 0; end <= len; end++)
    if (end == len || path[end] == '/') {
      if (!name_ok(path + start, end - start))
        return SCN_INVALID;
      start = end + 1;
    }
  int parent = NONE_SLOT;
  for (size_t start = 0, end = 0; end <= len; end++)
    if (end == len || path[end] == '/') {
      parent = sibling_named(m, w, parent, path + start, end - start, NONE_SLOT);
      if (parent == NONE_SLOT)
        return SCN_NOT_FOUND;
      start = end + 1;
    }
  *out = parent;
  return SCN_OK;
}

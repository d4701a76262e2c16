/* The transform operations of one world: validation first, then the undo record (inside a
 * batch), then the change; a failed operation returns before touching anything. */
#include "core_internal.h"

#include <math.h>
#include <string.h>

static int find(const scn_world *w, scn_entity e, uint32_t *i) {
  if (e == SCN_ENTITY_NONE || e > SCN_ENTITY_MAX)
    return SCN_NOT_FOUND;
  *i = scn__tm_lookup(&w->tm, e);
  return *i == SCN_NIL ? SCN_NOT_FOUND : SCN_OK;
}

static scn_entity entity_or_none(const scn__tm *tm, uint32_t i) {
  return i == SCN_NIL ? SCN_ENTITY_NONE : tm->entity[i];
}

bool scn_transform_exists(const scn_world *w, scn_entity e) {
  uint32_t i;
  return find(w, e, &i) == SCN_OK;
}

static bool name_taken(const scn__tm *tm, uint32_t parent, const char *name, uint32_t self) {
  uint32_t other = scn__tm_lookup_name(tm, entity_or_none(tm, parent), name, strlen(name));
  return other != SCN_NIL && other != self;
}

int scn_transform_create(scn_world *w, scn_entity e, scn_entity parent, const char *name,
                         const float local[16]) {
  scn__tm *tm = &w->tm;
  scn_scene *scene = w->scene;
  mat4 m;
  if (local) {
    if (!scn_matrix_finite(local))
      return SCN_INVALID;
    memcpy(m, local, sizeof m);
  } else {
    glm_mat4_identity(m);
  }
  if (name && !scn_name_valid(name, strlen(name)))
    return SCN_INVALID;
  if (!scn_entity_alive(scene, e))
    return SCN_NOT_FOUND;
  uint32_t p = SCN_NIL, i;
  if (parent != SCN_ENTITY_NONE && find(w, parent, &p) != SCN_OK)
    return SCN_NOT_FOUND;
  if (scn__tm_lookup(tm, e) != SCN_NIL)
    return SCN_EXISTS;
  if (tm->n >= scene->limits.max_transforms)
    return SCN_LIMIT;
  if (name && name_taken(tm, p, name, SCN_NIL))
    return SCN_EXISTS;
  if (scn__recording(scene) && !scn__undo_push(scene, SCN_UNDO_CREATED, w, e))
    return SCN_NOMEM;
  int rc = scn__tm_insert(tm, e, p, SCN_NIL, name, m, NULL, 0, &i);
  if (rc != SCN_OK && scn__recording(scene))
    scene->undo.len--;
  if (rc == SCN_OK)
    scn__tm_log_event(tm, e, SCN_EVENT_CREATED);
  return rc;
}

/* Children of a non-recursive destroy become roots: their names must stay unique there. */
int scn__transform_destroy_check(scn_world *w, scn_entity e) {
  scn__tm *tm = &w->tm;
  uint32_t i;
  if (find(w, e, &i) != SCN_OK)
    return SCN_NOT_FOUND;
  for (uint32_t c = tm->first_child[i]; c != SCN_NIL; c = tm->next[c]) {
    const char *name = scn__tm_name(tm, c);
    if (!name)
      continue;
    uint32_t other = scn__tm_lookup_name(tm, SCN_ENTITY_NONE, name, strlen(name));
    if (other != SCN_NIL && other != i)
      return SCN_EXISTS;
  }
  return SCN_OK;
}

/* Pre-order list of the subtree's entities in tm->scratch_e. */
static int collect_subtree(scn__tm *tm, uint32_t root, size_t *count) {
  size_t n = 0;
  for (uint32_t i = root; i != SCN_NIL; i = scn__tm_next_preorder(tm, i, root)) {
    if (scn__vec_reserve(&tm->scratch_e, sizeof(scn_entity), n + 1) != SCN_OK)
      return SCN_NOMEM;
    SCN_VEC_AT(tm->scratch_e, scn_entity, n++) = tm->entity[i];
  }
  *count = n;
  return SCN_OK;
}

static int record_destroy(scn_world *w, uint32_t i, bool recursive, size_t count) {
  scn_scene *scene = w->scene;
  scn__tm *tm = &w->tm;
  scn__undo *u = scn__undo_push(scene, SCN_UNDO_DESTROYED, w, tm->entity[i]);
  if (!u)
    return SCN_NOMEM;
  u->parent = entity_or_none(tm, tm->parent[i]);
  u->before = entity_or_none(tm, tm->next[i]);
  u->recursive = recursive;
  u->nodes_off = scene->undo_nodes.len;
  int rc = scn__undo_save_node(scene, tm, i, u->parent);
  if (recursive) {
    for (size_t k = 1; rc == SCN_OK && k < count; k++) {
      uint32_t j = scn__tm_lookup(tm, SCN_VEC_AT(tm->scratch_e, scn_entity, k));
      rc = scn__undo_save_node(scene, tm, j, tm->entity[tm->parent[j]]);
    }
  } else {
    for (uint32_t c = tm->first_child[i]; rc == SCN_OK && c != SCN_NIL; c = tm->next[c])
      rc = scn__undo_save_node(scene, tm, c, tm->entity[i]);
  }
  /* undo_push may have moved the undo array: look the record up again. */
  u = &SCN_VEC_AT(scene->undo, scn__undo, scene->undo.len - 1);
  u->nodes_len = scene->undo_nodes.len - u->nodes_off;
  if (rc != SCN_OK) {
    scene->undo_nodes.len = u->nodes_off;
    scene->undo.len--;
  }
  return rc;
}

int scn__transform_destroy(scn_world *w, scn_entity e, bool recursive) {
  scn__tm *tm = &w->tm;
  uint32_t i;
  if (find(w, e, &i) != SCN_OK)
    return SCN_NOT_FOUND;
  if (!recursive) {
    int rc = scn__transform_destroy_check(w, e);
    if (rc != SCN_OK)
      return rc;
  }
  /* Children keep their world matrices, the undo record keeps exact ones, and removal moves
   * instances: flush first (it may re-sort, so look the instance up again). */
  scn__tm_flush(tm);
  i = scn__tm_lookup(tm, e);
  size_t count = 1;
  if (recursive && collect_subtree(tm, i, &count) != SCN_OK)
    return SCN_NOMEM;
  if (scn__recording(w->scene) && record_destroy(w, i, recursive, count) != SCN_OK)
    return SCN_NOMEM;
  if (!recursive) {
    while (tm->first_child[i] != SCN_NIL) {
      uint32_t c = tm->first_child[i];
      glm_mat4_copy(tm->world[c], tm->local[c]);
      scn__tm_after_local(tm, c);
      scn__tm_move(tm, c, SCN_NIL, SCN_NIL);
      scn__tm_log_event(tm, tm->entity[c], SCN_EVENT_RELINKED);
    }
    scn__tm_log_event(tm, e, SCN_EVENT_DESTROYED);
    scn__tm_remove_leaf(tm, i);
    return SCN_OK;
  }
  /* Leaves first, so every removed instance has no children left. */
  for (size_t k = count; k-- > 0;) {
    scn_entity victim = SCN_VEC_AT(tm->scratch_e, scn_entity, k);
    scn__tm_log_event(tm, victim, SCN_EVENT_DESTROYED);
    scn__tm_remove_leaf(tm, scn__tm_lookup(tm, victim));
  }
  return SCN_OK;
}

int scn_transform_destroy(scn_world *w, scn_entity e, bool recursive) {
  return scn__transform_destroy(w, e, recursive);
}

int scn_transform_link(scn_world *w, scn_entity e, scn_entity parent, scn_keep keep) {
  scn__tm *tm = &w->tm;
  uint32_t i, p = SCN_NIL;
  if (find(w, e, &i) != SCN_OK)
    return SCN_NOT_FOUND;
  if (parent != SCN_ENTITY_NONE && find(w, parent, &p) != SCN_OK)
    return SCN_NOT_FOUND;
  if (tm->parent[i] == p)
    return SCN_OK;
  for (uint32_t a = p; a != SCN_NIL; a = tm->parent[a])
    if (a == i)
      return SCN_CYCLE;
  const char *name = scn__tm_name(tm, i);
  if (name && name_taken(tm, p, name, i))
    return SCN_EXISTS;
  mat4 local;
  glm_mat4_copy(tm->local[i], local);
  if (keep == SCN_KEEP_WORLD) {
    mat4 we;
    scn__tm_world_of(tm, i, we);
    if (p == SCN_NIL) {
      glm_mat4_copy(we, local);
    } else {
      mat4 pw;
      scn__tm_world_of(tm, p, pw);
      if (scn__mul_inverse(pw, we, local) != SCN_OK)
        return SCN_SINGULAR;
    }
  }
  if (scn__recording(w->scene)) {
    scn__undo *u = scn__undo_push(w->scene, SCN_UNDO_LINKED, w, e);
    if (!u)
      return SCN_NOMEM;
    u->parent = entity_or_none(tm, tm->parent[i]);
    u->before = entity_or_none(tm, tm->next[i]);
    glm_mat4_copy(tm->local[i], u->local);
  }
  scn__tm_move(tm, i, p, SCN_NIL);
  glm_mat4_copy(local, tm->local[i]);
  scn__tm_after_local(tm, i);
  scn__tm_mark_dirty(tm, i);
  scn__tm_log_event(tm, e, SCN_EVENT_RELINKED);
  return SCN_OK;
}

static int set_local(scn_world *w, uint32_t i, mat4 m) {
  scn__tm *tm = &w->tm;
  if (memcmp(tm->local[i], m, sizeof(mat4)) == 0)
    return SCN_OK;
  if (scn__recording(w->scene)) {
    scn__undo *u = scn__undo_push(w->scene, SCN_UNDO_SET_LOCAL, w, tm->entity[i]);
    if (!u)
      return SCN_NOMEM;
    glm_mat4_copy(tm->local[i], u->local);
  }
  /* no history record here: the next flush compares the dirty ones with their shadows */
  scn__tm_mark_dirty(tm, i);
  glm_mat4_copy(m, tm->local[i]);
  return SCN_OK;
}

int scn_transform_set_local(scn_world *w, scn_entity e, const float local[16]) {
  uint32_t i;
  if (!scn_matrix_finite(local))
    return SCN_INVALID;
  if (find(w, e, &i) != SCN_OK)
    return SCN_NOT_FOUND;
  mat4 m;
  memcpy(m, local, sizeof m);
  return set_local(w, i, m);
}

/* The local matrix that puts i at world matrix m under its current parent. */
static int set_world(scn_world *w, uint32_t i, mat4 m) {
  scn__tm *tm = &w->tm;
  uint32_t p = tm->parent[i];
  if (p == SCN_NIL)
    return set_local(w, i, m);
  mat4 pw, local;
  scn__tm_world_of(tm, p, pw);
  if (scn__mul_inverse(pw, m, local) != SCN_OK)
    return SCN_SINGULAR;
  return set_local(w, i, local);
}

int scn_transform_set_world(scn_world *w, scn_entity e, const float world[16]) {
  uint32_t i;
  if (!scn_matrix_finite(world))
    return SCN_INVALID;
  if (find(w, e, &i) != SCN_OK)
    return SCN_NOT_FOUND;
  mat4 m;
  memcpy(m, world, sizeof m);
  return set_world(w, i, m);
}

static bool finite_part(const float *v, int n) {
  for (int k = 0; k < n; k++)
    if (!isfinite(v[k]))
      return false;
  return true;
}

int scn_transform_set_parts(scn_world *w, scn_entity e, bool world_space, const float t[3],
                            const float r[4], const float s[3]) {
  scn__tm *tm = &w->tm;
  uint32_t i;
  if (!t && !r && !s)
    return SCN_INVALID;
  /* compose's checks on the parts, made before the lookup as set_local makes its own */
  if ((t && !finite_part(t, 3)) || (s && !finite_part(s, 3)) || (r && !finite_part(r, 4)) ||
      (r && r[0] == 0 && r[1] == 0 && r[2] == 0 && r[3] == 0))
    return SCN_INVALID;
  if (find(w, e, &i) != SCN_OK)
    return SCN_NOT_FOUND;
  /* Plain float arrays for the public functions (a mat4 is the same 16 floats). */
  mat4 cur, m;
  float c[16], out[16];
  if (world_space)
    scn__tm_world_of(tm, i, cur);
  else
    glm_mat4_copy(tm->local[i], cur);
  memcpy(c, cur, sizeof c);
  /* only the parts kept are read (the rotation is the dear one) */
  float ct[3], cr[4], cs[3];
  if (scn_decompose_trs(c, t ? NULL : ct, r ? NULL : cr, s ? NULL : cs) != SCN_OK)
    return SCN_INVALID;
  if (!r && !s) {
    /* Only the translation changes: the rest of the matrix stays bit for bit, rather than
     * going through a decomposition and back (a script moving something every frame would
     * otherwise let its rotation and scale wander by rounding). */
    memcpy(out, c, sizeof out);
    out[12] = t[0], out[13] = t[1], out[14] = t[2];
  } else if (scn_compose_trs(t ? t : ct, r ? r : cr, s ? s : cs, out) != SCN_OK) {
    return SCN_INVALID;
  }
  memcpy(m, out, sizeof m);
  return world_space ? set_world(w, i, m) : set_local(w, i, m);
}

int scn_transform_rename(scn_world *w, scn_entity e, const char *name) {
  scn__tm *tm = &w->tm;
  uint32_t i;
  if (name && !scn_name_valid(name, strlen(name)))
    return SCN_INVALID;
  if (find(w, e, &i) != SCN_OK)
    return SCN_NOT_FOUND;
  const char *old = scn__tm_name(tm, i);
  if ((!old && !name) || (old && name && strcmp(old, name) == 0))
    return SCN_OK;
  if (name && name_taken(tm, tm->parent[i], name, i))
    return SCN_EXISTS;
  if (scn__recording(w->scene)) {
    uint32_t off = old ? scn__undo_name(w->scene, old) : UINT32_MAX;
    if (old && off == UINT32_MAX)
      return SCN_NOMEM;
    scn__undo *u = scn__undo_push(w->scene, SCN_UNDO_RENAMED, w, e);
    if (!u)
      return SCN_NOMEM;
    u->name_off = off;
  }
  int rc = scn__tm_set_name(tm, i, name);
  if (rc != SCN_OK && scn__recording(w->scene))
    w->scene->undo.len--;
  return rc;
}

int scn_transform_get(scn_world *w, scn_entity e, scn_transform_info *out) {
  scn__tm *tm = &w->tm;
  uint32_t i;
  if (find(w, e, &i) != SCN_OK)
    return SCN_NOT_FOUND;
  scn__tm_flush(tm);
  i = scn__tm_lookup(tm, e); /* a flush may re-sort the arrays */
  out->entity = e;
  out->parent = entity_or_none(tm, tm->parent[i]);
  out->name = scn__tm_name(tm, i);
  memcpy(out->local, tm->local[i], sizeof out->local);
  memcpy(out->world, tm->world[i], sizeof out->world);
  return SCN_OK;
}

int scn_transform_children(scn_world *w, scn_entity e, scn_entity *out, size_t cap, size_t *count) {
  scn__tm *tm = &w->tm;
  uint32_t i;
  if (find(w, e, &i) != SCN_OK)
    return SCN_NOT_FOUND;
  size_t n = 0;
  for (uint32_t c = tm->first_child[i]; c != SCN_NIL; c = tm->next[c], n++)
    if (n < cap)
      out[n] = tm->entity[c];
  *count = n;
  return SCN_OK;
}

/* Every segment a valid name (so no empty one): checked before any lookup, so an ill-formed
 * path is INVALID whether or not a prefix of it exists. */
static bool path_valid(const char *path, size_t path_len) {
  size_t start = 0;
  for (;;) {
    size_t end = start;
    while (end < path_len && path[end] != '/')
      end++;
    if (!scn_name_valid(path + start, end - start))
      return false;
    if (end == path_len)
      return true;
    start = end + 1;
  }
}

int scn_transform_find(scn_world *w, const char *path, size_t path_len, scn_entity *out) {
  scn__tm *tm = &w->tm;
  scn_entity parent = SCN_ENTITY_NONE;
  size_t start = 0;
  if (!path_valid(path, path_len))
    return SCN_INVALID;
  for (;;) {
    size_t end = start;
    while (end < path_len && path[end] != '/')
      end++;
    uint32_t i = scn__tm_lookup_name(tm, parent, path + start, end - start);
    if (i == SCN_NIL)
      return SCN_NOT_FOUND;
    parent = tm->entity[i];
    if (end == path_len)
      break;
    start = end + 1;
  }
  *out = parent;
  return SCN_OK;
}

int scn_transform_relative(scn_world *w, scn_entity e, scn_entity to, float out[16]) {
  scn__tm *tm = &w->tm;
  uint32_t i, j;
  if (find(w, e, &i) != SCN_OK || find(w, to, &j) != SCN_OK)
    return SCN_NOT_FOUND;
  scn__tm_flush(tm);
  i = scn__tm_lookup(tm, e);
  j = scn__tm_lookup(tm, to);
  mat4 r;
  if (scn__mul_inverse(tm->world[j], tm->world[i], r) != SCN_OK)
    return SCN_SINGULAR;
  memcpy(out, r, sizeof r);
  return SCN_OK;
}

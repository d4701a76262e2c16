/* Atomic batches: every mutation inside a batch leaves an undo record; rollback applies them
 * in reverse, so each sees exactly the state its operation left behind. */
#include "core_internal.h"

#include <stdlib.h>
#include <string.h>

int scn_batch_begin(scn_scene *scene) {
  if (scene->in_batch)
    return SCN_STATE;
  scene->in_batch = true;
  scene->undo.len = scene->undo_nodes.len = scene->undo_names.len = 0;
  return SCN_OK;
}

bool scn_batch_active(const scn_scene *scene) { return scene->in_batch; }

void scn_batch_commit(scn_scene *scene) {
  scene->in_batch = false;
  scene->undo.len = scene->undo_nodes.len = scene->undo_names.len = 0;
}

scn__undo *scn__undo_push(scn_scene *scene, scn__undo_kind kind, scn_world *w, scn_entity e) {
  if (scn__vec_reserve(&scene->undo, sizeof(scn__undo), scene->undo.len + 1) != SCN_OK)
    return NULL;
  scn__undo *u = &SCN_VEC_AT(scene->undo, scn__undo, scene->undo.len++);
  memset(u, 0, sizeof *u);
  u->kind = kind;
  u->world = w;
  u->entity = e;
  u->name_off = UINT32_MAX;
  u->events_len = w ? w->tm.events.len : 0;
  return u;
}

uint32_t scn__undo_name(scn_scene *scene, const char *name) {
  size_t len = strlen(name) + 1, off = scene->undo_names.len;
  if (off + len > UINT32_MAX || scn__vec_reserve(&scene->undo_names, 1, off + len) != SCN_OK)
    return UINT32_MAX;
  memcpy((char *)scene->undo_names.data + off, name, len);
  scene->undo_names.len += len;
  return (uint32_t)off;
}

int scn__undo_save_node(scn_scene *scene, scn__tm *tm, uint32_t i, scn_entity parent) {
  const char *name = scn__tm_name(tm, i);
  uint32_t off = name ? scn__undo_name(scene, name) : UINT32_MAX;
  if (name && off == UINT32_MAX)
    return SCN_NOMEM;
  if (scn__vec_reserve(&scene->undo_nodes, sizeof(scn__undo_node), scene->undo_nodes.len + 1) !=
      SCN_OK)
    return SCN_NOMEM;
  scn__undo_node *n = &SCN_VEC_AT(scene->undo_nodes, scn__undo_node, scene->undo_nodes.len++);
  n->entity = tm->entity[i];
  n->parent = parent;
  n->name_off = off;
  n->changed = tm->changed[i];
  glm_mat4_copy(tm->local[i], n->local);
  glm_mat4_copy(tm->world[i], n->world);
  return SCN_OK;
}

static const char *undo_name(scn_scene *scene, uint32_t off) {
  return off == UINT32_MAX ? NULL : (const char *)scene->undo_names.data + off;
}

static uint32_t lookup_or_nil(scn__tm *tm, scn_entity e) {
  return e == SCN_ENTITY_NONE ? SCN_NIL : scn__tm_lookup(tm, e);
}

/* Rollback only re-creates what the batch removed, so the room it needs was there before;
 * an allocation failure here would leave a half state, which we refuse to continue from. */
static void must(int rc) {
  if (rc != SCN_OK)
    abort();
}

static void undo_destroy(scn_scene *scene, scn__undo *u) {
  scn__tm *tm = &u->world->tm;
  scn__undo_node *nodes = &SCN_VEC_AT(scene->undo_nodes, scn__undo_node, u->nodes_off);
  uint32_t top, i;
  must(scn__tm_insert(tm, nodes[0].entity, lookup_or_nil(tm, nodes[0].parent),
                      lookup_or_nil(tm, u->before), undo_name(scene, nodes[0].name_off),
                      nodes[0].local, nodes[0].world, nodes[0].changed, &top));
  for (size_t k = 1; k < u->nodes_len; k++) {
    scn__undo_node *n = &nodes[k];
    if (u->recursive) {
      must(scn__tm_insert(tm, n->entity, scn__tm_lookup(tm, n->parent), SCN_NIL,
                          undo_name(scene, n->name_off), n->local, n->world, n->changed, &i));
    } else {
      /* A former child, now a root with local == world: back under its parent. */
      i = scn__tm_lookup(tm, n->entity);
      scn__tm_move(tm, i, scn__tm_lookup(tm, u->entity), SCN_NIL);
      glm_mat4_copy(n->local, tm->local[i]);
      scn__tm_after_local(tm, i);
    }
  }
}

void scn_batch_rollback(scn_scene *scene) {
  scene->replaying = true;
  for (size_t k = scene->undo.len; k-- > 0;) {
    scn__undo *u = &SCN_VEC_AT(scene->undo, scn__undo, k);
    scn__tm *tm = u->world ? &u->world->tm : NULL;
    uint32_t i = tm ? lookup_or_nil(tm, u->entity) : SCN_NIL;
    switch (u->kind) {
    case SCN_UNDO_ENTITY_CREATED:
      scn__entity_uncreate(scene, u->entity, u->fresh_slot, u->was_retired);
      break;
    case SCN_UNDO_CREATED:
      scn__tm_remove_leaf(tm, i);
      break;
    case SCN_UNDO_SET_LOCAL:
      glm_mat4_copy(u->local, tm->local[i]);
      scn__tm_after_local(tm, i);
      scn__tm_mark_dirty(tm, i);
      break;
    case SCN_UNDO_LINKED:
      scn__tm_move(tm, i, lookup_or_nil(tm, u->parent), lookup_or_nil(tm, u->before));
      glm_mat4_copy(u->local, tm->local[i]);
      scn__tm_after_local(tm, i);
      scn__tm_mark_dirty(tm, i);
      break;
    case SCN_UNDO_RENAMED:
      must(scn__tm_set_name(tm, i, undo_name(scene, u->name_off)));
      break;
    case SCN_UNDO_DESTROYED:
      undo_destroy(scene, u);
      break;
    }
    /* The events of a rolled-back operation never happened. */
    if (tm && tm->events.len > u->events_len)
      tm->events.len = u->events_len;
  }
  scene->replaying = false;
  scn_batch_commit(scene);
}

/* Ending many things in one step, all or nothing: a list of entities (entity.destroy with
 * "entities"), and a world with the entities that only it used (world.destroy with
 * "entities"), so that a match's end leaves no id behind. */
#include "core_internal.h"

#include <stdlib.h>

int scn_entity_destroy_many(scn_scene *scene, const scn_entity *ids, size_t n, size_t *failed) {
  *failed = 0;
  if (scene->in_batch)
    return SCN_STATE;
  int rc = scn__entities_check(scene, ids, n, failed);
  if (rc != SCN_OK)
    return rc;
  /* One after another, each transform as scn_entity_destroy removes it; the undo records of a
   * batch take them all back when one cannot go (a child that would become a root with the name
   * of another root). */
  scn_batch_begin(scene);
  for (size_t k = 0; k < n; k++)
    for (size_t w = 0; w < scene->nworlds; w++) {
      if (!scn_transform_exists(scene->worlds[w], ids[k]))
        continue;
      rc = scn__transform_destroy(scene->worlds[w], ids[k], false);
      if (rc != SCN_OK) {
        scn_batch_rollback(scene);
        *failed = k;
        return rc;
      }
    }
  scn_batch_commit(scene);
  scn__entities_retire(scene, ids, n);
  return SCN_OK;
}

static int cmp_entity(const void *a, const void *b) {
  scn_entity x = *(const scn_entity *)a, y = *(const scn_entity *)b;
  return (x > y) - (x < y);
}

static bool used_elsewhere(const scn_scene *scene, const scn_world *w, scn_entity e) {
  for (size_t k = 0; k < scene->nworlds; k++)
    if (scene->worlds[k] != w && scn_transform_exists(scene->worlds[k], e))
      return true;
  return false;
}

size_t scn_world_orphans(const scn_world *w, scn_entity *out) {
  const scn__tm *tm = &w->tm;
  size_t n = 0;
  for (uint32_t i = 0; i < tm->n; i++)
    if (!used_elsewhere(w->scene, w, tm->entity[i]))
      out[n++] = tm->entity[i];
  if (n > 1)
    qsort(out, n, sizeof *out, cmp_entity);
  return n;
}

int scn_world_destroy_with(scn_scene *scene, const char *name, const scn_entity *ids, size_t n,
                           size_t *failed) {
  *failed = 0;
  if (scene->in_batch)
    return SCN_STATE;
  size_t i = scn__world_index(scene, name);
  if (i == SIZE_MAX)
    return SCN_NOT_FOUND;
  scn_world *w = scene->worlds[i];
  int rc = scn__entities_check(scene, ids, n, failed);
  if (rc != SCN_OK)
    return rc;
  for (size_t k = 0; k < n; k++)
    if (used_elsewhere(scene, w, ids[k])) {
      *failed = k;
      return SCN_STATE;
    }
  for (size_t k = i + 1; k < scene->nworlds; k++)
    scene->worlds[k - 1] = scene->worlds[k];
  scene->nworlds--;
  scn__world_free(w);
  scn__entities_retire(scene, ids, n);
  return SCN_OK;
}

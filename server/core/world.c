/* The scene: entity registry plus the registry of named worlds, in creation order. */
#include "core_internal.h"

#include <stdlib.h>
#include <string.h>

scn_scene *scn_scene_new(const scn_limits *limits) {
  scn_scene *scene = calloc(1, sizeof *scene);
  if (!scene)
    return NULL;
  if (limits)
    scene->limits = *limits;
  if (!scene->limits.max_worlds)
    scene->limits.max_worlds = 1024;
  if (!scene->limits.max_transforms)
    scene->limits.max_transforms = 10000000;
  if (!scene->limits.max_entities)
    scene->limits.max_entities = 100000000;
  return scene;
}

void scn__world_free(scn_world *w) {
  scn__tm_free(&w->tm);
  free(w);
}

void scn_scene_free(scn_scene *scene) {
  if (!scene)
    return;
  for (size_t i = 0; i < scene->nworlds; i++)
    scn__world_free(scene->worlds[i]);
  free(scene->worlds);
  scn__entities_free(&scene->ents);
  scn__vec_free(&scene->undo);
  scn__vec_free(&scene->undo_nodes);
  scn__vec_free(&scene->undo_names);
  free(scene);
}

const scn_limits *scn_scene_limits(const scn_scene *scene) { return &scene->limits; }

size_t scn__world_index(const scn_scene *scene, const char *name) {
  uint64_t h = scn__hash_bytes(name, strlen(name), 0);
  for (size_t i = 0; i < scene->nworlds; i++)
    if (scene->worlds[i]->name_hash == h && strcmp(scene->worlds[i]->name, name) == 0)
      return i;
  return SIZE_MAX;
}

scn_world *scn_world_find(const scn_scene *scene, const char *name) {
  size_t i = scn__world_index(scene, name);
  return i == SIZE_MAX ? NULL : scene->worlds[i];
}

int scn_world_create(scn_scene *scene, const char *name, scn_world **out) {
  if (scene->in_batch)
    return SCN_STATE;
  if (!scn_world_name_valid(name, strlen(name)))
    return SCN_INVALID;
  if (scn__world_index(scene, name) != SIZE_MAX)
    return SCN_EXISTS;
  if (scene->nworlds >= scene->limits.max_worlds)
    return SCN_LIMIT;
  if (scene->nworlds == scene->worlds_cap) {
    size_t cap = scene->worlds_cap ? scene->worlds_cap * 2 : 8;
    scn_world **p = realloc(scene->worlds, sizeof *p * cap);
    if (!p)
      return SCN_NOMEM;
    scene->worlds = p;
    scene->worlds_cap = cap;
  }
  scn_world *w = calloc(1, sizeof *w);
  if (!w || scn__tm_init(&w->tm) != SCN_OK) {
    free(w);
    return SCN_NOMEM;
  }
  w->scene = scene;
  strcpy(w->name, name);
  w->name_hash = scn__hash_bytes(name, strlen(name), 0);
  scene->worlds[scene->nworlds++] = w;
  if (out)
    *out = w;
  return SCN_OK;
}

int scn_world_destroy(scn_scene *scene, const char *name) {
  if (scene->in_batch)
    return SCN_STATE;
  size_t i = scn__world_index(scene, name);
  if (i == SIZE_MAX)
    return SCN_NOT_FOUND;
  scn__world_free(scene->worlds[i]);
  memmove(&scene->worlds[i], &scene->worlds[i + 1], sizeof(scn_world *) * (scene->nworlds - i - 1));
  scene->nworlds--;
  return SCN_OK;
}

size_t scn_world_count(const scn_scene *scene) { return scene->nworlds; }

scn_world *scn_world_at(const scn_scene *scene, size_t index) {
  return index < scene->nworlds ? scene->worlds[index] : NULL;
}

const char *scn_world_name(const scn_world *w) { return w->name; }

size_t scn_world_transform_count(const scn_world *w) { return w->tm.n; }

void scn_world_set_userdata(scn_world *w, uint64_t value) { w->userdata = value; }

uint64_t scn_world_userdata(const scn_world *w) { return w->userdata; }

size_t scn_scene_transform_count(const scn_scene *scene) {
  size_t n = 0;
  for (size_t i = 0; i < scene->nworlds; i++)
    n += scene->worlds[i]->tm.n;
  return n;
}

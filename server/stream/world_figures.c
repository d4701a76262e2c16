#include "stream/world_figures.h"

#include <stdlib.h>
#include <string.h>

static size_t index_of(const scn_world_figs *f, const scn_world *w) {
  for (size_t i = 0; i < f->n; i++)
    if (f->v[i]->world == w && strcmp(f->v[i]->name, scn_world_name(w)) == 0)
      return i;
  return SIZE_MAX;
}

static scn_world_fig *entry_of(scn_world_figs *f, const scn_world *w) {
  size_t i = index_of(f, w);
  if (i != SIZE_MAX)
    return f->v[i];
  scn_world_fig *fig = calloc(1, sizeof *fig);
  scn_world_fig **v = fig ? scn_array_grow(f->v, &f->cap, sizeof *v, f->n + 1) : NULL;
  if (!v) {
    free(fig);
    return NULL;
  }
  f->v = v;
  fig->world = w;
  strcpy(fig->name, scn_world_name(w));
  f->v[f->n++] = fig;
  return fig;
}

static void drop(scn_world_figs *f, size_t i) {
  free(f->v[i]);
  f->v[i] = f->v[--f->n];
}

scn_world_fig *scn_world_figs_join(scn_world_figs *f, const scn_world *w) {
  scn_world_fig *fig = entry_of(f, w);
  if (fig)
    fig->subs++;
  return fig;
}

void scn_world_figs_forget(scn_world_figs *f, const scn_world *w) {
  size_t i = index_of(f, w);
  if (i != SIZE_MAX)
    drop(f, i);
}

void scn_world_figs_collect(scn_world_figs *f, scn_scene *scene, scn_metrics_sink *k) {
  /* An entry whose world left the scene by a path that did not say so, and has no
   * subscription to keep it, goes. */
  for (size_t i = 0; i < f->n;) {
    scn_world *w = scn_world_find(scene, f->v[i]->name);
    if (f->v[i]->subs == 0 && w != f->v[i]->world)
      drop(f, i);
    else
      i++;
  }
  size_t nworlds = scn_world_count(scene);
  if (nworlds > SCN_METRICS_PER_WORLD_MAX)
    return;
  static const char *const names[2] = {"world_subscribers", "world_frames_sent_total"};
  static const char *const types[2] = {"gauge", "counter"};
  static const char *const helps[2] = {
      "Stream subscriptions per world.",
      "Stream frames queued to the subscribers of each world (its rate: frames per second)."};
  for (int fam = 0; fam < 2; fam++) {
    scn_metric_family(k, names[fam], types[fam], helps[fam]);
    for (size_t i = 0; i < nworlds; i++) {
      scn_world *w = scn_world_at(scene, i);
      if (!scn_metric_shows_world(k, scn_world_name(w)))
        continue;
      size_t at = index_of(f, w);
      const scn_world_fig *fig = at == SIZE_MAX ? NULL : f->v[at];
      uint64_t v = !fig ? 0 : fam == 0 ? fig->subs : fig->frames;
      scn_metric_sample(k, "world", scn_world_name(w), (double)v);
    }
    scn_metric_end(k);
  }
}

void scn_world_figs_free(scn_world_figs *f) {
  while (f->n)
    drop(f, f->n - 1);
  free(f->v);
  memset(f, 0, sizeof *f);
}

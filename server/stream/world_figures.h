/* The stream's figures per world, for /metrics: subscriptions open on each world (a gauge) and
 * frames queued to its subscribers (a counter, whose rate is the world's frames per second).
 * An entry lives from a world's first subscription until the world ends (destroyed or moved
 * away), so a world's counter never goes back while it exists. */
#ifndef SCN_WORLD_FIGURES_H
#define SCN_WORLD_FIGURES_H

#include "ops/metrics.h"
#include "scn_core.h"

#include <stdint.h>

typedef struct scn_world_fig {
  const scn_world *world;
  char name[SCN_NAME_MAX + 1]; /* the world's, to tell a new world at a freed one's address */
  uint64_t subs, frames;
} scn_world_fig;

typedef struct scn_world_figs {
  scn_world_fig **v;
  size_t n, cap;
} scn_world_figs;

/* A subscription to world w begins: the world's entry (made when it has none) counts it; NULL
 * when out of memory. It ends with entry->subs--. */
scn_world_fig *scn_world_figs_join(scn_world_figs *f, const scn_world *w);
/* World w ends (it has no subscription left): its entry goes. */
void scn_world_figs_forget(scn_world_figs *f, const scn_world *w);
/* world_subscribers{world} and world_frames_sent_total{world} for every world of scene (while
 * there are at most SCN_METRICS_PER_WORLD_MAX); entries of worlds no longer there go. */
void scn_world_figs_collect(scn_world_figs *f, scn_scene *scene, scn_metrics_sink *k);
void scn_world_figs_free(scn_world_figs *f);

#endif

/* Two scenes compared as the journal's tests need: entity slots, generations and the order free
 * slots are reused in, worlds, transforms, parents, child order, names, and local and world
 * matrices bit for bit. */
#ifndef T_SCENE_COMPARE_H
#define T_SCENE_COMPARE_H

#include "scn_core.h"

#include <stdbool.h>

/* Whether b holds what a holds; when not, t_scene_difference says where they first differ. */
bool t_same_scene(scn_scene *a, scn_scene *b);
const char *t_scene_difference(void);

#endif

#ifndef SCN_JSON_ARENA_H
#define SCN_JSON_ARENA_H

#include <cjson/cJSON.h>

/* Points cJSON's allocator at a per-request arena (process-wide: the daemon is one thread). */
void scn_json_arena_install(void);
/* Frees every node of the last request at once. */
void scn_json_arena_reset(void);
/* Frees a parsed document: nothing to do node by node while the arena is installed. */
void scn_json_release(cJSON *doc);
void scn_json_arena_uninstall(void);

#endif

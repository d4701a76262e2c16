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
/* Parses len bytes of text into a document on the heap, whatever the arena does, for data
 * that outlives a request (etcd's replies); free it with scn_json_heap_delete. */
cJSON *scn_json_heap_parse(const char *text, size_t len);
void scn_json_heap_delete(cJSON *doc);

#endif

/* cJSON allocates a node per JSON value; on the request path those come from an arena that is
 * reset after every request, so parsing does no heap allocation in steady state. */
#include "ops/json_arena.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>

#define BASE_CHUNK (64 * 1024)
#define MAX_KEPT (4 * 1024 * 1024)

typedef struct overflow {
  struct overflow *next;
  max_align_t data[];
} overflow;

static struct {
  char *base;
  size_t used, cap;
  overflow *extra;
  size_t extra_bytes;
} arena;

static void *arena_malloc(size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (arena.base && arena.used + size <= arena.cap) {
    void *p = arena.base + arena.used;
    arena.used += size;
    return p;
  }
  /* Past the base chunk (a large request): separate blocks, folded into a bigger base at the
   * next reset. */
  overflow *o = malloc(sizeof *o + size);
  if (!o)
    return NULL;
  o->next = arena.extra;
  arena.extra = o;
  arena.extra_bytes += size;
  return o->data;
}

static void arena_free(void *p) { (void)p; }

static bool installed;

void scn_json_arena_install(void) {
  installed = true;
  arena.cap = BASE_CHUNK;
  arena.base = malloc(arena.cap);
  if (!arena.base)
    arena.cap = 0;
  cJSON_Hooks hooks = {arena_malloc, arena_free};
  cJSON_InitHooks(&hooks);
}

void scn_json_arena_reset(void) {
  size_t wanted = arena.used + arena.extra_bytes;
  while (arena.extra) {
    overflow *o = arena.extra;
    arena.extra = o->next;
    free(o);
  }
  arena.extra_bytes = 0;
  arena.used = 0;
  if (wanted > arena.cap && wanted <= MAX_KEPT) {
    size_t cap = arena.cap ? arena.cap : BASE_CHUNK;
    while (cap < wanted)
      cap *= 2;
    char *bigger = malloc(cap);
    if (bigger) {
      free(arena.base);
      arena.base = bigger;
      arena.cap = cap;
    }
  }
}

void scn_json_release(cJSON *doc) {
  if (!arena.base)
    cJSON_Delete(doc);
}

void scn_json_arena_uninstall(void) {
  scn_json_arena_reset();
  free(arena.base);
  arena.base = NULL;
  arena.cap = 0;
  installed = false;
  cJSON_InitHooks(NULL);
}

/* The heap's allocator for the time of one call, then the arena's again. */
static void heap_hooks(bool on) {
  if (!installed)
    return;
  cJSON_Hooks arena_hooks = {arena_malloc, arena_free};
  cJSON_InitHooks(on ? NULL : &arena_hooks);
}

cJSON *scn_json_heap_parse(const char *text, size_t len) {
  heap_hooks(true);
  cJSON *doc = cJSON_ParseWithLength(text, len);
  heap_hooks(false);
  return doc;
}

void scn_json_heap_delete(cJSON *doc) {
  heap_hooks(true);
  cJSON_Delete(doc);
  heap_hooks(false);
}

#include "core_internal.h"

#include <stdlib.h>

void *scn_array_grow(void *items, size_t *cap, size_t item_size, size_t need) {
  if (need == 0)
    need = 1; /* an empty array still needs a valid pointer */
  if (need <= *cap && items)
    return items;
  size_t n = *cap ? *cap : 16;
  while (n < need)
    n *= 2;
  void *p = realloc(items, n * item_size);
  if (p)
    *cap = n;
  return p;
}

void *scn__grow32(void *items, uint32_t *cap, size_t item_size, size_t need) {
  if (need <= *cap && items)
    return items;
  size_t c = *cap;
  void *p = need > UINT32_MAX ? NULL : scn_array_grow(items, &c, item_size, need);
  if (p)
    *cap = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
  return p;
}

int scn__vec_reserve(scn__vec *v, size_t item_size, size_t need) {
  if (need <= v->cap)
    return SCN_OK;
  void *p = scn_array_grow(v->data, &v->cap, item_size, need);
  if (!p)
    return SCN_NOMEM;
  v->data = p;
  return SCN_OK;
}

void scn__vec_free(scn__vec *v) {
  free(v->data);
  v->data = NULL;
  v->len = v->cap = 0;
}

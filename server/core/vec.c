#include "core_internal.h"

#include <stdlib.h>

int scn__vec_reserve(scn__vec *v, size_t item_size, size_t need) {
  if (need <= v->cap)
    return SCN_OK;
  size_t cap = v->cap ? v->cap : 16;
  while (cap < need)
    cap *= 2;
  void *p = realloc(v->data, cap * item_size);
  if (!p)
    return SCN_NOMEM;
  v->data = p;
  v->cap = cap;
  return SCN_OK;
}

void scn__vec_free(scn__vec *v) {
  free(v->data);
  v->data = NULL;
  v->len = v->cap = 0;
}

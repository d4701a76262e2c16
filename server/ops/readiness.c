#include "ops/readiness.h"

#include <stddef.h>

static const char *const reason_text[] = {
    [SCN_UNREADY_RELEASED] = "released",
    [SCN_UNREADY_UNREGISTERED] = "not registered in the cluster",
};
_Static_assert(sizeof reason_text / sizeof reason_text[0] == SCN_UNREADY_COUNT,
               "a text for every reason");

void scn_readiness_set(scn_readiness *r, scn_unready why) { r->reasons |= 1u << why; }

void scn_readiness_clear(scn_readiness *r, scn_unready why) { r->reasons &= ~(1u << why); }

const char *scn_readiness_why(const scn_readiness *r) {
  for (unsigned why = 0; why < SCN_UNREADY_COUNT; why++)
    if (r->reasons & (1u << why))
      return reason_text[why];
  return NULL;
}

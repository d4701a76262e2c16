/* Fuzz target: the access list parser. Any bytes: a list parses, or is refused with a message
 * naming its line; nothing crashes or leaks. A parsed list holds only what the grammar allows:
 * known rights, valid prefixes, distinct token hashes, each found again by its own hash, each
 * prefix covering itself. */
#include "ops/acl.h"
#include "scn_core.h"
#include "wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  scn_acl *a;
  char err[512];
  if (scn_acl_parse((const char *)data, size, &a, err, sizeof err) != 0) {
    if (strncmp(err, "line ", 5) != 0 && strcmp(err, "out of memory") != 0)
      abort();
    return 0;
  }
  const unsigned all = (1u << SCN_RIGHT_COUNT) - 1;
  for (size_t i = 0; i < a->n; i++) {
    const scn_acl_rule *r = &a->rules[i];
    if (!r->rights || (r->rights & ~all) || r->line == 0)
      abort();
    if (!r->all_worlds && r->nprefixes == 0)
      abort();
    if (scn_acl_match(a, r->token_sha256) != r)
      abort();
    for (size_t k = 0; k < r->nprefixes; k++)
      if (!scn_world_name_valid(r->prefixes[k], strlen(r->prefixes[k])) ||
          !scn_acl_allows_world(r, r->prefixes[k]))
        abort();
  }
  scn_acl_free(a);
  return 0;
}

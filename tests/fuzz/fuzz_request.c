/* Fuzz target: request decoding. Any bytes: parse as a request, then run every field decoder
 * on the result; nothing may crash, leak, or accept a non-finite matrix. */
#include "codec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  scn_wire_error err;
  cJSON *req = scn_parse_request((const char *)data, size, &err);
  if (!req)
    return 0;
  const char *s;
  uint64_t u;
  double d;
  bool b;
  float m[16];
  scn_get_string(req, "cmd", false, &s, &err);
  scn_get_world_name(req, false, &s, &err);
  if (scn_get_entity(req, "entity", false, &u, &err) == 1 && (u == 0 || u >= (1ull << 53)))
    abort();
  scn_get_entity_or_null(req, "parent", false, &u, &err);
  scn_get_uint(req, "count", false, 1, 100000, &u, &err);
  scn_get_number(req, "hz", false, &d, &err);
  scn_get_bool(req, "recursive", false, &b, &err);
  scn_get_keep(req, &b, &err);
  scn_get_name_or_null(req, "name", false, &s, &err);
  if (scn_get_spec(req, m, &err) == 1)
    for (int i = 0; i < 16; i++)
      if (!isfinite(m[i]))
        abort();
  const char *raw;
  size_t raw_len;
  if (scn_find_raw_member((const char *)data, size, "id", &raw, &raw_len)) {
    cJSON *id = cJSON_ParseWithLength(raw, raw_len);
    if (!id)
      abort(); /* the raw text of a member of valid JSON is itself valid JSON */
    cJSON_Delete(id);
    /* and the reply that echoes it passes the same checks as a request */
    scn_buf reply = {0};
    scn_reply_begin_raw(&reply, raw, raw_len);
    scn_reply_end(&reply);
    cJSON *back = scn_parse_request(reply.data, reply.len - 1, &err); /* less the newline */
    if (!back)
      abort();
    cJSON_Delete(back);
    scn_buf_free(&reply);
  }
  cJSON_Delete(req);
  return 0;
}

/* Fuzz target: request decoding. Any bytes: parse as a request, then decode every field of
 * every command on the result; nothing may crash or leak, a t/r/s spec never gives a
 * non-finite matrix (a matrix's finiteness is the core's to check), and every raw span the
 * validating pass found (the id, each op and its id) is itself valid JSON. */
#include "codec.h"
#include "request.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static void must_be_json(scn_span sp) {
  if (!sp.p)
    return;
  cJSON *v = cJSON_ParseWithLength(sp.p, sp.len);
  if (!v)
    abort(); /* the raw text of a value of valid JSON is itself valid JSON */
  cJSON_Delete(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static scn_request rq, back;
  scn_wire_error err;
  if (scn_request_parse(&rq, (const char *)data, size, &err) != 0) {
    if (err.code == SCN_W_BAD_REQUEST)
      must_be_json(rq.id); /* refused for U+0000: the id is still echoed */
    return 0;
  }
  for (unsigned c = 0; c < scn_command_count; c++) {
    scn_args a;
    scn_args_init(&a, &rq.f);
    if (scn_args_decode(&a, scn_commands[c].required | scn_commands[c].optional, &err) == 0 &&
        a.has_spec && !a.partial && !(rq.f.present & SCN_F(matrix)))
      for (int i = 0; i < 16; i++)
        if (!isfinite(a.m[i]))
          abort();
    if (a.entity >= (1ull << 53) || a.parent >= (1ull << 53))
      abort();
  }
  if ((rq.f.present & SCN_F(id)) && !rq.id.p)
    abort(); /* the pass finds every id cJSON finds */
  must_be_json(rq.id);
  for (size_t i = 0; i < rq.nops; i++) {
    must_be_json(rq.ops[i].item);
    must_be_json(rq.ops[i].id);
  }
  if (rq.id.p) {
    /* the reply that echoes it passes the same checks as a request */
    scn_buf reply = {0};
    scn_reply_begin_raw(&reply, rq.id.p, rq.id.len);
    scn_reply_end(&reply);
    if (scn_request_parse(&back, reply.data, reply.len - 1, &err) != 0) /* less the newline */
      abort();
    cJSON_Delete(back.root);
    scn_buf_free(&reply);
  }
  cJSON_Delete(rq.root);
  return 0;
}

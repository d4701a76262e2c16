/* Fuzz target: request decoding. Any bytes: parse as a request, then decode every field of
 * every command on the result; nothing may crash or leak, a t/r/s spec never gives a
 * non-finite matrix (a matrix's finiteness is the core's to check), a matrix_b64 that decodes
 * is the one text of its bytes (encoding them gives it back), every raw span the validating
 * pass found (the id, each op and its id) is itself valid JSON, the flat form's shortcut
 * gives exactly what the general path (the validating pass and cJSON) gives, and a request is
 * refused for a member a command does not take exactly when it has one. */
#include "b64.h"
#include "codec.h"
#include "request.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool same_text(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The same tree: types, keys, strings, numbers to the bit, and cJSON's links (prev of the
 * first child is the last). */
static bool same_tree(const cJSON *a, const cJSON *b) {
  if ((a->type & 0xFF) != (b->type & 0xFF) || !same_text(a->string, b->string) ||
      !same_text(a->valuestring, b->valuestring) || a->valueint != b->valueint ||
      memcmp(&a->valuedouble, &b->valuedouble, sizeof a->valuedouble) != 0)
    return false;
  const cJSON *x = a->child, *y = b->child;
  if (x && (!y || !x->prev || !y->prev || x->prev->next || y->prev->next))
    return false;
  for (; x && y; x = x->next, y = y->next)
    if (!same_tree(x, y))
      return false;
  return !x && !y;
}

/* scn_request_parse and the general path agree on rq (parsed from data). */
static void check_general(const scn_request *rq, int rc, const scn_wire_error *err,
                          const uint8_t *data, size_t size) {
  static scn_request gen;
  scn_wire_error gerr;
  int grc = scn_request_parse_general(&gen, (const char *)data, size, &gerr);
  if (grc != rc)
    abort();
  if (rc != 0) {
    if (gerr.code != err->code || strcmp(gerr.message, err->message) != 0)
      abort();
    return;
  }
  if (!same_tree(rq->root, gen.root) || rq->f.present != gen.f.present ||
      rq->f.stray != gen.f.stray || rq->id.len != gen.id.len ||
      (rq->id.p && memcmp(rq->id.p, gen.id.p, rq->id.len) != 0))
    abort();
  cJSON_Delete(gen.root);
}

/* Whether every member of the request is a field of taken, member by member. */
static bool all_taken(const cJSON *root, scn_fieldset taken) {
  for (const cJSON *m = root->child; m; m = m->next) {
    scn_field f = scn_field_find(m->string);
    if (f == SCN_FIELD_COUNT || !(taken & ((scn_fieldset)1 << f)))
      return false;
  }
  return true;
}

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
  int rc = scn_request_parse(&rq, (const char *)data, size, &err);
  check_general(&rq, rc, &err, data, size);
  if (rc != 0) {
    if (err.code == SCN_W_BAD_REQUEST)
      must_be_json(rq.id); /* refused for U+0000: the id is still echoed */
    return 0;
  }
  for (unsigned c = 0; c < scn_command_count; c++) {
    /* the refusal of members a command does not take (its shortcut over the indexed fields
     * included) agrees with the members themselves, and names one */
    scn_fieldset taken = scn_command_takes(&scn_commands[c]);
    err.message[0] = '\0';
    int taken_rc = scn_fields_check_taken(&rq.f, taken, &err);
    if ((taken_rc == 0) != all_taken(rq.root, taken) ||
        (taken_rc < 0 &&
         (err.code != SCN_W_BAD_REQUEST || strncmp(err.message, "unknown field \"", 15) != 0)))
      abort();
    scn_args a;
    scn_args_init(&a, &rq.f);
    /* a spec composed into a.m (with partial, the parts are kept apart instead) */
    bool spec =
        scn_args_decode(&a, scn_commands[c].required | scn_commands[c].optional, &err) == 0 &&
        a.has_spec && !a.partial;
    if (a.entity >= (1ull << 53) || a.parent >= (1ull << 53))
      abort();
    if (!spec)
      continue;
    bool finite = true;
    for (int i = 0; i < 16; i++)
      finite &= isfinite(a.m[i]) != 0;
    if (!finite && !(rq.f.present & (SCN_F(matrix) | SCN_F(matrix_b64))))
      abort();
    if (finite && (rq.f.present & SCN_F(matrix_b64))) {
      char text[SCN_B64_MATRIX_LEN];
      scn_b64_encode_matrices(text, (const float(*)[16])a.m, 1);
      if (memcmp(text, rq.f.v[SCN_F_matrix_b64]->valuestring, sizeof text) != 0)
        abort();
    }
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

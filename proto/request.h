/* A request, decoded once. One validating pass over the line (UTF-8, JSON's number grammar,
 * control bytes, escaped U+0000) also finds the raw text of "id" and of each op of "ops" and
 * its "id", to be echoed exactly as sent; then cJSON parses the line, and its members are
 * indexed by field in one walk; then the fields a command takes are decoded into typed values
 * in one call, in the order the command table gives. */
#ifndef SCN_REQUEST_H
#define SCN_REQUEST_H

#include "codec.h"
#include "scn_core.h"
#include "wire.h"

#include <cjson/cJSON.h>

/* Raw text of a JSON value in the line; p NULL when absent. */
typedef struct scn_span {
  const char *p;
  size_t len;
} scn_span;

/* An op of a batch: its text, and the text of its "id". */
typedef struct scn_op_span {
  scn_span item, id;
} scn_op_span;

/* The members of a JSON object by field (the first of each; a repeated one is ignored). v[f]
 * is meaningful only when present has f. */
typedef struct scn_fields {
  scn_fieldset present;
  bool stray;       /* a member whose key names no field at all */
  const cJSON *obj; /* the object */
  const cJSON *v[SCN_FIELD_COUNT];
} scn_fields;

typedef struct scn_request {
  cJSON *root;      /* the parsed line (freed by the caller: cJSON_Delete, or the arena) */
  scn_fields f;     /* its members */
  scn_span id;      /* "id" as sent */
  scn_op_span *ops; /* the items of "ops" when it is an array (reused across requests) */
  size_t nops, ops_cap;
  /* the field of each top-level key, in order, as the validating pass read them (so indexing
   * the parsed members compares no strings); SCN_KEY_UNREAD past the ones it could */
  unsigned char keys[32];
  size_t nkeys;
} scn_request;

#define SCN_KEY_UNREAD 255

/* Checks and parses one request line into rq. 0, or -1 with err: BAD_JSON (not a JSON object
 * in valid UTF-8, with numbers as JSON writes them and no raw control characters), or
 * BAD_REQUEST for a string holding U+0000 (rq->id is then set, so the reply can echo it). */
int scn_request_parse(scn_request *rq, const char *line, size_t len, scn_wire_error *err);
/* The same without the flat form's shortcut: the validating pass, then cJSON (the fuzz target
 * checks that both give the same tree). */
int scn_request_parse_general(scn_request *rq, const char *line, size_t len, scn_wire_error *err);
/* Frees what rq keeps between requests (not rq->root). */
void scn_request_free(scn_request *rq);
/* Indexes the members of a JSON object by field. */
void scn_fields_index(scn_fields *f, const cJSON *obj);
/* BAD_REQUEST for the first member of the object (in the order sent) whose key is not a field
 * of taken: unknown field "partal" (did you mean "partial"?), as scn_unknown_field_text
 * writes it; 0 when every member is taken. Costs one test when they all are. */
int scn_fields_check_taken(const scn_fields *f, scn_fieldset taken, scn_wire_error *err);
/* BAD_REQUEST "missing field" for the first of required that is absent; 0 when none is. */
int scn_fields_require(const scn_fields *f, scn_fieldset required, scn_wire_error *err);

/* The typed values of a request's fields. Absent fields keep their defaults (0, NULL,
 * false); the raw values of every field stay reachable through f. */
typedef struct scn_args {
  const scn_fields *f;
  const char *world;
  scn_entity entity, parent, to, root; /* parent 0: null or absent */
  const char *name;                    /* NULL: null or absent */
  const char *path;
  bool recursive, keep_world;
  bool trs;      /* transform.get: answer the parts of the matrices too */
  bool has_tick; /* "tick" was given: the past tick (fractional: interpolated) */
  double tick;
  scn_matrix_form matrices; /* hello's "matrices" (json when absent) */
  bool follower_reads;      /* hello's "follower_reads" (false when absent) */
  bool has_spec;          /* a transform spec was given: m holds it, or the parts do when partial */
  bool partial;           /* "partial": true: the parts given replace those of the current matrix */
  scn_fieldset parts;     /* partial: the parts given (of SCN_F_PARTS) */
  float t[3], r[4], s[3]; /* partial: the parts given, as float32 (r as sent, not normalised) */
  float m[16];
} scn_args;

/* Resets a to defaults over fields f. */
void scn_args_init(scn_args *a, const scn_fields *f);
/* Decodes the fields of set that are present, in field order; 0, or -1 with err for the first
 * that is invalid. A transform spec (matrix, matrix_b64, or t/r/s composed as T * R * S) is
 * decoded once, at its first field; with "partial" (decoded before it) the parts are kept as
 * they are, for the core to put in place of the current ones, and "matrix" or "matrix_b64" is
 * refused. The values of a matrix are not checked for finiteness here: the core refuses a
 * non-finite matrix, and scn_spec_error says why. */
int scn_args_decode(scn_args *a, scn_fieldset set, scn_wire_error *err);
/* The error for a spec the core refused as invalid: which field holds a number that is not a
 * finite float32, or why the composed matrix is not finite. */
int scn_spec_error(const scn_fields *f, scn_wire_error *err);

/* Field decoders over one JSON value (v non-NULL); field names the field in messages.
 * 0, or -1 with BAD_REQUEST in err. */
int scn_decode_string(const cJSON *v, const char *field, const char **out, scn_wire_error *err);
/* 1 to 64 characters from A-Z a-z 0-9 _ . - */
int scn_decode_world_name(const cJSON *v, const char **out, scn_wire_error *err);
/* A positive integer below 2^53. */
int scn_decode_entity(const cJSON *v, const char *field, uint64_t *out, scn_wire_error *err);
/* An entity or null (null gives 0). */
int scn_decode_entity_or_null(const cJSON *v, const char *field, uint64_t *out,
                              scn_wire_error *err);
int scn_decode_uint(const cJSON *v, const char *field, uint64_t min, uint64_t max, uint64_t *out,
                    scn_wire_error *err);
/* A finite number. */
int scn_decode_number(const cJSON *v, const char *field, double *out, scn_wire_error *err);
int scn_decode_bool(const cJSON *v, const char *field, bool *out, scn_wire_error *err);
/* A tick to read the past at: a finite number, 0 or more. */
int scn_decode_tick(const cJSON *v, double *out, scn_wire_error *err);
/* "local" (false) or "world" (true). */
int scn_decode_keep(const cJSON *v, bool *keep_world, scn_wire_error *err);
/* "json" or "b64". */
int scn_decode_matrix_form(const cJSON *v, scn_matrix_form *out, scn_wire_error *err);
/* A matrix as 88 characters of base64 (b64.h). */
int scn_decode_matrix_b64(const cJSON *v, float m[16], scn_wire_error *err);
/* A transform name (1 to 64 bytes, no '/', no control characters) or null (out NULL). */
int scn_decode_name_or_null(const cJSON *v, const char *field, const char **out,
                            scn_wire_error *err);

#endif

/* Request decoding (a line into typed values, with errors that name the field and what was
 * wrong) and reply encoding. Decoding uses cJSON; replies are written straight into a buffer. */
#ifndef SCN_CODEC_H
#define SCN_CODEC_H

#include "buf.h"
#include "wire.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct scn_wire_error {
  scn_wire_code code;
  char message[256];
} scn_wire_error;

/* Fills err and returns -1, so a decoder can `return scn_fail(...)`. */
int scn_fail(scn_wire_error *err, scn_wire_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parses one request line: a JSON object in valid UTF-8 with nothing after it. NULL and
 * BAD_JSON otherwise. The caller frees the result with cJSON_Delete. */
cJSON *scn_parse_request(const char *line, size_t len, scn_wire_error *err);
bool scn_utf8_valid(const char *s, size_t len);
/* The value of a hexadecimal digit (either case), -1 for any other character. */
int scn_hex_digit(char c);

/* Field decoders. They return 1 when the field is present and valid, 0 when it is absent
 * (and optional), -1 with err filled when it is invalid (or absent and required). */
int scn_get_string(const cJSON *req, const char *field, bool required, const char **out,
                   scn_wire_error *err);
int scn_get_world_name(const cJSON *req, bool required, const char **out, scn_wire_error *err);
/* A positive integer below 2^53. */
int scn_get_entity(const cJSON *req, const char *field, bool required, uint64_t *out,
                   scn_wire_error *err);
/* An entity or null (null gives 0). */
int scn_get_entity_or_null(const cJSON *req, const char *field, bool required, uint64_t *out,
                           scn_wire_error *err);
int scn_get_uint(const cJSON *req, const char *field, bool required, uint64_t min, uint64_t max,
                 uint64_t *out, scn_wire_error *err);
int scn_get_number(const cJSON *req, const char *field, bool required, double *out,
                   scn_wire_error *err);
int scn_get_bool(const cJSON *req, const char *field, bool required, bool *out,
                 scn_wire_error *err);
/* "keep": "local" (default) or "world"; out is true for world. */
int scn_get_keep(const cJSON *req, bool *keep_world, scn_wire_error *err);
/* The transform spec: "matrix" or any of "t", "r", "s" composed as T * R * S. Returns 0
 * when no spec field is present (out untouched). */
int scn_get_spec(const cJSON *req, float out[16], scn_wire_error *err);
/* A name field that may be null (out NULL). */
int scn_get_name_or_null(const cJSON *req, const char *field, bool required, const char **out,
                         scn_wire_error *err);

/* The raw text of a top-level member's value in a line that parsed as a JSON object (first
 * occurrence, key written without escapes), so an "id" is echoed exactly as sent. */
bool scn_find_raw_member(const char *line, size_t len, const char *key, const char **value,
                         size_t *value_len);
/* The raw text of the items of a JSON array (text known to be valid JSON): start with
 * *cursor = the array text; each call gives the next item, false after the last. */
bool scn_next_raw_item(const char **cursor, const char *end, const char **item, size_t *item_len);

/* Like scn_reply_begin / scn_reply_error, with the id as raw JSON text (NULL: none). */
void scn_reply_begin_raw(scn_buf *b, const char *id, size_t id_len);
void scn_reply_error_raw(scn_buf *b, const char *id, size_t id_len, const scn_wire_error *err);

/* Replies. begin writes {"id":...,"ok":true (id omitted when NULL); key writes ,"key":. */
void scn_reply_begin(scn_buf *b, const cJSON *id);
void scn_reply_key(scn_buf *b, const char *key);
void scn_reply_end(scn_buf *b);
void scn_reply_error(scn_buf *b, const cJSON *id, const scn_wire_error *err);
/* Any JSON value, as compact text. */
void scn_buf_add_json_value(scn_buf *b, const cJSON *v);

#endif

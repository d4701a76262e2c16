/* Errors and replies: an error names the field and what was wrong; replies are written straight
 * into a buffer. Requests are decoded by request.h. */
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
  char node[65]; /* MOVED: the owner, written as "node" and "addr" beside the message */
  char addr[96];
} scn_wire_error;

/* Fills err and returns -1, so a decoder can `return scn_fail(...)`. */
int scn_fail(scn_wire_error *err, scn_wire_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

bool scn_utf8_valid(const char *s, size_t len);
/* The value of a hexadecimal digit (either case), -1 for any other character. */
int scn_hex_digit(char c);

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

/* A growable byte buffer for building protocol output; grows by doubling, so appending is
 * amortised O(1) and a reused buffer stops allocating once it reached its working size. */
#ifndef SCN_BUF_H
#define SCN_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct scn_buf {
  char *data;
  size_t len, cap;
  bool failed; /* an allocation failed; the content is incomplete */
} scn_buf;

void scn_buf_free(scn_buf *b);
bool scn_buf_reserve(scn_buf *b, size_t extra);
void scn_buf_add(scn_buf *b, const void *data, size_t len);
/* Raw, no escaping; inline so that a literal's length is known when compiling. */
static inline void scn_buf_adds(scn_buf *b, const char *s) { scn_buf_add(b, s, strlen(s)); }
void scn_buf_addc(scn_buf *b, char c);
void scn_buf_add_u64(scn_buf *b, uint64_t v);
void scn_buf_add_i64(scn_buf *b, int64_t v);
/* A double as a JSON number (shortest round-trip form, integers without a fraction). */
void scn_buf_add_double(scn_buf *b, double v);
/* A JSON string literal with quotes and escapes; the input must be valid UTF-8. */
void scn_buf_add_json_string(scn_buf *b, const char *s, size_t len);
/* "[a,...,p]" with each float in its shortest round-trip form. */
void scn_buf_add_matrix(scn_buf *b, const float m[16]);
/* "...": the matrix as a JSON string of 88 base64 characters (b64.h). */
void scn_buf_add_matrix_b64(scn_buf *b, const float m[16]);
/* "[a,...]": n finite floats (at most 16), each in its shortest round-trip form. */
void scn_buf_add_floats(scn_buf *b, const float *v, int n);
/* "[id,...]": a JSON array of unsigned integers. */
void scn_buf_add_id_list(scn_buf *b, const uint64_t *ids, size_t n);
/* Drops everything after len (used to discard a partly written reply). */
static inline void scn_buf_truncate(scn_buf *b, size_t len) {
  if (len < b->len)
    b->len = len;
}
/* Removes the first n bytes. */
void scn_buf_consume(scn_buf *b, size_t n);

#endif

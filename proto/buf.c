#include "buf.h"

#include "b64.h"
#include "f32fmt.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void scn_buf_free(scn_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = false;
}

bool scn_buf_reserve(scn_buf *b, size_t extra) {
  if (b->len + extra <= b->cap)
    return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra)
    cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void scn_buf_add(scn_buf *b, const void *data, size_t len) {
  if (len == 0) /* an empty buffer has no data pointer to copy to */
    return;
  if (!scn_buf_reserve(b, len))
    return;
  memcpy(b->data + b->len, data, len);
  b->len += len;
}

void scn_buf_addc(scn_buf *b, char c) {
  if (!scn_buf_reserve(b, 1))
    return;
  b->data[b->len++] = c;
}

void scn_buf_add_u64(scn_buf *b, uint64_t v) {
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  if (!scn_buf_reserve(b, (size_t)n))
    return;
  while (n)
    b->data[b->len++] = tmp[--n];
}

void scn_buf_add_i64(scn_buf *b, int64_t v) {
  if (v < 0) {
    scn_buf_addc(b, '-');
    scn_buf_add_u64(b, (uint64_t)0 - (uint64_t)v);
  } else {
    scn_buf_add_u64(b, (uint64_t)v);
  }
}

void scn_buf_add_double(scn_buf *b, double v) {
  if (v == (double)(int64_t)v && v > -9007199254740992.0 && v < 9007199254740992.0) {
    scn_buf_add_i64(b, (int64_t)v);
    return;
  }
  char tmp[32];
  int n = 0;
  for (int prec = 15; prec <= 17; prec++) {
    n = snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    if (strtod(tmp, NULL) == v)
      break;
  }
  scn_buf_add(b, tmp, (size_t)n);
}

void scn_buf_add_json_string(scn_buf *b, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  if (!scn_buf_reserve(b, len + 2))
    return;
  b->data[b->len++] = '"';
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      scn_buf_add(b, esc, 2);
    } else if (c < 0x20) {
      char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      scn_buf_add(b, esc, 6);
    } else {
      scn_buf_addc(b, (char)c);
    }
  }
  scn_buf_addc(b, '"');
}

/* A world matrix can overflow float32 (a deep chain of large scales); JSON has no infinity,
 * so such elements go out as the largest finite float of their sign, and undefined ones as 0. */
static const float *finite_matrix(const float m[16], float tmp[16]) {
  float probe = 0;
  for (int i = 0; i < 16; i++)
    probe += m[i] * 0.0f; /* NaN exactly when some element is not finite */
  if (probe == probe)
    return m;
  for (int i = 0; i < 16; i++)
    tmp[i] = isnan(m[i]) ? 0.0f : isinf(m[i]) ? copysignf(FLT_MAX, m[i]) : m[i];
  return tmp;
}

void scn_buf_add_matrix(scn_buf *b, const float m[16]) {
  if (!scn_buf_reserve(b, SCN_F32_MATRIX_FMT_MAX))
    return;
  float tmp[16];
  b->len += scn_f32_format_matrix(finite_matrix(m, tmp), b->data + b->len);
}

void scn_buf_add_matrix_b64(scn_buf *b, const float m[16]) {
  if (!scn_buf_reserve(b, SCN_B64_MATRIX_LEN + 2))
    return;
  char *p = b->data + b->len;
  p[0] = '"';
  scn_b64_encode_matrices(p + 1, (const float(*)[16])m, 1);
  p[SCN_B64_MATRIX_LEN + 1] = '"';
  b->len += SCN_B64_MATRIX_LEN + 2;
}

void scn_buf_add_floats(scn_buf *b, const float *v, int n) {
  if (!scn_buf_reserve(b, SCN_F32_ARRAY_FMT_MAX((size_t)n)))
    return;
  b->len += scn_f32_format_array(v, n, b->data + b->len);
}

void scn_buf_consume(scn_buf *b, size_t n) {
  if (n >= b->len) {
    b->len = 0;
    return;
  }
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
}

void scn_buf_add_id_list(scn_buf *b, const uint64_t *ids, size_t n) {
  scn_buf_addc(b, '[');
  for (size_t i = 0; i < n; i++) {
    if (i)
      scn_buf_addc(b, ',');
    scn_buf_add_u64(b, ids[i]);
  }
  scn_buf_addc(b, ']');
}

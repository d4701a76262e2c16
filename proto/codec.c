#define _GNU_SOURCE /* memmem */
#include "codec.h"

#include "scn_core.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_SAFE_INTEGER 9007199254740991.0 /* 2^53 - 1 */

int scn_fail(scn_wire_error *err, scn_wire_code code, const char *fmt, ...) {
  err->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return -1;
}

/* Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF); ASCII runs are
 * checked eight bytes at a time since most protocol text is ASCII. */
bool scn_utf8_valid(const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < len) {
    if (i + 8 <= len) {
      uint64_t chunk;
      memcpy(&chunk, s + i, 8);
      if ((chunk & UINT64_C(0x8080808080808080)) == 0) {
        i += 8;
        continue;
      }
    }
    uint32_t cp;
    size_t n = scn_utf8_char(str + i, len - i, &cp);
    if (n == 0)
      return false;
    i += n;
  }
  return true;
}

/* cJSON takes raw control characters inside strings (not JSON) and cuts a string short at an
 * escaped U+0000 (its strings are C strings): refuse both rather than act on a changed value.
 * Runs on text cJSON accepted, so quotes and escapes are well formed. */
static bool strings_ok(const char *s, size_t len, scn_wire_error *err) {
  bool in = false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!in) {
      /* cJSON also skips any control byte as whitespace; JSON allows only these. */
      if (c < 0x20 && c != ' ' && c != '\t' && c != '\r' && c != '\n') {
        scn_fail(err, SCN_W_BAD_JSON, "control character outside a string at byte %zu", i);
        return false;
      }
      in = c == '"';
    } else if (c == '"') {
      in = false;
    } else if (c < 0x20) {
      scn_fail(err, SCN_W_BAD_JSON, "unescaped control character in a string at byte %zu", i);
      return false;
    } else if (c == '\\' && i + 1 < len) {
      if (s[i + 1] == 'u' && i + 5 < len && memcmp(s + i + 2, "0000", 4) == 0) {
        scn_fail(err, SCN_W_BAD_REQUEST, "strings must not contain U+0000 (byte %zu)", i);
        return false;
      }
      i++;
    }
  }
  return true;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* The index just past the string whose opening quote is at s[i]. */
static size_t skip_string(const char *s, size_t len, size_t i) {
  for (i++; i < len; i++) {
    if (s[i] == '\\')
      i++;
    else if (s[i] == '"')
      return i + 1;
  }
  return len;
}

/* cJSON reads numbers with strtod, which also takes "01", "1." and "-.5" (not JSON); an "id"
 * is echoed as written, so such a request would get a reply that is not JSON either. Every
 * number outside strings is checked against JSON's grammar. */
static bool numbers_ok(const char *s, size_t len, scn_wire_error *err) {
  size_t i = 0;
  while (i < len) {
    char c = s[i];
    if (c == '"') {
      i = skip_string(s, len, i);
      continue;
    }
    if (c != '-' && !is_digit(c)) {
      i++;
      continue;
    }
    size_t start = i;
    if (c == '-')
      i++;
    bool ok = i < len && is_digit(s[i]) && !(s[i] == '0' && i + 1 < len && is_digit(s[i + 1]));
    while (i < len && is_digit(s[i]))
      i++;
    if (ok && i < len && s[i] == '.') {
      ok = ++i < len && is_digit(s[i]);
      while (i < len && is_digit(s[i]))
        i++;
    }
    if (ok && i < len && (s[i] == 'e' || s[i] == 'E')) {
      if (++i < len && (s[i] == '+' || s[i] == '-'))
        i++;
      ok = i < len && is_digit(s[i]);
      while (i < len && is_digit(s[i]))
        i++;
    }
    if (!ok) {
      scn_fail(err, SCN_W_BAD_JSON, "invalid number at byte %zu", start);
      return false;
    }
  }
  return true;
}

/* Any byte below 0x20, eight bytes at a time. */
static bool has_control_byte(const char *s, size_t len) {
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v;
    memcpy(&v, s + i, 8);
    if ((v - UINT64_C(0x2020202020202020)) & ~v & UINT64_C(0x8080808080808080))
      return true;
  }
  for (; i < len; i++)
    if ((unsigned char)s[i] < 0x20)
      return true;
  return false;
}

cJSON *scn_parse_request(const char *line, size_t len, scn_wire_error *err) {
  if (!scn_utf8_valid(line, len)) {
    scn_fail(err, SCN_W_BAD_JSON, "request is not valid UTF-8");
    return NULL;
  }
  const char *end = NULL;
  cJSON *req = cJSON_ParseWithLengthOpts(line, len, &end, 0);
  if (!req) {
    size_t at = end && end >= line ? (size_t)(end - line) : 0;
    scn_fail(err, SCN_W_BAD_JSON, "invalid JSON near byte %zu", at);
    return NULL;
  }
  /* Only whitespace may follow the object. */
  size_t at = (size_t)(end - line);
  while (at < len && (line[at] == ' ' || line[at] == '\t' || line[at] == '\r'))
    at++;
  if (at < len) {
    cJSON_Delete(req);
    scn_fail(err, SCN_W_BAD_JSON, "unexpected data after the JSON object at byte %zu", at);
    return NULL;
  }
  if (!cJSON_IsObject(req)) {
    cJSON_Delete(req);
    scn_fail(err, SCN_W_BAD_JSON, "a request must be a JSON object");
    return NULL;
  }
  /* Numbers first: a request refused for its strings still echoes its id, which must then
   * be JSON. The exact string scan only when a control byte or an escaped NUL could be
   * present. */
  if (!numbers_ok(line, len, err) ||
      ((has_control_byte(line, len) ||
        (memchr(line, '\\', len) && memmem(line, len, "\\u0000", 6))) &&
       !strings_ok(line, len, err))) {
    cJSON_Delete(req);
    return NULL;
  }
  return req;
}

static const cJSON *field_of(const cJSON *req, const char *field) {
  return cJSON_GetObjectItemCaseSensitive(req, field);
}
static int absent(const char *field, bool required, scn_wire_error *err) {
  if (required)
    return scn_fail(err, SCN_W_BAD_REQUEST, "missing field \"%s\"", field);
  return 0;
}

int scn_get_string(const cJSON *req, const char *field, bool required, const char **out,
                   scn_wire_error *err) {
  const cJSON *v = field_of(req, field);
  if (!v)
    return absent(field, required, err);
  if (!cJSON_IsString(v))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be a string", field);
  *out = v->valuestring;
  return 1;
}

int scn_get_world_name(const cJSON *req, bool required, const char **out, scn_wire_error *err) {
  int rc = scn_get_string(req, "world", required, out, err);
  if (rc == 1 && !scn_world_name_valid(*out, strlen(*out)))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"world\" must be 1 to 64 characters from A-Z a-z 0-9 _ . -");
  return rc;
}

static bool is_entity_number(const cJSON *v) {
  if (!cJSON_IsNumber(v))
    return false;
  double d = v->valuedouble;
  return d >= 1 && d <= MAX_SAFE_INTEGER && d == floor(d);
}

int scn_get_entity(const cJSON *req, const char *field, bool required, uint64_t *out,
                   scn_wire_error *err) {
  const cJSON *v = field_of(req, field);
  if (!v)
    return absent(field, required, err);
  if (!is_entity_number(v))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"%s\" must be an entity id (an integer from 1 to 2^53-1)", field);
  *out = (uint64_t)v->valuedouble;
  return 1;
}

int scn_get_entity_or_null(const cJSON *req, const char *field, bool required, uint64_t *out,
                           scn_wire_error *err) {
  const cJSON *v = field_of(req, field);
  if (v && cJSON_IsNull(v)) {
    *out = 0;
    return 1;
  }
  if (v && !is_entity_number(v))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"%s\" must be an entity id (an integer from 1 to 2^53-1) or null",
                    field);
  return scn_get_entity(req, field, required, out, err);
}

int scn_get_uint(const cJSON *req, const char *field, bool required, uint64_t min, uint64_t max,
                 uint64_t *out, scn_wire_error *err) {
  const cJSON *v = field_of(req, field);
  if (!v)
    return absent(field, required, err);
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!(d == floor(d)) || d < (double)min || d > (double)max)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be an integer from %llu to %llu",
                    field, (unsigned long long)min, (unsigned long long)max);
  *out = (uint64_t)d;
  return 1;
}

int scn_get_number(const cJSON *req, const char *field, bool required, double *out,
                   scn_wire_error *err) {
  const cJSON *v = field_of(req, field);
  if (!v)
    return absent(field, required, err);
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be a finite number", field);
  *out = v->valuedouble;
  return 1;
}

int scn_get_bool(const cJSON *req, const char *field, bool required, bool *out,
                 scn_wire_error *err) {
  const cJSON *v = field_of(req, field);
  if (!v)
    return absent(field, required, err);
  if (!cJSON_IsBool(v))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be true or false", field);
  *out = cJSON_IsTrue(v);
  return 1;
}

int scn_get_keep(const cJSON *req, bool *keep_world, scn_wire_error *err) {
  const char *keep;
  int rc = scn_get_string(req, "keep", false, &keep, err);
  *keep_world = false;
  if (rc <= 0)
    return rc;
  if (strcmp(keep, "world") == 0)
    *keep_world = true;
  else if (strcmp(keep, "local") != 0)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"keep\" must be \"local\" or \"world\"");
  return 1;
}

int scn_get_name_or_null(const cJSON *req, const char *field, bool required, const char **out,
                         scn_wire_error *err) {
  const cJSON *v = field_of(req, field);
  if (v && cJSON_IsNull(v)) {
    *out = NULL;
    return 1;
  }
  if (v && !cJSON_IsString(v))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be a string or null", field);
  int rc = scn_get_string(req, field, required, out, err);
  if (rc == 1 && !scn_name_valid(*out, strlen(*out)))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"%s\" must be 1 to 64 bytes with no '/' and no control characters",
                    field);
  return rc;
}

/* A JSON number that fits a float32: finite and not rounding to infinity. */
static int to_float(const cJSON *v, const char *field, float *out, scn_wire_error *err) {
  if (!cJSON_IsNumber(v))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must hold numbers", field);
  double d = v->valuedouble;
  float f = (float)d;
  if (!isfinite(d) || !isfinite(f))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"%s\" holds a number that is not a finite float32", field);
  *out = f;
  return 0;
}

static int float_array(const cJSON *v, const char *field, int n, float *out, scn_wire_error *err) {
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be an array of %d numbers", field,
                    n);
  int i = 0;
  for (const cJSON *x = v->child; x; x = x->next)
    if (to_float(x, field, &out[i++], err) != 0)
      return -1;
  return 0;
}

int scn_get_spec(const cJSON *req, float out[16], scn_wire_error *err) {
  const cJSON *m = field_of(req, "matrix"), *t = field_of(req, "t"), *r = field_of(req, "r"),
              *s = field_of(req, "s");
  if (!m && !t && !r && !s)
    return 0;
  if (m) {
    if (t || r || s)
      return scn_fail(err, SCN_W_BAD_REQUEST,
                      "give either \"matrix\" or \"t\"/\"r\"/\"s\", not both");
    return float_array(m, "matrix", 16, out, err) == 0 ? 1 : -1;
  }
  float tv[3], rv[4], sv[3];
  if (t && float_array(t, "t", 3, tv, err) != 0)
    return -1;
  if (r && float_array(r, "r", 4, rv, err) != 0)
    return -1;
  if (s) {
    if (cJSON_IsNumber(s)) {
      if (to_float(s, "s", &sv[0], err) != 0)
        return -1;
      sv[1] = sv[2] = sv[0];
    } else if (float_array(s, "s", 3, sv, err) != 0) {
      return -1;
    }
  }
  if (r && rv[0] == 0 && rv[1] == 0 && rv[2] == 0 && rv[3] == 0)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"r\" must be a non-zero quaternion");
  if (scn_compose_trs(t ? tv : NULL, r ? rv : NULL, s ? sv : NULL, out) != SCN_OK)
    return scn_fail(err, SCN_W_BAD_REQUEST, "the transform spec gives a non-finite matrix");
  return 1;
}

/* ---- raw members ---------------------------------------------------------------------- */

static size_t skip_ws(const char *s, size_t len, size_t i) {
  while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
    i++;
  return i;
}

/* End of the value starting at s[i]; the text is known to be valid JSON. */
static size_t skip_value(const char *s, size_t len, size_t i) {
  if (s[i] == '"')
    return skip_string(s, len, i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    for (; i < len; i++) {
      if (s[i] == '"')
        i = skip_string(s, len, i) - 1;
      else if (s[i] == '{' || s[i] == '[')
        depth++;
      else if ((s[i] == '}' || s[i] == ']') && --depth == 0)
        return i + 1;
    }
    return len;
  }
  while (i < len && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
         s[i] != '\r' && s[i] != '\n')
    i++;
  return i;
}

int scn_hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* Whether the raw text of a JSON string's content (valid JSON, escapes included: "\u0069d")
 * is the ASCII key, as cJSON reads it. */
static bool raw_key_is(const char *s, size_t n, const char *key) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++, k++) {
    unsigned c = (unsigned char)s[i];
    if (c == '\\' && i + 1 < n) {
      char e = s[++i];
      static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
      const char *at = strchr(from, e);
      if (e == 'u' && i + 4 < n) {
        c = 0;
        for (int d = 1; d <= 4; d++)
          c = c * 16 + (unsigned)scn_hex_digit(s[i + d]);
        i += 4;
      } else if (at && e) {
        c = (unsigned char)to[at - from];
      } else {
        return false;
      }
    }
    if (c >= 0x80 || key[k] == '\0' || (unsigned char)key[k] != c)
      return false;
  }
  return key[k] == '\0';
}

bool scn_find_raw_member(const char *line, size_t len, const char *key, const char **value,
                         size_t *value_len) {
  size_t klen = strlen(key);
  size_t i = skip_ws(line, len, 0);
  if (i >= len || line[i] != '{')
    return false;
  i = skip_ws(line, len, i + 1);
  while (i < len && line[i] == '"') {
    size_t kend = skip_string(line, len, i);
    bool match = kend - i == klen + 2 ? memcmp(line + i + 1, key, klen) == 0
                                      : memchr(line + i + 1, '\\', kend - i - 2) != NULL &&
                                            raw_key_is(line + i + 1, kend - i - 2, key);
    i = skip_ws(line, len, kend);
    if (i >= len || line[i] != ':')
      return false;
    i = skip_ws(line, len, i + 1);
    size_t vend = skip_value(line, len, i);
    if (match) {
      *value = line + i;
      *value_len = vend - i;
      return true;
    }
    i = skip_ws(line, len, vend);
    if (i < len && line[i] == ',')
      i = skip_ws(line, len, i + 1);
  }
  return false;
}

bool scn_next_raw_item(const char **cursor, const char *end, const char **item, size_t *item_len) {
  const char *s = *cursor;
  size_t len = (size_t)(end - s), i = skip_ws(s, len, 0);
  if (i < len && (s[i] == '[' || s[i] == ','))
    i = skip_ws(s, len, i + 1);
  if (i >= len || s[i] == ']')
    return false;
  size_t vend = skip_value(s, len, i);
  *item = s + i;
  *item_len = vend - i;
  *cursor = s + vend;
  return true;
}

/* ---- replies -------------------------------------------------------------------------- */

void scn_reply_begin_raw(scn_buf *b, const char *id, size_t id_len) {
  if (id) {
    scn_buf_adds(b, "{\"id\":");
    scn_buf_add(b, id, id_len);
    scn_buf_adds(b, ",\"ok\":true");
  } else {
    scn_buf_adds(b, "{\"ok\":true");
  }
}

static void add_error_body(scn_buf *b, const scn_wire_error *err) {
  scn_buf_adds(b, ",\"error\":{\"code\":\"");
  scn_buf_adds(b, scn_wire_code_name(err->code));
  scn_buf_adds(b, "\",\"message\":");
  /* Messages quote client input, which may be cut mid-character by the message limit. */
  size_t len = strlen(err->message);
  while (len > 0 && !scn_utf8_valid(err->message, len))
    len--;
  scn_buf_add_json_string(b, err->message, len);
  scn_buf_adds(b, "}}\n");
}

void scn_reply_error_raw(scn_buf *b, const char *id, size_t id_len, const scn_wire_error *err) {
  if (id) {
    scn_buf_adds(b, "{\"id\":");
    scn_buf_add(b, id, id_len);
    scn_buf_adds(b, ",\"ok\":false");
  } else {
    scn_buf_adds(b, "{\"ok\":false");
  }
  add_error_body(b, err);
}

void scn_buf_add_json_value(scn_buf *b, const cJSON *v) {
  if (cJSON_IsNull(v)) {
    scn_buf_adds(b, "null");
  } else if (cJSON_IsFalse(v)) {
    scn_buf_adds(b, "false");
  } else if (cJSON_IsTrue(v)) {
    scn_buf_adds(b, "true");
  } else if (cJSON_IsNumber(v)) {
    if (isfinite(v->valuedouble))
      scn_buf_add_double(b, v->valuedouble);
    else
      scn_buf_adds(b, "null");
  } else if (cJSON_IsString(v)) {
    scn_buf_add_json_string(b, v->valuestring, strlen(v->valuestring));
  } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
    bool obj = cJSON_IsObject(v);
    scn_buf_addc(b, obj ? '{' : '[');
    for (const cJSON *x = v->child; x; x = x->next) {
      if (x != v->child)
        scn_buf_addc(b, ',');
      if (obj) {
        scn_buf_add_json_string(b, x->string, strlen(x->string));
        scn_buf_addc(b, ':');
      }
      scn_buf_add_json_value(b, x);
    }
    scn_buf_addc(b, obj ? '}' : ']');
  } else {
    scn_buf_adds(b, "null");
  }
}

void scn_reply_begin(scn_buf *b, const cJSON *id) {
  if (id) {
    scn_buf_adds(b, "{\"id\":");
    scn_buf_add_json_value(b, id);
    scn_buf_adds(b, ",\"ok\":true");
  } else {
    scn_buf_adds(b, "{\"ok\":true");
  }
}

void scn_reply_key(scn_buf *b, const char *key) {
  scn_buf_adds(b, ",\"");
  scn_buf_adds(b, key);
  scn_buf_adds(b, "\":");
}

void scn_reply_end(scn_buf *b) { scn_buf_adds(b, "}\n"); }

void scn_reply_error(scn_buf *b, const cJSON *id, const scn_wire_error *err) {
  if (id) {
    scn_buf_adds(b, "{\"id\":");
    scn_buf_add_json_value(b, id);
    scn_buf_adds(b, ",\"ok\":false");
  } else {
    scn_buf_adds(b, "{\"ok\":false");
  }
  add_error_body(b, err);
}

#include "codec.h"

#include "scn_core.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int scn_fail(scn_wire_error *err, scn_wire_code code, const char *fmt, ...) {
  err->code = code;
  err->node[0] = err->addr[0] = '\0';
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

int scn_hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
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
  if (err->code == SCN_W_MOVED) {
    scn_buf_adds(b, ",\"node\":");
    scn_buf_add_json_string(b, err->node, strlen(err->node));
    scn_buf_adds(b, ",\"addr\":");
    scn_buf_add_json_string(b, err->addr, strlen(err->addr));
  }
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

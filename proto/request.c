#include "request.h"

#include "b64.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SAFE_INTEGER 9007199254740991.0 /* 2^53 - 1 */

/* ---- the validating pass -------------------------------------------------------------------
 * cJSON parses the structure; what it lets through is checked here, in the same walk that
 * finds the raw text of "id" and of the ops of a batch:
 * - UTF-8: strictly valid everywhere (no overlongs, surrogates, or code points past U+10FFFF);
 * - numbers: cJSON reads them with strtod, which also takes "01", "1." and "-.5" (not JSON),
 *   and an "id" is echoed as written, so every number follows JSON's grammar;
 * - control bytes: cJSON skips any outside strings as whitespace and keeps them raw inside;
 *   JSON allows neither (but space, tab, CR and LF between tokens);
 * - an escaped U+0000: cJSON's strings are C strings and would be cut short there.
 * Strings of printable ASCII without escapes (nearly all) end at the next quote and need no
 * other check. Only the first problem of each kind is kept; they are reported in that order
 * of kinds once cJSON accepted the line. */

enum { NO_PROBLEM = 0, CONTROL_OUTSIDE, CONTROL_INSIDE, ESCAPED_NUL, BAD_U_ESCAPE };

typedef struct scan {
  bool utf8_bad;
  size_t number_at; /* start of the first number outside JSON's grammar, SIZE_MAX: none */
  size_t string_at; /* first string problem, SIZE_MAX: none */
  int string_problem;
} scan;

/* What a byte is outside strings; C_SKIP for everything the walk passes over (digits but 0,
 * signs, letters of literals, colons, whitespace). */
enum { C_SKIP, C_QUOTE, C_OPEN, C_CLOSE, C_COMMA, C_DOT, C_ZERO, C_CTRL, C_HIGH };

static unsigned char outside_class[256];
/* Inside strings: 0 plain, 1 '"', 2 '\\', 3 control, 4 non-ASCII. */
static unsigned char inside_class[256];

static void init_classes(void) {
  for (int c = 0; c < 256; c++) {
    outside_class[c] = c < 0x20 ? C_CTRL : c >= 0x80 ? C_HIGH : C_SKIP;
    inside_class[c] = c < 0x20 ? 3 : c >= 0x80 ? 4 : 0;
  }
  outside_class[' '] = outside_class['\t'] = outside_class['\r'] = outside_class['\n'] = C_SKIP;
  outside_class['"'] = C_QUOTE;
  outside_class['{'] = outside_class['['] = C_OPEN;
  outside_class['}'] = outside_class[']'] = C_CLOSE;
  outside_class[','] = C_COMMA;
  outside_class['.'] = C_DOT;
  outside_class['0'] = C_ZERO;
  inside_class['"'] = 1;
  inside_class['\\'] = 2;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* For what cJSON accepts (strtod on a run of [0-9+-.eE] that starts with '-' or a digit),
 * JSON's grammar comes down to: a '.' has a digit on each side, and an integer part does not
 * start with 0 followed by a digit. Outside strings, '.' and '0' occur in numbers only. */
static bool dot_ok(const char *s, size_t len, size_t i) {
  return i > 0 && is_digit(s[i - 1]) && i + 1 < len && is_digit(s[i + 1]);
}

static bool zero_ok(const char *s, size_t len, size_t i) {
  if (i + 1 >= len || !is_digit(s[i + 1]))
    return true; /* 0 alone, 0., 0e */
  if (i == 0)
    return false;
  char p = s[i - 1];
  if (is_digit(p) || p == '.' || p == 'e' || p == 'E')
    return true; /* not the start of an integer part, or an exponent's digits */
  return (p == '-' || p == '+') && i >= 2 && (s[i - 2] == 'e' || s[i - 2] == 'E');
}

/* The number with a bad '.' or '0' at s[i] starts where the run of number bytes does. */
static void bad_number(scan *sc, const char *s, size_t i) {
  if (sc->number_at != SIZE_MAX)
    return;
  while (i > 0 && (is_digit(s[i - 1]) || strchr(".eE+-", s[i - 1])))
    i--;
  sc->number_at = i;
}

static void string_problem(scan *sc, size_t at, int what) {
  if (sc->string_at == SIZE_MAX) {
    sc->string_at = at;
    sc->string_problem = what;
  }
}

/* The index past the string whose opening quote is at s[i], checking its content; escaped
 * tells whether it holds an escape. */
static size_t scan_string(const char *s, size_t len, size_t i, scan *sc, bool *escaped) {
  *escaped = false;
  for (i++; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (inside_class[c]) {
    case 0:
      continue;
    case 1:
      return i + 1;
    case 2:
      *escaped = true;
      if (i + 1 < len && s[i + 1] == 'u') {
        /* cJSON reads a \u without four hex digits as U+0000 instead of refusing it */
        bool hex = i + 5 < len;
        for (size_t d = 2; hex && d < 6; d++)
          hex = scn_hex_digit(s[i + d]) >= 0;
        if (!hex)
          string_problem(sc, i, BAD_U_ESCAPE);
        else if (memcmp(s + i + 2, "0000", 4) == 0)
          string_problem(sc, i, ESCAPED_NUL);
      }
      i++; /* the escaped character (cJSON checks the other escapes itself) */
      if (i < len && (unsigned char)s[i] >= 0x80)
        i--; /* not an escape JSON knows: let the UTF-8 check see the byte */
      continue;
    case 3:
      string_problem(sc, i, CONTROL_INSIDE);
      continue;
    default: {
      uint32_t cp;
      size_t n = scn_utf8_char(s + i, len - i, &cp);
      if (n == 0) {
        sc->utf8_bad = true;
        continue;
      }
      i += n - 1;
    }
    }
  }
  return len;
}

/* Whether the raw text of a JSON string's content (escapes included: "\u0069d") is the ASCII
 * key, as cJSON reads it. */
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

/* The string s[start, end) (quotes included) is the key (of two or three bytes). */
static inline bool key_is(const char *s, size_t start, size_t end, bool escaped, const char *key,
                          size_t key_len) {
  size_t n = end - start - 2;
  if (!escaped)
    return n == key_len && s[start + 1] == key[0] && s[start + 2] == key[1] &&
           (key_len == 2 || s[start + 3] == key[2]);
  return raw_key_is(s + start + 1, n, key);
}

/* The field a key of n bytes names (raw text without escapes), or SCN_FIELD_COUNT. */
static inline bool same_bytes(const char *a, const char *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i])
      return false;
  return true;
}

static unsigned char key_field(const char *k, size_t n) {
#define SCN_KEY_MATCH(name)                                                                        \
  if (n == sizeof #name - 1 && same_bytes(k, #name, sizeof #name - 1))                             \
    return SCN_F_##name;
  SCN_FIELDS(SCN_KEY_MATCH)
#undef SCN_KEY_MATCH
  return SCN_FIELD_COUNT;
}

static size_t skip_ws(const char *s, size_t len, size_t i) {
  while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
    i++;
  return i;
}

/* The end of a value whose delimiter is at s[i]: past its last non-whitespace byte. */
static const char *value_end(const char *s, size_t i) {
  while (i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t' || s[i - 1] == '\r' || s[i - 1] == '\n'))
    i--;
  return s + i;
}

static bool push_op(scn_request *rq, const char *at) {
  scn_op_span *ops = scn_array_grow(rq->ops, &rq->ops_cap, sizeof *ops, rq->nops + 1);
  if (!ops)
    return false;
  rq->ops = ops;
  rq->ops[rq->nops++] = (scn_op_span){{at, 0}, {NULL, 0}};
  return true;
}

/* Depths: the top object's members are at depth 1, the ops of "ops" at 2, their members at
 * 3. Spans are taken at those levels only; deeper ones only count brackets. A string is a
 * key when a colon follows it. */
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* The end of a string that starts at s[i] (its opening quote) when it is printable ASCII
 * without escapes, eight bytes at a time while they last; 0 when it is not such a string (or
 * runs to the end of the line). */
static size_t plain_string_end(const char *s, size_t len, size_t i) {
  size_t j = i + 1;
  for (; j + 8 <= len; j += 8) {
    uint64_t v;
    memcpy(&v, s + j, 8);
    uint64_t q = v ^ (ONES * '"'), b = v ^ (ONES * '\\');
    /* high bit of each byte that is '"', '\\', below 0x20 or above 0x7f */
    uint64_t stop = (((q - ONES) & ~q) | ((b - ONES) & ~b) | ((v - ONES * 0x20) & ~v) | v) & HIGHS;
    if (stop) {
      j += (size_t)__builtin_ctzll(stop) / 8;
      return s[j] == '"' ? j + 1 : 0;
    }
  }
  for (; j < len; j++) {
    unsigned char c = (unsigned char)s[j];
    if (c == '"')
      return j + 1;
    if (inside_class[c])
      return 0;
  }
  return 0;
}

/* Depths: the top object's members are at depth 1, the ops of "ops" at 2, their members at
 * 3. Spans are taken at those levels only; deeper ones only count brackets. A string is a
 * key when a colon follows it. */
static void scan_line(const char *s, size_t len, scan *sc, scn_request *rq) {
  size_t depth = 0;
  /* bit d: a comma or a close at depth d ends a value being measured; keys are read at the
   * depths of keys_at */
  uint64_t watch = 0, keys_at = 1u << 1;
  enum { NONE, ID, OPS } member = NONE; /* the depth-1 member whose value is being walked */
  const char *member_at = NULL;
  bool ops_seen = false; /* only the first "ops" counts, as for cJSON */
  bool op_id = false;    /* walking the value of an op's "id" */
  const char *opid_at = NULL;
  bool ops_ok = true;
  rq->nops = rq->nkeys = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned cls = outside_class[(unsigned char)s[i]];
    if (cls == C_SKIP)
      continue;
    switch (cls) {
    case C_QUOTE: {
      /* Most strings are printable ASCII without escapes: they end at the next quote and
       * need no checks. Others are walked byte by byte. */
      bool escaped = false;
      size_t end = plain_string_end(s, len, i);
      if (!end)
        end = scan_string(s, len, i, sc, &escaped);
      size_t colon;
      if (depth < 4 && (keys_at >> depth & 1) && (colon = skip_ws(s, len, end)) < len &&
          s[colon] == ':') {
        const char *value = s + skip_ws(s, len, colon + 1);
        if (depth == 1) {
          unsigned char f = escaped ? SCN_KEY_UNREAD : key_field(s + i + 1, end - i - 2);
          if (rq->nkeys < sizeof rq->keys)
            rq->keys[rq->nkeys++] = f;
          member = NONE;
          if (!rq->id.p && (f == SCN_F_id || (escaped && key_is(s, i, end, true, "id", 2))))
            member = ID;
          else if (!ops_seen && (f == SCN_F_ops || (escaped && key_is(s, i, end, true, "ops", 3))))
            member = OPS, ops_seen = true;
          member_at = value;
          if (member != NONE)
            watch |= 1u << 1;
        } else if (rq->nops && !rq->ops[rq->nops - 1].id.p && key_is(s, i, end, escaped, "id", 2)) {
          op_id = true;
          opid_at = value;
          watch |= 1u << 3;
        }
        end = colon + 1;
      }
      i = end - 1;
      continue;
    }
    case C_OPEN:
      depth++;
      if (depth == 2 && member == OPS && s + i == member_at && s[i] == '[') {
        watch |= 1u << 2; /* the ops */
        keys_at |= 1u << 3;
        size_t k = skip_ws(s, len, i + 1);
        if (k < len && s[k] != ']')
          ops_ok = ops_ok && push_op(rq, s + k);
      }
      continue;
    case C_COMMA:
      if (depth >= 4 || !(watch >> depth & 1))
        continue; /* between values nobody measures (most commas) */
      /* fall through */
    case C_CLOSE: {
      bool comma = s[i] == ',';
      if (depth < 4 && (watch >> depth & 1)) {
        if (depth == 1) {
          if (member == ID)
            rq->id = (scn_span){member_at, (size_t)(value_end(s, i) - member_at)};
          member = NONE;
          watch &= ~(uint64_t)(1u << 1);
        } else if (depth == 2) {
          if (rq->nops) {
            scn_op_span *op = &rq->ops[rq->nops - 1];
            op->item.len = (size_t)(value_end(s, i) - op->item.p);
          }
          if (comma)
            ops_ok = ops_ok && push_op(rq, s + skip_ws(s, len, i + 1));
          else /* the ops end */
            watch &= ~(uint64_t)(1u << 2), keys_at &= ~(uint64_t)(1u << 3);
        } else if (op_id) {
          rq->ops[rq->nops - 1].id = (scn_span){opid_at, (size_t)(value_end(s, i) - opid_at)};
          op_id = false;
          watch &= ~(uint64_t)(1u << 3);
        }
      }
      if (!comma && depth > 0)
        depth--;
      continue;
    }
    case C_DOT:
      if (!dot_ok(s, len, i))
        bad_number(sc, s, i);
      continue;
    case C_ZERO:
      if (!zero_ok(s, len, i))
        bad_number(sc, s, i);
      continue;
    case C_CTRL:
      string_problem(sc, i, CONTROL_OUTSIDE);
      continue;
    default: { /* C_HIGH: not JSON outside strings, but reported as UTF-8 first */
      uint32_t cp;
      size_t n = scn_utf8_char(s + i, len - i, &cp);
      if (n == 0)
        sc->utf8_bad = true;
      else
        i += n - 1;
      continue;
    }
    }
  }
  if (!ops_ok)
    rq->nops = 0; /* out of memory: the ops' ids are then printed from the parsed values */
}

/* ---- the flat form --------------------------------------------------------------------------
 * Nearly every request is a flat object: members whose values are strings of printable ASCII
 * without escapes, numbers, true, false, null, or arrays of numbers (a matrix, t, r, s). Such a
 * line is read here in one pass into the very tree cJSON would build (the same nodes, allocated
 * through cJSON's allocator, the same doubles), which takes a fraction of what the validating
 * pass plus cJSON's parse cost: cJSON copies every string twice a character at a time, compares
 * each value with "null", "false" and "true" by strncmp, and reads every number with a
 * localeconv and a strtod. Anything else (nesting, escapes, other bytes, a number over 63
 * characters, "ops") is not flat and takes the general path, which decides every error. */

#define FLAT_WS(c) ((c) == ' ' || (c) == '\t' || (c) == '\r' || (c) == '\n')

static size_t flat_ws(const char *s, size_t len, size_t i) {
  while (i < len && FLAT_WS(s[i]))
    i++;
  return i;
}

static cJSON *flat_node(int type) {
  cJSON *n = cJSON_malloc(sizeof *n);
  if (n) {
    memset(n, 0, sizeof *n);
    n->type = type;
  }
  return n;
}

static char *flat_copy(const char *p, size_t n) {
  char *c = cJSON_malloc(n + 1);
  if (c) {
    memcpy(c, p, n);
    c[n] = '\0';
  }
  return c;
}

/* Powers of ten that doubles hold exactly. */
static const double exact_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The end of the JSON number at s[i] (0 when there is none, or it is over 63 characters, which
 * cJSON would cut short), with its value in *d exactly as strtod reads it: with at most 2^53 as
 * its digits and a power of ten up to 22, one exact multiplication or division rounds it
 * correctly (Clinger's fast path); other numbers go to strtod. */
static size_t flat_number(const char *s, size_t len, size_t i, double *d) {
  size_t start = i;
  bool neg = i < len && s[i] == '-';
  i += neg;
  if (i >= len || !is_digit(s[i]))
    return 0;
  uint64_t m = 0;
  int digits = 0, exp10 = 0;
  if (s[i] == '0')
    i++;
  else
    for (; i < len && is_digit(s[i]); i++)
      if (digits < 19)
        m = m * 10 + (uint64_t)(s[i] - '0'), digits += m != 0;
      else
        exp10++, digits++;
  if (i < len && s[i] == '.') {
    if (++i >= len || !is_digit(s[i]))
      return 0;
    for (; i < len && is_digit(s[i]); i++)
      if (digits < 19)
        m = m * 10 + (uint64_t)(s[i] - '0'), digits += m != 0, exp10--;
      else
        digits++;
  }
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    bool eneg = i < len && s[i] == '-';
    if (i < len && (s[i] == '-' || s[i] == '+'))
      i++;
    if (i >= len || !is_digit(s[i]))
      return 0;
    int e = 0;
    for (; i < len && is_digit(s[i]); i++)
      e = e < 10000 ? e * 10 + (s[i] - '0') : e;
    exp10 += eneg ? -e : e;
  }
  if (i - start > 63)
    return 0;
  if (digits <= 19 && m <= (UINT64_C(1) << 53) && exp10 >= -22 && exp10 <= 22) {
    double v = (double)m;
    v = exp10 < 0 ? v / exact_pow10[-exp10] : v * exact_pow10[exp10];
    *d = neg ? -v : v;
  } else {
    char tmp[64];
    memcpy(tmp, s + start, i - start);
    tmp[i - start] = '\0';
    *d = strtod(tmp, NULL);
  }
  return i;
}

static cJSON *flat_number_node(double d) {
  cJSON *n = flat_node(cJSON_Number);
  if (n) {
    n->valuedouble = d;
    n->valueint = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : (int)d;
  }
  return n;
}

/* Appends item to parent's children, linked as cJSON links them (the first one's prev is the
 * last one). */
static void flat_append(cJSON *parent, cJSON **last, cJSON *item) {
  if (*last) {
    (*last)->next = item;
    item->prev = *last;
  } else {
    parent->child = item;
  }
  parent->child->prev = *last = item;
}

/* What follows a member or an element that ends at *j: a comma (1; *j at the next one), the
 * closing bracket close (0; *j at it), or anything else (-1). */
static int flat_next(const char *s, size_t len, size_t *j, char close) {
  size_t k = flat_ws(s, len, *j);
  if (k < len && s[k] == ',') {
    *j = flat_ws(s, len, k + 1);
    return 1;
  }
  *j = k;
  return k < len && s[k] == close ? 0 : -1;
}

/* The value at s[*i] into *out (NULL when it is not one the flat form takes). */
static cJSON *flat_value(const char *s, size_t len, size_t *i) {
  size_t at = *i;
  char c = s[at];
  cJSON *v = NULL;
  if (c == '"') {
    size_t end = plain_string_end(s, len, at);
    if (!end || !(v = flat_node(cJSON_String)))
      return NULL;
    if (!(v->valuestring = flat_copy(s + at + 1, end - at - 2))) {
      cJSON_Delete(v);
      return NULL;
    }
    *i = end;
  } else if (c == '-' || is_digit(c)) {
    double d;
    size_t end = flat_number(s, len, at, &d);
    if (!end || !(v = flat_number_node(d)))
      return NULL;
    *i = end;
  } else if (c == '[') {
    if (!(v = flat_node(cJSON_Array)))
      return NULL;
    size_t j = flat_ws(s, len, at + 1);
    cJSON *last = NULL;
    if (j < len && s[j] == ']') {
      *i = j + 1;
      return v;
    }
    int next = 1;
    while (next > 0) {
      double d;
      size_t end = j < len ? flat_number(s, len, j, &d) : 0;
      cJSON *x = end ? flat_number_node(d) : NULL;
      if (!x || (flat_append(v, &last, x), j = end, next = flat_next(s, len, &j, ']')) < 0) {
        cJSON_Delete(v);
        return NULL;
      }
    }
    *i = j + 1;
  } else {
    static const struct {
      const char *text;
      size_t len;
      int type;
    } lits[] = {{"true", 4, cJSON_True}, {"false", 5, cJSON_False}, {"null", 4, cJSON_NULL}};
    for (size_t k = 0; k < 3; k++)
      if (len - at >= lits[k].len && memcmp(s + at, lits[k].text, lits[k].len) == 0) {
        if (!(v = flat_node(lits[k].type)))
          return NULL;
        v->valueint = lits[k].type == cJSON_True;
        *i = at + lits[k].len;
        return v;
      }
  }
  return v;
}

/* Parses line into rq when it is a flat object; false (with nothing kept) when it is not. */
static bool parse_flat(scn_request *rq, const char *s, size_t len) {
  size_t i = flat_ws(s, len, 0);
  if (i >= len || s[i] != '{')
    return false;
  cJSON *root = flat_node(cJSON_Object), *last = NULL;
  if (!root)
    return false;
  scn_fields *f = &rq->f;
  i = flat_ws(s, len, i + 1);
  bool first = true;
  for (;;) {
    if (i < len && s[i] == '}' && first)
      break;
    size_t key_end = i < len && s[i] == '"' ? plain_string_end(s, len, i) : 0;
    if (!key_end)
      goto not_flat;
    unsigned k = key_field(s + i + 1, key_end - i - 2);
    size_t colon = flat_ws(s, len, key_end);
    if (k == SCN_F_ops || colon >= len || s[colon] != ':')
      goto not_flat;
    size_t v_at = flat_ws(s, len, colon + 1), v_end = v_at;
    cJSON *v = v_at < len ? flat_value(s, len, &v_end) : NULL;
    if (!v)
      goto not_flat;
    flat_append(root, &last, v);
    if (!(v->string = flat_copy(s + i + 1, key_end - i - 2)))
      goto not_flat;
    if (rq->nkeys < sizeof rq->keys)
      rq->keys[rq->nkeys++] = (unsigned char)k;
    f->stray |= k >= SCN_FIELD_COUNT;
    if (k < SCN_FIELD_COUNT && !(f->present & ((scn_fieldset)1 << k))) {
      f->present |= (scn_fieldset)1 << k;
      f->v[k] = v;
      if (k == SCN_F_id)
        rq->id = (scn_span){s + v_at, v_end - v_at};
    }
    first = false;
    i = v_end;
    int next = flat_next(s, len, &i, '}');
    if (next < 0)
      goto not_flat;
    if (next == 0)
      break;
  }
  /* Only whitespace may follow the object (as on the general path: no line feed). */
  for (i++; i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'); i++)
    ;
  if (i < len)
    goto not_flat;
  rq->root = root;
  f->obj = root;
  return true;
not_flat:
  cJSON_Delete(root);
  rq->f.present = 0;
  rq->f.stray = false;
  rq->id = (scn_span){NULL, 0};
  rq->nkeys = 0;
  return false;
}

/* ---- parsing ------------------------------------------------------------------------------ */

static void init_once(void) {
  static bool ready;
  if (!ready) {
    init_classes();
    ready = true;
  }
}

int scn_request_parse(scn_request *rq, const char *line, size_t len, scn_wire_error *err) {
  init_once();
  rq->root = NULL;
  rq->f.present = 0;
  rq->f.stray = false;
  rq->f.obj = NULL;
  rq->id = (scn_span){NULL, 0};
  rq->nops = rq->nkeys = 0;
  if (parse_flat(rq, line, len))
    return 0;
  return scn_request_parse_general(rq, line, len, err);
}

int scn_request_parse_general(scn_request *rq, const char *line, size_t len, scn_wire_error *err) {
  init_once();
  rq->root = NULL;
  rq->f.present = 0;
  rq->f.stray = false;
  rq->f.obj = NULL;
  rq->id = (scn_span){NULL, 0};
  scan sc = {false, SIZE_MAX, SIZE_MAX, NO_PROBLEM};
  scan_line(line, len, &sc, rq);
  if (sc.utf8_bad) {
    rq->id = (scn_span){NULL, 0};
    return scn_fail(err, SCN_W_BAD_JSON, "request is not valid UTF-8");
  }
  const char *end = NULL;
  cJSON *req = cJSON_ParseWithLengthOpts(line, len, &end, 0);
  if (!req) {
    size_t at = end && end >= line ? (size_t)(end - line) : 0;
    rq->id = (scn_span){NULL, 0};
    return scn_fail(err, SCN_W_BAD_JSON, "invalid JSON near byte %zu", at);
  }
  /* Only whitespace may follow the object. */
  size_t at = (size_t)(end - line);
  while (at < len && (line[at] == ' ' || line[at] == '\t' || line[at] == '\r'))
    at++;
  int rc = 0;
  if (at < len)
    rc = scn_fail(err, SCN_W_BAD_JSON, "unexpected data after the JSON object at byte %zu", at);
  else if (!cJSON_IsObject(req))
    rc = scn_fail(err, SCN_W_BAD_JSON, "a request must be a JSON object");
  else if (sc.number_at != SIZE_MAX)
    rc = scn_fail(err, SCN_W_BAD_JSON, "invalid number at byte %zu", sc.number_at);
  else if (sc.string_problem == CONTROL_OUTSIDE)
    rc = scn_fail(err, SCN_W_BAD_JSON, "control character outside a string at byte %zu",
                  sc.string_at);
  else if (sc.string_problem == CONTROL_INSIDE)
    rc = scn_fail(err, SCN_W_BAD_JSON, "unescaped control character in a string at byte %zu",
                  sc.string_at);
  else if (sc.string_problem == BAD_U_ESCAPE)
    rc = scn_fail(err, SCN_W_BAD_JSON, "invalid \\u escape (four hex digits) at byte %zu",
                  sc.string_at);
  else if (sc.string_problem == ESCAPED_NUL)
    /* a well-formed object refused for its content still echoes its id */
    rc = scn_fail(err, SCN_W_BAD_REQUEST, "strings must not contain U+0000 (byte %zu)",
                  sc.string_at);
  if (rc != 0) {
    if (err->code != SCN_W_BAD_REQUEST)
      rq->id = (scn_span){NULL, 0};
    cJSON_Delete(req);
    return rc;
  }
  rq->root = req;
  /* The members in order, with the fields the pass read for their keys. */
  scn_fields *f = &rq->f;
  f->present = 0;
  f->stray = false;
  f->obj = req;
  size_t n = 0;
  for (const cJSON *m = req->child; m; m = m->next, n++) {
    unsigned k = n < rq->nkeys ? rq->keys[n] : SCN_KEY_UNREAD;
    if (k == SCN_KEY_UNREAD)
      k = scn_field_find(m->string);
    f->stray |= k >= SCN_FIELD_COUNT;
    if (k < SCN_FIELD_COUNT && !(f->present & ((scn_fieldset)1 << k))) {
      f->present |= (scn_fieldset)1 << k;
      f->v[k] = m;
    }
  }
  return 0;
}

void scn_request_free(scn_request *rq) {
  free(rq->ops);
  rq->ops = NULL;
  rq->nops = rq->ops_cap = 0;
}

void scn_fields_index(scn_fields *f, const cJSON *obj) {
  f->present = 0;
  f->stray = false;
  f->obj = obj;
  for (const cJSON *m = obj->child; m; m = m->next) {
    scn_field k = scn_field_find(m->string);
    f->stray |= k >= SCN_FIELD_COUNT;
    if (k < SCN_FIELD_COUNT && !(f->present & ((scn_fieldset)1 << k))) {
      f->present |= (scn_fieldset)1 << k;
      f->v[k] = m;
    }
  }
}

int scn_fields_check_taken(const scn_fields *f, scn_fieldset taken, scn_wire_error *err) {
  if (!f->stray && !(f->present & ~taken))
    return 0;
  /* Some member is not taken: the first one sent is named. */
  for (const cJSON *m = f->obj ? f->obj->child : NULL; m; m = m->next) {
    scn_field k = scn_field_find(m->string);
    if (k < SCN_FIELD_COUNT && (taken & ((scn_fieldset)1 << k)))
      continue;
    char text[sizeof err->message];
    scn_unknown_field_text(m->string, taken, text, sizeof text);
    return scn_fail(err, SCN_W_BAD_REQUEST, "%s", text);
  }
  return 0;
}

int scn_fields_require(const scn_fields *f, scn_fieldset required, scn_wire_error *err) {
  scn_fieldset missing = required & ~f->present;
  if (!missing)
    return 0;
  return scn_fail(err, SCN_W_BAD_REQUEST, "missing field \"%s\"",
                  scn_field_name((scn_field)__builtin_ctzll(missing)));
}

/* cJSON's type tests are calls into the library; these are the same tests, inline. */
static inline bool is_number(const cJSON *v) { return (v->type & 0xFF) == cJSON_Number; }
static inline bool is_array(const cJSON *v) { return (v->type & 0xFF) == cJSON_Array; }

/* ---- field decoders ----------------------------------------------------------------------- */

int scn_decode_string(const cJSON *v, const char *field, const char **out, scn_wire_error *err) {
  if ((v->type & 0xFF) != cJSON_String)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be a string", field);
  *out = v->valuestring;
  return 0;
}

int scn_decode_world_name(const cJSON *v, const char **out, scn_wire_error *err) {
  if (scn_decode_string(v, "world", out, err) < 0)
    return -1;
  if (!scn_world_name_valid(*out, strlen(*out)))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"world\" must be 1 to 64 characters from A-Z a-z 0-9 _ . -");
  return 0;
}

static bool is_entity_number(const cJSON *v) {
  if (!is_number(v))
    return false;
  double d = v->valuedouble;
  return d >= 1 && d <= MAX_SAFE_INTEGER && d == floor(d);
}

int scn_decode_entity(const cJSON *v, const char *field, uint64_t *out, scn_wire_error *err) {
  if (!is_entity_number(v))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"%s\" must be an entity id (an integer from 1 to 2^53-1)", field);
  *out = (uint64_t)v->valuedouble;
  return 0;
}

int scn_decode_entity_or_null(const cJSON *v, const char *field, uint64_t *out,
                              scn_wire_error *err) {
  if (cJSON_IsNull(v)) {
    *out = 0;
    return 0;
  }
  if (!is_entity_number(v))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"%s\" must be an entity id (an integer from 1 to 2^53-1) or null",
                    field);
  *out = (uint64_t)v->valuedouble;
  return 0;
}

int scn_decode_uint(const cJSON *v, const char *field, uint64_t min, uint64_t max, uint64_t *out,
                    scn_wire_error *err) {
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!(d == floor(d)) || d < (double)min || d > (double)max)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be an integer from %llu to %llu",
                    field, (unsigned long long)min, (unsigned long long)max);
  *out = (uint64_t)d;
  return 0;
}

int scn_decode_number(const cJSON *v, const char *field, double *out, scn_wire_error *err) {
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be a finite number", field);
  *out = v->valuedouble;
  return 0;
}

int scn_decode_tick(const cJSON *v, double *out, scn_wire_error *err) {
  if (!is_number(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"tick\" must be a tick number (0 or more; a fraction interpolates)");
  *out = v->valuedouble;
  return 0;
}

int scn_decode_bool(const cJSON *v, const char *field, bool *out, scn_wire_error *err) {
  if (!cJSON_IsBool(v))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be true or false", field);
  *out = cJSON_IsTrue(v);
  return 0;
}

/* One of two strings: *second false for the first, true for the second. */
static int decode_choice(const cJSON *v, const char *field, const char *first, const char *second,
                         bool *is_second, scn_wire_error *err) {
  if (cJSON_IsString(v) &&
      (strcmp(v->valuestring, first) == 0 || strcmp(v->valuestring, second) == 0)) {
    *is_second = strcmp(v->valuestring, second) == 0;
    return 0;
  }
  return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be \"%s\" or \"%s\"", field, first,
                  second);
}

int scn_decode_keep(const cJSON *v, bool *keep_world, scn_wire_error *err) {
  return decode_choice(v, "keep", "local", "world", keep_world, err);
}

int scn_decode_matrix_form(const cJSON *v, scn_matrix_form *out, scn_wire_error *err) {
  bool b64 = false;
  int rc = decode_choice(v, "matrices", "json", "b64", &b64, err);
  *out = b64 ? SCN_MATRICES_B64 : SCN_MATRICES_JSON;
  return rc;
}

int scn_decode_matrix_b64(const cJSON *v, float m[16], scn_wire_error *err) {
  if ((v->type & 0xFF) != cJSON_String)
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"matrix_b64\" must be a string: 88 base64 characters (64 bytes, 16 "
                    "little-endian float32)");
  size_t at = 0, len = strnlen(v->valuestring, SCN_B64_MATRIX_LEN + 1);
  scn_b64_status st = scn_b64_decode_matrix(v->valuestring, len, m, &at);
  if (st == SCN_B64_OK)
    return 0;
  if (st == SCN_B64_CHAR)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"matrix_b64\" %s at character %zu",
                    scn_b64_status_text(st), at);
  if (st == SCN_B64_LENGTH)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"matrix_b64\" %s, not %s%zu",
                    scn_b64_status_text(st), len > SCN_B64_MATRIX_LEN ? "more than " : "",
                    len > SCN_B64_MATRIX_LEN ? (size_t)SCN_B64_MATRIX_LEN : len);
  return scn_fail(err, SCN_W_BAD_REQUEST, "field \"matrix_b64\" %s", scn_b64_status_text(st));
}

int scn_decode_name_or_null(const cJSON *v, const char *field, const char **out,
                            scn_wire_error *err) {
  if (cJSON_IsNull(v)) {
    *out = NULL;
    return 0;
  }
  if (!cJSON_IsString(v))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be a string or null", field);
  if (!scn_name_valid(v->valuestring, strlen(v->valuestring)))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"%s\" must be 1 to 64 bytes with no '/' and no control characters",
                    field);
  *out = v->valuestring;
  return 0;
}

/* ---- transform specs ---------------------------------------------------------------------- */

static bool finite_float(double d) { return isfinite(d) && isfinite((float)d); }

static bool all_finite(const float *f, int n) {
  for (int i = 0; i < n; i++)
    if (!isfinite(f[i]))
      return false;
  return true;
}

/* n numbers into out, converted to float32. A matrix's are not checked for finiteness (the
 * core refuses a non-finite matrix; scn_spec_error then names the field); the parts of a
 * t/r/s spec are, in order, so the error names the first bad one. */
static int float_array(const cJSON *v, const char *field, int n, float *out, bool check,
                       scn_wire_error *err) {
  int i = 0;
  bool good = true;
  if (is_array(v))
    for (const cJSON *x = v->child; x; x = x->next, i++) {
      good &= i < n && is_number(x);
      if (!good)
        break;
      out[i] = (float)x->valuedouble;
    }
  if (good && i == n && (!check || all_finite(out, n)))
    return 0;
  /* what is wrong, in the order a reader would check: the length, then each number */
  int count = 0;
  const cJSON *bad = NULL;
  for (const cJSON *x = is_array(v) ? v->child : NULL; x; x = x->next, count++)
    if (!bad && (!is_number(x) || (check && !finite_float(x->valuedouble))))
      bad = x;
  if (count != n)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must be an array of %d numbers", field,
                    n);
  if (!is_number(bad))
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"%s\" must hold numbers", field);
  return scn_fail(err, SCN_W_BAD_REQUEST,
                  "field \"%s\" holds a number that is not a finite float32", field);
}

int scn_spec_error(const scn_fields *f, scn_wire_error *err) {
  if (f->present & SCN_F(matrix_b64))
    return scn_fail(err, SCN_W_BAD_REQUEST,
                    "field \"matrix_b64\" holds a value that is not finite (an infinity or a NaN)");
  if (f->present & SCN_F(matrix)) {
    const cJSON *m = f->v[SCN_F_matrix];
    for (const cJSON *x = cJSON_IsArray(m) ? m->child : NULL; x; x = x->next)
      if (cJSON_IsNumber(x) && !finite_float(x->valuedouble))
        return scn_fail(err, SCN_W_BAD_REQUEST,
                        "field \"matrix\" holds a number that is not a finite float32");
  }
  return scn_fail(err, SCN_W_BAD_REQUEST, "the transform spec gives a non-finite matrix");
}

/* The one place a spec learns of "partial": it refuses a whole matrix and keeps the parts
 * apart instead of composing them. */
static int decode_spec(scn_args *a, scn_wire_error *err) {
  const scn_fields *f = a->f;
  scn_fieldset has = f->present;
  scn_fieldset whole = has & (SCN_F(matrix) | SCN_F(matrix_b64));
  if (whole) {
    bool b64 = whole == SCN_F(matrix_b64);
    const char *name = b64 ? "matrix_b64" : "matrix";
    if (whole == (SCN_F(matrix) | SCN_F(matrix_b64)))
      return scn_fail(err, SCN_W_BAD_REQUEST, "give either \"matrix\" or \"matrix_b64\", not both");
    if (a->partial)
      return scn_fail(err, SCN_W_BAD_REQUEST,
                      "\"partial\" replaces parts: give \"t\", \"r\" or \"s\", not \"%s\"", name);
    if (has & SCN_F_PARTS)
      return scn_fail(err, SCN_W_BAD_REQUEST, "give either \"%s\" or \"t\"/\"r\"/\"s\", not both",
                      name);
    a->has_spec = true;
    if (b64)
      return scn_decode_matrix_b64(f->v[SCN_F_matrix_b64], a->m, err);
    return float_array(f->v[SCN_F_matrix], "matrix", 16, a->m, false, err);
  }
  const cJSON *s = f->v[SCN_F_s];
  if ((has & SCN_F(t)) && float_array(f->v[SCN_F_t], "t", 3, a->t, true, err) < 0)
    return -1;
  if ((has & SCN_F(r)) && float_array(f->v[SCN_F_r], "r", 4, a->r, true, err) < 0)
    return -1;
  if (has & SCN_F(s)) {
    if (!cJSON_IsNumber(s)) {
      if (float_array(s, "s", 3, a->s, true, err) < 0)
        return -1;
    } else if (!finite_float(s->valuedouble)) {
      return scn_fail(err, SCN_W_BAD_REQUEST,
                      "field \"s\" holds a number that is not a finite float32");
    } else {
      a->s[0] = a->s[1] = a->s[2] = (float)s->valuedouble;
    }
  }
  bool with_r = has & SCN_F(r);
  const float *r = a->r;
  if (with_r && r[0] == 0 && r[1] == 0 && r[2] == 0 && r[3] == 0)
    return scn_fail(err, SCN_W_BAD_REQUEST, "field \"r\" must be a non-zero quaternion");
  if (a->partial)
    a->parts = has & SCN_F_PARTS;
  else if (scn_compose_trs(has & SCN_F(t) ? a->t : NULL, with_r ? r : NULL,
                           has & SCN_F(s) ? a->s : NULL, a->m) != SCN_OK)
    return scn_fail(err, SCN_W_BAD_REQUEST, "the transform spec gives a non-finite matrix");
  a->has_spec = true;
  return 0;
}

/* ---- arguments ---------------------------------------------------------------------------- */

void scn_args_init(scn_args *a, const scn_fields *f) {
  a->f = f;
  a->world = a->name = a->path = NULL;
  a->entity = a->parent = a->to = a->root = 0;
  a->recursive = a->keep_world = a->has_spec = a->partial = a->trs = a->has_tick = false;
  a->parts = 0;
  a->matrices = SCN_MATRICES_JSON;
  a->follower_reads = false;
}

int scn_args_decode(scn_args *a, scn_fieldset set, scn_wire_error *err) {
  const scn_fields *f = a->f;
  bool spec_done = false;
  for (scn_fieldset todo = set & f->present; todo; todo &= todo - 1) {
    scn_field k = (scn_field)__builtin_ctzll(todo);
    const cJSON *v = f->v[k];
    int rc = 0;
    switch (k) {
    case SCN_F_world:
      rc = scn_decode_world_name(v, &a->world, err);
      break;
    case SCN_F_entity:
      rc = scn_decode_entity(v, "entity", &a->entity, err);
      break;
    case SCN_F_to:
      rc = scn_decode_entity(v, "to", &a->to, err);
      break;
    case SCN_F_root:
      rc = scn_decode_entity(v, "root", &a->root, err);
      break;
    case SCN_F_parent:
      rc = scn_decode_entity_or_null(v, "parent", &a->parent, err);
      break;
    case SCN_F_name:
      rc = scn_decode_name_or_null(v, "name", &a->name, err);
      break;
    case SCN_F_path:
      rc = scn_decode_string(v, "path", &a->path, err);
      break;
    case SCN_F_recursive:
      rc = scn_decode_bool(v, "recursive", &a->recursive, err);
      break;
    case SCN_F_keep:
      rc = scn_decode_keep(v, &a->keep_world, err);
      break;
    case SCN_F_matrices:
      rc = scn_decode_matrix_form(v, &a->matrices, err);
      break;
    case SCN_F_partial:
      rc = scn_decode_bool(v, "partial", &a->partial, err);
      break;
    case SCN_F_trs:
      rc = scn_decode_bool(v, "trs", &a->trs, err);
      break;
    case SCN_F_follower_reads:
      rc = scn_decode_bool(v, "follower_reads", &a->follower_reads, err);
      break;
    case SCN_F_tick:
      rc = scn_decode_tick(v, &a->tick, err);
      a->has_tick = rc == 0;
      break;
    case SCN_F_matrix:
    case SCN_F_matrix_b64:
    case SCN_F_t:
    case SCN_F_r:
    case SCN_F_s:
      if (!spec_done)
        rc = decode_spec(a, err);
      spec_done = true;
      break;
    default:
      break; /* decoded by the command itself (count, hz, sub, token, ops, near, packed) */
    }
    if (rc < 0)
      return -1;
  }
  return 0;
}

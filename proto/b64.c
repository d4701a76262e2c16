/* Base64 of matrices. Our own tables rather than nettle's base64 (which the daemon links for
 * the WebSocket handshake): nettle decodes one character per call through a switch, skips
 * whitespace and takes any length, so a matrix would need checks around it and cost several
 * times as much (bench-decode prints both); here a matrix is 22 groups of four table reads,
 * with every check folded into one test at the end, and the encoder writes eight characters
 * per 6 bytes from a table of character pairs. The tables are constant data, built by the
 * preprocessor, so nothing is initialised at run time. */
#include "b64.h"

#include <stdbool.h>
#include <string.h>

/* The character of a 6-bit value, and the value of a character (64 when it is none). */
#define B64_CHAR(v)                                                                                \
  ((v) < 26 ? 'A' + (v) : (v) < 52 ? 'a' + (v)-26 : (v) < 62 ? '0' + (v)-52 : (v) == 62 ? '+' : '/')
#define B64_VALUE(c)                                                                               \
  ((c) >= 'A' && (c) <= 'Z'   ? (c) - 'A'                                                          \
   : (c) >= 'a' && (c) <= 'z' ? (c) - 'a' + 26                                                     \
   : (c) >= '0' && (c) <= '9' ? (c) - '0' + 52                                                     \
   : (c) == '+'               ? 62                                                                 \
   : (c) == '/'               ? 63                                                                 \
                              : 0x80)

#define X4(M, i) M(i), M((i) + 1), M((i) + 2), M((i) + 3)
#define X16(M, i) X4(M, i), X4(M, (i) + 4), X4(M, (i) + 8), X4(M, (i) + 12)
#define X64(M, i) X16(M, i), X16(M, (i) + 16), X16(M, (i) + 32), X16(M, (i) + 48)
#define X256(M, i) X64(M, i), X64(M, (i) + 64), X64(M, (i) + 128), X64(M, (i) + 192)
#define X1024(M, i) X256(M, i), X256(M, (i) + 256), X256(M, (i) + 512), X256(M, (i) + 768)
#define X4096(M, i) X1024(M, i), X1024(M, (i) + 1024), X1024(M, (i) + 2048), X1024(M, (i) + 3072)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define B64_BIG_ENDIAN 1
#define B64_PAIR(i) (uint16_t)(B64_CHAR((i) >> 6) << 8 | B64_CHAR((i)&63))
#else
#define B64_BIG_ENDIAN 0
/* two characters as they lie in memory when stored as a uint16_t */
#define B64_PAIR(i) (uint16_t)(B64_CHAR((i) >> 6) | B64_CHAR((i)&63) << 8)
#endif

static const uint16_t pairs[4096] = {X4096(B64_PAIR, 0)};
#define B64_VALUE_BYTE(c) (uint8_t)(B64_VALUE(c))
static const uint8_t values[256] = {X256(B64_VALUE_BYTE, 0)};

static inline uint64_t load_be64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
#if B64_BIG_ENDIAN
  return v;
#else
  return __builtin_bswap64(v);
#endif
}

static inline void put_pair(char *out, uint32_t v12) { memcpy(out, &pairs[v12], 2); }

void scn_b64_encode(char *out, const void *bytes, size_t n) {
  const uint8_t *in = bytes;
  size_t i = 0;
  /* 6 bytes (from an 8-byte load) give 8 characters, four pairs, one store */
  for (; i + 8 <= n; i += 6, out += 8) {
    uint64_t v = load_be64(in + i) >> 16;
    uint64_t p0 = pairs[v >> 36], p1 = pairs[(v >> 24) & 0xfff], p2 = pairs[(v >> 12) & 0xfff],
             p3 = pairs[v & 0xfff];
#if B64_BIG_ENDIAN
    uint64_t w = p0 << 48 | p1 << 32 | p2 << 16 | p3;
#else
    uint64_t w = p0 | p1 << 16 | p2 << 32 | p3 << 48;
#endif
    memcpy(out, &w, 8);
  }
  for (; i + 3 <= n; i += 3, out += 4) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    put_pair(out, v >> 12);
    put_pair(out + 2, v & 0xfff);
  }
  if (i + 1 == n) {
    put_pair(out, (uint32_t)in[i] << 4);
    out[2] = out[3] = '=';
  } else if (i + 2 == n) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
    put_pair(out, v >> 12);
    out[2] = (char)B64_CHAR((v >> 6) & 63);
    out[3] = '=';
  }
}

/* Whether any of n floats is an infinity or a NaN (all exponent bits set). */
static inline int any_non_finite(const float *f, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, &f[i], 4);
    bad |= (uint32_t)((b & 0x7f800000u) == 0x7f800000u);
  }
  return (int)bad;
}

#define FLT_MAX_BITS 0x7f7fffffu

void scn_b64_encode_matrices(char *out, const float (*m)[16], size_t count) {
  /* Three matrices are 192 bytes, 256 characters with no padding: chunks of three encode
   * independently, and only the last one may be shorter. */
  uint32_t tmp[48];
  for (size_t k = 0; k < count; k += 3) {
    size_t nm = count - k < 3 ? count - k : 3, nf = nm * 16;
    const void *src = m[k];
    if (B64_BIG_ENDIAN || any_non_finite(m[k], nf)) {
      memcpy(tmp, m[k], nf * 4);
      for (size_t i = 0; i < nf; i++) {
        uint32_t b = tmp[i];
        if ((b & 0x7f800000u) == 0x7f800000u)
          b = (b & 0x007fffffu) ? 0 : (b & 0x80000000u) | FLT_MAX_BITS;
#if B64_BIG_ENDIAN
        b = __builtin_bswap32(b);
#endif
        tmp[i] = b;
      }
      src = tmp;
    }
    scn_b64_encode(out, src, nf * 4);
    out += SCN_B64_LEN(nf * 4);
  }
}

/* Why s (len characters, the base64 of n bytes) does not decode: the first character outside
 * the alphabet, else padding in the wrong place or missing, else bits the bytes do not use. */
static scn_b64_status diagnose(const char *s, size_t len, size_t n, size_t *at) {
  size_t pad = (3 - n % 3) % 3, data = len - pad;
  bool pad_wrong = false;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '=') {
      pad_wrong |= i < data;
    } else if (values[(uint8_t)s[i]] & 0x80) {
      if (at)
        *at = i;
      return SCN_B64_CHAR;
    } else {
      pad_wrong |= i >= data;
    }
  }
  return pad_wrong ? SCN_B64_PADDING : SCN_B64_PAD_BITS;
}

/* Decodes the base64 of n bytes (len must be SCN_B64_LEN(n)) into out; every check is folded
 * into one test at the end. */
static scn_b64_status decode(const char *s, size_t len, uint8_t *out, size_t n, size_t *at) {
  if (len != SCN_B64_LEN(n))
    return SCN_B64_LENGTH;
  const uint8_t *p = (const uint8_t *)s;
  size_t groups = n / 3, rest = n % 3;
  uint32_t bad = 0;
  for (size_t g = 0; g < groups; g++, p += 4, out += 3) {
    uint32_t a = values[p[0]], b = values[p[1]], c = values[p[2]], d = values[p[3]];
    bad |= a | b | c | d;
    uint32_t v = a << 18 | b << 12 | c << 6 | d;
    out[0] = (uint8_t)(v >> 16);
    out[1] = (uint8_t)(v >> 8);
    out[2] = (uint8_t)v;
  }
  bool tail_ok = true;
  if (rest == 1) {
    uint32_t a = values[p[0]], b = values[p[1]];
    bad |= a | b;
    out[0] = (uint8_t)(a << 2 | b >> 4);
    tail_ok = p[2] == '=' && p[3] == '=' && !(b & 15);
  } else if (rest == 2) {
    uint32_t a = values[p[0]], b = values[p[1]], c = values[p[2]];
    bad |= a | b | c;
    out[0] = (uint8_t)(a << 2 | b >> 4);
    out[1] = (uint8_t)(b << 4 | c >> 2);
    tail_ok = p[3] == '=' && !(c & 3);
  }
  if ((bad & 0x80) || !tail_ok)
    return diagnose(s, len, n, at);
  return SCN_B64_OK;
}

static void floats_from_le(float *m, size_t count) {
#if B64_BIG_ENDIAN
  uint32_t *u = (uint32_t *)(void *)m;
  for (size_t i = 0; i < count; i++)
    u[i] = __builtin_bswap32(u[i]);
#else
  (void)m, (void)count;
#endif
}

scn_b64_status scn_b64_decode_matrix(const char *s, size_t len, float m[16], size_t *at) {
  uint8_t bytes[64];
  scn_b64_status st = decode(s, len, bytes, sizeof bytes, at);
  if (st == SCN_B64_OK) {
    memcpy(m, bytes, 64);
    floats_from_le(m, 16);
  }
  return st;
}

scn_b64_status scn_b64_decode_matrices(const char *s, size_t len, float (*m)[16], size_t count,
                                       size_t *at) {
  scn_b64_status st = decode(s, len, (uint8_t *)m, 64 * count, at);
  if (st == SCN_B64_OK && count)
    floats_from_le(m[0], 16 * count);
  return st;
}

scn_b64_status scn_b64_decode_bytes(const char *s, size_t len, uint8_t *out, size_t *n,
                                    size_t *at) {
  *n = 0;
  if (len % 4)
    return SCN_B64_LENGTH;
  size_t pad = len && s[len - 1] == '=' ? (s[len - 2] == '=' ? 2 : 1) : 0;
  scn_b64_status st = decode(s, len, out, len / 4 * 3 - pad, at);
  if (st == SCN_B64_OK)
    *n = len / 4 * 3 - pad;
  return st;
}

const char *scn_b64_status_text(scn_b64_status st) {
  switch (st) {
  case SCN_B64_OK:
    return "ok";
  case SCN_B64_LENGTH:
    return "must be 88 base64 characters (64 bytes: 16 little-endian float32)";
  case SCN_B64_CHAR:
    return "holds a character outside the base64 alphabet (A-Z a-z 0-9 + /)";
  case SCN_B64_PADDING:
    return "must end with the padding \"==\" (86 characters, then \"==\")";
  case SCN_B64_PAD_BITS:
    return "has non-zero bits in the character before the padding (not canonical base64)";
  }
  return "is not base64";
}

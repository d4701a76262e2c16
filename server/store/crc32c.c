/* CRC-32C for snapshot blocks and journal records: the processor's crc32 instruction where
 * it has one (x86-64 with SSE 4.2, checked once at run time), else slicing-by-8 tables, built
 * once. Both give the same values (the unit suite "crc32c" compares them). */
#include "store/crc32c.h"

#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW 1
#else
#define HAVE_HW 0
#endif

static uint32_t table[8][256];
static bool ready;

static void build(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
  ready = true;
}

static inline uint32_t step8(uint32_t crc, uint64_t v) {
  v ^= crc;
  return table[7][v & 0xFF] ^ table[6][(v >> 8) & 0xFF] ^ table[5][(v >> 16) & 0xFF] ^
         table[4][(v >> 24) & 0xFF] ^ table[3][(v >> 32) & 0xFF] ^ table[2][(v >> 40) & 0xFF] ^
         table[1][(v >> 48) & 0xFF] ^ table[0][v >> 56];
}

uint32_t scn_crc32c_table(uint32_t crc, const void *data, size_t len) {
  if (!ready)
    build();
  const unsigned char *p = data;
  crc = ~crc;
  while (len >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    crc = step8(crc, v);
    p += 8;
    len -= 8;
  }
  while (len--)
    crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
  return ~crc;
}

static uint32_t copy_table(void *dst, const void *src, size_t len) {
  if (!ready)
    build();
  const unsigned char *p = src;
  unsigned char *q = dst;
  uint32_t crc = ~0u;
  while (len >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    memcpy(q, &v, 8);
    crc = step8(crc, v);
    p += 8;
    q += 8;
    len -= 8;
  }
  while (len--) {
    *q++ = *p;
    crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
  }
  return ~crc;
}

#if HAVE_HW
__attribute__((target("sse4.2"))) static uint32_t hw(uint32_t crc, const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t c = ~crc;
  while (len >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    len -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (len--)
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  return ~c32;
}

__attribute__((target("sse4.2"))) static uint32_t copy_hw(void *dst, const void *src, size_t len) {
  const unsigned char *p = src;
  unsigned char *q = dst;
  uint64_t c = ~0u;
  while (len >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    memcpy(q, &v, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    q += 8;
    len -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (len--) {
    *q++ = *p;
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  }
  return ~c32;
}

/* libgcc's constructor fills in what the processor has before main; reading it is a load and a
 * test, so nothing is cached here (no state a journal writer thread could race on). */
static bool use_hw(void) { return __builtin_cpu_supports("sse4.2"); }
#endif

uint32_t scn_crc32c(uint32_t crc, const void *data, size_t len) {
#if HAVE_HW
  if (use_hw())
    return hw(crc, data, len);
#endif
  return scn_crc32c_table(crc, data, len);
}

uint32_t scn_crc32c_copy(void *dst, const void *src, size_t len) {
#if HAVE_HW
  if (use_hw())
    return copy_hw(dst, src, len);
#endif
  return copy_table(dst, src, len);
}

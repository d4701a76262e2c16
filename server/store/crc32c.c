/* CRC-32C for snapshot blocks and journal records: slicing-by-8 tables, built once. */
#include "store/crc32c.h"

#include <stdbool.h>
#include <string.h>

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

uint32_t scn_crc32c(uint32_t crc, const void *data, size_t len) {
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

uint32_t scn_crc32c_copy(void *dst, const void *src, size_t len) {
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

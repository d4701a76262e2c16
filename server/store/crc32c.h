#ifndef SCN_CRC32C_H
#define SCN_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli) of data, continuing from crc (start with 0). */
uint32_t scn_crc32c(uint32_t crc, const void *data, size_t len);
/* The same by tables alone, whatever the processor has (for the tests that compare). */
uint32_t scn_crc32c_table(uint32_t crc, const void *data, size_t len);
/* Copies len bytes to dst and returns their CRC-32C, in one pass over them. */
uint32_t scn_crc32c_copy(void *dst, const void *src, size_t len);

#endif

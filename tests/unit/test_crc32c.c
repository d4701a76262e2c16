/* Unit tests of CRC-32C (store/crc32c.h): the check value of the standard, and the same values
 * from scn_crc32c (the processor's instruction where it has one), scn_crc32c_copy (which copies
 * as well) and the tables alone, for every length up to a few words at every alignment, and
 * continued from a previous value. No daemon. */
#include "store/crc32c.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_check_value(void) {
  const char *s = "123456789";
  CU_ASSERT_EQUAL(scn_crc32c(0, s, 9), 0xE3069283u);
  CU_ASSERT_EQUAL(scn_crc32c_table(0, s, 9), 0xE3069283u);
  char out[9];
  CU_ASSERT_EQUAL(scn_crc32c_copy(out, s, 9), 0xE3069283u);
  CU_ASSERT(memcmp(out, s, 9) == 0);
  CU_ASSERT_EQUAL(scn_crc32c(0, s, 0), 0);
  /* In two parts: the second goes on from the first's value. */
  CU_ASSERT_EQUAL(scn_crc32c(scn_crc32c(0, s, 4), s + 4, 5), 0xE3069283u);
}

static void test_same_values(void) {
  unsigned seed = (unsigned)time(NULL);
  printf("\n  crc32c: seed %u\n", seed);
  srand(seed);
  unsigned char data[256], out[256];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (unsigned char)rand();
  for (size_t at = 0; at < 8; at++)
    for (size_t len = 0; at + len <= 80; len++) {
      uint32_t want = scn_crc32c_table(0, data + at, len);
      CU_ASSERT_EQUAL_FATAL(scn_crc32c(0, data + at, len), want);
      memset(out, 0, sizeof out);
      CU_ASSERT_EQUAL_FATAL(scn_crc32c_copy(out + at, data + at, len), want);
      CU_ASSERT_FATAL(memcmp(out + at, data + at, len) == 0);
      uint32_t from = (uint32_t)rand();
      CU_ASSERT_EQUAL_FATAL(scn_crc32c(from, data + at, len),
                            scn_crc32c_table(from, data + at, len));
    }
  CU_ASSERT_EQUAL(scn_crc32c(0, data, sizeof data), scn_crc32c_table(0, data, sizeof data));
}

int t_register_crc32c(void) {
  static const t_test tests[] = {
      {"the standard's check value, whole and in parts", test_check_value},
      {"the instruction, the copy and the tables agree at every length and alignment",
       test_same_values},
  };
  return T_ADD_SUITE("crc32c", NULL, NULL, tests);
}

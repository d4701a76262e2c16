/* Unit tests of what the replicas key says of ticks (cluster/owners.h): the owner's tick and an
 * epoch's lag_ticks, written only when said, read back, and read as 0 when absent or not a
 * count (the rest of the key still counts). No daemon, no etcd. */
#include "cluster/owners.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

static const char *text(scn_buf *b) {
  scn_buf_addc(b, '\0');
  return b->failed ? "" : b->data;
}

static void test_written_and_read(void) {
  scn_replica_set r = {.epoch = 9, .nfollowers = 1, .tick = 1234, .lag_ticks = 56};
  snprintf(r.owner, sizeof r.owner, "b");
  snprintf(r.followers[0], sizeof r.followers[0], "c");
  scn_buf v = {0};
  scn_owners_replicas_value(&v, &r);
  CU_ASSERT_STRING_EQUAL(text(&v), "{\"epoch\":9,\"owner\":\"b\",\"followers\":[\"c\"],"
                                   "\"insync\":[],\"tick\":1234,\"lag_ticks\":56,"
                                   "\"durability\":\"sync\"}");
  scn_replica_set back = {0};
  CU_ASSERT_TRUE(scn_owners_replicas_parse(v.data, v.len - 1, &back));
  CU_ASSERT_EQUAL(back.tick, 1234);
  CU_ASSERT_EQUAL(back.lag_ticks, 56);
  CU_ASSERT_EQUAL(back.epoch, 9);
  CU_ASSERT_STRING_EQUAL(back.owner, "b");
  scn_buf_free(&v);

  /* 0 is not said, and a key without them reads 0 (over what the set held before). */
  r.tick = r.lag_ticks = 0;
  scn_owners_replicas_value(&v, &r);
  CU_ASSERT_PTR_NULL(strstr(text(&v), "tick"));
  CU_ASSERT_TRUE(scn_owners_replicas_parse(v.data, v.len - 1, &back));
  CU_ASSERT_EQUAL(back.tick, 0);
  CU_ASSERT_EQUAL(back.lag_ticks, 0);
  scn_buf_free(&v);
}

static void test_not_counts(void) {
  static const char *const odd[] = {
      "{\"epoch\":3,\"tick\":-5,\"lag_ticks\":\"7\"}",
      "{\"epoch\":3,\"tick\":1e300,\"lag_ticks\":null}",
      "{\"epoch\":3,\"tick\":[1],\"lag_ticks\":{}}",
  };
  for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
    scn_replica_set r = {.tick = 99, .lag_ticks = 99};
    CU_ASSERT_TRUE(scn_owners_replicas_parse(odd[i], strlen(odd[i]), &r));
    CU_ASSERT_EQUAL(r.epoch, 3);
    CU_ASSERT_EQUAL(r.tick, 0);
    CU_ASSERT_EQUAL(r.lag_ticks, 0);
  }
}

int t_register_replica_ticks(void) {
  static const t_test tests[] = {
      {"tick and lag_ticks written when said, read back", test_written_and_read},
      {"a tick or lag_ticks that is not a count reads 0", test_not_counts},
  };
  return T_ADD_SUITE("replica_ticks", NULL, NULL, tests);
}

/* Unit tests of the owner's backlog of a group's records (cluster/backlog.h): records kept in
 * order within the byte bound, the oldest dropped as new ones come (the ring wrapping and
 * growing), and the lookup "from seq S" answering with the kept records, "too old" once S fell
 * out, and "ahead" past the next seq. No daemon. */
#include "cluster/backlog.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Record seq's bytes: "r<seq>" padded with '.' to len. */
static size_t record_of(uint64_t seq, size_t len, char *out) {
  memset(out, '.', len);
  int n = snprintf(out, len, "r%llu", (unsigned long long)seq);
  if (n >= 0 && (size_t)n < len)
    out[n] = '.';
  return len;
}

static void append(scn_backlog *b, uint64_t seq, size_t len) {
  char bytes[256];
  CU_ASSERT_FATAL(len <= sizeof bytes);
  CU_ASSERT(scn_backlog_append(b, seq, seq * 10, bytes, record_of(seq, len, bytes)));
}

/* The records from seq to the newest are kept, in order, with their ticks and bytes. */
static void check_from(const scn_backlog *b, uint64_t seq, size_t len) {
  size_t at = 99;
  CU_ASSERT_EQUAL_FATAL(scn_backlog_find(b, seq, &at), SCN_BACKLOG_OK);
  char want[256];
  for (uint64_t s = seq; at < b->n; s++, at++) {
    const scn_backlog_rec *r = scn_backlog_at(b, at);
    CU_ASSERT_EQUAL(r->seq, s);
    CU_ASSERT_EQUAL(r->tick, s * 10);
    CU_ASSERT_EQUAL(r->len, len);
    record_of(s, len, want);
    CU_ASSERT(r->len == len && memcmp(r->bytes, want, len) == 0);
  }
}

static void test_append_and_find(void) {
  scn_backlog b;
  scn_backlog_init(&b, 1000);
  size_t at = 99;
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 1, &at), SCN_BACKLOG_OK); /* nothing yet, nothing lacked */
  CU_ASSERT_EQUAL(at, 0);
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 2, &at), SCN_BACKLOG_AHEAD);
  for (uint64_t s = 1; s <= 5; s++)
    append(&b, s, 100);
  CU_ASSERT_EQUAL(b.n, 5);
  CU_ASSERT_EQUAL(b.bytes, 500);
  check_from(&b, 1, 100);
  check_from(&b, 4, 100);
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 6, &at), SCN_BACKLOG_OK); /* up to date */
  CU_ASSERT_EQUAL(at, 5);
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 7, &at), SCN_BACKLOG_AHEAD);
  scn_backlog_free(&b);
}

static void test_wrap_and_too_old(void) {
  scn_backlog b;
  scn_backlog_init(&b, 1000); /* ten records of 100 bytes */
  for (uint64_t s = 1; s <= 1000; s++) {
    append(&b, s, 100);
    CU_ASSERT(b.bytes <= 1000);
    uint64_t oldest = s > 10 ? s - 9 : 1;
    CU_ASSERT_EQUAL(b.n, s - oldest + 1);
    if (s % 97 == 0) {
      check_from(&b, oldest, 100);
      size_t at;
      CU_ASSERT_EQUAL(scn_backlog_find(&b, oldest - 1, &at),
                      oldest > 1 ? SCN_BACKLOG_TOO_OLD : SCN_BACKLOG_OK);
    }
  }
  CU_ASSERT_EQUAL(b.appended, 1000);
  CU_ASSERT_EQUAL(b.evicted, 990);
  size_t at;
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 1, &at), SCN_BACKLOG_TOO_OLD);
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 990, &at), SCN_BACKLOG_TOO_OLD);
  check_from(&b, 991, 100);
  /* Larger records push out several older ones. */
  append(&b, 1001, 250);
  CU_ASSERT_EQUAL(b.n, 8); /* 992..1000 would be 900 + 250: three go */
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 993, &at), SCN_BACKLOG_TOO_OLD);
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 994, &at), SCN_BACKLOG_OK);
  CU_ASSERT_EQUAL(scn_backlog_at(&b, at)->seq, 994);
  CU_ASSERT_EQUAL(scn_backlog_at(&b, b.n - 1)->seq, 1001);
  scn_backlog_free(&b);
}

static void test_gap_and_too_big(void) {
  scn_backlog b;
  scn_backlog_init(&b, 300);
  for (uint64_t s = 1; s <= 3; s++)
    append(&b, s, 100);
  append(&b, 5, 100); /* 4 never came: nothing before 5 may be served */
  CU_ASSERT_EQUAL(b.n, 1);
  size_t at;
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 4, &at), SCN_BACKLOG_TOO_OLD);
  check_from(&b, 5, 100);
  append(&b, 6, 200);
  CU_ASSERT_EQUAL(b.n, 2);
  char big[301];
  memset(big, 'x', sizeof big);
  CU_ASSERT(scn_backlog_append(&b, 7, 70, big, sizeof big));
  CU_ASSERT_EQUAL(b.n, 0);
  CU_ASSERT_EQUAL(b.bytes, 0);
  CU_ASSERT_EQUAL(b.too_big, 1);
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 7, &at), SCN_BACKLOG_TOO_OLD);
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 8, &at), SCN_BACKLOG_OK);
  append(&b, 8, 100);
  check_from(&b, 8, 100);
  scn_backlog_clear(&b); /* a new epoch: seqs start over */
  CU_ASSERT_EQUAL(scn_backlog_find(&b, 1, &at), SCN_BACKLOG_OK);
  append(&b, 1, 100);
  check_from(&b, 1, 100);
  scn_backlog_free(&b);
}

/* Records of random sizes (none empty, some of no bytes) through a buffer that grows and wraps
 * many times: the records kept are always the newest whose bytes fit the bound (the oldest
 * go first), each with its own bytes. */
static void test_buffer_ring(void) {
  unsigned seed = (unsigned)time(NULL);
  printf("\n  replica_backlog buffer ring: seed %u\n", seed);
  srand(seed);
  enum { LIMIT = 100000, N = 30000 }; /* past the buffer's first size (64 KiB) */
  static size_t lens[N + 1];
  scn_backlog b;
  scn_backlog_init(&b, LIMIT);
  char bytes[256], want[256];
  for (uint64_t s = 1; s <= N; s++) {
    size_t len = (size_t)rand() % 10 == 0 ? 0 : 1 + (size_t)rand() % 255;
    lens[s] = len;
    CU_ASSERT_FATAL(scn_backlog_append(&b, s, s * 10, bytes, record_of(s, len, bytes)));
    size_t kept = 0, n = 0;
    for (uint64_t k = s; k >= 1 && kept + lens[k] <= LIMIT; k--, n++)
      kept += lens[k];
    CU_ASSERT_EQUAL_FATAL(b.bytes, kept);
    if (s % 101 != 0)
      continue;
    /* Records of no bytes take a place each: at most those few more go. */
    CU_ASSERT_FATAL(b.n <= n && b.n + 16 >= n);
    CU_ASSERT_FATAL(b.buf_cap <= LIMIT + LIMIT / 4);
    CU_ASSERT_FATAL(b.bytes <= LIMIT);
    for (size_t i = 0; i < b.n; i++) {
      const scn_backlog_rec *r = scn_backlog_at(&b, i);
      CU_ASSERT_EQUAL_FATAL(r->seq, s - b.n + 1 + i);
      CU_ASSERT_EQUAL_FATAL(r->len, lens[r->seq]);
      record_of(r->seq, r->len, want);
      CU_ASSERT_FATAL(memcmp(r->bytes, want, r->len) == 0);
    }
  }
  scn_backlog_free(&b);
}

/* Records of a third of the limit: the buffer (a quarter larger than the limit) may hold fewer
 * than the limit allows, never more, and always the newest, whole and in order. */
static void test_large_records(void) {
  enum { LIMIT = 300000, LEN = LIMIT / 3 };
  static char bytes[LEN], want[LEN];
  scn_backlog b;
  scn_backlog_init(&b, LIMIT);
  for (uint64_t s = 1; s <= 200; s++) {
    size_t len = LEN - (size_t)(s % 7) * 1000;
    memset(bytes, (int)('a' + s % 26), len);
    CU_ASSERT_FATAL(scn_backlog_append(&b, s, s, bytes, len));
    CU_ASSERT_FATAL(b.n >= 1 && b.n <= 3 && b.bytes <= LIMIT);
    CU_ASSERT_FATAL(b.buf_cap <= LIMIT + LIMIT / 4);
    for (size_t i = 0; i < b.n; i++) {
      const scn_backlog_rec *r = scn_backlog_at(&b, i);
      CU_ASSERT_EQUAL_FATAL(r->seq, s - b.n + 1 + i);
      CU_ASSERT_EQUAL_FATAL(r->len, LEN - (size_t)(r->seq % 7) * 1000);
      memset(want, (int)('a' + r->seq % 26), r->len);
      CU_ASSERT_FATAL(memcmp(r->bytes, want, r->len) == 0);
    }
  }
  scn_backlog_free(&b);
}

int t_register_replica_backlog(void) {
  static const t_test tests[] = {
      {"records kept in order and found from a seq", test_append_and_find},
      {"the ring wraps within its bound; older seqs answer too old", test_wrap_and_too_old},
      {"a gap or a record over the bound leaves nothing to serve before it", test_gap_and_too_big},
      {"the records' buffer grows and wraps, keeping each record's bytes", test_buffer_ring},
      {"records of a third of the bound: the newest kept, whole", test_large_records},
  };
  return T_ADD_SUITE("replica_backlog", NULL, NULL, tests);
}

/* Integration tests of streaming over TCP against the real daemon: the exact frames of the
 * contract's Streaming section, a full frame first and then deltas of changed world matrices;
 * sets between ticks coalesce, no-ops and changes undone inside a tick send nothing, and a
 * batch is one frame. Subscriptions' scope and lifetime, and the flow of frames, have suites
 * of their own (daemon_stream_subscriptions, daemon_stream_flow). */
#include "daemon_fixtures.h"
#include "stream_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- tests ----------------------------------------------------------------------------------- */

/* The first frame is full (every transform, removed empty); then deltas of what changed,
 * including every descendant of a moved parent; nothing when nothing changes. */
static void test_full_then_delta(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "fd";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"fd\"}");
  int64_t a = mk(&ctl, W, 0, 1, 2, 3);
  int64_t b = mk(&ctl, W, a, 0, 1, 0);
  int64_t c = mk(&ctl, W, 0, 7, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON *f = expect_frame(&sc, &s, 1);
  check_set(f, (want[]){{a, 1, 2, 3}, {b, 1, 3, 3}, {c, 7, 0, 0}}, 3);
  check_no_removed(f);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);

  set_t(&ctl, W, a, 5, 0, 0);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 5, 0, 0}, {b, 5, 1, 0}}, 2);
  check_no_removed(f);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"transform.set_world\",\"world\":\"fd\",\"entity\":%lld,\"t\":[0,0,9]}",
      (long long)b);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{b, 0, 0, 9}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);

  int64_t d = mk(&ctl, W, c, 1, 0, 0);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{d, 8, 0, 0}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);

  /* A grandparent's move reaches the grandchild. */
  int64_t g = mk(&ctl, W, d, 0, 0, 1);
  cJSON_Delete(expect_frame(&sc, &s, 0));
  set_t(&ctl, W, c, 0, 0, 0);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{c, 0, 0, 0}, {d, 1, 0, 0}, {g, 1, 0, 1}}, 3);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  CU_ASSERT_EQUAL(s.frames, 6);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"fd\"}");
  cJSON_Delete(t_next_event(&sc, FRAME_WAIT_MS)); /* world_destroyed */

  /* An empty world: the full frame is still sent, with nothing in it. */
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"fd-empty\"}");
  sub_state e;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &e, "fd-empty", 0, 0));
  f = expect_frame(&sc, &e, 1);
  check_set(f, NULL, 0);
  check_no_removed(f);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  int64_t first = mk(&ctl, "fd-empty", 0, 0, 0, 2);
  f = expect_frame(&sc, &e, 0);
  check_set(f, (want[]){{first, 0, 0, 2}}, 1);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"fd-empty\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* Many sets between two ticks reach the subscriber once each, with the latest value. */
static void test_coalescing(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "co";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"co\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  int64_t b = mk(&ctl, W, a, 1, 0, 0);
  int64_t c = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));

  char lines[8192];
  int n = 0;
  for (int x = 1; x <= 3; x++)
    n += snprintf(
        lines + n, sizeof lines - (size_t)n,
        "{\"cmd\":\"transform.set_local\",\"world\":\"co\",\"entity\":%lld,\"t\":[%d,0,0]}\n",
        (long long)a, x);
  n +=
      snprintf(lines + n, sizeof lines - (size_t)n,
               "{\"cmd\":\"transform.set_local\",\"world\":\"co\",\"entity\":%lld,\"t\":[7,0,0]}\n"
               "{\"cmd\":\"transform.set_local\",\"world\":\"co\",\"entity\":%lld,\"t\":[0,2,0]}\n",
               (long long)c, (long long)b);
  PIPELINE_OK(&ctl, lines, 5);
  cJSON *f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 3, 0, 0}, {b, 3, 2, 0}, {c, 7, 0, 0}}, 3);
  check_no_removed(f);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);

  /* Many more sets in one write: still one entry each. */
  n = 0;
  for (int x = 1; x <= 40; x++)
    n += snprintf(
        lines + n, sizeof lines - (size_t)n,
        "{\"cmd\":\"transform.set_local\",\"world\":\"co\",\"entity\":%lld,\"t\":[0,%d,0]}\n",
        (long long)(x % 2 ? c : a), x);
  PIPELINE_OK(&ctl, lines, 40);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 0, 40, 0}, {b, 0, 42, 0}, {c, 0, 39, 0}}, 3);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"co\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* Commands that leave every world matrix as it was send nothing. */
static void test_noop_sends_nothing(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "noop";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"noop\"}");
  int64_t a = mk(&ctl, W, 0, 1, 2, 3);
  int64_t b = mk(&ctl, W, a, 0, 1, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));
  set_t(&ctl, W, a, 1, 2, 3);
  OKD(&ctl,
      "{\"cmd\":\"transform.set_local\",\"world\":\"noop\",\"entity\":%lld,"
      "\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,1,0,1]}",
      (long long)b);
  OKD(&ctl, "{\"cmd\":\"transform.set_world\",\"world\":\"noop\",\"entity\":%lld,\"t\":[1,3,3]}",
      (long long)b);
  OKD(&ctl, "{\"cmd\":\"transform.link\",\"world\":\"noop\",\"entity\":%lld,\"parent\":%lld}",
      (long long)b, (long long)a);
  OKD(&ctl, "{\"cmd\":\"transform.unlink\",\"world\":\"noop\",\"entity\":%lld}", (long long)a);
  OKD(&ctl, "{\"cmd\":\"transform.rename\",\"world\":\"noop\",\"entity\":%lld,\"name\":\"x\"}",
      (long long)a);
  OKD(&ctl, "{\"cmd\":\"transform.get\",\"world\":\"noop\",\"entity\":%lld}", (long long)b);
  /* A failed command changes nothing, so sends nothing. */
  ERR(&ctl, "NOT_FOUND",
      "{\"cmd\":\"transform.set_local\",\"world\":\"noop\",\"entity\":987654321,\"t\":[1,1,1]}");
  ERR(&ctl, "BAD_REQUEST",
      "{\"cmd\":\"transform.set_local\",\"world\":\"noop\",\"entity\":%lld,\"t\":[1,1]}",
      (long long)a);
  QUIET(&sc, QUIET_MS);
  /* Still alive. */
  set_t(&ctl, W, b, 0, 1, 1);
  cJSON *f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{b, 1, 3, 4}}, 1);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"noop\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* A matrix changed and changed back inside one tick, with a read between (which propagates),
 * did not change: nothing is sent. Nor for a failed batch whose read saw its change. */
static void test_revert_sends_nothing(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "revert";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"revert\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  int64_t b = mk(&ctl, W, a, 0, 1, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));
  char lines[1024];
  /* one write: the three run in one loop turn, so inside one tick */
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"revert\",\"entity\":%lld,\"t\":[1,0,0]}\n"
           "{\"cmd\":\"transform.get\",\"world\":\"revert\",\"entity\":%lld}\n"
           "{\"cmd\":\"transform.set_local\",\"world\":\"revert\",\"entity\":%lld,\"t\":[0,0,0]}\n",
           (long long)a, (long long)b, (long long)a);
  PIPELINE_OK(&ctl, lines, 3);
  QUIET(&sc, QUIET_MS);
  ERR(&ctl, "NOT_FOUND",
      "{\"cmd\":\"batch\",\"world\":\"revert\",\"ops\":["
      "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[5,0,0]},"
      "{\"cmd\":\"transform.get\",\"entity\":%lld},"
      "{\"cmd\":\"transform.get\",\"entity\":987654321}]}",
      (long long)a, (long long)b);
  QUIET(&sc, QUIET_MS);
  /* a real change still arrives, once, with its latest value */
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"revert\",\"entity\":%lld,\"t\":[2,0,0]}\n"
           "{\"cmd\":\"transform.get\",\"world\":\"revert\",\"entity\":%lld}\n"
           "{\"cmd\":\"transform.set_local\",\"world\":\"revert\",\"entity\":%lld,\"t\":[3,0,0]}\n",
           (long long)a, (long long)b, (long long)a);
  PIPELINE_OK(&ctl, lines, 3);
  cJSON *f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 3, 0, 0}, {b, 3, 1, 0}}, 2);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"revert\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* A batch's effects arrive in one frame; a failed batch sends nothing. */
static void test_batch_one_frame(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "ba";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"ba\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  int64_t b = mk(&ctl, W, 0, 0, 0, 0);
  int64_t c = mk(&ctl, W, 0, 0, 0, 0);
  int64_t gone = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));

  cJSON *r =
      CALL(&ctl,
           "{\"cmd\":\"batch\",\"world\":\"ba\",\"ops\":["
           "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[1,0,0]},"
           "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[2,0,0]},"
           "{\"cmd\":\"transform.create\",\"parent\":%lld,\"t\":[0,5,0]},"
           "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[3,0,0]},"
           "{\"cmd\":\"transform.destroy\",\"entity\":%lld},"
           "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[4,0,0]}]}",
           (long long)a, (long long)b, (long long)c, (long long)c, (long long)gone, (long long)a);
  CU_ASSERT_TRUE(t_resp_ok(r));
  const cJSON *results = cJSON_GetObjectItemCaseSensitive(r, "results");
  int64_t created = (int64_t)t_resp_num(cJSON_GetArrayItem(results, 2), "entity");
  CU_ASSERT_TRUE(created > 0);
  cJSON_Delete(r);
  cJSON *f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 4, 0, 0}, {b, 2, 0, 0}, {c, 3, 0, 0}, {created, 3, 5, 0}}, 4);
  check_removed(f, (int64_t[]){gone}, 1);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);

  /* Atomic: the failing op undoes the first, nothing is streamed. */
  ERR(&ctl, "NOT_FOUND",
      "{\"cmd\":\"batch\",\"world\":\"ba\",\"ops\":["
      "{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[9,9,9]},"
      "{\"cmd\":\"transform.create\",\"parent\":%lld},"
      "{\"cmd\":\"transform.set_local\",\"entity\":987654321,\"t\":[1,0,0]}]}",
      (long long)a, (long long)a);
  QUIET(&sc, QUIET_MS);

  /* A big batch: one frame, latest values. */
  size_t cap = 64 * 1024, len = 0;
  char *line = malloc(cap);
  CU_ASSERT_PTR_NOT_NULL_FATAL(line);
  len += (size_t)snprintf(line, cap, "{\"cmd\":\"batch\",\"world\":\"ba\",\"ops\":[");
  for (int i = 1; i <= 300; i++)
    len += (size_t)snprintf(line + len, cap - len,
                            "%s{\"cmd\":\"transform.set_local\",\"entity\":%lld,\"t\":[%d,0,0]}",
                            i > 1 ? "," : "",
                            (long long)(i % 3 == 0   ? a
                                        : i % 3 == 1 ? b
                                                     : c),
                            i);
  snprintf(line + len, cap - len, "]}");
  OKD(&ctl, "%s", line);
  free(line);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{a, 300, 0, 0}, {b, 298, 0, 0}, {c, 299, 0, 0}, {created, 299, 5, 0}}, 4);
  check_no_removed(f);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"ba\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_daemon_stream(void) {
  static const t_test tests[] = {
      {"full frame first, then deltas", test_full_then_delta},
      {"sets between ticks coalesce", test_coalescing},
      {"no-op commands send nothing", test_noop_sends_nothing},
      {"a change undone inside a tick sends nothing", test_revert_sends_nothing},
      {"a batch is one frame", test_batch_one_frame},
  };
  return T_ADD_SUITE("daemon_stream", stream_suite_init, stream_suite_clean, tests);
}

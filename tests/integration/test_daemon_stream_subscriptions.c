/* Integration tests of subscriptions against the real daemon: removals in whole-world scope,
 * subtree scope and its root destroyed every way, two subscribers getting identical frames,
 * unsubscribe and subscribe's errors, and the ends of a subscription (world.destroy, the
 * connection closed). */
#include "daemon_fixtures.h"
#include "stream_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>

static double info_subscriptions(t_client *k) {
  cJSON *r = CALL(k, "{\"cmd\":\"info\"}");
  double n = t_resp_num(r, "subscriptions");
  CU_ASSERT_TRUE(n >= 0);
  cJSON_Delete(r);
  return n;
}

/* Whole-world scope: destroyed transforms (and destroyed entities) are in removed. */
static void test_removed_whole_world(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "rm";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rm\"}");
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rm2\"}");
  int64_t p = mk(&ctl, W, 0, 1, 2, 3);
  int64_t q = mk(&ctl, W, p, 1, 0, 0);
  int64_t r = mk(&ctl, W, 0, 0, 0, 0);
  int64_t r1 = mk(&ctl, W, r, 0, 1, 0);
  int64_t r2 = mk(&ctl, W, r1, 0, 1, 0);
  int64_t e = mk(&ctl, W, 0, 4, 0, 0);
  OKD(&ctl, "{\"cmd\":\"transform.create\",\"world\":\"rm2\",\"entity\":%lld}", (long long)e);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON *f = expect_frame(&sc, &s, 1);
  check_set(
      f,
      (want[]){
          {p, 1, 2, 3}, {q, 2, 2, 3}, {r, 0, 0, 0}, {r1, 0, 1, 0}, {r2, 0, 2, 0}, {e, 4, 0, 0}},
      6);
  cJSON_Delete(f);

  /* Non-recursive: the child becomes a root and keeps its world matrix (so is not in set). */
  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"rm\",\"entity\":%lld}", (long long)p);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){p}, 1);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"rm\",\"entity\":%lld,\"recursive\":true}",
      (long long)r);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r, r1, r2}, 3);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (long long)e);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){e}, 1);
  cJSON_Delete(f);

  /* Changes in another world are not this subscription's. */
  int64_t other = mk(&ctl, "rm2", 0, 1, 1, 1);
  CU_ASSERT_TRUE(other > 0);
  QUIET(&sc, QUIET_MS);

  /* A removal and a move in one tick share a frame. */
  char lines[512];
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"rm\",\"entity\":%lld,\"t\":[0,0,1]}\n"
           "{\"cmd\":\"entity.destroy\",\"entity\":%lld}\n",
           (long long)q, (long long)other);
  PIPELINE_OK(&ctl, lines, 2);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{q, 0, 0, 1}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);
  int64_t last = mk(&ctl, W, 0, 0, 0, 0);
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"rm\",\"entity\":%lld,\"t\":[5,0,0]}\n"
           "{\"cmd\":\"transform.destroy\",\"world\":\"rm\",\"entity\":%lld}\n",
           (long long)q, (long long)last);
  cJSON_Delete(expect_frame(&sc, &s, 0)); /* last's creation */
  PIPELINE_OK(&ctl, lines, 2);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{q, 5, 0, 0}}, 1);
  check_removed(f, (int64_t[]){last}, 1);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rm\"}");
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rm2\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* Subtree scope: only the subtree; entering (either keep) appears in set even unchanged;
 * leaving or destruction appears in removed; the root's destruction ends the subscription. */
static void test_subtree_scope(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "st";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"st\"}");
  int64_t r = mk(&ctl, W, 0, 10, 0, 0);
  int64_t c1 = mk(&ctl, W, r, 1, 0, 0);
  int64_t g1 = mk(&ctl, W, c1, 0, 1, 0);
  int64_t o = mk(&ctl, W, 0, 0, 0, 5);
  int64_t o1 = mk(&ctl, W, o, 1, 0, 0);
  int64_t x = mk(&ctl, W, 0, 2, 2, 2);
  int64_t y = mk(&ctl, W, 0, 3, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, r, 0));
  cJSON *f = expect_frame(&sc, &s, 1);
  check_set(f, (want[]){{r, 10, 0, 0}, {c1, 11, 0, 0}, {g1, 11, 1, 0}}, 3);
  check_no_removed(f);
  cJSON_Delete(f);

  /* Outside the scope: nothing. */
  set_t(&ctl, W, o, 0, 0, 6);
  set_t(&ctl, W, y, 3, 0, 1);
  QUIET(&sc, QUIET_MS);

  /* Linked in keeping its world matrix: in set although unchanged. */
  OKD(&ctl,
      "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld,\"keep\":"
      "\"world\"}",
      (long long)x, (long long)r);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{x, 2, 2, 2}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);

  /* Linked in keeping its local matrix (o1 at (1,0,6) becomes (12,0,0)). */
  OKD(&ctl, "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld}",
      (long long)o1, (long long)c1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{o1, 12, 0, 0}}, 1);
  check_no_removed(f);
  cJSON_Delete(f);

  /* Unlinked out of the scope (keeping its world matrix): removed. */
  OKD(&ctl, "{\"cmd\":\"transform.unlink\",\"world\":\"st\",\"entity\":%lld,\"keep\":\"world\"}",
      (long long)g1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){g1}, 1);
  cJSON_Delete(f);

  /* Linked out to another tree with a subtree of its own. */
  OKD(&ctl, "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld}",
      (long long)y, (long long)x);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{y, 5, 2, 3}}, 1);
  cJSON_Delete(f);
  OKD(&ctl,
      "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld,\"keep\":"
      "\"world\"}",
      (long long)x, (long long)o);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){x, y}, 2);
  cJSON_Delete(f);
  OKD(&ctl, "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld}",
      (long long)x, (long long)c1);
  f = expect_frame(&sc, &s, 0);
  /* x kept local (2,2,-4) under o at (0,0,6); now under c1 at (11,0,0); y under x. */
  check_set(f, (want[]){{x, 13, 2, -4}, {y, 16, 2, -3}}, 2);
  check_no_removed(f);
  cJSON_Delete(f);

  /* Destroying c1 without recursion: c1 goes, its children become roots and leave. */
  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"st\",\"entity\":%lld}", (long long)c1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){c1, o1, x, y}, 4);
  cJSON_Delete(f);

  /* Back in, moved with the root in the same tick. */
  char lines[512];
  snprintf(lines, sizeof lines,
           "{\"cmd\":\"transform.set_local\",\"world\":\"st\",\"entity\":%lld,\"t\":[20,0,0]}\n"
           "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld}\n"
           "{\"cmd\":\"transform.link\",\"world\":\"st\",\"entity\":%lld,\"parent\":%lld,\"keep\":"
           "\"world\"}\n",
           (long long)r, (long long)g1, (long long)r, (long long)o1, (long long)r);
  PIPELINE_OK(&ctl, lines, 3);
  f = expect_frame(&sc, &s, 0);
  /* g1's local after unlink keep world is (11,1,0); o1 is at (12,0,0) in the world. */
  check_set(f, (want[]){{r, 20, 0, 0}, {g1, 31, 1, 0}, {o1, 12, 0, 0}}, 3);
  check_no_removed(f);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (long long)o1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){o1}, 1);
  cJSON_Delete(f);
  QUIET(&sc, QUIET_MS);

  /* The root is destroyed: the whole scope removed, then unsubscribed. */
  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"st\",\"entity\":%lld}", (long long)r);
  f = expect_frame(&sc, &s, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r, g1}, 2);
  cJSON_Delete(f);
  cJSON *ev = t_next_event(&sc, FRAME_WAIT_MS);
  char want_ev[128];
  snprintf(want_ev, sizeof want_ev,
           "{\"event\":\"unsubscribed\",\"sub\":%lld,\"reason\":\"root_destroyed\"}",
           (long long)s.id);
  cJSON *expect_ev = cJSON_Parse(want_ev);
  CU_ASSERT_TRUE(cJSON_Compare(ev, expect_ev, true));
  if (!cJSON_Compare(ev, expect_ev, true))
    t_report("expected unsubscribed", ev);
  cJSON_Delete(expect_ev);
  cJSON_Delete(ev);
  set_t(&ctl, W, g1, 1, 1, 1);
  QUIET(&sc, QUIET_MS);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s.id);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"st\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* A root destroyed by entity.destroy or a recursive destroy also ends the subscription. */
static void test_root_destroyed_other_ways(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "rd";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"rd\"}");
  int64_t top = mk(&ctl, W, 0, 0, 0, 0);
  int64_t r = mk(&ctl, W, top, 1, 0, 0);
  int64_t k1 = mk(&ctl, W, r, 1, 0, 0);
  int64_t k2 = mk(&ctl, W, k1, 1, 0, 0);
  int64_t r2 = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s1, s2;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s1, W, r, 0));
  cJSON *f = expect_frame(&sc, &s1, 1);
  check_set(f, (want[]){{r, 1, 0, 0}, {k1, 2, 0, 0}, {k2, 3, 0, 0}}, 3);
  cJSON_Delete(f);
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s2, W, r2, 0));
  f = expect_frame(&sc, &s2, 1);
  check_set(f, (want[]){{r2, 0, 0, 0}}, 1);
  cJSON_Delete(f);

  OKD(&ctl, "{\"cmd\":\"transform.destroy\",\"world\":\"rd\",\"entity\":%lld,\"recursive\":true}",
      (long long)top);
  f = expect_frame(&sc, &s1, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r, k1, k2}, 3);
  cJSON_Delete(f);
  cJSON *ev = t_next_event(&sc, FRAME_WAIT_MS);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "event"), "unsubscribed");
  CU_ASSERT_EQUAL(t_resp_num(ev, "sub"), (double)s1.id);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "reason"), "root_destroyed");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(ev), 3);
  cJSON_Delete(ev);

  OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (long long)r2);
  f = expect_frame(&sc, &s2, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r2}, 1);
  cJSON_Delete(f);
  ev = t_next_event(&sc, FRAME_WAIT_MS);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "event"), "unsubscribed");
  CU_ASSERT_EQUAL(t_resp_num(ev, "sub"), (double)s2.id);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "reason"), "root_destroyed");
  cJSON_Delete(ev);
  QUIET(&sc, QUIET_MS);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s1.id);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s2.id);

  /* Destroyed and given a new transform in the same tick: still destroyed. */
  int64_t r3 = mk(&ctl, W, 0, 0, 0, 0);
  int64_t k3 = mk(&ctl, W, r3, 0, 1, 0);
  sub_state s3;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s3, W, r3, 0));
  f = expect_frame(&sc, &s3, 1);
  check_set(f, (want[]){{r3, 0, 0, 0}, {k3, 0, 1, 0}}, 2);
  cJSON_Delete(f);
  OKD(&ctl,
      "{\"cmd\":\"batch\",\"world\":\"rd\",\"ops\":[{\"cmd\":\"transform.destroy\",\"entity\":%lld}"
      ","
      "{\"cmd\":\"transform.create\",\"entity\":%lld,\"t\":[5,0,0]}]}",
      (long long)r3, (long long)r3);
  f = expect_frame(&sc, &s3, 0);
  check_set(f, NULL, 0);
  check_removed(f, (int64_t[]){r3, k3}, 2);
  cJSON_Delete(f);
  ev = t_next_event(&sc, FRAME_WAIT_MS);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "event"), "unsubscribed");
  CU_ASSERT_EQUAL(t_resp_num(ev, "sub"), (double)s3.id);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ev, "reason"), "root_destroyed");
  cJSON_Delete(ev);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s3.id);
  /* A batch that fails destroys nothing: the subscription goes on. */
  int64_t r4 = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s4;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s4, W, r4, 0));
  cJSON_Delete(expect_frame(&sc, &s4, 1));
  ERR(&ctl, "NOT_FOUND",
      "{\"cmd\":\"batch\",\"world\":\"rd\",\"ops\":[{\"cmd\":\"transform.destroy\",\"entity\":%"
      "lld},"
      "{\"cmd\":\"transform.set_local\",\"entity\":987654321,\"t\":[1,0,0]}]}",
      (long long)r4);
  QUIET(&sc, QUIET_MS);
  set_t(&ctl, W, r4, 0, 0, 2);
  f = expect_frame(&sc, &s4, 0);
  check_set(f, (want[]){{r4, 0, 0, 2}}, 1);
  cJSON_Delete(f);
  OKD(&sc, "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s4.id);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"rd\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* Two subscribers of one scope on two connections get the same frames but for "sub". */
static void test_two_subscribers(void) {
  t_client ctl, k1, k2;
  OPEN(ctl, stream_daemon.port);
  OPEN(k1, stream_daemon.port);
  OPEN(k2, stream_daemon.port);
  const char *W = "two";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"two\"}");
  int64_t a = mk(&ctl, W, 0, 1, 0, 0);
  int64_t b = mk(&ctl, W, a, 0, 1, 0);
  int64_t c = mk(&ctl, W, 0, 0, 0, 1);
  sub_state s1[2], s2[2];
  cJSON *f1[2], *f2[2];
  /* A whole-world and a subtree subscription on each connection. */
  CU_ASSERT_TRUE_FATAL(subscribe(&k1, &s1[0], W, 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k1, &s1[1], W, a, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k2, &s2[0], W, 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k2, &s2[1], W, a, 0));
  frames_by_sub(&k1, s1, f1, 2);
  frames_by_sub(&k2, s2, f2, 2);
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_TRUE(f1[i] && cJSON_IsTrue(cJSON_GetObjectItem(f1[i], "full")));
    CU_ASSERT_TRUE(f2[i] && cJSON_IsTrue(cJSON_GetObjectItem(f2[i], "full")));
    /* Full frames of the same tick are identical; of different ticks, the same content. */
    if (f1[i] && f2[i] && t_resp_num(f1[i], "tick") == t_resp_num(f2[i], "tick"))
      CU_ASSERT_TRUE(same_but_sub(f1[i], f2[i]));
  }
  check_set(f1[0], (want[]){{a, 1, 0, 0}, {b, 1, 1, 0}, {c, 0, 0, 1}}, 3);
  check_set(f2[0], (want[]){{a, 1, 0, 0}, {b, 1, 1, 0}, {c, 0, 0, 1}}, 3);
  check_set(f1[1], (want[]){{a, 1, 0, 0}, {b, 1, 1, 0}}, 2);
  check_set(f2[1], (want[]){{a, 1, 0, 0}, {b, 1, 1, 0}}, 2);
  for (int i = 0; i < 2; i++) {
    cJSON_Delete(f1[i]);
    cJSON_Delete(f2[i]);
  }

  /* Each step changes both scopes. */
  const char *steps[] = {
      "{\"cmd\":\"transform.set_local\",\"world\":\"two\",\"entity\":%lld,\"t\":[2,0,0]}",
      "{\"cmd\":\"transform.create\",\"world\":\"two\",\"parent\":%lld,\"t\":[0,0,3]}",
      "{\"cmd\":\"transform.link\",\"world\":\"two\",\"entity\":%lld,\"parent\":%lld}",
      "{\"cmd\":\"transform.destroy\",\"world\":\"two\",\"entity\":%lld}",
  };
  for (int step = 0; step < 4; step++) {
    switch (step) {
    case 0:
      OKD(&ctl, steps[0], (long long)a);
      break;
    case 1:
      OKD(&ctl, steps[1], (long long)b);
      break;
    case 2:
      OKD(&ctl, steps[2], (long long)c, (long long)b);
      break;
    case 3:
      OKD(&ctl, steps[3], (long long)b);
      break;
    }
    frames_by_sub(&k1, s1, f1, 2);
    frames_by_sub(&k2, s2, f2, 2);
    for (int i = 0; i < 2; i++) {
      CU_ASSERT_TRUE(same_but_sub(f1[i], f2[i]));
      CU_ASSERT_TRUE(f1[i] && cJSON_IsFalse(cJSON_GetObjectItem(f1[i], "full")));
      cJSON_Delete(f1[i]);
      cJSON_Delete(f2[i]);
    }
  }
  QUIET(&k1, QUIET_MS);
  QUIET(&k2, 0);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"two\"}");
  t_client_close(&k1);
  t_client_close(&k2);
  t_client_close(&ctl);
}

/* unsubscribe stops frames; a second one is NOT_FOUND, as is another connection's sub. */
static void test_unsubscribe(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "un";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"un\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s, keep;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &keep, W, a, 0));
  cJSON *f[2];
  sub_state both[2] = {s, keep};
  frames_by_sub(&sc, both, f, 2);
  cJSON_Delete(f[0]);
  cJSON_Delete(f[1]);
  keep = both[1];
  double before = info_subscriptions(&ctl);

  cJSON *r = CALL(&sc, "{\"id\":\"u1\",\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s.id);
  CU_ASSERT_TRUE(t_resp_ok(r));
  CU_ASSERT_EQUAL(cJSON_GetArraySize(r), 2); /* id and ok */
  CU_ASSERT_STRING_EQUAL(t_resp_str(r, "id"), "u1");
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(info_subscriptions(&ctl), before - 1);
  set_t(&ctl, W, a, 1, 0, 0);
  /* Only the remaining subscription reports it. */
  cJSON *g = expect_frame(&sc, &keep, 0);
  check_set(g, (want[]){{a, 1, 0, 0}}, 1);
  cJSON_Delete(g);
  QUIET(&sc, QUIET_MS);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s.id);
  ERR(&sc, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":987654321}");
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"unsubscribe\",\"sub\":\"x\"}");
  ERR(&sc, "BAD_REQUEST", "{\"cmd\":\"unsubscribe\"}");
  OKD(&sc, "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)keep.id);
  set_t(&ctl, W, a, 2, 0, 0);
  QUIET(&sc, QUIET_MS);
  CU_ASSERT_EQUAL(info_subscriptions(&ctl), before - 2);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"un\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* subscribe to an unknown world, or a root without a transform there, is NOT_FOUND. */
static void test_subscribe_errors(void) {
  t_client ctl;
  OPEN(ctl, stream_daemon.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"se\"}");
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"se2\"}");
  int64_t elsewhere = mk(&ctl, "se2", 0, 0, 0, 0);
  int64_t here = mk(&ctl, "se", 0, 0, 0, 0);
  int64_t dead = mk(&ctl, "se", 0, 0, 0, 0);
  OKD(&ctl, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", (long long)dead);
  cJSON *r = CALL(&ctl, "{\"cmd\":\"entity.create\"}");
  const cJSON *ents = cJSON_GetObjectItem(r, "entities");
  int64_t bare = cJSON_IsNumber(cJSON_GetArrayItem(ents, 0))
                     ? (int64_t)cJSON_GetArrayItem(ents, 0)->valuedouble
                     : 0;
  CU_ASSERT_TRUE(bare > 0);
  cJSON_Delete(r);
  double before = info_subscriptions(&ctl);

  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"no-such-world\"}");
  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":%lld}",
      (long long)elsewhere);
  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":%lld}", (long long)dead);
  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":%lld}", (long long)bare);
  ERR(&ctl, "NOT_FOUND", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":987654321}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\"}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"hz\":0}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"hz\":-5}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"hz\":\"fast\"}");
  ERR(&ctl, "BAD_REQUEST", "{\"cmd\":\"subscribe\",\"world\":\"se\",\"root\":\"x\"}");
  CU_ASSERT_EQUAL(info_subscriptions(&ctl), before);
  /* Nothing was subscribed: no frames come. */
  set_t(&ctl, "se", here, 1, 1, 1);
  QUIET(&ctl, QUIET_MS);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"se\"}");
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"se2\"}");
  t_client_close(&ctl);
}

/* world.destroy: world_destroyed to each subscription (the destroying connection's too, as
 * whole lines around its response), and they end. */
static void test_world_destroyed(void) {
  t_client k1, k2;
  OPEN(k1, stream_daemon.port);
  OPEN(k2, stream_daemon.port);
  const char *W = "wd";
  OKD(&k1, "{\"cmd\":\"world.create\",\"world\":\"wd\"}");
  int64_t a = mk(&k1, W, 0, 0, 0, 0);
  sub_state s[2], t;
  CU_ASSERT_TRUE_FATAL(subscribe(&k1, &s[0], W, 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k1, &s[1], W, a, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&k2, &t, W, 0, 0));
  cJSON *f[2];
  frames_by_sub(&k1, s, f, 2);
  cJSON_Delete(f[0]);
  cJSON_Delete(f[1]);
  cJSON_Delete(expect_frame(&k2, &t, 1));
  double before = info_subscriptions(&k2);

  CU_ASSERT_EQUAL_FATAL(t_client_send(&k1, "{\"id\":7,\"cmd\":\"world.destroy\",\"world\":\"wd\"}"),
                        0);
  int responses = 0, events = 0;
  bool seen[2] = {false, false};
  long deadline = t_now_ms() + 3000;
  while ((responses < 1 || events < 2) && t_now_ms() < deadline) {
    cJSON *j = t_recv_object(&k1, deadline - t_now_ms());
    if (!j)
      break;
    if (t_resp_has(j, "event")) {
      events++;
      CU_ASSERT_STRING_EQUAL(t_resp_str(j, "event"), "world_destroyed");
      CU_ASSERT_STRING_EQUAL(t_resp_str(j, "world"), "wd");
      CU_ASSERT_EQUAL(cJSON_GetArraySize(j), 3);
      for (int i = 0; i < 2; i++)
        if (t_resp_num(j, "sub") == (double)s[i].id) {
          CU_ASSERT_FALSE(seen[i]);
          seen[i] = true;
        }
    } else {
      responses++;
      CU_ASSERT_TRUE(t_resp_ok(j));
      CU_ASSERT_EQUAL(t_resp_num(j, "id"), 7);
      CU_ASSERT_EQUAL(cJSON_GetArraySize(j), 2);
    }
    cJSON_Delete(j);
  }
  CU_ASSERT_EQUAL(responses, 1);
  CU_ASSERT_EQUAL(events, 2);
  CU_ASSERT_TRUE(seen[0] && seen[1]);
  cJSON *ev = t_next_event(&k2, FRAME_WAIT_MS);
  char want_ev[128];
  snprintf(want_ev, sizeof want_ev, "{\"event\":\"world_destroyed\",\"sub\":%lld,\"world\":\"wd\"}",
           (long long)t.id);
  cJSON *expect_ev = cJSON_Parse(want_ev);
  CU_ASSERT_TRUE(cJSON_Compare(ev, expect_ev, true));
  if (!cJSON_Compare(ev, expect_ev, true))
    t_report("expected world_destroyed", ev);
  cJSON_Delete(expect_ev);
  cJSON_Delete(ev);
  CU_ASSERT_EQUAL(info_subscriptions(&k2), before - 3);

  /* A new world of the same name is not the old subscriptions'. */
  OKD(&k2, "{\"cmd\":\"world.create\",\"world\":\"wd\"}");
  mk(&k2, W, 0, 1, 1, 1);
  QUIET(&k1, QUIET_MS);
  QUIET(&k2, 0);
  ERR(&k1, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s[0].id);
  ERR(&k1, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)s[1].id);
  ERR(&k2, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%lld}", (long long)t.id);
  OKD(&k2, "{\"cmd\":\"world.destroy\",\"world\":\"wd\"}");
  QUIET(&k1, 0);
  t_client_close(&k1);
  t_client_close(&k2);
}

/* Closing a connection ends its subscriptions. */
static void test_close_ends_subscriptions(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"cl\"}");
  int64_t a = mk(&ctl, "cl", 0, 0, 0, 0);
  double before = info_subscriptions(&ctl);
  sub_state s1, s2;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s1, "cl", 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s2, "cl", a, 5));
  CU_ASSERT_EQUAL(info_subscriptions(&ctl), before + 2);
  t_client_close(&sc);
  double n = -1;
  long deadline = t_now_ms() + 3000;
  while (t_now_ms() < deadline) {
    n = info_subscriptions(&ctl);
    if (n == before)
      break;
    t_sleep_ms(10);
  }
  CU_ASSERT_EQUAL(n, before);
  /* The daemon goes on streaming to others. */
  set_t(&ctl, "cl", a, 1, 0, 0);
  OKD(&ctl, "{\"cmd\":\"ping\"}");
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"cl\"}");
  t_client_close(&ctl);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_daemon_stream_subscriptions(void) {
  static const t_test tests[] = {
      {"removed in whole-world scope", test_removed_whole_world},
      {"subtree scope", test_subtree_scope},
      {"root destroyed other ways", test_root_destroyed_other_ways},
      {"two subscribers, identical frames", test_two_subscribers},
      {"unsubscribe", test_unsubscribe},
      {"subscribe errors", test_subscribe_errors},
      {"world.destroy ends subscriptions", test_world_destroyed},
      {"closing a connection ends its subscriptions", test_close_ends_subscriptions},
  };
  return T_ADD_SUITE("daemon_stream_subscriptions", stream_suite_init, stream_suite_clean, tests);
}

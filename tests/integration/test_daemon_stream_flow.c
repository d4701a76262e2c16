/* Integration tests of the flow of frames against the real daemon: frames follow the
 * responses before them, never go back, are capped by hz, and a slow consumer neither grows the
 * daemon's memory without bound nor misses the final state. */
#include "daemon_fixtures.h"
#include "stream_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* On the subscriber's own connection: after a set's ok, the next frame carries the new value
 * (frames before the ok carry older ones), and every line is whole. */
static void test_frames_follow_responses(void) {
  t_client k;
  OPEN(k, stream_daemon.port);
  const char *W = "or";
  OKD(&k, "{\"cmd\":\"world.create\",\"world\":\"or\"}");
  int64_t a = mk(&k, W, 0, 0, 0, 0);
  int64_t b = mk(&k, W, a, 0, 1, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&k, &s, W, 0, 0));
  double last_x = -1;
  for (int i = 1; i <= 12; i++) {
    t_sleep_ms((i * 17) % TICK_MS); /* land at different points of a tick */
    set_t(&k, W, a, i, 0, 0);
    /* Frames that came before the ok were made before the set. */
    while (cJSON_GetArraySize(k.events) > 0) {
      cJSON *f = cJSON_DetachItemFromArray(k.events, 0);
      check_frame(&s, f, s.frames == 0);
      int count;
      const cJSON *m = set_matrix(f, a, &count);
      if (m) {
        double x = cJSON_GetArrayItem(m, 12)->valuedouble;
        CU_ASSERT_TRUE(x < i && x > last_x);
        last_x = x;
      }
      cJSON_Delete(f);
    }
    cJSON *f = expect_frame(&k, &s, s.frames == 0);
    check_set(f, (want[]){{a, (float)i, 0, 0}, {b, (float)i, 1, 0}}, 2);
    last_x = i;
    cJSON_Delete(f);
  }

  /* Many requests in one write with frames in between: responses in order, lines whole. */
  size_t cap = 200 * 160, len = 0;
  char *lines = malloc(cap);
  CU_ASSERT_PTR_NOT_NULL_FATAL(lines);
  for (int i = 0; i < 200; i++)
    len += (size_t)snprintf(lines + len, cap - len,
                            "{\"id\":%d,\"cmd\":\"transform.set_local\",\"world\":\"or\","
                            "\"entity\":%lld,\"t\":[%d,0,0]}\n",
                            i, (long long)(i % 2 ? b : a), i);
  long deadline = t_now_ms() + 5000;
  int next_id = 0, frames = 0;
  /* Sent in pieces over a few ticks so frames fall between responses. */
  for (size_t at = 0; at < len;) {
    size_t piece = len - at < 1000 ? len - at : 1000;
    CU_ASSERT_EQUAL_FATAL(t_client_send_raw(&k, lines + at, piece), 0);
    at += piece;
    t_sleep_ms(TICK_MS / 3);
  }
  free(lines);
  while (next_id < 200 && t_now_ms() < deadline) {
    cJSON *j = t_recv_object(&k, deadline - t_now_ms());
    if (!j)
      break;
    if (t_resp_has(j, "event")) {
      /* Exactly the state after the last request answered before it. */
      check_frame(&s, j, 0);
      frames++;
      int last = next_id - 1;
      float ax = last < 0 ? 12 : (float)(last - last % 2);
      float bx = last < 1 ? 0 : (float)(last % 2 ? last : last - 1), by = last < 1 ? 1 : 0;
      float ma[16], mb[16];
      mat_t(ma, ax, 0, 0);
      mat_t(mb, ax + bx, by, 0);
      int count;
      const cJSON *m = set_matrix(j, a, &count);
      CU_ASSERT_TRUE(count <= 1 && (!m || matrix_equals(m, ma)));
      m = set_matrix(j, b, &count);
      CU_ASSERT_TRUE(count == 1 && matrix_equals(m, mb)); /* b moves with every request */
      if (!matrix_equals(m, mb)) {
        fprintf(stderr, "  after response %d:\n", last);
        t_report("frame", j);
      }
    } else {
      CU_ASSERT_TRUE(t_resp_ok(j));
      CU_ASSERT_EQUAL(t_resp_num(j, "id"), next_id);
      next_id++;
    }
    cJSON_Delete(j);
  }
  CU_ASSERT_EQUAL(next_id, 200);
  /* The last frame holds the final values. */
  cJSON *f = NULL, *g;
  while ((g = t_next_event(&k, QUIET_MS))) {
    check_frame(&s, g, 0);
    frames++;
    cJSON_Delete(f);
    f = g;
  }
  CU_ASSERT_TRUE(frames >= 1);
  /* b (x 199) under a (x 198). */
  float expect_b[16];
  mat_t(expect_b, 198 + 199, 0, 0);
  if (f) {
    int count;
    const cJSON *mb = set_matrix(f, b, &count);
    CU_ASSERT_TRUE(count == 1 && matrix_equals(mb, expect_b));
  }
  cJSON_Delete(f);
  cJSON *r = CALL(&k, "{\"cmd\":\"transform.get\",\"world\":\"or\",\"entity\":%lld}", (long long)b);
  CU_ASSERT_TRUE(matrix_equals(cJSON_GetObjectItem(r, "world"), expect_b));
  cJSON_Delete(r);
  OKD(&k, "{\"cmd\":\"world.destroy\",\"world\":\"or\"}");
  t_client_close(&k);
}

/* Across connections: values set one after another reach a subscriber in order, never an
 * older after a newer, ending with the last. */
static void test_frames_never_go_back(void) {
  t_client ctl, sc;
  OPEN(ctl, stream_daemon.port);
  OPEN(sc, stream_daemon.port);
  const char *W = "oc";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"oc\"}");
  int64_t a = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));
  double last = 0;
  int frames = 0;
  for (int i = 1; i <= 30; i++) {
    set_t(&ctl, W, a, i, 0, 0);
    t_sleep_ms((i * 13) % 23);
    cJSON *f;
    while ((f = t_next_event(&sc, 0))) {
      check_frame(&s, f, 0);
      int count;
      const cJSON *m = set_matrix(f, a, &count);
      CU_ASSERT_EQUAL(count, 1);
      double x = m ? cJSON_GetArrayItem(m, 12)->valuedouble : -1;
      CU_ASSERT_TRUE(x > last && x <= i);
      last = x;
      frames++;
      cJSON_Delete(f);
    }
  }
  cJSON *f;
  while ((f = t_next_event(&sc, QUIET_MS))) {
    check_frame(&s, f, 0);
    int count;
    const cJSON *m = set_matrix(f, a, &count);
    double x = m ? cJSON_GetArrayItem(m, 12)->valuedouble : -1;
    CU_ASSERT_TRUE(x > last);
    last = x;
    frames++;
    cJSON_Delete(f);
  }
  CU_ASSERT_EQUAL(last, 30);
  CU_ASSERT_TRUE(frames >= 2);
  OKD(&ctl, "{\"cmd\":\"world.destroy\",\"world\":\"oc\"}");
  t_client_close(&sc);
  t_client_close(&ctl);
}

/* hz caps a subscription's frames per second; each frame carries everything since the last. */
static void test_hz_cap(void) {
  t_daemon d;
  const char *args[] = {"--tick-hz", "50", NULL};
  if (!START(&d, args))
    return;
  t_client ctl, sc, fast;
  OPEN(ctl, d.port);
  OPEN(sc, d.port);
  OPEN(fast, d.port);
  const char *W = "hz";
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"hz\"}");
  int64_t m = mk(&ctl, W, 0, 0, 0, 0);
  int64_t y[4];
  for (int i = 0; i < 4; i++)
    y[i] = mk(&ctl, W, 0, 0, 0, 0);
  sub_state s, sf;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, W, 0, 5));
  CU_ASSERT_TRUE_FATAL(subscribe(&fast, &sf, W, 0, 0));
  cJSON_Delete(expect_frame(&sc, &s, 1));
  cJSON_Delete(expect_frame(&fast, &sf, 1));

  /* Move m every 10 ms for a second; set each y once along the way. */
  float mx = 0, yv[4] = {0, 0, 0, 0};
  int seen_y[4] = {0, 0, 0, 0};
  int frames = 0, fast_frames = 0;
  double prev_tick = s.last_tick;
  long start = t_now_ms(), end = start + 1000;
  int i = 0;
  while (t_now_ms() < end) {
    i++;
    set_t(&ctl, W, m, i, 0, 0);
    mx = (float)i;
    if (i % 20 == 10 && i / 20 < 4) {
      yv[i / 20] = (float)(100 + i);
      set_t(&ctl, W, y[i / 20], yv[i / 20], 0, 0);
    }
    t_sleep_ms(10);
    cJSON *f;
    while ((f = t_next_event(&fast, 0))) {
      fast_frames++;
      cJSON_Delete(f);
    }
    while ((f = t_next_event(&sc, 0))) {
      check_frame(&s, f, 0);
      long at = t_now_ms();
      if (at <= end)
        frames++;
      /* At most one frame per 10 ticks of the world (5 of 50 per second). */
      CU_ASSERT_TRUE(t_resp_num(f, "tick") - prev_tick >= 9);
      prev_tick = t_resp_num(f, "tick");
      for (int j = 0; j < 4; j++) {
        int count;
        const cJSON *mm = set_matrix(f, y[j], &count);
        if (mm) {
          seen_y[j]++;
          float want_m[16];
          mat_t(want_m, yv[j], 0, 0);
          CU_ASSERT_TRUE(matrix_equals(mm, want_m));
        }
      }
      cJSON_Delete(f);
    }
  }
  /* The frames after the motion stops. */
  cJSON *f, *last = NULL;
  while ((f = t_next_event(&sc, 600))) {
    check_frame(&s, f, 0);
    CU_ASSERT_TRUE(t_resp_num(f, "tick") - prev_tick >= 9);
    prev_tick = t_resp_num(f, "tick");
    for (int j = 0; j < 4; j++) {
      int count;
      if (set_matrix(f, y[j], &count))
        seen_y[j]++;
    }
    cJSON_Delete(last);
    last = f;
  }
  CU_ASSERT_TRUE(frames >= 3 && frames <= 6);
  if (!(frames >= 3 && frames <= 6))
    fprintf(stderr, "  %d frames in a second at hz 5\n", frames);
  /* The uncapped subscriber got many more. */
  CU_ASSERT_TRUE(fast_frames >= 20);
  for (int j = 0; j < 4; j++)
    CU_ASSERT_EQUAL(seen_y[j], 1);
  /* The final value arrives. */
  if (last) {
    int count;
    float want_m[16];
    mat_t(want_m, mx, 0, 0);
    const cJSON *mm = set_matrix(last, m, &count);
    CU_ASSERT_TRUE(count == 1 && matrix_equals(mm, want_m));
  } else {
    /* The last frame inside the window already had it: nothing changed after it. */
    CU_ASSERT_TRUE(frames >= 1);
  }
  cJSON_Delete(last);
  t_client_close(&sc);
  t_client_close(&fast);
  t_client_close(&ctl);
  STOP_OK(&d, 5000);
}

/* ---- a slow consumer ------------------------------------------------------------------------- */

#define BIG 20000

typedef struct id_index {
  int64_t id;
  int index;
} id_index;

static int cmp_id_index(const void *a, const void *b) {
  int64_t x = ((const id_index *)a)->id, y = ((const id_index *)b)->id;
  return (x > y) - (x < y);
}

static int index_of(const id_index *map, int n, int64_t id) {
  id_index key = {id, 0};
  const id_index *hit = bsearch(&key, map, (size_t)n, sizeof *map, cmp_id_index);
  return hit ? hit->index : -1;
}

/* Transform i (0 is the root) at root x: the root at (x,0,0), child i at (x + i%100, i/100, 0). */
static void big_expected(float m[16], int i, float x) {
  if (i == 0)
    mat_t(m, x, 0, 0);
  else
    mat_t(m, x + (float)(i % 100), (float)(i / 100), 0);
}

static void test_slow_consumer(void) {
  t_daemon d;
  const char *args[] = {"--tick-hz", "20", "--output-limit", "262144", NULL};
  if (!START(&d, args))
    return;
  t_client ctl, sc;
  OPEN(ctl, d.port);
  OPEN(sc, d.port);
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"big\"}");
  int64_t *ids = calloc(BIG, sizeof *ids);
  id_index *map = calloc(BIG, sizeof *map);
  float(*state)[16] = calloc(BIG, sizeof *state);
  bool *known = calloc(BIG, sizeof *known);
  char *line = malloc(256 * 1024);
  CU_ASSERT_FATAL(ids && map && state && known && line);
  ids[0] = mk(&ctl, "big", 0, 0, 0, 0);
  for (int from = 1; from < BIG; from += 2000) {
    int to = from + 2000 < BIG ? from + 2000 : BIG;
    size_t len = (size_t)sprintf(line, "{\"cmd\":\"batch\",\"world\":\"big\",\"ops\":[");
    for (int i = from; i < to; i++)
      len += (size_t)sprintf(line + len,
                             "%s{\"cmd\":\"transform.create\",\"parent\":%lld,\"t\":[%d,%d,0]}",
                             i > from ? "," : "", (long long)ids[0], i % 100, i / 100);
    sprintf(line + len, "]}");
    cJSON *r = CALL(&ctl, "%s", line);
    CU_ASSERT_TRUE_FATAL(t_resp_ok(r));
    const cJSON *results = cJSON_GetObjectItemCaseSensitive(r, "results");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(results), to - from);
    for (int i = from; i < to; i++)
      ids[i] = (int64_t)t_resp_num(cJSON_GetArrayItem(results, i - from), "entity");
    cJSON_Delete(r);
  }
  for (int i = 0; i < BIG; i++)
    map[i] = (id_index){ids[i], i};
  qsort(map, BIG, sizeof *map, cmp_id_index);
  for (int i = 1; i < BIG; i++)
    CU_ASSERT_TRUE_FATAL(map[i].id > map[i - 1].id && map[i - 1].id > 0);

  sub_state s, leaf;
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &s, "big", 0, 0));
  CU_ASSERT_TRUE_FATAL(subscribe(&sc, &leaf, "big", ids[7], 0));
  t_sleep_ms(200);
  long base = t_rss_kib(d.pid), peak = base;
  CU_ASSERT_TRUE_FATAL(base > 0);

  /* The root moves every tick for ~3 s while the subscriber reads nothing. */
  int x = 0;
  long end = t_now_ms() + 3000;
  while (t_now_ms() < end) {
    x++;
    set_t(&ctl, "big", ids[0], x, 0, 0);
    long rss = t_rss_kib(d.pid);
    if (rss > peak)
      peak = rss;
    t_sleep_ms(TICK_MS);
  }
  long grown = peak - base;
  CU_ASSERT_TRUE(grown < 64 * 1024);
  if (grown >= 64 * 1024)
    fprintf(stderr, "  resident memory grew by %ld KiB while a subscriber stalled\n", grown);
  /* Motion stopped: the state the subscriber must converge to. */
  for (int i = 0; i < BIG; i += 997) {
    cJSON *r = CALL(&ctl, "{\"cmd\":\"transform.get\",\"world\":\"big\",\"entity\":%lld}",
                    (long long)ids[i]);
    float want_m[16];
    big_expected(want_m, i, (float)x);
    CU_ASSERT_TRUE(matrix_equals(cJSON_GetObjectItemCaseSensitive(r, "world"), want_m));
    cJSON_Delete(r);
  }

  /* Now it reads: frames it had, then (having lagged) a full frame of the final state. */
  int frames = 0, fulls = 0, last_full_count = -1;
  bool last_was_full = false, last_full_matches = false;
  long deadline = t_now_ms() + 20000;
  cJSON *f;
  int leaf_fulls = 0;
  bool leaf_last_full = false, leaf_matches = false;
  /* Until both subscriptions have converged (a full frame of the final state last). */
  while (!(last_was_full && last_full_matches && last_full_count == BIG && leaf_last_full &&
           leaf_matches && leaf_fulls >= 2) &&
         t_now_ms() < deadline && (f = t_next_event(&sc, 3000))) {
    if (t_resp_num(f, "sub") == (double)leaf.id) {
      /* The one-transform subtree subscription lags and resyncs too. */
      check_frame(&leaf, f, -1);
      leaf_last_full = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "full"));
      leaf_fulls += leaf_last_full;
      int count;
      float want_m[16];
      big_expected(want_m, 7, (float)x);
      leaf_matches = matrix_equals(set_matrix(f, ids[7], &count), want_m) && count == 1 &&
                     cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "set")) == 1;
      cJSON_Delete(f);
      continue;
    }
    check_frame(&s, f, -1);
    frames++;
    bool full = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "full"));
    if (full) {
      fulls++;
      memset(known, 0, BIG * sizeof *known);
    }
    const cJSON *it;
    int count = 0;
    bool matches = true;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(f, "set")) {
      int i = index_of(map, BIG, (int64_t)t_resp_num(it, "e"));
      CU_ASSERT_TRUE(i >= 0);
      if (i < 0)
        continue;
      const cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "m");
      for (int j = 0; j < 16; j++)
        state[i][j] = (float)cJSON_GetArrayItem(m, j)->valuedouble;
      known[i] = true;
      float want_m[16];
      big_expected(want_m, i, (float)x);
      matches &= memcmp(want_m, state[i], sizeof want_m) == 0;
      count++;
    }
    CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "removed")), 0);
    last_was_full = full;
    if (full) {
      last_full_count = count;
      last_full_matches = matches;
    }
    cJSON_Delete(f);
  }
  /* Then nothing more: nothing changes. */
  QUIET(&sc, QUIET_MS);
  CU_ASSERT_TRUE(fulls >= 2); /* the first, and the one after lagging */
  CU_ASSERT_TRUE(last_was_full);
  CU_ASSERT_EQUAL(last_full_count, BIG);
  CU_ASSERT_TRUE(last_full_matches);
  if (!(fulls >= 2 && last_was_full && last_full_matches))
    fprintf(stderr, "  %d frames, %d full, last full: %d entries, matches %d\n", frames, fulls,
            last_full_count, (int)last_full_matches);
  CU_ASSERT_TRUE(leaf_fulls >= 2);
  CU_ASSERT_TRUE(leaf_last_full);
  CU_ASSERT_TRUE(leaf_matches);
  /* The subscriber's view equals the daemon's state. */
  int wrong = 0;
  for (int i = 0; i < BIG; i++) {
    float want_m[16];
    big_expected(want_m, i, (float)x);
    wrong += !known[i] || memcmp(want_m, state[i], sizeof want_m) != 0;
  }
  CU_ASSERT_EQUAL(wrong, 0);
  /* Caught up: it now gets ordinary deltas. */
  set_t(&ctl, "big", ids[5], 0, 0, 1);
  f = expect_frame(&sc, &s, 0);
  check_set(f, (want[]){{ids[5], (float)x, 0, 1}}, 1);
  cJSON_Delete(f);
  set_t(&ctl, "big", ids[7], 0, 0, 1);
  cJSON *fs[2];
  sub_state both[2] = {s, leaf};
  frames_by_sub(&sc, both, fs, 2);
  check_set(fs[0], (want[]){{ids[7], (float)x, 0, 1}}, 1);
  CU_ASSERT_TRUE(same_but_sub(fs[0], fs[1]));
  cJSON_Delete(fs[0]);
  cJSON_Delete(fs[1]);

  free(ids);
  free(map);
  free(state);
  free(known);
  free(line);
  t_client_close(&sc);
  t_client_close(&ctl);
  STOP_OK(&d, 10000);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_daemon_stream_flow(void) {
  static const t_test tests[] = {
      {"frames follow responses", test_frames_follow_responses},
      {"frames never go back", test_frames_never_go_back},
      {"hz caps frames", test_hz_cap},
      {"slow consumer", test_slow_consumer},
  };
  return T_ADD_SUITE("daemon_stream_flow", stream_suite_init, stream_suite_clean, tests);
}

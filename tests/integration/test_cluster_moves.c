/* The cluster against a real etcd, world.move: with subscribers and racing writes, and carrying
 * ticks and history (which a takeover starts over). Every test starts etcd and three daemons
 * and stops exactly what it started. */
#include "cluster_fixtures.h"
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- moves ----------------------------------------------------------------------------------- */

/* world.move with a subscriber and writes racing it: every write answered ok before the
 * hand-off is on the new owner (the oks are a prefix, the rest MOVED or UNAVAILABLE), the
 * subscriber gets moved, and the old owner answers MOVED from then on. */
static void test_move_with_subscribers_and_writes(void) {
  START_CLUSTER(k, NULL);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"m.a\"}");
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"m.b\"}");
  cJSON *r = OK(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"m.a\",\"name\":\"x\"}");
  unsigned long long e = t_resp_id(r, "entity");
  cJSON_Delete(r);
  t_client sub, writer, mover;
  CONNECT_FATAL(&sub, k.d[0].port);
  CONNECT_FATAL(&writer, k.d[0].port);
  CONNECT_FATAL(&mover, k.d[0].port);
  t_client_keep_events(&sub);
  r = OK(&sub, "{\"cmd\":\"subscribe\",\"world\":\"m.a\"}");
  double sid = t_resp_num(r, "sub");
  cJSON_Delete(r);
  /* Writes go in chunks while the move runs, so some land before the hand-off and some
   * after it. */
  enum { CHUNK = 20, MAX_WRITES = 4000 };
  int sent = 0, answered = 0, last_ok = 0, oks = 0, refused = 0;
  bool prefix = true, move_sent = false;
  cJSON *m = NULL;
  int after_move = 0;
  long deadline0 = t_now_ms() + 20000;
  while (sent < MAX_WRITES && after_move < 5 && t_now_ms() < deadline0) {
    text batch = {0};
    for (int i = 0; i < CHUNK; i++)
      text_addf(&batch,
                "{\"cmd\":\"transform.set_local\",\"world\":\"m.a\",\"entity\":%llu,\"t\":[%d,"
                "0,0]}\n",
                e, ++sent);
    t_client_send_raw(&writer, batch.s, batch.len);
    text_free(&batch);
    if (!move_sent && sent >= 200) {
      t_client_send(&mover, "{\"cmd\":\"world.move\",\"world\":\"m.a\",\"to\":\"n1\"}");
      move_sent = true;
    }
    if (move_sent && !m)
      m = t_recv_object(&mover, 1);
    if (m)
      after_move++;
    /* Read what has been answered so far. */
    while (answered < sent) {
      cJSON *w = t_recv_object(&writer, answered + 4 * CHUNK < sent ? T_RESPONSE_MS : 1);
      if (!w)
        break;
      answered++;
      if (t_resp_ok(w)) {
        prefix &= refused == 0;
        last_ok = answered;
        oks++;
      } else {
        const char *code = t_resp_code(w);
        CHECK(!strcmp(code, "MOVED") || !strcmp(code, "UNAVAILABLE"), w);
        refused++;
      }
      cJSON_Delete(w);
    }
  }
  while (answered < sent) {
    cJSON *w = t_recv_object(&writer, T_RESPONSE_MS);
    if (!w) {
      CU_FAIL("every write is answered");
      break;
    }
    answered++;
    if (t_resp_ok(w)) {
      prefix &= refused == 0;
      last_ok = answered;
      oks++;
    } else {
      refused++;
    }
    cJSON_Delete(w);
  }
  if (!m)
    m = t_recv_object(&mover, T_RESPONSE_MS);
  /* The answer names the new owner as MOVED would: the client may go there at once. */
  char n1_addr[64], n2_addr[64];
  snprintf(n1_addr, sizeof n1_addr, "127.0.0.1:%d", k.d[1].port);
  snprintf(n2_addr, sizeof n2_addr, "127.0.0.1:%d", k.d[2].port);
  CHECK(t_resp_ok(m) && t_resp_str_is(m, "node", "n1") && t_resp_str_is(m, "addr", n1_addr), m);
  cJSON_Delete(m);
  CU_ASSERT(oks > 0 && refused > 0);
  CU_ASSERT(prefix);
  fprintf(stderr, "  move: %d writes ok before the hand-off, %d refused\n", oks, refused);
  /* The subscriber's stream ends with moved, naming the new owner. */
  bool moved_event = false;
  long deadline = t_now_ms() + 5000;
  while (!moved_event && t_now_ms() < deadline) {
    cJSON *ev = t_next_event(&sub, 200);
    if (ev && t_resp_str_is(ev, "event", "moved")) {
      char addr[64];
      snprintf(addr, sizeof addr, "127.0.0.1:%d", k.d[1].port);
      CHECK(t_resp_num(ev, "sub") == sid && t_resp_str_is(ev, "world", "m.a") &&
                t_resp_str_is(ev, "node", "n1") && t_resp_str_is(ev, "addr", addr),
            ev);
      moved_event = true;
    }
    cJSON_Delete(ev);
  }
  CU_ASSERT(moved_event);
  ERR(&sub, "NOT_FOUND", "{\"cmd\":\"unsubscribe\",\"sub\":%g}", sid);
  /* The old owner sends both worlds of the group to n1; n1 has every acknowledged write. */
  for (int i = 0; i < 2; i++) {
    r = CALL(&k.c[0], "{\"cmd\":\"transform.get\",\"world\":\"m.%c\",\"entity\":%llu}", "ab"[i], e);
    CHECK(t_resp_str_is(error_of(r), "code", "MOVED") && t_resp_str_is(error_of(r), "node", "n1"),
          r);
    cJSON_Delete(r);
  }
  r = OK(&k.c[1], "{\"cmd\":\"transform.get\",\"world\":\"m.a\",\"entity\":%llu}", e);
  const cJSON *local = cJSON_GetObjectItemCaseSensitive(r, "local");
  double x = cJSON_GetArraySize(local) == 16 ? cJSON_GetArrayItem(local, 12)->valuedouble : -1;
  CU_ASSERT_EQUAL(x, last_ok);
  CU_ASSERT(t_resp_str_is(r, "name", "x"));
  cJSON_Delete(r);
  OKD(&k.c[1], "{\"cmd\":\"world.list\"}");
  ERR(&k.c[1], "NOT_FOUND", "{\"cmd\":\"transform.find\",\"world\":\"m.b\",\"path\":\"none\"}");
  /* Moves to nowhere, and to the owner itself. */
  ERR(&k.c[1], "NOT_FOUND", "{\"cmd\":\"world.move\",\"world\":\"m.a\",\"to\":\"nobody\"}");
  r = OK(&k.c[1], "{\"cmd\":\"world.move\",\"world\":\"m.a\",\"to\":\"n1\"}");
  CHECK(t_resp_str_is(r, "node", "n1") && t_resp_str_is(r, "addr", n1_addr), r);
  cJSON_Delete(r);
  /* And on, through the client's own connection. */
  r = OK(&k.c[1], "{\"cmd\":\"world.move\",\"world\":\"m.b\",\"to\":\"n2\"}");
  CHECK(t_resp_str_is(r, "node", "n2") && t_resp_str_is(r, "addr", n2_addr), r);
  cJSON_Delete(r);
  r = OK(&k.c[2], "{\"cmd\":\"transform.get\",\"world\":\"m.a\",\"entity\":%llu}", e);
  cJSON_Delete(r);
  t_client_close(&sub);
  t_client_close(&writer);
  t_client_close(&mover);
  cluster_stop(&k);
}

/* ---- history across a move ------------------------------------------------------------------- */

/* The answers to lines (count requests, each with "id": its index), sent a few dozen at a
 * time, each as compact JSON without its id (caller frees them and the array). */
static char **answers_to(t_client *c, const char *const *lines, int count) {
  char **out = calloc((size_t)count, sizeof *out);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  for (int from = 0; from < count; from += 40) {
    int to = from + 40 < count ? from + 40 : count;
    text b = {0};
    for (int i = from; i < to; i++)
      text_addf(&b, "%s\n", lines[i]);
    t_client_send_raw(c, b.s, b.len);
    text_free(&b);
    for (int i = from; i < to; i++) {
      cJSON *r = t_recv_object(c, T_RESPONSE_MS);
      CU_ASSERT_PTR_NOT_NULL_FATAL(r);
      CHECK(t_resp_num(r, "id") == i, r);
      cJSON_DeleteItemFromObjectCaseSensitive(r, "id");
      out[i] = cJSON_PrintUnformatted(r);
      cJSON_Delete(r);
    }
  }
  return out;
}

static void answers_free(char **a, int count) {
  for (int i = 0; i < count; i++)
    cJSON_free(a[i]);
  free(a);
}

/* The window a refused tick's message names: "ticks A to B". */
static bool window_named(t_client *c, const char *w, unsigned long long e, double tick,
                         long *oldest, long *newest) {
  char *msg = NULL;
  bool ok = ERR_MESSAGE(c, "NOT_FOUND", &msg,
                        "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%g}",
                        w, e, tick);
  const char *at = msg ? strstr(msg, "is outside the history of world") : NULL;
  const char *ticks = at ? strstr(at, ": ticks ") : NULL;
  ok = ok && ticks && sscanf(ticks, ": ticks %ld to %ld", oldest, newest) == 2;
  if (!ok)
    fprintf(stderr, "  the refusal names no window: %s\n", msg ? msg : "(none)");
  free(msg);
  return ok;
}

static unsigned long long new_transform(t_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static unsigned long long new_transform(t_client *c, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  cJSON *r = OK(c, "%s", line);
  unsigned long long e = r ? t_resp_id(r, "entity") : 0;
  cJSON_Delete(r);
  return e;
}

/* world.move carries each world's ticks and history: a world with history 600 moves over many
 * ticks on n0 (relinks, renames, creations and destructions among them, and changes in the
 * tick still open at the move), then moves to n1, which answers every read at every tick of
 * the window, whole and fractional, json and b64, exactly as n0 did; its ticks go on from
 * n0's, and world.list shows the window. Then n1 is killed: the daemon that takes the group
 * over starts its ticks at 1 with an empty history (the old ticks are outside the window). */
static void test_move_carries_history(void) {
  START_CLUSTER(k, "always");
  const char *W = "rw.main", *SIDE = "rw.side";
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"%s\",\"history\":600}", W);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"%s\"}", SIDE);
  t_client *c0 = &k.c[0];
  unsigned long long car = new_transform(
      c0, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"name\":\"car\",\"t\":[0,0,0]}", W);
  unsigned long long wheel = new_transform(c0,
                                           "{\"cmd\":\"transform.create\",\"world\":\"%s\","
                                           "\"parent\":%llu,\"name\":\"wheel\",\"t\":[1,0,0]}",
                                           W, car);
  unsigned long long prop = new_transform(c0,
                                          "{\"cmd\":\"transform.create\",\"world\":\"%s\","
                                          "\"name\":\"prop\",\"t\":[0,5,0],\"s\":2}",
                                          W);
  OKD(c0, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"entity\":%llu}", SIDE, car);
  unsigned long long box = 0, late = 0;
  long t = TICK_NOW(c0, W, car);
  enum { STEPS = 40 };
  for (int step = 1; step <= STEPS; step++) {
    t = TICK_PAST(c0, W, car, t + (step % 5 == 0 ? 3 : 0)); /* some ticks change nothing */
    double a = step * 0.3, b = step * 0.5;
    OKD(c0,
        "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[%d,0,%g],"
        "\"r\":[0,%.9g,0,%.9g]}",
        W, car, step, step * 0.25, sin(a), cos(a));
    if (step % 3 == 0) /* twice in one tick: the tick closes with the second */
      OKD(c0, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[%d,1,0]}",
          W, car, -step);
    OKD(c0,
        "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[1,0,0],"
        "\"r\":[%.9g,0,0,%.9g]}",
        W, wheel, sin(b), cos(b));
    if (step % 4 == 0)
      OKD(c0,
          "{\"cmd\":\"transform.set_world\",\"world\":\"%s\",\"entity\":%llu,\"t\":[%d,5,0],"
          "\"s\":[2,1,0.5]}",
          W, prop, step);
    switch (step) {
    case 6:
      box = new_transform(c0,
                          "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"parent\":%llu,"
                          "\"name\":\"box\",\"t\":[0,2,0]}",
                          W, car);
      break;
    case 10:
      OKD(c0, "{\"cmd\":\"transform.rename\",\"world\":\"%s\",\"entity\":%llu,\"name\":\"crate\"}",
          W, box);
      break;
    case 14:
      OKD(c0,
          "{\"cmd\":\"transform.link\",\"world\":\"%s\",\"entity\":%llu,\"parent\":%llu,"
          "\"keep\":\"world\"}",
          W, wheel, prop);
      break;
    case 18:
      OKD(c0, "{\"cmd\":\"transform.destroy\",\"world\":\"%s\",\"entity\":%llu}", W, box);
      break;
    case 22:
      late = new_transform(
          c0, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"name\":\"late\",\"t\":[7,7,7]}", W);
      break;
    case 26:
      OKD(c0, "{\"cmd\":\"transform.link\",\"world\":\"%s\",\"entity\":%llu,\"parent\":%llu}", W,
          wheel, car);
      break;
    case 30:
      OKD(c0, "{\"cmd\":\"transform.rename\",\"world\":\"%s\",\"entity\":%llu,\"name\":null}", W,
          prop);
      break;
    case 33:
      OKD(c0, "{\"cmd\":\"transform.destroy\",\"world\":\"%s\",\"entity\":%llu,\"recursive\":true}",
          W, late);
      break;
    default:
      break;
    }
  }
  long last = TICK_NOW(c0, W, car), side_before = TICK_NOW(c0, SIDE, car);
  /* changes in the tick still open at the move: no tick before the move shows them */
  OKD(c0, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[99,0,0]}", W,
      car);
  OKD(c0, "{\"cmd\":\"transform.rename\",\"world\":\"%s\",\"entity\":%llu,\"name\":\"moved\"}", W,
      wheel);

  /* Every tick of the window (and the ones around it), each entity, in both forms; relative;
   * fractional ticks. */
  unsigned long long ents[] = {car, wheel, prop, box, late};
  enum { NENTS = sizeof ents / sizeof *ents };
  int cap = (int)(last + 3) * (NENTS + 1) + 64, n = 0;
  char **lines = calloc((size_t)cap, sizeof *lines);
  CU_ASSERT_PTR_NOT_NULL_FATAL(lines);
  for (long tick = 1; tick <= last; tick++) {
    char line[300];
    for (int i = 0; i < NENTS && n < cap; i++) {
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld,"
               "\"id\":%d}",
               W, ents[i], tick, n);
      lines[n++] = strdup(line);
    }
    if (n < cap) {
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.relative\",\"world\":\"%s\",\"entity\":%llu,\"to\":%llu,"
               "\"tick\":%ld,\"id\":%d}",
               W, wheel, car, tick, n);
      lines[n++] = strdup(line);
    }
    if (tick % 5 == 0 && tick < last && n + 2 <= cap) {
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld.5,"
               "\"trs\":true,\"id\":%d}",
               W, car, tick, n);
      lines[n++] = strdup(line);
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.relative\",\"world\":\"%s\",\"entity\":%llu,\"to\":%llu,"
               "\"tick\":%ld.25,\"id\":%d}",
               W, wheel, prop, tick, n);
      lines[n++] = strdup(line);
    }
  }
  t_client b64;
  CONNECT_FATAL(&b64, k.d[0].port);
  OKD(&b64, "{\"cmd\":\"hello\",\"matrices\":\"b64\"}");
  char **json_before = answers_to(c0, (const char *const *)lines, n);
  char **b64_before = answers_to(&b64, (const char *const *)lines, n);
  t_client_close(&b64);
  int found = 0;
  for (int i = 0; i < n; i++)
    found += strstr(json_before[i], "\"ok\":true") != NULL;
  CU_ASSERT(found > n / 2);
  long old_oldest = -1, old_newest = -1;
  CU_ASSERT_TRUE(window_named(c0, W, car, 0, &old_oldest, &old_newest));
  CU_ASSERT_EQUAL(old_oldest, 1);

  /* The move. */
  OKD(c0, "{\"cmd\":\"world.move\",\"world\":\"%s\",\"to\":\"n1\"}", W);
  cJSON *r = CALL(c0, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", W, car);
  CHECK(t_resp_str_is(error_of(r), "code", "MOVED"), r);
  cJSON_Delete(r);
  t_client *c1 = &k.c[1];
  CONNECT_FATAL(&b64, k.d[1].port);
  OKD(&b64, "{\"cmd\":\"hello\",\"matrices\":\"b64\"}");
  char **json_after = answers_to(c1, (const char *const *)lines, n);
  char **b64_after = answers_to(&b64, (const char *const *)lines, n);
  int differ = 0;
  for (int i = 0; i < n; i++) {
    bool same =
        strcmp(json_before[i], json_after[i]) == 0 && strcmp(b64_before[i], b64_after[i]) == 0;
    if (!same && differ++ < 3)
      fprintf(stderr, "  %s\n  before the move: %s\n  after it:        %s\n", lines[i],
              json_before[i], json_after[i]);
  }
  CU_ASSERT_EQUAL(differ, 0);
  fprintf(stderr,
          "  move with history: %d reads over ticks 1 to %ld, %d of them found, %d differ\n", n,
          last, found, differ);
  /* The same window, still open at tick 1; ticks go on from n0's; the open tick's changes are
   * there and in no tick before. */
  long new_oldest = -1, new_newest = -1;
  CU_ASSERT_TRUE(window_named(c1, W, car, 0, &new_oldest, &new_newest));
  CU_ASSERT_EQUAL(new_oldest, old_oldest);
  CU_ASSERT(new_newest >= old_newest);
  long now1 = TICK_NOW(c1, W, car);
  CU_ASSERT(now1 >= last);
  CU_ASSERT(TICK_NOW(c1, SIDE, car) >= side_before);
  r = OK(c1, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", W, wheel);
  CU_ASSERT(t_resp_str_is(r, "name", "moved"));
  cJSON_Delete(r);
  r = OK(c1, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld}", W, wheel,
         last);
  CU_ASSERT(t_resp_str_is(r, "name", "wheel"));
  cJSON_Delete(r);
  /* now1 may be the tick n0 ran last, with the 99 still in the tick open at the move; t1 ran
   * on n1, after it and before the 500 */
  long t1 = TICK_PAST(c1, W, car, now1);
  OKD(c1, "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[500,0,0]}", W,
      car);
  long t2 = TICK_PAST(c1, W, car, t1);
  r = OK(c1, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld}", W, car,
         t2);
  const cJSON *local = cJSON_GetObjectItemCaseSensitive(r, "local");
  CU_ASSERT(cJSON_GetArraySize(local) == 16 && cJSON_GetArrayItem(local, 12)->valuedouble == 500);
  cJSON_Delete(r);
  r = OK(c1, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"tick\":%ld}", W, car,
         t1);
  local = cJSON_GetObjectItemCaseSensitive(r, "local");
  CU_ASSERT(cJSON_GetArraySize(local) == 16 && cJSON_GetArrayItem(local, 12)->valuedouble == 99);
  cJSON_Delete(r);
  char **again = answers_to(c1, (const char *const *)lines, n);
  int still = 0;
  for (int i = 0; i < n; i++)
    still += strcmp(json_before[i], again[i]) == 0;
  CU_ASSERT_EQUAL(still, n);
  answers_free(again, n);
  r = OK(c1, "{\"cmd\":\"world.list\"}");
  int listed = 0;
  for (const cJSON *w = cJSON_GetObjectItemCaseSensitive(r, "worlds")->child; w; w = w->next) {
    if (t_resp_str_is(w, "name", W))
      listed += CHECK(t_resp_num(w, "history") == 600, w);
    if (t_resp_str_is(w, "name", SIDE))
      listed += CHECK(t_resp_num(w, "history") == 0, w);
  }
  CU_ASSERT_EQUAL(listed, 2);
  cJSON_Delete(r);
  CU_ASSERT_TRUE(t_daemon_log_contains(&k.d[1], "histories=1 "));
  t_client_close(&b64);
  answers_free(json_before, n);
  answers_free(b64_before, n);
  answers_free(json_after, n);
  answers_free(b64_after, n);
  for (int i = 0; i < n; i++)
    free(lines[i]);
  free(lines);

  /* kill -9 of n1: the group is taken over with its worlds, its window (600) and no past. */
  long before_kill = TICK_NOW(c1, W, car);
  kill(k.d[1].pid, SIGKILL);
  t_daemon_wait(&k.d[1], 5000);
  k.up[1] = false;
  t_client_close(&k.c[1]);
  k.connected[1] = false;
  int at = -1;
  char line[200];
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", W,
           car);
  r = wait_ok_anywhere(&k, line, TTL_MS + 3000 + 2000, &at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  const cJSON *lw = cJSON_GetObjectItemCaseSensitive(r, "local");
  CU_ASSERT(cJSON_GetArraySize(lw) == 16 && cJSON_GetArrayItem(lw, 12)->valuedouble == 500);
  cJSON_Delete(r);
  long fresh = TICK_PAST(&k.c[at], W, car, 0);
  CU_ASSERT(fresh < before_kill);
  long o = -1, nw = -1;
  CU_ASSERT_TRUE(window_named(&k.c[at], W, car, (double)before_kill, &o, &nw));
  CU_ASSERT(o == 1 && nw < before_kill);
  r = OK(&k.c[at], "{\"cmd\":\"world.list\"}");
  for (const cJSON *w = cJSON_GetObjectItemCaseSensitive(r, "worlds")->child; w; w = w->next)
    if (t_resp_str_is(w, "name", W))
      CHECK(t_resp_num(w, "history") == 600, w);
  cJSON_Delete(r);
  fprintf(stderr, "  takeover by n%d: ticks start over (now %ld, %ld before the kill)\n", at, fresh,
          before_kill);
  cluster_stop(&k);
}

int t_register_cluster_moves(void) {
  static const t_test tests[] = {
      {"world.move with subscribers and racing writes", test_move_with_subscribers_and_writes},
      {"world.move carries ticks and history; a takeover starts them over",
       test_move_carries_history},
  };
  return T_ADD_SUITE("cluster_moves", NULL, NULL, tests);
}

/* Integration tests of ending a match cleanly against the real daemon: world.destroy with
 * "entities": true (the entities that only that world used end with it) and entity.destroy with
 * "entities" (a list, all or none, in order), their refusals, and the limit on the list. */
#include "command_fixtures.h"
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long ull;

/* The state of two worlds and some ids, as text. */
static char *state2(t_client *c, const char *w1, const char *w2, const uint64_t *ids, int n) {
  char *a = snapshot(c, w1, ids, n), *b = snapshot(c, w2, ids, n);
  text t = {0};
  text_addf(&t, "%s\n%s", a ? a : "-", b ? b : "-");
  free(a);
  free(b);
  return t.s;
}

/* A stale id is refused where an id is used. */
static void check_stale(t_client *c, const char *world, uint64_t e) {
  ERR(c, "NOT_FOUND", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (ull)e);
  ERR(c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"entity\":%llu}", world,
      (ull)e);
}

/* world.destroy with "entities": true: a car and its wheels, only in this world, end with it;
 * an entity that also has a transform in another world, and one with no transform at all, live
 * on. Without it (or with false), every entity lives on, as before. */
static void test_world_destroy_entities(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  new_world(&c, "wd_match");
  new_world(&c, "wd_lobby");
  uint64_t car = TF(&c, "wd_match", "\"name\":\"car\",\"t\":[5,0,0]");
  uint64_t fl = TF(&c, "wd_match", "\"parent\":%llu,\"name\":\"fl\"", (ull)car);
  uint64_t fr = TF(&c, "wd_match", "\"parent\":%llu,\"name\":\"fr\"", (ull)car);
  uint64_t player = TF(&c, "wd_match", "\"name\":\"player\"");
  CU_ASSERT_EQUAL(TF(&c, "wd_lobby", "\"entity\":%llu", (ull)player), player);
  uint64_t loose = new_entity(&c);
  double ents = info_num(&c, "entities");

  /* A value that is not a boolean changes nothing. */
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.destroy\",\"world\":\"wd_match\",\"entities\":1}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.destroy\",\"world\":\"wd_match\",\"entities\":[1]}");
  CU_ASSERT_EQUAL(listed_transforms(&c, "wd_match"), 4);

  cJSON *r = OK(&c, "{\"cmd\":\"world.destroy\",\"world\":\"wd_match\",\"entities\":true}");
  CHECK(t_resp_num(r, "entities_destroyed") == 3, r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(listed_transforms(&c, "wd_match"), -1);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents - 3);
  uint64_t gone[] = {car, fl, fr};
  for (int i = 0; i < 3; i++)
    check_stale(&c, "wd_lobby", gone[i]);
  /* The player lives on in the lobby; the loose entity too. */
  CU_ASSERT_EQUAL(parent_of(&c, "wd_lobby", player), 0);
  CU_ASSERT_EQUAL(TF(&c, "wd_lobby", "\"entity\":%llu", (ull)loose), loose);

  /* Without "entities" (or with false), entities live on, and the answer is as before. */
  new_world(&c, "wd_plain");
  uint64_t kept = TF0(&c, "wd_plain");
  ents = info_num(&c, "entities");
  r = OK(&c, "{\"cmd\":\"world.destroy\",\"world\":\"wd_plain\",\"entities\":false}");
  CHECK(!t_resp_has(r, "entities_destroyed"), r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents);
  new_world(&c, "wd_plain");
  CU_ASSERT_EQUAL(TF(&c, "wd_plain", "\"entity\":%llu", (ull)kept), kept);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"wd_plain\"}");
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents);

  /* A world whose entities are all used elsewhere ends alone: 0 destroyed. */
  new_world(&c, "wd_empty");
  CU_ASSERT_EQUAL(TF(&c, "wd_empty", "\"entity\":%llu", (ull)player), player);
  r = OK(&c, "{\"cmd\":\"world.destroy\",\"world\":\"wd_empty\",\"entities\":true}");
  CHECK(t_resp_num(r, "entities_destroyed") == 0, r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"world.destroy\",\"world\":\"wd_empty\",\"entities\":true}");

  /* The lobby last: the player and the loose one have no other world now. */
  r = OK(&c, "{\"cmd\":\"world.destroy\",\"world\":\"wd_lobby\",\"entities\":true}");
  CHECK(t_resp_num(r, "entities_destroyed") == 2, r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents - 2);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (ull)player);
  t_client_close(&c);
}

/* A subscriber of the world hears world_destroyed before the answer, as with a plain destroy. */
static void test_world_destroy_entities_subscriber(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  t_client_keep_events(&c);
  new_world(&c, "wd_sub");
  TF0(&c, "wd_sub");
  cJSON *r = OK(&c, "{\"cmd\":\"subscribe\",\"world\":\"wd_sub\"}");
  double sub = t_resp_num(r, "sub");
  cJSON_Delete(r);
  r = OK(&c, "{\"cmd\":\"world.destroy\",\"world\":\"wd_sub\",\"entities\":true}");
  CHECK(t_resp_num(r, "entities_destroyed") == 1, r);
  cJSON_Delete(r);
  bool ended = false;
  for (cJSON *ev; (ev = t_next_event(&c, 0));) {
    ended |= t_resp_str_is(ev, "event", "world_destroyed") && t_resp_num(ev, "sub") == sub;
    cJSON_Delete(ev);
  }
  CU_ASSERT(ended);
  t_client_close(&c);
}

/* entity.destroy with "entities": every one, from every world, as one destroy after another;
 * children left behind become roots keeping their world matrices. */
static void test_entity_destroy_list(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  new_world(&c, "el_a");
  new_world(&c, "el_b");
  uint64_t p = TF(&c, "el_a", "\"t\":[10,0,0],\"s\":2");
  uint64_t kid = TF(&c, "el_a", "\"parent\":%llu,\"t\":[1,0,0],\"name\":\"kid\"", (ull)p);
  CU_ASSERT_EQUAL(TF(&c, "el_b", "\"entity\":%llu", (ull)p), p);
  uint64_t q = TF0(&c, "el_b");
  uint64_t loose = new_entity(&c);
  float before[16], after[16];
  CU_ASSERT_TRUE(matrix(&c, "el_a", kid, "world", before));
  double ents = info_num(&c, "entities");
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,%llu,%llu]}", (ull)p, (ull)q, (ull)loose);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents - 3);
  CU_ASSERT_EQUAL(listed_transforms(&c, "el_a"), 1);
  CU_ASSERT_EQUAL(listed_transforms(&c, "el_b"), 0);
  CU_ASSERT_EQUAL(parent_of(&c, "el_a", kid), 0);
  CU_ASSERT_TRUE(matrix(&c, "el_a", kid, "world", after));
  CHECK_MAT(after, before, 1e-6f);
  uint64_t gone[] = {p, q, loose};
  for (int i = 0; i < 3; i++)
    check_stale(&c, "el_a", gone[i]);
  /* An empty list is fine and destroys nothing. */
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entities\":[]}");
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents - 3);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"el_a\",\"entities\":true}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"el_b\",\"entities\":true}");
  t_client_close(&c);
}

/* One id that cannot go fails the whole list, naming it, and nothing changes: an unknown or
 * stale id, one listed twice, a child that would become a root beside a root of its name. */
static void test_entity_destroy_list_atomic(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  new_world(&c, "ea_a");
  new_world(&c, "ea_b");
  uint64_t car = TF(&c, "ea_a", "\"name\":\"car\",\"t\":[3,0,0]");
  uint64_t fl = TF(&c, "ea_a", "\"parent\":%llu,\"name\":\"fl\",\"t\":[1,0,0]", (ull)car);
  uint64_t root_fl = TF(&c, "ea_a", "\"name\":\"fl\"");
  CU_ASSERT_EQUAL(TF(&c, "ea_b", "\"entity\":%llu", (ull)car), car);
  uint64_t other = TF0(&c, "ea_b");
  uint64_t stale = new_entity(&c);
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (ull)stale);
  uint64_t ids[] = {car, fl, root_fl, other};
  char *before = state2(&c, "ea_a", "ea_b", ids, 4);
  char *msg = NULL;

  ERR_MESSAGE(&c, "NOT_FOUND", &msg, "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,%llu,%llu]}",
              (ull)other, (ull)stale, (ull)car);
  char want[128];
  snprintf(want, sizeof want, "entity %llu does not exist", (ull)stale);
  CU_ASSERT(msg && strcmp(msg, want) == 0);
  free(msg);
  ERR_MESSAGE(&c, "BAD_REQUEST", &msg, "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,%llu,%llu]}",
              (ull)other, (ull)car, (ull)other);
  snprintf(want, sizeof want, "field \"entities\" names entity %llu twice", (ull)other);
  CU_ASSERT(msg && strcmp(msg, want) == 0);
  free(msg);
  /* The car first would make its wheel "fl" a root beside the root "fl". */
  ERR_MESSAGE(&c, "ALREADY_EXISTS", &msg,
              "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,%llu,%llu]}", (ull)other, (ull)car,
              (ull)fl);
  CU_ASSERT(msg && strstr(msg, "a child would become a root") != NULL);
  free(msg);
  char *after = state2(&c, "ea_a", "ea_b", ids, 4);
  CHECK_SAME(before, after);
  free(after);

  /* The list's form: either field, not both, not neither; an array of ids. */
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.destroy\",\"entity\":%llu,\"entities\":[%llu]}",
      (ull)other, (ull)other);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.destroy\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.destroy\",\"entities\":%llu}", (ull)other);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,0]}", (ull)other);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,\"x\"]}", (ull)other);
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"entity.destroy\",\"entities\":[1.5]}");
  after = state2(&c, "ea_a", "ea_b", ids, 4);
  CHECK_SAME(before, after);
  free(after);
  free(before);

  /* The wheel first, then the car: in that order it goes through. */
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,%llu,%llu]}", (ull)other, (ull)fl,
      (ull)car);
  CU_ASSERT_EQUAL(listed_transforms(&c, "ea_a"), 1);
  CU_ASSERT_EQUAL(listed_transforms(&c, "ea_b"), 0);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"ea_a\",\"entities\":true}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"ea_b\"}");
  t_client_close(&c);
}

/* The list holds at most as many ids as entity.create makes at once (100,000): more is LIMIT,
 * counted against entity_create; exactly that many go in one command. */
static void test_entity_destroy_list_limit(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  enum { MAX = 100000 };
  cJSON *r = OK(&c, "{\"cmd\":\"entity.create\",\"count\":%d}", MAX);
  uint64_t *ids = malloc(sizeof *ids * MAX);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
  CU_ASSERT_EQUAL(ids_of(r, "entities", ids, MAX), MAX);
  cJSON_Delete(r);
  double ents = info_num(&c, "entities");
  r = OK(&c, "{\"cmd\":\"info\"}");
  const cJSON *limits = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(r, "metrics"), "limit_rejections_total");
  double hits = t_resp_num(limits, "entity_create");
  cJSON_Delete(r);

  text line = {0};
  text_addf(&line, "{\"cmd\":\"entity.destroy\",\"entities\":[");
  for (int i = 0; i < MAX; i++)
    text_addf(&line, "%s%llu", i ? "," : "", (ull)ids[i]);
  size_t full = line.len;
  text_addf(&line, ",%llu]}", (ull)ids[0]);
  char *msg = NULL;
  ERR_MESSAGE(&c, "LIMIT", &msg, "%s", line.s);
  CU_ASSERT(msg && strcmp(msg, "field \"entities\" holds at most 100000 ids") == 0);
  free(msg);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents);
  r = OK(&c, "{\"cmd\":\"info\"}");
  limits = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "metrics"),
                                            "limit_rejections_total");
  CHECK(t_resp_num(limits, "entity_create") == hits + 1, r);
  cJSON_Delete(r);

  line.len = full;
  text_add(&line, "]}", 2);
  OKD(&c, "%s", line.s);
  CU_ASSERT_EQUAL(info_num(&c, "entities"), ents - MAX);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (ull)ids[MAX - 1]);
  text_free(&line);
  free(ids);
  t_client_close(&c);
}

int t_register_daemon_commands_destroy(void) {
  static const t_test tests[] = {
      {"world.destroy with entities: those only it used end with it", test_world_destroy_entities},
      {"world.destroy with entities: subscribers hear world_destroyed first",
       test_world_destroy_entities_subscriber},
      {"entity.destroy with entities: every one, from every world", test_entity_destroy_list},
      {"entity.destroy with entities: all or none", test_entity_destroy_list_atomic},
      {"entity.destroy with entities: at most 100000 ids", test_entity_destroy_list_limit},
  };
  return T_ADD_SUITE("daemon_commands_destroy", commands_suite_init, commands_suite_clean, tests);
}

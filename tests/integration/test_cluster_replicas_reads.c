/* Follower reads (--replicas N >= 1): after hello with "follower_reads": true, a daemon that
 * follows a world's group answers transform.get, .children, .find, .relative and subscribe from
 * its copy; a command that changes anything still answers MOVED to the owner. Three daemons,
 * each on a data directory of its own, a real etcd. */
#include "client_fixtures.h"
#include "cluster_fixtures.h"
#include "harness.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const replicas_1[] = {"--replicas", "1", NULL};
static const char *const replicas_2[] = {"--replicas", "2", NULL};

/* The first follower named by the group's replicas key once it names want of them (15 s at
 * most), as a node index; -1 when it never did. */
static int follower_of(cluster *k, const char *group, int want) {
  char key[96];
  snprintf(key, sizeof key, "/scened/replicas/%s", group);
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    char *text = etcd_get(&k->e, key, NULL);
    cJSON *v = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, "followers");
    const char *name =
        cJSON_IsArray(list) && cJSON_GetArraySize(list) == want && cJSON_IsString(list->child)
            ? list->child->valuestring
            : NULL;
    int found = -1;
    for (int i = 0; name && i < NODES; i++)
      if (strcmp(name, node_name(i)) == 0)
        found = i;
    cJSON_Delete(v);
    if (found >= 0)
      return found;
  }
  return -1;
}

/* A cluster of three daemons with --replicas 1 (or 2), and a world W made on one of them with
 * transforms: a root "car" (t 1,2,3) with two children "wheel" and "door", and a root "road".
 * The owner's, the follower's and the third daemon's indexes (with 2, the third follows too). */
typedef struct setup {
  cluster k;
  int owner, follower, third;
  unsigned long long car, wheel, door, road;
} setup;

static unsigned long long create(setup *s, const char *world, const char *fields) {
  cJSON *r = t_client_call(&s->k.c[s->owner], "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s}",
                           world, fields);
  unsigned long long e = t_resp_id(r, "entity");
  if (!e)
    t_report("transform.create failed", r);
  cJSON_Delete(r);
  return e;
}

static bool setup_start_with(setup *s, const char *world, const char *group, int replicas) {
  memset(s, 0, sizeof *s);
  s->k.own_data = true;
  s->k.extra = replicas == 2 ? replicas_2 : replicas_1;
  if (!cluster_start_prepared(&s->k))
    return false;
  char line[160];
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  cJSON *r = wait_ok_anywhere(&s->k, line, 15000, &s->owner);
  cJSON_Delete(r);
  if (!r) {
    CU_FAIL("world.create answered ok");
    return false;
  }
  s->follower = follower_of(&s->k, group, replicas);
  if (s->follower < 0 || s->follower == s->owner) {
    CU_FAIL("the replicas key names a follower other than the owner");
    return false;
  }
  s->third = 3 - s->owner - s->follower;
  printf("\n  owner %s, follower %s, third %s\n", node_name(s->owner), node_name(s->follower),
         node_name(s->third));
  char fields[160];
  s->car = create(s, world, ",\"name\":\"car\",\"t\":[1,2,3]");
  snprintf(fields, sizeof fields, ",\"name\":\"wheel\",\"parent\":%llu,\"t\":[0,0,1]", s->car);
  s->wheel = create(s, world, fields);
  snprintf(fields, sizeof fields, ",\"name\":\"door\",\"parent\":%llu,\"r\":[0,0.6,0,0.8]", s->car);
  s->door = create(s, world, fields);
  s->road = create(s, world, ",\"name\":\"road\",\"s\":[10,1,10]");
  return s->car && s->wheel && s->door && s->road;
}

/* With --replicas 1: the third daemon follows nothing of the group. */
static bool setup_start(setup *s, const char *world, const char *group) {
  return setup_start_with(s, world, group, 1);
}

/* A new connection to daemon i; with follower_reads, hello asks for them (and says so). */
static bool connect_reader(setup *s, int i, t_client *c, bool follower_reads) {
  if (t_client_connect(c, s->k.d[i].port) != 0) {
    CU_FAIL("connected");
    return false;
  }
  if (!follower_reads)
    return true;
  cJSON *r = t_client_call(c, "{\"cmd\":\"hello\",\"follower_reads\":true}");
  bool ok = t_resp_ok(r) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "follower_reads"));
  if (!ok)
    t_report("hello with follower_reads", r);
  CU_ASSERT(ok);
  cJSON_Delete(r);
  return ok;
}

/* The response to line, printed without its "tick" (each daemon's clock: a follower's copy
 * has its own), to compare answers. */
static char *answer_text(t_client *c, const char *line) {
  cJSON *r = t_client_call(c, "%s", line);
  cJSON_DeleteItemFromObjectCaseSensitive(r, "tick");
  char *text = r ? cJSON_PrintUnformatted(r) : NULL;
  cJSON_Delete(r);
  return text;
}

/* Whether line, sent to c, is answered MOVED naming the owner. */
static bool moved_to_owner(setup *s, t_client *c, const char *line) {
  cJSON *r = t_client_call(c, "%s", line);
  const cJSON *e = error_of(r);
  bool ok = strcmp(t_resp_code(r), "MOVED") == 0 &&
            strcmp(t_resp_str(e, "node"), node_name(s->owner)) == 0;
  if (!ok)
    t_report("not MOVED to the owner", r);
  cJSON_Delete(r);
  return ok;
}

/* The reads of the contract, on world W of setup s. */
static int reads_of(const setup *s, const char *w, char lines[4][192]) {
  snprintf(lines[0], 192,
           "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu,\"trs\":true}", w, s->door);
  snprintf(lines[1], 192, "{\"cmd\":\"transform.children\",\"world\":\"%s\",\"entity\":%llu}", w,
           s->car);
  snprintf(lines[2], 192, "{\"cmd\":\"transform.find\",\"world\":\"%s\",\"path\":\"car/wheel\"}",
           w);
  snprintf(lines[3], 192,
           "{\"cmd\":\"transform.relative\",\"world\":\"%s\",\"entity\":%llu,\"to\":%llu}", w,
           s->wheel, s->road);
  return 4;
}

/* The four reads, on a follower with follower_reads, are answered ok and as the owner answers
 * them once the follower has caught up; without follower_reads, or on a daemon that does not
 * follow the group, MOVED; a write with follower_reads is MOVED too; hello's follower_reads
 * is strict and can be turned off. */
static void test_reads(void) {
  setup s;
  if (!setup_start(&s, "fr.main", "fr")) {
    cluster_stop(&s.k);
    return;
  }
  char lines[4][192];
  int n = reads_of(&s, "fr.main", lines);
  t_client plain, reader, third;
  CU_ASSERT_FATAL(connect_reader(&s, s.follower, &plain, false));
  CU_ASSERT_FATAL(connect_reader(&s, s.follower, &reader, true));
  CU_ASSERT_FATAL(connect_reader(&s, s.third, &third, true));
  for (int i = 0; i < n; i++) {
    CU_ASSERT(moved_to_owner(&s, &plain, lines[i]));
    CU_ASSERT(moved_to_owner(&s, &third, lines[i]));
  }
  /* Equal to the owner's answers once the follower has applied the owner's records. */
  int equal = 0;
  for (long deadline = t_now_ms() + 15000; equal < n && t_now_ms() < deadline; t_sleep_ms(20)) {
    equal = 0;
    for (int i = 0; i < n; i++) {
      char *mine = answer_text(&reader, lines[i]);
      char *owners = answer_text(&s.k.c[s.owner], lines[i]);
      if (mine && owners && strcmp(mine, owners) == 0 && strstr(mine, "\"ok\":true"))
        equal++;
      else if (t_now_ms() + 40 >= deadline)
        printf("  follower: %s\n  owner:    %s\n", mine ? mine : "(none)",
               owners ? owners : "(none)");
      free(mine);
      free(owners);
    }
  }
  printf("  %d of %d reads answered by the follower as by the owner\n", equal, n);
  CU_ASSERT_EQUAL(equal, n);

  /* A change made on the owner reaches the follower's answers. */
  cJSON *r = t_client_call(&s.k.c[s.owner],
                           "{\"cmd\":\"transform.set_local\",\"world\":\"fr.main\",\"entity\":%llu,"
                           "\"t\":[7,8,9]}",
                           s.car);
  CU_ASSERT(t_resp_ok(r));
  cJSON_Delete(r);
  bool seen = false;
  for (long deadline = t_now_ms() + 15000; !seen && t_now_ms() < deadline; t_sleep_ms(20)) {
    r = t_client_call(&reader, "{\"cmd\":\"transform.get\",\"world\":\"fr.main\",\"entity\":%llu}",
                      s.wheel);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(r, "world");
    seen = cJSON_GetArraySize(w) == 16 && cJSON_GetArrayItem(w, 12)->valuedouble == 7 &&
           cJSON_GetArrayItem(w, 13)->valuedouble == 8 &&
           cJSON_GetArrayItem(w, 14)->valuedouble == 10;
    cJSON_Delete(r);
  }
  CU_ASSERT(seen);

  /* Writes with follower_reads still go to the owner. */
  char write[256];
  snprintf(write, sizeof write,
           "{\"cmd\":\"transform.set_local\",\"world\":\"fr.main\",\"entity\":%llu,"
           "\"t\":[0,0,0]}",
           s.car);
  CU_ASSERT(moved_to_owner(&s, &reader, write));
  CU_ASSERT(moved_to_owner(&s, &reader, "{\"cmd\":\"transform.create\",\"world\":\"fr.main\"}"));
  snprintf(write, sizeof write,
           "{\"cmd\":\"transform.rename\",\"world\":\"fr.main\",\"entity\":%llu,\"name\":\"x\"}",
           s.road);
  CU_ASSERT(moved_to_owner(&s, &reader, write));
  CU_ASSERT(moved_to_owner(&s, &reader,
                           "{\"cmd\":\"batch\",\"world\":\"fr.main\",\"ops\":[{\"cmd\":"
                           "\"transform.create\"}]}"));
  CU_ASSERT(moved_to_owner(&s, &reader, "{\"cmd\":\"world.destroy\",\"world\":\"fr.main\"}"));
  CU_ASSERT(moved_to_owner(&s, &reader, "{\"cmd\":\"entity.create\",\"world\":\"fr.main\"}"));
  r = t_client_call(&s.k.c[s.owner], "{\"cmd\":\"transform.find\",\"world\":\"fr.main\","
                                     "\"path\":\"x\"}");
  CU_ASSERT_STRING_EQUAL(t_resp_code(r), "NOT_FOUND"); /* the rename did not run */
  cJSON_Delete(r);

  /* hello's field is strict, and false turns it off (a hello without it keeps it). */
  r = t_client_call(&reader, "{\"cmd\":\"hello\",\"follower_reads\":\"yes\"}");
  CU_ASSERT_STRING_EQUAL(t_resp_code(r), "BAD_REQUEST");
  cJSON_Delete(r);
  r = t_client_call(&reader, "{\"cmd\":\"hello\"}");
  CU_ASSERT(t_resp_ok(r) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "follower_reads")));
  cJSON_Delete(r);
  r = t_client_call(&reader, "%s", lines[0]);
  CU_ASSERT(t_resp_ok(r));
  cJSON_Delete(r);
  r = t_client_call(&reader, "{\"cmd\":\"hello\",\"follower_reads\":false}");
  CU_ASSERT(t_resp_ok(r) && !t_resp_has(r, "follower_reads"));
  cJSON_Delete(r);
  CU_ASSERT(moved_to_owner(&s, &reader, lines[0]));
  t_client_close(&plain);
  t_client_close(&reader);
  t_client_close(&third);
  cluster_stop(&s.k);
}

/* The translation of entity e's world matrix in a json frame's "set", or false. */
static bool frame_translation(const cJSON *ev, unsigned long long e, double t[3]) {
  const cJSON *item;
  cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(ev, "set")) {
    if (t_resp_id(item, "e") != e)
      continue;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(item, "m");
    if (cJSON_GetArraySize(m) != 16)
      return false;
    for (int i = 0; i < 3; i++)
      t[i] = cJSON_GetArrayItem(m, 12 + i)->valuedouble;
    return true;
  }
  return false;
}

static bool is_event(const cJSON *ev, const char *name) { return t_resp_str_is(ev, "event", name); }

/* Reads c's events until one that pred accepts (true), the deadline, or the end of the
 * subscription (false, the event in *end when end is not NULL). */
static bool wait_event(t_client *c, long ms, bool (*pred)(const cJSON *, void *), void *ud,
                       cJSON **end) {
  for (long deadline = t_now_ms() + ms; t_now_ms() < deadline;) {
    cJSON *ev = t_client_recv_json(c, (int)(deadline - t_now_ms()));
    if (!ev)
      continue;
    bool hit = pred(ev, ud);
    if (!hit && end && !is_event(ev, "frame")) {
      *end = ev;
      return false;
    }
    cJSON_Delete(ev);
    if (hit)
      return true;
  }
  return false;
}

typedef struct want_at {
  unsigned long long e;
  double t[3];
  bool full;
} want_at;

static bool frame_with(const cJSON *ev, void *ud) {
  want_at *w = ud;
  double t[3];
  if (!is_event(ev, "frame") || (w->full && !cJSON_IsTrue(cJSON_GetObjectItem(ev, "full"))))
    return false;
  return frame_translation(ev, w->e, t) && fabs(t[0] - w->t[0]) < 1e-5 &&
         fabs(t[1] - w->t[1]) < 1e-5 && fabs(t[2] - w->t[2]) < 1e-5;
}

/* subscribe to w on a follower with follower_reads: until the follower follows the group (its
 * replicas key may reach it after the test read it: MOVED) and has applied world.create
 * (NOT_FOUND). */
static bool subscribe_on(t_client *c, const char *w) {
  cJSON *r = NULL;
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    cJSON_Delete(r);
    r = t_client_call(c, "{\"cmd\":\"subscribe\",\"world\":\"%s\"}", w);
    if (t_resp_ok(r) ||
        (strcmp(t_resp_code(r), "NOT_FOUND") != 0 && strcmp(t_resp_code(r), "MOVED") != 0))
      break;
  }
  bool ok = t_resp_ok(r);
  if (!ok)
    t_report("subscribe on the follower", r);
  cJSON_Delete(r);
  return ok;
}

/* transform.set_local sent to daemon at, answered ok there (no report otherwise). */
static bool set_local_quiet(setup *s, int at, const char *w, unsigned long long e, int x) {
  cJSON *r = t_client_call(
      &s->k.c[at],
      "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[%d,0,0]}", w, e, x);
  bool ok = t_resp_ok(r);
  cJSON_Delete(r);
  return ok;
}

static bool set_local(setup *s, int at, const char *w, unsigned long long e, int x) {
  cJSON *r = t_client_call(
      &s->k.c[at],
      "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,\"t\":[%d,0,0]}", w, e, x);
  bool ok = t_resp_ok(r);
  if (!ok)
    t_report("transform.set_local", r);
  cJSON_Delete(r);
  return ok;
}

/* A subscription on the follower (with follower_reads) gets a full frame of the copy, then the
 * changes made on the owner as they are applied; world.destroy on the owner ends it with
 * world_destroyed, as on the owner itself. */
static void test_subscribe(void) {
  setup s;
  if (!setup_start(&s, "fs.main", "fs")) {
    cluster_stop(&s.k);
    return;
  }
  t_client plain, reader;
  CU_ASSERT_FATAL(connect_reader(&s, s.follower, &plain, false));
  CU_ASSERT_FATAL(connect_reader(&s, s.follower, &reader, true));
  CU_ASSERT(moved_to_owner(&s, &plain, "{\"cmd\":\"subscribe\",\"world\":\"fs.main\"}"));
  CU_ASSERT_FATAL(subscribe_on(&reader, "fs.main"));
  /* The first event is a full frame; the road (created last) is in it, or in a later frame
   * once the follower has applied its record. */
  want_at road = {s.road, {0, 0, 0}, false};
  cJSON *r = t_client_recv_json(&reader, 15000);
  bool first_full =
      is_event(r, "frame") && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "full"));
  if (!first_full)
    t_report("the first event of the follower's subscription", r);
  CU_ASSERT(first_full);
  bool got = frame_with(r, &road);
  cJSON_Delete(r);
  cJSON *end = NULL;
  if (!got && !(got = wait_event(&reader, 15000, frame_with, &road, &end)))
    t_report("no frame of the road from the follower", end);
  CU_ASSERT(got);
  cJSON_Delete(end);
  end = NULL;
  /* Changes on the owner: each one arrives in a frame of the follower's subscription. */
  int arrived = 0;
  for (int x = 1; x <= 5; x++) {
    CU_ASSERT_FATAL(set_local(&s, s.owner, "fs.main", s.car, 100 * x));
    want_at car = {s.wheel, {100.0 * x, 0, 1}, false};
    if (wait_event(&reader, 15000, frame_with, &car, &end))
      arrived++;
    else
      t_report("the change did not arrive", end);
    cJSON_Delete(end);
    end = NULL;
  }
  printf("  %d of 5 changes made on the owner arrived in the follower's frames\n", arrived);
  CU_ASSERT_EQUAL(arrived, 5);
  /* A second subscription starts with a full frame of the copy as it is now. */
  r = t_client_call(&plain, "{\"cmd\":\"hello\",\"follower_reads\":true}");
  CU_ASSERT(t_resp_ok(r));
  cJSON_Delete(r);
  r = t_client_call(&plain, "{\"cmd\":\"subscribe\",\"world\":\"fs.main\"}");
  CU_ASSERT(t_resp_ok(r));
  if (!t_resp_ok(r))
    t_report("a second subscription on the follower", r);
  cJSON_Delete(r);
  want_at full = {s.wheel, {500, 0, 1}, true};
  CU_ASSERT(wait_event(&plain, 15000, frame_with, &full, NULL));
  /* The world destroyed on its owner: the follower's subscribers are told. */
  r = t_client_call(&s.k.c[s.owner], "{\"cmd\":\"world.destroy\",\"world\":\"fs.main\"}");
  CU_ASSERT(t_resp_ok(r));
  cJSON_Delete(r);
  want_at never = {0, {0, 0, 0}, false};
  end = NULL;
  CU_ASSERT(!wait_event(&reader, 15000, frame_with, &never, &end));
  CU_ASSERT(is_event(end, "world_destroyed"));
  if (!is_event(end, "world_destroyed"))
    t_report("not the end expected", end);
  cJSON_Delete(end);
  t_client_close(&plain);
  t_client_close(&reader);
  cluster_stop(&s.k);
}

/* kill -9 of the owner: the in-sync follower takes over, and a subscription made on it with
 * follower_reads goes on (its daemon now owns the world), with the changes written there. */
static void test_subscription_through_takeover(void) {
  setup s;
  if (!setup_start(&s, "ft.main", "ft")) {
    cluster_stop(&s.k);
    return;
  }
  t_client reader;
  CU_ASSERT_FATAL(connect_reader(&s, s.follower, &reader, true));
  CU_ASSERT_FATAL(subscribe_on(&reader, "ft.main"));
  cJSON *r;
  /* Once the follower is in sync (a sync write's ok then means it has the write), the owner
   * goes. */
  CU_ASSERT_FATAL(set_local(&s, s.owner, "ft.main", s.car, 42));
  want_at car = {s.wheel, {42, 0, 1}, false};
  CU_ASSERT_FATAL(wait_event(&reader, 15000, frame_with, &car, NULL));
  bool insync = false;
  for (long deadline = t_now_ms() + 15000; !insync && t_now_ms() < deadline; t_sleep_ms(20)) {
    char *text = etcd_get(&s.k.e, "/scened/replicas/ft", NULL);
    insync = text && strstr(text, "\"insync\":[\"") != NULL;
    free(text);
  }
  CU_ASSERT_FATAL(insync);
  node_stop(&s.k, s.owner, SIGKILL);
  /* The follower serves it: a write there is answered ok (not MOVED) once it has claimed it. */
  bool owned = false;
  for (long deadline = t_now_ms() + 15000; !owned && t_now_ms() < deadline; t_sleep_ms(50)) {
    r = t_client_call(&s.k.c[s.follower],
                      "{\"cmd\":\"transform.set_local\",\"world\":\"ft.main\",\"entity\":%llu,"
                      "\"t\":[77,0,0]}",
                      s.car);
    owned = t_resp_ok(r);
    cJSON_Delete(r);
  }
  CU_ASSERT_FATAL(owned);
  want_at later = {s.wheel, {77, 0, 1}, false};
  cJSON *end = NULL;
  bool got = wait_event(&reader, 15000, frame_with, &later, &end);
  if (!got)
    t_report("the subscription did not go on after the takeover", end);
  CU_ASSERT(got);
  cJSON_Delete(end);
  t_client_close(&reader);
  cluster_stop(&s.k);
}

/* Runs scenectl against daemon i with args; its exit code, stdout in out (caller frees). */
static int ctl_at(setup *s, int i, char **out, const char *const *args) {
  char port[32];
  snprintf(port, sizeof port, "SCENED_PORT=%d", s->k.d[i].port);
  const char *const env[] = {"SCENED_HOST=127.0.0.1", port, NULL};
  t_proc p;
  int code = ctl_run(&p, env, NULL, 0, args);
  *out = strdup(text_str(&p.out));
  t_proc_free(&p);
  return code;
}

/* The C library with follower_reads and scenectl --follower-reads read from the follower while
 * the owner is stopped (SIGSTOP, for less than the lease's TTL), where without it they follow
 * MOVED to the stopped owner and time out; a write through the library goes to the owner. */
static void test_clients(void) {
  setup s;
  if (!setup_start(&s, "fc.main", "fc")) {
    cluster_stop(&s.k);
    return;
  }
  char find[128];
  snprintf(find, sizeof find,
           "{\"cmd\":\"transform.find\",\"world\":\"fc.main\",\"path\":\"road\"}");
  /* Until the follower follows the group and has applied the road. */
  t_client probe;
  CU_ASSERT_FATAL(connect_reader(&s, s.follower, &probe, true));
  bool caught_up = false;
  for (long deadline = t_now_ms() + 15000; !caught_up && t_now_ms() < deadline; t_sleep_ms(20)) {
    cJSON *r = t_client_call(&probe, "%s", find);
    caught_up = t_resp_id(r, "entity") == s.road;
    cJSON_Delete(r);
  }
  t_client_close(&probe);
  CU_ASSERT_FATAL(caught_up);
  /* Reads with follower reads wait as long as they need; those that go to the stopped owner
   * give up after 300 ms. */
  scn_cli_options o = {.host = "127.0.0.1",
                       .port = s.k.d[s.follower].port,
                       .timeout_ms = 10000,
                       .follower_reads = true};
  char err[256];
  scn_cli *c = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_FATAL(c != NULL);
  scn_cli *writer = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_FATAL(writer != NULL);
  o.follower_reads = false;
  o.timeout_ms = 300;
  scn_cli *plain = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_FATAL(plain != NULL);
  cJSON *r = NULL;
  CU_ASSERT_EQUAL(scn_cli_call_line(c, find, &r), SCN_CLI_OK);
  CU_ASSERT_EQUAL(t_resp_id(r, "entity"), s.road);
  cJSON_Delete(r);
  char follower_addr[64], owner_addr[64];
  snprintf(follower_addr, sizeof follower_addr, "127.0.0.1:%d", s.k.d[s.follower].port);
  snprintf(owner_addr, sizeof owner_addr, "127.0.0.1:%d", s.k.d[s.owner].port);
  CU_ASSERT_STRING_EQUAL(scn_cli_addr(c), follower_addr);

  /* A write with follower reads: MOVED to the owner, followed. */
  char write[160];
  snprintf(write, sizeof write,
           "{\"cmd\":\"transform.set_local\",\"world\":\"fc.main\",\"entity\":%llu,\"t\":[3,3,3]}",
           s.road);
  r = NULL;
  CU_ASSERT_EQUAL(scn_cli_call_line(writer, write, &r), SCN_CLI_OK);
  cJSON_Delete(r);
  CU_ASSERT_STRING_EQUAL(scn_cli_addr(writer), owner_addr);
  scn_cli_close(writer);

  /* The owner stopped (for less than the lease's TTL when the machine keeps up). */
  CU_ASSERT_FATAL(kill(s.k.d[s.owner].pid, SIGSTOP) == 0);
  long stopped = t_now_ms();
  r = NULL;
  int rc = scn_cli_call_line(c, find, &r);
  bool lib_read = rc == SCN_CLI_OK && t_resp_id(r, "entity") == s.road;
  cJSON_Delete(r);
  r = NULL;
  int plain_rc = scn_cli_call_line(plain, find, &r);
  cJSON_Delete(r);
  char *out = NULL, *plain_out = NULL;
  int code = ctl_at(&s, s.follower, &out,
                    (const char *const[]){"--follower-reads", "transform.find", "world=fc.main",
                                          "path=road", NULL});
  int plain_code = ctl_at(&s, s.follower, &plain_out,
                          (const char *const[]){"--timeout", "300", "transform.find",
                                                "world=fc.main", "path=road", NULL});
  CU_ASSERT(kill(s.k.d[s.owner].pid, SIGCONT) == 0);
  printf("  owner stopped for %ld ms: the library %s, scenectl exit %d (%s), without "
         "follower reads %d and exit %d\n",
         t_now_ms() - stopped, lib_read ? "read" : "did not read", code, out ? out : "", plain_rc,
         plain_code);
  CU_ASSERT(lib_read);
  CU_ASSERT_STRING_EQUAL(scn_cli_addr(c), follower_addr);
  CU_ASSERT_NOT_EQUAL(plain_rc, SCN_CLI_OK);
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, "\"entity\"") : NULL);
  CU_ASSERT_EQUAL(plain_code, 2);
  free(out);
  free(plain_out);
  scn_cli_close(c);
  scn_cli_close(plain);
  cluster_stop(&s.k);
}

/* With --replicas 2, subscriptions on both followers, then kill -9 of the owner: on the
 * follower that takes the group over the subscription goes on with the writes made there; on
 * the other it is never left behind: it ends with moved naming the new owner, or goes on with
 * the new owner's writes (a follower that keeps its copy across the new epoch). */
static void test_followers_through_takeover(void) {
  setup s;
  if (!setup_start_with(&s, "fk.main", "fk", 2)) {
    cluster_stop(&s.k);
    return;
  }
  int followers[2] = {s.follower, s.third};
  t_client reader[2];
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_FATAL(connect_reader(&s, followers[i], &reader[i], true));
    CU_ASSERT_FATAL(subscribe_on(&reader[i], "fk.main"));
  }
  CU_ASSERT_FATAL(set_local(&s, s.owner, "fk.main", s.car, 42));
  want_at car = {s.wheel, {42, 0, 1}, false};
  for (int i = 0; i < 2; i++)
    CU_ASSERT_FATAL(wait_event(&reader[i], 15000, frame_with, &car, NULL));
  bool both = false;
  for (long deadline = t_now_ms() + 15000; !both && t_now_ms() < deadline; t_sleep_ms(20)) {
    char *text = etcd_get(&s.k.e, "/scened/replicas/fk", NULL);
    cJSON *v = text ? cJSON_Parse(text) : NULL;
    both = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(v, "insync")) == 2;
    cJSON_Delete(v);
    free(text);
  }
  CU_ASSERT_FATAL(both);
  node_stop(&s.k, s.owner, SIGKILL);
  int owner = -1;
  for (long deadline = t_now_ms() + 15000; owner < 0 && t_now_ms() < deadline; t_sleep_ms(50))
    for (int i = 0; i < 2 && owner < 0; i++)
      if (set_local_quiet(&s, followers[i], "fk.main", s.car, 77))
        owner = i;
  CU_ASSERT_FATAL(owner >= 0);
  printf("  %s took the group over\n", node_name(followers[owner]));
  want_at later = {s.wheel, {77, 0, 1}, false};
  cJSON *end = NULL;
  bool got = wait_event(&reader[owner], 15000, frame_with, &later, &end);
  if (!got)
    t_report("the new owner's subscription did not go on", end);
  CU_ASSERT(got);
  cJSON_Delete(end);
  end = NULL;
  int other = 1 - owner;
  got = wait_event(&reader[other], 15000, frame_with, &later, &end);
  bool moved =
      !got && is_event(end, "moved") && t_resp_str_is(end, "node", node_name(followers[owner]));
  printf("  the other follower's subscription %s\n", got     ? "went on with the new owner's writes"
                                                     : moved ? "ended with moved"
                                                             : "stalled");
  if (!got && !moved)
    t_report("the other follower's subscription", end);
  CU_ASSERT(got || moved);
  cJSON_Delete(end);
  for (int i = 0; i < 2; i++)
    t_client_close(&reader[i]);
  cluster_stop(&s.k);
}

int t_register_cluster_replicas_reads(void) {
  static const t_test tests[] = {
      {"follower reads: get, children, find, relative from the copy", test_reads},
      {"follower reads: a subscription on the follower", test_subscribe},
      {"follower reads: a subscription through a takeover", test_subscription_through_takeover},
      {"follower reads: the C library and scenectl", test_clients},
      {"follower reads: two followers' subscriptions through a takeover",
       test_followers_through_takeover},
  };
  return T_ADD_SUITE("cluster_replicas_reads", NULL, NULL, tests);
}

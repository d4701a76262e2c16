/* The cluster (--cluster) against a real etcd, routing: MOVED from every command naming a world,
 * scenectl and the Python client against a non-owner, placement with auto, and entity ids
 * unique across the cluster. Every test starts etcd and three daemons and stops exactly what
 * it started (the runner kills them when a test overruns); waits have deadlines, nothing
 * sleeps a fixed time to let something happen. */
#include "cluster_fixtures.h"
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- routing --------------------------------------------------------------------------------- */

/* Every command that names a world answers MOVED on a daemon that does not own its group,
 * naming the owner and its address; the owner runs them. */
static void test_routing_moved(void) {
  START_CLUSTER(k, NULL);
  cJSON *r = OK(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"g1.main\"}");
  CU_ASSERT(t_resp_str_is(r, "node", "n0"));
  cJSON_Delete(r);
  r = OK(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"g1.main\",\"name\":\"a\"}");
  unsigned long long e = t_resp_id(r, "entity");
  cJSON_Delete(r);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", k.d[0].port);
  const char *fmts[] = {
      "{\"cmd\":\"world.create\",\"world\":\"g1.other\"}",
      "{\"cmd\":\"world.destroy\",\"world\":\"g1.main\"}",
      "{\"cmd\":\"transform.create\",\"world\":\"g1.main\"}",
      "{\"cmd\":\"transform.destroy\",\"world\":\"g1.main\",\"entity\":%llu}",
      "{\"cmd\":\"transform.link\",\"world\":\"g1.main\",\"entity\":%llu,\"parent\":null}",
      "{\"cmd\":\"transform.unlink\",\"world\":\"g1.main\",\"entity\":%llu}",
      "{\"cmd\":\"transform.set_local\",\"world\":\"g1.main\",\"entity\":%llu,\"t\":[1,2,3]}",
      "{\"cmd\":\"transform.set_world\",\"world\":\"g1.main\",\"entity\":%llu,\"t\":[1,2,3]}",
      "{\"cmd\":\"transform.get\",\"world\":\"g1.main\",\"entity\":%llu}",
      "{\"cmd\":\"transform.children\",\"world\":\"g1.main\",\"entity\":%llu}",
      "{\"cmd\":\"transform.rename\",\"world\":\"g1.main\",\"entity\":%llu,\"name\":\"b\"}",
      "{\"cmd\":\"transform.find\",\"world\":\"g1.main\",\"path\":\"a\"}",
      "{\"cmd\":\"transform.relative\",\"world\":\"g1.main\",\"entity\":%llu,\"to\":%llu}",
      "{\"cmd\":\"batch\",\"world\":\"g1.main\",\"ops\":[]}",
      "{\"cmd\":\"subscribe\",\"world\":\"g1.main\"}",
      "{\"cmd\":\"entity.create\",\"world\":\"g1.main\"}",
      "{\"cmd\":\"world.move\",\"world\":\"g1.main\",\"to\":\"n1\"}",
  };
  for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
    for (int i = 1; i < NODES; i++) {
      char line[300];
      snprintf(line, sizeof line, fmts[f], e, e);
      r = CALL(&k.c[i], "%s", line);
      const cJSON *err = error_of(r);
      bool moved = t_resp_str_is(err, "code", "MOVED") && t_resp_str_is(err, "node", "n0") &&
                   t_resp_str_is(err, "addr", addr);
      if (!CHECK(moved, r))
        t_report_text("request", line);
      cJSON_Delete(r);
    }
  }
  /* The owner runs them. */
  OKD(&k.c[0], "{\"cmd\":\"transform.get\",\"world\":\"g1.main\",\"entity\":%llu}", e);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"g1.other\"}");
  r = OK(&k.c[0], "{\"cmd\":\"entity.create\",\"world\":\"g1.main\",\"count\":2}");
  cJSON_Delete(r);
  /* A new group is created where it is asked for; a world nobody has is NOT_FOUND everywhere
   * (each daemon asks etcd first); a group created an instant ago elsewhere is MOVED. */
  for (int i = 0; i < NODES; i++) {
    ERR(&k.c[i], "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"nope\",\"entity\":1}");
    char line[128];
    snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"fresh%d\"}", i);
    r = OK(&k.c[i], "%s", line);
    CU_ASSERT(t_resp_str_is(r, "node", node_name(i)));
    cJSON_Delete(r);
    int other = (i + 1) % NODES;
    r = CALL(&k.c[other], "{\"cmd\":\"transform.find\",\"world\":\"fresh%d\",\"path\":\"x\"}", i);
    CHECK(t_resp_str_is(error_of(r), "code", "MOVED") &&
              t_resp_str_is(error_of(r), "node", node_name(i)),
          r);
    cJSON_Delete(r);
  }
  /* world.list with cluster: every world with its node; info names the node. */
  long deadline = t_now_ms() + 5000;
  bool listed = false;
  while (!listed && t_now_ms() < deadline) {
    r = OK(&k.c[2], "{\"cmd\":\"world.list\",\"cluster\":true}");
    const cJSON *w, *worlds = cJSON_GetObjectItemCaseSensitive(r, "worlds");
    int found = 0;
    cJSON_ArrayForEach(w, worlds) {
      if (t_resp_str_is(w, "name", "g1.main") && t_resp_str_is(w, "node", "n0"))
        found++;
      if (t_resp_str_is(w, "name", "fresh2") && t_resp_str_is(w, "node", "n2") &&
          t_resp_has(w, "transforms"))
        found++;
    }
    listed = found == 2;
    cJSON_Delete(r);
    if (!listed)
      t_sleep_ms(50);
  }
  CU_ASSERT(listed);
  r = OK(&k.c[1], "{\"cmd\":\"info\"}");
  CU_ASSERT(t_resp_str_is(r, "node", "n1"));
  cJSON_Delete(r);
  /* The figures: MOVED answers counted (also by code), groups owned, the lease, etcd. */
  char *page = NULL;
  CU_ASSERT_EQUAL(t_http_get(k.d[1].http_port, "/metrics", &page), 200);
  CU_ASSERT(page_metric(page, "scened_cluster_moved_total") >= 17 * 1);
  CU_ASSERT(page_metric(page, "scened_cluster_groups_owned") == 1);
  CU_ASSERT(page_metric(page, "scened_cluster_registered") == 1);
  CU_ASSERT(page_metric(page, "scened_cluster_lease_renewals_total") >= 0);
  CU_ASSERT(page_metric(page, "scened_cluster_lease_remaining_seconds") > 0);
  CU_ASSERT(page_metric(page, "scened_etcd_request_seconds_count") > 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(page, "scened_command_errors_total{code=\"MOVED\"}"));
  free(page);
  page = NULL;
  CU_ASSERT_EQUAL(t_http_get(k.d[2].http_port, "/metrics", &page), 200);
  CU_ASSERT(page_metric(page, "scened_etcd_failovers_total") >= 1); /* its dead first endpoint */
  free(page);
  page = NULL;
  CU_ASSERT_EQUAL(t_http_get(k.d[0].http_port, "/readyz", &page), 200);
  free(page);
  cluster_stop(&k);
}

/* scenectl and the Python client follow MOVED: asked on a daemon that does not own the world,
 * they get the answer. */
static void test_scenectl_non_owner(void) {
  START_CLUSTER(k, NULL);
  OKD(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"ctl.main\"}");
  OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"ctl.main\",\"name\":\"car\"}");
  const char *bin = getenv("SCENECTL_BIN") ? getenv("SCENECTL_BIN") : "build/scenectl";
  char port[16];
  snprintf(port, sizeof port, "%d", k.d[1].port);
  const char *args[] = {"--port", port, "transform.find", "world=ctl.main", "path=car", NULL};
  t_proc p;
  CU_ASSERT_FATAL(t_proc_start(&p, bin, args, NULL, NULL, 0));
  int rc = t_proc_wait(&p, 10000);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.out), "\"entity\""));
  if (rc != 0)
    t_report_text("scenectl", text_str(&p.err));
  t_proc_free(&p);
  /* The Python client as well (next to the daemon's binary, or from the working directory). */
  char script[512];
  const char *bin_dir = t_daemon_bin(), *slash = strrchr(bin_dir, '/');
  snprintf(script, sizeof script, "%.*s/../scripts/scened_client.py",
           slash ? (int)(slash - bin_dir) : 1, slash ? bin_dir : ".");
  if (access(script, R_OK) != 0)
    snprintf(script, sizeof script, "scripts/scened_client.py");
  const char *py[] = {script, "--port", port, "transform.find", "world=ctl.main", "path=car", NULL};
  CU_ASSERT_FATAL(t_proc_start(&p, "/usr/bin/python3", py, NULL, NULL, 0));
  rc = t_proc_wait(&p, 10000);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.out), "\"entity\""));
  if (rc != 0)
    t_report_text("python client", text_str(&p.err));
  t_proc_free(&p);
  cluster_stop(&k);
}

/* Asks daemon i to create world with "node": place until the answer is what is wanted (the
 * nodes' published figures take a moment to reach every daemon): ok on node want, or (moved)
 * MOVED to want. */
static bool placed_at(cluster *k, int i, const char *world, const char *place, bool moved,
                      const char *want) {
  long deadline = t_now_ms() + 8000;
  while (t_now_ms() < deadline) {
    cJSON *r =
        CALL(&k->c[i], "{\"cmd\":\"world.create\",\"world\":\"%s\",\"node\":\"%s\"}", world, place);
    bool got = moved ? t_resp_str_is(error_of(r), "code", "MOVED") &&
                           t_resp_str_is(error_of(r), "node", want)
                     : t_resp_ok(r) && t_resp_str_is(r, "node", want);
    bool created = t_resp_ok(r);
    if (!got && created)
      CHECK(got, r); /* created elsewhere than wanted: there is no going back */
    cJSON_Delete(r);
    if (got || created)
      return got;
    t_sleep_ms(100);
  }
  return false;
}

/* world.create with "node": auto places a new group on the node with the fewest transforms,
 * then the fewest worlds, then the smallest name; a node's name sends it there. */
static void test_placement_auto(void) {
  START_CLUSTER(k, NULL);
  /* All empty: n0, the smallest name. */
  CU_ASSERT(placed_at(&k, 0, "p0", "auto", false, "n0"));
  OKD(&k.c[0], "{\"cmd\":\"entity.create\",\"count\":1}");
  for (int i = 0; i < 5; i++)
    OKD(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"p0\"}");
  OKD(&k.c[1], "{\"cmd\":\"world.create\",\"world\":\"p1\"}");
  /* Once n2 has heard of both: n2 (no world) before n1 (one world, no transform). */
  CU_ASSERT(placed_at(&k, 2, "pa", "auto", false, "n2"));
  /* Now n1 and n2 tie (no transform, one world): n1 by name; n0 answers MOVED to it, and n1
   * places it on itself. */
  CU_ASSERT(placed_at(&k, 0, "pb", "auto", true, "n1"));
  CU_ASSERT(placed_at(&k, 1, "pb", "auto", false, "n1"));
  CU_ASSERT(placed_at(&k, 0, "pc", "n2", true, "n2"));
  ERR(&k.c[0], "NOT_FOUND", "{\"cmd\":\"world.create\",\"world\":\"pd\",\"node\":\"nobody\"}");
  CU_ASSERT(placed_at(&k, 2, "pc", "n2", false, "n2"));
  cluster_stop(&k);
}

static int cmp_ull(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
  return x < y ? -1 : x > y;
}

/* Entity ids are unique across the cluster: each daemon hands out ids from its own ranges. */
static void test_unique_entity_ids(void) {
  START_CLUSTER(k, NULL);
  enum { PER = 300, CREATES = 40 };
  unsigned long long *ids = calloc(NODES * (PER + CREATES), sizeof *ids);
  size_t n = 0;
  for (int i = 0; i < NODES; i++) {
    cJSON *r = OK(&k.c[i], "{\"cmd\":\"entity.create\",\"count\":%d}", PER);
    const cJSON *id, *list = cJSON_GetObjectItemCaseSensitive(r, "entities");
    cJSON_ArrayForEach(id, list) ids[n++] = (unsigned long long)id->valuedouble;
    cJSON_Delete(r);
    OKD(&k.c[i], "{\"cmd\":\"world.create\",\"world\":\"u%d\"}", i);
    for (int j = 0; j < CREATES; j++) {
      r = OK(&k.c[i], "{\"cmd\":\"transform.create\",\"world\":\"u%d\"}", i);
      ids[n++] = t_resp_id(r, "entity");
      cJSON_Delete(r);
    }
  }
  CU_ASSERT_EQUAL(n, NODES * (PER + CREATES));
  qsort(ids, n, sizeof *ids, cmp_ull);
  size_t dups = 0;
  for (size_t i = 1; i < n; i++)
    dups += ids[i] == ids[i - 1] || ids[i] == 0;
  CU_ASSERT_EQUAL(dups, 0);
  free(ids);
  cluster_stop(&k);
}

int t_register_cluster_routing(void) {
  static const t_test tests[] = {
      {"routing: MOVED from every command naming a world", test_routing_moved},
      {"scenectl and the Python client against a non-owner", test_scenectl_non_owner},
      {"placement with auto", test_placement_auto},
      {"entity ids unique across the cluster", test_unique_entity_ids},
  };
  return T_ADD_SUITE("cluster_routing", NULL, NULL, tests);
}

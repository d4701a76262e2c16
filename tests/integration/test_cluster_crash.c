/* Durability of a cluster under random workloads (the contract's "Cluster" and "Durability"):
 * two daemons share a data directory and a real etcd, and run the same random commands as a
 * reference daemon without --cluster, answer for answer (ids paired by the order they were
 * made: the cluster's come from ranges). Now and then the owner of groups is killed with
 * SIGKILL (the other daemon takes its groups over), stopped with SIGTERM (its groups are
 * released and claimed), a group is moved with world.move, or both daemons save; after each,
 * the whole state must equal the reference's. A killed or stopped daemon starts again with
 * the same name and data directory, and joins.
 *
 * Seeds are printed; SCENED_SEED=N runs that one, SCENED_SEEDS=N runs N random ones (make soak
 * runs many), SCENED_STEPS=N sets the commands per seed. */
#include "crash_common.h"
#include "daemon_fixtures.h"
#include "etcd.h"
#include "suites.h"
#include "workload.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NODES 2
#define TTL "2"
/* A takeover answers within the TTL plus 3 s; a request waits that long and more. */
#define ROUTE_MS 20000

typedef struct node {
  t_daemon d;
  t_client c;
  t_client watch; /* a subscriber and reader of past ticks (crash_watch) */
  bool up;
} node;

typedef struct pair {
  etcd e;
  char data[64];
  node n[NODES];
  int owner[WL_GROUPS]; /* the node last seen serving each group, -1 unknown */
  rng r;
} pair;

static const char *const node_names[NODES] = {"n0", "n1"};

static int node_index(const char *name) {
  for (int i = 0; i < NODES; i++)
    if (strcmp(name, node_names[i]) == 0)
      return i;
  return -1;
}

static bool node_start(pair *p, int i) {
  const char *args[] = {"--cluster",       p->e.url,      "--data", p->data,   "--node",
                        node_names[i],     "--lease-ttl", TTL,      "--fsync", "always",
                        "--save-interval", "0.5",         NULL};
  node *n = &p->n[i];
  n->up = START(&n->d, args) && CONNECT(&n->c, n->d.port) && CONNECT(&n->watch, n->d.port);
  n->up = n->up && crash_hello_b64(&n->c);
  return n->up;
}

static void node_stop(pair *p, int i, int sig) {
  node *n = &p->n[i];
  if (!n->up)
    return;
  t_client_close(&n->c);
  t_client_close(&n->watch);
  int status = t_daemon_stop(&n->d, sig, 20000);
  if (sig == SIGTERM)
    CU_ASSERT_EQUAL(status, 0);
  n->up = false;
}

/* Until every daemon up knows of every daemon up (registered, watched). */
static bool wait_joined(pair *p) {
  int want = 0;
  for (int i = 0; i < NODES; i++)
    want += p->n[i].up;
  long deadline = t_now_ms() + 20000;
  while (t_now_ms() < deadline) {
    bool all = true;
    for (int i = 0; i < NODES; i++) {
      if (!p->n[i].up)
        continue;
      cJSON *r = t_client_call(&p->n[i].c, "{\"cmd\":\"cluster.nodes\"}");
      const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(r, "nodes");
      all &= cJSON_IsArray(nodes) && cJSON_GetArraySize(nodes) == want;
      cJSON_Delete(r);
    }
    if (all)
      return true;
    t_sleep_ms(20);
  }
  return false;
}

/* One request to the cluster as a client would send it: to the group's owner as far as it is
 * known (else any daemon up), following MOVED, waiting out UNAVAILABLE (a takeover, a load). */
static cJSON *route(pair *p, const wl_req *rq) {
  int g = -1;
  for (int k = 0; k < WL_GROUPS; k++)
    if (strcmp(rq->group, wl_group_names[k]) == 0)
      g = k;
  int at = g >= 0 ? p->owner[g] : -1;
  long deadline = t_now_ms() + ROUTE_MS;
  while (t_now_ms() < deadline) {
    if (at < 0 || !p->n[at].up) {
      /* (not from p->r, which picks the disturbances: how often this runs depends on timing,
       * and a seed must pick the same ones when it runs again) */
      at = (g < 0 ? 0 : g) % NODES;
      if (!p->n[at].up)
        at = 1 - at;
    }
    cJSON *r = t_client_call(&p->n[at].c, "%s", rq->line);
    const char *code = t_resp_code(r);
    if (r && strcmp(code, "MOVED") == 0) {
      at = node_index(t_resp_str(cJSON_GetObjectItemCaseSensitive(r, "error"), "node"));
      cJSON_Delete(r);
      continue;
    }
    if (!r || strcmp(code, "UNAVAILABLE") == 0) {
      cJSON_Delete(r);
      t_sleep_ms(20);
      continue;
    }
    if (g >= 0)
      p->owner[g] = at;
    return r;
  }
  fprintf(stderr, "  no daemon answered %s within %d ms\n", rq->line, ROUTE_MS);
  return NULL;
}

static bool pair_send(void *ud, const wl_req *reqs, size_t n, cJSON **out) {
  for (size_t i = 0; i < n; i++)
    if (!(out[i] = route(ud, &reqs[i])))
      return false;
  return true;
}

typedef struct solo {
  t_daemon d;
  t_client c;
  bool up;
} solo;

/* A daemon that owns some group, or -1. */
static int some_owner(pair *p) {
  int g = (int)rng_below(&p->r, WL_GROUPS);
  for (int k = 0; k < WL_GROUPS; k++) {
    int o = p->owner[(g + k) % WL_GROUPS];
    if (o >= 0 && p->n[o].up)
      return o;
  }
  return -1;
}

/* Stops daemon i with sig, compares the state once the other daemon serves its groups, then
 * starts it again. */
static bool bounce(pair *p, workload *w, int i, int sig) {
  node_stop(p, i, sig);
  bool same = wl_compare_state(w, sig == SIGKILL ? "after kill -9 of an owner and the takeover"
                                                 : "after SIGTERM of an owner and the claim");
  CU_ASSERT(same);
  bool back = node_start(p, i) && wait_joined(p);
  CU_ASSERT(back);
  return same && back;
}

static bool move_group(pair *p, workload *w) {
  int g = (int)rng_below(&p->r, WL_GROUPS - 1); /* (a world of g0..g2: "solo" has one name) */
  int from = p->owner[g];
  if (from < 0 || !p->n[from].up || !p->n[1 - from].up)
    return true;
  char line[160];
  snprintf(line, sizeof line, "{\"cmd\":\"world.move\",\"world\":\"%s.a\",\"to\":\"%s\"}",
           wl_group_names[g], node_names[1 - from]);
  cJSON *r = t_client_call(&p->n[from].c, "%s", line);
  bool moved = t_resp_ok(r);
  /* NOT_FOUND: the group has no world of that name now; the move is tried again later */
  if (!moved && strcmp(t_resp_code(r), "NOT_FOUND") != 0)
    t_report("world.move", r);
  cJSON_Delete(r);
  if (!moved)
    return true;
  p->owner[g] = 1 - from;
  bool same = wl_compare_state(w, "after world.move");
  CU_ASSERT(same);
  return same;
}

static bool save_both(pair *p) {
  bool ok = true;
  for (int i = 0; i < NODES; i++) {
    if (!p->n[i].up)
      continue;
    cJSON *r = t_client_call(&p->n[i].c, "{\"cmd\":\"save\"}");
    if (!t_resp_ok(r)) {
      t_report("save", r);
      ok = false;
    }
    cJSON_Delete(r);
  }
  CU_ASSERT(ok);
  return ok;
}

static bool run_seed(uint64_t seed, int steps) {
  pair p;
  memset(&p, 0, sizeof p);
  for (int g = 0; g < WL_GROUPS; g++)
    p.owner[g] = -1;
  p.r.state = seed ^ UINT64_C(0xc1a55e7);
  fprintf(stderr, "  cluster crash: seed %llu (SCENED_SEED=%llu replays it)\n",
          (unsigned long long)seed, (unsigned long long)seed);
  solo ref = {0};
  bool ok = etcd_start(&p.e) && t_temp_dir(p.data, sizeof p.data, "data");
  for (int i = 0; ok && i < NODES; i++)
    ok = node_start(&p, i);
  ok = ok && wait_joined(&p);
  ok = ok && (ref.up = START(&ref.d, NULL)) && CONNECT(&ref.c, ref.d.port) &&
       crash_hello_b64(&ref.c);
  CU_ASSERT(ok);
  workload w;
  wl_init(&w, seed, true, (wl_side){pair_send, &p}, (wl_side){crash_send_pipelined, &ref.c});
  int next = 20 + (int)rng_below(&p.r, 60);
  int kills = 0, stops = 0, moves = 0, saves = 0;
  for (int i = 0; ok && i < steps; i++) {
    ok = wl_step(&w);
    for (int k = 0; k < NODES; k++)
      if (p.n[k].up)
        crash_watch(&p.n[k].watch, &w);
    if (!ok || i < next)
      continue;
    next = i + 30 + (int)rng_below(&p.r, 60);
    int victim = some_owner(&p);
    switch (rng_below(&p.r, 5)) {
    case 0:
    case 1:
      if (victim >= 0) {
        kills++;
        ok = bounce(&p, &w, victim, SIGKILL);
      }
      break;
    case 2:
      if (victim >= 0) {
        stops++;
        ok = bounce(&p, &w, victim, SIGTERM);
      }
      break;
    case 3:
      moves++;
      ok = move_group(&p, &w);
      break;
    default:
      saves++;
      ok = save_both(&p);
    }
  }
  if (ok) {
    int victim = some_owner(&p);
    ok = victim < 0 || bounce(&p, &w, victim, SIGKILL);
  }
  ok = ok && wl_compare_entities(&w);
  CU_ASSERT(ok);
  fprintf(stderr,
          "  cluster crash: seed %llu: %u commands (%d kill -9, %d SIGTERM, %d moves, %d saves), "
          "%zu entities: %s\n",
          (unsigned long long)seed, w.steps, kills, stops, moves, saves, w.nents,
          ok ? "same" : "DIFFERENT");
  if (!ok)
    fprintf(stderr, "  logs: %s %s; data: %s\n", p.n[0].d.log_path, p.n[1].d.log_path, p.data);
  crash_count_kinds(&w);
  wl_free(&w);
  for (int i = 0; i < NODES; i++)
    node_stop(&p, i, SIGTERM);
  if (ref.up) {
    t_client_close(&ref.c);
    t_daemon_stop(&ref.d, SIGTERM, 10000);
  }
  etcd_stop(&p.e, SIGTERM);
  t_remove_temp_dir(p.e.dir);
  if (ok) {
    t_remove_temp_dir(p.data);
    for (int i = 0; i < NODES; i++)
      unlink(p.n[i].d.log_path);
    unlink(ref.d.log_path);
  }
  return ok;
}

static void test_random_cluster_crashes(void) {
  crash_seeds seeds;
  crash_seeds_read(&seeds, 2);
  for (int i = 0; i < seeds.count; i++)
    if (!run_seed(seeds.seed[i], seeds.steps))
      return; /* (what it covered says nothing then) */
  crash_check_coverage();
}

/* One call to daemon i that must answer ok (retried while it answers UNAVAILABLE, or MOVED
 * to a daemon that was killed and whose groups this one takes over once its lease ends). */
static cJSON *ok_at(pair *p, int i, const char *line) {
  long deadline = t_now_ms() + ROUTE_MS;
  for (;;) {
    cJSON *r = t_client_call(&p->n[i].c, "%s", line);
    const char *code = t_resp_code(r);
    int to = node_index(t_resp_str(cJSON_GetObjectItemCaseSensitive(r, "error"), "node"));
    bool wait =
        strcmp(code, "UNAVAILABLE") == 0 || (strcmp(code, "MOVED") == 0 && to >= 0 && !p->n[to].up);
    if (t_resp_ok(r) || !wait || t_now_ms() > deadline) {
      if (!t_resp_ok(r))
        t_report(line, r);
      CU_ASSERT(t_resp_ok(r));
      return r;
    }
    cJSON_Delete(r);
    t_sleep_ms(20);
  }
}

static bool pair_start(pair *p, int nodes) {
  memset(p, 0, sizeof *p);
  bool ok = etcd_start(&p->e) && t_temp_dir(p->data, sizeof p->data, "data");
  for (int i = 0; ok && i < nodes; i++)
    ok = node_start(p, i);
  ok = ok && wait_joined(p);
  CU_ASSERT(ok);
  return ok;
}

static void pair_stop(pair *p) {
  for (int i = 0; i < NODES; i++)
    node_stop(p, i, SIGTERM);
  etcd_stop(&p->e, SIGTERM);
  t_remove_temp_dir(p->e.dir);
  t_remove_temp_dir(p->data);
}

/* The user's report: one daemon and etcd, --fsync always; a world destroyed (answered ok), then
 * kill -9 and a restart with the same data: the world stays destroyed, the other stays. */
static void test_destroyed_world_stays_destroyed(void) {
  pair p;
  if (!pair_start(&p, 1)) {
    pair_stop(&p);
    return;
  }
  cJSON_Delete(ok_at(&p, 0, "{\"cmd\":\"world.create\",\"world\":\"g1.a\"}"));
  cJSON_Delete(ok_at(&p, 0, "{\"cmd\":\"world.create\",\"world\":\"g1.b\"}"));
  cJSON_Delete(ok_at(&p, 0, "{\"cmd\":\"transform.create\",\"world\":\"g1.a\"}"));
  cJSON_Delete(ok_at(&p, 0, "{\"cmd\":\"world.destroy\",\"world\":\"g1.a\"}"));
  node_stop(&p, 0, SIGKILL);
  CU_ASSERT_FATAL(node_start(&p, 0));
  /* once the group is served again (its old owner's lease had to expire) */
  cJSON_Delete(ok_at(&p, 0, "{\"cmd\":\"transform.create\",\"world\":\"g1.b\"}"));
  cJSON *r = ok_at(&p, 0, "{\"cmd\":\"world.list\"}");
  const cJSON *worlds = cJSON_GetObjectItemCaseSensitive(r, "worlds");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(worlds), 1);
  CU_ASSERT(t_resp_str_is(cJSON_GetArrayItem(worlds, 0), "name", "g1.b"));
  if (cJSON_GetArraySize(worlds) != 1)
    t_report("world.list after kill -9", r);
  cJSON_Delete(r);
  pair_stop(&p);
}

static unsigned long long id_of(cJSON *r, const char *field) {
  unsigned long long id = t_resp_id(r, field);
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(r, field);
  if (!id && cJSON_IsArray(list) && cJSON_IsNumber(list->child))
    id = (unsigned long long)list->child->valuedouble;
  cJSON_Delete(r);
  return id;
}

static void move(pair *p, int from, int to) {
  char line[128];
  snprintf(line, sizeof line, "{\"cmd\":\"world.move\",\"world\":\"g.a\",\"to\":\"%s\"}",
           node_names[to]);
  cJSON_Delete(ok_at(p, from, line));
}

/* An entity belongs to the group whose command made it, transform or not: it moves with the
 * group and survives its owner's kill -9. One destroyed while the group was here stays
 * destroyed when the group comes back from an older snapshot, and the group loads. */
static void test_group_entities_travel(void) {
  pair p;
  if (!pair_start(&p, 2)) {
    pair_stop(&p);
    return;
  }
  char line[256];
  cJSON_Delete(ok_at(&p, 0, "{\"cmd\":\"world.create\",\"world\":\"g.a\"}"));
  /* a world nobody made: nothing is made that no journal would record */
  CU_ASSERT(ERR(&p.n[0].c, "NOT_FOUND", "{\"cmd\":\"entity.create\",\"world\":\"none.a\"}"));
  unsigned long long gone =
      id_of(ok_at(&p, 0, "{\"cmd\":\"transform.create\",\"world\":\"g.a\"}"), "entity");
  unsigned long long bare =
      id_of(ok_at(&p, 0, "{\"cmd\":\"entity.create\",\"world\":\"g.a\"}"), "entities");
  CU_ASSERT_FATAL(gone && bare);
  cJSON_Delete(ok_at(&p, 0, "{\"cmd\":\"save\"}")); /* the group's snapshot lists both */
  snprintf(line, sizeof line, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", gone);
  cJSON_Delete(ok_at(&p, 0, line));
  /* made and destroyed after the snapshot: its records make it again on a replay here */
  unsigned long long brief =
      id_of(ok_at(&p, 0, "{\"cmd\":\"transform.create\",\"world\":\"g.a\"}"), "entity");
  snprintf(line, sizeof line,
           "{\"cmd\":\"transform.create\",\"world\":\"g.a\",\"parent\":%llu,"
           "\"name\":\"kept\"}",
           brief);
  cJSON_Delete(ok_at(&p, 0, line));
  snprintf(line, sizeof line, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", brief);
  cJSON_Delete(ok_at(&p, 0, line));
  move(&p, 0, 1);
  move(&p, 1, 0); /* back where both were destroyed, from the same snapshot */
  snprintf(line, sizeof line, "{\"cmd\":\"transform.create\",\"world\":\"g.a\",\"entity\":%llu}",
           gone);
  CU_ASSERT(ERR(&p.n[0].c, "NOT_FOUND", "%s", line));
  snprintf(line, sizeof line, "{\"cmd\":\"transform.create\",\"world\":\"g.a\",\"entity\":%llu}",
           brief);
  CU_ASSERT(ERR(&p.n[0].c, "NOT_FOUND", "%s", line));
  cJSON_Delete(ok_at(&p, 0, "{\"cmd\":\"transform.find\",\"world\":\"g.a\",\"path\":\"kept\"}"));
  move(&p, 0, 1);
  /* the entity without a transform went along; it survives its new owner's kill -9 */
  node_stop(&p, 1, SIGKILL);
  snprintf(line, sizeof line, "{\"cmd\":\"transform.create\",\"world\":\"g.a\",\"entity\":%llu}",
           bare);
  cJSON_Delete(ok_at(&p, 0, line));
  snprintf(line, sizeof line, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", bare);
  cJSON_Delete(ok_at(&p, 0, line));
  pair_stop(&p);
}

int t_register_cluster_crash(void) {
  static const t_test tests[] = {
      {"a destroyed world stays destroyed after kill -9", test_destroyed_world_stays_destroyed},
      {"a group's entities travel with it, and destroyed ones stay destroyed",
       test_group_entities_travel},
      {"random workloads: kill -9, SIGTERM, world.move and save against a reference",
       test_random_cluster_crashes},
  };
  return T_ADD_SUITE("cluster_crash", NULL, NULL, tests);
}

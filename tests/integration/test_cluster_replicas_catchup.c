/* Replicas: catch-up and rejoining. A follower that was down comes back with its data directory
 * and gets what it missed from the owner's backlog, or a whole copy of the group when the
 * backlog no longer reaches back (while the owner keeps serving writes); an owner that was
 * replaced, restarted or resumed (SIGSTOP past its TTL, then SIGCONT), drops the epoch it had
 * and serves nothing of the group, following the new owner when it is chosen. Three real
 * daemons on a real etcd, each with a data directory of its own. */
#include "harness.h"
#include "replica_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WRITES_MAX 4096

static bool in_list(const cJSON *v, const char *member, const char *node) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, member), *e;
  cJSON_ArrayForEach(e,
                     list) if (cJSON_IsString(e) && strcmp(e->valuestring, node) == 0) return true;
  return false;
}

static bool none_insync(const cJSON *v) { return list_size(v, "insync") == 0; }

static long long key_epoch(const cJSON *v) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(v, "epoch");
  return cJSON_IsNumber(e) ? (long long)e->valuedouble : -1;
}

/* Whether the replicas key names node in member (and its owner, when owner is not NULL). */
static bool key_names(cluster *k, const char *member, const char *node, const char *owner) {
  cJSON *v = etcd_json(k, "/scened/replicas/b1");
  bool ok = v && in_list(v, member, node) && (!owner || strcmp(t_resp_str(v, "owner"), owner) == 0);
  cJSON_Delete(v);
  return ok;
}

/* Whether daemon i's world.list with cluster gives b1.main an insync list holding node. */
static bool lists_insync(cluster *k, int i, const char *node) {
  cJSON *r = t_client_call(&k->c[i], "{\"cmd\":\"world.list\",\"cluster\":true}");
  const cJSON *worlds = cJSON_GetObjectItemCaseSensitive(r, "worlds"), *w;
  bool ok = false;
  cJSON_ArrayForEach(w, worlds) if (strcmp(t_resp_str(w, "name"), "b1.main") == 0) ok =
      in_list(w, "insync", node);
  cJSON_Delete(r);
  return ok;
}

/* Both the owner's world.list and the replicas key show node in sync (within 30 s). */
static bool wait_rejoined(cluster *k, int owner, const char *node) {
  for (long deadline = t_now_ms() + 30000; t_now_ms() < deadline; t_sleep_ms(50))
    if (lists_insync(k, owner, node) && key_names(k, "insync", node, node_name(owner)))
      return true;
  return false;
}

/* Writes w<n> (translation n, 1, 2) on daemon at, noting its entity in ids[n] (0: refused). */
static bool write_one(cluster *k, int at, int n, unsigned long long *ids) {
  cJSON *r = t_client_call(&k->c[at],
                           "{\"cmd\":\"transform.create\",\"world\":\"b1.main\",\"name\":\"w%d\","
                           "\"t\":[%d,1,2]}",
                           n, n);
  bool ok = t_resp_ok(r);
  ids[n] = ok ? t_resp_id(r, "entity") : 0;
  if (!ok)
    t_report("a write was refused", r);
  cJSON_Delete(r);
  return ok;
}

/* How many of the n writes acknowledged (ids[j] != 0) daemon i lacks or holds otherwise: its
 * entity and its local translation. */
static int missing_on(cluster *k, int i, const unsigned long long *ids, int n) {
  int missing = 0;
  for (int j = 0; j < n; j++) {
    if (!ids[j])
      continue;
    cJSON *f = t_client_call(
        &k->c[i], "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"w%d\"}", j);
    bool same = t_resp_ok(f) && t_resp_id(f, "entity") == ids[j];
    cJSON *g = same ? t_client_call(&k->c[i],
                                    "{\"cmd\":\"transform.get\",\"world\":\"b1.main\","
                                    "\"entity\":%llu}",
                                    ids[j])
                    : NULL;
    const cJSON *local = cJSON_GetObjectItemCaseSensitive(g, "local");
    const cJSON *tx = cJSON_GetArrayItem(local, 12);
    same = same && cJSON_IsNumber(tx) && tx->valuedouble == (double)j;
    if (!same && missing++ < 3)
      t_report("an acknowledged write is missing or differs", g ? g : f);
    cJSON_Delete(f);
    cJSON_Delete(g);
  }
  return missing;
}

/* The transforms daemon i holds in b1.main (-1: not listed). */
static double transforms_of(cluster *k, int i) {
  cJSON *r = t_client_call(&k->c[i], "{\"cmd\":\"world.list\"}");
  const cJSON *w;
  double n = -1;
  cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(
                            r, "worlds")) if (strcmp(t_resp_str(w, "name"), "b1.main") == 0) n =
      t_resp_num(w, "transforms");
  cJSON_Delete(r);
  return n;
}

/* Kills the owner (kill -9) and waits for the daemon that answers for b1 then: the in-sync
 * follower, which it returns (-1: nobody). */
static int take_over(cluster *k, int owner) {
  node_stop(k, owner, SIGKILL);
  int now_at = -1;
  cJSON *r =
      wait_ok_anywhere(k, "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"w0\"}",
                       TTL_MS + 15000, &now_at);
  cJSON_Delete(r);
  return r ? now_at : -1;
}

static const char *const sync_one[] = {
    "--replicas", "1", "--replica-timeout", "1000", "--durability", "sync", NULL};

/* Three daemons (sync_one), b1.main made on its owner (*at) with writes w0..w9 (ids), and its
 * follower in sync, which it returns; -1 (the cluster stopped) when none could be set up. */
static int start_in_sync(cluster *k, int *at, unsigned long long *ids) {
  int fi = replicas_start(k, sync_one, NULL, "b1.main", 1, at);
  if (fi < 0) {
    cluster_stop(k);
    return -1;
  }
  for (int n = 0; n < 10; n++)
    CU_ASSERT_FATAL(write_one(k, *at, n, ids));
  CU_ASSERT_FATAL(wait_rejoined(k, *at, node_name(fi)));
  return fi;
}

/* A follower killed (kill -9) while the owner takes 20 more writes, then restarted with its
 * directory: it resumes from its own copy, gets only what it missed from the backlog (no whole
 * copy), rejoins the in-sync set (world.list and the replicas key), and holds every write: it
 * serves all of them once the owner is killed in turn. */
static void test_backlog_rejoin(void) {
  static unsigned long long ids[WRITES_MAX];
  cluster k;
  int at = -1, fi = start_in_sync(&k, &at, ids);
  if (fi < 0)
    return;
  node_stop(&k, fi, SIGKILL);
  for (int n = 10; n < 30; n++) /* the first waits for the follower to leave insync */
    CU_ASSERT_FATAL(write_one(&k, at, n, ids));
  CU_ASSERT_FATAL(node_start(&k, fi));
  long t0 = t_now_ms();
  bool rejoined = wait_rejoined(&k, at, node_name(fi));
  printf("\n  owner %s, follower %s restarted: in sync again after %ld ms, applied %g, copies "
         "sent %g\n",
         node_name(at), node_name(fi), t_now_ms() - t0,
         metric_of(&k, fi, "scened_replica_applied_total{group=\"b1\"}"),
         metric_of(&k, at, "scened_replica_copies_sent_total"));
  CU_ASSERT(rejoined);
  CU_ASSERT(t_daemon_log_contains(&k.d[fi], "a copy resumed from this directory"));
  CU_ASSERT(metric_of(&k, fi, "scened_replica_applied_total{group=\"b1\"}") == 20);
  CU_ASSERT(metric_of(&k, at, "scened_replica_copies_sent_total") == 0);
  CU_ASSERT(metric_of(&k, fi, "scened_replica_copies_received_total") == 0);
  int now_at = take_over(&k, at);
  CU_ASSERT_EQUAL_FATAL(now_at, fi);
  CU_ASSERT_EQUAL(missing_on(&k, fi, ids, 30), 0);
  CU_ASSERT_EQUAL(transforms_of(&k, fi), 30); /* and nothing else */
  cluster_stop(&k);
}

/* With --replica-backlog 4096, a follower killed while 200 writes go by cannot be served from
 * the backlog when it comes back: the owner sends it a whole copy of the group while a writer
 * keeps writing to it; the follower installs it, rejoins the in-sync set and holds every write
 * acknowledged, before, during and after the copy. */
static void test_copy_while_writing(void) {
  static const char *const extra[] = {
      "--replicas", "1", "--replica-timeout", "1000", "--durability", "sync", "--replica-backlog",
      "4096",       NULL};
  static unsigned long long ids[WRITES_MAX];
  cluster k;
  int at = -1, fi = replicas_start(&k, extra, NULL, "b1.main", 1, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  int n = 0;
  for (; n < 10; n++)
    CU_ASSERT_FATAL(write_one(&k, at, n, ids));
  CU_ASSERT_FATAL(wait_rejoined(&k, at, node_name(fi)));
  node_stop(&k, fi, SIGKILL);
  for (; n < 210; n++)
    CU_ASSERT_FATAL(write_one(&k, at, n, ids));
  CU_ASSERT_FATAL(node_start(&k, fi));
  /* The writer goes on while the follower dials, gets its copy and catches up. */
  int during = 0;
  bool rejoined = false;
  for (long deadline = t_now_ms() + 30000;
       !rejoined && n < WRITES_MAX - 40 && t_now_ms() < deadline;) {
    for (int j = 0; j < 5; j++, n++, during++)
      CU_ASSERT_FATAL(write_one(&k, at, n, ids));
    rejoined = metric_of(&k, fi, "scened_replica_copies_received_total") >= 1 &&
               lists_insync(&k, at, node_name(fi));
  }
  for (int j = 0; j < 20; j++, n++)
    CU_ASSERT_FATAL(write_one(&k, at, n, ids));
  printf("\n  owner %s, follower %s: %d writes while it caught up; copies sent %g, received %g\n",
         node_name(at), node_name(fi), during,
         metric_of(&k, at, "scened_replica_copies_sent_total"),
         metric_of(&k, fi, "scened_replica_copies_received_total"));
  CU_ASSERT(rejoined);
  if (!rejoined)
    printf("  logs: owner %s, follower %s\n", k.d[at].log_path, k.d[fi].log_path);
  CU_ASSERT(wait_rejoined(&k, at, node_name(fi)));
  CU_ASSERT(metric_of(&k, at, "scened_replica_copies_sent_total") >= 1);
  CU_ASSERT(t_daemon_log_contains(&k.d[fi], "a whole copy of the group installed"));
  int now_at = take_over(&k, at);
  CU_ASSERT_EQUAL_FATAL(now_at, fi);
  CU_ASSERT_EQUAL(missing_on(&k, fi, ids, n), 0);
  CU_ASSERT_EQUAL(transforms_of(&k, fi), n);
  cluster_stop(&k);
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* The owner killed: the in-sync follower takes over at a newer epoch and chooses the third
 * daemon as its follower. The old owner restarted with its directory does not claim or serve
 * the group, and removes it from its directory (a newer epoch owns it). */
static void test_old_owner_drops(void) {
  static unsigned long long ids[WRITES_MAX];
  cluster k;
  int at = -1, fi = start_in_sync(&k, &at, ids);
  if (fi < 0)
    return;
  cJSON *v = etcd_json(&k, "/scened/replicas/b1");
  long long old_epoch = key_epoch(v);
  cJSON_Delete(v);
  int now_at = take_over(&k, at);
  CU_ASSERT_EQUAL_FATAL(now_at, fi);
  for (int n = 10; n < 20; n++)
    CU_ASSERT_FATAL(write_one(&k, fi, n, ids));
  /* The new owner chose the third daemon while the old one was down. */
  const char *third = node_name(NODES - at - fi);
  bool chosen = false;
  for (long deadline = t_now_ms() + 15000; !chosen && t_now_ms() < deadline; t_sleep_ms(20)) {
    v = etcd_json(&k, "/scened/replicas/b1");
    chosen = key_epoch(v) > old_epoch && in_list(v, "followers", third);
    cJSON_Delete(v);
  }
  CU_ASSERT_FATAL(chosen);
  char gdir[256];
  snprintf(gdir, sizeof gdir, "%s/%s/groups/b1", k.data, node_name(at));
  CU_ASSERT_FATAL(exists(gdir));
  CU_ASSERT_FATAL(node_start(&k, at));
  bool gone = false;
  for (long deadline = t_now_ms() + 15000; !gone && t_now_ms() < deadline; t_sleep_ms(50))
    gone = !exists(gdir);
  v = etcd_json(&k, "/scened/replicas/b1");
  printf("\n  owner %s killed, %s took over (epoch %lld -> %lld); the old owner restarted: its "
         "copy %s\n",
         node_name(at), node_name(fi), old_epoch, key_epoch(v), gone ? "removed" : "still there");
  CU_ASSERT(gone);
  CU_ASSERT(key_epoch(v) > old_epoch);
  CU_ASSERT_STRING_EQUAL(t_resp_str(v, "owner"), node_name(fi));
  CU_ASSERT(!in_list(v, "followers", node_name(at)));
  cJSON_Delete(v);
  CU_ASSERT(t_daemon_log_contains(&k.d[at], "reason=\"a newer epoch owns it\""));
  cJSON *r = t_client_call(&k.c[at], "{\"cmd\":\"transform.create\",\"world\":\"b1.main\"}");
  CU_ASSERT(r && strcmp(t_resp_code(r), "MOVED") == 0 &&
            strcmp(t_resp_str(error_of(r), "node"), node_name(fi)) == 0);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(missing_on(&k, fi, ids, 20), 0);
  cluster_stop(&k);
}

/* An epoch begun from a copy, with no record yet: the owner killed after 100,000 transforms, its
 * in-sync follower takes over and chooses the third daemon, which gets a whole copy of the
 * group. The third is recorded in sync only once it has installed that copy (with nothing in
 * the epoch to acknowledge, the copy's own acknowledgement is what counts). */
static void test_copy_installed_before_insync(void) {
  static unsigned long long ids[WRITES_MAX];
  cluster k;
  int at = -1, fi = start_in_sync(&k, &at, ids);
  if (fi < 0)
    return;
  for (int b = 0; b < 20; b++) {
    text batch = {0};
    text_addf(&batch, "{\"cmd\":\"batch\",\"world\":\"b1.main\",\"ops\":[");
    for (int i = 0; i < 5000; i++)
      text_addf(&batch, "%s{\"cmd\":\"transform.create\"}", i ? "," : "");
    text_addf(&batch, "]}");
    cJSON *r = t_client_call(&k.c[at], "%s", text_str(&batch));
    text_free(&batch);
    CU_ASSERT_FATAL(t_resp_ok(r));
    cJSON_Delete(r);
  }
  CU_ASSERT_FATAL(wait_rejoined(&k, at, node_name(fi)));
  CU_ASSERT_EQUAL_FATAL(take_over(&k, at), fi);
  int third = NODES - at - fi;
  bool listed = false, installed = false;
  for (long deadline = t_now_ms() + 30000; !listed && t_now_ms() < deadline; t_sleep_ms(10)) {
    listed = key_names(&k, "insync", node_name(third), node_name(fi));
    /* read after the key: a copy installed in between shows here too */
    installed = t_daemon_log_contains(&k.d[third], "a whole copy of the group installed");
  }
  printf("\n  %s took over from %s; %s in sync with a whole copy: listed %d, installed then %d\n",
         node_name(fi), node_name(at), node_name(third), listed, installed);
  CU_ASSERT(listed);
  CU_ASSERT(installed);
  CU_ASSERT_EQUAL(transforms_of(&k, fi), 100010);
  cluster_stop(&k);
}

/* The follower paused (SIGSTOP) until the owner takes it out of the in-sync set and answers
 * writes alone; it resumes and the owner is stopped with SIGTERM at once, the follower still
 * behind. The owner waits for it to acknowledge every record, records it in sync, then lets the
 * group go: the follower serves it at once (no world.promote), with every acknowledged write. */
static void test_sigterm_hands_over(void) {
  static unsigned long long ids[WRITES_MAX];
  cluster k;
  int at = -1, fi = start_in_sync(&k, &at, ids);
  if (fi < 0)
    return;
  int n = 10;
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  for (; n < 200; n++)
    CU_ASSERT_FATAL(write_one(&k, at, n, ids));
  cJSON *v = wait_json(&k, "/scened/replicas/b1", none_insync, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  cJSON_Delete(v);
  CU_ASSERT_FATAL(kill(pid, SIGCONT) == 0);
  long stopped = t_now_ms();
  node_stop(&k, at, SIGTERM);
  int now_at = -1;
  cJSON *r =
      wait_ok_anywhere(&k, "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"w0\"}",
                       TTL_MS + 15000, &now_at);
  long took = t_now_ms() - stopped;
  printf("\n  owner %s stopped (SIGTERM) with follower %s behind: %s serves b1 after %ld ms\n",
         node_name(at), node_name(fi), r ? node_name(now_at) : "nobody", took);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(now_at, fi);
  CU_ASSERT(t_daemon_log_contains(&k.d[fi], "replica: serving the group from this daemon's copy"));
  CU_ASSERT_EQUAL(missing_on(&k, fi, ids, n), 0);
  cluster_stop(&k);
}

/* A follower killed, then the group's last world destroyed on its owner: the replicas key says
 * the group ended, and names no follower. With the owner gone (SIGTERM), the follower restarted
 * with its directory, which still holds the world, removes that stale copy and never serves the
 * world again: every daemon answers that it does not exist. */
static void test_ended_group_stays_gone(void) {
  static unsigned long long ids[WRITES_MAX];
  cluster k;
  int at = -1, fi = start_in_sync(&k, &at, ids);
  if (fi < 0)
    return;
  node_stop(&k, fi, SIGKILL);
  cJSON *r = t_client_call(&k.c[at], "{\"cmd\":\"world.destroy\",\"world\":\"b1.main\","
                                     "\"entities\":true}");
  CU_ASSERT_FATAL(t_resp_ok(r));
  cJSON_Delete(r);
  cJSON *v = wait_json(&k, "/scened/replicas/b1", key_ended, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  CU_ASSERT_STRING_EQUAL(t_resp_str(v, "owner"), node_name(at));
  CU_ASSERT_EQUAL(list_size(v, "followers"), 0);
  cJSON_Delete(v);
  node_stop(&k, at, SIGTERM);
  char gdir[256];
  snprintf(gdir, sizeof gdir, "%s/%s/groups/b1", k.data, node_name(fi));
  CU_ASSERT_FATAL(exists(gdir));
  CU_ASSERT_FATAL(node_start(&k, fi));
  bool gone = false;
  for (long deadline = t_now_ms() + 15000; !gone && t_now_ms() < deadline; t_sleep_ms(50))
    gone = !exists(gdir);
  printf("\n  follower %s down while b1's last world went; restarted, its copy %s\n", node_name(fi),
         gone ? "removed" : "still there");
  CU_ASSERT(gone);
  CU_ASSERT(t_daemon_log_contains(&k.d[fi], "reason=\"the group ended since\""));
  for (int i = 0; i < NODES; i++) {
    if (!k.connected[i])
      continue;
    r = t_client_call(&k.c[i], "{\"cmd\":\"transform.find\",\"world\":\"b1.main\","
                               "\"path\":\"w0\"}");
    bool absent = r && strcmp(t_resp_code(r), "NOT_FOUND") == 0 &&
                  strstr(t_resp_str(error_of(r), "message"), "world");
    CU_ASSERT(absent);
    if (!absent)
      t_report("the destroyed world answered", r);
    cJSON_Delete(r);
    CU_ASSERT_EQUAL(transforms_of(&k, i), -1);
  }
  cluster_stop(&k);
}

/* --replicas 2: the owner SIGSTOPped past its TTL; an in-sync follower takes over. Resumed
 * (SIGCONT), the old owner neither serves nor writes the group: a write sent to it is not
 * answered ok, and its old epoch's directory goes once it has followed the new owner, whose
 * whole copy it installs, and it rejoins the in-sync set. Every acknowledged write is on the
 * new owner. */
static void test_stopped_owner_rejoins(void) {
  static const char *const extra[] = {
      "--replicas", "2", "--replica-timeout", "1000", "--durability", "sync", NULL};
  static unsigned long long ids[WRITES_MAX];
  cluster k;
  int at = -1;
  if (replicas_start(&k, extra, NULL, "b1.main", 2, &at) < 0) {
    cluster_stop(&k);
    return;
  }
  int n = 0;
  for (; n < 10; n++)
    CU_ASSERT_FATAL(write_one(&k, at, n, ids));
  bool both = false;
  for (long deadline = t_now_ms() + 15000; !both && t_now_ms() < deadline; t_sleep_ms(50)) {
    cJSON *v = etcd_json(&k, "/scened/replicas/b1");
    both = list_size(v, "insync") == 2;
    cJSON_Delete(v);
  }
  CU_ASSERT_FATAL(both);
  cJSON *v = etcd_json(&k, "/scened/replicas/b1");
  long long old_epoch = key_epoch(v);
  cJSON_Delete(v);
  pid_t pid = k.d[at].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  int now_at = -1;
  for (long deadline = t_now_ms() + TTL_MS + 15000; now_at < 0 && t_now_ms() < deadline;
       t_sleep_ms(50))
    for (int i = 0; i < NODES && now_at < 0; i++) {
      if (i == at)
        continue;
      cJSON *r = t_client_call(&k.c[i], "{\"cmd\":\"transform.find\",\"world\":\"b1.main\","
                                        "\"path\":\"w0\"}");
      if (t_resp_ok(r))
        now_at = i;
      cJSON_Delete(r);
    }
  CU_ASSERT_FATAL(now_at >= 0);
  int acked_before = n;
  for (; n < 20; n++)
    CU_ASSERT_FATAL(write_one(&k, now_at, n, ids));
  CU_ASSERT_FATAL(kill(pid, SIGCONT) == 0);
  /* It never answers ok for the group again. */
  cJSON *r = t_client_call(&k.c[at], "{\"cmd\":\"transform.create\",\"world\":\"b1.main\","
                                     "\"name\":\"stale\"}");
  CU_ASSERT(r && !t_resp_ok(r));
  if (t_resp_ok(r))
    t_report("the old owner answered a write", r);
  cJSON_Delete(r);
  bool rejoined = wait_rejoined(&k, now_at, node_name(at));
  char old_dir[256], new_dir[256];
  v = etcd_json(&k, "/scened/replicas/b1");
  long long epoch = key_epoch(v);
  cJSON_Delete(v);
  snprintf(old_dir, sizeof old_dir, "%s/%s/groups/b1/epoch.%lld", k.data, node_name(at), old_epoch);
  snprintf(new_dir, sizeof new_dir, "%s/%s/groups/b1/epoch.%lld", k.data, node_name(at), epoch);
  printf("\n  owner %s stopped, %s took over after %d writes (epoch %lld -> %lld); resumed, the "
         "old owner is in sync again: %d, copies received %g\n",
         node_name(at), node_name(now_at), acked_before, old_epoch, epoch, rejoined,
         metric_of(&k, at, "scened_replica_copies_received_total"));
  CU_ASSERT(rejoined);
  CU_ASSERT(epoch > old_epoch);
  CU_ASSERT(!exists(old_dir));
  CU_ASSERT(exists(new_dir));
  CU_ASSERT(metric_of(&k, at, "scened_replica_copies_received_total") >= 1);
  r = t_client_call(&k.c[at], "{\"cmd\":\"transform.find\",\"world\":\"b1.main\","
                              "\"path\":\"stale\"}");
  CU_ASSERT(r && !t_resp_ok(r));
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(missing_on(&k, now_at, ids, n), 0);
  r = t_client_call(&k.c[now_at], "{\"cmd\":\"transform.find\",\"world\":\"b1.main\","
                                  "\"path\":\"stale\"}");
  CU_ASSERT(r && strcmp(t_resp_code(r), "NOT_FOUND") == 0);
  cJSON_Delete(r);
  cluster_stop(&k);
}

/* --replica-backlog below 4096, or not a size: one line, exit 2. */
static void test_bad_backlog_flag(void) {
  const char *values[] = {"100", "-1", "8x", "17g"};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    const char *args[] = {"--listen",           "127.0.0.1:0", "--http", "off",        "--cluster",
                          "http://127.0.0.1:1", "--data",      "/tmp",   "--replicas", "1",
                          "--replica-backlog",  values[i],     NULL};
    t_proc p;
    CU_ASSERT_FATAL(t_proc_start(&p, t_daemon_bin(), args, NULL, NULL, 0));
    int rc = t_proc_wait(&p, 10000);
    const char *s = text_str(&p.err);
    const char *nl = strchr(s, '\n');
    bool ok = rc == 2 && nl && nl[1] == '\0' && strstr(s, "invalid value for replica-backlog");
    CU_ASSERT(ok);
    if (!ok) {
      fprintf(stderr, "  --replica-backlog %s: exit %d\n", values[i], rc);
      t_report_text("stderr", s);
    }
    t_proc_free(&p);
  }
}

int t_register_cluster_replicas_catchup(void) {
  static const t_test tests[] = {
      {"a follower restarted catches up from the backlog and rejoins", test_backlog_rejoin},
      {"a follower past the backlog gets a whole copy while writes go on", test_copy_while_writing},
      {"the old owner restarted drops the group a newer epoch owns", test_old_owner_drops},
      {"a follower given a whole copy is in sync only once it installed it",
       test_copy_installed_before_insync},
      {"a follower down when its group ended never brings it back", test_ended_group_stays_gone},
      {"SIGTERM of an owner waits for its follower and hands the group over",
       test_sigterm_hands_over},
      {"an owner stopped past its TTL serves nothing and rejoins as follower",
       test_stopped_owner_rejoins},
      {"--replica-backlog is checked", test_bad_backlog_flag},
  };
  return T_ADD_SUITE("cluster_replicas_catchup", NULL, NULL, tests);
}

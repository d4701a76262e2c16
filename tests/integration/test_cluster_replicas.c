/* Replicas (--replicas N >= 1), each daemon on a data directory of its own: what the owner of
 * a group records in etcd about its followers. */
#include "harness.h"
#include "replica_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The key's value as JSON once pred holds of it (15 s at most); NULL when it never did. */

static bool has_one_follower(const cJSON *v) { return list_size(v, "followers") == 1; }

/* With --replicas 1 on three daemons, the owner of a new group names one live follower other
 * than itself, the same in the group key and in the replicas key, which carries the owner's
 * epoch (the group key's create revision) and no in-sync member yet. */
static void test_followers_recorded(void) {
  static const char *const extra[] = {"--replicas", "1", NULL};
  cluster k;
  if (!replicas_cluster(&k, extra))
    return;
  int at = -1;
  cJSON *r = wait_ok_anywhere(&k, "{\"cmd\":\"world.create\",\"world\":\"r1.main\"}", 15000, &at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  const char *owner = node_name(at);

  long long created = 0, unused;
  cJSON *rep = wait_json(&k, "/scened/replicas/r1", has_one_follower, &unused);
  cJSON *grp = wait_json(&k, "/scened/groups/r1", has_one_follower, &created);
  CU_ASSERT_PTR_NOT_NULL(rep);
  CU_ASSERT_PTR_NOT_NULL(grp);
  if (rep && grp) {
    const char *follower = first(rep, "followers");
    printf("\n  owner %s, follower %s\n", owner, follower);
    CU_ASSERT_STRING_EQUAL(t_resp_str(grp, "node"), owner);
    CU_ASSERT_TRUE(node_index(follower) >= 0);
    CU_ASSERT_STRING_NOT_EQUAL(follower, owner);
    CU_ASSERT_STRING_EQUAL(first(grp, "followers"), follower);
    /* The follower may have caught up already: then it alone is in sync. */
    CU_ASSERT_TRUE(list_size(rep, "insync") == 0 || strcmp(first(rep, "insync"), follower) == 0);
    CU_ASSERT_TRUE(list_size(grp, "insync") == 0 || strcmp(first(grp, "insync"), follower) == 0);
    const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(rep, "epoch");
    CU_ASSERT_TRUE(cJSON_IsNumber(epoch) && created > 0 &&
                   (long long)epoch->valuedouble == created);
    CU_ASSERT_STRING_EQUAL(t_resp_str(rep, "durability"), "sync");
  }
  cJSON_Delete(rep);
  cJSON_Delete(grp);
  cluster_stop(&k);
}

static bool create_transform(cluster *k, int at, int n) {
  cJSON *r = t_client_call(
      &k->c[at], "{\"cmd\":\"transform.create\",\"world\":\"b1.main\",\"name\":\"t%d\"}", n);
  bool ok = t_resp_ok(r);
  if (!ok)
    t_report("transform.create failed", r);
  cJSON_Delete(r);
  return ok;
}

/* The group key's epoch (its create revision) as etcd has it. */
static long long group_epoch(cluster *k) {
  long long epoch = -1;
  long long rev;
  cJSON *rep = wait_json(k, "/scened/replicas/b1", has_one_follower, &rev);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(rep, "epoch");
  if (cJSON_IsNumber(e))
    epoch = (long long)e->valuedouble;
  cJSON_Delete(rep);
  return epoch;
}

static void expect_refused(t_client *c, long long epoch, long long from, const char *code) {
  cJSON *r = t_client_call(
      c, "{\"cmd\":\"replicate\",\"group\":\"b1\",\"epoch\":%lld,\"from\":%lld}", epoch, from);
  CU_ASSERT(r && !t_resp_ok(r) && strcmp(t_resp_code(r), code) == 0);
  if (!r || t_resp_ok(r) || strcmp(t_resp_code(r), code) != 0)
    t_report("replicate was not refused as expected", r);
  cJSON_Delete(r);
}

/* A follower's stream from the owner: replicate from the last 20 of the n + 1 records gets them
 * in order, then a new write as it happens; an ack of a record not sent ends the stream. */
static void check_replicate(cluster *k, int at, int n) {
  long long epoch = group_epoch(k), last = n + 1;
  CU_ASSERT_FATAL(epoch > 0);
  t_client c;
  CU_ASSERT_FATAL(t_client_connect(&c, k->d[at].port) == 0);
  expect_refused(&c, epoch + 1, last, "BAD_REQUEST");
  expect_refused(&c, epoch, last + 2, "BAD_REQUEST");
  cJSON *r = t_client_call(&c,
                           "{\"cmd\":\"replicate\",\"group\":\"b1\",\"node\":\"x\",\"epoch\":%lld,"
                           "\"from\":%lld}",
                           epoch, last - 19);
  CU_ASSERT(t_resp_ok(r) && t_resp_num(r, "last") == last);
  if (!t_resp_ok(r))
    t_report("replicate failed", r);
  cJSON_Delete(r);
  for (long long seq = last - 19; seq <= last + 1; seq++) {
    if (seq == last + 1)
      CU_ASSERT_FATAL(create_transform(k, at, n)); /* live, after the backlog */
    cJSON *rec = t_client_recv_json(&c, 5000);
    for (int marks = 0; rec && cJSON_GetObjectItemCaseSensitive(rec, "w") && marks < 1000;
         marks++) { /* tick marks come between records once the link caught up */
      cJSON_Delete(rec);
      rec = t_client_recv_json(&c, 5000);
    }
    char want[32];
    snprintf(want, sizeof want, "\"name\":\"t%lld\"", seq - 2);
    /* The record's line comes as it is, a JSON object. */
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(rec, "l");
    char *text = cJSON_IsObject(l) ? cJSON_PrintUnformatted(l) : NULL;
    bool good = rec && t_resp_num(rec, "r") == seq && t_resp_num(rec, "t") >= 1 && text &&
                strstr(text, "transform.create") && strstr(text, want) &&
                strstr(text, "\"created\":[");
    free(text);
    CU_ASSERT(good);
    if (!good)
      t_report("not the record expected", rec);
    cJSON_Delete(rec);
    if (!good)
      break;
  }
  char ack[64];
  snprintf(ack, sizeof ack, "{\"ack\":%lld}", last + 1);
  CU_ASSERT(t_client_send(&c, ack) == 0);
  CU_ASSERT(t_client_send(&c, "{\"ack\":999999}") == 0);
  CU_ASSERT(t_client_closed(&c, 5000));
  t_client_close(&c);
}

#define BACKLOG_BYTES "scened_replica_backlog_bytes{group=\"b1\"}"
#define BACKLOG_RECORDS "scened_replica_backlog_records{group=\"b1\"}"

/* With --replicas 1 the owner keeps the records of a group with a follower in its backlog:
 * each write adds one, and the daemons that do not own it keep none. */
static void test_backlog_grows(void) {
  static const char *const extra[] = {"--replicas", "1", NULL};
  cluster k;
  int at = -1, fi = replicas_start(&k, extra, NULL, "b1.main", 1, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  /* The owner learns of its follower through the watch: writes until a record is kept. */
  int n = 0;
  double records = -1;
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline && records < 1; n++) {
    if (!create_transform(&k, at, n))
      break;
    records = metric_of(&k, at, BACKLOG_RECORDS);
    if (records < 1)
      t_sleep_ms(20);
  }
  CU_ASSERT_FATAL(records >= 1);
  double bytes = metric_of(&k, at, BACKLOG_BYTES);
  CU_ASSERT(bytes > 0);
  for (int i = 0; i < 20; i++)
    CU_ASSERT_FATAL(create_transform(&k, at, n++));
  double records2 = metric_of(&k, at, BACKLOG_RECORDS);
  double bytes2 = metric_of(&k, at, BACKLOG_BYTES);
  printf("\n  owner %s: %g records, %g bytes, then %g records, %g bytes\n", node_name(at), records,
         bytes, records2, bytes2);
  CU_ASSERT(records2 >= records + 20);
  CU_ASSERT(bytes2 > bytes);
  CU_ASSERT(metric_of(&k, at, "scened_replica_groups_shipped") == 1);
  CU_ASSERT(metric_of(&k, at, "scened_replica_backlog_bytes_all") >= bytes2);
  for (int i = 0; i < NODES; i++)
    if (i != at) {
      CU_ASSERT(metric_of(&k, i, "scened_replica_groups_shipped") == 0);
      CU_ASSERT(metric_of(&k, i, BACKLOG_RECORDS) == -1);
    }
  /* b1's records: world.create, then the n transform.creates (t0 to t(n-1)). */
  check_replicate(&k, at, n);
  cluster_stop(&k);
}

/* Whether daemon i lists w with follower as its only follower (in sync or not yet). */
static bool lists_follower(cluster *k, int i, const char *w, const char *follower) {
  cJSON *resp;
  const cJSON *item = world_item(k, i, w, &resp);
  bool ok = item && list_size(item, "followers") == 1 &&
            strcmp(first(item, "followers"), follower) == 0 && list_size(item, "insync") <= 1;
  cJSON_Delete(resp);
  return ok;
}

/* With --replicas 1: world.list with cluster names the group's follower on every daemon, and
 * /metrics gives the owner's and the follower's roles (and nothing on the third daemon). */
/* Whether hello on daemon i (no --acl: every right) names the cluster right. */
static bool hello_names_cluster(cluster *k, int i) {
  t_client c;
  if (t_client_connect(&c, k->d[i].port) != 0)
    return false;
  cJSON *r = t_client_call(&c, "{\"cmd\":\"hello\"}");
  const cJSON *rights = cJSON_GetObjectItemCaseSensitive(r, "rights");
  bool named = false;
  const cJSON *it;
  cJSON_ArrayForEach(it, rights) named |=
      cJSON_IsString(it) && strcmp(it->valuestring, "cluster") == 0;
  CU_ASSERT(t_resp_ok(r) && cJSON_GetArraySize(rights) >= 3);
  cJSON_Delete(r);
  t_client_close(&c);
  return named;
}

static void test_list_and_roles(void) {
  static const char *const extra[] = {"--replicas", "1", NULL};
  cluster k;
  int at = -1, fi = replicas_start(&k, extra, NULL, "l1.main", 1, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  /* Only where there is a change stream to follow is the right to follow it named. */
  CU_ASSERT(hello_names_cluster(&k, 0));
  const char *follower = node_name(fi);
  printf("\n  owner %s, follower %s\n", node_name(at), follower);
  for (int i = 0; i < NODES; i++) {
    bool seen = false;
    for (long deadline = t_now_ms() + 15000; !seen && t_now_ms() < deadline; t_sleep_ms(20))
      seen = lists_follower(&k, i, "l1.main", follower);
    CU_ASSERT(seen);
  }
  CU_ASSERT(wait_metric(&k, at, "scened_group_role{group=\"l1\",role=\"owner\"}", 1));
  /* 0, or 1 once the follower acknowledged the group's records (it may have already) */
  double insync = metric_of(&k, at, "scened_group_insync{group=\"l1\"}");
  CU_ASSERT(insync == 0 || insync == 1);
  CU_ASSERT(wait_metric(&k, fi, "scened_group_role{group=\"l1\",role=\"follower\"}", 1));
  CU_ASSERT(metric_of(&k, fi, "scened_group_role{group=\"l1\",role=\"owner\"}") == -1);
  CU_ASSERT(metric_of(&k, fi, "scened_group_insync{group=\"l1\"}") == -1);
  for (int i = 0; i < NODES; i++)
    if (i != at && i != fi) {
      CU_ASSERT(metric_of(&k, i, "scened_group_role{group=\"l1\",role=\"owner\"}") == -1);
      CU_ASSERT(metric_of(&k, i, "scened_group_role{group=\"l1\",role=\"follower\"}") == -1);
    }
  cluster_stop(&k);
}

static bool live_with_follower(const cJSON *v) { return !key_ended(v) && has_one_follower(v); }

/* With --replicas 1, world.destroy of a group's only world turns its replicas key into one that
 * says the group ended at its owner's epoch and names no follower (the group key stays with its
 * owner, as without replicas); a world created in the group again makes it a live record with a
 * follower. */
static void test_key_ends_with_last_world(void) {
  static const char *const extra[] = {"--replicas", "1", NULL};
  cluster k;
  int at = -1, fi = replicas_start(&k, extra, NULL, "d1.main", 1, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  long long rev = 0;
  cJSON *live = wait_json(&k, "/scened/replicas/d1", has_one_follower, &rev);
  CU_ASSERT_PTR_NOT_NULL_FATAL(live);
  cJSON *r = t_client_call(&k.c[at], "{\"cmd\":\"world.destroy\",\"world\":\"d1.main\"}");
  CU_ASSERT_FATAL(t_resp_ok(r));
  cJSON_Delete(r);
  cJSON *ended = wait_json(&k, "/scened/replicas/d1", key_ended, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ended);
  CU_ASSERT_EQUAL(list_size(ended, "followers"), 0);
  CU_ASSERT_EQUAL(list_size(ended, "insync"), 0);
  CU_ASSERT_STRING_EQUAL(t_resp_str(ended, "owner"), node_name(at));
  CU_ASSERT_EQUAL(t_resp_num(ended, "epoch"), t_resp_num(live, "epoch"));
  char *group = etcd_get(&k.e, "/scened/groups/d1", NULL);
  CU_ASSERT_PTR_NOT_NULL(group);
  free(group);
  r = t_client_call(&k.c[at], "{\"cmd\":\"world.create\",\"world\":\"d1.main\"}");
  CU_ASSERT_FATAL(t_resp_ok(r));
  cJSON_Delete(r);
  cJSON *again = wait_json(&k, "/scened/replicas/d1", live_with_follower, NULL);
  CU_ASSERT_PTR_NOT_NULL(again);
  cJSON_Delete(live);
  cJSON_Delete(ended);
  cJSON_Delete(again);
  cluster_stop(&k);
}

/* With --replicas 0 (the shared directory) nothing is shipped, no backlog or role figure shows,
 * no replicas key is written and world.list gives no followers. */
static void test_no_backlog_without_replicas(void) {
  START_CLUSTER(k, NULL);
  CU_ASSERT(!hello_names_cluster(&k, 0));
  int at = -1;
  cJSON *r = wait_ok_anywhere(&k, "{\"cmd\":\"world.create\",\"world\":\"b1.main\"}", 15000, &at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  for (int i = 0; i < 5; i++)
    CU_ASSERT_FATAL(create_transform(&k, at, i));
  for (int i = 0; i < NODES; i++) {
    char *page = NULL;
    CU_ASSERT_EQUAL(t_http_get(k.d[i].http_port, "/metrics", &page), 200);
    CU_ASSERT_PTR_NOT_NULL(page ? strstr(page, "scened_cluster_registered") : NULL);
    CU_ASSERT_PTR_NULL(page ? strstr(page, "scened_replica_") : "");
    CU_ASSERT_PTR_NULL(page ? strstr(page, "scened_group_role") : "");
    CU_ASSERT_PTR_NULL(page ? strstr(page, "scened_group_insync") : "");
    free(page);
    /* Other daemons list the world once its owner's node key says so (within seconds). */
    cJSON *resp = NULL;
    const cJSON *item = NULL;
    for (long deadline = t_now_ms() + 15000; !item && t_now_ms() < deadline; t_sleep_ms(20)) {
      cJSON_Delete(resp);
      item = world_item(&k, i, "b1.main", &resp);
    }
    CU_ASSERT_PTR_NOT_NULL(item);
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(item, "followers"));
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(item, "insync"));
    cJSON_Delete(resp);
  }
  /* The record runs from the cluster's tick: by the time every daemon lists the world (their
   * node keys refreshed), a replicas key would have been written. */
  char *group = etcd_get(&k.e, "/scened/groups/b1", NULL);
  char *replicas = etcd_get(&k.e, "/scened/replicas/b1", NULL);
  CU_ASSERT_PTR_NOT_NULL(group);
  CU_ASSERT_PTR_NULL(replicas);
  free(group);
  free(replicas);
  cluster_stop(&k);
}

/* The bytes of file path (*len), NULL when it cannot be read. */
static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *data = NULL;
  size_t cap = 0;
  *len = 0;
  for (;;) {
    if (*len == cap) {
      char *grown = realloc(data, cap = cap ? cap * 2 : 4096);
      if (!grown)
        break;
      data = grown;
    }
    size_t n = fread(data + *len, 1, cap - *len, f);
    *len += n;
    if (n == 0)
      break;
  }
  fclose(f);
  return data;
}

/* How many journal files of group dir (DATA/groups/g/epoch.E) on the follower are equal, byte
 * for byte and not empty, to the owner's of the same name; -1 when a pair differs. */
static int journals_equal(const char *follower_dir, const char *owner_dir) {
  DIR *d = opendir(follower_dir);
  if (!d)
    return 0;
  int same = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "journal.", 8) != 0)
      continue;
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/%s", follower_dir, e->d_name);
    snprintf(b, sizeof b, "%s/%s", owner_dir, e->d_name);
    size_t na = 0, nb = 0;
    char *da = read_all(a, &na), *db = read_all(b, &nb);
    if (da && db && na == nb && na > 0 && memcmp(da, db, na) == 0)
      same++;
    else if (na > 0 || nb > 0) {
      printf("\n  %s: %zu bytes, %s: %zu bytes\n", a, na, b, nb);
      same = -1;
    }
    free(da);
    free(db);
    if (same < 0)
      break;
  }
  closedir(d);
  return same;
}

/* With --replicas 1: the follower dials the owner, applies every record of the group from its
 * first (world.create) on, and journals them in its own directory, in the owner's epoch, the
 * same bytes as the owner's journal. */
static void test_follower_applies(void) {
  static const char *const extra[] = {"--replicas", "1", NULL};
  cluster k;
  if (!replicas_cluster(&k, extra))
    return;
  int at = -1;
  cJSON *r = wait_ok_anywhere(&k, "{\"cmd\":\"world.create\",\"world\":\"b1.main\"}", 15000, &at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  long long unused;
  cJSON *rep = wait_json(&k, "/scened/replicas/b1", has_one_follower, &unused);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
  char follower[64];
  snprintf(follower, sizeof follower, "%s", first(rep, "followers"));
  const cJSON *ep = cJSON_GetObjectItemCaseSensitive(rep, "epoch");
  long long epoch = cJSON_IsNumber(ep) ? (long long)ep->valuedouble : -1;
  cJSON_Delete(rep);
  int fi = -1;
  for (int i = 0; i < NODES; i++)
    if (strcmp(node_name(i), follower) == 0)
      fi = i;
  CU_ASSERT_FATAL(fi >= 0 && fi != at && epoch > 0);
  enum { WRITES = 30 };
  for (int i = 0; i < WRITES; i++)
    CU_ASSERT_FATAL(create_transform(&k, at, i));
  /* world.create and the transform.creates. */
  bool applied = wait_metric(&k, fi, "scened_replica_applied_total{group=\"b1\"}", WRITES + 1);
  printf("\n  owner %s, follower %s, epoch %lld: applied %g of %d\n", node_name(at), follower,
         epoch, metric_of(&k, fi, "scened_replica_applied_total{group=\"b1\"}"), WRITES + 1);
  CU_ASSERT(applied);
  CU_ASSERT(metric_of(&k, fi, "scened_replica_groups_followed") == 1);
  for (int i = 0; i < NODES; i++)
    if (i != fi)
      CU_ASSERT(metric_of(&k, i, "scened_replica_groups_followed") == 0);
  /* Its journal is written with the turn's commit, before the ack: the same bytes as the
   * owner's once both have them. */
  char fdir[256], odir[256];
  snprintf(fdir, sizeof fdir, "%s/%s/groups/b1/epoch.%lld", k.data, follower, epoch);
  snprintf(odir, sizeof odir, "%s/%s/groups/b1/epoch.%lld", k.data, node_name(at), epoch);
  int same = 0;
  for (long deadline = t_now_ms() + 15000; same <= 0 && t_now_ms() < deadline; t_sleep_ms(20))
    same = journals_equal(fdir, odir);
  CU_ASSERT(same >= 1);
  /* The follower does not serve the group: a write there is sent to the owner. */
  r = t_client_call(&k.c[fi], "{\"cmd\":\"transform.create\",\"world\":\"b1.main\"}");
  CU_ASSERT(r && !t_resp_ok(r) && strcmp(t_resp_code(r), "MOVED") == 0);
  cJSON_Delete(r);
  cluster_stop(&k);
}

/* Whether daemon i's world.list with cluster gives w's insync as want (a node name, or ""
 * for none). */
static bool lists_insync(cluster *k, int i, const char *w, const char *want) {
  cJSON *resp;
  const cJSON *item = world_item(k, i, w, &resp);
  bool ok =
      item && (want[0] ? list_size(item, "insync") == 1 && strcmp(first(item, "insync"), want) == 0
                       : list_size(item, "insync") == 0);
  cJSON_Delete(resp);
  return ok;
}

static bool wait_insync(cluster *k, int i, const char *w, const char *want) {
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20))
    if (lists_insync(k, i, w, want))
      return true;
  return false;
}

/* With --replica-timeout 300: the follower joins insync once it acknowledged the owner's
 * records; stopped (SIGSTOP), it leaves once a write waits for its ack past the timeout, and
 * the owner's lag figure counts what it did not confirm; resumed, it comes back. */
static void test_insync(void) {
  static const char *const extra[] = {"--replicas", "1", "--replica-timeout", "300", NULL};
  cluster k;
  int at = -1, fi = replicas_start(&k, extra, NULL, "b1.main", 1, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  const char *follower = node_name(fi);
  char lag[160];
  snprintf(lag, sizeof lag, "scened_replica_lag_changes{group=\"b1\",node=\"%s\"}", follower);
  for (int i = 0; i < 5; i++)
    CU_ASSERT_FATAL(create_transform(&k, at, i));
  CU_ASSERT(wait_insync(&k, at, "b1.main", follower));
  CU_ASSERT(wait_insync(&k, fi, "b1.main", follower));
  CU_ASSERT(wait_metric(&k, at, "scened_group_insync{group=\"b1\"}", 1));
  CU_ASSERT(wait_metric(&k, at, lag, 0));
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  for (int i = 5; i < 10; i++)
    CU_ASSERT(create_transform(&k, at, i));
  bool left = wait_insync(&k, at, "b1.main", "");
  printf("\n  owner %s, follower %s stopped: insync left %d, lag %g\n", node_name(at), follower,
         left, metric_of(&k, at, lag));
  CU_ASSERT(left);
  CU_ASSERT(wait_metric(&k, at, "scened_group_insync{group=\"b1\"}", 0));
  CU_ASSERT(metric_of(&k, at, lag) == 5);
  long long rev;
  char *text = etcd_get(&k.e, "/scened/replicas/b1", &rev);
  cJSON *v = text ? cJSON_Parse(text) : NULL;
  CU_ASSERT(v && list_size(v, "insync") == 0 && list_size(v, "followers") == 1);
  cJSON_Delete(v);
  free(text);
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  CU_ASSERT(wait_insync(&k, at, "b1.main", follower));
  CU_ASSERT(wait_metric(&k, at, lag, 0));
  cluster_stop(&k);
}

/* Starts three daemons with --replicas 1, --replica-timeout 1000 and durability; creates b1.main
 * and writes until the follower is in insync. Returns the follower's index (-1: no start). */
static int start_insync(cluster *k, const char *durability, int *at) {
  static const char *extra[] = {"--replicas", "1", "--replica-timeout", "1000", "--durability",
                                NULL,         NULL};
  extra[5] = durability;
  int fi = replicas_start(k, extra, NULL, "b1.main", 1, at);
  if (fi < 0)
    return -1;
  for (int i = 0; i < 5; i++)
    CU_ASSERT_FATAL(create_transform(k, *at, i));
  CU_ASSERT_FATAL(wait_insync(k, *at, "b1.main", node_name(fi)));
  return fi;
}

/* With the follower stopped, a write's ok is held until the follower leaves insync (past
 * --replica-timeout, recorded in etcd), under sync; under async it comes at once. */
static void check_stopped_follower(const char *durability) {
  cluster k;
  int at = -1, fi = start_insync(&k, durability, &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  bool sync = strcmp(durability, "sync") == 0;
  double alone = metric_of(&k, at, "scened_replica_alone_total");
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  long t0 = t_now_ms();
  CU_ASSERT_FATAL(t_client_send(&k.c[at], "{\"cmd\":\"transform.create\",\"world\":\"b1.main\","
                                          "\"name\":\"held\",\"id\":7}") == 0);
  cJSON *r = t_client_recv_json(&k.c[at], sync ? 700 : 5000);
  long early = t_now_ms() - t0;
  if (sync) {
    CU_ASSERT_PTR_NULL(r); /* not before the timeout */
    cJSON_Delete(r);
    r = t_client_recv_json(&k.c[at], 15000);
  }
  long took = t_now_ms() - t0;
  printf("\n  %s: owner %s, follower %s stopped: the ok came after %ld ms\n", durability,
         node_name(at), node_name(fi), took);
  CU_ASSERT(t_resp_ok(r) && t_resp_num(r, "id") == 7);
  cJSON_Delete(r);
  if (sync) {
    CU_ASSERT(took >= 900);
    /* Released only once etcd recorded the follower's leaving. */
    CU_ASSERT(lists_insync(&k, at, "b1.main", ""));
    CU_ASSERT(create_transform(&k, at, 100)); /* nobody in sync: at once, counted */
    CU_ASSERT(metric_of(&k, at, "scened_replica_alone_total") >= alone + 1);
  } else {
    CU_ASSERT(early < 500);
  }
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  cluster_stop(&k);
}

static void test_sync_held(void) { check_stopped_follower("sync"); }
static void test_async_at_once(void) { check_stopped_follower("async"); }

/* A pipelined burst of sync writes with the follower in sync: every ok, in order. */
static void test_sync_pipelined(void) {
  enum { BURST = 100 };
  cluster k;
  int at = -1, fi = start_insync(&k, "sync", &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  double alone = metric_of(&k, at, "scened_replica_alone_total");
  static char burst[BURST * 96];
  size_t len = 0;
  for (int i = 0; i < BURST; i++)
    len += (size_t)snprintf(burst + len, sizeof burst - len,
                            "{\"cmd\":\"transform.create\",\"world\":\"b1.main\","
                            "\"name\":\"p%d\",\"id\":%d}\n",
                            i, i);
  CU_ASSERT_FATAL(len < sizeof burst);
  CU_ASSERT_FATAL(t_client_send_raw(&k.c[at], burst, len) == 0);
  int good = 0;
  for (int i = 0; i < BURST; i++) {
    cJSON *r = t_client_recv_json(&k.c[at], 15000);
    if (t_resp_ok(r) && t_resp_num(r, "id") == i)
      good++;
    else if (good == i)
      t_report("a pipelined write out of order or failed", r);
    cJSON_Delete(r);
  }
  printf("\n  %d of %d pipelined sync writes ok in order\n", good, BURST);
  CU_ASSERT(good == BURST);
  CU_ASSERT(lists_insync(&k, at, "b1.main", node_name(fi)));
  CU_ASSERT(metric_of(&k, at, "scened_replica_alone_total") == alone);
  cluster_stop(&k);
}

/* The replicas key's epoch, once it is above old (-1: not within the deadline). */
static long long wait_new_epoch(cluster *k, long long old, char *follower, size_t cap) {
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    long long rev, epoch = -1;
    char *text = etcd_get(&k->e, "/scened/replicas/b1", &rev);
    cJSON *v = text ? cJSON_Parse(text) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(v, "epoch");
    if (cJSON_IsNumber(e) && e->valuedouble > (double)old && list_size(v, "followers") == 1) {
      epoch = (long long)e->valuedouble;
      snprintf(follower, cap, "%s", first(v, "followers"));
    }
    cJSON_Delete(v);
    free(text);
    if (epoch > 0)
      return epoch;
  }
  return -1;
}

/* kill -9 of the owner under sync: the in-sync follower claims the group and serves it from
 * its copy, with every acknowledged write, and records a new epoch with a follower of its own. */
static void test_takeover(void) {
  enum { WRITES = 30 };
  cluster k;
  int at = -1, fi = start_insync(&k, "sync", &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  long long old_epoch = group_epoch(&k);
  int acked = 0;
  for (int i = 0; i < WRITES; i++)
    acked += create_transform(&k, at, 10 + i) ? 1 : 0;
  CU_ASSERT_FATAL(acked == WRITES);
  long killed = t_now_ms();
  node_stop(&k, at, SIGKILL);
  int now_at = -1;
  cJSON *r =
      wait_ok_anywhere(&k, "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"t0\"}",
                       TTL_MS + 15000, &now_at);
  long took = t_now_ms() - killed;
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  printf("\n  owner %s killed: %s (the in-sync follower was %s) answers after %ld ms (TTL %d ms)\n",
         node_name(at), node_name(now_at), node_name(fi), took, TTL_MS);
  CU_ASSERT_EQUAL(now_at, fi);
  /* served from memory, not loaded from its directory */
  CU_ASSERT(t_daemon_log_contains(&k.d[fi], "group promoted from its copy"));
  int missing = 0;
  for (int i = 0; i < 5 + WRITES; i++) {
    cJSON *f = t_client_call(&k.c[now_at],
                             "{\"cmd\":\"transform.find\",\"world\":\"b1.main\",\"path\":\"t%d\"}",
                             i < 5 ? i : 10 + i - 5);
    if (!t_resp_ok(f) && missing++ < 3)
      t_report("an acknowledged write is missing", f);
    cJSON_Delete(f);
  }
  CU_ASSERT_EQUAL(missing, 0);
  char follower[64] = "";
  long long epoch = wait_new_epoch(&k, old_epoch, follower, sizeof follower);
  printf("  replicas key: epoch %lld -> %lld, follower %s\n", old_epoch, epoch, follower);
  CU_ASSERT(epoch > old_epoch);
  CU_ASSERT(strcmp(follower, node_name(fi)) != 0 && strcmp(follower, node_name(at)) != 0);
  CU_ASSERT(create_transform(&k, now_at, 99));
  cluster_stop(&k);
}

/* How many of n reads of b1.main, one each 200 ms, daemon i answered UNAVAILABLE. */
static int unavailable_reads(cluster *k, int i, int n) {
  int got = 0;
  for (int j = 0; j < n; j++, t_sleep_ms(200)) {
    cJSON *r = t_client_call(&k->c[i], "{\"cmd\":\"transform.find\",\"world\":\"b1.main\","
                                       "\"path\":\"t0\"}");
    if (r && strcmp(t_resp_code(r), "UNAVAILABLE") == 0)
      got++;
    else if (got == j)
      t_report("a read of an orphaned group did not answer UNAVAILABLE", r);
    cJSON_Delete(r);
  }
  return got;
}

/* The in-sync set recorded empty (the follower stopped past --replica-timeout), then kill -9 of
 * the owner: only the owner could claim the group, so nobody does; its world answers
 * UNAVAILABLE on the third daemon and on the follower once it runs again. */
static void test_empty_insync_waits(void) {
  cluster k;
  int at = -1, fi = start_insync(&k, "sync", &at);
  if (fi < 0) {
    cluster_stop(&k);
    return;
  }
  int third = NODES - at - fi;
  pid_t pid = k.d[fi].pid;
  CU_ASSERT_FATAL(pid > 0 && kill(pid, SIGSTOP) == 0);
  CU_ASSERT(create_transform(&k, at, 50)); /* held until the follower leaves insync */
  long long rev;
  char *text = etcd_get(&k.e, "/scened/replicas/b1", &rev);
  cJSON *v = text ? cJSON_Parse(text) : NULL;
  free(text);
  CU_ASSERT(list_size(v, "insync") == 0);
  CU_ASSERT_STRING_EQUAL(t_resp_str(v, "owner"), node_name(at));
  cJSON_Delete(v);
  node_stop(&k, at, SIGKILL);
  char *key = NULL;
  for (long deadline = t_now_ms() + TTL_MS + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    free(key);
    if (!(key = etcd_get(&k.e, "/scened/groups/b1", &rev)))
      break;
  }
  CU_ASSERT_PTR_NULL_FATAL(key); /* the owner's lease expired */
  int n = 2 * TTL_MS / 200;
  int third_got = unavailable_reads(&k, third, n);
  key = etcd_get(&k.e, "/scened/groups/b1", &rev);
  CU_ASSERT_PTR_NULL(key); /* nobody claimed */
  free(key);
  CU_ASSERT(kill(pid, SIGCONT) == 0);
  int follower_got = unavailable_reads(&k, fi, TTL_MS / 200);
  key = etcd_get(&k.e, "/scened/groups/b1", &rev);
  CU_ASSERT_PTR_NULL(key);
  free(key);
  printf("\n  owner %s killed with insync empty: %d of %d reads UNAVAILABLE on %s, %d of %d on "
         "the follower %s\n",
         node_name(at), third_got, n, node_name(third), follower_got, TTL_MS / 200, node_name(fi));
  CU_ASSERT_EQUAL(third_got, n);
  CU_ASSERT_EQUAL(follower_got, TTL_MS / 200);
  cluster_stop(&k);
}

int t_register_cluster_replicas(void) {
  static const t_test tests[] = {
      {"the owner records its groups' followers", test_followers_recorded},
      {"the owner's backlog grows with its writes", test_backlog_grows},
      {"a follower applies and journals the owner's records", test_follower_applies},
      {"world.list and /metrics show followers and roles", test_list_and_roles},
      {"the replicas key says the group ended with its last world", test_key_ends_with_last_world},
      {"no backlog, key or followers without replicas", test_no_backlog_without_replicas},
      {"a follower joins and leaves the in-sync set", test_insync},
      {"sync: a stopped follower holds the ok until it leaves insync", test_sync_held},
      {"async: a stopped follower holds nothing", test_async_at_once},
      {"sync: a pipelined burst is answered in order", test_sync_pipelined},
      {"kill -9 of the owner: the in-sync follower takes over", test_takeover},
      {"kill -9 of the owner with insync empty: nobody claims", test_empty_insync_waits},
  };
  return T_ADD_SUITE("cluster_replicas", NULL, NULL, tests);
}

/* scripts/cluster.sh (make cluster) on free ports and a temporary directory: its daemons run with
 * --replicas 1, each on a data directory of its own, and a new group gets a follower in its
 * in-sync set that keeps a copy in its own directory (REPLICAS=0: the three share one directory);
 * stopped by SIGTERM or a Ctrl-C it stops its daemons first, waited for, then etcd, and says
 * nothing of a crash; a port that another program holds fails the start at once, with the bind
 * error; --help, an argument and a bad REPLICAS start nothing. The script's etcd and daemons,
 * found as its children, are remembered so that a test that fails still stops them. */
#include "client_fixtures.h"
#include "etcd.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define START_MS 60000
#define STOP_MS 60000
/* node n: BASE + 2n and BASE + 2n + 1; etcd: BASE + 6 and BASE + 7 */
#define PORTS 8
#define MAX_KIDS 16

/* The script's run: its directory, ports, and the etcd and daemons it started. */
typedef struct run {
  char dir[64];
  int base;
  t_proc p;
  pid_t kids[MAX_KIDS];
  char kind[MAX_KIDS][32]; /* "etcd" or "scened" */
  int nkids;
} run;

/* The state letter of a process (from /proc/PID/stat) and its name; 0 when there is none. */
static char proc_state(pid_t pid, char *comm, size_t n) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  char *open = strchr(buf, '('), *close = strrchr(buf, ')');
  if (!open || !close || close[1] != ' ')
    return 0;
  if (comm)
    snprintf(comm, n, "%.*s", (int)(close - open - 1), open + 1);
  return close[2];
}

/* True when the process is gone or a zombie (it has exited; its parent may not have reaped it
 * yet), or no longer the program it was. */
static bool exited(const run *r, int i) {
  char comm[32];
  char state = proc_state(r->kids[i], comm, sizeof comm);
  return !state || state == 'Z' || state == 'X' || strcmp(comm, r->kind[i]) != 0;
}

/* Remembers the script's children that are etcd or a daemon, once each. */
static void find_kids(run *r) {
  DIR *d = opendir("/proc");
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    pid_t pid = (pid_t)atoi(e->d_name);
    if (pid <= 0)
      continue;
    char path[64], buf[512], comm[32];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *close = strrchr(buf, ')');
    int ppid = 0;
    if (!close || sscanf(close + 2, "%*c %d", &ppid) != 1 || ppid != r->p.pid)
      continue;
    char state = proc_state(pid, comm, sizeof comm);
    if (!state || state == 'Z' || (strcmp(comm, "etcd") != 0 && strcmp(comm, "scened") != 0))
      continue;
    bool known = false;
    for (int i = 0; i < r->nkids && !known; i++)
      known = r->kids[i] == pid;
    if (known || r->nkids == MAX_KIDS)
      continue;
    r->kids[r->nkids] = pid;
    snprintf(r->kind[r->nkids], sizeof r->kind[0], "%s", comm);
    r->nkids++;
    t_child_adopt(pid);
  }
  closedir(d);
}

static int count_kind(const run *r, const char *kind) {
  int n = 0;
  for (int i = 0; i < r->nkids; i++)
    n += strcmp(r->kind[i], kind) == 0;
  return n;
}

/* Starts the script on r->base's ports, in r->dir; with own_group, in a process group (and
 * session) of its own, as a shell starts a foreground job, through setsid. replicas: REPLICAS
 * for it (NULL: its default); arg: one argument for it (NULL: none). */
static bool run_start_with(run *r, bool own_group, const char *replicas, const char *arg) {
  char script[1024], bin[PATH_MAX], env[6][PATH_MAX + 16];
  if (!t_find_script("cluster.sh", script, sizeof script) || !realpath(t_daemon_bin(), bin))
    return false;
  snprintf(env[0], sizeof env[0], "BUILD=%s", dirname(bin));
  snprintf(env[1], sizeof env[1], "BASE_PORT=%d", r->base);
  snprintf(env[2], sizeof env[2], "ETCD_PORT=%d", r->base + 6);
  snprintf(env[3], sizeof env[3], "DATA=%s/data", r->dir);
  snprintf(env[4], sizeof env[4], "RUN=%s/run", r->dir);
  snprintf(env[5], sizeof env[5], "REPLICAS=%s", replicas ? replicas : "");
  const char *set[] = {env[0], env[1], env[2], env[3], env[4], replicas ? env[5] : NULL, NULL};
  const char *setsid = access("/usr/bin/setsid", X_OK) == 0 ? "/usr/bin/setsid" : "/bin/setsid";
  const char *args[] = {script, arg, NULL};
  const char *script_args[] = {arg, NULL};
  /* A signal ignored when bash starts cannot be trapped: the script gets SIGINT as a shell in
   * the foreground would give it, whatever this process inherited. */
  void (*sigint_before)(int) = signal(SIGINT, SIG_DFL);
  /* setsid execs in place (the child is no group leader): the script keeps the pid. */
  bool started = own_group ? proc_start(&r->p, setsid, args, set, NULL, 0)
                           : proc_start(&r->p, script, arg ? script_args : NULL, set, NULL, 0);
  signal(SIGINT, sigint_before);
  return started;
}

static bool run_start(run *r, bool own_group) { return run_start_with(r, own_group, NULL, NULL); }

/* Runs the script to its end (killed after ms): its exit code as t_proc_wait gives it. */
static int run_wait(run *r, int ms) {
  long deadline = t_now_ms() + ms;
  while (!t_proc_pump(&r->p, 20) && t_now_ms() < deadline)
    find_kids(r);
  return t_proc_wait(&r->p, (int)(deadline > t_now_ms() ? deadline - t_now_ms() : 1));
}

/* Once the script has ended: every process it started must have exited; any left is killed
 * (and the test fails). */
static void run_end(run *r) {
  for (int i = 0; i < r->nkids; i++) {
    long deadline = t_now_ms() + 10000;
    while (!exited(r, i) && t_now_ms() < deadline)
      t_sleep_ms(20);
    if (!exited(r, i)) {
      CU_FAIL("a process the script started outlived it");
      fprintf(stderr, "  %s (pid %d) still runs; killed\n", r->kind[i], (int)r->kids[i]);
      kill(r->kids[i], SIGKILL);
    }
    t_child_reaped(r->kids[i]);
  }
  t_proc_free(&r->p);
}

static char *node_log(const run *r, int n) {
  char path[128];
  snprintf(path, sizeof path, "%s/run/node%d.log", r->dir, n);
  return t_read_file(path);
}

/* ---- the daemons' directories and replicas ----------------------------------------------------
 */

/* The value after flag in the command line of process pid, into out ("" when absent). */
static void arg_of(pid_t pid, const char *flag, char *out, size_t n) {
  char path[64], buf[4096];
  out[0] = '\0';
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return;
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
    if (strcmp(buf + i, flag) == 0 && i + strlen(buf + i) + 1 < len) {
      snprintf(out, n, "%s", buf + i + strlen(buf + i) + 1);
      return;
    }
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Each daemon's --replicas is replicas, and its --data is DATA/NODE with replicas, DATA
 * without; true when all three are so. */
static bool daemons_configured(const run *r, const char *replicas) {
  bool good = true;
  int seen = 0;
  for (int i = 0; i < r->nkids; i++) {
    if (strcmp(r->kind[i], "scened") != 0)
      continue;
    char node[32], data[PATH_MAX], reps[16], want[PATH_MAX + 64];
    arg_of(r->kids[i], "--node", node, sizeof node);
    arg_of(r->kids[i], "--data", data, sizeof data);
    arg_of(r->kids[i], "--replicas", reps, sizeof reps);
    if (strcmp(replicas, "0") != 0)
      snprintf(want, sizeof want, "%s/data/%s", r->dir, node);
    else
      snprintf(want, sizeof want, "%s/data", r->dir);
    bool ok = node[0] && strcmp(data, want) == 0 && strcmp(reps, replicas) == 0 && is_dir(data);
    if (!ok)
      fprintf(stderr, "  %s: --data \"%s\" (wanted \"%s\"), --replicas \"%s\" (wanted %s)\n", node,
              data, want, reps, replicas);
    good = good && ok;
    seen++;
  }
  return good && seen == 3;
}

static const char *first_of(const cJSON *w, const char *member) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(w, member);
  return cJSON_IsArray(list) && cJSON_GetArraySize(list) == 1 && cJSON_IsString(list->child)
             ? list->child->valuestring
             : NULL;
}

/* world.list with cluster on c once match1.main has one follower, also in its in-sync set (20 s
 * at most): the owner's and the follower's names into owner and follower; false when that never
 * came. */
static bool wait_follower(t_client *c, char *owner, char *follower, size_t n) {
  long deadline = t_now_ms() + 20000;
  while (t_now_ms() < deadline) {
    cJSON *r = OK(c, "{\"cmd\":\"world.list\",\"cluster\":true}");
    const cJSON *w = NULL, *worlds = cJSON_GetObjectItemCaseSensitive(r, "worlds");
    cJSON_ArrayForEach(w, worlds) if (t_resp_str_is(w, "name", "match1.main")) break;
    const cJSON *node = w ? cJSON_GetObjectItemCaseSensitive(w, "node") : NULL;
    const char *f = w ? first_of(w, "followers") : NULL, *in = w ? first_of(w, "insync") : NULL;
    bool done =
        cJSON_IsString(node) && f && in && strcmp(f, in) == 0 && strcmp(f, node->valuestring) != 0;
    if (done) {
      snprintf(owner, n, "%s", node->valuestring);
      snprintf(follower, n, "%s", f);
    }
    cJSON_Delete(r);
    if (done)
      return true;
    t_sleep_ms(100);
  }
  return false;
}

/* world.list with cluster on the follower's daemon (its protocol port) names match1.main once,
 * on its owner (10 s at most, as the owner publishes its worlds), never as the follower's own. */
static void check_follower_list(const run *r, const char *owner, const char *follower) {
  int n = follower[0] == 'n' ? atoi(follower + 4) : -1;
  t_client c;
  if (n < 0 || n > 2 || !CONNECT(&c, r->base + 2 * n)) {
    CU_FAIL("no follower to ask");
    return;
  }
  long deadline = t_now_ms() + 10000;
  int count = 0, own = 0;
  bool listed = false;
  while (!listed && t_now_ms() < deadline) {
    cJSON *l = OK(&c, "{\"cmd\":\"world.list\",\"cluster\":true}");
    const cJSON *w;
    count = 0;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(l, "worlds")) {
      if (!t_resp_str_is(w, "name", "match1.main"))
        continue;
      count++;
      own += !t_resp_str_is(w, "node", owner);
    }
    cJSON_Delete(l);
    listed = count > 0;
    if (!listed)
      t_sleep_ms(100);
  }
  CU_ASSERT_EQUAL(count, 1);
  CU_ASSERT_EQUAL(own, 0);
  if (count != 1 || own)
    fprintf(stderr, "  %s's world.list: match1.main %d times, %d not on its owner %s\n", follower,
            count, own, owner);
  t_client_close(&c);
}

/* Where match1's copies are: with replicas, in the owner's and the follower's own directories
 * and no other (nothing in DATA itself but the three); without, in the shared DATA. */
static void check_copies(const run *r, bool replicas, const char *owner, const char *follower) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/data/groups/match1", r->dir);
  CU_ASSERT(is_dir(path) == !replicas);
  for (int n = 0; n < 3; n++) {
    char node[16];
    snprintf(node, sizeof node, "node%d", n);
    snprintf(path, sizeof path, "%s/data/%s", r->dir, node);
    CU_ASSERT(is_dir(path) == replicas);
    snprintf(path, sizeof path, "%s/data/%s/groups/match1", r->dir, node);
    bool holds = replicas && (strcmp(node, owner) == 0 || strcmp(node, follower) == 0);
    CU_ASSERT(is_dir(path) == holds);
    if (is_dir(path) != holds)
      fprintf(stderr, "  %s: %s a copy of match1 (owner %s, follower %s)\n", node,
              holds ? "lacks" : "has", owner, follower);
  }
}

/* ---- a deliberate stop ----------------------------------------------------------------------- */

/* sig to the script once the cluster is up (and holds a world), or to its process group as a
 * terminal's Ctrl-C does: it exits 0 without the crash message; every daemon released its groups
 * (revoking its lease in etcd, which was still there) on one signal, and etcd was never seen
 * gone while a daemon ran. replicas: REPLICAS for the script (NULL: its default, 1); with
 * replicas the world gets a follower in its in-sync set, whose own directory holds a copy. */
static void stop_cluster(int sig, bool group, const char *replicas) {
  run r = {.base = free_ports(PORTS)};
  CU_ASSERT_FATAL(r.base > 0);
  CU_ASSERT_FATAL(t_temp_dir(r.dir, sizeof r.dir, "cluster-script"));
  CU_ASSERT_FATAL(run_start_with(&r, group, replicas, NULL));
  bool with_replicas = !replicas || strcmp(replicas, "0") != 0;
  long deadline = t_now_ms() + START_MS;
  bool up = false;
  while (!up && t_now_ms() < deadline) {
    if (t_proc_pump(&r.p, 50))
      break; /* ended: not up */
    find_kids(&r);
    up = strstr(text_str(&r.p.out), "\nTry:\n") != NULL && r.nkids == 4;
  }
  CU_ASSERT(up);
  CU_ASSERT_EQUAL(count_kind(&r, "etcd"), 1);
  CU_ASSERT_EQUAL(count_kind(&r, "scened"), 3);
  CU_ASSERT(up && daemons_configured(&r, replicas ? replicas : "1"));
  if (up) {
    t_client c;
    if (CONNECT(&c, r.base)) {
      OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"match1.main\",\"node\":\"auto\"}");
      char owner[32] = "", follower[32] = "";
      if (with_replicas) {
        bool followed = wait_follower(&c, owner, follower, sizeof owner);
        CU_ASSERT(followed);
        printf("  match1: owner %s, follower %s\n", owner, follower);
        if (followed)
          check_follower_list(&r, owner, follower);
      } else {
        cJSON *l = OK(&c, "{\"cmd\":\"world.list\",\"cluster\":true}");
        const cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(l, "worlds"), 0);
        CU_ASSERT(t_resp_str_is(w, "name", "match1.main"));
        CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(w, "followers"));
        cJSON_Delete(l);
      }
      check_copies(&r, with_replicas, owner, follower);
      t_client_close(&c);
    }
  }

  kill(group ? -r.p.pid : r.p.pid, sig);
  int etcd_at = -1;
  for (int i = 0; i < r.nkids; i++)
    if (!strcmp(r.kind[i], "etcd"))
      etcd_at = i;
  bool order_ok = true;
  deadline = t_now_ms() + STOP_MS;
  bool ended = false;
  while (!ended && t_now_ms() < deadline) {
    ended = t_proc_pump(&r.p, 2);
    /* etcd first: a daemon seen running after it is a stop out of order */
    bool etcd_gone = etcd_at >= 0 && exited(&r, etcd_at);
    for (int i = 0; i < r.nkids; i++)
      if (etcd_gone && i != etcd_at && !exited(&r, i))
        order_ok = false;
  }
  int code = t_proc_wait(&r.p, 1000);
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT(order_ok);
  CU_ASSERT_PTR_NULL(strstr(text_str(&r.p.err), "stopping the rest"));
  CU_ASSERT_PTR_NULL(strstr(text_str(&r.p.err), "cluster.sh:"));
  bool logs_ok = true;
  for (int n = 0; n < 3; n++) {
    char *log = node_log(&r, n);
    bool released = log && strstr(log, "cluster: groups released");
    bool unrevoked = log && strstr(log, "cannot revoke the lease");
    bool twice = log && strstr(log, "second signal");
    CU_ASSERT(released && !unrevoked && !twice);
    if (!released || unrevoked || twice) {
      logs_ok = false;
      fprintf(stderr, "  node%d's log:\n%s\n", n, log ? log : "(none)");
    }
    free(log);
  }
  if (code != 0 || !order_ok || !logs_ok)
    fprintf(stderr, "  cluster.sh: exit %d, out:\n%s\n  err:\n%s\n", code, text_str(&r.p.out),
            text_str(&r.p.err));
  run_end(&r);
  t_remove_temp_dir(r.dir);
}

static void test_sigterm(void) { stop_cluster(SIGTERM, false, NULL); }

static void test_ctrl_c(void) { stop_cluster(SIGINT, true, NULL); }

static void test_shared(void) { stop_cluster(SIGTERM, false, "0"); }

/* ---- a port in use --------------------------------------------------------------------------- */

/* True when something accepts connections on 127.0.0.1:port. */
static bool listened(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  bool yes = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0)
    close(fd);
  return yes;
}

/* A socket listening on 127.0.0.1:port that never answers (close-on-exec: the script's
 * processes do not inherit it); -1 when the port cannot be had. */
static int hold_port(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 8) == 0)
    return fd;
  if (fd >= 0)
    close(fd);
  return -1;
}

/* The script with port held by another program: it exits 1 soon, names the process that failed
 * (who) and prints what it said, never prints the cluster's banner, and leaves nothing
 * running. */
static void expect_start_fails(run *r, int held, const char *who, const char *says) {
  long t0 = t_now_ms();
  CU_ASSERT_FATAL(run_start(r, false));
  int code = run_wait(r, START_MS);
  long ms = t_now_ms() - t0;
  const char *err = text_str(&r->p.err);
  bool good =
      code == 1 && strstr(err, who) && strstr(err, says) && !strstr(text_str(&r->p.out), "Try:");
  CU_ASSERT(good);
  printf("  the start failed after %ld ms (exit %d)\n", ms, code);
  if (!good)
    fprintf(stderr, "  cluster.sh: exit %d after %ld ms; wanted \"%s\"; out:\n%s\n  err:\n%s\n",
            code, ms, says, text_str(&r->p.out), err);
  run_end(r);
  /* what did start was stopped: nothing listens on the ports but the one held */
  for (int port = r->base; port < r->base + PORTS; port++)
    if (port != held)
      CU_ASSERT(!listened(port));
}

/* A daemon already on node0's HTTP port (make run beside make cluster): it answers /readyz
 * there, which must not pass for node0's. */
static void test_http_port_taken(void) {
  run r = {.base = free_ports(PORTS)};
  CU_ASSERT_FATAL(r.base > 0);
  CU_ASSERT_FATAL(t_temp_dir(r.dir, sizeof r.dir, "cluster-script"));
  char http[32];
  snprintf(http, sizeof http, "127.0.0.1:%d", r.base + 1);
  const char *args[] = {"--http", http, NULL};
  t_daemon other;
  CU_ASSERT_FATAL(t_daemon_start(&other, args) == 0);
  char says[96];
  snprintf(says, sizeof says, "cannot listen for http on 127.0.0.1:%d: address already in use",
           r.base + 1);
  expect_start_fails(&r, r.base + 1, "node0 exited while starting", says);
  CU_ASSERT_EQUAL(t_daemon_stop(&other, SIGTERM, 10000), 0);
  t_remove_temp_dir(r.dir);
}

/* A listener on etcd's client port that never answers: etcd cannot bind, and the script says
 * so instead of waiting on that listener. */
static void test_etcd_port_taken(void) {
  run r = {.base = free_ports(PORTS)};
  CU_ASSERT_FATAL(r.base > 0);
  CU_ASSERT_FATAL(t_temp_dir(r.dir, sizeof r.dir, "cluster-script"));
  int held = hold_port(r.base + 6);
  CU_ASSERT_FATAL(held >= 0);
  expect_start_fails(&r, r.base + 6, "etcd exited while starting", "address already in use");
  close(held);
  t_remove_temp_dir(r.dir);
}

/* ---- arguments and settings ------------------------------------------------------------------ */

/* The script with arg and REPLICAS=replicas (NULL: unset) exits code at once, having started
 * nothing, its stdout or stderr (out says which) holding says. */
static void expect_exit(const char *arg, const char *replicas, int code, bool out,
                        const char *says) {
  run r = {.base = free_ports(PORTS)};
  CU_ASSERT_FATAL(r.base > 0);
  CU_ASSERT_FATAL(t_temp_dir(r.dir, sizeof r.dir, "cluster-script"));
  CU_ASSERT_FATAL(run_start_with(&r, false, replicas, arg));
  int got = run_wait(&r, 20000);
  const char *text = text_str(out ? &r.p.out : &r.p.err);
  bool good = got == code && strstr(text, says) && r.nkids == 0;
  CU_ASSERT(good);
  if (!good)
    fprintf(stderr,
            "  cluster.sh %s (REPLICAS=%s): exit %d, wanted %d and \"%s\"; out:\n%s\n  err:\n%s\n",
            arg ? arg : "", replicas ? replicas : "", got, code, says, text_str(&r.p.out),
            text_str(&r.p.err));
  run_end(&r);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/run", r.dir);
  CU_ASSERT(!is_dir(path));
  t_remove_temp_dir(r.dir);
}

static void test_arguments(void) {
  expect_exit("--help", NULL, 0, true, "REPLICAS=0 runs the shared-directory mode");
  expect_exit("-h", NULL, 0, true, "Node n listens on BASE_PORT + 2n");
  expect_exit("now", NULL, 2, false, "cluster.sh: no arguments");
  expect_exit(NULL, "3", 1, false, "REPLICAS must be a number (0 to 2), not \"3\"");
  expect_exit(NULL, "one", 1, false, "not \"one\"");
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_cluster_script(void) {
  static const t_test tests[] = {
      {"own directories, --replicas 1, a follower in sync with a copy of its own; SIGTERM: the "
       "daemons stop and release, then etcd; no crash message",
       test_sigterm},
      {"Ctrl-C (SIGINT to the group): the same, each daemon signalled once", test_ctrl_c},
      {"REPLICAS=0: one shared directory, no followers; SIGTERM stops it the same", test_shared},
      {"a daemon's HTTP port in use: the start fails at once with the bind error",
       test_http_port_taken},
      {"etcd's port in use: the start fails at once with etcd's bind error", test_etcd_port_taken},
      {"--help, an argument, a bad REPLICAS: an exit at once, nothing started", test_arguments},
  };
  return T_ADD_SUITE("cluster_script", NULL, NULL, tests);
}

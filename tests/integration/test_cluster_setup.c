/* The cluster against a real etcd, setting up: bad flags (one line, exit 2), the standalone data
 * layout migrating, etcd unreachable at start, and TLS with an access list across nodes. Every
 * test stops exactly what it started. */
#include "cluster_fixtures.h"
#include "daemon_fixtures.h"
#include "etcd.h"
#include "suites.h"

#include "scn_client.h"

#include <CUnit/CUnit.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- TLS and an access list in a cluster ----------------------------------------------------- */

/* Writes "HASH RIGHTS PREFIXES" for each "token rights prefixes" rule into path. */
static bool write_acl_file(const char *path, const char *const *rules) {
  FILE *f = fopen(path, "w");
  if (!f)
    return false;
  for (int i = 0; rules[i]; i++) {
    const char *space = strchr(rules[i], ' ');
    unsigned char md[32];
    unsigned len = 0;
    EVP_Digest(rules[i], (size_t)(space - rules[i]), md, &len, EVP_sha256(), NULL);
    for (int b = 0; b < 32; b++)
      fprintf(f, "%02x", md[b]);
    fprintf(f, "%s\n", space);
  }
  return fclose(f) == 0;
}

/* Two daemons with TLS and one access list, each owning a group of each kind: world.list with
 * cluster shows a token only the worlds under its prefixes, also those of the other node; the
 * client library follows MOVED to the owner over TLS, with the same CA, and keeps its token and
 * matrix form there. */
static void test_tls_acl_cluster(void) {
  char certs[64], data[64], acl[128], ca[128], cert[128], key[128];
  CU_ASSERT_FATAL(t_make_certs(certs, sizeof certs));
  CU_ASSERT_FATAL(t_temp_dir(data, sizeof data, "cluster-tls"));
  snprintf(acl, sizeof acl, "%s/acl", certs);
  snprintf(ca, sizeof ca, "%s/ca.pem", certs);
  snprintf(cert, sizeof cert, "%s/server.pem", certs);
  snprintf(key, sizeof key, "%s/server.key", certs);
  static const char *const rules[] = {"op-token read,write,admin *", "game-token read,write game",
                                      NULL};
  CU_ASSERT_FATAL(write_acl_file(acl, rules));
  etcd e = {0};
  t_daemon d[2];
  t_client c[2];
  bool up[2] = {false, false}, connected[2] = {false, false};
  if (!etcd_start(&e)) {
    CU_FAIL("etcd started");
    goto out;
  }
  t_tls_files trust = {.ca = ca};
  for (int i = 0; i < 2; i++) {
    const char *args[] = {"--cluster",  e.url,         "--data", data,         "--node",
                          node_name(i), "--lease-ttl", TTL,      "--tls-cert", cert,
                          "--tls-key",  key,           "--acl",  acl,          NULL};
    up[i] = START(&d[i], args);
    connected[i] = up[i] && CONNECT_TLS(&c[i], d[i].port, &trust);
    if (!connected[i])
      goto out;
    OKD(&c[i], "{\"cmd\":\"hello\",\"token\":\"op-token\"}");
  }
  long deadline = t_now_ms() + 15000;
  bool both = false; /* each daemon registered, and knowing the other */
  while (!both && t_now_ms() < deadline) {
    both = true;
    for (int i = 0; i < 2; i++) {
      cJSON *r = t_client_call(&c[i], "{\"cmd\":\"cluster.nodes\"}");
      const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(r, "nodes");
      both &= cJSON_IsArray(nodes) && cJSON_GetArraySize(nodes) == 2;
      cJSON_Delete(r);
    }
    if (!both)
      t_sleep_ms(20);
  }
  CU_ASSERT_FATAL(both);
  OKD(&c[0], "{\"cmd\":\"world.create\",\"world\":\"game1.a\"}");
  OKD(&c[0], "{\"cmd\":\"world.create\",\"world\":\"ops1.a\"}");
  OKD(&c[1], "{\"cmd\":\"world.create\",\"world\":\"game2.b\"}");
  OKD(&c[1], "{\"cmd\":\"world.create\",\"world\":\"ops2.b\"}");
  cJSON *r = OK(&c[0], "{\"cmd\":\"transform.create\",\"world\":\"game1.a\",\"t\":[1,2,3]}");
  double ent = cJSON_GetObjectItemCaseSensitive(r, "entity")->valuedouble;
  cJSON_Delete(r);

  /* The game token on n1 sees game1.a (n0's) and game2.b, never ops*; the operator's token
   * sees all four, once n1 knows n0's worlds. */
  t_client g;
  if (!CONNECT_TLS(&g, d[1].port, &trust))
    goto out;
  OKD(&g, "{\"cmd\":\"hello\",\"token\":\"game-token\"}");
  int all = 0, game = 0, others = 0;
  deadline = t_now_ms() + 10000;
  while (all != 4 && t_now_ms() < deadline) {
    all = listed(&c[1], NULL, NULL);
    if (all != 4)
      t_sleep_ms(50);
  }
  CU_ASSERT_EQUAL(all, 4);
  game = listed(&g, "game", &others);
  CU_ASSERT_EQUAL(game, 2);
  CU_ASSERT_EQUAL(others, 0);
  /* A world outside the prefix is refused before any routing. */
  ERR(&g, "UNAUTHORIZED", "{\"cmd\":\"transform.find\",\"world\":\"ops1.a\",\"path\":\"x\"}");
  t_client_close(&g);

  /* The library, asked on n1 for n0's world, follows MOVED over TLS and says hello there with
   * the token and the b64 form. */
  scn_cli_options o = {.host = "127.0.0.1",
                       .port = d[1].port,
                       .token = "game-token",
                       .matrices = SCN_CLI_MATRICES_B64,
                       .tls_ca = ca};
  char err[256] = "";
  scn_cli *cli = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL(cli);
  if (cli) {
    char line[160];
    snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"game1.a\",\"entity\":%.0f}",
             ent);
    cJSON *resp = NULL;
    CU_ASSERT_EQUAL(scn_cli_call_line(cli, line, &resp), SCN_CLI_OK);
    float m[16];
    const cJSON *world = cJSON_GetObjectItemCaseSensitive(resp, "world");
    CU_ASSERT(cJSON_IsString(world)); /* b64 on the owner too */
    CU_ASSERT(scn_cli_matrix_get(world, m) == 0 && m[12] == 1 && m[13] == 2 && m[14] == 3);
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", d[0].port);
    CU_ASSERT_STRING_EQUAL(scn_cli_addr(cli), want);
    cJSON_Delete(resp);
    scn_cli_close(cli);
  } else {
    fprintf(stderr, "  connect: %s\n", err);
  }
  /* world.move over TLS, by the operator; the game token may not move. */
  ERR(&c[1], "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"nobody\"}");
  OKD(&c[1], "{\"cmd\":\"hello\",\"token\":\"game-token\"}");
  ERR(&c[1], "UNAUTHORIZED", "{\"cmd\":\"world.move\",\"world\":\"game2.b\",\"to\":\"n0\"}");
  OKD(&c[1], "{\"cmd\":\"hello\",\"token\":\"op-token\"}");
  OKD(&c[1], "{\"cmd\":\"world.move\",\"world\":\"game2.b\",\"to\":\"n0\"}");
  r = CALL(&c[1], "{\"cmd\":\"transform.find\",\"world\":\"game2.b\",\"path\":\"x\"}");
  CU_ASSERT(t_resp_str_is(error_of(r), "code", "MOVED") &&
            t_resp_str_is(error_of(r), "node", "n0"));
  cJSON_Delete(r);
out:
  for (int i = 0; i < 2; i++) {
    if (connected[i])
      t_client_close(&c[i]);
    if (up[i])
      t_daemon_stop(&d[i], SIGTERM, 10000);
  }
  etcd_stop(&e, SIGTERM);
  if (e.dir[0])
    t_remove_temp_dir(e.dir);
  t_remove_temp_dir(data);
  t_remove_temp_dir(certs);
}

/* A data directory written by a standalone daemon loads in a cluster: it is split into groups
 * once, with its ids and matrices. */
static void test_old_layout_migrates(void) {
  etcd e = {0};
  CU_ASSERT_FATAL(etcd_start(&e));
  char data[64];
  CU_ASSERT_FATAL(t_temp_dir(data, sizeof data, "data"));
  t_daemon d;
  t_client c;
  const char *plain[] = {"--data", data, "--fsync", "always", NULL};
  unsigned long long e1 = 0, e2 = 0, loose = 0;
  if (START_CONNECTED(&d, &c, plain)) {
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"old.a\"}");
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"other\"}");
    cJSON *r =
        OK(&c, "{\"cmd\":\"transform.create\",\"world\":\"old.a\",\"name\":\"p\",\"t\":[1,2,3]}");
    e1 = t_resp_id(r, "entity");
    cJSON_Delete(r);
    OKD(&c, "{\"cmd\":\"save\"}");
    /* After the snapshot, in the journal only. */
    r = OK(&c, "{\"cmd\":\"transform.create\",\"world\":\"other\",\"name\":\"q\",\"t\":[4,5,6]}");
    e2 = t_resp_id(r, "entity");
    cJSON_Delete(r);
    r = OK(&c, "{\"cmd\":\"entity.create\"}");
    loose =
        (unsigned long long)cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "entities"), 0)
            ->valuedouble;
    cJSON_Delete(r);
    t_client_close(&c);
    t_daemon_stop(&d, SIGKILL, 5000);
  }
  cluster k;
  memset(&k, 0, sizeof k);
  k.e = e;
  snprintf(k.data, sizeof k.data, "%s", data);
  for (int i = 0; i < NODES; i++)
    CU_ASSERT_FATAL(node_start(&k, i));
  CU_ASSERT(wait_registered(&k, NODES));
  char line[200];
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"old.a\",\"entity\":%llu}",
           e1);
  cJSON *r = wait_ok_anywhere(&k, line, 10000, NULL);
  CU_ASSERT(r && t_resp_str_is(r, "name", "p"));
  cJSON_Delete(r);
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"other\",\"entity\":%llu}",
           e2);
  r = wait_ok_anywhere(&k, line, 10000, NULL);
  const cJSON *local = cJSON_GetObjectItemCaseSensitive(r, "local");
  CU_ASSERT(r && cJSON_GetArraySize(local) == 16 &&
            cJSON_GetArrayItem(local, 14)->valuedouble == 6);
  cJSON_Delete(r);
  /* The loose entity lives on the node that migrated; new ids never collide with old ones. */
  int owners = 0;
  for (int i = 0; i < NODES; i++) {
    cJSON *x = CALL(&k.c[i], "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", loose);
    owners += t_resp_ok(x);
    cJSON_Delete(x);
    x = OK(&k.c[i], "{\"cmd\":\"entity.create\",\"count\":10}");
    const cJSON *id;
    cJSON_ArrayForEach(id, cJSON_GetObjectItemCaseSensitive(x, "entities")) {
      unsigned long long v = (unsigned long long)id->valuedouble;
      CU_ASSERT(v != e1 && v != e2 && v != loose);
    }
    cJSON_Delete(x);
  }
  CU_ASSERT_EQUAL(owners, 1);
  char path[128];
  snprintf(path, sizeof path, "%s/migrated/snapshot.scn", data);
  CU_ASSERT(access(path, F_OK) == 0);
  snprintf(path, sizeof path, "%s/snapshot.scn", data);
  CU_ASSERT(access(path, F_OK) != 0);
  cluster_stop(&k);
}

/* ---- bad input ------------------------------------------------------------------------------- */

static int run_scened(const char *const *args, text *err) {
  t_proc p;
  if (!t_proc_start(&p, t_daemon_bin(), args, NULL, NULL, 0))
    return -1;
  int rc = t_proc_wait(&p, 10000);
  text_add(err, text_str(&p.err), strlen(text_str(&p.err)));
  t_proc_free(&p);
  return rc;
}

/* --cluster without --data, or with a malformed URL: one line, exit 2. */
static void test_bad_flags(void) {
  const char *cases[][8] = {
      {"--cluster", "http://127.0.0.1:2379", "--listen", "127.0.0.1:0", "--http", "off", NULL},
      {"--cluster", "127.0.0.1:2379", "--data", "/tmp", "--http", "off", NULL},
      {"--cluster", "http://127.0.0.1:99999", "--data", "/tmp", "--http", "off", NULL},
      {"--cluster", "http://127.0.0.1:2379,", "--data", "/tmp", "--http", "off", NULL},
      {"--cluster", "http://127.0.0.1:2379", "--data", "/tmp", "--node", "a b", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    text err = {0};
    int rc = run_scened(cases[i], &err);
    CU_ASSERT_EQUAL(rc, 2);
    const char *s = text_str(&err);
    const char *nl = strchr(s, '\n');
    CU_ASSERT(nl && nl[1] == '\0');
    if (rc != 2)
      t_report_text("stderr", s);
    text_free(&err);
  }
}

/* --replicas needs --cluster and a directory of its own; its values and those of
 * --durability and --replica-timeout are checked: one line saying what is wrong, exit 2,
 * before anything is asked of etcd (nothing listens on its endpoint). */
static void test_bad_replica_flags(void) {
  const char *url = "http://127.0.0.1:1";
  struct {
    const char *args[14];
    const char *says;
  } cases[] = {
      {{"--replicas", "1", "--data", "/tmp"}, "--replicas needs --cluster"},
      {{"--replicas", "1", "--cluster", url}, "--replicas needs --data"},
      {{"--replicas", "5", "--cluster", url, "--data", "/tmp"}, "invalid value for replicas"},
      {{"--replicas", "-1", "--cluster", url, "--data", "/tmp"}, "invalid value for replicas"},
      {{"--replicas", "1", "--cluster", url, "--data", "/tmp", "--durability", "strong"},
       "expected sync or async"},
      {{"--replicas", "1", "--cluster", url, "--data", "/tmp", "--replica-timeout", "0"},
       "invalid value for replica-timeout"},
      {{"--replicas", "1", "--cluster", url, "--data", "/tmp", "--replica-timeout", "1.5"},
       "invalid value for replica-timeout"},
      {{"--replicas", "1", "--cluster", url, "--data", "/tmp", "--replica-timeout", "3600001"},
       "invalid value for replica-timeout"},
      {{"--replicas", "x", "--cluster", url, "--data", "/tmp"}, "invalid value for replicas"},
      {{"--replicas", "1", "--cluster", url, "--data", "/tmp", "--durability", ""},
       "expected sync or async"},
      {{"--replicas", "1", "--cluster", url, "--data", "/tmp", "--cluster-ca", "/nonexistent.pem"},
       "--cluster-ca needs --tls-cert"},
      {{"--replicas", "1", "--cluster", url, "--data", "/tmp", "--acl", "/nonexistent.acl"},
       "--replicas with --acl needs --cluster-token"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[20] = {"--listen", "127.0.0.1:0", "--http", "off"};
    int n = 4;
    for (int j = 0; cases[i].args[j]; j++)
      args[n++] = cases[i].args[j];
    text err = {0};
    int rc = run_scened(args, &err);
    const char *s = text_str(&err);
    const char *nl = strchr(s, '\n');
    bool ok = rc == 2 && nl && nl[1] == '\0' && strstr(s, cases[i].says);
    CU_ASSERT(ok);
    if (!ok) {
      fprintf(stderr, "  case %zu: exit %d, expected \"%s\"\n", i, rc, cases[i].says);
      t_report_text("stderr", s);
    }
    text_free(&err);
  }
}

/* etcd unreachable at start: the daemon keeps trying, /readyz is 503 and worlds answer
 * UNAVAILABLE; once etcd is there it registers and serves. */
static void test_etcd_late(void) {
  etcd e = {0};
  CU_ASSERT_FATAL(t_temp_dir(e.dir, sizeof e.dir, "etcd"));
  e.port = free_port();
  e.peer = free_port();
  snprintf(e.url, sizeof e.url, "http://127.0.0.1:%d", e.port);
  cluster k;
  memset(&k, 0, sizeof k);
  k.e = e;
  CU_ASSERT_FATAL(t_temp_dir(k.data, sizeof k.data, "data"));
  for (int i = 0; i < NODES; i++)
    CU_ASSERT_FATAL(node_start(&k, i));
  ERR(&k.c[0], "UNAVAILABLE", "{\"cmd\":\"world.create\",\"world\":\"late\"}");
  ERR(&k.c[1], "UNAVAILABLE", "{\"cmd\":\"transform.get\",\"world\":\"late\",\"entity\":1}");
  ERR(&k.c[2], "UNAVAILABLE", "{\"cmd\":\"entity.create\"}");
  OKD(&k.c[0], "{\"cmd\":\"ping\"}");
  char *resp = NULL;
  CU_ASSERT_EQUAL(t_http_get(k.d[0].http_port, "/readyz", &resp), 503);
  free(resp);
  CU_ASSERT(t_daemon_log_contains(&k.d[0], "cannot register yet"));
  CU_ASSERT_FATAL(etcd_start(&k.e));
  CU_ASSERT(wait_registered(&k, NODES));
  CU_ASSERT_EQUAL(t_http_get(k.d[0].http_port, "/readyz", &resp), 200);
  free(resp);
  cJSON *r = OK(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"late\"}");
  cJSON_Delete(r);
  cluster_stop(&k);
}

int t_register_cluster_setup(void) {
  static const t_test tests[] = {
      {"bad flags: one line, exit 2", test_bad_flags},
      {"bad replica flags: one line, exit 2", test_bad_replica_flags},
      {"the standalone layout migrates", test_old_layout_migrates},
      {"etcd unreachable at start", test_etcd_late},
      {"TLS and an access list across nodes", test_tls_acl_cluster},
  };
  return T_ADD_SUITE("cluster_setup", NULL, NULL, tests);
}

/* The cluster on etcd over TLS (--cluster https://... with --etcd-ca, --etcd-cert and
 * --etcd-key): a real etcd that serves its clients over TLS only and requires their
 * certificates, made by scripts/tls-certs.sh in temporary directories. Three daemons route,
 * move and take over through it, reusing their connections; a daemon with the wrong CA or no
 * client certificate never registers and says why; bad TLS flags are one line and exit 2.
 * Every test stops exactly what it started; waits have deadlines. */
#include "cluster_fixtures.h"
#include "daemon_fixtures.h"
#include "etcd.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The files of one CA made by tls-certs.sh. */
typedef struct certs {
  char dir[64];
  char ca[128], server[128], server_key[128], client[128], client_key[128];
} certs;

static bool make_certs(certs *c) {
  if (!t_make_certs(c->dir, sizeof c->dir))
    return false;
  snprintf(c->ca, sizeof c->ca, "%s/ca.pem", c->dir);
  snprintf(c->server, sizeof c->server, "%s/server.pem", c->dir);
  snprintf(c->server_key, sizeof c->server_key, "%s/server.key", c->dir);
  snprintf(c->client, sizeof c->client, "%s/client.pem", c->dir);
  snprintf(c->client_key, sizeof c->client_key, "%s/client.key", c->dir);
  return true;
}

/* etcd e (not started) serves TLS with c's server certificate and requires c's clients. */
static void etcd_tls(etcd *e, const certs *c) {
  e->cert = c->server;
  e->key = c->server_key;
  e->ca = c->ca;
}

/* A figure of daemon d's /metrics (-1 when it cannot be read). */
static double metric(const t_daemon *d, const char *name) {
  char *page = NULL;
  double v = t_http_get(d->http_port, "/metrics", &page) == 200 ? page_metric(page, name) : -1;
  free(page);
  return v;
}

/* Waits (15 s at most) until daemon d's log contains text. */
static bool wait_logged(const t_daemon *d, const char *text) {
  long deadline = t_now_ms() + 15000;
  while (t_now_ms() < deadline) {
    if (t_daemon_log_contains(d, text))
      return true;
    t_sleep_ms(20);
  }
  return false;
}

/* ---- a cluster over TLS ---------------------------------------------------------------------- */

/* The three daemons register over TLS (n2 through a dead https endpoint first): MOVED names the
 * owner, world.move hands a group over, and after kill -9 of its owner another daemon serves it
 * with what it held. Requests reuse the daemons' connections to etcd: thirty claims open at
 * most a few. */
static void test_tls_cluster(void) {
  certs c;
  CU_ASSERT_FATAL(make_certs(&c));
  const char *flags[] = {"--etcd-ca",  c.ca,         "--etcd-cert", c.client,
                         "--etcd-key", c.client_key, NULL};
  cluster k;
  memset(&k, 0, sizeof k);
  etcd_tls(&k.e, &c);
  k.extra = flags;
  if (!cluster_start_prepared(&k))
    goto out;
  CU_ASSERT(strncmp(k.e.url, "https://", 8) == 0);
  CU_ASSERT(t_daemon_log_contains(&k.d[0], "etcd_tls=on+client-certificate"));

  cJSON *r = OK(&k.c[0], "{\"cmd\":\"world.create\",\"world\":\"tls.main\"}");
  CU_ASSERT(t_resp_str_is(r, "node", "n0"));
  cJSON_Delete(r);
  r = OK(&k.c[0], "{\"cmd\":\"transform.create\",\"world\":\"tls.main\",\"name\":\"kept\","
                  "\"t\":[1,2,3]}");
  unsigned long long ent = t_resp_id(r, "entity");
  cJSON_Delete(r);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", k.d[0].port);
  for (int i = 1; i < NODES; i++) {
    r = CALL(&k.c[i], "{\"cmd\":\"transform.get\",\"world\":\"tls.main\",\"entity\":%llu}", ent);
    CHECK(t_resp_str_is(error_of(r), "code", "MOVED") && t_resp_str_is(error_of(r), "node", "n0") &&
              t_resp_str_is(error_of(r), "addr", addr),
          r);
    cJSON_Delete(r);
  }

  /* Connections: each claim below is a request to etcd, on a connection already open. */
  double requests = metric(&k.d[1], "scened_etcd_requests_total");
  double opened = metric(&k.d[1], "scened_etcd_connections_total");
  CU_ASSERT(requests > 0 && opened > 0);
  for (int i = 0; i < 30; i++)
    OKD(&k.c[1], "{\"cmd\":\"world.create\",\"world\":\"claim%d.main\"}", i);
  double more_requests = metric(&k.d[1], "scened_etcd_requests_total") - requests;
  double more_opened = metric(&k.d[1], "scened_etcd_connections_total") - opened;
  fprintf(stderr, "  n1: %.0f etcd requests opened %.0f connections (%.0f before, for %.0f)\n",
          more_requests, more_opened, opened, requests);
  CU_ASSERT(more_requests >= 30);
  CU_ASSERT(more_opened >= 0 && more_opened <= 3);

  /* A move, to the daemon whose first endpoint is dead. */
  OKD(&k.c[0], "{\"cmd\":\"world.move\",\"world\":\"tls.main\",\"to\":\"n2\"}");
  r = CALL(&k.c[0], "{\"cmd\":\"transform.get\",\"world\":\"tls.main\",\"entity\":%llu}", ent);
  CHECK(t_resp_str_is(error_of(r), "code", "MOVED") && t_resp_str_is(error_of(r), "node", "n2"), r);
  cJSON_Delete(r);
  OKD(&k.c[2], "{\"cmd\":\"transform.get\",\"world\":\"tls.main\",\"entity\":%llu}", ent);

  /* kill -9 of the owner: the lease expires in etcd, another daemon claims and loads it. */
  long killed = t_now_ms();
  node_stop(&k, 2, SIGKILL);
  int at = -1;
  r = wait_ok_anywhere(&k, "{\"cmd\":\"transform.find\",\"world\":\"tls.main\",\"path\":\"kept\"}",
                       TTL_MS + 8000, &at);
  CU_ASSERT_PTR_NOT_NULL(r);
  CU_ASSERT(at == 0 || at == 1);
  if (r)
    fprintf(stderr, "  kill -9 of n2: n%d serves tls.main after %ld ms (TTL %d ms)\n", at,
            t_now_ms() - killed, TTL_MS);
  cJSON_Delete(r);
out:
  cluster_stop(&k);
  t_remove_temp_dir(c.dir);
}

/* ---- refused by TLS -------------------------------------------------------------------------- */

/* A daemon that trusts another CA, and one without a client certificate, never register: each
 * logs why (the TLS failure) and keeps trying, /readyz answers 503 and worlds UNAVAILABLE,
 * while a daemon with the right files registers beside them alone. */
static void test_tls_refused(void) {
  certs c, other;
  CU_ASSERT_FATAL(make_certs(&c));
  if (!make_certs(&other)) {
    CU_FAIL("a second CA made");
    t_remove_temp_dir(c.dir);
    return;
  }
  etcd e = {0};
  etcd_tls(&e, &c);
  char data[64] = "";
  enum { WRONG_CA, NO_CERT, GOOD, N };
  t_daemon d[N];
  t_client cl[N];
  bool up[N] = {false}, connected[N] = {false};
  if (!etcd_start(&e)) {
    CU_FAIL("etcd started");
    goto out;
  }
  if (!t_temp_dir(data, sizeof data, "cluster-tls")) {
    CU_FAIL("data directory made");
    goto out;
  }
  const char *args[N][16] = {
      [WRONG_CA] = {"--etcd-ca", other.ca, "--etcd-cert", c.client, "--etcd-key", c.client_key,
                    "--node", "wrongca"},
      [NO_CERT] = {"--etcd-ca", c.ca, "--node", "nocert"},
      [GOOD] = {"--etcd-ca", c.ca, "--etcd-cert", c.client, "--etcd-key", c.client_key, "--node",
                "good"},
  };
  for (int i = 0; i < N; i++) {
    const char *common[] = {"--cluster", e.url, "--data", data, "--lease-ttl", TTL, NULL};
    int n = 0;
    while (args[i][n])
      n++;
    for (int j = 0; common[j]; j++)
      args[i][n++] = common[j];
    up[i] = START(&d[i], args[i]);
    connected[i] = up[i] && CONNECT(&cl[i], d[i].port);
    if (!connected[i])
      goto out;
  }
  /* libcurl's words for an unverified peer; etcd's refusal of a missing certificate comes as a
   * failed handshake, send or read, which the reason explains. */
  CU_ASSERT(wait_logged(&d[WRONG_CA], "cannot register yet"));
  CU_ASSERT(t_daemon_log_contains(&d[WRONG_CA], "SSL certificate problem"));
  CU_ASSERT(wait_logged(&d[NO_CERT], "cannot register yet"));
  CU_ASSERT(t_daemon_log_contains(&d[NO_CERT], "no client certificate was presented"));

  /* The good one registers, and knows no other node. */
  long deadline = t_now_ms() + 15000;
  int seen = -1;
  while (seen != 1 && t_now_ms() < deadline) {
    cJSON *r = t_client_call(&cl[GOOD], "{\"cmd\":\"cluster.nodes\"}");
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(r, "nodes");
    seen = cJSON_IsArray(nodes) ? cJSON_GetArraySize(nodes) : -1;
    cJSON_Delete(r);
    if (seen != 1)
      t_sleep_ms(20);
  }
  CU_ASSERT_EQUAL(seen, 1);
  char *resp = NULL;
  CU_ASSERT_EQUAL(t_http_get(d[GOOD].http_port, "/readyz", &resp), 200);
  free(resp);
  OKD(&cl[GOOD], "{\"cmd\":\"world.create\",\"world\":\"good.main\"}");

  /* Still refused, long after the good one registered. */
  for (int i = WRONG_CA; i <= NO_CERT; i++) {
    resp = NULL;
    CU_ASSERT_EQUAL(t_http_get(d[i].http_port, "/readyz", &resp), 503);
    free(resp);
    ERR(&cl[i], "UNAVAILABLE", "{\"cmd\":\"world.create\",\"world\":\"bad%d.main\"}", i);
    CU_ASSERT(metric(&d[i], "scened_cluster_registered") == 0);
    CU_ASSERT(metric(&d[i], "scened_etcd_errors_total") > 0);
  }
  CU_ASSERT_FALSE(t_daemon_log_contains(&d[WRONG_CA], "registered in the cluster"));
  CU_ASSERT_FALSE(t_daemon_log_contains(&d[NO_CERT], "registered in the cluster"));
out:
  for (int i = 0; i < N; i++) {
    if (connected[i])
      t_client_close(&cl[i]);
    if (up[i])
      t_daemon_stop(&d[i], SIGTERM, 10000);
  }
  etcd_stop(&e, SIGTERM);
  t_remove_temp_dir(e.dir);
  t_remove_temp_dir(data);
  t_remove_temp_dir(c.dir);
  t_remove_temp_dir(other.dir);
}

/* ---- bad flags ------------------------------------------------------------------------------- */

/* Writes the key of path (PEM) to out encrypted with a password. */
static bool write_encrypted_key(const char *path, const char *out) {
  FILE *f = fopen(path, "r");
  EVP_PKEY *key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
  if (f)
    fclose(f);
  FILE *o = key ? fopen(out, "w") : NULL;
  bool ok = o && PEM_write_PrivateKey(o, key, EVP_aes_128_cbc(), (unsigned char *)"secret", 6, NULL,
                                      NULL) == 1;
  if (o)
    ok &= fclose(o) == 0;
  EVP_PKEY_free(key);
  return ok;
}

/* scened with args and the environment env (NULL: this one): its exit status, and its stderr
 * in err. */
static int run_scened(const char *const *args, char *const *env, text *err) {
  t_proc p;
  if (!t_proc_start(&p, t_daemon_bin(), args, env, NULL, 0))
    return -1;
  int rc = t_proc_wait(&p, 10000);
  text_add(err, text_str(&p.err), strlen(text_str(&p.err)));
  t_proc_free(&p);
  return rc;
}

/* Each bad combination or file: one line that says what is wrong, exit 2, before anything is
 * bound or asked of etcd (nothing listens on its endpoint). */
static void test_tls_bad_flags(void) {
  certs c;
  CU_ASSERT_FATAL(make_certs(&c));
  char data[64], encrypted[128];
  CU_ASSERT_FATAL(t_temp_dir(data, sizeof data, "cluster-tls"));
  snprintf(encrypted, sizeof encrypted, "%s/encrypted.key", c.dir);
  CU_ASSERT_FATAL(write_encrypted_key(c.client_key, encrypted));
  const char *https = "https://127.0.0.1:1", *http = "http://127.0.0.1:1";
  struct {
    const char *args[12];
    const char *says;
  } cases[] = {
      {{"--cluster", https, "--etcd-cert", c.client}, "--etcd-cert needs --etcd-key"},
      {{"--cluster", https, "--etcd-key", c.client_key}, "--etcd-key needs --etcd-cert"},
      {{"--etcd-ca", c.ca}, "--etcd-ca needs --cluster"},
      {{"--etcd-cert", c.client, "--etcd-key", c.client_key}, "--etcd-cert needs --cluster"},
      {{"--cluster", http, "--etcd-ca", c.ca}, "--etcd-ca needs https://"},
      {{"--cluster", http, "--etcd-cert", c.client, "--etcd-key", c.client_key},
       "--etcd-cert needs https://"},
      {{"--cluster", "https://127.0.0.1:1,http://127.0.0.1:2"}, "mixes http:// and https://"},
      {{"--cluster", "http://127.0.0.1:1,https://127.0.0.1:2"}, "mixes http:// and https://"},
      {{"--cluster", "https://127.0.0.1"}, "https://HOST:PORT"},
      {{"--cluster", https, "--etcd-ca", "/nonexistent/ca.pem"},
       "--etcd-ca /nonexistent/ca.pem: No such file"},
      {{"--cluster", https, "--etcd-ca", c.client_key}, "no PEM certificate"},
      {{"--cluster", https, "--etcd-cert", c.client_key, "--etcd-key", c.client_key},
       "--etcd-cert"},
      {{"--cluster", https, "--etcd-cert", c.client, "--etcd-key", "/nonexistent/client.key"},
       "--etcd-key /nonexistent/client.key: No such file"},
      {{"--cluster", https, "--etcd-cert", c.client, "--etcd-key", c.server_key}, "does not match"},
      {{"--cluster", https, "--etcd-cert", c.client, "--etcd-key", encrypted},
       "an unencrypted key is expected"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[20] = {"--listen", "127.0.0.1:0", "--http", "off"};
    int n = 4;
    bool cluster = false;
    for (int j = 0; cases[i].args[j]; j++) {
      cluster |= strcmp(cases[i].args[j], "--cluster") == 0;
      args[n++] = cases[i].args[j];
    }
    if (cluster) {
      args[n++] = "--data";
      args[n++] = data;
    }
    text err = {0};
    int rc = run_scened(args, NULL, &err);
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

  /* The same from the environment: SCENED_ETCD_CERT without SCENED_ETCD_KEY. */
  char cert_env[160];
  snprintf(cert_env, sizeof cert_env, "SCENED_ETCD_CERT=%s", c.client);
  char *env[] = {cert_env, "SCENED_CLUSTER=https://127.0.0.1:1", NULL};
  const char *args[] = {"--listen", "127.0.0.1:0", "--http", "off", "--data", data, NULL};
  text err = {0};
  CU_ASSERT_EQUAL(run_scened(args, env, &err), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&err), "--etcd-cert needs --etcd-key"));
  text_free(&err);
  t_remove_temp_dir(data);
  t_remove_temp_dir(c.dir);
}

int t_register_cluster_tls(void) {
  static const t_test tests[] = {
      {"bad TLS flags: one line, exit 2", test_tls_bad_flags},
      {"a cluster over TLS: MOVED, move, kill -9, connections reused", test_tls_cluster},
      {"a wrong CA or no client certificate never registers", test_tls_refused},
  };
  return T_ADD_SUITE("cluster_tls", NULL, NULL, tests);
}

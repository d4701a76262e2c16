/* Host names, not only numeric addresses: the daemon started with --listen localhost:0 and
 * --http localhost:0 (it logs the address it bound), scenectl, scene-bench and the C library
 * reaching it at localhost; a name that does not resolve is a one-line error and exit 2 from
 * each of them. */
#include "client_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BAD_HOST "nowhere.invalid" /* RFC 2606: never resolves */

static char port_arg[16];
static void (*sigpipe_before_suite)(int);

/* The suite's daemon listens at localhost (scenectl and the others run with its port). */
static int hosts_suite_init(void) {
  sigpipe_before_suite = signal(SIGPIPE, SIG_IGN);
  const char *args[] = {"--listen", "localhost:0", "--http", "localhost:0", NULL};
  if (t_daemon_start(&clients_daemon, args) != 0)
    return -1;
  snprintf(port_arg, sizeof port_arg, "%d", clients_daemon.port);
  snprintf(port_env, sizeof port_env, "SCENED_PORT=%d", clients_daemon.port);
  return 0;
}

static int hosts_suite_clean(void) {
  int status = t_suite_daemon_stop(&clients_daemon, WAIT_MS);
  signal(SIGPIPE, sigpipe_before_suite);
  return status;
}

/* scene-bench, next to scenectl (make test builds both). */
static bool bench_bin(char *out, size_t n) {
  char ctl[PATH_MAX];
  if (!realpath(ctl_bin(), ctl))
    return false;
  snprintf(out, n, "%s/scene-bench", dirname(ctl));
  return access(out, X_OK) == 0;
}

/* The error output is one line that contains want, and nothing went to stdout. */
static bool one_line_error(const t_proc *p, const char *want) {
  const char *err = text_str(&p->err);
  const char *nl = strchr(err, '\n');
  return strstr(err, want) && nl && nl[1] == '\0' && p->out.len == 0;
}

/* ---- the daemon ------------------------------------------------------------------------------ */

/* Both ports bound, and logged by the numeric address that localhost gave. */
static void test_daemon_listens_on_localhost(void) {
  char *log = t_read_file(clients_daemon.log_path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(log);
  bool v4 = strstr(log, "listening on 127.0.0.1:") != NULL;
  bool v6 = strstr(log, "listening on [::1]:") != NULL;
  CU_ASSERT(v4 || v6);
  CU_ASSERT(strstr(log, "http on 127.0.0.1:") || strstr(log, "http on [::1]:"));
  CU_ASSERT_PTR_NULL(strstr(log, "on localhost"));
  CU_ASSERT(clients_daemon.port > 0 && clients_daemon.http_port > 0);
  if (!v4 && !v6)
    fprintf(stderr, "  the daemon's log:\n%s\n", log);
  free(log);
}

/* --listen or --http with a name that does not resolve: one line that says so, exit 2, nothing
 * bound or logged before it. */
static void test_daemon_unresolvable(void) {
  static const char *const flags[] = {"--listen", "--http"};
  for (int i = 0; i < 2; i++) {
    const char *args[] = {"--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
                          flags[i],   BAD_HOST ":0", NULL};
    t_proc p;
    CU_ASSERT_FATAL(proc_start(&p, t_daemon_bin(), args, NULL, NULL, 0));
    int code = t_proc_wait(&p, 10000);
    char want[96];
    snprintf(want, sizeof want, "scened: %s: cannot resolve \"" BAD_HOST "\"", flags[i]);
    CU_ASSERT_EQUAL(code, 2);
    CU_ASSERT(one_line_error(&p, want));
    if (code != 2 || !one_line_error(&p, want))
      fprintf(stderr, "  scened %s " BAD_HOST ":0: exit %d, stderr \"%s\"\n", flags[i], code,
              text_str(&p.err));
    t_proc_free(&p);
  }
}

/* ---- the clients ----------------------------------------------------------------------------- */

/* scenectl --host localhost, and SCENED_HOST=localhost, reach the daemon. */
static void test_scenectl_localhost(void) {
  t_proc p;
  const char *env_bad[] = {"SCENED_HOST=" BAD_HOST, port_env, NULL};
  CU_ASSERT_EQUAL(ctl_run(&p, env_bad, NULL, 0,
                          (const char *const[]){"--host", "localhost", "--port", port_arg,
                                                "world.create", "world=hosts", NULL}),
                  0);
  t_proc_free(&p);
  const char *env_local[] = {"SCENED_HOST=localhost", port_env, NULL};
  CU_ASSERT_EQUAL(ctl_run(&p, env_local, NULL, 0,
                          (const char *const[]){"transform.create", "world=hosts", NULL}),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.out), "\"entity\""));
  t_proc_free(&p);
  CU_ASSERT_EQUAL(
      ctl_run(&p, env_local, NULL, 0, (const char *const[]){"world.destroy", "world=hosts", NULL}),
      0);
  t_proc_free(&p);
}

/* scenectl with a host that does not resolve: one line naming it, exit 2 (as a daemon that
 * cannot be reached). */
static void test_scenectl_unresolvable(void) {
  t_proc p;
  const char *env[] = {port_env, NULL};
  int code = ctl_run(&p, env, NULL, 0,
                     (const char *const[]){"--host", BAD_HOST, "--port", port_arg, "ping", NULL});
  CU_ASSERT_EQUAL(code, 2);
  CU_ASSERT(one_line_error(&p, "cannot resolve " BAD_HOST));
  if (code != 2)
    fprintf(stderr, "  scenectl --host " BAD_HOST ": exit %d, \"%s\"\n", code, text_str(&p.err));
  t_proc_free(&p);
}

/* scene-bench --host localhost runs its test; with a name that does not resolve it exits 2. */
static void test_scene_bench_hosts(void) {
  char bench[PATH_MAX + 16];
  CU_ASSERT_FATAL(bench_bin(bench, sizeof bench));
  t_proc p;
  const char *good[] = {"--host", "localhost", "--port", port_arg, "-c", "1",
                        "-n",     "20",        "-t",     "ping",   NULL};
  CU_ASSERT_FATAL(proc_start(&p, bench, good, NULL, NULL, 0));
  int code = t_proc_wait(&p, 30000);
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.out), "ping"));
  if (code != 0)
    fprintf(stderr, "  scene-bench --host localhost: exit %d\n%s%s\n", code, text_str(&p.out),
            text_str(&p.err));
  t_proc_free(&p);
  const char *bad[] = {"--host", BAD_HOST, "--port", port_arg, "-c", "1",
                       "-n",     "20",     "-t",     "ping",   NULL};
  CU_ASSERT_FATAL(proc_start(&p, bench, bad, NULL, NULL, 0));
  code = t_proc_wait(&p, 30000);
  CU_ASSERT_EQUAL(code, 2);
  CU_ASSERT(strstr(text_str(&p.err), "cannot resolve " BAD_HOST) != NULL);
  t_proc_free(&p);
}

/* The C library: host "localhost" connects and answers; a name that does not resolve fails
 * the connect with a reason that names it. */
static void test_library_hosts(void) {
  char err[256] = "";
  scn_cli_options o = {.host = "localhost", .port = clients_daemon.port, .timeout_ms = 10000};
  scn_cli *c = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"ping\"}"));
  scn_cli_close(c);
  o.host = BAD_HOST;
  c = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_PTR_NULL(c);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot resolve " BAD_HOST));
  if (c)
    scn_cli_close(c);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_clients_hosts(void) {
  static const t_test tests[] = {
      {"daemon: --listen and --http localhost:0, logged by address",
       test_daemon_listens_on_localhost},
      {"daemon: a name that does not resolve is one line, exit 2", test_daemon_unresolvable},
      {"scenectl: --host and SCENED_HOST localhost", test_scenectl_localhost},
      {"scenectl: a name that does not resolve exits 2", test_scenectl_unresolvable},
      {"scene-bench: --host localhost, and one that does not resolve", test_scene_bench_hosts},
      {"library: host localhost, and one that does not resolve", test_library_hosts},
  };
  return T_ADD_SUITE("clients_hosts", hosts_suite_init, hosts_suite_clean, tests);
}

/* Integration tests of the clients in scripts against the real daemon: the Python client's
 * self-tests (the whole client; near subscriptions; the packed decoder, which needs no daemon;
 * packed frames from the daemon) and the shell example. */
#include "client_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An executable named name on PATH, in out. */
static bool find_in_path(const char *name, char *out, size_t n) {
  const char *path = getenv("PATH");
  if (!path)
    return false;
  for (const char *p = path;;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len) {
      snprintf(out, n, "%.*s/%s", (int)len, p, name);
      if (access(out, X_OK) == 0)
        return true;
    }
    if (!colon)
      return false;
    p = colon + 1;
  }
}

/* Runs the Python client as a program with the suite's daemon and one self-test flag; it must
 * exit 0 and print passed. */
static void python_selftest(const char *flag, const char *passed) {
  char python[1024], script[1024];
  if (!find_in_path("python3", python, sizeof python)) {
    printf("  note: python3 is not on PATH; the Python client's %s is skipped\n", flag);
    return;
  }
  CU_ASSERT_FATAL(t_find_script("scened_client.py", script, sizeof script));
  char port[16];
  snprintf(port, sizeof port, "%d", clients_daemon.port);
  const char *args[] = {script, "--host", "127.0.0.1", "--port", port, flag, NULL};
  t_proc p;
  CU_ASSERT_FATAL(proc_start(&p, python, args, NULL, NULL, 0));
  int code = t_proc_wait(&p, 30000);
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT(strstr(text_str(&p.out), passed) != NULL);
  if (code != 0)
    fprintf(stderr, "  %s: exit %d\n%s%s\n", flag, code, text_str(&p.out), text_str(&p.err));
  t_proc_free(&p);
}

static void test_python_selftest(void) { python_selftest("--selftest", "selftest passed"); }

/* Near subscriptions: entities entering and leaving the region (the mirror drops them),
 * update widening, narrowing and removing it, refusals, and the end when the center goes. */
static void test_python_near(void) { python_selftest("--selftest-near", "near selftest passed"); }

/* The packed decoder, on its own: the C codec's payloads decode to the C decoder's bits, random
 * T x R x S matrices come back within the contract's tolerance, 10,000 deltas never drift, and
 * any byte string is decoded or refused with ValueError, changing nothing. */
static void test_python_packed(void) {
  python_selftest("--selftest-packed", "packed selftest passed");
}

/* Against the daemon: a packed subscription's mirror within the grid of a b64 one's at the same
 * tick, through moves, a new grid (subscribe.update) and the end of the world. */
static void test_python_packed_daemon(void) {
  python_selftest("--selftest-packed-daemon", "packed daemon selftest passed");
}

static void test_car_demo(void) {
  char jq[1024], bash[1024], script[1024];
  if (!find_in_path("jq", jq, sizeof jq)) {
    printf("  note: jq is not on PATH; the shell example is skipped\n");
    return;
  }
  if (!find_in_path("bash", bash, sizeof bash)) {
    printf("  note: bash is not on PATH; the shell example is skipped\n");
    return;
  }
  CU_ASSERT_FATAL(t_find_script("car_demo.sh", script, sizeof script));
  char ctl_env[1100];
  snprintf(ctl_env, sizeof ctl_env, "SCENECTL=%s", ctl_bin());
  const char *set[] = {"SCENED_HOST=127.0.0.1", port_env, ctl_env, NULL};
  const char *args[] = {script, "3", NULL};
  t_proc p;
  CU_ASSERT_FATAL(proc_start(&p, bash, args, set, NULL, 0));
  int code = t_proc_wait(&p, 30000);
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  int n = 0;
  bool terminated;
  cJSON *lines = json_lines(text_str(&p.out), &n, &terminated);
  CU_ASSERT_EQUAL(n, 3);
  CU_ASSERT(terminated);
  if (code != 0 || n != 3)
    fprintf(stderr, "  car_demo.sh: exit %d\n%s%s\n", code, text_str(&p.out), text_str(&p.err));
  for (int step = 1; step <= n; step++) {
    const cJSON *l = cJSON_GetArrayItem(lines, step - 1), *w = field(l, "wheel_fl");
    const cJSON *q = field(l, "wheel_fl_r");
    CU_ASSERT_EQUAL(t_resp_num(l, "step"), step);
    CU_ASSERT_FATAL(cJSON_IsArray(w) && cJSON_GetArraySize(w) == 3);
    CU_ASSERT_FATAL(cJSON_IsArray(q) && cJSON_GetArraySize(q) == 4);
    /* The car at (step, 0, 0) turned by step * 0.1 about y; the wheel at (1, 0.3, -0.5), where
     * the partial rotations that spin it left it. */
    double a = step * 0.1, x = 1.0, z = -0.5;
    double want[3] = {step + cos(a) * x + sin(a) * z, 0.3, -sin(a) * x + cos(a) * z};
    for (int k = 0; k < 3; k++) {
      const cJSON *v = cJSON_GetArrayItem(w, k);
      CU_ASSERT(cJSON_IsNumber(v) && fabs(v->valuedouble - want[k]) < 1e-4);
    }
    /* It faces the car's heading times its spin of step * 0.5 about z: the product of
     * (0, sin(a/2), 0, cos(a/2)) and (0, 0, sin(b/2), cos(b/2)), with w >= 0. */
    double b = step * 0.5, s1 = sin(a / 2), c1 = cos(a / 2), s2 = sin(b / 2), c2 = cos(b / 2);
    double want_r[4] = {s1 * s2, s1 * c2, c1 * s2, c1 * c2};
    double sign = want_r[3] < 0 ? -1 : 1;
    for (int k = 0; k < 4; k++) {
      const cJSON *v = cJSON_GetArrayItem(q, k);
      CU_ASSERT(cJSON_IsNumber(v) && fabs(v->valuedouble - sign * want_r[k]) < 1e-5);
    }
  }
  cJSON_Delete(lines);
  t_proc_free(&p);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_clients_scripts(void) {
  static const t_test tests[] = {
      {"python client self-test", test_python_selftest},
      {"python client: near subscriptions, update and the mirror", test_python_near},
      {"python client: packed frames' decoder and the mirror", test_python_packed},
      {"python client: packed frames from the daemon, within the grid of b64 ones",
       test_python_packed_daemon},
      {"shell example", test_car_demo},
  };
  return T_ADD_SUITE("clients_scripts", clients_suite_init, clients_suite_clean, tests);
}

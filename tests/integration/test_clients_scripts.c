/* Integration tests of the clients in scripts against the real daemon: the Python client's
 * self-tests (the whole client; near subscriptions; the packed decoder, which needs no daemon;
 * packed frames from the daemon) and the shell example (scripts/car_demo.sh: the car drives
 * round its circle, paced, and takes its world and entities with it when it stops). */
#include "client_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <signal.h>
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

/* What the suite's daemon holds: its entity count, and how many of its worlds are the car demo's
 * ("car-demo-PID"). */
static double demo_worlds(double *entities) {
  scn_cli *c = open_cli(clients_daemon.port, NULL, WAIT_MS);
  if (!c)
    return -1;
  cJSON *info = call_ok(c, "{\"cmd\":\"info\"}");
  *entities = t_resp_num(info, "entities");
  cJSON_Delete(info);
  cJSON *list = call_ok(c, "{\"cmd\":\"world.list\"}");
  double n = list ? 0 : -1;
  const cJSON *w;
  cJSON_ArrayForEach(w, field(list, "worlds")) n +=
      strncmp(t_resp_str(w, "name"), "car-demo-", 9) == 0;
  cJSON_Delete(list);
  scn_cli_close(c);
  return n;
}

/* bash and jq, and the script; false (noted) when one is missing. */
static bool car_demo_tools(char *bash, char *script, size_t n) {
  char jq[1024];
  if (!find_in_path("jq", jq, sizeof jq) || !find_in_path("bash", bash, n)) {
    printf("  note: jq or bash is not on PATH; the shell example is skipped\n");
    return false;
  }
  CU_ASSERT_FATAL(t_find_script("car_demo.sh", script, n));
  return true;
}

static bool car_demo_start(t_proc *p, const char *bash, const char *script,
                           const char *const *args) {
  static char ctl_env[1100];
  snprintf(ctl_env, sizeof ctl_env, "SCENECTL=%s", ctl_bin());
  const char *set[] = {"SCENED_HOST=127.0.0.1", port_env, ctl_env, NULL};
  const char *argv[8] = {script};
  for (int i = 0; args[i] && i < 6; i++)
    argv[i + 1] = args[i];
  return proc_start(p, bash, argv, set, NULL, 0);
}

static double num_at(const cJSON *a, int i) {
  const cJSON *v = cJSON_GetArrayItem(a, i);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* v rotated by the unit quaternion q = [x, y, z, w]. */
static void rotate(const cJSON *q, const double v[3], double out[3]) {
  double x = num_at(q, 0), y = num_at(q, 1), z = num_at(q, 2), w = num_at(q, 3);
  double m[3][3] = {{1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)},
                    {2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)},
                    {2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)}};
  for (int r = 0; r < 3; r++)
    out[r] = m[r][0] * v[0] + m[r][1] * v[1] + m[r][2] * v[2];
}

/* The car drives round its circle, paced at its tick rate: 15 steps at 30 Hz take half a second
 * at least (without pacing they took a few milliseconds each). Each step it is where the circle
 * puts it, facing along the circle, and it moved forward along its heading (its local +x), not
 * sideways; its front-left wheel stays at its place on the car. Afterwards its world and every
 * entity it made are gone. */
static void test_car_demo(void) {
  char bash[1024], script[1024];
  if (!car_demo_tools(bash, script, sizeof bash))
    return;
  double ents_before, ents_after;
  CU_ASSERT_EQUAL(demo_worlds(&ents_before), 0);
  enum { STEPS = 15 };
  const double hz = 30, speed = 4, turn = 0.5, radius = speed / turn;
  t_proc p;
  long t0 = t_now_ms();
  CU_ASSERT_FATAL(car_demo_start(&p, bash, script, (const char *[]){"15", "--hz", "30", NULL}));
  int code = t_proc_wait(&p, 30000);
  long took = t_now_ms() - t0;
  CU_ASSERT_EQUAL(code, 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  CU_ASSERT(took >= (STEPS - 1) * 1000 / hz);
  int n = 0;
  bool terminated;
  cJSON *lines = json_lines(text_str(&p.out), &n, &terminated);
  CU_ASSERT_EQUAL(n, STEPS);
  CU_ASSERT(terminated);
  if (code != 0 || n != STEPS)
    fprintf(stderr, "  car_demo.sh: exit %d\n%s%s\n", code, text_str(&p.out), text_str(&p.err));
  double prev[3] = {0, 0, 0}, worst_side = 0;
  for (int k = 1; k <= n; k++) {
    const cJSON *l = cJSON_GetArrayItem(lines, k - 1), *car = field(l, "car");
    const cJSON *q = field(l, "car_r"), *wheel = field(l, "wheel_fl");
    CU_ASSERT_EQUAL(t_resp_num(l, "step"), k);
    CU_ASSERT_FATAL(cJSON_GetArraySize(car) == 3 && cJSON_GetArraySize(q) == 4 &&
                    cJSON_GetArraySize(wheel) == 3);
    double a = turn * k / hz;
    double want[3] = {radius * sin(a), 0, radius * (cos(a) - 1)};
    double pos[3], fwd[3], at_wheel[3];
    for (int i = 0; i < 3; i++) {
      pos[i] = num_at(car, i);
      CU_ASSERT(fabs(pos[i] - want[i]) < 1e-4);
    }
    /* its heading is a about y: local +x points along (cos a, 0, -sin a) */
    rotate(q, (double[]){1, 0, 0}, fwd);
    CU_ASSERT(fabs(fwd[0] - cos(a)) < 1e-5 && fabs(fwd[1]) < 1e-5 && fabs(fwd[2] + sin(a)) < 1e-5);
    /* it moved forward: the step's displacement has next to nothing across its heading (the
     * chord of a step is a half step's turn off the tangent: 0.008 here) */
    double d[3] = {pos[0] - prev[0], pos[1] - prev[1], pos[2] - prev[2]};
    double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    double along = d[0] * fwd[0] + d[1] * fwd[1] + d[2] * fwd[2];
    double side = sqrt(fabs(len * len - along * along)) / len;
    worst_side = side > worst_side ? side : worst_side;
    CU_ASSERT(along > 0 && fabs(len - speed / hz) < 1e-3 && side < 0.02);
    memcpy(prev, pos, sizeof prev);
    /* the front-left wheel sits at (1, 0.3, -0.5) on the car */
    rotate(q, (double[]){1, 0.3, -0.5}, at_wheel);
    for (int i = 0; i < 3; i++)
      CU_ASSERT(fabs(num_at(wheel, i) - (pos[i] + at_wheel[i])) < 1e-4);
  }
  printf("  car demo: %d steps in %ld ms, at most %.4f of a step sideways\n", n, took, worst_side);
  cJSON_Delete(lines);
  t_proc_free(&p);
  CU_ASSERT_EQUAL(demo_worlds(&ents_after), 0);
  CU_ASSERT_EQUAL(ents_after, ents_before);
}

/* Ctrl-C while it drives (no step limit): it stops, and its world and entities go with it. */
static void test_car_demo_interrupted(void) {
  char bash[1024], script[1024];
  if (!car_demo_tools(bash, script, sizeof bash))
    return;
  double ents_before, ents_during, ents_after;
  CU_ASSERT_EQUAL(demo_worlds(&ents_before), 0);
  t_proc p;
  CU_ASSERT_FATAL(car_demo_start(&p, bash, script, (const char *[]){"--hz", "60", NULL}));
  long deadline = t_now_ms() + 20000;
  int lines = 0;
  while (lines < 5 && t_now_ms() < deadline && !t_proc_pump(&p, 20)) {
    lines = 0;
    for (const char *s = text_str(&p.out); (s = strchr(s, '\n')); s++)
      lines++;
  }
  CU_ASSERT(lines >= 5);
  CU_ASSERT_EQUAL(demo_worlds(&ents_during), 1);
  CU_ASSERT_EQUAL(ents_during, ents_before + 5);
  kill(p.pid, SIGINT);
  int code = t_proc_wait(&p, 10000);
  CU_ASSERT_EQUAL(code, 130);
  if (code != 130)
    fprintf(stderr, "  car_demo.sh: exit %d\n%s\n", code, text_str(&p.err));
  t_proc_free(&p);
  CU_ASSERT_EQUAL(demo_worlds(&ents_after), 0);
  CU_ASSERT_EQUAL(ents_after, ents_before);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_clients_scripts(void) {
  static const t_test tests[] = {
      {"python client self-test", test_python_selftest},
      {"python client: near subscriptions, update and the mirror", test_python_near},
      {"python client: packed frames' decoder and the mirror", test_python_packed},
      {"python client: packed frames from the daemon, within the grid of b64 ones",
       test_python_packed_daemon},
      {"shell example: the car drives round, paced, and leaves nothing", test_car_demo},
      {"shell example: Ctrl-C leaves nothing either", test_car_demo_interrupted},
  };
  return T_ADD_SUITE("clients_scripts", clients_suite_init, clients_suite_clean, tests);
}

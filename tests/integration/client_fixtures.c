#include "client_fixtures.h"

#include "daemon_fixtures.h"
#include "scn_client.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;

t_daemon clients_daemon;
char port_env[32];

static void (*sigpipe_before_suite)(int);

int clients_suite_init(void) {
  sigpipe_before_suite = signal(SIGPIPE, SIG_IGN);
  if (t_daemon_start(&clients_daemon, NULL) != 0)
    return -1;
  snprintf(port_env, sizeof port_env, "SCENED_PORT=%d", clients_daemon.port);
  return 0;
}

int clients_suite_clean(void) {
  int status = t_suite_daemon_stop(&clients_daemon, WAIT_MS);
  signal(SIGPIPE, sigpipe_before_suite);
  return status;
}

cJSON *json_lines(const char *s, int *count, bool *all_terminated) {
  cJSON *arr = cJSON_CreateArray();
  int n = 0;
  *all_terminated = true;
  while (*s) {
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    if (!nl)
      *all_terminated = false;
    cJSON *j = cJSON_ParseWithLength(s, len);
    cJSON_AddItemToArray(arr, j ? j : cJSON_CreateNull());
    n++;
    s += len + (nl ? 1 : 0);
  }
  *count = n;
  return arr;
}

const cJSON *field(const cJSON *j, const char *name) {
  return j ? cJSON_GetObjectItemCaseSensitive(j, name) : NULL;
}

bool is_translation(const cJSON *m, double x, double y, double z) {
  const double want[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, x, y, z, 1};
  if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 16)
    return false;
  for (int i = 0; i < 16; i++) {
    const cJSON *v = cJSON_GetArrayItem(m, i);
    if (!cJSON_IsNumber(v) || v->valuedouble != want[i])
      return false;
  }
  return true;
}

scn_cli *open_cli(int port, const char *token, int timeout_ms) {
  scn_cli_options o = {.host = "127.0.0.1", .port = port, .token = token, .timeout_ms = timeout_ms};
  char err[256] = "";
  scn_cli *c = scn_cli_connect(&o, err, sizeof err);
  if (!c)
    t_report_text("connect failed", err);
  return c;
}

cJSON *call_ok(scn_cli *c, const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  cJSON *r = NULL;
  int rc = scn_cli_call_line(c, line, &r);
  if (rc != SCN_CLI_OK) {
    t_report_text(line, scn_cli_error(c));
    cJSON_Delete(r);
    return NULL;
  }
  return r;
}

bool call_fine(scn_cli *c, const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  int rc = scn_cli_call_line(c, line, NULL);
  if (rc != SCN_CLI_OK)
    t_report_text(line, scn_cli_error(c));
  return rc == SCN_CLI_OK;
}

void world_name(char *out, size_t n) {
  static int serial;
  snprintf(out, n, "clients-%d-%d", (int)getpid(), ++serial);
}

double make_world(scn_cli *c, char *world, size_t n, double x, double y, double z) {
  world_name(world, n);
  if (!call_fine(c, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world))
    return -1;
  cJSON *r = call_ok(c, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"t\":[%g,%g,%g]}", world,
                     x, y, z);
  double e = t_resp_num(r, "entity");
  cJSON_Delete(r);
  return e;
}

int dead_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  int port = -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static bool env_replaced(const char *e) {
  static const char *const names[] = {
      "SCENED_HOST=", "SCENED_PORT=", "SCENED_AUTH_TOKEN=", "SCENECTL="};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strncmp(e, names[i], strlen(names[i])) == 0)
      return true;
  return false;
}

bool proc_start(t_proc *p, const char *bin, const char *const *args, const char *const *set,
                const char *in, size_t in_len) {
  size_t n = 0, m = 0;
  while (environ[n])
    n++;
  while (set && set[m])
    m++;
  char **env = calloc(n + m + 1, sizeof *env);
  if (!env)
    return false;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!env_replaced(environ[i]))
      env[k++] = environ[i];
  for (size_t i = 0; i < m; i++)
    env[k++] = (char *)set[i];
  bool started = t_proc_start(p, bin, args, env, in, in_len);
  free(env);
  return started;
}

const char *ctl_bin(void) {
  const char *bin = getenv("SCENECTL_BIN");
  return bin && *bin ? bin : "build/scenectl";
}

int ctl_run(t_proc *p, const char *const *set, const char *in, size_t in_len,
            const char *const *args) {
  const char *defaults[] = {"SCENED_HOST=127.0.0.1", port_env, NULL};
  if (!proc_start(p, ctl_bin(), args, set ? set : defaults, in, in_len)) {
    *p = (t_proc){.pid = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .status = -1};
    return -1;
  }
  return t_proc_wait(p, 20000);
}

bool is_frame(const cJSON *ev, double sub, const char *world, bool full) {
  return t_resp_str_is(ev, "event", "frame") && t_resp_num(ev, "sub") == sub &&
         t_resp_str_is(ev, "world", world) && cJSON_IsBool(field(ev, "full")) &&
         cJSON_IsTrue(field(ev, "full")) == full && cJSON_IsNumber(field(ev, "tick")) &&
         cJSON_IsArray(field(ev, "set")) && cJSON_IsArray(field(ev, "removed"));
}

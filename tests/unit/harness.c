#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void text_add(text *t, const void *data, size_t n) {
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *p = realloc(t->s, cap);
    if (!p)
      abort();
    t->s = p;
    t->cap = cap;
  }
  memcpy(t->s + t->len, data, n);
  t->len += n;
  t->s[t->len] = '\0';
}

void text_vaddf(text *t, const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0)
    abort();
  char *tmp = malloc((size_t)n + 1);
  if (!tmp)
    abort();
  vsnprintf(tmp, (size_t)n + 1, fmt, ap);
  text_add(t, tmp, (size_t)n);
  free(tmp);
}

void text_addf(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  text_vaddf(t, fmt, ap);
  va_end(ap);
}

const char *text_str(const text *t) { return t->s ? t->s : ""; }

void text_free(text *t) {
  free(t->s);
  *t = (text){0};
}

long scn_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void scn_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* The children scn_fork started and nobody has reaped yet (0: a free place). */
#define MAX_CHILDREN 64
static volatile pid_t children[MAX_CHILDREN];

pid_t scn_fork(void) {
  pid_t parent = getpid();
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the runner died before the line above */
      _exit(127);
    return 0;
  }
  for (int i = 0; pid > 0 && i < MAX_CHILDREN; i++)
    if (children[i] == 0) {
      children[i] = pid;
      break;
    }
  return pid;
}

void scn_child_reaped(pid_t pid) {
  for (int i = 0; pid > 0 && i < MAX_CHILDREN; i++)
    if (children[i] == pid)
      children[i] = 0;
}

int scn_child_wait(pid_t pid, int timeout_ms) {
  long deadline = scn_now_ms() + timeout_ms;
  int status = -1;
  while (scn_now_ms() < deadline) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) {
      scn_child_reaped(pid);
      return r == pid ? status : -1;
    }
    usleep(2000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  scn_child_reaped(pid);
  return -1;
}

void scn_kill_children(void) {
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (children[i] > 0)
      kill(children[i], SIGKILL);
}

char *scn_read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  size_t cap = 4096, len = 0;
  char *s = malloc(cap);
  size_t n;
  while (s && (n = fread(s + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 2) {
      char *p = realloc(s, cap *= 2);
      if (!p) {
        free(s);
        s = NULL;
      } else {
        s = p;
      }
    }
  }
  fclose(f);
  if (s)
    s[len] = '\0';
  return s;
}

bool scn_daemon_log_contains(const scn_daemon *d, const char *text) {
  char *log = scn_read_file(d->log_path);
  bool found = log && strstr(log, text);
  free(log);
  return found;
}

int scn_daemon_start(scn_daemon *d, const char *const *args) {
  const char *bin = getenv("SCENED_BIN");
  if (!bin)
    bin = "build/scened";
  static int serial;
  snprintf(d->log_path, sizeof d->log_path, "/tmp/scened-test-%d-%d.log", (int)getpid(), ++serial);
  /* Both ports ephemeral, so test daemons never collide with each other or a running one. */
  const char *argv[64] = {bin, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"};
  int argc = 5;
  for (int i = 0; args && args[i] && argc < 62; i++)
    argv[argc++] = args[i];
  argv[argc] = NULL;
  pid_t pid = scn_fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    int fd = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 2);
      close(fd);
    }
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  d->pid = pid;
  d->port = 0;
  long deadline = scn_now_ms() + 10000;
  while (scn_now_ms() < deadline) {
    char *log = scn_read_file(d->log_path);
    const char *at = log ? strstr(log, "listening on 127.0.0.1:") : NULL;
    const char *http = log ? strstr(log, "http on 127.0.0.1:") : NULL;
    bool http_off = false;
    for (int i = 0; args && args[i]; i++)
      if (!strcmp(args[i], "--http") && args[i + 1] && !strcmp(args[i + 1], "off"))
        http_off = true;
    if (at && (http || http_off)) {
      d->port = atoi(at + strlen("listening on 127.0.0.1:"));
      d->http_port = http ? atoi(http + strlen("http on 127.0.0.1:")) : 0;
      free(log);
      return 0;
    }
    free(log);
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      scn_child_reaped(pid);
      fprintf(stderr, "scened exited before listening (status %d); log %s\n", status, d->log_path);
      d->pid = 0;
      return -1;
    }
    usleep(5000);
  }
  fprintf(stderr, "scened did not print its listening line; log %s\n", d->log_path);
  scn_daemon_stop(d, SIGKILL, 1000);
  return -1;
}

int scn_daemon_stop(scn_daemon *d, int sig, int timeout_ms) {
  if (d->pid <= 0)
    return -1;
  kill(d->pid, sig ? sig : SIGTERM);
  return scn_daemon_wait(d, timeout_ms);
}

int scn_daemon_wait(scn_daemon *d, int timeout_ms) {
  if (d->pid <= 0)
    return -1;
  int status = scn_child_wait(d->pid, timeout_ms);
  d->pid = 0;
  return status;
}

int scn_client_connect(scn_client *c, int port) {
  memset(c, 0, sizeof *c);
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (c->fd < 0)
    return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(c->fd);
    c->fd = -1;
    return -1;
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return 0;
}

void scn_client_keep_events(scn_client *c) {
  if (!c->events)
    c->events = cJSON_CreateArray();
  if (!c->events)
    abort();
}

void scn_client_close(scn_client *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  free(c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
  cJSON_Delete(c->events);
  c->events = NULL;
}

int scn_client_send_raw(scn_client *c, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int scn_client_send(scn_client *c, const char *line) {
  size_t len = strlen(line);
  char *tmp = malloc(len + 1);
  if (!tmp)
    return -1;
  memcpy(tmp, line, len);
  tmp[len] = '\n';
  int rc = scn_client_send_raw(c, tmp, len + 1);
  free(tmp);
  return rc;
}

/* Reads more bytes into the buffer; 1 read, 0 timeout, -1 end of stream or error. */
static int fill(scn_client *c, long deadline) {
  long left = deadline - scn_now_ms();
  if (left < 0)
    return 0;
  struct pollfd p = {.fd = c->fd, .events = POLLIN};
  int r = poll(&p, 1, (int)left);
  if (r <= 0)
    return 0;
  if (c->cap - c->len < 65536) {
    size_t cap = c->cap ? c->cap * 2 : 131072;
    char *q = realloc(c->buf, cap);
    if (!q)
      return -1;
    c->buf = q;
    c->cap = cap;
  }
  ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
  if (n <= 0)
    return -1;
  c->len += (size_t)n;
  return 1;
}

char *scn_client_recv(scn_client *c, int timeout_ms) {
  long deadline = scn_now_ms() + timeout_ms;
  for (;;) {
    char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
    if (nl) {
      size_t n = (size_t)(nl - c->buf);
      char *line = malloc(n + 1);
      if (!line)
        return NULL;
      memcpy(line, c->buf, n);
      line[n] = '\0';
      memmove(c->buf, nl + 1, c->len - n - 1);
      c->len -= n + 1;
      return line;
    }
    if (fill(c, deadline) <= 0)
      return NULL;
  }
}

cJSON *scn_client_recv_json(scn_client *c, int timeout_ms) {
  char *line = scn_client_recv(c, timeout_ms);
  if (!line)
    return NULL;
  cJSON *j = cJSON_Parse(line);
  free(line);
  return j;
}

cJSON *scn_client_call(scn_client *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *line = malloc((size_t)n + 1);
  if (!line)
    return NULL;
  va_start(ap, fmt);
  vsnprintf(line, (size_t)n + 1, fmt, ap);
  va_end(ap);
  int rc = scn_client_send(c, line);
  free(line);
  if (rc != 0)
    return NULL;
  for (;;) {
    cJSON *r = scn_client_recv_json(c, 5000);
    if (!r || !cJSON_GetObjectItemCaseSensitive(r, "event"))
      return r;
    if (c->events)
      cJSON_AddItemToArray(c->events, r);
    else
      cJSON_Delete(r);
  }
}

bool scn_client_closed(scn_client *c, int timeout_ms) {
  long deadline = scn_now_ms() + timeout_ms;
  for (;;) {
    c->len = 0;
    int r = fill(c, deadline);
    if (r < 0)
      return true;
    if (r == 0)
      return false;
  }
}

bool scn_resp_ok(const cJSON *r) {
  return r && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
}

const char *scn_resp_code(const cJSON *r) {
  const cJSON *e = r ? cJSON_GetObjectItemCaseSensitive(r, "error") : NULL;
  const cJSON *code = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
  return cJSON_IsString(code) ? code->valuestring : "";
}

double scn_resp_num(const cJSON *r, const char *field) {
  const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

unsigned long long scn_resp_id(const cJSON *r, const char *field) {
  double d = scn_resp_num(r, field);
  return d >= 1 && d <= 9007199254740991.0 ? (unsigned long long)d : 0;
}

const char *scn_resp_str(const cJSON *r, const char *field) {
  const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  return cJSON_IsString(v) ? v->valuestring : "";
}

bool scn_resp_str_is(const cJSON *r, const char *field, const char *want) {
  const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  return cJSON_IsString(v) && strcmp(v->valuestring, want) == 0;
}

bool scn_resp_has(const cJSON *r, const char *field) {
  return r && cJSON_GetObjectItemCaseSensitive(r, field) != NULL;
}

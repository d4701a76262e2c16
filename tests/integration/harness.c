#include "harness.h"

#include "scn_client.h"

#include <dirent.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
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

char *t_read_file(const char *path) {
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

long t_rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  long kib = -1;
  while (kib < 0 && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0)
      kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

bool t_daemon_log_contains(const t_daemon *d, const char *text) {
  char *log = t_read_file(d->log_path);
  bool found = log && strstr(log, text);
  free(log);
  return found;
}

const char *t_daemon_bin(void) {
  const char *bin = getenv("SCENED_BIN");
  return bin ? bin : "build/scened";
}

/* The port of the daemon's "<what>HOST:PORT" line (HOST 127.0.0.1, [::1], ...), 0 until there
 * is one. */
static int logged_port(const char *log, const char *what) {
  const char *at = strstr(log, what), *end = at ? strchr(at, '"') : NULL;
  if (!end)
    return 0;
  while (end > at && *end != ':')
    end--;
  return *end == ':' ? atoi(end + 1) : 0;
}

int t_daemon_start(t_daemon *d, const char *const *args) {
  const char *bin = t_daemon_bin();
  static int serial;
  snprintf(d->log_path, sizeof d->log_path, "/tmp/scened-test-%d-%d.log", (int)getpid(), ++serial);
  /* Both ports ephemeral, so test daemons never collide with each other or a running one. */
  const char *argv[64] = {bin, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"};
  int argc = 5;
  for (int i = 0; args && args[i] && argc < 62; i++)
    argv[argc++] = args[i];
  argv[argc] = NULL;
  /* Emptied before the fork: a log left by an earlier process of the same pid would otherwise
   * be read until the child truncates it, and its "listening on" line give an old port. */
  int empty = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (empty < 0)
    return -1;
  close(empty);
  pid_t pid = t_fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    int fd = open(d->log_path, O_WRONLY | O_APPEND);
    if (fd >= 0) {
      dup2(fd, 2);
      close(fd);
    }
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  d->pid = pid;
  d->port = 0;
  long deadline = t_now_ms() + 10000;
  while (t_now_ms() < deadline) {
    char *log = t_read_file(d->log_path);
    int at = log ? logged_port(log, "listening on ") : 0;
    int http = log ? logged_port(log, "http on ") : 0;
    bool http_off = false;
    for (int i = 0; args && args[i]; i++)
      if (!strcmp(args[i], "--http") && args[i + 1] && !strcmp(args[i + 1], "off"))
        http_off = true;
    if (at && (http || http_off)) {
      d->port = at;
      d->http_port = http;
      free(log);
      return 0;
    }
    free(log);
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      t_child_reaped(pid);
      fprintf(stderr, "scened exited before listening (status %d); log %s\n", status, d->log_path);
      d->pid = 0;
      return -1;
    }
    usleep(5000);
  }
  fprintf(stderr, "scened did not print its listening line; log %s\n", d->log_path);
  t_daemon_stop(d, SIGKILL, 1000);
  return -1;
}

int t_daemon_stop(t_daemon *d, int sig, int timeout_ms) {
  if (d->pid <= 0)
    return -1;
  kill(d->pid, sig ? sig : SIGTERM);
  return t_daemon_wait(d, timeout_ms);
}

int t_daemon_wait(t_daemon *d, int timeout_ms) {
  if (d->pid <= 0)
    return -1;
  int status = t_child_wait(d->pid, timeout_ms);
  d->pid = 0;
  return status;
}

int t_client_connect(t_client *c, int port) {
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

void t_client_keep_events(t_client *c) {
  if (!c->events)
    c->events = cJSON_CreateArray();
  if (!c->events)
    abort();
}

int t_client_connect_tls(t_client *c, int port, const t_tls_files *tls, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  c->fd = -1;
  scn_cli_options o = {.host = "127.0.0.1",
                       .port = port,
                       .timeout_ms = 10000,
                       .tls = true,
                       .tls_ca = tls->ca,
                       .tls_cert = tls->cert,
                       .tls_key = tls->key};
  c->tls = scn_cli_connect(&o, err, errlen);
  if (!c->tls)
    return -1;
  c->fd = scn_cli_fd(c->tls);
  return 0;
}

void t_client_close(t_client *c) {
  if (c->tls)
    scn_cli_close(c->tls); /* and its descriptor */
  else if (c->fd >= 0)
    close(c->fd);
  c->tls = NULL;
  c->fd = -1;
  free(c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
  cJSON_Delete(c->events);
  c->events = NULL;
}

int t_client_send_raw(t_client *c, const void *data, size_t len) {
  const char *p = data;
  while (len && c->tls) {
    ssize_t n = scn_cli_send_raw(c->tls, p, len);
    if (n < 0)
      return -1;
    if (n == 0) {
      struct pollfd w = {.fd = c->fd, .events = POLLOUT};
      poll(&w, 1, 100);
      continue;
    }
    p += n;
    len -= (size_t)n;
  }
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

int t_client_send(t_client *c, const char *line) {
  size_t len = strlen(line);
  char *tmp = malloc(len + 1);
  if (!tmp)
    return -1;
  memcpy(tmp, line, len);
  tmp[len] = '\n';
  int rc = t_client_send_raw(c, tmp, len + 1);
  free(tmp);
  return rc;
}

/* Reads more bytes into the buffer; 1 read, 0 timeout, -1 end of stream or error. */
static int fill(t_client *c, long deadline) {
  for (;;) {
    long left = deadline - t_now_ms();
    if (left < 0)
      return 0;
    if (!(c->tls && scn_cli_pending(c->tls))) {
      struct pollfd p = {.fd = c->fd, .events = POLLIN};
      int r = poll(&p, 1, (int)left);
      if (r <= 0)
        return 0;
    }
    if (c->cap - c->len < 65536) {
      size_t cap = c->cap ? c->cap * 2 : 131072;
      char *q = realloc(c->buf, cap);
      if (!q)
        return -1;
      c->buf = q;
      c->cap = cap;
    }
    ssize_t n = c->tls ? scn_cli_recv_raw(c->tls, c->buf + c->len, c->cap - c->len)
                       : recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (n < 0 || (n == 0 && !c->tls))
      return -1;
    if (n > 0) {
      c->len += (size_t)n;
      return 1;
    } /* TLS: a part of a record came, the rest is awaited */
  }
}

char *t_client_recv(t_client *c, int timeout_ms) {
  long deadline = t_now_ms() + timeout_ms;
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

cJSON *t_client_recv_json(t_client *c, int timeout_ms) {
  char *line = t_client_recv(c, timeout_ms);
  if (!line)
    return NULL;
  cJSON *j = cJSON_Parse(line);
  free(line);
  return j;
}

cJSON *t_client_call(t_client *c, const char *fmt, ...) {
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
  int rc = t_client_send(c, line);
  free(line);
  if (rc != 0)
    return NULL;
  for (;;) {
    cJSON *r = t_client_recv_json(c, 5000);
    if (!r || !cJSON_GetObjectItemCaseSensitive(r, "event"))
      return r;
    if (c->events)
      cJSON_AddItemToArray(c->events, r);
    else
      cJSON_Delete(r);
  }
}

double t_wait_info(t_client *c, const char *field, double want, int timeout_ms) {
  long deadline = t_now_ms() + timeout_ms;
  for (;;) {
    cJSON *r = t_client_call(c, "{\"cmd\":\"info\"}");
    double n = t_resp_num(r, field);
    cJSON_Delete(r);
    if (n == want || t_now_ms() > deadline)
      return n;
    t_sleep_ms(20);
  }
}

bool t_client_closed(t_client *c, int timeout_ms) {
  long deadline = t_now_ms() + timeout_ms;
  for (;;) {
    c->len = 0;
    int r = fill(c, deadline);
    if (r < 0)
      return true;
    if (r == 0)
      return false;
  }
}

bool t_resp_ok(const cJSON *r) {
  return r && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
}

const char *t_resp_code(const cJSON *r) {
  const cJSON *e = r ? cJSON_GetObjectItemCaseSensitive(r, "error") : NULL;
  const cJSON *code = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
  return cJSON_IsString(code) ? code->valuestring : "";
}

double t_resp_num(const cJSON *r, const char *field) {
  const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

unsigned long long t_resp_id(const cJSON *r, const char *field) {
  double d = t_resp_num(r, field);
  return d >= 1 && d <= 9007199254740991.0 ? (unsigned long long)d : 0;
}

const char *t_resp_str(const cJSON *r, const char *field) {
  const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  return cJSON_IsString(v) ? v->valuestring : "";
}

bool t_resp_str_is(const cJSON *r, const char *field, const char *want) {
  const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, field) : NULL;
  return cJSON_IsString(v) && strcmp(v->valuestring, want) == 0;
}

bool t_resp_has(const cJSON *r, const char *field) {
  return r && cJSON_GetObjectItemCaseSensitive(r, field) != NULL;
}

int t_https_raw(int port, const t_tls_files *tls, const char *req, char **resp, bool *closed) {
  *resp = NULL;
  *closed = false;
  t_client c;
  char err[256];
  if ((tls ? t_client_connect_tls(&c, port, tls, err, sizeof err) : t_client_connect(&c, port)) !=
      0) {
    *resp = strdup("");
    return 0;
  }
  t_client_send_raw(&c, req, strlen(req));
  text b = {0};
  long deadline = t_now_ms() + 5000;
  while (t_now_ms() < deadline) {
    int r = fill(&c, t_now_ms() + 50);
    if (r < 0) {
      *closed = true;
      break;
    }
    if (r > 0) {
      text_add(&b, c.buf, c.len);
      c.len = 0;
    }
  }
  t_client_close(&c);
  int status = 0;
  if (b.s && !strncmp(b.s, "HTTP/1.", 7) && b.len > 12)
    status = atoi(b.s + 9);
  *resp = b.s ? b.s : strdup("");
  return status;
}

int t_http_raw(int port, const char *req, char **resp, bool *closed) {
  return t_https_raw(port, NULL, req, resp, closed);
}

int t_https_get(int port, const t_tls_files *tls, const char *path, char **resp) {
  char req[256];
  snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
           path);
  bool closed;
  return t_https_raw(port, tls, req, resp, &closed);
}

int t_http_get(int port, const char *path, char **resp) {
  return t_https_get(port, NULL, path, resp);
}

bool t_find_script(const char *name, char *out, size_t n) {
  const char *bin = t_daemon_bin();
  const char *slash = strrchr(bin, '/');
  if (slash) {
    int dlen = (int)(slash - bin);
    const char *ups[] = {"/../scripts/", "/../../scripts/"};
    for (int i = 0; i < 2; i++) {
      snprintf(out, n, "%.*s%s%s", dlen, bin, ups[i], name);
      if (access(out, R_OK) == 0)
        return true;
    }
  }
  snprintf(out, n, "scripts/%s", name);
  return access(out, R_OK) == 0;
}

bool t_temp_dir(char *dir, size_t cap, const char *name) {
  snprintf(dir, cap, "/tmp/scened-%s-XXXXXX", name);
  return mkdtemp(dir) != NULL;
}

void t_remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      chmod(path, 0700);
      t_remove_tree(path);
    } else {
      unlink(path);
    }
  }
  if (d)
    closedir(d);
  rmdir(dir);
}

void t_remove_temp_dir(const char *dir) {
  if (dir[0] && strncmp(dir, "/tmp/scened-", 12) == 0)
    t_remove_tree(dir);
}

bool t_make_certs(char *dir, size_t cap) {
  char script[1024];
  if (!t_find_script("tls-certs.sh", script, sizeof script) || !t_temp_dir(dir, cap, "tls"))
    return false;
  t_proc p;
  const char *args[] = {dir, NULL};
  if (!t_proc_start(&p, script, args, NULL, NULL, 0))
    return false;
  int code = t_proc_wait(&p, 30000);
  if (code != 0)
    fprintf(stderr, "tls-certs.sh: exit %d\n%s%s\n", code, text_str(&p.out), text_str(&p.err));
  t_proc_free(&p);
  return code == 0;
}

double page_metric(const char *page, const char *name) {
  size_t len = strlen(name);
  for (const char *line = page; line && *line;
       line = strchr(line, '\n'), line = line ? line + 1 : NULL)
    if (strncmp(line, name, len) == 0 && line[len] == ' ')
      return strtod(line + len + 1, NULL);
  return -1;
}

static void set_flags(int fd, bool nonblock) {
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  if (nonblock)
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

bool t_proc_start(t_proc *p, const char *bin, const char *const *args, char *const *envp,
                  const char *in, size_t in_len) {
  const char *argv[64] = {bin};
  int argc = 1;
  for (int i = 0; args && args[i] && argc < 63; i++)
    argv[argc++] = args[i];
  argv[argc] = NULL;
  *p = (t_proc){
      .pid = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .in = in, .in_len = in_len, .status = -1};
  int pin[2], pout[2], perr[2];
  if (pipe(pin) != 0)
    return false;
  if (pipe(pout) != 0) {
    close(pin[0]), close(pin[1]);
    return false;
  }
  if (pipe(perr) != 0) {
    close(pin[0]), close(pin[1]), close(pout[0]), close(pout[1]);
    return false;
  }
  set_flags(pin[1], true);
  set_flags(pout[0], true);
  set_flags(perr[0], true);
  pid_t pid = t_fork();
  if (pid == 0) {
    signal(SIGPIPE, SIG_DFL);
    dup2(pin[0], 0);
    dup2(pout[1], 1);
    dup2(perr[1], 2);
    close(pin[0]), close(pout[1]), close(perr[1]);
    if (envp)
      execve(argv[0], (char *const *)argv, envp);
    else
      execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(pin[0]), close(pout[1]), close(perr[1]);
  if (pid < 0) {
    close(pin[1]), close(pout[0]), close(perr[0]);
    return false;
  }
  p->pid = pid;
  p->in_fd = pin[1];
  p->out_fd = pout[0];
  p->err_fd = perr[0];
  if (in_len == 0) {
    close(p->in_fd);
    p->in_fd = -1;
  }
  return true;
}

static void drain(int *fd, text *t) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n > 0) {
      text_add(t, buf, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    close(*fd); /* end of stream or an error */
    *fd = -1;
    return;
  }
}

bool t_proc_pump(t_proc *p, int ms) {
  long deadline = t_now_ms() + ms;
  for (;;) {
    struct pollfd f[3];
    int n = 0, iin = -1, iout = -1, ierr = -1;
    if (p->in_fd >= 0)
      iin = n, f[n++] = (struct pollfd){.fd = p->in_fd, .events = POLLOUT};
    if (p->out_fd >= 0)
      iout = n, f[n++] = (struct pollfd){.fd = p->out_fd, .events = POLLIN};
    if (p->err_fd >= 0)
      ierr = n, f[n++] = (struct pollfd){.fd = p->err_fd, .events = POLLIN};
    if (p->out_fd < 0 && p->err_fd < 0)
      return true;
    long left = deadline - t_now_ms();
    if (left < 0)
      return false;
    int r = poll(f, (nfds_t)n, (int)left);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    if (iin >= 0 && f[iin].revents) {
      ssize_t w = write(p->in_fd, p->in + p->in_off, p->in_len - p->in_off);
      if (w > 0)
        p->in_off += (size_t)w;
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || p->in_off == p->in_len) {
        close(p->in_fd);
        p->in_fd = -1;
      }
    }
    if (iout >= 0 && f[iout].revents)
      drain(&p->out_fd, &p->out);
    if (ierr >= 0 && f[ierr].revents)
      drain(&p->err_fd, &p->err);
  }
}

int t_proc_wait(t_proc *p, int timeout_ms) {
  long deadline = t_now_ms() + timeout_ms;
  while (!t_proc_pump(p, 50) && t_now_ms() < deadline) {
  }
  p->status = t_child_wait(p->pid, (int)(deadline - t_now_ms()));
  p->pid = -1;
  int *fds[] = {&p->in_fd, &p->out_fd, &p->err_fd};
  for (int i = 0; i < 3; i++)
    if (*fds[i] >= 0) {
      close(*fds[i]);
      *fds[i] = -1;
    }
  if (p->status == -1) {
    fprintf(stderr, "  a child was killed after %d ms; its stdout: %.600s\n", timeout_ms,
            text_str(&p->out));
    return -1;
  }
  return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : 128 + WTERMSIG(p->status);
}

void t_proc_free(t_proc *p) {
  text_free(&p->out);
  text_free(&p->err);
}

/* The C client library: blocking sockets with poll() timeouts, framing shared with the
 * daemon through proto/. */
#include "scn_client.h"

#include "buf.h"
#include "framing.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Where a world was last found (a cluster's MOVED answers). */
typedef struct owner {
  char world[65];
  char addr[96];
} owner;

#define OWNERS 64
#define MAX_HOPS 3

struct scn_cli {
  int fd;
  int timeout_ms;
  char addr[96]; /* HOST:PORT of the daemon connected to */
  char *token;
  bool no_follow;
  owner owners[OWNERS];
  unsigned nowners, next_owner;
  scn_buf out;
  scn_buf in;      /* bytes read, not yet consumed */
  size_t consumed; /* start of unconsumed bytes in in */
  scn_cli_event_fn on_event;
  void *event_ud;
  char error[256];
};

static int hello(scn_cli *c);

static int fail(scn_cli *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
  return code;
}

const char *scn_cli_error(const scn_cli *c) { return c->error; }
int scn_cli_fd(const scn_cli *c) { return c->fd; }

void scn_cli_on_event(scn_cli *c, scn_cli_event_fn fn, void *ud) {
  c->on_event = fn;
  c->event_ud = ud;
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_to(const char *host, int port, char *err, size_t errlen) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
    return -1;
  }
  int fd = -1, last = 0;
  for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0)
      continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    snprintf(err, errlen, "cannot connect to %s:%d: %s", host, port, strerror(last));
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

scn_cli *scn_cli_connect(const scn_cli_options *opt, char *err, size_t errlen) {
  char dummy[256];
  if (!err)
    err = dummy, errlen = sizeof dummy;
  scn_cli_options o = opt ? *opt : (scn_cli_options){0};
  if (!o.host)
    o.host = "127.0.0.1";
  if (!o.port)
    o.port = 7878;
  scn_cli *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  c->timeout_ms = o.timeout_ms ? o.timeout_ms : 10000;
  c->no_follow = o.no_follow;
  snprintf(c->addr, sizeof c->addr, strchr(o.host, ':') ? "[%s]:%d" : "%s:%d", o.host, o.port);
  c->fd = connect_to(o.host, o.port, err, errlen);
  if (c->fd < 0) {
    free(c);
    return NULL;
  }
  if (o.token && !(c->token = strdup(o.token))) {
    snprintf(err, errlen, "out of memory");
    scn_cli_close(c);
    return NULL;
  }
  if (c->token && hello(c) != SCN_CLI_OK) {
    snprintf(err, errlen, "hello failed: %s", c->error);
    scn_cli_close(c);
    return NULL;
  }
  return c;
}

static int finish_call(scn_cli *c, cJSON **out);

static int hello(scn_cli *c) {
  cJSON *req = cJSON_CreateObject(), *resp = NULL;
  cJSON_AddStringToObject(req, "cmd", "hello");
  cJSON_AddStringToObject(req, "token", c->token);
  int rc = req ? scn_cli_send(c, req) : SCN_CLI_ENOMEM;
  if (rc == SCN_CLI_OK)
    rc = finish_call(c, &resp);
  cJSON_Delete(req);
  cJSON_Delete(resp);
  return rc;
}

void scn_cli_close(scn_cli *c) {
  if (!c)
    return;
  if (c->fd >= 0)
    close(c->fd);
  scn_buf_free(&c->out);
  scn_buf_free(&c->in);
  free(c->token);
  free(c);
}

/* ---- following a cluster's MOVED ----------------------------------------------------------- */

static const char *owner_of(const scn_cli *c, const char *world) {
  for (unsigned i = 0; i < c->nowners; i++)
    if (strcmp(c->owners[i].world, world) == 0)
      return c->owners[i].addr;
  return NULL;
}

static void remember_owner(scn_cli *c, const char *world, const char *addr) {
  owner *o = NULL;
  for (unsigned i = 0; i < c->nowners && !o; i++)
    if (strcmp(c->owners[i].world, world) == 0)
      o = &c->owners[i];
  if (!o) {
    o = &c->owners[c->nowners < OWNERS ? c->nowners++ : c->next_owner++ % OWNERS];
    snprintf(o->world, sizeof o->world, "%s", world);
  }
  snprintf(o->addr, sizeof o->addr, "%s", addr);
}

/* Moves this client to the daemon at addr (HOST:PORT): a new connection, hello with the token,
 * the old connection closed. Responses still due on the old one are lost, so only calls (one
 * request, its response) move. */
static int reconnect(scn_cli *c, const char *addr) {
  char host[96], err[256];
  snprintf(host, sizeof host, "%s", addr);
  char *colon = strrchr(host, ':');
  if (!colon)
    return fail(c, SCN_CLI_EPROTO, "MOVED to \"%s\", which is not HOST:PORT", addr);
  *colon = '\0';
  int port = atoi(colon + 1);
  char *h = host;
  if (h[0] == '[' && colon > h + 1 && colon[-1] == ']') {
    colon[-1] = '\0';
    h++;
  }
  int fd = connect_to(h, port, err, sizeof err);
  if (fd < 0)
    return fail(c, SCN_CLI_ECONNECT, "%s", err);
  close(c->fd);
  c->fd = fd;
  c->out.len = c->in.len = c->consumed = 0;
  snprintf(c->addr, sizeof c->addr, "%s", addr);
  return c->token ? hello(c) : SCN_CLI_OK;
}

/* The world a request names, NULL when none. */
static const char *request_world(const cJSON *req) {
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(req, "world");
  return cJSON_IsString(w) && strlen(w->valuestring) < 65 ? w->valuestring : NULL;
}

const char *scn_cli_addr(const scn_cli *c) { return c->addr; }

int scn_cli_send_line(scn_cli *c, const char *line, size_t len) {
  scn_buf_add(&c->out, line, len);
  scn_buf_addc(&c->out, '\n');
  if (c->out.failed) {
    c->out.failed = false;
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  }
  return SCN_CLI_OK;
}

int scn_cli_send(scn_cli *c, const cJSON *req) {
  char *text = cJSON_PrintUnformatted(req);
  if (!text)
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  int rc = scn_cli_send_line(c, text, strlen(text));
  cJSON_free(text);
  return rc;
}

/* Writes what is queued; while the socket is full it also reads, so a long pipeline cannot
 * deadlock against a daemon that is itself waiting for us to read. */
static int read_some(scn_cli *c, int timeout_ms);

int scn_cli_flush(scn_cli *c) {
  size_t off = 0;
  int rc = SCN_CLI_OK;
  while (off < c->out.len && rc == SCN_CLI_OK) {
    ssize_t n = send(c->fd, c->out.data + off, c->out.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd p = {.fd = c->fd, .events = POLLOUT | POLLIN};
      if (poll(&p, 1, c->timeout_ms) <= 0) {
        rc = fail(c, SCN_CLI_ETIMEOUT, "timed out sending");
      } else if (p.revents & POLLIN) {
        rc = read_some(c, 0);
        if (rc == SCN_CLI_ETIMEOUT)
          rc = SCN_CLI_OK;
      }
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      rc = fail(c, SCN_CLI_ECLOSED, "the daemon closed the connection");
    else
      rc = fail(c, SCN_CLI_EIO, "send failed: %s", strerror(errno));
  }
  /* What was sent is gone from the queue even when the rest failed: a later flush sends only
   * the rest, never a request twice. */
  scn_buf_consume(&c->out, off);
  return rc;
}

static int read_some(scn_cli *c, int timeout_ms) {
  struct pollfd p = {.fd = c->fd, .events = POLLIN};
  int r = poll(&p, 1, timeout_ms);
  if (r == 0)
    return fail(c, SCN_CLI_ETIMEOUT, "timed out waiting for the daemon");
  if (r < 0)
    return errno == EINTR ? SCN_CLI_ETIMEOUT : fail(c, SCN_CLI_EIO, "poll: %s", strerror(errno));
  if (c->consumed > 0 && c->consumed == c->in.len) {
    c->in.len = c->consumed = 0;
  } else if (c->consumed > 1 << 20) {
    scn_buf_consume(&c->in, c->consumed);
    c->consumed = 0;
  }
  if (!scn_buf_reserve(&c->in, 65536))
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
  if (n == 0)
    return fail(c, SCN_CLI_ECLOSED, "the daemon closed the connection");
  if (n < 0 && errno == ECONNRESET)
    return fail(c, SCN_CLI_ECLOSED, "the daemon closed the connection");
  if (n < 0)
    return errno == EINTR ? SCN_CLI_OK : fail(c, SCN_CLI_EIO, "recv: %s", strerror(errno));
  c->in.len += (size_t)n;
  return SCN_CLI_OK;
}

int scn_cli_read_line(scn_cli *c, const char **line, size_t *len, int timeout_ms) {
  int rc = scn_cli_flush(c);
  if (rc != SCN_CLI_OK)
    return rc;
  long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  for (;;) {
    char *start = c->in.data + c->consumed;
    char *nl = c->in.len > c->consumed ? memchr(start, '\n', c->in.len - c->consumed) : NULL;
    if (nl) {
      *line = start;
      *len = (size_t)(nl - start);
      if (*len && start[*len - 1] == '\r')
        (*len)--;
      c->consumed += (size_t)(nl - start) + 1;
      return SCN_CLI_OK;
    }
    int left = deadline < 0 ? -1 : (int)(deadline - now_ms());
    if (deadline >= 0 && left < 0)
      left = 0;
    rc = read_some(c, left);
    if (rc != SCN_CLI_OK)
      return rc;
  }
}

static int next_json(scn_cli *c, int timeout_ms, cJSON **out) {
  const char *line;
  size_t len;
  int rc = scn_cli_read_line(c, &line, &len, timeout_ms);
  if (rc != SCN_CLI_OK)
    return rc;
  *out = cJSON_ParseWithLength(line, len);
  if (!*out || !cJSON_IsObject(*out)) {
    cJSON_Delete(*out);
    *out = NULL;
    return fail(c, SCN_CLI_EPROTO, "the daemon sent a line that is not a JSON object");
  }
  return SCN_CLI_OK;
}

static bool is_event(const cJSON *j) { return cJSON_GetObjectItemCaseSensitive(j, "event"); }

static void hand_event(scn_cli *c, cJSON *ev) {
  if (c->on_event)
    c->on_event(c->event_ud, ev);
  cJSON_Delete(ev);
}

int scn_cli_read_response(scn_cli *c, cJSON **out) {
  *out = NULL;
  for (;;) {
    cJSON *j;
    int rc = next_json(c, c->timeout_ms, &j);
    if (rc != SCN_CLI_OK)
      return rc;
    if (!is_event(j)) {
      *out = j;
      return SCN_CLI_OK;
    }
    hand_event(c, j);
  }
}

const char *scn_cli_reply_code(const cJSON *r) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
  const cJSON *code = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
  return cJSON_IsString(code) ? code->valuestring : NULL;
}

const char *scn_cli_reply_message(const cJSON *r) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
  const cJSON *m = e ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;
  return cJSON_IsString(m) ? m->valuestring : NULL;
}

static int finish_call(scn_cli *c, cJSON **out) {
  cJSON *r;
  int rc = scn_cli_read_response(c, &r);
  if (rc != SCN_CLI_OK)
    return rc;
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"))) {
    const char *code = scn_cli_reply_code(r), *msg = scn_cli_reply_message(r);
    rc = fail(c, SCN_CLI_EREPLY, "%s: %s", code ? code : "ERROR", msg ? msg : "");
  }
  if (out)
    *out = r;
  else
    cJSON_Delete(r);
  return rc;
}

/* One request (line, parsed as req when it names a world), one response. In a cluster, a
 * request for a world goes to the daemon last known to own it, and a MOVED answer is followed
 * (a few hops at most), the owner remembered. */
static int call(scn_cli *c, const char *line, size_t len, const cJSON *req, cJSON **out) {
  const char *world = c->no_follow ? NULL : request_world(req);
  const char *known = world ? owner_of(c, world) : NULL;
  if (known && strcmp(known, c->addr) != 0 && c->out.len == 0)
    reconnect(c, known); /* on failure the request goes where it would have */
  for (int hops = 0;; hops++) {
    if (out)
      *out = NULL;
    cJSON *r = NULL;
    int rc = scn_cli_send_line(c, line, len);
    if (rc == SCN_CLI_OK)
      rc = finish_call(c, &r);
    const char *code = rc == SCN_CLI_EREPLY ? scn_cli_reply_code(r) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
    const cJSON *addr = cJSON_GetObjectItemCaseSensitive(e, "addr");
    if (!world || !code || strcmp(code, "MOVED") != 0 || !cJSON_IsString(addr) ||
        hops == MAX_HOPS) {
      if (out)
        *out = r;
      else
        cJSON_Delete(r);
      return rc;
    }
    remember_owner(c, world, addr->valuestring);
    int moved = reconnect(c, addr->valuestring);
    if (moved != SCN_CLI_OK) {
      if (out)
        *out = r;
      else
        cJSON_Delete(r);
      return moved;
    }
    cJSON_Delete(r);
  }
}

int scn_cli_call(scn_cli *c, const cJSON *req, cJSON **out) {
  char *text = cJSON_PrintUnformatted(req);
  if (!text)
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  int rc = call(c, text, strlen(text), req, out);
  cJSON_free(text);
  return rc;
}

int scn_cli_call_line(scn_cli *c, const char *line, cJSON **out) {
  cJSON *req = c->no_follow ? NULL : cJSON_Parse(line);
  int rc = call(c, line, strlen(line), req, out);
  cJSON_Delete(req);
  return rc;
}

int scn_cli_subscribe(scn_cli *c, const char *world, double root, double hz, double *sub) {
  cJSON *req = cJSON_CreateObject(), *r = NULL;
  if (!req)
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  cJSON_AddStringToObject(req, "cmd", "subscribe");
  cJSON_AddStringToObject(req, "world", world);
  if (root > 0)
    cJSON_AddNumberToObject(req, "root", root);
  if (hz > 0)
    cJSON_AddNumberToObject(req, "hz", hz);
  int rc = scn_cli_call(c, req, &r);
  cJSON_Delete(req);
  if (rc == SCN_CLI_OK) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "sub");
    if (cJSON_IsNumber(s))
      *sub = s->valuedouble;
    else
      rc = fail(c, SCN_CLI_EPROTO, "subscribe answered without a sub id");
  }
  cJSON_Delete(r);
  return rc;
}

int scn_cli_poll_events(scn_cli *c, int timeout_ms) {
  int count = 0;
  long deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
  for (;;) {
    cJSON *j;
    int left = (int)(deadline - now_ms());
    int rc = next_json(c, count ? 0 : (left > 0 ? left : 0), &j);
    if (rc == SCN_CLI_ETIMEOUT)
      return count;
    if (rc != SCN_CLI_OK)
      return count ? count : rc;
    if (!is_event(j)) {
      cJSON_Delete(j);
      return fail(c, SCN_CLI_EPROTO, "a response arrived while only events were expected");
    }
    hand_event(c, j);
    count++;
  }
}

/* ---- parts of a transform --------------------------------------------------------------- */

static bool add_floats(cJSON *req, const char *key, const float *v, int n) {
  cJSON *a = cJSON_AddArrayToObject(req, key);
  for (int i = 0; a && i < n; i++)
    if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i])))
      return false;
  return a != NULL;
}

/* A request {"cmd":cmd,"world":world,"entity":entity}, NULL when out of memory. */
static cJSON *entity_request(const char *cmd, const char *world, double entity) {
  cJSON *req = cJSON_CreateObject();
  if (req && cJSON_AddStringToObject(req, "cmd", cmd) &&
      cJSON_AddStringToObject(req, "world", world) &&
      cJSON_AddNumberToObject(req, "entity", entity))
    return req;
  cJSON_Delete(req);
  return NULL;
}

int scn_cli_set_parts(scn_cli *c, const char *world, double entity, bool world_space,
                      const float t[3], const float r[4], const float s[3]) {
  cJSON *req =
      entity_request(world_space ? "transform.set_world" : "transform.set_local", world, entity);
  bool built = req && cJSON_AddTrueToObject(req, "partial") && (!t || add_floats(req, "t", t, 3)) &&
               (!r || add_floats(req, "r", r, 4)) && (!s || add_floats(req, "s", s, 3));
  int rc = built ? scn_cli_call(c, req, NULL) : fail(c, SCN_CLI_ENOMEM, "out of memory");
  cJSON_Delete(req);
  return rc;
}

static bool floats_of(const cJSON *a, float *out, int n) {
  if (cJSON_GetArraySize(a) != n)
    return false;
  int i = 0;
  for (const cJSON *x = a->child; x; x = x->next) {
    if (!cJSON_IsNumber(x))
      return false;
    out[i++] = (float)x->valuedouble; /* the daemon prints float32 exactly */
  }
  return true;
}

/* The parts of o ({"t","r","s"} or null) into out; false when o is neither. */
static bool trs_of(const cJSON *o, scn_cli_trs *out) {
  out->valid = false;
  if (cJSON_IsNull(o))
    return true;
  if (!cJSON_IsObject(o) || !floats_of(cJSON_GetObjectItemCaseSensitive(o, "t"), out->t, 3) ||
      !floats_of(cJSON_GetObjectItemCaseSensitive(o, "r"), out->r, 4) ||
      !floats_of(cJSON_GetObjectItemCaseSensitive(o, "s"), out->s, 3))
    return false;
  out->valid = true;
  return true;
}

int scn_cli_get_at(scn_cli *c, const char *world, double entity, double tick, float local[16],
                   float world_m[16], double *now_tick) {
  cJSON *req = entity_request("transform.get", world, entity), *r = NULL;
  if (!req || (tick >= 0 && !cJSON_AddNumberToObject(req, "tick", tick))) {
    cJSON_Delete(req);
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  }
  int rc = scn_cli_call(c, req, &r);
  cJSON_Delete(req);
  float ignored[16];
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "tick");
  if (rc == SCN_CLI_OK &&
      !(cJSON_IsNumber(t) &&
        floats_of(cJSON_GetObjectItemCaseSensitive(r, "local"), local ? local : ignored, 16) &&
        floats_of(cJSON_GetObjectItemCaseSensitive(r, "world"), world_m ? world_m : ignored, 16)))
    rc = fail(c, SCN_CLI_EPROTO, "transform.get answered without tick, local and world");
  if (rc == SCN_CLI_OK && now_tick)
    *now_tick = t->valuedouble;
  cJSON_Delete(r);
  return rc;
}

int scn_cli_get_trs(scn_cli *c, const char *world, double entity, scn_cli_trs *local,
                    scn_cli_trs *world_trs) {
  cJSON *req = entity_request("transform.get", world, entity), *r = NULL;
  if (!req || !cJSON_AddTrueToObject(req, "trs")) {
    cJSON_Delete(req);
    return fail(c, SCN_CLI_ENOMEM, "out of memory");
  }
  int rc = scn_cli_call(c, req, &r);
  cJSON_Delete(req);
  scn_cli_trs ignored;
  if (rc == SCN_CLI_OK &&
      !(trs_of(cJSON_GetObjectItemCaseSensitive(r, "local_trs"), local ? local : &ignored) &&
        trs_of(cJSON_GetObjectItemCaseSensitive(r, "world_trs"), world_trs ? world_trs : &ignored)))
    rc = fail(c, SCN_CLI_EPROTO, "transform.get answered without local_trs and world_trs");
  cJSON_Delete(r);
  return rc;
}

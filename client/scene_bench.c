/* scene-bench: load generator for scened, in the spirit of redis-benchmark.
 *
 *   scene-bench [--host H] [--port P] [--token T] [-c CLIENTS] [-n REQUESTS] [-P PIPELINE]
 *               [-t TEST[,TEST...]] [-S SUBSCRIBERS] [-K DESCENDANTS] [--seconds S]
 *               [--history TICKS] [--json]
 *
 * Tests: ping, set_local (t/r/s), set_partial (the rotation alone, "partial": true, of
 * transforms that have a translation and a scale to keep), set_matrix, get, get_past (a get
 * at a past tick of a world that keeps --history ticks), batch (16 set_local
 * ops per batch), and stream (S subscribers of a root with K descendants that moves every
 * tick). Each test builds
 * its own world and removes it afterwards. One line per test with ops/s (matrices/s for
 * stream) and latency percentiles; --json prints one JSON object per test instead.
 *
 * In a cluster: --place NODE (or auto) creates the test's world with "node", so it may live
 * on another daemon than the one named by --port; every load connection asks for its world
 * first and follows one MOVED to its owner, as a client that follows MOVED does. --daemons
 * H:P,H:P,... spreads the load: one world per daemon (created there), and the connections
 * round-robin over the daemons, each loading its own daemon's world.
 */
#define _GNU_SOURCE /* memmem */
#include "scn_client.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_DAEMONS 16

typedef struct opts {
  const char *host, *token, *place, *world;
  int port, clients, pipeline, subscribers, descendants;
  char daemons[MAX_DAEMONS][96]; /* --daemons: HOST:PORT each */
  int ndaemons;
  int history; /* ticks the test's world keeps (--history) */
  long requests;
  double seconds;
  bool json;
  char tests[256];
} opts;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

static void die(const char *fmt, const char *arg) {
  fprintf(stderr, "scene-bench: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  exit(2);
}

static scn_cli *connect_to_or_die(const opts *o, const char *host, int port) {
  char err[256];
  scn_cli_options co = {.host = host, .port = port, .token = o->token, .timeout_ms = 30000};
  scn_cli *c = scn_cli_connect(&co, err, sizeof err);
  if (!c)
    die("%s", err);
  return c;
}

static scn_cli *connect_or_die(const opts *o) { return connect_to_or_die(o, o->host, o->port); }

/* Daemon i of --daemons (or the one of --host and --port). */
static scn_cli *connect_daemon(const opts *o, int i) {
  if (o->ndaemons == 0)
    return connect_or_die(o);
  char host[96];
  snprintf(host, sizeof host, "%s", o->daemons[i]);
  char *colon = strrchr(host, ':');
  if (!colon)
    die("--daemons: \"%s\" is not HOST:PORT", o->daemons[i]);
  *colon = '\0';
  return connect_to_or_die(o, host, atoi(colon + 1));
}

static cJSON *call_or_die(scn_cli *c, const char *line) {
  cJSON *r = NULL;
  if (scn_cli_call_line(c, line, &r) != SCN_CLI_OK)
    die("setup failed: %s", scn_cli_error(c));
  return r;
}

/* ---- request/response load ---------------------------------------------------------------- */

typedef struct conn {
  int fd;
  int w; /* the world it loads (its daemon's) */
  char *out;
  size_t out_len, out_cap, out_off;
  char in[1 << 16];
  size_t in_len;
  double *sent; /* ring of send times of outstanding requests */
  size_t head, tail;
  long issued, answered;
  bool want_out;
} conn;

typedef struct load {
  const opts *o;
  const char *test;
  int nworlds;
  char worlds[MAX_DAEMONS][64];
  double *ents[MAX_DAEMONS];
  char *world;      /* the world of the request being made */
  double *entities; /* and its entities */
  size_t nentities;
  long followed; /* load connections that followed a MOVED to their world's owner */
  long issued_total;
  double *lat;
  size_t nlat;
  long errors;
  uint64_t counter;
  uint64_t past_newest, past_span; /* get_past: ticks from newest - span + 1 to newest */
} load;

static void put_u64(char **p, uint64_t v) {
  char tmp[24];
  int n = 0;
  do
    tmp[n++] = (char)('0' + v % 10);
  while (v /= 10);
  while (n)
    *(*p)++ = tmp[--n];
}

static void put_s(char **p, const char *s) {
  size_t n = strlen(s);
  memcpy(*p, s, n);
  *p += n;
}

/* The start of a transform.set_local of entity e, up to its spec. */
static void put_set_local(char **p, const load *L, uint64_t e) {
  put_s(p, "{\"cmd\":\"transform.set_local\",\"world\":\"");
  put_s(p, L->world);
  put_s(p, "\",\"entity\":");
  put_u64(p, e);
}

/* Writes one request of the test into buf; values change every time so no set is a no-op. */
static size_t make_request(load *L, const conn *c, char *buf) {
  L->world = L->worlds[c->w];
  L->entities = L->ents[c->w];
  char *p = buf;
  uint64_t k = ++L->counter;
  uint64_t e = (uint64_t)L->entities[k % L->nentities];
  if (!strcmp(L->test, "ping")) {
    put_s(&p, "{\"cmd\":\"ping\"}\n");
  } else if (!strcmp(L->test, "get") || !strcmp(L->test, "get_past")) {
    put_s(&p, "{\"cmd\":\"transform.get\",\"world\":\"");
    put_s(&p, L->world);
    put_s(&p, "\",\"entity\":");
    put_u64(&p, e);
    if (L->past_span) { /* a tick spread over the window the setup filled */
      put_s(&p, ",\"tick\":");
      put_u64(&p, L->past_newest - (k * 7919) % L->past_span);
    }
    put_s(&p, "}\n");
  } else if (!strcmp(L->test, "set_matrix")) {
    put_set_local(&p, L, e);
    put_s(&p, ",\"matrix\":[0.8,0.6,0,0,-0.6,0.8,0,0,0,0,1,0,");
    put_u64(&p, k % 100000);
    put_s(&p, ".5,2.25,-3.125,1]}\n");
  } else if (!strcmp(L->test, "batch")) {
    put_s(&p, "{\"cmd\":\"batch\",\"world\":\"");
    put_s(&p, L->world);
    put_s(&p, "\",\"ops\":[");
    for (int i = 0; i < 16; i++) {
      put_s(&p, i ? ",{\"cmd\":\"transform.set_local\",\"entity\":"
                  : "{\"cmd\":\"transform.set_local\",\"entity\":");
      put_u64(&p, (uint64_t)L->entities[(k * 16 + (uint64_t)i) % L->nentities]);
      put_s(&p, ",\"t\":[");
      put_u64(&p, k % 100000);
      put_s(&p, ",1.5,2]}");
    }
    put_s(&p, "]}\n");
  } else if (!strcmp(L->test, "set_partial")) {
    put_set_local(&p, L, e);
    put_s(&p, ",\"partial\":true,\"r\":[0,1,0,");
    put_u64(&p, k % 100000);
    put_s(&p, ".5]}\n");
  } else { /* set_local */
    put_set_local(&p, L, e);
    put_s(&p, ",\"t\":[");
    put_u64(&p, k % 100000);
    put_s(&p, ".5,2.25,-3],\"r\":[0,0.38268343,0,0.92387953],\"s\":[1,2,1]}\n");
  }
  return (size_t)(p - buf);
}

/* A load connection for world w: to its daemon, then, as a client that follows MOVED does,
 * one request for the world there and at most one move to the owner it names. */
static int raw_connect(load *L, int w) {
  const opts *o = L->o;
  scn_cli *c = connect_daemon(o, o->ndaemons ? w : 0);
  const char *before = scn_cli_addr(c);
  char was[96], line[256];
  snprintf(was, sizeof was, "%s", before);
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}",
           L->worlds[w], L->ents[w][0]);
  cJSON_Delete(call_or_die(c, line));
  if (strcmp(was, scn_cli_addr(c)) != 0)
    L->followed++;
  int fd = dup(scn_cli_fd(c));
  scn_cli_close(c);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

static void fill_pipeline(load *L, conn *c, long per_conn) {
  size_t ring = (size_t)L->o->pipeline + 1;
  while (c->issued - c->answered < L->o->pipeline && c->issued < per_conn) {
    if (c->out_cap - c->out_len < 4096) {
      c->out_cap = c->out_cap ? c->out_cap * 2 : 1 << 16;
      c->out = realloc(c->out, c->out_cap);
      if (!c->out)
        die("%s", "out of memory");
    }
    c->out_len += make_request(L, c, c->out + c->out_len);
    c->sent[c->tail] = now_s();
    c->tail = (c->tail + 1) % ring;
    c->issued++;
  }
}

static bool flush_out(conn *c) {
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c->out_off += (size_t)n;
  }
  c->out_off = c->out_len = 0;
  return true;
}

static bool read_replies(load *L, conn *c) {
  size_t ring = (size_t)L->o->pipeline + 1;
  for (;;) {
    ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
    if (n == 0)
      return false;
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c->in_len += (size_t)n;
    double t = now_s();
    char *start = c->in, *end = c->in + c->in_len, *nl;
    while ((nl = memchr(start, '\n', (size_t)(end - start)))) {
      if (memmem(start, (size_t)(nl - start), "\"ok\":false", 10))
        L->errors++;
      L->lat[L->nlat++] = t - c->sent[c->head];
      c->head = (c->head + 1) % ring;
      c->answered++;
      start = nl + 1;
    }
    c->in_len = (size_t)(end - start);
    memmove(c->in, start, c->in_len);
    if (c->in_len == sizeof c->in)
      die("%s", "a reply longer than 64 KiB");
  }
}

static void print_result(const opts *o, const char *test, const char *unit, double rate,
                         double *lat, size_t n, long errors, double secs) {
  qsort(lat, n, sizeof *lat, cmp_double);
  double p50 = pct(lat, n, 0.5) * 1e3, p99 = pct(lat, n, 0.99) * 1e3,
         p999 = pct(lat, n, 0.999) * 1e3;
  if (o->json)
    printf("{\"test\":\"%s\",\"clients\":%d,\"pipeline\":%d,\"requests\":%zu,\"seconds\":%.3f,"
           "\"%s\":%.0f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"errors\":%ld,"
           "\"daemons\":%d}\n",
           test, o->clients, o->pipeline, n, secs, unit, rate, p50, p99, p999, errors,
           o->ndaemons ? o->ndaemons : 1);
  else
    printf("%-11s %10.0f %s  p50=%.3f ms  p99=%.3f ms  p999=%.3f ms  (%zu samples, %d clients, "
           "pipeline %d%s)\n",
           test, rate, unit, p50, p99, p999, n, o->clients, o->pipeline, errors ? ", ERRORS" : "");
  fflush(stdout);
}

/* World w of the test (on daemon w with --daemons, else where --place says) with 1000
 * transforms. */
static void setup_world(load *L, scn_cli *admin, int w) {
  snprintf(L->worlds[w], sizeof L->worlds[w], "bench-%d-%s-%d", (int)getpid(), L->test, w);
  char line[256];
  if (L->o->place)
    snprintf(line, sizeof line,
             "{\"cmd\":\"world.create\",\"world\":\"%s\",\"history\":%d,\"node\":\"%s\"}",
             L->worlds[w], L->o->history, L->o->place);
  else
    snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\",\"history\":%d}",
             L->worlds[w], L->o->history);
  cJSON_Delete(call_or_die(admin, line));
  L->nentities = 1000;
  L->ents[w] = malloc(sizeof(double) * L->nentities);
  /* Pipelined creation, then one read per request (on the world's owner: the call above
   * followed a MOVED there). A partial set keeps what the transform has, so there it has
   * every part. */
  const char *spec = strcmp(L->test, "set_partial") == 0
                         ? ",\"t\":[1.5,2.25,-3],\"r\":[0,0,0.38268343,0.92387953],\"s\":[1,2,1]"
                         : "";
  for (size_t i = 0; i < L->nentities; i++) {
    snprintf(line, sizeof line, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s}",
             L->worlds[w], spec);
    scn_cli_send_line(admin, line, strlen(line));
  }
  for (size_t i = 0; i < L->nentities; i++) {
    cJSON *r;
    if (scn_cli_read_response(admin, &r) != SCN_CLI_OK)
      die("setup failed: %s", scn_cli_error(admin));
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "entity");
    if (!cJSON_IsNumber(e))
      die("setup failed: %s", scn_cli_reply_message(r) ? scn_cli_reply_message(r) : "no entity");
    L->ents[w][i] = e->valuedouble;
    cJSON_Delete(r);
  }
}

/* The world's last tick (what a get answers as "tick"). */
static uint64_t world_now(load *L, scn_cli *admin) {
  char line[160];
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%.0f}",
           L->world, L->entities[0]);
  cJSON *r = call_or_die(admin, line);
  uint64_t t = (uint64_t)cJSON_GetObjectItemCaseSensitive(r, "tick")->valuedouble;
  cJSON_Delete(r);
  return t;
}

/* get_past: every transform set at each tick of half the window (so a read far back walks
 * as many versions as one that moves every tick has), then reads spread over that half (the
 * load must end before the other half has run). */
static void fill_history(load *L, scn_cli *admin) {
  if (L->o->history < 2)
    die("%s", "get_past needs --history (2 or more ticks)");
  uint64_t start = world_now(L, admin), now = start, span = (uint64_t)L->o->history / 2;
  char line[256];
  while (now < start + span) {
    for (size_t i = 0; i < L->nentities; i++) {
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,"
               "\"t\":[%llu,%zu,1]}",
               L->world, L->entities[i], (unsigned long long)now, i);
      scn_cli_send_line(admin, line, strlen(line));
    }
    for (size_t i = 0; i < L->nentities; i++) {
      cJSON *r;
      if (scn_cli_read_response(admin, &r) != SCN_CLI_OK)
        die("setup failed: %s", scn_cli_error(admin));
      cJSON_Delete(r);
    }
    uint64_t t;
    while ((t = world_now(L, admin)) == now)
      usleep(500);
    now = t;
  }
  L->past_newest = now;
  L->past_span = span;
}

static void cleanup_world(load *L, scn_cli *admin, int w) {
  char line[160];
  for (size_t i = 0; i < L->nentities; i++) {
    snprintf(line, sizeof line, "{\"cmd\":\"entity.destroy\",\"entity\":%.0f}", L->ents[w][i]);
    scn_cli_send_line(admin, line, strlen(line));
  }
  for (size_t i = 0; i < L->nentities; i++) {
    cJSON *r;
    if (scn_cli_read_response(admin, &r) == SCN_CLI_OK)
      cJSON_Delete(r);
  }
  snprintf(line, sizeof line, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", L->worlds[w]);
  cJSON_Delete(call_or_die(admin, line));
  free(L->ents[w]);
}

static void run_load(const opts *o, const char *test) {
  load L = {.o = o, .test = test};
  L.nworlds = o->ndaemons ? o->ndaemons : 1;
  scn_cli *admins[MAX_DAEMONS];
  for (int w = 0; w < L.nworlds; w++) {
    admins[w] = connect_daemon(o, w);
    setup_world(&L, admins[w], w);
  }
  if (!strcmp(test, "get_past")) {
    if (L.nworlds > 1)
      die("%s", "get_past runs against one daemon");
    L.world = L.worlds[0];
    L.entities = L.ents[0];
    fill_history(&L, admins[0]);
  }
  int C = o->clients;
  long per_conn = (o->requests + C - 1) / C;
  conn *cs = calloc((size_t)C, sizeof *cs);
  L.lat = malloc(sizeof(double) * (size_t)(per_conn * C + 1));
  int ep = epoll_create1(0);
  for (int i = 0; i < C; i++) {
    cs[i].w = i % L.nworlds;
    cs[i].fd = raw_connect(&L, cs[i].w);
    cs[i].sent = malloc(sizeof(double) * (size_t)(o->pipeline + 1));
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
  }
  double t0 = now_s();
  for (int i = 0; i < C; i++) {
    fill_pipeline(&L, &cs[i], per_conn);
    flush_out(&cs[i]);
  }
  long done = 0, total = per_conn * C;
  struct epoll_event evs[256];
  while (done < total) {
    int n = epoll_wait(ep, evs, 256, 10000);
    if (n <= 0)
      die("%s", "no progress for 10 s");
    for (int k = 0; k < n; k++) {
      conn *c = &cs[evs[k].data.u32];
      long before = c->answered;
      if ((evs[k].events & EPOLLIN) && !read_replies(&L, c))
        die("%s", "the daemon closed a connection");
      done += c->answered - before;
      fill_pipeline(&L, c, per_conn);
      if (!flush_out(c))
        die("%s", "send failed");
      /* Ask for writability only while a send is left over (a full socket). */
      bool want_out = c->out_off < c->out_len;
      if (want_out != c->want_out) {
        struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0),
                                 .data.u32 = evs[k].data.u32};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = want_out;
      }
    }
  }
  double secs = now_s() - t0;
  print_result(o, test, "ops/s", (double)total / secs, L.lat, L.nlat, L.errors, secs);
  if (L.followed)
    fprintf(stderr, "scene-bench: %ld of %d connections followed MOVED to their world's owner\n",
            L.followed, C);
  for (int i = 0; i < C; i++) {
    close(cs[i].fd);
    free(cs[i].out);
    free(cs[i].sent);
  }
  close(ep);
  free(cs);
  free(L.lat);
  for (int w = 0; w < L.nworlds; w++) {
    cleanup_world(&L, admins[w], w);
    scn_cli_close(admins[w]);
  }
}

/* ---- streaming ---------------------------------------------------------------------------- */

typedef struct sub_conn {
  int fd;
  char *buf;
  size_t len, cap;
  long frames;
} sub_conn;

#define SEQ_RING 4096

static void run_stream(const opts *o) {
  scn_cli *admin = connect_or_die(o);
  char world[64], line[256];
  snprintf(world, sizeof world, "bench-%d-stream", (int)getpid());
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  cJSON_Delete(call_or_die(admin, line));
  snprintf(line, sizeof line, "{\"cmd\":\"transform.create\",\"world\":\"%s\"}", world);
  cJSON *r = call_or_die(admin, line);
  double root = cJSON_GetObjectItemCaseSensitive(r, "entity")->valuedouble;
  cJSON_Delete(r);
  int K = o->descendants;
  for (int i = 0; i < K; i++) {
    snprintf(line, sizeof line,
             "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"parent\":%.0f,\"t\":[%d,0,0]}",
             world, root, i);
    scn_cli_send_line(admin, line, strlen(line));
  }
  for (int i = 0; i < K; i++) {
    if (scn_cli_read_response(admin, &r) != SCN_CLI_OK)
      die("setup failed: %s", scn_cli_error(admin));
    cJSON_Delete(r);
  }
  cJSON *info = call_or_die(admin, "{\"cmd\":\"info\"}");
  const cJSON *hz = cJSON_GetObjectItemCaseSensitive(info, "tick_hz");
  double tick_hz = cJSON_IsNumber(hz) ? hz->valuedouble : 60;
  cJSON_Delete(info);

  int S = o->subscribers;
  sub_conn *subs = calloc((size_t)S, sizeof *subs);
  int ep = epoll_create1(0);
  for (int i = 0; i < S; i++) {
    scn_cli *c = connect_or_die(o);
    double sid;
    if (scn_cli_subscribe(c, world, 0, 0, &sid) != SCN_CLI_OK)
      die("subscribe failed: %s", scn_cli_error(c));
    subs[i].fd = dup(scn_cli_fd(c));
    scn_cli_close(c);
    fcntl(subs[i].fd, F_SETFL, fcntl(subs[i].fd, F_GETFL) | O_NONBLOCK);
    subs[i].cap = 1 << 22;
    subs[i].buf = malloc(subs[i].cap);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, subs[i].fd, &ev);
  }
  /* The mover sets the root once per tick; its x translation is the sequence number, which
   * is the first matrix of every frame (parents come first), so a frame tells which set it
   * reflects. */
  double sent_at[SEQ_RING] = {0};
  double *lat = malloc(sizeof(double) * 4000000);
  size_t nlat = 0;
  long seq = 0, matrices = 0, frames = 0;
  double t0 = now_s(), next_move = t0, end = t0 + o->seconds;
  while (now_s() < end) {
    double now = now_s();
    if (now >= next_move) {
      seq++;
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,\"t\":[%ld,0,0]}",
               world, root, seq);
      sent_at[seq % SEQ_RING] = now_s();
      cJSON_Delete(call_or_die(admin, line));
      next_move += 1.0 / tick_hz;
    }
    struct epoll_event evs[256];
    int wait_ms = (int)((next_move - now_s()) * 1000);
    int n = epoll_wait(ep, evs, 256, wait_ms > 0 ? wait_ms : 0);
    for (int k = 0; k < n; k++) {
      sub_conn *s = &subs[evs[k].data.u32];
      for (;;) {
        if (s->cap - s->len < (1 << 20)) {
          s->cap *= 2;
          s->buf = realloc(s->buf, s->cap);
        }
        ssize_t got = recv(s->fd, s->buf + s->len, s->cap - s->len, 0);
        if (got <= 0)
          break;
        s->len += (size_t)got;
      }
      double t = now_s();
      char *start = s->buf, *stop = s->buf + s->len, *nl;
      while ((nl = memchr(start, '\n', (size_t)(stop - start)))) {
        /* matrices in this frame: count the set entries */
        long count = 0;
        for (char *q = start; (q = memmem(q, (size_t)(nl - q), "{\"e\":", 5)); q += 5)
          count++;
        matrices += count;
        frames++;
        s->frames++;
        char *m = memmem(start, (size_t)(nl - start), "\"m\":[", 5);
        if (m) {
          /* element 12 is the x translation */
          char *q = m + 5;
          for (int comma = 0; comma < 12 && q < nl; q++)
            if (*q == ',')
              comma++;
          long got_seq = strtol(q, NULL, 10);
          if (got_seq > 0 && got_seq <= seq && seq - got_seq < SEQ_RING && nlat < 4000000)
            lat[nlat++] = t - sent_at[got_seq % SEQ_RING];
        }
        start = nl + 1;
      }
      s->len = (size_t)(stop - start);
      memmove(s->buf, start, s->len);
    }
  }
  double secs = now_s() - t0;
  opts shown = *o;
  shown.clients = S;
  shown.pipeline = 1;
  print_result(&shown, "stream", "matrices/s", (double)matrices / secs, lat, nlat, 0, secs);
  if (!o->json)
    printf("stream     %d subscribers, %d descendants, %ld frames, %.1f frames/s per subscriber\n",
           S, K, frames, (double)frames / secs / S);
  for (int i = 0; i < S; i++) {
    close(subs[i].fd);
    free(subs[i].buf);
  }
  free(subs);
  free(lat);
  close(ep);
  snprintf(line, sizeof line, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world);
  cJSON_Delete(call_or_die(admin, line));
  scn_cli_close(admin);
}

/* ---- snapshots ---------------------------------------------------------------------------- */

/* Builds a world of K transforms (trees of 100), asks for a snapshot, and measures how long it
 * takes and how long another connection's pings wait meanwhile (the daemon must keep
 * answering). The daemon needs --data. */
/* Builds K transforms in world: trees of 100 in groups of 20, the roots first (their ids are
 * needed), then the children of all 20, each group pipelined. */
static void build_trees(scn_cli *admin, const char *world, long K) {
  char line[256];
  enum { TREE = 100, GROUP = 20 };
  double roots[GROUP];
  for (long done = 0; done < K;) {
    long trees = 0;
    for (; trees < GROUP && done + trees * TREE < K; trees++) {
      snprintf(line, sizeof line, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"t\":[%ld,1,2]}",
               world, done + trees * TREE);
      scn_cli_send_line(admin, line, strlen(line));
    }
    long sent = 0;
    for (long t = 0; t < trees; t++) {
      cJSON *r;
      if (scn_cli_read_response(admin, &r) != SCN_CLI_OK)
        die("setup failed: %s", scn_cli_error(admin));
      const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "entity");
      if (!cJSON_IsNumber(e))
        die("%s", "transform.create failed while building the world");
      roots[t] = e->valuedouble;
      cJSON_Delete(r);
      for (long k = 1; k < TREE && done + t * TREE + k < K; k++, sent++) {
        snprintf(line, sizeof line,
                 "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"parent\":%.0f,"
                 "\"t\":[1,%ld,2],\"r\":[0,0.6,0,0.8]}",
                 world, roots[t], k);
        scn_cli_send_line(admin, line, strlen(line));
      }
    }
    for (long k = 0; k < sent; k++) {
      cJSON *r;
      if (scn_cli_read_response(admin, &r) != SCN_CLI_OK)
        die("setup failed: %s", scn_cli_error(admin));
      if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")))
        die("%s", "transform.create failed while building the world");
      cJSON_Delete(r);
    }
    done += trees + sent;
  }
}

/* fill: a world (--world, made where --place says) of -K transforms that stays, then save. */
static void run_fill(const opts *o) {
  scn_cli *admin = connect_or_die(o);
  char line[256];
  if (o->place)
    snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\",\"node\":\"%s\"}",
             o->world, o->place);
  else
    snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", o->world);
  cJSON_Delete(call_or_die(admin, line));
  double t0 = now_s();
  build_trees(admin, o->world, o->descendants);
  double built = now_s() - t0;
  cJSON_Delete(call_or_die(admin, "{\"cmd\":\"save\"}"));
  printf("fill       %ld transforms in %s on %s: built in %.2f s, saved in %.2f s\n",
         (long)o->descendants, o->world, scn_cli_addr(admin), built, now_s() - t0 - built);
  scn_cli_close(admin);
}

static void run_snapshot(const opts *o) {
  scn_cli *admin = connect_or_die(o), *pinger = connect_or_die(o);
  char world[64], line[256];
  snprintf(world, sizeof world, "bench-%d-snapshot", (int)getpid());
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  cJSON_Delete(call_or_die(admin, line));
  long K = o->descendants;
  double t0 = now_s();
  build_trees(admin, world, K);
  double built = now_s() - t0;
  /* save runs in the background on the daemon; ping until its reply arrives */
  scn_cli_send_line(admin, "{\"cmd\":\"save\"}", 14);
  scn_cli_flush(admin);
  double s0 = now_s(), worst = 0, sum = 0;
  long pings = 0;
  cJSON *reply = NULL;
  for (;;) {
    double p0 = now_s();
    cJSON *r = NULL;
    if (scn_cli_call_line(pinger, "{\"cmd\":\"ping\"}", &r) != SCN_CLI_OK)
      die("ping failed: %s", scn_cli_error(pinger));
    cJSON_Delete(r);
    double dt = now_s() - p0;
    worst = dt > worst ? dt : worst;
    sum += dt;
    pings++;
    struct pollfd pfd = {.fd = scn_cli_fd(admin), .events = POLLIN};
    if (poll(&pfd, 1, 0) > 0) {
      if (scn_cli_read_response(admin, &reply) != SCN_CLI_OK)
        die("save failed: %s", scn_cli_error(admin));
      break;
    }
  }
  double secs = now_s() - s0;
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(reply, "ok");
  const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(reply, "bytes");
  if (!cJSON_IsTrue(ok) || !cJSON_IsNumber(bytes))
    die("%s", "save did not succeed (is the daemon running with --data?)");
  if (o->json)
    printf("{\"test\":\"snapshot\",\"transforms\":%ld,\"seconds\":%.3f,\"bytes\":%.0f,"
           "\"bytes_per_transform\":%.1f,\"pings\":%ld,\"ping_max_ms\":%.3f,"
           "\"ping_mean_ms\":%.3f,\"build_seconds\":%.2f}\n",
           K, secs, bytes->valuedouble, bytes->valuedouble / (double)K, pings, worst * 1e3,
           sum / (double)pings * 1e3, built);
  else
    printf("snapshot   %ld transforms: %.3f s, %.0f bytes (%.1f bytes/transform); meanwhile %ld "
           "pings answered, slowest %.3f ms, mean %.3f ms (world built in %.2f s)\n",
           K, secs, bytes->valuedouble, bytes->valuedouble / (double)K, pings, worst * 1e3,
           sum / (double)pings * 1e3, built);
  fflush(stdout);
  cJSON_Delete(reply);
  snprintf(line, sizeof line, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world);
  cJSON_Delete(call_or_die(admin, line));
  scn_cli_close(pinger);
  scn_cli_close(admin);
}

static void usage(void) {
  fprintf(stderr,
          "usage: scene-bench [--host H] [--port P] [--token T] [-c CLIENTS] [-n REQUESTS]\n"
          "                   [-P PIPELINE] [-t TEST[,TEST]] [-S SUBSCRIBERS] [-K DESCENDANTS]\n"
          "                   [--seconds S] [--history TICKS] [--json] [--place NODE|auto]\n"
          "                   [--daemons H:P,H:P...] [--world W]\n"
          "tests: ping, set_local, set_partial, set_matrix, get, get_past (a get at a past tick; "
          "needs --history), batch,\n"
          "stream (-S subscribers of a root with -K descendants), snapshot (save of a world of -K "
          "transforms; needs --data),\n"
          "fill (a world --world of -K transforms that stays, then save)\n"
          "--history: the test's world keeps that many ticks (0 to 3600)\n");
  exit(2);
}

int main(int argc, char **argv) {
  opts o = {.host = "127.0.0.1",
            .port = 7878,
            .clients = 50,
            .pipeline = 16,
            .requests = 200000,
            .subscribers = 10,
            .descendants = 10000,
            .seconds = 5};
  strcpy(o.tests, "ping,set_local,set_matrix,get,batch");
  const char *env;
  if ((env = getenv("SCENED_HOST")))
    o.host = env;
  if ((env = getenv("SCENED_PORT")))
    o.port = atoi(env);
  if ((env = getenv("SCENED_AUTH_TOKEN")) && *env)
    o.token = env;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && ++i)
    if (ARG("--host") || ARG("-h"))
      o.host = v;
    else if (ARG("--port") || ARG("-p"))
      o.port = atoi(v);
    else if (ARG("--token"))
      o.token = v;
    else if (ARG("-c"))
      o.clients = atoi(v);
    else if (ARG("-n"))
      o.requests = atol(v);
    else if (ARG("-P"))
      o.pipeline = atoi(v);
    else if (ARG("-t"))
      snprintf(o.tests, sizeof o.tests, "%s", v);
    else if (ARG("-S"))
      o.subscribers = atoi(v);
    else if (ARG("-K"))
      o.descendants = atoi(v);
    else if (ARG("--seconds"))
      o.seconds = atof(v);
    else if (ARG("--history"))
      o.history = atoi(v);
    else if (!strcmp(a, "--json"))
      o.json = true;
    else if (ARG("--place"))
      o.place = v;
    else if (ARG("--world"))
      o.world = v;
    else if (ARG("--daemons")) {
      for (const char *d = v; *d && o.ndaemons < MAX_DAEMONS;) {
        size_t n = strcspn(d, ",");
        if (n == 0 || n >= sizeof o.daemons[0])
          usage();
        memcpy(o.daemons[o.ndaemons], d, n);
        o.daemons[o.ndaemons++][n] = '\0';
        d += n + (d[n] == ',');
      }
    } else
      usage();
#undef ARG
  }
  if (o.clients < 1 || o.pipeline < 1 || o.requests < 1 || o.subscribers < 1 || o.descendants < 0 ||
      !(o.seconds > 0) || o.history < 0 || o.history > 3600)
    usage();
  char *save, *t = strtok_r(o.tests, ",", &save);
  for (; t; t = strtok_r(NULL, ",", &save)) {
    if (!strcmp(t, "stream"))
      run_stream(&o);
    else if (!strcmp(t, "snapshot"))
      run_snapshot(&o);
    else if (!strcmp(t, "fill") && o.world)
      run_fill(&o);
    else if (!strcmp(t, "ping") || !strcmp(t, "set_local") || !strcmp(t, "set_partial") ||
             !strcmp(t, "set_matrix") || !strcmp(t, "get") || !strcmp(t, "get_past") ||
             !strcmp(t, "batch"))
      run_load(&o, t);
    else
      die("unknown test \"%s\"", t);
  }
  return 0;
}

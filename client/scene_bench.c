/* scene-bench: load generator for scened, in the spirit of redis-benchmark.
 *
 *   scene-bench [--host H] [--port P] [--token T] [-c CLIENTS] [-n REQUESTS] [-P PIPELINE]
 *               [-t TEST[,TEST...]] [-S SUBSCRIBERS] [-K DESCENDANTS] [--seconds S]
 *               [--history TICKS] [--json] [--b64] [--packed STEP] [--ws] [--loopback]
 *               [--tls] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]
 *               [--transforms N] [--moving FRACTION] [--scened PATH [--naive]]
 *               [--http-port P] [--daemon-pid PID] [--follower-reads]
 *
 * Tests: ping, set_local (t/r/s), set_partial (the rotation alone, "partial": true, of
 * transforms that have a translation and a scale to keep), set_matrix, set_b64 (the same
 * matrix as matrix_b64), get, get_past (a get at a past tick of a world that keeps --history
 * ticks), batch (16 set_local ops per batch), stream (S subscribers, default 10, of a world whose
 * root, with K descendants, default 99,999, moves and turns every tick, so that every world
 * matrix changes every tick; --b64: the subscribers take b64 frames; --packed STEP: packed
 * frames, every one decoded and checked against the exact matrices; --ws: over WebSocket, GET
 * /ws on --http-port; --loopback: then the limit of plain writes of the same size to S reading
 * sockets; see scene_bench_stream.c), snapshot, connect (C clients that
 * each connect, say ping and close, again and again for --seconds: with TLS, handshakes per
 * second), and near (S subscribers, default 1,000, each following a moving entity with a region
 * of interest, in a world of --transforms transforms spread over a square, --moving of them
 * moving every tick: see scene_bench_near.c). Each test builds its own world and removes it
 * afterwards. One line per test with ops/s (matrices/s, frames/s and bytes/s for stream,
 * conns/s for connect) and latency percentiles; --json prints one JSON object per test instead.
 *
 * In a cluster: --place NODE (or auto) creates the test's world with "node", so it may live
 * on another daemon than the one named by --port; every load connection asks for its world
 * first and follows one MOVED to its owner, as a client that follows MOVED does. --daemons
 * H:P,H:P,... spreads the load: one world per daemon (created there), and the connections
 * round-robin over the daemons, each loading its own daemon's world. For stream, --daemons
 * spreads the subscribers instead (round-robin; the world is made and moved on --port), and
 * --follower-reads makes every connection say hello with follower_reads and take MOVED as an
 * error: subscribers sent to a follower of the world's group read its copy (replicas).
 */
#define _GNU_SOURCE /* memmem */
#include "scene_bench.h"
#include "b64.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double pct(double *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

void proc_usage(int pid, double *cpu_s, double *rss) {
  *cpu_s = *rss = NAN;
  if (pid <= 0)
    return;
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f)
    fclose(f);
  text[n] = '\0';
  const char *after = strrchr(text, ')'); /* the command name may hold spaces */
  unsigned long ut, st;
  if (after &&
      sscanf(after + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
    *cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
  snprintf(path, sizeof path, "/proc/%d/statm", pid);
  unsigned long size, resident;
  if ((f = fopen(path, "r"))) {
    if (fscanf(f, "%lu %lu", &size, &resident) == 2)
      *rss = (double)resident * (double)sysconf(_SC_PAGESIZE);
    fclose(f);
  }
}

_Noreturn void die(const char *fmt, const char *arg) {
  fprintf(stderr, "scene-bench: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  exit(2);
}

static scn_cli *connect_to_or_die(const opts *o, const char *host, int port) {
  char err[256];
  scn_cli_options co = {.host = host,
                        .port = port,
                        .token = o->token,
                        .timeout_ms = 30000,
                        .matrices = o->matrices,
                        .follower_reads = o->follower_reads,
                        .no_follow = o->follower_reads,
                        .tls = o->tls,
                        .tls_ca = o->tls_ca,
                        .tls_cert = o->tls_cert,
                        .tls_key = o->tls_key};
  scn_cli *c = scn_cli_connect(&co, err, sizeof err);
  if (!c)
    die("%s", err);
  return c;
}

scn_cli *connect_or_die(const opts *o) { return connect_to_or_die(o, o->host, o->port); }

scn_cli *connect_daemon(const opts *o, int i) {
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

cJSON *call_or_die(scn_cli *c, const char *line) {
  cJSON *r = NULL;
  if (scn_cli_call_line(c, line, &r) != SCN_CLI_OK)
    die("setup failed: %s", scn_cli_error(c));
  return r;
}

/* ---- request/response load ---------------------------------------------------------------- */

typedef struct conn {
  scn_cli *cli;
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
  } else if (!strcmp(L->test, "set_b64")) {
    /* the matrix of set_matrix, as base64 */
    float m[16] = {0.8f, 0.6f, 0, 0, -0.6f, 0.8f, 0, 0, 0, 0, 1, 0, 0, 2.25f, -3.125f, 1};
    m[12] = (float)(k % 100000) + 0.5f;
    put_set_local(&p, L, e);
    put_s(&p, ",\"matrix_b64\":\"");
    scn_b64_encode_matrices(p, (const float(*)[16])m, 1);
    p += SCN_B64_MATRIX_LEN;
    put_s(&p, "\"}\n");
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
 * one request for the world there and at most one move to the owner it names. Its bytes then
 * go through scn_cli_send_raw and scn_cli_recv_raw (TLS or not). */
static scn_cli *load_connect(load *L, int w) {
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
  return c;
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
    ssize_t n = scn_cli_send_raw(c->cli, c->out + c->out_off, c->out_len - c->out_off);
    if (n < 0)
      return false;
    if (n == 0)
      return true; /* the socket is full: the rest when it is writable */
    c->out_off += (size_t)n;
  }
  c->out_off = c->out_len = 0;
  return true;
}

static bool read_replies(load *L, conn *c) {
  size_t ring = (size_t)L->o->pipeline + 1;
  for (;;) {
    ssize_t n = scn_cli_recv_raw(c->cli, c->in + c->in_len, sizeof c->in - c->in_len);
    if (n < 0)
      return false;
    if (n == 0)
      return true;
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
    snprintf(line, sizeof line, "{\"cmd\":\"transform.create\",\"world\":\"%s\"%s}", L->worlds[w],
             spec);
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

/* With --insync (a cluster with --replicas): waits until world.list with cluster gives the
 * test's world w a follower in its in-sync set, so that sync writes are measured waiting for
 * it rather than answered alone while the follower is still being chosen. */
static void wait_insync(load *L, scn_cli *admin, int w) {
  for (double deadline = now_s() + 15; now_s() < deadline; usleep(20000)) {
    cJSON *r = call_or_die(admin, "{\"cmd\":\"world.list\",\"cluster\":true}");
    const cJSON *item;
    bool ok = false;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(r, "worlds")) {
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
      const cJSON *insync = cJSON_GetObjectItemCaseSensitive(item, "insync");
      if (cJSON_IsString(name) && !strcmp(name->valuestring, L->worlds[w]) &&
          cJSON_GetArraySize(insync) > 0)
        ok = true;
    }
    cJSON_Delete(r);
    if (ok)
      return;
  }
  die("world %s has no follower in sync after 15 s (--insync needs --replicas)", L->worlds[w]);
}

static void run_load(const opts *o, const char *test) {
  load L = {.o = o, .test = test};
  L.nworlds = o->ndaemons ? o->ndaemons : 1;
  scn_cli *admins[MAX_DAEMONS];
  for (int w = 0; w < L.nworlds; w++) {
    admins[w] = connect_daemon(o, w);
    setup_world(&L, admins[w], w);
    if (o->insync)
      wait_insync(&L, admins[w], w);
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
    cs[i].cli = load_connect(&L, cs[i].w);
    cs[i].sent = malloc(sizeof(double) * (size_t)(o->pipeline + 1));
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, scn_cli_fd(cs[i].cli), &ev);
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
        epoll_ctl(ep, EPOLL_CTL_MOD, scn_cli_fd(c->cli), &ev);
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
    scn_cli_close(cs[i].cli);
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
  long K = o->descendants < 0 ? 10000 : o->descendants;
  double t0 = now_s();
  build_trees(admin, o->world, K);
  double built = now_s() - t0;
  cJSON_Delete(call_or_die(admin, "{\"cmd\":\"save\"}"));
  printf("fill       %ld transforms in %s on %s: built in %.2f s, saved in %.2f s\n", K, o->world,
         scn_cli_addr(admin), built, now_s() - t0 - built);
  scn_cli_close(admin);
}

static void run_snapshot(const opts *o) {
  scn_cli *admin = connect_or_die(o), *pinger = connect_or_die(o);
  char world[64], line[256];
  snprintf(world, sizeof world, "bench-%d-snapshot", (int)getpid());
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  cJSON_Delete(call_or_die(admin, line));
  long K = o->descendants < 0 ? 10000 : o->descendants;
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

/* ---- connections ------------------------------------------------------------------------- */

/* C worker processes each connect (the TLS handshake with --tls), ping and close, again and
 * again for --seconds; the figure is connections per second, with the latency of one
 * connect + ping. Processes, so that the clients' side of the handshakes runs on every core
 * the daemon does not use. */
static void run_connect(const opts *o) {
  int C = o->clients;
  FILE **from = calloc((size_t)C, sizeof *from); /* each worker's figures, on its own pipe */
  if (!from)
    die("%s", "out of memory");
  fflush(stdout);
  for (int w = 0; w < C; w++) {
    int fds[2];
    if (pipe(fds) != 0)
      die("%s", "pipe failed");
    pid_t pid = fork();
    if (pid < 0)
      die("%s", "fork failed");
    if (pid > 0) {
      close(fds[1]);
      from[w] = fdopen(fds[0], "r");
      continue;
    }
    close(fds[0]);
    double end = now_s() + o->seconds;
    static double lat[1 << 16];
    long n = 0;
    while (now_s() < end) {
      double t0 = now_s();
      scn_cli *c = connect_or_die(o);
      cJSON_Delete(call_or_die(c, "{\"cmd\":\"ping\"}"));
      scn_cli_close(c);
      if (n < (long)(sizeof lat / sizeof lat[0]))
        lat[n] = now_s() - t0;
      n++;
    }
    long kept = n < (long)(sizeof lat / sizeof lat[0]) ? n : (long)(sizeof lat / sizeof lat[0]);
    FILE *out = fdopen(fds[1], "w");
    bool ok = out && fwrite(&n, sizeof n, 1, out) == 1 && fwrite(&kept, sizeof kept, 1, out) == 1 &&
              fwrite(lat, sizeof(double), (size_t)kept, out) == (size_t)kept && fflush(out) == 0;
    _exit(ok ? 0 : 1);
  }
  size_t cap = 1 << 16, nlat = 0;
  double *lat = malloc(sizeof(double) * cap);
  long total = 0;
  for (int w = 0; w < C; w++) {
    long n, kept;
    if (!from[w] || fread(&n, sizeof n, 1, from[w]) != 1 ||
        fread(&kept, sizeof kept, 1, from[w]) != 1 || kept < 0)
      die("%s", "a connecting worker failed");
    total += n;
    if (nlat + (size_t)kept > cap) {
      cap = (nlat + (size_t)kept) * 2;
      lat = realloc(lat, sizeof(double) * cap);
    }
    if (!lat || fread(lat + nlat, sizeof(double), (size_t)kept, from[w]) != (size_t)kept)
      die("%s", "a connecting worker failed");
    nlat += (size_t)kept;
    fclose(from[w]);
  }
  free(from);
  while (wait(NULL) > 0)
    ;
  opts shown = *o;
  shown.pipeline = 1;
  print_result(&shown, "connect", "conns/s", (double)total / o->seconds, lat, nlat, 0, o->seconds);
  free(lat);
}

static void usage(void) {
  fprintf(stderr,
          "usage: scene-bench [--host H] [--port P] [--token T] [-c CLIENTS] [-n REQUESTS]\n"
          "                   [-P PIPELINE] [-t TEST[,TEST]] [-S SUBSCRIBERS] [-K DESCENDANTS]\n"
          "                   [--seconds S] [--history TICKS] [--json] [--b64] [--packed STEP]\n"
          "                   [--ws] [--loopback]\n"
          "                   [--place NODE|auto] [--daemons H:P,H:P...] [--world W] [--insync]\n"
          "                   [--tls] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]\n"
          "                   [--transforms N] [--moving FRACTION] [--scened PATH [--naive]]\n"
          "                   [--http-port P] [--daemon-pid PID] [--follower-reads]\n"
          "tests: ping, set_local, set_partial, set_matrix, set_b64, get, get_past (a get at a\n"
          "past tick; needs --history), batch, stream (-S subscribers of a root with -K\n"
          "descendants, default 99999, moving and turning every tick; --b64: b64 frames;\n"
          "--packed STEP: packed frames of that step, decoded and checked; --ws: over\n"
          "WebSocket on --http-port; --daemon-pid: the daemon's CPU per million matrices;\n"
          "--loopback: also plain writes of the frames' size to as many sockets; with\n"
          "--daemons the subscribers round-robin over them, with --follower-reads reading a\n"
          "follower's copy, while the world is made and moved on --port), snapshot\n"
          "(save of a world of -K transforms, default 10000; needs --data), fill (a world --world\n"
          "of -K transforms, default 10000, that stays, then save), connect (-c clients\n"
          "connecting, pinging and closing for --seconds), near (-S subscribers, default 1000,\n"
          "each following a moving entity with a radius covering 1%% of a square of --transforms\n"
          "transforms, default 100000, --moving of them, default 0.1, moving every tick; without\n"
          "bands, then with two; the daemon's interest work and CPU per tick from its /metrics\n"
          "(--http-port, else info) and /proc (--daemon-pid); --scened PATH: the bench starts\n"
          "the daemon itself, and with --naive one with --interest naive as well, and prints the\n"
          "ratio of their interest work per tick)\n"
          "--history: the test's world keeps that many ticks (0 to 3600)\n");
  exit(2);
}

/* --daemons H:P,H:P,... */
static void parse_daemons(opts *o, const char *v) {
  for (const char *d = v; *d && o->ndaemons < MAX_DAEMONS;) {
    size_t n = strcspn(d, ",");
    if (n == 0 || n >= sizeof o->daemons[0])
      usage();
    memcpy(o->daemons[o->ndaemons], d, n);
    o->daemons[o->ndaemons++][n] = '\0';
    d += n + (d[n] == ',');
  }
}

int main(int argc, char **argv) {
  /* A daemon that goes away must not end the load with SIGPIPE; it also spares the client
   * library its guard around TLS writes. */
  signal(SIGPIPE, SIG_IGN);
  opts o = {.host = "127.0.0.1",
            .port = 7878,
            .clients = 50,
            .pipeline = 16,
            .requests = 200000,
            .transforms = 100000,
            .moving = 0.1,
            .descendants = -1,
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
    else if (!strcmp(a, "--b64"))
      o.b64 = true;
    else if (ARG("--packed"))
      o.packed_step = atof(v);
    else if (!strcmp(a, "--ws"))
      o.ws = true;
    else if (!strcmp(a, "--loopback"))
      o.loopback = true;
    else if (ARG("--tls-ca"))
      o.tls_ca = v;
    else if (ARG("--tls-cert"))
      o.tls_cert = v;
    else if (ARG("--tls-key"))
      o.tls_key = v;
    else if (!strcmp(a, "--tls"))
      o.tls = true;
    else if (ARG("--place"))
      o.place = v;
    else if (ARG("--world"))
      o.world = v;
    else if (!strcmp(a, "--insync"))
      o.insync = true;
    else if (ARG("--transforms"))
      o.transforms = atoi(v);
    else if (ARG("--moving"))
      o.moving = atof(v);
    else if (!strcmp(a, "--naive"))
      o.naive = true;
    else if (ARG("--scened"))
      o.scened = v;
    else if (ARG("--http-port"))
      o.http_port = atoi(v);
    else if (ARG("--daemon-pid"))
      o.daemon_pid = atoi(v);
    else if (!strcmp(a, "--follower-reads"))
      o.follower_reads = true;
    else if (ARG("--daemons"))
      parse_daemons(&o, v);
    else
      usage();
#undef ARG
  }
  if (o.clients < 1 || o.pipeline < 1 || o.requests < 1 || o.subscribers < 0 ||
      o.descendants < -1 || !(o.seconds > 0) || o.history < 0 || o.history > 3600 ||
      o.transforms < 1 || !(o.moving > 0 && o.moving <= 1) || o.http_port < 0 || o.daemon_pid < 0 ||
      !(o.packed_step >= 0 && isfinite(o.packed_step)))
    usage();
  char *save, *t = strtok_r(o.tests, ",", &save);
  for (; t; t = strtok_r(NULL, ",", &save)) {
    if (!strcmp(t, "stream"))
      run_stream(&o);
    else if (!strcmp(t, "near"))
      run_near(&o);
    else if (!strcmp(t, "snapshot"))
      run_snapshot(&o);
    else if (!strcmp(t, "fill") && o.world)
      run_fill(&o);
    else if (!strcmp(t, "connect"))
      run_connect(&o);
    else if (!strcmp(t, "ping") || !strcmp(t, "set_local") || !strcmp(t, "set_partial") ||
             !strcmp(t, "set_matrix") || !strcmp(t, "set_b64") || !strcmp(t, "get") ||
             !strcmp(t, "get_past") || !strcmp(t, "batch"))
      run_load(&o, t);
    else
      die("unknown test \"%s\"", t);
  }
  return 0;
}

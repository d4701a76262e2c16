/* scene-bench -t near: subscriptions by distance under load.
 *
 * A world of --transforms transforms spread uniformly over a square of side SIDE (z = 0), of
 * which --moving (a fraction) take a small step every tick, bouncing inside the square: a mover
 * thread sets them in batches on a connection of its own, once per tick of the daemon's rate.
 * S subscribers (connections) each follow a moving entity with near {entity, radius r, margin
 * r/10}, r = SIDE * sqrt(0.01 / pi), so that a region covers 1% of the square.
 *
 * Once every subscriber has its first frame and after a second of warm-up, --seconds are
 * measured in samples of a second (longer where the daemon ticks slower: MIN_TICKS ticks at
 * least): the daemon's interest work per tick (its metrics: interest seconds over interest
 * ticks), its CPU per tick (/proc), the tick rate (the frames' tick numbers), each a median
 * over the samples; frames and bytes per second of each
 * subscriber (medians over subscribers); matrices per second; memory per subscriber (the
 * interest memory over the subscriptions, and the daemon's RSS growth as they subscribed).
 * Twice: without bands, then with bands [r/4 at 60 Hz, r at 10 Hz].
 *
 * --scened PATH: the bench starts the daemon (its HTTP port chosen by the daemon, its pid
 * known) and stops it; with --naive, then one with --interest naive under the same workload
 * (same seed, same sizes), and prints the ratio of their interest work per tick. Without
 * --scened: the daemon of --port, its /metrics at --http-port (else its info command's
 * metrics), its CPU and RSS from /proc with --daemon-pid.
 */
#define _GNU_SOURCE /* memmem */
#include "scene_bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SIDE 1000.0
#define STEP 0.5       /* a moving transform's step per tick (30 units/s at 60 Hz) */
#define BATCH_OPS 1000 /* set_local ops per batch the mover sends */
#define CREATE_CHUNK 10000
#define FIRST_FRAME_S 20.0 /* at most, for every subscriber's first frame */
#define WARMUP_S 1.0
#define SAMPLE_S 1.0
#define MAX_SAMPLES 600
#define MIN_TICKS 5 /* in a sample; a slower daemon gets longer samples */
/* The daemons the bench starts queue at most this for a subscriber that reads too slowly (then
 * it lags and resyncs, 6.7), so that 1,000 slow readers cannot take gigabytes. */
#define OUTPUT_LIMIT "1m"

/* ---- the daemon ----------------------------------------------------------------------------- */

typedef struct daemon_ref {
  const char *label; /* grid, naive, or "daemon" (one the bench did not start) */
  int port, http_port;
  pid_t pid; /* 0: unknown (no CPU figures) */
  char log[64];
} daemon_ref;

static pid_t started_pid; /* the daemon the bench started and has not stopped yet */

static void stop_daemon(daemon_ref *d) {
  if (d->pid <= 0 || d->pid != started_pid)
    return;
  kill(d->pid, SIGTERM);
  int status;
  bool gone = false;
  for (int i = 0; i < 100 && !gone; i++) {
    gone = waitpid(d->pid, &status, WNOHANG) == d->pid;
    if (!gone)
      usleep(50000);
  }
  if (!gone) {
    kill(d->pid, SIGKILL);
    waitpid(d->pid, &status, 0);
  }
  started_pid = 0;
}

static void stop_started_at_exit(void) {
  if (started_pid > 0) {
    kill(started_pid, SIGKILL);
    waitpid(started_pid, NULL, 0);
  }
}

/* The port after `what` ("listening on 127.0.0.1:") in the log, or 0. */
static int port_in_log(const char *path, const char *what) {
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  char line[1024];
  int port = 0;
  while (!port && fgets(line, sizeof line, f)) {
    const char *at = strstr(line, what);
    if (at)
      port = atoi(at + strlen(what));
  }
  fclose(f);
  return port;
}

/* Starts o->scened with --interest mode on free ports; waits (10 s at most) until it listens. */
static void start_daemon(const opts *o, const char *mode, daemon_ref *d) {
  *d = (daemon_ref){.label = mode};
  snprintf(d->log, sizeof d->log, "/tmp/scene-bench-near-XXXXXX");
  int fd = mkstemp(d->log);
  if (fd < 0)
    die("%s", "cannot create the daemon's log file");
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0)
    die("%s", "fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* it must not outlive a bench that was killed */
    dup2(fd, 2);
    FILE *nul = freopen("/dev/null", "w", stdout);
    (void)nul;
    execl(o->scened, o->scened, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level",
          "warn", "--interest", mode, "--output-limit", OUTPUT_LIMIT, (char *)NULL);
    fprintf(stderr, "cannot run %s: %s\n", o->scened, strerror(errno));
    _exit(127);
  }
  close(fd);
  d->pid = started_pid = pid;
  static bool registered;
  if (!registered)
    atexit(stop_started_at_exit);
  registered = true;
  for (double end = now_s() + 10; now_s() < end;) {
    d->port = port_in_log(d->log, "listening on 127.0.0.1:");
    d->http_port = port_in_log(d->log, "http on 127.0.0.1:");
    if (d->port && d->http_port) {
      unlink(d->log); /* the daemon keeps writing to it, and nothing is left behind */
      return;
    }
    if (waitpid(pid, NULL, WNOHANG) == pid) {
      started_pid = 0;
      char cmd[128];
      snprintf(cmd, sizeof cmd, "cat %s >&2", d->log);
      if (system(cmd) != 0)
        fprintf(stderr, "(its log: %s)\n", d->log);
      unlink(d->log);
      die("%s did not start (its log above)", o->scened);
    }
    usleep(20000);
  }
  die("%s did not say where it listens within 10 s", o->scened);
}

/* ---- the daemon's figures ------------------------------------------------------------------- */

enum {
  M_INTEREST_S,
  M_INTEREST_TICKS,
  M_CANDIDATES,
  M_MEMORY,
  M_SUBSCRIPTIONS,
  M_FRAME_MATRICES,
  M_LAGS,
  M_RSS,
  M_COUNT
};
/* Their names in /metrics without the "scened_" prefix, as info's metrics name them. */
static const char *const metric_names[M_COUNT] = {
    "interest_seconds_total", "interest_ticks_total",   "interest_candidates_total",
    "interest_memory_bytes",  "interest_subscriptions", "frame_matrices_total",
    "stream_lags_total",      "resident_memory_bytes"};

typedef struct sample {
  double t;
  double m[M_COUNT]; /* NAN where the daemon gave none */
  double cpu_s;      /* the daemon's user + system seconds (NAN: unknown) */
  double rss;        /* its resident bytes (/proc, else its metrics; NAN: unknown) */
  uint64_t tick;     /* the newest tick the subscribers have seen */
  long moves;        /* ticks of moves the mover has had answered */
} sample;

/* GET /metrics from 127.0.0.1:port: the body, malloc'd, or NULL. */
static char *http_metrics(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {.tv_sec = 30}; /* a daemon busy with its ticks may answer late */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  ssize_t n;
  while (buf && (n = recv(fd, buf + len, cap - len - 1, 0)) > 0) {
    len += (size_t)n;
    if (cap - len < 4096 && cap < (64u << 20))
      buf = realloc(buf, cap *= 2);
  }
  close(fd);
  if (!buf)
    return NULL;
  buf[len] = '\0';
  char *body = strstr(buf, "\r\n\r\n");
  if (!body || strncmp(buf, "HTTP/1.", 7) != 0 || !strstr(buf, " 200 ")) {
    free(buf);
    return NULL;
  }
  memmove(buf, body + 4, strlen(body + 4) + 1);
  return buf;
}

/* The value of the unlabelled sample "scened_NAME v" in a Prometheus text, or NAN. */
static double prometheus_value(const char *text, const char *name) {
  char key[96];
  int n = snprintf(key, sizeof key, "scened_%s ", name);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (!strncmp(p, key, (size_t)n))
      return strtod(p + n, NULL);
  return NAN;
}

static void read_metrics(const daemon_ref *d, scn_cli *admin, double m[M_COUNT]) {
  for (int i = 0; i < M_COUNT; i++)
    m[i] = NAN;
  if (d->http_port) {
    char *text = http_metrics(d->http_port);
    if (!text)
      die("%s", "the daemon's /metrics did not answer within 30 s");
    for (int i = 0; i < M_COUNT; i++)
      m[i] = prometheus_value(text, metric_names[i]);
    free(text);
    return;
  }
  cJSON *info = call_or_die(admin, "{\"cmd\":\"info\"}");
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(info, "metrics");
  for (int i = 0; i < M_COUNT; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ms, metric_names[i]);
    if (cJSON_IsNumber(v))
      m[i] = v->valuedouble;
  }
  cJSON_Delete(info);
}

static void take_sample(const daemon_ref *d, scn_cli *admin, sample *s) {
  read_metrics(d, admin, s->m);
  proc_usage((int)d->pid, &s->cpu_s, &s->rss);
  if (isnan(s->rss))
    s->rss = s->m[M_RSS];
  s->t = now_s();
}

/* ---- the world and its motion --------------------------------------------------------------- */

typedef struct world_state {
  char name[64];
  int n, moving;
  uint64_t *ids;          /* every transform's entity; the first `moving` of them move */
  float *x, *y, *vx, *vy; /* of the moving ones */
  double tick_hz;
} world_state;

static uint64_t next_random(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double uniform(uint64_t *s) { return (double)(next_random(s) >> 11) * 0x1.0p-53; }

static char *put_str(char *p, const char *s) {
  size_t n = strlen(s);
  memcpy(p, s, n);
  return p + n;
}
static char *put_uint(char *p, uint64_t v) {
  char tmp[24];
  int n = 0;
  do
    tmp[n++] = (char)('0' + v % 10);
  while (v /= 10);
  while (n)
    *p++ = tmp[--n];
  return p;
}
/* v (0 <= v <= SIDE) with three decimals: the mover writes 600,000 of these a second. */
static char *put_coord(char *p, double v) {
  uint64_t milli = (uint64_t)(v * 1000 + 0.5);
  p = put_uint(p, milli / 1000);
  *p++ = '.';
  *p++ = (char)('0' + milli / 100 % 10);
  *p++ = (char)('0' + milli / 10 % 10);
  *p++ = (char)('0' + milli % 10);
  return p;
}

/* The world: n transforms at random points of the square (the same seed every run), created
 * pipelined in chunks. */
static void build_world(const opts *o, scn_cli *admin, world_state *w) {
  snprintf(w->name, sizeof w->name, "bench-%d-near", (int)getpid());
  char line[256];
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", w->name);
  cJSON_Delete(call_or_die(admin, line));
  w->n = o->transforms;
  w->moving = (int)(o->moving * w->n + 0.5);
  w->moving = w->moving < 1 ? 1 : w->moving;
  w->ids = malloc(sizeof *w->ids * (size_t)w->n);
  w->x = malloc(sizeof(float) * (size_t)w->moving);
  w->y = malloc(sizeof(float) * (size_t)w->moving);
  w->vx = malloc(sizeof(float) * (size_t)w->moving);
  w->vy = malloc(sizeof(float) * (size_t)w->moving);
  if (!w->ids || !w->x || !w->y || !w->vx || !w->vy)
    die("%s", "out of memory");
  uint64_t seed = 25;
  for (int done = 0; done < w->n;) {
    int chunk = w->n - done < CREATE_CHUNK ? w->n - done : CREATE_CHUNK;
    for (int i = done; i < done + chunk; i++) {
      double x = uniform(&seed) * SIDE, y = uniform(&seed) * SIDE, a = uniform(&seed) * 2 * M_PI;
      if (i < w->moving) {
        w->x[i] = (float)x, w->y[i] = (float)y;
        w->vx[i] = (float)(STEP * cos(a)), w->vy[i] = (float)(STEP * sin(a));
      }
      char *p = put_str(line, "{\"cmd\":\"transform.create\",\"world\":\"");
      p = put_str(p, w->name);
      p = put_str(p, "\",\"t\":[");
      p = put_coord(p, x);
      *p++ = ',';
      p = put_coord(p, y);
      p = put_str(p, ",0]}");
      scn_cli_send_line(admin, line, (size_t)(p - line));
    }
    for (int i = done; i < done + chunk; i++) {
      cJSON *r;
      if (scn_cli_read_response(admin, &r) != SCN_CLI_OK)
        die("setup failed: %s", scn_cli_error(admin));
      const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "entity");
      if (!cJSON_IsNumber(e))
        die("setup failed: %s", scn_cli_reply_message(r) ? scn_cli_reply_message(r) : "no entity");
      w->ids[i] = (uint64_t)e->valuedouble;
      cJSON_Delete(r);
    }
    done += chunk;
  }
  cJSON *info = call_or_die(admin, "{\"cmd\":\"info\"}");
  const cJSON *hz = cJSON_GetObjectItemCaseSensitive(info, "tick_hz");
  w->tick_hz = cJSON_IsNumber(hz) ? hz->valuedouble : 60;
  cJSON_Delete(info);
}

static void free_world(world_state *w) {
  free(w->ids);
  free(w->x);
  free(w->y);
  free(w->vx);
  free(w->vy);
}

typedef struct mover {
  world_state *w;
  scn_cli *cli;
  pthread_t thread;
  atomic_bool stop;
  atomic_long ticks;  /* ticks of moves answered */
  atomic_long errors; /* ops answered with an error */
  const char *failure;
} mover;

/* One step of moving transform i, bouncing off the square's sides. */
static void step(world_state *w, int i) {
  float x = w->x[i] + w->vx[i], y = w->y[i] + w->vy[i];
  if (x < 0 || x > SIDE) {
    x = x < 0 ? -x : (float)(2 * SIDE) - x;
    w->vx[i] = -w->vx[i];
  }
  if (y < 0 || y > SIDE) {
    y = y < 0 ? -y : (float)(2 * SIDE) - y;
    w->vy[i] = -w->vy[i];
  }
  w->x[i] = x, w->y[i] = y;
}

/* Reads the answers to n batches; false when the connection failed. */
static bool read_answers(mover *m, int n) {
  for (int b = 0; b < n; b++) {
    cJSON *r;
    if (scn_cli_read_response(m->cli, &r) != SCN_CLI_OK) {
      m->failure = scn_cli_error(m->cli);
      return false;
    }
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")))
      atomic_fetch_add(&m->errors, 1);
    cJSON_Delete(r);
  }
  return true;
}

/* Once per tick of the daemon's rate: every moving transform one step, in batches. A tick's
 * answers are read after the next tick's batches are sent, so that at most two ticks of sets
 * are in flight and the daemon need not wait for the bench between them. A mover that falls
 * behind skips ahead rather than catching up in a burst. */
static void *move_loop(void *arg) {
  mover *m = arg;
  world_state *w = m->w;
  char *line = malloc((size_t)BATCH_OPS * 96 + 256);
  double period = 1.0 / w->tick_hz, next = now_s();
  int unanswered = 0; /* batches of the previous tick */
  while (line && !atomic_load(&m->stop)) {
    int batches = 0;
    for (int i = 0; i < w->moving; i += BATCH_OPS, batches++) {
      int end = i + BATCH_OPS < w->moving ? i + BATCH_OPS : w->moving;
      char *p = put_str(line, "{\"cmd\":\"batch\",\"world\":\"");
      p = put_str(p, w->name);
      p = put_str(p, "\",\"ops\":[");
      for (int k = i; k < end; k++) {
        step(w, k);
        p = put_str(p, k > i ? ",{\"cmd\":\"transform.set_local\",\"entity\":"
                             : "{\"cmd\":\"transform.set_local\",\"entity\":");
        p = put_uint(p, w->ids[k]);
        p = put_str(p, ",\"t\":[");
        p = put_coord(p, w->x[k]);
        *p++ = ',';
        p = put_coord(p, w->y[k]);
        p = put_str(p, ",0]}");
      }
      p = put_str(p, "]}");
      scn_cli_send_line(m->cli, line, (size_t)(p - line));
    }
    if (scn_cli_flush(m->cli) != SCN_CLI_OK) {
      m->failure = scn_cli_error(m->cli);
      break;
    }
    if (!read_answers(m, unanswered))
      break;
    if (unanswered)
      atomic_fetch_add(&m->ticks, 1);
    unanswered = batches;
    next += period;
    double now = now_s();
    if (next < now - period)
      next = now;
    else if (next > now)
      usleep((useconds_t)((next - now) * 1e6));
  }
  if (!m->failure && read_answers(m, unanswered) && unanswered)
    atomic_fetch_add(&m->ticks, 1);
  free(line);
  return NULL;
}

static void start_mover(mover *m, const opts *o, world_state *w) {
  m->w = w;
  m->cli = connect_or_die(o);
  m->failure = NULL;
  atomic_store(&m->stop, false);
  atomic_store(&m->ticks, 0);
  atomic_store(&m->errors, 0);
  if (pthread_create(&m->thread, NULL, move_loop, m) != 0)
    die("%s", "cannot start the mover thread");
}

static void stop_mover(mover *m) {
  atomic_store(&m->stop, true);
  pthread_join(m->thread, NULL);
  if (m->failure)
    die("the mover failed: %s", m->failure);
  scn_cli_close(m->cli);
}

/* ---- the subscribers ------------------------------------------------------------------------ */

typedef struct near_sub {
  scn_cli *cli;
  char *buf;
  size_t len, cap;
  long frames, matrices;
  double bytes;
} near_sub;

typedef struct reader {
  near_sub *subs;
  int S, ep;
  bool b64;
  long frames, matrices, others;
  uint64_t max_tick;
  char other[160]; /* the first line that was not a frame */
} reader;

static void read_lines(reader *R, near_sub *s) {
  char *start = s->buf, *stop = s->buf + s->len, *nl;
  while ((nl = memchr(start, '\n', (size_t)(stop - start)))) {
    size_t head = (size_t)(nl - start) < 160 ? (size_t)(nl - start) : 160;
    const char *tick = memmem(start, head, "\"tick\":", 7);
    if (head > 17 && !memcmp(start, "{\"event\":\"frame\",", 17) && tick) {
      long count, first_x;
      frame_info(start, nl, R->b64, &count, &first_x);
      uint64_t t = strtoull(tick + 7, NULL, 10);
      R->max_tick = t > R->max_tick ? t : R->max_tick;
      s->frames++, s->matrices += count;
      R->frames++, R->matrices += count;
    } else {
      if (!R->others++)
        snprintf(R->other, sizeof R->other, "%.*s", (int)head, start);
    }
    start = nl + 1;
  }
  s->len = (size_t)(stop - start);
  memmove(s->buf, start, s->len);
}

static void read_sub(reader *R, near_sub *s) {
  for (;;) {
    if (s->cap - s->len < (1 << 16)) {
      s->cap *= 2;
      if (!(s->buf = realloc(s->buf, s->cap)))
        die("%s", "out of memory");
    }
    ssize_t got = scn_cli_recv_raw(s->cli, s->buf + s->len, s->cap - s->len);
    if (got < 0)
      die("a subscriber's connection failed: %s", scn_cli_error(s->cli));
    if (got == 0)
      break;
    s->len += (size_t)got;
    s->bytes += (double)got;
  }
  read_lines(R, s);
}

/* Reads every subscriber until the time `until`. */
static void read_until(reader *R, double until) {
  struct epoll_event evs[256];
  for (double now; (now = now_s()) < until;) {
    int ms = (int)((until - now) * 1000) + 1;
    int n = epoll_wait(R->ep, evs, 256, ms < 100 ? ms : 100);
    for (int e = 0; e < n; e++)
      read_sub(R, &R->subs[evs[e].data.u32]);
  }
}

static void reset_counts(reader *R) {
  R->frames = R->matrices = 0;
  for (int i = 0; i < R->S; i++)
    R->subs[i].frames = R->subs[i].matrices = 0, R->subs[i].bytes = 0;
}

/* S connections, each subscribed to a region around a moving entity: subscriber i follows moving
 * transform i * moving / S. Every connection first (a hello waits for its answer, which waits
 * behind a tick, and ticks grow with the subscriptions), then every subscribe, then their
 * answers. */
static void subscribe_all(const opts *o, const world_state *w, reader *R, double r, bool bands) {
  opts so = *o;
  so.matrices = o->b64 ? SCN_CLI_MATRICES_B64 : SCN_CLI_MATRICES_JSON;
  R->subs = calloc((size_t)R->S, sizeof *R->subs);
  R->ep = epoll_create1(0);
  if (!R->subs || R->ep < 0)
    die("%s", "out of memory");
  char line[512];
  for (int i = 0; i < R->S; i++)
    R->subs[i].cli = connect_or_die(&so);
  for (int i = 0; i < R->S; i++) {
    near_sub *s = &R->subs[i];
    long long k = R->S <= w->moving ? (long long)i * w->moving / R->S : i % w->moving;
    int n = snprintf(line, sizeof line,
                     "{\"cmd\":\"subscribe\",\"world\":\"%s\",\"near\":{\"entity\":%llu,"
                     "\"radius\":%.6g,\"margin\":%.6g",
                     w->name, (unsigned long long)w->ids[k], r, r / 10);
    if (bands)
      n += snprintf(line + n, sizeof line - (size_t)n,
                    ",\"bands\":[{\"radius\":%.6g,\"hz\":60},{\"radius\":%.6g,\"hz\":10}]", r / 4,
                    r);
    n += snprintf(line + n, sizeof line - (size_t)n, "}}");
    scn_cli_send_line(s->cli, line, (size_t)n);
    if (scn_cli_flush(s->cli) != SCN_CLI_OK)
      die("subscribe failed: %s", scn_cli_error(s->cli));
  }
  for (int i = 0; i < R->S; i++) {
    near_sub *s = &R->subs[i];
    cJSON *reply;
    if (scn_cli_read_response(s->cli, &reply) != SCN_CLI_OK)
      die("subscribe failed: %s", scn_cli_error(s->cli));
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok")))
      die("subscribe failed: %s",
          scn_cli_reply_message(reply) ? scn_cli_reply_message(reply) : "?");
    cJSON_Delete(reply);
    s->cap = 1 << 17;
    if (!(s->buf = malloc(s->cap)))
      die("%s", "out of memory");
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    epoll_ctl(R->ep, EPOLL_CTL_ADD, scn_cli_fd(s->cli), &ev);
    read_sub(R, s); /* what the client read past the answer */
  }
}

static void close_all(reader *R) {
  for (int i = 0; i < R->S; i++) {
    scn_cli_close(R->subs[i].cli);
    free(R->subs[i].buf);
  }
  free(R->subs);
  close(R->ep);
}

/* ---- one measurement ------------------------------------------------------------------------ */

typedef struct phase {
  bool bands;
  int samples;
  double secs;
  double interest_ms, cpu_ms, ticks_s, candidates; /* per tick, medians over the samples */
  double daemon_ticks_s; /* the daemon's own count (its interest ticks): frames may lag it */
  double cpu_share;      /* of one core, over the whole run */
  double moves_s;        /* ticks of moves applied per second */
  double fps, bytes_s;   /* per subscriber, medians */
  double matrices_s, received_s; /* sent by the daemon, read by the bench */
  double memory_per_sub, rss_per_sub;
  double lags;
  long errors, others;
} phase;

static double median_of(double *v, int n) {
  if (n == 0)
    return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Ticks from sample a to sample b: the daemon's interest ticks, else the frames'. */
static double ticks_between(const sample *a, const sample *b) {
  double interest = b->m[M_INTEREST_TICKS] - a->m[M_INTEREST_TICKS];
  return isnan(interest) ? (double)(b->tick - a->tick) : interest;
}

/* Medians over the intervals between samples: interest ms, CPU ms and candidates per tick
 * (the daemon's interest ticks, else the frames' ticks), and ticks per second (the frames'). */
static void interval_medians(const sample *s, int k, phase *p) {
  double im[MAX_SAMPLES], cm[MAX_SAMPLES], tr[MAX_SAMPLES], ca[MAX_SAMPLES], dr[MAX_SAMPLES];
  int ni = 0, nc = 0, nt = 0, na = 0, nd = 0;
  for (int i = 1; i <= k; i++) {
    double dt = s[i].t - s[i - 1].t, world = (double)(s[i].tick - s[i - 1].tick);
    double ticks = s[i].m[M_INTEREST_TICKS] - s[i - 1].m[M_INTEREST_TICKS];
    double per = ticks > 0 ? ticks : world;
    if (ticks > 0) {
      im[ni++] = (s[i].m[M_INTEREST_S] - s[i - 1].m[M_INTEREST_S]) / ticks * 1e3;
      if (!isnan(s[i].m[M_CANDIDATES]))
        ca[na++] = (s[i].m[M_CANDIDATES] - s[i - 1].m[M_CANDIDATES]) / ticks;
    }
    if (per > 0 && !isnan(s[i].cpu_s))
      cm[nc++] = (s[i].cpu_s - s[i - 1].cpu_s) / per * 1e3;
    if (dt > 0)
      tr[nt++] = world / dt;
    if (dt > 0 && !isnan(ticks))
      dr[nd++] = ticks / dt;
  }
  p->interest_ms = median_of(im, ni);
  p->cpu_ms = median_of(cm, nc);
  p->ticks_s = median_of(tr, nt);
  p->candidates = median_of(ca, na);
  p->daemon_ticks_s = median_of(dr, nd);
}

/* Waits (5 s at most) until the daemon counts no near subscription: the connections of the
 * previous phase are closed, and their memory is not this phase's. */
static void wait_unsubscribed(const daemon_ref *d, scn_cli *admin) {
  for (double end = now_s() + 5; now_s() < end; usleep(20000)) {
    double m[M_COUNT];
    read_metrics(d, admin, m);
    if (!(m[M_SUBSCRIPTIONS] > 0))
      return;
  }
}

static void run_phase(const opts *o, const daemon_ref *d, scn_cli *admin, world_state *w, int S,
                      bool bands, phase *p) {
  *p = (phase){.bands = bands};
  double r = SIDE * sqrt(0.01 / M_PI);
  wait_unsubscribed(d, admin);
  sample before = {0}, after = {0};
  take_sample(d, admin, &before);
  reader R = {.S = S, .b64 = o->b64};
  subscribe_all(o, w, &R, r, bands);
  /* every subscriber's first (full) frame, before anything moves */
  int waiting = S;
  for (double end = now_s() + FIRST_FRAME_S; waiting && now_s() < end;) {
    read_until(&R, now_s() + 0.05);
    waiting = 0;
    for (int i = 0; i < S; i++)
      waiting += R.subs[i].frames == 0;
  }
  if (waiting)
    fprintf(stderr, "scene-bench: %d subscribers had no frame after %.0f s\n", waiting,
            FIRST_FRAME_S);
  take_sample(d, admin, &after);
  p->rss_per_sub = (after.rss - before.rss) / S;

  mover m = {0};
  start_mover(&m, o, w);
  read_until(&R, now_s() + WARMUP_S);
  reset_counts(&R);
  R.others = 0;
  static sample s[MAX_SAMPLES];
  s[0].tick = R.max_tick, s[0].moves = atomic_load(&m.ticks);
  take_sample(d, admin, &s[0]);
  double t0 = s[0].t, end = t0 + o->seconds;
  int k = 0;
  for (double next = t0 + SAMPLE_S;; next += SAMPLE_S) {
    bool last = next >= end - 1e-3;
    read_until(&R, last ? end : next);
    sample c = {.tick = R.max_tick, .moves = atomic_load(&m.ticks)};
    take_sample(d, admin, &c);
    bool enough = ticks_between(&s[k], &c) >= MIN_TICKS;
    if (enough && k + 1 < MAX_SAMPLES)
      s[++k] = c;
    else if (last && k > 0)
      s[k] = c; /* a short last interval joins the one before */
    else if (last)
      s[++k] = c;
    if (last)
      break;
  }
  p->samples = k;
  p->secs = s[k].t - t0;
  p->cpu_share = (s[k].cpu_s - s[0].cpu_s) / p->secs;
  interval_medians(s, k, p);
  p->moves_s = (double)(s[k].moves - s[0].moves) / p->secs;
  p->errors = atomic_load(&m.errors);
  p->others = R.others;
  stop_mover(&m);

  double *v = malloc(sizeof(double) * (size_t)S * 2);
  for (int i = 0; i < S; i++) {
    v[i] = (double)R.subs[i].frames / p->secs;
    v[S + i] = R.subs[i].bytes / p->secs;
  }
  p->fps = median_of(v, S);
  p->bytes_s = median_of(v + S, S);
  free(v);
  p->matrices_s = (s[k].m[M_FRAME_MATRICES] - s[0].m[M_FRAME_MATRICES]) / p->secs;
  p->received_s = (double)R.matrices / p->secs;
  p->memory_per_sub = s[k].m[M_MEMORY] / s[k].m[M_SUBSCRIPTIONS];
  p->lags = s[k].m[M_LAGS] - s[0].m[M_LAGS];
  if (R.others)
    fprintf(stderr, "scene-bench: %ld lines that were not frames, the first: %s\n", R.others,
            R.other);
  close_all(&R);
}

/* ---- output --------------------------------------------------------------------------------- */

/* v with `decimals`, or what stands for an unknown figure (the daemon gave none): null in
 * JSON, n/a in text. A ring of buffers, so that one printf may hold several. */
static const char *num(const opts *o, double v, int decimals) {
  static char ring[32][40];
  static int at;
  if (!isfinite(v))
    return o->json ? "null" : "n/a";
  char *b = ring[at++ % 32];
  snprintf(b, sizeof ring[0], "%.*f", decimals, v);
  return b;
}

static const char *bands_name(bool bands) {
  return bands ? "bands [r/4 60 Hz, r 10 Hz]" : "no bands";
}

static void print_phase(const opts *o, const daemon_ref *d, const world_state *w, int S,
                        const phase *p) {
  double r = SIDE * sqrt(0.01 / M_PI);
  if (o->json) {
    printf("{\"test\":\"near\",\"interest\":\"%s\",\"bands\":%s,\"form\":\"%s\","
           "\"transforms\":%d,\"moving\":%d,\"subscribers\":%d,\"side\":%g,\"radius\":%.3f,"
           "\"margin\":%.3f,\"seconds\":%.3f,\"samples\":%d,",
           d->label, p->bands ? "true" : "false", o->b64 ? "b64" : "json", w->n, w->moving, S, SIDE,
           r, r / 10, p->secs, p->samples);
    printf("\"interest_ms_per_tick\":%s,\"candidates_per_tick\":%s,\"cpu_ms_per_tick\":%s,"
           "\"cpu_share\":%s,\"ticks/s\":%s,\"daemon_ticks/s\":%s,\"moves/s\":%.2f,",
           num(o, p->interest_ms, 4), num(o, p->candidates, 0), num(o, p->cpu_ms, 4),
           num(o, p->cpu_share, 3), num(o, p->ticks_s, 2), num(o, p->daemon_ticks_s, 2),
           p->moves_s);
    printf("\"frames/s\":%.2f,\"bytes/s\":%.0f,\"matrices/s\":%s,\"received_matrices/s\":%.0f,"
           "\"memory_bytes_per_subscription\":%s,\"rss_bytes_per_subscriber\":%s,\"lags\":%s,"
           "\"errors\":%ld}\n",
           p->fps, p->bytes_s, num(o, p->matrices_s, 0), p->received_s,
           num(o, p->memory_per_sub, 0), num(o, p->rss_per_sub, 0), num(o, p->lags, 0), p->errors);
  } else {
    printf("near %s, %s: interest work %s ms/tick (%s candidates/tick), daemon CPU %s ms/tick "
           "(%s%% of a core), %s ticks/s in the frames (the daemon counts %s), moves applied at "
           "%.1f ticks/s\n",
           d->label, bands_name(p->bands), num(o, p->interest_ms, 3), num(o, p->candidates, 0),
           num(o, p->cpu_ms, 2), num(o, p->cpu_share * 100, 0), num(o, p->ticks_s, 1),
           num(o, p->daemon_ticks_s, 1), p->moves_s);
    printf("    %.1f frames/s per subscriber, %s matrices/s sent (%.0f read), %.1f KB/s per "
           "subscriber; memory: %s bytes per subscription (interest), RSS %s KB per subscriber\n",
           p->fps, num(o, p->matrices_s, 0), p->received_s, p->bytes_s / 1e3,
           num(o, p->memory_per_sub, 0), num(o, p->rss_per_sub / 1e3, 1));
    if (p->lags > 0 || p->errors)
      printf("    (%s subscriber lags: the bench or the daemon fell behind; %ld failed batches)\n",
             num(o, p->lags, 0), p->errors);
  }
  fflush(stdout);
}

static void print_sizes(const opts *o, int S) {
  if (o->json)
    return;
  double r = SIDE * sqrt(0.01 / M_PI);
  int moving = (int)(o->moving * o->transforms + 0.5);
  printf("near: %d transforms over a %.0f x %.0f square (z = 0), %d (%.0f%%) moving %.1f a tick "
         "in batches of %d; %d subscribers, each following a moving entity: radius %.2f (1%% of "
         "the square), margin %.2f; %s frames; %.0f s measured in samples of %.0f s (or %d ticks) "
         "after "
         "%.0f s of warm-up: medians over the samples, and over the subscribers\n",
         o->transforms, SIDE, SIDE, moving < 1 ? 1 : moving, o->moving * 100, STEP, BATCH_OPS, S, r,
         r / 10, o->b64 ? "b64" : "json", o->seconds, SAMPLE_S, MIN_TICKS, WARMUP_S);
  fflush(stdout);
}

/* Whether the mover's sets kept up with the daemon's ticks (90% of them at least). */
static bool applied_moves(const phase *p) {
  double ticks = isnan(p->daemon_ticks_s) ? p->ticks_s : p->daemon_ticks_s;
  return p->moves_s >= 0.9 * ticks;
}

/* The workload against one daemon: without bands, and with them when `both`; its tick rate. */
static double run_daemon(const opts *o, const daemon_ref *d, int S, bool both, phase *plain,
                         phase *banded) {
  opts at = *o;
  if (o->scened)
    at.host = "127.0.0.1", at.port = d->port;
  scn_cli *admin = connect_or_die(&at);
  world_state w = {0};
  build_world(&at, admin, &w);
  run_phase(&at, d, admin, &w, S, false, plain);
  print_phase(o, d, &w, S, plain);
  if (both) {
    run_phase(&at, d, admin, &w, S, true, banded);
    print_phase(o, d, &w, S, banded);
    if (!o->json)
      printf("near %s: bytes per subscriber per second: %.1f KB without bands, %.1f KB with bands "
             "(%.2f)\n",
             d->label, plain->bytes_s / 1e3, banded->bytes_s / 1e3,
             banded->bytes_s / plain->bytes_s);
  }
  char line[160];
  snprintf(line, sizeof line, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", w.name);
  cJSON_Delete(call_or_die(admin, line));
  scn_cli_close(admin);
  free_world(&w);
  return w.tick_hz;
}

void run_near(const opts *o) {
  int S = o->subscribers ? o->subscribers : 1000;
  if (o->naive && !o->scened)
    die("%s", "--naive starts a grid daemon and a naive one: it needs --scened PATH");
  print_sizes(o, S);
  daemon_ref grid = {
      .label = "daemon", .port = o->port, .http_port = o->http_port, .pid = o->daemon_pid};
  if (o->scened)
    start_daemon(o, "grid", &grid);
  phase plain, banded, slow = {.interest_ms = NAN, .cpu_ms = NAN};
  double tick_hz = run_daemon(o, &grid, S, true, &plain, &banded);
  stop_daemon(&grid);
  if (o->naive) {
    daemon_ref naive;
    start_daemon(o, "naive", &naive);
    run_daemon(o, &naive, S, false, &slow, NULL);
    stop_daemon(&naive);
  }
  double ratio = slow.interest_ms / plain.interest_ms, cpu_ratio = slow.cpu_ms / plain.cpu_ms;
  /* Sustained: the daemon ticks at its rate and the moves of every tick are applied (a daemon
   * busy with its ticks may leave the mover's sets waiting, and then has less to do). */
  bool sustained = plain.ticks_s >= 0.98 * tick_hz && plain.moves_s >= 0.98 * tick_hz &&
                   !(plain.cpu_ms > 1e3 / tick_hz) && plain.interest_ms <= 2;
  /* The ratio compares the workload only where both daemons applied the moves of their ticks. */
  bool applied = applied_moves(&plain) && (!o->naive || applied_moves(&slow));
  if (o->json) {
    printf("{\"test\":\"near_summary\",\"bytes_with_bands/without\":%s,"
           "\"naive/grid_interest_ms\":%s,\"naive/grid_cpu_ms\":%s,\"sustained\":%s,"
           "\"moves_applied\":%s}\n",
           num(o, banded.bytes_s / plain.bytes_s, 3), num(o, ratio, 3), num(o, cpu_ratio, 3),
           sustained ? "true" : "false", applied ? "true" : "false");
  } else {
    printf("near: %.0f Hz sustained on one core with interest work <= 2 ms/tick (at these "
           "sizes): %s (%.1f ticks/s, moves applied at %.1f ticks/s, daemon CPU %s ms/tick, "
           "interest %s ms/tick)\n",
           tick_hz, sustained ? "met" : "SHORT", plain.ticks_s, plain.moves_s,
           num(o, plain.cpu_ms, 2), num(o, plain.interest_ms, 3));
    if (o->naive)
      printf("near: naive / grid interest work per tick = %s / %s ms = %s (target >= 10: %s); "
             "daemon CPU per tick %s / %s ms = %s; moves applied at %.1f and %.1f ticks/s\n",
             num(o, slow.interest_ms, 3), num(o, plain.interest_ms, 3), num(o, ratio, 1),
             !applied      ? "not judged, the moves were not all applied"
             : ratio >= 10 ? "met"
                           : "SHORT",
             num(o, slow.cpu_ms, 2), num(o, plain.cpu_ms, 2), num(o, cpu_ratio, 1), slow.moves_s,
             plain.moves_s);
  }
  fflush(stdout);
}

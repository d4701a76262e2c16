/* scene-bench -t stream: S subscribers (default 10) of a world whose root, with K descendants
 * (default 99,999), moves and turns every tick, so that every world matrix changes every tick.
 *
 * The subscribers take json frames, b64 ones (--b64) or packed ones (--packed STEP, origin 0),
 * over TCP or, with --ws, over WebSocket (GET /ws on --http-port). The figures: matrices/s,
 * frames/s per subscriber, frame bytes per matrix (every byte received, envelopes and
 * WebSocket headers included, over the matrices the frames held), for packed the payload bytes
 * per matrix, the latency from the root's set to the frame that holds it, and with
 * --daemon-pid the daemon's CPU per million matrices (/proc over the measured seconds).
 *
 * Packed frames are all decoded, each subscription with its own baseline, and every matrix
 * compared with the exact one: the bench knows the root's transform at each sequence number
 * (its x translation is the number, which the root's decoded translation gives back) and each
 * descendant's local transform. The largest translation error per axis (within step / 2 plus
 * float32 rounding) and rotation error (within 0.5 degrees) are printed, with the reader's cost
 * of decoding and checking. In b64 mode subscriber 0's frames get the same check, exact: what
 * it finds is the daemon's own float32 rounding, the control for the packed figures.
 * --loopback: then the limit of plain writes of the frames' size to S reading sockets.
 */
#define _GNU_SOURCE /* memmem */
#include "scene_bench_stream.h"
#include "scene_bench.h"
#include "scene_bench_ws.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SEQ_RING 4096
#define MAX_LAT 4000000
/* A translation error may pass step / 2 by this many float32 ulps of the values that went
 * into it: the daemon's world matrices are float32 products (the b64 control finds them within
 * about 1.5 ulps of the exact ones), and the client rounds origin + q * step to float32 (half
 * an ulp); the rest is room. */
#define F32_ULPS 4
#define MAX_ROT_DEG 0.5

typedef struct sub_conn {
  int fd;       /* the loopback limit's plain sockets; a WebSocket subscriber's */
  scn_cli *cli; /* a TCP subscriber's connection (TLS or not), or NULL */
  bool ws;
  bool check_b64; /* b64 frames checked against the workload (subscriber 0) */
  double sid;
  char *buf;
  size_t len, cap;
  long frames;
  packed_state *packed; /* --packed: what it holds (shared while in step) */
  b64_decoder b64;
  uint8_t *msg; /* a fragmented WebSocket message, gathered */
  size_t msg_len, msg_cap;
  uint8_t msg_op; /* its opcode; 0: none under way */
} sub_conn;

/* What the subscribers received. */
typedef struct stream_counts {
  long frames, matrices;
  long others; /* packed: lines or text messages that were not packed frames */
  double bytes, payload_bytes;
  double *lat;
  size_t nlat;
} stream_counts;

/* The root's mover: once per tick, the root's next sequence number. */
typedef struct mover {
  scn_cli *admin;
  const char *world;
  double root, tick_hz;
} mover;

typedef struct stream_run {
  const opts *o;
  const stream_model *model; /* NULL: bytes and lines only (the loopback limit) */
  stream_check check;
  packed_run packed;
  stream_counts k;
  double sent_at[SEQ_RING];
  long seq; /* the last one set */
} stream_run;

/* Bytes equal to c in [p, end), eight at a time. */
static long count_byte(const char *p, const char *end, char c) {
  const uint64_t ones = 0x0101010101010101ull, pattern = ones * (uint8_t)c;
  long n = 0;
  for (; p + 8 <= end; p += 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    v ^= pattern; /* a zero byte where c was */
    v = ~((((v & 0x7f7f7f7f7f7f7f7full) + 0x7f7f7f7f7f7f7f7full) | v) | 0x7f7f7f7f7f7f7f7full);
    n += __builtin_popcountll(v);
  }
  for (; p < end; p++)
    n += *p == c;
  return n;
}

/* Of a frame line: its matrices (in json form its entries, as every '{' but the first opens
 * one; in b64 form the length of "ms", whose end is found from the line's end, past
 * "removed", over 64 bytes) and element 12 (the x translation) of its first matrix, the
 * sequence number. The reader looks at each byte about as often as it must to find the lines,
 * so that it costs about what the loopback test's reader costs. */
void frame_info(const char *start, const char *nl, bool b64, long *matrices, long *seq) {
  *matrices = *seq = 0;
  if (!b64) {
    *matrices = count_byte(start, nl, '{') - 1;
    const char *m = memmem(start, (size_t)(nl - start), "\"m\":[", 5);
    if (!m)
      return;
    const char *q = m + 5;
    for (int comma = 0; comma < 12 && q < nl; q++)
      if (*q == ',')
        comma++;
    *seq = strtol(q, NULL, 10);
    return;
  }
  const char *ms = memmem(start, (size_t)(nl - start), "],\"ms\":\"", 8);
  const char *q = nl;
  for (int quotes = 0; quotes < 3 && q > start;) /* the quotes of "removed", then the ms end */
    quotes += *--q == '"';
  if (!ms || q < ms + 8)
    return;
  ms += 8;
  *matrices = (long)((size_t)(q - ms) / 4 * 3 / 64);
  if (q - ms < 72)
    return;
  /* bytes 48..53 of the matrices are the base64 characters 64..71 */
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) {
    const char *at = strchr(alphabet, ms[64 + i]);
    if (!at || !*at)
      return;
    v = v << 6 | (uint64_t)(at - alphabet);
  }
  uint32_t bits = (uint32_t)(v >> 40 & 0xff) | (uint32_t)(v >> 32 & 0xff) << 8 |
                  (uint32_t)(v >> 24 & 0xff) << 16 | (uint32_t)(v >> 16 & 0xff) << 24;
  float x;
  memcpy(&x, &bits, 4);
  *seq = (long)x;
}

/* ---- what the subscribers receive ------------------------------------------------------------ */

/* This thread's CPU seconds: the reader's cost of decoding, apart from the time others took
 * the core (the machine is shared). */
static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void count_frame(stream_run *R, sub_conn *s, long matrices, long seq, double t) {
  R->k.frames++;
  s->frames++;
  R->k.matrices += matrices;
  if (seq > 0 && seq <= R->seq && R->seq - seq < SEQ_RING && R->k.nlat < MAX_LAT)
    R->k.lat[R->k.nlat++] = t - R->sent_at[seq % SEQ_RING];
}

/* A JSON line (TCP) or text message (WebSocket) from [start, end). */
static void take_text(stream_run *R, sub_conn *s, const char *start, const char *end, double t) {
  if (!R->model) { /* the loopback limit: lines only */
    R->k.frames++;
    s->frames++;
    return;
  }
  long count, seq;
  if (R->o->packed_step > 0) {
    if (s->ws) { /* an event other than a frame: packed frames are binary messages */
      R->k.others++;
      return;
    }
    size_t payload;
    double t0 = thread_cpu_s();
    count =
        packed_take_line(&R->packed, &s->packed, R->model, start, end, &R->check, &seq, &payload);
    R->check.seconds += thread_cpu_s() - t0;
    if (count < 0) {
      R->k.others++;
      return;
    }
    R->k.payload_bytes += (double)payload;
  } else {
    frame_info(start, end, R->o->b64, &count, &seq);
    if (s->check_b64) {
      double t0 = thread_cpu_s();
      b64_check_line(&s->b64, R->model, start, end, &R->check);
      R->check.seconds += thread_cpu_s() - t0;
    }
  }
  count_frame(R, s, count, seq, t);
}

/* A binary message: a packed frame, sub u32, tick u64, flags u8 (little-endian), payload. */
static void take_binary(stream_run *R, sub_conn *s, const uint8_t *p, size_t len, double t) {
  if (len < 13 || !(R->o->packed_step > 0) || !R->model)
    die("%s", "a binary WebSocket message that is not a packed frame");
  uint32_t sub = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  if (sub != (uint32_t)s->sid)
    die("%s", "a packed frame of a subscription the connection does not have");
  long seq;
  size_t payload;
  double t0 = thread_cpu_s();
  long count = packed_take(&R->packed, &s->packed, R->model, p[12] & 1, p + 13, len - 13, false,
                           &R->check, &seq, &payload);
  R->check.seconds += thread_cpu_s() - t0;
  R->k.payload_bytes += (double)payload;
  count_frame(R, s, count, seq, t);
}

static void take_message(stream_run *R, sub_conn *s, uint8_t op, const uint8_t *p, size_t len,
                         double t) {
  if (op == WS_TEXT)
    take_text(R, s, (const char *)p, (const char *)p + len, t);
  else
    take_binary(R, s, p, len, t);
}

/* The whole lines at the start of s->buf; returns the bytes they took. */
static size_t take_lines(stream_run *R, sub_conn *s, double t) {
  char *start = s->buf, *stop = s->buf + s->len, *nl;
  while ((nl = memchr(start, '\n', (size_t)(stop - start)))) {
    take_text(R, s, start, nl, t);
    start = nl + 1;
  }
  return (size_t)(start - s->buf);
}

/* The whole WebSocket frames at the start of s->buf (a message in one frame is read where it
 * lies; a fragmented one is gathered); returns the bytes they took. */
static size_t take_ws_frames(stream_run *R, sub_conn *s, double t) {
  size_t off = 0;
  for (;;) {
    ws_frame f;
    long used = ws_parse((const uint8_t *)s->buf + off, s->len - off, &f);
    if (used == 0)
      return off;
    if (used < 0)
      die("%s", "a WebSocket frame that a server may not send");
    off += (size_t)used;
    if (f.opcode == WS_PING && !ws_send(s->fd, WS_PONG, f.payload, f.len))
      die("%s", "a WebSocket pong could not be sent");
    if (f.opcode == WS_CLOSE)
      die("%s", "the daemon closed a WebSocket subscriber's connection");
    if (f.opcode & 8)
      continue;
    if (f.opcode != WS_CONT && f.fin && !s->msg_op) {
      take_message(R, s, f.opcode, f.payload, f.len, t);
      continue;
    }
    if ((f.opcode == WS_CONT) != (s->msg_op != 0))
      die("%s", "a WebSocket continuation out of place");
    if (f.opcode != WS_CONT)
      s->msg_op = f.opcode, s->msg_len = 0;
    if (s->msg_cap - s->msg_len < f.len) {
      s->msg_cap = (s->msg_len + f.len) * 2;
      if (!(s->msg = realloc(s->msg, s->msg_cap)))
        die("%s", "out of memory");
    }
    memcpy(s->msg + s->msg_len, f.payload, f.len);
    s->msg_len += f.len;
    if (f.fin) {
      take_message(R, s, s->msg_op, s->msg, s->msg_len, t);
      s->msg_op = 0;
    }
  }
}

/* Reads what is ready on s, and takes the frames complete in it. */
static void read_sub(stream_run *R, sub_conn *s) {
  for (;;) {
    if (s->cap - s->len < (1 << 20)) {
      s->cap *= 2;
      s->buf = realloc(s->buf, s->cap);
      if (!s->buf)
        die("%s", "out of memory");
    }
    ssize_t got = s->cli ? scn_cli_recv_raw(s->cli, s->buf + s->len, s->cap - s->len)
                         : recv(s->fd, s->buf + s->len, s->cap - s->len, 0);
    if (got <= 0)
      break;
    s->len += (size_t)got;
    R->k.bytes += (double)got;
  }
  double t = now_s();
  size_t used = s->ws ? take_ws_frames(R, s, t) : take_lines(R, s, t);
  s->len -= used;
  memmove(s->buf, s->buf + used, s->len);
}

/* Reads every subscriber for the test's seconds; with a mover it sets the root once per tick
 * (its x translation the sequence number, its rotation turning), and frames' first matrices
 * give the latency from the set to the frame. */
static void read_subscribers(stream_run *R, sub_conn *subs, int S, const mover *mv,
                             double seconds) {
  int ep = epoll_create1(0);
  for (int i = 0; i < S; i++) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, subs[i].fd, &ev);
  }
  char line[512];
  double t0 = now_s(), next_move = t0, end = t0 + seconds;
  while (now_s() < end) {
    if (mv && now_s() >= next_move) {
      long seq = ++R->seq;
      double q[4];
      stream_root_quat(seq, q);
      snprintf(line, sizeof line,
               "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%.0f,\"t\":[%ld,0,0],"
               "\"r\":[%.9f,%.9f,%.9f,%.9f]}",
               mv->world, mv->root, seq, q[0], q[1], q[2], q[3]);
      R->sent_at[seq % SEQ_RING] = now_s();
      cJSON_Delete(call_or_die(mv->admin, line));
      next_move += 1.0 / mv->tick_hz;
    }
    struct epoll_event evs[256];
    int wait_ms = mv ? (int)((next_move - now_s()) * 1000) : 100;
    int n = epoll_wait(ep, evs, 256, wait_ms > 0 ? wait_ms : 0);
    for (int e = 0; e < n; e++)
      read_sub(R, &subs[evs[e].data.u32]);
  }
  close(ep);
}

/* ---- the loopback limit ---------------------------------------------------------------------- */

/* One thread writes blocks of the frames' size to S sockets, as fast as they take them, while
 * the subscribers' reader above reads them; bytes/s received. */
typedef struct loop_writer {
  int *fds, n;
  size_t block;
  volatile bool stop;
} loop_writer;

static void *write_blocks(void *arg) {
  loop_writer *w = arg;
  char *block = malloc(w->block);
  if (!block)
    return NULL;
  memset(block, 'A', w->block);
  block[w->block - 1] = '\n';
  size_t *off = calloc((size_t)w->n, sizeof *off);
  int ep = epoll_create1(0);
  for (int i = 0; i < w->n; i++) {
    struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, w->fds[i], &ev);
  }
  while (!w->stop) {
    struct epoll_event evs[64];
    int n = epoll_wait(ep, evs, 64, 50);
    for (int e = 0; e < n; e++) {
      int i = (int)evs[e].data.u32;
      for (;;) {
        ssize_t put = send(w->fds[i], block + off[i], w->block - off[i], MSG_NOSIGNAL);
        if (put <= 0)
          break;
        off[i] = (off[i] + (size_t)put) % w->block;
      }
    }
  }
  close(ep);
  free(off);
  free(block);
  return NULL;
}

static double loopback_limit(const opts *o, int S, size_t block) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof addr;
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, S) != 0 ||
      getsockname(lfd, (struct sockaddr *)&addr, &alen) != 0)
    die("%s", "loopback: cannot listen");
  sub_conn *subs = calloc((size_t)S, sizeof *subs);
  loop_writer w = {.fds = calloc((size_t)S, sizeof(int)), .n = S, .block = block ? block : 1};
  for (int i = 0; i < S; i++) {
    subs[i].fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(subs[i].fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        (w.fds[i] = accept(lfd, NULL, NULL)) < 0)
      die("%s", "loopback: cannot connect");
    fcntl(subs[i].fd, F_SETFL, fcntl(subs[i].fd, F_GETFL) | O_NONBLOCK);
    fcntl(w.fds[i], F_SETFL, fcntl(w.fds[i], F_GETFL) | O_NONBLOCK);
    subs[i].cap = 1 << 22;
    subs[i].buf = malloc(subs[i].cap);
  }
  pthread_t th;
  pthread_create(&th, NULL, write_blocks, &w);
  stream_run *R = calloc(1, sizeof *R);
  R->o = o;
  double t0 = now_s();
  read_subscribers(R, subs, S, NULL, o->seconds < 3 ? o->seconds : 3);
  double secs = now_s() - t0, bytes = R->k.bytes;
  w.stop = true;
  pthread_join(th, NULL);
  for (int i = 0; i < S; i++) {
    close(subs[i].fd);
    close(w.fds[i]);
    free(subs[i].buf);
  }
  close(lfd);
  free(w.fds);
  free(subs);
  free(R);
  return bytes / secs;
}

/* ---- subscribing ------------------------------------------------------------------------------
 */

/* Sends a request as a text message and waits (10 s at most) for its answer; events before it
 * are skipped, and what follows it stays in s->buf for the reader. */
static cJSON *ws_call(sub_conn *s, const char *line) {
  if (!ws_send(s->fd, WS_TEXT, line, strlen(line)))
    die("%s", "a WebSocket request could not be sent");
  double end = now_s() + 10;
  for (;;) {
    ws_frame f;
    long used = ws_parse((const uint8_t *)s->buf, s->len, &f);
    if (used < 0)
      die("%s", "a WebSocket frame that a server may not send");
    if (used > 0) {
      cJSON *r = f.opcode == WS_TEXT && f.fin
                     ? cJSON_ParseWithLength((const char *)f.payload, f.len)
                     : NULL;
      if (f.opcode == WS_CLOSE)
        die("%s", "the daemon closed the WebSocket during setup");
      s->len -= (size_t)used;
      memmove(s->buf, s->buf + used, s->len);
      if (r && cJSON_GetObjectItemCaseSensitive(r, "ok"))
        return r;
      cJSON_Delete(r);
      continue;
    }
    if (s->cap - s->len < 65536 && !(s->buf = realloc(s->buf, s->cap *= 2)))
      die("%s", "out of memory");
    struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
    int left = (int)((end - now_s()) * 1000);
    ssize_t got =
        left > 0 && poll(&pfd, 1, left) > 0 ? recv(s->fd, s->buf + s->len, s->cap - s->len, 0) : -1;
    if (got <= 0)
      die("%s", "no answer over the WebSocket within 10 s");
    s->len += (size_t)got;
  }
}

static void ws_call_ok(sub_conn *s, cJSON *req, const char *what) {
  char *line = cJSON_PrintUnformatted(req);
  cJSON_Delete(req);
  cJSON *r = line ? ws_call(s, line) : NULL;
  free(line);
  if (!r || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")))
    die("%s over the WebSocket failed", what);
  const cJSON *sub = cJSON_GetObjectItemCaseSensitive(r, "sub");
  if (cJSON_IsNumber(sub))
    s->sid = sub->valuedouble;
  cJSON_Delete(r);
}

/* The "packed" member of a subscribe, or NULL. */
static cJSON *packed_spec(const opts *o) {
  if (!(o->packed_step > 0))
    return NULL;
  cJSON *p = cJSON_CreateObject();
  cJSON_AddNumberToObject(p, "step", o->packed_step);
  return p;
}

/* Subscriber s over GET /ws: hello (b64, a token) and subscribe as text messages. */
static void subscribe_ws(const opts *o, const char *world, sub_conn *s) {
  char err[256];
  s->fd = ws_connect(o->host, o->http_port, "/ws", err, sizeof err);
  if (s->fd < 0)
    die("%s", err);
  s->ws = true;
  if (o->b64 || o->token) {
    cJSON *hello = cJSON_CreateObject();
    cJSON_AddStringToObject(hello, "cmd", "hello");
    if (o->b64)
      cJSON_AddStringToObject(hello, "matrices", "b64");
    if (o->token)
      cJSON_AddStringToObject(hello, "token", o->token);
    ws_call_ok(s, hello, "hello");
  }
  cJSON *sub = cJSON_CreateObject();
  cJSON_AddStringToObject(sub, "cmd", "subscribe");
  cJSON_AddStringToObject(sub, "world", world);
  cJSON *packed = packed_spec(o);
  if (packed)
    cJSON_AddItemToObject(sub, "packed", packed);
  ws_call_ok(s, sub, "subscribe");
  fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
}

/* With --follower-reads, until daemon c has the whole world (its copy has applied the last of
 * the owner's records: the last descendant is there). */
static void wait_copy(scn_cli *c, const char *world, uint64_t last) {
  char line[160];
  snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}", world,
           (unsigned long long)last);
  for (double deadline = now_s() + 60; now_s() < deadline;) {
    cJSON *r = NULL;
    int rc = scn_cli_call_line(c, line, &r);
    const char *code = rc == SCN_CLI_EREPLY ? scn_cli_reply_code(r) : NULL;
    bool later = code && (strcmp(code, "MOVED") == 0 || strcmp(code, "NOT_FOUND") == 0);
    cJSON_Delete(r);
    if (rc == SCN_CLI_OK)
      return;
    if (!later)
      die("a reader's copy: %s", scn_cli_error(c));
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
  }
  die("%s", "a reader's copy of the world was not complete within 60 s");
}

/* Subscriber i: on daemon i % ndaemons of --daemons, else on --port. */
static void subscribe_tcp(const opts *o, const char *world, sub_conn *s, int i, uint64_t last) {
  opts sub_opts = *o;
  sub_opts.matrices = o->b64 ? SCN_CLI_MATRICES_B64 : SCN_CLI_MATRICES_JSON;
  scn_cli *c = o->ndaemons ? connect_daemon(&sub_opts, i % o->ndaemons) : connect_or_die(&sub_opts);
  if (o->follower_reads && i < o->ndaemons)
    wait_copy(c, world, last); /* once per daemon */
  cJSON *fields = cJSON_CreateObject(), *packed = packed_spec(o);
  if (packed)
    cJSON_AddItemToObject(fields, "packed", packed);
  if (scn_cli_subscribe_fields(c, world, fields, &s->sid) != SCN_CLI_OK)
    die("subscribe failed: %s", scn_cli_error(c));
  cJSON_Delete(fields);
  s->cli = c; /* bytes it read past the answer come first from scn_cli_recv_raw */
  s->fd = scn_cli_fd(c);
}

static sub_conn *subscribe_all(const opts *o, const char *world, int S, stream_run *R,
                               uint64_t last) {
  sub_conn *subs = calloc((size_t)S, sizeof *subs);
  /* every subscriber starts on one empty state: they share it while they receive the same */
  packed_state *empty = o->packed_step > 0 ? packed_state_new(o->packed_step, S) : NULL;
  if (!subs || (o->packed_step > 0 && !empty))
    die("%s", "out of memory, or a --packed step that is not one");
  for (int i = 0; i < S; i++) {
    sub_conn *s = &subs[i];
    s->cap = 1 << 22;
    s->buf = malloc(s->cap);
    s->packed = empty;
    if (!s->buf)
      die("%s", "out of memory");
    s->check_b64 = i == 0 && o->b64 && !(o->packed_step > 0);
    if (o->ws)
      subscribe_ws(o, world, s);
    else
      subscribe_tcp(o, world, s, i, last);
    R->k.bytes += (double)s->len; /* WebSocket: what came after the answer */
  }
  return subs;
}

/* ---- the test ---------------------------------------------------------------------------------
 */

/* A world of a root and K descendants (their ids in *model); the tick rate in *tick_hz. */
static void build_world(scn_cli *admin, const char *world, int K, stream_model *model,
                        double *tick_hz) {
  char line[256];
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  cJSON_Delete(call_or_die(admin, line));
  snprintf(line, sizeof line, "{\"cmd\":\"transform.create\",\"world\":\"%s\"}", world);
  cJSON *r = call_or_die(admin, line);
  uint64_t root = (uint64_t)cJSON_GetObjectItemCaseSensitive(r, "entity")->valuedouble;
  cJSON_Delete(r);
  /* Descendants in a grid, each turned about y by its own angle: when the root moves and turns,
   * every world matrix changes in all twelve of its upper elements. */
  for (int i = 0; i < K; i++) {
    double t[3], q[4];
    stream_descendant(i, t, q);
    snprintf(line, sizeof line,
             "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"parent\":%llu,\"t\":[%.0f,0,%.0f],"
             "\"r\":[0,%.9f,0,%.9f]}",
             world, (unsigned long long)root, t[0], t[2], q[1], q[3]);
    scn_cli_send_line(admin, line, strlen(line));
  }
  uint64_t *ids = malloc(sizeof *ids * (size_t)(K ? K : 1));
  for (int i = 0; i < K; i++) {
    if (scn_cli_read_response(admin, &r) != SCN_CLI_OK)
      die("setup failed: %s", scn_cli_error(admin));
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "entity");
    if (!cJSON_IsNumber(e))
      die("%s", "transform.create failed while building the world");
    ids[i] = (uint64_t)e->valuedouble;
    cJSON_Delete(r);
  }
  if (!ids || !stream_model_init(model, root, ids, (size_t)K))
    die("%s", "out of memory");
  free(ids);
  cJSON *info = call_or_die(admin, "{\"cmd\":\"info\"}");
  const cJSON *hz = cJSON_GetObjectItemCaseSensitive(info, "tick_hz");
  *tick_hz = cJSON_IsNumber(hz) ? hz->valuedouble : 60;
  cJSON_Delete(info);
}

static void close_all(sub_conn *subs, int S) {
  for (int i = 0; i < S; i++) {
    if (subs[i].cli)
      scn_cli_close(subs[i].cli);
    else
      close(subs[i].fd);
    packed_state_unref(subs[i].packed);
    b64_decoder_free(&subs[i].b64);
    free(subs[i].buf);
    free(subs[i].msg);
  }
  free(subs);
}

/* The figures of a run, as print_stream prints them. */
typedef struct stream_result {
  int S, transforms;
  double tick_hz;
  double secs, cpu_s; /* the daemon's CPU over secs (NAN: unknown) */
  double reader_s;    /* this process's CPU over secs */
} stream_result;

static void print_stream(const opts *o, stream_run *R, const stream_result *res);

void run_stream(const opts *o) {
  if (o->ws && (o->tls || o->http_port <= 0))
    die("%s", "--ws needs the daemon's --http-port (and speaks no TLS)");
  scn_cli *admin = connect_or_die(o);
  char world[64], line[160];
  snprintf(world, sizeof world, "bench-%d-stream", (int)getpid());
  int K = o->descendants < 0 ? 99999 : o->descendants, S = o->subscribers ? o->subscribers : 10;
  stream_model model;
  mover mv = {.admin = admin, .world = world};
  build_world(admin, world, K, &model, &mv.tick_hz);
  mv.root = (double)model.root;
  stream_run *R = calloc(1, sizeof *R);
  if (!R || !(R->k.lat = malloc(sizeof(double) * MAX_LAT)))
    die("%s", "out of memory");
  R->o = o;
  R->model = &model;
  R->check.step = o->packed_step > 0 ? o->packed_step : 0;
  sub_conn *subs = subscribe_all(o, world, S, R, K ? model.ids[K - 1] : model.root);
  double cpu0, cpu1, rss, self0, self1;
  proc_usage(o->daemon_pid, &cpu0, &rss);
  proc_usage((int)getpid(), &self0, &rss);
  double t0 = now_s();
  read_subscribers(R, subs, S, &mv, o->seconds);
  stream_result res = {.S = S, .transforms = K + 1, .tick_hz = mv.tick_hz, .secs = now_s() - t0};
  proc_usage(o->daemon_pid, &cpu1, &rss);
  proc_usage((int)getpid(), &self1, &rss);
  res.cpu_s = cpu1 - cpu0;
  res.reader_s = self1 - self0;
  close_all(subs, S);
  snprintf(line, sizeof line, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world);
  cJSON_Delete(call_or_die(admin, line));
  scn_cli_close(admin);
  print_stream(o, R, &res);
  stream_model_free(&model);
  packed_run_free(&R->packed);
  free(R->k.lat);
  free(R);
}

/* v with decimals in JSON, null when unknown (a ring of buffers: several in one printf). */
static const char *json_num(double v, int decimals) {
  static char ring[16][40];
  static int at;
  char *s = ring[at++ % 16];
  if (isnan(v) || isinf(v))
    snprintf(s, sizeof ring[0], "null");
  else
    snprintf(s, sizeof ring[0], "%.*f", decimals, v);
  return s;
}

static void print_check(const opts *o, const stream_run *R, double payload_per_matrix) {
  const stream_check *c = &R->check;
  double rot = stream_check_rot_deg(c), ns = c->seconds * 1e9 / (double)c->checked;
  bool within = c->beyond_ulp <= F32_ULPS && rot <= MAX_ROT_DEG && c->unknown == 0;
  if (o->packed_step > 0)
    printf("  packed step %g: %.2f payload bytes a matrix; largest error x %.6f y %.6f z %.6f "
           "(%.3f step; %.1f float32 ulps past step/2), rotation %.3f degrees: %s (step/2 + %d "
           "ulps, %.1f degrees); %ld payloads decoded (%ld more the same bytes from the same "
           "state), %ld matrices checked, %.0f ns of CPU each\n",
           o->packed_step, payload_per_matrix, c->err[0], c->err[1], c->err[2],
           fmax(fmax(c->err[0], c->err[1]), c->err[2]) / c->step, c->beyond_ulp, rot,
           within ? "within tolerance" : "OUT OF TOLERANCE", F32_ULPS, MAX_ROT_DEG,
           R->packed.decoded, R->packed.reused, c->checked, ns);
  else
    printf(
        "  b64 control, subscriber 0 against the exact matrices: largest error x %.6f y %.6f "
        "z %.6f (%.1f float32 ulps), rotation %.4f degrees; %ld matrices checked, %.0f ns each\n",
        c->err[0], c->err[1], c->err[2], c->beyond_ulp, rot, c->checked, ns);
  if (c->unknown)
    printf("  %ld matrices of entities the workload does not have\n", c->unknown);
}

static void print_stream(const opts *o, stream_run *R, const stream_result *res) {
  stream_counts *k = &R->k;
  const stream_check *c = &R->check;
  int S = res->S;
  double secs = res->secs, fps = (double)k->frames / secs / S, bytes_s = k->bytes / secs;
  size_t frame_bytes = k->frames ? (size_t)(k->bytes / (double)k->frames) : 0;
  double per_matrix = k->matrices ? k->bytes / (double)k->matrices : NAN;
  bool packed = o->packed_step > 0;
  double payload_per = packed && k->matrices ? k->payload_bytes / (double)k->matrices : NAN;
  double cpu_per_million = k->matrices ? res->cpu_s * 1e9 / (double)k->matrices : NAN;
  double limit = o->loopback ? loopback_limit(o, S, frame_bytes) : 0;
  qsort(k->lat, k->nlat, sizeof *k->lat, cmp_double);
  double p50 = pct(k->lat, k->nlat, 0.5) * 1e3, p99 = pct(k->lat, k->nlat, 0.99) * 1e3;
  const char *form = packed ? "packed" : o->b64 ? "b64" : "json", *via = o->ws ? "ws" : "tcp";
  double rot = stream_check_rot_deg(c);
  /* of every matrix at every tick: 1 when the subscribers got every tick's frame */
  double of_ticks = (double)k->matrices / secs / (S * (double)res->transforms * res->tick_hz);
  bool within = c->beyond_ulp <= F32_ULPS && rot <= MAX_ROT_DEG && c->unknown == 0;
  if (o->json) {
    printf("{\"test\":\"stream\",\"form\":\"%s\",\"transport\":\"%s\",\"subscribers\":%d,"
           "\"transforms\":%d,\"seconds\":%.3f,\"frames\":%ld,\"matrices/s\":%.0f,"
           "\"frames/s\":%.2f,\"bytes/s\":%.0f,\"frame_bytes\":%zu,\"bytes_per_matrix\":%s,"
           "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"daemon_cpu_ms_per_million\":%s,"
           "\"tick_hz\":%g,\"of_ticks\":%.3f,\"bench_cpu_share\":%.3f",
           form, via, S, res->transforms, secs, k->frames, (double)k->matrices / secs, fps, bytes_s,
           frame_bytes, json_num(per_matrix, 3), p50, p99, json_num(cpu_per_million, 2),
           res->tick_hz, of_ticks, res->reader_s / secs);
    if (packed)
      printf(",\"step\":%g,\"payload_bytes_per_matrix\":%s,\"not_frames\":%ld,"
             "\"payloads_decoded\":%ld,\"payloads_reused\":%ld",
             o->packed_step, json_num(payload_per, 3), k->others, R->packed.decoded,
             R->packed.reused);
    if (c->checked)
      printf(",\"checked\":%ld,\"err_x\":%.7f,\"err_y\":%.7f,\"err_z\":%.7f,\"err_steps\":%s,"
             "\"err_ulps_past_half_step\":%.2f,\"err_rot_deg\":%.4f,\"within_tolerance\":%s,"
             "\"check_ns_per_matrix\":%.1f,\"unknown\":%ld",
             c->checked, c->err[0], c->err[1], c->err[2],
             json_num(packed ? fmax(fmax(c->err[0], c->err[1]), c->err[2]) / c->step : NAN, 4),
             c->beyond_ulp, rot, within ? "true" : "false", c->seconds * 1e9 / (double)c->checked,
             c->unknown);
    if (o->loopback)
      printf(",\"loopback_bytes/s\":%.0f,\"of_loopback\":%.3f", limit, bytes_s / limit);
    printf("}\n");
  } else {
    printf("stream %s over %s, %d subscribers, %d transforms: %.0f matrices/s, %.1f frames/s per "
           "subscriber, %.1f MB/s of frames (%zu bytes a frame, %.2f a matrix), latency "
           "p50=%.1f ms p99=%.1f ms\n",
           form, via, S, res->transforms, (double)k->matrices / secs, fps, bytes_s / 1e6,
           frame_bytes, per_matrix, p50, p99);
    if (!isnan(cpu_per_million))
      printf("  daemon CPU %.1f ms per million matrices (%.0f%% of a core); scene-bench %.0f%% of "
             "a core; %.1f%% of every tick's matrices delivered\n",
             cpu_per_million, 100 * res->cpu_s / secs, 100 * res->reader_s / secs, 100 * of_ticks);
    if (c->checked || c->unknown)
      print_check(o, R, payload_per);
    if (k->others)
      printf("  %ld lines or messages that were not packed frames\n", k->others);
    if (o->loopback)
      printf("loopback    plain writes of %zu bytes to %d reading sockets: %.0f MB/s; the frames "
             "reach %.0f%% of it\n",
             frame_bytes, S, limit / 1e6, 100 * bytes_s / limit);
  }
  fflush(stdout);
}

/* Torture test of one daemon over loopback, driven by poll() over non-blocking sockets from
 * this process (no threads): a few hundred connections at once, most of them pipelining
 * well-formed requests whose every reply is checked in order, while others misbehave in every
 * way a network client can: vanish mid-line, reset with replies pending, half-close after
 * sending, dribble a request one byte at a time, send thousands of malformed lines, and
 * subscribe to a moving world of thousands of transforms without ever reading. Afterwards the
 * daemon must still answer, count exactly the connections still open, have given back the
 * memory the storm took, and exit 0 on SIGTERM. */
#include "daemon_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- sizes -------------------------------------------------------------------------------- */

#define N_GOOD 240     /* pipelining well-behaved clients, open to the end */
#define GOOD_WINDOW 16 /* requests in flight per good client */
#define N_HALF 16      /* send everything, shutdown(SHUT_WR), read every reply, then EOF */
#define HALF_REQS 60
#define HALF_BURST_REQS 900 /* odd cycles: big replies, not read until after the half-close */
#define N_VANISH 12         /* close mid-line, with or without unread replies */
#define N_RESET 8           /* SO_LINGER 0 close with replies pending */
#define N_SUBRESET 4        /* subscribe to the big world, reset during the full frame */
#define N_DRIBBLE 4         /* one byte at a time */
#define N_BURST 4           /* pipeline thousands without reading, so the daemon holds them back */
#define N_BAD 4             /* malformed lines of every kind */
#define N_SLOW 2            /* subscribers that never read while the world moves */
#define N_MOVER 1           /* moves every transform of the big world, in batches */
#define N_CONNS                                                                                    \
  (N_GOOD + N_HALF + N_VANISH + N_RESET + N_SUBRESET + N_DRIBBLE + N_BURST + N_BAD + N_SLOW +      \
   N_MOVER)

#define WORLD_SIZE 3000 /* transforms in the streamed world */
#define BATCH_OPS 500
#define N_WB (N_GOOD + N_HALF + N_DRIBBLE + N_BURST) /* one transform per checked client */
#define BURST_PAUSE_MS 300 /* a burst client does not read for this long */
#define BAD_WINDOW 64
#define MAX_LINE 65536
#define OUTPUT_LIMIT "262144"
#define DRIBBLE_GAP_MS 1
#define MOVE_GAP_MS 20
#define RSS_SLACK_KIB (32 * 1024)
#define OUTPUT_LIMIT_HITS "scened_limit_rejections_total{limit=\"output_limit\"}"

/* AddressSanitizer keeps freed memory in quarantine (256 MiB by default): resident memory
 * then says little about what the daemon holds, so the memory bounds widen by that much when
 * the daemon runs under it. */
#define QUARANTINE_KIB (256 * 1024)
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN true
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN true
#endif
#endif
#ifndef TEST_ASAN
#define TEST_ASAN false
#endif

enum kind {
  K_GOOD,
  K_HALF,
  K_VANISH,
  K_RESET,
  K_SUBRESET,
  K_DRIBBLE,
  K_BURST,
  K_BAD,
  K_SLOW,
  K_MOVER,
  K_KINDS
};
static const char *const kind_names[] = {"good",      "half-close", "vanish", "reset",
                                         "sub-reset", "dribble",    "burst",  "malformed",
                                         "slow-sub",  "mover"};

/* How much each kind does in one run. */
typedef struct run_cfg {
  const char *label;
  int good_reqs, half_cycles, vanish_cycles, reset_cycles, subreset_cycles, dribble_reqs,
      burst_reqs, bad_lines;
  long limit_ms;
  bool until_lag; /* the world keeps moving until a slow subscriber has fallen behind */
} run_cfg;

/* ---- small helpers ------------------------------------------------------------------------ */

/* True when the process has AddressSanitizer's runtime mapped (a sanitizer build). */
static bool under_asan(pid_t pid) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "r");
  bool found = false;
  while (f && !found && fgets(line, sizeof line, f))
    found = strstr(line, "libasan") != NULL || strstr(line, "libclang_rt.asan") != NULL;
  if (f)
    fclose(f);
  return found;
}

/* One value of the daemon's /metrics, or -1. */
static double metric_value(int http_port, const char *name) {
  char *page = NULL;
  double v = -1;
  if (http_port > 0 && t_http_get(http_port, "/metrics", &page) == 200)
    v = page_metric(page, name);
  free(page);
  return v;
}

typedef struct sbuf {
  char *data;
  size_t len, off, cap;
} sbuf;

static void sb_reserve(sbuf *b, size_t more) {
  if (b->cap - b->len >= more)
    return;
  if (b->off) { /* drop what was consumed before growing */
    memmove(b->data, b->data + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
    if (b->cap - b->len >= more)
      return;
  }
  size_t cap = b->cap ? b->cap : 4096;
  while (cap - b->len < more)
    cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p)
    abort();
  b->data = p;
  b->cap = cap;
}

static void sb_add(sbuf *b, const void *p, size_t n) {
  sb_reserve(b, n);
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  sb_reserve(b, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static void sb_free(sbuf *b) {
  free(b->data);
  *b = (sbuf){0};
}

/* ---- expectations ------------------------------------------------------------------------- */

typedef enum xkind { X_ANY, X_PING, X_SET, X_GET, X_ERR, X_BATCH, X_SUB } xkind;

/* How a request gave its id: none, a number, a string "s<n>", an object {"n":n}. */
enum { ID_NONE, ID_NUM, ID_STR, ID_OBJ };

typedef struct expect {
  xkind kind;
  int id_style;
  long long id;
  const char *code; /* X_ERR */
  uint64_t entity;  /* X_GET */
  double t[3];      /* X_GET: translation of local and world; X_SET: the one it sets */
  int results;      /* X_BATCH; X_GET: a batch of that many gets */
  bool limit_ok;    /* a LIMIT error (output over the limit) is a valid answer too */
} expect;

typedef struct xqueue {
  expect *v;
  size_t head, len, cap;
} xqueue;

static void xq_push(xqueue *q, expect x) {
  if (q->head + q->len == q->cap) {
    if (q->head) {
      memmove(q->v, q->v + q->head, q->len * sizeof *q->v);
      q->head = 0;
    } else {
      q->cap = q->cap ? q->cap * 2 : 64;
      q->v = realloc(q->v, q->cap * sizeof *q->v);
      if (!q->v)
        abort();
    }
  }
  q->v[q->head + q->len++] = x;
}

static expect xq_pop(xqueue *q) {
  expect x = q->v[q->head++];
  if (--q->len == 0)
    q->head = 0;
  return x;
}

static const char *id_text(char *buf, size_t size, int style, long long n) {
  switch (style) {
  case ID_NUM:
    snprintf(buf, size, "\"id\":%lld,", n);
    break;
  case ID_STR:
    snprintf(buf, size, "\"id\":\"s%lld\",", n);
    break;
  case ID_OBJ:
    snprintf(buf, size, "\"id\":{\"n\":%lld},", n);
    break;
  default:
    buf[0] = '\0';
  }
  return buf;
}

static bool id_matches(const cJSON *r, const expect *x) {
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");
  switch (x->id_style) {
  case ID_NONE:
    return id == NULL;
  case ID_NUM:
    return cJSON_IsNumber(id) && id->valuedouble == (double)x->id;
  case ID_STR: {
    char want[32];
    snprintf(want, sizeof want, "s%lld", x->id);
    return cJSON_IsString(id) && strcmp(id->valuestring, want) == 0;
  }
  default: {
    const cJSON *n = cJSON_IsObject(id) ? cJSON_GetObjectItemCaseSensitive(id, "n") : NULL;
    return cJSON_IsNumber(n) && n->valuedouble == (double)x->id && cJSON_GetArraySize(id) == 1;
  }
  }
}

/* ---- the shared state --------------------------------------------------------------------- */

typedef struct tconn {
  enum kind kind;
  int slot, cycle, cycles;
  int fd;
  sbuf out, in;
  xqueue xq;
  long next, total; /* requests issued, requests this cycle */
  bool reading;     /* POLLIN wanted (a slow subscriber: only once it drains) */
  bool shut;        /* SHUT_WR sent */
  bool done;
  bool wait_reply; /* vanish: wait for a reply before leaving */
  bool close_when_sent, reset_when_sent, reset_on_data;
  size_t got; /* bytes received this cycle */
  sbuf drib;  /* dribble: bytes still to send, one at a time */
  long wake_ms;
  uint64_t entity;
  double applied[3]; /* translation of the last set answered ok, once applied_known */
  bool applied_known;
  /* slow subscriber */
  double *view; /* x translation last seen per big-world transform (NAN: never) */
  long long last_tick;
  long frames, fulls;
} tconn;

static struct {
  t_daemon d;
  bool up;
  t_client admin;
  uint64_t tt[WORLD_SIZE]; /* the big world's transforms, sorted */
  uint64_t tt_parent, tt_child;
  uint64_t wb[N_WB];
  tconn conns[N_CONNS];
  long failures;
  long limit_answers; /* requests refused while their connection's output was over the limit */
  long answered[K_KINDS], errors_checked, lines_bad, cycles_done[K_KINDS];
  long move_round, rounds_this_run;
  double lags_at_start; /* scened_stream_lags_total when the run began */
  bool lagged;
  long next_lag_poll;
  long peak_rss;
  const run_cfg *cfg;
} T;

static void failure(const tconn *c, const char *why, const char *line, size_t len) {
  if (T.failures++ < 25)
    fprintf(stderr, "  [%s %d cycle %d] %s: %.*s\n", kind_names[c->kind], c->slot, c->cycle, why,
            (int)(len > 300 ? 300 : len), line ? line : "");
}

/* ---- sockets ------------------------------------------------------------------------------ */

static int open_socket(int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (rcvbuf)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)T.d.port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

static void conn_drop(tconn *c, bool reset) {
  if (c->fd < 0)
    return;
  if (reset) {
    struct linger lg = {1, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  close(c->fd);
  c->fd = -1;
  c->out.len = c->out.off = 0;
  c->in.len = c->in.off = 0;
  c->xq.head = c->xq.len = 0;
  c->drib.len = c->drib.off = 0;
}

/* Sends what is queued; false when the peer is gone. */
static bool flush_out(tconn *c) {
  while (c->fd >= 0 && c->out.off < c->out.len) {
    ssize_t n = send(c->fd, c->out.data + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c->out.off += (size_t)n;
  }
  if (c->out.off == c->out.len)
    c->out.off = c->out.len = 0;
  return true;
}

/* ---- requests ----------------------------------------------------------------------------- */

/* Request k of a client that owns entity e: set_local, get (sees that set), ping, ... With
 * gets > 1 the get is a batch of that many gets, for big replies. */
static void issue_checked(tconn *c, long k, double x, double y0, int gets) {
  char idb[48];
  int style = (int)(k % 4);
  long long idn = (long long)c->cycle * 100000 + k;
  const char *id = id_text(idb, sizeof idb, style, idn);
  /* A client that pauses its reading runs over the output limit: some requests are refused. */
  expect e = {.id_style = style, .id = idn, .limit_ok = c->kind == K_BURST || c->kind == K_HALF};
  switch (k % 3) {
  case 0:
    sb_printf(&c->out,
              "{%s\"cmd\":\"transform.set_local\",\"world\":\"wb\",\"entity\":%llu,"
              "\"t\":[%g,%g,0.5]}\n",
              id, (unsigned long long)c->entity, x, y0 + (double)k);
    e.kind = X_SET;
    e.t[0] = x;
    e.t[1] = y0 + (double)k;
    e.t[2] = 0.5;
    break;
  case 1:
    if (gets > 1) {
      sb_printf(&c->out, "{\"cmd\":\"batch\",%s\"world\":\"wb\",\"ops\":[", id);
      for (int i = 0; i < gets; i++)
        sb_printf(&c->out, "%s{\"cmd\":\"transform.get\",\"entity\":%llu}", i ? "," : "",
                  (unsigned long long)c->entity);
      sb_add(&c->out, "]}\n", 3);
      e.results = gets;
    } else {
      sb_printf(&c->out, "{\"cmd\":\"transform.get\",%s\"world\":\"wb\",\"entity\":%llu}\n", id,
                (unsigned long long)c->entity);
    }
    e.kind = X_GET;
    e.entity = c->entity;
    e.t[0] = x;
    e.t[1] = y0 + (double)(k - 1);
    e.t[2] = 0.5;
    break;
  default:
    sb_printf(&c->out, "{\"cmd\":\"ping\"%s%.*s}\n", *id ? "," : "", *id ? (int)strlen(id) - 1 : 0,
              id);
    e.kind = X_PING;
  }
  xq_push(&c->xq, e);
}

/* The malformed lines, each with the error it must get. @ID@ becomes an id member ("id":n,)
 * when the line is an object the daemon can read an id from; @E@ a transform of the big
 * world, @P@ and @C@ a parent and its child there. */
typedef struct bad_tpl {
  const char *code;
  bool has_id;
  const char *text;
} bad_tpl;

static const bad_tpl bad_tpls[] = {
    {"BAD_JSON", false, "{"},
    {"BAD_JSON", false, "[1,2]"},
    {"BAD_JSON", false, "\"just a string\""},
    {"BAD_JSON", false, "42"},
    {"BAD_JSON", false, "null"},
    {"BAD_JSON", false, "true"},
    {"BAD_JSON", false, "}{"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\"} x"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\"}}"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\",}"},
    {"BAD_JSON", false, "{'cmd':'ping'}"},
    {"BAD_JSON", false, "{\"cmd\" \"ping\"}"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\",\"id\":1"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\",\"a\":[1,2,}"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\",\"a\":tru}"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\",\"a\":\"\\x\"}"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\",\"a\":\"\\ud800\"}"},
    {"BAD_JSON", false, "\x01\x02\x03"},
    {"BAD_JSON", false, "{\"cmd\":\"pi\x01ng\"}"},
    {"BAD_JSON", false, "\xff\xfe{}"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\",\"x\":\"\xc3\x28\"}"},
    {"BAD_JSON", false, "{\"cmd\":\"ping\",\"x\":\"\xed\xa0\x80\"}"},
    {"BAD_JSON", false, "@DEEP@"},
    {"BAD_REQUEST", true, "{@ID@\"x\":1}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":5}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":null}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"world.create\"}"},
    {"BAD_REQUEST", false, "{\"cmd\":\"world.create\"}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"world.create\",\"world\":\"a b\"}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"world.create\",\"world\":\"\"}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"world.create\",\"world\":7}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"entity.create\",\"count\":0}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"entity.create\",\"count\":2.5}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"entity.create\",\"count\":\"3\"}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"transform.set_local\",\"world\":\"tt\",\"entity\":@E@}"},
    {"BAD_REQUEST", true,
     "{@ID@\"cmd\":\"transform.set_local\",\"world\":\"tt\",\"entity\":@E@,\"t\":[1e39,0,0]}"},
    {"BAD_REQUEST", true,
     "{@ID@\"cmd\":\"transform.set_local\",\"world\":\"tt\",\"entity\":@E@,\"s\":1e999}"},
    {"BAD_REQUEST", true,
     "{@ID@\"cmd\":\"transform.set_local\",\"world\":\"tt\",\"entity\":@E@,\"r\":[0,0,0,0]}"},
    {"BAD_REQUEST", true,
     "{@ID@\"cmd\":\"transform.set_local\",\"world\":\"tt\",\"entity\":@E@,\"matrix\":[1,2,3]}"},
    {"BAD_REQUEST", true,
     "{@ID@\"cmd\":\"transform.set_world\",\"world\":\"tt\",\"entity\":@E@,"
     "\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],\"t\":[1,2,3]}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"transform.get\",\"world\":\"tt\"}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"transform.get\",\"world\":\"tt\",\"entity\":-1}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"transform.get\",\"world\":\"tt\",\"entity\":\"x\"}"},
    {"BAD_REQUEST", true,
     "{@ID@\"cmd\":\"transform.get\",\"world\":\"tt\",\"entity\":9007199254740993}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"batch\",\"world\":\"tt\",\"ops\":{}}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"batch\",\"world\":\"tt\",\"ops\":[{\"cmd\":\"ping\"}]}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"subscribe\",\"world\":\"tt\",\"hz\":0}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"unsubscribe\",\"sub\":\"1\"}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"save\"}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"transform.find\",\"world\":\"tt\",\"path\":\"\"}"},
    {"BAD_REQUEST", true,
     "{@ID@\"cmd\":\"transform.rename\",\"world\":\"tt\",\"entity\":@E@,\"name\":\"a/b\"}"},
    {"BAD_REQUEST", true, "{@ID@\"cmd\":\"ping\",\"x\":\"a\\u0000b\"}"},
    {"UNKNOWN_COMMAND", true, "{@ID@\"cmd\":\"nope\"}"},
    {"UNKNOWN_COMMAND", true, "{@ID@\"cmd\":\"PING\"}"},
    {"UNKNOWN_COMMAND", true, "{@ID@\"cmd\":\"\"}"},
    {"UNKNOWN_COMMAND", true, "{@ID@\"cmd\":\"transform.GET\",\"world\":\"tt\",\"entity\":@E@}"},
    {"UNKNOWN_COMMAND", false, "{\"cmd\":\"world.clear\",\"world\":\"tt\"}"},
    {"NOT_FOUND", true, "{@ID@\"cmd\":\"transform.get\",\"world\":\"nosuch\",\"entity\":1}"},
    {"NOT_FOUND", true, "{@ID@\"cmd\":\"world.destroy\",\"world\":\"nosuch\"}"},
    {"NOT_FOUND", true,
     "{@ID@\"cmd\":\"transform.get\",\"world\":\"tt\",\"entity\":9007199254740000}"},
    {"NOT_FOUND", true, "{@ID@\"cmd\":\"transform.get\",\"world\":\"wb\",\"entity\":@E@}"},
    {"NOT_FOUND", true, "{@ID@\"cmd\":\"entity.destroy\",\"entity\":9007199254740000}"},
    {"NOT_FOUND", true, "{@ID@\"cmd\":\"unsubscribe\",\"sub\":999999}"},
    {"NOT_FOUND", true, "{@ID@\"cmd\":\"subscribe\",\"world\":\"nosuch\"}"},
    {"NOT_FOUND", true, "{@ID@\"cmd\":\"subscribe\",\"world\":\"tt\",\"root\":9007199254740000}"},
    {"ALREADY_EXISTS", true, "{@ID@\"cmd\":\"world.create\",\"world\":\"tt\"}"},
    {"ALREADY_EXISTS", true, "{@ID@\"cmd\":\"transform.create\",\"world\":\"tt\",\"entity\":@P@}"},
    {"CYCLE", true,
     "{@ID@\"cmd\":\"transform.link\",\"world\":\"tt\",\"entity\":@P@,\"parent\":@C@}"},
    {"CYCLE", true,
     "{@ID@\"cmd\":\"transform.link\",\"world\":\"tt\",\"entity\":@P@,\"parent\":@P@}"},
    {"LIMIT", true, "{@ID@\"cmd\":\"entity.create\",\"count\":100001}"},
    {"LIMIT", false, "@LONG@"},
};
#define N_BAD_TPLS (sizeof bad_tpls / sizeof bad_tpls[0])

static void expand_bad(sbuf *out, const bad_tpl *t, long long idn) {
  for (const char *p = t->text; *p;) {
    if (strncmp(p, "@ID@", 4) == 0) {
      sb_printf(out, "\"id\":%lld,", idn);
      p += 4;
    } else if (strncmp(p, "@E@", 3) == 0) {
      sb_printf(out, "%llu", (unsigned long long)T.tt[idn % WORLD_SIZE]);
      p += 3;
    } else if (strncmp(p, "@P@", 3) == 0) {
      sb_printf(out, "%llu", (unsigned long long)T.tt_parent);
      p += 3;
    } else if (strncmp(p, "@C@", 3) == 0) {
      sb_printf(out, "%llu", (unsigned long long)T.tt_child);
      p += 3;
    } else if (strcmp(p, "@DEEP@") == 0) { /* nesting far past any parser's depth limit */
      sb_reserve(out, 3000);
      memset(out->data + out->len, '[', 3000);
      out->len += 3000;
      p += 6;
    } else if (strcmp(p, "@LONG@") == 0) { /* over --max-line; the rest must be discarded */
      sb_printf(out, "{\"cmd\":\"world.create\",\"world\":\"long%lld\",\"pad\":\"", idn);
      size_t pad = MAX_LINE + 100 + (size_t)(idn % 5000);
      sb_reserve(out, pad);
      memset(out->data + out->len, 'x', pad);
      out->len += pad;
      sb_add(out, "\"}", 2);
      p += 6;
    } else {
      sb_add(out, p++, 1);
    }
  }
}

static void issue_bad(tconn *c, long k) {
  long long idn = (long long)c->slot * 1000000 + k;
  const bad_tpl *t = &bad_tpls[(size_t)(k + c->slot * 13) % N_BAD_TPLS];
  /* Blank lines in between get no response. */
  if (k % 5 == 0)
    sb_add(&c->out, "\n", 1);
  if (k % 11 == 0)
    sb_add(&c->out, "\r\n", 2);
  expand_bad(&c->out, t, idn);
  sb_add(&c->out, k % 3 == 0 ? "\r\n" : "\n", k % 3 == 0 ? 2 : 1);
  xq_push(&c->xq,
          (expect){
              .kind = X_ERR, .code = t->code, .id_style = t->has_id ? ID_NUM : ID_NONE, .id = idn});
  T.lines_bad++;
}

/* One round of the mover: every transform of the big world gets x = round. */
static void issue_move_round(tconn *c) {
  long r = ++T.move_round;
  T.rounds_this_run++;
  for (int b = 0; b < WORLD_SIZE / BATCH_OPS; b++) {
    sb_printf(&c->out, "{\"cmd\":\"batch\",\"world\":\"tt\",\"id\":%ld,\"ops\":[", r * 100 + b);
    for (int i = 0; i < BATCH_OPS; i++) {
      int idx = b * BATCH_OPS + i;
      sb_printf(&c->out, "%s{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"t\":[%ld,%d,0]}",
                i ? "," : "", (unsigned long long)T.tt[idx], r, idx);
    }
    sb_add(&c->out, "]}\n", 3);
    xq_push(&c->xq,
            (expect){.kind = X_BATCH, .id_style = ID_NUM, .id = r * 100 + b, .results = BATCH_OPS});
  }
}

/* ---- replies ------------------------------------------------------------------------------ */

static bool matrix_translation(const cJSON *m, const double t[3]) {
  if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 16)
    return false;
  for (int i = 0; i < 3; i++) {
    const cJSON *v = cJSON_GetArrayItem(m, 12 + i);
    if (!cJSON_IsNumber(v) || v->valuedouble != t[i])
      return false;
  }
  return true;
}

static const char *check_reply(const expect *x, const cJSON *r) {
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(r, "ok");
  if (!id_matches(r, x))
    return "wrong or missing id: a reply out of order, lost or doubled";
  if (x->limit_ok && cJSON_IsFalse(ok) && strcmp(t_resp_code(r), "LIMIT") == 0) {
    T.limit_answers++;
    return NULL;
  }
  if (x->kind == X_ANY)
    return cJSON_IsBool(ok) ? NULL : "no ok field";
  if (x->kind == X_ERR) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    if (!cJSON_IsFalse(ok) || strcmp(t_resp_code(r), x->code) != 0 || !cJSON_IsString(msg))
      return x->code;
    T.errors_checked++;
    return NULL;
  }
  if (!cJSON_IsTrue(ok))
    return "failed";
  switch (x->kind) {
  case X_GET: {
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "results");
    if (x->results && (!cJSON_IsArray(res) || cJSON_GetArraySize(res) != x->results))
      return "wrong batch results";
    for (int i = 0; i < (x->results ? x->results : 1); i++) {
      const cJSON *g = x->results ? cJSON_GetArrayItem(res, i) : r;
      const cJSON *p = cJSON_GetObjectItemCaseSensitive(g, "parent");
      if (t_resp_num(g, "entity") != (double)x->entity || !cJSON_IsNull(p))
        return "wrong entity or parent";
      if (!matrix_translation(cJSON_GetObjectItemCaseSensitive(g, "local"), x->t) ||
          !matrix_translation(cJSON_GetObjectItemCaseSensitive(g, "world"), x->t))
        return "get does not reflect the set before it";
    }
    return NULL;
  }
  case X_BATCH: {
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "results");
    return cJSON_IsArray(res) && cJSON_GetArraySize(res) == x->results ? NULL
                                                                       : "wrong batch results";
  }
  case X_SUB:
    if (t_resp_num(r, "sub") < 1)
      return "no sub id";
    return NULL;
  default:
    return NULL;
  }
}

static int tt_index(uint64_t e) {
  size_t lo = 0, hi = WORLD_SIZE;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (T.tt[mid] < e)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < WORLD_SIZE && T.tt[lo] == e ? (int)lo : -1;
}

static void handle_event(tconn *c, const cJSON *j, const char *line, size_t len) {
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(j, "event");
  if (c->kind != K_SLOW || !cJSON_IsString(ev) || strcmp(ev->valuestring, "frame") != 0) {
    failure(c, "unexpected event", line, len);
    return;
  }
  const cJSON *full = cJSON_GetObjectItemCaseSensitive(j, "full");
  const cJSON *set = cJSON_GetObjectItemCaseSensitive(j, "set");
  const cJSON *removed = cJSON_GetObjectItemCaseSensitive(j, "removed");
  double tick = t_resp_num(j, "tick");
  if (!cJSON_IsBool(full) || !cJSON_IsArray(set) || !cJSON_IsArray(removed) || tick < 0) {
    failure(c, "malformed frame", line, len);
    return;
  }
  if ((long long)tick <= c->last_tick)
    failure(c, "frame tick does not increase", line, len);
  c->last_tick = (long long)tick;
  if (cJSON_GetArraySize(removed) != 0)
    failure(c, "nothing was removed from the world", line, len);
  c->frames++;
  if (cJSON_IsTrue(full)) {
    c->fulls++;
    for (int i = 0; i < WORLD_SIZE; i++)
      c->view[i] = NAN;
  }
  const cJSON *item;
  cJSON_ArrayForEach(item, set) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(item, "m");
    int idx = tt_index((uint64_t)t_resp_num(item, "e"));
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 16) {
      failure(c, "frame entry without a matrix", line, len);
      return;
    }
    if (idx >= 0)
      c->view[idx] = cJSON_GetArrayItem(m, 12)->valuedouble;
  }
}

/* True when the slow subscriber's view holds the last round everywhere. */
static bool view_final(const tconn *c) {
  for (int i = 0; i < WORLD_SIZE; i++)
    if (c->view[i] != (double)T.move_round)
      return false;
  return true;
}

static void handle_line(tconn *c, const char *line, size_t len) {
  if (c->kind == K_VANISH || c->kind == K_RESET || c->kind == K_SUBRESET) {
    c->wait_reply = false;
    return;
  }
  cJSON *j = cJSON_ParseWithLength(line, len);
  if (!cJSON_IsObject(j)) {
    failure(c, "a line that is not a JSON object", line, len);
  } else if (cJSON_GetObjectItemCaseSensitive(j, "event")) {
    handle_event(c, j, line, len);
  } else if (c->xq.len == 0) {
    failure(c, "a reply to no request", line, len);
  } else {
    expect x = xq_pop(&c->xq);
    /* A get shows the last set that was applied (one refused with LIMIT was not). */
    if (x.kind == X_GET && c->applied_known)
      memcpy(x.t, c->applied, sizeof x.t);
    const char *why = check_reply(&x, j);
    if (!why && x.kind == X_SET && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok"))) {
      memcpy(c->applied, x.t, sizeof c->applied);
      c->applied_known = true;
    }
    if (why) {
      char what[160];
      snprintf(what, sizeof what, "expected %s id %lld (style %d), got", why, x.id, x.id_style);
      failure(c, what, line, len);
    }
    T.answered[c->kind]++;
  }
  cJSON_Delete(j);
}

/* Reads what there is and handles each whole line; false at end of stream (*eof) or error. */
static bool read_in(tconn *c, bool *eof) {
  *eof = false;
  for (;;) {
    sb_reserve(&c->in, 65536);
    ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
    if (n == 0) {
      *eof = true;
      return false;
    }
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c->got += (size_t)n;
    if (c->kind == K_RESET || c->kind == K_SUBRESET) {
      c->in.len = c->in.off = 0; /* not looked at */
      continue;
    }
    c->in.len += (size_t)n;
    char *nl;
    while ((nl = memchr(c->in.data + c->in.off, '\n', c->in.len - c->in.off))) {
      const char *line = c->in.data + c->in.off;
      handle_line(c, line, (size_t)(nl - line));
      c->in.off = (size_t)(nl - c->in.data) + 1;
      if (c->fd < 0)
        return true;
    }
    if (c->in.off == c->in.len)
      c->in.off = c->in.len = 0;
  }
}

/* ---- the clients' scripts ----------------------------------------------------------------- */

static void start_cycle(tconn *c);

static void next_cycle(tconn *c) {
  T.cycles_done[c->kind]++;
  if (++c->cycle >= c->cycles) {
    c->done = true;
    return;
  }
  start_cycle(c);
}

static void start_cycle(tconn *c) {
  const run_cfg *cfg = T.cfg;
  c->next = 0;
  c->got = 0;
  c->shut = c->close_when_sent = c->reset_when_sent = c->reset_on_data = c->wait_reply = false;
  c->reading = true;
  c->fd = open_socket(c->kind == K_SLOW || c->kind == K_BURST ? 4096 : 0);
  if (c->fd < 0) {
    failure(c, "cannot connect", strerror(errno), strlen(strerror(errno)));
    c->done = true;
    return;
  }
  switch (c->kind) {
  case K_GOOD:
    c->total = cfg->good_reqs;
    break;
  case K_HALF:
    if (c->cycle % 2) { /* the daemon stops reading with the end of stream still unread */
      for (long k = 0; k < HALF_BURST_REQS; k++)
        issue_checked(c, k, 1000 + c->slot, c->cycle * 1000, 16);
      c->reading = false;
      c->wake_ms = t_now_ms() + BURST_PAUSE_MS;
    } else {
      for (long k = 0; k < HALF_REQS; k++)
        issue_checked(c, k, 1000 + c->slot, c->cycle * 1000, 1);
    }
    break;
  case K_VANISH: {
    static const char *const partial[] = {
        "{\"cmd\":\"transform.set_local\",\"world\":\"wb\",\"ent",
        "{\"cmd\":\"ping\",\"id\":",
        "{\"cmd\":\"world.create\",\"world\":\"gone",
        "{",
    };
    const char *p = partial[(c->cycle + c->slot) % 4];
    switch ((c->cycle + c->slot) % 4) {
    case 0:
      sb_printf(&c->out, "%s", p);
      c->close_when_sent = true;
      break;
    case 1:
      sb_printf(&c->out,
                "{\"cmd\":\"ping\",\"id\":1}\n{\"cmd\":\"transform.get\",\"world\":\"tt\","
                "\"entity\":%llu}\n%s",
                (unsigned long long)T.tt[c->cycle % WORLD_SIZE], p);
      c->close_when_sent = true;
      break;
    case 2:
      sb_printf(&c->out, "{\"cmd\":\"info\",\"id\":1}\n");
      c->wait_reply = true; /* then the partial line and close */
      break;
    default:
      conn_drop(c, false);
      next_cycle(c);
      return; /* connect and leave at once */
    }
    break;
  }
  case K_RESET:
    for (int k = 0; k < 100; k++)
      sb_printf(&c->out, "{\"cmd\":\"transform.get\",\"world\":\"tt\",\"entity\":%llu,\"id\":%d}\n",
                (unsigned long long)T.tt[(c->slot * 100 + k) % WORLD_SIZE], k);
    if ((c->cycle + c->slot) % 2)
      c->reset_on_data = true; /* replies are on their way */
    else
      c->reset_when_sent = true; /* replies may not even be computed */
    break;
  case K_SUBRESET:
    sb_printf(&c->out, "{\"cmd\":\"subscribe\",\"world\":\"tt\",\"id\":%d}\n", c->cycle);
    if ((c->cycle + c->slot) % 2)
      c->reset_on_data = true;
    else
      c->reset_when_sent = true;
    break;
  case K_DRIBBLE:
    for (long k = 0; k < cfg->dribble_reqs; k++) {
      sbuf tmp = {0};
      sbuf keep = c->out;
      c->out = tmp;
      issue_checked(c, k, 2000 + c->slot, 0, 1);
      if (k % 2) { /* CRLF line end */
        c->out.len--;
        sb_add(&c->out, "\r\n", 2);
      }
      sb_add(&c->drib, c->out.data, c->out.len);
      sb_free(&c->out);
      c->out = keep;
    }
    c->wake_ms = t_now_ms();
    break;
  case K_BAD:
    c->total = cfg->bad_lines;
    break;
  case K_BURST:
    c->total = cfg->burst_reqs;
    c->reading = false;
    c->wake_ms = t_now_ms() + BURST_PAUSE_MS;
    break;
  case K_SLOW:
    sb_printf(&c->out, "{\"cmd\":\"subscribe\",\"world\":\"tt\",\"id\":%d}\n", c->slot);
    xq_push(&c->xq, (expect){.kind = X_SUB, .id_style = ID_NUM, .id = c->slot});
    c->reading = false; /* never reads until the world stops moving */
    c->last_tick = -1;
    c->frames = c->fulls = 0;
    for (int i = 0; i < WORLD_SIZE; i++)
      c->view[i] = NAN;
    break;
  default:
    break;
  }
}

/* True once a slow subscriber has fallen behind in this run. How much output the kernel's
 * socket buffers absorb first varies, so the mover does not stop before (polled every 100 ms). */
static bool slow_lagged(long now) {
  if (!T.lagged && now >= T.next_lag_poll) {
    T.next_lag_poll = now + 100;
    T.lagged = metric_value(T.d.http_port, "scened_stream_lags_total") > T.lags_at_start;
  }
  return T.lagged;
}

static bool others_done(void) {
  for (int i = 0; i < N_CONNS; i++)
    if (T.conns[i].kind != K_SLOW && T.conns[i].kind != K_MOVER && !T.conns[i].done)
      return false;
  return true;
}

static bool mover_done(void) {
  for (int i = 0; i < N_CONNS; i++)
    if (T.conns[i].kind == K_MOVER && !T.conns[i].done)
      return false;
  return true;
}

/* Moves a client along after its socket was served. */
static void advance(tconn *c, long now, long *next_move) {
  if (c->done || c->fd < 0)
    return;
  switch (c->kind) {
  case K_GOOD:
    while (c->next < c->total && c->xq.len < GOOD_WINDOW)
      issue_checked(c, c->next++, c->slot, 0, 1);
    if (c->next == c->total && c->xq.len == 0)
      c->done = true;
    break;
  case K_BAD:
    while (c->next < c->total && c->xq.len < BAD_WINDOW)
      issue_bad(c, c->next++);
    if (c->next == c->total && c->xq.len == 0) {
      c->done = true;
      conn_drop(c, false);
      return;
    }
    break;
  case K_HALF:
    if (!c->reading && now >= c->wake_ms)
      c->reading = true;
    break;
  case K_BURST:
    /* Everything at once while not reading: past the output limit requests are refused
     * with LIMIT, past twice the limit the daemon stops reading; nothing is dropped. */
    if (!c->reading && now >= c->wake_ms)
      c->reading = true;
    while (c->next < c->total && (!c->reading || c->xq.len < GOOD_WINDOW))
      issue_checked(c, c->next++, 3000 + c->slot, c->cycle * 10000, 16);
    if (c->next == c->total && c->xq.len == 0) {
      conn_drop(c, false);
      next_cycle(c);
      return;
    }
    break;
  case K_DRIBBLE:
    if (c->drib.off < c->drib.len && now >= c->wake_ms) {
      sb_add(&c->out, c->drib.data + c->drib.off++, 1);
      c->wake_ms = now + DRIBBLE_GAP_MS;
    }
    if (c->drib.off == c->drib.len && c->xq.len == 0) {
      conn_drop(c, false);
      next_cycle(c);
      return;
    }
    break;
  case K_MOVER:
    if (c->xq.len == 0) {
      if (others_done() && T.rounds_this_run > 0 && (!T.cfg->until_lag || slow_lagged(now))) {
        c->done = true;
        return;
      }
      if (now >= *next_move) {
        issue_move_round(c);
        *next_move = now + MOVE_GAP_MS;
      }
    }
    break;
  case K_SLOW:
    if (!c->reading && mover_done())
      c->reading = true; /* the world stopped: catch up */
    if (c->reading && c->xq.len == 0 && view_final(c)) {
      c->done = true;
      return;
    }
    break;
  default:
    break;
  }
  if (!flush_out(c)) {
    if (c->kind == K_VANISH || c->kind == K_RESET || c->kind == K_SUBRESET) {
      conn_drop(c, false);
      next_cycle(c);
    } else {
      failure(c, "send failed", strerror(errno), strlen(strerror(errno)));
      conn_drop(c, false);
      c->done = true;
    }
    return;
  }
  bool sent = c->out.len == 0;
  if (sent && c->kind == K_HALF && !c->shut) {
    shutdown(c->fd, SHUT_WR);
    c->shut = true;
  }
  if (c->kind == K_VANISH && sent && !c->wait_reply && !c->close_when_sent) {
    /* case 2: the reply came; now a partial line, then leave */
    sb_printf(&c->out, "{\"cmd\":\"transform.get\",\"world\":\"wb\",\"entity\":1");
    c->close_when_sent = true;
    flush_out(c);
    sent = c->out.len == 0;
  }
  if (sent && (c->close_when_sent || c->reset_when_sent || (c->reset_on_data && c->got > 0))) {
    conn_drop(c, c->reset_when_sent || c->reset_on_data);
    next_cycle(c);
  }
}

static void serve(tconn *c, short revents) {
  if (c->fd < 0 || !(revents & (POLLIN | POLLHUP | POLLERR)))
    return;
  bool eof;
  if (read_in(c, &eof) || c->fd < 0)
    return;
  bool churn = c->kind == K_VANISH || c->kind == K_RESET || c->kind == K_SUBRESET;
  if (c->kind == K_HALF && eof) {
    if (c->xq.len != 0)
      failure(c, "end of stream before every reply", "", 0);
    if (c->in.len != c->in.off)
      failure(c, "a partial line before the end of stream", c->in.data + c->in.off,
              c->in.len - c->in.off);
    conn_drop(c, false);
    next_cycle(c);
  } else if (churn) {
    conn_drop(c, false);
    next_cycle(c);
  } else {
    failure(c, eof ? "the daemon closed the connection" : "connection error",
            eof ? "" : strerror(errno), eof ? 0 : strlen(strerror(errno)));
    conn_drop(c, false);
    c->done = true;
  }
}

static void report_unfinished(void) {
  for (int i = 0; i < N_CONNS; i++) {
    tconn *c = &T.conns[i];
    if (!c->done && T.failures++ < 25)
      fprintf(stderr,
              "  [%s %d cycle %d] unfinished: issued %ld, awaiting %zu replies, %zu bytes unsent,"
              " %ld frames (%ld full)\n",
              kind_names[c->kind], c->slot, c->cycle, c->next, c->xq.len, c->out.len - c->out.off,
              c->frames, c->fulls);
  }
}

/* One run of every client script at once; the good clients, the slow subscribers and the mover
 * stay connected afterwards. True when everything finished in time. */
static bool run_all(const run_cfg *cfg) {
  T.cfg = cfg;
  T.rounds_this_run = 0;
  T.lagged = false;
  T.next_lag_poll = 0;
  if (cfg->until_lag)
    T.lags_at_start = metric_value(T.d.http_port, "scened_stream_lags_total");
  int counts[] = {N_GOOD,    N_HALF,  N_VANISH, N_RESET, N_SUBRESET,
                  N_DRIBBLE, N_BURST, N_BAD,    N_SLOW,  N_MOVER};
  int cycles[] = {
      1, cfg->half_cycles, cfg->vanish_cycles, cfg->reset_cycles, cfg->subreset_cycles, 1, 2, 1, 1,
      1};
  int n = 0;
  for (int k = 0; k <= K_MOVER; k++)
    for (int s = 0; s < counts[k]; s++) {
      tconn *c = &T.conns[n++];
      c->kind = (enum kind)k;
      c->slot = s;
      c->cycle = 0;
      c->cycles = cycles[k];
      c->done = false;
      c->fd = -1;
      if (k == K_GOOD)
        c->entity = T.wb[s];
      else if (k == K_HALF)
        c->entity = T.wb[N_GOOD + s];
      else if (k == K_DRIBBLE)
        c->entity = T.wb[N_GOOD + N_HALF + s];
      else if (k == K_BURST)
        c->entity = T.wb[N_GOOD + N_HALF + N_DRIBBLE + s];
      if (k == K_SLOW && !c->view)
        c->view = malloc(sizeof(double) * WORLD_SIZE);
    }
  /* Slow subscribers first, so they hold the world's first full frame before it moves. */
  for (int i = 0; i < N_CONNS; i++)
    if (T.conns[i].kind == K_SLOW)
      start_cycle(&T.conns[i]);
  for (int i = 0; i < N_CONNS; i++)
    if (T.conns[i].kind != K_SLOW)
      start_cycle(&T.conns[i]);

  static struct pollfd pfd[N_CONNS];
  static int who[N_CONNS];
  long start = t_now_ms(), deadline = start + cfg->limit_ms, next_move = start, next_rss = start;
  for (;;) {
    long now = t_now_ms();
    if (now >= next_rss) {
      long rss = t_rss_kib(T.d.pid);
      if (rss > T.peak_rss)
        T.peak_rss = rss;
      next_rss = now + 100;
    }
    bool all_done = true, dribbling = false;
    int np = 0;
    for (int i = 0; i < N_CONNS; i++) {
      tconn *c = &T.conns[i];
      all_done &= c->done;
      if (c->fd < 0)
        continue;
      dribbling |= c->kind == K_DRIBBLE && c->drib.off < c->drib.len;
      short ev = (c->reading ? POLLIN : 0) | (c->out.len > c->out.off ? POLLOUT : 0);
      pfd[np] = (struct pollfd){.fd = c->fd, .events = ev};
      who[np++] = i;
    }
    if (all_done)
      break;
    if (now > deadline) {
      report_unfinished();
      return false;
    }
    if (poll(pfd, (nfds_t)np, dribbling ? DRIBBLE_GAP_MS : 10) < 0 && errno != EINTR) {
      CU_FAIL("poll failed");
      return false;
    }
    for (int k = 0; k < np; k++)
      if (pfd[k].revents)
        serve(&T.conns[who[k]], pfd[k].revents);
    now = t_now_ms();
    for (int i = 0; i < N_CONNS; i++)
      advance(&T.conns[i], now, &next_move);
  }
  long elapsed = t_now_ms() - start;
  long frames = 0, fulls = 0;
  for (int i = 0; i < N_CONNS; i++)
    if (T.conns[i].kind == K_SLOW)
      frames += T.conns[i].frames, fulls += T.conns[i].fulls;
  fprintf(stderr,
          "  %s: %ld ms; replies checked: good %ld, half-close %ld, dribble %ld, burst %ld,"
          " malformed %ld, mover %ld; churned connections: vanish %ld, reset %ld, sub-reset %ld,"
          " half-close %ld; %ld move rounds; slow subscribers read %ld frames (%ld full)\n",
          cfg->label, elapsed, T.answered[K_GOOD], T.answered[K_HALF], T.answered[K_DRIBBLE],
          T.answered[K_BURST], T.answered[K_BAD], T.answered[K_MOVER], T.cycles_done[K_VANISH],
          T.cycles_done[K_RESET], T.cycles_done[K_SUBRESET], T.cycles_done[K_HALF],
          T.rounds_this_run, frames, fulls);
  return true;
}

static int open_count(void) {
  int n = 1; /* the admin connection */
  for (int i = 0; i < N_CONNS; i++)
    n += T.conns[i].fd >= 0;
  return n;
}

static void close_all(void) {
  for (int i = 0; i < N_CONNS; i++)
    conn_drop(&T.conns[i], false);
}

/* ---- setup -------------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Creates n transforms in world with the same request, pipelined; ids into out. */
static bool create_many(const char *world, uint64_t *out, int n) {
  sbuf b = {0};
  for (int i = 0; i < n; i++)
    sb_printf(&b, "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"t\":[0,%d,0]}\n", world, i);
  bool ok = t_client_send_raw(&T.admin, b.data, b.len) == 0;
  sb_free(&b);
  for (int i = 0; ok && i < n; i++) {
    cJSON *r = t_client_recv_json(&T.admin, 10000);
    ok = t_resp_ok(r) && t_resp_num(r, "entity") > 0;
    if (ok)
      out[i] = (uint64_t)t_resp_num(r, "entity");
    cJSON_Delete(r);
  }
  return ok;
}

static bool setup_worlds(void) {
  cJSON *tt = OK(&T.admin, "{\"cmd\":\"world.create\",\"world\":\"tt\"}");
  cJSON *wb = OK(&T.admin, "{\"cmd\":\"world.create\",\"world\":\"wb\"}");
  bool made = t_resp_ok(tt) && t_resp_ok(wb);
  cJSON_Delete(tt);
  cJSON_Delete(wb);
  if (!made || !create_many("tt", T.tt, WORLD_SIZE) || !create_many("wb", T.wb, N_WB))
    return false;
  qsort(T.tt, WORLD_SIZE, sizeof T.tt[0], cmp_u64);
  cJSON *r = OK(&T.admin, "{\"cmd\":\"transform.create\",\"world\":\"tt\",\"name\":\"p\"}");
  T.tt_parent = t_resp_id(r, "entity");
  cJSON_Delete(r);
  r = OK(&T.admin, "{\"cmd\":\"transform.create\",\"world\":\"tt\",\"parent\":%llu}",
         (unsigned long long)T.tt_parent);
  T.tt_child = t_resp_id(r, "entity");
  cJSON_Delete(r);
  return T.tt_parent > 0 && T.tt_child > 0;
}

/* ---- the test ----------------------------------------------------------------------------- */

static void test_torture(void) {
  long t0 = t_now_ms();
  CU_ASSERT_FATAL(T.up);
  CONNECT_FATAL(&T.admin, T.d.port);
  CU_ASSERT_FATAL(setup_worlds());

  /* Warm-up: everything once, smaller, so the baseline holds the daemon's steady buffers. */
  static const run_cfg warm = {"warm-up", 30, 1, 3, 1, 1, 2, 300, 150, 15000, false};
  static const run_cfg storm = {"torture", 200, 3, 30, 10, 4, 4, 2000, 1500, 20000, true};
  CU_ASSERT_FATAL(run_all(&warm));
  close_all();
  CU_ASSERT_EQUAL(t_wait_info(&T.admin, "connections", 1, 5000), 1);
  CU_ASSERT_EQUAL(T.failures, 0);
  long base = t_rss_kib(T.d.pid);
  /* A statically linked runtime (clang) names no library: then this binary's own build
   * stands for the daemon's, as both come from the same make. */
  long quarantine = under_asan(T.d.pid) || TEST_ASAN ? QUARANTINE_KIB : 0;
  T.peak_rss = base;
  double lags_before = metric_value(T.d.http_port, "scened_stream_lags_total");
  double held_before = metric_value(T.d.http_port, OUTPUT_LIMIT_HITS);

  memset(T.answered, 0, sizeof T.answered);
  memset(T.cycles_done, 0, sizeof T.cycles_done);
  T.errors_checked = T.lines_bad = 0;
  T.limit_answers = 0;
  bool finished = run_all(&storm);
  CU_ASSERT_TRUE(finished);
  CU_ASSERT_EQUAL(T.failures, 0);
  CU_ASSERT_EQUAL(T.answered[K_GOOD], (long)N_GOOD * storm.good_reqs);
  long half = 0;
  for (int i = 0; i < storm.half_cycles; i++)
    half += i % 2 ? HALF_BURST_REQS : HALF_REQS;
  CU_ASSERT_EQUAL(T.answered[K_HALF], N_HALF * half);
  CU_ASSERT_EQUAL(T.answered[K_DRIBBLE], (long)N_DRIBBLE * storm.dribble_reqs);
  CU_ASSERT_EQUAL(T.answered[K_BURST], (long)N_BURST * 2 * storm.burst_reqs);
  CU_ASSERT_EQUAL(T.answered[K_BAD], (long)N_BAD * storm.bad_lines);
  CU_ASSERT_EQUAL(T.errors_checked, (long)N_BAD * storm.bad_lines);
  /* The subscribers that never read did fall behind, and caught up to the final state. */
  double lags = metric_value(T.d.http_port, "scened_stream_lags_total");
  CU_ASSERT_TRUE(lags > lags_before);
  /* The burst clients ran over the output limit: requests refused with LIMIT, each one
   * answered in order, and counted. */
  double held = metric_value(T.d.http_port, OUTPUT_LIMIT_HITS);
  CU_ASSERT_TRUE(held > held_before);
  CU_ASSERT_TRUE(T.limit_answers > 0);
  CU_ASSERT_EQUAL(held - held_before, (double)T.limit_answers);

  /* The daemon counts exactly the connections still open: the good clients, the subscribers,
   * the mover and the admin; then only the admin. */
  int open = open_count();
  double seen = t_wait_info(&T.admin, "connections", open, 5000);
  CU_ASSERT_EQUAL(seen, open);
  if (seen != open)
    fprintf(stderr, "  info connections %.0f, open %d\n", seen, open);
  close_all();
  seen = t_wait_info(&T.admin, "connections", 1, 5000);
  CU_ASSERT_EQUAL(seen, 1);

  /* Memory comes back: within the slack of the warmed-up baseline. */
  long after = t_rss_kib(T.d.pid);
  for (long until = t_now_ms() + 2000;
       after > base + RSS_SLACK_KIB + quarantine && t_now_ms() < until; after = t_rss_kib(T.d.pid))
    t_sleep_ms(50);
  fprintf(stderr,
          "  daemon RSS: baseline %ld KiB, peak %ld KiB, after %ld KiB; %ld malformed lines;"
          " %ld lags, %ld output holds\n",
          base, T.peak_rss, after, T.lines_bad, (long)(lags - lags_before),
          (long)(held - held_before));
  CU_ASSERT_TRUE(base > 0 && after > 0);
  CU_ASSERT_TRUE(after <= base + RSS_SLACK_KIB + quarantine);
  /* Even at its peak the storm stays bounded: output limits, not buffering without end. */
  CU_ASSERT_TRUE(T.peak_rss <= base + 256 * 1024 + quarantine);

  /* Still up and answering, on a new connection. */
  t_client c;
  CONNECT_FATAL(&c, T.d.port);
  OKD(&c, "{\"cmd\":\"ping\",\"id\":\"end\"}");
  cJSON *r = OK(&c, "{\"cmd\":\"info\"}");
  CU_ASSERT_EQUAL(t_resp_num(r, "connections"), 2);
  CU_ASSERT_EQUAL(t_resp_num(r, "subscriptions"), 0);
  cJSON_Delete(r);

  /* SIGTERM under pressure: a subscriber stuck with its output full, an idle client. */
  tconn *stuck = &T.conns[N_CONNS - 1];
  conn_drop(stuck, false);
  stuck->fd = open_socket(4096);
  CU_ASSERT_FATAL(stuck->fd >= 0);
  const char *sub = "{\"cmd\":\"subscribe\",\"world\":\"tt\"}\n";
  CU_ASSERT(send(stuck->fd, sub, strlen(sub), MSG_NOSIGNAL) == (ssize_t)strlen(sub));
  double lagging = 0;
  for (long until = t_now_ms() + 5000; lagging < 1 && t_now_ms() < until;) {
    tconn mv = {.fd = -1};
    issue_move_round(&mv);
    CU_ASSERT(t_client_send_raw(&T.admin, mv.out.data, mv.out.len) == 0);
    for (size_t i = 0; i < mv.xq.len; i++)
      cJSON_Delete(t_client_recv_json(&T.admin, 5000));
    sb_free(&mv.out);
    free(mv.xq.v);
    t_sleep_ms(50);
    lagging = metric_value(T.d.http_port, "scened_lagging_subscriptions");
  }
  CU_ASSERT_EQUAL(lagging, 1);
  long stop_at = t_now_ms();
  STOP_OK(&T.d, 15000);
  T.up = false;
  CU_ASSERT_TRUE(t_client_closed(&c, 1000));
  t_client_close(&c);
  t_client_close(&T.admin);
  conn_drop(stuck, false);
  fprintf(stderr, "  SIGTERM to exit: %ld ms; total %ld ms; daemon log %s\n", t_now_ms() - stop_at,
          t_now_ms() - t0, T.d.log_path);
}

static int suite_init(void) {
  /* A few hundred sockets here and as many in the daemon, which inherits the limit. */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < 2 * N_CONNS + 64) {
    fprintf(stderr, "daemon_torture: the open files limit (%llu) is too low\n",
            (unsigned long long)rl.rlim_cur);
    return -1;
  }
  char max_line[32];
  snprintf(max_line, sizeof max_line, "%d", MAX_LINE);
  const char *args[] = {"--output-limit", OUTPUT_LIMIT, "--max-line", max_line,
                        "--log-level",    "warn",       NULL};
  memset(&T, 0, sizeof T);
  T.admin.fd = -1;
  T.up = t_daemon_start(&T.d, args) == 0;
  return T.up ? 0 : -1;
}

static int suite_clean(void) {
  for (int i = 0; i < N_CONNS; i++) {
    conn_drop(&T.conns[i], false);
    sb_free(&T.conns[i].out);
    sb_free(&T.conns[i].in);
    sb_free(&T.conns[i].drib);
    free(T.conns[i].xq.v);
    free(T.conns[i].view);
  }
  if (T.admin.fd >= 0)
    t_client_close(&T.admin);
  if (T.up)
    t_daemon_stop(&T.d, SIGTERM, 5000);
  T.up = false;
  return 0;
}

int t_register_daemon_torture(void) {
  static const t_test tests[] = {
      {"a storm of clients, good and bad", test_torture},
  };
  return T_ADD_SUITE("daemon_torture", suite_init, suite_clean, tests);
}

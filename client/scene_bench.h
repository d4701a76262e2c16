/* scene_bench.h: what the tests of scene-bench share (its options and small helpers), so that
 * a test with a setup of its own can live in a file of its own (scene_bench_near.c,
 * scene_bench_stream.c). */
#ifndef SCENE_BENCH_H
#define SCENE_BENCH_H

#include "scn_client.h"

#include <stdbool.h>
#include <stddef.h>

#define MAX_DAEMONS 16

typedef struct opts {
  const char *host, *token, *place, *world;
  bool tls;
  const char *tls_ca, *tls_cert, *tls_key;
  int port, clients, pipeline, descendants;
  int subscribers;               /* -S; 0: the test's own default */
  char daemons[MAX_DAEMONS][96]; /* --daemons: HOST:PORT each */
  int ndaemons;
  int history; /* ticks the test's world keeps (--history) */
  long requests;
  double seconds;
  bool json, b64, loopback;
  bool insync;        /* --insync: load tests wait until their world has a follower in sync */
  double packed_step; /* --packed: stream subscribers take packed frames of this step (0: no) */
  bool ws;            /* --ws: stream subscribers over WebSocket, GET /ws on --http-port */
  int matrices;       /* asked of every connection (SCN_CLI_MATRICES_*) */
  char tests[256];
  /* near */
  int transforms;      /* --transforms: the world's size */
  double moving;       /* --moving: the fraction of them that moves every tick */
  bool naive;          /* --naive: a daemon with --interest naive as well, and the ratio */
  const char *scened;  /* --scened: the daemon to start (and stop), else the one of --port */
  int http_port;       /* --http-port: the daemon's /metrics (0: its info command) */
  int daemon_pid;      /* --daemon-pid: the daemon's CPU and memory from /proc (0: none) */
  bool follower_reads; /* --follower-reads: hello with follower_reads, MOVED not followed */
} opts;

double now_s(void);
int cmp_double(const void *a, const void *b);
/* The value at fraction p of the sorted v. */
double pct(double *v, size_t n, double p);
/* A process's user + system CPU seconds and resident bytes from /proc (NAN: unknown, or pid
 * 0). */
void proc_usage(int pid, double *cpu_s, double *rss);
_Noreturn void die(const char *fmt, const char *arg);
scn_cli *connect_or_die(const opts *o);
/* A connection to daemon i of --daemons (or the one of --host and --port). */
scn_cli *connect_daemon(const opts *o, int i);
cJSON *call_or_die(scn_cli *c, const char *line);
/* Of a frame line from start to its '\n' at nl: its matrices, and element 12 of the first. */
void frame_info(const char *start, const char *nl, bool b64, long *matrices, long *seq);

void run_near(const opts *o);
void run_stream(const opts *o);

#endif

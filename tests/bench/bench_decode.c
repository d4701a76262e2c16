/* bench-decode: what one request costs the daemon in user space, without sockets, in three
 * stages: cJSON's parse of the line alone (with the daemon's arena allocator), what
 * scn_request_parse adds to or saves on it (a flat line is read in one pass without cJSON;
 * others take the validating pass, cJSON and the indexing of the fields), and the decoding of
 * the fields into typed values plus the reply. The lines are those scene-bench sends, so the
 * figures explain the daemon benchmark. Then one matrix_b64 decoded by our decoder and by
 * nettle's base64 (with the checks the contract needs around it).
 *
 * Usage: bench-decode [--reps R]
 */
#include "b64.h"
#include "bench_util.h"
#include "codec.h"
#include "ops/json_arena.h"
#include "request.h"

#include <nettle/base64.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { LINES = 4096, ROUNDS = 50 };

typedef struct sample {
  const char *name;
  char *lines[LINES];
  size_t lens[LINES];
} sample;

/* The same shapes as scene-bench's requests, entity and one value varied per line (fmt takes
 * both, or is NULL for the fixed line). */
static void make_lines(sample *s, const char *fmt, const char *fixed) {
  for (int i = 0; i < LINES; i++) {
    char tmp[512];
    int n = fmt ? snprintf(tmp, sizeof tmp, fmt, 4294967297ull + (unsigned)i % 1000, i * 7 % 100000)
                : snprintf(tmp, sizeof tmp, "%s", fixed);
    s->lines[i] = malloc((size_t)n + 1);
    memcpy(s->lines[i], tmp, (size_t)n + 1);
    s->lens[i] = (size_t)n;
  }
}

/* scene-bench's set_b64 lines: the matrix of set_matrix as matrix_b64. */
static void make_b64_lines(sample *s) {
  s->name = "set_local_b64";
  for (int i = 0; i < LINES; i++) {
    float m[16] = {0.8f, 0.6f, 0, 0, -0.6f, 0.8f, 0, 0, 0, 0, 1, 0, 0, 2.25f, -3.125f, 1};
    m[12] = (float)(i * 7 % 100000) + 0.5f;
    char b64[SCN_B64_MATRIX_LEN + 1], tmp[512];
    scn_b64_encode_matrices(b64, (const float(*)[16])m, 1);
    b64[SCN_B64_MATRIX_LEN] = '\0';
    int n = snprintf(tmp, sizeof tmp,
                     "{\"cmd\":\"transform.set_local\",\"world\":\"bench-1234-set_b64\","
                     "\"entity\":%llu,\"matrix_b64\":\"%s\"}",
                     4294967297ull + (unsigned)i % 1000, b64);
    s->lines[i] = malloc((size_t)n + 1);
    memcpy(s->lines[i], tmp, (size_t)n + 1);
    s->lens[i] = (size_t)n;
  }
}

static volatile float sink;

/* One matrix_b64 decoded with the contract's checks: ours, and nettle's base64 with the checks
 * it lacks (its decoder skips whitespace and takes any length); ns per matrix. */
static bool nettle_matrix(const char *s, size_t len, float m[16]) {
  if (len != SCN_B64_MATRIX_LEN)
    return false;
  for (size_t i = 0; i < len; i++)
    if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')
      return false;
  struct base64_decode_ctx ctx;
  uint8_t out[BASE64_DECODE_LENGTH(SCN_B64_MATRIX_LEN)];
  size_t n = sizeof out;
  base64_decode_init(&ctx);
  if (!base64_decode_update(&ctx, &n, out, len, s) || !base64_decode_final(&ctx) || n != 64)
    return false;
  memcpy(m, out, 64);
  return true;
}

static void b64_decoders(int reps) {
  enum { N = 200000 };
  char text[SCN_B64_MATRIX_LEN + 1];
  float m[16] = {0.8f, 0.6f, 0, 0, -0.6f, 0.8f, 0, 0, 0, 0, 1, 0, 12.5f, 2.25f, -3.125f, 1};
  scn_b64_encode_matrices(text, (const float(*)[16])m, 1);
  double ours[reps], theirs[reps];
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now_ns();
    for (int i = 0; i < N; i++) {
      text[5] = "ABCD"[i & 3];
      if (scn_b64_decode_matrix(text, SCN_B64_MATRIX_LEN, m, NULL) != SCN_B64_OK)
        exit(1);
      sink += m[1];
    }
    double t1 = bench_now_ns();
    for (int i = 0; i < N; i++) {
      text[5] = "ABCD"[i & 3];
      if (!nettle_matrix(text, SCN_B64_MATRIX_LEN, m))
        exit(1);
      sink += m[1];
    }
    ours[r] = (t1 - t0) / N;
    theirs[r] = (bench_now_ns() - t1) / N;
  }
  printf("matrix_b64 decode ours_ns=%.1f nettle_ns=%.1f\n", bench_median(ours, reps),
         bench_median(theirs, reps));
}

typedef enum stage { CJSON_ONLY, CHECKED, DECODED } stage;

/* One pass over every line up to the given stage; ns per line. */
static double pass(const sample *s, stage upto, scn_buf *reply) {
  static scn_request rq;
  scn_wire_error err;
  double t0 = bench_now_ns();
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < LINES; i++) {
      cJSON *req = NULL;
      if (upto == CJSON_ONLY)
        req = cJSON_ParseWithLength(s->lines[i], s->lens[i]);
      else if (scn_request_parse(&rq, s->lines[i], s->lens[i], &err) == 0)
        req = rq.root;
      if (!req) {
        fprintf(stderr, "bench-decode: %s does not parse\n", s->name);
        exit(1);
      }
      if (upto == DECODED) {
        /* what dispatch does before it calls the core: the command, its fields, the reply */
        const char *name = NULL;
        const scn_command_info *cmd = NULL;
        scn_args a;
        scn_args_init(&a, &rq.f);
        if (scn_decode_string(rq.f.v[SCN_F_cmd], "cmd", &name, &err) < 0 ||
            !(cmd = scn_command_find(name)) || scn_fields_require(&rq.f, cmd->required, &err) < 0 ||
            scn_args_decode(&a, cmd->required | cmd->optional, &err) < 0) {
          fprintf(stderr, "bench-decode: %s does not decode: %s\n", s->name, err.message);
          exit(1);
        }
        sink = a.m[12];
        scn_buf_truncate(reply, 0);
        scn_reply_begin_raw(reply, rq.id.p, rq.id.len);
        scn_reply_end(reply);
      }
      scn_json_release(req);
      scn_json_arena_reset();
    }
  return (bench_now_ns() - t0) / ((double)ROUNDS * LINES);
}

int main(int argc, char **argv) {
  int reps = 9;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) > 0)
      reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench-decode [--reps R]\n");
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  scn_json_arena_install();
  static sample samples[] = {{.name = "set_local_matrix"},
                             {.name = "set_local_b64"},
                             {.name = "set_local_trs"},
                             {.name = "ping"}};
  make_lines(&samples[0],
             "{\"cmd\":\"transform.set_local\",\"world\":\"bench-1234-set_matrix\","
             "\"entity\":%llu,\"matrix\":[0.8,0.6,0,0,-0.6,0.8,0,0,0,0,1,0,%d.5,"
             "2.25,-3.125,1]}",
             NULL);
  make_b64_lines(&samples[1]);
  make_lines(&samples[2],
             "{\"cmd\":\"transform.set_local\",\"world\":\"bench-1234-set_local\","
             "\"entity\":%llu,\"t\":[%d.5,2.25,-3],\"r\":[0,0.38268343,0,"
             "0.92387953],\"s\":[1,2,1]}",
             NULL);
  make_lines(&samples[3], NULL, "{\"cmd\":\"ping\"}");
  scn_buf reply = {0};
  for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
    double cjson[reps], checked[reps], decoded[reps];
    for (int r = 0; r < reps; r++) {
      cjson[r] = pass(&samples[k], CJSON_ONLY, &reply);
      checked[r] = pass(&samples[k], CHECKED, &reply);
      decoded[r] = pass(&samples[k], DECODED, &reply);
    }
    double c = bench_median(cjson, reps), ch = bench_median(checked, reps),
           d = bench_median(decoded, reps);
    printf("decode %-16s bytes=%zu cjson_parse_ns=%.0f request_parse_ns=%.0f "
           "fields_reply_ns=%.0f cjson_alone_max_per_core=%.0f/s\n",
           samples[k].name, samples[k].lens[0], c, ch, d > ch ? d - ch : 0, 1e9 / c);
  }
  b64_decoders(reps);
  scn_buf_free(&reply);
  scn_json_arena_uninstall();
  return 0;
}

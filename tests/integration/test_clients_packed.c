/* Packed frames in the C client library (scn_client.h). Against a scripted daemon of the test's
 * own, which writes whatever frame lines a request asks it to: payloads made here with the
 * codec the daemon uses (proto/packed.h), so that the library's decoding is checked to the bit
 * against a reference decoder, refusals with their byte offsets, and what the library learns
 * of each subscription from requests and answers (pipelined too) and forgets when it ends. */
#include "b64.h"
#include "client_fixtures.h"
#include "client_packed_fixtures.h"
#include "daemon_fixtures.h"
#include "loopback.h"
#include "packed.h"
#include "scn_client.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the scripted daemon ------------------------------------------------------------------- */

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0)
      return;
    p += w, n -= (size_t)w;
  }
}

/* One connection at a time, each request answered in order: "subscribe" with the next sub id,
 * "fake.send" by first writing its "lines" (events), a request with "fail" with an error,
 * anything else with ok; the lines of a request's "then" follow its answer. */
static void scripted_daemon(int fd, int unused) {
  (void)unused;
  for (;;) {
    int conn = accept(fd, NULL, NULL);
    if (conn < 0)
      return;
    FILE *in = fdopen(conn, "r");
    char *line = NULL;
    size_t cap = 0;
    int next_sub = 1;
    while (in && getline(&line, &cap, in) > 0) {
      if (line[strspn(line, " \t\r\n")] == '\0')
        continue; /* blank: no answer */
      cJSON *req = cJSON_Parse(line);
      const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd"), *l;
      text out = {0}; /* one write: the lines and the answer (no wait on a delayed ack) */
      cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(req, "lines")) {
        text_addf(&out, "%s\n", l->valuestring);
      }
      if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "fail")))
        text_addf(&out,
                  "{\"ok\":false,\"error\":{\"code\":\"BAD_REQUEST\",\"message\":\"asked to\"}}\n");
      else if (cJSON_IsString(cmd) && strcmp(cmd->valuestring, "subscribe") == 0)
        text_addf(&out, "{\"ok\":true,\"sub\":%d}\n", next_sub++);
      else
        text_addf(&out, "{\"ok\":true}\n");
      cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(req, "then")) {
        text_addf(&out, "%s\n", l->valuestring);
      }
      write_all(conn, out.s, out.len);
      text_free(&out);
      cJSON_Delete(req);
    }
    free(line);
    if (in)
      fclose(in);
  }
}

static pid_t fake_pid;
static int fake_port;

static int packed_suite_init(void) {
  if (clients_suite_init() != 0)
    return -1;
  fake_pid = serve_in_child(scripted_daemon, 0, &fake_port);
  return fake_pid > 0 ? 0 : -1;
}

/* ---- a daemon's side: a subscription's baseline, and frames from it ------------------------ */

enum { MAX_ENT = 64 };

/* A packed subscription as the daemon keeps it (its baseline), a reference client's baseline
 * that decodes every payload sent (what the library must match to the bit), and the world's
 * transforms. */
typedef struct scene {
  rng r;
  double sub, tick, step;
  scn_packed_baseline daemon, reference;
  scn_packed_frame decoded;
  size_t n;
  uint64_t ids[MAX_ENT];
  float m[MAX_ENT][16];
  uint64_t removed[MAX_ENT];
  size_t nremoved;
} scene;

static void scene_grid(scene *s, double step, double x, double y, double z) {
  const double origin[3] = {x, y, z};
  s->step = step;
  CU_ASSERT_FATAL(scn_packed_baseline_set_grid(&s->daemon, step, origin));
  CU_ASSERT_FATAL(scn_packed_baseline_set_grid(&s->reference, step, origin));
}

static void scene_free(scene *s) {
  scn_packed_baseline_free(&s->daemon);
  scn_packed_baseline_free(&s->reference);
  scn_packed_frame_free(&s->decoded);
}

/* The payload of the changes ids[0..n) (with their matrices in s) and s->removed, as the
 * daemon encodes it; the reference client decodes it at once. */
static void encode(scene *s, const uint64_t *ids, const float (*m)[16], size_t n, bool full,
                   scn_buf *payload) {
  if (full) {
    scn_packed_baseline_clear(&s->daemon);
    scn_packed_baseline_clear(&s->reference);
  }
  payload->len = 0;
  scn_packed_changes c = {ids, m, NULL, n, s->removed, s->nremoved};
  CU_ASSERT_EQUAL_FATAL(scn_packed_encode(&s->daemon, &c, payload), SCN_PACKED_OK);
  CU_ASSERT_EQUAL_FATAL(scn_packed_decode(&s->reference, (const uint8_t *)payload->data,
                                          payload->len, &s->decoded, NULL),
                        SCN_PACKED_OK);
}

/* The whole world in a full frame. */
static char *full_frame(scene *s, scn_buf *payload) {
  s->nremoved = 0;
  encode(s, s->ids, (const float(*)[16])s->m, s->n, true, payload);
  return packed_frame_line(s->sub, "w", ++s->tick, true, (uint8_t *)payload->data, payload->len);
}

/* A frame of changes: some entities moved, turned, scaled or sheared, now and then one removed
 * and another added. */
static char *delta_frame(scene *s, scn_buf *payload) {
  uint64_t ids[MAX_ENT];
  float m[MAX_ENT][16];
  size_t n = 0;
  s->nremoved = 0;
  for (size_t i = 0; i < s->n; i++) {
    uint32_t what = rng_below(&s->r, 8);
    if (what == 0 && s->n > 8) { /* removed: it leaves the list */
      s->removed[s->nremoved++] = s->ids[i];
      memmove(&s->ids[i], &s->ids[i + 1], (s->n - i - 1) * sizeof s->ids[0]);
      memmove(&s->m[i], &s->m[i + 1], (s->n - i - 1) * sizeof s->m[0]);
      s->n--, i--;
      continue;
    }
    if (what == 1) /* moved a little */
      for (int k = 12; k < 15; k++)
        s->m[i][k] += rng_float(&s->r, -0.05, 0.05);
    else if (what == 2) /* anything new */
      packed_random_matrix(&s->r, s->m[i], rng_chance(&s->r, 0.2));
    else if (what > 3)
      continue;
    ids[n] = s->ids[i];
    memcpy(m[n++], s->m[i], 64);
  }
  if (s->n < MAX_ENT && rng_chance(&s->r, 0.5)) { /* a newcomer, past every id */
    s->ids[s->n] = s->ids[s->n - 1] + 1 + rng_below(&s->r, 1000);
    packed_random_matrix(&s->r, s->m[s->n], false);
    ids[n] = s->ids[s->n];
    memcpy(m[n++], s->m[s->n++], 64);
  }
  encode(s, ids, (const float(*)[16])m, n, false, payload);
  return packed_frame_line(s->sub, "w", ++s->tick, false, (uint8_t *)payload->data, payload->len);
}

static void scene_start(scene *s, uint64_t seed, size_t n) {
  memset(s, 0, sizeof *s);
  s->r.state = seed;
  s->n = n;
  for (size_t i = 0; i < n; i++) {
    s->ids[i] = (i ? s->ids[i - 1] : 0) + 1 + rng_below(&s->r, 50);
    packed_random_matrix(&s->r, s->m[i], i % 9 == 4);
  }
}

/* Asks the scripted daemon to write lines (NULL-terminated; each freed) before its answer. */
static int send_lines(scn_cli *c, char **lines) {
  cJSON *req = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(req, "lines");
  cJSON_AddStringToObject(req, "cmd", "fake.send");
  for (char **l = lines; *l; l++) {
    cJSON_AddItemToArray(list, cJSON_CreateString(*l));
    free(*l);
  }
  int rc = scn_cli_call(c, req, NULL);
  cJSON_Delete(req);
  return rc;
}

static int send_line(scn_cli *c, char *line) { return send_lines(c, (char *[]){line, NULL}); }

/* ---- what the handlers get ------------------------------------------------------------------ */

typedef struct got {
  int frames;
  double sub, tick;
  bool full, packed;
  size_t n, nremoved;
  uint64_t ids[MAX_ENT], removed[MAX_ENT];
  float m[MAX_ENT][16];
  cJSON *events;
} got;

static void on_frame(void *ud, const scn_cli_frame *f) {
  got *g = ud;
  g->frames++;
  g->sub = f->sub, g->tick = f->tick, g->full = f->full, g->packed = f->packed;
  g->n = f->n < MAX_ENT ? f->n : MAX_ENT;
  g->nremoved = f->nremoved < MAX_ENT ? f->nremoved : MAX_ENT;
  if (g->n) { /* the arrays may be NULL when empty */
    memcpy(g->ids, f->ids, g->n * sizeof *g->ids);
    memcpy(g->m, f->matrices, g->n * sizeof *g->m);
  }
  if (g->nremoved)
    memcpy(g->removed, f->removed, g->nremoved * sizeof *g->removed);
}

static void on_event(void *ud, const cJSON *ev) {
  got *g = ud;
  cJSON_AddItemToArray(g->events, cJSON_Duplicate(ev, true));
}

/* memcmp, for arrays that may be NULL when empty. */
static bool same_bytes(const void *a, const void *b, size_t n) {
  return n == 0 || memcmp(a, b, n) == 0;
}

/* The last frame the handler got is the reference's decoding of the last payload, to the bit,
 * and each matrix is within the contract's tolerance of the world's. */
static bool got_reference(const got *g, const scene *s) {
  if (g->n != s->decoded.n || g->nremoved != s->decoded.removed_n || !g->packed ||
      !same_bytes(g->ids, s->decoded.ids, g->n * sizeof *g->ids) ||
      !same_bytes(g->m, s->decoded.m, g->n * sizeof *g->m) ||
      !same_bytes(g->removed, s->decoded.removed, g->nremoved * sizeof *g->removed))
    return false;
  for (size_t i = 0; i < g->n; i++) {
    size_t j = 0;
    while (j < s->n && s->ids[j] != g->ids[i])
      j++;
    if (j == s->n || !packed_within(s->step, s->m[j], g->m[i], NULL))
      return false;
  }
  return true;
}

/* The error of a refused frame, from the next poll; "" when the poll reported none. */
static const char *poll_refusal(scn_cli *c) {
  int rc = scn_cli_poll_events(c, 0);
  return rc == SCN_CLI_EPROTO ? scn_cli_error(c) : "";
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* Frames reach the frame handler decoded exactly as the reference decodes them, across deltas,
 * removals, raw matrices and a new grid; without a frame handler the event handler gets them
 * as frames of the connection's form (json, then b64), equal to the bit; with no handler at
 * all they are still decoded, so later deltas stay right. */
static void test_packed_decoded(void) {
  uint64_t seed = packed_seed("clients_packed decoded");
  scene s;
  scene_start(&s, seed, 40);
  scene_grid(&s, 0.001, 10, -20, 5);
  got g = {.events = cJSON_CreateArray()};
  scn_buf payload = {0};
  scn_cli *c = open_cli(fake_port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  scn_cli_on_frame(c, on_frame, &g);
  CU_ASSERT_EQUAL_FATAL(
      scn_cli_subscribe_text(c, "w", "{\"packed\":{\"step\":0.001,\"origin\":[10,-20,5]}}", &s.sub),
      SCN_CLI_OK);
  CU_ASSERT_EQUAL(send_line(c, full_frame(&s, &payload)), SCN_CLI_OK);
  CU_ASSERT_EQUAL(g.frames, 1);
  CU_ASSERT_TRUE(g.full && g.sub == s.sub && g.tick == s.tick && g.n == 40);
  CU_ASSERT_TRUE(got_reference(&g, &s));
  for (int round = 0; round < 40; round++) {
    CU_ASSERT_EQUAL(send_line(c, delta_frame(&s, &payload)), SCN_CLI_OK);
    CU_ASSERT_EQUAL(g.frames, round + 2);
    CU_ASSERT_FALSE(g.full);
    CU_ASSERT_TRUE(got_reference(&g, &s));
  }
  CU_ASSERT_STRING_EQUAL(poll_refusal(c), "");

  /* a new grid from the answer on: every translation absolute again, on the new step */
  cJSON *update = cJSON_Parse("{\"packed\":{\"step\":0.25,\"origin\":[0,0,100]}}");
  CU_ASSERT_EQUAL(scn_cli_subscribe_update_fields(c, s.sub, update), SCN_CLI_OK);
  cJSON_Delete(update);
  scene_grid(&s, 0.25, 0, 0, 100);
  for (int round = 0; round < 5; round++) {
    CU_ASSERT_EQUAL(send_line(c, delta_frame(&s, &payload)), SCN_CLI_OK);
    CU_ASSERT_TRUE(got_reference(&g, &s));
  }

  /* no handler at all: decoded all the same */
  scn_cli_on_frame(c, NULL, NULL);
  CU_ASSERT_EQUAL(send_line(c, delta_frame(&s, &payload)), SCN_CLI_OK);
  scn_cli_on_frame(c, on_frame, &g);
  CU_ASSERT_EQUAL(send_line(c, delta_frame(&s, &payload)), SCN_CLI_OK);
  CU_ASSERT_TRUE(got_reference(&g, &s));

  /* the event handler: a json frame, then (after hello) a b64 one, of the decoded matrices */
  scn_cli_on_frame(c, NULL, NULL);
  scn_cli_on_event(c, on_event, &g);
  for (int form = 0; form < 2; form++) {
    if (form == 1)
      CU_ASSERT_EQUAL(scn_cli_set_matrices(c, SCN_CLI_MATRICES_B64), SCN_CLI_OK);
    int before = cJSON_GetArraySize(g.events);
    CU_ASSERT_EQUAL(send_line(c, delta_frame(&s, &payload)), SCN_CLI_OK);
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(g.events), before + 1);
    const cJSON *ev = cJSON_GetArrayItem(g.events, before);
    CU_ASSERT_TRUE(t_resp_str_is(ev, "event", "frame") && t_resp_num(ev, "sub") == s.sub &&
                   t_resp_str_is(ev, "world", "w") && cJSON_IsFalse(field(ev, "full")) &&
                   t_resp_num(ev, "tick") == s.tick);
    CU_ASSERT_PTR_NULL(field(ev, "packed"));
    const cJSON *list = field(ev, form ? "ids" : "set"), *x;
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(list), (int)s.decoded.n);
    float ms[MAX_ENT][16];
    if (form == 1)
      CU_ASSERT_EQUAL(scn_b64_decode_matrices(t_resp_str(ev, "ms"), strlen(t_resp_str(ev, "ms")),
                                              ms, s.decoded.n, NULL),
                      SCN_B64_OK);
    size_t i = 0;
    cJSON_ArrayForEach(x, list) {
      const cJSON *e = form ? x : field(x, "e");
      CU_ASSERT_TRUE(cJSON_IsNumber(e) && e->valuedouble == (double)s.decoded.ids[i]);
      if (form == 0)
        CU_ASSERT_EQUAL(scn_cli_matrix_get(field(x, "m"), ms[i]), 0);
      CU_ASSERT_EQUAL(memcmp(ms[i], s.decoded.m[i], 64), 0);
      i++;
    }
    CU_ASSERT_EQUAL(cJSON_GetArraySize(field(ev, "removed")), (int)s.decoded.removed_n);
  }

  /* unsubscribe answered: the grid is forgotten, a frame of that sub is refused as unknown */
  char line[96];
  snprintf(line, sizeof line, "{\"cmd\":\"unsubscribe\",\"sub\":%.0f}", s.sub);
  CU_ASSERT_EQUAL(scn_cli_call_line(c, line, NULL), SCN_CLI_OK);
  CU_ASSERT_EQUAL(send_line(c, delta_frame(&s, &payload)), SCN_CLI_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(poll_refusal(c), "whose step and origin this connection does"));
  scn_cli_close(c);
  cJSON_Delete(g.events);
  scn_buf_free(&payload);
  scene_free(&s);
}

/* A payload the decoder refuses is dropped and reported by the next poll, with why and its byte
 * offset, the call it came in completing; the library's baseline is emptied, so the deltas after
 * it are refused too (never decoded against a stale value) until a full frame. Text that is not
 * base64, and a "packed" that is not text, likewise. */
static void test_packed_refused(void) {
  uint64_t seed = packed_seed("clients_packed refused");
  scene s;
  scene_start(&s, seed, 12);
  scene_grid(&s, 0.01, 0, 0, 0);
  got g = {0};
  scn_buf payload = {0};
  scn_cli *c = open_cli(fake_port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  scn_cli_on_frame(c, on_frame, &g);
  CU_ASSERT_EQUAL_FATAL(scn_cli_subscribe_text(c, "w", "{\"packed\":{\"step\":0.01}}", &s.sub),
                        SCN_CLI_OK);
  CU_ASSERT_EQUAL(send_line(c, full_frame(&s, &payload)), SCN_CLI_OK);
  CU_ASSERT_TRUE(got_reference(&g, &s));

  /* cut short by its last byte: a decoder holding what the library holds names the offset the
   * library reports */
  scn_packed_baseline copy = {0};
  scn_packed_frame scratch = {0};
  size_t at = 0;
  CU_ASSERT_FATAL(scn_packed_baseline_copy(&copy, &s.reference));
  char *line = delta_frame(&s, &payload);
  free(line);
  scn_packed_status st =
      scn_packed_decode(&copy, (const uint8_t *)payload.data, payload.len - 1, &scratch, &at);
  CU_ASSERT_NOT_EQUAL(st, SCN_PACKED_OK);
  char want[160];
  snprintf(want, sizeof want, "a packed frame of subscription %.0f refused at byte %zu of %zu: %s",
           s.sub, at, payload.len - 1, scn_packed_status_text(st));
  int frames = g.frames;
  CU_ASSERT_EQUAL(send_line(c, packed_frame_line(s.sub, "w", ++s.tick, false,
                                                 (uint8_t *)payload.data, payload.len - 1)),
                  SCN_CLI_OK);
  CU_ASSERT_EQUAL(g.frames, frames);
  const char *why = poll_refusal(c);
  CU_ASSERT_STRING_EQUAL(why, want);
  if (strcmp(why, want))
    printf("  got \"%s\"\n  not \"%s\"\n", why, want);
  CU_ASSERT_EQUAL(scn_cli_poll_events(c, 0), 0); /* reported once */
  CU_ASSERT_EQUAL(scn_cli_call_line(c, "{\"cmd\":\"ping\"}", NULL), SCN_CLI_OK);

  /* the daemon moved on: a translation delta of an entity the library no longer holds */
  size_t held = 0;
  while (held + 1 < s.n && !scn_packed_baseline_find(&s.daemon, s.ids[held]))
    held++; /* one not last sent raw */
  uint64_t id = s.ids[held];
  s.m[held][12] += 1;
  s.nremoved = 0;
  encode(&s, &id, (const float(*)[16]) & s.m[held], 1, false, &payload);
  CU_ASSERT_EQUAL(send_line(c, packed_frame_line(s.sub, "w", ++s.tick, false,
                                                 (uint8_t *)payload.data, payload.len)),
                  SCN_CLI_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(poll_refusal(c), "a part left out or a delta for an entity"));
  CU_ASSERT_EQUAL(g.frames, frames);
  CU_ASSERT_EQUAL(send_line(c, full_frame(&s, &payload)), SCN_CLI_OK);
  CU_ASSERT_TRUE(g.full && got_reference(&g, &s));
  CU_ASSERT_EQUAL(send_line(c, delta_frame(&s, &payload)), SCN_CLI_OK);
  CU_ASSERT_TRUE(got_reference(&g, &s));

  /* not base64; two refusals in one call: the first is reported */
  char bad[160];
  snprintf(bad, sizeof bad,
           "{\"event\":\"frame\",\"sub\":%.0f,\"world\":\"w\",\"tick\":%.0f,"
           "\"full\":false,\"packed\":\"AAA\"}",
           s.sub, ++s.tick);
  CU_ASSERT_EQUAL(send_lines(c, (char *[]){strdup(bad), strdup(bad), NULL}), SCN_CLI_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(poll_refusal(c), "is not base64: its length is not a multiple"));
  CU_ASSERT_EQUAL(scn_cli_poll_events(c, 0), 0);
  snprintf(bad, sizeof bad,
           "{\"event\":\"frame\",\"sub\":%.0f,\"world\":\"w\",\"tick\":%.0f,"
           "\"full\":false,\"packed\":[1,2]}",
           s.sub, ++s.tick);
  CU_ASSERT_EQUAL(send_line(c, strdup(bad)), SCN_CLI_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(poll_refusal(c), "\"packed\" is not a string"));
  CU_ASSERT_EQUAL(send_line(c, full_frame(&s, &payload)), SCN_CLI_OK); /* in step again */
  CU_ASSERT_TRUE(g.full && got_reference(&g, &s));

  /* a refusal met by a poll is reported by that poll: the request is only sent, and the poll
   * reads the frame written before its answer */
  snprintf(bad, sizeof bad,
           "{\"event\":\"frame\",\"sub\":%.0f,\"world\":\"w\",\"tick\":%.0f,"
           "\"full\":true,\"packed\":\"AA==\"}",
           s.sub, ++s.tick);
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "cmd", "fake.send");
  cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "lines"), cJSON_CreateString(bad));
  CU_ASSERT_EQUAL(scn_cli_send(c, req), SCN_CLI_OK);
  CU_ASSERT_EQUAL(scn_cli_flush(c), SCN_CLI_OK);
  CU_ASSERT_EQUAL(scn_cli_poll_events(c, WAIT_MS), SCN_CLI_EPROTO);
  CU_ASSERT_PTR_NOT_NULL(strstr(scn_cli_error(c), "refused at byte 1 of 1: the payload ends"));
  cJSON *r = NULL;
  CU_ASSERT_EQUAL(scn_cli_read_response(c, &r), SCN_CLI_OK);
  CU_ASSERT_TRUE(t_resp_ok(r));
  cJSON_Delete(r);
  cJSON_Delete(req);
  scn_packed_baseline_free(&copy);
  scn_packed_frame_free(&scratch);
  scn_cli_close(c);
  scn_buf_free(&payload);
  scene_free(&s);
}

/* Any bytes as a payload: each frame is decoded (and handed over) or refused with an offset,
 * the connection goes on; random bytes, and valid payloads with bytes changed, cut or added. */
static void test_packed_any_bytes(void) {
  uint64_t seed = packed_seed("clients_packed any bytes");
  scene s;
  scene_start(&s, seed, 20);
  scene_grid(&s, 0.001, 0, 0, 0);
  got g = {0};
  scn_buf payload = {0};
  scn_cli *c = open_cli(fake_port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  scn_cli_on_frame(c, on_frame, &g);
  CU_ASSERT_EQUAL_FATAL(scn_cli_subscribe_text(c, "w", "{\"packed\":{\"step\":0.001}}", &s.sub),
                        SCN_CLI_OK);
  int decoded = 0, refused = 0;
  uint8_t bytes[4096];
  for (int i = 0; i < 400; i++) {
    char *valid = i % 2 ? full_frame(&s, &payload) : delta_frame(&s, &payload);
    free(valid);
    size_t n;
    if (i % 4 == 0) { /* random bytes */
      n = rng_below(&s.r, 64);
      for (size_t k = 0; k < n; k++)
        bytes[k] = (uint8_t)rng_next(&s.r);
    } else { /* a valid payload, changed */
      n = payload.len < sizeof bytes - 8 ? payload.len : sizeof bytes - 8;
      memcpy(bytes, payload.data, n);
      for (int k = 0, changes = 1 + (int)rng_below(&s.r, 3); k < changes && n; k++)
        bytes[rng_below(&s.r, (uint32_t)n)] ^= (uint8_t)(1 + rng_below(&s.r, 255));
      if (rng_chance(&s.r, 0.3))
        n = rng_below(&s.r, (uint32_t)n + 1);
      else if (rng_chance(&s.r, 0.2))
        bytes[n++] = (uint8_t)rng_next(&s.r);
    }
    int frames = g.frames;
    CU_ASSERT_EQUAL_FATAL(send_line(c, packed_frame_line(s.sub, "w", ++s.tick, i % 2, bytes, n)),
                          SCN_CLI_OK);
    const char *why = poll_refusal(c);
    if (*why) {
      refused++;
      CU_ASSERT_EQUAL(g.frames, frames);
      CU_ASSERT_PTR_NOT_NULL(strstr(why, "refused at byte"));
    } else {
      decoded++;
      CU_ASSERT_EQUAL(g.frames, frames + 1);
    }
  }
  printf("  %d payloads decoded, %d refused\n", decoded, refused);
  CU_ASSERT_TRUE(decoded > 0 && refused > 0);
  CU_ASSERT_EQUAL(scn_cli_call_line(c, "{\"cmd\":\"ping\"}", NULL), SCN_CLI_OK);
  scn_cli_close(c);
  scn_buf_free(&payload);
  scene_free(&s);
}

/* What the library learns comes from each answer in order, however the requests were sent:
 * pipelined subscribes (one refused), an update refused (the grid stays), and the ends of a
 * subscription by event (unsubscribed, world_destroyed, moved) each forget its grid. */
static void test_packed_learnt(void) {
  uint64_t seed = packed_seed("clients_packed learnt");
  scene s;
  scene_start(&s, seed, 6);
  got g = {0};
  scn_buf payload = {0};
  scn_cli *c = open_cli(fake_port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  scn_cli_on_frame(c, on_frame, &g);
  /* pipelined, with a blank line (no answer) and two requests in one send: the scripted daemon
   * gives sub 1 to the first subscribe and sub 2 to the third (the second is refused) */
  const char *reqs[] = {
      "{\"cmd\":\"subscribe\",\"world\":\"w\",\"packed\":{\"step\":0.5,\"origin\":[1,1,1]}}",
      "  ",
      "{\"cmd\":\"subscribe\",\"world\":\"w\",\"fail\":true,\"packed\":{\"step\":0.1}}\n"
      "{\"cmd\":\"subscribe\",\"world\":\"w\",\"packed\":{\"step\":0.002}}",
      "{\"cmd\":\"ping\"}",
  };
  for (int i = 0; i < 4; i++)
    CU_ASSERT_EQUAL(scn_cli_send_line(c, reqs[i], strlen(reqs[i])), SCN_CLI_OK);
  for (int i = 0; i < 4; i++) {
    cJSON *r = NULL;
    CU_ASSERT_EQUAL(scn_cli_read_response(c, &r), SCN_CLI_OK);
    CU_ASSERT_EQUAL(t_resp_ok(r), i != 1);
    cJSON_Delete(r);
  }
  s.sub = 2;
  scene_grid(&s, 0.002, 0, 0, 0);
  CU_ASSERT_EQUAL(send_line(c, full_frame(&s, &payload)), SCN_CLI_OK);
  CU_ASSERT_STRING_EQUAL(poll_refusal(c), "");
  CU_ASSERT_TRUE(g.sub == 2 && got_reference(&g, &s));
  /* an update the daemon refuses changes nothing */
  CU_ASSERT_EQUAL(
      scn_cli_call_line(
          c, "{\"cmd\":\"subscribe.update\",\"sub\":2,\"fail\":true,\"packed\":{\"step\":9}}",
          NULL),
      SCN_CLI_EREPLY);
  CU_ASSERT_EQUAL(send_line(c, delta_frame(&s, &payload)), SCN_CLI_OK);
  CU_ASSERT_STRING_EQUAL(poll_refusal(c), "");
  CU_ASSERT_TRUE(got_reference(&g, &s));
  s.sub = 1;
  scene_grid(&s, 0.5, 1, 1, 1);
  CU_ASSERT_EQUAL(send_line(c, full_frame(&s, &payload)), SCN_CLI_OK);
  CU_ASSERT_TRUE(g.sub == 1 && got_reference(&g, &s));

  /* the ends: after each, a frame of that sub is one of an unknown grid */
  static const char *const ends[] = {
      "{\"event\":\"unsubscribed\",\"sub\":%.0f,\"reason\":\"root_destroyed\"}",
      "{\"event\":\"world_destroyed\",\"sub\":%.0f,\"world\":\"w\"}",
      "{\"event\":\"moved\",\"sub\":%.0f,\"world\":\"w\",\"node\":\"n2\",\"addr\":\"x:1\"}",
  };
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL_FATAL(scn_cli_subscribe_text(c, "w",
                                                 "{\"packed\":{\"step\":0.5,"
                                                 "\"origin\":[1,1,1]}}",
                                                 &s.sub),
                          SCN_CLI_OK);
    CU_ASSERT_EQUAL(send_line(c, full_frame(&s, &payload)), SCN_CLI_OK);
    CU_ASSERT_TRUE(g.sub == s.sub && got_reference(&g, &s));
    char end[160];
    snprintf(end, sizeof end, ends[i], s.sub);
    CU_ASSERT_EQUAL(send_lines(c, (char *[]){strdup(end), delta_frame(&s, &payload), NULL}),
                    SCN_CLI_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(poll_refusal(c), "whose step and origin this connection"));
  }
  scn_cli_close(c);
  scn_buf_free(&payload);
  scene_free(&s);
}

/* The reference's last decoding as the daemon writes a frame of it in json or b64 form. */
static char *reference_line(const scene *s, bool full, bool b64) {
  scn_buf b = {0};
  scn_buf_adds(&b, "{\"event\":\"frame\",\"sub\":");
  scn_buf_add_double(&b, s->sub);
  scn_buf_adds(&b, ",\"world\":\"w\",\"tick\":");
  scn_buf_add_double(&b, s->tick);
  scn_buf_adds(&b, full ? ",\"full\":true" : ",\"full\":false");
  if (b64) {
    scn_buf_adds(&b, ",\"ids\":");
    scn_buf_add_id_list(&b, s->decoded.ids, s->decoded.n);
    scn_buf_adds(&b, ",\"ms\":\"");
    scn_buf_reserve(&b, SCN_B64_LEN(64 * s->decoded.n) + 1);
    scn_b64_encode_matrices(b.data + b.len, (const float(*)[16])s->decoded.m, s->decoded.n);
    b.len += SCN_B64_LEN(64 * s->decoded.n);
    scn_buf_addc(&b, '"');
  } else {
    scn_buf_adds(&b, ",\"set\":[");
    for (size_t i = 0; i < s->decoded.n; i++) {
      scn_buf_adds(&b, i ? ",{\"e\":" : "{\"e\":");
      scn_buf_add_u64(&b, s->decoded.ids[i]);
      scn_buf_adds(&b, ",\"m\":");
      scn_buf_add_matrix(&b, s->decoded.m[i]);
      scn_buf_addc(&b, '}');
    }
    scn_buf_addc(&b, ']');
  }
  scn_buf_adds(&b, ",\"removed\":");
  scn_buf_add_id_list(&b, s->decoded.removed, s->decoded.removed_n);
  scn_buf_adds(&b, "}");
  scn_buf_addc(&b, '\0');
  return b.data;
}

/* scenectl subscribe packed=... prints packed frames decoded, in the very form it prints the
 * daemon's json (or, with --matrices b64, b64) frames: after each packed frame the scripted
 * daemon writes the json (b64) frame of the reference's decoding, and the two lines printed are
 * the same. Malformed packed arguments are usage errors. */
static void test_ctl_packed_form(void) {
  uint64_t seed = packed_seed("clients_packed scenectl");
  char port[32];
  snprintf(port, sizeof port, "SCENED_PORT=%d", fake_port);
  const char *const env[] = {"SCENED_HOST=127.0.0.1", port, NULL};
  for (int b64 = 0; b64 < 2; b64++) {
    scene s;
    scene_start(&s, seed + (uint64_t)b64, 10);
    scene_grid(&s, 0.001, 1, 2, 3);
    s.sub = 1; /* the scripted daemon's first on a connection */
    scn_buf payload = {0};
    cJSON *then = cJSON_CreateArray();
    for (int i = 0; i < 4; i++) {
      char *packed = i == 0 ? full_frame(&s, &payload) : delta_frame(&s, &payload);
      char *json = reference_line(&s, i == 0, b64);
      cJSON_AddItemToArray(then, cJSON_CreateString(packed));
      cJSON_AddItemToArray(then, cJSON_CreateString(json));
      free(packed);
      free(json);
    }
    char *then_text = cJSON_PrintUnformatted(then), *then_arg = malloc(strlen(then_text) + 8);
    sprintf(then_arg, "then=%s", then_text);
    t_proc p;
    const char *args[] = {"--matrices",          "b64",    "subscribe", "w", "packed=0.001",
                          "packed.origin=1,2,3", then_arg, "--frames",  "8", NULL};
    CU_ASSERT_EQUAL(ctl_run(&p, env, NULL, 0, b64 ? args : args + 2), 0);
    int n = 0;
    bool terminated;
    cJSON *lines = json_lines(text_str(&p.out), &n, &terminated);
    CU_ASSERT_EQUAL(n, 8);
    const char *out = text_str(&p.out);
    for (int i = 0; i + 1 < n; i += 2) {
      const char *a = out, *a_end = strchr(a, '\n'), *b = a_end + 1, *b_end = strchr(b, '\n');
      CU_ASSERT_TRUE(b_end && a_end - a == b_end - b && memcmp(a, b, (size_t)(a_end - a)) == 0);
      CU_ASSERT_PTR_NULL(strstr(a, "packed"));
      out = b_end ? b_end + 1 : "";
    }
    if (n != 8 || !terminated)
      t_report_text("scenectl packed frames", text_str(&p.out));
    cJSON_Delete(lines);
    t_proc_free(&p);
    free(then_arg);
    cJSON_free(then_text);
    cJSON_Delete(then);
    scn_buf_free(&payload);
    scene_free(&s);
  }
  static const char *const bad[] = {
      "packed=abc",          "packed=[1]",     "packed.step=",    "packed.origin=1,2",
      "packed.origin=1,2,x", "packed.steps=1", "packed={\"step\""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    t_proc p;
    CU_ASSERT_EQUAL(
        ctl_run(&p, env, NULL, 0, (const char *const[]){"subscribe", "w", bad[i], NULL}), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.err), "packed"));
    t_proc_free(&p);
  }
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_clients_packed(void) {
  static const t_test tests[] = {
      {"library: packed frames decoded to the bit, to either handler", test_packed_decoded},
      {"library: a refused packed frame is reported, never decoded stale", test_packed_refused},
      {"library: any bytes as a packed payload", test_packed_any_bytes},
      {"library: packed grids learnt from answers, forgotten at the end", test_packed_learnt},
      {"scenectl: packed frames printed as json and b64 ones are", test_ctl_packed_form},
  };
  return T_ADD_SUITE("clients_packed", packed_suite_init, clients_suite_clean, tests);
}

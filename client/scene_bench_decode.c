/* The stream test's decoding of what a subscriber receives: packed payloads (over TCP in
 * base64 inside a JSON line, over WebSocket as they are) with scn_packed_decode and one
 * baseline per subscription (shared while subscribers receive the same bytes, see
 * scene_bench_stream.h), and b64 frames for the control check. Buffers grow with the frames and
 * are kept, so nothing is allocated per matrix. */
#define _GNU_SOURCE /* memmem */
#include "b64.h"
#include "scene_bench.h"
#include "scene_bench_stream.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

packed_state *packed_state_new(double step, int refs) {
  packed_state *s = calloc(1, sizeof *s);
  const double origin[3] = {0, 0, 0};
  if (!s || !scn_packed_baseline_set_grid(&s->base, step, origin)) {
    free(s);
    return NULL;
  }
  s->refs = refs;
  return s;
}

void packed_state_unref(packed_state *s) {
  while (s && --s->refs == 0) { /* and the states it alone kept */
    packed_state *next = s->next;
    scn_packed_baseline_free(&s->base);
    free(s->wire);
    free(s);
    s = next;
  }
}

void packed_run_free(packed_run *r) {
  scn_packed_frame_free(&r->frame);
  free(r->bytes);
  *r = (packed_run){0};
}

void b64_decoder_free(b64_decoder *d) {
  free(d->ids);
  free(d->m);
  *d = (b64_decoder){0};
}

/* Makes *p hold n elements of size each (grown by half again, at least). */
static void *grow(void *p, size_t *cap, size_t n, size_t size) {
  if (n <= *cap)
    return p;
  size_t want = *cap + *cap / 2 > n ? *cap + *cap / 2 : n;
  void *q = realloc(p, want * size);
  if (!q)
    die("%s", "out of memory");
  *cap = want;
  return q;
}

/* RFC 4648 base64 with padding into out (3 bytes for every 4 characters, less the padding);
 * false on anything else. */
static bool b64_bytes(const char *s, size_t n, uint8_t *out, size_t *len) {
  static int8_t value[256];
  static bool ready;
  if (!ready) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    memset(value, -1, sizeof value);
    for (int i = 0; i < 64; i++)
      value[(uint8_t)alphabet[i]] = (int8_t)i;
    ready = true;
  }
  if (n % 4)
    return false;
  if (n == 0) {
    *len = 0;
    return true;
  }
  const uint8_t *u = (const uint8_t *)s;
  size_t pad = u[n - 1] == '=' ? (u[n - 2] == '=' ? 2 : 1) : 0, o = 0;
  int bad = 0; /* the OR of every value: negative when one was not in the alphabet */
  for (size_t i = 0; i + 4 < n; i += 4, o += 3) {
    int a = value[u[i]], b = value[u[i + 1]], c = value[u[i + 2]], d = value[u[i + 3]];
    bad |= a | b | c | d;
    uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
    out[o] = (uint8_t)(v >> 16), out[o + 1] = (uint8_t)(v >> 8), out[o + 2] = (uint8_t)v;
  }
  const uint8_t *g = u + n - 4; /* the last group, where the padding is */
  int a = value[g[0]], b = value[g[1]], c = pad == 2 ? 0 : value[g[2]], d = pad ? 0 : value[g[3]];
  bad |= a | b | c | d;
  uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
  out[o++] = (uint8_t)(v >> 16);
  if (pad < 2)
    out[o++] = (uint8_t)(v >> 8);
  if (pad < 1)
    out[o++] = (uint8_t)v;
  *len = o;
  return bad >= 0;
}

/* The bytes that base64 text of len characters holds. */
static size_t b64_size(const uint8_t *s, size_t len) {
  size_t pad = len >= 2 && s[len - 1] == '=' ? (s[len - 2] == '=' ? 2 : 1) : 0;
  return len / 4 * 3 - pad;
}

/* Decodes the payload p of len bytes from state s into t (s itself, or a copy), checks its
 * matrices; its matrices, and the sequence number in *seq. */
static long decode(packed_run *r, const packed_state *s, packed_state *t, const stream_model *m,
                   bool full, const uint8_t *p, size_t len, stream_check *c, long *seq) {
  if (full)
    scn_packed_baseline_clear(&t->base);
  size_t at = 0;
  scn_packed_status st = scn_packed_decode(&t->base, p, len, &r->frame, &at);
  if (st != SCN_PACKED_OK) {
    char why[160];
    snprintf(why, sizeof why, "%s at byte %zu of %zu", scn_packed_status_text(st), at, len);
    die("a packed payload the contract does not allow: %s", why);
  }
  const scn_packed_frame *f = &r->frame;
  *seq = f->n && f->ids[0] == m->root ? lround(f->m[0][12]) : s->at_seq; /* the root's x */
  stream_check_matrices(m, *seq, f->ids, (const float(*)[16])f->m, f->n, c);
  r->decoded++;
  return (long)f->n;
}

long packed_take(packed_run *r, packed_state **state, const stream_model *m, bool full,
                 const uint8_t *wire, size_t len, bool base64, stream_check *c, long *seq,
                 size_t *payload_len) {
  packed_state *s = *state, *next = s->next;
  *payload_len = base64 ? b64_size(wire, len) : len;
  if (next && s->full == full && s->wire_len == len && memcmp(s->wire, wire, len) == 0) {
    long n = s->next_n;
    next->refs++;
    *state = next;
    *seq = next->at_seq;
    packed_state_unref(s);
    r->reused++;
    return n;
  }
  const uint8_t *p = wire;
  size_t plen = len;
  if (base64) {
    r->bytes = grow(r->bytes, &r->bytes_cap, len / 4 * 3 + 3, 1);
    if (!b64_bytes((const char *)wire, len, r->bytes, &plen))
      die("%s", "a packed frame whose payload is not base64");
    p = r->bytes;
  }
  if (s->refs == 1) { /* its subscriber's alone: decoded in place */
    packed_state_unref(s->next);
    s->next = NULL;
    long n = decode(r, s, s, m, full, p, plen, c, seq);
    s->at_seq = *seq;
    return n;
  }
  packed_state *t = calloc(1, sizeof *t); /* others are on s: decoded into a copy */
  if (!t || !scn_packed_baseline_copy(&t->base, &s->base))
    die("%s", "out of memory");
  long n = decode(r, s, t, m, full, p, plen, c, seq);
  t->at_seq = *seq;
  t->refs = 2; /* this subscriber, and s's next */
  packed_state_unref(s->next);
  s->next = t;
  s->next_n = n;
  s->full = full;
  s->wire = grow(s->wire, &s->wire_cap, len, 1);
  memcpy(s->wire, wire, len);
  s->wire_len = len;
  *state = t;
  packed_state_unref(s);
  return n;
}

long packed_take_line(packed_run *r, packed_state **state, const stream_model *m, const char *start,
                      const char *end, stream_check *c, long *seq, size_t *payload_len) {
  const char *key = memmem(start, (size_t)(end - start), "\"packed\":\"", 10);
  if (!key)
    return -1;
  const char *b = key + 10, *e = memchr(b, '"', (size_t)(end - b));
  if (!e)
    return -1;
  bool full = memmem(start, (size_t)(key - start), "\"full\":true", 11) != NULL;
  return packed_take(r, state, m, full, (const uint8_t *)b, (size_t)(e - b), true, c, seq,
                     payload_len);
}

long b64_check_line(b64_decoder *d, const stream_model *m, const char *start, const char *end,
                    stream_check *c) {
  const char *ids = memmem(start, (size_t)(end - start), "\"ids\":[", 7);
  const char *ms = ids ? memmem(ids, (size_t)(end - ids), "],\"ms\":\"", 8) : NULL;
  const char *ms_end = ms ? memchr(ms + 8, '"', (size_t)(end - ms - 8)) : NULL;
  if (!ms_end)
    return -1;
  size_t n = 0;
  for (const char *p = ids + 7; p < ms;) {
    uint64_t v = 0;
    while (p < ms && *p >= '0' && *p <= '9')
      v = v * 10 + (uint64_t)(*p++ - '0');
    d->ids = grow(d->ids, &d->cap, n + 1, sizeof *d->ids);
    d->ids[n++] = v;
    p += p < ms; /* the comma */
  }
  d->m = grow(d->m, &d->m_cap, n, sizeof *d->m);
  ms += 8;
  if (scn_b64_decode_matrices(ms, (size_t)(ms_end - ms), d->m, n, NULL) != SCN_B64_OK)
    die("%s", "a b64 frame whose \"ms\" does not hold its \"ids\" matrices");
  if (n && d->ids[0] == m->root)
    d->seq = lround(d->m[0][12]);
  stream_check_matrices(m, d->seq, d->ids, (const float(*)[16])d->m, n, c);
  return (long)n;
}

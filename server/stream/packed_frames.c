#include "stream/packed_frames.h"

#include "b64.h"
#include "net/conn.h"

#include <stdlib.h>
#include <string.h>

/* How a due subscriber's baseline is told apart: a full frame or a pure baseline by its grid
 * alone (all such hold the same), an impure one by itself. */
typedef enum { FROM_NOTHING, FROM_PURE, FROM_ITSELF } pack_from;

struct scn_pack_entry {
  pack_from from;
  const scn_pack_grid *grid;
  scn_pack *self;      /* FROM_ITSELF */
  scn_pack *work;      /* the baseline after the frame */
  scn_shared *body[2]; /* by binary */
  bool failed;
};

typedef struct scn_pack_order {
  uint64_t id;
  size_t at;
} scn_pack_order;

void scn_pack_release(scn_pack *p) {
  if (p && --p->refs == 0) {
    scn_packed_baseline_free(&p->base);
    free(p);
  }
}

static scn_pack *pack_new(const scn_pack_grid *g) {
  scn_pack *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->refs = 1;
  p->pure = true;
  scn_packed_baseline_set_grid(&p->base, g->step, g->origin);
  return p;
}

static scn_pack *pack_copy(const scn_pack *from) {
  scn_pack *p = calloc(1, sizeof *p);
  if (!p || !scn_packed_baseline_copy(&p->base, &from->base)) {
    free(p);
    return NULL;
  }
  p->refs = 1;
  p->pure = from->pure;
  return p;
}

bool scn_pack_regrid(scn_pack **p, const scn_pack_grid *g) {
  scn_pack *own = *p;
  if (!own)
    return true; /* its next frame is full, made on the grid it has then */
  const scn_packed_baseline *b = &own->base;
  if (b->step == g->step && !memcmp(b->origin, g->origin, sizeof b->origin))
    return true;
  if (own->refs > 1) {
    if (!(own = pack_copy(own)))
      return false;
    scn_pack_release(*p);
    *p = own;
  }
  scn_packed_baseline_set_grid(&own->base, g->step, g->origin);
  own->pure = false;
  return true;
}

void scn_pack_encoder_free(scn_pack_encoder *pe) {
  free(pe->order);
  free(pe->ids);
  free(pe->removed);
  free(pe->ms);
  free(pe->parts);
  free(pe->entries);
  scn_buf_free(&pe->payload);
  memset(pe, 0, sizeof *pe);
}

static bool same_grid(const scn_pack_grid *a, const scn_pack_grid *b) {
  return a->step == b->step && !memcmp(a->origin, b->origin, sizeof a->origin);
}

static int cmp_order(const void *x, const void *y) {
  uint64_t a = ((const scn_pack_order *)x)->id, b = ((const scn_pack_order *)y)->id;
  return (a > b) - (a < b);
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}

/* The frame's entries in increasing id, each taken apart once for every payload. A frame
 * already in id order (the usual case) is read where it is; another is sorted into a copy. */
static bool sort_changes(scn_pack_encoder *pe, const scn_frame *f) {
  size_t n = f->n;
  scn_packed_parts *parts = scn_array_grow(pe->parts, &pe->parts_cap, sizeof *parts, n);
  if (n && !parts)
    return false;
  pe->parts = n ? parts : pe->parts;
  bool sorted = true;
  for (size_t i = 1; i < n && sorted; i++)
    sorted = f->ids[i - 1] < f->ids[i];
  pe->sorted_ids = f->ids, pe->sorted_ms = (const float(*)[16])f->ms;
  if (!sorted) {
    size_t ms_cap = pe->ids_cap;
    uint64_t *ids = scn_array_grow(pe->ids, &pe->ids_cap, sizeof *ids, n);
    if (ids)
      pe->ids = ids;
    float(*ms)[16] = ids ? scn_array_grow(pe->ms, &ms_cap, sizeof *ms, n) : NULL;
    scn_pack_order *order = ms ? scn_array_grow(pe->order, &pe->order_cap, sizeof *order, n) : NULL;
    if (ms)
      pe->ms = ms;
    pe->ids_cap = ms_cap < pe->ids_cap ? ms_cap : pe->ids_cap; /* both hold this many */
    if (!order)
      return false;
    pe->order = order;
    for (size_t i = 0; i < n; i++)
      order[i] = (scn_pack_order){f->ids[i], i};
    qsort(order, n, sizeof *order, cmp_order);
    for (size_t i = 0; i < n; i++) {
      pe->ids[i] = order[i].id;
      memcpy(pe->ms[i], f->ms[order[i].at], sizeof pe->ms[i]);
    }
    pe->sorted_ids = pe->ids, pe->sorted_ms = (const float(*)[16])pe->ms;
  }
  for (size_t i = 0; i < n; i++)
    scn_packed_parts_of(pe->sorted_ms[i], &pe->parts[i]);
  size_t r = f->removed_n;
  uint64_t *removed = r ? scn_array_grow(pe->removed, &pe->removed_cap, sizeof *removed, r) : NULL;
  if (r && !removed)
    return false;
  if (r) {
    pe->removed = removed;
    memcpy(removed, f->removed, sizeof *removed * r);
    qsort(removed, r, sizeof *removed, cmp_u64);
  }
  return true;
}

/* The entry of the subscribers whose baselines hold what d's does. */
static scn_pack_entry *entry_of(scn_pack_encoder *pe, size_t *count, bool full,
                                const scn_pack_due *d) {
  scn_pack *p = *d->pack;
  pack_from from = full || !p ? FROM_NOTHING : p->pure ? FROM_PURE : FROM_ITSELF;
  for (size_t i = 0; i < *count; i++) {
    scn_pack_entry *e = &pe->entries[i];
    if (e->from == from && (from == FROM_ITSELF ? e->self == p : same_grid(e->grid, d->grid)))
      return e;
  }
  scn_pack_entry *entries =
      scn_array_grow(pe->entries, &pe->entries_cap, sizeof *entries, *count + 1);
  if (!entries)
    return NULL;
  pe->entries = entries;
  scn_pack_entry *e = &entries[(*count)++];
  *e = (scn_pack_entry){.from = from, .grid = d->grid, .self = from == FROM_ITSELF ? p : NULL};
  return e;
}

/* A baseline of the entry's that none but its subscribers hold, changed in place; else a copy
 * of one (the others keep theirs), or a new one for a full frame. */
static scn_pack *working_pack(scn_pack_due *due, size_t n, uint32_t entry, pack_from from,
                              const scn_pack_grid *grid) {
  if (from == FROM_NOTHING)
    return pack_new(grid);
  scn_pack *first = NULL;
  int tried = 0;
  for (size_t i = 0; i < n && tried < 8; i++) {
    scn_pack *p = *due[i].pack;
    if (due[i].entry != entry || (i && p == *due[i - 1].pack && due[i - 1].entry == entry))
      continue;
    first = first ? first : p;
    tried++;
    uint32_t holders = 0;
    for (size_t j = 0; j < n; j++)
      holders += due[j].entry == entry && *due[j].pack == p;
    if (holders == p->refs) {
      p->refs++; /* the entry's own reference */
      return p;
    }
  }
  return first ? pack_copy(first) : NULL;
}

/* A binary message's body is the payload; a line's, the frame's head, the payload in base64
 * and the line's end. */
static scn_shared *body_of(const scn_buf *head, const scn_buf *payload, bool binary) {
  scn_buf text = {0};
  scn_shared_start(&text);
  if (binary) {
    scn_buf_add(&text, payload->data, payload->len);
  } else {
    scn_buf_add(&text, head->data, head->len);
    scn_buf_adds(&text, ",\"packed\":\"");
    if (scn_buf_reserve(&text, SCN_B64_LEN(payload->len))) {
      scn_b64_encode(text.data + text.len, payload->data, payload->len);
      text.len += SCN_B64_LEN(payload->len);
    }
    scn_buf_adds(&text, "\"}\n");
  }
  return payload->failed || head->failed ? (scn_buf_free(&text), NULL) : scn_shared_finish(&text);
}

static void encode_entry(scn_pack_encoder *pe, const scn_frame *f, scn_pack_entry *e,
                         scn_pack_due *due, size_t n, uint32_t entry) {
  if (!(e->work = working_pack(due, n, entry, e->from, e->grid))) {
    e->failed = true;
    return;
  }
  scn_packed_changes c = {pe->sorted_ids, pe->sorted_ms, pe->parts,
                          f->n,           pe->removed,   f->removed_n};
  scn_buf *payload = &pe->payload;
  payload->len = 0;
  payload->failed = false;
  if (scn_packed_encode(&e->work->base, &c, payload) != SCN_PACKED_OK || payload->failed) {
    e->failed = true;
    return;
  }
  pe->payloads++;
  pe->payload_bytes += payload->len;
  for (size_t i = 0; i < n; i++) {
    bool bin = due[i].binary;
    if (due[i].entry == entry && !e->body[bin] && !(e->body[bin] = body_of(&f->head, payload, bin)))
      e->failed = true;
  }
}

void scn_pack_frames(scn_pack_encoder *pe, const scn_frame *f, bool full, scn_pack_due *due,
                     size_t n) {
  size_t entries = 0;
  bool ok = sort_changes(pe, f);
  for (size_t i = 0; ok && i < n; i++) {
    scn_pack_entry *e = entry_of(pe, &entries, full, &due[i]);
    ok = e != NULL;
    if (e)
      due[i].entry = (uint32_t)(e - pe->entries);
  }
  for (size_t k = 0; ok && k < entries; k++)
    encode_entry(pe, f, &pe->entries[k], due, n, (uint32_t)k);
  for (size_t i = 0; i < n; i++) {
    scn_pack_entry *e = ok ? &pe->entries[due[i].entry] : NULL;
    scn_pack *before = *due[i].pack;
    if (!e || e->failed) {
      due[i].body = NULL;
      *due[i].pack = NULL; /* what it holds is unknown now: its next frame is full */
    } else {
      due[i].body = scn_shared_ref(e->body[due[i].binary]);
      e->work->refs++;
      *due[i].pack = e->work;
    }
    scn_pack_release(before);
  }
  for (size_t k = 0; ok && k < entries; k++) {
    scn_pack_entry *e = &pe->entries[k];
    scn_pack_release(e->work);
    if (e->body[0])
      scn_shared_release(e->body[0]);
    if (e->body[1])
      scn_shared_release(e->body[1]);
  }
}

scn_shared *scn_pack_removal_body(const scn_world *w, uint64_t tick, scn_entity *ids, size_t n,
                                  bool binary) {
  if (n > 1)
    qsort(ids, n, sizeof *ids, cmp_u64);
  scn_buf payload = {0}, head = {0};
  uint8_t v[SCN_PACKED_VARINT_MAX];
  scn_buf_addc(&payload, 0); /* no entries */
  scn_buf_add(&payload, v, scn_packed_put_varint(v, n));
  for (size_t i = 0; i < n; i++)
    scn_buf_add(&payload, v, scn_packed_put_varint(v, ids[i] - (i ? ids[i - 1] : 0)));
  scn_frame_head(&head, w, tick, false);
  scn_shared *body = body_of(&head, &payload, binary);
  scn_buf_free(&payload);
  scn_buf_free(&head);
  return body;
}

void scn_pack_header(scn_buf *out, bool binary, uint64_t sub, uint64_t tick, bool full,
                     size_t len) {
  if (!binary) {
    scn_buf_adds(out, "{\"event\":\"frame\",\"sub\":");
    scn_buf_add_u64(out, sub);
    return;
  }
  uint8_t h[13];
  for (int i = 0; i < 4; i++)
    h[i] = (uint8_t)(sub >> (8 * i));
  for (int i = 0; i < 8; i++)
    h[4 + i] = (uint8_t)(tick >> (8 * i));
  h[12] = full;
  scn_conn_add_binary_start(out, (uint32_t)(sizeof h + len));
  scn_buf_add(out, h, sizeof h);
}

void scn_pack_stats(const scn_pack_encoder *pe, scn_metrics_sink *k, uint64_t subscriptions) {
  scn_metric(k, "packed_subscriptions", "gauge", "Subscriptions that take packed frames.",
             (double)subscriptions);
  scn_metric(k, "packed_payloads_total", "counter",
             "Packed frame payloads encoded (each shared by the subscribers in step).",
             (double)pe->payloads);
  scn_metric(k, "packed_payload_bytes_total", "counter",
             "Bytes of packed frame payloads encoded, before base64 or a WebSocket header.",
             (double)pe->payload_bytes);
}

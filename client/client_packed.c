/* Packed subscriptions of one connection: the requests that change them, matched with their
 * answers by order, and each subscription's baseline. */
#define _GNU_SOURCE /* memmem */
#include "client_packed.h"

#include "b64.h"
#include "scn_client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REQ_SUBSCRIBE, REQ_UPDATE, REQ_UNSUBSCRIBE };

static cli_packed_sub *find_sub(cli_packed *p, double sub) {
  for (size_t i = 0; i < p->nsubs; i++)
    if (p->subs[i].sub == sub)
      return &p->subs[i];
  return NULL;
}

static void drop_sub(cli_packed *p, double sub) {
  cli_packed_sub *s = find_sub(p, sub);
  if (!s)
    return;
  scn_packed_baseline_free(&s->base);
  *s = p->subs[--p->nsubs];
}

/* The grid of a "packed" member into r; false when it is not one the daemon takes (then the
 * daemon refuses the request, and it changes nothing here either). A member given twice counts
 * as the daemon counts it: the last one. */
static bool grid_of(const cJSON *packed, cli_packed_req *r) {
  const cJSON *step = NULL, *origin = NULL, *m;
  if (!cJSON_IsObject(packed))
    return false;
  cJSON_ArrayForEach(m, packed) {
    if (strcmp(m->string, "step") == 0)
      step = m;
    else if (strcmp(m->string, "origin") == 0)
      origin = m;
  }
  if (!cJSON_IsNumber(step) || !(step->valuedouble > 0) || !isfinite(step->valuedouble))
    return false;
  r->step = step->valuedouble;
  r->origin[0] = r->origin[1] = r->origin[2] = 0;
  if (!origin)
    return true;
  if (!cJSON_IsArray(origin) || cJSON_GetArraySize(origin) != 3)
    return false;
  int i = 0;
  for (const cJSON *x = origin->child; x; x = x->next, i++) {
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
      return false;
    r->origin[i] = x->valuedouble;
  }
  return true;
}

/* What a request line means here: true with r filled when it is one of the three kinds. */
static bool request_of(const char *line, size_t len, cli_packed_req *r) {
  if (!memmem(line, len, "subscribe", 9)) /* every kind names it; most lines do not */
    return false;
  cJSON *req = cJSON_ParseWithLength(line, len);
  const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");
  const cJSON *sub = cJSON_GetObjectItemCaseSensitive(req, "sub");
  const cJSON *packed = cJSON_GetObjectItemCaseSensitive(req, "packed");
  bool known = false;
  if (cJSON_IsString(cmd) && strcmp(cmd->valuestring, "subscribe") == 0) {
    r->kind = REQ_SUBSCRIBE;
    known = grid_of(packed, r);
  } else if (cJSON_IsString(cmd) && cJSON_IsNumber(sub)) {
    r->sub = sub->valuedouble;
    if (strcmp(cmd->valuestring, "subscribe.update") == 0) {
      r->kind = REQ_UPDATE;
      known = grid_of(packed, r);
    } else if (strcmp(cmd->valuestring, "unsubscribe") == 0) {
      r->kind = REQ_UNSUBSCRIBE;
      known = true;
    }
  }
  cJSON_Delete(req);
  return known;
}

/* Only spaces and tabs: the daemon answers no such line. */
static bool blank(const char *s, size_t len) {
  if (len && s[len - 1] == '\r')
    len--;
  for (size_t i = 0; i < len; i++)
    if (s[i] != ' ' && s[i] != '\t')
      return false;
  return true;
}

static bool one_request(cli_packed *p, const char *line, size_t len) {
  cli_packed_req r = {0};
  if (blank(line, len))
    return true;
  if (request_of(line, len, &r)) {
    if (p->head + p->nreqs == p->reqs_cap) {
      if (p->head > 0) {
        memmove(p->reqs, p->reqs + p->head, p->nreqs * sizeof *p->reqs);
        p->head = 0;
      } else {
        size_t cap = p->reqs_cap ? 2 * p->reqs_cap : 8;
        cli_packed_req *grown = realloc(p->reqs, cap * sizeof *grown);
        if (!grown)
          return false;
        p->reqs = grown;
        p->reqs_cap = cap;
      }
    }
    r.seq = p->sent + 1;
    p->reqs[p->head + p->nreqs++] = r;
  }
  p->sent++;
  return true;
}

bool cli_packed_request(cli_packed *p, const char *line, size_t len) {
  uint64_t sent = p->sent;
  size_t nreqs = p->nreqs;
  for (size_t start = 0;;) {
    const char *nl = memchr(line + start, '\n', len - start);
    size_t stop = nl ? (size_t)(nl - line) : len;
    if (!one_request(p, line + start, stop - start)) {
      p->sent = sent, p->nreqs = nreqs;
      return false;
    }
    if (!nl)
      return true;
    start = stop + 1;
  }
}

/* A subscription made packed on r's grid; nothing when out of memory (its frames are then
 * refused as those of an unknown grid, which names the subscription). */
static void add_sub(cli_packed *p, double sub, const cli_packed_req *r) {
  drop_sub(p, sub);
  if (p->nsubs == p->subs_cap) {
    size_t cap = p->subs_cap ? 2 * p->subs_cap : 4;
    cli_packed_sub *grown = realloc(p->subs, cap * sizeof *grown);
    if (!grown)
      return;
    p->subs = grown;
    p->subs_cap = cap;
  }
  cli_packed_sub *s = &p->subs[p->nsubs++];
  *s = (cli_packed_sub){.sub = sub};
  scn_packed_baseline_set_grid(&s->base, r->step, r->origin);
}

void cli_packed_answer(cli_packed *p, const cJSON *answer) {
  p->answered++;
  while (p->nreqs && p->reqs[p->head].seq < p->answered) /* none is left behind: a safeguard */
    p->head++, p->nreqs--;
  if (!p->nreqs || p->reqs[p->head].seq != p->answered)
    return;
  cli_packed_req r = p->reqs[p->head++];
  if (--p->nreqs == 0)
    p->head = 0;
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(answer, "ok")))
    return;
  const cJSON *sub = cJSON_GetObjectItemCaseSensitive(answer, "sub");
  cli_packed_sub *s;
  if (r.kind == REQ_SUBSCRIBE && cJSON_IsNumber(sub))
    add_sub(p, sub->valuedouble, &r);
  else if (r.kind == REQ_UPDATE && (s = find_sub(p, r.sub)))
    scn_packed_baseline_set_grid(&s->base, r.step, r.origin); /* from the next frame on */
  else if (r.kind == REQ_UNSUBSCRIBE)
    drop_sub(p, r.sub);
}

void cli_packed_event(cli_packed *p, const cJSON *event) {
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(event, "event");
  const cJSON *sub = cJSON_GetObjectItemCaseSensitive(event, "sub");
  if (p->nsubs && cJSON_IsString(kind) && cJSON_IsNumber(sub) &&
      (!strcmp(kind->valuestring, "unsubscribed") ||
       !strcmp(kind->valuestring, "world_destroyed") || !strcmp(kind->valuestring, "moved")))
    drop_sub(p, sub->valuedouble);
}

void cli_packed_lost(cli_packed *p, double sub) {
  cli_packed_sub *s = find_sub(p, sub);
  if (s)
    scn_packed_baseline_clear(&s->base);
}

void cli_packed_reset(cli_packed *p) {
  while (p->nsubs)
    drop_sub(p, p->subs[0].sub);
  p->head = p->nreqs = 0;
  p->sent = p->answered = 0;
}

void cli_packed_free(cli_packed *p) {
  cli_packed_reset(p);
  free(p->subs);
  free(p->reqs);
  free(p->bytes);
  scn_packed_frame_free(&p->frame);
  *p = (cli_packed){0};
}

/* Why the payload text of sub is refused, into err: 0 when it is not. */
static int decode(cli_packed *p, cli_packed_sub *s, bool full, const char *b64, size_t len,
                  char *err, size_t errlen) {
  size_t need = SCN_B64_DECODED_MAX(len) + 1;
  if (need > p->bytes_cap) {
    uint8_t *grown = realloc(p->bytes, need);
    if (!grown) {
      snprintf(err, errlen, "out of memory");
      return SCN_CLI_ENOMEM;
    }
    p->bytes = grown;
    p->bytes_cap = need;
  }
  size_t n, at = 0;
  scn_b64_status bst = scn_b64_decode_bytes(b64, len, p->bytes, &n, &at);
  if (bst != SCN_B64_OK) {
    snprintf(err, errlen, "a packed frame of subscription %.0f whose \"packed\" is not base64: %s",
             s->sub,
             bst == SCN_B64_LENGTH    ? "its length is not a multiple of 4"
             : bst == SCN_B64_CHAR    ? "a character outside the alphabet"
             : bst == SCN_B64_PADDING ? "padding in the wrong place"
                                      : "bits after the last byte");
    return SCN_CLI_EPROTO;
  }
  if (full)
    scn_packed_baseline_clear(&s->base);
  scn_packed_status st = scn_packed_decode(&s->base, p->bytes, n, &p->frame, &at);
  if (st == SCN_PACKED_NOMEM) {
    snprintf(err, errlen, "out of memory");
    return SCN_CLI_ENOMEM;
  }
  if (st != SCN_PACKED_OK) {
    snprintf(err, errlen, "a packed frame of subscription %.0f refused at byte %zu of %zu: %s",
             s->sub, at, n, scn_packed_status_text(st));
    return SCN_CLI_EPROTO;
  }
  return 0;
}

int cli_packed_decode(cli_packed *p, double sub, bool full, const char *b64, size_t len, char *err,
                      size_t errlen) {
  cli_packed_sub *s = find_sub(p, sub);
  if (!s) {
    snprintf(err, errlen,
             "a packed frame of subscription %.0f, whose step and origin this connection does "
             "not know (subscribe with \"packed\" through this library)",
             sub);
    return SCN_CLI_EPROTO;
  }
  int rc = decode(p, s, full, b64, len, err, errlen);
  /* A frame not taken leaves the daemon's baseline ahead of this one: kept, later deltas
   * would decode to wrong values; emptied, they are refused until each entity travels
   * absolute again (a full frame). */
  if (rc != 0)
    scn_packed_baseline_clear(&s->base);
  return rc;
}

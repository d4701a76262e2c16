/* The access list: parsing (a pure function over the file's bytes, fuzzed), loading, and
 * matching tokens and worlds against its rules. */
#include "ops/acl.h"

#include "scn_core.h"
#include "wire.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_error(char *err, size_t errlen, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int parse_error(char *err, size_t errlen, unsigned line, const char *fmt, ...) {
  int n = snprintf(err, errlen, "line %u: ", line);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < errlen)
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

void scn_acl_free(scn_acl *a) {
  if (!a)
    return;
  for (size_t i = 0; i < a->n; i++) {
    for (size_t k = 0; k < a->rules[i].nprefixes; k++)
      free(a->rules[i].prefixes[k]);
    free(a->rules[i].prefixes);
  }
  free(a->rules);
  free(a);
}

typedef struct span {
  const char *p;
  size_t len;
} span;

/* The next item of a comma list (empty items included); false at its end. */
static bool next_item(span *list, span *item) {
  if (!list->p)
    return false;
  const char *comma = memchr(list->p, ',', list->len);
  item->p = list->p;
  item->len = comma ? (size_t)(comma - list->p) : list->len;
  if (comma) {
    list->len -= item->len + 1;
    list->p = comma + 1;
  } else {
    list->p = NULL;
  }
  return true;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

static bool parse_hash(span f, uint8_t out[SCN_SHA256_SIZE]) {
  if (f.len != 2 * SCN_SHA256_SIZE)
    return false;
  for (size_t i = 0; i < SCN_SHA256_SIZE; i++) {
    int hi = hex_value(f.p[2 * i]), lo = hex_value(f.p[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

/* A field for a message: at most 40 bytes, printable ASCII only. */
static const char *shown(span f, char *buf, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < f.len && n + 4 < cap && i < 40; i++)
    buf[n++] = f.p[i] >= 0x20 && f.p[i] < 0x7f ? f.p[i] : '?';
  if (f.len > 40 && n + 4 < cap)
    memcpy(buf + n, "...", 3), n += 3;
  buf[n] = '\0';
  return buf;
}

static int parse_rights(span f, unsigned line, scn_acl_rule *r, char *err, size_t errlen) {
  span item;
  char show[48];
  while (next_item(&f, &item)) {
    unsigned bit = scn_right_find(item.p, item.len);
    if (!bit)
      return parse_error(err, errlen, line,
                         "unknown right \"%s\" (expected read, write, admin or cluster)",
                         shown(item, show, sizeof show));
    r->rights |= bit;
  }
  return 0;
}

static int parse_prefixes(span f, unsigned line, scn_acl_rule *r, char *err, size_t errlen) {
  span item;
  char show[48];
  while (next_item(&f, &item)) {
    if (item.len == 1 && item.p[0] == '*') {
      r->all_worlds = true;
      continue;
    }
    if (!scn_world_name_valid(item.p, item.len))
      return parse_error(err, errlen, line,
                         "bad prefix \"%s\" (expected * or 1 to 64 characters from A-Z a-z 0-9 "
                         "_ . -)",
                         shown(item, show, sizeof show));
    char **grown = realloc(r->prefixes, (r->nprefixes + 1) * sizeof *grown);
    char *copy = grown ? malloc(item.len + 1) : NULL;
    if (grown)
      r->prefixes = grown;
    if (!copy)
      return parse_error(err, errlen, line, "out of memory");
    memcpy(copy, item.p, item.len);
    copy[item.len] = '\0';
    r->prefixes[r->nprefixes++] = copy;
  }
  return 0;
}

/* One line without its end: 0 and *r filled (rights 0: a blank or comment line), or -1. */
static int parse_line(const char *p, size_t len, unsigned line, scn_acl_rule *r, char *err,
                      size_t errlen) {
  const char *hash = memchr(p, '#', len);
  if (hash)
    len = (size_t)(hash - p);
  span f[4];
  int nf = 0;
  for (size_t i = 0; i < len;) {
    if (p[i] == ' ' || p[i] == '\t' || p[i] == '\r') {
      i++;
      continue;
    }
    size_t start = i;
    while (i < len && p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
      i++;
    if (nf == 3)
      return parse_error(err, errlen, line,
                         "expected three fields, TOKEN_SHA256 RIGHTS PREFIXES (no spaces inside "
                         "the comma lists)");
    f[nf++] = (span){p + start, i - start};
  }
  if (nf == 0)
    return 0;
  if (nf != 3)
    return parse_error(err, errlen, line, "expected three fields, TOKEN_SHA256 RIGHTS PREFIXES");
  if (!parse_hash(f[0], r->token_sha256))
    return parse_error(err, errlen, line,
                       "the first field must be the 64 hex digits of a token's SHA-256 (the file "
                       "holds hashes of tokens, never tokens)");
  r->line = line;
  if (parse_rights(f[1], line, r, err, errlen) < 0 ||
      parse_prefixes(f[2], line, r, err, errlen) < 0)
    return -1;
  return 0;
}

int scn_acl_parse(const char *text, size_t len, scn_acl **out, char *err, size_t errlen) {
  *out = NULL;
  scn_acl *a = calloc(1, sizeof *a);
  if (!a) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  size_t cap = 0;
  unsigned line = 0;
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
    line++;
    scn_acl_rule r = {0};
    int rc = parse_line(text + at, n, line, &r, err, errlen);
    at += n + (nl ? 1 : 0);
    if (rc == 0 && r.line == 0)
      continue; /* blank or comment */
    for (size_t i = 0; rc == 0 && i < a->n; i++)
      if (memcmp(a->rules[i].token_sha256, r.token_sha256, SCN_SHA256_SIZE) == 0)
        rc = parse_error(err, errlen, line, "the same token hash as line %u", a->rules[i].line);
    scn_acl_rule *rules = rc == 0 ? scn_array_grow(a->rules, &cap, sizeof *rules, a->n + 1) : NULL;
    if (rc == 0 && !rules)
      rc = parse_error(err, errlen, line, "out of memory");
    if (rc != 0) {
      for (size_t k = 0; k < r.nprefixes; k++)
        free(r.prefixes[k]);
      free(r.prefixes);
      scn_acl_free(a);
      return -1;
    }
    a->rules = rules;
    a->rules[a->n++] = r;
  }
  *out = a;
  return 0;
}

int scn_acl_load(const char *path, scn_acl **out, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  char *text = NULL;
  size_t len = 0, cap = 0;
  bool ok = true;
  for (;;) {
    char *grown = scn_array_grow(text, &cap, 1, len + 65536);
    if (!grown) {
      ok = false;
      break;
    }
    text = grown;
    size_t n = fread(text + len, 1, cap - len, f);
    len += n;
    if (n == 0)
      break;
  }
  ok = ok && !ferror(f);
  fclose(f);
  char why[400];
  int rc = -1;
  if (!ok)
    snprintf(why, sizeof why, "read failed");
  else
    rc = scn_acl_parse(text, len, out, why, sizeof why);
  free(text);
  if (rc != 0)
    snprintf(err, errlen, "%s: %s", path, why);
  return rc;
}

void scn_acl_hash(const char *token, size_t len, uint8_t out[SCN_SHA256_SIZE]) {
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, len, (const uint8_t *)token);
  sha256_digest(&ctx, SCN_SHA256_SIZE, out);
}

const scn_acl_rule *scn_acl_match(const scn_acl *a, const uint8_t sha256[SCN_SHA256_SIZE]) {
  const scn_acl_rule *found = NULL;
  for (size_t i = 0; i < a->n; i++) {
    uint8_t diff = 0;
    for (size_t k = 0; k < SCN_SHA256_SIZE; k++)
      diff |= (uint8_t)(a->rules[i].token_sha256[k] ^ sha256[k]);
    if (diff == 0)
      found = &a->rules[i];
  }
  return found;
}

const scn_acl_rule *scn_acl_rule_of(const scn_acl *a, scn_identity *who) {
  if (!who->known)
    return NULL;
  if (who->generation != a->generation) {
    who->rule = scn_acl_match(a, who->token_sha256);
    who->generation = a->generation;
  }
  return who->rule;
}

bool scn_acl_allows_world(const scn_acl_rule *r, const char *world) {
  if (r->all_worlds)
    return true;
  for (size_t i = 0; i < r->nprefixes; i++)
    if (strncmp(world, r->prefixes[i], strlen(r->prefixes[i])) == 0)
      return true;
  return false;
}

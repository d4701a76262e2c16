#include "wire.h"

#include "edit_distance.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const char *scn_wire_code_name(scn_wire_code code) {
  switch (code) {
#define SCN_WIRE_NAME(name)                                                                        \
  case SCN_W_##name:                                                                               \
    return #name;
    SCN_WIRE_ERRORS(SCN_WIRE_NAME)
#undef SCN_WIRE_NAME
  }
  return "INTERNAL";
}

static const char *const field_names[] = {
#define SCN_FIELD_NAME(name) #name,
    SCN_FIELDS(SCN_FIELD_NAME)
#undef SCN_FIELD_NAME
};

const char *scn_field_name(scn_field f) { return f < SCN_FIELD_COUNT ? field_names[f] : "?"; }

void scn_fields_text(scn_fieldset set, char *out, unsigned cap) {
  unsigned n = 0;
  out[0] = '\0';
  for (unsigned f = 0; f < SCN_FIELD_COUNT && n < cap; f++)
    if (set & ((scn_fieldset)1 << f))
      n += (unsigned)snprintf(out + n, cap - n, "%s%s", n ? "," : "", field_names[f]);
}

scn_field scn_field_suggest(const char *key, scn_fieldset set) {
  set &= ~(SCN_F(cmd) | SCN_F(id));
  scn_field best = SCN_FIELD_COUNT;
  unsigned best_d = 3; /* the contract's "one or two edits" */
  if (!*key)
    return best; /* nothing typed is no misspelling */
  for (unsigned f = 0; f < SCN_FIELD_COUNT; f++) {
    if (!(set & ((scn_fieldset)1 << f)))
      continue;
    unsigned d = scn_edit_distance(key, field_names[f], best_d);
    /* among equals, one that starts as the key does ("rot": "r", not "t") */
    bool better = d < best_d || (d == best_d && best != SCN_FIELD_COUNT &&
                                 field_names[f][0] == key[0] && field_names[best][0] != key[0]);
    if (d <= 2 && better) {
      best = (scn_field)f;
      best_d = d;
    }
  }
  return best;
}

void scn_unknown_field_text(const char *key, scn_fieldset taken, char *out, unsigned cap) {
  /* At most 64 bytes of the key, not ending inside a UTF-8 character. */
  size_t n = strnlen(key, 65);
  if (n > 64)
    for (n = 64; n > 0 && ((unsigned char)key[n] & 0xC0) == 0x80; n--)
      ;
  scn_field near = scn_field_suggest(key, taken);
  if (near == SCN_FIELD_COUNT)
    snprintf(out, cap, "unknown field \"%.*s\"", (int)n, key);
  else
    snprintf(out, cap, "unknown field \"%.*s\" (did you mean \"%s\"?)", (int)n, key,
             field_names[near]);
}

static const char *const right_names[] = {
#define SCN_RIGHT_NAME(name) #name,
    SCN_RIGHTS(SCN_RIGHT_NAME)
#undef SCN_RIGHT_NAME
};

const char *scn_right_name(scn_right_bit r) { return r < SCN_RIGHT_COUNT ? right_names[r] : "?"; }

unsigned scn_right_find(const char *name, unsigned long len) {
  for (unsigned r = 0; r < SCN_RIGHT_COUNT; r++)
    if (strlen(right_names[r]) == len && memcmp(right_names[r], name, len) == 0)
      return 1u << r;
  return 0;
}

const scn_command_info scn_commands[] = {
#define SCN_CMD_INFO(name, ident, flags, right, limit, req, opt, help)                             \
  {name, SCN_C_##ident, flags, SCN_RIGHT(right), SCN_LIMIT_##limit, req, opt, help},
    SCN_COMMANDS(SCN_CMD_INFO)
#undef SCN_CMD_INFO
};

_Static_assert(sizeof scn_commands / sizeof scn_commands[0] == SCN_COMMAND_COUNT,
               "an entry for every command, indexed by its id");
const unsigned scn_command_count = sizeof scn_commands / sizeof scn_commands[0];

/* Every request looks up its command and each of its keys, so names are found by hash: tables
 * with linear probing, filled on first use (the lists are fixed at compile time). */
#define CMD_SLOTS 64
#define FIELD_SLOTS 64
_Static_assert(SCN_COMMAND_COUNT < CMD_SLOTS, "room for every command, and an empty slot");

static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

const scn_command_info *scn_command_find(const char *name) {
  static unsigned char slots[CMD_SLOTS]; /* command index + 1, 0 = empty */
  static bool filled;
  if (!filled) {
    for (unsigned i = 0; i < scn_command_count; i++) {
      uint32_t h = name_hash(scn_commands[i].name) % CMD_SLOTS;
      while (slots[h])
        h = (h + 1) % CMD_SLOTS;
      slots[h] = (unsigned char)(i + 1);
    }
    filled = true;
  }
  for (uint32_t h = name_hash(name) % CMD_SLOTS; slots[h]; h = (h + 1) % CMD_SLOTS)
    if (strcmp(scn_commands[slots[h] - 1].name, name) == 0)
      return &scn_commands[slots[h] - 1];
  return NULL;
}

/* Keys are short: the first two bytes and the length pick a slot (the fill checks that no two
 * fields share one), and one comparison confirms it, with no call into libc. */
static unsigned key_slot(unsigned a, unsigned b, size_t len) {
  return (a * 7 + b * 3 + (unsigned)len * 13) % FIELD_SLOTS;
}

scn_field scn_field_find(const char *key) {
  static unsigned char slots[FIELD_SLOTS]; /* field + 1, 0 = empty */
  static bool filled, probing;
  if (!filled) {
    for (unsigned f = 0; f < SCN_FIELD_COUNT; f++) {
      const char *n = field_names[f];
      unsigned h = key_slot((unsigned char)n[0], (unsigned char)n[1], strlen(n));
      probing |= slots[h] != 0;
      while (slots[h])
        h = (h + 1) % FIELD_SLOTS;
      slots[h] = (unsigned char)(f + 1);
    }
    filled = true;
  }
  size_t len = 0;
  while (len <= 16 && key[len])
    len++;
  if (len == 0 || len > 16)
    return SCN_FIELD_COUNT;
  for (unsigned h = key_slot((unsigned char)key[0], (unsigned char)key[1], len); slots[h];
       h = (h + 1) % FIELD_SLOTS) {
    const char *name = field_names[slots[h] - 1];
    size_t i = 0;
    while (i < len && name[i] == key[i])
      i++;
    if (i == len && name[i] == '\0')
      return (scn_field)(slots[h] - 1);
    if (!probing)
      break;
  }
  return SCN_FIELD_COUNT;
}

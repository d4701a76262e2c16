#include "wire.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

const char *scn_wire_code_name(scn_wire_code code) {
  switch (code) {
#define SCN_WIRE_NAME(name)                                                                    \
  case SCN_W_##name:                                                                           \
    return #name;
    SCN_WIRE_ERRORS(SCN_WIRE_NAME)
#undef SCN_WIRE_NAME
  }
  return "INTERNAL";
}

const scn_command_info scn_commands[] = {
#define SCN_CMD_INFO(name, ident, flags, req, opt, help) {name, flags, req, opt, help},
    SCN_COMMANDS(SCN_CMD_INFO)
#undef SCN_CMD_INFO
};

const unsigned scn_command_count = sizeof scn_commands / sizeof scn_commands[0];

/* Every request looks its command up, so names are found by hash: a table of 64 slots with
 * linear probing, filled on first use (the command list is fixed at compile time). */
#define CMD_SLOTS 64

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

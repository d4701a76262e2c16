#include "wire.h"

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

const scn_command_info *scn_command_find(const char *name) {
  for (unsigned i = 0; i < scn_command_count; i++)
    if (strcmp(scn_commands[i].name, name) == 0)
      return &scn_commands[i];
  return NULL;
}

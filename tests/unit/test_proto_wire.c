/* Unit tests of the wire contract's tables: every command with its fields and flags, and the
 * error codes. */
#include "framing.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>

#include <string.h>

/* ---- wire ------------------------------------------------------------------------------------ */

static void test_wire_commands(void) {
  static const char *names[] = {"ping",
                                "hello",
                                "world.create",
                                "world.destroy",
                                "world.list",
                                "entity.create",
                                "entity.destroy",
                                "transform.create",
                                "transform.destroy",
                                "transform.link",
                                "transform.unlink",
                                "transform.set_local",
                                "transform.set_world",
                                "transform.get",
                                "transform.children",
                                "transform.rename",
                                "transform.find",
                                "transform.relative",
                                "batch",
                                "subscribe",
                                "unsubscribe",
                                "info",
                                "save"};
  const size_t n = sizeof names / sizeof *names;
  CU_ASSERT_TRUE(scn_command_count >= n);
  for (size_t i = 0; i < n; i++) {
    const scn_command_info *c = scn_command_find(names[i]);
    CU_ASSERT_PTR_NOT_NULL(c);
    if (!c)
      continue;
    CU_ASSERT_STRING_EQUAL(c->name, names[i]);
    CU_ASSERT_TRUE(c >= scn_commands && c < scn_commands + scn_command_count);
    bool open = strcmp(names[i], "ping") == 0 || strcmp(names[i], "hello") == 0;
    CU_ASSERT_EQUAL((c->flags & SCN_CMD_OPEN) != 0, open);
    bool in_batch = strncmp(names[i], "transform.", 10) == 0;
    CU_ASSERT_EQUAL((c->flags & SCN_CMD_IN_BATCH) != 0, in_batch);
    bool reads = strcmp(names[i], "ping") == 0 || strcmp(names[i], "hello") == 0 ||
                 strcmp(names[i], "world.list") == 0 || strcmp(names[i], "transform.get") == 0 ||
                 strcmp(names[i], "transform.children") == 0 ||
                 strcmp(names[i], "transform.find") == 0 ||
                 strcmp(names[i], "transform.relative") == 0 ||
                 strcmp(names[i], "subscribe") == 0 || strcmp(names[i], "unsubscribe") == 0 ||
                 strcmp(names[i], "info") == 0 || strcmp(names[i], "save") == 0;
    CU_ASSERT_EQUAL((c->flags & SCN_CMD_MUTATES) != 0, !reads);
    /* Pure reads (refused after running when their response is too big) change no state at
     * all, not even the connection's: not hello, subscribe, unsubscribe or save. */
    bool pure = reads && strcmp(names[i], "hello") != 0 && strcmp(names[i], "subscribe") != 0 &&
                strcmp(names[i], "unsubscribe") != 0 && strcmp(names[i], "save") != 0;
    CU_ASSERT_EQUAL((c->flags & SCN_CMD_READ) != 0, pure);
    CU_ASSERT_PTR_NOT_NULL(c->help);
    CU_ASSERT_EQUAL(c->required & c->optional, 0);
  }
  /* Every entry is found under its own name, and names are unique. */
  for (unsigned i = 0; i < scn_command_count; i++) {
    CU_ASSERT_PTR_EQUAL(scn_command_find(scn_commands[i].name), &scn_commands[i]);
    CU_ASSERT_TRUE(strlen(scn_commands[i].help) > 0);
  }
  /* Required fields as the contract lists them. */
  static const struct {
    const char *cmd, *required;
  } req[] = {{"transform.link", "world,entity,parent"},
             {"transform.relative", "world,entity,to"},
             {"transform.set_local", "world,entity"},
             {"transform.rename", "world,entity,name"},
             {"batch", "world,ops"},
             {"subscribe", "world"},
             {"entity.destroy", ""}, /* one of "entity" and "entities": its handler checks */
             {"ping", ""}};
  for (size_t i = 0; i < sizeof req / sizeof *req; i++) {
    char text[256];
    scn_fields_text(scn_command_find(req[i].cmd)->required, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, req[i].required);
  }
  /* Optional fields of the commands that end a match. */
  static const struct {
    const char *cmd, *optional;
  } opt[] = {{"entity.destroy", "entity,entities"}, {"world.destroy", "entities"}};
  for (size_t i = 0; i < sizeof opt / sizeof *opt; i++) {
    char text[256];
    scn_fields_text(scn_command_find(opt[i].cmd)->optional, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, opt[i].optional);
  }
  /* Every command that names an existing world takes it. */
  for (unsigned i = 0; i < scn_command_count; i++) {
    const scn_command_info *c = &scn_commands[i];
    CU_ASSERT_EQUAL((unsigned)c->id, i);
    if (c->flags & SCN_CMD_WORLD)
      CU_ASSERT_TRUE(c->required & SCN_F(world));
  }
  /* Field names and their lookup. */
  for (unsigned f = 0; f < SCN_FIELD_COUNT; f++)
    CU_ASSERT_EQUAL(scn_field_find(scn_field_name((scn_field)f)), f);
  CU_ASSERT_EQUAL(scn_field_find("Entity"), SCN_FIELD_COUNT);
  CU_ASSERT_EQUAL(scn_field_find(""), SCN_FIELD_COUNT);
  CU_ASSERT_EQUAL(scn_field_find("worlds"), SCN_FIELD_COUNT);
  static const char *unknown[] = {"",           "PING",  "ping ", " ping", "transform",
                                  "transform.", "world", "pin",   "pingg", "transform.get\n"};
  for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++)
    CU_ASSERT_PTR_NULL(scn_command_find(unknown[i]));
}

static void test_wire_codes(void) {
  static const struct {
    scn_wire_code code;
    const char *name;
  } codes[] = {{SCN_W_BAD_JSON, "BAD_JSON"},
               {SCN_W_BAD_REQUEST, "BAD_REQUEST"},
               {SCN_W_UNKNOWN_COMMAND, "UNKNOWN_COMMAND"},
               {SCN_W_NOT_FOUND, "NOT_FOUND"},
               {SCN_W_ALREADY_EXISTS, "ALREADY_EXISTS"},
               {SCN_W_CYCLE, "CYCLE"},
               {SCN_W_LIMIT, "LIMIT"},
               {SCN_W_UNAUTHORIZED, "UNAUTHORIZED"},
               {SCN_W_INTERNAL, "INTERNAL"}};
  for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
    CU_ASSERT_STRING_EQUAL(scn_wire_code_name(codes[i].code), codes[i].name);
  CU_ASSERT_EQUAL(SCN_PROTOCOL, 1);
}

int t_register_proto_wire(void) {
  static const t_test tests[] = {
      {"wire: command table", test_wire_commands},
      {"wire: error codes", test_wire_codes},
  };
  return T_ADD_SUITE("proto_wire", NULL, NULL, tests);
}

/* Integration test of strict request fields against the real daemon: for every command of the
 * table, a member it does not take (unknown, misspelt, or a field of another command) is
 * BAD_REQUEST naming it, with the field meant when one is close, and changes nothing; the ops
 * of a batch are judged by their own commands; "cmd" and "id" are always taken. */
#include "command_fixtures.h"
#include "daemon_fixtures.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W "fld"

/* Sends {"cmd":cmd,"id":id,<members>} and asserts BAD_REQUEST with exactly message, id echoed. */
static void refused_at(int at, t_client *c, const char *message, const char *cmd,
                       const char *members) {
  static int next_id = 1;
  int id = next_id++;
  cJSON *r =
      t_client_call(c, "{\"cmd\":\"%s\",\"id\":%d%s%s}", cmd, id, members[0] ? "," : "", members);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
  bool good = r && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ok")) &&
              strcmp(t_resp_code(r), "BAD_REQUEST") == 0 &&
              strcmp(t_resp_str(e, "message"), message) == 0 && t_resp_num(r, "id") == id;
  if (!t_check_at(__FILE__, at, good, "BAD_REQUEST with the message and the id", r))
    fprintf(stderr, "  request: {\"cmd\":\"%s\",%s}\n  expected message: %s\n", cmd, members,
            message);
  cJSON_Delete(r);
}

#define REFUSED(c, message, cmd, members) refused_at(__LINE__, (c), (message), (cmd), (members))

/* The world's transforms: a with b under it (rotated a quarter turn about y), e with its
 * entity's only transform, and a subscription-free connection. */
typedef struct scene {
  uint64_t a, b, e;
} scene;

/* A request for each command of the table that is valid apart from what a test adds (or fails
 * for a reason of its own that the refusal must come before: no subscription 999999, no
 * cluster, no --data). */
static void valid_members(const scene *s, const char *cmd, char *out, size_t cap) {
  static const struct {
    const char *cmd, *members; /* {A}, {B}, {E}: the entities a, b and e */
  } rows[] = {
      {"ping", ""},
      {"hello", "\"matrices\":\"json\""},
      {"world.create", "\"world\":\"fresh\""},
      {"world.destroy", "\"world\":\"" W "\""},
      {"world.list", ""},
      {"entity.create", "\"count\":2"},
      {"entity.destroy", "\"entity\":{E}"},
      {"transform.create", "\"world\":\"" W "\",\"name\":\"new\""},
      {"transform.destroy", "\"world\":\"" W "\",\"entity\":{B}"},
      {"transform.link", "\"world\":\"" W "\",\"entity\":{E},\"parent\":{A}"},
      {"transform.unlink", "\"world\":\"" W "\",\"entity\":{B}"},
      {"transform.set_local", "\"world\":\"" W "\",\"entity\":{B},\"t\":[5,5,5]"},
      {"transform.set_world", "\"world\":\"" W "\",\"entity\":{B},\"t\":[5,5,5]"},
      {"transform.get", "\"world\":\"" W "\",\"entity\":{A}"},
      {"transform.children", "\"world\":\"" W "\",\"entity\":{A}"},
      {"transform.rename", "\"world\":\"" W "\",\"entity\":{A},\"name\":\"renamed\""},
      {"transform.find", "\"world\":\"" W "\",\"path\":\"a/b\""},
      {"transform.relative", "\"world\":\"" W "\",\"entity\":{B},\"to\":{A}"},
      {"batch", "\"world\":\"" W "\",\"ops\":[{\"cmd\":\"transform.destroy\",\"entity\":{B}}]"},
      {"subscribe", "\"world\":\"" W "\""},
      {"subscribe.update", "\"sub\":999999,\"near\":null"},
      {"unsubscribe", "\"sub\":999999"},
      {"info", ""},
      {"save", ""},
      {"world.move", "\"world\":\"" W "\",\"to\":\"elsewhere\""},
      {"cluster.nodes", ""},
      {"replicate", "\"group\":\"g\",\"epoch\":1,\"from\":1,\"node\":\"n\""},
      {"world.promote", "\"world\":\"" W "\",\"node\":\"n\""},
  };
  out[0] = '\0';
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
    if (strcmp(rows[i].cmd, cmd) == 0) {
      size_t n = 0;
      for (const char *p = rows[i].members; *p && n + 24 < cap; p++) {
        const char *ids = "ABE", *k = p[0] == '{' && p[1] && p[2] == '}' ? strchr(ids, p[1]) : NULL;
        if (k) {
          uint64_t id = k == ids ? s->a : k == ids + 1 ? s->b : s->e;
          n += (size_t)snprintf(out + n, cap - n, "%llu", (unsigned long long)id);
          p += 2;
        } else {
          out[n++] = *p;
        }
      }
      out[n] = '\0';
      return;
    }
  /* A command added to the table needs a row here. */
  CU_FAIL("a valid request for every command");
  fprintf(stderr, "  no valid request for %s\n", cmd);
}

/* members with the member "key" left out (they are "key":value pairs, values without commas
 * at the top level but in brackets). */
static void without_member(const char *members, const char *key, char *out, size_t cap) {
  char quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\":", key);
  const char *at = strstr(members, quoted);
  if (!at || (at != members && at[-1] != ',')) {
    snprintf(out, cap, "%s", members);
    return;
  }
  const char *end = at + strlen(quoted);
  for (int depth = 0; *end && (depth > 0 || *end != ','); end++)
    depth += (*end == '[' || *end == '{') - (*end == ']' || *end == '}');
  size_t head = (size_t)(at - members);
  if (*end == ',')
    end++;
  else if (head > 0)
    head--; /* the last member: drop the comma before it */
  snprintf(out, cap, "%.*s%s", (int)head, members, end);
}

/* The value a misspelt field carries: one of the right type, so that only its name is wrong. */
static const char *value_for(scn_field f) {
  switch (f) {
  case SCN_F_world:
    return "\"" W "\"";
  case SCN_F_name:
  case SCN_F_path:
  case SCN_F_token:
  case SCN_F_node:
    return "\"x\"";
  case SCN_F_keep:
    return "\"world\"";
  case SCN_F_matrices:
    return "\"json\"";
  case SCN_F_partial:
  case SCN_F_recursive:
  case SCN_F_trs:
  case SCN_F_cluster:
    return "true";
  case SCN_F_t:
    return "[1,0,0]";
  case SCN_F_r:
    return "[0,0,0,1]";
  case SCN_F_matrix:
    return "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]";
  case SCN_F_ops:
    return "[]";
  case SCN_F_near:
  case SCN_F_packed:
    return "null";
  default:
    return "1";
  }
}

static scene make_scene(t_client *c) {
  new_world(c, W);
  scene s;
  s.a = TF(c, W, "\"name\":\"a\",\"t\":[1,2,3]");
  s.b = TF(c, W, "\"name\":\"b\",\"parent\":%llu,\"r\":[0,0.7071068,0,0.7071068]",
           (unsigned long long)s.a);
  s.e = TF(c, W, "\"name\":\"e\",\"s\":2");
  return s;
}

static char *scene_state(t_client *c, const scene *s) {
  uint64_t ids[] = {s->a, s->b, s->e};
  return snapshot(c, W, ids, 3);
}

/* ---- every command ----------------------------------------------------------------------------
 */

static void test_every_command(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  scene s = make_scene(&c);
  char *before = scene_state(&c, &s);
  char valid[512], members[768], message[256];
  for (unsigned i = 0; i < scn_command_count; i++) {
    const scn_command_info *cmd = &scn_commands[i];
    valid_members(&s, cmd->name, valid, sizeof valid);
    const char *sep = valid[0] ? "," : "";
    /* An unknown member, after the command's members and before them. */
    snprintf(members, sizeof members, "%s%s\"zzzz\":1", valid, sep);
    REFUSED(&c, "unknown field \"zzzz\"", cmd->name, members);
    snprintf(members, sizeof members, "\"zzzz\":[1,{\"partial\":true}]%s%s", sep, valid);
    REFUSED(&c, "unknown field \"zzzz\"", cmd->name, members);
    /* A field of the table that no command takes from a client (the journal's), and one that
     * this command does not take. */
    snprintf(members, sizeof members, "%s%s\"created\":[1]", valid, sep);
    REFUSED(&c, "unknown field \"created\"", cmd->name, members);
    if (!((cmd->required | cmd->optional) & SCN_F(partial))) {
      snprintf(members, sizeof members, "%s%s\"partial\":true", valid, sep);
      REFUSED(&c, "unknown field \"partial\"", cmd->name, members);
    }
    /* Each of its fields misspelt (its last letter doubled: one edit from it, and from no
     * other field of the command as near), in place of the field itself: the refusal comes
     * before a missing field would be. */
    for (unsigned f = 0; f < SCN_FIELD_COUNT; f++) {
      if (!((cmd->required | cmd->optional) & ((scn_fieldset)1 << f)))
        continue;
      const char *name = scn_field_name((scn_field)f);
      char typo[32];
      snprintf(typo, sizeof typo, "%s%c", name, name[strlen(name) - 1]);
      without_member(valid, name, members, sizeof members);
      size_t n = strlen(members);
      snprintf(members + n, sizeof members - n, "%s\"%s\":%s", n ? "," : "", typo,
               value_for((scn_field)f));
      snprintf(message, sizeof message, "unknown field \"%s\" (did you mean \"%s\"?)", typo, name);
      REFUSED(&c, message, cmd->name, members);
    }
  }
  /* Nothing was done: no world made or destroyed, no entity made or destroyed, no transform
   * moved, renamed or destroyed, and the connection still has no subscription. */
  char *after = scene_state(&c, &s);
  CHECK_SAME(before, after);
  free(after);
  CU_ASSERT_EQUAL(listed_transforms(&c, "fresh"), -1);
  QUIET(&c, 100);
  /* The same valid requests without the stray member do what they say (a sample that changes
   * state), so the refusals above were for that member alone. */
  valid_members(&s, "transform.set_local", valid, sizeof valid);
  OKD(&c, "{\"cmd\":\"transform.set_local\",%s}", valid);
  valid_members(&s, "world.create", valid, sizeof valid);
  OKD(&c, "{\"cmd\":\"world.create\",%s}", valid);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"fresh\"}");
  free(before);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"" W "\"}");
  t_client_close(&c);
}

/* ---- the user's report: a misspelt "partial" ---------------------------------------------------
 */

/* local_trs of e, as compact JSON. */
static char *local_trs(t_client *c, uint64_t e) {
  cJSON *r = OK(c, "{\"cmd\":\"transform.get\",\"world\":\"" W "\",\"entity\":%llu,\"trs\":true}",
                (unsigned long long)e);
  const cJSON *trs = cJSON_GetObjectItemCaseSensitive(r, "local_trs");
  char *s = trs ? cJSON_PrintUnformatted(trs) : NULL;
  cJSON_Delete(r);
  return s ? s : strdup("(none)");
}

static void test_partial_typo(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  scene s = make_scene(&c);
  char *was = local_trs(&c, s.b);
  CU_ASSERT_STRING_EQUAL(was, "{\"t\":[0,0,0],\"r\":[0,0.7071068,0,0.7071068],\"s\":[1,1,1]}");
  char members[256];
  const char *sets[] = {"transform.set_local", "transform.set_world"};
  const char *typos[][2] = {{"partal", "partial"}, {"Partial", "partial"}, {"parital", "partial"}};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 3; i++) {
      char message[128];
      snprintf(members, sizeof members,
               "\"world\":\"" W "\",\"entity\":%llu,\"%s\":true,\"t\":[1,0,0]",
               (unsigned long long)s.b, typos[i][0]);
      snprintf(message, sizeof message, "unknown field \"%s\" (did you mean \"%s\"?)", typos[i][0],
               typos[i][1]);
      REFUSED(&c, message, sets[k], members);
      char *now = local_trs(&c, s.b);
      CU_ASSERT_STRING_EQUAL(now, was); /* the rotation stays: no full set happened */
      free(now);
    }
  /* Spelt right, only t changes. */
  OKD(&c,
      "{\"cmd\":\"transform.set_local\",\"world\":\"" W
      "\",\"entity\":%llu,\"partial\":true,\"t\":[1,0,0]}",
      (unsigned long long)s.b);
  char *now = local_trs(&c, s.b);
  CU_ASSERT_STRING_EQUAL(now, "{\"t\":[1,0,0],\"r\":[0,0.7071068,0,0.7071068],\"s\":[1,1,1]}");
  free(now);
  free(was);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"" W "\"}");
  t_client_close(&c);
}

/* ---- batches ----------------------------------------------------------------------------------
 */

static void test_batch_ops(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  scene s = make_scene(&c);
  char *before = scene_state(&c, &s);
  char valid[512], op[768], members[2048], message[256];
  for (unsigned i = 0; i < scn_command_count; i++) {
    const scn_command_info *cmd = &scn_commands[i];
    if (!(cmd->flags & SCN_CMD_IN_BATCH))
      continue;
    valid_members(&s, cmd->name, valid, sizeof valid);
    /* Op 0 changes something, op 1 is refused for its member: the batch changes nothing. The
     * op's "world" (the batch's) and "id" are taken. */
    snprintf(op, sizeof op, "{\"cmd\":\"%s\",\"id\":\"op\",%s,\"colour\":\"red\"}", cmd->name,
             valid);
    snprintf(members, sizeof members,
             "\"world\":\"" W "\",\"ops\":[{\"cmd\":\"transform.set_local\",\"entity\":%llu,"
             "\"t\":[9,9,9]},%s]",
             (unsigned long long)s.a, op);
    REFUSED(&c, "op 1: unknown field \"colour\"", "batch", members);
    /* Each field misspelt, in an op without "world" (ops act on the batch's world). */
    for (unsigned f = 0; f < SCN_FIELD_COUNT; f++) {
      if (!((cmd->required | cmd->optional) & ((scn_fieldset)1 << f)) || f == SCN_F_world)
        continue;
      const char *name = scn_field_name((scn_field)f);
      char typo[32], rest[512], bare[512];
      snprintf(typo, sizeof typo, "%s%c", name, name[strlen(name) - 1]);
      without_member(valid, "world", bare, sizeof bare);
      without_member(bare, name, rest, sizeof rest);
      snprintf(members, sizeof members,
               "\"world\":\"" W "\",\"ops\":[{\"cmd\":\"transform.set_local\",\"entity\":%llu,"
               "\"t\":[9,9,9]},{\"cmd\":\"%s\"%s%s,\"%s\":%s}]",
               (unsigned long long)s.a, cmd->name, rest[0] ? "," : "", rest, typo,
               value_for((scn_field)f));
      snprintf(message, sizeof message, "op 1: unknown field \"%s\" (did you mean \"%s\"?)", typo,
               name);
      REFUSED(&c, message, "batch", members);
    }
  }
  /* A batch's own members are the batch command's: "ops" misspelt is not taken for "ops". */
  REFUSED(&c, "unknown field \"opss\" (did you mean \"ops\"?)", "batch",
          "\"world\":\"" W "\",\"opss\":[]");
  char *after = scene_state(&c, &s);
  CHECK_SAME(before, after);
  free(after);
  free(before);
  /* Ops with ids, and the batch with one: all taken. */
  cJSON *r = OK(&c,
                "{\"cmd\":\"batch\",\"id\":\"b\",\"world\":\"" W
                "\",\"ops\":[{\"cmd\":\"transform.set_local\",\"id\":[1],\"world\":\"" W
                "\",\"entity\":%llu,\"partial\":true,\"t\":[2,2,2]},{\"cmd\":\"transform.get\","
                "\"id\":{\"k\":2},\"entity\":%llu,\"trs\":true}]}",
                (unsigned long long)s.b, (unsigned long long)s.b);
  const cJSON *results = cJSON_GetObjectItemCaseSensitive(r, "results");
  const cJSON *trs = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(results, 1), "local_trs");
  char *text = trs ? cJSON_PrintUnformatted(trs) : NULL;
  CU_ASSERT_STRING_EQUAL(text ? text : "(none)",
                         "{\"t\":[2,2,2],\"r\":[0,0.7071068,0,0.7071068],\"s\":[1,1,1]}");
  free(text);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"" W "\"}");
  t_client_close(&c);
}

/* ---- registration -----------------------------------------------------------------------------
 */

int t_register_daemon_commands_fields(void) {
  static const t_test tests[] = {
      {"every command refuses members it does not take", test_every_command},
      {"a misspelt partial changes nothing", test_partial_typo},
      {"ops of a batch are judged by their commands", test_batch_ops},
  };
  return T_ADD_SUITE("daemon_commands_fields", commands_suite_init, commands_suite_clean, tests);
}

/* Integration test of malformed lines against the real daemon: hundreds of them in one write
 * (fields of the wrong type or out of range for every command, required fields missing,
 * unknown commands, lines that are not one JSON object, NUL bytes, deep nesting), each answered
 * with its error code and its id, and nothing changed. */
#include "command_fixtures.h"
#include "daemon_fixtures.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A malformed line and the answer it must get. */
typedef struct malformed_case {
  char *line;
  size_t len;
  const char *code; /* the error code; "A|B" accepts either */
  int id;           /* the id the response must echo, -1 for none */
} malformed_case;

typedef struct malformed_list {
  malformed_case *cases;
  int count, cap;
} malformed_list;

static void add_case(malformed_list *l, const char *code, int id, const void *data, size_t len) {
  if (l->count == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 256;
    malformed_case *p = realloc(l->cases, sizeof *p * (size_t)l->cap);
    if (!p)
      abort();
    l->cases = p;
  }
  malformed_case *m = &l->cases[l->count++];
  m->line = malloc(len + 1);
  if (!m->line)
    abort();
  memcpy(m->line, data, len);
  m->line[len] = '\0';
  m->len = len;
  m->code = code;
  m->id = id;
}

/* A line without an id. */
static void add_text_case(malformed_list *l, const char *code, const char *s) {
  add_case(l, code, -1, s, strlen(s));
}

/* The id the next case's request carries. */
static int next_id(const malformed_list *l) { return 100000 + l->count; }

static void malformed_list_free(malformed_list *l) {
  for (int i = 0; i < l->count; i++)
    free(l->cases[i].line);
  free(l->cases);
}

#define ARRAY_LEN(a) ((int)(sizeof(a) / sizeof *(a)))

/* ---- values each field must refuse ----------------------------------------------------------- */

/* world: not a string, empty, with a space or a slash, 65 bytes long, not ASCII (escaped or
 * raw), a NUL, a control character. */
static const char *const bad_world_names[] = {
    "1",
    "true",
    "null",
    "[]",
    "{}",
    "\"\"",
    "\"a b\"",
    "\"a/b\"",
    "\"wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\"",
    "\"w\\u00f6rld\"",
    "\"w\xc3\xb6rld\"",
    "\"\\u0000\"",
    "\"tab\\t\"",
    "[\"mal\"]"};
/* entity (and to): not a number, not a positive whole number, past 2^53 - 1, out of range. */
static const char *const bad_entity_ids[] = {
    "\"1\"",
    "true",
    "null",
    "[]",
    "{}",
    "0",
    "-1",
    "1.5",
    "9007199254740992",
    "1e999",
    "-0",
    "1e300",
    "\"abc\"",
    "-1e999",
    "[1]",
    "0.999999",
    "1000000000000000000000000000000000000000000000000000000000000000000000000000001",
    "9007199254740991.5",
    "1e-400"};
/* parent (and a subscription's root): as entity, where null means none. */
static const char *const bad_parent_ids[] = {
    "\"1\"", "true", "[]",    "{}",      "0",  "-1", "1.5", "9007199254740992",
    "1e999", "-0",   "1e300", "\"abc\"", "[1]"};
/* A transform's name: not a string, empty, with a slash, a control character or DEL, 65 bytes
 * long, the root "/". */
static const char *const bad_transform_names[] = {
    "1",
    "true",
    "[]",
    "{}",
    "\"\"",
    "\"a/b\"",
    "\"\\u0001\"",
    "\"a\\nb\"",
    "\"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\"",
    "\"\\u007f\"",
    "\"/\"",
    "[\"a\"]"};
/* matrix: not 16 numbers, or one of them not a finite float32. */
static const char *const bad_matrices[] = {"1",
                                           "\"x\"",
                                           "[]",
                                           "{}",
                                           "null",
                                           "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0]",
                                           "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1,0]",
                                           "[1e39,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]",
                                           "[1,0,0,0,0,1e999,0,0,0,0,1,0,0,0,0,1]",
                                           "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,-1e999]",
                                           "[1,0,0,0,0,1,0,0,0,0,1,0,\"1\",0,0,1]",
                                           "[1,0,0,0,0,1,0,0,0,0,1,0,null,0,0,1]",
                                           "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,-1e39,1]",
                                           "[[1],0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]",
                                           "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,true]"};
/* t, a translation: not 3 numbers, or one not a finite float32. */
static const char *const bad_translations[] = {
    "[1,2]",       "[1,2,3,4]",    "\"x\"", "1",  "null",       "[1,\"2\",3]", "[1e39,0,0]",
    "[0,1e999,0]", "[0,0,-1e999]", "{}",    "[]", "[true,0,0]", "[1,2,null]"};
/* r, a rotation: not 4 numbers, zero length, or not finite. */
static const char *const bad_rotations[] = {
    "[0,0,0,0]",    "[-0,0,0,-0]", "[0,0,1]",     "[0,0,0,\"1\"]", "1",
    "[1e39,0,0,1]", "null",        "[0,0,0,1,0]", "[0,0,0,1e999]", "{}"};
/* s, a scale: not a number or 3 numbers, or not a finite float32. */
static const char *const bad_scales[] = {"\"2\"",       "[1,2]",       "[1,2,3,4]", "1e39",
                                         "[1,1,1e999]", "true",        "null",      "-1e999",
                                         "{}",          "[1,\"1\",1]", "[]",        "-3.5e38"};
/* keep: not "local" or "world". */
static const char *const bad_keep_values[] = {"1",        "true",      "null", "\"\"",
                                              "\"both\"", "\"LOCAL\"", "[]",   "\"world \""};
/* recursive: not a boolean. */
static const char *const bad_recursive_flags[] = {"1", "\"true\"", "null", "0", "[]", "\"false\""};
/* entity.create's count: not a whole number from 1. */
static const char *const bad_counts[] = {"\"1\"", "true", "null", "0",      "-1",
                                         "1.5",   "[]",   "{}",   "-1e999", "0.5"};
/* transform.find's path: not a string, empty, an empty segment. */
static const char *const bad_paths[] = {"1", "null", "[]", "true", "{}", "\"\"", "\"a//b\""};
/* batch's ops: not an array of commands a batch may hold, in its world. */
static const char *const bad_batch_ops[] = {"{}",
                                            "\"x\"",
                                            "1",
                                            "null",
                                            "true",
                                            "[1]",
                                            "[null]",
                                            "[[]]",
                                            "[{\"cmd\":\"ping\"}]",
                                            "[{\"cmd\":\"world.create\",\"world\":\"q\"}]",
                                            "[{\"cmd\":\"batch\",\"ops\":[]}]",
                                            "[{\"cmd\":5}]",
                                            "[{}]",
                                            "[{\"cmd\":\"nope\"}]",
                                            "[{\"cmd\":\"entity.create\"}]",
                                            "[{\"cmd\":\"transform.get\"}]",
                                            "[{\"cmd\":\"transform.create\",\"world\":\"other\"}]"};
/* unsubscribe's sub: not a subscription id. */
static const char *const bad_subscription_ids[] = {
    "\"x\"", "0", "-1", "1.5", "null", "[]", "9007199254740992", "true", "{}"};
/* subscribe's hz: not a positive rate. */
static const char *const bad_rates[] = {"0", "-1", "\"5\"", "true", "[]", "1e999", "null", "{}"};

/* A field and its valid value, for the fields a request keeps while another one is bad. */
typedef struct field {
  const char *key;
  char val[64];
} field;

static bool is_spec_key(const char *k) {
  return !strcmp(k, "matrix") || !strcmp(k, "t") || !strcmp(k, "r") || !strcmp(k, "s");
}

/* One request per bad value of key: {"cmd":cmd,"id":N, the valid fields but key (and, when key
 * is one of a transform's specifications, but the others), "key":bad}. */
static void add_bad_values(malformed_list *l, const char *cmd, const field *valid, int nvalid,
                           const char *key, const char *const *bad, int nbad) {
  for (int i = 0; i < nbad; i++) {
    text b = {0};
    int id = next_id(l);
    text_addf(&b, "{\"cmd\":\"%s\",\"id\":%d", cmd, id);
    for (int k = 0; k < nvalid; k++) {
      if (!strcmp(valid[k].key, key) || (is_spec_key(key) && is_spec_key(valid[k].key)))
        continue;
      text_addf(&b, ",\"%s\":%s", valid[k].key, valid[k].val);
    }
    text_addf(&b, ",\"%s\":%s}", key, bad[i]);
    add_case(l, "BAD_REQUEST", id, b.s, b.len);
    text_free(&b);
  }
}
#define ADD_BAD_VALUES(l, cmd, valid, nvalid, key, bad)                                            \
  add_bad_values((l), (cmd), (valid), (nvalid), (key), (bad), ARRAY_LEN(bad))

/* Every field of every command with each of its bad values; a and b are transforms of world
 * "mal" (b a child of a), n an entity without one. */
static void add_bad_fields(malformed_list *l, uint64_t a, uint64_t b, uint64_t n) {
  field world[] = {{"world", "\"mal_new\""}};
  ADD_BAD_VALUES(l, "world.create", world, 1, "world", bad_world_names);
  ADD_BAD_VALUES(l, "world.destroy", world, 1, "world", bad_world_names);
  ADD_BAD_VALUES(l, "entity.create", NULL, 0, "count", bad_counts);
  field entity[] = {{"entity", ""}};
  snprintf(entity[0].val, sizeof entity[0].val, "%llu", (unsigned long long)n);
  ADD_BAD_VALUES(l, "entity.destroy", entity, 1, "entity", bad_entity_ids);

  field create[] = {{"world", "\"mal\""}, {"entity", ""}};
  snprintf(create[1].val, sizeof create[1].val, "%llu", (unsigned long long)n);
  ADD_BAD_VALUES(l, "transform.create", create, 2, "world", bad_world_names);
  ADD_BAD_VALUES(l, "transform.create", create, 2, "entity", bad_entity_ids);
  ADD_BAD_VALUES(l, "transform.create", create, 2, "parent", bad_parent_ids);
  ADD_BAD_VALUES(l, "transform.create", create, 2, "name", bad_transform_names);
  ADD_BAD_VALUES(l, "transform.create", create, 2, "matrix", bad_matrices);
  ADD_BAD_VALUES(l, "transform.create", create, 2, "t", bad_translations);
  ADD_BAD_VALUES(l, "transform.create", create, 2, "r", bad_rotations);
  ADD_BAD_VALUES(l, "transform.create", create, 2, "s", bad_scales);

  field at_a[] = {{"world", "\"mal\""}, {"entity", ""}, {"t", "[1,2,3]"}};
  snprintf(at_a[1].val, sizeof at_a[1].val, "%llu", (unsigned long long)a);
  static const char *const set_cmds[] = {"transform.set_local", "transform.set_world"};
  for (int k = 0; k < 2; k++) {
    ADD_BAD_VALUES(l, set_cmds[k], at_a, 3, "world", bad_world_names);
    ADD_BAD_VALUES(l, set_cmds[k], at_a, 3, "entity", bad_entity_ids);
    ADD_BAD_VALUES(l, set_cmds[k], at_a, 3, "matrix", bad_matrices);
    ADD_BAD_VALUES(l, set_cmds[k], at_a, 3, "t", bad_translations);
    ADD_BAD_VALUES(l, set_cmds[k], at_a, 3, "r", bad_rotations);
    ADD_BAD_VALUES(l, set_cmds[k], at_a, 3, "s", bad_scales);
  }
  static const char *const read_cmds[] = {"transform.get", "transform.children",
                                          "transform.unlink"};
  for (int k = 0; k < 3; k++) {
    ADD_BAD_VALUES(l, read_cmds[k], at_a, 2, "world", bad_world_names);
    ADD_BAD_VALUES(l, read_cmds[k], at_a, 2, "entity", bad_entity_ids);
  }
  ADD_BAD_VALUES(l, "transform.unlink", at_a, 2, "keep", bad_keep_values);

  field at_b[] = {{"world", "\"mal\""}, {"entity", ""}, {"parent", ""}, {"to", ""}};
  snprintf(at_b[1].val, sizeof at_b[1].val, "%llu", (unsigned long long)b);
  snprintf(at_b[2].val, sizeof at_b[2].val, "%llu", (unsigned long long)a);
  snprintf(at_b[3].val, sizeof at_b[3].val, "%llu", (unsigned long long)a);
  field link[] = {at_b[0], at_b[1], at_b[2]};
  ADD_BAD_VALUES(l, "transform.link", link, 3, "world", bad_world_names);
  ADD_BAD_VALUES(l, "transform.link", link, 3, "entity", bad_entity_ids);
  ADD_BAD_VALUES(l, "transform.link", link, 3, "parent", bad_parent_ids);
  ADD_BAD_VALUES(l, "transform.link", link, 3, "keep", bad_keep_values);
  field destroy[] = {at_b[0], at_b[1]};
  ADD_BAD_VALUES(l, "transform.destroy", destroy, 2, "world", bad_world_names);
  ADD_BAD_VALUES(l, "transform.destroy", destroy, 2, "entity", bad_entity_ids);
  ADD_BAD_VALUES(l, "transform.destroy", destroy, 2, "recursive", bad_recursive_flags);
  field relative[] = {at_b[0], at_b[1], at_b[3]};
  ADD_BAD_VALUES(l, "transform.relative", relative, 3, "world", bad_world_names);
  ADD_BAD_VALUES(l, "transform.relative", relative, 3, "entity", bad_entity_ids);
  ADD_BAD_VALUES(l, "transform.relative", relative, 3, "to", bad_entity_ids);

  field rename[] = {{"world", "\"mal\""}, {"entity", ""}, {"name", "\"a\""}};
  snprintf(rename[1].val, sizeof rename[1].val, "%llu", (unsigned long long)a);
  ADD_BAD_VALUES(l, "transform.rename", rename, 3, "world", bad_world_names);
  ADD_BAD_VALUES(l, "transform.rename", rename, 3, "entity", bad_entity_ids);
  ADD_BAD_VALUES(l, "transform.rename", rename, 3, "name", bad_transform_names);
  field find[] = {{"world", "\"mal\""}, {"path", "\"a/b\""}};
  ADD_BAD_VALUES(l, "transform.find", find, 2, "world", bad_world_names);
  ADD_BAD_VALUES(l, "transform.find", find, 2, "path", bad_paths);
  field batch[] = {{"world", "\"mal\""}, {"ops", "[]"}};
  ADD_BAD_VALUES(l, "batch", batch, 2, "world", bad_world_names);
  ADD_BAD_VALUES(l, "batch", batch, 2, "ops", bad_batch_ops);
  field subscribe[] = {{"world", "\"mal\""}};
  ADD_BAD_VALUES(l, "subscribe", subscribe, 1, "world", bad_world_names);
  ADD_BAD_VALUES(l, "subscribe", subscribe, 1, "root", bad_parent_ids);
  ADD_BAD_VALUES(l, "subscribe", subscribe, 1, "hz", bad_rates);
  ADD_BAD_VALUES(l, "unsubscribe", NULL, 0, "sub", bad_subscription_ids);
}

/* ---- requests that are not well formed ------------------------------------------------------- */

/* Each required field missing in turn, for every command of the table. */
static void add_missing_fields(malformed_list *l) {
  for (unsigned i = 0; i < scn_command_count; i++) {
    char req[256];
    scn_fields_text(scn_commands[i].required, req, sizeof req);
    for (const char *p = req; *p;) {
      const char *comma = strchr(p, ',');
      size_t len = comma ? (size_t)(comma - p) : strlen(p);
      text line = {0};
      int id = next_id(l);
      text_addf(&line, "{\"cmd\":\"%s\",\"id\":%d", scn_commands[i].name, id);
      for (const char *q = req; *q;) {
        const char *qc = strchr(q, ',');
        size_t qlen = qc ? (size_t)(qc - q) : strlen(q);
        if (q != p) {
          const char *v = "1";
          if (qlen == 5 && !strncmp(q, "world", 5))
            v = "\"mal\"";
          else if (qlen == 4 && !strncmp(q, "path", 4))
            v = "\"a\"";
          else if (qlen == 4 && !strncmp(q, "name", 4))
            v = "\"zz\"";
          else if (qlen == 3 && !strncmp(q, "ops", 3))
            v = "[]";
          text_addf(&line, ",\"%.*s\":%s", (int)qlen, q, v);
        }
        q += qlen + (qc ? 1 : 0);
      }
      text_addf(&line, "}");
      add_case(l, "BAD_REQUEST", id, line.s, line.len);
      text_free(&line);
      p += len + (comma ? 1 : 0);
    }
  }
}

/* cmd missing, of the wrong type, or unknown. */
static void add_bad_commands(malformed_list *l) {
  static const char *const bad_cmd[] = {"5", "null", "true", "[]", "{}", "[\"ping\"]", "1.5"};
  for (int i = 0; i < ARRAY_LEN(bad_cmd); i++) {
    char line[128];
    int id = next_id(l);
    int len = snprintf(line, sizeof line, "{\"cmd\":%s,\"id\":%d}", bad_cmd[i], id);
    add_case(l, "BAD_REQUEST", id, line, (size_t)len);
  }
  char line[64];
  int id = next_id(l);
  int len = snprintf(line, sizeof line, "{\"id\":%d}", id);
  add_case(l, "BAD_REQUEST", id, line, (size_t)len);
  add_text_case(l, "BAD_REQUEST", "{}");
  add_text_case(l, "BAD_REQUEST", "{\"world\":\"mal\",\"entity\":1}");
  static const char *const unknown[] = {
      "\"\"",        "\"PING\"",      "\"ping \"",          "\" ping\"",
      "\"nope\"",    "\"transform\"", "\"world.create.x\"", "\"transform.\"",
      "\"\\u00e9\"", "\"Ping\"",      "\"world_create\""};
  for (int i = 0; i < ARRAY_LEN(unknown); i++) {
    char line[128];
    int id = next_id(l);
    int len =
        snprintf(line, sizeof line, "{\"id\":%d,\"cmd\":%s,\"world\":\"mal\"}", id, unknown[i]);
    add_case(l, "UNKNOWN_COMMAND", id, line, (size_t)len);
  }
}

/* Not JSON, or not one JSON object. */
/* Lines that are not JSON, or not one JSON object: raw NUL bytes, invalid UTF-8, numbers
 * strtod reads but JSON forbids, very deep nesting. */
static void add_not_json(malformed_list *l) {
  static const char *const not_json[] = {
      "{",
      "}",
      "{\"cmd\":\"ping\"",
      "{\"cmd\":\"ping\",}",
      "{cmd:\"ping\"}",
      "{'cmd':'ping'}",
      "{\"cmd\":\"ping\"}}",
      "{\"cmd\" \"ping\"}",
      "{\"cmd\":\"ping\"]",
      "[{\"cmd\":\"ping\"}]",
      "\"ping\"",
      "ping",
      "123",
      "-1.5",
      "null",
      "true",
      "false",
      "[]",
      "\"\"",
      "1e999",
      "{\"cmd\":NaN}",
      "{\"cmd\":\"ping\",\"id\":NaN}",
      "{\"cmd\":\"ping\",\"id\":nan}",
      "{\"cmd\":\"ping\",\"id\":Infinity}",
      "{\"cmd\":\"ping\",\"id\":-Infinity}",
      "{\"cmd\":\"ping\",\"id\":-}",
      "{\"cmd\":\"ping\",\"id\":1e}",
      "{\"cmd\":\"ping\",\"id\":0x10}",
      "{\"cmd\":\"ping\",\"id\":+1}",
      "{\"cmd\":\"ping\",\"id\":.5}",
      "{\"cmd\":\"ping\",\"id\":\"\\x\"}",
      "{\"cmd\":\"ping\",\"id\":\"\\u12\"}",
      "{\"cmd\":\"ping\",\"id\":\"\\ud800\"}",
      "{\"cmd\":\"ping\",\"id\":\"\\udc00\"}",
      "{\"cmd\":\"ping\",\"id\":\"abc}",
      "{\"cmd\":\"ping\",\"id\":tru}",
      "{\"cmd\":\"ping\",\"id\":True}",
      "{\"cmd\":\"ping\",\"id\":[1,2}",
      "{\"cmd\":\"ping\",\"id\":[1,,2]}",
      "{\"cmd\":\"ping\" \"id\":1}",
      "{\"cmd\":\"ping\",\"id\":1,}",
      "{\"cmd\":\"ping\"}{\"cmd\":\"ping\"}",
      "{\"cmd\":\"ping\"} x",
      "{\"cmd\":\"ping\"},",
      "{\"cmd\":\"pi\tng\"}",
      "{\"cmd\":\"pi\x01ng\"}",
      "{\"cmd\":\"ping\",\"id\":\"\x1f\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xff\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xc0\xaf\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xed\xa0\x80\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xe2\x82\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xf4\x90\x80\x80\"}",
      "{\"cmd\":\"ping\",\"id\":\"\x80\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xf8\x88\x80\x80\x80\"}",
      "{\"cmd\":\"ping\",\"id\":\"ab\xc3\"}",
      "{\"cmd\":\"ping\",\"\xff\":1}",
      "{\"cmd\":\"ping\"}\xff",
      "{\"cmd\":\"pin\xffg\"}",
      "{\"cmd\":\"world.create\",\"world\":\"\xfe\"}",
      "\xff\xfe",
      "{\"cmd\":\"ping\",\"id\":\"\xe0\x80\xaf\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xf0\x82\x82\xac\"}",
      "{\"cmd\":\"ping\",\"id\":\"\xef\xbf\"}",
      /* numbers strtod reads but JSON forbids */
      "{\"cmd\":\"ping\",\"id\":01}",
      "{\"cmd\":\"ping\",\"id\":1.}",
      "{\"cmd\":\"ping\",\"id\":-.5}",
      "{\"cmd\":\"ping\",\"id\":[1.,02]}",
      "{\"cmd\":\"entity.destroy\",\"entity\":007}",
      "{\"cmd\":\"transform.set_local\",\"world\":\"mal\",\"entity\":1,\"t\":[1.,2,3]}",
  };
  for (int i = 0; i < ARRAY_LEN(not_json); i++)
    add_text_case(l, "BAD_JSON", not_json[i]);
  /* Raw NUL bytes. */
  add_case(l, "BAD_JSON", -1, "{\"cmd\":\"ping\"}\0", 15);
  add_case(l, "BAD_JSON", -1, "{\"cmd\":\"pi\0ng\"}", 15);
  add_case(l, "BAD_JSON", -1, "\0{\"cmd\":\"ping\"}", 15);
  add_case(l, "BAD_JSON", -1, "\0", 1);
  /* Very deep nesting: unclosed, and closed inside a request. */
  {
    text deep = {0};
    for (int i = 0; i < 100000; i++)
      text_add(&deep, "[", 1);
    add_case(l, "BAD_JSON", -1, deep.s, deep.len);
    deep.len = 0;
    text_addf(&deep, "{\"cmd\":\"ping\",\"id\":");
    for (int i = 0; i < 5000; i++)
      text_add(&deep, "[", 1);
    for (int i = 0; i < 5000; i++)
      text_add(&deep, "]", 1);
    text_addf(&deep, "}");
    add_case(l, "BAD_JSON|LIMIT|BAD_REQUEST", -1, deep.s, deep.len);
    deep.len = 0;
    text_addf(&deep, "{\"cmd\":\"ping\",\"x\":");
    for (int i = 0; i < 5000; i++)
      text_addf(&deep, "{\"a\":");
    text_addf(&deep, "1");
    for (int i = 0; i < 5000; i++)
      text_add(&deep, "}", 1);
    text_addf(&deep, "}");
    add_case(l, "BAD_JSON|LIMIT|BAD_REQUEST", -1, deep.s, deep.len);
    text_free(&deep);
  }
}

/* Every malformed case, in the order they are sent. */
static void build_malformed(malformed_list *l, uint64_t a, uint64_t b, uint64_t n) {
  add_bad_fields(l, a, b, n);
  add_missing_fields(l);
  add_bad_commands(l);
  add_not_json(l);
}

static void test_malformed_lines(void) {
  t_client c;
  if (!CONNECT(&c, commands_daemon.port))
    return;
  new_world(&c, "mal");
  uint64_t a = TF(&c, "mal", "\"name\":\"a\",\"t\":[1,2,3]");
  uint64_t b = TF(&c, "mal", "\"name\":\"b\",\"parent\":%llu,\"s\":2", (unsigned long long)a);
  uint64_t n = new_entity(&c);
  uint64_t ids[] = {a, b, n};
  char *s1 = snapshot(&c, "mal", ids, 3);

  malformed_list l = {0};
  build_malformed(&l, a, b, n);
  CU_ASSERT_TRUE(l.count >= 150);
  text all = {0};
  for (int i = 0; i < l.count; i++) {
    text_add(&all, l.cases[i].line, l.cases[i].len);
    text_add(&all, "\n", 1);
  }
  CU_ASSERT_EQUAL(t_client_send_raw(&c, all.s, all.len), 0);
  text_free(&all);
  int wrong = 0, got = 0;
  for (int i = 0; i < l.count; i++) {
    cJSON *r = t_client_recv_json(&c, WAIT_MS);
    while (r && t_resp_has(r, "event")) {
      cJSON_Delete(r);
      r = t_client_recv_json(&c, WAIT_MS);
    }
    if (!r) {
      fprintf(stderr, "  no response to malformed line %d: %.200s\n", i, l.cases[i].line);
      break;
    }
    got++;
    const char *code = t_resp_code(r);
    bool good = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ok")) && code[0];
    const char *want = l.cases[i].code;
    bool code_ok = false;
    for (const char *p = want; *p;) {
      const char *bar = strchr(p, '|');
      size_t len = bar ? (size_t)(bar - p) : strlen(p);
      code_ok |= strlen(code) == len && !strncmp(code, p, len);
      p += len + (bar ? 1 : 0);
    }
    good = good && code_ok;
    if (l.cases[i].id >= 0)
      good = good && t_resp_num(r, "id") == l.cases[i].id;
    else
      good = good && !t_resp_has(r, "id");
    if (!good) {
      wrong++;
      fprintf(stderr, "  malformed line %d (want %s): %.200s\n", i, want, l.cases[i].line);
      t_report("response", r);
    }
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(got, l.count);
  CU_ASSERT_EQUAL(wrong, 0);
  malformed_list_free(&l);
  /* Still answering, on this connection and a new one, with nothing changed. */
  QUIET(&c, 50);
  OKD(&c, "{\"cmd\":\"ping\"}");
  t_client c2;
  if (CONNECT(&c2, commands_daemon.port)) {
    OKD(&c2, "{\"cmd\":\"ping\"}");
    t_client_close(&c2);
  }
  char *s2 = snapshot(&c, "mal", ids, 3);
  CHECK_SAME(s1, s2);
  free(s1);
  free(s2);
  CU_ASSERT_EQUAL(listed_transforms(&c, "mal_new"), -1);
  CU_ASSERT_EQUAL(listed_transforms(&c, "q"), -1);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"mal\"}");
  t_client_close(&c);
}

/* ---- registration ---------------------------------------------------------------------------- */

int t_register_daemon_commands_malformed(void) {
  static const t_test tests[] = {
      {"malformed lines", test_malformed_lines},
  };
  return T_ADD_SUITE("daemon_commands_malformed", commands_suite_init, commands_suite_clean, tests);
}

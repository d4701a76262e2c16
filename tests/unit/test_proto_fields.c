/* Unit tests of strict request fields: the edit distance behind "did you mean", the field it
 * suggests, and the refusal of a member a command does not take, on both parse paths and on
 * an op of a batch. */
#include "edit_distance.h"
#include "request.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>

#include <stdio.h>
#include <string.h>

/* ---- edit distance ----------------------------------------------------------------------- */

static void test_edit_distance(void) {
  static const struct {
    const char *a, *b;
    unsigned d; /* with max 9 */
  } cases[] = {
      {"", "", 0},
      {"partial", "partial", 0},
      {"partal", "partial", 1},   /* a deletion */
      {"partiall", "partial", 1}, /* an insertion */
      {"pertial", "partial", 1},  /* a substitution */
      {"wrold", "world", 1},      /* two adjacent letters swapped */
      {"eitnty", "entity", 2},    /* two swaps */
      {"prtal", "partial", 2},    /* two deletions */
      {"ca", "abc", 3},           /* optimal string alignment: no edit of a swapped pair */
      {"", "world", 5},
      {"kitten", "sitting", 3},
      {"Entity", "entity", 1}, /* case counts */
      {"matrix_b64", "matrix", 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    unsigned d = scn_edit_distance(cases[i].a, cases[i].b, 9);
    if (d != cases[i].d)
      fprintf(stderr, "  %s -> %s: %u, not %u\n", cases[i].a, cases[i].b, d, cases[i].d);
    CU_ASSERT_EQUAL(d, cases[i].d);
    CU_ASSERT_EQUAL(scn_edit_distance(cases[i].b, cases[i].a, 9), cases[i].d); /* symmetric */
    /* Past max, max + 1, whatever the true distance. */
    for (unsigned max = 0; max < cases[i].d; max++)
      CU_ASSERT_EQUAL(scn_edit_distance(cases[i].a, cases[i].b, max), max + 1);
    CU_ASSERT_EQUAL(scn_edit_distance(cases[i].a, cases[i].b, cases[i].d), cases[i].d);
  }
  /* Names over 63 bytes are never close, even to themselves. */
  char longer[80];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  CU_ASSERT_EQUAL(scn_edit_distance(longer, longer, 2), 3);
  CU_ASSERT_EQUAL(scn_edit_distance(longer, "a", 2), 3);
  longer[63] = '\0';
  CU_ASSERT_EQUAL(scn_edit_distance(longer, longer, 2), 0);
}

/* ---- suggestions ------------------------------------------------------------------------- */

static const char *suggest(const char *key, const char *command) {
  const scn_command_info *c = scn_command_find(command);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  scn_field f = scn_field_suggest(key, scn_command_takes(c));
  return f == SCN_FIELD_COUNT ? "" : scn_field_name(f);
}

static void test_field_suggest(void) {
  static const struct {
    const char *key, *command, *want; /* "": no suggestion */
  } cases[] = {
      {"partal", "transform.set_local", "partial"},
      {"partail", "transform.set_world", "partial"},
      {"entty", "transform.set_local", "entity"},
      {"wrold", "transform.get", "world"},
      {"World", "world.create", "world"},
      {"parnet", "transform.link", "parent"},
      {"recursiv", "transform.destroy", "recursive"},
      {"matrix_b46", "transform.create", "matrix_b64"},
      {"matrx", "transform.create", "matrix"},
      {"clustr", "world.list", "cluster"},
      {"pakced", "subscribe", "packed"},
      {"tokn", "hello", "token"},
      {"opps", "batch", "ops"},
      {"cont", "entity.create", "count"},
      {"tt", "transform.set_local", "t"}, /* one edit on two letters */
      /* Within two edits of a one-letter field: the contract's "close" */
      {"x", "transform.set_local", "t"},
      {"rot", "transform.set_local", "r"}, /* two from "t" and "r": the same first letter */
      {"pos", "transform.set_local", "s"},
      /* Too far: no guess. */
      {"colour", "transform.set_local", ""},
      {"translation", "transform.set_local", ""},
      {"partial", "transform.get", ""}, /* a field, but not one transform.get takes */
      {"x", "ping", ""},
      /* Never cmd or id, which every command takes. */
      {"ids", "ping", ""},
      {"cmdd", "info", ""},
      {"ID", "ping", ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *got = suggest(cases[i].key, cases[i].command);
    if (strcmp(got, cases[i].want) != 0)
      fprintf(stderr, "  %s on %s: \"%s\", not \"%s\"\n", cases[i].key, cases[i].command, got,
              cases[i].want);
    CU_ASSERT_STRING_EQUAL(got, cases[i].want);
  }
  /* The nearest wins; among equals, one with the key's first letter, then field order (t, r, s). */
  CU_ASSERT_STRING_EQUAL(suggest("tickk", "transform.get"), "tick");
  CU_ASSERT_STRING_EQUAL(suggest("trss", "transform.get"), "trs");
  CU_ASSERT_STRING_EQUAL(suggest("rr", "transform.set_local"), "r");
  CU_ASSERT_STRING_EQUAL(suggest("ts", "transform.set_local"), "t");
  CU_ASSERT_STRING_EQUAL(suggest("sr", "transform.set_local"), "s");
  CU_ASSERT_EQUAL(scn_field_suggest("world", 0), SCN_FIELD_COUNT);
}

static void test_unknown_field_text(void) {
  char text[256];
  scn_fieldset takes = scn_command_takes(scn_command_find("transform.set_local"));
  scn_unknown_field_text("partal", takes, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "unknown field \"partal\" (did you mean \"partial\"?)");
  scn_unknown_field_text("colour", takes, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "unknown field \"colour\"");
  scn_unknown_field_text("", takes, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "unknown field \"\"");
  /* A long key is cut to 64 bytes, never inside a character: 63 bytes of 'k' then two-byte
   * characters are cut before the one that would straddle byte 64; 62 bytes of 'k' keep one. */
  char key[200], want[256];
  for (int lead = 62; lead <= 63; lead++) {
    memset(key, 'k', (size_t)lead);
    for (int i = 0; i < 40; i++)
      memcpy(key + lead + 2 * i, "\xc3\xa9", 2);
    key[lead + 80] = '\0';
    scn_unknown_field_text(key, takes, text, sizeof text);
    snprintf(want, sizeof want, "unknown field \"%.*s%s\"", lead, key,
             lead == 62 ? "\xc3\xa9" : "");
    CU_ASSERT_STRING_EQUAL(text, want);
  }
  key[63] = 'k';
  key[64] = '\0'; /* 64 bytes: whole */
  scn_unknown_field_text(key, takes, text, sizeof text);
  snprintf(want, sizeof want, "unknown field \"%s\"", key);
  CU_ASSERT_STRING_EQUAL(text, want);
}

/* ---- the refusal ------------------------------------------------------------------------- */

static scn_request rq;

/* The error for line against command (via the flat path when the line is flat, the general
 * path otherwise, or the general path when general); "" when every member is taken. */
static const char *check_line(const char *line, const char *command, bool general) {
  static scn_wire_error err;
  int rc = general ? scn_request_parse_general(&rq, line, strlen(line), &err)
                   : scn_request_parse(&rq, line, strlen(line), &err);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  err.message[0] = '\0';
  err.code = SCN_W_INTERNAL;
  rc = scn_fields_check_taken(&rq.f, scn_command_takes(scn_command_find(command)), &err);
  CU_ASSERT_EQUAL(rc == 0, err.message[0] == '\0');
  if (rc < 0)
    CU_ASSERT_EQUAL(err.code, SCN_W_BAD_REQUEST);
  cJSON_Delete(rq.root);
  return err.message;
}

static void test_check_taken(void) {
  static const struct {
    const char *line, *command, *want;
  } cases[] = {
      {"{\"cmd\":\"transform.set_local\",\"world\":\"main\",\"entity\":1,\"partal\":true,"
       "\"t\":[1,0,0]}",
       "transform.set_local", "unknown field \"partal\" (did you mean \"partial\"?)"},
      {"{\"cmd\":\"transform.set_local\",\"world\":\"main\",\"entity\":1,\"partial\":true,"
       "\"t\":[1,0,0],\"id\":7}",
       "transform.set_local", ""},
      /* cmd and id are taken by every command, whatever id holds */
      {"{\"id\":{\"any\":[1]},\"cmd\":\"ping\"}", "ping", ""},
      {"{\"cmd\":\"ping\"}", "ping", ""},
      /* a field of the table that this command does not take */
      {"{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":1,\"partial\":true}", "transform.get",
       "unknown field \"partial\""},
      /* the first one sent is named, whether it is a field of the table or not */
      {"{\"cmd\":\"ping\",\"world\":\"w\",\"zz\":1}", "ping", "unknown field \"world\""},
      {"{\"cmd\":\"ping\",\"zz\":1,\"world\":\"w\"}", "ping", "unknown field \"zz\""},
      /* a repeated member that is taken is still taken */
      {"{\"cmd\":\"ping\",\"id\":1,\"id\":2}", "ping", ""},
      /* nested objects are their command's business: only top-level keys count */
      {"{\"cmd\":\"subscribe\",\"world\":\"w\",\"packed\":{\"stepp\":1}}", "subscribe", ""},
      {"{\"cmd\":\"batch\",\"world\":\"w\",\"ops\":[{\"cmd\":\"transform.get\",\"partal\":1}]}",
       "batch", ""},
      {"{\"cmd\":\"batch\",\"world\":\"w\",\"opps\":[]}", "batch",
       "unknown field \"opps\" (did you mean \"ops\"?)"},
      /* keys written with escapes are the keys they spell */
      {"{\"cmd\":\"ping\",\"\\u0069d\":1}", "ping", ""},
      {"{\"cmd\":\"ping\",\"\\u0069dd\":1}", "ping", "unknown field \"idd\""},
      {"{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":1,\"tr\\u0073s\":true}",
       "transform.get", "unknown field \"trss\" (did you mean \"trs\"?)"},
      /* "created" is the journal's, never a client's */
      {"{\"cmd\":\"entity.create\",\"created\":[3]}", "entity.create", "unknown field \"created\""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int general = 0; general < 2; general++) {
      const char *got = check_line(cases[i].line, cases[i].command, general);
      if (strcmp(got, cases[i].want) != 0)
        fprintf(stderr, "  %s (%s path): \"%s\"\n", cases[i].line, general ? "general" : "flat",
                got);
      CU_ASSERT_STRING_EQUAL(got, cases[i].want);
    }
  /* More keys than the validating pass records: the later ones are found by name. */
  char line[1024] = "{\"cmd\":\"ping\"";
  for (int i = 0; i < 40; i++)
    strcat(line, ",\"id\":1");
  strcat(line, ",\"i\":1}");
  CU_ASSERT_STRING_EQUAL(check_line(line, "ping", false), "unknown field \"i\"");
  CU_ASSERT_STRING_EQUAL(check_line(line, "ping", true), "unknown field \"i\"");
  /* An op of a batch, indexed on its own, is judged by its command. */
  cJSON *op = cJSON_Parse("{\"cmd\":\"transform.set_world\",\"entity\":2,\"partal\":true}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(op);
  scn_fields f;
  scn_fields_index(&f, op);
  scn_wire_error err;
  CU_ASSERT_EQUAL(
      scn_fields_check_taken(&f, scn_command_takes(scn_command_find("transform.set_world")), &err),
      -1);
  CU_ASSERT_STRING_EQUAL(err.message, "unknown field \"partal\" (did you mean \"partial\"?)");
  CU_ASSERT_EQUAL(
      scn_fields_check_taken(&f, scn_command_takes(scn_command_find("transform.get")), &err), -1);
  CU_ASSERT_STRING_EQUAL(err.message, "unknown field \"partal\"");
  cJSON_Delete(op);
  scn_request_free(&rq);
}

/* Every command takes cmd, id and its own fields, and nothing else. */
static void test_every_command(void) {
  for (unsigned i = 0; i < scn_command_count; i++) {
    const scn_command_info *c = &scn_commands[i];
    scn_fieldset takes = scn_command_takes(c);
    CU_ASSERT_EQUAL(takes, c->required | c->optional | SCN_F(cmd) | SCN_F(id));
    for (unsigned f = 0; f < SCN_FIELD_COUNT; f++) {
      char line[128];
      snprintf(line, sizeof line, "{\"cmd\":\"%s\",\"%s\":null}", c->name,
               scn_field_name((scn_field)f));
      bool taken = takes & ((scn_fieldset)1 << f);
      const char *got = check_line(line, c->name, false);
      CU_ASSERT_EQUAL(got[0] == '\0', taken);
    }
  }
  scn_request_free(&rq);
}

int t_register_proto_fields(void) {
  static const t_test tests[] = {
      {"edit distance", test_edit_distance},
      {"the field a key likely misspells", test_field_suggest},
      {"unknown field message", test_unknown_field_text},
      {"members a command does not take", test_check_taken},
      {"every command, every field", test_every_command},
  };
  return T_ADD_SUITE("proto_fields", NULL, NULL, tests);
}

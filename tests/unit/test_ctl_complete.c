/* Unit tests of scenectl's Tab completion candidates (ctl_complete.h), the part of completion
 * that is not the line editor's: command names first, "key=" of the command's fields after,
 * and nothing inside a value. */
#include "ctl_complete.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* True when the candidates for word after before are exactly the NULL-terminated list, in
 * order; reports them when not. */
static bool completes(const char *before, const char *word, bool fields, ...) {
  ctl_completions c;
  ctl_complete(before, word, &c);
  va_list ap;
  va_start(ap, fields);
  bool same = c.fields == fields;
  int n = 0;
  for (const char *want; (want = va_arg(ap, const char *)); n++)
    same = same && n < c.count && strcmp(c.items[n], want) == 0;
  va_end(ap);
  same = same && n == c.count;
  if (!same) {
    fprintf(stderr, "  [%s|%s]: fields %d,", before, word, c.fields);
    for (int i = 0; i < c.count; i++)
      fprintf(stderr, " %s", c.items[i]);
    fprintf(stderr, "\n");
  }
  return same;
}

static void test_command_names(void) {
  ctl_completions c;
  ctl_complete("", "", &c);
  CU_ASSERT_FALSE(c.fields);
  CU_ASSERT_EQUAL_FATAL(c.count, (int)scn_command_count + 3);
  for (unsigned i = 0; i < scn_command_count; i++)
    CU_ASSERT_STRING_EQUAL(c.items[i], scn_commands[i].name);
  CU_ASSERT_STRING_EQUAL(c.items[scn_command_count], "help");
  CU_ASSERT(
      completes("", "transform.s", false, "transform.set_local", "transform.set_world", NULL));
  CU_ASSERT(completes("  ", "wo", false, "world.create", "world.destroy", "world.list",
                      "world.move", "world.promote", NULL));
  CU_ASSERT(completes("", "q", false, "quit", NULL));
  CU_ASSERT(completes("", "h", false, "hello", "help", NULL));
  CU_ASSERT(completes("", "transfrom", false, NULL));
  /* After help: command names only, for one word. */
  CU_ASSERT(completes("help ", "transform.g", false, "transform.get", NULL));
  CU_ASSERT(completes("help  ", "q", false, NULL));
  CU_ASSERT(completes("help transform.get ", "", false, NULL));
}

static void test_field_names(void) {
  CU_ASSERT(completes("transform.get ", "", true, "world=", "entity=", "trs=", "tick=", NULL));
  CU_ASSERT(completes("transform.get ", "t", true, "trs=", "tick=", NULL));
  /* Fields given already are not offered again, wherever they are on the line. */
  CU_ASSERT(completes("transform.get world=main ", "", true, "entity=", "trs=", "tick=", NULL));
  CU_ASSERT(completes("transform.get trs=true world=\"a b\" ", "", true, "entity=", "tick=", NULL));
  CU_ASSERT(completes("transform.set_local world=w entity=1 ", "", true,
                      "partial=", "matrix=", "matrix_b64=", "t=", "r=", "s=", NULL));
  CU_ASSERT(completes("transform.set_local world=w entity=1 ", "ma", true,
                      "matrix=", "matrix_b64=", NULL));
  CU_ASSERT(completes("ping ", "", true, NULL));
  /* Every command: its required then optional fields, as help CMD lists them. */
  for (unsigned i = 0; i < scn_command_count; i++) {
    const scn_command_info *cmd = &scn_commands[i];
    char before[64], want[512], got[512] = "";
    snprintf(before, sizeof before, "%s ", cmd->name);
    ctl_completions c;
    ctl_complete(before, "", &c);
    char req[256], opt[256];
    scn_fields_text(cmd->required, req, sizeof req);
    scn_fields_text(cmd->optional, opt, sizeof opt);
    snprintf(want, sizeof want, "%s%s%s", req, *req && *opt ? "," : "", opt);
    for (int k = 0; k < c.count; k++) {
      size_t len = strlen(c.items[k]);
      CU_ASSERT(len > 1 && c.items[k][len - 1] == '=');
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%.*s", k ? "," : "", (int)len - 1,
               c.items[k]);
    }
    CU_ASSERT_STRING_EQUAL(got, want);
  }
}

static void test_nothing_inside_values(void) {
  /* Right after key=: the value's place. */
  CU_ASSERT(completes("transform.get entity=", "", false, NULL));
  CU_ASSERT(completes("transform.get world=", "ma", false, NULL));
  /* An open quote or bracket: the same word goes on. */
  CU_ASSERT(completes("transform.create name=\"a ", "b", false, NULL));
  CU_ASSERT(completes("transform.create t=[1, ", "", false, NULL));
  CU_ASSERT(completes("transform.create t=[1, 2, 3] ", "na", true, "name=", NULL));
  /* A JSON request, an unknown command, the prompt's own words. */
  CU_ASSERT(completes("{\"cmd\": ", "", false, NULL));
  CU_ASSERT(completes("{\"cmd\":\"ping\"} ", "", false, NULL));
  CU_ASSERT(completes("no.such ", "", false, NULL));
  CU_ASSERT(completes("quit ", "", false, NULL));
}

int t_register_ctl_complete(void) {
  static const t_test tests[] = {
      {"command names", test_command_names},
      {"field names of the command typed", test_field_names},
      {"nothing inside a value", test_nothing_inside_values},
  };
  return T_ADD_SUITE("ctl_complete", NULL, NULL, tests);
}

/* Integration tests of scenectl's prompt language, read from standard input when it is not a
 * terminal (the line editor itself, with Tab completion, is left to the unit suite
 * ctl_complete): help lists the commands, results and errors print as one-shot mode prints
 * them, a mistyped command gets a "did you mean" there and in one-shot mode, and a line-by-line
 * run ends with the worst status of its lines. */
#include "client_fixtures.h"
#include "daemon_fixtures.h"
#include "scn_client.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

#define CTL(p, ...) ctl_run((p), NULL, NULL, 0, (const char *const[]){__VA_ARGS__, NULL})

/* scenectl with no command and in on standard input. */
static int ctl_lines(t_proc *p, const char *const *set, const char *in) {
  return ctl_run(p, set, in, strlen(in), (const char *const[]){NULL});
}

/* The environment of a daemon that is not there: what needs no connection still works. */
static const char *const *no_daemon(void) {
  static char port[32];
  static const char *env[] = {"SCENED_HOST=127.0.0.1", port, NULL};
  snprintf(port, sizeof port, "SCENED_PORT=%d", dead_port());
  return env;
}

static void test_prompt_help(void) {
  t_proc p;
  CU_ASSERT_EQUAL(ctl_lines(&p, no_daemon(), "help\n"), 0);
  const char *out = text_str(&p.out);
  /* The commands, each with its line of help from the table; not the command line's usage. */
  CU_ASSERT(strncmp(out, "commands", 8) == 0);
  CU_ASSERT_PTR_NULL(strstr(out, "usage:"));
  CU_ASSERT_PTR_NULL(strstr(out, "--host"));
  for (unsigned i = 0; i < scn_command_count; i++) {
    char want[256];
    snprintf(want, sizeof want, "\n  %-20s %s\n", scn_commands[i].name, scn_commands[i].help);
    CU_ASSERT(strstr(out, want) != NULL);
    if (!strstr(out, want))
      fprintf(stderr, "  help at the prompt does not list %s\n", scn_commands[i].name);
  }
  CU_ASSERT(strstr(out, "\n  help [CMD] ") && strstr(out, "\n  quit "));
  CU_ASSERT(count_lines(out) < (int)scn_command_count + 8);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  t_proc_free(&p);

  /* help CMD: a command's fields, as scenectl help CMD prints them. */
  t_proc one;
  CU_ASSERT_EQUAL(CTL(&one, "help", "transform.get"), 0);
  CU_ASSERT_EQUAL(ctl_lines(&p, no_daemon(), "help transform.get\nhelp subscribe\n"), 0);
  CU_ASSERT(strncmp(text_str(&p.out), text_str(&one.out), one.out.len) == 0);
  CU_ASSERT(strstr(text_str(&p.out), "  required: world,entity\n  optional: trs,tick\n") &&
            strstr(text_str(&p.out), "\nsubscribe: "));
  t_proc_free(&one);
  t_proc_free(&p);
}

/* The outputs of one-shot runs, appended: stdout to out, stderr to err. */
static void one_shot(text *out, text *err, int want_code, const char *const *args) {
  t_proc p;
  int code = ctl_run(&p, NULL, NULL, 0, args);
  CU_ASSERT_EQUAL(code, want_code);
  if (p.out.len)
    text_add(out, p.out.s, p.out.len);
  if (p.err.len)
    text_add(err, p.err.s, p.err.len);
  t_proc_free(&p);
}

static void test_prompt_prints_as_one_shot(void) {
  scn_cli *c = open_cli(clients_daemon.port, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char world[64], wa[96], ea[64], in[1024];
  double e = make_world(c, world, sizeof world, 1, 2, 3);
  CU_ASSERT_FATAL(e > 0);
  snprintf(wa, sizeof wa, "world=%s", world);
  snprintf(ea, sizeof ea, "entity=%.0f", e);

  /* The same requests one by one: results on stdout without "ok" or "id", errors as
   * CODE: message on stderr. (Results without a tick, which moves between runs.) */
  text out = {0}, err = {0};
  one_shot(&out, &err, 0, (const char *const[]){"ping", NULL});
  one_shot(&out, &err, 0, (const char *const[]){"transform.children", wa, ea, NULL});
  one_shot(&out, &err, 1, (const char *const[]){"transform.get", wa, "entity=99999", NULL});
  one_shot(&out, &err, 0, (const char *const[]){"world.list", "id=7", NULL});
  one_shot(&out, &err, 1, (const char *const[]){"world.create", wa, NULL});
  CU_ASSERT(out.len > 0 && err.len > 0);

  snprintf(in, sizeof in,
           "ping\n"
           "transform.children %s %s\n"
           "transform.get %s entity=99999\n"
           "{\"id\":7,\"cmd\":\"world.list\"}\n"
           "world.create %s\n",
           wa, ea, wa, wa);
  t_proc p;
  CU_ASSERT_EQUAL(ctl_lines(&p, NULL, in), 1); /* the worst of 0 and 1 */
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), text_str(&out));
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), text_str(&err));
  CU_ASSERT_PTR_NULL(strstr(text_str(&p.out), "\"ok\""));
  if (strcmp(text_str(&p.out), text_str(&out)) || strcmp(text_str(&p.err), text_str(&err))) {
    t_report_text("prompt stdout", text_str(&p.out));
    t_report_text("prompt stderr", text_str(&p.err));
  }
  t_proc_free(&p);
  text_free(&out);
  text_free(&err);
  CU_ASSERT(call_fine(c, "{\"cmd\":\"world.destroy\",\"world\":\"%s\"}", world));
  scn_cli_close(c);
}

static void test_did_you_mean(void) {
  static const char want[] =
      "scenectl: unknown command \"transfrom.get\"; did you mean \"transform.get\"?\n";
  /* One-shot: a usage error, nothing sent (with no daemon there, still this error). */
  t_proc p;
  CU_ASSERT_EQUAL(ctl_run(&p, no_daemon(), NULL, 0,
                          (const char *const[]){"transfrom.get", "world=w", "entity=1", NULL}),
                  2);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), want);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(CTL(&p, "hlep"), 2);
  CU_ASSERT_STRING_EQUAL(text_str(&p.err),
                         "scenectl: unknown command \"hlep\"; did you mean \"help\"?\n");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(CTL(&p, "helo"), 2);
  CU_ASSERT_STRING_EQUAL(
      text_str(&p.err),
      "scenectl: unknown command \"helo\"; did you mean \"hello\" or \"help\"?\n");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(CTL(&p, "help", "wrold.lsit"), 2);
  CU_ASSERT_STRING_EQUAL(
      text_str(&p.err), "scenectl: unknown command \"wrold.lsit\"; did you mean \"world.list\"?\n");
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  t_proc_free(&p);
  /* Near no name: the daemon's answer, which a newer daemon may make a result. */
  CU_ASSERT_EQUAL(CTL(&p, "no.such.command"), 1);
  CU_ASSERT(strncmp(text_str(&p.err), "UNKNOWN_COMMAND: ", 17) == 0);
  t_proc_free(&p);

  /* At the prompt: the same line, and the lines after it still run; the run exits 2. */
  CU_ASSERT_EQUAL(ctl_lines(&p, NULL, "transfrom.get world=w entity=1\nping\nqiut\n"), 2);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  CU_ASSERT_STRING_EQUAL(text_str(&p.err),
                         "scenectl: unknown command \"transfrom.get\"; did you mean "
                         "\"transform.get\"?\nscenectl: unknown command \"qiut\"; did you mean "
                         "\"quit\"?\n");
  t_proc_free(&p);
}

/* With no command and standard input not a terminal, scenectl reads the prompt's lines from it
 * (it used to print its usage and exit 2). */
static void test_lines_from_stdin(void) {
  t_proc p;
  CU_ASSERT_EQUAL(ctl_lines(&p, NULL, "ping\n"), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  t_proc_free(&p);
  /* Blank lines, a CRLF line, a last line with no line end; quit ends the run. */
  CU_ASSERT_EQUAL(ctl_lines(&p, NULL, "\n  \t\nping\r\n\nping id=2"), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n{}\n");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(ctl_lines(&p, NULL, "ping\nquit\nping\n"), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  t_proc_free(&p);
  /* A usage error in a line (key without =): reported, the run goes on, exit 2. */
  CU_ASSERT_EQUAL(ctl_lines(&p, NULL, "ping novalue\nping\n"), 2);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "{}\n");
  CU_ASSERT(strstr(text_str(&p.err), "key=value") != NULL);
  t_proc_free(&p);
  CU_ASSERT_EQUAL(ctl_lines(&p, NULL, "{\"cmd\":\n"), 2);
  CU_ASSERT(strncmp(text_str(&p.err), "scenectl: not a JSON request", 28) == 0);
  t_proc_free(&p);
  /* Nothing to send, nothing connected: no daemon needed. */
  CU_ASSERT_EQUAL(ctl_lines(&p, no_daemon(), ""), 0);
  CU_ASSERT_STRING_EQUAL(text_str(&p.out), "");
  CU_ASSERT_STRING_EQUAL(text_str(&p.err), "");
  t_proc_free(&p);
  CU_ASSERT_EQUAL(ctl_run(&p, no_daemon(), NULL, 0, (const char *const[]){NULL}), 0);
  t_proc_free(&p);
  /* A request with no daemon: the connection error, and the run stops there. */
  CU_ASSERT_EQUAL(ctl_lines(&p, no_daemon(), "help ping\nping\nhelp ping\n"), 2);
  CU_ASSERT(strncmp(text_str(&p.err), "scenectl: cannot connect to 127.0.0.1:", 38) == 0);
  CU_ASSERT_EQUAL(count_lines(text_str(&p.out)), 3); /* one help ping, not the second */
  t_proc_free(&p);
}

int t_register_clients_scenectl_prompt(void) {
  static const t_test tests[] = {
      {"help lists the commands", test_prompt_help},
      {"results and errors print as in one-shot mode", test_prompt_prints_as_one_shot},
      {"did you mean, one-shot and at the prompt", test_did_you_mean},
      {"lines from standard input", test_lines_from_stdin},
  };
  return T_ADD_SUITE("clients_scenectl_prompt", clients_suite_init, clients_suite_clean, tests);
}

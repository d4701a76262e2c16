/* scenectl: the command line for scripts.
 *
 *   scenectl [--host H] [--port P] [--token T] [--matrices json|b64] [--follower-reads] [TLS]
 *            CMD [key=value ...]
 *   scenectl [...] --pipe                  NDJSON requests on stdin, one response per line
 *   scenectl [...] subscribe [world=]W [root=E] [hz=N] [near...] [packed...] [--frames N]
 *   scenectl [...]                         on a terminal: an interactive prompt; with standard
 *                                          input a pipe or file, the prompt's lines read from it
 *   scenectl help [CMD]                    the commands, or one command's fields
 *
 * TLS: --tls, --tls-ca FILE (the CA that signed the daemon's certificate), --tls-cert FILE and
 * --tls-key FILE (a client certificate, for a daemon with --tls-ca).
 *
 * A value is taken as JSON when it parses as JSON, otherwise as a string. Matrices are shown
 * as JSON arrays; --matrices b64 asks the daemon for base64 (exact float32 bits) and passes it
 * through unchanged. --follower-reads says hello with "follower_reads": true (in a cluster with
 * replicas, a daemon that follows the world's group answers reads and subscribe from its copy).
 * A key its command does not take (proto/wire.h) is warned about on stderr,
 * and sent all the same: the daemon's answer decides. Exit codes: 0 on success, 1 on an error
 * reply (CODE: message on stderr), 2 on usage or connection errors; lines read at the prompt,
 * the worst of theirs. A command the table lacks but that is near one of its names is a usage
 * error with a "did you mean".
 */
#define _GNU_SOURCE /* memmem, strdup */
#include "ctl_complete.h"
#include "ctl_fields.h"
#include "ctl_near.h"
#include "ctl_packed.h"
#include "ctl_readline.h"
#include "ctl_suggest.h"
#include "ctl_words.h"
#include "scn_client.h"
#include "wire.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_REPLY 1
#define EXIT_USAGE 2

typedef struct ctl_opts {
  scn_cli_options cli;
  bool pipe;
  long frames; /* subscribe: stop after this many frames (0: never) */
} ctl_opts;

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig) {
  (void)sig;
  interrupted = 1;
}

/* The command table: each name with its line of help. */
static void list_commands(FILE *f) {
  for (unsigned i = 0; i < scn_command_count; i++)
    fprintf(f, "  %-20s %s\n", scn_commands[i].name, scn_commands[i].help);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: scenectl [--host H] [--port P] [--token T] [--matrices json|b64] CMD "
          "[key=value ...]\n"
          "       scenectl [--host H] [--port P] [--token T] --pipe\n"
          "       scenectl [--host H] [--port P] [--token T] subscribe [world=]W [root=E] [hz=N] "
          "[near...]\n"
          "                [packed...] [--frames N]\n"
          "       scenectl                      (on a terminal: interactive prompt; else the\n"
          "                                     prompt's lines from standard input)\n"
          "       scenectl help [CMD]           (the fields of a command)\n\n"
          "Exit status: 0, 1 when the daemon answers an error (CODE: message on stderr), 2 on\n"
          "a usage or connection error; lines from standard input, the worst of theirs.\n\n"
          "TLS: --tls (verified against the system's CAs), --tls-ca FILE (the CA that signed "
          "the\ndaemon's certificate; implies --tls), --tls-cert FILE --tls-key FILE (a client\n"
          "certificate, for a daemon started with --tls-ca).\n\n"
          "--follower-reads: hello with \"follower_reads\": true; in a cluster with replicas a\n"
          "daemon that follows the world's group answers transform.get, .children, .find,\n"
          ".relative and subscribe from its copy (which may lag the owner) instead of MOVED.\n\n"
          "Each value is parsed as JSON when it is valid JSON, otherwise taken as a string:\n"
          "  scenectl transform.create world=main t=[1,2,3] name=car\n"
          "Matrices show as JSON arrays; --matrices b64 passes the daemon's base64 (16\n"
          "little-endian float32, exact) through unchanged, and matrix_b64=... sets one.\n"
          "Defaults come from SCENED_HOST, SCENED_PORT and SCENED_AUTH_TOKEN.\n\n"
          "subscribe prints events as JSON lines until interrupted, N frames, or the end of\n"
          "the subscription. A region (only what is near a point or an entity):\n"
          "  near='{\"entity\":5,\"radius\":10,\"margin\":2}'  the protocol's object, or\n"
          "  near.point=X,Y,Z | near.entity=E   the center, fixed or following E\n"
          "  near.radius=R near.margin=M        in scope within R, out beyond R + M\n"
          "  near.bands=R:HZ,R:HZ               at most HZ frames a second within R\n"
          "  scenectl subscribe main near.entity=5 near.radius=10 near.margin=2\n"
          "Packed frames (quantized: translations to the step, rotations within 0.5 degrees),\n"
          "printed decoded, as the frames of --matrices json or b64 are printed:\n"
          "  packed=STEP | packed.step=S        the translation quantum (e.g. 0.001)\n"
          "  packed.origin=X,Y,Z                the grid's origin (default 0,0,0)\n"
          "  packed='{\"step\":0.001,\"origin\":[0,0,0]}'  the protocol's object\n"
          "  scenectl subscribe main packed=0.001\n\n"
          "commands:\n");
  list_commands(f);
}

/* The prompt's help: its commands, without the command line's options. */
static void prompt_help(void) {
  printf("commands (help CMD for one's fields; Tab completes names):\n");
  list_commands(stdout);
  printf("  %-20s %s\n", "help [CMD]", "these commands, or one command's fields");
  printf("  %-20s %s\n", "quit", "leave (as exit, or the end of input)");
  printf("A line may also be a request in JSON: {\"cmd\":\"ping\"}\n");
}

static void command_help(const scn_command_info *c) {
  printf("%s: %s\n", c->name, c->help);
  char required[512], optional[512];
  scn_fields_text(c->required, required, sizeof required);
  scn_fields_text(c->optional, optional, sizeof optional);
  printf("  required: %s\n", required[0] ? required : "(none)");
  printf("  optional: %s\n", optional[0] ? optional : "(none)");
}

/* help CMD: its fields, from the command table; a CMD not in it is a usage error, with the
 * names near it. */
static int help_command(const char *name) {
  const scn_command_info *c = scn_command_find(name);
  if (c) {
    command_help(c);
    return 0;
  }
  char hint[256];
  if (!ctl_suggest_text(name, NULL, hint, sizeof hint))
    snprintf(hint, sizeof hint, " (help lists the commands)");
  fprintf(stderr, "scenectl: unknown command \"%s\"%s\n", name, hint);
  return EXIT_USAGE;
}

/* help [CMD]: the usage with the commands, or the fields of one. */
static int run_help(int argc, char **argv) {
  if (argc == 0) {
    usage(stdout);
    return 0;
  }
  return help_command(argv[0]);
}

/* A command the table lacks but near one of its names or of extra (NULL-terminated): reported
 * with the suggestion, true. A name near none is left to the daemon, which may know commands
 * this scenectl does not. */
static bool mistyped(const char *cmd, const char *const *extra) {
  char hint[256];
  if (scn_command_find(cmd) || !ctl_suggest_text(cmd, extra, hint, sizeof hint))
    return false;
  fprintf(stderr, "scenectl: unknown command \"%s\"%s\n", cmd, hint);
  return true;
}

/* "key=value": value as JSON when it parses, else a string. */
static int add_pair(cJSON *req, const char *arg) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg) {
    fprintf(stderr, "scenectl: expected key=value, got \"%s\"\n", arg);
    return -1;
  }
  char key[128];
  size_t klen = (size_t)(eq - arg);
  if (klen >= sizeof key) {
    fprintf(stderr, "scenectl: key too long in \"%s\"\n", arg);
    return -1;
  }
  memcpy(key, arg, klen);
  key[klen] = '\0';
  const char *end = NULL;
  cJSON *v = cJSON_ParseWithOpts(eq + 1, &end, 1);
  if (!v)
    v = cJSON_CreateString(eq + 1);
  cJSON_DeleteItemFromObjectCaseSensitive(req, key);
  cJSON_AddItemToObject(req, key, v);
  return 0;
}

/* cmd's request from key=value arguments; subscribe also takes its world bare (subscribe W),
 * and subscribe and subscribe.update the near and packed forms (ctl_near.h, ctl_packed.h).
 * NULL on a usage error. */
static cJSON *build_request(const char *cmd, int argc, char **argv) {
  bool subscribe = strcmp(cmd, "subscribe") == 0;
  bool near = subscribe || strcmp(cmd, "subscribe.update") == 0;
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "cmd", cmd);
  for (int i = 0; i < argc; i++) {
    int rc;
    if (subscribe && i == 0 && !strchr(argv[i], '='))
      rc = cJSON_AddStringToObject(req, "world", argv[i]) ? 0 : -1;
    else if (near && ctl_near_arg(argv[i]))
      rc = ctl_near_add(req, argv[i]);
    else if (near && ctl_packed_arg(argv[i]))
      rc = ctl_packed_add(req, argv[i]);
    else
      rc = add_pair(req, argv[i]);
    if (rc != 0) {
      cJSON_Delete(req);
      return NULL;
    }
  }
  ctl_fields_warn(req, stderr);
  return req;
}

static void print_result(const cJSON *resp) {
  cJSON *copy = cJSON_Duplicate(resp, 1);
  cJSON_DeleteItemFromObjectCaseSensitive(copy, "ok");
  cJSON_DeleteItemFromObjectCaseSensitive(copy, "id");
  char *text = cJSON_PrintUnformatted(copy);
  printf("%s\n", text ? text : "{}");
  cJSON_free(text);
  cJSON_Delete(copy);
}

static int report_error(const cJSON *resp) {
  const char *code = scn_cli_reply_code(resp), *msg = scn_cli_reply_message(resp);
  fprintf(stderr, "%s: %s\n", code ? code : "ERROR", msg ? msg : "");
  return EXIT_REPLY;
}

static scn_cli *connect_or_report(const ctl_opts *o) {
  char err[256];
  scn_cli *c = scn_cli_connect(&o->cli, err, sizeof err);
  if (!c)
    fprintf(stderr, "scenectl: %s\n", err);
  return c;
}

/* Sends req and prints the outcome, the same in one-shot mode and at the prompt: the result's
 * members on stdout (0), CODE: message on stderr (EXIT_REPLY), or the library's error
 * (EXIT_USAGE, with its code in *rc). */
static int call_and_print(scn_cli *c, const cJSON *req, int *rc) {
  cJSON *resp = NULL;
  int status = 0;
  *rc = scn_cli_call(c, req, &resp);
  if (*rc == SCN_CLI_OK) {
    print_result(resp);
  } else if (*rc == SCN_CLI_EREPLY) {
    status = report_error(resp);
  } else {
    fprintf(stderr, "scenectl: %s\n", scn_cli_error(c));
    status = EXIT_USAGE;
  }
  cJSON_Delete(resp);
  return status;
}

static int run_one(const ctl_opts *o, const char *cmd, int argc, char **argv) {
  cJSON *req = build_request(cmd, argc, argv);
  if (!req)
    return EXIT_USAGE;
  scn_cli *c = connect_or_report(o);
  if (!c) {
    cJSON_Delete(req);
    return EXIT_USAGE;
  }
  int rc, status = call_and_print(c, req, &rc);
  cJSON_Delete(req);
  scn_cli_close(c);
  return status;
}

/* --pipe: requests are pipelined in windows, responses written in order. */
static bool blank(const char *s) {
  for (; *s; s++)
    if (!isspace((unsigned char)*s))
      return false;
  return true;
}

static int read_responses(scn_cli *c, long *outstanding, long keep, bool *any_error) {
  while (*outstanding > keep) {
    const char *line;
    size_t len;
    int rc = scn_cli_read_line(c, &line, &len, 30000);
    if (rc != SCN_CLI_OK) {
      fprintf(stderr, "scenectl: %s\n", scn_cli_error(c));
      return -1;
    }
    if (len >= 9 && memmem(line, len < 64 ? len : 64, "\"event\"", 7) && line[0] == '{' &&
        !memmem(line, len < 96 ? len : 96, "\"ok\":", 5))
      continue; /* a stream event, not a response */
    if (memmem(line, len, "\"ok\":false", 10))
      *any_error = true;
    fwrite(line, 1, len, stdout);
    fputc('\n', stdout);
    (*outstanding)--;
  }
  return 0;
}

static int run_pipe(const ctl_opts *o) {
  scn_cli *c = connect_or_report(o);
  if (!c)
    return EXIT_USAGE;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  long outstanding = 0;
  bool any_error = false;
  int status = 0;
  while ((n = getline(&line, &cap, stdin)) > 0) {
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
      line[--n] = '\0';
    if (blank(line))
      continue; /* the daemon answers no blank line */
    if (scn_cli_send_line(c, line, (size_t)n) != SCN_CLI_OK) {
      status = EXIT_USAGE;
      break;
    }
    if (++outstanding >= 4096 &&
        (scn_cli_flush(c) != SCN_CLI_OK || read_responses(c, &outstanding, 1024, &any_error))) {
      status = EXIT_USAGE;
      break;
    }
  }
  free(line);
  if (status == 0 &&
      (scn_cli_flush(c) != SCN_CLI_OK || read_responses(c, &outstanding, 0, &any_error) != 0))
    status = EXIT_USAGE;
  fflush(stdout);
  scn_cli_close(c);
  return status ? status : any_error ? EXIT_REPLY : 0;
}

/* subscribe: events to stdout until interrupted, N frames, or the subscription ends. */
typedef struct sub_state {
  long frames, limit;
  bool ended;
} sub_state;

static void print_event(void *ud, const cJSON *ev) {
  sub_state *st = ud;
  if ((st->limit && st->frames >= st->limit) || st->ended)
    return; /* events that arrived in the same read as the last one wanted */
  char *text = cJSON_PrintUnformatted(ev);
  if (text)
    printf("%s\n", text);
  cJSON_free(text);
  fflush(stdout);
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(ev, "event");
  if (cJSON_IsString(kind) && strcmp(kind->valuestring, "frame") == 0)
    st->frames++;
  else if (cJSON_IsString(kind))
    st->ended = true; /* world_destroyed or unsubscribed */
}

static int run_subscribe(const ctl_opts *o, int argc, char **argv) {
  cJSON *req = build_request("subscribe", argc, argv), *resp = NULL;
  if (!req)
    return EXIT_USAGE;
  scn_cli *c = connect_or_report(o);
  if (!c) {
    cJSON_Delete(req);
    return EXIT_USAGE;
  }
  sub_state st = {.limit = o->frames};
  scn_cli_on_event(c, print_event, &st);
  int rc = scn_cli_call(c, req, &resp), status = 0;
  cJSON_Delete(req);
  if (rc == SCN_CLI_EREPLY) {
    status = report_error(resp);
  } else if (rc != SCN_CLI_OK) {
    fprintf(stderr, "scenectl: %s\n", scn_cli_error(c));
    status = EXIT_USAGE;
  }
  cJSON_Delete(resp);
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  while (status == 0 && !interrupted && !st.ended && (!st.limit || st.frames < st.limit)) {
    rc = scn_cli_poll_events(c, 200);
    if (rc < 0 && rc != SCN_CLI_ETIMEOUT) {
      fprintf(stderr, "scenectl: %s\n", scn_cli_error(c));
      status = EXIT_USAGE;
    }
  }
  scn_cli_close(c);
  return status;
}

/* A port number from 1 to 65535, or -1. */
static int parse_port(const char *v) {
  char *end;
  long p = strtol(v, &end, 10);
  return end == v || *end || p <= 0 || p > 65535 ? -1 : (int)p;
}

/* ---- the prompt ----------------------------------------------------------------------------- */

/* The prompt's lines come from the line editor on a terminal, else straight from standard input
 * (echo help | scenectl); either way each is run and printed as one-shot mode would. */
typedef struct prompt {
  const ctl_opts *o;
  scn_cli *c; /* connected for the first request */
  bool lost;  /* the connection is gone: no more lines */
} prompt;

#define LINE_QUIT (-1)

static void print_event_line(void *ud, const cJSON *ev) {
  (void)ud;
  char *text = cJSON_PrintUnformatted(ev);
  if (text)
    printf("%s\n", text);
  cJSON_free(text);
}

static scn_cli *prompt_cli(prompt *p) {
  if (!p->c && !p->lost) {
    p->c = connect_or_report(p->o);
    if (p->c)
      scn_cli_on_event(p->c, print_event_line, NULL);
    p->lost = !p->c;
  }
  return p->c;
}

static int prompt_request(prompt *p, const cJSON *req) {
  scn_cli *c = prompt_cli(p);
  if (!c)
    return EXIT_USAGE;
  int rc, status = call_and_print(c, req, &rc);
  p->lost = rc == SCN_CLI_ECLOSED || rc == SCN_CLI_EIO;
  if (!p->lost)
    scn_cli_poll_events(c, 0);
  return status;
}

/* One line: what one-shot mode would exit with for it (0, EXIT_REPLY, EXIT_USAGE), or
 * LINE_QUIT. */
static int prompt_line(prompt *p, const char *line) {
  char *copy = strdup(line), *words[128];
  if (!copy)
    return EXIT_USAGE;
  int n = ctl_split_words(copy, words, 128), status = 0;
  cJSON *req = NULL;
  if (n == 0) {
    /* nothing */
  } else if (!strcmp(words[0], "quit") || !strcmp(words[0], "exit")) {
    status = LINE_QUIT;
  } else if (!strcmp(words[0], "help")) {
    if (n == 1)
      prompt_help();
    else
      status = help_command(words[1]);
  } else if (words[0][0] == '{') {
    if (!(req = cJSON_Parse(line))) {
      fprintf(stderr, "scenectl: not a JSON request: %s\n", line);
      status = EXIT_USAGE;
    }
  } else if (mistyped(words[0], ctl_prompt_words) ||
             !(req = build_request(words[0], n - 1, words + 1))) {
    status = EXIT_USAGE;
  }
  if (req)
    status = prompt_request(p, req);
  cJSON_Delete(req);
  free(copy);
  fflush(stdout); /* before the next line's errors, where both go to one file */
  return status;
}

/* Exits with the worst of the lines' statuses, or EXIT_USAGE when the connection is lost. */
static int run_prompt(const ctl_opts *o, bool interactive) {
  prompt p = {.o = o};
  if (interactive) {
    if (!prompt_cli(&p))
      return EXIT_USAGE;
    ctl_readline_init();
    printf("connected to %s:%d; \"help\" lists commands, \"help CMD\" its fields, \"quit\" "
           "leaves.\n",
           o->cli.host ? o->cli.host : "127.0.0.1", o->cli.port ? o->cli.port : 7878);
  }
  char *buf = NULL;
  size_t cap = 0;
  int worst = 0;
  while (!p.lost) {
    char *line = NULL;
    if (interactive) {
      line = ctl_readline("scened> ");
    } else {
      ssize_t len = getline(&buf, &cap, stdin);
      while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        buf[--len] = '\0';
      line = len >= 0 ? buf : NULL;
    }
    if (!line)
      break;
    int status = prompt_line(&p, line);
    if (interactive)
      free(line);
    if (status == LINE_QUIT)
      break;
    worst = status > worst ? status : worst;
  }
  free(buf);
  if (p.c)
    scn_cli_close(p.c);
  return p.lost ? EXIT_USAGE : worst;
}

int main(int argc, char **argv) {
  ctl_opts o = {0};
  const char *env;
  if ((env = getenv("SCENED_HOST")) && *env)
    o.cli.host = env;
  const char *env_port = getenv("SCENED_PORT");
  if ((env = getenv("SCENED_AUTH_TOKEN")) && *env)
    o.cli.token = env;
  int i = 1;
  const char *cmd = NULL;
  char *rest[256];
  int nrest = 0;
  for (; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--pipe")) {
      o.pipe = true;
    } else if (!strcmp(a, "--host") && v) {
      o.cli.host = v, i++;
    } else if (!strcmp(a, "--port") && v) {
      if ((o.cli.port = parse_port(v)) < 0) {
        fprintf(stderr, "scenectl: invalid port \"%s\"\n", v);
        return EXIT_USAGE;
      }
      i++;
    } else if (!strcmp(a, "--token") && v) {
      o.cli.token = v, i++;
    } else if (!strcmp(a, "--follower-reads")) {
      o.cli.follower_reads = true;
    } else if (!strcmp(a, "--tls")) {
      o.cli.tls = true;
    } else if (!strcmp(a, "--tls-ca") && v) {
      o.cli.tls_ca = v, i++;
    } else if (!strcmp(a, "--tls-cert") && v) {
      o.cli.tls_cert = v, i++;
    } else if (!strcmp(a, "--tls-key") && v) {
      o.cli.tls_key = v, i++;
    } else if (!strcmp(a, "--matrices") && v) {
      if (strcmp(v, "json") && strcmp(v, "b64")) {
        fprintf(stderr, "scenectl: --matrices must be json or b64, not \"%s\"\n", v);
        return EXIT_USAGE;
      }
      o.cli.matrices = strcmp(v, "b64") == 0 ? SCN_CLI_MATRICES_B64 : SCN_CLI_MATRICES_JSON;
      i++;
    } else if (!strcmp(a, "--frames") && v) {
      o.frames = atol(v), i++;
    } else if (!strcmp(a, "--timeout") && v) {
      o.cli.timeout_ms = atoi(v), i++;
    } else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "scenectl: unknown option \"%s\"\n", a);
      usage(stderr);
      return EXIT_USAGE;
    } else if (!cmd) {
      cmd = a;
    } else if (nrest < 256) {
      rest[nrest++] = argv[i];
    }
  }
  if (!o.cli.port && env_port && *env_port && (o.cli.port = parse_port(env_port)) < 0) {
    fprintf(stderr, "scenectl: invalid port \"%s\" in SCENED_PORT\n", env_port);
    return EXIT_USAGE;
  }
  if (o.pipe)
    return cmd ? (usage(stderr), EXIT_USAGE) : run_pipe(&o);
  if (!cmd)
    return run_prompt(&o, isatty(STDIN_FILENO));
  if (!strcmp(cmd, "subscribe"))
    return run_subscribe(&o, nrest, rest);
  if (!strcmp(cmd, "help"))
    return run_help(nrest, rest);
  if (mistyped(cmd, (const char *const[]){"help", NULL}))
    return EXIT_USAGE;
  return run_one(&o, cmd, nrest, rest);
}

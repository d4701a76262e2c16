/* Rights against the real daemon (--acl): every command refused to a token without its right,
 * with nothing changed; anonymous connections; world-name prefixes in commands, subscriptions,
 * batches and world.list; entity.destroy and the prefix *; what hello answers; SIGHUP reloads
 * (a broken file keeps the rules in force; subscriptions no longer allowed end); the files
 * and flags refused at start; tokens never in the log; the count of UNAUTHORIZED answers. */
#include "daemon_fixtures.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static const char *acl_path(void) {
  static char p[128];
  snprintf(p, sizeof p, "%s/acl", dir);
  return p;
}

/* The hex SHA-256 of a token, as the access list holds it. */
static const char *hash_of(const char *token) {
  static char hex[4][65];
  static int next;
  unsigned char md[32];
  unsigned len = 0;
  EVP_Digest(token, strlen(token), md, &len, EVP_sha256(), NULL);
  char *out = hex[next++ % 4];
  for (int i = 0; i < 32; i++)
    sprintf(out + 2 * i, "%02x", md[i]);
  return out;
}

/* Writes the access list: rules of "token rights prefixes", one string each. */
static void write_acl(const char *const *rules) {
  FILE *f = fopen(acl_path(), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "# written by the test\n\n");
  for (int i = 0; rules[i]; i++) {
    char token[64];
    const char *space = strchr(rules[i], ' ');
    snprintf(token, sizeof token, "%.*s", (int)(space - rules[i]), rules[i]);
    fprintf(f, "%s %s   # %d\n", hash_of(token), space + 1, i);
  }
  fclose(f);
}

static const char *const rules[] = {
    "op-token read,write,admin *", "match7-token read,write,admin match7.",
    "no-read write,admin *",       "no-write read,admin *",
    "no-admin read,write *",       "no-cluster read,write,admin *",
    "reader read match7.,match8.", NULL};

static bool start_acl(t_daemon *d, const char *const *extra) {
  const char *args[16] = {"--acl", acl_path()};
  int n = 2;
  for (int i = 0; extra && extra[i] && n < 14; i++)
    args[n++] = extra[i];
  args[n] = NULL;
  return START(d, args);
}

/* A new connection that said hello with token (NULL: none). */
static bool as(t_client *c, const t_daemon *d, const char *token) {
  if (!CONNECT(c, d->port))
    return false;
  if (token)
    OKD(c, "{\"cmd\":\"hello\",\"token\":\"%s\"}", token);
  return true;
}

/* Everything an operator can see, as one string: to show that a refusal changed nothing. */
static char *state_of(t_client *op, long long *entities, int n) {
  text t = {0};
  cJSON *r = OK(op, "{\"cmd\":\"world.list\"}");
  char *s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(r, "worlds"));
  text_addf(&t, "%s\n", s);
  free(s);
  cJSON_Delete(r);
  for (int i = 0; i < n; i++) {
    r = CALL(op, "{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":%lld}", entities[i]);
    cJSON_DeleteItemFromObjectCaseSensitive(r, "tick");
    s = cJSON_PrintUnformatted(r);
    text_addf(&t, "%s\n", s);
    free(s);
    cJSON_Delete(r);
  }
  r = OK(op, "{\"cmd\":\"info\"}");
  text_addf(&t, "worlds=%g entities=%g transforms=%g subscriptions=%g\n", t_resp_num(r, "worlds"),
            t_resp_num(r, "entities"), t_resp_num(r, "transforms"), t_resp_num(r, "subscriptions"));
  cJSON_Delete(r);
  return t.s;
}

/* ---- every command without its right ------------------------------------------------------ */

static void test_every_command_needs_its_right(void) {
  char data[64];
  CU_ASSERT_FATAL(t_temp_dir(data, sizeof data, "acl-data"));
  write_acl(rules);
  t_daemon d;
  const char *extra[] = {"--data", data, NULL};
  if (!start_acl(&d, extra))
    return;
  t_client op;
  if (!as(&op, &d, "op-token"))
    return;
  OKD(&op, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  long long e[3];
  for (int i = 0; i < 3; i++) {
    cJSON *r = OK(&op, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"n%d\"%s}", i,
                  i == 2 ? "" : ",\"t\":[1,2,3]");
    e[i] = (long long)t_resp_id(r, "entity");
    cJSON_Delete(r);
  }
  OKD(&op, "{\"cmd\":\"transform.link\",\"world\":\"w\",\"entity\":%lld,\"parent\":%lld}", e[1],
      e[0]);
  char *before = state_of(&op, e, 3);
  /* A valid request for every command (%1$lld, %2$lld: entities of world w). */
  static const struct {
    const char *cmd, *request;
  } requests[] = {
      {"ping", "{\"cmd\":\"ping\"}"},
      {"hello", "{\"cmd\":\"hello\"}"},
      {"world.create", "{\"cmd\":\"world.create\",\"world\":\"w2\"}"},
      {"world.destroy", "{\"cmd\":\"world.destroy\",\"world\":\"w\"}"},
      {"world.list", "{\"cmd\":\"world.list\"}"},
      {"entity.create", "{\"cmd\":\"entity.create\"}"},
      {"entity.destroy", "{\"cmd\":\"entity.destroy\",\"entity\":%1$lld}"},
      {"transform.create", "{\"cmd\":\"transform.create\",\"world\":\"w\"}"},
      {"transform.destroy", "{\"cmd\":\"transform.destroy\",\"world\":\"w\",\"entity\":%2$lld}"},
      {"transform.link",
       "{\"cmd\":\"transform.link\",\"world\":\"w\",\"entity\":%1$lld,\"parent\":%2$lld}"},
      {"transform.unlink", "{\"cmd\":\"transform.unlink\",\"world\":\"w\",\"entity\":%2$lld}"},
      {"transform.set_local",
       "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%1$lld,\"t\":[9,9,9]}"},
      {"transform.set_world",
       "{\"cmd\":\"transform.set_world\",\"world\":\"w\",\"entity\":%2$lld,\"t\":[9,9,9]}"},
      {"transform.get", "{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":%1$lld}"},
      {"transform.children", "{\"cmd\":\"transform.children\",\"world\":\"w\",\"entity\":%1$lld}"},
      {"transform.rename",
       "{\"cmd\":\"transform.rename\",\"world\":\"w\",\"entity\":%1$lld,\"name\":\"x\"}"},
      {"transform.find", "{\"cmd\":\"transform.find\",\"world\":\"w\",\"path\":\"n0\"}"},
      {"transform.relative",
       "{\"cmd\":\"transform.relative\",\"world\":\"w\",\"entity\":%1$lld,\"to\":%2$lld}"},
      {"batch", "{\"cmd\":\"batch\",\"world\":\"w\",\"ops\":[{\"cmd\":\"transform.set_local\","
                "\"entity\":%1$lld,\"t\":[7,7,7]}]}"},
      {"subscribe", "{\"cmd\":\"subscribe\",\"world\":\"w\"}"},
      {"unsubscribe", "{\"cmd\":\"unsubscribe\",\"sub\":1}"},
      {"subscribe.update", "{\"cmd\":\"subscribe.update\",\"sub\":1,\"near\":null}"},
      {"info", "{\"cmd\":\"info\"}"},
      {"save", "{\"cmd\":\"save\"}"},
      {"world.move", "{\"cmd\":\"world.move\",\"world\":\"w\",\"to\":\"elsewhere\"}"},
      {"cluster.nodes", "{\"cmd\":\"cluster.nodes\"}"},
      {"replicate", "{\"cmd\":\"replicate\",\"group\":\"w\",\"epoch\":1,\"from\":1}"},
      {"world.promote", "{\"cmd\":\"world.promote\",\"world\":\"w\",\"node\":\"n\"}"},
  };
  const size_t nreq = sizeof requests / sizeof requests[0];
  for (unsigned i = 0; i < scn_command_count; i++) {
    const scn_command_info *cmd = &scn_commands[i];
    size_t k = 0;
    while (k < nreq && strcmp(requests[k].cmd, cmd->name) != 0)
      k++;
    CU_ASSERT_TRUE(k < nreq); /* a command added to the table needs its request here */
    if (k == nreq) {
      fprintf(stderr, "  no request for %s\n", cmd->name);
      continue;
    }
    const char *token = cmd->right == SCN_RIGHT(read)    ? "no-read"
                        : cmd->right == SCN_RIGHT(write) ? "no-write"
                        : cmd->right == SCN_RIGHT(admin) ? "no-admin"
                                                         : "no-cluster";
    t_client c;
    if (!as(&c, &d, token))
      continue;
    char line[512];
    snprintf(line, sizeof line, requests[k].request, e[0], e[1]);
    char *message = NULL;
    ERR_MESSAGE(&c, "UNAUTHORIZED", &message, "%s", line);
    CU_ASSERT_PTR_NOT_NULL(strstr(message, cmd->name));
    free(message);
    QUIET(&c, 100); /* no event either (a subscription would send a frame) */
    t_client_close(&c);
    char *after = state_of(&op, e, 3);
    CU_ASSERT_STRING_EQUAL(after, before);
    if (strcmp(after, before) != 0)
      fprintf(stderr, "  %s changed the state:\n%s\nwas:\n%s\n", cmd->name, after, before);
    free(after);
  }
  free(before);
  /* The refused save wrote nothing. */
  char snap[128];
  snprintf(snap, sizeof snap, "%s/snapshot.scn", data);
  CU_ASSERT_NOT_EQUAL(access(snap, F_OK), 0);
  /* Each refusal is counted under its command. */
  char *page;
  CU_ASSERT_EQUAL(t_http_get(d.http_port, "/metrics", &page), 200);
  for (unsigned i = 0; i < scn_command_count; i++) {
    char sample[128];
    snprintf(sample, sizeof sample, "scened_unauthorized_total{command=\"%s\"}",
             scn_commands[i].name);
    CU_ASSERT_EQUAL(page_metric(page, sample), 1);
  }
  free(page);
  t_client_close(&op);
  STOP_OK(&d, 5000);
  t_remove_tree(data);
}

/* ---- anonymous connections ---------------------------------------------------------------- */

static void test_anonymous(void) {
  write_acl(rules);
  t_daemon d;
  if (!start_acl(&d, NULL))
    return;
  t_client c;
  if (!as(&c, &d, NULL))
    return;
  OKD(&c, "{\"cmd\":\"ping\"}");
  for (unsigned i = 0; i < scn_command_count; i++)
    if (!(scn_commands[i].flags & SCN_CMD_OPEN))
      ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"%s\",\"world\":\"w\"}", scn_commands[i].name);
  ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\"}");
  ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"not-in-the-list\"}");
  ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":7}");
  /* Still anonymous after the failures; then a token that is in the list. */
  ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"world.list\"}");
  cJSON *r = OK(&c, "{\"cmd\":\"hello\",\"token\":\"reader\"}");
  char *s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(r, "rights"));
  CU_ASSERT_STRING_EQUAL(s, "[\"read\"]");
  free(s);
  s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(r, "prefixes"));
  CU_ASSERT_STRING_EQUAL(s, "[\"match7.\",\"match8.\"]");
  free(s);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"world.list\"}");
  /* A failed hello later leaves the identity as it was. */
  ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"wrong\"}");
  OKD(&c, "{\"cmd\":\"world.list\"}");
  /* Another token in the list changes it. */
  r = OK(&c, "{\"cmd\":\"hello\",\"token\":\"op-token\"}");
  s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(r, "rights"));
  CU_ASSERT_STRING_EQUAL(s, "[\"read\",\"write\",\"admin\"]");
  free(s);
  s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(r, "prefixes"));
  CU_ASSERT_STRING_EQUAL(s, "[\"*\"]");
  free(s);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"any\"}");
  t_client_close(&c);
  STOP_OK(&d, 5000);
}

/* ---- prefixes ----------------------------------------------------------------------------- */

/* The worlds info's per-world figures name, and in *match7 those of match7. */
static int info_worlds(t_client *c, int *match7) {
  cJSON *r = OK(c, "{\"cmd\":\"info\"}");
  const cJSON *per_world = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(r, "metrics"), "world_transforms");
  int n = 0;
  *match7 = 0;
  for (const cJSON *w = per_world ? per_world->child : NULL; w; w = w->next, n++)
    *match7 += strncmp(w->string, "match7.", 7) == 0;
  cJSON_Delete(r);
  return n;
}

static void test_prefixes(void) {
  write_acl(rules);
  t_daemon d;
  if (!start_acl(&d, NULL))
    return;
  t_client op, m7;
  if (!as(&op, &d, "op-token") || !as(&m7, &d, "match7-token"))
    return;
  OKD(&op, "{\"cmd\":\"world.create\",\"world\":\"match7.a\"}");
  OKD(&op, "{\"cmd\":\"world.create\",\"world\":\"match8.x\"}");
  OKD(&op, "{\"cmd\":\"world.create\",\"world\":\"match70\"}");
  cJSON *r = OK(&op, "{\"cmd\":\"transform.create\",\"world\":\"match8.x\",\"t\":[1,2,3]}");
  long long x = (long long)t_resp_id(r, "entity");
  cJSON_Delete(r);
  r = OK(&m7, "{\"cmd\":\"transform.create\",\"world\":\"match7.a\"}");
  long long a = (long long)t_resp_id(r, "entity");
  cJSON_Delete(r);
  r = OK(&op, "{\"cmd\":\"transform.get\",\"world\":\"match8.x\",\"entity\":%lld}", x);
  cJSON_DeleteItemFromObjectCaseSensitive(r, "tick"); /* the world's clock, not its state */
  char *before = cJSON_PrintUnformatted(r);
  cJSON_Delete(r);

  /* Inside its prefix, everything its rights allow. */
  OKD(&m7, "{\"cmd\":\"world.create\",\"world\":\"match7.b\"}");
  OKD(&m7, "{\"cmd\":\"transform.set_local\",\"world\":\"match7.a\",\"entity\":%lld,\"t\":[1,0,0]}",
      a);
  OKD(&m7,
      "{\"cmd\":\"batch\",\"world\":\"match7.a\",\"ops\":[{\"cmd\":\"transform.get\",\"entity\":"
      "%lld}]}",
      a);
  OKD(&m7, "{\"cmd\":\"subscribe\",\"world\":\"match7.a\"}");
  /* Outside it, nothing: existing worlds, missing ones (never NOT_FOUND), look-alikes. */
  const char *refused[] = {
      "{\"cmd\":\"transform.get\",\"world\":\"match8.x\",\"entity\":%lld}",
      "{\"cmd\":\"transform.set_local\",\"world\":\"match8.x\",\"entity\":%lld,\"t\":[5,5,5]}",
      "{\"cmd\":\"transform.destroy\",\"world\":\"match8.x\",\"entity\":%lld}",
      "{\"cmd\":\"transform.create\",\"world\":\"match8.x\",\"entity\":%lld}",
      "{\"cmd\":\"subscribe\",\"world\":\"match8.x\",\"root\":%lld}",
      "{\"cmd\":\"batch\",\"world\":\"match8.x\",\"ops\":[{\"cmd\":\"transform.set_local\","
      "\"entity\":%lld,\"t\":[5,5,5]}]}",
      "{\"cmd\":\"batch\",\"world\":\"match7.a\",\"ops\":[{\"cmd\":\"transform.set_local\","
      "\"world\":\"match8.x\",\"entity\":%lld,\"t\":[5,5,5]}]}",
      "{\"cmd\":\"world.destroy\",\"world\":\"match8.x\"}",
      "{\"cmd\":\"world.create\",\"world\":\"match8.y\"}",
      "{\"cmd\":\"transform.get\",\"world\":\"match8.nope\",\"entity\":%lld}",
      "{\"cmd\":\"transform.get\",\"world\":\"match70\",\"entity\":%lld}",
      "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", /* every world: needs the prefix * */
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    ERR(&m7, "UNAUTHORIZED", refused[i], x);
  /* A batch refused for one op changed nothing of the others. */
  ERR(&m7, "UNAUTHORIZED",
      "{\"cmd\":\"batch\",\"world\":\"match7.a\",\"ops\":[{\"cmd\":\"transform.set_local\","
      "\"entity\":%lld,\"t\":[4,4,4]},{\"cmd\":\"transform.get\",\"world\":\"match8.x\","
      "\"entity\":%lld}]}",
      a, x);
  r = OK(&m7, "{\"cmd\":\"transform.get\",\"world\":\"match7.a\",\"entity\":%lld}", a);
  CU_ASSERT_EQUAL(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "local"), 12)->valuedouble,
                  1);
  cJSON_Delete(r);
  /* world.list hides what it may not see. */
  r = OK(&m7, "{\"cmd\":\"world.list\"}");
  const cJSON *worlds = cJSON_GetObjectItemCaseSensitive(r, "worlds"), *w;
  int n = 0;
  cJSON_ArrayForEach(w, worlds) {
    CU_ASSERT_EQUAL(strncmp(t_resp_str(w, "name"), "match7.", 7), 0);
    n++;
  }
  CU_ASSERT_EQUAL(n, 2);
  cJSON_Delete(r);
  r = OK(&op, "{\"cmd\":\"world.list\"}");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "worlds")), 4);
  cJSON_Delete(r);
  /* Nor does info name them in its per-world figures. */
  int match7 = 0;
  CU_ASSERT_EQUAL(info_worlds(&m7, &match7), 2);
  CU_ASSERT_EQUAL(match7, 2);
  CU_ASSERT_EQUAL(info_worlds(&op, &match7), 4);
  /* match8.x is as it was. */
  r = OK(&op, "{\"cmd\":\"transform.get\",\"world\":\"match8.x\",\"entity\":%lld}", x);
  cJSON_DeleteItemFromObjectCaseSensitive(r, "tick");
  char *after = cJSON_PrintUnformatted(r);
  cJSON_Delete(r);
  CU_ASSERT_STRING_EQUAL(after, before);
  free(before);
  free(after);
  t_client_close(&m7);
  t_client_close(&op);
  STOP_OK(&d, 5000);
}

/* ---- SIGHUP ------------------------------------------------------------------------------- */

/* Sends SIGHUP and waits until the log shows the count-th line with what. */
static bool hangup(t_daemon *d, const char *what, int count) {
  kill(d->pid, SIGHUP);
  for (long end = t_now_ms() + 5000; t_now_ms() < end; t_sleep_ms(20)) {
    char *log = t_read_file(d->log_path);
    int seen = 0;
    for (const char *p = log; p && (p = strstr(p, what)); p++)
      seen++;
    free(log);
    if (seen >= count)
      return true;
  }
  return false;
}

static void test_reload(void) {
  const char *v1[] = {"op-token read,write,admin *", "player read match7.", NULL};
  write_acl(v1);
  t_daemon d;
  if (!start_acl(&d, NULL))
    return;
  t_client op, p;
  if (!as(&op, &d, "op-token") || !as(&p, &d, "player"))
    return;
  OKD(&op, "{\"cmd\":\"world.create\",\"world\":\"match7.a\"}");
  OKD(&op, "{\"cmd\":\"world.create\",\"world\":\"match8.x\"}");
  OKD(&op, "{\"cmd\":\"transform.create\",\"world\":\"match7.a\"}");
  t_client_keep_events(&p);
  cJSON *r = OK(&p, "{\"cmd\":\"subscribe\",\"world\":\"match7.a\"}");
  double sub = t_resp_num(r, "sub");
  cJSON_Delete(r);
  cJSON *f = t_next_event(&p, 5000);
  CU_ASSERT_TRUE(t_resp_str_is(f, "event", "frame"));
  cJSON_Delete(f);

  /* The player moves to match8.: the open connection follows, its subscription ends. */
  const char *v2[] = {"op-token read,write,admin *", "player read match8.", NULL};
  write_acl(v2);
  CU_ASSERT_TRUE_FATAL(hangup(&d, "access list reloaded", 1));
  f = t_next_event(&p, 5000);
  CU_ASSERT_TRUE(t_resp_str_is(f, "event", "unsubscribed"));
  CU_ASSERT_TRUE(t_resp_str_is(f, "reason", "unauthorized"));
  CU_ASSERT_EQUAL(t_resp_num(f, "sub"), sub);
  cJSON_Delete(f);
  ERR(&p, "UNAUTHORIZED", "{\"cmd\":\"transform.find\",\"world\":\"match7.a\",\"path\":\"x\"}");
  ERR(&p, "UNAUTHORIZED", "{\"cmd\":\"subscribe\",\"world\":\"match7.a\"}");
  OKD(&p, "{\"cmd\":\"subscribe\",\"world\":\"match8.x\"}");
  r = OK(&p, "{\"cmd\":\"world.list\"}");
  const cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "worlds"), 0);
  CU_ASSERT_TRUE(t_resp_str_is(w, "name", "match8.x"));
  cJSON_Delete(r);

  /* A file that does not parse: a warning, and the rules in force stay. */
  FILE *bad = fopen(acl_path(), "a");
  CU_ASSERT_PTR_NOT_NULL_FATAL(bad);
  fprintf(bad, "%s read,fly *\n", hash_of("newcomer"));
  fclose(bad);
  CU_ASSERT_TRUE(hangup(&d, "access list not reloaded", 1));
  CU_ASSERT_TRUE(t_daemon_log_contains(&d, "unknown right"));
  OKD(&p, "{\"cmd\":\"world.list\"}");
  t_client nc;
  if (CONNECT(&nc, d.port)) {
    ERR(&nc, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"newcomer\"}");
    t_client_close(&nc);
  }

  /* The player's token leaves the list: its connection is anonymous from its next command. */
  const char *v3[] = {"op-token read,write,admin *", NULL};
  write_acl(v3);
  CU_ASSERT_TRUE_FATAL(hangup(&d, "access list reloaded", 2));
  char *message = NULL;
  ERR_MESSAGE(&p, "UNAUTHORIZED", &message, "{\"cmd\":\"world.list\"}");
  CU_ASSERT_PTR_NOT_NULL(strstr(message, "no longer"));
  free(message);
  OKD(&p, "{\"cmd\":\"ping\"}");
  ERR(&p, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"player\"}");
  OKD(&op, "{\"cmd\":\"world.list\"}");
  t_client_close(&p);
  t_client_close(&op);
  STOP_OK(&d, 5000);
}

/* ---- refused at start --------------------------------------------------------------------- */

/* Runs scened with args; its exit code, and its stderr in err (caller frees). */
static int run_daemon(const char *const *args, char **err) {
  const char *argv[16] = {"--listen", "127.0.0.1:0", "--http", "off"};
  int n = 4;
  for (int i = 0; args[i] && n < 15; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  t_proc p;
  if (!t_proc_start(&p, t_daemon_bin(), argv, NULL, NULL, 0))
    return -1;
  int code = t_proc_wait(&p, 10000);
  *err = strdup(text_str(&p.err));
  t_proc_free(&p);
  return code;
}

static void test_refused_at_start(void) {
  write_acl(rules);
  char *err;
  const char *both[] = {"--acl", acl_path(), "--auth-token", "t", NULL};
  CU_ASSERT_EQUAL(run_daemon(both, &err), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--acl and --auth-token"));
  free(err);
  const char *missing[] = {"--acl", "/nonexistent/acl", NULL};
  CU_ASSERT_EQUAL(run_daemon(missing, &err), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "No such file"));
  free(err);
  char h[65];
  snprintf(h, sizeof h, "%s", hash_of("t"));
  struct {
    const char *line, *why;
  } bad[] = {
      {"t read *", "64 hex digits"},        /* a token, not its hash */
      {"%s read", "three fields"},          /* no prefixes */
      {"%s read,fly *", "unknown right"},   /* no such right */
      {"%s read, write *", "three fields"}, /* a space inside a list */
      {"%s read match 7", "three fields"},
      {"%s read bad/prefix", "bad prefix"},
      {"%s read match7.,,x", "bad prefix"},
      {"%s read *\n%s write *", "the same token hash as line 1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    FILE *f = fopen(acl_path(), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, bad[i].line, h, h);
    fprintf(f, "\n");
    fclose(f);
    const char *args[] = {"--acl", acl_path(), NULL};
    CU_ASSERT_EQUAL(run_daemon(args, &err), 2);
    const char *nl = strchr(err, '\n');
    bool good = nl && !nl[1] && strstr(err, bad[i].why) && strstr(err, "line ");
    CU_ASSERT_TRUE(good);
    if (!good)
      fprintf(stderr, "  acl \"%s\": expected one line with \"%s\", got: %s\n", bad[i].line,
              bad[i].why, err);
    free(err);
  }
}

/* ---- tokens never in the log -------------------------------------------------------------- */

static void test_tokens_not_logged(void) {
  const char *list[] = {"s3cret-listed-token read *", NULL};
  write_acl(list);
  const char *debug[] = {"--log-level", "debug", NULL};
  t_daemon d;
  if (!start_acl(&d, debug))
    return;
  t_client c;
  if (CONNECT(&c, d.port)) {
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"s3cret-wrong-token\"}");
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"world.list\",\"token\":\"s3cret-in-a-field\"}");
    OKD(&c, "{\"cmd\":\"hello\",\"token\":\"s3cret-listed-token\"}");
    t_client_close(&c);
  }
  kill(d.pid, SIGHUP);
  STOP_OK(&d, 5000);
  CU_ASSERT_TRUE(t_daemon_log_contains(&d, "authentication failed"));
  CU_ASSERT_FALSE(t_daemon_log_contains(&d, "s3cret"));
  /* --auth-token, given on the command line, at debug: not logged either. */
  const char *token_args[] = {"--auth-token", "s3cret-auth-token", "--log-level", "debug", NULL};
  if (!START(&d, token_args))
    return;
  if (CONNECT(&c, d.port)) {
    ERR(&c, "UNAUTHORIZED", "{\"cmd\":\"hello\",\"token\":\"s3cret-wrong\"}");
    OKD(&c, "{\"cmd\":\"hello\",\"token\":\"s3cret-auth-token\"}");
    t_client_close(&c);
  }
  STOP_OK(&d, 5000);
  CU_ASSERT_FALSE(t_daemon_log_contains(&d, "s3cret"));
}

/* ---- registration ------------------------------------------------------------------------- */

static int suite_init(void) { return t_temp_dir(dir, sizeof dir, "acl") ? 0 : -1; }

static int suite_clean(void) {
  t_remove_tree(dir);
  return 0;
}

int t_register_daemon_acl(void) {
  static const t_test tests[] = {
      {"every command: a token without its right is refused, nothing changes",
       test_every_command_needs_its_right},
      {"anonymous connections: ping and hello only", test_anonymous},
      {"prefixes: match7. cannot touch match8.x, not even in a batch", test_prefixes},
      {"SIGHUP reloads the list; a broken file keeps the rules", test_reload},
      {"--acl with --auth-token, missing and broken files: exit 2", test_refused_at_start},
      {"tokens never appear in the log", test_tokens_not_logged},
  };
  return T_ADD_SUITE("daemon_acl", suite_init, suite_clean, tests);
}

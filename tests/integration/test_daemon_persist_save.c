/* Integration tests of saving against the real daemon: save, autosave, and SIGTERM during a save
 * answering it. Every test has its own temporary data directory. */
#include "daemon_fixtures.h"
#include "persist_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- files in the data directory ------------------------------------------------------------- */

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Whether the daemon has a child process (the snapshot writer). */
static bool has_child(pid_t pid) {
  char path[96], buf[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  bool any = fgets(buf, sizeof buf, f) != NULL && buf[0] >= '0' && buf[0] <= '9';
  fclose(f);
  return any;
}

/* SIGTERM while a save is being written: the save is answered, then the request held behind
 * it, then the daemon exits 0 with everything on disk. */
static void test_sigterm_during_save(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  enum { BATCHES = 100, OPS = 1000 };
  t_daemon d;
  if (!start_on(&d, dir, NULL))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  text b = {0};
  for (int k = 0; k < BATCHES; k++) {
    const char *head = "{\"cmd\":\"batch\",\"world\":\"w\",\"ops\":[";
    text_add(&b, head, strlen(head));
    for (int i = 0; i < OPS; i++) {
      const char *op = ",{\"cmd\":\"transform.create\"}" + (i == 0);
      text_add(&b, op, strlen(op));
    }
    text_add(&b, "]}\n", 3);
  }
  CU_ASSERT_FATAL(t_client_send_raw(&c, b.s, b.len) == 0);
  free(b.s);
  for (int k = 0; k < BATCHES; k++) {
    cJSON *r = t_client_recv_json(&c, 10000);
    CU_ASSERT(t_resp_ok(r));
    cJSON_Delete(r);
  }
  const char *req = "{\"cmd\":\"save\",\"id\":1}\n{\"cmd\":\"ping\",\"id\":2}\n";
  CU_ASSERT_FATAL(t_client_send_raw(&c, req, strlen(req)) == 0);
  long deadline = t_now_ms() + 3000;
  while (!has_child(d.pid) && t_now_ms() < deadline)
    ;
  kill(d.pid, SIGTERM);
  for (int i = 1; i <= 2; i++) {
    cJSON *r = t_client_recv_json(&c, 15000);
    CU_ASSERT(t_resp_ok(r) && t_resp_num(r, "id") == i);
    if (!t_resp_ok(r))
      fprintf(stderr, "  response %d after SIGTERM during a save: missing or failed\n", i);
    cJSON_Delete(r);
  }
  t_client_close(&c);
  int status = t_daemon_wait(&d, 15000);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (start_on(&d, dir, NULL)) {
    CONNECT_FATAL(&c, d.port);
    CU_ASSERT(first_world_transforms(&c) == BATCHES * OPS);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
out:
  end_test(dir);
}

/* save: path and bytes (the file's size); later requests on the connection are answered
 * after it, in order; the snapshot holds what was answered before it. Without --data it is
 * BAD_REQUEST. */
static void test_save(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  char snap[256];
  snprintf(snap, sizeof snap, "%s/snapshot.scn", dir);
  if (!start_on(&d, dir, NULL))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  uint64_t e = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"e\"}");
  for (int i = 0; i < 300; i++)
    OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"f%d\"}", i);
  char req[2048];
  snprintf(
      req, sizeof req,
      "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[1,2,3],\"id\":1}\n"
      "{\"cmd\":\"save\",\"id\":2}\n"
      "{\"cmd\":\"ping\",\"id\":3}\n"
      "{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":%llu,\"id\":4}\n"
      "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[4,5,6],\"id\":5}\n"
      "{\"cmd\":\"save\",\"id\":6}\n"
      "{\"cmd\":\"save\",\"id\":7}\n"
      "{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":%llu,\"id\":8}\n",
      (unsigned long long)e, (unsigned long long)e, (unsigned long long)e, (unsigned long long)e);
  CU_ASSERT_FATAL(t_client_send_raw(&c, req, strlen(req)) == 0);
  cJSON *r[9] = {0};
  for (int i = 1; i <= 8; i++) {
    r[i] = t_client_recv_json(&c, 10000);
    CU_ASSERT(t_resp_ok(r[i]) && t_resp_num(r[i], "id") == i);
    if (!t_resp_ok(r[i]) || t_resp_num(r[i], "id") != i) {
      char *s = r[i] ? cJSON_PrintUnformatted(r[i]) : NULL;
      fprintf(stderr, "  response %d: %s\n", i, s ? s : "(none)");
      free(s);
    }
  }
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(r[2], "path");
  CU_ASSERT(cJSON_IsString(p) && !strcmp(p->valuestring, snap));
  CU_ASSERT(t_resp_num(r[2], "bytes") > 32);
  const cJSON *loc = cJSON_GetObjectItemCaseSensitive(r[4], "local");
  CU_ASSERT(cJSON_GetArraySize(loc) == 16 && cJSON_GetArrayItem(loc, 12)->valuedouble == 1);
  loc = cJSON_GetObjectItemCaseSensitive(r[8], "local");
  CU_ASSERT(cJSON_GetArraySize(loc) == 16 && cJSON_GetArrayItem(loc, 12)->valuedouble == 4);
  /* The newest save's bytes are the file's size. */
  CU_ASSERT(t_resp_num(r[7], "bytes") == (double)file_size(snap));
  CU_ASSERT(t_resp_num(r[6], "bytes") == t_resp_num(r[7], "bytes"));
  for (int i = 1; i <= 8; i++)
    cJSON_Delete(r[i]);

  /* One more save alone: bytes equal the file. */
  cJSON *s = OK(&c, "{\"cmd\":\"save\"}");
  CU_ASSERT(s && !cJSON_GetObjectItemCaseSensitive(s, "id"));
  CU_ASSERT(t_resp_num(s, "bytes") == (double)file_size(snap));
  cJSON_Delete(s);
  /* A change after the last save lives only in the journal. */
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,\"t\":[8,8,8]}",
      (unsigned long long)e);
  t_client_close(&c);
  kill9(&d);
  /* Without its journals, the snapshot alone holds what was answered before the save (a
   * start without the journal is refused; --recover keeps the snapshot). */
  unsigned long long gens[64];
  size_t n = journals(dir, gens, 64);
  CU_ASSERT(n == 1);
  for (size_t i = 0; i < n; i++) {
    char jp[256];
    snprintf(jp, sizeof jp, "%s/journal.%llu.scn", dir, gens[i]);
    unlink(jp);
  }
  const char *const recover[] = {"--recover", NULL};
  if (start_on(&d, dir, recover)) {
    CONNECT_FATAL(&c, d.port);
    double m[16];
    CU_ASSERT(get_local(&c, "w", e, m) && mat_is_translation(m, 4, 5, 6));
    cJSON *f = OK(&c, "{\"cmd\":\"transform.find\",\"world\":\"w\",\"path\":\"f299\"}");
    CU_ASSERT(t_resp_num(f, "entity") > 0);
    cJSON_Delete(f);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }

  /* Without --data. */
  if (start_on(&d, NULL, NULL)) {
    CONNECT_FATAL(&c, d.port);
    ERR(&c, "BAD_REQUEST", "{\"cmd\":\"save\",\"id\":\"x\"}");
    OKD(&c, "{\"cmd\":\"ping\"}");
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
out:
  end_test(dir);
}

/* --save-interval 1: after a change a snapshot appears within a few seconds and the journals
 * it covers are removed. */
static bool wait_for_snapshot(const char *snap, const struct stat *old, const char *dir,
                              unsigned long long *gen, long timeout_ms) {
  long deadline = t_now_ms() + timeout_ms;
  while (t_now_ms() < deadline) {
    struct stat st;
    unsigned long long gens[64];
    if (stat(snap, &st) == 0 &&
        (!old || st.st_size != old->st_size || st.st_mtim.tv_sec != old->st_mtim.tv_sec ||
         st.st_mtim.tv_nsec != old->st_mtim.tv_nsec) &&
        journals(dir, gens, 64) == 1) {
      *gen = gens[0];
      return true;
    }
    t_sleep_ms(20);
  }
  return false;
}

static void test_autosave(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  char snap[256];
  snprintf(snap, sizeof snap, "%s/snapshot.scn", dir);
  const char *const every1[] = {"--save-interval", "1", NULL};
  if (!start_on(&d, dir, every1))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  unsigned long long gens[64];
  CU_ASSERT(journals(dir, gens, 64) == 1 && gens[0] == 0);
  CU_ASSERT(!exists(snap));
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"one\"}");
  unsigned long long gen = 0;
  CU_ASSERT(wait_for_snapshot(snap, NULL, dir, &gen, 3000));
  CU_ASSERT(gen >= 1);
  CU_ASSERT(file_size(snap) > 32);
  char j0[256];
  snprintf(j0, sizeof j0, "%s/journal.0.scn", dir);
  CU_ASSERT(!exists(j0));
  struct stat old;
  CU_ASSERT_FATAL(stat(snap, &old) == 0);
  uint64_t two = CREATE_TF(
      &c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"two-with-a-longer-name\"}");
  unsigned long long gen2 = 0;
  CU_ASSERT(wait_for_snapshot(snap, &old, dir, &gen2, 3000));
  CU_ASSERT(gen2 > gen);
  t_client_close(&c);
  kill9(&d);
  /* The autosaved snapshot plus the current journal hold everything. */
  if (start_on(&d, dir, NULL)) {
    CONNECT_FATAL(&c, d.port);
    cJSON *r =
        OK(&c, "{\"cmd\":\"transform.find\",\"world\":\"w\",\"path\":\"two-with-a-longer-name\"}");
    CU_ASSERT(two > 0 && t_resp_num(r, "entity") == (double)two);
    cJSON_Delete(r);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
out:
  end_test(dir);
}

int t_register_daemon_persist_save(void) {
  static const t_test tests[] = {
      {"SIGTERM during a save answers it", test_sigterm_during_save},
      {"save", test_save},
      {"autosave", test_autosave},
  };
  return T_ADD_SUITE("daemon_persist_save", NULL, NULL, tests);
}

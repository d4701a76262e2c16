/* Integration tests of durability against the real daemon (the contract's "Durability" section
 * and the --data part of "The daemon's command line"): clean restarts keep everything bit for
 * bit, acknowledged commands survive kill -9 under --fsync always, SIGTERM under everysec loses
 * nothing, and replay after several snapshots. Damaged data and saving have suites of their
 * own (daemon_persist_damage, daemon_persist_save). Every test has its own temporary data
 * directory. */
#include "command_fixtures.h"
#include "daemon_fixtures.h"
#include "persist_fixtures.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tests ----------------------------------------------------------------------------------- */

static const char *const WORLDS3[] = {"alpha", "beta", "gamma"};

/* A clean restart (SIGTERM, exit 0) keeps every world, entity id and generation, transform,
 * link, name, child order and matrix bit for bit; destroyed ids stay NOT_FOUND and new
 * entities never reuse an old id. */
static void test_clean_restart_keeps_everything(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  t_client c;
  uint64_t ids[1024];
  size_t nids = 0;
  if (!start_on(&d, dir, NULL))
    goto out;
  if (!CONNECT(&c, d.port)) {
    t_daemon_stop(&d, SIGKILL, 2000);
    goto out;
  }
  for (int w = 0; w < 3; w++)
    OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", WORLDS3[w]);

  /* alpha: 10 named roots, 10 children each, one grandchild under every child. */
  uint64_t roots[10], kids[10][10], grand[10][10];
  for (int r = 0; r < 10; r++) {
    roots[r] = ids[nids++] =
        CREATE_TF(&c,
                  "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"name\":\"root%d\","
                  "\"t\":[%d.1,%g,-0.3],\"r\":[0.1,%g,0.3,0.9],\"s\":%g}",
                  r, r, r * 0.7, 0.05 * r, 1.0 + r * 0.01);
    for (int k = 0; k < 10; k++) {
      kids[r][k] = ids[nids++] =
          CREATE_TF(&c,
                    "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"parent\":%llu,"
                    "\"name\":\"n%d\",\"t\":[%g,%g,%g],\"r\":[%g,0.2,-0.4,1],\"s\":[1,%g,0.5]}",
                    (unsigned long long)roots[r], k, k * 0.33, -k * 1.7, r * 0.01 + 0.123, 0.01 * k,
                    1.0 + k * 0.125);
      grand[r][k] = ids[nids++] =
          CREATE_TF(&c,
                    "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"parent\":%llu,"
                    "\"name\":\"g0\",\"t\":[0.7,%g,0.01],\"r\":[0,0,%g,1]}",
                    (unsigned long long)kids[r][k], r * 0.1 + k * 0.013, 0.3 + k * 0.02);
    }
  }
  /* beta: a 60-deep chain of new entities, and the alpha grandchildren of root 0..1 as
   * roots (one entity with transforms in two worlds). */
  uint64_t chain[60], parent = 0;
  for (int i = 0; i < 60; i++) {
    char par[48] = "";
    if (parent)
      snprintf(par, sizeof par, ",\"parent\":%llu", (unsigned long long)parent);
    chain[i] = parent = ids[nids++] =
        CREATE_TF(&c,
                  "{\"cmd\":\"transform.create\",\"world\":\"beta\"%s,\"name\":\"link%d\","
                  "\"t\":[0.1,%g,0],\"r\":[0,0.05,0,1]}",
                  par, i, 0.25 + i * 0.001);
  }
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 10; k++)
      OKD(&c,
          "{\"cmd\":\"transform.create\",\"world\":\"beta\",\"entity\":%llu,"
          "\"name\":\"shared%d_%d\",\"t\":[%d,%d,%g]}",
          (unsigned long long)grand[r][k], r, k, r, k, 1.0 / 3.0);
  /* Entities made apart from transforms, placed in beta and gamma. */
  cJSON *made = OK(&c, "{\"cmd\":\"entity.create\",\"count\":40}");
  const cJSON *list = made ? cJSON_GetObjectItemCaseSensitive(made, "entities") : NULL;
  uint64_t loose[40] = {0};
  for (int i = 0; i < 40 && cJSON_GetArraySize(list) == 40; i++)
    loose[i] = ids[nids++] = (uint64_t)cJSON_GetArrayItem(list, i)->valuedouble;
  cJSON_Delete(made);
  CU_ASSERT_FATAL(loose[39] != 0);
  for (int i = 0; i < 30; i++)
    OKD(&c,
        "{\"cmd\":\"transform.create\",\"world\":\"beta\",\"entity\":%llu,"
        "\"parent\":%llu,\"name\":\"loose%d\",\"s\":%g}",
        (unsigned long long)loose[i], (unsigned long long)chain[i % 60], i, 0.5 + i);
  for (int i = 0; i < 40; i++)
    OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"gamma\",\"entity\":%llu,\"t\":[%d,0,0]}",
        (unsigned long long)loose[i], i);
  OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"gamma\",\"entity\":%llu}",
      (unsigned long long)roots[0]);

  /* Changes of every kind. */
  OKD(&c,
      "{\"cmd\":\"transform.rename\",\"world\":\"alpha\",\"entity\":%llu,\"name\":\"renamed3\"}",
      (unsigned long long)roots[3]);
  OKD(&c, "{\"cmd\":\"transform.rename\",\"world\":\"beta\",\"entity\":%llu,\"name\":null}",
      (unsigned long long)chain[7]);
  /* Child order: move n2 of root 4 to the end, then root 9 (keep world) under root 4. */
  OKD(&c, "{\"cmd\":\"transform.unlink\",\"world\":\"alpha\",\"entity\":%llu,\"keep\":\"world\"}",
      (unsigned long long)kids[4][2]);
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"alpha\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)kids[4][2], (unsigned long long)roots[4]);
  OKD(&c,
      "{\"cmd\":\"transform.link\",\"world\":\"alpha\",\"entity\":%llu,\"parent\":%llu,"
      "\"keep\":\"world\"}",
      (unsigned long long)roots[9], (unsigned long long)roots[4]);
  OKD(&c,
      "{\"cmd\":\"transform.link\",\"world\":\"alpha\",\"entity\":%llu,\"parent\":%llu,"
      "\"keep\":\"local\"}",
      (unsigned long long)roots[8], (unsigned long long)grand[4][5]);
  OKD(&c,
      "{\"cmd\":\"transform.set_world\",\"world\":\"alpha\",\"entity\":%llu,"
      "\"t\":[3.25,-1.5,0.0625],\"r\":[0.3,0.1,0.2,0.8],\"s\":2.5}",
      (unsigned long long)grand[7][3]);
  OKD(&c,
      "{\"cmd\":\"transform.set_world\",\"world\":\"beta\",\"entity\":%llu,"
      "\"matrix\":[0,1,0,0,-1,0,0,0,0,0,1,0,5,6,7,1]}",
      (unsigned long long)chain[40]);
  OKD(&c,
      "{\"cmd\":\"transform.set_local\",\"world\":\"alpha\",\"entity\":%llu,"
      "\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,0.1,0.2,0.3,1]}",
      (unsigned long long)kids[1][1]);
  /* Destroyed: an entity with transforms in alpha, beta and gamma ... */
  uint64_t gone_entity = grand[0][3];
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)gone_entity);
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)loose[35]);
  /* ... a subtree (recursive), and a node whose children become roots. */
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"alpha\",\"entity\":%llu,\"recursive\":true}",
      (unsigned long long)roots[5]);
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"alpha\",\"entity\":%llu}",
      (unsigned long long)roots[6]);
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"beta\",\"entity\":%llu}",
      (unsigned long long)chain[20]);
  /* A batch, and a failed batch that must change nothing. */
  cJSON *fresh = OK(&c, "{\"cmd\":\"entity.create\",\"count\":4}");
  const cJSON *fl = fresh ? cJSON_GetObjectItemCaseSensitive(fresh, "entities") : NULL;
  uint64_t b[4] = {0};
  for (int i = 0; i < 4 && cJSON_GetArraySize(fl) == 4; i++)
    b[i] = ids[nids++] = (uint64_t)cJSON_GetArrayItem(fl, i)->valuedouble;
  cJSON_Delete(fresh);
  CU_ASSERT_FATAL(b[3] != 0);
  OKD(&c,
      "{\"cmd\":\"batch\",\"world\":\"alpha\",\"ops\":["
      "{\"cmd\":\"transform.create\",\"entity\":%llu,\"name\":\"b0\",\"t\":[1,2,3]},"
      "{\"cmd\":\"transform.create\",\"entity\":%llu,\"parent\":%llu,\"name\":\"b1\"},"
      "{\"cmd\":\"transform.set_local\",\"entity\":%llu,\"r\":[0.2,0.3,0.4,0.5]},"
      "{\"cmd\":\"transform.create\",\"entity\":%llu,\"parent\":%llu,\"s\":[2,3,4]},"
      "{\"cmd\":\"transform.link\",\"entity\":%llu,\"parent\":%llu,\"keep\":\"world\"},"
      "{\"cmd\":\"transform.rename\",\"entity\":%llu,\"name\":\"batch0\"}]}",
      (unsigned long long)b[0], (unsigned long long)b[1], (unsigned long long)b[0],
      (unsigned long long)b[1], (unsigned long long)b[2], (unsigned long long)b[1],
      (unsigned long long)b[2], (unsigned long long)b[0], (unsigned long long)b[0]);
  ERR(&c, "NOT_FOUND",
      "{\"cmd\":\"batch\",\"world\":\"alpha\",\"ops\":["
      "{\"cmd\":\"transform.create\",\"entity\":%llu,\"name\":\"b3\"},"
      "{\"cmd\":\"transform.link\",\"entity\":%llu,\"parent\":999999}]}",
      (unsigned long long)b[3], (unsigned long long)b[3]);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"gamma\"}");
  /* Checks before the restart: the destroyed id is stale everywhere. */
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"alpha\",\"entity\":%llu}",
      (unsigned long long)gone_entity);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"beta\",\"entity\":%llu}",
      (unsigned long long)gone_entity);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"alpha\",\"entity\":%llu}",
      (unsigned long long)b[3]);
  t_client_close(&c);

  char *before = capture(d.port, WORLDS3, 3, ids, nids);
  CU_ASSERT(before && strstr(before, "\"name\":\"batch0\"") && strstr(before, "renamed3"));
  STOP_OK(&d, 15000);

  /* Twice: from the shutdown snapshot, and from a snapshot written by a restarted daemon. */
  for (int round = 0; round < 2; round++) {
    if (!start_on(&d, dir, NULL))
      break;
    char *after = capture(d.port, WORLDS3, 3, ids, nids);
    expect_same(before, after, "state after a clean restart");
    free(after);
    t_client k;
    CONNECT_FATAL(&k, d.port);
    ERR(&k, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"entity\":%llu}",
        (unsigned long long)gone_entity);
    ERR(&k, "NOT_FOUND", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}",
        (unsigned long long)loose[35]);
    ERR(&k, "NOT_FOUND", "{\"cmd\":\"transform.get\",\"world\":\"gamma\",\"entity\":%llu}",
        (unsigned long long)loose[0]);
    cJSON *p = OK(&k, "{\"cmd\":\"transform.find\",\"world\":\"alpha\",\"path\":\"root4/root9\"}");
    CU_ASSERT(t_resp_num(p, "entity") == (double)roots[9]);
    cJSON_Delete(p);
    p = OK(&k, "{\"cmd\":\"transform.find\",\"world\":\"alpha\",\"path\":\"batch0/b1\"}");
    CU_ASSERT(t_resp_num(p, "entity") == (double)b[1]);
    cJSON_Delete(p);
    t_client_close(&k);
    if (round == 0) {
      STOP_OK(&d, 15000);
      continue;
    }
    /* New entities never take an old id (slots of destroyed ones come back with a new
     * generation). */
    CONNECT_FATAL(&k, d.port);
    cJSON *n = OK(&k, "{\"cmd\":\"entity.create\",\"count\":50}");
    const cJSON *nl = n ? cJSON_GetObjectItemCaseSensitive(n, "entities") : NULL;
    CU_ASSERT(cJSON_GetArraySize(nl) == 50);
    for (int i = 0; i < cJSON_GetArraySize(nl); i++) {
      uint64_t id = (uint64_t)cJSON_GetArrayItem(nl, i)->valuedouble;
      for (size_t j = 0; j < nids; j++)
        if (ids[j] == id) {
          CU_FAIL("a new entity took an old id");
          fprintf(stderr, "  reused id %llu\n", (unsigned long long)id);
        }
      CU_ASSERT(id != gone_entity && id != loose[35]);
    }
    cJSON_Delete(n);
    t_client_close(&k);
    STOP_OK(&d, 15000);
  }
  free(before);
out:
  end_test(dir);
}

/* Sends `total` set_locals (distinct values) through one connection with up to `window`
 * outstanding, and sends SIGKILL to the daemon once kill_at of them are acknowledged. For each
 * entity the last acknowledged k is kept in acked[]; k is the value written. Returns the
 * number sent. */
static int stream_and_kill(t_daemon *d, const uint64_t *ents, int nents, int total, int window,
                           int kill_at, int *acked, int *nacked) {
  t_client c;
  *nacked = 0;
  if (!CONNECT(&c, d->port))
    return 0;
  int sent = 0, got = 0;
  bool killed = false, dead = false;
  long deadline = t_now_ms() + 20000;
  while (!dead && (got < sent || sent < total) && t_now_ms() < deadline) {
    if (!killed && sent < total && sent - got < window) {
      text chunk = {0};
      while (sent < total && sent - got < window) {
        int k = sent++;
        text_addf(&chunk,
                  "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%llu,"
                  "\"id\":%d,\"t\":[%d,%d.25,%d]}\n",
                  (unsigned long long)ents[k % nents], k, k, k, -k);
      }
      if (t_client_send_raw(&c, chunk.s, chunk.len) != 0)
        dead = true;
      free(chunk.s);
    }
    char *line = t_client_recv(&c, killed ? 2000 : 5000);
    if (!line) {
      if (!killed)
        CU_FAIL("a response did not come before the kill");
      break;
    }
    cJSON *r = cJSON_Parse(line);
    free(line);
    double id = t_resp_num(r, "id");
    bool ok = t_resp_ok(r);
    cJSON_Delete(r);
    if (!ok || id != (double)got) {
      CU_FAIL("a set_local was not answered ok in order");
      fprintf(stderr, "  expected id %d, got %g (ok=%d)\n", got, id, ok);
      break;
    }
    acked[got % nents] = got;
    got++;
    if (!killed && got >= kill_at) {
      kill(d->pid, SIGKILL);
      killed = true;
    }
  }
  CU_ASSERT(killed);
  t_client_close(&c);
  *nacked = got;
  return sent;
}

/* --fsync always: every set_local answered ok before kill -9 survives it. */
static void test_kill9_fsync_always_keeps_acknowledged(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  enum { NENTS = 40, TOTAL = 4000, KILL_AT = 2000 };
  t_daemon d;
  const char *const always[] = {"--fsync", "always", NULL};
  if (!start_on(&d, dir, always))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  uint64_t ents[NENTS];
  for (int i = 0; i < NENTS; i++)
    ents[i] = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"e%d\"}", i);
  t_client_close(&c);
  int acked[NENTS], nacked;
  for (int i = 0; i < NENTS; i++)
    acked[i] = -1;
  int sent = stream_and_kill(&d, ents, NENTS, TOTAL, 64, KILL_AT, acked, &nacked);
  kill9(&d);
  CU_ASSERT(nacked >= KILL_AT && nacked <= sent);
  for (int i = 0; i < NENTS; i++)
    CU_ASSERT(acked[i] >= KILL_AT - NENTS);
  if (!start_on(&d, dir, always))
    goto out;
  CONNECT_FATAL(&c, d.port);
  for (int i = 0; i < NENTS; i++) {
    double m[16];
    CU_ASSERT_FATAL(get_local(&c, "w", ents[i], m));
    int k = (int)m[12];
    bool fine =
        k >= acked[i] && k < sent && k % NENTS == i && mat_is_translation(m, k, k + 0.25, -k);
    if (!fine) {
      CU_FAIL("an acknowledged set_local was lost by kill -9");
      fprintf(stderr, "  entity %d: last acknowledged %d, sent %d, found x=%g\n", i, acked[i], sent,
              m[12]);
    }
  }
  t_client_close(&c);
  STOP_OK(&d, 15000);
out:
  end_test(dir);
}

/* The ids a match ended (world.destroy with "entities", entity.destroy with a list) are gone
 * after kill -9 and after a clean restart: the journal and the snapshot keep them destroyed,
 * what lived on lives on, and new entities never take their ids. */
static void check_match_ended(t_client *c, const uint64_t *gone, int ngone, const uint64_t *kept,
                              int nkept) {
  CU_ASSERT_EQUAL(first_world_transforms(c), nkept);
  for (int i = 0; i < ngone; i++)
    ERR(c, "NOT_FOUND", "{\"cmd\":\"entity.destroy\",\"entity\":%llu}",
        (unsigned long long)gone[i]);
  for (int i = 0; i < nkept; i++) {
    double m[16];
    CU_ASSERT(get_local(c, "keep", kept[i], m));
  }
  ERR(c, "NOT_FOUND", "{\"cmd\":\"transform.find\",\"world\":\"match\",\"path\":\"car\"}");
  cJSON *r = OK(c, "{\"cmd\":\"info\"}");
  CHECK(t_resp_num(r, "entities") == nkept && t_resp_num(r, "worlds") == 1, r);
  cJSON_Delete(r);
}

static void test_match_end_survives_kill9(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  t_client c;
  const char *const always[] = {"--fsync", "always", NULL};
  if (!start_on(&d, dir, always))
    goto out;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"keep\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"match\"}");
  uint64_t car =
      CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"match\",\"name\":\"car\"}");
  uint64_t fl = CREATE_TF(
      &c, "{\"cmd\":\"transform.create\",\"world\":\"match\",\"parent\":%llu,\"name\":\"fl\"}",
      (unsigned long long)car);
  uint64_t player = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"keep\"}");
  OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"match\",\"entity\":%llu}",
      (unsigned long long)player);
  uint64_t k[3];
  for (int i = 0; i < 3; i++)
    k[i] = CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"keep\",\"t\":[%d,0,0]}", i);
  /* part of it in a snapshot, the ends in the journal */
  OKD(&c, "{\"cmd\":\"save\"}");
  uint64_t wheel = CREATE_TF(
      &c, "{\"cmd\":\"transform.create\",\"world\":\"match\",\"parent\":%llu,\"name\":\"fr\"}",
      (unsigned long long)car);
  cJSON *r = OK(&c, "{\"cmd\":\"world.destroy\",\"world\":\"match\",\"entities\":true}");
  CHECK(t_resp_num(r, "entities_destroyed") == 3, r);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,%llu]}", (unsigned long long)k[2],
      (unsigned long long)k[0]);
  uint64_t gone[] = {car, fl, wheel, k[0], k[2]}, kept[] = {player, k[1]};
  check_match_ended(&c, gone, 5, kept, 2);
  t_client_close(&c);
  kill9(&d);
  if (!start_on(&d, dir, always))
    goto out;
  CONNECT_FATAL(&c, d.port);
  check_match_ended(&c, gone, 5, kept, 2);
  r = OK(&c, "{\"cmd\":\"entity.create\",\"count\":16}");
  uint64_t fresh[16];
  CU_ASSERT_EQUAL(ids_of(r, "entities", fresh, 16), 16);
  for (int i = 0; i < 16; i++)
    for (int g = 0; g < 5; g++)
      CU_ASSERT_NOT_EQUAL(fresh[i], gone[g]);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entities\":[%llu,%llu]}", (unsigned long long)fresh[0],
      (unsigned long long)fresh[15]);
  t_client_close(&c);
  STOP_OK(&d, 15000);
  if (!start_on(&d, dir, always))
    goto out;
  CONNECT_FATAL(&c, d.port);
  r = OK(&c, "{\"cmd\":\"info\"}");
  CHECK(t_resp_num(r, "entities") == 2 + 14, r);
  cJSON_Delete(r);
  ERR(&c, "NOT_FOUND", "{\"cmd\":\"entity.destroy\",\"entities\":[%llu]}",
      (unsigned long long)fresh[15]);
  t_client_close(&c);
  STOP_OK(&d, 15000);
out:
  end_test(dir);
}

/* --fsync everysec: a clean SIGTERM right after the last answer loses nothing. */
static void test_everysec_sigterm_loses_nothing(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  const char *const everysec[] = {"--fsync", "everysec", NULL};
  uint64_t ids[200];
  size_t nids = 0;
  if (!start_on(&d, dir, everysec))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"alpha\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"beta\"}");
  for (int i = 0; i < 100; i++)
    ids[nids++] =
        CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"alpha\",\"name\":\"x%d\"}", i);
  strlist q = {0};
  for (int i = 0; i < 1000; i++)
    sl_add(&q,
           "{\"cmd\":\"transform.set_local\",\"world\":\"alpha\",\"entity\":%llu,"
           "\"t\":[%g,%d,1],\"r\":[0.1,0.2,%g,1]}",
           (unsigned long long)ids[i % 100], i * 0.01, i, i * 0.001);
  for (int i = 1; i < 100; i++)
    sl_add(&q, "{\"cmd\":\"transform.link\",\"world\":\"alpha\",\"entity\":%llu,\"parent\":%llu}",
           (unsigned long long)ids[i], (unsigned long long)ids[(i - 1) / 3]);
  for (int i = 0; i < 100; i++)
    sl_add(&q, "{\"cmd\":\"transform.create\",\"world\":\"beta\",\"entity\":%llu,\"s\":%d}",
           (unsigned long long)ids[i], i + 1);
  run_all_ok(d.port, &q);
  sl_free(&q);
  t_client_close(&c);
  const char *const two[] = {"alpha", "beta"};
  char *before = capture(d.port, two, 2, ids, nids);
  STOP_OK(&d, 15000);
  if (start_on(&d, dir, everysec)) {
    char *after = capture(d.port, two, 2, ids, nids);
    expect_same(before, after, "state after SIGTERM under everysec");
    free(after);
    STOP_OK(&d, 15000);
  }
  free(before);
out:
  end_test(dir);
}

/* save, change, save, change, kill -9: the restart replays the journal after the newest
 * snapshot on top of it. */
static void test_replay_after_several_snapshots(void) {
  char dir[64];
  if (!begin_test(dir, sizeof dir))
    return;
  t_daemon d;
  const char *const always[] = {"--fsync", "always", NULL};
  const char *const worlds[] = {"w1", "w2", "w3"};
  uint64_t ids[64];
  size_t nids = 0;
  if (!start_on(&d, dir, always))
    goto out;
  t_client c;
  CONNECT_FATAL(&c, d.port);
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w1\"}");
  for (int i = 0; i < 10; i++)
    ids[nids++] = CREATE_TF(
        &c, "{\"cmd\":\"transform.create\",\"world\":\"w1\",\"name\":\"a%d\",\"t\":[%d,0,0]}", i,
        i);
  OKD(&c, "{\"cmd\":\"save\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w2\"}");
  for (int i = 0; i < 10; i++)
    ids[nids++] = CREATE_TF(
        &c, "{\"cmd\":\"transform.create\",\"world\":\"w2\",\"parent\":null,\"r\":[0,%d,0,1]}", i);
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"w1\",\"entity\":%llu,\"s\":3}",
      (unsigned long long)ids[0]);
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)ids[1]);
  OKD(&c, "{\"cmd\":\"save\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w3\"}");
  for (int i = 0; i < 10; i++)
    ids[nids++] =
        CREATE_TF(&c, "{\"cmd\":\"transform.create\",\"world\":\"w3\",\"name\":\"c%d\"}", i);
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"w1\",\"entity\":%llu,\"parent\":%llu}",
      (unsigned long long)ids[2], (unsigned long long)ids[3]);
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"w2\"}");
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%llu}", (unsigned long long)ids[25]);
  t_client_close(&c);
  char *before = capture(d.port, worlds, 3, ids, nids);
  unsigned long long gens[64];
  CU_ASSERT(journals(dir, gens, 64) == 1 && gens[0] == 2);
  kill9(&d);
  if (start_on(&d, dir, always)) {
    char *after = capture(d.port, worlds, 3, ids, nids);
    expect_same(before, after, "state after two snapshots, changes and kill -9");
    free(after);
    CONNECT_FATAL(&c, d.port);
    ERR(&c, "NOT_FOUND", "{\"cmd\":\"transform.create\",\"world\":\"w1\",\"entity\":%llu}",
        (unsigned long long)ids[1]);
    t_client_close(&c);
    STOP_OK(&d, 15000);
  }
  free(before);
out:
  end_test(dir);
}

int t_register_daemon_persist(void) {
  static const t_test tests[] = {
      {"clean restart keeps everything", test_clean_restart_keeps_everything},
      {"kill -9 under fsync always keeps acknowledged", test_kill9_fsync_always_keeps_acknowledged},
      {"everysec SIGTERM loses nothing", test_everysec_sigterm_loses_nothing},
      {"replay after several snapshots", test_replay_after_several_snapshots},
      {"a match's end (entities destroyed with it) survives kill -9",
       test_match_end_survives_kill9},
  };
  return T_ADD_SUITE("daemon_persist", NULL, NULL, tests);
}

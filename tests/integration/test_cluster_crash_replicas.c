/* Durability of a cluster with replicas under random workloads (the contract's "Replicas",
 * its takeover under `sync`): three daemons, each on a data directory of its own, with
 * --replicas R and --durability sync, run the random commands of workload.c answer for answer
 * against a reference daemon without --cluster, as cluster_crash does on a shared directory.
 * Now and then the owner of a group is killed with SIGKILL (or stopped with SIGTERM) while a
 * checker's pipelined writes to that group are in flight on a connection of their own; an
 * in-sync follower then takes its groups over from its copy, and
 *   - every checker write answered ok before the owner died is there, with the ids it was
 *     answered with; what the new owner holds of the checker's writes is the effect of a prefix
 *     of them in the order sent (one in flight may or may not be there, but none without every
 *     one before it);
 *   - the whole state read after the takeover equals the state read before the burst (both
 *     equal to the reference's);
 *   - the group is served again within the lease TTL plus a margin (the contract's figure, TTL
 *     + 1 s, is measured by make bench: here two shared cores and the sanitizers slow it).
 * A daemon is stopped only when each group it owns with anything in it has an in-sync follower
 * recorded that is up; a group it owns that is left without one fails the test (the followers
 * are up, and --replica-timeout is far above what a burst takes). Now and then a stopped daemon
 * starts again with its name and directory: it rejoins, as a follower again by catch-up, and
 * the state read after equals the state before; it may take groups over later. Saves too.
 *
 * Not done here, with replicas:
 *   - world.move: to a follower it is a switchover (cluster_replicas_move tests it against a
 *     racing writer), to another daemon it needs the shared directory of --replicas 0;
 *   - killing an owner whose in-sync set is recorded empty: its group waits for world.promote
 *     (cluster_replicas_promote).
 *
 * Seeds are printed; SCENED_SEED=N runs that one, SCENED_SEEDS=N runs N random ones (make soak
 * runs many), SCENED_STEPS=N sets the commands per seed. */
#include "crash_common.h"
#include "daemon_fixtures.h"
#include "replica_fixtures.h"
#include "suites.h"
#include "workload.h"

#include "b64.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A request waits this long for an owner: a takeover answers within the TTL plus 1 s. */
#define ROUTE_MS 20000
/* What the test allows a takeover, from the owner's death to an answer (see the top). */
#define TAKEOVER_MS (TTL_MS + 4000)
#define PRE 16    /* the checker's transforms made before a burst */
#define BURST 400 /* the most writes of a burst */

typedef struct rig {
  cluster k;
  t_client watch[NODES]; /* subscribers and readers of past ticks (crash_watch) */
  int owner[WL_GROUPS];  /* the daemon last seen serving each group, -1 unknown */
  rng r;
  long worst_ms; /* the longest takeover seen */
  int kills, stops, saves, skipped, restarts;
} rig;

static int group_index(const char *group) {
  for (int g = 0; g < WL_GROUPS; g++)
    if (strcmp(group, wl_group_names[g]) == 0)
      return g;
  return -1;
}

static int up_count(const rig *p) {
  int n = 0;
  for (int i = 0; i < NODES; i++)
    n += p->k.up[i];
  return n;
}

/* One request as a client would send it: to the group's owner as far as it is known (else any
 * daemon up), following MOVED, waiting out UNAVAILABLE and MOVED to a daemon that is down. */
static cJSON *route(rig *p, int g, const char *line) {
  int at = g >= 0 ? p->owner[g] : -1, turn = 0;
  long deadline = t_now_ms() + ROUTE_MS;
  while (t_now_ms() < deadline) {
    if (at < 0 || !p->k.connected[at]) {
      at = ((g < 0 ? 0 : g) + turn++) % NODES;
      continue;
    }
    cJSON *r = t_client_call(&p->k.c[at], "%s", line);
    const char *code = t_resp_code(r);
    if (r && strcmp(code, "MOVED") == 0) {
      int to = node_index(t_resp_str(cJSON_GetObjectItemCaseSensitive(r, "error"), "node"));
      cJSON_Delete(r);
      if (to < 0 || !p->k.connected[to]) {
        at = -1; /* its owner is gone: until a follower claims the group */
        t_sleep_ms(20);
      } else {
        at = to;
      }
      continue;
    }
    if (!r || strcmp(code, "UNAVAILABLE") == 0) {
      cJSON_Delete(r);
      at = -1;
      t_sleep_ms(20);
      continue;
    }
    if (g >= 0)
      p->owner[g] = at;
    return r;
  }
  fprintf(stderr, "  no daemon answered %s within %d ms\n", line, ROUTE_MS);
  return NULL;
}

static bool rig_send(void *ud, const wl_req *reqs, size_t n, cJSON **out) {
  for (size_t i = 0; i < n; i++)
    if (!(out[i] = route(ud, group_index(reqs[i].group), reqs[i].line)))
      return false;
  return true;
}

static bool rig_start(rig *p, const char *replicas) {
  static const char *extra[] = {
      "--replicas", NULL, "--durability", "sync", "--replica-timeout", "10000", "--save-interval",
      "0.5",        NULL};
  extra[1] = replicas;
  memset(p, 0, sizeof *p);
  p->k.own_data = true;
  p->k.fsync = "always";
  p->k.extra = extra;
  for (int g = 0; g < WL_GROUPS; g++)
    p->owner[g] = -1;
  bool ok = cluster_start_prepared(&p->k);
  for (int i = 0; ok && i < NODES; i++)
    ok = crash_hello_b64(&p->k.c[i]) && CONNECT(&p->watch[i], p->k.d[i].port);
  return ok;
}

static void rig_stop_node(rig *p, int i, int sig) {
  if (p->k.connected[i])
    t_client_close(&p->watch[i]);
  node_stop(&p->k, i, sig);
}

/* ---- who owns what, as etcd says ------------------------------------------------------------ */

/* A group's key in etcd, NULL when absent; a replicas key that says the group ended (its last
 * world went) is no record of followers either. */
static cJSON *key_json(rig *p, const char *prefix, int g) {
  char key[96];
  snprintf(key, sizeof key, "/scened/%s/%s", prefix, wl_group_names[g]);
  cJSON *v = etcd_json(&p->k, key);
  if (key_ended(v)) {
    cJSON_Delete(v);
    return NULL;
  }
  return v;
}

/* The daemon that owns group g (-1: none), and whether a daemon other than it that is up is in
 * the in-sync set that owner recorded (a record an earlier owner left says nothing of the new
 * one's followers). */
static int owner_of(rig *p, int g, bool *covered, bool *keyed) {
  cJSON *grp = key_json(p, "groups", g);
  int o = node_index(t_resp_str(grp, "node"));
  cJSON_Delete(grp);
  *covered = false;
  cJSON *rep = o >= 0 ? key_json(p, "replicas", g) : NULL;
  *keyed = rep != NULL;
  if (rep && node_index(t_resp_str(rep, "owner")) != o) {
    cJSON_Delete(rep);
    return o;
  }
  const cJSON *m, *insync = cJSON_GetObjectItemCaseSensitive(rep, "insync");
  cJSON_ArrayForEach(m, insync) {
    int f = node_index(cJSON_GetStringValue(m));
    *covered |= f >= 0 && f != o && p->k.up[f];
  }
  cJSON_Delete(rep);
  return o;
}

/* Whether group x is owned by daemon v and may be lost with it: it has worlds (as far as the
 * model knows: a group whose last world went has a replicas key that says it ended) and no
 * in-sync follower up. */
static bool at_risk(rig *p, const workload *w, int x, int v) {
  bool covered, keyed, worlds = false;
  if (owner_of(p, x, &covered, &keyed) != v || covered)
    return false;
  for (int i = 0; !keyed && i < WL_WORLDS; i++)
    worlds |= w->worlds[i].group == x && w->worlds[i].exists;
  return keyed || worlds;
}

/* A daemon up to stop, and one of its groups with an in-sync follower up (*g), no group of it at
 * risk; -1 when there is none within a second (a new group's follower joins insync only once it
 * has caught up) or stopping one would leave no daemon. */
static int pick_victim(rig *p, const workload *w, int *g) {
  if (up_count(p) < 2)
    return -1;
  int first = (int)rng_below(&p->r, NODES);
  for (long deadline = t_now_ms() + 1000; t_now_ms() < deadline; t_sleep_ms(50)) {
    for (int k = 0; k < NODES; k++) {
      int v = (first + k) % NODES, owned = -1;
      bool safe = p->k.up[v];
      for (int x = 0; safe && x < WL_GROUPS; x++) {
        bool covered, keyed;
        safe = !at_risk(p, w, x, v);
        /* ("solo" has no world to add for the checker) */
        if (safe && x < WL_GROUPS - 1 && owned < 0 && owner_of(p, x, &covered, &keyed) == v &&
            covered)
          owned = x;
      }
      if (safe && owned >= 0) {
        *g = owned;
        return v;
      }
    }
  }
  fprintf(stderr, "  no owner to stop: each has a group with nobody up in sync (");
  for (int x = 0; x < WL_GROUPS; x++) {
    bool covered, keyed;
    int o = owner_of(p, x, &covered, &keyed);
    fprintf(stderr, "%s%s: %s%s", x ? ", " : "", wl_group_names[x], o < 0 ? "-" : node_name(o),
            o < 0 || covered ? ""
            : keyed          ? " alone"
                             : " without replicas key");
  }
  fprintf(stderr, ")\n");
  return -1;
}

/* ---- the checker ---------------------------------------------------------------------------- */

typedef enum ck_kind { CK_CREATE, CK_SET, CK_DESTROY } ck_kind;

typedef struct checker {
  int g;
  char world[32];
  unsigned long long pre[PRE]; /* made and answered ok before the burst */
  ck_kind kind[BURST];
  int target[BURST];              /* CK_SET, CK_DESTROY: the index in pre */
  unsigned long long made[BURST]; /* CK_CREATE answered ok: the id */
  int sent, answered;
} checker;

/* The state after the first n writes of the burst: each pre transform's x (-1: destroyed), and
 * whether the burst's i-th create is there. Answers: whether write i was to be answered ok. */
typedef struct ck_state {
  int pre_x[PRE];
  bool created[BURST], answer_ok[BURST];
} ck_state;

static void ck_model(const checker *ck, int n, ck_state *s) {
  for (int j = 0; j < PRE; j++)
    s->pre_x[j] = 100000 + j;
  for (int i = 0; i < ck->sent; i++) {
    s->created[i] = false;
    s->answer_ok[i] = true;
  }
  for (int i = 0; i < n; i++) {
    int j = ck->target[i];
    switch (ck->kind[i]) {
    case CK_CREATE:
      s->created[i] = true;
      break;
    case CK_SET:
      s->answer_ok[i] = s->pre_x[j] >= 0;
      if (s->answer_ok[i])
        s->pre_x[j] = i;
      break;
    default:
      s->answer_ok[i] = s->pre_x[j] >= 0;
      s->pre_x[j] = -1;
    }
  }
}

/* The x of a transform's local translation, in the base64 matrices the rig's connections ask
 * for (crash_hello_b64); -2 when the answer holds none. */
static int local_x(const cJSON *r) {
  const char *local = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "local"));
  float m[16];
  if (!local || scn_b64_decode_matrix(local, strlen(local), m, NULL) != SCN_B64_OK)
    return -2;
  return (int)m[12];
}

/* The checker's world, made in group g, with PRE transforms (all answered ok). */
static bool ck_prepare(rig *p, checker *ck, int g) {
  memset(ck, 0, sizeof *ck);
  ck->g = g;
  snprintf(ck->world, sizeof ck->world, "%s.chk", wl_group_names[g]);
  char line[256];
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", ck->world);
  cJSON *r = route(p, g, line);
  bool ok = t_resp_ok(r);
  cJSON_Delete(r);
  for (int j = 0; ok && j < PRE; j++) {
    snprintf(line, sizeof line,
             "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"name\":\"p%d\",\"t\":[%d,0,0]}",
             ck->world, j, 100000 + j);
    r = route(p, g, line);
    ok = t_resp_ok(r) && (ck->pre[j] = (unsigned long long)t_resp_num(r, "entity")) > 0;
    cJSON_Delete(r);
  }
  if (!ok)
    fprintf(stderr, "  the checker's world %s could not be made\n", ck->world);
  return ok;
}

/* One answer of the burst: the model's (ok, or NOT_FOUND for a transform destroyed before). */
static bool ck_answer(checker *ck, const ck_state *s, cJSON *r) {
  int i = ck->answered++;
  bool want = s->answer_ok[i], got = t_resp_ok(r);
  bool ok = got == want && (got || strcmp(t_resp_code(r), "NOT_FOUND") == 0);
  if (!ok)
    fprintf(stderr, "  checker write %d of %d: answered %s, the model says %s\n", i, ck->sent,
            got ? "ok" : t_resp_code(r), want ? "ok" : "NOT_FOUND");
  if (got && ck->kind[i] == CK_CREATE)
    ck->made[i] = (unsigned long long)t_resp_num(r, "entity");
  cJSON_Delete(r);
  return ok;
}

static void ck_line(rig *p, checker *ck, int i, text *t) {
  uint32_t roll = rng_below(&p->r, 100);
  ck->kind[i] = roll < 45 ? CK_CREATE : roll < 95 ? CK_SET : CK_DESTROY;
  ck->target[i] = (int)rng_below(&p->r, PRE);
  if (ck->kind[i] == CK_CREATE)
    text_addf(t,
              "{\"cmd\":\"transform.create\",\"world\":\"%s\",\"name\":\"k%d\",\"t\":[%d,0,0]}\n",
              ck->world, i, i);
  else if (ck->kind[i] == CK_SET)
    text_addf(t,
              "{\"cmd\":\"transform.set_local\",\"world\":\"%s\",\"entity\":%llu,"
              "\"t\":[%d,0,0]}\n",
              ck->world, ck->pre[ck->target[i]], i);
  else
    text_addf(t, "{\"cmd\":\"transform.destroy\",\"world\":\"%s\",\"entity\":%llu}\n", ck->world,
              ck->pre[ck->target[i]]);
}

/* Sends the burst to daemon v on a connection of its own, in chunks of up to 24 writes, reading
 * what has come back after each (now and then waiting for all of it); right after a random chunk is
 * sent, v is stopped with sig (the last writes are in flight then), and what else had come back is
 * read. Every answer must be the model's. */
static bool ck_burst(rig *p, checker *ck, int v, int sig) {
  t_client c;
  if (!CONNECT(&c, p->k.d[v].port))
    return false;
  int planned = BURST / 4 + (int)rng_below(&p->r, BURST - BURST / 4);
  int stop_after = (int)rng_below(&p->r, (uint32_t)planned);
  ck_state *s = malloc(sizeof *s);
  bool ok = true, killed = false;
  while (ok && !killed) {
    int n = 1 + (int)rng_below(&p->r, 24);
    if (ck->sent + n > planned)
      n = planned - ck->sent;
    text t = {0};
    for (int i = ck->sent; i < ck->sent + n; i++)
      ck_line(p, ck, i, &t);
    ck->sent += n;
    ok = t_client_send_raw(&c, t.s, t.len) == 0;
    text_free(&t);
    ck_model(ck, ck->sent, s);
    if (ck->sent >= stop_after || ck->sent == planned) {
      killed = kill(p->k.d[v].pid, sig) == 0;
      CU_ASSERT(killed);
      break; /* (the daemon's own stop, with its clients closed, comes after the reads below) */
    }
    /* now and then every answer so far (a round trip), else only what has come */
    bool all = rng_chance(&p->r, 0.3);
    for (cJSON *r; ok && ck->answered < ck->sent && (r = t_client_recv_json(&c, all ? 15000 : 0));)
      ok = ck_answer(ck, s, r);
  }
  /* After the stop: the connection closes, the rest never answered. */
  for (cJSON *r; ok && ck->answered < ck->sent && (r = t_client_recv_json(&c, 20000));)
    ok = ck_answer(ck, s, r);
  free(s);
  t_client_close(&c);
  CU_ASSERT(ok);
  return ok;
}

/* Reads the checker's writes on the group's new owner: the state after some prefix of at least
 * every answered write, with the ids answered. */
static bool ck_verify(rig *p, const checker *ck) {
  ck_state *seen = calloc(1, sizeof *seen), *s = malloc(sizeof *s);
  unsigned long long found[BURST] = {0};
  char line[256];
  bool ok = true;
  for (int j = 0; ok && j < PRE; j++) {
    snprintf(line, sizeof line, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":%llu}",
             ck->world, ck->pre[j]);
    cJSON *r = route(p, ck->g, line);
    ok = r && (t_resp_ok(r) || strcmp(t_resp_code(r), "NOT_FOUND") == 0);
    seen->pre_x[j] = t_resp_ok(r) ? local_x(r) : -1;
    if (!ok)
      t_report("a checker read", r);
    cJSON_Delete(r);
  }
  for (int i = 0; ok && i < ck->sent; i++) {
    if (ck->kind[i] != CK_CREATE)
      continue;
    snprintf(line, sizeof line, "{\"cmd\":\"transform.find\",\"world\":\"%s\",\"path\":\"k%d\"}",
             ck->world, i);
    cJSON *r = route(p, ck->g, line);
    ok = r && (t_resp_ok(r) || strcmp(t_resp_code(r), "NOT_FOUND") == 0);
    seen->created[i] = t_resp_ok(r);
    found[i] = seen->created[i] ? (unsigned long long)t_resp_num(r, "entity") : 0;
    if (!ok)
      t_report("a checker read", r);
    cJSON_Delete(r);
  }
  int prefix = -1;
  for (int n = ck->answered; ok && prefix < 0 && n <= ck->sent; n++) {
    ck_model(ck, n, s);
    bool same = memcmp(s->pre_x, seen->pre_x, sizeof s->pre_x) == 0;
    for (int i = 0; same && i < ck->sent; i++)
      same = s->created[i] == seen->created[i];
    prefix = same ? n : -1;
  }
  int lost = 0;
  for (int i = 0; ok && i < ck->answered; i++)
    if (ck->made[i] && found[i] != ck->made[i] && lost++ < 5)
      fprintf(stderr, "  checker create %d answered ok with entity %llu, found as %llu\n", i,
              ck->made[i], found[i]);
  if (ok && prefix < 0) {
    fprintf(stderr, "  the checker's state is no prefix of %d..%d of its %d writes:\n",
            ck->answered, ck->sent, ck->sent);
    for (int j = 0; j < PRE; j++)
      fprintf(stderr, "    p%d: x %d\n", j, seen->pre_x[j]);
  } else if (ok) {
    fprintf(stderr, "  checker: %d of %d writes answered ok or as refused, %d there\n",
            ck->answered, ck->sent, prefix);
  }
  free(seen);
  free(s);
  CU_ASSERT(ok && prefix >= 0 && lost == 0);
  return ok && prefix >= 0 && lost == 0;
}

static bool ck_remove(rig *p, const checker *ck) {
  char line[128];
  snprintf(line, sizeof line, "{\"cmd\":\"world.destroy\",\"world\":\"%s\",\"entities\":true}",
           ck->world);
  cJSON *r = route(p, ck->g, line);
  bool ok = t_resp_ok(r);
  if (!ok)
    t_report("world.destroy of the checker's world", r);
  cJSON_Delete(r);
  return ok;
}

/* ---- disturbances ------------------------------------------------------------------------------
 */

/* Whether group g waits for world.promote once daemon v stopped: v wrote its replicas key last
 * and recorded no in-sync member that is up (its follower fell behind under load and v went on
 * alone, which the contract allows). */
static bool orphaned(rig *p, int g, int v) {
  cJSON *grp = key_json(p, "groups", g), *rep = key_json(p, "replicas", g);
  bool waits = rep && node_index(t_resp_str(rep, "owner")) == v &&
               (!grp || node_index(t_resp_str(grp, "node")) == v);
  const cJSON *m, *insync = cJSON_GetObjectItemCaseSensitive(rep, "insync");
  cJSON_ArrayForEach(m, insync) {
    int f = node_index(cJSON_GetStringValue(m));
    waits &= !(f >= 0 && f != v && p->k.up[f]);
  }
  cJSON_Delete(grp);
  cJSON_Delete(rep);
  return waits;
}

typedef enum stopped { STOP_DONE, STOP_NONE, STOP_FAILED } stopped;

/* kill -9 (or SIGTERM) of an owner amid a checker's burst. STOP_NONE: nothing could be stopped
 * safely. */
static stopped stop_owner(rig *p, workload *w, int sig) {
  /* The state is read first: a read may make a daemon claim a group that had no owner, whose
   * follower is not in sync yet, after the victim was chosen. */
  if (!wl_compare_state(w, "before an owner's burst"))
    return STOP_FAILED;
  int g = -1, v = pick_victim(p, w, &g);
  if (v < 0)
    return STOP_NONE;
  checker *ck = malloc(sizeof *ck);
  bool ok = ck_prepare(p, ck, g);
  if (ok && p->owner[g] != v) { /* (it moved since etcd was read) */
    ok = ck_remove(p, ck);
    free(ck);
    return ok ? STOP_NONE : STOP_FAILED;
  }
  ok = ok && ck_burst(p, ck, v, sig);
  long stopped = t_now_ms();
  if (sig == SIGTERM) {
    /* signalled already: its clients go, and it must release its groups and exit by itself */
    t_client_close(&p->watch[v]);
    t_client_close(&p->k.c[v]);
    p->k.connected[v] = p->k.up[v] = false;
    int status = t_daemon_wait(&p->k.d[v], 20000);
    CU_ASSERT_EQUAL(status, 0);
    ok = ok && status == 0;
  } else {
    rig_stop_node(p, v, sig);
  }
  for (int x = 0; ok && x < WL_GROUPS; x++) {
    if (!orphaned(p, x, v))
      continue;
    /* (its follower is up, and --replica-timeout is far above what a burst takes) */
    fprintf(stderr,
            "  %s's in-sync set was recorded empty before its owner %s stopped (%s): it waits "
            "for world.promote\n",
            wl_group_names[x], node_name(v), sig == SIGKILL ? "kill -9" : "SIGTERM");
    free(ck);
    CU_FAIL("a group whose follower was in sync and up is left without an owner");
    return STOP_FAILED;
  }
  char line[128];
  snprintf(line, sizeof line, "{\"cmd\":\"transform.find\",\"world\":\"%s\",\"path\":\"-\"}",
           ck->world);
  cJSON *r = ok ? route(p, g, line) : NULL;
  long took = t_now_ms() - stopped;
  ok = ok && r && strcmp(t_resp_code(r), "NOT_FOUND") == 0 && p->owner[g] != v;
  cJSON_Delete(r);
  if (ok) {
    fprintf(stderr, "  %s of %s (owner of %s): %s serves it after %ld ms\n",
            sig == SIGKILL ? "kill -9" : "SIGTERM", node_name(v), wl_group_names[g],
            node_name(p->owner[g]), took);
    if (took > p->worst_ms)
      p->worst_ms = took;
    CU_ASSERT(took < TAKEOVER_MS);
  }
  ok = ok && ck_verify(p, ck) && ck_remove(p, ck);
  ok = ok && wl_compare_state(w, sig == SIGKILL ? "after kill -9 of an owner and the takeover"
                                                : "after SIGTERM of an owner and the takeover");
  free(ck);
  CU_ASSERT(ok);
  return ok ? STOP_DONE : STOP_FAILED;
}

/* A stopped daemon started again with its name and directory: it rejoins (a follower again, by
 * catch-up, of what it is chosen for; what a newer epoch owns elsewhere dropped) and nothing
 * served changes. true when none was down. */
static bool restart_one(rig *p, workload *w) {
  int first = (int)rng_below(&p->r, NODES);
  for (int k = 0; k < NODES; k++) {
    int v = (first + k) % NODES;
    if (p->k.up[v])
      continue;
    bool ok = node_start(&p->k, v) && crash_hello_b64(&p->k.c[v]) &&
              CONNECT(&p->watch[v], p->k.d[v].port) && wait_registered(&p->k, up_count(p));
    CU_ASSERT(ok);
    if (ok)
      fprintf(stderr, "  %s started again with its directory\n", node_name(v));
    p->restarts += ok;
    return ok && wl_compare_state(w, "after a daemon started again with its directory");
  }
  return true;
}

static bool save_all(rig *p) {
  bool ok = true;
  for (int i = 0; i < NODES; i++) {
    if (!p->k.connected[i])
      continue;
    cJSON *r = t_client_call(&p->k.c[i], "{\"cmd\":\"save\"}");
    if (!t_resp_ok(r)) {
      t_report("save", r);
      ok = false;
    }
    cJSON_Delete(r);
  }
  CU_ASSERT(ok);
  return ok;
}

static bool run_seed(uint64_t seed, int steps, const char *replicas) {
  rig *p = malloc(sizeof *p);
  fprintf(stderr, "  replicas crash: --replicas %s, seed %llu (SCENED_SEED=%llu replays it)\n",
          replicas, (unsigned long long)seed, (unsigned long long)seed);
  t_daemon ref = {0};
  t_client refc;
  bool ok = rig_start(p, replicas);
  p->r.state = seed ^ UINT64_C(0x5e9c1a);
  bool ref_up = ok && START(&ref, NULL);
  ok = ref_up && CONNECT(&refc, ref.port) && crash_hello_b64(&refc);
  CU_ASSERT(ok);
  workload w;
  wl_init(&w, seed, true, (wl_side){rig_send, p}, (wl_side){crash_send_pipelined, &refc});
  int next = 40 + (int)rng_below(&p->r, 60);
  for (int i = 0; ok && i < steps; i++) {
    ok = wl_step(&w);
    for (int k = 0; k < NODES; k++)
      if (p->k.connected[k])
        crash_watch(&p->watch[k], &w);
    if (!ok || i < next)
      continue;
    next = i + 30 + (int)rng_below(&p->r, 60);
    uint32_t roll = rng_below(&p->r, 5);
    if (roll < 3) {
      stopped done = stop_owner(p, &w, roll < 2 ? SIGKILL : SIGTERM);
      ok = done != STOP_FAILED;
      p->kills += done == STOP_DONE && roll < 2;
      p->stops += done == STOP_DONE && roll == 2;
      p->skipped += done == STOP_NONE;
    } else if (roll == 3 && up_count(p) < NODES) {
      ok = restart_one(p, &w);
    } else {
      p->saves++;
      ok = save_all(p);
    }
  }
  if (ok) {
    stopped done = stop_owner(p, &w, SIGKILL);
    ok = done != STOP_FAILED;
    p->kills += done == STOP_DONE;
    p->skipped += done == STOP_NONE;
  }
  ok = ok && wl_compare_entities(&w);
  CU_ASSERT(ok);
  fprintf(stderr,
          "  replicas crash: seed %llu: %u commands (%d kill -9, %d SIGTERM, %d restarts, %d "
          "saves, %d skipped), %zu entities, longest takeover %ld ms (TTL %d ms): %s\n",
          (unsigned long long)seed, w.steps, p->kills, p->stops, p->restarts, p->saves, p->skipped,
          w.nents, p->worst_ms, TTL_MS, ok ? "same" : "DIFFERENT");
  if (!ok)
    fprintf(stderr, "  logs: %s %s %s; data: %s\n", p->k.d[0].log_path, p->k.d[1].log_path,
            p->k.d[2].log_path, p->k.data);
  crash_count_kinds(&w);
  wl_free(&w);
  for (int i = 0; i < NODES; i++)
    rig_stop_node(p, i, SIGTERM);
  if (ref_up) {
    t_client_close(&refc);
    t_daemon_stop(&ref, SIGTERM, 10000);
  }
  etcd_stop(&p->k.e, SIGTERM);
  t_remove_temp_dir(p->k.e.dir);
  if (ok) {
    t_remove_temp_dir(p->k.data);
    for (int i = 0; i < NODES; i++)
      unlink(p->k.d[i].log_path);
    unlink(ref.log_path);
  }
  free(p);
  return ok;
}

static void test_random_replica_crashes(void) {
  crash_seeds seeds;
  crash_seeds_read(&seeds, 2);
  for (int i = 0; i < seeds.count; i++)
    if (!run_seed(seeds.seed[i], seeds.steps, "1"))
      return; /* (what it covered says nothing then) */
  crash_check_coverage();
}

static void test_random_replica_crashes_two(void) {
  crash_seeds seeds;
  crash_seeds_read(&seeds, 1);
  for (int i = 0; i < seeds.count; i++)
    if (!run_seed(seeds.seed[i], seeds.steps, "2"))
      return;
}

/* The daemon in group p1's recorded in-sync set, once there is one (-1: none within 15 s). */
static int insync_member(cluster *k) {
  for (long deadline = t_now_ms() + 15000; t_now_ms() < deadline; t_sleep_ms(20)) {
    cJSON *v = etcd_json(k, "/scened/replicas/p1");
    const cJSON *insync = cJSON_GetObjectItemCaseSensitive(v, "insync");
    int f = node_index(cJSON_GetStringValue(cJSON_GetArrayItem(insync, 0)));
    cJSON_Delete(v);
    if (f >= 0)
      return f;
  }
  return -1;
}

static int names_found(cluster *k, int at, char prefix, int n) {
  int found = 0;
  for (int i = 0; i < n; i++) {
    cJSON *r = t_client_call(&k->c[at],
                             "{\"cmd\":\"transform.find\",\"world\":\"p1.main\","
                             "\"path\":\"%c%d\"}",
                             prefix, i);
    if (t_resp_ok(r))
      found++;
    else if (found == i)
      t_report("a name acknowledged before is missing", r);
    cJSON_Delete(r);
  }
  return found;
}

static int create_names(cluster *k, int at, char prefix, int n) {
  int acked = 0;
  for (int i = 0; i < n; i++) {
    cJSON *r = t_client_call(&k->c[at],
                             "{\"cmd\":\"transform.create\",\"world\":\"p1.main\","
                             "\"name\":\"%c%d\"}",
                             prefix, i);
    acked += t_resp_ok(r);
    cJSON_Delete(r);
  }
  return acked;
}

/* A promoted copy is whole on disk: the follower that took the group over (its files become
 * the new epoch's, its journal going on there) is killed in turn after more writes,
 * and restarted with its directory: as the group's last owner with nobody in sync it claims the
 * group again and loads everything acknowledged, before and after the takeover. */
static void test_promoted_copy_reloads(void) {
  static const char *const extra[] = {"--replicas", "1", "--durability", "sync", NULL};
  cluster k;
  if (!replicas_cluster(&k, extra))
    return;
  int at = -1;
  cJSON *r = wait_ok_anywhere(&k, "{\"cmd\":\"world.create\",\"world\":\"p1.main\"}", 15000, &at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(create_names(&k, at, 't', 20), 20);
  int fi = insync_member(&k);
  CU_ASSERT_FATAL(fi >= 0 && fi != at);
  node_stop(&k, at, SIGKILL);
  int now_at = -1;
  r = wait_ok_anywhere(&k, "{\"cmd\":\"transform.find\",\"world\":\"p1.main\",\"path\":\"t0\"}",
                       TTL_MS + 15000, &now_at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  CU_ASSERT_EQUAL(now_at, fi);
  CU_ASSERT(t_daemon_log_contains(&k.d[fi], "group promoted from its copy"));
  CU_ASSERT_EQUAL(create_names(&k, fi, 'u', 10), 10);
  node_stop(&k, fi, SIGKILL);
  CU_ASSERT_FATAL(node_start(&k, fi));
  r = wait_ok_anywhere(&k, "{\"cmd\":\"transform.find\",\"world\":\"p1.main\",\"path\":\"u9\"}",
                       TTL_MS + 15000, &now_at);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON_Delete(r);
  printf("\n  owner %s killed, %s took over; killed and restarted, %s answers\n", node_name(at),
         node_name(fi), node_name(now_at));
  CU_ASSERT_EQUAL(now_at, fi);
  CU_ASSERT(t_daemon_log_contains(&k.d[fi], "group loaded"));
  CU_ASSERT_EQUAL(names_found(&k, fi, 't', 20), 20);
  CU_ASSERT_EQUAL(names_found(&k, fi, 'u', 10), 10);
  cluster_stop(&k);
}

int t_register_cluster_crash_replicas(void) {
  static const t_test tests[] = {
      {"random workloads, --replicas 1: kill -9 of owners amid pipelined writes",
       test_random_replica_crashes},
      {"random workloads, --replicas 2: kill -9 of owners amid pipelined writes",
       test_random_replica_crashes_two},
      {"a promoted copy is whole on disk: its owner killed and restarted loads it",
       test_promoted_copy_reloads},
  };
  return T_ADD_SUITE("cluster_crash_replicas", NULL, NULL, tests);
}

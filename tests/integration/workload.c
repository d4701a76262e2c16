/* The random workload of workload.h: requests are written as templates in which "@K" stands
 * for the entity of index K, rendered once with the subject's ids and once with the
 * reference's. */
#include "workload.h"

#include "b64.h"
#include "harness.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const wl_command_names[WL_KINDS] = {"world.create",
                                                "world.destroy",
                                                "entity.create",
                                                "entity.destroy",
                                                "transform.create",
                                                "transform.destroy",
                                                "transform.link",
                                                "transform.unlink",
                                                "transform.set_local",
                                                "transform.set_world",
                                                "transform.rename",
                                                "batch",
                                                "world.destroy (entities)",
                                                "entity.destroy (entities)"};

enum {
  K_WORLD_CREATE,
  K_WORLD_DESTROY,
  K_ENTITY_CREATE,
  K_ENTITY_DESTROY,
  K_CREATE,
  K_DESTROY,
  K_LINK,
  K_UNLINK,
  K_SET_LOCAL,
  K_SET_WORLD,
  K_RENAME,
  K_BATCH,
  K_WORLD_DESTROY_ENTITIES,
  K_ENTITY_DESTROY_LIST
};

const char *const wl_group_names[WL_GROUPS] = {"g0", "g1", "g2", "solo"};
static const char *const world_names[WL_WORLDS] = {"g0.a", "g0.b", "g1.a", "g1.b",
                                                   "g2.a", "g2.b", "solo"};

int wl_group_of(const char *world) {
  size_t n = strcspn(world, ".");
  for (int g = 0; g < WL_GROUPS; g++)
    if (strlen(wl_group_names[g]) == n && strncmp(world, wl_group_names[g], n) == 0)
      return g;
  return -1;
}

void wl_init(workload *w, uint64_t seed, bool cluster, wl_side subject, wl_side reference) {
  memset(w, 0, sizeof *w);
  w->r.state = seed;
  w->cluster = cluster;
  w->side[0] = subject;
  w->side[1] = reference;
  for (int i = 0; i < WL_WORLDS; i++) {
    w->worlds[i].name = world_names[i];
    w->worlds[i].group = wl_group_of(world_names[i]);
  }
}

void wl_free(workload *w) {
  for (int i = 0; i < WL_WORLDS; i++)
    free(w->worlds[i].members);
  free(w->ents);
  memset(w, 0, sizeof *w);
}

/* ---- the model: which entities exist and where they have transforms ---------------------- */

static int find_ent(const workload *w, int side, unsigned long long id) {
  for (size_t i = 0; i < w->nents; i++)
    if (w->ents[i].id[side] == id)
      return (int)i;
  return -1;
}

static int add_ent(workload *w, unsigned long long sub, unsigned long long ref, int group) {
  if (w->nents == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 64;
    w->ents = realloc(w->ents, sizeof *w->ents * w->cap);
    if (!w->ents)
      abort();
  }
  w->ents[w->nents] = (wl_ent){{sub, ref}, group, true};
  return (int)w->nents++;
}

static bool is_member(const wl_world *wd, int e) {
  for (size_t i = 0; i < wd->n; i++)
    if (wd->members[i] == e)
      return true;
  return false;
}

static void add_member(wl_world *wd, int e) {
  if (is_member(wd, e))
    return;
  if (wd->n == wd->cap) {
    wd->cap = wd->cap ? wd->cap * 2 : 32;
    wd->members = realloc(wd->members, sizeof *wd->members * wd->cap);
    if (!wd->members)
      abort();
  }
  wd->members[wd->n++] = e;
}

static void drop_member(wl_world *wd, int e) {
  for (size_t i = 0; i < wd->n; i++)
    if (wd->members[i] == e) {
      wd->members[i] = wd->members[--wd->n];
      return;
    }
}

/* ---- choices ------------------------------------------------------------------------------ */

static int pick_world(workload *w, bool may_be_missing) {
  int existing[WL_WORLDS], n = 0;
  for (int i = 0; i < WL_WORLDS; i++)
    if (w->worlds[i].exists)
      existing[n++] = i;
  if (n == 0 || (may_be_missing && rng_chance(&w->r, 0.05)))
    return (int)rng_below(&w->r, WL_WORLDS);
  return existing[rng_below(&w->r, (uint32_t)n)];
}

/* A transform of world wi (sometimes any entity at all, which may have none there). */
static int pick_member(workload *w, int wi) {
  wl_world *wd = &w->worlds[wi];
  if (wd->n == 0 || rng_chance(&w->r, 0.04))
    return w->nents ? (int)rng_below(&w->r, (uint32_t)w->nents) : -1;
  return wd->members[rng_below(&w->r, (uint32_t)wd->n)];
}

/* An entity for a world of group g: alive mostly, a destroyed (stale) one now and then. In a
 * cluster only the group's own entities, which live where the group does. */
static int pick_entity(workload *w, int g, bool alive) {
  int tries = 0;
  while (w->nents && tries++ < 64) {
    int e = (int)rng_below(&w->r, (uint32_t)w->nents);
    if (w->cluster && w->ents[e].group != g)
      continue;
    if (w->ents[e].alive == alive)
      return e;
  }
  return -1;
}

static const char *pick_name(workload *w) {
  static const char *const names[] = {"a", "b", "c", "wheel", "car"};
  return names[rng_below(&w->r, 5)];
}

/* ---- transform specs ---------------------------------------------------------------------- */

static void add_floats(text *t, const char *key, const float *v, int n) {
  text_addf(t, ",\"%s\":[", key);
  for (int i = 0; i < n; i++)
    text_addf(t, "%s%.9g", i ? "," : "", (double)v[i]);
  text_add(t, "]", 1);
}

/* A T * R * S matrix (column-major) with a scale that may mirror, or a sheared one. */
static void random_matrix(workload *w, float m[16]) {
  float q[4], s[3], t[3];
  rng_quat(&w->r, q);
  double len =
      sqrt((double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2] + (double)q[3] * q[3]);
  double x = q[0] / len, y = q[1] / len, z = q[2] / len, qw = q[3] / len;
  for (int k = 0; k < 3; k++) {
    s[k] = rng_float(&w->r, 0.5, 2);
    t[k] = rng_float(&w->r, -50, 50);
  }
  if (rng_chance(&w->r, 0.1))
    s[rng_below(&w->r, 3)] *= -1;
  double rot[9] = {1 - 2 * (y * y + z * z), 2 * (x * y + z * qw),    2 * (x * z - y * qw),
                   2 * (x * y - z * qw),    1 - 2 * (x * x + z * z), 2 * (y * z + x * qw),
                   2 * (x * z + y * qw),    2 * (y * z - x * qw),    1 - 2 * (x * x + y * y)};
  memset(m, 0, sizeof(float) * 16);
  for (int c = 0; c < 3; c++)
    for (int r = 0; r < 3; r++)
      m[c * 4 + r] = (float)(rot[c * 3 + r] * s[c]);
  if (rng_chance(&w->r, 0.1))
    m[4] += 0.3f; /* a shear: not T * R * S */
  m[12] = t[0], m[13] = t[1], m[14] = t[2], m[15] = 1;
}

/* A transform spec: a matrix (json or b64), parts, or with partial only some parts. */
static void add_spec(workload *w, text *t, bool may_be_partial) {
  float v[16];
  switch (rng_below(&w->r, may_be_partial ? 5 : 4)) {
  case 0:
    random_matrix(w, v);
    add_floats(t, "matrix", v, 16);
    return;
  case 1: {
    random_matrix(w, v);
    char b64[SCN_B64_LEN(sizeof v) + 1];
    scn_b64_encode(b64, v, sizeof v);
    b64[SCN_B64_LEN(sizeof v)] = '\0';
    text_addf(t, ",\"matrix_b64\":\"%s\"", b64);
    return;
  }
  case 2:
  case 3: {
    for (int k = 0; k < 3; k++)
      v[k] = rng_float(&w->r, -20, 20);
    add_floats(t, "t", v, 3);
    if (rng_chance(&w->r, 0.7)) {
      rng_quat(&w->r, v);
      add_floats(t, "r", v, 4);
    }
    if (rng_chance(&w->r, 0.5)) {
      for (int k = 0; k < 3; k++)
        v[k] = rng_float(&w->r, 0.5, 2);
      add_floats(t, "s", v, 3);
    }
    return;
  }
  default:
    text_add(t, ",\"partial\":true", 15);
    if (rng_chance(&w->r, 0.5)) {
      for (int k = 0; k < 3; k++)
        v[k] = rng_float(&w->r, -20, 20);
      add_floats(t, "t", v, 3);
    } else {
      rng_quat(&w->r, v);
      add_floats(t, "r", v, 4);
    }
    return;
  }
}

/* ---- one command ----------------------------------------------------------------------------- */

/* A transform.* op on world wi (without "world" inside a batch): its request members after
 * "cmd", into t; the kind it is. */
static int transform_op(workload *w, int wi, text *t) {
  int g = w->worlds[wi].group;
  uint32_t roll = rng_below(&w->r, 100);
  int e = pick_member(w, wi), p = pick_member(w, wi);
  if (roll < 30 || e < 0) {
    text_add(t, "\"transform.create\"", 18);
    int existing = rng_chance(&w->r, 0.4) ? pick_entity(w, g, rng_chance(&w->r, 0.9)) : -1;
    if (existing >= 0)
      text_addf(t, ",\"entity\":@%d", existing);
    if (p >= 0 && rng_chance(&w->r, 0.6))
      text_addf(t, ",\"parent\":@%d", p);
    if (rng_chance(&w->r, 0.4))
      text_addf(t, ",\"name\":\"%s\"", pick_name(w));
    if (rng_chance(&w->r, 0.8))
      add_spec(w, t, false);
    return K_CREATE;
  }
  if (roll < 40) {
    text_addf(t, "\"transform.destroy\",\"entity\":@%d", e);
    if (rng_chance(&w->r, 0.5))
      text_addf(t, ",\"recursive\":%s", rng_chance(&w->r, 0.7) ? "true" : "false");
    return K_DESTROY;
  }
  static const char *const keeps[] = {"", ",\"keep\":\"local\"", ",\"keep\":\"world\""};
  if (roll < 55) {
    text_addf(t, "\"transform.link\",\"entity\":@%d,\"parent\":@%d%s", e, p < 0 ? e : p,
              keeps[rng_below(&w->r, 3)]);
    return K_LINK;
  }
  if (roll < 63) {
    text_addf(t, "\"transform.unlink\",\"entity\":@%d%s", e, keeps[rng_below(&w->r, 3)]);
    return K_UNLINK;
  }
  if (roll < 92) {
    bool world = rng_chance(&w->r, 0.35);
    text_addf(t, "\"transform.set_%s\",\"entity\":@%d", world ? "world" : "local", e);
    add_spec(w, t, true);
    return world ? K_SET_WORLD : K_SET_LOCAL;
  }
  text_addf(t, "\"transform.rename\",\"entity\":@%d", e);
  if (rng_chance(&w->r, 0.2))
    text_add(t, ",\"name\":null", 12);
  else
    text_addf(t, ",\"name\":\"%s\"", pick_name(w));
  return K_RENAME;
}

/* A random command as a template; its kind, and the group whose owner runs it. */
static int make_command(workload *w, text *t, int *group) {
  uint32_t roll = rng_below(&w->r, 100);
  text_add(t, "{\"cmd\":", 7);
  *group = -1;
  if (roll < 5) {
    int wi = (int)rng_below(&w->r, WL_WORLDS);
    *group = w->worlds[wi].group;
    text_addf(t, "\"world.create\",\"world\":\"%s\"", w->worlds[wi].name);
    if (rng_chance(&w->r, 0.3))
      text_addf(t, ",\"history\":%u", rng_below(&w->r, 6));
    text_add(t, "}", 1);
    return K_WORLD_CREATE;
  }
  if (roll < 7) {
    int wi = pick_world(w, true);
    *group = w->worlds[wi].group;
    text_addf(t, "\"world.destroy\",\"world\":\"%s\"", w->worlds[wi].name);
    if (rng_chance(&w->r, 0.5)) {
      text_addf(t, ",\"entities\":true}");
      return K_WORLD_DESTROY_ENTITIES;
    }
    text_add(t, "}", 1);
    return K_WORLD_DESTROY;
  }
  if (roll < 12) {
    text_addf(t, "\"entity.create\"");
    if (rng_chance(&w->r, 0.6))
      text_addf(t, ",\"count\":%u", 1 + rng_below(&w->r, 4));
    /* In a cluster an entity lives where its group does: made on a world's owner. */
    if (w->cluster || rng_chance(&w->r, 0.3)) {
      int wi = pick_world(w, true);
      *group = w->worlds[wi].group;
      text_addf(t, ",\"world\":\"%s\"", w->worlds[wi].name);
    }
    text_add(t, "}", 1);
    return K_ENTITY_CREATE;
  }
  if (roll < 16 && rng_chance(&w->r, 0.4)) {
    /* A list: mostly alive ones, a stale one now and then (the whole list then fails); in a
     * cluster all of one group, which lives on one daemon. */
    int g = (int)rng_below(&w->r, WL_GROUPS);
    int n = (int)rng_below(&w->r, 5);
    *group = n ? g : -1;
    text_addf(t, "\"entity.destroy\",\"entities\":[");
    for (int i = 0, listed = 0; i < n; i++) {
      int e = pick_entity(w, g, !rng_chance(&w->r, 0.05));
      if (e >= 0)
        text_addf(t, listed++ ? ",@%d" : "@%d", e);
    }
    text_add(t, "]}", 2);
    return K_ENTITY_DESTROY_LIST;
  }
  if (roll < 16) {
    /* Often the newest entity: its slot is the highest, the case a rollback must not lose. */
    int e = w->nents ? (int)rng_below(&w->r, (uint32_t)w->nents) : -1;
    if (e >= 0 && rng_chance(&w->r, 0.5))
      e = (int)w->nents - 1;
    if (e < 0) {
      text_add(t, "\"entity.destroy\",\"entity\":1}", 28);
      return K_ENTITY_DESTROY;
    }
    *group = w->ents[e].group;
    text_addf(t, "\"entity.destroy\",\"entity\":@%d}", e);
    return K_ENTITY_DESTROY;
  }
  int wi = pick_world(w, true);
  *group = w->worlds[wi].group;
  if (roll < 30) {
    text_addf(t, "\"batch\",\"world\":\"%s\",\"ops\":[", w->worlds[wi].name);
    int ops = 1 + (int)rng_below(&w->r, 5);
    for (int i = 0; i < ops; i++) {
      text_add(t, i ? ",{\"cmd\":" : "{\"cmd\":", i ? 8 : 7);
      transform_op(w, wi, t);
      text_add(t, "}", 1);
    }
    text_add(t, "]}", 2);
    return K_BATCH;
  }
  text_addf(t, "\"transform.XXXX\"");
  t->len -= 16; /* (the op writes its own command name) */
  int kind = transform_op(w, wi, t);
  text_addf(t, ",\"world\":\"%s\"}", w->worlds[wi].name);
  return kind;
}

/* The template with @K replaced by side's id of entity K. */
static char *render(const workload *w, const char *tpl, int side) {
  text out = {0};
  for (const char *p = tpl; *p;) {
    if (*p != '@') {
      size_t n = strcspn(p, "@");
      text_add(&out, p, n);
      p += n;
      continue;
    }
    char *end;
    long k = strtol(p + 1, &end, 10);
    text_addf(&out, "%llu", w->ents[k].id[side]);
    p = end;
  }
  return out.s;
}

/* ---- comparing answers -------------------------------------------------------------------- */

static bool is_id_key(const char *k) {
  return k && (strcmp(k, "entity") == 0 || strcmp(k, "entities") == 0 || strcmp(k, "parent") == 0 ||
               strcmp(k, "children") == 0);
}

/* The ids in a response (members named as ids, in document order) are moved into ids and
 * removed, with "tick" and "node" (which no two daemons need share). */
static void take_ids(cJSON *j, unsigned long long *ids, size_t *n, size_t cap) {
  cJSON *c = j ? j->child : NULL;
  while (c) {
    cJSON *next = c->next;
    if (j->type == cJSON_Object && is_id_key(c->string)) {
      if (cJSON_IsNumber(c) && *n < cap)
        ids[(*n)++] = (unsigned long long)c->valuedouble;
      for (cJSON *e = cJSON_IsArray(c) ? c->child : NULL; e; e = e->next)
        if (cJSON_IsNumber(e) && *n < cap)
          ids[(*n)++] = (unsigned long long)e->valuedouble;
      if (cJSON_IsNull(c) && *n < cap)
        ids[(*n)++] = 0;
      cJSON_DetachItemViaPointer(j, c);
      cJSON_Delete(c);
    } else if (j->type == cJSON_Object && c->string &&
               (strcmp(c->string, "tick") == 0 || strcmp(c->string, "node") == 0)) {
      cJSON_DetachItemViaPointer(j, c);
      cJSON_Delete(c);
    } else {
      take_ids(c, ids, n, cap);
    }
    c = next;
  }
}

static void report_pair(const workload *w, const char *why, const cJSON *sub, const cJSON *ref,
                        const char *line) {
  char *a = sub ? cJSON_PrintUnformatted(sub) : NULL;
  char *b = ref ? cJSON_PrintUnformatted(ref) : NULL;
  fprintf(stderr,
          "  workload step %u: %s\n    request:   %.600s\n    subject:   %.600s\n"
          "    reference: %.600s\n",
          w->steps, why, line, a ? a : "(none)", b ? b : "(none)");
  free(a);
  free(b);
}

/* The two answers to one request agree: the same outcome (code, and in a standalone subject
 * the same message), the same result members, and ids that pair up (a new one on both sides
 * at once is a new entity of group g). */
static bool same_answer(workload *w, const cJSON *sub_in, const cJSON *ref_in, int g,
                        const char *line, bool names_ids) {
  if (!sub_in || !ref_in) {
    report_pair(w, "an answer is missing", sub_in, ref_in, line);
    return false;
  }
  cJSON *sub = cJSON_Duplicate(sub_in, true), *ref = cJSON_Duplicate(ref_in, true);
  bool same = true;
  const char *why = "the answers differ";
  cJSON *se = cJSON_GetObjectItemCaseSensitive(sub, "error");
  cJSON *re = cJSON_GetObjectItemCaseSensitive(ref, "error");
  if (w->cluster && names_ids && se && re) {
    /* messages name ids, which differ between the two */
    cJSON_DeleteItemFromObjectCaseSensitive(se, "message");
    cJSON_DeleteItemFromObjectCaseSensitive(re, "message");
  }
  enum { CAP = 4096 };
  static unsigned long long sids[CAP], rids[CAP];
  size_t ns = 0, nr = 0;
  take_ids(sub, sids, &ns, CAP);
  take_ids(ref, rids, &nr, CAP);
  if (ns != nr) {
    same = false;
    why = "the answers hold different numbers of ids";
  }
  for (size_t i = 0; same && i < ns; i++) {
    if (sids[i] == 0 || rids[i] == 0) {
      if (sids[i] != rids[i]) {
        same = false;
        why = "a parent is null on one side only";
      }
      continue;
    }
    int k = find_ent(w, 0, sids[i]);
    if (k < 0 && find_ent(w, 1, rids[i]) < 0) {
      if (!w->cluster && sids[i] != rids[i]) {
        same = false;
        why = "a new entity's id differs from the reference's";
      }
      add_ent(w, sids[i], rids[i], g);
    } else if (k < 0 || w->ents[k].id[1] != rids[i]) {
      same = false;
      why = "an id does not match the reference's";
    }
  }
  if (same && !cJSON_Compare(sub, ref, true))
    same = false;
  if (!same)
    report_pair(w, why, sub_in, ref_in, line);
  cJSON_Delete(sub);
  cJSON_Delete(ref);
  return same;
}

/* Without a reference: the ids an answer names that are new are new entities of group g. */
static bool new_ids(workload *w, const cJSON *answer, int g) {
  if (!answer)
    return false;
  cJSON *copy = cJSON_Duplicate(answer, true);
  enum { CAP = 4096 };
  static unsigned long long ids[CAP];
  size_t n = 0;
  take_ids(copy, ids, &n, CAP);
  cJSON_Delete(copy);
  for (size_t i = 0; i < n; i++)
    if (ids[i] && find_ent(w, 0, ids[i]) < 0)
      add_ent(w, ids[i], 0, g);
  return true;
}

/* ---- the model after an answer ------------------------------------------------------------- */

static unsigned long long num_field(const cJSON *j, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
  return cJSON_IsNumber(v) ? (unsigned long long)v->valuedouble : 0;
}

/* After an ok answer to op (the subject's request) in world wi, with result res. */
static void learn_op(workload *w, int wi, const cJSON *op, const cJSON *res) {
  const char *cmd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "cmd"));
  int e = find_ent(w, 0, num_field(op, "entity"));
  if (!cmd || wi < 0)
    return;
  if (strcmp(cmd, "transform.create") == 0) {
    int made = find_ent(w, 0, num_field(res, "entity"));
    if (made >= 0)
      add_member(&w->worlds[wi], made);
  } else if (strcmp(cmd, "transform.destroy") == 0 && e >= 0) {
    drop_member(&w->worlds[wi], e);
  }
}

static void end_entity(workload *w, int e) {
  if (e < 0)
    return;
  w->ents[e].alive = false;
  for (int i = 0; i < WL_WORLDS; i++)
    drop_member(&w->worlds[i], e);
}

/* world.destroy with "entities": those believed to have a transform in world wi and in no
 * other end (the model is a belief, rebuilt from what is read when the state is compared). */
static void end_orphans(workload *w, int wi) {
  wl_world *wd = &w->worlds[wi];
  for (size_t k = wd->n; k-- > 0;) {
    int e = wd->members[k];
    bool elsewhere = false;
    for (int i = 0; i < WL_WORLDS && !elsewhere; i++)
      elsewhere = i != wi && is_member(&w->worlds[i], e);
    if (!elsewhere)
      end_entity(w, e);
  }
}

static int world_index(const char *name) {
  for (int i = 0; name && i < WL_WORLDS; i++)
    if (strcmp(world_names[i], name) == 0)
      return i;
  return -1;
}

static void learn(workload *w, const char *line, const cJSON *answer) {
  cJSON *rq = cJSON_Parse(line);
  const char *cmd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rq, "cmd"));
  int wi = world_index(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rq, "world")));
  bool ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(answer, "ok"));
  if (!cmd) {
    cJSON_Delete(rq);
    return;
  }
  if (!ok) {
    /* a transform that is not found where the model thought it was */
    int e = find_ent(w, 0, num_field(rq, "entity"));
    if (wi >= 0 && e >= 0 && strcmp(t_resp_code(answer), "NOT_FOUND") == 0 &&
        strncmp(cmd, "transform.", 10) == 0 && strcmp(cmd, "transform.create") != 0)
      drop_member(&w->worlds[wi], e);
    if (wi >= 0 && strcmp(t_resp_code(answer), "ALREADY_EXISTS") == 0 &&
        strcmp(cmd, "world.create") == 0)
      w->worlds[wi].exists = true;
    cJSON_Delete(rq);
    return;
  }
  if (strcmp(cmd, "world.create") == 0 && wi >= 0) {
    w->worlds[wi].exists = true;
  } else if (strcmp(cmd, "world.destroy") == 0 && wi >= 0) {
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rq, "entities")))
      end_orphans(w, wi);
    w->worlds[wi].exists = false;
    w->worlds[wi].n = 0;
  } else if (strcmp(cmd, "entity.destroy") == 0) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(rq, "entities");
    for (const cJSON *x = list ? list->child : NULL; x; x = x->next)
      end_entity(w, find_ent(w, 0, (unsigned long long)x->valuedouble));
    if (!list)
      end_entity(w, find_ent(w, 0, num_field(rq, "entity")));
  } else if (strcmp(cmd, "batch") == 0) {
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(rq, "ops");
    const cJSON *results = cJSON_GetObjectItemCaseSensitive(answer, "results");
    const cJSON *res = results ? results->child : NULL;
    for (const cJSON *op = ops ? ops->child : NULL; op; op = op->next) {
      learn_op(w, wi, op, res);
      res = res ? res->next : NULL;
    }
  } else {
    learn_op(w, wi, rq, answer);
  }
  cJSON_Delete(rq);
}

/* ---- steps ---------------------------------------------------------------------------------- */

/* Sends the same requests (templates) to both sides; answers in sub[] and ref[]. */
static bool send_both(workload *w, char **tpls, const int *groups, size_t n, cJSON **sub,
                      cJSON **ref) {
  wl_req *reqs = calloc(n, sizeof *reqs);
  bool ok = true;
  for (int s = 0; s < 2 && ok && w->side[s].send; s++) {
    for (size_t i = 0; i < n; i++) {
      reqs[i].line = render(w, tpls[i], s);
      snprintf(reqs[i].group, sizeof reqs[i].group, "%s",
               groups[i] >= 0 ? wl_group_names[groups[i]] : "");
    }
    if (s == 0 && n)
      snprintf(w->last, sizeof w->last, "%s", reqs[n - 1].line);
    ok = w->side[s].send(w->side[s].ud, reqs, n, s == 0 ? sub : ref);
    for (size_t i = 0; i < n; i++)
      free(reqs[i].line);
  }
  free(reqs);
  return ok;
}

bool wl_step(workload *w) {
  text t = {0};
  int group;
  int kind = make_command(w, &t, &group);
  w->steps++;
  w->sent[kind]++;
  cJSON *sub = NULL, *ref = NULL;
  char *tpl = t.s;
  bool ok = send_both(w, &tpl, &group, 1, &sub, &ref);
  char *line = render(w, tpl, 0);
  if (!ok)
    fprintf(stderr, "  workload step %u: a side cannot be reached (request %s)\n", w->steps, line);
  if (!w->side[1].send)
    ok = ok && new_ids(w, sub, group);
  else
    ok = ok && same_answer(w, sub, ref, group, line, strchr(tpl, '@') != NULL);
  if (ok) {
    if (t_resp_ok(sub))
      w->answered_ok[kind]++;
    learn(w, line, sub);
  }
  free(line);
  cJSON_Delete(sub);
  cJSON_Delete(ref);
  text_free(&t);
  return ok;
}

/* ---- the whole state ----------------------------------------------------------------------- */

/* world.list on both sides (standalone: in a cluster it names one daemon's worlds, and the
 * state is compared world by world instead). */
static bool compare_lists(workload *w, const char *when) {
  if (w->cluster)
    return true;
  char *tpl = "{\"cmd\":\"world.list\"}";
  int group = -1;
  cJSON *sub = NULL, *ref = NULL;
  bool ok = send_both(w, &tpl, &group, 1, &sub, &ref) && same_answer(w, sub, ref, -1, tpl, false);
  if (!ok)
    fprintf(stderr, "  (world.list %s)\n", when);
  cJSON_Delete(sub);
  cJSON_Delete(ref);
  return ok;
}

/* Requests sent to both sides at once (templates), what each is about, and the answers. */
typedef struct probes {
  char **tpls;
  int *groups, *worlds, *ents; /* the world and entity index a request reads, -1 for none */
  cJSON **sub, **ref;
  size_t n;
} probes;

static void probes_init(probes *q, size_t cap) {
  q->tpls = calloc(cap, sizeof *q->tpls);
  q->groups = calloc(cap, sizeof *q->groups);
  q->worlds = calloc(cap, sizeof *q->worlds);
  q->ents = calloc(cap, sizeof *q->ents);
  q->sub = calloc(cap, sizeof *q->sub);
  q->ref = calloc(cap, sizeof *q->ref);
  q->n = 0;
  if (!q->tpls || !q->groups || !q->worlds || !q->ents || !q->sub || !q->ref)
    abort();
}

/* Takes the text's string as the request. */
static void probes_add(probes *q, text *t, int group, int world, int ent) {
  q->tpls[q->n] = t->s;
  q->groups[q->n] = group;
  q->worlds[q->n] = world;
  q->ents[q->n++] = ent;
}

static void probes_free(probes *q) {
  for (size_t i = 0; i < q->n; i++) {
    cJSON_Delete(q->sub[i]);
    cJSON_Delete(q->ref[i]);
    free(q->tpls[i]);
  }
  free(q->tpls);
  free(q->groups);
  free(q->worlds);
  free(q->ents);
  free(q->sub);
  free(q->ref);
}

bool wl_compare_state(workload *w, const char *when) {
  if (!compare_lists(w, when))
    return false;
  /* Every world: its existence (a transform.find there answers NOT_FOUND for the world or for
   * the path), then every entity ever made, read in b64 (bit for bit). */
  probes q;
  probes_init(&q, (size_t)WL_WORLDS * (w->nents + 1));
  for (int wi = 0; wi < WL_WORLDS; wi++) {
    text t = {0};
    text_addf(&t, "{\"cmd\":\"transform.find\",\"world\":\"%s\",\"path\":\"-none-\"}",
              world_names[wi]);
    probes_add(&q, &t, w->worlds[wi].group, wi, -1);
    for (size_t e = 0; e < w->nents; e++) {
      text g = {0};
      text_addf(&g, "{\"cmd\":\"transform.get\",\"world\":\"%s\",\"entity\":@%zu}", world_names[wi],
                e);
      probes_add(&q, &g, w->worlds[wi].group, wi, (int)e);
    }
  }
  bool ok = send_both(w, q.tpls, q.groups, q.n, q.sub, q.ref);
  if (!ok)
    fprintf(stderr, "  reading the state %s: a side cannot be reached\n", when);
  for (int wi = 0; wi < WL_WORLDS; wi++)
    w->worlds[wi].n = 0;
  int differences = 0;
  for (size_t i = 0; ok && i < q.n && differences < 5; i++) {
    char *line = render(w, q.tpls[i], 0);
    if (!same_answer(w, q.sub[i], q.ref[i], q.groups[i], line, q.ents[i] >= 0)) {
      if (differences++ == 0)
        fprintf(stderr, "  (the state read %s)\n", when);
    } else if (q.ents[i] < 0) {
      w->worlds[q.worlds[i]].exists =
          strcmp(t_resp_code(q.ref[i]), "NOT_FOUND") == 0 &&
          strstr(t_resp_str(cJSON_GetObjectItemCaseSensitive(q.ref[i], "error"), "message"),
                 "no transform at path");
    } else if (t_resp_ok(q.ref[i])) {
      add_member(&w->worlds[q.worlds[i]], q.ents[i]);
    }
    free(line);
  }
  probes_free(&q);
  return ok && differences == 0;
}

bool wl_compare_entities(workload *w) {
  /* A probe world per group (a name no step uses): an entity alive there takes a transform. */
  probes q;
  probes_init(&q, WL_GROUPS + w->nents);
  for (int g = 0; g < WL_GROUPS; g++) {
    text t = {0};
    text_addf(&t, "{\"cmd\":\"world.create\",\"world\":\"%s.probe\"}", wl_group_names[g]);
    probes_add(&q, &t, g, -1, -1);
  }
  for (size_t e = 0; e < w->nents; e++) {
    text t = {0};
    int g = w->ents[e].group < 0 ? WL_GROUPS - 1 : w->ents[e].group;
    text_addf(&t, "{\"cmd\":\"transform.create\",\"world\":\"%s.probe\",\"entity\":@%zu}",
              wl_group_names[g], e);
    probes_add(&q, &t, g, -1, (int)e);
  }
  bool ok = send_both(w, q.tpls, q.groups, q.n, q.sub, q.ref);
  int differences = 0;
  for (size_t i = 0; ok && i < q.n && differences < 5; i++) {
    char *line = render(w, q.tpls[i], 0);
    if (!same_answer(w, q.sub[i], q.ref[i], q.groups[i], line, q.ents[i] >= 0))
      differences++;
    free(line);
  }
  probes_free(&q);
  return ok && differences == 0;
}

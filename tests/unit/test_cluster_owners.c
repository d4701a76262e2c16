/* The ownership core of the cluster (server/cluster/owners.h) without etcd, the store or a
 * loop: made-up watch events, full reads and answers, in the orders a slow watch, a lost answer
 * or a race give them, and what the core then asks of its ops (recorded by a fake).
 *
 * The cases the cluster suite drives through a real etcd, a watch-delaying proxy and a fake
 * gateway (an owner's delete heard after this daemon's claim, a claim whose answer is lost, a
 * hand-off seen on the watch before its txn's answer) run here in milliseconds. */
#include "cluster/owners.h"
#include "ops/log.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#define SELF "a"
#define SELF_LEASE 7
#define OTHER "b"
#define OTHER_LEASE 5
#define MOVE_LIMIT 1000

/* What the core asked of its ops. */
typedef struct fake {
  scn_self self;
  scn_owners o;
  uint64_t now;
  bool serving, on_disk, sends_start;
  scn_load_result load_result;
  int loads, drops, freezes, unfreezes, claims, served, handoffs, reads, leases_lost, changes;
  int64_t load_epoch, served_rev, handoff_rev;
  scn_arrival arrival;
  char dropped_to[SCN_NAME_MAX + 1], handoff_to[SCN_NAME_MAX + 1];
  /* the move's answer and the waiters' wakes */
  int move_answers, wakes;
  bool move_ok;
  char move_message[300];
  char move_node[SCN_NAME_MAX + 1], move_addr[SCN_ADDR_MAX]; /* an ok answer's new owner */
} fake;

static uint64_t fake_now(void *ud) { return ((fake *)ud)->now; }
static bool fake_serving(void *ud) { return ((fake *)ud)->serving; }

static bool fake_on_disk(void *ud, const char *group) {
  (void)group;
  return ((fake *)ud)->on_disk;
}

static scn_load_result fake_load(void *ud, const char *group, int64_t epoch, scn_arrival how) {
  (void)group;
  fake *f = ud;
  f->loads++;
  f->load_epoch = epoch;
  f->arrival = how;
  return f->load_result;
}

static void fake_drop(void *ud, const char *group, const char *to, const char *to_addr) {
  (void)group;
  (void)to_addr;
  fake *f = ud;
  f->drops++;
  snprintf(f->dropped_to, sizeof f->dropped_to, "%s", to);
}

static bool fake_freeze(void *ud, const char *group, uint64_t *snapshot, uint64_t *history) {
  (void)group;
  *snapshot = *history = 0;
  ((fake *)ud)->freezes++;
  return true;
}

static void fake_unfreeze(void *ud, const char *group) {
  (void)group;
  ((fake *)ud)->unfreezes++;
}

static bool fake_claim(void *ud, const char *group) {
  (void)group;
  fake *f = ud;
  f->claims++;
  return f->sends_start;
}

static bool fake_served(void *ud, const char *group, int64_t mod_rev) {
  (void)group;
  fake *f = ud;
  f->served++;
  f->served_rev = mod_rev;
  return f->sends_start;
}

static bool fake_handoff(void *ud, const char *group, int64_t mod_rev, const scn_node_entry *to) {
  (void)group;
  fake *f = ud;
  f->handoffs++;
  f->handoff_rev = mod_rev;
  snprintf(f->handoff_to, sizeof f->handoff_to, "%s", to->name);
  return f->sends_start;
}

static bool fake_read(void *ud, const char *group) {
  (void)group;
  fake *f = ud;
  f->reads++;
  return f->sends_start;
}

static void fake_lease_lost(void *ud, const char *why) {
  (void)why;
  ((fake *)ud)->leases_lost++;
}

static void fake_changed(void *ud) { ((fake *)ud)->changes++; }

static void on_move_done(void *ud, const scn_move_answer *a) {
  fake *f = ud;
  f->move_answers++;
  f->move_ok = a->ok;
  snprintf(f->move_message, sizeof f->move_message, "%s", a->message ? a->message : "");
  snprintf(f->move_node, sizeof f->move_node, "%s", a->ok ? a->node : "");
  snprintf(f->move_addr, sizeof f->move_addr, "%s", a->ok ? a->addr : "");
}

static void on_wake(void *ud) { ((fake *)ud)->wakes++; }

/* A registered daemon SELF whose fence is up, with groups on disk. */
static void fake_init(fake *f) {
  memset(f, 0, sizeof *f);
  snprintf(f->self.node, sizeof f->self.node, SELF);
  snprintf(f->self.addr, sizeof f->self.addr, "127.0.0.1:7001");
  f->self.lease = SELF_LEASE;
  f->self.registered = true;
  f->serving = f->on_disk = f->sends_start = true;
  f->load_result = SCN_LOADED;
  scn_owner_ops ops = {.ud = f,
                       .now = fake_now,
                       .serving = fake_serving,
                       .on_disk = fake_on_disk,
                       .load = fake_load,
                       .drop = fake_drop,
                       .freeze = fake_freeze,
                       .unfreeze = fake_unfreeze,
                       .send_claim = fake_claim,
                       .send_served = fake_served,
                       .send_handoff = fake_handoff,
                       .send_read = fake_read,
                       .lease_lost = fake_lease_lost,
                       .load_changed = fake_changed};
  scn_owners_init(&f->o, &f->self, &ops);
}

static void fake_free(fake *f) { scn_owners_free(&f->o, "the test ends"); }

/* ---- made-up keys ---------------------------------------------------------------------------- */

typedef struct made {
  char key[128];
  scn_buf value;
  scn_kv kv;
} made;

/* m's key and the value written so far as a key-value of revision rev under lease (the value
 * gets a terminating '\0' that its length leaves out). */
static const scn_kv *made_kv(made *m, int64_t rev, int64_t lease) {
  scn_buf_addc(&m->value, '\0');
  m->kv = (scn_kv){.key = m->key,
                   .value = m->value.data,
                   .value_len = m->value.len - 1,
                   .mod_revision = rev,
                   .lease = lease};
  return &m->kv;
}

/* The group's key naming node (from: a hand-off by that node, NULL: none). */
static const scn_kv *group_kv(made *m, const char *group, const char *node, const char *from,
                              int64_t rev, int64_t lease) {
  snprintf(m->key, sizeof m->key, "%s%s", SCN_GROUPS_PREFIX, group);
  m->value = (scn_buf){0};
  char addr[64];
  snprintf(addr, sizeof addr, "%s.example:7000", node);
  scn_owners_group_value(&m->value, node, addr, from);
  return made_kv(m, rev, lease);
}

static const scn_kv *node_kv(made *m, const char *node, int64_t rev, int64_t lease) {
  snprintf(m->key, sizeof m->key, "%s%s", SCN_NODES_PREFIX, node);
  m->value = (scn_buf){0};
  char value[256];
  snprintf(value, sizeof value,
           "{\"node\":\"%s\",\"addr\":\"%s.example:7000\",\"worlds\":1,\"transforms\":2,"
           "\"connections\":3,\"http\":\"\",\"world_names\":[\"w1\"]}",
           node, node);
  scn_buf_adds(&m->value, value);
  return made_kv(m, rev, lease);
}

static void watch_put(fake *f, const scn_kv *kv) {
  scn_kv_event ev = {.change = SCN_KV_PUT, .kv = *kv};
  scn_owners_watched(&f->o, &ev);
}

static void watch_group(fake *f, const char *group, const char *node, const char *from, int64_t rev,
                        int64_t lease) {
  made m;
  watch_put(f, group_kv(&m, group, node, from, rev, lease));
  scn_buf_free(&m.value);
}

static void watch_node(fake *f, const char *node, int64_t rev, int64_t lease) {
  made m;
  watch_put(f, node_kv(&m, node, rev, lease));
  scn_buf_free(&m.value);
}

static void watch_delete(fake *f, const char *prefix, const char *name, int64_t rev) {
  char key[128];
  snprintf(key, sizeof key, "%s%s", prefix, name);
  scn_kv_event ev = {.change = SCN_KV_DELETE, .kv = {.key = key, .mod_revision = rev}};
  scn_owners_watched(&f->o, &ev);
}

static void claim_won(fake *f, const char *group, int64_t rev) {
  scn_kv_answer a = {.succeeded = true, .revision = rev};
  scn_owners_claim_answered(&f->o, group, &a);
}

static scn_group_entry *group(fake *f, const char *name) {
  scn_group_entry *g = scn_owners_find(&f->o, name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  return g;
}

/* SELF owns g, claimed at rev (from the sweep). */
static void own(fake *f, const char *name, int64_t rev) {
  scn_owners_claim_unowned(&f->o, name);
  CU_ASSERT_EQUAL(group(f, name)->state, SCN_GROUP_CLAIMING);
  claim_won(f, name, rev);
  CU_ASSERT_EQUAL_FATAL(group(f, name)->state, SCN_GROUP_OWNED);
}

/* ---- the tests ------------------------------------------------------------------------------- */

/* The old owner's put and delete, heard on a lagging watch after this daemon's claim won at a
 * later revision, change nothing; a delete newer than the claim still does. */
static void test_late_delete(void) {
  fake f;
  fake_init(&f);
  own(&f, "g", 20);
  CU_ASSERT_EQUAL(f.loads, 1);
  CU_ASSERT_EQUAL(f.load_epoch, 20);
  CU_ASSERT_EQUAL(f.arrival, SCN_ARRIVED_BY_CLAIM);
  watch_group(&f, "g", OTHER, NULL, 10, OTHER_LEASE);
  watch_delete(&f, SCN_GROUPS_PREFIX, "g", 15);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_OWNED);
  CU_ASSERT_TRUE(g->key);
  CU_ASSERT_STRING_EQUAL(g->node, SELF);
  CU_ASSERT_EQUAL(f.drops, 0);
  CU_ASSERT_EQUAL(f.o.stats.lost, 0);
  CU_ASSERT_EQUAL(f.claims, 1);
  /* this daemon's own key deleted (its lease expired): lost, and raced for again */
  watch_delete(&f, SCN_GROUPS_PREFIX, "g", 25);
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_CLAIMING);
  CU_ASSERT_EQUAL(f.drops, 1);
  CU_ASSERT_EQUAL(f.o.stats.lost, 1);
  CU_ASSERT_EQUAL(f.claims, 2);
  fake_free(&f);
}

/* A full read that does not find a key deletes it as of the read's revision: an older put of
 * that key, heard later, is not taken. */
static void test_read_marks_delete(void) {
  fake f;
  fake_init(&f);
  watch_group(&f, "g", OTHER, NULL, 10, OTHER_LEASE);
  CU_ASSERT_TRUE(group(&f, "g")->key);
  made me;
  const scn_kv *self_key = node_kv(&me, SELF, 3, SELF_LEASE);
  CU_ASSERT_TRUE(scn_owners_reread(&f.o, 30, self_key, 1));
  scn_buf_free(&me.value);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_FALSE(g->key);
  CU_ASSERT_EQUAL(g->mod_rev, 30);
  CU_ASSERT_STRING_EQUAL(g->prev, OTHER);
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_CLAIMING); /* its owner went: claimed */
  watch_group(&f, "g", OTHER, NULL, 10, OTHER_LEASE);
  CU_ASSERT_FALSE(g->key);
  claim_won(&f, "g", 31);
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_OWNED);
  CU_ASSERT_EQUAL(f.o.stats.takeovers, 1);
  fake_free(&f);
}

/* A claim whose answer is lost (a timeout) though it applied: the watch's put naming this
 * daemon with its lease loads the group; the claim's waiters hear of the failure at once. */
static void test_lost_claim_answer(void) {
  fake f;
  fake_init(&f);
  scn_owners_claim_unowned(&f.o, "g");
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_CLAIMING);
  CU_ASSERT_TRUE(scn_owners_wait(g, on_wake, &f));
  scn_kv_answer lost = {.why = "http://127.0.0.1:2379: Operation timed out"};
  scn_owners_claim_answered(&f.o, "g", &lost);
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_NONE);
  CU_ASSERT_EQUAL(f.wakes, 1);
  CU_ASSERT_EQUAL(f.loads, 0);
  watch_group(&f, "g", SELF, NULL, 20, SELF_LEASE);
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_OWNED);
  CU_ASSERT_EQUAL(g->epoch, 20);
  CU_ASSERT_EQUAL(f.loads, 1);
  CU_ASSERT_EQUAL(f.load_epoch, 20);
  CU_ASSERT_EQUAL(f.arrival, SCN_ARRIVED_BY_CLAIM);
  CU_ASSERT_EQUAL(f.served, 0); /* no hand-off to confirm */
  fake_free(&f);
}

/* A claim whose answer is lost and that lost the race: the watch names the winner, and
 * nothing is loaded here; a key naming this daemon under another lease (an older one) is not
 * adopted either. */
static void test_lost_claim_lost_race(void) {
  fake f;
  fake_init(&f);
  scn_owners_claim_unowned(&f.o, "g");
  scn_kv_answer lost = {.why = "timeout"};
  scn_owners_claim_answered(&f.o, "g", &lost);
  watch_group(&f, "g", OTHER, NULL, 20, OTHER_LEASE);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_NONE);
  CU_ASSERT_STRING_EQUAL(g->node, OTHER);
  watch_group(&f, "h", SELF, NULL, 21, SELF_LEASE + 1);
  CU_ASSERT_EQUAL(group(&f, "h")->state, SCN_GROUP_NONE);
  CU_ASSERT_EQUAL(f.loads, 0);
  fake_free(&f);
}

/* A claim that lost the race in its answer: the failure branch's read names the winner. */
static void test_claim_lost_in_answer(void) {
  fake f;
  fake_init(&f);
  scn_owners_claim_unowned(&f.o, "g");
  made m;
  scn_kv_answer a = {
      .succeeded = false, .kvs = group_kv(&m, "g", OTHER, NULL, 12, OTHER_LEASE), .nkvs = 1};
  scn_owners_claim_answered(&f.o, "g", &a);
  scn_buf_free(&m.value);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_NONE);
  CU_ASSERT_TRUE(g->key);
  CU_ASSERT_STRING_EQUAL(g->node, OTHER);
  CU_ASSERT_EQUAL(g->mod_rev, 12);
  CU_ASSERT_EQUAL(f.loads, 0);
  fake_free(&f);
}

/* A read of a group's key goes out once however many commands wait for it; its answer wakes
 * them all. */
static void test_read(void) {
  fake f;
  fake_init(&f);
  scn_group_entry *g = scn_owners_get(&f.o, "g");
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_TRUE(scn_owners_read(&f.o, g));
    CU_ASSERT_TRUE(scn_owners_wait(g, on_wake, &f));
  }
  CU_ASSERT_EQUAL(f.reads, 1);
  made m;
  scn_kv_answer a = {.kvs = group_kv(&m, "g", OTHER, NULL, 12, OTHER_LEASE), .nkvs = 1};
  scn_owners_read_answered(&f.o, "g", &a);
  scn_buf_free(&m.value);
  CU_ASSERT_EQUAL(f.wakes, 3);
  CU_ASSERT_STRING_EQUAL(g->node, OTHER);
  CU_ASSERT_FALSE(g->reading);
  scn_kv_answer none = {0};
  CU_ASSERT_TRUE(scn_owners_read(&f.o, g));
  scn_owners_read_answered(&f.o, "g", &none);
  CU_ASSERT_EQUAL(f.reads, 2);
  CU_ASSERT_STRING_EQUAL(g->node, OTHER); /* a read that finds nothing deletes nothing */
  f.sends_start = false;
  CU_ASSERT_FALSE(scn_owners_read(&f.o, g));
  fake_free(&f);
}

/* SELF owns g at 20 and moves it to OTHER. */
static void start_move(fake *f) {
  own(f, "g", 20);
  watch_node(f, OTHER, 2, OTHER_LEASE);
  scn_move_order order = {
      .group = "g", .to = OTHER, .done = on_move_done, .ud = f, .limit = MOVE_LIMIT};
  int code = 0;
  char msg[200] = "";
  CU_ASSERT_EQUAL_FATAL(scn_owners_move(&f->o, &order, &code, msg, sizeof msg), 0);
  CU_ASSERT_EQUAL(group(f, "g")->state, SCN_GROUP_FROZEN);
  CU_ASSERT_EQUAL(f->freezes, 1);
  CU_ASSERT_EQUAL(f->handoffs, 1);
  CU_ASSERT_EQUAL(f->handoff_rev, 20);
  CU_ASSERT_STRING_EQUAL(f->handoff_to, OTHER);
}

/* The hand-off is seen on the watch before its txn's answer, which is then lost: the group is
 * dropped once, at the watch's event, and the move is answered when the target confirms. */
static void test_handoff_seen_on_watch_first(void) {
  fake f;
  fake_init(&f);
  start_move(&f);
  watch_group(&f, "g", OTHER, SELF, 30, OTHER_LEASE);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_NONE);
  CU_ASSERT_EQUAL(f.drops, 1);
  CU_ASSERT_STRING_EQUAL(f.dropped_to, OTHER);
  CU_ASSERT_PTR_NOT_NULL(g->mv);
  CU_ASSERT_EQUAL(f.move_answers, 0);
  scn_kv_answer lost = {.why = "timeout"};
  scn_owners_handoff_answered(&f.o, "g", &lost);
  CU_ASSERT_EQUAL(f.unfreezes, 0); /* not taken back: the watch saw it apply */
  CU_ASSERT_EQUAL(f.move_answers, 0);
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_NONE);
  watch_group(&f, "g", OTHER, NULL, 31, OTHER_LEASE);
  CU_ASSERT_EQUAL(f.move_answers, 1);
  CU_ASSERT_TRUE(f.move_ok);
  /* the answer names the new owner, as MOVED would */
  CU_ASSERT_STRING_EQUAL(f.move_node, OTHER);
  CU_ASSERT_STRING_EQUAL(f.move_addr, OTHER ".example:7000");
  CU_ASSERT_EQUAL(f.o.stats.moves, 1);
  CU_ASSERT_EQUAL(f.drops, 1);
  CU_ASSERT_EQUAL(f.o.stats.lost, 0);
  fake_free(&f);
}

/* The txn's answer first, then the same put on the watch: dropped once. */
static void test_handoff_answered_first(void) {
  fake f;
  fake_init(&f);
  start_move(&f);
  scn_kv_answer ok = {.succeeded = true, .revision = 30};
  scn_owners_handoff_answered(&f.o, "g", &ok);
  CU_ASSERT_EQUAL(f.drops, 1);
  watch_group(&f, "g", OTHER, SELF, 30, OTHER_LEASE);
  CU_ASSERT_EQUAL(f.drops, 1);
  CU_ASSERT_EQUAL(f.move_answers, 0);
  watch_group(&f, "g", OTHER, NULL, 31, OTHER_LEASE);
  CU_ASSERT_EQUAL(f.move_answers, 1);
  CU_ASSERT_TRUE(f.move_ok);
  fake_free(&f);
}

/* A hand-off whose txn failed (the key changed meanwhile): the group is served here again. */
static void test_handoff_failed(void) {
  fake f;
  fake_init(&f);
  start_move(&f);
  scn_kv_answer failed = {.succeeded = false};
  scn_owners_handoff_answered(&f.o, "g", &failed);
  CU_ASSERT_EQUAL(group(&f, "g")->state, SCN_GROUP_OWNED);
  CU_ASSERT_EQUAL(f.unfreezes, 1);
  CU_ASSERT_EQUAL(f.move_answers, 1);
  CU_ASSERT_FALSE(f.move_ok);
  CU_ASSERT_PTR_NOT_NULL(strstr(f.move_message, "changed meanwhile"));
  CU_ASSERT_EQUAL(f.drops, 0);
  fake_free(&f);
}

/* A switchover: frozen, the hand-off waits for scn_owners_move_hand_off (the target caught
 * up), then goes as a move's; one whose target does not catch up in time is unfrozen and
 * answered UNAVAILABLE, and a late hand-off then does nothing. */
static void test_switchover_waits(void) {
  fake f;
  fake_init(&f);
  own(&f, "g", 20);
  watch_node(&f, OTHER, 2, OTHER_LEASE);
  scn_move_order order = {.group = "g",
                          .to = OTHER,
                          .done = on_move_done,
                          .ud = &f,
                          .limit = MOVE_LIMIT,
                          .catch_up_limit = 100};
  int code = 0;
  char msg[200] = "";
  CU_ASSERT_EQUAL_FATAL(scn_owners_move(&f.o, &order, &code, msg, sizeof msg), 0);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_FROZEN);
  CU_ASSERT_EQUAL(f.handoffs, 0);
  f.now += 50;
  scn_owners_expire_moves(&f.o);
  CU_ASSERT_EQUAL(f.move_answers, 0);
  scn_owners_move_hand_off(&f.o, g);
  CU_ASSERT_EQUAL(f.handoffs, 1);
  CU_ASSERT_STRING_EQUAL(f.handoff_to, OTHER);
  scn_owners_move_hand_off(&f.o, g); /* once */
  CU_ASSERT_EQUAL(f.handoffs, 1);
  f.now += 100; /* past the catch-up limit, not the confirmation's */
  scn_owners_expire_moves(&f.o);
  CU_ASSERT_EQUAL(f.move_answers, 0);
  scn_kv_answer ok = {.succeeded = true, .revision = 30};
  scn_owners_handoff_answered(&f.o, "g", &ok);
  watch_group(&f, "g", OTHER, NULL, 31, OTHER_LEASE);
  CU_ASSERT_EQUAL(f.move_answers, 1);
  CU_ASSERT_TRUE(f.move_ok);
  /* Another group whose target never catches up. */
  own(&f, "h", 40);
  order.group = "h";
  CU_ASSERT_EQUAL_FATAL(scn_owners_move(&f.o, &order, &code, msg, sizeof msg), 0);
  f.now += 101;
  scn_owners_expire_moves(&f.o);
  CU_ASSERT_EQUAL(f.move_answers, 2);
  CU_ASSERT_FALSE(f.move_ok);
  CU_ASSERT_PTR_NOT_NULL(strstr(f.move_message, "did not catch up"));
  CU_ASSERT_EQUAL(group(&f, "h")->state, SCN_GROUP_OWNED);
  CU_ASSERT_EQUAL(f.unfreezes, 1);
  scn_owners_move_hand_off(&f.o, group(&f, "h"));
  CU_ASSERT_EQUAL(f.handoffs, 1);
  fake_free(&f);
}

/* Handed off, never confirmed: the move fails once its limit has passed. */
static void test_handoff_unconfirmed(void) {
  fake f;
  fake_init(&f);
  start_move(&f);
  watch_group(&f, "g", OTHER, SELF, 30, OTHER_LEASE);
  f.now += MOVE_LIMIT;
  scn_owners_expire_moves(&f.o);
  CU_ASSERT_EQUAL(f.move_answers, 0);
  f.now++;
  scn_owners_expire_moves(&f.o);
  CU_ASSERT_EQUAL(f.move_answers, 1);
  CU_ASSERT_FALSE(f.move_ok);
  CU_ASSERT_PTR_NULL(group(&f, "g")->mv);
  fake_free(&f);
}

/* The target's side: a hand-off naming this daemon with its lease is loaded as a move and
 * confirmed by a put at the hand-off's revision. */
static void test_handoff_received(void) {
  fake f;
  fake_init(&f);
  watch_group(&f, "g", OTHER, NULL, 10, OTHER_LEASE);
  watch_group(&f, "g", SELF, OTHER, 40, SELF_LEASE);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_OWNED);
  CU_ASSERT_EQUAL(f.arrival, SCN_ARRIVED_BY_MOVE);
  CU_ASSERT_EQUAL(f.load_epoch, 40);
  CU_ASSERT_EQUAL(f.served, 1);
  CU_ASSERT_EQUAL(f.served_rev, 40);
  CU_ASSERT_EQUAL(f.o.stats.moves_in, 1);
  fake_free(&f);
}

/* A load that has to wait for a renewal is tried again by scn_owners_adopt_pending; a load
 * that fails for good leaves the group broken. */
static void test_load_later_and_broken(void) {
  fake f;
  fake_init(&f);
  f.load_result = SCN_LOAD_NOT_NOW;
  watch_group(&f, "g", SELF, NULL, 20, SELF_LEASE);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_NONE);
  CU_ASSERT_EQUAL(f.drops, 0);
  f.load_result = SCN_LOADED;
  scn_owners_adopt_pending(&f.o);
  CU_ASSERT_EQUAL(g->state, SCN_GROUP_OWNED);
  CU_ASSERT_EQUAL(f.loads, 2);
  f.load_result = SCN_LOAD_BROKEN;
  watch_group(&f, "h", SELF, NULL, 21, SELF_LEASE);
  CU_ASSERT_EQUAL(group(&f, "h")->state, SCN_GROUP_BROKEN);
  CU_ASSERT_EQUAL(f.drops, 1);
  fake_free(&f);
}

/* Nodes come and go with their keys; a full read forgets the ones it did not find; this
 * daemon's own key deleted while registered means its lease is gone. */
static void test_nodes(void) {
  fake f;
  fake_init(&f);
  watch_node(&f, SELF, 1, SELF_LEASE);
  watch_node(&f, OTHER, 2, OTHER_LEASE);
  watch_node(&f, "c", 3, 9);
  CU_ASSERT_EQUAL(f.o.nnodes, 3);
  scn_node_entry *b = scn_owners_node(&f.o, OTHER);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  CU_ASSERT_STRING_EQUAL(b->addr, OTHER ".example:7000");
  CU_ASSERT_EQUAL(b->transforms, 2);
  CU_ASSERT_STRING_EQUAL(b->world_names, "w1");
  watch_delete(&f, SCN_NODES_PREFIX, "c", 4);
  CU_ASSERT_PTR_NULL(scn_owners_node(&f.o, "c"));
  made m[2];
  scn_kv kvs[2] = {*node_kv(&m[0], SELF, 1, SELF_LEASE), *group_kv(&m[1], "g", OTHER, NULL, 5, 5)};
  CU_ASSERT_TRUE(scn_owners_reread(&f.o, 6, kvs, 2));
  CU_ASSERT_PTR_NULL(scn_owners_node(&f.o, OTHER));
  CU_ASSERT_EQUAL(f.o.nnodes, 1);
  CU_ASSERT_FALSE(scn_owners_reread(&f.o, 7, &kvs[1], 1));
  scn_buf_free(&m[0].value);
  scn_buf_free(&m[1].value);
  CU_ASSERT_EQUAL(f.leases_lost, 0);
  watch_delete(&f, SCN_NODES_PREFIX, SELF, 8);
  CU_ASSERT_EQUAL(f.leases_lost, 1);
  fake_free(&f);
}

/* The group's key with a value given whole. */
static void watch_group_value(fake *f, const char *group, const char *value, int64_t rev,
                              int64_t lease) {
  made m;
  snprintf(m.key, sizeof m.key, "%s%s", SCN_GROUPS_PREFIX, group);
  m.value = (scn_buf){0};
  scn_buf_adds(&m.value, value);
  watch_put(f, made_kv(&m, rev, lease));
  scn_buf_free(&m.value);
}

/* A group key's followers and in-sync set are cached; a group's new followers are the live
 * nodes that are neither its owner nor its followers, fewest groups owned or followed first. */
static void test_choose_followers(void) {
  fake f;
  fake_init(&f);
  watch_node(&f, SELF, 1, SELF_LEASE);
  watch_node(&f, OTHER, 2, OTHER_LEASE);
  watch_node(&f, "c", 3, 9);
  watch_node(&f, "d", 4, 11);
  watch_node(&f, "e", 5, 13);
  watch_group(&f, "x", "c", NULL, 6, 9);
  watch_group_value(&f, "y", "{\"node\":\"d\",\"addr\":\"d:1\",\"followers\":[\"c\",\"e\"]}", 7,
                    11);
  watch_group_value(&f, "z", "{\"node\":\"e\",\"addr\":\"e:1\",\"followers\":[\"c\",7]}", 8, 13);
  watch_group_value(&f, "g",
                    "{\"node\":\"" SELF "\",\"addr\":\"a:1\",\"followers\":[\"" OTHER
                    "\",\"d\"],\"insync\":[\"" OTHER "\"]}",
                    9, SELF_LEASE);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->nfollowers, 2);
  CU_ASSERT_EQUAL(g->ninsync, 1);
  CU_ASSERT_TRUE(scn_owners_follows(g, OTHER, false));
  CU_ASSERT_TRUE(scn_owners_follows(g, OTHER, true));
  CU_ASSERT_TRUE(scn_owners_follows(g, "d", false));
  CU_ASSERT_FALSE(scn_owners_follows(g, "d", true));
  CU_ASSERT_EQUAL(group(&f, "z")->nfollowers, 1); /* 7 is no node name */

  /* c owns x and follows y and z (3), e owns z and follows y (2); a and b and d follow or own
   * g already. */
  char out[SCN_REPLICAS_MAX][SCN_NAME_MAX + 1];
  CU_ASSERT_EQUAL_FATAL(scn_owners_choose_followers(&f.o, g, 4, out), 2);
  CU_ASSERT_STRING_EQUAL(out[0], "e");
  CU_ASSERT_STRING_EQUAL(out[1], "c");
  CU_ASSERT_EQUAL_FATAL(scn_owners_choose_followers(&f.o, g, 1, out), 1);
  CU_ASSERT_STRING_EQUAL(out[0], "e");
  CU_ASSERT_EQUAL(scn_owners_choose_followers(&f.o, g, 0, out), 0);

  /* x without its key: c has 2 groups, as e; the name decides. */
  watch_delete(&f, SCN_GROUPS_PREFIX, "x", 10);
  CU_ASSERT_EQUAL_FATAL(scn_owners_choose_followers(&f.o, g, 2, out), 2);
  CU_ASSERT_STRING_EQUAL(out[0], "c");
  CU_ASSERT_STRING_EQUAL(out[1], "e");

  /* A key without followers has none; a dead node is no candidate. */
  watch_group(&f, "g", SELF, NULL, 11, SELF_LEASE);
  CU_ASSERT_EQUAL(g->nfollowers, 0);
  CU_ASSERT_EQUAL(g->ninsync, 0);
  watch_delete(&f, SCN_NODES_PREFIX, "e", 12);
  CU_ASSERT_EQUAL_FATAL(scn_owners_choose_followers(&f.o, g, 4, out), 3);
  CU_ASSERT_STRING_EQUAL(out[0], OTHER);
  CU_ASSERT_STRING_EQUAL(out[1], "d");
  CU_ASSERT_STRING_EQUAL(out[2], "c");
  fake_free(&f);
}

/* The key put with a value given whole. */
static void watch_value(fake *f, const char *prefix, const char *name, const char *value,
                        int64_t rev) {
  made m;
  snprintf(m.key, sizeof m.key, "%s%s", prefix, name);
  m.value = (scn_buf){0};
  scn_buf_adds(&m.value, value);
  watch_put(f, made_kv(&m, rev, 0));
  scn_buf_free(&m.value);
}

static char *text_of(scn_buf *b) {
  scn_buf_addc(b, '\0');
  return b->data;
}

/* The replicas key's value and a group key's with followers read back as written; the cache
 * keeps the replicas key by revision, forgets it when deleted or missing from a full read. */
static void test_replica_records(void) {
  scn_replica_set r = {.epoch = 42, .nfollowers = 2, .ninsync = 1};
  snprintf(r.followers[0], sizeof r.followers[0], "b");
  snprintf(r.followers[1], sizeof r.followers[1], "c");
  snprintf(r.insync[0], sizeof r.insync[0], "c");
  scn_buf v = {0};
  scn_owners_replicas_value(&v, &r);
  CU_ASSERT_STRING_EQUAL(text_of(&v),
                         "{\"epoch\":42,\"followers\":[\"b\",\"c\"],\"insync\":[\"c\"],"
                         "\"durability\":\"sync\"}");
  scn_replica_set back = {.mod_rev = 7};
  CU_ASSERT_TRUE(scn_owners_replicas_parse(v.data, v.len - 1, &back));
  CU_ASSERT_EQUAL(back.epoch, 42);
  CU_ASSERT_EQUAL(back.mod_rev, 7);
  CU_ASSERT_EQUAL(back.nfollowers, 2);
  CU_ASSERT_STRING_EQUAL(back.followers[1], "c");
  CU_ASSERT_EQUAL(back.ninsync, 1);
  CU_ASSERT_STRING_EQUAL(back.insync[0], "c");
  CU_ASSERT_EQUAL(back.durability, SCN_DURABILITY_SYNC);
  CU_ASSERT_STRING_EQUAL(back.owner, "");
  scn_buf_free(&v);

  r.durability = SCN_DURABILITY_ASYNC;
  r.ninsync = 0;
  snprintf(r.owner, sizeof r.owner, "a");
  scn_owners_replicas_value(&v, &r);
  CU_ASSERT_STRING_EQUAL(text_of(&v), "{\"epoch\":42,\"owner\":\"a\",\"followers\":[\"b\",\"c\"],"
                                      "\"insync\":[],\"durability\":\"async\"}");
  CU_ASSERT_TRUE(scn_owners_replicas_parse(v.data, v.len - 1, &back));
  CU_ASSERT_EQUAL(back.durability, SCN_DURABILITY_ASYNC);
  CU_ASSERT_EQUAL(back.ninsync, 0);
  CU_ASSERT_STRING_EQUAL(back.owner, "a");
  scn_buf_free(&v);

  static const char *const bad[] = {
      "{}", "{\"epoch\":\"3\"}", "{\"epoch\":-1}", "{\"epoch\":3,\"durability\":\"maybe\"}", "[1]",
      "{"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    scn_replica_set same = back;
    CU_ASSERT_FALSE(scn_owners_replicas_parse(bad[i], strlen(bad[i]), &same));
    CU_ASSERT_EQUAL(memcmp(&same, &back, sizeof same), 0);
  }

  /* A group key with followers is cached as the group key's lists. */
  fake f;
  fake_init(&f);
  watch_node(&f, SELF, 1, SELF_LEASE);
  scn_owners_group_value_with(&v, SELF, "a:1", &r);
  watch_value(&f, SCN_GROUPS_PREFIX, "g", text_of(&v), 2);
  scn_buf_free(&v);
  scn_group_entry *g = group(&f, "g");
  CU_ASSERT_EQUAL(g->nfollowers, 2);
  CU_ASSERT_EQUAL(g->ninsync, 0);
  CU_ASSERT_FALSE(g->replicas.known);

  /* The replicas key, by revision: an older put is ignored, a malformed one changes nothing. */
  watch_value(&f, SCN_REPLICAS_PREFIX, "g", "{\"epoch\":2,\"followers\":[\"b\"],\"insync\":[]}", 5);
  CU_ASSERT_TRUE(g->replicas.known);
  CU_ASSERT_EQUAL(g->replicas.epoch, 2);
  CU_ASSERT_EQUAL(g->replicas.mod_rev, 5);
  CU_ASSERT_EQUAL(g->replicas.nfollowers, 1);
  watch_value(&f, SCN_REPLICAS_PREFIX, "g", "{\"epoch\":1,\"followers\":[]}", 4);
  CU_ASSERT_EQUAL(g->replicas.epoch, 2);
  watch_value(&f, SCN_REPLICAS_PREFIX, "g", "{\"followers\":[]}", 6);
  CU_ASSERT_EQUAL(g->replicas.mod_rev, 5);
  CU_ASSERT_EQUAL(g->replicas.nfollowers, 1);
  /* A replicas key for a group the cache does not know makes its entry; deleted, it is gone. */
  watch_value(&f, SCN_REPLICAS_PREFIX, "h", "{\"epoch\":9}", 7);
  CU_ASSERT_TRUE(group(&f, "h")->replicas.known);
  CU_ASSERT_FALSE(group(&f, "h")->key);
  watch_delete(&f, SCN_REPLICAS_PREFIX, "h", 8);
  CU_ASSERT_FALSE(group(&f, "h")->replicas.known);
  CU_ASSERT_EQUAL(group(&f, "h")->replicas.mod_rev, 0);
  /* One that says the group ended is no live record (anyone may claim), but keeps its epoch,
   * owner and revision (what a stale copy is judged by, what the next txn compares). */
  scn_replica_set end = {.epoch = 11, .ended = true};
  snprintf(end.owner, sizeof end.owner, "b");
  scn_owners_replicas_value(&v, &end);
  CU_ASSERT_STRING_EQUAL(text_of(&v), "{\"epoch\":11,\"owner\":\"b\",\"ended\":true,"
                                      "\"followers\":[],\"insync\":[],\"durability\":\"sync\"}");
  watch_value(&f, SCN_REPLICAS_PREFIX, "h", text_of(&v), 9);
  scn_buf_free(&v);
  const scn_group_entry *h = group(&f, "h");
  CU_ASSERT_FALSE(h->replicas.known);
  CU_ASSERT_TRUE(h->replicas.ended);
  CU_ASSERT_EQUAL(h->replicas.epoch, 11);
  CU_ASSERT_EQUAL(h->replicas.mod_rev, 9);
  CU_ASSERT_STRING_EQUAL(h->replicas.owner, "b");
  CU_ASSERT_TRUE(scn__owners_may_claim(&f.o, h));

  /* A full read without the replicas key forgets it; the group key stays. */
  made m;
  scn_kv kvs[2] = {*node_kv(&m, SELF, 1, SELF_LEASE)};
  scn_owners_group_value_with(&v, SELF, "a:1", &r);
  made gm;
  snprintf(gm.key, sizeof gm.key, "%sg", SCN_GROUPS_PREFIX);
  gm.value = v;
  kvs[1] = *made_kv(&gm, 2, 0);
  scn_owners_reread(&f.o, 10, kvs, 2);
  CU_ASSERT_FALSE(g->replicas.known);
  CU_ASSERT_TRUE(g->key);
  CU_ASSERT_FALSE(group(&f, "h")->replicas.ended);
  CU_ASSERT_EQUAL(group(&f, "h")->replicas.mod_rev, 0);
  scn_buf_free(&gm.value);
  scn_buf_free(&m.value);
  fake_free(&f);
}

/* Keys that name no group or node, or hold no readable value, change nothing. */
static void test_malformed_keys(void) {
  fake f;
  fake_init(&f);
  scn_kv bad[] = {
      {.key = NULL, .value = "{}", .value_len = 2, .mod_revision = 3},
      {.key = SCN_GROUPS_PREFIX "a.b", .value = "{\"node\":\"b\"}", .value_len = 12},
      {.key = SCN_GROUPS_PREFIX "g", .value = NULL, .mod_revision = 4},
      {.key = SCN_GROUPS_PREFIX "h", .value = "{\"node\":7}", .value_len = 10},
      {.key = SCN_NODES_PREFIX "n", .value = "[1]", .value_len = 3},
      {.key = "/elsewhere", .value = "{}", .value_len = 2},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    watch_put(&f, &bad[i]);
  CU_ASSERT_PTR_NULL(scn_owners_find(&f.o, "a.b"));
  CU_ASSERT_FALSE(group(&f, "g")->key);
  CU_ASSERT_FALSE(group(&f, "h")->key);
  CU_ASSERT_EQUAL(f.o.nnodes, 0);
  CU_ASSERT_EQUAL(f.loads + f.claims + f.drops, 0);
  fake_free(&f);
}

/* SIGTERM: once released, a deleted key only marks the group not held. */
static void test_released(void) {
  fake f;
  fake_init(&f);
  own(&f, "g", 20);
  f.self.released = true;
  watch_delete(&f, SCN_GROUPS_PREFIX, "g", 21);
  CU_ASSERT_EQUAL(group(&f, "g")->state, SCN_GROUP_NONE);
  CU_ASSERT_EQUAL(f.drops, 0);
  CU_ASSERT_EQUAL(f.claims, 1);
  fake_free(&f);
}

/* The core logs what a daemon would; the tests' events are its point. */
static int quiet(void) {
  scn_log_set_level(SCN_LOG_ERROR);
  return 0;
}

static int loud(void) {
  scn_log_set_level(SCN_LOG_INFO);
  return 0;
}

int t_register_cluster_owners(void) {
  static const t_test tests[] = {
      {"followers: cached, and chosen by load", test_choose_followers},
      {"replica records: encoded, decoded, cached by revision", test_replica_records},
      {"an owner's put and delete heard after the claim change nothing", test_late_delete},
      {"a full read marks what it did not find deleted at its revision", test_read_marks_delete},
      {"a lost claim answer: the watch's put loads the group", test_lost_claim_answer},
      {"a lost claim answer that lost the race", test_lost_claim_lost_race},
      {"a claim lost in its answer names the winner", test_claim_lost_in_answer},
      {"a read of a key, asked once for every waiter", test_read},
      {"a hand-off seen on the watch before its answer", test_handoff_seen_on_watch_first},
      {"a hand-off answered before the watch", test_handoff_answered_first},
      {"a failed hand-off serves the group here again", test_handoff_failed},
      {"a hand-off never confirmed fails at its limit", test_handoff_unconfirmed},
      {"a switchover hands off once its target caught up", test_switchover_waits},
      {"a hand-off received is loaded and confirmed", test_handoff_received},
      {"a load that waits, and one that fails", test_load_later_and_broken},
      {"nodes, full reads and this node's own key", test_nodes},
      {"malformed keys change nothing", test_malformed_keys},
      {"after the release a delete changes nothing more", test_released},
  };
  return T_ADD_SUITE("cluster_owners", quiet, loud, tests);
}

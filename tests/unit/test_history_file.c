/* The history file a move hands over (server/store/history_file.c), without a daemon: a group
 * written with its worlds' ticks and histories, loaded into a scene that loaded the group's
 * snapshot (as the target of a move does), answers every read at every tick as the original;
 * and every kind of damage costs history, never the group: a damaged payload drops that
 * world's history (its ticks still go on), a damaged section header the worlds from there on,
 * a damaged file header (or another epoch's file) everything, as do transforms that are not
 * those the history was kept for. */
#include "core_fixtures.h"
#include "ops/log.h"
#include "store/history_file.h"
#include "store/snapshot.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EPOCH 7
#define WINDOW 10

typedef struct fixture {
  char dir[64];
  scn_scene *src;
  scn_world *a, *b; /* g.a keeps history, g.b does not; "other" is another group */
  scn_entity e[6];
  size_t ne;
} fixture;

/* g.a: transforms that move, are created, renamed, relinked and destroyed over 16 ticks, and
 * changed again in the tick still open; g.b: 5 ticks of its own. */
static void fixture_make(fixture *f) {
  memset(f, 0, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/scened-hfile-XXXXXX");
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(f->dir));
  f->src = scn_scene_new(NULL);
  scn_world *other;
  OK(scn_world_create(f->src, "g.a", &f->a));
  OK(scn_world_create(f->src, "other", &other));
  OK(scn_world_create(f->src, "g.b", &f->b));
  OK(scn_world_set_history(f->a, WINDOW));
  OK(scn_world_set_history(other, WINDOW));
  float m[16];
  mat_t(m, 1, 2, 3);
  scn_entity root = mk(f->a, f->src, SCN_ENTITY_NONE, "root", m);
  scn_entity kid = mk(f->a, f->src, root, "kid", m);
  scn_entity spin = mk(f->a, f->src, SCN_ENTITY_NONE, NULL, NULL);
  OK(scn_transform_create(f->b, kid, SCN_ENTITY_NONE, "shared", m));
  mk(other, f->src, SCN_ENTITY_NONE, "elsewhere", m);
  scn_entity late = SCN_ENTITY_NONE, gone = mk(f->a, f->src, kid, "gone", m);
  for (int t = 1; t <= 16; t++) {
    mat_t(m, (float)t, 0, 0);
    OK(scn_transform_set_local(f->a, root, m));
    float q[4] = {0, 0, 0.6f, 0.8f}, tr[3] = {0, (float)t, 0};
    q[2] = (float)t * 0.1f;
    OK(scn_compose_trs(tr, q, NULL, m));
    OK(scn_transform_set_local(f->a, spin, m));
    if (t == 4)
      OK(scn_transform_rename(f->a, kid, "child"));
    if (t == 7)
      OK(scn_transform_link(f->a, kid, spin, SCN_KEEP_WORLD));
    if (t == 9)
      OK(scn_transform_destroy(f->a, gone, false));
    if (t == 12)
      late = mk(f->a, f->src, SCN_ENTITY_NONE, "late", NULL);
    scn_world_close_tick(f->a);
    scn_world_close_tick(other);
    if (t <= 5)
      scn_world_close_tick(f->b);
  }
  mat_t(m, 99, 0, 0); /* the open tick */
  OK(scn_transform_set_local(f->a, root, m));
  scn_entity e[] = {root, kid, spin, late, gone, ent(f->src)};
  memcpy(f->e, e, sizeof e);
  f->ne = sizeof e / sizeof *e;
}

static void fixture_free(fixture *f) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
  scn_scene_free(f->src);
}

/* The group written as a move writes it: its snapshot, then the history file. */
static void write_group(fixture *f) {
  char err[512];
  uint64_t bytes;
  scn_snapshot_part part = {.group = "g", .epoch = EPOCH, .home = 1};
  CU_ASSERT_EQUAL_FATAL(scn_snapshot_write_part(f->src, &part, 1, f->dir, &bytes, err, sizeof err),
                        0);
  CU_ASSERT_EQUAL_FATAL(scn_history_file_write(f->src, "g", EPOCH, f->dir, &bytes, err, sizeof err),
                        0);
  CU_ASSERT(bytes > 32 + 2 * 128);
}

/* A daemon's scene that loaded the group's snapshot (ranged ids, as in a cluster). */
static scn_scene *load_group(fixture *f) {
  scn_scene *s = scn_scene_new(NULL);
  OK(scn_entity_use_ranges(s));
  scn_snapshot_info info;
  char err[512];
  CU_ASSERT_EQUAL_FATAL(scn_snapshot_load(s, f->dir, false, &info, err, sizeof err), 1);
  CU_ASSERT_EQUAL_FATAL(scn_world_count(s), 2);
  return s;
}

static bool same_info(const scn_transform_info *x, const scn_transform_info *y) {
  return x->entity == y->entity && x->parent == y->parent &&
         (x->name == NULL) == (y->name == NULL) && (!x->name || strcmp(x->name, y->name) == 0) &&
         memcmp(x->local, y->local, 64) == 0 && memcmp(x->world, y->world, 64) == 0;
}

/* Every read at every tick of the window (whole and halves, and one past each end). */
static int differences(scn_world *x, scn_world *y, const scn_entity *e, size_t n) {
  uint64_t xo = 0, xn = 0, yo = 0, yn = 0;
  int rx = scn_world_history_window(x, &xo, &xn), ry = scn_world_history_window(y, &yo, &yn);
  if (rx != ry || xo != yo || xn != yn)
    return 1;
  int bad = 0;
  for (uint64_t t = xo - 1; rx == SCN_OK && t <= xn + 1; t++)
    for (int half = 0; half < 2; half++)
      for (size_t k = 0; k < n; k++) {
        scn_transform_info a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        int ca = scn_world_history_interpolate(x, e[k], (double)t + 0.5 * half, &a);
        int cb = scn_world_history_interpolate(y, e[k], (double)t + 0.5 * half, &b);
        bad += ca != cb || (ca == SCN_OK && !same_info(&a, &b));
      }
  return bad;
}

static long file_size(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return -1;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fclose(fp);
  return n;
}

/* Flips one byte of the history file at offset. */
static void damage(fixture *f, long offset) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", f->dir, SCN_HISTORY_FILE);
  FILE *fp = fopen(path, "r+b");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  fseek(fp, offset, SEEK_SET);
  int c = fgetc(fp);
  fseek(fp, offset, SEEK_SET);
  fputc(c ^ 0x5a, fp);
  fclose(fp);
}

static uint64_t u64_in_file(fixture *f, long offset) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", f->dir, SCN_HISTORY_FILE);
  FILE *fp = fopen(path, "rb");
  uint64_t v = 0;
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  fseek(fp, offset, SEEK_SET);
  CU_ASSERT_EQUAL(fread(&v, 8, 1, fp), 1);
  fclose(fp);
  return v;
}

/* What a load of the file into a freshly loaded group gave. */
typedef struct outcome {
  int rc;
  scn_history_load info;
  uint64_t tick_a, tick_b; /* open ticks afterwards */
  bool window_a;           /* g.a answers some tick */
  int differ;              /* reads of g.a unlike the original's */
} outcome;

static outcome load_and_compare(fixture *f, uint64_t epoch, bool touch) {
  outcome o;
  memset(&o, 0, sizeof o);
  scn_scene *s = load_group(f);
  scn_world *a = scn_world_find(s, "g.a"), *b = scn_world_find(s, "g.b");
  if (touch) { /* not the transforms the history was kept for */
    float m[16];
    mat_t(m, -1, 0, 0);
    OK(scn_transform_set_local(a, f->e[2], m));
  }
  o.rc = scn_history_file_load(s, "g", epoch, f->dir, &o.info);
  o.tick_a = scn_world_tick(a);
  o.tick_b = scn_world_tick(b);
  uint64_t x, y;
  o.window_a = scn_world_history_window(a, &x, &y) == SCN_OK;
  o.differ = differences(f->a, a, f->e, f->ne);
  CU_ASSERT_EQUAL(scn_world_history(a), WINDOW); /* the window is the snapshot's, always */
  scn_scene_free(s);
  return o;
}

static void test_round_trip(void) {
  fixture f;
  fixture_make(&f);
  write_group(&f);
  outcome o = load_and_compare(&f, EPOCH, false);
  CU_ASSERT_EQUAL(o.rc, 1);
  CU_ASSERT_TRUE(o.info.worlds == 2 && o.info.histories == 1 && o.info.dropped == 0);
  CU_ASSERT(o.info.versions > 30);
  CU_ASSERT_EQUAL(o.tick_a, scn_world_tick(f.a));
  CU_ASSERT_EQUAL(o.tick_b, scn_world_tick(f.b));
  CU_ASSERT_TRUE(o.window_a);
  CU_ASSERT_EQUAL(o.differ, 0);
  /* no file: nothing read, every count starts at 1 */
  char path[128];
  snprintf(path, sizeof path, "%s/%s", f.dir, SCN_HISTORY_FILE);
  scn_history_file_remove(f.dir);
  CU_ASSERT_EQUAL(access(path, F_OK), -1);
  o = load_and_compare(&f, EPOCH, false);
  CU_ASSERT_TRUE(o.rc == 0 && o.tick_a == 1 && o.tick_b == 1 && !o.window_a);
  fixture_free(&f);
}

static void test_damage(void) {
  scn_log_set_level(SCN_LOG_ERROR); /* the warnings are the point here */
  fixture f;
  fixture_make(&f);
  write_group(&f);
  char path[128];
  snprintf(path, sizeof path, "%s/%s", f.dir, SCN_HISTORY_FILE);
  long size = file_size(path);
  /* g.a's section starts at 32, its payload at 160; g.b's section follows it */
  uint64_t payload_a = u64_in_file(&f, 32 + 112);
  long section_b = 160 + (long)payload_a;
  CU_ASSERT_EQUAL(size, section_b + 128); /* g.b has no payload */

  /* a byte of g.a's versions: its history goes, its ticks and g.b's go on */
  damage(&f, 160 + (long)payload_a / 2);
  outcome o = load_and_compare(&f, EPOCH, false);
  CU_ASSERT_TRUE(o.rc == 1 && o.info.worlds == 2 && o.info.histories == 0 && o.info.dropped == 1);
  CU_ASSERT_EQUAL(o.tick_a, scn_world_tick(f.a));
  CU_ASSERT_EQUAL(o.tick_b, scn_world_tick(f.b));
  CU_ASSERT_FALSE(o.window_a);
  damage(&f, 160 + (long)payload_a / 2);

  /* g.b's section header: g.a is read, g.b starts over */
  damage(&f, section_b + 72);
  o = load_and_compare(&f, EPOCH, false);
  CU_ASSERT_TRUE(o.info.worlds == 1 && o.info.histories == 1 && o.differ == 0);
  CU_ASSERT_EQUAL(o.tick_b, 1);
  damage(&f, section_b + 72);

  /* g.a's section header: nothing after it can be read */
  damage(&f, 32 + 1);
  o = load_and_compare(&f, EPOCH, false);
  CU_ASSERT_TRUE(o.rc == 1 && o.info.worlds == 0 && o.tick_a == 1 && o.tick_b == 1);
  damage(&f, 32 + 1);

  /* the file's header, and a file of another epoch: everything starts over */
  damage(&f, 20);
  o = load_and_compare(&f, EPOCH, false);
  CU_ASSERT_TRUE(o.rc == 1 && o.info.worlds == 0 && o.tick_a == 1 && !o.window_a);
  damage(&f, 20);
  o = load_and_compare(&f, EPOCH + 1, false);
  CU_ASSERT_TRUE(o.rc == 1 && o.info.worlds == 0 && o.tick_a == 1);

  /* other transforms than the history's: it goes, the ticks go on */
  o = load_and_compare(&f, EPOCH, true);
  CU_ASSERT_TRUE(o.info.worlds == 2 && o.info.histories == 0 && o.info.dropped == 1);
  CU_ASSERT_EQUAL(o.tick_a, scn_world_tick(f.a));

  /* cut short inside g.a's versions */
  CU_ASSERT_EQUAL(truncate(path, 160 + (long)payload_a / 3), 0);
  o = load_and_compare(&f, EPOCH, false);
  CU_ASSERT_TRUE(o.rc == 1 && o.info.histories == 0 && o.info.worlds == 1 && o.tick_b == 1);
  CU_ASSERT_EQUAL(o.tick_a, scn_world_tick(f.a));

  /* the intact file still loads whole (nothing above was left behind) */
  write_group(&f);
  o = load_and_compare(&f, EPOCH, false);
  CU_ASSERT_TRUE(o.info.histories == 1 && o.differ == 0);
  scn_log_set_level(SCN_LOG_INFO);
  fixture_free(&f);
}

int t_register_history_file(void) {
  static const t_test tests[] = {
      {"a group's ticks and histories, written and loaded back", test_round_trip},
      {"damage costs history, never the group", test_damage},
  };
  return T_ADD_SUITE("history_file", NULL, NULL, tests);
}

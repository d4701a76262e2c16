/* What the daemon_commands suites share on top of the daemon fixtures: their daemon; worlds,
 * entities and transforms made with assertions, their fields and matrices read back, matrices
 * compared, and a world's whole state as text (to show that a failed command changed nothing). */
#ifndef T_COMMAND_FIXTURES_H
#define T_COMMAND_FIXTURES_H

#include "daemon_fixtures.h"

#include <stdbool.h>
#include <stdint.h>

#define WAIT_MS 5000

/* The daemon each daemon_commands suite's tests share (default settings): the suite's setup
 * starts it, its cleanup stops it, and it must exit 0 then. */
extern t_daemon commands_daemon;
int commands_suite_init(void);
int commands_suite_clean(void);

/* An array field of ids as a C array (returns its length, up to cap). */
int ids_of(const cJSON *r, const char *field, uint64_t *out, int cap);

/* A matrix field: 16 numbers. */
bool mat_of(const cJSON *r, const char *field, float m[16]);

bool mat_near(const float a[16], const float b[16], float tol);

void mat_print(const char *what, const float m[16]);

#define CHECK_MAT(a, b, tol)                                                                       \
  do {                                                                                             \
    bool near_ = mat_near((a), (b), (tol));                                                        \
    CU_assertImplementation(near_ ? CU_TRUE : CU_FALSE, __LINE__, "matrices equal", __FILE__, "",  \
                            CU_FALSE);                                                             \
    if (!near_) {                                                                                  \
      mat_print("got", (a));                                                                       \
      mat_print("want", (b));                                                                      \
    }                                                                                              \
  } while (0)

extern const float IDENTITY[16];

void mat_trs(float tx, float ty, float tz, float s, float out[16]);

void new_world(t_client *c, const char *name);

/* transform.create with extra fields (printf-style, may be ""); returns the entity. */
uint64_t tf_at(const char *file, int at, t_client *c, const char *world, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define TF(c, world, ...) tf_at(__FILE__, __LINE__, (c), (world), __VA_ARGS__)

#define TF0(c, world) tf_at(__FILE__, __LINE__, (c), (world), "%s", "")

uint64_t new_entity(t_client *c);

cJSON *get_tf(t_client *c, const char *world, uint64_t e);

/* The world (or local) matrix of e. */
bool matrix(t_client *c, const char *world, uint64_t e, const char *which, float m[16]);

/* The parent of e (0 for a root, UINT64_MAX when the reply is wrong). */
uint64_t parent_of(t_client *c, const char *world, uint64_t e);

double info_num(t_client *c, const char *field);

/* The transform count of a world in world.list, -1 when it is not listed. */
int listed_transforms(t_client *c, const char *world);

/* Everything observable about a world and some entities, as text: world.list, the counts of
 * info, and get and children of each id (errors included). */
char *snapshot(t_client *c, const char *world, const uint64_t *ids, int n);

void check_same_at(int at, const char *before, const char *after);

#define CHECK_SAME(before, after) check_same_at(__LINE__, (before), (after))

/* 90 degrees about z, as a quaternion. */
#define R90Z "[0,0,0.70710678118654752,0.70710678118654752]"

#endif

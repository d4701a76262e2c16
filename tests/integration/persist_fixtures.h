/* What the daemon_persist suites share: each test's data directory and the logs of the
 * daemons it started (printed when it fails), daemons started on a directory and killed,
 * the same requests sent before and after a restart and their answers compared, and the data
 * files listed, measured, damaged and read record by record. */
#ifndef T_PERSIST_FIXTURES_H
#define T_PERSIST_FIXTURES_H

#include "daemon_fixtures.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A fresh empty data directory under /tmp. */
bool begin_test(char *dir, size_t len);

/* Removes the data directory, and the daemon logs unless the test failed (then they are named
 * for a look). */
void end_test(const char *dir);

typedef struct strlist {
  char **v;
  size_t n, cap;
} strlist;

void sl_add(strlist *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void sl_free(strlist *l);

/* Starts scened on dir with extra args (NULL-terminated, may be NULL). */
bool start_on(t_daemon *d, const char *dir, const char *const *extra);

void kill9(t_daemon *d);

/* transform.create (printf-style); the new entity's id, 0 after a failure. */
uint64_t create_tf_at(const char *file, int line, t_client *c, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CREATE_TF(c, ...) create_tf_at(__FILE__, __LINE__, (c), __VA_ARGS__)

void run_all_ok(int port, const strlist *q);

/* The state as text: every query's exact response line. */
void expect_same(const char *before, const char *after, const char *what);

char *capture(int port, const char *const *worlds, size_t nworlds, const uint64_t *ids,
              size_t nids);

/* The local matrix of a transform, or false. */
bool get_local(t_client *c, const char *world, uint64_t e, double m[16]);

/* Whether m is T(x,y,z) exactly. */
bool mat_is_translation(const double m[16], double x, double y, double z);

/* Journal generations present, ascending (at most cap). */
size_t journals(const char *dir, unsigned long long *gens, size_t cap);

long file_size(const char *path);

/* How many transforms the first world listed holds (-1 when there is none). */
double first_world_transforms(t_client *c);

#endif

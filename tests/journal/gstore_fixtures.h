/* The cluster's store in the journal's tests, without a cluster: a daemon's dispatcher and
 * store on a directory, the records its tap hands on kept for another store, and commands run
 * on a connection of its own. */
#ifndef T_GSTORE_FIXTURES_H
#define T_GSTORE_FIXTURES_H

#include "net/conn.h"
#include "server.h"
#include "store/groups.h"

#include <stdbool.h>
#include <stdint.h>

/* A daemon's dispatcher and store on dir, for node. */
typedef struct t_store {
  scn_server srv;
  scn_gstore *gs;
} t_store;

void t_store_open(t_store *s, const char *dir, const char *node);
/* The same, handing out ids from slots of its own from first_slot on, as each daemon of a
 * cluster does. */
void t_store_open_slots(t_store *s, const char *dir, const char *node, uint32_t first_slot);
void t_store_close(t_store *s);

#define T_SHIPPED_MAX 64

/* The records a tap handed on (t_on_record, its ud a t_shipped), copied. */
typedef struct t_shipped {
  scn_gstore_record r[T_SHIPPED_MAX];
  char group[T_SHIPPED_MAX][SCN_NAME_MAX + 1];
  scn_buf bytes[T_SHIPPED_MAX];
  size_t n;
} t_shipped;

void t_on_record(void *ud, const scn_gstore_record *rec);

/* Runs line on c and checks its ok (printing the answer when not). */
void t_run_ok(scn_conn *c, const char *line);

/* t_same_scene, printing where the scenes differ when they do. */
bool t_check_same_scene(scn_scene *a, scn_scene *b);

#endif

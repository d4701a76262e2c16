/* The reference the core's property tests compare it with: matrices in double, world matrices
 * recomputed from scratch with a bound on how far float rounding may move them, whether an
 * inverse surely exists, and a deliberately naive model of the core's worlds (plain arrays
 * indexed by entity slot: parent slot, a sequence number that orders siblings, name, local
 * matrix) with every operation's expected result. */
#ifndef T_CORE_MODEL_H
#define T_CORE_MODEL_H

#include "scn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void mat_of_float(const float f[16], double d[16]);

void mat_mul(const double a[16], const double b[16], double out[16]);

/* |a| * |b|: float rounding moves each element of a * b by a few ulps of this at most. */
void mat_mul_abs(const double a[16], const double b[16], double out[16]);

bool has_zero_column(const double m[16]);

typedef enum inverse_class { INVERSE_EXISTS, INVERSE_SINGULAR, INVERSE_UNSURE } inverse_class;

/* The core inverts float matrices in double. A world matrix with an exactly zero column (a zero
 * scale or a zero matrix on the path) is surely singular there; a well-conditioned one surely
 * is not. In between, the answer depends on float rounding the reference does not reproduce,
 * so such operations are not issued. */
inverse_class classify_inverse(const double m[16]);

extern const float IDENTITY[16];

/* Tolerances are relative to |L1| * |L2| * ... * |Ln| (bound), which bounds how far rounding can
 * move each element of the float product. A level of float products rounds by a few units of
 * 2^-24 of that; WORLD_REL per level leaves a wide margin. Locals computed through an inverse
 * (keep world, set_world, relative) get KEEP_REL. */
#define WORLD_REL 1e-5
#define KEEP_REL 1e-4
#define TINY 1e-30
/* The core inverts in double: an element that is zero in exact arithmetic may come out as the
 * rounding noise of the largest ones (around 1e-16 of them), which the bound above misses. */
#define INVERSE_FLOOR 1e-12

double largest(const double m[16]);

typedef struct world_ref {
  double m[16];     /* the world matrix, in double */
  double bound[16]; /* product of the absolute locals along the path */
  int depth;        /* 0 for a root */
} world_ref;

void ref_extend(const world_ref *parent, const float local[16], world_ref *out);

double world_tolerance(const world_ref *ref, int i);

#define NWORLDS 2
#define MAX_SLOTS 320
#define MAX_DEPTH 10 /* deeper trees would loosen the rounding bound past usefulness */
#define NONE_SLOT (-1)
#define ROOT_LIST MAX_SLOTS /* index of the root list in a tree_view */
#define MODEL_UNSURE 1      /* not an scn_err: the reference cannot predict, the op is skipped */

typedef struct model_node {
  bool has;                    /* the entity has a transform in this world */
  int parent;                  /* slot, NONE_SLOT for a root */
  uint64_t seq;                /* siblings are ordered by it; appending takes a new, larger one */
  char name[SCN_NAME_MAX + 1]; /* "" when unnamed */
  float local[16];
} model_node;

typedef struct model {
  scn_entity id[MAX_SLOTS]; /* alive entities; 0 marks a free slot */
  size_t alive;
  uint64_t next_seq;
  model_node node[NWORLDS][MAX_SLOTS];
} model;

int slot_of(const model *m, scn_entity e);

int node_of(const model *m, int w, scn_entity e);

scn_entity entity_of(const model *m, int s);

bool is_ancestor_or_self(const model *m, int w, int a, int s);

int depth_of(const model *m, int w, int s);

/* Levels below s (0 for a leaf). */
int height_of(const model *m, int w, int s);

/* Children of s (NONE_SLOT: the roots) in order; returns how many. */
int children_of(const model *m, int w, int s, int *out);

/* World matrix from scratch: the path up to the root, then the locals multiplied downwards. */
void model_world(const model *m, int w, int s, world_ref *out);

int model_add_entity(model *m, scn_entity e);

int free_slots(const model *m);

/* Each model_* operation mirrors the order of the core's checks, returns the expected code and
 * changes the reference only on success. */

int model_create(model *m, int w, scn_entity e, scn_entity parent, const char *name,
                 const float *local);

/* The children's locals become their old world matrices: the caller takes them from the core. */
int model_destroy(model *m, int w, scn_entity e, bool recursive);

/* *moved: the transform changed parent (with keep world, the caller takes the new local). */
int model_link(model *m, int w, scn_entity e, scn_entity parent, scn_keep keep, bool *moved);

int model_set_local(model *m, int w, scn_entity e, const float local[16]);

/* A root takes the matrix as its local; under a parent the caller takes the core's local. */
int model_set_world(model *m, int w, scn_entity e, const float world[16], bool *adopt);

int model_rename(model *m, int w, scn_entity e, const char *name);

/* Every world is checked before any changes, as in the core. */
int model_entity_destroy(model *m, scn_entity e);

/* An ill-formed path (empty, an empty segment, an invalid name) is INVALID whatever exists;
 * a well-formed one is looked up segment by segment from the roots down. */
int model_find_path(const model *m, int w, const char *path, size_t len, int *out);

#endif

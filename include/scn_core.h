/*
 * scn_core.h: the transform core of scened.
 *
 * A scene holds a registry of global entity ids and a registry of named worlds; each world
 * has its own transform manager (local and world 4x4 matrices, parent links, names). The core
 * knows nothing of sockets or JSON: it depends on cglm and libc only.
 *
 * Conventions: functions return 0 (SCN_OK) or a negative scn_err; output arguments come last;
 * matrices are 16 floats in column-major order (cglm's mat4 layout, translation in 12..14).
 */
#ifndef SCN_CORE_H
#define SCN_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entity ids are positive integers below 2^53: slot in the low 32 bits, generation above. */
typedef uint64_t scn_entity;
#define SCN_ENTITY_NONE ((scn_entity)0)
#define SCN_ENTITY_MAX ((UINT64_C(1) << 53) - 1)

/* Error list: one place for the enum, the names and the messages. */
#define SCN_ERRORS(X)                                                                              \
  X(OK, 0, "ok")                                                                                   \
  X(NOT_FOUND, -1, "not found")                                                                    \
  X(EXISTS, -2, "already exists")                                                                  \
  X(CYCLE, -3, "would make an entity its own ancestor")                                            \
  X(INVALID, -4, "invalid value")                                                                  \
  X(SINGULAR, -5, "matrix is singular or the result is not finite")                                \
  X(LIMIT, -6, "limit exceeded")                                                                   \
  X(NOMEM, -7, "out of memory")                                                                    \
  X(STATE, -8, "operation not allowed in this state")

typedef enum scn_err {
#define SCN_ERR_ENUM(name, code, msg) SCN_##name = code,
  SCN_ERRORS(SCN_ERR_ENUM)
#undef SCN_ERR_ENUM
} scn_err;

const char *scn_err_name(int err);    /* "NOT_FOUND", ... */
const char *scn_err_message(int err); /* "not found", ... */

#define SCN_NAME_MAX 64 /* bytes of a transform or world name */

typedef struct scn_scene scn_scene;
typedef struct scn_world scn_world;

/* Limits; a zero field means the default. */
typedef struct scn_limits {
  uint32_t max_worlds;     /* default 1024 */
  uint32_t max_transforms; /* per world, default 10,000,000 */
  uint64_t max_entities;   /* alive at once, default 100,000,000 */
} scn_limits;

typedef enum scn_keep { SCN_KEEP_LOCAL = 0, SCN_KEEP_WORLD = 1 } scn_keep;

/* ---- math helpers ---------------------------------------------------------------------- */

/* Composes T * R * S into out. t, r, s may be NULL (identity part). r is normalised here;
 * a zero or non-finite quaternion, or any non-finite input, gives SCN_INVALID. */
int scn_compose_trs(const float t[3], const float r[4], const float s[3], float out[16]);
bool scn_matrix_finite(const float m[16]);
/* Shear tolerance of scn_decompose_trs: the largest |cosine| of the angle between two of the
 * first three columns that still counts as T * R * S. Relative (a cosine), so it does not
 * depend on the scale. 1e-5 is about 84 float32 epsilons: scn_compose_trs's own results
 * stay under 1 epsilon (each element is rounded once), and world matrices of uniformly scaled
 * hierarchies 64 levels deep, multiplied in float, under 13; while a scale ratio of 1 + d
 * under a 45-degree rotation leaves a cosine of about d, so any non-uniformity above about
 * 1e-5 under a rotation is reported as shear. An accepted matrix recomposes from its parts
 * within this tolerance (within a few epsilons for what scn_compose_trs made). */
#define SCN_TRS_SHEAR_TOL 1e-5
/* Takes m apart into T * R * S, the inverse of scn_compose_trs: t the translation, r a unit
 * quaternion (x, y, z, w) with w >= 0, s the lengths of the first three columns with sx
 * negated when the determinant is negative (a mirror). SCN_INVALID, writing nothing, when m
 * is not T * R * S: a non-finite element, a last row other than 0 0 0 1, a zero column (zero
 * scale) or one too long for a float scale, or shear (see above). t, r, s may be NULL (r NULL
 * also skips working out the rotation, a third of the cost). */
int scn_decompose_trs(const float m[16], float t[3], float r[4], float s[3]);
/* A transform name: 1..64 bytes of valid UTF-8, no '/', no control characters. */
bool scn_name_valid(const char *name, size_t len);
/* A world name: 1..64 characters from A-Z a-z 0-9 _ . - */
bool scn_world_name_valid(const char *name, size_t len);

/* Room for need items of item_size bytes in the array items (capacity *cap, grown by doubling):
 * the array, moved if it had to grow, or NULL when memory ran out (items is then untouched).
 * One growth rule for every growable array of the core and of the layers above it. */
void *scn_array_grow(void *items, size_t *cap, size_t item_size, size_t need);

/* ---- UTF-8 (utf8.c) -------------------------------------------------------------------- */

/* Length of the strictly valid UTF-8 character at s (no overlongs, no surrogates, nothing
 * above U+10FFFF), 0 when there is none; its code point in *codepoint. */
size_t scn_utf8_char(const char *s, size_t left, uint32_t *codepoint);

/* ---- scene, entities ------------------------------------------------------------------- */

scn_scene *scn_scene_new(const scn_limits *limits);
void scn_scene_free(scn_scene *scene);
const scn_limits *scn_scene_limits(const scn_scene *scene);

/* Creates count entities, all or nothing; ids are written to out. */
int scn_entity_create(scn_scene *scene, size_t count, scn_entity *out);
/* Destroys an entity and its transform in every world (children become roots there, keeping
 * their world matrices). Fails, changing nothing, if that would give two roots one name. */
int scn_entity_destroy(scn_scene *scene, scn_entity e);
/* Destroys the entities ids[0..n) as scn_entity_destroy would one after another, all or
 * nothing: SCN_OK, or the first failure with *failed the index of the entity it concerns and
 * nothing changed (SCN_NOT_FOUND: not alive; SCN_INVALID: listed before; SCN_EXISTS: a child
 * would become a root with the name of another root). */
int scn_entity_destroy_many(scn_scene *scene, const scn_entity *ids, size_t n, size_t *failed);
bool scn_entity_alive(const scn_scene *scene, scn_entity e);
size_t scn_entity_count(const scn_scene *scene);

/* Entity registry access for persistence: slots 1..slot_count, each with its generation and
 * whether it is alive or retired (a retired slot is never reused). */
uint32_t scn_entity_slot_count(const scn_scene *scene);
scn_entity scn_entity_slot_id(const scn_scene *scene, uint32_t slot, bool *alive);
/* Restores a registry from slot states; only on a scene without entities. */
int scn_entity_restore(scn_scene *scene, uint32_t slot_count, const uint32_t *generations,
                       const uint8_t *alive);
/* The free slots in the order they will be reused (last first), so a restored registry hands
 * out exactly the ids the saved one would have. */
size_t scn_entity_free_order(const scn_scene *scene, const uint32_t **slots);
/* Replaces the reuse order after scn_entity_restore; slots must be exactly the free ones. */
int scn_entity_set_free_order(scn_scene *scene, const uint32_t *slots, size_t n);

/* Ranged mode, for daemons that share ids (a cluster): from this call on, new ids come only
 * from the slot ranges given with scn_entity_add_slots (SCN_LIMIT when they are used up), a
 * destroyed entity's slot is retired rather than reused (so an id never comes back with
 * another generation), and ids made elsewhere can be adopted. Only on a scene without
 * entities. */
int scn_entity_use_ranges(scn_scene *scene);
/* Hands the slots first..first+count-1 to a ranged scene. */
int scn_entity_add_slots(scn_scene *scene, uint32_t first, uint32_t count);
/* Slots a ranged scene can still hand out. */
uint64_t scn_entity_slots_left(const scn_scene *scene);
/* Makes id (slot and generation as given) alive in a ranged scene: SCN_OK when it now is
 * (also when it already was, and when it is the very id whose destruction retired the slot
 * here: a group loaded again from an older snapshot brings it back until its journal destroys
 * it again), SCN_EXISTS when its slot holds another generation, SCN_INVALID for an id no scene
 * could have made. */
int scn_entity_adopt(scn_scene *scene, scn_entity id);
/* The retired ids scn_entity_adopt brought back since the last clear: a loader retires again
 * those that what it loaded does not use. */
size_t scn_entity_revived(const scn_scene *scene, const scn_entity **ids);
void scn_entity_revived_clear(scn_scene *scene);
/* A ranged scene lets go of an entity that another daemon now keeps (its group moved away):
 * it is no longer alive here, and can be adopted again, with its id, if the group comes back.
 * SCN_STATE while it still has a transform in some world. */
int scn_entity_forget(scn_scene *scene, scn_entity id);
/* The next n creations give exactly these ids, in order: a replay makes the ids a command made
 * when it first ran, whatever order the free slots came back in. An expected slot must be free
 * (or beyond the slots in use) and its generation not older than the slot's; otherwise the
 * creation fails (SCN_EXISTS, SCN_INVALID). In a ranged scene a slot retired here may come back
 * as the very id that retired it (listed by scn_entity_revived, as for scn_entity_adopt). n 0
 * drops expectations left over. */
int scn_entity_expect(scn_scene *scene, const scn_entity *ids, size_t n);
/* A tag the embedding program keeps with each entity, for its own bookkeeping (a cluster
 * records which group an entity belongs to, so that one with no transform still goes where
 * its group goes). Creations and adoptions get the default (0 until set); the tag lives until
 * the entity is destroyed. scn_entity_home is 0 for an id that is not alive. */
void scn_entity_home_default(scn_scene *scene, uint32_t home);
int scn_entity_set_home(scn_scene *scene, scn_entity e, uint32_t home);
uint32_t scn_entity_home(const scn_scene *scene, scn_entity e);
/* While on, every id created is recorded (in order) until scn_entity_recorded_clear. */
void scn_entity_record(scn_scene *scene, bool on);
size_t scn_entity_recorded(const scn_scene *scene, const scn_entity **ids);
void scn_entity_recorded_clear(scn_scene *scene);

/* ---- worlds ---------------------------------------------------------------------------- */

int scn_world_create(scn_scene *scene, const char *name, scn_world **out);
/* Destroys a world and every transform in it (entities stay alive). */
int scn_world_destroy(scn_scene *scene, const char *name);
/* The entities with a transform in w and none in any other world, in increasing order: their
 * number, and the ids in out (room for scn_world_transform_count(w)). */
size_t scn_world_orphans(const scn_world *w, scn_entity *out);
/* Destroys a world as scn_world_destroy, and with it the entities ids[0..n), which must have a
 * transform in no other world (scn_world_orphans), all or nothing: SCN_OK, or the first failure
 * with *failed the index of the entity it concerns (SCN_NOT_FOUND, SCN_INVALID as
 * scn_entity_destroy_many; SCN_STATE: it has a transform elsewhere) and nothing changed. */
int scn_world_destroy_with(scn_scene *scene, const char *name, const scn_entity *ids, size_t n,
                           size_t *failed);
scn_world *scn_world_find(const scn_scene *scene, const char *name);
size_t scn_world_count(const scn_scene *scene);
scn_world *scn_world_at(const scn_scene *scene, size_t index); /* creation order */
const char *scn_world_name(const scn_world *world);
size_t scn_world_transform_count(const scn_world *world);
/* One integer a host program may keep with a world (the core never reads it). */
void scn_world_set_userdata(scn_world *world, uint64_t value);
uint64_t scn_world_userdata(const scn_world *world);
size_t scn_scene_transform_count(const scn_scene *scene);

/* ---- transforms (one manager per world) ------------------------------------------------ */

/* Creates a transform for entity e (alive) under parent (SCN_ENTITY_NONE: a root), appended
 * as the last child, with an optional name and local matrix (NULL: identity). */
int scn_transform_create(scn_world *w, scn_entity e, scn_entity parent, const char *name,
                         const float local[16]);
/* Without recursive, children become roots keeping their world matrices. */
int scn_transform_destroy(scn_world *w, scn_entity e, bool recursive);
/* parent SCN_ENTITY_NONE unlinks. Linking to the current parent is a no-op. */
int scn_transform_link(scn_world *w, scn_entity e, scn_entity parent, scn_keep keep);
int scn_transform_set_local(scn_world *w, scn_entity e, const float local[16]);
int scn_transform_set_world(scn_world *w, scn_entity e, const float world[16]);
/* Replaces some parts of the local (world_space: the world) matrix: the current matrix is
 * taken apart with scn_decompose_trs, the parts given (t, r, s; NULL keeps the current one,
 * at least one given) replace its own, and T * R * S is set as by scn_transform_set_local
 * (scn_transform_set_world). r is normalised. When only t is given, the rest of the matrix is
 * kept bit for bit (in world space, of the world matrix asked for; the local that gives it is
 * worked out as by scn_transform_set_world). SCN_INVALID, changing nothing, when no part is
 * given, a part is not finite, r is zero, or the current matrix is not T * R * S (no world
 * matrix under a singular parent is); SCN_SINGULAR as scn_transform_set_world. */
int scn_transform_set_parts(scn_world *w, scn_entity e, bool world_space, const float t[3],
                            const float r[4], const float s[3]);
/* name NULL clears it. */
int scn_transform_rename(scn_world *w, scn_entity e, const char *name);
bool scn_transform_exists(const scn_world *w, scn_entity e);

typedef struct scn_transform_info {
  scn_entity entity;
  scn_entity parent; /* SCN_ENTITY_NONE for a root */
  const char *name;  /* NULL when unnamed; valid until the next mutation of the world */
  float local[16];
  float world[16];
} scn_transform_info;

int scn_transform_get(scn_world *w, scn_entity e, scn_transform_info *out);
/* Writes up to cap children in order to out and their total number to count. */
int scn_transform_children(scn_world *w, scn_entity e, scn_entity *out, size_t cap, size_t *count);
/* Path of names from a root down, separated by '/'. */
int scn_transform_find(scn_world *w, const char *path, size_t path_len, scn_entity *out);
/* out = inverse(world(to)) * world(e) */
int scn_transform_relative(scn_world *w, scn_entity e, scn_entity to, float out[16]);

/* ---- batches --------------------------------------------------------------------------- */

/* Between begin and commit/rollback, every mutation of the scene is recorded so rollback can
 * restore the exact prior state (entities created in the batch are un-created). */
int scn_batch_begin(scn_scene *scene);
void scn_batch_commit(scn_scene *scene);
void scn_batch_rollback(scn_scene *scene);
bool scn_batch_active(const scn_scene *scene);

/* ---- propagation, ticks and change tracking -------------------------------------------- */

/* Recomputes every dirty world matrix. Reads call it themselves; the daemon calls it per tick. */
void scn_world_flush(scn_world *w);
/* Each world counts ticks; changes are stamped with the current (open) tick. Closing a tick
 * flushes, returns the closed tick number and opens the next. Tick numbers start at 1. */
uint64_t scn_world_tick(const scn_world *w);
uint64_t scn_world_close_tick(scn_world *w);

typedef void (*scn_visit_fn)(void *ud, scn_entity e, const float world[16]);

/* Visits, parents before children, every transform in scope (the whole world when root is
 * SCN_ENTITY_NONE, else root and its descendants) whose world matrix changed after tick since
 * (since 0 visits all). Flushes first. */
int scn_world_visit_changed(scn_world *w, scn_entity root, uint64_t since, scn_visit_fn fn,
                            void *ud);
/* Visits every transform of a world, parents before children and children in order, with
 * what recreating it takes (for snapshots). */
typedef void (*scn_transform_fn)(void *ud, scn_entity e, scn_entity parent, const char *name,
                                 const float local[16]);
void scn_world_visit_transforms(scn_world *w, scn_transform_fn fn, void *ud);

/* Visits every transform in scope, parents before children, saying whether its world matrix
 * changed after tick since. Flushes first. */
typedef void (*scn_scope_fn)(void *ud, scn_entity e, const float world[16], bool changed);
int scn_world_visit_scope(scn_world *w, scn_entity root, uint64_t since, scn_scope_fn fn, void *ud);
/* True when e has a transform in w that lies in root's subtree (root itself included). */
bool scn_transform_in_subtree(scn_world *w, scn_entity e, scn_entity root);

/* Structural events since a tick, in order, for subscribers: transforms created, destroyed,
 * or moved to another parent after tick since. The log keeps events until trimmed. */
typedef enum scn_event_kind {
  SCN_EVENT_DESTROYED = 1,
  SCN_EVENT_RELINKED = 2,
  SCN_EVENT_CREATED = 3
} scn_event_kind;
typedef void (*scn_event_fn)(void *ud, scn_entity e, scn_event_kind kind);
void scn_world_visit_events(const scn_world *w, uint64_t since, scn_event_fn fn, void *ud);
/* Drops events at or before tick; returns the oldest tick still covered by the log. */
void scn_world_trim_events(scn_world *w, uint64_t upto);
/* Oldest tick after which the event log is complete (events after it are all present). */
uint64_t scn_world_events_since(const scn_world *w);
/* The log is kept only while on (off by default), so a world nobody streams keeps none. */
void scn_world_keep_events(scn_world *w, bool on);
/* While on (off by default), a world matrix that a read recomputed in the open tick and that
 * is back to its value of the last closed tick when the tick closes keeps its old change
 * stamp, so subscribers are not sent a value they already hold. */
void scn_world_track_reverts(scn_world *w, bool on);

/* Propagation statistics (for metrics and benchmarks). */
typedef struct scn_world_stats {
  uint64_t flushes;
  uint64_t recomputed; /* world matrices recomputed */
  uint64_t changed;    /* of those, how many changed bits */
  uint64_t relayouts;  /* times the arrays were re-sorted parents-before-children */
  /* History (0 without): bytes it holds, and the matrices (world or local) it keeps now. */
  uint64_t history_bytes;
  uint64_t history_matrices;
} scn_world_stats;
void scn_world_get_stats(const scn_world *w, scn_world_stats *out);

/* ---- history (rewind) ------------------------------------------------------------------ */

/* A world can keep its last N closed ticks (0, the default, keeps none; at most
 * SCN_HISTORY_MAX), so that a transform can be read as it stood when a tick closed: parent,
 * name, local and world exactly as the stream carried them for that tick. The window runs from
 * now - N + 1 to now, where now is the last closed tick, and never before the tick that was open
 * when history was turned on (a window lengthened later grows from the oldest tick it held
 * then). For each tick the world keeps only what
 * changed in it, and old ticks are dropped as new ones close. History is never a reason for an
 * operation to fail: without memory for a record the history restarts at the next close (older
 * ticks then answer SCN_NOT_FOUND). */
#define SCN_HISTORY_MAX 3600

/* SCN_INVALID for a negative count, SCN_LIMIT above SCN_HISTORY_MAX, SCN_NOMEM. Shortening
 * drops the ticks that fall out; lengthening keeps what is kept and grows from there. */
int scn_world_set_history(scn_world *w, int64_t ticks);
uint32_t scn_world_history(const scn_world *w);
/* The ticks a query may name; SCN_NOT_FOUND (writing nothing) when there are none: no history,
 * or no tick closed since it was turned on. */
int scn_world_history_window(const scn_world *w, uint64_t *oldest, uint64_t *newest);
/* e as tick closed. SCN_NOT_FOUND when tick lies outside the window or e had no transform in w
 * then (created after it, or destroyed before it; one destroyed after it answers). out->name
 * stays valid until the next mutation of the world or the next tick it closes. */
int scn_world_history_get(scn_world *w, scn_entity e, uint64_t tick, scn_transform_info *out);
/* As scn_world_history_get at a fractional tick: between floor(tick) and the tick after it,
 * both in the window, every matrix (world and local alike) is interpolated, translation and
 * scale linearly and rotation by spherical interpolation of its quaternion; a matrix that is
 * not T * R * S at either end takes its value at floor(tick). Parent and name, and whether e
 * answers at all, are those of floor(tick); a transform destroyed in the next tick keeps its
 * values at floor(tick). An integer tick is exactly scn_world_history_get. SCN_INVALID for a
 * negative or non-finite tick. */
int scn_world_history_interpolate(scn_world *w, scn_entity e, double tick, scn_transform_info *out);
/* out = inverse(world(to)) * world(e), both at tick (fractional ticks interpolated as above);
 * SCN_NOT_FOUND as above for either, SCN_SINGULAR when world(to) has no inverse. */
int scn_world_history_relative(scn_world *w, scn_entity e, scn_entity to, double tick,
                               float out[16]);

/* ---- handing a world's ticks and history to another world -------------------------------- */

/* A world whose open tick is still its first continues another's tick count: now is the last
 * tick closed there, so the open tick becomes now + 1 (a world loaded on another daemon goes
 * on where it left off). What w holds counts as changed in tick now; a history it keeps starts
 * again at the open tick. SCN_STATE when w's open tick is not 1 any more (a tick closed, or a
 * count continued already) or a batch is open; SCN_INVALID for now above 2^62; now 0 changes
 * nothing. */
int scn_world_continue_ticks(scn_world *w, uint64_t now);
/* While on (off by default), scn_world_close_tick closes nothing and returns the last closed
 * tick: the world's clock stands still (a world being handed over keeps the count it leaves
 * with). Reads still see every change. */
void scn_world_hold_ticks(scn_world *w, bool on);

/* A world's history in a form that does not depend on how it is stored, so that a world with
 * the same transforms elsewhere can be given the same past. A version is what one of an
 * entity's values was as a tick closed, kept because it changed in the tick after: its world
 * matrix, its local matrix, or its structure (whether it had a transform in the world, its
 * parent and its name). */
typedef enum scn_version_kind {
  SCN_VERSION_WORLD = 0,
  SCN_VERSION_LOCAL = 1,
  SCN_VERSION_STRUCT = 2,
} scn_version_kind;

typedef struct scn_history_version {
  uint64_t tick; /* the value changed in this tick: it is the value as tick - 1 closed */
  scn_entity entity;
  scn_version_kind kind;
  float m[16];                 /* WORLD, LOCAL */
  bool exists;                 /* STRUCT: whether entity had a transform in the world */
  scn_entity parent;           /* STRUCT with exists: its parent, SCN_ENTITY_NONE for a root */
  char name[SCN_NAME_MAX + 1]; /* STRUCT with exists: its name, "" when unnamed */
} scn_history_version;

typedef struct scn_history_span {
  uint32_t window; /* scn_world_history */
  uint64_t oldest; /* the oldest tick a query may name; now + 1 when none may be named */
  uint64_t now;    /* the last closed tick */
} scn_history_span;

typedef int (*scn_version_fn)(void *ud, const scn_history_version *v);
/* Describes w's history in *span and gives fn every version a query can read, in order of
 * tick (oldest + 1 up to now + 1: the open tick's changes too, which hold the values of tick
 * now). Stops at the first nonzero value fn returns and returns it; SCN_NOMEM; else SCN_OK.
 * Nothing a query answers changes. */
int scn_world_history_export(scn_world *w, scn_history_span *span, scn_version_fn fn, void *ud);

/* Writes the next version to *v and returns 1; 0 after the last; a negative scn_err stops. */
typedef int (*scn_version_next_fn)(void *ud, scn_history_version *v);
/* Gives w the history that span and the versions describe, as exported from a world with the
 * same transforms whose open tick was span->now + 1: afterwards every query at every tick (and
 * the window) answers as it did there, and the history goes on from there as it would have.
 * w's open tick must be span->now + 1 (see scn_world_continue_ticks): SCN_STATE otherwise, or
 * inside a batch, changing nothing; SCN_INVALID for a span no world has (a window above
 * SCN_HISTORY_MAX, an oldest tick outside it), changing nothing. SCN_INVALID for versions no
 * export gives (out of order, outside the span, two of one value in one tick, a destroyed
 * transform without its values), SCN_NOMEM, or what next returned: w then keeps the window
 * with nothing in it, as if history had been turned on in the open tick. Costs memory in
 * proportion to the versions, like the history itself; allocates as it goes. */
int scn_world_history_import(scn_world *w, const scn_history_span *span, scn_version_next_fn next,
                             void *ud);

/* Checks every internal invariant of a world (links, maps, order, world = parent world x
 * local after a flush); 0, or SCN_STATE with a description in err. For tests and fuzzers. */
int scn_world_check(scn_world *w, char *err, size_t errlen);

/* Re-sorts the instance arrays in depth-first order so every subtree is contiguous and
 * propagation walks memory forward. Flush does this itself when enough structure changed. */
void scn_world_relayout(scn_world *w);

#endif

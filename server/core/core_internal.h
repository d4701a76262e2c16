/* Internal state of the transform core; shared by the files of server/core only. */
#ifndef SCN_CORE_INTERNAL_H
#define SCN_CORE_INTERNAL_H

#include "scn_core.h"

#include <cglm/cglm.h>

#define SCN_NIL UINT32_MAX

/* Growable array of fixed-size items, amortised doubling. */
typedef struct scn__vec {
  void *data;
  size_t len, cap;
} scn__vec;

int scn__vec_reserve(scn__vec *v, size_t item_size, size_t need);
/* As scn_array_grow, for an array whose capacity is kept in 32 bits: the array, grown when
 * needed, or NULL when out of memory (items is then left as it was). */
void *scn__grow32(void *items, uint32_t *cap, size_t item_size, size_t need);
void scn__vec_free(scn__vec *v);
#define SCN_VEC_AT(v, type, i) (((type *)(v).data)[i])

/* A transform name slot: names are short, so fixed slots avoid a heap block per name. */
typedef struct scn__name {
  char text[SCN_NAME_MAX + 1];
} scn__name;

/* A world matrix as it was before a flush inside the open tick first changed it. */
typedef struct scn__revert {
  scn_entity entity;
  uint32_t instance; /* where it was; looked up by entity if that moved */
  uint32_t stamp;
  float world[16];
} scn__revert;

typedef struct scn__event {
  uint64_t tick;
  scn_entity entity;
  uint32_t kind;
} scn__event;

/* ---- history (history.c) ----
 * Undo records in rings of fixed-size records numbered by a 64-bit sequence: world matrices and
 * local matrices, and structure (existence, parent, name). A record made in tick t holds the
 * value as tick t-1 closed; each entity has one chain per kind, newest first, linked by the
 * distance back to the previous record of the same chain. A matrix record is the matrix's first
 * three rows (48 bytes) and a 4-byte link; a last row other than 0 0 0 1 is kept aside, in a
 * small ring of its own searched by sequence number. */
#define SCN_HIST_MSHIFT 10 /* matrix records per chunk: 1024 (52 KiB) */
#define SCN_HIST_SSHIFT 8  /* structure records per chunk: 256 (22 KiB) */
#define SCN_HIST_ASHIFT 8  /* last rows kept aside per chunk: 256 (6 KiB) */
/* In a matrix record's link: its last row is kept aside. The rest is the distance back. */
#define SCN_HIST_ASIDE 0x80000000u
#define SCN_HIST_LINK_MAX (SCN_HIST_ASIDE - 1)

typedef struct scn__hist_mchunk {
  float rows[1u << SCN_HIST_MSHIFT][12]; /* rows 0..2 of the matrix, each x y z w in order */
  uint32_t link[1u << SCN_HIST_MSHIFT];  /* distance to the chain's previous record, 0: none */
} scn__hist_mchunk;

typedef struct scn__hist_row {
  uint64_t seq; /* of the matrix record */
  float row[4]; /* its last row */
} scn__hist_row;

typedef struct scn__hist_srec {
  scn_entity entity, parent;
  uint32_t back;
  uint8_t exists;
  char name[SCN_NAME_MAX + 1]; /* "" when unnamed */
} scn__hist_srec;

/* Records [front, end) live in chunks; chunk k sits at table[k & mask]. Chunks the front leaves
 * behind are kept in spare for the end to reuse, so a steady window allocates nothing. */
typedef struct scn__ring {
  void **table;
  uint32_t mask, shift;
  size_t chunk_bytes;
  uint64_t front, end;
  void **spare;
  uint32_t nspare, spare_cap;
} scn__ring;

/* Newest record of each chain of one entity; a sequence number below the ring's front (0
 * included) means none. */
typedef struct scn__heads {
  uint64_t world, local, meta;
} scn__heads;

/* An entity whose transform was destroyed while its records are still in the window. */
typedef struct scn__dead {
  scn_entity entity; /* 0: empty slot */
  scn__heads heads;
} scn__dead;

enum { SCN_HIST_WORLD, SCN_HIST_LOCAL, SCN_HIST_STRUCT, SCN_HIST_RINGS };

typedef struct scn__hist {
  uint32_t window; /* ticks kept */
  uint64_t start;  /* oldest tick whose closing state the records can give */
  bool broken;     /* a record found no memory: the history restarts at the next close */
  scn__ring ring[SCN_HIST_RINGS];
  scn__ring aside[2];                /* last rows kept aside, of the world and local rings */
  uint64_t (*bound)[SCN_HIST_RINGS]; /* per tick (index tick & bound_mask): its first records */
  uint32_t bound_mask;
  uint64_t begin[SCN_HIST_RINGS]; /* where the open tick's records begin */
  scn__heads *heads;              /* per instance, cap of them */
  /* Per instance: its local matrix as the last flush left it. Setters leave no record; the
   * flush compares each dirty instance's local matrix with this one and records the old value
   * the first time in a tick that they differ. So with no record in the open tick this is the
   * value the last tick closed with. */
  mat4 *shadow;
  uint32_t cap;
  size_t heads_bytes, shadow_bytes;
  scn__dead *dead; /* open addressing by entity, linear probing */
  uint32_t dead_mask, ndead;
} scn__hist;

/* One transform manager: structure-of-arrays instance data, indexed by instance. */
typedef struct scn__tm {
  uint32_t n, cap;
  void *block; /* every instance array below, in one allocation */
  size_t block_bytes;
  scn_entity *entity;
  mat4 *local;
  mat4 *world;
  uint32_t *parent, *first_child, *last_child, *next, *prev;
  uint32_t *subtree; /* subtree size including self; meaningful while sorted */
  uint32_t *name;    /* name slot, 0 = unnamed */
  uint32_t *changed; /* stamp (tick - stamp_base) of the last change of the world matrix */
  uint8_t *dirty;    /* local (or parent) changed since the last flush */
  uint32_t first_root, last_root;

  /* entity -> instance, open addressing with linear probing; slots hold instance indices */
  uint32_t *emap;
  uint32_t emap_mask;
  /* (parent entity, name) -> instance, same scheme; only named instances */
  uint32_t *nmap;
  uint32_t nmap_mask, named;

  scn__vec names;      /* scn__name, slot 0 unused */
  scn__vec names_free; /* uint32_t free slots */

  scn__vec dirty_list; /* uint32_t instances with dirty set */
  scn__vec scratch;    /* uint32_t, walks and paths */
  scn__vec scratch_e;  /* scn_entity, subtrees being destroyed */

  bool sorted; /* instances are in depth-first order, subtree[] valid */
  uint32_t unsorted_changes;
  uint64_t tick;
  uint64_t stamp_base; /* stamps are 32-bit offsets from here; rebased when they would wrap */

  bool keep_events; /* log structural events only while someone reads them */
  scn__vec events;  /* scn__event */
  size_t events_head;
  uint64_t events_since;

  bool track_reverts; /* log reverts (scn_world_track_reverts) */
  bool closing;       /* the flush of scn_world_close_tick is running */
  bool hold_ticks;    /* scn_world_hold_ticks: close_tick closes nothing */
  bool removed_in_tick;
  bool reverts_full; /* more changed in the tick than the log keeps: none restored */
  scn__vec reverts;  /* scn__revert, at most one per instance changed in the open tick */

  scn__hist *hist; /* NULL while the world keeps no history */

  scn_world_stats stats;
} scn__tm;

struct scn_world {
  scn_scene *scene;
  char name[SCN_NAME_MAX + 1];
  uint64_t name_hash;
  uint64_t userdata;
  scn__tm tm;
};

/* Undo log of a batch. */
typedef enum scn__undo_kind {
  SCN_UNDO_ENTITY_CREATED,
  SCN_UNDO_CREATED,
  SCN_UNDO_SET_LOCAL,
  SCN_UNDO_LINKED,
  SCN_UNDO_RENAMED,
  SCN_UNDO_DESTROYED,
} scn__undo_kind;

typedef struct scn__undo_node {
  scn_entity entity, parent;
  uint32_t name_off; /* offset into the undo string buffer, UINT32_MAX = none */
  uint32_t changed;
  mat4 local, world;
} scn__undo_node;

typedef struct scn__undo {
  scn__undo_kind kind;
  scn_world *world;
  scn_entity entity, parent, before;
  uint32_t name_off;
  bool recursive;
  bool fresh_slot;             /* entity created: its slot was new, not a reused free one */
  bool was_retired;            /* entity created (a replay, ranged): its slot had been retired */
  size_t nodes_off, nodes_len; /* into the node buffer (destroy) */
  size_t events_len;           /* event log length before the op */
  mat4 local;
} scn__undo;

typedef struct scn__entities {
  uint32_t *gen;
  uint8_t *state;      /* 0 free, 1 alive, 2 retired */
  uint32_t slots, cap; /* slots used: 1..slots */
  scn__vec free_slots; /* uint32_t */
  uint64_t alive;
  /* Ranged mode (a cluster): new ids come only from the slot ranges given, and a destroyed
   * slot is retired, never reused. */
  bool ranged;
  scn__vec ranges;       /* uint32_t pairs [next, end) not yet used up, oldest first */
  scn__vec expect;       /* scn_entity: ids the next creations must give (replay) */
  size_t expect_head;    /* the next of them */
  bool recording;        /* created ids are appended to recorded */
  scn__vec recorded;     /* scn_entity */
  uint32_t *home;        /* per slot: the embedder's tag (a cluster's group), see scn_entity_home */
  uint32_t default_home; /* what creations and adoptions get */
  scn__vec revived;      /* scn_entity: retired ids adopted again (scn_entity_revived) */
} scn__entities;

struct scn_scene {
  scn_limits limits;
  scn__entities ents;
  scn_world **worlds;
  size_t nworlds, worlds_cap;

  bool in_batch, replaying;
  scn__vec undo;       /* scn__undo */
  scn__vec undo_nodes; /* scn__undo_node */
  scn__vec undo_names; /* char */
  size_t batch_events_len;
};

/* ---- idmap.c ----
 * 64-bit ids to 32-bit values (SCN_NIL: absent); ids other than UINT64_MAX. */
typedef struct scn__idmap {
  uint64_t *keys;
  uint32_t *vals;
  uint32_t mask, count;
} scn__idmap;

uint32_t scn__idmap_get(const scn__idmap *m, uint64_t key);
int scn__idmap_put(scn__idmap *m, uint64_t key, uint32_t val);
void scn__idmap_del(scn__idmap *m, uint64_t key);
void scn__idmap_clear(scn__idmap *m);
void scn__idmap_free(scn__idmap *m);
size_t scn__idmap_bytes(const scn__idmap *m);

/* ---- math.c ---- */
/* out = inverse(a) * b, computed in double; SCN_SINGULAR when a is singular or out would not
 * be finite in float. b NULL means identity (out = inverse(a)). */
int scn__mul_inverse(mat4 a, mat4 b, mat4 out);
uint64_t scn__hash64(uint64_t x);
uint64_t scn__hash_bytes(const char *s, size_t len, uint64_t seed);

/* ---- entity.c ---- */
void scn__entities_free(scn__entities *ents);
/* Undoes a creation exactly: a reused slot goes back to the end of the free list it was
 * taken from, a fresh one shrinks the slot count again. */
void scn__entity_uncreate(scn_scene *scene, scn_entity e, bool fresh_slot, bool was_retired);
/* Before entities ids[0..n) end together: each is alive and listed once (SCN_NOT_FOUND or
 * SCN_INVALID, *failed the index of the first that is not), and free_slots has room for all of
 * them (SCN_NOMEM). Changes nothing. */
int scn__entities_check(scn_scene *scene, const scn_entity *ids, size_t n, size_t *failed);
/* Ends entities that passed scn__entities_check and have no transform left. */
void scn__entities_retire(scn_scene *scene, const scn_entity *ids, size_t n);
/* The world's index in the scene, SIZE_MAX when there is none by that name. */
size_t scn__world_index(const scn_scene *scene, const char *name);
/* Frees a world taken out of the scene. */
void scn__world_free(scn_world *w);

/* ---- tm_store.c: storage, maps, links ---- */
/* Big arrays straight from mmap, so that memory freed is given back at once (glibc would keep
 * medium blocks in its heap); 64-byte aligned either way. */
void *scn__array_alloc(size_t bytes);
void scn__array_free(void *p, size_t bytes);
int scn__tm_init(scn__tm *tm);
void scn__tm_free(scn__tm *tm);
uint32_t scn__tm_lookup(const scn__tm *tm, scn_entity e);
uint32_t scn__tm_lookup_name(const scn__tm *tm, scn_entity parent, const char *name, size_t len);
const char *scn__tm_name(const scn__tm *tm, uint32_t i);
int scn__tm_reserve(scn__tm *tm, uint32_t need);
/* Appends a new instance under parent (SCN_NIL: root) before sibling before (SCN_NIL: last). */
/* world NULL: computed at the next flush; else taken as is with its change tick (rollback). */
int scn__tm_insert(scn__tm *tm, scn_entity e, uint32_t parent, uint32_t before, const char *name,
                   mat4 local, mat4 world, uint32_t changed, uint32_t *out);
/* Removes an instance that has no children (swap-erase; links to the moved slot rewritten). */
void scn__tm_remove_leaf(scn__tm *tm, uint32_t i);
/* Moves i under parent before sibling before (SCN_NIL: last); re-keys its name. */
void scn__tm_move(scn__tm *tm, uint32_t i, uint32_t parent, uint32_t before);
int scn__tm_set_name(scn__tm *tm, uint32_t i, const char *name);
void scn__tm_mark_dirty(scn__tm *tm, uint32_t i);
void scn__tm_log_event(scn__tm *tm, scn_entity e, scn_event_kind kind);
void scn__tm_rebuild_maps(scn__tm *tm);

/* Before world[i] changes in a flush inside the open tick: keep its old value and stamp (once
 * per tick). Without room it is not kept, which at worst resends an unchanged matrix. */
void scn__tm_note_revert(scn__tm *tm, uint32_t i);
static inline bool scn__tm_logs_reverts(const scn__tm *tm) {
  return tm->track_reverts && !tm->closing;
}

static inline uint32_t scn__tm_stamp(const scn__tm *tm) {
  return (uint32_t)(tm->tick - tm->stamp_base);
}

/* The instance after i in a depth-first pre-order walk of top's subtree, SCN_NIL at its end:
 * down to the first child, else across to the next sibling, else up until an ancestor below
 * top has one. Needs no stack. */
static inline uint32_t scn__tm_next_preorder(const scn__tm *tm, uint32_t i, uint32_t top) {
  if (tm->first_child[i] != SCN_NIL)
    return tm->first_child[i];
  while (i != top && tm->next[i] == SCN_NIL)
    i = tm->parent[i];
  return i == top ? SCN_NIL : tm->next[i];
}

/* ---- history.c ---- */
void scn__hist_free(scn__hist *h);
int scn__hist_reserve(scn__tm *tm, uint32_t cap); /* per-instance heads for cap instances */
/* Keeps the last row of matrix record seq of ring which (world or local) aside; returns
 * SCN_HIST_ASIDE for its link (0 without memory: the history is then broken). */
uint32_t scn__hist_aside(scn__hist *h, int which, uint64_t seq, const float row[4]);
/* A link longer than SCN_HIST_LINK_MAX: the history is broken; 0 for the link. */
uint32_t scn__hist_too_far(scn__hist *h);
/* Before world[i] changes for the first time in the open tick (its stamp is older), inside a
 * flush: its old value becomes the head of its chain. */
void scn__hist_world(scn__tm *tm, uint32_t i);
/* For the propagation loop, which fills the matrix rings itself: commits the records of ring
 * which (world or local) before s and gives the chunk that holds record s, making it when s
 * starts one; NULL without memory (the history is then broken). */
scn__hist_mchunk *scn__hist_chunk(scn__tm *tm, int which, uint64_t s);
/* For a dirty instance i in a flush (the propagation loops), and after local[i] changed
 * outside scn_transform_set_local (which leaves i dirty): a local matrix that differs from its
 * shadow gets a record (the first time in the tick) and the shadow takes its value. */
void scn__hist_local(scn__tm *tm, uint32_t i);
/* Before the parent or the name of i changes. */
void scn__hist_struct(scn__tm *tm, uint32_t i);
/* After instance i was inserted; before it is removed. */
void scn__hist_inserted(scn__tm *tm, uint32_t i);
void scn__hist_removing(scn__tm *tm, uint32_t i);
/* After tick closed was closed (tm->tick is the next one already). */
void scn__hist_closed(scn__tm *tm, uint64_t closed);
/* Forgets every record: the history starts again at the open tick (as when turned on). */
void scn__hist_reset(scn__tm *tm);
void scn__hist_stats(const scn__tm *tm, scn_world_stats *out);

static inline void scn__tm_after_local(scn__tm *tm, uint32_t i) {
  if (tm->hist)
    scn__hist_local(tm, i);
}

/* ---- propagate.c ---- */
void scn__tm_flush(scn__tm *tm);
void scn__tm_relayout(scn__tm *tm);
/* Fresh world matrix of i without a full flush: recomputes along the path from the topmost
 * dirty ancestor. */
void scn__tm_world_of(scn__tm *tm, uint32_t i, mat4 out);

/* ---- batch.c ---- */
scn__undo *scn__undo_push(scn_scene *scene, scn__undo_kind kind, scn_world *w, scn_entity e);
int scn__undo_save_node(scn_scene *scene, scn__tm *tm, uint32_t i, scn_entity parent);
uint32_t scn__undo_name(scn_scene *scene, const char *name);
static inline bool scn__recording(const scn_scene *s) { return s->in_batch && !s->replaying; }

/* ---- transform.c ---- */
/* Non-recursive destroy in two steps so entity.destroy can check every world first. */
int scn__transform_destroy_check(scn_world *w, scn_entity e);
int scn__transform_destroy(scn_world *w, scn_entity e, bool recursive);

#endif

/* The wire vocabulary of protocol 1: error codes, request fields and the command table. Server
 * and clients include this one list, so a command's name, fields, flags and help can never
 * drift apart. */
#ifndef SCN_WIRE_H
#define SCN_WIRE_H

#include <stdint.h>

#define SCN_PROTOCOL 1
#define SCN_VERSION "0.1.0"

/* Error codes a client switches on. */
#define SCN_WIRE_ERRORS(X)                                                                         \
  X(BAD_JSON)                                                                                      \
  X(BAD_REQUEST)                                                                                   \
  X(UNKNOWN_COMMAND)                                                                               \
  X(NOT_FOUND)                                                                                     \
  X(ALREADY_EXISTS)                                                                                \
  X(CYCLE)                                                                                         \
  X(LIMIT)                                                                                         \
  X(UNAUTHORIZED)                                                                                  \
  X(INTERNAL)                                                                                      \
  X(MOVED)                                                                                         \
  X(UNAVAILABLE)

typedef enum scn_wire_code {
#define SCN_WIRE_ENUM(name) SCN_W_##name,
  SCN_WIRE_ERRORS(SCN_WIRE_ENUM)
#undef SCN_WIRE_ENUM
} scn_wire_code;

const char *scn_wire_code_name(scn_wire_code code);

/* The fields of requests, in the order a command checks them (a request with two bad fields
 * is refused for the first). "partial" comes before the transform spec, whose decoding
 * depends on it. */
#define SCN_FIELDS(X)                                                                              \
  X(cmd)                                                                                           \
  X(id)                                                                                            \
  X(world)                                                                                         \
  X(entity)                                                                                        \
  X(parent)                                                                                        \
  X(name)                                                                                          \
  X(partial)                                                                                       \
  X(matrix)                                                                                        \
  X(matrix_b64)                                                                                    \
  X(t)                                                                                             \
  X(r)                                                                                             \
  X(s)                                                                                             \
  X(recursive)                                                                                     \
  X(keep)                                                                                          \
  X(path)                                                                                          \
  X(to)                                                                                            \
  X(ops)                                                                                           \
  X(root)                                                                                          \
  X(hz)                                                                                            \
  X(sub)                                                                                           \
  X(count)                                                                                         \
  X(token)                                                                                         \
  X(matrices)                                                                                      \
  X(trs)                                                                                           \
  X(tick)                                                                                          \
  X(history)                                                                                       \
  X(node)                                                                                          \
  X(cluster)                                                                                       \
  X(created)                                                                                       \
  X(near)                                                                                          \
  X(packed)                                                                                        \
  X(entities)                                                                                      \
  X(group)                                                                                         \
  X(epoch)                                                                                         \
  X(from)                                                                                          \
  X(durability)                                                                                    \
  X(follower_reads)

typedef enum scn_field {
#define SCN_FIELD_ENUM(name) SCN_F_##name,
  SCN_FIELDS(SCN_FIELD_ENUM)
#undef SCN_FIELD_ENUM
      SCN_FIELD_COUNT
} scn_field;

/* A set of fields, one bit each. */
typedef uint64_t scn_fieldset;
#define SCN_F(name) ((scn_fieldset)1 << SCN_F_##name)
#define SCN_F_PARTS (SCN_F(t) | SCN_F(r) | SCN_F(s))
#define SCN_F_SPEC (SCN_F(matrix) | SCN_F(matrix_b64) | SCN_F_PARTS)

/* How a connection receives matrices in responses and frames (hello's "matrices"): arrays of
 * 16 numbers, or base64 strings of their float32 bytes (b64.h). */
typedef enum scn_matrix_form { SCN_MATRICES_JSON = 0, SCN_MATRICES_B64 = 1 } scn_matrix_form;

const char *scn_field_name(scn_field f);
/* The field a JSON key names, or SCN_FIELD_COUNT for any other key. */
scn_field scn_field_find(const char *key);
/* "a,b,c": the names of a set's fields in order (for help). */
void scn_fields_text(scn_fieldset set, char *out, unsigned cap);
/* The field of set that key most likely misspells: the nearest by scn_edit_distance, at most
 * two edits (the contract's "close"); among equals one that starts with the key's first letter,
 * then the first in field order; never "cmd" or "id", and none for an empty key.
 * SCN_FIELD_COUNT when none is that close. */
scn_field scn_field_suggest(const char *key, scn_fieldset set);
/* The text of the error for a member whose key is not a field of taken, into out (cap bytes):
 * unknown field "partal" (did you mean "partial"?), the key cut to 64 bytes at a character
 * boundary, the suggestion from scn_field_suggest when there is one. */
void scn_unknown_field_text(const char *key, scn_fieldset taken, char *out, unsigned cap);

/* Why a request or connection was refused with LIMIT. */
#define SCN_LIMITS(X)                                                                              \
  X(max_clients)                                                                                   \
  X(max_line)                                                                                      \
  X(max_worlds)                                                                                    \
  X(max_transforms)                                                                                \
  X(entity_create)                                                                                 \
  X(output_limit)

typedef enum scn_limit_kind {
#define SCN_LIMIT_ENUM(name) SCN_LIMIT_##name,
  SCN_LIMITS(SCN_LIMIT_ENUM)
#undef SCN_LIMIT_ENUM
      SCN_LIMIT_KINDS,
  SCN_LIMIT_none = SCN_LIMIT_KINDS /* a command no limit refuses (but --output-limit) */
} scn_limit_kind;

/* Rights (--acl): a command needs one of them, an access list rule grants a set. "cluster" is
 * the daemons' own (a follower's replicate stream of a group), granted to the cluster's token
 * only; admin does not imply it. */
#define SCN_RIGHTS(X)                                                                              \
  X(read)                                                                                          \
  X(write)                                                                                         \
  X(admin)                                                                                         \
  X(cluster)

typedef enum scn_right_bit {
#define SCN_RIGHT_ENUM(name) SCN_RIGHT_BIT_##name,
  SCN_RIGHTS(SCN_RIGHT_ENUM)
#undef SCN_RIGHT_ENUM
      SCN_RIGHT_COUNT
} scn_right_bit;

/* The bit of a right in a set of rights. */
#define SCN_RIGHT(name) (1u << SCN_RIGHT_BIT_##name)

const char *scn_right_name(scn_right_bit r);
/* The right named by the len bytes at name (SCN_RIGHT bit), 0 for none. */
unsigned scn_right_find(const char *name, unsigned long len);

/* Command flags. */
#define SCN_CMD_MUTATES 0x1u     /* changes state: journaled */
#define SCN_CMD_OPEN 0x2u        /* allowed before authentication */
#define SCN_CMD_IN_BATCH 0x4u    /* may appear in a batch's ops */
#define SCN_CMD_READ 0x8u        /* changes nothing at all (not even connection state) */
#define SCN_CMD_WORLD 0x10u      /* acts on an existing world, named by "world" */
#define SCN_CMD_ALL_WORLDS 0x20u /* reaches into every world (--acl: needs the prefix "*") */
#define SCN_CMD_FOLLOWER 0x40u   /* a follower answers it from its copy (hello's follower_reads) */

#define SCN_TRANSFORM_OP (SCN_CMD_IN_BATCH | SCN_CMD_WORLD)
#define SCN_FOLLOWER_READ (SCN_TRANSFORM_OP | SCN_CMD_READ | SCN_CMD_FOLLOWER)

/* X(name, ident, flags, the right it needs with --acl, the limit that may refuse it (its LIMIT
 *   answers are counted there; --output-limit may refuse any), required fields, optional
 *   fields, help) */
#define SCN_COMMANDS(X)                                                                            \
  X("ping", ping, SCN_CMD_OPEN | SCN_CMD_READ, read, none, 0, 0, "check that the daemon answers")  \
  X("hello", hello, SCN_CMD_OPEN, read, none, 0,                                                   \
    SCN_F(token) | SCN_F(matrices) | SCN_F(follower_reads),                                        \
    "identify (and authenticate) the connection; matrices \"json\" or \"b64\"; cluster: "          \
    "follower_reads")                                                                              \
  X("world.create", world_create, SCN_CMD_MUTATES, admin, max_worlds, SCN_F(world),                \
    SCN_F(history) | SCN_F(node) | SCN_F(durability),                                              \
    "create a named world (history: keep its last N ticks; cluster: node places a new group, "     \
    "durability sync or async fixes its durability)")                                              \
  X("world.destroy", world_destroy, SCN_CMD_MUTATES | SCN_CMD_WORLD, admin, max_transforms,        \
    SCN_F(world), SCN_F(entities),                                                                 \
    "destroy a world and every transform in it (entities: true, and the entities only it used)")   \
  X("world.list", world_list, SCN_CMD_READ, read, none, 0, SCN_F(cluster),                         \
    "list worlds with their transform counts (cluster: every node's)")                             \
  X("entity.create", entity_create, SCN_CMD_MUTATES, write, entity_create, 0,                      \
    SCN_F(count) | SCN_F(world),                                                                   \
    "create entities (count, default 1, at most 100000; cluster: on world's owner)")               \
  X("entity.destroy", entity_destroy, SCN_CMD_MUTATES | SCN_CMD_ALL_WORLDS, write, entity_create,  \
    0, SCN_F(entity) | SCN_F(entities),                                                            \
    "destroy an entity (or entities: a list, all or none) and its transform in every world")       \
  X("transform.create", transform_create, SCN_CMD_MUTATES | SCN_TRANSFORM_OP, write,               \
    max_transforms, SCN_F(world), SCN_F(entity) | SCN_F(parent) | SCN_F(name) | SCN_F_SPEC,        \
    "give an entity (new when absent) a transform")                                                \
  X("transform.destroy", transform_destroy, SCN_CMD_MUTATES | SCN_TRANSFORM_OP, write,             \
    max_transforms, SCN_F(world) | SCN_F(entity), SCN_F(recursive),                                \
    "remove a transform (children become roots, or recursive)")                                    \
  X("transform.link", transform_link, SCN_CMD_MUTATES | SCN_TRANSFORM_OP, write, max_transforms,   \
    SCN_F(world) | SCN_F(entity) | SCN_F(parent), SCN_F(keep),                                     \
    "put a transform under a parent (keep local or world)")                                        \
  X("transform.unlink", transform_unlink, SCN_CMD_MUTATES | SCN_TRANSFORM_OP, write,               \
    max_transforms, SCN_F(world) | SCN_F(entity), SCN_F(keep),                                     \
    "make a transform a root (keep local or world)")                                               \
  X("transform.set_local", transform_set_local, SCN_CMD_MUTATES | SCN_TRANSFORM_OP, write,         \
    max_transforms, SCN_F(world) | SCN_F(entity), SCN_F_SPEC | SCN_F(partial),                     \
    "set the local transform (partial: only the parts given)")                                     \
  X("transform.set_world", transform_set_world, SCN_CMD_MUTATES | SCN_TRANSFORM_OP, write,         \
    max_transforms, SCN_F(world) | SCN_F(entity), SCN_F_SPEC | SCN_F(partial),                     \
    "set the world transform (partial: only the parts given)")                                     \
  X("transform.get", transform_get, SCN_FOLLOWER_READ, read, max_transforms,                       \
    SCN_F(world) | SCN_F(entity), SCN_F(trs) | SCN_F(tick),                                        \
    "read parent, name, local and world matrices (trs: and their parts; tick: as they were)")      \
  X("transform.children", transform_children, SCN_FOLLOWER_READ, read, max_transforms,             \
    SCN_F(world) | SCN_F(entity), 0, "list children in order")                                     \
  X("transform.rename", transform_rename, SCN_CMD_MUTATES | SCN_TRANSFORM_OP, write,               \
    max_transforms, SCN_F(world) | SCN_F(entity) | SCN_F(name), 0,                                 \
    "rename a transform (null clears the name)")                                                   \
  X("transform.find", transform_find, SCN_FOLLOWER_READ, read, max_transforms,                     \
    SCN_F(world) | SCN_F(path), 0, "find a transform by a path of names from a root")              \
  X("transform.relative", transform_relative, SCN_FOLLOWER_READ, read, max_transforms,             \
    SCN_F(world) | SCN_F(entity) | SCN_F(to), SCN_F(tick),                                         \
    "inverse(world(to)) * world(entity) (tick: as they were)")                                     \
  X("batch", batch, SCN_CMD_MUTATES | SCN_CMD_WORLD, write, max_transforms,                        \
    SCN_F(world) | SCN_F(ops), 0, "apply transform.* ops atomically, in order")                    \
  X("subscribe", subscribe, SCN_CMD_WORLD | SCN_CMD_FOLLOWER, read, none, SCN_F(world),            \
    SCN_F(root) | SCN_F(hz) | SCN_F(near) | SCN_F(packed),                                         \
    "stream a world's matrices (full, deltas; near: only what lies near a point or an entity; "    \
    "packed: quantized)")                                                                          \
  X("subscribe.update", subscribe_update, 0, read, none, SCN_F(sub), SCN_F(near) | SCN_F(packed),  \
    "change a subscription's region (near, or null for none) or packed grid, no full frame")       \
  X("unsubscribe", unsubscribe, 0, read, none, SCN_F(sub), 0, "end a subscription")                \
  X("info", info, SCN_CMD_READ, read, none, 0, 0, "daemon figures: version, uptime, counts")       \
  X("save", save, 0, admin, none, 0, 0, "write a snapshot now (needs --data)")                     \
  X("world.move", world_move, SCN_CMD_WORLD, admin, none, SCN_F(world) | SCN_F(to), 0,             \
    "move a world's group to another node of the cluster (answers its node and addr)")             \
  X("cluster.nodes", cluster_nodes, SCN_CMD_READ, read, none, 0, 0,                                \
    "the cluster's live nodes with their load")                                                    \
  X("replicate", replicate, 0, cluster, none, SCN_F(group) | SCN_F(epoch) | SCN_F(from),           \
    SCN_F(node),                                                                                   \
    "cluster (--replicas): a follower's stream of a group's records from seq from, on its owner")  \
  X("world.promote", world_promote, 0, admin, none, SCN_F(world) | SCN_F(node), 0,                 \
    "cluster (--replicas): make follower node the owner of a world's group that has no live "      \
    "owner, from its copy (answers node, addr, lag_ticks)")

/* Each command's index in the table. */
typedef enum scn_command_id {
#define SCN_CMD_ID(name_, ident, flags_, right_, limit_, req_, opt_, help_) SCN_C_##ident,
  SCN_COMMANDS(SCN_CMD_ID)
#undef SCN_CMD_ID
      SCN_COMMAND_COUNT
} scn_command_id;

typedef struct scn_command_info {
  const char *name;
  scn_command_id id;
  unsigned flags;
  unsigned right; /* SCN_RIGHT bit */
  scn_limit_kind limit;
  scn_fieldset required;
  scn_fieldset optional;
  const char *help;
} scn_command_info;

/* The fields a request for c may carry: those of its table entry, and "cmd" and "id", which
 * every request takes. Any other member is refused (request.h, scn_fields_check_taken). */
static inline scn_fieldset scn_command_takes(const scn_command_info *c) {
  return c->required | c->optional | SCN_F(cmd) | SCN_F(id);
}

extern const scn_command_info scn_commands[];
extern const unsigned scn_command_count;
/* The entry for a name, or NULL. */
const scn_command_info *scn_command_find(const char *name);

#endif

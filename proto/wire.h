/* The wire vocabulary of protocol 1: error codes and the command table. Server and clients
 * include this one list, so a command's name, flags and help can never drift apart. */
#ifndef SCN_WIRE_H
#define SCN_WIRE_H

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
  X(INTERNAL)

typedef enum scn_wire_code {
#define SCN_WIRE_ENUM(name) SCN_W_##name,
  SCN_WIRE_ERRORS(SCN_WIRE_ENUM)
#undef SCN_WIRE_ENUM
} scn_wire_code;

const char *scn_wire_code_name(scn_wire_code code);

/* Command flags. */
#define SCN_CMD_MUTATES 0x1u  /* changes state: journaled */
#define SCN_CMD_OPEN 0x2u     /* allowed before authentication */
#define SCN_CMD_IN_BATCH 0x4u /* may appear in a batch's ops */
#define SCN_CMD_READ 0x8u     /* changes nothing at all (not even connection state) */

/* X(name, ident, flags, required fields, optional fields, help) */
#define SCN_COMMANDS(X)                                                                            \
  X("ping", ping, SCN_CMD_OPEN | SCN_CMD_READ, "", "", "check that the daemon answers")            \
  X("hello", hello, SCN_CMD_OPEN, "", "token", "identify (and authenticate) the connection")       \
  X("world.create", world_create, SCN_CMD_MUTATES, "world", "", "create a named world")            \
  X("world.destroy", world_destroy, SCN_CMD_MUTATES, "world", "",                                  \
    "destroy a world and every transform in it")                                                   \
  X("world.list", world_list, SCN_CMD_READ, "", "", "list worlds with their transform counts")     \
  X("entity.create", entity_create, SCN_CMD_MUTATES, "", "count",                                  \
    "create entities (count, default 1, at most 100000)")                                          \
  X("entity.destroy", entity_destroy, SCN_CMD_MUTATES, "entity", "",                               \
    "destroy an entity and its transform in every world")                                          \
  X("transform.create", transform_create, SCN_CMD_MUTATES | SCN_CMD_IN_BATCH, "world",             \
    "entity,parent,name,matrix,t,r,s", "give an entity (new when absent) a transform")             \
  X("transform.destroy", transform_destroy, SCN_CMD_MUTATES | SCN_CMD_IN_BATCH, "world,entity",    \
    "recursive", "remove a transform (children become roots, or recursive)")                       \
  X("transform.link", transform_link, SCN_CMD_MUTATES | SCN_CMD_IN_BATCH, "world,entity,parent",   \
    "keep", "put a transform under a parent (keep local or world)")                                \
  X("transform.unlink", transform_unlink, SCN_CMD_MUTATES | SCN_CMD_IN_BATCH, "world,entity",      \
    "keep", "make a transform a root (keep local or world)")                                       \
  X("transform.set_local", transform_set_local, SCN_CMD_MUTATES | SCN_CMD_IN_BATCH,                \
    "world,entity", "matrix,t,r,s", "set the local transform")                                     \
  X("transform.set_world", transform_set_world, SCN_CMD_MUTATES | SCN_CMD_IN_BATCH,                \
    "world,entity", "matrix,t,r,s", "set the world transform")                                     \
  X("transform.get", transform_get, SCN_CMD_IN_BATCH | SCN_CMD_READ, "world,entity", "",           \
    "read parent, name, local and world matrices")                                                 \
  X("transform.children", transform_children, SCN_CMD_IN_BATCH | SCN_CMD_READ, "world,entity", "", \
    "list children in order")                                                                      \
  X("transform.rename", transform_rename, SCN_CMD_MUTATES | SCN_CMD_IN_BATCH, "world,entity,name", \
    "", "rename a transform (null clears the name)")                                               \
  X("transform.find", transform_find, SCN_CMD_IN_BATCH | SCN_CMD_READ, "world,path", "",           \
    "find a transform by a path of names from a root")                                             \
  X("transform.relative", transform_relative, SCN_CMD_IN_BATCH | SCN_CMD_READ, "world,entity,to",  \
    "", "inverse(world(to)) * world(entity)")                                                      \
  X("batch", batch, SCN_CMD_MUTATES, "world,ops", "",                                              \
    "apply transform.* ops atomically, in order")                                                  \
  X("subscribe", subscribe, 0, "world", "root,hz", "stream a world's matrices (full, deltas)")     \
  X("unsubscribe", unsubscribe, 0, "sub", "", "end a subscription")                                \
  X("info", info, SCN_CMD_READ, "", "", "daemon figures: version, uptime, counts")                 \
  X("save", save, 0, "", "", "write a snapshot now (needs --data)")

typedef struct scn_command_info {
  const char *name;
  unsigned flags;
  const char *required; /* comma-separated field names */
  const char *optional;
  const char *help;
} scn_command_info;

extern const scn_command_info scn_commands[];
extern const unsigned scn_command_count;
/* The entry for a name, or NULL. */
const scn_command_info *scn_command_find(const char *name);

#endif

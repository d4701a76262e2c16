/* Streaming world matrices: the subscriptions, and at each tick the frames they are due. A
 * frame body is encoded once per (world, scope, since, full) (frame.c) and shared by reference
 * among the subscriptions that need exactly it; only the small header naming the subscription
 * is written per subscriber. Frames of many transforms are written in slices, one per loop
 * turn, so a big world never holds up other connections for long. */
#ifndef SCN_STREAM_H
#define SCN_STREAM_H

#include "server.h"
#include "stream/interest.h"
#include "stream/packed_frames.h"

typedef struct scn_stream scn_stream;

/* The stream module of srv: registers its hooks (tick, connection closed and drained, stats). */
scn_stream *scn_stream_open(scn_server *srv);
/* Ends every subscription and frees the module once the loop has closed its handle (at exit;
 * frames still being written are dropped). */
void scn_stream_close(scn_stream *st);

/* A new subscription of connection c to world w (root: SCN_ENTITY_NONE, or the root of a
 * subtree that has a transform there), at most hz frames per second, of what lies near (NULL:
 * everything; a center entity must have a transform in w), in packed frames on that grid
 * (NULL: in the connection's form). Its id in *id; 0, or -1 when out of memory. */
int scn_stream_subscribe(scn_stream *st, scn_conn *c, scn_world *w, scn_entity root, double hz,
                         const scn_near_spec *near, const scn_pack_grid *packed, uint64_t *id);
/* Changes subscription id of connection c without a full frame. With set_near: gives it the
 * region near, or removes its region (NULL); the next frame carries what came into its scope
 * and what left. With grid: a packed subscription's new step and origin, from its next frame
 * on. SCN_OK, SCN_NOT_FOUND (c has no such subscription), SCN_INVALID (grid for one that is not
 * packed; nothing changed) or SCN_NOMEM. */
int scn_stream_update(scn_stream *st, scn_conn *c, uint64_t id, bool set_near,
                      const scn_near_spec *near, const scn_pack_grid *grid);
/* The world subscription id of connection c streams, or NULL when c has none by that id; in
 * *packed (when not NULL) whether it takes packed frames. */
scn_world *scn_stream_world_of(scn_stream *st, scn_conn *c, uint64_t id, bool *packed);
/* Ends subscription id of connection c; false when c has none by that id. */
bool scn_stream_unsubscribe(scn_stream *st, scn_conn *c, uint64_t id);
/* The world is about to be destroyed: its subscribers get world_destroyed, and their
 * subscriptions end. */
void scn_stream_world_destroyed(scn_stream *st, scn_world *w);
/* Ends every subscription that keep refuses now (the access list changed): its subscriber gets
 * {"event":"unsubscribed","sub":S,"reason":"unauthorized"}. */
void scn_stream_revoke(scn_stream *st, bool (*keep)(void *ud, scn_conn *c, const char *world),
                       void *ud);

/* The world's group went to another node (node at addr, both empty when it is not known): its
 * subscribers get moved, and their subscriptions end. */
void scn_stream_world_moved(scn_stream *st, scn_world *w, const char *node, const char *addr);
uint64_t scn_stream_count(const scn_stream *st);

#endif

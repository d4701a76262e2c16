/* What the clients suites share: their daemon; scenectl and other programs run with its port in
 * their environment, the library's connections and calls with assertions, worlds made, frames
 * and JSON lines read back. */
#ifndef T_CLIENT_FIXTURES_H
#define T_CLIENT_FIXTURES_H

#include "daemon_fixtures.h"
#include "scn_client.h"

#include <stdbool.h>
#include <stdint.h>

/* The daemon each clients suite's tests share (default settings, 60 ticks per second): the
 * suite's setup starts it, writes port_env and ignores SIGPIPE (a child may exit before reading
 * its stdin); its cleanup stops it (it must exit 0) and puts SIGPIPE back. */
extern t_daemon clients_daemon;
int clients_suite_init(void);
int clients_suite_clean(void);

/* "SCENED_PORT=N" for the daemon of the running suite (its setup writes it). */
extern char port_env[32];

#define WAIT_MS 5000

/* Lines of s (each ended by '\n'), parsed as JSON, in an array (NULL items become JSON null). */
cJSON *json_lines(const char *s, int *count, bool *all_terminated);

const cJSON *field(const cJSON *j, const char *name);

/* True when m is the 16 numbers of a translation by (x, y, z), exactly. */
bool is_translation(const cJSON *m, double x, double y, double z);

scn_cli *open_cli(int port, const char *token, int timeout_ms);

/* A request written printf-style; the response when it is ok, else NULL (reported). */
cJSON *call_ok(scn_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same, for requests whose result is not needed; true when ok. */
bool call_fine(scn_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A fresh world name, unique in this run. */
void world_name(char *out, size_t n);

/* Creates a world and one root transform in it at (x, y, z); returns the entity, or -1. */
double make_world(scn_cli *c, char *world, size_t n, double x, double y, double z);

/* A port on 127.0.0.1 with nothing listening: bound, read, closed. */
int dead_port(void);

/* Starts bin with args (t_proc_start) and this environment minus the SCENED_* client
 * variables plus set (NULL-terminated "K=V"). */
bool proc_start(t_proc *p, const char *bin, const char *const *args, const char *const *set,
                const char *in, size_t in_len);

const char *ctl_bin(void);

/* Runs scenectl with args (NULL-terminated), the environment set (NULL: SCENED_HOST and
 * SCENED_PORT of the suite's daemon) and stdin in; its exit code. */
int ctl_run(t_proc *p, const char *const *set, const char *in, size_t in_len,
            const char *const *args);

/* A frame event with its header checked; NULL when ev is not one. */
bool is_frame(const cJSON *ev, double sub, const char *world, bool full);

#endif

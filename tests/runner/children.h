/* The processes a suite starts (daemons, etcd, servers of the tests' own), remembered so that a
 * test that runs out of time, or a suite that ends half-way, takes them with it. */
#ifndef T_CHILDREN_H
#define T_CHILDREN_H

#include <sys/types.h>

/* fork() for every process the tests start: the child is killed when the suite's process dies
 * (PR_SET_PDEATHSIG), and its pid is remembered until t_child_reaped. */
pid_t t_fork(void);
void t_child_reaped(pid_t pid);
/* Remembers a process a child started (a script's daemons), so that t_kill_children takes it
 * too; t_child_reaped forgets it. */
void t_child_adopt(pid_t pid);
/* Waits up to timeout_ms for the child to exit and reaps it: the status as from waitpid, or -1
 * when it had to be killed (or was not a child). */
int t_child_wait(pid_t pid, int timeout_ms);
/* SIGKILL to every child still remembered; async-signal-safe. */
void t_kill_children(void);

#endif

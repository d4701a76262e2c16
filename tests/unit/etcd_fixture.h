/* A real etcd for the cluster suites: started on loopback with ephemeral ports, a temporary
 * data directory and fast elections (heartbeat 10 ms, election 100 ms, so leases of 1-2 s
 * work), waited for until it answers, and stopped by its pid. */
#ifndef SCN_TEST_ETCD_FIXTURE_H
#define SCN_TEST_ETCD_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct etcd {
  pid_t pid;
  int port, peer;
  char dir[64];
  char url[64];
} etcd;

/* A loopback port nothing listens on now, below the kernel's ephemeral range; 0 when none. */
int free_port(void);
bool etcd_healthy(const etcd *e);
/* Starts etcd (in e->dir when it is set: a restart keeps its data and ports) and waits until
 * it answers (15 s at most). */
bool etcd_start(etcd *e);
/* Sends sig and reaps it (killed after 10 s). */
void etcd_stop(etcd *e, int sig);
/* Removes a directory a suite made under /tmp/scened-*; anything else is left alone. */
void remove_tree(const char *dir);

#endif

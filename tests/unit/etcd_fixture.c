/* A real etcd for the cluster suites: loopback ports, a temporary directory, fast elections. */
#include "etcd_fixture.h"

#include "harness.h"

#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A port nothing listens on now, below the kernel's ephemeral range: etcd binds it later, and
 * a port the kernel hands out meanwhile (to a daemon's listener with port 0, or to a
 * connection's local end) could otherwise be the same one. */
int free_port(void) {
  int low = 32768;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d", &low) != 1)
      low = 32768;
    fclose(f);
  }
  if (low <= 2048)
    low = 32768;
  static unsigned seed;
  if (!seed)
    seed = (unsigned)getpid() ^ (unsigned)scn_now_ms();
  for (int tries = 0; tries < 1000; tries++) {
    int port = 1024 + (int)((unsigned)rand_r(&seed) % (unsigned)(low - 1024));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
      close(fd);
    if (ok)
      return port;
  }
  return 0;
}

bool etcd_healthy(const etcd *e) {
  char *resp = NULL;
  int status = scn_http_get(e->port, "/health", &resp);
  bool ok = status == 200 && strstr(resp, "true");
  free(resp);
  return ok;
}

/* Starts etcd (in e->dir when it is set: a restart keeps its data and ports) and waits until
 * it answers. */
bool etcd_start(etcd *e) {
  if (!e->dir[0]) {
    if (!scn_temp_dir(e->dir, sizeof e->dir, "etcd"))
      return false;
    e->port = free_port();
    e->peer = free_port();
    snprintf(e->url, sizeof e->url, "http://127.0.0.1:%d", e->port);
  }
  char data[128], peer[64], cluster[96], log[128];
  snprintf(data, sizeof data, "%s/data", e->dir);
  snprintf(peer, sizeof peer, "http://127.0.0.1:%d", e->peer);
  snprintf(cluster, sizeof cluster, "t=%s", peer);
  snprintf(log, sizeof log, "%s/etcd.log", e->dir);
  pid_t pid = scn_fork();
  if (pid < 0)
    return false;
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execlp("etcd", "etcd", "--name", "t", "--data-dir", data, "--listen-client-urls", e->url,
           "--advertise-client-urls", e->url, "--listen-peer-urls", peer,
           "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster,
           "--heartbeat-interval", "10", "--election-timeout", "100", (char *)NULL);
    _exit(127);
  }
  e->pid = pid;
  long deadline = scn_now_ms() + 15000;
  while (scn_now_ms() < deadline) {
    if (etcd_healthy(e))
      return true;
    scn_sleep_ms(20);
  }
  fprintf(stderr, "\n  etcd did not start; see %s\n", log);
  return false;
}

void etcd_stop(etcd *e, int sig) {
  if (e->pid <= 0)
    return;
  kill(e->pid, sig);
  if (scn_child_wait(e->pid, 10000) < 0)
    fprintf(stderr, "\n  etcd had to be killed\n");
  e->pid = 0;
}

/* Removes a directory the suite made; anything else (or an empty name: none was made) is left. */
void remove_tree(const char *dir) {
  if (!dir[0] || strncmp(dir, "/tmp/scened-", 12) != 0)
    return;
  scn_remove_tree(dir);
}

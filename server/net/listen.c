#include "net/listen.h"

#include "ops/log.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* An address as sa_name writes it. */
#define SA_NAME_MAX (NI_MAXHOST + NI_MAXSERV + 4)

static socklen_t sa_len(const struct sockaddr_storage *sa) {
  return sa->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* "127.0.0.1:7878" or "[::1]:7878" (with an IPv6 zone when there is one). */
static void sa_name(const struct sockaddr_storage *sa, char *out, size_t n) {
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo((const struct sockaddr *)sa, sa_len(sa), host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    snprintf(out, n, "?");
    return;
  }
  bool v6 = sa->ss_family == AF_INET6;
  snprintf(out, n, "%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* A socket bound to sa and listening, or a negative errno. The socket is made here rather than
 * by uv_tcp_bind so that an address that fails leaves no handle to close before the next. */
static int bind_one(const struct sockaddr_storage *sa, int backlog) {
  int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  /* "::" takes IPv4 too, as uv_tcp_bind leaves it */
  if (sa->ss_family == AF_INET6)
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (bind(fd, (const struct sockaddr *)sa, sa_len(sa)) != 0 || listen(fd, backlog) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

/* "setting on HOST:PORT" as configured, for errors: "listen on localhost:7878". */
static void configured(const scn_addr *addr, const char *setting, char *out, size_t n) {
  bool named = strcmp(setting, "listen") != 0, v6 = strchr(addr->host, ':') != NULL;
  snprintf(out, n, "%s%s on %s%s%s:%d", named ? "for " : "", named ? setting : "", v6 ? "[" : "",
           addr->host, v6 ? "]" : "", addr->port);
}

int scn_listen(uv_loop_t *loop, uv_tcp_t *handle, const scn_addr *addr, int backlog,
               uv_connection_cb on_connection, const char *setting, const char *announce,
               const char *extra) {
  /* Each address the host resolved to, in order, until one binds (localhost may be ::1 where
   * IPv6 is off); when none does, each one's refusal is told. */
  char why[512] = "no address", what[160];
  int fd = -1;
  for (int i = 0; i < addr->count && fd < 0; i++) {
    fd = bind_one(&addr->resolved[i], backlog);
    if (fd >= 0)
      break;
    size_t used = i == 0 ? 0 : strlen(why);
    char name[SA_NAME_MAX] = "";
    if (addr->count > 1)
      sa_name(&addr->resolved[i], name, sizeof name);
    snprintf(why + used, sizeof why - used, "%s%s%s%s", i ? "; " : "", name, name[0] ? ": " : "",
             uv_strerror(fd));
  }
  configured(addr, setting, what, sizeof what);
  if (fd < 0) {
    fprintf(stderr, "scened: cannot listen %s: %s\n", what, why);
    return -1;
  }
  uv_tcp_init(loop, handle);
  int rc = uv_tcp_open(handle, fd);
  if (rc != 0)
    close(fd);
  else
    rc = uv_listen((uv_stream_t *)handle, backlog, on_connection);
  if (rc != 0) {
    fprintf(stderr, "scened: cannot listen %s: %s\n", what, uv_strerror(rc));
    return -1;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(handle, (struct sockaddr *)&bound, &len);
  char where[SA_NAME_MAX + 64], name[SA_NAME_MAX];
  sa_name(&bound, name, sizeof name);
  snprintf(where, sizeof where, "%s on %s", announce, name);
  scn_log(SCN_LOG_NOTICE, where, "%s", extra);
  return 0;
}

int scn_listen_port(uv_tcp_t *handle) {
  struct sockaddr_storage bound;
  int len = sizeof bound;
  if (uv_tcp_getsockname(handle, (struct sockaddr *)&bound, &len) != 0)
    return 0;
  return ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                           : ((struct sockaddr_in *)&bound)->sin_port);
}

#include "net/listen.h"

#include "ops/log.h"

#include <stdio.h>
#include <string.h>

int scn_listen(uv_loop_t *loop, uv_tcp_t *handle, const scn_addr *addr, int backlog,
               uv_connection_cb on_connection, const char *setting, const char *announce,
               const char *extra) {
  struct sockaddr_storage sa;
  int rc = uv_ip4_addr(addr->host, addr->port, (struct sockaddr_in *)&sa);
  if (rc != 0)
    rc = uv_ip6_addr(addr->host, addr->port, (struct sockaddr_in6 *)&sa);
  if (rc != 0) {
    fprintf(stderr, "scened: invalid %s address \"%s\"\n", setting, addr->host);
    return -1;
  }
  uv_tcp_init(loop, handle);
  if ((rc = uv_tcp_bind(handle, (struct sockaddr *)&sa, 0)) != 0 ||
      (rc = uv_listen((uv_stream_t *)handle, backlog, on_connection)) != 0) {
    bool named = strcmp(setting, "listen") != 0;
    fprintf(stderr, "scened: cannot listen%s%s on %s:%d: %s\n", named ? " for " : "",
            named ? setting : "", addr->host, addr->port, uv_strerror(rc));
    return -1;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(handle, (struct sockaddr *)&bound, &len);
  bool v6 = bound.ss_family == AF_INET6;
  int port = ntohs(v6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                      : ((struct sockaddr_in *)&bound)->sin_port);
  char where[128];
  snprintf(where, sizeof where, "%s on %s%s%s:%d", announce, v6 ? "[" : "", addr->host,
           v6 ? "]" : "", port);
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

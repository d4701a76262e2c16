/* The libuv shell: listen, accept, read into the framer, queue replies and write them once
 * per read batch, close. */
#include "store/persist.h"
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One read buffer for the whole loop: reads are handled to completion before the next. */
#define READ_CHUNK (64 * 1024)
static char read_buffer[READ_CHUNK];

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h, (void)suggested;
  *buf = uv_buf_init(read_buffer, READ_CHUNK);
}

static void on_closed(uv_handle_t *h) {
  scn_conn *c = h->data;
  scn_server *srv = c->srv;
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  srv->nconns--;
  scn_framer_free(&c->framer);
  scn_outq_free(&c->out);
  scn_outq_free(&c->inflight);
  scn_buf_free(&c->held);
  free(c->iov);
  free(c);
}

void scn_conn_close(scn_conn *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  scn_log(SCN_LOG_DEBUG, "connection closed", "conn=%llu peer=%s transport=%s",
          (unsigned long long)c->id, c->peer, c->tp->name);
  if (c->tp->closing)
    c->tp->closing(c);
  scn_stream_conn_closed(c->srv, c);
  scn_persist_conn_closed(c->srv, c);
  if (c->flush_queued)
    for (scn_conn **p = &c->srv->flush_list; *p; p = &(*p)->flush_next)
      if (*p == c) {
        *p = c->flush_next;
        c->flush_queued = false;
        break;
      }
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

void scn_conn_written(scn_conn *c, int status) {
  c->writing = false;
  c->srv->counters.bytes_out += scn_outq_size(&c->inflight);
  scn_outq_clear(&c->inflight);
  if (status < 0) {
    scn_conn_close(c);
    return;
  }
  /* A buffer that grew for one big reply is given back once it has drained. */
  if (c->inflight.bytes.cap > 4 * 1024 * 1024)
    scn_buf_free(&c->inflight.bytes);
  scn_conn_flush(c);
  scn_conn_update_reading(c);
  if (!uv_is_closing((uv_handle_t *)&c->tcp) && c->subs &&
      scn_conn_queued(c) <= c->srv->cfg.output_limit / 2)
    scn_stream_conn_drained(c->srv, c);
}

static void on_written(uv_write_t *req, int status) { scn_conn_written(req->data, status); }

static void tcp_flush(scn_conn *c) {
  if (c->writing || uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  if (scn_outq_size(&c->out) == 0) {
    if (c->closing)
      scn_conn_close(c);
    return;
  }
  scn_outq tmp = c->inflight;
  c->inflight = c->out;
  c->out = tmp;
  size_t n = scn_outq_iov(&c->inflight, &c->iov, &c->iov_cap);
  if (n == 0) {
    scn_conn_close(c);
    return;
  }
  /* Most batches fit in the socket buffer. Written at once they need no write request, and
   * libuv then does not re-arm the descriptor afterwards (one epoll_ctl per write saved). */
  int sent = uv_try_write((uv_stream_t *)&c->tcp, c->iov, (unsigned)n);
  if (sent == UV_EAGAIN)
    sent = 0;
  if (sent < 0) {
    scn_conn_written(c, sent);
    return;
  }
  if ((size_t)sent == scn_outq_size(&c->inflight)) {
    scn_conn_written(c, 0);
    return;
  }
  uv_buf_t *rest = c->iov;
  for (size_t skip = (size_t)sent; skip; rest++, n--) {
    if (skip < rest->len) {
      rest->base += skip;
      rest->len -= skip;
      break;
    }
    skip -= rest->len;
  }
  c->write_req.data = c;
  if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, rest, (unsigned)n, on_written) < 0) {
    scn_conn_close(c);
    return;
  }
  c->writing = true;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static int tcp_set_reading(scn_conn *c, bool on) {
  if (on)
    return uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  return uv_read_stop((uv_stream_t *)&c->tcp);
}

/* Replies are never dropped. Over the output limit requests are answered LIMIT (dispatch);
 * at twice the limit the connection is not read from until its output drains, which bounds
 * what a client that never reads can make us queue. */
void scn_conn_update_reading(scn_conn *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  bool want = !c->closing && !c->srv->stopping && !c->blocked &&
              scn_conn_queued(c) < 2 * c->srv->cfg.output_limit;
  if (want && !c->reading) {
    if (c->tp->set_reading(c, true) == 0)
      c->reading = true;
  } else if (!want && c->reading) {
    c->tp->set_reading(c, false);
    c->reading = false;
    if (!c->closing && !c->srv->stopping && !c->blocked) {
      scn_log(SCN_LOG_WARN, "twice the output limit queued: not reading until replies drain",
              "conn=%llu peer=%s queued=%zu", (unsigned long long)c->id, c->peer,
              scn_conn_queued(c));
    }
  }
}

static bool on_line(void *ud, const char *line, size_t len) {
  scn_conn *c = ud;
  scn_dispatch_line(c, line, len);
  return !uv_is_closing((uv_handle_t *)&c->tcp) && !c->blocked;
}

/* Runs the lines in data; what a deferred reply holds back is kept in c->held. False when
 * the connection is going away. */
static bool feed(scn_conn *c, const char *data, size_t n) {
  size_t used;
  if (scn_framer_feed_at(&c->framer, data, n, on_line, c, &used))
    return true;
  if (uv_is_closing((uv_handle_t *)&c->tcp))
    return false;
  if (!c->blocked) {
    scn_log(SCN_LOG_WARN, "out of memory reading a request", "conn=%llu",
            (unsigned long long)c->id);
    scn_conn_close(c);
    return false;
  }
  if (n > used)
    scn_buf_add(&c->held, data + used, n - used);
  return true;
}

static void tcp_resume(scn_conn *c) {
  scn_buf held = c->held;
  c->held = (scn_buf){0};
  if (held.len)
    feed(c, held.data, held.len);
  scn_buf_free(&held);
}

void scn_conn_resume(scn_conn *c) {
  c->blocked = false;
  c->srv->command_clock = uv_hrtime();
  c->tp->resume(c);
  if (uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  scn_conn_schedule_flush(c);
  scn_conn_update_reading(c);
}

void scn_conn_schedule_flush(scn_conn *c) {
  if (c->flush_queued || uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  c->flush_queued = true;
  c->flush_next = c->srv->flush_list;
  c->srv->flush_list = c;
}

/* After the I/O of a loop turn: the journal records of every command run in it are written
 * (and fsynced under "always") before any of their replies leaves. */
static void on_commit_check(uv_check_t *h) {
  scn_server *srv = h->data;
  if (!srv->flush_list)
    return;
  scn_persist_commit(srv);
  while (srv->flush_list) {
    scn_conn *c = srv->flush_list;
    srv->flush_list = c->flush_next;
    c->flush_queued = false;
    scn_conn_flush(c);
    scn_conn_update_reading(c);
  }
}

void scn_net_init(scn_server *srv) {
  uv_check_init(srv->loop, &srv->commit_check);
  srv->commit_check.data = srv;
  uv_check_start(&srv->commit_check, on_commit_check);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  scn_conn *c = s->data;
  if (n == 0)
    return;
  if (n < 0) {
    if (n != UV_EOF)
      scn_log(SCN_LOG_DEBUG, "read error", "conn=%llu error=%s", (unsigned long long)c->id,
              uv_err_name((int)n));
    else if (scn_framer_pending(&c->framer))
      scn_log(SCN_LOG_DEBUG, "client left mid-line", "conn=%llu", (unsigned long long)c->id);
    /* Half-close: answer what was read, then close. */
    c->closing = true;
    if (c->reading) {
      uv_read_stop(s);
      c->reading = false;
    }
    if (n == UV_EOF)
      scn_conn_flush(c);
    else
      scn_conn_close(c);
    return;
  }
  c->srv->counters.bytes_in += (uint64_t)n;
  c->srv->command_clock = uv_hrtime();
  if (!feed(c, buf->base, (size_t)n))
    return;
  scn_conn_schedule_flush(c);
  scn_conn_update_reading(c);
}

static void describe_peer(scn_conn *c) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  strcpy(c->peer, "?");
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0)
    return;
  char host[48] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    uv_ip4_name(a, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    uv_ip6_name(a, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
}

static const scn_transport tcp_transport = {
    .name = "tcp",
    .flush = tcp_flush,
    .set_reading = tcp_set_reading,
    .resume = tcp_resume,
    .closing = NULL,
};

scn_conn *scn_conn_new(scn_server *srv, const scn_transport *tp) {
  scn_conn *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->srv = srv;
  c->tp = tp;
  uv_tcp_init(srv->loop, &c->tcp);
  c->tcp.data = c;
  c->next = srv->conns;
  if (srv->conns)
    srv->conns->prev = c;
  srv->conns = c;
  srv->nconns++;
  return c;
}

static void on_connection(uv_stream_t *listener, int status) {
  scn_server *srv = listener->data;
  if (status < 0)
    return;
  scn_conn *c = scn_conn_new(srv, &tcp_transport);
  if (!c)
    return;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
    scn_conn_close(c);
    return;
  }
  scn_framer_init(&c->framer, srv->cfg.max_line);
  if (scn_conn_admit(c))
    scn_conn_update_reading(c);
}

bool scn_conn_admit(scn_conn *c) {
  scn_server *srv = c->srv;
  c->id = ++srv->next_conn_id;
  c->authed = srv->cfg.auth_token[0] == '\0';
  describe_peer(c);
  uv_tcp_nodelay(&c->tcp, 1);
  if (srv->nconns > srv->cfg.max_clients || srv->stopping) {
    srv->counters.rejected_clients++;
    srv->counters.limit_hits[SCN_LIMIT_max_clients]++;
    scn_log(SCN_LOG_WARN, "connection refused: too many clients", "peer=%s max_clients=%llu",
            c->peer, (unsigned long long)srv->cfg.max_clients);
    scn_wire_error err;
    scn_fail(&err, SCN_W_LIMIT,
             srv->stopping ? "the daemon is shutting down" : "too many clients (max-clients %llu)",
             (unsigned long long)srv->cfg.max_clients);
    scn_reply_error(&c->out.bytes, NULL, &err);
    c->rejected = c->closing = true;
    scn_conn_flush(c);
    return false;
  }
  srv->counters.connections_total++;
  scn_log(SCN_LOG_DEBUG, "connection opened", "conn=%llu peer=%s transport=%s",
          (unsigned long long)c->id, c->peer, c->tp->name);
  return true;
}

int scn_net_listen(scn_server *srv) {
  struct sockaddr_storage addr;
  int rc = uv_ip4_addr(srv->cfg.listen.host, srv->cfg.listen.port, (struct sockaddr_in *)&addr);
  if (rc != 0)
    rc = uv_ip6_addr(srv->cfg.listen.host, srv->cfg.listen.port, (struct sockaddr_in6 *)&addr);
  if (rc != 0) {
    fprintf(stderr, "scened: invalid listen address \"%s\"\n", srv->cfg.listen.host);
    return -1;
  }
  uv_tcp_init(srv->loop, &srv->listener);
  srv->listener.data = srv;
  if ((rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&addr, 0)) != 0 ||
      (rc = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection)) != 0) {
    fprintf(stderr, "scened: cannot listen on %s:%d: %s\n", srv->cfg.listen.host,
            srv->cfg.listen.port, uv_strerror(rc));
    return -1;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &len);
  int port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                               : ((struct sockaddr_in *)&bound)->sin_port);
  bool v6 = bound.ss_family == AF_INET6;
  char where[128];
  snprintf(where, sizeof where, "listening on %s%s%s:%d", v6 ? "[" : "", srv->cfg.listen.host,
           v6 ? "]" : "", port);
  scn_log(SCN_LOG_NOTICE, where, "version=%s protocol=%d", SCN_VERSION, SCN_PROTOCOL);
  return 0;
}

/* ---- shutdown ---------------------------------------------------------------------------- */

static uint64_t shutdown_began;

static void stop_when_drained(scn_server *srv) {
  /* A save in progress is answered first (and the requests held behind it run): the writer
   * finishes on its own, whatever the clients do. */
  if (scn_persist_busy())
    return;
  if (uv_now(srv->loop) - shutdown_began > SCN_DRAIN_LIMIT_MS) {
    scn_log(SCN_LOG_WARN, "shutdown: gave up waiting for slow clients", "limit_ms=%d",
            SCN_DRAIN_LIMIT_MS);
    uv_stop(srv->loop);
    return;
  }
  for (scn_conn *c = srv->conns; c; c = c->next)
    if (scn_conn_queued(c) > 0 && !uv_is_closing((uv_handle_t *)&c->tcp))
      return;
  uv_stop(srv->loop);
}

static void on_shutdown_poll(uv_timer_t *t) { stop_when_drained(t->data); }

void scn_server_begin_shutdown(scn_server *srv) {
  if (srv->stopping)
    return;
  srv->stopping = true;
  shutdown_began = uv_now(srv->loop);
  uv_timer_stop(&srv->tick_timer);
  scn_log(SCN_LOG_INFO, "shutting down", "connections=%llu", (unsigned long long)srv->nconns);
  uv_close((uv_handle_t *)&srv->listener, NULL);
  scn_http_close(srv, false);
  /* Everything already read has been answered (lines are handled as they arrive); stop
   * reading and give the replies a bounded time to drain. */
  for (scn_conn *c = srv->conns; c; c = c->next) {
    if (c->reading) {
      c->tp->set_reading(c, false);
      c->reading = false;
    }
    scn_conn_flush(c);
  }
  srv->shutdown_timer.data = srv;
  uv_timer_start(&srv->shutdown_timer, on_shutdown_poll, 0, 10);
}

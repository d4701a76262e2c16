/* The TCP transport of the protocol port: accept, read into the framer (through the TLS session
 * with --tls-cert), hand each line to the server's line runner, write the queued output once
 * per read batch. */
#include "net/tcp.h"

#include "net/conn.h"
#include "net/listen.h"
#include "net/tls.h"
#include "ops/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_CHUNK (64 * 1024)

struct scn_tcp_state {
  uv_tcp_t listener;
  bool listening;
  scn_transport transport; /* every TCP connection's (kept here: no module state in globals) */
  /* One read buffer for every connection: reads are handled to completion before the next. */
  char read_buffer[READ_CHUNK];
};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  scn_conn *c = h->data;
  *buf = uv_buf_init(c->srv->tcp->read_buffer, READ_CHUNK);
}

static void tcp_flush(scn_conn *c) {
  if (c->writing || scn_conn_gone(c))
    return;
  if (scn_outq_size(&c->out) == 0 && !scn_conn_tls_pending(c)) {
    if (c->closing)
      scn_conn_close(c);
    return;
  }
  scn_outq tmp = c->inflight;
  c->inflight = c->out;
  c->out = tmp;
  scn_conn_send(c);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static int tcp_set_reading(scn_conn *c, bool on) {
  if (on)
    return uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  return uv_read_stop((uv_stream_t *)&c->tcp);
}

static bool on_line(void *ud, const char *line, size_t len) {
  scn_conn *c = ud;
  c->srv->run_line(c, line, len);
  return !scn_conn_gone(c) && !c->blocked;
}

/* Runs the lines in data; what a deferred reply holds back is kept in c->held. False when
 * the connection is going away. */
static bool feed(scn_conn *c, const char *data, size_t n) {
  size_t used;
  if (scn_framer_feed_at(&c->framer, data, n, on_line, c, &used))
    return true;
  if (scn_conn_gone(c))
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

/* Plaintext from the TLS session: what comes while blocked is held as it is. */
static bool feed_plain(scn_conn *c, const char *data, size_t n) {
  if (!c->blocked)
    return feed(c, data, n);
  scn_buf_add(&c->held, data, n);
  return true;
}

static void tcp_resume(scn_conn *c) {
  scn_buf held = c->held;
  c->held = (scn_buf){0};
  if (held.len)
    feed(c, held.data, held.len);
  scn_buf_free(&held);
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
    if (n == UV_EOF && !scn_conn_handshaking(c))
      scn_conn_flush(c);
    else
      scn_conn_close(c);
    return;
  }
  c->srv->counters.bytes_in += (uint64_t)n;
  c->srv->command_clock = uv_hrtime();
  if (!(c->tls ? scn_conn_tls_input(c, buf->base, (size_t)n, feed_plain)
               : feed(c, buf->base, (size_t)n)))
    return;
  scn_conn_schedule_flush(c);
  scn_conn_update_reading(c);
}

static void on_connection(uv_stream_t *l, int status) {
  scn_server *srv = l->data;
  if (status < 0)
    return;
  scn_conn *c = scn_conn_new(srv, &srv->tcp->transport);
  if (!c)
    return;
  if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
    scn_conn_close(c);
    return;
  }
  scn_framer_init(&c->framer, srv->cfg.max_line);
  if (scn_tls_on(srv) && !scn_conn_use_tls(c, NULL)) {
    scn_conn_close(c);
    return;
  }
  /* A refused connection reads too while its TLS handshake runs. */
  scn_conn_admit(c);
  scn_conn_update_reading(c);
}

int scn_tcp_listen(scn_server *srv) {
  scn_tcp_state *tcp = calloc(1, sizeof *tcp);
  if (!tcp) {
    fprintf(stderr, "scened: out of memory\n");
    return -1;
  }
  tcp->transport = (scn_transport){.name = "tcp",
                                   .flush = tcp_flush,
                                   .set_reading = tcp_set_reading,
                                   .resume = tcp_resume,
                                   .closing = NULL};
  srv->tcp = tcp;
  char extra[64];
  snprintf(extra, sizeof extra, "version=%s protocol=%d tls=%s", SCN_VERSION, SCN_PROTOCOL,
           scn_tls_on(srv) ? "on" : "off");
  tcp->listener.data = srv;
  if (scn_listen(srv->loop, &tcp->listener, &srv->cfg.listen, 1024, on_connection, "listen",
                 "listening", extra) != 0)
    return -1;
  tcp->listening = true;
  return 0;
}

int scn_tcp_port(const scn_server *srv) {
  return srv->tcp && srv->tcp->listening ? scn_listen_port(&srv->tcp->listener) : 0;
}

void scn_tcp_close(scn_server *srv) {
  scn_tcp_state *tcp = srv->tcp;
  if (tcp && tcp->listening && !uv_is_closing((uv_handle_t *)&tcp->listener))
    uv_close((uv_handle_t *)&tcp->listener, NULL);
}

void scn_tcp_free(scn_server *srv) {
  free(srv->tcp);
  srv->tcp = NULL;
}

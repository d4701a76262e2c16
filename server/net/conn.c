#include "net/conn.h"

#include "codec.h"
#include "net/tls.h"
#include "ops/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool scn_conn_admit(scn_conn *c) {
  scn_server *srv = c->srv;
  c->id = ++srv->next_conn_id;
  /* With --acl every command is checked against the connection's rule instead. */
  c->authed = srv->cfg.auth_token[0] == '\0' && !srv->acl;
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
    scn_reply_error_raw(&c->out.bytes, NULL, 0, &err);
    c->rejected = c->closing = true;
    scn_conn_flush(c);
    return false;
  }
  srv->counters.connections_total++;
  scn_log(SCN_LOG_DEBUG, "connection opened", "conn=%llu peer=%s transport=%s",
          (unsigned long long)c->id, c->peer, c->tp->name);
  return true;
}

/* ---- TLS ---------------------------------------------------------------------------------- */

static void tls_expired(void *owner) {
  scn_conn *c = owner;
  scn_log(SCN_LOG_DEBUG, "tls handshake timed out", "conn=%llu peer=%s timeout_s=%g",
          (unsigned long long)c->id, c->peer, c->srv->cfg.tls_handshake_timeout);
  scn_conn_close(c);
}

bool scn_conn_use_tls(scn_conn *c, scn_tls *tls) {
  if (tls)
    scn_tls_set_owner(tls, tls_expired, c);
  else
    tls = scn_tls_new(c->srv, SCN_TLS_PROTOCOL, tls_expired, c);
  c->tls = tls;
  return tls != NULL;
}

bool scn_conn_tls_pending(const scn_conn *c) { return c->tls && scn_tls_pending(c->tls) > 0; }

/* Writes the session's own ciphertext at once, as far as the socket takes it (an alert, a
 * close_notify), for a connection about to close. */
static void tls_send_last(scn_conn *c) {
  if (c->writing || !scn_conn_tls_pending(c))
    return;
  scn_buf last = {0};
  if (scn_tls_take(c->tls, &last)) {
    uv_buf_t b = uv_buf_init(last.data, (unsigned)last.len);
    uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
  }
  scn_buf_free(&last);
}

typedef struct tls_feed {
  scn_conn *c;
  scn_conn_input_fn consume;
} tls_feed;

static bool tls_plain(void *ud, const char *data, size_t len) {
  tls_feed *f = ud;
  if (f->c->rejected)
    return true; /* a refused connection runs nothing */
  return f->consume(f->c, data, len) && !scn_conn_gone(f->c);
}

bool scn_conn_tls_input(scn_conn *c, const char *data, size_t len, scn_conn_input_fn consume) {
  bool was = scn_tls_established(c->tls);
  tls_feed f = {c, consume};
  scn_tls_status st = scn_tls_input(c->tls, data, len, tls_plain, &f);
  if (scn_conn_gone(c))
    return false;
  if (st == SCN_TLS_FAILED) {
    char why[128];
    scn_log(SCN_LOG_DEBUG, was ? "tls record refused" : "tls handshake failed",
            "conn=%llu peer=%s error=\"%s\"", (unsigned long long)c->id, c->peer,
            scn_tls_describe(c->tls, why, sizeof why));
    tls_send_last(c);
    scn_conn_close(c);
    return false;
  }
  if (!was && scn_tls_established(c->tls)) {
    char what[128];
    scn_log(SCN_LOG_DEBUG, "tls handshake done", "conn=%llu peer=%s tls=\"%s\"",
            (unsigned long long)c->id, c->peer, scn_tls_describe(c->tls, what, sizeof what));
    scn_conn_update_reading(c); /* a refused connection stops reading now */
  }
  if (scn_conn_tls_pending(c) || (!was && scn_tls_established(c->tls)))
    scn_conn_schedule_flush(c);
  return true;
}

bool scn_conn_handshaking(const scn_conn *c) { return c->tls && !scn_tls_established(c->tls); }

/* Seals what c->inflight holds into ciphertext, which then takes its place (the buffers
 * trade places, so both keep their memory for the next time). */
static bool tls_seal_inflight(scn_conn *c) {
  size_t n = scn_outq_iov(&c->inflight, &c->iov, &c->iov_cap);
  if (n == 0 && scn_outq_size(&c->inflight) > 0)
    return false;
  c->sealed.len = 0;
  if (!scn_tls_seal(c->tls, c->iov, n, &c->sealed))
    return false;
  scn_outq_clear(&c->inflight);
  scn_buf plain = c->inflight.bytes;
  c->inflight.bytes = c->sealed;
  c->sealed = plain;
  return true;
}

/* ---- output ------------------------------------------------------------------------------- */

static void on_written(uv_write_t *req, int status) { scn_conn_written(req->data, status); }

/* Writes c->inflight as it is. */
static void write_inflight(scn_conn *c) {
  size_t n = scn_outq_iov(&c->inflight, &c->iov, &c->iov_cap);
  if (n == 0) {
    if (scn_outq_size(&c->inflight) > 0)
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

void scn_conn_send(scn_conn *c) {
  if (c->tls && !tls_seal_inflight(c)) {
    scn_log(SCN_LOG_WARN, "out of memory sealing output", "conn=%llu", (unsigned long long)c->id);
    scn_conn_close(c);
    return;
  }
  write_inflight(c);
}

/* Until its handshake is done, a TLS connection writes only the handshake; replies (the
 * LIMIT line of a refused connection) wait for it. */
static void handshake_flush(scn_conn *c) {
  if (c->writing || scn_conn_gone(c) || !scn_conn_tls_pending(c))
    return;
  if (!scn_tls_take(c->tls, &c->inflight.bytes)) {
    scn_conn_close(c);
    return;
  }
  write_inflight(c); /* already ciphertext */
}

/* ---- gates --------------------------------------------------------------------------------- */

uint64_t scn_conn_gate_shut(scn_conn *c) {
  size_t bytes = c->out.bytes.len, segs = c->out.nsegs;
  if (c->gates_base == 0)
    c->gates_base = 1; /* numbers start at 1 and are never reused */
  if (c->ngates) {
    scn_conn_gate *last = &c->gates[c->ngates - 1];
    if (last->bytes == bytes && last->segs == segs) {
      last->holds++;
      return c->gates_base + c->ngates - 1;
    }
  }
  scn_conn_gate *g = scn_array_grow(c->gates, &c->gates_cap, sizeof *g, c->ngates + 1);
  if (!g)
    return 0;
  c->gates = g;
  c->gates[c->ngates++] = (scn_conn_gate){bytes, segs, 1};
  return c->gates_base + c->ngates - 1;
}

/* Forgets the first k gates (their numbers are not given again). */
static void gates_pop(scn_conn *c, size_t k) {
  memmove(c->gates, c->gates + k, (c->ngates - k) * sizeof *c->gates);
  c->ngates -= k;
  c->gates_base += k;
}

void scn_conn_gate_open(scn_conn *c, uint64_t n) {
  if (n < c->gates_base || n - c->gates_base >= c->ngates)
    return;
  scn_conn_gate *g = &c->gates[n - c->gates_base];
  if (g->holds)
    g->holds--;
  size_t open = 0;
  while (open < c->ngates && c->gates[open].holds == 0)
    open++;
  if (open == 0)
    return;
  gates_pop(c, open);
  scn_conn_schedule_flush(c);
}

void scn_conn_drop_gated(scn_conn *c) {
  if (c->ngates == 0)
    return;
  if (scn_outq_split(&c->out, c->gates[0].bytes, c->gates[0].segs, &c->gated))
    scn_outq_clear(&c->gated);
  else
    scn_outq_clear(&c->out); /* out of memory: nothing of it goes rather than what waits */
  gates_pop(c, c->ngates);
}

/* Hands the transport what precedes the first gate; the rest is put back behind what the
 * transport left queued, and the gates move with it. The transport sees the connection as not
 * closing meanwhile: what is held must still go before it closes. */
static void flush_gated(scn_conn *c) {
  /* A write the socket took at once flushes again from within the transport's flush: what
   * preceded the gate has just been handed over, and the rest is set aside until it returns. */
  if (c->gating)
    return;
  size_t bytes = c->gates[0].bytes, segs = c->gates[0].segs;
  if (bytes == 0 && segs == 0 && !scn_conn_tls_pending(c))
    return;
  if (!scn_outq_split(&c->out, bytes, segs, &c->gated))
    return; /* out of memory: the next flush tries again */
  bool closing = c->closing;
  c->closing = false;
  c->gating = true;
  c->tp->flush(c);
  c->gating = false;
  c->closing = closing;
  size_t left_bytes = c->out.bytes.len, left_segs = c->out.nsegs;
  if (scn_conn_gone(c)) {
    scn_outq_clear(&c->gated);
    return;
  }
  if (!scn_outq_append(&c->out, &c->gated)) {
    scn_log(SCN_LOG_WARN, "out of memory keeping replies that wait for followers", "conn=%llu",
            (unsigned long long)c->id);
    gates_pop(c, c->ngates);
    scn_outq_clear(&c->out);
    scn_conn_close(c);
    return;
  }
  for (size_t i = 0; i < c->ngates; i++) {
    c->gates[i].bytes = c->gates[i].bytes - bytes + left_bytes;
    c->gates[i].segs = c->gates[i].segs - segs + left_segs;
  }
}

void scn_conn_flush(scn_conn *c) {
  scn_hooks_before_flush(c->srv);
  if (scn_conn_handshaking(c))
    handshake_flush(c);
  else if (c->ngates)
    flush_gated(c);
  else
    c->tp->flush(c);
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
  scn_framer_free(&c->framer);
  scn_outq_free(&c->out);
  scn_outq_free(&c->inflight);
  scn_outq_free(&c->gated);
  free(c->gates);
  scn_buf_free(&c->held);
  scn_tls_free(c->tls);
  scn_buf_free(&c->sealed);
  free(c->pending_tag);
  free(c->iov);
  free(c);
}

void scn_conn_close(scn_conn *c) {
  if (scn_conn_gone(c))
    return;
  scn_log(SCN_LOG_DEBUG, "connection closed", "conn=%llu peer=%s transport=%s",
          (unsigned long long)c->id, c->peer, c->tp->name);
  if (c->tls) { /* close_notify, as far as the socket takes it */
    scn_tls_shutdown(c->tls);
    tls_send_last(c);
  }
  if (c->tp->closing)
    c->tp->closing(c);
  scn_hooks_conn_closed(c->srv, c);
  if (c->flush_queued)
    for (scn_conn **p = &c->srv->flush_list; *p; p = &(*p)->flush_next)
      if (*p == c) {
        *p = c->flush_next;
        c->flush_queued = false;
        break;
      }
  /* Its slot under --max-clients is free now, not once the loop has freed its memory. */
  c->srv->nconns--;
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
  if (!scn_conn_gone(c) && scn_conn_queued(c) <= c->srv->cfg.output_limit / 2)
    scn_hooks_conn_drained(c->srv, c);
}

/* Replies are never dropped. Over the output limit requests are answered LIMIT (dispatch);
 * at twice the limit the connection is not read from until its output drains, which bounds
 * what a client that never reads can make us queue. */
void scn_conn_update_reading(scn_conn *c) {
  if (scn_conn_gone(c))
    return;
  /* A follower's link is read while the daemon stops: its acks release the sync replies that
   * are draining. */
  bool want = !c->closing && (!c->srv->stopping || c->repl) && !c->blocked &&
              scn_conn_queued(c) < 2 * c->srv->cfg.output_limit;
  /* A handshake reads until it is done, even for a refused connection (its LIMIT line goes
   * out over TLS once it is). */
  if (!want && scn_conn_handshaking(c) && !c->srv->stopping)
    want = true;
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

void scn_conn_resume(scn_conn *c) {
  c->blocked = false;
  c->srv->command_clock = uv_hrtime();
  c->tp->resume(c);
  if (scn_conn_gone(c))
    return;
  scn_conn_schedule_flush(c);
  scn_conn_update_reading(c);
}

void scn_conn_schedule_flush(scn_conn *c) {
  if (c->flush_queued || scn_conn_gone(c))
    return;
  c->flush_queued = true;
  c->flush_next = c->srv->flush_list;
  c->srv->flush_list = c;
}

/* After the I/O of a loop turn: what must precede the replies of every command run in it
 * (the journal records, written and fsynced under "always") goes once, then the replies. */
static void on_commit_check(uv_check_t *h) {
  scn_server *srv = h->data;
  if (!srv->flush_list)
    return;
  scn_hooks_before_flush(srv);
  while (srv->flush_list) {
    scn_conn *c = srv->flush_list;
    srv->flush_list = c->flush_next;
    c->flush_queued = false;
    scn_conn_flush(c);
    scn_conn_update_reading(c);
  }
}

void scn_conn_init_loop(scn_server *srv) {
  uv_check_init(srv->loop, &srv->commit_check);
  srv->commit_check.data = srv;
  uv_check_start(&srv->commit_check, on_commit_check);
}

void scn_conn_stop_all(scn_server *srv) {
  for (scn_conn *c = srv->conns; c; c = c->next) {
    if (scn_conn_handshaking(c)) { /* it has run nothing: nothing to answer */
      scn_conn_close(c);
      continue;
    }
    if (c->reading && !c->repl) { /* (a follower's link: see scn_conn_update_reading) */
      c->tp->set_reading(c, false);
      c->reading = false;
    }
    scn_conn_flush(c);
  }
}

bool scn_conn_any_pending(const scn_server *srv) {
  for (const scn_conn *c = srv->conns; c; c = c->next)
    if (scn_conn_queued(c) > 0 && !scn_conn_gone(c))
      return true;
  return false;
}

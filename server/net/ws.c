/* WebSocket connections (RFC 6455). GET /ws on the HTTP port upgrades (ws_upgrade.c checks
 * the handshake and hands the socket over), and from then on the connection is an scn_conn
 * like a TCP one: each text message is one request line for the server's line runner, and each
 * line of its output (a reply, or an event: its own header bytes plus a shared frame body up
 * to the '\n') goes out as one text message. Output budget, lagging subscriptions, blocking on
 * deferred replies and authentication are the connection's, so they behave as on TCP.
 *
 * Framing is wslay's (it does no I/O): its event API parses and validates frames (masking,
 * opcodes, fragmentation, control frames, UTF-8 of text), answers pings and close frames,
 * and encodes what we queue. It runs without buffering whole messages: the message text is
 * gathered here, up to --max-line, so an oversized message is answered with LIMIT and
 * discarded as it arrives, as an overlong line is on TCP. */
#include "net/ws.h"

#include "net/conn.h"
#include "net/tls.h"
#include "ops/log.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <wslay/wslay.h>

/* After sending a close frame, how long the peer has to answer with its own. */
#define WS_CLOSE_WAIT_MS 2000

typedef struct scn_ws {
  scn_conn *conn;
  wslay_event_context_ptr ctx;
  const char *in; /* input being fed to wslay */
  size_t in_len;
  scn_buf wire;     /* encoded frames not yet handed to the socket */
  scn_buf part;     /* an outgoing message whose end is in a later piece of the output */
  bool part_binary; /* part is a binary message (its prefix first: conn.h) */
  uv_buf_t *iov;
  size_t iov_cap;
  /* the message being received */
  scn_buf msg;
  uint8_t msg_op;
  bool in_ctrl, frame_fin, msg_over, limit_sent;
  scn_buf held; /* messages received while blocked: [size_t len][bytes]; SIZE_MAX: over the limit */
  bool want_read, reading;
  bool close_queued, peer_eof;
  bool in_recv, dead; /* inside wslay_event_recv; closed meanwhile (freed after it returns) */
  uint64_t close_deadline;
  struct scn_ws *wait_next; /* awaiting the peer's close frame */
} scn_ws;

struct scn_ws_state {
  scn_transport transport;                /* every WebSocket connection's */
  struct wslay_event_callbacks callbacks; /* wslay's, the same for every connection */
  uv_timer_t close_timer;                 /* looks for peers late with their close frame */
  scn_ws *waiting;                        /* connections awaiting the peer's close frame */
  /* One read buffer for every connection: reads are handled to completion before the next. */
  char read_buffer[64 * 1024];
};

static bool ws_gone(const scn_conn *c) {
  return uv_is_closing((const uv_handle_t *)&c->tcp) || !c->ws || c->ws->dead;
}

/* ---- closing ------------------------------------------------------------------------------ */

static void wait_remove(scn_ws_state *state, scn_ws *ws) {
  for (scn_ws **p = &state->waiting; *p; p = &(*p)->wait_next)
    if (*p == ws) {
      *p = ws->wait_next;
      break;
    }
  ws->close_deadline = 0;
}

static void ws_free(scn_ws *ws) {
  wslay_event_context_free(ws->ctx);
  scn_buf_free(&ws->wire);
  scn_buf_free(&ws->part);
  scn_buf_free(&ws->msg);
  scn_buf_free(&ws->held);
  free(ws->iov);
  free(ws);
}

static void ws_closing(scn_conn *c) {
  scn_ws *ws = c->ws;
  if (!ws)
    return;
  wait_remove(c->srv->ws, ws);
  c->tp_queued = 0;
  if (ws->in_recv) {
    ws->dead = true; /* wslay is still on the stack: freed when it returns */
    return;
  }
  c->ws = NULL;
  ws_free(ws);
}

static void on_close_timer(uv_timer_t *t) {
  scn_ws_state *state = t->data;
  uint64_t now = uv_now(t->loop);
  for (;;) {
    scn_ws *late = NULL;
    for (scn_ws *ws = state->waiting; ws; ws = ws->wait_next)
      if (ws->close_deadline <= now) {
        late = ws;
        break;
      }
    if (!late)
      break;
    wait_remove(state, late);
    scn_log(SCN_LOG_DEBUG, "websocket peer did not answer the close frame", "conn=%llu",
            (unsigned long long)late->conn->id);
    scn_conn_close(late->conn);
  }
  if (!state->waiting)
    uv_timer_stop(t);
}

static bool awaiting_close(const scn_ws *ws) {
  return ws->close_queued && !ws->peer_eof && wslay_event_get_read_enabled(ws->ctx) &&
         !wslay_event_get_close_received(ws->ctx);
}

static void on_ws_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_ws_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* Reads when the connection wants requests, and also while waiting for the peer's close. */
static int sync_reading(scn_conn *c) {
  scn_ws *ws = c->ws;
  bool on = ws->want_read || (awaiting_close(ws) && !c->srv->stopping);
  if (on && !ws->reading) {
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_ws_alloc, on_ws_read);
    if (rc == 0)
      ws->reading = true;
    return rc;
  }
  if (!on && ws->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    ws->reading = false;
  }
  return 0;
}

static int ws_set_reading(scn_conn *c, bool on) {
  if (ws_gone(c))
    return on ? -1 : 0;
  c->ws->want_read = on;
  return sync_reading(c);
}

/* Our close frame is on the wire: close the socket once the peer has answered (or has
 * broken the protocol, or gone), else give it WS_CLOSE_WAIT_MS to answer. */
static void maybe_finish(scn_conn *c) {
  scn_ws *ws = c->ws;
  if (!wslay_event_get_close_sent(ws->ctx))
    return;
  if (!awaiting_close(ws) || c->srv->stopping) {
    scn_conn_close(c);
    return;
  }
  if (!ws->close_deadline) {
    scn_ws_state *state = c->srv->ws;
    ws->close_deadline = uv_now(c->srv->loop) + WS_CLOSE_WAIT_MS;
    ws->wait_next = state->waiting;
    state->waiting = ws;
    if (!uv_is_active((uv_handle_t *)&state->close_timer))
      uv_timer_start(&state->close_timer, on_close_timer, 250, 250);
  }
  sync_reading(c);
}

/* ---- output ------------------------------------------------------------------------------- */

static ssize_t on_wslay_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
                             int flags, void *ud) {
  (void)flags;
  scn_conn *c = ud;
  scn_buf_add(&c->ws->wire, data, len);
  if (c->ws->wire.failed) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  return (ssize_t)len;
}

static bool send_message(scn_conn *c, uint8_t opcode, const char *data, size_t len) {
  struct wslay_event_msg m = {opcode, (const uint8_t *)data, len};
  int rc = wslay_event_queue_msg(c->ws->ctx, &m);
  if (rc == WSLAY_ERR_NO_MORE_MSG)
    return true; /* a close frame is queued: nothing may follow it */
  return rc == 0 && wslay_event_send(c->ws->ctx) == 0;
}

static uint32_t binary_length(const scn_buf *part) {
  const uint8_t *p = (const uint8_t *)part->data + 1;
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Takes what it can of a binary message from the len bytes at p into ws->part, and sends the
 * message once whole; the bytes taken. */
static size_t take_binary(scn_conn *c, const char *p, size_t len, bool *ok) {
  scn_ws *ws = c->ws;
  size_t want = SCN_CONN_BINARY_PREFIX;
  if (ws->part.len >= SCN_CONN_BINARY_PREFIX)
    want += binary_length(&ws->part);
  size_t k = want - ws->part.len < len ? want - ws->part.len : len;
  scn_buf_add(&ws->part, p, k);
  *ok = !ws->part.failed;
  if (*ok && ws->part.len == SCN_CONN_BINARY_PREFIX && binary_length(&ws->part))
    return k; /* the prefix is whole: the message follows */
  if (*ok && ws->part.len == want) {
    *ok = send_message(c, WSLAY_BINARY_FRAME, ws->part.data + SCN_CONN_BINARY_PREFIX,
                       ws->part.len - SCN_CONN_BINARY_PREFIX);
    ws->part.len = 0;
    ws->part_binary = false;
  }
  return k;
}

/* Turns the lines queued in c->out into text messages, and the binary messages among them
 * into binary ones, encoded into ws->wire. */
static bool queue_output(scn_conn *c) {
  scn_ws *ws = c->ws;
  scn_outq *q = &c->out;
  if (scn_outq_size(q) == 0)
    return true;
  size_t n = scn_outq_iov(q, &ws->iov, &ws->iov_cap);
  bool ok = n > 0;
  for (size_t i = 0; ok && i < n; i++) {
    const char *p = ws->iov[i].base;
    size_t len = ws->iov[i].len;
    while (ok && len) {
      if (ws->part.len == 0 && *p == SCN_CONN_BINARY_MARK)
        ws->part_binary = true;
      if (ws->part_binary) {
        size_t k = take_binary(c, p, len, &ok);
        p += k;
        len -= k;
        continue;
      }
      const char *nl = memchr(p, '\n', len);
      if (!nl) {
        scn_buf_add(&ws->part, p, len);
        ok = !ws->part.failed;
        break;
      }
      size_t k = (size_t)(nl - p);
      if (ws->part.len) {
        scn_buf_add(&ws->part, p, k);
        ok = !ws->part.failed && send_message(c, WSLAY_TEXT_FRAME, ws->part.data, ws->part.len);
        ws->part.len = 0;
      } else {
        ok = send_message(c, WSLAY_TEXT_FRAME, p, k);
      }
      p += k + 1;
      len -= k + 1;
    }
  }
  scn_outq_clear(q);
  c->tp_queued = ws->wire.len + ws->part.len;
  return ok;
}

static void ws_flush(scn_conn *c) {
  if (ws_gone(c))
    return;
  scn_ws *ws = c->ws;
  if (!queue_output(c)) {
    scn_log(SCN_LOG_WARN, "out of memory writing to a websocket", "conn=%llu",
            (unsigned long long)c->id);
    scn_conn_close(c);
    return;
  }
  if (!ws->close_queued && (c->closing || c->srv->stopping) && ws->part.len == 0) {
    static const char bye[] = "shutting down", full[] = "too many clients";
    uint16_t code = c->rejected        ? 1013
                    : c->srv->stopping ? WSLAY_CODE_GOING_AWAY
                                       : WSLAY_CODE_NORMAL_CLOSURE;
    const char *why = c->rejected ? full : c->srv->stopping ? bye : "";
    wslay_event_queue_close(ws->ctx, code, (const uint8_t *)why, strlen(why));
    ws->close_queued = true;
  }
  if (wslay_event_send(ws->ctx) != 0) { /* pongs and close frames */
    scn_conn_close(c);
    return;
  }
  c->tp_queued = ws->wire.len + ws->part.len;
  if (c->writing)
    return;
  if (ws->wire.len == 0 && !scn_conn_tls_pending(c)) {
    maybe_finish(c);
    return;
  }
  scn_buf spare = c->inflight.bytes;
  c->inflight.bytes = ws->wire;
  ws->wire = spare;
  ws->wire.len = 0;
  c->tp_queued = ws->part.len;
  scn_conn_send(c);
}

/* Fails the connection: what was answered so far goes out, then a close frame. */
static void ws_fail(scn_conn *c, uint16_t code, const char *reason) {
  scn_ws *ws = c->ws;
  if (ws->close_queued)
    return;
  scn_conn_drop_gated(c); /* what waits for followers' acks can no longer go before the close */
  queue_output(c);
  wslay_event_queue_close(ws->ctx, code, (const uint8_t *)reason, strlen(reason));
  ws->close_queued = true;
  c->closing = true;
  scn_conn_schedule_flush(c);
}

/* ---- input -------------------------------------------------------------------------------- */

static void run_message(scn_conn *c, const char *data, size_t len) {
  if (!data) {
    c->srv->run_line(c, NULL, 0);
    return;
  }
  size_t i = 0;
  while (i < len && (data[i] == ' ' || data[i] == '\t'))
    i++;
  if (i < len) /* a blank message, like a blank line, is not a request */
    c->srv->run_line(c, data, len);
}

/* A complete message (data NULL: one over --max-line), run now or held while blocked. */
static void deliver(scn_conn *c, const char *data, size_t len) {
  scn_ws *ws = c->ws;
  if (!c->blocked) {
    run_message(c, data, len);
    return;
  }
  size_t mark = data ? len : SIZE_MAX;
  scn_buf_add(&ws->held, &mark, sizeof mark);
  if (data)
    scn_buf_add(&ws->held, data, len);
  if (ws->held.failed) {
    scn_log(SCN_LOG_WARN, "out of memory holding websocket requests", "conn=%llu",
            (unsigned long long)c->id);
    scn_conn_close(c);
  }
}

static void ws_resume(scn_conn *c) {
  if (ws_gone(c))
    return;
  scn_ws *ws = c->ws;
  size_t off = 0;
  while (off < ws->held.len && !c->blocked && !ws_gone(c)) {
    size_t len;
    memcpy(&len, ws->held.data + off, sizeof len);
    off += sizeof len;
    if (len == SIZE_MAX) {
      run_message(c, NULL, 0);
    } else {
      run_message(c, ws->held.data + off, len);
      off += len;
    }
  }
  if (!ws_gone(c))
    scn_buf_consume(&ws->held, off);
}

static size_t max_line(const scn_conn *c) { return (size_t)c->srv->cfg.max_line; }

static ssize_t on_wslay_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                             void *ud) {
  (void)flags;
  scn_ws *ws = ((scn_conn *)ud)->ws;
  if (ws->in_len == 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  size_t k = len < ws->in_len ? len : ws->in_len;
  memcpy(buf, ws->in, k);
  ws->in += k;
  ws->in_len -= k;
  return (ssize_t)k;
}

static bool ignoring(const scn_conn *c) { return ws_gone(c) || c->ws->close_queued || c->closing; }

static void on_frame_start(wslay_event_context_ptr ctx,
                           const struct wslay_event_on_frame_recv_start_arg *arg, void *ud) {
  (void)ctx;
  scn_conn *c = ud;
  scn_ws *ws = c->ws;
  if (ws_gone(c))
    return;
  if (wslay_is_ctrl_frame(arg->opcode)) {
    ws->in_ctrl = true;
    /* wslay answers a close frame by itself: what was answered before it goes first. */
    if (arg->opcode == WSLAY_CONNECTION_CLOSE && !ws->close_queued) {
      scn_conn_drop_gated(c);
      queue_output(c);
    }
    return;
  }
  ws->in_ctrl = false;
  ws->frame_fin = arg->fin;
  if (arg->opcode == WSLAY_CONTINUATION_FRAME)
    return;
  ws->msg_op = arg->opcode;
  ws->msg.len = 0;
  ws->msg_over = ws->limit_sent = false;
  if (arg->opcode != WSLAY_TEXT_FRAME && !ignoring(c))
    ws_fail(c, WSLAY_CODE_UNSUPPORTED_DATA, "only text messages are supported");
}

static void on_frame_chunk(wslay_event_context_ptr ctx,
                           const struct wslay_event_on_frame_recv_chunk_arg *arg, void *ud) {
  (void)ctx;
  scn_conn *c = ud;
  scn_ws *ws = c->ws;
  if (ws_gone(c) || ws->in_ctrl || ws->msg_op != WSLAY_TEXT_FRAME || ws->msg_over)
    return;
  /* Up to the limit plus a line end ("\r\n") that is not counted. */
  if (ws->msg.len + arg->data_length > max_line(c) + 2) {
    ws->msg_over = true;
    ws->msg.len = 0;
    if (!ignoring(c)) {
      deliver(c, NULL, 0); /* LIMIT as soon as it is known, as on TCP */
      ws->limit_sent = true;
    }
    return;
  }
  scn_buf_add(&ws->msg, arg->data, arg->data_length);
  if (ws->msg.failed) {
    scn_log(SCN_LOG_WARN, "out of memory reading a websocket message", "conn=%llu",
            (unsigned long long)c->id);
    scn_conn_close(c);
  }
}

static void on_frame_end(wslay_event_context_ptr ctx, void *ud) {
  (void)ctx;
  scn_conn *c = ud;
  scn_ws *ws = c->ws;
  if (ws_gone(c))
    return;
  if (ws->in_ctrl) {
    ws->in_ctrl = false;
    return;
  }
  if (!ws->frame_fin || ws->msg_op != WSLAY_TEXT_FRAME)
    return;
  const char *data = ws->msg.data;
  size_t len = ws->msg.len;
  bool over = ws->msg_over;
  if (!over) {
    /* A message is one line: a line end at its end is allowed and not part of it. */
    if (len && data[len - 1] == '\n' && --len && data[len - 1] == '\r')
      len--;
    over = len > max_line(c);
  }
  if (!ignoring(c)) {
    if (!over)
      deliver(c, len ? data : "", len);
    else if (!ws->limit_sent)
      deliver(c, NULL, 0);
  }
  ws->msg_over = ws->limit_sent = false;
  ws->msg.len = 0;
  if (ws->msg.cap > 4 * max_line(c) + 65536)
    scn_buf_free(&ws->msg);
}

/* Runs n bytes from the peer through wslay. */
static void ws_feed(scn_conn *c, const char *data, size_t n) {
  scn_ws *ws = c->ws;
  ws->in = data;
  ws->in_len = n;
  ws->in_recv = true;
  int rc = wslay_event_recv(ws->ctx);
  ws->in_recv = false;
  ws->in = NULL;
  ws->in_len = 0;
  if (ws->dead) {
    c->ws = NULL;
    ws_free(ws);
    return;
  }
  if (uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  if (rc != 0) {
    scn_conn_close(c);
    return;
  }
  /* The peer closed, or broke the protocol (wslay queued the close frame): no more requests. */
  if (!wslay_event_get_read_enabled(ws->ctx) || wslay_event_get_close_received(ws->ctx)) {
    if (!wslay_event_get_close_received(ws->ctx) && !ws->close_queued)
      scn_log(SCN_LOG_DEBUG, "websocket protocol error", "conn=%llu peer=%s",
              (unsigned long long)c->id, c->peer);
    ws->close_queued = true;
    c->closing = true;
  }
}

/* Plaintext of a wss:// connection. */
static bool feed_plain(scn_conn *c, const char *data, size_t n) {
  ws_feed(c, data, n);
  return !ws_gone(c);
}

static void on_ws_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  scn_conn *c = h->data;
  scn_ws_state *state = c->srv->ws;
  *buf = uv_buf_init(state->read_buffer, sizeof state->read_buffer);
}

static void on_ws_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  scn_conn *c = s->data;
  if (n == 0 || ws_gone(c))
    return;
  if (n < 0) {
    if (n != UV_EOF) {
      scn_conn_close(c);
      return;
    }
    /* Gone without a close frame: answer what was read, then close. */
    c->ws->peer_eof = true;
    c->ws->want_read = false;
    c->reading = false;
    c->closing = true;
    sync_reading(c);
    scn_conn_schedule_flush(c);
    return;
  }
  c->srv->counters.bytes_in += (uint64_t)n;
  c->srv->command_clock = uv_hrtime();
  if (c->tls) {
    if (!scn_conn_tls_input(c, buf->base, (size_t)n, feed_plain))
      return;
  } else {
    ws_feed(c, buf->base, (size_t)n);
  }
  if (ws_gone(c))
    return;
  scn_conn_schedule_flush(c);
  scn_conn_update_reading(c);
  sync_reading(c);
}

int scn_ws_open(scn_server *srv) {
  scn_ws_state *state = calloc(1, sizeof *state);
  if (!state)
    return -1;
  state->transport = (scn_transport){.name = "websocket",
                                     .flush = ws_flush,
                                     .set_reading = ws_set_reading,
                                     .resume = ws_resume,
                                     .closing = ws_closing};
  state->callbacks = (struct wslay_event_callbacks){.recv_callback = on_wslay_recv,
                                                    .send_callback = on_wslay_send,
                                                    .on_frame_recv_start_callback = on_frame_start,
                                                    .on_frame_recv_chunk_callback = on_frame_chunk,
                                                    .on_frame_recv_end_callback = on_frame_end};
  uv_timer_init(srv->loop, &state->close_timer);
  state->close_timer.data = state;
  srv->ws = state;
  return 0;
}

void scn_ws_free(scn_server *srv) {
  free(srv->ws);
  srv->ws = NULL;
}

int scn_ws_accept(scn_server *srv, int fd, struct scn_tls *tls, const char *preface,
                  size_t preface_len, const char *input, size_t input_len) {
  scn_conn *c = scn_conn_new(srv, &srv->ws->transport);
  if (!c) {
    close(fd);
    scn_tls_free(tls);
    return -1;
  }
  bool opened = uv_tcp_open(&c->tcp, fd) == 0;
  if (!opened)
    close(fd);
  if (tls)
    scn_conn_use_tls(c, tls); /* freed with the connection from now on */
  scn_ws *ws = opened ? calloc(1, sizeof *ws) : NULL;
  if (!ws || wslay_event_context_server_init(&ws->ctx, &srv->ws->callbacks, c) != 0) {
    if (ws)
      ws_free(ws);
    scn_conn_close(c);
    return -1;
  }
  ws->conn = c;
  c->ws = ws;
  wslay_event_config_set_no_buffering(ws->ctx, 1);
  /* The 101 response goes first, as this connection's first write: what admitting queues (a
   * refused connection's LIMIT message and close frame) waits behind it. */
  scn_buf_add(&c->inflight.bytes, preface, preface_len);
  if (c->inflight.bytes.failed) {
    scn_conn_close(c);
    return -1;
  }
  c->writing = true;
  bool admitted = scn_conn_admit(c);
  c->writing = false;
  scn_conn_send(c);
  if (!admitted || ws_gone(c))
    return 0; /* over --max-clients: one LIMIT message, then the close frame */
  scn_conn_update_reading(c);
  srv->command_clock = uv_hrtime();
  if (input_len && !ws_gone(c))
    ws_feed(c, input, input_len);
  /* Over TLS, records read with the upgrade request may still hold frames. */
  if (c->tls && !ws_gone(c))
    scn_conn_tls_input(c, NULL, 0, feed_plain);
  if (!ws_gone(c)) {
    scn_conn_schedule_flush(c);
    scn_conn_update_reading(c);
  }
  return 0;
}

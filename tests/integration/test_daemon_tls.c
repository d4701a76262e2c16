/* TLS on the daemon's ports against the real daemon, with certificates the suite makes with the
 * openssl command line (scripts/tls-certs.sh) in temporary directories: every command and
 * pipelining over TLS, a subscriber that stops reading, plain text on a TLS port (never
 * executed), clients that refuse an untrusted daemon, client certificates, a stalled handshake
 * cut off (and its slot under --max-clients freed), HTTPS, and the files refused at start. */
#include "daemon_fixtures.h"
#include "scn_client.h"
#include "suites.h"
#include "wire.h"

#include <CUnit/CUnit.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Two CAs, each with a server and a client certificate: the daemon uses ours; theirs is one
 * that nobody here trusts. */
static char ours[64], theirs[64];

static const char *file_in(const char *dir, const char *name) {
  static char paths[8][128];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", dir, name);
  return p;
}

static t_tls_files trust_ours(void) { return (t_tls_files){.ca = file_in(ours, "ca.pem")}; }

/* Starts a TLS daemon with the extra args (NULL-terminated, may be NULL). */
static bool start_tls(t_daemon *d, const char *const *extra) {
  const char *args[40] = {"--tls-cert", file_in(ours, "server.pem"), "--tls-key",
                          file_in(ours, "server.key")};
  int n = 4;
  for (int i = 0; extra && extra[i] && n < 38; i++)
    args[n++] = extra[i];
  args[n] = NULL;
  return START(d, args);
}

/* start_tls, then a TLS connection to it (the daemon is killed when that fails). */
static bool start_tls_connected(t_daemon *d, t_client *c, const char *const *extra) {
  if (!start_tls(d, extra))
    return false;
  t_tls_files t = trust_ours();
  if (CONNECT_TLS(c, d->port, &t))
    return true;
  t_daemon_stop(d, SIGKILL, 2000);
  return false;
}

/* A figure of the daemon's /metrics page over HTTPS (-1 when absent). */
static double https_metric(const t_daemon *d, const char *sample) {
  t_tls_files t = trust_ours();
  char *page;
  int status = t_https_get(d->http_port, &t, "/metrics", &page);
  double v = status == 200 ? page_metric(page, sample) : -1;
  free(page);
  return v;
}

/* ---- every command ------------------------------------------------------------------------ */

static void test_every_command(void) {
  char data[64];
  CU_ASSERT_FATAL(t_temp_dir(data, sizeof data, "tls-data"));
  t_daemon d;
  t_client c;
  const char *extra[] = {"--data", data, NULL};
  if (!start_tls_connected(&d, &c, extra))
    return;
  OKD(&c, "{\"cmd\":\"ping\"}");
  OKD(&c, "{\"cmd\":\"hello\"}");
  OKD(&c, "{\"cmd\":\"info\"}");
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"w\"}");
  cJSON *r = OK(&c, "{\"cmd\":\"entity.create\",\"count\":2}");
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(r, "entities");
  long long e1 = (long long)cJSON_GetArrayItem(ids, 0)->valuedouble;
  long long e2 = (long long)cJSON_GetArrayItem(ids, 1)->valuedouble;
  cJSON_Delete(r);
  r = OK(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"name\":\"car\",\"t\":[1,0,0]}");
  long long car = (long long)t_resp_id(r, "entity");
  cJSON_Delete(r);
  OKD(&c,
      "{\"cmd\":\"transform.create\",\"world\":\"w\",\"entity\":%lld,\"parent\":%lld,"
      "\"name\":\"wheel\",\"t\":[0,1,0]}",
      e1, car);
  OKD(&c, "{\"cmd\":\"transform.create\",\"world\":\"w\",\"entity\":%lld}", e2);
  r = OK(&c, "{\"cmd\":\"transform.get\",\"world\":\"w\",\"entity\":%lld}", e1);
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "world");
  CU_ASSERT_EQUAL(cJSON_GetArrayItem(m, 12)->valuedouble, 1);
  CU_ASSERT_EQUAL(cJSON_GetArrayItem(m, 13)->valuedouble, 1);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"transform.children\",\"world\":\"w\",\"entity\":%lld}", car);
  OKD(&c, "{\"cmd\":\"transform.rename\",\"world\":\"w\",\"entity\":%lld,\"name\":\"fl\"}", e1);
  OKD(&c, "{\"cmd\":\"transform.find\",\"world\":\"w\",\"path\":\"car/fl\"}");
  OKD(&c, "{\"cmd\":\"transform.relative\",\"world\":\"w\",\"entity\":%lld,\"to\":%lld}", e1, car);
  OKD(&c, "{\"cmd\":\"transform.set_local\",\"world\":\"w\",\"entity\":%lld,\"t\":[2,0,0]}", car);
  OKD(&c, "{\"cmd\":\"transform.set_world\",\"world\":\"w\",\"entity\":%lld,\"t\":[0,0,5]}", e1);
  OKD(&c, "{\"cmd\":\"transform.link\",\"world\":\"w\",\"entity\":%lld,\"parent\":%lld}", e2, car);
  OKD(&c, "{\"cmd\":\"transform.unlink\",\"world\":\"w\",\"entity\":%lld}", e2);
  OKD(&c,
      "{\"cmd\":\"batch\",\"world\":\"w\",\"ops\":[{\"cmd\":\"transform.set_local\","
      "\"entity\":%lld,\"t\":[3,0,0]},{\"cmd\":\"transform.get\",\"entity\":%lld}]}",
      car, e1);
  t_client_keep_events(&c);
  r = OK(&c, "{\"cmd\":\"subscribe\",\"world\":\"w\"}");
  double sub = t_resp_num(r, "sub");
  cJSON_Delete(r);
  cJSON *frame = t_next_event(&c, 5000); /* the full frame, over TLS */
  CU_ASSERT_TRUE(t_resp_str_is(frame, "event", "frame"));
  CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(frame, "full")));
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(frame, "set")), 3);
  cJSON_Delete(frame);
  /* A region around the origin: the two transforms away from it leave, in the next frame. */
  OKD(&c, "{\"cmd\":\"subscribe.update\",\"sub\":%.0f,\"near\":{\"point\":[0,0,0],\"radius\":0.5}}",
      sub);
  frame = t_next_event(&c, 5000);
  CU_ASSERT_TRUE(t_resp_str_is(frame, "event", "frame"));
  CU_ASSERT_FALSE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(frame, "full")));
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(frame, "removed")), 2);
  cJSON_Delete(frame);
  OKD(&c, "{\"cmd\":\"unsubscribe\",\"sub\":%.0f}", sub);
  r = OK(&c, "{\"cmd\":\"save\"}");
  CU_ASSERT_TRUE(t_resp_num(r, "bytes") > 0);
  cJSON_Delete(r);
  OKD(&c, "{\"cmd\":\"transform.destroy\",\"world\":\"w\",\"entity\":%lld}", e2);
  OKD(&c, "{\"cmd\":\"entity.destroy\",\"entity\":%lld}", e1);
  r = OK(&c, "{\"cmd\":\"world.list\"}");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "worlds")), 1);
  cJSON_Delete(r);
  /* The cluster's commands answer over TLS too (this daemon is not in a cluster; the cluster
   * suite runs them over TLS between nodes). */
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"cluster.nodes\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.move\",\"world\":\"w\",\"to\":\"n1\"}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"replicate\",\"group\":\"w\",\"epoch\":1,\"from\":1}");
  ERR(&c, "BAD_REQUEST", "{\"cmd\":\"world.promote\",\"world\":\"w\",\"node\":\"n1\"}");
  OKD(&c, "{\"cmd\":\"world.destroy\",\"world\":\"w\"}");
  /* Every command of the table was run, over TLS. */
  r = OK(&c, "{\"cmd\":\"info\"}");
  const cJSON *by = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "metrics"),
                                                     "commands_total");
  for (unsigned i = 0; i < scn_command_count; i++) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(by, scn_commands[i].name);
    bool ran = cJSON_IsNumber(n) && n->valuedouble >= 1;
    CU_ASSERT_TRUE(ran);
    if (!ran)
      fprintf(stderr, "  %s was not run over TLS\n", scn_commands[i].name);
  }
  cJSON_Delete(r);
  t_client_close(&c);
  STOP_OK(&d, 5000);
  t_remove_tree(data);
}

/* 20,000 requests in one write (many TLS records, read in pieces): every response, in order. */
static void test_pipelined(void) {
  t_daemon d;
  t_client c;
  if (!start_tls_connected(&d, &c, NULL))
    return;
  OKD(&c, "{\"cmd\":\"world.create\",\"world\":\"p\"}");
  cJSON *r = OK(&c, "{\"cmd\":\"transform.create\",\"world\":\"p\"}");
  long long e = (long long)t_resp_id(r, "entity");
  cJSON_Delete(r);
  enum { N = 20000 };
  text lines = {0};
  for (int i = 0; i < N; i++)
    if (i % 2)
      text_addf(&lines, "{\"cmd\":\"transform.get\",\"world\":\"p\",\"entity\":%lld,\"id\":%d}\n",
                e, i);
    else
      text_addf(&lines,
                "{\"cmd\":\"transform.set_local\",\"world\":\"p\",\"entity\":%lld,\"t\":[%d,0,0],"
                "\"id\":%d}\n",
                e, i, i);
  CU_ASSERT_EQUAL_FATAL(t_client_send_raw(&c, lines.s, lines.len), 0);
  int in_order = 0, right = 0;
  for (int i = 0; i < N; i++) {
    cJSON *resp = t_recv_object(&c, T_RESPONSE_MS);
    if (!resp)
      break;
    in_order += t_resp_ok(resp) && t_resp_num(resp, "id") == i;
    if (i % 2) { /* a get sees the set just before it */
      const cJSON *w = cJSON_GetObjectItemCaseSensitive(resp, "world");
      right += cJSON_GetArrayItem(w, 12) && cJSON_GetArrayItem(w, 12)->valuedouble == i - 1;
    }
    cJSON_Delete(resp);
  }
  CU_ASSERT_EQUAL(in_order, N);
  CU_ASSERT_EQUAL(right, N / 2);
  text_free(&lines);
  t_client_close(&c);
  STOP_OK(&d, 5000);
}

/* ---- records as the network cuts them ----------------------------------------------------- */

/* A TLS client of the test's own over memory BIOs, on a plain socket: its records can be cut
 * into pieces or sent many to a segment, as networks and other clients' stacks do. */
typedef struct raw_tls {
  t_client sock;
  SSL_CTX *ctx;
  SSL *ssl;
  BIO *in, *out;
  text got; /* plaintext received */
} raw_tls;

static bool raw_send_out(raw_tls *r) {
  char buf[16384];
  int n;
  while ((n = BIO_read(r->out, buf, sizeof buf)) > 0)
    if (t_client_send_raw(&r->sock, buf, (size_t)n) != 0)
      return false;
  return true;
}

/* Reads what the socket has within ms into the session: 1, 0 when nothing came, -1 at the
 * end of the stream. */
static int raw_recv(raw_tls *r, int ms) {
  struct pollfd p = {.fd = r->sock.fd, .events = POLLIN};
  if (poll(&p, 1, ms) <= 0)
    return 0;
  char buf[16384];
  ssize_t n = recv(r->sock.fd, buf, sizeof buf, 0);
  if (n <= 0)
    return -1;
  BIO_write(r->in, buf, (int)n);
  for (int k; (k = SSL_read(r->ssl, buf, sizeof buf)) > 0;)
    text_add(&r->got, buf, (size_t)k);
  return 1;
}

/* version: the one TLS version the client offers, 0 for any its library allows. */
static bool raw_tls_connect_version(raw_tls *r, int port, int version) {
  *r = (raw_tls){0};
  if (t_client_connect(&r->sock, port) != 0)
    return false;
  r->ctx = SSL_CTX_new(TLS_client_method());
  if (version) { /* security level 0: the client's library would refuse TLS 1.1 itself */
    SSL_CTX_set_security_level(r->ctx, 0);
    SSL_CTX_set_min_proto_version(r->ctx, version);
    SSL_CTX_set_max_proto_version(r->ctx, version);
  }
  SSL_CTX_load_verify_locations(r->ctx, file_in(ours, "ca.pem"), NULL);
  SSL_CTX_set_verify(r->ctx, SSL_VERIFY_PEER, NULL);
  r->ssl = SSL_new(r->ctx);
  r->in = BIO_new(BIO_s_mem());
  r->out = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(r->in, -1);
  SSL_set_bio(r->ssl, r->in, r->out);
  SSL_set_connect_state(r->ssl);
  long deadline = t_now_ms() + T_RESPONSE_MS;
  for (;;) {
    int rc = SSL_do_handshake(r->ssl);
    if (!raw_send_out(r))
      return false;
    if (rc == 1)
      return true;
    if (SSL_get_error(r->ssl, rc) != SSL_ERROR_WANT_READ || t_now_ms() > deadline)
      return false;
    struct pollfd p = {.fd = r->sock.fd, .events = POLLIN};
    char buf[16384];
    ssize_t n = poll(&p, 1, 100) > 0 ? recv(r->sock.fd, buf, sizeof buf, 0) : 0;
    if (n < 0 || (n == 0 && (p.revents & POLLIN)))
      return false;
    BIO_write(r->in, buf, (int)n);
  }
}

static bool raw_tls_connect(raw_tls *r, int port) { return raw_tls_connect_version(r, port, 0); }

static void raw_tls_close(raw_tls *r) {
  SSL_free(r->ssl); /* and its BIOs */
  SSL_CTX_free(r->ctx);
  t_client_close(&r->sock);
  text_free(&r->got);
}

/* Waits for the replies to `count` pings with ids from first, and checks their order. */
static void expect_pongs(raw_tls *r, int first, int count) {
  long deadline = t_now_ms() + T_RESPONSE_MS;
  int lines = 0;
  for (size_t seen = 0; lines < count && t_now_ms() < deadline;) {
    for (; seen < r->got.len; seen++)
      lines += r->got.s[seen] == '\n';
    if (lines < count && raw_recv(r, 200) < 0)
      break;
  }
  CU_ASSERT_EQUAL_FATAL(lines, count);
  const char *p = r->got.s;
  int in_order = 0;
  for (int i = 0; i < count; i++) {
    const char *nl = strchr(p, '\n');
    char want[32];
    snprintf(want, sizeof want, "\"id\":%d", first + i);
    const char *id = strstr(p, want), *ok = strstr(p, "\"ok\":true");
    in_order += id && id < nl && ok && ok < nl;
    p = nl + 1;
  }
  CU_ASSERT_EQUAL(in_order, count);
  r->got.len = 0;
}

/* Each request in its own record, then: every record cut into pieces of 1 to 97 bytes sent
 * one by one (a record's header and body arrive in different reads), and all the records in
 * one send (many records in one read). Every request is answered once, in order. */
static void test_records_cut_anywhere(void) {
  t_daemon d;
  if (!start_tls(&d, NULL))
    return;
  raw_tls r;
  CU_ASSERT_TRUE_FATAL(raw_tls_connect(&r, d.port));
  int one = 1;
  setsockopt(r.sock.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  enum { N = 300 };
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      char line[64];
      int n = snprintf(line, sizeof line, "{\"cmd\":\"ping\",\"id\":%d}\n", round * N + i);
      CU_ASSERT_EQUAL_FATAL(SSL_write(r.ssl, line, n), n);
    }
    char *cipher;
    long len = BIO_get_mem_data(r.out, &cipher);
    CU_ASSERT_TRUE_FATAL(len > 0);
    if (round == 0) {
      long off = 0;
      for (int piece = 1; off < len; piece = piece % 97 + 1) {
        long n = piece < len - off ? piece : len - off;
        CU_ASSERT_EQUAL_FATAL(t_client_send_raw(&r.sock, cipher + off, (size_t)n), 0);
        off += n;
        if (piece % 8 == 0) /* now and then a pause: the daemon reads the pieces apart */
          raw_recv(&r, 1);
      }
      (void)BIO_reset(r.out);
    } else {
      CU_ASSERT_TRUE_FATAL(raw_send_out(&r));
    }
    expect_pongs(&r, round * N, N);
  }
  raw_tls_close(&r);
  STOP_OK(&d, 5000);
}

/* A masked WebSocket text frame of a client (payload under 64 KiB). */
static size_t ws_client_frame(unsigned char *out, const char *payload, size_t len) {
  static const unsigned char mask[4] = {0x37, 0xfa, 0x21, 0x3d};
  size_t n = 0;
  out[n++] = 0x81; /* FIN, text */
  if (len < 126) {
    out[n++] = (unsigned char)(0x80 | len);
  } else {
    out[n++] = 0x80 | 126;
    out[n++] = (unsigned char)(len >> 8);
    out[n++] = (unsigned char)len;
  }
  memcpy(out + n, mask, 4);
  n += 4;
  for (size_t i = 0; i < len; i++)
    out[n + i] = (unsigned char)payload[i] ^ mask[i % 4];
  return n + len;
}

/* The text messages of the daemon's frames in r->got, as lines (the frames taken out). */
static void ws_frames_to_lines(raw_tls *r, text *lines) {
  const unsigned char *p = (const unsigned char *)r->got.s;
  size_t off = 0;
  while (r->got.len - off >= 2) {
    size_t len = p[off + 1] & 0x7f, head = 2;
    if (len == 126) {
      if (r->got.len - off < 4)
        break;
      len = (size_t)p[off + 2] << 8 | p[off + 3];
      head = 4;
    }
    if (r->got.len - off < head + len)
      break;
    text_add(lines, r->got.s + off + head, len);
    text_add(lines, "\n", 1);
    off += head + len;
  }
  memmove(r->got.s, r->got.s + off, r->got.len - off);
  r->got.len -= off;
}

/* An upgrade to a WebSocket over TLS with 600 messages behind it, each in its own record, all
 * in one send: the HTTP side stops at the upgrade with records taken in but not yet
 * decrypted, and the WebSocket side reads them from where it stopped. */
static void test_wss_messages_behind_upgrade(void) {
  t_daemon d;
  if (!start_tls(&d, NULL))
    return;
  raw_tls r;
  CU_ASSERT_TRUE_FATAL(raw_tls_connect(&r, d.http_port));
  char req[256];
  int n = snprintf(req, sizeof req,
                   "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n",
                   d.http_port);
  CU_ASSERT_EQUAL_FATAL(SSL_write(r.ssl, req, n), n);
  enum { N = 600 };
  for (int i = 0; i < N; i++) {
    char msg[64];
    unsigned char frame[80];
    int len = snprintf(msg, sizeof msg, "{\"cmd\":\"ping\",\"id\":%d}", i);
    int flen = (int)ws_client_frame(frame, msg, (size_t)len);
    CU_ASSERT_EQUAL_FATAL(SSL_write(r.ssl, frame, flen), flen);
  }
  CU_ASSERT_TRUE(BIO_ctrl_pending(r.out) > 20000);
  CU_ASSERT_TRUE_FATAL(raw_send_out(&r));
  /* The 101 response, then the answers as frames. */
  long deadline = t_now_ms() + T_RESPONSE_MS;
  const char *end = NULL;
  while (!(end = strstr(text_str(&r.got), "\r\n\r\n")) && t_now_ms() < deadline &&
         raw_recv(&r, 200) >= 0)
    ;
  CU_ASSERT_PTR_NOT_NULL_FATAL(end);
  CU_ASSERT_EQUAL(strncmp(r.got.s, "HTTP/1.1 101", 12), 0);
  size_t head = (size_t)(end + 4 - r.got.s);
  memmove(r.got.s, r.got.s + head, r.got.len - head);
  r.got.len -= head;
  text lines = {0};
  int count = 0;
  while (count < N && t_now_ms() < deadline) {
    ws_frames_to_lines(&r, &lines);
    count = 0;
    for (size_t i = 0; i < lines.len; i++)
      count += lines.s[i] == '\n';
    if (count < N && raw_recv(&r, 200) < 0)
      break;
  }
  CU_ASSERT_EQUAL_FATAL(count, N);
  text_free(&r.got);
  r.got = lines;
  expect_pongs(&r, 0, N);
  raw_tls_close(&r);
  STOP_OK(&d, 5000);
}

/* ---- a subscriber that stops reading ------------------------------------------------------ */

/* With --output-limit 256 KiB, a TLS subscriber of 5,000 moving transforms reads nothing for
 * two seconds: the daemon's memory stays bounded (its frames are dropped while it lags), and
 * once it reads it converges on a full frame of the final state, as on plain TCP. */
static void test_slow_subscriber(void) {
  t_daemon d;
  const char *extra[] = {"--tick-hz", "20", "--output-limit", "262144", NULL};
  if (!start_tls(&d, extra))
    return;
  t_client ctl, sub;
  t_tls_files t = trust_ours();
  if (!CONNECT_TLS(&ctl, d.port, &t) || !CONNECT_TLS(&sub, d.port, &t)) {
    t_daemon_stop(&d, SIGKILL, 2000);
    return;
  }
  enum { KIDS = 5000 };
  OKD(&ctl, "{\"cmd\":\"world.create\",\"world\":\"big\"}");
  cJSON *r = OK(&ctl, "{\"cmd\":\"transform.create\",\"world\":\"big\"}");
  long long root = (long long)t_resp_id(r, "entity");
  cJSON_Delete(r);
  text batch = {0};
  text_addf(&batch, "{\"cmd\":\"batch\",\"world\":\"big\",\"ops\":[");
  for (int i = 0; i < KIDS; i++)
    text_addf(&batch, "%s{\"cmd\":\"transform.create\",\"parent\":%lld,\"t\":[%d,%d,0]}",
              i ? "," : "", root, i % 100, i / 100);
  text_addf(&batch, "]}");
  OKD(&ctl, "%s", batch.s);
  text_free(&batch);
  r = OK(&sub, "{\"cmd\":\"subscribe\",\"world\":\"big\"}");
  cJSON_Delete(r);
  t_sleep_ms(200);
  long base = t_rss_kib(d.pid), peak = base;
  int x = 0;
  for (long end = t_now_ms() + 2000; t_now_ms() < end; t_sleep_ms(50)) {
    OKD(&ctl, "{\"cmd\":\"transform.set_local\",\"world\":\"big\",\"entity\":%lld,\"t\":[%d,0,0]}",
        root, ++x);
    long rss = t_rss_kib(d.pid);
    peak = rss > peak ? rss : peak;
  }
  CU_ASSERT_TRUE(peak - base < 64 * 1024);
  if (peak - base >= 64 * 1024)
    fprintf(stderr, "  memory grew by %ld KiB while a TLS subscriber stalled\n", peak - base);
  /* It reads now: frames, then a full frame with the root where it stopped. */
  bool converged = false;
  long deadline = t_now_ms() + 20000;
  while (!converged && t_now_ms() < deadline) {
    cJSON *f = t_next_event(&sub, 3000);
    if (!f)
      break;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "full"))) {
      const cJSON *set = cJSON_GetObjectItemCaseSensitive(f, "set"), *it;
      cJSON_ArrayForEach(it, set) {
        if (t_resp_num(it, "e") == (double)root) {
          const cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "m");
          converged =
              cJSON_GetArraySize(set) == KIDS + 1 && cJSON_GetArrayItem(m, 12)->valuedouble == x;
        }
      }
    }
    cJSON_Delete(f);
  }
  CU_ASSERT_TRUE(converged);
  r = OK(&ctl, "{\"cmd\":\"info\"}");
  const cJSON *metrics = cJSON_GetObjectItemCaseSensitive(r, "metrics");
  CU_ASSERT_TRUE(t_resp_num(metrics, "stream_lags_total") >= 1);
  CU_ASSERT_TRUE(t_resp_num(metrics, "stream_resyncs_total") >= 1);
  cJSON_Delete(r);
  /* The connection is as good as new: a request and its answer. */
  OKD(&sub, "{\"cmd\":\"ping\"}");
  t_client_close(&sub);
  t_client_close(&ctl);
  STOP_OK(&d, 5000);
}

/* ---- refusals ----------------------------------------------------------------------------- */

/* Plain text on either TLS port is a failed handshake: closed, nothing run, nothing answered. */
static void test_plain_text_refused(void) {
  t_daemon d;
  if (!start_tls(&d, NULL))
    return;
  t_client plain;
  CONNECT(&plain, d.port);
  const char *lines = "{\"cmd\":\"world.create\",\"world\":\"plain\"}\n{\"cmd\":\"ping\"}\n";
  t_client_send_raw(&plain, lines, strlen(lines));
  char *got = t_client_recv(&plain, 3000);
  CU_ASSERT_PTR_NULL(got);
  free(got);
  CU_ASSERT_TRUE(t_client_closed(&plain, 3000));
  t_client_close(&plain);
  char *resp;
  bool closed;
  int status = t_http_raw(d.http_port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &resp, &closed);
  CU_ASSERT_EQUAL(status, 0);
  CU_ASSERT_TRUE(closed);
  CU_ASSERT_PTR_NULL(strstr(resp, "scened_"));
  free(resp);
  t_client c;
  t_tls_files t = trust_ours();
  if (CONNECT_TLS(&c, d.port, &t)) {
    cJSON *r = OK(&c, "{\"cmd\":\"info\"}");
    CU_ASSERT_EQUAL(t_resp_num(r, "worlds"), 0);
    CU_ASSERT_EQUAL(t_resp_num(r, "commands"), 1); /* this one */
    cJSON_Delete(r);
    t_client_close(&c);
  }
  CU_ASSERT_EQUAL(https_metric(&d, "scened_tls_handshake_failures_total{reason=\"not_tls\"}"), 2);
  STOP_OK(&d, 5000);
}

/* TLS 1.2 or later: a client that offers only TLS 1.1 fails its handshake, counted as a
 * protocol failure; one that offers only 1.2, or only 1.3, gets its answers. */
static void test_versions(void) {
  t_daemon d;
  if (!start_tls(&d, NULL))
    return;
  static const struct {
    int version;
    bool accepted;
  } cases[] = {{TLS1_1_VERSION, false}, {TLS1_2_VERSION, true}, {TLS1_3_VERSION, true}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    raw_tls r;
    bool done = raw_tls_connect_version(&r, d.port, cases[i].version);
    CU_ASSERT_EQUAL(done, cases[i].accepted);
    if (done) {
      CU_ASSERT_EQUAL(SSL_version(r.ssl), cases[i].version);
      const char *ping = "{\"cmd\":\"ping\",\"id\":0}\n";
      CU_ASSERT_EQUAL(SSL_write(r.ssl, ping, (int)strlen(ping)), (int)strlen(ping));
      CU_ASSERT_TRUE(raw_send_out(&r));
      expect_pongs(&r, 0, 1);
    }
    raw_tls_close(&r);
  }
  CU_ASSERT_EQUAL(https_metric(&d, "scened_tls_handshake_failures_total{reason=\"protocol\"}"), 1);
  CU_ASSERT_EQUAL(https_metric(&d, "scened_tls_handshakes_total{port=\"protocol\"}"), 2);
  STOP_OK(&d, 5000);
}

/* The clients refuse a daemon whose certificate no CA they were given has signed. */
static void test_untrusted_daemon(void) {
  t_daemon d;
  if (!start_tls(&d, NULL))
    return;
  char err[256];
  scn_cli_options o = {.host = "127.0.0.1", .port = d.port, .tls_ca = file_in(theirs, "ca.pem")};
  scn_cli *cli = scn_cli_connect(&o, err, sizeof err);
  CU_ASSERT_PTR_NULL(cli);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not trusted"));
  scn_cli_close(cli);
  /* By name and by address, with the right CA, it connects. */
  o.tls_ca = file_in(ours, "ca.pem");
  const char *hosts[] = {"127.0.0.1", "localhost"};
  for (int i = 0; i < 2; i++) {
    o.host = hosts[i];
    cli = scn_cli_connect(&o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(cli);
    CU_ASSERT_EQUAL(cli ? scn_cli_call_line(cli, "{\"cmd\":\"ping\"}", NULL) : -1, SCN_CLI_OK);
    scn_cli_close(cli);
  }
  /* scenectl: exit 2 and the reason; with the right CA, the answer. */
  const char *ctl = getenv("SCENECTL_BIN") ? getenv("SCENECTL_BIN") : "build/scenectl";
  char port[16];
  snprintf(port, sizeof port, "%d", d.port);
  struct {
    const char *ca;
    int code;
  } runs[] = {{file_in(theirs, "ca.pem"), 2}, {file_in(ours, "ca.pem"), 0}, {NULL, 2}};
  for (int i = 0; i < 3; i++) {
    const char *args[] = {"--port",
                          port,
                          runs[i].ca ? "--tls-ca" : "--tls",
                          runs[i].ca ? runs[i].ca : "world.create",
                          runs[i].ca ? "world.create" : "world=x",
                          runs[i].ca ? "world=x" : NULL,
                          NULL};
    t_proc p;
    CU_ASSERT_FATAL(t_proc_start(&p, ctl, args, NULL, NULL, 0));
    CU_ASSERT_EQUAL(t_proc_wait(&p, 20000), runs[i].code);
    if (runs[i].code)
      CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.err), "not trusted"));
    t_proc_free(&p);
  }
  /* Only the trusted run created the world. */
  t_client c;
  t_tls_files t = trust_ours();
  if (CONNECT_TLS(&c, d.port, &t)) {
    cJSON *r = OK(&c, "{\"cmd\":\"info\"}");
    CU_ASSERT_EQUAL(t_resp_num(r, "worlds"), 1);
    cJSON_Delete(r);
    t_client_close(&c);
  }
  CU_ASSERT_TRUE(https_metric(&d, "scened_tls_handshake_failures_total{reason=\"peer_refused\"}") >=
                 2);
  STOP_OK(&d, 5000);
}

/* The Python client (the standard library's ssl module): its self-test over TLS, a client
 * certificate when the daemon asks for one, and a refusal of an untrusted daemon. */
static void test_python_client(void) {
  char script[1024];
  if (system("command -v python3 >/dev/null 2>&1") != 0) {
    printf("  note: python3 is not on PATH; the Python client over TLS is skipped\n");
    return;
  }
  CU_ASSERT_FATAL(t_find_script("scened_client.py", script, sizeof script));
  t_daemon d;
  const char *extra[] = {"--tls-ca", file_in(ours, "ca.pem"), NULL};
  if (!start_tls(&d, extra))
    return;
  char port[16];
  snprintf(port, sizeof port, "%d", d.port);
  struct {
    const char *ca, *cert, *key;
    int code;
    const char *err;
  } runs[] = {
      {file_in(ours, "ca.pem"), file_in(ours, "client.pem"), file_in(ours, "client.key"), 0, ""},
      {file_in(theirs, "ca.pem"), file_in(ours, "client.pem"), file_in(ours, "client.key"), 2,
       "CERTIFICATE_VERIFY_FAILED"},
  };
  for (int i = 0; i < 2; i++) {
    const char *args[] = {"--host",    "localhost", "--port",     port,
                          "--tls-ca",  runs[i].ca,  "--tls-cert", runs[i].cert,
                          "--tls-key", runs[i].key, "--selftest", NULL};
    t_proc p;
    CU_ASSERT_FATAL(t_proc_start(&p, script, args, NULL, NULL, 0));
    int code = t_proc_wait(&p, 30000);
    CU_ASSERT_EQUAL(code, runs[i].code);
    CU_ASSERT_PTR_NOT_NULL(strstr(text_str(&p.err), runs[i].err));
    if (code != runs[i].code)
      fprintf(stderr, "  scened_client.py: exit %d\n%s%s\n", code, text_str(&p.out),
              text_str(&p.err));
    t_proc_free(&p);
  }
  STOP_OK(&d, 5000);
}

/* Sends a request that creates world over c and tells whether any answer came. */
static bool answered(t_client *c, const char *world) {
  char line[128];
  snprintf(line, sizeof line, "{\"cmd\":\"world.create\",\"world\":\"%s\"}", world);
  if (t_client_send(c, line) != 0)
    return false;
  char *got = t_client_recv(c, 3000);
  free(got);
  return got != NULL;
}

/* With --tls-ca, a client without a certificate, or with one another CA signed, is refused
 * and nothing it sent runs; one with a certificate of that CA is served. */
static void test_client_certificates(void) {
  t_daemon d;
  const char *extra[] = {"--tls-ca", file_in(ours, "ca.pem"), NULL};
  if (!start_tls(&d, extra))
    return;
  t_tls_files none = trust_ours();
  t_tls_files foreign = {file_in(ours, "ca.pem"), file_in(theirs, "client.pem"),
                         file_in(theirs, "client.key")};
  t_tls_files good = {file_in(ours, "ca.pem"), file_in(ours, "client.pem"),
                      file_in(ours, "client.key")};
  t_client c;
  char err[256];
  /* TLS 1.3 lets the client finish its side first: the refusal comes as the connection's end. */
  if (t_client_connect_tls(&c, d.port, &none, err, sizeof err) == 0) {
    CU_ASSERT_FALSE(answered(&c, "nocert"));
    t_client_close(&c);
  }
  if (t_client_connect_tls(&c, d.port, &foreign, err, sizeof err) == 0) {
    CU_ASSERT_FALSE(answered(&c, "foreign"));
    t_client_close(&c);
  }
  if (CONNECT_TLS(&c, d.port, &good)) {
    cJSON *r = OK(&c, "{\"cmd\":\"world.list\"}");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "worlds")), 0);
    cJSON_Delete(r);
    t_client_close(&c);
  }
  /* HTTPS asks for the certificate too. */
  char *resp;
  CU_ASSERT_EQUAL(t_https_get(d.http_port, &none, "/healthz", &resp), 0);
  free(resp);
  CU_ASSERT_EQUAL(t_https_get(d.http_port, &good, "/healthz", &resp), 200);
  free(resp);
  char *page = NULL;
  CU_ASSERT_EQUAL(t_https_get(d.http_port, &good, "/metrics", &page), 200);
  CU_ASSERT_TRUE(
      page_metric(page, "scened_tls_handshake_failures_total{reason=\"client_certificate\"}") >= 3);
  free(page);
  STOP_OK(&d, 5000);
}

/* ---- handshakes that never end ------------------------------------------------------------ */

/* Two connections that never finish a handshake hold both slots of --max-clients 2: a TLS
 * client then gets one LIMIT line. Within the timeout both are closed, and the slots serve. */
static void test_handshake_timeout(void) {
  t_daemon d;
  /* 2 s: long enough for the refused client's own handshake, even under valgrind. */
  const char *extra[] = {"--tls-handshake-timeout", "2", "--max-clients", "2", NULL};
  if (!start_tls(&d, extra))
    return;
  t_client silent, partial, c;
  CONNECT(&silent, d.port);
  CONNECT(&partial, d.port);
  t_client_send_raw(&partial, "\x16\x03\x01\x02", 4); /* the start of a ClientHello */
  long t0 = t_now_ms();
  t_tls_files t = trust_ours();
  if (CONNECT_TLS(&c, d.port, &t)) {
    cJSON *r = t_recv_object(&c, 5000);
    CU_ASSERT_TRUE(t_resp_code(r) && !strcmp(t_resp_code(r), "LIMIT"));
    cJSON_Delete(r);
    CU_ASSERT_TRUE(t_client_closed(&c, 3000));
    t_client_close(&c);
  }
  CU_ASSERT_TRUE(t_client_closed(&silent, 8000));
  CU_ASSERT_TRUE(t_client_closed(&partial, 8000));
  long took = t_now_ms() - t0;
  CU_ASSERT_TRUE(took >= 1900 && took < 7000);
  t_client_close(&silent);
  t_client_close(&partial);
  if (CONNECT_TLS(&c, d.port, &t)) {
    OKD(&c, "{\"cmd\":\"ping\"}");
    t_client_close(&c);
  }
  CU_ASSERT_EQUAL(https_metric(&d, "scened_tls_handshake_failures_total{reason=\"timeout\"}"), 2);
  CU_ASSERT_EQUAL(https_metric(&d, "scened_limit_rejections_total{limit=\"max_clients\"}"), 1);
  STOP_OK(&d, 5000);
}

/* ---- HTTPS -------------------------------------------------------------------------------- */

static void test_https(void) {
  t_daemon d;
  if (!start_tls(&d, NULL))
    return;
  t_tls_files t = trust_ours();
  char *resp;
  CU_ASSERT_EQUAL(t_https_get(d.http_port, &t, "/healthz", &resp), 200);
  CU_ASSERT_PTR_NOT_NULL(strstr(resp, "\r\n\r\nok\n"));
  free(resp);
  CU_ASSERT_EQUAL(t_https_get(d.http_port, &t, "/readyz", &resp), 200);
  free(resp);
  /* Keep-alive: two requests on one connection, both answered. */
  bool closed;
  CU_ASSERT_EQUAL(t_https_raw(d.http_port, &t,
                              "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                              "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                              &resp, &closed),
                  200);
  CU_ASSERT_PTR_NOT_NULL(strstr(strstr(resp, "ok\n") + 3, "HTTP/1.1 200 OK"));
  free(resp);
  char *page = NULL;
  CU_ASSERT_EQUAL(t_https_get(d.http_port, &t, "/metrics", &page), 200);
  const char *body = page ? strstr(page, "\r\n\r\n") : NULL;
  CU_ASSERT_PTR_NOT_NULL_FATAL(body);
  CU_ASSERT_TRUE(page_metric(body + 4, "scened_tls_handshakes_total{port=\"http\"}") >= 4);
  double expiry = page_metric(body + 4, "scened_tls_certificate_expiry_timestamp_seconds");
  double now = (double)time(NULL);
  CU_ASSERT_TRUE(expiry > now + 800 * 86400.0 && expiry < now + 830 * 86400.0);
  char path[] = "/tmp/scened-tls-metrics-XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0 && system("command -v promtool >/dev/null 2>&1") == 0) {
    CU_ASSERT(write(fd, body + 4, strlen(body + 4)) == (ssize_t)strlen(body + 4));
    char cmd[160];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s >/dev/null 2>&1", path);
    CU_ASSERT_EQUAL(system(cmd), 0);
  }
  if (fd >= 0) {
    close(fd);
    unlink(path);
  }
  free(page);
  STOP_OK(&d, 5000);
}

/* ---- files refused at start --------------------------------------------------------------- */

static void test_bad_files(void) {
  const char *cert = file_in(ours, "server.pem"), *key = file_in(ours, "server.key");
  const char *other_key = file_in(theirs, "server.key"), *ca = file_in(ours, "ca.pem");
  const char *const cases[][7] = {
      {"--tls-cert", "/nonexistent/server.pem", "--tls-key", key, NULL},
      {"--tls-cert", key, "--tls-key", key, NULL},        /* no certificate in it */
      {"--tls-cert", cert, "--tls-key", cert, NULL},      /* no key in it */
      {"--tls-cert", cert, "--tls-key", other_key, NULL}, /* a key of another certificate */
      {"--tls-cert", cert, "--tls-key", key, "--tls-ca", key, NULL}, /* no CA in it */
      {"--tls-cert", cert, NULL},                                    /* no key */
      {"--tls-ca", ca, NULL},                                        /* no certificate */
  };
  const char *why[] = {"No such file",    "no usable PEM certificate", "no usable PEM private key",
                       "does not match",  "no usable PEM CA",          "needs --tls-key",
                       "needs --tls-cert"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[12] = {"--listen", "127.0.0.1:0", "--http", "off"};
    int n = 4;
    for (int k = 0; cases[i][k]; k++)
      args[n++] = cases[i][k];
    args[n] = NULL;
    t_proc p;
    CU_ASSERT_FATAL(t_proc_start(&p, t_daemon_bin(), args, NULL, NULL, 0));
    CU_ASSERT_EQUAL(t_proc_wait(&p, 10000), 2);
    const char *err = text_str(&p.err);
    const char *nl = strchr(err, '\n');
    bool one_line = nl && nl[1] == '\0' && !strncmp(err, "scened: ", 8);
    CU_ASSERT_TRUE(one_line && strstr(err, why[i]));
    if (!one_line || !strstr(err, why[i]))
      fprintf(stderr, "  case %zu: expected one line with \"%s\", got: %s\n", i, why[i], err);
    t_proc_free(&p);
  }
}

/* ---- registration ------------------------------------------------------------------------- */

static int suite_init(void) {
  return t_make_certs(ours, sizeof ours) && t_make_certs(theirs, sizeof theirs) ? 0 : -1;
}

static int suite_clean(void) {
  t_remove_tree(ours);
  t_remove_tree(theirs);
  return 0;
}

int t_register_daemon_tls(void) {
  static const t_test tests[] = {
      {"every command over TLS", test_every_command},
      {"20,000 pipelined requests over TLS, in order", test_pipelined},
      {"records cut into pieces, and many records in one read", test_records_cut_anywhere},
      {"WebSocket messages behind the upgrade, in the same read", test_wss_messages_behind_upgrade},
      {"a TLS subscriber that stops reading lags, then resyncs", test_slow_subscriber},
      {"plain text on a TLS port is never run", test_plain_text_refused},
      {"TLS 1.2 and 1.3 accepted, 1.1 refused", test_versions},
      {"clients refuse an untrusted daemon", test_untrusted_daemon},
      {"the Python client over TLS", test_python_client},
      {"--tls-ca: clients without a good certificate are refused", test_client_certificates},
      {"a stalled handshake is cut off and frees its slot", test_handshake_timeout},
      {"HTTPS: health, keep-alive, metrics with the TLS figures", test_https},
      {"unreadable or mismatched files: one line, exit 2", test_bad_files},
  };
  return T_ADD_SUITE("daemon_tls", suite_init, suite_clean, tests);
}

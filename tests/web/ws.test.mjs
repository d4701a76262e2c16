// The WebSocket endpoint (GET /ws on the HTTP port), driven by the `ws` package, an RFC 6455
// client from the npm registry, and by raw frames where the test must break the rules.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  TcpClient, WsClient, closeCode, frame, lagThenResync, rawHttp, rawWs, startDaemon, until,
  upgradeRequest,
} from './lib.mjs';

const ok = (r) => {
  assert.equal(r.ok, true, JSON.stringify(r));
  return r;
};
const code = (r) => (r.ok === false ? r.error.code : 'ok');

describe('websocket: every command', () => {
  let d, dataDir, ws, tcp;
  before(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'scened-ws-'));
    d = await startDaemon(['--data', dataDir]);
    ws = await WsClient.connect(d.httpPort);
    tcp = await TcpClient.connect(d.port);
  });
  after(async () => {
    ws.ws.terminate();
    tcp.close();
    assert.equal(await d.stop(), 0);
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('ping and hello', async () => {
    assert.deepEqual(await ws.call({ cmd: 'ping', id: 1 }), { id: 1, ok: true });
    const h = ok(await ws.call({ cmd: 'hello' }));
    assert.equal(h.server, 'scened');
    assert.equal(h.protocol, 1);
  });

  test('worlds and entities', async () => {
    ok(await ws.call({ cmd: 'world.create', world: 'main' }));
    assert.equal(code(await ws.call({ cmd: 'world.create', world: 'main' })), 'ALREADY_EXISTS');
    ok(await ws.call({ cmd: 'world.create', world: 'scratch' }));
    const list = ok(await ws.call({ cmd: 'world.list' }));
    assert.deepEqual(list.worlds.map((w) => w.name), ['main', 'scratch']);
    ok(await ws.call({ cmd: 'world.destroy', world: 'scratch' }));
    const e = ok(await ws.call({ cmd: 'entity.create', count: 3 }));
    assert.equal(e.entities.length, 3);
    ok(await ws.call({ cmd: 'entity.destroy', entity: e.entities[2] }));
    assert.equal(code(await ws.call({ cmd: 'entity.destroy', entity: e.entities[2] })), 'NOT_FOUND');
  });

  test('transforms', async () => {
    const car = ok(await ws.call({ cmd: 'transform.create', world: 'main', name: 'car', t: [10, 0, 0] })).entity;
    const wheel = ok(await ws.call({ cmd: 'transform.create', world: 'main', parent: car, name: 'wheel', t: [2, 0, 0] })).entity;
    const spare = ok(await ws.call({ cmd: 'transform.create', world: 'main', name: 'spare' })).entity;
    let g = ok(await ws.call({ cmd: 'transform.get', world: 'main', entity: wheel }));
    assert.equal(g.parent, car);
    assert.equal(g.name, 'wheel');
    assert.deepEqual(g.world.slice(12), [12, 0, 0, 1]);
    ok(await ws.call({ cmd: 'transform.set_local', world: 'main', entity: car, t: [0, 5, 0] }));
    ok(await ws.call({ cmd: 'transform.set_world', world: 'main', entity: wheel, matrix: [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 5, 0, 1] }));
    g = ok(await ws.call({ cmd: 'transform.get', world: 'main', entity: wheel }));
    assert.deepEqual(g.local.slice(12), [1, 0, 0, 1]);
    assert.deepEqual(ok(await ws.call({ cmd: 'transform.children', world: 'main', entity: car })).children, [wheel]);
    ok(await ws.call({ cmd: 'transform.link', world: 'main', entity: spare, parent: car, keep: 'world' }));
    assert.equal(code(await ws.call({ cmd: 'transform.link', world: 'main', entity: car, parent: spare })), 'CYCLE');
    ok(await ws.call({ cmd: 'transform.unlink', world: 'main', entity: spare }));
    ok(await ws.call({ cmd: 'transform.rename', world: 'main', entity: wheel, name: 'wheel_fl' }));
    assert.equal(ok(await ws.call({ cmd: 'transform.find', world: 'main', path: 'car/wheel_fl' })).entity, wheel);
    const rel = ok(await ws.call({ cmd: 'transform.relative', world: 'main', entity: wheel, to: car }));
    assert.deepEqual(rel.matrix.slice(12), [1, 0, 0, 1]);
    const b = ok(await ws.call({
      cmd: 'batch', world: 'main',
      ops: [{ cmd: 'transform.set_local', entity: spare, t: [0, 0, 1], id: 'a' }, { cmd: 'transform.get', entity: spare }],
    }));
    assert.equal(b.results.length, 2);
    assert.equal(b.results[0].id, 'a');
    assert.deepEqual(b.results[1].world.slice(12), [0, 0, 1, 1]);
    ok(await ws.call({ cmd: 'transform.destroy', world: 'main', entity: spare }));
    assert.equal(code(await ws.call({ cmd: 'transform.get', world: 'main', entity: spare })), 'NOT_FOUND');
  });

  test('info and errors', async () => {
    const i = ok(await ws.call({ cmd: 'info' }));
    assert.ok(i.connections >= 2);
    assert.equal(code(await ws.call({ cmd: 'nope' })), 'UNKNOWN_COMMAND');
    ws.sendLine('{"cmd":');
    const bad = await ws.inbox.next();
    assert.equal(bad.error.code, 'BAD_JSON');
    assert.equal(bad.id, undefined);
  });

  test('save: a deferred reply keeps later replies in order', async () => {
    ws.sendLine(JSON.stringify({ cmd: 'save', id: 's' }));
    ws.sendLine(JSON.stringify({ cmd: 'ping', id: 'after' }));
    const s = ok(await ws.response('s', 10000));
    assert.ok(s.bytes > 0);
    assert.deepEqual(await ws.response('after'), { id: 'after', ok: true });
  });

  test('a subscription; TCP and WebSocket clients see each other at once', async () => {
    const sub = ok(await ws.call({ cmd: 'subscribe', world: 'main' })).sub;
    const full = await ws.event((e) => e.event === 'frame' && e.sub === sub);
    assert.equal(full.full, true);
    assert.equal(full.world, 'main');
    const car = ok(await tcp.call({ cmd: 'transform.find', world: 'main', path: 'car' })).entity;
    ok(await tcp.call({ cmd: 'transform.set_local', world: 'main', entity: car, t: [7, 7, 7] }));
    // the TCP change is visible to a WebSocket read at once ...
    const g = ok(await ws.call({ cmd: 'transform.get', world: 'main', entity: car }));
    assert.deepEqual(g.world.slice(12), [7, 7, 7, 1]);
    // ... and streamed to the WebSocket subscriber
    const delta = await ws.event((e) => e.event === 'frame' && e.sub === sub && e.set.some((s) => s.e === car));
    assert.equal(delta.full, false);
    assert.deepEqual(delta.set.find((s) => s.e === car).m.slice(12), [7, 7, 7, 1]);
    // and the other way round
    const made = ok(await ws.call({ cmd: 'transform.create', world: 'main', name: 'from_ws', t: [1, 2, 3] })).entity;
    const seen = ok(await tcp.call({ cmd: 'transform.get', world: 'main', entity: made }));
    assert.deepEqual(seen.world.slice(12), [1, 2, 3, 1]);
    ok(await ws.call({ cmd: 'unsubscribe', sub }));
    assert.equal(code(await ws.call({ cmd: 'unsubscribe', sub })), 'NOT_FOUND');
  });

  test('world.destroy ends the subscription with an event', async () => {
    ok(await ws.call({ cmd: 'world.create', world: 'doomed' }));
    const sub = ok(await ws.call({ cmd: 'subscribe', world: 'doomed' })).sub;
    ok(await tcp.call({ cmd: 'world.destroy', world: 'doomed' }));
    const ev = await ws.event((e) => e.event === 'world_destroyed' && e.sub === sub);
    assert.equal(ev.world, 'doomed');
  });
});

describe('websocket: messages and framing', () => {
  let d;
  before(async () => { d = await startDaemon(['--max-line', '1024']); });
  after(async () => { assert.equal(await d.stop(), 0); });

  test('a message is one line: a trailing line end is allowed, a blank message is no request', async () => {
    const ws = await WsClient.connect(d.httpPort);
    ws.sendLine('{"cmd":"ping","id":1}\r\n');
    ws.sendLine('  \t ');
    ws.sendLine('');
    ws.sendLine('{"cmd":"ping","id":2}\n');
    assert.deepEqual(await ws.inbox.next(), { id: 1, ok: true });
    assert.deepEqual(await ws.inbox.next(), { id: 2, ok: true });
    assert.ok(ws.raw.every((m) => !m.isBinary && !m.text.includes('\n')), 'text messages without line ends');
    await ws.close();
  });

  test('fragmented messages, with a ping between fragments', async () => {
    const ws = await WsClient.connect(d.httpPort);
    let pongs = 0;
    ws.ws.on('pong', (data) => { if (data.toString() === 'hi') pongs++; });
    ws.ws.send('{"cmd":"pi', { fin: false });
    ws.ws.ping('hi');
    ws.ws.send('ng","id":', { fin: false });
    ws.ws.send('"frag"}', { fin: true });
    assert.deepEqual(await ws.inbox.next(), { id: 'frag', ok: true });
    await until(() => pongs === 1, 'the pong');
    await ws.close();
  });

  test('a message over --max-line gets LIMIT and the connection stays usable', async () => {
    const ws = await WsClient.connect(d.httpPort);
    // (padded with whitespace: ping takes no member that could hold it)
    ws.sendLine(`{"cmd":"ping"${' '.repeat(5000)}}`);
    // also one over the limit in fragments: LIMIT once
    ws.ws.send('y'.repeat(800), { fin: false });
    ws.ws.send('y'.repeat(800), { fin: false });
    ws.ws.send('y'.repeat(800), { fin: true });
    const head = '{"cmd":"ping","id":"exact"', tail = '}';
    ws.sendLine(head + ' '.repeat(1024 - head.length - tail.length) + tail); // exactly --max-line
    const a = await ws.inbox.next(), b = await ws.inbox.next();
    assert.equal(a.error.code, 'LIMIT');
    assert.equal(b.error.code, 'LIMIT');
    assert.deepEqual(await ws.inbox.next(), { id: 'exact', ok: true });
    assert.deepEqual(await ws.call({ cmd: 'ping', id: 'still' }), { id: 'still', ok: true });
    await ws.close();
  });

  test('a frame larger than any message is refused with 1009', async () => {
    const r = await rawWs(d.httpPort);
    r.sock.write(frame(1, 'abc', { length: 2 ** 32 }));
    await r.closed;
    const f = r.frames();
    assert.equal(f.at(-1).opcode, 8);
    assert.equal(closeCode(f.at(-1)), 1009);
  });

  test('a binary message is refused with 1003 after the replies before it', async () => {
    const ws = await WsClient.connect(d.httpPort);
    ws.sendLine('{"cmd":"ping","id":"before"}');
    ws.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    ws.sendLine('{"cmd":"ping","id":"ignored"}');
    assert.deepEqual(await ws.inbox.next(), { id: 'before', ok: true });
    const c = await ws.closed;
    assert.equal(c.code, 1003);
    assert.equal(ws.raw.length, 1);
  });

  test('text that is not UTF-8 fails the connection with 1007', async () => {
    const ws = await WsClient.connect(d.httpPort);
    ws.ws.send(Buffer.from([0x7b, 0xff, 0x7d]), { binary: false });
    assert.equal((await ws.closed).code, 1007);
  });

  test('an unmasked client frame fails the connection with 1002', async () => {
    const r = await rawWs(d.httpPort);
    r.sock.write(frame(1, '{"cmd":"ping"}', { mask: false }));
    await r.closed;
    assert.equal(closeCode(r.frames().at(-1)), 1002);
  });

  test('ping, pong and the close handshake by hand', async () => {
    const r = await rawWs(d.httpPort);
    assert.match(r.head, /^HTTP\/1\.1 101 /);
    r.sock.write(Buffer.concat([
      frame(9, 'abc'),
      frame(1, '{"cmd":"ping","id":1}'),
      frame(10, 'unsolicited pong is ignored'),
      frame(1, '{"cmd":"ping","id":2}'),
    ]));
    await until(() => r.frames().length >= 3, 'the pong and two replies');
    const f = r.frames();
    assert.deepEqual(f.map((x) => x.opcode), [10, 1, 1]);
    assert.equal(f[0].payload.toString(), 'abc');
    assert.deepEqual(JSON.parse(f[2].payload), { id: 2, ok: true });
    const reason = Buffer.concat([Buffer.from([0x03, 0xe8]), Buffer.from('done')]);
    r.sock.write(Buffer.concat([frame(1, '{"cmd":"ping","id":3}'), frame(8, reason)]));
    await r.closed; // the server closes the TCP connection after answering the close
    const all = r.frames();
    assert.deepEqual(JSON.parse(all.at(-2).payload), { id: 3, ok: true }, 'replies before the close');
    assert.equal(all.at(-1).opcode, 8);
    assert.equal(closeCode(all.at(-1)), 1000);
  });

  test('a client that closes cleanly gets 1000 back', async () => {
    const ws = await WsClient.connect(d.httpPort);
    assert.deepEqual(await ws.call({ cmd: 'ping', id: 1 }), { id: 1, ok: true });
    const c = await ws.close(1000, 'bye');
    assert.equal(c.code, 1000);
  });
});

describe('websocket: handshake', () => {
  let d;
  before(async () => { d = await startDaemon(); });
  after(async () => { assert.equal(await d.stop(), 0); });

  const status = (text) => Number(text.split(' ')[1]);

  test('a good handshake gets 101 with the accept key of RFC 6455', async () => {
    const key = 'dGhlIHNhbXBsZSBub25jZQ==';
    const r = await rawHttp(d.httpPort, upgradeRequest(d.httpPort, { 'Sec-WebSocket-Key': key }), { keepOpen: true });
    assert.equal(status(r.text), 101);
    assert.match(r.text, /\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=\r\n/i);
    assert.match(r.text, /\r\nUpgrade: websocket\r\n/i);
    r.sock.destroy();
  });

  test('bad handshakes get 400', async () => {
    const p = d.httpPort;
    const cases = [
      upgradeRequest(p, { 'Sec-WebSocket-Key': null }),
      upgradeRequest(p, { 'Sec-WebSocket-Key': 'short' }),
      upgradeRequest(p, { 'Sec-WebSocket-Version': '8' }),
      upgradeRequest(p, { Upgrade: 'h2c' }),
      upgradeRequest(p, { Connection: 'keep-alive' }),
      upgradeRequest(p).replace('GET', 'POST'),
      upgradeRequest(p).replace('HTTP/1.1', 'HTTP/1.0'),
      `GET /ws HTTP/1.1\r\nHost: 127.0.0.1:${p}\r\n\r\n`,
    ];
    for (const req of cases) {
      const r = await rawHttp(p, req);
      assert.equal(status(r.text), 400, `${req}\n=> ${r.text}`);
    }
    const v = await rawHttp(p, upgradeRequest(p, { 'Sec-WebSocket-Version': '8' }));
    assert.match(v.text, /\r\nSec-WebSocket-Version: 13\r\n/);
  });

  test('upgrades elsewhere than /ws are refused', async () => {
    const r = await rawHttp(d.httpPort, upgradeRequest(d.httpPort).replace('/ws', '/metrics'));
    assert.equal(status(r.text), 400);
  });

  test("a browser page from another origin is refused; the daemon's own page is not", async () => {
    const p = d.httpPort;
    const other = await rawHttp(p, upgradeRequest(p, { Origin: 'http://evil.example' }));
    assert.equal(status(other.text), 403);
    const own = await rawHttp(p, upgradeRequest(p, { Origin: `http://127.0.0.1:${p}` }), { keepOpen: true });
    assert.equal(status(own.text), 101);
    own.sock.destroy();
  });

  test('frames sent right behind the handshake are not lost', async () => {
    const p = d.httpPort;
    const req = Buffer.concat([Buffer.from(upgradeRequest(p)), frame(1, '{"cmd":"ping","id":"early"}')]);
    const r = await rawHttp(p, req, { keepOpen: true });
    let bytes = r.data;
    r.sock.on('data', (x) => { bytes = Buffer.concat([bytes, x]); });
    await until(() => bytes.includes('early'), 'the reply');
    r.sock.destroy();
  });
});

describe('websocket: auth, limits and budgets as on TCP', () => {
  test('auth: hello with the token', async () => {
    const d = await startDaemon(['--auth-token', 's3cret']);
    try {
      const ws = await WsClient.connect(d.httpPort);
      assert.equal(code(await ws.call({ cmd: 'world.list' })), 'UNAUTHORIZED');
      assert.equal(code(await ws.call({ cmd: 'hello' })), 'UNAUTHORIZED');
      assert.equal(code(await ws.call({ cmd: 'hello', token: 'wrong' })), 'UNAUTHORIZED');
      assert.deepEqual(await ws.call({ cmd: 'ping', id: 1 }), { id: 1, ok: true });
      ok(await ws.call({ cmd: 'hello', token: 's3cret' }));
      ok(await ws.call({ cmd: 'world.list' }));
      await ws.close();
    } finally {
      assert.equal(await d.stop(), 0);
    }
  });

  test('--max-clients counts WebSocket connections: one LIMIT message, then close', async () => {
    const d = await startDaemon(['--max-clients', '1']);
    try {
      const tcp = await TcpClient.connect(d.port);
      ok(await tcp.call({ cmd: 'ping' }));
      const ws = await WsClient.connect(d.httpPort);
      const msg = await ws.inbox.next();
      assert.equal(msg.error.code, 'LIMIT');
      assert.equal((await ws.closed).code, 1013);
      tcp.close();
      // once the daemon has seen that close, a WebSocket connection fits again
      const ws2 = await until(async () => {
        const c = await WsClient.connect(d.httpPort);
        const r = await c.call({ cmd: 'info' }).catch(() => null);
        if (r && r.ok) return c;
        c.ws.terminate();
        return null;
      }, 'room for a WebSocket connection', 5000, 50);
      const tcp2 = await TcpClient.connect(d.port);
      assert.equal((await tcp2.inbox.next()).error.code, 'LIMIT');
      tcp2.close();
      await ws2.close();
    } finally {
      assert.equal(await d.stop(), 0);
    }
  });

  test('a subscriber over --output-limit lags, then resyncs with a full frame; replies are kept', async () => {
    const d = await startDaemon(['--output-limit', '64k']);
    try {
      await lagThenResync(d);
    } finally {
      assert.equal(await d.stop(), 0);
    }
  });

  test('SIGTERM: replies go out, then a 1001 close', async () => {
    const d = await startDaemon();
    const ws = await WsClient.connect(d.httpPort);
    ok(await ws.call({ cmd: 'ping' }));
    assert.equal(await d.stop(), 0);
    assert.equal((await ws.closed).code, 1001);
  });
});

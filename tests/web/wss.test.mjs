// WebSocket over TLS (wss:// on the HTTPS port of a daemon with --tls-cert), driven by the `ws`
// package, with certificates made by scripts/tls-certs.sh: the commands and the stream, TCP
// over TLS and wss:// clients seeing each other, a subscriber over --output-limit, clients that
// refuse an untrusted daemon, client certificates (--tls-ca), and rights (--acl) over wss://.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TcpClient, WsClient, lagThenResync, makeCerts, rawHttp, requireModule, startDaemon, until } from './lib.mjs';
import { connect } from '../../client/js/scened.mjs';

const WebSocket = requireModule('ws');

const ok = (r) => {
  assert.equal(r.ok, true, JSON.stringify(r));
  return r;
};
const code = (r) => (r.ok === false ? r.error.code : 'ok');

let ours, theirs;
before(() => {
  ours = makeCerts();
  theirs = makeCerts();
});
after(() => {
  ours.remove();
  theirs.remove();
});

function httpsGet(port, urlPath, options) {
  return new Promise((resolve, reject) => {
    https.get({ host: '127.0.0.1', port, path: urlPath, ...options }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    }).on('error', reject);
  });
}

describe('wss: commands and the stream over TLS', () => {
  let d, ws, tcp;
  before(async () => {
    d = await startDaemon(ours.serverArgs);
    ws = await WsClient.connect(d.httpPort, { ca: ours.ca });
    tcp = await TcpClient.connect(d.port, { ca: ours.ca, servername: 'localhost' });
  });
  after(async () => {
    ws.ws.terminate();
    tcp.close();
    assert.equal(await d.stop(), 0);
  });

  test('commands over wss://, and a TLS TCP client sees them at once', async () => {
    assert.deepEqual(await ws.call({ cmd: 'ping', id: 1 }), { id: 1, ok: true });
    const h = ok(await ws.call({ cmd: 'hello' }));
    assert.deepEqual(h.rights, ['read', 'write', 'admin']);
    assert.deepEqual(h.prefixes, ['*']);
    ok(await ws.call({ cmd: 'world.create', world: 'main' }));
    const car = ok(await ws.call({ cmd: 'transform.create', world: 'main', name: 'car', t: [1, 2, 3] })).entity;
    const g = ok(await tcp.call({ cmd: 'transform.get', world: 'main', entity: car }));
    assert.deepEqual(g.world.slice(12), [1, 2, 3, 1]);
    const b = ok(await ws.call({ cmd: 'batch', world: 'main', ops: [{ cmd: 'transform.set_local', entity: car, t: [4, 0, 0] }, { cmd: 'transform.get', entity: car }] }));
    assert.deepEqual(b.results[1].world.slice(12), [4, 0, 0, 1]);
    assert.equal(code(await ws.call({ cmd: 'transform.get', world: 'nope', entity: car })), 'NOT_FOUND');
  });

  test('a subscription over wss:// follows a TLS TCP client', async () => {
    const car = ok(await tcp.call({ cmd: 'transform.create', world: 'main', name: 'bus' })).entity;
    const sub = ok(await ws.call({ cmd: 'subscribe', world: 'main' })).sub;
    const full = await ws.event((e) => e.event === 'frame' && e.sub === sub && e.full);
    assert.ok(full.set.some((s) => s.e === car));
    ok(await tcp.call({ cmd: 'transform.set_local', world: 'main', entity: car, t: [9, 9, 9] }));
    const delta = await ws.event((e) => e.event === 'frame' && e.sub === sub && !e.full && e.set.some((s) => s.e === car));
    assert.deepEqual(delta.set.find((s) => s.e === car).m.slice(12), [9, 9, 9, 1]);
    ok(await ws.call({ cmd: 'unsubscribe', sub }));
  });

  test('HTTPS: /metrics and /healthz; plain HTTP and ws:// get nothing', async () => {
    const m = await httpsGet(d.httpPort, '/metrics', { ca: ours.ca });
    assert.equal(m.status, 200);
    assert.match(m.body, /scened_tls_handshakes_total\{port="http"\} [1-9]/);
    assert.equal((await httpsGet(d.httpPort, '/healthz', { ca: ours.ca })).body, 'ok\n');
    const plain = await rawHttp(d.httpPort, 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal(plain.text, '');
    await assert.rejects(WsClient.connect(d.httpPort));
  });
});

describe('wss: the JavaScript client module', () => {
  test('scened.mjs over wss://: hello, a mirror from b64 frames; an untrusted daemon refused', async () => {
    const d = await startDaemon(ours.serverArgs);
    const url = `wss://127.0.0.1:${d.httpPort}/ws`;
    try {
      const c = await connect(url, { WebSocket, ca: ours.ca });
      try {
        assert.equal(c.matrices, 'b64');
        await c.call('world.create', { world: 'js' });
        const e = (await c.call('transform.create', { world: 'js', t: [1, 2, 3] })).entity;
        const sub = await c.subscribe('js');
        await c.call('transform.set_local', { world: 'js', entity: e, t: [4, 5, 6] });
        await until(() => { const m = sub.mirror.matrix(e); return m && m[12] === 4; }, 'the mirror follows', 5000);
        assert.deepEqual(Array.from(sub.mirror.matrix(e).slice(12, 15)), [4, 5, 6]);
        await sub.unsubscribe();
      } finally {
        c.close();
      }
      await assert.rejects(connect(url, { WebSocket, ca: theirs.ca }), (err) => err.code === 'CLOSED');
    } finally {
      assert.equal(await d.stop(), 0);
    }
  });
});

describe('wss: refusals', () => {
  test('an untrusted daemon is refused by ws, node:tls and node:https', async () => {
    const d = await startDaemon(ours.serverArgs);
    try {
      await assert.rejects(WsClient.connect(d.httpPort, { ca: theirs.ca }), /certificate/);
      await assert.rejects(TcpClient.connect(d.port, { ca: theirs.ca }), /certificate/);
      await assert.rejects(httpsGet(d.httpPort, '/healthz', { ca: theirs.ca }), /certificate/);
      // and the daemon ran nothing for them
      const ws = await WsClient.connect(d.httpPort, { ca: ours.ca });
      assert.equal(ok(await ws.call({ cmd: 'info' })).commands, 1); // this one
      await ws.close();
    } finally {
      assert.equal(await d.stop(), 0);
    }
  });

  test('--tls-ca: wss:// needs a client certificate of that CA', async () => {
    const d = await startDaemon([...ours.serverArgs, '--tls-ca', ours.caFile]);
    try {
      await assert.rejects(async () => {
        const ws = await WsClient.connect(d.httpPort, { ca: ours.ca });
        await ws.call({ cmd: 'ping' });
      });
      await assert.rejects(async () => {
        const ws = await WsClient.connect(d.httpPort, { ca: ours.ca, cert: theirs.clientCert, key: theirs.clientKey });
        await ws.call({ cmd: 'ping' });
      });
      const ws = await WsClient.connect(d.httpPort, { ca: ours.ca, cert: ours.clientCert, key: ours.clientKey });
      ok(await ws.call({ cmd: 'ping' }));
      await ws.close();
    } finally {
      assert.equal(await d.stop(), 0);
    }
  });
});

describe('wss: rights and budgets', () => {
  test('--acl over wss://: hello names the token, answers its rights; prefixes hold', async () => {
    const hash = (t) => createHash('sha256').update(t).digest('hex');
    const acl = path.join(ours.dir, 'acl');
    writeFileSync(acl, `${hash('op')} read,write,admin *\n${hash('viewer')} read match7.\n`);
    const d = await startDaemon([...ours.serverArgs, '--acl', acl]);
    try {
      const op = await WsClient.connect(d.httpPort, { ca: ours.ca });
      ok(await op.call({ cmd: 'hello', token: 'op' }));
      ok(await op.call({ cmd: 'world.create', world: 'match7.a' }));
      ok(await op.call({ cmd: 'world.create', world: 'match8.x' }));
      const v = await WsClient.connect(d.httpPort, { ca: ours.ca });
      assert.equal(code(await v.call({ cmd: 'world.list' })), 'UNAUTHORIZED');
      assert.equal(code(await v.call({ cmd: 'hello', token: 'nope' })), 'UNAUTHORIZED');
      const h = ok(await v.call({ cmd: 'hello', token: 'viewer' }));
      assert.deepEqual([h.rights, h.prefixes], [['read'], ['match7.']]);
      assert.deepEqual(ok(await v.call({ cmd: 'world.list' })).worlds.map((w) => w.name), ['match7.a']);
      assert.equal(code(await v.call({ cmd: 'subscribe', world: 'match8.x' })), 'UNAUTHORIZED');
      assert.equal(code(await v.call({ cmd: 'transform.create', world: 'match7.a' })), 'UNAUTHORIZED');
      ok(await v.call({ cmd: 'subscribe', world: 'match7.a' }));
      await op.close();
      await v.close();
    } finally {
      assert.equal(await d.stop(), 0);
    }
  });

  test('a wss:// subscriber over --output-limit lags, then resyncs; replies are kept', async () => {
    const d = await startDaemon([...ours.serverArgs, '--output-limit', '64k']);
    try {
      await lagThenResync(d, { ca: ours.ca });
    } finally {
      assert.equal(await d.stop(), 0);
    }
  });
});

// Helpers for the WebSocket and browser tests: start the real daemon on ephemeral ports, talk
// to it over TCP (newline-delimited JSON) and over WebSocket (the `ws` package, an RFC 6455
// client from the npm registry), and speak raw frames where a test needs to break the rules.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, '../..');
const modules = process.env.SCENED_NODE_MODULES || path.join(repo, 'build/web-npm/node_modules');
// The npm packages live in the build directory (make installs them from web/package-lock.json).
export const requireModule = createRequire(path.join(modules, '..', 'index.js'));
export const scenedBin = process.env.SCENED_BIN || path.join(repo, 'build/scened');

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls fn until it returns a truthy value; throws with what after timeoutMs.
export async function until(fn, what, timeoutMs = 5000, everyMs = 20) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

// Daemons still running when this process exits (a test that failed or timed out) are killed.
const running = new Set();
process.on('exit', () => {
  for (const p of running) p.kill('SIGKILL');
});

// Starts scened with --listen 127.0.0.1:0 --http 127.0.0.1:0 plus args; resolves once both
// ports are known (from the "listening on" and "http on" log lines).
export async function startDaemon(args = [], env = {}) {
  const proc = spawn(scenedBin, ['--listen', '127.0.0.1:0', '--http', '127.0.0.1:0', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  let log = '';
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (d) => { log += d; });
  running.add(proc);
  const exited = new Promise((resolve) =>
    proc.on('exit', (code, signal) => {
      running.delete(proc);
      resolve({ code, signal });
    }));
  const d = {
    proc,
    get log() { return log; },
    port: 0,
    httpPort: 0,
    exited,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const r = await exited;
      return r.code;
    },
  };
  await until(() => {
    if (proc.exitCode !== null) throw new Error(`scened exited (${proc.exitCode}):\n${log}`);
    const l = log.match(/listening on 127\.0\.0\.1:(\d+)/), h = log.match(/http on 127\.0\.0\.1:(\d+)/);
    if (l && h) {
      d.port = Number(l[1]);
      d.httpPort = Number(h[1]);
      return true;
    }
    return false;
  }, 'scened to start');
  return d;
}

// A message queue with waiting: push() from a socket, next() from a test.
class Inbox {
  constructor() {
    this.items = [];
    this.waiters = [];
    this.closed = false;
  }
  push(v) {
    const w = this.waiters.shift();
    if (w) w.resolve(v);
    else this.items.push(v);
  }
  end() {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w.resolve(null);
  }
  next(timeoutMs = 5000) {
    if (this.items.length) return Promise.resolve(this.items.shift());
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const w = { resolve: (v) => { clearTimeout(t); resolve(v); } };
      const t = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error('timed out waiting for a message'));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }
}

// Request/response over any line transport: call() waits for the response with its id and
// keeps the stream events that arrive meanwhile for event().
class Rpc {
  constructor() {
    this.inbox = new Inbox();
    this.events = [];
    this.replies = []; // responses that arrived while waiting for an event
    this.nextId = 1;
  }
  async call(req, timeoutMs = 5000) {
    const id = req.id !== undefined ? req.id : `r${this.nextId++}`;
    this.sendLine(JSON.stringify({ ...req, id }));
    return this.response(id, timeoutMs);
  }
  async response(id, timeoutMs = 5000) {
    const i = this.replies.findIndex((r) => JSON.stringify(r.id) === JSON.stringify(id));
    if (i >= 0) return this.replies.splice(i, 1)[0];
    for (;;) {
      const msg = await this.inbox.next(timeoutMs);
      if (msg === null) throw new Error(`connection closed before the response to ${JSON.stringify(id)}`);
      if (msg.event) this.events.push(msg);
      else if (JSON.stringify(msg.id) === JSON.stringify(id)) return msg;
      else throw new Error(`unexpected response ${JSON.stringify(msg)} while waiting for ${JSON.stringify(id)}`);
    }
  }
  // The next message that is a stream event matching pred (kept ones first).
  async event(pred = () => true, timeoutMs = 5000) {
    const i = this.events.findIndex(pred);
    if (i >= 0) return this.events.splice(i, 1)[0];
    const end = Date.now() + timeoutMs;
    for (;;) {
      const msg = await this.inbox.next(Math.max(1, end - Date.now()));
      if (msg === null) throw new Error('connection closed while waiting for an event');
      if (msg.event && pred(msg)) return msg;
      if (msg.event) this.events.push(msg);
      else this.replies.push(msg);
    }
  }
}

// A CA with a server and a client certificate, made by scripts/tls-certs.sh (the openssl
// command line) in a new temporary directory: paths, the CA's PEM text, and remove().
export function makeCerts() {
  const dir = mkdtempSync(path.join(tmpdir(), 'scened-tls-'));
  const r = spawnSync('bash', [path.join(repo, 'scripts/tls-certs.sh'), dir], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tls-certs.sh failed: ${r.stderr}`);
  const f = (name) => path.join(dir, name);
  return {
    dir,
    ca: readFileSync(f('ca.pem')),
    serverArgs: ['--tls-cert', f('server.pem'), '--tls-key', f('server.key')],
    caFile: f('ca.pem'),
    clientCert: readFileSync(f('client.pem')),
    clientKey: readFileSync(f('client.key')),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export class TcpClient extends Rpc {
  // tlsOptions (ca, cert, key, ...): the connection speaks TLS (node:tls), verified.
  static async connect(port, tlsOptions = null) {
    const c = new TcpClient();
    c.sock = tlsOptions
      ? tls.connect({ port, host: '127.0.0.1', ...tlsOptions })
      : net.connect(port, '127.0.0.1');
    await new Promise((resolve, reject) => {
      c.sock.once(tlsOptions ? 'secureConnect' : 'connect', resolve);
      c.sock.once('error', reject);
    });
    let buf = '';
    c.sock.setEncoding('utf8');
    c.sock.on('data', (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        c.inbox.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
      }
    });
    c.sock.on('close', () => c.inbox.end());
    return c;
  }
  sendLine(line) { this.sock.write(`${line}\n`); }
  close() { this.sock.destroy(); }
}

export class WsClient extends Rpc {
  // With options.ca (or any TLS option of the ws package), wss:// on an HTTPS port.
  static async connect(httpPort, options = {}) {
    const WebSocket = requireModule('ws');
    const c = new WsClient();
    const secure = options.ca || options.cert || options.rejectUnauthorized !== undefined;
    c.ws = new WebSocket(`${secure ? 'wss' : 'ws'}://127.0.0.1:${httpPort}/ws`, options);
    c.raw = [];
    c.closed = new Promise((resolve) => {
      c.ws.on('close', (code, reason) => {
        c.inbox.end();
        resolve({ code, reason: reason.toString() });
      });
    });
    c.ws.on('message', (data, isBinary) => {
      const text = data.toString();
      c.raw.push({ text, isBinary });
      c.inbox.push(JSON.parse(text));
    });
    await new Promise((resolve, reject) => {
      c.ws.once('open', resolve);
      c.ws.once('error', reject);
    });
    return c;
  }
  sendLine(line) { this.ws.send(line); }
  close(code = 1000, reason = '') {
    this.ws.close(code, reason);
    return this.closed;
  }
}

// ---- raw sockets, for what a conforming client would never send -----------------------------

export function wsKey() { return randomBytes(16).toString('base64'); }

// An HTTP request written as given; resolves with the raw response text once the server closes
// or after the first response when keepOpen (then also the socket).
export function rawHttp(port, request, { keepOpen = false, timeoutMs = 3000 } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const t = setTimeout(() => {
      sock.destroy();
      resolve({ text: data.toString('latin1'), data, timedOut: true });
    }, timeoutMs);
    sock.on('data', (d) => {
      data = Buffer.concat([data, d]);
      if (keepOpen && data.includes('\r\n\r\n')) {
        clearTimeout(t);
        resolve({ text: data.toString('latin1'), data, sock });
      }
    });
    sock.on('error', reject);
    sock.on('close', () => {
      clearTimeout(t);
      resolve({ text: data.toString('latin1'), data });
    });
    sock.write(request);
  });
}

export function upgradeRequest(port, headers = {}) {
  const h = {
    Host: `127.0.0.1:${port}`,
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': wsKey(),
    'Sec-WebSocket-Version': '13',
    ...headers,
  };
  let req = 'GET /ws HTTP/1.1\r\n';
  for (const [k, v] of Object.entries(h)) if (v !== null) req += `${k}: ${v}\r\n`;
  return `${req}\r\n`;
}

// One client frame: fin, opcode, payload, masked as the RFC requires of clients (unless
// mask is false); length may claim more than the payload holds.
export function frame(opcode, payload = Buffer.alloc(0), { fin = true, mask = true, length } = {}) {
  payload = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const len = length !== undefined ? length : payload.length;
  const head = [(fin ? 0x80 : 0) | opcode];
  const m = mask ? 0x80 : 0;
  if (len < 126) head.push(m | len);
  else if (len < 65536) head.push(m | 126, len >> 8, len & 255);
  else {
    head.push(m | 127);
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(len));
    head.push(...b);
  }
  if (!mask) return Buffer.concat([Buffer.from(head), payload]);
  const key = randomBytes(4);
  const masked = Buffer.from(payload);
  for (let i = 0; i < masked.length; i++) masked[i] ^= key[i & 3];
  return Buffer.concat([Buffer.from(head), key, masked]);
}

// Parses the server's frames out of bytes (after the HTTP response): [{fin, opcode, payload}].
export function parseFrames(buf) {
  const out = [];
  let i = 0;
  while (i + 2 <= buf.length) {
    const fin = (buf[i] & 0x80) !== 0, opcode = buf[i] & 15;
    if (buf[i + 1] & 0x80) throw new Error('the server masked a frame');
    let len = buf[i + 1] & 127, p = i + 2;
    if (len === 126) {
      len = buf.readUInt16BE(p);
      p += 2;
    } else if (len === 127) {
      len = Number(buf.readBigUInt64BE(p));
      p += 8;
    }
    if (p + len > buf.length) break;
    out.push({ fin, opcode, payload: buf.subarray(p, p + len) });
    i = p + len;
  }
  return out;
}

// Opens a WebSocket by hand: resolves with { sock, frames(): parsed frames so far, closed }.
export async function rawWs(port) {
  const r = await rawHttp(port, upgradeRequest(port), { keepOpen: true });
  if (!r.sock) throw new Error(`no upgrade: ${r.text}`);
  const sock = r.sock;
  const end = r.data.indexOf('\r\n\r\n') + 4;
  let bytes = r.data.subarray(end);
  sock.removeAllListeners('data');
  sock.on('data', (d) => { bytes = Buffer.concat([bytes, d]); });
  const closed = new Promise((resolve) => sock.on('close', resolve));
  return { sock, head: r.text.slice(0, end), frames: () => parseFrames(bytes), closed };
}

export function closeCode(f) { return f.payload.length >= 2 ? f.payload.readUInt16BE(0) : null; }

// ---- shared scenarios --------------------------------------------------------------------------

// A WebSocket subscriber of 3,000 moving transforms stops reading while a TCP client moves them
// and the subscriber pipelines pings: on daemon d (started with a small --output-limit) it must
// lag, then, once it reads again, resync with a full frame of the final state, with every ping
// answered in order. tls: { ca } for wss:// and TCP over TLS, as the daemon speaks.
export async function lagThenResync(d, tls = null) {
  const ok = (r) => {
    assert.equal(r.ok, true, JSON.stringify(r));
    return r;
  };
  const tcp = await TcpClient.connect(d.port, tls);
  ok(await tcp.call({ cmd: 'world.create', world: 'busy' }));
  const ops = [];
  for (let i = 0; i < 3000; i++) ops.push({ cmd: 'transform.create', t: [i, 0, 0] });
  ok(await tcp.call({ cmd: 'batch', world: 'busy', ops }));
  const ws = await WsClient.connect(d.httpPort, tls || {});
  const sub = ok(await ws.call({ cmd: 'subscribe', world: 'busy' })).sub;
  await ws.event((e) => e.event === 'frame' && e.full);
  ws.ws.pause(); // stop reading: the socket buffers fill, then the daemon's queue
  let lags = 0, round = 0;
  for (; round < 200 && lags === 0; round++) {
    const moves = [];
    for (let i = 0; i < 3000; i++) moves.push({ cmd: 'transform.set_local', entity: i + 1, t: [i, round + 1, 0] });
    ok(await tcp.call({ cmd: 'batch', world: 'busy', ops: moves }));
    ws.sendLine(JSON.stringify({ cmd: 'ping', id: `p${round}` }));
    await sleep(20);
    lags = ok(await tcp.call({ cmd: 'info' })).metrics.stream_lags_total;
  }
  assert.ok(lags > 0, 'the subscriber lagged');
  const last = ok(await tcp.call({ cmd: 'transform.get', world: 'busy', entity: 1 })).world;
  ws.ws.resume();
  // every ping is answered, in order, and a full frame brings the final state
  const resync = await ws.event((e) => e.event === 'frame' && e.sub === sub && e.full, 20000);
  assert.deepEqual(resync.set.find((s) => s.e === 1).m, last);
  // pings the daemon had not read yet are answered after the resync frame
  const pings = round; // one ping was sent per round
  const got = ws.replies.splice(0);
  while (got.length < pings) {
    const msg = await ws.inbox.next(10000);
    assert.notEqual(msg, null, `the connection stayed open for ${pings} ping replies`);
    if (!msg.event) got.push(msg);
  }
  assert.deepEqual(got.map((r) => r.id), got.map((_, i) => `p${i}`));
  assert.ok(ok(await tcp.call({ cmd: 'info' })).metrics.stream_resyncs_total > 0);
  ws.ws.terminate();
  tcp.close();
}

// got (a packed frame's matrix) is want within the contract's tolerance on a grid of step: each
// translation within step / 2 plus float32 rounding, the rotation within 0.5 degrees, each
// column's length (the scale) as sent. Why not, or ''.
export function packedMismatch(step, want, got) {
  if (!got) return 'no matrix';
  for (let k = 12; k < 15; k++)
    if (Math.abs(got[k] - want[k]) > step / 2 + Math.abs(want[k]) * 2 ** -23 + 1e-12) return `translation ${k}: ${got[k]} for ${want[k]}`;
  let trace = 0;
  for (let j = 0; j < 3; j++) {
    const w = want.slice(4 * j, 4 * j + 3), g = Array.from(got.slice(4 * j, 4 * j + 3));
    const lw = Math.hypot(...w), lg = Math.hypot(...g);
    if (Math.abs(lw - lg) > 1e-5 * lw) return `scale ${j}: ${lg} for ${lw}`;
    trace += (w[0] * g[0] + w[1] * g[1] + w[2] * g[2]) / (lw * lg);
  }
  const deg = (Math.acos(Math.min(1, Math.max(-1, (trace - 1) / 2))) * 180) / Math.PI;
  return deg <= 0.5 ? '' : `rotation ${deg} degrees off`;
}

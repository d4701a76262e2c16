// scened's JavaScript client: an ES module with no dependencies in the browser; in Node 20+ it
// takes the `ws` package where there is no global WebSocket (or the WebSocket class given).
//
//   import { connect } from './scened.mjs';
//   const c = await connect('ws://127.0.0.1:7879/ws', { token });        // b64 matrices
//   await c.call('world.create', { world: 'main' });
//   const { entity } = await c.call('transform.create', { world: 'main', t: [1, 2, 3] });
//   const sub = await c.subscribe('main', { onFrame(f) { ... } });        // a local mirror
//   sub.mirror.matrix(entity);                                           // Float32Array(16)
//   const near = await c.subscribe('main', { near: { entity, radius: 50, margin: 5 } });
//   await near.update({ near: { entity, radius: 80 } });  // subscribe.update: no full frame
//   const past = await c.get('main', entity, { tick: 650 });   // a world with history: the past
//   connect('wss://host:7879/ws', { ca });   // Node: socket options (TLS) go to the ws package
//
// Requests carry ids and are answered by promises, any number in flight (pipelining); an error
// answer rejects with a ScenedError carrying the protocol's code. In b64 mode (the default) the
// daemon sends every matrix as the base64 of its 16 little-endian float32 and every frame as
// "ids" and "ms": a frame is decoded into one Float32Array, with no object per matrix, and a
// subscription keeps a mirror of its scope (full frames, deltas, removals, resyncs after lag):
// the whole world, a subtree, or what is near a point or an entity ("near"), where what leaves
// the region arrives in "removed" and leaves the mirror.

/** An error answer (code: BAD_REQUEST, NOT_FOUND, ...), or CLOSED when the connection went. */
export class ScenedError extends Error {
  constructor(code, message, response) {
    super(message);
    this.name = 'ScenedError';
    this.code = code;
    this.response = response;
  }
}

// ---- matrices ----------------------------------------------------------------------------

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const VALUES = new Int16Array(256).fill(-1);
for (let i = 0; i < 64; i++) VALUES[ALPHABET.charCodeAt(i)] = i;
const LITTLE = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const B64_MATRIX = 88;

function bytesToB64(bytes) {
  if (typeof Buffer === 'function') return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('base64');
  if (typeof bytes.toBase64 === 'function') return bytes.toBase64();
  let s = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const v = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    s += ALPHABET[v >> 18] + ALPHABET[(v >> 12) & 63] +
      (i + 1 < bytes.length ? ALPHABET[(v >> 6) & 63] : '=') + (i + 2 < bytes.length ? ALPHABET[v & 63] : '=');
  }
  return s;
}

// Strict: exactly the base64 (with padding) of `length` bytes, standard alphabet, no bits past
// the last byte. Returns the bytes, or throws.
function b64ToBytes(s, length) {
  if (typeof s !== 'string' || s.length !== 4 * Math.ceil(length / 3)) throw new ScenedError('BAD_BASE64', `expected the base64 of ${length} bytes`);
  const out = new Uint8Array(length);
  let bad = 0, o = 0;
  const full = Math.floor(length / 3);
  for (let g = 0, i = 0; g < full; g++, i += 4) {
    const a = VALUES[s.charCodeAt(i)], b = VALUES[s.charCodeAt(i + 1)], c = VALUES[s.charCodeAt(i + 2)], d = VALUES[s.charCodeAt(i + 3)];
    bad |= a | b | c | d;
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    out[o++] = v >> 16;
    out[o++] = (v >> 8) & 255;
    out[o++] = v & 255;
  }
  const rest = length % 3, i = full * 4;
  if (rest) {
    const a = VALUES[s.charCodeAt(i)], b = VALUES[s.charCodeAt(i + 1)];
    const c = rest === 2 ? VALUES[s.charCodeAt(i + 2)] : 0;
    bad |= a | b | c;
    out[o++] = ((a << 2) | (b >> 4)) & 255;
    if (rest === 2) out[o++] = ((b << 4) | (c >> 2)) & 255;
    const padOk = rest === 1 ? s[i + 2] === '=' && s[i + 3] === '=' && !(b & 15) : s[i + 3] === '=' && !(c & 3);
    if (!padOk) bad = -1;
  }
  if (bad < 0) throw new ScenedError('BAD_BASE64', 'not canonical base64 (alphabet or padding)');
  return out;
}

function bytesToFloats(bytes) {
  const f = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  if (!LITTLE) {
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    for (let k = 0; k < f.length; k++) f[k] = dv.getFloat32(k * 4, true);
  }
  return f;
}

/** 16 numbers (column-major; rounded to float32) as the base64 "matrix_b64" takes. */
export function matrixToB64(m) {
  if (m.length !== 16) throw new TypeError('a matrix is 16 numbers');
  const f = new Float32Array(m);
  const bytes = new Uint8Array(f.buffer);
  if (!LITTLE) {
    const dv = new DataView(f.buffer);
    for (let k = 0; k < 16; k++) dv.setFloat32(k * 4, m[k], true);
  }
  return bytesToB64(bytes);
}

/** The Float32Array(16) of a base64 matrix (88 characters); throws when it is not one. */
export function matrixFromB64(s) {
  if (typeof s !== 'string' || s.length !== B64_MATRIX) throw new ScenedError('BAD_BASE64', 'a matrix is 88 base64 characters');
  return bytesToFloats(b64ToBytes(s, 64));
}

/** A matrix as the daemon sends it, in either form, as a Float32Array(16). */
export function matrixOf(value) {
  return typeof value === 'string' ? matrixFromB64(value) : Float32Array.from(value);
}

/** The "ms" of a b64 frame: one Float32Array of 16 * count values (matrix i at 16 * i). */
export function decodeMatrices(ms, count) {
  const length = 64 * count;
  if (typeof ms !== 'string' || ms.length !== 4 * Math.ceil(length / 3)) throw new ScenedError('BAD_BASE64', `"ms" is not the base64 of ${count} matrices`);
  let bytes;
  if (typeof Uint8Array.fromBase64 === 'function') {
    try {
      bytes = Uint8Array.fromBase64(ms, { lastChunkHandling: 'strict' });
    } catch {
      throw new ScenedError('BAD_BASE64', '"ms" is not base64');
    }
  } else if (typeof Buffer === 'function') {
    // Node skips what is not base64 and stops at padding: with the length right, a shortfall
    // is what shows a bad character
    const b = Buffer.from(ms, 'base64');
    if (b.length !== length) throw new ScenedError('BAD_BASE64', '"ms" is not base64');
    bytes = new Uint8Array(length);
    bytes.set(b);
  } else {
    bytes = b64ToBytes(ms, length);
  }
  if (bytes.length !== length) throw new ScenedError('BAD_BASE64', `"ms" holds ${bytes.length} bytes for ${count} matrices`);
  return bytesToFloats(bytes);
}

// A frame event as { sub, world, tick, full, ids, matrices, removed, readMs }: ids and removed
// arrays of numbers, matrices one Float32Array (matrix i at 16 * i), from either form; readMs
// the milliseconds spent reading it (parse, decode, mirror) before the handler runs.
function frameOf(ev) {
  let ids, matrices;
  if (typeof ev.ms === 'string') {
    ids = ev.ids;
    matrices = decodeMatrices(ev.ms, ids.length);
  } else {
    const set = ev.set || [];
    ids = new Array(set.length);
    matrices = new Float32Array(16 * set.length);
    for (let i = 0; i < set.length; i++) {
      ids[i] = set[i].e;
      matrices.set(set[i].m, 16 * i);
    }
  }
  return { sub: ev.sub, world: ev.world, tick: ev.tick, full: ev.full, ids, matrices, removed: ev.removed || [] };
}

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

// ---- a mirror of a world -----------------------------------------------------------------

/** A world's (or subtree's) world matrices, kept from frames: ids[slot] has the matrix at
 * 16 * slot in matrices (one Float32Array); slots move when a transform is removed. */
export class Mirror {
  constructor() {
    this.ids = [];
    this.slots = new Map();
    this.matrices = new Float32Array(16 * 64);
    this.tick = 0;
    this.frames = 0;
  }

  get size() { return this.ids.length; }

  has(id) { return this.slots.has(id); }

  /** The world matrix of id: a Float32Array(16) view (valid until the next frame), or null. */
  matrix(id) {
    const s = this.slots.get(id);
    return s === undefined ? null : this.matrices.subarray(16 * s, 16 * s + 16);
  }

  clear() {
    this.ids.length = 0;
    this.slots.clear();
  }

  /** Applies a frame (as subscriptions hand them): a full one replaces everything (the first,
   * and the one that follows a lag), a delta sets and removes. */
  apply(frame) {
    const { ids, matrices } = frame;
    if (frame.full) this.clear();
    const need = 16 * (this.ids.length + ids.length);
    if (need > this.matrices.length) {
      const grown = new Float32Array(Math.max(need, 2 * this.matrices.length));
      grown.set(this.matrices.subarray(0, 16 * this.ids.length));
      this.matrices = grown;
    }
    const m = this.matrices;
    for (let i = 0; i < ids.length; i++) {
      let s = this.slots.get(ids[i]);
      if (s === undefined) {
        s = this.ids.length;
        this.ids.push(ids[i]);
        this.slots.set(ids[i], s);
      }
      for (let k = 0, o = 16 * s, f = 16 * i; k < 16; k++) m[o + k] = matrices[f + k];
    }
    for (const id of frame.removed) this.remove(id);
    this.tick = frame.tick;
    this.frames++;
  }

  remove(id) {
    const s = this.slots.get(id);
    if (s === undefined) return;
    const last = this.ids.length - 1;
    if (s !== last) {
      const moved = this.ids[last];
      this.ids[s] = moved;
      this.slots.set(moved, s);
      this.matrices.copyWithin(16 * s, 16 * last, 16 * last + 16);
    }
    this.ids.pop();
    this.slots.delete(id);
  }
}

// ---- the connection ------------------------------------------------------------------------

// The class given, else the global one, else the `ws` package (Node without a global
// WebSocket). Options for the socket (a CA or a client certificate for wss://, in Node) take the
// `ws` package too: a global WebSocket has no place for them.
async function webSocketClass(given, withOptions) {
  if (given) return given;
  if (typeof globalThis.WebSocket === 'function' && !withOptions) return globalThis.WebSocket;
  const mod = await import('ws');
  return mod.WebSocket || mod.default;
}

// Ends after which nothing of the subscription's scope is left to mirror.
const SCOPE_GONE = new Set(['world_destroyed', 'root_destroyed', 'center_destroyed']);

// The options of subscribe() that are the module's own; every other one is a field of the
// request (root, hz, near, and whatever the protocol adds).
const LOCAL_OPTIONS = new Set(['onFrame', 'onEnd', 'mirror']);

/** A subscription: its id, world, region (near, or null), mirror (kept up to date), and end
 * reason once it ended. */
class Subscription {
  constructor(client, id, world, opts) {
    this.client = client;
    this.id = id;
    this.world = world;
    this.near = opts.near || null;
    this.mirror = opts.mirror === false ? null : new Mirror();
    this.onFrame = opts.onFrame;
    this.onEnd = opts.onEnd;
    this.ended = null;
  }

  handle(ev, started) {
    if (ev.event === 'frame') {
      const frame = frameOf(ev);
      if (this.mirror) this.mirror.apply(frame);
      frame.readMs = now() - started;
      if (this.onFrame) this.onFrame(frame, this);
    } else {
      this.end(ev.event === 'unsubscribed' ? ev.reason || 'unsubscribed' : ev.event, ev);
    }
  }

  end(reason, ev) {
    if (this.ended) return;
    this.ended = reason;
    this.client.subs.delete(this.id);
    if (this.mirror && SCOPE_GONE.has(reason)) this.mirror.clear();
    if (this.onEnd) this.onEnd(reason, ev);
  }

  /** subscribe.update: fields as the protocol takes them, { near: {...} } to set or change the
   * region, { near: null } to remove it. No full frame follows: the next frame carries what
   * came into scope, and what left it in "removed". Resolves with the answer. */
  async update(fields) {
    return this.client.updateSubscription(this, fields);
  }

  /** Ends the subscription (resolves once the daemon answered). */
  async unsubscribe() {
    if (this.ended) return;
    this.end('unsubscribed');
    try {
      await this.client.call('unsubscribe', { sub: this.id });
    } catch (e) {
      if (e.code !== 'NOT_FOUND' && e.code !== 'CLOSED') throw e;
    }
  }
}

export class Client {
  /** Opens a WebSocket to url (ws://host:port/ws) without saying hello; see connect(). */
  static async open(url, { WebSocket: given, ...socketOptions } = {}) {
    const WS = await webSocketClass(given, Object.keys(socketOptions).length > 0);
    const ws = Object.keys(socketOptions).length ? new WS(url, socketOptions) : new WS(url);
    const c = new Client(ws);
    await new Promise((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = (e) => reject(new ScenedError('CLOSED', `cannot connect to ${url}: ${e && e.message ? e.message : 'error'}`));
      ws.onclose = () => reject(new ScenedError('CLOSED', `cannot connect to ${url}`));
    });
    c.attach();
    return c;
  }

  constructor(ws) {
    this.ws = ws;
    this.pending = new Map();
    this.subs = new Map();
    this.nextId = 0;
    this.sent = 0;
    this.form = 'json';
    this.closed = false;
    this.onclose = null;   // (event) => {}
    this.onevent = null;   // events of no subscription of this client
  }

  attach() {
    const ws = this.ws;
    ws.onmessage = (ev) => this.receive(ev.data);
    ws.onerror = () => {};
    ws.onclose = (ev) => {
      this.closed = true;
      const err = new ScenedError('CLOSED', 'connection closed');
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      for (const s of Array.from(this.subs.values())) s.end('closed');
      if (this.onclose) this.onclose(ev);
    };
  }

  /** How the daemon sends this connection matrices: 'json' or 'b64'. */
  get matrices() { return this.form; }

  get isOpen() { return !this.closed && this.ws.readyState === 1; }

  /** One request; resolves with the response (its result fields, "ok" and "id"), or rejects
   * with a ScenedError carrying the code. Requests may be pipelined freely. */
  call(cmd, fields = {}, onOk = null) {
    if (!this.isOpen) return Promise.reject(new ScenedError('CLOSED', 'not connected'));
    const id = ++this.nextId;
    this.sent++;
    this.ws.send(JSON.stringify({ ...fields, cmd, id }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, onOk }));
  }

  /** hello: with the token (when given) and the matrices form; resolves with the answer. */
  async hello({ token, matrices } = {}) {
    const fields = {};
    if (token !== undefined && token !== null && token !== '') fields.token = token;
    if (matrices) fields.matrices = matrices;
    const r = await this.call('hello', fields);
    this.form = r.matrices || this.form;
    return r;
  }

  /** Subscribes to world (opts: the request's fields, such as root, hz and near: { point or
   * entity, radius, margin, bands }; and onFrame(frame, sub), onEnd(reason, event), mirror:
   * false to keep none); resolves with the Subscription once the daemon answered. It is
   * registered as the answer is read, so that no frame after it is missed, however messages
   * are batched. */
  async subscribe(world, opts = {}) {
    const fields = { world };
    for (const [k, v] of Object.entries(opts)) if (!LOCAL_OPTIONS.has(k) && v !== undefined) fields[k] = v;
    let sub = null;
    await this.call('subscribe', fields, (r) => {
      sub = new Subscription(this, r.sub, world, opts);
      this.subs.set(r.sub, sub);
    });
    return sub;
  }

  /** subscribe.update of sub (a Subscription, or its id): fields as the protocol takes them
   * ({ near: {...} } or { near: null }). Resolves with the answer once the change is made; the
   * subscription's near follows it. */
  async updateSubscription(sub, fields) {
    const id = typeof sub === 'object' && sub !== null ? sub.id : sub;
    const r = await this.call('subscribe.update', { ...fields, sub: id });
    const s = this.subs.get(id);
    if (s && 'near' in fields) s.near = fields.near || null;
    return r;
  }

  receive(text) {
    const started = now();
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (msg.event !== undefined && msg.ok === undefined) {
      const sub = this.subs.get(msg.sub);
      if (sub) sub.handle(msg, started);
      else if (this.onevent) this.onevent(msg);
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.ok && p.onOk) p.onOk(msg);
    if (msg.ok) p.resolve(msg);
    else p.reject(new ScenedError(msg.error ? msg.error.code : 'INTERNAL', msg.error ? msg.error.message : 'error', msg));
  }

  /** transform.get, its matrices as Float32Array(16) whichever form they came in: resolves
   * with { tick, entity, parent, name?, local, world } (and local_trs, world_trs with trs).
   * tick: a past tick of a world with history (a fraction interpolates between the two ticks
   * around it); outside the kept window the promise rejects with NOT_FOUND. Without tick, the
   * answer's tick is the last tick that has run. */
  async get(world, entity, { tick, trs } = {}) {
    const fields = { world, entity };
    if (tick !== undefined) fields.tick = checkTick(tick);
    if (trs) fields.trs = true;
    const r = await this.call('transform.get', fields);
    return { ...r, local: matrixOf(r.local), world: matrixOf(r.world) };
  }

  /** transform.relative: inverse(world(to)) * world(entity) as a Float32Array(16), at a past
   * tick when given (as get). */
  async relative(world, entity, to, { tick } = {}) {
    const fields = { world, entity, to };
    if (tick !== undefined) fields.tick = checkTick(tick);
    return matrixOf((await this.call('transform.relative', fields)).matrix);
  }

  /** get for many entities, pipelined with at most inFlight requests waiting at a time;
   * resolves with one result per entity, in order, null for one that answered NOT_FOUND (at a
   * tick: created after it; or no longer in the world). A tick outside the window (or a world
   * that is not there) is NOT_FOUND for every entity: all null. Any other error rejects. */
  async getMany(world, entities, { tick, trs, inFlight = 256 } = {}) {
    if (tick !== undefined) checkTick(tick);
    const out = new Array(entities.length).fill(null);
    let next = 0;
    const worker = async () => {
      while (next < entities.length) {
        const i = next++;
        try {
          out[i] = await this.get(world, entities[i], { tick, trs });
        } catch (e) {
          if (e.code !== 'NOT_FOUND') throw e;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(inFlight, entities.length)) }, worker));
    return out;
  }

  close(code = 1000) {
    if (!this.closed) this.ws.close(code);
  }
}

// A tick as the protocol takes it: a finite number, 0 or more (the daemon checks the window).
function checkTick(tick) {
  if (typeof tick !== 'number' || !Number.isFinite(tick) || tick < 0)
    throw new TypeError(`tick must be a finite number, 0 or more (got ${tick})`);
  return tick;
}

/** Opens a connection and says hello: matrices 'b64' by default (exact float32, cheapest), or
 * 'json'; token when the daemon has one (a wrong one rejects with UNAUTHORIZED). Options also
 * take WebSocket (a class) for runtimes without a global one. */
export async function connect(url, { token, matrices = 'b64', ...options } = {}) {
  const c = await Client.open(url, options);
  try {
    await c.hello({ token, matrices });
  } catch (e) {
    c.close();
    throw e;
  }
  return c;
}

// scened's JavaScript client: an ES module with no dependencies in the browser; in Node 20+ it
// takes the `ws` package where there is no global WebSocket (or the WebSocket class given).
// An npm package (client/js/package.json, `npm install ./client/js`; `ws` an optional peer).
//
//   import { connect } from './scened.mjs';
//   const c = await connect('ws://127.0.0.1:7879/ws', { token });        // b64 matrices
//   await c.call('world.create', { world: 'main' });
//   const { entity } = await c.call('transform.create', { world: 'main', t: [1, 2, 3] });
//   const sub = await c.subscribe('main', { onFrame(f) { ... } });        // a local mirror
//   sub.mirror.matrix(entity);                                           // Float32Array(16)
//   const near = await c.subscribe('main', { near: { entity, radius: 50, margin: 5 } });
//   await near.update({ near: { entity, radius: 80 } });  // subscribe.update: no full frame
//   const packed = await c.subscribe('main', { packed: { step: 0.001 } }); // about 10 bytes a matrix
//   const past = await c.get('main', entity, { tick: 650 });   // a world with history: the past
//   connect('wss://host:7879/ws', { ca });   // Node: socket options (TLS) go to the ws package
//
// Requests carry ids and are answered by promises, any number in flight (pipelining); an error
// answer rejects with a ScenedError carrying the protocol's code. In b64 mode (the default) the
// daemon sends every matrix as the base64 of its 16 little-endian float32 and every frame as
// "ids" and "ms": a frame is decoded into one Float32Array, with no object per matrix, and a
// subscription keeps a mirror of its scope (full frames, deltas, removals, resyncs after lag):
// the whole world, a subtree, or what is near a point or an entity ("near"), where what leaves
// the region arrives in "removed" and leaves the mirror. A packed subscription ("packed":
// { step, origin }) gets binary messages of quantized transforms, decoded by its PackedState
// straight into the mirror's Float32Array.

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

// The bytes of base64 text s holding exactly length bytes (with padding); throws a ScenedError
// (BAD_BASE64) naming what it is otherwise.
function decodeB64(s, length, what) {
  if (typeof s !== 'string' || s.length !== 4 * Math.ceil(length / 3)) throw new ScenedError('BAD_BASE64', `${what} is not the base64 of ${length} bytes`);
  let bytes;
  if (typeof Uint8Array.fromBase64 === 'function') {
    try {
      bytes = Uint8Array.fromBase64(s, { lastChunkHandling: 'strict' });
    } catch {
      throw new ScenedError('BAD_BASE64', `${what} is not base64`);
    }
  } else if (typeof Buffer === 'function') {
    // Node skips what is not base64 and stops at padding: with the length right, a shortfall
    // is what shows a bad character
    const b = Buffer.from(s, 'base64');
    if (b.length !== length) throw new ScenedError('BAD_BASE64', `${what} is not base64`);
    bytes = new Uint8Array(length);
    bytes.set(b);
  } else {
    bytes = b64ToBytes(s, length);
  }
  if (bytes.length !== length) throw new ScenedError('BAD_BASE64', `${what} holds ${bytes.length} bytes, not ${length}`);
  return bytes;
}

/** The "ms" of a b64 frame: one Float32Array of 16 * count values (matrix i at 16 * i). */
export function decodeMatrices(ms, count) {
  const length = 64 * count;
  if (typeof ms !== 'string' || ms.length !== 4 * Math.ceil(length / 3)) throw new ScenedError('BAD_BASE64', `"ms" is not the base64 of ${count} matrices`);
  return bytesToFloats(decodeB64(ms, length, '"ms"'));
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

// ---- packed frames -------------------------------------------------------------------------

// A packed subscription's payload (CONTRACT "Packed frames"; the C codec is proto/packed.h):
// varint count; per entry, in increasing id, varint id gap, u8 flags, then the parts the flags
// name; varint removed count and the removed ids' gaps. Translations are integers q of steps
// from the origin, sent absolute or as deltas against what the subscription last received.
//
// q is kept as a double, so this decoder takes |q| up to 2^53 - 1 (Number.MAX_SAFE_INTEGER),
// absolute or after a delta, and refuses a payload that goes past it. The daemon's q may reach
// 2^62, but only for a translation that far from the origin in steps: 9e12 world units at a
// step of 0.001, 9e9 at 1e-6.

const PACKED_T = 1;       // a translation: three zigzag varints
const PACKED_DELTA = 2;   // ... each the difference from the last q received
const PACKED_R = 4;       // a rotation: u32 smallest three
const PACKED_S_UNI = 8;   // a uniform scale: one float32
const PACKED_S = 16;      // a scale: three float32
const PACKED_RAW = 32;    // the world matrix, 16 float32, and nothing else
const PACKED_HEADER = 13; // sub u32, tick u64, flags u8
const MAX_ID = Number.MAX_SAFE_INTEGER; // 2^53 - 1

function packedError(why, at) {
  const e = new ScenedError('BAD_PACKED', at === undefined ? why : `packed payload refused at byte ${at}: ${why}`);
  e.at = at;
  return e;
}

function flagsValid(flags) {
  if (flags & PACKED_RAW) return flags === PACKED_RAW;
  return !(flags & ~63) && (flags & PACKED_T || !(flags & PACKED_DELTA)) && !(flags & PACKED_S_UNI && flags & PACKED_S);
}

// The rotation matrix of a smallest three, times the scale, and the translation, into m at o:
// as proto/packed_decode.c computes it (the quaternion's components rounded to float32, the
// rest in double, each element rounded to float32 once), so both give the same bits.
const quat = new Float64Array(4);
function rebuild(m, o, u, s0, s1, s2, t0, t1, t2) {
  const big = u >>> 30;
  let shift = 20, sum = 0;
  for (let i = 0; i < 4; i++) {
    if (i === big) continue;
    const c = (((u >>> shift) & 1023) / 511.5 - 1) / Math.SQRT2;
    quat[i] = Math.fround(c);
    sum += c * c;
    shift -= 10;
  }
  quat[big] = Math.fround(Math.sqrt(Math.max(0, 1 - sum)));
  const x = quat[0], y = quat[1], z = quat[2], w = quat[3];
  const s = 2 / (x * x + y * y + z * z + w * w);
  m[o] = (1 - s * (y * y + z * z)) * s0;
  m[o + 1] = s * (x * y + w * z) * s0;
  m[o + 2] = s * (x * z - w * y) * s0;
  m[o + 3] = 0;
  m[o + 4] = s * (x * y - w * z) * s1;
  m[o + 5] = (1 - s * (x * x + z * z)) * s1;
  m[o + 6] = s * (y * z + w * x) * s1;
  m[o + 7] = 0;
  m[o + 8] = s * (x * z + w * y) * s2;
  m[o + 9] = s * (y * z - w * x) * s2;
  m[o + 10] = (1 - s * (x * x + y * y)) * s2;
  m[o + 11] = 0;
  m[o + 12] = t0;
  m[o + 13] = t1;
  m[o + 14] = t2;
  m[o + 15] = 1;
}

// Reads a payload: every read bounded by what is left; a refusal throws with the offset of
// the value that went wrong (as the C decoder reports it).
class PayloadReader {
  constructor(bytes) {
    this.p = bytes;
    this.dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
    this.lo = 0; // the last varint's bits 0-27
    this.hi = 0; // its bits 28-63, as an exact double (below 2^36)
  }

  // An unsigned LEB128 of at most 64 bits (overlong forms allowed, as LEB128 allows); its
  // value as a double: exact below 2^53, at least 2^53 otherwise (this.lo, this.hi are exact).
  varint() {
    const p = this.p, len = p.length, start = this.pos;
    let lo = 0, hi = 0;
    for (let i = 0; i < 10; i++) {
      if (start + i === len) throw packedError('the payload ends inside a value', start);
      const b = p[start + i], bits = b & 0x7f;
      if (i === 9 && bits > 1) break; // the tenth byte holds bit 63 alone
      if (i < 4) lo |= bits << (7 * i);
      else hi += bits * 2 ** (7 * i - 28);
      if (!(b & 0x80)) {
        this.pos = start + i + 1;
        this.lo = lo;
        this.hi = hi;
        return hi * 2 ** 28 + lo;
      }
    }
    throw packedError('a varint of more than 64 bits', start);
  }

  // A zigzag varint as a signed integer; refused past 2^53 - 1 in magnitude.
  zigzag() {
    const start = this.pos;
    this.varint();
    const half = this.hi * 2 ** 27 + (this.lo >>> 1); // exact while it is below 2^53
    const n = this.lo & 1 ? -(half + 1) : half;
    if (!(Math.abs(n) <= MAX_ID)) throw packedError('a translation past 2^53 - 1 steps (this decoder\'s range)', start);
    return n;
  }

  // A count, at most what the bytes left hold at minBytes an item.
  count(minBytes) {
    const start = this.pos, n = this.varint();
    if (n > Math.floor((this.p.length - this.pos) / minBytes)) throw packedError('a count larger than the payload can hold', start);
    return n;
  }

  // The next id of an increasing list: a gap of at least 1 over id, up to 2^53 - 1.
  id(prev) {
    const start = this.pos, gap = this.varint();
    if (gap === 0) throw packedError('entity ids not increasing', start);
    if (gap > MAX_ID - prev) throw packedError('an entity id past 2^53 - 1', start);
    return prev + gap;
  }

  // The offset of the next n bytes, which it skips.
  take(n) {
    const at = this.pos;
    if (this.p.length - at < n) throw packedError('the payload ends inside a value', at);
    this.pos = at + n;
    return at;
  }
}

// What a payload's entries leave, read before any of it is applied; reused from one payload
// to the next, grown as needed.
class PackedScratch {
  constructor() {
    this.entries(16);
    this.removed = new Float64Array(16);
  }

  // Room for n entries.
  entries(n) {
    this.cap = n;
    this.ids = new Float64Array(n);
    this.raw = new Int32Array(n); // the offset of a raw entry's 64 bytes, -1 when not raw
    this.q = new Float64Array(3 * n);
    this.rotation = new Uint32Array(n);
    this.scale = new Float32Array(3 * n);
  }
}

/** What a packed subscription last received per entity, on its grid (step, origin), as the
 * daemon keeps it for that subscription: decode() rebuilds each entry's world matrix from it
 * and from the payload, and brings it up to what the payload sent. */
export class PackedState {
  /** step: positive and finite; origin: three finite numbers ([0, 0, 0] by default). */
  constructor(step, origin = [0, 0, 0]) {
    this.values = new Map(); // id -> { q0, q1, q2, hasQ, rotation, s0, s1, s2 }
    this.step = NaN;
    this.origin = [0, 0, 0];
    this.scratch = new PackedScratch();
    this.setGrid(step, origin);
  }

  /** Entities held. */
  get size() { return this.values.size; }

  has(id) { return this.values.has(id); }

  /** What is held of id: { q: [x, y, z] or null once forgotten, rotation (u32), scale }, or
   * null. A copy. */
  value(id) {
    const v = this.values.get(id);
    return v ? { q: v.hasQ ? [v.q0, v.q1, v.q2] : null, rotation: v.rotation, scale: [v.s0, v.s1, v.s2] } : null;
  }

  /** A new step or origin (the subscription's packed option, or subscribe.update's): when
   * either differs from the current one, every translation is forgotten (the daemon sends each
   * absolute next time); rotations and scales stay. Throws a TypeError, changing nothing, on a
   * step that is not positive and finite or an origin that is not three finite numbers. */
  setGrid(step, origin = [0, 0, 0]) {
    if (typeof step !== 'number' || !(step > 0) || !Number.isFinite(step)) throw new TypeError(`packed step must be a positive finite number (got ${step})`);
    if (!origin || origin.length !== 3 || !Array.from(origin).every((v) => typeof v === 'number' && Number.isFinite(v)))
      throw new TypeError('packed origin must be three finite numbers');
    const o = this.origin;
    if (step !== this.step || origin[0] !== o[0] || origin[1] !== o[1] || origin[2] !== o[2])
      for (const v of this.values.values()) v.hasQ = false;
    this.step = step;
    this.origin = [origin[0], origin[1], origin[2]];
  }

  /** Forgets every entity (before a full frame). */
  clear() { this.values.clear(); }

  /** Decodes a payload (a Uint8Array) against what is held and, when all of it is good, brings
   * the state up to it and hands it to sink: sink.reserve(n) (optional) with the number of
   * entries, then for each entry, in increasing id, sink.put(id) returning the offset in
   * sink.matrices (read after the call: it may grow) where its world matrix is written (T * R
   * * S, column-major; a raw one as sent), then sink.remove(id) for each removed id. full (a
   * full frame): the payload is read as if nothing were held, and the state (and the sink, by
   * sink.clear() when it has one) is emptied before it is applied. Anything else is refused
   * with a ScenedError (code BAD_PACKED, at: the offset of the bad value), before the state or
   * the sink is touched. Returns { entries, removed } (counts). */
  decode(payload, sink, full = false) {
    if (!(payload instanceof Uint8Array)) throw new TypeError('a packed payload is a Uint8Array');
    const r = new PayloadReader(payload), values = this.values, sc = this.scratch;
    const n = r.count(2); // an entry is a gap and flags at least
    if (n > sc.cap) sc.entries(Math.max(n, 2 * sc.cap));
    let id = 0;
    for (let i = 0; i < n; i++) {
      id = sc.ids[i] = r.id(id);
      const at = r.pos, flags = payload[r.take(1)];
      if (!flagsValid(flags)) throw packedError('flags that name no valid entry', at);
      if (flags === PACKED_RAW) {
        sc.raw[i] = r.take(64);
        continue;
      }
      sc.raw[i] = -1;
      const base = full ? undefined : values.get(id);
      const needsQ = !(flags & PACKED_T) || flags & PACKED_DELTA;
      if ((needsQ && !(base && base.hasQ)) || (!(flags & PACKED_R) && !base))
        throw packedError('a part left out or a delta for an entity without that part', at);
      const j = 3 * i;
      if (flags & PACKED_T) {
        for (let k = 0; k < 3; k++) {
          const start = r.pos, d = r.zigzag();
          const q = flags & PACKED_DELTA ? (k === 0 ? base.q0 : k === 1 ? base.q1 : base.q2) + d : d;
          // both below 2^53 in magnitude: a sum past it rounds to 2^53 or more, never back
          if (!(Math.abs(q) <= MAX_ID)) throw packedError('a translation past 2^53 - 1 steps (this decoder\'s range)', start);
          sc.q[j + k] = q;
        }
      } else {
        sc.q[j] = base.q0;
        sc.q[j + 1] = base.q1;
        sc.q[j + 2] = base.q2;
      }
      sc.rotation[i] = flags & PACKED_R ? r.dv.getUint32(r.take(4), true) : base.rotation;
      if (flags & PACKED_S_UNI) {
        sc.scale[j] = sc.scale[j + 1] = sc.scale[j + 2] = r.dv.getFloat32(r.take(4), true);
      } else if (flags & PACKED_S) {
        const o = r.take(12);
        for (let k = 0; k < 3; k++) sc.scale[j + k] = r.dv.getFloat32(o + 4 * k, true);
      } else if (base) {
        sc.scale[j] = base.s0;
        sc.scale[j + 1] = base.s1;
        sc.scale[j + 2] = base.s2;
      } else {
        sc.scale[j] = sc.scale[j + 1] = sc.scale[j + 2] = 1;
      }
    }
    const removed = r.count(1);
    if (removed > sc.removed.length) sc.removed = new Float64Array(Math.max(removed, 2 * sc.removed.length));
    id = 0;
    for (let i = 0; i < removed; i++) id = sc.removed[i] = r.id(id);
    if (r.pos !== payload.length) throw packedError('bytes after the removed ids', r.pos);

    // all of it is good: the state first, then the sink (which may grow or throw)
    if (full) values.clear();
    for (let i = 0; i < n; i++) {
      const eid = sc.ids[i];
      if (sc.raw[i] >= 0) {
        values.delete(eid);
        continue;
      }
      let v = values.get(eid);
      if (!v) values.set(eid, (v = {}));
      const j = 3 * i;
      v.q0 = sc.q[j];
      v.q1 = sc.q[j + 1];
      v.q2 = sc.q[j + 2];
      v.hasQ = true;
      v.rotation = sc.rotation[i];
      v.s0 = sc.scale[j];
      v.s1 = sc.scale[j + 1];
      v.s2 = sc.scale[j + 2];
    }
    for (let i = 0; i < removed; i++) values.delete(sc.removed[i]);

    if (full && sink.clear) sink.clear();
    if (sink.reserve) sink.reserve(n);
    const step = this.step, [o0, o1, o2] = this.origin;
    for (let i = 0; i < n; i++) {
      const off = sink.put(sc.ids[i]), m = sink.matrices;
      if (sc.raw[i] >= 0) {
        copyRaw(payload, sc.raw[i], m, off, r.dv);
        continue;
      }
      const j = 3 * i;
      rebuild(m, off, sc.rotation[i], sc.scale[j], sc.scale[j + 1], sc.scale[j + 2],
        o0 + sc.q[j] * step, o1 + sc.q[j + 1] * step, o2 + sc.q[j + 2] * step);
    }
    for (let i = 0; i < removed; i++) sink.remove(sc.removed[i]);
    return { entries: n, removed };
  }
}

// A raw entry's 16 float32, to the bit (NaN payloads included where the host is little-endian).
function copyRaw(payload, at, m, off, dv) {
  if (LITTLE) {
    new Uint8Array(m.buffer, m.byteOffset + 4 * off, 64).set(payload.subarray(at, at + 64));
  } else {
    for (let k = 0; k < 16; k++) m[off + k] = dv.getFloat32(at + 4 * k, true);
  }
}

/** A sink for PackedState.decode that collects a frame: ids, matrices (matrix i at 16 * i)
 * and removed, as a frame event has them. */
export class PackedFrameSink {
  constructor() {
    this.ids = [];
    this.matrices = new Float32Array(0);
    this.removed = [];
  }

  reserve(n) { this.matrices = new Float32Array(16 * n); }

  put(id) {
    const at = 16 * this.ids.length;
    if (at + 16 > this.matrices.length) {
      const grown = new Float32Array(Math.max(at + 16, 2 * this.matrices.length));
      grown.set(this.matrices);
      this.matrices = grown;
    }
    this.ids.push(id);
    return at;
  }

  remove(id) { this.removed.push(id); }
}

/** The header of a binary WebSocket message (a packed frame): { sub, tick, full, payload }, the
 * payload a view of the bytes after the 13 of the header (sub u32, tick u64, flags u8, little-
 * endian). Throws a ScenedError (BAD_PACKED) on fewer than 13 bytes, a tick past 2^53 - 1, or
 * flags other than bit 0. */
export function parsePackedMessage(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new TypeError('a packed message is a Uint8Array');
  if (bytes.length < PACKED_HEADER) throw packedError(`a packed message of ${bytes.length} bytes: the header is ${PACKED_HEADER}`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const sub = dv.getUint32(0, true), lo = dv.getUint32(4, true), hi = dv.getUint32(8, true), flags = bytes[12];
  if (hi >= 2 ** 21) throw packedError('a tick past 2^53 - 1');
  if (flags & ~1) throw packedError(`unknown frame flags ${flags}`);
  return { sub, tick: hi * 2 ** 32 + lo, full: (flags & 1) === 1, payload: bytes.subarray(PACKED_HEADER) };
}

/** The payload of a JSON packed frame ("packed": its base64, with padding), as bytes; throws a
 * ScenedError (BAD_BASE64) when it is not canonical base64. */
export function packedFromB64(s) {
  if (typeof s !== 'string' || s.length % 4) throw new ScenedError('BAD_BASE64', '"packed" is not base64');
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  return decodeB64(s, (s.length / 4) * 3 - pad, '"packed"');
}

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

  /** Room for n more matrices without growing. */
  reserve(n) {
    const need = 16 * (this.ids.length + n);
    if (need > this.matrices.length) {
      const grown = new Float32Array(Math.max(need, 2 * this.matrices.length));
      grown.set(this.matrices.subarray(0, 16 * this.ids.length));
      this.matrices = grown;
    }
  }

  /** The offset in matrices where id's matrix is (a slot added at the end when it has none):
   * PackedState.decode writes packed frames' matrices there. */
  put(id) {
    let s = this.slots.get(id);
    if (s === undefined) {
      s = this.ids.length;
      this.reserve(1);
      this.ids.push(id);
      this.slots.set(id, s);
    }
    return 16 * s;
  }

  /** Applies a frame (as subscriptions hand them): a full one replaces everything (the first,
   * and the one that follows a lag), a delta sets and removes. */
  apply(frame) {
    const { ids, matrices } = frame;
    if (frame.full) this.clear();
    this.reserve(ids.length);
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
// WebSocket), imported only then. Options for the socket (a CA or a client certificate for
// wss://, in Node) take the `ws` package too: a global WebSocket has no place for them.
async function webSocketClass(given, withOptions) {
  if (given) return given;
  if (typeof globalThis.WebSocket === 'function' && !withOptions) return globalThis.WebSocket;
  let mod;
  try {
    mod = await import('ws');
  } catch (e) {
    if (e?.code !== 'ERR_MODULE_NOT_FOUND' || typeof process !== 'object') throw e;
    mod = await programWs(e);
  }
  return mod.WebSocket || mod.default;
}

// `ws` as the program's own files find it. `npm install ./client/js` links the package, and an
// ES module resolves its imports from the link's target, where the program's `ws` is not.
async function programWs(notFound) {
  const { createRequire } = await import('node:module');
  const path = await import('node:path');
  const from = [path.join(process.cwd(), 'index.js')];
  if (process.argv[1]) from.unshift(path.resolve(process.argv[1]));
  for (const file of from) {
    try {
      return createRequire(file)('ws');
    } catch {
      // not found from there
    }
  }
  throw Object.assign(new Error('Node has no global WebSocket here: install the ws package '
    + '(npm install ws) or pass { WebSocket }', { cause: notFound }), { code: notFound.code });
}

// The PackedState of a packed option ({ step, origin }), null without one.
function packedStateOf(packed) {
  return packed ? new PackedState(packed.step, packed.origin ?? [0, 0, 0]) : null;
}

// Ends after which nothing of the subscription's scope is left to mirror.
const SCOPE_GONE = new Set(['world_destroyed', 'root_destroyed', 'center_destroyed']);

// The options of subscribe() that are the module's own; every other one is a field of the
// request (root, hz, near, packed, and whatever the protocol adds).
const LOCAL_OPTIONS = new Set(['onFrame', 'onEnd', 'mirror']);

/** A subscription: its id, world, region (near, or null), packed state (with its step and
 * origin; null when not packed), mirror (kept up to date), and end reason once it ended. */
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
    try {
      this.packed = packedStateOf(opts.packed);
    } catch {
      this.packed = null; // the daemon took a packed option this module cannot: its first frame ends it
    }
  }

  handle(ev, started) {
    if (ev.event === 'frame' && ev.packed !== undefined) {
      this.receivePacked(ev.tick, ev.full === true, ev.packed, started);
    } else if (ev.event === 'frame') {
      const frame = frameOf(ev);
      if (this.mirror) this.mirror.apply(frame);
      frame.readMs = now() - started;
      if (this.onFrame) this.onFrame(frame, this);
    } else {
      this.end(ev.event === 'unsubscribed' ? ev.reason || 'unsubscribed' : ev.event, ev);
    }
  }

  // A packed frame (its payload as bytes, or as the base64 of a JSON frame): decoded through
  // the packed state, straight into the mirror when no onFrame handler wants the frame. One
  // that cannot be decoded ends the subscription ("bad_frame"): what follows it would be
  // deltas against values this side never got.
  receivePacked(tick, full, payload, started) {
    let frame = null;
    try {
      if (!this.packed) throw new ScenedError('BAD_PACKED', `subscription ${this.id} is not packed as this client knows it`);
      const bytes = payload instanceof Uint8Array ? payload : packedFromB64(payload);
      if (this.onFrame || !this.mirror) {
        const sink = new PackedFrameSink();
        this.packed.decode(bytes, sink, full);
        frame = { sub: this.id, world: this.world, tick, full, ids: sink.ids, matrices: sink.matrices, removed: sink.removed };
      } else {
        this.packed.decode(bytes, this.mirror, full);
      }
    } catch (error) {
      this.fail(error);
      return;
    }
    if (!frame) {
      this.mirror.tick = tick;
      this.mirror.frames++;
      return;
    }
    if (this.mirror) this.mirror.apply(frame);
    frame.readMs = now() - started;
    if (this.onFrame) this.onFrame(frame, this);
  }

  // Ends the subscription on a frame it cannot read, and tells the daemon.
  fail(error) {
    if (this.ended) return;
    this.end('bad_frame', { event: 'bad_frame', sub: this.id, error });
    if (this.client.isOpen) this.client.call('unsubscribe', { sub: this.id }).catch(() => {});
  }

  end(reason, ev) {
    if (this.ended) return;
    this.ended = reason;
    this.client.subs.delete(this.id);
    if (this.mirror && SCOPE_GONE.has(reason)) this.mirror.clear();
    if (this.onEnd) this.onEnd(reason, ev);
  }

  /** subscribe.update: fields as the protocol takes them, { near: {...} } to set or change the
   * region, { near: null } to remove it, { packed: { step, origin } } for a new grid. No full
   * frame follows: the next frame carries what came into scope, and what left it in
   * "removed". Resolves with the answer. */
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
    ws.binaryType = 'arraybuffer'; // packed frames: not a Blob (browsers) or a Buffer (ws)
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

  /** hello: with the token (when given), the matrices form and followerReads (true or false,
   * when given: in a cluster with replicas, a daemon that follows a world's group answers
   * reads and subscriptions from its copy instead of MOVED); resolves with the answer. */
  async hello({ token, matrices, followerReads } = {}) {
    const fields = {};
    if (token !== undefined && token !== null && token !== '') fields.token = token;
    if (matrices) fields.matrices = matrices;
    if (followerReads !== undefined) fields.follower_reads = followerReads;
    const r = await this.call('hello', fields);
    this.form = r.matrices || this.form;
    return r;
  }

  /** Subscribes to world (opts: the request's fields, such as root, hz, near: { point or
   * entity, radius, margin, bands } and packed: { step, origin }; and onFrame(frame, sub),
   * onEnd(reason, event), mirror: false to keep none); resolves with the Subscription once the daemon answered. It is
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
   * ({ near: {...} } or { near: null }, { packed: { step, origin } }). Resolves with the answer
   * once the change is made; the subscription's near follows it, and its packed state takes
   * the new grid as the answer is read (the frames after it are on that grid). */
  async updateSubscription(sub, fields) {
    const id = typeof sub === 'object' && sub !== null ? sub.id : sub;
    return this.call('subscribe.update', { ...fields, sub: id }, () => {
      const s = this.subs.get(id);
      if (!s) return;
      if ('near' in fields) s.near = fields.near || null;
      if (fields.packed && s.packed) {
        try {
          s.packed.setGrid(fields.packed.step, fields.packed.origin ?? [0, 0, 0]);
        } catch (e) {
          s.fail(e); // a grid the daemon took and this module cannot: never decode on the old one
        }
      }
    });
  }

  /** A message from the socket: a JSON text (an answer or an event), or a packed frame's
   * binary message (an ArrayBuffer or a view of one). */
  receive(data) {
    if (typeof data !== 'string') {
      this.receiveBinary(data);
      return;
    }
    const text = data;
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

  receiveBinary(data) {
    const started = now();
    let bytes;
    if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else return;
    let h;
    try {
      h = parsePackedMessage(bytes);
    } catch (error) {
      // a header this side cannot read: the subscription it names, if any, cannot go on
      const sub = bytes.length >= 4 ? this.subs.get(new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true)) : undefined;
      if (sub) sub.fail(error);
      return;
    }
    const sub = this.subs.get(h.sub);
    if (sub) sub.receivePacked(h.tick, h.full, h.payload, started);
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
 * 'json'; token when the daemon has one (a wrong one rejects with UNAUTHORIZED); followerReads:
 * true to read from a daemon that follows the world's group (a cluster with replicas). Options
 * also take WebSocket (a class) for runtimes without a global one. */
export async function connect(url, { token, matrices = 'b64', followerReads, ...options } = {}) {
  const c = await Client.open(url, options);
  try {
    await c.hello({ token, matrices, followerReads });
  } catch (e) {
    c.close();
    throw e;
  }
  return c;
}

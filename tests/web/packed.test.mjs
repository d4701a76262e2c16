// The JavaScript module's packed frames (client/js/scened.mjs), without a daemon: the C codec's
// payloads (tests/unit/test_proto_packed.c, FRAME_A/B/C) decoded to the bits the C decoder
// gives; every refusal; the grid; properties against an encoder written here from the contract
// (CONTRACT.md, "Packed frames"): random T x R x S (non-uniform scales, mirrors, near-identity
// rotations, each smallest-three index) within step / 2 per axis and 0.5 degrees, 10,000
// deltas that never drift; random bytes and every truncation and single-byte change of good
// payloads decoded or refused with a ScenedError, a refusal changing nothing; the binary
// message's header; and a client fed binary and JSON packed frames through a stand-in socket.
//
// The random cases draw from one seed, printed; SCN_SEED replays a failing one.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  Client, Mirror, PackedFrameSink, PackedState, ScenedError, matrixToB64, packedFromB64, parsePackedMessage,
} from '../../client/js/scened.mjs';

const SEED = Number(process.env.SCN_SEED ?? 0x5eedc0de) >>> 0;

function mulberry(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function seeded(t, what) {
  t.diagnostic(`${what}: seed ${SEED} (SCN_SEED=${SEED} replays it)`);
  return mulberry(SEED);
}

const uniform = (rand, lo, hi) => lo + (hi - lo) * rand();
const below = (rand, n) => Math.floor(rand() * n);
const bitsOf = (m) => Array.from(new Uint32Array(Float32Array.from(m).buffer));
const isRefusal = (e) => e instanceof ScenedError && e.code === 'BAD_PACKED';

// ---- the C codec's payloads ------------------------------------------------------------------

// Frame A, on step 0.5 and origin 0: entity 5 at (1, -2, 3), no rotation or scale; 7 sheared
// (raw); 300 turned half about x, scaled 2, at (-0.5, 0, 100); 301 mirrored in x; 9, 200 and
// 1000 removed.
const FRAME_A = Uint8Array.from([
  0x04,
  0x05, 0x05, 0x04, 0x07, 0x0c, 0x00, 0x02, 0x08, 0xe0,
  0x02, 0x20,
  0x00, 0x00, 0x80, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x80, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x80, 0x3f, 0, 0, 0, 0,
  0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0xa0, 0x40, 0x00, 0x00, 0xc0, 0x40, 0x00, 0x00, 0x80, 0x3f,
  0xa5, 0x02, 0x0d, 0x01, 0x00, 0x90, 0x03, 0x00, 0x02, 0x08, 0x20, 0x00, 0x00, 0x00, 0x40,
  0x01, 0x15, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0xe0,
  0x00, 0x00, 0x80, 0xbf, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x80, 0x3f,
  0x03, 0x09, 0xbf, 0x01, 0xa0, 0x06,
]);
// Frame B: 5 moved by +0.5 in x (a delta), 7 now T x R x S (absolute), 300 unchanged (flags 0).
const FRAME_B = Uint8Array.from([
  0x03, 0x05, 0x03, 0x02, 0x00, 0x00,
  0x02, 0x05, 0x10, 0x14, 0x18, 0x00, 0x02, 0x08, 0xe0,
  0xa5, 0x02, 0x00,
  0x00,
]);
// Frame C, after the origin moved to (1, 1, 1): 5, unmoved, is absolute again.
const FRAME_C = Uint8Array.from([0x01, 0x05, 0x01, 0x02, 0x0b, 0x08, 0x00]);

// What proto/packed_decode.c gives for them, as float32 bits (the identity's smallest three
// decodes to a turn of about 0.16 degrees: no k of 10 bits gives 0).
const ID_ROT = [0x3f7fffe0, 0x3ab55247, 0xbab51227, 0, 0xbab51227, 0x3f7fffe0, 0x3ab55247, 0, 0x3ab55247, 0xbab51227, 0x3f7fffe0, 0];
const ONE = 0x3f800000;
const C_A = new Map([
  [5, [...ID_ROT, ONE, 0xc0000000, 0x40400000, ONE]],
  [7, [ONE, 0, 0, 0, ONE, ONE, 0, 0, 0, 0, ONE, 0, 0x40800000, 0x40a00000, 0x40c00000, ONE]],
  [300, [0x3fffffe0, 0x3b355247, 0x3b351227, 0, 0x3b351227, 0xbfffffe0, 0x3b355247, 0, 0x3b355247, 0xbb351227, 0xbfffffe0, 0, 0xbf000000, 0, 0x42c80000, ONE]],
  [301, [0xbf7fffe0, 0xbab55247, 0x3ab51227, 0, 0xbab51227, 0x3f7fffe0, 0x3ab55247, 0, 0x3ab55247, 0xbab51227, 0x3f7fffe0, 0, 0, 0, 0, ONE]],
]);
const C_B = new Map([
  [5, [...ID_ROT, 0x3fc00000, 0xc0000000, 0x40400000, ONE]],
  [7, [...ID_ROT, 0x40800000, 0x40a00000, 0x40c00000, ONE]],
  [300, C_A.get(300)],
]);
const C_C = new Map([[5, C_B.get(5)]]);
const SHEARED = [1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 4, 5, 6, 1];

// ---- matrices ---------------------------------------------------------------------------------

// T * R * S in double, rounded to float32 once (as scn_compose_trs).
function compose(t, q, s) {
  const len = Math.hypot(q[0], q[1], q[2], q[3]);
  const x = q[0] / len, y = q[1] / len, z = q[2] / len, w = q[3] / len;
  return Float32Array.from([
    (1 - 2 * (y * y + z * z)) * s[0], 2 * (x * y + z * w) * s[0], 2 * (x * z - y * w) * s[0], 0,
    2 * (x * y - z * w) * s[1], (1 - 2 * (x * x + z * z)) * s[1], 2 * (y * z + x * w) * s[1], 0,
    2 * (x * z + y * w) * s[2], 2 * (y * z - x * w) * s[2], (1 - 2 * (x * x + y * y)) * s[2], 0,
    t[0], t[1], t[2], 1,
  ]);
}

// got (at offset o) is T * R * S of t, q, s on grid (step, origin): translation within step / 2
// per axis plus float32 rounding; each column's length |s| (to 1e-5); the rotation, the columns
// divided by s, within 0.5 degrees of q's. The rotation's error in degrees, or a reason.
function rotationError(got, o, step, t, q, s) {
  for (let k = 0; k < 3; k++) {
    const tol = (step / 2) * (1 + 1e-9) + Math.abs(t[k]) * 2 ** -23 + 1e-30;
    if (!(Math.abs(got[o + 12 + k] - t[k]) <= tol)) return `translation ${k}: ${got[o + 12 + k]} for ${t[k]} (step ${step})`;
  }
  if (got[o + 3] !== 0 || got[o + 7] !== 0 || got[o + 11] !== 0 || got[o + 15] !== 1) return 'last row';
  const want = compose([0, 0, 0], q, [1, 1, 1]);
  let diff = 0;
  for (let j = 0; j < 3; j++) {
    const c = [got[o + 4 * j], got[o + 4 * j + 1], got[o + 4 * j + 2]];
    const len = Math.hypot(...c);
    if (!(Math.abs(len - Math.abs(s[j])) <= 1e-5 * Math.abs(s[j]))) return `scale ${j}: ${len} for ${s[j]}`;
    for (let k = 0; k < 3; k++) diff += (c[k] / s[j] - want[4 * j + k]) ** 2;
  }
  // |R1 - R2| (Frobenius) = 2 sqrt(2) sin(angle / 2): well conditioned near 0
  const deg = (2 * Math.asin(Math.min(1, Math.sqrt(diff) / (2 * Math.SQRT2))) * 180) / Math.PI;
  return deg <= 0.5 ? deg : `rotation off by ${deg} degrees`;
}

// ---- an encoder, from the contract ------------------------------------------------------------

// Round half away from zero (C's round()); never -0.
const roundAway = (v) => Math.sign(v) * Math.round(Math.abs(v)) + 0;

function putVarint(out, v) {
  let x = BigInt(v);
  while (x >= 0x80n) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
}
const zigzag = (n) => { const b = BigInt(n); return b >= 0n ? 2n * b : -2n * b - 1n; };
function putF32(out, f) {
  out.push(...new Uint8Array(Float32Array.of(f).buffer));
}

// Smallest three: the largest component in magnitude (the first on a tie) made positive, the
// other three as k = round((c * sqrt(2) + 1) * 511.5).
function smallestThree(q) {
  const len = Math.hypot(q[0], q[1], q[2], q[3]);
  let big = 0;
  for (let i = 1; i < 4; i++) if (Math.abs(q[i]) > Math.abs(q[big])) big = i;
  const sign = q[big] < 0 ? -1 : 1;
  let u = big * 2 ** 30, shift = 20;
  for (let i = 0; i < 4; i++) {
    if (i === big) continue;
    const k = Math.min(1023, Math.max(0, roundAway(((sign * q[i]) / len * Math.SQRT2 + 1) * 511.5)));
    u += k * 2 ** shift;
    shift -= 10;
  }
  return u;
}

// What a daemon keeps per packed subscription, and the payloads it writes: an entry is
// { id, t, q, s } (T x R x S parts) or { id, raw } (16 numbers).
class Encoder {
  constructor(step, origin = [0, 0, 0]) {
    this.values = new Map(); // id -> { q: [x, y, z] | null, rotation, scale }
    this.setGrid(step, origin);
  }

  setGrid(step, origin = [0, 0, 0]) {
    if (step !== this.step || origin.some((v, k) => v !== this.origin[k]))
      for (const v of this.values.values()) v.q = null;
    this.step = step;
    this.origin = [...origin];
  }

  clear() { this.values.clear(); }

  encode(entries, removed = []) {
    const out = [];
    putVarint(out, entries.length);
    let prev = 0;
    for (const e of entries) {
      putVarint(out, e.id - prev);
      prev = e.id;
      if (e.raw) {
        out.push(32);
        for (const f of e.raw) putF32(out, f);
        this.values.delete(e.id);
        continue;
      }
      const q = e.t.map((t, k) => roundAway((t - this.origin[k]) / this.step));
      const rotation = smallestThree(e.q);
      const scale = e.s.map(Math.fround);
      let v = this.values.get(e.id);
      const fresh = !v;
      if (fresh) this.values.set(e.id, (v = { q: null, rotation: 0, scale: [1, 1, 1] }));
      let flags = 0;
      const parts = [];
      if (fresh || !v.q || q.some((x, k) => x !== v.q[k])) {
        const delta = !fresh && v.q;
        flags |= delta ? 3 : 1;
        for (let k = 0; k < 3; k++) putVarint(parts, zigzag(delta ? q[k] - v.q[k] : q[k]));
      }
      if (fresh || rotation !== v.rotation) {
        flags |= 4;
        parts.push(rotation & 255, (rotation >>> 8) & 255, (rotation >>> 16) & 255, rotation >>> 24);
      }
      if (scale.some((x, k) => x !== v.scale[k])) {
        if (scale[0] === scale[1] && scale[1] === scale[2]) {
          flags |= 8;
          putF32(parts, scale[0]);
        } else {
          flags |= 16;
          for (const x of scale) putF32(parts, x);
        }
      }
      out.push(flags, ...parts);
      Object.assign(v, { q, rotation, scale });
    }
    putVarint(out, removed.length);
    prev = 0;
    for (const id of removed) {
      putVarint(out, id - prev);
      prev = id;
      this.values.delete(id);
    }
    return Uint8Array.from(out);
  }
}

// A unit quaternion: uniform, near identity (a few thousandths of a degree to a degree), or
// with a chosen component the largest (each smallest-three index comes up).
function randomQuat(rand) {
  const c = [0, 1, 2, 3].map(() => uniform(rand, -1, 1));
  const kind = below(rand, 4);
  if (kind === 1) {
    const scale = 10 ** uniform(rand, -5, -1.8);
    for (let i = 0; i < 3; i++) c[i] *= scale;
    c[3] = rand() < 0.5 ? 1 : -1;
  } else if (kind === 2) {
    const big = below(rand, 4);
    for (let i = 0; i < 4; i++) c[i] = i === big ? (rand() < 0.5 ? 1 : -1) : c[i] * 0.3;
  }
  const len = Math.hypot(...c);
  return c.map((x) => Math.fround(x / len));
}

// A scale: uniform, non-uniform or 1, with now and then a mirror (a negative sx, or another axis).
function randomScale(rand) {
  const s = [0, 1, 2].map(() => Math.fround(10 ** uniform(rand, -2, 2)));
  const kind = below(rand, 4);
  if (kind === 0) s[1] = s[2] = s[0];
  else if (kind === 1) s[0] = s[1] = s[2] = 1;
  if (below(rand, 3) === 0) s[below(rand, 4) === 0 ? below(rand, 3) : 0] *= -1;
  return s;
}

function randomTranslation(rand) {
  const range = 10 ** uniform(rand, -1, 5);
  return [0, 1, 2].map(() => Math.fround(uniform(rand, -range, range)));
}

// 16 finite float32 of any bits (a raw matrix).
function randomRaw(rand) {
  const bits = new Uint32Array(16);
  for (let i = 0; i < 16; i++) {
    let b = Math.floor(rand() * 2 ** 32);
    if ((b & 0x7f800000) >>> 0 === 0x7f800000) b = (b & 0xbfffffff) >>> 0;
    bits[i] = b;
  }
  return new Float32Array(bits.buffer);
}

// A sink that counts what it is handed.
function countingSink() {
  const sink = new PackedFrameSink();
  sink.calls = 0;
  const put = sink.put.bind(sink), remove = sink.remove.bind(sink);
  sink.put = (id) => (sink.calls++, put(id));
  sink.remove = (id) => (sink.calls++, remove(id));
  sink.clear = () => sink.calls++;
  return sink;
}

// The flags of each entry of a good payload, read without the decoder.
function entryFlags(p) {
  let pos = 0;
  const varint = () => { while (p[pos++] & 0x80); };
  const count = p[pos++]; // below 128 here
  const flags = [];
  for (let i = 0; i < count; i++) {
    varint();
    const f = p[pos++];
    flags.push(f);
    if (f & 32) pos += 64;
    if (f & 1) varint(), varint(), varint();
    pos += (f & 4 ? 4 : 0) + (f & 8 ? 4 : 0) + (f & 16 ? 12 : 0);
  }
  return flags;
}

const snapshot = (state) => JSON.stringify([state.step, state.origin, [...state.values]]);

// The client of the C test's refusals: on step 1, origin 0, it holds 5 (q (1, 2, 3), or
// 2^53 - 1 in x for the overflow case) and 6 (rotation 0x20080200, scale 2, its translation
// forgotten: the grid changed since it came).
function clientForRefusals(atLimit) {
  const s = new PackedState(2);
  const six = new Encoder(2);
  s.decode(six.encode([{ id: 6, t: [8, 10, 12], q: [1, 0, 0, 0], s: [2, 2, 2] }]), new PackedFrameSink());
  s.setGrid(1);
  const five = new Encoder(1);
  s.decode(five.encode([{ id: 5, t: [atLimit ? Number.MAX_SAFE_INTEGER : 1, 2, 3], q: [0, 0, 0, 1], s: [1, 1, 1] }]), new PackedFrameSink());
  return s;
}

// The C test's refusals (proto/packed.h names them), with the offset each is reported at; the
// last one is this decoder's range: a q of 2^53 or more.
const REFUSALS = [
  ['empty', [], 0],
  ['a count with nothing after it', [1], 0],
  ['a count the bytes cannot hold', [2, 5, 0, 1], 0],
  ['a count of 11 bytes', [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0], 0],
  ['a gap over 64 bits', [1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0], 1],
  ['a first gap of 0', [1, 0, 0, 0], 1],
  ['a repeated id', [2, 5, 0, 0, 0, 0], 3],
  ['an id of 2^53', [1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0], 1],
  ['ids that sum past 2^53 - 1', [2, 5, 0, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0], 3],
  ['flag 64', [1, 5, 0x40, 0], 2],
  ['raw with a translation', [1, 5, 0x21, 0], 2],
  ['a delta without 1', [1, 5, 0x02, 0], 2],
  ['both scales', [1, 5, 0x18, 0], 2],
  ['a new entity left out', [1, 7, 0x00, 0], 2],
  ['a new entity without rotation', [1, 7, 0x01, 0, 0, 0, 0], 2],
  ['a new entity without translation', [1, 7, 0x04, 0, 0, 0, 0, 0], 2],
  ['a delta for a new entity', [1, 7, 0x07, 0, 0, 0, 0, 2, 8, 0xe0, 0], 2],
  ['a forgotten translation left out', [1, 6, 0x00, 0], 2],
  ['a delta of a forgotten translation', [1, 6, 0x03, 2, 0, 0, 0], 2],
  ['a delta past 2^53 - 1', [1, 5, 0x03, 2, 0, 0, 0], 3, true],
  ['translation cut short', [1, 5, 0x01, 2, 4], 5],
  ['rotation cut short', [1, 5, 0x04, 0, 2, 8], 3],
  ['scale cut short', [1, 5, 0x10, 0, 0, 0x80, 0x3f, 0, 0, 0x80], 3],
  ['raw cut short', [1, 5, 0x20, 0, 0, 0, 0], 3],
  ['no removed count', [1, 5, 0x00], 3],
  ['a removed count the bytes cannot hold', [0, 3, 1, 2], 1],
  ['a removed gap of 0', [0, 2, 1, 0], 3],
  ['trailing bytes', [0, 0, 0], 2],
  ['an absolute q of 2^53', [1, 5, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0, 0, 0], 3],
  ['an absolute q of -2^53', [1, 5, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0, 0, 0], 3],
  ['an absolute q of -2^53 - 1', [1, 5, 0x01, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0, 0, 0], 3],
];

describe('packed frames in the JavaScript module', () => {
  test("the C codec's payloads decode to the C decoder's bits", () => {
    const state = new PackedState(0.5);
    const decodeInto = (bytes, want, removed) => {
      const sink = new PackedFrameSink();
      assert.deepEqual(state.decode(bytes, sink), { entries: want.size, removed: removed.length });
      assert.deepEqual(sink.ids, [...want.keys()]);
      assert.equal(sink.matrices.length, 16 * want.size);
      [...want.values()].forEach((bits, i) =>
        assert.deepEqual(bitsOf(sink.matrices.subarray(16 * i, 16 * i + 16)), bits, `entity ${sink.ids[i]}`));
      assert.deepEqual(sink.removed, removed);
      return sink.matrices;
    };
    const a = decodeInto(FRAME_A, C_A, [9, 200, 1000]);
    // the C test's own checks: within tolerance of what was encoded, the raw one as sent
    const half = [1, 0, 0, 0], id = [0, 0, 0, 1];
    assert.equal(typeof rotationError(a, 0, 0.5, [1, -2, 3], id, [1, 1, 1]), 'number');
    assert.deepEqual(Array.from(a.subarray(16, 32)), SHEARED);
    assert.equal(typeof rotationError(a, 32, 0.5, [-0.5, 0, 100], half, [2, 2, 2]), 'number');
    assert.equal(typeof rotationError(a, 48, 0.5, [0, 0, 0], id, [-1, 1, 1]), 'number');
    assert.ok(a[48] < 0 && a[37] < 0 && Math.abs(a[32] - 2) < 1e-5);
    assert.equal(state.size, 3); // the raw one holds nothing
    assert.deepEqual(state.value(5), { q: [2, -4, 6], rotation: 0xe0080200, scale: [1, 1, 1] });
    assert.deepEqual(state.value(300), { q: [-1, 0, 200], rotation: 0x20080200, scale: [2, 2, 2] });
    assert.deepEqual(state.value(301).scale, [-1, 1, 1]);
    assert.equal(state.value(7), null);

    const b = decodeInto(FRAME_B, C_B, []);
    assert.ok(b[12] === 1.5 && b[16 + 13] === 5);
    assert.deepEqual(state.value(7), { q: [8, 10, 12], rotation: 0xe0080200, scale: [1, 1, 1] });

    state.setGrid(0.5, [1, 1, 1]);
    assert.equal(state.value(5).q, null);
    const c = decodeInto(FRAME_C, C_C, []);
    assert.deepEqual(Array.from(c.subarray(12, 15)), [1.5, -2, 3]);

    // the same payloads straight into a mirror
    const mirror = new Mirror(), again = new PackedState(0.5);
    again.decode(FRAME_A, mirror);
    assert.deepEqual(mirror.ids, [5, 7, 300, 301]);
    again.decode(FRAME_B, mirror);
    for (const [e, bits] of C_B) assert.deepEqual(bitsOf(mirror.matrix(e)), bits);
    assert.deepEqual(bitsOf(mirror.matrix(301)), C_A.get(301));

    // the encoder of this test writes the C encoder's bytes for frame A's T x R x S entities
    const enc = new Encoder(0.5);
    const mine = enc.encode([
      { id: 5, t: [1, -2, 3], q: id, s: [1, 1, 1] },
      { id: 7, raw: SHEARED },
      { id: 300, t: [-0.5, 0, 100], q: half, s: [2, 2, 2] },
      { id: 301, t: [0, 0, 0], q: id, s: [-1, 1, 1] },
    ], [9, 200, 1000]);
    assert.deepEqual(Array.from(mine), Array.from(FRAME_A));
  });

  test('every refusal: a ScenedError at the offset of the bad value, nothing changed', () => {
    for (const [what, bytes, at, atLimit] of REFUSALS) {
      const state = clientForRefusals(atLimit);
      const before = snapshot(state), sink = countingSink();
      assert.throws(() => state.decode(Uint8Array.from(bytes), sink), (e) => isRefusal(e) && e.at === at, what);
      assert.equal(snapshot(state), before, what);
      assert.equal(sink.calls, 0, what);
    }
    // q at the range's ends is taken
    for (const x of [Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER]) {
      const state = new PackedState(0.25), sink = new PackedFrameSink();
      state.decode(new Encoder(0.25).encode([{ id: 9, t: [x * 0.25, 0, 0], q: [0, 0, 0, 1], s: [1, 1, 1] }]), sink);
      assert.equal(state.value(9).q[0], x);
      assert.equal(sink.matrices[12], Math.fround(x * 0.25));
    }
    assert.throws(() => new PackedState(1).decode([0, 0], new PackedFrameSink()), TypeError);
  });

  test('the grid: a new step or origin forgets translations, and only then', () => {
    for (const [step, origin] of [[0, [0, 0, 0]], [-1, [0, 0, 0]], [Infinity, [0, 0, 0]], [NaN, [0, 0, 0]], ['1', [0, 0, 0]], [1, [0, NaN, 0]], [1, [0, 0]], [1, null]])
      assert.throws(() => new PackedState(step, origin), TypeError, `${step} ${origin}`);
    const state = new PackedState(0.5), enc = new Encoder(0.5);
    const parts = { id: 4, t: [1, 2, 3], q: [0, 0.6, 0, 0.8], s: [1, 2, 3] };
    state.decode(enc.encode([parts]), new PackedFrameSink());
    assert.throws(() => state.setGrid(0), TypeError);
    assert.deepEqual([state.step, state.origin], [0.5, [0, 0, 0]]);
    state.setGrid(0.5, [0, 0, 0]); // the same grid: nothing forgotten
    assert.deepEqual(state.value(4).q, [2, 4, 6]);
    const moved = { ...parts, t: [1.5, 2, 3] };
    const delta = enc.encode([moved]);
    assert.equal(delta[2], 3); // a delta alone
    for (const [step, origin] of [[0.25, [0, 0, 0]], [0.25, [0, 0, 1]]]) {
      const s = new PackedState(0.5);
      s.decode(new Encoder(0.5).encode([parts]), new PackedFrameSink());
      s.setGrid(step, origin);
      assert.deepEqual(s.value(4), { q: null, rotation: smallestThree(parts.q), scale: [1, 2, 3] });
      assert.throws(() => s.decode(delta, new PackedFrameSink()), isRefusal);
      // absolute on the new grid, the rotation and scale left out: taken
      const e = new Encoder(0.5);
      e.encode([parts]);
      e.setGrid(step, origin);
      const absolute = e.encode([parts]);
      assert.equal(absolute[2], 1);
      const sink = new PackedFrameSink();
      s.decode(absolute, sink);
      assert.equal(typeof rotationError(sink.matrices, 0, step, parts.t, parts.q, parts.s), 'number');
    }
    // a full frame reads as if nothing were held, and empties the state first
    const sink = countingSink();
    state.decode(new Encoder(0.5).encode([{ id: 8, t: [0, 0, 0], q: [0, 0, 0, 1], s: [1, 1, 1] }]), sink, true);
    assert.deepEqual([state.size, state.has(4), state.has(8), sink.calls], [1, false, true, 2]);
    assert.throws(() => state.decode(Uint8Array.from([1, 8, 0, 0]), new PackedFrameSink(), true), isRefusal);
    state.clear();
    assert.equal(state.size, 0);
  });

  test('random T x R x S round trips within step / 2 and 0.5 degrees', (t) => {
    const rand = seeded(t, 'round trips');
    const steps = [0.001, 0.01, 1 / 3, 0.5, 7, 1e-6];
    let step = 0.001, origin = [0, 0, 0];
    const enc = new Encoder(step), state = new PackedState(step), viaMirror = new PackedState(step);
    const mirror = new Mirror(), live = new Set();
    const seen = [0, 0, 0, 0];
    let worst = 0, entries = 0;
    for (let frame = 0; frame < 1500; frame++) {
      let full = false;
      if (frame % 50 === 0) { // now and then a new grid, or a full frame
        step = steps[below(rand, steps.length)];
        origin = [0, 1, 2].map(() => uniform(rand, -1e3, 1e3));
        for (const x of [enc, state, viaMirror]) x.setGrid(step, origin);
        full = rand() < 0.5;
        if (full) enc.clear(), live.clear();
      }
      const sent = [], removed = [];
      for (let id = 1 + below(rand, 5); sent.length < 48 && id <= 200; id += 1 + below(rand, 8)) {
        const e = { id: id * 1000003 };
        if (below(rand, 10) === 0) e.raw = randomRaw(rand);
        else Object.assign(e, { t: randomTranslation(rand), q: randomQuat(rand), s: randomScale(rand) });
        // now and then the same again (flags 0), or only a part changed
        const last = enc.values.get(e.id);
        if (last && !e.raw && rand() < 0.2) e.t = last.t, e.q = last.qq, e.s = last.s;
        sent.push(e);
      }
      for (const id of live) if (!sent.some((e) => e.id === id) && rand() < 0.05) removed.push(id);
      removed.sort((a, b) => a - b);
      const payload = enc.encode(sent, removed);
      for (const e of sent) if (!e.raw) Object.assign(enc.values.get(e.id), { t: e.t, qq: e.q, s: e.s });
      const sink = new PackedFrameSink();
      assert.deepEqual(state.decode(payload, sink, full), { entries: sent.length, removed: removed.length });
      viaMirror.decode(payload, mirror, full);
      assert.deepEqual(sink.ids, sent.map((e) => e.id));
      assert.deepEqual(sink.removed, removed);
      sent.forEach((e, i) => {
        live.add(e.id);
        const got = sink.matrices.subarray(16 * i, 16 * i + 16);
        assert.deepEqual(bitsOf(mirror.matrix(e.id)), bitsOf(got));
        if (e.raw) {
          assert.deepEqual(bitsOf(got), bitsOf(e.raw), `raw ${e.id} in frame ${frame}`);
          return;
        }
        seen[smallestThree(e.q) >>> 30]++;
        const err = rotationError(got, 0, step, e.t, e.q, e.s);
        assert.equal(typeof err, 'number', `entity ${e.id} in frame ${frame}: ${err}`);
        worst = Math.max(worst, err);
        entries++;
      });
      for (const id of removed) live.delete(id);
      // the client holds what the encoder holds
      assert.equal(state.size, enc.values.size);
      for (const [id, v] of enc.values)
        assert.deepEqual(state.value(id), { q: v.q, rotation: v.rotation, scale: v.scale });
      assert.deepEqual([...mirror.ids].sort((a, b) => a - b), [...live].sort((a, b) => a - b));
    }
    t.diagnostic(`${entries} entries, worst rotation error ${worst.toFixed(4)} degrees; smallest-three indices ${seen.join(' ')}`);
    assert.ok(seen.every((n) => n > 0));
  });

  test('10,000 deltas never drift', (t) => {
    const rand = seeded(t, 'delta chain');
    const N = 16, step = 0.001, origin = [123.4, -56.7, 0.25];
    const enc = new Encoder(step, origin), state = new PackedState(step, origin);
    const pos = [], quats = [];
    for (let i = 0; i < N; i++) {
      pos.push([0, 1, 2].map(() => uniform(rand, -500, 500)));
      quats.push(randomQuat(rand));
    }
    let worst = 0, bytes = 0;
    for (let tick = 0; tick < 10000; tick++) {
      const entries = pos.map((p, i) => {
        for (let k = 0; k < 3; k++) p[k] += uniform(rand, -0.05, 0.05);
        if (below(rand, 4) === 0) quats[i][below(rand, 3)] += uniform(rand, -0.01, 0.01);
        return { id: (i + 1) * 77, t: p.map(Math.fround), q: quats[i], s: [1, 1, 1] };
      });
      const payload = enc.encode(entries);
      bytes += payload.length;
      if (tick) assert.ok(entryFlags(payload).every((f) => (f & 3) === 3), 'after the first frame every translation is a delta');
      const sink = new PackedFrameSink();
      state.decode(payload, sink);
      for (let i = 0; i < N; i++)
        for (let k = 0; k < 3; k++) {
          const want = entries[i].t[k], err = Math.abs(sink.matrices[16 * i + 12 + k] - want);
          worst = Math.max(worst, err);
          if (!(err <= step / 2 + Math.abs(want) * 2 ** -23)) assert.fail(`tick ${tick}, entity ${i}, axis ${k}: off by ${err}`);
        }
    }
    t.diagnostic(`worst translation error ${worst.toFixed(6)} (step ${step}), ${(bytes / (N * 10000)).toFixed(2)} bytes an entry`);
  });

  test('random bytes, truncations and single-byte changes: decoded or refused, a refusal changing nothing', (t) => {
    const rand = seeded(t, 'fuzz');
    let decoded = 0, refused = 0;
    // state: a function making the client the payload is read against
    const attempt = (state, bytes, full = false) => {
      const before = snapshot(state), sink = countingSink();
      try {
        state.decode(bytes, sink, full);
        decoded++;
      } catch (e) {
        if (!isRefusal(e)) throw new Error(`not a refusal: ${e && e.stack}\nbytes ${Array.from(bytes)}`);
        assert.equal(snapshot(state), before);
        assert.equal(sink.calls, 0);
        assert.ok(Number.isInteger(e.at) && e.at >= 0 && e.at <= bytes.length);
        refused++;
      }
    };
    const common = [0, 1, 2, 3, 4, 5, 6, 7, 8, 0x10, 0x15, 0x20, 0x7f, 0x80, 0x81, 0xff];
    for (let i = 0; i < 20000; i++) {
      const bytes = new Uint8Array(below(rand, 48));
      for (let k = 0; k < bytes.length; k++) bytes[k] = rand() < 0.6 ? common[below(rand, common.length)] : below(rand, 256);
      attempt(clientForRefusals(false), bytes, rand() < 0.2);
    }
    // good payloads: the C frames in turn, and an encoder's (raw, absolute, deltas, scales)
    const afterA = () => {
      const s = new PackedState(0.5);
      s.decode(FRAME_A, new PackedFrameSink());
      return s;
    };
    const enc = new Encoder(0.01);
    const entries = [
      { id: 3, t: [1, 2, 3], q: randomQuat(rand), s: [1, 1, 1] },
      { id: 4, t: [-1e4, 2, 3e4], q: randomQuat(rand), s: [2, 3, -4] },
      { id: 900, raw: randomRaw(rand) },
    ];
    const first = enc.encode(entries, [1, 2]);
    entries[0].t = [1.5, 2, 3];
    entries[1].s = [5, 5, 5];
    const second = enc.encode(entries.slice(0, 2), [900]);
    const afterFirst = () => {
      const s = new PackedState(0.01);
      s.decode(first, new PackedFrameSink());
      return s;
    };
    const cases = [
      [FRAME_A, () => new PackedState(0.5)],
      [FRAME_B, afterA],
      [first, () => new PackedState(0.01)],
      [second, afterFirst],
    ];
    for (const [good, client] of cases) {
      attempt(client(), good);
      for (let n = 0; n < good.length; n++) {
        const before = refused;
        attempt(client(), good.subarray(0, n));
        assert.equal(refused, before + 1, `a prefix of ${n} bytes is refused`);
      }
      const copy = new Uint8Array(good.length);
      for (let i = 0; i < good.length; i++)
        for (let v = 0; v < 256; v++) {
          copy.set(good);
          copy[i] = v;
          attempt(client(), copy);
        }
    }
    t.diagnostic(`${decoded} decoded, ${refused} refused`);
    assert.ok(decoded > 0 && refused > 0);
  });

  test("the binary message's header, and the JSON frame's base64", () => {
    const header = (sub, lo, hi, flags) => {
      const b = new Uint8Array(13);
      const dv = new DataView(b.buffer);
      dv.setUint32(0, sub, true);
      dv.setUint32(4, lo, true);
      dv.setUint32(8, hi, true);
      b[12] = flags;
      return b;
    };
    // a message inside a larger buffer, at an odd offset
    const buf = new Uint8Array(3 + 13 + FRAME_A.length + 2);
    buf.set(header(0xfffffffe, 5, 0x100, 1), 3);
    buf.set(FRAME_A, 16);
    const m = parsePackedMessage(buf.subarray(3, 16 + FRAME_A.length));
    assert.deepEqual({ ...m, payload: Array.from(m.payload) }, { sub: 0xfffffffe, tick: 0x100 * 2 ** 32 + 5, full: true, payload: Array.from(FRAME_A) });
    assert.equal(parsePackedMessage(header(1, 0xffffffff, 2 ** 21 - 1, 0)).tick, Number.MAX_SAFE_INTEGER);
    const empty = parsePackedMessage(header(7, 1, 0, 0));
    assert.deepEqual([empty.sub, empty.tick, empty.full, empty.payload.length], [7, 1, false, 0]);
    for (let n = 0; n < 13; n++) assert.throws(() => parsePackedMessage(header(1, 1, 0, 0).subarray(0, n)), isRefusal);
    for (const flags of [2, 3, 0x80, 0xff]) assert.throws(() => parsePackedMessage(header(1, 1, 0, flags)), isRefusal);
    assert.throws(() => parsePackedMessage(header(1, 0, 2 ** 21, 0)), isRefusal);
    assert.throws(() => parsePackedMessage('abc'), TypeError);

    assert.deepEqual(Array.from(packedFromB64(Buffer.from(FRAME_B).toString('base64'))), Array.from(FRAME_B));
    for (let n = 0; n < 8; n++) {
      const bytes = FRAME_A.subarray(0, n);
      assert.deepEqual(Array.from(packedFromB64(Buffer.from(bytes).toString('base64'))), Array.from(bytes));
    }
    for (const bad of ['A', 'AA=', 'AAA*', '=AAA', 'AA=A', 5, null])
      assert.throws(() => packedFromB64(bad), (e) => e instanceof ScenedError && e.code === 'BAD_BASE64', String(bad));
  });

  test('a client fed binary and JSON packed frames through a socket', async () => {
    class FakeSocket {
      constructor() {
        this.readyState = 1;
        this.sent = [];
      }
      send(text) { this.sent.push(JSON.parse(text)); }
      close() {
        this.readyState = 3;
        this.onclose({});
      }
      answer(fields) { this.onmessage({ data: JSON.stringify({ ok: true, id: this.sent.at(-1).id, ...fields }) }); }
      frame(sub, tick, full, payload, as = 'arraybuffer') {
        const b = new Uint8Array(13 + payload.length);
        const dv = new DataView(b.buffer);
        dv.setUint32(0, sub, true);
        dv.setUint32(4, tick, true);
        b[12] = full ? 1 : 0;
        b.set(payload, 13);
        this.onmessage({ data: as === 'buffer' ? Buffer.concat([Buffer.alloc(7), b]).subarray(7) : b.buffer });
      }
      json(ev) { this.onmessage({ data: JSON.stringify(ev) }); }
    }
    const ws = new FakeSocket(), c = new Client(ws);
    c.attach();
    assert.equal(ws.binaryType, 'arraybuffer');

    // without onFrame: straight into the mirror
    let p = c.subscribe('w', { packed: { step: 0.5 } });
    assert.deepEqual(ws.sent.at(-1), { world: 'w', packed: { step: 0.5 }, cmd: 'subscribe', id: ws.sent.at(-1).id });
    ws.answer({ sub: 7 });
    const sub = await p;
    assert.deepEqual([sub.packed.step, sub.packed.origin], [0.5, [0, 0, 0]]);
    ws.frame(7, 40, true, FRAME_A);
    assert.deepEqual([sub.mirror.tick, sub.mirror.frames, sub.mirror.ids], [40, 1, [5, 7, 300, 301]]);
    for (const [e, bits] of C_A) assert.deepEqual(bitsOf(sub.mirror.matrix(e)), bits);
    ws.json({ event: 'frame', sub: 7, world: 'w', tick: 41, full: false, packed: Buffer.from(FRAME_B).toString('base64') });
    for (const [e, bits] of C_B) assert.deepEqual(bitsOf(sub.mirror.matrix(e)), bits);
    // a new grid takes effect as the answer is read
    p = sub.update({ packed: { step: 0.5, origin: [1, 1, 1] } });
    assert.deepEqual(ws.sent.at(-1).packed, { step: 0.5, origin: [1, 1, 1] });
    ws.answer({});
    assert.deepEqual(sub.packed.origin, [1, 1, 1]);
    await p;
    ws.frame(7, 42, false, FRAME_C, 'buffer');
    assert.deepEqual(bitsOf(sub.mirror.matrix(5)), C_C.get(5));
    // a full frame replaces the mirror and the state
    const enc = new Encoder(0.5, [1, 1, 1]);
    ws.frame(7, 43, true, enc.encode([{ id: 11, t: [3, 3, 3], q: [0, 0, 0, 1], s: [1, 1, 1] }]));
    assert.deepEqual([sub.mirror.ids, sub.packed.size, sub.mirror.matrix(11)[12]], [[11], 1, 3]);
    ws.frame(7, 44, false, enc.encode([], [11]));
    assert.equal(sub.mirror.size, 0);

    // with onFrame: frames as the other forms give them; a bad one ends the subscription
    const frames = [], ends = [];
    p = c.subscribe('w', { packed: { step: 0.5 }, onFrame: (f) => frames.push(f), onEnd: (reason, ev) => ends.push([reason, ev]) });
    ws.answer({ sub: 8 });
    const other = await p;
    ws.json({ event: 'frame', sub: 8, world: 'w', tick: 9, full: true, packed: Buffer.from(FRAME_A).toString('base64') });
    ws.frame(8, 10, false, FRAME_B);
    assert.deepEqual(frames.map((f) => [f.sub, f.world, f.tick, f.full, f.ids, f.removed]),
      [[8, 'w', 9, true, [5, 7, 300, 301], [9, 200, 1000]], [8, 'w', 10, false, [5, 7, 300], []]]);
    assert.deepEqual(bitsOf(frames[1].matrices), [...C_B.values()].flat());
    assert.ok(frames.every((f) => f.readMs >= 0));
    for (const [e, bits] of C_B) assert.deepEqual(bitsOf(other.mirror.matrix(e)), bits);
    ws.frame(8, 11, false, FRAME_B.subarray(0, 5));
    assert.equal(other.ended, 'bad_frame');
    assert.ok(isRefusal(ends[0][1].error));
    assert.deepEqual(ws.sent.at(-1), { sub: 8, cmd: 'unsubscribe', id: ws.sent.at(-1).id });
    assert.equal(c.subs.has(8), false);
    assert.deepEqual(bitsOf(other.mirror.matrix(5)), C_B.get(5)); // the last good frame stays
    ws.frame(8, 12, false, FRAME_C); // no longer anyone's: ignored
    assert.equal(frames.length, 2);

    // a frame for a subscription that is not packed, or a header that cannot be read, ends it
    p = c.subscribe('w', {});
    ws.answer({ sub: 9 });
    const plain = await p;
    ws.json({ event: 'frame', sub: 9, world: 'w', tick: 1, full: true, ids: [4], ms: matrixToB64([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 7, 8, 9, 1]) });
    assert.equal(plain.mirror.matrix(4)[13], 8); // b64 frames as before
    ws.frame(9, 2, false, FRAME_C);
    assert.equal(plain.ended, 'bad_frame');
    p = c.subscribe('w', { packed: { step: 1 } });
    ws.answer({ sub: 10 });
    const badHeader = await p;
    ws.onmessage({ data: Uint8Array.from([10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0]).buffer });
    assert.equal(badHeader.ended, 'bad_frame');
    ws.onmessage({ data: new ArrayBuffer(3) }); // too short to name a subscription: ignored
    assert.equal(sub.ended, null);
    c.close();
    assert.equal(sub.ended, 'closed');
  });
});

// The JavaScript client module (client/js/scened.mjs) against the real daemon over WebSocket:
// connecting with and without a token, pipelined requests answered by promises, errors as
// ScenedError with the contract's code, matrices to the bit in both forms (random float32 bit
// patterns, -0 and subnormals included), subscriptions keeping a mirror through full frames,
// deltas, removals, a resync after lagging and the end of the world, reads at a past tick of a
// world with history (get, relative, getMany), and the ws package taken by default in Node,
// which has no global WebSocket. Subscriptions by distance ("near"): what leaves the region
// leaves the mirror, subscribe.update moves and widens it without a full frame, refusals
// change nothing, and a center destroyed ends the subscription with an empty mirror. Packed
// frames: binary messages decoded into the mirror, within the grid of a b64 subscription's
// exact values at the same tick, on a new grid after subscribe.update.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { packedMismatch, repo, requireModule, sleep, startDaemon, until } from './lib.mjs';
import {
  Client, Mirror, ScenedError, connect, decodeMatrices, matrixFromB64, matrixOf, matrixToB64,
} from '../../client/js/scened.mjs';

const WebSocket = requireModule('ws');

// Random finite float32 values, often special: zeros of both signs, subnormals, the extremes.
function randomMatrix(rand) {
  const special = [0, 0x80000000, 1, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff];
  const bits = new Uint32Array(16);
  for (let i = 0; i < 16; i++) {
    let b = rand() < 0.25 ? special[Math.floor(rand() * special.length)] : Math.floor(rand() * 2 ** 32);
    if ((b & 0x7f800000) >>> 0 === 0x7f800000) b = (b & 0xbfffffff) >>> 0;
    bits[i] = b;
  }
  return new Float32Array(bits.buffer);
}

function mulberry(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const bits = (m) => Array.from(new Uint32Array(Float32Array.from(m).buffer));

describe('JavaScript client', () => {
  let d, url;
  before(async () => {
    d = await startDaemon(['--tick-hz', '20']);
    url = `ws://127.0.0.1:${d.httpPort}/ws`;
  });
  after(async () => {
    assert.equal(await d.stop(), 0);
  });

  test('base64 helpers: exact, strict', () => {
    const rand = mulberry(1);
    for (let k = 0; k < 500; k++) {
      const m = randomMatrix(rand);
      const s = matrixToB64(m);
      assert.equal(s.length, 88);
      assert.equal(s, Buffer.from(m.buffer).toString('base64'));
      assert.deepEqual(bits(matrixFromB64(s)), bits(m));
    }
    const good = matrixToB64([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
    for (const bad of [good.slice(0, 87), `${good}A`, `*${good.slice(1)}`, `${good.slice(0, 86)}AA`, `${good.slice(0, 85)}B==`])
      assert.throws(() => matrixFromB64(bad), (e) => e instanceof ScenedError && e.code === 'BAD_BASE64', bad);
    const three = new Float32Array(48).map((_, i) => i * 0.5 - 3);
    const ms = Buffer.from(three.buffer).toString('base64');
    assert.deepEqual(Array.from(decodeMatrices(ms, 3)), Array.from(three));
    assert.throws(() => decodeMatrices(ms, 2), ScenedError);
    assert.throws(() => decodeMatrices(`${ms.slice(0, 10)}*${ms.slice(11)}`, 3), ScenedError);
    assert.deepEqual(bits(matrixOf([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])), bits(new Float32Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])));
  });

  test('pipelined requests, answers in order, errors with their codes', async () => {
    const c = await connect(url, { WebSocket });
    assert.equal(c.matrices, 'b64');
    await c.call('world.create', { world: 'js-pipe' });
    const creates = [];
    for (let i = 0; i < 300; i++) creates.push(c.call('transform.create', { world: 'js-pipe', t: [i, 0, 0] }));
    const ids = (await Promise.all(creates)).map((r) => r.entity);
    assert.equal(new Set(ids).size, 300);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], 'answers in request order');
    await assert.rejects(c.call('transform.get', { world: 'js-pipe', entity: 999999 }), (e) => e instanceof ScenedError && e.code === 'NOT_FOUND');
    await assert.rejects(c.call('transform.set_local', { world: 'js-pipe', entity: ids[0], matrix_b64: 'AAAA' }), (e) => e.code === 'BAD_REQUEST' && /matrix_b64/.test(e.message));
    await assert.rejects(c.call('no.such'), (e) => e.code === 'UNKNOWN_COMMAND');
    await c.call('world.destroy', { world: 'js-pipe' });
    c.close();
  });

  test('random float32 bits round-trip in both forms', async () => {
    const b = await connect(url, { WebSocket });
    const j = await connect(url, { WebSocket, matrices: 'json' });
    assert.equal(j.matrices, 'json');
    await b.call('world.create', { world: 'js-rt' });
    const rand = mulberry(2);
    const want = new Map();
    for (let k = 0; k < 40; k++) {
      const m = randomMatrix(rand);
      const { entity } = await b.call('transform.create', { world: 'js-rt', matrix_b64: matrixToB64(m) });
      want.set(entity, m);
    }
    for (const [e, m] of want) {
      const rb = await b.call('transform.get', { world: 'js-rt', entity: e });
      assert.equal(rb.local, matrixToB64(m), 'the same text');
      assert.deepEqual(bits(matrixOf(rb.world)), bits(m));
      const rj = await j.call('transform.get', { world: 'js-rt', entity: e });
      assert.ok(Array.isArray(rj.local));
      // JSON.parse keeps -0: the json form gives the same float32 values, sign of zero included
      assert.deepEqual(bits(rj.local.map(Math.fround)), bits(m));
    }
    // a b64 frame and a json frame of the same world: the same values
    const sb = await b.subscribe('js-rt');
    const sj = await j.subscribe('js-rt');
    await until(() => sb.mirror.size === 40 && sj.mirror.size === 40, 'both full frames');
    for (const [e, m] of want) {
      assert.deepEqual(bits(sb.mirror.matrix(e)), bits(m));
      assert.deepEqual(bits(sj.mirror.matrix(e)), bits(m));
    }
    await b.call('world.destroy', { world: 'js-rt' });
    b.close();
    j.close();
  });

  test('a subscription keeps a mirror: deltas, removals, the end', async () => {
    const c = await connect(url, { WebSocket });
    await c.call('world.create', { world: 'js-mirror' });
    const ids = [];
    for (let i = 0; i < 20; i++) ids.push((await c.call('transform.create', { world: 'js-mirror', t: [i, 0, 0] })).entity);
    const frames = [];
    let ended = null;
    const sub = await c.subscribe('js-mirror', { onFrame: (f) => frames.push(f), onEnd: (r) => { ended = r; } });
    await until(() => frames.length === 1, 'the full frame');
    assert.equal(frames[0].full, true);
    assert.ok(frames[0].matrices instanceof Float32Array);
    assert.equal(frames[0].matrices.length, 16 * 20);
    await c.call('transform.set_local', { world: 'js-mirror', entity: ids[3], t: [100, 0, 0] });
    await c.call('transform.destroy', { world: 'js-mirror', entity: ids[5] });
    const made = (await c.call('transform.create', { world: 'js-mirror', t: [7, 7, 7] })).entity;
    await until(() => sub.mirror.has(made) && !sub.mirror.has(ids[5]), 'the delta');
    assert.equal(sub.mirror.matrix(ids[3])[12], 100);
    assert.equal(sub.mirror.size, 20);
    assert.ok(frames.slice(1).every((f) => !f.full));
    await c.call('world.destroy', { world: 'js-mirror' });
    await until(() => ended === 'world_destroyed', 'the end of the subscription');
    assert.equal(sub.ended, 'world_destroyed');
    c.close();
  });

  test('a subscriber that lags is brought back by a full frame', async () => {
    const dl = await startDaemon(['--tick-hz', '60', '--output-limit', '200000']);
    try {
      const u = `ws://127.0.0.1:${dl.httpPort}/ws`;
      const ctl = await connect(u, { WebSocket });
      const c = await connect(u, { WebSocket });
      await ctl.call('world.create', { world: 'lag' });
      const ops = [];
      for (let i = 0; i < 2000; i++) ops.push({ cmd: 'transform.create', t: [i, 0, 0] });
      const ids = (await ctl.call('batch', { world: 'lag', ops })).results.map((r) => r.entity);
      let fulls = 0;
      const sub = await c.subscribe('lag', { onFrame: (f) => { fulls += f.full; } });
      await until(() => fulls === 1, 'the first frame');
      c.ws.pause(); // stop reading: frames pile up, then are dropped
      for (let round = 1; round <= 30; round++) {
        await ctl.call('batch', { world: 'lag', ops: ids.map((e, i) => ({ cmd: 'transform.set_local', entity: e, t: [i, round, 0] })) });
        await sleep(20);
      }
      await until(async () => (await ctl.call('info')).metrics.stream_lags_total > 0, 'the subscriber to lag');
      c.ws.resume();
      await until(() => fulls >= 2 && sub.mirror.matrix(ids[1999])?.[13] === 30, 'a full frame with the final state', 10000);
      for (const [i, e] of ids.entries()) assert.equal(sub.mirror.matrix(e)[13], 30, `entity ${i}`);
      assert.equal(sub.mirror.size, 2000);
      ctl.close();
      c.close();
    } finally {
      assert.equal(await dl.stop(), 0);
    }
  });

  test('a token: refused when wrong, then works; in Node the ws package by default', async () => {
    const dt = await startDaemon(['--auth-token', 'hunter2']);
    try {
      const u = `ws://127.0.0.1:${dt.httpPort}/ws`;
      await assert.rejects(connect(u, { WebSocket, token: 'wrong' }), (e) => e.code === 'UNAUTHORIZED');
      const bare = await Client.open(u, { WebSocket });
      await assert.rejects(bare.call('world.list'), (e) => e.code === 'UNAUTHORIZED');
      bare.close();
      // no WebSocket given: Node 20 has no global one, so the module imports ws (found beside
      // the npm packages the tests use)
      const copy = path.join(path.dirname(requireModule.resolve('ws/package.json')), '..', '..', 'scened-client-copy.mjs');
      fs.copyFileSync(path.join(repo, 'client/js/scened.mjs'), copy);
      const mod = await import(pathToFileURL(copy).href);
      const c = await mod.connect(u, { token: 'hunter2' });
      assert.equal((await c.call('world.list')).ok, true);
      assert.equal(c.matrices, 'b64');
      c.close();
      fs.unlinkSync(copy);
    } finally {
      assert.equal(await dt.stop(), 0);
    }
  });

  test('history: a past tick answers what its frame carried, to the bit, in both forms', async () => {
    const c = await connect(url, { WebSocket });
    const j = await connect(url, { WebSocket, matrices: 'json' });
    const W = 'js-hist';
    await c.call('world.create', { world: W, history: 600 });
    const root = (await c.call('transform.create', { world: W, name: 'root' })).entity;
    const child = (await c.call('transform.create', { world: W, parent: root, name: 'child', t: [0, 1, 0.25], r: [0, 0.38268343, 0, 0.9238795] })).entity;
    // every frame's matrices, by tick
    const frames = new Map();
    const sub = await c.subscribe(W, {
      onFrame(f) {
        const m = new Map();
        f.ids.forEach((id, i) => m.set(id, f.matrices.slice(16 * i, 16 * i + 16)));
        frames.set(f.tick, m);
      },
    });
    await until(() => frames.size === 1, 'the full frame');
    const tickOf = (pred) => [...frames].find(([, m]) => pred(m))?.[0];
    for (let i = 1; i <= 5; i++) {
      const a = i * 0.4;
      await c.call('transform.set_local', { world: W, entity: root, t: [i * 1.7, i * 0.1, -i], r: [0, Math.sin(a), 0, Math.cos(a)], s: 1 + i / 10 });
      await until(() => tickOf((m) => m.get(root)?.[12] === Math.fround(i * 1.7)), `the frame of move ${i}`);
    }
    const late = (await c.call('transform.create', { world: W, name: 'late', t: [9, 9, 9] })).entity;
    await until(() => tickOf((m) => m.has(late)), 'the frame with the late entity');
    const lateTick = tickOf((m) => m.has(late));

    // each frame's values, read back at its tick: the same bits, b64 and json alike
    let checked = 0;
    for (const [tick, m] of frames) {
      for (const [id, want] of m) {
        const got = await c.get(W, id, { tick });
        assert.equal(got.tick, tick);
        assert.equal(got.entity, id);
        assert.deepEqual(bits(got.world), bits(want), `entity ${id} at tick ${tick} (b64)`);
        const raw = await c.call('transform.get', { world: W, entity: id, tick });
        assert.equal(typeof raw.world, 'string', 'b64 matrices at a past tick');
        assert.equal(raw.world, matrixToB64(want));
        const js = await j.get(W, id, { tick });
        assert.deepEqual(bits(js.world), bits(want), `entity ${id} at tick ${tick} (json)`);
        assert.deepEqual(bits(js.local), bits(got.local));
        checked++;
      }
    }
    assert.ok(checked >= 8, `${checked} matrices checked`);
    // parent and name at a past tick; relative at a past tick: the child's local, either form
    const t0 = Math.min(...frames.keys());
    const kid = await c.get(W, child, { tick: t0, trs: true });
    assert.equal(kid.parent, root);
    assert.equal(kid.name, 'child');
    assert.ok(kid.local_trs && Math.abs(kid.local_trs.t[2] - 0.25) < 1e-7);
    for (const tick of frames.keys()) {
      const rb = await c.relative(W, child, root, { tick });
      const rj = await j.relative(W, child, root, { tick });
      assert.deepEqual(bits(rb), bits(rj));
      const local = (await c.get(W, child, { tick })).local;
      for (let k = 0; k < 16; k++) assert.ok(Math.abs(rb[k] - local[k]) < 1e-5, `relative at ${tick}, element ${k}`);
    }
    // an entity created after a tick is NOT_FOUND at it, and found from its frame's tick on
    await assert.rejects(c.get(W, late, { tick: lateTick - 1 }), (e) => e instanceof ScenedError && e.code === 'NOT_FOUND');
    assert.equal((await c.get(W, late, { tick: lateTick })).world[12], 9);
    const many = await c.getMany(W, [root, child, late, 999999], { tick: lateTick - 1 });
    assert.deepEqual(many.map((r) => r && r.entity), [root, child, null, null]);
    // between two ticks: translation interpolated
    const moved = [...frames.keys()].filter((t) => t > t0 && frames.get(t).has(root)).at(-1);
    const [before, after] = [await c.get(W, root, { tick: moved - 1 }), await c.get(W, root, { tick: moved })];
    const mid = await c.get(W, root, { tick: moved - 0.5 });
    assert.equal(mid.tick, moved - 0.5);
    for (const k of [12, 13, 14]) assert.ok(Math.abs(mid.world[k] - (before.world[k] + after.world[k]) / 2) < 1e-5, `element ${k}`);
    // outside the window, or in a world without history: NOT_FOUND, the message naming the window
    const now = (await c.get(W, root)).tick;
    assert.ok(now >= lateTick);
    await assert.rejects(c.get(W, root, { tick: now + 1000 }), (e) => e.code === 'NOT_FOUND' && /ticks \d+ to \d+/.test(e.message));
    await assert.rejects(c.relative(W, child, root, { tick: now + 1000 }), (e) => e.code === 'NOT_FOUND');
    await c.call('world.create', { world: 'js-short', history: 5 });
    const s = (await c.call('transform.create', { world: 'js-short' })).entity;
    await until(async () => (await c.get('js-short', s)).tick > 40, 'forty ticks', 10000);
    const sNow = (await c.get('js-short', s)).tick;
    await assert.rejects(c.get('js-short', s, { tick: sNow - 30 }), (e) => e.code === 'NOT_FOUND' && /outside the history/.test(e.message));
    assert.equal((await c.getMany('js-short', [s], { tick: sNow - 30 }))[0], null);
    await c.call('world.create', { world: 'js-nohist' });
    const n = (await c.call('transform.create', { world: 'js-nohist' })).entity;
    await assert.rejects(c.get('js-nohist', n, { tick: 1 }), (e) => e.code === 'NOT_FOUND');
    // a tick that is not a number is refused before it is sent
    for (const bad of [NaN, Infinity, -1, '12'])
      await assert.rejects(c.get(W, root, { tick: bad }), TypeError);
    await sub.unsubscribe();
    for (const w of [W, 'js-short', 'js-nohist']) await c.call('world.destroy', { world: w });
    c.close();
    j.close();
  });

  // near: a region around an entity (which moves with its parent), hysteresis at its edge,
  // subscribe.update to widen it, to a fixed point and to no region, in both forms.
  for (const form of ['b64', 'json']) {
    test(`near (${form}): what leaves the region leaves the mirror; an update brings it back without a full frame`, async () => {
      const c = await connect(url, { WebSocket, matrices: form });
      const W = `js-near-${form}`;
      await c.call('world.create', { world: W });
      const make = async (t, parent) => (await c.call('transform.create', { world: W, t, ...(parent ? { parent } : {}) })).entity;
      const carrier = await make([0, 0, -30]);
      const center = await make([0, 0, 30], carrier); // at the origin, through its parent
      const close = await make([2, 0, 0]);
      const far = await make([20, 0, 0]);
      const frames = [];
      let ended = null;
      const sub = await c.subscribe(W, {
        near: { entity: center, radius: 5, margin: 1 },
        onFrame: (f) => frames.push(f),
        onEnd: (r) => { ended = r; },
      });
      assert.deepEqual(sub.near, { entity: center, radius: 5, margin: 1 });
      const scope = () => [...sub.mirror.ids].sort((a, b) => a - b);
      const since = (n) => frames.slice(n);
      await until(() => frames.length >= 1, 'the full frame');
      assert.equal(frames[0].full, true);
      assert.deepEqual([...frames[0].ids].sort((a, b) => a - b), [center, close]);
      assert.deepEqual(scope(), [center, close]);

      // beyond the radius but within radius + margin: it stays, and its moves arrive
      await c.call('transform.set_local', { world: W, entity: close, t: [5.5, 0, 0] });
      await until(() => sub.mirror.matrix(close)?.[12] === 5.5, 'the move within the margin');
      // beyond radius + margin: in "removed", and out of the mirror
      let n = frames.length;
      await c.call('transform.set_local', { world: W, entity: close, t: [7, 0, 0] });
      await until(() => !sub.mirror.has(close), 'the entity to leave the mirror');
      assert.ok(since(n).some((f) => f.removed.includes(close)), 'it arrived in removed');
      assert.ok(since(n).every((f) => !f.full));
      assert.deepEqual(scope(), [center]);

      // a wider radius: it comes back without moving, and without a full frame
      n = frames.length;
      const r = await sub.update({ near: { entity: center, radius: 8, margin: 1 } });
      assert.equal(r.ok, true);
      assert.deepEqual(sub.near, { entity: center, radius: 8, margin: 1 });
      await until(() => sub.mirror.has(close), 'the entity back in scope');
      assert.equal(sub.mirror.matrix(close)[12], 7);
      assert.ok(since(n).every((f) => !f.full), 'no full frame after subscribe.update');
      assert.deepEqual(scope(), [center, close]);

      // the center moves with its parent: the region follows it
      n = frames.length;
      await c.call('transform.set_local', { world: W, entity: carrier, t: [18, 0, -30] });
      await until(() => sub.mirror.has(far) && !sub.mirror.has(close), 'the region to follow the center');
      assert.equal(sub.mirror.matrix(center)[12], 18);
      assert.deepEqual(scope(), [center, far]);
      assert.ok(since(n).every((f) => !f.full));

      // a fixed point, through the client's call with the subscription's id
      n = frames.length;
      await c.updateSubscription(sub.id, { near: { point: [7, 0, 0], radius: 1 } });
      assert.deepEqual(sub.near, { point: [7, 0, 0], radius: 1 });
      await until(() => sub.mirror.size === 1 && sub.mirror.has(close), 'the scope around the point');
      const left = since(n).flatMap((f) => f.removed).sort((a, b) => a - b);
      assert.deepEqual(left, [center, far]);
      assert.ok(since(n).every((f) => !f.full));

      // no region: what the mirror lacks arrives, still without a full frame
      n = frames.length;
      await sub.update({ near: null });
      assert.equal(sub.near, null);
      await until(() => sub.mirror.size === 4, 'the whole world');
      assert.ok(since(n).every((f) => !f.full));
      assert.equal(sub.mirror.matrix(carrier)[12], 18);

      // the end of the world leaves nothing in the mirror
      await c.call('world.destroy', { world: W });
      await until(() => ended === 'world_destroyed', 'the end of the subscription');
      assert.equal(sub.mirror.size, 0);
      c.close();
    });
  }

  test('near: refusals answer their code and change nothing', async () => {
    const c = await connect(url, { WebSocket });
    const other = await connect(url, { WebSocket });
    const W = 'js-near-bad';
    await c.call('world.create', { world: W });
    const center = (await c.call('transform.create', { world: W })).entity;
    const close = (await c.call('transform.create', { world: W, t: [1, 0, 0] })).entity;
    const subscriptions = async () => (await c.call('info')).subscriptions;
    const before = await subscriptions();
    const bad = [
      null, 5, [], {}, { radius: 1 },
      { point: [0, 0, 0], entity: center, radius: 1 },
      { point: [0, 0], radius: 1 }, { point: [0, 0, 'x'], radius: 1 },
      { entity: center, radius: 0 }, { entity: center, radius: -1 }, { entity: center, radius: '5' },
      { entity: center }, { entity: center, radius: 1, margin: -1 }, { entity: center, radius: 1, margin: 'wide' },
      { entity: center, radius: 4, bands: [{ radius: 2, hz: 10 }, { radius: 2, hz: 5 }] },
      { entity: center, radius: 4, bands: [{ radius: 3, hz: 10 }, { radius: 1, hz: 5 }] },
      { entity: center, radius: 4, bands: [{ radius: 2, hz: 0 }] },
      { entity: center, radius: 4, bands: 'fast' },
    ];
    for (const near of bad)
      await assert.rejects(c.subscribe(W, { near }), (e) => e instanceof ScenedError && e.code === 'BAD_REQUEST', JSON.stringify(near));
    // an unknown member, in near or in a band, is named
    await assert.rejects(c.subscribe(W, { near: { entity: center, radius: 1, colour: 'red' } }), (e) => e.code === 'BAD_REQUEST' && /colour/.test(e.message));
    await assert.rejects(c.subscribe(W, { near: { entity: center, radius: 4, bands: [{ radius: 2, hz: 10, tone: 1 }] } }), (e) => e.code === 'BAD_REQUEST' && /tone/.test(e.message));
    await assert.rejects(c.subscribe(W, { near: { entity: 999999, radius: 1 } }), (e) => e.code === 'NOT_FOUND');
    // (a connection of an earlier test may still be closing: the count may only fall)
    assert.ok(await subscriptions() <= before, 'nothing subscribed');
    assert.equal(c.subs.size, 0);

    // subscribe.update: the region is kept as it was
    const frames = [];
    const sub = await c.subscribe(W, { near: { entity: center, radius: 2 }, onFrame: (f) => frames.push(f) });
    await until(() => frames.length === 1, 'the full frame');
    for (const near of [5, {}, { entity: center, radius: -1 }, { point: [0, 0, 0], entity: center, radius: 1 }])
      await assert.rejects(sub.update({ near }), (e) => e.code === 'BAD_REQUEST', JSON.stringify(near));
    await assert.rejects(sub.update({}), (e) => e.code === 'BAD_REQUEST');
    await assert.rejects(sub.update({ packed: { step: 0.001 } }), (e) => e.code === 'BAD_REQUEST');
    await assert.rejects(sub.update({ near: { entity: 999999, radius: 1 } }), (e) => e.code === 'NOT_FOUND');
    await assert.rejects(c.updateSubscription(999999, { near: null }), (e) => e.code === 'NOT_FOUND');
    await assert.rejects(other.updateSubscription(sub.id, { near: null }), (e) => e.code === 'NOT_FOUND');
    assert.deepEqual(sub.near, { entity: center, radius: 2 });
    // still radius 2: an entity moved to 3 leaves, one moved to 1.5 stays
    const far = (await c.call('transform.create', { world: W, t: [3, 0, 0] })).entity;
    await c.call('transform.set_local', { world: W, entity: close, t: [1.5, 0, 0] });
    await until(() => sub.mirror.matrix(close)?.[12] === 1.5, 'the move in scope');
    assert.equal(sub.mirror.has(far), false);
    assert.ok(frames.every((f) => !f.ids.includes(far)));
    await sub.unsubscribe();
    await c.call('world.destroy', { world: W });
    c.close();
    other.close();
  });

  test('near: a center destroyed removes the whole scope, then ends the subscription', async () => {
    const c = await connect(url, { WebSocket });
    const W = 'js-near-center';
    await c.call('world.create', { world: W });
    const center = (await c.call('transform.create', { world: W })).entity;
    const ring = [];
    for (let i = 0; i < 6; i++) ring.push((await c.call('transform.create', { world: W, t: [Math.cos(i), Math.sin(i), 0] })).entity);
    const outside = (await c.call('transform.create', { world: W, t: [50, 0, 0] })).entity;
    const frames = [];
    const ends = [];
    const sub = await c.subscribe(W, {
      near: { entity: center, radius: 3 },
      onFrame: (f) => frames.push(f),
      onEnd: (reason, ev) => ends.push({ reason, ev, size: sub.mirror.size, frames: frames.length }),
    });
    await until(() => sub.mirror.size === 7, 'the full frame');
    await c.call('transform.destroy', { world: W, entity: center });
    await until(() => ends.length === 1, 'the end of the subscription');
    assert.equal(ends[0].reason, 'center_destroyed');
    assert.deepEqual(ends[0].ev, { event: 'unsubscribed', sub: sub.id, reason: 'center_destroyed' });
    assert.equal(sub.ended, 'center_destroyed');
    assert.equal(ends[0].size, 0, 'the mirror is empty when onEnd runs');
    // the last frame before the end removed the whole scope
    const last = frames[ends[0].frames - 1];
    assert.deepEqual([...last.removed].sort((a, b) => a - b), [center, ...ring].sort((a, b) => a - b));
    assert.equal(c.subs.has(sub.id), false);
    await sub.unsubscribe(); // ended already: nothing to do
    // the world is still there, with what was not the center
    assert.equal((await c.call('transform.get', { world: W, entity: outside })).ok, true);
    await c.call('world.destroy', { world: W });
    c.close();
  });

  test('a subtree whose root is destroyed leaves nothing in the mirror', async () => {
    const c = await connect(url, { WebSocket });
    const W = 'js-root-gone';
    await c.call('world.create', { world: W });
    const root = (await c.call('transform.create', { world: W })).entity;
    await c.call('transform.create', { world: W, parent: root, t: [1, 0, 0] });
    let ended = null;
    const sub = await c.subscribe(W, { root, onEnd: (r) => { ended = r; } });
    await until(() => sub.mirror.size === 2, 'the full frame');
    await c.call('transform.destroy', { world: W, entity: root });
    await until(() => ended === 'root_destroyed', 'the end of the subscription');
    assert.equal(sub.mirror.size, 0);
    await c.call('world.destroy', { world: W });
    c.close();
  });

  test('packed: binary frames fill the mirror within the grid of the exact values; a new grid', async () => {
    const c = await connect(url, { WebSocket }); // b64: the exact values beside the packed ones
    const W = 'js-packed';
    await c.call('world.create', { world: W });
    const rand = mulberry(23);
    const u = (lo, hi) => lo + (hi - lo) * rand();
    const spec = (i) => ({
      t: [u(-300, 300), u(-300, 300), u(-300, 300)],
      r: [u(-1, 1), u(-1, 1), u(-1, 1), u(0.1, 1)],
      s: i % 3 === 0 ? 1 : i % 3 === 1 ? u(0.5, 2) : [-u(0.5, 2), u(0.5, 2), u(0.5, 2)],
    });
    const ids = [];
    for (let i = 0; i < 30; i++) {
      const parent = i >= 25 ? { parent: ids[i - 25] } : {}; // world matrices that compose
      ids.push((await c.call('transform.create', { world: W, ...parent, ...spec(i) })).entity);
    }
    let binary = 0;
    const receiveBinary = c.receiveBinary.bind(c);
    c.receiveBinary = (data) => {
      binary++;
      receiveBinary(data);
    };
    const exact = await c.subscribe(W);
    const packed = await c.subscribe(W, { packed: { step: 0.001, origin: [100, -50, 7] } });
    assert.equal(packed.packed.step, 0.001);
    const mismatch = (step) => {
      if (exact.mirror.tick !== packed.mirror.tick || exact.mirror.size !== ids.length || packed.mirror.size !== ids.length)
        return `ticks ${exact.mirror.tick} and ${packed.mirror.tick}, sizes ${exact.mirror.size} and ${packed.mirror.size}`;
      for (const id of ids) {
        const why = packedMismatch(step, exact.mirror.matrix(id), packed.mirror.matrix(id));
        if (why) return `${id}: ${why}`;
      }
      return '';
    };
    // once the b64 mirror holds what the daemon holds now (to the bit), the packed one is within
    // the grid of it at the same tick
    const settle = async (step, what) => {
      const truth = await Promise.all(ids.map((id) => c.get(W, id)));
      const end = Date.now() + 5000;
      let why;
      const behind = () => ids.findIndex((id, i) => bits(exact.mirror.matrix(id) ?? []).join() !== bits(truth[i].world).join());
      while ((behind() >= 0 || (why = mismatch(step))) && Date.now() < end) await sleep(20);
      assert.equal(behind(), -1, `${what}: the b64 mirror caught up`);
      assert.equal(mismatch(step), '', what);
    };
    await settle(0.001, 'the full frames');
    assert.ok(binary > 0, 'packed frames came as binary messages');
    for (let round = 0; round < 20; round++) {
      const id = ids[Math.floor(rand() * ids.length)];
      await c.call('transform.set_local', { world: W, entity: id, ...spec(round) });
      if (round % 4 === 0) await sleep(60); // some ticks apart, some in one tick
    }
    await settle(0.001, 'the moves');
    // a new grid from the next frame on: every translation absolute on it
    await packed.update({ packed: { step: 0.25 } });
    assert.equal(packed.packed.step, 0.25);
    for (const id of ids.slice(0, 25)) await c.call('transform.set_local', { world: W, entity: id, ...spec(1) });
    await settle(0.25, 'the new grid');
    for (const id of ids.slice(0, 25))
      for (let k = 12; k < 15; k++) assert.ok(Number.isInteger(packed.mirror.matrix(id)[k] / 0.25), `${id} on the grid of 0.25`);
    await packed.unsubscribe();
    await exact.unsubscribe();
    await c.call('world.destroy', { world: W });
    c.close();
  });

  test('a closed connection rejects what waits, with CLOSED', async () => {
    const c = await connect(url, { WebSocket });
    const pending = c.call('ping');
    c.close();
    await pending.catch(() => {});
    await assert.rejects(c.call('ping'), (e) => e.code === 'CLOSED');
    const m = new Mirror();
    m.apply({ full: true, tick: 1, ids: [5, 6], matrices: new Float32Array(32).fill(1), removed: [] });
    m.apply({ full: false, tick: 2, ids: [], matrices: new Float32Array(0), removed: [5] });
    assert.equal(m.size, 1);
    assert.equal(m.matrix(6)[0], 1);
  });
});

// The staging view while transforms move (a TCP client moves them every few milliseconds): the
// selected entity's local and world matrices are shown as one read answered them, with its
// tick, so that a root's two agree at every moment, and in a world with history they are the
// daemon's at the tick shown; the camera tracks a small world that travels far (tracking every
// transform is the default for a world just opened), or the selected entity, at its centre;
// a zoom or a pan by hand ends tracking. (Imported by browser.test.mjs.)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sleep, startDaemon, until } from './lib.mjs';
import { b64Client, launch, openPage, scened } from './browser_lib.mjs';
import { matrixOf } from '../../client/js/scened.mjs';
import { axisPixels, decodePng } from './png.mjs';

describe('staging view: moving transforms', () => {
  let d, tcp, browser, page, problems;
  const ids = {}; // name -> entity, per world
  const ok = async (req) => {
    const r = await tcp.call(req);
    assert.equal(r.ok, true, JSON.stringify(r));
    return r;
  };

  // Swings entity around the origin (turning about y), every 8 ms, until the returned stop()
  // is called (at most 2,500 moves).
  const swing = (world, entity) => {
    let running = true;
    const done = (async () => {
      for (let k = 0; running && k < 2500; k++) {
        const a = k / 15;
        await ok({ cmd: 'transform.set_local', world, entity, t: [Math.cos(a) * 3, 0.5, Math.sin(a) * 3], r: [0, Math.sin(a / 2), 0, Math.cos(a / 2)] });
        await sleep(8);
      }
    })();
    return async () => {
      running = false;
      await done;
    };
  };

  // The selected entity's panel, read at one moment: the cells of both matrices and the tick line.
  const panel = () => page.evaluate(() => {
    const cells = (id) => Array.from(document.querySelectorAll(`#${id} td`), (td) => td.textContent);
    return { local: cells('sel-local'), world: cells('sel-world'), tick: document.getElementById('sel-tick')?.textContent };
  });

  const open = async (world, count) => {
    await scened(page, (w) => window.scened.selectWorld(w), world);
    await page.waitForFunction(([w, n]) => window.scened.world === w && window.scened.entityCount === n, [world, count]);
  };

  // Selects entity and waits for its matrices on the right.
  const select = async (entity) => {
    await scened(page, (e) => window.scened.selectEntity(e), entity);
    await page.waitForFunction((e) => window.scened.selected === e && document.querySelectorAll('#sel-world td').length === 16 &&
      document.querySelectorAll('#sel-local td').length === 16, entity);
  };

  before(async () => {
    d = await startDaemon();
    tcp = await b64Client(d.port);
    for (const [world, history] of [['swing', 0], ['swing_h', 600]]) {
      await ok({ cmd: 'world.create', world, ...(history ? { history } : {}) });
      const arm = (await ok({ cmd: 'transform.create', world, name: 'arm', t: [3, 0.5, 0] })).entity;
      const hand = (await ok({ cmd: 'transform.create', world, name: 'hand', parent: arm, t: [1, 0, 0], r: [0, 0, 0.3826834, 0.9238795] })).entity;
      await ok({ cmd: 'transform.create', world, name: 'post', t: [0, 0, 0] });
      ids[world] = { arm, hand };
    }
    // a small world: six transforms within half a unit of the origin
    await ok({ cmd: 'world.create', world: 'drift' });
    const ops = [];
    for (let i = 0; i < 6; i++) ops.push({ cmd: 'transform.create', name: `mote_${i}`, t: [(i % 3) * 0.3 - 0.3, 0, Math.floor(i / 3) * 0.3] });
    ids.drift = (await ok({ cmd: 'batch', world: 'drift', ops })).results.map((r) => r.entity);
    browser = await launch();
    ({ page, problems } = await openPage(browser, d.httpPort));
    await page.waitForFunction(() => window.scened && window.scened.status === 'ready');
  });
  after(async () => {
    await browser?.close();
    tcp?.close();
    assert.equal(await d.stop(), 0);
  });

  test("a moving root's local and world matrices are shown at one tick, and agree", async () => {
    await open('swing', 3);
    await select(ids.swing.arm);
    const stop = swing('swing', ids.swing.arm);
    try {
      const ticks = new Set(), worlds = new Set();
      for (let i = 0; i < 25; i++) {
        await sleep(40);
        const p = await panel();
        assert.equal(p.world.length, 16, 'the world matrix shown');
        // a root: its world matrix is its local one, cell by cell
        assert.deepEqual(p.local, p.world, `sample ${i} at "${p.tick}"`);
        const m = p.tick.match(/^local and world read together after tick ([\d,]+)$/);
        assert.ok(m, `the tick shown: "${p.tick}"`);
        ticks.add(m[1]);
        worlds.add(p.world.join(' '));
      }
      // and kept up with the motion: read again many times over the second
      assert.ok(ticks.size >= 5 && worlds.size >= 5, `${ticks.size} ticks, ${worlds.size} matrices shown`);
    } finally {
      await stop();
    }
  });

  test('in a world with history they are read at the tick of the last frame: the daemon\'s values then', async () => {
    await open('swing_h', 3);
    const { arm, hand } = ids.swing_h;
    await select(hand); // a child of the moving arm: its world matrix moves, its local one does not
    const stop = swing('swing_h', arm);
    try {
      // (the names came with a plain read; the selected entity is read at a tick from now on)
      await page.waitForFunction((e) => window.scened.selectedMatrices?.entity === e && window.scened.selectedMatrices.exact, hand);
      const ticks = new Set();
      for (let i = 0; i < 10; i++) {
        await sleep(60);
        const [shown, p, lastTick] = [await scened(page, () => window.scened.selectedMatrices), await panel(), await scened(page, () => window.scened.lastTick)];
        assert.equal(shown.exact, true);
        assert.ok(shown.tick <= lastTick, `tick ${shown.tick} is one a frame brought (the last: ${lastTick})`);
        const truth = await ok({ cmd: 'transform.get', world: 'swing_h', entity: hand, tick: shown.tick });
        assert.deepEqual(shown.local, Array.from(matrixOf(truth.local)), `local at tick ${shown.tick}`);
        assert.deepEqual(shown.world, Array.from(matrixOf(truth.world)), `world at tick ${shown.tick}`);
        assert.match(p.tick, /^local and world at tick [\d,]+$/);
        ticks.add(shown.tick);
      }
      assert.ok(ticks.size >= 3, `${ticks.size} ticks shown`);
    } finally {
      await stop();
    }
  });

  // The canvas as the screen shows it: its pixels of the markers' axis colours.
  const pictured = async () => axisPixels(decodePng(await page.locator('#canvas-host canvas').screenshot()));

  test('a small world that travels far stays in view: tracking is on for a world just opened', async () => {
    await open('drift', 6);
    const motes = ids.drift;
    // four pictures over about four seconds while it goes 60 units away and 15 up
    for (let leg = 1; leg <= 4; leg++) {
      for (let s = 1; s <= 10; s++) {
        const k = (leg - 1) * 10 + s;
        const ops = motes.map((e, i) => ({ cmd: 'transform.set_local', entity: e, t: [(i % 3) * 0.3 - 0.3 + k * 1.5, k * 0.375, Math.floor(i / 3) * 0.3 - k] }));
        await ok({ cmd: 'batch', world: 'drift', ops });
        await sleep(80);
      }
      const x = -0.3 + leg * 15; // where the first mote is then
      await page.waitForFunction(([e, want]) => Math.abs(window.scened.matrix(e)[12] - want) < 1e-4, [motes[0], x]);
      await sleep(100); // drawn
      for (const e of motes) assert.ok(await scened(page, (id) => window.scened.screenPosition(id), e), `mote ${e} in view after leg ${leg}`);
      const axes = await pictured();
      assert.ok(axes.red >= 10 && axes.green >= 10, `markers in the picture after leg ${leg}: ${JSON.stringify(axes)}`);
    }
    assert.equal(await scened(page, () => window.scened.track), 'all');
    assert.equal(await page.inputValue('#track'), 'all');
  });

  test('tracking the selected entity keeps it at the centre; a zoom or a pan by hand ends tracking', async () => {
    const [lead, other] = ids.drift;
    await select(lead);
    await page.selectOption('#track', 'selected');
    assert.equal(await scened(page, () => window.scened.track), 'selected');
    await ok({ cmd: 'transform.set_local', world: 'drift', entity: lead, t: [200, -40, 120] });
    await page.waitForFunction((e) => window.scened.matrix(e)[12] === 200, lead);
    const box = await page.locator('#canvas-host canvas').boundingBox();
    await until(async () => {
      const p = await scened(page, (e) => window.scened.screenPosition(e), lead);
      return p && Math.hypot(p.x - box.width / 2, p.y - box.height / 2) < 2;
    }, 'the selected entity at the centre of the view');
    // a pan (the right button) takes the camera back
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.down({ button: 'right' });
    await page.mouse.move(box.x + box.width / 2 + 30, box.y + box.height / 2);
    await page.mouse.up({ button: 'right' });
    assert.equal(await page.inputValue('#track'), 'off');
    // tracking all again; then a zoom takes the camera back, and what moves on leaves the view
    await page.selectOption('#track', 'all');
    await until(async () => (await scened(page, (e) => window.scened.screenPosition(e), other)) !== null, 'every transform in view again');
    await page.mouse.wheel(0, -300);
    await until(async () => (await page.inputValue('#track')) === 'off', 'tracking off after the wheel');
    assert.equal(await scened(page, () => window.scened.track), 'off');
    await ok({ cmd: 'transform.set_local', world: 'drift', entity: other, t: [-5000, 0, -5000] });
    await page.waitForFunction((e) => window.scened.matrix(e)[12] === -5000, other);
    await sleep(200);
    assert.equal(await scened(page, (e) => window.scened.screenPosition(e), other), null, 'untracked, it left the view');
  });

  test('no console errors', () => {
    assert.deepEqual(problems, []);
  });
});

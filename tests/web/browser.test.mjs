// The staging view in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core
// from the npm registry): it loads from the daemon, lists the worlds, follows an entity that a
// TCP client moves, shows the selected entity's matrices, asks for the token when there is one,
// keeps up with 10,000 moving transforms, works over HTTPS and wss:// with an access list
// (showing what the token may do), shows a world with history as it stood at a past tick (the
// timeline), follows a world to its owner in a cluster, follows an entity with a radius (a
// subscription by distance: the region's circle, the scope drawn and counted, subscribe.update
// for a new radius, the end when the entity is destroyed), takes packed frames with
// #packed=STEP (within the grid of the truth, and says so), and logs no console errors. The page
// takes b64 frames (through scened.mjs) and holds the daemon's float32 values: the TCP client
// reads its truth in b64 too, and the two must agree to the bit. The screenshot is saved as
// build/staging-view.png (SCENED_SCREENSHOT).
// Three more files run with these: browser_motion.mjs (the selected entity's matrices at one tick
// while it moves; the camera tracking a world that travels), browser_headless.mjs (pictures
// taken with `chromium --headless --screenshot --virtual-time-budget=5000`) and
// browser_replicas.mjs (the cluster panel with replicas: owners, followers, in-sync sets, lags).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TcpClient, makeCerts, packedMismatch, requireModule, sleep, startDaemon, until } from './lib.mjs';
import { matrixOf } from '../../client/js/scened.mjs';
import { b64Client, launch, openPage, scened, screenshot, worldOf } from './browser_lib.mjs';
import './browser_motion.mjs';
import './browser_headless.mjs';
import './browser_replicas.mjs';

describe('staging view', () => {
  let d, tcp, browser, page, problems, car, wheel;
  before(async () => {
    d = await startDaemon();
    tcp = await b64Client(d.port);
    const ok = async (req) => {
      const r = await tcp.call(req);
      assert.equal(r.ok, true, JSON.stringify(r));
      return r;
    };
    await ok({ cmd: 'world.create', world: 'garage' });
    await ok({ cmd: 'world.create', world: 'menu' });
    car = (await ok({ cmd: 'transform.create', world: 'garage', name: 'car', t: [0, 0.5, 0] })).entity;
    const wheels = [['fl', 1, 1.5], ['fr', -1, 1.5], ['rl', 1, -1.5], ['rr', -1, -1.5]];
    for (const [n, x, z] of wheels) {
      const e = (await ok({ cmd: 'transform.create', world: 'garage', parent: car, name: `wheel_${n}`, t: [x, -0.3, z] })).entity;
      if (n === 'fl') wheel = e;
    }
    // a small crowd around the car, so the picture has something to show
    const ops = [];
    for (let i = 0; i < 60; i++) {
      const a = (i / 60) * Math.PI * 2;
      ops.push({ cmd: 'transform.create', name: `cone_${i}`, t: [Math.cos(a) * 6, 0, Math.sin(a) * 6], r: [0, Math.sin(a / 2), 0, Math.cos(a / 2)] });
    }
    await ok({ cmd: 'batch', world: 'garage', ops });
    await ok({ cmd: 'transform.create', world: 'menu', name: 'button' });
    browser = await launch();
    ({ page, problems } = await openPage(browser, d.httpPort));
  });
  after(async () => {
    await browser?.close();
    tcp?.close();
    assert.equal(await d.stop(), 0);
  });

  test('shows every world with its transform count and the daemon figures', async () => {
    await page.waitForFunction(() => window.scened && window.scened.status === 'ready');
    await page.waitForSelector('#worlds li[data-world="menu"]');
    // (world.list also answers each world's history window, which this view does not show)
    const worlds = await scened(page, () => window.scened.worlds.map(({ name, transforms }) => ({ name, transforms })));
    assert.deepEqual(worlds, [{ name: 'garage', transforms: 65 }, { name: 'menu', transforms: 1 }]);
    assert.equal(await page.textContent('#worlds li[data-world="garage"] .count'), '65');
    await until(async () => (await page.textContent('#f-connections')) !== '–', 'the figures', 5000);
    assert.equal(Number(await page.textContent('#f-connections')), 2); // the page and the TCP client
    await until(async () => /µs|ms/.test(await page.textContent('#f-tick')), 'the tick time', 5000);
  });

  test('a world in the view: every transform, names and ids in the list', async () => {
    await page.click('#worlds li[data-world="garage"]');
    await page.waitForFunction(() => window.scened.world === 'garage' && window.scened.entityCount === 65);
    assert.equal(await scened(page, () => window.scened.webgl), true, 'WebGL works');
    await page.waitForFunction(() => window.scened.findByName('wheel_rr') > 0);
    const w = await scened(page, (id) => window.scened.entity(id), wheel);
    assert.equal(w.name, 'wheel_fl');
    assert.equal(w.parent, car);
    const truth = await worldOf(tcp, 'garage', wheel);
    assert.deepEqual(w.world, truth); // exactly the daemon's float32 values
    await page.waitForSelector(`#entities .row[data-entity="${car}"]`);
    assert.match(await page.textContent(`#entities .row[data-entity="${car}"]`), /car\s*#1/);
    await page.fill('#filter', 'wheel');
    await until(async () => (await page.$$('#entities .row')).length === 4, 'the filtered list');
    await page.fill('#filter', '');
  });

  test('an entity moved by a TCP client moves in the page (from the stream)', async () => {
    await page.click(`#entities .row[data-entity="${car}"]`);
    await page.waitForSelector('#selected:not(.hidden)');
    assert.equal(await page.textContent('#sel-name'), 'car');
    const framesBefore = await scened(page, () => window.scened.framesReceived);
    const moved = await tcp.call({ cmd: 'transform.set_local', world: 'garage', entity: car, t: [3, 0.5, -2], r: [0, 0.3826834, 0, 0.9238795] });
    assert.equal(moved.ok, true);
    await page.waitForFunction((id) => {
      const m = window.scened.matrix(id);
      return m && m[12] === 3 && m[14] === -2;
    }, car);
    // the wheels follow their parent
    const truth = await worldOf(tcp, 'garage', wheel);
    await page.waitForFunction(([id, m]) => JSON.stringify(window.scened.matrix(id)) === JSON.stringify(m), [wheel, truth]);
    assert.ok((await scened(page, () => window.scened.framesReceived)) > framesBefore);
    // the selected entity's world matrix (rows) and local matrix on the right
    await until(async () => (await page.$$eval('#sel-world tr:first-child td', (tds) => tds.map((t) => t.textContent)))[3] === '3',
      'the world matrix to show x = 3');
    const local = await page.$$eval('#sel-local tr', (rows) => rows.map((r) => Array.from(r.cells, (c) => c.textContent)));
    await until(async () => {
      const rows = await page.$$eval('#sel-local tr', (rs) => rs.map((r) => Array.from(r.cells, (c) => c.textContent)));
      return rows.length === 4 && rows[2][3] === '-2';
    }, 'the local matrix', 5000);
    assert.ok(local.length === 4);
    // moving it again, continuously, for the picture
    for (let i = 1; i <= 10; i++) {
      await tcp.call({ cmd: 'transform.set_local', world: 'garage', entity: car, t: [3 - i * 0.1, 0.5, -2], r: [0, 0.3826834, 0, 0.9238795] });
      await sleep(20);
    }
    await page.waitForFunction((id) => Math.abs(window.scened.matrix(id)[12] - 2) < 1e-6, car);
  });

  test('#packed=0.001: packed frames fill the view within their grid, and the header says so', async () => {
    const opened = await openPage(browser, d.httpPort, false, '#world=garage&packed=0.001');
    const p = opened.page;
    try {
      await p.waitForFunction(() => window.scened && window.scened.world === 'garage' && window.scened.entityCount === 65);
      assert.equal(await scened(p, () => window.scened.packed), 0.001);
      const stream = await scened(p, () => window.scened.streamPacked);
      assert.ok(stream && stream.step === 0.001 && stream.held === 65, JSON.stringify(stream));
      assert.equal(await scened(page, () => window.scened.streamPacked), null);
      assert.equal(await p.textContent('#f-form'), 'packed 0.001');
      assert.match(await p.getAttribute('#f-form', 'title'), /grid of 0\.001/);
      assert.match(await scened(p, () => location.hash), /&packed=0\.001/);
      const cone = (await tcp.call({ cmd: 'transform.find', world: 'garage', path: 'cone_7' })).entity;
      const shown = (page2, id) => scened(page2, (e) => {
        const m = window.scened.matrix(e);
        return m ? Array.from(m) : null;
      }, id);
      const check = async (ids) => {
        for (const id of ids) {
          const truth = await worldOf(tcp, 'garage', id);
          await until(async () => packedMismatch(0.001, truth, await shown(p, id)) === '',
            `entity ${id} within the grid`, 5000);
        }
      };
      await check([car, wheel, cone]);
      // moved off the grid and turned: the deltas that follow stay within it
      for (let i = 1; i <= 5; i++) {
        const r = await tcp.call({ cmd: 'transform.set_local', world: 'garage', entity: car, t: [1.23456 + i * 0.0101, 0.5, -0.98765], r: [0.1, 0.7, 0.05 * i, 0.7] });
        assert.equal(r.ok, true);
        await sleep(30);
      }
      await check([car, wheel]);
      const truth = JSON.stringify(await worldOf(tcp, 'garage', car)); // the b64 page: to the bit
      await until(async () => JSON.stringify(await shown(page, car)) === truth, 'the b64 page exact', 5000);
    } finally {
      await p.close();
    }
    assert.deepEqual(opened.problems, []);
    assert.equal(await page.textContent('#f-form'), 'b64');
  });

  test('picking a transform in the 3D view selects it', async () => {
    await page.click('#fit');
    await sleep(200);
    // where the wheel's origin is on the screen, as the page's camera projects it
    const box = await page.locator('#canvas-host canvas').boundingBox();
    const spot = await page.evaluate((id) => window.scened.screenPosition(id), wheel);
    assert.ok(spot, 'the wheel is on the screen');
    await page.mouse.click(box.x + spot.x, box.y + spot.y);
    await page.waitForFunction((id) => window.scened.selected === id, wheel);
    assert.equal(await page.textContent('#sel-name'), 'wheel_fl');
  });

  test('a link made by a TCP client shows as a line to the new parent', async () => {
    const cone = (await tcp.call({ cmd: 'transform.find', world: 'garage', path: 'cone_0' })).entity;
    assert.equal(await scened(page, (id) => window.scened.entity(id).parent, cone), null);
    await sleep(2100); // entities are read again at most every 2 s
    const r = await tcp.call({ cmd: 'transform.link', world: 'garage', entity: cone, parent: car });
    assert.equal(r.ok, true);
    await page.waitForFunction(([id, p]) => window.scened.entity(id).parent === p, [cone, car]);
  });

  test('the screenshot shows the 3D view', async () => {
    await page.click(`#entities .row[data-entity="${car}"]`);
    await sleep(300);
    await page.screenshot({ path: screenshot });
    // the canvas has drawn markers: pixels that are not the background
    const coloured = await page.evaluate(() => {
      const c = document.querySelector('#canvas-host canvas');
      window.scened.redraw();
      const probe = document.createElement('canvas');
      probe.width = c.width;
      probe.height = c.height;
      const g = probe.getContext('2d');
      g.drawImage(c, 0, 0);
      const px = g.getImageData(0, 0, probe.width, probe.height).data;
      // pixels of a clearly red, green or blue hue: the x, y and z axes of the markers
      const n = { red: 0, green: 0, blue: 0 };
      const names = ['red', 'green', 'blue'];
      for (let i = 0; i < px.length; i += 4) {
        const c = [px[i], px[i + 1], px[i + 2]];
        const top = c.indexOf(Math.max(...c));
        const others = c.filter((_, k) => k !== top);
        if (c[top] > 110 && c[top] > 1.25 * Math.max(...others)) n[names[top]]++;
      }
      return n;
    });
    for (const [axis, n] of Object.entries(coloured)) assert.ok(n > 20, `${axis} axis pixels: ${n}`);
  });

  test('a destroyed world leaves the view and the list', async () => {
    await page.click('#worlds li[data-world="menu"]');
    await page.waitForFunction(() => window.scened.world === 'menu' && window.scened.entityCount === 1);
    await tcp.call({ cmd: 'world.destroy', world: 'menu' });
    await page.waitForFunction(() => window.scened.world === null && window.scened.entityCount === 0);
    await page.waitForFunction(() => !window.scened.worlds.some((w) => w.name === 'menu'));
  });

  test('no console errors, nothing fetched from elsewhere', () => {
    assert.deepEqual(problems, []);
  });
});

describe('staging view: a daemon with a token', () => {
  test('asks for the token, refuses a wrong one, then works', async () => {
    const d = await startDaemon(['--auth-token', 'opensesame']);
    const tcp = await TcpClient.connect(d.port);
    const browser = await launch();
    try {
      await tcp.call({ cmd: 'hello', token: 'opensesame' });
      await tcp.call({ cmd: 'world.create', world: 'secret' });
      const { page, problems } = await openPage(browser, d.httpPort);
      await page.waitForSelector('#auth:not(.hidden)');
      assert.equal(await scened(page, () => window.scened.status), 'auth');
      await page.fill('#auth-token', 'wrong');
      await page.click('#auth-form button');
      await until(async () => (await page.textContent('#auth-error')) === 'Wrong token.', 'the refusal');
      await page.fill('#auth-token', 'opensesame');
      await page.click('#auth-form button');
      await page.waitForSelector('#auth', { state: 'hidden' });
      await page.waitForFunction(() => window.scened.status === 'ready' && window.scened.world === 'secret');
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      tcp.close();
      assert.equal(await d.stop(), 0);
    }
  });
});

describe('staging view: HTTPS, wss:// and an access list', () => {
  test('asks for a token, shows what it may do and only the worlds it may see', async () => {
    const certs = makeCerts();
    const hash = (t) => createHash('sha256').update(t).digest('hex');
    const acl = path.join(certs.dir, 'acl');
    writeFileSync(acl, `${hash('op')} read,write,admin *\n${hash('viewer')} read match7.\n${hash('writer')} write *\n`);
    const d = await startDaemon([...certs.serverArgs, '--acl', acl]);
    const tcp = await TcpClient.connect(d.port, { ca: certs.ca });
    const browser = await launch();
    try {
      const ok = async (req) => assert.equal((await tcp.call(req)).ok, true);
      await ok({ cmd: 'hello', token: 'op' });
      await ok({ cmd: 'world.create', world: 'match7.a' });
      await ok({ cmd: 'world.create', world: 'match8.x' });
      await ok({ cmd: 'transform.create', world: 'match7.a', name: 'ball' });
      const { page, problems } = await openPage(browser, d.httpPort, true);
      assert.equal(new URL(page.url()).protocol, 'https:');
      await page.waitForSelector('#auth:not(.hidden)');
      // a token that may not read is not enough for the view
      await page.fill('#auth-token', 'writer');
      await page.click('#auth-form button');
      await until(async () => /may not read/.test(await page.textContent('#auth-error')), 'the refusal');
      await page.fill('#auth-token', 'viewer');
      await page.click('#auth-form button');
      await page.waitForSelector('#auth', { state: 'hidden' });
      await page.waitForFunction(() => window.scened.status === 'ready' && window.scened.world === 'match7.a');
      assert.equal(await page.textContent('#f-access'), 'read on match7.*');
      assert.deepEqual(await scened(page, () => window.scened.access), { rights: ['read'], prefixes: ['match7.'] });
      assert.deepEqual((await scened(page, () => window.scened.worlds)).map((w) => w.name), ['match7.a']);
      await page.waitForFunction(() => window.scened.findByName('ball') > 0);
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      tcp.close();
      assert.equal(await d.stop(), 0);
      certs.remove();
    }
  });
});

describe('staging view: 10,000 moving transforms', () => {
  test('keeps up with the stream and keeps drawing', async () => {
    const N = 10000;
    const d = await startDaemon();
    const tcp = await b64Client(d.port);
    const browser = await launch();
    try {
      await tcp.call({ cmd: 'world.create', world: 'crowd' });
      const side = Math.ceil(Math.sqrt(N));
      for (let start = 0; start < N; start += 2000) {
        const ops = [];
        for (let i = start; i < Math.min(N, start + 2000); i++)
          ops.push({ cmd: 'transform.create', t: [(i % side) * 2, 0, Math.floor(i / side) * 2] });
        assert.equal((await tcp.call({ cmd: 'batch', world: 'crowd', ops }, 20000)).ok, true);
      }
      const { page, problems } = await openPage(browser, d.httpPort);
      await page.waitForFunction((n) => window.scened.entityCount === n, N, { timeout: 20000 });
      // every transform moves, 30 times a second, for 4 seconds
      const before = await scened(page, () => ({ frames: window.scened.renderedFrames, stream: window.scened.framesReceived }));
      const t0 = Date.now();
      let round = 0;
      while (Date.now() - t0 < 4000) {
        round++;
        const ops = [];
        for (let i = 0; i < N; i++)
          ops.push({ cmd: 'transform.set_local', entity: i + 1, t: [(i % side) * 2, Math.sin(round / 5 + i / 50), Math.floor(i / side) * 2] });
        await tcp.call({ cmd: 'batch', world: 'crowd', ops }, 20000);
        await sleep(Math.max(0, round * 33 - (Date.now() - t0)));
      }
      const seconds = (Date.now() - t0) / 1000;
      const last = await worldOf(tcp, 'crowd', N);
      // the final state arrives
      await page.waitForFunction(([id, m]) => JSON.stringify(window.scened.matrix(id)) === JSON.stringify(m), [N, last], { timeout: 20000 });
      const afterRun = await scened(page, () => ({ frames: window.scened.renderedFrames, stream: window.scened.framesReceived }));
      const fps = (afterRun.frames - before.frames) / seconds;
      const streamFps = (afterRun.stream - before.stream) / seconds;
      const hz = await scened(page, () => window.scened.streamHz);
      console.log(`# 10,000 moving transforms: ${fps.toFixed(1)} rendered frames/s, ${streamFps.toFixed(1)} stream frames/s (asked: ${hz}), ${(round / seconds).toFixed(1)} updates/s sent`);
      // software rendering (no GPU) on a small machine: the bar is that it keeps drawing every
      // frame it gets (under the sanitizers, whose daemon is several times slower and which
      // measured 6.7 to 8.4 frames/s, only that it keeps drawing: 2 frames in the 4 s)
      const bar = Number(process.env.SCENED_WEB_MIN_FPS || 5);
      assert.ok(fps >= bar, `rendered ${fps.toFixed(1)} frames/s`);
      assert.ok(streamFps >= bar, `received ${streamFps.toFixed(1)} stream frames/s`);
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      tcp.close();
      assert.equal(await d.stop(), 0);
    }
  });
});

// The timeline of a world with history: set to a past tick (as a drag does: the range's value,
// then input and change events), the page shows the world as transform.get at that tick
// answers it (markers, list, the selected entity's matrices), hides what did not exist yet,
// and stays there while the stream goes on; "live" follows the stream again at once.
describe('staging view: the timeline of a world with history', () => {
  let d, tcp, browser, page, problems, mover, rider, post;
  const W = 'replay';
  const get = async (entity, tick, world = W) => {
    const r = await tcp.call({ cmd: 'transform.get', world, entity, ...(tick === undefined ? {} : { tick }) });
    assert.equal(r.ok, true, JSON.stringify(r));
    return { tick: r.tick, local: Array.from(matrixOf(r.local)), world: Array.from(matrixOf(r.world)), parent: r.parent };
  };
  const timeline = () => scened(page, () => window.scened.timeline);
  // What a drag does to the range: a new value, then input and change events.
  const scrub = (tick) => page.evaluate((t) => {
    const el = document.getElementById('tl-range');
    el.value = String(t);
    el.dispatchEvent(new Event('input', { bubbles: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
    return Number(el.value);
  }, tick);
  const cells = (table) => page.$$eval(`${table} tr`, (rows) => rows.map((r) => Array.from(r.cells, (c) => c.textContent)));

  before(async () => {
    d = await startDaemon();
    tcp = await b64Client(d.port);
    const ok = async (req) => {
      const r = await tcp.call(req);
      assert.equal(r.ok, true, JSON.stringify(r));
      return r;
    };
    await ok({ cmd: 'world.create', world: W, history: 600 });
    await ok({ cmd: 'world.create', world: 'plain' });
    mover = (await ok({ cmd: 'transform.create', world: W, name: 'mover' })).entity;
    rider = (await ok({ cmd: 'transform.create', world: W, parent: mover, name: 'rider', t: [0, 1, 0], r: [0, 0.38268343, 0, 0.9238795] })).entity;
    post = (await ok({ cmd: 'transform.create', world: W, name: 'post', t: [-3, 0, 2] })).entity;
    await ok({ cmd: 'transform.create', world: 'plain', name: 'thing' });
    browser = await launch();
    ({ page, problems } = await openPage(browser, d.httpPort));
    await page.waitForFunction(() => window.scened && window.scened.status === 'ready');
  });
  after(async () => {
    await browser?.close();
    tcp?.close();
    assert.equal(await d.stop(), 0);
  });

  test('no timeline for a world without history', async () => {
    await scened(page, () => window.scened.selectWorld('plain'));
    await page.waitForFunction(() => window.scened.world === 'plain' && window.scened.entityCount === 1);
    await sleep(0);
    const t = await timeline();
    assert.equal(t.visible, false);
    assert.equal(t.history, 0);
    assert.equal(await page.isVisible('#timeline'), false);
  });

  test('a past tick: markers, list and selected matrices as they were; live again', async () => {
    await scened(page, (w) => window.scened.selectWorld(w), W);
    await page.waitForFunction(() => window.scened.entityCount === 3 && window.scened.timeline.visible);
    assert.equal(await page.isVisible('#tl-range'), true);
    assert.equal((await timeline()).history, 600);
    await page.waitForSelector(`#entities .row[data-entity="${rider}"]`);
    await page.click(`#entities .row[data-entity="${rider}"]`);
    await page.waitForFunction((id) => window.scened.selected === id, rider);
    // the mover goes through five places; the tick each one was reached at is remembered
    const ticks = [];
    for (let i = 1; i <= 5; i++) {
      await tcp.call({ cmd: 'transform.set_local', world: W, entity: mover, t: [i, 0, -i / 2] });
      await page.waitForFunction(([e, x]) => window.scened.matrix(e)?.[12] === x, [mover, i]);
      ticks[i] = (await get(mover)).tick; // nothing has changed since: its values at that tick are these
    }
    const late = (await tcp.call({ cmd: 'transform.create', world: W, name: 'late', t: [5, 5, 5] })).entity;
    await page.waitForFunction(() => window.scened.findByName('late') > 0);
    await page.waitForFunction(() => window.scened.entityCount === 4);
    // one destroyed since: it was there at the ticks before
    const truthPost = await get(post, ticks[2]);
    assert.equal((await tcp.call({ cmd: 'transform.destroy', world: W, entity: post })).ok, true);
    await page.waitForFunction(() => window.scened.entityCount === 3 && !window.scened.findByName('post'));
    // the range follows the stream while live
    const live = await timeline();
    assert.equal(live.live, true);
    assert.ok(live.max >= ticks[5] && live.min === Math.max(1, live.max - 599), JSON.stringify(live));
    await page.click('#fit'); // every place the mover has been in view
    const liveSpot = await scened(page, (e) => window.scened.screenPosition(e), mover);

    const T = ticks[2];
    const truth = { mover: await get(mover, T), rider: await get(rider, T), post: truthPost };
    assert.equal(truth.mover.world[12], 2);
    assert.equal(await scrub(T), T, 'the range holds the tick');
    await page.waitForFunction((t) => { const s = window.scened.timeline; return !s.live && s.tick === t && !s.loading; }, T);
    const t = await timeline();
    assert.equal(t.visible, true);
    assert.equal(t.shown, 3);
    assert.equal(t.hidden, 1, 'the entity created later is hidden');
    // the markers are drawn at the matrices of tick T, to the bit
    for (const [name, e] of [['mover', mover], ['rider', rider], ['post', post]])
      assert.deepEqual(await scened(page, (id) => window.scened.matrix(id), e), truth[name].world, name);
    const pastSpot = await scened(page, (e) => window.scened.screenPosition(e), mover);
    assert.ok(pastSpot && liveSpot && Math.hypot(pastSpot.x - liveSpot.x, pastSpot.y - liveSpot.y) > 1, 'the marker is drawn where it was');
    // what did not exist at T is neither drawn nor listed
    assert.equal(await scened(page, (e) => window.scened.matrix(e), late), null);
    assert.equal(await scened(page, (e) => window.scened.entity(e), late), null);
    assert.equal(await scened(page, () => window.scened.entityCount), 3);
    await until(async () => (await page.$$('#entities .row')).length === 3, 'the list of tick T');
    assert.equal(await page.$(`#entities .row[data-entity="${late}"]`), null);
    assert.notEqual(await page.$(`#entities .row[data-entity="${post}"]`), null, 'the destroyed one, as it was');
    assert.match(await page.textContent('#entity-count'), new RegExp(`3 at tick ${T}`));
    // the selected entity: its local and world matrices at T
    const sel = await scened(page, (e) => window.scened.entity(e), rider);
    assert.deepEqual(sel.local, truth.rider.local);
    assert.deepEqual(sel.world, truth.rider.world);
    assert.equal(sel.parent, mover);
    const world = await cells('#sel-world'), local = await cells('#sel-local');
    assert.equal(world[0][3], '2');
    assert.equal(world[2][3], '-1');
    assert.equal(local[1][3], '1');
    assert.match(await page.textContent('#sel-id'), new RegExp(`at tick ${T}`));
    await page.screenshot({ path: screenshot.replace(/\.png$/, '-timeline.png') });

    // the stream goes on behind: the view stays at T
    const frames = await scened(page, () => window.scened.framesReceived);
    await tcp.call({ cmd: 'transform.set_local', world: W, entity: mover, t: [9, 0, 0] });
    await page.waitForFunction((n) => window.scened.framesReceived > n, frames);
    await sleep(100); // a few more ticks, in case
    assert.deepEqual(await scened(page, (id) => window.scened.matrix(id), mover), truth.mover.world);
    assert.equal((await cells('#sel-world'))[0][3], '2');
    // another tick
    assert.equal(await scrub(ticks[4]), ticks[4]);
    await page.waitForFunction((tk) => { const s = window.scened.timeline; return s.tick === tk && !s.loading; }, ticks[4]);
    assert.deepEqual(await scened(page, (id) => window.scened.matrix(id), mover), (await get(mover, ticks[4])).world);
    await until(async () => (await cells('#sel-world'))[0][3] === '4', 'the selected matrices of the other tick');

    // a fast drag: only the newest tick is read once the one being read is done
    const reads = (await timeline()).reads;
    const ticksAsked = [ticks[1], ticks[3], ticks[2], ticks[5], ticks[4], ticks[3]];
    await page.evaluate((list) => {
      const el = document.getElementById('tl-range');
      for (const t of list) {
        el.value = String(t);
        el.dispatchEvent(new Event('input', { bubbles: true }));
      }
      el.dispatchEvent(new Event('change', { bubbles: true }));
    }, ticksAsked);
    await page.waitForFunction((tk) => { const s = window.scened.timeline; return s.tick === tk && !s.loading; }, ticks[3]);
    assert.ok((await timeline()).reads - reads <= 2, `ticks read: ${(await timeline()).reads - reads}`);
    assert.deepEqual(await scened(page, (id) => window.scened.matrix(id), mover), (await get(mover, ticks[3])).world);

    // live: at once where the stream is, then following it
    await page.click('#tl-live');
    await page.waitForFunction(() => window.scened.timeline.live);
    assert.equal(await scened(page, (id) => window.scened.matrix(id)[12], mover), 9);
    assert.equal(await scened(page, () => window.scened.entityCount), 3);
    assert.equal(await scened(page, (e) => window.scened.matrix(e), post), null);
    assert.ok((await scened(page, () => window.scened.findByName('late'))) > 0);
    await page.waitForSelector(`#entities .row[data-entity="${late}"]`);
    const max = (await timeline()).max;
    await tcp.call({ cmd: 'transform.set_local', world: W, entity: mover, t: [11, 0, 0] });
    await page.waitForFunction((e) => window.scened.matrix(e)[12] === 11, mover);
    await until(async () => (await cells('#sel-world'))[0][3] === '11', 'the selected entity following the stream');
    await page.waitForFunction((m) => window.scened.timeline.max > m && window.scened.timeline.tick === window.scened.timeline.max, max);
    assert.equal(await scened(page, () => window.scened.selected), rider);
    assert.deepEqual(problems, []);
  });

  test('a world bigger than what is read at a past tick: the first 2,000, and the page says so', async () => {
    await tcp.call({ cmd: 'world.create', world: 'big', history: 600 });
    const ops = [];
    for (let i = 0; i < 2100; i++) ops.push({ cmd: 'transform.create', t: [i % 50, 0, Math.floor(i / 50)] });
    const first = (await tcp.call({ cmd: 'batch', world: 'big', ops }, 20000)).results[0].entity;
    // the first tick that ran after the batch was answered has every one of them
    const T = (await get(first, undefined, 'big')).tick + 1;
    await scened(page, () => window.scened.selectWorld('big'));
    await page.waitForFunction((t) => window.scened.entityCount === 2100 && window.scened.timeline.visible && window.scened.timeline.max > t, T, { timeout: 10000 });
    assert.equal(await scrub(T), T);
    await page.waitForFunction((t) => { const s = window.scened.timeline; return s.tick === t && !s.loading; }, T, { timeout: 20000 });
    const t = await timeline();
    console.log(`# read ${t.shown} at tick ${T}: ${t.readMs.toFixed(0)} ms`);
    assert.equal(t.shown, 2000, JSON.stringify({ ...t, T }));
    assert.equal(t.truncated, 100);
    assert.match(await page.textContent('#tl-note'), /first 2,000 of 2,100/);
    await page.click('#tl-live');
    await page.waitForFunction(() => window.scened.timeline.live && window.scened.entityCount === 2100);
    // and back to a world without history: no timeline
    await scened(page, () => window.scened.selectWorld('plain'));
    await page.waitForFunction(() => window.scened.world === 'plain' && window.scened.entityCount === 1);
    assert.equal((await timeline()).visible, false);
    assert.equal(await page.isVisible('#timeline'), false);
    assert.deepEqual(problems, []);
  });
});

// Following an entity: the page subscribes to what is near it ("near", with a radius and a
// margin typed in the panel), draws the region's circle around it and the scope in cyan over
// the whole world, counts the scope, changes the radius with subscribe.update (the same
// subscription), and says so when the entity is destroyed. The expected scope is computed here
// from the positions, with the margin's hysteresis.
describe('staging view: following an entity', () => {
  let d, tcp, browser, page, problems, walker;
  const W = 'field';
  const positions = new Map(); // entity -> [x, y, z]
  const ok = async (req) => {
    const r = await tcp.call(req);
    assert.equal(r.ok, true, JSON.stringify(r));
    return r;
  };
  // The scope after the center moved to c with radius r and margin m: what was in scope stays
  // within r + m, anything comes in within r.
  const expectScope = (previous, c, r, m) => {
    const out = [];
    for (const [e, p] of positions) {
      const dist = Math.hypot(p[0] - c[0], p[1] - c[1], p[2] - c[2]);
      if (dist <= r || (previous.includes(e) && dist <= r + m)) out.push(e);
    }
    return out.sort((a, b) => a - b);
  };
  const follow = () => scened(page, () => window.scened.follow);
  const interestGauge = async () => {
    const text = await (await fetch(`http://127.0.0.1:${d.httpPort}/metrics`)).text();
    const m = text.match(/^scened_interest_subscriptions (\S+)$/m);
    return m ? Number(m[1]) : null;
  };
  // Pixels of the scope's colour (cyan: green and blue high, red low) around points of the
  // canvas (CSS pixels), each looked for within `within` pixels: how many points have one.
  const cyanAround = (points, within = 3) => page.evaluate(([pts, r]) => {
    const c = document.querySelector('#canvas-host canvas');
    window.scened.redraw();
    const probe = document.createElement('canvas');
    probe.width = c.width;
    probe.height = c.height;
    const g = probe.getContext('2d');
    g.drawImage(c, 0, 0);
    const k = c.width / c.getBoundingClientRect().width;
    const px = g.getImageData(0, 0, probe.width, probe.height).data;
    let hits = 0;
    for (const p of pts) {
      let hit = false;
      const cx = Math.round(p.x * k), cy = Math.round(p.y * k), rr = Math.ceil(r * k);
      for (let y = cy - rr; y <= cy + rr && !hit; y++)
        for (let x = cx - rr; x <= cx + rr && !hit; x++) {
          if (x < 0 || y < 0 || x >= probe.width || y >= probe.height) continue;
          const i = (y * probe.width + x) * 4;
          if (px[i] < 140 && px[i + 1] > 150 && px[i + 2] > 150) hit = true;
        }
      if (hit) hits++;
    }
    return hits;
  }, [points, within]);

  before(async () => {
    d = await startDaemon();
    tcp = await b64Client(d.port);
    await ok({ cmd: 'world.create', world: W });
    // an 11 x 11 grid, 2 apart, on the floor, and the walker above its middle
    const ops = [];
    for (let i = 0; i < 11; i++)
      for (let j = 0; j < 11; j++) ops.push({ cmd: 'transform.create', name: `g_${i}_${j}`, t: [(i - 5) * 2, 0, (j - 5) * 2] });
    const made = (await ok({ cmd: 'batch', world: W, ops })).results;
    made.forEach((r, k) => positions.set(r.entity, ops[k].t));
    walker = (await ok({ cmd: 'transform.create', world: W, name: 'walker', t: [0, 0.5, 0] })).entity;
    positions.set(walker, [0, 0.5, 0]);
    browser = await launch();
    ({ page, problems } = await openPage(browser, d.httpPort));
    await page.waitForFunction(() => window.scened && window.scened.status === 'ready');
    await scened(page, (w) => window.scened.selectWorld(w), W);
    await page.waitForFunction(() => window.scened.entityCount === 122 && window.scened.findByName('walker') > 0);
  });
  after(async () => {
    await browser?.close();
    tcp?.close();
    assert.equal(await d.stop(), 0);
  });

  test('follows the selected entity: its circle, the scope drawn and counted', async () => {
    assert.equal(await page.isDisabled('#follow'), true, 'nothing selected: nothing to follow');
    await page.fill('#filter', 'walker'); // the list draws only the rows in sight
    await page.waitForSelector(`#entities .row[data-entity="${walker}"]`);
    await page.click(`#entities .row[data-entity="${walker}"]`);
    await page.waitForFunction((id) => window.scened.selected === id, walker);
    await page.fill('#filter', '');
    // a radius that is not one is refused before anything is sent
    await page.fill('#follow-radius', '0');
    await page.click('#follow');
    await until(async () => /radius must be a positive number/.test(await page.textContent('#follow-note')), 'the refusal');
    assert.equal(await follow(), null);
    await page.fill('#follow-radius', '3');
    await page.fill('#follow-margin', '1');
    await page.click('#follow');
    const want = expectScope([], [0, 0.5, 0], 3, 1);
    assert.equal(want.length, 10); // the walker and the nine grid points around it
    await page.waitForFunction((n) => window.scened.follow?.inScope === n, want.length);
    const f = await follow();
    assert.deepEqual(f.scope, want);
    assert.deepEqual([f.entity, f.radius, f.margin], [walker, 3, 1]);
    assert.match(await page.textContent('#follow-state'), /Following walker #\d+: 10 in scope \(radius 3, margin 1\)/);
    assert.match(await page.textContent('#view-scope'), /10 in scope/);
    assert.equal(await page.isVisible('#unfollow'), true);
    assert.equal(await scened(page, () => window.scened.entityCount), 122, 'the whole world is still shown');
    await until(async () => (await interestGauge()) === 1, 'the daemon to count one near subscription');

    // the circle: around the walker, as the view projects it
    await page.click('#fit');
    await sleep(200);
    const circle = await scened(page, () => window.scened.scopeCircle());
    const spot = await scened(page, (e) => window.scened.screenPosition(e), walker);
    assert.ok(circle && spot, 'the circle and the walker are on the screen');
    assert.ok(Math.hypot(circle.x - spot.x, circle.y - spot.y) < 1, JSON.stringify({ circle, spot }));
    assert.ok(circle.radius > 20, `a circle of ${circle.radius} px`);
    assert.ok(Math.abs(circle.outer / circle.radius - 4 / 3) < 0.05, 'the dashed circle at radius + margin');
    // drawn: cyan pixels along it (the circle), at the entities in scope, none at those far out
    const around = Array.from({ length: 16 }, (_, k) => ({
      x: circle.x + circle.radius * Math.cos((k * Math.PI) / 8), y: circle.y + circle.radius * Math.sin((k * Math.PI) / 8),
    }));
    const onCircle = await cyanAround(around);
    assert.ok(onCircle >= 12, `the circle drawn at ${onCircle} of 16 points`);
    const spots = async (ids) => {
      const out = [];
      for (const e of ids) out.push(await scened(page, (id) => window.scened.screenPosition(id), e));
      return out.filter(Boolean);
    };
    // (but the one under the walker, whose selection sphere hides it)
    const inside = (await spots(want.filter((e) => e !== walker))).filter((p) => Math.hypot(p.x - spot.x, p.y - spot.y) > 12);
    assert.ok(inside.length >= 6, `${inside.length} entities in scope on the screen`);
    assert.equal(await cyanAround(inside, 2), inside.length, 'every entity in scope is drawn in cyan');
    const corners = [...positions].filter(([, p]) => Math.abs(p[0]) === 10 && Math.abs(p[2]) === 10).map(([e]) => e);
    const outside = (await spots(corners)).filter((p) => Math.hypot(p.x - circle.x, p.y - circle.y) > circle.outer + 10);
    assert.ok(outside.length >= 2, 'corners far from the circle');
    assert.equal(await cyanAround(outside, 2), 0, 'entities out of scope are not');
    await page.screenshot({ path: screenshot.replace(/\.png$/, '-follow.png') });
  });

  test('the scope follows the entity; a new radius is a subscribe.update of the same subscription', async () => {
    const before = await follow();
    await ok({ cmd: 'transform.set_local', world: W, entity: walker, t: [6, 0.5, 0] });
    positions.set(walker, [6, 0.5, 0]);
    const moved = expectScope(before.scope, [6, 0.5, 0], 3, 1);
    await page.waitForFunction((s) => JSON.stringify(window.scened.follow?.scope) === s, JSON.stringify(moved));
    // the circle moved with it
    await until(async () => {
      const [c, p] = [await scened(page, () => window.scened.scopeCircle()), await scened(page, (e) => window.scened.screenPosition(e), walker)];
      return c && p && Math.hypot(c.x - p.x, c.y - p.y) < 1;
    }, 'the circle around the walker where it went');
    // a wider radius, typed: the same subscription, updated
    await page.fill('#follow-radius', '5');
    await page.dispatchEvent('#follow-radius', 'change');
    const wider = expectScope(moved, [6, 0.5, 0], 5, 1);
    assert.ok(wider.length > moved.length);
    await page.waitForFunction((s) => JSON.stringify(window.scened.follow?.scope) === s, JSON.stringify(wider));
    const after = await follow();
    assert.equal(after.sub, before.sub, 'no new subscription');
    assert.equal(after.radius, 5);
    assert.equal(after.updates, before.updates + 1);
    assert.match(await page.textContent('#view-scope'), new RegExp(`${wider.length} in scope`));
    assert.equal(await interestGauge(), 1);
    // unfollowing ends it: no circle, no count
    await page.click('#unfollow');
    await page.waitForFunction(() => window.scened.follow === null);
    assert.equal(await scened(page, () => window.scened.scopeCircle()), null);
    assert.equal(await page.isVisible('#view-scope'), false);
    assert.equal(await page.isVisible('#unfollow'), false);
    await until(async () => (await interestGauge()) === 0, 'the near subscription to end');
  });

  test('a followed entity destroyed: the page says so and shows the whole world', async () => {
    await page.click('#follow');
    await page.waitForFunction((e) => window.scened.follow?.entity === e && window.scened.follow.inScope > 1, walker);
    await ok({ cmd: 'transform.destroy', world: W, entity: walker });
    await page.waitForFunction(() => window.scened.follow === null);
    assert.match(await scened(page, () => window.scened.followNote), /walker #\d+ was destroyed/);
    await until(async () => /was destroyed/.test(await page.textContent('#follow-note')), 'the note');
    await page.waitForFunction(() => window.scened.entityCount === 121);
    assert.equal(await scened(page, () => window.scened.scopeCircle()), null);
    assert.equal(await page.isVisible('#view-scope'), false);
    assert.equal(await interestGauge(), 0);
    assert.deepEqual(problems, []);
  });
});

// A cluster: the page of one daemon shows the nodes with their load and which node owns each
// world, and opens a world owned by the other daemon on that daemon's /ws (which allows the
// page's origin with --ws-origins).
describe('staging view: a cluster', () => {
  const { spawn } = requireModule('node:child_process');
  const fs = requireModule('node:fs');
  const os = requireModule('node:os');
  const net = requireModule('node:net');
  const freePort = () => new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  let etcd, dir, a, b, tcpB, browser;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scened-web-cluster-'));
    const [cp, pp] = [await freePort(), await freePort()];
    const url = `http://127.0.0.1:${cp}`;
    etcd = spawn('etcd', ['--name', 'w', '--data-dir', path.join(dir, 'etcd'),
      '--listen-client-urls', url, '--advertise-client-urls', url,
      '--listen-peer-urls', `http://127.0.0.1:${pp}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${pp}`,
      '--initial-cluster', `w=http://127.0.0.1:${pp}`, '--heartbeat-interval', '10', '--election-timeout', '100'],
    { stdio: 'ignore' });
    await until(async () => {
      try {
        return (await fetch(`${url}/health`)).ok;
      } catch {
        return false;
      }
    }, 'etcd', 15000, 50);
    const common = ['--cluster', url, '--data', path.join(dir, 'data'), '--lease-ttl', '2'];
    a = await startDaemon([...common, '--node', 'alpha']);
    b = await startDaemon([...common, '--node', 'beta', '--ws-origins', `http://127.0.0.1:${a.httpPort}`]);
    tcpB = await TcpClient.connect(b.port);
    await until(async () => {
      const r = await tcpB.call({ cmd: 'cluster.nodes' });
      return r.ok && r.nodes.length === 2;
    }, 'both nodes registered', 15000, 50);
    assert.equal((await tcpB.call({ cmd: 'world.create', world: 'arena.main' })).node, 'beta');
    for (let i = 0; i < 5; i++)
      assert.equal((await tcpB.call({ cmd: 'transform.create', world: 'arena.main', name: `p${i}`, t: [i, 0, 0] })).ok, true);
    browser = await launch();
  });
  after(async () => {
    if (browser) await browser.close();
    if (tcpB) tcpB.close();
    for (const d of [a, b]) if (d) assert.equal(await d.stop(), 0);
    if (etcd) {
      etcd.kill('SIGTERM');
      await new Promise((r) => etcd.once('exit', r));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('nodes with their load, owners, and a world opened on its owner', async () => {
    const { page, problems } = await openPage(browser, a.httpPort);
    await page.waitForFunction(() => window.scened.node === 'alpha' && window.scened.nodes.length === 2, null, { timeout: 15000 });
    await page.waitForFunction(() => window.scened.worlds.some((w) => w.name === 'arena.main' && w.node === 'beta'), null, { timeout: 15000 });
    assert.match(await page.textContent('#nodes'), /beta/);
    await scened(page, () => window.scened.selectWorld('arena.main'));
    await page.waitForFunction(() => window.scened.entityCount === 5 && window.scened.owner === 'beta', null, { timeout: 15000 });
    // A change made on the owner reaches the page through the owner's stream.
    const id = (await tcpB.call({ cmd: 'transform.find', world: 'arena.main', path: 'p3' })).entity;
    await tcpB.call({ cmd: 'transform.set_local', world: 'arena.main', entity: id, t: [7, 7, 7] });
    await page.waitForFunction((e) => { const m = window.scened.matrix(e); return m && m[12] === 7; }, id, { timeout: 15000 });
    await page.screenshot({ path: screenshot.replace(/\.png$/, '-cluster.png') });
    // without --replicas the panel has no groups to show, and no other owner is asked for figures
    assert.equal(await scened(page, () => window.scened.replicas), null);
    assert.equal(await page.isVisible('#replicas'), false);
    assert.deepEqual(await scened(page, () => window.scened.peers), []);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test('a world moved to another node is opened again there, the selection kept', async () => {
    const { page, problems } = await openPage(browser, a.httpPort);
    await page.waitForFunction(() => window.scened.node === 'alpha' && window.scened.nodes.length === 2, null, { timeout: 15000 });
    await page.waitForFunction(() => window.scened.worlds.some((w) => w.name === 'arena.main' && w.node === 'beta'), null, { timeout: 15000 });
    await scened(page, () => window.scened.selectWorld('arena.main'));
    await page.waitForFunction(() => window.scened.entityCount === 5 && window.scened.owner === 'beta', null, { timeout: 15000 });
    const p1 = (await tcpB.call({ cmd: 'transform.find', world: 'arena.main', path: 'p1' })).entity;
    await page.waitForFunction((e) => window.scened.findByName('p1') === e, p1, { timeout: 15000 });
    await scened(page, (e) => window.scened.selectEntity(e), p1);
    const tcpA = await TcpClient.connect(a.port);
    try {
      // to alpha, the page's own daemon: the world is read over the page's own connection
      assert.equal((await tcpB.call({ cmd: 'world.move', world: 'arena.main', to: 'alpha' }, 15000)).ok, true);
      await page.waitForFunction(() => window.scened.owner === 'alpha' && window.scened.world === 'arena.main' && window.scened.entityCount === 5, null, { timeout: 15000 });
      assert.equal(await scened(page, () => window.scened.selected), p1);
      await tcpA.call({ cmd: 'transform.set_local', world: 'arena.main', entity: p1, t: [-4, 2, 1] });
      await page.waitForFunction((e) => { const m = window.scened.matrix(e); return m && m[12] === -4; }, p1, { timeout: 15000 });
      // and back to beta: the page opens beta's /ws again
      assert.equal((await tcpA.call({ cmd: 'world.move', world: 'arena.main', to: 'beta' }, 15000)).ok, true);
      await page.waitForFunction(() => window.scened.owner === 'beta' && window.scened.world === 'arena.main' && window.scened.entityCount === 5, null, { timeout: 15000 });
      await tcpB.call({ cmd: 'transform.set_local', world: 'arena.main', entity: p1, t: [5, 2, 1] });
      await page.waitForFunction((e) => { const m = window.scened.matrix(e); return m && m[12] === 5; }, p1, { timeout: 15000 });
      assert.equal(await scened(page, () => window.scened.selected), p1);
      await until(async () => /beta/.test(await page.textContent('#nodes li.selected')), 'the owner marked in the nodes panel', 5000);
      assert.match(await page.textContent('#nodes'), /alpha \(this page\)/);
      assert.deepEqual(problems, []);
    } finally {
      tcpA.close();
      await page.close();
    }
  });
});

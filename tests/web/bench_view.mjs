// The staging view's benchmark (make bench runs it when Chromium is installed): a world of
// 10,000 transforms under one root (100 chains of 100) that moves and turns every tick, so that
// every frame holds 10,000 changed matrices; the page in headless Chromium (software rendering) follows it for
// SECONDS (default 6) taking b64 frames, then json frames. Prints, for each form, the frames
// drawn per second, the frames received per second (and the rate the page asked for: it asks
// for fewer when reading them would take more than about a third of its time), and the
// page's time per frame: reading one frame (parse, decode, mirror) and drawing one.
//
//   node tests/web/bench_view.mjs [--json]      (VIEW_W, VIEW_H: the page's size, 1400 x 860)
import { TcpClient, requireModule, sleep, startDaemon } from './lib.mjs';

const { chromium } = requireModule('playwright-core');
const N = 10000; // transforms besides the root
const SECONDS = Number(process.env.SECONDS || 6);
const asJson = process.argv.includes('--json');

async function measure(browser, d, form) {
  const page = await browser.newPage({ viewport: { width: Number(process.env.VIEW_W || 1400), height: Number(process.env.VIEW_H || 860) } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`http://127.0.0.1:${d.httpPort}/#world=crowd${form === 'json' ? '&matrices=json' : ''}`);
  await page.waitForFunction((n) => window.scened && window.scened.entityCount === n, N + 1, { timeout: 60000 });
  const form_ = await page.evaluate(() => window.scened.matrices);
  if (form_ !== form) throw new Error(`the page takes ${form_}, not ${form}`);
  await sleep(2000); // the page settles its rate
  const read = () => page.evaluate(() => ({
    frames: window.scened.renderedFrames, stream: window.scened.framesReceived,
    frameMs: window.scened.frameMs, renderMs: window.scened.renderMs, hz: window.scened.streamHz,
  }));
  const a = await read();
  const t0 = Date.now();
  const samples = [];
  while (Date.now() - t0 < SECONDS * 1000) {
    await sleep(500);
    samples.push(await read());
  }
  const b = await read();
  const secs = (Date.now() - t0) / 1000;
  await page.close();
  if (errors.length) throw new Error(errors.join('; '));
  const mean = (k) => samples.reduce((s, x) => s + x[k], 0) / samples.length;
  return {
    form, transforms: N, seconds: secs,
    drawn_fps: (b.frames - a.frames) / secs,
    stream_fps: (b.stream - a.stream) / secs,
    asked_hz: b.hz,
    read_ms: mean('frameMs'),
    draw_ms: mean('renderMs'),
  };
}

const d = await startDaemon();
const tcp = await TcpClient.connect(d.port);
let mover = null;
let browser = null;
try {
  await tcp.call({ cmd: 'world.create', world: 'crowd' });
  // a root and under it 100 chains of 100 links, each link 2 units from the one before and
  // turned a little (short lines to their parents, as in a real scene)
  const root = (await tcp.call({ cmd: 'transform.create', world: 'crowd', name: 'root' })).entity;
  const turn = [0, Math.sin(Math.PI / 100), 0, Math.cos(Math.PI / 100)];
  let tails = [];
  const heads = [];
  for (let k = 0; k < 100; k++)
    heads.push({ cmd: 'transform.create', parent: root, t: [(k % 10) * 30 - 135, 0, Math.floor(k / 10) * 30 - 135] });
  tails = (await tcp.call({ cmd: 'batch', world: 'crowd', ops: heads }, 30000)).results.map((r) => r.entity);
  for (let link = 1; link < 100; link++) {
    const ops = tails.map((parent) => ({ cmd: 'transform.create', parent, t: [0.8, 0, 0], r: turn }));
    tails = (await tcp.call({ cmd: 'batch', world: 'crowd', ops }, 30000)).results.map((r) => r.entity);
  }
  // the root moves and turns 60 times a second: every world matrix changes
  let step = 0, stop = false;
  mover = (async () => {
    while (!stop) {
      step++;
      const a = step * 0.01;
      await tcp.call({ cmd: 'transform.set_local', world: 'crowd', entity: root, t: [Math.sin(a) * 5, 0, 0], r: [0, Math.sin(a / 2), 0, Math.cos(a / 2)] });
      await sleep(16);
    }
  })().catch((e) => {
    if (!stop) console.error(`bench_view: the mover stopped: ${e.message}\n${d.log}`);
  });
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  const results = [];
  for (const form of ['b64', 'json']) results.push(await measure(browser, d, form));
  stop = true;
  await mover;
  for (const r of results) {
    if (asJson) console.log(JSON.stringify({ test: 'view', ...r }));
    else
      console.log(`view ${r.form.padEnd(4)} ${N.toLocaleString('en')} moving transforms: ${r.drawn_fps.toFixed(1)} frames/s drawn, ` +
        `${r.stream_fps.toFixed(1)} frames/s received (asked ${r.asked_hz}), ${r.read_ms.toFixed(1)} ms to read a frame, ${r.draw_ms.toFixed(1)} ms to draw one`);
  }
  if (!asJson) {
    const [b, j] = results;
    console.log(`view b64/json: ${(b.stream_fps / j.stream_fps).toFixed(2)}x frames received, ${(j.read_ms / b.read_ms).toFixed(2)}x less time reading one`);
  }
} catch (e) {
  console.error(`bench_view: ${e.message}\n${d.log}`);
  process.exitCode = 1;
} finally {
  await browser?.close();
  tcp.close();
  await d.stop();
}

// The staging view pictured the way tools and CI take pictures of pages: `chromium --headless
// --screenshot --virtual-time-budget=5000 URL`, with nothing else driving the browser. Virtual
// time runs on whenever no network fetch is pending, and a WebSocket's messages are not
// fetches: the picture must still show the world list and a drawn 3D view, also when the
// daemon answers slowly (through a proxy that holds every chunk) and with #world=NAME.
// (Imported by browser.test.mjs; the pictures are saved next to SCENED_SCREENSHOT.)
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startDaemon } from './lib.mjs';
import { b64Client, chromiumPath, screenshot } from './browser_lib.mjs';
import { axisPixels, colourBox, decodePng } from './png.mjs';

const CLEAR = [16, 19, 24];        // the 3D view's background (view.js, setClearColor)
const CHOSEN = [58, 50, 32];       // the chosen world's row in the list (style.css)
const DELAY_MS = 150;              // what the slow proxy holds each chunk, each way

// Chromium as a tool runs it (as root it needs --no-sandbox); resolves with its stdout.
function headless(args) {
  return new Promise((resolve, reject) => {
    execFile(chromiumPath, ['--headless', '--no-sandbox', ...args], { timeout: 90000, maxBuffer: 32 << 20 },
      (err, stdout, stderr) => (err ? reject(new Error(`chromium: ${err.message}\n${stderr.slice(-3000)}`)) : resolve(stdout)));
  });
}

// A proxy on 127.0.0.1 to port that delays every chunk, both ways, by delayMs (in order).
async function slowProxy(port, delayMs) {
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const pipe = (from, to) => {
      sockets.add(from);
      from.on('data', (chunk) => setTimeout(() => to.destroyed || to.write(chunk), delayMs));
      from.on('close', () => setTimeout(() => to.destroy(), delayMs));
      from.on('error', () => {});
    };
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe('staging view: a headless screenshot under virtual time', () => {
  let d, tcp, proxy, dir;
  const W = 'orbit';
  before(async () => {
    d = await startDaemon();
    tcp = await b64Client(d.port);
    assert.equal((await tcp.call({ cmd: 'world.create', world: W })).ok, true);
    const ops = [];
    for (let i = 0; i < 40; i++) {
      const a = (i / 40) * Math.PI * 2;
      ops.push({ cmd: 'transform.create', name: `ring_${i}`, t: [Math.cos(a) * 4, 0, Math.sin(a) * 4], r: [0, Math.sin(a / 2), 0, Math.cos(a / 2)] });
    }
    assert.equal((await tcp.call({ cmd: 'batch', world: W, ops })).ok, true);
    proxy = await slowProxy(d.httpPort, DELAY_MS);
    dir = mkdtempSync(path.join(tmpdir(), 'scened-headless-'));
  });
  after(async () => {
    proxy?.close();
    tcp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    assert.equal(await d.stop(), 0);
  });

  // Takes the picture of the page at port + suffix and checks it: the 3D view drawn (its
  // background over a good part of the picture, markers in it) and a world chosen in the list.
  const picture = async (port, suffix, name) => {
    const file = path.join(dir, `${name}.png`);
    await headless([`--screenshot=${file}`, '--virtual-time-budget=5000', `http://127.0.0.1:${port}/${suffix}`]);
    const png = readFileSync(file);
    writeFileSync(screenshot.replace(/\.png$/, `-${name}.png`), png);
    const img = decodePng(png);
    const view = colourBox(img, CLEAR);
    assert.ok(view && view.count > img.width * img.height * 0.05, `the 3D view drawn: ${JSON.stringify(view)}`);
    const axes = axisPixels(img, view);
    assert.ok(axes.red >= 10 && axes.green >= 10, `markers in the 3D view: ${JSON.stringify(axes)}`);
    const chosen = colourBox(img, CHOSEN);
    assert.ok(chosen && chosen.x1 < view.x0, `a world chosen in the list, left of the view: ${JSON.stringify(chosen)}`);
  };

  test('pictured with its world list and the world drawn', async () => {
    await picture(d.httpPort, '', 'headless');
  });

  test('the same through a slow connection, with #world=NAME', async () => {
    await picture(proxy.port, `#world=${W}`, 'headless-slow');
  });

  test('the page as it stands then, through the slow connection: the world listed and chosen, its entities named', async () => {
    const html = await headless(['--dump-dom', '--virtual-time-budget=5000', `http://127.0.0.1:${proxy.port}/`]);
    assert.match(html, new RegExp(`<li[^>]*class="selected"[^>]*data-world="${W}"|<li[^>]*data-world="${W}"[^>]*class="selected"`));
    assert.match(html, /id="world-count"[^>]*>\(1\)</);
    assert.match(html, /id="entity-count"[^>]*>\(40\)</);
    assert.match(html, /id="view-empty" class="overlay-note hidden"/);
    assert.match(html, /<span class="name">ring_0<\/span>/, 'the names read');
    assert.match(html, /id="status"[^>]*data-state="ready"/);
  });
});

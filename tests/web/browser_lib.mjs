// What the browser tests share: headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core from the npm registry), a page of the staging view whose problems are
// recorded, and a TCP client that reads the daemon's truth in b64.
import assert from 'node:assert/strict';
import path from 'node:path';
import { TcpClient, repo, requireModule } from './lib.mjs';
import { matrixOf } from '../../client/js/scened.mjs';

export const chromiumPath = '/usr/bin/chromium';

// The world matrix of entity as the daemon holds it (its float32 values, from a b64 read).
export async function worldOf(tcp, world, entity) {
  const r = await tcp.call({ cmd: 'transform.get', world, entity });
  assert.equal(typeof r.world, 'string', 'the TCP client reads matrices in b64');
  return Array.from(matrixOf(r.world));
}

export async function b64Client(port) {
  const tcp = await TcpClient.connect(port);
  assert.equal((await tcp.call({ cmd: 'hello', matrices: 'b64' })).matrices, 'b64');
  return tcp;
}

const { chromium } = requireModule('playwright-core');
export const screenshot = process.env.SCENED_SCREENSHOT || path.join(repo, 'build/staging-view.png');

export async function launch() {
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

// A page whose console errors, page errors and requests to other hosts are recorded; over
// HTTPS when secure (the test's own CA is not the browser's: its certificate is accepted).
export async function openPage(browser, httpPort, secure = false, hash = '') {
  const page = await browser.newPage({ viewport: { width: 1400, height: 860 }, ignoreHTTPSErrors: secure });
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (!['127.0.0.1', ''].includes(u.hostname) && u.protocol !== 'data:')
      problems.push(`request to another host: ${r.url()}`);
  });
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  await page.goto(`${secure ? 'https' : 'http'}://127.0.0.1:${httpPort}/${hash}`);
  return { page, problems };
}

export const scened = (page, expr, arg) => page.evaluate(expr, arg);

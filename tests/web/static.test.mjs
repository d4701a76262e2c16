// The staging view's files on the HTTP port: content types, 404s, and nothing from outside
// the www directory.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { rawHttp, startDaemon } from './lib.mjs';

const status = (text) => Number(text.split(' ')[1]);

describe('static files: the installed staging view', () => {
  let d, base;
  before(async () => {
    d = await startDaemon();
    base = `http://127.0.0.1:${d.httpPort}`;
  });
  after(async () => { assert.equal(await d.stop(), 0); });

  test('the page, its module, its style and three.js, with their content types', async () => {
    const cases = [
      ['/', 'text/html; charset=utf-8', 'scened'],
      ['/index.html', 'text/html; charset=utf-8', '<script type="module"'],
      ['/app.js', 'text/javascript; charset=utf-8', 'WebSocket'],
      ['/view.js', 'text/javascript; charset=utf-8', 'three'],
      ['/cluster.js', 'text/javascript; charset=utf-8', 'replicaGroups'],
      ['/style.css', 'text/css; charset=utf-8', 'body'],
      ['/vendor/three/build/three.module.js', 'text/javascript; charset=utf-8', 'REVISION'],
      ['/vendor/three/examples/jsm/controls/OrbitControls.js', 'text/javascript; charset=utf-8', 'OrbitControls'],
    ];
    for (const [p, type, text] of cases) {
      const r = await fetch(base + p);
      assert.equal(r.status, 200, p);
      assert.equal(r.headers.get('content-type'), type, p);
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
      assert.ok((await r.text()).includes(text), p);
    }
  });

  test('nothing at the page refers to another host', async () => {
    for (const p of ['/', '/app.js', '/view.js', '/cluster.js', '/style.css']) {
      const body = await (await fetch(base + p)).text();
      assert.doesNotMatch(body, /(src|href)\s*=\s*["']?(https?:)?\/\//i, p);
      assert.doesNotMatch(body, /\bimport\b[^;]*from\s*["']https?:/i, p);
    }
  });

  test('missing files and directories are 404; HEAD has no body; only GET', async () => {
    assert.equal((await fetch(`${base}/nope.js`)).status, 404);
    assert.equal((await fetch(`${base}/vendor/`)).status, 404);
    assert.equal((await fetch(`${base}/vendor`)).status, 404);
    const head = await rawHttp(d.httpPort, `HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.equal(status(head.text), 200);
    assert.match(head.text, /Content-Length: [1-9]/);
    assert.ok(head.text.endsWith('\r\n\r\n'));
    assert.equal((await fetch(`${base}/`, { method: 'POST', body: 'x' })).status, 405);
    assert.equal((await fetch(`${base}/metrics`)).status, 200);
  });

  test('paths that climb out of the directory are 404', async () => {
    for (const p of ['/../../../../etc/passwd', '/%2e%2e/%2e%2e/%2e%2e/etc/passwd', '/vendor/..%2f..%2f..%2f..%2fetc/passwd',
      '/vendor/../../scened', '/./index.html', '/%00', '/..\\..\\etc\\passwd']) {
      const r = await rawHttp(d.httpPort, `GET ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.ok([400, 404].includes(status(r.text)), `${p}: ${r.text.split('\r\n')[0]}`);
      assert.doesNotMatch(r.text, /root:/);
    }
  });
});

describe('static files: --www and symbolic links', () => {
  let d, dir, base;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'scened-www-'));
    mkdirSync(path.join(dir, 'www/sub'), { recursive: true });
    writeFileSync(path.join(dir, 'www/index.html'), '<p>own page</p>');
    writeFileSync(path.join(dir, 'www/sub/data.json'), '{}');
    writeFileSync(path.join(dir, 'secret.txt'), 'secret');
    symlinkSync(path.join(dir, 'secret.txt'), path.join(dir, 'www/escape.txt'));
    symlinkSync(path.join(dir, 'www/sub/data.json'), path.join(dir, 'www/inside.json'));
    d = await startDaemon(['--www', path.join(dir, 'www')]);
    base = `http://127.0.0.1:${d.httpPort}`;
  });
  after(async () => {
    assert.equal(await d.stop(), 0);
    rmSync(dir, { recursive: true, force: true });
  });

  test('serves the directory given', async () => {
    assert.equal(await (await fetch(`${base}/`)).text(), '<p>own page</p>');
    const j = await fetch(`${base}/sub/data.json`);
    assert.equal(j.headers.get('content-type'), 'application/json');
  });

  test('a link that leads outside is 404, one that stays inside is served', async () => {
    const out = await fetch(`${base}/escape.txt`);
    assert.equal(out.status, 404);
    assert.notEqual(await out.text(), 'secret');
    assert.equal((await fetch(`${base}/inside.json`)).status, 200);
  });
});

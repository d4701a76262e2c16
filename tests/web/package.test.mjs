// The JavaScript client as an npm package (client/js/package.json): `npm install ./client/js`
// into a new project needs no registry (a dead one is given, and an empty cache), and then a
// program's `import { connect } from "scened"` just works: the module loads without `ws`, and
// in Node without a global WebSocket takes the project's own `ws` (an optional peer), though
// the package is a link whose target has none. The daemon serves the same module to browsers.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { repo, requireModule, startDaemon } from './lib.mjs';

const wsDir = path.dirname(requireModule.resolve('ws/package.json'));

// npm install ARGS in dir, offline by construction: a registry nothing listens on, no retries,
// a cache of its own.
function npmInstall(dir, ...args) {
  execFileSync('npm', ['install', '--registry=http://127.0.0.1:9/', '--fetch-retries=0',
    `--cache=${path.join(dir, '.npm-cache')}`, '--no-audit', '--no-fund', '--loglevel=error', ...args],
  { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000 });
}

function project(name) {
  const dir = mkdtempSync(path.join(tmpdir(), `scened-npm-${name}-`));
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }));
  return dir;
}

// Runs a program in dir from another working directory; its stdout, or a failure with stderr.
function node(dir, program, ...args) {
  writeFileSync(path.join(dir, 'main.mjs'), program);
  const r = spawnSync(process.execPath, [path.join(dir, 'main.mjs'), ...args], { cwd: tmpdir(), encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, `node main.mjs: exit ${r.status}\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

describe('the JavaScript client as an npm package', () => {
  let d, url, dirs = [];
  before(async () => {
    d = await startDaemon();
    url = `ws://127.0.0.1:${d.httpPort}/ws`;
  });
  after(async () => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    assert.equal(await d.stop(), 0);
  });

  test('package.json: ESM, its types, ws an optional peer', () => {
    const pkg = JSON.parse(readFileSync(path.join(repo, 'client/js/package.json'), 'utf8'));
    assert.equal(pkg.name, 'scened');
    assert.equal(pkg.type, 'module');
    assert.equal(pkg.exports['.'].default, './scened.mjs');
    assert.equal(pkg.exports['.'].types, './scened.d.ts');
    assert.deepEqual(pkg.peerDependenciesMeta, { ws: { optional: true } });
    assert.equal(pkg.dependencies, undefined);
    for (const f of pkg.files) readFileSync(path.join(repo, 'client/js', f));
  });

  test('npm install ./client/js and ws, then import { connect } from "scened"', () => {
    const dir = project('app');
    dirs.push(dir);
    npmInstall(dir, path.join(repo, 'client/js'));
    npmInstall(dir, wsDir); // as `npm install ws` would, from the tests' own copy
    const out = node(dir, `
      import { connect, Mirror } from 'scened';
      const c = await connect(process.argv[2]);
      await c.call('world.create', { world: 'npm-app' });
      const { entity } = await c.call('transform.create', { world: 'npm-app', t: [1, 2, 3] });
      const sub = await c.subscribe('npm-app', {});
      for (let i = 0; i < 500 && !sub.mirror.matrix(entity); i++) await new Promise((r) => setTimeout(r, 10));
      console.log(JSON.stringify({ mirror: sub.mirror instanceof Mirror, t: Array.from(sub.mirror.matrix(entity).slice(12, 15)) }));
      await c.call('world.destroy', { world: 'npm-app' });
      c.close();
    `, url);
    assert.deepEqual(JSON.parse(out), { mirror: true, t: [1, 2, 3] });
  });

  test('without ws the module still loads; connecting says what is missing', () => {
    const dir = project('bare');
    dirs.push(dir);
    npmInstall(dir, path.join(repo, 'client/js'));
    const out = node(dir, `
      const m = await import('scened');
      const how = typeof globalThis.WebSocket === 'function' ? 'global' : 'none';
      let error = null;
      if (how === 'none') {
        try { await m.connect(process.argv[2]); } catch (e) { error = e.message; }
      }
      console.log(JSON.stringify({ connect: typeof m.connect, how, error }));
    `, url);
    const r = JSON.parse(out);
    assert.equal(r.connect, 'function');
    if (r.how === 'none') assert.match(r.error, /install the ws package/);
  });

  test('the daemon serves the same module to browsers at /scened.mjs', async () => {
    const r = await fetch(`http://127.0.0.1:${d.httpPort}/scened.mjs`);
    assert.equal(r.status, 200);
    assert.equal(await r.text(), readFileSync(path.join(repo, 'client/js/scened.mjs'), 'utf8'));
  });
});

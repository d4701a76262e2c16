// The staging view's cluster panel with replicas: three daemons, each on a data directory of its
// own with --replicas 1, and the page of the daemon that neither owns nor follows a group. The
// panel shows the group's owner and its follower in the in-sync set with no lag (figures the
// page reads from the owner's info, over a client of its own); with the follower stopped
// (SIGSTOP) and writes on the owner it shows the follower out of the in-sync set, marked, with
// the changes it lags by; continued (SIGCONT), in sync again. Pictures beside SCENED_SCREENSHOT.
// (Imported by browser.test.mjs.)
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TcpClient, requireModule, startDaemon, until } from './lib.mjs';
import { launch, openPage, scened, screenshot } from './browser_lib.mjs';

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

describe('staging view: a cluster with replicas', () => {
  const NAMES = ['alpha', 'beta', 'gamma'];
  let etcd, dir, browser;
  const d = {}, tcp = {};
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scened-web-replicas-'));
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
    // each its own directory; any page may open any daemon's /ws. A lease of 10 s: the follower
    // stopped for a few seconds keeps its fence up (one whose fence fell while it was stopped
    // withholds its acknowledgements until another record comes, which is not what this shows).
    for (const n of NAMES) {
      d[n] = await startDaemon(['--cluster', url, '--data', path.join(dir, n), '--node', n, '--lease-ttl', '10',
        '--replicas', '1', '--replica-timeout', '300', '--ws-origins', '*']);
      tcp[n] = await TcpClient.connect(d[n].port);
    }
    await until(async () => (await tcp.beta.call({ cmd: 'cluster.nodes' })).nodes?.length === 3,
      'three nodes registered', 15000, 50);
    browser = await launch();
  });
  after(async () => {
    if (browser) await browser.close();
    for (const n of NAMES) {
      tcp[n]?.close();
      if (d[n]) {
        d[n].proc.kill('SIGCONT');
        assert.equal(await d[n].stop(), 0);
      }
    }
    if (etcd) {
      etcd.kill('SIGTERM');
      await new Promise((r) => etcd.once('exit', r));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test("each group's owner and follower, in sync or not, and the follower's lag", async () => {
    const ok = async (req) => {
      const r = await tcp.beta.call(req, 15000);
      assert.equal(r.ok, true, JSON.stringify(r));
      return r;
    };
    assert.equal((await ok({ cmd: 'world.create', world: 'arena.main' })).node, 'beta');
    const car = (await ok({ cmd: 'transform.create', world: 'arena.main', name: 'car' })).entity;
    // the follower beta chose, once in the in-sync set
    let follower = '';
    await until(async () => {
      const w = (await tcp.beta.call({ cmd: 'world.list', cluster: true })).worlds.find((x) => x.name === 'arena.main');
      follower = w.followers.length === 1 && w.insync[0] === w.followers[0] ? w.followers[0] : '';
      return follower !== '';
    }, 'a follower in sync', 15000, 50);
    const third = NAMES.find((n) => n !== 'beta' && n !== follower);
    const { page, problems } = await openPage(browser, d[third].httpPort);
    const row = `#groups li[data-group="arena"] .follower[data-node="${follower}"]`;
    // Waits until the page shows the follower as in sync (or not) lagging by lo to hi changes.
    const shows = async (insync, lo, hi, what) => {
      await page.waitForFunction(([f, insync, lo, hi]) => {
        const g = ((window.scened && window.scened.replicas) || []).find((x) => x.group === 'arena');
        const fo = g && g.followers.find((x) => x.node === f);
        return g && g.owner === 'beta' && fo && fo.insync === insync && fo.lag &&
          fo.lag.changes >= lo && fo.lag.changes <= hi;
      }, [follower, insync, lo, hi], { timeout: 20000 }).catch(async (e) => {
        // what the page showed, and what the owner said
        const shown = JSON.stringify(await scened(page, () => window.scened && window.scened.replicas));
        const listed = JSON.stringify((await tcp.beta.call({ cmd: 'world.list', cluster: true })).worlds);
        throw new Error(`${what}: ${e.message}\n  the page: ${shown}\n  beta: ${listed}`);
      });
    };
    try {
      // in sync, lag 0, as beta (not the page's daemon) reports it
      await page.waitForFunction(() => window.scened && window.scened.node !== '' && window.scened.nodes.length === 3, null, { timeout: 15000 });
      await shows(true, 0, 0, 'the follower in sync');
      assert.deepEqual(await scened(page, () => window.scened.peers), ['beta']);
      assert.equal(await page.isVisible('#replicas'), true);
      assert.match(await page.textContent('#groups li[data-group="arena"] .group'), /arena\s*owner beta/);
      assert.match(await page.textContent('#groups li[data-group="arena"] .summary'), /^1\/1 in sync$/);
      assert.match(await page.getAttribute(row, 'class'), /\binsync\b/);
      assert.match(await page.textContent(row), new RegExp(`${follower}\\s*✓ in sync\\s*0 changes`));
      await page.screenshot({ path: screenshot.replace(/\.png$/, '-replicas.png') });

      // stopped: the writes leave it behind, out of the in-sync set, marked
      d[follower].proc.kill('SIGSTOP');
      for (let i = 1; i <= 5; i++) await ok({ cmd: 'transform.set_local', world: 'arena.main', entity: car, t: [i, 0, 0] });
      await shows(false, 1, 1e9, 'the follower out of sync');
      await until(async () => /\bbehind\b/.test(await page.getAttribute(row, 'class')), 'the row marked', 5000);
      assert.match(await page.textContent(row), new RegExp(`${follower}\\s*✗ not in sync\\s*[1-9]\\d* changes?`));
      assert.match(await page.getAttribute('#groups li[data-group="arena"]', 'class'), /\balone\b/);
      assert.match(await page.textContent('#groups li[data-group="arena"] .summary'), /^no follower in sync$/);
      await page.screenshot({ path: screenshot.replace(/\.png$/, '-replicas-behind.png') });

      // continued: it catches up and is in sync again
      d[follower].proc.kill('SIGCONT');
      await shows(true, 0, 0, 'the follower in sync again');
      await until(async () => /\binsync\b/.test(await page.getAttribute(row, 'class')), 'the row in sync', 5000);
      assert.deepEqual(problems, []);
    } finally {
      d[follower].proc.kill('SIGCONT');
      await page.close();
    }
  });
});

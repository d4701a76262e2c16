// The JavaScript client module with follower reads: three daemons on a real etcd, each with its
// own data directory and --replicas 1. connect(url, { followerReads: true }) to the daemon that
// follows a world's group reads it there (the module does not follow MOVED: an answer at all
// means the follower gave it), a write still rejects with MOVED naming the owner, and a
// subscription made there receives the owner's changes. Without followerReads, MOVED.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { requireModule, startDaemon, until } from './lib.mjs';
import { ScenedError, connect } from '../../client/js/scened.mjs';

const WebSocket = requireModule('ws');

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => {
    const p = s.address().port;
    s.close(() => resolve(p));
  });
});

describe('JavaScript client: follower reads', () => {
  let etcd, dir;
  const daemons = [];
  const url = (d) => `ws://127.0.0.1:${d.httpPort}/ws`;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scened-web-replicas-'));
    const [cp, pp] = [await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${cp}`;
    etcd = spawn('etcd', ['--name', 'r', '--data-dir', path.join(dir, 'etcd'),
      '--listen-client-urls', etcdUrl, '--advertise-client-urls', etcdUrl,
      '--listen-peer-urls', `http://127.0.0.1:${pp}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${pp}`,
      '--initial-cluster', `r=http://127.0.0.1:${pp}`, '--heartbeat-interval', '10', '--election-timeout', '100'],
    { stdio: 'ignore' });
    await until(async () => {
      try {
        return (await fetch(`${etcdUrl}/health`)).ok;
      } catch {
        return false;
      }
    }, 'etcd', 15000, 50);
    for (const node of ['n0', 'n1', 'n2']) {
      fs.mkdirSync(path.join(dir, node));
      daemons.push(await startDaemon(['--cluster', etcdUrl, '--data', path.join(dir, node), '--node', node,
        '--lease-ttl', '2', '--fsync', 'no', '--replicas', '1']));
    }
    for (const d of daemons) {
      const c = await connect(url(d), { WebSocket });
      await until(async () => (await c.call('cluster.nodes')).nodes.length === 3, 'every node registered', 15000, 50);
      c.close();
    }
  });
  after(async () => {
    for (const d of daemons.reverse()) assert.equal(await d.stop(), 0);
    if (etcd) {
      etcd.kill('SIGTERM');
      await new Promise((r) => etcd.once('exit', r));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('reads and a subscription on the follower, writes MOVED to the owner', async () => {
    const owner = await connect(url(daemons[0]), { WebSocket, matrices: 'json' });
    assert.equal((await owner.call('world.create', { world: 'js.main', node: 'n0' })).node, 'n0');
    const { entity } = await owner.call('transform.create', { world: 'js.main', t: [1, 2, 3] });
    let follower = null;
    await until(async () => {
      const w = (await owner.call('world.list', { cluster: true })).worlds.find((x) => x.name === 'js.main');
      follower = w && w.followers && w.followers.length === 1 ? w.followers[0] : null;
      return follower !== null;
    }, 'the follower recorded', 15000, 50);
    const fd = daemons[Number(follower.slice(1))];

    // Without followerReads the follower answers MOVED (this module does not follow it).
    const plain = await connect(url(fd), { WebSocket });
    await assert.rejects(plain.get('js.main', entity), (e) => e instanceof ScenedError && e.code === 'MOVED');
    plain.close();

    const c = await connect(url(fd), { WebSocket, followerReads: true });
    assert.equal((await c.call('hello')).follower_reads, true);
    // Until the follower follows the group and has applied both records.
    let got = null;
    await until(async () => {
      try {
        got = await c.get('js.main', entity);
        return true;
      } catch (e) {
        if (e.code === 'MOVED' || e.code === 'NOT_FOUND') return false;
        throw e;
      }
    }, 'the follower to answer from its copy', 15000, 50);
    assert.deepEqual(Array.from(got.world.slice(12, 15)), [1, 2, 3]);
    assert.deepEqual((await c.call('transform.children', { world: 'js.main', entity })).children, []);

    const sub = await c.subscribe('js.main');
    await until(() => { const m = sub.mirror.matrix(entity); return m && m[12] === 1; }, 'the full frame', 15000);
    await owner.call('transform.set_local', { world: 'js.main', entity, t: [9, 0, 0] });
    await until(() => { const m = sub.mirror.matrix(entity); return m && m[12] === 9; }, 'the owner\'s change', 15000);

    await assert.rejects(c.call('transform.set_local', { world: 'js.main', entity, t: [0, 0, 0] }),
      (e) => e.code === 'MOVED' && e.response.error.node === 'n0');
    await assert.rejects(c.hello({ followerReads: 'yes' }), (e) => e.code === 'BAD_REQUEST');
    const off = await c.hello({ followerReads: false });
    assert.equal(off.follower_reads, undefined);
    await assert.rejects(c.get('js.main', entity), (e) => e.code === 'MOVED');
    c.close();
    await owner.call('world.destroy', { world: 'js.main' });
    owner.close();
  });
});

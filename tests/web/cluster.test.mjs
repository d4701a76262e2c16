// The staging view's cluster panel, its model (web/cluster.js) without a browser: groups from
// world.list with "cluster": true, each follower's lag from its owner's info figures (changes,
// and seconds when the daemon gives them), what the panel says of each, and nothing shown for a
// cluster without replicas.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { describeFollower, describeGroup, fmtLagSeconds, groupName, lagsOf, replicaGroups } from '../../web/cluster.js';

describe('cluster panel: the model', () => {
  test("a world's group is its name up to the first dot", () => {
    assert.equal(groupName('match7.main'), 'match7');
    assert.equal(groupName('match7.ui.left'), 'match7');
    assert.equal(groupName('lobby'), 'lobby');
  });

  test('lags from info figures: two-label keys, changes and seconds', () => {
    const lags = lagsOf({
      worlds: 3,
      replica_lag_changes: { 'm1/node1': 0, 'm2/node2': 5, bad: 3 },
      replica_lag_seconds: { 'm2/node2': 1.25, 'm3/node0': 0.004 },
      group_role: { 'm1/owner': 1 },
    });
    assert.deepEqual([...lags.entries()].sort(), [
      ['m1/node1', { changes: 0 }],
      ['m2/node2', { changes: 5, seconds: 1.25 }],
      ['m3/node0', { seconds: 0.004 }],
    ]);
    assert.equal(lagsOf(undefined).size, 0);
    assert.equal(lagsOf({ replica_lag_changes: 7 }).size, 0); // not a family: nothing
  });

  test('no world with followers (no replicas): nothing to show', () => {
    assert.equal(replicaGroups([]), null);
    assert.equal(replicaGroups([{ name: 'a.main', node: 'n0', transforms: 1, history: 0 }]), null);
  });

  test('groups with owner, followers, in-sync set and lags; sorted by group', () => {
    const worlds = [
      { name: 'm2.main', node: 'n1', followers: ['n2', 'n0'], insync: ['n0'] },
      { name: 'm1.main', node: 'n0', followers: ['n1'], insync: ['n1'] },
      { name: 'm1.ui', node: 'n0', followers: ['n1'], insync: ['n1'] },
      { name: 'm3', node: 'n2', followers: [], insync: [] },
    ];
    const lagsByOwner = new Map([
      ['n0', lagsOf({ replica_lag_changes: { 'm1/n1': 0 } })],
      ['n1', lagsOf({ replica_lag_changes: { 'm2/n2': 12, 'm2/n0': 0 }, replica_lag_seconds: { 'm2/n2': 2.5, 'm2/n0': 0 } })],
    ]);
    const groups = replicaGroups(worlds, lagsByOwner);
    assert.deepEqual(groups, [
      { group: 'm1', owner: 'n0', worlds: 2, insync: ['n1'], alone: false,
        followers: [{ node: 'n1', insync: true, lag: { changes: 0 } }] },
      { group: 'm2', owner: 'n1', worlds: 1, insync: ['n0'], alone: false,
        followers: [{ node: 'n2', insync: false, lag: { changes: 12, seconds: 2.5 } },
          { node: 'n0', insync: true, lag: { changes: 0, seconds: 0 } }] },
      // n2's figures are not known: no lags, but no follower either
      { group: 'm3', owner: 'n2', worlds: 1, insync: [], alone: false, followers: [] },
    ]);
    assert.deepEqual(groups.map(describeGroup), ['1/1 in sync', '1/2 in sync', 'no followers']);
  });

  test('an owner whose figures are unknown, a follower without a link, an empty in-sync set', () => {
    const worlds = [
      { name: 'a.main', node: 'n0', followers: ['n1'], insync: [] },
      { name: 'b.main', node: 'n1', followers: ['n2'], insync: ['n2'] },
    ];
    const [a, b] = replicaGroups(worlds, new Map([['n0', new Map()]]));
    assert.deepEqual(a.followers, [{ node: 'n1', insync: false, lag: null }]);
    assert.equal(a.alone, true);
    assert.equal(describeGroup(a), 'no follower in sync');
    assert.deepEqual(b.followers, [{ node: 'n2', insync: true, lag: undefined }]);
    assert.deepEqual(describeFollower(a.followers[0]), { state: 'behind', word: 'not in sync', lag: 'no link' });
    assert.deepEqual(describeFollower(b.followers[0]), { state: 'insync', word: 'in sync', lag: 'lag unknown' });
  });

  test('an in-sync member the followers do not name is shown too, once', () => {
    const [g] = replicaGroups([
      { name: 'a.x', node: 'n0', followers: ['n1'], insync: ['n1', 'n2'] },
      { name: 'a.y', node: 'n0', followers: ['n1'], insync: ['n2'] },
    ]);
    assert.deepEqual(g.followers.map((f) => [f.node, f.insync]), [['n1', true], ['n2', true]]);
  });

  test("what a follower's line says", () => {
    const says = (insync, lag) => describeFollower({ node: 'n', insync, lag });
    assert.deepEqual(says(true, { changes: 0, seconds: 0.0123 }), { state: 'insync', word: 'in sync', lag: '0 changes · 12 ms' });
    assert.deepEqual(says(false, { changes: 1 }), { state: 'behind', word: 'not in sync', lag: '1 change' });
    assert.equal(says(false, { changes: 40, seconds: 3.25 }).lag, '40 changes · 3.3 s');
    assert.equal(says(true, { seconds: 250 }).lag, '250 s');
    assert.equal(says(true, {}).lag, 'no link');
    assert.equal(fmtLagSeconds(0), '0 ms');
    assert.equal(fmtLagSeconds(0.9994), '999 ms');
    assert.equal(fmtLagSeconds(99.94), '99.9 s');
  });
});

// The replicas of a cluster's groups, for the staging view's cluster panel: each group's owner,
// its followers, which of them are in the in-sync set, and how far each lags behind its owner.
// Pure functions over the daemon's answers (no DOM), so that Node tests can run them:
// - world.list with "cluster": true gives every world its owner ("node") and, with --replicas
//   >= 1, its group's "followers" and "insync" (PROTOCOL.md 12.3);
// - the owner's info gives its figures in "metrics": replica_lag_changes (records sent to a
//   follower and not yet acknowledged) and, when the daemon has it, replica_lag_seconds, keyed
//   "GROUP/NODE" (a family with two labels), for each follower with a link open to the owner.

// A world's group: its name up to the first '.'.
export function groupName(world) {
  const dot = world.indexOf('.');
  return dot < 0 ? world : world.slice(0, dot);
}

// The lags an owner reports in its info's metrics: a Map from "GROUP/NODE" to
// { changes, seconds } (either may be undefined when the daemon does not give that figure).
export function lagsOf(metrics) {
  const lags = new Map();
  if (!metrics) return lags;
  const add = (family, field) => {
    const samples = metrics[family];
    if (!samples || typeof samples !== 'object') return;
    for (const [key, value] of Object.entries(samples)) {
      if (typeof value !== 'number' || !key.includes('/')) continue;
      const lag = lags.get(key) || {};
      lag[field] = value;
      lags.set(key, lag);
    }
  };
  add('replica_lag_changes', 'changes');
  add('replica_lag_seconds', 'seconds');
  return lags;
}

// The groups with their replicas, by group name, from world.list's worlds; lagsByOwner: a Map
// from an owner's node to lagsOf(its metrics), absent while its figures are not known. Each:
// { group, owner, worlds, followers: [{ node, insync, lag }], insync, alone }, where lag is
// { changes, seconds } from the owner, null when the owner reports none for that follower
// (no link to it) and undefined while the owner's figures are not known; alone: followers
// without one in sync (the owner answers writes alone). null when no world carries followers
// (a cluster without replicas: there is nothing to show).
export function replicaGroups(worlds, lagsByOwner = new Map()) {
  if (!worlds.some((w) => Array.isArray(w.followers))) return null;
  const groups = new Map();
  for (const w of worlds) {
    const name = groupName(w.name);
    let g = groups.get(name);
    if (!g) {
      g = { group: name, owner: w.node || '', worlds: 0, followerNodes: [], insync: [] };
      groups.set(name, g);
    }
    g.worlds++;
    for (const n of w.followers || []) if (!g.followerNodes.includes(n)) g.followerNodes.push(n);
    for (const n of w.insync || []) if (!g.insync.includes(n)) g.insync.push(n);
  }
  const out = [];
  for (const g of groups.values()) {
    const lags = lagsByOwner.get(g.owner);
    // an in-sync member the followers do not name is shown too (the two lists come together)
    const nodes = g.followerNodes.concat(g.insync.filter((n) => !g.followerNodes.includes(n)));
    const followers = nodes.map((node) => ({
      node,
      insync: g.insync.includes(node),
      lag: lags === undefined ? undefined : lags.get(`${g.group}/${node}`) || null,
    }));
    out.push({
      group: g.group, owner: g.owner, worlds: g.worlds, followers, insync: g.insync.slice(),
      alone: followers.length > 0 && g.insync.length === 0,
    });
  }
  return out.sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
}

// Seconds of lag as the panel shows them.
export function fmtLagSeconds(s) {
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  return s < 100 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
}

// What the panel says of one follower: its state ('insync' or 'behind'), the word for it, and
// its lag ("0 changes · 12 ms"; "no link" when the owner has none to it; "lag unknown" while
// the owner's figures are not known).
export function describeFollower(f) {
  const state = f.insync ? 'insync' : 'behind';
  const word = f.insync ? 'in sync' : 'not in sync';
  let lag;
  if (f.lag === undefined) {
    lag = 'lag unknown';
  } else if (f.lag === null) {
    lag = 'no link';
  } else {
    const parts = [];
    if (f.lag.changes !== undefined) parts.push(`${f.lag.changes} change${f.lag.changes === 1 ? '' : 's'}`);
    if (f.lag.seconds !== undefined) parts.push(fmtLagSeconds(f.lag.seconds));
    lag = parts.length ? parts.join(' · ') : 'no link';
  }
  return { state, word, lag };
}

// What the panel says of a group beside its owner: "1/1 in sync", "no follower in sync" or
// "no followers".
export function describeGroup(g) {
  if (!g.followers.length) return 'no followers';
  if (g.alone) return 'no follower in sync';
  return `${g.followers.filter((f) => f.insync).length}/${g.followers.length} in sync`;
}

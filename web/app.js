// scened's staging view, on scened's JavaScript client module (scened.mjs). One WebSocket to
// the daemon (GET /ws on the page's own host; wss:// when the page came over HTTPS): hello with
// matrices in b64 (with a token when the daemon asks for one; its answer says what the token may
// do, shown as "access"), a subscription to the chosen world whose mirror (one Float32Array
// of the daemon's float32 world matrices, kept from the b64 frames) the 3D view draws,
// transform.get for names, parents and the selected entity's local matrix, and once a second
// info and world.list for the figures in the header and the world list. Nothing is fetched
// from anywhere else.
// In a cluster (info names a node) it also shows the nodes with their load and which node owns
// each world, and opens a world on its owner's /ws (a second client, with this page's token and
// the same matrices form; the owner allows this page's origin with --ws-origins); the figures
// and lists stay on the page's own daemon. A world moved to another node (or taken over after
// its owner went) is opened again on the new owner.
// With --replicas the cluster panel also lists each group with its owner, its followers, which
// of them are in the in-sync set (one that is not is marked) and each follower's lag, which its
// owner reports in its info's figures: the page asks each other owner for info once a second,
// over a client of that node's /ws (cluster.js turns the answers into what is shown).
// A world with history gets a timeline under the 3D view: dragging it shows the world as it
// stood at that tick (transform.get with tick for each entity shown, pipelined; the markers,
// the list and the selected entity's matrices are of then) while the subscription's mirror
// keeps up with the stream in the background, so that "live" is back at once.
// The selected entity can be followed: a second subscription, by distance ("near": the entity,
// a radius and a margin), whose scope the view draws over the whole world with the region's
// circle, and whose count it shows; a new radius, margin or entity is a subscribe.update of it.
// With #packed=STEP in the address both subscriptions take packed frames (binary messages of
// quantized transforms: translations to STEP, rotations within half a degree), which scened.mjs
// decodes into the same mirrors; the header's "frames" says which form the page reads.
// The selected entity's local and world matrices are shown as one transform.get answered
// them, with its tick (at the last frame's tick in a world with history), so that they agree;
// the markers are drawn from the frames.
// The camera tracks the transforms by default (every one, or the selected one) as they move.
// Until its first picture is drawn the page holds a headless browser's virtual time
// (loadhold.js), so that `chromium --headless --screenshot --virtual-time-budget=MS` shows it.
import { Client, Mirror, matrixOf } from './scened.mjs';
import { View } from './view.js';
import { LoadHold } from './loadhold.js';
import { describeFollower, describeGroup, lagsOf, replicaGroups } from './cluster.js';

const $ = (id) => document.getElementById(id);
const ROW = 22;          // px, the entity list's row height (see style.css)
const STREAM_HZ = 30;    // frames per second asked of the subscription, at most
const STREAM_SHARE = 0.35; // of the page's time, at most, for reading frames (the rest draws)
const GETS_IN_FLIGHT = 64;
const RECHECK_MAX = 32;  // entries of a frame whose entities' parents are read again
const RECHECK_MS = 2000;
const REOPEN_MS = 15000; // how long a moved world (or one whose owner went) is looked for
const PAST_LIMIT = 2000; // entities read at a past tick, at most (the first by id)
const PAST_IN_FLIGHT = 512; // their reads waiting at a time (a browser's WebSocket costs per message)
const GONE_KEPT = 2000;  // entities destroyed while the page watched, read at past ticks too
const DETAIL_MS = 100;   // the selected entity's matrices are read again at most this often
const NAMES_WAIT = 50;   // requests the load hold waits on for the names after the first picture
// How frames come: b64 (the default), or json when the address says #matrices=json (for
// comparing the two), or packed on a grid of that step when it says #packed=STEP (PACKED:
// the step, null without one; an address whose step is not a positive number says so).
const MATRICES = /(^#|&)matrices=json(&|$)/.test(location.hash) ? 'json' : 'b64';
const PACKED_ASKED = (location.hash.match(/(?:^#|&)packed=([^&]*)/) || [])[1];
const PACKED = packedStep(PACKED_ASKED);
// What the page shows of it in the header, and the address's part that keeps it.
const FORM = PACKED ? `packed ${PACKED}` : MATRICES;
const FORM_TITLE = PACKED
  ? `packed frames: translations on a grid of ${PACKED} world units, rotations within 0.5 degrees (#packed=STEP)`
  : PACKED_ASKED !== undefined
    ? `#packed=${PACKED_ASKED} is not a positive step: ${MATRICES} frames, exact float32`
    : `${MATRICES} frames: the daemon's float32 values, exact (#packed=STEP for packed ones)`;

const HASH_FORM = `${MATRICES === 'json' ? '&matrices=json' : ''}${PACKED ? `&packed=${PACKED}` : ''}`;
// The fields a subscription adds for the form: packed, or none.
const formFields = () => (PACKED ? { packed: { step: PACKED } } : {});

// The step of #packed=STEP: a positive finite number, else null.
function packedStep(text) {
  if (text === undefined) return null;
  const step = Number(text);
  return step > 0 && Number.isFinite(step) ? step : null;
}

// ---- the connection ----------------------------------------------------------------------

// The client of the moment (a new one after each reconnection); calls fail with CLOSED while
// there is none.
const conn = {
  client: null,
  sent: 0,
  call(cmd, fields) {
    if (!this.client) return Promise.reject(closedError());
    this.sent++;
    return this.client.call(cmd, fields);
  },
  async open(url) {
    try {
      this.client = await Client.open(url);
    } catch {
      onClose();
      return;
    }
    this.client.onclose = () => {
      this.client = null;
      onClose();
    };
    onOpen();
  },
};

const closedError = () => Object.assign(new Error('not connected'), { code: 'CLOSED' });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The connection the chosen world is read over: the page's own, or in a cluster one to the
// world's owner (its HTTP address, from cluster.nodes).
const wconn = {
  client: null,   // a client of another node, or null: the page's own
  http: '',       // that node's HTTP address
  get current() { return this.client || conn.client; },
  // The client for one request (counted when it is the page's own: the command rate shown
  // leaves out the page's requests), or null.
  take() {
    const c = this.current;
    if (c && c === conn.client) conn.sent++;
    return c;
  },
  call(cmd, fields) {
    const c = this.take();
    return c ? c.call(cmd, fields) : Promise.reject(closedError());
  },
  // transform.get (scened.mjs decodes the matrices), at a past tick when given.
  get(world, entity, opts) {
    const c = this.take();
    return c ? c.get(world, entity, opts) : Promise.reject(closedError());
  },
  // Back to the page's own connection (the other one is closed).
  drop() {
    const c = this.client;
    this.client = null;
    this.http = '';
    if (c) c.close();
  },
};

// A client of another node's /ws (HOST:PORT of its HTTP port), said hello to with this page's
// token and matrices form.
async function openNode(http) {
  const c = await Client.open(`${proto}//${http}/ws`);
  try {
    await c.hello({ token: sessionStorage.getItem('scened.token'), matrices: MATRICES });
  } catch (e) {
    c.close();
    throw e;
  }
  return c;
}

// The same, for reading the chosen world on its owner.
async function connectTo(http) {
  const c = await openNode(http);
  c.onclose = () => {
    if (wconn.client !== c) return;
    wconn.client = null;
    wconn.http = '';
    // its node went (or restarted): the world is looked for again
    if (state.world) reopen(state.world, '', `The connection to ${state.owner || http} closed`);
  };
  return c;
}

// ---- state -------------------------------------------------------------------------------

const state = {
  status: 'connecting',
  version: '',
  access: null,         // { rights, prefixes } from hello
  worlds: [],
  world: null,          // the chosen world's name
  sub: 0,               // its subscription (scened.mjs), 0 when there is none
  hz: STREAM_HZ,        // the rate asked of it
  frameMs: 0,           // average time to read and apply one frame
  entities: new Map(),  // id -> { id, name, parent, local, fetched }
  selected: 0,
  framesReceived: 0,
  lastTick: 0,
  autoSelected: false,
  node: '',             // this daemon's node in a cluster ('' standalone)
  nodes: [],            // cluster.nodes
  replicas: null,       // with --replicas: each group's owner, followers and lags (cluster.js)
  owner: '',            // the node the chosen world is opened on ('' standalone)
  opening: 0,           // counts the openings of a world; an older one gives up
  reselect: 0,          // the entity to select again once a reopened world's first frame came
  tickHz: 0,            // the daemon's tick rate (info)
  gone: new Set(),      // entities of the chosen world destroyed while the page watched
  firstPicture: false,  // a world's first frame has been drawn
};

// The chosen world's timeline (when it keeps history).
const timeline = {
  history: 0,    // its window in ticks (world.list), 0: none, no timeline
  now: 0,        // the last tick known to have run (frames, and transform.get answers)
  min: 0,        // the range shown: [max(1, now - history + 1), now], frozen while looking back
  max: 0,
  live: true,
  wanted: 0,     // the tick last asked for by the range
  busy: false,   // reading a tick's entities (only the latest tick asked is read)
  reads: 0,      // ticks whose reading began
  readMs: 0,     // how long the last tick shown took to read
  past: null,    // what is shown while not live: { tick, entities, mirror, parents, ... }
  note: '',
};

const loadHold = new LoadHold();
loadHold.start();

const view = new View($('canvas-host'), { onPick: (id) => selectEntity(id), onTrack: (mode) => showTrack(mode) });
if (!view.ok) {
  $('view-empty').textContent = '3D view unavailable: this browser has no WebGL.';
  console.warn('scened: WebGL is not available', view.error);
}

const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
const url = `${proto}//${location.host}/ws`;

// ---- status, authentication, reconnecting ------------------------------------------------

function setStatus(s, text) {
  state.status = s;
  const el = $('status');
  el.textContent = text || s;
  el.className = `status ${s}`;
  el.dataset.state = s;
}

let pollTimer = null, reconnectDelay = 500;

async function onOpen() {
  setStatus('connected');
  reconnectDelay = 500;
  const token = sessionStorage.getItem('scened.token');
  try {
    const r = await conn.client.hello({ token, matrices: MATRICES });
    onAuthenticated(r);
  } catch (e) {
    if (e.code === 'UNAUTHORIZED') askToken(token ? 'The saved token was refused.' : '');
    else loadHold.release();
  }
}

function askToken(message) {
  loadHold.release(); // the picture is the question
  setStatus('auth', 'token needed');
  $('auth-error').textContent = message;
  $('auth').classList.remove('hidden');
  $('auth-token').focus();
}

$('auth-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const token = $('auth-token').value;
  try {
    if (!conn.client) throw new Error('not connected');
    const r = await conn.client.hello({ token, matrices: MATRICES });
    sessionStorage.setItem('scened.token', token);
    $('auth').classList.add('hidden');
    $('auth-token').value = '';
    onAuthenticated(r);
  } catch (e) {
    $('auth-error').textContent = e.code === 'UNAUTHORIZED' ? 'Wrong token.' : e.message;
  }
});

// What the connection may do, from hello: its rights and the world-name prefixes they cover.
function describeAccess(hello) {
  const rights = hello.rights || [];
  const prefixes = hello.prefixes || [];
  const where = prefixes.includes('*') ? 'every world' : prefixes.map((p) => `${p}*`).join(', ');
  return rights.length ? `${rights.join(', ')} on ${where}` : 'nothing';
}

function onAuthenticated(hello) {
  state.version = hello.version;
  state.access = { rights: hello.rights || [], prefixes: hello.prefixes || [] };
  $('f-version').textContent = hello.version;
  $('f-access').textContent = describeAccess(hello);
  $('f-form').textContent = FORM;
  $('f-form').title = FORM_TITLE;
  if (!state.access.rights.includes('read')) {
    sessionStorage.removeItem('scened.token');
    askToken('This token may not read: the view needs one with the read right.');
    return;
  }
  setStatus('ready', 'live');
  poll();
  clearInterval(pollTimer);
  pollTimer = setInterval(poll, 1000);
  if (state.world) {
    const w = state.world;
    state.world = null;
    selectWorld(w);
  }
}

function onClose() {
  loadHold.release(); // reconnecting waits on a timer
  clearInterval(pollTimer);
  pollTimer = null;
  state.sub = 0;
  stopFollow();
  state.opening++;
  wconn.drop();
  dropPeers(() => true);
  inflight = 0;
  setStatus('closed', 'disconnected: retrying');
  setTimeout(() => conn.open(url), reconnectDelay);
  reconnectDelay = Math.min(reconnectDelay * 2, 5000);
}

// ---- figures and worlds (once a second) ----------------------------------------------------

let prevFigures = null;

function fmtMs(s) {
  const ms = s * 1000;
  return ms >= 10 ? `${ms.toFixed(1)} ms` : ms >= 0.1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(1)} µs`;
}

async function poll() {
  let info, list, nodes;
  try {
    // In a cluster: every world with its owner, and the nodes (a refusal leaves them out).
    const cluster = state.node ? { cluster: true } : {};
    [info, list, nodes] = await Promise.all([
      conn.call('info'), conn.call('world.list', cluster),
      state.node ? conn.call('cluster.nodes').catch(() => null) : null]);
  } catch (e) {
    // The access list changed under the page (SIGHUP): its token no longer reads.
    if (e.code === 'UNAUTHORIZED' && state.status !== 'auth') {
      clearInterval(pollTimer);
      pollTimer = null;
      sessionStorage.removeItem('scened.token');
      askToken('The token is no longer allowed to read.');
    }
    return;
  }
  if (info.node && !state.node) {
    state.node = info.node; // a cluster: from now on the whole cluster is shown
    $('nodes-section').classList.remove('hidden');
    return poll();
  }
  if (nodes) showNodes(nodes.nodes);
  if (info.tick_hz) state.tickHz = info.tick_hz;
  const now = performance.now();
  const tick = info.metrics && info.metrics.tick_duration_seconds;
  const cur = {
    t: now, commands: info.commands, sent: conn.sent,
    tickCount: tick ? tick.count : 0, tickSum: tick ? tick.sum : 0,
    frames: state.framesReceived, renders: view.frames,
  };
  $('f-connections').textContent = info.connections;
  const dt = prevFigures ? (now - prevFigures.t) / 1000 : 0;
  // (two answers can come at one instant of a headless browser's virtual time)
  if (prevFigures && dt > 0) {
    // Not counting this page's own requests.
    const own = cur.sent - prevFigures.sent;
    const rate = Math.max(0, (cur.commands - prevFigures.commands - own) / dt);
    $('f-rate').textContent = rate >= 100 ? Math.round(rate).toLocaleString('en') : rate.toFixed(1);
    const ticks = cur.tickCount - prevFigures.tickCount;
    $('f-tick').textContent = ticks > 0 ? fmtMs((cur.tickSum - prevFigures.tickSum) / ticks) : '–';
    const fps = (cur.frames - prevFigures.frames) / dt;
    $('f-stream').textContent = state.sub ? `${fps.toFixed(0)} frames/s (≤ ${state.hz})` : '–';
    const rfps = (cur.renders - prevFigures.renders) / dt;
    $('f-render').textContent = view.ok ? `${rfps.toFixed(0)} fps · ${view.renderMs.toFixed(1)} ms` : 'no WebGL';
  }
  if (!prevFigures || dt > 0) prevFigures = cur;
  adaptRate();
  showWorlds(list.worlds);
  if (state.node) showReplicas(info.metrics);
  if (!list.worlds.length && !state.world) loadHold.release(); // the picture: no worlds yet
  if (!state.world && !state.autoSelected && list.worlds.length) {
    state.autoSelected = true;
    const wanted = decodeURIComponent((location.hash.match(/world=([^&]*)/) || [])[1] || '');
    const w = list.worlds.find((x) => x.name === wanted) || list.worlds[0];
    selectWorld(w.name);
  }
  refreshNow();
}

function showWorlds(worlds) {
  state.worlds = worlds;
  const ul = $('worlds');
  $('world-count').textContent = worlds.length ? `(${worlds.length})` : '';
  $('no-worlds').classList.toggle('hidden', worlds.length > 0);
  const items = ul.children;
  for (let i = 0; i < worlds.length; i++) {
    let li = items[i];
    if (!li) {
      li = document.createElement('li');
      li.innerHTML = '<span class="name"></span><span class="count"></span>';
      li.addEventListener('click', () => selectWorld(li.dataset.world));
      ul.appendChild(li);
    }
    const w = worlds[i];
    li.dataset.world = w.name;
    li.firstChild.textContent = w.name;
    // In a cluster: the owner; the transforms are known for this daemon's own worlds.
    li.lastChild.textContent = [w.node, w.transforms === undefined ? '' : w.transforms.toLocaleString('en')]
      .filter(Boolean).join(' · ');
    li.classList.toggle('selected', w.name === state.world);
  }
  while (ul.children.length > worlds.length) ul.lastChild.remove();
}

function showNodes(nodes) {
  state.nodes = nodes;
  const ul = $('nodes');
  ul.replaceChildren();
  for (const n of nodes) {
    const li = document.createElement('li');
    li.innerHTML = '<span class="name"></span><span class="count"></span>';
    li.dataset.node = n.node;
    li.firstChild.textContent = n.node + (n.node === state.node ? ' (this page)' : '');
    li.lastChild.textContent = `${n.worlds} worlds · ${n.transforms.toLocaleString('en')} transforms · ${n.connections} connections`;
    li.title = `${n.addr}${n.http ? `, http ${n.http}` : ''}`;
    li.classList.toggle('selected', n.node === state.owner);
    ul.appendChild(li);
  }
  $('node-count').textContent = `(${nodes.length})`;
}

// ---- the groups' replicas (with --replicas) ----------------------------------------------------

// The other owners' lags: node -> { http, client (null until open), opening, lags (lagsOf of
// its last info, or undefined), at (when) }.
const peers = new Map();
const PEER_FRESH_MS = 5000; // an owner's figures older than this are not shown
let ownLags = new Map();

// The panel from world.list's worlds and this daemon's own figures; asks the other owners
// for theirs (shown when they come).
function showReplicas(metrics) {
  ownLags = lagsOf(metrics);
  renderReplicas();
  const owners = new Set((state.replicas || []).filter((g) => g.followers.length).map((g) => g.owner));
  owners.delete(state.node);
  dropPeers((node, p) => !owners.has(node) || !state.nodes.some((n) => n.node === node && n.http === p.http));
  for (const node of owners) pollPeer(node);
}

function renderReplicas() {
  const lagsByOwner = new Map([[state.node, ownLags]]);
  const now = performance.now();
  for (const [node, p] of peers) if (p.lags && now - p.at < PEER_FRESH_MS) lagsByOwner.set(node, p.lags);
  const groups = replicaGroups(state.worlds, lagsByOwner);
  state.replicas = groups;
  $('replicas').classList.toggle('hidden', !groups);
  if (!groups) return;
  $('group-count').textContent = `(${groups.length})`;
  const ul = $('groups');
  ul.replaceChildren();
  for (const g of groups) {
    const li = document.createElement('li');
    li.dataset.group = g.group;
    li.classList.toggle('alone', g.alone);
    const head = document.createElement('div');
    head.className = 'group';
    head.innerHTML = '<span class="name"></span><span class="owner"></span>';
    head.firstChild.textContent = g.group;
    head.lastChild.textContent = `owner ${g.owner || '?'}`;
    head.title = `${g.worlds} world${g.worlds === 1 ? '' : 's'}; in sync: ${g.insync.join(', ') || 'none'}`;
    const summary = document.createElement('div');
    summary.className = 'summary';
    summary.textContent = describeGroup(g);
    li.append(head, summary);
    for (const f of g.followers) {
      const d = describeFollower(f);
      const row = document.createElement('div');
      row.className = `follower ${d.state}`;
      row.dataset.node = f.node;
      row.innerHTML = '<span><span class="node"></span> <span class="state"></span></span><span class="lag"></span>';
      row.querySelector('.node').textContent = f.node;
      row.querySelector('.state').textContent = f.insync ? `✓ ${d.word}` : `✗ ${d.word}`;
      row.lastChild.textContent = d.lag;
      row.title = `${f.node} follows ${g.group}: ${d.word}, lag ${d.lag} (as its owner ${g.owner} reports)`;
      li.appendChild(row);
    }
    ul.appendChild(li);
  }
}

// Asks node (an owner of groups with followers) for its figures, over a client of its own.
async function pollPeer(node) {
  const n = state.nodes.find((x) => x.node === node);
  if (!n || !n.http) return;
  let p = peers.get(node);
  if (!p) {
    p = { http: n.http, client: null, opening: false, lags: undefined, at: 0 };
    peers.set(node, p);
  }
  if (p.opening) return;
  p.opening = true;
  try {
    if (!(p.client && p.client.isOpen)) {
      p.client = await openNode(p.http);
      p.client.onclose = () => {
        if (peers.get(node) === p) peers.delete(node);
      };
      if (peers.get(node) !== p) throw new Error('dropped');
    }
    const info = await p.client.call('info');
    p.lags = lagsOf(info.metrics);
    p.at = performance.now();
    renderReplicas();
  } catch {
    // shown as unknown until it answers again
    if (p.client) p.client.close();
    p.client = null;
    if (peers.get(node) === p) peers.delete(node);
  } finally {
    p.opening = false;
  }
}

// Closes the clients of the owners for which drop(node, peer) holds.
function dropPeers(drop) {
  for (const [node, p] of peers) {
    if (!drop(node, p)) continue;
    peers.delete(node);
    if (p.client) p.client.close();
  }
}

function markOwner() {
  for (const li of $('nodes').children) li.classList.toggle('selected', li.dataset.node === state.owner);
}

// ---- the chosen world ----------------------------------------------------------------------

let fitPending = false;

// Opens a world: subscribes to it (on its owner, in a cluster). owner: the node to try first
// (else the one the world list names); keepCamera: a reopening, which keeps the camera, and
// note says why until the world's first frame.
async function selectWorld(name, { owner = '', keepCamera = false, note = '' } = {}) {
  if (!name || name === state.world) return;
  const old = state.sub;
  const opening = ++state.opening;
  state.world = name;
  state.sub = 0;
  clearWorld();
  fitPending = !keepCamera;
  if (!keepCamera) setTrack('all'); // a world just opened stays in view as it moves
  history.replaceState(null, '', `#world=${encodeURIComponent(name)}${HASH_FORM}`);
  $('view-world').textContent = note ? `${name} (${note})` : name;
  $('view-empty').classList.add('hidden');
  for (const li of $('worlds').children) li.classList.toggle('selected', li.dataset.world === name);
  if (old) old.unsubscribe().catch(() => {});
  try {
    state.hz = STREAM_HZ;
    state.frameMs = 0;
    const sub = await openWorld(name, owner, opening);
    if (state.opening === opening) state.sub = sub;
    else sub.unsubscribe().catch(() => {});
  } catch (e) {
    if (state.opening === opening && e.code !== 'CLOSED') worldGone(`${name}: ${e.message}`);
    return;
  }
  // its history window, from the node it is on (a cluster's list knows only its own worlds')
  try {
    const list = await wconn.call('world.list');
    const w = list.worlds.find((x) => x.name === name);
    if (state.opening === opening) showTimeline(w && w.history ? w.history : 0);
  } catch {
    // no timeline then
  }
}

// The node that owns a world, as the world list says ('' when it does not say).
function ownerOf(name) {
  const w = state.worlds.find((x) => x.name === name);
  return (w && w.node) || '';
}

// Subscribes to a world on its owner. Standalone, on the page's own connection. In a cluster,
// on the owner's (a MOVED answer names another owner, tried at once; UNAVAILABLE, or an owner
// that cannot be reached, is a group between owners: the world list is read again and the
// world tried again, for a while).
async function openWorld(name, node, opening) {
  const deadline = performance.now() + REOPEN_MS;
  node = node || ownerOf(name);
  for (;;) {
    try {
      await useNode(node, opening);
      return await subscribe(name, state.hz);
    } catch (e) {
      if (state.opening !== opening) throw Object.assign(new Error('superseded'), { code: 'CLOSED' });
      const moved = e.code === 'MOVED' && e.response && e.response.error && e.response.error.node;
      if (!state.node || !(moved || e.code === 'UNAVAILABLE' || e.code === 'CLOSED') || performance.now() > deadline) {
        if (e.code === 'CLOSED' && conn.client) throw new Error(e.message); // the owner, not this page's daemon
        throw e;
      }
      if (moved) {
        node = e.response.error.node;
      } else {
        loadHold.release(); // waits on a timer
        await sleep(250);
        await poll();
        node = ownerOf(name);
      }
    }
  }
}

// Reads the chosen world over node's connection from now on (the page's own when node is this
// daemon, or unknown).
async function useNode(node, opening) {
  if (!node || node === state.node) {
    wconn.drop();
    state.owner = state.node;
    markOwner();
    return;
  }
  let n = state.nodes.find((x) => x.node === node);
  if (!n) {
    const r = await conn.call('cluster.nodes');
    showNodes(r.nodes);
    n = r.nodes.find((x) => x.node === node);
    if (!n) throw Object.assign(new Error(`node ${node} is not live`), { code: 'UNAVAILABLE' });
  }
  if (!n.http) throw new Error(`its owner ${node} has no HTTP port`);
  if (!(wconn.client && wconn.http === n.http && wconn.client.isOpen)) {
    wconn.drop();
    const c = await connectTo(n.http);
    if (state.opening !== opening) {
      c.close();
      throw Object.assign(new Error('superseded'), { code: 'CLOSED' });
    }
    wconn.client = c;
    wconn.http = n.http;
  }
  state.owner = node;
  markOwner();
}

// The world is opened again (it moved, or its owner's connection closed), on node when known;
// the camera and the selection stay.
function reopen(name, node, why) {
  if (state.world !== name) return;
  state.reselect = state.selected;
  state.world = null;
  selectWorld(name, { owner: node, keepCamera: true, note: `${why}: opening it again…` });
}

// A big world that moves everywhere makes big frames: the page asks for fewer of them when
// reading them would take more than its share of the time, so drawing stays smooth (the
// daemon then sends everything changed since the previous frame), and more again when it can.
let adapting = false;

async function adaptRate() {
  if (!state.sub || adapting || !state.frameMs) return;
  const affordable = Math.max(2, Math.min(STREAM_HZ, Math.floor((STREAM_SHARE * 1000) / state.frameMs)));
  if (!(affordable < state.hz * 0.8 || (affordable > state.hz * 1.5 && state.hz < STREAM_HZ))) return;
  adapting = true;
  const world = state.world, old = state.sub;
  try {
    const sub = await subscribe(world, affordable);
    if (state.world === world && state.sub === old) {
      state.sub = sub; // its first frame is full: the view then draws its mirror
      state.hz = affordable;
      old.unsubscribe().catch(() => {});
    } else {
      sub.unsubscribe().catch(() => {});
    }
  } catch {
    // the world went away or the connection closed: handled there
  } finally {
    adapting = false;
  }
}

function clearWorld() {
  stopFollow();
  resetTimeline();
  state.gone.clear();
  state.entities.clear();
  queue.length = 0;
  queueHead = 0;
  view.clear();
  selectEntity(0);
  listDirty = true;
  scheduleList();
}

function worldGone(why) {
  loadHold.release();
  state.world = null;
  state.sub = 0;
  state.opening++;
  state.owner = '';
  wconn.drop();
  markOwner();
  clearWorld();
  $('view-world').textContent = '';
  $('view-empty').textContent = why;
  $('view-empty').classList.remove('hidden');
  poll();
}

// A subscription whose frames (b64, or packed; decoded by scened.mjs into its mirror) reach
// the page.
function subscribe(world, hz) {
  const c = wconn.take();
  if (!c) return Promise.reject(closedError());
  return c.subscribe(world, {
    hz,
    ...formFields(),
    onFrame: (frame, sub) => onFrame(frame, sub),
    onEnd: (reason, ev) => {
      if (isCurrent(ev)) {
        if (reason === 'world_destroyed') worldGone(`World ${ev.world} was destroyed.`);
        // its group went to another node: opened again there once the lists know
        else if (reason === 'moved') reopen(state.world, ev.node || '', `${ev.world} moved to ${ev.node}`);
        else if (reason !== 'closed') worldGone(`The subscription ended (${reason}).`);
      }
    },
  });
}

function isCurrent(ev) {
  return ev && state.sub && ev.sub === state.sub.id;
}

function onFrame(frame, sub) {
  if (sub !== state.sub) return;
  noteNow(frame.tick);
  const t0 = performance.now();
  applyFrame(frame, sub.mirror);
  const ms = frame.readMs + performance.now() - t0;
  state.frameMs = state.frameMs ? state.frameMs * 0.8 + ms * 0.2 : ms;
}

// The mirror has the frame already: the page learns which entities came and went, and which
// moved, from its ids.
function applyFrame(f, mirror) {
  const ents = state.entities;
  const live = timeline.live; // while looking back, the view shows the past: only the state moves on
  let selectedMoved = false;
  if (live && view.mirror !== mirror) view.setMirror(mirror);
  if (f.full) {
    for (const id of Array.from(ents.keys())) if (!mirror.has(id)) removeEntity(id);
  }
  // A small change (an edit, not a whole world in motion) may come from a link or unlink:
  // the names and parents of what moved are read again, at most every few seconds each.
  const ids = f.ids;
  const recheck = !f.full && ids.length <= RECHECK_MAX ? performance.now() : 0;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    const ent = ents.get(id);
    if (!ent) addEntity(id);
    else if (recheck && ent.fetched && !ent.stale && recheck - ent.readAt > RECHECK_MS) {
      ent.stale = true;
      queue.push(id);
    }
    if (id === state.selected) selectedMoved = true;
  }
  for (const id of f.removed) removeEntity(id);
  state.framesReceived++;
  state.lastTick = f.tick;
  if (f.full) $('view-world').textContent = state.world;
  pump();
  if (!live) return;
  view.changed();
  if (fitPending && f.full) {
    fitPending = false;
    view.fit();
    suggestRegion(view.sceneRadius);
  }
  if (f.full && !loadHold.done) {
    view.render(); // now: animation frames may not come (a headless browser's virtual time)
    state.firstPicture = true;
    loadHold.soon(NAMES_WAIT);
    settleLoad();
  }
  if (state.reselect && f.full) {
    const id = state.reselect;
    state.reselect = 0;
    if (ents.has(id)) selectEntity(id);
  }
  showCount();
  if (selectedMoved) selectedChanged(true);
}

function addEntity(id) {
  state.entities.set(id, { id, name: null, parent: null, local: null, world: null, tick: 0, exact: false, fetched: false, stale: false, readAt: 0 });
  queue.push(id);
  listDirty = true;
  scheduleList();
}

function removeEntity(id) {
  if (!state.entities.delete(id)) return;
  view.remove(id);
  // kept for the timeline: it is still there at the ticks before
  if (timeline.history) {
    state.gone.add(id);
    if (state.gone.size > GONE_KEPT) state.gone.delete(state.gone.values().next().value);
  }
  if (!timeline.live) return; // the past on the screen still has it
  if (id === state.selected) selectEntity(0);
  listDirty = true;
  scheduleList();
}

// Names and parents are read once per entity (transform.get), a bounded number at a time.
const queue = [];
let queueHead = 0, inflight = 0;

function pump() {
  while (inflight < GETS_IN_FLIGHT && queueHead < queue.length && state.sub) {
    const id = queue[queueHead++];
    const ent = state.entities.get(id);
    if (!ent || (ent.fetched && !ent.stale)) continue;
    fetchEntity(id).finally(() => {
      inflight--;
      pump();
    });
    inflight++;
  }
  if (queueHead > 4096 && queueHead * 2 > queue.length) {
    queue.splice(0, queueHead);
    queueHead = 0;
  }
  settleLoad();
}

// Once the first picture is drawn and the names being read have come, the load hold ends.
function settleLoad() {
  if (state.firstPicture && inflight === 0 && queueHead === queue.length) loadHold.release();
}

async function fetchEntity(id) {
  const world = state.world;
  try {
    const r = await wconn.call('transform.get', { world, entity: id });
    if (state.world === world) noteNow(r.tick);
    const ent = state.entities.get(id);
    if (state.world !== world || !ent) return;
    ent.name = r.name === undefined ? null : r.name;
    ent.parent = r.parent;
    // (the selected entity's are refreshDetail's, read at a tick in a world with history)
    if (id !== state.selected || !ent.world) setMatrices(ent, r, false);
    ent.fetched = true;
    ent.stale = false;
    ent.readAt = performance.now();
    view.setParent(id, r.parent || 0);
    if (timeline.live) {
      listDirty = true;
      scheduleList();
      if (id === state.selected) showSelected();
    }
  } catch {
    // gone meanwhile, or the connection closed: nothing to show
  }
}

// ---- the entity list (only the visible rows exist) -----------------------------------------

let rows = [], listDirty = true, listScheduled = false;
const list = $('entities'), spacer = $('entities-spacer');

function scheduleList() {
  if (listScheduled) return;
  listScheduled = true;
  setTimeout(() => {
    listScheduled = false;
    renderList();
  }, 100);
}

function label(ent) {
  return ent.name !== null ? ent.name : ent.fetched ? '(unnamed)' : '…';
}

// The entities on the screen: the live ones, or those of the past tick looked at.
function shownEntities() {
  return timeline.past ? timeline.past.entities : state.entities;
}

function showCount() {
  const n = shownEntities().size.toLocaleString('en');
  $('entity-count').textContent = timeline.past ? `(${n} at tick ${timeline.past.tick})` : `(${n})`;
}

function renderList() {
  if (listDirty) {
    listDirty = false;
    const q = $('filter').value.trim().toLowerCase();
    rows = [];
    for (const ent of shownEntities().values())
      if (!q || String(ent.id).startsWith(q) || (ent.name && ent.name.toLowerCase().includes(q)))
        rows.push(ent.id);
    rows.sort((a, b) => a - b);
    spacer.style.height = `${rows.length * ROW}px`;
  }
  const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 2);
  const last = Math.min(rows.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + 2);
  const pool = list.querySelectorAll('.row');
  let used = 0;
  const ents = shownEntities();
  for (let i = first; i < last; i++) {
    const ent = ents.get(rows[i]);
    if (!ent) continue;
    let div = pool[used];
    if (!div) {
      div = document.createElement('div');
      div.className = 'row';
      div.innerHTML = '<span class="name"></span><span class="id"></span>';
      list.appendChild(div);
    }
    used++;
    div.style.top = `${i * ROW}px`;
    div.dataset.entity = ent.id;
    div.firstChild.textContent = label(ent);
    div.lastChild.textContent = `#${ent.id}`;
    div.classList.toggle('selected', ent.id === state.selected);
  }
  for (let i = used; i < pool.length; i++) pool[i].remove();
}

list.addEventListener('scroll', () => renderList());
list.addEventListener('click', (ev) => {
  const row = ev.target.closest('.row');
  if (row) selectEntity(Number(row.dataset.entity));
});
$('filter').addEventListener('input', () => {
  listDirty = true;
  renderList();
});

// ---- the selected entity -------------------------------------------------------------------

function fmt(v) {
  if (Math.abs(v) < 5e-7) return '0';
  return String(Number(v.toPrecision(5)));
}

function showMatrix(table, m) {
  if (!m) {
    table.innerHTML = '';
    return;
  }
  if (table.rows.length !== 4) {
    table.innerHTML = '<tr><td></td><td></td><td></td><td></td></tr>'.repeat(4);
  }
  for (let r = 0; r < 4; r++)
    for (let c = 0; c < 4; c++) table.rows[r].cells[c].textContent = fmt(m[c * 4 + r]);
}

function selectEntity(id) {
  state.selected = id;
  view.select(id);
  for (const row of list.querySelectorAll('.row'))
    row.classList.toggle('selected', Number(row.dataset.entity) === id);
  showSelected();
  showFollow();
  if (id) selectedChanged(true);
}

function showSelected() {
  const ents = shownEntities();
  const ent = state.selected ? ents.get(state.selected) : null;
  $('selected').classList.toggle('hidden', !ent);
  $('selected-none').classList.toggle('hidden', !!ent);
  $('selected-none').textContent = state.selected && timeline.past
    ? `#${state.selected} had no transform at tick ${timeline.past.tick}.`
    : 'Click an entity in the list or in the view.';
  if (!ent) return;
  $('sel-name').textContent = label(ent);
  $('sel-id').textContent = timeline.past ? `#${ent.id} at tick ${timeline.past.tick}` : `#${ent.id}`;
  const parent = ent.parent ? ents.get(ent.parent) : null;
  const a = $('sel-parent');
  a.textContent = ent.parent ? `${parent ? label(parent) : ''} #${ent.parent}` : ent.fetched ? 'none (a root)' : '…';
  a.dataset.entity = ent.parent || '';
  showMatrix($('sel-local'), ent.local);
  showMatrix($('sel-world'), ent.world);
  const at = $('sel-tick');
  if (!ent.world) {
    at.textContent = '';
    at.title = '';
  } else if (ent.exact) {
    at.textContent = `local and world at tick ${ent.tick.toLocaleString('en')}`;
    at.title = `both as the daemon held them when tick ${ent.tick} ran: the world matrix is the one the frame of that tick carried`;
  } else {
    at.textContent = `local and world read together after tick ${ent.tick.toLocaleString('en')}`;
    at.title = `both from one read: the values current after tick ${ent.tick} ran, with any command answered since (a world without history cannot be read at a tick); the markers are drawn from the frames, which may be newer`;
  }
}

// The local and world matrices of one answer of transform.get (r: raw or decoded), with its
// tick; exact: read at that tick, else the values current after it.
function setMatrices(ent, r, exact) {
  ent.local = Array.from(matrixOf(r.local));
  ent.world = Array.from(matrixOf(r.world));
  ent.tick = r.tick;
  ent.exact = exact;
}

$('sel-parent').addEventListener('click', (ev) => {
  ev.preventDefault();
  const id = Number(ev.target.dataset.entity);
  if (id) selectEntity(id);
});

// The selected entity's matrices are read again when it moved: one read at a time, at most
// every DETAIL_MS. Local and world come from the same answer (the frames run ahead of any read,
// so the world matrix drawn would not match a local one read before). In a world with history
// the read names the tick of the last frame: the pair is what the daemon held then, and the
// world matrix is the one that frame carried. Elsewhere the answer's tick is the last that ran,
// and the values are those current after it.
let detailTimer = null, detailDue = false, detailBusy = false;

function selectedChanged(now) {
  if (!timeline.live) {
    showSelected(); // the past's values, read with it
    return;
  }
  detailDue = true;
  if (now) {
    showSelected();
  } else if (!detailTimer) {
    detailTimer = setTimeout(() => {
      detailTimer = null;
      showSelected();
    }, 100);
  }
  refreshDetail();
}

async function refreshDetail() {
  if (detailBusy || !detailDue || !state.selected || !timeline.live) return;
  detailBusy = true;
  detailDue = false;
  const id = state.selected, world = state.world;
  const tick = timeline.history && state.lastTick > 0 ? state.lastTick : 0;
  try {
    let r, exact = false;
    try {
      r = await wconn.get(world, id, tick ? { tick } : {});
      exact = !!tick;
    } catch (e) {
      // the tick left the window meanwhile: the values now, then
      if (!tick || e.code !== 'NOT_FOUND') throw e;
      r = await wconn.get(world, id);
    }
    if (state.world === world) noteNow(r.tick);
    const ent = state.entities.get(id);
    if (ent && state.world === world) {
      ent.name = r.name === undefined ? null : r.name;
      ent.parent = r.parent;
      setMatrices(ent, r, exact);
      ent.fetched = true;
      view.setParent(id, r.parent || 0);
      if (id === state.selected && timeline.live) showSelected();
    }
  } catch {
    // gone meanwhile
  }
  setTimeout(() => {
    detailBusy = false;
    refreshDetail();
  }, DETAIL_MS);
}

// ---- following an entity (a subscription by distance) --------------------------------------

// The view's own subscription keeps the whole world; following adds a second one on the same
// connection, with "near" around the followed entity: its mirror is the scope, which the view
// draws over the world with the region's circle. A new radius, margin or entity is a
// subscribe.update of that subscription (no full frame: the next one carries what came into
// scope and what left it); unfollowing ends it. When the followed entity is destroyed the
// daemon ends it (center_destroyed) and the page says so.
const follow = {
  sub: null,        // the near subscription (scened.mjs), null when not following
  entity: 0,
  label: '',        // the followed entity as it was named when followed
  radius: 0,
  margin: 0,
  note: '',         // why following ended, or what was refused
  error: false,
  edited: false,    // the user typed a radius or margin (else they come from the world's size)
  generation: 0,    // counts stops: a follow begun before one gives up
  chain: Promise.resolve(),
  updates: 0,       // subscribe.update requests answered ok
};

const fr = { radius: $('follow-radius'), margin: $('follow-margin'), button: $('follow'), stop: $('unfollow') };

// A round number near x (1, 2 or 5 times a power of ten).
function roundish(x) {
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  const f = x / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

// A region of a quarter of the world's size, until the user chooses one.
function suggestRegion(sceneRadius) {
  if (follow.edited || follow.sub || !(sceneRadius > 0)) return;
  const radius = roundish(sceneRadius / 4);
  fr.radius.value = String(radius);
  fr.margin.value = String(roundish(radius / 5));
}

// The radius and margin typed, or why they cannot be sent.
function regionAsked() {
  const radius = Number(fr.radius.value), margin = fr.margin.value.trim() === '' ? 0 : Number(fr.margin.value);
  if (!(radius > 0) || !Number.isFinite(radius)) return { error: 'The radius must be a positive number.' };
  if (!(margin >= 0) || !Number.isFinite(margin)) return { error: 'The margin must be a number, 0 or more.' };
  return { radius, margin };
}

function setFollowNote(text, error = false) {
  follow.note = text;
  follow.error = error;
  const el = $('follow-note');
  el.textContent = text;
  el.classList.toggle('error', error);
  el.classList.toggle('dim', !error);
}

// Follows entity (the selected one) with the region typed: subscribes, or updates the
// subscription when already following. One at a time, in order.
function followEntity(entity) {
  follow.chain = follow.chain.then(() => startFollow(entity), () => startFollow(entity));
  return follow.chain;
}

async function startFollow(entity) {
  const region = regionAsked();
  if (region.error) {
    setFollowNote(region.error, true);
    return;
  }
  if (!entity || !state.world || !state.sub) return;
  const near = { entity, radius: region.radius, margin: region.margin };
  const ent = state.entities.get(entity);
  const named = `${ent && ent.name !== null ? `${ent.name} ` : ''}#${entity}`;
  const generation = follow.generation, world = state.world;
  try {
    if (follow.sub && !follow.sub.ended) {
      await follow.sub.update({ near });
      follow.updates++;
    } else {
      const c = wconn.take();
      if (!c) throw closedError();
      const sub = await c.subscribe(world, {
        near,
        hz: STREAM_HZ,
        ...formFields(),
        onFrame: (f, s) => onFollowFrame(s),
        onEnd: (reason) => onFollowEnd(sub, reason),
      });
      if (generation !== follow.generation || state.world !== world) {
        sub.unsubscribe().catch(() => {});
        return;
      }
      follow.sub = sub;
      if (sub.ended) { // ended before the answer was handed over
        onFollowEnd(sub, sub.ended);
        return;
      }
    }
  } catch (e) {
    if (generation === follow.generation) setFollowNote(`Not followed: ${e.message}${e.code ? ` (${e.code})` : ''}`, true);
    return;
  }
  if (generation !== follow.generation) return;
  Object.assign(follow, { entity, label: named, radius: region.radius, margin: region.margin });
  setFollowNote('');
  view.setScope({ mirror: follow.sub.mirror, center: entity, radius: region.radius, margin: region.margin });
  showFollow();
}

// Unfollows (the subscription ends); note says why, when it is not the user's choice.
function stopFollow(note = '') {
  const sub = follow.sub;
  follow.generation++;
  follow.sub = null;
  follow.entity = 0;
  if (sub && !sub.ended) sub.unsubscribe().catch(() => {});
  view.setScope(null);
  setFollowNote(note);
  showFollow();
}

function onFollowFrame(sub) {
  if (sub !== follow.sub) return;
  if (timeline.live) view.changed();
  showFollow();
}

function onFollowEnd(sub, reason) {
  if (sub !== follow.sub) return;
  const who = follow.label;
  if (reason === 'center_destroyed')
    stopFollow(`${who} was destroyed: following ended, and the view shows the whole world.`);
  else if (reason === 'moved')
    stopFollow('Following ended: the world moved to another node.');
  else if (reason !== 'unsubscribed')
    stopFollow(`Following ended (${reason}).`);
  else
    stopFollow();
}

// The follow controls and the scope's count, as things are now.
function showFollow() {
  const sub = follow.sub;
  const canFollow = !!(state.selected && state.world && state.sub && timeline.live);
  fr.button.disabled = !canFollow;
  fr.button.textContent = !sub ? 'Follow' : state.selected === follow.entity ? 'Apply' : 'Follow this one';
  fr.stop.classList.toggle('hidden', !sub);
  const badge = $('view-scope');
  badge.classList.toggle('hidden', !sub || !timeline.live);
  if (!sub) {
    $('follow-state').textContent = '';
    return;
  }
  const n = sub.mirror.size.toLocaleString('en');
  $('follow-state').textContent =
    `Following ${follow.label}: ${n} in scope (radius ${follow.radius}, margin ${follow.margin}).`;
  badge.textContent = `following ${follow.label} · ${n} in scope`;
}

fr.button.addEventListener('click', () => followEntity(state.selected));
fr.stop.addEventListener('click', () => stopFollow());
for (const input of [fr.radius, fr.margin]) {
  input.addEventListener('input', () => { follow.edited = true; });
  // a new radius or margin applies at once while following
  input.addEventListener('change', () => {
    if (follow.sub) followEntity(follow.entity);
  });
}

// ---- the timeline (a world with history) ---------------------------------------------------

const tl = { bar: $('timeline'), range: $('tl-range'), live: $('tl-live'), tick: $('tl-tick'), note: $('tl-note') };

function showTimeline(history) {
  timeline.history = history;
  tl.bar.classList.toggle('hidden', !history);
  $('view').classList.toggle('with-timeline', !!history);
  updateRange();
}

// Back to live and hidden (another world, or none).
function resetTimeline() {
  timeline.history = 0;
  timeline.now = 0;
  timeline.min = timeline.max = 0;
  timeline.live = true;
  timeline.wanted = 0;
  timeline.past = null;
  timeline.note = '';
  tl.bar.classList.add('hidden');
  tl.bar.classList.remove('past');
  tl.live.classList.add('live');
  $('view').classList.remove('with-timeline');
  tl.note.textContent = '';
}

// The last tick known to have run in the chosen world.
function noteNow(tick) {
  if (typeof tick !== 'number' || tick <= timeline.now) return;
  timeline.now = tick;
  if (timeline.history && timeline.live) updateRange();
}

// A world that nothing changes in sends no frames: its clock is read once a second (any
// transform.get answers the tick that ran last).
function refreshNow() {
  if (!timeline.history || !state.world) return;
  const ids = state.entities.keys(), first = ids.next();
  if (first.done) return;
  const world = state.world;
  wconn.call('transform.get', { world, entity: first.value }).then((r) => {
    if (state.world === world) noteNow(r.tick);
  }, () => {});
}

// The range is the window [now - history + 1, now] (from tick 1: history begins with the
// world, or the daemon's start); while looking back it stays as it was when the drag began.
function updateRange() {
  if (!timeline.history) return;
  if (timeline.live) {
    timeline.max = timeline.now;
    timeline.min = Math.max(1, timeline.now - timeline.history + 1);
  }
  const r = tl.range;
  r.min = String(timeline.min);
  r.max = String(Math.max(timeline.max, timeline.min));
  r.disabled = timeline.now < 1; // no tick has run yet
  const tick = timeline.live ? timeline.now : timeline.wanted;
  r.value = String(tick);
  showTickLabel(tick);
}

function showTickLabel(tick) {
  const back = timeline.now - tick;
  const secs = state.tickHz ? ` (${(back / state.tickHz).toFixed(back / state.tickHz < 10 ? 2 : 1)} s ago)` : '';
  tl.tick.textContent = timeline.live ? `tick ${tick.toLocaleString('en')} · live` : `tick ${tick.toLocaleString('en')}${back > 0 ? secs : ''}`;
}

function setNote(text) {
  timeline.note = text;
  tl.note.textContent = text;
  tl.note.title = text;
}

// A new drag starts from the window as it is now (the daemon has gone on meanwhile).
function beginDrag() {
  if (timeline.live || !timeline.history) return;
  timeline.max = timeline.now;
  timeline.min = Math.max(1, timeline.now - timeline.history + 1);
  updateRange();
}

tl.range.addEventListener('pointerdown', beginDrag);
tl.range.addEventListener('keydown', beginDrag);
for (const type of ['input', 'change']) {
  tl.range.addEventListener(type, () => {
    if (!timeline.history || !state.world) return;
    const tick = Math.round(Number(tl.range.value));
    if (timeline.live && tick >= timeline.now) return; // still the present
    pause();
    timeline.wanted = tick;
    showTickLabel(tick);
    readPast();
  });
}
tl.live.addEventListener('click', () => goLive());

// Looking back: frames go on into the subscription's mirror and the page's state, the view
// stays on the past.
function pause() {
  if (!timeline.live) return;
  timeline.live = false;
  tl.bar.classList.add('past');
  tl.live.classList.remove('live');
  tl.live.title = 'back to the stream';
  showFollow();
}

function goLive() {
  if (timeline.live) return;
  timeline.live = true;
  timeline.wanted = 0;
  timeline.past = null;
  tl.bar.classList.remove('past');
  tl.live.classList.add('live');
  tl.live.title = 'following the stream';
  setNote('');
  view.setMirror(state.sub && state.sub.mirror ? state.sub.mirror : new Mirror());
  view.changed();
  if (state.selected && !state.entities.has(state.selected)) selectEntity(0);
  else if (state.selected) {
    view.select(state.selected);
    selectedChanged(true);
  }
  listDirty = true;
  renderList();
  showCount();
  showSelected();
  updateRange();
  showFollow();
  pump();
}

// The entities read at a past tick: the live ones and those destroyed while the page watched,
// the first PAST_LIMIT by id.
function pastCandidates() {
  const ids = Array.from(state.entities.keys());
  for (const id of state.gone) if (!state.entities.has(id)) ids.push(id);
  ids.sort((a, b) => a - b);
  return ids;
}

// Reads the world at the tick asked for: transform.get with tick for each entity, pipelined
// (PAST_IN_FLIGHT at a time). One tick at a time: when the range moves meanwhile, what is left
// of the older tick is not asked for, and the newest tick is read next.
async function readPast() {
  if (timeline.busy) return;
  timeline.busy = true;
  try {
    while (!timeline.live && timeline.wanted && !(timeline.past && timeline.past.tick === timeline.wanted)) {
      const tick = timeline.wanted, world = state.world, opening = state.opening;
      const all = pastCandidates();
      const ids = all.length > PAST_LIMIT ? all.slice(0, PAST_LIMIT) : all;
      setNote(`reading tick ${tick.toLocaleString('en')}…`);
      timeline.reads++;
      const started = performance.now();
      const results = new Array(ids.length).fill(null);
      let next = 0, stale = false, failed = null, missing = null;
      const worker = async () => {
        while (next < ids.length && !failed) {
          if (timeline.live || timeline.wanted !== tick || state.opening !== opening) {
            stale = true;
            return;
          }
          const i = next++;
          try {
            results[i] = await wconn.get(world, ids[i], { tick });
          } catch (e) {
            if (e.code === 'NOT_FOUND') missing = missing || e;
            else failed = e;
          }
        }
      };
      await Promise.all(Array.from({ length: Math.max(1, Math.min(PAST_IN_FLIGHT, ids.length)) }, worker));
      if (timeline.live || state.opening !== opening) break;
      if (stale || timeline.wanted !== tick) continue;
      if (failed) {
        setNote(`tick ${tick}: ${failed.message}`);
        break;
      }
      timeline.readMs = performance.now() - started;
      // Entities missing at a tick near the window's start: did the window move past the tick
      // while it was read? (Then "missing" is not "created later".) The clock is read again.
      let left = false;
      if (missing) {
        try {
          noteNow((await wconn.call('transform.get', { world, entity: ids[0] })).tick);
        } catch {
          // that one is gone now: the clock is what the frames said
        }
        left = tick < timeline.now - timeline.history + 1;
      }
      if (timeline.live || state.opening !== opening) break;
      showPast(tick, ids, results, all.length, missing, left);
    }
  } finally {
    timeline.busy = false;
  }
}

// The world at a past tick on the screen: markers, list and selection of then; what had no
// transform then is hidden.
function showPast(tick, ids, results, total, missing, left) {
  const entities = new Map(), parents = new Map(), present = [];
  const matrices = new Float32Array(16 * ids.length);
  for (let i = 0; i < ids.length; i++) {
    const r = results[i];
    if (!r) continue;
    matrices.set(r.world, 16 * present.length);
    present.push(r.entity);
    parents.set(r.entity, r.parent || 0);
    entities.set(r.entity, {
      id: r.entity, name: r.name === undefined ? null : r.name, parent: r.parent,
      local: Array.from(r.local), world: Array.from(r.world), tick, exact: true, fetched: true,
    });
  }
  const mirror = new Mirror();
  mirror.apply({ full: true, tick, ids: present, matrices: matrices.subarray(0, 16 * present.length), removed: [] });
  timeline.past = {
    tick, entities, mirror, parents, hidden: ids.length - present.length, truncated: total - ids.length,
    missing: missing ? missing.message : '', left,
  };
  view.setMirror(mirror, parents);
  view.select(state.selected);
  listDirty = true;
  renderList();
  showCount();
  showSelected();
  const notes = [];
  if (!present.length && ids.length && missing) notes.push(missing.message); // e.g. outside the window
  else if (left) notes.push(`tick ${tick.toLocaleString('en')} left the history while it was read: some entities are missing`);
  else if (timeline.past.hidden) notes.push(`${timeline.past.hidden.toLocaleString('en')} not created yet`);
  if (timeline.past.truncated)
    notes.push(`showing the first ${ids.length.toLocaleString('en')} of ${total.toLocaleString('en')} entities`);
  setNote(notes.join(' · '));
}

// ---- view controls -------------------------------------------------------------------------

$('fit').addEventListener('click', () => view.fit());
$('marker').addEventListener('input', (ev) => view.setMarkerScale(Number(ev.target.value)));
$('track').addEventListener('change', (ev) => view.setTrack(ev.target.value));

// Tracking: 'all', 'selected' or 'off' (view.js).
function setTrack(mode) {
  view.setTrack(mode);
  showTrack(mode);
}

// The toolbar says what the view does (also when a zoom or pan by hand turned it off).
function showTrack(mode) {
  $('track').value = mode;
}

// What the page shows, for scripts and tests (read-only views of the state).
window.scened = {
  get status() { return state.status; },
  get version() { return state.version; },
  get access() { return state.access && { ...state.access }; },
  get worlds() { return state.worlds.map((w) => ({ ...w })); },
  get node() { return state.node; },
  get nodes() { return state.nodes.map((n) => ({ ...n })); },
  // with --replicas: [{ group, owner, worlds, followers: [{ node, insync, lag }], insync, alone }]
  get replicas() { return state.replicas && state.replicas.map((g) => structuredClone(g)); },
  get peers() { return Array.from(peers.keys()).sort(); }, // owners asked for their figures
  get owner() { return state.owner; },
  get world() { return state.world; },
  // what the page shows: the live world, or while looking back the world at the timeline's tick
  get entityCount() { return shownEntities().size; },
  get framesReceived() { return state.framesReceived; },
  get lastTick() { return state.lastTick; },
  get streamHz() { return state.hz; },
  get matrices() { return conn.client ? conn.client.matrices : null; },
  get packed() { return PACKED; }, // the packed step the subscriptions ask for, or null
  // the world's subscription as packed: its step and how many entities its state holds, or null
  get streamPacked() {
    const p = state.sub && state.sub.packed;
    return p ? { step: p.step, held: p.size } : null;
  },
  get frameForm() { return FORM; },
  get frameMs() { return state.frameMs; },
  get pendingReads() { return queue.length - queueHead + inflight; },
  get renderMs() { return view.renderMs; },
  get renderedFrames() { return view.frames; },
  get webgl() { return view.ok; },
  get selected() { return state.selected; },
  entity(id) {
    const ent = shownEntities().get(id);
    return ent ? { id, name: ent.name, parent: ent.parent, local: ent.local, world: view.matrix(id) } : null;
  },
  matrix: (id) => view.matrix(id),
  // the selected entity's matrices as the panel shows them: { entity, tick, exact, local, world }
  get selectedMatrices() {
    const ent = state.selected ? shownEntities().get(state.selected) : null;
    return ent && ent.world ? { entity: ent.id, tick: ent.tick, exact: ent.exact, local: ent.local, world: ent.world } : null;
  },
  get track() { return view.track; },
  setTrack,
  // the load hold (loadhold.js): requests sent, and whether it has ended
  get loadHold() { return { requests: loadHold.requests, done: loadHold.done }; },
  screenPosition: (id) => view.screenPosition(id),
  // Draws now (the canvas can be read back until the browser composites it).
  redraw: () => view.render(),
  findByName(name) {
    for (const ent of shownEntities().values()) if (ent.name === name) return ent.id;
    return 0;
  },
  get timeline() {
    const t = timeline, p = t.past;
    return {
      visible: !$('timeline').classList.contains('hidden'),
      history: t.history, now: t.now, min: t.min, max: t.max, live: t.live,
      tick: t.live ? t.now : p ? p.tick : 0,   // the tick shown
      wanted: t.wanted,                        // the tick asked for (shown once read)
      loading: !t.live && (!p || p.tick !== t.wanted),
      shown: p ? p.entities.size : 0,          // entities that had a transform then
      hidden: p ? p.hidden : 0,                // read, but created after that tick
      truncated: p ? p.truncated : 0,          // not read: past the first PAST_LIMIT
      note: t.note,
      reads: t.reads,                          // ticks whose reading began (drags coalesce)
      missing: p ? p.missing : '',             // the first NOT_FOUND answer read, if any
      left: p ? p.left : false,                // the tick left the window while it was read
      readMs: t.readMs,
    };
  },
  // the entity followed, the region and what is in scope (its subscription's mirror), or null
  get follow() {
    const sub = follow.sub;
    if (!sub) return null;
    return {
      entity: follow.entity, radius: follow.radius, margin: follow.margin, sub: sub.id,
      inScope: sub.mirror.size, scope: Array.from(sub.mirror.ids).sort((a, b) => a - b), updates: follow.updates,
    };
  },
  get followNote() { return follow.note; },
  // the region's circle on the screen: { x, y, radius, outer } in CSS pixels, or null
  scopeCircle: () => view.scopeCircle(),
  selectWorld,
  selectEntity,
  followEntity,
  unfollow: () => stopFollow(),
};

conn.open(url);

// scened's staging view, on scened's JavaScript client module (scened.mjs). One WebSocket to
// the daemon (GET /ws on the page's own host): hello with matrices in b64 (with a token when
// the daemon asks for one), a subscription to the chosen world whose mirror (one Float32Array
// of the daemon's float32 world matrices, kept from the b64 frames) the 3D view draws,
// transform.get for names, parents and the selected entity's local matrix, and once a second
// info and world.list for the figures in the header and the world list. Nothing is fetched
// from anywhere else.
// In a cluster (info names a node) it also shows the nodes with their load and which node owns
// each world, and opens a world on its owner's /ws (a second client, with this page's token and
// the same matrices form; the owner allows this page's origin with --ws-origins); the figures
// and lists stay on the page's own daemon. A world moved to another node (or taken over after
// its owner went) is opened again on the new owner.
import { Client, matrixOf } from './scened.mjs';
import { View } from './view.js';

const $ = (id) => document.getElementById(id);
const ROW = 22;          // px, the entity list's row height (see style.css)
const STREAM_HZ = 30;    // frames per second asked of the subscription, at most
const STREAM_SHARE = 0.35; // of the page's time, at most, for reading frames (the rest draws)
const GETS_IN_FLIGHT = 64;
const RECHECK_MAX = 32;  // entries of a frame whose entities' parents are read again
const RECHECK_MS = 2000;
const REOPEN_MS = 15000; // how long a moved world (or one whose owner went) is looked for
// How frames come: b64 (the default), or json when the address says #matrices=json (for
// comparing the two).
const MATRICES = /(^#|&)matrices=json(&|$)/.test(location.hash) ? 'json' : 'b64';

// ---- the connection ----------------------------------------------------------------------

// The client of the moment (a new one after each reconnection); calls fail with CLOSED while
// there is none.
const conn = {
  client: null,
  sent: 0,
  call(cmd, fields) {
    if (!this.client) return Promise.reject(Object.assign(new Error('not connected'), { code: 'CLOSED' }));
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
  call(cmd, fields) {
    const c = this.current;
    if (!c) return Promise.reject(closedError());
    if (c === conn.client) conn.sent++;
    return c.call(cmd, fields);
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
async function connectTo(http) {
  const c = await Client.open(`${proto}//${http}/ws`);
  try {
    await c.hello({ token: sessionStorage.getItem('scened.token'), matrices: MATRICES });
  } catch (e) {
    c.close();
    throw e;
  }
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
  owner: '',            // the node the chosen world is opened on ('' standalone)
  opening: 0,           // counts the openings of a world; an older one gives up
  reselect: 0,          // the entity to select again once a reopened world's first frame came
};

const view = new View($('canvas-host'), { onPick: (id) => selectEntity(id) });
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
  }
}

function askToken(message) {
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

function onAuthenticated(hello) {
  state.version = hello.version;
  $('f-version').textContent = hello.version;
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
  clearInterval(pollTimer);
  pollTimer = null;
  state.sub = 0;
  state.opening++;
  wconn.drop();
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
    // In a cluster: every world with its owner, and the nodes (which a token without the admin
    // right may not see).
    const cluster = state.node ? { cluster: true } : {};
    [info, list, nodes] = await Promise.all([
      conn.call('info'), conn.call('world.list', cluster),
      state.node ? conn.call('cluster.nodes').catch(() => null) : null]);
  } catch {
    return;
  }
  if (info.node && !state.node) {
    state.node = info.node; // a cluster: from now on the whole cluster is shown
    $('nodes-section').classList.remove('hidden');
    return poll();
  }
  if (nodes) showNodes(nodes.nodes);
  const now = performance.now();
  const tick = info.metrics && info.metrics.tick_duration_seconds;
  const cur = {
    t: now, commands: info.commands, sent: conn.sent,
    tickCount: tick ? tick.count : 0, tickSum: tick ? tick.sum : 0,
    frames: state.framesReceived, renders: view.frames,
  };
  $('f-connections').textContent = info.connections;
  if (prevFigures) {
    const dt = (now - prevFigures.t) / 1000;
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
  prevFigures = cur;
  adaptRate();
  showWorlds(list.worlds);
  if (!state.world && !state.autoSelected && list.worlds.length) {
    state.autoSelected = true;
    const wanted = decodeURIComponent((location.hash.match(/world=([^&]*)/) || [])[1] || '');
    const w = list.worlds.find((x) => x.name === wanted) || list.worlds[0];
    selectWorld(w.name);
  }
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
  history.replaceState(null, '', `#world=${encodeURIComponent(name)}${MATRICES === 'json' ? '&matrices=json' : ''}`);
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
  state.entities.clear();
  queue.length = 0;
  queueHead = 0;
  view.clear();
  selectEntity(0);
  listDirty = true;
  scheduleList();
}

function worldGone(why) {
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

// A subscription whose frames (b64, decoded by scened.mjs into its mirror) reach the page.
function subscribe(world, hz) {
  const c = wconn.current;
  if (!c) return Promise.reject(closedError());
  if (c === conn.client) conn.sent++;
  return c.subscribe(world, {
    hz,
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
  const t0 = performance.now();
  applyFrame(frame, sub.mirror);
  const ms = frame.readMs + performance.now() - t0;
  state.frameMs = state.frameMs ? state.frameMs * 0.8 + ms * 0.2 : ms;
}

// The mirror has the frame already: the page learns which entities came and went, and which
// moved, from its ids.
function applyFrame(f, mirror) {
  const ents = state.entities;
  let selectedMoved = false;
  if (view.mirror !== mirror) view.setMirror(mirror);
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
  view.changed();
  state.framesReceived++;
  state.lastTick = f.tick;
  if (fitPending && f.full) {
    fitPending = false;
    view.fit();
  }
  if (f.full) $('view-world').textContent = state.world;
  if (state.reselect && f.full) {
    const id = state.reselect;
    state.reselect = 0;
    if (ents.has(id)) selectEntity(id);
  }
  $('entity-count').textContent = `(${ents.size.toLocaleString('en')})`;
  if (selectedMoved) selectedChanged(true);
  pump();
}

function addEntity(id) {
  state.entities.set(id, { id, name: null, parent: null, local: null, fetched: false, stale: false, readAt: 0 });
  queue.push(id);
  listDirty = true;
  scheduleList();
}

function removeEntity(id) {
  if (!state.entities.delete(id)) return;
  view.remove(id);
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
}

async function fetchEntity(id) {
  const world = state.world;
  try {
    const r = await wconn.call('transform.get', { world, entity: id });
    const ent = state.entities.get(id);
    if (state.world !== world || !ent) return;
    ent.name = r.name === undefined ? null : r.name;
    ent.parent = r.parent;
    ent.local = Array.from(matrixOf(r.local));
    ent.fetched = true;
    ent.stale = false;
    ent.readAt = performance.now();
    view.setParent(id, r.parent || 0);
    listDirty = true;
    scheduleList();
    if (id === state.selected) showSelected();
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

function renderList() {
  if (listDirty) {
    listDirty = false;
    const q = $('filter').value.trim().toLowerCase();
    rows = [];
    for (const ent of state.entities.values())
      if (!q || String(ent.id).startsWith(q) || (ent.name && ent.name.toLowerCase().includes(q)))
        rows.push(ent.id);
    rows.sort((a, b) => a - b);
    spacer.style.height = `${rows.length * ROW}px`;
  }
  const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 2);
  const last = Math.min(rows.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + 2);
  const pool = list.querySelectorAll('.row');
  let used = 0;
  for (let i = first; i < last; i++) {
    const ent = state.entities.get(rows[i]);
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
  if (id) selectedChanged(true);
}

function showSelected() {
  const ent = state.selected ? state.entities.get(state.selected) : null;
  $('selected').classList.toggle('hidden', !ent);
  $('selected-none').classList.toggle('hidden', !!ent);
  if (!ent) return;
  $('sel-name').textContent = label(ent);
  $('sel-id').textContent = `#${ent.id}`;
  const parent = ent.parent ? state.entities.get(ent.parent) : null;
  const a = $('sel-parent');
  a.textContent = ent.parent ? `${parent ? label(parent) : ''} #${ent.parent}` : ent.fetched ? 'none (a root)' : '…';
  a.dataset.entity = ent.parent || '';
  showMatrix($('sel-local'), ent.local);
  showMatrix($('sel-world'), view.matrix(ent.id));
}

$('sel-parent').addEventListener('click', (ev) => {
  ev.preventDefault();
  const id = Number(ev.target.dataset.entity);
  if (id) selectEntity(id);
});

// The selected entity's world matrix comes with the frames; its local matrix is read again
// when it moved, at most a few times a second.
let detailTimer = null, detailDue = false, detailBusy = false;

function selectedChanged(now) {
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
  if (detailBusy || !detailDue || !state.selected) return;
  detailBusy = true;
  detailDue = false;
  const id = state.selected, world = state.world;
  try {
    const r = await wconn.call('transform.get', { world, entity: id });
    const ent = state.entities.get(id);
    if (ent && state.world === world) {
      ent.name = r.name === undefined ? null : r.name;
      ent.parent = r.parent;
      ent.local = Array.from(matrixOf(r.local));
      ent.fetched = true;
      view.setParent(id, r.parent || 0);
      if (id === state.selected) showSelected();
    }
  } catch {
    // gone meanwhile
  }
  setTimeout(() => {
    detailBusy = false;
    refreshDetail();
  }, 250);
}

// ---- view controls -------------------------------------------------------------------------

$('fit').addEventListener('click', () => view.fit());
$('marker').addEventListener('input', (ev) => view.setMarkerScale(Number(ev.target.value)));

// What the page shows, for scripts and tests (read-only views of the state).
window.scened = {
  get status() { return state.status; },
  get version() { return state.version; },
  get worlds() { return state.worlds.map((w) => ({ ...w })); },
  get node() { return state.node; },
  get nodes() { return state.nodes.map((n) => ({ ...n })); },
  get owner() { return state.owner; },
  get world() { return state.world; },
  get entityCount() { return state.entities.size; },
  get framesReceived() { return state.framesReceived; },
  get lastTick() { return state.lastTick; },
  get streamHz() { return state.hz; },
  get matrices() { return conn.client ? conn.client.matrices : null; },
  get frameMs() { return state.frameMs; },
  get pendingReads() { return queue.length - queueHead + inflight; },
  get renderMs() { return view.renderMs; },
  get renderedFrames() { return view.frames; },
  get webgl() { return view.ok; },
  get selected() { return state.selected; },
  entity(id) {
    const ent = state.entities.get(id);
    return ent ? { id, name: ent.name, parent: ent.parent, local: ent.local, world: view.matrix(id) } : null;
  },
  matrix: (id) => view.matrix(id),
  screenPosition: (id) => view.screenPosition(id),
  // Draws now (the canvas can be read back until the browser composites it).
  redraw: () => view.render(),
  findByName(name) {
    for (const ent of state.entities.values()) if (ent.name === name) return ent.id;
    return 0;
  },
  selectWorld,
  selectEntity,
};

conn.open(url);

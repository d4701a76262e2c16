// scened's staging view, on scened's JavaScript client module (scened.mjs). One WebSocket to
// the daemon (GET /ws on the page's own host; wss:// when the page came over HTTPS): hello with
// matrices in b64 (with a token when the daemon asks for one; its answer says what the token may
// do, shown as "access"), a subscription to the chosen world whose mirror (one Float32Array
// of the daemon's float32 world matrices, kept from the b64 frames) the 3D view draws,
// transform.get for names, parents and the selected entity's local matrix, and once a second
// info and world.list for the figures in the header and the world list. Nothing is fetched
// from anywhere else.
import { Client, matrixOf } from './scened.mjs';
import { View } from './view.js';

const $ = (id) => document.getElementById(id);
const ROW = 22;          // px, the entity list's row height (see style.css)
const STREAM_HZ = 30;    // frames per second asked of the subscription, at most
const STREAM_SHARE = 0.35; // of the page's time, at most, for reading frames (the rest draws)
const GETS_IN_FLIGHT = 64;
const RECHECK_MAX = 32;  // entries of a frame whose entities' parents are read again
const RECHECK_MS = 2000;
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
  clearInterval(pollTimer);
  pollTimer = null;
  state.sub = 0;
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
  let info, list;
  try {
    [info, list] = await Promise.all([conn.call('info'), conn.call('world.list')]);
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
    li.lastChild.textContent = w.transforms.toLocaleString('en');
    li.classList.toggle('selected', w.name === state.world);
  }
  while (ul.children.length > worlds.length) ul.lastChild.remove();
}

// ---- the chosen world ----------------------------------------------------------------------

let fitPending = false;

async function selectWorld(name) {
  if (!name || name === state.world) return;
  const old = state.sub;
  state.world = name;
  state.sub = 0;
  clearWorld();
  fitPending = true;
  history.replaceState(null, '', `#world=${encodeURIComponent(name)}${MATRICES === 'json' ? '&matrices=json' : ''}`);
  $('view-world').textContent = name;
  $('view-empty').classList.add('hidden');
  for (const li of $('worlds').children) li.classList.toggle('selected', li.dataset.world === name);
  if (old) old.unsubscribe().catch(() => {});
  try {
    state.hz = STREAM_HZ;
    state.frameMs = 0;
    const sub = await subscribe(name, state.hz);
    if (state.world === name) state.sub = sub;
    else sub.unsubscribe().catch(() => {});
  } catch (e) {
    if (state.world === name && e.code !== 'CLOSED') worldGone(`${name}: ${e.message}`);
  }
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
  clearWorld();
  $('view-world').textContent = '';
  $('view-empty').textContent = why;
  $('view-empty').classList.remove('hidden');
  poll();
}

// A subscription whose frames (b64, decoded by scened.mjs into its mirror) reach the page.
function subscribe(world, hz) {
  if (!conn.client) return Promise.reject(Object.assign(new Error('not connected'), { code: 'CLOSED' }));
  conn.sent++;
  return conn.client.subscribe(world, {
    hz,
    onFrame: (frame, sub) => onFrame(frame, sub),
    onEnd: (reason, ev) => {
      if (isCurrent(ev)) {
        if (reason === 'world_destroyed') worldGone(`World ${ev.world} was destroyed.`);
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
    const r = await conn.call('transform.get', { world, entity: id });
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
    const r = await conn.call('transform.get', { world, entity: id });
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
  get access() { return state.access && { ...state.access }; },
  get worlds() { return state.worlds.map((w) => ({ ...w })); },
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

// The 3D view of one world: every transform drawn at its world matrix as a small axis marker
// (x red, y green, z blue) with a grey line to its parent, under an orbit camera. The matrices
// are those of the world's mirror (scened.mjs keeps it from the subscription's frames: one
// Float32Array, the daemon's float32 values); all markers are one LineSegments draw call whose
// vertex buffer is rewritten when something moved, so 10,000 moving transforms cost one buffer
// upload per rendered frame. The staging view's timeline hands it another mirror (the world at
// a past tick) with the parents of that tick, and the live one back.
// While the page follows an entity, the scope of its subscription by distance (another mirror)
// is drawn over the live world: those entities as larger cyan points, and the region as a
// circle of its radius around the followed entity, facing the camera (the sphere's outline),
// with a dashed one at radius + margin, where what is in scope is let go.
// Tracking keeps the transforms in view as they move (Fit frames them once): 'all' frames every
// transform drawn at each render, 'selected' keeps the selected one at the centre at the
// user's distance. Zooming or panning by hand ends it.
import * as THREE from 'three';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';
import { Mirror } from './scened.mjs';
import { MIN_RADIUS, fitDistance, originsBox } from './framing.js';

const VERTS = 8; // per transform: three axes (2 vertices each) and the line to the parent
const SCOPE_COLOR = 0x3ce6e6;
const SCOPE_EDGE_COLOR = 0x2a9aa0;
const CIRCLE_SEGMENTS = 128;
// Without an animation frame for this long (under a headless browser's virtual time they
// barely come), a timer draws what changed; a hidden tab draws nothing.
const FRAME_FALLBACK_MS = 200;

// A circle of radius 1 in the xy plane, as a line loop.
function unitCircle(material) {
  const pts = new Float32Array(CIRCLE_SEGMENTS * 3);
  for (let i = 0; i < CIRCLE_SEGMENTS; i++) {
    const a = (i / CIRCLE_SEGMENTS) * Math.PI * 2;
    pts[i * 3] = Math.cos(a);
    pts[i * 3 + 1] = Math.sin(a);
  }
  const g = new THREE.BufferGeometry();
  g.setAttribute('position', new THREE.BufferAttribute(pts, 3));
  const loop = new THREE.LineLoop(g, material);
  loop.computeLineDistances();
  loop.frustumCulled = false;
  return loop;
}

export class View {
  constructor(host, { onPick, onTrack } = {}) {
    this.host = host;
    this.onPick = onPick;
    this.onTrack = onTrack;   // called with 'off' when a zoom or pan by hand ends tracking
    this.track = 'off';       // 'all', 'selected' or 'off'
    this.box = new THREE.Box3();
    this.sphere = new THREE.Sphere();
    this.floorCenter = new THREE.Vector3();
    this.mirror = new Mirror(); // what is drawn: ids[slot] at matrices[16 * slot]
    this.liveParents = new Map(); // entity id -> parent entity id (known ones, now)
    this.parents = this.liveParents; // those of the mirror drawn
    this.cap = 0;
    this.dirty = true;
    this.markerScale = 0;     // log10 of the user's factor (the slider)
    this.baseLength = 1;      // marker length from the scene's size
    this.selected = 0;
    this.scope = null;        // { mirror, center, radius, margin } while following, else null
    this.scopeCap = 0;
    this.sceneRadius = 0;     // of the transforms framed by the last fit (or floor placed by tracking)
    this.frames = 0;          // frames rendered
    this.renderMs = 0;
    this.lastAnimationFrame = 0;
    this.size = [0, 0];
    this.ok = false;
    try {
      this.renderer = new THREE.WebGLRenderer({ antialias: true, powerPreference: 'high-performance' });
    } catch (e) {
      this.error = e;
      return;
    }
    this.ok = true;
    const r = this.renderer;
    r.setPixelRatio(Math.min(window.devicePixelRatio || 1, 2));
    r.setClearColor(0x101318);
    host.appendChild(r.domElement);

    this.scene = new THREE.Scene();
    this.camera = new THREE.PerspectiveCamera(50, 1, 0.01, 1e6);
    this.camera.position.set(12, 9, 14);
    this.controls = new OrbitControls(this.camera, r.domElement);
    this.controls.enableDamping = true;
    this.controls.addEventListener('change', () => { this.dirty = true; });

    this.grid = new THREE.GridHelper(20, 20, 0x39404c, 0x252a33);
    this.scene.add(this.grid);

    this.geometry = new THREE.BufferGeometry();
    this.lines = new THREE.LineSegments(
      this.geometry, new THREE.LineBasicMaterial({ vertexColors: true }));
    this.lines.frustumCulled = false;
    this.scene.add(this.lines);

    this.pointGeometry = new THREE.BufferGeometry();
    this.points = new THREE.Points(
      this.pointGeometry, new THREE.PointsMaterial({ color: 0xc8ced8, size: 3, sizeAttenuation: false }));
    this.points.frustumCulled = false;
    this.scene.add(this.points);

    this.highlight = new THREE.Mesh(
      new THREE.SphereGeometry(1, 16, 12),
      new THREE.MeshBasicMaterial({ color: 0xf5c542, wireframe: true }));
    this.highlight.visible = false;
    this.scene.add(this.highlight);

    this.scopeGeometry = new THREE.BufferGeometry();
    this.scopePoints = new THREE.Points(
      this.scopeGeometry, new THREE.PointsMaterial({ color: SCOPE_COLOR, size: 7, sizeAttenuation: false }));
    this.scopePoints.frustumCulled = false;
    this.scopePoints.visible = false;
    this.scene.add(this.scopePoints);

    this.circle = new THREE.Group(); // turned to face the camera at each render
    this.circleInner = unitCircle(new THREE.LineBasicMaterial({ color: SCOPE_COLOR }));
    this.circleOuter = unitCircle(new THREE.LineDashedMaterial({ color: SCOPE_EDGE_COLOR, dashSize: 0.06, gapSize: 0.05 }));
    this.circle.add(this.circleInner, this.circleOuter);
    this.circle.visible = false;
    this.scene.add(this.circle);

    this.grow(1024);
    this.resize();
    new ResizeObserver(() => this.resize()).observe(host);
    this.raycaster = new THREE.Raycaster();
    let down = null;
    const touches = new Set();
    r.domElement.addEventListener('pointerdown', (e) => {
      down = [e.clientX, e.clientY];
      // what OrbitControls does with it: the middle button zooms; the right one, or the left
      // with ctrl, meta or shift, pans; two fingers zoom and pan
      if (e.pointerType === 'touch') {
        touches.add(e.pointerId);
        if (touches.size > 1) this.byHand('pan');
      } else if (e.button === 1) this.byHand('zoom');
      else if (e.button === 2 || (e.button === 0 && (e.ctrlKey || e.metaKey || e.shiftKey))) this.byHand('pan');
    });
    for (const type of ['pointerup', 'pointercancel']) r.domElement.addEventListener(type, (e) => touches.delete(e.pointerId));
    r.domElement.addEventListener('wheel', () => this.byHand('zoom'), { passive: true });
    r.domElement.addEventListener('pointerup', (e) => {
      if (down && Math.hypot(e.clientX - down[0], e.clientY - down[1]) < 4) this.pick(e);
      down = null;
    });
    const loop = () => {
      requestAnimationFrame(loop);
      this.lastAnimationFrame = performance.now();
      this.controls.update();
      if (this.dirty) this.render();
    };
    requestAnimationFrame(loop);
    setInterval(() => {
      if (this.dirty && !document.hidden && performance.now() - this.lastAnimationFrame > FRAME_FALLBACK_MS) this.render();
    }, FRAME_FALLBACK_MS / 2);
  }

  grow(need) {
    if (need <= this.cap || !this.ok) return;
    let cap = Math.max(this.cap * 2, 1024);
    while (cap < need) cap *= 2;
    this.cap = cap;
    this.positions = new Float32Array(cap * VERTS * 3);
    const colors = new Float32Array(cap * VERTS * 3);
    const pattern = [
      [0.95, 0.33, 0.3], [0.95, 0.33, 0.3],   // x
      [0.36, 0.85, 0.42], [0.36, 0.85, 0.42], // y
      [0.35, 0.55, 1.0], [0.35, 0.55, 1.0],   // z
      [0.45, 0.48, 0.55], [0.3, 0.32, 0.38],  // to the parent
    ];
    for (let s = 0; s < cap; s++)
      for (let v = 0; v < VERTS; v++) colors.set(pattern[v], (s * VERTS + v) * 3);
    this.geometry.setAttribute('position', new THREE.BufferAttribute(this.positions, 3).setUsage(THREE.DynamicDrawUsage));
    this.geometry.setAttribute('color', new THREE.BufferAttribute(colors, 3));
    this.pointPositions = new Float32Array(cap * 3);
    this.pointGeometry.setAttribute('position', new THREE.BufferAttribute(this.pointPositions, 3).setUsage(THREE.DynamicDrawUsage));
    this.dirty = true;
  }

  get count() { return this.mirror.size; }

  has(id) { return this.mirror.has(id); }

  // The world matrix of id (16 numbers, column-major: the daemon's float32 values), or null.
  matrix(id) {
    const m = this.mirror.matrix(id);
    return m ? Array.from(m) : null;
  }

  // Draws this mirror from now on (a new subscription's, or the world at a past tick with the
  // parents of then: an id -> parent id map).
  setMirror(mirror, parents = this.liveParents) {
    this.mirror = mirror;
    this.parents = parents;
    this.dirty = true;
  }

  // The mirror changed (a frame was applied).
  changed() { this.dirty = true; }

  // What is in scope while following (scope: { mirror, center, radius, margin }), or null.
  // Drawn over the live world only, not over a past tick.
  setScope(scope) {
    this.scope = scope;
    this.dirty = true;
  }

  // The scope drawn now, if any.
  get drawnScope() {
    return this.scope && this.parents === this.liveParents ? this.scope : null;
  }

  // The followed entity's position: from the scope (it is in its own scope), else the world.
  scopeCenter() {
    const scope = this.drawnScope;
    if (!scope) return null;
    const m = scope.mirror.matrix(scope.center) || this.mirror.matrix(scope.center);
    return m ? new THREE.Vector3(m[12], m[13], m[14]) : null;
  }

  // The live parent of id (drawn when the live mirror is).
  setParent(id, parent) {
    if ((this.liveParents.get(id) || 0) !== (parent || 0)) {
      this.liveParents.set(id, parent || 0);
      if (this.parents === this.liveParents) this.dirty = true;
    }
  }

  remove(id) {
    this.liveParents.delete(id);
    if (this.parents === this.liveParents) this.dirty = true;
  }

  clear() {
    this.mirror = new Mirror();
    this.liveParents.clear();
    this.parents = this.liveParents;
    this.scope = null;
    this.select(0);
    this.dirty = true;
  }

  select(id) {
    this.selected = id;
    this.dirty = true;
  }

  setMarkerScale(f) {
    this.markerScale = f;
    this.dirty = true;
  }

  // Frames every transform: the camera looks at their centre from a distance that fits them.
  fit() {
    if (!this.ok) return;
    const n = this.mirror.size;
    const box = originsBox(this.mirror.matrices, n, this.box);
    if (n === 0) box.set(new THREE.Vector3(-5, -5, -5), new THREE.Vector3(5, 5, 5));
    const sphere = box.getBoundingSphere(this.sphere);
    this.placeFloor(box, sphere, n);
    const dir = this.camera.position.clone().sub(this.controls.target).normalize();
    if (!isFinite(dir.x) || dir.lengthSq() === 0) dir.set(0.6, 0.45, 0.7).normalize();
    this.controls.target.copy(sphere.center);
    this.camera.position.copy(sphere.center).addScaledVector(dir, fitDistance(this.camera, this.sceneRadius));
    this.dirty = true;
  }

  // The scale of the scene from the transforms framed: marker length, clipping planes, and a
  // floor a little wider than them, in round steps, kept in front of the camera (lines that
  // reach behind it are clipped badly by some software renderers).
  placeFloor(box, sphere, n) {
    const radius = Math.max(sphere.radius, MIN_RADIUS);
    this.sceneRadius = radius;
    this.floorCenter.copy(sphere.center);
    // Markers about a third of the typical spacing between transforms.
    this.baseLength = Math.max(radius / (3 * Math.cbrt(Math.max(n, 1))), 0.02);
    this.camera.near = radius / 1000;
    this.camera.far = radius * 100;
    this.camera.updateProjectionMatrix();
    const step = Math.pow(10, Math.floor(Math.log10(radius / 4)));
    const cells = Math.min(Math.ceil((radius * 3) / step / 2) * 2, 200);
    this.scene.remove(this.grid);
    this.grid.geometry.dispose();
    this.grid = new THREE.GridHelper(cells * step, cells, 0x39404c, 0x252a33);
    this.grid.position.set(Math.round(sphere.center.x / step) * step, box.min.y, Math.round(sphere.center.z / step) * step);
    this.scene.add(this.grid);
  }

  // 'all', 'selected' or 'off' (see the top of this file).
  setTrack(mode) {
    this.track = mode;
    this.dirty = true;
  }

  // A zoom or a pan by hand ('zoom' or 'pan') ends tracking where it would be undone at the
  // next frame: every one while tracking all, a pan while tracking the selected entity.
  byHand(kind) {
    if (this.track === 'all' || (this.track === 'selected' && kind === 'pan')) {
      this.track = 'off';
      if (this.onTrack) this.onTrack('off');
    }
  }

  // Tracking, before each render: the camera moves with what it tracks (turned and at the
  // distance it was); tracking all, it backs off at once when the transforms would not fit and
  // comes closer, over a few frames, when they fill far less than the view.
  keepInView() {
    const n = this.mirror.size;
    if (this.track === 'off' || n === 0) return;
    const m = this.mirror.matrices, target = this.controls.target, camera = this.camera;
    const slot = this.track === 'selected' && this.selected ? this.mirror.slots.get(this.selected) : undefined;
    let box = null, sphere;
    if (slot !== undefined) {
      sphere = this.sphere.set(new THREE.Vector3(m[slot * 16 + 12], m[slot * 16 + 13], m[slot * 16 + 14]), 0);
    } else {
      box = originsBox(m, n, this.box);
      sphere = box.getBoundingSphere(this.sphere);
    }
    const offset = camera.position.clone().sub(target);
    target.copy(sphere.center);
    if (box) {
      const radius = Math.max(sphere.radius, MIN_RADIUS);
      const need = fitDistance(camera, radius), dist = offset.length();
      if (dist < need) offset.setLength(need);
      else if (dist > need * 1.6) {
        offset.setLength(dist + (need * 1.2 - dist) * 0.25);
        this.dirty = true; // closer again at the next frame
      }
      // a new floor and scale when they grew or shrank a lot, or left the floor
      if (radius > this.sceneRadius * 1.5 || radius < this.sceneRadius / 3 ||
          sphere.center.distanceTo(this.floorCenter) > this.sceneRadius) this.placeFloor(box, sphere, n);
    }
    camera.position.copy(target).add(offset);
  }

  resize() {
    if (!this.ok) return;
    const w = Math.max(this.host.clientWidth, 1), h = Math.max(this.host.clientHeight, 1);
    if (w === this.size[0] && h === this.size[1]) return; // a new size clears the canvas
    this.size = [w, h];
    this.renderer.setSize(w, h, false);
    this.camera.aspect = w / h;
    this.camera.updateProjectionMatrix();
    this.dirty = true;
    // Drawn again at once (before the next paint): animation frames may not come (a headless
    // browser's virtual time), and the cleared canvas would be what a picture shows.
    if (this.frames > 0) this.render();
  }

  rebuild() {
    const mirror = this.mirror, n = mirror.size, m = mirror.matrices, ids = mirror.ids;
    this.grow(n);
    const pos = this.positions, pts = this.pointPositions, parents = this.parents, slots = mirror.slots;
    const len = this.baseLength * Math.pow(10, this.markerScale);
    for (let s = 0; s < n; s++) {
      const o = s * 16, v = s * VERTS * 3;
      const x = m[o + 12], y = m[o + 13], z = m[o + 14];
      for (let a = 0; a < 3; a++) {
        const ax = m[o + a * 4], ay = m[o + a * 4 + 1], az = m[o + a * 4 + 2];
        const norm = Math.hypot(ax, ay, az) || 1, k = len / norm;
        const b = v + a * 6;
        pos[b] = x; pos[b + 1] = y; pos[b + 2] = z;
        pos[b + 3] = x + ax * k; pos[b + 4] = y + ay * k; pos[b + 5] = z + az * k;
      }
      const parent = parents.get(ids[s]);
      const ps = parent ? slots.get(parent) : undefined;
      const b = v + 18;
      pos[b] = x; pos[b + 1] = y; pos[b + 2] = z;
      if (ps === undefined) {
        pos[b + 3] = x; pos[b + 4] = y; pos[b + 5] = z;
      } else {
        pos[b + 3] = m[ps * 16 + 12]; pos[b + 4] = m[ps * 16 + 13]; pos[b + 5] = m[ps * 16 + 14];
      }
      pts[s * 3] = x; pts[s * 3 + 1] = y; pts[s * 3 + 2] = z;
    }
    this.geometry.attributes.position.needsUpdate = true;
    this.geometry.setDrawRange(0, n * VERTS);
    this.pointGeometry.attributes.position.needsUpdate = true;
    this.pointGeometry.setDrawRange(0, n);
    const sel = this.selected ? slots.get(this.selected) : undefined;
    this.highlight.visible = sel !== undefined;
    if (sel !== undefined) {
      this.highlight.position.set(m[sel * 16 + 12], m[sel * 16 + 13], m[sel * 16 + 14]);
      this.highlight.scale.setScalar(len * 0.6);
    }
    this.rebuildScope();
  }

  // The scope's points (their matrices as the scope's subscription has them) and the circle.
  rebuildScope() {
    const scope = this.drawnScope;
    const center = this.scopeCenter();
    this.scopePoints.visible = !!scope;
    this.circle.visible = !!center;
    if (!scope) return;
    const n = scope.mirror.size, m = scope.mirror.matrices;
    if (n > this.scopeCap) {
      this.scopeCap = Math.max(n, 2 * this.scopeCap, 256);
      this.scopePositions = new Float32Array(this.scopeCap * 3);
      this.scopeGeometry.setAttribute('position', new THREE.BufferAttribute(this.scopePositions, 3).setUsage(THREE.DynamicDrawUsage));
    }
    const pts = this.scopePositions;
    for (let s = 0; s < n; s++) {
      pts[s * 3] = m[s * 16 + 12];
      pts[s * 3 + 1] = m[s * 16 + 13];
      pts[s * 3 + 2] = m[s * 16 + 14];
    }
    if (this.scopeGeometry.attributes.position) this.scopeGeometry.attributes.position.needsUpdate = true;
    this.scopeGeometry.setDrawRange(0, n);
    if (center) {
      this.circle.position.copy(center);
      this.circleInner.scale.setScalar(scope.radius);
      this.circleOuter.scale.setScalar(scope.radius + scope.margin);
      this.circleOuter.visible = scope.margin > 0;
    }
  }

  render() {
    if (!this.ok) return;
    const t0 = performance.now();
    this.dirty = false;
    this.keepInView();
    this.rebuild();
    this.circle.quaternion.copy(this.camera.quaternion);
    this.renderer.render(this.scene, this.camera);
    this.frames++;
    this.renderMs = this.renderMs * 0.9 + (performance.now() - t0) * 0.1;
  }

  pick(e) {
    if (!this.ok || !this.onPick || this.mirror.size === 0) return;
    const rect = this.renderer.domElement.getBoundingClientRect();
    const ndc = new THREE.Vector2(
      ((e.clientX - rect.left) / rect.width) * 2 - 1, -((e.clientY - rect.top) / rect.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    // A few pixels around the pointer, in world units at the target's distance.
    const dist = this.camera.position.distanceTo(this.controls.target);
    this.raycaster.params.Points.threshold =
      (6 / rect.height) * 2 * dist * Math.tan((this.camera.fov * Math.PI) / 360);
    this.pointGeometry.computeBoundingSphere();
    let best = null;
    for (const hit of this.raycaster.intersectObject(this.points))
      if (hit.index < this.mirror.size && (!best || hit.distanceToRay < best.distanceToRay)) best = hit;
    if (best) this.onPick(this.mirror.ids[best.index]);
  }

  // The region's circle on the screen, in CSS pixels from the canvas' top left: its center and
  // the radii of the circle (radius) and the dashed one (radius + margin); null when none.
  scopeCircle() {
    const scope = this.drawnScope, center = this.scopeCenter();
    if (!this.ok || !center) return null;
    this.camera.updateMatrixWorld();
    const rect = this.renderer.domElement.getBoundingClientRect();
    const toScreen = (v) => {
      const p = v.clone().project(this.camera);
      return { x: ((p.x + 1) / 2) * rect.width, y: ((1 - p.y) / 2) * rect.height };
    };
    const right = new THREE.Vector3().setFromMatrixColumn(this.camera.matrixWorld, 0).normalize();
    const c = toScreen(center);
    const edge = (r) => {
      const e = toScreen(center.clone().addScaledVector(right, r));
      return Math.hypot(e.x - c.x, e.y - c.y);
    };
    return { x: c.x, y: c.y, radius: edge(scope.radius), outer: edge(scope.radius + scope.margin) };
  }

  // Where id's origin is drawn, in CSS pixels from the canvas' top left; null when not shown.
  screenPosition(id) {
    const s = this.mirror.slots.get(id);
    if (!this.ok || s === undefined) return null;
    const m = this.mirror.matrices;
    this.camera.updateMatrixWorld(); // the camera as it is now (fit moves it before a render)
    const v = new THREE.Vector3(m[s * 16 + 12], m[s * 16 + 13], m[s * 16 + 14]).project(this.camera);
    if (Math.abs(v.x) > 1 || Math.abs(v.y) > 1 || Math.abs(v.z) > 1) return null;
    const rect = this.renderer.domElement.getBoundingClientRect();
    return { x: ((v.x + 1) / 2) * rect.width, y: ((1 - v.y) / 2) * rect.height };
  }
}

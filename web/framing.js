// Framing for the 3D view's camera: the bounds of the transforms drawn and the distance at
// which a perspective camera sees a sphere whole. Fit uses them once; tracking at each render.
import * as THREE from 'three';

// The smallest radius framed: one transform, or several at one point, still fill a view.
export const MIN_RADIUS = 1;

// box, set to the bounds of the origins of the first n matrices (16 floats each, column-major).
export function originsBox(matrices, n, box = new THREE.Box3()) {
  let x0 = Infinity, y0 = Infinity, z0 = Infinity, x1 = -Infinity, y1 = -Infinity, z1 = -Infinity;
  for (let o = 12, end = n * 16; o < end; o += 16) {
    const x = matrices[o], y = matrices[o + 1], z = matrices[o + 2];
    if (x < x0) x0 = x;
    if (x > x1) x1 = x;
    if (y < y0) y0 = y;
    if (y > y1) y1 = y;
    if (z < z0) z0 = z;
    if (z > z1) z1 = z;
  }
  box.min.set(x0, y0, z0);
  box.max.set(x1, y1, z1);
  return box;
}

// How far from a sphere's centre camera must stand to see all of it: the narrower of its two
// fields of view decides (a tall, narrow view needs more room than a wide one).
export function fitDistance(camera, radius) {
  const half = (camera.fov * Math.PI) / 360;
  const narrow = Math.min(half, Math.atan(Math.tan(half) * camera.aspect));
  return Math.max(radius * 2.6, (radius / Math.sin(narrow)) * 1.05);
}

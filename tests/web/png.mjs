// A PNG reader for the screenshots the browser tests take (Chromium writes 8-bit RGB or RGBA,
// not interlaced): the pixels as RGBA bytes, and counts of what they show.
import { inflateSync } from 'node:zlib';

// { width, height, data: RGBA bytes, row by row }.
export function decodePng(buf) {
  if (buf.toString('latin1', 1, 4) !== 'PNG') throw new Error('not a PNG');
  let p = 8, width = 0, height = 0, type = 0, depth = 0, interlace = 0;
  const idat = [];
  while (p < buf.length) {
    const len = buf.readUInt32BE(p), kind = buf.toString('latin1', p + 4, p + 8), data = buf.subarray(p + 8, p + 8 + len);
    if (kind === 'IHDR') {
      [width, height, depth, type, interlace] = [data.readUInt32BE(0), data.readUInt32BE(4), data[8], data[9], data[12]];
    } else if (kind === 'IDAT') idat.push(data);
    else if (kind === 'IEND') break;
    p += 12 + len;
  }
  const bpp = { 2: 3, 6: 4 }[type];
  if (depth !== 8 || !bpp || interlace) throw new Error(`unsupported PNG: type ${type}, depth ${depth}, interlace ${interlace}`);
  const raw = inflateSync(Buffer.concat(idat)), stride = width * bpp, out = Buffer.alloc(width * height * 4);
  let prev = Buffer.alloc(stride), cur = Buffer.alloc(stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)], line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? cur[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
      let v = line[i];
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const q = a + b - c, pa = Math.abs(q - a), pb = Math.abs(q - b), pc = Math.abs(q - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      cur[i] = v & 255;
    }
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 4;
      out[o] = cur[x * bpp];
      out[o + 1] = cur[x * bpp + 1];
      out[o + 2] = cur[x * bpp + 2];
      out[o + 3] = bpp === 4 ? cur[x * bpp + 3] : 255;
    }
    [prev, cur] = [cur, prev];
  }
  return { width, height, data: out };
}

// The box of the pixels of exactly colour [r, g, b]: { x0, y0, x1, y1, count }, or null.
export function colourBox(img, [r, g, b]) {
  let x0 = Infinity, y0 = Infinity, x1 = -1, y1 = -1, count = 0;
  for (let y = 0; y < img.height; y++)
    for (let x = 0; x < img.width; x++) {
      const o = (y * img.width + x) * 4;
      if (img.data[o] !== r || img.data[o + 1] !== g || img.data[o + 2] !== b) continue;
      count++;
      x0 = Math.min(x0, x);
      y0 = Math.min(y0, y);
      x1 = Math.max(x1, x);
      y1 = Math.max(y1, y);
    }
  return count ? { x0, y0, x1, y1, count } : null;
}

// Pixels of a clearly red, green or blue hue (the x, y and z axes of the markers) within box
// (default: all): { red, green, blue }.
export function axisPixels(img, box = { x0: 0, y0: 0, x1: img.width - 1, y1: img.height - 1 }) {
  const n = { red: 0, green: 0, blue: 0 }, names = ['red', 'green', 'blue'];
  for (let y = box.y0; y <= box.y1; y++)
    for (let x = box.x0; x <= box.x1; x++) {
      const o = (y * img.width + x) * 4, c = [img.data[o], img.data[o + 1], img.data[o + 2]];
      const top = c.indexOf(Math.max(...c)), others = c.filter((_, k) => k !== top);
      if (c[top] > 110 && c[top] > 1.25 * Math.max(...others)) n[names[top]]++;
    }
  return n;
}

// Deterministic input files for the benchmark (node only): synthetic screenshot PNGs of a chosen
// size, written into the test build so the service worker can fetch them, and the JSON export of
// the saved sessions that `keepsake-host import` loads.
//
// Realism caveat: a synthetic "screenshot" is flat UI colour plus one panel of seeded noise sized
// so the file has the requested byte count. Real screenshots compress better (less noise, more
// text), so the same file size here means fewer pixels of real content; decode cost follows the
// compressed bytes (performance.md §1).

import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

import { rng, savedSession, sessionsDocument } from './ext/gen.js';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function pngChunk(type, data) {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(Buffer.concat([head.subarray(4), data])));
  return Buffer.concat([head, data, crc]);
}

/**
 * A screenshot-like RGB PNG of about `bytes` bytes: a light background with rows of dark "text"
 * runs, and a panel of seeded noise whose height sets the file size.
 * @param {{seed: number, bytes: number, width?: number, height?: number}} o
 * @returns {Buffer}
 */
export function screenshotPng({ seed, bytes, width = 1920, height = 1080 }) {
  const rand = rng(seed);
  const stride = width * 3 + 1;
  const raw = Buffer.alloc(stride * height, 0xf4);
  const panelX = Math.floor(width * 0.35);
  const panelW = width - panelX - 16;
  const panelRows = Math.min(height - 16, Math.ceil(bytes / (panelW * 3)));
  const panelY = Math.floor((height - panelRows) / 2);
  for (let y = 0; y < height; y++) {
    const row = y * stride;
    raw[row] = 0; // filter: none
    if (y % 22 >= 6 && y % 22 <= 15) {
      // a line of "text" in the left column
      for (let x = 24; x < panelX - 24; x++) {
        if ((x * 7 + y * 3 + seed) % 11 < 5) raw.fill(0x30, row + 1 + x * 3, row + 4 + x * 3);
      }
    }
    if (y >= panelY && y < panelY + panelRows) {
      const start = row + 1 + panelX * 3;
      for (let i = 0; i < panelW * 3; i += 4) {
        const v = (rand() * 4294967296) >>> 0;
        raw.writeUInt32LE(v, start + i);
      }
      raw.fill(0xf4, start + panelW * 3, row + stride);
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  return Buffer.concat([
    PNG_SIGNATURE,
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', zlib.deflateSync(raw, { level: 6 })),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/**
 * Write every screenshot the scenarios need into `dir` as `<name>.png`.
 * @param {string} dir
 * @param {{name: string, seed: number, bytes: number}[]} specs
 * @returns {Record<string, number>} name → file size
 */
export function writeScreenshots(dir, specs) {
  fs.mkdirSync(dir, { recursive: true });
  const sizes = {};
  for (const s of specs) {
    const png = screenshotPng(s);
    fs.writeFileSync(path.join(dir, `${s.name}.png`), png);
    sizes[s.name] = png.length;
  }
  return sizes;
}

/**
 * Write the JSON export of `count` sessions of `chars` chars each to `file` (streamed session by
 * session: 1,000 sessions of 100K chars are ~200 MB of JSON).
 * @param {string} file
 * @param {{seed: number, count: number, chars: number}} o
 */
export function writeSessionsExport(file, { seed, count, chars }) {
  const head = sessionsDocument({ seed, count: 0, chars });
  const fd = fs.openSync(file, 'w');
  try {
    const open = JSON.stringify({ ...head, sessions: [] }).replace(/"sessions":\[\],"images":\{\}\}$/, '"sessions":[');
    fs.writeSync(fd, open);
    for (let i = 0; i < count; i++) {
      fs.writeSync(fd, (i ? ',' : '') + JSON.stringify(savedSession({ seed, index: i, chars })));
    }
    fs.writeSync(fd, '],"images":{}}');
  } finally {
    fs.closeSync(fd);
  }
}

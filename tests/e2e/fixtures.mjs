// Test inputs made on the fly: PNG files (no image library: zlib + CRC-32 by hand) and a local
// web page with an article and a <video> element, served from 127.0.0.1.

import http from 'node:http';
import zlib from 'node:zlib';

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

function crc32(buf) {
  let c = 0xffffffff;
  for (let i = 0; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}

/** A deterministic xorshift32 generator. */
function rng(seed) {
  let x = seed >>> 0 || 0x9e3779b9;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

/**
 * An RGB PNG. `noise` (0–1) mixes random bits into a colour gradient: 0 compresses to almost
 * nothing, 1 is incompressible (≈ 3 bytes a pixel), so the file size can be chosen.
 */
export function makePng(width, height, { seed = 1, noise = 0, level = 1 } = {}) {
  const next = rng(seed);
  const row = width * 3 + 1;
  const raw = Buffer.alloc(row * height);
  const noiseMask = noise >= 1 ? 0xff : Math.round(noise * 255);
  for (let y = 0; y < height; y++) {
    raw[y * row] = 0; // filter: none
    for (let x = 0; x < width; x++) {
      const o = y * row + 1 + x * 3;
      const r = next();
      raw[o] = ((x * 255) / width) ^ (r & noiseMask);
      raw[o + 1] = ((y * 255) / height) ^ ((r >>> 8) & noiseMask);
      raw[o + 2] = ((seed * 53) & 0xff) ^ ((r >>> 16) & noiseMask);
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type: RGB
  ihdr[10] = 0;
  ihdr[11] = 0;
  ihdr[12] = 0;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw, { level })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** An incompressible PNG of about `bytes` bytes (noise; square-ish). */
export function makeNoisePng(bytes, { seed = 1 } = {}) {
  const pixels = Math.ceil(bytes / 3);
  const w = Math.ceil(Math.sqrt(pixels * 1.5));
  const h = Math.ceil(pixels / w);
  return makePng(w, h, { seed, noise: 1, level: 1 });
}

export const dataUrl = (buf, mime = 'image/png') => `data:${mime};base64,${buf.toString('base64')}`;

/** The article on the test page (distinctive words the tests look for in the DB). */
export const ARTICLE_TITLE = 'The Lighthouse Keepers of Saltmarsh Point';
export const ARTICLE_WORD = 'quillwort';
export const ARTICLE_TEXT = [
  `For ninety years the lighthouse at Saltmarsh Point was kept by three families in turn.`,
  `Their logbooks record storms, shipwrecks and the slow spread of ${ARTICLE_WORD} along the tidal flats,`,
  `a fern-like plant that the keepers believed foretold a mild winter.`,
  `The last keeper, Edith Marrow, left in 1961 when the lamp was automated; her logbook ends with a`,
  `drawing of the lamp room and the words "all well, light burning".`,
  `Today the tower is a small museum with a video of the lamp turning, recorded before the restoration.`,
].join(' ');

/** HTML of the test page: an <article> and a <video> (no network: a tiny blank source). */
export function articleHtml() {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${ARTICLE_TITLE}</title>
<style>body{font:16px/1.5 serif;max-width:40em;margin:2em auto;padding:0 1em}</style></head>
<body>
<header><nav>Home · Museums · Coast</nav></header>
<article>
<h1>${ARTICLE_TITLE}</h1>
<p>${ARTICLE_TEXT}</p>
<p>Visitors can climb the 117 steps on weekends. The museum keeps the keepers' logbooks in a glass case.</p>
<video controls width="320" height="180" preload="none" poster=""></video>
</article>
<footer>© Coast museums</footer>
</body></html>`;
}

/**
 * Serve the test page (and any extra routes) on 127.0.0.1, a free port.
 * @returns {Promise<{url: string, origin: string, close: () => Promise<void>}>}
 */
export async function startPageServer(routes = {}) {
  const server = http.createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const r = routes[path];
    if (r) {
      res.writeHead(200, { 'content-type': r.type || 'text/html; charset=utf-8' });
      res.end(r.body);
      return;
    }
    if (path === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    if (path === '/' || path === '/article.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(articleHtml());
      return;
    }
    res.writeHead(404).end('not found');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  return {
    origin,
    url: `${origin}/article.html`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

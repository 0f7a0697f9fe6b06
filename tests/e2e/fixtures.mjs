// Test inputs made on the fly: PNG files (no image library: zlib + CRC-32 by hand) and a local
// web page with an article and a <video> element, served from 127.0.0.1.

import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
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
 * Answer one route `{type, body}`. Byte ranges (`Range: bytes=a-b`, one range) get a 206, as
 * Chromium needs them to make an http(s) media resource seekable (without them `video.seekable` is
 * empty and every seek snaps back to 0).
 */
function serveBody(req, res, r) {
  const buf = Buffer.isBuffer(r.body) ? r.body : Buffer.from(String(r.body ?? ''), 'utf8');
  const head = { 'content-type': r.type || 'text/html; charset=utf-8', 'accept-ranges': 'bytes' };
  const m = /^bytes=(\d*)-(\d*)$/.exec(String(req.headers.range || '').trim());
  if (!m || (m[1] === '' && m[2] === '')) {
    res.writeHead(200, { ...head, 'content-length': buf.length });
    res.end(req.method === 'HEAD' ? undefined : buf);
    return;
  }
  let start;
  let end;
  if (m[1] === '') {
    start = Math.max(0, buf.length - Number(m[2]));
    end = buf.length - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? buf.length - 1 : Math.min(Number(m[2]), buf.length - 1);
  }
  if (start >= buf.length || start > end) {
    res.writeHead(416, { ...head, 'content-range': `bytes */${buf.length}` });
    res.end();
    return;
  }
  res.writeHead(206, { ...head, 'content-range': `bytes ${start}-${end}/${buf.length}`, 'content-length': end - start + 1 });
  res.end(req.method === 'HEAD' ? undefined : buf.subarray(start, end + 1));
}

/**
 * A self-signed certificate for `hosts`, made by openssl in a temporary folder (the browser is
 * told to accept it: `--ignore-certificate-errors`).
 * @param {string[]} hosts
 * @returns {{key: Buffer, cert: Buffer}}
 */
export function testCertificate(hosts) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-e2e-cert-'));
  try {
    const san = hosts.map((h) => `DNS:${h}`).join(',');
    const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${hosts[0]}`, '-addext', `subjectAltName=${san}`, '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { encoding: 'utf8', timeout: 30_000 });
    if (r.status !== 0) throw new Error(`openssl could not make a test certificate: ${r.error?.message ?? r.stderr}`);
    return { key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Serve the test page (and any extra routes) on 127.0.0.1, a free port. `routes` maps a path to
 * `{type, body}` (string or Buffer), or to a function of the request's URL returning one, and is
 * read on every request, so a test may add routes later. With `tls` (from `testCertificate`) the
 * server speaks HTTPS. `requests` lists every URL asked for (path and query).
 * @returns {Promise<{url: string, origin: string, port: number, requests: string[], close: () => Promise<void>}>}
 */
export async function startPageServer(routes = {}, { tls = null } = {}) {
  const requests = [];
  const handler = (req, res) => {
    requests.push(req.url);
    const url = new URL(req.url, 'http://x');
    const pathname = url.pathname;
    const r = typeof routes[pathname] === 'function' ? routes[pathname](url) : routes[pathname];
    if (r) {
      serveBody(req, res, r);
      return;
    }
    if (pathname === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    if (pathname === '/' || pathname === '/article.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(articleHtml());
      return;
    }
    res.writeHead(404).end('not found');
  };
  const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = server.address().port;
  const origin = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  return {
    origin,
    port,
    requests,
    url: `${origin}/article.html`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// A real, playable, seekable video made offline: VP8 frames encoded by the browser (WebCodecs
// `VideoEncoder`, no real-time recording) and muxed here into a minimal WebM.
//
// Measured with Debian's Chromium 156 headless: `canPlayType('video/webm; codecs="vp8"')` is
// "probably"; `VideoEncoder` encodes VP8 in a secure context (http://127.0.0.1 counts) in ~0.2 s
// for 20 frames; the muxed file plays with the right duration; served WITH byte ranges the video's
// `seekable` is [0, duration] and `currentTime = 5` lands on 5 (served without ranges, `seekable`
// is [0, 0] and the seek snaps back to 0). A MediaRecorder clip (canvas.captureStream) also plays,
// but records in real time and reports `duration = Infinity` until read to the end.

/** EBML element size as a fixed 8-byte vint. */
function ebmlSize(n) {
  const b = Buffer.alloc(8);
  let v = BigInt(n);
  for (let i = 7; i >= 1; i--) {
    b[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  b[0] = 0x01 | Number(v);
  return b;
}
function ebmlId(id) {
  const hex = id.toString(16);
  return Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex');
}
const ebml = (id, payload) => Buffer.concat([ebmlId(id), ebmlSize(payload.length), payload]);
const ebmlUint = (id, n) => {
  let hex = n.toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  return ebml(id, Buffer.from(hex, 'hex'));
};
const ebmlStr = (id, s) => ebml(id, Buffer.from(s, 'utf8'));
const ebmlFloat = (id, x) => {
  const b = Buffer.alloc(8);
  b.writeDoubleBE(x);
  return ebml(id, b);
};

/**
 * A WebM file: one VP8 video track, one cluster per frame (every frame a keyframe), Duration in
 * Info and a Cues index so a player can seek without scanning.
 * @param {{width: number, height: number, durationMs: number, frames: {ms: number, data: Buffer}[]}} o
 */
export function muxWebm({ width, height, durationMs, frames }) {
  const header = ebml(
    0x1a45dfa3,
    Buffer.concat([
      ebmlUint(0x4286, 1), // EBMLVersion
      ebmlUint(0x42f7, 1), // EBMLReadVersion
      ebmlUint(0x42f2, 4), // EBMLMaxIDLength
      ebmlUint(0x42f3, 8), // EBMLMaxSizeLength
      ebmlStr(0x4282, 'webm'), // DocType
      ebmlUint(0x4287, 2), // DocTypeVersion
      ebmlUint(0x4285, 2), // DocTypeReadVersion
    ]),
  );
  const info = ebml(
    0x1549a966,
    Buffer.concat([
      ebmlUint(0x2ad7b1, 1_000_000), // TimecodeScale: ms
      ebmlFloat(0x4489, durationMs), // Duration
      ebmlStr(0x4d80, 'keepsake-e2e'), // MuxingApp
      ebmlStr(0x5741, 'keepsake-e2e'), // WritingApp
    ]),
  );
  const tracks = ebml(
    0x1654ae6b,
    ebml(
      0xae, // TrackEntry
      Buffer.concat([
        ebmlUint(0xd7, 1), // TrackNumber
        ebmlUint(0x73c5, 1), // TrackUID
        ebmlUint(0x83, 1), // TrackType: video
        ebmlStr(0x86, 'V_VP8'),
        ebml(0xe0, Buffer.concat([ebmlUint(0xb0, width), ebmlUint(0xba, height)])),
      ]),
    ),
  );
  let offset = info.length + tracks.length; // cluster positions are relative to the Segment data
  const clusters = [];
  const cues = [];
  for (const f of frames) {
    // SimpleBlock: track 1 (vint 0x81), timecode 0 relative to the cluster, flags: keyframe
    const block = Buffer.concat([Buffer.from([0x81, 0x00, 0x00, 0x80]), f.data]);
    const cluster = ebml(0x1f43b675, Buffer.concat([ebmlUint(0xe7, f.ms), ebml(0xa3, block)]));
    cues.push(ebml(0xbb, Buffer.concat([ebmlUint(0xb3, f.ms), ebml(0xb7, Buffer.concat([ebmlUint(0xf7, 1), ebmlUint(0xf1, offset)]))])));
    clusters.push(cluster);
    offset += cluster.length;
  }
  const segment = ebml(0x18538067, Buffer.concat([info, tracks, ...clusters, ebml(0x1c53bb6b, Buffer.concat(cues))]));
  return Buffer.concat([header, segment]);
}

/**
 * Encode a `seconds`-long clip (`fps` keyframes a second, each showing its frame number on a new
 * colour) with WebCodecs in `page` (a page of a secure origin) and mux it: a WebM Buffer.
 */
export async function makeWebmVideo(page, { width = 160, height = 90, fps = 2, seconds = 10 } = {}) {
  const chunks = await page.evaluate(
    async ({ width, height, fps, seconds }) => {
      const config = { codec: 'vp8', width, height, bitrate: 200_000, framerate: fps };
      if (typeof VideoEncoder === 'undefined') throw new Error('no WebCodecs VideoEncoder in this page');
      const support = await VideoEncoder.isConfigSupported(config);
      if (!support.supported) throw new Error('VP8 encoding is not supported by this browser');
      const out = [];
      let failure = null;
      const enc = new VideoEncoder({
        output: (chunk) => {
          const bytes = new Uint8Array(chunk.byteLength);
          chunk.copyTo(bytes);
          let bin = '';
          for (const b of bytes) bin += String.fromCharCode(b);
          out.push({ us: chunk.timestamp, key: chunk.type === 'key', b64: btoa(bin) });
        },
        error: (e) => {
          failure = e;
        },
      });
      enc.configure(config);
      const canvas = new OffscreenCanvas(width, height);
      const g = canvas.getContext('2d');
      for (let i = 0; i < fps * seconds; i++) {
        g.fillStyle = `hsl(${(i * 37) % 360}, 70%, 45%)`;
        g.fillRect(0, 0, width, height);
        g.fillStyle = '#fff';
        g.font = `${Math.round(height / 2)}px sans-serif`;
        g.fillText(`${(i / fps).toFixed(1)}s`, 6, Math.round(height * 0.65));
        const frame = new VideoFrame(canvas, { timestamp: Math.round((i * 1e6) / fps) });
        enc.encode(frame, { keyFrame: true });
        frame.close();
      }
      await enc.flush();
      enc.close();
      if (failure) throw failure;
      return out;
    },
    { width, height, fps, seconds },
  );
  if (chunks.length !== fps * seconds || !chunks.every((c) => c.key)) {
    throw new Error(`VP8 encoder gave ${chunks.length} chunks (${chunks.filter((c) => c.key).length} keyframes), wanted ${fps * seconds}`);
  }
  return muxWebm({
    width,
    height,
    durationMs: seconds * 1000,
    frames: chunks.map((c) => ({ ms: Math.round(c.us / 1000), data: Buffer.from(c.b64, 'base64') })),
  });
}

// ---------------------------------------------------------------------------------------------
// Pages with a video or a long article

/** A short article with a `<video>` playing `src` (id `clip`). */
export function videoPageHtml({ title = 'Lamp room restoration (video)', src = '/clip.webm' } = {}) {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title}</title></head>
<body>
<article>
<h1>${title}</h1>
<p>This short film shows the lamp room of the Saltmarsh Point lighthouse during its restoration:
the keepers' brass lamp is lifted out, cleaned and turned again for the first time since 1961.</p>
<video id="clip" src="${src}" preload="auto" controls muted width="320" height="180"></video>
<p>Recorded by the museum volunteers; the counter in the corner shows the seconds.</p>
</article>
</body></html>`;
}

/** The text of paragraph `i` of the long article (~`chars` chars, a distinctive marker first). */
export function logParagraph(i, chars = 1000) {
  const marker = `LOGBOOK-${String(i).padStart(3, '0')}`;
  const words = ['tide', 'lamp', 'wick', 'gale', 'cormorant', 'fog', 'brass', 'ledger', 'beacon', 'shoal', 'keeper', 'lens'];
  let s = `${marker}: on day ${i} the keeper wrote`;
  for (let n = 0; s.length < chars; n++) s += ` ${words[(i * 7 + n * 5) % words.length]}`;
  return `${s.slice(0, chars - 1)}.`;
}

/** A long article of `paragraphs` paragraphs of ~`chars` chars each (`LOGBOOK-001` …). */
export function longArticleHtml({ title = 'The Complete Logbooks of Saltmarsh Point', paragraphs = 30, chars = 1000 } = {}) {
  const ps = Array.from({ length: paragraphs }, (_, i) => `<p>${logParagraph(i + 1, chars)}</p>`).join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title}</title></head>
<body>
<article>
<h1>${title}</h1>
${ps}
</article>
</body></html>`;
}

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { createImageCache } from './images.js';

const REF = `keepsake-image:sha256:${'ab'.repeat(32)}`;
const bytes = Uint8Array.from({ length: 300 }, (_, i) => (i * 37) & 255);
const b64 = Buffer.from(bytes).toString('base64');

/** The bytes of the Blob URL a fresh cache shows for a reference whose stored bytes are `data`. */
async function shownBytes(data) {
  const storage = { images: { display: async ({ refs }) => ({ images: refs.map((ref) => ({ ref, mime: 'image/png', bytes: data, width: 1, height: 1 })) }) } };
  const d = await createImageCache({ storage }).display(REF);
  const blob = await (await import('node:buffer')).resolveObjectURL(d.src);
  return new Uint8Array(await blob.arrayBuffer());
}

test('decoding: Uint8Array.fromBase64 when the engine has it, the atob loop otherwise', async () => {
  const had = Object.getOwnPropertyDescriptor(Uint8Array, 'fromBase64');
  try {
    delete Uint8Array.fromBase64;
    assert.deepEqual(await shownBytes(b64), bytes);
    assert.deepEqual(await shownBytes(''), new Uint8Array(0));
    let calls = 0;
    Uint8Array.fromBase64 = (s) => { calls += 1; return new Uint8Array(Buffer.from(s, 'base64')); };
    assert.deepEqual(await shownBytes(b64), bytes);
    assert.equal(calls, 1);
  } finally {
    delete Uint8Array.fromBase64;
    if (had) Object.defineProperty(Uint8Array, 'fromBase64', had);
  }
});

test('display: references asked for together go to the host in one images.display call; each is shown as a Blob URL of its rendition', async () => {
  const REF2 = `keepsake-image:sha256:${'cd'.repeat(32)}`;
  const asked = [];
  const storage = { images: {
    display: async (a) => {
      asked.push(a);
      return { images: a.refs.map((ref) => ({ ref, mime: 'image/jpeg', bytes: b64, width: 640, height: 400 })) };
    },
    get: async () => { throw new Error('a bubble never reads the full-size picture'); },
  } };
  const cache = createImageCache({ storage });
  const [d, d2] = await Promise.all([cache.display(REF), cache.display(REF2)]);
  assert.deepEqual(asked, [{ refs: [REF, REF2] }]);
  assert.match(d.src, /^blob:/);
  assert.notEqual(d.src, d2.src);
  const blob = await (await import('node:buffer')).resolveObjectURL(d.src);
  assert.equal(blob.type, 'image/jpeg');
  assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), bytes);
  assert.equal(await cache.display(REF), d);
  assert.equal(asked.length, 1, 'a shown picture is not asked for again');
});

test('display: a picture the host cannot give fails alone; the others of its batch show', async () => {
  const MISSING = `keepsake-image:sha256:${'ef'.repeat(32)}`;
  const storage = { images: { display: async ({ refs }) => ({ images: refs.map((ref) => (ref === MISSING
    ? { ref, error: { code: 'not_found', message: 'no image ef…' } }
    : { ref, mime: 'image/png', bytes: b64, width: 1, height: 1 })) }) } };
  const cache = createImageCache({ storage });
  const [ok, missing] = await Promise.allSettled([cache.display(REF), cache.display(MISSING)]);
  assert.equal(ok.status, 'fulfilled');
  assert.equal(missing.status, 'rejected');
  assert.equal(missing.reason.code, 'not_found');
  assert.match(missing.reason.message, /no image/);
});

test('display: a host without images.display still shows pictures, one images.get each', async () => {
  const asked = [];
  const storage = { images: {
    display: async () => { throw Object.assign(new Error('unknown operation'), { code: 'bad_request' }); },
    get: async (a) => { asked.push(a); return { mime: 'image/png', bytes: b64 }; },
  } };
  const cache = createImageCache({ storage });
  const d = await cache.display(REF);
  assert.equal(d.thumb, false);
  const blob = await (await import('node:buffer')).resolveObjectURL(d.src);
  assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), bytes);
  assert.deepEqual(asked, [{ ref: REF }]);
});

test('full and dataUrl read the stored picture with images.get, never the display rendition', async () => {
  const asked = [];
  const storage = { images: {
    display: async ({ refs }) => ({ images: refs.map((ref) => ({ ref, mime: 'image/jpeg', bytes: 'AAAA', width: 1, height: 1 })) }),
    get: async (a) => { asked.push(a); return { mime: 'image/png', bytes: b64 }; },
  } };
  const cache = createImageCache({ storage });
  await cache.display(REF);
  const src = await cache.full(REF);
  const blob = await (await import('node:buffer')).resolveObjectURL(src);
  assert.equal(blob.type, 'image/png');
  assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), bytes);
  assert.equal(await cache.dataUrl(REF), `data:image/png;base64,${b64}`);
  assert.deepEqual(asked, [{ ref: REF }, { ref: REF }]);
});

test('display: http(s) pictures become links, other URLs are refused', async () => {
  const cache = createImageCache({ storage: {} });
  assert.deepEqual(await cache.display('https://example.com/a.png'), { link: 'https://example.com/a.png' });
  await assert.rejects(cache.display('ftp://example.com/a.png'), /Unsupported image URL/);
});

test('original: the lightbox reads an originalUrl reference with images.get, never through a display thumbnail', async () => {
  const asked = [];
  const big = 'A'.repeat(1_600_000);
  const storage = { images: {
    get: async (a) => { asked.push(a); return { mime: 'image/png', bytes: big }; },
    thumbnail: async () => { throw new Error('no thumbnail for an original'); },
    display: async () => { throw new Error('no display rendition for an original'); },
  } };
  const cache = createImageCache({ storage });
  const o = await cache.original(REF);
  assert.match(o.src, /^blob:/);
  const blob = await (await import('node:buffer')).resolveObjectURL(o.src);
  assert.equal(blob.type, 'image/png');
  assert.equal(blob.size, big.length / 4 * 3);
  assert.deepEqual(asked, [{ ref: REF }]);
  o.revoke();
  assert.equal(await (await import('node:buffer')).resolveObjectURL(o.src), undefined);
  assert.equal((await cache.original('https://example.com/a.png')).src, 'https://example.com/a.png');
});

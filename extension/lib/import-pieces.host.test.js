// Imports larger than one message, against the real host over real pipes: the host refuses the
// whole document (too_large, naming the limit), and importWithPreview sends it in pieces — every
// session, every picture and the live history arrive; a piece that fails says how far the
// import got, and importing again finishes it. Skipped when the binary is not built.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';

import { NativePort } from './native-port.js';
import { createStorage, listAllSessions } from './storage.js';
import { countValues, HOST_MAX_VALUES } from './import-pieces.js';
import { importWithPreview } from './ui/import-confirm.js';
import { HOST_SKIP as SKIP, ProcessPort, cleanUpHosts, spawnHost, tempDir } from '../test-support/process-port.js';

after(cleanUpHosts);

function realStorage() {
  const db = join(tempDir('keepsake-pieces-'), 'data', 'keepsake.db');
  const env = { lastError: undefined };
  const np = new NativePort({ connect: () => new ProcessPort(spawnHost(db), env), idleMs: 600_000, backoffMs: [50], lastError: () => env.lastError });
  return { np, storage: createStorage(np.request.bind(np)) };
}

/** A tiny valid PNG whose bytes differ by `seed` (a 1×1 pixel). */
function png(seed) {
  const b64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4//8/AAX+Av4N70a4AAAAAElFTkSuQmCC';
  const bytes = Buffer.from(b64, 'base64');
  // a private ancillary chunk after IHDR makes each picture's bytes (and hash) its own
  const data = Buffer.from(`seed${seed}`);
  const chunk = Buffer.alloc(12 + data.length);
  chunk.writeUInt32BE(data.length, 0);
  chunk.write('teXt', 4, 'latin1');
  data.copy(chunk, 8);
  const crc = crc32(Buffer.concat([Buffer.from('teXt', 'latin1'), data]));
  chunk.writeUInt32BE(crc, 8 + data.length);
  return Buffer.concat([bytes.subarray(0, 33), chunk, bytes.subarray(33)]);
}

function crc32(buf) {
  let c = ~0;
  for (const byte of buf) {
    c ^= byte;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}

function bigExport(n, entries, pictures) {
  const images = {};
  const refs = [];
  for (let p = 0; p < pictures; p++) {
    const bytes = png(p);
    const hash = createHash('sha256').update(bytes).digest('hex');
    images[hash] = { mime: 'image/png', data: bytes.toString('base64') };
    refs.push(`keepsake-image:sha256:${hash}`);
  }
  const sessions = [];
  for (let s = 0; s < n; s++) {
    const body = [];
    for (let e = 0; e < entries; e++) body.push({ role: e % 2 ? 'assistant' : 'user', content: `turn ${s}.${e}` });
    if (s < pictures) body.push({ role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: refs[s] } }] });
    sessions.push({ id: `big-${s}`, name: `Big ${s}`, createdAt: 1_700_000_000_000 + s, pinned: false, entries: body });
  }
  return { format: 'keepsake.sessions', version: 2, exportedAt: '2026-12-04T00:00:00Z', sessions, images };
}

test('an import over the value limit goes in pieces and arrives whole', { skip: SKIP, timeout: 300_000 }, async () => {
  const { np, storage } = realStorage();
  const doc = bigExport(1_000, 60, 40);
  assert.ok(countValues(doc) > 3 * HOST_MAX_VALUES, `${countValues(doc)} values`);

  // whole, the host refuses it and names the limit; nothing is stored
  await assert.rejects(storage.storage.import({ document: doc }), (e) => e.code === 'too_large' && /limit of 100000/.test(e.message) && /pieces/.test(e.message));
  assert.equal((await listAllSessions(storage)).length, 0);

  const seen = [];
  const r = await importWithPreview({ storage, doc, ask: async () => 'none', progress: (i, n) => seen.push([i, n]) });
  assert.ok(r.pieces >= 7, `${r.pieces} pieces`);
  assert.equal(seen.length, r.pieces);
  assert.equal(r.preview.sessionsNew, 1_000);
  assert.equal(r.result.sessionsImported, 1_000);
  assert.equal(r.result.imagesStored, 40);
  const list = await listAllSessions(storage);
  assert.equal(list.length, 1_000);
  const s7 = await storage.sessions.get({ id: 'big-7' });
  assert.equal(s7.entries.length, 61, 'a session with its picture, whole');
  assert.equal(s7.entries[60].content[1].image_url.url, `data:image/png;base64,${png(7).toString('base64')}`, 'its picture, byte for byte');
  const s999 = await storage.sessions.get({ id: 'big-999' });
  assert.equal(s999.entries[59].content, 'turn 999.59');

  // importing again changes nothing
  const again = await importWithPreview({ storage, doc, ask: async () => 'none' });
  assert.equal(again.result.sessionsImported, 0);
  assert.equal(again.result.sessionsSkipped, 1_000);
  np.close?.();
});

test('a piece that fails says how far the import got; importing again finishes it', { skip: SKIP, timeout: 300_000 }, async () => {
  const { storage } = realStorage();
  const doc = bigExport(600, 60, 0);
  // a session deep in the file references a picture the file does not carry
  doc.sessions[500].entries.push({ role: 'user', content: [{ type: 'image_url', image_url: { url: `keepsake-image:sha256:${'ab'.repeat(32)}` } }] });
  await assert.rejects(importWithPreview({ storage, doc, ask: async () => 'none' }), (e) => {
    assert.match(e.message, /piece \d+ of \d+ failed/);
    assert.match(e.message, /were imported before it/);
    assert.match(e.message, /Importing the file again finishes it/);
    return true;
  });
  const part = (await listAllSessions(storage)).length;
  assert.ok(part > 0 && part < 600, `${part} sessions after the failure`);
  doc.sessions[500].entries.pop();
  const r = await importWithPreview({ storage, doc, ask: async () => 'none' });
  assert.equal(r.result.sessionsImported + r.result.sessionsSkipped, 600);
  assert.equal((await listAllSessions(storage)).length, 600);
});

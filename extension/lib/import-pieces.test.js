// The import splitter (import-pieces.js): pieces stay within the budget, carry every session
// once, exactly the images their sessions reference, the live history with its active session
// and the settings once; a session too large for one message is named, never cut.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { countValues, splitImport, mergeResults, HOST_MAX_VALUES } from './import-pieces.js';

/** UTF-8 bytes of `v` as JSON (what one message carries). */
const jsonBytes = (v) => Buffer.byteLength(JSON.stringify(v), 'utf8');
/** The image hashes `v` references, found in its JSON text. */
const imageRefs = (v) => new Set([...JSON.stringify(v).matchAll(/"keepsake-image:sha256:([0-9a-f]{64})"/g)].map((m) => m[1]));

const sha = (i) => i.toString(16).padStart(64, '0');
const ref = (i) => `keepsake-image:sha256:${sha(i)}`;

function exportDoc(n, { entries = 20, pictures = 0 } = {}) {
  const images = {};
  for (let p = 0; p < pictures; p++) images[sha(p + 1)] = { mime: 'image/png', data: 'A'.repeat(1000) };
  const sessions = [];
  for (let s = 0; s < n; s++) {
    const body = [];
    for (let e = 0; e < entries; e++) body.push({ role: e % 2 ? 'assistant' : 'user', content: `m${s}.${e}` });
    if (pictures) body.push({ role: 'user', content: [{ type: 'image_url', image_url: { url: ref((s % pictures) + 1) } }] });
    sessions.push({ id: `s${s}`, name: `S${s}`, createdAt: s, pinned: false, entries: body });
  }
  return { format: 'keepsake.sessions', version: 2, exportedAt: 'x', sessions, images };
}

test('countValues counts as the host does: every node and every key', () => {
  assert.equal(countValues([0, 0, 0]), 4);
  assert.equal(countValues({ a: 1, b: [true, null] }), 1 + 2 + 1 + 3);
  assert.equal(countValues('x'), 1);
  assert.equal(countValues({}), 1);
});

test('a document within one piece is sent as it is', () => {
  const doc = exportDoc(3);
  const { pieces, tooLarge } = splitImport(doc);
  assert.equal(pieces.length, 1);
  assert.equal(pieces[0], doc);
  assert.deepEqual(tooLarge, []);
});

test('an export splits by session within the budget; each piece carries exactly its images', () => {
  const doc = exportDoc(600, { entries: 30, pictures: 7 });
  const budget = { values: 20_000, bytes: 200_000 };
  const { pieces, tooLarge } = splitImport(doc, budget);
  assert.deepEqual(tooLarge, []);
  assert.ok(pieces.length > 5, `${pieces.length} pieces`);
  const ids = pieces.flatMap((p) => p.sessions.map((s) => s.id));
  assert.deepEqual(ids, doc.sessions.map((s) => s.id), 'every session once, in order');
  for (const p of pieces) {
    assert.ok(countValues(p) <= budget.values, `${countValues(p)} values`);
    assert.ok(jsonBytes(p) <= budget.bytes, `${jsonBytes(p)} bytes`);
    assert.equal(p.format, 'keepsake.sessions');
    assert.equal(p.version, 2);
    const wanted = [...imageRefs(p.sessions)].sort();
    assert.deepEqual(Object.keys(p.images).sort(), wanted, 'exactly the images its sessions reference');
    for (const h of wanted) assert.deepEqual(p.images[h], doc.images[h]);
  }
});

test('a dump: settings ride with the first piece, the live history with its active session', () => {
  const doc = { theme: 'dark', maxSessions: 0, activeSessionId: 's40', history: [{ role: 'user', content: 'live' }] };
  doc.savedSessions = [];
  for (let s = 0; s < 60; s++) {
    doc.savedSessions.push({ id: `s${s}`, name: `S${s}` });
    doc[`session_s${s}`] = Array.from({ length: 40 }, (_, e) => ({ role: 'user', content: `d${s}.${e}` }));
  }
  doc.session_orphan = [{ role: 'user', content: 'nobody names me' }];
  const { pieces, tooLarge, warnings } = splitImport(doc, { values: 2_000, bytes: 1e9 });
  assert.deepEqual(tooLarge, []);
  assert.ok(pieces.length > 3);
  assert.deepEqual(warnings, ['session_orphan: no savedSessions element names it, ignored']);
  assert.equal(pieces[0].theme, 'dark');
  assert.ok(pieces.slice(1).every((p) => !('theme' in p) && !('maxSessions' in p)), 'settings once');
  const withLive = pieces.filter((p) => 'history' in p);
  assert.equal(withLive.length, 1);
  assert.ok(withLive[0].savedSessions.some((s) => s.id === 's40'), 'the live history travels with s40');
  assert.equal(withLive[0].activeSessionId, 's40');
  for (const p of pieces) {
    for (const s of p.savedSessions) assert.deepEqual(p[`session_${s.id}`], doc[`session_${s.id}`]);
  }
  assert.deepEqual(pieces.flatMap((p) => p.savedSessions.map((s) => s.id)), doc.savedSessions.map((s) => s.id));
});

test('a session too large for one message is named and left out, the others still go', () => {
  const doc = exportDoc(5, { entries: 4 });
  doc.sessions[2].entries = Array.from({ length: 25_000 }, (_, e) => ({ role: 'user', content: `x${e}` }));
  assert.ok(countValues(doc.sessions[2]) > HOST_MAX_VALUES);
  const { pieces, tooLarge } = splitImport(doc);
  assert.deepEqual(tooLarge.map((t) => t.id), ['s2']);
  assert.ok(tooLarge[0].values > HOST_MAX_VALUES);
  assert.deepEqual(pieces.flatMap((p) => p.sessions.map((s) => s.id)), ['s0', 's1', 's3', 's4']);
});

test('mergeResults adds the counts and keeps every warning', () => {
  const r = mergeResults([
    { sessionsImported: 2, sessionsSkipped: 1, sessionsAlreadyHere: 1, settingsImported: 1, settingsSkipped: 0, live: 'absent', imagesStored: 3, overCap: 0, warnings: ['a'] },
    { sessionsImported: 5, sessionsSkipped: 0, sessionsAlreadyHere: 0, settingsImported: 0, settingsSkipped: 0, live: 'replaced', imagesStored: 1, overCap: 2, warnings: ['b'] },
  ]);
  assert.deepEqual(r, { sessionsImported: 7, sessionsSkipped: 1, sessionsAlreadyHere: 1, settingsImported: 1, settingsSkipped: 0, live: 'replaced', imagesStored: 4, overCap: 2, warnings: ['a', 'b'] });
});

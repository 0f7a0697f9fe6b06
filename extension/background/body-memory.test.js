// node --test extension/background/body-memory.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

import { BodyMemory } from './body-memory.js';

const sha256 = (t) => createHash('sha256').update(t, 'utf8').digest('hex');

/** Deterministic prose with CJK, accents, astral emoji, quotes and newlines. */
function prose(seed, chars) {
  const words = ['lorem', 'ipsum', 'dolor', '会话', '记录', 'naïve', 'café', '😀', '🚀x', '"quoted"', 'line\nbreak'];
  let x = seed * 2654435761 + 1;
  let out = '';
  while (out.length < chars) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out += words[x % words.length] + ' ';
  }
  return out;
}

/**
 * What BodyMemory makes of `ops` against a held text `held` (null: nothing held): the spliced
 * text, or null when the delta does not apply.
 */
function spliced(held, ops, length) {
  const m = new BodyMemory();
  if (held !== null) m.take({ bodyText: held, bodyHash: 'h0', bodyLength: held.length }, m.snapshot());
  const got = m.take({ bodyDelta: { since: m.hash, ops }, bodyHash: 'h1', bodyLength: length }, m.snapshot());
  return got === null ? null : got.text;
}

/** Whether BodyMemory's check accepts `text` received whole under the hash `hash`. */
async function verifies(text, hash) {
  const m = new BodyMemory();
  m.take({ bodyText: 'x', bodyHash: 'h0', bodyLength: 1 }, m.snapshot());
  const got = m.take({ bodyDelta: { since: 'h0', ops: text === '' ? [] : [text] }, bodyHash: hash, bodyLength: text.length }, m.snapshot());
  return got.check();
}

test('a delta: UTF-16 slices of the held text and literals; anything out of range → null', () => {
  const held = 'ab😀cd中';
  assert.equal(spliced(held, [[0, 2], 'X', [2, 4], [4, 7]], 8), 'abX😀cd中');
  assert.equal(spliced(held, [], 0), '');
  assert.equal(spliced(held, ['only'], 4), 'only');
  assert.equal(spliced(held, [[0, 8]], 8), null, 'past the end');
  assert.equal(spliced(held, [[3, 3]], 0), null, 'empty range');
  assert.equal(spliced(held, [[-1, 2]], 3), null);
  assert.equal(spliced(held, [[0, 1.5]], 1.5), null);
  assert.equal(spliced(held, [[0, 2, 3]], 2), null);
  assert.equal(spliced(held, [{ a: 1 }], 0), null);
  assert.equal(spliced(held, [[0, 2]], 3), null, 'wrong length');
  assert.equal(spliced(null, [[0, 1]], 1), null, 'nothing held');
  assert.equal(spliced(held, 'ops', 0), null);
});

test('the check is the sha256 hex of the UTF-8, as the host computes it', async () => {
  assert.equal(await verifies('', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'), true);
  assert.equal(await verifies('abc', 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'), true);
  const t = prose(3, 5000);
  assert.equal(await verifies(t, sha256(t)), true);
  assert.equal(await verifies(t, sha256(t + ' ')), false);
});

test('BodyMemory.take: full text kept; a delta applied, kept, checked; a bad delta → null; old shape → undefined', async () => {
  const m = new BodyMemory();
  const t1 = JSON.stringify({ messages: [{ role: 'user', content: 'é😀 one' }] });
  const full = m.take({ bodyText: t1, bodyHash: sha256(t1), bodyLength: t1.length }, m.snapshot());
  assert.equal(full.text, t1);
  assert.equal(await full.check(), true);
  assert.deepEqual(m.snapshot(), { text: t1, hash: sha256(t1) });
  const t2 = t1.replace(']}', ',{"role":"assistant","content":"two"}]}');
  const cut = t1.length - 2;
  const good = {
    bodyDelta: { since: sha256(t1), ops: [[0, cut], ',{"role":"assistant","content":"two"}', [cut, t1.length]] },
    bodyHash: sha256(t2),
    bodyLength: t2.length,
  };
  const snap = m.snapshot();
  const got = m.take(good, snap);
  assert.equal(got.text, t2);
  assert.equal(m.hash, sha256(t2), 'kept at once');
  assert.equal(await got.check(), true);
  assert.equal(got.check(), got.check(), 'checked once');
  for (const bad of [
    { ...good, bodyLength: t2.length + 1 },
    { ...good, bodyDelta: { ...good.bodyDelta, since: 'other' } },
    { ...good, bodyDelta: { ...good.bodyDelta, ops: [[0, t1.length + 5]] } },
  ]) {
    assert.equal(m.take(bad, snap), null);
  }
  assert.equal(m.hash, sha256(t2), 'a delta that does not apply changes nothing held');
  // a wrong hash is found by the check, which forgets the text
  const wrong = m.take({ ...good, bodyHash: '0'.repeat(64) }, snap);
  assert.equal(wrong.text, t2);
  assert.equal(await wrong.check(), false);
  assert.deepEqual(m.snapshot(), { text: null, hash: null });
  assert.equal(m.take({ body: { a: 1 } }, snap), undefined);
  assert.deepEqual(m.stats, { full: 1, delta: 2, rejected: 4 });
  assert.equal(new BodyMemory({ subtle: null }).enabled, false);
});

test('splice + verify + parse of a 60-entry ~300K-char body (timings)', async (t) => {
  const head = '{"model":"gpt-x","stream":true,"messages":[{"role":"system","content":"Be brief."},';
  const msgs = Array.from({ length: 62 }, (_, i) =>
    JSON.stringify({ role: i % 2 ? 'assistant' : 'user', content: prose(i + 10, 4900) }),
  );
  const oldT = `${head}${msgs.slice(0, 60).join(',')}]}`;
  const newT = `${head}${msgs.slice(2, 62).join(',')}]}`;
  const keptFrom = head.length + msgs[0].length + msgs[1].length + 2;
  const keptTo = oldT.length - 2;
  // the two oldest trimmed off the front, one pair appended: what the host sends
  const ops = [[0, head.length], [keptFrom, keptTo], `,${msgs[60]},${msgs[61]}`, [keptTo, oldT.length]];
  const hash = sha256(newT);
  const m = new BodyMemory();
  const runs = { splice: [], hash: [], parse: [], all: [] };
  for (let i = 0; i < 21; i++) {
    m.text = oldT;
    m.hash = 'h0';
    const t0 = performance.now();
    const got = m.take({ bodyDelta: { since: 'h0', ops }, bodyHash: hash, bodyLength: newT.length }, m.snapshot());
    const t1 = performance.now();
    const ok = await got.check();
    const t2 = performance.now();
    const body = JSON.parse(got.text);
    const t3 = performance.now();
    assert.equal(got.text, newT);
    assert.ok(ok && body.messages.length === 61);
    runs.splice.push(t1 - t0);
    runs.hash.push(t2 - t1);
    runs.parse.push(t3 - t2);
    runs.all.push(t3 - t0);
  }
  const med = (v) => v.sort((a, b) => a - b)[v.length >> 1].toFixed(2);
  t.diagnostic(
    `body ${newT.length} UTF-16 units: splice ${med(runs.splice)} ms, sha256 ${med(runs.hash)} ms, ` +
      `JSON.parse ${med(runs.parse)} ms; take + check + parse ${med(runs.all)} ms (BodyMemory; medians of 21)`,
  );
});

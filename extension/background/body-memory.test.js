// node --test extension/background/body-memory.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

import { BodyMemory, applyBodyDelta, textHash } from './body-memory.js';

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

test('applyBodyDelta: UTF-16 slices and literals; anything out of range → null', () => {
  const held = 'ab😀cd中';
  assert.equal(applyBodyDelta(held, [[0, 2], 'X', [2, 4], [4, 7]], 8), 'abX😀cd中');
  assert.equal(applyBodyDelta(held, [], 0), '');
  assert.equal(applyBodyDelta(held, ['only'], 4), 'only');
  assert.equal(applyBodyDelta(held, [[0, 8]], 8), null, 'past the end');
  assert.equal(applyBodyDelta(held, [[3, 3]], 0), null, 'empty range');
  assert.equal(applyBodyDelta(held, [[-1, 2]], 3), null);
  assert.equal(applyBodyDelta(held, [[0, 1.5]], 1.5), null);
  assert.equal(applyBodyDelta(held, [[0, 2, 3]], 2), null);
  assert.equal(applyBodyDelta(held, [{ a: 1 }], 0), null);
  assert.equal(applyBodyDelta(held, [[0, 2]], 3), null, 'wrong length');
  assert.equal(applyBodyDelta(null, [[0, 1]], 1), null);
  assert.equal(applyBodyDelta(held, 'ops', 0), null);
});

test('textHash is the sha256 hex of the UTF-8, as the host computes it', async () => {
  assert.equal(await textHash(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.equal(await textHash('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  const t = prose(3, 5000);
  assert.equal(await textHash(t), sha256(t));
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
  assert.equal(applyBodyDelta(oldT, ops, newT.length), newT);
  const hash = sha256(newT);
  const m = new BodyMemory();
  const runs = { splice: [], hash: [], parse: [], all: [] };
  for (let i = 0; i < 21; i++) {
    let t0 = performance.now();
    const text = applyBodyDelta(oldT, ops, newT.length);
    const t1 = performance.now();
    const h = await textHash(text);
    const t2 = performance.now();
    JSON.parse(text);
    const t3 = performance.now();
    assert.equal(h, hash);
    runs.splice.push(t1 - t0);
    runs.hash.push(t2 - t1);
    runs.parse.push(t3 - t2);
    m.text = oldT;
    m.hash = 'h0';
    t0 = performance.now();
    const got = m.take({ bodyDelta: { since: 'h0', ops }, bodyHash: hash, bodyLength: newT.length }, m.snapshot());
    const ok = await got.check();
    const body = JSON.parse(got.text);
    runs.all.push(performance.now() - t0);
    assert.ok(ok && body.messages.length === 61);
  }
  const med = (v) => v.sort((a, b) => a - b)[v.length >> 1].toFixed(2);
  t.diagnostic(
    `body ${newT.length} UTF-16 units: splice ${med(runs.splice)} ms, sha256 ${med(runs.hash)} ms, ` +
      `JSON.parse ${med(runs.parse)} ms; BodyMemory take + check + parse ${med(runs.all)} ms (medians of 21)`,
  );
});

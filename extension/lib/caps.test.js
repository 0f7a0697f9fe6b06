// node --test extension/lib/caps.test.js
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { createImageGate, hostTrim, imageShapeOk, pickTurnImages, turnCaps, urlCharsFor } from './caps.js';

const fixture = JSON.parse(readFileSync(new URL('./fixtures/caps-cases.json', import.meta.url), 'utf8'));
/** The caps the fixture was written for; caps.host.test.js checks the real host reports the same. */
const caps = turnCaps({ turnMaxImages: fixture.constants.TURN_MAX_IMAGES, turnImageBudget: fixture.constants.TURN_IMAGE_BUDGET });
const BUDGET = caps.budget;

const PREFIX = { data: 'data:image/png;base64,', http: 'http://x/', https: 'https://x/' };

/** Materialise a fixture input list; returns the list and a urlChars that knows the refs' sizes. */
function materialise(input) {
  const sizes = new Map();
  const list =
    input === null || input === undefined
      ? input
      : input.map((item) => {
          if (typeof item === 'string') return item;
          if (item === null || typeof item !== 'object') throw new Error(`fixture item ${item}: use {value}`);
          if ('value' in item) return item.value;
          if ('ref' in item) {
            const u = 'keepsake-image:sha256:' + item.ref;
            sizes.set(u, item.chars);
            return u;
          }
          const prefix = PREFIX[item.make];
          const fill = item.fill ?? 'A';
          const n = (item.len - prefix.length) / fill.length;
          assert.ok(Number.isInteger(n), `fixture ${item.make}/${item.len}: remainder not a multiple of the fill`);
          const s = prefix + fill.repeat(n);
          assert.equal(s.length, item.len);
          return s;
        });
  const urlChars = (u) => (sizes.has(u) ? sizes.get(u) : u.length);
  return { list, urlChars };
}

test('turnCaps reads host.hello limits, and nothing else', () => {
  assert.deepEqual(turnCaps({ turnMaxImages: 8, turnImageBudget: 3_145_728, maxHistory: 60 }), { maxImages: 8, budget: 3_145_728 });
  for (const bad of [undefined, null, {}, { turnMaxImages: 8 }, { turnMaxImages: '8', turnImageBudget: 1 }, { turnMaxImages: 1.5, turnImageBudget: 1 }, { turnMaxImages: -1, turnImageBudget: 1 }]) {
    assert.equal(turnCaps(bad), null, JSON.stringify(bad));
  }
});

test('without caps (the host has not answered yet) only the shape gate applies', () => {
  const many = Array.from({ length: 12 }, (_, i) => `https://x/${i}`);
  const r = pickTurnImages([...many, 'ftp://x', 'data:image/png;base64,' + 'A'.repeat(BUDGET + 1)], { caps: null });
  assert.equal(r.images.length, 13);
  assert.deepEqual(r.reasons.slice(12), ['shape', null]);
});

test('other caps than the fixture\'s are obeyed', () => {
  const small = { maxImages: 2, budget: 30 };
  assert.deepEqual(pickTurnImages(['https://a', 'https://b', 'https://c'], { caps: small }).reasons, [null, null, 'count']);
  assert.deepEqual(pickTurnImages(['https://x/' + 'a'.repeat(21), 'https://b'], { caps: small }).reasons, ['size', null]);
  assert.deepEqual(pickTurnImages(['https://x/' + 'a'.repeat(10), 'https://x/' + 'b'.repeat(6), 'https://c'], { caps: small }).reasons, [null, 'budget', null]);
});

for (const c of fixture.cases) {
  test(`pickTurnImages fixture: ${c.name}`, () => {
    const { list, urlChars } = materialise(c.absent ? undefined : c.input);
    const r = c.absent ? pickTurnImages(undefined, { caps, urlChars }) : pickTurnImages(list, { caps, urlChars });
    assert.deepEqual(
      r.images,
      c.expect.kept.map((i) => list[i]),
      'kept images (original strings, in order)',
    );
    assert.equal(r.dropped, c.expect.dropped);
    assert.deepEqual(r.reasons, c.expect.reasons);

    // The attach-time gate, fed one by one, keeps exactly the same.
    const gate = createImageGate({ caps, urlChars });
    const verdicts = (list ?? []).map((u) => gate.offer(u));
    assert.deepEqual(gate.images, r.images);
    assert.equal(gate.dropped, r.dropped);
    assert.deepEqual(
      verdicts.map((v) => v.reason),
      r.reasons,
    );
    assert.deepEqual(
      verdicts.map((v) => v.ok),
      r.reasons.map((x) => x === null),
    );
  });
}

test('divergent cases: JS follows the side recorded in the fixture', () => {
  for (const c of fixture.divergent.cases) {
    const { list } = materialise(c.input);
    const r = pickTurnImages(list, { caps });
    const want = c[c.js];
    assert.deepEqual(r.reasons, want.reasons, c.name);
    assert.deepEqual(
      r.images,
      want.kept.map((i) => list[i]),
      c.name,
    );
  }
});

test('default urlChars is the UTF-16 length; unknown sizes count as too big', () => {
  const emoji = 'https://x/' + '😀'.repeat((BUDGET - 10) / 2);
  assert.equal(pickTurnImages([emoji], { caps }).dropped, 0);
  assert.deepEqual(pickTurnImages([emoji + 'a'], { caps }).reasons, ['size']);
  const ref = 'keepsake-image:sha256:' + 'a'.repeat(64);
  assert.deepEqual(pickTurnImages([ref], { caps, urlChars: () => NaN }).reasons, ['size']);
  assert.deepEqual(pickTurnImages([ref], { caps, urlChars: () => Infinity }).reasons, ['size']);
  assert.deepEqual(pickTurnImages([ref], { caps }).reasons, [null]);
});

test('non-array lists keep nothing and drop nothing', () => {
  for (const v of [null, undefined, 'https://x', 5, { 0: 'https://x', length: 1 }]) {
    assert.deepEqual(pickTurnImages(v, { caps }), { images: [], dropped: 0, reasons: [] });
  }
});

test('gate reset', () => {
  const g = createImageGate({ caps });
  for (let i = 0; i < 9; i++) g.offer(`https://x/${i}`);
  assert.equal(g.images.length, 8);
  assert.equal(g.dropped, 1);
  assert.equal(g.total, 8 * 11);
  g.reset();
  assert.equal(g.images.length, 0);
  assert.equal(g.dropped, 0);
  assert.deepEqual(g.offer('https://y'), { ok: true, reason: null });
});

test('helpers', () => {
  assert.equal(urlCharsFor('image/png', 3), 5 + 9 + 8 + 4);
  assert.equal(urlCharsFor('image/jpeg', 4), 5 + 10 + 8 + 8);
  assert.equal(urlCharsFor('image/png', 0), 22);
  assert.equal(
    `data:image/png;base64,${Buffer.from([1, 2, 3, 4]).toString('base64')}`.length,
    urlCharsFor('image/png', 4),
  );
  assert.ok(imageShapeOk(' keepsake-image:sha256:' + '0'.repeat(64) + '\n'));
  assert.equal(hostTrim('\u0085\ufeff x \u3000'), 'x');
  assert.equal(hostTrim('x'), 'x');
  assert.equal(hostTrim(' '.repeat(100_000)), '');
  assert.ok(!imageShapeOk(null));
  assert.ok(imageShapeOk('HTTPS://X'));
  // Non-ASCII look-alikes never pass the ASCII case-insensitive prefix.
  assert.ok(!imageShapeOk('data:\u0130mage/png;base64,AA')); // İ
  assert.ok(!imageShapeOk('\u212Attps://x')); // Kelvin sign is not h, but make sure nothing folds
});

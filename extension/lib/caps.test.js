// node --test extension/lib/caps.test.js
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  TURN_IMAGE_BUDGET,
  TURN_MAX_IMAGES,
  createImageGate,
  droppedNote,
  hostTrim,
  imageShapeOk,
  pickTurnImages,
  urlCharsFor,
  withDroppedNote,
} from './caps.js';

const fixture = JSON.parse(readFileSync(new URL('./fixtures/caps-cases.json', import.meta.url), 'utf8'));

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

test('constants match the spec and the fixture', () => {
  assert.equal(TURN_MAX_IMAGES, 8);
  assert.equal(TURN_IMAGE_BUDGET, 3_145_728);
  assert.equal(fixture.constants.TURN_MAX_IMAGES, TURN_MAX_IMAGES);
  assert.equal(fixture.constants.TURN_IMAGE_BUDGET, TURN_IMAGE_BUDGET);
});

test('dropped-image note text (fixture)', () => {
  for (const [n, text] of Object.entries(fixture.notes)) assert.equal(droppedNote(Number(n)), text);
  assert.equal(droppedNote(0), '');
  assert.equal(droppedNote(2), '\n\n（注：另有 2 张图片因超出单条消息大小上限未能随附。）');
  assert.equal(withDroppedNote('hi', 1), 'hi\n\n（注：另有 1 张图片因超出单条消息大小上限未能随附。）');
  assert.equal(withDroppedNote('hi', 0), 'hi');
});

for (const c of fixture.cases) {
  test(`pickTurnImages fixture: ${c.name}`, () => {
    const { list, urlChars } = materialise(c.absent ? undefined : c.input);
    const r = c.absent ? pickTurnImages(undefined, { urlChars }) : pickTurnImages(list, { urlChars });
    assert.deepEqual(
      r.images,
      c.expect.kept.map((i) => list[i]),
      'kept images (original strings, in order)',
    );
    assert.equal(r.dropped, c.expect.dropped);
    assert.deepEqual(r.reasons, c.expect.reasons);
    assert.equal(r.note, droppedNote(c.expect.dropped));

    // The attach-time gate, fed one by one, keeps exactly the same.
    const gate = createImageGate({ urlChars });
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
    const r = pickTurnImages(list);
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
  const emoji = 'https://x/' + '😀'.repeat((TURN_IMAGE_BUDGET - 10) / 2);
  assert.equal(pickTurnImages([emoji]).dropped, 0);
  assert.deepEqual(pickTurnImages([emoji + 'a']).reasons, ['size']);
  const ref = 'keepsake-image:sha256:' + 'a'.repeat(64);
  assert.deepEqual(pickTurnImages([ref], { urlChars: () => NaN }).reasons, ['size']);
  assert.deepEqual(pickTurnImages([ref], { urlChars: () => Infinity }).reasons, ['size']);
  assert.deepEqual(pickTurnImages([ref]).reasons, [null]);
});

test('non-array lists keep nothing and drop nothing', () => {
  for (const v of [null, undefined, 'https://x', 5, { 0: 'https://x', length: 1 }]) {
    assert.deepEqual(pickTurnImages(v), { images: [], dropped: 0, note: '', reasons: [] });
  }
});

test('gate reset', () => {
  const g = createImageGate();
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

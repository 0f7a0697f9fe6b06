// node --test extension/lib/pills.test.js
import test from 'node:test';
import assert from 'node:assert/strict';

import { formatTimestamp, parseTimestamp, seekScript, splitPills } from './pills.js';

test('parseTimestamp: valid forms', () => {
  assert.equal(parseTimestamp('0:00'), 0);
  assert.equal(parseTimestamp('0:05'), 5);
  assert.equal(parseTimestamp('00:05'), 5);
  assert.equal(parseTimestamp('1:05'), 65);
  assert.equal(parseTimestamp('59:59'), 3599);
  assert.equal(parseTimestamp('75:30'), 4530, 'two-part stamps may run past an hour');
  assert.equal(parseTimestamp('999:59'), 59999);
  assert.equal(parseTimestamp('1:02:03'), 3723);
  assert.equal(parseTimestamp('01:02:03'), 3723);
  assert.equal(parseTimestamp('99:59:59'), 359999);
  assert.equal(parseTimestamp('[01:05]'), 65);
  assert.equal(parseTimestamp(' [ 1:05 ] '), 65);
});

test('parseTimestamp: invalid forms', () => {
  for (const s of [
    '', ':', '1', '12', '1:5', '1:005', '00:60', '00:99', '1:60:00', '1:00:60', '1:5:00', '100:00:00', '1000:00',
    '-1:00', '1:-1', '1.5:00', '1:00.5', 'a:bc', '1:2:3:4', '١:٠٥', '１:05', ' ', '[]', '[1:00', '1:00]',
    '01:02–01:30',
  ]) {
    assert.equal(parseTimestamp(s), null, s);
  }
  assert.equal(parseTimestamp(null), null);
  assert.equal(parseTimestamp(65), null);
});

test('formatTimestamp', () => {
  assert.equal(formatTimestamp(5), '0:05');
  assert.equal(formatTimestamp(65), '1:05');
  assert.equal(formatTimestamp(3723), '1:02:03');
  assert.equal(formatTimestamp(-3), '0:00');
  assert.equal(formatTimestamp(NaN), '0:00');
});

const rejoin = (parts) => parts.map((p) => (p.type === 'text' ? p.text : p.raw)).join('');

test('splitPills: stamps and text around them', () => {
  const s = 'Intro [00:05] then [1:02:03], end.';
  const parts = splitPills(s);
  assert.deepEqual(parts, [
    { type: 'text', text: 'Intro ' },
    { type: 'pill', label: '00:05', seconds: 5, raw: '[00:05]' },
    { type: 'text', text: ' then ' },
    { type: 'pill', label: '1:02:03', seconds: 3723, raw: '[1:02:03]' },
    { type: 'text', text: ', end.' },
  ]);
  assert.equal(rejoin(parts), s);
});

test('splitPills: ranges', () => {
  for (const sep of ['–', '-', '—', '~', ' - ', ' – ']) {
    const parts = splitPills(`[01:02${sep}01:30]`);
    assert.equal(parts.length, 1, sep);
    assert.equal(parts[0].type, 'pill');
    assert.equal(parts[0].seconds, 62);
    assert.equal(parts[0].end, 90);
  }
  assert.deepEqual(splitPills('[1:00:00–1:00:30]')[0].end, 3630);
  // End before start, or a bad half: not a pill.
  assert.deepEqual(splitPills('[01:30–01:02]'), [{ type: 'text', text: '[01:30–01:02]' }]);
  assert.deepEqual(splitPills('[01:30–01:99]'), [{ type: 'text', text: '[01:30–01:99]' }]);
  assert.deepEqual(splitPills('[01:30–]'), [{ type: 'text', text: '[01:30–]' }]);
});

test('splitPills: not pills', () => {
  for (const s of [
    '[00:60]', '[1:2]', '[12]', '00:05', '(00:05)', '[00:05](https://x)', '[ ]', '[]', '[a 00:05]',
    '[00:05 a]', '[1:60:00]', '【00:05】',
  ]) {
    assert.ok(!splitPills(s).some((p) => p.type === 'pill'), s);
    assert.equal(rejoin(splitPills(s)), s);
  }
});

test('splitPills: nested and adjacent brackets', () => {
  const parts = splitPills('[[00:05]][00:06]x[');
  assert.deepEqual(
    parts.map((p) => (p.type === 'pill' ? p.seconds : p.text)),
    ['[', 5, ']', 6, 'x['],
  );
  assert.equal(rejoin(parts), '[[00:05]][00:06]x[');
});

test('splitPills: empty and non-string input', () => {
  assert.deepEqual(splitPills(''), []);
  assert.deepEqual(splitPills(null), []);
  assert.deepEqual(splitPills(undefined), []);
});

test('splitPills: large pathological input keeps its text', () => {
  for (const s of ['['.repeat(100_000), '[00:0'.repeat(20_000), '[' + ' '.repeat(100_000) + ']', ']['.repeat(50_000)]) {
    const parts = splitPills(s);
    assert.equal(rejoin(parts), s);
    assert.ok(!parts.some((p) => p.type === 'pill'));
  }
  const many = '[00:01] '.repeat(10_000);
  assert.equal(splitPills(many).filter((p) => p.type === 'pill').length, 10_000);
});

// ---------------------------------------------------------------------------------------------- seekScript

function fakeVideo({ w = 100, h = 100, paused = true, ended = false, readyState = 4, duration = 600 } = {}) {
  return {
    paused,
    ended,
    readyState,
    duration,
    currentTime: 0,
    getBoundingClientRect: () => ({ width: w, height: h }),
  };
}

function withDocument(videos, fn, { shadow = [] } = {}) {
  const saved = globalThis.document;
  const host = { shadowRoot: { querySelectorAll: (sel) => (sel === 'video' ? shadow : []) } };
  globalThis.document = {
    querySelectorAll: (sel) => (sel === 'video' ? videos : sel === '*' ? [host] : []),
  };
  try {
    return fn();
  } finally {
    if (saved === undefined) delete globalThis.document;
    else globalThis.document = saved;
  }
}

test('seekScript is self-contained (usable with chrome.scripting.executeScript)', () => {
  // executeScript serialises the function source; it must not reference module scope.
  const src = seekScript.toString();
  assert.ok(!/\b(splitPills|parseTimestamp|formatTimestamp|RANGE_SEPARATORS|MAX_INNER)\b/.test(src));
  const rebuilt = new Function(`return (${src})`)();
  const v = fakeVideo();
  assert.equal(
    withDocument([v], () => rebuilt(12)),
    true,
  );
  assert.equal(v.currentTime, 12);
});

test('seekScript picks the playing video, else the largest', () => {
  const small = fakeVideo({ w: 10, h: 10 });
  const big = fakeVideo({ w: 1000, h: 500 });
  const playing = fakeVideo({ w: 200, h: 100, paused: false });
  assert.equal(
    withDocument([small, big, playing], () => seekScript(30)),
    true,
  );
  assert.equal(playing.currentTime, 30);
  assert.equal(big.currentTime, 0);
  assert.equal(
    withDocument([small, big], () => seekScript(40)),
    true,
  );
  assert.equal(big.currentTime, 40);
  assert.equal(small.currentTime, 0);
});

test('seekScript clamps to the duration, searches shadow roots, refuses bad input', () => {
  const v = fakeVideo({ duration: 100 });
  assert.equal(
    withDocument([v], () => seekScript(500)),
    true,
  );
  assert.equal(v.currentTime, 100);
  const live = fakeVideo({ duration: Infinity });
  withDocument([live], () => seekScript(500));
  assert.equal(live.currentTime, 500);
  const inShadow = fakeVideo();
  assert.equal(
    withDocument([], () => seekScript(7), { shadow: [inShadow] }),
    true,
  );
  assert.equal(inShadow.currentTime, 7);
  assert.equal(
    withDocument([], () => seekScript(7)),
    false,
  );
  for (const bad of [NaN, -1, 'x', undefined, Infinity]) {
    assert.equal(
      withDocument([fakeVideo()], () => seekScript(bad)),
      false,
      String(bad),
    );
  }
  assert.equal(
    withDocument([fakeVideo()], () => seekScript('15')),
    true,
  );
});

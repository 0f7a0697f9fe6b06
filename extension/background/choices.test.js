// node --test extension/background/choices.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { stripChoiceBlocks } from './choices.js';
import { Prng } from '../test-support/fuzz.js';

test('stripChoiceBlocks removes only trailing choice blocks', () => {
  assert.equal(stripChoiceBlocks('Answer.\n\n```choices\n["a","b"]\n```\n'), 'Answer.\n');
  assert.equal(stripChoiceBlocks('Answer.\n<choices>\n- a\n</choices>'), 'Answer.');
  const keep = 'Code:\n```js\nx()\n```';
  assert.equal(stripChoiceBlocks(keep), keep);
  const mid = '```choices\n[1]\n```\nthen text';
  assert.equal(stripChoiceBlocks(mid), mid);
});

test('stripChoiceBlocks: the cases its regexes decided, pinned (issue 18 rewrote it as a scanner)', () => {
  const cases = [
    // any fence of 3+ backticks or tildes, info `choices` / `keepsake-choices` in any case, then anything
    ['A\n~~~~ Keepsake-Choices extra\n- x\n~~~~', 'A'],
    ['A\n```CHOICES\n1\n```  \n\t\n', 'A'],
    ['A\n  \t```choices\n1\n  ```', 'A'],
    // the fence need not start a line: the cut keeps what precedes it on the line
    ['Answer ```choices\n1\n```', 'Answer'],
    // `choices` must end the word; `keepsake-` only as a prefix
    ['A\n```choicesx\n1\n```', 'A\n```choicesx\n1\n```'],
    ['A\n```choices-1\n1\n```', 'A'],
    ['A\n```keepsake-choice\n1\n```', 'A\n```keepsake-choice\n1\n```'],
    // the closing fence is the opening one exactly, alone on the last line
    ['A\n```choices\n1\n````', 'A\n```choices\n1\n````'],
    ['A\n```choices\n1\n~~~', 'A\n```choices\n1\n~~~'],
    ['A\n```choices\n1\n``` x', 'A\n```choices\n1\n``` x'],
    ['A\n```choices\n```', 'A\n```choices\n```'], // no line between: no body newline
    ['A\n```choices\n\n```', 'A'],
    // a longer opening run pairs with a shorter closing one from inside the run
    ['````choices\nx\n```', '`'],
    // the leftmost opening that pairs with the end wins: earlier blocks go too
    ['T\n```choices\n1\n```\nmid\n```choices\n2\n```', 'T'],
    // blocks of different kinds come off one after another, tagged ones too
    ['T\n~~~choices\nx\n~~~\n```choices\ny\n```\n<choices a="1">z</choices>\n', 'T'],
    // tags: `<choices` ending the word, its first `>` before the closing tag
    ['T <CHOICES>x</Choices>\u00a0', 'T'],
    ['T\n<choices>x</choices> y', 'T\n<choices>x</choices> y'],
    ['T\n<choicesx>x</choices>', 'T\n<choicesx>x</choices>'],
    ['T\n<choices</choices>', 'T\n<choices</choices>'],
    ['T\n<choices></choices>', 'T'],
    // ASCII case folding only (no `u` flag): the Kelvin sign is not a k
    ['T\n```\u212aeepsake-choices\n1\n```', 'T\n```\u212aeepsake-choices\n1\n```'],
    ['', ''],
  ];
  for (const [input, want] of cases) assert.equal(stripChoiceBlocks(input), want, JSON.stringify(input));
  assert.equal(stripChoiceBlocks(null), '');
});

test('stripChoiceBlocks gives what its old regexes gave, on random and block-shaped texts', () => {
  // The regexes it replaced (issue 18: cubic backtracking), as the oracle on short texts.
  const legacy = (text) => {
    const fenced = /\n?[ \t]*(`{3,}|~{3,})[ \t]*(?:keepsake-)?choices\b[^\n]*\n[\s\S]*?\n[ \t]*\1[ \t]*\s*$/i;
    const tagged = /\n?[ \t]*<choices\b[^>]*>[\s\S]*?<\/choices>\s*$/i;
    let out = text;
    for (;;) {
      const next = out.replace(fenced, '').replace(tagged, '');
      if (next === out) return out;
      out = next;
    }
  };
  const rng = new Prng(18);
  const TOKENS = ['```', '````', '~~~', '`', '~', 'choices', 'CHOICES', 'keepsake-', 'keepsake-choices', '<choices', '</choices>',
    '>', '<', '\n', '\n', ' ', '\t', 'x', '_', '1', '-', '\r', '\u00a0', '\u2028', '\u212a', '\ufeff'];
  const some = (max) => Array.from({ length: rng.int(0, max) }, () => rng.pick(TOKENS)).join('');
  const ws = () => rng.pick(['', ' ', '\t', '\n', '\n ']);
  const fence = () => (rng.chance(0.5) ? '`' : '~').repeat(rng.int(2, 6));
  const block = () => {
    if (rng.chance(0.3)) {
      return ws() + rng.pick(['<choices', '<CHOICES', '<choicesx', '<choices ']) + some(3) + rng.pick(['>', '', '>>']) + some(4) +
        rng.pick(['</choices>', '</CHOICES>', '</choices', '']) + rng.pick(['', '\n', ' \u00a0', 'x']);
    }
    const f = fence();
    return ws() + f + rng.pick(['', ' ', '\t']) + rng.pick(['', 'keepsake-', 'KeepSake-']) +
      rng.pick(['choices', 'CHOICES', 'choice', 'choicesx', 'choices-1']) + some(2) + rng.pick(['\n', '', '\n\n']) + some(5) +
      rng.pick(['\n', '', ' ']) + rng.pick(['', ' ', '\t']) + (rng.chance(0.6) ? f : fence()) + rng.pick(['', ' ', '\n', '\n\n ', 'x']);
  };
  let stripped = 0;
  for (let i = 0; i < 20_000; i++) {
    let text = some(i % 2 ? 30 : 6);
    if (i % 2 === 0) for (let k = rng.int(1, 5); k > 0; k--) text += block() + (rng.chance(0.3) ? some(3) : '');
    const want = legacy(text);
    if (want !== text) stripped++;
    assert.equal(stripChoiceBlocks(text), want, JSON.stringify(text));
  }
  assert.ok(stripped > 1000, `the generator makes texts that lose blocks (${stripped})`);
});

test('stripChoiceBlocks on the crafted reply of issue 18 (its work is bounded in lib/redos.test.js, shape choicesFences)', () => {
  // "```choices\n" × n, "\n```", k spaces and "x": 8.4 KB held the worker for about a minute
  const crafted = '```choices\n'.repeat(250) + '\n```' + ' '.repeat(5600) + 'x';
  assert.equal(stripChoiceBlocks(crafted), crafted);
  const tail = crafted + '\n```';
  assert.equal(stripChoiceBlocks(tail), '');
});

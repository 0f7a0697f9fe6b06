// node --test extension/lib/webvtt.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { parseTimestamp } from './pills.js';
import { cueText, parseVttTime, parseWebVtt, stamp, transcriptLines } from './webvtt.js';

test('WebVTT timestamps: with and without hours; anything else is not one', () => {
  assert.equal(parseVttTime('00:42.000'), 42);
  assert.equal(parseVttTime('01:02:03.500'), 3723.5);
  assert.equal(parseVttTime(' 10:00.250 '), 600.25);
  for (const bad of ['0:42.000', '00:42', '00:60.000', '60:00.000', '00:42.5', 'aa:bb.ccc', '1:2:3:4.000', '', null]) {
    assert.equal(parseVttTime(bad), null, String(bad));
  }
});

test('cue text loses its tags, decodes entities and joins its lines', () => {
  assert.equal(cueText('<v Ann>Hello <i>there</i></v>\nsecond  line'), 'Hello there second line');
  assert.equal(cueText('a &amp; b &lt;c&gt; &#65;&#x42; &nbsp;x &bogus; &'), 'a & b <c> AB x &bogus; &');
  assert.equal(cueText('karaoke <00:00:01.000>word <00:00:01.500>by word'), 'karaoke word by word');
  assert.equal(cueText('cut <unclosed tag'), 'cut');
});

test('a file: cues in order with ids, settings, notes and styles skipped; CRLF and a BOM read', () => {
  const vtt = [
    '\ufeffWEBVTT - lamp room',
    '',
    'NOTE written by the volunteers',
    '',
    'STYLE',
    '::cue { color: yellow }',
    '',
    'intro',
    '00:00.000 --> 00:04.000 line:90%',
    'The lamp room, <b>1961</b>.',
    '',
    '00:42.000 --> 00:47.500',
    '<v Edith>All well,',
    'light burning.',
    '',
    'broken',
    '00:50 --> 00:51.000',
    'skipped: bad timing',
    '',
    '01:00:05.000 --> 01:00:06.000',
    'An hour in.',
    '',
  ].join('\r\n');
  const { cues, truncated, error } = parseWebVtt(vtt);
  assert.equal(error, undefined);
  assert.equal(truncated, false);
  assert.deepEqual(cues, [
    { start: 0, end: 4, text: 'The lamp room, 1961.' },
    { start: 42, end: 47.5, text: 'All well, light burning.' },
    { start: 3605, end: 3606, text: 'An hour in.' },
  ]);
  assert.deepEqual(parseWebVtt('<html>not captions</html>'), { cues: [], truncated: false, error: 'not a WebVTT file (no WEBVTT line)' });
});

test('the transcript: one stamped line per cue, repeats of rolling captions once; every stamp is a pill', () => {
  const lines = transcriptLines([
    { start: 42, text: 'All well.' },
    { start: 0, text: 'Start.' },
    { start: 43, text: 'All well.' },
    { start: 3605.9, text: 'An hour in.' },
  ]);
  assert.equal(lines, '[00:00] Start.\n[00:42] All well.\n[1:00:05] An hour in.');
  for (const l of lines.split('\n')) assert.notEqual(parseTimestamp(l.slice(0, l.indexOf(']') + 1)), null, l);
  assert.equal(parseTimestamp(stamp(42)), 42);
  assert.equal(parseTimestamp(stamp(5999)), 5999);
});

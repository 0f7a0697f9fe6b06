import test from 'node:test';
import assert from 'node:assert/strict';
import { highlightSegments, normalizeQuery } from './snippet.js';

test('marks every case-insensitive hit', () => {
  assert.deepEqual(highlightSegments('…the Cat sat on the cat mat…', 'cat'), [
    { text: '…the ', match: false },
    { text: 'Cat', match: true },
    { text: ' sat on the ', match: false },
    { text: 'cat', match: true },
    { text: ' mat…', match: false },
  ]);
});

test('hit at both ends, adjacent hits merge', () => {
  assert.deepEqual(highlightSegments('abab', 'ab'), [{ text: 'abab', match: true }]);
  assert.deepEqual(highlightSegments('xab', 'AB'), [{ text: 'x', match: false }, { text: 'ab', match: true }]);
});

test('CJK one- and two-character queries', () => {
  assert.deepEqual(highlightSegments('今天天气很好', '天气'), [
    { text: '今天', match: false }, { text: '天气', match: true }, { text: '很好', match: false },
  ]);
  assert.deepEqual(highlightSegments('猫和狗', '狗'), [{ text: '猫和', match: false }, { text: '狗', match: true }]);
});

test('query whitespace is collapsed like the snippet', () => {
  assert.equal(normalizeQuery('  hello \n  world '), 'hello world');
  assert.deepEqual(highlightSegments('say hello world now', 'hello\n\nworld'), [
    { text: 'say ', match: false }, { text: 'hello world', match: true }, { text: ' now', match: false },
  ]);
});

test('empty query or text; regex characters are literal', () => {
  assert.deepEqual(highlightSegments('abc', '  '), [{ text: 'abc', match: false }]);
  assert.deepEqual(highlightSegments('', 'a'), []);
  assert.deepEqual(highlightSegments('a.b*c', '.b*'), [{ text: 'a', match: false }, { text: '.b*', match: true }, { text: 'c', match: false }]);
  assert.deepEqual(highlightSegments(null, 'a'), []);
});

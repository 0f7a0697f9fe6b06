import test from 'node:test';
import assert from 'node:assert/strict';
import { planReconcile, entryKey } from './mirror.js';

const keys = (s) => s.split('');

test('no change reuses everything', () => {
  const r = planReconcile(keys('abc'), keys('abc'));
  assert.equal(r.kind, 'none');
  assert.deepEqual(r.reuse, [0, 1, 2]);
});

test('append keeps rendered bubbles', () => {
  const r = planReconcile(keys('abc'), keys('abcde'));
  assert.equal(r.kind, 'append');
  assert.deepEqual(r.reuse, [0, 1, 2, -1, -1]);
  assert.deepEqual(planReconcile([], keys('ab')).reuse, [-1, -1]);
});

test('middle delete shifts the tail', () => {
  const r = planReconcile(keys('abcde'), keys('abde'));
  assert.equal(r.kind, 'splice');
  assert.deepEqual(r.reuse, [0, 1, 3, 4]);
});

test('truncate keeps the head', () => {
  const r = planReconcile(keys('abcde'), keys('ab'));
  assert.deepEqual(r.reuse, [0, 1]);
});

test('edit of one entry re-renders only it', () => {
  const r = planReconcile(keys('abcde'), keys('abXde'));
  assert.deepEqual(r.reuse, [0, 1, -1, 3, 4]);
});

test('front trim plus append shifts all bubbles', () => {
  const r = planReconcile(keys('abcdef'), keys('cdefgh'));
  assert.equal(r.kind, 'shift');
  assert.deepEqual(r.reuse, [2, 3, 4, 5, -1, -1]);
  const one = planReconcile(keys('abcdef'), keys('bcdefg'));
  assert.deepEqual(one.reuse, [1, 2, 3, 4, 5, -1]);
});

test('front trim with repeated keys picks the largest overlap', () => {
  const r = planReconcile(keys('aaab'), keys('aabc'));
  assert.deepEqual(r.reuse, [1, 2, 3, -1]);
});

test('unrelated lists reset; clearing reuses nothing', () => {
  assert.equal(planReconcile(keys('abc'), keys('xyz')).kind, 'reset');
  assert.deepEqual(planReconcile(keys('abc'), []).reuse, []);
});

test('entryKey distinguishes content and stamps', () => {
  assert.notEqual(entryKey({ role: 'user', content: 'a' }), entryKey({ role: 'user', content: 'a', imagesSeen: true }));
  assert.equal(entryKey({ role: 'user', content: 'a' }), entryKey({ role: 'user', content: 'a' }));
});

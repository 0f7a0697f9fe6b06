import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canFocus, replacementFor } from './focus.js';

/** A control as focus.js sees it. */
const ctl = (name, { disabled = false, hidden = false, connected = true } = {}) => ({
  name, disabled, isConnected: connected, closest: (s) => (s === '[hidden]' && hidden ? {} : null), getClientRects: () => (hidden ? [] : [{}]),
});

test('canFocus: connected, enabled and shown only', () => {
  assert.equal(canFocus(ctl('a')), true);
  assert.equal(canFocus(ctl('a', { disabled: true })), false);
  assert.equal(canFocus(ctl('a', { hidden: true })), false);
  assert.equal(canFocus(ctl('a', { connected: false })), false);
  assert.equal(canFocus(null), false);
});

test('replacementFor: the same control in the same message, the other arrow, Stop, the composer', () => {
  const stop = ctl('stop', { hidden: true });
  const composer = ctl('composer');
  const found = {};
  const find = (sel) => found[sel] ?? null;
  const at = (i, id) => `[data-testid="bubble"][data-index="${i}"] [data-testid="${id}"]`;

  // ‹ re-rendered: the new ‹ of the same message
  found[at(1, 'version-prev')] = ctl('prev');
  found[at(1, 'version-next')] = ctl('next');
  assert.equal(replacementFor({ testid: 'version-prev', index: '1' }, { find, stop, composer }).name, 'prev');
  // ‹ now disabled (version 1 shown): ›
  found[at(1, 'version-prev')] = ctl('prev', { disabled: true });
  assert.equal(replacementFor({ testid: 'version-prev', index: '1' }, { find, stop, composer }).name, 'next');
  // Retry gone while a reply is written: Stop
  const streaming = ctl('stop');
  assert.equal(replacementFor({ testid: 'retry', index: '2' }, { find, stop: streaming, composer }).name, 'stop');
  // Stop hidden (the reply ended): the composer
  assert.equal(replacementFor({ testid: 'stop', index: null }, { find, stop, composer }).name, 'composer');
  // nothing can take it
  assert.equal(replacementFor({ testid: 'stop', index: null }, { find, stop, composer: ctl('c', { disabled: true }) }), null);
});

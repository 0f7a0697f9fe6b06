import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';

import { registerHandler, dispatchMessage, senderAllowed, _resetHandlersForTests } from './handlers.js';
import { HostError } from '../lib/protocol.js';

const SELF = { id: 'ejaedcjldiggibmnammkkoekohjgefkk', origin: 'chrome-extension://ejaedcjldiggibmnammkkoekohjgefkk/' };
const PAGE = { id: SELF.id, url: `${SELF.origin}sidepanel/sidepanel.html` };
const OPTIONS_TAB = { id: SELF.id, url: `${SELF.origin}options/options.html`, tab: { id: 4 } };
const CONTENT = { id: SELF.id, url: 'https://example.com/', tab: { id: 7, url: 'https://example.com/' }, frameId: 0 };

beforeEach(() => _resetHandlersForTests());

test('senderAllowed', () => {
  assert.equal(senderAllowed(PAGE, 'extension', SELF), true);
  assert.equal(senderAllowed(OPTIONS_TAB, 'extension', SELF), true);
  assert.equal(senderAllowed(CONTENT, 'extension', SELF), false);
  assert.equal(senderAllowed(CONTENT, 'content', SELF), true);
  assert.equal(senderAllowed(PAGE, 'content', SELF), false);
  assert.equal(senderAllowed(OPTIONS_TAB, 'content', SELF), false);
  assert.equal(senderAllowed(CONTENT, 'any', SELF), true);
  assert.equal(senderAllowed({ ...PAGE, id: 'other' }, 'any', SELF), false);
});

test('dispatch: ok and error replies; unknown kinds are left alone', async () => {
  registerHandler('x.ok', async (msg) => msg.n * 2);
  registerHandler('x.fail', async () => {
    throw new HostError('host_exited', 'gone', { browserMessage: 'Native host has exited.' });
  });
  registerHandler('x.bug', () => {
    throw new TypeError('oops');
  });
  assert.deepEqual(await dispatchMessage({ kind: 'x.ok', n: 2 }, PAGE, SELF), { ok: true, result: 4 });
  assert.deepEqual(await dispatchMessage({ kind: 'x.fail' }, PAGE, SELF), {
    ok: false,
    error: { code: 'host_exited', message: 'gone', browserMessage: 'Native host has exited.' },
  });
  assert.deepEqual(await dispatchMessage({ kind: 'x.bug' }, PAGE, SELF), {
    ok: false,
    error: { code: 'internal', message: 'oops', browserMessage: null },
  });
  assert.equal(dispatchMessage({ kind: 'nope' }, PAGE, SELF), null);
  assert.equal(dispatchMessage(undefined, PAGE, SELF), null);
});

test('content scripts cannot call extension-only handlers', async () => {
  let called = false;
  registerHandler('host', () => {
    called = true;
  });
  const r = await dispatchMessage({ kind: 'host', op: 'history.clear' }, CONTENT, SELF);
  assert.equal(r.ok, false);
  assert.equal(r.error.code, 'bad_request');
  assert.equal(called, false);
});

test('registerHandler refuses duplicates and bad input', () => {
  registerHandler('a', () => 1);
  assert.throws(() => registerHandler('a', () => 2), /already registered/);
  assert.throws(() => registerHandler('', () => 2), TypeError);
  assert.throws(() => registerHandler('b', null), TypeError);
});

test('the wire shape of what a handler throws: anything with a code keeps it; anything else is internal', async () => {
  registerHandler('x.coded', () => {
    throw { code: 'busy', message: 'm' }; // eslint-disable-line no-throw-literal
  });
  registerHandler('x.text', async () => {
    throw 'text'; // eslint-disable-line no-throw-literal
  });
  assert.deepEqual(await dispatchMessage({ kind: 'x.coded' }, PAGE, SELF), { ok: false, error: { code: 'busy', message: 'm', browserMessage: null } });
  assert.deepEqual(await dispatchMessage({ kind: 'x.text' }, PAGE, SELF), { ok: false, error: { code: 'internal', message: 'text', browserMessage: null } });
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTurnActions } from './turn-actions.js';

function setup({ reply = { streamId: 'st-1', userIndex: 2 }, fail = null, switchFail = null, streaming = false } = {}) {
  const log = [];
  const storage = {
    history: {
      async switchVersion(args) {
        log.push(['history.switchVersion', args]);
        if (switchFail) throw switchFail;
        return { switched: true, ...args };
      },
    },
  };
  const actions = createTurnActions({
    workerCall: async (kind, payload) => {
      log.push([kind, payload]);
      if (fail) throw fail;
      return reply;
    },
    storage,
    beginStream: (id) => log.push(['beginStream', id]),
    refreshHistory: async () => { log.push(['refresh']); },
    clearNotices: () => log.push(['clearNotices']),
    notice: (text, opts) => log.push(['notice', text, opts?.kind]),
    noticeFor: (err, what) => log.push(['noticeFor', what, err.code]),
    isStreaming: () => streaming,
  });
  return { actions, log };
}

test('Regenerate asks the worker for chat.regenerate {index} (not a resend of the user turn)', async () => {
  const { actions, log } = setup();
  const button = { disabled: false, isConnected: true };
  await actions.regenerate(3, button);
  assert.deepEqual(log, [['clearNotices'], ['chat.regenerate', { index: 3 }], ['beginStream', 'st-1'], ['refresh']]);
  assert.equal(button.disabled, false, 'enabled again');
  assert.equal(log.some(([k]) => k === 'chat.resend'), false);
});

test('Retry asks for chat.retry {index} of the failed user entry', async () => {
  const { actions, log } = setup();
  await actions.retry(4);
  assert.deepEqual(log, [['clearNotices'], ['chat.retry', { index: 4 }], ['beginStream', 'st-1'], ['refresh']]);
});

test('a worker that refuses says why and re-reads', async () => {
  const err = Object.assign(new Error('no provider'), { code: 'no_provider' });
  const { actions, log } = setup({ fail: err });
  await actions.retry(1);
  assert.deepEqual(log, [['clearNotices'], ['chat.retry', { index: 1 }], ['noticeFor', 'Could not retry', 'no_provider'], ['refresh']]);
});

test('‹ › switches with history.switchVersion and re-renders; not while a reply streams', async () => {
  const fork = { forkEntryId: 'u2', chosen: 2, versions: 3 };
  let { actions, log } = setup();
  assert.equal(await actions.switchVersion(fork, 1), true);
  assert.deepEqual(log, [['history.switchVersion', { forkEntryId: 'u2', version: 1 }], ['refresh']]);

  ({ actions, log } = setup({ switchFail: Object.assign(new Error('gone'), { code: 'not_found' }) }));
  assert.equal(await actions.switchVersion(fork, 3), false);
  assert.deepEqual(log, [['history.switchVersion', { forkEntryId: 'u2', version: 3 }], ['notice', 'That version is no longer in this chat', 'info'], ['refresh']]);

  ({ actions, log } = setup({ streaming: true }));
  assert.equal(await actions.switchVersion(fork, 1), false);
  assert.deepEqual(log, []);
});

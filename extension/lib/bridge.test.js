import { test } from 'node:test';
import assert from 'node:assert/strict';

import { createBridge, replyToResult } from './bridge.js';
import { HostError } from './protocol.js';
import { FakeClock, fakeEvent, flush } from '../test-support/fakes.js';

/** A fake chrome.runtime for a page: sendMessage answered by `answer`, connect() recorded. */
function fakeRuntime(answer = async () => ({ ok: true, result: null })) {
  const ports = [];
  const sent = [];
  const runtime = {
    lastError: undefined,
    onMessage: fakeEvent(),
    sendMessage: async (msg) => {
      sent.push(msg);
      return answer(msg);
    },
    connect: ({ name }) => {
      const p = {
        name,
        disconnected: false,
        onMessage: fakeEvent(),
        onDisconnect: fakeEvent(),
        disconnect() {
          this.disconnected = true;
        },
      };
      ports.push(p);
      return p;
    },
  };
  return { runtime, ports, sent };
}

test('replyToResult', () => {
  assert.equal(replyToResult({ ok: true, result: 5 }), 5);
  assert.throws(
    () => replyToResult({ ok: false, error: { code: 'host_not_found', message: 'm', browserMessage: 'Specified native messaging host not found.' } }),
    (e) => e instanceof HostError && e.code === 'host_not_found' && e.browserMessage.startsWith('Specified'),
  );
  assert.throws(() => replyToResult(undefined), (e) => e.code === 'disconnected');
});

test('hostCall and workerCall send the documented messages', async () => {
  const { runtime, sent } = fakeRuntime(async (m) => ({ ok: true, result: m.kind }));
  const b = createBridge({ runtime });
  assert.equal(await b.hostCall('history.meta', { a: 1 }, { timeoutMs: 5 }), 'host');
  assert.deepEqual(sent[0], { kind: 'host', op: 'history.meta', args: { a: 1 }, opts: { timeoutMs: 5 } });
  assert.equal(await b.workerCall('chat.send', { text: 'hi' }), 'chat.send');
  assert.deepEqual(sent[1], { kind: 'chat.send', text: 'hi' });
});

test('errors from the worker become HostErrors; a missing worker is disconnected', async () => {
  const { runtime } = fakeRuntime(async () => ({ ok: false, error: { code: 'busy', message: 'locked' } }));
  const b = createBridge({ runtime });
  await assert.rejects(b.hostCall('history.clear'), (e) => e instanceof HostError && e.code === 'busy' && e.message === 'locked');
  runtime.sendMessage = async () => {
    throw new Error('Could not establish connection. Receiving end does not exist.');
  };
  await assert.rejects(b.hostCall('history.meta'), (e) => e.code === 'disconnected' && /Receiving end/.test(e.browserMessage));
});

test('onWorkerEvent delivers events and reconnects after a worker restart', async () => {
  const clock = new FakeClock();
  const { runtime, ports } = fakeRuntime();
  const b = createBridge({ runtime, setTimeout: clock.setTimeout, clearTimeout: clock.clearTimeout, reconnectDelayMs: 100 });
  const seen = [];
  const off = b.onWorkerEvent((e) => seen.push(e));
  assert.equal(ports.length, 1);
  assert.equal(ports[0].name, 'events');
  ports[0].onMessage.fire({ type: 'worker.hello', instance: 'w1' });
  ports[0].onMessage.fire({ type: 'changed', seq: 1, areas: { history: true } });
  assert.deepEqual(seen, [
    { type: 'events.connected', instance: 'w1', reconnected: false },
    { type: 'changed', seq: 1, areas: { history: true } },
  ]);

  // the worker stops when idle: no immediate reconnect (it would wake the worker again)
  ports[0].onDisconnect.fire();
  await clock.tick(10_000);
  assert.equal(ports.length, 1);

  // a new worker announces itself: reconnect after the small delay
  runtime.onMessage.fire({ kind: 'worker.awake', instance: 'w2' });
  await clock.tick(99);
  assert.equal(ports.length, 1);
  await clock.tick(1);
  assert.equal(ports.length, 2);
  ports[1].onMessage.fire({ type: 'worker.hello', instance: 'w2' });
  assert.deepEqual(seen.at(-1), { type: 'events.connected', instance: 'w2', reconnected: true });

  // the awake of the worker we are already connected to changes nothing
  runtime.onMessage.fire({ kind: 'worker.awake', instance: 'w2' });
  await clock.tick(1000);
  assert.equal(ports.length, 2);

  // a restart announced before our old port noticed: the stale port is replaced
  runtime.onMessage.fire({ kind: 'worker.awake', instance: 'w3' });
  assert.equal(ports[1].disconnected, true);
  await clock.tick(100);
  assert.equal(ports.length, 3);

  off();
  assert.equal(ports[2].disconnected, true);
  assert.equal(runtime.onMessage.size, 0);
  runtime.onMessage.fire({ kind: 'worker.awake', instance: 'w4' });
  await clock.tick(1000);
  assert.equal(ports.length, 3, 'no reconnect after unsubscribe');
});

test('the next call reopens a closed events port first', async () => {
  const { runtime, ports } = fakeRuntime();
  const b = createBridge({ runtime });
  const off = b.onWorkerEvent(() => {});
  ports[0].onDisconnect.fire();
  await b.hostCall('history.meta');
  assert.equal(ports.length, 2);
  await b.hostCall('history.meta');
  assert.equal(ports.length, 2, 'an open port is kept');
  off();
  await flush();
});

test('other pages\' messages are ignored by the events listener', async () => {
  const { runtime, ports } = fakeRuntime();
  const b = createBridge({ runtime });
  b.onWorkerEvent(() => {});
  ports[0].onMessage.fire({ type: 'worker.hello', instance: 'w1' });
  const r = runtime.onMessage.size;
  assert.equal(r, 1);
  let answered = false;
  runtime.onMessage.fire({ kind: 'host', op: 'history.meta' }, {}, () => {
    answered = true;
  });
  assert.equal(answered, false);
  assert.equal(ports.length, 1);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { NativePort, HostError } from './native-port.js';
import { FakeClock, FakeNativePort, flush } from '../test-support/fakes.js';
import { PROTOCOL_VERSION } from './protocol.js';

const HELLO = { name: 'keepsake-host', version: '0.1.0', protocolVersion: PROTOCOL_VERSION, dbPath: '/tmp/k.db', dbError: null };
const BROWSER = {
  notFound: 'Specified native messaging host not found.',
  forbidden: 'Access to the specified native messaging host is forbidden.',
  invalidName: 'Invalid native messaging host name specified.',
  exited: 'Native host has exited.',
  io: 'Error when communicating with the native messaging host.',
  failedStart: 'Failed to start native messaging host.',
  notRegistered: 'Native messaging host dev.keepsake.host is not registered.',
};

/** A NativePort on fake ports; every new port answers host.hello unless `hello` is false. */
function setup({ hello = HELLO, idleMs = 60_000, backoffMs = [250, 1000, 4000, 15000], timeoutFor = () => 5000 } = {}) {
  const clock = new FakeClock();
  const ports = [];
  const env = { lastError: undefined, hello };
  const connect = () => {
    const p = new FakeNativePort();
    p.onPost = (msg) => {
      if (msg.op === 'host.hello' && env.hello) queueMicrotask(() => p.reply(msg.id, env.hello));
    };
    ports.push(p);
    return p;
  };
  const np = new NativePort({ connect, clock, idleMs, backoffMs, timeoutFor, lastError: () => env.lastError });
  const states = [];
  np.on('state', (s) => states.push(s.state));
  /** The host side closes the port with this browser message. */
  const hostCloses = (port, message) => {
    env.lastError = message;
    port.onDisconnect.fire(port);
    env.lastError = undefined;
  };
  return { np, clock, ports, env, states, hostCloses };
}

function settle(promise) {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error) => ({ ok: false, error }),
  );
}

test('connects lazily: nothing happens until the first request, which is preceded by host.hello', async () => {
  const { np, ports, states } = setup();
  assert.equal(np.state, 'idle');
  assert.equal(ports.length, 0);

  const p = np.request('history.meta');
  await flush();
  assert.equal(ports.length, 1);
  const port = ports[0];
  assert.deepEqual(port.sent.map((m) => m.op), ['host.hello', 'history.meta']);
  assert.deepEqual(port.sent[0].args, {});
  assert.equal(np.state, 'open');
  assert.deepEqual(np.hello, HELLO);
  assert.deepEqual(states, ['connecting', 'open']);

  port.reply(port.lastOf('history.meta').id, { length: 0 });
  assert.deepEqual(await p, { length: 0 });
  assert.equal(ports.length, 1, 'one port for many requests');
});

test('hello failure surfaces as state error and rejects the waiting request', async () => {
  const { np, ports, env, states } = setup({ hello: null });
  const r = settle(np.request('history.meta'));
  await flush();
  const port = ports[0];
  assert.deepEqual(port.sent.map((m) => m.op), ['host.hello'], 'requests wait for the handshake');
  port.replyError(port.sent[0].id, 'internal', 'boom');
  const out = await r;
  assert.equal(out.ok, false);
  assert.ok(out.error instanceof HostError);
  assert.equal(out.error.code, 'internal');
  assert.equal(np.state, 'error');
  assert.equal(states.at(-1), 'error');
  assert.equal(port.disconnected, true, 'the failed port is closed');
  assert.equal(np.lastError.code, 'internal');
  void env;
});

test('hello with another protocol version is a protocol_mismatch error', async () => {
  const { np } = setup({ hello: { ...HELLO, protocolVersion: PROTOCOL_VERSION + 1 } });
  const out = await settle(np.request('history.meta'));
  assert.equal(out.error.code, 'protocol_mismatch');
  assert.equal(np.state, 'error');
});

test('replies are matched by id, out of order', async () => {
  const { np, ports } = setup();
  const a = np.request('settings.get', { keys: ['a'] });
  const b = np.request('settings.get', { keys: ['b'] });
  const c = np.request('history.meta');
  await flush();
  const port = ports[0];
  const [, ra, rb, rc] = port.sent;
  assert.deepEqual(ra.args, { keys: ['a'] });
  const ids = new Set([ra.id, rb.id, rc.id]);
  assert.equal(ids.size, 3, 'distinct ids');
  port.reply(rc.id, 'C');
  port.replyError(ra.id, 'bad_request', 'nope');
  port.reply(rb.id, 'B');
  assert.equal(await c, 'C');
  assert.equal(await b, 'B');
  await assert.rejects(a, (e) => e instanceof HostError && e.code === 'bad_request' && e.message === 'nope' && e.op === 'settings.get');
});

test('chunked replies are reassembled, multi-byte characters included', async () => {
  const { np, ports } = setup();
  const p = np.request('history.get');
  await flush();
  const port = ports[0];
  const id = port.lastOf('history.get').id;
  const result = { entries: [{ role: 'user', content: 'héllo 世界 😀 "quoted" \\ end' }], length: 1 };
  const text = JSON.stringify({ id, ok: true, result });
  // cut so that one piece ends inside the emoji's surrogate pair and another inside "世界"
  const emoji = text.indexOf('😀');
  const cjk = text.indexOf('界');
  const cuts = [0, cjk, emoji + 1, text.length];
  const pieces = cuts.slice(0, -1).map((from, i) => text.slice(from, cuts[i + 1]));
  assert.equal(pieces[0].at(-1), '世');
  assert.equal(pieces[1].charCodeAt(pieces[1].length - 1), 0xd83d, 'piece ends inside a surrogate pair');
  assert.equal(pieces[2].charCodeAt(0), 0xde00);
  // each piece survives a JSON frame on its own (lone surrogates are escaped), as over the wire
  for (const piece of pieces) assert.equal(JSON.parse(JSON.stringify({ data: piece })).data, piece);
  pieces.forEach((data, index) => port.deliver({ id, chunk: { index, count: pieces.length }, data }));
  assert.deepEqual(await p, result);
});

test('chunk pieces that arrive out of order fail the request with host_io', async () => {
  const { np, ports } = setup();
  const p = np.request('history.get');
  await flush();
  const port = ports[0];
  const id = port.lastOf('history.get').id;
  port.deliver({ id, chunk: { index: 1, count: 2 }, data: '}' });
  await assert.rejects(p, (e) => e.code === 'host_io');
});

test('a request times out on its own; the port stays open and usable', async () => {
  const { np, ports, clock } = setup({ timeoutFor: (op) => (op === 'history.meta' ? 1000 : 5000) });
  const lost = settle(np.request('history.meta'));
  await flush();
  await clock.tick(999);
  const other = np.request('settings.get', { keys: ['x'] });
  await clock.tick(1);
  const out = await lost;
  assert.equal(out.error.code, 'timeout');
  assert.equal(out.error.op, 'history.meta');
  assert.equal(np.state, 'open');
  const port = ports[0];
  assert.equal(port.disconnected, false);
  // the late reply is ignored, the other request still completes
  port.reply(port.lastOf('history.meta').id, { length: 9 });
  port.reply(port.lastOf('settings.get').id, { x: 1 });
  assert.deepEqual(await other, { x: 1 });
  assert.equal(ports.length, 1);
});

test('opts.timeoutMs overrides the per-operation timeout', async () => {
  const { np, clock } = setup();
  const r = settle(np.request('history.meta', {}, { timeoutMs: 10 }));
  await flush();
  await clock.tick(10);
  assert.equal((await r).error.code, 'timeout');
});

test('64 MiB synchronous throw → too_large_outbound, port still usable', async () => {
  const { np, ports } = setup();
  await np.open();
  const port = ports[0];
  port.throwOnPost = (msg) =>
    msg.op === 'storage.import' ? new Error('Message exceeded maximum allowed size of 64MiB.') : undefined;
  await assert.rejects(
    np.request('storage.import', { document: {} }),
    (e) => e instanceof HostError && e.code === 'too_large_outbound' && /64MiB/.test(e.browserMessage),
  );
  assert.equal(np.state, 'open');
  assert.equal(np.pendingCount, 0);
  const ok = np.request('history.meta');
  await flush();
  port.reply(port.lastOf('history.meta').id, { length: 1 });
  assert.deepEqual(await ok, { length: 1 });
  assert.equal(ports.length, 1);
});

for (const [message, code] of [
  [BROWSER.notFound, 'host_not_found'],
  [BROWSER.notRegistered, 'host_not_found'],
  [BROWSER.forbidden, 'host_forbidden'],
  [BROWSER.exited, 'host_exited'],
  [BROWSER.failedStart, 'host_exited'],
  [BROWSER.io, 'host_io'],
  [BROWSER.invalidName, 'disconnected'],
  [undefined, 'disconnected'],
]) {
  test(`disconnect "${message}" rejects every pending request with ${code}`, async () => {
    const { np, ports, hostCloses, states } = setup();
    const reqs = [np.request('history.meta'), np.request('sessions.list'), np.request('history.get')].map(settle);
    await flush();
    hostCloses(ports[0], message);
    const outs = await Promise.all(reqs);
    for (const out of outs) {
      assert.equal(out.ok, false);
      assert.ok(out.error instanceof HostError);
      assert.equal(out.error.code, code);
      assert.equal(out.error.browserMessage, message ?? null);
    }
    assert.deepEqual(outs.map((o) => o.error.op), ['history.meta', 'sessions.list', 'history.get']);
    assert.equal(np.state, 'error');
    assert.equal(states.at(-1), 'error');
    assert.equal(np.lastError.code, code);
  });
}

test('host not found while connecting: the handshake and the waiting request reject', async () => {
  const { np, ports, hostCloses } = setup({ hello: null });
  const r = settle(np.request('history.meta'));
  await flush();
  hostCloses(ports[0], BROWSER.notFound);
  const out = await r;
  assert.equal(out.error.code, 'host_not_found');
  assert.equal(np.state, 'error');
});

test('reconnects with backoff on the next request, and never loops while idle', async () => {
  const { np, ports, hostCloses, clock, env } = setup();
  await np.open();
  hostCloses(ports[0], BROWSER.exited);
  assert.equal(np.state, 'error');

  // idle: no reconnect however long we wait
  await clock.tick(60_000);
  assert.equal(ports.length, 1, 'no reconnect loop with nothing pending');

  // first failure was long ago: the next request reconnects at once
  const a = np.request('history.meta');
  await flush();
  assert.equal(ports.length, 2);
  ports[1].reply(ports[1].lastOf('history.meta').id, 1);
  assert.equal(await a, 1);
  assert.equal(np.state, 'open');

  // host missing: two consecutive failures → 250 ms, then 1000 ms waits
  env.hello = null;
  hostCloses(ports[1], BROWSER.exited); // failure 1 (a success had reset the count)
  const b = settle(np.request('history.meta'));
  await flush();
  assert.equal(ports.length, 2, 'waits 250 ms before reconnecting');
  await clock.tick(249);
  assert.equal(ports.length, 2);
  await clock.tick(1);
  assert.equal(ports.length, 3);
  hostCloses(ports[2], BROWSER.notFound); // failure 2
  assert.equal((await b).error.code, 'host_not_found');

  env.hello = HELLO;
  const c = np.request('history.meta');
  await flush();
  await clock.tick(999);
  assert.equal(ports.length, 3, 'second consecutive failure waits 1000 ms');
  await clock.tick(1);
  assert.equal(ports.length, 4);
  await flush();
  ports[3].reply(ports[3].lastOf('history.meta').id, 2);
  assert.equal(await c, 2);
  assert.equal(np.state, 'open');

  // success resets the backoff
  hostCloses(ports[3], BROWSER.exited);
  await clock.tick(250);
  const d = np.request('history.meta');
  await flush();
  assert.equal(ports.length, 5);
  ports[4].reply(ports[4].lastOf('history.meta').id, 3);
  assert.equal(await d, 3);
});

test('resetBackoff lets the next request connect immediately', async () => {
  const { np, ports, hostCloses } = setup();
  await np.open();
  hostCloses(ports[0], BROWSER.exited);
  np.resetBackoff();
  const p = np.open();
  await flush();
  assert.equal(ports.length, 2);
  assert.deepEqual(await p, HELLO);
});

test('idle disconnect after idleMs with nothing pending; the next request reconnects', async () => {
  const { np, ports, clock, states } = setup({ idleMs: 1000 });
  const p = np.request('history.meta');
  await flush();
  await clock.tick(900); // pending: the idle timer is not armed
  assert.equal(ports[0].disconnected, false);
  ports[0].reply(ports[0].lastOf('history.meta').id, 1);
  await p;
  await clock.tick(999);
  assert.equal(ports[0].disconnected, false);
  await clock.tick(1);
  assert.equal(ports[0].disconnected, true);
  assert.equal(np.state, 'idle');
  assert.equal(states.at(-1), 'idle');
  assert.equal(clock.timerCount, 0, 'nothing left armed while idle');

  const q = np.request('history.meta');
  await flush();
  assert.equal(ports.length, 2, 'reconnects without backoff after an idle close');
  ports[1].reply(ports[1].lastOf('history.meta').id, 2);
  assert.equal(await q, 2);
});

test('activity postpones the idle disconnect', async () => {
  const { np, ports, clock } = setup({ idleMs: 1000 });
  await np.open();
  await clock.tick(800);
  const p = np.request('history.meta');
  await flush();
  ports[0].reply(ports[0].lastOf('history.meta').id, 1);
  await p;
  await clock.tick(800);
  assert.equal(ports[0].disconnected, false);
  await clock.tick(200);
  assert.equal(ports[0].disconnected, true);
});

test('close() rejects pending requests with disconnected and goes idle', async () => {
  const { np, ports } = setup();
  const r = settle(np.request('history.meta'));
  await flush();
  np.close();
  const out = await r;
  assert.equal(out.error.code, 'disconnected');
  assert.equal(np.state, 'idle');
  assert.equal(ports[0].disconnected, true);
});

test('close() during a backoff wait rejects the waiting request', async () => {
  const { np, ports, hostCloses } = setup();
  await np.open();
  hostCloses(ports[0], BROWSER.exited);
  const r = settle(np.request('history.meta'));
  await flush();
  np.close();
  assert.equal((await r).error.code, 'disconnected');
  assert.equal(ports.length, 1);
});

test('close() during a backoff wait, then an immediate reconnect, opens a fresh port', async () => {
  // regression: the cancelled attempt used to be reused, so Retry after installing the host did nothing
  const { np, ports, hostCloses } = setup();
  await np.open();
  hostCloses(ports[0], BROWSER.exited);
  const r = settle(np.request('history.meta'));
  await flush();
  np.close();
  np.resetBackoff();
  const reopened = settle(np.open());
  await flush();
  assert.equal((await r).error.code, 'disconnected');
  assert.equal(ports.length, 2, 'a new port right away');
  assert.equal((await reopened).ok, true);
  assert.equal(np.state, 'open');
});

test('connectNative throwing is a typed error and state error', async () => {
  const clock = new FakeClock();
  const np = new NativePort({
    clock,
    connect: () => {
      throw new Error("Access to the specified native messaging host is forbidden.");
    },
    lastError: () => undefined,
  });
  await assert.rejects(np.request('history.meta'), (e) => e.code === 'host_forbidden');
  assert.equal(np.state, 'error');
});

test('host changed events are emitted as "changed"; replies are not', async () => {
  const { np, ports } = setup();
  const seen = [];
  const off = np.on('changed', (e) => seen.push(e));
  await np.open();
  const ev = { event: 'changed', seq: 42, areas: { settings: ['theme'], history: true }, clientRequestId: 'c-17' };
  ports[0].deliver(ev);
  assert.deepEqual(seen, [ev]);
  off();
  ports[0].deliver({ ...ev, seq: 43 });
  assert.equal(seen.length, 1, 'unsubscribed');
});

// The host answers hello before it opens the database (`dbOpened: false`) and sends a `db` event
// with the outcome right after; the port is open only once that is known.
const EARLY_HELLO = { ...HELLO, dbOpened: false, schemaVersion: null, latestSchemaVersion: 9 };

test('a hello before the database: open() waits for the db event and hello carries its outcome', async () => {
  const { np, ports, states } = setup({ hello: EARLY_HELLO });
  const seenStates = [];
  np.on('state', (s) => seenStates.push(s));
  const opened = settle(np.open());
  await flush();
  assert.equal(np.state, 'connecting', 'not open before the db event');
  const dbError = { code: 'db_too_new', message: 'written by a newer keepsake-host' };
  ports[0].deliver({ event: 'db', dbOpened: true, schemaVersion: null, latestSchemaVersion: 9, dbError });
  const out = await opened;
  assert.equal(out.ok, true);
  assert.deepEqual(out.value.dbError, dbError);
  assert.equal(out.value.dbOpened, true);
  assert.equal(np.hello.dbPath, HELLO.dbPath, 'the rest of hello is kept');
  assert.deepEqual(states, ['connecting', 'open']);
  assert.deepEqual(seenStates.at(-1).hello.dbError, dbError, 'the open state carries the error');
});

test('a db event before the handshake resumes is kept; a later one updates hello and the state', async () => {
  const { np, ports, env, states } = setup({ hello: null });
  const opened = np.open();
  await flush();
  const port = ports[0];
  port.deliver({ id: port.sent[0].id, ok: true, result: EARLY_HELLO });
  port.deliver({ event: 'db', dbOpened: true, schemaVersion: null, latestSchemaVersion: 9, dbError: { code: 'busy', message: 'locked' } });
  const hello = await opened;
  assert.equal(hello.dbError.code, 'busy');
  // a later request retried the open: the host says so, pages get a fresh state
  port.deliver({ event: 'db', dbOpened: true, schemaVersion: 9, latestSchemaVersion: 9, dbError: null });
  assert.equal(np.hello.dbError, null);
  assert.equal(np.hello.schemaVersion, 9);
  assert.deepEqual(states, ['connecting', 'open', 'open']);
  env.hello = HELLO;
});

test('a port that closes while the db event is awaited rejects the open', async () => {
  const { np, ports, hostCloses } = setup({ hello: EARLY_HELLO });
  const opened = settle(np.open());
  await flush();
  hostCloses(ports[0], BROWSER.exited);
  const out = await opened;
  assert.equal(out.ok, false);
  assert.equal(np.state, 'error');
});

test('frames from a replaced port are ignored', async () => {
  const { np, ports, hostCloses } = setup();
  const seen = [];
  np.on('changed', (e) => seen.push(e));
  await np.open();
  const old = ports[0];
  hostCloses(old, BROWSER.exited);
  np.resetBackoff();
  await np.open();
  old.deliver({ event: 'changed', seq: 1, areas: {} });
  hostCloses(old, BROWSER.io);
  assert.equal(seen.length, 0);
  assert.equal(np.state, 'open');
});

test('a throwing listener does not break the port', async () => {
  const { np, ports } = setup();
  const seen = [];
  const original = console.error;
  console.error = () => {};
  try {
    np.on('changed', () => {
      throw new Error('listener bug');
    });
    np.on('changed', (e) => seen.push(e.seq));
    await np.open();
    ports[0].deliver({ event: 'changed', seq: 5, areas: {} });
  } finally {
    console.error = original;
  }
  assert.deepEqual(seen, [5]);
});

test('HostError round-trips through its wire shape', () => {
  const e = new HostError('host_io', 'broken', { browserMessage: BROWSER.io });
  const back = HostError.from(JSON.parse(JSON.stringify(e)));
  assert.ok(back instanceof HostError);
  assert.equal(back.code, 'host_io');
  assert.equal(back.message, 'broken');
  assert.equal(back.browserMessage, BROWSER.io);
});

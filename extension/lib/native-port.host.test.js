// Smoke test against the real host: NativePort talks to `keepsake-host serve` over real pipes
// through an adapter that behaves like Chrome's native port (4-byte little-endian length + UTF-8
// JSON; a frame over 1,048,576 bytes closes the port with Chrome's message; an invalid JSON frame is
// dropped silently; process exit → `Native host has exited.`). Skipped when the binary is not built.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';

import { NativePort } from './native-port.js';
import { createStorage } from './storage.js';
import { OPS, PROTOCOL_VERSION } from './protocol.js';
import { HOST_SKIP as SKIP, MAX_FRAME, MSG_EXITED, ProcessPort, cleanUpHosts, spawnHost, tempDir } from '../test-support/process-port.js';

after(cleanUpHosts);

/** A NativePort whose connect() spawns `keepsake-host serve` on a temp database. */
function realHost() {
  const dir = tempDir('keepsake-ext-');
  const db = join(dir, 'data', 'keepsake.db');
  const env = { lastError: undefined };
  const ports = [];
  const connect = () => {
    const child = spawnHost(db);
    const p = new ProcessPort(child, env);
    ports.push(p);
    return p;
  };
  const np = new NativePort({ connect, idleMs: 600_000, backoffMs: [50], lastError: () => env.lastError });
  return { np, db, ports, storage: createStorage(np.request.bind(np)) };
}

function nextEvent(np, name, pred = () => true, ms = 10_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`no ${name} event within ${ms} ms`));
    }, ms);
    const off = np.on(name, (e) => {
      if (!pred(e)) return;
      clearTimeout(timer);
      off();
      resolve(e);
    });
  });
}

test('hello over real pipes: protocol 2, our database, every operation known to both sides', { skip: SKIP }, async () => {
  const { np, db } = realHost();
  try {
    const hello = await np.open();
    assert.equal(np.state, 'open');
    assert.equal(hello.name, 'keepsake-host');
    assert.equal(hello.protocolVersion, PROTOCOL_VERSION);
    assert.equal(hello.dbPath, db);
    assert.equal(hello.dbError, null);
    assert.deepEqual([...hello.ops].sort(), [...OPS].sort(), 'host ops == protocol.js ops');
  } finally {
    np.close();
  }
});

test('settings.set / settings.get round trip, with its changed event', { skip: SKIP }, async () => {
  const { np, storage } = realHost();
  try {
    const event = nextEvent(np, 'changed', (e) => e.clientRequestId === 'smoke-1');
    assert.deepEqual(await storage.settings.set({ map: { theme: 'dark', n: 3 }, clientRequestId: 'smoke-1' }), {});
    const ev = await event;
    assert.deepEqual(ev.areas.settings.sort(), ['n', 'theme']);
    assert.equal(typeof ev.seq, 'number');
    assert.deepEqual(await storage.settings.get({ keys: ['theme', 'n', 'absent'] }), { theme: 'dark', n: 3 });
    // a replayed id is not applied again and returns the recorded result
    assert.deepEqual(await storage.settings.set({ map: { theme: 'light' }, clientRequestId: 'smoke-1' }), {});
    assert.deepEqual(await storage.settings.get({ keys: ['theme'] }), { theme: 'dark' });
    await assert.rejects(storage.settings.get({ keys: [] }), (e) => e.code === 'bad_request');
    await assert.rejects(np.request('no.such'), (e) => e.code === 'unknown_op');
  } finally {
    np.close();
  }
});

test('a reply over 1 MiB arrives in chunks under the frame cap and is reassembled exactly', { skip: SKIP }, async () => {
  const { np, storage, ports } = realHost();
  try {
    // multi-byte characters, quotes, backslashes and control characters: the worst case for cutting
    const big = 'é😀世"\\\n\u0001x'.repeat(200_000);
    await storage.settings.set({ map: { big } });
    const before = ports[0].frames.length;
    const got = await storage.settings.get({ keys: ['big'] });
    assert.equal(got.big.length, big.length);
    assert.ok(got.big === big, 'reassembled value equals the stored one');
    const frames = ports[0].frames.slice(before);
    assert.ok(frames.length > 1, `chunked (${frames.length} frames)`);
    assert.ok(Math.max(...frames) <= MAX_FRAME, `every frame ≤ 1 MiB (max ${Math.max(...frames)})`);
    assert.equal(np.state, 'open');
  } finally {
    np.close();
  }
});

test('killing the host mid-request rejects the pending call; the next request reconnects', { skip: SKIP }, async () => {
  const { np, storage, ports } = realHost();
  try {
    await storage.settings.set({ map: { kept: true } });
    const states = [];
    np.on('state', (s) => states.push(s.state));
    const pending = np.request('settings.get', { keys: ['kept'] });
    ports[0].child.kill('SIGKILL');
    await assert.rejects(pending, (e) => e.code === 'host_exited' && e.browserMessage === MSG_EXITED);
    assert.equal(np.state, 'error');
    assert.deepEqual(states, ['error']);
    assert.equal(np.lastError.code, 'host_exited');

    assert.deepEqual(await storage.settings.get({ keys: ['kept'] }), { kept: true });
    assert.equal(ports.length, 2, 'a new host process');
    assert.equal(np.state, 'open');
  } finally {
    np.close();
  }
});

test('closing the port ends the host process normally', { skip: SKIP }, async () => {
  const { np, ports } = realHost();
  await np.open();
  const child = ports[0].child;
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  np.close();
  assert.equal(await exited, 0);
  assert.equal(np.state, 'idle');
});

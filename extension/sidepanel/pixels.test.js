// The panel's pixel path (pixels.js): attach arguments, the change filter, the panel's own port
// (fake, then the real keepsake-host beside a second "worker" process on the same database), and
// the 📷 flow with its fallback into the composer.

import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';

import { createChangeFilter, createPixels, onPanelChanges, screenshotToConversation } from './pixels.js';
import { NativePort } from '../lib/native-port.js';
import { HostError, PROTOCOL_VERSION } from '../lib/protocol.js';
import { createStorage } from '../lib/storage.js';
import { FakeClock, FakeNativePort, flush } from '../test-support/fakes.js';
import { HOST_SKIP, ProcessPort, cleanUpHosts, spawnHost, tempDir } from '../test-support/process-port.js';

const PREFIX = '[Page context attached by Keepsake]';
// 1×1 PNG (valid base64, canonical)
const RED = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const SHOT = `data:image/png;base64,${RED}`;

/** A BroadcastChannel look-alike pair: what one posts, the other's listeners get. */
function channelPair() {
  const make = () => {
    const ch = {
      other: null,
      listeners: new Set(),
      posted: [],
      closed: false,
      postMessage(data) {
        ch.posted.push(data);
        for (const fn of ch.other.listeners) fn({ data: structuredClone(data) });
      },
      addEventListener: (type, fn) => type === 'message' && ch.listeners.add(fn),
      removeEventListener: (type, fn) => ch.listeners.delete(fn),
      close() {
        ch.closed = true;
      },
    };
    return ch;
  };
  const a = make();
  const b = make();
  a.other = b;
  b.other = a;
  return [a, b];
}

/** createPixels over a FakeNativePort the test answers; ids are predictable. */
function fakePixels({ tabs } = {}) {
  const clock = new FakeClock();
  const ports = [];
  const port = new NativePort({
    connect: () => {
      const p = new FakeNativePort();
      p.onPost = (msg) => {
        if (msg.op === 'host.hello') queueMicrotask(() => p.reply(msg.id, { protocolVersion: PROTOCOL_VERSION, version: 'test', dbError: null }));
      };
      ports.push(p);
      return p;
    },
    clock,
    lastError: () => undefined,
  });
  const [mine, theirs] = channelPair();
  let n = 0;
  const pixels = createPixels({ port, tabs, currentWindow: -2, channel: mine, newId: () => `id-${++n}`, timers: clock });
  return { pixels, port, ports, clock, mine, theirs };
}

describe('attach arguments', () => {
  /** The `history.attach` arguments the panel's port sends for `shot` (answered, announced). */
  async function attachArgsOf(shot) {
    const { pixels, ports } = fakePixels();
    const p = pixels.attach(shot);
    await flush();
    const req = ports[0].lastOf('history.attach');
    ports[0].reply(req.id, { attachId: 'a1', length: 1, index: 0 });
    await flush();
    ports[0].deliver({ event: 'changed', seq: 1, areas: { history: true }, clientRequestId: req.args.clientRequestId });
    await p;
    return req.args;
  }

  test('a screenshot attach: mode screenshot, body (screenshot), the picture after the text', async () => {
    const { fallbackName, ...args } = await attachArgsOf({ dataUrl: SHOT, url: 'https://example.com/a?b=1', title: '  Dashboard ' });
    assert.match(fallbackName, /\d{4}/, 'a chat this attach creates is named by the date when nothing names it');
    assert.deepEqual(args, {
      ctx: { url: 'https://example.com/a?b=1', title: 'Dashboard', mode: 'screenshot', body: '(screenshot)' },
      images: [SHOT],
      placement: 'end',
      clientRequestId: 'id-1',
    });
  });

  test('credentials are redacted, a missing title falls back to the URL, a missing tab to empty strings', async () => {
    assert.deepEqual((await attachArgsOf({ dataUrl: SHOT, url: 'https://me:secret@example.com/x', title: '' })).ctx, {
      url: 'https://example.com/x',
      title: 'https://example.com/x',
      mode: 'screenshot',
      body: '(screenshot)',
    });
    assert.deepEqual((await attachArgsOf({ dataUrl: SHOT })).ctx, { url: '', title: '', mode: 'screenshot', body: '(screenshot)' });
  });
});

describe('change filter', () => {
  test('each seq passes once; events without a seq always pass; memory is bounded', () => {
    const fresh = createChangeFilter({ max: 3 });
    assert.equal(fresh({ seq: 1 }), true);
    assert.equal(fresh({ seq: 1 }), false);
    assert.equal(fresh({ seq: 2 }), true);
    assert.equal(fresh({ areas: {} }), true);
    assert.equal(fresh({ areas: {} }), true);
    assert.equal(fresh(null), true);
    fresh({ seq: 3 });
    fresh({ seq: 4 }); // 1 is forgotten
    assert.equal(fresh({ seq: 4 }), false);
    assert.equal(fresh({ seq: 1 }), true);
  });
});

describe('the panel port (fake host)', () => {
  test('attach: hello, then history.attach with the screenshot and a clientRequestId; announced by its event', async () => {
    const { pixels, ports, mine, theirs } = fakePixels();
    const heard = [];
    pixels.onChanged((c) => heard.push(c));
    const other = [];
    const stop = onPanelChanges((c) => other.push(c), { channel: theirs });
    const p = pixels.attach({ dataUrl: SHOT, url: 'https://example.com/', title: 'Home' });
    await flush();
    const port = ports[0];
    const req = port.lastOf('history.attach');
    const { fallbackName, ...args } = req.args;
    assert.equal(typeof fallbackName, 'string');
    assert.deepEqual(args, {
      ctx: { url: 'https://example.com/', title: 'Home', mode: 'screenshot', body: '(screenshot)' },
      images: [SHOT],
      placement: 'end',
      clientRequestId: 'id-1',
    });
    port.reply(req.id, { attachId: 'a1', length: 1, index: 0, summary: { needed: false, family: 'generic' } });
    await flush();
    port.deliver({ event: 'changed', seq: 7, areas: { history: true }, clientRequestId: 'id-1' });
    assert.deepEqual(await p, { attachId: 'a1', index: 0, length: 1, announced: true });
    assert.deepEqual(heard, [{ seq: 7, areas: { history: true }, clientRequestId: 'id-1' }]);
    assert.deepEqual(mine.posted, heard, 'posted for the other panels');
    assert.deepEqual(other, heard, 'another panel hears it');
    // the host's own byte-budget pass follows with an event of its own: passed on as well
    port.deliver({ event: 'changed', seq: 8, areas: { history: true } });
    assert.equal(other.length, 2);
    stop();
    assert.equal(theirs.listeners.size, 0);
  });

  test('an attach answered from the host record (no event) says announced: false after the wait', async () => {
    const { pixels, ports, clock } = fakePixels();
    const p = pixels.attach({ dataUrl: SHOT, url: '', title: '' });
    await flush();
    const req = ports[0].lastOf('history.attach');
    ports[0].reply(req.id, { attachId: 'a1', length: 1, index: 0 });
    await flush();
    let settled = false;
    p.then(() => (settled = true));
    await clock.tick(999); // it waits 1 s for its event
    assert.equal(settled, false);
    await clock.tick(1);
    assert.deepEqual(await p, { attachId: 'a1', index: 0, length: 1, announced: false });
  });

  test('a failed attach rejects with the host error; the retry of a lost reply reuses the clientRequestId', async () => {
    const { pixels, ports, clock } = fakePixels();
    const p = pixels.attach({ dataUrl: SHOT });
    await flush();
    ports[0].replyError(ports[0].lastOf('history.attach').id, 'too_large', 'image over 32 MiB');
    await assert.rejects(p, (e) => e instanceof HostError && e.code === 'too_large');

    const q = pixels.attach({ dataUrl: SHOT });
    await flush();
    const first = ports[0].lastOf('history.attach');
    ports[0].onDisconnect.fire(ports[0]); // the host went away before it answered
    await clock.tick(250); // the port's reconnect backoff
    await flush();
    const again = ports[1].lastOf('history.attach');
    assert.equal(again.args.clientRequestId, first.args.clientRequestId);
    ports[1].reply(again.id, { attachId: 'a2', length: 1, index: 0 });
    ports[1].deliver({ event: 'changed', seq: 3, areas: { history: true }, clientRequestId: first.args.clientRequestId });
    assert.equal((await q).announced, true);
  });

  test('capture: the tab window (else the current one), PNG; anything but an image is an error', async () => {
    const calls = [];
    const tabs = {
      captureVisibleTab: async (windowId, opts) => {
        calls.push([windowId, opts]);
        return windowId === 9 ? 'not an image' : SHOT;
      },
    };
    const { pixels } = fakePixels({ tabs });
    assert.equal(await pixels.capture({ windowId: 4 }), SHOT);
    assert.equal(await pixels.capture(null), SHOT);
    assert.deepEqual(calls, [[4, { format: 'png' }], [-2, { format: 'png' }]]);
    await assert.rejects(pixels.capture({ windowId: 9 }), /no image came back/);
  });
});

describe('the 📷 flow', () => {
  const tab = { id: 1, windowId: 2, url: 'https://example.com/', title: 'Example' };
  const stubPixels = ({ capture = async () => SHOT, attach = async () => ({ attachId: 'a', index: 0, length: 1, announced: true }) } = {}) => ({
    capture,
    attach,
  });

  test('attached: the note names the tab; nothing goes into the composer', async () => {
    const given = [];
    const seen = [];
    const r = await screenshotToConversation({
      pixels: stubPixels({ attach: async (s) => (seen.push(s), { attachId: 'a', index: 0, length: 1, announced: true }) }),
      tab,
      toComposer: (u) => given.push(u),
    });
    assert.deepEqual(seen, [{ dataUrl: SHOT, url: tab.url, title: tab.title }]);
    assert.deepEqual(r, { attached: { attachId: 'a', index: 0, length: 1, announced: true }, note: 'Screenshot of “Example” attached.', kind: 'info', error: null });
    assert.deepEqual(given, []);
  });

  test('the capture fails: said so, nothing attached', async () => {
    const err = new Error('Cannot access contents of url "chrome://settings/".');
    const r = await screenshotToConversation({ pixels: stubPixels({ capture: async () => Promise.reject(err) }), tab, toComposer: () => true });
    assert.equal(r.attached, null);
    assert.equal(r.kind, 'error');
    assert.equal(r.note, 'Could not take a screenshot: Cannot access contents of url "chrome://settings/".');
    assert.equal(r.error, err);
  });

  test('the attach fails: the picture goes into the composer (not lost), the note explains', async () => {
    const given = [];
    const err = new HostError('host_not_found', 'Specified native messaging host not found.');
    const r = await screenshotToConversation({
      pixels: stubPixels({ attach: async () => Promise.reject(err) }),
      tab,
      toComposer: (u) => (given.push(u), true),
    });
    assert.deepEqual(given, [SHOT]);
    assert.equal(r.kind, 'warn');
    assert.equal(r.error, err);
    assert.equal(
      r.note,
      'Could not attach the screenshot: The Keepsake host is not installed for this browser. It is in the composer instead and goes with your next message.',
    );
  });

  test('the attach fails and the composer refuses it too: an error that says it was not kept', async () => {
    const r = await screenshotToConversation({
      pixels: stubPixels({ attach: async () => Promise.reject(new HostError('disk_full', 'disk full')) }),
      tab: null,
      toComposer: () => false,
    });
    assert.equal(r.kind, 'error');
    assert.equal(r.note, 'Could not attach the screenshot: The disk is full. The composer has no room for it either, so it was not kept.');
  });
});

// ---------------------------------------------------------------------------------------------
// Against the real keepsake-host: the panel's process and the worker's process on one database

const SKIP = HOST_SKIP;
after(cleanUpHosts);

/** A NativePort whose connect() spawns `keepsake-host serve` on `db` (one process per port). */
function hostPort(db) {
  const env = { lastError: undefined };
  const ports = [];
  const port = new NativePort({
    connect: () => {
      const child = spawnHost(db);
      const p = new ProcessPort(child, env);
      ports.push(p);
      return p;
    },
    idleMs: 600_000,
    backoffMs: [50],
    lastError: () => env.lastError,
  });
  return { port, ports };
}

function nextChange(port, pred, ms = 5_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`no matching changed event within ${ms} ms`));
    }, ms);
    const off = port.on('changed', (e) => {
      if (!pred(e)) return;
      clearTimeout(timer);
      off();
      resolve(e);
    });
  });
}

test('real host: the panel attaches on its own process; the worker process hears it and reads it back', { skip: SKIP }, async () => {
  const dir = tempDir('keepsake-pixels-');
  const db = join(dir, 'keepsake.db');
  const worker = hostPort(db);
  const workerStorage = createStorage(worker.port.request.bind(worker.port));
  const panel = hostPort(db);
  const [mine] = channelPair();
  mine.other = { listeners: new Set() };
  const pixels = createPixels({ port: panel.port, tabs: { captureVisibleTab: async () => SHOT }, channel: mine, newId: () => 'panel-attach-1' });
  try {
    await workerStorage.history.append({ entry: { role: 'user', content: 'before' } });
    // the worker's own append is announced on its port too (maybe after this line): wait for the panel's
    const workerHeard = nextChange(worker.port, (e) => e.clientRequestId === 'panel-attach-1', 10_000);
    const tab = { windowId: 1, url: 'https://u:p@example.com/dash', title: 'Dash' };
    const r = await screenshotToConversation({ pixels, tab, toComposer: () => assert.fail('nothing for the composer') });
    assert.equal(r.kind, 'info', r.note);
    assert.equal(r.attached.announced, true, 'its changed event arrived on the panel port');
    assert.equal(r.attached.index, 1);
    assert.equal(panel.ports.length, 1);
    assert.notEqual(panel.ports[0].child.pid, worker.ports[0].child.pid, 'two host processes');

    const ev = await workerHeard; // the worker's host announces the other process's commit
    assert.equal(typeof ev.seq, 'number');
    assert.equal(ev.areas.history, true);
    assert.equal(mine.posted.some((c) => c.seq === ev.seq), true, 'the same seq went to the other panels');

    const { entries } = await workerStorage.history.get({ images: 'ref' });
    assert.equal(entries.length, 2);
    const [text, image] = entries[1].content;
    assert.equal(text.text, `${PREFIX}\nURL: https://example.com/dash\nTitle: Dash\nMode: screenshot\n---\n\n(screenshot)`);
    assert.match(image.image_url.url, /^keepsake-image:sha256:[0-9a-f]{64}$/);
    assert.equal(entries[1].attachId, r.attached.attachId);
    const got = await workerStorage.images.get({ ref: image.image_url.url });
    assert.deepEqual(got, { mime: 'image/png', bytes: RED });
  } finally {
    pixels.close();
    worker.port.close();
  }
});

test('onPanelChanges ignores what is not a change; without BroadcastChannel it is a no-op', () => {
  const ch = { listeners: new Set(), addEventListener: (t, fn) => ch.listeners.add(fn), removeEventListener: (t, fn) => ch.listeners.delete(fn) };
  const got = [];
  const stop = onPanelChanges((c) => got.push(c), { channel: ch });
  for (const fn of ch.listeners) {
    fn({ data: null });
    fn({ data: 'x' });
    fn({ data: { seq: 1 } });
    fn({ data: { seq: 2, areas: { history: true } } });
  }
  assert.deepEqual(got, [{ seq: 2, areas: { history: true } }]);
  stop();
  assert.equal(ch.listeners.size, 0);
  assert.equal(typeof onPanelChanges(() => {}, { channel: null }), 'function');
});

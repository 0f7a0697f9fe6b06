// Wiring test of the service worker: sw.js is imported under a fake `chrome` whose connectNative
// returns a fake native port, and driven through its listeners like Chrome would.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';

import { FakeNativePort, fakeChrome, fakeEvent, flush } from '../test-support/fakes.js';
import { PROTOCOL_VERSION } from '../lib/protocol.js';

const ID = 'ejaedcjldiggibmnammkkoekohjgefkk';
const ORIGIN = `chrome-extension://${ID}/`;
const PAGE = { id: ID, url: `${ORIGIN}sidepanel/sidepanel.html` };
const CONTENT = { id: ID, url: 'https://example.com/a', frameId: 0, tab: { id: 7, url: 'https://example.com/a' } };
const HELLO = { name: 'keepsake-host', version: '0.1.0', protocolVersion: PROTOCOL_VERSION, dbPath: '/tmp/k.db', dbError: null };

const world = { natives: [], toPages: [], panelBehavior: null, hostAnswers: new Map(), menus: [] };

function fakePagePort(name, sender) {
  return {
    name,
    sender,
    received: [],
    disconnected: false,
    onMessage: fakeEvent(),
    onDisconnect: fakeEvent(),
    postMessage(m) {
      this.received.push(m);
    },
    disconnect() {
      this.disconnected = true;
    },
  };
}

/** Deliver a runtime message as Chrome would and wait for the async sendResponse. */
function send(msg, sender) {
  return new Promise((resolve) => {
    const results = [];
    let async = false;
    for (const fn of [...chrome.runtime.onMessage._listeners()]) {
      const r = fn(msg, sender, (reply) => resolve(reply));
      results.push(r);
      if (r === true) async = true;
    }
    if (!async) resolve('no async reply');
  });
}

let chrome;
/** Set when a module sw.js imports (written by others, e.g. lib/llm.js) does not exist yet. */
let missingModule = null;

/** Run `fn` unless sw.js could not be loaded because a sibling module is still missing. */
function swTest(name, fn) {
  test(name, async (t) => {
    if (missingModule) {
      t.skip(`sw.js cannot load yet: ${missingModule}`);
      return;
    }
    await fn(t);
  });
}

before(async () => {
  const base = fakeChrome({ tabs: new Map([[7, { id: 7, url: 'https://example.com/a' }]]) });
  const onMessage = fakeEvent();
  const listeners = new Set();
  const origAdd = onMessage.addListener;
  onMessage.addListener = (fn) => {
    listeners.add(fn);
    origAdd(fn);
  };
  onMessage._listeners = () => listeners;
  chrome = {
    ...base,
    runtime: {
      id: ID,
      lastError: undefined,
      getURL: (p) => `${ORIGIN}${p}`,
      onMessage,
      onConnect: fakeEvent(),
      onInstalled: fakeEvent(),
      sendMessage: async (m) => {
        world.toPages.push(m);
        throw new Error('Could not establish connection. Receiving end does not exist.');
      },
      connectNative: (name) => {
        assert.equal(name, 'dev.keepsake.host');
        const p = new FakeNativePort();
        p.onPost = (msg) => {
          const answer = msg.op === 'host.hello' ? HELLO : world.hostAnswers.get(msg.op);
          if (answer !== undefined) queueMicrotask(() => p.reply(msg.id, answer));
        };
        world.natives.push(p);
        return p;
      },
    },
    contextMenus: {
      removeAll: async () => {
        world.menus.length = 0;
      },
      create: (props, done) => {
        world.menus.push(props.id);
        done?.();
      },
      onClicked: fakeEvent(),
    },
    commands: { onCommand: fakeEvent() },
    sidePanel: {
      setPanelBehavior: async (o) => {
        world.panelBehavior = o;
      },
    },
  };
  globalThis.chrome = chrome;
  globalThis.self = globalThis;
  try {
    await import('./sw.js');
  } catch (e) {
    if (e?.code !== 'ERR_MODULE_NOT_FOUND') throw e;
    missingModule = e.message;
  }
});

swTest('top-level setup: listeners, panel behaviour, wake announcement, ready flag', async () => {
  assert.equal(self.__keepsakeReady, true);
  assert.equal(chrome.runtime.onMessage.size, 1);
  assert.equal(chrome.runtime.onConnect.size, 1);
  assert.equal(chrome.runtime.onInstalled.size, 1);
  await flush();
  assert.deepEqual(world.panelBehavior, { openPanelOnActionClick: true });
  assert.equal(world.toPages[0].kind, 'worker.awake');
  assert.equal(world.toPages[0].instance, self.__keepsake.instance);
  assert.equal(world.natives.length, 0, 'the host is not started at wake');
  assert.equal(chrome.tabs.onUpdated.size, 0, 'no tab listeners at wake');
  assert.equal(chrome.contextMenus.onClicked.size, 1, 'the selection menu is heard at top level');
  assert.equal(chrome.commands.onCommand.size, 1, 'keyboard commands are heard at top level');
  assert.deepEqual(world.menus, [], 'menus are made on install, not on every wake');
  chrome.runtime.onInstalled.fire({ reason: 'install' });
  await flush();
  await flush();
  assert.deepEqual(world.menus, ['keepsake', 'keepsake-ask', 'keepsake-explain', 'keepsake-translate', 'keepsake-summarize', 'keepsake-pdf-link']);
});

swTest('host messages from pages go to the port; the reply has the documented shape', async () => {
  world.hostAnswers.set('history.meta', { length: 2, activeSessionId: '', changeSeq: 5 });
  const reply = await send({ kind: 'host', op: 'history.meta', args: {} }, PAGE);
  assert.deepEqual(reply, { ok: true, result: { length: 2, activeSessionId: '', changeSeq: 5 } });
  assert.equal(world.natives.length, 1);
  assert.deepEqual(world.natives[0].sent.map((m) => m.op), ['host.hello', 'history.meta']);

  const pending = send({ kind: 'host', op: 'sessions.get', args: { id: 'x' } }, PAGE);
  await flush();
  const port = world.natives[0];
  port.replyError(port.lastOf('sessions.get').id, 'not_found', 'no such session');
  assert.deepEqual(await pending, { ok: false, error: { code: 'not_found', message: 'no such session', browserMessage: null } });
});

swTest('content scripts cannot reach the host', async () => {
  const reply = await send({ kind: 'host', op: 'history.clear', args: {} }, CONTENT);
  assert.equal(reply.ok, false);
  assert.equal(reply.error.code, 'bad_request');
});

swTest('unknown kinds get no reply (other listeners may answer)', async () => {
  assert.equal(await send({ kind: 'not.mine' }, PAGE), 'no async reply');
});

swTest('events ports: greeting, host state, re-emitted changed events and state changes', async () => {
  const page = fakePagePort('events', PAGE);
  chrome.runtime.onConnect.fire(page);
  assert.equal(page.received[0].type, 'worker.hello');
  assert.equal(page.received[1].type, 'host.state');
  assert.equal(page.received[1].state, 'open');

  const rogue = fakePagePort('events', CONTENT);
  chrome.runtime.onConnect.fire(rogue);
  assert.equal(rogue.disconnected, true, 'content scripts get no events port');

  const port = world.natives[0];
  port.deliver({ event: 'changed', seq: 9, areas: { history: true }, clientRequestId: 'c1' });
  assert.deepEqual(page.received.at(-1), { type: 'changed', seq: 9, areas: { history: true }, clientRequestId: 'c1' });

  chrome.runtime.lastError = undefined;
  const msg = 'Native host has exited.';
  chrome.runtime.lastError = { message: msg };
  port.onDisconnect.fire(port);
  chrome.runtime.lastError = undefined;
  const st = page.received.at(-1);
  assert.equal(st.type, 'host.state');
  assert.equal(st.state, 'error');
  assert.equal(st.error.code, 'host_exited');
  assert.equal(st.error.explain.fix, 'keepsake-host doctor');

  const state = await send({ kind: 'host.state' }, PAGE);
  assert.equal(state.ok, true);
  assert.equal(state.result.state, 'error');
  assert.equal(state.result.error.browserMessage, msg);

  page.onDisconnect.fire(page);
  port.deliver({ event: 'changed', seq: 10, areas: {} }); // old port: ignored anyway
});

swTest('host.reconnect reconnects at once and reports the state', async () => {
  const before = world.natives.length;
  const reply = await send({ kind: 'host.reconnect' }, PAGE);
  assert.equal(reply.ok, true);
  assert.equal(reply.result.state, 'open');
  assert.equal(reply.result.error, null);
  assert.deepEqual(reply.result.hello, HELLO);
  assert.equal(world.natives.length, before + 1);
});

swTest('site.put from a content script, site.get by the page (tab id) and by the content script', async () => {
  const put = await send({ kind: 'site.put', data: { transcript: 'abc' } }, CONTENT);
  assert.deepEqual(put, { ok: true, result: true });
  assert.deepEqual(chrome.sessionData.get('site:7').data, { transcript: 'abc' });
  assert.equal(chrome.sessionData.get('site:7').url, 'https://example.com/a');
  assert.deepEqual(await send({ kind: 'site.get', tabId: 7 }, PAGE), { ok: true, result: { transcript: 'abc' } });
  assert.deepEqual(await send({ kind: 'site.get', tabId: 99 }, CONTENT), { ok: true, result: { transcript: 'abc' } }, 'own tab only');
  const fromPage = await send({ kind: 'site.put', data: {} }, PAGE);
  assert.equal(fromPage.ok, false, 'site.put is for content scripts');
  assert.equal(chrome.tabs.onRemoved.size, 1, 'tab listeners while a tab has data');
});

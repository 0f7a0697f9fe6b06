// The service worker (module). Everything below runs synchronously at top level, so every
// listener exists before the event that woke the worker is dispatched. It owns the one NativePort
// and routes page messages through a handler map (background/handlers.js).
//
// Messages: `{kind, ...}` → `{ok: true, result}` | `{ok: false, error: {code, message, browserMessage}}`.
// Events to pages (over `events` ports): `{type: 'worker.hello', instance}` first, then
// `{type: 'changed', seq, areas, clientRequestId?}`, `{type: 'host.state', state, hello, error, dbError}`,
// and whatever turns.js broadcasts (`chat.*`).

import { NativePort } from '../lib/native-port.js';
import { createStorage } from '../lib/storage.js';
import { explainHostError } from '../lib/protocol.js';
import { EVENTS_PORT_NAME, WORKER_AWAKE, WORKER_HELLO } from '../lib/bridge.js';
import { dispatchMessage, registerHandler, senderAllowed } from './handlers.js';
import { createSiteCache } from './site-cache.js';
import { installTurnHandlers } from './turns.js';
import { createSelectionActions } from './selection.js';
import { createPdfReader } from './pdf-attach.js';
import { actionOpensPanel } from '../lib/platform.js';
import { createRequestWatch } from '../lib/page-fetch.js';

/** This worker instance; pages use it to tell a restarted worker from the one they talk to. */
const INSTANCE = crypto.randomUUID();
const SELF = { id: chrome.runtime.id, origin: chrome.runtime.getURL('') };

const port = new NativePort();
const storage = createStorage(port.request.bind(port));
const siteCache = createSiteCache();
const eventPorts = new Set();

/**
 * Send an event to every connected page (`events` ports).
 * @param {object} event `{type, ...}`
 */
function broadcast(event) {
  for (const p of eventPorts) {
    try {
      p.postMessage(event);
    } catch {
      eventPorts.delete(p);
    }
  }
}

function describeError(err) {
  if (!err) return null;
  return {
    code: err.code,
    message: err.message,
    browserMessage: err.browserMessage ?? null,
    explain: explainHostError(err),
  };
}

/** Connection state for pages: state, the last hello, the last connection error, the db error. */
function hostState() {
  const hello = port.hello;
  const dbError = hello?.dbError ? { ...hello.dbError, explain: explainHostError(hello.dbError) } : null;
  return { state: port.state, hello, error: describeError(port.lastError), dbError };
}

port.on('changed', ({ event: _event, ...change }) => broadcast({ type: 'changed', ...change }));
port.on('state', () => broadcast({ type: 'host.state', ...hostState() }));

/** The page a content script's data describes (its frame's URL when top-level, else the tab's). */
function senderPageUrl(sender) {
  return sender.frameId === 0 ? sender.url : sender.tab?.url;
}

// ---- handlers -----------------------------------------------------------------------------------

// what the browser reports about the page fetches (redirect targets, server addresses): lib/page-fetch.js
const watch = createRequestWatch();
const pdfReader = createPdfReader({ watch });
const turns = installTurnHandlers(registerHandler, { port, storage, broadcast, siteCache }, { pdfReader, watch });
// a page's host call; a settings write relayed here also forgets the worker's turn settings
registerHandler('host', (msg) => {
  const done = port.request(msg.op, msg.args ?? {}, { timeoutMs: msg.opts?.timeoutMs });
  turns.relayed(msg.op, done);
  return done;
});
registerHandler('host.state', () => hostState());
// the context menu on selected text and the attach-page command (selection.js)
const selection = createSelectionActions({ storage, broadcast, attachPage: turns.attachPage, events: port });
registerHandler('chat.takeAsk', () => selection.takeAsk());
registerHandler('host.reconnect', async () => {
  port.close();
  port.resetBackoff();
  try {
    await port.open();
  } catch {
    // the state carries the error
  }
  return hostState();
});

registerHandler(
  'site.put',
  async (msg, sender) => {
    await siteCache.put(sender.tab.id, msg.data ?? null, { url: senderPageUrl(sender) });
    return true;
  },
  { from: 'content' },
);
registerHandler(
  'site.get',
  (msg, sender) => {
    // a content script reads only its own tab; extension pages name the tab
    const fromPage = senderAllowed(sender, 'extension', SELF);
    return siteCache.get(fromPage ? msg.tabId : sender.tab.id);
  },
  { from: 'any' },
);

// ---- listeners (top level, synchronous) ---------------------------------------------------------

chrome.runtime.onMessage.addListener((msg, sender, sendResponse) => {
  const reply = dispatchMessage(msg, sender, SELF);
  if (!reply) return false;
  reply.then(sendResponse);
  return true;
});

chrome.runtime.onConnect.addListener((p) => {
  if (p.name !== EVENTS_PORT_NAME) return;
  if (!senderAllowed(p.sender, 'extension', SELF)) {
    p.disconnect();
    return;
  }
  eventPorts.add(p);
  p.onDisconnect.addListener(() => {
    void chrome.runtime.lastError;
    eventPorts.delete(p);
  });
  p.postMessage({ type: WORKER_HELLO, instance: INSTANCE });
  p.postMessage({ type: 'host.state', ...hostState() });
});

chrome.contextMenus?.onClicked.addListener((info, tab) => {
  selection.clicked(info, tab).catch((e) => console.warn('keepsake: the selection could not be quoted', e));
});
chrome.commands?.onCommand.addListener((name, tab) => {
  selection.command(name, tab).catch((e) => console.warn('keepsake: command failed', e));
});

function openPanelOnActionClick() {
  actionOpensPanel({ chrome });
}

chrome.runtime.onInstalled.addListener(() => {
  openPanelOnActionClick();
  selection.installMenus().catch((e) => console.warn('keepsake: context menu not created', e));
});
openPanelOnActionClick();

// Tell open pages that a (new) worker runs, so they reopen their events port (lib/bridge.js).
chrome.runtime.sendMessage({ kind: WORKER_AWAKE, instance: INSTANCE }).catch(() => {});

// For e2e tests: poll `self.__keepsakeReady` before evaluating anything else in the worker.
self.__keepsake = { instance: INSTANCE, port, storage, siteCache, broadcast, hostState, selection, pdfReader, watch };
self.__keepsakeReady = true;

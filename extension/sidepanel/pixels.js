// Image bytes go from the side panel straight to keepsake-host, never through the service worker
// (issue 6, scenario 5: serialising data URLs onto the worker's native port was 98 % of its busy
// time while attaching screenshots).
//
// The 📷 button: the panel captures the tab itself (`chrome.tabs.captureVisibleTab`) and attaches
// the picture as a screenshot attach (storage-model §2.4: mode `screenshot`, body `(screenshot)`,
// the image after the text) with `history.attach` over a NativePort of its own (lib/native-port.js
// still opens every native port). This port starts a keepsake-host process of its own, and
// several processes share the one database (ARCHITECTURE.md). The port opens on the first attach
// and closes after PANEL_IDLE_MS with nothing pending, like the worker's. The host stores the
// picture and then runs the 8 MiB byte-budget pass (§6.5) itself, in that process.
//
// Changes: a write on this port is announced on this port (`changed`, right after the reply), and
// within 1 s on the worker's port while that one is open (the host's cross-process poller). So the
// panel feeds this port's events into its own `changed` handling and posts them on a
// BroadcastChannel for the other Keepsake pages (a panel in another window), which then hear of the
// write even while the worker's port is closed. A page sees the same commit up to three times
// (this port, the channel, the worker); `createChangeFilter` lets it act on each `seq` once.
//
// What stays on the worker: pasted, dropped and picked images go with a chat turn
// (`chat.send`), because the provider request is made in the worker and must carry them.

import { t } from '../lib/i18n.js';
import { NativePort } from '../lib/native-port.js';
import { createStorage } from '../lib/storage.js';
import { redactUrl } from '../lib/entries.js';
import { explainHostError } from '../lib/protocol.js';

/** `ctx.mode` and `ctx.body` of a screenshot attach (storage-model §2.4). */
const SCREENSHOT_MODE = 'screenshot';
const SCREENSHOT_BODY = '(screenshot)';
/** The panel's port closes after this long with nothing pending (the worker's uses the same). */
export const PANEL_IDLE_MS = 60_000;
/** How long an attach waits for its own `changed` event after the reply (it is the next frame). */
const ANNOUNCE_WAIT_MS = 1_000;
/** The BroadcastChannel on which panels pass their own port's `changed` events to each other. */
export const CHANGES_CHANNEL = 'keepsake.changes';

/**
 * `history.attach` arguments of a screenshot of the tab at `url` titled `title`.
 * @param {{dataUrl: string, url?: string, title?: string}} shot
 * @returns {{ctx: object, images: string[], placement: 'end'}}
 */
function screenshotAttachArgs({ dataUrl, url, title }) {
  const u = redactUrl(url);
  const t = (typeof title === 'string' && title.trim()) || u;
  return {
    ctx: { url: u, title: t, mode: SCREENSHOT_MODE, body: SCREENSHOT_BODY },
    images: [dataUrl],
    placement: 'end',
  };
}

/**
 * A filter that passes each change (`{seq}`) once; events without a numeric seq always pass.
 * Remembers the last `max` sequence numbers.
 * @param {{max?: number}} [o]
 * @returns {(ev: {seq?: number}) => boolean} true the first time a seq is seen
 */
export function createChangeFilter({ max = 512 } = {}) {
  const seen = new Set();
  return (ev) => {
    const seq = ev?.seq;
    if (typeof seq !== 'number' || !Number.isFinite(seq)) return true;
    if (seen.has(seq)) return false;
    seen.add(seq);
    if (seen.size > max) seen.delete(seen.values().next().value);
    return true;
  };
}

let pageChannel;
/** This page's one channel: it posts and listens on the same object, so it never hears itself. */
function defaultChannel() {
  if (pageChannel === undefined) pageChannel = typeof BroadcastChannel === 'function' ? new BroadcastChannel(CHANGES_CHANNEL) : null;
  return pageChannel;
}

/**
 * Listen to the `changed` events other panels post (their own port's writes).
 * @param {(change: object) => void} fn
 * @param {{channel?: any}} [o] a BroadcastChannel-like object (tests)
 * @returns {() => void} stop listening
 */
export function onPanelChanges(fn, { channel = defaultChannel() } = {}) {
  if (!channel) return () => {};
  const listener = (e) => {
    const ev = e?.data;
    if (ev && typeof ev === 'object' && ev.areas && typeof ev.areas === 'object') fn(ev);
  };
  channel.addEventListener('message', listener);
  return () => channel.removeEventListener('message', listener);
}

/**
 * The panel's pixel path: its own port, the capture, the attach.
 * @param {object} [o]
 * @param {NativePort} [o.port] default: a NativePort with PANEL_IDLE_MS (connects lazily)
 * @param {any} [o.tabs] chrome.tabs (captureVisibleTab)
 * @param {number|null} [o.currentWindow] chrome.windows.WINDOW_ID_CURRENT
 * @param {any} [o.channel] BroadcastChannel-like; null for none
 * @param {() => string} [o.newId] clientRequestId generator
 * @param {{setTimeout: Function, clearTimeout: Function}} [o.timers]
 */
export function createPixels({
  port = new NativePort({ idleMs: PANEL_IDLE_MS }),
  tabs = globalThis.chrome?.tabs,
  currentWindow = globalThis.chrome?.windows?.WINDOW_ID_CURRENT ?? null,
  channel = defaultChannel(),
  newId = () => crypto.randomUUID(),
  timers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h) },
} = {}) {
  const storage = createStorage(port.request.bind(port), { newId });
  /** clientRequestId → resolve, for attaches waiting for their own `changed` event */
  const waiting = new Map();

  port.on('changed', ({ event: _event, ...change }) => {
    if (change.clientRequestId) waiting.get(change.clientRequestId)?.();
    try {
      channel?.postMessage(change);
    } catch {
      /* a closed channel: other panels refresh on their next change */
    }
  });

  /**
   * The visible part of `tab`'s window as a PNG data URL (what the 📷 button attaches).
   * @param {{windowId?: number}|null} tab
   * @returns {Promise<string>}
   */
  async function capture(tab) {
    const windowId = Number.isInteger(tab?.windowId) ? tab.windowId : currentWindow;
    const dataUrl = await tabs.captureVisibleTab(windowId, { format: 'png' });
    if (typeof dataUrl !== 'string' || !/^data:image\//i.test(dataUrl)) throw new Error(t('pixelsNoImage'));
    return dataUrl;
  }

  /**
   * Attach a screenshot through this panel's port. Resolves once the host committed it, with
   * `announced: true` when its `changed` event arrived on this port (false when a retried write
   * was answered from the host's record, which announces nothing: the caller then re-reads).
   * @param {{dataUrl: string, url?: string, title?: string}} shot
   * @returns {Promise<{attachId: string, index: number, length: number, announced: boolean}>}
   */
  async function attach(shot) {
    const clientRequestId = newId();
    let heard = false;
    let wake = null;
    waiting.set(clientRequestId, () => {
      heard = true;
      wake?.();
    });
    // a click is a retry: do not wait out the backoff of an earlier failure
    port.resetBackoff();
    try {
      const res = await storage.history.attach({ ...screenshotAttachArgs(shot), clientRequestId });
      if (!heard) {
        await new Promise((resolve) => {
          const t = timers.setTimeout(resolve, ANNOUNCE_WAIT_MS);
          wake = () => {
            timers.clearTimeout(t);
            resolve();
          };
        });
      }
      return { attachId: res.attachId, index: res.index, length: res.length, announced: heard };
    } finally {
      waiting.delete(clientRequestId);
    }
  }

  return {
    capture,
    attach,
    /** This port's `changed` events (`{seq, areas, clientRequestId?}`). */
    onChanged: (fn) => port.on('changed', ({ event: _event, ...change }) => fn(change)),
    /** Connect now (the bench opens the port before its clock starts). */
    open: () => port.open(),
    /** Disconnect now (its host process exits). */
    close: () => port.close(),
    storage,
    port,
  };
}

let shared = null;

/** The panel's one pixel path (created on first use; its port connects on the first attach). */
export function panelPixels() {
  shared ??= createPixels();
  return shared;
}

function explainLine(err) {
  if (err && typeof err.code === 'string') return explainHostError(err).title;
  return String(err?.message || err || t('panelUnknownError'));
}

/**
 * The 📷 button, start to end: capture `tab`, attach it through the panel's port. When the attach
 * fails the picture goes into the composer instead (`toComposer(dataUrl)` → kept?), so it is not
 * lost and can go with the next message.
 * @param {{pixels: ReturnType<typeof createPixels>, tab: any, toComposer: (dataUrl: string) => boolean}} o
 * @returns {Promise<{attached: object|null, note: string, kind: 'info'|'warn'|'error', error: any}>}
 *   `note`/`kind` for the composer's note line; `error` the failure (a HostError shows the banner)
 */
export async function screenshotToConversation({ pixels, tab, toComposer }) {
  let dataUrl;
  try {
    dataUrl = await pixels.capture(tab);
  } catch (err) {
    return { attached: null, note: t('pixelsCaptureFailed', explainLine(err)), kind: 'error', error: err };
  }
  try {
    const attached = await pixels.attach({ dataUrl, url: tab?.url, title: tab?.title });
    return { attached, note: tab?.title ? t('pixelsAttachedOf', tab.title) : t('pixelsAttached'), kind: 'info', error: null };
  } catch (err) {
    const why = t('pixelsAttachFailed', explainLine(err));
    if (toComposer(dataUrl)) {
      return { attached: null, note: `${why} ${t('pixelsInComposer')}`, kind: 'warn', error: err };
    }
    return { attached: null, note: `${why} ${t('pixelsNoRoom')}`, kind: 'error', error: err };
  }
}

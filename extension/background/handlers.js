// The worker's message handlers: `handlers[kind] = async (msg, sender) => result`. sw.js
// registers the host and site handlers; background/turns.js registers `chat.*`. Each handler says
// who may call it: extension pages only (default), content scripts (site data) or both.

import { HostError } from '../lib/protocol.js';

/** @typedef {'extension' | 'content' | 'any'} Caller */

const handlers = new Map();

/**
 * Register the handler of one message kind.
 * @param {string} kind e.g. 'host', 'host.state', 'chat.send', 'site.put'
 * @param {(msg: any, sender: any) => any} fn result (or promise); throw a HostError to fail
 * @param {{from?: Caller}} [opts] who may send it (default: extension pages only)
 */
export function registerHandler(kind, fn, { from = 'extension' } = {}) {
  if (typeof kind !== 'string' || !kind) throw new TypeError('handler kind must be a non-empty string'); // i18n-ok: programming error
  if (typeof fn !== 'function') throw new TypeError(`handler for ${kind} must be a function`); // i18n-ok: programming error
  if (handlers.has(kind)) throw new Error(`a handler for ${kind} is already registered`); // i18n-ok: programming error
  handlers.set(kind, { fn, from });
}

/**
 * Whether a handler is registered for `kind`.
 * @param {string} kind
 * @returns {boolean}
 */
export function hasHandler(kind) {
  return handlers.has(kind);
}

/** Registered kinds (for diagnostics and tests). */
export function handlerKinds() {
  return [...handlers.keys()];
}

/**
 * Whether `sender` may call a handler restricted to `from`.
 * Extension pages have a `chrome-extension://<our id>/` URL; content scripts run in a tab on a web
 * page. Messages from other extensions never reach onMessage (no externally_connectable).
 * @param {any} sender chrome.runtime.MessageSender
 * @param {Caller} from
 * @param {{id: string, origin: string}} self our extension id and `chrome-extension://<id>/`
 * @returns {boolean}
 */
export function senderAllowed(sender, from, self) {
  if (!sender || sender.id !== self.id) return false;
  const isPage = typeof sender.url === 'string' && sender.url.startsWith(self.origin);
  const isContent = !isPage && Number.isInteger(sender.tab?.id);
  if (from === 'any') return isPage || isContent;
  if (from === 'content') return isContent;
  return isPage;
}

/**
 * The wire shape of an error (`{code, message, browserMessage}`).
 * @param {unknown} err
 * @returns {{code: string, message: string, browserMessage: string|null}}
 */
function errorToWire(err) {
  if (err && typeof err === 'object' && typeof err.code === 'string') {
    const e = HostError.from(err);
    return { code: e.code, message: e.message, browserMessage: e.browserMessage ?? null };
  }
  // a bug in a handler, not a host condition
  return { code: 'internal', message: String(err?.message ?? err), browserMessage: null };
}

/**
 * Run the handler for `msg.kind` and build the reply.
 * @param {any} msg
 * @param {any} sender
 * @param {{id: string, origin: string}} self
 * @returns {Promise<{ok: true, result: any} | {ok: false, error: object}> | null} null when no handler
 *   is registered for the kind (another listener or nobody answers)
 */
export function dispatchMessage(msg, sender, self) {
  const h = msg && typeof msg.kind === 'string' ? handlers.get(msg.kind) : undefined;
  if (!h) return null;
  if (!senderAllowed(sender, h.from, self)) {
    return Promise.resolve({
      ok: false,
      error: { code: 'bad_request', message: `${msg.kind} is not available to this sender`, browserMessage: null }, // i18n-ok: answers a sender that may not call it (a web page or content script), not the panel
    });
  }
  return (async () => {
    try {
      return { ok: true, result: await h.fn(msg, sender) };
    } catch (err) {
      return { ok: false, error: errorToWire(err) };
    }
  })();
}

/** Remove every handler (tests only). */
export function _resetHandlersForTests() {
  handlers.clear();
}

// Pages (side panel, options) → service worker. Pages do not touch the worker's native port (the side
// panel has a port of its own for image bytes only, sidepanel/pixels.js): they send
// `{kind: 'host', op, args, opts}` to the worker, which answers `{ok, result}` / `{ok: false,
// error}`. Worker events arrive over a `runtime.connect({name: 'events'})` port.
//
// Reconnecting the events port. An open runtime port does not keep an MV3 worker alive (Chrome
// 114+), so the worker still stops after 30 s idle and the port closes. Reconnecting right away
// would wake the worker again every ~30 s while a page is open. Instead the port is reopened
//   - when the worker announces a (re)start (`{kind: 'worker.awake', instance}`, sent by sw.js at
//     startup to every extension page), after a small delay, and
//   - before this page's next hostCall/workerCall (that call wakes the worker anyway).
// The worker greets each events port with `{type: 'worker.hello', instance}`; a port greeted by an
// older instance is stale. After a reconnect the page receives
// `{type: 'events.connected', instance, reconnected: true}`: events may have been missed, re-read.

import { ClientErrorCode, HostError } from './protocol.js';
import { t } from './i18n.js';

/** Name of the events port. */
export const EVENTS_PORT_NAME = 'events';
/** Message kind the worker sends to every page when it starts. */
export const WORKER_AWAKE = 'worker.awake';
/** First message on every events port. */
export const WORKER_HELLO = 'worker.hello';

/**
 * Turn the worker's reply into the result or a HostError.
 * @param {any} reply `{ok: true, result}` | `{ok: false, error: {code, message, browserMessage}}`
 * @returns {any}
 */
export function replyToResult(reply) {
  if (reply && reply.ok === true) return reply.result;
  if (reply && reply.ok === false) throw HostError.from(reply.error ?? {});
  throw new HostError(ClientErrorCode.DISCONNECTED, t('portWorkerNoReply'));
}

/**
 * A bridge over an injectable `chrome.runtime` (tests pass a fake).
 * @param {{runtime?: any, setTimeout?: Function, clearTimeout?: Function, reconnectDelayMs?: number}} [o]
 * @returns {{hostCall: Function, workerCall: Function, onWorkerEvent: Function}}
 */
export function createBridge({
  runtime = globalThis.chrome?.runtime,
  setTimeout: setT = (fn, ms) => setTimeout(fn, ms),
  clearTimeout: clearT = (h) => clearTimeout(h),
  reconnectDelayMs = 250,
} = {}) {
  const beforeSend = new Set();

  async function send(message) {
    for (const hook of beforeSend) hook();
    let reply;
    try {
      reply = await runtime.sendMessage(message);
    } catch (e) {
      const m = String(e?.message ?? e);
      throw new HostError(ClientErrorCode.DISCONNECTED, t('portWorkerNoAnswer', m), {
        browserMessage: m,
      });
    }
    return replyToResult(reply);
  }

  /**
   * Call a host operation through the worker.
   * @param {string} op
   * @param {object} [args]
   * @param {{timeoutMs?: number}} [opts]
   * @returns {Promise<any>}
   */
  function hostCall(op, args = {}, opts = {}) {
    return send({ kind: 'host', op, args: args ?? {}, opts: opts ?? {} });
  }

  /**
   * Call a worker handler (`chat.send`, `host.state`, …).
   * @param {string} kind
   * @param {object} [payload]
   * @returns {Promise<any>}
   */
  function workerCall(kind, payload = {}) {
    return send({ ...payload, kind });
  }

  /**
   * Receive worker events; keeps an events port open as described at the top of this file.
   * @param {(event: object) => void} fn
   * @returns {() => void} unsubscribe
   */
  function onWorkerEvent(fn) {
    let port = null;
    let instance = null; // the worker instance that greeted `port`
    let connectedOnce = false;
    let stopped = false;
    let timer = null;

    const deliver = (event) => {
      if (stopped) return;
      try {
        fn(event);
      } catch (e) {
        console.error('keepsake: a worker event listener threw', e);
      }
    };

    const connect = () => {
      if (stopped || port) return;
      let p;
      try {
        p = runtime.connect({ name: EVENTS_PORT_NAME });
      } catch {
        return; // extension context gone (reload); nothing to do
      }
      port = p;
      instance = null;
      const reconnected = connectedOnce;
      connectedOnce = true;
      p.onMessage.addListener((event) => {
        if (port !== p) return;
        if (event?.type === WORKER_HELLO) {
          instance = event.instance ?? null;
          deliver({ type: 'events.connected', instance, reconnected });
          return;
        }
        deliver(event);
      });
      p.onDisconnect.addListener(() => {
        void runtime.lastError; // read, so Chrome does not log it as unchecked
        if (port === p) {
          port = null;
          instance = null;
        }
      });
    };

    const schedule = () => {
      if (stopped || timer !== null) return;
      timer = setT(() => {
        timer = null;
        connect();
      }, reconnectDelayMs);
    };

    const onRuntimeMessage = (msg) => {
      if (msg?.kind !== WORKER_AWAKE || stopped) return undefined;
      if (port && instance !== null && instance !== msg.instance) {
        // greeted by an older worker: stale
        const old = port;
        port = null;
        instance = null;
        try {
          old.disconnect();
        } catch {
          // already closed
        }
      }
      if (!port) schedule();
      return undefined; // never answer: the worker does not wait for pages
    };

    const beforeCall = () => {
      if (!port) connect();
    };

    runtime.onMessage.addListener(onRuntimeMessage);
    beforeSend.add(beforeCall);
    connect();

    return () => {
      stopped = true;
      if (timer !== null) clearT(timer);
      timer = null;
      runtime.onMessage.removeListener(onRuntimeMessage);
      beforeSend.delete(beforeCall);
      const p = port;
      port = null;
      if (p) {
        try {
          p.disconnect();
        } catch {
          // already closed
        }
      }
    };
  }

  return { hostCall, workerCall, onWorkerEvent };
}

let defaultBridge = null;
function bridge() {
  defaultBridge ??= createBridge();
  return defaultBridge;
}

/**
 * Call a host operation through the worker (`{kind: 'host', op, args, opts}`).
 * @param {string} op
 * @param {object} [args]
 * @param {{timeoutMs?: number}} [opts]
 * @returns {Promise<any>} rejects with HostError
 */
export function hostCall(op, args, opts) {
  return bridge().hostCall(op, args, opts);
}

/**
 * Call a worker handler (`{kind, ...payload}`).
 * @param {string} kind
 * @param {object} [payload]
 * @returns {Promise<any>} rejects with HostError
 */
export function workerCall(kind, payload) {
  return bridge().workerCall(kind, payload);
}

/**
 * Subscribe to worker events (`changed`, `host.state`, `chat.*`, `events.connected`).
 * @param {(event: object) => void} fn
 * @returns {() => void} unsubscribe
 */
export function onWorkerEvent(fn) {
  return bridge().onWorkerEvent(fn);
}

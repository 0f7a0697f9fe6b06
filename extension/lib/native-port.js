// THE ONLY connectNative CALLER. One long-lived port to keepsake-host (platform.md §5–§7,
// PROTOCOL.md §1–§4): lazy connect with a `host.hello` handshake, request ids with per-request
// timeouts, chunked-reply reassembly, typed errors for every way the browser closes the port,
// reconnect with backoff on the next request, and an idle disconnect so the worker and the host
// can sleep.

import {
  HOST_NAME,
  PROTOCOL_VERSION,
  ClientErrorCode,
  HostError,
  codeForDisconnect,
  isOutboundTooLarge,
  timeoutFor as defaultTimeoutFor,
} from './protocol.js';
import { t, formatNumber } from './i18n.js';

export { HostError } from './protocol.js';

/** The pending-map key of the wait for the host's `db` event after hello (never a request id). */
const DB_EVENT = Symbol('db'); // i18n-ok: a Map key's debug name

/** Delays (ms) before the 1st, 2nd, 3rd, 4th+ reconnect after consecutive failures. */
export const DEFAULT_BACKOFF_MS = Object.freeze([250, 1000, 4000, 15000]);

/** The real clock; tests inject their own `{now, setTimeout, clearTimeout}`. */
export const systemClock = Object.freeze({
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle),
});

function defaultConnect() {
  return chrome.runtime.connectNative(HOST_NAME);
}

function defaultLastError() {
  return globalThis.chrome?.runtime?.lastError?.message;
}

/**
 * Join the `data` pieces of a chunked reply (PROTOCOL.md §3) into the reply's JSON text. The host
 * cuts pieces at character boundaries; plain string concatenation also rejoins a UTF-16 surrogate
 * pair split across two pieces.
 * @param {string[]} pieces
 * @returns {string}
 */
function joinChunks(pieces) {
  return pieces.join('');
}

/**
 * Turn a reply envelope into its result, or throw its error as a HostError.
 * @param {{ok?: boolean, result?: any, error?: {code?: string, message?: string}}} reply
 * @param {string} op
 * @returns {any}
 */
export function unwrapReply(reply, op) {
  if (reply && reply.ok === true) return reply.result;
  const e = reply?.error ?? {};
  throw new HostError(e.code ?? 'internal', e.message ?? t('portOpFailed', op), { op });
}

/**
 * The error for a synchronous `postMessage` exception: Chrome's 64 MiB cap is
 * `too_large_outbound` (the port stays usable); a dead port is `disconnected`; anything else (a
 * value the browser cannot serialise) is `bad_request`.
 * @param {unknown} e
 * @param {string} op
 * @returns {HostError}
 */
export function postError(e, op) {
  const message = String(e?.message ?? e);
  if (isOutboundTooLarge(e)) {
    return new HostError(ClientErrorCode.TOO_LARGE_OUTBOUND, t('portTooLargeOutbound', op), {
      browserMessage: message,
      op,
    });
  }
  if (/disconnected port/i.test(message)) {
    return new HostError(ClientErrorCode.DISCONNECTED, message, { browserMessage: message, op });
  }
  return new HostError('bad_request', t('portCannotSend', op, message), { op });
}

/**
 * The port to keepsake-host. See extension/README.md for the contract.
 *
 * Events: `'changed'` (the host's `{event: 'changed', seq, areas, clientRequestId?}` frame),
 * `'state'` (`{state, error?, hello?}`); any other host event frame is emitted under its own name.
 */
export class NativePort {
  #connect;
  #idleMs;
  #timeoutFor;
  #backoffMs;
  #clock;
  #lastErrorOf;

  #port = null;
  #state = 'idle';
  #hello = null;
  /** This connection's last `db` event (the host's database state after a hello without it). */
  #db = null;
  #error = null;
  #pending = new Map();
  #nextId = 1;
  #listeners = new Map();
  #opening = null;
  #active = 0;
  #idleTimer = null;
  #failures = 0;
  #lastFailureAt = 0;
  #cancelWait = null;
  /** Bumped by close(): a connection attempt started before it must not attach a port after it. */
  #generation = 0;

  /**
   * @param {object} [o]
   * @param {() => any} [o.connect] returns a Port-like object (default: chrome.runtime.connectNative)
   * @param {number} [o.idleMs] disconnect after this long with nothing pending
   * @param {(op: string) => number} [o.timeoutFor] per-operation timeout (ms)
   * @param {number[]} [o.backoffMs] reconnect delays after consecutive failures
   * @param {{now(): number, setTimeout(fn: Function, ms: number): any, clearTimeout(h: any): void}} [o.clock]
   * @param {() => string|undefined} [o.lastError] reads chrome.runtime.lastError.message
   */
  constructor({
    connect = defaultConnect,
    idleMs = 60_000,
    timeoutFor = defaultTimeoutFor,
    backoffMs = DEFAULT_BACKOFF_MS,
    clock = systemClock,
    lastError = defaultLastError,
  } = {}) {
    this.#connect = connect;
    this.#idleMs = idleMs;
    this.#timeoutFor = timeoutFor;
    this.#backoffMs = backoffMs.length ? backoffMs : [0];
    this.#clock = clock;
    this.#lastErrorOf = lastError;
  }

  /** 'idle' | 'connecting' | 'open' | 'error' */
  get state() {
    return this.#state;
  }

  /** The last `host.hello` result (kept after a disconnect), or null. */
  get hello() {
    return this.#hello;
  }

  /** The last connection error (cleared by a successful handshake), or null. */
  get lastError() {
    return this.#error;
  }

  /** Number of requests sent and not yet answered. */
  get pendingCount() {
    return this.#pending.size;
  }

  /**
   * Send one operation; connects (and handshakes) first when needed.
   * @param {string} op
   * @param {object} [args]
   * @param {{timeoutMs?: number}} [opts]
   * @returns {Promise<any>} the result; rejects with a HostError
   */
  async request(op, args = {}, { timeoutMs } = {}) {
    this.#active++;
    this.#cancelIdle();
    try {
      await this.#ensureOpen();
      return await this.#send(op, args ?? {}, timeoutMs ?? this.#timeoutFor(op));
    } finally {
      this.#active--;
      this.#armIdle();
    }
  }

  /**
   * Connect and handshake now (without sending anything else).
   * @returns {Promise<object>} the `host.hello` result
   */
  async open() {
    this.#active++;
    this.#cancelIdle();
    try {
      await this.#ensureOpen();
      return this.#hello;
    } finally {
      this.#active--;
      this.#armIdle();
    }
  }

  /** Disconnect now; pending requests reject with `disconnected`. */
  close() {
    this.#generation++;
    this.#cancelIdle();
    const err = new HostError(ClientErrorCode.DISCONNECTED, t('portClosed'));
    this.#cancelWait?.(err);
    // the cancelled attempt settles later; the next request must start a fresh one
    this.#opening = null;
    const port = this.#port;
    this.#port = null;
    if (port) safeDisconnect(port);
    this.#rejectAll(err);
    if (this.#state !== 'idle') this.#setState('idle');
  }

  /** Forget past failures so the next request connects without waiting. */
  resetBackoff() {
    this.#failures = 0;
  }

  /**
   * Listen to 'changed' or 'state' (or any other host event name).
   * @param {string} event
   * @param {(payload: any) => void} fn
   * @returns {() => void} unsubscribe
   */
  on(event, fn) {
    if (!this.#listeners.has(event)) this.#listeners.set(event, new Set());
    this.#listeners.get(event).add(fn);
    return () => this.#listeners.get(event)?.delete(fn);
  }

  // ---- connection -----------------------------------------------------------------------------

  #ensureOpen() {
    if (this.#port && this.#state === 'open') return Promise.resolve();
    if (!this.#opening) {
      const opening = this.#open().finally(() => {
        // a close() in between may already have started a newer attempt
        if (this.#opening === opening) this.#opening = null;
      });
      this.#opening = opening;
    }
    return this.#opening;
  }

  async #open() {
    const generation = this.#generation;
    const wait = this.#backoffRemaining();
    if (wait > 0) await this.#sleep(wait);
    if (generation !== this.#generation) {
      // close() ran after the backoff wait ended but before this attempt resumed
      throw new HostError(ClientErrorCode.DISCONNECTED, t('portClosed'));
    }
    const port = this.#attach();
    this.#setState('connecting');
    let hello;
    try {
      hello = await this.#send('host.hello', {}, this.#timeoutFor('host.hello'));
    } catch (err) {
      this.#fail(port, err);
      throw err;
    }
    if (port !== this.#port) {
      throw new HostError(ClientErrorCode.DISCONNECTED, t('portClosedInHandshake'));
    }
    this.#hello = hello;
    if (hello?.protocolVersion !== PROTOCOL_VERSION) {
      const err = new HostError(
        ClientErrorCode.PROTOCOL_MISMATCH,
        t('portProtocolMismatch', hello?.version ?? '?', hello?.protocolVersion, PROTOCOL_VERSION),
        { detail: hello },
      );
      this.#fail(port, err);
      throw err;
    }
    if (hello?.dbOpened === false) {
      // The host answered hello before opening the database and opens it right after; its
      // `db` event (sent before any other reply) says how that went. The port is open once it
      // is known, so pages see `schemaVersion` and `dbError` as before.
      try {
        await this.#dbOpened(this.#timeoutFor('host.hello'));
      } catch (err) {
        this.#fail(port, err);
        throw err;
      }
      if (port !== this.#port) {
        throw new HostError(ClientErrorCode.DISCONNECTED, t('portClosedInHandshake'));
      }
    }
    this.#failures = 0;
    this.#error = null;
    this.#setState('open');
  }

  /** Wait for the `db` event of this connection (already seen, or the next one). */
  #dbOpened(timeoutMs) {
    if (this.#db) {
      this.#mergeDb(this.#db);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const entry = { op: 'host.hello', resolve, reject, pieces: null, timer: null };
      entry.timer = this.#clock.setTimeout(() => {
        this.#settleError(DB_EVENT, new HostError(ClientErrorCode.TIMEOUT, t('portTimeout', 'host.hello', formatNumber(timeoutMs)), { op: 'host.hello' }));
      }, timeoutMs);
      // kept with the pending requests: a disconnect or close() rejects it like them
      this.#pending.set(DB_EVENT, entry);
    });
  }

  #mergeDb({ dbOpened, schemaVersion, latestSchemaVersion, dbError }) {
    const hello = this.#hello;
    this.#hello = { ...hello, dbOpened, schemaVersion, latestSchemaVersion: latestSchemaVersion ?? hello.latestSchemaVersion, dbError: dbError ?? null };
  }

  /** The host's `db` event: what it now says about the database (merged into `hello`). */
  #onDbEvent(msg) {
    this.#db = msg;
    const waiting = this.#pending.get(DB_EVENT);
    if (waiting) {
      this.#mergeDb(msg);
      this.#clock.clearTimeout(waiting.timer);
      this.#pending.delete(DB_EVENT);
      waiting.resolve();
    } else if (this.#state === 'open' && this.#hello) {
      this.#mergeDb(msg);
      // a later change (a start that lost the race for the lock, opened by a later request)
      this.#setState('open');
    }
  }

  #attach() {
    let port;
    try {
      port = this.#connect();
    } catch (e) {
      const message = String(e?.message ?? e);
      const err = new HostError(codeForDisconnect(message), t('portCannotConnect', message), {
        browserMessage: message,
      });
      this.#recordFailure(err);
      throw err;
    }
    this.#port = port;
    this.#db = null;
    port.onMessage.addListener((msg) => this.#onMessage(port, msg));
    port.onDisconnect.addListener(() => this.#onDisconnect(port));
    return port;
  }

  /** A handshake failed on `port`: drop the port (if still ours) and surface the error. */
  #fail(port, err) {
    if (port !== this.#port) return; // already handled by onDisconnect or close()
    this.#port = null;
    safeDisconnect(port);
    this.#rejectAll(err);
    this.#recordFailure(err);
  }

  #recordFailure(err) {
    this.#failures++;
    this.#lastFailureAt = this.#clock.now();
    this.#error = err;
    this.#setState('error', err);
  }

  #backoffRemaining() {
    if (this.#failures === 0) return 0;
    const i = Math.min(this.#failures - 1, this.#backoffMs.length - 1);
    return Math.max(0, this.#lastFailureAt + this.#backoffMs[i] - this.#clock.now());
  }

  #sleep(ms) {
    return new Promise((resolve, reject) => {
      const handle = this.#clock.setTimeout(() => {
        this.#cancelWait = null;
        resolve();
      }, ms);
      this.#cancelWait = (err) => {
        this.#clock.clearTimeout(handle);
        this.#cancelWait = null;
        reject(err);
      };
    });
  }

  #onDisconnect(port) {
    // Read lastError inside the callback: Chrome sets it only there (and logs it if unread).
    const message = this.#lastErrorOf() ?? null;
    if (port !== this.#port) return;
    this.#port = null;
    this.#cancelIdle();
    const err = new HostError(codeForDisconnect(message), message || t('portDisconnected'), {
      browserMessage: message,
    });
    this.#rejectAll(err);
    this.#recordFailure(err);
  }

  // ---- idle -----------------------------------------------------------------------------------

  #armIdle() {
    if (this.#idleTimer || this.#active > 0 || this.#pending.size > 0) return;
    if (!this.#port || this.#state !== 'open') return;
    this.#idleTimer = this.#clock.setTimeout(() => {
      this.#idleTimer = null;
      if (this.#active > 0 || this.#pending.size > 0 || !this.#port) return;
      const port = this.#port;
      this.#port = null;
      safeDisconnect(port);
      this.#setState('idle');
    }, this.#idleMs);
  }

  #cancelIdle() {
    if (this.#idleTimer === null) return;
    this.#clock.clearTimeout(this.#idleTimer);
    this.#idleTimer = null;
  }

  // ---- requests -------------------------------------------------------------------------------

  #send(op, args, timeoutMs) {
    const port = this.#port;
    if (!port) return Promise.reject(new HostError(ClientErrorCode.DISCONNECTED, t('portNotConnected', op), { op }));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const entry = { op, resolve, reject, pieces: null, timer: null };
      entry.timer = this.#clock.setTimeout(() => {
        const msg = t('portTimeout', op, formatNumber(timeoutMs));
        this.#settleError(id, new HostError(ClientErrorCode.TIMEOUT, msg, { op }));
      }, timeoutMs);
      this.#pending.set(id, entry);
      try {
        port.postMessage({ id, op, args });
      } catch (e) {
        this.#settleError(id, postError(e, op));
      }
    });
  }

  #onMessage(port, msg) {
    if (port !== this.#port || !msg || typeof msg !== 'object') return;
    if (!Object.hasOwn(msg, 'id')) {
      if (msg.event === 'db') this.#onDbEvent(msg);
      else if (typeof msg.event === 'string') this.#emit(msg.event, msg);
      return;
    }
    // `id: null` answers a frame the host could not decode; it cannot be matched to a request,
    // which then times out.
    const entry = this.#pending.get(msg.id);
    if (!entry) return; // a late reply after its timeout
    if (msg.chunk) this.#onChunk(msg.id, entry, msg);
    else this.#settleReply(msg.id, entry, msg);
  }

  #onChunk(id, entry, msg) {
    const { index, count } = msg.chunk;
    entry.pieces ??= [];
    if (index !== entry.pieces.length || typeof msg.data !== 'string' || !(count > index)) {
      this.#settleError(id, new HostError(ClientErrorCode.HOST_IO, t('portMalformedChunk', entry.op), { op: entry.op }));
      return;
    }
    entry.pieces.push(msg.data);
    if (entry.pieces.length < count) return;
    let reply;
    try {
      reply = JSON.parse(joinChunks(entry.pieces));
    } catch (e) {
      this.#settleError(id, new HostError(ClientErrorCode.HOST_IO, t('portChunkNotJson', entry.op, e.message), { op: entry.op }));
      return;
    }
    this.#settleReply(id, entry, reply);
  }

  #settleReply(id, entry, reply) {
    this.#clock.clearTimeout(entry.timer);
    this.#pending.delete(id);
    try {
      entry.resolve(unwrapReply(reply, entry.op));
    } catch (err) {
      entry.reject(err);
    }
  }

  #settleError(id, err) {
    const entry = this.#pending.get(id);
    if (!entry) return;
    this.#clock.clearTimeout(entry.timer);
    this.#pending.delete(id);
    entry.reject(err);
  }

  #rejectAll(err) {
    for (const [id, entry] of [...this.#pending]) {
      const own = new HostError(err.code, err.message, { browserMessage: err.browserMessage, detail: err.detail, op: entry.op });
      this.#settleError(id, own);
    }
  }

  // ---- events ---------------------------------------------------------------------------------

  #setState(state, error) {
    this.#state = state;
    const payload = { state, hello: this.#hello };
    if (error) payload.error = error;
    this.#emit('state', payload);
  }

  #emit(event, payload) {
    for (const fn of [...(this.#listeners.get(event) ?? [])]) {
      try {
        fn(payload);
      } catch (e) {
        console.error(`keepsake: a '${event}' listener threw`, e);
      }
    }
  }
}

function safeDisconnect(port) {
  try {
    port.disconnect();
  } catch {
    // already closed
  }
}

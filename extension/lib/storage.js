// Typed client over any `call(op, args, opts)` transport: the worker passes
// `port.request.bind(port)`, pages pass `hostCall` from bridge.js. One method per host operation,
// generated from protocol.js, named exactly after the operation: `s.history.append(args)`.

import { OPS, OP_ARGS, RETRYABLE_WRITE_CODES, isWriteOp } from './protocol.js';
import { formatDateTime } from './i18n.js';

const RETRYABLE = new Set(RETRYABLE_WRITE_CODES);

function defaultNewId() {
  return crypto.randomUUID();
}

/**
 * Whether a failed write may be sent again with the same `clientRequestId`.
 * @param {unknown} err
 * @returns {boolean}
 */
function isRetryableWriteError(err) {
  return RETRYABLE.has(err?.code);
}

/**
 * `args` with a `clientRequestId` (a new UUID unless the caller gave one).
 * @param {object|undefined} args
 * @param {() => string} newId
 * @returns {object}
 */
function withClientRequestId(args, newId) {
  const a = args ?? {};
  if (typeof a.clientRequestId === 'string' && a.clientRequestId) return a;
  return { ...a, clientRequestId: newId() };
}

/**
 * `args` with a `fallbackName` for writes that may create an auto-named chat: the date and time in
 * the UI language (`6 de dez. de 2026 15:04`, `2026年12月6日 15:04`), the name a chat gets when
 * no message names it (storage-model §5.1). A caller's own fallbackName wins.
 */
function withFallbackName(op, args, now) {
  if (!OP_ARGS[op]?.includes('fallbackName') || args.fallbackName !== undefined) return args;
  return { ...args, fallbackName: formatDateTime(now()) };
}

function readMethod(call, op) {
  return (args = {}, opts) => call(op, args ?? {}, opts);
}

function writeMethod(call, op, newId, now) {
  return async (args = {}, opts) => {
    const a = withFallbackName(op, withClientRequestId(args, newId), now);
    try {
      return await call(op, a, opts);
    } catch (err) {
      if (!isRetryableWriteError(err)) throw err;
      // at-most-once: the host returns the recorded result if the first attempt landed
      return call(op, a, opts);
    }
  };
}

/**
 * Build the storage client.
 * @param {(op: string, args: object, opts?: object) => Promise<any>} call
 * @param {{newId?: () => string, ops?: readonly string[], now?: () => number}} [options]
 * @returns {Record<string, Record<string, (args?: object, opts?: object) => Promise<any>>>}
 */
export function createStorage(call, { newId = defaultNewId, ops = OPS, now = Date.now } = {}) {
  const s = {};
  for (const op of ops) {
    const dot = op.indexOf('.');
    const area = op.slice(0, dot);
    const name = op.slice(dot + 1);
    s[area] ??= {};
    s[area][name] = isWriteOp(op) ? writeMethod(call, op, newId, now) : readMethod(call, op);
  }
  return s;
}

/** The most rows one `sessions.list` page holds (the host's `limit` maximum, PROTOCOL.md). */
export const LIST_PAGE_MAX = 1000;

/**
 * Every row of a list or search (`args`: `{query?}`), page after page of `sessions.list`, for
 * the few callers that need them all (export of every chat, the options page's counts). The
 * drawer shows pages instead.
 * @param {{sessions: {list: (args: object) => Promise<{rows: object[], total: number, cursor: string|null}>}}} storage
 * @param {{query?: string}} [args]
 * @returns {Promise<object[]>}
 */
export async function listAllSessions(storage, args = {}) {
  const rows = [];
  let cursor = null;
  do {
    const page = await storage.sessions.list({ ...args, limit: LIST_PAGE_MAX, ...(cursor ? { cursor } : {}) });
    rows.push(...(Array.isArray(page?.rows) ? page.rows : []));
    cursor = typeof page?.cursor === 'string' ? page.cursor : null;
  } while (cursor);
  return rows;
}

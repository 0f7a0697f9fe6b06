// The extension's mirror of PROTOCOL.md: host name, operation names (read / write), error codes,
// per-operation timeouts and user-facing explanations. `protocol.test.js` parses PROTOCOL.md and
// fails when an operation or an error code is missing here, so a new host operation is one line in
// READ_OPS or WRITE_OPS (storage.js generates its methods from these lists).

import { t } from './i18n.js';

/** Native messaging host name (platform.md §8: `dev.keepsake.host.json`). */
export const HOST_NAME = 'dev.keepsake.host';

/** Wire protocol version this extension speaks (`host.hello` → `protocolVersion`). */
export const PROTOCOL_VERSION = 4;

/** Operations that change nothing (PROTOCOL.md §7 rows without "W"); they refuse `clientRequestId`. */
export const READ_OPS = Object.freeze([
  'host.hello',
  'host.status',
  'settings.get',
  'history.get',
  'history.meta',
  'attach.summaryPlan',
  'images.get',
  'images.display',
  'images.thumbnail',
  'request.isContextOverflow',
  'request.build',
  'sessions.list',
  'sessions.get',
  'sessions.export',
  'sessions.evictionPlan',
  'trash.list',
  'storage.importPreview',
  'backups.list',
  'changes.since',
  'sync.status',
]);

/** Write operations (PROTOCOL.md §7 rows marked "W"): accept `clientRequestId`, may emit `changed`. */
export const WRITE_OPS = Object.freeze([
  'settings.set',
  'settings.remove',
  'history.setBinding',
  'history.append',
  'history.replace',
  'history.clear',
  'history.removeAt',
  'history.truncateFrom',
  'history.removeByAttachId',
  'history.removeLastPageContext',
  'history.markImagesSeen',
  'history.branch',
  'history.switchVersion',
  'history.markFailed',
  'history.attach',
  'history.boundImages',
  'attach.trackChange',
  'attach.applySummary',
  'request.commitRescue',
  'sessions.save',
  'sessions.load',
  'sessions.rename',
  'sessions.pin',
  'sessions.delete',
  'sessions.clearAll',
  'sessions.appendTo',
  'trash.restore',
  'trash.purge',
  'storage.import',
  'backups.create',
  'backups.restore',
  'sync.pause',
  'sync.resume',
]);

/** Every operation name. */
export const OPS = Object.freeze([...READ_OPS, ...WRITE_OPS]);

/**
 * Each operation's argument names (a write's `clientRequestId` is implied by WRITE_OPS). The host's
 * typed contract (`keepsake-host schema`) is the source; nothing generates this list, and
 * tests/it/conventions.rs fails when it, PROTOCOL.md §7 and the host's schema disagree.
 */
export const OP_ARGS = Object.freeze({
  'host.hello': Object.freeze([]),
  'host.status': Object.freeze(['doctor']),
  'settings.get': Object.freeze(['keys']),
  'settings.set': Object.freeze(['map']),
  'settings.remove': Object.freeze(['keys']),
  'history.get': Object.freeze(['from', 'limit', 'images']),
  'history.meta': Object.freeze([]),
  'history.setBinding': Object.freeze(['id']),
  'history.append': Object.freeze(['entry', 'markImagesSeen', 'copyVideoSrc', 'fallbackName']),
  'history.replace': Object.freeze(['entries', 'fallbackName']),
  'history.clear': Object.freeze(['saveCurrent']),
  'history.removeAt': Object.freeze(['index']),
  'history.truncateFrom': Object.freeze(['index']),
  'history.removeByAttachId': Object.freeze(['attachId']),
  'history.removeLastPageContext': Object.freeze([]),
  'history.markImagesSeen': Object.freeze([]),
  'history.branch': Object.freeze(['index', 'entry', 'markImagesSeen']),
  'history.switchVersion': Object.freeze(['forkEntryId', 'version']),
  'history.markFailed': Object.freeze(['index', 'entryId', 'code', 'message']),
  'history.boundImages': Object.freeze(['budget']),
  'history.attach': Object.freeze(['ctx', 'images', 'placement', 'summarySource', 'paper', 'videoSrc', 'fallbackName']),
  'attach.trackChange': Object.freeze(['mode', 'url', 'text']),
  'attach.summaryPlan': Object.freeze(['attachId']),
  'attach.applySummary': Object.freeze(['attachId', 'summary']),
  'images.get': Object.freeze(['ref']),
  'images.display': Object.freeze(['refs']),
  'images.thumbnail': Object.freeze(['dataUrl', 'maxEdge', 'quality']),
  'sessions.save': Object.freeze(['id', 'name', 'fallbackName']),
  'sessions.list': Object.freeze(['query', 'limit', 'cursor']),
  'sessions.get': Object.freeze(['id', 'images', 'from', 'limit']),
  'sessions.load': Object.freeze(['id', 'saveCurrent']),
  'sessions.rename': Object.freeze(['id', 'name']),
  'sessions.pin': Object.freeze(['id', 'pinned']),
  'sessions.delete': Object.freeze(['id']),
  'sessions.clearAll': Object.freeze([]),
  'sessions.appendTo': Object.freeze(['id', 'entry', 'copyVideoSrc', 'fallbackName', 'markImagesSeen']),
  'sessions.export': Object.freeze(['ids', 'format']),
  'sessions.evictionPlan': Object.freeze(['cap']),
  'trash.list': Object.freeze([]),
  'trash.restore': Object.freeze(['id']),
  'trash.purge': Object.freeze(['id', 'all']),
  'storage.import': Object.freeze(['document', 'settings']),
  'storage.importPreview': Object.freeze(['document']),
  'backups.list': Object.freeze([]),
  'backups.create': Object.freeze([]),
  'backups.restore': Object.freeze(['id']),
  'changes.since': Object.freeze(['seq']),
  'sync.status': Object.freeze([]),
  'sync.pause': Object.freeze([]),
  'sync.resume': Object.freeze([]),
  'request.isContextOverflow': Object.freeze(['message']),
  'request.build': Object.freeze(['kind', 'turn', 'systemPrompt', 'bodyFields', 'source', 'upTo', 'pass', 'rescue', 'backfill', 'aging', 'imageRefs', 'since', 'retry']),
  'request.commitRescue': Object.freeze(['attachIds', 'sessionId']),
});

const WRITE_SET = new Set(WRITE_OPS);

/**
 * Whether `op` is a write (accepts `clientRequestId`).
 * @param {string} op
 * @returns {boolean}
 */
export function isWriteOp(op) {
  return WRITE_SET.has(op);
}

/**
 * The areas of a `changed` event (PROTOCOL.md §4) as the worker and the pages act on them.
 * `restored: true` (a backup was put back in place of the database, `backups.restore`) means
 * everything may have changed: the live chat, its binding, every session, the trash and the
 * settings. So it names every area, and whatever re-reads on one of them re-reads on a restore;
 * `restored` stays set for what must also forget more (the worker's body memory, the panel's
 * earlier messages).
 * @param {{areas?: object}|null|undefined} event
 * @returns {{settings?: any, history?: any, binding?: any, sessions?: any, trash?: any, restored?: boolean}}
 */
export function changeAreas(event) {
  const a = event?.areas && typeof event.areas === 'object' ? event.areas : {};
  if (a.restored !== true) return a;
  const sessions = a.sessions && typeof a.sessions === 'object' ? a.sessions : {};
  return { ...a, settings: true, history: true, binding: true, sessions: { ...sessions, index: true }, trash: true, restored: true };
}

/** Host error codes (PROTOCOL.md §5, append-only). */
export const ErrorCode = Object.freeze({
  BAD_REQUEST: 'bad_request',
  NOT_FOUND: 'not_found',
  CONFLICT: 'conflict',
  BUSY: 'busy',
  TOO_LARGE: 'too_large',
  UNSUPPORTED: 'unsupported',
  INTERNAL: 'internal',
  UNKNOWN_OP: 'unknown_op',
  DB_CORRUPT: 'db_corrupt',
  DB_TOO_NEW: 'db_too_new',
  IMAGE_REJECTED: 'image_rejected',
  FORBIDDEN_ORIGIN: 'forbidden_origin',
  DISK_FULL: 'disk_full',
});

/** Codes produced on the extension side (the port, the browser, the worker bridge). */
export const ClientErrorCode = Object.freeze({
  /** No reply within the operation's timeout (Chrome drops invalid frames silently, platform.md §3). */
  TIMEOUT: 'timeout',
  /** The port closed without a recognised browser message, or we closed it. */
  DISCONNECTED: 'disconnected',
  /** `Specified native messaging host not found.` (or Windows' "is not registered"; Firefox's "No such native application"). */
  HOST_NOT_FOUND: 'host_not_found',
  /** `Access to the specified native messaging host is forbidden.` */
  HOST_FORBIDDEN: 'host_forbidden',
  /** `Native host has exited.` / `Failed to start native messaging host.` */
  HOST_EXITED: 'host_exited',
  /** `Error when communicating with the native messaging host.` */
  HOST_IO: 'host_io',
  /** `port.postMessage` threw `Message exceeded maximum allowed size of 64MiB.` */
  TOO_LARGE_OUTBOUND: 'too_large_outbound',
  /** `host.hello` reported a protocolVersion this extension does not speak. */
  PROTOCOL_MISMATCH: 'protocol_mismatch',
});

/** Every host error code, as strings. */
export const HOST_ERROR_CODES = Object.freeze(Object.values(ErrorCode));
/** Every client-side error code, as strings. */
export const CLIENT_ERROR_CODES = Object.freeze(Object.values(ClientErrorCode));

/**
 * Codes after which a write is retried once with the same `clientRequestId` (the host applies a
 * replayed id at most once, PROTOCOL.md §2).
 */
export const RETRYABLE_WRITE_CODES = Object.freeze([
  ClientErrorCode.TIMEOUT,
  ClientErrorCode.DISCONNECTED,
  ClientErrorCode.HOST_EXITED,
  ClientErrorCode.HOST_IO,
]);

/**
 * An error from the host, the port or the browser, always with a code.
 * `browserMessage` is `chrome.runtime.lastError.message` when the browser produced it.
 */
export class HostError extends Error {
  /**
   * @param {string} code one of ErrorCode / ClientErrorCode (unknown host codes pass through)
   * @param {string} [message]
   * @param {{detail?: any, browserMessage?: string|null, op?: string}} [extra]
   */
  constructor(code, message, { detail, browserMessage, op } = {}) {
    super(message || code);
    this.name = 'HostError';
    this.code = code;
    this.detail = detail ?? null;
    this.browserMessage = browserMessage ?? null;
    this.op = op ?? null;
  }

  /** The shape sent between the worker and pages. */
  toJSON() {
    return { code: this.code, message: this.message, browserMessage: this.browserMessage, detail: this.detail };
  }

  /**
   * Rebuild a HostError from its wire shape (`{code, message, browserMessage}`); a HostError is
   * returned as is, any other error becomes `disconnected` with its message.
   * @param {any} obj
   * @returns {HostError}
   */
  static from(obj) {
    if (obj instanceof HostError) return obj;
    if (obj && typeof obj === 'object' && typeof obj.code === 'string') {
      return new HostError(obj.code, obj.message, { browserMessage: obj.browserMessage, detail: obj.detail });
    }
    const message = obj instanceof Error ? obj.message : String(obj);
    return new HostError(ClientErrorCode.DISCONNECTED, message);
  }
}

// ---------------------------------------------------------------------------------------------
// Timeouts
//
// Every request has its own timeout because Chrome silently drops a host frame that is not valid
// JSON (platform.md §3). The host serves one request at a time, so a timeout also covers the wait
// behind an earlier request on the same port.
//
//   host.hello              15 s   the host opens and migrates the database before it answers
//   other reads             10 s   one read transaction, small results
//   other writes            30 s   the write lock may take the host's 10 s busy timeout first
//   history.get, sessions.get, images.get, sessions.list, host.status (integrity check, doctor)
//                           30 s   may return many MiB (inline images; full-text search), chunked
//                                  at ~20 ms per MiB, or run a full-text scan
//   request.build, history.attach, history.boundImages, images.thumbnail, images.display
//   storage.import, sessions.export
//                          120 s   image decoding, thumbnailing, whole-database documents
//   backups.list            30 s   reads every copy's chat count (cached by file)
//   backups.create, backups.restore
//                          600 s   a whole-database copy, checked; a restore makes one, may migrate
//                                  an older copy, and rewrites every table
// ---------------------------------------------------------------------------------------------

/** Default timeout of a read (ms). */
export const READ_TIMEOUT_MS = 10_000;
/** Default timeout of a write (ms): above the host's 10 s busy timeout. */
export const WRITE_TIMEOUT_MS = 30_000;
/** Timeout of large reads (ms). */
export const LARGE_TIMEOUT_MS = 30_000;
/** Timeout of image and whole-document work (ms). */
export const SLOW_TIMEOUT_MS = 120_000;
/** Timeout of whole-database copies: `backups.create`, `backups.restore` (ms). */
export const BACKUP_TIMEOUT_MS = 600_000;
/** Timeout of the `host.hello` handshake (ms). */
export const HELLO_TIMEOUT_MS = 15_000;

/** Operations whose timeout differs from the read/write default. */
export const OP_TIMEOUTS_MS = Object.freeze({
  'host.hello': HELLO_TIMEOUT_MS,
  'host.status': LARGE_TIMEOUT_MS,
  'history.get': LARGE_TIMEOUT_MS,
  'sessions.get': LARGE_TIMEOUT_MS,
  'sessions.list': LARGE_TIMEOUT_MS,
  'images.get': LARGE_TIMEOUT_MS,
  'request.build': SLOW_TIMEOUT_MS,
  'history.attach': SLOW_TIMEOUT_MS,
  'history.boundImages': SLOW_TIMEOUT_MS,
  'images.thumbnail': SLOW_TIMEOUT_MS,
  'images.display': SLOW_TIMEOUT_MS,
  'storage.import': SLOW_TIMEOUT_MS,
  'storage.importPreview': SLOW_TIMEOUT_MS,
  'sessions.export': SLOW_TIMEOUT_MS,
  'backups.list': LARGE_TIMEOUT_MS,
  'backups.create': BACKUP_TIMEOUT_MS,
  'backups.restore': BACKUP_TIMEOUT_MS,
});

/**
 * The timeout (ms) of one operation.
 * @param {string} op
 * @returns {number}
 */
export function timeoutFor(op) {
  if (Object.hasOwn(OP_TIMEOUTS_MS, op)) return OP_TIMEOUTS_MS[op];
  return isWriteOp(op) ? WRITE_TIMEOUT_MS : READ_TIMEOUT_MS;
}

// ---------------------------------------------------------------------------------------------
// Browser messages (platform.md §7) → codes
// ---------------------------------------------------------------------------------------------

const DISCONNECT_PATTERNS = [
  [/native messaging host not found/i, ClientErrorCode.HOST_NOT_FOUND],
  [/native messaging host .* is not registered/i, ClientErrorCode.HOST_NOT_FOUND],
  // Firefox: every manifest problem (missing, malformed, this add-on not in allowed_extensions)
  [/no such native application/i, ClientErrorCode.HOST_NOT_FOUND],
  [/access to the specified native messaging host is forbidden/i, ClientErrorCode.HOST_FORBIDDEN],
  [/native host has exited/i, ClientErrorCode.HOST_EXITED],
  [/failed to start native messaging host/i, ClientErrorCode.HOST_EXITED],
  [/error when communicating with the native messaging host/i, ClientErrorCode.HOST_IO],
];

/**
 * Map `chrome.runtime.lastError.message` seen in `onDisconnect` to a client error code.
 * Unknown or missing messages (including `Invalid native messaging host name specified.`, which is
 * our own bug, not an installation problem) give `disconnected`.
 * @param {string|null|undefined} message
 * @returns {string}
 */
export function codeForDisconnect(message) {
  if (!message) return ClientErrorCode.DISCONNECTED;
  for (const [re, code] of DISCONNECT_PATTERNS) if (re.test(message)) return code;
  return ClientErrorCode.DISCONNECTED;
}

/** Whether a `postMessage` exception is Chrome's 64 MiB outbound cap (platform.md §2). */
export function isOutboundTooLarge(error) {
  return /exceeded maximum allowed size/i.test(String(error?.message ?? error));
}

// ---------------------------------------------------------------------------------------------
// User-facing explanations
// ---------------------------------------------------------------------------------------------

/** The command that builds, installs and registers the host (run in the Keepsake folder). */
const INSTALL = './install.sh';

/**
 * code → {title, detail, fix, then?}; `fix` is the one command that fixes it (copied as it is,
 * nothing else in it), or null when a retry does; `then` says where to run it and what comes after.
 * Built on each call: the words come from the catalogue in the UI language.
 */
function explanations() {
  const afterInstall = t('hostErrAfterInstall');
  return {
    host_not_found: {
      title: t('hostErrHostNotFoundTitle'),
      detail: t('hostErrHostNotFoundDetail'),
      fix: INSTALL,
      then: afterInstall,
    },
    host_forbidden: {
      title: t('hostErrHostForbiddenTitle'),
      detail: t('hostErrHostForbiddenDetail'),
      fix: 'keepsake-host install',
      then: t('hostErrHostForbiddenThen'),
    },
    host_exited: {
      title: t('hostErrHostExitedTitle'),
      detail: t('hostErrHostExitedDetail'),
      fix: 'keepsake-host doctor',
    },
    host_io: {
      title: t('hostErrHostIoTitle'),
      detail: t('hostErrHostIoDetail'),
      fix: 'keepsake-host doctor',
    },
    disconnected: {
      title: t('hostErrDisconnectedTitle'),
      detail: t('hostErrDisconnectedDetail'),
      fix: null,
    },
    timeout: {
      title: t('hostErrTimeoutTitle'),
      detail: t('hostErrTimeoutDetail'),
      fix: null,
    },
    too_large_outbound: {
      title: t('hostErrTooLargeOutboundTitle'),
      detail: t('hostErrTooLargeOutboundDetail'),
      fix: 'keepsake-host import FILE',
      then: t('hostErrTooLargeOutboundThen'),
    },
    protocol_mismatch: {
      title: t('hostErrProtocolMismatchTitle'),
      detail: t('hostErrProtocolMismatchDetail'),
      fix: INSTALL,
      then: afterInstall,
    },
    bad_request: {
      title: t('hostErrBadRequestTitle'),
      detail: t('hostErrBadRequestDetail'),
      fix: null,
    },
    not_found: { title: t('hostErrNotFoundTitle'), detail: t('hostErrNotFoundDetail'), fix: null },
    conflict: { title: t('hostErrConflictTitle'), detail: t('hostErrConflictDetail'), fix: null },
    busy: {
      title: t('hostErrBusyTitle'),
      detail: t('hostErrBusyDetail'),
      fix: null,
    },
    too_large: { title: t('hostErrTooLargeTitle'), detail: t('hostErrTooLargeDetail'), fix: null },
    unsupported: { title: t('hostErrUnsupportedTitle'), detail: t('hostErrUnsupportedDetail'), fix: null },
    internal: {
      title: t('hostErrInternalTitle'),
      detail: t('hostErrInternalDetail'),
      fix: 'keepsake-host doctor',
    },
    unknown_op: {
      title: t('hostErrUnknownOpTitle'),
      detail: t('hostErrUnknownOpDetail'),
      fix: INSTALL,
      then: afterInstall,
    },
    db_corrupt: {
      title: t('hostErrDbCorruptTitle'),
      detail: t('hostErrDbCorruptDetail'),
      fix: 'keepsake-host doctor',
    },
    db_too_new: {
      title: t('hostErrDbTooNewTitle'),
      detail: t('hostErrDbTooNewDetail'),
      fix: INSTALL,
      then: afterInstall,
    },
    image_rejected: {
      title: t('hostErrImageRejectedTitle'),
      detail: t('hostErrImageRejectedDetail'),
      fix: null,
    },
    forbidden_origin: {
      title: t('hostErrForbiddenOriginTitle'),
      detail: t('hostErrForbiddenOriginDetail'),
      fix: 'keepsake-host install --extension-id EXTENSION_ID',
      then: t('hostErrForbiddenOriginThen'),
    },
    disk_full: {
      title: t('hostErrDiskFullTitle'),
      detail: t('hostErrDiskFullDetail'),
      fix: null,
    },
  };
}

/**
 * The user-facing explanation of an error: a one-line title, a detail line (with the host's or
 * the browser's own message appended) and the one command that fixes it (null when retrying is
 * the fix).
 * @param {{code?: string, message?: string, browserMessage?: string|null}|Error} err
 * @returns {{title: string, detail: string, fix: string|null, then: string|null}}
 */
export function explainHostError(err) {
  const code = err?.code ?? ClientErrorCode.DISCONNECTED;
  const base = explanations()[code] ?? { title: t('hostErrUnknownTitle', code), detail: '', fix: null };
  const said = err?.browserMessage || err?.message || '';
  const detail = said && said !== code ? joinSentences(base.detail, said) : base.detail;
  // this extension's own ID, where the browser says it (the fix is then copied ready to run)
  const id = globalThis.chrome?.runtime?.id;
  let fix = base.fix;
  let then = base.then ?? null;
  if (fix && fix.includes('EXTENSION_ID') && typeof id === 'string' && id) {
    fix = fix.replace('EXTENSION_ID', id);
    then = null;
  }
  return { title: base.title, detail, fix, then };
}

function joinSentences(a, b) {
  if (!a) return b;
  return `${a} (${b})`;
}

// Every fetch the extension makes for page content goes through here (README "Page fetches"): a
// PDF (the offscreen document reads the bytes, offscreen/pdf.js; the worker runs the rules,
// background/pdf-attach.js), a PDF link, an article's figures and a video's caption tracks
// (`<track>` and YouTube's, background/page-attach.js). The rules, in one place:
//
//   - only http and https;
//   - no address on the reader's own network or computer (private, loopback and link-local IP
//     literals, v4 and v6 with their mapped forms; `localhost`, `*.localhost`, single-label names,
//     special-use suffixes such as `.local`, `.lan`, `.internal`, `.home.arpa`) unless the tab
//     itself is on one (`isPrivateHost`);
//   - cookies only to the tab's own origin (`credentialsFor`): anything else is fetched with
//     `credentials: 'omit'`;
//   - redirects are never followed by the browser: every hop is fetched with `redirect: 'manual'`;
//     the target of a redirect (Chromium hides it, `opaqueredirect`) is read from the request
//     watch (`createRequestWatch`, chrome.webRequest), and only a redirect to the same origin (or
//     http → https of the same host) is followed, by a new fetch under these same rules, at most
//     MAX_REDIRECTS times. Where the watch is missing or saw nothing, the redirect is followed
//     once without cookies and its final address re-checked (`followPage`);
//   - the server's address as the watch saw it: a body that came from a private address is
//     refused unless the tab is on one or the body came from the tab's own host (`privateAllowed`);
//   - bodies are read as a stream up to a byte cap (FETCH_LIMITS) and cancelled the moment it is
//     passed (a caption track is cut there instead), under an AbortSignal timeout;
//   - what comes back names the address the bytes came from (`url`: the last hop).
//
// A refusal is a PageFetchError `{code, reason, values}`; `pageFetchMessage` words it in the UI
// language (the offscreen document has no chrome.i18n, so it sends `reason` and `values`).

import { formatNumber, t } from './i18n.js';
import { redactUrl } from './entries.js';

const MiB = 1024 * 1024;

/**
 * The cap and the time limit of each kind of fetch. The caps are the ones the extension had
 * (issue 20); the times allow a full-size body at about 5 Mbit/s (PDF: 96 MiB in 2 minutes at
 * about 6.5 Mbit/s) and stop a server that trickles.
 */
export const FETCH_LIMITS = Object.freeze({
  pdf: Object.freeze({ maxBytes: 96 * MiB, timeoutMs: 120_000, overflow: 'refuse' }),
  figure: Object.freeze({ maxBytes: 8 * MiB, timeoutMs: 20_000, overflow: 'refuse' }),
  caption: Object.freeze({ maxBytes: 4 * MiB, timeoutMs: 20_000, overflow: 'cut' }),
});
/** All the figures of one attach are fetched within this long; the rest are not attached. */
export const FIGURES_TOTAL_MS = 60_000;
/** Redirects followed (each to the same origin) before the fetch is refused. */
export const MAX_REDIRECTS = 5;
/** How long a fetch waits for the request watch to report its request (events come a few ms after the response). */
export const WATCH_WAIT_MS = 3_000;
/** The request watch's listeners stay this long after the last fetch that needed them. */
const WATCH_LINGER_MS = 30_000;

/**
 * A refused or failed page fetch. `code`: `fetch_refused` (a rule said no), `fetch_too_large`,
 * `fetch_failed` (network, HTTP status, time limit). `reason` and `values` say which, for
 * `pageFetchMessage`.
 */
export class PageFetchError extends Error {
  /**
   * @param {string} code
   * @param {string} reason `scheme`, `private_address`, `private_ip`, `redirect_other_origin`,
   *   `too_many_redirects`, `wrong_type`, `too_large_declared`, `too_large`, `timeout`,
   *   `download_failed`, `download_http`
   * @param {Array<string|number>} [values] the message's substitutions
   */
  constructor(code, reason, values = []) {
    super(values.length ? `${reason}: ${values.join(', ')}` : reason);
    this.name = 'PageFetchError';
    this.code = code;
    this.reason = reason;
    this.values = values;
  }
}

const refused = (reason, values) => new PageFetchError('fetch_refused', reason, values);

/** An address for a message: credentials taken out, at most 160 characters. */
function shown(url) {
  const s = redactUrl(String(url ?? ''));
  return s.length > 160 ? `${s.slice(0, 159)}…` : s;
}

// ---------------------------------------------------------------------------------------------
// Addresses

/** The four numbers of a dotted IPv4 address, or null. */
function ipv4(s) {
  const parts = String(s).split('.');
  if (parts.length !== 4) return null;
  const out = [];
  for (const p of parts) {
    if (!p.length || p.length > 3) return null;
    for (const c of p) if (c < '0' || c > '9') return null;
    const n = Number(p);
    if (n > 255) return null;
    out.push(n);
  }
  return out;
}

/** The eight 16-bit groups of an IPv6 address (brackets, a zone and an IPv4 tail allowed), or null. */
function ipv6(s) {
  let a = String(s).toLowerCase();
  if (a.startsWith('[') && a.endsWith(']')) a = a.slice(1, -1);
  const zone = a.indexOf('%');
  if (zone !== -1) a = a.slice(0, zone);
  if (!a.includes(':')) return null;
  let tail = [];
  const lastColon = a.lastIndexOf(':');
  if (a.slice(lastColon + 1).includes('.')) {
    const v4 = ipv4(a.slice(lastColon + 1));
    if (!v4) return null;
    tail = [(v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]];
    a = a.slice(0, lastColon + 1);
    if (!a.endsWith('::')) a = a.slice(0, -1);
  }
  const group = (g) => {
    if (!g.length || g.length > 4) return null;
    for (const c of g) if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return null;
    return parseInt(g, 16);
  };
  const side = (h) => {
    if (!h.length) return [];
    const out = h.split(':').map(group);
    return out.includes(null) ? null : out;
  };
  const halves = a.split('::');
  if (halves.length > 2) return null;
  const head = side(halves[0]);
  const rest = halves.length === 2 ? side(halves[1]) : [];
  if (!head || !rest) return null;
  const given = head.length + rest.length + tail.length;
  if (halves.length === 1) return given === 8 ? [...head, ...tail] : null;
  if (given > 7) return null;
  return [...head, ...new Array(8 - given).fill(0), ...rest, ...tail];
}

/** Whether the IPv4 address `[a, b, c, d]` is not on the public internet. */
function privateV4([a, b, c]) {
  return (
    a === 0 || // "this network"
    a === 10 ||
    a === 127 || // loopback
    (a === 100 && b >= 64 && b <= 127) || // shared address space (carrier NAT)
    (a === 169 && b === 254) || // link-local
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0 && (c === 0 || c === 2)) || // IETF protocol assignments, TEST-NET-1
    (a === 198 && (b === 18 || b === 19)) || // benchmarking
    (a === 198 && b === 51 && c === 100) || // TEST-NET-2
    (a === 203 && b === 0 && c === 113) || // TEST-NET-3
    a >= 224 // multicast, reserved, broadcast
  );
}

/** Whether the IPv6 groups `g` are not on the public internet (an embedded IPv4 address judged as one). */
function privateV6(g) {
  const v4 = (hi, lo) => [hi >> 8, hi & 255, lo >> 8, lo & 255];
  const zeros = (from, to) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 6)) return privateV4(v4(g[6], g[7])); // ::, ::1, IPv4-compatible ::a.b.c.d
  if (zeros(0, 5) && g[5] === 0xffff) return privateV4(v4(g[6], g[7])); // IPv4-mapped
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return privateV4(v4(g[6], g[7])); // IPv4-translated
  if (g[0] === 0x64 && g[1] === 0xff9b) return g[2] === 1 || privateV4(v4(g[6], g[7])); // NAT64 (local-use 64:ff9b:1::/48)
  if (g[0] === 0x2002) return privateV4(v4(g[1], g[2])); // 6to4
  if (g[0] === 0x2001 && g[1] === 0) return true; // Teredo: the client's address is hidden in it
  if (g[0] === 0x2001 && g[1] === 0xdb8) return true; // documentation
  if (g[0] === 0x100 && zeros(1, 4)) return true; // discard-only
  const top = g[0] >> 8;
  if (top === 0xff) return true; // multicast
  if ((g[0] & 0xfe00) === 0xfc00) return true; // unique local fc00::/7
  if ((g[0] & 0xffc0) === 0xfe80 || (g[0] & 0xffc0) === 0xfec0) return true; // link-local, site-local
  return false;
}

/**
 * Whether an IP address (as chrome.webRequest reports it, or a URL's bracketed IPv6 host) is a
 * private, loopback, link-local or otherwise non-public one. Anything that is not an IP address: false.
 * @param {string} ip
 */
export function isPrivateIp(ip) {
  const v4 = ipv4(ip);
  if (v4) return privateV4(v4);
  const v6 = ipv6(ip);
  return v6 ? privateV6(v6) : false;
}

/**
 * Name suffixes that only resolve on the reader's own network or computer (RFC 6761, RFC 6762,
 * RFC 8375, ICANN's `.internal`, and the names home and office routers hand out).
 */
const LOCAL_SUFFIXES = ['localhost', 'local', 'lan', 'internal', 'intranet', 'home.arpa', 'arpa', 'home', 'corp', 'localdomain', 'private'];

/**
 * Whether a host (a URL's `hostname`) is on the reader's own network or computer: a private or
 * loopback IP literal, `localhost` or a name under it, a single-label name, or a special-use suffix.
 * @param {string} hostname
 */
export function isPrivateHost(hostname) {
  let h = String(hostname ?? '').toLowerCase();
  while (h.endsWith('.')) h = h.slice(0, -1);
  if (!h) return true;
  if (ipv4(h)) return privateV4(ipv4(h));
  if (h.startsWith('[') || h.includes(':')) {
    const v6 = ipv6(h);
    return v6 ? privateV6(v6) : true;
  }
  if (!h.includes('.')) return true; // single label: the local resolver's search domain
  return LOCAL_SUFFIXES.some((s) => h === s || h.endsWith(`.${s}`));
}

/** `url` as a URL, or null. */
function parsed(url) {
  if (url instanceof URL) return url;
  try {
    return new URL(String(url ?? ''));
  } catch {
    return null;
  }
}

const defaultPort = (u) => u.port === '' || (u.protocol === 'http:' && u.port === '80') || (u.protocol === 'https:' && u.port === '443');

/**
 * Whether `to` is the same origin as `from`, or its https form (http → https of the same host,
 * both on their default ports): where cookies may go and a redirect may lead.
 * @param {URL|string} from
 * @param {URL|string} to
 */
export function sameOrigin(from, to) {
  const a = parsed(from);
  const b = parsed(to);
  if (!a || !b) return false;
  if (a.origin === b.origin && a.origin !== 'null') return true;
  return a.protocol === 'http:' && b.protocol === 'https:' && a.hostname === b.hostname && defaultPort(a) && defaultPort(b);
}

/**
 * The credentials mode of a fetch of `url` for a tab on `tabUrl`: the user's cookies go only to
 * the tab's own origin.
 * @returns {'include'|'omit'}
 */
export function credentialsFor(url, tabUrl) {
  return sameOrigin(tabUrl, url) ? 'include' : 'omit';
}

/**
 * Whether a body from a private address may be used: the tab itself is on the reader's network
 * (by its name or IP literal), or the body came from the tab's own host (what the page itself is
 * served from).
 */
export function privateAllowed(url, tabUrl) {
  const u = parsed(url);
  const tab = parsed(tabUrl);
  if (!tab || (tab.protocol !== 'http:' && tab.protocol !== 'https:')) return false;
  return isPrivateHost(tab.hostname) || (!!u && u.hostname === tab.hostname);
}

/**
 * The URL of a fetch the rules allow before anything is sent: http(s), and not on the reader's
 * network unless the tab is. Throws a PageFetchError otherwise.
 * @returns {URL}
 */
export function checkTarget(url, tabUrl) {
  const u = parsed(url);
  if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) throw refused('scheme', [shown(url)]);
  if (isPrivateHost(u.hostname) && !privateAllowed(u, tabUrl)) throw refused('private_address', [shown(u.href)]);
  return u;
}

// ---------------------------------------------------------------------------------------------
// One hop

/** The media type of a response (`image/png`), lower case, without parameters. */
function mediaType(res) {
  return String(res.headers?.get?.('content-type') || '').split(';')[0].trim().toLowerCase();
}

/** Whether an error is the abort of `signal` by its time limit. */
const timedOut = (signal) => signal?.aborted && signal.reason?.name === 'TimeoutError';

/**
 * A body read as a stream up to `maxBytes`; the stream is cancelled the moment the cap is passed
 * (`overflow: 'refuse'` then throws `too_large`; `'cut'` keeps the first `maxBytes`).
 * @returns {Promise<{bytes: Uint8Array, truncated: boolean}>}
 */
export async function readCapped(res, { maxBytes, overflow = 'refuse' }) {
  const declared = Number(res.headers?.get?.('content-length'));
  if (overflow === 'refuse' && Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel?.().catch(() => {});
    throw new PageFetchError('fetch_too_large', 'too_large_declared', [Math.ceil(declared / MiB), maxBytes / MiB]);
  }
  const reader = res.body?.getReader?.();
  if (!reader) return { bytes: new Uint8Array(0), truncated: false };
  const parts = [];
  let size = 0;
  let truncated = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (size + value.byteLength > maxBytes) {
      await reader.cancel().catch(() => {});
      if (overflow !== 'cut') throw new PageFetchError('fetch_too_large', 'too_large', [maxBytes / MiB]);
      parts.push(value.subarray(0, maxBytes - size));
      size = maxBytes;
      truncated = true;
      break;
    }
    parts.push(value);
    size += value.byteLength;
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.byteLength;
  }
  return { bytes, truncated };
}

/**
 * One request, never following a redirect by itself (`redirect: 'manual'`, unless told `'follow'`
 * for the watch-less fallback), and its body read under the kind's cap.
 * @param {string} url
 * @param {object} o
 * @param {'pdf'|'figure'|'caption'} o.kind
 * @param {'include'|'omit'} o.credentials
 * @param {'manual'|'follow'} [o.redirect]
 * @param {AbortSignal} [o.signal] the time limit (and any other reason to stop)
 * @param {(type: string) => boolean} [o.accept] whether the media type is wanted (before the body is read)
 * @param {typeof fetch} [o.fetchImpl]
 * @param {number} [o.timeoutMs] the time limit `signal` carries, for the message
 * @returns {Promise<{redirect: string|null} | {url: string, type: string, bytes: Uint8Array, truncated: boolean}>}
 *   `redirect`: a redirect answer, with its target when the response shows it (null: opaque)
 */
export async function fetchOnce(url, { kind, credentials, redirect = 'manual', signal, accept, fetchImpl = globalThis.fetch, timeoutMs }) {
  const limits = FETCH_LIMITS[kind];
  if (!limits) throw new Error(`fetchOnce: unknown kind ${kind}`); // i18n-ok: programming error
  const seconds = Math.round((timeoutMs ?? limits.timeoutMs) / 100) / 10;
  let res;
  try {
    res = await fetchImpl(url, { credentials, redirect, signal, cache: 'no-store' });
  } catch (e) {
    if (timedOut(signal)) throw new PageFetchError('fetch_failed', 'timeout', [shown(url), seconds]);
    throw new PageFetchError('fetch_failed', 'download_failed', [String(e?.message ?? e)]);
  }
  const cancel = () => res.body?.cancel?.().catch(() => {});
  if (res.type === 'opaqueredirect') return { redirect: null };
  if (res.status >= 300 && res.status < 400 && res.headers?.get?.('location') != null && redirect === 'manual') {
    await cancel();
    return { redirect: res.headers.get('location') };
  }
  if (!res.ok) {
    await cancel();
    throw new PageFetchError('fetch_failed', 'download_http', [res.status]);
  }
  const type = mediaType(res);
  if (accept && !accept(type)) {
    await cancel();
    throw refused('wrong_type', [type || '?']);
  }
  try {
    const { bytes, truncated } = await readCapped(res, limits);
    return { url: res.url || String(url), type, bytes, truncated };
  } catch (e) {
    if (e instanceof PageFetchError) throw e;
    if (timedOut(signal)) throw new PageFetchError('fetch_failed', 'timeout', [shown(url), seconds]);
    throw new PageFetchError('fetch_failed', 'download_failed', [String(e?.message ?? e)]);
  }
}

// ---------------------------------------------------------------------------------------------
// The hops of one fetch

/**
 * A fetch of `url` for a tab on `tabUrl` under every rule: the target checked before anything is
 * sent, cookies only to the tab's origin, each redirect read (from the response, else the watch)
 * and followed only to the same origin, the server's address checked. `hop` makes one request
 * (`fetchOnce`, or the offscreen document's read of a PDF) and answers `{redirect}` or a result
 * with its `url`.
 * @template R
 * @param {string} url
 * @param {object} o
 * @param {string} o.tabUrl the tab the content is for
 * @param {(url: string, o: {credentials: 'include'|'omit', redirect: 'manual'|'follow'}) => Promise<{redirect: string|null} | R & {url?: string}>} o.hop
 * @param {ReturnType<typeof createRequestWatch>} [o.watch]
 * @returns {Promise<R & {url: string}>} the result, `url` the address its bytes came from
 */
export async function followPage(url, { tabUrl, hop, watch = null }) {
  let at = checkTarget(url, tabUrl);
  const release = watch?.hold();
  try {
    for (let hops = 0; ; hops++) {
      const since = Date.now();
      const got = await hop(at.href, { credentials: credentialsFor(at, tabUrl), redirect: 'manual' });
      const seen = watch ? await watch.outcome(at.href, { since }) : null;
      if (got && 'redirect' in got) {
        const to = got.redirect ?? seen?.redirectUrl ?? null;
        if (to === null) return await followBlind(at, { tabUrl, hop, watch });
        if (hops >= MAX_REDIRECTS) throw refused('too_many_redirects', [shown(url), MAX_REDIRECTS]);
        let next;
        try {
          next = new URL(to, at);
        } catch {
          throw refused('redirect_other_origin', [shown(at.href), shown(to)]);
        }
        if (!sameOrigin(at, next)) throw refused('redirect_other_origin', [shown(at.href), shown(next.href)]);
        at = checkTarget(next, tabUrl);
        continue;
      }
      checkServer(at, seen, tabUrl);
      return { ...got, url: at.href };
    }
  } finally {
    release?.();
  }
}

/**
 * A redirect whose target nothing showed (no watch, or it saw nothing in time): followed once by
 * the browser without cookies, the final address re-checked (same origin, not private).
 */
async function followBlind(at, { tabUrl, hop, watch }) {
  const since = Date.now();
  const got = await hop(at.href, { credentials: 'omit', redirect: 'follow' });
  if (got && 'redirect' in got) throw refused('too_many_redirects', [shown(at.href), MAX_REDIRECTS]);
  const final = parsed(got?.url) ?? at;
  if (!sameOrigin(at, final)) throw refused('redirect_other_origin', [shown(at.href), shown(final.href)]);
  checkTarget(final, tabUrl);
  checkServer(final, watch ? await watch.outcome(final.href, { since }) : null, tabUrl);
  return { ...got, url: final.href };
}

/** A body from a private address, when neither the tab nor the tab's host explains it: refused. */
function checkServer(at, seen, tabUrl) {
  if (seen?.ip && isPrivateIp(seen.ip) && !privateAllowed(at, tabUrl)) throw refused('private_ip', [shown(at.href), seen.ip]);
}

/**
 * A fetch of page content by the worker (a figure, a caption track): `followPage` over `fetchOnce`,
 * all hops within the kind's time limit.
 * @param {string} url
 * @param {object} o
 * @param {'figure'|'caption'|'pdf'} o.kind
 * @param {string} o.tabUrl
 * @param {typeof fetch} [o.fetchImpl]
 * @param {ReturnType<typeof createRequestWatch>} [o.watch]
 * @param {AbortSignal} [o.signal] another reason to stop (e.g. all figures' time)
 * @param {(type: string) => boolean} [o.accept]
 * @param {number} [o.timeoutMs] the kind's time limit unless a test says otherwise
 * @returns {Promise<{url: string, type: string, bytes: Uint8Array, truncated: boolean}>}
 */
export function pageFetch(url, { kind, tabUrl, fetchImpl = globalThis.fetch, watch = null, signal, accept, timeoutMs = FETCH_LIMITS[kind].timeoutMs }) {
  const limit = AbortSignal.timeout(timeoutMs);
  const both = signal ? AbortSignal.any([signal, limit]) : limit;
  return followPage(url, { tabUrl, watch, hop: (u, o) => fetchOnce(u, { kind, ...o, signal: both, accept, fetchImpl, timeoutMs }) });
}

/** The words for a PageFetchError (or its `{reason, values}` sent by the offscreen document), in the UI language. */
export function pageFetchMessage(error) {
  const v = Array.isArray(error?.values) ? error.values.map((x) => String(x ?? '')) : [];
  const num = (n) => (Number.isFinite(Number(n)) ? formatNumber(Number(n)) : String(n ?? '?'));
  switch (error?.reason) {
    case 'scheme':
      return t('fetchRefusedScheme', v[0]);
    case 'private_address':
      return t('fetchRefusedPrivateAddress', v[0]);
    case 'private_ip':
      return t('fetchRefusedPrivateIp', v[0], v[1]);
    case 'redirect_other_origin':
      return t('fetchRefusedRedirect', v[0], v[1]);
    case 'too_many_redirects':
      return t('fetchTooManyRedirects', v[0], num(v[1]));
    case 'wrong_type':
      return t('fetchWrongType', v[0]);
    case 'timeout':
      return t('fetchTimeout', v[0], num(v[1]));
    case 'too_large_declared':
      return t('fetchTooLargeDeclared', num(v[0]), num(v[1]));
    case 'too_large':
      return t('fetchTooLarge', num(v[0]));
    case 'download_http':
      return t('fetchDownloadHttp', v[0]);
    case 'download_failed':
      return t('fetchDownloadFailed', v[0]);
    default:
      return String(error?.message ?? error ?? '');
  }
}

// ---------------------------------------------------------------------------------------------
// The request watch (chrome.webRequest, non-blocking)

/**
 * What the browser's network stack reports about this extension's own requests (docs/platform.md
 * §14: Chromium reports the worker's and the offscreen document's, Firefox its background page's):
 * a redirect's target (`redirectUrl`, or the Location of onHeadersReceived, which
 * `redirect: 'manual'` hides from the fetch) and the server's IP address. The listeners are added
 * while a page fetch needs them (`hold`) and taken off 30 s after the last, so the worker is never
 * woken for them. A browser that has never reported one of this extension's requests when a wait
 * ends is not waited for again (`blind`: the fetches go on without what the watch would add).
 * `null` where the browser has no chrome.webRequest.
 * @param {{chrome?: any, waitMs?: number, lingerMs?: number}} [deps]
 */
export function createRequestWatch({ chrome = globalThis.chrome, waitMs = WATCH_WAIT_MS, lingerMs = WATCH_LINGER_MS } = {}) {
  const wr = chrome?.webRequest;
  if (!wr?.onBeforeRequest?.addListener || !chrome.runtime?.getURL) return null;
  const base = String(chrome.runtime.getURL('')); // chrome-extension://<id>/
  const own = base.endsWith('/') ? base.slice(0, -1) : base;
  /** requestId + url → {url, at, done} (a redirected request is one id with several urls). */
  const records = new Map();
  const waiters = new Set();
  let holders = 0;
  let linger = null;
  let on = false;
  let everSeen = false; // one of this extension's requests was reported since the worker started
  let blind = false; // a wait ended with none ever reported: this browser does not report them

  const mine = (d) => d.tabId === -1 && String(d.initiator ?? d.originUrl ?? d.documentUrl ?? '').startsWith(own);
  const key = (d) => `${d.requestId} ${d.url}`;
  const wake = () => {
    for (const w of waiters) w();
  };
  const listeners = {
    onBeforeRequest: (d) => {
      if (!mine(d)) return;
      everSeen = true;
      blind = false;
      if (records.size > 500) for (const k of [...records.keys()].slice(0, 250)) records.delete(k);
      records.set(key(d), { url: d.url, at: Number(d.timeStamp) || Date.now(), location: null, done: null });
    },
    // a redirect's Location (Firefox reports a `manual` redirect here and in onResponseStarted only)
    onHeadersReceived: (d) => {
      const r = mine(d) ? records.get(key(d)) : null;
      if (!r || !(d.statusCode >= 300 && d.statusCode < 400)) return;
      const loc = (d.responseHeaders ?? []).find((h) => String(h.name).toLowerCase() === 'location')?.value;
      try {
        if (loc != null) r.location = new URL(loc, d.url).href;
      } catch {
        r.location = String(loc);
      }
    },
    onBeforeRedirect: (d) => settle(d, { ip: d.ip ?? null, status: d.statusCode, redirectUrl: d.redirectUrl ?? null }),
    onResponseStarted: (d) => settle(d, { ip: d.ip ?? null, status: d.statusCode }),
    onErrorOccurred: (d) => settle(d, { ip: d.ip ?? null, error: d.error ?? 'error' }),
  };
  function settle(d, done) {
    if (!mine(d)) return;
    const r = records.get(key(d));
    if (!r || r.done) return;
    r.done = done.redirectUrl == null && r.location ? { ...done, redirectUrl: r.location } : done;
    wake();
  }
  function start() {
    if (on) return;
    const filter = { urls: ['http://*/*', 'https://*/*'] };
    for (const [name, fn] of Object.entries(listeners)) {
      if (name === 'onHeadersReceived') wr[name]?.addListener(fn, filter, ['responseHeaders']);
      else wr[name]?.addListener(fn, filter);
    }
    on = true;
  }
  function stop() {
    if (!on) return;
    for (const [name, fn] of Object.entries(listeners)) wr[name]?.removeListener(fn);
    on = false;
    records.clear();
  }
  /** The newest request for `url` made at or after `since`. */
  function newest(url, since) {
    let best = null;
    for (const r of records.values()) if (r.url === url && r.at >= since - 50 && (!best || r.at >= best.at)) best = r;
    return best;
  }

  return {
    /** Keep the listeners while a fetch runs; call the function returned when done. */
    hold() {
      holders++;
      clearTimeout(linger);
      start();
      let released = false;
      return () => {
        if (released) return;
        released = true;
        if (--holders === 0) linger = setTimeout(stop, lingerMs);
      };
    },
    /**
     * What the browser reported for the request to `url` made at or after `since` (ms since the
     * epoch): `{ip, status, redirectUrl?, error?}`, or null when nothing came within `waitMs`.
     */
    outcome(url, { since }) {
      const found = newest(url, since);
      if (found?.done) return Promise.resolve(found.done);
      // a browser that never reported one of our requests (blind) is not waited for again
      if (!found && blind) return Promise.resolve(null);
      return new Promise((resolve) => {
        const check = () => {
          const r = newest(url, since);
          if (r?.done) finish(r.done);
        };
        const finish = (v) => {
          waiters.delete(check);
          clearTimeout(timer);
          if (v === null && !everSeen) blind = true;
          resolve(v);
        };
        const timer = setTimeout(() => finish(null), waitMs);
        waiters.add(check);
      });
    },
    /** For tests: whether the listeners are on. */
    get listening() {
      return on;
    },
  };
}

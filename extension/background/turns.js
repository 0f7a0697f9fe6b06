// Chat-turn orchestration in the service worker (README "Worker chat handlers").
//
// One send = one user entry appended before streaming (storage-model §9 "Turns"); the reply is
// streamed with lib/llm.js and appended when it completes, or salvaged with `interrupted: true`
// when it is aborted. Stream state is worker memory only; every durable byte goes through
// storage.js to keepsake-host.
//
// Decisions live in small exported pure functions; `createTurns` takes every side effect
// (storage, llm, chrome, broadcast, clock, timers) as an argument so node --test can drive it.

import { streamReply as defaultStreamReply } from '../lib/llm.js';
import { seekScript } from '../lib/pills.js';

// ---------------------------------------------------------------------------------------------
// Constants

/** Settings a turn needs (explicit key list, storage-model §3). */
export const TURN_SETTING_KEYS = Object.freeze([
  'providers',
  'activeProvider',
  'activeModel',
  'systemPrompt',
  'autoSummarizeAttachments',
  'summarizeThresholdChars',
]);

/** Provider kinds the worker streams itself (runs/agent are not offered in the UI). */
export const STREAM_KINDS = Object.freeze(['chat', 'responses', 'anthropic']);

export const IMAGE_REF_PREFIX = 'keepsake-image:sha256:';
export const TURN_TOKEN_PREFIX = 'keepsake-turn-image:';
export const PAGE_CONTEXT_PREFIX = '[Page context attached by Keepsake]';
export const LEGACY_PREFIX = '[Page context attached by browsa]';

/** Output cap sent to Anthropic, which requires `max_tokens` (4096 fits every Claude model; longer
 * replies get the continuation pass). */
export const ANTHROPIC_MAX_TOKENS = 4096;
export const SUMMARY_MAX_TOKENS = 4096;
/** At most this many summary calls run at once (N chunks are still all requested in parallel waves). */
export const SUMMARY_CONCURRENCY = 6;
/** The worker pings an extension API this often while a stream runs (MV3 idle shutdown is 30 s). */
export const KEEPALIVE_MS = 20_000;
/** Text extracted from a page is cut here (the host accepts far more; auto-summary condenses). */
export const MAX_PAGE_CHARS = 3_000_000;

export const CONTINUATION_INSTRUCTION =
  'Your previous reply was cut off by the output length limit. Continue exactly where it stopped, ' +
  'without repeating anything and without any preamble.';

// ---------------------------------------------------------------------------------------------
// Small pure helpers

/** An Error carrying a wire `code` (the handler map turns it into `{ok: false, error}`). */
export function codeError(code, message, extra = {}) {
  const e = new Error(message);
  e.code = code;
  Object.assign(e, extra);
  return e;
}

export function isBlank(s) {
  return typeof s !== 'string' || s.trim() === '';
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * The active provider card and the labels stamped on its replies.
 * `activeProvider` names a card by id (or by name); a stale id falls back to the first card.
 * @returns {{provider: {kind, baseUrl, apiKey, model}, label: string, key: {name, model}}}
 */
export function pickProvider(settings = {}) {
  const cards = Array.isArray(settings.providers) ? settings.providers.filter(isObject) : [];
  const want = settings.activeProvider;
  const card =
    cards.find((c) => want != null && c.id === want) ??
    cards.find((c) => typeof want === 'string' && want !== '' && c.name === want) ??
    cards[0];
  if (!card) throw codeError('no_provider', 'No LLM provider is configured (Options → Providers).');
  const kind = card.kind ?? 'chat';
  if (!STREAM_KINDS.includes(kind)) {
    throw codeError('unsupported', `Provider kind "${kind}" is not supported by this version.`);
  }
  if (isBlank(card.baseUrl)) throw codeError('no_provider', `Provider "${card.name ?? card.id}" has no base URL.`);
  // the host keeps API keys in the system's secret store; one it could not read comes back empty
  // with the reason (PROTOCOL.md "API keys"): say so instead of sending no key to the provider
  if (isBlank(card.apiKey) && !isBlank(card.apiKeyUnavailable)) {
    throw codeError('no_provider', `The API key of "${card.name ?? card.id}" is kept in the system's secret store, which could not be read: ${card.apiKeyUnavailable}`);
  }
  const model =
    (typeof settings.activeModel === 'string' && settings.activeModel.trim()) ||
    (typeof card.model === 'string' ? card.model.trim() : '');
  const name = String(card.name ?? card.id ?? kind);
  return {
    provider: { kind, baseUrl: card.baseUrl, apiKey: card.apiKey ?? '', model },
    label: model ? `${name} · ${model}` : name,
    key: { name, model },
  };
}

/** Extra top-level body fields for request.build (llm.js sets model/stream again; harmless). */
export function bodyFieldsFor(provider, { maxTokens = ANTHROPIC_MAX_TOKENS, stream = true } = {}) {
  const f = {};
  if (provider.model) f.model = provider.model;
  f.stream = stream;
  if (provider.kind === 'anthropic') f.max_tokens = maxTokens;
  return f;
}

/** `data:<mime>[;params];base64,<data>` → `{mime (lower-case), data}`, else null. */
export function parseDataUrl(url) {
  if (typeof url !== 'string') return null;
  const m = /^data:([^;,]+)((?:;[^;,]*)*?);base64,(.*)$/is.exec(url.trim());
  if (!m || !/^image\//i.test(m[1])) return null;
  return { mime: m[1].toLowerCase(), data: m[3] };
}

const TOKEN_RE = /^(?:keepsake-image:sha256:[0-9a-f]{64}|keepsake-turn-image:\d+)$/;

/** An image reference or a turn placeholder (the whole string). */
export function isImageToken(s) {
  return typeof s === 'string' && TOKEN_RE.test(s);
}

/** Every image token (reference or turn placeholder) found in a JSON value. */
export function collectTokens(value, out = new Set()) {
  if (typeof value === 'string') {
    if (isImageToken(value)) out.add(value);
  } else if (Array.isArray(value)) {
    for (const v of value) collectTokens(v, out);
  } else if (isObject(value)) {
    for (const v of Object.values(value)) collectTokens(v, out);
  }
  return out;
}

/**
 * PROTOCOL.md "imageRefs": a string equal to a token becomes `data:<mime>;base64,<data>`; an
 * Anthropic `source` `{type: "base64", data: <token>}` gets the bare base64. `images` maps each
 * token to `{mime, data}`. Returns a new value; throws if a token is unknown.
 */
export function fillImageTokens(value, images) {
  const look = (tok) => {
    const img = images instanceof Map ? images.get(tok) : images[tok];
    if (!img) throw codeError('image_unavailable', `no bytes for ${tok}`);
    return img;
  };
  const walk = (v) => {
    if (typeof v === 'string') {
      if (!isImageToken(v)) return v;
      const img = look(v);
      return `data:${img.mime};base64,${img.data}`;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (isObject(v)) {
      if (v.type === 'base64' && isImageToken(v.data)) return { ...v, data: look(v.data).data };
      const o = {};
      for (const [k, x] of Object.entries(v)) o[k] = walk(x);
      return o;
    }
    return v;
  };
  return walk(value);
}

/** Whether a request body (or entry) carries any image part, pixels or tokens. */
export function bodyHasImages(value) {
  if (Array.isArray(value)) return value.some(bodyHasImages);
  if (!isObject(value)) return false;
  if (value.type === 'image_url' || value.type === 'input_image' || value.type === 'image') return true;
  return Object.values(value).some((v) => typeof v === 'object' && bodyHasImages(v));
}

/** Whether a body's JSON text may hold an image token (any occurrence: a superset of collectTokens). */
export function textHasTokens(text) {
  return text.includes(IMAGE_REF_PREFIX) || text.includes(TURN_TOKEN_PREFIX);
}

const IMAGE_PART_TEXT = /"type"\s*:\s*"(?:image_url|input_image|image)"/;

/**
 * bodyHasImages on a body's JSON text: true whenever bodyHasImages is. It can also be true without
 * an image part (a key ending in that text), which only costs a `markImagesSeen` that stamps
 * nothing; a string value's own quotes are escaped, so no message text can make it true.
 */
export function textHasImages(text) {
  return IMAGE_PART_TEXT.test(text);
}

/** storage-model §2.1 entryText. */
export function entryText(e) {
  if (!isObject(e)) return '';
  if (typeof e.content === 'string') return e.content;
  if (!Array.isArray(e.content)) return '';
  return e.content
    .filter((p) => isObject(p) && (p.type === 'text' || p.type === 'input_text') && typeof p.text === 'string')
    .map((p) => p.text)
    .join('\n');
}

/** storage-model §2.3: a user entry whose attach text (string or first text part) starts with a prefix. */
export function isAttachEntry(e) {
  if (!isObject(e) || e.role !== 'user') return false;
  let t = '';
  if (typeof e.content === 'string') t = e.content;
  else if (Array.isArray(e.content)) {
    const p = e.content.find((x) => isObject(x) && (x.type === 'text' || x.type === 'input_text'));
    t = typeof p?.text === 'string' ? p.text : '';
  }
  return t.startsWith(PAGE_CONTEXT_PREFIX) || t.startsWith(LEGACY_PREFIX);
}

/** The `videoSrc` of the newest entry carrying one (storage-model §9 "Turns"), or null. */
export function newestVideoSrc(entries) {
  if (!Array.isArray(entries)) return null;
  for (let i = entries.length - 1; i >= 0; i--) {
    const v = entries[i]?.videoSrc;
    if (isObject(v)) return v;
  }
  return null;
}

/**
 * Where this turn's user entry sits in `entries` now: `hint` if it still matches, else the newest
 * non-attach user entry with the same text; -1 if none (front trims and write-backs move indexes).
 */
export function findUserEntryIndex(entries, text, hint) {
  if (!Array.isArray(entries)) return -1;
  const matches = (e) => isObject(e) && e.role === 'user' && !isAttachEntry(e) && entryText(e) === text;
  if (Number.isInteger(hint) && hint >= 0 && hint < entries.length && matches(entries[hint])) return hint;
  for (let i = entries.length - 1; i >= 0; i--) if (matches(entries[i])) return i;
  return -1;
}

/**
 * Trailing machine-readable choice blocks (storage-model §9 "Turns") are removed before the reply
 * is stored: a final fenced block whose info string is `choices`/`keepsake-choices` (any fence), or a
 * final `<choices>…</choices>` element. The spec does not define the block format further.
 *
 * Linear time (issue 18): this used to be two regexes applied until nothing changed,
 *   fenced  /\n?[ \t]*(`{3,}|~{3,})[ \t]*(?:keepsake-)?choices\b[^\n]*\n[\s\S]*?\n[ \t]*\1[ \t]*\s*$/i
 *   tagged  /\n?[ \t]*<choices\b[^>]*>[\s\S]*?<\/choices>\s*$/i
 * whose backtracking is cubic (a crafted 8 KB reply held the worker for a minute). The scanner below
 * gives exactly their results on every input (turns.test.js compares the two on random texts):
 * both always match up to the end, so a match is a cut point, and the cut is the leftmost opening
 * that pairs with the closing line at the end of the text. Openings are indexed once over the whole
 * text; each round only looks at the text's end.
 */
export function stripChoiceBlocks(text) {
  if (typeof text !== 'string') return '';
  const index = choiceOpenings(text);
  let end = text.length;
  for (;;) {
    const before = end;
    const fenced = fencedCut(text, end, index);
    if (fenced >= 0) end = fenced;
    const tagged = taggedCut(text, end, index);
    if (tagged >= 0) end = tagged;
    if (end === before) return end === text.length ? text : text.slice(0, end);
  }
}

const BACKTICK = 0x60;
const TILDE = 0x7e;

/** JavaScript's `\s` (WhiteSpace and LineTerminator), by UTF-16 code unit. */
function isJsSpace(c) {
  return (
    c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
  );
}

/** `\w` without the `u` flag. */
function isWordChar(c) {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f;
}

/** `s` at `i` starts with `lower` (lower-case ASCII), ASCII letters compared case-insensitively like `/i`. */
function startsWithAsciiCI(s, i, lower) {
  if (i + lower.length > s.length) return false;
  for (let k = 0; k < lower.length; k++) {
    let c = s.charCodeAt(i + k);
    if (c >= 0x41 && c <= 0x5a) c += 0x20;
    if (c !== lower.charCodeAt(k)) return false;
  }
  return true;
}

/** Back over `[ \t]*` and then one optional `\n` from `p`: where a match starting there begins. */
function matchStart(s, p) {
  while (p > 0 && (s.charCodeAt(p - 1) === 0x20 || s.charCodeAt(p - 1) === 0x09)) p--;
  if (p > 0 && s.charCodeAt(p - 1) === 0x0a) p--;
  return p;
}

/** Where `s.slice(0, end)` ends once trailing `\s` is dropped. */
function trimmedEnd(s, end) {
  while (end > 0 && isJsSpace(s.charCodeAt(end - 1))) end--;
  return end;
}

/**
 * The openings of the whole text, in one pass:
 *   fences[c]: the fence runs (``` or ~~~, c = char code) followed by `[ \t]*(keepsake-)?choices\b`,
 *     each `{len, end, nl}` (run length, run end, the first `\n` after the info word, or Infinity),
 *     only those longer than every earlier one (the first run of at least R characters is all a
 *     fence of R characters needs: a later one starts later, and its line ends no earlier);
 *   tag: the first `<choices\b` and the first `>` after it (its line end does not matter).
 */
function choiceOpenings(s) {
  const fences = { [BACKTICK]: [], [TILDE]: [] };
  let nl = -1; // the first '\n' at or after the last position asked about (monotone, so linear)
  const newlineFrom = (p) => {
    if (nl !== Infinity && nl < p) {
      nl = s.indexOf('\n', p);
      if (nl === -1) nl = Infinity;
    }
    return nl;
  };
  const n = s.length;
  for (let i = 0; i < n; ) {
    const c = s.charCodeAt(i);
    if (c !== BACKTICK && c !== TILDE) {
      i++;
      continue;
    }
    let end = i + 1;
    while (end < n && s.charCodeAt(end) === c) end++;
    const len = end - i;
    i = end;
    if (len < 3) continue;
    const list = fences[c];
    if (list.length > 0 && list[list.length - 1].len >= len) continue;
    let q = end;
    while (q < n && (s.charCodeAt(q) === 0x20 || s.charCodeAt(q) === 0x09)) q++;
    if (startsWithAsciiCI(s, q, 'keepsake-choices')) q += 16;
    else if (startsWithAsciiCI(s, q, 'choices')) q += 7;
    else continue;
    if (q < n && isWordChar(s.charCodeAt(q))) continue;
    list.push({ len, end, nl: newlineFrom(q) });
  }
  let tag = null;
  for (let i = s.indexOf('<'); i !== -1; i = s.indexOf('<', i + 1)) {
    if (!startsWithAsciiCI(s, i + 1, 'choices')) continue;
    if (i + 8 < n && isWordChar(s.charCodeAt(i + 8))) continue;
    const gt = s.indexOf('>', i + 8);
    tag = { at: i, gt: gt === -1 ? Infinity : gt };
    break;
  }
  return { fences, tag };
}

/** The fenced rule on `s.slice(0, end)`: where its match starts, or -1. */
function fencedCut(s, end, index) {
  const e = trimmedEnd(s, end);
  if (e === 0) return -1;
  const c = s.charCodeAt(e - 1);
  if (c !== BACKTICK && c !== TILDE) return -1;
  let r = e - 1;
  while (r > 0 && s.charCodeAt(r - 1) === c) r--;
  const len = e - r; // the closing fence: a whole run, `\1` exactly
  if (len < 3) return -1;
  let q = r;
  while (q > 0 && (s.charCodeAt(q - 1) === 0x20 || s.charCodeAt(q - 1) === 0x09)) q--;
  if (q === 0 || s.charCodeAt(q - 1) !== 0x0a) return -1;
  const closingNewline = q - 1;
  const list = index.fences[c];
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid].len < len) lo = mid + 1;
    else hi = mid;
  }
  if (lo === list.length) return -1;
  const open = list[lo];
  // the body starts after the opening line; the closing line's `\n` comes at or after that
  if (!(open.nl < closingNewline)) return -1;
  return matchStart(s, open.end - len);
}

/** The tagged rule on `s.slice(0, end)`: where its match starts, or -1. */
function taggedCut(s, end, index) {
  const e = trimmedEnd(s, end);
  const k = e - 10;
  if (k < 0 || !startsWithAsciiCI(s, k, '</choices>')) return -1;
  const tag = index.tag;
  if (!tag || !(tag.gt < k)) return -1;
  return matchStart(s, tag.at);
}

/** `{code, message, kind, status?}` for a chat.error event. */
export function errorInfo(e, { stopped = false } = {}) {
  const kind = e?.kind ?? (e?.code ? 'storage' : 'error');
  let code = e?.code;
  if (!code) code = kind === 'http' && e?.status ? `http_${e.status}` : kind;
  if (kind === 'aborted' && stopped) code = 'stopped';
  const info = { code: String(code), message: String(e?.message ?? e ?? 'error'), kind };
  if (e?.status != null) info.status = e.status;
  return info;
}

/** Error kinds after which an overflow rescue may be tried (§7.3: HTTP errors of rescuable kinds). */
export function mayRescue(e, { kind, rescued, text }) {
  return !rescued && e?.kind === 'http' && STREAM_KINDS.includes(kind) && isBlank(text) && !isBlank(e?.message);
}

/** Credentials never reach stored text (storage-model §2.4). */
export function redactUrl(url) {
  if (typeof url !== 'string') return '';
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i, '$1');
}

export function videoPlatform(url) {
  let host = '';
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return 'html5';
  }
  if (host === 'youtu.be' || host === 'youtube.com' || host.endsWith('.youtube.com')) return 'youtube';
  if (host === 'bilibili.com' || host.endsWith('.bilibili.com') || host === 'b23.tv') return 'bilibili';
  return 'html5';
}

/** Display string for `ctx.changedSince` (local `YYYY-MM-DD HH:MM`). */
export function formatChangedSince(ts) {
  const d = new Date(Number(ts));
  if (Number.isNaN(d.getTime())) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** `history.attach` arguments for a page extracted by `extractReadablePage`. */
export function attachArgsFor(page, { tabId, tabUrl, tabTitle, changedSince } = {}) {
  const rawUrl = (typeof tabUrl === 'string' && tabUrl) || page?.url || '';
  const url = redactUrl(rawUrl);
  const title = (typeof page?.title === 'string' && page.title.trim()) || tabTitle || url;
  const body = typeof page?.text === 'string' ? page.text.slice(0, MAX_PAGE_CHARS) : '';
  const ctx = { url, title, mode: 'full', body };
  if (changedSince) ctx.changedSince = changedSince;
  const args = { ctx };
  if (page?.hasVideo) args.videoSrc = { platform: videoPlatform(rawUrl), url, tabId };
  return args;
}

// ----- auto-summary (storage-model §9 "Auto-summary", §7.4)

const FAMILY_RULES = {
  video:
    'The source is a video transcript. Keep every [mm:ss] or [h:mm:ss] timestamp marker exactly as written, ' +
    'next to the point it belongs to, in chronological order.',
  paper:
    'The source is a paper or long document. Keep its section headings, every number, figure and table ' +
    'reference, and every [Page N] marker exactly as written.',
  generic: 'Keep headings, names, numbers, dates, definitions, code identifiers and conclusions.',
};

export function summaryPrompts(family) {
  const rule = FAMILY_RULES[family] ?? FAMILY_RULES.generic;
  return {
    chunk:
      'You condense attached page content so a later conversation can use it. Write a faithful, dense ' +
      'Markdown summary in the language of the source; no preamble, no commentary. ' +
      rule,
    merge:
      'You are given summaries of consecutive segments of one source, each marked [Segment i]. Merge them ' +
      'into one coherent, faithful Markdown summary in the language of the source, removing repetition but ' +
      'no facts; no preamble and no segment markers. ' +
      rule,
  };
}

/** The per-chunk user messages: one chunk → as is; N chunks → `[Segment i/N]\n<chunk>`. */
export function summaryChunkMessages(chunks) {
  if (chunks.length === 1) return [chunks[0]];
  return chunks.map((c, i) => `[Segment ${i + 1}/${chunks.length}]\n${c}`);
}

/** The merge call's user message: summaries prefixed `[Segment i]\n`, joined by blank lines. */
export function summaryMergeMessage(summaries) {
  return summaries.map((s, i) => `[Segment ${i + 1}]\n${s}`).join('\n\n');
}

/** A one-message request body in the provider's shape (no history). */
export function simpleBody(provider, system, user, { maxTokens = SUMMARY_MAX_TOKENS } = {}) {
  const fields = bodyFieldsFor(provider, { maxTokens });
  switch (provider.kind) {
    case 'anthropic':
      return { ...fields, system, messages: [{ role: 'user', content: user }] };
    case 'responses':
      return { ...fields, instructions: system, input: [{ role: 'user', content: user }] };
    default:
      return {
        ...fields,
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: user },
        ],
      };
  }
}

// ----- functions injected into pages by chrome.scripting (must be self-contained)

/** Readable text of the page: title, URL, main text of article/main/body, whitespace collapsed. */
export function extractReadablePage() {
  const clean = (s) =>
    String(s || '')
      .replace(/\r\n?/g, '\n')
      .replace(/[^\S\n]+/g, ' ')
      .replace(/ ?\n ?/g, '\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim();
  const candidates = [
    document.querySelector('article'),
    document.querySelector('main'),
    document.querySelector('[role="main"]'),
    document.body,
  ].filter(Boolean);
  let text = '';
  for (const el of candidates) {
    const t = clean(el.innerText !== undefined ? el.innerText : el.textContent);
    if (t.length >= 200) {
      text = t;
      break;
    }
    if (t.length > text.length) text = t;
  }
  const hasVideo = document.querySelectorAll('video').length > 0;
  return { title: String(document.title || '').trim(), url: location.href, text, hasVideo };
}

// ---------------------------------------------------------------------------------------------
// Held image bytes (for `imageRefs: [ref, …]`)

function base64ToBytes(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

const CANONICAL_B64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Image bytes the worker still holds, keyed by image reference (sha256 of the decoded bytes), so
 * request.build can leave them as references (PROTOCOL.md "imageRefs"). Memory only, LRU-bounded.
 */
export class ImageCache {
  constructor({ maxChars = 24 * 1024 * 1024, subtle = globalThis.crypto?.subtle } = {}) {
    this.maxChars = maxChars;
    this.subtle = subtle;
    this.map = new Map();
    this.chars = 0;
  }

  refs() {
    return [...this.map.keys()];
  }

  get(ref) {
    const v = this.map.get(ref);
    if (!v) return undefined;
    this.map.delete(ref);
    this.map.set(ref, v);
    return v;
  }

  put(ref, img) {
    if (!ref.startsWith(IMAGE_REF_PREFIX) || !img || typeof img.data !== 'string') return;
    if (img.data.length > this.maxChars) return;
    const old = this.map.get(ref);
    if (old) {
      this.chars -= old.data.length;
      this.map.delete(ref);
    }
    this.map.set(ref, { mime: img.mime, data: img.data });
    this.chars += img.data.length;
    for (const [k, v] of this.map) {
      if (this.chars <= this.maxChars) break;
      this.map.delete(k);
      this.chars -= v.data.length;
    }
  }

  /** Hash and keep a canonical image data URL; returns its reference or null. */
  async addDataUrl(url) {
    const img = parseDataUrl(url);
    if (!img || !this.subtle || img.data.length % 4 !== 0 || !CANONICAL_B64.test(img.data)) return null;
    const digest = new Uint8Array(await this.subtle.digest('SHA-256', base64ToBytes(img.data)));
    const ref = IMAGE_REF_PREFIX + Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
    this.put(ref, img);
    return ref;
  }
}

// ---------------------------------------------------------------------------------------------
// Request bodies as deltas (PROTOCOL.md "Body deltas")

let encodeBuf = new Uint8Array(0);

/**
 * sha256 of the UTF-8 of `text`, 64 lower-case hex digits: the host's `bodyHash`. Encodes into
 * a reused buffer (`encodeInto` is about twice as fast as `encode` on a 300K-char body).
 */
export async function textHash(text, subtle = globalThis.crypto?.subtle) {
  const need = text.length * 3;
  if (encodeBuf.length < need) encodeBuf = new Uint8Array(need);
  const { written } = new TextEncoder().encodeInto(text, encodeBuf);
  const digest = new Uint8Array(await subtle.digest('SHA-256', encodeBuf.subarray(0, written)));
  if (encodeBuf.length > 4 * 1024 * 1024) encodeBuf = new Uint8Array(0); // keep only a modest buffer
  let hex = '';
  for (const b of digest) hex += b.toString(16).padStart(2, '0');
  return hex;
}

/**
 * `bodyDelta.ops` applied to `held`: each op is a literal string or `[start, end]`, a slice of
 * `held` in UTF-16 code units. Returns null when an op is malformed or out of range, or when
 * the result is not `length` units long.
 */
export function applyBodyDelta(held, ops, length) {
  if (typeof held !== 'string' || !Array.isArray(ops)) return null;
  const parts = [];
  let n = 0;
  for (const op of ops) {
    if (typeof op === 'string') {
      parts.push(op);
      n += op.length;
      continue;
    }
    if (!Array.isArray(op) || op.length !== 2) return null;
    const [a, b] = op;
    if (!Number.isInteger(a) || !Number.isInteger(b) || a < 0 || a >= b || b > held.length) return null;
    parts.push(held.slice(a, b));
    n += b - a;
  }
  return n === length ? parts.join('') : null;
}

/**
 * The last request body text the host sent this worker and its hash, so the next
 * `request.build` can name it (`since`) and receive only what changed. Memory only: a worker
 * restart or a new host process costs one full body.
 */
export class BodyMemory {
  constructor({ subtle = globalThis.crypto?.subtle } = {}) {
    this.subtle = subtle;
    this.text = null;
    this.hash = null;
    this.stats = { full: 0, delta: 0, rejected: 0 };
  }

  /** Deltas need a digest to verify them. */
  get enabled() {
    return !!this.subtle && typeof TextEncoder === 'function';
  }

  snapshot() {
    return { text: this.text, hash: this.hash };
  }

  forget() {
    this.text = null;
    this.hash = null;
  }

  /**
   * The body text of a `request.build` reply made with `since: snap.hash`, and a check of it:
   * `bodyText` as is (nothing to check), or `bodyDelta` applied to `snap.text` (ranges and
   * length checked here; `check()` resolves whether its sha256 is `bodyHash`, and forgets it
   * when not). The text is kept for the next build at once. `undefined` when the reply has no
   * text form (a host that ignores `since`); null when the delta does not apply.
   * @returns {{text: string, check: () => Promise<boolean>} | null | undefined}
   */
  take(res, snap) {
    if (typeof res?.bodyText === 'string') {
      this.#keep(res.bodyText, res.bodyHash);
      this.stats.full++;
      return { text: res.bodyText, check: async () => true };
    }
    const d = res?.bodyDelta;
    if (!d || typeof d !== 'object') return undefined;
    const text = d.since === snap.hash ? applyBodyDelta(snap.text, d.ops, res.bodyLength) : null;
    if (text === null) {
      this.stats.rejected++;
      return null;
    }
    this.#keep(text, res.bodyHash);
    this.stats.delta++;
    let verdict = null;
    const verify = async () => {
      let ok = false;
      try {
        ok = (await textHash(text, this.subtle)) === res.bodyHash;
      } catch {
        ok = false;
      }
      if (!ok) {
        this.stats.rejected++;
        if (this.text === text) this.forget();
      }
      return ok;
    };
    return { text, check: () => (verdict ??= verify()) };
  }

  #keep(text, hash) {
    if (typeof hash !== 'string') return;
    this.text = text;
    this.hash = hash;
  }
}

/** Writes that may change turn settings: a page's call of one, relayed by this worker, forgets them. */
export const SETTINGS_WRITES = new Set(['settings.set', 'settings.remove', 'storage.import']);

/**
 * The turn settings (TURN_SETTING_KEYS) as last read, so a send does not wait for a
 * `settings.get` round trip. Forgotten on every `changed` event naming settings and on every
 * connection state change of `events` (the NativePort: a new host process does not announce
 * commits made before it opened the database). A read that an event overtook is not kept. Without
 * `events` nothing is kept: every `get` reads.
 */
export class SettingsMemory {
  constructor(read, events) {
    this.read = read;
    this.value = null;
    this.generation = 0;
    this.keeps = !!events?.on;
    if (this.keeps) {
      events.on('changed', (change) => {
        if (change?.areas?.settings) this.forget();
      });
      events.on('state', () => this.forget());
    }
  }

  forget() {
    this.generation++;
    this.value = null;
  }

  /**
   * A page's host call that this worker relays (`op`): a settings write forgets the settings when
   * it is sent and again when it is answered (`done`, a promise), so a send the page makes after
   * the write's reply reads them, whether or not the `changed` event has come yet.
   */
  relayed(op, done) {
    if (!SETTINGS_WRITES.has(op)) return;
    this.forget();
    Promise.resolve(done).then(
      () => this.forget(),
      () => this.forget(),
    );
  }

  async get() {
    if (this.value) return this.value;
    const generation = this.generation;
    const value = (await this.read()) ?? {};
    if (this.keeps && generation === this.generation) this.value = value;
    return value;
  }
}

// ---------------------------------------------------------------------------------------------
// A small async mutex: routing-sensitive writes (append user entry, final append, load/new) never
// interleave, so a finishing stream cannot land between a save and a switch.

export function createLock() {
  let tail = Promise.resolve();
  return {
    run(fn) {
      const p = tail.then(() => fn());
      tail = p.catch(() => {});
      return p;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The engine

/**
 * @param {object} deps
 * @param {object} deps.storage        createStorage(...) client
 * @param {(event: object) => void} [deps.broadcast]
 * @param {object} [deps.chrome]       chrome.* APIs (tabs, scripting, runtime, windows)
 * @param {{streamReply: Function}} [deps.llm]
 * @param {() => number} [deps.now]
 * @param {{setInterval, clearInterval}} [deps.timers]
 * @param {Function} [deps.fetchImpl]  passed through to llm.streamReply
 * @param {ImageCache} [deps.imageCache]
 * @param {BodyMemory} [deps.bodyMemory] the last body text received (request bodies as deltas)
 * @param {{on: Function}} [deps.events] the NativePort's events (`changed`, `state`): with them the
 *   turn settings are kept between sends (SettingsMemory)
 * @param {() => string} [deps.newId]
 */
export function createTurns(deps) {
  const {
    storage,
    broadcast = () => {},
    chrome = globalThis.chrome,
    llm = { streamReply: defaultStreamReply },
    now = () => Date.now(),
    timers = { setInterval: (fn, ms) => globalThis.setInterval(fn, ms), clearInterval: (t) => globalThis.clearInterval(t) },
    fetchImpl,
    imageCache = new ImageCache(),
    bodyMemory = new BodyMemory(),
    events = null,
    keepAliveMs = KEEPALIVE_MS,
    summaryConcurrency = SUMMARY_CONCURRENCY,
  } = deps;
  let idSeq = 0;
  const newId =
    deps.newId ?? (() => (globalThis.crypto?.randomUUID ? globalThis.crypto.randomUUID() : `s${now()}-${++idSeq}`));

  const settingsMemory = new SettingsMemory(() => storage.settings.get({ keys: [...TURN_SETTING_KEYS] }), events);
  const streams = new Map(); // streamId → stream (until settled)
  const lock = createLock();
  let sending = false;
  let busyWork = 0;
  let keepAliveTimer = null;
  const pending = new Set(); // promises of running turns/summaries (tests await idle())

  // ----- keep-alive while streams or summaries run (an open port alone idles out after 60 s)
  function activityStart() {
    busyWork++;
    if (keepAliveTimer == null && chrome?.runtime?.getPlatformInfo && timers?.setInterval) {
      keepAliveTimer = timers.setInterval(() => {
        try {
          Promise.resolve(chrome.runtime.getPlatformInfo()).catch(() => {});
        } catch {
          /* ignore */
        }
      }, keepAliveMs);
    }
  }
  function activityEnd() {
    busyWork = Math.max(0, busyWork - 1);
    if (busyWork === 0 && keepAliveTimer != null) {
      timers.clearInterval(keepAliveTimer);
      keepAliveTimer = null;
    }
  }
  function track(p) {
    pending.add(p);
    p.finally(() => pending.delete(p)).catch(() => {});
    return p;
  }

  function foreground() {
    for (const s of streams.values()) if (!s.bg && !s.settled) return s;
    return null;
  }
  function publicStream(s) {
    return {
      streamId: s.streamId,
      text: s.text,
      startedAt: s.startedAt,
      originSessionId: s.originSessionId,
      bg: s.bg,
      userIndex: s.userIndex,
      phase: s.phase,
    };
  }
  /** chunk/done/error/progress of a background stream are not pushed to the panel (§9). */
  function emit(stream, event) {
    if (stream?.bg) return;
    try {
      broadcast(event);
    } catch {
      /* a page going away must not break the turn */
    }
  }
  function progress(event) {
    try {
      broadcast({ type: 'chat.progress', ...event });
    } catch {
      /* ignore */
    }
  }

  // ----- request.build with imageRefs, tokens filled from what the worker holds

  async function resolveTokens(tokens, turnImages) {
    const map = new Map();
    for (const tok of tokens) {
      if (tok.startsWith(TURN_TOKEN_PREFIX)) {
        const i = Number(tok.slice(TURN_TOKEN_PREFIX.length));
        const img = parseDataUrl(turnImages?.[i]);
        if (!img) throw codeError('image_unavailable', `${tok}: no such turn image`);
        map.set(tok, img);
      } else {
        let img = imageCache.get(tok);
        if (!img) {
          const r = await storage.images.get({ ref: tok });
          img = { mime: String(r.mime).toLowerCase(), data: r.bytes };
          imageCache.put(tok, img);
        }
        map.set(tok, img);
      }
    }
    return map;
  }

  /**
   * request.build naming what the worker holds: image bytes (`imageRefs`) and the last body text
   * (`since`, so an unchanged history costs a few hundred bytes). The reply carries the body as
   * `bodyText` (not parsed here) when it travelled as text, else as `body`. With `deferCheck`, a
   * delta's hash check is left to the caller (`check()`, resolves false when the body must not be
   * used); otherwise a delta that does not verify is replaced by one full body here.
   */
  async function hostBuild(args, { deferCheck = false } = {}) {
    const withRefs = { ...args, imageRefs: imageCache.refs() };
    if (bodyMemory.enabled) {
      const snap = bodyMemory.snapshot();
      let res = await storage.request.build({ ...withRefs, since: snap.hash ?? '' });
      let got = bodyMemory.take(res, snap);
      if (got && !deferCheck && !(await got.check())) got = null;
      if (got === null) {
        // a delta that does not apply or verify: one full body
        bodyMemory.forget();
        res = await storage.request.build({ ...withRefs, since: '' });
        got = bodyMemory.take(res, { text: null, hash: null });
      }
      if (got === undefined) return res;
      const { bodyText, bodyDelta, ...rest } = res;
      return deferCheck ? { ...rest, bodyText: got.text, check: got.check } : { ...rest, bodyText: got.text };
    }
    return storage.request.build(withRefs);
  }

  /**
   * → {res, payload, userEntry, hasImages, check?}: `payload` is what llm.streamReply sends,
   * `{bodyText}` (the host's text as it came: no parse, no re-stringify) when the text holds no
   * image token, else `{body}` with the tokens filled. `check` only with `deferCheck` (see
   * hostBuild).
   */
  async function buildRequest(args, opts) {
    const { check, bodyText, ...res } = await hostBuild(args, opts);
    if (typeof bodyText === 'string' && !textHasTokens(bodyText)) {
      const tokens = collectTokens(res.userEntry);
      const userEntry = tokens.size ? fillImageTokens(res.userEntry, await resolveTokens(tokens, args.turn?.images)) : res.userEntry;
      return { res, payload: { bodyText }, userEntry, hasImages: textHasImages(bodyText), check };
    }
    const body = typeof bodyText === 'string' ? JSON.parse(bodyText) : res.body;
    const hasImages = bodyHasImages(body);
    const tokens = new Set([...(res.imageRefs ?? []), ...collectTokens(body), ...collectTokens(res.userEntry)]);
    if (tokens.size === 0) return { res, payload: { body }, userEntry: res.userEntry, hasImages, check };
    const map = await resolveTokens(tokens, args.turn?.images);
    return {
      res,
      payload: { body: fillImageTokens(body, map) },
      userEntry: fillImageTokens(res.userEntry, map),
      hasImages,
      check,
    };
  }

  function readSettings() {
    return settingsMemory.get();
  }

  // ----- send

  async function withSendSlot(fn) {
    if (sending || foreground()) throw codeError('busy', 'A reply is still streaming; stop it first.');
    sending = true;
    try {
      return await fn();
    } finally {
      sending = false;
    }
  }

  /**
   * One turn. `mode` says where its user entry comes from (docs/keeps.md):
   * - `{kind: 'append'}`: a new message, appended (chat.send);
   * - `{kind: 'branch', index}`: Edit & resend: the live entries from `index` on are kept as
   *   another version and the new message continues the chat (history.branch);
   * - `{kind: 'retry', index}`: the stored user entry at `index` is sent again (Retry of a failed
   *   turn): nothing is appended;
   * - `{kind: 'regenerate', index, userIndex, replacedEntryId}`: the user entry at `userIndex` is
   *   sent again and the reply at `index` is replaced by a new version of it — only when the new
   *   reply succeeds or is stopped.
   */
  async function startTurn({ text = '', images = [], attachTabId } = {}, mode = { kind: 'append' }) {
    if (attachTabId != null) await attachPage({ tabId: attachTabId });
    const settings = await readSettings();
    const picked = pickProvider(settings);
    const resending = mode.kind === 'retry' || mode.kind === 'regenerate';
    const turnImages = !resending && Array.isArray(images) ? images.filter((x) => typeof x === 'string') : [];
    const baseArgs = {
      kind: picked.provider.kind,
      turn: resending ? {} : { userText: typeof text === 'string' ? text : String(text ?? ''), images: turnImages },
      bodyFields: bodyFieldsFor(picked.provider),
    };
    if (!isBlank(settings.systemPrompt)) baseArgs.systemPrompt = settings.systemPrompt;
    if (mode.kind === 'branch') baseArgs.upTo = mode.index;
    if (resending) baseArgs.retry = mode.kind === 'retry' ? mode.index : mode.userIndex;

    return lock.run(async () => {
      const built = await buildRequest(baseArgs, { deferCheck: true });
      const appending = placeUserEntry(mode, built);
      // The provider is called while the host appends the user entry (a delta's hash is checked
      // first); nothing reaches the panel or the store until that append has landed: `ready`.
      let settle;
      const ready = new Promise((resolve) => {
        settle = resolve;
      });
      const stream = {
        streamId: newId(),
        text: '',
        startedAt: now(),
        originSessionId: null,
        bg: false,
        settled: false,
        announced: false,
        ready,
        phase: 'streaming',
        userIndex: null,
        userText: entryText(built.userEntry),
        provider: picked.provider,
        providerLabel: picked.label,
        providerKey: picked.key,
        baseArgs,
        payload: built.payload,
        bodyCheck: built.check ? built.check() : null,
        markImages: built.hasImages || bodyHasImages(built.userEntry),
        controller: new AbortController(),
        stopReason: null,
        dropped: false,
        rescue: null,
        salvagedIndex: null,
        userEntryId: null,
        // Regenerate: the reply a successful (or stopped) new reply becomes another version of
        replaceAt: mode.kind === 'regenerate' ? { index: mode.index, entryId: mode.replacedEntryId } : null,
      };
      streams.set(stream.streamId, stream);
      activityStart();
      stream.done = track(
        runTurn(stream).finally(() => {
          stream.settled = true;
          streams.delete(stream.streamId);
          activityEnd();
        }),
      );
      let appended;
      try {
        appended = await appending;
      } catch (e) {
        // nothing was stored: the provider call is aborted unseen and the send fails as a whole
        stream.controller.abort();
        settle(false);
        await stream.done.catch(() => {});
        throw e;
      }
      stream.userIndex = appended.index;
      stream.userEntryId = appended.entryId ?? null;
      // replies go to the session the turn was sent in, wherever the live chat is by then
      stream.originSessionId = appended.sessionId || null;
      for (const u of turnImages) imageCache.addDataUrl(u).catch(() => {});
      announce(stream);
      settle(true);
      return {
        streamId: stream.streamId,
        userIndex: appended.index,
        length: appended.length,
        droppedImages: built.res.droppedImages ?? 0,
        sessionId: appended.sessionId ?? null,
        ...(appended.kept ? { kept: appended.kept, evicted: appended.evicted ?? [] } : {}),
        ...(appended.fork ? { fork: appended.fork } : {}),
      };
    });
  }

  /** Store (or find) the turn's user entry → {index, length, entryId, sessionId, kept?, evicted?, fork?}. */
  async function placeUserEntry(mode, built) {
    if (mode.kind === 'append') return storage.history.append({ entry: built.userEntry });
    if (mode.kind === 'branch') {
      const r = await storage.history.branch({ index: mode.index, entry: built.userEntry });
      return { ...r, fork: { forkEntryId: r.forkEntryId, chosen: r.chosen, versions: r.versions } };
    }
    // retry / regenerate: the entry is stored already
    const meta = await storage.history.meta();
    return {
      index: built.res.retry?.index ?? mode.userIndex ?? mode.index,
      length: meta.length,
      entryId: built.res.retry?.entryId ?? null,
      sessionId: meta.activeSessionId || null,
    };
  }

  /** chat.start once the user entry is stored, then in one delta whatever streamed before it. */
  function announce(stream) {
    stream.announced = true;
    emit(stream, { type: 'chat.start', streamId: stream.streamId, userIndex: stream.userIndex });
    if (stream.text) {
      emit(stream, { type: 'chat.delta', streamId: stream.streamId, delta: stream.text, length: stream.text.length });
    }
  }

  function abortedError(stream) {
    return Object.assign(new Error(stream.stopReason === 'stop' ? 'Stopped' : 'Aborted'), {
      kind: 'aborted',
      partial: '',
    });
  }

  /** The stream ended before the provider's terminal event: salvaged like a broken connection. */
  function truncatedError() {
    return Object.assign(new Error('The reply stream ended before the provider finished it.'), {
      kind: 'network',
      code: 'truncated',
      partial: '',
    });
  }

  /** One provider call with `payload` ({body} or {bodyText}, buildRequest). */
  async function callLlm(stream, payload) {
    if (stream.controller.signal.aborted) throw abortedError(stream);
    let passText = '';
    const res = await llm.streamReply({
      provider: stream.provider,
      ...payload,
      signal: stream.controller.signal,
      onDelta: (d) => {
        const delta = typeof d === 'string' ? d : (d?.delta ?? d?.text ?? '');
        if (!delta) return;
        passText += delta;
        stream.text += delta;
        if (!stream.announced) return; // announce() sends it
        emit(stream, { type: 'chat.delta', streamId: stream.streamId, delta, length: stream.text.length });
      },
      onEvent: () => {},
      ...(fetchImpl ? { fetchImpl } : {}),
    });
    // the reply's own text wins over what the deltas accumulated
    const text = typeof res?.text === 'string' ? res.text : passText;
    if (text !== passText) stream.text = stream.text.slice(0, stream.text.length - passText.length) + text;
    return { ...res, text };
  }

  /** upTo/source for a rebuild after this turn's user entry was appended (§8.1 step 1). */
  async function locateTurn(stream) {
    if (stream.bg && stream.originSessionId) {
      try {
        const s = await storage.sessions.get({ id: stream.originSessionId, images: 'ref' });
        const i = findUserEntryIndex(s.entries, stream.userText, -1);
        return { upTo: i >= 0 ? i : s.entries.length, source: { sessionId: stream.originSessionId } };
      } catch {
        /* the session is gone: build from the live history */
      }
    }
    const h = await storage.history.get({ images: 'ref' });
    const i = findUserEntryIndex(h.entries, stream.userText, stream.userIndex);
    return { upTo: i >= 0 ? i : stream.userIndex };
  }

  async function rebuild(stream, extra) {
    const where = await locateTurn(stream);
    const built = await buildRequest({ ...stream.baseArgs, ...where, ...extra });
    if (built.hasImages) stream.markImages = true;
    return built;
  }

  /** callLlm → `{first}` or `{error}` (never rejects). */
  function attempt(stream, payload) {
    return callLlm(stream, payload).then(
      (first) => ({ first }),
      (error) => ({ error }),
    );
  }

  async function runTurn(stream) {
    // the first call goes out while the user entry is appended; a delta that does not verify is
    // rebuilt once that entry is stored (after it, as a rescue is)
    const early = stream.bodyCheck
      ? stream.bodyCheck.then((ok) => (ok ? attempt(stream, stream.payload) : { stale: true }))
      : attempt(stream, stream.payload);
    if (!(await stream.ready)) {
      await early; // aborted by startTurn: the send failed, nothing to report or store
      return;
    }
    let first;
    let originalError = null;
    try {
      let got = await early;
      if (got.stale) {
        stream.payload = (await rebuild(stream, {})).payload;
        got = await attempt(stream, stream.payload);
      }
      // at most one overflow rescue (§7.3)
      while (!got.first) {
        const e = got.error;
        if (stream.dropped) throw e;
        if (originalError) throw e;
        if (!mayRescue(e, { kind: stream.provider.kind, rescued: !!stream.rescue, text: stream.text })) throw e;
        let overflow = false;
        try {
          overflow = (await storage.request.isContextOverflow({ message: e.message })) === true;
        } catch {
          overflow = false;
        }
        if (!overflow) throw e;
        originalError = e;
        stream.phase = 'rescue';
        emit(stream, { type: 'chat.progress', streamId: stream.streamId, stage: 'rescue', done: 0, total: 1 });
        let built;
        try {
          built = await rebuild(stream, { rescue: { errorMessage: e.message } });
        } catch {
          throw e;
        }
        if (!built.res.rescue?.applied) throw e;
        stream.rescue = {
          errorMessage: e.message,
          attachIds: (built.res.rescue.changed ?? []).map((c) => c?.attachId).filter((id) => typeof id === 'string' && id),
        };
        stream.payload = built.payload;
        stream.phase = 'streaming';
        got = await attempt(stream, stream.payload);
      }
      first = got.first;
    } catch (e) {
      // a failed rescue retry shows the original error unless the retry was aborted
      const shown = originalError && (e?.kind === 'http' || e?.kind === 'protocol') ? originalError : e;
      return finishError(stream, shown);
    }

    if (first.truncated) return finishError(stream, truncatedError());
    let text = first.text;
    let finishReason = first.finishReason ?? 'other';
    // continuation second pass (§8.7), at most once
    if (finishReason === 'length' && !stream.controller.signal.aborted) {
      try {
        stream.phase = 'continuation';
        emit(stream, { type: 'chat.progress', streamId: stream.streamId, stage: 'continuation', done: 0, total: 1 });
        const built = await rebuild(stream, {
          pass: { kind: 'continuation', previousReply: first.text, instruction: CONTINUATION_INSTRUCTION },
          ...(stream.rescue ? { rescue: { errorMessage: stream.rescue.errorMessage } } : {}),
        });
        const second = await callLlm(stream, built.payload);
        if (second.truncated) return finishError(stream, truncatedError());
        text = first.text + second.text;
        finishReason = second.finishReason ?? 'other';
      } catch (e) {
        if (stream.dropped || ['aborted', 'idle', 'network'].includes(e?.kind)) return finishError(stream, e);
        // the continuation failed outright: keep the complete first part (plus anything streamed)
        text = stream.text || first.text;
      }
    }
    if (stream.dropped) return finishError(stream, abortedError(stream));
    return finishSuccess(stream, text, finishReason);
  }



  /**
   * Append through the stream's routing: live history, or sessions.appendTo for a hand-off. With
   * `copyVideoSrc` the host copies the newest `videoSrc` of where the entry lands (§9 "Turns").
   */
  async function route(stream, entry, { markImagesSeen = false, copyVideoSrc = false } = {}) {
    if (stream.replaceAt) {
      const placed = await placeNewVersion(stream, entry, { markImagesSeen });
      if (placed) return placed;
    }
    // the session the turn was sent in (docs/keeps.md): live when it still is the live chat,
    // else that session, or its trash item when it was deleted meanwhile
    const origin = stream.originSessionId;
    const handoff = !!origin;
    const append = (e, copy) => {
      const flags = { ...(copy ? { copyVideoSrc: true } : {}), ...(markImagesSeen ? { markImagesSeen: true } : {}) };
      if (handoff) return storage.sessions.appendTo({ id: origin, entry: e, ...flags });
      return storage.history.append({ entry: e, ...flags });
    };
    const r = await append(entry, copyVideoSrc);
    if (handoff) {
      return { index: r.index, length: r.length, target: r.target, sessionId: r.target === 'live' ? undefined : r.sessionId };
    }
    return { index: r.index, length: r.length, target: 'live' };
  }

  /**
   * Regenerate's reply: the reply it replaces becomes another version and this one continues the
   * chat (history.branch), when that reply is still where it was in the live chat; else null (the
   * caller appends it to the turn's session: nothing is lost).
   */
  async function placeNewVersion(stream, entry, { markImagesSeen }) {
    const { index, entryId } = stream.replaceAt;
    try {
      const h = await storage.history.get({ from: index, limit: 1, images: 'ref' });
      const still = h.entries?.[0]?.entryId === entryId && h.activeSessionId === stream.originSessionId;
      if (!still) return null;
      const r = await storage.history.branch({ index, entry, ...(markImagesSeen ? { markImagesSeen: true } : {}) });
      return { index: r.index, length: r.length, target: 'live', fork: { forkEntryId: r.forkEntryId, chosen: r.chosen, versions: r.versions } };
    } catch (e) {
      if (e?.code === 'bad_request' || e?.code === 'not_found') return null;
      throw e;
    }
  }

  async function finishSuccess(stream, text, finishReason) {
    stream.phase = 'saving';
    const content = stripChoiceBlocks(text).trim();
    if (content === '') {
      emit(stream, {
        type: 'chat.error',
        streamId: stream.streamId,
        error: { code: 'empty_reply', message: 'The model returned an empty reply.', kind: 'protocol' },
        salvagedIndex: null,
      });
      return;
    }
    await lock.run(async () => {
      const entry = { role: 'assistant', content, providerLabel: stream.providerLabel, providerKey: stream.providerKey };
      let placed;
      try {
        placed = await route(stream, entry, { markImagesSeen: stream.markImages, copyVideoSrc: true });
      } catch (e) {
        emit(stream, {
          type: 'chat.error',
          streamId: stream.streamId,
          error: errorInfo(e),
          salvagedIndex: null,
          text: content,
        });
        return;
      }
      if (stream.rescue?.attachIds.length) {
        try {
          await storage.request.commitRescue({
            attachIds: stream.rescue.attachIds,
            ...(placed.sessionId ? { sessionId: placed.sessionId } : {}),
          });
        } catch {
          /* the reply is stored; the stub is re-sent next time */
        }
      }
      stream.phase = 'done';
      emit(stream, {
        type: 'chat.done',
        streamId: stream.streamId,
        index: placed.index,
        length: placed.length,
        finishReason,
        target: placed.target,
        ...(placed.fork ? { fork: placed.fork } : {}),
      });
    });
  }

  async function finishError(stream, e) {
    stream.phase = 'error';
    if (stream.dropped) {
      emit(stream, {
        type: 'chat.error',
        streamId: stream.streamId,
        error: { code: 'dropped', message: 'The conversation was switched; the reply was discarded.', kind: 'aborted' },
        salvagedIndex: null,
      });
      return;
    }
    const partial = !isBlank(stream.text) ? stream.text : typeof e?.partial === 'string' ? e.partial : '';
    const stopped = stream.stopReason === 'stop';
    const info = errorInfo(e, { stopped });
    // a failed regenerate stores nothing (the reply it would replace stays); a stopped one keeps
    // what it wrote as a version
    if (isBlank(partial) || (stream.replaceAt && !stopped)) {
      const failed = stopped || stream.replaceAt ? null : await markFailed(stream, info);
      emit(stream, { type: 'chat.error', streamId: stream.streamId, error: info, salvagedIndex: null, ...(failed ? { failed } : {}) });
      return;
    }
    // abort salvage (§9): stop, idle timeout, network — any error that left streamed text
    await lock.run(async () => {
      const entry = {
        role: 'assistant',
        content: partial.trim(),
        interrupted: true,
        providerLabel: stream.providerLabel,
        providerKey: stream.providerKey,
      };
      try {
        const placed = await route(stream, entry);
        stream.salvagedIndex = placed.index;
        emit(stream, {
          type: 'chat.error',
          streamId: stream.streamId,
          error: info,
          salvagedIndex: placed.index,
          target: placed.target,
        });
      } catch (w) {
        emit(stream, {
          type: 'chat.error',
          streamId: stream.streamId,
          error: { ...info, storage: errorInfo(w) },
          salvagedIndex: null,
          text: entry.content,
        });
      }
    });
  }

  /**
   * A request that failed with nothing streamed leaves its user message marked failed (stored:
   * the panel shows the mark and Retry), when that message is still in the live chat.
   */
  async function markFailed(stream, info) {
    if (!stream.userEntryId) return null;
    try {
      const r = await storage.history.markFailed({
        entryId: stream.userEntryId,
        code: String(info?.code || info?.kind || 'error').slice(0, 200),
        message: String(info?.message || 'The request failed.').slice(0, 2000),
      });
      return { index: r.index, code: info?.code ?? null, message: info?.message ?? '' };
    } catch {
      return null; // no longer live (the chat was switched or deleted): nothing to mark here
    }
  }

  // ----- stop / drop / hand-off

  function drop(stream) {
    stream.dropped = true;
    stream.controller.abort();
  }

  async function stop({ streamId } = {}) {
    const s = streamId ? streams.get(streamId) : foreground();
    if (!s || s.settled) return { stopped: false };
    s.stopReason = 'stop';
    s.controller.abort();
    await s.done;
    return { stopped: true, salvagedIndex: s.salvagedIndex };
  }

  /** §9 "Load S"/"New session": hand the foreground stream off to the saved id, or drop it. */
  function handOff(saved) {
    const fg = foreground();
    if (!fg) return { handedOff: null, dropped: null };
    if (saved && typeof saved.id === 'string' && saved.id !== '') {
      fg.bg = true;
      fg.originSessionId = saved.id;
      return { handedOff: fg.streamId, dropped: null };
    }
    drop(fg);
    return { handedOff: null, dropped: fg.streamId };
  }

  async function loadSession({ id } = {}) {
    if (typeof id !== 'string' || id === '') throw codeError('bad_request', 'chat.loadSession needs a session id');
    return lock.run(async () => {
      const res = await storage.sessions.load({ id, saveCurrent: true }); // not_found: nothing changed
      const moved = handOff(res.saved);
      // resume S's own in-flight stream (also the one just handed off when S was the bound session)
      let resumed = null;
      for (const s of streams.values()) {
        if (s.bg && !s.settled && s.originSessionId === id && !resumed) {
          s.bg = false; // re-attached: its events reach the panel again
          resumed = s;
        }
      }
      return { length: res.length, saved: res.saved ?? null, ...moved, stream: resumed ? publicStream(resumed) : null };
    });
  }

  async function newSession() {
    return lock.run(async () => {
      const res = await storage.history.clear({ saveCurrent: true });
      const moved = handOff(res.saved);
      return { saved: res.saved ?? null, ...moved };
    });
  }

  function state() {
    const fg = foreground();
    const background = [];
    for (const s of streams.values()) if (s.bg && !s.settled) background.push(publicStream(s));
    // a stream whose user entry is not stored yet has not started for the panel (no chat.start)
    return { stream: fg?.announced ? publicStream(fg) : null, background };
  }

  // ----- resend

  /** Edit & resend: the turn from `fromIndex` on is kept as another version (history.branch). */
  async function resend({ fromIndex, text, images } = {}) {
    if (!Number.isInteger(fromIndex) || fromIndex < 0) throw codeError('bad_request', 'chat.resend needs fromIndex');
    return withSendSlot(() => startTurn({ text, images }, { kind: 'branch', index: fromIndex }));
  }

  /** Regenerate the assistant reply at `index`: its user message is sent again (nothing appended). */
  async function regenerate({ index } = {}) {
    if (!Number.isInteger(index) || index < 0) throw codeError('bad_request', 'chat.regenerate needs the index of a reply');
    return withSendSlot(async () => {
      const h = await storage.history.get({ images: 'ref' });
      const reply = h.entries?.[index];
      if (!reply || reply.role !== 'assistant') throw codeError('bad_request', 'There is no reply at that place to regenerate.');
      let userIndex = index - 1;
      while (userIndex >= 0 && h.entries[userIndex]?.role !== 'user') userIndex--;
      if (userIndex < 0) throw codeError('bad_request', 'No message of yours precedes this reply.');
      return startTurn({}, { kind: 'regenerate', index, userIndex, replacedEntryId: reply.entryId ?? null });
    });
  }

  /** Retry a failed message: the stored user entry at `index` is sent again (no second copy). */
  async function retry({ index } = {}) {
    if (!Number.isInteger(index) || index < 0) throw codeError('bad_request', 'chat.retry needs the index of your message');
    return withSendSlot(() => startTurn({}, { kind: 'retry', index }));
  }

  // ----- page attach + auto-summary

  async function attachPage({ tabId } = {}) {
    if (!Number.isInteger(tabId)) throw codeError('bad_request', 'chat.attachPage needs a tabId');
    let page;
    try {
      const [inj] = await chrome.scripting.executeScript({ target: { tabId }, func: extractReadablePage });
      page = inj?.result;
    } catch (e) {
      throw codeError('attach_failed', `Could not read this page: ${e?.message ?? e}`);
    }
    if (!page) throw codeError('attach_failed', 'Could not read this page.');
    let tab = null;
    try {
      tab = await chrome.tabs.get(tabId);
    } catch {
      /* the injected result carries the URL */
    }
    let args = attachArgsFor(page, { tabId, tabUrl: tab?.url, tabTitle: tab?.title });
    try {
      const ch = await storage.attach.trackChange({ mode: args.ctx.mode, url: args.ctx.url, text: args.ctx.body });
      if (ch?.changed) {
        args = attachArgsFor(page, {
          tabId,
          tabUrl: tab?.url,
          tabTitle: tab?.title,
          changedSince: formatChangedSince(ch.previousAttachedAt),
        });
      }
    } catch {
      /* the change note is optional */
    }
    const res = await storage.history.attach(args);
    const out = {
      attachId: res.attachId,
      index: res.index,
      length: res.length,
      title: args.ctx.title,
      url: args.ctx.url,
      chars: args.ctx.body.length,
      summarized: false,
    };
    if (res.summary?.needed) {
      try {
        const settings = await readSettings();
        if (settings.autoSummarizeAttachments !== false) {
          const picked = pickProvider(settings);
          out.summarized = await summarize(res.attachId, picked.provider);
        }
      } catch (e) {
        out.summaryError = errorInfo(e);
      }
    }
    return out;
  }

  async function summarize(attachId, provider) {
    activityStart();
    const work = (async () => {
      const plan = await storage.attach.summaryPlan({ attachId });
      const chunks = Array.isArray(plan?.chunks) ? plan.chunks : [];
      if (!plan?.needed || chunks.length === 0) return false;
      const prompts = summaryPrompts(plan.family);
      const total = chunks.length > 1 ? chunks.length + 1 : 1;
      let done = 0;
      const controller = new AbortController();
      progress({ stage: 'summary', attachId, done, total });
      const one = async (system, user) => {
        const r = await llm.streamReply({
          provider,
          body: simpleBody(provider, system, user),
          signal: controller.signal,
          onDelta: () => {},
          onEvent: () => {},
          ...(fetchImpl ? { fetchImpl } : {}),
        });
        if (isBlank(r?.text)) throw codeError('empty_summary', 'The model returned an empty summary.');
        done++;
        progress({ stage: 'summary', attachId, done, total });
        return r.text.trim();
      };
      const messages = summaryChunkMessages(chunks);
      let summary;
      try {
        if (messages.length === 1) summary = await one(prompts.chunk, messages[0]);
        else {
          const parts = await mapLimit(messages, summaryConcurrency, (m) => one(prompts.chunk, m));
          summary = await one(prompts.merge, summaryMergeMessage(parts));
        }
      } catch (e) {
        controller.abort();
        progress({ stage: 'summary', attachId, done, total, note: 'failed' });
        throw e;
      }
      const applied = await storage.attach.applySummary({ attachId, summary });
      return applied?.applied === true;
    })();
    try {
      return await track(work);
    } finally {
      activityEnd();
    }
  }

  // ----- tab helpers (screenshots are captured and attached by the side panel: sidepanel/pixels.js)

  async function seek({ tabId, seconds } = {}) {
    if (!Number.isInteger(tabId)) throw codeError('bad_request', 'chat.seek needs a tabId');
    const secs = Number(seconds);
    if (!Number.isFinite(secs) || secs < 0) throw codeError('bad_request', 'chat.seek needs seconds ≥ 0');
    const [inj] = await chrome.scripting.executeScript({ target: { tabId }, func: seekScript, args: [secs] });
    return { ok: inj?.result === true };
  }

  return {
    send: (msg) => withSendSlot(() => startTurn(msg)),
    /** sw.js: a page's host call relayed by this worker (SettingsMemory.relayed). */
    relayed: (op, done) => settingsMemory.relayed(op, done),
    stop,
    state,
    resend,
    regenerate,
    retry,
    attachPage,
    loadSession,
    newSession,
    seek,
    /** Resolves when every running turn and summary has settled (tests). */
    async idle() {
      while (pending.size) await Promise.allSettled([...pending]);
    },
    _streams: streams,
  };
}

/** Run `fn` over `items` with at most `limit` calls in flight; results in order; first failure rejects. */
export async function mapLimit(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  let failed = null;
  const worker = async () => {
    while (failed === null && next < items.length) {
      const i = next++;
      try {
        out[i] = await fn(items[i], i);
      } catch (e) {
        failed ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (failed !== null) throw failed;
  return out;
}

/** Wire the worker chat handlers (README table) into sw.js's handler map. */
export function installTurnHandlers(register, ctx, deps = {}) {
  const turns = createTurns({ storage: ctx.storage, broadcast: ctx.broadcast, events: ctx.port, ...deps });
  register('chat.send', (msg) => turns.send(msg));
  register('chat.stop', (msg) => turns.stop(msg));
  register('chat.state', () => turns.state());
  register('chat.resend', (msg) => turns.resend(msg));
  register('chat.regenerate', (msg) => turns.regenerate(msg));
  register('chat.retry', (msg) => turns.retry(msg));
  register('chat.attachPage', (msg) => turns.attachPage(msg));
  register('chat.loadSession', (msg) => turns.loadSession(msg));
  register('chat.newSession', () => turns.newSession());
  register('chat.seek', (msg) => turns.seek(msg));
  return turns;
}

// The rules over stored history entries (storage-model §2) that the worker and the pages both
// apply, once, as keepsake-host applies them (src/domain/entry.rs, src/store/history.rs). No DOM,
// no chrome.*: the service worker, the side panel and lib/ modules import them from here.

/** The page-context prefixes (§2.3): an attach entry's text starts with one of them. */
const PAGE_CONTEXT_PREFIX = '[Page context attached by Keepsake]'; // i18n-ok: stored marker (storage-model §2.3), matched, not shown
const LEGACY_PREFIX = '[Page context attached by browsa]'; // i18n-ok: stored marker of old data, matched, not shown

/** Prefix of an image reference URL (storage-model §1). */
export const IMAGE_REF_PREFIX = 'keepsake-image:sha256:';

const IMAGE_REF_RE = /^keepsake-image:sha256:[0-9a-f]{64}$/;

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A text or input_text part with a string `text` (§11.3: the parts entryText counts). */
export const isTextPart = (p) => isObject(p) && (p.type === 'text' || p.type === 'input_text') && typeof p.text === 'string';

/**
 * entryText (§2.1, §11.3): string content as is; array content → the text of every text part
 * (`text`/`input_text` with a string `text`) joined with `\n`; anything else → ''.
 * @param {unknown} entry
 * @returns {string}
 */
export function entryText(entry) {
  if (!isObject(entry)) return '';
  const c = entry.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return c.filter(isTextPart).map((p) => p.text).join('\n');
}

/** True when `text` starts with either page-context prefix. */
function startsWithPrefix(text) {
  return typeof text === 'string' && (text.startsWith(PAGE_CONTEXT_PREFIX) || text.startsWith(LEGACY_PREFIX));
}

/**
 * §2.3: a user entry whose attach text starts with a page-context prefix. The attach text is the
 * string content, or the text of the first text part that has a string `text` (the host's
 * `attach_probe_text`: a text part without one is skipped, not taken as '').
 * @param {unknown} entry
 * @returns {boolean}
 */
export function isAttachEntry(entry) {
  if (!isObject(entry) || entry.role !== 'user') return false;
  const c = entry.content;
  if (typeof c === 'string') return startsWithPrefix(c);
  if (!Array.isArray(c)) return false;
  const first = c.find(isTextPart);
  return first !== undefined && startsWithPrefix(first.text);
}

/**
 * The header fields of an attach entry (storage-model §2.4, written by the host): `URL:`, `Title:`
 * and the first part of `Mode:` (`full | markdown (fallback to full)` → `full`). Missing → ''.
 * @param {unknown} entry
 * @returns {{url: string, title: string, mode: string, lines: string[]}}
 */
export function attachHeader(entry) {
  const lines = entryText(entry).split('\n');
  const after = (label) => {
    const line = lines.find((l) => l.startsWith(label));
    return line === undefined ? '' : line.slice(label.length);
  };
  return {
    url: after('URL: ').trim(), // i18n-ok: the attach header's field names, written by the host
    title: after('Title: ').trim(), // i18n-ok: the attach header's field names
    mode: after('Mode: ').split(' | ')[0].replace(/ \(fallback to full\)$/, '').trim(), // i18n-ok: header field
    lines,
  };
}

/**
 * The `videoSrc` of the newest entry carrying one (an object; storage-model §9 "Turns": what the
 * next reply is stamped with), or null.
 * @param {unknown} entries
 * @returns {object | null}
 */
export function newestVideoSrc(entries) {
  if (!Array.isArray(entries)) return null;
  for (let i = entries.length - 1; i >= 0; i--) {
    const v = entries[i]?.videoSrc;
    if (isObject(v)) return v;
  }
  return null;
}

/**
 * True for an image reference `keepsake-image:sha256:<64 lower-case hex>` (the whole string).
 * @param {unknown} s
 * @returns {boolean}
 */
export function isImageRef(s) {
  return typeof s === 'string' && IMAGE_REF_RE.test(s);
}

/**
 * Credentials never reach stored text (storage-model §2.4): `user:password@` is dropped from a
 * URL with a scheme and `//`. Not a string → ''.
 * @param {unknown} url
 * @returns {string}
 */
export function redactUrl(url) {
  if (typeof url !== 'string') return '';
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i, '$1');
}

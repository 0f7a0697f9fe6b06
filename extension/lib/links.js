// The one rule for every link the extension draws (issue 30): attach chips, picture links,
// Markdown links in replies, downloads. A link's address comes from a page, a model reply or an
// imported file, so it is data: only `http:` and `https:` (with a host) and `mailto:` become an
// `href`, as the WHATWG URL parser serialises them (exactly what the browser would follow); every
// other scheme (`javascript:`, `data:`, `vbscript:`, `file:`, `chrome:`, `chrome-extension:`,
// `about:`, …), a relative address, a control character anywhere or an address over `MAX_URL`
// is refused, and the caller shows the text instead of a link. The one exception is a download
// link (`{download: true}`, an `<a download>`) to a `blob:` object URL this page made itself
// (`ownObjectUrl`); a `blob:` URL from anywhere else, or outside a download, is refused like any
// other scheme.
//
// `setLink(el, url)` is the only code in the extension that sets an `href` (a convention test,
// tests/it/conventions.rs, fails on `setAttribute('href', …)` or `.href =` anywhere else):
// `lib/ui/dom.js` `h()` sends every `href` prop through it and `lib/markdown.js` builds its links
// with it, so no page can put an unchecked address in a link. Tests: links.test.js, the chip test in
// sidepanel/messages.test.js, tests/e2e/links.e2e.mjs (the real panel in Chromium).

/** Schemes a link may have. */
export const LINK_PROTOCOLS = Object.freeze(['http:', 'https:', 'mailto:']);

/** The longest address made a link (longer: shown as text). */
export const MAX_URL = 8192;

/** Object URLs this page made for its own downloads, until revoked. */
const own = new Set();

/**
 * The `href` to use for `value`, or `null` when it must not be a link. Surrounding spaces are
 * ignored; a C0 or C1 control character anywhere (tab and newline included, which the URL parser
 * would silently drop: `java\tscript:`) refuses it; no base URL, so relative addresses are refused.
 * @param {unknown} value
 * @param {{download?: boolean}} [opts] `download`: the link saves a file; then an object URL made
 *   by `ownObjectUrl` (and not yet revoked) is admitted too
 * @returns {string | null}
 */
export function safeHref(value, { download = false } = {}) {
  if (typeof value !== 'string') return null;
  const s = value.trim();
  if (!s || s.length > MAX_URL) return null;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(s)) return null;
  if (download && own.has(s)) return s;
  let u;
  try {
    u = new URL(s);
  } catch {
    return null;
  }
  if (!LINK_PROTOCOLS.includes(u.protocol)) return null;
  if (u.protocol !== 'mailto:' && !u.hostname) return null;
  return u.href;
}

/**
 * Give `el` the link `url` when `safeHref` admits it; otherwise `el` gets no `href` (an `<a>`
 * without one is not a link: nothing to follow). Returns whether it became a link.
 * @param {Element} el
 * @param {unknown} url
 * @param {{download?: boolean}} [opts] as `safeHref`
 * @returns {boolean}
 */
export function setLink(el, url, opts) {
  const href = safeHref(url, opts);
  if (href === null) {
    el.removeAttribute('href');
    return false;
  }
  el.setAttribute('href', href);
  return true;
}

/**
 * An object URL for a Blob this page made (a download), which `safeHref` then admits.
 * @param {Blob} blob
 * @returns {string}
 */
export function ownObjectUrl(blob) {
  const url = URL.createObjectURL(blob);
  own.add(url);
  return url;
}

/** Revoke an object URL made by `ownObjectUrl`; `safeHref` refuses it from then on. */
export function revokeOwnObjectUrl(url) {
  own.delete(url);
  URL.revokeObjectURL(url);
}

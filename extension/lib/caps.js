// Per-turn image caps (storage-model §6.4): the side panel's attach-time gate. The host owns the
// numbers: `host.hello` reports them as `limits.turnMaxImages` and `limits.turnImageBudget`
// (keepsake-host src/domain/images.rs), and `turnCaps(limits)` reads them. The host applies the same
// rule again in request.build (and appends the dropped-image note there), so what the panel keeps is
// what the host keeps; until the host has answered, the gate checks shapes only and the host decides.
//
//   Shape gate: a string that after trimming starts with http://, https:// or data:image/ (ASCII
//   case-insensitive), or is an image reference `keepsake-image:sha256:<64 lower-case hex>`.
//   First fit, in order: drop non-strings and bad shapes (`shape`); drop everything once `maxImages` are
//   kept (`count`); drop one whose URL chars alone exceed the budget (`size`); drop one that would push the
//   running total over the budget (`budget`; later, smaller ones may still fit). Kept images are the original
//   strings (untrimmed).
//
// URL chars: a string's UTF-16 length; for an image reference, the length of the blob's canonical data URL
// (`urlCharsFor(mime, byteLength)`), which only the caller knows — pass `urlChars` when refs are possible.
// Trim: Unicode White_Space plus U+FEFF, as the host's `js_trim` (JavaScript's trim plus U+0085).

import { isImageRef } from './entries.js';

const SHAPE_RE = /^(?:https?:\/\/|data:image\/)/i; // no `u` flag: /i folds ASCII only here

/** Unicode White_Space ∪ {U+FEFF} (the host's js_trim set). */
function isTrimSpace(code) {
  return (
    (code >= 0x09 && code <= 0x0d) ||
    code === 0x20 ||
    code === 0x85 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
  );
}

/**
 * Trim as the host does (linear; no regex backtracking on long whitespace runs).
 * @param {string} s
 * @returns {string}
 */
export function hostTrim(s) {
  let a = 0;
  let b = s.length;
  while (a < b && isTrimSpace(s.charCodeAt(a))) a++;
  while (b > a && isTrimSpace(s.charCodeAt(b - 1))) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

/**
 * The per-turn caps from `host.hello`'s `limits`, or null while they are not known.
 * @param {unknown} limits
 * @returns {{maxImages: number, budget: number} | null}
 */
export function turnCaps(limits) {
  const maxImages = limits?.turnMaxImages;
  const budget = limits?.turnImageBudget;
  return Number.isInteger(maxImages) && maxImages >= 0 && Number.isInteger(budget) && budget >= 0
    ? { maxImages, budget }
    : null;
}

/**
 * The §6.4 shape gate.
 * @param {unknown} url
 * @returns {boolean}
 */
export function imageShapeOk(url) {
  if (typeof url !== 'string') return false;
  const t = hostTrim(url);
  return SHAPE_RE.test(t) || isImageRef(t);
}

/**
 * URL chars of a blob: the length of its canonical data URL `data:<mime>;base64,<padded base64>`
 * = 5 + len(mime) + 8 + 4·ceil(bytes/3) (storage-model §2.6).
 * @param {string} mime
 * @param {number} byteLength
 * @returns {number}
 */
export function urlCharsFor(mime, byteLength) {
  return 5 + String(mime).length + 8 + 4 * Math.ceil(byteLength / 3);
}

const defaultUrlChars = (u) => u.length;

/**
 * A stateful gate for the panel: offer images one by one (as the user attaches them) and get a per-image
 * verdict. Feeding a list through `offer` keeps exactly what `pickTurnImages` keeps.
 * @param {{caps: {maxImages: number, budget: number} | null, urlChars?: (url: string) => number}} opts the caps
 *   (`turnCaps(hello.limits)`; null: shapes only) and the URL chars of an image (default: string length)
 * @returns {{offer: (url: unknown) => {ok: boolean, reason: null|'shape'|'count'|'size'|'budget'},
 *   readonly images: string[], readonly dropped: number, readonly total: number, reset: () => void}}
 */
export function createImageGate({ caps, urlChars = defaultUrlChars }) {
  let images = [];
  let dropped = 0;
  let total = 0;
  return {
    offer(url) {
      let reason = null;
      if (!imageShapeOk(url)) reason = 'shape';
      else if (!caps) images.push(url); // the host has not said its caps yet: it applies them at send
      else if (images.length >= caps.maxImages) reason = 'count';
      else {
        const c = urlChars(url);
        if (!(c <= caps.budget)) reason = 'size'; // NaN / unknown counts as too big, like the host
        else if (total + c > caps.budget) reason = 'budget';
        else {
          total += c;
          images.push(url);
        }
      }
      if (reason) dropped++;
      return { ok: reason === null, reason };
    },
    get images() {
      return images.slice();
    },
    get dropped() {
      return dropped;
    },
    get total() {
      return total;
    },
    reset() {
      images = [];
      dropped = 0;
      total = 0;
    },
  };
}

/**
 * pickTurnImages (storage-model §6.4): first fit in order.
 * @param {unknown} list the turn's images (null/absent → nothing kept, nothing dropped)
 * @param {{caps: {maxImages: number, budget: number} | null, urlChars?: (url: string) => number}} opts the
 *   caps (`turnCaps(hello.limits)`) and the URL chars of an image (default: string length; pass a function
 *   that knows blob sizes when the list may hold image references)
 * @returns {{images: string[], dropped: number, reasons: Array<null|'shape'|'count'|'size'|'budget'>}}
 *   `reasons[i]` is the verdict for `list[i]` (null = kept)
 */
export function pickTurnImages(list, opts) {
  const gate = createImageGate(opts);
  const reasons = [];
  if (Array.isArray(list)) for (const u of list) reasons.push(gate.offer(u).reason);
  return { images: gate.images, dropped: gate.dropped, reasons };
}

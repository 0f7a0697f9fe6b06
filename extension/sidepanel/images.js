// Pictures for bubbles. History is read with images: "ref" (storage-model §11.15), so a render moves
// only references; bytes come once per picture from `images.get` and are kept as Blob URLs. Pictures
// over THUMB_ABOVE base64 chars are shown through `images.thumbnail` (display size), the original is
// fetched again only when the user opens it.

import { isImageRef } from '../lib/entries.js';

/** Base64/data-URL chars above which a picture is displayed through a host thumbnail. */
export const THUMB_ABOVE = 1_500_000;
export const DISPLAY_EDGE = 1024;

/**
 * Standard base64 → bytes: `Uint8Array.fromBase64` where the engine has it (one native pass: 3 ms
 * for a 1.4 MB picture in Chromium 156, against 27 ms for the atob + charCodeAt loop), else that loop.
 */
function base64ToBytes(b64) {
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(b64);
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

function base64ToBlob(b64, mime) {
  return new Blob([base64ToBytes(b64)], { type: mime || 'application/octet-stream' });
}

/** `data:<mime>[;…];base64,<data>` → `{mime, b64}`, else null (exported for lib/redos.test.js). */
export function splitDataUrl(url) {
  const m = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/is.exec(url);
  return m ? { mime: m[1].toLowerCase(), b64: m[2] } : null;
}

/**
 * createImageCache({storage, max}) → {display(url) → Promise<{src, thumb} | {link}>, full(url) → Promise<string>,
 *   original(url) → Promise<{src, revoke}>, dataUrl(url) → Promise<string>}
 * `src` is a blob: URL (or the data: URL itself), `link` an http(s) URL the page's CSP cannot show inline.
 */
export function createImageCache({ storage, max = 200 } = {}) {
  const cache = new Map(); // url → Promise<{src, thumb}>
  const blobUrls = new Map(); // url → blob URL to revoke on eviction

  function remember(key, promise) {
    cache.set(key, promise);
    promise.catch(() => cache.delete(key));
    while (cache.size > max) {
      const oldest = cache.keys().next().value;
      cache.delete(oldest);
      const b = blobUrls.get(oldest);
      if (b) { URL.revokeObjectURL(b); blobUrls.delete(oldest); }
    }
    return promise;
  }

  async function toDisplay(key, mime, b64) {
    if (b64.length > THUMB_ABOVE) {
      try {
        const t = await storage.images.thumbnail({ dataUrl: `data:${mime};base64,${b64}`, maxEdge: DISPLAY_EDGE });
        const parts = splitDataUrl(t.dataUrl || '');
        if (parts) {
          const src = URL.createObjectURL(base64ToBlob(parts.b64, parts.mime));
          blobUrls.set(key, src);
          return { src, thumb: true };
        }
      } catch {
        // image_rejected and friends: show the original, the browser may still decode it
      }
    }
    const src = URL.createObjectURL(base64ToBlob(b64, mime));
    blobUrls.set(key, src);
    return { src, thumb: false };
  }

  function display(url) {
    if (cache.has(url)) {
      const p = cache.get(url);
      cache.delete(url); // refresh recency
      cache.set(url, p);
      return p;
    }
    if (isImageRef(url)) {
      return remember(url, storage.images.get({ ref: url }).then((r) => toDisplay(url, r.mime, r.bytes)));
    }
    const parts = typeof url === 'string' ? splitDataUrl(url) : null;
    if (parts) return remember(url, toDisplay(url, parts.mime, parts.b64));
    if (typeof url === 'string' && /^https?:\/\//i.test(url)) return Promise.resolve({ link: url });
    return Promise.reject(new Error('Unsupported image URL') /* i18n-ok: a programming error, never shown */);
  }

  /** A URL of the full-size picture (for opening it). */
  async function full(url) {
    const d = await display(url);
    if (d.link || !d.thumb) return d.link || d.src;
    if (isImageRef(url)) {
      const r = await storage.images.get({ ref: url });
      return URL.createObjectURL(base64ToBlob(r.bytes, r.mime));
    }
    const parts = splitDataUrl(url);
    return parts ? URL.createObjectURL(base64ToBlob(parts.b64, parts.mime)) : url;
  }

  /**
   * A URL of an original picture (storage-model §12.8: a thumbnail's or a label's `originalUrl`) for
   * the lightbox: a reference is read with `images.get` and shown as it is, never through a display
   * thumbnail. The caller revokes the blob URL (`revoke`) when it is done with it.
   */
  async function original(url) {
    if (isImageRef(url)) {
      const r = await storage.images.get({ ref: url });
      const src = URL.createObjectURL(base64ToBlob(r.bytes, r.mime));
      return { src, revoke: () => URL.revokeObjectURL(src) };
    }
    return { src: await full(url), revoke: () => {} };
  }

  /** Inline data URL of a picture (for edit & resend, which sends data URLs). */
  async function dataUrl(url) {
    if (isImageRef(url)) {
      const r = await storage.images.get({ ref: url });
      return `data:${r.mime};base64,${r.bytes}`;
    }
    return url;
  }

  return { display, full, original, dataUrl };
}

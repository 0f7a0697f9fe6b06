// Pictures for bubbles. History is read with images: "ref" (storage-model §11.15), so a render moves
// only references. A bubble shows a reference's display rendition (storage-model §2.6: at most
// 1280 px wide, made and kept by the host): the references asked for in one task go to the host in
// one batched `images.display` call (at most DISPLAY_BATCH refs each), and the results are kept as
// Blob URLs. The lightbox reads the full-size picture with `images.get`. An inline data URL over
// THUMB_ABOVE base64 chars is shown through `images.thumbnail` (display size).

import { isImageRef } from '../lib/entries.js';

/** Base64/data-URL chars above which a picture is displayed through a host thumbnail. */
export const THUMB_ABOVE = 1_500_000;
export const DISPLAY_EDGE = 1024;
/** At most this many references per `images.display` call (the host's own cap is 64). */
export const DISPLAY_BATCH = 16;

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
    return { src: blobOf(key, mime, b64), thumb: false };
  }

  // references waiting for the next batched images.display call: ref → {resolve, reject}
  let pending = new Map();
  let flushScheduled = false;

  function blobOf(key, mime, b64) {
    const src = URL.createObjectURL(base64ToBlob(b64, mime));
    blobUrls.set(key, src);
    return src;
  }

  async function displayOne(ref, waiter) {
    try {
      const r = await storage.images.get({ ref });
      waiter.resolve(await toDisplay(ref, r.mime, r.bytes));
    } catch (err) {
      waiter.reject(err);
    }
  }

  async function sendBatch(batch) {
    let reply;
    try {
      reply = await storage.images.display({ refs: [...batch.keys()] });
    } catch {
      // a host without images.display (or a failed call): each picture the old way
      for (const [ref, waiter] of batch) displayOne(ref, waiter);
      return;
    }
    const items = new Map((reply?.images || []).map((it) => [it.ref, it]));
    for (const [ref, waiter] of batch) {
      const it = items.get(ref);
      if (!it) displayOne(ref, waiter);
      else if (it.error) waiter.reject(Object.assign(new Error(it.error.message), { code: it.error.code }));
      else waiter.resolve({ src: blobOf(ref, it.mime, it.bytes), thumb: true });
    }
  }

  function flush() {
    flushScheduled = false;
    const all = [...pending];
    pending = new Map();
    for (let i = 0; i < all.length; i += DISPLAY_BATCH) sendBatch(new Map(all.slice(i, i + DISPLAY_BATCH)));
  }

  /** A reference's display rendition, through the next batched `images.display` call. */
  function rendition(ref) {
    return new Promise((resolve, reject) => {
      pending.set(ref, { resolve, reject });
      if (!flushScheduled) {
        flushScheduled = true;
        setTimeout(flush, 0);
      }
    });
  }

  function display(url) {
    if (cache.has(url)) {
      const p = cache.get(url);
      cache.delete(url); // refresh recency
      cache.set(url, p);
      return p;
    }
    if (isImageRef(url)) {
      return remember(url, rendition(url));
    }
    const parts = typeof url === 'string' ? splitDataUrl(url) : null;
    if (parts) return remember(url, toDisplay(url, parts.mime, parts.b64));
    if (typeof url === 'string' && /^https?:\/\//i.test(url)) return Promise.resolve({ link: url });
    return Promise.reject(new Error('Unsupported image URL') /* i18n-ok: a programming error, never shown */);
  }

  /** A URL of the full-size picture (for opening it): a reference is read with `images.get`. */
  async function full(url) {
    if (isImageRef(url)) {
      const r = await storage.images.get({ ref: url });
      return URL.createObjectURL(base64ToBlob(r.bytes, r.mime));
    }
    const d = await display(url);
    if (d.link || !d.thumb) return d.link || d.src;
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

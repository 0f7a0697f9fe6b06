// Image bytes the worker still holds, so request.build can leave them as references
// (PROTOCOL.md "imageRefs") instead of sending them back.

import { IMAGE_REF_PREFIX } from '../lib/entries.js';
import { parseDataUrl } from './image-tokens.js';

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

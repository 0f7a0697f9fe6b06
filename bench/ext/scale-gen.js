// The scale sweep's data set (bench/scale.mjs), shared by the driver (node: the JSON export for
// `keepsake-host import`) and the bench service worker (bench/ext/scale.js: the same sessions in
// chrome.storage.local). Pure JavaScript, so both sides build the same sessions from a seed; a
// picture is named by `url(name)`, an image reference on the Keepsake side and a data URL in the
// browser.

import { chatHistory, imageSlots, savedSession } from './gen.js';

export const SCALE_SEED = 41;
/** Text per saved session, in entries of ENTRY_CHARS (mixed English / Chinese). */
export const SESSION_CHARS = 4000;
export const ENTRY_CHARS = 1000;
/** Every PICTURE_EVERY-th session carries one picture of its own (10 %). */
export const PICTURE_EVERY = 10;
/** The 100-entry session with pictures that is loaded and shown. */
export const BIG = Object.freeze({ id: 'scale-big-session', count: 100, chars: 1000, pictures: 10 });
/** The drawer's first page. */
export const PAGE = 50;

/** Picture name of session `index` (or null): `s<index>`. */
export const pictureOf = (index) => (index % PICTURE_EVERY === 0 ? `s${index}` : null);
/** Picture names of the big session: `b0`… */
export const bigPictures = () => Array.from({ length: BIG.pictures }, (_, i) => `b${i}`);

/**
 * Saved session `index` of the sweep: SESSION_CHARS of text; a picture session's first entry
 * carries its picture as `url(name)`.
 * @param {number} index
 * @param {(name: string) => string} url
 */
export function scaleSession(index, url) {
  const s = savedSession({ seed: SCALE_SEED, index, chars: SESSION_CHARS, entryChars: ENTRY_CHARS });
  const name = pictureOf(index);
  if (name) {
    const first = s.entries[0];
    s.entries[0] = { ...first, content: [{ type: 'text', text: first.content }, { type: 'image_url', image_url: { url: url(name) } }] };
  }
  return s;
}

/**
 * The 100-entry session with BIG.pictures pictures (user entries of the newer part), the newest
 * session of the set.
 * @param {number} count sessions in the set (it is created after them)
 * @param {(name: string) => string} url
 */
export function bigSession(count, url) {
  const names = bigPictures();
  const slots = imageSlots(BIG.count, names.length);
  const entries = chatHistory({ seed: SCALE_SEED + 1, count: BIG.count, chars: BIG.chars, images: new Map(slots.map((i, k) => [i, [url(names[k])]])) });
  return { id: BIG.id, name: `big 大 session ${count}`, createdAt: 1_764_700_000_000 + (count + 1) * 60_000, pinned: false, entries };
}

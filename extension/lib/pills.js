// Timestamp pills: `[mm:ss]`, `[m:ss]`, `[h:mm:ss]` (and ranges) in reply text become buttons that seek
// the tab's video (storage-model §2.2 `videoSrc`: a reply given while the history held a video attach makes
// its stamps seekable). Pure module: no DOM access except inside `seekScript`, which runs in the page.
//
// Accepted stamps (always inside ASCII square brackets, surrounding whitespace inside the brackets allowed):
//   [m:ss] [mm:ss] [mmm:ss]   minutes 0–999 (a 75-minute video writes [75:30]), seconds 00–59, two digits
//   [h:mm:ss] [hh:mm:ss]      hours 0–99, minutes 00–59, seconds 00–59 (two digits each)
//   ranges [a–b]              two stamps of the forms above joined by `-`, `–` (U+2013), `—` (U+2014) or `~`,
//                             optionally spaced: `[01:02–01:30]`, `[1:02 - 1:30]`. A range whose end is before its
//                             start is not a pill. A range pill seeks to its start; `end` is reported too.
// Not pills: anything else in brackets (`[1:2]`, `[00:60]`, `[1:60:00]`, `[12]`), stamps without brackets, and a
// bracket immediately followed by `(` (that is a Markdown link; markdown.js never hands link text to splitPills).

const RANGE_SEPARATORS = new Set(['-', '\u2013', '\u2014', '~']);

/**
 * Parse one stamp (`"1:05"`, `"01:02:03"`, optionally wrapped in `[...]` and surrounded by spaces).
 * Two-part stamps are minutes:seconds (minutes 0–999), three-part stamps hours:minutes:seconds with minutes
 * and seconds below 60. Seconds always have two digits.
 * @param {string} s
 * @returns {number|null} whole seconds, or null when `s` is not a valid stamp
 */
export function parseTimestamp(s) {
  if (typeof s !== 'string') return null;
  let t = s.trim();
  if (t.startsWith('[') && t.endsWith(']')) t = t.slice(1, -1).trim();
  if (t.length === 0 || t.length > 12) return null;
  const parts = t.split(':');
  if (parts.length !== 2 && parts.length !== 3) return null;
  for (const p of parts) if (!/^[0-9]+$/.test(p)) return null;
  if (parts.length === 2) {
    const [m, sec] = parts;
    if (m.length < 1 || m.length > 3 || sec.length !== 2) return null;
    const secs = Number(sec);
    if (secs >= 60) return null;
    return Number(m) * 60 + secs;
  }
  const [h, m, sec] = parts;
  if (h.length < 1 || h.length > 2 || m.length !== 2 || sec.length !== 2) return null;
  const mins = Number(m);
  const secs = Number(sec);
  if (mins >= 60 || secs >= 60) return null;
  return Number(h) * 3600 + mins * 60 + secs;
}

/**
 * Format whole seconds as `m:ss` / `h:mm:ss` (for titles and tests).
 * @param {number} seconds
 * @returns {string}
 */
export function formatTimestamp(seconds) {
  const total = Math.max(0, Math.floor(Number(seconds) || 0));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const ss = String(s).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** Longest bracket content we look at: `99:59:59 – 99:59:59` plus some spaces. */
const MAX_INNER = 40;

/**
 * Parse the inside of a bracket as a stamp or a range.
 * @param {string} inner text between `[` and `]`
 * @returns {{label: string, seconds: number, end?: number}|null}
 */
function parseInner(inner) {
  const t = inner.trim();
  if (!t || t.length > MAX_INNER) return null;
  const single = parseTimestamp(t);
  if (single !== null) return { label: t, seconds: single };
  // Range: find a separator that is not part of a stamp (stamps hold only digits and colons).
  for (let i = 1; i < t.length - 1; i++) {
    if (!RANGE_SEPARATORS.has(t[i])) continue;
    const a = parseTimestamp(t.slice(0, i));
    const b = parseTimestamp(t.slice(i + 1));
    if (a === null || b === null || b < a) return null;
    return { label: t, seconds: a, end: b };
  }
  return null;
}

/**
 * Split text into plain runs and timestamp pills. Concatenating every `text` and every pill's `raw` gives the
 * input back. Linear in the input length.
 * @param {string} text
 * @returns {Array<{type: 'text', text: string} | {type: 'pill', label: string, seconds: number, end?: number, raw: string}>}
 */
export function splitPills(text) {
  const out = [];
  if (typeof text !== 'string' || text.length === 0) return out;
  let last = 0;
  let close = -2; // next `]` after the current `[`, found lazily; each search starts past the previous one
  let i = text.indexOf('[');
  while (i !== -1) {
    if (close !== -1 && close <= i) close = text.indexOf(']', i + 1);
    if (close === -1) break; // no `]` left: no more pills
    let next = i + 1;
    if (close - i - 1 <= MAX_INNER) {
      const inner = text.slice(i + 1, close);
      // A nested `[` means this bracket is not the stamp's own opener; retry from the inner one.
      if (!inner.includes('[') && text[close + 1] !== '(') {
        const p = parseInner(inner);
        if (p) {
          if (i > last) out.push({ type: 'text', text: text.slice(last, i) });
          const pill = { type: 'pill', label: p.label, seconds: p.seconds, raw: text.slice(i, close + 1) };
          if (p.end !== undefined) pill.end = p.end;
          out.push(pill);
          last = close + 1;
          next = close + 1;
        }
      }
    }
    i = text.indexOf('[', next);
  }
  if (last < text.length) out.push({ type: 'text', text: text.slice(last) });
  return out;
}

/**
 * Seek the page's main video. Self-contained (no closures, no imports) so it can be passed as
 * `chrome.scripting.executeScript({target: {tabId}, func: seekScript, args: [seconds]})`; run it with
 * `allFrames: true` to reach players inside iframes (each frame answers for itself).
 *
 * Picks a playing `<video>` (not paused, not ended, has data) if there is one, else the one with the largest
 * visible area; open shadow roots are searched too. Sets `currentTime` (clamped to the duration when known).
 * @param {number} seconds target time in seconds
 * @returns {boolean} true when a video was found and seeked
 */
export function seekScript(seconds) {
  const t = Number(seconds);
  if (!Number.isFinite(t) || t < 0) return false;
  const videos = [];
  const seen = new Set();
  const visit = (root, depth) => {
    if (!root || depth > 8 || seen.has(root)) return;
    seen.add(root);
    let list;
    try {
      list = root.querySelectorAll('video');
    } catch {
      return;
    }
    for (const v of list) videos.push(v);
    let all;
    try {
      all = root.querySelectorAll('*');
    } catch {
      return;
    }
    for (const el of all) if (el.shadowRoot) visit(el.shadowRoot, depth + 1);
  };
  visit(document, 0);
  if (videos.length === 0) return false;
  const area = (v) => {
    try {
      const r = v.getBoundingClientRect();
      return Math.max(0, r.width) * Math.max(0, r.height);
    } catch {
      return 0;
    }
  };
  const playing = videos.filter((v) => !v.paused && !v.ended && v.readyState > 2);
  const pool = playing.length > 0 ? playing : videos;
  let best = pool[0];
  let bestArea = area(best);
  for (const v of pool) {
    const a = area(v);
    if (a > bestArea) {
      best = v;
      bestArea = a;
    }
  }
  try {
    const d = best.duration;
    best.currentTime = Number.isFinite(d) && d > 0 ? Math.min(t, d) : t;
    return true;
  } catch {
    return false;
  }
}

// Choice blocks a reply ends with are not stored (storage-model §9 "Turns").

/**
 * Trailing machine-readable choice blocks (storage-model §9 "Turns") are removed before the reply
 * is stored: a final fenced block whose info string is `choices`/`keepsake-choices` (any fence), or a
 * final `<choices>…</choices>` element. The spec does not define the block format further.
 *
 * Linear time (issue 18): this used to be two regexes applied until nothing changed,
 *   fenced  /\n?[ \t]*(`{3,}|~{3,})[ \t]*(?:keepsake-)?choices\b[^\n]*\n[\s\S]*?\n[ \t]*\1[ \t]*\s*$/i
 *   tagged  /\n?[ \t]*<choices\b[^>]*>[\s\S]*?<\/choices>\s*$/i
 * whose backtracking is cubic (a crafted 8 KB reply held the worker for a minute). The scanner below
 * gives exactly their results on every input (choices.test.js compares the two on random texts):
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

// Export file names (storage-model §5.6). The host returns `filename` with every export; these helpers
// are the fallback and the sanitiser for what goes into <a download>.

/** Slug: ASCII letters/digits and CJK U+4E00–U+9FFF kept, every other run → '-', trimmed, ≤ 40 chars. */
export function slugify(name) {
  const s = String(name ?? '')
    .replace(/[^A-Za-z0-9\u4E00-\u9FFF]+/gu, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/g, '');
  return s || 'session';
}

/** YYYY-MM-DD in local time. */
function localDate(date = new Date()) {
  const d = date instanceof Date ? date : new Date(date);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** keepsake-<slug>-<date>.md|.json, or keepsake-sessions-<date>.json for several sessions. */
export function exportFilename({ name, format, count = 1, date = new Date() }) {
  const ext = format === 'markdown' ? 'md' : 'json';
  if (ext === 'json' && count > 1) return `keepsake-sessions-${localDate(date)}.json`;
  return `keepsake-${slugify(name)}-${localDate(date)}.${ext}`;
}

/** A file name safe for <a download>: no path separators or control characters; falls back when empty. */
export function safeFilename(filename, fallback) {
  const cleaned = trimDotsSpacesDashes(String(filename ?? '').replace(/[\\/:*?"<>|\u0000-\u001f]+/g, '-'));
  return cleaned || fallback;
}

const DOT_SPACE_DASH = /^[.\s-]$/;

/**
 * `s` without leading and trailing dots, whitespace (JS `\s`) and dashes. A scan from each end: the
 * regex `/^[.\s-]+|[.\s-]+$/g` it replaces retried the run from every position, quadratic in a long
 * run that does not reach the end (issue 18).
 */
function trimDotsSpacesDashes(s) {
  let a = 0;
  let b = s.length;
  while (a < b && DOT_SPACE_DASH.test(s[a])) a++;
  while (b > a && DOT_SPACE_DASH.test(s[b - 1])) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

export function mimeForFormat(format) {
  return format === 'markdown' ? 'text/markdown;charset=utf-8' : 'application/json;charset=utf-8';
}

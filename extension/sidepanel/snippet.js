// Search-hit highlighting for the sessions drawer. Pure: returns segments the DOM code turns into
// text nodes and <mark> elements (never HTML strings).

/** Trim and collapse whitespace runs, as the host does for snippets (§5.3). */
export function normalizeQuery(query) {
  return typeof query === 'string' ? query.trim().replace(/\s+/gu, ' ') : '';
}

/**
 * Split `text` into [{text, match}] segments, marking every case-insensitive occurrence of `query`.
 * Adjacent segments never share the same `match` value; an empty query gives one plain segment.
 */
export function highlightSegments(text, query) {
  const src = typeof text === 'string' ? text : '';
  const q = normalizeQuery(query).toLowerCase();
  if (!src) return [];
  if (!q) return [{ text: src, match: false }];
  const out = [];
  let plainFrom = 0;
  let i = 0;
  while (i <= src.length - q.length) {
    if (src.slice(i, i + q.length).toLowerCase() === q) {
      if (i > plainFrom) out.push({ text: src.slice(plainFrom, i), match: false });
      const prev = out[out.length - 1];
      if (prev && prev.match) prev.text += src.slice(i, i + q.length);
      else out.push({ text: src.slice(i, i + q.length), match: true });
      i += q.length;
      plainFrom = i;
    } else {
      i += 1;
    }
  }
  if (plainFrom < src.length) out.push({ text: src.slice(plainFrom), match: false });
  return out;
}

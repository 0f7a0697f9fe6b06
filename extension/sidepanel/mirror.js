// Index mirror (storage-model §9): which rendered bubbles survive a history change, and at which index.
// Pure: works on per-entry keys (any comparable string, e.g. JSON of the entry with image references).

/** A stable key for an entry read with images: "ref" (small: image bytes are references). */
export function entryKey(entry) {
  try {
    return JSON.stringify(entry);
  } catch {
    return String(Math.random());
  }
}

function sameRun(a, aFrom, b, bFrom, n) {
  for (let k = 0; k < n; k++) if (a[aFrom + k] !== b[bFrom + k]) return false;
  return true;
}

/**
 * Plan how to turn the rendered list (oldKeys) into the stored list (newKeys).
 * Returns {reuse, kind, reused}:
 *   reuse[i] = index into oldKeys whose bubble can be kept for new index i, or -1 (render fresh);
 *   kind = 'none' | 'append' | 'shift' | 'splice' | 'reset' (what happened, for logging/tests);
 *   reused = how many bubbles are kept.
 * Handled without re-rendering kept bubbles: appends, truncation, removal or rewrite of a middle run
 * (common prefix + common suffix) and front trims (old[d..] is a prefix of new, §4.1 trim + appends).
 */
export function planReconcile(oldKeys, newKeys) {
  const n = oldKeys.length;
  const m = newKeys.length;
  let p = 0;
  while (p < n && p < m && oldKeys[p] === newKeys[p]) p++;
  if (p === n && p === m) return { reuse: newKeys.map((_, i) => i), kind: 'none', reused: m };
  let s = 0;
  while (s < n - p && s < m - p && oldKeys[n - 1 - s] === newKeys[m - 1 - s]) s++;
  let best = { score: p + s, d: -1 };
  // Front trim (+ appends): the rendered tail old[d..] is now at the head of the stored list.
  if (p < n) {
    for (let d = 1; d < n; d++) {
      const overlap = n - d;
      if (overlap <= best.score) break; // later d only shrink the overlap
      if (overlap > m) continue;
      if (sameRun(oldKeys, d, newKeys, 0, overlap)) {
        best = { score: overlap, d };
        break;
      }
    }
  }
  const reuse = new Array(m).fill(-1);
  if (best.d > 0) {
    for (let i = 0; i < n - best.d; i++) reuse[i] = i + best.d;
    return { reuse, kind: 'shift', reused: n - best.d };
  }
  for (let i = 0; i < p; i++) reuse[i] = i;
  for (let k = 0; k < s; k++) reuse[m - 1 - k] = n - 1 - k;
  const reused = p + s;
  let kind = 'splice';
  if (reused === 0) kind = n === 0 ? 'append' : 'reset';
  else if (p === n && s === 0) kind = 'append';
  return { reuse, kind, reused };
}

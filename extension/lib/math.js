// TeX math in replies: KaTeX (extension/vendor/katex/, pinned in vendor/package.json). KaTeX runs only in
// the rich worker (lib/rich-worker.js calls `loadKatex()` before its first formula), never on the panel's
// thread: a formula under MATH_MAX can still take seconds (a \def whose body holds a few hundred
// \frac, used a few hundred times: 2,000,000 nodes), so the page gives each formula a time budget and
// terminates the worker that overruns it (lib/rich.js). The page imports this module only for
// `ensureStylesheet` (a <link> to KaTeX's own file: CSP `style-src 'self'`; its fonts load from
// extension/vendor/katex/fonts/, `font-src 'self'`), which loads no KaTeX code.
//
// No HTML string: KaTeX's `__renderToDomTree(tex, opts)` builds its own node tree and `.toNode()`
// turns it into nodes with createElement / createElementNS / setAttribute and CSSOM styles — in the
// worker, into lib/plain-tree.js's recording document (the global `document` there), sent to the page as
// a plain tree and built again through markdown.js's MATH_ELEMENTS / MATH_ATTRIBUTES / MATH_STYLES.
// Options: `trust: false` (\href, \url, \includegraphics, \htmlClass, \htmlData, … are refused and render
// as error text, never as links or attributes), `maxSize` and `maxExpand` (huge \rule / \kern sizes are
// capped, macro bombs stop), `strict: 'ignore'`. Errors throw: markdown.js then shows the source as code.
// Formulas longer than MATH_MAX or nested deeper than MATH_DEPTH (lib/rich-limits.js) are refused before
// KaTeX sees them (its parser is recursive).

import { MATH_DEPTH, MATH_MAX } from './rich-limits.js';

export { MATH_DEPTH, MATH_MAX };
const CACHE_MAX = 128;

/** KaTeX, once loadKatex() has resolved. */
let katex = null;

/**
 * Load KaTeX (once). The worker awaits this before its first formula; renderMath throws until then.
 * @returns {Promise<object>} KaTeX's module object
 */
export async function loadKatex() {
  katex ??= (await import('../vendor/katex/katex.mjs')).default;
  return katex;
}

export const KATEX_OPTIONS = Object.freeze({
  throwOnError: true,
  trust: false,
  strict: 'ignore',
  maxSize: 20,
  maxExpand: 500,
  output: 'htmlAndMathml',
});

/** Deepest `{` / `\left` nesting in `tex` (linear scan). */
export function nestingDepth(tex) {
  let depth = 0;
  let max = 0;
  for (let i = 0; i < tex.length; i++) {
    const ch = tex[i];
    if (ch === '\\') {
      if (tex.startsWith('left', i + 1)) depth++;
      else if (tex.startsWith('right', i + 1)) depth--;
      else if (tex.startsWith('begin', i + 1)) depth++;
      else if (tex.startsWith('end', i + 1)) depth--;
      i++; // an escaped brace is not a group
    } else if (ch === '{') depth++;
    else if (ch === '}') depth--;
    if (depth > max) max = depth;
  }
  return max;
}

/** (display + tex) → KaTeX's node tree, or the Error it threw; a Map kept in insertion order as an LRU. */
const cache = new Map();

function treeFor(tex, display) {
  const key = `${display ? 'D' : 'I'}${tex}`;
  let hit = cache.get(key);
  if (hit) {
    cache.delete(key);
  } else {
    try {
      hit = { tree: katex.__renderToDomTree(tex, { ...KATEX_OPTIONS, displayMode: display }) };
    } catch (e) {
      hit = { error: e instanceof Error ? e : new Error(String(e)) };
    }
  }
  cache.set(key, hit);
  if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value);
  return hit;
}

/**
 * Render TeX to DOM nodes (in the global document, which is where KaTeX creates them: the recording
 * document in the worker). Throws when KaTeX is not loaded, the formula is refused or KaTeX cannot parse
 * it (markdown.js shows the source instead).
 * @param {string} tex the formula without its delimiters
 * @param {boolean} display display style (`$$…$$`, `\[…\]`) or inline
 * @returns {Node} `<span class="katex">` (inline) or `<span class="katex-display">`
 */
export function renderMath(tex, display) {
  if (typeof tex !== 'string' || !tex.trim()) throw new Error('empty formula'); // i18n-ok: caught by markdown.js, which shows the source
  if (tex.length > MATH_MAX) throw new Error('formula too long'); // i18n-ok: caught by markdown.js, which shows the source
  if (nestingDepth(tex) > MATH_DEPTH) throw new Error('formula nested too deeply'); // i18n-ok: caught by markdown.js, which shows the source
  if (!katex) throw new Error('KaTeX is not loaded'); // i18n-ok: a programming error (loadKatex first)
  const { tree, error } = treeFor(tex, !!display);
  if (error) throw error;
  return tree.toNode();
}

const STYLESHEET = new URL('../vendor/katex/katex.min.css', import.meta.url).href;

/**
 * Add KaTeX's stylesheet to `doc` once; resolves when it has loaded (or failed: math then still shows,
 * unstyled), so formulas are not drawn before their styles.
 * @param {Document} [doc]
 * @returns {Promise<void>}
 */
export function ensureStylesheet(doc = globalThis.document) {
  if (!doc?.head || typeof doc.createElement !== 'function') return Promise.resolve();
  const have = doc.head.querySelector('link[data-katex-css]');
  if (have) return have.__loaded || Promise.resolve();
  const link = doc.createElement('link');
  link.setAttribute('rel', 'stylesheet');
  link.setAttribute('href', STYLESHEET);
  link.setAttribute('data-katex-css', '');
  link.__loaded = new Promise((resolve) => {
    link.addEventListener('load', () => resolve(), { once: true });
    link.addEventListener('error', () => resolve(), { once: true });
  });
  doc.head.appendChild(link);
  return link.__loaded;
}

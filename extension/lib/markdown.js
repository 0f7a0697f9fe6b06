// Markdown → DOM nodes for model output. Everything is built with createElement / createTextNode /
// setAttribute: model text never reaches an HTML parser (none of the HTML-string sinks is used anywhere in
// this module), so raw HTML in a reply is shown as text.
//
// Supported (CommonMark/GFM subset, tuned for chat replies):
//   blocks  paragraphs; ATX headings `#`…`######`; fenced code (``` / ~~~, any indentation, unclosed fences
//           run to the end); block quotes (nested, lazy continuation); bullet and ordered lists (nested by
//           indentation, `start` kept, tight/loose); GFM pipe tables (header + delimiter row, alignment);
//           thematic breaks (`---`, `***`, `___`).
//   inline  **strong** / __strong__, *em* / _em_, ~~strike~~, `code`, backslash escapes, entities,
//           hard breaks (two trailing spaces or `\`), soft breaks (rendered as <br> unless `breaks: false`),
//           [links](url "title"), <autolinks>, bare http(s) URLs, ![images](url) rendered as links (never
//           loaded), `[mm:ss]` timestamp pills with `{pills: true}` (never inside code or links).
//   math    inline `$…$` (no blank after the opening `$` or before the closing one, which is the next `$`
//           and not followed by a digit: `$5 and $10` stays text) and `\(…\)`; display `$$…$$` and `\[…\]`,
//           inline or as their own block (one line, or opener / formula lines / closer with no blank line).
//           Never inside code spans or blocks; `\$` is a dollar. Unclosed (mid-stream): text.
//   Not supported (shown as text): raw HTML, setext headings (`---` under text is a rule), indented code
//   blocks, link reference definitions, footnotes.
// Links: only http:, https: and mailto: destinations become <a href> (lib/links.js, the extension's one link
// rule: the href is the WHATWG-serialised URL, after decoding entities and escapes); any other destination (javascript:, data:, vbscript:, relative, …)
// means the construct is not a link and its source shows as plain text. Links get rel="noopener noreferrer"
// and target="_blank".
// Emphasis flanking is relaxed next to CJK text so `**粗体：**后文` works.
// Robustness: linear-time scanners (no backtracking regexes over unbounded text), nesting depth caps, and a
// plain-text fallback if anything ever throws — a partial (streaming) message always renders.
//
// Output elements: see ALLOWED_ELEMENTS; attributes: href, class, title, rel, target, start, align, data-*.
// Code blocks: <div class="md-codeblock" data-lang="js"> <div class="md-code-head"> <span class="md-code-lang">js
// </span> <button class="md-copy" data-md-copy title="Copy code">Copy</button></div> <pre><code
// class="language-js">…</code></pre></div> (words from i18n.js: codeCopy, codeCopyTitle); the page wires one
// delegated click listener on `[data-md-copy]` and copies the block's <pre><code> textContent. An unclosed
// fence adds `data-md-partial`.
// Highlighting and math come from hooks, so this module loads neither library (lib/rich.js runs them in a
// worker): `opts.highlight(code, lang, doc)` for a CLOSED fence only (highlight.js, whose HTML string a strict
// converter turns into <span class="hljs-…"> and text nodes; the <code> then also has class `hljs`),
// `opts.math(tex, display, doc)` for each formula (KaTeX's node tree → DOM nodes, no HTML string). A hook
// still waiting for its worker answers `{pending: true}`: the block stays plain (the formula shows its
// source) for now and its wrapper has `data-md-pending`; the page renders again when the answer comes.
// Whatever a hook returns is walked before it joins the reply: highlighting may hold only CODE_ELEMENTS with
// CODE_ATTRIBUTES (<span class>) and text with exactly the code's text; a formula only MATH_ELEMENTS with
// MATH_ATTRIBUTES (no links, images, `data-*`, `on*`). A missing hook, a throw or a refused tree: plain
// code, or the formula's source in <code class="md-math-src"> (with the mathError title when KaTeX refused
// it). Formulas are wrapped in <span class="md-math"> or, as blocks, <div class="md-math md-math-block">.
// `opts.onNeed('code'|'math')` says a missing hook was wanted.
// Pills: <button class="md-pill" data-seconds="65" [data-end="90"] title="Jump to 1:05">01:05</button>.

import { formatTimestamp, splitPills } from './pills.js';
import { t } from './i18n.js';
import { safeHref as linkHref, setLink } from './links.js';

/** Every element renderMarkdown may create. */
export const ALLOWED_ELEMENTS = new Set([
  'a', 'blockquote', 'br', 'button', 'code', 'del', 'div', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr',
  'li', 'ol', 'p', 'pre', 'span', 'strong', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul',
]);

/** Every attribute renderMarkdown may set, besides `data-*`. */
export const ALLOWED_ATTRIBUTES = new Set(['href', 'class', 'title', 'rel', 'target', 'start', 'colspan', 'align']);

/**
 * Every element a math hook (KaTeX) may create inside a formula: its HTML spans, its MathML and the SVG
 * of stretchy glyphs. Anything else (an <a> from \href, an <img> from \includegraphics, …) and the
 * formula shows as its source instead.
 */
export const MATH_ELEMENTS = new Set([
  'span', 'math', 'semantics', 'annotation', 'mrow', 'mi', 'mn', 'mo', 'mtext', 'mspace', 'msup', 'msub',
  'msubsup', 'mfrac', 'msqrt', 'mroot', 'mover', 'munder', 'munderover', 'mtable', 'mtr', 'mtd', 'mstyle',
  'mpadded', 'mphantom', 'menclose', 'svg', 'path', 'line',
]);

/**
 * Every attribute allowed inside a formula (no `data-*`, no href/src): KaTeX's class, aria-hidden,
 * CSSOM styles (seen as `style` in a browser), MathML presentation attributes, SVG geometry.
 */
export const MATH_ATTRIBUTES = new Set([
  'class', 'style', 'aria-hidden', 'xmlns', 'display', 'encoding', 'mathvariant', 'stretchy', 'fence',
  'separator', 'lspace', 'rspace', 'width', 'height', 'depth', 'voffset', 'mathsize', 'mathcolor',
  'mathbackground', 'minsize', 'maxsize', 'columnalign', 'rowspacing', 'columnspacing', 'columnlines', 'rowlines',
  'linethickness', 'accent', 'accentunder', 'scriptlevel', 'displaystyle', 'largeop', 'notation', 'linebreak',
  'viewbox', 'preserveaspectratio', 'd', 'x1', 'x2', 'y1', 'y2', 'stroke-width',
]);

/**
 * Every CSSOM style property a formula may set (what KaTeX writes), for the page that builds a formula
 * again from the rich worker's plain tree (lib/plain-tree.js also checks each value: lengths, colours,
 * `calc(…)`, never `url(`).
 */
export const MATH_STYLES = new Set([
  'backgroundColor', 'borderBottomWidth', 'borderColor', 'borderRightStyle', 'borderRightWidth', 'borderStyle',
  'borderTopWidth', 'borderWidth', 'bottom', 'color', 'height', 'left', 'margin', 'marginLeft', 'marginRight',
  'marginTop', 'minWidth', 'paddingLeft', 'position', 'textShadow', 'top', 'verticalAlign', 'width',
]);

const MAX_BLOCK_DEPTH = 16;
const MAX_INLINE_DEPTH = 24;
const MAX_DEST = 4096;

// ---------------------------------------------------------------------------------------------------------
// Characters

const ASCII_PUNCT = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';
const isAsciiPunct = (c) => c !== undefined && c.length === 1 && ASCII_PUNCT.includes(c);
const WS_RE = /^\s$/u;
const PUNCT_RE = /^[\p{P}\p{S}]$/u;
const CJK_RE = /^[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\u3000-\u303f\uff00-\uffef]$/u;
const isWs = (c) => c === undefined || c === '' || WS_RE.test(c);
const isPunct = (c) => c !== undefined && c !== '' && (isAsciiPunct(c) || PUNCT_RE.test(c));
const isCjk = (c) => c !== undefined && c !== '' && CJK_RE.test(c);

/** Code point (as a string) starting at i, or undefined. */
function cpAt(s, i) {
  if (i < 0 || i >= s.length) return undefined;
  const cp = s.codePointAt(i);
  return String.fromCodePoint(cp);
}

/** Code point (as a string) ending just before i, or undefined. */
function cpBefore(s, i) {
  if (i <= 0) return undefined;
  const lo = s.charCodeAt(i - 1);
  if (lo >= 0xdc00 && lo <= 0xdfff && i >= 2) {
    const hi = s.charCodeAt(i - 2);
    if (hi >= 0xd800 && hi <= 0xdbff) return s.slice(i - 2, i);
  }
  return s[i - 1];
}

const NAMED_ENTITIES = {
  amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0', copy: '©', reg: '®', trade: '™',
  hellip: '…', mdash: '—', ndash: '–', lsquo: '‘', rsquo: '’', ldquo: '“', rdquo: '”', laquo: '«', raquo: '»',
  middot: '·', bull: '•', times: '×', divide: '÷', deg: '°', plusmn: '±', para: '¶', sect: '§', euro: '€',
  pound: '£', yen: '¥', cent: '¢', larr: '←', rarr: '→', uarr: '↑', darr: '↓', harr: '↔', colon: ':',
  Tab: '\t', NewLine: '\n', lpar: '(', rpar: ')', sol: '/', bsol: '\\', excl: '!', num: '#', dollar: '$',
  percnt: '%', ast: '*', plus: '+', comma: ',', period: '.', semi: ';', equals: '=', quest: '?', commat: '@',
  lsqb: '[', rsqb: ']', lowbar: '_', grave: '`', lcub: '{', rcub: '}', verbar: '|', Hat: '^', le: '≤', ge: '≥',
  ne: '≠', infin: '∞', micro: 'µ', alpha: 'α', beta: 'β', gamma: 'γ', delta: 'δ', pi: 'π', sigma: 'σ',
};
const ENTITY_RE = /&(?:#[xX]([0-9a-fA-F]{1,6})|#([0-9]{1,7})|([A-Za-z][A-Za-z0-9]{1,31}));/y;

/** Decode the entity at `i` (which holds `&`): `[text, end]` or null. */
function entityAt(s, i) {
  ENTITY_RE.lastIndex = i;
  const m = ENTITY_RE.exec(s);
  if (!m) return null;
  let text;
  if (m[1] !== undefined || m[2] !== undefined) {
    const cp = m[1] !== undefined ? parseInt(m[1], 16) : parseInt(m[2], 10);
    text = cp === 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? '\ufffd' : String.fromCodePoint(cp);
  } else {
    if (!Object.prototype.hasOwnProperty.call(NAMED_ENTITIES, m[3])) return null;
    text = NAMED_ENTITIES[m[3]];
  }
  return [text, i + m[0].length];
}

/** Decode backslash escapes and entities (link destinations and titles). */
function unescapeString(s) {
  if (!s.includes('\\') && !s.includes('&')) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\' && isAsciiPunct(s[i + 1])) {
      out += s[i + 1];
      i++;
    } else if (c === '&') {
      const e = entityAt(s, i);
      if (e) {
        out += e[0];
        i = e[1] - 1;
      } else out += c;
    } else out += c;
  }
  return out;
}

/**
 * The href to use for a link destination, or null when it must not be a link: entities and backslash
 * escapes decoded, then the extension's one link rule (lib/links.js `safeHref`: http:, https: with a
 * host and mailto: only, no control characters, no relative URLs; the WHATWG parser's serialisation,
 * which is exactly what a browser would follow).
 * @param {string} raw destination as written
 * @returns {string|null}
 */
export function safeHref(raw) {
  if (typeof raw !== 'string') return null;
  const s = unescapeString(raw).trim();
  if (!s || s.length > MAX_DEST) return null;
  return linkHref(s);
}

// ---------------------------------------------------------------------------------------------------------
// Block structure

function isBlank(line) {
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c !== ' ' && c !== '\t') return false;
  }
  return true;
}

/** Leading whitespace: columns (tabs to multiples of 4) and the index of the first other char. */
function indentOf(line) {
  let cols = 0;
  let i = 0;
  for (; i < line.length; i++) {
    const c = line[i];
    if (c === ' ') cols++;
    else if (c === '\t') cols += 4 - (cols % 4);
    else break;
  }
  return { cols, idx: i };
}

/** Remove up to `n` columns of leading whitespace. */
function stripCols(line, n) {
  let cols = 0;
  let i = 0;
  while (i < line.length && cols < n) {
    const c = line[i];
    if (c === ' ') cols++;
    else if (c === '\t') {
      const w = 4 - (cols % 4);
      if (cols + w > n) return ' '.repeat(cols + w - n) + line.slice(i + 1);
      cols += w;
    } else break;
    i++;
  }
  return line.slice(i);
}

function fenceOpen(line) {
  const { cols, idx } = indentOf(line);
  const ch = line[idx];
  if (ch !== '`' && ch !== '~') return null;
  let j = idx;
  while (line[j] === ch) j++;
  const n = j - idx;
  if (n < 3) return null;
  const info = line.slice(j).trim();
  if (ch === '`' && info.includes('`')) return null;
  return { ch, n, indent: cols, info };
}

function isFenceClose(line, f) {
  const { idx } = indentOf(line);
  let j = idx;
  while (line[j] === f.ch) j++;
  return j - idx >= f.n && isBlank(line.slice(j));
}

function headingOf(line) {
  const { cols, idx } = indentOf(line);
  if (cols > 3) return null;
  let j = idx;
  while (line[j] === '#') j++;
  const level = j - idx;
  if (level < 1 || level > 6) return null;
  if (j < line.length && line[j] !== ' ' && line[j] !== '\t') return null;
  let text = line.slice(j).trim();
  let k = text.length;
  while (k > 0 && text[k - 1] === '#') k--;
  if (k === 0) text = '';
  else if (k < text.length && (text[k - 1] === ' ' || text[k - 1] === '\t')) text = text.slice(0, k).trim();
  return { level, text };
}

function isHr(line) {
  let ch = null;
  let count = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === ' ' || c === '\t') continue;
    if (c !== '-' && c !== '*' && c !== '_') return false;
    if (ch === null) ch = c;
    else if (c !== ch) return false;
    count++;
  }
  return count >= 3;
}

function isQuoteStart(line) {
  const { cols, idx } = indentOf(line);
  return cols <= 3 && line[idx] === '>';
}

function stripQuote(line) {
  const { idx } = indentOf(line);
  const rest = line.slice(idx + 1);
  if (rest[0] === ' ') return rest.slice(1);
  if (rest[0] === '\t') return '  ' + rest.slice(1);
  return rest;
}

function listMarker(line) {
  const { cols, idx } = indentOf(line);
  const c = line[idx];
  let j;
  let ordered = false;
  let start = 1;
  let delim = c;
  if (c === '-' || c === '*' || c === '+') {
    j = idx + 1;
  } else if (c >= '0' && c <= '9') {
    j = idx;
    while (j < line.length && j - idx <= 9 && line[j] >= '0' && line[j] <= '9') j++;
    if (j - idx > 9) return null;
    if (line[j] !== '.' && line[j] !== ')') return null;
    ordered = true;
    start = parseInt(line.slice(idx, j), 10);
    delim = line[j];
    j++;
  } else return null;
  if (j < line.length && line[j] !== ' ' && line[j] !== '\t') return null;
  const markerEnd = cols + (j - idx);
  let col = markerEnd;
  let k = j;
  while (k < line.length && (line[k] === ' ' || line[k] === '\t')) {
    col += line[k] === '\t' ? 4 - (col % 4) : 1;
    k++;
  }
  const rest = line.slice(k);
  const empty = rest.length === 0;
  const spaces = col - markerEnd;
  const contentOffset = empty || spaces > 4 ? markerEnd + 1 : col;
  return { ordered, start, delim, markerIndent: cols, contentOffset, rest, empty };
}

function sameList(a, b) {
  return a.ordered === b.ordered && a.delim === b.delim;
}

/** Would this line end a paragraph? */
function interrupts(line) {
  if (fenceOpen(line) || headingOf(line) || isHr(line) || isQuoteStart(line) || mathOpen(line)) return true;
  const m = listMarker(line);
  return !!m && !m.empty && (!m.ordered || m.start === 1);
}

/** Split a table row on unescaped pipes; `\|` becomes `|`. */
function splitRow(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cur = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\' && s[i + 1] === '|') {
      cur += '|';
      i++;
    } else if (c === '|') {
      cells.push(cur.trim());
      cur = '';
    } else cur += c;
  }
  cells.push(cur.trim());
  return cells;
}

function delimRowAligns(line) {
  let pipe = false;
  let dash = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '|') pipe = true;
    else if (c === '-') dash = true;
    else if (c !== ':' && c !== ' ' && c !== '\t') return null;
  }
  if (!pipe || !dash) return null;
  const cells = splitRow(line);
  const aligns = [];
  for (const cell of cells) {
    if (!/^:?-+:?$/.test(cell)) return null;
    const l = cell.startsWith(':');
    const r = cell.endsWith(':');
    aligns.push(l && r ? 'center' : r ? 'right' : l ? 'left' : null);
  }
  return aligns;
}

function tableStart(line, next) {
  if (next === undefined || !line.includes('|')) return null;
  const aligns = delimRowAligns(next);
  if (!aligns) return null;
  const head = splitRow(line);
  return head.length === aligns.length ? { head, aligns } : null;
}

/** A display-math opener at the start of a line (`$$` or `\[`, up to 3 spaces in): {close, rest} or null. */
function mathOpen(line) {
  const { cols, idx } = indentOf(line);
  if (cols > 3) return null;
  if (line.startsWith('$$', idx) && line[idx + 2] !== '$') return { close: '$$', rest: line.slice(idx + 2) };
  if (line.startsWith('\\[', idx)) return { close: '\\]', rest: line.slice(idx + 2) };
  return null;
}

/** `rest` without trailing blanks, when it ends with `close` (and is more than `close`): else null. */
function beforeClose(rest, close) {
  const s = rest.trimEnd();
  return s.endsWith(close) ? s.slice(0, s.length - close.length) : null;
}

/**
 * Display math as a block: `$$…$$` or `\[…\]` on one line, or an opener line, formula lines and a line
 * ending with the closer, with no blank line between (`$$ x = 1 $$`, `$$\nx = 1\n$$`). Returns
 * {tex, raw, end} or null (unclosed, e.g. mid-stream: the lines are a paragraph). `noClose[close]`
 * remembers how far a failed search looked, so each line is searched at most once per closer.
 */
function mathBlock(lines, i, noClose) {
  const m = mathOpen(lines[i]);
  if (!m) return null;
  const one = beforeClose(m.rest, m.close);
  if (one !== null && m.rest.trim().length >= m.close.length) {
    if (one.includes(m.close) || !one.trim()) return null; // `$$a$$ and $$b$$`: inline math in a paragraph
    return { tex: one.trim(), raw: lines[i].trim(), end: i + 1 };
  }
  if (i < noClose[m.close]) return null;
  const body = [m.rest];
  for (let j = i + 1; j < lines.length; j++) {
    const l = lines[j];
    if (isBlank(l)) {
      noClose[m.close] = j;
      return null;
    }
    const last = beforeClose(l, m.close);
    if (last !== null) {
      body.push(last);
      const tex = body.join('\n').trim();
      if (!tex) return null;
      return { tex, raw: lines.slice(i, j + 1).map((x) => x.trim()).join('\n'), end: j + 1 };
    }
    body.push(l);
  }
  noClose[m.close] = lines.length;
  return null;
}

/** Tracks whether a sequence of lines is inside a fenced block (for lazy continuation decisions). */
function fenceTracker() {
  let open = null;
  return {
    push(line) {
      if (open) {
        if (isFenceClose(line, open)) open = null;
      } else {
        open = fenceOpen(line);
      }
    },
    get inFence() {
      return open !== null;
    },
  };
}

function parseBlockLines(lines, depth) {
  const blocks = [];
  const noMathClose = { $$: 0, '\\]': 0 }; // mathBlock: no closing line before this index (keeps it linear)
  const n = lines.length;
  let i = 0;
  while (i < n) {
    const line = lines[i];
    if (isBlank(line)) {
      i++;
      continue;
    }
    const f = fenceOpen(line);
    if (f) {
      const body = [];
      let closed = false;
      i++;
      while (i < n) {
        const l = lines[i];
        i++;
        if (isFenceClose(l, f)) {
          closed = true;
          break;
        }
        body.push(stripCols(l, f.indent));
      }
      const lang = (f.info.split(/[ \t]/, 1)[0] || '').replace(/[^A-Za-z0-9_+#.-]/g, '').slice(0, 32);
      blocks.push({ type: 'code', lang, text: body.join('\n'), closed });
      continue;
    }
    const mb = mathBlock(lines, i, noMathClose);
    if (mb) {
      blocks.push({ type: 'math', tex: mb.tex, raw: mb.raw });
      i = mb.end;
      continue;
    }
    const h = headingOf(line);
    if (h) {
      blocks.push({ type: 'heading', level: h.level, text: h.text });
      i++;
      continue;
    }
    if (isHr(line)) {
      blocks.push({ type: 'hr' });
      i++;
      continue;
    }
    if (isQuoteStart(line)) {
      const inner = [];
      const ft = fenceTracker();
      while (i < n) {
        const l = lines[i];
        if (isQuoteStart(l)) {
          const s = stripQuote(l);
          inner.push(s);
          ft.push(s);
          i++;
        } else if (
          !isBlank(l) &&
          inner.length > 0 &&
          !isBlank(inner[inner.length - 1]) &&
          !ft.inFence &&
          !interrupts(l)
        ) {
          inner.push(l);
          i++;
        } else break;
      }
      const children =
        depth >= MAX_BLOCK_DEPTH ? [{ type: 'para', text: inner.join('\n') }] : parseBlockLines(inner, depth + 1);
      blocks.push({ type: 'quote', children });
      continue;
    }
    const m = listMarker(line);
    if (m) {
      i = parseList(lines, i, depth, blocks, m);
      continue;
    }
    const t = tableStart(line, lines[i + 1]);
    if (t) {
      i += 2;
      const rows = [];
      while (i < n) {
        const l = lines[i];
        if (isBlank(l) || !l.includes('|') || interrupts(l)) break;
        const cells = splitRow(l);
        const row = [];
        for (let c = 0; c < t.head.length; c++) row.push(cells[c] ?? '');
        rows.push(row);
        i++;
      }
      blocks.push({ type: 'table', aligns: t.aligns, head: t.head, rows });
      continue;
    }
    // Paragraph
    const buf = [line.trimStart()];
    i++;
    while (i < n) {
      const l = lines[i];
      if (isBlank(l) || interrupts(l) || tableStart(l, lines[i + 1])) break;
      buf.push(l.trimStart());
      i++;
    }
    blocks.push({ type: 'para', text: buf.join('\n') });
  }
  return blocks;
}

function parseList(lines, i, depth, blocks, first) {
  const n = lines.length;
  const list = { type: 'list', ordered: first.ordered, start: first.start, loose: false, items: [] };
  let m = first;
  while (m) {
    const childIndent = Math.min(m.contentOffset, m.markerIndent + 2);
    const itemLines = [m.rest];
    const ft = fenceTracker();
    ft.push(m.rest);
    let blankInside = false;
    let endedOnBlank = false;
    i++;
    while (i < n) {
      const l = lines[i];
      if (isBlank(l)) {
        let j = i + 1;
        while (j < n && isBlank(lines[j])) j++;
        if (j < n && indentOf(lines[j]).cols >= childIndent) {
          for (let k = i; k < j; k++) itemLines.push('');
          if (!ft.inFence) blankInside = true;
          i = j;
          continue;
        }
        if (ft.inFence && j >= n) {
          i = j;
          break;
        }
        endedOnBlank = true;
        break;
      }
      const ind = indentOf(l).cols;
      if (ind >= childIndent) {
        const s = stripCols(l, Math.min(ind, m.contentOffset));
        itemLines.push(s);
        ft.push(s);
        i++;
        continue;
      }
      if (ft.inFence) {
        // A less-indented line inside the item's open fence: keep it in the code (streaming-friendly).
        itemLines.push(l.trimStart());
        ft.push(l.trimStart());
        i++;
        continue;
      }
      if (!isBlank(itemLines[itemLines.length - 1]) && !interrupts(l) && !listMarker(l)) {
        itemLines.push(l.trimStart());
        i++;
        continue;
      }
      break;
    }
    while (itemLines.length > 1 && isBlank(itemLines[itemLines.length - 1])) itemLines.pop();
    const children =
      depth >= MAX_BLOCK_DEPTH
        ? [{ type: 'para', text: itemLines.join('\n') }]
        : parseBlockLines(itemLines, depth + 1);
    if (blankInside && children.length > 1) list.loose = true;
    list.items.push({ children });
    // Next sibling?
    let j = i;
    if (endedOnBlank) while (j < n && isBlank(lines[j])) j++;
    const next = j < n && !isHr(lines[j]) ? listMarker(lines[j]) : null;
    if (next && sameList(first, next) && next.markerIndent < childIndent + 2) {
      if (endedOnBlank) list.loose = true;
      i = j;
      m = next;
    } else m = null;
  }
  blocks.push(list);
  return i;
}

// ---------------------------------------------------------------------------------------------------------
// Inline structure

const SPECIAL = new Uint8Array(128);
for (const c of '\\`*_~[]!<\n&$') SPECIAL[c.charCodeAt(0)] = 1;

const AUTOLINK_URI_RE = /<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*)>/y;
const AUTOLINK_EMAIL_RE = /<([A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>/y;

/** Backtick runs of the whole string, by length, for O(log n) closer lookup. */
function backtickIndex(src) {
  const byLen = new Map();
  for (let i = src.indexOf('`'); i !== -1; ) {
    let j = i;
    while (src[j] === '`') j++;
    const len = j - i;
    let arr = byLen.get(len);
    if (!arr) byLen.set(len, (arr = []));
    arr.push(i);
    i = src.indexOf('`', j);
  }
  return byLen;
}

/** First element of the sorted array `arr` that is >= from, or -1 (binary search). */
function firstAtLeast(arr, from) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid] < from) lo = mid + 1;
    else hi = mid;
  }
  return lo < arr.length ? arr[lo] : -1;
}

const isDigit = (c) => c !== undefined && c >= '0' && c <= '9';
const isBlankChar = (c) => c === undefined || c === ' ' || c === '\t' || c === '\n';

/**
 * Where inline math may close, found in one pass over the paragraph (closer lookups are then binary
 * searches: linear overall however many `$` a reply holds): every unescaped `$` run, `$$` runs, `\)`
 * and `\]`, newlines and backticks (inline `$…$` stays on one line; no formula spans a backtick, so
 * code spans keep their dollars).
 */
function mathIndex(src) {
  const idx = { dollar: [], two: [], paren: [], bracket: [], nl: [], tick: [] };
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === '$') {
      let j = i;
      while (src[j] === '$') j++;
      idx.dollar.push(i);
      if (j - i === 2) idx.two.push(i);
      i = j - 1;
    } else if (c === '\\') {
      const nx = src[i + 1];
      if (nx === ')') idx.paren.push(i);
      else if (nx === ']') idx.bracket.push(i);
      i++;
    } else if (c === '\n') idx.nl.push(i);
    else if (c === '`') idx.tick.push(i);
  }
  return idx;
}

/**
 * Inline math starting at `i`: {tex, display, end} or null. `$…$` (no blank after the opening `$`, none
 * before the closing one, which is not followed by a digit: `$5 and $10` stays text), `$$…$$`, `\(…\)`
 * and `\[…\]`.
 */
function mathAt(src, i, idx) {
  let open;
  let close;
  let list;
  let display;
  if (src[i] === '$') {
    if (src[i + 1] === '$') {
      if (src[i + 2] === '$' || src[i - 1] === '$') return null;
      [open, close, list, display] = [2, 2, idx.two, true];
    } else {
      if (isBlankChar(src[i + 1]) || src[i - 1] === '$') return null;
      [open, close, list, display] = [1, 1, idx.dollar, false];
    }
  } else if (src[i] === '\\' && src[i + 1] === '(') [open, close, list, display] = [2, 2, idx.paren, false];
  else if (src[i] === '\\' && src[i + 1] === '[') [open, close, list, display] = [2, 2, idx.bracket, true];
  else return null;
  const at = firstAtLeast(list, i + open + 1);
  if (at === -1) return null;
  // `$…$` closes at the next `$` (a bare `$` inside a formula is not TeX), which must be a single `$`,
  // not after a blank, not before a digit
  if (list === idx.dollar && (src[at + 1] === '$' || isBlankChar(src[at - 1]) || isDigit(src[at + 1]))) return null;
  const tick = firstAtLeast(idx.tick, i);
  if (tick !== -1 && tick < at) return null;
  if (!display && src[i] === '$') {
    const nl = firstAtLeast(idx.nl, i);
    if (nl !== -1 && nl < at) return null;
  }
  const tex = src.slice(i + open, at);
  if (!tex.trim()) return null;
  return { tex: display ? tex.trim() : tex, display, raw: src.slice(i, at + close), end: at + close };
}

function findRun(byLen, len, from) {
  const arr = byLen.get(len);
  if (!arr) return -1;
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid] < from) lo = mid + 1;
    else hi = mid;
  }
  return lo < arr.length ? arr[lo] : -1;
}

function skipSpace(src, p, limit) {
  let newline = false;
  while (p < limit) {
    const c = src[p];
    if (c === ' ' || c === '\t') p++;
    else if (c === '\n' && !newline) {
      newline = true;
      p++;
    } else break;
  }
  return p;
}

/** Parse `(dest "title")` with `p` just after `(`: {dest, title, end} or null. Bounded scan. */
function parseLinkTail(src, p) {
  const len = src.length;
  const limit = Math.min(len, p + MAX_DEST + 16);
  p = skipSpace(src, p, limit);
  let dest;
  if (src[p] === '<') {
    let q = p + 1;
    while (q < limit && src[q] !== '>' && src[q] !== '\n' && src[q] !== '<') q += src[q] === '\\' ? 2 : 1;
    if (q >= limit || src[q] !== '>') return null;
    dest = src.slice(p + 1, q);
    p = q + 1;
  } else {
    let q = p;
    let depth = 0;
    while (q < limit) {
      const c = src[q];
      if (c === '\\' && isAsciiPunct(src[q + 1])) {
        q += 2;
        continue;
      }
      if (c === '(') {
        if (++depth > 32) return null;
      } else if (c === ')') {
        if (depth === 0) break;
        depth--;
      } else if (c <= ' ') break;
      q++;
    }
    if (q >= limit || depth !== 0) return null;
    dest = src.slice(p, q);
    p = q;
  }
  let title;
  const before = p;
  p = skipSpace(src, p, limit);
  const open = src[p];
  if (p > before && (open === '"' || open === "'" || open === '(')) {
    const close = open === '(' ? ')' : open;
    let q = p + 1;
    while (q < limit && src[q] !== close) q += src[q] === '\\' ? 2 : 1;
    if (q >= limit) return null;
    title = unescapeString(src.slice(p + 1, q));
    p = skipSpace(src, q + 1, limit);
  }
  if (src[p] !== ')') return null;
  return { dest, title, end: p + 1 };
}

/**
 * Parse inline Markdown into nodes: {type: 'text', text} | {type: 'code', text} | {type: 'br'} |
 * {type: 'softbreak'} | {type: 'em'|'strong'|'del', children} | {type: 'link'|'image', href, title?, children}.
 * Linear-time apart from bounded link-destination scans; never throws on partial input.
 * @param {string} src
 * @returns {Array<object>}
 */
export function parseInline(src) {
  src = String(src ?? '');
  const len = src.length;
  const tokens = [];
  let delimTop = null; // doubly linked delimiter stack (commonmark.js style)
  const brackets = [];
  let inactiveBelow = 0; // bracket openers with an index below this can no longer become links
  let ticks = null;
  let mathIdx = null;

  const pushText = (v) => tokens.push({ t: 'text', v });
  const removeDelim = (d) => {
    if (d.prev) d.prev.next = d.next;
    if (d.next) d.next.prev = d.prev;
    else delimTop = d.prev;
    d.removed = true;
  };

  const processEmphasis = (bottom) => {
    const openersBottom = new Map();
    let closer = delimTop === bottom ? null : delimTop;
    while (closer && closer.prev !== bottom) closer = closer.prev;
    while (closer) {
      if (!closer.canClose) {
        closer = closer.next;
        continue;
      }
      const key = closer.ch + (closer.canOpen ? '1' : '0') + (closer.orig % 3);
      const floor = openersBottom.has(key) ? openersBottom.get(key) : bottom;
      let opener = closer.prev;
      let found = false;
      while (opener && opener !== bottom && opener !== floor) {
        const odd =
          (closer.canOpen || opener.canClose) && closer.orig % 3 !== 0 && (opener.orig + closer.orig) % 3 === 0;
        if (opener.ch === closer.ch && opener.canOpen && !odd) {
          found = true;
          break;
        }
        opener = opener.prev;
      }
      const oldCloser = closer;
      if (found) {
        const use = closer.ch === '~' ? 2 : closer.count >= 2 && opener.count >= 2 ? 2 : 1;
        const kind = closer.ch === '~' ? 'del' : use === 2 ? 'strong' : 'em';
        opener.count -= use;
        closer.count -= use;
        opener.tok.count = opener.count;
        closer.tok.count = closer.count;
        const match = { kind, text: closer.ch.repeat(use), node: null, literal: false };
        opener.tok.opens.unshift(match);
        closer.tok.closes.push(match);
        for (let d = closer.prev; d && d !== opener; d = d.prev) removeDelim(d);
        if (opener.count === 0) removeDelim(opener);
        if (closer.count === 0) {
          const next = closer.next;
          removeDelim(closer);
          closer = next;
        }
      } else {
        closer = closer.next;
        openersBottom.set(key, oldCloser.prev);
        if (!oldCloser.canOpen) removeDelim(oldCloser);
      }
    }
    while (delimTop && delimTop !== bottom) removeDelim(delimTop);
  };

  let i = 0;
  let textStart = 0;
  while (i < len) {
    const code = src.charCodeAt(i);
    if (code >= 128 || SPECIAL[code] === 0) {
      i++;
      continue;
    }
    if (i > textStart) pushText(src.slice(textStart, i));
    const c = src[i];
    let math = null;
    if (c === '$' || (c === '\\' && (src[i + 1] === '(' || src[i + 1] === '['))) {
      if (!mathIdx) mathIdx = mathIndex(src);
      math = mathAt(src, i, mathIdx);
    }
    if (math) {
      tokens.push({ t: 'math', tex: math.tex, display: math.display, raw: math.raw });
      i = math.end;
    } else if (c === '$') {
      let j = i;
      while (src[j] === '$') j++;
      pushText(src.slice(i, j));
      i = j;
    } else if (c === '\\') {
      const nx = src[i + 1];
      if (nx === '\n') {
        tokens.push({ t: 'br' });
        i += 2;
        while (src[i] === ' ' || src[i] === '\t') i++;
      } else if (isAsciiPunct(nx)) {
        pushText(nx);
        i += 2;
      } else {
        pushText('\\');
        i++;
      }
    } else if (c === '`') {
      let j = i;
      while (src[j] === '`') j++;
      const n = j - i;
      if (!ticks) ticks = backtickIndex(src);
      const close = findRun(ticks, n, j);
      if (close === -1) {
        pushText(src.slice(i, j));
        i = j;
      } else {
        let v = src.slice(j, close).replace(/\n/g, ' ');
        if (v.length > 2 && v[0] === ' ' && v[v.length - 1] === ' ' && !/^ *$/.test(v)) v = v.slice(1, -1);
        tokens.push({ t: 'code', v });
        i = close + n;
      }
    } else if (c === '*' || c === '_' || c === '~') {
      let j = i;
      while (src[j] === c) j++;
      const n = j - i;
      if (c === '~' && n !== 2) {
        pushText(src.slice(i, j));
      } else {
        const prev = cpBefore(src, i);
        const next = cpAt(src, j);
        const left = !isWs(next) && (!isPunct(next) || isWs(prev) || isPunct(prev) || isCjk(prev));
        const right = !isWs(prev) && (!isPunct(prev) || isWs(next) || isPunct(next) || isCjk(next));
        let canOpen = left;
        let canClose = right;
        if (c === '_') {
          canOpen = left && (!right || isPunct(prev));
          canClose = right && (!left || isPunct(next));
        }
        const tok = { t: 'delim', ch: c, count: n, opens: [], closes: [] };
        tokens.push(tok);
        if (canOpen || canClose) {
          const d = { tok, ch: c, count: n, orig: n, canOpen, canClose, prev: delimTop, next: null, removed: false };
          if (delimTop) delimTop.next = d;
          delimTop = d;
        }
      }
      i = j;
    } else if (c === '[' || (c === '!' && src[i + 1] === '[')) {
      const img = c === '!';
      const tok = { t: 'lopen', v: img ? '![' : '[', link: null };
      tokens.push(tok);
      if (brackets.length < inactiveBelow) inactiveBelow = brackets.length;
      brackets.push({ tok, img, bottom: delimTop });
      i += img ? 2 : 1;
    } else if (c === '!') {
      pushText('!');
      i++;
    } else if (c === ']') {
      const opener = brackets.length > 0 ? brackets[brackets.length - 1] : null;
      let done = false;
      if (opener && brackets.length - 1 >= inactiveBelow && src[i + 1] === '(') {
        const tail = parseLinkTail(src, i + 2);
        const href = tail ? safeHref(tail.dest) : null;
        if (href) {
          const link = { href, title: tail.title, img: opener.img };
          opener.tok.link = link;
          tokens.push({ t: 'lclose', link });
          processEmphasis(opener.bottom);
          brackets.pop();
          if (!opener.img) inactiveBelow = brackets.length;
          i = tail.end;
          done = true;
        }
      }
      if (!done) {
        if (opener) brackets.pop();
        pushText(']');
        i++;
      }
    } else if (c === '<') {
      let m = null;
      AUTOLINK_URI_RE.lastIndex = i;
      let mm = AUTOLINK_URI_RE.exec(src);
      if (mm) m = { href: safeHref(mm[1]), text: mm[1], end: i + mm[0].length };
      else {
        AUTOLINK_EMAIL_RE.lastIndex = i;
        mm = AUTOLINK_EMAIL_RE.exec(src);
        if (mm) m = { href: safeHref('mailto:' + mm[1]), text: mm[1], end: i + mm[0].length };
      }
      if (m && m.href) {
        tokens.push({ t: 'autolink', href: m.href, v: m.text });
        i = m.end;
      } else {
        pushText('<');
        i++;
      }
    } else if (c === '\n') {
      let hard = false;
      const last = tokens[tokens.length - 1];
      if (last && last.t === 'text') {
        let k = last.v.length;
        while (k > 0 && last.v[k - 1] === ' ') k--;
        hard = last.v.length - k >= 2;
        last.v = last.v.slice(0, k);
      }
      tokens.push({ t: hard ? 'br' : 'soft' });
      i++;
      while (src[i] === ' ' || src[i] === '\t') i++;
    } else if (c === '&') {
      const e = entityAt(src, i);
      if (e) {
        pushText(e[0]);
        i = e[1];
      } else {
        pushText('&');
        i++;
      }
    } else {
      pushText(c);
      i++;
    }
    textStart = i;
  }
  if (len > textStart) pushText(src.slice(textStart));
  processEmphasis(null);
  return buildInline(tokens);
}

function buildInline(tokens) {
  const root = { type: 'root', children: [] };
  const stack = [root];
  const top = () => stack[stack.length - 1];
  const addText = (v) => {
    if (!v) return;
    const kids = top().children;
    const last = kids[kids.length - 1];
    if (last && last.type === 'text') last.text += v;
    else kids.push({ type: 'text', text: v });
  };
  const open = (node) => {
    top().children.push(node);
    stack.push(node);
  };
  const closeNode = (node) => {
    const at = stack.lastIndexOf(node);
    if (at > 0) stack.length = at;
  };
  let linkDepth = 0;
  for (const tok of tokens) {
    switch (tok.t) {
      case 'text':
        addText(tok.v);
        break;
      case 'code':
        top().children.push({ type: 'code', text: tok.v });
        break;
      case 'math':
        top().children.push({ type: 'math', tex: tok.tex, display: tok.display, raw: tok.raw });
        break;
      case 'br':
        top().children.push({ type: 'br' });
        break;
      case 'soft':
        top().children.push({ type: 'softbreak' });
        break;
      case 'delim': {
        for (const m of tok.closes) {
          if (m.literal || !m.node || !stack.includes(m.node)) addText(m.text);
          else closeNode(m.node);
        }
        addText(tok.ch.repeat(tok.count));
        for (const m of tok.opens) {
          if (stack.length > MAX_INLINE_DEPTH) {
            m.literal = true;
            addText(m.text);
          } else {
            m.node = { type: m.kind, children: [] };
            open(m.node);
          }
        }
        break;
      }
      case 'lopen':
        if (!tok.link) addText(tok.v);
        else if (linkDepth > 0 || stack.length > MAX_INLINE_DEPTH) {
          // A link inside a link (e.g. an image badge inside a link): keep only its content.
          tok.node = { type: 'group', children: [] };
          tok.link.node = tok.node;
          open(tok.node);
          linkDepth++;
        } else {
          const node = { type: tok.link.img ? 'image' : 'link', href: tok.link.href, children: [] };
          if (tok.link.title) node.title = tok.link.title;
          tok.link.node = node;
          open(node);
          linkDepth++;
        }
        break;
      case 'lclose':
        if (tok.link.node && stack.includes(tok.link.node)) {
          closeNode(tok.link.node);
          linkDepth--;
        }
        break;
      case 'autolink':
        if (linkDepth > 0) addText(tok.v);
        else top().children.push({ type: 'link', href: tok.href, children: [{ type: 'text', text: tok.v }] });
        break;
      default:
        break;
    }
  }
  return root.children;
}

// ---------------------------------------------------------------------------------------------------------
// Bare URLs

const URL_STOP = new Set(['<', '>', '"', '`', '\u00a0']);
const URL_TRAIL = new Set(['.', ',', ':', ';', '!', '?', "'", '"', '*', '_', '~']);

function isUrlChar(c) {
  const code = c.charCodeAt(0);
  if (code <= 0x20 || (code >= 0x7f && code <= 0x9f)) return false;
  if (URL_STOP.has(c)) return false;
  if ((code >= 0x3000 && code <= 0x303f) || (code >= 0xff00 && code <= 0xffef)) return false;
  if (code === 0x2028 || code === 0x2029) return false;
  return !WS_RE.test(c);
}

/**
 * Split text into plain runs and bare http(s) URLs (GFM autolink extension, trailing punctuation and
 * unbalanced closing brackets left out).
 * @param {string} text
 * @returns {Array<{text: string, href?: string}>}
 */
export function linkify(text) {
  const out = [];
  const lower = text.toLowerCase();
  let last = 0;
  let pos = 0;
  for (;;) {
    const at = lower.indexOf('http', pos);
    if (at === -1) break;
    pos = at + 4;
    const scheme = lower.startsWith('https://', at) ? 8 : lower.startsWith('http://', at) ? 7 : 0;
    if (!scheme) continue;
    const prev = text[at - 1];
    if (prev !== undefined && /[A-Za-z0-9]/.test(prev)) continue;
    let end = at + scheme;
    let parens = 0; // closing minus opening, over the candidate
    let squares = 0;
    while (end < text.length && isUrlChar(text[end])) {
      const ch = text[end];
      if (ch === '(') parens--;
      else if (ch === ')') parens++;
      else if (ch === '[') squares--;
      else if (ch === ']') squares++;
      end++;
    }
    const scanned = end;
    // Trim trailing punctuation and unbalanced closers.
    for (;;) {
      const ch = text[end - 1];
      if (URL_TRAIL.has(ch)) end--;
      else if (ch === ')' && parens > 0) {
        parens--;
        end--;
      } else if (ch === ']' && squares > 0) {
        squares--;
        end--;
      } else break;
    }
    // Whatever happens, never rescan this candidate (keeps the scan linear).
    pos = Math.max(pos, scanned);
    if (end <= at + scheme) continue;
    const raw = text.slice(at, end);
    const href = safeHref(raw);
    if (!href) continue;
    if (at > last) out.push({ text: text.slice(last, at) });
    out.push({ text: raw, href });
    last = end;
    pos = end;
  }
  if (last < text.length) out.push({ text: text.slice(last) });
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// AST

function inlineBlocks(blocks) {
  for (const b of blocks) {
    if (b.type === 'para' || b.type === 'heading') b.inline = parseInline(b.text);
    else if (b.type === 'table') {
      b.headInline = b.head.map((c) => parseInline(c));
      b.rowsInline = b.rows.map((r) => r.map((c) => parseInline(c)));
    } else if (b.type === 'quote') inlineBlocks(b.children);
    else if (b.type === 'list') for (const it of b.items) inlineBlocks(it.children);
  }
  return blocks;
}

/**
 * Parse Markdown into a block AST: {type: 'para'|'heading'|'code'|'hr'|'quote'|'list'|'table', …}; paragraphs,
 * headings and table cells carry their parsed inline nodes (`inline`, `headInline`, `rowsInline`).
 * @param {string} text
 * @returns {Array<object>}
 */
export function parse(text) {
  const lines = String(text ?? '').split(/\r\n|\r|\n/);
  return inlineBlocks(parseBlockLines(lines, 0));
}

// ---------------------------------------------------------------------------------------------------------
// DOM

function el(doc, tag, attrs) {
  const e = doc.createElement(tag);
  if (attrs) {
    for (const k of Object.keys(attrs)) {
      if (attrs[k] === undefined || attrs[k] === null) continue;
      if (k === 'href') setLink(e, attrs[k]); // the one link rule (lib/links.js)
      else e.setAttribute(k, String(attrs[k]));
    }
  }
  return e;
}

function appendText(doc, parent, text, ctx) {
  if (!text) return;
  if (ctx.inLink) {
    parent.appendChild(doc.createTextNode(text)); // no links or pills inside a link
    return;
  }
  const segments = linkify(text);
  for (const seg of segments) {
    if (seg.href) {
      const a = el(doc, 'a', { href: seg.href, rel: 'noopener noreferrer', target: '_blank' });
      a.appendChild(doc.createTextNode(seg.text));
      parent.appendChild(a);
    } else if (ctx.pills) {
      for (const p of splitPills(seg.text)) {
        if (p.type === 'text') parent.appendChild(doc.createTextNode(p.text));
        else {
          const title =
            p.end !== undefined
              ? t('pillJumpRange', formatTimestamp(p.seconds), formatTimestamp(p.end))
              : t('pillJump', formatTimestamp(p.seconds));
          const b = el(doc, 'button', {
            class: 'md-pill',
            'data-seconds': p.seconds,
            'data-end': p.end,
            title,
          });
          b.appendChild(doc.createTextNode(p.label));
          parent.appendChild(b);
        }
      }
    } else parent.appendChild(doc.createTextNode(seg.text));
  }
}

function renderInline(doc, parent, nodes, ctx) {
  for (const n of nodes) {
    switch (n.type) {
      case 'text':
        appendText(doc, parent, n.text, ctx);
        break;
      case 'code': {
        const c = el(doc, 'code');
        c.appendChild(doc.createTextNode(n.text));
        parent.appendChild(c);
        break;
      }
      case 'math':
        renderMath(doc, parent, n, ctx, false);
        break;
      case 'br':
        parent.appendChild(el(doc, 'br'));
        break;
      case 'softbreak':
        parent.appendChild(ctx.breaks ? el(doc, 'br') : doc.createTextNode('\n'));
        break;
      case 'em':
      case 'strong':
      case 'del': {
        const e = el(doc, n.type);
        renderInline(doc, e, n.children, ctx);
        parent.appendChild(e);
        break;
      }
      case 'group':
        renderInline(doc, parent, n.children, ctx);
        break;
      case 'link':
      case 'image': {
        const a = el(doc, 'a', {
          href: n.href,
          rel: 'noopener noreferrer',
          target: '_blank',
          title: n.title,
          class: n.type === 'image' ? 'md-image' : undefined,
        });
        const inner = { ...ctx, inLink: true };
        if (n.type === 'image' && n.children.length === 0) a.appendChild(doc.createTextNode('image'));
        else renderInline(doc, a, n.children, inner);
        parent.appendChild(a);
        break;
      }
      default:
        break;
    }
  }
}

/**
 * Does the tree under `root` hold only `elements` with `attributes` (no `on*`, no URL)? An iterative walk,
 * at most `max` nodes. Checks what a hook (highlighter, KaTeX) built before it joins the reply.
 */
function treeAllowed(root, elements, attributes, max = 200_000) {
  const stack = [root];
  let seen = 0;
  while (stack.length) {
    const n = stack.pop();
    if (++seen > max) return false;
    if (n.nodeType === 1) {
      if (!elements.has(String(n.localName).toLowerCase())) return false;
      const attrs = n.attributes;
      if (attrs) {
        for (let i = 0; i < attrs.length; i++) {
          const name = String(attrs[i].name).toLowerCase();
          if (!attributes.has(name)) return false;
        }
      }
    } else if (n.nodeType !== 3 && n.nodeType !== 11) return false;
    const kids = n.childNodes;
    if (kids) for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]);
  }
  return true;
}

/** Every element and attribute a highlighted code block may hold (highlight.js's token spans). */
export const CODE_ELEMENTS = new Set(['span']);
export const CODE_ATTRIBUTES = new Set(['class']);

function renderCode(doc, parent, b, ctx) {
  const wrap = el(doc, 'div', {
    class: 'md-codeblock',
    'data-lang': b.lang || undefined,
    'data-md-partial': b.closed ? undefined : '',
  });
  if (b.lang || ctx.copyButton) {
    const head = el(doc, 'div', { class: 'md-code-head' });
    if (b.lang) {
      const label = el(doc, 'span', { class: 'md-code-lang' });
      label.appendChild(doc.createTextNode(b.lang));
      head.appendChild(label);
    }
    if (ctx.copyButton) {
      const btn = el(doc, 'button', { class: 'md-copy', 'data-md-copy': '', title: t('codeCopyTitle') });
      btn.appendChild(doc.createTextNode(t('codeCopy')));
      head.appendChild(btn);
    }
    wrap.appendChild(head);
  }
  const pre = el(doc, 'pre');
  const code = el(doc, 'code', { class: b.lang ? 'language-' + b.lang : undefined });
  // Only a closed fence is highlighted: a streaming block stays plain until its fence closes.
  let lit = null;
  if (b.closed && b.text) {
    if (ctx.highlight) {
      try {
        lit = ctx.highlight(b.text, b.lang, doc);
      } catch {
        lit = null;
      }
      if (lit && lit.pending === true) {
        wrap.setAttribute('data-md-pending', ''); // the highlighter is still at it: plain for now
        lit = null;
      }
      if (lit && !(lit.nodes && treeAllowed(lit.nodes, CODE_ELEMENTS, CODE_ATTRIBUTES) && lit.nodes.textContent === b.text)) lit = null;
    } else ctx.need('code');
  }
  if (lit) {
    code.setAttribute('class', `${b.lang ? 'language-' + b.lang + ' ' : ''}hljs`);
    code.appendChild(lit.nodes);
  } else code.appendChild(doc.createTextNode(b.text));
  pre.appendChild(code);
  wrap.appendChild(pre);
  parent.appendChild(wrap);
}

/** A formula: KaTeX's nodes through `ctx.math`, else (not loaded, refused, an error) its source as code. */
function renderMath(doc, parent, n, ctx, block) {
  let node = null;
  let pending = false;
  if (ctx.math) {
    try {
      node = ctx.math(n.tex, block || !!n.display, doc);
    } catch {
      node = null;
    }
    if (node && node.pending === true) {
      pending = true; // KaTeX is still at it: the source for now
      node = null;
    }
    if (node && !treeAllowed(node, MATH_ELEMENTS, MATH_ATTRIBUTES)) node = null;
  } else ctx.need('math');
  const wrap = el(doc, block ? 'div' : 'span', {
    class: block ? 'md-math md-math-block' : 'md-math',
    'data-md-pending': pending ? '' : undefined,
  });
  if (node) wrap.appendChild(node);
  else {
    const src = el(doc, 'code', { class: 'md-math-src', title: ctx.math && !pending ? t('mathError') : undefined });
    src.appendChild(doc.createTextNode(n.raw));
    wrap.appendChild(src);
  }
  parent.appendChild(wrap);
}

function renderBlocks(doc, parent, blocks, ctx, tight) {
  for (const b of blocks) {
    switch (b.type) {
      case 'para': {
        if (tight) renderInline(doc, parent, b.inline, ctx);
        else {
          const p = el(doc, 'p');
          renderInline(doc, p, b.inline, ctx);
          parent.appendChild(p);
        }
        break;
      }
      case 'heading': {
        const h = el(doc, 'h' + b.level);
        renderInline(doc, h, b.inline, ctx);
        parent.appendChild(h);
        break;
      }
      case 'code':
        renderCode(doc, parent, b, ctx);
        break;
      case 'math':
        renderMath(doc, parent, b, ctx, true);
        break;
      case 'hr':
        parent.appendChild(el(doc, 'hr'));
        break;
      case 'quote': {
        const q = el(doc, 'blockquote');
        renderBlocks(doc, q, b.children, ctx, false);
        parent.appendChild(q);
        break;
      }
      case 'list': {
        const l = el(doc, b.ordered ? 'ol' : 'ul', { start: b.ordered && b.start !== 1 ? b.start : undefined });
        for (const it of b.items) {
          const li = el(doc, 'li');
          renderBlocks(doc, li, it.children, ctx, !b.loose);
          l.appendChild(li);
        }
        parent.appendChild(l);
        break;
      }
      case 'table': {
        const wrap = el(doc, 'div', { class: 'md-table' });
        const table = el(doc, 'table');
        const thead = el(doc, 'thead');
        const hr = el(doc, 'tr');
        b.headInline.forEach((cell, c) => {
          const th = el(doc, 'th', { align: b.aligns[c] || undefined });
          renderInline(doc, th, cell, ctx);
          hr.appendChild(th);
        });
        thead.appendChild(hr);
        table.appendChild(thead);
        if (b.rowsInline.length > 0) {
          const tbody = el(doc, 'tbody');
          for (const row of b.rowsInline) {
            const tr = el(doc, 'tr');
            row.forEach((cell, c) => {
              const td = el(doc, 'td', { align: b.aligns[c] || undefined });
              renderInline(doc, td, cell, ctx);
              tr.appendChild(td);
            });
            tbody.appendChild(tr);
          }
          table.appendChild(tbody);
        }
        wrap.appendChild(table);
        parent.appendChild(wrap);
        break;
      }
      default:
        break;
    }
  }
}

/**
 * Render Markdown (complete or partial, e.g. mid-stream) as DOM nodes, never through an HTML parser.
 * @param {string} text model output
 * @param {Document} [doc=globalThis.document] document used to create nodes (tests pass a shim)
 * @param {{pills?: boolean, breaks?: boolean, copyButton?: boolean, throwOnError?: boolean,
 *   highlight?: (code: string, lang: string, doc: Document) => ({nodes: DocumentFragment, language: string}|{pending: true}|null),
 *   math?: (tex: string, display: boolean, doc: Document) => Node|{pending: true}, onNeed?: (kind: 'code'|'math') => void}} [opts]
 *   pills: turn `[mm:ss]` stamps outside code and links into seek buttons (default false);
 *   breaks: single newlines inside a paragraph become <br> (default true);
 *   copyButton: add the copy button to code blocks (default true);
 *   throwOnError: rethrow internal errors instead of the plain-text fallback (tests);
 *   highlight: highlights a closed code fence (lib/rich.js: highlight.js in the rich worker); null or a
 *   throw: plain text; `{pending: true}`: plain text for now, the block marked `data-md-pending`;
 *   math: renders a formula (lib/rich.js: KaTeX in the rich worker); a throw: the source as code (titled
 *   mathError); `{pending: true}`: the source for now, untitled, the formula marked `data-md-pending`;
 *   onNeed: told 'code' / 'math' when the text has a closed fence / a formula and that hook is missing
 * @returns {DocumentFragment}
 */
export function renderMarkdown(text, doc = globalThis.document, opts = {}) {
  opts = opts || {};
  if (doc && typeof doc.createElement !== 'function' && Object.keys(opts).length === 0) {
    opts = doc; // renderMarkdown(text, opts)
    doc = globalThis.document;
  }
  const ctx = {
    pills: !!opts.pills,
    breaks: opts.breaks !== false,
    copyButton: opts.copyButton !== false,
    inLink: false,
    highlight: typeof opts.highlight === 'function' ? opts.highlight : null,
    math: typeof opts.math === 'function' ? opts.math : null,
    need: (kind) => {
      if (typeof opts.onNeed === 'function') {
        try {
          opts.onNeed(kind);
        } catch {
          // the page's callback failing must not hide the reply
        }
      }
    },
  };
  const src = String(text ?? '');
  try {
    const frag = doc.createDocumentFragment();
    renderBlocks(doc, frag, parse(src), ctx, false);
    return frag;
  } catch (e) {
    if (opts.throwOnError) throw e; // tests: surface bugs instead of falling back
    // Never let a rendering bug hide a reply: fall back to the plain text.
    const frag = doc.createDocumentFragment();
    const p = doc.createElement('p');
    p.appendChild(doc.createTextNode(src));
    frag.appendChild(p);
    return frag;
  }
}

// Syntax highlighting for code blocks in replies: highlight.js (extension/vendor/highlight/, pinned in
// vendor/package.json) with a subset of its languages. It runs only in the rich worker
// (lib/rich-worker.js, started by lib/rich.js the first time a reply has a closed code fence), never on
// the panel's thread: highlight.js is quadratic on some inputs (a `java` block of 99,000 underscores took
// 53 s), so the page gives each block a time budget and terminates the worker that overruns it.
//
// highlight.js returns an HTML string. It never reaches an HTML parser: `hljsToNodes` reads it with a
// strict converter that accepts only `<span class="hljs-…">` / `<span class="language-…">`, `</span>`
// and text with highlight.js's five escapes (&amp; &lt; &gt; &quot; &#x27;), and answers null on
// anything else — then the block stays plain text. The converted text must also equal the code it was
// given, character for character. In the worker the nodes are built in lib/plain-tree.js's recording
// document and sent to the page as a plain tree; the page builds them again through the same allow-list
// (only <span class>, the same text).
//
// Blocks longer than HIGHLIGHT_MAX (lib/rich-limits.js) stay plain. Auto-detection reads AUTO_SAMPLE
// characters. Results are cached here by (language, code) for the worker's life, and on the page
// (lib/rich.js) by (language, code) and by in-flight job, so a streaming reply re-rendered every frame
// sends a finished block once.

import hljs from '../vendor/highlight/core.min.js';
import bash from '../vendor/highlight/languages/bash.min.js';
import c from '../vendor/highlight/languages/c.min.js';
import cpp from '../vendor/highlight/languages/cpp.min.js';
import csharp from '../vendor/highlight/languages/csharp.min.js';
import css from '../vendor/highlight/languages/css.min.js';
import diff from '../vendor/highlight/languages/diff.min.js';
import dockerfile from '../vendor/highlight/languages/dockerfile.min.js';
import go from '../vendor/highlight/languages/go.min.js';
import ini from '../vendor/highlight/languages/ini.min.js';
import java from '../vendor/highlight/languages/java.min.js';
import javascript from '../vendor/highlight/languages/javascript.min.js';
import json from '../vendor/highlight/languages/json.min.js';
import kotlin from '../vendor/highlight/languages/kotlin.min.js';
import lua from '../vendor/highlight/languages/lua.min.js';
import makefile from '../vendor/highlight/languages/makefile.min.js';
import markdown from '../vendor/highlight/languages/markdown.min.js';
import php from '../vendor/highlight/languages/php.min.js';
import plaintext from '../vendor/highlight/languages/plaintext.min.js';
import powershell from '../vendor/highlight/languages/powershell.min.js';
import python from '../vendor/highlight/languages/python.min.js';
import ruby from '../vendor/highlight/languages/ruby.min.js';
import rust from '../vendor/highlight/languages/rust.min.js';
import scss from '../vendor/highlight/languages/scss.min.js';
import shell from '../vendor/highlight/languages/shell.min.js';
import sql from '../vendor/highlight/languages/sql.min.js';
import swift from '../vendor/highlight/languages/swift.min.js';
import typescript from '../vendor/highlight/languages/typescript.min.js';
import xml from '../vendor/highlight/languages/xml.min.js';
import yaml from '../vendor/highlight/languages/yaml.min.js';
import { HIGHLIGHT_MAX } from './rich-limits.js';

export { HIGHLIGHT_MAX };

const LANGUAGES = {
  bash, c, cpp, csharp, css, diff, dockerfile, go, ini, java, javascript, json, kotlin, lua, makefile, markdown,
  php, plaintext, powershell, python, ruby, rust, scss, shell, sql, swift, typescript, xml, yaml,
};

// A private instance: nothing else on the page can register languages or plugins into it.
const engine = hljs.newInstance();
engine.configure({ ignoreUnescapedHTML: true, throwUnescapedHTML: false });
for (const [name, grammar] of Object.entries(LANGUAGES)) engine.registerLanguage(name, grammar);
// extra fence names models write that highlight.js does not alias itself
engine.registerAliases(['jsx', 'mjs', 'cjs'], { languageName: 'javascript' });
engine.registerAliases(['tsx', 'mts'], { languageName: 'typescript' });
engine.registerAliases(['toml'], { languageName: 'ini' });
engine.registerAliases(['text', 'txt'], { languageName: 'plaintext' });

/** Languages auto-detection may pick (plaintext never wins it). */
const AUTO = Object.keys(LANGUAGES).filter((l) => l !== 'plaintext');

/** Auto-detection reads this much of the code (it runs every grammar: ~15 ms for 2 KB), then the whole
 *  block is highlighted in the language it picked. */
export const AUTO_SAMPLE = 2_000;
const CACHE_MAX = 64;
const MIN_RELEVANCE = 3;

/** Every language name this module highlights (canonical names; aliases resolve to them). */
export const HIGHLIGHT_LANGUAGES = Object.freeze(Object.keys(LANGUAGES));

/** The canonical language for a fence's info name (`py` → `python`), or null if not in the subset. */
export function languageFor(name) {
  if (typeof name !== 'string' || !name) return null;
  const lang = engine.getLanguage(name.toLowerCase());
  if (!lang) return null;
  const hit = Object.keys(LANGUAGES).find((k) => engine.getLanguage(k) === lang);
  return hit || null;
}

const ENTITIES = [['&amp;', '&'], ['&lt;', '<'], ['&gt;', '>'], ['&quot;', '"'], ['&#x27;', "'"]];
const OPEN = '<span class="';
const CLOSE = '</span>';

/** A class list highlight.js writes: `hljs-keyword`, `hljs-title function_`, `language-css`. */
function classOk(cls) {
  if (!cls || cls.length > 80) return false;
  for (let i = 0; i < cls.length; i++) {
    const ch = cls.charCodeAt(i);
    const ok = (ch >= 97 && ch <= 122) || (ch >= 48 && ch <= 57) || ch === 45 || ch === 95 || ch === 32;
    if (!ok) return false;
  }
  return cls.startsWith('hljs-') || cls.startsWith('language-');
}

/**
 * highlight.js's HTML → a DocumentFragment of <span class> and text nodes, or null when the string holds
 * anything but the spans and escapes highlight.js writes. Linear in the string; builds nodes with
 * createElement / createTextNode / setAttribute only.
 * @param {string} html
 * @param {Document} doc
 * @returns {DocumentFragment|null}
 */
export function hljsToNodes(html, doc) {
  if (typeof html !== 'string') return null;
  const frag = doc.createDocumentFragment();
  const stack = [frag];
  let text = '';
  const flush = () => {
    if (text) stack[stack.length - 1].appendChild(doc.createTextNode(text));
    text = '';
  };
  const n = html.length;
  let i = 0;
  while (i < n) {
    const ch = html[i];
    if (ch === '<') {
      flush();
      if (html.startsWith(CLOSE, i)) {
        if (stack.length === 1) return null;
        stack.pop();
        i += CLOSE.length;
      } else if (html.startsWith(OPEN, i)) {
        const start = i + OPEN.length;
        const end = html.indexOf('"', start);
        if (end === -1 || html[end + 1] !== '>') return null;
        const cls = html.slice(start, end);
        if (!classOk(cls) || stack.length > 64) return null;
        const span = doc.createElement('span');
        span.setAttribute('class', cls);
        stack[stack.length - 1].appendChild(span);
        stack.push(span);
        i = end + 2;
      } else return null;
    } else if (ch === '&') {
      const e = ENTITIES.find(([k]) => html.startsWith(k, i));
      if (!e) return null;
      text += e[1];
      i += e[0].length;
    } else if (ch === '>' || ch === '"' || ch === "'") {
      return null; // highlight.js escapes these: a raw one means the string is not its output
    } else {
      const next = nextSpecial(html, i);
      text += html.slice(i, next);
      i = next;
    }
  }
  flush();
  return stack.length === 1 ? frag : null;
}

function nextSpecial(s, i) {
  for (let j = i; j < s.length; j++) {
    const ch = s[j];
    if (ch === '<' || ch === '&' || ch === '>' || ch === '"' || ch === "'") return j;
  }
  return s.length;
}

/** (language + code) → {html, language}; a Map kept in insertion order as a small LRU. */
const cache = new Map();

function highlightHtml(code, lang) {
  const key = `${lang || ''}\u0000${code}`;
  const hit = cache.get(key);
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  let out = null;
  const named = languageFor(lang);
  if (named) {
    out = { html: engine.highlight(code, { language: named, ignoreIllegals: true }).value, language: named };
  } else if (!lang) {
    const sample = code.length > AUTO_SAMPLE ? code.slice(0, AUTO_SAMPLE) : code;
    const r = engine.highlightAuto(sample, AUTO);
    // a weak guess is worse than none: keep low-relevance results plain
    if (r.language && r.relevance >= MIN_RELEVANCE) {
      const html = sample === code ? r.value : engine.highlight(code, { language: r.language, ignoreIllegals: true }).value;
      out = { html, language: r.language };
    }
  }
  cache.set(key, out);
  if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value);
  return out;
}

/**
 * Highlight `code` as `lang` (a fence's info name, e.g. `py`), or detect its language among the subset
 * when `lang` is empty. Unknown languages, long code and anything the converter refuses stay plain.
 * @param {string} code
 * @param {string} lang
 * @param {Document} doc
 * @returns {{nodes: DocumentFragment, language: string} | null} null: show the code as plain text
 */
export function highlightCode(code, lang, doc) {
  if (typeof code !== 'string' || !code || code.length > HIGHLIGHT_MAX) return null;
  let r;
  try {
    r = highlightHtml(code, lang);
  } catch {
    return null;
  }
  if (!r || r.language === 'plaintext') return null;
  const nodes = hljsToNodes(r.html, doc);
  if (!nodes || textOf(nodes) !== code) return null;
  return { nodes, language: r.language };
}

function textOf(node) {
  let out = '';
  const stack = [node];
  while (stack.length) {
    const n = stack.pop();
    if (n.nodeType === 3) out += n.data;
    else for (let i = n.childNodes.length - 1; i >= 0; i--) stack.push(n.childNodes[i]);
  }
  return out;
}

// Tiny DOM builder shared by the side panel and the options page. Text always goes through
// textContent / text nodes: model output and user text never become HTML.

import { t } from '../i18n.js';
import { setLink, ownObjectUrl, revokeOwnObjectUrl } from '../links.js';

const ATTRS = new Set(['role', 'for', 'tabindex', 'spellcheck', 'autocomplete', 'inputmode', 'translate']);

/**
 * h('button', {class: 'x', text: 'Go', testid: 'send', on: {click}}, ...children)
 * Props: class, text, testid (→ data-testid), dataset, on (event map), style (object),
 * aria-* / data-* / role / for / translate / other attributes (set as attributes: `translate: 'no'`
 * is the attribute, not the boolean property), anything else as a property.
 * `href` (any case, or `…:href`) always goes through lib/links.js `setLink`: an address it refuses
 * (`javascript:`, `file:`, `data:`, …) leaves the element without a link; with a `download` prop
 * the page's own object URLs (`ownObjectUrl`) are admitted too.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      const lower = key.toLowerCase();
      if (lower === 'href' || lower.endsWith(':href')) setLink(el, value, { download: typeof props.download === 'string' });
      else if (key === 'class') el.className = value;
      else if (key === 'text') el.textContent = String(value);
      else if (key === 'testid') el.setAttribute('data-testid', value);
      else if (key === 'dataset') for (const [k, v] of Object.entries(value)) { if (v !== undefined && v !== null) el.dataset[k] = String(v); }
      else if (key === 'on') for (const [ev, fn] of Object.entries(value)) el.addEventListener(ev, fn);
      else if (key === 'style') Object.assign(el.style, value);
      else if (key.startsWith('aria-') || key.startsWith('data-') || ATTRS.has(key) || !(key in el)) el.setAttribute(key, value === true ? '' : String(value));
      else el[key] = value;
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/**
 * A catalogue message with nodes in its `$1`…`$9` places: `tNodes('drawerFromDevice', nameSpan)`
 * → `['from ', nameSpan]` in English, `['来自 ', nameSpan]` in Chinese, wherever each language puts
 * it. For data inside the UI's words that must stay an element of its own (a device name marked
 * `translate="no"`). Each node is placed once (a message naming `$1` twice shows it at the last).
 * @param {string} key
 * @param {...(Node|string)} subs
 * @returns {(Node|string)[]} for `h()` or `append()`
 */
export function tNodes(key, ...subs) {
  const marks = subs.map((_, i) => `\u0002${i}\u0003`);
  let rest = t(key, ...marks); // i18n-ok: the caller's key, a literal there (i18n.test.js checks the calls of tNodes too)
  const out = [];
  for (;;) {
    let at = -1;
    let which = -1;
    marks.forEach((m, i) => {
      const j = rest.indexOf(m);
      if (j >= 0 && (at < 0 || j < at)) { at = j; which = i; }
    });
    if (at < 0) break;
    if (at > 0) out.push(rest.slice(0, at));
    out.push(subs[which]);
    rest = rest.slice(at + marks[which].length);
  }
  if (rest) out.push(rest);
  return out;
}

/** Remove every child. */
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** Replace every child. */
export function replaceChildren(el, ...children) {
  clear(el);
  return append(el, children);
}

/** An icon: an inline SVG path built with DOM APIs (no markup strings). */
const ICONS = {
  menu: 'M3 6h18M3 12h18M3 18h18',
  plus: 'M12 5v14M5 12h14',
  gear: 'M12 15a3 3 0 1 0 0-6 3 3 0 0 0 0 6zM19.4 15a1.7 1.7 0 0 0 .3 1.8l.1.1a2 2 0 1 1-2.8 2.8l-.1-.1a1.7 1.7 0 0 0-1.8-.3 1.7 1.7 0 0 0-1 1.5V21a2 2 0 1 1-4 0v-.1a1.7 1.7 0 0 0-1.1-1.5 1.7 1.7 0 0 0-1.8.3l-.1.1a2 2 0 1 1-2.8-2.8l.1-.1a1.7 1.7 0 0 0 .3-1.8 1.7 1.7 0 0 0-1.5-1H3a2 2 0 1 1 0-4h.1a1.7 1.7 0 0 0 1.5-1.1 1.7 1.7 0 0 0-.3-1.8l-.1-.1a2 2 0 1 1 2.8-2.8l.1.1a1.7 1.7 0 0 0 1.8.3H9a1.7 1.7 0 0 0 1-1.5V3a2 2 0 1 1 4 0v.1a1.7 1.7 0 0 0 1 1.5 1.7 1.7 0 0 0 1.8-.3l.1-.1a2 2 0 1 1 2.8 2.8l-.1.1a1.7 1.7 0 0 0-.3 1.8V9a1.7 1.7 0 0 0 1.5 1H21a2 2 0 1 1 0 4h-.1a1.7 1.7 0 0 0-1.5 1z',
  send: 'M22 2 11 13M22 2l-7 20-4-9-9-4 20-7z',
  stop: 'M6 6h12v12H6z',
  page: 'M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8zM14 2v6h6M8 13h8M8 17h8',
  camera: 'M23 19a2 2 0 0 1-2 2H3a2 2 0 0 1-2-2V8a2 2 0 0 1 2-2h4l2-3h6l2 3h4a2 2 0 0 1 2 2zM12 17a4 4 0 1 0 0-8 4 4 0 0 0 0 8z',
  image: 'M3 3h18v18H3zM8.5 10a1.5 1.5 0 1 0 0-3 1.5 1.5 0 0 0 0 3zM21 15l-5-5L5 21',
  x: 'M18 6 6 18M6 6l12 12',
  copy: 'M9 9h11v11H9zM5 15H4a1 1 0 0 1-1-1V4a1 1 0 0 1 1-1h10a1 1 0 0 1 1 1v1',
  edit: 'M12 20h9M16.5 3.5a2.1 2.1 0 0 1 3 3L7 19l-4 1 1-4z',
  trash: 'M3 6h18M8 6V4h8v2M19 6l-1 14H6L5 6',
  refresh: 'M23 4v6h-6M1 20v-6h6M3.5 9a9 9 0 0 1 14.8-3.4L23 10M1 14l4.7 4.4A9 9 0 0 0 20.5 15',
  pin: 'M12 17v5M5 17h14l-2-4V5h1V3H6v2h1v8z',
  save: 'M19 21H5a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2h11l5 5v11a2 2 0 0 1-2 2zM17 21v-8H7v8M7 3v5h8',
  download: 'M21 15v4a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2v-4M7 10l5 5 5-5M12 15V3',
  upload: 'M21 15v4a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2v-4M17 8l-5-5-5 5M12 3v12',
  search: 'M11 19a8 8 0 1 0 0-16 8 8 0 0 0 0 16zM21 21l-4.4-4.4',
};

export function icon(name) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('width', '16');
  svg.setAttribute('height', '16');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  svg.classList.add('icon');
  const path = document.createElementNS(NS, 'path');
  path.setAttribute('d', ICONS[name] || ICONS.x);
  svg.append(path);
  return svg;
}

/** An icon button with an accessible label and a tooltip. */
export function iconButton(name, label, props = {}) {
  return h('button', { type: 'button', class: 'icon-btn', 'aria-label': label, title: label, ...props }, icon(name));
}

/** Copy text to the clipboard; falls back to a hidden textarea when the async API is refused. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const ta = h('textarea', { style: { position: 'fixed', opacity: '0', top: '0' } });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch { ok = false; }
    ta.remove();
    return ok;
  }
}

/** Save text as a file through a Blob URL and an <a download>. */
export function downloadText(filename, text, mime) {
  const blob = new Blob([text], { type: mime || 'application/octet-stream' });
  const url = ownObjectUrl(blob);
  const a = h('a', { href: url, download: filename, style: { display: 'none' } });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => revokeOwnObjectUrl(url), 60_000);
}

/** Read a File as a data URL. */
export function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result));
    r.onerror = () => reject(r.error || new Error(t('uiCouldNotReadFile')));
    r.readAsDataURL(file);
  });
}

/** Read a File as text. */
export function readAsText(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result));
    r.onerror = () => reject(r.error || new Error(t('uiCouldNotReadFile')));
    r.readAsText(file);
  });
}

/** Debounce: the last call wins after `ms` of quiet. */
export function debounce(fn, ms) {
  let t = 0;
  const d = (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
  d.cancel = () => clearTimeout(t);
  d.flush = (...args) => { clearTimeout(t); fn(...args); };
  return d;
}

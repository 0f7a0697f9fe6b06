// A small DOM for node --test suites of the page modules (drawer, transcript, confirms): elements,
// text nodes, attributes, dataset, classList, events that bubble, and querySelector(All) over simple
// selectors (tag, #id, .class, [attr], [attr="v"], :not(…) of those, descendant and child
// combinators), createElementNS (KaTeX's MathML and SVG; `style` is a plain object for its CSSOM
// writes). Enough for `lib/ui/dom.js`'s `h()` and the modules built on it; not a browser.
// Not loaded by the extension.

class FakeEvent {
  constructor(type, init = {}) {
    this.type = type;
    this.bubbles = !!init.bubbles;
    this.cancelable = init.cancelable !== false;
    this.defaultPrevented = false;
    this.target = null;
    this.currentTarget = null;
    this.propagationStopped = false;
    Object.assign(this, init.props || {});
  }
  preventDefault() {
    if (this.cancelable) this.defaultPrevented = true;
  }
  stopPropagation() {
    this.propagationStopped = true;
  }
}

class FakeNode {
  constructor(doc, nodeType, nodeName) {
    this.ownerDocument = doc;
    this.nodeType = nodeType;
    this.nodeName = nodeName;
    this.parentNode = null;
    this.childNodes = [];
    this.listeners = new Map();
  }
  get parentElement() {
    return this.parentNode && this.parentNode.nodeType === 1 ? this.parentNode : null;
  }
  get firstChild() {
    return this.childNodes[0] || null;
  }
  get lastChild() {
    return this.childNodes[this.childNodes.length - 1] || null;
  }
  get children() {
    return this.childNodes.filter((n) => n.nodeType === 1);
  }
  get firstElementChild() {
    return this.children[0] || null;
  }
  get lastElementChild() {
    const c = this.children;
    return c[c.length - 1] || null;
  }
  get nextSibling() {
    if (!this.parentNode) return null;
    const s = this.parentNode.childNodes;
    return s[s.indexOf(this) + 1] || null;
  }
  get isConnected() {
    let n = this;
    while (n.parentNode) n = n.parentNode;
    return n === this.ownerDocument.documentElement || n === this.ownerDocument;
  }
  get textContent() {
    if (this.nodeType === 3) return this.data;
    return this.childNodes.map((c) => c.textContent).join('');
  }
  set textContent(v) {
    if (this.nodeType === 3) {
      this.data = String(v ?? '');
      return;
    }
    for (const c of this.childNodes) c.parentNode = null;
    this.childNodes = [];
    const s = String(v ?? '');
    if (s) this.appendChild(this.ownerDocument.createTextNode(s));
  }
  #adopt(node) {
    if (node.nodeType === 11) {
      const kids = [...node.childNodes];
      node.childNodes = [];
      for (const k of kids) k.parentNode = null;
      return kids;
    }
    if (node.parentNode) node.parentNode.removeChild(node);
    return [node];
  }
  /** A copy of this node (and, with `deep`, its subtree): attributes, style and text; no listeners. */
  cloneNode(deep = false) {
    const doc = this.ownerDocument;
    let copy;
    if (this.nodeType === 3) return doc.createTextNode(this.data);
    if (this.nodeType === 1) {
      copy = this.namespaceURI ? doc.createElementNS(this.namespaceURI, this.localName) : doc.createElement(this.localName);
      for (const [k, v] of this.attrs) copy.setAttribute(k, v);
      Object.assign(copy.style, this.style);
    } else if (this.nodeType === 11) copy = doc.createDocumentFragment();
    else throw new Error(`cloneNode: node type ${this.nodeType}`);
    if (deep) for (const c of this.childNodes) copy.appendChild(c.cloneNode(true));
    return copy;
  }
  appendChild(node) {
    for (const n of this.#adopt(node)) {
      n.parentNode = this;
      this.childNodes.push(n);
    }
    return node;
  }
  insertBefore(node, ref) {
    if (!ref) return this.appendChild(node);
    const nodes = this.#adopt(node);
    const at = this.childNodes.indexOf(ref);
    if (at < 0) throw new Error('insertBefore: the reference node is not a child');
    for (const n of nodes) n.parentNode = this;
    this.childNodes.splice(at, 0, ...nodes);
    return node;
  }
  removeChild(node) {
    const at = this.childNodes.indexOf(node);
    if (at < 0) throw new Error('removeChild: not a child');
    this.childNodes.splice(at, 1);
    node.parentNode = null;
    return node;
  }
  append(...nodes) {
    for (const n of nodes) this.appendChild(typeof n === 'string' ? this.ownerDocument.createTextNode(n) : n);
  }
  prepend(...nodes) {
    const first = this.firstChild;
    for (const n of nodes) this.insertBefore(typeof n === 'string' ? this.ownerDocument.createTextNode(n) : n, first);
  }
  remove() {
    if (this.parentNode) this.parentNode.removeChild(this);
  }
  after(...nodes) {
    const p = this.parentNode;
    if (!p) return;
    const next = this.nextSibling;
    for (const n of nodes) p.insertBefore(typeof n === 'string' ? this.ownerDocument.createTextNode(n) : n, next);
  }
  before(...nodes) {
    const p = this.parentNode;
    if (p) for (const n of nodes) p.insertBefore(typeof n === 'string' ? this.ownerDocument.createTextNode(n) : n, this);
  }
  replaceWith(node) {
    const p = this.parentNode;
    if (!p) return;
    p.insertBefore(node, this);
    p.removeChild(this);
  }
  contains(node) {
    for (let n = node; n; n = n.parentNode) if (n === this) return true;
    return false;
  }
  addEventListener(type, fn) {
    if (!this.listeners.has(type)) this.listeners.set(type, []);
    this.listeners.get(type).push(fn);
  }
  removeEventListener(type, fn) {
    const l = this.listeners.get(type);
    if (l) this.listeners.set(type, l.filter((x) => x !== fn));
  }
  dispatchEvent(ev) {
    ev.target = this;
    for (let n = this; n; n = n.parentNode) {
      ev.currentTarget = n;
      for (const fn of [...(n.listeners.get(ev.type) || [])]) fn.call(n, ev);
      if (!ev.bubbles || ev.propagationStopped) break;
    }
    ev.currentTarget = null;
    return !ev.defaultPrevented;
  }
}

class FakeText extends FakeNode {
  constructor(doc, data) {
    super(doc, 3, '#text');
    this.data = String(data);
  }
}

function datasetKey(attr) {
  return attr.slice(5).replace(/-([a-z])/g, (_, c) => c.toUpperCase());
}
function datasetAttr(key) {
  return `data-${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

const BOOL_PROPS = ['hidden', 'disabled', 'checked', 'multiple', 'required', 'readOnly'];

class FakeElement extends FakeNode {
  constructor(doc, tag, ns = null) {
    super(doc, 1, tag.toUpperCase());
    this.tagName = tag.toUpperCase();
    this.localName = tag.toLowerCase();
    this.namespaceURI = ns;
    this.attrs = new Map();
    this.style = {};
    this._value = '';
    this.files = null;
    const el = this;
    this.dataset = new Proxy({}, {
      get: (_, k) => (typeof k === 'string' ? el.getAttribute(datasetAttr(k)) ?? undefined : undefined),
      set: (_, k, v) => { el.setAttribute(datasetAttr(k), String(v)); return true; },
      deleteProperty: (_, k) => { el.removeAttribute(datasetAttr(k)); return true; },
      has: (_, k) => el.hasAttribute(datasetAttr(k)),
      ownKeys: () => [...el.attrs.keys()].filter((a) => a.startsWith('data-')).map(datasetKey),
      getOwnPropertyDescriptor: (_, k) => (el.hasAttribute(datasetAttr(k)) ? { enumerable: true, configurable: true, value: el.getAttribute(datasetAttr(k)) } : undefined),
    });
    this.classList = {
      add: (...c) => { const s = new Set(el.#classes()); c.forEach((x) => s.add(x)); el.className = [...s].join(' '); },
      remove: (...c) => { el.className = el.#classes().filter((x) => !c.includes(x)).join(' '); },
      toggle: (c, force) => {
        const has = el.#classes().includes(c);
        const want = force === undefined ? !has : !!force;
        if (want && !has) el.classList.add(c);
        if (!want && has) el.classList.remove(c);
        return want;
      },
      contains: (c) => el.#classes().includes(c),
    };
  }
  #classes() {
    return (this.getAttribute('class') || '').split(/\s+/).filter(Boolean);
  }
  get className() {
    return this.getAttribute('class') || '';
  }
  set className(v) {
    this.setAttribute('class', String(v));
  }
  get id() {
    return this.getAttribute('id') || '';
  }
  set id(v) {
    this.setAttribute('id', String(v));
  }
  get innerText() {
    return this.textContent;
  }
  set innerText(v) {
    this.textContent = v;
  }
  get value() {
    if (this.localName === 'textarea' || this.localName === 'input' || this.localName === 'select') return this._value;
    return this.getAttribute('value') ?? '';
  }
  set value(v) {
    this._value = String(v ?? '');
  }
  get type() {
    return this.getAttribute('type') || (this.localName === 'button' ? 'submit' : this.localName === 'input' ? 'text' : '');
  }
  set type(v) {
    this.setAttribute('type', String(v));
  }
  get title() {
    return this.getAttribute('title') || '';
  }
  set title(v) {
    this.setAttribute('title', String(v));
  }
  setAttribute(name, value) {
    this.attrs.set(String(name).toLowerCase(), String(value));
  }
  getAttribute(name) {
    const k = String(name).toLowerCase();
    return this.attrs.has(k) ? this.attrs.get(k) : null;
  }
  hasAttribute(name) {
    return this.attrs.has(String(name).toLowerCase());
  }
  /** `[{name, value}]`, like a NamedNodeMap read by index. */
  get attributes() {
    return [...this.attrs].map(([name, value]) => ({ name, value }));
  }
  removeAttribute(name) {
    this.attrs.delete(String(name).toLowerCase());
  }
  toggleAttribute(name, force) {
    const want = force === undefined ? !this.hasAttribute(name) : !!force;
    if (want) this.setAttribute(name, '');
    else this.removeAttribute(name);
    return want;
  }
  matches(sel) {
    return parseSelectorList(sel).some((complex) => matchComplex(this, complex));
  }
  closest(sel) {
    for (let n = this; n && n.nodeType === 1; n = n.parentNode) if (n.matches(sel)) return n;
    return null;
  }
  querySelectorAll(sel) {
    const list = parseSelectorList(sel);
    const out = [];
    const walk = (n) => {
      for (const c of n.children) {
        if (list.some((complex) => matchComplex(c, complex, this))) out.push(c);
        walk(c);
      }
    };
    walk(this);
    return out;
  }
  querySelector(sel) {
    return this.querySelectorAll(sel)[0] || null;
  }
  focus() {
    this.ownerDocument.activeElement = this;
  }
  blur() {
    if (this.ownerDocument.activeElement === this) this.ownerDocument.activeElement = this.ownerDocument.body;
  }
  select() {}
  scrollIntoView() {}
  click() {
    if (this.disabled) return;
    const ev = new FakeEvent('click', { bubbles: true });
    this.dispatchEvent(ev);
    if (!ev.defaultPrevented && this.localName === 'button' && this.type === 'submit') {
      const form = this.closest('form');
      if (form) form.dispatchEvent(new FakeEvent('submit', { bubbles: true }));
    }
  }
}
for (const p of BOOL_PROPS) {
  Object.defineProperty(FakeElement.prototype, p, {
    get() { return this.hasAttribute(p); },
    set(v) { this.toggleAttribute(p, !!v); },
    configurable: true,
  });
}
// properties `h()` sets as properties (it checks `key in el`), kept as attributes here
for (const p of ['href', 'target', 'rel', 'src', 'alt', 'placeholder', 'accept', 'download', 'name', 'rows', 'maxLength', 'decoding', 'htmlFor']) {
  Object.defineProperty(FakeElement.prototype, p, {
    get() { return this.getAttribute(p) ?? ''; },
    set(v) { this.setAttribute(p, String(v)); },
    configurable: true,
  });
}

// ---- selectors ---------------------------------------------------------------------------------

function parseSelectorList(sel) {
  return splitTop(sel, ',').map((s) => parseComplex(s.trim()));
}

/** Split at `sep` outside brackets, parentheses and quotes. */
function splitTop(s, sep) {
  const out = [];
  let depth = 0;
  let quote = '';
  let cur = '';
  for (const ch of s) {
    if (quote) { if (ch === quote) quote = ''; cur += ch; continue; }
    if (ch === '"' || ch === "'") { quote = ch; cur += ch; continue; }
    if (ch === '[' || ch === '(') depth++;
    if (ch === ']' || ch === ')') depth--;
    if (ch === sep && depth === 0) { out.push(cur); cur = ''; continue; }
    cur += ch;
  }
  out.push(cur);
  return out;
}

/** → [{compound, combinator}] left to right; combinator (' ' or '>') joins to the previous. */
function parseComplex(s) {
  const parts = [];
  let cur = '';
  let depth = 0;
  let quote = '';
  let comb = null;
  const flush = () => {
    if (cur.trim()) {
      parts.push({ compound: parseCompound(cur.trim()), combinator: parts.length ? comb || ' ' : null });
      comb = null;
    }
    cur = '';
  };
  for (const ch of s) {
    if (quote) { if (ch === quote) quote = ''; cur += ch; continue; }
    if (ch === '"' || ch === "'") { quote = ch; cur += ch; continue; }
    if (ch === '[' || ch === '(') depth++;
    if (ch === ']' || ch === ')') depth--;
    if (depth === 0 && (ch === ' ' || ch === '>')) {
      flush();
      if (ch === '>') comb = '>';
      continue;
    }
    cur += ch;
  }
  flush();
  return parts;
}

function parseCompound(s) {
  const tests = [];
  const re = /^(\*|[a-zA-Z][a-zA-Z0-9-]*)|#([\w-]+)|\.([\w-]+)|\[([\w-]+)(?:([~^$*]?=)"?([^"\]]*)"?)?\]|:not\(((?:[^()]|\([^()]*\))*)\)/y;
  let i = 0;
  while (i < s.length) {
    re.lastIndex = i;
    const m = re.exec(s);
    if (!m || m.index !== i || m[0] === '') throw new Error(`fake-dom: unsupported selector "${s}"`);
    if (m[1]) { const tag = m[1].toLowerCase(); if (tag !== '*') tests.push((el) => el.localName === tag); }
    else if (m[2]) tests.push((el) => el.id === m[2]);
    else if (m[3]) tests.push((el) => el.classList.contains(m[3]));
    else if (m[4]) {
      const name = m[4];
      const op = m[5];
      const v = m[6];
      tests.push((el) => {
        const a = el.getAttribute(name);
        if (a === null) return false;
        if (!op) return true;
        if (op === '=') return a === v;
        if (op === '^=') return a.startsWith(v);
        if (op === '$=') return a.endsWith(v);
        if (op === '*=') return a.includes(v);
        if (op === '~=') return a.split(/\s+/).includes(v);
        return false;
      });
    } else if (m[7] !== undefined) {
      const inner = parseCompound(m[7].trim());
      tests.push((el) => !inner(el));
    }
    i += m[0].length;
  }
  return (el) => tests.every((t) => t(el));
}

function matchComplex(el, parts, scope = null) {
  const match = (node, k) => {
    if (!parts[k].compound(node)) return false;
    if (k === 0) return true;
    const comb = parts[k].combinator;
    for (let p = node.parentNode; p && p.nodeType === 1 && p !== scope; p = p.parentNode) {
      if (match(p, k - 1)) return true;
      if (comb === '>') return false;
    }
    return false;
  };
  return match(el, parts.length - 1);
}

// ---- document ----------------------------------------------------------------------------------

class FakeDocument extends FakeNode {
  constructor() {
    super(null, 9, '#document');
    this.ownerDocument = this;
    this.documentElement = new FakeElement(this, 'html');
    this.documentElement.parentNode = this;
    this.childNodes = [this.documentElement];
    this.body = new FakeElement(this, 'body');
    this.documentElement.appendChild(this.body);
    this.activeElement = this.body;
    this.visibilityState = 'visible';
    this.compatMode = 'CSS1Compat'; // standards mode (KaTeX checks it when it loads)
    this.title = '';
  }
  createElement(tag) {
    return new FakeElement(this, tag);
  }
  createElementNS(ns, tag) {
    return new FakeElement(this, tag, ns);
  }
  createTextNode(data) {
    return new FakeText(this, data);
  }
  createDocumentFragment() {
    return new FakeNode(this, 11, '#document-fragment');
  }
  getElementById(id) {
    return this.documentElement.querySelector(`#${id}`);
  }
  querySelector(sel) {
    return this.documentElement.matches(sel) ? this.documentElement : this.documentElement.querySelector(sel);
  }
  querySelectorAll(sel) {
    return this.documentElement.querySelectorAll(sel);
  }
}

/**
 * Install a fresh fake `document` (and `Node`, `Event`, `requestAnimationFrame`, `getComputedStyle`)
 * on globalThis; returns `{document, restore()}`. Animation frames run on the next macrotask.
 */
export function installFakeDom() {
  const names = ['document', 'Node', 'Event', 'requestAnimationFrame', 'cancelAnimationFrame', 'getComputedStyle'];
  const before = Object.fromEntries(names.map((n) => [n, Object.getOwnPropertyDescriptor(globalThis, n)]));
  const document = new FakeDocument();
  const set = (n, v) => Object.defineProperty(globalThis, n, { value: v, configurable: true, writable: true });
  set('document', document);
  set('Node', FakeNode);
  set('Event', FakeEvent);
  set('requestAnimationFrame', (fn) => setTimeout(() => fn(Date.now()), 0));
  set('cancelAnimationFrame', (id) => clearTimeout(id));
  set('getComputedStyle', () => ({ flexDirection: 'column' }));
  return {
    document,
    restore() {
      for (const n of names) {
        if (before[n]) Object.defineProperty(globalThis, n, before[n]);
        else delete globalThis[n];
      }
    },
  };
}

/** Fire an event of `type` at `el` (bubbling); extra fields (e.g. `{key: 'Escape'}`) ride along. */
export function fire(el, type, props = {}) {
  return el.dispatchEvent(new FakeEvent(type, { bubbles: true, props }));
}

/** Shorthand: the element with this data-testid under `root`. */
export function byTestId(root, id) {
  return root.querySelector(`[data-testid="${id}"]`);
}

/** Every element with this data-testid under `root`. */
export function allByTestId(root, id) {
  return root.querySelectorAll(`[data-testid="${id}"]`);
}

// Node trees as plain data, so what highlight.js and KaTeX build in the rich worker (lib/rich-worker.js,
// which has no DOM) can cross to the page by postMessage and be built again there.
//
// In the worker: `recordingDocument()` stands in for `document` — createElement / createElementNS /
// createTextNode / createDocumentFragment, and on elements setAttribute, `className`, a plain `style`
// object (KaTeX's CSSOM writes) and appendChild. Nothing is parsed: it only records calls. `toPlain`
// turns what was built into nested arrays (at most `maxNodes` nodes, else null).
//
// Plain form: a text node is a string; an element (or the root fragment, name `#fragment`) is
// `[name, ns, attrs, styles, children]` with ns 0 (HTML), 1 (MathML) or 2 (SVG), attrs and styles flat
// `[name, value, name, value, …]` lists and children a list of plain nodes.
//
// On the page: `fromPlain(plain, doc, policy)` builds DOM nodes with createElement / createElementNS /
// createTextNode / setAttribute and CSSOM style writes (CSP `style-src 'self'` allows those, not a
// `style` attribute, so one that KaTeX set with setAttribute is left out, as the CSP would drop it) —
// never an HTML parser — and answers null as soon as anything is outside the policy: an element or
// attribute not in its allow-lists (names compared in lower case, `on*` never), a style property not in
// `policy.styles` or a value with anything but lengths, colours and `calc(…)`, more than
// `policy.maxNodes` nodes, a malformed entry.

export const NAMESPACES = Object.freeze([
  'http://www.w3.org/1999/xhtml',
  'http://www.w3.org/1998/Math/MathML',
  'http://www.w3.org/2000/svg',
]);

const FRAGMENT = '#fragment';

class RecordedNode {
  constructor(nodeType) {
    this.nodeType = nodeType;
    this.childNodes = [];
  }
  appendChild(child) {
    if (child.nodeType === 11) {
      for (const c of child.childNodes) this.childNodes.push(c);
      child.childNodes = [];
    } else this.childNodes.push(child);
    return child;
  }
  get textContent() {
    let out = '';
    const stack = [this];
    while (stack.length) {
      const n = stack.pop();
      if (n.nodeType === 3) out += n.data;
      else for (let i = n.childNodes.length - 1; i >= 0; i--) stack.push(n.childNodes[i]);
    }
    return out;
  }
}

class RecordedElement extends RecordedNode {
  constructor(ns, name) {
    super(1);
    this.ns = ns;
    this.localName = name;
    this.attrs = new Map();
    this.style = {};
  }
  setAttribute(name, value) {
    this.attrs.set(String(name), String(value));
  }
  getAttribute(name) {
    return this.attrs.has(name) ? this.attrs.get(name) : null;
  }
  get className() {
    return this.attrs.get('class') ?? '';
  }
  set className(v) {
    this.attrs.set('class', String(v));
  }
}

class RecordedText {
  constructor(data) {
    this.nodeType = 3;
    this.data = String(data);
    this.childNodes = [];
  }
  get textContent() {
    return this.data;
  }
}

/** A stand-in for `document` that records the nodes built through it (the worker's KaTeX and converter). */
export function recordingDocument() {
  return {
    compatMode: 'CSS1Compat', // KaTeX refuses quirks mode
    createElement: (name) => new RecordedElement(0, String(name).toLowerCase()),
    createElementNS: (ns, name) => {
      const i = NAMESPACES.indexOf(ns);
      if (i === -1) throw new Error(`namespace ${ns} not recorded`); // i18n-ok: a programming error in the worker
      return new RecordedElement(i, String(name));
    },
    createTextNode: (data) => new RecordedText(data),
    createDocumentFragment: () => new RecordedNode(11),
  };
}

/**
 * A recorded tree (element, text or fragment) → its plain form, or null when it has more than `maxNodes`
 * nodes. Iterative (KaTeX trees can be deep).
 * @param {object} root
 * @param {number} maxNodes
 * @returns {{plain: any, nodes: number} | null}
 */
export function toPlain(root, maxNodes) {
  let nodes = 0;
  const convert = (n) => {
    if (n.nodeType === 3) return n.data;
    const attrs = [];
    const styles = [];
    if (n.nodeType === 1) {
      for (const [k, v] of n.attrs) attrs.push(k, v);
      for (const k of Object.keys(n.style)) {
        const v = n.style[k];
        if (typeof v === 'string' && v !== '') styles.push(k, v);
      }
    }
    return [n.nodeType === 11 ? FRAGMENT : n.localName, n.nodeType === 1 ? n.ns : 0, attrs, styles, []];
  };
  const out = convert(root);
  if (++nodes > maxNodes) return null;
  const stack = [[root, out]];
  while (stack.length) {
    const [n, p] = stack.pop();
    if (typeof p === 'string') continue;
    for (const c of n.childNodes) {
      if (++nodes > maxNodes) return null;
      const pc = convert(c);
      p[4].push(pc);
      if (typeof pc !== 'string') stack.push([c, pc]);
    }
  }
  return { plain: out, nodes };
}

/**
 * Whether a CSS value is one KaTeX writes: lengths, numbers, colour names and `#hex`, keywords, and
 * `calc(…)` of those. No `url(`, no other function, no quotes, backslashes, `;`, `:` or `!`.
 */
export function styleValueOk(v) {
  if (typeof v !== 'string' || v.length === 0 || v.length > 120) return false;
  let open = false;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    const plain = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) ||
      c === 32 || c === 46 || c === 37 || c === 35 || c === 44 || c === 45 || c === 43 || c === 42 || c === 47;
    if (plain) continue;
    if (c === 40) { // `(`: only as calc(, not nested
      if (open || i < 4 || v.slice(i - 4, i).toLowerCase() !== 'calc') return false;
      open = true;
    } else if (c === 41) { // `)`
      if (!open) return false;
      open = false;
    } else return false;
  }
  return !open;
}

const isList = (x) => Array.isArray(x) && x.length % 2 === 0;

/**
 * A plain tree → DOM nodes in `doc`, or null when anything in it is outside `policy`.
 * @param {any} plain
 * @param {Document} doc
 * @param {{elements: Set<string>, attributes: Set<string>, styles?: Set<string>, maxNodes: number}} policy
 * @param {{nodes?: number}} [count] gets the number of nodes built
 * @returns {Node|null} an element, a text node or a DocumentFragment (a `#fragment` root)
 */
export function fromPlain(plain, doc, policy, count = {}) {
  let nodes = 0;
  const build = (p, root) => {
    if (++nodes > policy.maxNodes) return null;
    if (typeof p === 'string') return doc.createTextNode(p);
    if (!Array.isArray(p) || p.length !== 5) return null;
    const [name, ns, attrs, styles, children] = p;
    if (typeof name !== 'string' || !isList(attrs) || !isList(styles) || !Array.isArray(children)) return null;
    if (name === FRAGMENT) return root && attrs.length === 0 && styles.length === 0 ? doc.createDocumentFragment() : null;
    if (!policy.elements.has(name.toLowerCase()) || !Number.isInteger(ns) || !NAMESPACES[ns]) return null;
    const el = ns === 0 ? doc.createElement(name) : doc.createElementNS(NAMESPACES[ns], name);
    for (let i = 0; i < attrs.length; i += 2) {
      const k = attrs[i];
      const v = attrs[i + 1];
      if (typeof k !== 'string' || typeof v !== 'string') return null;
      const lower = k.toLowerCase();
      if (lower === 'style') continue; // KaTeX's setAttribute('style', …) on SVG / MathML: the CSP drops it too
      if (lower.startsWith('on') || !policy.attributes.has(lower)) return null;
      el.setAttribute(k, v);
    }
    for (let i = 0; i < styles.length; i += 2) {
      const k = styles[i];
      const v = styles[i + 1];
      if (typeof k !== 'string' || !policy.styles?.has(k) || !styleValueOk(v)) return null;
      el.style[k] = v;
    }
    return el;
  };
  const top = build(plain, true);
  if (!top) return null;
  const stack = [[plain, top]];
  while (stack.length) {
    const [p, node] = stack.pop();
    if (typeof p === 'string') continue;
    for (const c of p[4]) {
      const child = build(c, false);
      if (!child) return null;
      node.appendChild(child);
      if (typeof c !== 'string') stack.push([c, child]);
    }
  }
  count.nodes = nodes;
  return top;
}

// node --test extension/lib/markdown.test.js
// A minimal DOM shim (no jsdom): createElement / createTextNode / createDocumentFragment, appendChild,
// setAttribute, textContent, children. Elements are sealed and HTML-string sinks throw, so any attempt by the
// renderer to use them fails the test.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { installFakeDom } from '../test-support/fake-dom.js';
import { HIGHLIGHT_LANGUAGES, highlightCode, hljsToNodes } from './highlight.js';
import { MATH_MAX, loadKatex, renderMath } from './math.js';

import {
  ALLOWED_ATTRIBUTES,
  ALLOWED_ELEMENTS,
  MATH_ATTRIBUTES,
  MATH_ELEMENTS,
  linkify,
  parse,
  parseInline,
  renderMarkdown,
  safeHref,
} from './markdown.js';

// ------------------------------------------------------------------------------------------------ DOM shim

class ShimNode {
  constructor(doc, nodeType, nodeName) {
    this.ownerDocument = doc;
    this.nodeType = nodeType;
    this.nodeName = nodeName;
    this.childNodes = [];
    this.parentNode = null;
  }
  appendChild(child) {
    if (!(child instanceof ShimNode)) throw new TypeError('appendChild: not a node');
    if (child.nodeType === 11) {
      const kids = child.childNodes;
      child.childNodes = [];
      for (const k of kids) {
        k.parentNode = null;
        this.appendChild(k);
      }
      return child;
    }
    if (child.parentNode) child.parentNode.removeChild(child);
    this.childNodes.push(child);
    child.parentNode = this;
    return child;
  }
  removeChild(child) {
    const i = this.childNodes.indexOf(child);
    if (i < 0) throw new Error('removeChild: not a child');
    this.childNodes.splice(i, 1);
    child.parentNode = null;
    return child;
  }
  get firstChild() {
    return this.childNodes[0] ?? null;
  }
  get children() {
    return this.childNodes.filter((n) => n.nodeType === 1);
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

class ShimElement extends ShimNode {
  constructor(doc, tag) {
    super(doc, 1, tag.toUpperCase());
    this.tagName = tag.toUpperCase();
    this.localName = tag;
    this.attrs = new Map();
    Object.seal(this);
  }
  setAttribute(name, value) {
    if (typeof name !== 'string' || !/^[a-z][a-z0-9-]*$/.test(name)) throw new Error(`bad attribute name ${name}`);
    if (typeof value !== 'string') throw new TypeError(`attribute ${name} set to a non-string`);
    this.attrs.set(name, value);
  }
  getAttribute(name) {
    return this.attrs.has(name) ? this.attrs.get(name) : null;
  }
  hasAttribute(name) {
    return this.attrs.has(name);
  }
  get attributes() {
    return [...this.attrs].map(([name, value]) => ({ name, value }));
  }
  set innerHTML(_v) {
    throw new Error('innerHTML used');
  }
  set outerHTML(_v) {
    throw new Error('outerHTML used');
  }
  insertAdjacentHTML() {
    throw new Error('insertAdjacentHTML used');
  }
}

class ShimText extends ShimNode {
  constructor(doc, data) {
    super(doc, 3, '#text');
    this.data = String(data);
    Object.seal(this);
  }
}

class ShimDocument {
  constructor() {
    this.created = [];
  }
  createElement(tag) {
    if (typeof tag !== 'string' || !/^[a-z][a-z0-9]*$/.test(tag)) throw new Error(`bad tag ${tag}`);
    const e = new ShimElement(this, tag);
    this.created.push(e);
    return e;
  }
  createTextNode(data) {
    return new ShimText(this, data);
  }
  createDocumentFragment() {
    return new ShimNode(this, 11, '#document-fragment');
  }
  write() {
    throw new Error('document.write used');
  }
}

// ------------------------------------------------------------------------------------------------ helpers

function render(text, opts = {}) {
  const doc = new ShimDocument();
  const frag = renderMarkdown(text, doc, { throwOnError: true, ...opts });
  return { frag, doc };
}

function* walk(root) {
  const stack = [root];
  while (stack.length) {
    const n = stack.pop();
    yield n;
    for (let i = n.childNodes.length - 1; i >= 0; i--) stack.push(n.childNodes[i]);
  }
}

/** Descendant elements (the root itself excluded). */
const elements = (root) => [...walk(root)].filter((n) => n !== root && n.nodeType === 1);
const byTag = (root, tag) => elements(root).filter((e) => e.localName === tag);

/** The safety invariants every rendering must satisfy. */
function assertSafe(frag, label = '') {
  for (const n of walk(frag)) {
    if (n.nodeType === 3 || n.nodeType === 11) continue;
    assert.equal(n.nodeType, 1, `${label}: unexpected node type`);
    assert.ok(ALLOWED_ELEMENTS.has(n.localName), `${label}: element <${n.localName}> not allowed`);
    for (const { name, value } of n.attributes) {
      assert.ok(!/^on/i.test(name), `${label}: event handler attribute ${name}`);
      assert.ok(ALLOWED_ATTRIBUTES.has(name) || /^data-[a-z0-9-]+$/.test(name), `${label}: attribute ${name}`);
      if (name === 'href') {
        assert.match(value, /^(https?:\/\/[^\s]|mailto:)/, `${label}: href ${value}`);
        assert.ok(!/^\s*(javascript|data|vbscript):/i.test(value), `${label}: dangerous href ${value}`);
      }
    }
    if (n.localName === 'a') {
      assert.equal(n.getAttribute('rel'), 'noopener noreferrer');
      assert.equal(n.getAttribute('target'), '_blank');
      assert.ok(n.getAttribute('href'), `${label}: <a> without href`);
    }
  }
}

function hrefs(frag) {
  return byTag(frag, 'a').map((a) => a.getAttribute('href'));
}

// ------------------------------------------------------------------------------------------------ source

test('the module never uses an HTML-string sink', () => {
  const src = readFileSync(new URL('./markdown.js', import.meta.url), 'utf8');
  assert.doesNotMatch(src, /\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment/);
});

// ------------------------------------------------------------------------------------------------ features

test('paragraphs, headings, emphasis, code, breaks', () => {
  const { frag } = render('# Title\n\nOne **bold** and *em* and ~~gone~~ and `x<y>`.\nNext line  \nhard\n\n###### six ##');
  assertSafe(frag);
  const [h1, p, h6] = frag.children;
  assert.equal(h1.localName, 'h1');
  assert.equal(h1.textContent, 'Title');
  assert.equal(p.localName, 'p');
  assert.deepEqual(
    p.children.map((c) => c.localName),
    ['strong', 'em', 'del', 'code', 'br', 'br'],
  );
  assert.equal(byTag(p, 'code')[0].textContent, 'x<y>');
  assert.equal(h6.localName, 'h6');
  assert.equal(h6.textContent, 'six');
});

test('soft breaks become text with breaks: false', () => {
  const { frag } = render('a\nb', { breaks: false });
  assert.equal(byTag(frag, 'br').length, 0);
  assert.equal(frag.textContent, 'a\nb');
});

test('fenced code: language class, copy hook, unclosed fence', () => {
  const { frag } = render('```js\nconst a = "<b>";\n```\n\n~~~\nplain\n~~~\n\n```python\nopen');
  assertSafe(frag);
  const blocks = byTag(frag, 'div').filter((d) => d.getAttribute('class') === 'md-codeblock');
  assert.equal(blocks.length, 3);
  assert.equal(blocks[0].getAttribute('data-lang'), 'js');
  assert.equal(byTag(blocks[0], 'code')[0].getAttribute('class'), 'language-js');
  assert.equal(byTag(blocks[0], 'code')[0].textContent, 'const a = "<b>";');
  assert.equal(byTag(blocks[0], 'button')[0].getAttribute('data-md-copy'), '');
  assert.equal(blocks[0].hasAttribute('data-md-partial'), false);
  assert.equal(byTag(blocks[1], 'code')[0].hasAttribute('class'), false);
  assert.equal(blocks[2].getAttribute('data-md-partial'), '');
  assert.equal(byTag(blocks[2], 'code')[0].textContent, 'open');
  const noCopy = render('```\nx\n```', { copyButton: false }).frag;
  assert.equal(byTag(noCopy, 'button').length, 0);
});

test('code language is sanitised', () => {
  const { frag } = render('```"><img onerror=x>\nx\n```');
  assertSafe(frag);
  const code = byTag(frag, 'code')[0];
  assert.match(code.getAttribute('class') ?? 'language-', /^language-[A-Za-z0-9_+#.-]*$/);
});

test('block quotes, nested and lazy', () => {
  const { frag } = render('> outer\nlazy\n>> inner\n\nafter');
  assertSafe(frag);
  const q = frag.children[0];
  assert.equal(q.localName, 'blockquote');
  assert.equal(byTag(q, 'blockquote').length, 1);
  assert.equal(frag.children[1].textContent, 'after');
});

test('lists: nested, ordered start, tight and loose', () => {
  const { frag } = render('- a\n- b\n  - c\n    - d\n- e\n\n3. three\n4. four\n\n* loose\n\n* items');
  assertSafe(frag);
  const [ul, ol, ul2] = frag.children;
  assert.equal(ul.localName, 'ul');
  assert.equal(ul.children.length, 3);
  assert.equal(byTag(ul, 'ul').length, 2);
  assert.equal(byTag(ul, 'p').length, 0, 'tight list has no <p>');
  assert.equal(ol.localName, 'ol');
  assert.equal(ol.getAttribute('start'), '3');
  assert.equal(ol.children.length, 2);
  assert.equal(ul2.children.length, 2);
  assert.equal(byTag(ul2, 'p').length, 2, 'loose list wraps paragraphs');
});

test('ordered list nested under a number with two-space indent', () => {
  const { frag } = render('1. first\n  - sub\n2. second');
  const ol = frag.children[0];
  assert.equal(ol.localName, 'ol');
  assert.equal(ol.children.length, 2);
  assert.equal(byTag(ol.children[0], 'ul').length, 1);
});

test('GFM tables with alignment, escaped pipes and ragged rows', () => {
  const { frag } = render('Intro\n| a | b | c |\n|:--|:-:|--:|\n| 1 | x \\| y |\n| 2 | 3 | 4 | 5 |\n\nafter');
  assertSafe(frag);
  const table = byTag(frag, 'table')[0];
  assert.ok(table);
  const ths = byTag(table, 'th');
  assert.deepEqual(ths.map((t) => t.getAttribute('align')), ['left', 'center', 'right']);
  const rows = byTag(byTag(table, 'tbody')[0], 'tr');
  assert.equal(rows.length, 2);
  assert.deepEqual(rows[0].children.map((c) => c.textContent), ['1', 'x | y', '']);
  assert.deepEqual(rows[1].children.map((c) => c.textContent), ['2', '3', '4']);
  assert.equal(frag.children[0].textContent, 'Intro');
});

test('horizontal rules', () => {
  const { frag } = render('a\n\n---\n\n* * *\n___');
  assert.equal(byTag(frag, 'hr').length, 3);
});

test('links, autolinks, bare URLs', () => {
  const { frag } = render(
    'See [docs](https://example.com/a?b=1&c=2 "Title") and <https://x.org> and <me@example.com> and ' +
      'https://en.wikipedia.org/wiki/Foo_(bar). Also (https://y.com/z).',
  );
  assertSafe(frag);
  assert.deepEqual(hrefs(frag), [
    'https://example.com/a?b=1&c=2',
    'https://x.org/',
    'mailto:me@example.com',
    'https://en.wikipedia.org/wiki/Foo_(bar)',
    'https://y.com/z',
  ]);
  assert.equal(byTag(frag, 'a')[0].getAttribute('title'), 'Title');
});

test('images become links and never load', () => {
  const { frag } = render('![a cat](https://img.example/cat.png) ![](http://x/y.png) [![badge](https://b/s.svg)](https://c/)');
  assertSafe(frag);
  const as = byTag(frag, 'a');
  assert.deepEqual(as.map((a) => a.getAttribute('href')), ['https://img.example/cat.png', 'http://x/y.png', 'https://c/']);
  assert.equal(as[0].getAttribute('class'), 'md-image');
  assert.equal(as[0].textContent, 'a cat');
  assert.equal(as[1].textContent, 'image');
  assert.equal(as[2].textContent, 'badge');
  assert.equal(byTag(as[2], 'a').length, 0, 'no anchor inside an anchor');
});

test('nested brackets in link text', () => {
  const { frag } = render('[a [b] c](https://x.com) and [[d]](https://y.com)');
  assertSafe(frag);
  const as = byTag(frag, 'a');
  assert.deepEqual(as.map((a) => a.textContent), ['a [b] c', '[d]']);
});

test('no link inside a link', () => {
  const { frag } = render('[see https://inner.com and [x](https://b.com)](https://a.com)');
  assertSafe(frag);
  for (const a of byTag(frag, 'a')) assert.equal(byTag(a, 'a').length, 0);
});

test('CJK emphasis next to punctuation', () => {
  const { frag } = render('**粗体：**后文，以及前文**：粗体**');
  assert.deepEqual(byTag(frag, 'strong').map((s) => s.textContent), ['粗体：', '：粗体']);
});

test('snake_case stays literal', () => {
  const { frag } = render('call snake_case_name and __init__ here');
  assert.equal(byTag(frag, 'em').length, 0);
  assert.equal(frag.textContent, 'call snake_case_name and init here');
});

test('entities and escapes', () => {
  const { frag } = render('a &amp; b &lt;i&gt; \\*not em\\* &#x1F600; &bogus;');
  assert.equal(frag.textContent, 'a & b <i> *not em* 😀 &bogus;');
  assert.equal(byTag(frag, 'em').length, 0);
  assert.equal(byTag(frag, 'i').length, 0);
});

// ------------------------------------------------------------------------------------------------ pills

test('pills: outside code and links only', () => {
  const src = 'Intro [00:05] and [1:02:03]\n\n`[00:07]` and [00:08](https://x.com) and [[00:09] x](https://y.com)\n\n```\n[00:10]\n```\n\n- **[01:00–01:30]** range';
  const { frag } = render(src, { pills: true });
  assertSafe(frag);
  const pills = byTag(frag, 'button').filter((b) => b.getAttribute('class') === 'md-pill');
  assert.deepEqual(
    pills.map((b) => [b.textContent, b.getAttribute('data-seconds'), b.getAttribute('data-end')]),
    [
      ['00:05', '5', null],
      ['1:02:03', '3723', null],
      ['01:00–01:30', '60', '90'],
    ],
  );
  for (const a of byTag(frag, 'a')) assert.equal(byTag(a, 'button').length, 0);
  assert.equal(byTag(render(src).frag, 'button').filter((b) => b.getAttribute('class') === 'md-pill').length, 0);
});

// ------------------------------------------------------------------------------------------------ safeHref

test('safeHref allows only http, https and mailto', () => {
  assert.equal(safeHref('https://a.com/x y'), 'https://a.com/x%20y');
  assert.equal(safeHref('HTTP://A.COM'), 'http://a.com/');
  assert.equal(safeHref('mailto:a@b.c'), 'mailto:a@b.c');
  for (const bad of [
    'javascript:alert(1)',
    'JaVaScRiPt:alert(1)',
    '  javascript:alert(1)',
    '&#106;avascript:alert(1)',
    '&#x6A;avascript:alert(1)',
    'java\tscript:alert(1)',
    'java\nscript:alert(1)',
    '\u0000javascript:alert(1)',
    'javascript&colon;alert(1)',
    'data:text/html;base64,PHNjcmlwdD4=',
    'vbscript:msgbox',
    'file:///etc/passwd',
    '//evil.com',
    '/relative',
    'relative/path',
    '#frag',
    '',
    'http://',
    'https:',
    'chrome-extension://abc/x.html',
  ]) {
    assert.equal(safeHref(bad), null, bad);
  }
});

test('linkify trims trailing punctuation and stops at CJK punctuation', () => {
  assert.deepEqual(linkify('见https://a.com/b。然后'), [
    { text: '见' },
    { text: 'https://a.com/b', href: 'https://a.com/b' },
    { text: '。然后' },
  ]);
  assert.deepEqual(linkify('xhttps://a.com'), [{ text: 'xhttps://a.com' }]);
  assert.deepEqual(linkify('go to https://a.com/x).'), [
    { text: 'go to ' },
    { text: 'https://a.com/x', href: 'https://a.com/x' },
    { text: ').' },
  ]);
});

// ------------------------------------------------------------------------------------------------ hostile

const HOSTILE = [
  '<script>alert(1)</script>',
  '<img src=x onerror=alert(1)>',
  '<a href="javascript:alert(1)">x</a>',
  '<iframe src="https://evil"></iframe><style>*{}</style><svg onload=alert(1)>',
  '[x](javascript:alert(1))',
  '[x](JaVaScRiPt:alert(1))',
  '[x](  javascript:alert(1))',
  '[x](<javascript:alert(1)>)',
  '[x](&#106;avascript:alert(1))',
  '[x](&#x6a;avascript:alert(1))',
  '[x](javascript&colon;alert(1))',
  '[x](java\\script:alert(1))',
  '[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)',
  '![x](data:image/svg+xml,<svg onload=alert(1)>)',
  '![x](javascript:alert(1))',
  '[x](vbscript:msgbox(1))',
  '[x](file:///etc/passwd)',
  '[x](//evil.com)',
  '<javascript:alert(1)>',
  '<data:text/html,xx>',
  '[x](https://ok.com "t\\" onmouseover=\\"alert(1)")',
  '[x](https://ok.com" onmouseover="alert(1))',
  '[a [b [c [d](javascript:x)]]](https://ok.com)',
  '[[[[[[[[[[x]]]]]]]]]](javascript:x)',
  '```"><script>alert(1)</script>\ncode\n```',
  '| <b>a</b> | b |\n|---|---|\n| [x](javascript:1) | <img src=x> |',
  '> <script>\n> - [x](javascript:1)',
  '- [x](javascript:1)\n  - ![y](data:,z)',
  '&lt;script&gt;alert(1)&lt;/script&gt;',
  '`<script>` **<b onclick=x>**',
  'https://ok.com/"><script>alert(1)</script>',
  '[click](https://ok.com/\u0000javascript:x)',
];

test('hostile inputs: only allowed elements and attributes, no dangerous hrefs', () => {
  for (const src of HOSTILE) {
    for (const pills of [false, true]) {
      const { frag, doc } = render(src, { pills });
      assertSafe(frag, src);
      for (const e of doc.created) assert.ok(ALLOWED_ELEMENTS.has(e.localName), `${src}: created <${e.localName}>`);
    }
  }
});

test('raw HTML shows as text', () => {
  const { frag } = render('<script>alert(1)</script> <img src=x onerror=alert(1)>');
  assert.equal(frag.textContent, '<script>alert(1)</script> <img src=x onerror=alert(1)>');
  assert.equal(byTag(frag, 'script').length, 0);
  assert.equal(byTag(frag, 'img').length, 0);
});

test('rejected links show their source as text', () => {
  for (const src of ['[x](javascript:alert(1))', '[x](  javascript:alert(1))', '[x](data:text/html,hi)']) {
    const { frag } = render(src);
    assert.equal(byTag(frag, 'a').length, 0, src);
    assert.equal(frag.textContent, src);
  }
  const { frag } = render('[x](JaVaScRiPt:alert(1))');
  assert.equal(frag.textContent, '[x](JaVaScRiPt:alert(1))');
});

test('a mixed-case or entity-encoded scheme never becomes a link', () => {
  const { frag } = render('[a](JAVASCRIPT:x) [b](&#74;avascript:x) [c](java&#x0A;script:x) [d](\\javascript:x)');
  assert.equal(byTag(frag, 'a').length, 0);
});

// ------------------------------------------------------------------------------------------------ partial / streaming

test('every prefix of a rich message renders without throwing', () => {
  const msg =
    '# Notes [00:05]\n\nSome **bold _nested_ text** and `code` and [a link](https://x.com/a_(b) "t").\n\n' +
    '| col | val |\n|:--|--:|\n| a | **1** |\n| b | 2 |\n\n' +
    '```js\nconst x = `tpl`;\n```\n\n> quote\n> > deeper\n\n1. one\n   - nested [01:02]\n2. two\n\n---\n' +
    '![img](https://i.example/x.png) <https://auto.link> ~~strike~~ 中文**粗体**。';
  for (let i = 0; i <= msg.length; i++) {
    const { frag } = render(msg.slice(0, i), { pills: true });
    assertSafe(frag, `prefix ${i}`);
  }
});

test('unclosed constructs', () => {
  for (const src of [
    '```js\nconst a = 1;',
    '| a | b |\n|--',
    '| a | b |\n|---|---|\n| 1',
    '**bold',
    '*em',
    '~~strike',
    '`code',
    '``code`',
    '[link](https://x.com',
    '[link](',
    '[link',
    '![img](',
    '<https://x.com',
    '> quote\n- item\n  ```\n  code',
    '1. a\n   ```\n   code',
    '- ',
    '1.',
    '#',
    '&#',
    '\\',
  ]) {
    const { frag } = render(src);
    assertSafe(frag, src);
  }
  assert.equal(render('**bold').frag.textContent, '**bold');
  assert.equal(render('[link](https://x.com').frag.textContent, '[link](https://x.com');
});

// ------------------------------------------------------------------------------------------------ size / complexity

test('pathological inputs of 50K chars finish with sane output', () => {
  const N = 50_000;
  const cases = {
    openBrackets: '['.repeat(N),
    closeBrackets: ']'.repeat(N),
    linkOpeners: '[a]('.repeat(N / 4),
    bracketParen: '[]('.repeat(N / 3),
    parens: '[x](' + '('.repeat(N),
    stars: '*'.repeat(N),
    starWords: '*a '.repeat(N / 3),
    strongOpeners: '**a '.repeat(N / 4),
    underscores: '_a_'.repeat(N / 3) + '_',
    mixedDelims: '*_~'.repeat(N / 3),
    backticks: 'a' + '`'.repeat(N),
    backtickLadder: Array.from({ length: 300 }, (_, i) => '`'.repeat(i + 1) + 'x').join(''),
    lts: '<a:'.repeat(N / 3),
    emails: '<a@b'.repeat(N / 4),
    amps: '&#'.repeat(N / 2),
    quotes: '>'.repeat(N) + ' x',
    nestedLists: Array.from({ length: 200 }, (_, i) => ' '.repeat(i * 2) + '- x').join('\n'),
    listMarkers: '- '.repeat(N / 2) + 'x',
    pipes: '|'.repeat(N) + '\n' + '|-'.repeat(N / 2),
    hashes: '#'.repeat(N),
    headingSpaces: '# ' + ' '.repeat(N) + 'x ' + '#'.repeat(10),
    fences: '```\n'.repeat(N / 4),
    spaces: ' '.repeat(N) + 'x',
    urls: 'https://a.com/'.repeat(N / 14),
    urlParens: 'https://a.com/' + ')'.repeat(N),
    pillsLike: '[00:0'.repeat(N / 5),
    escapes: '\\'.repeat(N),
    newlines: 'a  \n'.repeat(N / 4),
  };
  for (const [name, src] of Object.entries(cases)) {
    const { frag } = render(src, { pills: true });
    assertSafe(frag, name);
    assert.ok(frag.childNodes.length >= 1, name);
  }
  // Shape checks on a few: literal text survives.
  assert.equal(render(cases.openBrackets).frag.textContent, cases.openBrackets);
  assert.equal(byTag(render(cases.stars).frag, 'hr').length, 1); // a thematic break
  assert.equal(render(cases.closeBrackets).frag.textContent, cases.closeBrackets);
  assert.equal(render(cases.spaces).frag.textContent, 'x');
  assert.equal(render(cases.backticks).frag.textContent, cases.backticks);
});

test('100K-char realistic message renders fully', () => {
  const chunk =
    '## Section [00:05]\n\nText with **bold**, *em*, `code`, [link](https://ex.com/p) and https://bare.com/x.\n\n' +
    '- item one\n- item two\n  - nested\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```js\nlet x = 1;\n```\n\n> quote\n\n';
  const src = chunk.repeat(Math.ceil(100_000 / chunk.length));
  assert.ok(src.length >= 100_000);
  const { frag } = render(src, { pills: true });
  assertSafe(frag);
  const reps = Math.ceil(100_000 / chunk.length);
  assert.equal(byTag(frag, 'h2').length, reps);
  assert.equal(byTag(frag, 'table').length, reps);
  assert.equal(byTag(frag, 'pre').length, reps);
  assert.equal(hrefs(frag).length, reps * 2);
});

test('deep emphasis nesting is capped, not a stack overflow', () => {
  const src = '*'.repeat(20_000) + 'x' + '*'.repeat(20_000);
  const { frag } = render(src);
  assertSafe(frag);
  assert.ok(frag.textContent.includes('x'));
});

// ------------------------------------------------------------------------------------------------ fuzz

test('random markdown-ish input always satisfies the invariants', () => {
  let seed = 0x9e3779b9;
  const rand = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 4294967296;
  };
  const atoms = [
    '*', '**', '_', '__', '~~', '`', '```', '[', ']', '(', ')', '![', '<', '>', '\n', '\n\n', ' ', '  ', '#', '- ',
    '1. ', '|', '---', '\\', '&#106;', '&amp;', 'javascript:', 'JaVaScRiPt:', 'data:', 'https://x.com', 'mailto:a@b',
    'a', 'b', '中', '😀', '"', "'", 'onerror=', '<script>', '[00:05]', '1:02', '\t', '\r\n', ':--', '> ',
  ];
  for (let k = 0; k < 400; k++) {
    let s = '';
    const n = 1 + Math.floor(rand() * 60);
    for (let j = 0; j < n; j++) s += atoms[Math.floor(rand() * atoms.length)];
    const { frag } = render(s, { pills: rand() < 0.5 });
    assertSafe(frag, JSON.stringify(s));
  }
});

test('parse and parseInline are exported for tests and never throw on junk', () => {
  assert.ok(Array.isArray(parse('')));
  assert.ok(Array.isArray(parse(null)));
  assert.deepEqual(parseInline(''), []);
  assert.deepEqual(parseInline('x'), [{ type: 'text', text: 'x' }]);
  const { frag } = render(undefined);
  assert.equal(frag.textContent, '');
});

test('renderMarkdown(text, opts) form uses globalThis.document', () => {
  const saved = globalThis.document;
  globalThis.document = new ShimDocument();
  try {
    const frag = renderMarkdown('[00:05]', { pills: true });
    assert.equal(byTag(frag, 'button').length, 1);
  } finally {
    if (saved === undefined) delete globalThis.document;
    else globalThis.document = saved;
  }
});

// ------------------------------------------------------------------------------------------------ math syntax
// Without a math hook a formula renders as its source in <code class="md-math-src"> (what shows while KaTeX
// loads), which lets these tests read what the parser took as math.

const mathSources = (frag) => byTag(frag, 'code').filter((c) => c.getAttribute('class') === 'md-math-src').map((c) => c.textContent);

test('inline math: $…$ needs no blank inside its dollars and no digit after the closing one', () => {
  assert.deepEqual(mathSources(render('Euler: $e^{i\\pi}+1=0$ and $x$.').frag), ['$e^{i\\pi}+1=0$', '$x$']);
  for (const text of ['$5 and $10', 'costs $5, or $6.50 with tax', '$ x$', '$x $', 'from $5-$10', '$x$5', '$$$x$$$', 'a $\nb$']) {
    const { frag } = render(text);
    assert.deepEqual(mathSources(frag), [], text);
    assert.equal(frag.textContent, text.replace('\n', ''), text);
  }
  // a bare `$` inside is not TeX: the formula closes at the next dollar only
  assert.deepEqual(mathSources(render('$5 and $10. Euler: $e$').frag), ['$e$']);
  assert.deepEqual(mathSources(render('price \\$5 and $a\\$b$').frag), ['$a\\$b$']);
  assert.equal(render('price \\$5').frag.textContent, 'price $5');
});

test('inline math: \\(…\\), $$…$$ and \\[…\\]; escapes and emphasis do not apply inside', () => {
  const ast = parseInline('a \\(x_1 * y_2\\) b $$\\sum_i *i*$$ c \\[z\\]');
  const math = ast.filter((n) => n.type === 'math');
  assert.deepEqual(math.map((m) => [m.tex, m.display]), [['x_1 * y_2', false], ['\\sum_i *i*', true], ['z', true]]);
  assert.equal(ast.some((n) => n.type === 'em'), false);
  // unclosed: the escapes mean what they always did
  assert.equal(render('\\(not math').frag.textContent, '(not math');
  assert.equal(render('\\[1\\] ref').frag.textContent.includes('1'), true);
});

test('no math inside code spans or code blocks', () => {
  const { frag } = render('`$x$` and ``\\(y\\)``\n\n```\n$$z$$\n\\[w\\]\n```');
  assert.deepEqual(mathSources(frag), []);
  assert.deepEqual(byTag(frag, 'code').map((c) => c.textContent), ['$x$', '\\(y\\)', '$$z$$\n\\[w\\]']);
  // a formula never spans a code span
  assert.deepEqual(mathSources(render('$a `$` b$').frag), []);
});

test('display math blocks: $$ … $$ and \\[ … \\] on their own lines, also mid-paragraph; unclosed stays text', () => {
  const blocks = parse('Formula:\n$$\na^2 + b^2\n= c^2\n$$\nafter\n\n\\[ x \\]\n\n$$ y $$');
  assert.deepEqual(blocks.map((b) => b.type), ['para', 'math', 'para', 'math', 'math']);
  assert.equal(blocks[1].tex, 'a^2 + b^2\n= c^2');
  assert.deepEqual([blocks[3].tex, blocks[4].tex], ['x', 'y']);
  const { frag } = render('$$\nx');
  assert.equal(byTag(frag, 'div').filter((d) => /md-math/.test(d.getAttribute('class') ?? '')).length, 0);
  assert.equal(frag.textContent, '$$x');
  // two formulas on one line are inline math in a paragraph, not one block
  assert.deepEqual(parse('$$a$$ and $$b$$').map((b) => b.type), ['para']);
  // a blank line ends the search for the closer
  assert.deepEqual(parse('$$\nx\n\ny\n$$').map((b) => [b.type, b.text]), [['para', '$$\nx'], ['para', 'y'], ['para', '$$']]);
  // inside list items and quotes
  assert.equal(parse('- item\n\n  $$\n  x\n  $$')[0].items[0].children[1].type, 'math');
  assert.equal(parse('> $$\n> x\n> $$')[0].children[0].type, 'math');
});

test('onNeed: asked for the highlighter on a closed fence and KaTeX on a formula, only when missing', () => {
  const asked = (text, opts = {}) => {
    const kinds = [];
    render(text, { ...opts, onNeed: (k) => kinds.push(k) });
    return kinds;
  };
  assert.deepEqual(asked('```py\nx\n```'), ['code']);
  assert.deepEqual(asked('```py\nx'), [], 'a streaming (unclosed) fence is not highlighted yet');
  assert.deepEqual(asked('$x$ and $$y$$'), ['math', 'math']);
  assert.deepEqual(asked('plain $5 and $10'), []);
  assert.deepEqual(asked('```py\nx\n```', { highlight: () => null }), []);
  // a throwing callback does not hide the reply
  const { frag } = render('$x$', { onNeed: () => { throw new Error('page bug'); } });
  assert.equal(frag.textContent, '$x$');
});

// ------------------------------------------------------------------------------------------------ highlighting and KaTeX
// The real vendored highlight.js and KaTeX, building nodes in test-support/fake-dom.js's document (KaTeX
// creates nodes in the global document).

function withDom(fn) {
  const dom = installFakeDom();
  try {
    return fn(dom.document);
  } finally {
    dom.restore();
  }
}

// These tests call the libraries directly (as the rich worker does), on this thread: lib/rich.test.js covers
// the worker, its budget and the page's rebuilding of what it answers.
await loadKatex();
const HOOKS = { highlight: highlightCode, math: renderMath };

function renderRich(doc, text, opts = {}) {
  return renderMarkdown(text, doc, { throwOnError: true, ...HOOKS, ...opts });
}

/** The safety invariants, with KaTeX's subtree held to MATH_ELEMENTS / MATH_ATTRIBUTES. */
function assertRichSafe(frag, label = '') {
  const stack = [[frag, false]];
  while (stack.length) {
    const [n, inMath] = stack.pop();
    if (n.nodeType === 1) {
      const name = n.localName;
      assert.ok(!['script', 'iframe', 'style', 'img', 'object', 'embed', 'a', 'link', 'foreignobject', 'image', 'use'].includes(name) || (name === 'a' && !inMath), `${label}: <${name}>`);
      assert.ok((inMath ? MATH_ELEMENTS : ALLOWED_ELEMENTS).has(name), `${label}: element <${name}> not allowed${inMath ? ' in math' : ''}`);
      for (const { name: attr, value } of n.attributes) {
        assert.ok(!/^on/i.test(attr), `${label}: event handler attribute ${attr}`);
        assert.ok(!/^\s*(javascript|data|vbscript):/i.test(value), `${label}: ${attr}="${value}"`);
        if (inMath) assert.ok(MATH_ATTRIBUTES.has(attr.toLowerCase()), `${label}: attribute ${attr} in math`);
        else assert.ok(ALLOWED_ATTRIBUTES.has(attr) || /^data-[a-z0-9-]+$/.test(attr), `${label}: attribute ${attr}`);
      }
    }
    const math = inMath || (n.nodeType === 1 && /^katex(-display)?$/.test(n.getAttribute('class') ?? ''));
    for (const c of n.childNodes) stack.push([c, math]);
  }
}

const byClass = (root, cls) => elements(root).filter((e) => (e.getAttribute('class') ?? '').split(' ').includes(cls));

test('a python block: hljs token spans, the language label, Copy, the code text unchanged', () => withDom((doc) => {
  const code = 'def greet(name):\n    return f"hi {name}" if name else None  # <b>&</b>';
  const frag = renderRich(doc, '```python\n' + code + '\n```');
  assertRichSafe(frag);
  const block = byClass(frag, 'md-codeblock')[0];
  assert.equal(byClass(block, 'md-code-lang')[0].textContent, 'python');
  const copy = byClass(block, 'md-copy')[0];
  assert.equal(copy.textContent, 'Copy');
  assert.equal(copy.getAttribute('title'), 'Copy code');
  const el = byTag(block, 'code')[0];
  assert.equal(el.getAttribute('class'), 'language-python hljs');
  assert.equal(el.textContent, code);
  assert.deepEqual(byClass(el, 'hljs-keyword').map((k) => k.textContent).slice(0, 2), ['def', 'return']);
  assert.equal(byClass(el, 'hljs-comment')[0].textContent, '# <b>&</b>');
}));

test('unknown languages stay plain; no language is detected among the subset or left plain', () => withDom((doc) => {
  const plain = renderRich(doc, '```brainfuck\n+[>+<-]\n```');
  assert.equal(elements(byTag(plain, 'code')[0]).length, 0);
  assert.equal(byClass(plain, 'md-code-lang')[0].textContent, 'brainfuck');
  const auto = renderRich(doc, '```\n{\n  "a": 1,\n  "b": [true, null]\n}\n```');
  assert.ok(byClass(auto, 'hljs-attr').length > 0, 'JSON detected');
  assert.equal(byClass(auto, 'md-code-lang').length, 0, 'a guess is not labelled');
  const prose = renderRich(doc, '```\njust some words here\n```');
  assert.equal(elements(byTag(prose, 'code')[0]).length, 0);
  // a streaming block stays plain until its fence closes
  const open = renderRich(doc, '```python\ndef f(): pass');
  assert.equal(elements(byTag(open, 'code')[0]).length, 0);
}));

const HOSTILE_CODE = '<img src=x onerror=alert(1)></span><script>alert(1)</script><span class="hljs-x" onclick="y">&lt;&#x27;"\'</span>';

test('hostile code in every language: only hljs spans and text, the code text exactly', () => withDom((doc) => {
  for (const lang of [...HIGHLIGHT_LANGUAGES, 'html', 'js', 'sh', '']) {
    for (const body of [HOSTILE_CODE, `x = "${HOSTILE_CODE}" # ${HOSTILE_CODE}\n// ${HOSTILE_CODE}`]) {
      const frag = renderRich(doc, '```' + lang + '\n' + body + '\n```');
      assertRichSafe(frag, lang);
      const code = byTag(frag, 'code')[0];
      assert.equal(code.textContent, body, lang);
      for (const e of elements(code)) {
        assert.equal(e.localName, 'span', lang);
        assert.deepEqual(e.attributes.map((a) => a.name), ['class'], lang);
        assert.match(e.getAttribute('class'), /^(hljs|language)-[a-z0-9_ -]*$/, lang);
      }
    }
  }
}));

test('a fence whose language is "><script> is sanitised and labelled as text', () => withDom((doc) => {
  const frag = renderRich(doc, '```"><script>alert(1)</script>\nx\n```');
  assertRichSafe(frag);
  assert.equal(byTag(frag, 'script').length, 0);
  const label = byClass(frag, 'md-code-lang')[0];
  assert.doesNotMatch(label.textContent, /[<>"]/);
  assert.match(byTag(frag, 'code')[0].getAttribute('class'), /^language-[A-Za-z0-9_+#.-]*( hljs)?$/);
}));

test('hljsToNodes accepts only hljs spans and its five escapes', () => withDom((doc) => {
  const ok = hljsToNodes('<span class="hljs-title function_">f</span>(&lt;&gt;&amp;&quot;&#x27;)', doc);
  assert.equal(ok.textContent, 'f(<>&"\')');
  assert.equal(elements(ok)[0].getAttribute('class'), 'hljs-title function_');
  for (const bad of [
    '<img src=x onerror=alert(1)>',
    '<span class="hljs-x" onclick="y">a</span>',
    '<span class="evil">a</span>',
    '<span class="hljs-x">a',
    '</span>',
    '<span class=hljs-x>a</span>',
    '<script>alert(1)</script>',
    'a &#60; b',
    'a &nbsp; b',
    'a > b',
    'say "hi"',
    '<span class="hljs-x&quot; onclick=&quot;y">a</span>',
    '<span class="hljs-X">a</span>',
  ]) assert.equal(hljsToNodes(bad, doc), null, bad);
}));

test('a highlighter that returns anything but spans, or other text, leaves the code plain', () => withDom((doc) => {
  const code = 'x = 1';
  for (const highlight of [
    (c, l, d) => { const f = d.createDocumentFragment(); const a = d.createElement('a'); a.setAttribute('href', 'javascript:alert(1)'); a.appendChild(d.createTextNode(c)); f.appendChild(a); return { nodes: f, language: 'x' }; },
    (c, l, d) => { const f = d.createDocumentFragment(); const s = d.createElement('span'); s.setAttribute('onclick', 'x'); s.appendChild(d.createTextNode(c)); f.appendChild(s); return { nodes: f, language: 'x' }; },
    (c, l, d) => { const f = d.createDocumentFragment(); f.appendChild(d.createTextNode('other')); return { nodes: f, language: 'x' }; },
    () => { throw new Error('boom'); },
  ]) {
    const frag = renderRich(doc, '```\n' + code + '\n```', { highlight });
    const el = byTag(frag, 'code')[0];
    assert.equal(el.textContent, code);
    assert.equal(elements(el).length, 0);
  }
}));

test('a hook still waiting ({pending: true}): the block plain and marked data-md-pending, the formula its source untitled', () => withDom((doc) => {
  const pending = () => ({ pending: true });
  const frag = renderRich(doc, '```python\nx = 1\n```\n\nand $x^2$', { highlight: pending, math: pending });
  const block = byClass(frag, 'md-codeblock')[0];
  assert.equal(block.getAttribute('data-md-pending'), '');
  assert.equal(elements(byTag(block, 'code')[0]).length, 0);
  assert.equal(byTag(block, 'code')[0].textContent, 'x = 1');
  assert.equal(byTag(block, 'code')[0].getAttribute('class'), 'language-python');
  const math = byClass(frag, 'md-math')[0];
  assert.equal(math.getAttribute('data-md-pending'), '');
  const src = byClass(math, 'md-math-src')[0];
  assert.equal(src.textContent, '$x^2$');
  assert.equal(src.getAttribute('title'), null);
  assertRichSafe(frag);
  // an answer: no mark
  const done = renderRich(doc, '```python\nx = 1\n```');
  assert.equal(byClass(done, 'md-codeblock')[0].getAttribute('data-md-pending'), null);
}));

test('formulas render as KaTeX: MathML inside .katex, display math as .katex-display', () => withDom((doc) => {
  const frag = renderRich(doc, 'Euler $e^{i\\pi}+1=0$, \\(x\\), $5 and $10.\n\n$$\n\\int_0^1 x\\,dx\n$$\n\n\\[\\sqrt{2}\\]');
  assertRichSafe(frag);
  const katex = byClass(frag, 'katex');
  assert.equal(katex.length, 4);
  for (const k of katex) assert.equal(byTag(k, 'math').length, 1);
  assert.equal(byClass(frag, 'katex-display').length, 2);
  assert.equal(byClass(frag, 'md-math-block').length, 2);
  assert.match(frag.textContent, /\$5 and \$10\./);
  assert.equal(byTag(byTag(frag, 'math')[0], 'annotation')[0].textContent, 'e^{i\\pi}+1=0');
}));

test('hostile TeX: no links, images or attributes from \\href, \\url, \\includegraphics, \\html*', () => withDom((doc) => {
  for (const tex of [
    '\\href{javascript:alert(1)}{click}',
    '\\url{javascript:alert(1)}',
    '\\href{https://example.com}{x}',
    '\\includegraphics{https://example.com/x.png}',
    '\\includegraphics[height=1em]{javascript:alert(1)}',
    '\\htmlClass{evil}{x}',
    '\\htmlData{onclick=alert(1)}{x}',
    '\\htmlId{evil}{x}',
    '\\htmlStyle{background:url(javascript:alert(1))}{x}',
    '\\def\\x{\\href{javascript:alert(1)}{y}}\\x',
    '\\color{javascript:alert(1)}{x}',
    '\\text{<script>alert(1)</script>}',
    '\\verb|<img onerror=alert(1)>|',
  ]) {
    for (const wrap of [`$${tex}$`, `$$${tex}$$`, `\\(${tex}\\)`]) {
      const frag = renderRich(doc, wrap);
      assertRichSafe(frag, wrap);
      for (const e of elements(frag)) {
        assert.ok(!['a', 'img', 'script', 'iframe', 'style'].includes(e.localName), `${wrap}: <${e.localName}>`);
        for (const { name } of e.attributes) assert.ok(!['href', 'src', 'id', 'xlink:href'].includes(name) && !name.startsWith('data-'), `${wrap}: ${name}`);
        assert.ok(!(e.getAttribute('class') ?? '').split(' ').includes('evil'), `${wrap}: class from \\htmlClass`);
      }
    }
  }
}));

test('huge \\rule and \\kern sizes are capped (maxSize)', () => withDom((doc) => {
  for (const tex of ['\\rule{100000em}{100000em}', '\\kern{100000em}x', '\\rule{1e9pt}{1e9pt}', '\\hspace{99999cm}', '\\mkern{99999mu}']) {
    const frag = renderRich(doc, `$${tex}$`);
    assertRichSafe(frag, tex);
    for (const e of elements(frag)) {
      for (const v of Object.values(e.style || {})) {
        const m = /^(-?[\d.]+)em$/.exec(String(v));
        if (m) assert.ok(Math.abs(Number(m[1])) <= 40, `${tex}: style ${v}`);
      }
    }
  }
}));

test('deeply nested braces, macro bombs and a 100 KB formula finish and show their source', () => withDom((doc) => {
  const huge = 'x+'.repeat(50_000) + 'y';
  const nested = '{'.repeat(5000) + 'x' + '}'.repeat(5000);
  const lefts = '\\left('.repeat(500) + 'x' + '\\right)'.repeat(500);
  const bomb = '\\def\\a{\\b\\b}\\def\\b{\\c\\c}\\def\\c{\\d\\d}\\def\\d{\\e\\e}\\def\\e{\\f\\f}\\def\\f{xx}' + '\\a'.repeat(200);
  for (const tex of [huge, nested, lefts, bomb]) {
    for (const src of [`$${tex}$`, `$$\n${tex}\n$$`]) {
      const frag = renderRich(doc, src);
      assertRichSafe(frag);
      const fallback = byClass(frag, 'md-math-src');
      assert.equal(fallback.length, 1, `${tex.slice(0, 20)}: shows its source`);
      assert.equal(fallback[0].getAttribute('title'), 'This formula could not be rendered; its TeX source is shown');
      assert.ok(fallback[0].textContent.includes(tex.slice(0, 100)));
      assert.equal(byClass(frag, 'katex').length, 0);
    }
  }
  assert.ok(huge.length > MATH_MAX);
}));

test('a math hook that throws or builds disallowed nodes leaves the source as code', () => withDom((doc) => {
  for (const math of [
    () => { throw new Error('parse error'); },
    () => { const a = doc.createElement('a'); a.setAttribute('href', 'javascript:alert(1)'); return a; },
    () => { const s = doc.createElement('span'); s.setAttribute('onmouseover', 'x'); return s; },
    () => { const s = doc.createElement('span'); s.setAttribute('data-x', 'y'); return s; },
    () => doc.createElement('iframe'),
  ]) {
    const frag = renderRich(doc, 'a $x^2$ b', { math });
    assertRichSafe(frag);
    assert.deepEqual(byClass(frag, 'md-math-src').map((c) => c.textContent), ['$x^2$']);
  }
}));

test('every prefix of a reply with code and math renders safely with the real hooks', () => withDom((doc) => {
  const msg = 'Here:\n\n```python\ndef f(x):\n    return x ** 2  # $not math$\n```\n\nSo $f(x) = x^2$ and\n\n$$\n\\int_0^1 f = \\tfrac13\n$$\n\n`$y$` costs $5.';
  for (let i = 0; i <= msg.length; i++) {
    const frag = renderRich(doc, msg.slice(0, i));
    assertRichSafe(frag, `prefix ${i}`);
  }
  const full = renderRich(doc, msg);
  assert.equal(byClass(full, 'katex').length, 2);
  assert.equal(byClass(full, 'md-math-src').length, 0);
  assert.ok(byClass(full, 'hljs-comment')[0].textContent.includes('$not math$'));
}));

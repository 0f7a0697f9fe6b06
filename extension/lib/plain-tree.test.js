// node --test extension/lib/plain-tree.test.js
// The rich worker's node trees as plain data: what the recording document records, toPlain's node cap,
// and fromPlain's allow-lists (elements, attributes, CSSOM styles and their values) on the page side.

import test from 'node:test';
import assert from 'node:assert/strict';

import { installFakeDom } from '../test-support/fake-dom.js';
import { fromPlain, NAMESPACES, recordingDocument, styleValueOk, toPlain } from './plain-tree.js';
import { CODE_ATTRIBUTES, CODE_ELEMENTS, MATH_ATTRIBUTES, MATH_ELEMENTS, MATH_STYLES } from './markdown.js';

const MATH = { elements: MATH_ELEMENTS, attributes: MATH_ATTRIBUTES, styles: MATH_STYLES, maxNodes: 1000 };
const CODE = { elements: CODE_ELEMENTS, attributes: CODE_ATTRIBUTES, maxNodes: 1000 };

function withDom(fn) {
  const dom = installFakeDom();
  try {
    return fn(dom.document);
  } finally {
    dom.restore();
  }
}

test('the recording document records elements, namespaces, attributes, className, styles and text', () => {
  const d = recordingDocument();
  const frag = d.createDocumentFragment();
  const span = d.createElement('SPAN');
  span.className = 'katex';
  span.style.height = '1em';
  span.style.color = '';
  const math = d.createElementNS(NAMESPACES[1], 'math');
  math.setAttribute('display', 'block');
  const svg = d.createElementNS(NAMESPACES[2], 'svg');
  svg.setAttribute('viewBox', '0 0 1 1');
  math.appendChild(d.createTextNode('x'));
  span.appendChild(math);
  span.appendChild(svg);
  frag.appendChild(span);
  assert.equal(frag.textContent, 'x');
  assert.throws(() => d.createElementNS('urn:other', 'x'));
  const { plain, nodes } = toPlain(frag, 10);
  assert.equal(nodes, 5);
  assert.deepEqual(plain, ['#fragment', 0, [], [], [
    ['span', 0, ['class', 'katex'], ['height', '1em'], [
      ['math', 1, ['display', 'block'], [], ['x']],
      ['svg', 2, ['viewBox', '0 0 1 1'], [], []],
    ]],
  ]]);
  assert.equal(toPlain(frag, 4), null, 'over the node cap');
  // a fragment appended to an element moves its children
  const f2 = d.createDocumentFragment();
  f2.appendChild(d.createTextNode('a'));
  const p = d.createElement('span');
  p.appendChild(f2);
  assert.equal(p.childNodes.length, 1);
  assert.equal(f2.childNodes.length, 0);
});

test('fromPlain builds what the policy allows: namespaces, attributes, CSSOM styles, text', () => withDom((doc) => {
  const plain = ['span', 0, ['class', 'katex'], ['height', '1em', 'width', 'calc(100% - 0.2em)', 'color', '#ff0000'], [
    ['math', 1, ['display', 'block'], [], [['mi', 1, [], [], ['x']]]],
    ['svg', 2, ['viewBox', '0 0 1 1', 'style', 'width:1em'], [], [['path', 2, ['d', 'M0 0'], [], []]]],
  ]];
  const n = fromPlain(plain, doc, MATH);
  assert.equal(n.localName, 'span');
  assert.equal(n.getAttribute('class'), 'katex');
  assert.deepEqual(n.style, { height: '1em', width: 'calc(100% - 0.2em)', color: '#ff0000' });
  assert.equal(n.childNodes[0].namespaceURI, NAMESPACES[1]);
  assert.equal(n.childNodes[1].namespaceURI, NAMESPACES[2]);
  assert.equal(n.childNodes[1].getAttribute('viewBox'), '0 0 1 1');
  assert.equal(n.childNodes[1].getAttribute('style'), null, 'a style attribute is left out (the CSP would drop it)');
  assert.equal(n.textContent, 'x');
  const frag = fromPlain(['#fragment', 0, [], [], [['span', 0, ['class', 'hljs-keyword'], [], ['def']], ' f']], doc, CODE);
  assert.equal(frag.nodeType, 11);
  assert.equal(frag.textContent, 'def f');
}));

test('fromPlain refuses anything outside the policy, and malformed entries', () => withDom((doc) => {
  const bad = [
    ['a', 0, ['href', 'javascript:alert(1)'], [], ['x']],
    ['span', 0, ['onclick', 'alert(1)'], [], []],
    ['span', 0, ['ONMOUSEOVER', 'x'], [], []],
    ['span', 0, ['data-x', 'y'], [], []],
    ['img', 0, ['src', 'x'], [], []],
    ['script', 0, [], [], ['alert(1)']],
    ['span', 0, [], ['backgroundImage', 'url(https://evil.example/x.png)'], []],
    ['span', 0, [], ['color', 'url(https://evil.example/)'], []],
    ['span', 0, [], ['width', 'expression(alert(1))'], []],
    ['span', 0, [], ['width', 'calc(1em) url(x)'], []],
    ['span', 0, [], ['width', 'calc(calc(1em))'], []],
    ['span', 0, [], ['color', 'red;background:url(x)'], []],
    ['span', 0, [], ['color', '"red"'], []],
    ['span', 0, [], ['color', 'red\\'], []],
    ['span', 0, ['class'], [], []],
    ['span', 7, [], [], []],
    ['span', 0, [], []],
    ['span', 0, [1, 2], [], []],
    ['#fragment', 0, [], [], [['#fragment', 0, [], [], []]]],
    ['span', 0, [], [], [['span', 0, [], [], [['iframe', 0, [], [], []]]]]],
    ['span', 0, [], [], [42]],
    null,
    { name: 'span' },
  ];
  for (const p of bad) assert.equal(fromPlain(p, doc, MATH), null, JSON.stringify(p));
  // code: only <span class>
  assert.equal(fromPlain(['span', 0, ['class', 'x'], ['color', 'red'], []], doc, CODE), null, 'no styles in code');
  assert.equal(fromPlain(['math', 1, [], [], []], doc, CODE), null);
  // the node cap
  const wide = ['span', 0, [], [], Array.from({ length: 2000 }, () => 'x')];
  assert.equal(fromPlain(wide, doc, MATH), null);
  assert.ok(fromPlain(wide, doc, { ...MATH, maxNodes: 2001 }));
}));

test('styleValueOk: lengths, colours, keywords and calc(…) only', () => {
  for (const ok of ['1em', '-0.25em', '0 -0.02em', '#ff0000', 'red', 'transparent', 'calc(100% - 0.5em)', '0.02em 0.01em 0.04px', 'solid', '50%']) {
    assert.ok(styleValueOk(ok), ok);
  }
  for (const bad of ['', 'url(x)', 'calc(1em', '1em)', 'a:b', 'a;b', '"x"', "'x'", 'x\\y', 'image-set(x)', 'var(--x)', '!important', 'x'.repeat(121), 42, null]) {
    assert.ok(!styleValueOk(bad), String(bad));
  }
});

test('deep trees convert both ways without recursion limits', () => withDom((doc) => {
  const d = recordingDocument();
  let root = d.createElement('span');
  const top = root;
  for (let i = 0; i < 20_000; i++) {
    const c = d.createElement('span');
    root.appendChild(c);
    root = c;
  }
  root.appendChild(d.createTextNode('deep'));
  const { plain, nodes } = toPlain(top, 50_000);
  assert.equal(nodes, 20_002);
  const back = fromPlain(plain, doc, { ...CODE, maxNodes: 50_000 });
  let n = back;
  let depth = 0;
  while (n.firstChild) {
    n = n.firstChild;
    depth++;
  }
  assert.equal(depth, 20_001);
  assert.equal(n.data, 'deep');
}));

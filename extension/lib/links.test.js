// node --test extension/lib/links.test.js
//
// The one link rule (issue 30): which addresses become an href, every scheme trick refused, the
// page's own download URLs admitted only as downloads, and the places that draw links (h(),
// renderMarkdown) unable to put any other address in one. The convention that no code sets an
// href another way: tests/it/conventions.rs.

import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeDom } from '../test-support/fake-dom.js';
import { safeHref, setLink, ownObjectUrl, revokeOwnObjectUrl, MAX_URL } from './links.js';
import { h } from './ui/dom.js';
import { renderMarkdown } from './markdown.js';

let dom;
beforeEach(() => {
  dom = installFakeDom();
});
afterEach(() => dom.restore());

/** Addresses that must never become a link, with why. */
const REFUSED = {
  'javascript:alert(1)': 'javascript:',
  'JaVaScRiPt:alert(1)': 'mixed case',
  'JAVASCRIPT:alert(1)': 'upper case',
  '  javascript:alert(1)': 'leading spaces',
  '\u00a0javascript:alert(1)': 'a no-break space first (not trimmed by the URL parser either)',
  'java\tscript:alert(1)': 'a tab inside (the URL parser drops it)',
  'java\nscript:alert(1)': 'a newline inside',
  'java\rscript:alert(1)': 'a carriage return inside',
  '\u0000javascript:alert(1)': 'a NUL first',
  '\u0001javascript:alert(1)': 'a C0 control first (the URL parser strips it)',
  'javascript\u0085:alert(1)': 'a C1 control',
  'https://ok.example/\u007f': 'DEL',
  'javascript&colon;alert(1)': 'an entity is not decoded here (not a URL at all)',
  'javascript：alert(1)': 'a full-width colon: no scheme',
  'data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==': 'data:',
  'DATA:text/html,x': 'data: upper case',
  'vbscript:msgbox(1)': 'vbscript:',
  'file:///etc/passwd': 'file:',
  'FILE:///C:/Windows/win.ini': 'file: upper case',
  'file://host/share': 'file: with a host',
  'chrome://settings/passwords': 'chrome:',
  'chrome-extension://ejaedcjldiggibmnammkkoekohjgefkk/options/options.html': 'chrome-extension:',
  'moz-extension://x/y': 'moz-extension:',
  'about:blank': 'about:',
  'view-source:https://a.example/': 'view-source:',
  'blob:https://evil.example/2b7f1c1e-0000-4000-8000-000000000000': 'a blob: URL the page did not make',
  'filesystem:https://a.example/temporary/x': 'filesystem:',
  'ws://a.example/': 'ws:',
  'ftp://a.example/': 'ftp:',
  'tel:+15551234': 'tel:',
  'intent://x#Intent;end': 'intent:',
  '//evil.example/': 'protocol-relative',
  '/relative': 'relative',
  'relative/path': 'relative',
  '#frag': 'a fragment',
  '': 'empty',
  '   ': 'blank',
  'http://': 'no host',
  'https:': 'no host',
};

test('safeHref: http, https and mailto, as the URL parser serialises them', () => {
  assert.equal(safeHref('https://a.example/x y'), 'https://a.example/x%20y');
  assert.equal(safeHref('HTTP://A.EXAMPLE'), 'http://a.example/');
  assert.equal(safeHref('  https://a.example/p?q=1#f  '), 'https://a.example/p?q=1#f', 'surrounding spaces ignored');
  assert.equal(safeHref('mailto:a@b.example'), 'mailto:a@b.example');
  assert.equal(safeHref('https://bücher.example/'), 'https://xn--bcher-kva.example/', 'the host as the browser would follow it');
  assert.equal(safeHref('http://127.0.0.1:8080/x'), 'http://127.0.0.1:8080/x');
  assert.equal(safeHref(`https://a.example/${'x'.repeat(MAX_URL - 'https://a.example/'.length)}`)?.length, MAX_URL);
  assert.equal(safeHref(`https://a.example/${'x'.repeat(MAX_URL)}`), null, 'over MAX_URL');
});

test('safeHref refuses every other scheme and every whitespace, case and control-character trick', () => {
  for (const [url, why] of Object.entries(REFUSED)) assert.equal(safeHref(url), null, `${JSON.stringify(url)}: ${why}`);
  for (const v of [null, undefined, 7, {}, ['https://a.example/'], new URL('https://a.example/')]) assert.equal(safeHref(v), null, String(v));
});

test("the page's own object URLs: a download link only, and only until revoked", () => {
  const url = ownObjectUrl(new Blob(['x'], { type: 'text/plain' }));
  assert.match(url, /^blob:/);
  assert.equal(safeHref(url, { download: true }), url);
  assert.equal(safeHref(url), null, 'not as an ordinary link');
  assert.equal(safeHref(`${url}x`, { download: true }), null, 'another blob URL');
  revokeOwnObjectUrl(url);
  assert.equal(safeHref(url, { download: true }), null, 'revoked');
  assert.equal(safeHref('javascript:alert(1)', { download: true }), null);
});

test('setLink and h(): an address the rule refuses leaves no href', () => {
  const a = h('a', {});
  assert.equal(setLink(a, 'https://a.example/'), true);
  assert.equal(a.getAttribute('href'), 'https://a.example/');
  assert.equal(setLink(a, 'javascript:alert(1)'), false);
  assert.equal(a.getAttribute('href'), null, 'a refused address removes the old one');
  for (const [url, why] of Object.entries(REFUSED)) {
    for (const key of ['href', 'HREF', 'Href', 'xlink:href']) {
      const el = h('a', { [key]: url, text: 'x' });
      assert.equal(el.getAttribute('href') ?? el.getAttribute(key), null, `h('a', {${key}: ${JSON.stringify(url)}}): ${why}`);
    }
  }
  assert.equal(h('a', { href: 'https://a.example/x' }).getAttribute('href'), 'https://a.example/x');
  assert.equal(h('a', { HREF: 'https://a.example/x' }).getAttribute('href'), 'https://a.example/x', 'any case goes through the rule');
  const own = ownObjectUrl(new Blob(['x']));
  assert.equal(h('a', { href: own, download: 'a.txt' }).getAttribute('href'), own, 'a download of our own file');
  assert.equal(h('a', { href: own }).getAttribute('href'), null, 'the same URL as an ordinary link');
  revokeOwnObjectUrl(own);
});

test('renderMarkdown builds its links through the same rule', () => {
  const all = (node, out = []) => {
    for (const c of node.childNodes || []) {
      if (c.nodeType === 1) out.push(c);
      all(c, out);
    }
    return out;
  };
  const links = (src) => all(renderMarkdown(src, document)).filter((e) => e.getAttribute?.('href') !== null && e.getAttribute?.('href') !== undefined).map((e) => e.getAttribute('href'));
  assert.deepEqual(links('[a](https://a.example/) <https://b.example/x> https://c.example/y [m](mailto:m@d.example)'), [
    'https://a.example/',
    'https://b.example/x',
    'https://c.example/y',
    'mailto:m@d.example',
  ]);
  for (const url of Object.keys(REFUSED)) {
    // not a Markdown destination as written (its parser ends one at a space or control character)
    if (!url.trim() || /[\s()<>\\\u0000-\u001f\u007f-\u009f]/.test(url)) continue;
    // the destination itself is never a link; a bare https:// URL inside its text may be one
    for (const href of links(`[x](${url}) <${url}> ![i](${url})`)) {
      assert.ok(href.startsWith('https://') && safeHref(href) === href && href !== url, `${url} → ${href}`);
    }
  }
});

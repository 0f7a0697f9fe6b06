// node --test extension/lib/entries.test.js
//
// The shared entry rules. Until they were merged here the worker (background/turns.js) and the
// panel (sidepanel/entries.js, sidepanel/pixels.js, lib/caps.js) each had a copy; the cases marked
// "host" are where the copies disagreed, decided the way keepsake-host decides (src/domain/entry.rs,
// src/store/history.rs).

import test from 'node:test';
import assert from 'node:assert/strict';
import { IMAGE_REF_PREFIX, entryText, isAttachEntry, isImageRef, newestVideoSrc, redactUrl } from './entries.js';

// the host's texts (src/domain/entry.rs), written out here on purpose
const PAGE_CONTEXT_PREFIX = '[Page context attached by Keepsake]';
const LEGACY_PREFIX = '[Page context attached by browsa]';

const REF = IMAGE_REF_PREFIX + 'a'.repeat(64);
const attachText = `${PAGE_CONTEXT_PREFIX}\nURL: https://ex.com/a\nTitle: Example page\nMode: readable | markdown\n---\n\nHello body`;

test('the image reference prefix is the host text', () => {
  assert.equal(IMAGE_REF_PREFIX, 'keepsake-image:sha256:');
});

test('entryText joins the string text of text and input_text parts only', () => {
  assert.equal(entryText({ role: 'user', content: 'hi' }), 'hi');
  assert.equal(
    entryText({ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: REF } }, { type: 'input_text', text: 'b' }, { type: 'other', text: 'x' }] }),
    'a\nb',
  );
  assert.equal(entryText({ content: [{ type: 'text', text: 5 }, null, 'text', { type: 'text', text: 'c' }] }), 'c');
  assert.equal(entryText(null), '');
  assert.equal(entryText('a string'), '');
  assert.equal(entryText({ content: 5 }), '');
  assert.equal(entryText({ content: [] }), '');
  // an array is not an entry, even one carrying `content` (host: `e.get("content")` on an array is None)
  assert.equal(entryText(Object.assign([], { content: 'x' })), '');
});

test('attach detection uses the first text part and both prefixes', () => {
  assert.equal(isAttachEntry({ role: 'user', content: attachText }), true);
  assert.equal(isAttachEntry({ role: 'assistant', content: attachText }), false);
  assert.equal(isAttachEntry({ role: 'user', content: `${LEGACY_PREFIX}\nURL: x` }), true);
  assert.equal(isAttachEntry({ role: 'user', content: `${LEGACY_PREFIX}x` }), true, 'a prefix, not a line');
  assert.equal(isAttachEntry({ role: 'user', content: ` ${PAGE_CONTEXT_PREFIX}` }), false, 'at the very start');
  assert.equal(isAttachEntry({ role: 'user', content: '[Page context attached by keepsake]' }), false, 'case matters');
  assert.equal(isAttachEntry({ role: 'user', content: [{ type: 'text', text: 'hello' }, { type: 'text', text: attachText }] }), false);
  assert.equal(isAttachEntry({ role: 'user', content: [{ type: 'image_url', image_url: { url: REF } }, { type: 'text', text: attachText }] }), true);
  assert.equal(isAttachEntry({ role: 'user', content: [{ type: 'input_text', text: attachText }] }), true);
  assert.equal(isAttachEntry({ role: 'user', content: [] }), false);
  assert.equal(isAttachEntry({ role: 'user' }), false);
  assert.equal(isAttachEntry(null), false);
});

test('host: a text part without a string text is skipped when finding the attach text', () => {
  // the worker's copy stopped at the first part typed text and read '' from it; the panel's copy
  // and the host (`parts.iter().find_map(part_text)`) go on to the first part with a string text
  const e = { role: 'user', content: [{ type: 'text', text: 5 }, { type: 'text', text: attachText }] };
  assert.equal(isAttachEntry(e), true);
  assert.equal(isAttachEntry({ role: 'user', content: [{ type: 'text' }, { type: 'text', text: 'hello' }] }), false);
});

test('newestVideoSrc: the newest entry whose videoSrc is an object', () => {
  const v = { platform: 'youtube', url: 'u', tabId: 3 };
  assert.equal(newestVideoSrc([{ videoSrc: { tabId: 1 } }, { videoSrc: v }, {}]), v);
  assert.equal(newestVideoSrc([{}]), null);
  assert.equal(newestVideoSrc([]), null);
  assert.equal(newestVideoSrc([null, undefined]), null);
});

test('host: newestVideoSrc skips a videoSrc that is not an object and takes no non-array', () => {
  // the panel's copy took an array `videoSrc` and threw on a non-array; the host's query asks for
  // `json_type(entry, '$.videoSrc') = 'object'`
  const v = { platform: 'html5', url: 'v', tabId: 2 };
  assert.equal(newestVideoSrc([{ videoSrc: v }, { videoSrc: [1] }, { videoSrc: 'x' }, { videoSrc: null }]), v);
  assert.equal(newestVideoSrc(undefined), null);
  assert.equal(newestVideoSrc({ length: 1, 0: { videoSrc: v } }), null);
});

test('isImageRef: the whole string, 64 lower-case hex digits', () => {
  assert.equal(isImageRef(REF), true);
  assert.equal(isImageRef(IMAGE_REF_PREFIX + '0'.repeat(64)), true);
  assert.equal(isImageRef(IMAGE_REF_PREFIX + 'A'.repeat(64)), false);
  assert.equal(isImageRef(' ' + REF), false);
  assert.equal(isImageRef(REF + '\n'), false);
  assert.equal(isImageRef(IMAGE_REF_PREFIX + 'abc'), false);
  assert.equal(isImageRef('data:image/png;base64,AA=='), false);
  assert.equal(isImageRef(undefined), false);
});

test('redactUrl drops user:password@ after a scheme and //, nothing else', () => {
  const cases = [
    ['https://user:pw@example.com/p', 'https://example.com/p'],
    ['https://user:pw@example.com/a?b#c', 'https://example.com/a?b#c'],
    ['HTTP://a@b.example/', 'HTTP://b.example/'],
    ['ftp://x:y@host:21/file', 'ftp://host:21/file'],
    ['https://example.com/a@b', 'https://example.com/a@b'],
    ['https://example.com/?u=a:b@c', 'https://example.com/?u=a:b@c'],
    ['chrome://settings', 'chrome://settings'],
    ['file:///home/me/a.html', 'file:///home/me/a.html'],
    ['mailto:me@example.com', 'mailto:me@example.com'],
    ['', ''],
    [undefined, ''],
    [42, ''],
  ];
  for (const [url, want] of cases) assert.equal(redactUrl(url), want, String(url));
});

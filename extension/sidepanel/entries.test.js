import test from 'node:test';
import assert from 'node:assert/strict';
import {
  entryImages, displayParts, describeAttach, attachSize, lastAssistantIndex,
} from './entries.js';
import { entryText } from '../lib/entries.js';

const REF = 'keepsake-image:sha256:' + 'a'.repeat(64);
const attachText = '[Page context attached by Keepsake]\nURL: https://ex.com/a\nTitle: Example page\nMode: readable | markdown\n---\n\nHello body';

test('images in both part forms', () => {
  const e = { role: 'user', content: [{ type: 'image_url', image_url: { url: REF } }, { type: 'image_url', image_url: 'data:image/png;base64,AA==' }] };
  assert.deepEqual(entryImages(e), [REF, 'data:image/png;base64,AA==']);
  assert.deepEqual(entryImages({ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url' }, { type: 'image_url', image_url: { url: 5 } }] }), []);
});

test('displayParts carries originals: a thumbnail part names its original, a label part becomes a label that does', () => {
  const ORIG = 'keepsake-image:sha256:' + 'b'.repeat(64);
  const ORIG2 = 'keepsake-image:sha256:' + 'c'.repeat(64);
  const e = { role: 'user', content: [
    { type: 'text', text: 'a' },
    { type: 'image_url', image_url: { url: REF }, originalUrl: ORIG },
    { type: 'text', text: '[image 2]', originalUrl: ORIG2 },
    { type: 'text', text: 'b' },
  ] };
  assert.deepEqual(displayParts(e), [
    { kind: 'text', text: 'a' },
    { kind: 'image', url: REF, n: 1, original: ORIG },
    { kind: 'label', text: '[image 2]', n: 2, original: ORIG2 },
    { kind: 'text', text: 'b' },
  ]);
  assert.equal(entryText(e), 'a\n[image 2]\nb');
  assert.deepEqual(entryImages(e), [REF]);
});

test('displayParts merges adjacent text and numbers images', () => {
  const e = { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }, { type: 'image_url', image_url: { url: REF } }, { type: 'text', text: 'c' }] };
  assert.deepEqual(displayParts(e), [{ kind: 'text', text: 'a\nb' }, { kind: 'image', url: REF, n: 1 }, { kind: 'text', text: 'c' }]);
  assert.deepEqual(displayParts({ content: '' }), []);
});

test('describeAttach reads title, url, mode and body chars', () => {
  const d = describeAttach({ role: 'user', content: attachText, attachId: 'id-1', summarized: true });
  assert.deepEqual(d, { attachId: 'id-1', title: 'Example page', url: 'https://ex.com/a', mode: 'readable', chars: 'Hello body'.length, summarized: true, images: 0 });
  const raw = describeAttach({ role: 'user', content: '[Page context attached by Keepsake]\nno structure' });
  assert.equal(raw.attachId, '');
  assert.equal(raw.chars, '[Page context attached by Keepsake]\nno structure'.length);
});

test('last assistant', () => {
  const entries = [
    { role: 'user', content: 'q1' },
    { role: 'assistant', content: 'a1' },
    { role: 'user', content: attachText },
    { role: 'user', content: 'q2' },
    { role: 'assistant', content: 'a2' },
    { role: 'user', content: attachText },
  ];
  assert.equal(lastAssistantIndex(entries), 4);
  assert.equal(lastAssistantIndex([]), -1);
});

test('attachSize: a screenshot is its picture (no character count of its placeholder text); quotes and figures say so', () => {
  const fc = (n) => `${n.toLocaleString('en-US')} chars`;
  assert.equal(attachSize({ mode: 'screenshot', chars: 12, images: 1 }, fc), 'picture');
  assert.equal(attachSize({ mode: 'screenshot', chars: 12, images: 2 }, fc), '2 pictures');
  assert.equal(attachSize({ mode: 'full', chars: 1234, images: 0 }, fc), '1,234 chars');
  assert.equal(attachSize({ mode: 'full', chars: 1234, images: 1 }, fc), '1,234 chars · 1 image');
  assert.equal(attachSize({ mode: 'pdf', chars: 2383, images: 2 }, fc), '2,383 chars · 2 figures');
  assert.equal(attachSize({ mode: 'article', chars: 900, images: 1 }, fc), '900 chars · 1 figure');
  assert.equal(attachSize({ mode: 'selection', chars: 55, images: 0 }, fc), 'quote, 55 chars');
});

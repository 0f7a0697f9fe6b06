// node --test extension/background/page-attach.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { attachArgsFor, videoPlatform } from './page-attach.js';

test('attach args: redaction, video, changedSince', () => {
  assert.equal(videoPlatform('https://www.youtube.com/watch?v=1'), 'youtube');
  assert.equal(videoPlatform('https://www.bilibili.com/video/BV1'), 'bilibili');
  assert.equal(videoPlatform('https://example.com/v.mp4'), 'html5');
  const a = attachArgsFor(
    { title: ' T ', url: 'https://x/', text: 'body', hasVideo: true },
    { tabId: 7, tabUrl: 'https://u:p@www.youtube.com/watch?v=1', changedSince: '2024-01-01 10:00' },
  );
  assert.deepEqual(a, {
    ctx: { url: 'https://www.youtube.com/watch?v=1', title: 'T', mode: 'full', body: 'body', changedSince: '2024-01-01 10:00' },
    videoSrc: { platform: 'youtube', url: 'https://www.youtube.com/watch?v=1', tabId: 7 },
  });
  assert.equal(attachArgsFor({ title: '', text: '' }, { tabUrl: 'https://e/' }).ctx.title, 'https://e/');
});

// node --test extension/background/image-tokens.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { collectTokens, fillImageTokens } from './image-tokens.js';

// 1×1 PNGs (valid base64, canonical)
const RED =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const BLUE =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYPgPAAEDAQAIicLsAAAAAElFTkSuQmCC';
const png = (b64) => `data:image/png;base64,${b64}`;

test('fillImageTokens fills data URLs and Anthropic base64 sources', () => {
  const map = new Map([
    ['keepsake-turn-image:0', { mime: 'image/png', data: RED }],
    ['keepsake-image:sha256:' + 'a'.repeat(64), { mime: 'image/jpeg', data: BLUE }],
  ]);
  const v = {
    a: [{ type: 'image_url', image_url: { url: 'keepsake-turn-image:0' } }],
    b: { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: 'keepsake-image:sha256:' + 'a'.repeat(64) } },
    c: 'keepsake-turn-image:0 is not a token when embedded',
  };
  const f = fillImageTokens(v, map);
  assert.equal(f.a[0].image_url.url, png(RED));
  assert.equal(f.b.source.data, BLUE);
  assert.equal(f.b.source.media_type, 'image/jpeg');
  assert.equal(f.c, v.c);
  assert.equal(collectTokens(f).size, 0);
  assert.throws(() => fillImageTokens({ x: 'keepsake-turn-image:9' }, map), { code: 'image_unavailable' });
});

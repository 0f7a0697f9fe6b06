// node --test extension/background/image-cache.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ImageCache } from './image-cache.js';

// 1×1 PNGs (valid base64, canonical)
const RED =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const BLUE =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYPgPAAEDAQAIicLsAAAAAElFTkSuQmCC';
const png = (b64) => `data:image/png;base64,${b64}`;

test('ImageCache hashes canonical data URLs into image references, LRU-bounded', async () => {
  const c = new ImageCache({ maxChars: RED.length + BLUE.length });
  const r1 = await c.addDataUrl(png(RED));
  assert.match(r1, /^keepsake-image:sha256:[0-9a-f]{64}$/);
  assert.deepEqual(c.get(r1), { mime: 'image/png', data: RED });
  assert.equal(await c.addDataUrl('https://x/y.png'), null);
  const r2 = await c.addDataUrl(png(BLUE));
  await c.addDataUrl(png(RED)); // touch
  c.put('keepsake-image:sha256:' + 'b'.repeat(64), { mime: 'image/png', data: 'AAAA' });
  assert.ok(c.get(r1) && !c.get(r2), 'least recently used dropped');
});

// The per-turn image caps come from the host: the real keepsake-host, over real pipes, reports
// `limits.turnMaxImages` and `limits.turnImageBudget` in `host.hello`, `turnCaps` reads them, and they
// are the caps the shared fixture (fixtures/caps-cases.json) was written for, so caps.test.js's cases
// hold for the host the extension talks to. Skipped when the binary is not built.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { NativePort } from './native-port.js';
import { createStorage } from './storage.js';
import { pickTurnImages, turnCaps } from './caps.js';
import { HOST_SKIP as SKIP, ProcessPort, cleanUpHosts, spawnHost, tempDir } from '../test-support/process-port.js';

after(cleanUpHosts);

const fixture = JSON.parse(readFileSync(new URL('./fixtures/caps-cases.json', import.meta.url), 'utf8'));

test('host.hello reports the per-turn caps; turnCaps reads them; they are the fixture\'s', { skip: SKIP }, async () => {
  const db = join(tempDir('keepsake-caps-'), 'data', 'keepsake.db');
  const env = { lastError: undefined };
  const np = new NativePort({ connect: () => new ProcessPort(spawnHost(db), env), idleMs: 600_000, backoffMs: [50], lastError: () => env.lastError });
  const storage = createStorage(np.request.bind(np));
  try {
    const hello = await storage.host.hello();
    const caps = turnCaps(hello.limits);
    assert.ok(caps, `hello.limits carries the caps: ${JSON.stringify(hello.limits)}`);
    assert.deepEqual(caps, { maxImages: fixture.constants.TURN_MAX_IMAGES, budget: fixture.constants.TURN_IMAGE_BUDGET });
    // the gate obeys what the host said
    const many = Array.from({ length: caps.maxImages + 1 }, (_, i) => `https://x/${i}`);
    assert.equal(pickTurnImages(many, { caps }).images.length, caps.maxImages);
  } finally {
    np.close?.();
  }
});

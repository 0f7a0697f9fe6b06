// The composer's draft outlives the browser (issue 21): the text being written is kept by the host
// (the setting composerDraft) a moment after typing stops, so a browser that closes — here the
// whole browser, and its profile with its session storage, is gone — finds it again; sending it
// clears it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { launch, waitFor, hostCall } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, waitForBubbles } from './panel.mjs';
import { setting, live } from './db.mjs';

const DRAFT = 'What did the keeper write on the night of the storm?\nAnd who signed the log?';

test('the draft survives a browser restart (kept by the host) and is cleared once sent', { timeout: 150_000 }, async () => {
  const mock = await startMockLlm({ script: { text: 'The log says: all well.', chunkSize: 8, delayMs: 2 } });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-e2e-draft-'));
  let k = null;
  try {
    k = await launch({ name: 'draft-1', dataDir });
    let panel = await k.openPanel();
    await panel.locator(tid('composer-input')).waitFor();
    await panel.locator('html[data-ready="true"]').waitFor({ timeout: 15_000 });
    await panel.fill(tid('composer-input'), DRAFT);
    const kept = await waitFor(() => setting(k, 'composerDraft') ?? null, { timeoutMs: 10_000, what: 'the draft in the host' });
    assert.equal(kept.text, DRAFT);
    await k.close({ keepData: true });

    // a new browser, a new profile (no session storage): the host's draft comes back
    k = await launch({ name: 'draft-2', dataDir });
    panel = await k.openPanel();
    await waitFor(async () => ((await panel.inputValue(tid('composer-input'))) === DRAFT ? true : null), { timeoutMs: 15_000, what: 'the draft after the restart' });

    await hostCall(panel, 'settings.set', {
      map: { providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }], activeProvider: 'p1' },
    });
    await panel.click(tid('send'));
    await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.index !== null), { timeoutMs: 20_000, what: 'the reply' });
    assert.equal(live(k)[0].text, DRAFT, 'the draft was sent as written');
    await waitFor(() => (setting(k, 'composerDraft') === undefined ? true : null), { timeoutMs: 10_000, what: 'the draft cleared in the host' });
  } finally {
    await k?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await mock.close();
  }
});

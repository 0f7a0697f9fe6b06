// boot.js (a classic script) sends the panel's first history.get itself, before lib/bridge.js has
// loaded; sidepanel.js reads its reply with bridge.js `replyToResult`. Both must stay in step.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import vm from 'node:vm';
import { fileURLToPath } from 'node:url';

import { createBridge, replyToResult } from '../lib/bridge.js';

const source = fs.readFileSync(fileURLToPath(new URL('./boot.js', import.meta.url)), 'utf8');

/** Run boot.js as a page would, with `runtime` as chrome.runtime; returns its globalThis. */
function runBoot(runtime) {
  const g = { chrome: { runtime } };
  g.globalThis = g;
  vm.runInNewContext(source, g, { filename: 'boot.js' });
  return g;
}

test('boot.js sends the message bridge.js hostCall sends for history.get with references', async () => {
  const sent = [];
  const runtime = { sendMessage: async (m) => { sent.push(m); return { ok: true, result: { entries: [] } }; } };
  const g = runBoot(runtime);
  const bridge = createBridge({ runtime: { ...runtime, onMessage: { addListener() {}, removeListener() {} } } });
  await bridge.hostCall('history.get', { images: 'ref' });
  assert.equal(sent.length, 2);
  assert.deepEqual(JSON.parse(JSON.stringify(sent[0])), JSON.parse(JSON.stringify(sent[1])));
  assert.deepEqual(replyToResult(await g.keepsakeBoot.history), { entries: [] });
});

test('boot.js: a host error arrives as the reply; a worker that does not answer rejects quietly', async () => {
  const g = runBoot({ sendMessage: async () => ({ ok: false, error: { code: 'host_not_found', message: 'no host' } }) });
  const reply = await g.keepsakeBoot.history;
  assert.throws(() => replyToResult(reply), { code: 'host_not_found' });
  const failed = runBoot({ sendMessage: () => Promise.reject(new Error('Could not establish connection')) });
  await assert.rejects(failed.keepsakeBoot.history, /Could not establish connection/);
});

test('boot.js without an extension context leaves no read (sidepanel.js reads the usual way)', () => {
  const g = runBoot({ sendMessage() { throw new Error('Extension context invalidated.'); } });
  assert.equal(g.keepsakeBoot.history, null);
});

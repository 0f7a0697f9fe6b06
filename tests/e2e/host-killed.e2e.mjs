// The host process is killed while a reply streams (the mock LLM hangs after a few deltas): the
// panel shows the host error, the user entry is already stored, Stop salvages the partial reply
// through a new host process, and the next send works (reconnect).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withKeepsake, waitFor, hostCall } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, waitForBubbles } from './panel.mjs';
import { live } from './db.mjs';

const LONG = 'Keepers trimmed the wick every four hours, logged the weather at dawn and dusk, and polished the lens.';
const PARTIAL = LONG.slice(0, 30); // 5 deltas of 6 chars, then the mock hangs
const AFTER = 'Back again: the host was restarted and this reply is stored.';

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('host killed mid-stream: error shown, user entry kept, partial salvaged, next send works', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm({
    script: (req) =>
      req.lastUserText.includes('again') ? { text: AFTER, chunkSize: 8, delayMs: 10 } : { text: LONG, chunkSize: 6, delayMs: 30, hangAfter: 5 },
  });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await hostCall(panel, 'settings.set', {
        map: { providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'm' }], activeProvider: 'p1' },
      });

      await panel.fill(tid('composer-input'), 'Tell me about the keepers');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.streaming && x.text === PARTIAL), {
        timeoutMs: 15_000,
        what: 'the partial reply streaming',
      });
      // the user entry is stored before the reply
      assert.deepEqual(live(k).map((r) => [r.role, r.text]), [['user', 'Tell me about the keepers']]);

      const pids = k.hostPids();
      assert.equal(pids.length, 1, `one host process for this browser, found ${pids}`);
      process.kill(pids[0], 'SIGKILL');
      await waitFor(() => !alive(pids[0]), { timeoutMs: 5000, what: 'the host process to die' });

      // the panel shows the host error; the stream view and the user bubble stay
      await panel.waitForSelector(`${tid('host-banner')}:not([hidden])`, { timeout: 10_000 });
      const code = await panel.getAttribute(tid('host-banner'), 'data-code');
      assert.ok(['host_exited', 'host_io', 'disconnected'].includes(code), `banner code ${code}`);
      t.diagnostic(`banner: ${code}: ${(await panel.innerText(tid('host-banner'))).replace(/\s+/g, ' ')}`);
      assert.equal(await panel.isVisible(tid('stop')), true, 'the reply is still streaming (the LLM does not know)');
      assert.deepEqual(live(k).map((r) => r.role), ['user'], 'nothing was lost');

      // Stop: the partial reply is salvaged through a new host process
      await panel.click(tid('stop'));
      const salvaged = await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.interrupted), {
        timeoutMs: 20_000,
        what: 'the salvaged (interrupted) reply bubble',
      });
      assert.equal(salvaged.find((x) => x.role === 'assistant').text, PARTIAL);
      let rows = live(k);
      assert.deepEqual(rows.map((r) => r.role), ['user', 'assistant']);
      assert.equal(rows[1].text, PARTIAL);
      assert.equal(rows[1].entry.interrupted, true);
      const newPids = k.hostPids();
      assert.equal(newPids.length, 1);
      assert.notEqual(newPids[0], pids[0], 'a new host process serves the port');
      await panel.waitForSelector(`${tid('host-banner')}[hidden]`, { state: 'attached', timeout: 10_000 });

      // the next send works
      await panel.fill(tid('composer-input'), 'Try again please');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.text === AFTER), {
        timeoutMs: 20_000,
        what: 'the reply after the reconnect',
      });
      rows = live(k);
      assert.deepEqual(rows.map((r) => r.role), ['user', 'assistant', 'user', 'assistant']);
      assert.equal(rows[3].text, AFTER);
      assert.notEqual(rows[3].entry.interrupted, true);
    });
  } finally {
    await mock.close();
  }
});

// A reply larger than 1 MiB: streamed by the mock, stored whole by the host (the browser → host
// direction has a 64 MiB cap), and read back by a reloaded panel although the host → browser
// direction is capped at 1 MiB per frame (the host chunks the reply; the port reassembles it).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withKeepsake, hostCall } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, waitForBubbles } from './panel.mjs';

const MiB = 1024 * 1024;
const SIZE = Math.round(1.25 * MiB); // chars; the filler is ASCII, so bytes too

test('a reply over 1 MiB is stored and read back through chunked host replies', { timeout: 180_000 }, async (t) => {
  const mock = await startMockLlm({ script: { huge: SIZE, chunkSize: 64 * 1024 } });
  try {
    await withKeepsake(t, { hostDebug: true }, async (k) => {
      const panel = await k.openPanel();
      await hostCall(panel, 'settings.set', {
        map: { providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'm' }], activeProvider: 'p1' },
      });
      await panel.fill(tid('composer-input'), 'Write a very long answer');
      const t0 = Date.now();
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.index !== null), {
        timeoutMs: 120_000,
        what: 'the huge reply finished and stored',
      });
      t.diagnostic(`streamed and stored in ${Date.now() - t0} ms`);

      // stored whole (the live history keeps a single entry over the 300,000-char budget, dropping
      // older entries: storage-model §4.1)
      const rows = k.sql(`SELECT position, role, content_chars, length(json_extract(entry, '$.content')) AS len,
                                 substr(json_extract(entry, '$.content'), 1, 40) AS head, length(entry) AS bytes
                          FROM history_entries ORDER BY position`);
      const a = rows.find((r) => r.role === 'assistant');
      assert.ok(a, `an assistant entry is stored: ${JSON.stringify(rows)}`);
      assert.equal(a.content_chars, SIZE);
      assert.equal(a.len, SIZE);
      assert.ok(a.bytes > MiB, `entry JSON is ${a.bytes} bytes`);
      assert.ok(a.head.startsWith('The quick brown fox'), a.head);

      // reading it back: history.get's reply is over the 1 MiB frame cap, so it arrives chunked
      const got = await hostCall(panel, 'history.get', {}, {}, { timeoutMs: 60_000 });
      const e = got.entries.find((x) => x.role === 'assistant');
      assert.equal(e.content.length, SIZE);
      assert.ok(JSON.stringify(got).length > 1_000_000, 'the reply JSON is over the chunking threshold');
      // the host's debug log: history.get replies larger than one 1 MiB frame were served (and the
      // port stayed open, so they went out as chunk frames)
      const served = [...k.hostLog().matchAll(/served op=history\.get ms=\d+(?: us=\d+)? bytes=(\d+)/g)].map((m) => Number(m[1]));
      assert.ok(served.some((n) => n > MiB), `history.get replies of ${served.join(', ')} bytes`);

      // a reloaded panel shows it
      const t1 = Date.now();
      await panel.reload();
      const b = await waitForBubbles(panel, (bs) => bs.some((x) => x.role === 'assistant' && x.text.length > SIZE * 0.9), {
        timeoutMs: 60_000,
        what: 'the huge reply rendered after reload',
      });
      t.diagnostic(`re-rendered in ${Date.now() - t1} ms`);
      const shown = b.find((x) => x.role === 'assistant');
      assert.ok(shown.text.startsWith('The quick brown fox'));
      assert.equal(shown.index, a.position);
    });
  } finally {
    await mock.close();
  }
});

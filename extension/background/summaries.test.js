// node --test extension/background/summaries.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { mapLimit, simpleBody, summaryChunkMessages, summaryMergeMessage } from './summaries.js';

const tick = () => new Promise((r) => setImmediate(r));

test('summary messages and simple bodies', () => {
  assert.deepEqual(summaryChunkMessages(['only']), ['only']);
  assert.deepEqual(summaryChunkMessages(['a', 'b']), ['[Segment 1/2]\na', '[Segment 2/2]\nb']);
  assert.equal(summaryMergeMessage(['x', 'y']), '[Segment 1]\nx\n\n[Segment 2]\ny');
  assert.deepEqual(simpleBody({ kind: 'anthropic', model: 'm' }, 'S', 'U'), {
    model: 'm',
    stream: true,
    max_tokens: 4096,
    system: 'S',
    messages: [{ role: 'user', content: 'U' }],
  });
  assert.deepEqual(simpleBody({ kind: 'responses', model: 'm' }, 'S', 'U').input, [{ role: 'user', content: 'U' }]);
  assert.equal(simpleBody({ kind: 'chat', model: 'm' }, 'S', 'U').messages[0].role, 'system');
});

test('mapLimit keeps order and bounds concurrency', async () => {
  let active = 0;
  let peak = 0;
  const out = await mapLimit([1, 2, 3, 4, 5], 2, async (x) => {
    active++;
    peak = Math.max(peak, active);
    await tick();
    active--;
    return x * 2;
  });
  assert.deepEqual(out, [2, 4, 6, 8, 10]);
  assert.equal(peak, 2);
  await assert.rejects(mapLimit([1, 2], 2, async (x) => { if (x === 2) throw new Error('boom'); return x; }), /boom/);
});

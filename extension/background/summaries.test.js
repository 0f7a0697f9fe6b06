// node --test extension/background/summaries.test.js
//
// The auto-summary flow through createSummarizer, with a fake host (attach.summaryPlan,
// attach.applySummary) and a fake provider. turns.test.js drives the same flow through
// chat.attachPage, against the fake host and the real one.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { createSummarizer } from './summaries.js';

const tick = () => new Promise((r) => setImmediate(r));

/**
 * A summarizer over a plan of `chunks`; the provider answers call i with `answer(call)` (default
 * `S<i>`), after `hold(call)` resolves when given.
 */
function setup({ chunks, family = 'generic', kind = 'chat', concurrency, answer, hold, needed = true } = {}) {
  const applied = [];
  const calls = [];
  const events = [];
  const activity = { started: 0, ended: 0, tracked: [] };
  let active = 0;
  let peak = 0;
  const storage = {
    attach: {
      summaryPlan: async ({ attachId }) => ({ attachId, needed, family, chunks }),
      applySummary: async (args) => {
        applied.push(args);
        return { applied: true };
      },
    },
  };
  const llm = {
    async streamReply({ provider, body, signal }) {
      const call = { n: calls.length + 1, provider, body, signal, user: userOf(body) };
      calls.push(call);
      active++;
      peak = Math.max(peak, active);
      try {
        if (hold) await hold(call);
        else await tick();
        return { text: answer ? answer(call) : ` S${call.n} ` };
      } finally {
        active--;
      }
    },
  };
  const summarize = createSummarizer({
    storage,
    llm,
    ...(concurrency ? { concurrency } : {}),
    progress: (e) => events.push(e),
    activity: {
      start: () => activity.started++,
      end: () => activity.ended++,
      track: (p) => {
        activity.tracked.push(p);
        return p;
      },
    },
  });
  const provider = { kind, baseUrl: 'https://x.example', apiKey: 'k', model: 'm' };
  return { summarize: (id = 'att-1') => summarize(id, provider), applied, calls, events, activity, peak: () => peak };
}

function userOf(body) {
  const list = body.messages ?? body.input;
  return list[list.length - 1].content;
}

test('one chunk → one call with the chunk as it is; the trimmed reply is applied', async () => {
  const s = setup({ chunks: ['only'], kind: 'anthropic' });
  assert.equal(await s.summarize(), true);
  assert.equal(s.calls.length, 1);
  const { body } = s.calls[0];
  assert.deepEqual(Object.keys(body).sort(), ['max_tokens', 'messages', 'model', 'stream', 'system']);
  assert.equal(body.model, 'm');
  assert.equal(body.stream, true);
  assert.equal(body.max_tokens, 4096);
  assert.match(body.system, /^You condense attached page content/);
  assert.deepEqual(body.messages, [{ role: 'user', content: 'only' }]);
  assert.deepEqual(s.applied, [{ attachId: 'att-1', summary: 'S1' }]);
  assert.deepEqual(s.events, [
    { stage: 'summary', attachId: 'att-1', done: 0, total: 1 },
    { stage: 'summary', attachId: 'att-1', done: 1, total: 1 },
  ]);
  assert.deepEqual([s.activity.started, s.activity.ended, s.activity.tracked.length], [1, 1, 1]);
});

test('N chunks → N calls marked [Segment i/N], then one merge of [Segment i] summaries in chunk order', async () => {
  // the second chunk answers first: the merge still lists the summaries in chunk order
  const gates = [];
  const s = setup({
    chunks: ['a', 'b'],
    family: 'video',
    hold: (call) => (call.n <= 2 ? new Promise((r) => (gates[call.n] = r)) : tick()),
    answer: (call) => (call.n === 1 ? 'x' : call.n === 2 ? 'y' : 'merged'),
  });
  const done = s.summarize();
  while (gates.length < 3) await tick();
  gates[2]();
  await tick();
  gates[1]();
  assert.equal(await done, true);
  assert.deepEqual(s.calls.map((c) => c.user), ['[Segment 1/2]\na', '[Segment 2/2]\nb', '[Segment 1]\nx\n\n[Segment 2]\ny']);
  const [chunk, , merge] = s.calls.map((c) => c.body);
  assert.equal(chunk.messages[0].role, 'system');
  assert.match(chunk.messages[0].content, /^You condense/);
  assert.match(chunk.messages[0].content, /timestamp marker/, 'the family rule (video)');
  assert.match(merge.messages[0].content, /^You are given summaries of consecutive segments/);
  assert.match(merge.messages[0].content, /timestamp marker/);
  assert.equal('max_tokens' in chunk, false, 'only Anthropic gets max_tokens');
  assert.deepEqual(s.applied, [{ attachId: 'att-1', summary: 'merged' }]);
  assert.deepEqual(s.events.at(-1), { stage: 'summary', attachId: 'att-1', done: 3, total: 3 });
});

test('the Responses shape: instructions and input', async () => {
  const s = setup({ chunks: ['only'], kind: 'responses' });
  await s.summarize();
  const { body } = s.calls[0];
  assert.match(body.instructions, /^You condense/);
  assert.deepEqual(body.input, [{ role: 'user', content: 'only' }]);
  assert.equal(body.messages, undefined);
});

test('at most `concurrency` chunk calls at once', async () => {
  const s = setup({ chunks: ['1', '2', '3', '4', '5'], concurrency: 2 });
  assert.equal(await s.summarize(), true);
  assert.equal(s.calls.length, 6);
  assert.equal(s.peak(), 2);
  assert.equal(s.calls.at(-1).user, [1, 2, 3, 4, 5].map((i) => `[Segment ${i}]\nS${i}`).join('\n\n'));
});

test('a failed call: no later call starts, the others are aborted, nothing is applied, progress says failed', async () => {
  const s = setup({
    chunks: ['1', '2', '3', '4'],
    concurrency: 2,
    answer: (call) => {
      if (call.n === 2) throw new Error('boom');
      return 'ok';
    },
  });
  await assert.rejects(s.summarize(), /boom/);
  assert.ok(s.calls.length <= 3, `${s.calls.length} calls`);
  assert.ok(s.calls.every((c) => c.signal.aborted));
  assert.deepEqual(s.applied, []);
  assert.equal(s.events.at(-1).note, 'failed');
  assert.deepEqual([s.activity.started, s.activity.ended], [1, 1]);
});

test('an empty reply fails the summary; a plan that needs none makes no call', async () => {
  const blank = setup({ chunks: ['only'], answer: () => '  ' });
  await assert.rejects(blank.summarize(), (e) => e.code === 'empty_summary');
  assert.deepEqual(blank.applied, []);
  const none = setup({ chunks: ['only'], needed: false });
  assert.equal(await none.summarize(), false);
  assert.equal(none.calls.length, 0);
});

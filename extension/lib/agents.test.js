// node --test extension/lib/agents.test.js
// The agent provider kinds through lib/llm.js's entry points (streamReply, listModels, ping), over real
// HTTP on 127.0.0.1 against tests/e2e/mock-agents.mjs. No assertion depends on how fast anything runs.
import test, { after, before, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import { startMockHermes, startMockOpencode } from '../../tests/e2e/mock-agents.mjs';
import { LlmError, listModels, ping, streamReply } from './llm.js';
import { AGENT_SESSION_GONE, createAgentSession, opencodeEnvelope, opencodeModel } from './agents.js';

let hermes;
let oc;
let closedPort;
let htmlSite;
before(async () => {
  hermes = await startMockHermes({ apiKey: 'hermes-key-0123456789' });
  oc = await startMockOpencode({ password: 'oc-secret' });
  const closed = http.createServer();
  await new Promise((r) => closed.listen(0, '127.0.0.1', r));
  closedPort = closed.address().port;
  await new Promise((r) => closed.close(r));
  htmlSite = http.createServer((req, res) => {
    if (req.url.startsWith('/webui/')) {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><html><body><div id="app"></div></body></html>');
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('Not Found');
    }
  });
  await new Promise((r) => htmlSite.listen(0, '127.0.0.1', r));
});
after(async () => {
  await hermes.close();
  await oc.close();
  await new Promise((r) => htmlSite.close(r));
});
beforeEach(() => {
  hermes.requests.length = 0;
  hermes.setScript({});
  oc.requests.length = 0;
  oc.setScript({});
});

const runsCard = (extra = {}) => ({ kind: 'runs', baseUrl: hermes.url, apiKey: 'hermes-key-0123456789', model: '', ...extra });
const agentCard = (extra = {}) => ({ kind: 'agent', baseUrl: oc.url, apiKey: 'oc-secret', model: 'anthropic/claude-mock', ...extra });
const RUNS_BODY = {
  input: 'What did I ask before?',
  conversation_history: [
    { role: 'user', content: 'first question\n[image]' },
    { role: 'assistant', content: 'first answer' },
  ],
  instructions: 'Be brief.',
};
const PNG_URL = 'data:image/png;base64,iVBORw0KGgo=';

async function expectLlmError(promise, check) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof LlmError, `expected an LlmError, got ${err?.stack ?? err}`);
  check(err);
  return err;
}

function collect() {
  const deltas = [];
  const events = [];
  return { deltas, events, onDelta: (d) => deltas.push(d), onEvent: (e) => events.push(e) };
}

// ------------------------------------------------------------------------------------------------ runs

test('runs: the host body goes to POST /v1/runs, the reply streams from the run events', async () => {
  hermes.setScript({ text: 'Hermes says hello, in pieces.', chunkSize: 5, reasoning: 'thinking…', tools: true, usage: { input: 12, output: 7 }, done: true });
  const c = collect();
  const r = await streamReply({ provider: runsCard({ model: 'hermes-agent', baseUrl: `${hermes.url}/v1/` }), body: RUNS_BODY, ...c });
  assert.equal(r.text, 'Hermes says hello, in pieces.');
  assert.equal(r.finishReason, 'stop');
  assert.equal(r.truncated, false);
  assert.deepEqual(r.usage, { inputTokens: 12, outputTokens: 7 });
  assert.equal(r.reasoning, 'thinking…');
  assert.ok(c.deltas.length >= 5, `streamed in deltas: ${c.deltas.length}`);
  assert.equal(c.deltas.join(''), r.text);
  assert.deepEqual(c.events.filter((e) => e.type === 'tool').map((e) => [e.phase, e.tool]), [['started', 'web_search'], ['completed', 'web_search']]);
  const [post, events] = hermes.requests;
  assert.equal(post.kind, 'runs');
  assert.equal(post.path, '/v1/runs', 'a base URL ending in /v1 is accepted');
  assert.deepEqual(post.body, { ...RUNS_BODY, model: 'hermes-agent' });
  assert.equal(post.headers.authorization, 'Bearer hermes-key-0123456789');
  assert.match(events.path, /^\/v1\/runs\/run_\d+\/events$/);
  assert.equal(events.kind, 'runs.events');
});

test('runs: bodyText is sent as the body (with the card model)', async () => {
  const r = await streamReply({ provider: runsCard({ model: 'm1' }), bodyText: JSON.stringify(RUNS_BODY) });
  assert.match(r.text, /^Agent reply to: What did I ask before\?/);
  assert.deepEqual(hermes.requests[0].body, { ...RUNS_BODY, model: 'm1' });
});

test('runs: run.failed is a protocol error keeping the streamed text', async () => {
  hermes.setScript({ text: 'partial words', fail: 'model overloaded' });
  const e = await expectLlmError(streamReply({ provider: runsCard(), body: RUNS_BODY }), (e) => assert.equal(e.kind, 'protocol'));
  assert.equal(e.partial, 'partial words');
  assert.match(e.message, /model overloaded/);
});

test('runs: HTTP errors, a missing run_id, an HTML page instead of events', async () => {
  await expectLlmError(streamReply({ provider: runsCard({ apiKey: 'wrong' }), body: RUNS_BODY }), (e) => {
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 401);
    assert.equal(e.message, 'Invalid API key');
  });
  await expectLlmError(streamReply({ provider: runsCard(), body: { ...RUNS_BODY, input: '' } }), (e) => {
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 400);
    assert.match(e.message, /Missing 'input'/);
  });
  hermes.setScript({ noRunId: true });
  await expectLlmError(streamReply({ provider: runsCard(), body: RUNS_BODY }), (e) => {
    assert.equal(e.kind, 'protocol');
    assert.match(e.message, /run_id/);
  });
  hermes.setScript({ html: true });
  await expectLlmError(streamReply({ provider: runsCard(), body: RUNS_BODY }), (e) => {
    assert.equal(e.kind, 'protocol');
    assert.match(e.message, /event stream.*text\/html/);
  });
  hermes.setScript({ eventsStatus: 500, message: 'events exploded' });
  await expectLlmError(streamReply({ provider: runsCard(), body: RUNS_BODY }), (e) => {
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 500);
    assert.equal(e.message, 'events exploded');
  });
});

test('runs: malformed event data, a stream cut mid-way, a stream that ends early', async () => {
  hermes.setScript({ text: 'abcdefghijkl', chunkSize: 4, malformedAfter: 2 });
  await expectLlmError(streamReply({ provider: runsCard(), body: RUNS_BODY }), (e) => {
    assert.equal(e.kind, 'protocol');
    assert.equal(e.partial, 'abcdefgh');
  });
  hermes.setScript({ text: 'abcdefghijkl', chunkSize: 4, disconnectAfter: 1 });
  await expectLlmError(streamReply({ provider: runsCard(), body: RUNS_BODY }), (e) => {
    assert.equal(e.kind, 'network');
    assert.equal(e.partial, 'abcd');
  });
  hermes.setScript({ text: 'abcdefghijkl', chunkSize: 4, endAfter: 2 });
  const r = await streamReply({ provider: runsCard(), body: RUNS_BODY });
  assert.equal(r.truncated, true);
  assert.equal(r.finishReason, 'other');
  assert.equal(r.text, 'abcdefgh');
});

test('runs: Stop aborts with the partial text and stops the run on the server', async () => {
  hermes.setScript({ text: 'one two three four', chunkSize: 4, hangAfter: 2 });
  const ctrl = new AbortController();
  const e = await expectLlmError(
    streamReply({
      provider: runsCard(),
      body: RUNS_BODY,
      signal: ctrl.signal,
      onDelta: (_d, text) => {
        if (text === 'one two ') ctrl.abort();
      },
    }),
    (e) => assert.equal(e.kind, 'aborted'),
  );
  assert.equal(e.partial, 'one two ');
  const stop = hermes.requests.find((r) => r.kind === 'runs.stop');
  assert.ok(stop, 'POST …/stop was sent');
  assert.match(stop.path, /^\/v1\/runs\/run_\d+\/stop$/);
  assert.equal(stop.headers.authorization, 'Bearer hermes-key-0123456789');
});

test('runs: a silent server is an idle error, and the run is stopped', async () => {
  hermes.setScript({ text: 'slow answer', chunkSize: 4, hangAfter: 1 });
  await expectLlmError(streamReply({ provider: runsCard(), body: RUNS_BODY, idleMs: 200 }), (e) => {
    assert.equal(e.kind, 'idle');
    assert.equal(e.partial, 'slow');
  });
  assert.ok(hermes.requests.some((r) => r.kind === 'runs.stop'));
});

test('runs: a closed port is a network error naming the address', async () => {
  await expectLlmError(streamReply({ provider: runsCard({ baseUrl: `http://127.0.0.1:${closedPort}` }), body: RUNS_BODY }), (e) => {
    assert.equal(e.kind, 'network');
    assert.match(e.message, new RegExp(`Could not reach http://127\\.0\\.0\\.1:${closedPort}/v1/runs`));
    assert.doesNotMatch(e.message, /OLLAMA/);
  });
});

// ------------------------------------------------------------------------------------------------ agent

test('agent: envelope of the host body — text part, images as file parts, the model split', () => {
  assert.deepEqual(opencodeModel('anthropic/claude-sonnet-4/thinking'), { providerID: 'anthropic', modelID: 'claude-sonnet-4/thinking' });
  assert.equal(opencodeModel('gpt-4o'), null);
  assert.equal(opencodeModel(''), null);
  assert.deepEqual(opencodeEnvelope({ text: 'hi', images: [PNG_URL, 'data:image/jpeg;base64,/9j/'] }, 'openai/gpt-mock'), {
    parts: [
      { type: 'text', text: 'hi' },
      { type: 'file', mime: 'image/png', filename: 'image-1.png', url: PNG_URL },
      { type: 'file', mime: 'image/jpeg', filename: 'image-2.jpg', url: 'data:image/jpeg;base64,/9j/' },
    ],
    model: { providerID: 'openai', modelID: 'gpt-mock' },
  });
  assert.deepEqual(opencodeEnvelope({ text: 'x', images: [] }, 'default'), { parts: [{ type: 'text', text: 'x' }] });
});

for (const mode of ['delta', 'snapshot']) {
  test(`agent (${mode} events): one turn into a session; other sessions and the user's own parts are ignored`, async () => {
    oc.setScript({ text: 'The agent answers in several pieces.', chunkSize: 6, mode, noise: true, reasoning: 'hmm', tools: true, usage: { input: 30, output: 9 } });
    const sid = await createAgentSession(agentCard());
    assert.match(sid, /^ses_mock/);
    const c = collect();
    const r = await streamReply({ provider: agentCard(), body: { text: 'Tell me something', images: [PNG_URL] }, agentSessionId: sid, ...c });
    assert.equal(r.text, 'The agent answers in several pieces.');
    assert.equal(c.deltas.join(''), r.text, 'the streamed text is the reply (no user text, no other session)');
    assert.ok(c.deltas.length >= 5, `streamed: ${c.deltas.length} deltas`);
    assert.equal(r.finishReason, 'stop');
    assert.equal(r.truncated, false);
    assert.equal(r.agentSessionId, sid);
    assert.equal(r.reasoning, 'hmm');
    assert.deepEqual(r.usage, { inputTokens: 30, outputTokens: 9 });
    assert.ok(c.events.some((e) => e.type === 'tool' && e.tool === 'webfetch'));
    const prompt = oc.requests.find((q) => q.kind === 'prompt');
    assert.equal(prompt.path, `/session/${sid}/prompt_async`);
    assert.deepEqual(prompt.body, {
      parts: [
        { type: 'text', text: 'Tell me something' },
        { type: 'file', mime: 'image/png', filename: 'image-1.png', url: PNG_URL },
      ],
      model: { providerID: 'anthropic', modelID: 'claude-mock' },
    });
    assert.equal(prompt.headers.authorization, `Basic ${Buffer.from('opencode:oc-secret').toString('base64')}`);
    // the event stream was opened before the prompt went out
    const kinds = oc.requests.map((q) => q.kind);
    assert.ok(kinds.indexOf('event') < kinds.indexOf('prompt'), kinds.join());
  });
}

test('agent: without a session id one is created; a second turn reuses it', async () => {
  const r1 = await streamReply({ provider: agentCard({ model: '' }), body: { text: 'first', images: [] } });
  assert.match(r1.agentSessionId, /^ses_mock/);
  const r2 = await streamReply({ provider: agentCard({ model: '' }), body: { text: 'second', images: [] }, agentSessionId: r1.agentSessionId });
  assert.equal(r2.agentSessionId, r1.agentSessionId);
  assert.equal(oc.requests.filter((q) => q.kind === 'session.create').length, 1);
  assert.deepEqual(oc.sessions.get(r1.agentSessionId).prompts.map((p) => p.parts[0].text), ['first', 'second']);
  assert.equal(oc.sessions.get(r1.agentSessionId).prompts[0].model, undefined, 'no model: the server default');
});

test('agent: a session the server no longer has is an http 404 marked as gone', async () => {
  const sid = await createAgentSession(agentCard());
  oc.dropSession(sid);
  await expectLlmError(streamReply({ provider: agentCard(), body: { text: 'hello', images: [] }, agentSessionId: sid }), (e) => {
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 404);
    assert.equal(e.providerType, AGENT_SESSION_GONE);
    assert.equal(e.partial, '');
  });
});

test('agent: session.error keeps the partial text; a prompt refused; wrong password', async () => {
  const sid = await createAgentSession(agentCard());
  oc.setScript({ text: 'half an answer', chunkSize: 5, fail: 'provider exploded' });
  await expectLlmError(streamReply({ provider: agentCard(), body: { text: 'go', images: [] }, agentSessionId: sid }), (e) => {
    assert.equal(e.kind, 'protocol');
    assert.match(e.message, /provider exploded/);
    assert.equal(e.partial, 'half an answer');
  });
  oc.setScript({ status: 400, message: 'Model not found: nope/nope' });
  await expectLlmError(streamReply({ provider: agentCard(), body: { text: 'go', images: [] }, agentSessionId: sid }), (e) => {
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 400);
    assert.equal(e.message, 'Model not found: nope/nope');
  });
  await expectLlmError(createAgentSession(agentCard({ apiKey: 'wrong' })), (e) => {
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 401);
  });
});

test('agent: malformed events, a cut stream, a stream that ends early', async () => {
  const sid = await createAgentSession(agentCard());
  oc.setScript({ text: 'abcdefghijkl', chunkSize: 4, malformedAfter: 2 });
  await expectLlmError(streamReply({ provider: agentCard(), body: { text: 'x', images: [] }, agentSessionId: sid }), (e) => {
    assert.equal(e.kind, 'protocol');
    assert.equal(e.partial, 'abcdefgh');
  });
  oc.setScript({ text: 'abcdefghijkl', chunkSize: 4, disconnectAfter: 1 });
  await expectLlmError(streamReply({ provider: agentCard(), body: { text: 'x', images: [] }, agentSessionId: sid }), (e) => {
    assert.equal(e.kind, 'network');
    assert.equal(e.partial, 'abcd');
  });
  oc.setScript({ text: 'abcdefghijkl', chunkSize: 4, endAfter: 2 });
  const r = await streamReply({ provider: agentCard(), body: { text: 'x', images: [] }, agentSessionId: sid });
  assert.equal(r.truncated, true);
  assert.equal(r.text, 'abcdefgh');
});

test('agent: Stop aborts with the partial text and aborts the session on the server', async () => {
  const sid = await createAgentSession(agentCard());
  oc.setScript({ text: 'one two three four', chunkSize: 4, hangAfter: 2 });
  const ctrl = new AbortController();
  const e = await expectLlmError(
    streamReply({
      provider: agentCard(),
      body: { text: 'x', images: [] },
      agentSessionId: sid,
      signal: ctrl.signal,
      onDelta: (_d, text) => {
        if (text === 'one two ') ctrl.abort();
      },
    }),
    (e) => assert.equal(e.kind, 'aborted'),
  );
  assert.equal(e.partial, 'one two ');
  const abort = oc.requests.find((q) => q.kind === 'abort');
  assert.ok(abort, 'POST …/abort was sent');
  assert.equal(abort.path, `/session/${sid}/abort`);
});

test('agent: a closed port is a network error', async () => {
  await expectLlmError(streamReply({ provider: agentCard({ baseUrl: `http://127.0.0.1:${closedPort}` }), body: { text: 'x', images: [] } }), (e) => {
    assert.equal(e.kind, 'network');
    assert.match(e.message, /Could not reach/);
  });
});

// ------------------------------------------------------------------------------------------------ models, ping

test('listModels: Hermes /v1/models, opencode /config/providers as provider/model', async () => {
  assert.deepEqual(await listModels(runsCard()), { ok: true, models: ['hermes-agent'] });
  assert.deepEqual(await listModels(agentCard()), { ok: true, models: ['anthropic/claude-mock', 'openai/gpt-mock'] });
  const bad = await listModels(agentCard({ baseUrl: `http://127.0.0.1:${htmlSite.address().port}/webui` }));
  assert.equal(bad.ok, false);
  assert.match(bad.detail, /did not answer with a model list/);
});

test('ping: OK on each server; a named reason for an HTML page, a 404, a closed port, a wrong key', async () => {
  const site = `http://127.0.0.1:${htmlSite.address().port}`;
  const ok1 = await ping(runsCard());
  assert.equal(ok1.ok, true, ok1.detail);
  assert.equal(ok1.detail, 'OK: hermes-agent, 1 model(s) listed');
  const ok2 = await ping(agentCard());
  assert.equal(ok2.ok, true, ok2.detail);
  assert.equal(ok2.detail, 'OK: opencode server 0.0.0-mock');
  for (const kind of ['runs', 'agent']) {
    const card = kind === 'runs' ? runsCard : agentCard;
    const html = await ping(card({ baseUrl: `${site}/webui` }));
    assert.equal(html.ok, false);
    assert.match(html.detail, /answered HTTP 200 with an HTML page \(text\/html\), not an? .*Is the base URL right\?/, html.detail);
    const none = await ping(card({ baseUrl: `${site}/nothing` }));
    assert.equal(none.ok, false);
    assert.equal(none.status, 404);
    assert.match(none.detail, /answered HTTP 404: nothing there\. Is the base URL right\?/);
    const closed = await ping(card({ baseUrl: `http://127.0.0.1:${closedPort}` }));
    assert.equal(closed.ok, false);
    assert.match(closed.detail, /^Could not reach http:\/\/127\.0\.0\.1:\d+\/.+\(.+\)\. Likely: the server is not running/);
  }
  const wrong = await ping(runsCard({ apiKey: 'nope' }));
  assert.equal(wrong.ok, false);
  assert.equal(wrong.status, 401);
  assert.match(wrong.detail, /Invalid API key/);
});

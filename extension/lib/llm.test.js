// node --test extension/lib/llm.test.js
// Real HTTP on 127.0.0.1 against tests/e2e/mock-llm.mjs, plus a few in-process Response stubs for byte-exact
// chunking. No assertion depends on how fast anything runs.
import test, { after, before, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import { startMockLlm } from '../../tests/e2e/mock-llm.mjs';
import { LlmError, createSseParser, extractError, listModels, ping, streamReply } from './llm.js';

let mock;
before(async () => {
  mock = await startMockLlm();
});
after(async () => {
  await mock.close();
});
beforeEach(() => {
  mock.requests.length = 0;
  mock.setScript({});
});

const KINDS = ['chat', 'responses', 'anthropic'];
const USER = 'Hello from the test suite, with a long enough text';
const provider = (kind, extra = {}) => ({
  kind,
  baseUrl: kind === 'anthropic' ? mock.url : `${mock.url}/v1`,
  apiKey: 'sk-test',
  model: 'mock-model',
  ...extra,
});
const bodyFor = (kind) =>
  kind === 'chat'
    ? { messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: USER }] }
    : kind === 'responses'
      ? { instructions: 'sys', input: [{ role: 'user', content: USER }] }
      : { system: 'sys', messages: [{ role: 'user', content: USER }] };
const expectedText = `Mock reply to: ${USER.slice(0, 40)}`;

async function expectLlmError(promise, check) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof LlmError, `expected an LlmError, got ${err}`);
  check(err);
  return err;
}

// ------------------------------------------------------------------------------------------------ request shape

/** What streamReply sends for `provider` and `body`: `{url, headers, body}` (the fetch is stopped there). */
async function sent(provider, body) {
  let req = null;
  const fetchImpl = async (url, init) => {
    req = { url, headers: { ...init.headers }, body: JSON.parse(init.body) };
    throw new TypeError('stop here');
  };
  await assert.rejects(streamReply({ provider, body, fetchImpl }), (e) => e.kind === 'network');
  return req;
}

/** The first URL ping asks for `provider`. */
async function pinged(provider) {
  let first = null;
  await ping(provider, async (url) => {
    first ??= url;
    throw new TypeError('stop here');
  });
  return first;
}

test('endpoints and headers', async () => {
  const url = async (provider) => (await sent(provider, {})).url;
  assert.equal(await url({ kind: 'chat', baseUrl: 'https://api.openai.com/v1/' }), 'https://api.openai.com/v1/chat/completions');
  assert.equal(await url({ kind: 'chat', baseUrl: 'http://localhost:11434/v1' }), 'http://localhost:11434/v1/chat/completions');
  assert.equal(await url({ kind: 'responses', baseUrl: 'https://api.openai.com/v1' }), 'https://api.openai.com/v1/responses');
  assert.equal(await url({ kind: 'anthropic', baseUrl: 'https://api.anthropic.com' }), 'https://api.anthropic.com/v1/messages');
  assert.equal(await url({ kind: 'anthropic', baseUrl: 'https://api.anthropic.com/' }), 'https://api.anthropic.com/v1/messages');
  assert.equal(await url({ kind: 'anthropic', baseUrl: 'https://api.anthropic.com/v1' }), 'https://api.anthropic.com/v1/messages');
  assert.equal(await url({ kind: 'anthropic', baseUrl: 'https://proxy.example/anthropic/v1/' }), 'https://proxy.example/anthropic/v1/messages');
  assert.equal(await url({ kind: 'anthropic', baseUrl: '' }), 'https://api.anthropic.com/v1/messages');
  assert.equal(await url({ kind: 'chat' }), 'https://api.openai.com/v1/chat/completions');
  assert.equal(await pinged({ kind: 'chat', baseUrl: 'https://x/v1' }), 'https://x/v1/models');

  const a = await sent({ kind: 'anthropic', apiKey: 'k', model: 'claude' }, { messages: [], max_tokens: 100 });
  assert.deepEqual(a.body, { messages: [], max_tokens: 100, model: 'claude', stream: true });
  assert.equal(a.headers['x-api-key'], 'k');
  assert.equal(a.headers['anthropic-version'], '2023-06-01');
  assert.equal(a.headers['anthropic-dangerous-direct-browser-access'], 'true');
  assert.equal(a.headers.authorization, undefined);
  assert.equal((await sent({ kind: 'anthropic' }, {})).body.max_tokens, 4096);
  assert.equal((await sent({ kind: 'anthropic' }, {})).headers['x-api-key'], undefined);
  const c = await sent({ kind: 'chat', apiKey: '', model: '' }, { model: 'from-body', messages: [] });
  assert.equal(c.headers.authorization, undefined);
  assert.equal(c.body.model, 'from-body');
  assert.equal(c.body.max_tokens, undefined);
  assert.equal((await sent({ kind: 'chat', apiKey: 'sk' }, {})).headers.authorization, 'Bearer sk');
});

test('extractError', () => {
  assert.deepEqual(extractError(401, '{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}'), {
    message: 'bad key',
    providerType: 'invalid_request_error',
  });
  assert.deepEqual(extractError(401, '{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}'), {
    message: 'invalid x-api-key',
    providerType: 'authentication_error',
  });
  assert.equal(extractError(400, '{"error":"model not found"}').message, 'model not found');
  assert.equal(extractError(422, '{"detail":[{"msg":"field required"}]}').message, 'field required');
  assert.equal(extractError(500, 'plain failure').message, 'plain failure');
  assert.equal(extractError(502, '<html><body>Bad gateway</body></html>', 'Bad Gateway').message, 'HTTP 502 Bad Gateway');
  assert.equal(extractError(503, '').message, 'HTTP 503');
});

// ------------------------------------------------------------------------------------------------ happy paths

for (const kind of KINDS) {
  test(`${kind}: happy path streams the reply and sends the right request`, async () => {
    const deltas = [];
    const events = [];
    const r = await streamReply({
      provider: provider(kind),
      body: bodyFor(kind),
      onDelta: (d, soFar) => deltas.push([d, soFar]),
      onEvent: (e) => events.push(e.type),
    });
    assert.equal(r.text, expectedText);
    assert.equal(r.finishReason, 'stop');
    assert.equal(r.truncated, false);
    // OpenAI chat streams report usage only with stream_options.include_usage (not sent by default).
    if (kind === 'chat') assert.equal(r.usage, undefined);
    else assert.ok(r.usage && typeof r.usage.outputTokens === 'number');
    assert.equal(deltas.map((d) => d[0]).join(''), expectedText);
    assert.equal(deltas.at(-1)[1], expectedText);
    assert.ok(deltas.length > 1, 'streamed in several deltas');
    assert.ok(events.length > deltas.length);

    assert.equal(mock.requests.length, 1);
    const req = mock.requests[0];
    assert.equal(req.method, 'POST');
    assert.equal(req.path, kind === 'chat' ? '/v1/chat/completions' : kind === 'responses' ? '/v1/responses' : '/v1/messages');
    assert.equal(req.body.model, 'mock-model');
    assert.equal(req.body.stream, true);
    assert.equal(req.headers['content-type'], 'application/json');
    if (kind === 'anthropic') {
      assert.equal(req.headers['x-api-key'], 'sk-test');
      assert.equal(req.headers['anthropic-version'], '2023-06-01');
      assert.equal(req.headers['anthropic-dangerous-direct-browser-access'], 'true');
      assert.equal(req.headers.authorization, undefined);
      assert.equal(req.body.max_tokens, 4096);
      assert.deepEqual(req.body.messages, bodyFor(kind).messages);
      assert.equal(req.body.system, 'sys');
    } else {
      assert.equal(req.headers.authorization, 'Bearer sk-test');
      assert.equal(req.headers['x-api-key'], undefined);
      if (kind === 'chat') assert.deepEqual(req.body.messages, bodyFor(kind).messages);
      else {
        assert.deepEqual(req.body.input, bodyFor(kind).input);
        assert.equal(req.body.instructions, 'sys');
      }
    }
  });

  test(`${kind}: length finish`, async () => {
    mock.setScript({ finish: 'length' });
    const r = await streamReply({ provider: provider(kind), body: bodyFor(kind) });
    assert.equal(r.finishReason, 'length');
    assert.equal(r.truncated, false);
    assert.equal(r.text, expectedText);
  });

  test(`${kind}: bytes split one at a time, CRLF, comments, multi-byte text`, async () => {
    const text = 'héllo 世界 🎉 [00:05] ünïcödé — ok\nline two';
    mock.setScript({ text, splitBytes: 1, crlf: true, comments: true, chunkSize: 3 });
    const r = await streamReply({ provider: provider(kind), body: bodyFor(kind) });
    assert.equal(r.text, text);
    assert.equal(r.finishReason, 'stop');
  });

  test(`${kind}: HTTP 401 carries the provider's message`, async () => {
    mock.setScript({ status: 401 });
    await expectLlmError(streamReply({ provider: provider(kind), body: bodyFor(kind) }), (e) => {
      assert.equal(e.kind, 'http');
      assert.equal(e.status, 401);
      assert.equal(e.message, kind === 'anthropic' ? 'invalid x-api-key' : 'Incorrect API key provided.');
      assert.equal(e.providerType, kind === 'anthropic' ? 'authentication_error' : 'invalid_request_error');
      assert.equal(e.partial, '');
    });
  });

  test(`${kind}: HTTP 429 with Retry-After`, async () => {
    mock.setScript({ status: 429, retryAfter: 7, error: { message: 'Slow down' } });
    await expectLlmError(streamReply({ provider: provider(kind), body: bodyFor(kind) }), (e) => {
      assert.equal(e.kind, 'http');
      assert.equal(e.status, 429);
      assert.equal(e.message, 'Slow down');
      assert.equal(e.retryAfter, 7);
    });
  });

  test(`${kind}: mid-stream disconnect keeps the partial text`, async () => {
    mock.setScript({ text: 'abcdefghijklmnopqrstuvwxyz', chunkSize: 3, disconnectAfter: 2 });
    const seen = [];
    await expectLlmError(
      streamReply({ provider: provider(kind), body: bodyFor(kind), onDelta: (d) => seen.push(d) }),
      (e) => {
        assert.equal(e.kind, 'network');
        assert.equal(e.partial, 'abcdef');
      },
    );
    assert.equal(seen.join(''), 'abcdef');
  });

  test(`${kind}: abort via signal keeps the partial text`, async () => {
    mock.setScript({ text: 'abcdefghijklmnopqrstuvwxyz', chunkSize: 4, hangAfter: 2 });
    const ctrl = new AbortController();
    let n = 0;
    await expectLlmError(
      streamReply({
        provider: provider(kind),
        body: bodyFor(kind),
        signal: ctrl.signal,
        onDelta: () => {
          if (++n === 2) ctrl.abort();
        },
      }),
      (e) => {
        assert.equal(e.kind, 'aborted');
        assert.equal(e.partial, 'abcdefgh');
      },
    );
  });

  test(`${kind}: idle timeout while the server hangs`, async () => {
    mock.setScript({ text: 'abcdefghijklmnopqrstuvwxyz', chunkSize: 5, hangAfter: 1 });
    await expectLlmError(streamReply({ provider: provider(kind), body: bodyFor(kind), idleMs: 150 }), (e) => {
      assert.equal(e.kind, 'idle');
      assert.equal(e.partial, 'abcde');
    });
  });

  test(`${kind}: a stream that ends without its terminal event is truncated`, async () => {
    mock.setScript({ text: 'partial answer', omitDone: true });
    const r = await streamReply({ provider: provider(kind), body: bodyFor(kind) });
    assert.equal(r.text, 'partial answer');
    assert.equal(r.truncated, true);
    assert.equal(r.finishReason, 'other');
  });

  test(`${kind}: an error event inside the stream`, async () => {
    mock.setScript({ text: 'abcdefghij', chunkSize: 2, streamError: { after: 2, message: 'Overloaded right now', type: 'overloaded_error' } });
    await expectLlmError(streamReply({ provider: provider(kind), body: bodyFor(kind) }), (e) => {
      assert.equal(e.kind, 'protocol');
      assert.equal(e.message, 'Overloaded right now');
      assert.equal(e.providerType, 'overloaded_error');
      assert.equal(e.partial, 'abcd');
    });
  });

  test(`${kind}: no key → no auth header`, async () => {
    await streamReply({ provider: provider(kind, { apiKey: '' }), body: bodyFor(kind) });
    const h = mock.requests[0].headers;
    assert.equal(h.authorization, undefined);
    assert.equal(h['x-api-key'], undefined);
  });

  test(`${kind}: ping`, async () => {
    const r = await ping(provider(kind));
    assert.equal(r.ok, true, r.detail);
    assert.ok(typeof r.ms === 'number' && r.ms >= 0);
    assert.ok(r.detail.startsWith('OK'), r.detail);
    mock.setScript({ status: 401 });
    const bad = await ping(provider(kind));
    assert.equal(bad.ok, false);
    assert.equal(bad.status, 401);
    const said = kind === 'anthropic' ? 'invalid x-api-key' : 'Incorrect API key provided.';
    assert.ok(bad.detail.startsWith(`${said} (${mock.url}/v1/`), `the provider's words and the address asked: ${bad.detail}`);
  });
}

// ------------------------------------------------------------------------------------------------ specifics

test('anthropic: a given max_tokens is kept; provider model wins over the body model', async () => {
  await streamReply({ provider: provider('anthropic'), body: { ...bodyFor('anthropic'), max_tokens: 1000, model: 'other' } });
  assert.equal(mock.requests[0].body.max_tokens, 1000);
  assert.equal(mock.requests[0].body.model, 'mock-model');
});

test('bodyText goes out byte for byte, instead of a stringified body', async () => {
  for (const kind of ['chat', 'anthropic']) {
    mock.requests.length = 0;
    const body = { ...bodyFor(kind), model: 'mock-model', stream: true, ...(kind === 'anthropic' ? { max_tokens: 321 } : {}) };
    // spacing and key order JSON.stringify would not produce
    const bodyText = JSON.stringify(body, null, 1).replace('"stream": true', '"stream":true');
    const r = await streamReply({ provider: provider(kind), bodyText, body: { ignored: true } });
    assert.equal(r.text, expectedText);
    assert.equal(mock.requests[0].rawBody, bodyText);
    assert.equal(mock.requests[0].stream, true);
  }
});

test('chat: usage is read when the body asks for it', async () => {
  const r = await streamReply({ provider: provider('chat'), body: { ...bodyFor('chat'), stream_options: { include_usage: true } } });
  assert.equal(r.text, expectedText);
  assert.equal(r.usage.inputTokens, 12);
  assert.equal(typeof r.usage.outputTokens, 'number');
});

test('huge reply (> 1 MiB) streams completely', async () => {
  const size = 1_200_000;
  mock.setScript({ huge: size });
  let deltas = 0;
  const r = await streamReply({ provider: provider('chat'), body: bodyFor('chat'), onDelta: () => deltas++ });
  assert.equal(r.text.length, size);
  assert.ok(r.text.startsWith('The quick brown fox'));
  assert.ok(deltas > 10);
  assert.equal(r.finishReason, 'stop');
});

test('aborting before the start makes no request', async () => {
  const ctrl = new AbortController();
  ctrl.abort();
  await expectLlmError(streamReply({ provider: provider('chat'), body: bodyFor('chat'), signal: ctrl.signal }), (e) => {
    assert.equal(e.kind, 'aborted');
  });
  assert.equal(mock.requests.length, 0);
});

test('idle timeout before any response headers', async () => {
  mock.setScript(() => new Promise(() => {}));
  await expectLlmError(streamReply({ provider: provider('chat'), body: bodyFor('chat'), idleMs: 150 }), (e) => {
    assert.equal(e.kind, 'idle');
    assert.equal(e.partial, '');
  });
});

test('the idle timer restarts on every chunk', async () => {
  mock.setScript({ text: 'x'.repeat(30), chunkSize: 1, delayMs: 40 });
  const r = await streamReply({ provider: provider('responses'), body: bodyFor('responses'), idleMs: 1000 });
  assert.equal(r.text, 'x'.repeat(30));
});

test('connection refused is a network error', async () => {
  const srv = http.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  await expectLlmError(
    streamReply({ provider: { kind: 'chat', baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm' }, body: {} }),
    (e) => {
      assert.equal(e.kind, 'network');
      assert.ok(e.message.startsWith(`Could not reach http://127.0.0.1:${port}/v1/chat/completions (`), e.message);
      assert.match(e.message, /Likely: the server is not running; the address, port or path in the base URL is wrong\. For Ollama, allow the extension first: set OLLAMA_ORIGINS=chrome-extension:\/\/\* and restart Ollama\.$/);
    },
  );
  const p = await ping({ kind: 'chat', baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm' });
  assert.equal(p.ok, false);
  assert.ok(p.detail.startsWith(`Could not reach http://127.0.0.1:${port}/v1/models (`), p.detail);
});

test('ping fails on what is not the provider\'s API, saying what it got', async () => {
  const pages = http.createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    if (path === '/ui/v1/models') return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>Open WebUI</title><div id="app"></div>');
    if (path === '/json/v1/models') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok","version":"1.2"}');
    if (path === '/plain/v1/models') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('hello from a web server');
    if (path === '/shape/v1/chat/completions' || path === '/shape/v1/responses' || path === '/shape/v1/messages') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    if (path === '/ollama/v1/models') return void res.writeHead(403).end();
    res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>');
  });
  await new Promise((r) => pages.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${pages.address().port}`;
  try {
    const chat = (base) => ping({ kind: 'chat', baseUrl: `${origin}${base}`, model: 'm' });
    let r = await chat('/ui/v1');
    assert.equal(r.ok, false);
    assert.equal(r.detail, `${origin}/ui/v1/models answered HTTP 200 with an HTML page (text/html), not an OpenAI-compatible model list. Is the base URL right (OpenAI-compatible servers usually answer under …/v1)?`);
    r = await chat('/json/v1');
    assert.equal(r.ok, false);
    assert.match(r.detail, /answered HTTP 200 with application\/json: “\{"status":"ok","version":"1\.2"\}”, not an OpenAI-compatible model list/);
    r = await chat('/plain/v1');
    assert.match(r.detail, /with text\/plain: “hello from a web server”/);
    r = await chat('/nothing');
    assert.equal(r.ok, false);
    assert.equal(r.status, 404);
    assert.equal(r.detail, `${origin}/nothing/chat/completions answered HTTP 404: nothing there. Is the base URL right (OpenAI-compatible servers usually answer under …/v1)?`);
    r = await chat('/ollama/v1');
    assert.equal(r.status, 403);
    assert.match(r.detail, /OLLAMA_ORIGINS=chrome-extension:\/\/\*/);
    for (const kind of ['responses', 'anthropic']) {
      r = await ping({ kind, baseUrl: `${origin}/shape${kind === 'anthropic' ? '' : '/v1'}`, model: 'm' });
      assert.equal(r.ok, false, kind);
      assert.match(r.detail, new RegExp(`answered HTTP 200 with application/json: “\\{"ok":true\\}”, not ${kind === 'responses' ? 'a Responses reply' : 'an Anthropic message'}`));
    }
  } finally {
    await new Promise((r) => pages.close(r));
  }
});

test('a JSON reply to a streaming request is read whole', async () => {
  const whole = {
    id: 'x',
    object: 'chat.completion',
    choices: [{ index: 0, message: { role: 'assistant', content: 'whole answer' }, finish_reason: 'length' }],
    usage: { prompt_tokens: 3, completion_tokens: 2 },
  };
  mock.setScript({ raw: JSON.stringify(whole), contentType: 'application/json' });
  const deltas = [];
  const r = await streamReply({ provider: provider('chat'), body: bodyFor('chat'), onDelta: (d) => deltas.push(d) });
  assert.deepEqual(r, { text: 'whole answer', finishReason: 'length', usage: { inputTokens: 3, outputTokens: 2 }, truncated: false });
  assert.deepEqual(deltas, ['whole answer']);
});

test('a 200 JSON error body is a protocol error', async () => {
  mock.setScript({ raw: JSON.stringify({ error: { message: 'quota exhausted', type: 'insufficient_quota' } }), contentType: 'application/json' });
  await expectLlmError(streamReply({ provider: provider('chat'), body: bodyFor('chat') }), (e) => {
    assert.equal(e.kind, 'protocol');
    assert.equal(e.message, 'quota exhausted');
    assert.equal(e.providerType, 'insufficient_quota');
  });
});

test('an HTML page instead of a stream is a protocol error', async () => {
  mock.setScript({ raw: '<html>login</html>', contentType: 'text/html' });
  await expectLlmError(streamReply({ provider: provider('chat'), body: bodyFor('chat') }), (e) => assert.equal(e.kind, 'protocol'));
});

test('malformed stream data is a protocol error with the partial text', async () => {
  mock.setScript({
    raw: [
      'data: {"choices":[{"index":0,"delta":{"content":"ok "}}]}\n\n',
      'data: {not json\n\n',
    ],
  });
  await expectLlmError(streamReply({ provider: provider('chat'), body: bodyFor('chat') }), (e) => {
    assert.equal(e.kind, 'protocol');
    assert.equal(e.partial, 'ok ');
  });
});

test('chat: reasoning deltas are kept apart; finish_reason without [DONE] completes', async () => {
  mock.setScript({
    raw:
      'data: {"choices":[{"index":0,"delta":{"reasoning_content":"think "}}]}\n\n' +
      'data: {"choices":[{"index":0,"delta":{"content":"answer"}}]}\n\n' +
      'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\n',
  });
  const events = [];
  const r = await streamReply({ provider: provider('chat'), body: bodyFor('chat'), onEvent: (e) => events.push(e) });
  assert.equal(r.text, 'answer');
  assert.equal(r.reasoning, 'think ');
  assert.equal(r.finishReason, 'stop');
  assert.equal(r.truncated, false);
  assert.deepEqual(r.usage, { inputTokens: 1, outputTokens: 2 });
  assert.ok(events.some((e) => e.type === 'reasoning' && e.delta === 'think '));
});

test('anthropic: other stop reasons normalise to other; thinking is reasoning', async () => {
  mock.setScript({
    raw: [
      'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}\n\n',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}\n\n',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}\n\n',
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}\n\n',
      'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ],
  });
  const r = await streamReply({ provider: provider('anthropic'), body: bodyFor('anthropic') });
  assert.deepEqual(r, { text: 'hi', finishReason: 'other', truncated: false, usage: { inputTokens: 5, outputTokens: 9 }, reasoning: 'hmm' });
});

test('responses: a top-level error event', async () => {
  mock.setScript({
    raw:
      'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"so far"}\n\n' +
      'event: error\ndata: {"type":"error","code":"context_length_exceeded","message":"Your input exceeds the context window","param":null}\n\n',
  });
  await expectLlmError(streamReply({ provider: provider('responses'), body: bodyFor('responses') }), (e) => {
    assert.equal(e.kind, 'protocol');
    assert.equal(e.message, 'Your input exceeds the context window');
    assert.equal(e.providerType, 'context_length_exceeded');
    assert.equal(e.partial, 'so far');
  });
});

test('HTTP errors with non-JSON bodies', async () => {
  const fetchImpl = async () =>
    new Response('<html><h1>502</h1></html>', { status: 502, statusText: 'Bad Gateway', headers: { 'content-type': 'text/html' } });
  await expectLlmError(streamReply({ provider: provider('chat'), body: {}, fetchImpl }), (e) => {
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 502);
    assert.equal(e.message, 'HTTP 502 Bad Gateway');
  });
});

// ------------------------------------------------------------------------------------------------ byte-exact splitting

function responseFromChunks(chunks, type = 'text/event-stream') {
  const stream = new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(ch);
      c.close();
    },
  });
  return new Response(stream, { status: 200, headers: { 'content-type': type } });
}

test('every split point of an Anthropic stream (inside UTF-8 chars, CRLF pairs, field names)', async () => {
  const sse =
    ': hello\r\n' +
    'event: message_start\r\ndata: {"type":"message_start","message":{"usage":{"input_tokens":1,"output_tokens":1}}}\r\n\r\n' +
    'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"é世🎉"}}\r\n\r\n' +
    'event: ping\rdata: {"type":"ping"}\r\r' +
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,\ndata: "delta":{"type":"text_delta","text":" ok"}}\n\n' +
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}\n\n' +
    'event: message_stop\ndata: {"type":"message_stop"}\n\n';
  const bytes = new TextEncoder().encode(sse);
  for (let cut = 1; cut < bytes.length; cut++) {
    for (const second of [bytes.length, Math.min(bytes.length, cut + 1)]) {
      const parts = [bytes.slice(0, cut), bytes.slice(cut, second), bytes.slice(second)].filter((p) => p.length);
      const r = await streamReply({ provider: provider('anthropic'), body: {}, fetchImpl: async () => responseFromChunks(parts) });
      assert.equal(r.text, 'é世🎉 ok', `cut at ${cut}/${second}`);
      assert.equal(r.finishReason, 'stop');
    }
  }
});

test('SSE parser: fields, comments, line ends, multi-line data, flush at end', () => {
  const stream =
    'retry: 100\nid: 7\n: comment\nevent: a\ndata: one\ndata:two\ndata\n\n' +
    'data: x\r\n\r\n' +
    'event: only-event\n\n' +
    'data:  leading space kept after the first\r\r' +
    'event: tail\ndata: unterminated';
  const want = [
    { event: 'a', data: 'one\ntwo\n', id: '7' },
    { event: 'message', data: 'x', id: '7' },
    { event: 'message', data: ' leading space kept after the first', id: '7' },
    { event: 'tail', data: 'unterminated', id: '7' },
  ];
  const whole = [];
  const p = createSseParser((e) => whole.push(e));
  p.push(stream);
  p.end();
  assert.deepEqual(whole, want);
  for (let i = 0; i <= stream.length; i++) {
    for (let j = i; j <= stream.length; j += 7) {
      const got = [];
      const q = createSseParser((e) => got.push(e));
      q.push(stream.slice(0, i));
      q.push(stream.slice(i, j));
      q.push(stream.slice(j));
      q.end();
      assert.deepEqual(got, want, `split ${i}/${j}`);
    }
  }
});

test('a listener that throws does not break the stream', async () => {
  const saved = console.error;
  console.error = () => {};
  try {
    const r = await streamReply({
      provider: provider('chat'),
      body: bodyFor('chat'),
      onDelta: () => {
        throw new Error('closed port');
      },
    });
    assert.equal(r.text, expectedText);
  } finally {
    console.error = saved;
  }
});

// ------------------------------------------------------------------------------------------------ ping specifics

test('ping chat: model list, unlisted model, /models missing', async () => {
  const ok = await ping(provider('chat'));
  assert.equal(ok.detail, 'OK: 2 models');
  assert.equal(mock.requests[0].method, 'GET');
  assert.equal(mock.requests[0].path, '/v1/models');
  assert.equal(mock.requests[0].headers.authorization, 'Bearer sk-test');
  const unlisted = await ping(provider('chat', { model: 'gpt-nope' }));
  assert.equal(unlisted.ok, true);
  assert.match(unlisted.detail, /not listed/);
  mock.setScript((req) => (req.kind === 'models' ? { status: 404 } : { text: 'pong' }));
  const fallback = await ping(provider('chat'));
  assert.equal(fallback.ok, true, fallback.detail);
  assert.match(fallback.detail, /pong/);
  const last = mock.requests.at(-1);
  assert.equal(last.path, '/v1/chat/completions');
  assert.equal(last.body.max_tokens, 1);
  assert.equal(last.body.stream, undefined);
});

test('ping anthropic and responses send tiny non-streaming requests', async () => {
  await ping(provider('anthropic'));
  await ping(provider('responses'));
  const [a, r] = mock.requests;
  assert.equal(a.path, '/v1/messages');
  assert.equal(a.body.max_tokens, 1);
  assert.equal(a.body.stream, undefined);
  assert.equal(a.headers['anthropic-version'], '2023-06-01');
  assert.equal(r.path, '/v1/responses');
  assert.equal(r.body.max_output_tokens, 16);
  assert.equal(r.body.stream, undefined);
});

test('ping against a key-checking server', async () => {
  const strict = await startMockLlm({ apiKey: 'sk-good' });
  try {
    const base = { kind: 'chat', baseUrl: `${strict.url}/v1`, model: 'mock-model' };
    assert.equal((await ping({ ...base, apiKey: 'sk-good' })).ok, true);
    const bad = await ping({ ...base, apiKey: 'sk-bad' });
    assert.equal(bad.ok, false);
    assert.equal(bad.status, 401);
    const an = await ping({ kind: 'anthropic', baseUrl: strict.url, model: 'm', apiKey: 'sk-good' });
    assert.equal(an.ok, true, an.detail);
  } finally {
    await strict.close();
  }
});

// ------------------------------------------------------------------------------------------------ redirects (issue 18)

/** Every header of every request `server` got, as one lower-cased text (for "was the key sent?"). */
const headerText = (server) => JSON.stringify(server.requests.map((r) => r.headers)).toLowerCase();

test('a redirect is an error naming its target, and the key never reaches the other origin (all kinds)', async () => {
  const other = await startMockLlm(); // another port: another origin
  try {
    for (const kind of KINDS) {
      for (const status of [301, 302, 307, 308]) {
        mock.requests.length = 0;
        other.requests.length = 0;
        const target = `${other.url}/v1/${kind === 'chat' ? 'chat/completions' : kind === 'responses' ? 'responses' : 'messages'}`;
        mock.setScript({ redirect: { location: target, status } });
        const p = provider(kind, { apiKey: 'sk-secret-1234' });
        const err = await expectLlmError(streamReply({ provider: p, body: bodyFor(kind) }), (e) => {
          assert.equal(e.kind, 'redirect', `${kind} ${status}: ${e.message}`);
          assert.equal(e.status, status);
          assert.equal(e.location, target);
          assert.ok(e.message.includes(target), e.message);
          assert.ok(e.message.includes(mock.url), 'names the configured origin too');
          assert.match(e.message, /does not follow redirects/);
        });
        assert.equal(err.partial, '');
        assert.equal(mock.requests.length, 1, 'the configured server got the request once');
        assert.ok(headerText(mock).includes('sk-secret-1234'), 'the key went where it was configured');
        assert.equal(other.requests.length, 0, `${kind} ${status}: nothing reached the redirect target`);
      }
    }
  } finally {
    await other.close();
  }
});

test('a redirect of a relative Location is resolved against the request URL', async () => {
  mock.setScript({ redirect: '/elsewhere/v1/chat/completions' });
  await expectLlmError(streamReply({ provider: provider('chat'), body: bodyFor('chat') }), (e) => {
    assert.equal(e.kind, 'redirect');
    assert.equal(e.location, `${mock.url}/elsewhere/v1/chat/completions`);
  });
  assert.equal(mock.requests.length, 1, 'not followed, even to the same origin');
});

test('a browser hides the redirect (opaqueredirect): nothing is sent to find out where; the key stays home', async () => {
  const other = await startMockLlm();
  try {
    const target = `${other.url}/moved/v1/messages`;
    mock.setScript({ redirect: target });
    const seen = [];
    // what Chromium answers to redirect: 'manual' (measured in tests/e2e/hardening.e2e.mjs: type
    // opaqueredirect, status 0, no headers)
    const browserLike = async (url, init) => {
      seen.push({ url, init });
      const real = await fetch(url, init); // the configured server still gets the real request
      if (init?.redirect !== 'manual') return real;
      await real.body?.cancel();
      return { type: 'opaqueredirect', status: 0, ok: false, url, headers: new Headers(), body: null };
    };
    const p = provider('anthropic', { apiKey: 'sk-ant-secret' });
    await expectLlmError(streamReply({ provider: p, body: bodyFor('anthropic'), fetchImpl: browserLike }), (e) => {
      assert.equal(e.kind, 'redirect');
      assert.equal(e.location, undefined);
      assert.equal(e.status, undefined);
      assert.ok(e.message.includes(mock.url), e.message);
      assert.match(e.message, /answered with a redirect \(the browser does not show where to\)/);
      assert.match(e.message, /your API key was not sent anywhere else/);
    });
    assert.equal(seen.length, 1, 'one request: no probe of where the redirect leads');
    assert.equal(seen[0].init.redirect, 'manual');
    assert.equal(mock.requests.length, 1);
    assert.equal(other.requests.length, 0, 'nothing reached the other origin');
  } finally {
    await other.close();
  }
});

test('ping does not follow a redirect either (models list and the tiny completion)', async () => {
  const other = await startMockLlm();
  try {
    for (const kind of KINDS) {
      mock.requests.length = 0;
      other.requests.length = 0;
      mock.setScript({ redirect: `${other.url}/v1/whatever` });
      const r = await ping(provider(kind, { apiKey: 'sk-ping-secret' }));
      assert.equal(r.ok, false, kind);
      assert.equal(r.status, 307);
      assert.ok(r.detail.includes(`${other.url}/v1/whatever`), r.detail);
      assert.equal(mock.requests.length, 1, `${kind}: one request, to the configured origin`);
      assert.equal(mock.requests[0].kind, kind === 'chat' ? 'models' : kind);
      assert.equal(other.requests.length, 0, `${kind}: nothing reached the other origin`);
    }
  } finally {
    await other.close();
  }
});

// ------------------------------------------------------------------------------------------------ the mock itself

test('mock: CORS preflight and headers', async () => {
  const pre = await fetch(`${mock.url}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: { 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
  });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), '*');
  assert.match(pre.headers.get('access-control-allow-headers'), /authorization/);
  const res = await fetch(`${mock.url}/v1/models`);
  assert.equal(res.headers.get('access-control-allow-origin'), '*');
  const j = await res.json();
  assert.equal(j.object, 'list');
  const an = await (await fetch(`${mock.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } })).json();
  assert.equal(an.data[0].type, 'model');
});

test('mock: non-stream replies in each provider shape, default stamp option', async () => {
  mock.setScript({ stamp: true });
  const post = async (path, body) =>
    (await fetch(`${mock.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
  const c = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(c.choices[0].message.content, 'Mock reply to: hi [00:05]');
  const r = await post('/v1/responses', { input: 'yo' });
  assert.equal(r.output[0].content[0].text, 'Mock reply to: yo [00:05]');
  const a = await post('/v1/messages', { messages: [{ role: 'user', content: [{ type: 'text', text: 'hey' }] }] });
  assert.equal(a.content[0].text, 'Mock reply to: hey [00:05]');
  assert.equal(a.stop_reason, 'end_turn');
  assert.equal(mock.requests.length, 3);
  assert.equal(mock.requests[2].lastUserText, 'hey');
});

test('listModels: the ids a provider lists, sorted; a page that is not a model list, or no server, says why', async () => {
  const r = await listModels(provider('chat'));
  assert.deepEqual(r, { ok: true, models: ['mock-model', 'mock-model-2'] });
  assert.equal(mock.requests.at(-1).path, '/v1/models');
  const an = await listModels(provider('anthropic'));
  assert.equal(an.ok, true, an.detail);
  assert.equal(mock.requests.at(-1).path, '/v1/models');
  assert.equal(mock.requests.at(-1).headers['x-api-key'], 'sk-test');
  const srv = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>'));
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${srv.address().port}`;
  try {
    assert.deepEqual(await listModels({ kind: 'chat', baseUrl: `${base}/v1` }), { ok: false, detail: `${base}/v1/models did not answer with a model list` });
  } finally {
    await new Promise((r) => srv.close(r));
  }
  const gone = await listModels({ kind: 'chat', baseUrl: `${base}/v1` });
  assert.equal(gone.ok, false);
  assert.ok(gone.detail.startsWith(`Could not reach ${base}/v1/models (`), gone.detail);
});

// Each provider kind through the real UI: a card made in Options and made active, an image pasted
// into the composer, a streamed reply. The mock records a request of that provider's documented
// shape carrying the image bytes; the SQLite file holds the user entry (image blob) and the reply.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { withKeepsake, waitFor } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { makePng, startPageServer } from './fixtures.mjs';
import http from 'node:http';
import {
  tid,
  waitForBubbles,
  pasteImages,
  trayCount,
  recordStreaming,
  streamStates,
  addProvider,
  activateProvider,
  openDrawer,
} from './panel.mjs';
import { live, liveImages, setting } from './db.mjs';

const KINDS = [
  {
    kind: 'anthropic',
    name: 'Mock Anthropic',
    model: 'claude-mock',
    key: 'sk-ant-e2e',
    base: (u) => u, // llm.js adds /v1/messages
    path: '/v1/messages',
    reply: 'Anthropic mock: the image is a gradient of magenta and teal, like dusk over a harbour.',
    checkHeaders(h) {
      assert.equal(h['x-api-key'], 'sk-ant-e2e');
      assert.equal(h['anthropic-version'], '2023-06-01');
      assert.equal(h.authorization, undefined);
    },
    checkBody(body, png, question) {
      assert.equal(body.model, 'claude-mock');
      assert.equal(body.stream, true);
      assert.ok(Number.isInteger(body.max_tokens) && body.max_tokens > 0, 'Anthropic requires max_tokens');
      const last = body.messages[body.messages.length - 1];
      assert.equal(last.role, 'user');
      assert.deepEqual(last.content.find((p) => p.type === 'text'), { type: 'text', text: question });
      const img = last.content.find((p) => p.type === 'image');
      assert.deepEqual(img.source, { type: 'base64', media_type: 'image/png', data: png.toString('base64') });
      for (const m of body.messages) assert.ok(['user', 'assistant'].includes(m.role), 'no system role in messages');
    },
  },
  {
    kind: 'responses',
    name: 'Mock Responses',
    model: 'gpt-mock-r',
    key: 'sk-resp-e2e',
    base: (u) => `${u}/v1`,
    path: '/v1/responses',
    reply: 'Responses mock: a small picture with soft bands of colour, nothing else in it.',
    checkHeaders(h) {
      assert.equal(h.authorization, 'Bearer sk-resp-e2e');
    },
    checkBody(body, png, question) {
      assert.equal(body.model, 'gpt-mock-r');
      assert.equal(body.stream, true);
      assert.equal(body.messages, undefined, 'Responses bodies use input, not messages');
      const last = body.input[body.input.length - 1];
      assert.equal(last.role, 'user');
      assert.deepEqual(last.content.find((p) => p.type === 'input_text'), { type: 'input_text', text: question });
      const img = last.content.find((p) => p.type === 'input_image');
      assert.equal(img.image_url, `data:image/png;base64,${png.toString('base64')}`);
      // earlier assistant replies are output_text (the API refuses input_text there)
      for (const item of body.input.filter((i) => i.role === 'assistant')) {
        const parts = typeof item.content === 'string' ? [] : item.content;
        for (const p of parts) assert.equal(p.type, 'output_text');
      }
    },
  },
  {
    kind: 'chat',
    name: 'Mock Chat',
    model: 'gpt-mock-c',
    key: 'sk-chat-e2e',
    base: (u) => `${u}/v1`,
    path: '/v1/chat/completions',
    reply: 'Chat mock: the picture is an abstract colour study.',
    checkHeaders(h) {
      assert.equal(h.authorization, 'Bearer sk-chat-e2e');
    },
    checkBody(body, png, question) {
      assert.equal(body.model, 'gpt-mock-c');
      const last = body.messages[body.messages.length - 1];
      assert.deepEqual(last.content.find((p) => p.type === 'text'), { type: 'text', text: question });
      const img = last.content.find((p) => p.type === 'image_url');
      assert.equal(img.image_url.url, `data:image/png;base64,${png.toString('base64')}`);
    },
  },
];

test('every provider kind: options card, pasted image, streamed reply, stored turn', { timeout: 180_000 }, async (t) => {
  const mock = await startMockLlm({ script: {} });
  try {
    await withKeepsake(t, {}, async (k) => {
      const opt = await k.openOptions();
      const panel = await k.openPanel();
      let expectedLength = 0;
      for (const [i, p] of KINDS.entries()) {
        await t.test(p.kind, async () => {
          mock.setScript({ text: p.reply, chunkSize: 7, delayMs: 30 });
          await opt.bringToFront();
          const id = await addProvider(opt, { name: p.name, kind: p.kind, baseUrl: p.base(mock.url), apiKey: p.key, model: p.model });
          if (setting(k, 'activeProvider') !== id) await activateProvider(opt, id);
          assert.equal(setting(k, 'activeProvider'), id);
          assert.equal(setting(k, 'activeModel'), p.model);

          await panel.bringToFront();
          // the panel's model label follows the settings change
          await waitFor(async () => (await panel.innerText(tid('model-label'))).includes(p.name), {
            timeoutMs: 10_000,
            what: `model label shows ${p.name}`,
          });
          const png = makePng(96 + i * 8, 64, { seed: 100 + i });
          const sha = crypto.createHash('sha256').update(png).digest('hex');
          const question = `(${p.kind}) What is in this picture?`;
          await pasteImages(panel, [png]);
          await waitFor(async () => (await trayCount(panel)) === 1, { timeoutMs: 5000, what: 'tray has the image' });
          await recordStreaming(panel);
          const before = mock.requests.length;
          await panel.fill(tid('composer-input'), question);
          await panel.click(tid('send'));
          await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.text === p.reply), {
            timeoutMs: 30_000,
            what: `${p.kind} reply finished`,
          });
          const partials = (await streamStates(panel)).filter((s) => s.length < p.reply.length);
          assert.ok(partials.length >= 2, `incremental: ${partials.length} partial states`);

          const reqs = mock.requests.slice(before).filter((r) => r.kind === p.kind);
          assert.equal(reqs.length, 1, `one ${p.kind} request`);
          assert.equal(reqs[0].path, p.path);
          p.checkHeaders(reqs[0].headers);
          p.checkBody(reqs[0].body, png, question);

          const rows = live(k);
          expectedLength += 2;
          assert.equal(rows.length, expectedLength);
          const [u, a] = rows.slice(-2);
          assert.equal(u.role, 'user');
          assert.equal(u.text, question);
          assert.equal(u.image_count, 1);
          assert.ok(liveImages(k).some((r) => r.position === u.position && r.sha256 === sha && r.byte_length === png.length));
          assert.equal(a.role, 'assistant');
          assert.equal(a.text, p.reply);
          assert.equal(a.entry.providerLabel, `${p.name} · ${p.model}`);
        });
      }
    });
  } finally {
    await mock.close();
  }
});

test('Ping in Options: OK on the API; a named reason for an HTML page, a 404 and a closed port', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm();
  const site = await startPageServer({
    '/webui/v1/models': { body: '<!doctype html><html><head><title>Open WebUI</title></head><body><div id="app"></div></body></html>' },
  });
  const closed = http.createServer();
  await new Promise((r) => closed.listen(0, '127.0.0.1', r));
  const closedPort = closed.address().port;
  await new Promise((r) => closed.close(r));
  const pingOf = async (opt, id) => {
    const card = opt.locator(`${tid('provider-card')}[data-id="${id}"]`);
    await card.locator(tid('provider-ping')).click();
    const result = card.locator(tid('provider-ping-result'));
    await waitFor(async () => ((await result.getAttribute('data-ok')) !== null ? true : null), { timeoutMs: 30_000, what: 'the ping result' });
    return { ok: (await result.getAttribute('data-ok')) === 'true', text: await result.innerText() };
  };
  try {
    await withKeepsake(t, {}, async (k) => {
      const opt = await k.openOptions();
      const cases = [
        ['API', `${mock.url}/v1`, true, /^OK in \d+ ms — 2 models$/],
        ['HTML page', `${site.origin}/webui/v1`, false, /^Failed after \d+ ms: http:\/\/127\.0\.0\.1:\d+\/webui\/v1\/models answered HTTP 200 with an HTML page \(text\/html\), not an OpenAI-compatible model list\. Is the base URL right/],
        ['404', `${site.origin}/nothing`, false, /^Failed after \d+ ms: http:\/\/127\.0\.0\.1:\d+\/nothing\/chat\/completions answered HTTP 404: nothing there\. Is the base URL right/],
        ['closed port', `http://127.0.0.1:${closedPort}/v1`, false, /^Failed after \d+ ms: Could not reach http:\/\/127\.0\.0\.1:\d+\/v1\/models \(.+\)\. Likely: the server is not running; .+OLLAMA_ORIGINS=chrome-extension:\/\/\*/],
      ];
      for (const [name, baseUrl, ok, shape] of cases) {
        const id = await addProvider(opt, { name, kind: 'chat', baseUrl, model: 'mock-model' });
        const r = await pingOf(opt, id);
        t.diagnostic(`${name}: ${r.text}`);
        assert.equal(r.ok, ok, `${name}: ${r.text}`);
        assert.match(r.text, shape, name);
      }
    });
  } finally {
    await mock.close();
    await site.close();
  }
});

test('the panel switcher: the models the provider lists, or any name typed, go into the next request; each chat keeps its model', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm({ script: { text: 'Switched.', chunkSize: 8, delayMs: 2 } });
  try {
    await withKeepsake(t, {}, async (k) => {
      const opt = await k.openOptions();
      await addProvider(opt, { name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, model: 'mock-model' });
      await opt.close();
      const panel = await k.openPanel();
      await waitFor(async () => ((await panel.innerText(tid('model-label'))) === 'Mock · mock-model' ? true : null), { timeoutMs: 10_000, what: 'the model label' });
      const send = async (text) => {
        const before = mock.requests.filter((r) => r.kind === 'chat').length;
        await panel.fill(tid('composer-input'), text);
        await panel.click(tid('send'));
        await waitFor(async () => (mock.requests.filter((r) => r.kind === 'chat').length > before ? true : null), { timeoutMs: 20_000, what: 'the request' });
        await waitForBubbles(panel, (b) => b.filter((x) => x.role === 'assistant' && !x.streaming && x.index !== null).length >= 1, { timeoutMs: 20_000, what: 'the reply' });
        return mock.requests.filter((r) => r.kind === 'chat').pop().body.model;
      };
      assert.equal(await send('first'), 'mock-model');

      // a listed model
      await panel.click(tid('model-label'));
      await waitFor(async () => (/2 models listed/.test(await panel.innerText(tid('switch-status'))) ? true : null), { timeoutMs: 10_000, what: 'the listed models' });
      const offered = await panel.$$eval('#switch-models option', (os) => os.map((o) => o.value));
      assert.deepEqual(offered, ['mock-model', 'mock-model-2']);
      await panel.fill(tid('switch-model'), 'mock-model-2');
      await panel.click(tid('switch-apply'));
      await waitFor(async () => ((await panel.innerText(tid('model-label'))) === 'Mock · mock-model-2' ? true : null), { timeoutMs: 10_000, what: 'the label after the switch' });
      assert.equal(await send('second'), 'mock-model-2', 'the next request names the model chosen');

      // a name the provider does not list
      await panel.click(tid('model-label'));
      await panel.fill(tid('switch-model'), 'my-finetune:7b');
      await panel.press(tid('switch-model'), 'Enter');
      await waitFor(async () => ((await panel.innerText(tid('model-label'))) === 'Mock · my-finetune:7b' ? true : null), { timeoutMs: 10_000, what: 'the typed model' });
      assert.equal(await send('third'), 'my-finetune:7b');
      assert.equal(setting(k, 'activeModel'), 'my-finetune:7b');

      // each chat keeps its model: a new chat on mock-model-2, then the first chat loaded again
      const sid = k.sql('SELECT active_session_id AS id FROM live_state WHERE id = 1')[0].id;
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { timeoutMs: 10_000, what: 'a new chat' });
      await panel.click(tid('model-label'));
      await panel.fill(tid('switch-model'), 'mock-model-2');
      await panel.click(tid('switch-apply'));
      await waitFor(async () => ((await panel.innerText(tid('model-label'))) === 'Mock · mock-model-2' ? true : null), { timeoutMs: 10_000, what: 'mock-model-2' });
      assert.equal(await send('in the second chat'), 'mock-model-2');
      await openDrawer(panel);
      await panel.locator(`${tid('session-row')}[data-id="${sid}"] ${tid('session-load')}`).click();
      await waitFor(async () => ((await panel.innerText(tid('model-label'))) === 'Mock · my-finetune:7b' ? true : null), { timeoutMs: 10_000, what: "the first chat's model back" });
      assert.match(await panel.innerText(tid('composer-note')), /This chat goes on with Mock · my-finetune:7b/);
      const before = mock.requests.filter((r) => r.kind === 'chat').length;
      await panel.fill(tid('composer-input'), 'back in the first chat');
      await panel.click(tid('send'));
      await waitFor(async () => (mock.requests.filter((r) => r.kind === 'chat').length > before ? true : null), { timeoutMs: 20_000, what: 'the request' });
      assert.equal(mock.requests.filter((r) => r.kind === 'chat').pop().body.model, 'my-finetune:7b', 'the loaded chat goes on with its own model');
    });
  } finally {
    await mock.close();
  }
});

// The agent provider kinds (issue 21) through the real UI, worker and host, against the mock servers of
// mock-agents.mjs: a `runs` card (Hermes Agent's /v1/runs) and an `agent` card (opencode's server) each
// made in Options, turns sent from the panel, replies streamed into it. The mocks record exactly the
// bodies the host built (request.build kinds `runs` and `agent`); the SQLite file holds the turns and,
// for the agent, which server session each Keepsake chat uses (the setting `agentSessions`).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withKeepsake, waitFor, hostCall } from './harness.mjs';
import { startMockHermes, startMockOpencode } from './mock-agents.mjs';
import { makePng } from './fixtures.mjs';
import { tid, waitForBubbles, pasteImages, trayCount, recordStreaming, streamStates, addProvider, activateProvider, openDrawer } from './panel.mjs';
import { live, setting, activeSessionId } from './db.mjs';

const RUN_NOTE = '（以上页面内容已在本地附上，请直接依据这些内容回答，不要再去抓取或打开其中的链接。）';
const BACKFILL_HEADER = '以下是切换到当前会话之前的对话记录，仅供参考：';

async function makeActive(k, opt, card) {
  const id = await addProvider(opt, card);
  if (setting(k, 'activeProvider') !== id) await activateProvider(opt, id);
  assert.equal(setting(k, 'activeProvider'), id);
  return id;
}

/** Send `text` and wait for the finished reply `reply`; → the distinct texts the streaming bubble showed. */
async function sendAndStream(panel, text, reply) {
  await panel.waitForSelector(`${tid('stop')}[hidden]`, { state: 'attached', timeout: 20_000 });
  await recordStreaming(panel);
  await panel.fill(tid('composer-input'), text);
  await panel.click(tid('send'));
  await waitForBubbles(
    panel,
    (b) => {
      const n = b.length;
      return n >= 2 && b[n - 1].role === 'assistant' && !b[n - 1].streaming && b[n - 1].text === reply && b[n - 2].role === 'user';
    },
    { timeoutMs: 30_000, what: `the reply to "${text}"` },
  );
  return streamStates(panel);
}

test('runs (Hermes Agent): the host-built body goes to /v1/runs; the reply streams in and is stored', { timeout: 180_000 }, async (t) => {
  const KEY = 'hermes-e2e-key-0123456789';
  const hermes = await startMockHermes({ apiKey: KEY });
  try {
    await withKeepsake(t, {}, async (k) => {
      const opt = await k.openOptions();
      await makeActive(k, opt, { name: 'Hermes', kind: 'runs', baseUrl: hermes.url, apiKey: KEY, model: '' });
      await hostCall(opt, 'settings.set', { map: { systemPrompt: 'Answer like a lighthouse keeper.' } });
      const panel = await k.openPanel();
      await waitFor(async () => ((await panel.innerText(tid('model-label'))).includes('Hermes') ? true : null), { timeoutMs: 10_000, what: 'the model label' });

      const R1 = 'The lamp is lit at dusk and trimmed at midnight, every night of the year.';
      hermes.setScript({ text: R1, chunkSize: 6, delayMs: 40, usage: { input: 40, output: 18 } });
      const states1 = await sendAndStream(panel, 'When is the lamp lit?', R1);
      assert.ok(states1.filter((s) => s.length < R1.length).length >= 2, `incremental: ${states1.length} states`);

      const R2 = 'Twice a week, with a soft cloth and spirit.';
      hermes.setScript({ text: R2, chunkSize: 5, delayMs: 40 });
      const before = hermes.requests.length;
      const states2 = await sendAndStream(panel, 'How often is the lens cleaned?', R2);
      assert.ok(states2.filter((s) => s.length < R2.length).length >= 2, `incremental: ${states2.length} states`);

      const reqs = hermes.requests.slice(before);
      const posts = reqs.filter((r) => r.kind === 'runs');
      assert.equal(posts.length, 1, 'one run per turn');
      // exactly the host's `runs` body (§8.5): input, the earlier turn flattened, the system prompt
      assert.deepEqual(posts[0].body, {
        input: 'How often is the lens cleaned?',
        conversation_history: [
          { role: 'user', content: 'When is the lamp lit?' },
          { role: 'assistant', content: R1 },
        ],
        instructions: 'Answer like a lighthouse keeper.',
      });
      assert.equal(posts[0].headers.authorization, `Bearer ${KEY}`);
      assert.equal(reqs.filter((r) => r.kind === 'runs.events').length, 1, 'the run events were read');
      assert.equal(reqs.filter((r) => r.kind === 'runs.stop').length, 0);

      const rows = live(k);
      assert.deepEqual(
        rows.map((r) => [r.role, r.text]),
        [
          ['user', 'When is the lamp lit?'],
          ['assistant', R1],
          ['user', 'How often is the lens cleaned?'],
          ['assistant', R2],
        ],
      );
      assert.equal(rows[3].entry.providerLabel, 'Hermes');
      assert.equal(rows[3].entry.interrupted, undefined);
    });
  } finally {
    await hermes.close();
  }
});

test('agent (opencode): page context and images in the turn, one server session per chat, kept in the host', { timeout: 240_000 }, async (t) => {
  const oc = await startMockOpencode();
  try {
    await withKeepsake(t, {}, async (k) => {
      const opt = await k.openOptions();
      await makeActive(k, opt, { name: 'opencode', kind: 'agent', baseUrl: oc.url, model: 'anthropic/claude-mock' });
      const panel = await k.openPanel();
      await waitFor(async () => ((await panel.innerText(tid('model-label'))).includes('opencode') ? true : null), { timeoutMs: 10_000, what: 'the model label' });
      const prompts = () => oc.requests.filter((r) => r.kind === 'prompt');
      const creates = () => oc.requests.filter((r) => r.kind === 'session.create');

      // ---- turn 1: an attached page and a pasted image
      await hostCall(panel, 'history.attach', {
        ctx: { url: 'https://example.org/lamp-room', title: 'The lamp room', mode: 'article', body: 'The lamp room holds a first-order Fresnel lens, turned by clockwork.' },
      });
      await waitFor(() => (live(k).length === 1 ? true : null), { timeoutMs: 10_000, what: 'the attached page stored' });
      const attachText = live(k)[0].text;
      assert.ok(attachText.includes('first-order Fresnel lens'));
      const png = makePng(80, 60, { seed: 21 });
      await pasteImages(panel, [png]);
      await waitFor(async () => (await trayCount(panel)) === 1, { timeoutMs: 5000, what: 'tray has the image' });
      const A1 = 'The page describes a first-order Fresnel lens; your picture is a small gradient.';
      oc.setScript({ text: A1, chunkSize: 6, delayMs: 40, usage: { input: 120, output: 20 } });
      const s1 = await sendAndStream(panel, 'What is on this page and in the picture?', A1);
      assert.ok(s1.filter((s) => s.length < A1.length).length >= 2, `incremental: ${s1.length} states`);

      assert.equal(creates().length, 1, 'a new chat gets a new agent session');
      const sid1 = [...oc.sessions.keys()][0];
      assert.equal(prompts().length, 1);
      assert.equal(prompts()[0].path, `/session/${sid1}/prompt_async`);
      // exactly the host's `agent` body (§8.6) in opencode's envelope
      assert.deepEqual(prompts()[0].body, {
        parts: [
          { type: 'text', text: `${attachText}\n\n${RUN_NOTE}\n\nWhat is on this page and in the picture?` },
          { type: 'file', mime: 'image/png', filename: 'image-1.png', url: `data:image/png;base64,${png.toString('base64')}` },
        ],
        model: { providerID: 'anthropic', modelID: 'claude-mock' },
      });
      const chat1 = activeSessionId(k);
      assert.ok(chat1);
      await waitFor(() => (setting(k, 'agentSessions')?.[chat1] ? true : null), { timeoutMs: 5000, what: 'the agent session kept' });
      assert.deepEqual(
        { baseUrl: setting(k, 'agentSessions')[chat1].baseUrl, agentSessionId: setting(k, 'agentSessions')[chat1].agentSessionId },
        { baseUrl: oc.url, agentSessionId: sid1 },
      );

      // ---- turn 2, same chat: the same agent session, only this turn's text
      const A2 = 'It is turned by clockwork, wound every four hours.';
      oc.setScript({ text: A2, chunkSize: 6, delayMs: 40 });
      await sendAndStream(panel, 'And what turns the lens?', A2);
      assert.equal(creates().length, 1, 'no new session for the same chat');
      assert.equal(prompts().length, 2);
      assert.equal(prompts()[1].path, `/session/${sid1}/prompt_async`);
      assert.deepEqual(prompts()[1].body, { parts: [{ type: 'text', text: 'And what turns the lens?' }], model: { providerID: 'anthropic', modelID: 'claude-mock' } });

      const rows = live(k);
      assert.deepEqual(
        rows.slice(1).map((r) => [r.role, r.text, r.image_count]),
        [
          ['user', 'What is on this page and in the picture?', 1],
          ['assistant', A1, 0],
          ['user', 'And what turns the lens?', 0],
          ['assistant', A2, 0],
        ],
      );
      assert.equal(rows[4].entry.providerLabel, 'opencode · anthropic/claude-mock');

      // ---- a new chat: a new agent session
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { timeoutMs: 10_000, what: 'a new chat' });
      const A3 = 'A fresh start, a fresh session.';
      oc.setScript({ text: A3, chunkSize: 6, delayMs: 30 });
      await sendAndStream(panel, 'Hello again', A3);
      assert.equal(creates().length, 2, 'the new chat got its own agent session');
      const sid2 = [...oc.sessions.keys()][1];
      assert.notEqual(sid2, sid1);
      assert.equal(prompts()[2].path, `/session/${sid2}/prompt_async`);
      assert.equal(prompts()[2].body.parts[0].text, 'Hello again', 'a new chat has nothing to backfill');
      const chat2 = activeSessionId(k);
      assert.notEqual(chat2, chat1);
      await waitFor(() => (setting(k, 'agentSessions')?.[chat2]?.agentSessionId === sid2 ? true : null), { timeoutMs: 5000, what: 'the second mapping' });
      assert.equal(setting(k, 'agentSessions')[chat1].agentSessionId, sid1, 'the first chat keeps its session');

      // ---- the first chat again, after the server lost its session: a new one, backfilled
      oc.dropSession(sid1);
      await openDrawer(panel);
      await panel.locator(`${tid('session-row')}[data-id="${chat1}"] ${tid('session-load')}`).click();
      await waitForBubbles(panel, (b) => b.some((x) => x.text === A2), { timeoutMs: 10_000, what: 'the first chat loaded' });
      const A4 = 'Picking up where we left off.';
      oc.setScript({ text: A4, chunkSize: 6, delayMs: 30 });
      await sendAndStream(panel, 'Where were we?', A4);
      assert.equal(creates().length, 3, 'a lost session is replaced');
      const sid3 = [...oc.sessions.keys()].at(-1); // sid1 was dropped
      const last = prompts().at(-1);
      assert.equal(last.path, `/session/${sid3}/prompt_async`);
      const text = last.body.parts[0].text;
      assert.ok(text.startsWith(`${BACKFILL_HEADER}\n`), text.slice(0, 80));
      // (its image was seen by then, so the host labels it instead of sending it: §6.1, §6.2)
      assert.ok(text.includes('\n用户：What is on this page and in the picture?\n'), text);
      assert.ok(text.includes(`\n助手：${A1}\n用户：And what turns the lens?\n`), text);
      assert.ok(text.includes(`\n助手：${A2}`), text);
      assert.ok(text.endsWith('\n\nWhere were we?'), text.slice(-40));
      await waitFor(() => (setting(k, 'agentSessions')?.[chat1]?.agentSessionId === sid3 ? true : null), { timeoutMs: 5000, what: 'the renewed mapping' });
      assert.equal(live(k).at(-1).text, A4);
    });
  } finally {
    await oc.close();
  }
});

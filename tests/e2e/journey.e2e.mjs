// The full journey with the mock LLM (OpenAI chat completions): provider set in Options, a local
// article attached, an image pasted, a streamed reply, kept and named / search / new chat / load, Markdown and
// JSON export, import into a fresh profile, a service-worker restart, a panel reload. After each
// step the SQLite file is read directly to prove what is stored.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { withKeepsake, launch, waitFor } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { startPageServer, makePng, ARTICLE_TITLE, ARTICLE_WORD } from './fixtures.mjs';
import {
  tid,
  bubbles,
  chips,
  waitForBubbles,
  pasteImages,
  trayCount,
  recordStreaming,
  streamStates,
  openDrawer,
  closeDrawer,
  download,
  addProvider,
} from './panel.mjs';
import { live, sessions, sessionBody, activeSessionId, liveImages, setting } from './db.mjs';

const REPLY_1 =
  'The picture shows a tall white lighthouse with a red lamp room; a cormorant rests on the gallery rail ' +
  'while the tide goes out over the flats.';
const QUESTION_1 = 'What does the picture show, and how does it relate to the article?';
const QUESTION_2 = 'Who was the last keeper?';
const REPLY_2 = 'The last keeper was Edith Marrow, who left in 1961 when the lamp was automated.';

test('journey: attach, paste, stream, kept and named, search, load, export, import, worker restart, reload', { timeout: 240_000 }, async (t) => {
  const mock = await startMockLlm({
    script: (req) =>
      req.lastUserText.includes('last keeper')
        ? { text: REPLY_2, chunkSize: 5, delayMs: 25 }
        : { text: REPLY_1, chunkSize: 6, delayMs: 40 },
  });
  const site = await startPageServer();
  const png = makePng(160, 100, { seed: 7 });
  const pngSha = crypto.createHash('sha256').update(png).digest('hex');
  const step = (name) => t.diagnostic(`${new Date().toISOString()} step: ${name}`);

  try {
    await withKeepsake(t, {}, async (k) => {
      // ---- 1. provider through the options UI
      step('provider in options');
      const opt = await k.openOptions();
      const providerId = await addProvider(opt, {
        name: 'Mock chat',
        kind: 'chat',
        baseUrl: `${mock.url}/v1`,
        apiKey: 'sk-e2e-chat',
        model: 'mock-model',
      });
      const providers = setting(k, 'providers');
      assert.equal(providers.length, 1);
      assert.deepEqual(
        { ...providers[0] },
        { id: providerId, name: 'Mock chat', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: 'sk-e2e-chat', model: 'mock-model' },
      );
      assert.equal(setting(k, 'activeProvider'), providerId, 'the first card becomes active');
      await opt.close();

      // ---- 2. the article in a tab, the panel beside it, attach the page
      step('attach the page');
      const article = await k.context.newPage();
      await article.goto(site.url);
      const panel = await k.openPanel();
      await panel.click(tid('attach-page'));
      const chip = await waitFor(async () => (await chips(panel))[0], { timeoutMs: 15_000, what: 'attach chip' });
      assert.match(chip.text, new RegExp(ARTICLE_TITLE.slice(0, 20)));
      let rows = live(k);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].role, 'user');
      assert.ok(rows[0].attach_id, 'the attach entry carries its attachId');
      assert.equal(rows[0].attach_id, chip.attachId);
      assert.ok(rows[0].text.startsWith('[Page context attached by Keepsake]'), rows[0].text.slice(0, 80));
      assert.ok(rows[0].text.includes(site.url));
      assert.ok(rows[0].text.includes(ARTICLE_WORD), 'the page text is stored');
      const att = k.sql('SELECT attach_id, json_extract(ctx, "$.url") AS url, json_extract(ctx, "$.title") AS title FROM attachments');
      assert.deepEqual(att, [{ attach_id: chip.attachId, url: site.url, title: ARTICLE_TITLE }]);

      // ---- 3. paste an image, type, send; the reply streams in
      step('paste and send');
      await pasteImages(panel, [png]);
      await waitFor(async () => (await trayCount(panel)) === 1, { timeoutMs: 5000, what: 'image in the tray' });
      await recordStreaming(panel);
      await panel.fill(tid('composer-input'), QUESTION_1);
      await panel.click(tid('send'));
      const done1 = await waitForBubbles(
        panel,
        (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.text === REPLY_1),
        { timeoutMs: 30_000, what: 'the finished reply bubble' },
      );
      const states = await streamStates(panel);
      const partials = states.filter((s) => s.length < REPLY_1.length);
      assert.ok(partials.length >= 2, `≥ 2 distinct partial states were shown, saw ${JSON.stringify(states)}`);
      for (const s of partials) assert.ok(REPLY_1.startsWith(s), `partial "${s}" is a prefix of the reply`);
      assert.equal((await trayCount(panel)), 0, 'the tray is empty after sending');
      assert.equal(await panel.inputValue(tid('composer-input')), '', 'the composer is cleared');
      const userBubble = done1.find((x) => x.role === 'user');
      assert.equal(userBubble.text, QUESTION_1);
      assert.equal(userBubble.images, 1);

      rows = live(k);
      assert.deepEqual(rows.map((r) => [r.position, r.role, r.image_count]), [
        [0, 'user', 0],
        [1, 'user', 1],
        [2, 'assistant', 0],
      ]);
      assert.equal(rows[1].text, QUESTION_1);
      const imgPart = rows[1].entry.content.find((p) => p.type === 'image_url');
      const imgUrl = typeof imgPart.image_url === 'string' ? imgPart.image_url : imgPart.image_url.url;
      assert.equal(imgUrl, `keepsake-image:sha256:${pngSha}`, 'the user entry refers to the pasted image blob');
      assert.deepEqual(
        liveImages(k).map((r) => [r.position, r.sha256, r.mime, r.byte_length]),
        [[1, pngSha, 'image/png', png.length]],
      );
      assert.equal(rows[2].text, REPLY_1);
      assert.equal(rows[2].entry.providerLabel, 'Mock chat · mock-model');
      assert.notEqual(rows[2].entry.interrupted, true);

      // the provider got an OpenAI chat body with the page context and the image as a data URL
      const chatReqs = mock.requests.filter((r) => r.kind === 'chat');
      assert.equal(chatReqs.length, 1);
      const body = chatReqs[0].body;
      assert.equal(body.model, 'mock-model');
      assert.equal(body.stream, true);
      assert.equal(chatReqs[0].headers.authorization, 'Bearer sk-e2e-chat');
      assert.ok(Array.isArray(body.messages));
      const last = body.messages[body.messages.length - 1];
      assert.equal(last.role, 'user');
      assert.ok(Array.isArray(last.content), 'a user turn with an image is an array of parts');
      assert.deepEqual(last.content.find((p) => p.type === 'text'), { type: 'text', text: QUESTION_1 });
      const sentImage = last.content.find((p) => p.type === 'image_url');
      assert.equal(sentImage.image_url.url, `data:image/png;base64,${png.toString('base64')}`);
      assert.ok(
        body.messages.some((m) => JSON.stringify(m.content).includes(ARTICLE_WORD)),
        'the attached page text was sent',
      );

      // ---- 4. the chat is in the drawer already (kept from its first message); name it there
      step('kept and named');
      await openDrawer(panel);
      await waitFor(async () => (await panel.locator(tid('session-row')).count()) === 1, {
        timeoutMs: 10_000,
        what: 'one session row',
      });
      let saved = sessions(k);
      assert.equal(saved.length, 1);
      const sid = saved[0].id;
      assert.equal(saved[0].entry_count, 3);
      assert.deepEqual(
        sessionBody(k, sid).map((r) => [r.role, r.image_count]),
        [
          ['user', 0],
          ['user', 1],
          ['assistant', 0],
        ],
      );
      assert.equal(activeSessionId(k), sid, 'the live chat is its session');
      await panel.click(tid('name-session'));
      await panel.fill(tid('name-input'), 'Saltmarsh journey');
      await panel.click(tid('name-save'));
      await panel.waitForSelector(tid('name-result'), { timeout: 10_000 });
      await waitFor(() => sessions(k)[0].name === 'Saltmarsh journey', { timeoutMs: 10_000, what: 'the name in the database' });
      assert.equal(sessions(k).length, 1, 'naming made no copy');
      await waitFor(async () => (await panel.locator(tid('session-title')).innerText()) === 'Saltmarsh journey', {
        timeoutMs: 10_000,
        what: 'the panel title follows the name',
      });
      saved = sessions(k);

      // ---- 5. search by a word of the reply: content hint and snippet
      step('search');
      await panel.fill(tid('session-search'), 'cormorant');
      await panel.press(tid('session-search'), 'Enter');
      const hit = panel.locator(`${tid('session-row')}[data-content-match="true"]`);
      await hit.waitFor({ timeout: 10_000 });
      assert.equal(await panel.locator(tid('session-row')).count(), 1);
      assert.match(await hit.locator(tid('session-hint')).innerText(), /Match in messages/);
      const snippet = await hit.locator(tid('session-snippet')).innerText();
      assert.match(snippet, /cormorant/);
      assert.equal(await hit.locator(`${tid('session-snippet')} mark`).first().innerText(), 'cormorant');
      const miss = 'zebrafinch';
      await panel.fill(tid('session-search'), miss);
      await panel.press(tid('session-search'), 'Enter');
      await panel.locator(tid('session-empty')).waitFor({ timeout: 10_000 });
      assert.equal(k.sql(`SELECT count(*) AS n FROM search_text WHERE text LIKE '%cormorant%'`)[0].n, 1);

      // ---- 6. new chat: the panel empties, the session stays
      step('new chat');
      await panel.fill(tid('session-search'), '');
      await panel.press(tid('session-search'), 'Escape');
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { timeoutMs: 10_000, what: 'no bubbles after New chat' });
      assert.equal((await chips(panel)).length, 0);
      assert.equal(live(k).length, 0);
      assert.equal(activeSessionId(k), '');
      saved = sessions(k);
      assert.equal(saved.length, 1, 'New chat left the chat in its session, no duplicate');
      assert.equal(saved[0].entry_count, 3);

      // ---- 7. load the saved session back
      step('load');
      await openDrawer(panel);
      await panel.locator(`${tid('session-row')}[data-id="${sid}"] ${tid('session-load')}`).click();
      const reloaded = await waitForBubbles(
        panel,
        (b) => b.filter((x) => !x.streaming).length === 2 && b.some((x) => x.text === REPLY_1),
        { timeoutMs: 15_000, what: 'the loaded conversation' },
      );
      assert.deepEqual(
        reloaded.map((b) => [b.role, b.index, b.images]),
        [
          ['user', 1, 1],
          ['assistant', 2, 0],
        ],
      );
      assert.equal((await chips(panel)).length, 1, 'the attach chip is back');
      assert.equal(live(k).length, 3);
      assert.equal(activeSessionId(k), sid);

      // ---- 8. export Markdown and JSON
      step('export');
      await openDrawer(panel);
      const row = panel.locator(`${tid('session-row')}[data-id="${sid}"]`);
      const md = await download(panel, () => row.locator(tid('export-md')).click());
      assert.match(md.name, /\.md$/);
      assert.ok(md.text.includes(QUESTION_1), 'Markdown has the question');
      assert.ok(md.text.includes(REPLY_1), 'Markdown has the reply');
      const js = await download(panel, () => row.locator(tid('export-json')).click());
      assert.match(js.name, /\.json$/);
      const doc = JSON.parse(js.text);
      assert.equal(doc.format, 'keepsake.sessions');
      assert.equal(doc.version, 2);
      assert.equal(doc.sessions.length, 1);
      assert.equal(doc.sessions[0].id, sid);
      assert.equal(doc.sessions[0].entries.length, 3);
      assert.equal(doc.images[pngSha].mime, 'image/png');
      assert.equal(doc.images[pngSha].data, png.toString('base64'));

      // ---- 9. import the JSON export into a fresh profile and data dir
      step('import into a fresh profile');
      const k2 = await launch({ name: `${k.name}-import` });
      try {
        assert.notEqual(k2.dbPath, k.dbPath);
        const p2 = await k2.openPanel();
        await openDrawer(p2);
        await p2.locator(tid('session-empty')).waitFor({ timeout: 10_000 });
        await p2.setInputFiles(tid('import-json'), js.path);
        await p2.waitForSelector(tid('import-result'), { timeout: 15_000 });
        assert.match(await p2.locator(tid('import-result')).innerText(), /Imported/);
        await p2.locator(`${tid('session-row')}[data-id="${sid}"]`).waitFor({ timeout: 10_000 });
        const s2 = sessions(k2);
        assert.deepEqual(
          s2.map((s) => [s.id, s.name, s.entry_count]),
          [[sid, saved[0].name, 3]],
        );
        assert.equal(k2.sql(`SELECT count(*) AS n FROM images WHERE sha256 = '${pngSha}'`)[0].n, 1);
        await p2.locator(`${tid('session-row')}[data-id="${sid}"] ${tid('session-load')}`).click();
        await waitForBubbles(p2, (b) => b.some((x) => x.text === REPLY_1) && b.some((x) => x.images === 1), {
          timeoutMs: 15_000,
          what: 'the imported session shown in the fresh profile',
        });
        assert.equal(live(k2).length, 3);
      } catch (e) {
        await k2.collectArtifacts(`FAILED: ${e.message}`).catch(() => {});
        throw e;
      } finally {
        await k2.close();
      }

      // ---- 10. stop the service worker; the next send restarts it and works
      step('worker restart');
      await closeDrawer(panel);
      const hostsBefore = k.hostPids();
      const { statuses } = await k.stopWorker();
      assert.ok(statuses.includes('stopped'), `CDP statuses ${statuses}`);
      await recordStreaming(panel);
      await panel.fill(tid('composer-input'), QUESTION_2);
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.text === REPLY_2), {
        timeoutMs: 30_000,
        what: 'the reply after the worker restart',
      });
      assert.ok(await k.workerIsFresh(), 'the worker that answered is a new instance');
      const hostsAfter = k.hostPids();
      t.diagnostic(`host pids before ${hostsBefore} after ${hostsAfter}`);
      rows = live(k);
      assert.deepEqual(
        rows.map((r) => r.role),
        ['user', 'user', 'assistant', 'user', 'assistant'],
      );
      assert.equal(rows[3].text, QUESTION_2);
      assert.equal(rows[4].text, REPLY_2);
      assert.equal(mock.requests.filter((r) => r.kind === 'chat').length, 2);
      // the second request carries the whole conversation (history from the host)
      const body2 = mock.requests.filter((r) => r.kind === 'chat')[1].body;
      assert.ok(body2.messages.some((m) => m.role === 'assistant' && JSON.stringify(m.content).includes('cormorant')));

      // ---- 11. reload the panel: the conversation is still shown
      step('reload');
      await panel.reload();
      const after = await waitForBubbles(panel, (b) => b.length === 4, { timeoutMs: 15_000, what: '4 bubbles after reload' });
      assert.deepEqual(
        after.map((b) => [b.role, b.index, b.text.slice(0, 20)]),
        [
          ['user', 1, QUESTION_1.slice(0, 20)],
          ['assistant', 2, REPLY_1.slice(0, 20)],
          ['user', 3, QUESTION_2.slice(0, 20)],
          ['assistant', 4, REPLY_2.slice(0, 20)],
        ],
      );
      assert.equal(after[0].images, 1);
      assert.equal((await chips(panel)).length, 1);
      assert.equal(live(k).length, 5);
    });
  } finally {
    await mock.close();
    await site.close();
  }
});

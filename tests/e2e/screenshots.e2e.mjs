// Screenshots for the README, taken from the real extension driven like a person would:
//   sidepanel-conversation.png  the side panel (420×800) with an attached page, pasted images and a
//                               Markdown reply
//   drawer-search.png           the chats drawer searching the full text of every chat
//   drawer-trash.png            the drawer's "Recently deleted" view (restore, delete for good)
//   sidepanel-versions.png      a regenerated reply with its "‹ 2 / 2 ›" versions and a message
//                               that was not answered, with Retry
//   options-host.png            the options page's Host panel
//   options-backups.png         Options → Backups: the daily copy and a "Back up now" copy, with Restore
//   sidepanel-pdf.png           a 10-page PDF attached (its figures shown) and a reply citing pages
//   sidepanel-video.png         a video's caption transcript attached and a reply whose [mm:ss]
//                               pills seek the video
// They are written to artifacts/screenshots/ on every run, and to docs/screenshots/ (committed)
// when KEEPSAKE_E2E_UPDATE_SCREENSHOTS=1 (`tests/e2e/run.sh --screenshots`), so a normal run
// never dirties the work tree.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { withKeepsake, waitFor, hostCall, ARTIFACTS, SCREENSHOTS } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { startPageServer, makePng, makeWebmVideo } from './fixtures.mjs';
import { makePdf } from './pdf-fixture.mjs';
import {
  tid,
  waitForBubbles,
  pasteImages,
  trayCount,
  chips,
  openDrawer,
  closeDrawer,
  addProvider,
} from './panel.mjs';
import { live, sessions, trash } from './db.mjs';

const UPDATE = process.env.KEEPSAKE_E2E_UPDATE_SCREENSHOTS === '1';

const REPLY = `Both pictures match the article's description of **Saltmarsh Point**:

- The first shows the light at dusk, the lamp room lit, as in Edith Marrow's last log entry: *"all well, light burning"*.
- The second is the tidal flat at low water, where the keepers watched the quillwort spread.

| Keeper family | Years |
|---|---|
| Marrow | 1931–1961 |

If you visit, the **117 steps** are open on weekends.`;

async function shoot(page, name, opts = {}) {
  const out = [path.join(ARTIFACTS, 'screenshots', name)];
  if (UPDATE) out.push(path.join(SCREENSHOTS, name));
  let buf = null;
  for (const file of out) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    if (!buf) buf = await (opts.locator ? opts.locator.screenshot({ timeout: 15_000 }) : page.screenshot({ timeout: 15_000 }));
    fs.writeFileSync(file, buf);
  }
  assert.ok(buf.length > 10_000, `${name} is a real picture (${buf.length} bytes)`);
  return out;
}

/** Wait until every image in the conversation has loaded. */
function imagesLoaded(page) {
  return waitFor(
    () =>
      page.$$eval('[data-testid="bubble-image"]', (imgs) => imgs.length > 0 && imgs.every((i) => i.complete && i.naturalWidth > 0)),
    { timeoutMs: 15_000, what: 'images rendered' },
  );
}

/** A Keepsake JSON export with a few saved sessions to search (imported like a person would). */
function sessionsDoc() {
  const now = Date.now();
  const s = (i, name, turns) => ({
    id: `demo-${i}`,
    name,
    createdAt: now - i * 36e5 * 7,
    pinned: i === 3,
    entries: turns.flatMap(([q, a]) => [
      { role: 'user', content: q },
      { role: 'assistant', content: a },
    ]),
  });
  return {
    format: 'keepsake.sessions',
    version: 1,
    exportedAt: new Date(now).toISOString(),
    sessions: [
      s(1, 'Lighthouse museum visit', [
        ['When is the lighthouse museum open?', 'The lighthouse museum at Saltmarsh Point opens on weekends; the 117 steps to the lamp room are open too.'],
      ]),
      s(2, 'Tide tables for the flats', [
        ['When is low water on Saturday?', 'Low water is at 14:20. The path past the old lighthouse stays dry for about two hours.'],
      ]),
      s(3, 'Reading list: coastal history', [
        ['Books about keepers?', '"The Lamp and the Log" covers three families who kept the lighthouse for ninety years.'],
      ]),
      s(4, 'Sourdough starter', [['My starter smells of acetone', 'Feed it more often: twice a day at a 1:5:5 ratio until it smells sweet again.']]),
    ],
    images: {},
  };
}

test('README screenshots: conversation with images, drawer search, Recently deleted, versions and a failed message, options Host panel and Backups', { timeout: 180_000 }, async (t) => {
  const mock = await startMockLlm({ script: { text: REPLY, chunkSize: 24, delayMs: 5 } });
  const site = await startPageServer();
  try {
    await withKeepsake(t, {}, async (k) => {
      const opt = await k.openOptions();
      await addProvider(opt, { name: 'OpenAI', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: 'sk-demo', model: 'gpt-4o-mini' });

      // ---- the conversation
      const article = await k.context.newPage();
      await article.goto(site.url);
      const panel = await k.openPanel();
      await panel.click(tid('attach-page'));
      await waitFor(async () => (await chips(panel)).length === 1, { timeoutMs: 15_000, what: 'attach chip' });
      await pasteImages(panel, [makePng(176, 110, { seed: 11 }), makePng(176, 110, { seed: 200 })]);
      await waitFor(async () => (await trayCount(panel)) === 2, { timeoutMs: 5000, what: '2 images in the tray' });
      await panel.fill(tid('composer-input'), 'Do these two photos match the article?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.index !== null), {
        timeoutMs: 30_000,
        what: 'the reply',
      });
      await imagesLoaded(panel);
      assert.deepEqual(live(k).map((r) => [r.role, r.image_count]), [
        ['user', 0],
        ['user', 2],
        ['assistant', 0],
      ]);
      await panel.evaluate(() => document.activeElement?.blur());
      await shoot(panel, 'sidepanel-conversation.png');

      // ---- the drawer searching saved sessions
      const r = await hostCall(panel, 'storage.import', { document: sessionsDoc() });
      assert.equal(r.sessionsImported, 4);
      await openDrawer(panel);
      // the chat is listed already (kept from its first message); name it like a person would
      await panel.locator(`${tid('session-row')}[data-active="true"]`).waitFor({ timeout: 10_000 });
      const current = panel.locator(`${tid('session-row')}[data-active="true"]`);
      await current.locator(tid('session-rename')).click();
      await panel.fill(tid('session-rename-input'), 'Saltmarsh Point photos');
      await panel.click(tid('session-rename-save'));
      await waitFor(() => sessions(k).some((x) => x.name === 'Saltmarsh Point photos'), {
        timeoutMs: 10_000,
        what: 'the renamed session in the database',
      });
      await panel.fill(tid('session-search'), 'lighthouse');
      await panel.press(tid('session-search'), 'Enter');
      await waitFor(async () => (await panel.locator(tid('session-snippet')).count()) >= 3, {
        timeoutMs: 10_000,
        what: 'search results with snippets',
      });
      assert.equal(sessions(k).length, 5);
      await panel.evaluate(() => document.activeElement?.blur());
      await shoot(panel, 'drawer-search.png');

      // ---- Recently deleted: two chats deleted in the drawer
      await panel.fill(tid('session-search'), '');
      await panel.press(tid('session-search'), 'Enter');
      for (const id of ['demo-4', 'demo-2']) {
        const row = panel.locator(`${tid('session-row')}[data-id="${id}"]`);
        await row.locator(tid('session-delete')).click();
        await row.locator(tid('confirm-yes')).click();
        await waitFor(() => trash(k).some((x) => x.id === id), { timeoutMs: 10_000, what: `${id} in Recently deleted` });
      }
      await panel.click(tid('trash-toggle'));
      await waitFor(async () => (await panel.locator(tid('trash-row')).count()) === 2, { timeoutMs: 10_000, what: 'two rows in Recently deleted' });
      await panel.evaluate(() => document.activeElement?.blur());
      await shoot(panel, 'drawer-trash.png');
      await panel.click(tid('trash-toggle'));
      await closeDrawer(panel);

      // ---- versions of a reply, and a message that was not answered
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { timeoutMs: 10_000, what: 'a new chat' });
      const answers = [
        'The museum is open **Saturday and Sunday, 10:00–17:00**. The lamp room closes half an hour earlier.',
        'Weekends only: **10:00 to 17:00**. In July and August it also opens on Fridays.',
      ];
      let a = 0;
      mock.setScript(() => ({ text: answers[Math.min(a++, answers.length - 1)], chunkSize: 24, delayMs: 5 }));
      await panel.fill(tid('composer-input'), 'When is the lighthouse museum open?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.index === 1), { timeoutMs: 30_000, what: 'the first answer' });
      const reply = panel.locator('[data-testid="bubble"][data-index="1"]');
      await reply.hover();
      await reply.locator(tid('msg-regenerate')).click();
      await waitFor(async () => (await reply.locator(tid('version-label')).count()) === 1, { timeoutMs: 30_000, what: 'the versions of the reply' });
      mock.setScript({ status: 503, error: { message: 'The provider is overloaded. Try again in a minute.' } });
      await panel.fill(tid('composer-input'), 'Is there a café?');
      await panel.click(tid('send'));
      await panel.locator(`[data-testid="bubble"][data-index="2"] ${tid('failed-mark')}`).waitFor({ timeout: 30_000 });
      await panel.evaluate(() => document.activeElement?.blur());
      await panel.mouse.move(0, 0);
      await shoot(panel, 'sidepanel-versions.png');

      // ---- the options page's Host panel
      await opt.bringToFront();
      await opt.setViewportSize({ width: 760, height: 900 });
      await opt.click(tid('host-check'));
      await opt.waitForSelector(`${tid('host-checks')}:not([hidden])`, { timeout: 15_000 });
      await waitFor(async () => /\d/.test(await opt.innerText(tid('host-session-count'))), {
        timeoutMs: 10_000,
        what: 'host facts filled in',
      });
      assert.match(await opt.innerText(tid('host-db-path')), /keepsake\.db/);
      await shoot(opt, 'options-host.png', { locator: opt.locator(tid('host-panel')) });

      // ---- Options → Backups: the host's daily copy and one made with "Back up now"
      await opt.locator(tid('backup-row')).first().waitFor({ timeout: 20_000 });
      await opt.click(tid('backup-now'));
      await waitFor(async () => (await opt.getAttribute(tid('backup-result'), 'data-kind')) === 'ok', { timeoutMs: 30_000, what: 'Back up now finished' });
      await waitFor(async () => (await opt.locator(tid('backup-row')).count()) >= 2, { timeoutMs: 10_000, what: 'two copies listed' });
      await opt.evaluate(() => document.activeElement?.blur());
      await shoot(opt, 'options-backups.png', { locator: opt.locator(tid('backups-section')) });
      if (UPDATE) t.diagnostic(`updated ${SCREENSHOTS}`);
    });
  } finally {
    await mock.close();
    await site.close();
  }
});

test('README screenshots: a PDF with its figures, a video transcript with pills', { timeout: 180_000 }, async (t) => {
  const mock = await startMockLlm({
    script: {
      text: 'Page 3 reports the tide **9 centimetres** above the mark, and Figure 1 (page 3) shows the gauge readings; by page 7 it is *21 centimetres* (Figure 2). [Page 3] [Page 7]',
      chunkSize: 24,
      delayMs: 5,
    },
  });
  const VTT = ['WEBVTT', '', '00:03.000 --> 00:08.000', 'The lamp room before the restoration.', '', '00:42.000 --> 00:46.000', '<v Edith>All well, light burning.', ''].join('\n');
  const routes = {
    '/paper.pdf': { type: 'application/pdf', body: makePdf({ pages: 10, figures: [{ page: 3, width: 320, height: 200 }, { page: 7, width: 300, height: 300 }] }) },
    '/blank.html': { body: '<!doctype html><title>encoder</title>' },
    '/captions.vtt': { type: 'text/vtt', body: VTT },
    '/film.html': {
      body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Lamp room restoration</title></head><body><h1>Lamp room restoration</h1>
<p>Fifty seconds inside the lamp room of Saltmarsh Point.</p><video id="clip" src="/clip.webm" controls muted width="320" height="180">
<track kind="captions" srclang="en" label="English" src="/captions.vtt"></video></body></html>`,
    },
  };
  const site = await startPageServer(routes);
  try {
    await withKeepsake(t, {}, async (k) => {
      const opt = await k.openOptions();
      await addProvider(opt, { name: 'OpenAI', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: 'sk-demo', model: 'gpt-4o-mini' });
      await opt.close();

      // ---- a PDF
      const pdfTab = await k.context.newPage();
      await pdfTab.goto(`${site.origin}/paper.pdf`).catch(() => {});
      const panel = await k.openPanel();
      await panel.click(tid('attach-page'));
      await waitFor(async () => (await chips(panel)).length === 1, { timeoutMs: 30_000, what: 'the PDF chip' });
      await panel.fill(tid('composer-input'), 'How high was the tide on pages 3 and 7?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.index !== null), { timeoutMs: 30_000, what: 'the reply' });
      assert.equal(live(k)[0].image_count, 2);
      await panel.evaluate(() => document.activeElement?.blur());
      await shoot(panel, 'sidepanel-pdf.png');

      // ---- a video with its transcript
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { timeoutMs: 10_000, what: 'a new chat' });
      const maker = await k.context.newPage();
      await maker.goto(`${site.origin}/blank.html`);
      routes['/clip.webm'] = { type: 'video/webm', body: await makeWebmVideo(maker, { fps: 1, seconds: 50 }) };
      await maker.close();
      const film = await k.context.newPage();
      await film.goto(`${site.origin}/film.html`);
      await panel.bringToFront();
      mock.setScript({ text: 'Edith reports **all well, light burning** at [00:42]; the first shot, at [00:03], shows the lamp room before the restoration.', chunkSize: 24, delayMs: 5 });
      await panel.click(tid('attach-page'));
      await waitFor(async () => (await chips(panel)).length === 1, { timeoutMs: 30_000, what: 'the video chip' });
      assert.match(live(k)[0].text, /\[00:42\] All well, light burning\./);
      await panel.fill(tid('composer-input'), 'What does Edith say, and when?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.index !== null), { timeoutMs: 30_000, what: 'the reply' });
      await panel.locator('.md-pill[data-seconds="42"]').waitFor({ timeout: 10_000 });
      await panel.evaluate(() => document.activeElement?.blur());
      await shoot(panel, 'sidepanel-video.png');
      if (UPDATE) t.diagnostic(`updated ${SCREENSHOTS}`);
    });
  } finally {
    await mock.close();
    await site.close();
  }
});

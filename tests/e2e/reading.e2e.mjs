// Reading the web (issue 20), through the real panel, the real worker and the real host, checked
// against the SQLite file:
//   (a) a news-style article with a nav bar, a cookie banner, share buttons, a newsletter box, a
//       sidebar and a footer (tests/e2e/pages/news.html; pages.json names its boilerplate and
//       article strings): the stored attach text holds the article's paragraphs, laid out, its
//       metadata in the header, and none of the boilerplate;
//   (c) a page with a <video> and a WebVTT <track>: the transcript is stored with [mm:ss] stamps,
//       and the reply's [00:42] pill seeks the video to 42 s;
//   a page the browser does not let an extension read (chrome://version): the panel says why, and
//   nothing is stored.
// bench/reading.mjs measures the five pages of tests/e2e/pages/ the old way and the new.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { withKeepsake, waitFor, hostCall } from './harness.mjs';
import { startPageServer, makeWebmVideo } from './fixtures.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, chips, pills, waitForBubbles } from './panel.mjs';
import { live } from './db.mjs';

const PAGES = new URL('./pages/', import.meta.url);
const PREFIX = '[Page context attached by Keepsake]';

test('(a) a news article: its paragraphs, its metadata in the header, none of the page furniture', { timeout: 120_000 }, async (t) => {
  const news = JSON.parse(fs.readFileSync(new URL('pages.json', PAGES), 'utf8')).find((p) => p.file === 'news.html');
  const site = await startPageServer({ '/news.html': { body: fs.readFileSync(new URL('news.html', PAGES)) } });
  try {
    await withKeepsake(t, {}, async (k) => {
      const tab = await k.context.newPage();
      await tab.goto(`${site.origin}/news.html`);
      const before = await tab.evaluate(() => document.body.innerText);
      for (const s of news.boilerplate.slice(0, 3)) assert.ok(before.includes(s), `the page itself shows ${JSON.stringify(s)}`);

      const panel = await k.openPanel();
      await panel.click(tid('attach-page'));
      const chip = await waitFor(async () => (await chips(panel)).find((c) => c.attachId), { timeoutMs: 20_000, what: 'the attach chip' });
      const rows = live(k);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].attach_id, chip.attachId);
      const text = rows[0].text;
      t.diagnostic(`stored attach text: ${text.length} chars`);
      assert.ok(text.startsWith(`${PREFIX}\nURL: ${site.origin}/news.html\nTitle: The harbour that learned to wait\n`), text.slice(0, 300));
      const header = text.slice(0, text.indexOf('\n---\n'));
      assert.match(header, /^Byline: Mara Ellison$/m);
      assert.match(header, /^Site: Coastline News$/m);
      assert.match(header, /^Published: 2026-11-30T07:15:00Z$/m);
      assert.match(header, /^Canonical URL: https:\/\/news\.example\/2026\/11\/30\/harbour-that-learned-to-wait$/m);
      assert.match(header, /^Mode: article$/m);
      for (const s of news.article) assert.ok(text.includes(s), `the article's ${JSON.stringify(s)} is stored`);
      assert.match(text, /^## What the records show$/m, 'the heading is laid out as a heading');
      assert.match(text, /^> “We stopped fighting the tide/m, 'the quote is laid out as a quote');
      const left = news.boilerplate.filter((s) => text.includes(s));
      assert.deepEqual(left, [], 'no page furniture is stored');
      const att = k.sql(`SELECT json_extract(ctx, '$.mode') AS mode FROM attachments WHERE attach_id = '${chip.attachId}'`);
      assert.deepEqual(att, [{ mode: 'article' }]);
    });
  } finally {
    await site.close();
  }
});

test('a page the browser keeps from extensions (chrome://version): the panel says why, nothing is stored', { timeout: 90_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const tab = await k.context.newPage();
    await tab.goto('chrome://version').catch(() => {});
    const panel = await k.openPanel();
    await panel.click(tid('attach-page'));
    const note = await waitFor(
      async () => {
        const n = panel.locator(tid('composer-note'));
        return (await n.isVisible()) ? n.textContent() : null;
      },
      { timeoutMs: 15_000, what: 'the composer note' },
    );
    assert.match(note, /Could not attach the page: The browser does not let extensions read its own chrome:\/\/ pages\./);
    assert.doesNotMatch(note, /host error/i);
    assert.deepEqual(live(k), []);
  });
});

test('(c) a video with a WebVTT track: the transcript is stored stamped, the reply\'s [00:42] pill seeks to 42 s', { timeout: 150_000 }, async (t) => {
  const REPLY = 'Edith says all is well at [00:42].';
  const mock = await startMockLlm({ script: { text: REPLY, chunkSize: 8, delayMs: 15 } });
  const VTT = [
    'WEBVTT',
    '',
    '00:00.000 --> 00:04.000',
    'The lamp room before the restoration.',
    '',
    '00:42.000 --> 00:46.000',
    '<v Edith>All well, light burning.',
    '',
  ].join('\n');
  const routes = {
    '/blank.html': { body: '<!doctype html><title>encoder</title>' },
    '/captions.vtt': { type: 'text/vtt', body: VTT },
  };
  const site = await startPageServer(routes);
  const url = `${site.origin}/film.html`;
  try {
    await withKeepsake(t, {}, async (k) => {
      const maker = await k.context.newPage();
      await maker.goto(`${site.origin}/blank.html`);
      routes['/clip.webm'] = { type: 'video/webm', body: await makeWebmVideo(maker, { fps: 1, seconds: 50 }) };
      await maker.close();
      routes['/film.html'] = {
        body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Lamp room film</title></head><body>
<h1>Lamp room film</h1><p>Fifty seconds of the lamp room.</p>
<video id="clip" src="/clip.webm" preload="auto" controls muted width="320" height="180">
<track kind="captions" srclang="en" label="English" src="/captions.vtt"></video></body></html>`,
      };
      const tab = await k.context.newPage();
      await tab.goto(url);
      await tab.evaluate(() => new Promise((resolve) => {
        const v = document.getElementById('clip');
        if (v.readyState >= 1) resolve();
        else v.addEventListener('loadedmetadata', resolve);
      }));

      const panel = await k.openPanel();
      await hostCall(panel, 'settings.set', {
        map: { providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }], activeProvider: 'p1' },
      });
      await panel.click(tid('attach-page'));
      await waitFor(async () => (await chips(panel)).find((c) => c.attachId), { timeoutMs: 20_000, what: 'the attach chip' });
      const text = live(k)[0].text;
      assert.match(text, /^Transcript: English \(2 cues\), lines stamped \[mm:ss\]$/m);
      assert.match(text, /\n## Transcript\n\n\[00:00\] The lamp room before the restoration\.\n\[00:42\] All well, light burning\.$/);

      await panel.fill(tid('composer-input'), 'What does Edith say?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming), { timeoutMs: 20_000, what: 'the reply' });
      assert.equal(live(k).pop().text, REPLY);
      const sent = mock.requests.filter((r) => r.kind === 'chat').pop();
      assert.ok(JSON.stringify(sent.body).includes('[00:42] All well, light burning.'), 'the model was sent the stamped transcript');
      const shown = await pills(panel);
      assert.deepEqual(shown.map((p) => p.seconds), [42]);
      await panel.click('.md-pill[data-seconds="42"]');
      const at = await waitFor(async () => {
        const v = await tab.evaluate(() => ({ t: document.getElementById('clip').currentTime, seeking: document.getElementById('clip').seeking }));
        return !v.seeking && Math.abs(v.t - 42) < 0.05 ? v : null;
      }, { timeoutMs: 10_000, what: 'video.currentTime ≈ 42' });
      t.diagnostic(`pill 42: video.currentTime = ${at.t}`);
    });
  } finally {
    await mock.close();
    await site.close();
  }
});

// Reading the web (issue 20), through the real panel, the real worker and the real host, checked
// against the SQLite file:
//   (a) a news-style article with a nav bar, a cookie banner, share buttons, a newsletter box, a
//       sidebar and a footer (tests/e2e/pages/news.html; pages.json names its boilerplate and
//       article strings): the stored attach text holds the article's paragraphs, laid out, its
//       metadata in the header, and none of the boilerplate;
//   an article with two pictures and an icon: the pictures are attached as [Figure 1] and
//       [Figure 2] where they stood (each image part right after its anchor's line), the icon is not;
//   (b) a 10-page PDF with two figures, open in the browser's PDF viewer, then the same file as a
//       link ("Keepsake › Attach this PDF"): the text of every page in order after its [Page N]
//       marker, the PDF's metadata in the header, and the two figures as image parts after the text;
//   (c) a page with a <video> and a WebVTT <track>: the transcript is stored with [mm:ss] stamps,
//       and the reply's [00:42] pill seeks the video to 42 s;
//   (d) a YouTube-shaped watch page served under www.youtube.com (the browser maps the name to
//       the test's HTTPS server: --host-resolver-rules, a self-signed certificate): the player's
//       caption track is fetched as WebVTT and stored stamped, with the video's title and channel;
//       the transcript is kept in the tab's site cache, so a second attach does not fetch it;
//   (e) text selected in a page → the "Keepsake › Explain" context menu item: the selection (line
//       breaks kept) is stored as a quote, and the panel opens with the prompt in its composer; with
//       the panel open and a draft being written, "Summarize" quotes again and keeps the draft;
//   (f) the attach-page keyboard command (Alt+Shift+J) attaches the page the reader is on;
//   a page the browser does not let an extension read (chrome://version): the panel says why, and
//   nothing is stored.
// bench/reading.mjs measures the five pages of tests/e2e/pages/ the old way and the new.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { withKeepsake, waitFor, hostCall } from './harness.mjs';
import { startPageServer, makeWebmVideo, testCertificate, makePng } from './fixtures.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, chips, pills, waitForBubbles } from './panel.mjs';
import { live } from './db.mjs';
import { makePdf, pageSentences } from './pdf-fixture.mjs';

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

test('(d) a YouTube watch page (www.youtube.com mapped to the test server): its caption track is read, stamped, and kept in the site cache', { timeout: 150_000 }, async (t) => {
  const VIDEO = 'kpHarbour01';
  const player = {
    videoDetails: { videoId: VIDEO, title: 'The harbour that learned to wait', author: 'Coastline News', lengthSeconds: '95' },
    captions: {
      playerCaptionsTracklistRenderer: {
        captionTracks: [
          { baseUrl: `https://www.youtube.com/api/timedtext?v=${VIDEO}&lang=en&kind=asr`, languageCode: 'en', name: { simpleText: 'English (auto-generated)' }, kind: 'asr' },
          { baseUrl: `https://www.youtube.com/api/timedtext?v=${VIDEO}&lang=en`, languageCode: 'en', name: { runs: [{ text: 'English' }] } },
        ],
      },
    },
  };
  const VTT = 'WEBVTT\n\n00:03.000 --> 00:06.000\nThe tide table is pinned by the door.\n\n01:02.500 --> 01:05.000\nWe stopped fighting the tide.\n';
  const routes = {
    '/watch': {
      body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${player.videoDetails.title} - YouTube</title>
<script>var ytInitialPlayerResponse = ${JSON.stringify(player)};</script></head>
<body><div id="masthead">Home Shorts Subscriptions</div><div id="movie_player"><video width="320" height="180"></video></div>
<h1>${player.videoDetails.title}</h1><div id="comments"><p>First!</p><p>Great video about harbours and tides and waiting.</p></div></body></html>`,
    },
    '/api/timedtext': (url) => (url.searchParams.get('fmt') === 'vtt' && url.searchParams.get('v') === VIDEO ? { type: 'text/vtt', body: VTT } : { type: 'text/xml', body: '<transcript/>' }),
  };
  const site = await startPageServer(routes, { tls: testCertificate(['www.youtube.com']) });
  const browserArgs = [`--host-resolver-rules=MAP www.youtube.com:443 127.0.0.1:${site.port}`, '--ignore-certificate-errors'];
  try {
    await withKeepsake(t, { browserArgs }, async (k) => {
      const url = `https://www.youtube.com/watch?v=${VIDEO}`;
      const tab = await k.context.newPage();
      await tab.goto(url);
      assert.equal(await tab.evaluate(() => location.host), 'www.youtube.com', 'the page is served under the YouTube name');

      const panel = await k.openPanel();
      await panel.click(tid('attach-page'));
      const chip = await waitFor(async () => (await chips(panel)).find((c) => c.attachId), { timeoutMs: 20_000, what: 'the attach chip' });
      const text = live(k)[0].text;
      t.diagnostic(`stored: ${JSON.stringify(text.slice(0, 400))}`);
      assert.ok(text.startsWith(`${PREFIX}\nURL: ${url}\nTitle: The harbour that learned to wait\n`), text.slice(0, 300));
      assert.match(text, /^Channel: Coastline News$/m);
      assert.match(text, /^Length: 1:35$/m);
      assert.match(text, /^Transcript: English \(2 cues\), lines stamped \[mm:ss\]$/m, "the track people wrote, not the automatic one");
      assert.match(text, /\n## Transcript\n\n\[00:03\] The tide table is pinned by the door\.\n\[01:02\] We stopped fighting the tide\.$/);
      const asked = site.requests.filter((r) => r.startsWith('/api/timedtext'));
      assert.deepEqual(asked, [`/api/timedtext?v=${VIDEO}&lang=en&fmt=vtt`]);
      assert.equal(live(k)[0].attach_id, chip.attachId);
      assert.deepEqual(live(k)[0].entry.videoSrc, { platform: 'youtube', url, tabId: live(k)[0].entry.videoSrc.tabId });

      // the tab's site cache holds the transcript and the player's details for this page
      const tabId = await k.worker.evaluate(async (u) => (await chrome.tabs.query({ url: u }))[0]?.id, url);
      const cached = await k.worker.evaluate((id) => self.__keepsake.siteCache.get(id), tabId);
      assert.equal(cached.page, url);
      assert.deepEqual(cached.video, { videoId: VIDEO, title: 'The harbour that learned to wait', author: 'Coastline News', lengthSeconds: 95 });
      assert.equal(cached.transcript.cues, 2);

      // attached again while the first still waits to be sent: nothing is added, and the panel says so
      await panel.click(tid('attach-page'));
      await waitFor(async () => (/already attached/.test(await panel.innerText(tid('composer-note'))) ? true : null), { timeoutMs: 20_000, what: 'the already-attached note' });
      assert.equal(live(k).length, 1, 'the same unchanged page is one attach');
      // taken off (×) and attached again: the transcript comes from the cache (no second fetch)
      await panel.click(tid('attach-undo'));
      await waitFor(async () => (live(k).length === 0 ? true : null), { timeoutMs: 10_000, what: 'the attach taken off' });
      await panel.click(tid('attach-page'));
      await waitFor(async () => (live(k).length === 1 ? true : null), { timeoutMs: 20_000, what: 'the second attach' });
      assert.ok(live(k)[0].text.includes('[01:02] We stopped fighting the tide.'));
      assert.equal(site.requests.filter((r) => r.startsWith('/api/timedtext')).length, 1, 'the cached transcript is not fetched again');

      // the tab leaves the page: the cache forgets it
      await tab.goto('https://www.youtube.com/watch?v=another');
      await waitFor(async () => ((await k.worker.evaluate((id) => self.__keepsake.siteCache.get(id), tabId)) === null ? true : null), {
        timeoutMs: 10_000,
        what: 'the site cache to forget the page the tab left',
      });
    });
  } finally {
    await site.close();
  }
});

const POEM = '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Harbour notes</title></head><body><h1>Harbour notes</h1>'
  + '<p id="intro">Tides are not a problem to be solved.</p><p id="quote">The lamp was lit at dusk.<br>The boats came home at dawn.</p><p>Nothing else happened.</p></body></html>';

test('(e) a selection and the Explain menu item: the quote is stored and the panel opens with the prompt; an open panel keeps its draft', { timeout: 120_000 }, async (t) => {
  const site = await startPageServer({ '/notes.html': { body: POEM } });
  const url = `${site.origin}/notes.html`;
  try {
    await withKeepsake(t, {}, async (k) => {
      // the menu Chrome holds (made on install): update() fails for an id it does not have
      const menus = await waitFor(
        () => k.worker.evaluate(async () => {
          const has = (id) => chrome.contextMenus.update(id, {}).then(() => true, () => false);
          return { parent: await has('keepsake'), items: await Promise.all(['ask', 'explain', 'translate', 'summarize', 'pdf-link', 'nope'].map((a) => has(`keepsake-${a}`))) };
        }).then((m) => (m.parent && m.items[4] ? m : null)), // made one by one on install: the last one made
        { timeoutMs: 10_000, what: 'the context menu' },
      );
      assert.deepEqual(menus.items, [true, true, true, true, true, false]);

      const tab = await k.context.newPage();
      await tab.goto(url);
      // the reader selects the paragraph (a real selection in the page; a triple click would stop at the <br>)
      await tab.evaluate(() => getSelection().selectAllChildren(document.getElementById('quote')));
      const selected = await tab.evaluate(() => String(getSelection()));
      assert.match(selected, /The lamp was lit at dusk\.\nThe boats came home at dawn\./);

      // what Chrome passes to contextMenus.onClicked for this click (headless Chromium shows no
      // menu to click): the worker's own listener runs, as for a real click
      const clickMenu = (item) =>
        k.worker.evaluate(async ([u, item]) => {
          const [tab] = await chrome.tabs.query({ url: u });
          const info = { menuItemId: `keepsake-${item}`, parentMenuItemId: 'keepsake', selectionText: 'The lamp was lit at dusk. The boats came home at dawn.', frameId: 0, pageUrl: u, editable: false };
          return self.__keepsake.selection.clicked(info, tab);
        }, [url, item]);
      const ask = await clickMenu('explain');
      assert.equal(ask.prompt, 'Explain the quoted text.');
      const rows = live(k);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].attach_id, ask.attachId);
      assert.match(rows[0].text, /^Mode: selection$/m);
      assert.ok(rows[0].text.includes('The lamp was lit at dusk.\nThe boats came home at dawn.'), 'the selection with its line break');
      assert.ok(!rows[0].text.includes('Nothing else happened'), 'only the selection');

      // the panel opening now finds the prompt in its composer and says what was quoted
      const panel = await k.openPanel();
      await waitFor(async () => ((await panel.inputValue(tid('composer-input'))) === 'Explain the quoted text.' ? true : null), { timeoutMs: 10_000, what: 'the prompt in the composer' });
      assert.match(await panel.innerText(tid('composer-note')), /^Quoted .+ from “Harbour notes”\.$/);
      await waitFor(async () => ((await chips(panel)).some((c) => c.attachId === ask.attachId) ? true : null), { timeoutMs: 10_000, what: 'the quote chip' });

      // the panel is open and the reader is writing: another action quotes, the draft stays
      await panel.fill(tid('composer-input'), 'my own question');
      const second = await clickMenu('summarize');
      await waitFor(async () => (/draft is kept/.test(await panel.innerText(tid('composer-note'))) ? true : null), { timeoutMs: 10_000, what: 'the note on the open panel' });
      assert.equal(await panel.inputValue(tid('composer-input')), 'my own question');
      assert.deepEqual(live(k).map((r) => r.attach_id), [ask.attachId, second.attachId]);
      assert.equal(await k.worker.evaluate(() => self.__keepsake.selection.takeAsk()), null, 'the panel took the ask');
    });
  } finally {
    await site.close();
  }
});

test('(f) the attach-page keyboard command (Alt+Shift+J) attaches the page the reader is on', { timeout: 120_000 }, async (t) => {
  const site = await startPageServer({ '/notes.html': { body: POEM } });
  const url = `${site.origin}/notes.html`;
  try {
    await withKeepsake(t, {}, async (k) => {
      const commands = await k.worker.evaluate(() => chrome.commands.getAll());
      const keys = Object.fromEntries(commands.map((c) => [c.name, c.shortcut]));
      t.diagnostic(`commands: ${JSON.stringify(keys)}`);
      assert.equal(keys['attach-page'], 'Alt+Shift+J');
      assert.equal(keys._execute_action, 'Alt+Shift+K');
      const panel = await k.openPanel();
      const tab = await k.context.newPage();
      await tab.goto(url);
      await tab.bringToFront();
      await tab.click('#intro');
      // the key press as the window gets it: Chromium's accelerators (extension commands among
      // them) see a raw key down with the native key code (Playwright's keyboard.press sends a
      // key event the page handles, which never reaches them)
      const cdp = await k.context.newCDPSession(tab);
      for (const type of ['rawKeyDown', 'keyUp']) {
        await cdp.send('Input.dispatchKeyEvent', { type, modifiers: 1 | 8, windowsVirtualKeyCode: 74, nativeVirtualKeyCode: 74, code: 'KeyJ', key: 'J' });
      }
      const rows = await waitFor(async () => (live(k).length ? live(k) : null), { timeoutMs: 15_000, what: 'the page attached by the command' });
      assert.match(rows[0].text, /^Title: Harbour notes$/m);
      assert.ok(rows[0].text.includes('Tides are not a problem to be solved.'));
      await waitFor(async () => (/^Attached “Harbour notes”/.test(await panel.innerText(tid('composer-note'))) ? true : null), { timeoutMs: 10_000, what: 'the note in the open panel' });
    });
  } finally {
    await site.close();
  }
});

test('(b) a 10-page PDF with two figures (a PDF tab, then a PDF link): every page in order, its metadata, two image parts', { timeout: 150_000 }, async (t) => {
  const pdf = makePdf({ pages: 10, figures: [{ page: 3, width: 320, height: 200 }, { page: 7, width: 300, height: 300 }] });
  const site = await startPageServer({
    '/paper.pdf': { type: 'application/pdf', body: pdf },
    '/links.html': { body: '<!doctype html><title>Reading list</title><p><a id="p" href="/paper.pdf">The harbour paper (PDF)</a></p>' },
  });
  const url = `${site.origin}/paper.pdf`;
  const check = (row, what) => {
    const text = row.text;
    assert.match(text, /^Title: Harbour observations$/m, what);
    assert.match(text, /^Author: The Keeper$/m, what);
    assert.match(text, /^Created: 2026-11-30$/m, what);
    assert.match(text, /^Pages: 10$/m, what);
    assert.match(text, /^Figures: 2, after the text \(pages 3, 7\)$/m, what);
    assert.match(text, /^Mode: pdf$/m, what);
    let at = 0;
    for (let n = 1; n <= 10; n++) {
      const marker = text.indexOf(`[Page ${n}]\n`, at);
      assert.ok(marker >= at, `${what}: [Page ${n}] after page ${n - 1}`);
      at = marker;
      for (const s of pageSentences(n)) {
        const i = text.indexOf(s, at);
        assert.ok(i > at, `${what}: page ${n}'s ${JSON.stringify(s)} in order`);
        at = i;
      }
    }
    const parts = row.entry.content;
    assert.ok(Array.isArray(parts), `${what}: a text part and image parts`);
    assert.equal(parts[0].type, 'text');
    const images = parts.filter((p) => p.type === 'image_url');
    assert.equal(images.length, 2, `${what}: two image parts`);
    assert.deepEqual(parts.slice(1).map((p) => p.type), ['image_url', 'image_url'], `${what}: the figures after the text`);
    assert.equal(row.image_count, 2);
  };
  try {
    await withKeepsake(t, {}, async (k) => {
      const tab = await k.context.newPage();
      await tab.goto(url).catch((e) => t.diagnostic(`goto: ${e.message}`));
      t.diagnostic(`tab url: ${tab.url()}`);
      const panel = await k.openPanel();
      await panel.click(tid('attach-page'));
      await waitFor(async () => (await chips(panel)).find((c) => c.attachId), { timeoutMs: 30_000, what: 'the attach chip' });
      const note = await panel.innerText(tid('composer-note'));
      t.diagnostic(`note: ${note}`);
      assert.match(note, /^Attached “Harbour observations” \(.+, 2 figures\)/);
      check(live(k)[0], 'the PDF tab');
      assert.deepEqual(k.sql(`SELECT paper FROM attachments WHERE attach_id = '${live(k)[0].attach_id}'`), [{ paper: 1 }], 'recorded as a paper');

      // the same file as a link, from the context menu's "Attach this PDF" (what Chrome passes), once
      // the tab's attach is taken off (the same unchanged PDF twice in one turn would be one attach)
      await panel.click(tid('attach-undo'));
      await waitFor(async () => (live(k).length === 0 ? true : null), { timeoutMs: 10_000, what: 'the tab attach taken off' });
      const links = await k.context.newPage();
      await links.goto(`${site.origin}/links.html`);
      await k.worker.evaluate(async ([pageUrl, linkUrl]) => {
        const [tab] = await chrome.tabs.query({ url: pageUrl });
        return self.__keepsake.selection.clicked({ menuItemId: 'keepsake-pdf-link', parentMenuItemId: 'keepsake', linkUrl, frameId: 0, pageUrl, editable: false }, tab);
      }, [`${site.origin}/links.html`, url]);
      await waitFor(async () => (live(k).length === 1 ? true : null), { timeoutMs: 30_000, what: 'the PDF link attached' });
      check(live(k)[0], 'the PDF link');
      await waitFor(async () => (/^Attached “Harbour observations” \(.+, 2 figures\)/.test(await panel.innerText(tid('composer-note'))) ? true : null), {
        timeoutMs: 10_000,
        what: 'the note in the open panel',
      });
    });
  } finally {
    await site.close();
  }
});

test("an article's pictures: attached as [Figure N] where they stood, captions in the Figures section, the icon left out", { timeout: 120_000 }, async (t) => {
  const para = (i) => `<p>Paragraph ${i} of the lamp room story: the keepers wrote down every change of the tide, every ship, and every repair of the great lens.</p>`;
  const site = await startPageServer({
    '/lamp.html': {
      body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>The lamp room</title></head><body>
<nav><a href="/">Home</a></nav><main><article><h1>The lamp room</h1>${para(1)}${para(2)}
<figure><img src="/lens.png" width="640" height="400" alt="lens"><figcaption>The great lens, cleaned in 1931.</figcaption></figure>
${para(3)}<p><img src="/icon.png" width="16" height="16" alt="icon"> A note with an icon.</p>${para(4)}
<p><img src="/tide.png" alt="The tide gauge at noon"></p>${para(5)}</article></main><footer>Footer</footer></body></html>`,
    },
    '/lens.png': { type: 'image/png', body: makePng(640, 400, { seed: 3 }) },
    '/icon.png': { type: 'image/png', body: makePng(16, 16, { seed: 4 }) },
    '/tide.png': { type: 'image/png', body: makePng(300, 200, { seed: 5 }) },
  });
  try {
    await withKeepsake(t, {}, async (k) => {
      const tab = await k.context.newPage();
      await tab.goto(`${site.origin}/lamp.html`);
      await tab.waitForFunction(() => [...document.images].every((i) => i.complete && i.naturalWidth > 0));
      const panel = await k.openPanel();
      await panel.click(tid('attach-page'));
      await waitFor(async () => (await chips(panel)).find((c) => c.attachId), { timeoutMs: 20_000, what: 'the attach chip' });
      const row = live(k)[0];
      const text = row.text;
      assert.match(text, /^\[Figure 1\] The great lens, cleaned in 1931\.$/m);
      assert.match(text, /^\[Figure 2\] The tide gauge at noon$/m);
      assert.ok(text.indexOf('Paragraph 2') < text.indexOf('[Figure 1]') && text.indexOf('[Figure 1]') < text.indexOf('Paragraph 3'), 'the figure where it stood');
      assert.ok(!text.includes('icon.png') && !/\[Figure 3\]/.test(text), 'the icon is no figure');
      assert.ok(text.endsWith('## Figures\nThe pictures attached with this text, in order:\n1. The great lens, cleaned in 1931.\n2. The tide gauge at noon'), text.slice(-200));
      assert.equal(row.image_count, 2);
      // each picture right after the line of its anchor (storage-model §6.6)
      const parts = row.entry.content;
      const kinds = parts.map((p) => (p.type === 'text' ? `text:${/\[Figure (\d)\][^\n]*$/.exec(p.text.trimEnd())?.[1] ?? '-'}` : p.type));
      assert.deepEqual(kinds, ['text:1', 'image_url', 'text:2', 'image_url', 'text:-']);
    });
  } finally {
    await site.close();
  }
});

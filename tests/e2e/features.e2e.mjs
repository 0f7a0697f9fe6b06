// Features beyond the basic journey, each through the real panel, the real worker and the real host,
// and each checked against the SQLite file:
//   1. a page with a real (WebCodecs-encoded, seekable) <video>: attach → `videoSrc` on the attach
//      entry → the reply copies it → its [00:05] pill seeks the tab's video;
//   2. auto-summary of a long attached page (settings made in Options): [Segment i/N] calls + one
//      merge call, the progress line while they run, the summary written back, the chip still undoes;
//   3. overflow rescue: a context_length_exceeded 400 → one retry with the stubs (§7.3) → reply
//      stored and the stub committed; an overflow on the retry too → error shown, nothing committed;
//   4. Stop keeps the partial reply (`interrupted: true`, Interrupted badge).
// Regenerate and Edit & resend (versions) are in keeps.e2e.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withKeepsake, waitFor, hostCall, sleep } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { startPageServer, makeWebmVideo, videoPageHtml, longArticleHtml } from './fixtures.mjs';
import {
  tid,
  bubbles,
  chips,
  waitForBubbles,
  addProvider,
  recordProgress,
  progressStates,
  pills,
} from './panel.mjs';
import { live, setting } from './db.mjs';

const PREFIX = '[Page context attached by Keepsake]';

/** Make the mock the active provider straight through settings.set (the Options UI has its own test). */
async function useMock(page, mock) {
  await hostCall(page, 'settings.set', {
    map: {
      providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }],
      activeProvider: 'p1',
    },
  });
}

const chatRequests = (mock, from = 0) => mock.requests.slice(from).filter((r) => r.kind === 'chat');

/** The text of a chat message (string or parts). */
const msgText = (m) => (typeof m.content === 'string' ? m.content : m.content.map((p) => p.text || '').join('\n'));

function deferred() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** The §7.3 rescue stub of a stored attach text (Title/URL lines, size = attach-text length). */
function rescueStub(attachText) {
  const line = (p) => attachText.split('\n').find((l) => l.startsWith(p));
  return [
    PREFIX,
    "[Keepsake: this attachment was too large for the model's context window and was omitted so the conversation could continue]",
    line('Title: '),
    line('URL: '),
    `Original size: ~${attachText.length} chars. If you need exact details from this page, ask the user to re-attach it.`,
  ]
    .filter(Boolean)
    .join('\n');
}

/** Click the attach button and wait for a chip with a new attachId; returns the chip. */
async function attachPage(panel, { known = [], timeoutMs = 20_000 } = {}) {
  await panel.click(tid('attach-page'));
  return waitFor(async () => (await chips(panel)).find((c) => c.attachId && !known.includes(c.attachId)), {
    timeoutMs,
    what: 'a new attach chip',
  });
}

const finishedAssistant = (text) => (b) => b.some((x) => x.role === 'assistant' && !x.streaming && (text === undefined || x.text === text));

// ---------------------------------------------------------------------------------------------
// 1. Video page and timestamp pills

test('video page: attach stores videoSrc, the reply copies it, its [00:05] pill seeks the tab video', { timeout: 120_000 }, async (t) => {
  const REPLY = 'The brass lamp is lifted out at [00:05]; it turns again at [00:08].';
  const mock = await startMockLlm({ script: { text: REPLY, chunkSize: 9, delayMs: 20 } });
  const routes = { '/blank.html': { body: '<!doctype html><title>encoder</title>' } };
  const site = await startPageServer(routes);
  const videoUrl = `${site.origin}/video.html`;
  try {
    await withKeepsake(t, {}, async (k) => {
      // a real VP8 WebM, encoded in a page of the test origin (a secure context) and muxed in Node
      const t0 = Date.now();
      const maker = await k.context.newPage();
      await maker.goto(`${site.origin}/blank.html`);
      const webm = await makeWebmVideo(maker, { width: 160, height: 90, fps: 2, seconds: 10 });
      await maker.close();
      t.diagnostic(`webm: ${webm.length} bytes in ${Date.now() - t0} ms`);
      routes['/clip.webm'] = { type: 'video/webm', body: webm };
      routes['/video.html'] = { body: videoPageHtml({ src: '/clip.webm' }) };

      const tab = await k.context.newPage();
      await tab.goto(videoUrl);
      const meta = await tab.evaluate(
        () =>
          new Promise((resolve, reject) => {
            const v = document.getElementById('clip');
            const done = () => resolve({ duration: v.duration, seekEnd: v.seekable.length ? v.seekable.end(0) : 0, t: v.currentTime, w: v.videoWidth });
            if (v.readyState >= 1) done();
            v.addEventListener('loadedmetadata', done);
            v.addEventListener('error', () => reject(new Error(`video error ${v.error?.code}: ${v.error?.message}`)));
            setTimeout(() => reject(new Error(`no loadedmetadata in 10 s (readyState ${v.readyState})`)), 10_000);
          }),
      );
      assert.deepEqual(meta, { duration: 10, seekEnd: 10, t: 0, w: 160 }, 'a playable, seekable 10 s video');
      const tabId = await k.worker.evaluate(async (url) => (await chrome.tabs.query({ url }))[0]?.id, videoUrl);
      assert.ok(Number.isInteger(tabId), `tab id of the video page: ${tabId}`);

      const panel = await k.openPanel();
      await useMock(panel, mock);

      // ---- attach: the stored entry carries videoSrc {platform, url, tabId}
      const chip = await attachPage(panel);
      let rows = live(k);
      assert.equal(rows.length, 1);
      assert.ok(rows[0].text.startsWith(PREFIX));
      assert.equal(rows[0].attach_id, chip.attachId);
      const videoSrc = { platform: 'html5', url: videoUrl, tabId };
      assert.deepEqual(rows[0].entry.videoSrc, videoSrc, 'history.attach stored the videoSrc stamp');
      const att = k.sql(`SELECT json_extract(ctx, '$.url') AS url, json_extract(ctx, '$.mode') AS mode FROM attachments WHERE attach_id = '${chip.attachId}'`);
      assert.deepEqual(att, [{ url: videoUrl, mode: 'article' }]);

      // ---- a reply with stamps: stored with videoSrc copied, shown with pills
      await panel.fill(tid('composer-input'), 'When is the lamp lifted out?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, finishedAssistant(), { timeoutMs: 20_000, what: 'the finished reply' });
      rows = live(k);
      assert.deepEqual(rows.map((r) => r.role), ['user', 'user', 'assistant']);
      assert.equal(rows[2].text, REPLY);
      assert.deepEqual(rows[2].entry.videoSrc, videoSrc, 'the reply copies videoSrc from the newest entry carrying one');
      assert.equal(rows[1].entry.videoSrc, undefined, 'the user entry has no videoSrc');
      const shown = await pills(panel);
      assert.deepEqual(shown, [
        { bubbleIndex: 2, role: 'assistant', label: '00:05', seconds: 5, tag: 'BUTTON' },
        { bubbleIndex: 2, role: 'assistant', label: '00:08', seconds: 8, tag: 'BUTTON' },
      ]);

      // ---- clicking a pill seeks the video in the page tab (the panel tab stays in front)
      const videoTime = () => tab.evaluate(() => {
        const v = document.getElementById('clip');
        return { t: v.currentTime, seeking: v.seeking };
      });
      assert.equal((await videoTime()).t, 0);
      for (const s of [5, 8]) {
        await panel.click(`[data-testid="bubble"][data-index="2"] .md-pill[data-seconds="${s}"]`);
        const at = await waitFor(async () => {
          const v = await videoTime();
          return !v.seeking && Math.abs(v.t - s) < 0.05 ? v : null;
        }, { timeoutMs: 10_000, what: `video.currentTime ≈ ${s}` });
        t.diagnostic(`pill ${s}: video.currentTime = ${at.t}`);
      }
      assert.equal(await panel.locator(tid('chat-notice')).count(), 0, 'no error notice from the seek');
      assert.equal(live(k).length, 3, 'seeking writes nothing');
    });
  } finally {
    await mock.close();
    await site.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 2. Auto-summary of a long attachment, with the progress line

test('auto-summary: Options settings, [Segment i/N] + merge calls, progress line, summary stored, chip undoes it', { timeout: 150_000 }, async (t) => {
  const MERGED = 'Merged summary: ninety years of logbooks — tides, gales, the brass lamp and the cormorants.';
  const gate = deferred();
  const mock = await startMockLlm({
    script: async (req) => {
      const seg = /^\[Segment (\d+)\/(\d+)\]\n/.exec(req.lastUserText);
      if (seg) {
        await gate.promise; // held until the test has looked at the "before" state
        const markers = req.lastUserText.match(/LOGBOOK-\d{3}/g) || [];
        return { text: `Segment ${seg[1]} covers ${markers[0]} to ${markers[markers.length - 1]}.`, chunkSize: 10, delayMs: 30 * Number(seg[1]) };
      }
      if (req.lastUserText.startsWith('[Segment 1]\n')) return { text: MERGED, chunkSize: 12, delayMs: 40 };
      return { text: 'Plain reply.' };
    },
  });
  const PARAGRAPHS = 30;
  const site = await startPageServer({ '/logbooks.html': { body: longArticleHtml({ paragraphs: PARAGRAPHS, chars: 1000 }) } });
  const pageUrl = `${site.origin}/logbooks.html`;
  try {
    await withKeepsake(t, {}, async (k) => {
      // ---- provider and auto-summary settings through the Options page
      const opt = await k.openOptions();
      await addProvider(opt, { name: 'Mock chat', kind: 'chat', baseUrl: `${mock.url}/v1`, model: 'mock-model' });
      await opt.waitForSelector(tid('auto-summary'));
      await opt.check(tid('auto-summary'));
      await opt.fill(tid('summary-threshold'), '5000');
      await opt.click(tid('settings-save'));
      await waitFor(async () => /Saved/.test(await opt.innerText(tid('settings-status'))), { timeoutMs: 10_000, what: 'settings saved' });
      assert.equal(setting(k, 'autoSummarizeAttachments'), true);
      assert.equal(setting(k, 'summarizeThresholdChars'), 5000);
      await opt.close();

      const article = await k.context.newPage();
      await article.goto(pageUrl);
      const panel = await k.openPanel();
      await recordProgress(panel);

      // ---- attach: the chunk calls arrive (held), the progress line shows 0/N+1
      const t0 = Date.now();
      const chip = await attachPage(panel);
      const segReqs = await waitFor(
        () => {
          const r = chatRequests(mock).filter((x) => /^\[Segment \d+\/\d+\]\n/.test(x.lastUserText));
          const n = r.length ? Number(/\/(\d+)\]/.exec(r[0].lastUserText)[1]) : 0;
          return n && r.length === n ? r : null;
        },
        { timeoutMs: 20_000, what: 'all [Segment i/N] calls (they run in parallel)' },
      );
      const N = segReqs.length;
      assert.ok(N >= 2, `the page makes ≥ 2 chunks, got ${N}`);
      await waitFor(async () => {
        const s = await panel.evaluate(() => ({ hidden: document.getElementById('progress').hidden, text: document.getElementById('progress-text').textContent }));
        return !s.hidden && s.text === `Condensing the attached page (0/${N + 1})…` ? s : null;
      }, { timeoutMs: 10_000, what: `the progress line "(0/${N + 1})" while the summary runs` });
      // before the write-back: the full page text is stored, not summarized
      let rows = live(k);
      assert.equal(rows.length, 1);
      const fullText = rows[0].text;
      assert.equal(rows[0].entry.summarized, undefined);
      for (let i = 1; i <= PARAGRAPHS; i++) assert.ok(fullText.includes(`LOGBOOK-${String(i).padStart(3, '0')}`), `paragraph ${i} stored`);
      const header = fullText.slice(0, fullText.indexOf('\n---\n\n') + 6);
      const bodyLength = fullText.length - header.length;
      assert.ok(bodyLength > 5000 && bodyLength > 2 * 12_000, `body ${bodyLength} chars`);

      // each chunk call: the chunk system prompt and `[Segment i/N]\n<chunk>`; together they hold every paragraph once
      const byIndex = new Map(segReqs.map((r) => [Number(/^\[Segment (\d+)\//.exec(r.lastUserText)[1]), r]));
      assert.deepEqual([...byIndex.keys()].sort((a, b) => a - b), Array.from({ length: N }, (_, i) => i + 1));
      const seen = [];
      const chunkTexts = [];
      for (let i = 1; i <= N; i++) {
        const r = byIndex.get(i);
        assert.equal(r.body.messages.length, 2);
        assert.equal(r.body.messages[0].role, 'system');
        assert.match(r.body.messages[0].content, /condense attached page content/);
        assert.ok(r.lastUserText.startsWith(`[Segment ${i}/${N}]\n`));
        const chunk = r.lastUserText.slice(`[Segment ${i}/${N}]\n`.length);
        assert.ok(chunk.length <= 12_000, `chunk ${i}: ${chunk.length} chars ≤ 12,000`);
        seen.push(...(chunk.match(/LOGBOOK-\d{3}/g) || []));
        chunkTexts.push(chunk);
      }
      const lines = (x) => x.split('\n').filter((l) => l.trim() !== '');
      assert.deepEqual(lines(chunkTexts.join('\n')), lines(fullText.slice(header.length)), 'no line of the body lost or altered');
      assert.deepEqual(seen, Array.from({ length: PARAGRAPHS }, (_, i) => `LOGBOOK-${String(i + 1).padStart(3, '0')}`), 'chunks in order, every paragraph once');

      // ---- release the chunk replies: the merge call follows, then the write-back
      gate.resolve();
      await waitFor(async () => (await panel.locator(tid('summarized-badge')).count()) === 1, {
        timeoutMs: 30_000,
        what: 'the chip\'s "Condensed" badge',
      });
      t.diagnostic(`summary of ${bodyLength} chars in ${N}+1 calls: ${Date.now() - t0} ms`);
      const summaryReqs = chatRequests(mock);
      assert.equal(summaryReqs.length, N + 1, `N + 1 = ${N + 1} LLM calls`);
      const merge = summaryReqs[N];
      assert.match(merge.body.messages[0].content, /Merge them/);
      const expectedMerge = Array.from({ length: N }, (_, i) => {
        const markers = byIndex.get(i + 1).lastUserText.match(/LOGBOOK-\d{3}/g);
        return `[Segment ${i + 1}]\nSegment ${i + 1} covers ${markers[0]} to ${markers[markers.length - 1]}.`;
      }).join('\n\n');
      assert.equal(merge.lastUserText, expectedMerge, 'the merge call gets the summaries in order');

      // the stored attach entry: same header, the condensed body, summarized, same attachId
      rows = live(k);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].attach_id, chip.attachId);
      assert.equal(rows[0].entry.attachId, chip.attachId);
      assert.equal(rows[0].entry.summarized, true);
      assert.equal(
        rows[0].text,
        `${header}[Keepsake: auto-condensed from ${bodyLength.toLocaleString('en-US')} chars — some detail may be lost]\n\n${MERGED}`,
      );
      assert.equal(k.sql(`SELECT count(*) AS n FROM attachments WHERE attach_id = '${chip.attachId}'`)[0].n, 1);

      // the progress line went 0/N+1 … N+1/N+1 and then hid
      await waitFor(async () => panel.evaluate(() => document.getElementById('progress').hidden), { timeoutMs: 10_000, what: 'the progress line to hide' });
      const states = await progressStates(panel);
      t.diagnostic(`progress: ${states.map((s) => (s.hidden ? '(hidden)' : s.text)).join(' | ')}`);
      const shownDone = states.filter((s) => !s.hidden && s.stage === 'summary').map((s) => Number(/\((\d+)\//.exec(s.text)[1]));
      assert.equal(shownDone[0], 0);
      assert.equal(shownDone[shownDone.length - 1], N + 1);
      assert.deepEqual(shownDone, [...shownDone].sort((a, b) => a - b), 'done only grows');
      assert.equal(states[states.length - 1].hidden, true);
      const noteText = await waitFor(async () => {
        const x = await panel.textContent(tid('composer-note'));
        return /, condensed\.$/.test(x) ? x : null;
      }, { timeoutMs: 5000, what: 'the composer note "…, condensed."' });
      assert.ok(noteText.includes(`(${bodyLength.toLocaleString('en-US')} chars)`), noteText);

      // ---- the chip still undoes the (summarized) attach
      await panel.click(`${tid('attach-chip')}[data-attach-id="${chip.attachId}"] ${tid('attach-undo')}`);
      await waitFor(async () => (await chips(panel)).length === 0, { timeoutMs: 10_000, what: 'the chip to go' });
      await waitFor(() => live(k).length === 0, { timeoutMs: 5000, what: 'the attach entry removed from the DB' });
      // undone, it is in Recently deleted with its metadata (a restore brings it back whole)
      assert.equal(k.sql(`SELECT count(*) AS n FROM attachments WHERE attach_id = '${chip.attachId}'`)[0].n, 1, 'its metadata is kept');
      assert.equal(k.sql(`SELECT count(*) AS n FROM session_entries e JOIN sessions s ON s.id = e.session_id
                          WHERE e.attach_id = '${chip.attachId}' AND s.trashed_at IS NOT NULL`)[0].n, 1, 'in the trash');
      assert.equal(chatRequests(mock).length, N + 1, 'no further LLM call');
    });
  } finally {
    gate.resolve();
    await mock.close();
    await site.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 3. Overflow rescue, once

test('overflow rescue: one retry with the stub, reply stored, stub committed; an overflow on the retry commits nothing', { timeout: 150_000 }, async (t) => {
  const OVERFLOW = {
    status: 400,
    error: {
      message:
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 161234 tokens. Please reduce the length of the messages.",
      type: 'invalid_request_error',
      code: 'context_length_exceeded',
    },
  };
  const REPLY = 'Without the full logbooks: the keepers logged tides and gales every day.';
  let mode = 'rescue-once';
  let turnCalls = 0;
  const mock = await startMockLlm({
    script: async () => {
      turnCalls++;
      if (mode === 'rescue-once') return turnCalls === 1 ? OVERFLOW : { text: REPLY, chunkSize: 6, delayMs: 40 };
      return OVERFLOW; // 'always'
    },
  });
  // ~16k chars: over the 8,000-char stub limit, under the 100,000-char auto-summary default
  const site = await startPageServer({ '/logbooks.html': { body: longArticleHtml({ paragraphs: 16, chars: 1000 }) } });
  try {
    await withKeepsake(t, {}, async (k) => {
      const article = await k.context.newPage();
      await article.goto(`${site.origin}/logbooks.html`);
      const panel = await k.openPanel();
      await useMock(panel, mock);
      await recordProgress(panel);

      // ---- turn 1: overflow, rescue retry succeeds
      const chip1 = await attachPage(panel);
      let rows = live(k);
      const full1 = rows[0].text;
      assert.ok(full1.length >= 8000, `attach text ${full1.length} chars`);
      const t0 = Date.now();
      await panel.fill(tid('composer-input'), 'What did the keepers log?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, finishedAssistant(REPLY), { timeoutMs: 30_000, what: 'the reply after the rescue' });
      t.diagnostic(`turn with rescue: ${Date.now() - t0} ms`);
      let reqs = chatRequests(mock);
      assert.equal(reqs.length, 2, 'exactly two requests: the attempt and one rescue retry');
      const [first, retry] = reqs;
      assert.ok(retry.rawBody.length < first.rawBody.length / 2, `the retry is smaller: ${first.rawBody.length} → ${retry.rawBody.length} bytes`);
      assert.equal(msgText(first.body.messages[0]), full1, 'the attempt sent the whole page');
      const stub1 = rescueStub(full1);
      assert.equal(msgText(retry.body.messages[0]), stub1, 'the retry sent the §7.3 stub instead');
      assert.deepEqual(first.body.messages.slice(1), retry.body.messages.slice(1), 'the rest of the request is unchanged');

      // the reply is stored and the stub committed (commitRescue): same entry, same attachId, stub content
      rows = live(k);
      assert.deepEqual(rows.map((r) => [r.role, r.text]), [
        ['user', stub1],
        ['user', 'What did the keepers log?'],
        ['assistant', REPLY],
      ]);
      assert.equal(rows[0].attach_id, chip1.attachId);
      assert.equal(rows[0].entry.attachId, chip1.attachId);
      assert.equal(rows[0].content_chars, stub1.length);
      assert.notEqual(rows[2].entry.interrupted, true);
      const states1 = await progressStates(panel);
      assert.ok(
        states1.some((s) => !s.hidden && s.stage === 'rescue' && s.text === 'Context too long — retrying with large attachments omitted (0/1)…'),
        `the rescue progress was shown: ${JSON.stringify(states1)}`,
      );
      assert.equal(await panel.locator(tid('chat-error')).count(), 0);

      // ---- turn 2: a new big attach; the rescue retry overflows too
      mode = 'always';
      await recordProgress(panel);
      const chip2 = await attachPage(panel, { known: [chip1.attachId] });
      rows = live(k);
      assert.equal(rows.length, 4);
      const full2 = rows[3].text;
      assert.equal(rows[3].attach_id, chip2.attachId);
      assert.ok(full2.length >= 8000);
      const before = chatRequests(mock).length;
      await panel.fill(tid('composer-input'), 'And the lamp?');
      await panel.click(tid('send'));
      // shown once, in the message's "Not answered" mark (issue 32: no second card with the same text)
      const notice = panel.locator(tid('failed-mark')).last();
      await notice.waitFor({ timeout: 30_000 });
      const noticeText = await notice.innerText();
      t.diagnostic(`notice: ${noticeText.replace(/\s+/g, ' ')}`);
      assert.match(noticeText, /^Not answered: /);
      assert.match(noticeText, /maximum context length is 128000 tokens/, 'the original error is shown');
      assert.equal(await panel.locator(tid('chat-error')).count(), 0, 'the error is not shown twice');
      await waitFor(async () => !(await bubbles(panel)).some((b) => b.streaming), { timeoutMs: 10_000, what: 'no streaming bubble' });
      await sleep(500); // anything late would show up in the DB or the mock now
      reqs = chatRequests(mock, before);
      assert.equal(reqs.length, 2, 'the attempt and one retry, no third request');
      assert.equal(msgText(reqs[1].body.messages[0]), stub1, 'the committed stub is sent as stored');
      assert.equal(msgText(reqs[1].body.messages[3]), rescueStub(full2), 'the retry stubbed the new attach');
      const states2 = await progressStates(panel);
      assert.ok(states2.some((s) => !s.hidden && s.stage === 'rescue'), 'the rescue progress was shown again');
      assert.equal(states2[states2.length - 1].hidden, true, 'and hidden after the error');

      rows = live(k);
      assert.deepEqual(rows.map((r) => [r.role, r.text]), [
        ['user', stub1],
        ['user', 'What did the keepers log?'],
        ['assistant', REPLY],
        ['user', full2],
        ['user', 'And the lamp?'],
      ], 'the user entry stays, no reply, the new attach is not stubbed');
      assert.equal(rows[3].attach_id, chip2.attachId);
      assert.equal(rows[3].entry.summarized, undefined);
    });
  } finally {
    await mock.close();
    await site.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 4. Stop keeps the partial reply

test('Stop keeps the partial reply: interrupted entry in the DB, Interrupted badge', { timeout: 90_000 }, async (t) => {
  const LONG = 'The keepers trimmed the wick every four hours and polished the great lens each morning before dawn.';
  const PARTIAL = LONG.slice(0, 42); // 6 deltas of 7 chars, then the mock hangs
  const mock = await startMockLlm({ script: { text: LONG, chunkSize: 7, delayMs: 40, hangAfter: 6 } });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await useMock(panel, mock);
      await panel.fill(tid('composer-input'), 'How was the lamp kept?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.streaming && x.text === PARTIAL), { timeoutMs: 15_000, what: 'the partial reply streaming' });
      await sleep(300); // the mock is hanging: nothing more arrives
      assert.equal((await bubbles(panel)).find((x) => x.streaming).text, PARTIAL);
      assert.deepEqual(live(k).map((r) => r.role), ['user'], 'only the user entry while streaming');

      const t0 = Date.now();
      await panel.click(tid('stop'));
      const after = await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.interrupted), {
        timeoutMs: 15_000,
        what: 'the interrupted reply bubble',
      });
      t.diagnostic(`stop → stored bubble: ${Date.now() - t0} ms`);
      assert.equal(after.find((x) => x.role === 'assistant').text, PARTIAL);
      const badge = panel.locator(`[data-testid="bubble"][data-index="1"] ${tid('interrupted-badge')}`);
      assert.equal(await badge.textContent(), 'Interrupted'); // innerText is upper-cased by the CSS
      assert.equal(await badge.isVisible(), true);
      assert.equal(await panel.isVisible(tid('stop')), false, 'Stop is gone');
      assert.equal(await panel.locator(tid('chat-error')).count(), 0, 'a user stop is not an error');

      const rows = live(k);
      assert.deepEqual(rows.map((r) => [r.role, r.text]), [
        ['user', 'How was the lamp kept?'],
        ['assistant', PARTIAL],
      ]);
      assert.equal(rows[1].entry.interrupted, true);
      assert.equal(rows[1].entry.providerLabel, 'Mock · mock-model');
      assert.equal(chatRequests(mock).length, 1);
    });
  } finally {
    await mock.close();
  }
});

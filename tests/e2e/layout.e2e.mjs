// The panel's layout where it was rough (issue 21), measured in the real panel in Chromium:
//   - a table in a reply at 300 px keeps its words whole and scrolls sideways;
//   - a wide panel (1,200 px) keeps the transcript to a readable width, centred;
//   - a pasted full-page screenshot is neither a sliver nor the whole panel: the bubble shows its top
//     at the bubble's width, at most 240 px high, and the lightbox scrolls it at the panel's width.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { withKeepsake, hostCall, waitFor } from './harness.mjs';
import { makePng } from './fixtures.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, waitForBubbles, pasteImages } from './panel.mjs';

const REPLY = `The keepers by decade:

| Keeper family | Lighthouse | Decades of service | Notes |
|---|---|---|---|
| Marrowfield | Saltmarsh Point | 1931–1961 | lamp cleaned weekly |
| Quillbrook | Northwatch | 1961–1990 | fog signal rebuilt |

${'A long paragraph about the tides and the keepers who watched them. '.repeat(12)}`;

test('a reply table at 300 px keeps its words whole and scrolls; a 1,200 px panel keeps lines readable', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm({ script: { text: REPLY, chunkSize: 40, delayMs: 2 } });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel({ viewport: { width: 300, height: 700 } });
      await hostCall(panel, 'settings.set', {
        map: { providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }], activeProvider: 'p1' },
      });
      await panel.fill(tid('composer-input'), 'Who kept the lights?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.index !== null), { timeoutMs: 20_000, what: 'the reply' });
      const table = await panel.evaluate(() => {
        const tbl = document.querySelector('.msg-assistant .md table');
        // every word of every cell on one line: a word cut mid-way has two client rects (a line
        // may still break where the text allows it: at a space or after a dash, as in 1931–1961)
        const cut = [];
        for (const cell of tbl.querySelectorAll('td, th')) {
          const text = cell.firstChild;
          if (!text || text.nodeType !== 3) continue;
          let start = 0;
          for (let i = 0; i <= text.data.length; i++) {
            if (i < text.data.length && !' -\u2013\u2014'.includes(text.data[i])) continue;
            if (i > start) {
              const r = document.createRange();
              r.setStart(text, start);
              r.setEnd(text, i);
              if (r.getClientRects().length > 1) cut.push(text.data.slice(start, i));
            }
            start = i + 1;
          }
        }
        return { cut, scrollWidth: tbl.scrollWidth, clientWidth: tbl.clientWidth, overflowX: getComputedStyle(tbl).overflowX };
      });
      t.diagnostic(`table at 300 px: ${JSON.stringify(table)}`);
      assert.deepEqual(table.cut, [], 'no word in a cell is broken across lines');
      assert.ok(table.scrollWidth > table.clientWidth, 'the table is wider than the bubble');
      assert.equal(table.overflowX, 'auto', 'and scrolls sideways');

      await panel.setViewportSize({ width: 1200, height: 800 });
      const wide = await panel.evaluate(() => {
        const tr = document.querySelector('.transcript').getBoundingClientRect();
        const p = document.querySelector('.msg-assistant .md p:last-child').getBoundingClientRect();
        return { left: tr.left, right: tr.right, width: tr.width, para: p.width, viewport: innerWidth };
      });
      t.diagnostic(`1,200 px panel: ${JSON.stringify(wide)}`);
      assert.ok(wide.width <= 46 * 16 + 1, `the transcript is at most 46 rem wide (${wide.width})`);
      assert.ok(Math.abs(wide.left - (wide.viewport - wide.right)) < 40, 'and centred');
      assert.ok(wide.para < 46 * 16, 'a paragraph of the reply stays within it');
    });
  } finally {
    await mock.close();
  }
});

test('a pasted tall screenshot is a preview from its top at the bubble’s width, and the lightbox scrolls it at the panel’s width', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm({ script: { text: 'A long page, seen.', chunkSize: 40, delayMs: 2 } });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel({ viewport: { width: 360, height: 700 } });
      await hostCall(panel, 'settings.set', {
        map: { providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }], activeProvider: 'p1' },
      });
      // a full-page screenshot: 390 × 6,000 px
      await pasteImages(panel, [makePng(390, 6000, { seed: 3 })]);
      await panel.fill(tid('composer-input'), 'What is on this page?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.index !== null), { timeoutMs: 20_000, what: 'the reply' });
      await waitFor(() => panel.$$eval('[data-testid="bubble-image"]', (imgs) => imgs.length === 1 && imgs[0].complete && imgs[0].naturalWidth > 0), { timeoutMs: 15_000, what: 'the picture' });
      const m = await panel.evaluate(() => {
        const img = document.querySelector('[data-testid="bubble-image"]');
        const r = img.getBoundingClientRect();
        const bubble = img.closest('[data-testid="bubble"]');
        const body = bubble.getBoundingClientRect();
        return { h: r.height, w: r.width, bubbleH: body.height, bubbleW: body.width, viewport: innerHeight, fit: getComputedStyle(img).objectFit, pos: getComputedStyle(img).objectPosition };
      });
      t.diagnostic(`tall screenshot in the bubble: ${JSON.stringify(m)}`);
      assert.ok(m.h <= m.viewport / 2, `the picture is at most half the panel high (${m.h} of ${m.viewport})`);
      assert.ok(m.bubbleH < m.viewport * 0.6, `the bubble leaves room for the conversation (${m.bubbleH})`);
      assert.ok(m.w >= m.bubbleW * 0.7, `shown at the bubble's width, not as a sliver (${m.w} of ${m.bubbleW})`);
      assert.equal(m.fit, 'cover');
      assert.match(m.pos, /^50% 0%|^center top|top/, 'from its top');
      await panel.click(tid('bubble-image'));
      await panel.locator(tid('lightbox')).waitFor({ timeout: 10_000 });
      await waitFor(() => panel.$eval('[data-testid="lightbox"] img', (i) => i.complete && i.naturalWidth > 0), { what: 'the lightbox picture' });
      const box = await panel.evaluate(() => {
        const lb = document.querySelector('[data-testid="lightbox"]');
        const img = lb.querySelector('img');
        return { scrolls: lb.scrollHeight > lb.clientHeight, w: img.getBoundingClientRect().width, natural: img.naturalWidth, inner: innerWidth };
      });
      t.diagnostic(`lightbox: ${JSON.stringify(box)}`);
      assert.ok(box.scrolls, 'the lightbox scrolls down the page');
      assert.ok(box.w >= Math.min(box.natural, box.inner - 32) * 0.9, `at the panel's width (${box.w})`);
    });
  } finally {
    await mock.close();
  }
});

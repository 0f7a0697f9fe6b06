// Timing a panel page's first paints, shared by bench/run.mjs (scenario 6) and bench/scale.mjs:
// an init script marks when the message bubbles are in the DOM and painted, and when the pictures
// have loaded and painted; `timePanel` opens the real side panel (Keepsake) or bench/panel.html
// (the in-browser way) in a new tab of the bench browser and reads the marks.

import { EXT_ID, PANEL_URL, PANEL_VIEWPORT } from '../tests/e2e/harness.mjs';

/**
 * Runs inside a panel page before its scripts (page.addInitScript): records in `window.__paint`
 * when `bubbles` message bubbles are in the DOM (`textDom`) and painted (`text`), and when `images`
 * pictures have loaded (`imagesDom`) and painted (`images`); ms since navigation start.
 */
function paintProbe({ bubbles, images }) {
  const mark = {};
  window.__paint = mark;
  const afterPaint = (key) =>
    requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => {
        mark[key] = performance.now();
      };
      ch.port2.postMessage(0);
    });
  new MutationObserver(() => {
    if (mark.textDom === undefined && document.querySelectorAll('[data-testid="bubble"]').length >= bubbles) {
      mark.textDom = performance.now();
      afterPaint('text');
    }
  }).observe(document, { childList: true, subtree: true });
  document.addEventListener(
    'load',
    () => {
      const imgs = [...document.querySelectorAll('img[data-testid="bubble-image"]')];
      if (mark.imagesDom === undefined && imgs.length >= images && imgs.every((i) => i.complete && i.naturalWidth > 0)) {
        mark.imagesDom = performance.now();
        afterPaint('images');
      }
    },
    true,
  );
}

/**
 * Open one panel (Keepsake's real side panel or the baseline page) and time its first paints.
 * @param {{context: import('playwright-core').BrowserContext}} k the bench browser
 * @param {'keepsake'|'baseline'} way
 * @param {{bubbles: number, images: number}} expect what counts as shown
 * @param {{gotoMs?: number, waitMs?: number}} [limits]
 * @returns {Promise<{text: number, textDom: number, images: number}>} ms since navigation start
 */
export async function timePanel(k, way, expect, { gotoMs = 30_000, waitMs = 60_000 } = {}) {
  const page = await k.context.newPage();
  try {
    await page.setViewportSize(PANEL_VIEWPORT);
    await page.addInitScript(paintProbe, expect);
    const url = way === 'keepsake' ? PANEL_URL : `chrome-extension://${EXT_ID}/bench/panel.html`;
    await page.goto(url, { timeout: gotoMs });
    await page.waitForFunction(() => window.__paint.text !== undefined && window.__paint.images !== undefined, null, {
      timeout: waitMs,
    });
    const m = await page.evaluate(() => window.__paint);
    return { text: m.text, textDom: m.textDom, images: m.images };
  } finally {
    await page.close();
  }
}

// Helpers that drive the side panel page like a person would (clicks, typing, paste, drop) and
// read what it shows. Every wait has a timeout.

import fs from 'node:fs';
import { waitFor, withTimeout } from './harness.mjs';

export const tid = (id) => `[data-testid="${id}"]`;

/** The bubbles shown: `[{role, index, streaming, interrupted, text, images}]` in DOM order. */
export function bubbles(page) {
  return page.$$eval('[data-testid="bubble"]', (els) =>
    els.map((el) => ({
      role: el.dataset.role,
      index: el.dataset.index === undefined ? null : Number(el.dataset.index),
      streaming: el.dataset.streaming === 'true',
      interrupted: el.dataset.interrupted === 'true',
      text: (el.querySelector('.msg-body') || el).innerText.trim(),
      images: el.querySelectorAll('[data-testid="bubble-image"]').length,
    })),
  );
}

/** Attach chips shown: `[{index, attachId, text}]`. */
export function chips(page) {
  return page.$$eval('[data-testid="attach-chip"]', (els) =>
    els.map((el) => ({
      index: el.dataset.index === undefined ? null : Number(el.dataset.index),
      attachId: el.dataset.attachId || null,
      text: el.innerText.trim(),
    })),
  );
}

/** Wait until `pred(bubbles)` holds; returns the bubbles. */
export async function waitForBubbles(page, pred, { timeoutMs = 20_000, what = 'bubbles' } = {}) {
  return waitFor(
    async () => {
      const b = await bubbles(page);
      return pred(b) ? b : null;
    },
    { timeoutMs, what, intervalMs: 50 },
  );
}

/**
 * Dispatch a real `paste` event carrying image files into the composer (a DataTransfer built in
 * the page from the bytes; the same path a person's Ctrl+V takes).
 */
export async function pasteImages(page, pngs) {
  const payload = pngs.map((buf, i) => ({ b64: Buffer.from(buf).toString('base64'), name: `pasted-${i}.png` }));
  await page.evaluate((files) => {
    const dt = new DataTransfer();
    for (const f of files) {
      const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
      dt.items.add(new File([bytes], f.name, { type: 'image/png' }));
    }
    const input = document.querySelector('[data-testid="composer-input"]');
    input.focus();
    const ev = new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true });
    input.dispatchEvent(ev);
  }, payload);
}

/** Drop image files onto the panel (dragover + drop with a DataTransfer). */
export async function dropImages(page, pngs, selector = '#app') {
  const payload = pngs.map((buf, i) => ({ b64: Buffer.from(buf).toString('base64'), name: `dropped-${i}.png` }));
  await page.evaluate(
    ([files, sel]) => {
      const dt = new DataTransfer();
      for (const f of files) {
        const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
        dt.items.add(new File([bytes], f.name, { type: 'image/png' }));
      }
      const zone = document.querySelector(sel);
      zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
      zone.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    },
    [payload, selector],
  );
}

/** Images waiting in the composer tray. */
export function trayCount(page) {
  return page.$$eval('[data-testid="tray-item"]', (els) => els.length);
}

/**
 * Record every distinct text the streaming bubble shows (a MutationObserver in the page), so a
 * test can prove the reply appeared incrementally. Read with `streamStates(page)`.
 */
export async function recordStreaming(page) {
  await page.evaluate(() => {
    window.__e2eStates = [];
    const seen = new Set();
    const note = () => {
      const el = document.querySelector('[data-testid="bubble"][data-streaming="true"] .msg-body');
      const t = el ? el.innerText.trim() : null;
      if (t && !seen.has(t)) {
        seen.add(t);
        window.__e2eStates.push({ t, at: performance.now() });
      }
    };
    window.__e2eObserver?.disconnect();
    window.__e2eObserver = new MutationObserver(note);
    window.__e2eObserver.observe(document.body, { subtree: true, childList: true, characterData: true });
  });
}

export function streamStates(page) {
  return page.evaluate(() => (window.__e2eStates || []).map((s) => s.t));
}

/** Type a message and press Send. */
export async function typeAndSend(page, text) {
  await page.fill(tid('composer-input'), text);
  await page.click(tid('send'));
}

/** Open the drawer if it is closed. */
export async function openDrawer(page) {
  const hidden = await page.$eval(tid('drawer'), (el) => el.hidden);
  if (hidden) await page.click(tid('drawer-toggle'));
  await page.waitForSelector(`${tid('drawer')}:not([hidden])`, { timeout: 5000 });
}

/** Click something that downloads a file; returns `{name, text}`. */
export async function download(page, click, { timeoutMs = 15_000 } = {}) {
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: timeoutMs }), click()]);
  const file = await withTimeout(dl.path(), timeoutMs, 'download to finish');
  return { name: dl.suggestedFilename(), text: fs.readFileSync(file, 'utf8'), path: file };
}

// ---------------------------------------------------------------------------------------------
// Options page

/**
 * Add a provider card through the options page (preset "Custom…", fields filled like a person
 * would) and save it. Returns the card's id (from the card's `data-id`).
 */
export async function addProvider(opt, { name, kind, baseUrl, apiKey = '', model = '' }) {
  await opt.waitForSelector(tid('provider-preset'), { timeout: 10_000 });
  const before = await opt.locator(tid('provider-card')).count();
  await opt.selectOption(tid('provider-preset'), 'custom');
  await opt.click(tid('provider-add'));
  await waitFor(async () => (await opt.locator(tid('provider-card')).count()) === before + 1, {
    timeoutMs: 5000,
    what: 'a new provider card',
  });
  const card = opt.locator(tid('provider-card')).nth(before);
  await card.locator(tid('provider-name')).fill(name);
  await card.locator(tid('provider-kind')).selectOption(kind);
  await card.locator(tid('provider-base-url')).fill(baseUrl);
  await card.locator(tid('provider-api-key')).fill(apiKey);
  await card.locator(tid('provider-model')).fill(model);
  await card.locator(tid('provider-save')).click();
  await waitFor(async () => /Saved/.test(await card.locator(tid('provider-status')).innerText()), {
    timeoutMs: 10_000,
    what: `provider "${name}" saved`,
  });
  return card.getAttribute('data-id');
}

/** Make a saved provider card the active one (its radio button). */
export async function activateProvider(opt, id) {
  const card = opt.locator(`${tid('provider-card')}[data-id="${id}"]`);
  await card.locator(tid('provider-active')).check();
  await waitFor(async () => /active provider/i.test(await card.locator(tid('provider-status')).innerText()), {
    timeoutMs: 10_000,
    what: 'provider activated',
  });
}

/** Close the drawer if it is open. */
export async function closeDrawer(page) {
  const hidden = await page.$eval(tid('drawer'), (el) => el.hidden);
  if (!hidden) await page.click(tid('drawer-close'));
  await page.waitForSelector(`${tid('drawer')}[hidden]`, { state: 'attached', timeout: 5000 });
}

/**
 * Record every state of the progress line (`chat.progress`: `#progress` shown/hidden and its text)
 * with a MutationObserver in the page. Read with `progressStates(page)`: `[{text, hidden, stage}]`.
 */
export async function recordProgress(page) {
  await page.evaluate(() => {
    window.__e2eProgress = [];
    const box = document.getElementById('progress');
    const note = () => {
      const s = { text: document.getElementById('progress-text').textContent, hidden: box.hidden, stage: box.dataset.stage || '' };
      const last = window.__e2eProgress[window.__e2eProgress.length - 1];
      if (!last || last.text !== s.text || last.hidden !== s.hidden || last.stage !== s.stage) window.__e2eProgress.push(s);
    };
    window.__e2eProgressObserver?.disconnect();
    window.__e2eProgressObserver = new MutationObserver(note);
    window.__e2eProgressObserver.observe(box, { subtree: true, childList: true, characterData: true, attributes: true });
    note();
  });
}

export function progressStates(page) {
  return page.evaluate(() => window.__e2eProgress || []);
}

/** Timestamp pills of the finished assistant bubbles: `[{bubbleIndex, label, seconds, tag}]`. */
export function pills(page) {
  return page.$$eval('[data-testid="bubble"]:not([data-streaming]) .md-pill', (els) =>
    els.map((el) => ({
      bubbleIndex: Number(el.closest('[data-testid="bubble"]').dataset.index),
      role: el.closest('[data-testid="bubble"]').dataset.role,
      label: el.textContent,
      seconds: Number(el.dataset.seconds),
      tag: el.tagName,
    })),
  );
}

/**
 * Send one message through the composer (type, click Send) and wait until the panel shows it
 * answered: the last bubble is a finished assistant bubble with `reply`, right after the user
 * bubble with `text`. Returns `{ms, bubbles}`.
 */
export async function sendAndAwaitReply(page, text, reply, { timeoutMs = 30_000 } = {}) {
  const t0 = Date.now();
  // not streaming (Stop hidden); Send enables once there is text
  await page.waitForSelector(`${tid('stop')}[hidden]`, { state: 'attached', timeout: timeoutMs });
  await page.fill(tid('composer-input'), text);
  await page.waitForSelector(`${tid('send')}:not([disabled])`, { timeout: timeoutMs });
  await page.click(tid('send'));
  const b = await waitForBubbles(
    page,
    (bs) => {
      const n = bs.length;
      return (
        n >= 2 &&
        bs[n - 1].role === 'assistant' &&
        !bs[n - 1].streaming &&
        bs[n - 1].text === reply &&
        bs[n - 2].role === 'user' &&
        bs[n - 2].text === text
      );
    },
    { timeoutMs, what: `the reply "${reply}" to "${text}"` },
  );
  return { ms: Date.now() - t0, bubbles: b };
}

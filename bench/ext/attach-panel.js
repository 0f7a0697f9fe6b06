// Scenario 5, the Keepsake way, in the real side panel (test build only). bench/run.mjs opens the
// test build's sidepanel/sidepanel.html and imports this module into that page; it then clicks the
// 📷 button once per screenshot and times it here, with performance.now(). Everything after the
// capture is the product's own path: sidepanel.js `screenshot()` → pixels.js → `history.attach`
// over the panel's NativePort and its own keepsake-host process (which then runs the 8 MiB
// byte-budget pass), the chip rendered from that port's `changed` events and the history re-read
// through the worker. The capture is the only stand-in: `chrome.tabs.captureVisibleTab` answers
// the generated PNGs (bench/data/<name>.png) as data URLs, the same strings the baseline is given.

import { panelPixels } from '../sidepanel/pixels.js';

const shots = [];

function readAsDataUrl(blob) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(blob);
  });
}

/** Load the screenshots as data URLs (untimed; kept for every round). */
export async function prepare(names) {
  shots.length = 0;
  for (const name of names) {
    const res = await fetch(chrome.runtime.getURL(`bench/data/${name}.png`));
    if (!res.ok) throw new Error(`bench/data/${name}.png: HTTP ${res.status}`);
    shots.push(await readAsDataUrl(await res.blob()));
  }
  return { shots: shots.length, chars: shots.reduce((n, s) => n + s.length, 0) };
}

/**
 * A fresh keepsake-host for the panel's port (so its peak RSS is this round's), connected before
 * the clock starts as the worker's port is; returns nothing the driver needs (it finds the pid).
 */
export async function reset() {
  const p = panelPixels();
  p.close();
  await p.open();
}

/** Resolves when the button is no longer busy (sidepanel.js clears aria-busy when it is done). */
function untilIdle(button) {
  return new Promise((resolve) => {
    const mo = new MutationObserver(() => {
      if (!button.hasAttribute('aria-busy')) {
        mo.disconnect();
        resolve();
      }
    });
    mo.observe(button, { attributes: true, attributeFilter: ['aria-busy'] });
  });
}

/**
 * Click 📷 for every screenshot, one after the other, then wait until the host has bounded the
 * live images (`history.boundImages` on the panel's port returns after the passes the host runs
 * after each attach; it has nothing left to do). → {ms, clicks}
 */
export async function run() {
  const button = document.querySelector('[data-testid="screenshot"]');
  const note = document.querySelector('[data-testid="composer-note"]');
  const queue = [...shots];
  chrome.tabs.captureVisibleTab = async () => queue.shift();
  const t0 = performance.now();
  for (let i = 0; i < shots.length; i++) {
    const done = untilIdle(button);
    button.click();
    await done;
    if (!/^Screenshot( of “.*”)? attached\.$/.test(note.textContent)) throw new Error(`screenshot ${i + 1}: ${note.textContent}`);
  }
  await panelPixels().storage.history.boundImages({});
  return { ms: performance.now() - t0, clicks: shots.length };
}

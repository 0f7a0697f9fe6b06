// node --test extension/lib/platform.test.js — the Chromium/Firefox adapter (lib/platform.js).
import test from 'node:test';
import assert from 'node:assert/strict';

import { actionOpensPanel, browserFamily, memoryArea, openPanel, operatingSystem, pdfReading, sessionArea } from './platform.js';

const chromium = (extra = {}) => ({ runtime: { getURL: (p) => `chrome-extension://abc/${p}` }, ...extra });
const firefox = (extra = {}) => ({ runtime: { getURL: (p) => `moz-extension://1234/${p}` }, ...extra });

test('the family comes from the extension URL', () => {
  assert.equal(browserFamily(chromium()), 'chromium');
  assert.equal(browserFamily(firefox()), 'firefox');
  assert.equal(browserFamily({ runtime: { getURL: () => '', getBrowserInfo() {} } }), 'firefox');
  assert.equal(browserFamily(undefined), 'chromium');
});

test('openPanel: Chromium opens the side panel for the window, Firefox the sidebar', async () => {
  const calls = [];
  const c = chromium({ sidePanel: { open: async (t) => calls.push(['sidePanel', t]) } });
  assert.equal(await openPanel({ windowId: 7, id: 3 }, { chrome: c, browser: undefined }), true);
  assert.equal(await openPanel({ id: 3 }, { chrome: c, browser: undefined }), true);
  assert.equal(await openPanel(null, { chrome: c, browser: undefined }), false);
  assert.deepEqual(calls, [['sidePanel', { windowId: 7 }], ['sidePanel', { tabId: 3 }]]);

  const b = { sidebarAction: { open: async () => calls.push(['sidebar']) } };
  assert.equal(await openPanel({ windowId: 7 }, { chrome: firefox(), browser: b }), true);
  assert.deepEqual(calls.at(-1), ['sidebar']);
  // A refusal (not in a user gesture) is a false, not a throw.
  const warn = console.warn;
  console.warn = () => {};
  try {
    const refusing = { sidebarAction: { open: async () => { throw new Error('may only be called from a user input handler'); } } };
    assert.equal(await openPanel({ windowId: 7 }, { chrome: firefox(), browser: refusing }), false);
    const throwing = { sidebarAction: { open: () => { throw new Error('sync'); } } };
    assert.equal(await openPanel({ windowId: 7 }, { chrome: firefox(), browser: throwing }), false);
  } finally {
    console.warn = warn;
  }
  assert.equal(await openPanel({ windowId: 7 }, { chrome: firefox(), browser: undefined }), false);
});

test('the toolbar button: panel behaviour in Chromium, a click that toggles the sidebar in Firefox', () => {
  const set = [];
  const c = chromium({ sidePanel: { setPanelBehavior: async (o) => set.push(o) } });
  assert.equal(actionOpensPanel({ chrome: c, browser: undefined }), 'sidePanel');
  assert.deepEqual(set, [{ openPanelOnActionClick: true }]);

  const listeners = [];
  let toggled = 0;
  const f = firefox({ action: { onClicked: { addListener: (fn) => listeners.push(fn) } } });
  const b = { sidebarAction: { toggle: async () => toggled++ } };
  assert.equal(actionOpensPanel({ chrome: f, browser: b }), 'sidebarAction');
  assert.equal(actionOpensPanel({ chrome: f, browser: b }), 'sidebarAction', 'a second call adds no listener');
  assert.equal(listeners.length, 1);
  listeners[0]();
  assert.equal(toggled, 1);
});

test('sessionArea: the browser one when present, else one shared memory area with the same API', async () => {
  const real = { get() {}, set() {}, remove() {} };
  assert.equal(sessionArea({ storage: { session: real } }), real);
  const a = sessionArea({ storage: {} });
  assert.equal(sessionArea(undefined), a, 'one area for the whole background');
  await a.set({ k: { n: 1 }, j: 2 });
  assert.deepEqual(await a.get('k'), { k: { n: 1 } });
  assert.deepEqual(await a.get(['k', 'missing']), { k: { n: 1 } });
  assert.deepEqual(await a.get({ missing: 'dflt' }), { missing: 'dflt' });
  await a.remove('k');
  assert.deepEqual(await a.get(null), { j: 2 });
  await a.remove(['j']);
  assert.deepEqual(await a.get(null), {});
  // values are copies, as the browser's are
  const m = memoryArea();
  const v = { n: 1 };
  await m.set({ v });
  v.n = 2;
  assert.deepEqual(await m.get('v'), { v: { n: 1 } });
});

test('pdfReading: the offscreen document in Chromium; Firefox and others say why not', () => {
  assert.deepEqual(pdfReading(chromium({ offscreen: { createDocument() {} } })), { how: 'offscreen' });
  assert.deepEqual(pdfReading(firefox()), { how: null, reasonKey: 'attachPdfNotInFirefox' });
  assert.deepEqual(pdfReading(chromium()), { how: null, reasonKey: 'attachNoOffscreen' });
});

test('operatingSystem: from runtime.getPlatformInfo (Firefox\'s browser. first); the BSDs read as linux; unknown is empty', async () => {
  const with_ = (os) => chromium({ runtime: { getURL: () => '', getPlatformInfo: async () => ({ os, arch: 'x86-64' }) } });
  for (const [os, want] of [['linux', 'linux'], ['openbsd', 'linux'], ['mac', 'mac'], ['win', 'win'], ['cros', ''], ['android', '']]) {
    assert.equal(await operatingSystem({ chrome: with_(os), browser: undefined }), want, os);
  }
  const b = { runtime: { getPlatformInfo: async () => ({ os: 'mac' }) } };
  assert.equal(await operatingSystem({ chrome: with_('linux'), browser: b }), 'mac', 'browser.runtime first');
  assert.equal(await operatingSystem({ chrome: { runtime: {} }, browser: undefined }), '');
  assert.equal(await operatingSystem({ chrome: { runtime: { getPlatformInfo: async () => { throw new Error('no'); } } }, browser: undefined }), '');
});

// The few places where Chromium and Firefox differ (README "Firefox"), behind one module. The
// same files run in both: Firefox's build (scripts/firefox.mjs) changes only the manifest.
//
//   side panel        Chromium: chrome.sidePanel (open, setPanelBehavior)
//                     Firefox:  browser.sidebarAction (open, toggle on the toolbar button)
//   session storage   chrome.storage.session where the browser has it (Chromium 102+, Firefox 115+),
//                     else a memory-only area with the same get/set/remove (lost when the
//                     background restarts, which is what "session" promises at most)
//   PDF reading       Chromium: an offscreen document (chrome.offscreen) runs PDF.js;
//                     Firefox has no offscreen documents: attaching a PDF says so (pdfReading())
//   captureVisibleTab the same call in both (tabs.captureVisibleTab; Firefox needs <all_urls>,
//                     which both manifests hold)
//   operating system  runtime.getPlatformInfo in both (operatingSystem(): advice that differs by OS)
//
// Everything takes an injectable `chrome` (and Firefox's `browser`) so node tests can drive it.

/**
 * Which browser family runs the extension, judged from its own URL (`moz-extension://` in
 * Firefox, `chrome-extension://` in Chromium); `browser.runtime.getBrowserInfo` is Firefox's too.
 * @param {any} [c] chrome
 * @returns {'firefox'|'chromium'}
 */
export function browserFamily(c = globalThis.chrome) {
  try {
    const own = String(c?.runtime?.getURL?.('') ?? '');
    if (own.startsWith('moz-extension:')) return 'firefox';
  } catch {
    /* fall through */
  }
  return typeof c?.runtime?.getBrowserInfo === 'function' ? 'firefox' : 'chromium';
}

/** True in Firefox (and its forks). */
export function isFirefox(c = globalThis.chrome) {
  return browserFamily(c) === 'firefox';
}

/**
 * Open the side panel (Chromium) or the sidebar (Firefox) for a tab's window. Must be called
 * inside the user gesture, before any await. Resolves true when it opened.
 * @param {{windowId?: number, id?: number}|null|undefined} tab
 * @param {{chrome?: any, browser?: any}} [deps]
 * @returns {Promise<boolean>}
 */
export function openPanel(tab, { chrome: c = globalThis.chrome, browser: b = globalThis.browser } = {}) {
  const warn = (e) => {
    console.warn('keepsake: the side panel did not open', e?.message ?? e);
    return false;
  };
  const sidebar = b?.sidebarAction ?? c?.sidebarAction;
  if (!c?.sidePanel?.open && sidebar?.open) {
    try {
      return Promise.resolve(sidebar.open()).then(() => true, warn);
    } catch (e) {
      return Promise.resolve(warn(e));
    }
  }
  const target = Number.isInteger(tab?.windowId) ? { windowId: tab.windowId } : Number.isInteger(tab?.id) ? { tabId: tab.id } : null;
  if (!target || !c?.sidePanel?.open) return Promise.resolve(false);
  return c.sidePanel.open(target).then(() => true, warn);
}

/**
 * The toolbar button opens the panel: Chromium's panel behaviour, or in Firefox a click handler
 * that toggles the sidebar (Firefox's action has no panel behaviour of its own).
 * @param {{chrome?: any, browser?: any}} [deps]
 */
export function actionOpensPanel({ chrome: c = globalThis.chrome, browser: b = globalThis.browser } = {}) {
  if (c?.sidePanel?.setPanelBehavior) {
    c.sidePanel.setPanelBehavior({ openPanelOnActionClick: true })?.catch?.((e) => {
      console.warn('keepsake: setPanelBehavior failed', e);
    });
    return 'sidePanel';
  }
  const sidebar = b?.sidebarAction ?? c?.sidebarAction;
  const action = c?.action ?? b?.action;
  if (sidebar?.toggle && action?.onClicked && !actionOpensPanel.hooked) {
    actionOpensPanel.hooked = true;
    action.onClicked.addListener(() => {
      Promise.resolve(sidebar.toggle()).catch((e) => console.warn('keepsake: the sidebar did not open', e?.message ?? e));
    });
    return 'sidebarAction';
  }
  return actionOpensPanel.hooked ? 'sidebarAction' : null;
}
/** @type {boolean} one click listener per background page */
actionOpensPanel.hooked = false;

/**
 * A memory-only stand-in for `chrome.storage.session` (same promise API: get/set/remove).
 * @returns {{get: Function, set: Function, remove: Function, memoryOnly: true}}
 */
export function memoryArea() {
  const data = new Map();
  const pick = (keys) => {
    if (keys == null) return Object.fromEntries(data);
    const list = typeof keys === 'string' ? [keys] : Array.isArray(keys) ? keys : Object.keys(keys);
    const out = {};
    for (const k of list) {
      if (data.has(k)) out[k] = structuredClone(data.get(k));
      else if (keys && typeof keys === 'object' && !Array.isArray(keys)) out[k] = keys[k];
    }
    return out;
  };
  return {
    memoryOnly: true,
    async get(keys) {
      return pick(keys);
    },
    async set(items) {
      for (const [k, v] of Object.entries(items ?? {})) data.set(k, structuredClone(v));
    },
    async remove(keys) {
      for (const k of typeof keys === 'string' ? [keys] : keys ?? []) data.delete(k);
    },
  };
}

let fallbackArea = null;

/**
 * `chrome.storage.session`, or one shared memory-only area where the browser has none.
 * @param {any} [c] chrome
 */
export function sessionArea(c = globalThis.chrome) {
  if (c?.storage?.session) return c.storage.session;
  fallbackArea ??= memoryArea();
  return fallbackArea;
}

/**
 * Whether this browser can read PDFs for attach: `'offscreen'` (Chromium's offscreen document),
 * or `null` with the catalogue key of the sentence that says why not.
 * @param {any} [c] chrome
 * @returns {{how: 'offscreen'|null, reasonKey?: string}}
 */
export function pdfReading(c = globalThis.chrome) {
  if (c?.offscreen?.createDocument) return { how: 'offscreen' };
  return { how: null, reasonKey: isFirefox(c) ? 'attachPdfNotInFirefox' : 'attachNoOffscreen' };
}

/**
 * The operating system the browser runs on, for advice that differs by platform (where a secret
 * store comes from: Options at Save). `runtime.getPlatformInfo` in both browsers (Firefox's
 * `browser.` promise API first). `'linux'` also for the BSDs (the host uses the Secret Service
 * there too); `''` when it cannot be told (ChromeOS, Android, no API).
 * @param {{chrome?: any, browser?: any}} [deps]
 * @returns {Promise<'linux'|'mac'|'win'|''>}
 */
export async function operatingSystem({ chrome: c = globalThis.chrome, browser: b = globalThis.browser } = {}) {
  try {
    const runtime = b?.runtime?.getPlatformInfo ? b.runtime : c?.runtime;
    const info = runtime?.getPlatformInfo ? await runtime.getPlatformInfo() : null;
    const os = String(info?.os ?? '');
    if (os === 'mac' || os === 'win') return os;
    if (os === 'linux' || os === 'openbsd' || os === 'freebsd') return 'linux';
  } catch {
    /* unknown */
  }
  return '';
}

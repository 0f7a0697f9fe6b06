// Per-tab site data pushed by site scripts (storage-model §9, "Site caches"). Never goes to the
// host. One `chrome.storage.session` key per tab (`site:<tabId>`), the tab id taken from the
// sender tab. The in-memory copy is restored lazily: the first lookup after a worker wake reads
// storage, checks that each tab is still alive (and still on the page the data came from) and
// prunes the rest, including a tab closed or navigated while that restore is in flight.
//
// Tab listeners are registered ON DEMAND, only while there is something to clean up. This breaks
// the usual MV3 rule (register listeners at top level so events wake the worker) on purpose:
// a top-level tabs.onUpdated would cold-start the worker on every navigation in the browser.
// Events missed while the worker sleeps are covered by the liveness check of the next restore.

import { sessionArea } from '../lib/platform.js';

/** Key prefix in chrome.storage.session. */
export const SITE_KEY_PREFIX = 'site:';

/**
 * The storage key of one tab.
 * @param {number} tabId
 * @returns {string}
 */
function siteKey(tabId) {
  return `${SITE_KEY_PREFIX}${tabId}`;
}

/**
 * The tab id of a storage key, or null when the key is not a site key.
 * @param {string} key
 * @returns {number|null}
 */
export function tabIdOfKey(key) {
  if (!key.startsWith(SITE_KEY_PREFIX)) return null;
  const rest = key.slice(SITE_KEY_PREFIX.length);
  return /^\d+$/.test(rest) ? Number(rest) : null;
}

/**
 * A URL without its fragment (in-page anchors and `#t=` do not change the page); null stays null.
 * @param {string|null|undefined} url
 * @returns {string|null}
 */
export function pageUrl(url) {
  if (typeof url !== 'string' || !url) return null;
  const i = url.indexOf('#');
  return i < 0 ? url : url.slice(0, i);
}

/**
 * Whether cached data recorded for `storedUrl` is stale on a tab now showing `currentUrl`.
 * Unknown URLs on either side never count as a change.
 * @param {string|null} storedUrl
 * @param {string|null|undefined} currentUrl
 * @returns {boolean}
 */
function navigatedAway(storedUrl, currentUrl) {
  const now = pageUrl(currentUrl);
  return Boolean(storedUrl && now && storedUrl !== now);
}

/**
 * Create the cache.
 * @param {{chrome?: any, now?: () => number}} [o] injectable `chrome` (storage.session, tabs)
 * @returns {{put(tabId: number, data: any, opts?: {url?: string}): Promise<void>,
 *            get(tabId: number): Promise<any>, drop(tabId: number): Promise<void>,
 *            readonly listening: boolean, readonly size: number}}
 */
export function createSiteCache({ chrome: c = globalThis.chrome, now = () => Date.now() } = {}) {
  const mem = new Map(); // tabId → {data, url, at}
  let restored = false;
  let restoring = null;
  const goneDuringRestore = new Set();
  const navigatedDuringRestore = new Map(); // tabId → page URL
  let listening = false;

  const onRemoved = (tabId) => {
    void drop(tabId);
  };
  const onUpdated = (tabId, changeInfo) => {
    if (!changeInfo || typeof changeInfo.url !== 'string') return;
    const entry = mem.get(tabId);
    if (entry) {
      if (navigatedAway(entry.url, changeInfo.url)) void drop(tabId);
    } else if (restoring) {
      navigatedDuringRestore.set(tabId, pageUrl(changeInfo.url));
    }
  };
  const onReplaced = (_addedTabId, removedTabId) => {
    void drop(removedTabId);
  };

  function listen() {
    if (listening) return;
    listening = true;
    c.tabs.onRemoved.addListener(onRemoved);
    c.tabs.onUpdated.addListener(onUpdated);
    c.tabs.onReplaced?.addListener(onReplaced);
  }

  function unlistenIfIdle() {
    if (!listening || mem.size > 0 || restoring) return;
    listening = false;
    c.tabs.onRemoved.removeListener(onRemoved);
    c.tabs.onUpdated.removeListener(onUpdated);
    c.tabs.onReplaced?.removeListener(onReplaced);
  }

  async function liveTab(tabId) {
    try {
      return (await c.tabs.get(tabId)) ?? null;
    } catch {
      return null; // "No tab with id"
    }
  }

  function stale(tabId, entry, tab) {
    if (!tab || goneDuringRestore.has(tabId)) return true;
    if (navigatedAway(entry?.url ?? null, tab.url)) return true;
    return navigatedDuringRestore.has(tabId) && navigatedAway(entry?.url ?? null, navigatedDuringRestore.get(tabId));
  }

  async function restore() {
    const all = (await sessionArea(c).get(null)) ?? {};
    const stored = [];
    for (const [key, entry] of Object.entries(all)) {
      const tabId = tabIdOfKey(key);
      if (tabId !== null) stored.push([tabId, entry]);
    }
    if (stored.length === 0) return;
    listen(); // from here on, a closing tab is seen by onRemoved
    const checked = await Promise.all(stored.map(async ([tabId, entry]) => [tabId, entry, await liveTab(tabId)]));
    const dead = [];
    for (const [tabId, entry, tab] of checked) {
      if (stale(tabId, entry, tab)) dead.push(siteKey(tabId));
      else if (!mem.has(tabId)) mem.set(tabId, entry);
    }
    if (dead.length) await sessionArea(c).remove(dead);
  }

  function ensureRestored() {
    if (restored) return Promise.resolve();
    restoring ??= restore()
      .then(
        () => {
          restored = true;
        },
        (e) => console.warn('keepsake: site cache restore failed; will retry', e),
      )
      .finally(() => {
        restoring = null;
        goneDuringRestore.clear();
        navigatedDuringRestore.clear();
        unlistenIfIdle();
      });
    return restoring;
  }

  /**
   * Store a tab's site data (replacing what it had).
   * @param {number} tabId
   * @param {any} data JSON-serialisable
   * @param {{url?: string}} [opts] the page the data describes (the sender's URL)
   */
  async function put(tabId, data, { url } = {}) {
    await ensureRestored();
    const entry = { data, url: pageUrl(url), at: now() };
    mem.set(tabId, entry);
    goneDuringRestore.delete(tabId);
    listen();
    await sessionArea(c).set({ [siteKey(tabId)]: entry });
  }

  /**
   * A tab's site data, or null.
   * @param {number} tabId
   * @returns {Promise<any>}
   */
  async function get(tabId) {
    await ensureRestored();
    return mem.get(tabId)?.data ?? null;
  }

  /**
   * Forget a tab's site data.
   * @param {number} tabId
   */
  async function drop(tabId) {
    if (restoring) goneDuringRestore.add(tabId);
    mem.delete(tabId);
    unlistenIfIdle();
    await sessionArea(c).remove(siteKey(tabId));
  }

  return {
    put,
    get,
    drop,
    get listening() {
      return listening;
    },
    get size() {
      return mem.size;
    },
  };
}

// Asking about what the reader selected, and the keyboard commands (README "Selection and
// shortcuts"):
// - a context menu on selected text, "Keepsake" → Ask Keepsake / Explain / Translate / Summarize:
//   the side panel opens, the selection is attached to the conversation as a quote
//   (`history.attach`, mode `selection`), and the panel puts the action's prompt in an empty
//   composer (a draft the reader is writing is never replaced);
// - a context menu on links to PDFs, "Keepsake" → Attach this PDF: the panel opens and the PDF
//   is read and attached (page-attach.js → pdf-attach.js);
// - the `attach-page` command (Alt+Shift+J) opens the panel and attaches the page; the manifest's
//   `_execute_action` command (Alt+Shift+K) opens the panel itself (openPanelOnActionClick).
//
// `chrome.sidePanel.open` must run inside the click's user gesture, so it is called before any
// await. What the panel still has to do (the prompt) waits as a "pending ask" in worker memory
// and `chrome.storage.session` (a UI-only key; the quote itself is already in the host) until the
// panel takes it (`chat.takeAsk`), at start-up or on the `chat.ask` event.

import { redactUrl } from '../lib/entries.js';
import { t, uiLocale } from '../lib/i18n.js';
import { openPanel as openPlatformPanel, sessionArea } from '../lib/platform.js';
import { changeAreas } from '../lib/protocol.js';

/** The context menu's items (ids are `keepsake-<id>`), in menu order; titles in the UI language. */
export const ASK_ACTIONS = Object.freeze([
  Object.freeze({ id: 'ask', get title() { return t('menuAskKeepsake'); } }),
  Object.freeze({ id: 'explain', get title() { return t('menuExplain'); } }),
  Object.freeze({ id: 'translate', get title() { return t('menuTranslate'); } }),
  Object.freeze({ id: 'summarize', get title() { return t('menuSummarize'); } }),
]);

const MENU_PARENT = 'keepsake';
/** The link menu item, on links whose path ends in .pdf. */
export const PDF_LINK_ITEM = 'keepsake-pdf-link';
const PDF_LINK_PATTERNS = ['*://*/*.pdf', '*://*/*.pdf?*', '*://*/*.pdf#*', '*://*/*.PDF', '*://*/*.PDF?*'];
const MENU_PREFIX = 'keepsake-';
/** chrome.storage.session key of the ask the panel has not taken yet. */
export const PENDING_ASK_KEY = 'pendingAsk';
/** A pending ask older than this is dropped (the panel never opened). */
export const PENDING_ASK_MAX_AGE_MS = 2 * 60 * 1000;
/** A selection is quoted up to this many characters. */
export const MAX_QUOTE_CHARS = 200_000;

/**
 * The prompt an action puts in the composer (empty for "Ask Keepsake": the reader writes it). The
 * reader sees and sends it as their own message, so it is in the UI language.
 * @param {string} action one of ASK_ACTIONS' ids
 * @param {string} language the reader's language tag (`navigator.language`), for Translate
 */
export function promptFor(action, language = '') {
  switch (action) {
    case 'explain':
      return t('menuExplainPrompt');
    case 'summarize':
      return t('menuSummarizePrompt');
    case 'translate': {
      let name = '';
      try {
        // the language, not the region: "French" for fr-FR (Chinese keeps its script or region),
        // named in the UI language
        const tag = String(language).toLowerCase().startsWith('zh') ? language : String(language).split('-')[0];
        name = tag ? new Intl.DisplayNames([uiLocale()], { type: 'language' }).of(tag) || '' : '';
      } catch {
        name = '';
      }
      return t('menuTranslatePrompt', name || t('menuLanguageEnglish'));
    }
    default:
      return '';
  }
}

/** Run in the page (the frame the menu was opened in): the selection with its line breaks. */
export function readSelection() {
  return String(globalThis.getSelection?.() ?? '');
}

/**
 * @param {object} deps
 * @param {object} deps.storage                 lib/storage.js client
 * @param {(event: object) => void} deps.broadcast events to the panel
 * @param {((args: {tabId: number}) => Promise<object>) & {pdfLink: Function}} deps.attachPage page-attach.js
 * @param {object} [deps.chrome]
 * @param {() => string} [deps.language]
 * @param {() => number} [deps.now]
 * @param {{on: Function}} [deps.events] the NativePort's events: a restore (`changed` with
 *   `areas.restored`, issue 36) drops the pending ask, whose quote was in the database put aside
 */
export function createSelectionActions({ storage, broadcast, attachPage, chrome = globalThis.chrome, language = () => globalThis.navigator?.language ?? '', now = () => Date.now(), events = null }) {
  let pending = null;
  events?.on?.('changed', (change) => {
    if (changeAreas(change).restored) setPending(null);
  });

  /** (Re)create the menu (onInstalled; items survive worker restarts). */
  async function installMenus() {
    await chrome.contextMenus.removeAll();
    const made = (props) =>
      new Promise((resolve) => {
        chrome.contextMenus.create(props, () => {
          void chrome.runtime.lastError; // an id that exists already (a second onInstalled)
          resolve();
        });
      });
    await made({ id: MENU_PARENT, title: t('extName'), contexts: ['selection', 'link'] });
    for (const a of ASK_ACTIONS) await made({ id: MENU_PREFIX + a.id, parentId: MENU_PARENT, title: a.title, contexts: ['selection'] });
    await made({ id: PDF_LINK_ITEM, parentId: MENU_PARENT, title: t('menuAttachPdf'), contexts: ['link'], targetUrlPatterns: PDF_LINK_PATTERNS });
  }

  /** Open the side panel for the tab's window; must be called before any await of a gesture. */
  function openPanel(tab) {
    return openPlatformPanel(tab, { chrome });
  }

  async function setPending(ask) {
    pending = ask;
    try {
      await (ask ? sessionArea(chrome).set({ [PENDING_ASK_KEY]: ask }) : sessionArea(chrome).remove(PENDING_ASK_KEY));
    } catch (e) {
      console.warn('keepsake: could not keep the pending ask', e);
    }
  }

  /** The selection as the page holds it (line breaks kept), else the menu's copy of it. */
  async function selectionText(info, tab) {
    try {
      const [inj] = await chrome.scripting.executeScript({
        target: { tabId: tab.id, frameIds: [Number.isInteger(info.frameId) ? info.frameId : 0] },
        func: readSelection,
      });
      const text = inj?.result;
      if (typeof text === 'string' && text.trim()) return text;
    } catch {
      /* a page the extension may not script: the menu's text */
    }
    return typeof info.selectionText === 'string' ? info.selectionText : '';
  }

  /**
   * A click on one of the menu's items: `{attachId, prompt}` or null when it was not ours.
   * @param {{menuItemId: string, selectionText?: string, frameId?: number, pageUrl?: string}} info
   * @param {{id: number, windowId?: number, url?: string, title?: string}} tab
   */
  async function clicked(info, tab) {
    const id = String(info?.menuItemId ?? '');
    if (id === PDF_LINK_ITEM) return pdfLink(info, tab);
    const action = ASK_ACTIONS.find((a) => MENU_PREFIX + a.id === id);
    if (!action) return null;
    const opened = openPanel(tab); // first: the click's gesture
    const raw = await selectionText(info ?? {}, tab ?? {});
    const body = raw.replace(/\r\n?/g, '\n').trim().slice(0, MAX_QUOTE_CHARS);
    if (!body) return null;
    const url = redactUrl(String(tab?.url || info.pageUrl || ''));
    const title = String(tab?.title || url);
    const res = await storage.history.attach({ ctx: { url, title, mode: 'selection', header: 'Quoted: the text the reader selected\n', body } }); // i18n-ok: attach header for the model (storage-model §2.4)
    const ask = { attachId: res.attachId, action: action.id, prompt: promptFor(action.id, language()), chars: body.length, title, at: now() };
    await setPending(ask);
    broadcast({ type: 'chat.ask' });
    await opened;
    return ask;
  }

  /** "Attach this PDF" on a link: the panel opens; the PDF is read and attached; the panel hears how it went. */
  async function pdfLink(info, tab) {
    const opened = openPanel(tab);
    try {
      return await attached(() => attachPage.pdfLink({ url: String(info.linkUrl || ''), title: '', tabUrl: String(tab?.url || info.pageUrl || '') }));
    } finally {
      await opened;
    }
  }

  /** Run an attach and tell the panel how it went (`chat.attached`). */
  async function attached(run) {
    try {
      const r = await run();
      broadcast({ type: 'chat.attached', title: r.title, chars: r.chars, summarized: r.summarized, figures: r.figures ?? 0, duplicate: r.duplicate === true });
      return r;
    } catch (e) {
      broadcast({ type: 'chat.attached', error: { code: e?.code ?? 'attach_failed', message: String(e?.message ?? e) } });
      return null;
    }
  }

  /** The ask the panel has to finish (once), or null. */
  async function takeAsk() {
    let ask = pending;
    if (!ask) {
      try {
        ask = (await sessionArea(chrome).get(PENDING_ASK_KEY))?.[PENDING_ASK_KEY] ?? null;
      } catch {
        ask = null;
      }
    }
    if (ask) await setPending(null);
    return ask && now() - Number(ask.at) <= PENDING_ASK_MAX_AGE_MS ? ask : null;
  }

  /** A keyboard command (manifest `commands`): `attach-page` opens the panel and attaches the tab. */
  async function command(name, tab) {
    if (name !== 'attach-page' || !Number.isInteger(tab?.id)) return null;
    const opened = openPanel(tab);
    try {
      return await attached(() => attachPage({ tabId: tab.id }));
    } finally {
      await opened;
    }
  }

  return { installMenus, clicked, takeAsk, command };
}

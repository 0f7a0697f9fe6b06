// Side panel entry: wires the transcript, the composer, the sessions drawer and the host banner to
// the worker (lib/bridge.js). Every call goes through the worker and carries the port's per-operation
// timeout, so nothing here can hang; the one exception is image bytes: a screenshot is attached over
// the panel's own native port (pixels.js), so pixels never pass through the worker.

import { t, localize } from '../lib/i18n.js';
import { hostCall, workerCall as rawWorkerCall, onWorkerEvent, replyToResult } from '../lib/bridge.js';
import { createStorage } from '../lib/storage.js';
import { explainHostError, HOST_ERROR_CODES, CLIENT_ERROR_CODES, changeAreas } from '../lib/protocol.js';
import { icon, copyText } from '../lib/ui/dom.js';
import { createBanner, isConnectionError } from '../lib/ui/banner.js';
import { createMessageList } from './messages.js';
import { createComposer } from './composer.js';
import { turnCaps } from '../lib/caps.js';
import { createDrawer } from './drawer.js';
import { createImageCache } from './images.js';
import { entryImages } from './entries.js';
import { entryText } from '../lib/entries.js';
import { entryKey } from './mirror.js';
import { formatChars, progressText } from '../lib/ui/format.js';
import { createChangeFilter, onPanelChanges, panelPixels, screenshotToConversation } from './pixels.js';
import { createEarlier } from './earlier.js';
import { evictedNames, evictedNotice } from '../lib/ui/evicted.js';
import { unplacedForks } from '../lib/ui/keeps.js';
import { createTurnActions } from './turn-actions.js';
import { createSwitcher, chatModel, chatModelOffer } from './switcher.js';
import { keepFocus } from './focus.js';

const $ = (id) => document.getElementById(id);

// ---- busy indicator: a spinner only while something is pending ----------------------------------
let pending = 0;
const busyEl = $('busy');
function tracked(fn) {
  return async (...args) => {
    pending += 1;
    busyEl.hidden = false;
    try {
      return await fn(...args);
    } finally {
      pending -= 1;
      busyEl.hidden = pending === 0;
    }
  };
}
const workerCall = tracked(rawWorkerCall);
const storage = createStorage(tracked(hostCall));

// the page's static words in the UI language first: localize sets textContent, the icons go in front
localize(document);
for (const el of document.querySelectorAll('[data-icon]')) el.prepend(icon(el.dataset.icon));

/** The note after a page is attached: `Attached “Title” (1.2k chars, 2 figures), condensed.`, or that it already was. */
function attachedNote(r, title) {
  // the same page again, unchanged and still waiting to be sent: nothing was added (page-attach.js)
  if (r?.duplicate) return t('panelAlreadyAttached', title || t('panelThePage'));
  const bits = [formatChars(r?.chars || 0)];
  if (r?.figures) bits.push(r.figures === 1 ? t('panelFigureOne') : t('panelFigures', r.figures));
  return t('panelAttached', title || t('panelThePage'), bits.join(t('panelListSep')), r?.summarized ? t('panelCondensedSuffix') : '');
}

// ---- errors -------------------------------------------------------------------------------------
const banner = createBanner($('host-banner'), { onRetry: retryHost });

const KNOWN_CODES = new Set([...HOST_ERROR_CODES, ...CLIENT_ERROR_CODES]);

/** One line explaining an error: host/port codes through explainHostError, worker codes by message. */
function explainLine(err) {
  if (err && KNOWN_CODES.has(err.code)) {
    const ex = explainHostError(err);
    return `${ex.title}.${ex.detail ? ` ${ex.detail}` : ''}`;
  }
  return String(err?.message || err || t('panelUnknownError'));
}

/** Show a failure where it belongs (banner for the host connection) and return a one-line text. */
function report(err, what) {
  if (isConnectionError(err)) banner.show(err);
  return `${what}: ${explainLine(err)}`;
}

function noticeFor(err, what) {
  if (isConnectionError(err)) {
    banner.show(err);
    return;
  }
  messages.notice(what, { detail: explainLine(err), cause: err?.code });
}

async function retryHost() {
  try {
    const st = await workerCall('host.reconnect');
    applyHostState(st);
    if (st?.state === 'open' && !st.dbError) await resyncAll();
  } catch (err) {
    report(err, t('panelRetryFailed'));
  }
}

/** The host's per-turn image caps (host.hello limits), null until the worker's host has answered. */
let turnImageCaps = null;

function applyHostState(st) {
  if (!st || typeof st !== 'object') return;
  if (st.hello?.limits) turnImageCaps = turnCaps(st.hello.limits) ?? turnImageCaps;
  if (st.dbError) banner.show(st.dbError);
  else if (st.state === 'error' && st.error) banner.show(st.error);
  else if (st.state === 'open') banner.hide();
}

// ---- transcript -----------------------------------------------------------------------------------
const images = createImageCache({ storage });
const messages = createMessageList({
  list: $('messages'),
  streamHost: $('stream-host'),
  scroller: $('scroller'),
  emptyState: $('empty-state'),
  earlierHost: $('earlier'),
  images,
  actions: {
    onCopy: async (text, button) => {
      const ok = await copyText(text);
      if (button) {
        // a code block's Copy button says so in its label too
        const code = button.hasAttribute('data-md-copy');
        button.classList.toggle('copied', ok);
        button.title = ok ? t('panelCopied') : t('panelCopyFailed');
        if (code) button.textContent = button.title = ok ? t('codeCopied') : t('codeCopyFailed');
        setTimeout(() => {
          button.classList.remove('copied');
          button.title = t('msgCopy');
          if (code) {
            button.textContent = t('codeCopy');
            button.title = t('codeCopyTitle');
          }
        }, 1500);
      }
    },
    onDelete: deleteAt,
    onResend: resend,
    onRegenerate: (index, button) => turnActions.regenerate(index, button),
    onUndoAttach: undoAttach,
    onSeek: seek,
    loadInlineImages,
    onSwitchVersion: (fork, version, button) => turnActions.switchVersion(fork, version, button),
    onRetry: (index, button) => turnActions.retry(index, button),
    onLoadEarlier: loadEarlier,
  },
});

// Regenerate, Retry and the version controls (turn-actions.js).
const turnActions = createTurnActions({
  workerCall,
  storage,
  beginStream: (id) => beginStream(id, ''),
  refreshHistory: () => refreshHistory(),
  clearNotices: () => messages.clearNotices(),
  notice: (text, opts) => messages.notice(text, opts),
  noticeFor: (err, what) => noticeFor(err, what),
  isStreaming: () => !!messages.stream,
});

// The part of a long chat ahead of the live window, read on request ("N earlier messages").
const earlier = createEarlier({
  storage,
  show: (view) => {
    messages.setEarlier(view);
    renderLive(); // a fork at the window's first entry may be placeable now
  },
});

let activeSessionId = '';
let sessionName = '';
let bgOrigins = new Set(); // sessions that originate an in-flight background stream
const finished = new Set(); // streamIds that already reported done/error

function historyFailed(err) {
  report(err, t('panelReadFailed'));
  if (!isConnectionError(err)) noticeFor(err, t('panelReadFailed'));
}

let historyShown = false;
let live = { entries: [], offset: 0, forks: [] }; // what history.get said last
function showHistory(r) {
  historyShown = true;
  const sessionId = typeof r?.activeSessionId === 'string' ? r.activeSessionId : '';
  live = {
    entries: Array.isArray(r?.entries) ? r.entries : [],
    offset: Number.isInteger(r?.offset) && r.offset > 0 ? r.offset : 0,
    forks: Array.isArray(r?.forks) ? r.forks : [],
  };
  earlier.sync({ sessionId, offset: live.offset });
  renderLive();
  setBinding(sessionId);
  placeFirstFork();
}

/** Render the live window with its version controls. */
function renderLive() {
  messages.render(live.entries, { forks: live.forks, offset: live.offset, before: earlier.beforeId() });
}

/**
 * A fork keyed by the entry just ahead of the window puts its controls on the window's first
 * entry: read that entry's id (one entry) when nothing shown names it.
 */
async function placeFirstFork() {
  const opts = { offset: live.offset, before: earlier.beforeId() };
  if (live.offset === 0 || opts.before || unplacedForks(live.entries, live.forks, opts).length === 0) return;
  const shown = live;
  const id = await earlier.fetchBefore();
  if (id && shown === live) renderLive();
}

// History reads are coalesced: a burst of `changed` events costs one or two reads.
let refreshing = null;
let refreshAgain = false;
function refreshHistory() {
  if (refreshing) {
    refreshAgain = true;
    return refreshing;
  }
  refreshing = (async () => {
    do {
      refreshAgain = false;
      try {
        showHistory(await storage.history.get({ images: 'ref' }));
        bootSeq = null; // what is shown now is newer than boot.js's read
      } catch (err) {
        historyFailed(err);
      }
    } while (refreshAgain);
  })().finally(() => { refreshing = null; });
  return refreshing;
}

function setBinding(id) {
  if (id === activeSessionId && (sessionName || !id)) return;
  activeSessionId = id;
  updateTitle();
  drawer.rerender();
}

let titleSeq = 0;
async function updateTitle() {
  const my = ++titleSeq;
  const titleEl = $('session-title');
  if (!activeSessionId) {
    sessionName = '';
    titleEl.textContent = t('panelNewChat');
    titleEl.title = t('panelNewChatKept');
    document.title = t('extName');
    return;
  }
  try {
    // the chat's own row (no entries), not the whole drawer
    const row = await storage.sessions.get({ id: activeSessionId, limit: 0, images: 'ref' })
      .catch((err) => { if (err?.code === 'not_found') return null; throw err; });
    if (my !== titleSeq) return;
    sessionName = row?.name || '';
    titleEl.textContent = sessionName || t('panelNewChat');
    titleEl.title = sessionName ? t('panelChatTitle', sessionName) : '';
    document.title = sessionName ? t('panelDocTitle', sessionName) : t('extName');
  } catch (err) {
    report(err, t('panelNameReadFailed'));
  }
}

// ---- streaming ----------------------------------------------------------------------------------
function beginStream(streamId, text = '') {
  if (!streamId || finished.has(streamId)) return;
  const existing = messages.stream;
  if (existing && existing.id === streamId) {
    if (text && text.length > existing.text.length) messages.setStreamText(text);
    return;
  }
  messages.startStream(streamId, text);
  composer.setStreaming(true);
}

function endStreamView() {
  messages.endStream();
  composer.setStreaming(false);
}

let resyncing = null;
function resyncStream() {
  resyncing ??= (async () => {
    try {
      const r = await workerCall('chat.state');
      applyStreamState(r?.stream ?? null, r?.background);
    } catch (err) {
      report(err, t('panelStreamReadFailed'));
    } finally {
      resyncing = null;
    }
  })();
  return resyncing;
}

function applyStreamState(s, background = []) {
  bgOrigins = new Set((Array.isArray(background) ? background : []).map((b) => b && b.originSessionId).filter(Boolean));
  if (s && s.bg && s.originSessionId) bgOrigins.add(s.originSessionId);
  if (s && !s.bg && s.streamId) {
    finished.delete(s.streamId);
    beginStream(s.streamId, typeof s.text === 'string' ? s.text : '');
    if (messages.stream && typeof s.text === 'string' && s.text !== messages.stream.text) messages.setStreamText(s.text);
  } else if (messages.stream) {
    endStreamView();
  }
  drawer.rerender();
}

async function finishStream(ev) {
  if (ev.streamId) finished.add(ev.streamId);
  await refreshHistory();
  if (!messages.stream || messages.stream.id === ev.streamId || !ev.streamId) endStreamView();
  hideProgress();
}

// ---- progress line --------------------------------------------------------------------------------
let progressTimer = 0;
function showProgress(ev) {
  clearTimeout(progressTimer);
  $('progress-text').textContent = progressText(ev);
  $('progress').hidden = false;
  $('progress').dataset.stage = ev.stage || '';
  const total = Number(ev.total) || 0;
  const done = Number(ev.done) || 0;
  const failed = ev.note === 'failed';
  $('progress').dataset.failed = failed ? 'true' : '';
  progressTimer = setTimeout(hideProgress, failed ? 6000 : total > 0 && done >= total ? 1500 : 120_000);
}
function hideProgress() {
  clearTimeout(progressTimer);
  $('progress').hidden = true;
}

// ---- events ---------------------------------------------------------------------------------------
function onEvent(ev) {
  if (!ev || typeof ev !== 'object') return;
  switch (ev.type) {
    case 'changed': {
      if (!freshChange(ev)) break; // the same commit via this panel's port, another panel or the worker
      const a = changeAreas(ev); // a restore names every area: transcript, title, drawer, trash, settings
      if (a.restored) afterRestore();
      if (a.history || a.binding) refreshHistory();
      if (a.sessions || a.trash) {
        if (a.sessions && activeSessionId) updateTitle();
        drawer.refreshIfOpen();
      }
      if (a.settings) loadConfig();
      break;
    }
    case 'host.state':
      applyHostState(ev);
      break;
    case 'events.connected':
      if (ev.reconnected) resyncAll();
      else {
        greeted = true;
        checkBootRead();
      }
      break;
    case 'chat.start':
      beginStream(ev.streamId, '');
      break;
    case 'chat.delta': {
      if (finished.has(ev.streamId)) break;
      if (!messages.stream || messages.stream.id !== ev.streamId) {
        beginStream(ev.streamId, '');
        resyncStream();
        break;
      }
      messages.appendDelta(ev.streamId, typeof ev.delta === 'string' ? ev.delta : '');
      if (typeof ev.length === 'number' && ev.length !== messages.stream.text.length) resyncStream();
      break;
    }
    case 'chat.done':
      finishStream(ev);
      break;
    case 'chat.error': {
      finishStream(ev);
      const err = ev.error || {};
      if (err.code === 'stopped' || err.code === 'dropped') break; // the user stopped or switched
      // the message was marked "Not answered" with this error (its mark and Retry say it): once only
      if (ev.failed) break;
      if (isConnectionError(err)) {
        banner.show(err);
      } else {
        const salvaged = typeof ev.salvagedIndex === 'number' && ev.salvagedIndex >= 0;
        const detail = [KNOWN_CODES.has(err.code) ? explainLine(err) : err.message || err.code || t('panelUnknownError'),
          salvaged ? t('panelPartialKept') : '']
          .filter(Boolean).join(' ');
        const title = err.kind === 'storage' ? t('panelReplyNotStored')
          : err.kind === 'http' ? t('panelProviderError')
            : err.kind === 'redirect' ? t('panelProviderRedirect') : t('panelReplyFailed');
        messages.notice(title, { detail, testid: 'chat-error', cause: err.code });
      }
      break;
    }
    case 'chat.progress':
      showProgress(ev);
      break;
    case 'chat.ask':
      takeAsk();
      break;
    case 'chat.attached':
      refreshHistory();
      if (ev.error) composer.showNote(t('panelAttachFailed', explainLine(ev.error)), { kind: 'error', sticky: true });
      else composer.showNote(attachedNote(ev, ev.title));
      break;
    default:
      break;
  }
}

/**
 * A backup was put back (Options → Backups or `keepsake-host restore`): what the panel read of the
 * old database goes (the earlier messages, the notices about it, such as an eviction's Undo) and
 * a note says what happened; the `changed` handling re-reads everything else.
 */
function afterRestore() {
  earlier.forget();
  sessionName = '';
  messages.clearNotices();
  messages.notice(t('panelRestoredNotice'), { kind: 'info', detail: t('panelRestoredDetail'), testid: 'restored-notice' });
}

// ---- actions ------------------------------------------------------------------------------------
async function currentTab() {
  const own = chrome.runtime.getURL('');
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  if (tab && !(tab.url || '').startsWith(own)) return tab;
  // The panel opened as a tab (tests, "open in tab"): use the most recently used other tab.
  const tabs = await chrome.tabs.query({ currentWindow: true });
  const others = tabs.filter((t) => !(t.url || '').startsWith(own)).sort((a, b) => (b.lastAccessed || 0) - (a.lastAccessed || 0));
  return others[0] || tab || null;
}

async function send({ text, images: imgs }) {
  messages.clearNotices();
  try {
    const r = await workerCall('chat.send', { text, images: imgs });
    if (r?.streamId) beginStream(r.streamId, '');
    refreshHistory();
    showEvicted(r?.evicted);
    return r;
  } catch (err) {
    noticeFor(err, t('panelNotSent'));
    refreshHistory();
    resyncStream();
    throw err;
  }
}

async function stop() {
  const s = messages.stream;
  if (!s) return;
  try {
    const r = await workerCall('chat.stop', { streamId: s.id });
    if (!r?.stopped) resyncStream();
  } catch (err) {
    noticeFor(err, t('panelStopFailed'));
  }
}

async function loadInlineImages(index, key) {
  const r = await storage.history.get({ from: index, limit: 1, images: 'inline' });
  const entry = r?.entries?.[0];
  const shown = messages.rowAt(index);
  if (!entry || !shown || shown.key !== key || entryText(entry) !== entryText(shown.entry) || entry.role !== shown.entry.role) {
    throw new Error(t('panelChangedMeanwhileEdit'));
  }
  return entryImages(entry);
}

async function resend(fromIndex, text, imgs) {
  messages.clearNotices();
  const kept = messages.forkAt(fromIndex)?.chosen || 1; // the version being replaced keeps its number
  try {
    const r = await workerCall('chat.resend', { fromIndex, text, images: imgs });
    if (r?.streamId) beginStream(r.streamId, '');
    refreshHistory();
    if (r?.fork && r.fork.versions >= 2) {
      messages.notice(t('panelKeptVersion', kept, r.fork.versions), { kind: 'info', testid: 'kept-notice', detail: t('panelSwitchVersions') });
    }
    showEvicted(r?.evicted);
    return r;
  } catch (err) {
    if (isConnectionError(err)) banner.show(err);
    throw new Error(explainLine(err));
  }
}

async function loadEarlier() {
  try {
    await earlier.loadMore();
  } catch (err) {
    noticeFor(err, t('panelEarlierFailed'));
  }
}

/** Evictions are never silent: which chats went to Recently deleted, with Undo. */
async function showEvicted(ids) {
  if (!Array.isArray(ids) || ids.length === 0) return;
  const names = await evictedNames(storage, ids);
  messages.addNotice(evictedNotice({
    storage, ids, names, explain: explainLine,
    onRestored: () => drawer.refreshIfOpen(),
  }));
}

async function deleteAt(index, button) {
  const row = messages.rowAt(index);
  if (!row) return;
  if (button) button.disabled = true;
  try {
    // Make sure the bubble still shows the entry stored at that index before removing by index.
    const r = await storage.history.get({ from: index, limit: 1, images: 'ref' });
    const stored = r?.entries?.[0];
    if (!stored || entryKey(stored) !== row.key) {
      await refreshHistory();
      messages.notice(t('panelChangedMeanwhileDelete'), { kind: 'info' });
      return;
    }
    const res = await storage.history.removeAt({ index });
    if (!res?.removed) messages.notice(t('panelMessageGone'), { kind: 'info' });
    await refreshHistory();
  } catch (err) {
    noticeFor(err, t('panelDeleteFailed'));
  } finally {
    if (button && button.isConnected) button.disabled = false;
  }
}

async function undoAttach(attachId, index, button) {
  if (button) button.disabled = true;
  try {
    const r = await storage.history.removeByAttachId({ attachId });
    if (r?.removedIndex === -1) {
      messages.notice(t('panelAttachmentGone'), { kind: 'info', detail: t('panelNothingElseRemoved') });
    }
    await refreshHistory();
  } catch (err) {
    noticeFor(err, t('panelRemoveAttachedFailed'));
  } finally {
    if (button && button.isConnected) button.disabled = false;
  }
}

async function seek(seconds, tabId) {
  try {
    let id = tabId;
    if (typeof id !== 'number') id = (await currentTab())?.id;
    if (typeof id !== 'number') throw new Error(t('panelNoTabToSeek'));
    const r = await workerCall('chat.seek', { tabId: id, seconds });
    if (r && r.ok === false) messages.notice(t('panelSeekFailed'), { kind: 'info', detail: t('panelNoVideo') });
  } catch (err) {
    noticeFor(err, t('panelSeekFailed'));
  }
}

async function attachPage() {
  const button = $('attach-page');
  if (button.disabled) return;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try {
    const tab = await currentTab();
    if (!tab || typeof tab.id !== 'number') {
      composer.showNote(t('panelNoTab'), { kind: 'warn' });
      return;
    }
    const r = await workerCall('chat.attachPage', { tabId: tab.id });
    const notCondensed = r?.summaryError ? t('panelNotCondensed', r.summaryError.message || r.summaryError.code) : '';
    composer.showNote(attachedNote(r, r?.title || tab.title) + notCondensed, { kind: notCondensed ? 'warn' : 'info' });
    refreshHistory();
  } catch (err) {
    if (isConnectionError(err)) banner.show(err);
    // a host error is explained; the worker's own (page_unreadable, attach_failed) say why themselves
    composer.showNote(t('panelAttachFailed', explainLine(err)), { kind: 'error', sticky: true });
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
  }
}

/** The quote a context-menu action attached (background/selection.js): its prompt, when the composer is empty. */
let composerRestored = false;
async function takeAsk() {
  if (!composerRestored) return; // start() asks once the draft is back
  let ask = null;
  try {
    ask = await workerCall('chat.takeAsk');
  } catch {
    return;
  }
  if (!ask) return;
  refreshHistory();
  const prompted = composer.offerText(ask.prompt);
  const kept = ask.prompt && !prompted ? t('panelDraftKeptPrompt') : '';
  composer.showNote(t('panelQuoted', formatChars(ask.chars || 0), ask.title || t('panelThePage')) + kept);
  composer.focus();
}

async function screenshot() {
  const button = $('screenshot');
  if (button.disabled) return;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try {
    // captured here and attached over the panel's own port: the pixels never reach the worker
    const toComposer = (url) => composer.addImages([url], { quiet: true }) > 0;
    const tab = await currentTab().catch(() => null); // no tab: the window's visible one
    const r = await tracked(screenshotToConversation)({ pixels: pixels(), tab, toComposer });
    if (isConnectionError(r.error)) banner.show(r.error);
    composer.showNote(r.note, { kind: r.kind, sticky: r.kind !== 'info' });
    if (r.attached && !r.attached.announced) refreshHistory();
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
  }
}

async function newChat() {
  const button = $('new-chat');
  if (button.disabled) return;
  button.disabled = true;
  try {
    const r = await workerCall('chat.newSession');
    endStreamView();
    messages.clearNotices();
    composer.dropOffered(); // a quote's prompt stays with the chat the quote went to
    showEvicted(r?.evicted);
    hideProgress();
    await refreshHistory();
    await resyncStream();
    composer.focus();
  } catch (err) {
    noticeFor(err, t('panelNewChatFailed'));
  } finally {
    button.disabled = false;
  }
}

async function loadSession(id) {
  await workerCall('chat.loadSession', { id });
  endStreamView();
  messages.clearNotices();
  composer.dropOffered();
  hideProgress();
  await refreshHistory();
  await resyncStream();
  await useChatModel();
}

/**
 * A loaded chat goes on with the provider and model its newest reply was written with, when this
 * installation wrote that reply with one of the provider cards (switcher.js chatModel `switch`).
 * Any other chat (an imported one, a reply named only by its provider's name) at most offers the
 * switch: stored data never changes the provider or model by itself (issue 30).
 */
async function useChatModel() {
  try {
    const s = await storage.settings.get({ keys: ['providers', 'activeProvider', 'activeModel'] });
    const pick = chatModel(live.entries, s?.providers);
    if (!pick || (pick.providerId === s.activeProvider && pick.model === s.activeModel)) return;
    if (pick.action === 'offer') {
      messages.addNotice(chatModelOffer(pick, { onUse: () => switchChatModel(pick) }));
      return;
    }
    await switchChatModel(pick);
    composer.showNote(t('panelChatModel', `${pick.name} · ${pick.model}`));
  } catch (err) {
    noticeFor(err, t('panelChatModelFailed'));
  }
}

/** Store a chat's provider and model as the active ones (its card must still be there) and show them. */
async function switchChatModel(pick) {
  const s = await storage.settings.get({ keys: ['providers'] });
  const cards = Array.isArray(s?.providers) ? s.providers : [];
  if (!cards.some((p) => p && p.id === pick.providerId)) throw new Error(t('panelChatModelGone', pick.name));
  await storage.settings.set({ map: { activeProvider: pick.providerId, activeModel: pick.model } });
  await loadConfig();
}

// ---- configuration (provider label) ---------------------------------------------------------------
let providerSeen = ''; // the active provider card as last read (JSON), '' for none

async function loadConfig() {
  const label = $('model-label');
  try {
    const s = await storage.settings.get({ keys: ['providers', 'activeProvider', 'activeModel'] });
    const providers = Array.isArray(s?.providers) ? s.providers : [];
    const p = providers.find((x) => x && x.id === s.activeProvider) || null;
    if (!p) {
      label.textContent = providers.length ? t('panelChooseProvider') : t('panelNoProvider');
      label.classList.add('missing');
    } else {
      label.textContent = [p.name, s.activeModel || p.model].filter(Boolean).join(' · ');
      label.classList.remove('missing');
    }
    // stale cards go when their cause goes: a "No provider" card once a provider is set up (or
    // the card it was about changed)
    const seen = p ? JSON.stringify(p) : '';
    if (seen && seen !== providerSeen) messages.clearNotices({ cause: 'no_provider' });
    providerSeen = seen;
  } catch (err) {
    report(err, t('panelSettingsFailed'));
  }
}

// ---- wiring ---------------------------------------------------------------------------------------
const composer = createComposer({
  form: $('composer'),
  input: $('composer-input'),
  tray: $('image-tray'),
  note: $('composer-note'),
  send: $('send'),
  stop: $('stop'),
  fileInput: $('image-file'),
  dropZone: $('app'),
  onSend: send,
  onStop: stop,
  getCaps: () => turnImageCaps,
  // the draft's text in the host, so it outlives the browser (the setting composerDraft)
  hostDraft: {
    load: async () => {
      const v = (await storage.settings.get({ keys: ['composerDraft'] }))?.composerDraft;
      return typeof v?.text === 'string' ? v.text : '';
    },
    save: (text) => (text ? storage.settings.set({ map: { composerDraft: { text, at: Date.now() } } }) : storage.settings.remove({ keys: ['composerDraft'] })),
  },
});

const drawer = createDrawer({
  el: $('drawer'),
  toggleButton: $('drawer-toggle'),
  storage,
  onLoad: loadSession,
  report,
  getActiveId: () => activeSessionId,
  getActiveName: () => sessionName,
  getBgOrigins: () => bgOrigins,
  onToggle: (open) => { if (open) resyncStream(); },
  onChanged: (c) => {
    // deleting the loaded chat (or Clear all) emptied the live history; an import may fill it
    if (c.deletedActive !== undefined || c.imported) refreshHistory();
    if (c.renamed) updateTitle();
  },
});

// The panel's own port for image bytes (pixels.js): its changes, and other panels', refresh this one.
const freshChange = createChangeFilter();
let pixelsWired = null;
function pixels() {
  if (!pixelsWired) {
    pixelsWired = panelPixels();
    pixelsWired.onChanged((ev) => onEvent({ type: 'changed', ...ev }));
  }
  return pixelsWired;
}
onPanelChanges((ev) => onEvent({ type: 'changed', ...ev }));

// a control that re-renders, disables or hides itself (Regenerate, ‹ ›, Retry, Stop) passes the focus on
keepFocus({ root: $('app'), stop: $('stop'), composer: $('composer-input') });

$('attach-page').addEventListener('click', attachPage);
$('screenshot').addEventListener('click', screenshot);
$('new-chat').addEventListener('click', newChat);
$('open-options').addEventListener('click', () => chrome.runtime.openOptionsPage());
// the provider and model switcher (switcher.js); with no provider yet the label opens Options
createSwitcher({
  button: $('model-label'),
  anchor: $('composer'),
  storage,
  onChanged: () => loadConfig(),
  openOptions: () => chrome.runtime.openOptionsPage(),
});

async function resyncAll() {
  await Promise.allSettled([refreshHistory(), resyncStream(), loadConfig()]);
  if (activeSessionId) updateTitle();
  drawer.refreshIfOpen();
}

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') resyncAll();
});

// ---- start-up: the transcript paints first --------------------------------------------------------
// boot.js sent history.get while the modules loaded; its answer is rendered as soon as this module
// runs (when that read is missing or the worker did not answer, the history is read the usual way).
// The worker's other answers (host state, a reply in progress, the provider label) are asked for at
// the same time and applied as they come. The composer's draft and focus wait until the transcript
// has painted, and so do the pictures (messages.js fetches them after the frame).

/** boot.js's read → {result} | {error} (the host's answer), or null: read the usual way. */
async function bootRead() {
  const pending = globalThis.keepsakeBoot?.history;
  if (!pending) return null;
  let reply;
  try {
    reply = await pending;
  } catch {
    return null; // the worker did not answer: the usual read says so through the bridge
  }
  try {
    return { result: replyToResult(reply) };
  } catch (error) {
    return { error };
  }
}

/** Resolves once the next frame has painted (at once in a hidden document, which paints none). */
function afterPaint() {
  return new Promise((resolve) => {
    if (document.visibilityState === 'hidden') resolve();
    else requestAnimationFrame(() => setTimeout(resolve, 0));
  });
}

// boot.js read the history before the events port was open, so a change committed in between
// brought no event: once the worker has greeted the port (every later change is announced on it),
// history.meta's changeSeq tells whether the shown history is still current.
let bootSeq = null; // changeSeq of boot.js's read while that read is what is shown
let greeted = false;
async function checkBootRead() {
  if (bootSeq === null || !greeted) return;
  const seq = bootSeq;
  bootSeq = null;
  try {
    const m = await storage.history.meta();
    if (m?.changeSeq !== seq) refreshHistory();
  } catch {
    refreshHistory(); // reports what is wrong
  }
}

async function start() {
  onWorkerEvent(onEvent);
  const hostState = workerCall('host.state').then(applyHostState, (err) => {
    report(err, t('panelWorkerSilent'));
  });
  const others = [resyncStream(), loadConfig()];
  const boot = await bootRead();
  if (!boot) {
    await hostState;
    await refreshHistory();
  } else if (boot.error) {
    await hostState; // as before: the host state first, then what the read says
    historyFailed(boot.error);
  } else if (!refreshing && !historyShown) {
    showHistory(boot.result);
    bootSeq = typeof boot.result?.changeSeq === 'number' ? boot.result.changeSeq : -1;
    checkBootRead();
  }
  await afterPaint();
  composer.restore().finally(() => {
    composerRestored = true;
    takeAsk();
  });
  await Promise.allSettled([hostState, ...others]);
  if (activeSessionId) updateTitle();
  drawer.refreshIfOpen();
  composer.focus();
  document.documentElement.dataset.ready = 'true';
}

start();

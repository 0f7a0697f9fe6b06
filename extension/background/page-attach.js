// chat.attachPage (README "Worker chat handlers"): the readable text of a tab (read in the page by
// chrome.scripting), `history.attach` with a change note when the page changed since its last
// attach, then the auto-summary when the host plans one (storage-model §9 "Auto-summary").

import { redactUrl } from '../lib/entries.js';
import { codeError, errorInfo } from './errors.js';
import { pickProvider } from './provider.js';

/** Text extracted from a page is cut here (the host accepts far more; auto-summary condenses). */
const MAX_PAGE_CHARS = 3_000_000;

function videoPlatform(url) {
  let host = '';
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return 'html5';
  }
  if (host === 'youtu.be' || host === 'youtube.com' || host.endsWith('.youtube.com')) return 'youtube';
  if (host === 'bilibili.com' || host.endsWith('.bilibili.com') || host === 'b23.tv') return 'bilibili';
  return 'html5';
}

/** Display string for `ctx.changedSince` (local `YYYY-MM-DD HH:MM`). */
function formatChangedSince(ts) {
  const d = new Date(Number(ts));
  if (Number.isNaN(d.getTime())) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** `history.attach` arguments for a page extracted by `extractReadablePage`. */
function attachArgsFor(page, { tabId, tabUrl, tabTitle, changedSince } = {}) {
  const rawUrl = (typeof tabUrl === 'string' && tabUrl) || page?.url || '';
  const url = redactUrl(rawUrl);
  const title = (typeof page?.title === 'string' && page.title.trim()) || tabTitle || url;
  const body = typeof page?.text === 'string' ? page.text.slice(0, MAX_PAGE_CHARS) : '';
  const ctx = { url, title, mode: 'full', body };
  if (changedSince) ctx.changedSince = changedSince;
  const args = { ctx };
  if (page?.hasVideo) args.videoSrc = { platform: videoPlatform(rawUrl), url, tabId };
  return args;
}

// ----- functions injected into pages by chrome.scripting (must be self-contained)

/** Readable text of the page: title, URL, main text of article/main/body, whitespace collapsed. */
export function extractReadablePage() {
  const clean = (s) =>
    String(s || '')
      .replace(/\r\n?/g, '\n')
      .replace(/[^\S\n]+/g, ' ')
      .replace(/ ?\n ?/g, '\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim();
  const candidates = [
    document.querySelector('article'),
    document.querySelector('main'),
    document.querySelector('[role="main"]'),
    document.body,
  ].filter(Boolean);
  let text = '';
  for (const el of candidates) {
    const t = clean(el.innerText !== undefined ? el.innerText : el.textContent);
    if (t.length >= 200) {
      text = t;
      break;
    }
    if (t.length > text.length) text = t;
  }
  const hasVideo = document.querySelectorAll('video').length > 0;
  return { title: String(document.title || '').trim(), url: location.href, text, hasVideo };
}

// ---------------------------------------------------------------------------------------------
// The handler

/**
 * chat.attachPage `{tabId}` → `{attachId, index, length, title, url, chars, summarized, summaryError?}`.
 * @param {object} deps
 * @param {object} deps.storage
 * @param {object} [deps.chrome]              chrome.* APIs (scripting, tabs)
 * @param {() => Promise<object>} deps.readSettings the turn settings (SettingsMemory)
 * @param {(attachId: string, provider: object) => Promise<boolean>} deps.summarize summaries.js
 */
export function createPageAttach({ storage, chrome = globalThis.chrome, readSettings, summarize }) {
  async function attachPage({ tabId } = {}) {
    if (!Number.isInteger(tabId)) throw codeError('bad_request', 'chat.attachPage needs a tabId');
    let page;
    try {
      const [inj] = await chrome.scripting.executeScript({ target: { tabId }, func: extractReadablePage });
      page = inj?.result;
    } catch (e) {
      throw codeError('attach_failed', `Could not read this page: ${e?.message ?? e}`);
    }
    if (!page) throw codeError('attach_failed', 'Could not read this page.');
    let tab = null;
    try {
      tab = await chrome.tabs.get(tabId);
    } catch {
      /* the injected result carries the URL */
    }
    let args = attachArgsFor(page, { tabId, tabUrl: tab?.url, tabTitle: tab?.title });
    try {
      const ch = await storage.attach.trackChange({ mode: args.ctx.mode, url: args.ctx.url, text: args.ctx.body });
      if (ch?.changed) {
        args = attachArgsFor(page, {
          tabId,
          tabUrl: tab?.url,
          tabTitle: tab?.title,
          changedSince: formatChangedSince(ch.previousAttachedAt),
        });
      }
    } catch {
      /* the change note is optional */
    }
    const res = await storage.history.attach(args);
    const out = {
      attachId: res.attachId,
      index: res.index,
      length: res.length,
      title: args.ctx.title,
      url: args.ctx.url,
      chars: args.ctx.body.length,
      summarized: false,
    };
    if (res.summary?.needed) {
      try {
        const settings = await readSettings();
        if (settings.autoSummarizeAttachments !== false) {
          const picked = pickProvider(settings);
          out.summarized = await summarize(res.attachId, picked.provider);
        }
      } catch (e) {
        out.summaryError = errorInfo(e);
      }
    }
    return out;
  }

  return attachPage;
}

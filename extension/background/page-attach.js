// chat.attachPage (README "Worker chat handlers"): the readable text of a tab (read in the page by
// chrome.scripting: the article as Mozilla's Readability finds it, extension/vendor/readability,
// laid out as Markdown-like text, or the page's main text when it finds none), `history.attach`
// with a change note when the page changed since its last attach, then the auto-summary when the
// host plans one (storage-model §9 "Auto-summary"). Pages the browser does not let an extension
// read are refused before anything is injected, with the reason. A tab is read as a PDF only when
// the page itself says it is one (`document.contentType`). Every fetch for the page's content (the
// PDF, its figures, its caption tracks) goes through lib/page-fetch.js and its rules.

import { attachHeader, isAttachEntry, redactUrl } from '../lib/entries.js';
import { t } from '../lib/i18n.js';
import { codeError, errorInfo } from './errors.js';
import { STREAM_KINDS, pickProvider } from './provider.js';
import { parseWebVtt, transcriptLines } from '../lib/webvtt.js';
import { createPdfReader, figuresSection, pdfAttachArgs } from './pdf-attach.js';
import { FIGURES_TOTAL_MS, PageFetchError, pageFetch } from '../lib/page-fetch.js';
import { pageUrl } from './site-cache.js';
import { pickTurnImages, turnCaps } from '../lib/caps.js';

/** Mozilla's Readability (vendor/package.json pins it; vendor/copy.mjs copies it here). */
const READABILITY = 'vendor/readability/Readability.js';

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

/**
 * A caption track fetched by the worker (lib/page-fetch.js: read up to 4 MiB, cut there) and read
 * as WebVTT, or `null`.
 * @param {string} src
 * @param {string} label
 * @param {{fetchImpl: typeof fetch, tabUrl: string, watch?: object|null}} o
 * @returns {Promise<{label: string, cues: number, text: string, truncated: boolean} | null>}
 */
async function fetchTranscript(src, label, { fetchImpl, tabUrl, watch }) {
  try {
    const got = await pageFetch(src, { kind: 'caption', tabUrl, fetchImpl, watch });
    const { cues, truncated } = parseWebVtt(new TextDecoder().decode(got.bytes));
    if (!cues.length) return null;
    return { label, cues: cues.length, text: transcriptLines(cues), truncated: truncated || got.truncated };
  } catch (e) {
    notFetched('caption track', src, e); // i18n-ok: worker log
    return null;
  }
}

/** A fetch that gave nothing: said in the worker's console (the attach goes on without it). */
function notFetched(what, src, e) {
  const why = e instanceof PageFetchError ? `${e.reason} ${e.values.join(' ')}` : String(e?.message ?? e);
  console.info(`keepsake: ${what} not attached (${redactUrl(String(src)).slice(0, 200)}): ${why}`); // i18n-ok: worker log
}

/** Whether a track's language (`en`, `en-GB`) is the wanted one (`en-US`): the primary tags match. */
function sameLanguage(a, b) {
  const primary = (x) => String(x || '').toLowerCase().split('-')[0];
  return Boolean(primary(a)) && primary(a) === primary(b);
}

/**
 * The transcript of the page's video from its caption tracks (`<track kind="subtitles|captions">`):
 * the default track, else one in the page's language, else the first. `null` when the page has
 * none or the track cannot be read.
 */
async function readTranscript(page, o) {
  const tracks = Array.isArray(page?.tracks) ? page.tracks.filter((t) => typeof t?.src === 'string' && (t.src.startsWith('https:') || t.src.startsWith('http:'))) : [];
  if (!tracks.length) return null;
  const track = tracks.find((t) => t.default) ?? tracks.find((t) => page.lang && t.lang === page.lang) ?? tracks[0];
  return fetchTranscript(track.src, track.label || track.lang || 'captions', o);
}

/** Whether `url` is on YouTube's own hosts over https (the only caption URLs the worker fetches for it). */
function onYouTube(url) {
  try {
    const u = new URL(url);
    const host = u.hostname.toLowerCase();
    return u.protocol === 'https:' && (host === 'youtube.com' || host.endsWith('.youtube.com'));
  } catch {
    return false;
  }
}

/**
 * A YouTube video's transcript from the caption tracks its player lists (`readYouTubePlayer`):
 * a track written by people in the reader's language, else any written by people, else the
 * automatic one in the reader's language, else the first; asked for as WebVTT (`fmt=vtt`).
 * @param {{tracks?: Array<{baseUrl: string, lang: string, label: string, asr: boolean}>}|null} player
 * @param {{language?: string, fetchImpl: typeof fetch, tabUrl: string, watch?: object|null}} o
 */
export async function readYouTubeTranscript(player, { language = '', fetchImpl, tabUrl, watch = null }) {
  const tracks = (Array.isArray(player?.tracks) ? player.tracks : []).filter((t) => typeof t?.baseUrl === 'string' && onYouTube(t.baseUrl));
  if (!tracks.length) return null;
  const written = tracks.filter((t) => !t.asr);
  const track =
    written.find((t) => sameLanguage(t.lang, language)) ?? written[0] ?? tracks.find((t) => sameLanguage(t.lang, language)) ?? tracks[0];
  const url = new URL(track.baseUrl);
  url.searchParams.set('fmt', 'vtt');
  const label = `${track.label || track.lang || 'captions'}${track.asr ? ' (auto-generated)' : ''}`;
  return fetchTranscript(url.href, label, { fetchImpl, tabUrl, watch });
}

/** `m:ss` or `h:mm:ss` of a length in seconds. */
function clock(seconds) {
  const s = Math.max(0, Math.floor(Number(seconds) || 0));
  const p = (n) => String(n).padStart(2, '0');
  return s >= 3600 ? `${Math.floor(s / 3600)}:${p(Math.floor(s / 60) % 60)}:${p(s % 60)}` : `${Math.floor(s / 60)}:${p(s % 60)}`;
}

/** Figures attached when the host's per-turn count is not known yet (its default). */
const DEFAULT_TURN_IMAGES = 8;

/** Base64 of bytes (Uint8Array.prototype.toBase64 where the browser has it). */
function toBase64(bytes) {
  if (typeof bytes.toBase64 === 'function') return bytes.toBase64();
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

/**
 * An article's picture as a data URL (lib/page-fetch.js: up to 8 MiB, cookies only when it is on
 * the tab's own origin), or null. SVG is not a picture here.
 */
async function fetchFigure(src, { fetchImpl, tabUrl, watch, signal }) {
  try {
    const accept = (type) => type.startsWith('image/') && type !== 'image/svg+xml';
    const got = await pageFetch(src, { kind: 'figure', tabUrl, fetchImpl, watch, signal, accept });
    return got.bytes.length ? `data:${got.type};base64,${toBase64(got.bytes)}` : null;
  } catch (e) {
    notFetched('figure', src, e);
    return null;
  }
}

/**
 * An article's figures (`extractReadablePage` marks each with U+0001 i U+0001 in the text): the
 * worker fetches them in order while the per-turn count allows, keeps those the per-turn caps
 * admit (first fit), numbers them `[Figure 1]`, `[Figure 2]` … where they stood (the host puts each
 * picture after its anchor's line, storage-model §6.6) and writes the `## Figures` section with
 * their captions. A figure not attached (refused by a rule of lib/page-fetch.js, over its cap, not
 * a picture, or not fetched within FIGURES_TOTAL_MS of the first) keeps its caption as text.
 * @param {object} page `extractReadablePage`'s result
 * @param {{fetchImpl: typeof fetch, tabUrl: string, watch?: object|null, limits?: object|null}} o
 * @returns {Promise<{text: string, images: string[], section: string}>}
 */
export async function placeFigures(page, { fetchImpl, tabUrl = '', watch = null, limits = null }) {
  const figs = Array.isArray(page?.figures) ? page.figures : [];
  const text = typeof page?.text === 'string' ? page.text : '';
  if (!figs.length) return { text, images: [], section: '' };
  const caps = turnCaps(limits);
  const most = caps?.maxImages ?? DEFAULT_TURN_IMAGES;
  const urls = [];
  const signal = AbortSignal.timeout(FIGURES_TOTAL_MS);
  for (const f of figs) urls.push(urls.filter(Boolean).length < most ? await fetchFigure(String(f?.src ?? ''), { fetchImpl, tabUrl, watch, signal }) : null);
  const fetched = urls.filter(Boolean);
  const picked = pickTurnImages(fetched, { caps: caps ?? { maxImages: most, budget: Number.MAX_SAFE_INTEGER } });
  const number = new Map(); // figure index → its number among the attached
  const captions = [];
  let j = 0;
  urls.forEach((u, i) => {
    if (!u) return;
    if (picked.reasons[j++] === null) {
      number.set(i, number.size + 1);
      captions.push(String(figs[i]?.caption ?? ''));
    }
  });
  const placed = text
    .split('\u0001')
    .map((piece, k) => {
      if (k % 2 === 0) return piece;
      const i = Number(piece);
      const caption = String(figs[i]?.caption ?? '').trim();
      if (number.has(i)) return `[Figure ${number.get(i)}]${caption ? ` ${caption}` : ''}`;
      return caption ? `(Picture not attached: ${caption})` : ''; // i18n-ok: attach text for the model (storage-model §2.5)
    })
    .join('');
  return { text: placed, images: picked.images, section: figuresSection(captions.map((c) => ({ caption: c }))) };
}

/** The attach header lines (storage-model §2.4 `header`) for an article's metadata, or `undefined`. */
function articleHeader(page) {
  const one = (v) => v.replace(/\r\n?/g, '\n').replaceAll('\n', ' ').replace(/[^\S\n]+/g, ' ').trim();
  const line = (label, v) => (typeof v === 'string' && one(v) ? `${label}: ${one(v)}\n` : '');
  const canonical = typeof page?.canonicalUrl === 'string' && page.canonicalUrl ? redactUrl(page.canonicalUrl) : '';
  const h = line('Byline', page?.byline) + line('Site', page?.siteName) + line('Published', page?.publishedTime) + line('Canonical URL', canonical); // i18n-ok: attach header for the model (storage-model §2.4)
  return h || undefined;
}

/** `history.attach` arguments for a page extracted by `extractReadablePage`. */
function attachArgsFor(page, { tabId, tabUrl, tabTitle, changedSince, transcript, video, figures = null } = {}) {
  const rawUrl = (typeof tabUrl === 'string' && tabUrl) || page?.url || '';
  const url = redactUrl(rawUrl);
  const title = (typeof video?.title === 'string' && video.title.trim()) || (typeof page?.title === 'string' && page.title.trim()) || tabTitle || url;
  const text = figures ? figures.text : typeof page?.text === 'string' ? page.text : '';
  const withTranscript = transcript ? `${text}\n\n## Transcript\n\n${transcript.text}` : text; // i18n-ok: attach text for the model (storage-model §2.4)
  const section = figures?.section ? `\n\n${figures.section}` : '';
  const body = withTranscript.slice(0, MAX_PAGE_CHARS - section.length) + section;
  const article = page?.method === 'readability';
  const ctx = { url, title, mode: article ? 'article' : 'full', body };
  let header = article ? articleHeader(page) : undefined;
  if (video?.author || video?.lengthSeconds) {
    const one = (v) => String(v).replace(/[^\S\n]+/g, ' ').replaceAll('\n', ' ').trim();
    header = `${header ?? ''}${video.author ? `Channel: ${one(video.author)}\n` : ''}${video.lengthSeconds ? `Length: ${clock(video.lengthSeconds)}\n` : ''}`;
  }
  if (transcript) {
    const more = transcript.truncated ? ', cut' : '';
    header = `${header ?? ''}Transcript: ${transcript.label.replace(/[^\S\n]+/g, ' ').replaceAll('\n', ' ')} (${transcript.cues} cues${more}), lines stamped [mm:ss]\n`; // i18n-ok: attach header for the model (storage-model §2.4)
  }
  if (header) ctx.header = header;
  if (changedSince) ctx.changedSince = changedSince;
  const args = { ctx };
  if (figures?.images.length) args.images = figures.images;
  if (page?.hasVideo || video) args.videoSrc = { platform: videoPlatform(rawUrl), url, tabId };
  return args;
}

/** The Chrome Web Store's hosts: no extension may script them. */
const STORE_HOSTS = new Set(['chromewebstore.google.com', 'chrome.google.com', 'microsoftedge.microsoft.com', 'addons.mozilla.org']);

/**
 * Why the browser will not let the extension read `url`, or `null` when it may.
 * @param {string} url the tab's URL
 * @param {{fileAccess?: boolean}} [o] whether "Allow access to file URLs" is on for the extension
 */
export function unreadableReason(url, { fileAccess = false } = {}) {
  let u;
  try {
    u = new URL(String(url || ''));
  } catch {
    return null; // not a URL the browser would show: let the injection say what it can
  }
  const scheme = u.protocol.slice(0, -1).toLowerCase();
  if (scheme === 'http' || scheme === 'https') {
    const host = u.hostname.toLowerCase();
    if (STORE_HOSTS.has(host) && (host !== 'chrome.google.com' || u.pathname.startsWith('/webstore'))) {
      return t('attachUnreadableStore');
    }
    return null;
  }
  if (scheme === 'file') {
    return fileAccess ? null : t('attachUnreadableFile');
  }
  if (['chrome', 'edge', 'brave', 'vivaldi', 'opera', 'about', 'chrome-untrusted', 'devtools', 'view-source', 'chrome-search'].includes(scheme)) {
    return t('attachUnreadableBrowserPage', scheme);
  }
  if (scheme === 'chrome-extension' || scheme === 'moz-extension' || scheme === 'extension') {
    return t('attachUnreadableExtensionPage');
  }
  if (scheme === 'data' || scheme === 'blob' || scheme === 'javascript') return t('attachUnreadableScheme', scheme);
  return t('attachUnreadableOtherScheme', scheme);
}

// ----- functions injected into pages by chrome.scripting (must be self-contained)

/**
 * The readable text of the page, run in the page after extension/vendor/readability/Readability.js.
 * Readability finds the article (title, byline, site name, published time) in a copy of the
 * document; its content is laid out as Markdown-like text: headings with `#`, lists with `-` and
 * `1.`, tables as `| a | b |` rows, code blocks fenced with their language, quotes with `>`.
 * Without an article (or without Readability) the main text of article/main/body, as before.
 * `method` says which: `readability` or `dom`.
 */
export function extractReadablePage() {
  const clean = (s) =>
    String(s || '')
      .replace(/\r\n?/g, '\n')
      .replace(/[^\S\n]+/g, ' ')
      .replace(/ ?\n ?/g, '\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim();
  // inline text: every run of white space one space (newlines too: HTML wraps lines freely)
  // (NUL marks where a code block goes back, so page text never carries one)
  // (U+0001 marks where an article's figure goes: the worker numbers the ones it attaches)
  const flat = (s) => String(s || '').replaceAll('\u0000', '').replaceAll('\u0001', '').replace(/\r\n?/g, '\n').replaceAll('\n', ' ').replace(/[^\S\n]+/g, ' ');
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'SVG', 'CANVAS', 'IFRAME', 'BUTTON', 'INPUT', 'SELECT', 'TEXTAREA', 'OBJECT', 'EMBED', 'VIDEO', 'AUDIO']);
  // the pictures of the page as shown (the copy Readability reads has no loaded images): src → size
  const shown = new Map();
  for (const im of document.querySelectorAll('img')) {
    const src = im.currentSrc || im.src;
    if (src && im.naturalWidth) shown.set(src, { w: im.naturalWidth, h: im.naturalHeight });
  }
  const figures = [];
  const MAX_FIGURES = 24;
  const BLOCK = new Set(['P', 'DIV', 'SECTION', 'ARTICLE', 'MAIN', 'HEADER', 'FOOTER', 'ASIDE', 'FIGURE', 'FIGCAPTION', 'DETAILS', 'SUMMARY', 'ADDRESS', 'DL', 'DT', 'DD', 'NAV', 'FORM', 'FIELDSET', 'CENTER']);
  // page furniture Readability would leave inside an article: taken out of its copy of the page
  // first (never a box that holds the article itself)
  const NOISE = [
    '[class*="newsletter" i]', '[class*="share" i]', '[class*="related" i]', '[class*="subscribe" i]', '[class*="promo" i]',
    '[class*="advert" i]', '[class~="ad" i]', '[class*="rating" i]', '[class~="tags" i]', '[class*="cookie" i]',
    '[class*="comments" i]', '[role="complementary"]',
  ].join(', ');
  const lang = (el) => {
    for (const c of String(el?.className || '').split(' ')) {
      if (c.startsWith('language-')) return c.slice(9);
      if (c.startsWith('lang-')) return c.slice(5);
    }
    return '';
  };
  const blocks = [];
  // the cleaned text with every code block back in its place
  const laidOut = (root) =>
    clean(render(root, 0))
      .split('\u0000')
      .map((piece, i) => (i % 2 ? (blocks[Number(piece)] ?? '') : piece))
      .join('');
  const children = (node, depth) => Array.from(node.childNodes, (c) => render(c, depth)).join('');
  const oneLine = (node, depth) => clean(children(node, depth)).replaceAll('\n', ' ');
  function render(node, depth) {
    if (node.nodeType === 3) return flat(node.nodeValue);
    if (node.nodeType !== 1) return '';
    const tag = String(node.tagName).toUpperCase();
    if (SKIP.has(tag) || node.hidden || node.getAttribute('aria-hidden') === 'true') return '';
    switch (tag) {
      case 'IMG': {
        // an article's picture: a figure when it is a real picture (not an icon, a spacer or a
        // tracking pixel), its caption the figure's <figcaption> or the image's alt text
        const src = node.currentSrc || node.src || '';
        if (!figuresWanted || figures.length >= MAX_FIGURES || !(src.startsWith('https:') || src.startsWith('http:'))) return '';
        const size = shown.get(src) ?? { w: Number(node.getAttribute('width')) || 0, h: Number(node.getAttribute('height')) || 0 };
        if (size.w < 120 || size.h < 80) return '';
        const cap = node.closest('figure')?.querySelector('figcaption');
        const caption = flat(cap ? cap.textContent : node.getAttribute('alt')).trim().slice(0, 300);
        figures.push({ src, caption });
        return `\n\n\u0001${figures.length - 1}\u0001\n\n`;
      }
      case 'PICTURE':
        return children(node, depth);
      case 'BR':
        return '\n';
      case 'HR':
        return '\n\n---\n\n';
      case 'H1':
      case 'H2':
      case 'H3':
      case 'H4':
      case 'H5':
      case 'H6':
        return `\n\n${'#'.repeat(Number(tag[1]))} ${oneLine(node, depth)}\n\n`;
      case 'PRE': {
        // kept aside as it is (indentation, blank lines) and put back after the text is cleaned
        let code = String(node.textContent || '').replaceAll('\u0000', '');
        while (code.endsWith('\n')) code = code.slice(0, -1);
        blocks.push(`\`\`\`${lang(node.querySelector('code')) || lang(node)}\n${code}\n\`\`\``);
        return `\n\n\u0000${blocks.length - 1}\u0000\n\n`;
      }
      case 'CODE':
        return `\`${flat(node.textContent)}\``;
      case 'UL':
      case 'OL': {
        let n = Number(node.getAttribute('start')) || 1;
        const items = [];
        for (const li of node.children) {
          if (String(li.tagName).toUpperCase() !== 'LI') continue;
          const mark = tag === 'OL' ? `${n++}.` : '-';
          items.push(`${'  '.repeat(depth)}${mark} ${clean(children(li, depth + 1)).replaceAll('\n\n', '\n')}`);
        }
        return `\n\n${items.join('\n')}\n\n`;
      }
      case 'TABLE': {
        const rows = Array.from(node.querySelectorAll('tr')).filter((tr) => tr.closest('table') === node);
        const lines = [];
        rows.forEach((tr, i) => {
          const cells = Array.from(tr.children).filter((c) => ['TD', 'TH'].includes(String(c.tagName).toUpperCase()));
          lines.push(`| ${cells.map((c) => oneLine(c, depth).replaceAll('|', '\\|')).join(' | ')} |`);
          if (i === 0 && cells.some((c) => String(c.tagName).toUpperCase() === 'TH')) lines.push(`|${' --- |'.repeat(cells.length)}`);
        });
        return `\n\n${lines.join('\n')}\n\n`;
      }
      case 'BLOCKQUOTE':
        return `\n\n${clean(children(node, depth)).split('\n').map((l) => `> ${l}`).join('\n')}\n\n`;
      case 'LI':
        return `\n${children(node, depth)}\n`;
      default:
        return BLOCK.has(tag) ? `\n\n${children(node, depth)}\n\n` : children(node, depth);
    }
  }
  let figuresWanted = false;
  const meta = (names) => {
    for (const n of names) {
      const v = document.querySelector(`meta[property="${n}"], meta[name="${n}"]`)?.getAttribute('content');
      if (v && v.trim()) return v.trim();
    }
    return '';
  };
  const hasVideo = document.querySelectorAll('video').length > 0;
  // caption tracks of the page's videos (the worker fetches and reads them: lib/webvtt.js)
  const tracks = [];
  for (const t of document.querySelectorAll('video track')) {
    const kind = String(t.getAttribute('kind') || 'subtitles').toLowerCase();
    if ((kind === 'subtitles' || kind === 'captions') && t.src) {
      tracks.push({ src: t.src, kind, lang: t.srclang || '', label: t.label || '', default: t.default === true });
    }
  }
  const base = { title: String(document.title || '').trim(), url: location.href, hasVideo, tracks, lang: document.documentElement?.lang || '', contentType: String(document.contentType || '') };
  try {
    // eslint-disable-next-line no-undef -- defined by vendor/readability/Readability.js, injected first
    const R = typeof Readability === 'function' ? Readability : null;
    let article = null;
    if (R) {
      const doc = document.cloneNode(true);
      for (const el of doc.querySelectorAll(NOISE)) {
        if (el.isConnected && !el.matches('html, body, main, article') && !el.querySelector('article, main, h1')) el.remove();
      }
      article = new R(doc, { serializer: (el) => el, keepClasses: true }).parse();
    }
    figuresWanted = true;
    const text = article?.content ? laidOut(article.content) : '';
    if (text.length >= 200) {
      return {
        ...base,
        figures,
        title: String(article.title || base.title).trim(),
        text,
        method: 'readability',
        byline: article.byline || meta(['author', 'article:author']),
        siteName: article.siteName || meta(['og:site_name']),
        publishedTime: article.publishedTime || meta(['article:published_time']),
        canonicalUrl: document.querySelector('link[rel="canonical"]')?.href || '',
        lang: article.lang || document.documentElement.lang || '',
      };
    }
  } catch {
    /* the page's own text below */
  }
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
  return { ...base, text, method: 'dom' };
}

/**
 * Run in the page's own world (`world: 'MAIN'`) on YouTube: the video's details and caption tracks
 * from its player (`movie_player.getPlayerResponse()`, which follows in-page navigation), else the
 * response the page was served with (`ytInitialPlayerResponse`). `null` when neither describes the
 * video in the address bar (`v=`), so a stale response is never read.
 */
export function readYouTubePlayer() {
  const wanted = new URL(location.href).searchParams.get('v') || '';
  let r = null;
  try {
    r = document.getElementById('movie_player')?.getPlayerResponse?.() ?? null;
  } catch {
    r = null;
  }
  const d0 = r?.videoDetails;
  if (!d0 || (wanted && d0.videoId !== wanted)) r = globalThis.ytInitialPlayerResponse ?? null;
  const d = r?.videoDetails;
  if (!d || typeof d !== 'object' || (wanted && d.videoId !== wanted)) return null;
  const list = r.captions?.playerCaptionsTracklistRenderer?.captionTracks;
  const text = (n) => (typeof n?.simpleText === 'string' ? n.simpleText : Array.isArray(n?.runs) ? n.runs.map((x) => String(x?.text ?? '')).join('') : '');
  const tracks = [];
  for (const t of Array.isArray(list) ? list : []) {
    if (typeof t?.baseUrl !== 'string') continue;
    tracks.push({ baseUrl: new URL(t.baseUrl, location.href).href, lang: String(t.languageCode || ''), label: text(t.name), asr: t.kind === 'asr' });
  }
  return {
    videoId: String(d.videoId || ''),
    title: String(d.title || ''),
    author: String(d.author || ''),
    lengthSeconds: Number(d.lengthSeconds) || 0,
    tracks,
  };
}

// ---------------------------------------------------------------------------------------------
// The handler

/** How many of the chat's newest entries are looked at for the same page waiting to be sent. */
const TWIN_WINDOW = 16;

/**
 * chat.attachPage `{tabId}` → `{attachId, index, length, title, url, chars, summarized, summaryError?}`.
 * @param {object} deps
 * @param {object} deps.storage
 * @param {object} [deps.chrome]              chrome.* APIs (scripting, tabs)
 * @param {() => Promise<object>} deps.readSettings the turn settings (SettingsMemory)
 * @param {(attachId: string, provider: object) => Promise<boolean>} deps.summarize summaries.js
 * @param {typeof fetch} [deps.fetchImpl]       fetches figures and caption tracks (through lib/page-fetch.js)
 * @param {object|null} [deps.watch]            lib/page-fetch.js's request watch (redirect targets, server addresses)
 * @param {object} [deps.siteCache]             site-cache.js: the tab's video and transcript, kept per page
 * @param {() => string} [deps.language]        the reader's language (`navigator.language`)
 * @param {{read: Function}} [deps.pdfReader]    pdf-attach.js (offscreen/pdf.html reads the PDF)
 * @param {() => Promise<object|null>} [deps.hostLimits] `host.hello`'s limits (the per-turn picture caps)
 */
export function createPageAttach({
  storage,
  chrome = globalThis.chrome,
  readSettings,
  summarize,
  fetchImpl = globalThis.fetch?.bind(globalThis),
  watch = null,
  siteCache = null,
  language = () => globalThis.navigator?.language ?? '',
  pdfReader = createPdfReader({ chrome, watch }),
  hostLimits = async () => null,
}) {
  /**
   * A PDF (a tab showing one, or a link on a tab's page): read by offscreen/pdf.js under
   * lib/page-fetch.js's rules for a tab on `tabUrl`, attached as a paper under the address its
   * bytes came from.
   */
  async function attachPdf(url, tabTitle, tabUrl) {
    const limits = await hostLimits().catch(() => null);
    const caps = limits?.turnMaxImages;
    const pdf = await pdfReader.read(url, { maxFigures: Number.isInteger(caps) && caps > 0 ? caps : undefined, tabUrl });
    const args = pdfAttachArgs(pdf, { url: typeof pdf?.url === 'string' && pdf.url ? pdf.url : url, tabTitle, limits });
    try {
      const ch = await storage.attach.trackChange({ mode: args.ctx.mode, url: args.ctx.url, text: args.ctx.body });
      args.unchanged = ch?.changed === false;
    } catch {
      /* the change note is optional */
    }
    return args;
  }

  /**
   * The same page, attached again before anything was sent: an attach entry after the chat's last
   * message (the attachments waiting for the next one) holds this URL in this mode, and the host's
   * change tracker found the same text (`args.unchanged`). Then nothing is added (a second,
   * identical chip helped no one) and the attach already there is named. A changed page, or one
   * attached before the last message, is attached again as always.
   */
  async function pendingTwin(args) {
    if (!args.unchanged || !args.ctx.url) return null;
    try {
      const meta = await storage.history.meta();
      const from = Math.max(0, (meta?.length ?? 0) - TWIN_WINDOW);
      const r = await storage.history.get({ from, images: 'ref' });
      const entries = Array.isArray(r?.entries) ? r.entries : [];
      for (let i = entries.length - 1; i >= 0 && isAttachEntry(entries[i]); i--) {
        const head = attachHeader(entries[i]);
        if (head.url === args.ctx.url && head.mode === args.ctx.mode) {
          return { index: (r.from ?? from) + i, attachId: typeof entries[i].attachId === 'string' ? entries[i].attachId : '' };
        }
      }
    } catch {
      /* not knowing means attaching, as before */
    }
    return null;
  }

  /**
   * The page's video: YouTube's player details and the transcript of its caption tracks or of a
   * `<track>`. A transcript found is kept in the tab's site cache (site-cache.js) for this page,
   * so attaching it again does not fetch it again; the cache forgets it when the tab closes or
   * leaves the page.
   */
  async function videoOf(tabId, url, page) {
    const here = pageUrl(url);
    const cached = siteCache ? await siteCache.get(tabId).catch(() => null) : null;
    if (here && cached?.page === here && cached.transcript) return { transcript: cached.transcript, video: cached.video ?? null };
    let video = null;
    let transcript = null;
    if (videoPlatform(url) === 'youtube') {
      try {
        const [inj] = await chrome.scripting.executeScript({ target: { tabId }, world: 'MAIN', func: readYouTubePlayer });
        video = inj?.result ?? null;
      } catch {
        video = null; // the page's text is still attached
      }
      transcript = await readYouTubeTranscript(video, { language: language(), fetchImpl, tabUrl: url, watch });
    }
    transcript ??= await readTranscript(page, { fetchImpl, tabUrl: url, watch });
    const kept = video ? { videoId: video.videoId, title: video.title, author: video.author, lengthSeconds: video.lengthSeconds } : null;
    if (siteCache && transcript) {
      await siteCache.put(tabId, { page: here, video: kept, transcript }, { url }).catch((e) => console.warn('keepsake: site cache put failed', e));
    }
    return { transcript, video: kept };
  }

  async function attachPage({ tabId } = {}) {
    if (!Number.isInteger(tabId)) throw codeError('bad_request', 'chat.attachPage needs a tabId');
    const release = watch?.hold();
    try {
      return await attachTab(tabId);
    } finally {
      release?.();
    }
  }

  async function attachTab(tabId) {
    let tab = null;
    try {
      tab = await chrome.tabs.get(tabId);
    } catch {
      /* the injected result carries the URL */
    }
    if (typeof tab?.url === 'string' && tab.url) {
      const fileAccess = tab.url.startsWith('file:') ? await chrome.extension?.isAllowedFileSchemeAccess?.() : false;
      const why = unreadableReason(tab.url, { fileAccess: !!fileAccess });
      if (why) throw codeError('page_unreadable', why);
    }
    let args = null;
    let page = null;
    try {
      await chrome.scripting.executeScript({ target: { tabId }, files: [READABILITY] });
      const [inj] = await chrome.scripting.executeScript({ target: { tabId }, func: extractReadablePage });
      page = inj?.result;
    } catch (e) {
      throw codeError('attach_failed', t('attachCouldNotReadWhy', e?.message ?? e));
    }
    if (!page) throw codeError('attach_failed', t('attachCouldNotRead'));
    const tabUrl = tab?.url || page.url;
    // a PDF in the browser's viewer, as the page itself says (never because its address ends in .pdf:
    // an HTML page there is read as the page it is)
    if (page.contentType === 'application/pdf') args = await attachPdf(tabUrl, tab?.title, tabUrl);
    if (!args) {
      const { transcript, video } = await videoOf(tabId, tabUrl, page);
      const figures = page.figures?.length ? await placeFigures(page, { fetchImpl, tabUrl, watch, limits: await hostLimits().catch(() => null) }) : null;
      args = attachArgsFor(page, { tabId, tabUrl: tab?.url, tabTitle: tab?.title, transcript, video, figures });
      try {
        const ch = await storage.attach.trackChange({ mode: args.ctx.mode, url: args.ctx.url, text: args.ctx.body });
        args.unchanged = ch?.changed === false;
        if (ch?.changed) {
          args = attachArgsFor(page, {
            tabId,
            tabUrl: tab?.url,
            tabTitle: tab?.title,
            changedSince: formatChangedSince(ch.previousAttachedAt),
            transcript,
            video,
            figures,
          });
        }
      } catch {
        /* the change note is optional */
      }
    }
    return finish(args);
  }

  /**
   * A PDF link `{url, title?, tabUrl}` (the context menu's "Attach this PDF", background/selection.js):
   * `tabUrl` is the page the link is on (cookies go only to its origin).
   */
  async function attachPdfLink({ url, title = '', tabUrl = '' } = {}) {
    if (!/^https?:\/\//i.test(String(url || ''))) throw codeError('bad_request', 'a PDF link must be an http(s) URL'); // i18n-ok: programming error (the menu matches only http(s) links)
    const release = watch?.hold();
    try {
      return await finish(await attachPdf(url, title, String(tabUrl || '')));
    } finally {
      release?.();
    }
  }

  /** Store the attach and run its auto-summary when the host plans one. */
  async function finish({ unchanged, ...args }) {
    const twin = await pendingTwin({ unchanged, ...args });
    if (twin) return { duplicate: true, attachId: twin.attachId, index: twin.index, title: args.ctx.title, url: args.ctx.url, chars: args.ctx.body.length };
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
    if (args.images?.length) out.figures = args.images.length;
    if (res.summary?.needed) {
      try {
        const settings = await readSettings();
        if (settings.autoSummarizeAttachments !== false) {
          const picked = pickProvider(settings);
          // an agent server is not asked for summaries (it would keep them in its transcript)
          if (STREAM_KINDS.includes(picked.provider.kind)) out.summarized = await summarize(res.attachId, picked.provider);
        }
      } catch (e) {
        out.summaryError = errorInfo(e);
      }
    }
    return out;
  }

  attachPage.pdfLink = attachPdfLink;
  return attachPage;
}

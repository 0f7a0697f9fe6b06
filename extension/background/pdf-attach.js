// Reading a PDF for chat.attachPage (README "Reading PDFs"): a tab showing a PDF in the browser's
// viewer, or a PDF link (the context menu's "Attach this PDF"). The service worker cannot run
// PDF.js, so the offscreen document offscreen/pdf.html reads it (opened with chrome.offscreen for
// the one read, closed after). The attach: the text of every page after a `[Page N]` marker, the
// PDF's metadata in the header, `paper: true` (its auto-summary keeps headings, numbers and page
// markers), and the raster figures as images after the text (`placement: "end"`), as many as the
// host's per-turn caps admit (`host.hello` limits: count and URL-char budget); the host's
// byte-budget pass then bounds the stored pictures (8 MiB) as for any attach. The fetch follows
// lib/page-fetch.js's rules: each hop is one request of the offscreen document, the worker follows
// a redirect only to the same origin and refuses a private address unless the tab is on one; the
// attach names the address the bytes came from.

import { t, formatNumber } from '../lib/i18n.js';
import { redactUrl } from '../lib/entries.js';
import { pickTurnImages, turnCaps } from '../lib/caps.js';
import { codeError } from './errors.js';
import { pdfReading } from '../lib/platform.js';
import { FETCH_LIMITS, PageFetchError, checkTarget, followPage, pageFetchMessage } from '../lib/page-fetch.js';

const OFFSCREEN_URL = 'offscreen/pdf.html';
/** Figures asked for when the host's caps are not known yet (its default count cap). */
const DEFAULT_MAX_FIGURES = 8;
/** Text extracted from a PDF is cut here (as a page's). */
const MAX_PDF_CHARS = 3_000_000;

/**
 * The reader: opens the offscreen document, asks it for each hop of the fetch (lib/page-fetch.js
 * `followPage` decides about redirects and the server's address), closes it.
 * @param {{chrome?: any, watch?: object|null}} [deps] `watch`: page-fetch.js's request watch
 * @returns {{read: (url: string, o?: {maxFigures?: number, tabUrl?: string}) => Promise<object>}}
 *   the reader's result with `url`, the address the bytes came from
 */
export function createPdfReader({ chrome = globalThis.chrome, watch = null } = {}) {
  let busy = Promise.resolve();
  const worded = (e) => (e instanceof PageFetchError ? codeError(e.code, pdfErrorMessage(e)) : e);

  async function readOnce(url, maxFigures, tabUrl) {
    const how = pdfReading(chrome);
    if (!how.how) throw codeError('pdf_unreadable', how.reasonKey === 'attachPdfNotInFirefox' ? t('attachPdfNotInFirefox') : t('attachNoOffscreen'));
    try {
      checkTarget(url, tabUrl); // refused before any document opens
    } catch (e) {
      throw worded(e);
    }
    if (await chrome.offscreen.hasDocument?.()) await chrome.offscreen.closeDocument().catch(() => {});
    await chrome.offscreen.createDocument({
      url: OFFSCREEN_URL,
      reasons: ['WORKERS'],
      justification: 'PDF.js reads the PDF the reader attaches, in a worker of its own.', // i18n-ok: for the browser's review, never shown
    });
    const deadline = Date.now() + FETCH_LIMITS.pdf.timeoutMs;
    try {
      return await followPage(url, {
        tabUrl,
        watch,
        hop: async (u, { credentials, redirect }) => {
          const reply = await chrome.runtime.sendMessage({ kind: 'pdf.read', url: u, credentials, redirect, deadline, maxFigures });
          if (!reply?.ok) throw codeError(reply?.error?.code ?? 'pdf_unreadable', pdfErrorMessage(reply?.error));
          return reply.result;
        },
      });
    } catch (e) {
      throw worded(e);
    } finally {
      await chrome.offscreen.closeDocument().catch(() => {});
    }
  }

  return {
    /** One read at a time (one offscreen document per extension). */
    read(url, { maxFigures = DEFAULT_MAX_FIGURES, tabUrl = '' } = {}) {
      const run = busy.then(() => readOnce(url, maxFigures, tabUrl));
      busy = run.catch(() => {});
      return run;
    },
  };
}

/**
 * The words for the offscreen reader's error (offscreen/pdf.js: `{code, message, reason, values}`),
 * in the UI language: the offscreen document has no chrome.i18n, so the worker says it.
 * @param {{message?: string, reason?: string, values?: Array<string|number>} | undefined} error
 */
export function pdfErrorMessage(error) {
  const v = Array.isArray(error?.values) ? error.values : [];
  const num = (n) => (Number.isFinite(Number(n)) ? formatNumber(Number(n)) : String(n ?? '?'));
  switch (error?.reason) {
    case 'download_failed':
      return t('attachPdfDownloadFailed', String(v[0] ?? ''));
    case 'download_http':
      return t('attachPdfDownloadHttp', String(v[0] ?? ''));
    case 'too_large_declared':
      return t('attachPdfTooLargeDeclared', num(v[0]), num(v[1]));
    case 'too_large':
      return t('attachPdfTooLarge', num(v[0]));
    case 'not_pdf':
      return t('attachPdfNotPdf', String(v[0] ?? ''));
    case undefined:
    case null:
    case '':
      return error?.message ?? t('attachPdfNoAnswer');
    default:
      return pageFetchMessage(error); // a rule of lib/page-fetch.js refused it, or the time ran out
  }
}

/**
 * The `## Figures` section of an attach with pictures (storage-model §2.5): one explanatory line,
 * then `N. <caption>` in picture order, a missing caption written `Figure on page <page>` (`?`
 * when the page is not known). The host reads these as the pictures' labels. '' for no pictures.
 * @param {Array<{caption?: string, page?: number}>} figures
 */
export function figuresSection(figures) {
  if (!figures.length) return '';
  const lines = figures.map((f, i) => {
    const caption = String(f.caption ?? '').replace(/\s+/g, ' ').trim();
    return `${i + 1}. ${caption || `Figure on page ${Number.isInteger(f.page) ? f.page : '?'}`}`;
  });
  return `## Figures\nThe pictures attached with this text, in order:\n${lines.join('\n')}`; // i18n-ok: attach text for the model, read by the host (storage-model §2.5)
}

/**
 * `history.attach` arguments for a PDF read by offscreen/pdf.js.
 * @param {object} pdf the reader's result
 * @param {{url: string, tabTitle?: string, limits?: object}} o the PDF's URL, the tab's title and
 *   `host.hello`'s limits (the per-turn caps)
 */
export function pdfAttachArgs(pdf, { url, tabTitle = '', limits = null }) {
  const clean = redactUrl(url);
  const one = (v) => String(v ?? '').replace(/\s+/g, ' ').trim();
  let file = '';
  try {
    file = decodeURIComponent(new URL(url).pathname.split('/').pop() || '');
  } catch {
    file = '';
  }
  const title = one(pdf.info?.title) || one(tabTitle) || file || clean;
  const caps = turnCaps(limits);
  const figures = pdf.figures ?? [];
  const picked = pickTurnImages(figures.map((f) => f.dataUrl), { caps });
  const keptFigures = figures.filter((_, i) => picked.reasons[i] === null);
  const kept = keptFigures.length;
  const found = Math.max(Number(pdf.figuresFound) || 0, figures.length);
  const line = (label, v) => (one(v) ? `${label}: ${one(v)}\n` : '');
  let header = line('Author', pdf.info?.author) + line('Subject', pdf.info?.subject) + line('Keywords', pdf.info?.keywords) + line('Created', pdf.info?.created); // i18n-ok: attach header for the model (storage-model §2.4)
  const read = pdf.pagesRead < pdf.numPages ? `${pdf.pagesRead} of ${pdf.numPages} read (the rest is over the size Keepsake sends)` : `${pdf.numPages}`; // i18n-ok: attach header for the model (storage-model §2.4)
  header += `Pages: ${read}\n`; // i18n-ok: attach header for the model
  if (found) {
    const pages = keptFigures.map((f) => f.page);
    const where = pages.length ? ` (pages ${[...new Set(pages)].join(', ')})` : '';
    // attach header lines for the model (storage-model §2.4), in English like the rest of the header
    header += kept === found ? `Figures: ${kept}, after the text${where}\n` : `Figures: ${kept} of ${found} attached, after the text${where}; the per-turn picture limits hold the rest\n`; // i18n-ok: attach header for the model
  }
  const section = kept ? `\n\n${figuresSection(keptFigures)}` : '';
  const body = String(pdf.text ?? '').slice(0, MAX_PDF_CHARS - section.length) + section;
  const args = { ctx: { url: clean, title, mode: 'pdf', header, body }, paper: true };
  if (kept) {
    args.images = picked.images;
    args.placement = 'end';
  }
  return args;
}

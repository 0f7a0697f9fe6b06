// The offscreen document that reads PDFs (README "Reading PDFs"): Mozilla's PDF.js (pinned in
// vendor/package.json, copied into extension/vendor/pdfjs/) parses the file in its own worker.
// The service worker cannot run PDF.js (no workers, no dynamic import there), so it opens this
// page with chrome.offscreen (reason WORKERS), asks `{kind: 'pdf.read', url, credentials,
// redirect, deadline, maxFigures}` for each hop of the fetch and closes it again
// (background/pdf-attach.js). The bytes are fetched here by lib/page-fetch.js's `fetchOnce` with
// what the worker chose (cookies only for the tab's own origin, never following a redirect); the
// worker runs the other rules (redirects, the server's address: `followPage`). The document is
// never visible, so nothing here may wait for requestAnimationFrame (pages are rendered with
// intent 'print').
//
// Answer: `{ok: true, result}` with
//   result = {url,                       the address the bytes came from
//             numPages, pagesRead, info: {title, author, subject, keywords, created},
//             text,                      every page's text in reading order, `[Page N]` before each
//             figures: [{page, dataUrl, width, height}],   raster figures, in page order, as JPEG
//             figuresFound, truncated}
//   or result = {redirect: string|null}  a redirect answer (null: its target is hidden, opaqueredirect)
// or `{ok: false, error: {code, message, reason, values}}` (`pdf_unreadable`, `fetch_too_large`,
// `fetch_failed`, `fetch_refused`): `reason` and `values` say what went wrong and the worker words
// it in the UI language (background/pdf-attach.js `pdfErrorMessage`; an offscreen document has no
// chrome.i18n), `message` is the same without words, for logs.

import { getDocument, GlobalWorkerOptions, OPS, Util } from '../vendor/pdfjs/pdf.min.mjs';
import { FETCH_LIMITS, fetchOnce, PageFetchError } from '../lib/page-fetch.js';

GlobalWorkerOptions.workerSrc = chrome.runtime.getURL('vendor/pdfjs/pdf.worker.min.mjs');

/** Text stops growing at this many characters (the attach text is cut there anyway). */
const MAX_TEXT_CHARS = 3_000_000;
/** Images smaller than this (PDF points, 1/72 in) on either side are icons, rules or bullets. */
const MIN_FIGURE_POINTS = 48;
/** A figure is rendered with its longest side at most this many pixels. */
const FIGURE_MAX_PX = 1024;

/** A page's text in reading order: PDF.js's items, a line break where it ends a line or the baseline moves. */
function pageText(content) {
  let out = '';
  let lastY = null;
  for (const item of content.items) {
    if (typeof item.str !== 'string') continue; // marked-content boundaries
    const y = item.transform?.[5];
    if (lastY !== null && typeof y === 'number' && Math.abs(y - lastY) > Math.max(2, (item.height || 0) * 0.5) && !out.endsWith('\n')) out += '\n';
    out += item.str;
    if (item.hasEOL) out += '\n';
    if (typeof y === 'number') lastY = y;
  }
  return out
    .split('\n')
    .map((l) => l.replace(/[^\S\n]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/**
 * Where the page paints raster images: their boxes in PDF user space, from the operator list
 * (the current transformation matrix followed through save/restore, cm and form XObjects; an
 * image fills the unit square of the matrix it is painted with).
 */
function imageBoxes(opList) {
  const boxes = [];
  let ctm = [1, 0, 0, 1, 0, 0];
  const stack = [];
  const { fnArray, argsArray } = opList;
  for (let i = 0; i < fnArray.length; i++) {
    const fn = fnArray[i];
    const args = argsArray[i];
    if (fn === OPS.save) stack.push(ctm);
    else if (fn === OPS.restore) ctm = stack.pop() ?? ctm;
    else if (fn === OPS.transform) ctm = Util.transform(ctm, args);
    else if (fn === OPS.paintFormXObjectBegin) {
      stack.push(ctm);
      if (Array.isArray(args?.[0]) || ArrayBuffer.isView(args?.[0])) ctm = Util.transform(ctm, Array.from(args[0]));
    } else if (fn === OPS.paintFormXObjectEnd) ctm = stack.pop() ?? ctm;
    else if (fn === OPS.paintImageXObject || fn === OPS.paintInlineImageXObject || fn === OPS.paintImageMaskXObject) {
      const xs = [];
      const ys = [];
      for (const [u, v] of [[0, 0], [1, 0], [0, 1], [1, 1]]) {
        xs.push(ctm[0] * u + ctm[2] * v + ctm[4]);
        ys.push(ctm[1] * u + ctm[3] * v + ctm[5]);
      }
      const box = { x0: Math.min(...xs), y0: Math.min(...ys), x1: Math.max(...xs), y1: Math.max(...ys) };
      if (box.x1 - box.x0 >= MIN_FIGURE_POINTS && box.y1 - box.y0 >= MIN_FIGURE_POINTS) boxes.push(box);
    }
  }
  return boxes;
}

/** The page rendered once, each figure box cut out of it as a JPEG data URL. */
async function renderFigures(page, boxes) {
  const longest = Math.max(...boxes.map((b) => Math.max(b.x1 - b.x0, b.y1 - b.y0)));
  const scale = Math.min(3, Math.max(1, FIGURE_MAX_PX / longest));
  const viewport = page.getViewport({ scale });
  const canvas = document.createElement('canvas');
  canvas.width = Math.ceil(viewport.width);
  canvas.height = Math.ceil(viewport.height);
  // intent 'print': PDF.js then draws without requestAnimationFrame, which never fires in an
  // offscreen document (it is never visible)
  await page.render({ canvas, viewport, intent: 'print' }).promise;
  const out = [];
  for (const b of boxes) {
    const [ax, ay] = viewport.convertToViewportPoint(b.x0, b.y0);
    const [bx, by] = viewport.convertToViewportPoint(b.x1, b.y1);
    const x = Math.max(0, Math.floor(Math.min(ax, bx)));
    const y = Math.max(0, Math.floor(Math.min(ay, by)));
    const w = Math.min(canvas.width, Math.ceil(Math.max(ax, bx))) - x;
    const h = Math.min(canvas.height, Math.ceil(Math.max(ay, by))) - y;
    if (w < 2 || h < 2) continue;
    const crop = document.createElement('canvas');
    crop.width = w;
    crop.height = h;
    crop.getContext('2d').drawImage(canvas, x, y, w, h, 0, 0, w, h);
    out.push({ dataUrl: crop.toDataURL('image/jpeg', 0.9), width: w, height: h });
  }
  canvas.width = 0; // let the page's pixels go at once
  return out;
}

/** A PDF date (`D:20261130071500Z`) as `2026-11-30`, or ''. */
function pdfDate(s) {
  const m = /^D:(\d{4})(\d{2})?(\d{2})?/.exec(String(s || ''));
  return m ? [m[1], m[2], m[3]].filter(Boolean).join('-') : '';
}

/**
 * One request for the PDF at `url` (lib/page-fetch.js `fetchOnce`: the credentials and redirect
 * mode the worker chose, the 96 MiB cap, the time left until `deadline`), then read. A redirect
 * answer is handed back as it is (`{redirect}`): the worker decides whether to follow it.
 * @param {{url: string, credentials?: 'include'|'omit', redirect?: 'manual'|'follow', deadline?: number, maxFigures?: number}} req
 */
export async function readPdf({ url, credentials = 'omit', redirect = 'manual', deadline = Date.now() + FETCH_LIMITS.pdf.timeoutMs, maxFigures = 8 }) {
  const got = await fetchOnce(url, { kind: 'pdf', credentials, redirect, signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())) });
  if ('redirect' in got) return { redirect: got.redirect };
  const data = got.bytes;
  const task = getDocument({ data, verbosity: 0 });
  let doc;
  try {
    doc = await task.promise;
  } catch (e) {
    await task.destroy().catch(() => {});
    throw new PageFetchError('pdf_unreadable', 'not_pdf', [String(e?.message ?? e)]);
  }
  try {
    const meta = await doc.getMetadata().catch(() => null);
    const info = meta?.info ?? {};
    const str = (v) => (typeof v === 'string' ? v.trim() : '');
    const pages = [];
    const figures = [];
    let figuresFound = 0;
    let chars = 0;
    let truncated = false;
    for (let n = 1; n <= doc.numPages; n++) {
      if (chars >= MAX_TEXT_CHARS) {
        truncated = true;
        break;
      }
      const page = await doc.getPage(n);
      const text = pageText(await page.getTextContent());
      pages.push(`[Page ${n}]\n${text}`);
      chars += text.length + 10;
      const boxes = imageBoxes(await page.getOperatorList());
      figuresFound += boxes.length;
      const room = maxFigures - figures.length;
      if (room > 0 && boxes.length) {
        for (const f of await renderFigures(page, boxes.slice(0, room))) figures.push({ page: n, ...f });
      }
      page.cleanup();
    }
    return {
      url: got.url,
      numPages: doc.numPages,
      pagesRead: pages.length,
      info: { title: str(info.Title), author: str(info.Author), subject: str(info.Subject), keywords: str(info.Keywords), created: pdfDate(info.CreationDate) },
      text: pages.join('\n\n'),
      figures,
      figuresFound,
      truncated,
    };
  } finally {
    await task.destroy().catch(() => {});
  }
}

chrome.runtime.onMessage.addListener((msg, sender, sendResponse) => {
  // only this extension's service worker asks (no tab, no page of ours)
  if (msg?.kind !== 'pdf.read' || sender?.id !== chrome.runtime.id || sender.tab) return false;
  readPdf(msg).then(
    (result) => sendResponse({ ok: true, result }),
    (e) =>
      sendResponse({
        ok: false,
        error: {
          code: e?.code ?? 'pdf_unreadable',
          message: String(e?.message ?? e),
          // an error of PDF.js itself (not a PageFetchError) is `not_pdf` with its own message
          reason: e instanceof PageFetchError ? e.reason : 'not_pdf',
          values: e instanceof PageFetchError ? e.values : [String(e?.message ?? e)],
        },
      }),
  );
  return true;
});

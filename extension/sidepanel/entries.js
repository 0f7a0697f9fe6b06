// What the panel shows of a stored history entry (storage-model §2): parts, images, attach chips.
// No DOM, no chrome.* — tested in node. The rules the worker shares (entryText, attach detection,
// newestVideoSrc, image references) are in lib/entries.js.

import { attachHeader, entryText, isTextPart } from '../lib/entries.js';

const isImagePart = (p) => p && typeof p === 'object' && p.type === 'image_url';

/** URL of an image part (object or bare-string form), or ''. */
function imagePartUrl(part) {
  if (!isImagePart(part)) return '';
  const iu = part.image_url;
  if (typeof iu === 'string') return iu;
  if (iu && typeof iu.url === 'string') return iu.url;
  return '';
}

/** Image URLs of an entry, in part order. */
export function entryImages(entry) {
  if (!entry || !Array.isArray(entry.content)) return [];
  return entry.content.filter(isImagePart).map(imagePartUrl).filter(Boolean);
}

/** A part's `originalUrl` (storage-model §12.8, §12.19: the original image a thumbnail or a label stands for), or ''. */
export function partOriginalUrl(part) {
  return part && typeof part === 'object' && typeof part.originalUrl === 'string' ? part.originalUrl : '';
}

/**
 * Display parts in order: consecutive text parts merged, images kept in place.
 * → [{kind: 'text', text} | {kind: 'image', url, n, original?} | {kind: 'label', text, n, original}]
 * (n = 1-based image number in the entry). `original` is the part's `originalUrl`: the image the
 * bubble's thumbnail stands for, or, for a label text part (`[image 2]`) that replaced an image, that
 * image; the lightbox shows it.
 */
export function displayParts(entry) {
  if (!entry || typeof entry !== 'object') return [];
  const c = entry.content;
  if (typeof c === 'string') return c ? [{ kind: 'text', text: c }] : [];
  if (!Array.isArray(c)) return [];
  const out = [];
  let n = 0;
  for (const p of c) {
    const original = partOriginalUrl(p);
    if (isTextPart(p) && original) {
      n += 1;
      out.push({ kind: 'label', text: p.text, n, original });
    } else if (isTextPart(p)) {
      const last = out[out.length - 1];
      if (last && last.kind === 'text') last.text += '\n' + p.text;
      else out.push({ kind: 'text', text: p.text });
    } else if (isImagePart(p)) {
      const url = imagePartUrl(p);
      n += 1;
      if (url) out.push(original ? { kind: 'image', url, n, original } : { kind: 'image', url, n });
    }
  }
  return out;
}

/**
 * What an attach chip shows: {attachId, title, url, mode, chars, summarized, images}.
 * chars = length of the body part (the page text) when the §2.4 header can be found, else of the whole text.
 */
export function describeAttach(entry) {
  const text = entryText(entry); // §11.2: measures use all text parts
  const { url, title, mode, lines } = attachHeader(entry);
  let chars = text.length;
  const modeIdx = lines.findIndex((l) => l.startsWith('Mode: ')); // i18n-ok: attach header field names
  if (modeIdx >= 0) {
    const sepIdx = lines.findIndex((l, i) => i > modeIdx && l === '---');
    if (sepIdx >= 0) {
      let bodyLines = lines.slice(sepIdx + 1);
      if (bodyLines.length && bodyLines[0] === '') bodyLines = bodyLines.slice(1);
      chars = bodyLines.join('\n').length;
    }
  }
  return {
    attachId: typeof entry.attachId === 'string' ? entry.attachId : '',
    title,
    url,
    mode,
    chars,
    summarized: entry.summarized === true,
    images: entryImages(entry).length,
  };
}

/**
 * The size line of an attach chip: what the attach holds, in the words a reader uses. A screenshot
 * is its picture (its text is a placeholder, so no character count); a quote says so; a PDF's and
 * an article's pictures are figures.
 * @param {{mode: string, chars: number, images: number}} a describeAttach's result
 * @param {(n: number) => string} formatChars
 */
export function attachSize(a, formatChars) {
  const n = a.images || 0;
  if (a.mode === 'screenshot') return n > 1 ? `${n} pictures` : 'picture';
  const pictures = n ? `${n} ${a.mode === 'pdf' || a.mode === 'article' ? 'figure' : 'image'}${n === 1 ? '' : 's'}` : '';
  const what = a.mode === 'selection' ? `quote, ${formatChars(a.chars)}` : formatChars(a.chars);
  return [what, pictures].filter(Boolean).join(' · ');
}

/** Index of the last assistant entry, or -1. */
export function lastAssistantIndex(entries) {
  for (let i = entries.length - 1; i >= 0; i--) if (entries[i] && entries[i].role === 'assistant') return i;
  return -1;
}


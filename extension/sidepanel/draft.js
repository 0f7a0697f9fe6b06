// Composer draft decisions. Pure: the panel stores the result under the UI-only
// chrome.storage.session key `composerDraft` (storage-model §9: UI-only keys use their own reads).
import { t } from '../lib/i18n.js';


export const DRAFT_KEY = 'composerDraft';
/** Images are persisted with the draft while their data URLs total at most this many chars. */
export const DRAFT_IMAGE_CHARS = 2_000_000;

const strings = (list) => (Array.isArray(list) ? list.filter((x) => typeof x === 'string' && x) : []);

/** What to write for a draft: null = remove the key (nothing worth keeping). */
export function draftToStore(draft, { maxImageChars = DRAFT_IMAGE_CHARS } = {}) {
  const text = typeof draft?.text === 'string' ? draft.text : '';
  const all = strings(draft?.images);
  const images = [];
  let total = 0;
  for (const url of all) {
    if (total + url.length > maxImageChars) continue;
    total += url.length;
    images.push(url);
  }
  if (!text.trim() && images.length === 0) return null;
  return { text, images, droppedImages: all.length - images.length };
}

/** A stored draft read back, validated. */
export function draftFromStore(value) {
  if (!value || typeof value !== 'object') return { text: '', images: [] };
  return { text: typeof value.text === 'string' ? value.text : '', images: strings(value.images) };
}

/**
 * After the worker confirmed a send: what stays in the composer. The panel keeps the composer usable
 * while a send is in flight, so anything typed or added meanwhile survives; what was sent goes.
 */
export function draftAfterSend(sent, current) {
  const sentText = typeof sent?.text === 'string' ? sent.text : '';
  const curText = typeof current?.text === 'string' ? current.text : '';
  let text;
  if (curText === sentText) text = '';
  else if (sentText && curText.startsWith(sentText)) text = curText.slice(sentText.length).replace(/^\s+/, '');
  else text = curText;
  const sentImages = new Set(strings(sent?.images));
  const images = strings(current?.images).filter((u) => !sentImages.has(u));
  return { text, images };
}

/** Whether a draft can be sent: some non-blank text or at least one image. */
export function canSend(draft) {
  return (typeof draft?.text === 'string' && draft.text.trim() !== '') || strings(draft?.images).length > 0;
}

/** Why the attach-time gate (lib/caps.js, storage-model §6.4) refused an image, for the composer note. */
function refusalText(reason, caps) {
  const mb = caps ? (caps.budget / (1024 * 1024)).toFixed(0) : '?';
  switch (reason) {
    case 'count': return t('draftTooMany', caps?.maxImages);
    case 'size': return t('draftTooBig', mb);
    case 'budget': return t('draftOverBudget', mb);
    case 'shape': return t('draftNotImage');
    default: return t('draftOverLimit');
  }
}

/** One note for several refusals: the distinct reasons, most recent last. */
export function refusalNote(reasons, caps) {
  const list = (Array.isArray(reasons) ? reasons : []).filter(Boolean);
  if (list.length === 0) return '';
  const distinct = [...new Set(list)];
  const head = list.length === 1 ? '' : t('draftNotAddedN', list.length);
  return head + distinct.map((r) => refusalText(r, caps)).join(' ');
}

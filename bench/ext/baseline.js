// The in-browser way (the benchmark's baseline; test build only, never shipped): the same jobs
// Keepsake does, done in the service worker with `chrome.storage.local` for persistence, plain
// JavaScript for the request logic, `createImageBitmap` + `OffscreenCanvas` + `convertToBlob` for
// thumbnails, and a digest scan for search. The rules mirror the host's (storage-model §4.1 trim,
// §6.2–§6.5 images, §7.1 aging, §8.2 the chat body) so both ways produce the same body.

import { TURN_SETTING_KEYS } from '../background/settings-memory.js';
import { bodyFieldsFor, isBlank, pickProvider } from '../background/provider.js';
import { parseDataUrl } from '../background/image-tokens.js';
import { stripChoiceBlocks } from '../background/choices.js';
import { entryText, isAttachEntry } from '../lib/entries.js';
import { streamReply } from '../lib/llm.js';

const local = () => chrome.storage.local;

const MAX_HISTORY = 60;
const MAX_TOTAL_CHARS = 300_000;
const TURN_MAX_IMAGES = 8;
const TURN_IMAGE_BUDGET = 3 * 1024 * 1024;
/** Byte budget of the live history's images, in URL chars (§6.5). */
export const IMAGE_BUDGET = 8 * 1024 * 1024;
const THUMB_MAX_EDGE = 480;
const THUMB_PASS_BYTES = 65_536;
const THUMB_QUALITY = 0.82;
const AGE_MIN_USER_TURNS_AFTER = 3;
const AGE_MIN_CHARS = 8_000;
const AGED_HEAD = '[Attached page context trimmed to keep replies fast — sent in full in an earlier turn]';
const SIZE_LINE_TAIL = 'chars. If you need exact details from this page, ask the user to re-attach it.';

// ---- entries ----------------------------------------------------------------------------------

const isTextPart = (p) => p && (p.type === 'text' || p.type === 'input_text') && typeof p.text === 'string';
const isImagePart = (p) => p?.type === 'image_url';
const imageUrl = (p) => (typeof p.image_url === 'string' ? p.image_url : p.image_url?.url);
const partsOf = (e) => (Array.isArray(e?.content) ? e.content : []);
const isImageBearing = (e) => partsOf(e).some(isImagePart);

/** contentChars (§2.1): text only, image data never counts. */
export function contentChars(e) {
  if (typeof e?.content === 'string') return e.content.length;
  return partsOf(e).filter(isTextPart).reduce((n, p) => n + p.text.length, 0);
}

/** The trim rule (§4.1), in place: the last 60 entries, then the oldest while over 300,000 chars. */
export function trim(history) {
  if (history.length > MAX_HISTORY) history.splice(0, history.length - MAX_HISTORY);
  let total = history.reduce((n, e) => n + contentChars(e), 0);
  while (total > MAX_TOTAL_CHARS && history.length > 1) total -= contentChars(history.shift());
  return history;
}

/** compactEntry (§6.2): image parts become `[image N]` text parts (figure labels when listed). */
export function compactEntry(e) {
  const text = partsOf(e).filter(isTextPart).map((p) => p.text).join('\n');
  const at = text.indexOf('## Figures');
  const labels = [];
  if (at >= 0) {
    for (const line of text.slice(at).split('\n')) {
      const m = /^(\d+)\.\s+(.+)$/.exec(line);
      if (m && m[2].trim()) labels.push(m[2].trim());
    }
  }
  let n = 0;
  const content = partsOf(e).map((p) => {
    if (!isImagePart(p)) return p;
    n++;
    return { type: 'text', text: `[${labels[n - 1] ?? `image ${n}`}]` };
  });
  return { ...e, content };
}

/** prepare (§6.3): seen image-bearing entries become labels; `imagesSeen` never leaves. */
function prepare(history) {
  return history.map((e) => {
    if (!('imagesSeen' in e)) return e;
    const { imagesSeen, ...rest } = e;
    return imagesSeen && isImageBearing(e) ? compactEntry(rest) : rest;
  });
}

/** age (§7.1): cold attach entries become a short stub. */
function age(history) {
  const newestAttach = history.findLastIndex(isAttachEntry);
  let usersAfter = 0;
  const out = new Array(history.length);
  for (let i = history.length - 1; i >= 0; i--) {
    const e = history[i];
    const text = isAttachEntry(e) ? entryText(e) : '';
    if (i === newestAttach || usersAfter < AGE_MIN_USER_TURNS_AFTER || text.length < AGE_MIN_CHARS) out[i] = e;
    else {
      const line = (k) => text.split('\n').find((l) => l.startsWith(k));
      const stub = [AGED_HEAD, line('Title: '), line('URL: '), `Original size: ~${text.length} ${SIZE_LINE_TAIL}`];
      out[i] = { ...e, content: stub.filter(Boolean).join('\n') };
    }
    if (e.role === 'user') usersAfter++;
  }
  return out;
}

/** History entries in the chat shape (§8.2): `{role, content}`, images only in user messages. */
function chatMessages(history) {
  const out = [];
  for (const e of history) {
    if (e.role !== 'user' && e.role !== 'assistant') continue;
    if (typeof e.content === 'string') {
      if (!isBlank(e.content)) out.push({ role: e.role, content: e.content });
      continue;
    }
    const parts = [];
    for (const p of partsOf(e)) {
      if (isTextPart(p)) {
        if (!isBlank(p.text)) parts.push({ type: 'text', text: p.text });
      } else if (isImagePart(p) && e.role === 'user' && typeof imageUrl(p) === 'string') {
        parts.push({ type: 'image_url', image_url: { url: imageUrl(p) } });
      }
    }
    if (parts.length) out.push({ role: e.role, content: parts });
  }
  return out;
}

/**
 * The chat-completions body for a turn, built from the stored history the way the host builds it
 * (aging, labels for seen images, the per-turn image caps).
 * @param {object[]} history
 * @param {{text: string, images?: string[], systemPrompt?: string, bodyFields?: object}} turn
 * @returns {{body: object, userEntry: object}}
 */
export function buildChatBody(history, { text, images = [], systemPrompt, bodyFields = {} }) {
  const kept = [];
  let used = 0;
  let dropped = 0;
  for (const u of images) {
    const ok = typeof u === 'string' && /^(data:image\/|https?:\/\/)/i.test(u.trim());
    if (!ok || kept.length >= TURN_MAX_IMAGES || used + u.length > TURN_IMAGE_BUDGET) dropped++;
    else {
      kept.push(u);
      used += u.length;
    }
  }
  let userText = text;
  if (dropped) userText += `\n\n（注：另有 ${dropped} 张图片因超出单条消息大小上限未能随附。）`;
  const imageParts = kept.map((url) => ({ type: 'image_url', image_url: { url } }));
  const userEntry = kept.length
    ? { role: 'user', content: [{ type: 'text', text: userText || '(no instruction)' }, ...imageParts] }
    : { role: 'user', content: userText || '(no instruction)' };
  const turnText = userText || (kept.length ? 'Describe these images.' : '(no instruction; just respond to the page context)');
  const turn = kept.length
    ? { role: 'user', content: [...(isBlank(turnText) ? [] : [{ type: 'text', text: turnText }]), ...imageParts] }
    : { role: 'user', content: turnText };
  const messages = [];
  if (!isBlank(systemPrompt)) messages.push({ role: 'system', content: systemPrompt });
  messages.push(...chatMessages(prepare(age(history))), turn);
  return { body: { ...bodyFields, messages }, userEntry };
}

// ---- storage ----------------------------------------------------------------------------------

/** The stored history (`[]` when none). */
export async function readHistory() {
  const { history = [] } = await local().get('history');
  return history;
}

/** Replace the stored history. */
export function writeHistory(history) {
  return local().set({ history });
}

/**
 * Append one entry the in-browser way: read, push, trim, write (a page or a restarted worker may
 * have changed the list since it was last read, so it is read again).
 * @param {object} entry
 * @param {{markImagesSeen?: boolean}} [o] also stamp every image-bearing entry seen (§6.1)
 */
export async function appendEntry(entry, { markImagesSeen = false } = {}) {
  const history = await readHistory();
  history.push(entry);
  if (markImagesSeen) for (const e of history) if (isImageBearing(e)) e.imagesSeen = true;
  trim(history);
  await writeHistory(history);
  return history.length;
}

/**
 * One chat turn the in-browser way, in the order turns.js runs it: settings, history, build,
 * append the user entry, stream the reply (lib/llm.js with `fetchImpl`), append the reply and
 * stamp the images it sent as seen.
 * @param {{text: string, images?: string[], fetchImpl: typeof fetch}} o
 * @returns {Promise<{index: number}>}
 */
export async function sendTurn({ text, images = [], fetchImpl }) {
  const settings = await local().get([...TURN_SETTING_KEYS]);
  const picked = pickProvider(settings);
  const history = await readHistory();
  const { body, userEntry } = buildChatBody(history, {
    text,
    images,
    systemPrompt: settings.systemPrompt,
    bodyFields: bodyFieldsFor(picked.provider),
  });
  history.push(userEntry);
  await writeHistory(trim(history));
  const reply = await streamReply({ provider: picked.provider, body, fetchImpl, onDelta: () => {}, onEvent: () => {} });
  const sentImages = body.messages.some((m) => Array.isArray(m.content) && m.content.some(isImagePart));
  const entry = {
    role: 'assistant',
    content: stripChoiceBlocks(reply.text).trim(),
    providerLabel: picked.label,
    providerKey: picked.key,
  };
  return { index: (await appendEntry(entry, { markImagesSeen: sentImages })) - 1 };
}

// ---- images -----------------------------------------------------------------------------------

/** Standard base64 of bytes. */
export function bytesToBase64(bytes) {
  if (typeof bytes.toBase64 === 'function') return bytes.toBase64();
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** Bytes of standard base64. */
export function base64ToBytes(b64) {
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(b64);
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/**
 * A 480-px JPEG thumbnail (q 0.82, on white) of an image data URL; an image already within 480 px
 * and 64 KiB comes back unchanged (§6.5).
 * @param {string} url
 * @returns {Promise<string>} a data URL
 */
export async function thumbnail(url) {
  const img = parseDataUrl(url);
  if (!img) throw new Error('not an image data URL');
  const bytes = base64ToBytes(img.data);
  const bitmap = await createImageBitmap(new Blob([bytes], { type: img.mime }));
  try {
    const { width, height } = bitmap;
    if (Math.max(width, height) <= THUMB_MAX_EDGE && bytes.length <= THUMB_PASS_BYTES) return url;
    const scale = Math.min(1, THUMB_MAX_EDGE / Math.max(width, height));
    const w = Math.max(1, Math.round(width * scale));
    const h = Math.max(1, Math.round(height * scale));
    const canvas = new OffscreenCanvas(w, h);
    const ctx = canvas.getContext('2d');
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, w, h);
    ctx.drawImage(bitmap, 0, 0, w, h);
    const blob = await canvas.convertToBlob({ type: 'image/jpeg', quality: THUMB_QUALITY });
    return `data:image/jpeg;base64,${bytesToBase64(new Uint8Array(await blob.arrayBuffer()))}`;
  } finally {
    bitmap.close();
  }
}

/** URL chars of an entry's images. */
export function imageChars(e) {
  return partsOf(e).filter(isImagePart).reduce((n, p) => n + (imageUrl(p)?.length ?? 0), 0);
}

/**
 * The byte-budget pass (§6.5), in place: oldest image-bearing entries first, never the newest,
 * until the images fit `budget` URL chars; their pictures become thumbnails (labels when a picture
 * cannot be decoded). Entries already thumbnailed are stamped `thumbnailed` and kept as they are
 * (the host knows its thumbnails from their stored metadata and does not decode them again).
 * @param {object[]} history
 * @param {number} [budget]
 * @returns {Promise<number>} entries rewritten
 */
export async function boundImages(history, budget = IMAGE_BUDGET) {
  const bearing = history.filter(isImageBearing);
  let total = bearing.reduce((n, e) => n + imageChars(e), 0);
  let rewritten = 0;
  for (const e of bearing.slice(0, -1)) {
    if (total <= budget) break;
    if (e.thumbnailed) continue;
    e.thumbnailed = true;
    const before = imageChars(e);
    try {
      const content = [];
      for (const p of e.content) {
        content.push(isImagePart(p) ? { type: 'image_url', image_url: { url: await thumbnail(imageUrl(p)) } } : p);
      }
      e.content = content;
    } catch {
      e.content = compactEntry(e).content;
    }
    total -= before - imageChars(e);
    rewritten++;
  }
  return rewritten;
}

/**
 * Attach one screenshot the in-browser way: read, push the attach entry, bound, write.
 * @param {object} entry
 * @returns {Promise<number>} entries rewritten by the bound
 */
export async function attachAndBound(entry) {
  const history = await readHistory();
  history.push(entry);
  trim(history);
  const rewritten = await boundImages(history);
  await writeHistory(history);
  return rewritten;
}

// ---- search -----------------------------------------------------------------------------------

/**
 * Keep a lower-cased digest of each session's text in storage (`digest_<id>`) plus an index
 * (`digestIndex`), written in batches.
 * @param {{id: string, name: string, createdAt: number, pinned: boolean, entries: object[]}[]} sessions
 */
export async function storeDigests(sessions, { batch = 25 } = {}) {
  const index = [];
  for (let i = 0; i < sessions.length; i += batch) {
    const items = {};
    for (const s of sessions.slice(i, i + batch)) {
      items[`digest_${s.id}`] = s.entries.map(entryText).join('\n').toLowerCase();
      index.push({ id: s.id, name: s.name, createdAt: s.createdAt, pinned: s.pinned });
    }
    await local().set(items);
  }
  await local().set({ digestIndex: index });
}

/**
 * Read every digest back (what a restarted worker has to do before it can search).
 * @returns {Promise<{row: object, digest: string}[]>}
 */
export async function loadDigests() {
  const { digestIndex = [] } = await local().get('digestIndex');
  const got = await local().get(digestIndex.map((r) => `digest_${r.id}`));
  return digestIndex.map((row) => ({ row, digest: got[`digest_${row.id}`] ?? '' }));
}

function snippetAt(text, at, len) {
  const before = [...text.slice(Math.max(0, at - 160), at)].slice(-40).join('');
  const after = [...text.slice(at + len, at + len + 320)].slice(0, 80).join('');
  const cutHead = at - before.length > 0;
  const cutTail = at + len + after.length < text.length;
  const s = `${before}${text.slice(at, at + len)}${after}`.replace(/\s+/g, ' ');
  return `${cutHead ? '…' : ''}${s}${cutTail ? '…' : ''}`;
}

/**
 * Search the digests like `sessions.list({query, limit})`: case-insensitive substring, name hits
 * marked `contentMatch: false`, content hits with a snippet around the first hit; pinned first,
 * then newest first. Like the host it answers one page: every digest is searched (for `total`),
 * and snippets are cut for the first `limit` rows only.
 * @param {{row: object, digest: string}[]} digests
 * @param {string} query
 * @param {{limit?: number}} [opts]
 * @returns {{rows: object[], total: number}}
 */
export function digestSearch(digests, query, { limit = Infinity } = {}) {
  const q = query.trim().toLowerCase();
  const hits = [];
  for (const { row, digest } of digests) {
    if (row.name.toLowerCase().includes(q)) hits.push({ row, at: -1, digest });
    else {
      const at = digest.indexOf(q);
      if (at >= 0) hits.push({ row, at, digest });
    }
  }
  hits.sort((a, b) => Number(b.row.pinned) - Number(a.row.pinned) || b.row.createdAt - a.row.createdAt);
  const rows = hits.slice(0, limit).map(({ row, at, digest }) => (at < 0
    ? { ...row, contentMatch: false }
    : { ...row, contentMatch: true, snippet: snippetAt(digest, at, q.length) }));
  return { rows, total: hits.length };
}

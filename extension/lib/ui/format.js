// Display formatting shared by the side panel and the options page. Pure. Words come from the
// catalogue (lib/i18n.js); numbers and dates shown to people follow the UI language.

import { t, formatNumber, formatDateTime } from '../i18n.js';

/**
 * 1234567 → "1,234,567" whatever the locale (storage-model §1 "grouped"): for text the host or the
 * model reads. Numbers shown to people use `formatNumber` (lib/i18n.js).
 */
export function grouped(n) {
  const v = Math.trunc(Number(n) || 0);
  const sign = v < 0 ? '-' : '';
  return sign + String(Math.abs(v)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

export function formatChars(n) {
  const v = Math.trunc(Number(n) || 0);
  return v === 1 ? t('uiCharsOne', formatNumber(v)) : t('uiCharsMany', formatNumber(v));
}

/** Host of a URL for compact display, or the input when it does not parse. */
export function shortUrl(url) {
  try {
    const u = new URL(url);
    const path = u.pathname === '/' ? '' : u.pathname;
    const s = u.host + path;
    return s.length > 60 ? s.slice(0, 59) + '…' : s;
  } catch {
    return typeof url === 'string' ? url : '';
  }
}

/** Session timestamp in the UI language, 24-hour clock: "14:05" today, else "Jan 31, 2026, 14:05". */
export function formatWhen(ms, now = Date.now()) {
  const d = new Date(Number(ms) || 0);
  const n = new Date(now);
  const sameDay = d.getFullYear() === n.getFullYear() && d.getMonth() === n.getMonth() && d.getDate() === n.getDate();
  return sameDay
    ? formatDateTime(d.getTime(), { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
    : formatDateTime(d.getTime(), { dateStyle: 'medium', timeStyle: 'short', hourCycle: 'h23' });
}

/**
 * Why chats were skipped: `3 already here`, `1 unreadable: see the warnings`, both, or ''.
 * @param {number} skipped
 * @param {number} already the ones the host has (its copy wins)
 */
export function skippedWhy(skipped, already) {
  if (!skipped) return '';
  const here = Math.min(already, skipped);
  const bad = skipped - here;
  const bits = [];
  if (here) bits.push(here === 1 ? t('uiAlreadyHereOne', formatNumber(here)) : t('uiAlreadyHereMany', formatNumber(here)));
  if (bad) bits.push(bad === 1 ? t('uiUnreadableOne', formatNumber(bad)) : t('uiUnreadableMany', formatNumber(bad)));
  return bits.join(', ');
}

/** storage.import result → short human lines (PROTOCOL.md storage.import). */
export function describeImportResult(r) {
  if (!r || typeof r !== 'object') return [t('uiImportNoResult')];
  const lines = [];
  const n = (x) => Number(x) || 0;
  const f = (x) => formatNumber(n(x));
  const why = skippedWhy(n(r.sessionsSkipped), n(r.sessionsAlreadyHere));
  lines.push(why ? t('uiImportChatsWhy', f(r.sessionsImported), f(r.sessionsSkipped), why) : t('uiImportChats', f(r.sessionsImported), f(r.sessionsSkipped)));
  if (n(r.settingsImported) || n(r.settingsSkipped)) lines.push(t('uiImportSettings', f(r.settingsImported), f(r.settingsSkipped)));
  else lines.push(t('uiImportSettingsNone'));
  const live = {
    replaced: () => t('uiImportLiveReplaced'),
    archived: () => t('uiImportLiveArchived'),
    unchanged: () => t('uiImportLiveUnchanged'),
    absent: () => t('uiImportLiveAbsent'),
  }[r.live];
  if (live) lines.push(live());
  lines.push(t('uiImportImages', f(r.imagesStored)));
  if (n(r.overCap) > 0) lines.push(n(r.overCap) === 1 ? t('uiImportOverCapOne', f(r.overCap)) : t('uiImportOverCapMany', f(r.overCap)));
  const warnings = Array.isArray(r.warnings) ? r.warnings.filter((w) => typeof w === 'string') : [];
  for (const w of warnings.slice(0, 20)) lines.push(t('uiImportWarning', w));
  const more = warnings.length - 20;
  if (more > 0) lines.push(more === 1 ? t('uiImportMoreWarningsOne', formatNumber(more)) : t('uiImportMoreWarningsMany', formatNumber(more)));
  return lines;
}

/** A human label for chat.progress stages. */
export function progressText(ev) {
  const stage = ev && ev.stage;
  const label = {
    summary: () => t('uiProgressSummary'),
    rescue: () => t('uiProgressRescue'),
    bounding: () => t('uiProgressBounding'),
    continuation: () => t('uiProgressContinuation'),
  }[stage]?.() || t('uiProgressWorking');
  const total = Number(ev?.total) || 0;
  const done = Number(ev?.done) || 0;
  let s = label;
  if (total > 0) s += ` (${Math.min(done, total)}/${total})`;
  if (ev?.note) return `${s} — ${ev.note}`;
  return s + '…';
}

/** Bytes as people read a file's size: `306 KiB`, `2.0 MiB` (numbers in the UI language). */
export function sizeText(bytes) {
  const n = Number(bytes) || 0;
  return n >= 1024 * 1024
    ? `${formatNumber(n / (1024 * 1024), { minimumFractionDigits: 1, maximumFractionDigits: 1 })} MiB`
    : `${formatNumber(Math.round(n / 1024))} KiB`;
}

/**
 * The Host panel's size line from `host.status`: the whole, then the database file and its
 * write-ahead file (`keepsake.db-wal`: writes not yet merged into the database, which the host
 * merges when it closes — not a log of anything a person did), then the pictures.
 */
export function dbSizeText(st) {
  const db = Number(st?.sizes?.database) || 0;
  const wal = Number(st?.sizes?.wal) || 0;
  const images = Number(st?.counts?.images) || 0;
  return t('optDbSize', sizeText(db + wal), sizeText(db), sizeText(wal), formatNumber(images), sizeText(st?.imageBytes ?? 0));
}
